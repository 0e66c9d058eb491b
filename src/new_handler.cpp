// The failure path of operator new (override_new.c): call the installed
// std::new_handler and try again, as the standard says, or throw
// std::bad_alloc (return nullptr for the nothrow forms).
#include <new>

#include "brisk.h"

extern "C" __attribute__((visibility("hidden"))) void *brisk_new_retry(std::size_t size,
                                                                         std::size_t alignment,
                                                                         int nothrow) {
  for (;;) {
    std::new_handler handler = std::get_new_handler();
    if (handler == nullptr) {
      if (nothrow) return nullptr;
      throw std::bad_alloc();
    }
    if (nothrow) {
      try {
        handler();
      } catch (...) {
        return nullptr;
      }
    } else {
      handler();
    }
    void *p = alignment ? brisk_aligned_alloc(alignment, size) : brisk_malloc(size);
    if (p != nullptr) return p;
  }
}
