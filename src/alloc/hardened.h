/* Checks of the hardened build (libbrisk-hardened.so): how each block was
 * allocated (malloc, operator new, operator new[]) against how it is
 * released, and the size given to a sized release. In the default build
 * BRISK_HARDENED is 0 and the callers' `if (BRISK_HARDENED)` removes them. */
#ifndef BRISK_HARDENED_H
#define BRISK_HARDENED_H

#include <stdbool.h>
#include <stddef.h>

#include "alloc/free.h"
#include "base/atomics.h"
#include "segments/layout.h"
#include "segments/registry.h"

enum alloc_kind { KIND_MALLOC = 0, KIND_NEW = 1, KIND_NEW_ARRAY = 2 };

/* The kind byte of the block at p in the segment's table (a huge block's
 * in its page), and its page; NULL when brisk keeps none for it (not a
 * block of an in-use span, memory brisk gave back, a segment without the
 * table). */
BRISK_INLINE uint8_t *hardened_kind_entry(segment_t *seg, const void *p, page_t **pg_out) {
  uintptr_t a = (uintptr_t)p;
  if (seg == NULL || seg->kind == SEGMENT_RETIRED) return NULL;
  page_t *pg = page_of(seg, a);
  if (!(pg->flags & PAGE_IN_USE) || a < (uintptr_t)pg->start) return NULL;
  *pg_out = pg;
  if (pg->flags & PAGE_HUGE) return &pg->alloc_kind;
  if (seg->kinds == NULL) return NULL;
  return &seg->kinds[(a - (uintptr_t)seg) >> 4];
}

/* A page whose alloc_kind is 0 never handed out a block of operator new or
 * new[] in its span's life (hardened_mark sets it first): all its blocks
 * are malloc's, and their kind is read here instead of in the table, which
 * a release would otherwise touch once per block (a cache miss of its own
 * on most). */
static const uint8_t hardened_malloc_kind = KIND_MALLOC; /* known here: free's check folds it */

/* The kind of the block at p, as hardened_kind_entry finds it, or
 * hardened_malloc_kind for a page that has only malloc's blocks. Inline:
 * free's check reads it first. hardened_kind_slot_at: the same with p's
 * segment looked up already (registry_lookup, bounds-checked). */
BRISK_INLINE const uint8_t *hardened_kind_slot_at(segment_t *seg, const void *p, page_t **pg_out) {
  const uint8_t *entry = hardened_kind_entry(seg, p, pg_out);
  if (entry != NULL && !((*pg_out)->flags & PAGE_HUGE) && field_load_relaxed(&(*pg_out)->alloc_kind) == 0)
    return &hardened_malloc_kind;
  return entry;
}
BRISK_INLINE const uint8_t *hardened_kind_slot(const void *p, page_t **pg_out) {
  return hardened_kind_slot_at(registry_lookup((uintptr_t)p), p, pg_out);
}

/* Record that p (just allocated) came from operator new or new[]. */
BRISK_INTERNAL void hardened_mark(void *p, enum alloc_kind kind);
/* May p be released through fn (with `size` when sized, rounded up to
 * `alignment`)? Reports and returns false when not; on success the block's
 * kind is reset for its next life. */
BRISK_INTERNAL bool hardened_release_ok(void *p, brisk_fn_t fn, bool sized, size_t size,
                                        size_t alignment) BRISK_NOINLINE;

/* The hardened build's check of a release through fn, inline for its
 * common case: free (or any release that expects malloc's kind, unsized)
 * of a block whose kind byte says malloc, or that has none. That is
 * exactly when hardened_release_ok would find nothing to report and
 * nothing to reset; everything else takes it. fn is a constant at every
 * call site. */
BRISK_INLINE bool hardened_release_checked(void *p, segment_t *seg, brisk_fn_t fn) {
  if (fn != FN_DELETE && fn != FN_DELETE_ARRAY) {
    page_t *pg;
    const uint8_t *slot = hardened_kind_slot_at(seg, p, &pg);
    if (BRISK_LIKELY(slot == NULL || *slot == KIND_MALLOC)) return true;
  }
  return hardened_release_ok(p, fn, false, 0, 0);
}

/* A release through fn: the hardened build first checks how the block was
 * allocated against fn, with the segment it looked up for that (bounds
 * checked: a pointer past the registry, or NULL, takes free_raw's way).
 * Its common case, free of a block whose span never held a block of new
 * (where that check could find nothing to report), needs no more than the
 * span's flag; any other release goes through hardened_release_checked
 * first. */
BRISK_INTERNAL void free_hardened_checked(void *p, segment_t *seg, brisk_fn_t fn) BRISK_NOINLINE;

#endif
