/* The large keep: a thread's heap keeps the spans of its freed large
 * blocks of up to LARGE_KEEP_SPAN_MAX slices (256 KiB) for its next large
 * blocks of their size, with no lock: up to LARGE_KEEP_DEPTH of each size
 * and LARGE_KEEP_SLICES slices (2 MiB) in all (config.h). The set's span
 * cache (span.h) is the same idea under the set's lock; the keep is in
 * front of it. A large block freed by another thread comes back through
 * the inbox and goes to the set, not here (heap_drain_inbox): kept, the
 * span freed last would be handed out first, its lines still in the other
 * thread's cache (bench_msgpipe's 128 KiB messages: 3x the time).
 *
 * Each size has a stack of slots: the owner pushes a span onto the slot at
 * keep_n (every slot above it is empty) and pops the newest, with plain
 * stores and loads and no fence. The background thread takes a span that
 * has sat in its slot for a whole delay (the same span at two looks a
 * delay apart) and frees it, purged: a span freed at time t is back to the
 * OS by t + 2 delays if no large block of its size came, whether the
 * owner runs or sleeps. Only the owner fills a slot, so a slot it finds
 * empty below keep_n was emptied by the background thread (its slices are
 * counted out then).
 *
 * The two never touch the slots at once, by an asymmetric handshake: the
 * owner marks itself busy, then reads keep_frozen (a compiler barrier
 * between: no fence on its side); the background thread, holding the
 * set's lock, sets keep_frozen, makes every thread of the process pass a
 * memory barrier (os_fence_all: membarrier), then reads keep_busy. The
 * owner is then seen busy (the background thread leaves, to look again
 * soon) or sees frozen and does its operation under the set's lock, after
 * the look. Without the fence (membarrier refused) no thread keeps spans.
 *
 * A kept span stays in use for the set, with its usable size (block_size)
 * and any pending purge of its tail (the part of the span past block_size):
 * a span is taken without the lock only for a block that fits that size,
 * else its size is changed under the lock (span_large_resize), where the
 * purger reads it. It is marked not in use (span_mark_kept), so that a
 * second free of its block is reported.
 *
 * Only a thread's heap while its owner runs (tid set) keeps spans: not a
 * first-class heap, not a heap served by another thread, not the
 * hardened build (its spans carry guard pages and kinds).
 *
 * Layer: heaps, after page.h and before local_free.h. */
#ifndef BRISK_LARGE_KEEP_H
#define BRISK_LARGE_KEEP_H

#include "heaps/page.h"

/* At the process's start (its constructor, after the options): the
 * fence is registered while the process has one thread, where it costs a
 * few microseconds. Registered once a second thread exists, the kernel
 * waits for an RCU grace period (18..28 ms here), and the first free of a
 * large block would wait with it. The first put registers it if this did
 * not run. */
BRISK_INTERNAL void large_keep_init(void);
/* The owner keeps span (a large block's, just freed and counted back);
 * false when it is not kept (then it goes to the set). */
BRISK_INTERNAL bool large_keep_put(heap_t *h, page_t *span);
/* The owner takes the newest kept span of `slices` slices, marked in use
 * (its block's fields are the caller's to set), or NULL. */
BRISK_INTERNAL page_t *large_keep_take(heap_t *h, size_t slices);
/* The owner grows a large block's span in place to `slices` slices
 * (span_try_grow), giving the set first any span it keeps in the way (a
 * vector that grows by doubling frees the block it copied from just after
 * itself). */
BRISK_INTERNAL bool large_keep_grow(heap_t *h, page_t *span, size_t slices);
/* The owner gives every kept span to the set (a collect, its exit). */
BRISK_INTERNAL void large_keep_flush(heap_t *h);
/* The background thread's look at an owned heap's keep (by_owner: the
 * owner's own, when no background thread runs): what was unused since the
 * last look a delay ago goes back. Returns the next look's time (0: none
 * needed). */
BRISK_INTERNAL uint64_t large_keep_idle(heap_t *h, uint64_t now, bool by_owner);

#endif
