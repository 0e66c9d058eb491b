/* Parking while the OS refuses memory: the background thread takes an idle
 * owner's inbox of 20,000 blocks into arrays of addresses (about 8,000 to
 * an array of 64 KiB, then one array of them all, sorted), and each of
 * those mappings may be refused. Round k refuses the (k+1)-th mmap from
 * the moment the inbox is full until one has been refused: the first array
 * (the inbox stays as it is), a second or a third (the walk stops there and
 * the rest stays a chain), or the one for them all (the newest array alone
 * is parked, the older ones' blocks go back as a chain). Then the owner
 * allocates 20,000 blocks of the size again: each a distinct block (none
 * handed out twice), each whole after all are written, and its heap must
 * count exactly those 20,000 in use (none lost: a block that never came
 * back would stay counted), then none once they are freed; brisk must
 * report nothing. The blocks are a first-class heap's, whose count of
 * blocks in use its statistics give.
 *
 * ctest-labels: sanitize */
#include <brisk.h>

#include "brisk_errors.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum { N = 20000, SIZE = 48 };
static void *blocks[N];
static int failures;
static brisk_heap_t *heap;

#define FAIL(...) do { failures++; printf("test_park_faults: FAIL: " __VA_ARGS__); printf("\n"); } while (0)

static double in_use(void) {
  char buf[1024];
  if (brisk_heap_stats_json(heap, buf, sizeof buf) == 0) return -1;
  const char *at = strstr(buf, "\"blocks_in_use\":");
  return at ? atof(at + strlen("\"blocks_in_use\":")) : -1;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void *freer(void *arg) {
  (void)arg;
  for (int i = 0; i < N; i++) brisk_free(blocks[i]);
  return NULL;
}

static int cmp_ptr(const void *a, const void *b) {
  uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
  return x < y ? -1 : x > y;
}

static void fill_all(unsigned seed) {
  for (int i = 0; i < N; i++)
    for (int w = 0; w < SIZE / 8; w++) ((uint64_t *)blocks[i])[w] = ((uint64_t)i << 8 | (unsigned)w) ^ seed;
}

static int check_all(unsigned seed) {
  for (int i = 0; i < N; i++)
    for (int w = 0; w < SIZE / 8; w++)
      if (((uint64_t *)blocks[i])[w] != (((uint64_t)i << 8 | (unsigned)w) ^ seed)) return i;
  return -1;
}

/* after < 0: the warm-up, no fault (the other thread's heap and the
 * background thread come into being). */
static void run(int after) {
  for (int i = 0; i < N; i++) {
    blocks[i] = brisk_heap_malloc(heap, SIZE);
    if (blocks[i] == NULL) {
      FAIL("round %d: brisk_heap_malloc failed", after);
      return;
    }
  }
  fill_all(0x1000u + (unsigned)after);
  double refused0 = brisk_stat("map_failures"), parked0 = brisk_stat("remote_parked");
  /* No look at the inbox is due while it fills (a loaded machine may
   * pause the other thread for a whole short delay): it is parked whole,
   * under the faults, once the delay is short again. */
  brisk_option_set("PURGE_DELAY", 60000);
  pthread_t t;
  if (pthread_create(&t, NULL, freer, NULL) != 0) {
    FAIL("pthread_create");
    return;
  }
  pthread_join(t, NULL);
  /* this thread is idle now: the background thread parks its inbox */
  brisk_fault_injection_calls(BRISK_FAULT_MMAP);
  brisk_fault_injection(after < 0 ? -1 : after, 0);
  brisk_option_set("PURGE_DELAY", 1);
  int waited = 0;
  while (after >= 0 && brisk_stat("map_failures") == refused0 && waited < 5000) {
    sleep_ms(5);
    waited += 5;
  }
  brisk_fault_injection(-1, 0);
  double refused = brisk_stat("map_failures") - refused0;
  sleep_ms(20); /* a later look may park what is left, with memory */
  double parked = brisk_stat("remote_parked") - parked0;
  if (after >= 0 && refused <= 0) FAIL("round %d: test premise: no mmap was refused in %d ms (was the inbox parked?)", after, waited);
  for (int i = 0; i < N; i++) {
    blocks[i] = brisk_heap_malloc(heap, SIZE);
    if (blocks[i] == NULL) {
      FAIL("round %d: brisk_heap_malloc failed after parking", after);
      return;
    }
  }
  uintptr_t *sorted = malloc(sizeof(uintptr_t) * N);
  if (sorted == NULL) return;
  memcpy(sorted, blocks, sizeof(uintptr_t) * N);
  qsort(sorted, N, sizeof(uintptr_t), cmp_ptr);
  for (int i = 1; i < N; i++)
    if (sorted[i] - sorted[i - 1] < SIZE) {
      FAIL("round %d: blocks %p and %p handed out at once overlap", after, (void *)sorted[i - 1], (void *)sorted[i]);
      break;
    }
  free(sorted);
  double used = in_use();
  if (used != N) FAIL("round %d: the heap counts %g blocks in use, %d live: blocks were lost", after, used, N);
  fill_all(0x2000u + (unsigned)after);
  int bad = check_all(0x2000u + (unsigned)after);
  if (bad >= 0) FAIL("round %d: block %d (%p) changed after all were written", after, bad, blocks[bad]);
  printf("test_park_faults: round %d: %g mmap refused, %g blocks parked\n", after, refused, parked);
  for (int i = 0; i < N; i++) brisk_free(blocks[i]);
  used = in_use();
  if (used != 0) FAIL("round %d: the heap counts %g blocks in use once all are freed", after, used);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (brisk_option_set("PURGE_DELAY", 1) != 0) {
    printf("test_park_faults: FAIL: brisk_option_set(PURGE_DELAY, 1)\n");
    return 1;
  }
  heap = brisk_heap_new();
  if (heap == NULL) {
    printf("test_park_faults: FAIL: brisk_heap_new\n");
    return 1;
  }
  for (int after = -1; after < 4; after++) run(after);
  brisk_heap_destroy(heap);
  long errors = brisk_errors_reported();
  if (errors != 0) FAIL("brisk reported %ld bad inputs; this test makes none", errors);
  printf("test_park_faults: %s\n", failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
