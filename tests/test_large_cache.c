/* A heap's own cache of large blocks' spans, while the background thread
 * gives back what sat unused. With a purge delay of 1 ms, two threads
 * allocate large blocks of 64 KiB + 1 .. 512 KiB (sizes a cached span
 * takes as it is, and sizes it must be resized for), fill each with a
 * pattern of its address and size, keep some alive across naps of
 * 0..3 ms, and free the rest themselves or hand them to the other
 * thread (whose frees come back through the inbox into the owner's
 * cache). A span taken by the owner and by the background thread at once,
 * or handed to two blocks, would break a live block's pattern. Then:
 * brisk reported nothing, the background thread gave kept spans back
 * (large_kept_returned > 0), a second free of a block whose span is kept
 * is reported and hands nothing out twice, and a thread that frees its
 * blocks and goes quiet (it sleeps, it does not exit) has their memory
 * back with the OS within 5 s. It calls brisk_malloc and brisk_free, so
 * that the ThreadSanitizer build (whose malloc is its own) tests brisk.
 *
 * ctest-labels: sanitize tsan */
#include <brisk.h>

#include "brisk_errors.h"
#include "under_tsan.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define THREADS 2
#define KEEP 6
#define SWAP 64

static _Atomic int stop;
static _Atomic(uintptr_t) swap[THREADS][SWAP]; /* blocks for thread i to free */
static _Atomic long made, freed;

static void fail(const char *what, const void *p) {
  printf("test_large_cache: FAIL: %s (%p)\n", what, p);
  exit(1);
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000L};
  nanosleep(&ts, NULL);
}

static uint64_t next_rand(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* The size is in the block's first word; every 4 KiB after it holds the
 * block's address plus the offset. */
static void fill(unsigned char *p, size_t size) {
  memcpy(p, &size, sizeof size);
  for (size_t off = 4096; off + 8 <= size; off += 4096) {
    uintptr_t v = (uintptr_t)p + off;
    memcpy(p + off, &v, sizeof v);
  }
}

static void check(unsigned char *p) {
  size_t size;
  memcpy(&size, p, sizeof size);
  if (size <= 64 * 1024 || size > 512 * 1024) fail("a live block's size word changed", p);
  for (size_t off = 4096; off + 8 <= size; off += 4096) {
    uintptr_t v;
    memcpy(&v, p + off, sizeof v);
    if (v != (uintptr_t)p + off) fail("a live block's contents changed", p);
  }
}

static size_t random_size(uint64_t *s) {
  uint64_t r = next_rand(s);
  /* Half of them in 64 KiB + 1 .. 80 KiB (two slices, a few usable sizes
   * apart), the rest up to 512 KiB (up to eight slices) */
  if (r & 1) return 64 * 1024 + 1 + (size_t)((r >> 1) % (16 * 1024));
  return 64 * 1024 + 1 + (size_t)((r >> 1) % (448 * 1024));
}

/* The blocks handed to thread `me`, checked and freed. */
static void free_handed_over(int me) {
  for (int i = 0; i < SWAP; i++) {
    uintptr_t b = atomic_exchange(&swap[me][i], 0);
    if (b == 0) continue;
    check((unsigned char *)b);
    brisk_free((void *)b);
    atomic_fetch_add(&freed, 1);
  }
}

static void *worker(void *arg) {
  int me = (int)(uintptr_t)arg, other = 1 - me;
  uint64_t s = 0x9e3779b97f4a7c15ull * (uint64_t)(me + 1);
  unsigned char *keep[KEEP] = {0};
  while (!atomic_load(&stop)) {
    free_handed_over(me);
    int burst = 1 + (int)(next_rand(&s) % 12);
    for (int k = 0; k < burst; k++) {
      size_t size = random_size(&s);
      unsigned char *p = brisk_malloc(size);
      if (p == NULL) fail("malloc failed", NULL);
      fill(p, size);
      atomic_fetch_add(&made, 1);
      int slot = (int)(next_rand(&s) % KEEP);
      unsigned char *old = keep[slot];
      keep[slot] = p;
      if (old == NULL) continue;
      check(old);
      uintptr_t expected = 0;
      int to = (int)(next_rand(&s) % SWAP);
      if ((next_rand(&s) & 3) == 0 && atomic_compare_exchange_strong(&swap[other][to], &expected, (uintptr_t)old))
        continue; /* freed by the other thread */
      brisk_free(old);
      atomic_fetch_add(&freed, 1);
    }
    for (int i = 0; i < KEEP; i++)
      if (keep[i]) check(keep[i]);
    /* a nap of 0..3 ms: the background thread looks at the cache meanwhile */
    sleep_us((long)(next_rand(&s) % 3000));
  }
  for (int i = 0; i < KEEP; i++) {
    if (keep[i] == NULL) continue;
    check(keep[i]);
    brisk_free(keep[i]);
    atomic_fetch_add(&freed, 1);
  }
  return NULL;
}

/* Resident 4 KiB pages in [p, p + len). */
static size_t resident_pages(const void *p, size_t len) {
  static unsigned char v[256];
  uintptr_t a = (uintptr_t)p & ~(uintptr_t)4095;
  size_t n = (len + ((uintptr_t)p - a) + 4095) / 4096;
  if (n > sizeof v || mincore((void *)a, n * 4096, v) != 0) fail("mincore failed", p);
  size_t r = 0;
  for (size_t i = 0; i < n; i++) r += v[i] & 1;
  return r;
}

enum { QUIET_BLOCKS = 6, QUIET_SIZE = 100000 };
static unsigned char *quiet_blocks[QUIET_BLOCKS];
static _Atomic int quiet_freed, quiet_done;

/* Frees its blocks (kept by its heap) and sleeps without calling brisk
 * until the main thread has looked. */
static void *quiet(void *arg) {
  (void)arg;
  for (int i = 0; i < QUIET_BLOCKS; i++) {
    quiet_blocks[i] = brisk_malloc(QUIET_SIZE);
    if (quiet_blocks[i] == NULL) fail("malloc failed", NULL);
    memset(quiet_blocks[i], 0x5c, QUIET_SIZE);
  }
  for (int i = 0; i < QUIET_BLOCKS; i++) brisk_free(quiet_blocks[i]);
  atomic_store(&quiet_freed, 1);
  while (!atomic_load(&quiet_done)) sleep_us(10000);
  return NULL;
}

int main(void) {
  if (brisk_option_set("PURGE_DELAY", 1) != 0) fail("brisk_option_set(PURGE_DELAY, 1)", NULL);
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; i++) pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)i);
  sleep_us(UNDER_TSAN ? 2000000 : 1500000);
  atomic_store(&stop, 1);
  for (int i = 0; i < THREADS; i++) pthread_join(t[i], NULL);
  for (int me = 0; me < THREADS; me++) free_handed_over(me);
  double returned = brisk_stat("large_kept_returned");
  long errors = brisk_errors_reported();
  printf("test_large_cache: %ld blocks made, %ld freed, %.0f kept spans given back by the background thread, "
         "%ld errors\n", (long)made, (long)freed, returned, errors);
  if (freed != made) fail("blocks were lost", NULL);
  if (errors != 0) fail("brisk reported bad inputs; this part makes none", NULL);
  if (returned <= 0) fail("no kept span was given back: the test did not reach what it checks", NULL);

  /* A second free of a block whose span the heap keeps. */
  enum { SIZE = 100000 };
  unsigned char *a = brisk_malloc(SIZE), *b = brisk_malloc(SIZE);
  if (a == NULL || b == NULL) fail("malloc failed", NULL);
  brisk_free(a);
  brisk_free(b);
  long before = brisk_errors_reported();
  brisk_free(a);
  if (brisk_errors_reported() != before + 1) fail("a second free of a kept block was not reported", a);
  unsigned char *c = brisk_malloc(SIZE), *d = brisk_malloc(SIZE), *e = brisk_malloc(SIZE);
  if (c == NULL || d == NULL || e == NULL) fail("malloc failed", NULL);
  if (c == d || c == e || d == e) fail("one block handed out twice", c);
  brisk_free(c);
  brisk_free(d);
  brisk_free(e);

  /* A quiet thread's kept spans go back: resident pages of its freed
   * blocks gone within 5 s (a delay of 1 ms; a loaded machine gets more). */
  if (brisk_option_set("PURGE_DELAY", 20) != 0) fail("brisk_option_set(PURGE_DELAY, 20)", NULL);
  pthread_t q;
  pthread_create(&q, NULL, quiet, NULL);
  while (!atomic_load(&quiet_freed)) sleep_us(1000);
  size_t resident = 0;
  for (int tries = 0; tries < 100; tries++) {
    sleep_us(50000);
    resident = 0;
    for (int i = 0; i < QUIET_BLOCKS; i++) resident += resident_pages(quiet_blocks[i], QUIET_SIZE);
    if (resident == 0) break;
  }
  atomic_store(&quiet_done, 1);
  pthread_join(q, NULL);
  if (resident != 0) fail("a quiet thread's freed large blocks are still resident 5 s later", quiet_blocks[0]);
  printf("test_large_cache: passed\n");
  return 0;
}
