/* A heap object's next life does not inherit the watch on its inbox.
 *
 * A push into an empty inbox sets the heap's watch flag and schedules the
 * background thread's look, which parks (and purges) what an idle owner
 * does not take in; the flag is cleared only by such a look at an owned
 * heap. Here a first-class heap gets a block freed by another thread (the
 * flag set), and is destroyed before the look comes: the look passes a
 * destroyed heap by. The heap object is then reused (brisk_heap_new hands
 * it out again); 16 MiB of its blocks are freed by another thread while its
 * owner sleeps and calls brisk no more. Their memory must go back within
 * 2 s: a flag left set from the life before would keep the first push from
 * scheduling any look, and nothing else is due.
 *
 * ctest-labels: sanitize */
#include <brisk.h>

#include "brisk_errors.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCK 256
#define COUNT (16 * 1024 * 1024 / BLOCK)

static void **blocks;
static size_t nblocks;

static void fail(const char *what) {
  printf("test_watch_handover: FAIL: %s\n", what);
  exit(1);
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (f == NULL || fscanf(f, "%ld %ld", &pages, &resident) != 2) fail("cannot read /proc/self/statm");
  fclose(f);
  return resident * 4;
}

/* Frees every block and exits (its outbox goes to the heap's inbox). */
static void *free_all(void *arg) {
  (void)arg;
  for (size_t i = 0; i < nblocks; i++) brisk_free(blocks[i]);
  return NULL;
}

static void free_on_a_thread(void) {
  pthread_t t;
  if (pthread_create(&t, NULL, free_all, NULL) != 0) fail("pthread_create");
  pthread_join(t, NULL);
}

int main(void) {
  static void *one[1];
  blocks = one;
  /* Life one: a block freed by another thread, the heap destroyed at once,
   * well within the purge delay (50 ms) that the look waits. */
  brisk_heap_t *h = brisk_heap_new();
  if (h == NULL) fail("brisk_heap_new");
  one[0] = brisk_heap_malloc(h, BLOCK);
  if (one[0] == NULL) fail("brisk_heap_malloc");
  nblocks = 1;
  free_on_a_thread();
  brisk_heap_destroy(h);
  sleep_ms(1000); /* every look and purge of the first life is over */

  /* Life two, on the same heap object. */
  brisk_heap_t *h2 = brisk_heap_new();
  if (h2 != h) fail("the destroyed heap object was not reused: the test does not reach what it checks");
  blocks = malloc(COUNT * sizeof(void *)); /* the process's malloc: brisk's own heap when preloaded */
  if (blocks == NULL) fail("malloc");
  long before = rss_kib();
  for (size_t i = 0; i < COUNT; i++) {
    blocks[i] = brisk_heap_malloc(h2, BLOCK);
    if (blocks[i] == NULL) fail("brisk_heap_malloc");
    memset(blocks[i], 0x5a, BLOCK);
  }
  nblocks = COUNT;
  long peak = rss_kib();
  free_on_a_thread();
  /* The owner (this thread) calls brisk no more: only the background
   * thread can give the memory back. */
  long added = peak - before, left = added;
  int ms = 0;
  for (; ms < 2000; ms += 20) {
    sleep_ms(20);
    left = rss_kib() - before;
    if (left * 20 < added) break;
  }
  printf("test_watch_handover: %ld KiB of blocks freed by another thread, %ld KiB left after %d ms\n", added,
         left < 0 ? 0 : left, ms);
  if (left * 20 >= added) fail("the freed blocks of the heap's second life stayed resident (5% or more after 2 s)");
  long errors = brisk_errors_reported();
  if (errors != 0) fail("brisk reported bad inputs; this test makes none");
  printf("test_watch_handover: passed\n");
  return 0;
}
