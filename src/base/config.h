/* Compile-time constants of brisk's memory layout. See docs/DESIGN.md. */
#ifndef BRISK_CONFIG_H
#define BRISK_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#define BRISK_LIKELY(x)   __builtin_expect(!!(x), 1)
#define BRISK_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define BRISK_NOINLINE    __attribute__((noinline))
#define BRISK_COLD        __attribute__((noinline, cold))
#define BRISK_INLINE      static inline __attribute__((always_inline))
#define BRISK_INTERNAL    __attribute__((visibility("hidden")))
#define BRISK_CACHELINE   64

#ifndef BRISK_DEBUG_LEVEL
#define BRISK_DEBUG_LEVEL 0
#endif

/* The hardened build (libbrisk-hardened.so) compiles with BRISK_HARDENED=1;
 * its extra checks are `if (BRISK_HARDENED)` blocks that vanish otherwise. */
#ifndef BRISK_HARDENED
#define BRISK_HARDENED 0
#endif
#define HARDENED_FILL 0xdf                /* freed memory, checked on reuse */
#define HARDENED_FILL_MAX ((size_t)64)    /* bytes of a block filled and checked: the
                                             cache line its link already brings in */

/* Assertions in tiers: 1 cheap, 2 internal consistency, 3 expensive. */
#define brisk_assert_tier(tier, cond)                                          \
  do {                                                                        \
    if (BRISK_DEBUG_LEVEL >= (tier) && !(cond)) brisk_assert_fail(#cond, __FILE__, __LINE__); \
  } while (0)
#define brisk_assert(cond) brisk_assert_tier(1, cond)
#define brisk_assert_internal(cond) brisk_assert_tier(2, cond)
#define brisk_assert_expensive(cond) brisk_assert_tier(3, cond)
__attribute__((visibility("hidden"), noreturn, cold)) void brisk_assert_fail(const char *cond,
                                                                            const char *file, int line);

/* Address space covered by the registry: user space of x86-64 / arm64
 * with 4-level page tables. Pointers above it are never brisk's. */
#define BRISK_ADDRESS_BITS 47

/* A segment: 4 MiB, aligned to 4 MiB, cut into 64 slices of 64 KiB.
 * Slice 0 holds the segment header; slices 1..63 serve pages. */
#define SEGMENT_SHIFT 22
#define SEGMENT_SIZE ((size_t)1 << SEGMENT_SHIFT)
#define SEGMENT_MASK (SEGMENT_SIZE - 1)
#define SLICE_SHIFT 16
#define SLICE_SIZE ((size_t)1 << SLICE_SHIFT)
#define SLICES_PER_SEGMENT (SEGMENT_SIZE / SLICE_SIZE) /* 64 */
#define SEGMENT_FIRST_SLICE 1

/* Size categories.
 *   small:  <= 8 KiB, classes in 1-slice pages (64 KiB)
 *   medium: <= 64 KiB, classes in 2-slice pages (128 KiB; see DESIGN.md)
 *   large:  <= 2 MiB, one block in a span of whole slices
 *   huge:   above, a mapping of its own */
#define SMALL_MAX ((size_t)8 * 1024)
#define MEDIUM_MAX ((size_t)64 * 1024)
#define LARGE_MAX ((size_t)2 * 1024 * 1024)
/* The size classes (size_class.h): class 0 is none (large and huge blocks),
 * classes 1..CLASS_COUNT-1 cover sizes up to MEDIUM_MAX. */
#define CLASS_COUNT 85
#define SMALL_PAGE_SLICES 1
#define MEDIUM_PAGE_SLICES 2

/* The inline malloc path serves sizes up to this through heap->direct. */
#define DIRECT_MAX 1024
#define DIRECT_SLOTS (DIRECT_MAX / 16 + 1)

/* The class cache: freed blocks of the classes above DIRECT_MAX (class
 * CLASS_CACHE_FIRST on) wait in their heap for the next allocation of their
 * class, at most CLASS_CACHE_SLOTS and CLASS_CACHE_BYTES per class (and
 * one at least). Those classes have 2..60 blocks per page, so without it
 * most of their allocations and frees move a page between lists. */
#define CLASS_CACHE_FIRST 33 /* 1088 B, the first class above DIRECT_MAX */
#define CLASS_CACHE_SLOTS 8
#define CLASS_CACHE_BYTES ((size_t)256 * 1024)

/* The OS page size brisk plans its layout around (x86-64, arm64 with 4 KiB
 * pages); larger OS pages only make some of these choices less exact. */
#define OS_PAGE_BYTES ((size_t)4096)
/* n rounded up to whole OS pages (0 when that overflows). */
#define OS_PAGE_CEIL(n) (((n) + OS_PAGE_BYTES - 1) & ~(OS_PAGE_BYTES - 1))
#define HARDENED_GUARD OS_PAGE_BYTES      /* hardened build: a PROT_NONE page */

/* Free blocks a page carves from fresh memory at a time (about a 4 KiB
 * page worth), so a new page touches only what it hands out. */
#define PAGE_EXTEND_BYTES OS_PAGE_BYTES
#define PAGE_EXTEND_MIN 4

/* Remote frees are buffered per destination heap and handed over with one
 * atomic exchange per batch. */
#define OUTBOX_SLOTS 4
#define OUTBOX_BATCH 64
/* Each block of a remote-free chain also names the block this many links
 * further on, which the owner's drain prefetches (block.h). */
#define REMOTE_SKIP 4

/* Slow-path work that reads the clock or walks lists runs on every Nth
 * occasion only: the purge check on every HOUSEKEEPING_PURGE_EVERY-th
 * housekeeping, the whole slow path on every REFILL_SLOW_EVERY-th refill
 * of a page from its own frees (page_refill_pop). Powers of two. */
#define HOUSEKEEPING_PURGE_EVERY 8
#define REFILL_SLOW_EVERY 8

/* A large block's usable size is its request rounded up to the OS page;
 * the rest of its span, if resident from an earlier block, is purged with
 * the segment's next deadline when it is at least this large. */
#define LARGE_TAIL_PURGE_MIN ((size_t)16 * 1024)
/* The span cache of each heap's segment set (span.c): freed spans of at
 * most SPAN_CACHE_SPAN_MAX slices, at most SPAN_CACHE_DEPTH of each size,
 * together at most SPAN_CACHE_SLICES slices (8 MiB: what a producer of
 * large messages keeps in flight). */
#define SPAN_CACHE_DEPTH 32
#define SPAN_CACHE_SPAN_MAX 8
#define SPAN_CACHE_SLICES 128
/* The large keep of a thread's heap (heaps/large_keep.h): spans of freed
 * large blocks of at most LARGE_KEEP_SPAN_MAX slices (256 KiB), at most
 * LARGE_KEEP_DEPTH of each size, together at most LARGE_KEEP_SLICES slices
 * (2 MiB), taken by the heap's next large blocks with no lock. */
#define LARGE_KEEP_SPAN_MAX 4
#define LARGE_KEEP_DEPTH 8
#define LARGE_KEEP_SLICES 32

/* Entries of a heap's segment directory (span.h) kept in the heap itself:
 * 8 segments (32 MiB) before it needs a mapping of its own. */
#define SET_DIR_INLINE 8

/* The background purger tries a heap again this many ms later when its
 * owner held the heap's lock (more than the purger's slack, so that the
 * retry is a new round after a sleep, not the next one at once). */
#define PURGE_RETRY_MS 20

/* realloc keeps a block it shrinks unless that would leave more than half
 * of it unused, and always keeps blocks of up to REALLOC_KEEP_SMALL bytes;
 * a block above REALLOC_GROW_MIN bytes grows by at least 1/REALLOC_GROW_STEP
 * so that growth step by step copies a linear amount in all. A quarter
 * rather than an eighth (one class of the 8 per doubling): fewer moves, so
 * fewer half-used pages of the classes passed through (bench_realloc:
 * peak RSS 0.88x, time 0.97x; docs/BENCHMARK-LOG.md). */
#define REALLOC_KEEP_SMALL 64
#define REALLOC_GROW_MIN 4096
#define REALLOC_GROW_STEP 4

/* While a page is the allocation page of its class, this is added to its
 * used count, so the free fast path never sees it reach zero. */
#define PAGE_USED_BIAS ((uint32_t)1 << 30)

#endif
