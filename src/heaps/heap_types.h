/* The heap object: a set of segments, queues of pages by size class, and the
 * mailboxes for frees from other threads. A thread's default heap and a
 * first-class heap are the same object.
 *
 *   heap_t
 *   +-------------------------------+  read by the inline malloc path
 *   | direct[0..64]: page of the    |  (size + 15) / 16 -> page whose
 *   |   class for each 16 B step    |  free list serves it
 *   +-------------------------------+
 *   | queues[c]: pages of class c   |  head = current page (biased used)
 *   | full: pages with no free block|  notify_at = capacity - 1
 *   | segments, outbox[4]           |  owner thread only
 *   | ccache[52]: freed blocks of   |  classes above DIRECT_MAX: a stack
 *   |   each class, 1..8            |  of pointers per class
 *   +-------------------------------+  own cache lines:
 *   | keep_n, keep_busy, keep[4][8] |  freed large spans of 1..4 slices:
 *   | keep_seen                     |  the owner's, taken back by the
 *   +-------------------------------+  background thread when unused
 *   | inbox (atomic)                |  remote frees pushed by any thread
 *   | parked, inbox_watched,        |  an idle owner's inbox taken and
 *   |   pushers, inbox_seen*        |  purged by the background thread
 *   +-------------------------------+  (park.h); pushes under way
 *
 * Cross-thread rules:
 *  - Only the owner (the thread whose id is in `tid`, or the thread that
 *    won state ABANDONED -> BUSY) touches anything but inbox, state and
 *    the large keep (large_keep.h).
 *  - inbox = block list | generation << 48. Pushers CAS with release after
 *    linking their batch; the owner takes the list with one exchange
 *    (acq_rel), leaving the generation. A push whose generation no longer
 *    matches (the heap was destroyed) is dropped: its blocks went with it.
 *    Tags are never reused (INBOX_GEN_MASK). A pusher writes the batch's
 *    tail link between its check and its CAS: it counts itself in
 *    `pushers` first, and heap_destroy, after its exchange of the inbox,
 *    waits for `pushers` to be 0 before the heap's memory goes (both
 *    sides store one word and then load the other: sequentially
 *    consistent).
 *  - state moves OWNED -> ABANDONED (release, by the exiting owner after it
 *    has published everything), ABANDONED -> BUSY -> ABANDONED (a freeing
 *    thread serving the inbox), ABANDONED -> OWNED (adoption by a new
 *    thread, acquire).
 */
#ifndef BRISK_HEAP_TYPES_H
#define BRISK_HEAP_TYPES_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/config.h"
#include "heaps/block.h"
#include "segments/layout.h"
#include "segments/size_class.h"
#include "segments/span.h"

enum heap_state {
  HEAP_FREE = 0,       /* not in use (a destroyed first-class heap) */
  HEAP_OWNED = 1,      /* a live thread allocates from it */
  HEAP_ABANDONED = 2,  /* its thread exited; adoptable */
  HEAP_BUSY = 3,       /* a thread other than an owner is serving it */
  HEAP_ORPHANED = 4,   /* after fork: belonged to a thread the child lacks */
  HEAP_RETIRED = 5,    /* a destroyed first-class heap whose inbox tags are used
                          up: never reused (see INBOX_GEN_MASK) */
};

/* heap->tid while brisk_heap_visit walks it (no thread has this id: a
 * thread pointer is never 1). The heap's segments then carry it as their
 * owner too, so that frees of its blocks, even by the visiting thread,
 * take the remote path and wait in an outbox or the inbox until the walk
 * ends (a large block too: it is not freed under the set's lock then);
 * its set keeps the visiting thread's id (owner_tid). */
#define HEAP_TID_VISITING ((uintptr_t)1)

enum heap_kind { HEAP_KIND_STATIC = 0, HEAP_KIND_THREAD = 1, HEAP_KIND_USER = 2 };

#define INBOX_PTR_MASK (((uintptr_t)1 << 48) - 1)
#define INBOX_GEN_SHIFT 48
/* The inbox's tag: the low 16 bits of the heap's generation. Each life of
 * a heap object (from its creation or reuse to its destruction) has its
 * own tag, so that a batch built for one life is never taken into another:
 * a heap object whose next life would have tag INBOX_GEN_MASK is retired
 * instead (HEAP_RETIRED), keeping that tag, which no life ever uses. Tags
 * are therefore never reused, whatever the count of destroy/reuse cycles
 * (a retired object costs sizeof(heap_t) per 65,535 lives). */
#define INBOX_GEN_MASK 0xffffu /* the generation bits above INBOX_GEN_SHIFT */

typedef struct page_queue_s {
  page_t *first;
  page_t *last;
} page_queue_t;

typedef struct outbox_slot_s {
  struct heap_s *dst;
  block_t *head;
  block_t *tail;
  uint32_t count;
  uint32_t generation;
  block_t *recent[REMOTE_SKIP]; /* the last blocks pushed, by count % REMOTE_SKIP */
} outbox_slot_t;

/* Freed blocks of one class kept for its next allocations: a stack of
 * pointers in the heap, not links in the blocks, so that no write to freed
 * memory can make it hand out anything else. Each block still counts as
 * used in its page; its first word is its page's list end, so that free
 * sends a second free of it to the slow path (block_looks_free). */
typedef struct class_cache_s {
  uint32_t count;
  uint32_t max;
  block_t *slot[CLASS_CACHE_SLOTS];
  page_t *page[CLASS_CACHE_SLOTS]; /* slot[i]'s page: malloc's pop counts it
                                       there without finding the page again */
} class_cache_t;

#define CLASS_CACHE_COUNT (CLASS_COUNT - CLASS_CACHE_FIRST)

typedef struct heap_s {
  page_t *direct[DIRECT_SLOTS];
  uintptr_t tid;
  uint32_t kind;
  uint32_t generation;
  page_queue_t queues[CLASS_COUNT];
  page_queue_t full;
  segment_set_t segments;
  outbox_slot_t outbox[OUTBOX_SLOTS];
  class_cache_t ccache[CLASS_CACHE_COUNT]; /* classes CLASS_CACHE_FIRST.. */
  uint32_t outbox_pending;    /* slots with blocks */
  int32_t pages_pending;      /* page events not yet in the process counters */
  int32_t large_pending;
  uint32_t housekeeping_tick;
  _Atomic(uint32_t) alive;     /* the owner's slow paths, counted (single writer):
                                  the background thread's sign of an idle owner */
  uint32_t refill_tick;        /* page_refill_pop: every 8th goes the slow way */
  uint32_t page_retires;       /* class pages retired so far (a drain's pages found: remote.c) */
  /* When its thread left it with its class cache and each class's current
   * page kept for the thread that adopts it (heap_abandon); 0: nothing
   * kept. The owner's, then the thread that holds it BUSY. */
  uint64_t left_ms;
  /* page_refill_pop goes the slow way when refill_tick & refill_mask is 0:
   * REFILL_SLOW_EVERY - 1, or 0 (always) while the heap samples, whose
   * local lists must be counted (sample.h); 0 in
   * the static heaps. Owner only. */
  uint32_t refill_mask;
  /* malloc_above serves sizes up to this from the class cache itself:
   * MEDIUM_MAX, or DIRECT_MAX while the heap samples (its allocations
   * above DIRECT_MAX then take malloc_above's counted branch,
   * sampling_class_cache_pop); 0 in the
   * static heaps. Owner only. */
  size_t cache_path_max;
  struct sampler_s *sampler;  /* its samplers' countdowns (sample.h); owner only */
  struct heap_s *next_all;    /* every heap ever made, never unlinked */
  _Atomic(int) state;
  /* The large keep (large_keep.h): keep_n[n - 1], the slots of spans of n
   * slices in use, and keep_slices, their slices (the owner's); the two
   * sides of the handshake (keep_busy, the owner's; keep_frozen, the
   * background thread's); the watch (set by a put that finds it clear,
   * cleared by a look that finds no span); the slots. */
  _Alignas(BRISK_CACHELINE) uint8_t keep_n[LARGE_KEEP_SPAN_MAX];
  uint32_t keep_slices;
  uint8_t keep_off;            /* draining the inbox: frees are not kept */
  _Atomic(uint8_t) keep_busy;
  _Atomic(uint8_t) keep_frozen;
  _Atomic(uint8_t) keep_watched;
  _Atomic(page_t *) keep[LARGE_KEEP_SPAN_MAX][LARGE_KEEP_DEPTH];
  /* The background thread's: the slots at its last look, and `alive` then. */
  _Alignas(BRISK_CACHELINE) page_t *keep_seen[LARGE_KEEP_SPAN_MAX][LARGE_KEEP_DEPTH];
  uint32_t keep_alive_seen;
  _Alignas(BRISK_CACHELINE) _Atomic(uintptr_t) inbox;
  /* Inbox chains the background thread took from an idle owner's inbox,
   * purged (park.h); taken by the owner with its inbox. */
  _Atomic(struct park_s *) parked;
  _Atomic(int) inbox_watched;   /* set by a push into an empty inbox, cleared by the
                                   background thread when it finds it empty */
  _Atomic(uint32_t) pushers;    /* pushes between their load of the inbox and their
                                   CAS: heap_destroy waits for none (inbox_push) */
  uintptr_t inbox_seen;         /* the background thread's: the inbox word at its */
  uint64_t inbox_seen_ms;       /* last look, and since when it was that */
  uint32_t alive_seen;          /* the background thread's: `alive` at that look */
  uint8_t pad_[BRISK_CACHELINE - 3 * sizeof(uintptr_t) - 3 * sizeof(uint32_t) - sizeof(uint64_t)];
} heap_t;

/* A heap that owns nothing; its direct[] point at brisk_empty_page. Every
 * thread starts on it, so its first malloc takes the slow path. */
extern heap_t brisk_heap_empty BRISK_INTERNAL;
/* A thread that has exited (its TLS destructors still free) uses this. */
extern heap_t brisk_heap_dead BRISK_INTERNAL;
extern page_t brisk_empty_page BRISK_INTERNAL;

#endif
