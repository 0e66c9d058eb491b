/* Thread churn, a reclaimer thread, TLS destructors and frees at exit.
 *
 * ctest-labels: sanitize
 *
 * 1. Churn: 3000 short-lived threads (10 rounds of 300, up to 16 at a time,
 *    every 8th one detached). Each thread allocates 64 blocks (malloc,
 *    brisk_malloc, calloc; 16 B..64 KiB), frees half of them itself, passes
 *    one to the next thread through a "baton" slot and hands the rest to a
 *    reclaimer thread, then exits without any cleanup call.
 *    The reclaimer never allocates (no stdio, no malloc): it only checks and
 *    frees the blocks of threads that have exited. RSS is sampled after every
 *    round; memory freed that way must be reused, so the lowest RSS of the
 *    last three rounds may exceed the highest of the first three by at most
 *    32 MiB, while 1 GiB is allocated over the run.
 * 2. TLS destructors: every churn thread keeps a block in a _Thread_local
 *    pointer and a record in a pthread key whose destructor checks and frees
 *    both, allocates and reallocs new blocks (one of them is handed to the
 *    reclaimer), and re-arms the key once (a second destructor round). It also
 *    registers a C++-style thread_local destructor (__cxa_thread_atexit_impl)
 *    that frees a block and allocates again. All destructor calls are counted.
 * 3. Exit: blocks allocated in a constructor, by the main thread and by
 *    threads are freed in atexit handlers (one registered before main, one in
 *    main) and in a destructor function that runs after main returns (and
 *    after any atexit handler of brisk); those handlers allocate too. The
 *    main thread also has a thread_local destructor. Then the same exit path
 *    runs 8 times in a re-executed child while two detached threads keep
 *    allocating during exit (once with BRISK_SHOW_STATS=1); each child must
 *    exit with status 0 and report that its destructor ran.
 *
 * The heaps of exited threads are adopted by new ones: brisk counts
 * adoptions, and the heaps alive after the churn are at most those of the
 * threads that can be alive at once.
 *
 * Environment: BRISKTEST_SCALE=<float> scales the number of threads.
 */
#define _GNU_SOURCE
#include "brisk.h"
#include "brisk_errors.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <pthread.h>
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
#define MiB (1024.0 * 1024.0)
#define PER_THREAD 64
#define WAVE 16

extern int __cxa_thread_atexit_impl(void (*dtor)(void *), void *obj, void *dso_symbol);
extern void *__dso_handle;

static const char *prog = "test_threads";

static void fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  /* write(2) only: this may run at exit, or on the reclaimer thread */
  char line[1200];
  int n = snprintf(line, sizeof line, "%s: FAIL: %s\n", prog, buf);
  if (n > 0) (void)!write(2, line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1));
  _exit(1);
}

static void say(const char *s) { (void)!write(1, s, strlen(s)); }

static double test_scale(void) {
  const char *e = getenv("BRISKTEST_SCALE");
  double s = 1.0;
  if (e && *e) s = atof(e);
  else if (getenv("UBSAN_OPTIONS")) s = 0.5;
  if (s <= 0) s = 0.01;
  return s;
}

static double now_sec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static size_t rss_bytes(void) {
  char buf[128];
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  unsigned long size = 0, res = 0;
  if (sscanf(buf, "%lu %lu", &size, &res) != 2) return 0;
  return (size_t)res * (size_t)sysconf(_SC_PAGESIZE);
}

static inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27; x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}
static inline uint64_t rnd(uint64_t *s) { *s += GOLD; return mix64(*s); }

/* block: word 0 = size, then seed + k*GOLD */
static void fill(void *p, size_t size) {
  uint64_t *w = p;
  uint64_t seed = mix64((uintptr_t)p ^ size);
  w[0] = size;
  for (size_t k = 1; k < size / 8; k++) w[k] = seed + k * GOLD;
}
static void check_prefix(const void *p, uintptr_t at, size_t size, size_t n, const char *who) {
  const uint64_t *w = p;
  uint64_t seed = mix64(at ^ size);
  if (n >= 8 && w[0] != size) fail("%s: block %p: size word 0x%" PRIx64 ", expected %zu", who, p, w[0], size);
  for (size_t k = 1; k < n / 8; k++)
    if (w[k] != seed + k * GOLD)
      fail("%s: block %p (size %zu) corrupted at offset %zu: expected 0x%016" PRIx64 " found 0x%016" PRIx64, who,
           p, size, k * 8, (uint64_t)(seed + k * GOLD), w[k]);
}
static size_t check(const void *p, const char *who) {
  size_t size = ((const uint64_t *)p)[0];
  if (size < 16 || size > (1u << 20) || malloc_usable_size((void *)p) < size)
    fail("%s: block %p: size word corrupted (0x%zx)", who, p, size);
  check_prefix(p, (uintptr_t)p, size, size, who);
  return size;
}
static void *xalloc(size_t size, unsigned how, const char *who) {
  void *p;
  switch (how % 3) {
  case 0: p = malloc(size); break;
  case 1: p = brisk_malloc(size); break;
  default: p = calloc(size / 16, 16); size = size / 16 * 16; break;
  }
  if (!p) fail("%s: allocation of %zu bytes returned NULL (errno %d)", who, size, errno);
  if ((uintptr_t)p % 16) fail("%s: allocation of %zu bytes returned misaligned %p", who, size, p);
  fill(p, size);
  return p;
}
static void xfree(void *p, unsigned how, const char *who) {
  if (!p) return;
  check(p, who);
  if (how % 2) brisk_free(p);
  else free(p);
}

static size_t rand_size(uint64_t *rs) {
  uint64_t r = rnd(rs);
  unsigned pick = r % 100;
  r >>= 8;
  if (pick < 85) return 16 + r % 1009;
  return 4096 + r % (60 << 10);
}

/* ---- the reclaimer: a thread that never allocates ------------------------- */
#define OQ_CAP (1u << 16)
static void *oq[OQ_CAP];
static size_t oq_head, oq_count;
static int oq_done, reclaimer_busy;
static pthread_mutex_t oq_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t oq_nonempty = PTHREAD_COND_INITIALIZER, oq_space = PTHREAD_COND_INITIALIZER,
                      oq_drained = PTHREAD_COND_INITIALIZER;
static _Atomic uint64_t reclaimed_blocks, reclaimed_bytes;

static void oq_push(void *p) {
  pthread_mutex_lock(&oq_mu);
  while (oq_count == OQ_CAP) pthread_cond_wait(&oq_space, &oq_mu);
  oq[(oq_head + oq_count) % OQ_CAP] = p;
  oq_count++;
  pthread_cond_signal(&oq_nonempty);
  pthread_mutex_unlock(&oq_mu);
}

static void *reclaimer(void *arg) {
  (void)arg;
  void *batch[256]; /* on the stack: this thread never calls malloc */
  for (;;) {
    pthread_mutex_lock(&oq_mu);
    reclaimer_busy = 0;
    if (oq_count == 0) pthread_cond_broadcast(&oq_drained);
    while (oq_count == 0 && !oq_done) pthread_cond_wait(&oq_nonempty, &oq_mu);
    if (oq_count == 0 && oq_done) {
      pthread_mutex_unlock(&oq_mu);
      return NULL;
    }
    size_t n = 0;
    while (oq_count > 0 && n < 256) {
      batch[n++] = oq[oq_head];
      oq_head = (oq_head + 1) % OQ_CAP;
      oq_count--;
    }
    reclaimer_busy = 1;
    pthread_cond_broadcast(&oq_space);
    pthread_mutex_unlock(&oq_mu);
    uint64_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
      bytes += check(batch[i], "reclaimer");
      if (i % 2) free(batch[i]);
      else brisk_free(batch[i]);
    }
    atomic_fetch_add(&reclaimed_blocks, n);
    atomic_fetch_add(&reclaimed_bytes, bytes);
  }
}

static void wait_drained(void) {
  pthread_mutex_lock(&oq_mu);
  while (oq_count > 0 || reclaimer_busy) pthread_cond_wait(&oq_drained, &oq_mu);
  pthread_mutex_unlock(&oq_mu);
}

/* ---- TLS destructors -------------------------------------------------------- */
static pthread_key_t key;
static _Thread_local void *tls_block;
static _Atomic long key_dtor_calls, cxa_dtor_calls, threads_started, detached_running;
static _Atomic uint64_t allocated_bytes;
static _Atomic(void *) baton;

typedef struct {
  uint64_t magic;
  void *tls_copy;
  int round;
  int detached;
} rec_t;
#define REC_MAGIC 0x7e57ab1e5eedull

static void key_dtor(void *v) {
  rec_t *r = v;
  if (r->magic != REC_MAGIC) fail("pthread key destructor: record %p corrupted", (void *)r);
  if (r->round == 0) {
    if (tls_block != r->tls_copy) fail("pthread key destructor: _Thread_local pointer changed");
    check(tls_block, "_Thread_local block in key destructor");
    free(tls_block);
    tls_block = NULL;
  }
  /* allocate during thread teardown */
  void *p = xalloc(1000, 0, "key destructor");
  void *q = realloc(p, 5000);
  if (!q) fail("realloc in key destructor returned NULL");
  check_prefix(q, (uintptr_t)p, 1000, 1000, "realloc in key destructor");
  fill(q, 5000);
  oq_push(q); /* freed by the reclaimer */
  void *big = xalloc(64 << 10, 1, "key destructor");
  xfree(big, 0, "key destructor");
  atomic_fetch_add(&key_dtor_calls, 1);
  if (r->round++ == 0) {
    if (pthread_setspecific(key, r)) fail("pthread_setspecific in destructor failed"); /* run again */
  } else {
    int det = r->detached;
    free(r);
    if (det) atomic_fetch_sub(&detached_running, 1); /* the last destructor of a detached thread */
  }
}

static void cxa_dtor(void *obj) {
  check(obj, "thread_local destructor");
  brisk_free(obj);
  void *p = xalloc(300, 2, "thread_local destructor");
  void *q = xalloc(20000, 0, "thread_local destructor");
  xfree(p, 0, "thread_local destructor");
  xfree(q, 1, "thread_local destructor");
  atomic_fetch_add(&cxa_dtor_calls, 1);
}

/* ---- churn threads ---------------------------------------------------------- */
typedef struct {
  uint64_t seed;
  int detached;
} churn_arg_t;

static void *churn(void *arg) {
  churn_arg_t a = *(churn_arg_t *)arg;
  if (a.detached) free(arg); /* allocated by the creating thread */
  uint64_t rs = a.seed;
  atomic_fetch_add(&threads_started, 1);

  tls_block = xalloc(200, 0, "churn thread");
  rec_t *r = malloc(sizeof *r);
  if (!r) fail("malloc(rec) returned NULL");
  r->magic = REC_MAGIC;
  r->tls_copy = tls_block;
  r->round = 0;
  r->detached = a.detached;
  if (pthread_setspecific(key, r)) fail("pthread_setspecific failed");
  void *obj = xalloc(500, 1, "churn thread");
  if (__cxa_thread_atexit_impl(cxa_dtor, obj, &__dso_handle)) fail("__cxa_thread_atexit_impl failed");

  void *blocks[PER_THREAD];
  uint64_t bytes = 0;
  for (int i = 0; i < PER_THREAD; i++) {
    size_t sz = rand_size(&rs);
    blocks[i] = xalloc(sz, (unsigned)rnd(&rs), "churn thread");
    bytes += sz;
  }
  atomic_fetch_add(&allocated_bytes, bytes);
  for (int i = 0; i < PER_THREAD; i += 2) xfree(blocks[i], (unsigned)rnd(&rs), "churn thread");
  void *old = atomic_exchange(&baton, blocks[1]);
  xfree(old, (unsigned)rnd(&rs), "baton from an earlier thread");
  for (int i = 3; i < PER_THREAD; i += 2) oq_push(blocks[i]);
  return NULL; /* no cleanup call: brisk must take the thread's memory back */
}

static void run_churn(int rounds, int per_round) {
  pthread_t rt;
  if (pthread_create(&rt, NULL, reclaimer, NULL)) fail("pthread_create(reclaimer)");
  size_t rss[64];
  uint64_t rs = 99;
  double t0 = now_sec();
  churn_arg_t args[WAVE];
  for (int round = 0; round < rounds; round++) {
    for (int done = 0; done < per_round; done += WAVE) {
      pthread_t th[WAVE];
      int joinable[WAVE];
      int n = per_round - done < WAVE ? per_round - done : WAVE;
      for (int i = 0; i < n; i++) {
        int det = (done + i) % 8 == 7;
        joinable[i] = !det;
        churn_arg_t *ca = &args[i];
        if (det) {
          ca = malloc(sizeof *ca);
          if (!ca) fail("malloc(args) failed");
          atomic_fetch_add(&detached_running, 1);
        }
        ca->seed = rnd(&rs);
        ca->detached = det;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        if (det) pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc;
        while ((rc = pthread_create(&th[i], &attr, churn, ca)) == EAGAIN) usleep(1000);
        if (rc) fail("pthread_create: %s", strerror(rc));
        pthread_attr_destroy(&attr);
      }
      for (int i = 0; i < n; i++)
        if (joinable[i]) pthread_join(th[i], NULL);
    }
    while (atomic_load(&detached_running) > 0) usleep(200);
    wait_drained();
    rss[round < 64 ? round : 63] = rss_bytes();
    printf("test_threads: churn round %d: %ld threads so far, RSS %.1f MiB\n", round + 1,
           (long)atomic_load(&threads_started), rss[round < 64 ? round : 63] / MiB);
    fflush(stdout);
  }
  pthread_mutex_lock(&oq_mu);
  oq_done = 1;
  pthread_cond_broadcast(&oq_nonempty);
  pthread_mutex_unlock(&oq_mu);
  pthread_join(rt, NULL);
  void *last = atomic_exchange(&baton, NULL);
  xfree(last, 0, "last baton");

  long nthreads = atomic_load(&threads_started);
  printf("test_threads: %ld threads, %.1f MiB allocated by them, %" PRIu64 " blocks (%.1f MiB) freed by the "
         "reclaimer, %.2f s\n",
         nthreads, atomic_load(&allocated_bytes) / MiB, atomic_load(&reclaimed_blocks),
         atomic_load(&reclaimed_bytes) / MiB, now_sec() - t0);
  if (nthreads != (long)rounds * per_round) fail("%ld threads ran, expected %d", nthreads, rounds * per_round);
  /* each thread: key destructor twice (re-armed once), thread_local destructor once */
  if (atomic_load(&key_dtor_calls) != 2 * nthreads)
    fail("pthread key destructor ran %ld times, expected %ld", (long)atomic_load(&key_dtor_calls), 2 * nthreads);
  if (atomic_load(&cxa_dtor_calls) != nthreads)
    fail("thread_local destructor ran %ld times, expected %ld", (long)atomic_load(&cxa_dtor_calls), nthreads);
  printf("test_threads: TLS destructors: %ld pthread key destructor calls, %ld thread_local destructor calls\n",
         (long)atomic_load(&key_dtor_calls), (long)atomic_load(&cxa_dtor_calls));
  /* the heaps of exited threads are adopted, not piled up */
  double adopted = brisk_stat("heaps_adopted"), heaps = brisk_stat("heaps");
  printf("test_threads: heaps: %.0f alive after the churn, %.0f adoptions of an exited thread's heap\n", heaps,
         adopted);
  if (adopted <= 0) fail("no heap of an exited thread was adopted by a new thread (heaps_adopted %.0f)", adopted);
  if (heaps < 0 || heaps > WAVE + 8)
    fail("%.0f heaps alive after the churn; at most %d threads (and the main one) ran at once", heaps, WAVE + 2);
  if (rounds >= 6) {
    /* piling up shows as steady growth (tens of MiB per round here); purge
     * timing makes single samples jumpy, so compare the highest of the first
     * three rounds with the lowest of the last three */
    size_t base = 0, end = (size_t)-1;
    for (int i = 0; i < 3; i++) base = rss[i] > base ? rss[i] : base;
    for (int i = rounds - 3; i < rounds && i < 64; i++) end = rss[i] < end ? rss[i] : end;
    size_t limit = (size_t)(32 * MiB);
    printf("test_threads: RSS: highest of rounds 1-3 %.1f MiB, lowest of rounds %d-%d %.1f MiB (growth limit %.0f "
           "MiB)\n",
           base / MiB, rounds - 2, rounds, end / MiB, limit / MiB);
    if (end > base + limit)
      fail("memory of exited threads piles up: RSS grew from %.1f MiB (rounds 1-3) to %.1f MiB (rounds %d-%d)",
           base / MiB, end / MiB, rounds - 2, rounds);
  }
}

/* ---- exit-time frees ---------------------------------------------------------- */
static void *ctor_blocks[8];
static void *exit_blocks[32];     /* allocated by main and by threads */
static void *for_destructor[4];   /* allocated in atexit handlers, freed in the destructor */
static int exit_mode;             /* 1: the main test, 2: the exit scenario child */
static _Atomic int spin_stop;

static void early_atexit(void);
__attribute__((constructor(101))) static void early_ctor(void) {
  for (int i = 0; i < 8; i++) ctor_blocks[i] = xalloc(100 + 1000 * (size_t)i, (unsigned)i, "constructor");
  atexit(early_atexit);
}

static void early_atexit(void) { /* registered before main, so it runs after main's handler */
  if (!exit_mode) return;
  for (int i = 0; i < 8; i += 2) {
    xfree(ctor_blocks[i], (unsigned)i, "early atexit handler");
    ctor_blocks[i] = NULL;
  }
  for_destructor[1] = xalloc(777, 1, "early atexit handler");
}

static void main_atexit(void) {
  if (!exit_mode) return;
  for (int i = 0; i < 32; i++) {
    xfree(exit_blocks[i], (unsigned)i, "atexit handler");
    exit_blocks[i] = NULL;
  }
  void *p = xalloc(3000, 0, "atexit handler");
  void *q = realloc(p, 300000);
  if (!q) fail("realloc in atexit handler returned NULL");
  check_prefix(q, (uintptr_t)p, 3000, 3000, "realloc in atexit handler");
  fill(q, 300000);
  for_destructor[0] = q;
}

static void main_tls_dtor(void *obj) {
  check(obj, "main thread's thread_local destructor");
  free(obj);
  for_destructor[2] = xalloc(50, 1, "main thread's thread_local destructor");
}

__attribute__((destructor)) static void late_dtor(void) {
  if (!exit_mode) return;
  for (int i = 0; i < 8; i++) xfree(ctor_blocks[i], (unsigned)i, "destructor");
  for (int i = 0; i < 4; i++) xfree(for_destructor[i], (unsigned)i, "destructor");
  for (int i = 0; i < 100; i++) {
    void *p = xalloc(16 + 97 * (size_t)i, (unsigned)i, "destructor");
    void *q = brisk_realloc(p, 40000);
    if (!q) fail("brisk_realloc in destructor returned NULL");
    free(q);
  }
  long errors = brisk_errors_reported();
  if (errors != 0) fail("brisk reported %ld bad inputs by the end of the exit path; this test makes none", errors);
  say(exit_mode == 2 ? "exit scenario: destructor done\n" : "test_threads: frees in atexit handlers, TLS "
                                                            "destructor and destructor after main: OK\n");
}

static void *exit_thread(void *arg) {
  int i = (int)(uintptr_t)arg;
  exit_blocks[i] = xalloc(64 + 512 * (size_t)i, (unsigned)i, "thread before exit");
  return NULL;
}

static void *spinner(void *arg) {
  uint64_t rs = (uint64_t)(uintptr_t)arg;
  void *keep[16] = {0};
  for (unsigned long n = 0;; n++) {
    unsigned j = (unsigned)(rnd(&rs) % 16);
    /* keep allocating until the process is gone; never stop on exit */
    if (keep[j]) {
      check(keep[j], "spinner thread during exit");
      if (n % 2) free(keep[j]);
      else brisk_free(keep[j]);
    }
    keep[j] = xalloc(rand_size(&rs), (unsigned)n, "spinner thread during exit");
    if (atomic_load_explicit(&spin_stop, memory_order_relaxed)) break;
  }
  return NULL;
}

static void prepare_exit_checks(int mode) {
  for (int i = 0; i < 16; i++) exit_blocks[i] = xalloc(32 + 100 * (size_t)i, (unsigned)i, "main before exit");
  for (int i = 16; i < 32; i++) {
    pthread_t t;
    if (pthread_create(&t, NULL, exit_thread, (void *)(uintptr_t)i)) fail("pthread_create");
    pthread_join(t, NULL);
  }
  void *obj = xalloc(4000, 0, "main");
  if (__cxa_thread_atexit_impl(main_tls_dtor, obj, &__dso_handle)) fail("__cxa_thread_atexit_impl failed");
  for_destructor[3] = xalloc(12345, 1, "main");
  atexit(main_atexit);
  exit_mode = mode;
}

static int exit_scenario(void) {
  prog = "test_threads (exit scenario child)";
  prepare_exit_checks(2);
  for (int i = 0; i < 2; i++) {
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, spinner, (void *)(uintptr_t)(i + 1))) fail("pthread_create(spinner)");
    pthread_attr_destroy(&attr);
  }
  usleep(20000);
  return 0; /* exit while the spinners allocate */
}

static int run_exit_children(const char *self) {
  int bad = 0;
  for (int i = 0; i < 8; i++) {
    int pfd[2];
    if (pipe(pfd)) fail("pipe: %s", strerror(errno));
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) fail("fork: %s", strerror(errno));
    if (pid == 0) {
      dup2(pfd[1], 1);
      dup2(pfd[1], 2);
      close(pfd[0]);
      close(pfd[1]);
      if (i == 0) setenv("BRISK_SHOW_STATS", "1", 1);
      execl(self, self, "--exit-scenario", (char *)NULL);
      _exit(127);
    }
    close(pfd[1]);
    static char out[65536];
    size_t len = 0;
    ssize_t n;
    char sink[4096];
    for (;;) { /* keep the first 64 KiB, drain the rest */
      if (len < sizeof out - 1) n = read(pfd[0], out + len, sizeof out - 1 - len);
      else n = read(pfd[0], sink, sizeof sink);
      if (n <= 0) break;
      if (len < sizeof out - 1) len += (size_t)n;
    }
    out[len] = 0;
    close(pfd[0]);
    int st;
    waitpid(pid, &st, 0);
    /* brisk reports a correct free taken for a bad one, or a bad option,
     * with a line and goes on: the child's status alone would not show it */
    int complained = strstr(out, "brisk: error") != NULL || strstr(out, "brisk: warning") != NULL;
    /* BRISK_SHOW_STATS=1 prints the statistics at exit, "errors" last */
    int stats_ok = i != 0 || strstr(out, "errors: 0") != NULL;
    int ok = WIFEXITED(st) && WEXITSTATUS(st) == 0 && strstr(out, "exit scenario: destructor done") && !complained &&
             stats_ok;
    if (!ok) {
      bad++;
      fprintf(stderr, "test_threads: FAIL: exit scenario %d%s: %s %d; destructor marker %s%s%s\n", i,
              i == 0 ? " (BRISK_SHOW_STATS=1)" : "", WIFEXITED(st) ? "exit status" : "killed by signal",
              WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st),
              strstr(out, "exit scenario: destructor done") ? "present" : "missing",
              complained ? "; brisk printed an error or a warning" : "",
              stats_ok ? "" : "; no statistics with \"errors: 0\" at exit");
      fprintf(stderr, "--- output of the child (stdout and stderr) ---\n%s--- end ---\n", out);
    }
  }
  printf("test_threads: 8 exit scenarios with threads allocating during exit: %d failed\n", bad);
  return bad;
}

int main(int argc, char **argv) {
  if (argc > 1 && !strcmp(argv[1], "--exit-scenario")) return exit_scenario();
  double scale = test_scale();
  int per_round = (int)(300 * scale);
  if (per_round < WAVE) per_round = WAVE;
  int rounds = 10;
  if (pthread_key_create(&key, key_dtor)) fail("pthread_key_create failed");
  printf("test_threads: %d rounds x %d short-lived threads\n", rounds, per_round);
  fflush(stdout);
  run_churn(rounds, per_round);
  char self[4096];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n <= 0) fail("readlink(/proc/self/exe) failed");
  self[n] = 0;
  int bad = run_exit_children(self);
  if (bad) return 1;
  long errors = brisk_errors_reported();
  if (errors != 0) fail("brisk reported %ld bad inputs during the churn; this test makes none", errors);
  prepare_exit_checks(1);
  printf("test_threads: PASS (the exit-time checks follow)\n");
  fflush(stdout);
  return 0;
}
