/* A heap seen from its owner: its live blocks (brisk_heap_visit), whether
 * a pointer is one of its blocks, its statistics. */
#ifndef BRISK_VISIT_H
#define BRISK_VISIT_H

#include <stdbool.h>
#include <stddef.h>

#include "brisk.h"
#include "heaps/heap.h"


/* Is h being visited by the calling thread? */
BRISK_INLINE bool heap_visited_here(const heap_t *h, uintptr_t me) {
  return h->tid == HEAP_TID_VISITING && h->segments.owner_tid == me;
}

/* Call visitor(h, block, usable size, arg) for every live block of h, the
 * calling thread being its owner; a non-zero return ends the walk and is
 * returned (0: every block was visited). Live: handed out and not freed.
 * The inbox is drained first, so blocks other threads have handed back
 * are not live; blocks another thread freed but still holds in its
 * outbox (up to 63 per thread, until it runs out of a page, exits or
 * calls brisk_collect) are still live. Blocks in the class cache are
 * free. Pages taken out of use after a broken free list are skipped. */
BRISK_INTERNAL int heap_visit(heap_t *h, brisk_block_visitor_t visitor, void *arg);
/* Is p the start of a block of h (in a page of h in use, carved already;
 * or h's large or huge block)? The owner's view, O(1). */
BRISK_INTERNAL bool heap_contains(heap_t *h, const void *p);
/* Segments, pages, blocks in use (large and huge ones included), ... as
 * JSON; the owner's view. Returns the length it needed. */
BRISK_INTERNAL size_t heap_stats_json(heap_t *h, char *buf, size_t len);

#endif
