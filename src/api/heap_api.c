/* First-class heaps: the public face of heap_t (include/brisk.h). */
#include <errno.h>
#include <string.h>

#include "brisk.h"

#include "alloc/alloc.h"
#include "alloc/entry.h"
#include "alloc/visit.h"
#include "runtime/report.h"

#define BRISK_EXPORT __attribute__((visibility("default")))

static heap_t *heap_of(brisk_heap_t *heap) { return (heap_t *)heap; }

/* A heap from brisk_heap_new that is alive, else reported. */
static bool heap_valid(heap_t *h, const char *fn) {
  if (h == NULL || h->kind != HEAP_KIND_USER) {
    report_error("%s(%p): not a heap made by brisk_heap_new", fn, (void *)h);
    return false;
  }
  if (atomic_load_explicit(&h->state, memory_order_acquire) != HEAP_OWNED) {
    report_error("%s(%p): the heap was destroyed", fn, (void *)h);
    return false;
  }
  return true;
}

/* Valid and owned by the calling thread. */
static bool heap_usable(heap_t *h, const char *fn) {
  if (!heap_valid(h, fn)) return false;
  uintptr_t tid = field_load_relaxed(&h->tid);
  if (tid != os_thread_id()) {
    if (heap_visited_here(h, os_thread_id()))
      report_error("%s(%p): the heap is being visited (brisk_heap_visit): it allocates again once the "
                   "walk has ended", fn, (void *)h);
    else
      report_error("%s(%p): the heap allocates only on the thread that created it", fn, (void *)h);
    return false;
  }
  return true;
}

/* Valid and owned by the calling thread, which may be visiting it: for
 * the calls that only look at the heap. */
static bool heap_viewable(heap_t *h, const char *fn) {
  if (!heap_valid(h, fn)) return false;
  uintptr_t me = os_thread_id();
  if (field_load_relaxed(&h->tid) != me && !heap_visited_here(h, me)) {
    report_error("%s(%p): the heap can be looked at only on the thread that created it", fn, (void *)h);
    return false;
  }
  return true;
}

BRISK_EXPORT brisk_heap_t *brisk_heap_new(void) {
  process_init();
  heap_t *h = heap_create(HEAP_KIND_USER, os_thread_id());
  if (h == NULL) errno = ENOMEM;
  return (brisk_heap_t *)h;
}

BRISK_EXPORT void brisk_heap_destroy(brisk_heap_t *heap) {
  heap_t *h = heap_of(heap);
  if (heap == NULL) return;
  if (!heap_valid(h, "brisk_heap_destroy")) return;
  if (field_load_relaxed(&h->tid) == HEAP_TID_VISITING) {
    report_error("brisk_heap_destroy(%p): the heap is being visited (brisk_heap_visit)", (void *)h);
    return;
  }
  entry_heap_destroy(h);
}

static inline void *heap_malloc_named(brisk_heap_t *heap, size_t size, const char *fn) {
  heap_t *h = heap_of(heap);
  if (BRISK_UNLIKELY(h == NULL || h->tid != os_thread_id() ||
                     atomic_load_relaxed(&h->state) != HEAP_OWNED)) {
    if (!heap_usable(h, fn)) {
      errno = EINVAL;
      return NULL;
    }
  }
  if (BRISK_TRACK) return entry_heap_alloc(h, size, 0);
  if (BRISK_LIKELY(size <= DIRECT_MAX)) {
    page_t *pg = h->direct[(size + 15) >> 4];
    block_t *b = page_pop(pg);
    if (BRISK_LIKELY(b != NULL)) return b;
    b = page_refill_pop(h, pg);
    if (b != NULL) return b;
  }
  return heap_alloc(h, size);
}

BRISK_EXPORT void *brisk_heap_malloc(brisk_heap_t *heap, size_t size) {
  return heap_malloc_named(heap, size, "brisk_heap_malloc");
}

/* Zero the first n bytes of a new block of n bytes or more, unless it is a
 * large or huge block on memory fresh from the OS. */
static void *zero_new_block(void *p, size_t n) {
  if (p != NULL && (BRISK_TRACK || !alloc_is_fresh(p, n))) memset(p, 0, n);
  return p;
}

BRISK_EXPORT void *brisk_heap_calloc(brisk_heap_t *heap, size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return zero_new_block(heap_malloc_named(heap, total, "brisk_heap_calloc"), total);
}

BRISK_EXPORT void *brisk_heap_zalloc(brisk_heap_t *heap, size_t size) {
  void *p = heap_malloc_named(heap, size, "brisk_heap_zalloc");
  /* The whole usable size: brisk_rezalloc zeroes only what lies beyond it. */
  return p ? zero_new_block(p, entry_usable_size(p, FN_BRISK_USABLE_SIZE)) : NULL;
}

BRISK_EXPORT void *brisk_heap_aligned_alloc(brisk_heap_t *heap, size_t alignment, size_t size) {
  heap_t *h = heap_of(heap);
  if (!heap_usable(h, "brisk_heap_aligned_alloc")) {
    errno = EINVAL;
    return NULL;
  }
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    errno = EINVAL;
    return NULL;
  }
  if (alignment <= 16) return brisk_heap_malloc(heap, size);
  return entry_heap_alloc(h, size, alignment);
}

BRISK_EXPORT void *brisk_heap_realloc(brisk_heap_t *heap, void *p, size_t size) {
  if (!heap_usable(heap_of(heap), "brisk_heap_realloc")) {
    errno = EINVAL;
    return NULL;
  }
  return entry_realloc(heap_of(heap), p, size, FN_BRISK_REALLOC);
}

BRISK_EXPORT size_t brisk_heap_stats_json(brisk_heap_t *heap, char *buf, size_t len) {
  heap_t *h = heap_of(heap);
  if (!heap_viewable(h, "brisk_heap_stats_json")) {
    if (buf && len) buf[0] = '\0';
    return 0;
  }
  return heap_stats_json(h, buf, len);
}

BRISK_EXPORT int brisk_heap_visit(brisk_heap_t *heap, brisk_block_visitor_t visitor, void *arg) {
  heap_t *h = heap_of(heap);
  if (!heap_viewable(h, "brisk_heap_visit")) {
    errno = EINVAL;
    return -1;
  }
  if (visitor == NULL) {
    report_error("brisk_heap_visit(%p): no visitor function (NULL)", (void *)h);
    errno = EINVAL;
    return -1;
  }
  if (field_load_relaxed(&h->tid) == HEAP_TID_VISITING) {
    report_error("brisk_heap_visit(%p): the heap is being visited already", (void *)h);
    errno = EINVAL;
    return -1;
  }
  return heap_visit(h, visitor, arg);
}

BRISK_EXPORT int brisk_heap_contains(brisk_heap_t *heap, const void *p) {
  heap_t *h = heap_of(heap);
  if (!heap_viewable(h, "brisk_heap_contains")) return 0;
  return heap_contains(h, p) ? 1 : 0;
}
