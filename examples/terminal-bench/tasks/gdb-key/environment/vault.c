#include <stdio.h>
#include <stdlib.h>

/* Multiplicative hash: the check value the key leaves behind. */
static unsigned long check_of(unsigned long key) { return key * 0x9E3779B97F4A7C15UL; }

static int use_key(unsigned long key, const char *slot) {
  /* slot is NULL: the crash happens here, with key in this frame. */
  return slot[key % 7];
}

int main(void) {
  unsigned long key;
  FILE *random = fopen("/dev/urandom", "rb");
  if (!random || fread(&key, sizeof key, 1, random) != 1) return 1;
  fclose(random);
  FILE *check = fopen("/app/key.check", "w");
  if (!check) return 1;
  fprintf(check, "%016lx\n", check_of(key));
  fclose(check);
  return use_key(key, NULL);
}
