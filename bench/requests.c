/* A thread per request: THREADS request threads run at a time; each
 * allocates a working set of mixed-size blocks (about 8 MiB: most of them
 * small, some up to 64 KiB, as a request parses, builds and buffers),
 * writes a stamp and one byte per page into every block, checks and frees
 * them all, and exits; the main thread joins them and starts the next
 * ones. What it shows: whether memory a finished thread gave back is
 * ready for the next thread, or comes from the OS again page by page.
 *
 *   bench_requests SIZE [THREADS]   SIZE = requests (threads started)
 */
#include "bench_common.h"

enum { WORKING_SET = 8 << 20 };

typedef struct {
  uint64_t seed;
} request;

typedef struct {
  void *p;
  size_t size;
} held;

static size_t request_size(bench_rng *r) {
  uint64_t x = bench_next(r);
  unsigned pick = (unsigned)(x % 100);
  x >>= 8;
  if (pick < 70) return 16 + (size_t)(x % 113);       /* 16..128 B */
  if (pick < 95) return 129 + (size_t)(x % 3968);     /* ..4 KiB */
  return 4097 + (size_t)(x % (64 * 1024 - 4096));    /* ..64 KiB */
}

static void *serve(void *arg) {
  request *rq = (request *)arg;
  bench_rng rng = {rq->seed};
  size_t cap = 4096, n = 0, bytes = 0;
  held *h = (held *)bench_xmalloc(cap * sizeof(held));
  while (bytes < WORKING_SET) {
    if (n == cap) {
      cap *= 2;
      h = (held *)realloc(h, cap * sizeof(held));
      if (!h) bench_die("realloc");
    }
    size_t s = request_size(&rng);
    void *p = bench_xmalloc(s);
    bench_touch_pages(p, s, (unsigned char)n);
    bench_stamp(p, s, rq->seed + n);
    h[n].p = p;
    h[n].size = s;
    bytes += s;
    n++;
  }
  for (size_t i = 0; i < n; i++) {
    BENCH_CHECK(bench_stamp_ok(h[i].p, h[i].size, rq->seed + i) &&
                    bench_pages_ok(h[i].p, h[i].size, (unsigned char)i),
                "requests: block of %zu B corrupted", h[i].size);
    free(h[i].p);
  }
  free(h);
  return NULL;
}

int main(int argc, char **argv) {
  bench_args a = bench_parse(argc, argv, 1, "SIZE [THREADS]", 400, 2);
  int T = a.threads;
  request *rq = (request *)bench_xmalloc(sizeof(request) * (size_t)T);
  long long done = 0;
  double t0 = bench_now();
  while (done < a.size) {
    int now = a.size - done < T ? (int)(a.size - done) : T;
    for (int i = 0; i < now; i++) rq[i].seed = (uint64_t)(done + i + 1) << 32;
    bench_run_threads(now, serve, rq, sizeof(request));
    done += now;
  }
  double secs = bench_now() - t0;
  bench_result("requests", T, done, secs, NULL);
  free(rq);
  return 0;
}
