/* memcpy_cost.c — what the shim's memcpy costs a program's small copies (it is exported, so every
 * memcpy of a program under pinwheel goes through it: one comparison, then glibc's memmove).
 *   gcc -O2 bench/memcpy_cost.c -o memcpy_cost
 *   ./memcpy_cost 64 50000000; LD_PRELOAD=build/libpinwheel.so ./memcpy_cost 64 50000000
 * Prints ns per call; run the two interleaved a few times and compare medians. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
  size_t n = argc > 1 ? (size_t)atol(argv[1]) : 64;
  long iters = argc > 2 ? atol(argv[2]) : 50000000;
  char *a = malloc(n + 64), *b = malloc(n + 64);
  if (!a || !b) return 1;
  /* called through a pointer, so the compiler cannot inline or drop the copies */
  void *(*volatile copy)(void *, const void *, size_t) = memcpy;
  memset(b, 1, n + 64);
  double t = now();
  for (long i = 0; i < iters; i++)
    copy(a + (i & 7), b, n);
  t = now() - t;
  printf("memcpy of %zu B: %.2f ns/call\n", n, t * 1e9 / (double)iters);
  return a[3] == 1 ? 0 : 1;
}
