/* Remote frees that wait for an idle owner: parked and purged by the
 * background thread.
 *
 * Blocks of class pages freed by other threads reach their heap's inbox and
 * wait there until the owner takes them in (heap_drain_inbox), which it
 * does on its slow paths. An owner that sleeps, blocks or never allocates
 * again would keep them, and the pages they fill, resident for good. The
 * background thread watches an inbox that a batch reached while it was
 * empty (heap_t.inbox_watched, set by the pusher); when the inbox word has
 * not changed for a whole purge delay, it takes the chain from the inbox
 * (as the owner would: one CAS that keeps the tag), writes the blocks'
 * addresses into an array of its own (a mapping, not a heap's memory),
 * gives back to the OS every 4 KiB page that lies wholly within runs of
 * those blocks (MADV_DONTNEED: their contents are garbage, and the chain's
 * links are in the array now), and hangs the array on the heap
 * (heap_t.parked). The owner takes the parked arrays in with its inbox,
 * checking and freeing each block as a drained one. A large block in the
 * chain (its span's start, in use, not a profiler's sample) is freed by
 * the walk itself into the set, as a foreign free under the set's lock
 * would, and its span is purged at the set's deadline.
 *
 * Who may touch what: only the background thread takes a chain to park
 * (with the heap's set lock held from before the take until the array is
 * published, so the heap's segments cannot be released, nor the heap
 * reset, while their blocks are purged); the owner (or the thread serving
 * an abandoned heap) takes the parked arrays; heap_destroy drops them. An
 * array carries the inbox tag it was taken under, and a drain that finds
 * another tag drops it (its blocks went with a destroyed life). The page
 * descriptors are read only in their first line (fixed while the page is
 * in use), never the owner's lists or counts (a large block's span is
 * the set's, under its lock). */
#ifndef BRISK_PARK_H
#define BRISK_PARK_H

#include "heaps/heap_types.h"

/* A chain of one heap's remote frees, taken from its inbox, as runs of
 * consecutive blocks of one page, sorted: an entry is a block's address,
 * with bit 0 set when the block looked free when it was freed
 * (REMOTE_LINK_SUSPECT; such a block is a run of its own), and bit 1
 * (PARK_RUN) when the next entry is how many blocks the run has (else 1). */
#define PARK_RUN ((uintptr_t)2)
typedef struct park_s {
  struct park_s *next;
  size_t mapped;   /* bytes of this mapping */
  size_t count;    /* entries */
  uint32_t tag;    /* the inbox tag the chain was taken under */
  block_t *rest;   /* the chain's blocks past the last parked one (one the
                      owner must check itself, or no room): drained as a chain */
  block_t *rest_from; /* the block whose link is `rest` (NULL: none) */
  uintptr_t entries[];
} park_t;

/* A batch reached an empty inbox of h, or a block an empty page list: have
 * the background thread watch it (the first such push schedules a round one
 * purge delay away) and start that thread if it is wanted and not running.
 * Called with no lock held. */
BRISK_INTERNAL void park_watch(heap_t *h) BRISK_NOINLINE;

/* The background round's look at an owned heap h at `now`: an inbox
 * unchanged for a purge delay is parked and purged. Returns when to look
 * again (0: nothing to watch). */
BRISK_INTERNAL uint64_t park_idle_inbox(heap_t *h, uint64_t now);

/* The owner: h's parked arrays, taken and unlinked (NULL if none). */
BRISK_INLINE park_t *park_take(heap_t *h) {
  if (atomic_load_explicit(&h->parked, memory_order_relaxed) == NULL) return NULL;
  return atomic_exchange_explicit(&h->parked, NULL, memory_order_acquire);
}
/* Give a taken array's mapping back (after its blocks were freed, or when
 * they are dropped with a destroyed life). */
BRISK_INTERNAL void park_release(park_t *p);

#endif
