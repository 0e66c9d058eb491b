/* A chain closed on itself by a double free, parked: another thread frees
 * two blocks of the main thread's heap and hands them over, then frees a
 * third and the first again (not the block it freed last, so the free
 * path cannot tell); it exits, handing that batch over, whose tail links
 * to the first batch in the inbox, which leads back to the block freed
 * twice; then a chain of two blocks leading into a cycle of two, which
 * the walk goes round more than once, while the main thread sleeps past two looks of the
 * background thread (purge delay 1 ms), which parks the inbox. The walk
 * must end (the test has a deadline), the double free must be reported,
 * and the main thread's next allocations must take each block back once:
 * 64 blocks of the size allocated after it are all distinct. Last, a
 * chain whose link was written after the free: the walk must stop there
 * and the broken link be reported, not followed. */
#include <brisk.h>

#include "brisk_errors.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Above 1 KiB: smaller blocks freed by another thread wait on their
 * page's own list, not in a chain through the inbox. */
#define BLOCK 2000
static void *blocks[4];

/* 0, 2, 1, 0, ...: three blocks in a cycle */
static void *freer_cycle(void *arg) {
  (void)arg;
  brisk_free(brisk_malloc(16)); /* a heap of its own: its frees are batched */
  brisk_free(blocks[0]);
  brisk_free(blocks[1]);
  brisk_collect(false); /* the batch [1, 0] handed over */
  brisk_free(blocks[2]);
  brisk_free(blocks[0]); /* the double free: the batch [0, 2], whose tail 2 */
  return NULL;           /* links to 1 at exit: 0, 2, 1, 0, ... a cycle */
}

/* 0, 2, 1, 3, 1, 3, ...: two blocks in a cycle after two that lead to it;
 * the walk takes 1 twice, and sorted the blocks read 0, 1, 1, 2, 3 (a run
 * that holds a block twice) */
static void *freer_tail(void *arg) {
  (void)arg;
  brisk_free(brisk_malloc(16));
  brisk_free(blocks[1]);
  brisk_free(blocks[3]);
  brisk_collect(false); /* the batch [3, 1] handed over */
  brisk_free(blocks[1]); /* the double free */
  brisk_free(blocks[2]);
  brisk_free(blocks[0]); /* the batch [0, 2, 1], whose tail 1 links to 3 */
  return NULL;
}

/* 0, then a link written after the free: the walk parks 0 and stops at
 * a link that leads nowhere, which must be reported, not followed. */
static void *freer_written(void *arg) {
  (void)arg;
  brisk_free(brisk_malloc(16));
  brisk_free(blocks[1]);
  brisk_free(blocks[0]);
  memset(blocks[0], 0x5a, 8); /* a write after free: 0's link to 1 */
  return NULL;                /* the batch [0, 1] handed over at exit */
}

static int phase(const char *name, void *(*freer)(void *)) {
  for (int i = 0; i < 4; i++) blocks[i] = brisk_malloc(BLOCK);
  pthread_t t;
  pthread_create(&t, NULL, freer, NULL);
  pthread_join(t, NULL);
  double parked_before = brisk_stat("remote_parked");
  long errors_before = brisk_errors_reported();
  for (int i = 0; i < 100 && brisk_stat("remote_parked") == parked_before; i++) {
    struct timespec ts = {0, 20 * 1000000L};
    nanosleep(&ts, NULL);
  }
  double parked = brisk_stat("remote_parked") - parked_before;
  brisk_collect(false); /* the parked arrays taken in */
  static void *again[64];
  for (int i = 0; i < 64; i++) {
    again[i] = brisk_malloc(BLOCK);
    for (int k = 0; k < i; k++)
      if (again[k] == again[i]) {
        printf("test_park_cycle: FAIL: %s: block %p handed out twice\n", name, again[i]);
        return 1;
      }
  }
  long errors = brisk_errors_reported() - errors_before;
  printf("test_park_cycle: %s: %.0f blocks parked, %ld errors reported, 64 blocks allocated after, all distinct\n",
         name, parked, errors);
  if (parked <= 0) {
    printf("test_park_cycle: FAIL: %s: the inbox was not parked: the test did not reach what it checks\n", name);
    return 1;
  }
  if (errors < 1) {
    printf("test_park_cycle: FAIL: %s: the double free was not reported\n", name);
    return 1;
  }
  for (int i = 0; i < 64; i++) brisk_free(again[i]);
  return 0;
}

int main(void) {
  alarm(60); /* a walk that never ends fails the test */
  if (brisk_option_set("PURGE_DELAY", 1) != 0) return 1;
  /* first, while the heap's page hands out blocks in address order */
  if (phase("a cycle after a tail", freer_tail) != 0) return 1;
  if (phase("a cycle of three", freer_cycle) != 0) return 1;
  if (phase("a link written after the free", freer_written) != 0) return 1;
  printf("test_park_cycle: passed\n");
  return 0;
}
