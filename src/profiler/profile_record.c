/* The heap profiler's record (see profile_record.h): stacks, sampled
 * blocks, the heaps' batches, and snapshots of it all for the dumps.
 *
 * Memory: everything here comes from the platform layer (os_map_aligned),
 * never from brisk's heaps, so the profiler never samples itself and takes
 * nothing from the program's heaps. prof_lock guards the tables (held for
 * table updates only, never across a stack walk, a file or a loader call,
 * and never across a call that allocates); a heap's batch lock is taken
 * before it. */
#include "profiler/profile_record.h"

#include <string.h>

#include "base/counters.h"
#include "os/platform.h"
#include "runtime/options.h"

#define PROF_CHUNK ((size_t)1 << 20)

struct prof_stack_s {
  struct prof_stack_s *all_next;
  uint64_t hash;
  double live_n, live_b, alloc_n, alloc_b; /* scaled back from the samples */
  double pend_live_n, pend_live_b, pend_alloc_n, pend_alloc_b; /* a snapshot's sums of
                                                                   heaps' pending samples */
  uint32_t pend_samples;
  uint32_t depth;
  uint32_t live_samples;
  uintptr_t pc[];
};

typedef struct prof_sample_s {
  uintptr_t addr; /* the block; 0: a free entry */
  prof_stack_t *stack;
  prof_heap_t *heap;
  double weight; /* 1 / (probability that a block of its size is sampled) */
  double bytes;  /* requested bytes * weight */
  uint32_t next_free;
  uint32_t pad_;
} prof_sample_t;

static brisk_lock_t prof_lock = BRISK_LOCK_INIT;

void record_lock(void) { lock_acquire(&prof_lock); }
void record_unlock(void) { lock_release(&prof_lock); }

/* Under prof_lock. */
static uint8_t *arena_next;
static size_t arena_left;
static size_t stack_count;
static prof_stack_t *stacks_all;
static prof_sample_t *samples;
static uint32_t sample_cap;   /* entries mapped */
static uint32_t sample_top;   /* entries ever used (0 is never used) */
static uint32_t sample_free;  /* free list head; 0: none */
static prof_heap_t *heaps_all; /* every heap state, newest first; never unlinked */

/* The stacks by hash: open addressing, read without the lock (a sample
 * finds its stack, seen before almost always, and takes the lock only for
 * a new one). Grown under the lock into a new index, published whole; an
 * index is never changed but for empty slots being filled, and never
 * unmapped (a reader may still be in it): the old ones together are
 * smaller than the newest. */
typedef struct stack_index_s {
  size_t mask;
  _Atomic(prof_stack_t *) slot[];
} stack_index_t;
static _Atomic(stack_index_t *) stack_index;
static uint64_t live_samples;
static double live_bytes;      /* scaled: the in-use estimate */
static double interval_base;   /* the in-use estimate at the last interval dump, or the
                                  least since: growth is counted from there */

/* ---------------------------------------------------------------------------
 * Memory from the platform layer.
 * ------------------------------------------------------------------------- */
void *record_map(size_t size) {
  void *p;
  size = OS_PAGE_CEIL(size);
  if (os_map_aligned(size, OS_PAGE_BYTES, &p) != 0) return NULL;
  return p;
}

static void record_unmap(void *p, size_t size) {
  size = OS_PAGE_CEIL(size);
  os_unmap(p, size); /* if refused, left mapped, unused */
}

/* Bump allocation for records that live as long as the process (stacks,
 * heap states); under prof_lock. */
static void *arena_take(size_t size) {
  size = (size + 15) & ~(size_t)15;
  if (arena_left < size) {
    size_t chunk = size > PROF_CHUNK ? size : PROF_CHUNK;
    uint8_t *p = record_map(chunk);
    if (p == NULL) return NULL;
    arena_next = p;
    arena_left = chunk;
  }
  void *r = arena_next;
  arena_next += size;
  arena_left -= size;
  return r;
}

prof_heap_t *record_heap_new(void) {
  lock_acquire(&prof_lock);
  /* Lines of its own: the owner writes its countdowns without the lock,
   * and the arena's next record (another heap's, a stack's) is written by
   * other threads. */
  uintptr_t raw = (uintptr_t)arena_take(sizeof(prof_heap_t) + 2 * CACHE_LINE_BYTES);
  prof_heap_t *ph = NULL;
  if (raw != 0) {
    ph = (prof_heap_t *)((raw + CACHE_LINE_BYTES - 1) & ~(uintptr_t)(CACHE_LINE_BYTES - 1));
    ph->all_next = heaps_all;
    heaps_all = ph;
  }
  lock_release(&prof_lock);
  return ph;
}

uint64_t record_stack_hash(const uintptr_t *pcs, size_t n) {
  uint64_t h = 0xcbf29ce484222325ull ^ n;
  for (size_t i = 0; i < n; i++) {
    h ^= pcs[i];
    h *= 0x100000001b3ull;
    h ^= h >> 29;
  }
  return h;
}

static prof_stack_t *stack_lookup(const stack_index_t *t, uint64_t h, const uintptr_t *pcs, size_t n) {
  for (size_t i = h & t->mask;; i = (i + 1) & t->mask) {
    prof_stack_t *s = atomic_load_explicit(&t->slot[i], memory_order_acquire);
    if (s == NULL) return NULL;
    if (s->hash == h && s->depth == n && memcmp(s->pc, pcs, n * sizeof(*pcs)) == 0) return s;
  }
}

static void index_put(stack_index_t *t, prof_stack_t *s) {
  size_t i = s->hash & t->mask;
  while (atomic_load_explicit(&t->slot[i], memory_order_relaxed) != NULL) i = (i + 1) & t->mask;
  atomic_store_explicit(&t->slot[i], s, memory_order_release);
}

/* Without the lock; NULL: not seen yet. */
prof_stack_t *record_stack_seen(const uintptr_t *pcs, size_t n, uint64_t h) {
  stack_index_t *t = atomic_load_explicit(&stack_index, memory_order_acquire);
  return t != NULL ? stack_lookup(t, h, pcs, n) : NULL;
}

/* Under prof_lock: the stack's record, made if new (NULL: no memory). */
prof_stack_t *record_stack_find(const uintptr_t *pcs, size_t n, uint64_t h) {
  stack_index_t *t = atomic_load_explicit(&stack_index, memory_order_relaxed);
  prof_stack_t *s = t != NULL ? stack_lookup(t, h, pcs, n) : NULL;
  if (s != NULL) return s;
  if (t == NULL || 2 * (stack_count + 1) > t->mask + 1) { /* at most half full */
    size_t slots = t != NULL ? 2 * (t->mask + 1) : 1024;
    stack_index_t *nt = record_map(sizeof(*nt) + slots * sizeof(nt->slot[0]));
    if (nt == NULL) return NULL;
    nt->mask = slots - 1;
    for (prof_stack_t *o = stacks_all; o; o = o->all_next) index_put(nt, o);
    atomic_store_explicit(&stack_index, nt, memory_order_release);
    t = nt;
  }
  s = arena_take(sizeof(*s) + n * sizeof(uintptr_t));
  if (s == NULL) return NULL;
  memset(s, 0, sizeof(*s));
  s->hash = h;
  s->depth = (uint32_t)n;
  memcpy(s->pc, pcs, n * sizeof(*pcs));
  s->all_next = stacks_all;
  stacks_all = s;
  stack_count++;
  index_put(t, s);
  return s;
}

static uint32_t sample_take(void) {
  if (sample_free != 0) {
    uint32_t i = sample_free;
    sample_free = samples[i].next_free;
    return i;
  }
  if (sample_top + 1 >= sample_cap) {
    if (sample_cap >= (1u << 30)) return 0;
    uint32_t cap = sample_cap ? sample_cap * 2 : 4096;
    prof_sample_t *ns = record_map((size_t)cap * sizeof(*ns));
    if (ns == NULL) return 0;
    if (samples) {
      memcpy(ns, samples, (size_t)sample_top * sizeof(*ns));
      record_unmap(samples, (size_t)sample_cap * sizeof(*samples));
    }
    samples = ns;
    sample_cap = cap;
    if (sample_top == 0) sample_top = 1; /* 0 means "no record" */
  }
  return sample_top++;
}

static void sample_drop(uint32_t i) {
  prof_sample_t *e = &samples[i];
  prof_stack_t *s = e->stack;
  s->live_n -= e->weight;
  s->live_b -= e->bytes;
  s->live_samples--;
  if (s->live_samples == 0) s->live_n = s->live_b = 0; /* no rounding residue */
  live_bytes -= e->bytes;
  live_samples--;
  if (live_samples == 0) live_bytes = 0;
  if (live_bytes < interval_base) interval_base = live_bytes;
  e->heap->live--;
  e->addr = 0;
  e->next_free = sample_free;
  sample_free = i;
}

/* Forget ph's batch of freed samples (ph->drops_lock and prof_lock held).
 * Only the heap's own blocks enter its batch, and a slot is reused only
 * once forgotten, so each names the record of its block. */
void record_drops_flush(prof_heap_t *ph) {
  for (uint32_t k = 0; k < ph->drop_count; k++) record_sample_forget(ph->drops[k]);
  ph->drop_count = 0;
}

/* A sample entered in the record (prof_lock held); its slot, 0 when the
 * record has no room (the block is then counted as allocated only).
 * *dump: the in-use estimate grew by the interval. */
uint32_t record_sample_enter(prof_heap_t *ph, prof_stack_t *s, uintptr_t addr, double weight, double bytes,
                             bool *dump) {
  s->alloc_n += weight;
  s->alloc_b += bytes;
  uint32_t i = sample_take();
  if (i == 0) return 0;
  prof_sample_t *e = &samples[i];
  e->addr = addr;
  e->stack = s;
  e->heap = ph;
  e->weight = weight;
  e->bytes = bytes;
  s->live_n += weight;
  s->live_b += bytes;
  s->live_samples++;
  ph->live++;
  live_samples++;
  live_bytes += bytes;
  int64_t interval = option_load(profile_interval);
  if (interval > 0 && live_bytes >= interval_base + (double)interval) {
    interval_base = live_bytes;
    *dump = true;
  }
  return i;
}

/* Enter ph's pending samples in the record (ph->drops_lock and prof_lock
 * held). live: the owner's call, which gives each live block its slot;
 * else (the heap is destroyed with its blocks) they count as allocated
 * only and their descriptors are not touched. */
bool record_pending_flush(prof_heap_t *ph, bool live) {
  bool dump = false;
  for (uint32_t k = 0; k < ph->pending_count; k++) {
    prof_pending_t *e = &ph->pending[k];
    if (live && e->slot != NULL) {
      *e->slot = record_sample_enter(ph, e->stack, e->addr, e->weight, e->bytes, &dump);
    } else {
      e->stack->alloc_n += e->weight;
      e->stack->alloc_b += e->bytes;
    }
  }
  ph->pending_count = 0;
  return dump;
}

void record_sample_forget(uint32_t slot) {
  /* Descriptors are cleared when their span or mapping is handed out
   * again, so a slot names its own record (unless the record went with
   * its destroyed heap: then no block is freed through it). */
  if (slot < sample_top && samples[slot].addr != 0) sample_drop(slot);
}

void record_heap_forget(prof_heap_t *ph) {
  for (uint32_t i = 1; ph->live > 0 && i < sample_top; i++)
    if (samples[i].addr != 0 && samples[i].heap == ph) sample_drop(i);
}

static prof_snap_t *snap;
static size_t snap_cap;

static uint64_t rounded(double v) { return v <= 0.5 ? 0 : (uint64_t)(v + 0.5); }

/* Every heap's batch lock, in the list's order; a heap's owner takes only
 * its own, and before prof_lock, as a snapshot does. */
static prof_heap_t *batches_lock_all(void) {
  lock_acquire(&prof_lock);
  prof_heap_t *first = heaps_all;
  lock_release(&prof_lock);
  for (prof_heap_t *ph = first; ph != NULL; ph = ph->all_next) lock_acquire(&ph->drops_lock);
  return first;
}

static void batches_unlock_all(prof_heap_t *first) {
  for (prof_heap_t *ph = first; ph != NULL; ph = ph->all_next) lock_release(&ph->drops_lock);
}

/* The heaps' pending samples added to their stacks' pend_* sums, and their
 * freed ones forgotten (every batch lock and prof_lock held). */
static void batches_read_locked(prof_heap_t *first) {
  for (prof_heap_t *ph = first; ph != NULL; ph = ph->all_next) {
    record_drops_flush(ph);
    for (uint32_t k = 0; k < ph->pending_count; k++) {
      prof_pending_t *e = &ph->pending[k];
      prof_stack_t *s = e->stack;
      s->pend_alloc_n += e->weight;
      s->pend_alloc_b += e->bytes;
      if (e->slot != NULL) {
        s->pend_live_n += e->weight;
        s->pend_live_b += e->bytes;
        s->pend_samples++;
      }
    }
  }
}

bool record_snapshot(const prof_snap_t **out, size_t *count) {
  lock_acquire(&prof_lock);
  size_t n = stack_count;
  lock_release(&prof_lock);
  if (n + 64 > snap_cap) { /* stacks added meanwhile beyond the room are left out */
    size_t cap = snap_cap ? snap_cap : 1024;
    while (cap < n + 64) cap *= 2;
    prof_snap_t *ns = record_map(cap * sizeof(*ns));
    if (ns == NULL) return false;
    if (snap) record_unmap(snap, snap_cap * sizeof(*snap));
    snap = ns;
    snap_cap = cap;
  }
  prof_heap_t *first = batches_lock_all();
  lock_acquire(&prof_lock);
  batches_read_locked(first);
  size_t k = 0;
  for (prof_stack_t *s = stacks_all; s; s = s->all_next) {
    prof_snap_t e;
    memset(&e, 0, sizeof(e));
    e.pc = s->pc;
    e.depth = s->depth;
    e.live_n = rounded(s->live_n + s->pend_live_n);
    e.live_b = rounded(s->live_b + s->pend_live_b);
    e.alloc_n = rounded(s->alloc_n + s->pend_alloc_n);
    e.alloc_b = rounded(s->alloc_b + s->pend_alloc_b);
    e.samples = s->live_samples + s->pend_samples;
    s->pend_live_n = s->pend_live_b = s->pend_alloc_n = s->pend_alloc_b = 0;
    s->pend_samples = 0;
    if (k == snap_cap || (e.alloc_n == 0 && e.alloc_b == 0)) continue;
    if (e.live_b == 0) e.live_n = 0;
    if (e.live_n == 0) e.live_b = 0;
    snap[k++] = e;
  }
  lock_release(&prof_lock);
  batches_unlock_all(first);
  prof_snap_sort(snap, k);
  *out = snap;
  *count = k;
  return true;
}

/* The record's lock is held only for table updates, with no call out of
 * this file but the platform's mmap: the fork waits for it. A thread of
 * the parent may have held its heap's batch lock: the child, which has no
 * such thread, starts with every lock free. */
void record_fork_prepare(void) { lock_acquire(&prof_lock); }

void record_fork_parent(void) { lock_release(&prof_lock); }

void record_fork_child(void) {
  lock_reset(&prof_lock);
  for (prof_heap_t *ph = heaps_all; ph != NULL; ph = ph->all_next) lock_reset(&ph->drops_lock);
}
