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
#ifndef BRISK_PMR_HPP
#define BRISK_PMR_HPP

#include <cstddef>
#include <memory_resource>
#include <new>

#include "brisk.h"

namespace brisk {

class heap_resource : public std::pmr::memory_resource {
 public:
  // Owns a new heap; destroying the resource releases every block at once.
  heap_resource() : heap_(brisk_heap_new()), owned_(true) {
    if (heap_ == nullptr) throw std::bad_alloc();
  }
  // Borrows a heap that outlives the resource.
  explicit heap_resource(brisk_heap_t *heap) noexcept : heap_(heap), owned_(false) {}
  heap_resource(const heap_resource &) = delete;
  heap_resource &operator=(const heap_resource &) = delete;
  ~heap_resource() override {
    if (owned_) brisk_heap_destroy(heap_);
  }

  brisk_heap_t *heap() const noexcept { return heap_; }

 protected:
  void *do_allocate(std::size_t bytes, std::size_t alignment) override {
    void *p = alignment <= 16 ? brisk_heap_malloc(heap_, bytes)
                              : brisk_heap_aligned_alloc(heap_, alignment, bytes);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  void do_deallocate(void *p, std::size_t bytes, std::size_t) override {
    brisk_free_sized(p, bytes);
  }
  bool do_is_equal(const std::pmr::memory_resource &other) const noexcept override {
    auto *o = dynamic_cast<const heap_resource *>(&other);
    return o != nullptr && o->heap_ == heap_;
  }

 private:
  brisk_heap_t *heap_;
  bool owned_;
};

class session_arena : public std::pmr::memory_resource {
 public:
  explicit session_arena(std::size_t initial_bytes = 64 * 1024) : heap_(brisk_heap_new()) {
    if (heap_ == nullptr) throw std::bad_alloc();
    arena_ = brisk_arena_new(heap_, initial_bytes);
    if (arena_ == nullptr) {
      brisk_heap_destroy(heap_);
      throw std::bad_alloc();
    }
  }
  session_arena(const session_arena &) = delete;
  session_arena &operator=(const session_arena &) = delete;
  // The arena and all it handed out live in the session's heap: one call
  // returns them all.
  ~session_arena() override { brisk_heap_destroy(heap_); }

  // Forget every allocation; keep the first buffer for the next session.
  void release() noexcept { brisk_arena_reset(arena_); }

  brisk_heap_t *heap() const noexcept { return heap_; }
  brisk_arena_t *arena() const noexcept { return arena_; }

 protected:
  void *do_allocate(std::size_t bytes, std::size_t alignment) override {
    void *p = brisk_arena_alloc(arena_, bytes, alignment);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  void do_deallocate(void *, std::size_t, std::size_t) override {}
  bool do_is_equal(const std::pmr::memory_resource &other) const noexcept override {
    return this == &other;
  }

 private:
  brisk_heap_t *heap_;
  brisk_arena_t *arena_;
};

namespace detail {
class malloc_resource final : public std::pmr::memory_resource {
 protected:
  void *do_allocate(std::size_t bytes, std::size_t alignment) override {
    void *p = alignment <= 16 ? brisk_malloc(bytes) : brisk_aligned_alloc(alignment, bytes);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  void do_deallocate(void *p, std::size_t bytes, std::size_t) override {
    brisk_free_sized(p, bytes);
  }
  bool do_is_equal(const std::pmr::memory_resource &other) const noexcept override {
    return dynamic_cast<const malloc_resource *>(&other) != nullptr;
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
