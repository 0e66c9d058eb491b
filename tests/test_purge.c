/* Memory goes back to the OS after a burst: 256 MiB of 64-byte blocks are
 * allocated (and written) and freed; RSS must then fall well below the
 * peak while the program keeps running, without any call to brisk_collect.
 * Every block carries a pattern of its index, checked in full before it is
 * freed. The purge runs BRISK_PURGE_DELAY (50 ms) after the frees; the test
 * waits for it up to 10 s, a bound for a loaded machine, not a speed target.
 *
 * Then brisk_collect(true) returns the memory now: in a re-executed child with
 * BRISK_PURGE_DELAY=60000, 64 MiB of blocks are freed, RSS stays up (the
 * delay is honoured), and right after brisk_collect(true) most of it is gone.
 *
 * Then memory one thread gave back is what the next thread's blocks use:
 * in a child with the same delay, a thread frees 12 MiB of 1 MiB blocks
 * (their segments go to the pool, resident), and the main thread, whose own
 * segment has room for 3 such blocks in slices never touched, allocates and
 * writes 3 of them: RSS must not grow by their size (it takes a pooled
 * segment's resident slices rather than fault in fresh ones beside them).
 * ctest-labels: sanitize */
#include <brisk.h>

#include "brisk_errors.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

static double rss_mib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (f == NULL || fscanf(f, "%ld %ld", &pages, &resident) != 2) {
    fprintf(stderr, "test_purge: cannot read /proc/self/statm\n");
    exit(1);
  }
  fclose(f);
  return (double)resident * (double)sysconf(_SC_PAGESIZE) / (1024.0 * 1024.0);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Word k of block i. */
static inline uint64_t pat(size_t i, size_t k) {
  return ((uint64_t)i * 0x9E3779B97F4A7C15ull) ^ ((uint64_t)k * 0xD1B54A32D192ED03ull);
}

/* The child: with a 60 s purge delay nothing goes back by itself here;
 * brisk_collect(true) must return it at once. */
static int collect_child(void) {
  const size_t n = ((size_t)64 << 20) / 64;
  void **slots = mmap(NULL, n * sizeof(void *), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (slots == MAP_FAILED) { perror("mmap"); return 1; }
  free(malloc(16));
  double base = rss_mib();
  for (size_t i = 0; i < n; i++) {
    uint64_t *b = malloc(64);
    if (b == NULL) { fprintf(stderr, "test_purge: malloc failed\n"); return 1; }
    for (size_t k = 0; k < 8; k++) b[k] = pat(i, k);
    slots[i] = b;
  }
  double peak = rss_mib();
  for (size_t i = 0; i < n; i++) {
    const uint64_t *b = slots[i];
    for (size_t k = 0; k < 8; k++)
      if (b[k] != pat(i, k)) {
        fprintf(stderr, "test_purge: FAIL: block %zu changed at offset %zu\n", i, k * 8);
        return 1;
      }
    free(slots[i]);
  }
  double after_free = rss_mib();
  brisk_collect(true);
  double after_collect = rss_mib();
  printf("test_purge: BRISK_PURGE_DELAY=60000: RSS before %.1f MiB, after 64 MiB of 64 B blocks %.1f MiB, after "
         "free %.1f MiB, right after brisk_collect(true) %.1f MiB\n", base, peak, after_free, after_collect);
  double burst = peak - base;
  if (burst < 50) {
    fprintf(stderr, "test_purge: FAIL: the 64 MiB burst raised RSS by %.1f MiB only\n", burst);
    return 1;
  }
  if (after_free - base < 0.5 * burst) {
    fprintf(stderr, "test_purge: FAIL: with a 60 s purge delay, %.0f%% of the burst went back to the OS at once\n",
            100.0 * (1 - (after_free - base) / burst));
    return 1;
  }
  if (after_collect - base > 0.2 * burst) {
    fprintf(stderr, "test_purge: FAIL: right after brisk_collect(true) RSS still holds %.0f%% of the burst\n",
            100.0 * (after_collect - base) / burst);
    return 1;
  }
  return brisk_errors_reported() == 0 ? 0 : 1;
}

/* The reuse child's thread: 12 blocks of 1 MiB (too large for the span
 * cache), written, checked, freed on this thread. */
enum { REUSE_BLOCKS = 12, REUSE_TAKE = 3 };
#define REUSE_SIZE ((size_t)1 << 20)

static void fill_block(uint64_t *b, size_t i) {
  for (size_t k = 0; k < REUSE_SIZE / 8; k++) b[k] = pat(i, k);
}

static int check_block(const uint64_t *b, size_t i) {
  for (size_t k = 0; k < REUSE_SIZE / 8; k++)
    if (b[k] != pat(i, k)) {
      fprintf(stderr, "test_purge: FAIL: block %zu changed at offset %zu\n", i, k * 8);
      return 1;
    }
  return 0;
}

static void *reuse_thread(void *arg) {
  (void)arg;
  uint64_t *blocks[REUSE_BLOCKS];
  for (size_t i = 0; i < REUSE_BLOCKS; i++) {
    blocks[i] = malloc(REUSE_SIZE);
    if (blocks[i] == NULL) return (void *)1;
    fill_block(blocks[i], i);
  }
  for (size_t i = 0; i < REUSE_BLOCKS; i++) {
    if (check_block(blocks[i], i)) return (void *)1;
    free(blocks[i]);
  }
  return NULL;
}

static int reuse_child(void) {
  free(malloc(16)); /* the main thread's heap: one segment, its other slices clean */
  pthread_t t;
  void *ret = NULL;
  if (pthread_create(&t, NULL, reuse_thread, NULL) != 0 || pthread_join(t, &ret) != 0 || ret != NULL) {
    fprintf(stderr, "test_purge: FAIL: the thread of 1 MiB blocks failed\n");
    return 1;
  }
  double before = rss_mib();
  uint64_t *mine[REUSE_TAKE];
  for (size_t i = 0; i < REUSE_TAKE; i++) {
    mine[i] = malloc(REUSE_SIZE);
    if (mine[i] == NULL) { fprintf(stderr, "test_purge: malloc failed\n"); return 1; }
    fill_block(mine[i], 100 + i);
  }
  double after = rss_mib();
  for (size_t i = 0; i < REUSE_TAKE; i++) {
    if (check_block(mine[i], 100 + i)) return 1;
    free(mine[i]);
  }
  printf("test_purge: a thread freed %d MiB (pooled, resident); %d MiB allocated and written by another "
         "thread then raised RSS by %.1f MiB\n", REUSE_BLOCKS, REUSE_TAKE, after - before);
  if (after - before > 0.5 * REUSE_TAKE) {
    fprintf(stderr, "test_purge: FAIL: the new blocks faulted in %.1f MiB of fresh memory while %d MiB that "
            "another thread gave back was still resident\n", after - before, REUSE_BLOCKS);
    return 1;
  }
  return brisk_errors_reported() == 0 ? 0 : 1;
}

/* Re-execute this test as `mode` with a 60 s purge delay. */
static int run_child(const char *mode) {
  fflush(stdout);
  pid_t pid = fork();
  if (pid < 0) { perror("fork"); return 1; }
  if (pid == 0) {
    setenv("BRISK_PURGE_DELAY", "60000", 1);
    execl("/proc/self/exe", "test_purge", mode, (char *)NULL);
    _exit(127);
  }
  int st;
  if (waitpid(pid, &st, 0) != pid) { perror("waitpid"); return 1; }
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
  fprintf(stderr, "test_purge: FAIL: the %s child %s %d\n", mode,
          WIFEXITED(st) ? "exited with status" : "was killed by signal", WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
  return 1;
}

int main(int argc, char **argv) {
  if (argc > 1 && strcmp(argv[1], "collect") == 0) return collect_child();
  if (argc > 1 && strcmp(argv[1], "reuse") == 0) return reuse_child();
  const size_t n = ((size_t)256 << 20) / 64;
  const double wait_max = 10.0;
  /* The pointer array itself comes from the system, not from the heap
   * under test, so that it does not count in what must fall. */
  void **v = calloc(1, 16); /* warm up the thread heap */
  free(v);
  void **slots = mmap(NULL, n * sizeof(void *), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (slots == MAP_FAILED) { perror("mmap"); return 1; }
  double base = rss_mib();
  for (size_t i = 0; i < n; i++) {
    uint64_t *b = malloc(64);
    if (b == NULL) { fprintf(stderr, "test_purge: malloc failed\n"); return 1; }
    for (size_t k = 0; k < 8; k++) b[k] = pat(i, k);
    slots[i] = b;
  }
  double peak = rss_mib();
  for (size_t i = 0; i < n; i++) {
    const uint64_t *b = slots[i];
    for (size_t k = 0; k < 8; k++)
      if (b[k] != pat(i, k)) {
        fprintf(stderr, "test_purge: FAIL: block %zu at %p changed at offset %zu\n", i, slots[i], k * 8);
        return 1;
      }
    free(slots[i]);
  }
  munmap(slots, n * sizeof(void *));
  double after_free = rss_mib();
  /* Keep running: small allocations, until RSS has fallen. */
  double start = now_s(), now = after_free;
  unsigned long sink = 0;
  while (now_s() - start < wait_max) {
    for (int k = 0; k < 1000; k++) {
      char *p = malloc(32 + (size_t)(k % 200));
      if (p == NULL) { fprintf(stderr, "test_purge: malloc failed\n"); return 1; }
      p[0] = (char)k;
      sink += (unsigned char)p[0];
      free(p);
    }
    usleep(10000);
    now = rss_mib();
    if (now - base < 0.10 * (peak - base)) break;
  }
  double waited = now_s() - start;
  printf("test_purge: RSS before %.1f MiB, after 256 MiB of 64 B blocks %.1f MiB, right after "
         "free %.1f MiB, after %.2f s %.1f MiB (%.1f%% of the burst) [%lu]\n",
         base, peak, after_free, waited, now, 100.0 * (now - base) / (peak - base), sink & 1);
  if (peak - base < 200) {
    fprintf(stderr, "test_purge: FAIL: the burst did not raise RSS as expected\n");
    return 1;
  }
  if (now - base > 0.10 * (peak - base)) {
    fprintf(stderr, "test_purge: FAIL: RSS still holds %.1f%% of the burst after %.0f s\n",
            100.0 * (now - base) / (peak - base), wait_max);
    return 1;
  }
  long errors = brisk_errors_reported();
  if (errors != 0) {
    fprintf(stderr, "test_purge: FAIL: brisk reported %ld bad inputs; this test makes none\n", errors);
    return 1;
  }
  if (run_child("collect") != 0) return 1;
  if (run_child("reuse") != 0) return 1;
  printf("3 passed, 0 failed\n");
  return 0;
}
