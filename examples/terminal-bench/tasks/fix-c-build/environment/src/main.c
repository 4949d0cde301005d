#include <stdio.h>
#include <stdlib.h>
#include "stats.h"

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: stats N...\n");
    return 2;
  }
  int count = argc - 1;
  int *values = malloc(sizeof *values * count);
  for (int i = 0; i < count; i++) values[i] = atoi(argv[i + 1]);
  printf("mean %.2f sd %.2f\n", mean(values, count), stddev(values, count));
  free(values);
  return 0;
}
