/* Instructions of a free and a malloc beyond the fast path: N rounds of
 * freeing a random block of a window of 256 and allocating one of a random
 * size in LO..HI in its place (a byte of each written). Run it under
 * callgrind for N and 2N rounds; the difference divided by N is one
 * round's cost, this loop's own instructions included (about 45: two draws of
 * bench_common.h's generator).
 *
 *   window N LO HI */
#include "bench_common.h"

int main(int argc, char **argv) {
  if (argc != 4) return 2;
  long n = atol(argv[1]);
  size_t lo = (size_t)atol(argv[2]), hi = (size_t)atol(argv[3]);
  if (n <= 0 || lo == 0 || hi < lo) return 2;
  enum { WINDOW = 256 };
  static unsigned char *slot[WINDOW];
  bench_rng rng = {1};
  for (long i = 0; i < n; i++) {
    unsigned k = (unsigned)(bench_next(&rng) % WINDOW);
    free(slot[k]);
    slot[k] = malloc(bench_range(&rng, lo, hi));
    if (slot[k] == NULL) return 1;
    slot[k][0] = (unsigned char)i;
  }
  for (unsigned k = 0; k < WINDOW; k++) free(slot[k]);
  return 0;
}
