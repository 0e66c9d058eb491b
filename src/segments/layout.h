/* The memory layout: segments, slices and page descriptors, and the
 * helpers that find one from another. Types only; segment.h maps and
 * unmaps segments, span.h cuts spans from them, pool.h keeps empty ones,
 * huge.h serves huge blocks.
 *
 *  segment (4 MiB, 4 MiB-aligned; its address is ptr & ~(4 MiB - 1))
 *  +-----------+-----------+-----------+-----------+-- ... --+-----------+
 *  | slice 0   | slice 1   | slice 2   | slice 3   |         | slice 63  |
 *  | header:   | page of   | page of class 57 (2 slices,     | large     |
 *  | segment_t |  class 4  | 128 KiB, blocks of 9216 B)      | block     |
 *  | + 64 page |  64 B x   |                                 | (span)    |
 *  |   descs   |  1024     |                                 |           |
 *  +-----------+-----------+-----------+-----------+-- ... --+-----------+
 *     pages[i] describes slice i; pages[i].span -> the head descriptor
 *     of the span that holds slice i (itself for a head), or the shared
 *     dead descriptor when slice i is not in use.
 *
 *  A span is a run of slices given out whole: a page of one size class
 *  (1 slice for small classes, 2 for medium ones) or one large block.
 *  A huge block is a mapping of its own with the same header; all 64 of
 *  its descriptors point to descriptor 0.
 *
 *  Page invariant (owner thread only, outside the fast path's instants):
 *    used == blocks handed out and not yet back in free/local_free (a
 *    block on the page's remote list, in an outbox, the inbox or a parked
 *    array still counts as used)
 *    reserved - used == |free| + |local_free| + cached (its blocks in the
 *    heap's class cache)
 *    used carries PAGE_USED_BIAS while the page is its class's current page.
 *    The descriptor stores until_notify = used - notify_at - 1 rather than
 *    used (page_used() gives it back; a zeroed descriptor must be given
 *    used 0): the free fast path's whole count is one decrement and a
 *    branch on its sign.
 *  Ownership: every field of a page and of a segment's slice masks belongs
 *  to the thread that owns the segment's heap; other threads read only
 *  segment->owner_tid and segment->heap (atomics) and the descriptor
 *  fields that are fixed while the page is in use (start, block_size,
 *  inv, shift, capacity, flags); `reserved` is read by the owner only.
 */
#ifndef BRISK_LAYOUT_H
#define BRISK_LAYOUT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/config.h"

struct heap_s;

struct block_s;

struct class_cache_s;

enum page_flags {
  PAGE_IN_USE = 1 << 0,  /* span given out (page or large/huge block) */
  PAGE_LARGE = 1 << 2,   /* one large block */
  PAGE_HUGE = 1 << 3,    /* one huge block, mapping of its own */
  PAGE_ZERO = 1 << 4,    /* memory not yet carved is known to be zero */
  PAGE_CACHED = 1 << 5,  /* its frees go to the heap's class cache first */
  PAGE_SAMPLE = 1 << 6,  /* a large block the heap profiler sampled (set before
                            it is handed out, while its prof_slot may still be
                            written by its owner: heap_alloc_counted) */
};

/* 128 bytes, two cache lines kept apart by who writes them. The first is
 * fixed while the page is in use (set when its span is carved and its
 * class page made): it is all a thread freeing into another thread's page
 * reads. The second is the owner's, written by its malloc and free fast
 * paths. Sharing one line made every remote free pull the line the owner
 * had just written, and the owner's next malloc pull it back: on
 * bench_msgpipe's 64 B and 256 B messages, 16k -> 24..25k a ms with the
 * two apart (docs/BENCHMARK-LOG.md, 2026-11-28). */
typedef struct page_s {
  /* first cache line: fixed while in use, read by any thread */
  struct page_s *span;    /* head descriptor of the span holding this slice */
  uint8_t *start;         /* first block */
  /* Block index of an offset, exact or absurdly large (page_block_index):
   * block_size = odd * 2^shift, inv = odd^-1 mod 2^64. */
  uint64_t inv;
  size_t span_bytes;      /* bytes of the span (huge: of the block area); a
                             large block's usable bytes are block_size */
  struct class_cache_s *ccache; /* PAGE_CACHED: its heap's cache of its class,
                                   where page_notify puts its frees */
  /* capacity * block_size: malloc's range check of free. 64 bits so that
   * the check compares with memory directly (no load into a register). */
  uint64_t area;
  uint32_t capacity;      /* blocks that fit */
  uint32_t block_size;
  uint16_t size_class;    /* 0 for large and huge */
  uint8_t shift;
  uint8_t slice_count;
  uint8_t flags;           /* set when the span is carved; fixed while in use */
  uint8_t alloc_kind;     /* hardened: a huge block's kind; other spans: 1 once
                             one of its blocks came from new (hardened_mark,
                             the owner's one write while in use) */
  uint8_t fill_end;        /* hardened, class pages: a freed block holds
                             HARDENED_FILL in bytes 8..fill_end-1 (16, 32, 48
                             or 64); 0: not filled (large and huge blocks) */
  uint8_t fill_low;        /* hardened: max(fill_end - 32, 16), the third
                             16-byte part of the fill (page_fill_freed) */
  /* second cache line: the owner's */
  struct block_s *free;       /* allocation list */
  struct block_s *local_free; /* owner's frees, moved to free when it runs dry */
  int64_t until_notify;   /* used - notify_at - 1 (the invariant above): the
                             free that brings it below 0 calls page_notify */
  struct page_s *next;    /* class queue or full list */
  struct page_s *prev;
  uint64_t reserved;      /* blocks carved so far (64 bits: free's check of the
                             block index compares with it in memory) */
  uint32_t notify_at;     /* free calls page_notify when used drops to this
                             (page_set_notify_at); UINT32_MAX: every free */
  uint32_t prof_slot;     /* the profiler's record of the block, if it was sampled
                             (profiler.h): a large or huge block, or block
                             prof_block - 1 of a PAGE_CACHED page; 0: none */
  uint16_t cached;        /* blocks in its heap's class cache (owner only) */
  uint16_t prof_block;    /* PAGE_HOLDS_SAMPLE: the sampled block's index + 1 */
  uint8_t in_full;         /* PAGE_LIST_QUEUE, _FULL or _BROKEN, | PAGE_HOLDS_SAMPLE
                             (owner only; page_list_of) */
  uint8_t tail_marked;     /* a large block's: its span's tail was marked for the
                             purge at the last sizing under the set's lock (it
                             may be pending: the block may not grow without it) */
  uint8_t pad_owner_[64 - 5 * sizeof(void *) - sizeof(uint64_t) - 14];
} page_t;

/* Blocks of pg handed out and not back (the invariant above). */
BRISK_INLINE uint32_t page_used(const page_t *pg) {
  return (uint32_t)(pg->until_notify + (int64_t)pg->notify_at + 1);
}

BRISK_INLINE void page_set_used(page_t *pg, uint32_t used) {
  pg->until_notify = (int64_t)used - (int64_t)pg->notify_at - 1;
}

/* used + delta (the bias, a block handed out or back). */
BRISK_INLINE void page_add_used(page_t *pg, int64_t delta) { pg->until_notify += delta; }

/* The count of used at which free calls page_notify; used is kept. */
BRISK_INLINE void page_set_notify_at(page_t *pg, uint32_t at) {
  uint32_t used = page_used(pg);
  pg->notify_at = at;
  page_set_used(pg, used);
}

/* A class page's list of blocks freed by other threads (heap kinds whose
 * segments have page_lists). One word, on a line of its own:
 *
 *   open      bits 0..47: the newest block (0: none), linked to the next
 *             one as a free list is (block_set_next), the last to
 *             page_list_end; bits 48..63: how many blocks the list holds
 *   FULL      the page is on its heap's full list, which the owner does not
 *             look at: the first free opens the word (a CAS to 0) and goes
 *             to the heap's inbox at once, where the owner's drain brings
 *             the page back to its queue; the frees after it take the list
 *   CLOSED    every free goes to the inbox: the heap has no owner, or the
 *             page is broken
 *
 * Any thread pushes (a CAS on an open word) or opens a FULL word; the owner
 * takes the whole list (an exchange), makes an empty open word FULL (a CAS
 * from 0), opens a FULL or CLOSED one again (a CAS) and closes every word
 * when it leaves the heap (an exchange); the background thread takes a
 * whole list of an idle owner's page (a CAS), under the set's lock. A
 * list is taken whole, so a block's link, once pushed, is read only by the
 * taker (or by the owner's check for a second free, which does not follow
 * it past the list's count). */
typedef struct page_remote_s {
  _Alignas(BRISK_CACHELINE) _Atomic(uintptr_t) word;
} page_remote_t;
#define PAGE_REMOTE_CLOSED ((uintptr_t)1)
#define PAGE_REMOTE_FULL ((uintptr_t)2)
#define PAGE_REMOTE_COUNT_SHIFT 48
#define PAGE_REMOTE_PTR ((((uintptr_t)1) << PAGE_REMOTE_COUNT_SHIFT) - 16)
BRISK_INLINE uint32_t page_remote_count(uintptr_t w) { return (uint32_t)(w >> PAGE_REMOTE_COUNT_SHIFT); }

/* page_t.in_full: which list the page is on (the low bits), and for a
 * PAGE_CACHED page whether one of its blocks is a live sample of the heap
 * profiler (PAGE_HOLDS_SAMPLE): then page_notify's cached branch, which
 * takes only PAGE_LIST_QUEUE and _FULL, sends its frees to
 * page_notify_sampled, where the sample's free is seen. */
enum { PAGE_LIST_QUEUE = 0, PAGE_LIST_FULL = 1, PAGE_LIST_BROKEN = 2, PAGE_LIST_MASK = 3, PAGE_HOLDS_SAMPLE = 4 };

BRISK_INLINE unsigned page_list_of(const page_t *pg) { return pg->in_full & PAGE_LIST_MASK; }
BRISK_INLINE void page_list_set(page_t *pg, unsigned list) {
  pg->in_full = (uint8_t)((pg->in_full & ~PAGE_LIST_MASK) | list);
}

/* SEGMENT_RETIRED: the two markers below, which the registry keeps where
 * brisk's memory was returned to the OS, so a late free is told apart
 * from a pointer brisk never owned. */
enum segment_kind { SEGMENT_NORMAL = 1, SEGMENT_HUGE = 2, SEGMENT_RETIRED = 3 };

typedef struct segment_s {
  /* The first line: what any thread's free reads (the owner test, the
   * heap a remote free goes to, the link keys), written only when the
   * segment changes hands or joins a set, never by span changes. */
  _Atomic(uintptr_t) owner_tid;       /* thread whose frees are local; 0: none */
  _Atomic(struct heap_s *) heap;      /* heap its blocks return to; NULL: none */
  size_t mapped_size;
  uint32_t kind;
  uint32_t heap_generation;           /* the life of `heap` it joined in (heap_t.generation):
                                         a remote free's batch must be of that life */
  uint8_t *kinds;                     /* hardened: allocation kind per 16 bytes */
  uintptr_t link_key;                 /* hardened: the keys of the links in this */
  uintptr_t remote_key;               /* segment's blocks (block.h), its own */
  uint16_t destroyed;                 /* its heap was destroyed; cleared on reuse */
  uint16_t keep_until_due;            /* in the pool: unmapped only after the delay */
  uint8_t page_lists;                 /* its heap takes remote frees of small blocks
                                         on their pages' lists (page_remote_t) */
  /* The slice masks and the rest: changed with every span (under the
   * set's lock), on lines of their own, so that the owner's span changes
   * do not take the first line from the threads that free into it. */
  _Alignas(BRISK_CACHELINE) uint64_t free_slices; /* bit i: slice i not in any span */
  uint64_t dirty_slices;              /* bit i: slice i may be resident / non-zero */
  uint64_t light_slices;              /* of those, slices only profiler samples used
                                         since they were clean: little of them is
                                         resident (span.c, span_alloc_sample_locked) */
  uint64_t purge_slices;              /* free slices purged at purge_at_ms */
  uint64_t purge_later;               /* freed since: purged one delay after that */
  uint64_t purging;                   /* taken out of free_slices by the background
                                         purger while it purges them (set_maintain.c) */
  uint64_t tails;                     /* head slices of large blocks whose span, past
                                         the block, may still be resident, that have
                                         lived through a deadline: purged at the next */
  uint64_t tails_later;               /* the same, placed since the last deadline
                                         (span_large_resize): they become `tails` */
  uint64_t guarded_slices;            /* hardened: slice i ends in a PROT_NONE page */
  uint64_t purge_at_ms;               /* when purge_slices become due; 0: none wait */
  uint64_t idle_since_ms;             /* in the pool: when it arrived */
  struct segment_s *next;             /* in its heap's set, the pool or the huge cache */
  struct segment_s *prev;
  /* Huge blocks, under huge.c's lock: the resident rest of the mapping
   * past the block (its tail) and the list of blocks that have one. */
  size_t tail_bytes;
  uint64_t tail_since_ms;
  uint32_t trimming;                  /* its tail is being trimmed: free waits */
  uint32_t dir_slot;                  /* in its heap's set: its entry in the set's
                                         directory (span.h, segment_dir_t) */
  uint32_t purge_refused;             /* in the pool: the OS refused its purge (locked
                                         memory), so it is unmapped instead */
  struct segment_s *tail_next;
  struct segment_s *tail_prev;
  _Alignas(2 * BRISK_CACHELINE) page_t pages[SLICES_PER_SEGMENT]; /* each its own pair of lines */
  page_remote_t remote[SLICES_PER_SEGMENT]; /* remote[i]: page i's list, on a line of its own */
} segment_t;

_Static_assert(sizeof(page_t) == 128, "page descriptor is two cache lines");
_Static_assert(offsetof(page_t, free) == 64, "the owner's fields start the second line");
_Static_assert(sizeof(segment_t) <= SLICE_SIZE, "segment header fits in slice 0");
_Static_assert(offsetof(segment_t, free_slices) == BRISK_CACHELINE, "what a free reads: one line");

/* Registry markers of memory returned to the OS (kind SEGMENT_RETIRED):
 * after an ordinary release, and after the destruction of its heap. */
extern segment_t brisk_segment_returned BRISK_INTERNAL;
extern segment_t brisk_segment_destroyed BRISK_INTERNAL;

/* The descriptor of every slice not in use: its start lies at the top of
 * the address space, so every free/owns check against it fails. */
extern page_t brisk_dead_page BRISK_INTERNAL;

/* The index of the block that starts at byte `off` of the page; for an
 * offset that is not a multiple of the block size the rotation leaves high
 * bits set, so the result is far above any block count. One multiply and
 * one rotate: the free fast path's check for interior pointers. */
BRISK_INLINE uint64_t page_block_index(const page_t *pg, uint64_t off) {
  uint64_t x = off * pg->inv;
  unsigned k = pg->shift;
  return (x >> k) | (x << ((64 - k) & 63));
}

/* Set block_size, inv and shift for blocks of `size` bytes. */
BRISK_INLINE void page_set_block_size(page_t *pg, uint32_t size) {
  unsigned k = (unsigned)__builtin_ctz(size);
  uint64_t odd = size >> k;
  uint64_t inv = odd; /* Newton: each step doubles the correct low bits */
  for (int i = 0; i < 5; i++) inv *= 2 - odd * inv;
  pg->block_size = size;
  pg->inv = inv;
  pg->shift = (uint8_t)k;
}

BRISK_INLINE segment_t *segment_of_page(const page_t *pg) {
  return (segment_t *)((uintptr_t)pg & ~(uintptr_t)SEGMENT_MASK);
}

/* The remote list of pg, a span's head descriptor. */
BRISK_INLINE _Atomic(uintptr_t) *page_remote_word(const page_t *pg) {
  segment_t *seg = segment_of_page(pg);
  return &seg->remote[pg - seg->pages].word;
}

BRISK_INLINE page_t *page_of(segment_t *seg, uintptr_t addr) {
  return seg->pages[(addr >> SLICE_SHIFT) & (SLICES_PER_SEGMENT - 1)].span;
}


/* A list of segments linked through next/prev (list.h). */
typedef struct segment_list_s {
  segment_t *first;
  segment_t *last;
} segment_list_t;

#define ALL_PAGE_SLICES (~(uint64_t)0 << SEGMENT_FIRST_SLICE)

/* The registry marker for seg's memory once it is no longer a segment. */
BRISK_INLINE segment_t *segment_marker(const segment_t *seg) {
  return seg->destroyed ? &brisk_segment_destroyed : &brisk_segment_returned;
}
/* The bits of slices first .. first + n - 1. */
BRISK_INLINE uint64_t slice_bits(size_t first, size_t n) {
  uint64_t bits = n >= 64 ? ~(uint64_t)0 : (((uint64_t)1 << n) - 1);
  return bits << first;
}
/* A page descriptor no span uses any more: every check against it fails. */
BRISK_INLINE void page_desc_clear(page_t *pg) {
  pg->flags = 0;
  pg->start = (uint8_t *)UINTPTR_MAX;
  pg->block_size = 0;
  pg->reserved = 0;
}

#endif
