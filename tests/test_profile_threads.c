/* The heap profiler with threads, signals and fork.
 *
 * ctest-labels: sanitize tsan
 *
 * The test runs itself again with BRISK_PROFILE (in a new directory),
 * BRISK_PROFILE_RATE=4096 and BRISK_PROFILE_SIGNAL=SIGUSR2. Then:
 *
 *   1. four threads allocate, reallocate and free blocks of 16 B to 3 MiB
 *      (brisk_malloc, so that the ThreadSanitizer build profiles them too),
 *      handing one in eight to another thread to free. Meanwhile the main
 *      thread sends itself SIGUSR2 every few milliseconds and asks for
 *      dumps (brisk_profile_dump) of its own. Every call returns, the
 *      signal's dumps appear (the background thread writes them) and every
 *      dump is well formed: a header that is the sum of its stacks, then
 *      MAPPED_LIBRARIES.
 *   2. the threads then free everything but keep_site's blocks (2 MiB of
 *      256 B blocks each): a dump finds 8 MiB in use, within 10%.
 *   3. while the threads allocate again, the main thread forks, and so
 *      does one of the threads. Each child allocates 4 MiB (child_site),
 *      dumps, checks that its dump holds that and what it inherited, and
 *      exits (its exit dump is named by its own pid). A child that hangs
 *      is killed by alarm() and reported.
 *
 * Under ThreadSanitizer the volume is smaller and the children run no
 * background thread (a thread started after a fork of a threaded process
 * is beyond what it supports).
 */
#define _GNU_SOURCE
#include "brisk.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "under_tsan.h"

#define NT 4
#define WINDOW 256
#define KEEP_BLOCKS 8192
#define KEEP_SIZE 256
#define CHILD_BLOCKS 4096
#define CHILD_SIZE 1024
#define CHILD_TIMEOUT 60

static char g_dir[512];
static int g_failed;
static int g_in_child;

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "[profile_threads] FAIL%s: ", g_in_child ? " (in a child)" : "");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  g_failed = 1;
  if (g_in_child) _exit(3);
}

static void sleep_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

/* ---- reading a dump ------------------------------------------------------ */

typedef struct {
  unsigned long long inuse_n, inuse_b, alloc_n, alloc_b;
} totals_t;

/* Parse a heap profile; false (and the reason reported) if malformed. */
static int read_dump(const char *path, totals_t *t) {
  FILE *f = fopen(path, "r");
  if (!f) {
    fail("%s: %s", path, strerror(errno));
    return 0;
  }
  char line[8192];
  int ok = 0;
  totals_t sum = {0, 0, 0, 0};
  if (!fgets(line, sizeof line, f) ||
      sscanf(line, "heap profile: %llu: %llu [ %llu: %llu] @ heapprofile", &t->inuse_n, &t->inuse_b,
             &t->alloc_n, &t->alloc_b) != 4) {
    fail("%s: bad header: %.200s", path, line);
    goto out;
  }
  for (;;) {
    if (!fgets(line, sizeof line, f)) {
      fail("%s: ends before MAPPED_LIBRARIES", path);
      goto out;
    }
    if (line[0] == '\n') break;
    totals_t s;
    int used = 0;
    if (sscanf(line, "%llu: %llu [%llu: %llu] @%n", &s.inuse_n, &s.inuse_b, &s.alloc_n, &s.alloc_b, &used) != 4 ||
        used == 0 || s.inuse_b > s.alloc_b) {
      fail("%s: bad stack line: %.200s", path, line);
      goto out;
    }
    for (const char *p = line + used; *p && *p != '\n'; p++)
      if (!(*p == ' ' || *p == 'x' || (*p >= '0' && *p <= '9') || (*p >= 'a' && *p <= 'f'))) {
        fail("%s: bad address in: %.200s", path, line);
        goto out;
      }
    sum.inuse_n += s.inuse_n;
    sum.inuse_b += s.inuse_b;
    sum.alloc_n += s.alloc_n;
    sum.alloc_b += s.alloc_b;
  }
  if (!fgets(line, sizeof line, f) || strcmp(line, "MAPPED_LIBRARIES:\n") != 0) {
    fail("%s: no MAPPED_LIBRARIES after the stacks", path);
    goto out;
  }
  if (!fgets(line, sizeof line, f) || !strchr(line, '-')) {
    fail("%s: MAPPED_LIBRARIES is empty", path);
    goto out;
  }
  if (sum.inuse_n != t->inuse_n || sum.inuse_b != t->inuse_b || sum.alloc_n != t->alloc_n ||
      sum.alloc_b != t->alloc_b) {
    fail("%s: the header is not the sum of the stacks", path);
    goto out;
  }
  ok = 1;
out:
  fclose(f);
  return ok;
}

/* Dumps named <dir>/t.<pid>.<n>.heap: how many, each checked. */
static int count_auto_dumps(pid_t pid, int check) {
  char want[64];
  snprintf(want, sizeof want, "t.%d.", (int)pid);
  DIR *d = opendir(g_dir);
  if (!d) return 0;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    size_t len = strlen(e->d_name);
    if (strncmp(e->d_name, want, strlen(want)) != 0 || len < 5 || strcmp(e->d_name + len - 5, ".heap") != 0)
      continue;
    n++;
    if (check) {
      char path[1024];
      snprintf(path, sizeof path, "%s/%s", g_dir, e->d_name);
      totals_t t;
      read_dump(path, &t);
    }
  }
  closedir(d);
  return n;
}

/* ---- the allocating threads ---------------------------------------------- */

static _Atomic(int) g_stop;
static _Atomic(long) g_progress[NT];
static pthread_mutex_t g_xlock = PTHREAD_MUTEX_INITIALIZER;
static void *g_exchange[NT][64];
static int g_xcount[NT];
static void *g_keep[NT][KEEP_BLOCKS];

static uint64_t rng_next(uint64_t *s) {
  uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

__attribute__((noinline)) static void *churn_site(size_t n) {
  unsigned char *p = brisk_malloc(n);
  if (p) p[0] = p[n - 1] = 0x5a;
  return p;
}

__attribute__((noinline)) static void *keep_site(void) {
  unsigned char *p = brisk_malloc(KEEP_SIZE);
  if (p) memset(p, 0x11, KEEP_SIZE);
  return p;
}

static void exchange_put(int to, void *p) {
  pthread_mutex_lock(&g_xlock);
  if (g_xcount[to] < 64) {
    g_exchange[to][g_xcount[to]++] = p;
    p = NULL;
  }
  pthread_mutex_unlock(&g_xlock);
  brisk_free(p);
}

static void exchange_drain(int me) {
  void *take[64];
  int n;
  pthread_mutex_lock(&g_xlock);
  n = g_xcount[me];
  memcpy(take, g_exchange[me], (size_t)n * sizeof(void *));
  g_xcount[me] = 0;
  pthread_mutex_unlock(&g_xlock);
  for (int i = 0; i < n; i++) brisk_free(take[i]);
}

typedef struct {
  int id;
  int keep;      /* end with KEEP_BLOCKS of keep_site */
  int fork_once; /* this thread forks a child midway */
} worker_arg_t;

static void child_work(void);

static void *worker(void *argp) {
  worker_arg_t *a = argp;
  static const size_t sizes[] = {16, 24, 48, 100, 256, 700, 1024, 1500, 4096, 9000, 20000, 100000};
  void *win[WINDOW] = {0};
  uint64_t s = 0x1234 + (uint64_t)a->id * 7919;
  long i = 0;
  while (!atomic_load(&g_stop)) {
    uint64_t r = rng_next(&s);
    size_t n = (r & 0xffff) == 7 ? (3u << 20) : sizes[(r >> 16) % (sizeof sizes / sizeof sizes[0])];
    int k = (int)((r >> 32) % WINDOW);
    if (((r >> 40) & 7) == 0 && win[k]) {
      exchange_put((a->id + 1) % NT, win[k]);
    } else if (((r >> 40) & 7) == 1 && win[k]) {
      void *q = brisk_realloc(win[k], n);
      if (q) {
        win[k] = q;
        continue;
      }
      brisk_free(win[k]);
    } else {
      brisk_free(win[k]);
    }
    win[k] = churn_site(n);
    if (!win[k]) fail("brisk_malloc(%zu) failed", n);
    if ((++i & 255) == 0) {
      exchange_drain(a->id);
      atomic_store(&g_progress[a->id], i);
    }
    if (a->fork_once && i == 20000) {
      a->fork_once = 0;
      pid_t pid = fork();
      if (pid == 0) child_work();
      int st = 0;
      if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail("a child forked by a thread: status %#x", st);
    }
  }
  for (int k = 0; k < WINDOW; k++) brisk_free(win[k]);
  exchange_drain(a->id);
  if (a->keep)
    for (int k = 0; k < KEEP_BLOCKS; k++)
      if (!(g_keep[a->id][k] = keep_site())) fail("keep_site failed");
  atomic_store(&g_progress[a->id], i);
  return NULL;
}

static void run_workers(pthread_t *t, worker_arg_t *args, int keep, int fork_in_thread) {
  atomic_store(&g_stop, 0);
  for (int i = 0; i < NT; i++) {
    args[i] = (worker_arg_t){i, keep, fork_in_thread && i == 0};
    atomic_store(&g_progress[i], 0);
    if (pthread_create(&t[i], NULL, worker, &args[i]) != 0) fail("pthread_create");
  }
}

static void stop_workers(pthread_t *t) {
  atomic_store(&g_stop, 1);
  for (int i = 0; i < NT; i++) pthread_join(t[i], NULL);
  for (int i = 0; i < NT; i++) exchange_drain(i);
}

/* ---- the children of phase 3 --------------------------------------------- */

__attribute__((noinline)) static void *child_site(void) {
  unsigned char *p = brisk_malloc(CHILD_SIZE);
  if (p) memset(p, 0x22, CHILD_SIZE);
  return p;
}

static void child_work(void) {
  g_in_child = 1;
  alarm(CHILD_TIMEOUT);
  if (UNDER_TSAN) brisk_option_set("BACKGROUND", 0);
  static void *blocks[CHILD_BLOCKS];
  for (int i = 0; i < CHILD_BLOCKS; i++)
    if (!(blocks[i] = child_site())) fail("child_site failed");
  char path[1024];
  snprintf(path, sizeof path, "%s/child-%d.heap", g_dir, (int)getpid());
  int err = brisk_profile_dump(path);
  if (err != 0) fail("brisk_profile_dump(%s) = %d", path, err);
  totals_t t;
  if (read_dump(path, &t)) {
    /* its own 4 MiB, and the parent's kept blocks it inherited (if any) */
    double want = (double)CHILD_BLOCKS * CHILD_SIZE;
    if ((double)t.inuse_b < 0.9 * want) fail("%s: %llu bytes in use, at least %.0f expected", path, t.inuse_b, want);
  }
  for (int i = 0; i < CHILD_BLOCKS; i += 2) brisk_free(blocks[i]);
  exit(g_failed ? 3 : 0);
}

/* ---- the test ------------------------------------------------------------ */

static int run_test(void) {
  double scale = UNDER_TSAN ? 0.2 : 1.0;
  pthread_t t[NT];
  worker_arg_t args[NT];

  /* 1. signals and dumps while threads allocate */
  run_workers(t, args, 1, 0);
  int signals = (int)(40 * scale) + 5;
  for (int i = 0; i < signals; i++) {
    if (kill(getpid(), SIGUSR2) != 0) fail("kill: %s", strerror(errno));
    sleep_ms(5);
    if (i % 8 == 0) {
      char path[1024];
      snprintf(path, sizeof path, "%s/explicit-%d.heap", g_dir, i);
      int err = brisk_profile_dump(path);
      totals_t tt;
      if (err != 0) fail("brisk_profile_dump(%s) = %d while threads allocate", path, err);
      else read_dump(path, &tt);
    }
  }
  sleep_ms((int)(1500 * scale));
  stop_workers(t);
  for (int i = 0; i < NT; i++)
    if (atomic_load(&g_progress[i]) < 1000) fail("thread %d made %ld allocations only", i, atomic_load(&g_progress[i]));
  int seen = 0;
  for (int w = 0; w < 100 && (seen = count_auto_dumps(getpid(), 0)) == 0; w++) sleep_ms(50);
  if (seen == 0) fail("no dump was written for %d signals", signals);
  sleep_ms(200); /* a dump that was being written is complete */
  count_auto_dumps(getpid(), 1);
  printf("[profile_threads] %d signals, %d dumps on them; threads made %ld, %ld, %ld, %ld allocations\n", signals,
         seen, atomic_load(&g_progress[0]), atomic_load(&g_progress[1]), atomic_load(&g_progress[2]),
         atomic_load(&g_progress[3]));
  fflush(stdout);

  /* 2. what the threads keep */
  char path[1024];
  snprintf(path, sizeof path, "%s/kept.heap", g_dir);
  if (brisk_profile_dump(path) != 0) fail("brisk_profile_dump(%s)", path);
  totals_t kept;
  if (read_dump(path, &kept)) {
    double want = (double)NT * KEEP_BLOCKS * KEEP_SIZE;
    printf("[profile_threads] in use after the threads: %llu bytes (kept: %.0f)\n", kept.inuse_b, want);
    fflush(stdout);
    if ((double)kept.inuse_b < 0.9 * want || (double)kept.inuse_b > 1.1 * want + (512 << 10))
      fail("%s: %llu bytes in use, %.0f kept (10%%)", path, kept.inuse_b, want);
  }

  /* 3. fork while threads allocate (and one thread forks too) */
  run_workers(t, args, 0, 1);
  int forks = UNDER_TSAN ? 2 : 6;
  for (int i = 0; i < forks; i++) {
    sleep_ms(30);
    pid_t pid = fork();
    if (pid < 0) {
      fail("fork: %s", strerror(errno));
      break;
    }
    if (pid == 0) child_work();
    int st = 0;
    if (waitpid(pid, &st, 0) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
      fail("child %d: status %#x%s", (int)pid, st,
           WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM ? " (hung: killed after the timeout)" : "");
    else if (count_auto_dumps(pid, 1) != 1)
      fail("child %d wrote no dump of its own at exit", (int)pid);
  }
  sleep_ms((int)(300 * scale));
  stop_workers(t);
  for (int i = 0; i < NT; i++)
    for (int k = 0; k < KEEP_BLOCKS; k++) brisk_free(g_keep[i][k]);
  return g_failed;
}

static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

int main(int argc, char **argv) {
  const char *dir = getenv("BRISKTEST_PROFILE_DIR");
  if (dir == NULL) {
    /* the parent: a directory, and the test again with the profiler on */
    char tmpl[] = "/tmp/brisk-profile-threads-XXXXXX";
    if (!mkdtemp(tmpl)) {
      perror("mkdtemp");
      return 1;
    }
    char prefix[600];
    snprintf(prefix, sizeof prefix, "%s/t", tmpl);
    setenv("BRISKTEST_PROFILE_DIR", tmpl, 1);
    setenv("BRISK_PROFILE", prefix, 1);
    setenv("BRISK_PROFILE_RATE", "4096", 1);
    setenv("BRISK_PROFILE_SIGNAL", "SIGUSR2", 1);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
      execv("/proc/self/exe", argv);
      perror("execv");
      _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0;
    if (ok) {
      remove_dir(tmpl);
      printf("[profile_threads] passed\n");
    } else {
      printf("[profile_threads] FAILED (status %#x); the dumps are in %s\n", st, tmpl);
    }
    return ok ? 0 : 1;
  }
  snprintf(g_dir, sizeof g_dir, "%s", dir);
  (void)argc;
  return run_test() ? 1 : 0;
}
