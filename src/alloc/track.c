/* Blocks as a memory checker sees them (track.h): a build for valgrind's
 * memcheck or AddressSanitizer only; empty otherwise. */
#include "alloc/track.h"

#if BRISK_TRACK

#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "alloc/alloc.h"
#include "alloc/alloc_inline.h"
#include "alloc/visit.h"
#include "heaps/heap.h"
#include "os/platform.h"
#include "runtime/report.h"
#include "segments/registry.h"

#define TRACK_RIGHT 16 /* the red zone after a block, at least */
#define TRACK_LIVE ((uint64_t)0x6272736b6c697665) /* "brsklive", xored with the size */
#define TRACK_FREED ((uint64_t)0x6272736b66726565) /* "brskfree" */

/* The red zone before a block: 16 bytes, or the alignment asked for. */
static size_t left_zone(size_t alignment) { return alignment > 16 ? alignment : 16; }

/* The two words before the program's bytes at p: the left red zone's
 * length, and the size asked for xored with TRACK_LIVE (TRACK_FREED once
 * given back). */
static uint64_t *words_before(void *p) { return (uint64_t *)p - 2; }

typedef struct {
  uint8_t *core;  /* the core's block */
  size_t usable;  /* its usable size */
  size_t size;    /* what the program asked for; SIZE_MAX: given back */
} tracked_t;

/* Is p a block this layer handed out (live or given back)? */
static bool tracked(void *p, tracked_t *t) {
  t->core = alloc_block_of(p);
  if (t->core == NULL) return false;
  size_t left = (size_t)((uint8_t *)p - t->core);
  if (left < 16 || (left & (left - 1)) != 0) return false;
  t->usable = alloc_block_size(t->core);
  if (left + TRACK_RIGHT > t->usable) return false;
  uint64_t *w = words_before(p);
  if (w[0] != left) return false;
  if (w[1] == TRACK_FREED) {
    t->size = SIZE_MAX;
    return true;
  }
  uint64_t size = w[1] ^ TRACK_LIVE;
  if (size > t->usable - left - TRACK_RIGHT) return false;
  t->size = (size_t)size;
  return true;
}

/* tracked(), and a block given back already reported as the core reports
 * a double free. */
static bool tracked_live(void *p, brisk_fn_t fn, tracked_t *t) {
  if (!tracked(p, t)) return false;
  if (t->size == SIZE_MAX)
    report_error("%s(%p): pointer into memory that is not in use (freed twice?)", fn_name(fn), p);
  return true;
}

void *track_alloc(heap_t *target, size_t size, size_t alignment, bool zero) {
  size_t left = left_zone(alignment);
  if (size > SIZE_MAX - left - TRACK_RIGHT) {
    errno = ENOMEM;
    return NULL;
  }
  size_t n = size + left + TRACK_RIGHT;
  checker_quiet_begin();
  uint8_t *core;
  if (target == NULL) core = alignment > 16 ? alloc_aligned(alignment, n) : malloc_inline(n);
  else core = alignment > 16 ? heap_alloc_aligned(target, alignment, n) : heap_alloc(target, n);
  uint8_t *p = NULL;
  if (core != NULL) {
    p = core + left;
    words_before(p)[0] = left;
    words_before(p)[1] = (uint64_t)size ^ TRACK_LIVE;
    checker_no_access(core, alloc_block_size(core));
    checker_block_alloc(p, size, zero);
    if (zero) memset(p, 0, size);
  }
  checker_quiet_end();
  return p;
}

/* A live block given back: marked so, all of its core block inaccessible. */
static void block_dies(void *p, const tracked_t *t) {
  words_before(p)[1] = TRACK_FREED;
  checker_no_access(t->core, t->usable);
}

/* ---------------------------------------------------------------------------
 * The quarantine: a freed block goes back to the core only after
 * QUARANTINE_BLOCKS more frees or QUARANTINE_BYTES more bytes, so that a
 * use after free is caught even after the program has allocated again.
 * One ring for the process; its lock is a leaf (nothing is taken while it
 * is held: what leaves the ring is freed after it is released).
 * ------------------------------------------------------------------------- */
#define QUARANTINE_BLOCKS 4096
#define QUARANTINE_BYTES ((size_t)64 << 20)
#define QUARANTINE_OUT 8 /* the most a free hands back to the core */

typedef struct {
  void *core;
  size_t bytes;
  brisk_fn_t fn;
} held_t;

static struct {
  brisk_lock_t lock;
  uint32_t first, count;
  size_t bytes;
  held_t ring[QUARANTINE_BLOCKS];
} quarantine = {.lock = BRISK_LOCK_INIT};

static void quarantine_put(void *core, size_t bytes, brisk_fn_t fn) {
  held_t out[QUARANTINE_OUT];
  unsigned n = 0;
  lock_acquire(&quarantine.lock);
  while (n < QUARANTINE_OUT && quarantine.count > 0 &&
         (quarantine.count == QUARANTINE_BLOCKS || quarantine.bytes + bytes > QUARANTINE_BYTES)) {
    out[n++] = quarantine.ring[quarantine.first];
    quarantine.bytes -= out[n - 1].bytes;
    quarantine.first = (quarantine.first + 1) % QUARANTINE_BLOCKS;
    quarantine.count--;
  }
  bool held = quarantine.count < QUARANTINE_BLOCKS;
  if (held) {
    quarantine.ring[(quarantine.first + quarantine.count) % QUARANTINE_BLOCKS] = (held_t){core, bytes, fn};
    quarantine.count++;
    quarantine.bytes += bytes;
  }
  lock_release(&quarantine.lock);
  if (!held) free_inline(core, fn);
  for (unsigned i = 0; i < n; i++) free_inline(out[i].core, out[i].fn);
}

/* h is destroyed: its blocks leave the ring without being freed. */
static void quarantine_drop_heap(heap_t *h) {
  lock_acquire(&quarantine.lock);
  uint32_t kept = 0;
  size_t bytes = 0;
  for (uint32_t i = 0; i < quarantine.count; i++) {
    held_t e = quarantine.ring[(quarantine.first + i) % QUARANTINE_BLOCKS];
    segment_t *seg = registry_lookup((uintptr_t)e.core);
    if (seg != NULL && atomic_load_explicit(&seg->heap, memory_order_relaxed) == h) continue;
    quarantine.ring[(quarantine.first + kept++) % QUARANTINE_BLOCKS] = e;
    bytes += e.bytes;
  }
  quarantine.count = kept;
  quarantine.bytes = bytes;
  lock_release(&quarantine.lock);
}

static void quarantine_before_fork(void) { lock_acquire(&quarantine.lock); }
static void quarantine_after_fork(void) { lock_release(&quarantine.lock); }
static void quarantine_in_child(void) { lock_reset(&quarantine.lock); }

__attribute__((constructor)) static void quarantine_start(void) {
  /* Without them, a fork while another thread holds the ring's lock
   * would leave it locked in the child: said, since frees would then hang. */
  if (os_atfork(quarantine_before_fork, quarantine_after_fork, quarantine_in_child) != 0)
    report_warning("memory checker build: no fork handlers for the quarantine of freed blocks");
}

void track_free(void *p, brisk_fn_t fn) {
  if (p == NULL) return;
  /* memcheck checks the free itself (a block it does not know: an
   * invalid free, with where it was freed before), so not quietly. */
  if (alloc_owns(p)) checker_block_free(p);
  checker_quiet_begin();
  tracked_t t;
  if (tracked_live(p, fn, &t)) {
    if (t.size != SIZE_MAX) {
      block_dies(p, &t);
      quarantine_put(t.core, t.usable, fn);
    }
  } else {
    free_inline(p, fn); /* not a block of this layer's: the core's checks report it */
  }
  checker_quiet_end();
}

size_t track_usable_size(const void *p, brisk_fn_t fn) {
  tracked_t t;
  size_t size;
  checker_quiet_begin();
  if (tracked_live((void *)p, fn, &t)) size = t.size == SIZE_MAX ? 0 : t.size;
  else size = usable_size_inline(p, fn); /* foreign, bad: the core's */
  checker_quiet_end();
  return size;
}

void *track_realloc(heap_t *target, void *p, size_t size, brisk_fn_t fn) {
  if (p == NULL) return track_alloc(target, size, 0, false);
  brisk_fn_t free_fn = fn == FN_REALLOC ? FN_REALLOC : FN_BRISK_REALLOC;
  if (size == 0) {
    track_free(p, free_fn);
    return NULL;
  }
  tracked_t t;
  size_t old;
  checker_quiet_begin();
  if (tracked_live(p, fn, &t)) {
    old = t.size;
  } else {
    old = foreign_usable_size(p); /* glibc's block, moved into brisk's */
    if (old == 0) {
      void *r = alloc_realloc_in(target, p, size, fn); /* reports it */
      checker_quiet_end();
      return r;
    }
  }
  checker_quiet_end();
  if (old == SIZE_MAX) return NULL; /* reported */
  /* Always a new block, as memcheck's own realloc does: a pointer kept to
   * the old one is a use after free. */
  void *q = track_alloc(target, size, 0, false);
  if (q == NULL) return NULL;
  memcpy(q, p, old < size ? old : size);
  track_free(p, free_fn);
  return q;
}

void *track_calloc(size_t count, size_t size) {
  size_t total;
  if (__builtin_mul_overflow(count, size, &total)) {
    errno = ENOMEM;
    return NULL;
  }
  return track_alloc(NULL, total, 0, true);
}

void *track_rezalloc(void *p, size_t size) {
  if (p == NULL) return track_alloc(NULL, size, 0, true);
  tracked_t t;
  checker_quiet_begin();
  size_t old = tracked(p, &t) ? t.size : foreign_usable_size(p);
  checker_quiet_end();
  void *q = track_realloc(NULL, p, size, FN_BRISK_REZALLOC);
  if (q != NULL && old != SIZE_MAX && size > old) memset((uint8_t *)q + old, 0, size - old);
  return q;
}

void *track_expand(void *p, size_t size) {
  if (p == NULL) return NULL;
  tracked_t t;
  checker_quiet_begin();
  void *r = !tracked_live(p, FN_BRISK_EXPAND, &t) ? alloc_expand(p, size) /* the core reports */
            : t.size != SIZE_MAX && size <= t.size ? p : NULL;
  checker_quiet_end();
  return r;
}

/* A live block of a heap being destroyed: the visit gives its core block,
 * whose left red zone is 16 bytes or its alignment. */
static int block_forgotten(brisk_heap_t *heap, void *core, size_t usable, void *arg) {
  for (size_t left = 16; left + TRACK_RIGHT <= usable; left *= 2) {
    tracked_t t;
    uint8_t *p = (uint8_t *)core + left;
    if (tracked(p, &t) && t.size != SIZE_MAX) {
      checker_block_free(p);
      block_dies(p, &t);
      return 0;
    }
  }
  return 0;
}

void track_heap_destroy(heap_t *h) {
  checker_quiet_begin();
  quarantine_drop_heap(h);
  heap_visit(h, block_forgotten, NULL);
  heap_destroy(h);
  checker_quiet_end();
}

#endif
