#include "alloc/alloc.h"

#include <errno.h>
#include <string.h>

#include "alloc/alloc_inline.h"
#include "guarded/guarded.h"
#include "heaps/large_keep.h"
#include "os/checker.h"
#include "runtime/report.h"
#include "segments/huge.h"

static heap_t *heap_or_init(void) {
  heap_t *h = thread_heap();
  if (BRISK_UNLIKELY(h->kind == HEAP_KIND_STATIC)) h = thread_heap_init();
  return h;
}

void *alloc_aligned(size_t alignment, size_t size) {
  if (alignment <= 16) return malloc_inline(size);
  heap_t *h = heap_or_init();
  if (h == NULL) {
    errno = ENOMEM;
    return NULL;
  }
  return heap_alloc_aligned(h, alignment, size);
}

void *alloc_calloc(size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  void *p = malloc_inline(total);
  if (p == NULL) return NULL;
  if (total > MEDIUM_MAX) {
    /* Large and huge blocks fresh from the OS are zero already. */
    segment_t *seg = registry_lookup((uintptr_t)p);
    page_t *pg = page_of(seg, (uintptr_t)p);
    if (pg->flags & PAGE_ZERO) return p;
  }
  memset(p, 0, total);
  return p;
}

/* The page whose blocks' extent holds p, or NULL. */
static page_t *owning_page(const void *p) {
  uintptr_t a = (uintptr_t)p;
  segment_t *seg = registry_lookup(a);
  if (seg == NULL) return NULL;
  if (a - (uintptr_t)seg >= field_load_relaxed(&seg->mapped_size)) return NULL;
  page_t *pg = page_of(seg, a);
  if (!(pg->flags & PAGE_IN_USE)) return NULL;
  uintptr_t start = (uintptr_t)pg->start;
  size_t extent = (pg->flags & PAGE_HUGE) ? pg->span_bytes
                 : (pg->flags & PAGE_LARGE) ? pg->block_size
                                            : (size_t)pg->capacity * pg->block_size;
  return a >= start && a - start < extent ? pg : NULL;
}

bool alloc_owns(const void *p) { return owning_page(p) != NULL; }

void *alloc_block_of(const void *p) {
  page_t *pg = owning_page(p);
  if (pg == NULL) return NULL;
  if (pg->flags & (PAGE_LARGE | PAGE_HUGE)) return pg->start;
  size_t off = (size_t)((uintptr_t)p - (uintptr_t)pg->start);
  return pg->start + off / pg->block_size * pg->block_size;
}

/* A new block from `target`, or from the calling thread's heap (NULL). */
static void *alloc_in(heap_t *target, size_t size) {
  return target != NULL ? heap_alloc(target, size) : malloc_inline(size);
}

/* A new block for p's first min(usable, size) bytes, copied: `want`
 * bytes, or `size` when those are not to be had. NULL when the OS has no
 * memory (p stays valid); the caller frees p. */
static void *realloc_copy(heap_t *target, const void *p, size_t usable, size_t size, size_t want) {
  void *q = alloc_in(target, want);
  if (q == NULL && want != size) q = alloc_in(target, size);
  if (q != NULL) memcpy(q, p, usable < size ? usable : size);
  return q;
}

static void *realloc_move(heap_t *target, void *p, size_t usable, size_t size, size_t want,
                          brisk_fn_t fn) {
  void *q = realloc_copy(target, p, usable, size, want);
  if (q != NULL) free_inline(p, fn);
  return q;
}

/* Shrinking keeps a block unless that would waste more than half of it. */
static bool realloc_keeps(size_t usable, size_t size) {
  return size <= usable && (size >= usable / 2 || usable <= REALLOC_KEEP_SMALL);
}

/* What a block of `usable` bytes moved for `size` is given: a block above
 * REALLOC_GROW_MIN grows by a step, so that a run of small appends moves it
 * rarely. */
static size_t realloc_want(size_t usable, size_t size) {
  size_t step = usable / REALLOC_GROW_STEP;
  return size > usable && size > REALLOC_GROW_MIN && size < usable + step ? usable + step : size;
}

void *alloc_realloc(void *p, size_t size, brisk_fn_t fn) {
  return alloc_realloc_in(NULL, p, size, fn);
}

/* The page of p if free's fast path would take p as it is: a block of one
 * of the calling thread's class pages, at the start of a block handed out,
 * and not (probably) free. NULL for anything else (large and huge blocks
 * included), which takes every check. */
BRISK_INLINE page_t *realloc_local_page(void *p) {
  uintptr_t a = (uintptr_t)p;
  segment_t *seg = registry_lookup_wrapped(a);
  if (seg == NULL || atomic_load_relaxed(&seg->owner_tid) != os_thread_id()) return NULL;
  page_t *pg = page_of(seg, a);
  if (pg->flags & (PAGE_LARGE | PAGE_HUGE)) return NULL;
  return local_block_ok(pg, (const block_t *)p, page_block_index(pg, a - (uintptr_t)pg->start)) ? pg : NULL;
}

/* realloc of a block of the calling thread's class page pg (realloc_local_page). */
static void *realloc_local(heap_t *target, page_t *pg, void *p, size_t size, brisk_fn_t fn) {
  size_t usable = pg->block_size;
  if (realloc_keeps(usable, size)) return p;
  void *q = realloc_copy(target, p, usable, size, realloc_want(usable, size));
  if (q == NULL) return NULL;
  /* The allocation left p's page in use (p counts in it) and p untouched:
   * free's fast path would still take it, but for the hardened build's
   * check of how it was allocated. */
  if (BRISK_HARDENED) free_inline(p, fn);
  else free_local(pg, (block_t *)p);
  return q;
}

void *alloc_realloc_in(heap_t *target, void *p, size_t size, brisk_fn_t fn) {
  if (p == NULL) return alloc_in(target, size);
  brisk_fn_t free_fn = fn == FN_REALLOC ? FN_REALLOC : FN_BRISK_REALLOC;
  if (size == 0) {
    free_inline(p, free_fn);
    return NULL;
  }
  page_t *local = realloc_local_page(p);
  if (BRISK_LIKELY(local != NULL)) return realloc_local(target, local, p, size, fn);
  segment_t *seg;
  page_t *pg = block_check(p, fn, &seg);
  if (pg == NULL) {
    if (seg != NULL) return NULL; /* reported */
    if (guarded_owns(p)) { /* a guarded sample moves to an ordinary block */
      size_t g = guarded_usable_size(p, fn_name(fn));
      if (g == 0) return NULL; /* reported */
      void *q = realloc_copy(target, p, g, size, size);
      if (q != NULL) guarded_free(p, fn_name(fn));
      return q;
    }
    size_t n = foreign_usable_size(p);
    if (n == 0) {
      report_error("%s(%p): pointer was not allocated by brisk", fn_name(fn), p);
      return NULL;
    }
    void *q = realloc_copy(target, p, n, size, size);
    if (q != NULL) foreign_free(p);
    return q;
  }
  if (atomic_load_relaxed(&seg->owner_tid) == os_thread_id() && block_is_free_here(pg, p)) {
    report_error("%s(%p): double free (size class %zu)", fn_name(fn), p, page_usable_size(pg));
    return NULL;
  }
  size_t usable = page_usable_size(pg);
  if (pg->flags & PAGE_HUGE) {
    if (size > LARGE_MAX && huge_try_resize(pg, size)) return p;
    return realloc_move(target, p, usable, size, size, fn);
  }
  if (realloc_keeps(usable, size)) return p;
  if (size > usable && (pg->flags & PAGE_LARGE) && size <= LARGE_MAX &&
      atomic_load_relaxed(&seg->owner_tid) == os_thread_id()) {
    /* In place: into the rest of its span, or into free slices after it. */
    heap_t *h = atomic_load_explicit(&seg->heap, memory_order_relaxed);
    if (size <= pg->span_bytes || large_keep_grow(h, pg, large_slices(size))) {
      span_large_resize(&h->segments, pg, size);
      return p;
    }
  }
  return realloc_move(target, p, usable, size, realloc_want(usable, size), fn);
}

void alloc_stats_sync(void) {
  heap_t *h = thread_heap();
  if (h->kind != HEAP_KIND_STATIC) heap_stats_publish(h);
}

void alloc_collect(bool force) {
  heap_t *h = thread_heap();
  checker_quiet_begin();
  if (h->kind != HEAP_KIND_STATIC) heap_collect(h, force);
  heaps_abandoned_give_back(force);
  segments_maintain(os_now_ms(), force);
  checker_quiet_end();
}

/* ---------------------------------------------------------------------------
 * The calls around allocation of brisk.h: sizes, in-place resizing, zeroed
 * blocks.
 * ------------------------------------------------------------------------- */

size_t alloc_good_size(size_t size) {
  /* heap_alloc's choice, with the functions that size each kind of block. */
  if (size <= MEDIUM_MAX) return class_size(size_to_class(size));
  if (size <= LARGE_MAX) return large_usable_size(size);
  if (size > SIZE_MAX - SLICE_SIZE - SEGMENT_SIZE) return 0; /* huge_alloc refuses it */
  return huge_usable_size(size);
}

size_t alloc_block_size(const void *p) {
  if (BRISK_UNLIKELY(guarded_owns(p))) return guarded_usable_size(p, "brisk_usable_size");
  segment_t *seg = registry_lookup((uintptr_t)p);
  return page_usable_size(page_of(seg, (uintptr_t)p));
}

bool alloc_is_fresh(const void *p, size_t n) {
  if (n <= MEDIUM_MAX) return false; /* blocks of size classes are reused */
  segment_t *seg = registry_lookup((uintptr_t)p);
  return (page_of(seg, (uintptr_t)p)->flags & PAGE_ZERO) != 0;
}

void *alloc_zalloc(size_t size) {
  void *p = malloc_inline(size);
  if (p == NULL) return NULL;
  size_t usable = alloc_block_size(p);
  if (!alloc_is_fresh(p, usable)) memset(p, 0, usable);
  return p;
}

void *alloc_expand(void *p, size_t size) {
  if (p == NULL) return NULL;
  segment_t *seg;
  page_t *pg = block_check(p, FN_BRISK_EXPAND, &seg);
  if (pg == NULL) {
    if (seg == NULL && guarded_owns(p)) { /* a guarded sample keeps its size */
      size_t g = guarded_usable_size(p, fn_name(FN_BRISK_EXPAND));
      return g != 0 && size <= g ? p : NULL;
    }
    /* glibc's block: valid, but brisk cannot resize it */
    if (seg == NULL && foreign_usable_size(p) == 0)
      report_error("%s(%p): pointer was not allocated by brisk", fn_name(FN_BRISK_EXPAND), p);
    return NULL;
  }
  bool mine = atomic_load_relaxed(&seg->owner_tid) == os_thread_id();
  if (mine && block_is_free_here(pg, p)) {
    report_error("%s(%p): double free (size class %zu)", fn_name(FN_BRISK_EXPAND), p, page_usable_size(pg));
    return NULL;
  }
  if ((pg->flags & PAGE_HUGE) && size > LARGE_MAX) return huge_try_resize(pg, size) ? p : NULL;
  if (size <= page_usable_size(pg)) return p;
  /* A large block grows into the rest of its span or into the free slices
   * after it: its owner only (the slices and descriptors of a segment are
   * the owner's), as realloc does. */
  if ((pg->flags & PAGE_LARGE) && size <= LARGE_MAX && mine) {
    heap_t *h = atomic_load_explicit(&seg->heap, memory_order_relaxed);
    if (size <= pg->span_bytes || large_keep_grow(h, pg, large_slices(size))) {
      span_large_resize(&h->segments, pg, size);
      return p;
    }
  }
  return NULL;
}

void *alloc_rezalloc(void *p, size_t size) {
  if (p == NULL) return alloc_zalloc(size);
  if (size == 0) {
    free_inline(p, FN_BRISK_REZALLOC);
    return NULL;
  }
  segment_t *seg;
  size_t old;
  page_t *pg = block_check(p, FN_BRISK_REZALLOC, &seg);
  if (pg != NULL) {
    old = page_usable_size(pg);
  } else {
    if (seg != NULL) return NULL; /* reported */
    old = guarded_owns(p) ? guarded_usable_size(p, fn_name(FN_BRISK_REZALLOC)) : foreign_usable_size(p);
    if (old == 0) {
      report_error("%s(%p): pointer was not allocated by brisk", fn_name(FN_BRISK_REZALLOC), p);
      return NULL;
    }
  }
  void *q = alloc_realloc(p, size, FN_BRISK_REZALLOC);
  if (q == NULL) return NULL;
  size_t usable = alloc_block_size(q);
  /* What realloc did not bring over: beyond the old usable size when the
   * block stayed, beyond the bytes it copied when it moved. */
  size_t from = q == p ? old : old < size ? old : size;
  if (usable > from && !(q != p && alloc_is_fresh(q, usable))) memset((uint8_t *)q + from, 0, usable - from);
  return q;
}

