/* False sharing (cache-thrash and cache-scratch style).
 *
 * Each thread repeatedly allocates a small object, writes every byte of it
 * many times, checks it and frees it. If the allocator hands two threads
 * objects in one cache line, the writes bounce the line between cores and
 * the run slows by an order of magnitude.
 *   thrash:  active false sharing; threads allocate their own objects.
 *   scratch: passive false sharing; the main thread allocates one object
 *            per thread, adjacent in memory, and each thread first frees
 *            the one it was given, so an allocator that reuses that memory
 *            for the thread's next objects shares lines with other threads.
 *
 *   bench_cache thrash|scratch SIZE [THREADS]   SIZE = total objects
 */
#include "bench_common.h"

enum { OBJ = 8, REPS = 100 };

typedef struct {
  long long objects;
  void *given; /* scratch: the object to free first */
  unsigned seed;
} worker;

static void *writer(void *arg) {
  worker *w = (worker *)arg;
  if (w->given) {
    volatile unsigned char *g = (volatile unsigned char *)w->given;
    for (int k = 0; k < OBJ; k++) BENCH_CHECK(g[k] == (unsigned char)w->seed, "cache: given object corrupted");
    free(w->given);
  }
  for (long long i = 0; i < w->objects; i++) {
    volatile unsigned char *p = (volatile unsigned char *)bench_xmalloc(OBJ);
    unsigned char base = (unsigned char)(w->seed + i);
    for (int k = 0; k < OBJ; k++) p[k] = base;
    for (int r = 0; r < REPS; r++)
      for (int k = 0; k < OBJ; k++) p[k]++;
    for (int k = 0; k < OBJ; k++)
      BENCH_CHECK(p[k] == (unsigned char)(base + REPS), "cache: object written by another thread");
    free((void *)p);
  }
  return NULL;
}

int main(int argc, char **argv) {
  if (argc < 2 || (strcmp(argv[1], "thrash") && strcmp(argv[1], "scratch"))) {
    fprintf(stderr, "usage: %s thrash|scratch SIZE [THREADS]\n", argv[0]);
    return 2;
  }
  int scratch = !strcmp(argv[1], "scratch");
  bench_args a = bench_parse(argc, argv, 2, "thrash|scratch SIZE [THREADS]", 200000, 2);
  int T = a.threads;
  worker *w = (worker *)bench_xmalloc(sizeof(worker) * (size_t)T);
  for (int i = 0; i < T; i++) {
    w[i].objects = a.size / T;
    w[i].seed = 17u * (unsigned)i + 1;
    w[i].given = NULL;
    if (scratch) {
      w[i].given = bench_xmalloc(OBJ);
      memset(w[i].given, (unsigned char)w[i].seed, OBJ);
    }
  }
  double t0 = bench_now();
  bench_run_threads(T, writer, w, sizeof(worker));
  double secs = bench_now() - t0;
  bench_result(scratch ? "cache-scratch" : "cache-thrash", T, (a.size / T) * T, secs, NULL);
  free(w);
  return 0;
}
