// Faults from the system below brisk, seen from C++: with brisk's
// OS memory requests failing (brisk_fault_injection), every form of
// operator new throws std::bad_alloc (the nothrow forms return nullptr),
// the std::new_handler is called and its retry loop works, containers
// report bad_alloc and stay valid, and nothing allocated earlier changes.
//
// ctest-labels: sanitize
#include <brisk.h>

#include "brisk_errors.h"

#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <string>
#include <vector>

static int g_failures;

#define CHECK(cond, ...)                                   \
  do {                                                     \
    if (!(cond)) {                                         \
      g_failures++;                                        \
      std::printf("FAIL (line %d): ", __LINE__);          \
      std::printf(__VA_ARGS__);                            \
      std::printf("\n");                                   \
    }                                                      \
  } while (0)

static void faults_all() { brisk_fault_injection(0, 0); }  // every request fails
static void faults_off() { brisk_fault_injection(-1, 0); }

static constexpr std::size_t kHuge = std::size_t(9) << 20;  // always a mapping of its own

struct alignas(4 << 20) Aligned4M {
  char c[64];
};
struct alignas(64) Aligned64 {
  char c[kHuge];
};

// The pointer escapes, so the compiler cannot drop a new/delete pair.
template <class T>
static T *keep(T *p) {
  __asm__ volatile("" : : "r"(p) : "memory");
  return p;
}

template <class F>
static bool throws_bad_alloc(F f) {
  try {
    f();
  } catch (const std::bad_alloc &) {
    return true;
  } catch (...) {
    return false;
  }
  return false;
}

// Objects made before the faults; checked after each part.
struct Before {
  std::vector<std::string> strings;
  std::map<int, std::vector<int>> map;
  std::unique_ptr<char[]> big;
  std::vector<char *> raw;
  void make() {
    for (int i = 0; i < 300; i++) strings.push_back(std::string(size_t(i % 50) * 7 + 1, char('a' + i % 26)));
    for (int i = 0; i < 200; i++) map[i] = std::vector<int>(size_t(i % 30) + 1, i);
    big.reset(new char[3u << 20]);
    std::memset(big.get(), 0x5c, 3u << 20);
    for (int i = 0; i < 100; i++) {
      char *p = new char[size_t(i) * 333 + 1];
      std::memset(p, i, size_t(i) * 333 + 1);
      raw.push_back(p);
    }
  }
  void check(const char *when) const {
    for (int i = 0; i < 300; i++)
      CHECK(strings[size_t(i)] == std::string(size_t(i % 50) * 7 + 1, char('a' + i % 26)), "%s: string %d changed",
            when, i);
    for (int i = 0; i < 200; i++) {
      auto it = map.find(i);
      CHECK(it != map.end() && it->second == std::vector<int>(size_t(i % 30) + 1, i), "%s: map entry %d changed", when, i);
    }
    for (std::size_t k = 0; k < (3u << 20); k++)
      if (big[k] != 0x5c) {
        CHECK(false, "%s: big block changed at %zu", when, k);
        break;
      }
    for (int i = 0; i < 100; i++)
      for (std::size_t k = 0; k < size_t(i) * 333 + 1; k++)
        if (raw[size_t(i)][k] != char(i)) {
          CHECK(false, "%s: raw block %d changed", when, i);
          break;
        }
  }
  ~Before() {
    for (char *p : raw) delete[] p;
  }
};

static int g_handler_calls;
static void handler_switches_faults_off() {
  g_handler_calls++;
  if (g_handler_calls >= 2) faults_off();  // memory comes back: the retry succeeds
}
static void handler_gives_up() {
  g_handler_calls++;
  std::set_new_handler(nullptr);  // next round throws
}

int main() {
  std::setvbuf(stdout, nullptr, _IONBF, 0);
  Before before;
  before.make();
  before.check("before the faults");

  // --- every form of new with every request failing -----------------------
  faults_all();
  CHECK(throws_bad_alloc([] { operator delete(keep(operator new(kHuge))); }), "operator new(9 MiB)");
  CHECK(throws_bad_alloc([] { delete[] keep(new char[kHuge]); }), "new char[9 MiB]");
  CHECK(throws_bad_alloc([] { delete keep(new Aligned4M); }), "new of a 4 MiB-aligned type");
  CHECK(throws_bad_alloc([] { delete keep(new Aligned64); }), "new of a 9 MiB 64-aligned type");
  CHECK(throws_bad_alloc([] { delete[] keep(new Aligned4M[3]); }), "new[] of a 4 MiB-aligned type");
  CHECK(throws_bad_alloc([] { operator delete(keep(operator new(kHuge, std::align_val_t(4096))), std::align_val_t(4096)); }),
        "operator new(9 MiB, align 4096)");
  CHECK(keep(new (std::nothrow) char[kHuge]) == nullptr, "new (nothrow) char[9 MiB] is not nullptr");
  CHECK(keep(operator new(kHuge, std::nothrow)) == nullptr, "operator new(9 MiB, nothrow) is not nullptr");
  CHECK(keep(operator new[](kHuge, std::nothrow)) == nullptr, "operator new[](9 MiB, nothrow) is not nullptr");
  CHECK(keep(new (std::nothrow) Aligned4M) == nullptr, "new (nothrow) of a 4 MiB-aligned type is not nullptr");
  CHECK(keep(operator new(kHuge, std::align_val_t(64), std::nothrow)) == nullptr, "aligned nothrow new is not nullptr");
  {
    std::vector<char> v(100, 'x');
    CHECK(throws_bad_alloc([&] { v.resize(kHuge); }), "vector::resize to 9 MiB");
    CHECK(v.size() == 100 && v[99] == 'x', "the vector changed after a failed resize");
    std::string s(50, 'y');
    CHECK(throws_bad_alloc([&] { s.reserve(kHuge); }), "string::reserve of 9 MiB");
    CHECK(s == std::string(50, 'y'), "the string changed after a failed reserve");
  }
  // small objects may still come from pages brisk already has
  for (int i = 0; i < 1000; i++) {
    int *p = keep(new (std::nothrow) int(i));
    if (p) {
      CHECK(*p == i, "small new");
      delete p;
    }
  }

  // --- the new_handler is called and its retry succeeds ------------------
  g_handler_calls = 0;
  std::set_new_handler(handler_switches_faults_off);
  {
    char *p = nullptr;
    bool threw = throws_bad_alloc([&] { p = keep(new char[kHuge]); });
    CHECK(!threw && p != nullptr, "new with a new_handler that frees memory: threw %d", int(threw));
    CHECK(g_handler_calls == 2, "the new_handler was called %d times, expected 2", g_handler_calls);
    if (p) {
      std::memset(p, 1, kHuge);
      delete[] p;
    }
  }
  faults_all();
  g_handler_calls = 0;
  std::set_new_handler(handler_switches_faults_off);
  {
    Aligned4M *a = nullptr;
    bool threw = throws_bad_alloc([&] { a = keep(new Aligned4M); });
    CHECK(!threw && a != nullptr && (reinterpret_cast<std::uintptr_t>(a) & ((4u << 20) - 1)) == 0,
          "aligned new with a new_handler that frees memory");
    delete a;
  }
  // Freed huge mappings wait in brisk's cache and serve a request without
  // asking the OS; return them so that the next huge request must.
  brisk_collect(true);
  faults_all();
  g_handler_calls = 0;
  std::set_new_handler(handler_gives_up);
  CHECK(throws_bad_alloc([] { delete[] keep(new char[kHuge]); }), "new with a new_handler that gives up");
  CHECK(g_handler_calls == 1, "the giving-up new_handler was called %d times", g_handler_calls);
  g_handler_calls = 0;
  std::set_new_handler(handler_gives_up);
  CHECK(keep(new (std::nothrow) char[kHuge]) == nullptr, "nothrow new with a new_handler that gives up");
  CHECK(g_handler_calls == 1, "nothrow new: the giving-up new_handler was called %d times, expected once",
        g_handler_calls);
  std::set_new_handler(nullptr);
  faults_off();
  before.check("after every request failed");

  // --- random failures: each new either works or throws bad_alloc --------
  // each kept vector with the size and the value it was made with; the
  // table's room is taken before the faults, so it never grows under them
  struct made_t {
    std::unique_ptr<std::vector<int>> v;
    std::size_t n;
    int value;
  };
  std::vector<made_t> kept;
  kept.reserve(128);
  brisk_fault_injection(-1, 300000);
  long ok = 0, thrown = 0, nulls = 0;
  std::uint64_t rs = 7;
  for (int i = 0; i < 4000; i++) {
    rs = rs * 6364136223846793005ull + 1442695040888963407ull;
    std::size_t n = (rs >> 33) % 5 == 0 ? std::size_t((rs >> 40) % 800000) : std::size_t((rs >> 40) % 2000);
    try {
      auto v = std::make_unique<std::vector<int>>(n, int(i));
      kept.push_back(made_t{std::move(v), n, int(i)});
      ok++;
    } catch (const std::bad_alloc &) {
      thrown++;
    }
    int *q = keep(new (std::nothrow) int[n + 1]);
    if (q) {
      q[n] = 3;
      delete[] q;
    } else {
      nulls++;
    }
    if (kept.size() > 64) kept.erase(kept.begin(), kept.begin() + 32);
  }
  faults_off();
  for (auto &m : kept) {
    CHECK(m.v->size() == m.n, "a vector of %zu ints made under faults has size %zu", m.n, m.v->size());
    for (std::size_t k = 0; k < m.v->size(); k++)
      if ((*m.v)[k] != m.value) {
        CHECK(false, "a vector of %zu ints made under faults changed at %zu: %d, expected %d", m.n, k, (*m.v)[k],
              m.value);
        break;
      }
  }
  kept.clear();
  std::printf("[faults_cpp] random failures: %ld made, %ld bad_alloc, %ld nothrow nullptr\n", ok, thrown, nulls);
  CHECK(thrown > 0 && nulls > 0, "no new ever failed at a 30%% failure rate");
  before.check("after random failures");

  // --- memory is back: everything works -----------------------------------
  for (int i = 0; i < 20; i++) {
    std::vector<char> v(kHuge + std::size_t(i) * 4096, 'z');
    CHECK(v.back() == 'z', "vector after the faults");
    auto *a = keep(new Aligned4M);
    CHECK((reinterpret_cast<std::uintptr_t>(a) & ((4u << 20) - 1)) == 0, "aligned new after the faults");
    delete a;
  }
  before.check("at the end");
  long errors = brisk_errors_reported();
  CHECK(errors == 0, "brisk reported %ld bad inputs, this test makes none", errors);
  std::printf("[faults_cpp] %s\n", g_failures ? "FAILED" : "all checks passed");
  return g_failures ? 1 : 0;
}
