/* The fast-path probe: N malloc(32)/free pairs on one thread. Run it under
 * callgrind for N and 2N pairs; the difference divided by N is the cost
 * of one pair including this loop (scripts/fastpath_counts.sh). */
#include <stdlib.h>

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000000;
  for (long i = 0; i < n; i++) {
    void *volatile p = malloc(32);
    free(p);
  }
  return 0;
}
