/* Producer/consumer at a chosen shape: every block is allocated by a
 * producer thread and freed by a consumer thread.
 *
 *   bench_pc pairs|mesh small|large SIZE [THREADS]
 *
 * THREADS/2 producers and THREADS/2 consumers. pairs: producer i sends
 * only to consumer i (1:1). mesh: producer i sends its k-th batch to
 * consumer (i + k) mod C, so every consumer frees every producer's blocks
 * (N:M). small: 16 B..1 KiB blocks, batches of 64; large: 64..256 KiB, a
 * stamp at each end and 64 bytes before the last written, batches of 8. A producer has at most 4
 * batches in flight; a side with nothing to do spins briefly, then yields.
 * Every block carries a stamp of its number, checked before its free.
 * SIZE is the number of blocks over all producers.
 */
#include "bench_common.h"

enum { MAX_SIDE = 256, IN_FLIGHT = 4, MAX_BATCH = 64 };

typedef struct {
  void *p[MAX_BATCH];
  uint32_t n[MAX_BATCH];
  uint64_t first;  /* the number of the batch's first block */
  int count;
  int producer;
} batch;

/* One batch slot from producer i to consumer j. */
typedef struct {
  _Alignas(64) _Atomic(batch *) slot;
} link_t;

static int P, C, batch_len, mesh, large;
static link_t *links; /* P x C */
static _Alignas(64) _Atomic long long freed_total;
static long long total;
static struct {
  _Alignas(64) _Atomic int in_flight;
} credit[MAX_SIDE];

static size_t block_size(bench_rng *r) {
  return large ? bench_range(r, 64 * 1024, 256 * 1024) : bench_range(r, 16, 1024);
}

static void *producer(void *arg) {
  int i = (int)(intptr_t)arg;
  bench_rng rng = {1234567 + (uint64_t)i};
  long long mine = total / P + (i < total % P ? 1 : 0);
  uint64_t id = (uint64_t)i << 40;
  for (long long made = 0, k = 0; made < mine; k++) {
    unsigned spins = 0;
    while (atomic_load_explicit(&credit[i].in_flight, memory_order_acquire) >= IN_FLIGHT) bench_pause(&spins);
    batch *b = (batch *)bench_xmalloc(sizeof(batch));
    b->count = 0;
    b->first = id;
    b->producer = i;
    for (; b->count < batch_len && made < mine; b->count++, made++, id++) {
      size_t n = block_size(&rng);
      void *p = bench_xmalloc(n);
      bench_stamp(p, n, id);
      if (large) memset((char *)p + n - 128, (int)(id & 0xff), 64); /* (the stamp has the last byte) */
      b->p[b->count] = p;
      b->n[b->count] = (uint32_t)n;
    }
    atomic_fetch_add_explicit(&credit[i].in_flight, 1, memory_order_relaxed);
    int j = mesh ? (int)((i + k) % C) : i;
    link_t *l = &links[(size_t)i * (size_t)C + (size_t)j];
    spins = 0;
    batch *expected = NULL;
    while (!atomic_compare_exchange_weak_explicit(&l->slot, &expected, b, memory_order_release,
                                                  memory_order_relaxed)) {
      expected = NULL;
      bench_pause(&spins);
    }
  }
  return NULL;
}

static void *consumer(void *arg) {
  int j = (int)(intptr_t)arg;
  unsigned spins = 0;
  for (;;) {
    int got = 0;
    for (int i = mesh ? 0 : j; i < (mesh ? P : j + 1); i++) {
      link_t *l = &links[(size_t)i * (size_t)C + (size_t)j];
      if (atomic_load_explicit(&l->slot, memory_order_relaxed) == NULL) continue;
      batch *b = atomic_exchange_explicit(&l->slot, NULL, memory_order_acquire);
      for (int x = 0; x < b->count; x++) {
        void *p = b->p[x];
        size_t n = b->n[x];
        uint64_t id = b->first + (uint64_t)x;
        BENCH_CHECK(bench_stamp_ok(p, n, id), "pc: block %llx (%zu B) corrupted", (unsigned long long)id, n);
        if (large) {
          const unsigned char *tail = (const unsigned char *)p + n - 128;
          BENCH_CHECK(tail[0] == (unsigned char)(id & 0xff) && tail[63] == (unsigned char)(id & 0xff),
                      "pc: block %llx (%zu B) tail corrupted", (unsigned long long)id, n);
        }
        free(p);
      }
      atomic_fetch_sub_explicit(&credit[b->producer].in_flight, 1, memory_order_release);
      atomic_fetch_add_explicit(&freed_total, b->count, memory_order_relaxed);
      free(b);
      got = 1;
    }
    if (got) {
      spins = 0;
    } else {
      if (atomic_load_explicit(&freed_total, memory_order_relaxed) >= total) return NULL;
      bench_pause(&spins);
    }
  }
}

int main(int argc, char **argv) {
  if (argc < 3 || (strcmp(argv[1], "pairs") && strcmp(argv[1], "mesh")) ||
      (strcmp(argv[2], "small") && strcmp(argv[2], "large"))) {
    fprintf(stderr, "usage: %s pairs|mesh small|large SIZE [THREADS]\n", argv[0]);
    return 2;
  }
  mesh = strcmp(argv[1], "mesh") == 0;
  large = strcmp(argv[2], "large") == 0;
  bench_args a = bench_parse(argc, argv, 3, "pairs|mesh small|large SIZE [THREADS]", 2000000, 4);
  P = C = a.threads / 2 > 0 ? a.threads / 2 : 1;
  if (P > MAX_SIDE) bench_die("too many threads");
  batch_len = large ? 8 : 64;
  total = a.size;
  links = (link_t *)aligned_alloc(64, sizeof(link_t) * (size_t)P * (size_t)C);
  if (!links) bench_die("aligned_alloc");
  for (size_t x = 0; x < (size_t)P * (size_t)C; x++) atomic_init(&links[x].slot, NULL);
  pthread_t *t = (pthread_t *)bench_xmalloc(sizeof(pthread_t) * (size_t)(P + C));
  double t0 = bench_now();
  for (int i = 0; i < C; i++)
    if (pthread_create(&t[i], NULL, consumer, (void *)(intptr_t)i)) bench_die("pthread_create");
  for (int i = 0; i < P; i++)
    if (pthread_create(&t[C + i], NULL, producer, (void *)(intptr_t)i)) bench_die("pthread_create");
  for (int i = 0; i < P + C; i++) pthread_join(t[i], NULL);
  double secs = bench_now() - t0;
  char name[32];
  snprintf(name, sizeof name, "pc-%s-%s", argv[2], mesh ? "mesh" : "pairs");
  bench_result(name, P + C, total, secs, NULL);
  free(t);
  free(links);
  return 0;
}
