// brisk's std::pmr layer (include/brisk/pmr.hpp).
//
// ctest-labels: sanitize
//
// Sections, each printing "[pmr] <section> ok" or its failures:
//   - std::pmr::vector/string/map/unordered_map (and nested containers) over
//     brisk::heap_resource owning a heap and borrowing one: content checks,
//     the memory comes from the heap (brisk_owns, the heap's blocks_in_use)
//     and goes back to it; containers built on one thread and destroyed on
//     another; an owning resource releases what is still live;
//   - brisk::session_arena: containers, release() and reuse after release
//     (the first buffer is kept: the next session starts at the same
//     address), overflow beyond the first buffer up to several MiB,
//     isolation between two sessions, destruction returns everything;
//   - brisk::default_resource(): containers, several threads at once,
//     memory allocated on one thread and freed on another, as the
//     std::pmr default resource;
//   - alignment honoured by every resource for alignments 1..4096;
//   - allocation failure throws std::bad_alloc and the resource still works;
//   - is_equal semantics (also for moved-from resources); the header uses
//     no RTTI (test_cxx_modes.sh builds and runs it with -fno-rtti);
//   - moving heap_resource and session_arena (construction, assignment,
//     in a std::vector that relocates them): the moved-to one keeps the
//     heap and its blocks and releases them at its destruction (brisk_owns,
//     the process's heap count), the moved-from one is empty: destroying it
//     releases nothing, allocate() throws std::bad_alloc, deallocate() and
//     release() are harmless;
//   - std::pmr::unsynchronized_pool_resource over brisk::default_resource().
// Run by hand: build/tests/test_pmr
#include <brisk/pmr.hpp>

#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory_resource>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace {

long g_failures = 0;
long g_section_failures = 0;
const char *g_section = "?";
std::mutex g_fail_lock;

__attribute__((format(printf, 2, 3))) void fail_at(int line, const char *fmt, ...) {
  std::lock_guard<std::mutex> lock(g_fail_lock);
  g_failures++;
  g_section_failures++;
  if (g_section_failures > 20) return;
  char msg[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof msg, fmt, ap);
  va_end(ap);
  std::printf("[pmr] FAIL %s (test_pmr.cpp:%d): %s\n", g_section, line, msg);
  std::fflush(stdout);
}
#define FAIL(...) fail_at(__LINE__, __VA_ARGS__)
#define CHECK(cond, ...) \
  do {                   \
    if (!(cond)) FAIL(__VA_ARGS__); \
  } while (0)

void section_begin(const char *name) {
  g_section = name;
  g_section_failures = 0;
}
void section_end() {
  if (g_section_failures == 0)
    std::printf("[pmr] %-48s ok\n", g_section);
  else
    std::printf("[pmr] %-48s FAILED (%ld failed checks%s)\n", g_section, g_section_failures,
                g_section_failures > 20 ? ", first 20 shown" : "");
  std::fflush(stdout);
}

bool is_aligned(const void *p, std::size_t a) { return (reinterpret_cast<std::uintptr_t>(p) & (a - 1)) == 0; }

unsigned char pat(std::size_t i, unsigned seed) {
  return static_cast<unsigned char>(i * 131u + (i >> 9) * 7u + seed * 29u + 1u);
}
void fill_pat(void *p, std::size_t n, unsigned seed) {
  auto *b = static_cast<unsigned char *>(p);
  for (std::size_t i = 0; i < n; i++) b[i] = pat(i, seed);
}
std::size_t check_pat(const void *p, std::size_t n, unsigned seed) {
  auto *b = static_cast<const unsigned char *>(p);
  for (std::size_t i = 0; i < n; i++)
    if (b[i] != pat(i, seed)) return i;
  return static_cast<std::size_t>(-1);
}
constexpr std::size_t NPOS = static_cast<std::size_t>(-1);

// A numeric member of a flat JSON object ("key":number), or -1.
double json_number(const char *json, const char *key) {
  char pattern[64];
  std::snprintf(pattern, sizeof pattern, "\"%s\":", key);
  const char *s = std::strstr(json, pattern);
  if (!s) return -1;
  return std::strtod(s + std::strlen(pattern), nullptr);
}
double heap_blocks(brisk_heap_t *h) {
  char buf[512];
  brisk_heap_stats_json(h, buf, sizeof buf);
  double v = json_number(buf, "blocks_in_use");
  if (v < 0) FAIL("brisk_heap_stats_json has no blocks_in_use: %s", buf);
  return v;
}
double proc_stat(const char *key) {
  char buf[4096];
  brisk_stats_json(buf, sizeof buf);
  double v = json_number(buf, key);
  if (v < 0) FAIL("brisk_stats_json has no \"%s\"", key);
  return v;
}

std::string long_text(int i) {
  std::string s = "value-" + std::to_string(i) + "-";
  while (s.size() < 40 + static_cast<std::size_t>(i % 60)) s += static_cast<char>('a' + (s.size() + i) % 26);
  return s;
}

// Builds containers of every kind on `mr`, checks their content, and
// returns a checksum-ish count of the checks done. All containers are
// destroyed before it returns.
long exercise_containers(std::pmr::memory_resource *mr, int n, const char *what, unsigned seed = 0) {
  long checks = 0;
  {
    std::pmr::vector<int> v(mr);
    for (int i = 0; i < n; i++) v.push_back(i * 7 + static_cast<int>(seed));
    CHECK(v.get_allocator().resource() == mr, "%s: vector's resource is not the one given", what);
    if (!v.empty()) CHECK(brisk_owns(v.data()), "%s: vector storage %p is not brisk's", what, (void *)v.data());
    for (int i = 0; i < n; i++)
      if (v[static_cast<std::size_t>(i)] != i * 7 + static_cast<int>(seed)) {
        FAIL("%s: vector element %d is %d", what, i, v[static_cast<std::size_t>(i)]);
        break;
      }
    v.resize(static_cast<std::size_t>(n) / 2);
    v.shrink_to_fit();
    for (int i = 0; i < n / 2; i++)
      if (v[static_cast<std::size_t>(i)] != i * 7 + static_cast<int>(seed)) {
        FAIL("%s: vector element %d lost after shrink_to_fit", what, i);
        break;
      }
    checks += n;
  }
  {
    std::pmr::string s(mr);
    for (int i = 0; i < n; i++) s += static_cast<char>('A' + (i + static_cast<int>(seed)) % 26);
    CHECK(s.size() == static_cast<std::size_t>(n), "%s: string size %zu", what, s.size());
    if (n > 64) CHECK(brisk_owns(s.data()), "%s: string storage %p is not brisk's", what, (const void *)s.data());
    for (int i = 0; i < n; i++)
      if (s[static_cast<std::size_t>(i)] != static_cast<char>('A' + (i + static_cast<int>(seed)) % 26)) {
        FAIL("%s: string char %d wrong", what, i);
        break;
      }
    std::pmr::string t(s, mr);
    t.append(s);
    CHECK(t.size() == 2 * s.size() && t.compare(0, s.size(), s) == 0, "%s: string copy/append wrong", what);
    checks += n;
  }
  {
    std::pmr::map<int, std::pmr::string> m(mr);
    for (int i = 0; i < n; i++) m.emplace(i * 3 % (n + 1), long_text(i).c_str());
    for (auto &kv : m) {
      CHECK(kv.second.get_allocator().resource() == mr, "%s: map value string does not use the map's resource", what);
      break;
    }
    int k = 0;
    for (int i = 0; i < n; i++) {
      auto it = m.find(i * 3 % (n + 1));
      if (it == m.end()) {
        FAIL("%s: map key %d missing", what, i * 3 % (n + 1));
        break;
      }
      k++;
    }
    for (int i = 0; i < n; i += 2) m.erase(i * 3 % (n + 1));
    for (auto &kv : m) {
      int key = kv.first;
      // the value is long_text(i) for the first i inserted with that key
      int i0 = -1;
      for (int i = 0; i < n; i++)
        if (i * 3 % (n + 1) == key) {
          i0 = i;
          break;
        }
      if (i0 < 0 || kv.second != long_text(i0).c_str()) {
        FAIL("%s: map value of key %d wrong: \"%s\"", what, key, kv.second.c_str());
        break;
      }
      if (++k > 2 * n) break;
    }
    checks += k;
  }
  {
    std::pmr::unordered_map<std::pmr::string, int> u(mr);
    for (int i = 0; i < n; i++) u[std::pmr::string(long_text(i).c_str(), mr)] = i;
    CHECK(u.size() == static_cast<std::size_t>(n), "%s: unordered_map size %zu, expected %d", what, u.size(), n);
    for (int i = 0; i < n; i++) {
      auto it = u.find(std::pmr::string(long_text(i).c_str(), mr));
      if (it == u.end() || it->second != i) {
        FAIL("%s: unordered_map lookup of key %d failed", what, i);
        break;
      }
    }
    u.rehash(static_cast<std::size_t>(n) * 4);
    for (int i = 0; i < n; i += 3) u.erase(std::pmr::string(long_text(i).c_str(), mr));
    for (int i = 1; i < n; i += 3)
      if (u.count(std::pmr::string(long_text(i).c_str(), mr)) != 1) {
        FAIL("%s: unordered_map key %d lost after rehash/erase", what, i);
        break;
      }
    checks += n;
  }
  {
    // nested: the resource propagates to the elements
    std::pmr::vector<std::pmr::vector<std::pmr::string>> vv(mr);
    for (int i = 0; i < n / 10 + 1; i++) {
      vv.emplace_back();
      for (int j = 0; j < 10; j++) vv.back().emplace_back(long_text(i * 10 + j).c_str());
    }
    CHECK(vv.empty() || vv[0].get_allocator().resource() == mr, "%s: nested vector does not use the resource", what);
    CHECK(vv.empty() || vv[0][0].get_allocator().resource() == mr, "%s: nested string does not use the resource", what);
    for (std::size_t i = 0; i < vv.size(); i++)
      for (std::size_t j = 0; j < vv[i].size(); j++)
        if (vv[i][j] != long_text(static_cast<int>(i * 10 + j)).c_str()) {
          FAIL("%s: nested string [%zu][%zu] wrong", what, i, j);
          i = vv.size();
          break;
        }
    checks += static_cast<long>(vv.size());
  }
  return checks;
}

// ---------------------------------------------------------------------------

void test_heap_resource() {
  section_begin("heap_resource: containers (owning, borrowing)");
  {
    brisk::heap_resource r;
    CHECK(r.heap() != nullptr, "heap_resource() has no heap");
    exercise_containers(&r, 3000, "owning heap_resource");
    CHECK(heap_blocks(r.heap()) == 0, "after the containers are gone the owned heap has blocks_in_use %g",
          heap_blocks(r.heap()));
    // while containers are live, the heap holds their blocks
    std::pmr::vector<std::pmr::string> v(&r);
    for (int i = 0; i < 500; i++) v.emplace_back(long_text(i).c_str());
    CHECK(heap_blocks(r.heap()) >= 500, "500 live strings but the heap has blocks_in_use %g", heap_blocks(r.heap()));
  }
  {
    brisk_heap_t *h = brisk_heap_new();
    {
      brisk::heap_resource r(h);
      CHECK(r.heap() == h, "heap_resource(h).heap() is %p, not %p", (void *)r.heap(), (void *)h);
      exercise_containers(&r, 2000, "borrowing heap_resource");
      CHECK(heap_blocks(h) == 0, "borrowed heap: blocks_in_use %g after the containers are gone", heap_blocks(h));
      brisk::heap_resource r2(h);
      exercise_containers(&r2, 500, "second borrowing heap_resource");
    }
    // the borrowed heap outlives the resources
    void *p = brisk_heap_malloc(h, 100);
    CHECK(p != nullptr && brisk_owns(p), "the borrowed heap no longer works after its resources are gone");
    brisk_free(p);
    brisk_heap_destroy(h);
  }
  {
    // an owning resource destroyed with allocations still live releases them
    double heaps0 = proc_stat("heaps");
    void *kept[100];
    {
      brisk::heap_resource r;
      CHECK(proc_stat("heaps") == heaps0 + 1, "process heaps %g with one heap_resource (was %g)", proc_stat("heaps"),
            heaps0);
      for (int i = 0; i < 100; i++) kept[i] = r.allocate(64 + static_cast<std::size_t>(i) * 100, 16);
      for (int i = 0; i < 100; i++) CHECK(brisk_owns(kept[i]), "heap_resource block %p not brisk's", kept[i]);
    }
    CHECK(proc_stat("heaps") == heaps0, "process heaps %g after the owning heap_resource died (was %g)",
          proc_stat("heaps"), heaps0);
    int still = 0;
    for (int i = 0; i < 100; i++) still += brisk_owns(kept[i]) ? 1 : 0;
    CHECK(still == 0, "%d blocks still owned after their owning heap_resource was destroyed", still);
  }
  {
    // built on this thread, destroyed on another (deallocation from any thread)
    brisk::heap_resource r;
    for (int round = 0; round < 5; round++) {
      auto *v = new std::pmr::vector<std::pmr::string>(&r);
      auto *m = new std::pmr::map<int, std::pmr::string>(&r);
      for (int i = 0; i < 2000; i++) {
        v->emplace_back(long_text(i + round).c_str());
        m->emplace(i, long_text(i * 2 + round).c_str());
      }
      std::atomic<int> bad{0};
      std::thread t([&] {
        for (int i = 0; i < 2000; i++) {
          if ((*v)[static_cast<std::size_t>(i)] != long_text(i + round).c_str()) bad++;
          auto it = m->find(i);  // no operator[]: it could insert (allocate) on this thread
          if (it == m->end() || it->second != long_text(i * 2 + round).c_str()) bad++;
        }
        delete v;
        delete m;
        brisk_collect(true);
      });
      t.join();
      CHECK(bad == 0, "round %d: %d elements wrong when read on another thread", round, bad.load());
      // more allocation on the owner: the remote frees come back
      std::pmr::vector<std::pmr::string> w(&r);
      for (int i = 0; i < 6000; i++) w.emplace_back(long_text(i).c_str());
      for (int i = 0; i < 6000; i += 97)
        if (w[static_cast<std::size_t>(i)] != long_text(i).c_str()) FAIL("round %d: string %d wrong", round, i);
    }
    double b = heap_blocks(r.heap());
    CHECK(b < 4000, "after 5 rounds of containers destroyed on another thread, the heap holds %g blocks "
          "(the remote frees did not come back)", b);
  }
  section_end();
}

void test_session_arena() {
  section_begin("session_arena: containers, release, reuse");
  {
    brisk::session_arena s;  // 64 KiB first buffer
    CHECK(s.heap() != nullptr && s.arena() != nullptr, "session_arena without heap/arena");
    void *first = nullptr;
    for (int session = 0; session < 50; session++) {
      void *p = s.allocate(32, 16);
      if (session == 0) first = p;
      else
        CHECK(p == first, "session %d: the first allocation after release() is %p, not the kept first buffer's %p",
              session, p, first);
      s.deallocate(p, 32, 16);  // a no-op for the arena
      int n = 200 + (session % 5) * 400;
      exercise_containers(&s, n, "session_arena", static_cast<unsigned>(session));
      // a session's messages
      std::pmr::vector<std::pmr::string> msgs(&s);
      for (int i = 0; i < n; i++) msgs.emplace_back(long_text(i + session).c_str());
      for (int i = 0; i < n; i++)
        if (msgs[static_cast<std::size_t>(i)] != long_text(i + session).c_str()) {
          FAIL("session %d: message %d wrong", session, i);
          break;
        }
      msgs.clear();
      msgs.shrink_to_fit();
      s.release();
    }
    // after many sessions with release, the heap holds the arena and its
    // first buffer only
    double b = heap_blocks(s.heap());
    CHECK(b <= 2, "after 50 sessions with release() the session's heap holds %g blocks", b);
  }
  {
    // a 4 KiB first buffer: 100 messages of 256 B, then big ones
    brisk::session_arena s(4096);
    for (int session = 0; session < 3; session++) {
      std::vector<std::pair<void *, std::size_t>> blocks;
      for (int i = 0; i < 100; i++) {
        void *p = s.allocate(256, 16);
        fill_pat(p, 256, static_cast<unsigned>(i + session));
        blocks.emplace_back(p, 256);
      }
      std::size_t big[] = {10000, 100000, 1u << 20, 3u << 20, 7u << 20};
      for (std::size_t k = 0; k < sizeof big / sizeof big[0]; k++) {
        void *p = s.allocate(big[k], 64);
        CHECK(is_aligned(p, 64), "session_arena allocate(%zu, 64) = %p", big[k], p);
        fill_pat(p, big[k], static_cast<unsigned>(500 + k));
        blocks.emplace_back(p, big[k]);
      }
      for (std::size_t i = 0; i < blocks.size(); i++) {
        unsigned seed = i < 100 ? static_cast<unsigned>(i + static_cast<std::size_t>(session))
                                : static_cast<unsigned>(500 + i - 100);
        std::size_t off = check_pat(blocks[i].first, blocks[i].second, seed);
        if (off != NPOS) {
          FAIL("session %d: arena block %zu (%zu bytes) changed at offset %zu", session, i, blocks[i].second, off);
          break;
        }
      }
      s.release();
    }
  }
  {
    // isolation: destroying one session leaves another intact
    auto *a = new brisk::session_arena(8192);
    auto *b = new brisk::session_arena(8192);
    auto *va = new std::pmr::vector<std::pmr::string>(a);
    auto *vbp = new std::pmr::vector<std::pmr::string>(b);
    auto *mbp = new std::pmr::map<int, std::pmr::string>(b);
    auto &vb = *vbp;
    auto &mb = *mbp;
    for (int i = 0; i < 3000; i++) {
      va->emplace_back(long_text(i).c_str());
      vb.emplace_back(long_text(i + 1).c_str());
      mb.emplace(i, long_text(i + 2).c_str());
    }
    delete va;
    delete a;  // the whole session goes at once
    // new sessions take the released memory
    for (int k = 0; k < 3; k++) {
      brisk::session_arena c(8192);
      std::pmr::vector<std::pmr::string> vc(&c);
      for (int i = 0; i < 3000; i++) vc.emplace_back(std::string(60, 'X').c_str());
    }
    for (int i = 0; i < 3000; i++) {
      if (vb[static_cast<std::size_t>(i)] != long_text(i + 1).c_str() || mb.at(i) != long_text(i + 2).c_str()) {
        FAIL("element %d of the surviving session changed after the other session was destroyed", i);
        break;
      }
    }
    delete vbp;  // containers before their resource
    delete mbp;
    delete b;
  }
  {
    // a session_arena and all it handed out return to brisk on destruction
    double heaps0 = proc_stat("heaps");
    for (int k = 0; k < 20; k++) {
      brisk::session_arena s(16 * 1024);
      for (int i = 0; i < 2000; i++) (void)s.allocate(256, 16);
    }
    CHECK(proc_stat("heaps") == heaps0, "process heaps %g after 20 session_arenas died (was %g)", proc_stat("heaps"),
          heaps0);
  }
  section_end();
}

void test_session_arena_big() {
  section_begin("session_arena destruction releases big buffers");
  // Sessions that overflow into buffers beyond 2 MiB (huge blocks): the
  // session's heap must take them when it is destroyed.
  double huge0 = proc_stat("huge_bytes");
  double mapped0 = proc_stat("mapped_bytes");
  for (int k = 0; k < 10; k++) {
    brisk::session_arena s(4096);
    std::pmr::vector<char> v(&s);
    v.resize(6u << 20, 'x');  // grows through several buffers, the last ones huge
    CHECK(v[(6u << 20) - 1] == 'x', "vector content lost");
  }
  double huge1 = proc_stat("huge_bytes");
  double mapped1 = proc_stat("mapped_bytes");
  std::printf("[pmr]   10 sessions with a 6 MiB vector: huge_bytes %.1f -> %.1f MiB, mapped %.1f -> %.1f MiB\n",
              huge0 / 1048576.0, huge1 / 1048576.0, mapped0 / 1048576.0, mapped1 / 1048576.0);
  CHECK(huge1 <= huge0, "huge_bytes grew from %.1f to %.1f MiB over 10 destroyed session_arenas: their overflow "
        "buffers (> 2 MiB) were not released with the session's heap", huge0 / 1048576.0, huge1 / 1048576.0);
  section_end();
}

void test_default_resource() {
  section_begin("default_resource: containers, threads");
  std::pmr::memory_resource *d = brisk::default_resource();
  CHECK(d != nullptr && d == brisk::default_resource(), "default_resource() is not one object");
  exercise_containers(d, 3000, "default_resource");
  // several threads at once
  std::atomic<long> checks{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < 4; t++)
    ts.emplace_back([&, t] {
      for (int r = 0; r < 5; r++) checks += exercise_containers(d, 800 + t * 100, "default_resource (threads)",
                                                                static_cast<unsigned>(t * 10 + r));
    });
  for (auto &t : ts) t.join();
  CHECK(checks > 0, "no work done in the threads");
  // allocated on one thread, freed on another
  for (int round = 0; round < 3; round++) {
    auto *v = new std::pmr::vector<std::pmr::string>(d);
    for (int i = 0; i < 5000; i++) v->emplace_back(long_text(i).c_str());
    std::thread t([&] {
      for (int i = 0; i < 5000; i += 7)
        if ((*v)[static_cast<std::size_t>(i)] != long_text(i).c_str()) FAIL("string %d wrong on the other thread", i);
      delete v;
    });
    t.join();
  }
  // as the std::pmr default resource
  std::pmr::memory_resource *old = std::pmr::set_default_resource(d);
  {
    std::pmr::vector<int> v;
    std::pmr::string s(200, 'q');
    v.assign(1000, 5);
    CHECK(v.get_allocator().resource() == d && s.get_allocator().resource() == d,
          "containers do not pick up the default resource");
    CHECK(brisk_owns(v.data()) && brisk_owns(s.data()), "default-resource containers' storage is not brisk's");
  }
  std::pmr::set_default_resource(old);
  section_end();
}

void alignment_run(std::pmr::memory_resource *r, const char *what) {
  struct blk {
    void *p;
    std::size_t n, a;
    unsigned seed;
  };
  std::vector<blk> blocks;
  for (std::size_t a = 1; a <= 4096; a <<= 1) {
    std::size_t sizes[] = {1, a, a + 1, 3 * a + 1, 100, 5000, 70000};
    for (std::size_t n : sizes) {
      void *p = nullptr;
      try {
        p = r->allocate(n, a);
      } catch (const std::bad_alloc &) {
        FAIL("%s: allocate(%zu, %zu) threw bad_alloc", what, n, a);
        continue;
      }
      CHECK(p != nullptr && is_aligned(p, a), "%s: allocate(%zu, %zu) = %p is not aligned", what, n, a, p);
      CHECK(brisk_owns(p), "%s: allocate(%zu, %zu) = %p is not brisk's memory", what, n, a, p);
      unsigned seed = static_cast<unsigned>(blocks.size() * 3 + 1);
      fill_pat(p, n, seed);
      blocks.push_back({p, n, a, seed});
    }
  }
  for (auto &b : blocks) {
    std::size_t off = check_pat(b.p, b.n, b.seed);
    if (off != NPOS) {
      FAIL("%s: block %p (%zu bytes, alignment %zu) changed at offset %zu (overlap)", what, b.p, b.n, b.a, off);
      break;
    }
  }
  for (auto &b : blocks) r->deallocate(b.p, b.n, b.a);
}

void test_alignment() {
  section_begin("alignment 1..4096 on every resource");
  {
    brisk::heap_resource r;
    alignment_run(&r, "heap_resource (owning)");
    CHECK(heap_blocks(r.heap()) == 0, "heap_resource: blocks_in_use %g after deallocating all", heap_blocks(r.heap()));
  }
  {
    brisk_heap_t *h = brisk_heap_new();
    {
      brisk::heap_resource r(h);
      alignment_run(&r, "heap_resource (borrowing)");
    }
    brisk_heap_destroy(h);
  }
  {
    brisk::session_arena s(4096);
    alignment_run(&s, "session_arena");
    s.release();
    alignment_run(&s, "session_arena after release");
  }
  alignment_run(brisk::default_resource(), "default_resource");
  // Not the pool resource over brisk: libstdc++ 12's unsynchronized_pool_resource
  // itself returns under-aligned blocks for some sizes with alignment > 16
  // (allocate(97, 32), allocate(100, 64)), over glibc's operator new as well.
  // test_pool checks it up to alignof(max_align_t).
  section_end();
}

void test_failure() {
  section_begin("allocation failure throws bad_alloc");
  const std::size_t huge = static_cast<std::size_t>(1) << 62;
  brisk::heap_resource hr;
  brisk::session_arena sa;
  std::pmr::memory_resource *rs[] = {&hr, &sa, brisk::default_resource()};
  const char *names[] = {"heap_resource", "session_arena", "default_resource"};
  for (int i = 0; i < 3; i++) {
    for (std::size_t align : {static_cast<std::size_t>(16), static_cast<std::size_t>(4096)}) {
      bool threw = false;
      try {
        void *p = rs[i]->allocate(huge, align);
        FAIL("%s: allocate(1<<62, %zu) returned %p", names[i], align, p);
      } catch (const std::bad_alloc &) {
        threw = true;
      } catch (...) {
        FAIL("%s: allocate(1<<62) threw something other than std::bad_alloc", names[i]);
      }
      CHECK(threw, "%s: allocate(1<<62, %zu) did not throw std::bad_alloc", names[i], align);
    }
    // still usable
    std::pmr::vector<std::pmr::string> v(rs[i]);
    for (int k = 0; k < 300; k++) v.emplace_back(long_text(k).c_str());
    for (int k = 0; k < 300; k++)
      if (v[static_cast<std::size_t>(k)] != long_text(k).c_str()) {
        FAIL("%s: container wrong after a failed allocation", names[i]);
        break;
      }
  }
  section_end();
}

void test_is_equal() {
  section_begin("is_equal");
  brisk_heap_t *h = brisk_heap_new();
  brisk::heap_resource b1(h), b2(h);
  brisk::heap_resource own1, own2;
  brisk::heap_resource borrow_own1(own1.heap());
  brisk::session_arena s1, s2;
  std::pmr::memory_resource *d = brisk::default_resource();
  std::pmr::unsynchronized_pool_resource pool(d);

  CHECK(b1.is_equal(b2) && b2.is_equal(b1), "two heap_resources over the same heap are not equal");
  CHECK(b1 == b2, "operator== on heap_resources over the same heap is false");
  CHECK(own1.is_equal(borrow_own1) && borrow_own1.is_equal(own1),
        "an owning heap_resource and one borrowing its heap are not equal");
  CHECK(!own1.is_equal(own2), "heap_resources over different heaps are equal");
  CHECK(!b1.is_equal(own1), "heap_resources over different heaps (borrowed vs owned) are equal");
  CHECK(own1.is_equal(own1), "a heap_resource is not equal to itself");
  CHECK(s1.is_equal(s1) && s1 == s1, "a session_arena is not equal to itself");
  CHECK(!s1.is_equal(s2) && !s2.is_equal(s1), "two session_arenas are equal");
  CHECK(!s1.is_equal(own1) && !own1.is_equal(s1), "a session_arena and a heap_resource are equal");
  CHECK(d->is_equal(*brisk::default_resource()), "default_resource is not equal to itself");
  CHECK(!d->is_equal(own1) && !own1.is_equal(*d), "default_resource and a heap_resource are equal");
  CHECK(!d->is_equal(s1) && !s1.is_equal(*d), "default_resource and a session_arena are equal");
  CHECK(!d->is_equal(*std::pmr::new_delete_resource()) && !std::pmr::new_delete_resource()->is_equal(*d),
        "default_resource is equal to std::pmr::new_delete_resource()");
  CHECK(!d->is_equal(pool) && !own1.is_equal(pool), "a brisk resource is equal to a pool resource over it");

  // what equality means: memory from one is deallocated through the other
  void *p = b1.allocate(100, 16);
  b2.deallocate(p, 100, 16);
  void *q = own1.allocate(5000, 64);
  borrow_own1.deallocate(q, 5000, 64);
  CHECK(heap_blocks(h) == 0, "memory allocated by one heap_resource and freed by an equal one: blocks_in_use %g",
        heap_blocks(h));
  // and containers: move-assignment between equal resources steals storage
  std::pmr::vector<int> va(&b1), vb(&b2);
  va.assign(1000, 3);
  const int *data = va.data();
  vb = std::move(va);
  CHECK(vb.data() == data, "move-assignment between containers over equal resources copied instead of stealing");
  vb.clear();
  vb.shrink_to_fit();
  brisk_heap_destroy(h);
  section_end();
}

void test_pool() {
  section_begin("unsynchronized_pool_resource over default_resource");
  std::pmr::memory_resource *d = brisk::default_resource();
  for (int round = 0; round < 3; round++) {
    std::pmr::pool_options opts;
    opts.max_blocks_per_chunk = round == 0 ? 0 : 64;
    opts.largest_required_pool_block = round == 2 ? 256 : 0;
    std::pmr::unsynchronized_pool_resource pool(opts, d);
    CHECK(pool.upstream_resource() == d, "the pool's upstream is not brisk::default_resource()");
    exercise_containers(&pool, 3000, "pool over default_resource", static_cast<unsigned>(round));
    for (std::size_t a = 1; a <= alignof(std::max_align_t); a <<= 1)
      for (std::size_t n : {static_cast<std::size_t>(1), a, a + 1, static_cast<std::size_t>(100),
                            static_cast<std::size_t>(5000), static_cast<std::size_t>(100000)}) {
        void *p = pool.allocate(n, a);
        CHECK(is_aligned(p, a) && brisk_owns(p), "pool.allocate(%zu, %zu) = %p", n, a, p);
        std::memset(p, 0x6B, n);
        pool.deallocate(p, n, a);
      }
    // many 256-byte messages in bursts, as in the session workload
    for (int burst = 0; burst < 20; burst++) {
      std::vector<void *> msgs;
      for (int i = 0; i < 1000; i++) {
        void *m = pool.allocate(256, 16);
        CHECK(brisk_owns(m), "pool block %p is not in memory brisk handed out", m);
        std::memset(m, (burst + i) & 0xff, 256);
        msgs.push_back(m);
      }
      // blocks bigger than the pool's largest go straight upstream
      void *big = pool.allocate(1u << 20, 64);
      CHECK(is_aligned(big, 64) && brisk_owns(big), "pool big block %p", big);
      std::memset(big, 0x5C, 1u << 20);
      for (int i = 0; i < 1000; i++) {
        auto *m = static_cast<unsigned char *>(msgs[static_cast<std::size_t>(i)]);
        if (m[0] != ((burst + i) & 0xff) || m[255] != ((burst + i) & 0xff)) {
          FAIL("burst %d: pool message %d changed", burst, i);
          break;
        }
      }
      for (void *m : msgs) pool.deallocate(m, 256, 16);
      pool.deallocate(big, 1u << 20, 64);
    }
    pool.release();
    exercise_containers(&pool, 500, "pool after release()", 9);
  }
  // the pool on a heap_resource and on a session_arena as upstream, too
  {
    brisk::heap_resource hr;
    {
      std::pmr::unsynchronized_pool_resource pool(&hr);
      exercise_containers(&pool, 2000, "pool over heap_resource");
    }
    CHECK(heap_blocks(hr.heap()) == 0, "pool over heap_resource: heap holds %g blocks after the pool died",
          heap_blocks(hr.heap()));
  }
  section_end();
}


void test_move() {
  section_begin("move: heap_resource, session_arena");
  static_assert(!std::is_copy_constructible_v<brisk::heap_resource> &&
                !std::is_copy_assignable_v<brisk::heap_resource>);
  static_assert(std::is_nothrow_move_constructible_v<brisk::heap_resource> &&
                std::is_nothrow_move_assignable_v<brisk::heap_resource>);
  static_assert(!std::is_copy_constructible_v<brisk::session_arena> &&
                !std::is_copy_assignable_v<brisk::session_arena>);
  static_assert(std::is_nothrow_move_constructible_v<brisk::session_arena> &&
                std::is_nothrow_move_assignable_v<brisk::session_arena>);
  auto throws = [](std::pmr::memory_resource &r, std::size_t n, std::size_t a) {
    try {
      void *p = r.allocate(n, a);
      FAIL("allocate(%zu, %zu) on a moved-from resource returned %p", n, a, p);
      return false;
    } catch (const std::bad_alloc &) {
      return true;
    }
  };
  const double heaps0 = proc_stat("heaps");
  const double errors0 = proc_stat("errors");
  {
    // move construction of an owning heap_resource
    std::vector<void *> blocks;
    auto *from = new brisk::heap_resource;
    brisk_heap_t *h = from->heap();
    for (int i = 0; i < 50; i++) blocks.push_back(from->allocate(100 + static_cast<std::size_t>(i) * 50, 16));
    void *early = from->allocate(64, 16);
    brisk::heap_resource to(std::move(*from));
    CHECK(to.heap() == h && from->heap() == nullptr, "after the move: to.heap() %p (want %p), from.heap() %p",
          (void *)to.heap(), (void *)h, (void *)from->heap());
    CHECK(throws(*from, 64, 16) && throws(*from, 5000, 4096), "allocate on a moved-from heap_resource did not throw");
    from->deallocate(early, 64, 16);  // works: the block goes back to its heap, now to's
    CHECK(heap_blocks(h) == 50, "deallocate through the moved-from resource: the heap holds %g blocks, not 50",
          heap_blocks(h));
    CHECK(!from->is_equal(to) && !to.is_equal(*from), "a moved-from heap_resource equals the one it moved to");
    CHECK(from->is_equal(*from), "a moved-from heap_resource is not equal to itself");
    delete from;  // releases nothing
    CHECK(proc_stat("heaps") == heaps0 + 1, "destroying the moved-from heap_resource destroyed the heap");
    int owned = 0;
    for (void *p : blocks) owned += brisk_owns(p) ? 1 : 0;
    CHECK(owned == 50, "%d of 50 blocks are still brisk's after the moved-from resource died", owned);
    exercise_containers(&to, 1000, "moved-to heap_resource");
    brisk::heap_resource borrow(h);
    CHECK(to.is_equal(borrow) && borrow.is_equal(to), "the moved-to resource and one borrowing its heap differ");

    // move assignment: the target's own heap is released first
    brisk::heap_resource target;
    void *t1 = target.allocate(200, 16);
    CHECK(proc_stat("heaps") == heaps0 + 2, "two owning heap_resources: heaps %g (was %g)", proc_stat("heaps"), heaps0);
    target = std::move(to);
    CHECK(target.heap() == h && to.heap() == nullptr, "move assignment did not take the heap");
    CHECK(!brisk_owns(t1) && proc_stat("heaps") == heaps0 + 1,
          "move assignment did not release the target's own heap (%p owned %d, heaps %g)", t1, brisk_owns(t1),
          proc_stat("heaps"));
    CHECK(throws(to, 10, 16), "allocate on a heap_resource moved-from by assignment did not throw");
    // self-move leaves it intact
    brisk::heap_resource &alias = target;
    target = std::move(alias);
    CHECK(target.heap() == h && brisk_owns(blocks[0]), "self move-assignment broke the resource");
    for (std::size_t i = 0; i < blocks.size(); i++) target.deallocate(blocks[i], 100 + i * 50, 16);
    CHECK(heap_blocks(h) == 0, "blocks deallocated through the moved-to resource: heap holds %g", heap_blocks(h));
    blocks.clear();
    void *last = target.allocate(300, 16);
    {
      brisk::heap_resource final_owner(std::move(target));
      CHECK(brisk_owns(last), "a block of the moved heap is not brisk's");
    }
    CHECK(!brisk_owns(last) && proc_stat("heaps") == heaps0,
          "the last owner died but the heap lives on (block owned %d, heaps %g, was %g)", brisk_owns(last),
          proc_stat("heaps"), heaps0);
  }
  {
    // a moved borrowing heap_resource still borrows
    brisk_heap_t *h = brisk_heap_new();
    {
      brisk::heap_resource b(h);
      brisk::heap_resource c(std::move(b));
      brisk::heap_resource d;
      d = std::move(c);  // d's own heap goes, d borrows h
      CHECK(d.heap() == h && b.heap() == nullptr && c.heap() == nullptr, "moving a borrowing resource");
    }
    void *p = brisk_heap_malloc(h, 100);
    CHECK(p != nullptr && brisk_owns(p), "a moved borrowing heap_resource destroyed the borrowed heap");
    brisk_free(p);
    brisk_heap_destroy(h);
    CHECK(proc_stat("heaps") == heaps0, "heaps %g after borrowing resources moved around (was %g)",
          proc_stat("heaps"), heaps0);
  }
  {
    // session_arena: move construction, release() on both sides
    auto *from = new brisk::session_arena(4096);
    brisk_heap_t *h = from->heap();
    brisk_arena_t *ar = from->arena();
    void *first = from->allocate(32, 16);
    std::vector<void *> big;
    for (int i = 0; i < 20; i++) big.push_back(from->allocate(10000, 64));  // beyond the first buffer
    brisk::session_arena to(std::move(*from));
    CHECK(to.heap() == h && to.arena() == ar && from->heap() == nullptr && from->arena() == nullptr,
          "session_arena move construction did not transfer heap and arena");
    CHECK(throws(*from, 32, 16) && throws(*from, 100000, 4096), "allocate on a moved-from session_arena did not throw");
    from->release();  // nothing to do
    from->deallocate(first, 32, 16);
    CHECK(!from->is_equal(to) && !to.is_equal(*from) && from->is_equal(*from), "moved-from session_arena equality");
    delete from;
    CHECK(brisk_owns(first) && brisk_owns(big[19]), "destroying the moved-from session_arena released the blocks");
    CHECK(proc_stat("heaps") == heaps0 + 1, "heaps %g with one session (was %g)", proc_stat("heaps"), heaps0);
    to.release();  // keeps the first buffer: the next allocation starts at the same place
    void *again = to.allocate(32, 16);
    CHECK(again == first, "release() on the moved-to session_arena: first allocation %p, not %p", again, first);
    exercise_containers(&to, 1500, "moved-to session_arena");
    // move assignment: the target's session goes first
    brisk::session_arena target(8192);
    void *t1 = target.allocate(64, 16);
    target = std::move(to);
    CHECK(!brisk_owns(t1), "move assignment did not release the target session's heap");
    CHECK(target.heap() == h && to.heap() == nullptr && to.arena() == nullptr, "move assignment did not transfer");
    CHECK(throws(to, 8, 8), "allocate on a session_arena moved-from by assignment did not throw");
    brisk::session_arena &alias = target;
    target = std::move(alias);
    CHECK(target.heap() == h && brisk_owns(first), "self move-assignment broke the session_arena");
    {
      std::pmr::vector<std::pmr::string> msgs(&target);
      for (int i = 0; i < 500; i++) msgs.emplace_back(long_text(i).c_str());
      for (int i = 0; i < 500; i++)
        if (msgs[static_cast<std::size_t>(i)] != long_text(i).c_str()) {
          FAIL("message %d wrong in the moved session", i);
          break;
        }
    }
  }
  CHECK(proc_stat("heaps") == heaps0, "heaps %g after the moved sessions died (was %g)", proc_stat("heaps"), heaps0);
  {
    // a std::vector of sessions relocates them as it grows
    std::vector<brisk::session_arena> sessions;
    std::vector<void *> firsts;
    for (int i = 0; i < 40; i++) {
      sessions.emplace_back(4096);
      firsts.push_back(sessions.back().allocate(48, 16));
      std::memset(firsts.back(), i, 48);
    }
    CHECK(proc_stat("heaps") == heaps0 + 40, "40 sessions in a vector: heaps %g (was %g)", proc_stat("heaps"), heaps0);
    for (int i = 0; i < 40; i++) {
      auto *b = static_cast<unsigned char *>(firsts[static_cast<std::size_t>(i)]);
      if (b[0] != i || b[47] != i || !brisk_owns(b)) {
        FAIL("session %d: its block changed after the vector relocated the sessions", i);
        break;
      }
      sessions[static_cast<std::size_t>(i)].release();
      if (sessions[static_cast<std::size_t>(i)].allocate(48, 16) != b) {
        FAIL("session %d: after relocation release() does not reuse its first buffer", i);
        break;
      }
    }
    sessions.erase(sessions.begin(), sessions.begin() + 20);  // move-assigns the last 20 over the first
    CHECK(proc_stat("heaps") == heaps0 + 20, "20 sessions erased: heaps %g (was %g)", proc_stat("heaps"), heaps0);
    CHECK(!brisk_owns(firsts[0]) && brisk_owns(firsts[39]), "the erased sessions' memory is not what was released");
    std::vector<brisk::heap_resource> hrs(10);
    for (auto &r : hrs) firsts.push_back(r.allocate(16, 16));
    hrs.reserve(100);  // relocates
    for (std::size_t i = 0; i < hrs.size(); i++)
      CHECK(brisk_owns(firsts[40 + i]), "heap_resource %zu: block lost after relocation", i);
  }
  CHECK(proc_stat("heaps") == heaps0, "heaps %g after the vectors of resources died (was %g)", proc_stat("heaps"),
        heaps0);
  CHECK(proc_stat("errors") == errors0, "brisk reported %g errors while resources were moved",
        proc_stat("errors") - errors0);
  section_end();
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  test_heap_resource();
  test_session_arena();
  test_session_arena_big();
  test_default_resource();
  test_alignment();
  test_failure();
  test_is_equal();
  test_pool();
  test_move();
  if (g_failures) {
    std::printf("[pmr] FAILED: %ld failed checks\n", g_failures);
    return 1;
  }
  std::printf("[pmr] all checks passed\n");
  return 0;
}
