/* The fast-path probe: N malloc(SIZE)/free pairs on one thread (SIZE 32 by
 * default). Run it under callgrind for N and 2N pairs; the difference
 * divided by N is the cost of one pair including this loop
 * (scripts/fastpath_counts.sh does this for 32 B). */
#include <stdlib.h>

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000000;
  size_t size = argc > 2 ? (size_t)atol(argv[2]) : 32;
  for (long i = 0; i < n; i++) {
    void *volatile p = malloc(size);
    free(p);
  }
  return 0;
}
