/* The standard malloc family. Defined in libbrisk.so (and libbrisk.a), so
 * brisk becomes the process's malloc when it is preloaded or linked before
 * libc; each symbol inlines the same fast path as the prefixed API. */
#include <errno.h>
#include <malloc.h>
#include <stdlib.h>
#include <unistd.h>

#include "alloc/alloc.h"
#include "alloc/entry.h"

#define BRISK_EXPORT __attribute__((visibility("default")))

BRISK_EXPORT void *malloc(size_t size) { return entry_malloc(size); }

BRISK_EXPORT void free(void *p) { entry_free(p, FN_FREE); }

BRISK_EXPORT void *calloc(size_t count, size_t size) { return entry_calloc(count, size); }

BRISK_EXPORT void *realloc(void *p, size_t size) { return entry_realloc(NULL, p, size, FN_REALLOC); }

BRISK_EXPORT void *reallocarray(void *p, size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return entry_realloc(NULL, p, total, FN_REALLOC);
}

static bool valid_alignment(size_t alignment) {
  return alignment != 0 && (alignment & (alignment - 1)) == 0;
}

BRISK_EXPORT int posix_memalign(void **out, size_t alignment, size_t size) {
  if (!valid_alignment(alignment) || alignment % sizeof(void *) != 0) return EINVAL;
  int saved = errno;
  void *p = entry_aligned(alignment, size);
  if (p == NULL) {
    errno = saved;
    return ENOMEM;
  }
  *out = p;
  return 0;
}

BRISK_EXPORT void *aligned_alloc(size_t alignment, size_t size) {
  /* glibc accepts a size that is not a multiple of the alignment, and
   * programs rely on it. */
  if (!valid_alignment(alignment)) {
    errno = EINVAL;
    return NULL;
  }
  return entry_aligned(alignment, size);
}

BRISK_EXPORT void *memalign(size_t alignment, size_t size) {
  /* glibc rounds a bad alignment up to the next power of two. */
  if (alignment != 0 && !valid_alignment(alignment)) {
    size_t a = 16;
    while (a < alignment && a != 0) a <<= 1;
    if (a == 0) { errno = EINVAL; return NULL; }
    alignment = a;
  }
  return entry_aligned(alignment, size);
}

static size_t os_page(void) {
  static size_t page;
  if (page == 0) page = (size_t)sysconf(_SC_PAGESIZE);
  return page;
}

BRISK_EXPORT void *valloc(size_t size) { return entry_aligned(os_page(), size); }

BRISK_EXPORT void *pvalloc(size_t size) {
  size_t page = os_page();
  size_t rounded = (size + page - 1) & ~(page - 1);
  if (rounded < size) {
    errno = ENOMEM;
    return NULL;
  }
  return entry_aligned(page, rounded == 0 ? page : rounded);
}

BRISK_EXPORT size_t malloc_usable_size(void *p) { return entry_usable_size(p, FN_USABLE_SIZE); }

/* C23 */
BRISK_EXPORT void free_sized(void *p, size_t size) { entry_free_sized(p, size, 0, FN_FREE_SIZED); }
BRISK_EXPORT void free_aligned_sized(void *p, size_t alignment, size_t size) {
  entry_free_sized(p, size, alignment, FN_FREE_SIZED);
}

/* This build replaces the malloc family (free.c's weak definition says 0). */
__attribute__((visibility("hidden"))) char brisk_override_present = 1;

/* Is the `malloc` this process calls the one above? Through the GOT,
 * &malloc names whichever definition won symbol resolution. */
__attribute__((constructor)) static void override_init(void) {
  void *(*volatile resolved)(size_t) = malloc;
  extern void *brisk_override_malloc_local(size_t) __attribute__((visibility("hidden")));
  foreign_set_interposing((void *)resolved == (void *)brisk_override_malloc_local);
}
void *brisk_override_malloc_local(size_t)
    __attribute__((alias("malloc"), copy(malloc), visibility("hidden")));
