/* Shared helpers for brisk's benchmark workloads.
 *
 * Every workload is a small program with the same command line:
 *     prog [MODE] SIZE [THREADS]
 * SIZE is a count of work units (documented per workload) so that the same
 * SIZE always does the same work; the harness picks SIZE per tier (quick,
 * default, full). The program prints exactly one line
 *     RESULT workload=NAME threads=T ops=N secs=S ...
 * optionally preceded by lines "METRIC id=ID field=value ..." that the
 * harness turns into detail tables. When a check on block contents fails
 * the program prints "CHECK FAILED: ..." to stderr and exits with status 3,
 * so a broken allocator shows as a failed cell, not as a fast one.
 *
 * The workloads never call an allocator by name (except the session burst,
 * which compares strategies in one process): the allocator under test is
 * whatever malloc the process has, chosen with LD_PRELOAD.
 */
#ifndef BRISK_BENCH_COMMON_H
#define BRISK_BENCH_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#ifndef __cplusplus
#include <stdatomic.h>
#endif

#define BENCH_CHECK_EXIT 3
#define BENCH_MAGIC 0x9e3779b97f4a7c15ULL

static inline double bench_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline void bench_die(const char *what) {
  fprintf(stderr, "bench: fatal: %s (errno %d: %s)\n", what, errno, strerror(errno));
  exit(2);
}

#define BENCH_CHECK(cond, ...)                          \
  do {                                                  \
    if (__builtin_expect(!(cond), 0)) {                 \
      fprintf(stderr, "CHECK FAILED: " __VA_ARGS__);    \
      fputc('\n', stderr);                              \
      fflush(stderr);                                   \
      exit(BENCH_CHECK_EXIT);                           \
    }                                                   \
  } while (0)

/* splitmix64 seeded per thread: deterministic across runs and allocators. */
typedef struct {
  uint64_t s;
} bench_rng;

static inline uint64_t bench_next(bench_rng *r) {
  uint64_t z = (r->s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/* Uniform in [lo, hi]. */
static inline size_t bench_range(bench_rng *r, size_t lo, size_t hi) {
  return lo + (size_t)(bench_next(r) % (uint64_t)(hi - lo + 1));
}

/* Parses a positive count; accepts suffixes k, m, g (powers of 1000). */
static inline long long bench_parse_count(const char *s, const char *what) {
  char *end = NULL;
  errno = 0;
  double v = strtod(s, &end);
  if (errno || end == s || v < 0) {
    fprintf(stderr, "bench: bad %s '%s'\n", what, s);
    exit(2);
  }
  if (*end == 'k' || *end == 'K') v *= 1e3, end++;
  else if (*end == 'm' || *end == 'M') v *= 1e6, end++;
  else if (*end == 'g' || *end == 'G') v *= 1e9, end++;
  if (*end) {
    fprintf(stderr, "bench: bad %s '%s'\n", what, s);
    exit(2);
  }
  return (long long)v;
}

typedef struct {
  long long size;
  int threads;
} bench_args;

/* argv[first] = SIZE, argv[first+1] = THREADS (optional). */
static inline bench_args bench_parse(int argc, char **argv, int first, const char *usage,
                                     long long default_size, int default_threads) {
  bench_args a = {default_size, default_threads};
  if (argc > first && (!strcmp(argv[first], "-h") || !strcmp(argv[first], "--help"))) {
    printf("usage: %s %s\n", argv[0], usage);
    exit(0);
  }
  if (argc > first) a.size = bench_parse_count(argv[first], "SIZE");
  if (argc > first + 1) a.threads = (int)bench_parse_count(argv[first + 1], "THREADS");
  if (a.threads < 1) a.threads = 1;
  if (a.threads > 256) a.threads = 256;
  if (a.size < 1) a.size = 1;
  return a;
}

/* A block's identity: written at allocation, checked before the free.
 * Head word and the last byte are both checked, so overlapping blocks or a
 * block shorter than requested both show. */
static inline void bench_stamp(void *p, size_t size, uint64_t id) {
  unsigned char *b = (unsigned char *)p;
  if (size >= sizeof(uint64_t)) {
    uint64_t tag = id ^ BENCH_MAGIC ^ (uint64_t)size;
    memcpy(b, &tag, sizeof tag);
  } else if (size > 0) {
    b[0] = (unsigned char)(id ^ size);
  }
  if (size > sizeof(uint64_t)) b[size - 1] = (unsigned char)(id * 31u + 7u);
}

static inline int bench_stamp_ok(const void *p, size_t size, uint64_t id) {
  const unsigned char *b = (const unsigned char *)p;
  if (size >= sizeof(uint64_t)) {
    uint64_t tag;
    memcpy(&tag, b, sizeof tag);
    if (tag != (id ^ BENCH_MAGIC ^ (uint64_t)size)) return 0;
  } else if (size > 0) {
    if (b[0] != (unsigned char)(id ^ size)) return 0;
  }
  if (size > sizeof(uint64_t) && b[size - 1] != (unsigned char)(id * 31u + 7u)) return 0;
  return 1;
}

/* Writes one byte in every 4 KiB page of the block (as a program that uses
 * its memory would), so the cost of fresh pages from the OS shows. Leaves
 * the first 64 bytes and the last byte to bench_stamp and headers. */
static inline void bench_touch_pages(void *p, size_t size, unsigned char v) {
  unsigned char *b = (unsigned char *)p;
  for (size_t off = 64; off + 1 < size; off += 4096) b[off] = v;
}

static inline int bench_pages_ok(const void *p, size_t size, unsigned char v) {
  const unsigned char *b = (const unsigned char *)p;
  for (size_t off = 64; off + 1 < size; off += 4096)
    if (b[off] != v) return 0;
  return 1;
}

static inline void *bench_xmalloc(size_t n) {
  void *p = malloc(n);
  if (!p && n) bench_die("malloc returned NULL");
  return p;
}

typedef void *(*bench_thread_fn)(void *);

/* Starts n threads running fn(args + i * stride) and joins them. */
static inline void bench_run_threads(int n, bench_thread_fn fn, void *args, size_t stride) {
  pthread_t *t = (pthread_t *)bench_xmalloc(sizeof(pthread_t) * (size_t)n);
  for (int i = 0; i < n; i++)
    if (pthread_create(&t[i], NULL, fn, (char *)args + (size_t)i * stride) != 0)
      bench_die("pthread_create");
  for (int i = 0; i < n; i++) pthread_join(t[i], NULL);
  free(t);
}

/* Spin briefly, then yield: threads outnumber cores on small machines. */
static inline void bench_pause(unsigned *spins) {
  if (++*spins < 64) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
  } else {
    sched_yield();
  }
}

#ifndef __cplusplus
/* A wake-up for queues between threads: the waiter spins a little and
 * then sleeps on a futex; the other side wakes it only when someone
 * sleeps. Spinning alone makes run times swing by 10x on a 2-core VM
 * (a spinning thread can hold the core its partner needs), so queues in
 * these workloads block the way a real broker's would, after a spin long
 * enough that a partner that is merely busy is not put to sleep. */
typedef struct {
  _Atomic uint32_t seq;
  _Atomic uint32_t sleepers;
  unsigned spin; /* pause instructions before sleeping */
} bench_event;

static inline void bench_event_init(bench_event *e, unsigned spin) {
  atomic_init(&e->seq, 0);
  atomic_init(&e->sleepers, 0);
  e->spin = spin;
}

/* Waits until ready(arg) is true. */
static inline void bench_event_wait(bench_event *e, int (*ready)(void *), void *arg) {
  for (unsigned spins = 0; !ready(arg); spins++) {
    if (spins < e->spin) {
#if defined(__x86_64__) || defined(__i386__)
      __builtin_ia32_pause();
#endif
      continue;
    }
    uint32_t s = atomic_load(&e->seq);
    atomic_fetch_add(&e->sleepers, 1);
    if (!ready(arg)) {
      struct timespec ts = {0, 2000000}; /* a lost wake-up costs 2 ms at most */
      syscall(SYS_futex, &e->seq, FUTEX_WAIT_PRIVATE, s, &ts, NULL, 0);
    }
    atomic_fetch_sub(&e->sleepers, 1);
    spins = 0;
  }
}

/* Call after publishing what the waiter waits for. */
static inline void bench_event_wake(bench_event *e) {
  if (atomic_load(&e->sleepers)) {
    atomic_fetch_add(&e->seq, 1);
    syscall(SYS_futex, &e->seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
  }
}
#endif /* !__cplusplus */

static inline void bench_result(const char *workload, int threads, long long ops, double secs,
                                const char *extra) {
  printf("RESULT workload=%s threads=%d ops=%lld secs=%.6f mops=%.3f check=ok%s%s\n", workload,
         threads, ops, secs, secs > 0 ? (double)ops / secs / 1e6 : 0.0, extra && *extra ? " " : "",
         extra ? extra : "");
  fflush(stdout);
}

#endif /* BRISK_BENCH_COMMON_H */
