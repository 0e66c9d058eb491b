/* Pages of a heap: the class queues, the full list, carving and retiring.
 * Called by heap.c; calls only into segments. */
#ifndef BRISK_PAGE_H
#define BRISK_PAGE_H

#include "heap_types.h"

/* Free a block of a page that this heap's owner owns. Inline: the free
 * fast path and the inbox drain share it. */
BRISK_INTERNAL void page_notify(page_t *pg) BRISK_NOINLINE;

BRISK_INLINE void free_local(page_t *pg, block_t *b) {
  block_set_next(b, pg->local_free);
  pg->local_free = b;
  if (BRISK_UNLIKELY(--pg->used <= pg->notify_at)) page_notify(pg);
}

BRISK_INTERNAL page_t *heap_find_page(heap_t *h, unsigned c);
BRISK_INTERNAL bool page_holds_block(const page_t *pg, const block_t *b);
BRISK_INTERNAL void heap_retire_empty_heads(heap_t *h);

#endif
