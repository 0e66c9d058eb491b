// Sessions, heaps and arenas: std::pmr resources against brisk heaps and arenas.
//
// One process, four parts (all on the thread that runs main unless said):
//
// 1. bursts: a session receives bursts of 100, 500, 1000, 5000 and 10000
//    messages of 256 B; each message is allocated, written, kept until the
//    burst ends, then the burst is released (outside the timed region).
//    Every allocation is timed alone with rdtsc between lfences, less the
//    least cost of an empty measurement, converted to ns with a TSC rate
//    calibrated against CLOCK_MONOTONIC. Strategies, one loop for all (a
//    template instantiated per strategy), each built fresh for every
//    repetition and warmed up by one unrecorded burst of each size:
//      A      std::pmr::monotonic_buffer_resource over a 64 MiB
//             std::vector<std::byte>, null_memory_resource() upstream,
//             release() after each burst
//      B      brisk::heap_resource, one allocate per message; every block
//             deallocated after the burst
//      C, C'  brisk::session_arena (default 64 KiB first buffer), release()
//             after each burst; C' is the same code again: the A/A check
//      C64    brisk::session_arena with a 64 MiB first buffer (A's size)
//      D      std::pmr::unsynchronized_pool_resource over
//             brisk::default_resource(); every block deallocated after
//      glibc  glibc's malloc/free, looked up in libc.so.6 itself (the
//             program links libbrisk.so, whose malloc is the process's)
//      brisk  brisk_malloc / brisk_free
//      floor  no allocator: the next slot of a prepared array (what the
//             loop and the timer cost by themselves)
//    The pmr resources are called through a std::pmr::memory_resource *
//    the compiler cannot see through, as a pmr container would.
//    Repetitions are interleaved (every strategy once per repetition, the
//    order rotated); each cell is the median over repetitions of that
//    repetition's P50 / P99 / P99.9 / mean.
// 2. destroy: N = 1k, 100k, 1M live blocks of 64 B (each written) and the
//    time to drop them: brisk_heap_destroy; brisk_free of each block in
//    allocation order (the same heap's blocks); session_arena::release();
//    session_arena destruction. Median over repetitions.
// 3. overflow: a session_arena with a 4 KiB first buffer takes 100
//    allocations of 256 B (so it takes two more buffers from its heap),
//    against a brisk::heap_resource doing the same 100 allocations; both
//    fresh per session ("new") and reused (release() / deallocate).
// 4. cross-thread free: blocks of 256 B allocated on the main thread,
//    freed by a second thread in batches of 1000 (ns per free = batch time
//    / 1000, median over batches), against the same frees on the
//    allocating thread: a brisk heap's blocks, brisk_malloc's, glibc's.
//
//   bench_session_pmr SIZE [THREADS [REPS [PARTS]]]
//       SIZE   messages per strategy, burst size and repetition (part 1)
//       THREADS accepted and ignored (the harness passes it)
//       REPS   repetitions (default 7)
//       PARTS  comma list of bursts,destroy,overflow,xthread (default all)
// RESULT's secs is the time of strategy C in part 1 (every burst, the
// writes and checks included), ops its messages.
#include "bench_common.h"
#include "brisk.h"
#include "brisk/pmr.hpp"

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <memory_resource>
#include <optional>
#include <thread>
#include <vector>
#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

#include <dlfcn.h>

namespace {

constexpr size_t kMsg = 256;
constexpr size_t kAlign = alignof(std::max_align_t);
constexpr size_t kBursts[] = {100, 500, 1000, 5000, 10000};
constexpr size_t kNBursts = sizeof kBursts / sizeof kBursts[0];

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

double g_ghz = 1.0;          // ticks per ns
uint64_t g_overhead = 0;     // least ticks of an empty measurement
double g_overhead_mean = 0;  // mean ticks of an empty measurement

void calibrate() {
#if defined(__x86_64__) || defined(__i386__)
  double t0 = bench_now();
  uint64_t c0 = ticks();
  while (bench_now() - t0 < 0.05) {
  }
  double t1 = bench_now();
  uint64_t c1 = ticks();
  g_ghz = (double)(c1 - c0) / ((t1 - t0) * 1e9);
#endif
  // The least cost, taken off every sample (as bench_session does), and a
  // typical mean: of the samples up to their P99, so that an interrupt
  // during calibration does not set it.
  const size_t n = 20000;
  std::vector<uint64_t> d(n);
  for (size_t i = 0; i < n; i++) {
    uint64_t a = ticks();
    uint64_t b = ticks();
    d[i] = b - a;
  }
  std::sort(d.begin(), d.end());
  g_overhead = d[0];
  double sum = 0;
  size_t kept = n * 99 / 100;
  for (size_t i = 0; i < kept; i++) sum += (double)d[i];
  g_overhead_mean = sum / (double)kept;
}

inline double ns(double t) { return t / g_ghz; }

// Hides what a pointer points to from the optimiser (no devirtualisation).
template <class T>
inline T *opaque(T *p) {
  asm volatile("" : "+r"(p));
  return p;
}

struct GlibcFns {
  void *(*malloc_)(size_t) = nullptr;
  void (*free_)(void *) = nullptr;
  GlibcFns() {
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    malloc_ = libc ? (void *(*)(size_t))dlsym(libc, "malloc") : nullptr;
    free_ = libc ? (void (*)(void *))dlsym(libc, "free") : nullptr;
    if (!malloc_ || !free_) bench_die("glibc's malloc not found in libc.so.6");
  }
};
GlibcFns &glibc() {
  static GlibcFns g;
  return g;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

template <class T>
double pct(const std::vector<T> &sorted, double p) {
  if (sorted.empty()) return 0;
  size_t idx = (size_t)(p * (double)sorted.size());
  if (idx >= sorted.size()) idx = sorted.size() - 1;
  return (double)sorted[idx];
}

// ---------------------------------------------------------------------------
// Part 1: strategies of the burst loop.

struct Mono {  // A
  std::vector<std::byte> buf;
  std::pmr::monotonic_buffer_resource res;
  std::pmr::memory_resource *r;
  Mono()
      : buf(64u << 20),
        res(buf.data(), buf.size(), std::pmr::null_memory_resource()),
        r(opaque<std::pmr::memory_resource>(&res)) {}
  void *alloc() { return r->allocate(kMsg, kAlign); }
  void end(std::vector<void *> &) { res.release(); }
};
struct HeapRes {  // B
  brisk::heap_resource res;
  std::pmr::memory_resource *r = opaque<std::pmr::memory_resource>(&res);
  void *alloc() { return r->allocate(kMsg, kAlign); }
  void end(std::vector<void *> &v) {
    for (void *p : v) r->deallocate(p, kMsg, kAlign);
  }
};
template <size_t Initial>
struct Arena {  // C, C', C64
  brisk::session_arena res{Initial};
  std::pmr::memory_resource *r = opaque<std::pmr::memory_resource>(&res);
  void *alloc() { return r->allocate(kMsg, kAlign); }
  void end(std::vector<void *> &) { res.release(); }
};
struct Pool {  // D
  std::pmr::unsynchronized_pool_resource res{brisk::default_resource()};
  std::pmr::memory_resource *r = opaque<std::pmr::memory_resource>(&res);
  void *alloc() { return r->allocate(kMsg, kAlign); }
  void end(std::vector<void *> &v) {
    for (void *p : v) r->deallocate(p, kMsg, kAlign);
  }
};
struct Glibc {
  void *(*m)(size_t) = opaque(glibc().malloc_);
  void (*f)(void *) = glibc().free_;
  void *alloc() { return m(kMsg); }
  void end(std::vector<void *> &v) {
    for (void *p : v) f(p);
  }
};
struct Brisk {
  void *alloc() { return brisk_malloc(kMsg); }
  void end(std::vector<void *> &v) {
    for (void *p : v) brisk_free(p);
  }
};
struct Floor {
  std::vector<unsigned char> mem = std::vector<unsigned char>(kBursts[kNBursts - 1] * kMsg);
  size_t i = 0;
  void *alloc() { return &mem[(i++) * kMsg]; }
  void end(std::vector<void *> &) { i = 0; }
};

struct Cell {
  double p50, p99, p999, mean;
  double secs;
  long long msgs;
};

template <class S>
Cell run_cell(S &s, size_t burst, long long messages) {
  long long reps = std::max<long long>(1, messages / (long long)burst);
  std::vector<uint32_t> samples;
  samples.reserve((size_t)(reps * (long long)burst));
  std::vector<void *> live(burst);
  double secs = 0;
  uint64_t raw_sum = 0;
  for (long long r = -1; r < reps; r++) {  // r == -1 warms up, not recorded
    double t0 = bench_now();
    for (size_t j = 0; j < burst; j++) {
      uint64_t a = ticks();
      void *p = s.alloc();
      uint64_t b = ticks();
      if (!p) bench_die("allocation failed");
      uint64_t d = b - a;
      if (r >= 0) {
        raw_sum += d;
        d = d > g_overhead ? d - g_overhead : 0;
        samples.push_back((uint32_t)std::min<uint64_t>(d, 0xffffffffu));
      }
      // the message: sequence number, a body, a trailer
      unsigned char *m = (unsigned char *)p;
      uint64_t seq = (uint64_t)j ^ BENCH_MAGIC;
      memcpy(m, &seq, sizeof seq);
      memset(m + 8, (int)(j & 0xff), kMsg - 16);
      memcpy(m + kMsg - 8, &seq, sizeof seq);
      live[j] = p;
    }
    for (size_t j = 0; j < burst; j++) {
      unsigned char *m = (unsigned char *)live[j];
      uint64_t head, tail, seq = (uint64_t)j ^ BENCH_MAGIC;
      memcpy(&head, m, 8);
      memcpy(&tail, m + kMsg - 8, 8);
      BENCH_CHECK(head == seq && tail == seq && m[100] == (unsigned char)(j & 0xff),
                  "session_pmr: message %zu of a burst of %zu corrupted", j, burst);
    }
    s.end(live);
    if (r >= 0) secs += bench_now() - t0;
  }
  std::sort(samples.begin(), samples.end());
  Cell c;
  c.p50 = ns(pct(samples, 0.50));
  c.p99 = ns(pct(samples, 0.99));
  c.p999 = ns(pct(samples, 0.999));
  // The mean with the mean empty cost taken off: the TSC of this machine
  // may tick in steps of several ns, which the percentiles cannot resolve
  // but an average over many samples can.
  c.mean = ns((double)raw_sum / (double)samples.size() - g_overhead_mean);
  c.secs = secs;
  c.msgs = (long long)samples.size();
  return c;
}

struct Strategy {
  const char *id;
  const char *what;
  void (*run)(long long messages, Cell out[kNBursts]);
};

template <class S>
void run_all_bursts(long long messages, Cell out[kNBursts]) {
  std::optional<S> s;
  s.emplace();
  for (size_t i = 0; i < kNBursts; i++) out[i] = run_cell(*s, kBursts[i], messages);
}

const Strategy kStrategies[] = {
    {"A", "monotonic_buffer_resource, 64 MiB vector, null upstream", run_all_bursts<Mono>},
    {"B", "brisk::heap_resource, one allocate per message", run_all_bursts<HeapRes>},
    {"C", "brisk::session_arena (64 KiB first buffer)", run_all_bursts<Arena<64 * 1024>>},
    {"C'", "C again (A/A)", run_all_bursts<Arena<64 * 1024>>},
    {"C64", "brisk::session_arena, 64 MiB first buffer", run_all_bursts<Arena<(64u << 20)>>},
    {"D", "unsynchronized_pool_resource over brisk::default_resource()", run_all_bursts<Pool>},
    {"glibc", "glibc malloc/free (libc.so.6)", run_all_bursts<Glibc>},
    {"brisk", "brisk_malloc/brisk_free", run_all_bursts<Brisk>},
    {"floor", "no allocator: next slot of an array", run_all_bursts<Floor>},
};
constexpr size_t kNStrategies = sizeof kStrategies / sizeof kStrategies[0];

double g_c_secs = 0;
long long g_c_msgs = 0;

void part_bursts(long long messages, int reps) {
  // results[strategy][burst][rep]
  std::vector<std::vector<std::vector<Cell>>> res(
      kNStrategies, std::vector<std::vector<Cell>>(kNBursts));
  for (int rep = 0; rep < reps; rep++) {
    for (size_t k = 0; k < kNStrategies; k++) {
      size_t s = (k + (size_t)rep) % kNStrategies;
      Cell out[kNBursts];
      kStrategies[s].run(messages, out);
      for (size_t b = 0; b < kNBursts; b++) {
        res[s][b].push_back(out[b]);
        if (!strcmp(kStrategies[s].id, "C")) {
          g_c_secs += out[b].secs;
          g_c_msgs += out[b].msgs;
        }
      }
    }
  }
  printf("\n## Bursts of 256 B messages: ns per allocation, P50 / P99 / P99.9 (mean)\n");
  printf("median over %d interleaved repetitions; %lld messages per strategy, burst size and "
         "repetition\n\n",
         reps, messages);
  printf("| strategy |");
  for (size_t b : kBursts) printf(" %zu msgs |", b);
  printf("\n|---|");
  for (size_t b = 0; b < kNBursts; b++) printf("---|");
  printf("\n");
  for (size_t s = 0; s < kNStrategies; s++) {
    printf("| %s |", kStrategies[s].id);
    for (size_t b = 0; b < kNBursts; b++) {
      std::vector<double> p50, p99, p999, mean;
      for (const Cell &c : res[s][b]) {
        p50.push_back(c.p50);
        p99.push_back(c.p99);
        p999.push_back(c.p999);
        mean.push_back(c.mean);
      }
      printf(" %.1f / %.1f / %.1f (%.1f) |", median(p50), median(p99), median(p999),
             median(mean));
    }
    printf("\n");
  }
  printf("\n");
  for (size_t s = 0; s < kNStrategies; s++) printf("- %s: %s\n", kStrategies[s].id,
                                                   kStrategies[s].what);
  // Spread: the range over repetitions of P99 and of the mean.
  printf("\nspread over repetitions, min..max of P99 | of the mean:\n\n");
  printf("| strategy |");
  for (size_t b : kBursts) printf(" %zu |", b);
  printf("\n|---|");
  for (size_t b = 0; b < kNBursts; b++) printf("---|");
  printf("\n");
  for (size_t s = 0; s < kNStrategies; s++) {
    printf("| %s |", kStrategies[s].id);
    for (size_t b = 0; b < kNBursts; b++) {
      double lo99 = 1e30, hi99 = 0, lom = 1e30, him = -1e30;
      for (const Cell &c : res[s][b]) {
        lo99 = std::min(lo99, c.p99), hi99 = std::max(hi99, c.p99);
        lom = std::min(lom, c.mean), him = std::max(him, c.mean);
      }
      printf(" %.0f..%.0f \\| %.1f..%.1f |", lo99, hi99, lom, him);
    }
    printf("\n");
  }
  fflush(stdout);
  for (size_t s = 0; s < kNStrategies; s++) {
    for (size_t b = 0; b < kNBursts; b++) {
      std::vector<double> p50, p99, p999, mean;
      for (const Cell &c : res[s][b]) {
        p50.push_back(c.p50);
        p99.push_back(c.p99);
        p999.push_back(c.p999);
        mean.push_back(c.mean);
      }
      printf("METRIC id=%s.b%zu p50_ns=%.1f p99_ns=%.1f p999_ns=%.1f mean_ns=%.2f\n",
             kStrategies[s].id, kBursts[b], median(p50), median(p99), median(p999),
             median(mean));
    }
  }
}

// ---------------------------------------------------------------------------
// Part 2: dropping N live blocks at once.

constexpr size_t kSmall = 64;

inline void stamp(void *p, size_t i) {
  uint64_t v = (uint64_t)i ^ BENCH_MAGIC;
  memcpy(p, &v, sizeof v);
}

void check_stamps(const std::vector<void *> &v, size_t n) {
  for (size_t i = 0; i < n; i += 997) {
    uint64_t x;
    memcpy(&x, v[i], sizeof x);
    BENCH_CHECK(x == ((uint64_t)i ^ BENCH_MAGIC), "session_pmr: block %zu of %zu corrupted", i,
                n);
  }
}

// Each returns the ticks of the drop alone.
uint64_t drop_heap_destroy(size_t n, std::vector<void *> &v) {
  brisk_heap_t *h = brisk_heap_new();
  if (!h) bench_die("brisk_heap_new");
  for (size_t i = 0; i < n; i++) {
    void *p = brisk_heap_malloc(h, kSmall);
    if (!p) bench_die("brisk_heap_malloc");
    stamp(p, i);
    v[i] = p;
  }
  check_stamps(v, n);
  uint64_t a = ticks();
  brisk_heap_destroy(h);
  return ticks() - a;
}

uint64_t drop_one_by_one(size_t n, std::vector<void *> &v) {
  brisk_heap_t *h = brisk_heap_new();
  if (!h) bench_die("brisk_heap_new");
  for (size_t i = 0; i < n; i++) {
    void *p = brisk_heap_malloc(h, kSmall);
    if (!p) bench_die("brisk_heap_malloc");
    stamp(p, i);
    v[i] = p;
  }
  check_stamps(v, n);
  uint64_t a = ticks();
  for (size_t i = 0; i < n; i++) brisk_free(v[i]);
  uint64_t d = ticks() - a;
  brisk_heap_destroy(h);
  return d;
}

template <bool Destroy>
uint64_t drop_arena(size_t n, std::vector<void *> &v) {
  std::optional<brisk::session_arena> a;
  a.emplace();
  std::pmr::memory_resource *r = opaque<std::pmr::memory_resource>(&*a);
  for (size_t i = 0; i < n; i++) {
    void *p = r->allocate(kSmall, kAlign);
    stamp(p, i);
    v[i] = p;
  }
  check_stamps(v, n);
  uint64_t t = ticks();
  if (Destroy) {
    a.reset();
  } else {
    a->release();
  }
  uint64_t d = ticks() - t;
  return d;
}

void part_destroy(int reps) {
  const size_t counts[] = {1000, 100000, 1000000};
  struct Way {
    const char *id;
    uint64_t (*fn)(size_t, std::vector<void *> &);
  };
  const Way ways[] = {{"heap_destroy", drop_heap_destroy},
                      {"brisk_free_each", drop_one_by_one},
                      {"arena_release", drop_arena<false>},
                      {"arena_destroy", drop_arena<true>}};
  const size_t nways = sizeof ways / sizeof ways[0];
  printf("\n## Dropping N live blocks of 64 B: ns (median over %d repetitions)\n\n", reps);
  printf("| N | brisk_heap_destroy | brisk_free of each (per block) | ratio free/destroy | "
         "session_arena::release() | ~session_arena |\n|---|---|---|---|---|---|\n");
  std::vector<void *> v(counts[2]);
  for (size_t n : counts) {
    std::vector<double> t[nways];
    for (int rep = -1; rep < reps; rep++) {  // rep -1 warms up
      for (size_t k = 0; k < nways; k++) {
        size_t w = (k + (size_t)(rep + 1)) % nways;
        uint64_t d = ways[w].fn(n, v);
        if (rep >= 0) t[w].push_back(ns((double)d));
      }
    }
    double m[nways];
    for (size_t w = 0; w < nways; w++) m[w] = median(t[w]);
    printf("| %zu | %.0f | %.0f (%.1f) | %.1f | %.0f | %.0f |\n", n, m[0], m[1], m[1] / (double)n,
           m[1] / m[0], m[2], m[3]);
    for (size_t w = 0; w < nways; w++) {
      double lo = *std::min_element(t[w].begin(), t[w].end());
      double hi = *std::max_element(t[w].begin(), t[w].end());
      printf("METRIC id=drop.%s.n%zu ns=%.0f min_ns=%.0f max_ns=%.0f\n", ways[w].id, n, m[w], lo,
             hi);
    }
    printf("METRIC id=drop.ratio.n%zu free_over_destroy=%.2f free_ns_per_block=%.2f\n", n,
           m[1] / m[0], m[1] / (double)n);
  }
  fflush(stdout);
}

// ---------------------------------------------------------------------------
// Part 3: overflow of a small first buffer.

constexpr size_t kOverflowAllocs = 100;

struct OverflowStats {
  std::vector<uint32_t> all;       // every allocation, ticks less overhead
  std::vector<uint32_t> overflow;  // allocations that took a new buffer
  std::vector<double> totals;      // ticks of the 100, per session, less the
                                   // mean empty cost of 100 measurements
};

inline void record(OverflowStats &st, uint64_t d, bool took_buffer) {
  d = d > g_overhead ? d - g_overhead : 0;
  uint32_t x = (uint32_t)std::min<uint64_t>(d, 0xffffffffu);
  st.all.push_back(x);
  if (took_buffer) st.overflow.push_back(x);
}

// 100 timed allocations from r; a pointer that does not follow its
// predecessor marks a new buffer (for a heap: a new page or a gap).
void hundred(std::pmr::memory_resource *r, OverflowStats *st, void **out) {
  uintptr_t prev = 0;
  uint64_t raw = 0;
  for (size_t j = 0; j < kOverflowAllocs; j++) {
    uint64_t a = ticks();
    void *p = r->allocate(kMsg, kAlign);
    uint64_t b = ticks();
    memset(p, (int)j, kMsg);
    if (st) {
      record(*st, b - a, j > 0 && (uintptr_t)p != prev + kMsg);
      raw += b - a;
    }
    prev = (uintptr_t)p;
    out[j] = p;
  }
  for (size_t j = 0; j < kOverflowAllocs; j++)
    BENCH_CHECK(((unsigned char *)out[j])[kMsg - 1] == (unsigned char)j,
                "session_pmr: overflow block %zu corrupted", j);
  if (st) st->totals.push_back((double)raw - (double)kOverflowAllocs * g_overhead_mean);
}

void part_overflow(int reps, int sessions_per_rep) {
  enum { ARENA_NEW, HEAP_NEW, ARENA_REUSED, HEAP_REUSED, NW };
  const char *ids[NW] = {"arena4k_new", "heap_new", "arena4k_reused", "heap_reused"};
  const char *names[NW] = {"session_arena(4 KiB), new per session",
                           "heap_resource, new per session",
                           "session_arena(4 KiB), release() between sessions",
                           "heap_resource, blocks deallocated between sessions"};
  std::vector<double> p50[NW], p99[NW], tot[NW], ovf[NW];
  size_t ovf_count[NW] = {0};
  void *blocks[kOverflowAllocs];
  for (int rep = 0; rep < reps; rep++) {
    for (int k = 0; k < NW; k++) {
      int w = (k + rep) % NW;
      OverflowStats st;
      std::optional<brisk::session_arena> arena;
      std::optional<brisk::heap_resource> heap;
      if (w == ARENA_REUSED) arena.emplace(4096);
      if (w == HEAP_REUSED) heap.emplace();
      for (int s = -8; s < sessions_per_rep; s++) {  // 8 unrecorded sessions
        OverflowStats *rec = s >= 0 ? &st : nullptr;
        switch (w) {
          case ARENA_NEW: {
            std::optional<brisk::session_arena> a;
            a.emplace(4096);
            hundred(opaque<std::pmr::memory_resource>(&*a), rec, blocks);
            break;
          }
          case HEAP_NEW: {
            std::optional<brisk::heap_resource> h;
            h.emplace();
            hundred(opaque<std::pmr::memory_resource>(&*h), rec, blocks);
            break;
          }
          case ARENA_REUSED:
            hundred(opaque<std::pmr::memory_resource>(&*arena), rec, blocks);
            arena->release();
            break;
          case HEAP_REUSED:
            hundred(opaque<std::pmr::memory_resource>(&*heap), rec, blocks);
            for (void *p : blocks) heap->deallocate(p, kMsg, kAlign);
            break;
        }
      }
      std::sort(st.all.begin(), st.all.end());
      std::sort(st.overflow.begin(), st.overflow.end());
      std::sort(st.totals.begin(), st.totals.end());
      p50[w].push_back(ns(pct(st.all, 0.5)));
      p99[w].push_back(ns(pct(st.all, 0.99)));
      tot[w].push_back(ns(pct(st.totals, 0.5)));
      ovf[w].push_back(st.overflow.empty() ? 0 : ns(pct(st.overflow, 0.5)));
      ovf_count[w] = st.overflow.size();
    }
  }
  printf("\n## Overflow: 100 allocations of 256 B per session (median over %d repetitions "
         "of %d sessions)\n\n",
         reps, sessions_per_rep);
  printf("| strategy | P50 ns | P99 ns | per session ns (median) | mean per allocation ns | "
         "new-buffer allocations per session | their P50 ns |\n|---|---|---|---|---|---|---|\n");
  for (int w = 0; w < NW; w++) {
    double t = median(tot[w]);
    printf("| %s | %.1f | %.1f | %.0f | %.2f | %.1f | %.1f |\n", names[w], median(p50[w]),
           median(p99[w]), t, t / kOverflowAllocs,
           (double)ovf_count[w] / (double)sessions_per_rep, median(ovf[w]));
    printf("METRIC id=overflow.%s p50_ns=%.1f p99_ns=%.1f session_ns=%.0f newbuf_p50_ns=%.1f\n",
           ids[w], median(p50[w]), median(p99[w]), t, median(ovf[w]));
  }
  printf("\n(for the heap, a \"new buffer\" is an allocation whose block does not follow the "
         "previous one)\n");
  fflush(stdout);
}

// ---------------------------------------------------------------------------
// Part 4: cross-thread free.

constexpr size_t kXBatch = 1000;

struct XShared {
  std::atomic<int> phase{0};  // 0 idle, 1 batch ready, 2 done, 3 quit
  void **blocks = nullptr;
  void (*free_fn)(void *) = nullptr;
  uint64_t ticks_taken = 0;
};

inline void wait_for(std::atomic<int> &a, int v) {
  unsigned spins = 0;
  while (a.load(std::memory_order_acquire) != v) bench_pause(&spins);
}

void xthread_worker(XShared *sh) {
  for (;;) {
    unsigned spins = 0;
    int ph;
    while ((ph = sh->phase.load(std::memory_order_acquire)) != 1 && ph != 3)
      bench_pause(&spins);
    if (ph == 3) return;
    void **b = sh->blocks;
    void (*f)(void *) = sh->free_fn;
    uint64_t a = ticks();
    for (size_t i = 0; i < kXBatch; i++) f(b[i]);
    sh->ticks_taken = ticks() - a;
    sh->phase.store(2, std::memory_order_release);
  }
}

brisk_heap_t *g_xheap = nullptr;
void *heap_alloc_msg() { return brisk_heap_malloc(g_xheap, kMsg); }
void *brisk_alloc_msg() { return brisk_malloc(kMsg); }
void *glibc_alloc_msg() { return glibc().malloc_(kMsg); }
void glibc_free(void *p) { glibc().free_(p); }
// Writes the word a free would write, frees nothing: what moving the
// block's cache line to the freeing thread costs by itself.
void touch_only(void *p) { *(void *volatile *)p = nullptr; }

void part_xthread(int reps, int batches_per_rep) {
  struct Way {
    const char *id;
    const char *what;
    void *(*alloc)();
    void (*free_fn)(void *);
    bool remote;
    void (*cleanup)(void *);  // untimed, on the allocating thread
  };
  const Way ways[] = {
      {"heap_local", "brisk heap block, brisk_free on the allocating thread", heap_alloc_msg,
       brisk_free, false, nullptr},
      {"heap_remote", "brisk heap block, brisk_free on another thread", heap_alloc_msg,
       brisk_free, true, nullptr},
      {"brisk_local", "brisk_malloc block, brisk_free on the allocating thread", brisk_alloc_msg,
       brisk_free, false, nullptr},
      {"brisk_remote", "brisk_malloc block, brisk_free on another thread", brisk_alloc_msg,
       brisk_free, true, nullptr},
      {"glibc_local", "glibc malloc block, glibc free on the allocating thread", glibc_alloc_msg,
       glibc_free, false, nullptr},
      {"glibc_remote", "glibc malloc block, glibc free on another thread", glibc_alloc_msg,
       glibc_free, true, nullptr},
      {"touch_local", "brisk_malloc block, one word written (no free) on the allocating thread",
       brisk_alloc_msg, touch_only, false, brisk_free},
      {"touch_remote", "brisk_malloc block, one word written (no free) on another thread",
       brisk_alloc_msg, touch_only, true, brisk_free},
  };
  const size_t nways = sizeof ways / sizeof ways[0];
  g_xheap = brisk_heap_new();
  if (!g_xheap) bench_die("brisk_heap_new");
  XShared sh;
  std::thread worker(xthread_worker, &sh);
  std::vector<void *> blocks(kXBatch);
  std::vector<double> per_free[nways];
  for (int rep = 0; rep < reps; rep++) {
    for (size_t k = 0; k < nways; k++) {
      size_t w = (k + (size_t)rep) % nways;
      for (int b = -4; b < batches_per_rep; b++) {  // 4 unrecorded batches
        for (size_t i = 0; i < kXBatch; i++) {
          void *p = ways[w].alloc();
          if (!p) bench_die("allocation failed");
          memset(p, (int)i, kMsg);
          blocks[i] = p;
        }
        uint64_t d;
        if (ways[w].remote) {
          sh.blocks = blocks.data();
          sh.free_fn = ways[w].free_fn;
          sh.phase.store(1, std::memory_order_release);
          wait_for(sh.phase, 2);
          d = sh.ticks_taken;
          sh.phase.store(0, std::memory_order_relaxed);
        } else {
          uint64_t a = ticks();
          for (size_t i = 0; i < kXBatch; i++) ways[w].free_fn(blocks[i]);
          d = ticks() - a;
        }
        if (ways[w].cleanup)
          for (size_t i = 0; i < kXBatch; i++) ways[w].cleanup(blocks[i]);
        if (b >= 0) per_free[w].push_back(ns((double)d) / (double)kXBatch);
      }
    }
  }
  sh.phase.store(3, std::memory_order_release);
  worker.join();
  brisk_heap_destroy(g_xheap);
  g_xheap = nullptr;
  printf("\n## Free of 256 B blocks, batches of %zu: ns per free (over %d batches)\n\n", kXBatch,
         reps * batches_per_rep);
  printf("| block, freed where | median | P10 | P90 |\n|---|---|---|---|\n");
  for (size_t w = 0; w < nways; w++) {
    std::vector<double> v = per_free[w];
    std::sort(v.begin(), v.end());
    printf("| %s | %.2f | %.2f | %.2f |\n", ways[w].what, median(v), pct(v, 0.1), pct(v, 0.9));
    printf("METRIC id=free.%s ns_per_free=%.2f p10=%.2f p90=%.2f\n", ways[w].id, median(v),
           pct(v, 0.1), pct(v, 0.9));
  }
  fflush(stdout);
}

bool wanted(const char *parts, const char *name) {
  if (!parts || !*parts) return true;
  size_t n = strlen(name);
  for (const char *p = parts; (p = strstr(p, name)) != nullptr; p += n)
    if ((p == parts || p[-1] == ',') && (p[n] == 0 || p[n] == ',')) return true;
  return false;
}

}  // namespace

int main(int argc, char **argv) {
  bench_args a = bench_parse(argc, argv, 1, "SIZE [THREADS [REPS [PARTS]]]", 20000, 1);
  int reps = argc > 3 ? (int)bench_parse_count(argv[3], "REPS") : 7;
  if (reps < 1) reps = 1;
  const char *parts = argc > 4 ? argv[4] : "";
  calibrate();
  printf("# session_pmr: SIZE %lld, %d repetitions, TSC %.3f GHz, empty measurement %llu ticks "
         "least, %.1f mean\n",
         a.size, reps, g_ghz, (unsigned long long)g_overhead, g_overhead_mean);
  double t0 = bench_now();
  if (wanted(parts, "bursts")) part_bursts(a.size, reps);
  if (wanted(parts, "destroy")) part_destroy(reps);
  if (wanted(parts, "overflow")) part_overflow(reps, (int)std::max<long long>(50, a.size / 20));
  if (wanted(parts, "xthread")) part_xthread(reps, (int)std::max<long long>(20, a.size / 1000));
  printf("\n(total %.1f s)\n", bench_now() - t0);
  char extra[128];
  snprintf(extra, sizeof extra, "tsc_ghz=%.3f timer_overhead_ticks=%llu", g_ghz,
           (unsigned long long)g_overhead);
  bench_result("session-pmr", 1, g_c_msgs, g_c_secs, extra);
  return 0;
}
