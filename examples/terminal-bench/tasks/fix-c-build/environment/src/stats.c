#include <math.h>
#include "stats.h"

double average(const int *values, int count) {
  double sum = 0;
  for (int i = 0; i < count; i++) sum += values[i];
  return sum / count;
}

double stddev(const int *values, int count) {
  double m = mean(values, count), squares = 0;
  for (int i = 0; i < count; i++) squares += (values[i] - m) * (values[i] - m);
  return sqrt(squares / count);
}
