// brisk's standard allocators (C++17, header-only over the C API of brisk.h;
// does not need <memory_resource>).
//
//   brisk::allocator<T>       stateless, over brisk's global malloc: any
//                             thread allocates and frees
//   brisk::heap_allocator<T>  stateful, over a brisk_heap_t*: allocates from
//                             that heap (on the thread that created it only)
//
// Both meet the Allocator requirements: every std container (vector, deque,
// list, map, unordered_map, basic_string, ...), std::allocate_shared and
// std::allocator_traits take them. A T aligned beyond 16 bytes (alignas(64),
// alignas(4096)) is allocated with the aligned entry points. Deallocation is
// brisk_free_sized for both: a brisk block goes back to its own heap from
// any thread, whichever allocator releases it.
//
//   std::vector<int, brisk::allocator<int>> v;          // brisk_malloc
//   brisk_heap_t *h = brisk_heap_new();
//   std::vector<int, brisk::heap_allocator<int>> w{brisk::heap_allocator<int>(h)};
//
// brisk::allocator is like std::allocator: all instances are equal
// (is_always_equal), move assignment propagates it, the other traits do not
// matter.
//
// Equality of brisk::heap_allocator: equal when over the same heap. (Any
// brisk block could be freed through either, but equality also says where
// the next allocation goes, and a heap allocates only on its own thread.)
//
// Propagation of brisk::heap_allocator (std::allocator_traits):
//   propagate_on_container_copy_assignment  false: a copy allocates from the
//       destination's heap; a container stays on the heap it was built on
//       when another is copied into it (copy construction takes the
//       source's heap, as select_on_container_copy_construction returns it);
//   propagate_on_container_move_assignment  true: move assignment takes the
//       source's storage and its heap with it, in O(1) and without
//       allocating, whichever heaps the two containers were on (a brisk
//       block can be freed from anywhere), as move construction does;
//   propagate_on_container_swap             true: swap exchanges storage and
//       heaps; with false, swapping containers over different heaps would
//       be undefined;
//   is_always_equal                         false.
// After a move assignment or a swap, a container allocates from the heap it
// received: on that heap's thread only.
//
// Failure. With exceptions, a failed allocation throws std::bad_alloc (a
// count too big for the address space: std::bad_array_new_length, which
// is a std::bad_alloc). Without exceptions (-fno-exceptions, detected by
// __cpp_exceptions being undefined), it prints one line to stderr,
//   brisk: allocation failed: brisk::allocator could not allocate 1048576 bytes (alignment 16); aborting
// and calls std::abort(): an allocator must not return null. The same holds
// for the resources of brisk/pmr.hpp.
#ifndef BRISK_ALLOCATOR_HPP
#define BRISK_ALLOCATOR_HPP

#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <new>
#include <type_traits>

#include "brisk.h"

#if defined(__GNUC__)
#define BRISK_CXX_COLD __attribute__((noinline, cold))
#else
#define BRISK_CXX_COLD
#endif

namespace brisk {

namespace detail {

// Every brisk block is aligned to at least this.
constexpr std::size_t min_alignment = 16;

#if !defined(__cpp_exceptions)
// Failure without exceptions: one line on stderr, then std::abort().
[[noreturn]] BRISK_CXX_COLD inline void abort_with(const char *what, const char *failure, const char *reason) {
  std::fprintf(stderr, "brisk: allocation failed: %s %s%s%s; aborting\n", what, failure, reason ? ": " : "",
               reason ? reason : "");
  std::fflush(stderr);
  std::abort();
}
#endif

// A failed allocation of `bytes` aligned to `alignment` by `what` (an
// allocator or resource; `reason` says why when it is not lack of memory):
// throws std::bad_alloc, or without exceptions reports and aborts.
[[noreturn]] BRISK_CXX_COLD inline void alloc_failed(const char *what, std::size_t bytes, std::size_t alignment,
                                                    const char *reason = nullptr) {
#if defined(__cpp_exceptions)
  (void)what, (void)bytes, (void)alignment, (void)reason;
  throw std::bad_alloc();
#else
  char failure[96];
  std::snprintf(failure, sizeof failure, "could not allocate %zu bytes (alignment %zu)", bytes, alignment);
  abort_with(what, failure, reason);
#endif
}

// n objects of `size` bytes do not fit in the address space: throws
// std::bad_array_new_length (a std::bad_alloc), or reports and aborts.
[[noreturn]] BRISK_CXX_COLD inline void array_too_long(const char *what, std::size_t n, std::size_t size,
                                                      std::size_t alignment) {
#if defined(__cpp_exceptions)
  (void)what, (void)n, (void)size, (void)alignment;
  throw std::bad_array_new_length();
#else
  char failure[128];
  std::snprintf(failure, sizeof failure, "could not allocate %zu objects of %zu bytes (alignment %zu)", n, size,
                alignment);
  abort_with(what, failure, nullptr);
#endif
}

// A resource could not be created (its heap or its arena's first buffer):
// throws std::bad_alloc, or reports and aborts.
[[noreturn]] BRISK_CXX_COLD inline void create_failed(const char *what) {
#if defined(__cpp_exceptions)
  (void)what;
  throw std::bad_alloc();
#else
  abort_with(what, "could not be created", "no memory for its heap");
#endif
}

}  // namespace detail

// Stateless: brisk's global malloc, from any thread.
template <class T>
class allocator {
 public:
  using value_type = T;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using propagate_on_container_copy_assignment = std::false_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::false_type;
  using is_always_equal = std::true_type;

  constexpr allocator() noexcept = default;
  template <class U>
  constexpr allocator(const allocator<U> &) noexcept {}

  [[nodiscard]] T *allocate(std::size_t n) {
    if (n > max_size()) detail::array_too_long("brisk::allocator", n, sizeof(T), alignof(T));
    const std::size_t bytes = n * sizeof(T);
    void *p = alignof(T) <= detail::min_alignment ? brisk_malloc(bytes) : brisk_aligned_alloc(alignof(T), bytes);
    if (p == nullptr) detail::alloc_failed("brisk::allocator", bytes, alignof(T));
    return static_cast<T *>(p);
  }
  void deallocate(T *p, std::size_t n) noexcept { brisk_free_sized(p, n * sizeof(T)); }

  constexpr std::size_t max_size() const noexcept { return static_cast<std::size_t>(-1) / sizeof(T); }
};

template <class T, class U>
constexpr bool operator==(const allocator<T> &, const allocator<U> &) noexcept {
  return true;
}
template <class T, class U>
constexpr bool operator!=(const allocator<T> &, const allocator<U> &) noexcept {
  return false;
}

// Stateful: allocates from one brisk heap, which must outlive every block
// the allocator (and its copies) handed out and still holds: destroying the
// heap releases them at once, so destroy the containers first. Allocation
// happens on the heap's thread only (from another thread the C library
// reports the misuse, and the allocation fails as above); deallocation
// from any thread.
template <class T>
class heap_allocator {
 public:
  using value_type = T;
  using size_type = std::size_t;
  using difference_type = std::ptrdiff_t;
  using propagate_on_container_copy_assignment = std::false_type;
  using propagate_on_container_move_assignment = std::true_type;
  using propagate_on_container_swap = std::true_type;
  using is_always_equal = std::false_type;

  explicit heap_allocator(brisk_heap_t *heap) noexcept : heap_(heap) {}
  template <class U>
  heap_allocator(const heap_allocator<U> &other) noexcept : heap_(other.heap()) {}

  [[nodiscard]] T *allocate(std::size_t n) {
    if (n > max_size()) detail::array_too_long("brisk::heap_allocator", n, sizeof(T), alignof(T));
    const std::size_t bytes = n * sizeof(T);
    void *p = alignof(T) <= detail::min_alignment ? brisk_heap_malloc(heap_, bytes)
                                                   : brisk_heap_aligned_alloc(heap_, alignof(T), bytes);
    if (p == nullptr) detail::alloc_failed("brisk::heap_allocator", bytes, alignof(T));
    return static_cast<T *>(p);
  }
  void deallocate(T *p, std::size_t n) noexcept { brisk_free_sized(p, n * sizeof(T)); }

  std::size_t max_size() const noexcept { return static_cast<std::size_t>(-1) / sizeof(T); }
  brisk_heap_t *heap() const noexcept { return heap_; }

 private:
  brisk_heap_t *heap_;
};

template <class T, class U>
bool operator==(const heap_allocator<T> &a, const heap_allocator<U> &b) noexcept {
  return a.heap() == b.heap();
}
template <class T, class U>
bool operator!=(const heap_allocator<T> &a, const heap_allocator<U> &b) noexcept {
  return a.heap() != b.heap();
}

}  // namespace brisk

#endif  // BRISK_ALLOCATOR_HPP
