/* Realloc growth: the way vectors and string builders grow.
 *
 * Each thread keeps 16 growing objects and advances a random one per
 * operation, so neighbours get in the way of growing in place:
 *   2 vectors grown by doubling, 16 B .. 64 KiB, the new half filled
 *   with 8-byte elements;
 *   14 strings grown by appending 1..64 bytes with realloc to the exact
 *   length each time, up to 64 KiB.
 * When an object reaches its limit it is checked in full, freed and
 * started again. Samples of the old contents are checked after every
 * realloc.
 *
 *   bench_realloc SIZE [THREADS]     SIZE = total realloc calls
 */
#include "bench_common.h"

enum { OBJECTS = 16, VECTORS = 2, VEC_MAX = 64 * 1024, STR_MAX = 64 * 1024 };

typedef struct {
  unsigned char *p;
  size_t len;
  unsigned gen;
} object;

typedef struct {
  long long ops;
  uint64_t seed;
} worker;

/* Contents: strings hold bytes, vectors 8-byte elements, both derived
 * from the position and the object's generation. */
static inline unsigned char byte_at(size_t i, unsigned gen) { return (unsigned char)(i * 131u + gen); }
static inline uint64_t word_at(size_t i, unsigned gen) { return (uint64_t)i * 0x9e3779b97f4a7c15ULL + gen; }

static int vec_ok(const unsigned char *p, size_t i, unsigned gen) {
  uint64_t w;
  memcpy(&w, p + i * 8, 8);
  return w == word_at(i, gen);
}

static void check_all(const object *o, int is_vec) {
  if (is_vec) {
    for (size_t i = 0; i < o->len / 8; i += 7)
      BENCH_CHECK(vec_ok(o->p, i, o->gen), "realloc: vector lost element %zu of %zu", i, o->len / 8);
    return;
  }
  for (size_t i = 0; i < o->len; i++)
    BENCH_CHECK(o->p[i] == byte_at(i, o->gen), "realloc: string lost byte %zu of %zu", i, o->len);
}

static void *grow(void *arg) {
  worker *w = (worker *)arg;
  bench_rng rng = {w->seed};
  object obj[OBJECTS];
  memset(obj, 0, sizeof obj);
  for (long long i = 0; i < w->ops; i++) {
    int k = (int)(bench_next(&rng) % OBJECTS);
    object *o = &obj[k];
    int is_vec = k < VECTORS;
    size_t limit = is_vec ? VEC_MAX : STR_MAX;
    if (o->len >= limit) {
      check_all(o, is_vec);
      free(o->p);
      o->p = NULL;
      o->len = 0;
      o->gen++;
    }
    size_t old = o->len;
    size_t len = is_vec ? (old ? old * 2 : 16) : old + bench_range(&rng, 1, 64);
    unsigned char *q = (unsigned char *)realloc(o->p, is_vec ? len : len + 1);
    if (!q) bench_die("realloc");
    if (is_vec) {
      size_t n = old / 8;
      if (n)
        BENCH_CHECK(vec_ok(q, 0, o->gen) && vec_ok(q, n / 2, o->gen) && vec_ok(q, n - 1, o->gen),
                    "realloc: vector lost contents growing %zu -> %zu", old, len);
      uint64_t *v = (uint64_t *)q;
      for (size_t j = n; j < len / 8; j++) v[j] = word_at(j, o->gen);
    } else {
      if (old)
        BENCH_CHECK(q[0] == byte_at(0, o->gen) && q[old - 1] == byte_at(old - 1, o->gen) &&
                        q[old / 2] == byte_at(old / 2, o->gen),
                    "realloc: string lost contents growing %zu -> %zu", old, len);
      for (size_t j = old; j < len; j++) q[j] = byte_at(j, o->gen);
      q[len] = 0;
    }
    o->p = q;
    o->len = len;
  }
  for (int k = 0; k < OBJECTS; k++) {
    if (obj[k].p) check_all(&obj[k], k < VECTORS);
    free(obj[k].p);
  }
  return NULL;
}

int main(int argc, char **argv) {
  bench_args a = bench_parse(argc, argv, 1, "SIZE [THREADS]", 2000000, 2);
  int T = a.threads;
  worker *w = (worker *)bench_xmalloc(sizeof(worker) * (size_t)T);
  for (int i = 0; i < T; i++) {
    w[i].ops = a.size / T;
    w[i].seed = 4242 + (uint64_t)i;
  }
  double t0 = bench_now();
  bench_run_threads(T, grow, w, sizeof(worker));
  double secs = bench_now() - t0;
  bench_result("realloc", T, (a.size / T) * T, secs, NULL);
  free(w);
  return 0;
}
