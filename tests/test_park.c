/* Parking (the background thread taking an idle owner's inbox, purging the
 * pages its blocks fill, and the owner taking them back) while the owner
 * comes and goes. With a purge delay of 1 ms, two producer threads
 * allocate bursts of blocks (16 B .. 48 KiB), fill each with a pattern of
 * its address, and pass them to two consumer threads, which check and
 * free them; between bursts a producer sleeps 0..30 ms (one time in
 * eight 150 ms), long enough for its inbox to be parked, and keeps a few blocks of its own alive across
 * the sleeps, checked after each. Every block handed out must be whole,
 * never one still alive (a parked block given out twice would overwrite a
 * live one's pattern), brisk must report nothing, and parking must have
 * happened (remote_parked > 0).
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
#include <time.h>

#define QUEUE 4096
#define PRODUCERS 2
#define CONSUMERS 2
#define KEEP 64

static _Atomic(uintptr_t) queue[QUEUE];
static _Atomic int stop;
static _Atomic long produced, consumed;

static void fail(const char *what, const void *p) {
  printf("test_park: FAIL: %s (%p)\n", what, p);
  exit(1);
}

static uint64_t rnd(uint64_t *s) {
  *s ^= *s << 13;
  *s ^= *s >> 7;
  *s ^= *s << 17;
  return *s;
}

/* Block layout: size in the first word, then a byte pattern of the address. */
static void fill(unsigned char *p, size_t n) {
  memcpy(p, &n, sizeof(n));
  for (size_t i = sizeof(n); i < n; i++) p[i] = (unsigned char)(((uintptr_t)p >> 4) + i);
}

static void check(const unsigned char *p) {
  size_t n;
  memcpy(&n, p, sizeof(n));
  if (n < sizeof(n) || n > (48u << 10)) fail("a block's size word changed", p);
  for (size_t i = sizeof(n); i < n; i++)
    if (p[i] != (unsigned char)(((uintptr_t)p >> 4) + i)) fail("a block's contents changed", p);
}

static size_t pick_size(uint64_t *s) {
  uint64_t r = rnd(s);
  if (r % 8 == 0) return 8192 + r % (40u << 10);
  return 16 + r % 1024;
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

static void *producer(void *arg) {
  uint64_t s = 0x9e3779b97f4a7c15ull * (uintptr_t)arg + 1;
  unsigned char *keep[KEEP];
  for (int i = 0; i < KEEP; i++) {
    size_t n = pick_size(&s);
    keep[i] = brisk_malloc(n);
    if (keep[i] == NULL) fail("malloc", NULL);
    fill(keep[i], n);
  }
  while (!atomic_load(&stop)) {
    int burst = 200 + (int)(rnd(&s) % 2000);
    for (int k = 0; k < burst; k++) {
      size_t n = pick_size(&s);
      unsigned char *p = brisk_malloc(n);
      if (p == NULL) fail("malloc", NULL);
      fill(p, n);
      size_t slot = rnd(&s) % QUEUE;
      uintptr_t old;
      while ((old = atomic_exchange(&queue[slot], (uintptr_t)p)) != 0) {
        p = (unsigned char *)old; /* a block not consumed yet: keep it moving */
        slot = (slot + 1) % QUEUE;
      }
      atomic_fetch_add(&produced, 1);
    }
    /* idle: its inbox may be parked once the consumers are done with its
     * blocks (every eighth sleep long enough for that on a slow build) */
    sleep_ms(rnd(&s) % 8 == 0 ? 150 : (long)(rnd(&s) % 31));
    for (int i = 0; i < KEEP; i++) check(keep[i]);
    int j = (int)(rnd(&s) % KEEP); /* one of the kept blocks replaced */
    brisk_free(keep[j]);
    size_t n = pick_size(&s);
    keep[j] = brisk_malloc(n);
    if (keep[j] == NULL) fail("malloc", NULL);
    fill(keep[j], n);
  }
  for (int i = 0; i < KEEP; i++) {
    check(keep[i]);
    brisk_free(keep[i]);
  }
  return NULL;
}

static void *consumer(void *arg) {
  size_t slot = (uintptr_t)arg * 977;
  while (!atomic_load(&stop)) {
    for (int k = 0; k < 256; k++) {
      slot = (slot + 1) % QUEUE;
      uintptr_t p = atomic_exchange(&queue[slot], 0);
      if (p == 0) continue;
      check((unsigned char *)p);
      brisk_free((void *)p);
      atomic_fetch_add(&consumed, 1);
    }
  }
  return NULL;
}

int main(void) {
  if (brisk_option_set("PURGE_DELAY", 1) != 0) fail("brisk_option_set(PURGE_DELAY, 1)", NULL);
  pthread_t p[PRODUCERS], c[CONSUMERS];
  for (int i = 0; i < PRODUCERS; i++) pthread_create(&p[i], NULL, producer, (void *)(uintptr_t)(i + 1));
  for (int i = 0; i < CONSUMERS; i++) pthread_create(&c[i], NULL, consumer, (void *)(uintptr_t)(i + 1));
  struct timespec ts = {UNDER_TSAN ? 4 : 3, 0};
  nanosleep(&ts, NULL);
  atomic_store(&stop, 1);
  for (int i = 0; i < PRODUCERS; i++) pthread_join(p[i], NULL);
  for (int i = 0; i < CONSUMERS; i++) pthread_join(c[i], NULL);
  for (size_t i = 0; i < QUEUE; i++) {
    uintptr_t b = atomic_exchange(&queue[i], 0);
    if (b) {
      check((unsigned char *)b);
      brisk_free((void *)b);
      atomic_fetch_add(&consumed, 1);
    }
  }
  double parked = brisk_stat("remote_parked");
  long errors = brisk_errors_reported();
  printf("test_park: %ld blocks produced, %ld consumed, %.0f parked by the background thread, %ld errors\n",
         (long)produced, (long)consumed, parked, errors);
  if (consumed != produced) fail("blocks were lost", NULL);
  if (errors != 0) fail("brisk reported bad inputs; this test makes none", NULL);
  if (parked <= 0) fail("no block was parked: the test did not reach what it checks", NULL);
  printf("test_park: passed\n");
  return 0;
}
