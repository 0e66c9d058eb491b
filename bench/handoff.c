/* Instructions and simulated cache misses of a free on another thread,
 * its share of the owner's take-back included. Two threads take turns,
 * never at once: the owner allocates N blocks of SIZE bytes (a byte of
 * each written), then the other thread frees them all (remote), or the
 * owner frees them itself (local); ROUNDS such rounds. Turns pass through
 * a barrier, so the same command repeats the same calls in the same order
 * and callgrind's counts repeat exactly, unlike times on a shared
 * machine. Run it under callgrind for R and 2R rounds; the difference over
 * R * N is one block's malloc and free, this loop's own few instructions
 * included; remote minus local is what crossing threads costs.
 *
 *   handoff remote|local N SIZE ROUNDS */
#include "bench_common.h"

static pthread_barrier_t turn;
static void **blocks;
static long n, rounds;
static int remote;

static void free_all(void) {
  for (long i = 0; i < n; i++) free(blocks[i]);
}

static void *freer(void *arg) {
  (void)arg;
  for (long r = 0; r < rounds; r++) {
    pthread_barrier_wait(&turn); /* the owner's blocks are ready */
    if (remote) free_all();
    pthread_barrier_wait(&turn); /* freed: the owner's turn */
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 5) return 2;
  remote = strcmp(argv[1], "remote") == 0;
  n = atol(argv[2]);
  size_t size = (size_t)atol(argv[3]);
  rounds = atol(argv[4]);
  if (n <= 0 || size == 0 || rounds <= 0) return 2;
  blocks = calloc((size_t)n, sizeof(void *));
  if (blocks == NULL) return 1;
  pthread_barrier_init(&turn, NULL, 2);
  pthread_t t;
  if (pthread_create(&t, NULL, freer, NULL) != 0) return 1;
  for (long r = 0; r < rounds; r++) {
    for (long i = 0; i < n; i++) {
      unsigned char *p = malloc(size);
      if (p == NULL) return 1;
      p[0] = (unsigned char)i;
      blocks[i] = p;
    }
    if (!remote) free_all();
    pthread_barrier_wait(&turn);
    pthread_barrier_wait(&turn);
  }
  pthread_join(t, NULL);
  free(blocks);
  return 0;
}
