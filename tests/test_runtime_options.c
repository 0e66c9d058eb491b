/* Options changed while the program runs: brisk_option_get and
 * brisk_option_set (bad input and its exact lines: test_api_errors).
 *
 * ctest-labels: sanitize tsan
 *
 *   - every option of the table reads back its default, under NAME and
 *     BRISK_NAME alike, and what was set;
 *   - PURGE_DELAY: with -1 (never), freed large blocks stay resident; set
 *     to 10 ms, the waiting slices are purged (free_resident_bytes and RSS
 *     fall, purged_bytes grows) within 1.5 s, with no call into brisk that
 *     could purge (only brisk_stats_json, to read its figures): the
 *     waiting deadlines were brought forward and the background thread
 *     woken. (Under TSan, whose shadow memory stays resident, RSS is not
 *     checked.)
 *   - SEGMENT_CACHE: the empty segments kept after a burst are unmapped as
 *     soon as it is set to 0;
 *   - BACKGROUND: switched off while it sleeps until a deadline (300 ms),
 *     the thread runs no round when the deadline passes, and nothing is
 *     purged; switched on again, the
 *     memory goes back within 1.5 s, with no call into brisk that could
 *     purge;
 *   - ON_ERROR: set to 1 (abort), a bad free aborts right after its line;
 *     set back to 0, the process goes on (children);
 *   - SHOW_STATS: set to 1, the statistics are printed at exit, even when
 *     the program closed stderr first (a child);
 *   - while threads allocate and free, another changes the options, trims
 *     (brisk's malloc_trim) and walks every heap (brisk_stats_json) over
 *     and over: nothing breaks, and TSan sees no race.
 */
#define _GNU_SOURCE
#include <brisk.h>

#include "brisk_errors.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TEST_TAG "[runtime]"
#define TEST_FILE "test_runtime_options.c"
#define TEST_WIDTH 36
#include "sections.h"

static long get(const char *name) {
  long v = -999;
  int r = brisk_option_get(name, &v);
  return r == 0 ? v : -1000 - r;
}

static void set(const char *name, long v) {
  int r = brisk_option_set(name, v);
  CHECK(r == 0, "brisk_option_set(%s, %ld) = %d", name, v, r);
}

/* RSS from the OS, without calling into brisk. */
static long rss(void) {
  char buf[128];
  int fd = open("/proc/self/statm", O_RDONLY);
  if (fd < 0) return -1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  long size, res;
  if (sscanf(buf, "%ld %ld", &size, &res) != 2) return -1;
  return res * sysconf(_SC_PAGESIZE);
}

static void sleep_ms(long ms) {
  struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

#define MIB (1L << 20)

#if defined(__SANITIZE_THREAD__)
#define RSS_FOLLOWS 0 /* TSan's shadow of the burst stays resident */
#else
#define RSS_FOLLOWS 1
#endif

/* Wait up to `ms` until brisk keeps less than 4 MiB of free memory
 * resident, has purged `purged` bytes and (but under TSan) RSS is below
 * `rss_limit`. brisk_stats_json only reads: it purges nothing. Returns the
 * free resident bytes. */
static double wait_returned(double purged, long rss_limit, long ms) {
  double r;
  for (long t = 0;; t += 20) {
    r = brisk_stat("free_resident_bytes");
    if ((r < 4 * MIB && brisk_stat("purged_bytes") >= purged && (!RSS_FOLLOWS || rss() < rss_limit)) || t >= ms)
      return r;
    sleep_ms(20);
  }
}

static void test_defaults(void) {
  section("every option reads back");
  static const struct { const char *name; long def; } opts[] = {
      {"VERBOSE", 0}, {"SHOW_STATS", 0}, {"PURGE_DELAY", 50}, {"ON_ERROR", 0},
      {"BACKGROUND", 1}, {"SEGMENT_CACHE", 32}, {"HUGE_PAGES", 0}, {"FAULT_AFTER", -1}, {"FAULT_RATE", 0},
  };
  for (size_t i = 0; i < sizeof opts / sizeof opts[0]; i++) {
    char full[64];
    snprintf(full, sizeof full, "BRISK_%s", opts[i].name);
    CHECK(get(opts[i].name) == opts[i].def && get(full) == opts[i].def, "%s reads %ld (%s: %ld), default %ld",
          opts[i].name, get(opts[i].name), full, get(full), opts[i].def);
  }
  set("PURGE_DELAY", 123);
  CHECK(get("PURGE_DELAY") == 123 && brisk_stat("purge_delay_ms") == 123,
        "PURGE_DELAY set to 123 reads %ld, statistics say %g", get("PURGE_DELAY"), brisk_stat("purge_delay_ms"));
  set("BRISK_PURGE_DELAY", 50);
  CHECK(get("PURGE_DELAY") == 50, "BRISK_PURGE_DELAY set to 50 reads %ld", get("PURGE_DELAY"));
  section_end();
}

/* Large blocks in segments that stay in use: one block of each segment is
 * kept, so the rest become free slices of the heap (not empty segments). */
enum { LBLOCKS = 200, LSIZE = 3 * 65536 - 4096 };
static void *g_large[LBLOCKS];
static long burst_free_slices(brisk_heap_t *h) {
  for (int i = 0; i < LBLOCKS; i++) {
    g_large[i] = brisk_heap_malloc(h, LSIZE);
    if (g_large[i]) memset(g_large[i], 0x5c, LSIZE);
  }
  long peak = rss();
  for (int i = 0; i < LBLOCKS; i++)
    if (i % 20 != 0) { brisk_free(g_large[i]); g_large[i] = NULL; }
  return peak;
}
static void burst_end(void) {
  for (int i = 0; i < LBLOCKS; i++) { brisk_free(g_large[i]); g_large[i] = NULL; }
}

static void test_purge_delay(void) {
  section("PURGE_DELAY: deadlines come forward");
  set("PURGE_DELAY", -1);
  brisk_heap_t *h = brisk_heap_new();
  long base = rss();
  long peak = burst_free_slices(h);
  double purged0 = brisk_stat("purged_bytes");
  sleep_ms(300);
  long kept = rss();
  CHECK(brisk_stat("purged_bytes") == purged0 && (!RSS_FOLLOWS || kept > peak - 8 * MIB),
        "with PURGE_DELAY -1 freed memory went back: %g bytes purged, RSS %ld MiB, %ld at the peak",
        brisk_stat("purged_bytes") - purged0, kept / MIB, peak / MIB);
  CHECK(peak > base + 30 * MIB, "test premise: RSS %ld MiB after the burst, %ld MiB before", peak / MIB, base / MIB);
  double waiting = brisk_stat("free_resident_bytes");
  CHECK(waiting >= 30 * MIB, "test premise: %g bytes freed and resident", waiting);
  set("PURGE_DELAY", 10);
  double left = wait_returned(purged0 + 25 * MIB, base + 12 * MIB, 1500);
  long after = rss();
  printf("[runtime]   RSS %ld MiB, burst %ld MiB, kept with -1 %ld MiB (%.0f MiB free), once set to 10: %ld MiB "
         "(%.0f MiB free)\n", base / MIB, peak / MIB, kept / MIB, waiting / MIB, after / MIB, left / MIB);
  CHECK(left < 4 * MIB, "PURGE_DELAY -1 -> 10: %g bytes free and resident after 1.5 s", left);
  if (RSS_FOLLOWS)
    CHECK(after < base + 12 * MIB, "PURGE_DELAY -1 -> 10: RSS %ld MiB after 1.5 s (%ld MiB before the burst)",
          after / MIB, base / MIB);
  CHECK(brisk_stat("purged_bytes") >= purged0 + 25 * MIB, "purged_bytes %g -> %g", purged0,
        brisk_stat("purged_bytes"));
  burst_end();
  brisk_heap_destroy(h);
  set("PURGE_DELAY", 50);
  section_end();
}

static void test_segment_cache(void) {
  section("SEGMENT_CACHE: the surplus goes at once");
  enum { B = 64 };
  void *b[B];
  /* The heap the section before destroyed left its segments in the pool
   * until a purge delay has passed (they go after it whatever the cache
   * holds): past that delay first, so that they are not counted here. */
  sleep_ms(120);
  brisk_collect(true);
  for (int i = 0; i < B; i++) b[i] = brisk_malloc(1u << 20); /* large: 64 MiB, 16+ segments */
  double in_use = brisk_stat("segments");
  for (int i = 0; i < B; i++) brisk_free(b[i]);
  brisk_collect(false);
  double kept = brisk_stat("segments");
  set("SEGMENT_CACHE", 0);
  double after = brisk_stat("segments");

  printf("[runtime]   segments: %g with 64 MiB of large blocks, %g kept after the frees, %g with SEGMENT_CACHE 0\n",
         in_use, kept, after);
  CHECK(kept >= 14, "test premise: %g segments kept after freeing 64 MiB", kept);
  CHECK(after <= 3, "SEGMENT_CACHE 0: %g segments still mapped", after);
  set("SEGMENT_CACHE", 32);
  section_end();
}

static void test_background(void) {
  section("BACKGROUND: off and on again");
  brisk_heap_t *h = brisk_heap_new();
  set("PURGE_DELAY", 300);
  long base = rss();
  long peak = burst_free_slices(h); /* the running thread now sleeps until the deadline */
  set("BACKGROUND", 0);
  double rounds0 = brisk_stat("background_rounds"), purged0 = brisk_stat("purged_bytes");
  sleep_ms(700); /* far past the deadline */
  long kept = rss();
  double rounds1 = brisk_stat("background_rounds"), waiting = brisk_stat("free_resident_bytes");
  CHECK(rounds1 == rounds0, "with BACKGROUND 0 the thread ran %g rounds", rounds1 - rounds0);
  CHECK(waiting >= 30 * MIB && (!RSS_FOLLOWS || kept > peak - 8 * MIB),
        "with BACKGROUND 0 and no call into brisk, memory went back: %g bytes free and resident, RSS %ld MiB "
        "(peak %ld)", waiting, kept / MIB, peak / MIB);
  set("BACKGROUND", 1);
  double left = wait_returned(purged0 + 25 * MIB, base + 12 * MIB, 1500);
  long after = rss();
  printf("[runtime]   RSS %ld MiB, burst %ld MiB, %ld MiB 700 ms later with the thread off, %ld MiB once on\n",
         base / MIB, peak / MIB, kept / MIB, after / MIB);
  CHECK(left < 4 * MIB && brisk_stat("purged_bytes") >= purged0 + 25 * MIB,
        "BACKGROUND 0 -> 1: %g bytes free and resident, %g purged after 1.5 s", left,
        brisk_stat("purged_bytes") - purged0);
  if (RSS_FOLLOWS)
    CHECK(after < base + 12 * MIB, "BACKGROUND 0 -> 1: RSS %ld MiB after 1.5 s (%ld MiB before the burst)",
          after / MIB, base / MIB);
  CHECK(brisk_stat("background_rounds") > rounds1, "switched on again, the thread ran no round");
  CHECK(brisk_stat("background_threads") == 1, "background_threads %g", brisk_stat("background_threads"));
  burst_end();
  brisk_heap_destroy(h);
  set("PURGE_DELAY", 50);
  section_end();
}

/* Run fn in a child; its stderr in err (len), its wait status returned. */
static int child(void (*fn)(void), char *err, size_t len) {
  int p[2];
  if (pipe(p) != 0) return -1;
  fflush(stdout);
  pid_t pid = fork();
  if (pid == 0) {
    dup2(p[1], 2);
    close(p[0]);
    close(p[1]);
    brisk_option_set("BACKGROUND", 0); /* no thread in the child (TSan refuses one after a fork) */
    fn();
    _exit(0);
  }
  close(p[1]);
  size_t got = 0;
  ssize_t n;
  while (got + 1 < len && (n = read(p[0], err + got, len - 1 - got)) > 0) got += (size_t)n;
  err[got] = '\0';
  close(p[0]);
  int status = 0;
  waitpid(pid, &status, 0);
  return status;
}

static char g_stack_like[64] __attribute__((aligned(16)));

static void child_abort(void) {
  brisk_option_set("ON_ERROR", 1);
  brisk_free(g_stack_like);
  _exit(3); /* not reached */
}
static void child_report(void) {
  brisk_option_set("ON_ERROR", 1);
  brisk_option_set("ON_ERROR", 0);
  brisk_free(g_stack_like);
  _exit(4);
}
static void child_stats(void) {
  brisk_free(brisk_malloc(1000));
  brisk_option_set("SHOW_STATS", 1);
  close(2); /* as coreutils do before exit */
  exit(0);
}

static void test_on_error_and_show_stats(void) {
  section("ON_ERROR, SHOW_STATS");
  char err[16384];
  char want[128];
  snprintf(want, sizeof want, "brisk: error: brisk_free(%p): pointer was not allocated by brisk\n",
           (void *)g_stack_like);
  int st = child(child_abort, err, sizeof err);
  CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT && strcmp(err, want) == 0,
        "ON_ERROR set to 1: a bad free ended the child with status %d, stderr \"%s\"", st, err);
  st = child(child_report, err, sizeof err);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 4 && strcmp(err, want) == 0,
        "ON_ERROR set to 1, then 0: status %d, stderr \"%s\"", st, err);
  st = child(child_stats, err, sizeof err);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(err, "brisk: brisk statistics:\n") &&
            strstr(err, "brisk:   mapped_bytes: "),
        "SHOW_STATS set to 1: status %d, stderr \"%.200s\"", st, err);
  section_end();
}

/* ------------------------------------------------------------------ */

enum { WORKERS = 3 };
static int g_stop;
static int (*g_trim)(size_t);

static void *worker(void *arg) {
  unsigned seed = (unsigned)(uintptr_t)arg;
  void *slots[64] = {0};
  while (!__atomic_load_n(&g_stop, __ATOMIC_RELAXED)) {
    seed = seed * 1103515245u + 12345u;
    unsigned i = (seed >> 8) % 64;
    brisk_free(slots[i]);
    size_t n = (seed >> 16) % 4 == 0 ? 70000 + (seed % 300000) : 16 + (seed % 5000);
    slots[i] = brisk_malloc(n);
    if (slots[i]) memset(slots[i], (int)i, 16);
  }
  for (int i = 0; i < 64; i++) brisk_free(slots[i]);
  brisk_collect(true);
  return NULL;
}

static void test_concurrent(void) {
  section("changes while threads allocate");
  void *lib = dlopen("libbrisk.so.0", RTLD_NOW | RTLD_NOLOAD);
  g_trim = lib ? (int (*)(size_t))dlsym(lib, "malloc_trim") : NULL;
  CHECK(g_trim != NULL, "brisk's malloc_trim not found in libbrisk.so.0");
  pthread_t t[WORKERS];
  g_stop = 0;
  for (int i = 0; i < WORKERS; i++) pthread_create(&t[i], NULL, worker, (void *)(uintptr_t)(i + 1));
  static const long delays[] = {0, 5, 50, -1, 1};
  char buf[8192];
  for (int round = 0; round < 60; round++) {
    set("PURGE_DELAY", delays[round % 5]);
    set("SEGMENT_CACHE", round % 3 == 0 ? 0 : 4 * (round % 5));
    set("BACKGROUND", round % 7 != 3);
    set("ON_ERROR", 0);
    if (g_trim) g_trim(0);
    brisk_stats_json(buf, sizeof buf);
    brisk_collect(round & 1);
    sleep_ms(2);
  }
  __atomic_store_n(&g_stop, 1, __ATOMIC_RELAXED);
  for (int i = 0; i < WORKERS; i++) pthread_join(t[i], NULL);
  set("PURGE_DELAY", 50);
  set("SEGMENT_CACHE", 32);
  set("BACKGROUND", 1);
  CHECK(get("PURGE_DELAY") == 50 && get("SEGMENT_CACHE") == 32 && get("BACKGROUND") == 1, "options not restored");
  void *p = brisk_malloc(100);
  CHECK(p != NULL, "brisk_malloc after the changes failed");
  brisk_free(p);
  section_end();
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  test_defaults();
  test_purge_delay();
  test_segment_cache();
  test_background();
  test_on_error_and_show_stats();
  test_concurrent();
  long errors = brisk_errors_reported();
  CHECK(errors == 0, "brisk reported %ld bad inputs in this process", errors);
  if (g_failures) {
    printf("[runtime] FAILED: %ld checks\n", g_failures);
    return 1;
  }
  printf("[runtime] all checks passed\n");
  return 0;
}
