/* The fast-path probe: N malloc(SIZE)/free pairs on one thread (SIZE 32 by
 * default); with "usable" as third argument, N malloc(SIZE) +
 * malloc_usable_size + free rounds (the loop redis runs to count its
 * memory). Run it under callgrind for N and 2N rounds; the difference
 * divided by N is the cost of one round including this loop
 * (scripts/fastpath_counts.sh). */
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
  long n = argc > 1 ? atol(argv[1]) : 1000000;
  size_t size = argc > 2 ? (size_t)atol(argv[2]) : 32;
  if (argc > 3 && strcmp(argv[3], "usable") == 0) {
    size_t total = 0;
    for (long i = 0; i < n; i++) {
      void *volatile p = malloc(size);
      total += malloc_usable_size(p);
      free(p);
    }
    return total == 1; /* keeps the sum alive; never 1 */
  }
  for (long i = 0; i < n; i++) { /* the same loop as every earlier record */
    void *volatile p = malloc(size);
    free(p);
  }
  return 0;
}
