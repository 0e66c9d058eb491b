/* The free path beyond the inline fast path: remote frees, huge blocks,
 * pointers brisk does not own, and the reports of bad frees. */
#ifndef BRISK_FREE_H
#define BRISK_FREE_H

#include <stdbool.h>
#include <stddef.h>

#include "segments/layout.h"

/* Which public function a pointer came through, for the error line. */
typedef enum brisk_fn {
  FN_FREE, FN_REALLOC, FN_USABLE_SIZE, FN_FREE_SIZED,
  FN_BRISK_FREE, FN_BRISK_REALLOC, FN_BRISK_USABLE_SIZE, FN_BRISK_FREE_SIZED,
  FN_DELETE, FN_DELETE_ARRAY, FN_DELETE_SIZED, FN_DELETE_ARRAY_SIZED,
  FN_BRISK_EXPAND, FN_BRISK_REZALLOC,
  FN_COUNT
} brisk_fn_t;

BRISK_INTERNAL const char *fn_name(brisk_fn_t fn);

/* p failed one of the inline free checks; seg is its registry entry: every
 * check, with its report (free_checked). */
BRISK_INTERNAL void free_slow(void *p, segment_t *seg, brisk_fn_t fn) BRISK_NOINLINE;
/* A p whose segment the calling thread does not own (seg's owner id is not
 * its own): pg is page_of(seg, p) and idx the fast path's block index in
 * it. A block start goes to the owner's outbox, anything else to free_slow. */
BRISK_INTERNAL void free_other(void *p, segment_t *seg, page_t *pg, uint64_t idx, brisk_fn_t fn) BRISK_NOINLINE;
/* p is not in the registry (NULL included). */
BRISK_INTERNAL void free_unowned(void *p, brisk_fn_t fn) BRISK_NOINLINE;

/* The page of a block that brisk handed out, or NULL after reporting why p
 * is not one (the report names fn). *seg_out gets p's segment. */
BRISK_INTERNAL page_t *block_check(const void *p, brisk_fn_t fn, segment_t **seg_out);
/* The same, for a pointer whose segment (registry entry) is known. */
BRISK_INTERNAL page_t *block_check_in(segment_t *seg, const void *p, brisk_fn_t fn,
                                      segment_t **seg_out);
BRISK_INTERNAL size_t page_usable_size(const page_t *pg);
/* A block of pg, owned by the calling thread, that is on pg's free lists. */
BRISK_INTERNAL bool block_is_free_here(page_t *pg, const void *p);

/* Memory of the allocator that served the process before brisk. */
BRISK_INTERNAL size_t foreign_usable_size(const void *p); /* 0: not such memory */
/* The usable size of any pointer value: a block's, a foreign block's (glibc's),
 * 0 for NULL; anything else is reported as a bad pointer to `fn` and gives 0. */
BRISK_INTERNAL size_t block_usable_size(const void *p, brisk_fn_t fn);
BRISK_INTERNAL void foreign_free(void *p);
BRISK_INTERNAL void foreign_set_interposing(bool brisk_is_process_malloc);

#endif
