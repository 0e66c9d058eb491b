#include "alloc/free.h"

#include <errno.h>

#include "base/atomics.h"
#include "base/counters.h"
#include "guarded/guarded.h"
#include "heaps/heap.h"
#include "heaps/sample.h"
#include "heaps/thread.h"
#include "os/platform.h"
#include "runtime/background.h"
#include "runtime/report.h"
#include "segments/huge.h"
#include "segments/registry.h"

static const char *const fn_names[FN_COUNT] = {
    [FN_FREE] = "free",
    [FN_REALLOC] = "realloc",
    [FN_USABLE_SIZE] = "malloc_usable_size",
    [FN_FREE_SIZED] = "free_sized",
    [FN_BRISK_FREE] = "brisk_free",
    [FN_BRISK_REALLOC] = "brisk_realloc",
    [FN_BRISK_USABLE_SIZE] = "brisk_usable_size",
    [FN_BRISK_FREE_SIZED] = "brisk_free_sized",
    [FN_DELETE] = "operator delete",
    [FN_DELETE_ARRAY] = "operator delete[]",
    [FN_DELETE_SIZED] = "operator delete",
    [FN_DELETE_ARRAY_SIZED] = "operator delete[]",
    [FN_BRISK_EXPAND] = "brisk_expand",
    [FN_BRISK_REZALLOC] = "brisk_rezalloc",
};

const char *fn_name(brisk_fn_t fn) { return fn < FN_COUNT ? fn_names[fn] : "free"; }

size_t page_usable_size(const page_t *pg) {
  if (pg->flags & PAGE_HUGE) return pg->span_bytes;
  return pg->block_size;
}

static void report_not_ours(const void *p, brisk_fn_t fn) {
  report_error("%s(%p): pointer was not allocated by brisk", fn_name(fn), p);
}

static void report_not_in_use(const void *p, brisk_fn_t fn) {
  report_error("%s(%p): pointer into memory that is not in use (freed twice?)", fn_name(fn), p);
}

bool block_is_free_here(page_t *pg, const void *p) {
  const block_t *b = p;
  return block_looks_free(b) && page_lists_contain(pg, b);
}

page_t *block_check(const void *p, brisk_fn_t fn, segment_t **seg_out) {
  return block_check_in(registry_lookup((uintptr_t)p), p, fn, seg_out);
}

page_t *block_check_in(segment_t *seg, const void *p, brisk_fn_t fn, segment_t **seg_out) {
  uintptr_t a = (uintptr_t)p;
  *seg_out = seg;
  if (seg == NULL) return NULL;
  if (seg->kind == SEGMENT_RETIRED) {
    if (foreign_usable_size(p) != 0) { /* the address is glibc's now */
      *seg_out = NULL;
      return NULL;
    }
    if (seg == &brisk_segment_destroyed)
      report_error("%s(%p): block of a destroyed heap (its memory went back to the OS)",
                   fn_name(fn), p);
    else
      report_error("%s(%p): pointer into memory that brisk returned to the OS (freed twice?)",
                   fn_name(fn), p);
    return NULL;
  }
  if (seg->kind == SEGMENT_HUGE && a - (uintptr_t)seg >= field_load_relaxed(&seg->mapped_size)) {
    /* Past the end of a huge mapping, in the rest of its last 4 MiB. */
    *seg_out = NULL;
    return NULL;
  }
  page_t *pg = page_of(seg, a);
  if (!(pg->flags & PAGE_IN_USE)) {
    if (seg->destroyed) {
      report_error("%s(%p): block of a destroyed heap", fn_name(fn), p);
      return NULL;
    }
    if (seg->kind == SEGMENT_NORMAL && ((a >> SLICE_SHIFT) & (SLICES_PER_SEGMENT - 1)) == 0)
      report_not_ours(p, fn);
    else
      report_not_in_use(p, fn);
    return NULL;
  }
  uintptr_t start = (uintptr_t)pg->start;
  if (a < start) {
    report_not_ours(p, fn);
    return NULL;
  }
  uintptr_t off = a - start;
  if (pg->flags & (PAGE_LARGE | PAGE_HUGE)) {
    if (off != 0) {
      report_error("%s(%p): interior pointer, %zu bytes into the block at %p (size class %zu)",
                   fn_name(fn), p, (size_t)off, (void *)start, page_usable_size(pg));
      return NULL;
    }
    return pg;
  }
  if (page_block_index(pg, off) < pg->capacity) return pg; /* a block start */
  size_t bs = pg->block_size;
  size_t idx = off / bs;
  if (idx >= pg->capacity) {
    report_not_ours(p, fn);
    return NULL;
  }
  if (idx * bs != off) {
    report_error("%s(%p): interior pointer, %zu bytes into the block at %p (size class %zu)",
                 fn_name(fn), p, (size_t)(off - idx * bs), (void *)(start + idx * bs), bs);
    return NULL;
  }
  return pg;
}

BRISK_INLINE bool page_is_single_block(const page_t *pg) {
  return (pg->flags & (PAGE_LARGE | PAGE_HUGE)) != 0;
}

/* Every case of a free into another thread's heap that free_remote does not
 * take itself: a segment without a heap, a thread without one, a slot that
 * collects for another heap or generation, the block freed just before. */
static BRISK_NOINLINE void free_remote_uncommon(segment_t *seg, page_t *pg, block_t *b,
                                                brisk_fn_t fn, bool urgent) {
  heap_t *dst = atomic_load_explicit(&seg->heap, memory_order_relaxed);
  if (dst == NULL) {
    report_not_in_use(b, fn);
    return;
  }
  if (pg->flags & PAGE_HUGE) {
    /* A huge block goes back to its heap at once, under the set's lock,
     * whatever its owner does (it may sleep, or never call brisk again).
     * (A large block goes through the inbox at once, as a batch of its
     * own: a lock taken by both sides on every block of a producer and
     * consumer cost more than the push; an owner that does not take it
     * in has it freed by the background thread, park.c.) */
    int r = span_free_foreign(&dst->segments, seg, pg, b, HEAP_TID_VISITING);
    if (r == FOREIGN_FREED) {
      STAT_COUNT(remote_frees, 1);
      background_poll();
      return;
    }
    if (r == FOREIGN_NOT_IN_USE) {
      report_not_in_use(b, fn);
      return;
    }
    /* FOREIGN_BATCH: through the inbox, as a small block */
  }
  /* The block its page's remote list took last (a block that looked
   * free goes to the inbox, marked, and its link is written over). */
  if (page_takes_remote(pg) && (atomic_load_relaxed(page_remote_word(pg)) & PAGE_REMOTE_PTR) == (uintptr_t)b) {
    report_error("%s(%p): double free (size class %zu)", fn_name(fn), (void *)b, page_usable_size(pg));
    return;
  }
  uint32_t gen = seg->heap_generation;
  heap_t *me = brisk_tls_heap;
  if (me->kind == HEAP_KIND_STATIC) {
    me = thread_heap_for_free();
    if (me == NULL) {
      heap_remote_free_direct(dst, gen, b);
      return;
    }
  }
  outbox_slot_t *slot = heap_outbox_slot(me, dst);
  bool current = slot->dst == dst && slot->generation == gen;
  /* The block freed last to this heap, in this life of the heap (a slot
   * of a destroyed heap may still name memory that is in use again). */
  if (current && slot->head == b) {
    report_error("%s(%p): double free (size class %zu)", fn_name(fn), (void *)b,
                 page_usable_size(pg));
    return;
  }
  if (!current) heap_outbox_retarget(slot, dst, gen);
  /* Medium blocks are handed over at once: a batch of them held by a
   * thread that goes idle would keep megabytes from their owner. (A
   * large or huge block here is one the owner must take back itself.) */
  heap_remote_free(me, slot, b, urgent || page_is_single_block(pg) || pg->block_size > SMALL_MAX);
}

/* A block of another thread's heap, checked to be a block start. Inlined
 * into free_other: with the fast path's checks, this is the
 * whole cost of a free that crosses threads, apart from the owner's drain.
 * Every uncommon case is one call in tail position, so that the common one
 * saves no registers. */
BRISK_INLINE void free_remote(segment_t *seg, page_t *pg, block_t *b, brisk_fn_t fn) {
  /* A small block of a thread's heap: onto its page's own list, unless the
   * list is closed or the block looks free already (only the owner may
   * look at its lists: the inbox takes it, marked, and the owner checks). */
  if (BRISK_LIKELY(seg->page_lists && pg->block_size - 1u < (uint32_t)DIRECT_MAX && !block_looks_free(b))) {
    int r = page_remote_push(pg, b);
    if (BRISK_LIKELY(r == PAGE_PUSHED)) return;
    /* A page on the full list: its owner is told at once. */
    free_remote_uncommon(seg, pg, b, fn, r == PAGE_PUSH_NOTIFY);
    return;
  }
  heap_t *dst = atomic_load_explicit(&seg->heap, memory_order_relaxed);
  heap_t *me = brisk_tls_heap;
  outbox_slot_t *slot = heap_outbox_slot(me, dst);
  /* block_size - 1 wraps for a huge block over 4 GiB (block_size 0): a
   * large, huge or medium block is one compare */
  /* (A static heap's slots collect for no heap: its thread goes the
   * uncommon way. The block's life is its segment's: no line of dst's is
   * read.) */
  if (BRISK_UNLIKELY(dst == NULL || slot->dst != dst || slot->head == b ||
                     pg->block_size - 1u >= (uint32_t)SMALL_MAX || slot->generation != seg->heap_generation)) {
    free_remote_uncommon(seg, pg, b, fn, false);
    return;
  }
  heap_remote_free(me, slot, b, false);
}

static BRISK_NOINLINE void free_checked(void *p, segment_t *seg_found, brisk_fn_t fn);

void free_other(void *p, segment_t *seg, page_t *pg, uint64_t idx, brisk_fn_t fn) {
  /* A block start (the fast path's exact index below the page's capacity:
   * a pointer above the registry's space never has one, its offset from
   * any page is at least 2^47) in an ordinary segment. */
  if (BRISK_LIKELY(idx < pg->capacity && seg->kind == SEGMENT_NORMAL)) {
    free_remote(seg, pg, (block_t *)p, fn);
    return;
  }
  free_slow(p, seg, fn);
}

void free_slow(void *p, segment_t *seg_found, brisk_fn_t fn) {
  /* The fast path's wrapped lookup names some segment even for a pointer
   * above the covered address space; such a pointer is nobody's block. */
  if ((uintptr_t)p >> BRISK_ADDRESS_BITS) seg_found = NULL;
  free_checked(p, seg_found, fn);
}

/* Every check, with its report; seg_found is p's registry entry. */
static void free_checked(void *p, segment_t *seg_found, brisk_fn_t fn) {
  segment_t *seg;
  page_t *pg = block_check_in(seg_found, p, fn, &seg);
  if (pg == NULL) {
    if (seg == NULL) free_unowned(p, fn);
    return;
  }
  if ((pg->flags & PAGE_HUGE) && atomic_load_explicit(&seg->heap, memory_order_relaxed) == NULL) {
    if (BRISK_UNLIKELY(pg->prof_slot != 0)) sample_freed(pg, thread_heap()); /* sampled */
    huge_free(pg);
    background_poll();
    return;
  }
  block_t *b = (block_t *)p;
  if (atomic_load_relaxed(&seg->owner_tid) == os_thread_id()) {
    /* Only the owner may read the page's lists and counts. A large or
     * huge block is its span's start (block_check_in), and a huge one over
     * 4 GiB has no block_size to divide by. */
    if (!page_is_single_block(pg) && (size_t)((uint8_t *)p - pg->start) / pg->block_size >= pg->reserved) {
      report_not_in_use(p, fn);
      return;
    }
    if (block_looks_free(b) && page_lists_contain(pg, b)) {
      report_error("%s(%p): double free (size class %zu)", fn_name(fn), p, page_usable_size(pg));
      return;
    }
    free_local(pg, b);
    return;
  }
  free_remote(seg, pg, b, fn);
}

/* ---------------------------------------------------------------------------
 * Foreign memory: blocks of glibc's malloc (allocated before brisk was the
 * process's malloc, or through __libc_malloc), recognised by a plausible
 * chunk header read without faulting, and handed back to glibc.
 * ------------------------------------------------------------------------- */
extern void __libc_free(void *) __attribute__((weak));

/* 1 exactly when this build replaces the standard malloc family:
 * override.c's definition (1) then takes the place of this weak one (0).
 * Until override.c's constructor has looked at which malloc the process
 * calls (-1), a build with it assumes it is the process's malloc
 * (preloaded, a foreign block may be freed that early), and a build
 * without it (brisk linked under its own names only) never is. Not const:
 * the compiler would take a const weak definition's 0 for the value. */
__attribute__((weak, visibility("hidden"))) char brisk_override_present = 0;
static _Atomic(int) interposing = -1;

void foreign_set_interposing(bool v) { atomic_store_relaxed(&interposing, v ? 1 : 0); }

static bool brisk_is_process_malloc(void) {
  int v = atomic_load_relaxed(&interposing);
  return v < 0 ? brisk_override_present != 0 : v != 0;
}

size_t foreign_usable_size(const void *p) {
  if (!brisk_is_process_malloc() || __libc_free == NULL) return 0;
  uintptr_t a = (uintptr_t)p;
  if (a < OS_PAGE_BYTES || (a & 15) != 0) return 0;
  uint64_t hdr[2]; /* prev_size, size | flags */
  if (!os_probe_read((const void *)(a - 16), hdr, sizeof(hdr))) return 0;
  uint64_t size = hdr[1] & ~(uint64_t)7;
  if (size < 32 || (size & 15) != 0 || size > ((uint64_t)1 << 46)) return 0;
  if (hdr[1] & 2) { /* mmapped chunk: a whole mapping of its own */
    uint64_t prev = hdr[0];
    if (((a - 16 - prev) & 4095) != 0 || ((prev + size) & 4095) != 0) return 0;
    return (size_t)(size - 16);
  }
  uint64_t next[2];
  if (!os_probe_read((const void *)(a - 16 + size), next, sizeof(next))) return 0;
  if ((next[1] & 1) == 0) return 0; /* the next chunk must see this one in use */
  return (size_t)(size - 8);
}

void foreign_free(void *p) {
  STAT_COUNT(foreign_frees, 1);
  __libc_free(p);
}

void free_unowned(void *p, brisk_fn_t fn) {
  if (p == NULL) return;
  if (guarded_owns(p)) {
    guarded_free(p, fn_name(fn));
    return;
  }
  if (foreign_usable_size(p) != 0) {
    foreign_free(p);
    return;
  }
  report_not_ours(p, fn);
}

size_t block_usable_size(const void *p, brisk_fn_t fn) {
  if (p == NULL) return 0;
  segment_t *seg;
  page_t *pg = block_check(p, fn, &seg);
  if (pg != NULL) return page_usable_size(pg);
  if (seg == NULL) {
    if (guarded_owns(p)) return guarded_usable_size(p, fn_name(fn));
    size_t n = foreign_usable_size(p);
    if (n == 0) report_not_ours(p, fn);
    return n;
  }
  return 0;
}
