/* A batch of remote frees held by an idle thread never reaches a later
 * life of its heap, however many lives the heap object has had since.
 *
 * A first-class heap's blocks are freed by another thread, which keeps
 * them in its outbox (fewer than a batch: nothing is handed over) and then
 * waits. The heap is destroyed, and a heap is made and destroyed 65,536
 * times more: every tag the inbox has (16 bits of the heap's generation)
 * has been used once, and the heap object, were it reused each time,
 * would be back at the tag the waiting batch carries. A heap made now
 * allocates blocks of the same size (in the destroyed heap's segments,
 * kept in the pool: BRISK_PURGE_DELAY is never) and fills them. Then the
 * waiting thread exits, which hands its outbox over. The batch must be
 * dropped: the new heap's blocks keep their contents, none of them is
 * handed out again by the heap's next allocations (which take its inbox
 * in), and brisk reports nothing.
 *
 * ctest-labels: sanitize tsan */
#include <brisk.h>

#include "brisk_errors.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define BLOCKS 32
#define SIZE 64
#define LIVES 65536

static void *stale[BLOCKS];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int freed, may_exit;

static void fail(const char *what) {
  printf("test_heap_lives: FAIL: %s\n", what);
  exit(1);
}

static void *freeing_thread(void *arg) {
  (void)arg;
  free(malloc(16)); /* a heap of its own, so its frees are batched */
  for (int i = 0; i < BLOCKS; i++) brisk_free(stale[i]);
  pthread_mutex_lock(&mu);
  freed = 1;
  pthread_cond_broadcast(&cv);
  while (!may_exit) pthread_cond_wait(&cv, &mu); /* idle, its batch held */
  pthread_mutex_unlock(&mu);
  return NULL; /* thread exit: the outbox is handed over */
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int main(void) {
  if (brisk_option_set("PURGE_DELAY", -1) != 0) fail("brisk_option_set(PURGE_DELAY, -1)");
  brisk_heap_t *h = brisk_heap_new();
  if (h == NULL) fail("brisk_heap_new");
  for (int i = 0; i < BLOCKS; i++) {
    stale[i] = brisk_heap_malloc(h, SIZE);
    if (stale[i] == NULL) fail("brisk_heap_malloc");
    memset(stale[i], 0x11, SIZE);
  }
  pthread_t t;
  if (pthread_create(&t, NULL, freeing_thread, NULL) != 0) fail("pthread_create");
  pthread_mutex_lock(&mu);
  while (!freed) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);

  double t0 = now_s();
  brisk_heap_destroy(h);
  int same_object = 0;
  for (int i = 0; i < LIVES - 1; i++) {
    brisk_heap_t *x = brisk_heap_new();
    if (x == NULL) fail("brisk_heap_new in the loop");
    same_object += x == h;
    brisk_heap_destroy(x);
  }
  brisk_heap_t *now = brisk_heap_new();
  printf("test_heap_lives: %d lives of heaps in %.2f s; the heap object was reused for %d of them%s\n", LIVES,
         now_s() - t0, same_object, now == h ? ", and for the last" : ", not for the last");

  void *live[BLOCKS];
  int overlap = 0;
  for (int i = 0; i < BLOCKS; i++) {
    live[i] = brisk_heap_malloc(now, SIZE);
    if (live[i] == NULL) fail("brisk_heap_malloc in the last life");
    memset(live[i], 0x5a, SIZE);
    for (int k = 0; k < BLOCKS; k++) overlap += live[i] == stale[k];
  }
  printf("test_heap_lives: %d of the last life's %d blocks lie where the waiting batch's blocks were\n", overlap,
         BLOCKS);

  pthread_mutex_lock(&mu);
  may_exit = 1;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  pthread_join(t, NULL);

  /* The heap's next allocations take its inbox in. */
  enum { MORE = 4096 };
  static void *more[MORE];
  int handed_twice = 0;
  for (int i = 0; i < MORE; i++) {
    more[i] = brisk_heap_malloc(now, SIZE);
    if (more[i] == NULL) fail("brisk_heap_malloc after the batch was handed over");
    for (int k = 0; k < BLOCKS; k++) handed_twice += more[i] == live[k];
  }
  int changed = 0;
  for (int i = 0; i < BLOCKS; i++)
    for (int b = 0; b < SIZE; b++) changed += ((unsigned char *)live[i])[b] != 0x5a;
  long errors = brisk_errors_reported();
  printf("test_heap_lives: after the batch: %d live blocks handed out again, %d bytes of them changed, %ld errors "
         "reported\n", handed_twice, changed, errors);
  if (handed_twice || changed || errors) fail("a batch built for a destroyed life of a heap reached a later life");
  brisk_heap_destroy(now);
  printf("test_heap_lives: passed\n");
  return 0;
}
