/* Guard pages of the hardened build. A large block's guard stays when the
 * block is freed (segment->guarded_slices): a later span that ends on that
 * slice keeps it and loses those 4 KiB, one that covers it lifts it, so a
 * steady workload makes no mprotect call per allocation. */
#include "guard.h"

#include "platform.h"

#define LAST_SLICE_BIT ((uint64_t)1 << (SLICES_PER_SEGMENT - 1))

/* The guard page that ends slice i. */
static uint8_t *slice_guard(segment_t *seg, size_t i) {
  return (uint8_t *)seg + (i + 1) * SLICE_SIZE - HARDENED_GUARD;
}

void guard_segment(segment_t *seg) {
  os_protect(slice_guard(seg, 0), HARDENED_GUARD, false);
  os_protect(slice_guard(seg, SLICES_PER_SEGMENT - 1), HARDENED_GUARD, false);
  seg->guarded_slices = 1 | LAST_SLICE_BIT;
}

void guard_lift(segment_t *seg, uint64_t mask) {
  uint64_t stale = seg->guarded_slices & mask & ~LAST_SLICE_BIT;
  while (stale) {
    unsigned i = (unsigned)__builtin_ctzll(stale);
    stale &= stale - 1;
    os_protect(slice_guard(seg, i), HARDENED_GUARD, true);
    seg->guarded_slices &= ~((uint64_t)1 << i);
  }
}

void guard_span_tail(page_t *span) {
  segment_t *seg = segment_of_page(span);
  size_t last = (size_t)(span - seg->pages) + span->slice_count - 1;
  span->span_bytes = span->slice_count * SLICE_SIZE - HARDENED_GUARD;
  uint64_t bit = (uint64_t)1 << last;
  /* (span_carve took the guard's 4 KiB off span_bytes already if present) */
  if (seg->guarded_slices & bit) return; /* left by an earlier block: no system call */
  if (os_protect(span->start + span->span_bytes, HARDENED_GUARD, false) == 0) seg->guarded_slices |= bit;
}

void guard_huge_tail(segment_t *seg, size_t mapped) {
  os_protect((uint8_t *)seg + mapped - HARDENED_GUARD, HARDENED_GUARD, false);
}
