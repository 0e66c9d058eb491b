/* Guarded samples (guarded.h): the region of slots, their quarantine, and
 * the report of a fault in one. */
#include "guarded/guarded.h"

#include <string.h>

#include "base/counters.h"
#include "os/checker.h"
#include "os/platform.h"
#include "profiler/stackwalk.h"
#include "runtime/options.h"
#include "runtime/report.h"

#define SLOT_BYTES ((size_t)64 * 1024)
#define PAGE OS_PAGE_BYTES
#define GUARD_FRAMES 24
#define NO_SLOT UINT32_MAX

enum {
  SLOT_FREE,  /* closed, in the FIFO of free slots */
  SLOT_TAKEN, /* out of the FIFO, being opened: its record is rewritten */
  SLOT_LIVE,  /* its block is the program's (its record is set first) */
  SLOT_FREED, /* closed again, in the FIFO: a use after free is caught */
  SLOT_SPENT, /* its block freed, but its pages could not be closed: never
                 used again */
};

typedef struct {
  uintptr_t pc[GUARD_FRAMES];
  uint32_t n;
  uintptr_t thread;
} guarded_stack_t;

typedef struct {
  _Atomic(uint32_t) state;
  _Atomic(uint32_t) opened; /* a page of it was opened after a report
                               (BRISK_GUARD_CONTINUE): never used again once
                               its block, if any, is freed */
  uint32_t next;         /* in the FIFO */
  uintptr_t block;
  size_t size;
  uintptr_t open;        /* the pages opened for the block */
  size_t open_bytes;
  size_t slack;          /* bytes after the block that hold SLACK_BYTE */
  guarded_stack_t alloc, free;
} slot_t;

_Atomic(uintptr_t) guarded_base;
size_t guarded_size;

/* Under `lock`: the region's making, and the FIFO of closed slots, the
 * oldest freed first (so that a freed block stays closed as long as the
 * slot count allows). The lock is a leaf, held for no system call but the
 * region's making. */
static brisk_lock_t lock = BRISK_LOCK_INIT;
static slot_t *slots;
static uint32_t slot_count;
static uint32_t fifo_first = NO_SLOT, fifo_last = NO_SLOT;
static uint32_t never_used; /* slots from here on have never held a block */
static bool setup_failed;

static bool on_fault(void *addr, int access);

static void fifo_push(uint32_t i) {
  slots[i].next = NO_SLOT;
  if (fifo_last == NO_SLOT) fifo_first = i;
  else slots[fifo_last].next = i;
  fifo_last = i;
}

/* A slot never used, else the oldest freed one: a freed block stays closed
 * as long as the slots allow, and a record is touched only when its slot is
 * first used. */
static uint32_t fifo_pop(void) {
  if (never_used < slot_count) return never_used++;
  uint32_t i = fifo_first;
  if (i == NO_SLOT) return NO_SLOT;
  fifo_first = slots[i].next;
  if (fifo_first == NO_SLOT) fifo_last = NO_SLOT;
  return i;
}

/* The region, its slots' records and the fault handler, at the first
 * guarded allocation (under the lock). */
static bool region_setup(void) {
  if (setup_failed) return false;
  uint32_t n = (uint32_t)option_load(guard_slots);
  size_t bytes = (size_t)n * SLOT_BYTES + PAGE; /* and the last slot's guard */
  size_t meta_bytes = (n * sizeof(slot_t) + PAGE - 1) & ~(PAGE - 1);
  void *region, *meta;
  if (os_map_aligned(bytes, PAGE, &region) != 0) goto fail;
  if (os_protect(region, bytes, false) != 0 || os_map_aligned(meta_bytes, PAGE, &meta) != 0) {
    os_unmap(region, bytes);
    goto fail;
  }
  slots = meta;
  slot_count = n;
  int err = os_fault_handler(on_fault);
  if (err != 0)
    report_warning("guarded samples: no handler for memory faults (%s): a bad access ends the process unreported",
                   os_error_name(err));
  guarded_size = bytes;
  atomic_store_explicit(&guarded_base, (uintptr_t)region, memory_order_release);
  return true;
fail:
  setup_failed = true;
  report_warning("guarded samples: the OS refused %zu bytes for the guarded slots: none are made", bytes);
  return false;
}

static void stack_take(guarded_stack_t *s) {
  walk_memo_t memo;
  memset(&memo, 0, sizeof(memo));
  s->n = (uint32_t)unwind_backtrace(s->pc, GUARD_FRAMES, &memo);
  s->thread = os_thread_id();
}

/* The alignment a block of `size` bytes needs: that of the largest object
 * with a fundamental alignment that fits in it (C17 7.22.3), the largest
 * power of two not above the size, up to 16. A block that ends at the
 * guard page is then up to 15 bytes short of it: those bytes (its slack)
 * hold SLACK_BYTE, checked when the block is freed. */
static size_t fundamental_alignment(size_t size) {
  size_t a = 1;
  while (a < 16 && a * 2 <= size) a *= 2;
  return a;
}

#define SLACK_BYTE 0xbd

/* The first byte of the block's slack that is not SLACK_BYTE, or NULL. */
static const uint8_t *slack_written(const slot_t *s) {
  const uint8_t *b = (const uint8_t *)s->block + s->size;
  for (size_t i = 0; i < s->slack; i++)
    if (b[i] != SLACK_BYTE) return b + i;
  return NULL;
}

/* A fork while another thread holds the lock would leave it held in the
 * child. */
static void before_fork(void) { lock_acquire(&lock); }
static void after_fork(void) { lock_release(&lock); }
static void in_child(void) { lock_reset(&lock); }

__attribute__((constructor)) static void guarded_fork_handlers(void) {
  if (os_atfork(before_fork, after_fork, in_child) != 0)
    report_warning("guarded samples: no fork handlers: a fork while a thread frees a guarded block may hang the child");
}

void *guarded_alloc(size_t size, size_t alignment) {
  if (BRISK_TRACK || size > GUARDED_MAX || alignment > PAGE) return NULL;
  lock_acquire(&lock);
  if (slots == NULL && !region_setup()) {
    lock_release(&lock);
    return NULL;
  }
  uint32_t i;
  do i = fifo_pop(); /* a slot opened after a report is dropped */
  while (i != NO_SLOT && atomic_load_explicit(&slots[i].opened, memory_order_relaxed));
  /* Not LIVE until its record is the new block's: a stale free of the
   * block the slot held before is then reported, never taken for this one. */
  if (i != NO_SLOT) atomic_store_explicit(&slots[i].state, SLOT_TAKEN, memory_order_relaxed);
  lock_release(&lock);
  if (i == NO_SLOT) return NULL; /* every slot live: served as usual */
  slot_t *s = &slots[i];
  uintptr_t start = atomic_load_explicit(&guarded_base, memory_order_relaxed) + i * SLOT_BYTES;
  uintptr_t data = start + PAGE, end = start + SLOT_BYTES;
  size_t n = size == 0 ? 1 : size;
  uintptr_t block;
  bool under = option_load(guard_underflow) != 0;
  if (under) {
    block = data;
    s->open = data;
    s->open_bytes = (n + PAGE - 1) & ~(PAGE - 1);
  } else {
    size_t a = alignment > 16 ? alignment : fundamental_alignment(n);
    block = (end - n) & ~(uintptr_t)(a - 1);
    s->open = block & ~(uintptr_t)(PAGE - 1);
    s->open_bytes = end - s->open;
  }
  if (os_protect((void *)s->open, s->open_bytes, true) != 0) {
    lock_acquire(&lock); /* served as usual instead */
    atomic_store_explicit(&s->state, SLOT_FREE, memory_order_relaxed);
    fifo_push(i);
    lock_release(&lock);
    return NULL;
  }
  s->block = block;
  s->size = size;
  s->free.n = 0;
  s->slack = under ? 0 : end - (block + size);
  memset((void *)(block + size), SLACK_BYTE, s->slack);
  stack_take(&s->alloc);
  atomic_store_explicit(&s->state, SLOT_LIVE, memory_order_release);
  STAT_COUNT(guarded_allocs, 1);
  STAT_LEVEL(guarded_live, 1);
  return (void *)block;
}

static void print_stack(const char *what, const guarded_stack_t *st) {
  report_info("  %s by thread %p at:", what, (void *)st->thread);
  for (uint32_t k = 0; k < st->n; k++) {
    const char *name = NULL, *object = NULL;
    uintptr_t off = 0, object_off = 0;
    unwind_symbol(st->pc[k], &name, &off, &object, &object_off);
    if (name != NULL)
      report_info("    #%d %p %s+%p (%s+%p)", (int)k, (void *)st->pc[k], name, (void *)off,
                  object ? object : "?", (void *)object_off);
    else
      report_info("    #%d %p (%s+%p)", (int)k, (void *)st->pc[k], object ? object : "?", (void *)object_off);
  }
}

static void print_stacks(const slot_t *s, bool freed) {
  print_stack("allocated", &s->alloc);
  if (freed) print_stack("freed", &s->free);
}

/* The slot that holds p, or NULL. */
static slot_t *slot_of(const void *p) {
  uintptr_t base = atomic_load_explicit(&guarded_base, memory_order_acquire);
  uintptr_t i = ((uintptr_t)p - base) / SLOT_BYTES;
  return base != 0 && i < slot_count ? &slots[i] : NULL;
}

/* p is a live guarded block's start: its slot; else NULL, reported. */
static slot_t *live_slot(const void *p, const char *fn) {
  slot_t *s = slot_of(p);
  uint32_t state = s ? atomic_load_explicit(&s->state, memory_order_acquire) : SLOT_FREE;
  if (s != NULL && state == SLOT_LIVE && s->block == (uintptr_t)p) return s;
  if (s != NULL && state == SLOT_FREED && s->block == (uintptr_t)p) {
    report_error_only("%s(%p): double free of a guarded block (%zu bytes)", fn, p, s->size);
    print_stacks(s, true);
    report_abort_if_asked();
  } else if (s != NULL && state == SLOT_LIVE && (uintptr_t)p - s->block < s->size) {
    report_error("%s(%p): interior pointer, %zu bytes into the guarded block at %p (%zu bytes)", fn, p,
                 (size_t)((uintptr_t)p - s->block), (void *)s->block, s->size);
  } else {
    report_error("%s(%p): pointer into a guarded slot that holds no block there", fn, p);
  }
  return NULL;
}

void guarded_free(void *p, const char *fn) {
  lock_acquire(&lock);
  slot_t *s = slot_of(p);
  bool live = s != NULL && atomic_load_explicit(&s->state, memory_order_acquire) == SLOT_LIVE &&
              s->block == (uintptr_t)p;
  if (live) atomic_store_explicit(&s->state, SLOT_FREED, memory_order_release);
  lock_release(&lock);
  if (!live) {
    live_slot(p, fn); /* reports */
    return;
  }
  stack_take(&s->free);
  STAT_LEVEL(guarded_live, -1);
  const uint8_t *written = slack_written(s);
  if (written != NULL) {
    report_error_only("heap overflow: %p, %zu bytes past the end of the guarded block at %p (%zu bytes), was "
                      "written (found when the block was freed, by %s)",
                      (void *)written, (size_t)((uintptr_t)written - s->block - s->size), (void *)s->block,
                      s->size, fn);
    print_stacks(s, true);
    report_abort_if_asked();
  }
  /* Closed, and its pages given back (they read as zero when reused). */
  if (os_protect((void *)s->open, s->open_bytes, false) != 0) {
    report_warning("guarded samples: the block at %p cannot be closed after its free: its slot is not used again", p);
    atomic_store_explicit(&s->state, SLOT_SPENT, memory_order_relaxed);
    return;
  }
  os_purge((void *)s->open, s->open_bytes);
  if (atomic_load_explicit(&s->opened, memory_order_relaxed)) return; /* not used again */
  lock_acquire(&lock);
  fifo_push((uint32_t)(s - slots));
  lock_release(&lock);
}

size_t guarded_usable_size(const void *p, const char *fn) {
  slot_t *s = live_slot(p, fn);
  return s ? s->size : 0;
}

/* ---------------------------------------------------------------------------
 * A fault in the region: which block, which bug, then the report.
 * ------------------------------------------------------------------------- */
static const char *access_name(int access) {
  return access == OS_FAULT_WRITE ? "write to" : access == OS_FAULT_READ ? "read of" : "access to";
}

static bool holds_block(const slot_t *s) {
  uint32_t state = atomic_load_explicit(&s->state, memory_order_acquire);
  return state == SLOT_LIVE || state == SLOT_FREED;
}

static bool on_fault(void *addr, int access) {
  uintptr_t a = (uintptr_t)addr;
  uintptr_t base = atomic_load_explicit(&guarded_base, memory_order_acquire);
  if (base == 0 || a - base >= guarded_size) return false; /* not ours */
  uintptr_t i = (a - base) / SLOT_BYTES, in_slot = (a - base) % SLOT_BYTES;
  /* The block the access was meant for: the slot's own, or, in a slot's
   * guard page, the block that ends just before it (an overflow) or the
   * one that starts just after it (an underflow), the nearer. */
  slot_t *s = i < slot_count && holds_block(&slots[i]) ? &slots[i] : NULL;
  if (in_slot < PAGE) {
    slot_t *before = i > 0 && holds_block(&slots[i - 1]) ? &slots[i - 1] : NULL;
    uintptr_t after_gap = s ? s->block - a : UINTPTR_MAX;
    uintptr_t before_gap = before ? a - (before->block + before->size) : UINTPTR_MAX;
    if (before != NULL && before_gap <= after_gap) s = before;
  }
  if (s == NULL) {
    report_error_only("%s %p: in a guarded slot that holds no block (a wild pointer)", access_name(access),
                      addr);
  } else {
    bool freed = atomic_load_explicit(&s->state, memory_order_acquire) == SLOT_FREED;
    if (freed && a - s->block < s->size) {
      report_error_only("use after free: %s %p, %zu bytes into the guarded block at %p (%zu bytes)",
                        access_name(access), addr, (size_t)(a - s->block), (void *)s->block, s->size);
    } else if (a >= s->block + s->size) {
      report_error_only("heap overflow: %s %p, %zu bytes past the end of the%s guarded block at %p (%zu bytes)",
                        access_name(access), addr, (size_t)(a - s->block - s->size), freed ? " freed" : "",
                        (void *)s->block, s->size);
    } else {
      report_error_only("heap underflow: %s %p, %zu bytes before the%s guarded block at %p (%zu bytes)",
                        access_name(access), addr, (size_t)(s->block - a), freed ? " freed" : "",
                        (void *)s->block, s->size);
    }
    print_stacks(s, freed);
  }
  if (!option_load(guard_continue)) return false; /* the process ends as it would have */
  /* Opened for the program to go on: the slots the page and the block
   * belong to are never used again (a live block is still freed as usual). */
  if (os_protect((void *)(a & ~(uintptr_t)(PAGE - 1)), PAGE, true) != 0) return false;
  if (s != NULL) atomic_store_explicit(&s->opened, 1, memory_order_relaxed);
  if (i < slot_count) atomic_store_explicit(&slots[i].opened, 1, memory_order_relaxed);
  return true;
}
