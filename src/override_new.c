/* C++ operator new and delete in every form (plain, array, nothrow,
 * sized, aligned), defined here under their mangled names so that they
 * share the inline fast paths of malloc and free. When memory runs out they
 * go to new_handler.cpp, which calls the std::new_handler and throws
 * std::bad_alloc (this file is built with unwind tables, so the exception
 * passes through it). */
#include <stddef.h>

#include "alloc.h"
#include "alloc_inline.h"

#define BRISK_EXPORT __attribute__((visibility("default")))

/* new_handler.cpp: the slow loop of the standard's operator new. */
BRISK_INTERNAL void *brisk_new_retry(size_t size, size_t alignment, int nothrow);

static inline void *new_plain(size_t size) {
  void *p = malloc_inline(size);
  if (BRISK_LIKELY(p != NULL)) return p;
  return brisk_new_retry(size, 0, 0);
}

static inline void *new_nothrow(size_t size) {
  void *p = malloc_inline(size);
  if (BRISK_LIKELY(p != NULL)) return p;
  return brisk_new_retry(size, 0, 1);
}

static inline void *new_aligned(size_t size, size_t alignment, int nothrow) {
  void *p = alloc_aligned(alignment, size);
  if (BRISK_LIKELY(p != NULL)) return p;
  return brisk_new_retry(size, alignment, nothrow);
}

/* operator new / new[] */
BRISK_EXPORT void *_Znwm(size_t size) { return new_plain(size); }
BRISK_EXPORT void *_Znam(size_t size) { return new_plain(size); }
BRISK_EXPORT void *_ZnwmRKSt9nothrow_t(size_t size, const void *tag) { return new_nothrow(size); }
BRISK_EXPORT void *_ZnamRKSt9nothrow_t(size_t size, const void *tag) { return new_nothrow(size); }
BRISK_EXPORT void *_ZnwmSt11align_val_t(size_t size, size_t al) { return new_aligned(size, al, 0); }
BRISK_EXPORT void *_ZnamSt11align_val_t(size_t size, size_t al) { return new_aligned(size, al, 0); }
BRISK_EXPORT void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t size, size_t al, const void *tag) {
  return new_aligned(size, al, 1);
}
BRISK_EXPORT void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t size, size_t al, const void *tag) {
  return new_aligned(size, al, 1);
}

/* operator delete / delete[]: every form frees through the same path. */
BRISK_EXPORT void _ZdlPv(void *p) { free_inline(p, FN_FREE); }
BRISK_EXPORT void _ZdaPv(void *p) { free_inline(p, FN_FREE); }
BRISK_EXPORT void _ZdlPvm(void *p, size_t size) { free_inline(p, FN_FREE_SIZED); }
BRISK_EXPORT void _ZdaPvm(void *p, size_t size) { free_inline(p, FN_FREE_SIZED); }
BRISK_EXPORT void _ZdlPvSt11align_val_t(void *p, size_t al) { free_inline(p, FN_FREE); }
BRISK_EXPORT void _ZdaPvSt11align_val_t(void *p, size_t al) { free_inline(p, FN_FREE); }
BRISK_EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t size, size_t al) {
  free_inline(p, FN_FREE_SIZED);
}
BRISK_EXPORT void _ZdaPvmSt11align_val_t(void *p, size_t size, size_t al) {
  free_inline(p, FN_FREE_SIZED);
}
BRISK_EXPORT void _ZdlPvRKSt9nothrow_t(void *p, const void *tag) { free_inline(p, FN_FREE); }
BRISK_EXPORT void _ZdaPvRKSt9nothrow_t(void *p, const void *tag) { free_inline(p, FN_FREE); }
BRISK_EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al, const void *tag) {
  free_inline(p, FN_FREE);
}
BRISK_EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al, const void *tag) {
  free_inline(p, FN_FREE);
}
