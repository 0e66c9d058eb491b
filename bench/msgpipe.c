/* Messaging pipeline: the pattern of a message broker.
 *
 * An "I/O" thread allocates message buffers (64 B, 256 B, 1 KiB, 64 KiB,
 * 128 KiB, 256 KiB, one size per phase), fills a header and touches every
 * page, and passes them through a bounded queue (depth 128) to an
 * "application" thread that checks and frees them. A side with nothing to
 * do spins briefly, then sleeps on a futex until a batch (a quarter of the
 * queue) is ready for it, as message brokers do: waking the other side for
 * every message would make the run time a matter of who sleeps when (runs
 * of one build differed 5x), not of the allocator. Every free is a cross-thread free, the case
 * where a per-thread allocator pays for bookkeeping and delayed frees.
 *
 *   bench_msgpipe SIZE [THREADS]     SIZE = 64-byte message count; larger
 *                                    sizes send SIZE / (1 + size/4096)
 *                                    messages. THREADS/2 I/O+app pairs.
 */
#include "bench_common.h"

#ifndef SPIN
#define SPIN 200 /* pause instructions before sleeping */
#endif
enum { DEPTH = 128, BATCH = DEPTH / 4, NSIZES = 6 };
static const size_t sizes[NSIZES] = {64, 256, 1024, 65536, 131072, 262144};

typedef struct {
  _Alignas(64) _Atomic uint64_t head;
  _Alignas(64) _Atomic uint64_t tail;
  _Alignas(64) bench_event not_full;  /* the I/O thread sleeps here */
  _Alignas(64) bench_event not_empty; /* the application thread sleeps here */
  _Alignas(64) void *slots[DEPTH];
  long long count[NSIZES];
  uint64_t total; /* messages over all phases */
  double phase_end[NSIZES];
} pipe_t;

typedef struct {
  uint64_t seq;
  uint64_t size;
} msg_header;

static uint64_t queued(pipe_t *q) {
  return atomic_load_explicit(&q->head, memory_order_acquire) -
         atomic_load_explicit(&q->tail, memory_order_acquire);
}

/* The I/O thread, once the queue was full, resumes when a batch of slots is
 * free. */
static int has_room(void *arg) {
  pipe_t *q = (pipe_t *)arg;
  return queued(q) <= DEPTH - BATCH;
}

/* The application thread, once the queue was empty, resumes when a batch
 * waits (or every message left does). */
static uint64_t batch_wanted(pipe_t *q, uint64_t t) {
  return q->total - t < BATCH ? q->total - t : BATCH;
}

static int has_batch(void *arg) {
  pipe_t *q = (pipe_t *)arg;
  return queued(q) >= batch_wanted(q, atomic_load_explicit(&q->tail, memory_order_relaxed));
}

static void *io_thread(void *arg) {
  pipe_t *q = (pipe_t *)arg;
  uint64_t h = 0;
  for (int k = 0; k < NSIZES; k++) {
    for (long long i = 0; i < q->count[k]; i++, h++) {
      if (h - atomic_load_explicit(&q->tail, memory_order_acquire) == DEPTH)
        bench_event_wait(&q->not_full, has_room, q);
      size_t n = sizes[k];
      unsigned char *m = (unsigned char *)bench_xmalloc(n);
      msg_header hd = {h, n};
      memcpy(m, &hd, sizeof hd);
      bench_touch_pages(m, n, (unsigned char)h);
      m[n - 1] = (unsigned char)(h ^ 0x5a);
      q->slots[h % DEPTH] = m;
      atomic_store_explicit(&q->head, h + 1, memory_order_seq_cst);
      if (h + 1 - atomic_load_explicit(&q->tail, memory_order_acquire) >= BATCH || h + 1 == q->total)
        bench_event_wake(&q->not_empty);
    }
  }
  return NULL;
}

static void *app_thread(void *arg) {
  pipe_t *q = (pipe_t *)arg;
  uint64_t t = 0;
  for (int k = 0; k < NSIZES; k++) {
    for (long long i = 0; i < q->count[k]; i++, t++) {
      if (atomic_load_explicit(&q->head, memory_order_acquire) == t)
        bench_event_wait(&q->not_empty, has_batch, q);
      unsigned char *m = (unsigned char *)q->slots[t % DEPTH];
      size_t n = sizes[k];
      msg_header hd;
      memcpy(&hd, m, sizeof hd);
      BENCH_CHECK(hd.seq == t && hd.size == n && m[n - 1] == (unsigned char)(t ^ 0x5a) &&
                      bench_pages_ok(m, n, (unsigned char)t),
                  "msgpipe: message %llu of %zu B corrupted", (unsigned long long)t, n);
      free(m);
      atomic_store_explicit(&q->tail, t + 1, memory_order_seq_cst);
      if (atomic_load_explicit(&q->head, memory_order_acquire) - (t + 1) <= DEPTH - BATCH)
        bench_event_wake(&q->not_full);
    }
    q->phase_end[k] = bench_now();
  }
  return NULL;
}

int main(int argc, char **argv) {
  bench_args a = bench_parse(argc, argv, 1, "SIZE [THREADS]", 2000000, 2);
  int pairs = a.threads / 2 > 0 ? a.threads / 2 : 1;
  pipe_t *q = (pipe_t *)aligned_alloc(64, sizeof(pipe_t) * (size_t)pairs);
  if (!q) bench_die("aligned_alloc");
  long long total = 0;
  for (int p = 0; p < pairs; p++) {
    atomic_init(&q[p].head, 0);
    atomic_init(&q[p].tail, 0);
    q[p].total = 0;
    bench_event_init(&q[p].not_full, SPIN);
    bench_event_init(&q[p].not_empty, SPIN);
    for (int k = 0; k < NSIZES; k++) {
      long long c = a.size / (long long)(1 + sizes[k] / 4096);
      q[p].count[k] = c > 0 ? c : 1;
      total += q[p].count[k];
      q[p].total += (uint64_t)q[p].count[k];
    }
  }
  pthread_t *t = (pthread_t *)bench_xmalloc(sizeof(pthread_t) * 2 * (size_t)pairs);
  double t0 = bench_now();
  for (int p = 0; p < pairs; p++)
    if (pthread_create(&t[2 * p], NULL, app_thread, &q[p]) ||
        pthread_create(&t[2 * p + 1], NULL, io_thread, &q[p]))
      bench_die("pthread_create");
  for (int i = 0; i < 2 * pairs; i++) pthread_join(t[i], NULL);
  double secs = bench_now() - t0;
  double prev = t0;
  for (int k = 0; k < NSIZES; k++) {
    double d = q[0].phase_end[k] - prev;
    prev = q[0].phase_end[k];
    printf("METRIC id=msg.%zu kmsgs_s=%.1f\n", sizes[k], d > 0 ? q[0].count[k] / d / 1e3 : 0.0);
  }
  bench_result("msgpipe", 2 * pairs, total, secs, NULL);
  free(t);
  free(q);
  return 0;
}
