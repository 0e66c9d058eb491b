/* Server churn (larson-like).
 *
 * Models a server whose worker threads come and go: each thread owns a
 * table of live objects (8..1000 B), and every operation frees a random
 * one and allocates a replacement. After a round, the threads exit and new
 * threads take over the tables, so objects allocated by a thread that has
 * gone are freed by another (orphaned memory, cross-thread frees).
 *
 *   bench_larson SIZE [THREADS]      SIZE = total free+malloc pairs
 */
#include "bench_common.h"

enum { SLOTS = 1000, ROUNDS = 10, MIN_SIZE = 8, MAX_SIZE = 1000 };

typedef struct {
  void *p;
  uint32_t size;
  uint64_t id;
} slot;

typedef struct {
  slot *table;
  long long ops;
  uint64_t seed;
  uint64_t next_id;
} worker;

static void *churn(void *arg) {
  worker *w = (worker *)arg;
  bench_rng rng = {w->seed};
  slot *t = w->table;
  for (long long i = 0; i < w->ops; i++) {
    slot *s = &t[bench_next(&rng) % SLOTS];
    BENCH_CHECK(bench_stamp_ok(s->p, s->size, s->id), "larson: block %p (%u B) corrupted", s->p,
                s->size);
    free(s->p);
    s->size = (uint32_t)bench_range(&rng, MIN_SIZE, MAX_SIZE);
    s->id = w->next_id++;
    s->p = bench_xmalloc(s->size);
    bench_stamp(s->p, s->size, s->id);
  }
  return NULL;
}

int main(int argc, char **argv) {
  bench_args a = bench_parse(argc, argv, 1, "SIZE [THREADS]", 2000000, 4);
  int T = a.threads;
  slot **tables = (slot **)bench_xmalloc(sizeof(slot *) * (size_t)T);
  worker *w = (worker *)bench_xmalloc(sizeof(worker) * (size_t)T);
  bench_rng rng = {42};
  uint64_t id = 1;
  for (int i = 0; i < T; i++) {
    tables[i] = (slot *)bench_xmalloc(sizeof(slot) * SLOTS);
    for (int j = 0; j < SLOTS; j++) {
      slot *s = &tables[i][j];
      s->size = (uint32_t)bench_range(&rng, MIN_SIZE, MAX_SIZE);
      s->id = id++;
      s->p = bench_xmalloc(s->size);
      bench_stamp(s->p, s->size, s->id);
    }
  }
  long long per = a.size / ((long long)ROUNDS * T);
  if (per < 1) per = 1;
  double t0 = bench_now();
  for (int r = 0; r < ROUNDS; r++) {
    for (int i = 0; i < T; i++) {
      /* Round r's thread i takes the table thread i-1 worked on. */
      w[i].table = tables[(i + r) % T];
      w[i].ops = per;
      w[i].seed = 1000003ULL * (uint64_t)(r * T + i + 1);
      w[i].next_id = ((uint64_t)(r * T + i + 1) << 40);
    }
    bench_run_threads(T, churn, w, sizeof(worker));
  }
  double secs = bench_now() - t0;
  for (int i = 0; i < T; i++) {
    for (int j = 0; j < SLOTS; j++) {
      slot *s = &tables[i][j];
      BENCH_CHECK(bench_stamp_ok(s->p, s->size, s->id), "larson: block corrupted at exit");
      free(s->p);
    }
    free(tables[i]);
  }
  free(tables);
  free(w);
  bench_result("larson", T, per * ROUNDS * T, secs, NULL);
  return 0;
}
