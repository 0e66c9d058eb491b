/* Producer/consumer test: memory allocated on one thread and freed on another
 * must not pile up, and the content must arrive intact.
 *
 * ctest-labels: sanitize tsan
 *
 * Part 1 (steady state): 2 producer threads allocate blocks with
 * brisk_malloc (phase "small": 16..256 B; phase "mixed": mostly small, some
 * up to 64 KiB), fill each block with a pattern, and pass them in batches
 * through a bounded mutex/condvar queue to 2 consumer threads that check
 * the whole content and brisk_free the blocks. Several GiB move through in
 * release builds. A monitor thread samples RSS (/proc/self/statm) every few
 * milliseconds; after warm-up the peak RSS must stay below
 *     RSS before the phase + 3 x (peak live bytes) + 64 MiB
 * and RSS must not keep growing (the peak in the second half of the run may
 * exceed the peak in the first half by at most 25% + 16 MiB).
 *
 * Part 2 (messaging): an "I/O" thread allocates message buffers of 64 B,
 * 256 B, 1 KiB, 64 KiB, 128 KiB and 256 KiB, writes them, and passes them one
 * at a time through a lock-free single-producer/single-consumer ring to an
 * "application" thread that checks and frees them (the pattern of a
 * message broker such as libzmq). The same RSS bound applies; throughput is
 * printed.
 *
 * RSS is sampled by the monitor thread and, so that each half of a run has
 * samples however the threads are scheduled, by the producing threads 32
 * times per half.
 *
 * The RSS bounds are not checked in the ThreadSanitizer build (its shadow
 * memory is counted in RSS); numbers are printed anyway.
 *
 * Environment: BRISKTEST_SCALE=<float> scales the volume (default 1, 0.05
 * under TSan, 0.25 when UBSAN_OPTIONS is set).
 */
#define _GNU_SOURCE
#include "brisk.h"
#include "brisk_errors.h"

#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "under_tsan.h"

#define GOLD 0x9E3779B97F4A7C15ull
#define MiB (1024.0 * 1024.0)

static int failures;

static void fail(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void fail(const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fprintf(stderr, "test_prodcons: FAIL: %s\n", buf);
  fflush(stderr);
  abort();
}

/* a bound violation is reported but the run continues to print all numbers */
static void soft_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void soft_fail(const char *fmt, ...) {
  char buf[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(buf, sizeof buf, fmt, ap);
  va_end(ap);
  fprintf(stderr, "test_prodcons: FAIL: %s\n", buf);
  fflush(stderr);
  failures++;
}

static double now_sec(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static double test_scale(void) {
  const char *e = getenv("BRISKTEST_SCALE");
  double s = 1.0;
  if (e && *e) s = atof(e);
  else if (UNDER_TSAN) s = 0.05;
  else if (getenv("UBSAN_OPTIONS")) s = 0.25;
  if (s <= 0) s = 0.001;
  return s;
}

static inline uint64_t mix64(uint64_t x) {
  x ^= x >> 30; x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27; x *= 0x94d049bb133111ebull;
  x ^= x >> 31;
  return x;
}
static inline uint64_t rnd(uint64_t *s) { *s += GOLD; return mix64(*s); }

/* RSS in bytes, read without stdio */
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

/* ---- block content: word 0 = size, word 1 = tag, then seed + k*GOLD ------ */
static void fill_block(void *p, size_t size, uint64_t tag) {
  uint64_t *w = p;
  uint64_t seed = mix64((uintptr_t)p ^ size ^ tag);
  size_t nw = size / 8;
  w[0] = size;
  w[1] = tag;
  for (size_t k = 2; k < nw; k++) w[k] = seed + k * GOLD;
  unsigned char *c = p;
  for (size_t i = nw * 8; i < size; i++) c[i] = (unsigned char)(seed >> (8 * (i % 8)));
}

static size_t check_block(const void *p, const char *who) {
  const uint64_t *w = p;
  size_t size = w[0];
  uint64_t tag = w[1];
  if (size < 16 || size > (1u << 20) || brisk_usable_size(p) < size)
    fail("%s: block %p: size word corrupted (0x%zx, usable size %zu)", who, p, size, brisk_usable_size(p));
  uint64_t seed = mix64((uintptr_t)p ^ size ^ tag);
  size_t nw = size / 8;
  for (size_t k = 2; k < nw; k++)
    if (w[k] != seed + k * GOLD)
      fail("%s: block %p (size %zu) corrupted at offset %zu: expected 0x%016" PRIx64 " found 0x%016" PRIx64,
           who, p, size, k * 8, (uint64_t)(seed + k * GOLD), w[k]);
  const unsigned char *c = p;
  for (size_t i = nw * 8; i < size; i++)
    if (c[i] != (unsigned char)(seed >> (8 * (i % 8))))
      fail("%s: block %p (size %zu) corrupted at offset %zu", who, p, size, i);
  return size;
}

static void *alloc_block(size_t size, uint64_t tag) {
  void *p = brisk_malloc(size);
  if (!p) fail("brisk_malloc(%zu) returned NULL", size);
  if ((uintptr_t)p % 16) fail("brisk_malloc(%zu) returned %p, not 16-byte aligned", size, p);
  fill_block(p, size, tag);
  return p;
}

/* ---- RSS monitor ----------------------------------------------------------- */
static _Atomic int mon_stop;
static _Atomic int mon_phase;          /* 0 warm-up, 1 first half, 2 second half */
static _Atomic size_t mon_peak[3];
static _Atomic size_t live_bytes, live_peak;

static void atomic_max(_Atomic size_t *a, size_t v) {
  size_t cur = atomic_load_explicit(a, memory_order_relaxed);
  while (v > cur && !atomic_compare_exchange_weak_explicit(a, &cur, v, memory_order_relaxed, memory_order_relaxed)) {
  }
}

static void sample_rss(void) { atomic_max(&mon_peak[atomic_load(&mon_phase)], rss_bytes()); }

static void *monitor(void *arg) {
  (void)arg;
  while (!atomic_load(&mon_stop)) {
    sample_rss();
    struct timespec ts = {0, 5 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

static pthread_t mon_thread;
static void monitor_start(void) {
  atomic_store(&mon_stop, 0);
  atomic_store(&mon_phase, 0);
  for (int i = 0; i < 3; i++) atomic_store(&mon_peak[i], 0);
  atomic_store(&live_bytes, 0);
  atomic_store(&live_peak, 0);
  if (pthread_create(&mon_thread, NULL, monitor, NULL)) fail("pthread_create(monitor)");
}
static void monitor_stop(void) {
  atomic_store(&mon_stop, 1);
  pthread_join(mon_thread, NULL);
}

/* Check the RSS bound for a phase; base = RSS before the phase. slack = bytes
 * in flight that the live counter cannot see. */
static void check_rss(const char *phase, size_t base, size_t slack) {
  size_t p1 = atomic_load(&mon_peak[1]), p2 = atomic_load(&mon_peak[2]);
  if (p1 == 0 || p2 == 0) soft_fail("%s: no RSS sample in the %s half of the run", phase, p1 == 0 ? "first" : "second");
  size_t peak = p1 > p2 ? p1 : p2;
  size_t live = atomic_load(&live_peak) + slack;
  size_t bound = base + 3 * live + (size_t)(64 * MiB);
  printf("test_prodcons: %s: RSS before %.1f MiB, peak after warm-up %.1f MiB (first half %.1f, second half "
         "%.1f), peak live %.1f MiB, bound %.1f MiB\n",
         phase, base / MiB, peak / MiB, p1 / MiB, p2 / MiB, live / MiB, bound / MiB);
  if (UNDER_TSAN) {
    printf("test_prodcons: %s: RSS bounds not checked under ThreadSanitizer\n", phase);
    return;
  }
  if (peak > bound)
    soft_fail("%s: peak RSS after warm-up %.1f MiB exceeds bound %.1f MiB (RSS before %.1f MiB + 3 x peak "
              "live %.1f MiB + 64 MiB)",
              phase, peak / MiB, bound / MiB, base / MiB, live / MiB);
  /* Growth beyond what the live set can explain: the consumer may lag
   * more in the second half on a loaded machine (up to the peak live). */
  if (p2 > p1 + p1 / 4 + (size_t)(16 * MiB) + (size_t)live)
    soft_fail("%s: RSS keeps growing: peak %.1f MiB in the second half vs %.1f MiB in the first half", phase,
              p2 / MiB, p1 / MiB);
}

/* ---- part 1: batched mutex queue ----------------------------------------- */
#define BATCH 128
#define QCAP 32
#define NPROD 2
#define NCONS 2

typedef struct {
  int n;
  size_t bytes;
  void *p[BATCH];
} batch_t;

static struct {
  pthread_mutex_t mu;
  pthread_cond_t not_full, not_empty;
  batch_t ring[QCAP];
  int head, count, producers_left;
} q = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER, {{0, 0, {0}}}, 0, 0, 0};

static int mixed_phase;
static uint64_t phase_target;           /* bytes to produce in this phase */
static _Atomic uint64_t produced_bytes; /* bytes produced so far */
static _Atomic uint64_t produced_objs;
static _Atomic size_t max_batch_bytes;

static void q_push(const batch_t *b) {
  pthread_mutex_lock(&q.mu);
  while (q.count == QCAP) pthread_cond_wait(&q.not_full, &q.mu);
  q.ring[(q.head + q.count) % QCAP] = *b;
  q.count++;
  pthread_cond_signal(&q.not_empty);
  pthread_mutex_unlock(&q.mu);
}

static int q_pop(batch_t *b) {
  pthread_mutex_lock(&q.mu);
  while (q.count == 0 && q.producers_left > 0) pthread_cond_wait(&q.not_empty, &q.mu);
  if (q.count == 0) {
    pthread_mutex_unlock(&q.mu);
    return 0;
  }
  *b = q.ring[q.head];
  q.head = (q.head + 1) % QCAP;
  q.count--;
  pthread_cond_signal(&q.not_full);
  pthread_mutex_unlock(&q.mu);
  return 1;
}

static size_t pc_size(uint64_t *rs) {
  uint64_t r = rnd(rs);
  if (!mixed_phase) return 16 + (r >> 8) % 241; /* 16..256 */
  unsigned pick = r % 100;
  r >>= 8;
  if (pick < 85) return 16 + r % 497;           /* 16..512 */
  if (pick < 98) return 512 + r % (8192 - 512 + 1);
  return 8192 + r % (65536 - 8192 + 1);
}

static void *producer(void *arg) {
  uint64_t rs = (uint64_t)(uintptr_t)arg * 7919 + 17;
  uint64_t tag = (uint64_t)(uintptr_t)arg << 48;
  batch_t b;
  for (;;) {
    b.n = 0;
    b.bytes = 0;
    for (int i = 0; i < BATCH; i++) {
      size_t sz = pc_size(&rs);
      b.p[b.n++] = alloc_block(sz, tag++);
      b.bytes += sz;
    }
    size_t live = atomic_fetch_add(&live_bytes, b.bytes) + b.bytes;
    atomic_max(&live_peak, live);
    atomic_max(&max_batch_bytes, b.bytes);
    q_push(&b);
    atomic_fetch_add(&produced_objs, (uint64_t)b.n);
    uint64_t total = atomic_fetch_add(&produced_bytes, b.bytes) + b.bytes;
    if (total >= phase_target / 10 && atomic_load(&mon_phase) == 0) atomic_store(&mon_phase, 1);
    if (total >= phase_target / 10 + (phase_target - phase_target / 10) / 2 && atomic_load(&mon_phase) == 1)
      atomic_store(&mon_phase, 2);
    /* a sample every 1/64 of the target after warm-up */
    uint64_t step = phase_target / 64 + 1;
    if (total >= phase_target / 10 && (total - b.bytes) / step != total / step) sample_rss();
    if (total >= phase_target) break;
  }
  pthread_mutex_lock(&q.mu);
  q.producers_left--;
  pthread_cond_broadcast(&q.not_empty);
  pthread_mutex_unlock(&q.mu);
  return NULL;
}

static void *consumer(void *arg) {
  (void)arg;
  batch_t b;
  while (q_pop(&b)) {
    size_t bytes = 0;
    for (int i = 0; i < b.n; i++) {
      bytes += check_block(b.p[i], "consumer");
      if (i % 3 == 0) brisk_free_sized(b.p[i], ((uint64_t *)b.p[i])[0]);
      else brisk_free(b.p[i]);
    }
    if (bytes != b.bytes) fail("consumer: batch of %d blocks holds %zu bytes, producer put %zu", b.n, bytes, b.bytes);
    atomic_fetch_sub(&live_bytes, bytes);
  }
  return NULL;
}

static void run_steady(const char *name, int mixed, uint64_t target) {
  mixed_phase = mixed;
  phase_target = target;
  atomic_store(&produced_bytes, 0);
  atomic_store(&produced_objs, 0);
  atomic_store(&max_batch_bytes, 0);
  q.head = q.count = 0;
  q.producers_left = NPROD;
  brisk_collect(true);
  size_t base = rss_bytes();
  monitor_start();
  double t0 = now_sec();
  pthread_t pt[NPROD], ct[NCONS];
  for (int i = 0; i < NCONS; i++)
    if (pthread_create(&ct[i], NULL, consumer, NULL)) fail("pthread_create(consumer)");
  for (int i = 0; i < NPROD; i++)
    if (pthread_create(&pt[i], NULL, producer, (void *)(uintptr_t)(i + 1))) fail("pthread_create(producer)");
  for (int i = 0; i < NPROD; i++) pthread_join(pt[i], NULL);
  for (int i = 0; i < NCONS; i++) pthread_join(ct[i], NULL);
  double dt = now_sec() - t0;
  monitor_stop();
  uint64_t bytes = atomic_load(&produced_bytes), objs = atomic_load(&produced_objs);
  printf("test_prodcons: %s: %d producers -> %d consumers, %.2f GiB in %" PRIu64 " blocks, %.2f s, %.1f M "
         "blocks/s\n",
         name, NPROD, NCONS, bytes / (1024.0 * MiB), objs, dt, objs / dt / 1e6);
  if (atomic_load(&live_bytes) != 0) fail("%s: %zu bytes still live after the run", name, atomic_load(&live_bytes));
  /* blocks in producers' unfinished batches are not in the live count */
  check_rss(name, base, NPROD * atomic_load(&max_batch_bytes));
  fflush(stdout);
}

/* ---- part 2: messaging over an SPSC ring --------------------------------- */
#define RING 256
static _Atomic(void *) ring[RING];
static _Atomic uint64_t ring_head, ring_tail; /* head: consumer, tail: producer */
static uint64_t msg_count;
static size_t msg_size;

static void spin_pause(unsigned *spins) {
  if (++*spins > 64) {
    sched_yield();
    *spins = 0;
  }
}

static void *io_thread(void *arg) {
  (void)arg;
  uint64_t tail = 0;
  for (uint64_t i = 0; i < msg_count; i++) {
    void *p = alloc_block(msg_size, i);
    unsigned spins = 0;
    while (tail - atomic_load_explicit(&ring_head, memory_order_acquire) >= RING) spin_pause(&spins);
    atomic_store_explicit(&ring[tail % RING], p, memory_order_relaxed);
    tail++;
    atomic_store_explicit(&ring_tail, tail, memory_order_release);
    size_t inflight = (size_t)(tail - atomic_load_explicit(&ring_head, memory_order_relaxed)) * msg_size;
    atomic_max(&live_peak, inflight);
    if (i == msg_count / 10) atomic_store(&mon_phase, 1);
    if (i == msg_count / 10 + (msg_count - msg_count / 10) / 2) atomic_store(&mon_phase, 2);
    if (i >= msg_count / 10 && i % (msg_count / 64 + 1) == 0) sample_rss();
  }
  return NULL;
}

static void *app_thread(void *arg) {
  (void)arg;
  uint64_t head = 0;
  for (uint64_t i = 0; i < msg_count; i++) {
    unsigned spins = 0;
    while (atomic_load_explicit(&ring_tail, memory_order_acquire) == head) spin_pause(&spins);
    void *p = atomic_load_explicit(&ring[head % RING], memory_order_relaxed);
    head++;
    atomic_store_explicit(&ring_head, head, memory_order_release);
    size_t sz = check_block(p, "application thread");
    if (sz != msg_size) fail("application thread: message %" PRIu64 " has size %zu, expected %zu", i, sz, msg_size);
    if (((uint64_t *)p)[1] != i) fail("application thread: message %" PRIu64 " arrived out of order", i);
    brisk_free(p);
  }
  return NULL;
}

static void run_messaging(size_t size, uint64_t count) {
  msg_size = size;
  msg_count = count;
  atomic_store(&ring_head, 0);
  atomic_store(&ring_tail, 0);
  brisk_collect(true);
  size_t base = rss_bytes();
  monitor_start();
  double t0 = now_sec();
  pthread_t io, app;
  if (pthread_create(&app, NULL, app_thread, NULL)) fail("pthread_create(app)");
  if (pthread_create(&io, NULL, io_thread, NULL)) fail("pthread_create(io)");
  pthread_join(io, NULL);
  pthread_join(app, NULL);
  double dt = now_sec() - t0;
  monitor_stop();
  char name[64];
  snprintf(name, sizeof name, "messaging %zu B", size);
  printf("test_prodcons: %s: %" PRIu64 " messages I/O thread -> application thread, %.2f s, %.2f M msg/s\n", name,
         count, dt, count / dt / 1e6);
  check_rss(name, base, size);
  fflush(stdout);
}

int main(void) {
  double scale = test_scale();
  printf("test_prodcons: scale %.3f%s\n", scale, UNDER_TSAN ? " (ThreadSanitizer build)" : "");
  double t0 = now_sec();
  const double GiB = 1024.0 * MiB;
  run_steady("steady small (16..256 B)", 0, (uint64_t)(1.0 * GiB * scale));
  run_steady("steady mixed (16 B..64 KiB)", 1, (uint64_t)(3.0 * GiB * scale));

  static const size_t sizes[] = {64, 256, 1024, 64 << 10, 128 << 10, 256 << 10};
  for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    size_t s = sizes[i];
    uint64_t count = (uint64_t)(512.0 * MiB * scale / (double)s);
    uint64_t cap = (uint64_t)(5e5 * scale);
    uint64_t floor_ = (uint64_t)(4000 * (scale < 1 ? scale : 1));
    if (count > cap) count = cap;
    if (count < floor_) count = floor_;
    if (count < 100) count = 100;
    run_messaging(s, count);
  }
  brisk_collect(true);
  printf("test_prodcons: RSS at the end %.1f MiB, total %.2f s\n", rss_bytes() / MiB, now_sec() - t0);
  long errors = brisk_errors_reported();
  if (errors != 0) soft_fail("brisk reported %ld bad inputs; this test makes none", errors);
  if (failures) {
    fprintf(stderr, "test_prodcons: %d check(s) failed\n", failures);
    return 1;
  }
  printf("test_prodcons: PASS\n");
  return 0;
}
