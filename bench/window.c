/* Instructions of a free and a malloc beyond the fast path: N rounds of
 * freeing a random block of a window of 256 and allocating one of a random
 * size in LO..HI in its place (a byte of each written). Run it under
 * callgrind for N and 2N rounds; the difference divided by N is one
 * round's cost, this loop's own instructions included (about 30).
 *
 *   window N LO HI */
#include <stdint.h>
#include <stdlib.h>

int main(int argc, char **argv) {
  if (argc != 4) return 2;
  long n = atol(argv[1]);
  size_t lo = (size_t)atol(argv[2]), hi = (size_t)atol(argv[3]);
  if (n <= 0 || lo == 0 || hi < lo) return 2;
  enum { WINDOW = 256 };
  static unsigned char *slot[WINDOW];
  uint64_t s = 0x2545f4914f6cdd1dull;
  for (long i = 0; i < n; i++) {
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    unsigned k = (unsigned)(s % WINDOW);
    free(slot[k]);
    size_t size = lo + (size_t)((s >> 8) % (hi - lo + 1));
    slot[k] = malloc(size);
    if (slot[k] == NULL) return 1;
    slot[k][0] = (unsigned char)i;
  }
  for (unsigned k = 0; k < WINDOW; k++) free(slot[k]);
  return 0;
}
