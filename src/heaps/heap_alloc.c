/* Allocation beyond the inline path (heap.h): a heap's classes, large and
 * huge blocks, and, while a sampler is on, every allocation counted against
 * the heap's countdowns (sample.h). */
#include <errno.h>
#include <string.h>

#include "base/atomics.h"
#include "guarded/guarded.h"
#include "heaps/heap.h"
#include "heaps/large_keep.h"
#include "heaps/sample.h"
#include "os/platform.h"
#include "profiler/profiler.h"
#include "runtime/background.h"
#include "segments/guard.h"
#include "segments/huge.h"
#include "segments/registry.h"

/* ---------------------------------------------------------------------------
 * Allocation beyond the inline path.
 * ------------------------------------------------------------------------- */
/* A safe point of a slow path while the heaps sample: the background
 * thread started if it is wanted, a dump asked for written. */
BRISK_INLINE void sampling_poll(void) {
  background_poll();
  if (BRISK_UNLIKELY(prof_dump_wanted())) prof_poll_slow();
}

/* The span of a new large block of `size` bytes: a span the cache kept
 * for a block of its size, else one cut for it (span.h). */
static page_t *large_span(heap_t *h, size_t slices, size_t align_slices, size_t size, bool sampled) {
  /* A sample of a quarter slice or less leaves most of its span untouched:
   * a light span (span.h) */
  if (sampled) return span_alloc(&h->segments, slices, align_slices, size <= SLICE_SIZE / 4);
  return span_alloc_large(&h->segments, slices, align_slices, size);
}

static void *alloc_large(heap_t *h, size_t size, size_t alignment, bool sampled) {
  /* Large blocks freed by other threads come back through the inbox. */
  if (atomic_load_relaxed(&h->inbox) & INBOX_PTR_MASK) heap_drain_inbox(h);
  size_t slices = large_slices(size);
  size_t align_slices = alignment > SLICE_SIZE ? alignment >> SLICE_SHIFT : 1;
  /* The heap's own kept spans first, with no lock unless the span's tail
   * past its usable size may be being purged (tail_marked) and the block
   * reaches into it: then it is sized under the lock, as a span from the
   * set is. (A smaller size only adds to the tail; the purger reads the
   * size under the lock.) */
  page_t *pg = sampled || align_slices != 1 ? NULL : large_keep_take(h, slices);
  if (pg != NULL) {
    size_t usable = large_usable(pg, size);
    if (usable > pg->block_size && pg->tail_marked) span_large_resize(&h->segments, pg, size);
    else field_store_relaxed(&pg->block_size, (uint32_t)usable);
  } else {
    pg = large_span(h, slices, align_slices, size, sampled);
    if (pg == NULL) {
      heap_collect(h, true);
      pg = large_span(h, slices, align_slices, size, sampled);
      if (pg == NULL) return NULL;
    }
  }
  if (BRISK_HARDENED) guard_span_tail(pg);
  /* One block: inv 1, shift 0 make the index the offset itself, so only
   * offset 0 passes the fast path's index < reserved check. */
  pg->inv = 1;
  pg->shift = 0;
  pg->capacity = 1;
  pg->reserved = 1;
  pg->notify_at = 0;
  page_set_used(pg, 1);
  /* A sample's tail stays unpurged (DESIGN.md, "Where a sample lives");
   * the hardened build's block is its span up to the guard placed above.
   * Any other span came marked a large block's with its usable size, under
   * the set's lock, where the purger reads them when the tail is due. */
  if (sampled) pg->flags |= PAGE_LARGE;
  if (sampled || BRISK_HARDENED) pg->block_size = (uint32_t)large_usable(pg, size);
  heap_count_page(h, 1, true);
  return pg->start;
}

/* A thread's huge blocks belong to no heap: any thread unmaps them on free.
 * A first-class heap's huge blocks belong to it, so that destroying the
 * heap releases them too. */
static void *alloc_huge(heap_t *h, size_t size, size_t alignment) {
  page_t *pg = huge_alloc(size, alignment);
  if (pg == NULL) return NULL;
  if (h->kind == HEAP_KIND_USER) segment_set_adopt_huge(&h->segments, segment_of_page(pg));
  background_poll();
  return pg->start;
}

/* A block of class c from its pages (the class cache aside). */
static void *alloc_class_page(heap_t *h, unsigned c) {
  page_t *pg = h->queues[c].first;
  block_t *b = pg ? page_pop(pg) : NULL;
  if (BRISK_LIKELY(b != NULL)) return b;
  heap_housekeeping(h);
  pg = heap_find_page(h, c);
  if (pg == NULL) {
    heap_collect(h, true);
    pg = heap_find_page(h, c);
    if (pg == NULL) return NULL;
  }
  b = page_pop(pg);
  return b != NULL ? b : page_take_fresh(pg);
}

static void *alloc_class(heap_t *h, unsigned c) {
  if (c >= CLASS_CACHE_FIRST) {
    block_t *cached = class_cache_pop(h, c);
    if (cached != NULL) return cached;
  }
  return alloc_class_page(h, c);
}

/* A block of its own for `size` bytes at `alignment` (16 or less: none):
 * a large block where one can be, else a huge one. */
static void *alloc_large_or_huge(heap_t *h, size_t size, size_t alignment, bool sampled) {
  if (size == 0) size = 1;
  if (alignment <= 16) alignment = 0;
  if (size <= LARGE_MAX && alignment <= SEGMENT_SIZE / 4) return alloc_large(h, size, alignment, sampled);
  return alloc_huge(h, size, alignment);
}

static void *heap_alloc_counted(heap_t *h, size_t size, size_t alignment);
/* What a large or huge block of n bytes counts for while sampling: n
 * rounded up to whole OS pages (the profiler keeps one weight per page
 * count); below n when that overflows. */
static inline size_t sample_page_bytes(size_t n) { return OS_PAGE_CEIL(n); }

/* h's sampler, made on first use (NULL when the OS has no memory for it:
 * then h samples nothing), its countdowns drawn for the settings in
 * force. A thread's heap sends every allocation above DIRECT_MAX past
 * malloc_above's unsampled class-cache branch (cache_path_max) while it
 * samples. */
static BRISK_NOINLINE sampler_t *heap_sampler_state(heap_t *h) {
  sampler_t *s = h->sampler;
  if (BRISK_UNLIKELY(s == NULL)) {
    s = heap_meta_take(sizeof(sampler_t));
    if (s == NULL) return NULL;
    memset(s, 0, sizeof(*s));
    sampler_init(s, os_random_seed() ^ ((uintptr_t)h * 0x9e3779b97f4a7c15ull));
    sampler_attach(h);
    h->sampler = s;
  } else if (s->epoch != sampler_epoch()) {
    sampler_draw_all(s); /* a sampler was switched on or off, or its rate changed */
  }
  if (h->kind == HEAP_KIND_THREAD) h->cache_path_max = DIRECT_MAX;
  h->refill_mask = 0; /* every refill counted (sampled_refill) */
  return s;
}

BRISK_INLINE sampler_t *heap_sampler_of(heap_t *h) {
  if (BRISK_UNLIKELY(h->sampler == NULL || (h->cache_path_max > DIRECT_MAX && h->kind == HEAP_KIND_THREAD) ||
                     h->sampler->epoch != sampler_epoch()))
    return heap_sampler_state(h);
  return h->sampler;
}
/* While h samples, the refill that page_refill_pop leaves to the slow path
 * (it takes no local list in such a heap: refill_mask), of pg, h->direct's
 * page of a class up to DIRECT_MAX: the allocation counted, the local
 * list exposed up to the next sample. NULL if the sample falls on it or
 * there is nothing to refill from: heap_alloc_counted does the rest. */
static block_t *sampled_refill(heap_t *h, page_t *pg);

/* While the heaps sample, the common case of heap_alloc: a class with a
 * cache (above DIRECT_MAX), no sample, a cached block; else NULL. */
BRISK_INLINE block_t *sampling_cache_pop(heap_t *h, size_t size) {
  if (h->sampler == NULL || h->cache_path_max != DIRECT_MAX || size - (DIRECT_MAX + 1) >= MEDIUM_MAX - DIRECT_MAX)
    return NULL;
  return sampling_class_cache_pop(h, size_to_class(size));
}

/* c: a class with a cache (malloc_above found it empty). */
void *heap_alloc_class(heap_t *h, unsigned c) {
  if (BRISK_UNLIKELY(sampling_active())) {
    /* Most allocations while sampling: not the sample (the countdown does
     * not run out on it), and no list to cut (the class has no inline
     * path), so counted here. The sample goes the whole way. */
    sampler_t *s = heap_sampler_of(h);
    if (s == NULL || !sampler_count_class(s, c)) return heap_alloc_counted(h, class_size(c), 0);
    void *q = alloc_class_page(h, c);
    if (BRISK_UNLIKELY(q == NULL)) errno = ENOMEM;
    if (!h->segments.fresh_only) sampling_poll();
    return q;
  }
  void *p = alloc_class_page(h, c);
  if (BRISK_UNLIKELY(p == NULL)) errno = ENOMEM;
  return p;
}

void *heap_alloc(heap_t *h, size_t size) {
  if (BRISK_UNLIKELY(sampling_active())) {
    /* The counted refill of a class up to DIRECT_MAX (the common case of
     * a heap that samples), or a cached block */
    block_t *b = size <= DIRECT_MAX ? sampled_refill(h, h->direct[(size + 15) >> 4]) : sampling_cache_pop(h, size);
    if (b != NULL) return b;
    /* A large block the sample does not fall on: counted here, without
     * the general path (linear: 57,000 of 300,000 allocations, about 60
     * instructions each) */
    sampler_t *s = size - (MEDIUM_MAX + 1) < LARGE_MAX - MEDIUM_MAX ? heap_sampler_of(h) : NULL;
    int64_t left = s != NULL ? s->left[0] - (int64_t)sample_page_bytes(size) : 0;
    if (left <= 0) return heap_alloc_counted(h, size, 0);
    s->left[0] = left;
    void *p = alloc_large(h, size, 0, false);
    if (BRISK_UNLIKELY(p == NULL)) errno = ENOMEM;
    if (!h->segments.fresh_only) sampling_poll();
    return p;
  }
  void *p;
  if (BRISK_LIKELY(size <= MEDIUM_MAX)) p = alloc_class(h, size_to_class(size));
  else if (size <= LARGE_MAX) p = alloc_large(h, size, 0, false);
  else p = alloc_huge(h, size, 0);
  if (BRISK_UNLIKELY(p == NULL)) errno = ENOMEM;
  return p;
}

/* alignment: a power of two > 16. */
void *heap_alloc_aligned(heap_t *h, size_t alignment, size_t size) {
  if (BRISK_UNLIKELY(sampling_active())) return heap_alloc_counted(h, size, alignment);
  if (size == 0) size = 1;
  size_t rounded = (size + alignment - 1) & ~(alignment - 1);
  if (rounded < size) { errno = ENOMEM; return NULL; }
  void *p;
  if (rounded <= MEDIUM_MAX && alignment <= SLICE_SIZE) {
    /* A class whose size is a multiple of the alignment: its blocks are
     * aligned because pages start on 64 KiB boundaries (size_class.h). */
    unsigned c = size_to_class(rounded);
    if (class_size(c) % alignment == 0) {
      p = alloc_class(h, c);
      if (p == NULL) errno = ENOMEM;
      return p;
    }
  }
  p = alloc_large_or_huge(h, size, alignment, false);
  if (p == NULL) errno = ENOMEM;
  return p;
}

/* ---------------------------------------------------------------------------
 * Sampled allocations (sample.h). While a sampler is on, every
 * allocation that reaches the functions above comes here and is counted
 * against its class's countdown (large and huge blocks share one), except
 * a block of a class list that sampler_expose counted when it handed the list
 * to the inline path. The allocation that brings a countdown to zero is
 * sampled: it is served as a large block (or huge, as it would be anyway)
 * whose descriptor names its record. After an ordinary allocation of a
 * class with an inline path, its current page's list is cut where the
 * countdown will run out.
 * ------------------------------------------------------------------------- */
/* The current page of inline class c ran dry (its list ended, or was cut
 * by the profiler) and the owner's frees wait on its local list: they
 * become the list, and the first is taken, as page_refill_pop does for a
 * heap that does not sample, with the housekeeping on every
 * REFILL_SLOW_EVERY-th refill. NULL: the whole slow path. */
static block_t *sampling_refill(heap_t *h, page_t *pg) {
  if (!(pg->free == page_list_end(pg) || pg->free == page_list_cut(pg)) ||
      !page_holds_block_inline(pg, pg->local_free) || ++h->refill_tick % REFILL_SLOW_EVERY == 0)
    return NULL;
  page_take_local_free(pg);
  return page_pop(pg);
}

static block_t *sampled_refill(heap_t *h, page_t *pg) {
  sampler_t *s = h->sampler;
  unsigned c = pg->size_class;
  if (s == NULL || c == 0 || h->queues[c].first != pg || h->cache_path_max != DIRECT_MAX ||
      s->epoch != sampler_epoch())
    return NULL;
  int64_t left = s->left[c] - (int64_t)class_size(c);
  if (left <= 0) return NULL; /* the sample: the whole way */
  block_t *b = sampling_refill(h, pg);
  if (b == NULL) return NULL;
  s->left[c] = left;
  sampler_expose(s, c, pg);
  return b;
}

static void *heap_alloc_counted(heap_t *h, size_t size, size_t alignment) {
  sampler_t *s = heap_sampler_of(h);
  /* What the allocation takes without sampling: class c (0: large or huge)
   * and the bytes it counts for. */
  unsigned c = 0;
  size_t n = size == 0 ? 1 : size, counted;
  if (alignment > 16) {
    size_t r = (n + alignment - 1) & ~(alignment - 1);
    if (r < n) {
      errno = ENOMEM;
      return NULL;
    }
    if (r <= MEDIUM_MAX && alignment <= SLICE_SIZE && class_size(size_to_class(r)) % alignment == 0)
      c = size_to_class(r);
  } else if (n <= MEDIUM_MAX) {
    c = size_to_class(n);
  }
  if (c != 0) {
    counted = class_size(c);
  } else {
    counted = sample_page_bytes(n);
    if (counted < n) {
      errno = ENOMEM;
      return NULL;
    }
  }
  bool inline_class = c != 0 && c < CLASS_CACHE_FIRST;
  void *p = NULL;
  if (s != NULL) {
    page_t *pg = inline_class ? h->queues[c].first : NULL;
    if (pg != NULL && page_holds_block_inline(pg, pg->free)) return page_pop(pg); /* counted */
    s->left[c] -= (int64_t)counted;
    unsigned which = s->left[c] <= 0 && !s->busy ? sampler_expired(s, c) : 0;
    /* A guarded sample (guarded.h): blocks of a thread's heap only, which
     * are the malloc family's. */
    if ((which & SAMPLE_GUARD) && h->kind == HEAP_KIND_THREAD) p = guarded_alloc(size, alignment);
    if (p == NULL && (which & SAMPLE_PROFILE) && prof_recording()) {
      page_t *spg = NULL;
      /* A class with a cache: the block it would have given, in its page;
       * else (or when that page holds a sample) a large block. */
      if (c >= CLASS_CACHE_FIRST) p = page_sample_take(h, c, &spg);
      if (p == NULL) {
        p = alloc_large_or_huge(h, size, alignment, c != 0);
        if (p != NULL) spg = page_of(registry_lookup((uintptr_t)p), (uintptr_t)p);
      }
      if (p != NULL) {
        /* A large block sampled: its free by another thread must reach
         * this owner, not the background thread's parking (park_single),
         * which its flag says. */
        if (spg->flags & PAGE_LARGE) spg->flags |= PAGE_SAMPLE;
        sample_taken(s, spg, size, c, counted);
      }
    } else if (which == 0 && pg != NULL && (p = sampling_refill(h, pg)) != NULL) {
      sampler_expose(s, c, pg);
      return p;
    }
  }
  if (p == NULL) { /* not sampled, or no memory for a span: served as usual */
    p = c != 0 ? alloc_class(h, c) : alloc_large_or_huge(h, size, alignment, false);
    if (p != NULL && inline_class && s != NULL && h->queues[c].first != NULL)
      sampler_expose(s, c, h->queues[c].first);
  }
  if (BRISK_UNLIKELY(p == NULL)) errno = ENOMEM;
  if (!h->segments.fresh_only) sampling_poll();
  return p;
}
