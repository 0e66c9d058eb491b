/* What every public entry point (api.c, override.c, override_new.c,
 * heap_api.c, arena.c) calls to hand out or take back a block: the core's
 * fast paths and slow entries (alloc_inline.h, alloc.h) in a default
 * build, the memory checker's layer (track.h) in a build for one. The
 * default build's code is the core's, instruction for instruction. */
#ifndef BRISK_ENTRY_H
#define BRISK_ENTRY_H

#include "alloc/alloc.h"
#include "alloc/alloc_inline.h"
#include "alloc/track.h"

#if BRISK_TRACK

BRISK_INLINE void *entry_malloc(size_t size) { return track_alloc(NULL, size, 0, false); }
BRISK_INLINE void *entry_aligned(size_t alignment, size_t size) {
  return track_alloc(NULL, size, alignment, false);
}
BRISK_INLINE void *entry_calloc(size_t count, size_t size) { return track_calloc(count, size); }
BRISK_INLINE void *entry_zalloc(size_t size) { return track_alloc(NULL, size, 0, true); }
BRISK_INLINE void *entry_realloc(heap_t *target, void *p, size_t size, brisk_fn_t fn) {
  return track_realloc(target, p, size, fn);
}
BRISK_INLINE void *entry_rezalloc(void *p, size_t size) { return track_rezalloc(p, size); }
BRISK_INLINE void *entry_expand(void *p, size_t size) { return track_expand(p, size); }
BRISK_INLINE void entry_free(void *p, brisk_fn_t fn) { track_free(p, fn); }
/* The core's check of a sized release compares the size with the block's:
 * the checker's blocks are larger than asked, so it is not made. */
BRISK_INLINE void entry_free_sized(void *p, size_t size, size_t alignment, brisk_fn_t fn) {
  track_free(p, fn);
}
BRISK_INLINE size_t entry_usable_size(const void *p, brisk_fn_t fn) {
  return track_usable_size(p, fn);
}
/* A block of heap h, which the caller checked is its own. */
BRISK_INLINE void *entry_heap_alloc(heap_t *h, size_t size, size_t alignment) {
  return track_alloc(h, size, alignment, false);
}
BRISK_INLINE void entry_heap_destroy(heap_t *h) { track_heap_destroy(h); }

#else

BRISK_INLINE void *entry_malloc(size_t size) { return malloc_inline(size); }
BRISK_INLINE void *entry_aligned(size_t alignment, size_t size) {
  return alloc_aligned(alignment, size);
}
BRISK_INLINE void *entry_calloc(size_t count, size_t size) { return alloc_calloc(count, size); }
BRISK_INLINE void *entry_zalloc(size_t size) { return alloc_zalloc(size); }
BRISK_INLINE void *entry_realloc(heap_t *target, void *p, size_t size, brisk_fn_t fn) {
  return alloc_realloc_in(target, p, size, fn);
}
BRISK_INLINE void *entry_rezalloc(void *p, size_t size) { return alloc_rezalloc(p, size); }
BRISK_INLINE void *entry_expand(void *p, size_t size) { return alloc_expand(p, size); }
BRISK_INLINE void entry_free(void *p, brisk_fn_t fn) { free_inline(p, fn); }
BRISK_INLINE void entry_free_sized(void *p, size_t size, size_t alignment, brisk_fn_t fn) {
  free_sized_inline(p, size, alignment, fn);
}
BRISK_INLINE size_t entry_usable_size(const void *p, brisk_fn_t fn) {
  return usable_size_inline(p, fn);
}
BRISK_INLINE void *entry_heap_alloc(heap_t *h, size_t size, size_t alignment) {
  return alignment > 16 ? heap_alloc_aligned(h, alignment, size) : heap_alloc(h, size);
}
BRISK_INLINE void entry_heap_destroy(heap_t *h) { heap_destroy(h); }

#endif

#endif
