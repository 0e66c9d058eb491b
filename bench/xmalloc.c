/* Producer/consumer (xmalloc-like).
 *
 * Half the threads allocate small objects of mixed sizes and hand them, in
 * batches of 256 through a ring of 8 batches (a side with nothing to do
 * sleeps on a futex), to a consumer thread that frees them:
 * every free is a free of another thread's memory. The consumer replays
 * the producer's random sequence, so it knows each object's size and
 * stamp and checks it before freeing.
 *
 *   bench_xmalloc SIZE [THREADS]     SIZE = total objects; THREADS/2 pairs
 */
#include "bench_common.h"

#ifndef SPIN
#define SPIN 200 /* pause instructions before sleeping */
#endif
enum { RING = 8, BATCH = 256 }; /* up to 2048 objects in flight per pair */

typedef struct {
  void *p[BATCH];
} batch;

typedef struct {
  _Alignas(64) _Atomic uint64_t head; /* written by the producer */
  _Alignas(64) _Atomic uint64_t tail; /* written by the consumer */
  _Alignas(64) bench_event not_full;  /* the producer sleeps here */
  _Alignas(64) bench_event not_empty; /* the consumer sleeps here */
  _Alignas(64) batch ring[RING];
  long long objects;
  uint64_t seed;
} channel;

static size_t object_size(bench_rng *r) {
  uint64_t x = bench_next(r);
  /* Mostly 8..128 B, one in eight up to 1 KiB. */
  return (x & 7) ? 8 + (size_t)((x >> 8) % 121) : 8 + (size_t)((x >> 8) % 1017);
}

static int has_room(void *arg) {
  channel *c = (channel *)arg;
  return atomic_load_explicit(&c->head, memory_order_relaxed) -
             atomic_load_explicit(&c->tail, memory_order_acquire) < RING;
}

static int has_batch(void *arg) {
  channel *c = (channel *)arg;
  return atomic_load_explicit(&c->head, memory_order_acquire) !=
         atomic_load_explicit(&c->tail, memory_order_relaxed);
}

static void *producer(void *arg) {
  channel *c = (channel *)arg;
  bench_rng rng = {c->seed};
  long long made = 0;
  while (made < c->objects) {
    uint64_t h = atomic_load_explicit(&c->head, memory_order_relaxed);
    bench_event_wait(&c->not_full, has_room, c);
    batch *b = &c->ring[h % RING];
    for (int i = 0; i < BATCH; i++, made++) {
      if (made < c->objects) {
        size_t n = object_size(&rng);
        b->p[i] = bench_xmalloc(n);
        bench_stamp(b->p[i], n, (uint64_t)made);
      } else {
        b->p[i] = NULL;
      }
    }
    atomic_store_explicit(&c->head, h + 1, memory_order_seq_cst);
    bench_event_wake(&c->not_empty);
  }
  return NULL;
}

static void *consumer(void *arg) {
  channel *c = (channel *)arg;
  bench_rng rng = {c->seed}; /* replays the producer's sizes */
  long long freed = 0;
  while (freed < c->objects) {
    uint64_t t = atomic_load_explicit(&c->tail, memory_order_relaxed);
    bench_event_wait(&c->not_empty, has_batch, c);
    batch *b = &c->ring[t % RING];
    for (int i = 0; i < BATCH && freed < c->objects; i++, freed++) {
      size_t n = object_size(&rng);
      BENCH_CHECK(b->p[i] && bench_stamp_ok(b->p[i], n, (uint64_t)freed),
                  "xmalloc: object %lld (%zu B) corrupted", freed, n);
      free(b->p[i]);
    }
    atomic_store_explicit(&c->tail, t + 1, memory_order_seq_cst);
    bench_event_wake(&c->not_full);
  }
  return NULL;
}

int main(int argc, char **argv) {
  bench_args a = bench_parse(argc, argv, 1, "SIZE [THREADS]", 4000000, 4);
  int pairs = a.threads / 2 > 0 ? a.threads / 2 : 1;
  channel *ch = (channel *)aligned_alloc(64, sizeof(channel) * (size_t)pairs);
  if (!ch) bench_die("aligned_alloc");
  pthread_t *t = (pthread_t *)bench_xmalloc(sizeof(pthread_t) * 2 * (size_t)pairs);
  for (int i = 0; i < pairs; i++) {
    atomic_init(&ch[i].head, 0);
    atomic_init(&ch[i].tail, 0);
    bench_event_init(&ch[i].not_full, SPIN);
    bench_event_init(&ch[i].not_empty, SPIN);
    ch[i].objects = a.size / pairs;
    ch[i].seed = 77 + (uint64_t)i;
  }
  double t0 = bench_now();
  for (int i = 0; i < pairs; i++) {
    if (pthread_create(&t[2 * i], NULL, consumer, &ch[i]) ||
        pthread_create(&t[2 * i + 1], NULL, producer, &ch[i]))
      bench_die("pthread_create");
  }
  for (int i = 0; i < 2 * pairs; i++) pthread_join(t[i], NULL);
  double secs = bench_now() - t0;
  bench_result("xmalloc", 2 * pairs, (a.size / pairs) * pairs, secs, NULL);
  free(t);
  free(ch);
  return 0;
}
