// The failure path of operator new (override_new.c): call the installed
// std::new_handler and try again, as the standard says, or throw
// std::bad_alloc (return nullptr for the nothrow forms).
//
// libbrisk.so does not link libstdc++: a C program that preloads brisk
// should not map it. The C++ runtime symbols this file uses are weak
// references instead, bound to libstdc++ in every process that has C++ code
// (the only ones that call operator new) and null elsewhere, where this code
// never runs. The personality routine is referenced by the unwind tables,
// so it is made weak with the assembler.
#include <cstddef>
#include <new>

#include "brisk.h"

asm(".weak __gxx_personality_v0");
asm(".weak __cxa_begin_catch");
asm(".weak __cxa_end_catch");
asm(".weak _Unwind_Resume");

namespace std {
new_handler get_new_handler() noexcept __attribute__((weak));
[[noreturn]] void __throw_bad_alloc() __attribute__((weak));
}  // namespace std

extern "C" void abort(void) noexcept;

extern "C" __attribute__((visibility("hidden"))) void *brisk_new_retry(std::size_t size,
                                                                         std::size_t alignment,
                                                                         int nothrow) {
  for (;;) {
    std::new_handler handler = &std::get_new_handler != nullptr ? std::get_new_handler() : nullptr;
    if (handler == nullptr) {
      if (nothrow) return nullptr;
      if (&std::__throw_bad_alloc != nullptr) std::__throw_bad_alloc();
      abort(); /* no C++ runtime to throw with: no C++ caller either */
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
