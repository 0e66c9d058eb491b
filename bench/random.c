/* Random mixed allocation.
 *
 *   st:     one thread keeps a window of live blocks of random sizes and
 *           replaces a random one per operation (malloc, some calloc and
 *           realloc), the pattern of glibc's simple/thread benchmarks and
 *           of alloc-test.
 *   mt:     the same in THREADS threads, each with its own window.
 *   stress: threads keep a growing set of objects, free some, and swap
 *           others through a shared exchange array so that frees cross
 *           threads; threads are recreated each round and the exchange
 *           array outlives them (the style of mimalloc's test-stress).
 * Every block carries words derived from its address and is checked before
 * it is freed.
 *
 *   bench_random st|mt|stress SIZE [THREADS]   SIZE = total operations
 */
#include "bench_common.h"
#include <stdatomic.h>

enum { WINDOW = 2000 };

static size_t mixed_size(bench_rng *r) {
  uint64_t x = bench_next(r);
  unsigned pick = (unsigned)(x % 100);
  x >>= 8;
  if (pick < 70) return 8 + (size_t)(x % 121);          /* 8..128 */
  if (pick < 90) return 129 + (size_t)(x % 896);        /* ..1 KiB */
  if (pick < 98) return 1025 + (size_t)(x % 15360);     /* ..16 KiB */
  return 16385 + (size_t)(x % (128 * 1024 - 16384));  /* ..128 KiB */
}

typedef struct {
  void *p;
  size_t size;
  uint64_t id;
} slot;

typedef struct {
  long long ops;
  uint64_t seed;
} worker;

static void *window_worker(void *arg) {
  worker *w = (worker *)arg;
  bench_rng rng = {w->seed};
  slot *win = (slot *)calloc(WINDOW, sizeof(slot));
  if (!win) bench_die("calloc");
  uint64_t id = w->seed << 32;
  for (long long i = 0; i < w->ops; i++) {
    slot *s = &win[bench_next(&rng) % WINDOW];
    unsigned kind = (unsigned)(bench_next(&rng) & 15);
    size_t n = mixed_size(&rng);
    if (s->p && kind == 0) {
      /* realloc: the old contents must survive up to the smaller size */
      BENCH_CHECK(bench_stamp_ok(s->p, s->size, s->id), "random: block corrupted before realloc");
      unsigned char *q = (unsigned char *)realloc(s->p, n);
      if (!q) bench_die("realloc");
      if (n >= 8 && s->size >= 8) {
        uint64_t tag;
        memcpy(&tag, q, 8);
        BENCH_CHECK(tag == (s->id ^ BENCH_MAGIC ^ (uint64_t)s->size), "random: realloc lost contents");
      }
      s->p = q;
    } else {
      if (s->p) {
        BENCH_CHECK(bench_stamp_ok(s->p, s->size, s->id), "random: block corrupted");
        free(s->p);
      }
      if (kind == 1) {
        unsigned char *q = (unsigned char *)calloc(1, n);
        if (!q) bench_die("calloc");
        BENCH_CHECK(q[0] == 0 && q[n - 1] == 0 && q[n / 2] == 0, "random: calloc memory not zero");
        s->p = q;
      } else {
        s->p = bench_xmalloc(n);
      }
    }
    s->size = n;
    s->id = ++id;
    bench_stamp(s->p, n, s->id);
  }
  for (int j = 0; j < WINDOW; j++)
    if (win[j].p) {
      BENCH_CHECK(bench_stamp_ok(win[j].p, win[j].size, win[j].id), "random: block corrupted at exit");
      free(win[j].p);
    }
  free(win);
  return NULL;
}

/* ---- stress ---------------------------------------------------------- */

enum { TRANSFERS = 1000, ROUNDS = 10 };
static _Atomic(uintptr_t *) transfer[TRANSFERS];

static uintptr_t cookie_of(const uintptr_t *p, size_t i) {
  return ((uintptr_t)p ^ 0xbf58476d1ce4e5b9ULL) + i;
}

static uintptr_t *stress_alloc(bench_rng *r) {
  uint64_t x = bench_next(r);
  size_t words;
  if (x % 10000 == 0) words = 1 + (size_t)((x >> 16) % 100000);   /* rare large */
  else if (x % 100 == 0) words = 1 + (size_t)((x >> 16) % 2000);  /* medium */
  else words = 1 + (size_t)((x >> 16) % 40);                      /* small */
  uintptr_t *p = (uintptr_t *)bench_xmalloc((words + 1) * sizeof(uintptr_t));
  p[0] = words;
  for (size_t i = 1; i <= words; i++) p[i] = cookie_of(p, i);
  return p;
}

static void stress_free(uintptr_t *p) {
  if (!p) return;
  size_t words = p[0];
  BENCH_CHECK(words >= 1 && words <= 100000, "stress: object header corrupted");
  for (size_t i = 1; i <= words; i++) BENCH_CHECK(p[i] == cookie_of(p, i), "stress: object corrupted");
  free(p);
}

static void *stress_worker(void *arg) {
  worker *w = (worker *)arg;
  bench_rng rng = {w->seed};
  size_t cap = 64, n = 0;
  uintptr_t **kept = (uintptr_t **)bench_xmalloc(cap * sizeof(*kept));
  for (long long i = 0; i < w->ops; i++) {
    uint64_t x = bench_next(&rng);
    unsigned pick = (unsigned)(x % 8);
    if (pick < 4 || n == 0) { /* allocate and keep */
      if (n == cap) {
        cap *= 2;
        kept = (uintptr_t **)realloc(kept, cap * sizeof(*kept));
        if (!kept) bench_die("realloc");
      }
      kept[n++] = stress_alloc(&rng);
    } else if (pick < 6) { /* free a random kept object */
      size_t j = (size_t)((x >> 8) % n);
      stress_free(kept[j]);
      kept[j] = kept[--n];
    } else { /* swap a kept object with another thread's */
      size_t j = (size_t)((x >> 8) % n);
      uintptr_t *got = atomic_exchange(&transfer[(x >> 32) % TRANSFERS], kept[j]);
      if (got && (x & (1u << 20))) {
        kept[j] = got;
      } else {
        stress_free(got);
        kept[j] = kept[--n];
      }
    }
  }
  for (size_t j = 0; j < n; j++) stress_free(kept[j]);
  free(kept);
  return NULL;
}

int main(int argc, char **argv) {
  const char *usage = "st|mt|stress SIZE [THREADS]";
  if (argc < 2 || (strcmp(argv[1], "st") && strcmp(argv[1], "mt") && strcmp(argv[1], "stress"))) {
    fprintf(stderr, "usage: %s %s\n", argv[0], usage);
    return 2;
  }
  const char *mode = argv[1];
  int st = !strcmp(mode, "st");
  bench_args a = bench_parse(argc, argv, 2, usage, 2000000, st ? 1 : 2);
  int T = a.threads;
  worker *w = (worker *)bench_xmalloc(sizeof(worker) * (size_t)T);
  double t0 = bench_now();
  long long done = 0;
  if (!strcmp(mode, "stress")) {
    for (int r = 0; r < ROUNDS; r++) {
      for (int i = 0; i < T; i++) {
        w[i].ops = a.size / ((long long)ROUNDS * T);
        w[i].seed = 31337ULL * (uint64_t)(r * T + i + 1);
        done += w[i].ops;
      }
      bench_run_threads(T, stress_worker, w, sizeof(worker));
    }
  } else {
    for (int i = 0; i < T; i++) {
      w[i].ops = a.size / T;
      w[i].seed = 1 + (uint64_t)i;
      done += w[i].ops;
    }
    bench_run_threads(T, window_worker, w, sizeof(worker));
  }
  double secs = bench_now() - t0;
  for (int j = 0; j < TRANSFERS; j++) stress_free(atomic_exchange(&transfer[j], NULL));
  char name[32];
  snprintf(name, sizeof name, "random-%s", mode);
  bench_result(!strcmp(mode, "stress") ? "stress" : name, T, done, secs, NULL);
  free(w);
  return 0;
}
