/* The large keep: a thread keeps the spans of its freed large blocks of up
 * to 256 KiB for its next large blocks of their size, with no lock, and
 * gives back what it kept unused, whether it runs or sleeps.
 *
 *  - reuse: the newest kept span goes to the next block of its size, with
 *    the usable size of the request (brisk_good_size), smaller or larger
 *    than the block before;
 *  - second frees of a kept block, by its owner and by another thread, are
 *    reported and change nothing (the next blocks are distinct);
 *  - a quiet owner: a thread that frees its large blocks and then sleeps
 *    has their pages given back (mincore), by the background thread,
 *    within 5 s; the thread allocates again afterwards without trouble;
 *  - a race: with a 1 ms purge delay, the background thread takes kept
 *    spans while their owner takes others and another thread frees
 *    blocks into the owner's heap; every block's content is checked;
 *  - the fence refused (fault injection): the background thread's
 *    membarrier fails, the keep is off from then on, its owner still
 *    takes back what it kept, and what it frees goes to the set's span
 *    cache and back to the OS after the delay.
 *
 * The brisk_* calls: under ThreadSanitizer, malloc is the sanitizer's.
 *
 * ctest-labels: sanitize tsan */
#include <brisk.h>

#include "brisk_errors.h"
#include "large_checks.h"

#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

static void fill(unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i + 1 < n; i += 64) p[i] = (unsigned char)(seed + i / 64);
  p[n - 1] = (unsigned char)seed;
}

static int intact(const unsigned char *p, size_t n, unsigned seed) {
  for (size_t i = 0; i + 1 < n; i += 64)
    if (p[i] != (unsigned char)(seed + i / 64)) return 0;
  return p[n - 1] == (unsigned char)seed;
}

/* ---- reuse and usable sizes (on a thread of its own: a fresh heap) ---- */
static void *reuse_round(void *arg) {
  (void)arg;
  enum { N = 4 };
  unsigned char *p[N];
  for (int i = 0; i < N; i++) {
    p[i] = brisk_malloc(150000); /* 3 slices */
    CHECK(p[i] != NULL, "malloc(150000) failed");
    if (p[i] == NULL) return NULL;
    fill(p[i], 150000, 10 + i);
  }
  for (int i = 0; i < N; i++) brisk_free(p[i]);
  unsigned char *q = brisk_malloc(150000);
  CHECK(q == p[N - 1], "malloc(150000) after 4 such frees gave %p, not the newest freed %p", (void *)q,
        (void *)p[N - 1]);
  brisk_free(q);
  /* the same span for a smaller block, then a larger one */
  static const size_t sizes[] = {140000, 190000, 131073, 196608};
  for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
    unsigned char *r = brisk_malloc(sizes[k]);
    CHECK(r == p[N - 1], "malloc(%zu) took %p, not the kept span %p", sizes[k], (void *)r, (void *)p[N - 1]);
    CHECK(r != NULL && brisk_usable_size(r) == page_round(sizes[k]) &&
              brisk_usable_size(r) == brisk_good_size(sizes[k]),
          "malloc(%zu) from a kept span: usable size %zu, good size %zu", sizes[k], r ? brisk_usable_size(r) : 0,
          brisk_good_size(sizes[k]));
    if (r == NULL) return NULL;
    fill(r, sizes[k], 20 + (unsigned)k);
    CHECK(intact(r, sizes[k], 20 + (unsigned)k), "a block of %zu bytes from a kept span did not hold its content",
          sizes[k]);
    brisk_free(r);
  }
  /* calloc of a kept span: written before, so cleared */
  unsigned char *z = brisk_calloc(1, 150000);
  CHECK(z != NULL, "calloc(150000) failed");
  if (z != NULL) {
    size_t nonzero = 0;
    for (size_t i = 0; i < 150000; i++) nonzero += z[i] != 0;
    CHECK(nonzero == 0, "calloc(150000) from a kept span has %zu bytes not zero", nonzero);
    brisk_free(z);
  }
  brisk_collect(false);
  return NULL;
}

/* ---- second frees of a kept block ---- */
static unsigned char *kept_block;
static void *free_kept(void *arg) {
  (void)arg;
  brisk_free(kept_block); /* a second free, from another thread */
  return NULL;
}

static void *double_free_round(void *arg) {
  (void)arg;
  unsigned char *p = brisk_malloc(100000);
  CHECK(p != NULL, "malloc(100000) failed");
  if (p == NULL) return NULL;
  brisk_free(p);
  long errors = brisk_errors_reported();
  brisk_free(p); /* by its owner: the span is kept */
  CHECK(brisk_errors_reported() == errors + 1, "a second free of a kept block by its owner was not reported");
  kept_block = p;
  pthread_t t;
  CHECK(pthread_create(&t, NULL, free_kept, NULL) == 0, "pthread_create failed");
  pthread_join(t, NULL);
  CHECK(brisk_errors_reported() == errors + 2, "a second free of a kept block by another thread was not reported");
  unsigned char *q = brisk_malloc(100000), *r = brisk_malloc(100000);
  CHECK(q != NULL && r != NULL && q != r, "two blocks after the second frees: %p, %p", (void *)q, (void *)r);
  if (q && r) {
    fill(q, 100000, 1);
    fill(r, 100000, 2);
    CHECK(intact(q, 100000, 1) && intact(r, 100000, 2), "writing one block changed another");
  }
  brisk_free(q);
  brisk_free(r);
  brisk_collect(false);
  return NULL;
}

/* ---- a quiet owner's kept spans go back ---- */
enum { QUIET_N = 8, QUIET_SIZE = 120000 }; /* 8 spans of 2 slices: all kept */
static unsigned char *quiet_blocks[QUIET_N];
static _Atomic int quiet_stage;

static void *quiet_owner(void *arg) {
  (void)arg;
  for (int i = 0; i < QUIET_N; i++) {
    quiet_blocks[i] = brisk_malloc(QUIET_SIZE);
    CHECK(quiet_blocks[i] != NULL, "malloc(%d) failed", QUIET_SIZE);
    if (quiet_blocks[i] == NULL) exit(1);
    memset(quiet_blocks[i], 0x33, QUIET_SIZE);
  }
  for (int i = 0; i < QUIET_N; i++) brisk_free(quiet_blocks[i]);
  quiet_stage = 1;
  while (quiet_stage != 2) sleep_ms(5); /* quiet: no call into brisk */
  /* awake again: the keep's slots the background thread emptied */
  unsigned char *p[2 * QUIET_N];
  for (int i = 0; i < 2 * QUIET_N; i++) {
    p[i] = brisk_malloc(QUIET_SIZE);
    CHECK(p[i] != NULL, "malloc(%d) after the keep was given back failed", QUIET_SIZE);
    if (p[i] == NULL) exit(1);
    fill(p[i], QUIET_SIZE, 40 + (unsigned)i);
  }
  for (int i = 0; i < 2 * QUIET_N; i++) {
    CHECK(intact(p[i], QUIET_SIZE, 40 + (unsigned)i), "block %d changed after another was written", i);
    for (int j = 0; j < i; j++) CHECK(p[i] != p[j], "the same block handed out twice (%d, %d)", i, j);
  }
  for (int i = 0; i < 2 * QUIET_N; i++) brisk_free(p[i]);
  brisk_collect(false);
  return NULL;
}

static void quiet(void) {
  double returned = brisk_stat("large_keep_returned");
  pthread_t t;
  CHECK(pthread_create(&t, NULL, quiet_owner, NULL) == 0, "pthread_create failed");
  while (quiet_stage != 1) sleep_ms(1);
  size_t resident = resident_after_wait((void *const *)quiet_blocks, QUIET_N, QUIET_SIZE);
  CHECK(resident == 0, "%zu pages of %d freed %d-byte blocks still resident 5 s after their sleeping owner freed them",
        resident, QUIET_N, QUIET_SIZE);
  CHECK(brisk_stat("large_keep_returned") >= returned + QUIET_N, "large_keep_returned went from %.0f to %.0f",
        returned, brisk_stat("large_keep_returned"));
  quiet_stage = 2;
  pthread_join(t, NULL);
}

/* ---- the race: the background thread takes while the owner takes ---- */
enum { RACE_ROUNDS = 3000, RACE_MAX = 6 };
static _Atomic(unsigned char *) handed[64];
static _Atomic int race_done;

static void race_free_slot(unsigned i) {
  unsigned char *p = atomic_exchange(&handed[i], NULL);
  if (p == NULL) return;
  size_t n;
  memcpy(&n, p + 8, sizeof n);
  CHECK(intact(p + 16, n - 16, (unsigned)n), "a block of %zu bytes freed by another thread lost its content", n);
  brisk_free(p);
}

static void *race_freer(void *arg) {
  (void)arg;
  for (unsigned i = 0; !race_done; i++) {
    race_free_slot(i % 64);
    if (i % 64 == 63) sched_yield();
  }
  for (unsigned i = 0; i < 64; i++) race_free_slot(i);
  return NULL;
}

static void *race_owner(void *arg) {
  (void)arg;
  uint64_t x = 88172645463325252ull;
  unsigned char *p[RACE_MAX];
  for (int round = 0; round < RACE_ROUNDS; round++) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    int k = 1 + (int)(x % RACE_MAX);
    for (int i = 0; i < k; i++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      size_t n = 65537 + (size_t)(x % (192 * 1024));
      p[i] = brisk_malloc(n);
      CHECK(p[i] != NULL, "malloc(%zu) failed", n);
      if (p[i] == NULL) exit(1);
      memcpy(p[i] + 8, &n, sizeof n);
      fill(p[i] + 16, n - 16, (unsigned)n);
    }
    if (round % 16 == 0) sleep_ms(2); /* long enough for the background thread to take kept spans */
    for (int i = 0; i < k; i++) {
      size_t n;
      memcpy(&n, p[i] + 8, sizeof n);
      CHECK(intact(p[i] + 16, n - 16, (unsigned)n), "a block of %zu bytes lost its content", n);
      if (i % 2 == 0) {
        brisk_free(p[i]);
      } else { /* to the other thread, which frees it into this heap */
        unsigned char *expected = NULL;
        unsigned slot = (unsigned)(x >> 7) % 64;
        if (!atomic_compare_exchange_strong(&handed[slot], &expected, p[i])) brisk_free(p[i]);
      }
    }
  }
  race_done = 1;
  return NULL;
}

static void race(void) {
  long delay = 50;
  brisk_option_get("PURGE_DELAY", &delay);
  CHECK(brisk_option_set("PURGE_DELAY", 1) == 0, "brisk_option_set(PURGE_DELAY) failed");
  double returned = brisk_stat("large_keep_returned");
  pthread_t o, f;
  CHECK(pthread_create(&o, NULL, race_owner, NULL) == 0, "pthread_create failed");
  CHECK(pthread_create(&f, NULL, race_freer, NULL) == 0, "pthread_create failed");
  pthread_join(o, NULL);
  pthread_join(f, NULL);
  brisk_option_set("PURGE_DELAY", delay);
  double taken = brisk_stat("large_keep_returned") - returned;
  printf("test_large_keep: race: %.0f kept spans given back by the background thread\n", taken);
  CHECK(taken > 0, "the background thread took no kept span in %d rounds with a 1 ms delay: the race was not run",
        RACE_ROUNDS);
}

/* ---- the fence refused: the keep is switched off ---- */
enum { OFF_N = 4, OFF_SIZE = 120000 };
static unsigned char *off_blocks[OFF_N];
static _Atomic int off_stage;

static void *off_owner(void *arg) {
  (void)arg;
  for (int i = 0; i < OFF_N; i++) {
    off_blocks[i] = brisk_malloc(OFF_SIZE);
    if (off_blocks[i] == NULL) exit(1);
    memset(off_blocks[i], 0x44, OFF_SIZE);
  }
  for (int i = 0; i < OFF_N; i++) brisk_free(off_blocks[i]); /* kept, watched */
  off_stage = 1;
  while (off_stage != 2) sleep_ms(1);
  /* the background thread's fence was refused: what was kept is still
   * this thread's to take; what it frees now goes to the set */
  for (int i = 0; i < OFF_N; i++) {
    off_blocks[i] = brisk_malloc(OFF_SIZE);
    CHECK(off_blocks[i] != NULL, "malloc(%d) with the keep off failed", OFF_SIZE);
    if (off_blocks[i] == NULL) exit(1);
    fill(off_blocks[i], OFF_SIZE, 90 + (unsigned)i);
  }
  for (int i = 0; i < OFF_N; i++) {
    CHECK(intact(off_blocks[i], OFF_SIZE, 90 + (unsigned)i), "block %d changed with the keep off", i);
    brisk_free(off_blocks[i]);
  }
  off_stage = 3;
  while (off_stage != 4) sleep_ms(1); /* quiet */
  return NULL;
}

static void fence_refused(void) {
  double refused = brisk_stat("fence_failures");
  pthread_t t;
  CHECK(pthread_create(&t, NULL, off_owner, NULL) == 0, "pthread_create failed");
  while (off_stage != 1) sleep_ms(1);
  brisk_fault_injection_calls(BRISK_FAULT_MEMBARRIER);
  brisk_fault_injection(0, 0); /* every membarrier from now on */
  for (int i = 0; i < 100 && brisk_stat("fence_failures") == refused; i++) sleep_ms(50);
  CHECK(brisk_stat("fence_failures") > refused, "no membarrier was refused in 5 s (fence_failures %.0f)",
        brisk_stat("fence_failures"));
  off_stage = 2;
  while (off_stage != 3) sleep_ms(1);
  /* freed with the keep off: the set's span cache, given back at its deadline */
  size_t resident = resident_after_wait((void *const *)off_blocks, OFF_N, OFF_SIZE);
  CHECK(resident == 0, "%zu pages of %d blocks freed after the fence was refused still resident 5 s later", resident,
        OFF_N);
  brisk_fault_injection(-1, 0);
  brisk_fault_injection_calls(BRISK_FAULT_MMAP);
  off_stage = 4;
  pthread_join(t, NULL);
}

int main(void) {
  char stats[8192];
  brisk_stats_json(stats, sizeof stats);
  if (strstr(stats, "\"hardened\":1")) {
    printf("test_large_keep: the hardened build keeps no large spans outside the set's lock; nothing to check\n");
    return 77;
  }
  pthread_t t;
  void *(*rounds[])(void *) = {reuse_round, double_free_round};
  for (size_t i = 0; i < sizeof rounds / sizeof rounds[0]; i++) {
    CHECK(pthread_create(&t, NULL, rounds[i], NULL) == 0, "pthread_create failed");
    pthread_join(t, NULL);
  }
  quiet();
  race();
  fence_refused(); /* last: the keep stays off for the process */
  CHECK(brisk_errors_reported() == 2, "brisk reported %ld bad inputs, not the 2 made", brisk_errors_reported());
  if (failures) {
    printf("test_large_keep: %d failures\n", failures);
    return 1;
  }
  printf("test_large_keep: reuse with the request's usable size, second frees reported, a sleeping owner's spans "
         "given back, the background thread's takes raced, and the keep off when its fence is refused\n");
  return 0;
}
