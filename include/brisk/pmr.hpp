// brisk's std::pmr layer (C++17, header-only over the C API of brisk.h).
//
//   brisk::heap_resource     a memory_resource over a brisk heap: owns a new
//                            heap (destroyed with it) or borrows one
//   brisk::session_arena     bump allocation over a heap of its own; release()
//                            keeps the first buffer, destruction drops the
//                            whole heap at once
//   brisk::default_resource  brisk's global malloc, thread-safe
//
// A heap, and so a heap_resource or session_arena that owns one, allocates
// on the thread that created it; its blocks may be freed from any thread.
//
// Moving. heap_resource and session_arena move (construction and
// assignment, noexcept) but do not copy. The moved-to object takes the heap
// (and the arena) with everything allocated from it, and releases it when
// it is destroyed; move assignment first releases what the target owned,
// as its destruction would. The moved-from object is empty: heap() (and
// arena()) return nullptr, destroying it releases nothing, release() does
// nothing, deallocate() still works (a brisk block is freed without its
// resource), and allocate() fails as below with the reason "empty (moved
// from)". A std::pmr container keeps a pointer to its resource, not a copy:
// moving a resource that containers point to leaves them on the empty
// object (they can still be destroyed, no longer allocate). Keeping them
// right is the caller's job: move resources before containers use them, or
// move the containers' owner along with them.
//
// Failure. With exceptions, a failed allocation (and a failed creation of a
// resource) throws std::bad_alloc. Without exceptions (-fno-exceptions,
// detected by __cpp_exceptions being undefined) a memory_resource cannot
// return null, so it prints one line to stderr and calls std::abort():
//   brisk: allocation failed: brisk::heap_resource could not allocate 65536 bytes (alignment 16); aborting
//   brisk: allocation failed: brisk::session_arena could not allocate 64 bytes (alignment 16): empty (moved from); aborting
//
// RTTI. The header needs none (-fno-rtti works). is_equal keeps the
// standard's meaning: two heap_resources over the same heap are equal (one
// deallocates what the other allocated), a session_arena is equal only to
// itself, and default_resource() only to itself. To recognise another
// heap_resource without dynamic_cast, a resource is asked whether it is
// equal to a marker object that only its kind answers yes to (and that no
// resource of another kind does: one answering yes to every resource is
// not taken for brisk's). A marker is one object per program, unless two
// shared libraries each hide their copy (-fvisibility=hidden): then their
// resources over one heap compare unequal, which costs containers a copy
// where a move would do, never correctness.
#ifndef BRISK_PMR_HPP
#define BRISK_PMR_HPP

#include <cstddef>
#include <memory_resource>
#include <new>

#include "brisk.h"
#include "allocator.hpp"

namespace brisk {

namespace detail {

// Answers is_equal with identity only; never allocates.
class marker_resource final : public std::pmr::memory_resource {
 protected:
  void *do_allocate(std::size_t bytes, std::size_t alignment) override {
    alloc_failed("brisk::detail::marker_resource", bytes, alignment, "a marker does not allocate");
  }
  void do_deallocate(void *, std::size_t, std::size_t) override {}
  bool do_is_equal(const std::pmr::memory_resource &other) const noexcept override { return this == &other; }
};

// One marker per kind of resource (Kind = void: the marker of no kind).
template <class Kind>
marker_resource &marker() noexcept {
  static marker_resource m;
  return m;
}

// `other` is a resource of Kind (or derived from it): it says yes to Kind's
// marker and no to the marker of no kind.
template <class Kind>
bool is_kind(const std::pmr::memory_resource &other) noexcept {
  return other.is_equal(marker<Kind>()) && !other.is_equal(marker<void>());
}

}  // namespace detail

class heap_resource : public std::pmr::memory_resource {
 public:
  // Owns a new heap; destroying the resource releases every block at once.
  heap_resource() : heap_(brisk_heap_new()), owned_(true) {
    if (heap_ == nullptr) detail::create_failed("brisk::heap_resource");
  }
  // Borrows a heap that outlives the resource.
  explicit heap_resource(brisk_heap_t *heap) noexcept : heap_(heap), owned_(false) {}
  heap_resource(const heap_resource &) = delete;
  heap_resource &operator=(const heap_resource &) = delete;
  // Takes other's heap (owned or borrowed); other is left empty.
  heap_resource(heap_resource &&other) noexcept : heap_(other.heap_), owned_(other.owned_) {
    other.heap_ = nullptr;
    other.owned_ = false;
  }
  // Releases the heap this one owned (every block of it), then takes
  // other's; other is left empty.
  heap_resource &operator=(heap_resource &&other) noexcept {
    if (this != &other) {
      if (owned_) brisk_heap_destroy(heap_);
      heap_ = other.heap_;
      owned_ = other.owned_;
      other.heap_ = nullptr;
      other.owned_ = false;
    }
    return *this;
  }
  ~heap_resource() override {
    if (owned_) brisk_heap_destroy(heap_);
  }

  // nullptr when empty (moved from).
  brisk_heap_t *heap() const noexcept { return heap_; }

 protected:
  void *do_allocate(std::size_t bytes, std::size_t alignment) override {
    if (__builtin_expect(heap_ == nullptr, 0))
      detail::alloc_failed("brisk::heap_resource", bytes, alignment, "empty (moved from)");
    void *p = alignment <= detail::min_alignment ? brisk_heap_malloc(heap_, bytes)
                                                  : brisk_heap_aligned_alloc(heap_, alignment, bytes);
    if (p == nullptr) detail::alloc_failed("brisk::heap_resource", bytes, alignment);
    return p;
  }
  void do_deallocate(void *p, std::size_t bytes, std::size_t) override { brisk_free_sized(p, bytes); }
  bool do_is_equal(const std::pmr::memory_resource &other) const noexcept override {
    if (this == &other || &other == &detail::marker<heap_resource>()) return true;
    return heap_ != nullptr && detail::is_kind<heap_resource>(other) &&
           static_cast<const heap_resource &>(other).heap_ == heap_;
  }

 private:
  brisk_heap_t *heap_;
  bool owned_;
};

class session_arena : public std::pmr::memory_resource {
 public:
  explicit session_arena(std::size_t initial_bytes = 64 * 1024) : heap_(brisk_heap_new()) {
    if (heap_ == nullptr) detail::create_failed("brisk::session_arena");
    arena_ = brisk_arena_new(heap_, initial_bytes);
    if (arena_ == nullptr) {
      brisk_heap_destroy(heap_);
      detail::create_failed("brisk::session_arena");
    }
  }
  session_arena(const session_arena &) = delete;
  session_arena &operator=(const session_arena &) = delete;
  // Takes other's heap and arena; other is left empty.
  session_arena(session_arena &&other) noexcept : heap_(other.heap_), arena_(other.arena_) {
    other.heap_ = nullptr;
    other.arena_ = nullptr;
  }
  // Releases this session's heap (all it handed out), then takes other's;
  // other is left empty.
  session_arena &operator=(session_arena &&other) noexcept {
    if (this != &other) {
      brisk_heap_destroy(heap_);
      heap_ = other.heap_;
      arena_ = other.arena_;
      other.heap_ = nullptr;
      other.arena_ = nullptr;
    }
    return *this;
  }
  // The arena and all it handed out live in the session's heap: one call
  // returns them all (none when empty).
  ~session_arena() override { brisk_heap_destroy(heap_); }

  // Forget every allocation; keep the first buffer for the next session.
  // Nothing to do when empty.
  void release() noexcept {
    if (arena_ != nullptr) brisk_arena_reset(arena_);
  }

  // nullptr when empty (moved from).
  brisk_heap_t *heap() const noexcept { return heap_; }
  brisk_arena_t *arena() const noexcept { return arena_; }

 protected:
  void *do_allocate(std::size_t bytes, std::size_t alignment) override {
    if (__builtin_expect(arena_ == nullptr, 0))
      detail::alloc_failed("brisk::session_arena", bytes, alignment, "empty (moved from)");
    void *p = brisk_arena_alloc(arena_, bytes, alignment);
    if (p == nullptr) detail::alloc_failed("brisk::session_arena", bytes, alignment);
    return p;
  }
  void do_deallocate(void *, std::size_t, std::size_t) override {}
  bool do_is_equal(const std::pmr::memory_resource &other) const noexcept override { return this == &other; }

 private:
  brisk_heap_t *heap_;
  brisk_arena_t *arena_;
};

namespace detail {
class malloc_resource final : public std::pmr::memory_resource {
 protected:
  void *do_allocate(std::size_t bytes, std::size_t alignment) override {
    void *p = alignment <= min_alignment ? brisk_malloc(bytes) : brisk_aligned_alloc(alignment, bytes);
    if (p == nullptr) alloc_failed("brisk::default_resource()", bytes, alignment);
    return p;
  }
  void do_deallocate(void *p, std::size_t bytes, std::size_t) override { brisk_free_sized(p, bytes); }
  bool do_is_equal(const std::pmr::memory_resource &other) const noexcept override {
    if (this == &other || &other == &marker<malloc_resource>()) return true;
    return is_kind<malloc_resource>(other);
  }
};
}  // namespace detail

// A resource over brisk's global malloc; usable from every thread.
inline std::pmr::memory_resource *default_resource() noexcept {
  static detail::malloc_resource resource;
  return &resource;
}

}  // namespace brisk

#endif  // BRISK_PMR_HPP
