/* C++ operator new and delete in every form (plain, array, nothrow,
 * sized, aligned), defined here under their mangled names so that they
 * share the inline fast paths of malloc and free. When memory runs out they
 * go to new_handler.cpp, which calls the std::new_handler and throws
 * std::bad_alloc (this file is built with unwind tables, so the exception
 * passes through it). */
#include <stddef.h>

#include "alloc/alloc.h"
#include "alloc/entry.h"

#define BRISK_EXPORT __attribute__((visibility("default")))

/* new_handler.cpp: the slow loop of the standard's operator new. */
BRISK_INTERNAL void *brisk_new_retry(size_t size, size_t alignment, int nothrow);

static inline void *new_plain(size_t size) {
  void *p = entry_malloc(size);
  if (BRISK_LIKELY(p != NULL)) return p;
  return brisk_new_retry(size, 0, 0);
}

static inline void *new_nothrow(size_t size) {
  void *p = entry_malloc(size);
  if (BRISK_LIKELY(p != NULL)) return p;
  return brisk_new_retry(size, 0, 1);
}

static inline void *new_aligned(size_t size, size_t alignment, int nothrow) {
  void *p = entry_aligned(alignment, size);
  if (BRISK_LIKELY(p != NULL)) return p;
  return brisk_new_retry(size, alignment, nothrow);
}

static inline void *marked(void *p, enum alloc_kind kind) {
  if (BRISK_HARDENED) hardened_mark(p, kind);
  return p;
}

/* operator new / new[] */
BRISK_EXPORT void *_Znwm(size_t size) { return marked(new_plain(size), KIND_NEW); }
BRISK_EXPORT void *_Znam(size_t size) { return marked(new_plain(size), KIND_NEW_ARRAY); }
BRISK_EXPORT void *_ZnwmRKSt9nothrow_t(size_t size, const void *tag) {
  return marked(new_nothrow(size), KIND_NEW);
}
BRISK_EXPORT void *_ZnamRKSt9nothrow_t(size_t size, const void *tag) {
  return marked(new_nothrow(size), KIND_NEW_ARRAY);
}
BRISK_EXPORT void *_ZnwmSt11align_val_t(size_t size, size_t al) {
  return marked(new_aligned(size, al, 0), KIND_NEW);
}
BRISK_EXPORT void *_ZnamSt11align_val_t(size_t size, size_t al) {
  return marked(new_aligned(size, al, 0), KIND_NEW_ARRAY);
}
BRISK_EXPORT void *_ZnwmSt11align_val_tRKSt9nothrow_t(size_t size, size_t al, const void *tag) {
  return marked(new_aligned(size, al, 1), KIND_NEW);
}
BRISK_EXPORT void *_ZnamSt11align_val_tRKSt9nothrow_t(size_t size, size_t al, const void *tag) {
  return marked(new_aligned(size, al, 1), KIND_NEW_ARRAY);
}

/* operator delete / delete[]: every form frees through the same path; the
 * hardened build checks the form against the new that made the block, and
 * the size of the sized forms. */
BRISK_EXPORT void _ZdlPv(void *p) { entry_free(p, FN_DELETE); }
BRISK_EXPORT void _ZdaPv(void *p) { entry_free(p, FN_DELETE_ARRAY); }
BRISK_EXPORT void _ZdlPvm(void *p, size_t size) { entry_free_sized(p, size, 0, FN_DELETE_SIZED); }
BRISK_EXPORT void _ZdaPvm(void *p, size_t size) {
  entry_free_sized(p, size, 0, FN_DELETE_ARRAY_SIZED);
}
BRISK_EXPORT void _ZdlPvSt11align_val_t(void *p, size_t al) { entry_free(p, FN_DELETE); }
BRISK_EXPORT void _ZdaPvSt11align_val_t(void *p, size_t al) { entry_free(p, FN_DELETE_ARRAY); }
BRISK_EXPORT void _ZdlPvmSt11align_val_t(void *p, size_t size, size_t al) {
  entry_free_sized(p, size, al, FN_DELETE_SIZED);
}
BRISK_EXPORT void _ZdaPvmSt11align_val_t(void *p, size_t size, size_t al) {
  entry_free_sized(p, size, al, FN_DELETE_ARRAY_SIZED);
}
BRISK_EXPORT void _ZdlPvRKSt9nothrow_t(void *p, const void *tag) { entry_free(p, FN_DELETE); }
BRISK_EXPORT void _ZdaPvRKSt9nothrow_t(void *p, const void *tag) { entry_free(p, FN_DELETE_ARRAY); }
BRISK_EXPORT void _ZdlPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al, const void *tag) {
  entry_free(p, FN_DELETE);
}
BRISK_EXPORT void _ZdaPvSt11align_val_tRKSt9nothrow_t(void *p, size_t al, const void *tag) {
  entry_free(p, FN_DELETE_ARRAY);
}
