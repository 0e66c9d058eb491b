// Session burst: per-message allocation latency of a trading engine.
//
// A session receives bursts of 100, 500, 1000, 5000 and 10000 messages of
// 256 B; each message is allocated, written, kept until the burst ends, and
// then the whole burst is released. The latency of every single allocation
// is measured with rdtsc fenced by lfence on both sides, less the cost of
// an empty measurement, and converted to ns with a TSC rate calibrated
// against CLOCK_MONOTONIC. A second measurement of each cell times whole
// bursts instead: the allocation loop of a burst (the messages are written
// and checked after it), divided by its messages, reported as the P50 and
// P99 over the bursts (burst_p50_ns, burst_p99_ns): the way a trading
// engine states its cost per message in a burst, with no timer inside the
// loop. Strategies, all in this one process:
//   glibc   glibc's malloc / free, looked up in libc.so.6 itself (some
//           preloaded allocators define __libc_malloc too)
//   malloc  the process's malloc: the allocator under test (LD_PRELOAD)
//   brisk   brisk_malloc / brisk_free, called by name
//   pmr     std::pmr::monotonic_buffer_resource over the default resource
//   heap    brisk_heap_malloc on a heap made per burst, which
//           brisk_heap_destroy then releases whole
//   arena   brisk_arena_alloc on a session arena over its own heap,
//           brisk_arena_reset after each burst
//
//   bench_session SIZE [THREADS [STRATEGIES]]
//       SIZE = messages per strategy and burst size; THREADS is accepted
//       and ignored; STRATEGIES a comma list (default all), e.g. "malloc"
//       for instruction counts of the allocator under test alone
// RESULT's secs is the time spent in the "malloc" strategy only, so that
// the harness's time column compares the allocators under test.
#include "bench_common.h"
#include "brisk.h"

#include <algorithm>
#include <memory_resource>
#include <vector>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include <dlfcn.h>


namespace {

constexpr size_t kMsg = 256;
constexpr size_t kBursts[] = {100, 500, 1000, 5000, 10000};

inline uint64_t ticks() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_lfence();
  uint64_t t = __rdtsc();
  _mm_lfence();
  return t;
#else
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
#endif
}

double calibrate_ghz() {
#if defined(__x86_64__) || defined(__i386__)
  double t0 = bench_now();
  uint64_t c0 = ticks();
  while (bench_now() - t0 < 0.02) {
  }
  double t1 = bench_now();
  uint64_t c1 = ticks();
  return (double)(c1 - c0) / ((t1 - t0) * 1e9);
#else
  return 1.0;
#endif
}

uint64_t empty_cost() {
  uint64_t best = ~0ull;
  for (int i = 0; i < 2000; i++) {
    uint64_t a = ticks();
    uint64_t b = ticks();
    best = std::min(best, b - a);
  }
  return best;
}

struct Glibc {
  void *(*malloc_)(size_t);
  void (*free_)(void *);
  Glibc() {
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    malloc_ = libc ? (void *(*)(size_t))dlsym(libc, "malloc") : nullptr;
    free_ = libc ? (void (*)(void *))dlsym(libc, "free") : nullptr;
    if (!malloc_ || !free_) bench_die("glibc's malloc not found in libc.so.6");
  }
  void begin() {}
  void *alloc() { return malloc_(kMsg); }
  void end(std::vector<void *> &v) {
    for (void *p : v) free_(p);
  }
};
struct Malloc {
  void begin() {}
  void *alloc() { return malloc(kMsg); }
  void end(std::vector<void *> &v) {
    for (void *p : v) free(p);
  }
};
struct Brisk {
  void begin() {}
  void *alloc() { return brisk_malloc(kMsg); }
  void end(std::vector<void *> &v) {
    for (void *p : v) brisk_free(p);
  }
};
// A trading session's own heap: brisk_heap_malloc per message, and the
// whole burst released by destroying the heap (no per-block frees).
struct Heap {
  brisk_heap_t *heap = nullptr;
  void begin() {
    heap = brisk_heap_new();
    if (!heap) bench_die("brisk_heap_new");
  }
  void *alloc() { return brisk_heap_malloc(heap, kMsg); }
  void end(std::vector<void *> &) {
    brisk_heap_destroy(heap);
    heap = nullptr;
  }
};
// The session arena: bump allocation over the session's heap, reset after
// each burst (the first buffer is kept for the next burst).
struct Arena {
  brisk_heap_t *heap = nullptr;
  brisk_arena_t *arena = nullptr;
  Arena() {
    heap = brisk_heap_new();
    arena = heap ? brisk_arena_new(heap, 64 * 1024) : nullptr;
    if (!arena) bench_die("brisk_arena_new");
  }
  ~Arena() {
    brisk_arena_destroy(arena);
    brisk_heap_destroy(heap);
  }
  void begin() {}
  void *alloc() { return brisk_arena_alloc(arena, kMsg, 16); }
  void end(std::vector<void *> &) { brisk_arena_reset(arena); }
};
struct Pmr {
  std::pmr::monotonic_buffer_resource *res = nullptr;
  void begin() { res = new std::pmr::monotonic_buffer_resource(); }
  void *alloc() { return res->allocate(kMsg, 16); }
  void end(std::vector<void *> &) {
    delete res;  // releases every buffer of the burst at once
    res = nullptr;
  }
};

struct Cell {
  double p50, p99, p999;
  double burst_p50, burst_p99; /* per message, from whole-burst times */
  double secs;
  long long msgs;
};

/* Writes message j of a burst, and checks it before the burst is released. */
void write_message(void *p, size_t j) {
  unsigned char *m = (unsigned char *)p;
  uint64_t seq = (uint64_t)j ^ BENCH_MAGIC;
  memcpy(m, &seq, sizeof seq);
  memset(m + 8, (int)(j & 0xff), kMsg - 16);
  memcpy(m + kMsg - 8, &seq, sizeof seq);
}

void check_messages(const std::vector<void *> &live, size_t burst) {
  for (size_t j = 0; j < burst; j++) {
    unsigned char *m = (unsigned char *)live[j];
    uint64_t head, tail, seq = (uint64_t)j ^ BENCH_MAGIC;
    memcpy(&head, m, 8);
    memcpy(&tail, m + kMsg - 8, 8);
    BENCH_CHECK(head == seq && tail == seq && m[100] == (unsigned char)(j & 0xff),
                "session: message %zu of a burst of %zu corrupted", j, burst);
  }
}

double pct(std::vector<uint32_t> &s, double p) {
  size_t idx = (size_t)(p * (double)s.size());
  if (idx >= s.size()) idx = s.size() - 1;
  return (double)s[idx];
}

template <class S>
Cell run_cell(S &s, size_t burst, long long messages, uint64_t overhead, double ghz) {
  long long reps = std::max<long long>(1, messages / (long long)burst);
  std::vector<uint32_t> samples;
  samples.reserve((size_t)(reps * (long long)burst));
  std::vector<void *> live(burst);
  double secs = 0;
  for (long long r = -1; r < reps; r++) {  // r == -1 warms up, not recorded
    double t0 = bench_now();
    s.begin();
    for (size_t j = 0; j < burst; j++) {
      uint64_t a = ticks();
      void *p = s.alloc();
      uint64_t b = ticks();
      if (!p) bench_die("allocation failed");
      uint64_t d = b - a;
      d = d > overhead ? d - overhead : 0;
      if (r >= 0) samples.push_back((uint32_t)std::min<uint64_t>(d, 0xffffffffu));
      write_message(p, j); // the message: sequence number, a body, a trailer
      live[j] = p;
    }
    check_messages(live, burst);
    s.end(live);
    if (r >= 0) secs += bench_now() - t0;
  }
  std::sort(samples.begin(), samples.end());
  // Whole bursts: one pair of timer reads around each burst's allocations.
  std::vector<uint32_t> per_msg;
  per_msg.reserve((size_t)reps);
  for (long long r = -1; r < reps; r++) {
    s.begin();
    uint64_t a = ticks();
    for (size_t j = 0; j < burst; j++) live[j] = s.alloc();
    uint64_t b = ticks();
    for (size_t j = 0; j < burst; j++) {
      if (!live[j]) bench_die("allocation failed");
      write_message(live[j], j);
    }
    check_messages(live, burst);
    s.end(live);
    uint64_t d = b - a;
    d = d > overhead ? d - overhead : 0;
    if (r >= 0) per_msg.push_back((uint32_t)std::min<uint64_t>(d * 16 / burst, 0xffffffffu));
  }
  std::sort(per_msg.begin(), per_msg.end());
  Cell c;
  c.p50 = pct(samples, 0.50) / ghz;
  c.p99 = pct(samples, 0.99) / ghz;
  c.p999 = pct(samples, 0.999) / ghz;
  c.burst_p50 = pct(per_msg, 0.50) / 16 / ghz; /* kept in 1/16 ticks per message */
  c.burst_p99 = pct(per_msg, 0.99) / 16 / ghz;
  c.secs = secs;
  c.msgs = (long long)samples.size();
  return c;
}

const char *g_only = "";

bool wanted(const char *name) {
  if (!*g_only) return true;
  size_t n = strlen(name);
  for (const char *p = g_only; (p = strstr(p, name)) != nullptr; p += n)
    if ((p == g_only || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return true;
  return false;
}

template <class S>
double run_strategy(const char *name, long long messages, uint64_t overhead, double ghz,
                    long long *msgs) {
  if (!wanted(name)) return 0;
  S s;
  double secs = 0;
  for (size_t burst : kBursts) {
    Cell c = run_cell(s, burst, messages, overhead, ghz);
    printf("METRIC id=%s.b%zu p50_ns=%.1f p99_ns=%.1f p999_ns=%.1f burst_p50_ns=%.2f "
           "burst_p99_ns=%.2f\n", name, burst, c.p50, c.p99, c.p999, c.burst_p50, c.burst_p99);
    secs += c.secs;
    *msgs += c.msgs;
  }
  return secs;
}

}  // namespace

int main(int argc, char **argv) {
  bench_args a = bench_parse(argc, argv, 1, "SIZE [THREADS [STRATEGIES]]", 200000, 1);
  if (argc > 3) g_only = argv[3];
  double ghz = calibrate_ghz();
  uint64_t overhead = empty_cost();
  long long msgs = 0, ignored = 0;
  double secs = run_strategy<Malloc>("malloc", a.size, overhead, ghz, &msgs);
  run_strategy<Glibc>("glibc", a.size, overhead, ghz, &ignored);
  run_strategy<Brisk>("brisk", a.size, overhead, ghz, &ignored);
  run_strategy<Pmr>("pmr", a.size, overhead, ghz, &ignored);
  run_strategy<Heap>("heap", a.size, overhead, ghz, &ignored);
  run_strategy<Arena>("arena", a.size, overhead, ghz, &ignored);
  char extra[96];
  snprintf(extra, sizeof extra, "tsc_ghz=%.3f timer_overhead_ticks=%llu", ghz,
           (unsigned long long)overhead);
  bench_result("session", 1, msgs, secs, extra);
  return 0;
}
