/* A free by the block's owner: free_local, inline in the free fast path
 * and in the owner's drain of its inbox, and page_notify, where it goes
 * when the page's count of used blocks reaches notify_at (local_free.c).
 *
 *   free_local(pg, b)
 *   ── until_notify stays >= 0: b onto pg's local list (the common case)
 *   ── else page_notify(pg, b):
 *      ── a PAGE_CACHED page (classes above DIRECT_MAX, every free):
 *         the class cache keeps b (class_cache.h), unless it is full or
 *         b is the page's last live block
 *      ── a page holding the profiler's sample: the sample forgotten first
 *      ── else b onto the local list, and the page back from the full list
 *         or retired when empty (page_after_free); a large or huge block's
 *         span goes back to the segments whole
 *
 * Layer: heaps, after class_cache.h. */
#ifndef BRISK_LOCAL_FREE_H
#define BRISK_LOCAL_FREE_H

#include "heaps/class_cache.h"
#include "heaps/page.h"

/* Free a block of a page that this heap's owner owns. Inline: the free
 * fast path and the inbox drain share it. When `used` drops to notify_at
 * (counted already), page_notify takes the block instead: to the class cache
 * (PAGE_CACHED pages, whose notify_at is UINT32_MAX, so every free), or
 * onto the local list and then the page changes list or is retired. */
BRISK_INTERNAL void page_notify(page_t *pg, block_t *b) BRISK_NOINLINE;

BRISK_INLINE void free_local(page_t *pg, block_t *b) {
  if (BRISK_HARDENED) page_fill_freed(pg, b);
  /* used - 1 <= notify_at, as one decrement and its sign */
  if (BRISK_UNLIKELY(--pg->until_notify < 0)) {
    page_notify(pg, b); /* with the block counted as back */
    return;
  }
  page_link_local(pg, b);
}

#endif
