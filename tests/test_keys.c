/* The keys that encode free-list links and remote-free chains are drawn
 * from the kernel, apart from each other, anew in every process.
 *
 * One freed block reveals its key (a block's link is the next block's
 * address XOR the key): a pair of local frees gives the free lists' key, a
 * pair of frees by another thread the chains' key. They must differ above
 * the segment bits (else a chain link would look like a list's), the
 * chains' key must not be the free lists' key run through a fixed map,
 * and two processes must draw different keys.
 *
 *   test_keys           the checks (runs itself twice more for the keys)
 *   test_keys print     print this process's two keys
 *   test_keys order     print the order in which 32 blocks of a fresh page
 *                       are handed out (the hardened build's is random:
 *                       tests/test_hardened.sh runs it twice)
 *   test_keys order2    the same for two fresh pages of one class in one
 *                       process (the thread's heap, a first-class heap),
 *                       a line each
 *   test_keys forge     the hardened build's keys are its segments': a key
 *                       read from a freed block of one segment (the
 *                       thread's heap) is used to forge a link in a freed
 *                       block of another (a first-class heap's) to one of
 *                       its live blocks; malloc must never hand that live
 *                       block out (tests/test_hardened.sh runs it; the
 *                       default build, one key per process, does hand it
 *                       out, which `forge` prints as "followed")
 */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "brisk.h"

#define SEGMENT_SHIFT 22

static void *opaque(void *p) {
  __asm__ volatile("" : "+r"(p));
  return p;
}

static char *key_source_block;

static uintptr_t link_key(void) {
  char *x = malloc(200), *y = malloc(200);
  if (!x || !y) exit(2);
  key_source_block = x;
  free(x);
  free(y);
  return *(volatile uintptr_t *)opaque(y) ^ (uintptr_t)x; /* y's link: x, encoded */
}

static char *remote[2];
static void *free_both(void *arg) {
  (void)arg;
  free(remote[0]);
  free(remote[1]);
  return NULL; /* the thread's batch [1 -> 0] is handed over at its exit */
}

/* Blocks above 1 KiB: smaller ones freed by another thread wait on their
 * page's own list, linked with the free lists' key. */
static uintptr_t chain_key(void) {
  remote[0] = malloc(3000);
  remote[1] = malloc(3000);
  if (!remote[0] || !remote[1]) exit(2);
  pthread_t t;
  if (pthread_create(&t, NULL, free_both, NULL) != 0 || pthread_join(t, NULL) != 0) exit(2);
  /* remote[1]'s link: remote[0], encoded with the chains' key (read before
   * this thread takes its inbox in: it allocates nothing until then) */
  return *(volatile uintptr_t *)opaque(remote[1]) ^ (uintptr_t)remote[0];
}

static int run_self(const char *self, uintptr_t *lk, uintptr_t *rk) {
  char cmd[4200];
  snprintf(cmd, sizeof cmd, "'%s' print", self);
  FILE *f = popen(cmd, "r");
  if (f == NULL) return 0;
  unsigned long long a = 0, b = 0;
  int ok = fscanf(f, "%llx %llx", &a, &b) == 2;
  pclose(f);
  *lk = (uintptr_t)a;
  *rk = (uintptr_t)b;
  return ok;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "print") == 0) {
    uintptr_t lk = link_key(), rk = chain_key();
    printf("%llx %llx\n", (unsigned long long)lk, (unsigned long long)rk);
    return 0;
  }
  if (argc > 1 && (strcmp(argv[1], "order") == 0 || strcmp(argv[1], "order2") == 0)) {
    /* order2: also a fresh page of the same class in a first-class heap,
     * on a line of its own */
    enum { N = 32, SIZE = 176 };
    brisk_heap_t *h = strcmp(argv[1], "order2") == 0 ? brisk_heap_new() : NULL;
    for (int page = 0; page < (h ? 2 : 1); page++) {
      char *b[N], *lo = NULL;
      for (int i = 0; i < N; i++) {
        b[i] = page == 0 ? malloc(SIZE) : brisk_heap_malloc(h, SIZE);
        if (!b[i]) return 2;
        if (lo == NULL || b[i] < lo) lo = b[i];
      }
      for (int i = 0; i < N; i++) printf("%ld ", (long)((b[i] - lo) / SIZE));
      printf("\n");
    }
    return 0;
  }
  if (argc > 1 && strcmp(argv[1], "forge") == 0) {
    enum { SIZE = 200, TRIES = 20000 };
    uintptr_t key = link_key(); /* read in the thread's heap */
    brisk_heap_t *h = brisk_heap_new();
    if (h == NULL) return 2;
    char *live = brisk_heap_malloc(h, SIZE);
    char *victim = brisk_heap_malloc(h, SIZE);
    if (!live || !victim) return 2;
    if (((uintptr_t)live ^ (uintptr_t)key_source_block) >> SEGMENT_SHIFT == 0) {
      printf("forge: the heaps share a segment\n");
      return 2;
    }
    free(victim);
    *(volatile uintptr_t *)opaque(victim) = (uintptr_t)live ^ key; /* the forged link */
    /* Allocate until the victim comes back: the next block is the one its
     * link names. */
    for (int i = 0; i < TRIES; i++) {
      char *p = brisk_heap_malloc(h, SIZE);
      if (p == NULL) return 2;
      if (p == victim) {
        char *next = brisk_heap_malloc(h, SIZE);
        printf("forge: %s\n", next == live ? "followed" : "refused");
        return 0;
      }
    }
    printf("forge: the freed block never came back\n");
    return 2;
  }
  int fails = 0;
  uintptr_t lk = link_key(), rk = chain_key();
  if (lk == rk || ((lk ^ rk) >> SEGMENT_SHIFT) == 0) {
    printf("test_keys: FAIL: the two keys agree above the segment bits (%llx, %llx)\n", (unsigned long long)lk,
           (unsigned long long)rk);
    fails++;
  }
  if (rk == lk * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull) {
    printf("test_keys: FAIL: the chains' key is the free lists' key through a fixed map\n");
    fails++;
  }
  uintptr_t lk1, rk1, lk2, rk2;
  if (!run_self(argv[0], &lk1, &rk1) || !run_self(argv[0], &lk2, &rk2)) {
    printf("test_keys: FAIL: could not run %s print\n", argv[0]);
    return 1;
  }
  if (lk1 == lk2 || rk1 == rk2) {
    printf("test_keys: FAIL: two processes drew the same keys (%llx %llx, %llx %llx)\n", (unsigned long long)lk1,
           (unsigned long long)rk1, (unsigned long long)lk2, (unsigned long long)rk2);
    fails++;
  }
  if ((rk1 ^ rk2) == (lk1 ^ lk2)) {
    printf("test_keys: FAIL: the chains' key moves with the free lists' key between processes\n");
    fails++;
  }
  if (fails) return 1;
  printf("test_keys: passed: the keys differ above the segment bits, are not tied to each other, and differ "
         "between processes\n");
  return 0;
}
