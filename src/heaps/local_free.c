/* page_notify (local_free.h): the owner's free of a block once its page's
 * count of used blocks reaches notify_at. */
#include "heaps/local_free.h"

#include "heaps/large_keep.h"
#include "heaps/sample.h"
#include "runtime/background.h"
#include "segments/segment.h"

/* page_notify's other cases: the block goes onto the local list, then the
 * page changes list, is retired, or (a large or huge block) goes back. */
static BRISK_NOINLINE void page_notify_push(page_t *pg, block_t *b) {
  heap_t *h = atomic_load_explicit(&segment_of_page(pg)->heap, memory_order_relaxed);
  if (pg->flags & PAGE_CACHED) {
    page_push_local(pg, b);
    if (page_used(pg) <= pg->cached && pg->cached != 0)
      class_cache_evict_page(pg->ccache, pg);
    page_after_free(h, pg);
    return;
  }
  /* A large or huge block's span goes whole: counted back, not linked
   * (its lists stay empty) */
  page_add_used(pg, -1);
  if (pg->flags & PAGE_HUGE) { /* a first-class heap's huge block */
    if (BRISK_UNLIKELY(pg->prof_slot != 0)) sample_freed_owned(pg, h); /* sampled by the profiler */
    segment_set_free_huge(&h->segments, pg);
  } else if (pg->flags & PAGE_LARGE) {
    heap_count_page(h, -1, true);
    if (BRISK_UNLIKELY(pg->prof_slot != 0)) {
      sample_freed_owned(pg, h);
      span_free_uncached(&h->segments, pg);
    } else if (!large_keep_put(h, pg)) {
      span_free_large(&h->segments, pg);
    }
  } else {
    page_link_local(pg, b);
    page_after_free(h, pg);
  }
  background_poll(); /* memory may wait now, and no lock is held */
}

/* page_notify of a block of pg, which holds a sample: the sample's free is
 * told to the profiler; any block then goes on as page_notify takes it. */
static BRISK_NOINLINE void page_notify_sampled(heap_t *h, page_t *pg, block_t *b) {
  if (page_block_index(pg, (uintptr_t)b - (uintptr_t)pg->start) + 1 == pg->prof_block)
    page_sample_forget(h, pg);
  if (page_list_of(pg) != PAGE_LIST_BROKEN && class_cache_keep(pg->ccache, pg, b))
    return;
  page_notify_push(pg, b);
}

void page_notify(page_t *pg, block_t *b) {
  page_add_used(pg, 1); /* free_local counted b as back; it is not, yet */
  if (pg->flags & PAGE_CACHED) { /* first: every free of its blocks comes here */
    if (BRISK_LIKELY(pg->in_full < PAGE_LIST_BROKEN)) { /* on a list, no sample */
      if (class_cache_keep(pg->ccache, pg, b)) return;
    } else {
      /* read again here, so that the test above stays one compare with
       * memory (gcc would load the byte for both) */
      __asm__ volatile("" ::: "memory");
      if (pg->in_full & PAGE_HOLDS_SAMPLE) {
        page_notify_sampled(atomic_load_explicit(&segment_of_page(pg)->heap, memory_order_relaxed), pg, b);
        return;
      }
    }
  }
  page_notify_push(pg, b);
}
