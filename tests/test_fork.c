/* fork() while other threads allocate.
 *
 * ctest-labels: sanitize
 *
 * Worker threads allocate, reallocate and free in a loop (malloc family and
 * brisk_* API, small to 2 MiB), and swap blocks in and out of a shared pool.
 * Meanwhile the main thread forks repeatedly, and so does one of the worker
 * threads (fork from a non-main thread). Each child:
 *   - checks the content of every pool block (allocated by the parent's
 *     threads before the fork), frees half of them, reallocs the others
 *     (grow and shrink; the prefix must be preserved) and frees them;
 *   - runs malloc/calloc/realloc/aligned_alloc/free of many sizes, creates
 *     two threads that allocate and hand blocks to each other, and
 *     sometimes forks a grandchild that allocates too;
 *   - exits with exit(0) (atexit handlers and brisk's teardown run).
 * A child that deadlocks is killed by alarm() and reported. The parent waits
 * for every child and checks its status, then checks that all its worker
 * threads kept making progress after the forks (each must get further
 * within 60 s: a bound for a loaded machine, not a speed target), that
 * every fork ran, and that the pool content is intact.
 *
 * Environment: BRISKTEST_SCALE=<float> scales the number of forks.
 */
#define _GNU_SOURCE
#include "brisk.h"
#include "brisk_errors.h"

#include <errno.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define GOLD 0x9E3779B97F4A7C15ull
#define POOL 256
#define NWORKERS 3
#define CHILD_TIMEOUT 30

static int in_child;

static void fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fprintf(stderr, "test_fork: FAIL%s: %s\n", in_child ? " (in child)" : "", buf);
  fflush(stderr);
  if (in_child) _exit(3);
  abort();
}

static double test_scale(void) {
  const char *e = getenv("BRISKTEST_SCALE");
  double s = 1.0;
  if (e && *e) s = atof(e);
  else if (getenv("UBSAN_OPTIONS")) s = 0.5;
  if (s <= 0) s = 0.01;
  return s;
}

static inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27; x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}
static inline uint64_t rnd(uint64_t *s) { *s += GOLD; return mix64(*s); }

/* block: word 0 = size, word 1 = address seed, then seed + k*GOLD */
static void fill(void *p, size_t size) {
  uint64_t *w = p;
  uint64_t seed = mix64((uintptr_t)p ^ size);
  w[0] = size;
  w[1] = seed;
  for (size_t k = 2; k < size / 8; k++) w[k] = seed + k * GOLD;
}
/* check the first n bytes (whole words) against the pattern of a block that
 * was at address at with size size */
static void check_prefix(const void *p, uintptr_t at, size_t size, size_t n, const char *who) {
  const uint64_t *w = p;
  uint64_t seed = mix64(at ^ size);
  if (n >= 8 && w[0] != size) fail("%s: block %p: size word is 0x%" PRIx64 ", expected %zu", who, p, w[0], size);
  if (n >= 16 && w[1] != seed) fail("%s: block %p (size %zu): seed word corrupted", who, p, size);
  for (size_t k = 2; k < n / 8; k++)
    if (w[k] != seed + k * GOLD)
      fail("%s: block %p (size %zu) corrupted at offset %zu: expected 0x%016" PRIx64 " found 0x%016" PRIx64, who,
           p, size, k * 8, (uint64_t)(seed + k * GOLD), w[k]);
}
static size_t check(const void *p, const char *who) {
  size_t size = ((const uint64_t *)p)[0];
  if (size < 16 || size > (8u << 20) || malloc_usable_size((void *)p) < size)
    fail("%s: block %p: size word corrupted (0x%zx)", who, p, size);
  check_prefix(p, (uintptr_t)p, size, size, who);
  return size;
}

static size_t rand_size(uint64_t *rs) {
  uint64_t r = rnd(rs);
  unsigned pick = r % 1000;
  r >>= 10;
  if (pick < 850) return 16 + r % 500;
  if (pick < 995) return 512 + r % (64 << 10);
  return (64 << 10) + r % (2 << 20);
}

static void *xalloc(size_t size, uint64_t r) {
  void *p;
  switch (r % 4) {
  case 0: p = brisk_malloc(size); break;
  case 1:
    p = calloc(1, size);
    if (p)
      for (size_t i = 0; i < size; i++)
        if (((const unsigned char *)p)[i]) fail("calloc(1, %zu) = %p: byte %zu is not zero", size, p, i);
    break;
  case 2: p = aligned_alloc(64, size); break;
  default: p = malloc(size); break;
  }
  if (!p) fail("allocation of %zu bytes returned NULL (errno %d)", size, errno);
  if ((uintptr_t)p % 16) fail("allocation of %zu bytes returned %p: misaligned", size, p);
  fill(p, size);
  return p;
}

static void xfree(void *p, uint64_t r, const char *who) {
  if (!p) return;
  check(p, who);
  if (r % 2) brisk_free(p);
  else free(p);
}

/* ---- parent state --------------------------------------------------------- */
static pthread_mutex_t pool_mu = PTHREAD_MUTEX_INITIALIZER;
static void *pool[POOL];
static _Atomic int stop;
static _Atomic long progress[NWORKERS];
static _Atomic int forks_done, child_failures;
static int forks_main, forks_thread;

/* ---- the child ---------------------------------------------------------------- */
typedef struct {
  _Atomic(void *) *slot; /* shared by the two child threads */
  uint64_t seed;
} cthread_arg_t;

static void *child_thread(void *arg) {
  cthread_arg_t *a = arg;
  uint64_t rs = a->seed;
  for (int i = 0; i < 2000; i++) {
    void *p = xalloc(rand_size(&rs) % 8192 + 16, rnd(&rs));
    void *old = atomic_exchange(a->slot, p); /* often the other thread's block */
    xfree(old, rnd(&rs), "child thread");
  }
  return NULL;
}

static int child_main(uint64_t seed, int depth) {
  in_child = 1;
  alarm(CHILD_TIMEOUT);
  uint64_t rs = seed;
  /* 1. the parent's blocks: check, free half, realloc the rest */
  void *mine[POOL];
  for (int i = 0; i < POOL; i++) mine[i] = depth == 0 ? pool[i] : NULL;
  if (depth == 0) {
    for (int i = 0; i < POOL; i++) {
      if (!mine[i]) continue;
      if (!brisk_owns(mine[i])) fail("brisk_owns(%p) == 0 for a block allocated by the parent", mine[i]);
      check(mine[i], "parent's block in child");
      if (i % 2) {
        xfree(mine[i], rnd(&rs), "parent's block freed in child");
        mine[i] = NULL;
      }
    }
    for (int i = 0; i < POOL; i++) {
      if (!mine[i]) continue;
      size_t old = ((uint64_t *)mine[i])[0];
      size_t nsz = (i % 4 == 0) ? old * 3 + 100 : (old / 2 < 16 ? 16 : old / 2);
      void *q = realloc(mine[i], nsz);
      if (!q) fail("realloc(%p, %zu) of a parent's block returned NULL", mine[i], nsz);
      check_prefix(q, (uintptr_t)mine[i], old, (old < nsz ? old : nsz) & ~(size_t)7, "realloc'ed parent's block");
      fill(q, nsz);
      mine[i] = q;
    }
  }
  /* 2. fresh allocations of all kinds */
  void *keep[64] = {0};
  for (int i = 0; i < 3000; i++) {
    int j = (int)(rnd(&rs) % 64);
    xfree(keep[j], rnd(&rs), "child");
    keep[j] = xalloc(rand_size(&rs), rnd(&rs));
    if (i % 7 == 0) {
      size_t old = ((uint64_t *)keep[j])[0];
      size_t nsz = rand_size(&rs);
      void *q = realloc(keep[j], nsz);
      if (!q) fail("realloc(%zu -> %zu) returned NULL in child", old, nsz);
      check_prefix(q, (uintptr_t)keep[j], old, (old < nsz ? old : nsz) & ~(size_t)7, "realloc in child");
      fill(q, nsz);
      keep[j] = q;
    }
  }
  void *big = malloc(8u << 20);
  if (!big) fail("malloc(8 MiB) in child returned NULL");
  memset(big, 0x5a, 8u << 20);
  free(big);
  /* 3. threads in the child */
  _Atomic(void *) slot = NULL;
  cthread_arg_t ca = {&slot, rnd(&rs)}, cb = {&slot, rnd(&rs)};
  pthread_t t1, t2;
  if (pthread_create(&t1, NULL, child_thread, &ca) || pthread_create(&t2, NULL, child_thread, &cb))
    fail("pthread_create in child failed");
  pthread_join(t1, NULL);
  pthread_join(t2, NULL);
  xfree(atomic_load(&slot), 0, "child threads' last block");
  /* 4. sometimes a grandchild */
  if (depth == 0 && seed % 8 == 0) {
    pid_t g = fork();
    if (g < 0) fail("fork in child: %s", strerror(errno));
    if (g == 0) exit(child_main(rnd(&rs), 1));
    int st;
    if (waitpid(g, &st, 0) != g) fail("waitpid(grandchild): %s", strerror(errno));
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
      fail("grandchild failed: %s %d", WIFEXITED(st) ? "exit status" : "killed by signal",
           WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
  }
  for (int j = 0; j < 64; j++) xfree(keep[j], rnd(&rs), "child cleanup");
  for (int i = 0; i < POOL; i++) xfree(mine[i], rnd(&rs), "child cleanup of parent's blocks");
  long errors = brisk_errors_reported();
  if (errors != 0) fail("brisk reported %ld bad inputs (in the child or in its parent); this test makes none", errors);
  return 0;
}

/* fork with the pool locked (consistent snapshot), run the child, wait */
static void fork_once(uint64_t seed, const char *from) {
  fflush(stdout);
  fflush(stderr);
  pthread_mutex_lock(&pool_mu);
  pid_t pid = fork();
  if (pid < 0) fail("fork from %s: %s", from, strerror(errno));
  if (pid == 0) {
    pthread_mutex_unlock(&pool_mu);
    exit(child_main(seed, 0));
  }
  pthread_mutex_unlock(&pool_mu);
  int st;
  pid_t w;
  while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR) {
  }
  if (w != pid) fail("waitpid: %s", strerror(errno));
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGALRM)
      fprintf(stderr, "test_fork: FAIL: child forked from %s did not finish within %d s (deadlock?)\n", from,
              CHILD_TIMEOUT);
    else if (WIFSIGNALED(st))
      fprintf(stderr, "test_fork: FAIL: child forked from %s killed by signal %d (%s)\n", from, WTERMSIG(st),
              strsignal(WTERMSIG(st)));
    else
      fprintf(stderr, "test_fork: FAIL: child forked from %s exited with status %d\n", from, WEXITSTATUS(st));
    atomic_fetch_add(&child_failures, 1);
  }
  atomic_fetch_add(&forks_done, 1);
}

static void *worker(void *arg) {
  int id = (int)(uintptr_t)arg;
  uint64_t rs = 0x1234567ull * (uint64_t)(id + 1);
  void *local[32] = {0};
  long n = 0;
  int forks_left = id == 0 ? forks_thread : 0;
  while (!atomic_load(&stop) || forks_left > 0) {
    /* local churn */
    int j = (int)(rnd(&rs) % 32);
    xfree(local[j], rnd(&rs), "worker");
    local[j] = xalloc(rand_size(&rs), rnd(&rs));
    if (n % 5 == 0) {
      size_t old = ((uint64_t *)local[j])[0], nsz = rand_size(&rs);
      void *q = (n % 10 == 0) ? brisk_realloc(local[j], nsz) : realloc(local[j], nsz);
      if (!q) fail("realloc returned NULL in worker");
      check_prefix(q, (uintptr_t)local[j], old, (old < nsz ? old : nsz) & ~(size_t)7, "realloc in worker");
      fill(q, nsz);
      local[j] = q;
    }
    /* swap with the shared pool: blocks move between threads */
    if (n % 3 == 0) {
      void *p = xalloc(rand_size(&rs), rnd(&rs));
      int k = (int)(rnd(&rs) % POOL);
      pthread_mutex_lock(&pool_mu);
      void *old = pool[k];
      pool[k] = p;
      pthread_mutex_unlock(&pool_mu);
      xfree(old, rnd(&rs), "pool block in worker");
    }
    /* the forking worker: fork from a non-main thread */
    if (forks_left > 0 && n % 200 == 199) {
      fork_once(rnd(&rs), "a worker thread");
      forks_left--;
    }
    n++;
    atomic_store_explicit(&progress[id], n, memory_order_relaxed);
  }
  for (int i = 0; i < 32; i++) xfree(local[i], rnd(&rs), "worker cleanup");
  return NULL;
}

int main(void) {
  double scale = test_scale();
  forks_main = (int)(80 * scale);
  forks_thread = (int)(20 * scale);
  if (forks_main < 5) forks_main = 5;
  if (forks_thread < 2) forks_thread = 2;
  printf("test_fork: %d worker threads; %d forks from the main thread, %d from a worker thread\n", NWORKERS,
         forks_main, forks_thread);
  fflush(stdout);
  struct timespec t0;
  clock_gettime(CLOCK_MONOTONIC, &t0);

  /* fill the pool before the threads start */
  uint64_t rs = 42;
  for (int i = 0; i < POOL; i++) pool[i] = xalloc(rand_size(&rs), rnd(&rs));

  pthread_t th[NWORKERS];
  for (int i = 0; i < NWORKERS; i++)
    if (pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i)) fail("pthread_create");

  for (int i = 0; i < forks_main; i++) {
    struct timespec ts = {0, (long)(rnd(&rs) % 2000000)};
    nanosleep(&ts, NULL);
    fork_once(rnd(&rs), "the main thread");
  }

  /* the parent's threads must still be working: each gets further (a
   * worker stuck on a lock a fork left held never does) */
  long before[NWORKERS];
  for (int i = 0; i < NWORKERS; i++) before[i] = atomic_load(&progress[i]);
  for (int i = 0; i < NWORKERS; i++) {
    int waited_ms = 0;
    while (atomic_load(&progress[i]) <= before[i]) {
      if (waited_ms >= 60000) fail("worker %d made no progress for 60 s after the forks (%ld iterations)", i, before[i]);
      struct timespec ts = {0, 10 * 1000 * 1000};
      nanosleep(&ts, NULL);
      waited_ms += 10;
    }
  }
  atomic_store(&stop, 1);
  for (int i = 0; i < NWORKERS; i++) pthread_join(th[i], NULL);

  for (int i = 0; i < POOL; i++) xfree(pool[i], (uint64_t)i, "pool cleanup in parent");
  void *p = malloc(1000);
  if (!p) fail("malloc after the forks returned NULL");
  free(p);

  struct timespec t1;
  clock_gettime(CLOCK_MONOTONIC, &t1);
  long total = 0;
  for (int i = 0; i < NWORKERS; i++) total += atomic_load(&progress[i]);
  printf("test_fork: %d children, %d failed; workers ran %ld iterations; %.2f s\n", atomic_load(&forks_done),
         atomic_load(&child_failures), total, (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9);
  long errors = brisk_errors_reported();
  if (errors != 0) fail("brisk reported %ld bad inputs; this test makes none", errors);
  if (atomic_load(&forks_done) != forks_main + forks_thread)
    fail("%d children ran, expected %d from the main thread and %d from a worker", atomic_load(&forks_done), forks_main,
         forks_thread);
  if (atomic_load(&child_failures)) {
    fprintf(stderr, "test_fork: FAIL: %d of %d children failed\n", atomic_load(&child_failures),
            atomic_load(&forks_done));
    return 1;
  }
  printf("test_fork: PASS\n");
  return 0;
}
