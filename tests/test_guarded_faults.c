/* Guarded samples while the OS refuses calls (fault injection):
 *   - the region's mapping refused at the first sample (mmap): a warning
 *     ("guarded samples: the OS refused"), no sample is made, and every
 *     allocation is served as usual (in a forked child: the refusal is for
 *     the process's life);
 *   - opening and closing slots refused at random (mprotect), and their
 *     pages' purges (madvise): 20,000 allocations of 1 B..32 KiB, one in
 *     two sampled, by malloc, calloc and realloc, 256 kept live and freed
 *     at random; every block keeps what was written into it until its free,
 *     every calloc block reads zero, sizes and alignment as C requires for
 *     the size; the refusals must have happened (protect_failures) and
 *     samples been made (guarded_allocs), and brisk must report no bad
 *     input. A slot whose close is refused is dropped (a warning).
 *
 * ctest-labels: sanitize */
#define _GNU_SOURCE
#include <brisk.h>

#include "brisk_errors.h"

#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

static int failures;
#define FAIL(...) do { failures++; printf("test_guarded_faults: FAIL: " __VA_ARGS__); printf("\n"); } while (0)

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}

static unsigned char pat(const void *p, size_t i) { return (unsigned char)(((uintptr_t)p >> 4) + i * 31u + 7u); }
static void fill(unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++) p[i] = pat(p, i);
}
static long bad_at(const unsigned char *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i] != pat(p, i)) return (long)i;
  return -1;
}
static size_t c_alignment(size_t n) { /* what C requires for a block of n bytes */
  size_t a = 1;
  while (a < 16 && a * 2 <= n) a *= 2;
  return a;
}

static int churn(int rounds) { /* 0: every block whole */
  int bad = 0;
  for (int i = 0; i < rounds && !bad; i++) {
    size_t n = 1 + (size_t)(i % 100) * 70;
    unsigned char *q = malloc(n);
    bad |= q == NULL;
    if (q) {
      fill(q, n);
      bad |= bad_at(q, n) >= 0;
      free(q);
    }
  }
  return bad;
}

static void setup_refused(void) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    /* The heap, its pages and its sampler's state made first (a rate no
     * sample comes at here), so that only the region asks for memory. */
    brisk_option_set("GUARD_RATE", 1000000000);
    int bad = churn(1000);
    char path[] = "/tmp/brisk-guarded-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) _exit(16);
    unlink(path);
    int err = dup(2);
    dup2(fd, 2); /* the warning, read back below */
    brisk_fault_injection_calls(BRISK_FAULT_MMAP);
    brisk_fault_injection(0, 0);
    brisk_option_set("GUARD_RATE", 1);
    bad |= churn(1000);
    brisk_fault_injection(-1, 0);
    bad |= churn(1000);
    dup2(err, 2);
    char said[4096] = {0};
    ssize_t got = pread(fd, said, sizeof said - 1, 0);
    if (got <= 0 || strstr(said, "brisk: warning: guarded samples: the OS refused") == NULL) bad |= 2;
    if (brisk_stat("guarded_allocs") != 0) bad |= 4;
    if (brisk_errors_reported() != 0) bad |= 8;
    _exit(bad);
  }
  int status = 0;
  waitpid(pid, &status, 0);
  if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
    FAIL("the region refused: status %d (1: an allocation failed or a block changed, 2: no warning that the "
         "region was refused, 4: samples were made, 8: errors reported)", WIFEXITED(status) ? WEXITSTATUS(status) : -1);
  else
    printf("test_guarded_faults: the region refused: no sample, every allocation served as usual\n");
}

enum { LIVE = 256, OPS = 20000 };
static unsigned char *live[LIVE];
static size_t live_n[LIVE];

static void release(int k) {
  if (live[k] == NULL) return;
  long at = bad_at(live[k], live_n[k]);
  if (at >= 0) FAIL("block %p (%zu B) changed at byte %ld before its free", (void *)live[k], live_n[k], at);
  free(live[k]);
  live[k] = NULL;
}

static void checked_new(unsigned char *p, size_t n, int zero, const char *fn) {
  if ((uintptr_t)p % c_alignment(n) != 0) FAIL("%s(%zu) = %p: not aligned as C requires", fn, n, (void *)p);
  if (malloc_usable_size(p) < n) FAIL("%s(%zu) = %p: usable size %zu", fn, n, (void *)p, malloc_usable_size(p));
  if (zero)
    for (size_t i = 0; i < n; i++)
      if (p[i] != 0) {
        FAIL("calloc(%zu) = %p: byte %zu is 0x%02x, not zero", n, (void *)p, i, p[i]);
        break;
      }
}

static void slots_refused(void) {
  brisk_option_set("GUARD_RATE", 2);
  double refused0 = brisk_stat("protect_failures"), guarded0 = brisk_stat("guarded_allocs");
  brisk_fault_injection_calls(BRISK_FAULT_MPROTECT | BRISK_FAULT_MADVISE);
  brisk_fault_injection(-1, 300000);
  for (int op = 0; op < OPS; op++) {
    int k = (int)(next() % LIVE);
    uint64_t r = next();
    size_t n = 1 + (size_t)(r >> 40) % (32 * 1024);
    if (live[k] != NULL && (r & 3) == 0) { /* grow or shrink in place of a free */
      long at = bad_at(live[k], live_n[k]);
      if (at >= 0) FAIL("block %p changed at byte %ld before its realloc", (void *)live[k], at);
      unsigned char *q = realloc(live[k], n);
      if (q == NULL) continue; /* the old block is kept */
      size_t keep = n < live_n[k] ? n : live_n[k];
      for (size_t i = 0; i < keep; i++)
        if (q[i] != pat(live[k], i)) {
          FAIL("realloc(%p, %zu) = %p lost byte %zu", (void *)live[k], n, (void *)q, i);
          break;
        }
      checked_new(q, n, 0, "realloc");
      fill(q, n);
      live[k] = q;
      live_n[k] = n;
      continue;
    }
    release(k);
    int zero = (r & 4) != 0;
    unsigned char *p = zero ? calloc(1, n) : malloc(n);
    if (p == NULL) {
      FAIL("%s(%zu) failed", zero ? "calloc" : "malloc", n);
      continue;
    }
    checked_new(p, n, zero, zero ? "calloc" : "malloc");
    fill(p, n);
    live[k] = p;
    live_n[k] = n;
  }
  brisk_fault_injection(-1, 0);
  brisk_fault_injection_calls(BRISK_FAULT_MMAP);
  for (int k = 0; k < LIVE; k++) release(k);
  brisk_option_set("GUARD_RATE", 0);
  double refused = brisk_stat("protect_failures") - refused0, guarded = brisk_stat("guarded_allocs") - guarded0;
  printf("test_guarded_faults: %d operations, %g samples, %g mprotect calls refused\n", OPS, guarded, refused);
  if (guarded <= 0) FAIL("test premise: no guarded sample was made");
  if (refused <= 0) FAIL("test premise: no mprotect was refused");
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  setup_refused();
  slots_refused();
  long errors = brisk_errors_reported();
  if (errors != 0) FAIL("brisk reported %ld bad inputs; this test makes none", errors);
  printf("test_guarded_faults: %s\n", failures ? "FAILED" : "passed");
  return failures ? 1 : 0;
}
