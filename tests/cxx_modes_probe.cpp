// The program test_cxx_modes.sh builds with and without RTTI and exceptions
// (brisk/pmr.hpp and brisk/allocator.hpp in each mode) and runs.
//
//   cxx_modes_probe run
//       prints "rtti=<0|1> exceptions=<0|1>" as the compiler saw it, then
//       checks is_equal of every resource (over the same heap, borrowed
//       and owned, moved-from, default_resource against other resources),
//       containers over the resources and both allocators, allocate_shared,
//       moving resources; "FAIL ..." lines and exit 1 on a failure, "ok"
//       and exit 0 otherwise. No release may be reported as bad.
//   cxx_modes_probe fail <what>
//       makes <what> fail to allocate: heap_resource, session_arena,
//       default_resource, allocator, heap_allocator under brisk's fault
//       injection (64 MiB, which must come from the OS), moved_heap and
//       moved_arena on a moved-from resource. With exceptions it prints
//       "caught std::bad_alloc" and exits 0; without, the header's report
//       and abort() are expected (the script checks both).
#include <brisk/allocator.hpp>
#include <brisk/pmr.hpp>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <memory_resource>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#if defined(__GXX_RTTI) || defined(__cpp_rtti)
#define PROBE_RTTI 1
#else
#define PROBE_RTTI 0
#endif
#if defined(__cpp_exceptions)
#define PROBE_EXCEPTIONS 1
#else
#define PROBE_EXCEPTIONS 0
#endif

static int g_fail;
#define CHECK(cond, what)                                            \
  do {                                                               \
    if (!(cond)) {                                                   \
      std::printf("FAIL line %d: %s\n", __LINE__, what);             \
      g_fail = 1;                                                    \
    }                                                                \
  } while (0)

static double stat_of(const char *key) {
  char buf[4096], pattern[64];
  brisk_stats_json(buf, sizeof buf);
  std::snprintf(pattern, sizeof pattern, "\"%s\":", key);
  const char *s = std::strstr(buf, pattern);
  return s ? std::strtod(s + std::strlen(pattern), nullptr) : -1;
}
static double heap_blocks(brisk_heap_t *h) {
  char buf[512];
  brisk_heap_stats_json(h, buf, sizeof buf);
  const char *s = std::strstr(buf, "\"blocks_in_use\":");
  return s ? std::strtod(s + 16, nullptr) : -1;
}

static bool pmr_containers(std::pmr::memory_resource *r) {
  std::pmr::vector<std::pmr::string> v(r);
  std::pmr::map<int, std::pmr::string> m(r);
  for (int i = 0; i < 500; i++) {
    v.emplace_back(std::string(40 + i % 30, static_cast<char>('a' + i % 26)).c_str());
    m.emplace(i, v.back());
  }
  for (int i = 0; i < 500; i++)
    if (v[static_cast<std::size_t>(i)].size() != static_cast<std::size_t>(40 + i % 30) ||
        m.at(i) != v[static_cast<std::size_t>(i)] || !brisk_owns(v[static_cast<std::size_t>(i)].data()))
      return false;
  return true;
}

template <template <class> class A>
static bool std_containers(const A<char> &a) {
  using str = std::basic_string<char, std::char_traits<char>, A<char>>;
  std::vector<int, A<int>> v{A<int>(a)};
  std::deque<int, A<int>> d{A<int>(a)};
  std::list<int, A<int>> l{A<int>(a)};
  std::map<int, int, std::less<int>, A<std::pair<const int, int>>> m{A<std::pair<const int, int>>(a)};
  std::unordered_map<int, int, std::hash<int>, std::equal_to<int>, A<std::pair<const int, int>>> u{
      A<std::pair<const int, int>>(a)};
  str s(a);
  for (int i = 0; i < 1000; i++) {
    v.push_back(i);
    d.push_front(i);
    l.push_back(i);
    m.emplace(i, -i);
    u.emplace(i, i * 2);
    s += static_cast<char>('a' + i % 26);
  }
  for (int i = 0; i < 1000; i++) {
    auto k = static_cast<std::size_t>(i);
    if (v[k] != i || d[999 - k] != i || m.at(i) != -i || u.at(i) != i * 2 || s[k] != 'a' + i % 26) return false;
  }
  int i = 0;
  for (int x : l)
    if (x != i++) return false;
  struct alignas(64) a64 {
    int v;
  };
  auto sp = std::allocate_shared<a64>(A<a64>(a), a64{5});
  if (sp->v != 5 || (reinterpret_cast<std::uintptr_t>(sp.get()) & 63) != 0) return false;
  return brisk_owns(v.data()) && brisk_owns(s.data()) && brisk_owns(sp.get());
}

static int run() {
  std::printf("rtti=%d exceptions=%d\n", PROBE_RTTI, PROBE_EXCEPTIONS);
  const double errors0 = stat_of("errors");
  brisk_heap_t *h = brisk_heap_new();
  {
    brisk::heap_resource b1(h), b2(h), own1, own2;
    brisk::heap_resource borrow_own1(own1.heap());
    brisk::session_arena s1, s2;
    std::pmr::memory_resource *d = brisk::default_resource();
    std::pmr::unsynchronized_pool_resource pool(d);
    std::pmr::monotonic_buffer_resource mono(d);

    CHECK(b1.is_equal(b2) && b2.is_equal(b1) && b1 == b2, "heap_resources over the same heap are not equal");
    CHECK(own1.is_equal(borrow_own1) && borrow_own1.is_equal(own1), "owning and borrowing over one heap differ");
    CHECK(!own1.is_equal(own2) && !b1.is_equal(own1), "heap_resources over different heaps are equal");
    CHECK(s1.is_equal(s1) && !s1.is_equal(s2) && !s1.is_equal(own1) && !own1.is_equal(s1),
          "session_arena equality");
    CHECK(d->is_equal(*brisk::default_resource()), "default_resource is not equal to itself");
    CHECK(!d->is_equal(own1) && !own1.is_equal(*d) && !d->is_equal(s1) && !s1.is_equal(*d),
          "default_resource equals a heap_resource or session_arena");
    CHECK(!d->is_equal(*std::pmr::new_delete_resource()) && !std::pmr::new_delete_resource()->is_equal(*d),
          "default_resource equals new_delete_resource");
    CHECK(!d->is_equal(pool) && !own1.is_equal(pool) && !own1.is_equal(mono) && !mono.is_equal(own1),
          "a brisk resource equals a std resource");
    CHECK(!own1.is_equal(*std::pmr::null_memory_resource()), "a heap_resource equals null_memory_resource");

    brisk::heap_resource moved(std::move(b1));
    CHECK(moved.is_equal(b2) && !b1.is_equal(b2) && !b1.is_equal(moved) && b1.is_equal(b1),
          "equality after a move");

    CHECK(pmr_containers(&own1) && pmr_containers(&s1) && pmr_containers(d) && pmr_containers(&moved),
          "pmr containers over brisk's resources");
    CHECK(heap_blocks(h) == 0 && heap_blocks(own1.heap()) == 0, "blocks left on the heaps");
    CHECK(std_containers<brisk::allocator>(brisk::allocator<char>()), "containers with brisk::allocator");
    CHECK(std_containers<brisk::heap_allocator>(brisk::heap_allocator<char>(h)), "containers with heap_allocator");
    CHECK(heap_blocks(h) == 0, "heap_allocator containers left blocks on their heap");

    brisk::session_arena s3(std::move(s2));
    CHECK(s2.heap() == nullptr && s3.heap() != nullptr && pmr_containers(&s3), "moved session_arena");
    s2.release();
    s3.release();
#if PROBE_EXCEPTIONS
    bool threw = false;
    try {
      (void)own1.allocate(std::size_t(1) << 62, 16);
    } catch (const std::bad_alloc &) {
      threw = true;
    }
    CHECK(threw, "allocate(1<<62) did not throw std::bad_alloc");
#endif
  }
  brisk_heap_destroy(h);
  CHECK(stat_of("errors") == errors0, "brisk reported errors");
  if (!g_fail) std::printf("ok\n");
  return g_fail;
}

static int fail(const char *what) {
  const std::size_t big = std::size_t(64) << 20;
  brisk::heap_resource hr;
  brisk::session_arena sa(4096);
  brisk_heap_t *h = brisk_heap_new();
  brisk::heap_resource moved_hr;
  brisk::session_arena moved_sa;
  { brisk::heap_resource keep(std::move(moved_hr)); }
  { brisk::session_arena keep(std::move(moved_sa)); }
  brisk_collect(true);  // no kept huge mapping may serve the request
  brisk_fault_injection(0, 0);
#if PROBE_EXCEPTIONS
  try {
#endif
    void *p = nullptr;
    if (!std::strcmp(what, "heap_resource")) p = hr.allocate(big, 16);
    else if (!std::strcmp(what, "session_arena")) p = sa.allocate(big, 16);
    else if (!std::strcmp(what, "default_resource")) p = brisk::default_resource()->allocate(big, 16);
    else if (!std::strcmp(what, "allocator")) p = brisk::allocator<char>().allocate(big);
    else if (!std::strcmp(what, "heap_allocator")) p = brisk::heap_allocator<char>(h).allocate(big);
    else if (!std::strcmp(what, "moved_heap")) {
      brisk_fault_injection(-1, 0);
      p = moved_hr.allocate(64, 16);
    } else if (!std::strcmp(what, "moved_arena")) {
      brisk_fault_injection(-1, 0);
      p = moved_sa.allocate(64, 16);
    } else {
      std::printf("unknown failure %s\n", what);
      return 2;
    }
    std::printf("FAIL %s: allocation returned %p\n", what, p);
    return 1;
#if PROBE_EXCEPTIONS
  } catch (const std::bad_alloc &) {
    std::printf("caught std::bad_alloc\n");
    brisk_heap_destroy(h);
    return 0;
  }
#endif
}

int main(int argc, char **argv) {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  if (argc >= 3 && !std::strcmp(argv[1], "fail")) return fail(argv[2]);
  if (argc >= 2 && !std::strcmp(argv[1], "run")) return run();
  std::printf("usage: %s run | fail <what>\n", argv[0]);
  return 2;
}
