/* One heap with more segments than its directory first holds: a
 * first-class heap takes 300 blocks of 1.9 MiB (two to a 4 MiB segment:
 * the directory grows from the set's own 8 entries to a page of 128, then
 * to 256 at the 129th segment, the old page unmapped), each block written
 * at both ends. The growth to 256 is refused once (the next mmap fails):
 * that allocation returns NULL with ENOMEM and changes nothing, and the
 * next one grows it. Then half the blocks are freed in a random order
 * (segments leave the directory, the last entry filling each gap) and
 * taken again, twice. Every block must keep what was written, and the
 * heap's counts must say every block and no more. Address space about
 * 600 MiB; little of it is touched. */
#include <brisk.h>

#include "brisk_errors.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { N = 300 };
#define SIZE ((size_t)1900 * 1024)
static unsigned char *b[N];
static int failures;
#define FAIL(...) do { failures++; printf("test_many_segments: FAIL: " __VA_ARGS__); printf("\n"); } while (0)

static double heap_num(brisk_heap_t *h, const char *key) {
  char buf[1024], k[64];
  if (brisk_heap_stats_json(h, buf, sizeof buf) == 0) return -1;
  snprintf(k, sizeof k, "\"%s\":", key);
  const char *at = strstr(buf, k);
  return at ? atof(at + strlen(k)) : -1;
}

static void stamp(int i) {
  b[i][0] = (unsigned char)i;
  b[i][SIZE - 1] = (unsigned char)(i * 7 + 1);
}
static void check(int i, const char *when) {
  if (b[i][0] != (unsigned char)i || b[i][SIZE - 1] != (unsigned char)(i * 7 + 1))
    FAIL("%s: block %d (%p) changed", when, i, (void *)b[i]);
}

static int live(void) {
  int n = 0;
  for (int i = 0; i < N; i++) n += b[i] != NULL;
  return n;
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  brisk_heap_t *h = brisk_heap_new();
  if (h == NULL) {
    printf("test_many_segments: FAIL: brisk_heap_new\n");
    return 1;
  }
  for (int i = 0; i < N; i++) {
    if (i == 256) { /* 128 segments, full: the directory's page is full */
      double at = heap_num(h, "segments");
      if (at != 128) FAIL("test premise: %g segments after 256 blocks, 128 expected", at);
      brisk_fault_injection_calls(BRISK_FAULT_MMAP);
      brisk_fault_injection(0, 0);
      errno = 0;
      void *q = brisk_heap_malloc(h, SIZE);
      int err = errno;
      brisk_fault_injection(-1, 0);
      if (q != NULL) FAIL("the directory's growth refused, brisk_heap_malloc still returned %p", q);
      else if (err != ENOMEM) FAIL("the directory's growth refused: errno %d, not ENOMEM", err);
      if (heap_num(h, "segments") != 128) FAIL("the refused growth changed the heap's segments");
      for (int k = 0; k < i; k++) check(k, "after the refused growth");
    }
    b[i] = brisk_heap_malloc(h, SIZE);
    if (b[i] == NULL) {
      FAIL("brisk_heap_malloc(%zu) #%d failed", SIZE, i);
      continue;
    }
    stamp(i);
  }
  double segs = heap_num(h, "segments");
  printf("test_many_segments: %d blocks of %zu B in %g segments\n", live(), SIZE, segs);
  if (segs <= 128) FAIL("test premise: %g segments, the directory's first page holds 128", segs);
  uint64_t r = 0x2545f4914f6cdd1dull;
  for (int pass = 0; pass < 2; pass++) {
    for (int k = 0; k < N; k++) {
      r ^= r << 13, r ^= r >> 7, r ^= r << 17;
      int i = (int)(r % N);
      if (b[i] == NULL || (r >> 32) % 2) continue;
      check(i, "before its free");
      brisk_free(b[i]);
      b[i] = NULL;
    }
    for (int i = 0; i < N; i++) {
      if (b[i] != NULL) {
        check(i, "while others were freed and taken again");
        continue;
      }
      b[i] = brisk_heap_malloc(h, SIZE);
      if (b[i] == NULL) FAIL("brisk_heap_malloc(%zu) #%d failed again", SIZE, i);
      if (b[i] != NULL) stamp(i);
    }
    double in_use = heap_num(h, "large_blocks");
    if (in_use != live()) FAIL("pass %d: the heap counts %g large blocks, %d live", pass, in_use, live());
    printf("test_many_segments: pass %d: %d blocks live, %g segments\n", pass, live(), heap_num(h, "segments"));
  }
  for (int i = 0; i < N; i++)
    if (b[i] != NULL) {
      check(i, "at the end");
      brisk_free(b[i]);
    }
  if (heap_num(h, "large_blocks") != 0) FAIL("large blocks still counted once all are freed");
  brisk_heap_destroy(h);
  long errors = brisk_errors_reported();
  if (errors != 0) FAIL("brisk reported %ld bad inputs; this test makes none", errors);
  printf("test_many_segments: %s\n", failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
