/* Memory freed by another thread goes back to the OS on time, whatever
 * the thread that allocated it does afterwards.
 *
 * In each case an owner thread allocates 64 MiB of blocks of one size and
 * writes them, hands them to one or four freeing threads, which free them
 * all and then sleep; the owner then sleeps (nanosleep), blocks (a
 * condition variable) or exits, and neither ever calls brisk again while
 * the main thread watches RSS (/proc/self/statm). What the blocks added to
 * RSS must fall below 5% of its peak within LIMIT_S of the last free: the
 * purge delay is the default 50 ms, and the background thread does the
 * work; an idle owner's inbox is looked at a delay after the first push,
 * parked once it stayed unchanged for a delay, and its memory purged one
 * to two delays later, so about four delays at most (0.2 s here); the
 * limit is twice that, and a path that waits for anything else (a thread
 * that never calls brisk again) misses it.
 * Sizes: small (256 B), medium (48 KiB), large (200,000 B) and huge
 * (3 MiB). Each case runs in a process of its own (this program run again
 * with the case's arguments), so that one case's memory is not another's.
 *
 *   test_remote_return                  every case
 *   test_remote_return SIZE FREERS MODE one case (MODE: sleep, block, exit,
 *                                       or open: asleep after freeing every
 *                                       64th block itself, so that the
 *                                       other frees take no inbox; 256 B) */
#include <brisk.h>

#include "brisk_errors.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TOTAL ((size_t)64 << 20)
#define MAX_FREERS 4
#define LIMIT_S 0.4
#define OWN_EVERY 64

static size_t size, count;
static int freers;
static const char *mode;
static void **blocks;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int handed, done_freeing, allocated;

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void sleep_s(double s) {
  struct timespec ts = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static long rss_kib(void) {
  FILE *f = fopen("/proc/self/statm", "r");
  long pages = 0, resident = 0;
  if (f == NULL || fscanf(f, "%ld %ld", &pages, &resident) != 2) {
    printf("test_remote_return: FAIL: cannot read /proc/self/statm\n");
    exit(1);
  }
  fclose(f);
  return resident * (sysconf(_SC_PAGESIZE) / 1024);
}

static void *owner(void *arg) {
  (void)arg;
  for (size_t i = 0; i < count; i++) {
    blocks[i] = malloc(size);
    if (blocks[i] == NULL) {
      printf("test_remote_return: FAIL: malloc(%zu) returned NULL\n", size);
      exit(1);
    }
    memset(blocks[i], (int)(i & 0xff) | 1, size);
  }
  /* open: the owner frees every OWN_EVERY-th block itself first, so that
   * its pages leave the full list and the other threads' frees all go
   * onto the pages' own lists, none through the inbox */
  if (strcmp(mode, "open") == 0)
    for (size_t i = 0; i < count; i += OWN_EVERY) free(blocks[i]);
  pthread_mutex_lock(&mu);
  allocated = 1;
  pthread_cond_broadcast(&cv);
  while (!handed) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  if (strcmp(mode, "exit") == 0) return NULL;
  if (strcmp(mode, "sleep") == 0 || strcmp(mode, "open") == 0) {
    for (;;) sleep_s(3600);
  }
  pthread_mutex_lock(&mu); /* block: a wait that never ends */
  for (;;) pthread_cond_wait(&cv, &mu);
}

static void *freer(void *arg) {
  size_t k = (size_t)(uintptr_t)arg;
  free(malloc(16)); /* a heap of its own: its frees are batched as a program's would be */
  pthread_mutex_lock(&mu);
  while (!handed) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  for (size_t i = k; i < count; i += (size_t)freers) {
    if (strcmp(mode, "open") == 0 && i % OWN_EVERY == 0) continue; /* the owner's */
    const unsigned char *p = blocks[i];
    if (p[0] != ((i & 0xff) | 1) || p[size - 1] != ((i & 0xff) | 1)) {
      printf("test_remote_return: FAIL: block %zu changed before it was freed\n", i);
      exit(1);
    }
    free(blocks[i]);
  }
  pthread_mutex_lock(&mu);
  done_freeing++;
  pthread_cond_broadcast(&cv);
  pthread_mutex_unlock(&mu);
  for (;;) sleep_s(3600); /* asleep after its last free */
}

static int run_case(void) {
  count = TOTAL / size;
  if (count < 8) count = 8;
  blocks = calloc(count, sizeof(void *));
  pthread_t t;
  pthread_t f[MAX_FREERS];
  for (int k = 0; k < freers; k++) pthread_create(&f[k], NULL, freer, (void *)(uintptr_t)k);
  sleep_s(0.1);
  long base = rss_kib();
  pthread_create(&t, NULL, owner, NULL);
  pthread_mutex_lock(&mu);
  while (!allocated) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  long peak = rss_kib();
  pthread_mutex_lock(&mu);
  handed = 1;
  pthread_cond_broadcast(&cv);
  while (done_freeing < freers) pthread_cond_wait(&cv, &mu);
  pthread_mutex_unlock(&mu);
  double t0 = now_s();
  long grown = peak - base, left = grown;
  double took = -1;
  /* open: the owner's own frees stay on its pages' local lists, resident
   * while it sleeps: its every 64th block (of 256 B) keeps one 4 KiB page
   * in four. What must happen on time is that every block the other
   * threads freed is parked and the rest purged: under 35% left. */
  bool open = strcmp(mode, "open") == 0;
  double others = (double)(count - (count + OWN_EVERY - 1) / OWN_EVERY);
  while (now_s() - t0 < LIMIT_S) {
    sleep_s(0.02);
    left = rss_kib() - base;
    if (open ? brisk_stat("remote_parked") >= others && left * 20 < grown * 7 : left * 20 < grown) {
      took = now_s() - t0;
      break;
    }
  }
  double share = grown > 0 ? 100.0 * (double)(left < 0 ? 0 : left) / (double)grown : 0;
  printf("test_remote_return: %zu-byte blocks, %d freeing thread%s, owner %s: %ld KiB at the peak, %.1f%% left",
         size, freers, freers > 1 ? "s" : "",
         strcmp(mode, "exit") == 0    ? "exited"
         : strcmp(mode, "sleep") == 0 ? "asleep"
         : strcmp(mode, "open") == 0  ? "asleep, its pages open"
                                      : "blocked",
         grown, share);
  printf(" (blocks parked %.0f, purged %.0f KiB)", brisk_stat("remote_parked"), brisk_stat("purged_bytes") / 1024);
  if (took >= 0) printf(" after %.2f s: ok\n", took);
  else if (open)
    printf(" after %.1f s: FAIL (%.0f blocks freed by the other threads must be parked, under 35%% left)\n",
           LIMIT_S, others);
  else
    printf(" after %.1f s: FAIL (must be under 5%%; background threads %.0f, rounds %.0f, remote frees %.0f, "
           "batches %.0f)\n",
           LIMIT_S, brisk_stat("background_threads"), brisk_stat("background_rounds"), brisk_stat("remote_frees"),
           brisk_stat("remote_batches"));
  fflush(stdout);
  _exit(took >= 0 ? 0 : 1);
}

int main(int argc, char **argv) {
  if (argc == 4) {
    size = strtoul(argv[1], NULL, 0);
    freers = atoi(argv[2]);
    mode = argv[3];
    if (size == 0 || freers < 1 || freers > MAX_FREERS) return 2;
    return run_case();
  }
  static const size_t sizes[] = {256, 48 * 1024, 200000, 3u << 20};
  static const char *const modes[] = {"sleep", "block", "exit", "sleep", "open"};
  int failed = 0, passed = 0;
  for (size_t s = 0; s < sizeof(sizes) / sizeof(sizes[0]); s++) {
    for (int m = 0; m < (sizes[s] == 256 ? 5 : 4); m++) {
      char sz[32], fr[8];
      snprintf(sz, sizeof(sz), "%zu", sizes[s]);
      snprintf(fr, sizeof(fr), "%d", m == 3 ? 4 : 1);
      const char *md = modes[m];
      fflush(stdout);
      pid_t pid = fork();
      if (pid == 0) {
        execl("/proc/self/exe", argv[0], sz, fr, md, (char *)NULL);
        _exit(127);
      }
      int st = 0;
      waitpid(pid, &st, 0);
      if (WIFEXITED(st) && WEXITSTATUS(st) == 0) passed++;
      else failed++;
    }
  }
  printf("%d passed, %d failed\n", passed, failed);
  return failed ? 1 : 0;
}
