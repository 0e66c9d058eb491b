/* Tail latency under mixed-size churn: one thread keeps 4096 live blocks of
 * random sizes (16 B .. 64 KiB, uniform) and replaces a random one per
 * operation; each free + malloc pair is timed alone with the time-stamp
 * counter, and the program reports the percentiles of those pairs and the
 * worst one. The new block is then written in full (one byte per 64), and
 * its stamp checked before its free, outside the timed part: what a pair
 * costs the caller, not what the memory costs afterwards.
 *
 *   bench_latency SIZE        SIZE = timed pairs (after 4096 untimed fills)
 *
 * Output: METRIC id=latency p50_ns=.. p99_ns=.. p999_ns=.. p9999_ns=..
 * max_ns=.. slow_1us=.. (pairs above 1 us) and the RESULT line (secs: the
 * timed part). The counter is calibrated against CLOCK_MONOTONIC over the
 * run itself.
 */
#include "bench_common.h"

#include <x86intrin.h>

enum { LIVE = 4096 };
#define MIN_SIZE 16
#define MAX_SIZE (64 * 1024)

typedef struct {
  void *p;
  size_t size;
  uint64_t id;
} slot;

static int cmp_u32(const void *a, const void *b) {
  uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
  return x < y ? -1 : x > y;
}

static void fill(slot *s, uint64_t id) {
  unsigned char *b = (unsigned char *)s->p;
  for (size_t i = 0; i < s->size; i += 64) b[i] = (unsigned char)id;
  bench_stamp(s->p, s->size, id);
  s->id = id;
}

int main(int argc, char **argv) {
  bench_args a = bench_parse(argc, argv, 1, "SIZE", 4000000, 1);
  long long n = a.size;
  uint32_t *cycles = (uint32_t *)malloc((size_t)n * sizeof(uint32_t));
  slot *live = (slot *)calloc(LIVE, sizeof(slot));
  if (!cycles || !live) bench_die("malloc");
  memset(cycles, 0, (size_t)n * sizeof(uint32_t)); /* resident before timing */
  bench_rng rng = {42};
  uint64_t id = 0;
  for (int i = 0; i < LIVE; i++) {
    live[i].size = bench_range(&rng, MIN_SIZE, MAX_SIZE);
    live[i].p = bench_xmalloc(live[i].size);
    fill(&live[i], ++id);
  }
  double t0 = bench_now();
  uint64_t c0 = __rdtsc();
  for (long long i = 0; i < n; i++) {
    slot *s = &live[bench_next(&rng) % LIVE];
    size_t size = bench_range(&rng, MIN_SIZE, MAX_SIZE);
    BENCH_CHECK(bench_stamp_ok(s->p, s->size, s->id), "latency: block corrupted");
    unsigned aux;
    uint64_t start = __rdtscp(&aux);
    free(s->p);
    void *p = malloc(size);
    uint64_t end = __rdtscp(&aux);
    if (!p) bench_die("malloc");
    uint64_t d = end - start;
    cycles[i] = d > UINT32_MAX ? UINT32_MAX : (uint32_t)d;
    s->p = p;
    s->size = size;
    fill(s, ++id);
  }
  uint64_t c1 = __rdtsc();
  double secs = bench_now() - t0;
  double ns_per_cycle = secs * 1e9 / (double)(c1 - c0);
  for (int i = 0; i < LIVE; i++) {
    BENCH_CHECK(bench_stamp_ok(live[i].p, live[i].size, live[i].id), "latency: block corrupted at exit");
    free(live[i].p);
  }
  long long slow = 0;
  for (long long i = 0; i < n; i++) slow += cycles[i] * ns_per_cycle > 1000.0;
  qsort(cycles, (size_t)n, sizeof(uint32_t), cmp_u32);
#define PCT(q) ((double)cycles[(size_t)((double)(n - 1) * (q))] * ns_per_cycle)
  printf("METRIC id=latency p50_ns=%.0f p99_ns=%.0f p999_ns=%.0f p9999_ns=%.0f max_ns=%.0f slow_1us=%lld\n",
         PCT(0.5), PCT(0.99), PCT(0.999), PCT(0.9999), (double)cycles[n - 1] * ns_per_cycle, slow);
  free(cycles);
  free(live);
  bench_result("latency", 1, n, secs, NULL);
  return 0;
}
