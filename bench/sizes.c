/* Size-range workloads: each thread keeps a window of live blocks with
 * sizes uniform in a range and replaces a random one per operation, writing
 * a stamp and one byte per page and checking them before the free. No
 * cross-thread frees.
 *   midlarge: 8..34 KiB, window 2048 (the 2-thread workload where a shared
 *             pool lock once showed as a futex)
 *   linear:   1..80000 B, window 256 (a linear size distribution)
 *   large:    5..25 MiB, window 4 (what is cached, what goes to the OS)
 *   large-live: 5..25 MiB, window 10 per thread (20 live with the default 2
 *             threads), each block written in full when allocated, as
 *             std::make_unique<char[]>(n) does: what a program holding
 *             many large buffers pays for fresh memory
 *
 *   bench_sizes midlarge|linear|large|large-live SIZE [THREADS]   SIZE = total ops
 */
#include "bench_common.h"

typedef struct {
  const char *name;
  size_t lo, hi, window;
  long long default_size;
  int write_all; /* write every byte of a new block, not one per page */
} mode_t_;

static const mode_t_ modes[] = {
    {"midlarge", 8 * 1024, 34 * 1024, 2048, 2000000, 0},
    {"linear", 1, 80000, 256, 2000000, 0},
    {"large", 5u << 20, 25u << 20, 4, 2000, 0},
    {"large-live", 5u << 20, 25u << 20, 10, 400, 1},
};

typedef struct {
  void *p;
  size_t size;
  uint64_t id;
} slot;

typedef struct {
  const mode_t_ *m;
  long long ops;
  uint64_t seed;
} worker;

static void *run(void *arg) {
  worker *w = (worker *)arg;
  const mode_t_ *m = w->m;
  bench_rng rng = {w->seed};
  slot *win = (slot *)calloc(m->window, sizeof(slot));
  if (!win) bench_die("calloc");
  uint64_t id = w->seed << 32;
  for (long long i = 0; i < w->ops; i++) {
    slot *s = &win[bench_next(&rng) % m->window];
    if (s->p) {
      BENCH_CHECK(bench_stamp_ok(s->p, s->size, s->id) && bench_pages_ok(s->p, s->size, (unsigned char)s->id),
                  "%s: block of %zu B corrupted", m->name, s->size);
      free(s->p);
    }
    s->size = bench_range(&rng, m->lo, m->hi);
    s->id = ++id;
    s->p = bench_xmalloc(s->size);
    if (m->write_all) memset(s->p, (unsigned char)s->id, s->size);
    else bench_touch_pages(s->p, s->size, (unsigned char)s->id);
    bench_stamp(s->p, s->size, s->id);
  }
  for (size_t j = 0; j < m->window; j++)
    if (win[j].p) {
      BENCH_CHECK(bench_stamp_ok(win[j].p, win[j].size, win[j].id), "%s: block corrupted at exit", m->name);
      free(win[j].p);
    }
  free(win);
  return NULL;
}

int main(int argc, char **argv) {
  const mode_t_ *m = NULL;
  for (size_t i = 0; argc > 1 && i < sizeof modes / sizeof modes[0]; i++)
    if (!strcmp(argv[1], modes[i].name)) m = &modes[i];
  if (!m) {
    fprintf(stderr, "usage: %s midlarge|linear|large|large-live SIZE [THREADS]\n", argv[0]);
    return 2;
  }
  bench_args a = bench_parse(argc, argv, 2, "midlarge|linear|large|large-live SIZE [THREADS]",
                             m->default_size, 2);
  int T = a.threads;
  worker *w = (worker *)bench_xmalloc(sizeof(worker) * (size_t)T);
  for (int i = 0; i < T; i++) {
    w[i].m = m;
    w[i].ops = a.size / T;
    w[i].seed = 1000 + (uint64_t)i;
  }
  double t0 = bench_now();
  bench_run_threads(T, run, w, sizeof(worker));
  double secs = bench_now() - t0;
  bench_result(m->name, T, (a.size / T) * T, secs, NULL);
  free(w);
  return 0;
}
