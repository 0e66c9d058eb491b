/* What the large-block tests share: CHECK (which counts its failures in
 * `failures`, from any thread), page_round, the resident 4 KiB pages of a
 * range (mincore) and of blocks once freed (resident_after_wait), and
 * short sleeps.
 *
 * resident_pages(p, len): resident pages in [p, p + len), at most 4 MiB.
 * It allocates nothing, so that no new page lands on the memory it looks
 * at; a failing mincore ends the test. */
#ifndef BRISK_TEST_LARGE_CHECKS_H
#define BRISK_TEST_LARGE_CHECKS_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

static int failures;
#define CHECK(cond, ...)                                          \
  do {                                                            \
    if (!(cond)) {                                                \
      __atomic_fetch_add(&failures, 1, __ATOMIC_RELAXED);         \
      printf("FAIL %s:%d: ", __FILE__, __LINE__);                 \
      printf(__VA_ARGS__);                                        \
      printf("\n");                                               \
    }                                                             \
  } while (0)

static __attribute__((unused)) size_t page_round(size_t n) { return (n + 4095) & ~(size_t)4095; }

static __attribute__((unused)) size_t resident_pages(const void *p, size_t len) {
  static unsigned char v[1024];
  uintptr_t a = (uintptr_t)p & ~(uintptr_t)4095;
  size_t n = (len + ((uintptr_t)p - a) + 4095) / 4096;
  if (n > sizeof v || mincore((void *)a, n * 4096, v) != 0) {
    printf("FAIL: mincore failed\n");
    exit(1);
  }
  size_t r = 0;
  for (size_t i = 0; i < n; i++) r += v[i] & 1;
  return r;
}

static __attribute__((unused)) void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  nanosleep(&ts, NULL);
}

/* Resident pages of n blocks of `size` bytes, once none is left or 5 s
 * have passed (the purge delay is 50 ms; a loaded machine gets more). */
static __attribute__((unused)) size_t resident_after_wait(void *const *p, int n, size_t size) {
  size_t resident = 0;
  for (int t = 0; t < 100; t++) {
    sleep_ms(50);
    resident = 0;
    for (int i = 0; i < n; i++) resident += resident_pages(p[i], size);
    if (resident == 0) break;
  }
  return resident;
}

#endif
