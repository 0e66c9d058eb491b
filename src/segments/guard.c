/* Guard pages of the hardened build. A large block's guard stays when the
 * block is freed (segment->guarded_slices): a later span that ends on that
 * slice keeps it and loses those 4 KiB, one that covers it lifts it, so a
 * steady workload makes no mprotect call per allocation. */
#include "segments/guard.h"

#include "os/platform.h"
#include "runtime/report.h"

#define LAST_SLICE_BIT ((uint64_t)1 << (SLICES_PER_SEGMENT - 1))

/* The guard page that ends slice i. */
static uint8_t *slice_guard(segment_t *seg, size_t i) {
  return (uint8_t *)seg + (i + 1) * SLICE_SIZE - HARDENED_GUARD;
}

/* A refusal of the OS to place or lift a guard (counted by os_protect):
 * reported. */
static void guard_refused(const char *what, void *p, int err, const char *outcome) {
  report_warning("%s the guard page at %p failed (%s): %s", what, p, os_error_name(err), outcome);
}

/* Place a guard; if the OS refuses, the memory it would have guarded is
 * used without it. */
static bool guard_place(void *p) {
  int err = os_protect(p, HARDENED_GUARD, false);
  if (err == 0) return true;
  guard_refused("mprotect of", p, err, "the memory before it has no guard");
  return false;
}

void guard_segment(segment_t *seg) {
  seg->guarded_slices = 0;
  if (guard_place(slice_guard(seg, 0))) seg->guarded_slices |= 1;
  if (guard_place(slice_guard(seg, SLICES_PER_SEGMENT - 1))) seg->guarded_slices |= LAST_SLICE_BIT;
}

bool guard_lift(segment_t *seg, uint64_t mask) {
  uint64_t stale = seg->guarded_slices & mask & ~LAST_SLICE_BIT;
  bool all = true;
  while (stale) {
    unsigned i = (unsigned)__builtin_ctzll(stale);
    stale &= stale - 1;
    int err = os_protect(slice_guard(seg, i), HARDENED_GUARD, true);
    if (err != 0) {
      /* Still a guard, and still marked one: no span may cover it. */
      guard_refused("mprotect lifting", slice_guard(seg, i), err, "its slices are not used");
      all = false;
      continue;
    }
    seg->guarded_slices &= ~((uint64_t)1 << i);
  }
  return all;
}

void guard_span_tail(page_t *span) {
  segment_t *seg = segment_of_page(span);
  size_t last = (size_t)(span - seg->pages) + span->slice_count - 1;
  span->span_bytes = span->slice_count * SLICE_SIZE - HARDENED_GUARD;
  uint64_t bit = (uint64_t)1 << last;
  /* (span_carve took the guard's 4 KiB off span_bytes already if present) */
  if (seg->guarded_slices & bit) return; /* left by an earlier block: no system call */
  if (guard_place(span->start + span->span_bytes)) seg->guarded_slices |= bit;
}

void guard_huge_tail(segment_t *seg, size_t mapped) {
  guard_place((uint8_t *)seg + mapped - HARDENED_GUARD);
}
