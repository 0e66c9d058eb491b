// brisk's standard allocators (include/brisk/allocator.hpp).
//
// ctest-labels: sanitize
//
// Sections, each printing "[cxx_allocator] <section> ok" or its failures:
//   - std::allocator_traits properties of both allocators (static_assert:
//     propagation traits, is_always_equal, rebind keeps the heap);
//   - vector, deque, list, map, unordered_map and basic_string with
//     brisk::allocator and with brisk::heap_allocator: contents checked
//     through growth, erasure and sorting; the storage is brisk's; with the
//     heap allocator the blocks are the heap's (its blocks_in_use while the
//     containers live, 0 after) and another heap's count does not move;
//   - std::allocate_shared with both: the object and its control block are
//     one block of the heap, which a weak_ptr keeps after the object dies;
//   - over-aligned T (alignas(64), alignas(4096), alignas(256 KiB)) in every
//     container and in allocate_shared, with both allocators;
//   - equality and what the propagation traits do to containers: copy
//     assignment stays on the destination's heap, move assignment and swap
//     take the source's heap and storage, copy construction the source's;
//   - a container on a heap destroyed on another thread (the blocks go
//     back); allocating on a heap from another thread fails with bad_alloc;
//   - failures: bad_alloc for an impossible size and under brisk's fault
//     injection, bad_array_new_length for a count beyond max_size(); the
//     allocators still work afterwards;
//   - no release was reported as bad (the process's "errors" count).
// Run by hand: build/tests/test_cxx_allocator
#include <brisk/allocator.hpp>

#include <algorithm>
#include <atomic>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <string>
#include <string_view>
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
  std::printf("[cxx_allocator] FAIL %s (test_cxx_allocator.cpp:%d): %s\n", g_section, line, msg);
  std::fflush(stdout);
}
#define FAIL(...) fail_at(__LINE__, __VA_ARGS__)
#define CHECK(cond, ...)            \
  do {                              \
    if (!(cond)) FAIL(__VA_ARGS__); \
  } while (0)

void section_begin(const char *name) {
  g_section = name;
  g_section_failures = 0;
}
void section_end() {
  if (g_section_failures == 0)
    std::printf("[cxx_allocator] %-56s ok\n", g_section);
  else
    std::printf("[cxx_allocator] %-56s FAILED (%ld failed checks%s)\n", g_section, g_section_failures,
                g_section_failures > 20 ? ", first 20 shown" : "");
  std::fflush(stdout);
}

bool is_aligned(const void *p, std::size_t a) { return (reinterpret_cast<std::uintptr_t>(p) & (a - 1)) == 0; }

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

// ---------------------------------------------------------------------------
// Traits, checked at compile time.

template <class T>
using gtraits = std::allocator_traits<brisk::allocator<T>>;
template <class T>
using htraits = std::allocator_traits<brisk::heap_allocator<T>>;

static_assert(std::is_same_v<gtraits<int>::value_type, int>);
static_assert(std::is_same_v<gtraits<int>::pointer, int *>);
static_assert(std::is_same_v<gtraits<int>::size_type, std::size_t>);
static_assert(std::is_same_v<gtraits<int>::rebind_alloc<double>, brisk::allocator<double>>);
static_assert(gtraits<int>::is_always_equal::value);
static_assert(gtraits<int>::propagate_on_container_move_assignment::value);
static_assert(!gtraits<int>::propagate_on_container_copy_assignment::value);
static_assert(!gtraits<int>::propagate_on_container_swap::value);
static_assert(std::is_empty_v<brisk::allocator<int>>);
static_assert(std::is_nothrow_default_constructible_v<brisk::allocator<int>>);
static_assert(std::is_nothrow_copy_constructible_v<brisk::allocator<int>>);
static_assert(std::is_nothrow_constructible_v<brisk::allocator<int>, const brisk::allocator<char> &>);
static_assert(brisk::allocator<int>() == brisk::allocator<double>());
static_assert(!(brisk::allocator<int>() != brisk::allocator<double>()));

static_assert(std::is_same_v<htraits<int>::value_type, int>);
static_assert(std::is_same_v<htraits<int>::rebind_alloc<double>, brisk::heap_allocator<double>>);
static_assert(!htraits<int>::is_always_equal::value);
static_assert(!htraits<int>::propagate_on_container_copy_assignment::value);
static_assert(htraits<int>::propagate_on_container_move_assignment::value);
static_assert(htraits<int>::propagate_on_container_swap::value);
static_assert(!std::is_default_constructible_v<brisk::heap_allocator<int>>);
static_assert(!std::is_convertible_v<brisk_heap_t *, brisk::heap_allocator<int>>);  // explicit
static_assert(std::is_nothrow_copy_constructible_v<brisk::heap_allocator<int>>);
static_assert(std::is_nothrow_move_assignable_v<brisk::heap_allocator<int>>);
static_assert(std::is_nothrow_constructible_v<brisk::heap_allocator<int>, const brisk::heap_allocator<char> &>);
static_assert(sizeof(brisk::heap_allocator<int>) == sizeof(void *));
// containers are nothrow-movable with either
static_assert(std::is_nothrow_move_constructible_v<std::vector<int, brisk::heap_allocator<int>>>);
static_assert(std::is_nothrow_move_assignable_v<std::vector<int, brisk::heap_allocator<int>>>);
static_assert(std::is_nothrow_move_assignable_v<std::vector<int, brisk::allocator<int>>>);

// ---------------------------------------------------------------------------
// Every container kind over allocator family A, made from `a`.

struct sv_hash {
  template <class S>
  std::size_t operator()(const S &s) const noexcept {
    return std::hash<std::string_view>()(std::string_view(s.data(), s.size()));
  }
};

template <template <class> class A>
struct kit {
  using str = std::basic_string<char, std::char_traits<char>, A<char>>;
  using vec = std::vector<int, A<int>>;
  using deq = std::deque<str, A<str>>;
  using lst = std::list<long, A<long>>;
  using map = std::map<int, str, std::less<int>, A<std::pair<const int, str>>>;
  using umap = std::unordered_map<str, int, sv_hash, std::equal_to<str>, A<std::pair<const str, int>>>;
};

template <class S>
bool same_text(const S &s, const std::string &t) {
  return std::string_view(s.data(), s.size()) == std::string_view(t);
}

// Builds the containers from `a`, checks their contents, calls live(n)
// while they all hold their elements (n: a lower bound of the blocks they
// hold), and destroys them.
template <template <class> class A, class Live>
void exercise(const A<char> &a, int n, const char *what, Live live) {
  using K = kit<A>;
  typename K::vec v{A<int>(a)};
  for (int i = 0; i < n; i++) v.push_back(i * 7 + 1);
  CHECK(v.get_allocator() == A<int>(a), "%s: vector's allocator is not the one given", what);
  CHECK(brisk_owns(v.data()), "%s: vector storage %p is not brisk's", what, (void *)v.data());
  for (int i = 0; i < n; i++)
    if (v[static_cast<std::size_t>(i)] != i * 7 + 1) {
      FAIL("%s: vector element %d is %d", what, i, v[static_cast<std::size_t>(i)]);
      break;
    }
  v.erase(v.begin(), v.begin() + n / 2);
  v.shrink_to_fit();
  CHECK(v.size() == static_cast<std::size_t>(n - n / 2) && v.front() == (n / 2) * 7 + 1,
        "%s: vector wrong after erase/shrink_to_fit", what);

  typename K::deq d{A<typename K::str>(a)};
  for (int i = 0; i < n; i++) {
    if (i % 2) d.emplace_back(long_text(i).c_str(), a);
    else d.emplace_front(long_text(i).c_str(), a);
  }
  // front: n-2, n-4, ..., 0 (even, reversed); back: 1, 3, ...
  for (int k = 0; k < n; k++) {
    int evens = (n + 1) / 2;
    int i = k < evens ? 2 * (evens - 1 - k) : 2 * (k - evens) + 1;
    if (!same_text(d[static_cast<std::size_t>(k)], long_text(i))) {
      FAIL("%s: deque element %d is \"%s\", expected text %d", what, k, d[static_cast<std::size_t>(k)].c_str(), i);
      break;
    }
  }
  CHECK(d.front().get_allocator() == a, "%s: deque's strings do not use the allocator given", what);
  CHECK(brisk_owns(d.front().data()), "%s: a deque string is not in brisk's memory", what);

  typename K::lst l{A<long>(a)};
  for (int i = 0; i < n; i++) l.push_back(static_cast<long>((i * 7919) % n));
  l.sort();
  long expect = 0, bad = 0;
  for (long x : l) bad += x != expect++;
  CHECK(bad == 0 && l.size() == static_cast<std::size_t>(n), "%s: list wrong after sort (%ld misplaced)", what, bad);
  l.reverse();
  CHECK(l.front() == n - 1 && l.back() == 0, "%s: list wrong after reverse", what);

  typename K::map m{A<std::pair<const int, typename K::str>>(a)};
  for (int i = 0; i < n; i++) m.emplace(i, typename K::str(long_text(i * 3).c_str(), a));
  for (int i = 0; i < n; i += 3) m.erase(i);
  int seen = 0;
  for (auto &kv : m) {
    if (kv.first % 3 == 0 || !same_text(kv.second, long_text(kv.first * 3))) {
      FAIL("%s: map entry %d wrong: \"%s\"", what, kv.first, kv.second.c_str());
      break;
    }
    seen++;
  }
  CHECK(seen == n - (n + 2) / 3, "%s: map holds %d entries, expected %d", what, seen, n - (n + 2) / 3);

  typename K::umap u{A<std::pair<const typename K::str, int>>(a)};
  for (int i = 0; i < n; i++) u.emplace(typename K::str(long_text(i).c_str(), a), i);
  u.rehash(static_cast<std::size_t>(n) * 4);
  for (int i = 0; i < n; i += 2) u.erase(typename K::str(long_text(i).c_str(), a));
  CHECK(u.size() == static_cast<std::size_t>(n / 2), "%s: unordered_map size %zu, expected %d", what, u.size(), n / 2);
  for (int i = 1; i < n; i += 2) {
    auto it = u.find(typename K::str(long_text(i).c_str(), a));
    if (it == u.end() || it->second != i) {
      FAIL("%s: unordered_map lookup of %d failed", what, i);
      break;
    }
  }

  typename K::str s{a};
  for (int i = 0; i < n; i++) s += static_cast<char>('A' + i % 26);
  typename K::str t(s, a);
  t += s;
  CHECK(s.size() == static_cast<std::size_t>(n) && t.size() == 2 * s.size() && t.compare(0, s.size(), s) == 0 &&
            t.compare(s.size(), s.size(), s) == 0,
        "%s: basic_string wrong", what);
  CHECK(brisk_owns(s.data()), "%s: basic_string storage is not brisk's", what);
  for (int i = 0; i < n; i++)
    if (s[static_cast<std::size_t>(i)] != static_cast<char>('A' + i % 26)) {
      FAIL("%s: basic_string char %d wrong", what, i);
      break;
    }

  // lower bound of live blocks: list nodes + map nodes and strings + deque strings
  live(static_cast<double>(n + 2 * seen + n));
}

// ---------------------------------------------------------------------------

void test_global_containers() {
  section_begin("brisk::allocator: every container");
  exercise<brisk::allocator>(brisk::allocator<char>(), 3000, "brisk::allocator", [](double) {});
  // several threads at once, freeing on another thread too
  std::vector<std::thread> ts;
  for (int t = 0; t < 3; t++)
    ts.emplace_back([t] {
      for (int r = 0; r < 3; r++)
        exercise<brisk::allocator>(brisk::allocator<char>(), 500 + 100 * t, "threads", [](double) {});
    });
  for (auto &t : ts) t.join();
  auto *v = new std::vector<std::string, brisk::allocator<std::string>>();
  for (int i = 0; i < 2000; i++) v->push_back(long_text(i));
  std::thread t([v] { delete v; });
  t.join();
  section_end();
}

void test_heap_containers() {
  section_begin("brisk::heap_allocator: every container, from its heap");
  brisk_heap_t *h = brisk_heap_new();
  brisk_heap_t *other = brisk_heap_new();
  CHECK(heap_blocks(h) == 0 && heap_blocks(other) == 0, "new heaps hold blocks");
  exercise<brisk::heap_allocator>(brisk::heap_allocator<char>(h), 3000, "heap_allocator", [&](double n) {
    double b = heap_blocks(h);
    CHECK(b >= n, "the containers hold at least %g blocks, but their heap has blocks_in_use %g", n, b);
    CHECK(heap_blocks(other) == 0, "another heap has blocks_in_use %g", heap_blocks(other));
  });
  CHECK(heap_blocks(h) == 0, "after the containers are gone their heap has blocks_in_use %g", heap_blocks(h));
  // two heaps side by side
  {
    std::vector<int, brisk::heap_allocator<int>> a{brisk::heap_allocator<int>(h)};
    std::list<int, brisk::heap_allocator<int>> b{brisk::heap_allocator<int>(other)};
    a.assign(100, 1);
    for (int i = 0; i < 100; i++) b.push_back(i);
    CHECK(heap_blocks(h) == 1 && heap_blocks(other) == 100, "vector on h, 100-node list on other: blocks %g and %g",
          heap_blocks(h), heap_blocks(other));
  }
  // a heap destroyed with live blocks takes them: they are no longer brisk's
  {
    brisk_heap_t *h3 = brisk_heap_new();
    auto *v = new std::vector<long, brisk::heap_allocator<long>>(brisk::heap_allocator<long>(h3));
    v->assign(10000, 5);
    const void *data = v->data();
    CHECK(brisk_owns(data), "vector storage on h3 not brisk's");
    brisk_heap_destroy(h3);
    CHECK(!brisk_owns(data), "vector storage still brisk's after its heap was destroyed");
    ::operator delete(v);  // the vector's storage went with its heap; only the object remains
  }
  brisk_heap_destroy(h);
  brisk_heap_destroy(other);
  section_end();
}

struct counted {
  static std::atomic<int> live;
  long v[6];
  explicit counted(long x) {
    for (auto &e : v) e = x;
    live++;
  }
  ~counted() { live--; }
};
std::atomic<int> counted::live{0};

struct alignas(64) a64 {
  int v;
  char pad[20];
  explicit a64(int x = 0) : v(x) {}
};
struct alignas(4096) a4k {
  int v;
  explicit a4k(int x = 0) : v(x) {}
};
// brisk_malloc happens to align a multiple of an alignment up to 64 KiB to
// it; beyond that only the aligned entry points do.
struct alignas(256 * 1024) a256k {
  int v;
  explicit a256k(int x = 0) : v(x) {}
};

void test_allocate_shared() {
  section_begin("std::allocate_shared");
  {
    auto p = std::allocate_shared<counted>(brisk::allocator<counted>(), 42);
    CHECK(p->v[5] == 42 && counted::live == 1, "allocate_shared object wrong");
    CHECK(brisk_owns(p.get()), "the shared object is not in brisk's memory");
    std::shared_ptr<counted> q = p;
    p.reset();
    CHECK(counted::live == 1 && q.use_count() == 1, "copy of shared_ptr lost the object");
    q.reset();
    CHECK(counted::live == 0, "the shared object was not destroyed");
  }
  brisk_heap_t *h = brisk_heap_new();
  {
    auto p = std::allocate_shared<counted>(brisk::heap_allocator<counted>(h), 7);
    CHECK(p->v[0] == 7 && brisk_owns(p.get()), "allocate_shared on a heap: object wrong");
    CHECK(heap_blocks(h) == 1, "allocate_shared on a heap: blocks_in_use %g, expected 1 (object and control block)",
          heap_blocks(h));
    std::weak_ptr<counted> w = p;
    p.reset();
    CHECK(counted::live == 0 && w.expired(), "the object was not destroyed with its last shared_ptr");
    CHECK(heap_blocks(h) == 1, "a weak_ptr holds the control block, but the heap has blocks_in_use %g", heap_blocks(h));
    w.reset();
    CHECK(heap_blocks(h) == 0, "after the last weak_ptr the heap has blocks_in_use %g", heap_blocks(h));
    // many, released on another thread
    std::vector<std::shared_ptr<counted>> many;
    for (int i = 0; i < 1000; i++) many.push_back(std::allocate_shared<counted>(brisk::heap_allocator<counted>(h), i));
    CHECK(heap_blocks(h) == 1000, "1000 shared objects on the heap: blocks_in_use %g", heap_blocks(h));
    for (int i = 0; i < 1000; i++)
      if (many[static_cast<std::size_t>(i)]->v[3] != i) {
        FAIL("shared object %d wrong", i);
        break;
      }
    std::thread t([&] { many.clear(); });
    t.join();
    CHECK(counted::live == 0, "%d shared objects not destroyed", counted::live.load());
  }
  brisk_heap_destroy(h);
  section_end();
}

template <class T, template <class> class A>
void aligned_containers(const A<char> &a, const char *what, int n) {
  constexpr std::size_t al = alignof(T);
  {
    std::vector<T, A<T>> v{A<T>(a)};
    for (int i = 0; i < 2 * n; i++) v.emplace_back(i);
    CHECK(is_aligned(v.data(), al), "%s: vector<alignas(%zu)> storage %p", what, al, (void *)v.data());
    for (int i = 0; i < 2 * n; i++)
      if (v[static_cast<std::size_t>(i)].v != i) {
        FAIL("%s: vector<alignas(%zu)> element %d wrong", what, al, i);
        break;
      }
  }
  {
    std::list<T, A<T>> l{A<T>(a)};
    for (int i = 0; i < n; i++) l.emplace_back(i);
    int i = 0;
    for (auto &e : l) {
      if (!is_aligned(&e, al) || e.v != i) {
        FAIL("%s: list<alignas(%zu)> node %d at %p (v %d)", what, al, i, (void *)&e, e.v);
        break;
      }
      i++;
    }
  }
  {
    std::deque<T, A<T>> d{A<T>(a)};
    for (int i = 0; i < n; i++) d.emplace_back(i);
    for (int i = 0; i < n; i++) {
      const T &e = d[static_cast<std::size_t>(i)];
      if (!is_aligned(&e, al) || e.v != i) {
        FAIL("%s: deque<alignas(%zu)> element %d at %p", what, al, i, (const void *)&e);
        break;
      }
    }
  }
  {
    std::map<int, T, std::less<int>, A<std::pair<const int, T>>> m{A<std::pair<const int, T>>(a)};
    for (int i = 0; i < n; i++) m.emplace(i, T(i * 2));
    for (auto &kv : m)
      if (!is_aligned(&kv.second, al) || kv.second.v != kv.first * 2) {
        FAIL("%s: map<int, alignas(%zu)> value at %p", what, al, (void *)&kv.second);
        break;
      }
  }
  {
    std::unordered_map<int, T, std::hash<int>, std::equal_to<int>, A<std::pair<const int, T>>> u{
        A<std::pair<const int, T>>(a)};
    for (int i = 0; i < n; i++) u.emplace(i, T(i + 1));
    for (auto &kv : u)
      if (!is_aligned(&kv.second, al) || kv.second.v != kv.first + 1) {
        FAIL("%s: unordered_map<int, alignas(%zu)> value at %p", what, al, (void *)&kv.second);
        break;
      }
  }
  {
    auto p = std::allocate_shared<T>(A<T>(a), 99);
    CHECK(is_aligned(p.get(), al) && p->v == 99, "%s: allocate_shared<alignas(%zu)> = %p", what, al, (void *)p.get());
  }
  {
    A<T> at(a);
    T *p = std::allocator_traits<A<T>>::allocate(at, 3);
    CHECK(is_aligned(p, al) && brisk_owns(p) && brisk_usable_size(p) >= 3 * sizeof(T),
          "%s: allocator_traits::allocate(3) of alignas(%zu) = %p, usable %zu", what, al, (void *)p,
          brisk_usable_size(p));
    std::memset(static_cast<void *>(p), 0x3C, 3 * sizeof(T));
    std::allocator_traits<A<T>>::deallocate(at, p, 3);
  }
}

void test_over_aligned() {
  section_begin("over-aligned T: alignas(64), alignas(4096), alignas(256 KiB)");
  aligned_containers<a64>(brisk::allocator<char>(), "brisk::allocator", 100);
  aligned_containers<a4k>(brisk::allocator<char>(), "brisk::allocator", 100);
  aligned_containers<a256k>(brisk::allocator<char>(), "brisk::allocator", 4);
  brisk_heap_t *h = brisk_heap_new();
  aligned_containers<a64>(brisk::heap_allocator<char>(h), "heap_allocator", 100);
  aligned_containers<a4k>(brisk::heap_allocator<char>(h), "heap_allocator", 100);
  aligned_containers<a256k>(brisk::heap_allocator<char>(h), "heap_allocator", 4);
  CHECK(heap_blocks(h) == 0, "over-aligned containers gone, the heap has blocks_in_use %g", heap_blocks(h));
  {
    std::vector<a4k, brisk::heap_allocator<a4k>> v{brisk::heap_allocator<a4k>(h)};
    v.resize(10);
    CHECK(heap_blocks(h) == 1, "a vector<alignas(4096)> on the heap: blocks_in_use %g", heap_blocks(h));
  }
  brisk_heap_destroy(h);
  section_end();
}

void test_equality_propagation() {
  section_begin("equality and propagation");
  brisk_heap_t *h1 = brisk_heap_new();
  brisk_heap_t *h2 = brisk_heap_new();
  using hv = std::vector<int, brisk::heap_allocator<int>>;
  brisk::heap_allocator<int> a1(h1), a2(h2);
  brisk::heap_allocator<double> d1(h1);
  CHECK(a1 == d1 && !(a1 != d1), "heap_allocators over the same heap (rebound) are not equal");
  CHECK(a1 != a2 && !(a1 == a2), "heap_allocators over different heaps are equal");
  std::allocator_traits<brisk::heap_allocator<int>>::rebind_alloc<long> r1(a1);
  CHECK(r1.heap() == h1 && r1 == a1, "rebinding lost the heap");
  brisk::heap_allocator<int> c = a2;
  c = a1;
  CHECK(c == a1 && c.heap() == h1, "assigned heap_allocator is not over the source's heap");
  // what equality means: freed through an equal one
  {
    int *p = a1.allocate(100);
    d1.deallocate(reinterpret_cast<double *>(p), 50);
    CHECK(heap_blocks(h1) == 0, "memory allocated by one heap_allocator and freed by an equal one: blocks %g",
          heap_blocks(h1));
  }
  CHECK(brisk::allocator<int>() == brisk::allocator<char>(), "brisk::allocators are not equal");
  {
    // copy assignment: the destination stays on its heap
    hv a(a1), b(a2);
    b.assign(1000, 9);
    a = b;
    CHECK(a.get_allocator().heap() == h1, "copy assignment moved the destination to the source's heap");
    CHECK(a.size() == 1000 && a[999] == 9, "copy assignment lost elements");
    CHECK(heap_blocks(h1) == 1 && heap_blocks(h2) == 1, "copy assignment: blocks %g on h1, %g on h2 (1 and 1)",
          heap_blocks(h1), heap_blocks(h2));
    // copy construction: the source's heap
    hv cc(b);
    CHECK(cc.get_allocator().heap() == h2 && heap_blocks(h2) == 2, "copy construction is not on the source's heap");
    // move assignment: storage and heap come along, nothing is allocated
    const int *data = b.data();
    a = std::move(b);
    CHECK(a.get_allocator().heap() == h2, "move assignment did not take the source's heap");
    CHECK(a.data() == data, "move assignment copied the elements instead of taking the storage");
    CHECK(heap_blocks(h1) == 0 && heap_blocks(h2) == 2, "move assignment: blocks %g on h1, %g on h2 (0 and 2)",
          heap_blocks(h1), heap_blocks(h2));
    // swap: heaps and storage are exchanged
    hv x(a1);
    x.assign(10, 1);
    const int *xd = x.data(), *ad = a.data();
    x.swap(a);
    CHECK(x.get_allocator().heap() == h2 && a.get_allocator().heap() == h1, "swap did not exchange the heaps");
    CHECK(x.data() == ad && a.data() == xd && x.size() == 1000 && a.size() == 10, "swap did not exchange storage");
    a.push_back(2);  // allocates from h1
    x.push_back(3);  // from h2
    CHECK(a.back() == 2 && x.back() == 3 && a.size() == 11, "containers wrong after swap");
    // the stateless one: move assignment steals too
    std::vector<int, brisk::allocator<int>> g1, g2(500, 4);
    const int *gd = g2.data();
    g1 = std::move(g2);
    CHECK(g1.data() == gd, "brisk::allocator: move assignment copied the elements");
  }
  CHECK(heap_blocks(h1) == 0 && heap_blocks(h2) == 0, "containers gone: blocks %g on h1, %g on h2",
        heap_blocks(h1), heap_blocks(h2));
  brisk_heap_destroy(h1);
  brisk_heap_destroy(h2);
  section_end();
}

void test_threads() {
  section_begin("heap_allocator across threads");
  brisk_heap_t *h = brisk_heap_new();
  using str = std::basic_string<char, std::char_traits<char>, brisk::heap_allocator<char>>;
  using strmap = std::map<int, str, std::less<int>, brisk::heap_allocator<std::pair<const int, str>>>;
  brisk::heap_allocator<char> a(h);
  for (int round = 0; round < 5; round++) {
    auto *m = new strmap(a);
    for (int i = 0; i < 3000; i++) m->emplace(i, str(long_text(i + round).c_str(), a));
    CHECK(heap_blocks(h) >= 6000, "round %d: 3000 map nodes and strings, the heap has blocks_in_use %g", round,
          heap_blocks(h));
    std::atomic<int> bad{0};
    std::thread t([&] {
      for (int i = 0; i < 3000; i++) {
        auto it = m->find(i);
        if (it == m->end() || !same_text(it->second, long_text(i + round))) bad++;
      }
      delete m;  // freed on this thread
    });
    t.join();
    CHECK(bad == 0, "round %d: %d entries wrong on the other thread", round, bad.load());
  }
  // the remote frees come back to the heap as it allocates again
  {
    std::vector<str, brisk::heap_allocator<str>> v{brisk::heap_allocator<str>(h)};
    for (int i = 0; i < 20000; i++) v.emplace_back(long_text(i).c_str(), a);
    double b = heap_blocks(h);
    CHECK(b < 20000 + 8000, "after 5 maps freed on another thread and 20000 new strings the heap holds %g blocks "
          "(the remote frees did not come back)", b);
  }
  // a heap made on another thread: its containers are freed here
  {
    brisk_heap_t *th = nullptr;
    std::vector<int, brisk::heap_allocator<int>> *v = nullptr;
    std::thread t([&] {
      th = brisk_heap_new();
      v = new std::vector<int, brisk::heap_allocator<int>>(brisk::heap_allocator<int>(th));
      for (int i = 0; i < 5000; i++) v->push_back(i);
    });
    t.join();
    CHECK(v->size() == 5000 && (*v)[4999] == 4999, "vector built on another thread wrong");
    delete v;
    brisk_heap_destroy(th);
  }
  // allocating from another thread is refused (reported by brisk): bad_alloc
  {
    double errors0 = proc_stat("errors");
    bool threw = false;
    std::thread t([&] {
      try {
        brisk::heap_allocator<int> ta(h);
        int *p = ta.allocate(10);
        FAIL("allocate on another thread returned %p", (void *)p);
      } catch (const std::bad_alloc &) {
        threw = true;
      }
    });
    t.join();
    CHECK(threw, "allocating from a heap on another thread did not throw std::bad_alloc");
    CHECK(proc_stat("errors") == errors0 + 1, "the refused allocation was not reported (errors %g, was %g)",
          proc_stat("errors"), errors0);
  }
  brisk_heap_destroy(h);
  section_end();
}

template <class F>
bool throws_bad_alloc(F f, bool want_array = false) {
  try {
    f();
  } catch (const std::bad_array_new_length &) {
    return true;
  } catch (const std::bad_alloc &) {
    return !want_array;
  } catch (...) {
    return false;
  }
  return false;
}

struct big {
  char c[1u << 20];
};

void test_failure() {
  section_begin("failure: bad_alloc, bad_array_new_length");
  brisk_heap_t *h = brisk_heap_new();
  brisk::allocator<char> g;
  brisk::heap_allocator<char> ha(h);
  brisk::allocator<big> gb;
  brisk::heap_allocator<big> hb(h);
  const std::size_t huge = std::size_t(1) << 62;
  CHECK(throws_bad_alloc([&] { (void)g.allocate(huge); }), "brisk::allocator: allocate(1<<62) did not throw bad_alloc");
  CHECK(throws_bad_alloc([&] { (void)ha.allocate(huge); }), "heap_allocator: allocate(1<<62) did not throw bad_alloc");
  CHECK(throws_bad_alloc([&] { (void)gb.allocate(gb.max_size() + 1); }, true),
        "brisk::allocator: allocate(max_size() + 1) did not throw bad_array_new_length");
  CHECK(throws_bad_alloc([&] { (void)hb.allocate(hb.max_size() + 1); }, true),
        "heap_allocator: allocate(max_size() + 1) did not throw bad_array_new_length");
  CHECK(throws_bad_alloc([&] { (void)gb.allocate(huge / sizeof(big)); }),
        "brisk::allocator: allocate of 4 TiB did not throw bad_alloc");
  // the OS has no memory: a 64 MiB request must ask for it
  brisk_collect(true);
  brisk_fault_injection(0, 0);
  CHECK(throws_bad_alloc([&] { (void)gb.allocate(64); }), "brisk::allocator: no bad_alloc under fault injection");
  CHECK(throws_bad_alloc([&] { (void)hb.allocate(64); }), "heap_allocator: no bad_alloc under fault injection");
  CHECK(throws_bad_alloc([&] {
          std::vector<big, brisk::heap_allocator<big>> v(hb);
          v.resize(64);
        }),
        "vector<big> on a heap: no bad_alloc under fault injection");
  brisk_fault_injection(-1, 0);
  // still usable
  {
    std::vector<int, brisk::heap_allocator<int>> v{brisk::heap_allocator<int>(h)};
    std::vector<int, brisk::allocator<int>> w;
    for (int i = 0; i < 100000; i++) {
      v.push_back(i);
      w.push_back(-i);
    }
    CHECK(v[99999] == 99999 && w[99999] == -99999, "containers wrong after failed allocations");
    big *b = gb.allocate(64);
    b[63].c[0] = 1;
    gb.deallocate(b, 64);
  }
  CHECK(heap_blocks(h) == 0, "failed allocations left blocks_in_use %g on the heap", heap_blocks(h));
  brisk_heap_destroy(h);
  section_end();
}

}  // namespace

int main() {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);
  double errors0 = proc_stat("errors");
  test_global_containers();
  test_heap_containers();
  test_allocate_shared();
  test_over_aligned();
  test_equality_propagation();
  test_failure();
  double errors1 = proc_stat("errors");
  test_threads();  // reports one refused allocation on purpose
  section_begin("no release reported as bad");
  CHECK(errors1 == errors0, "brisk reported %g errors (bad frees, wrong sizes) during the tests", errors1 - errors0);
  section_end();
  if (g_failures) {
    std::printf("[cxx_allocator] FAILED: %ld failed checks\n", g_failures);
    return 1;
  }
  std::printf("[cxx_allocator] all checks passed\n");
  return 0;
}
