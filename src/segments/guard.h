/* Guard pages of the hardened build (PROT_NONE pages that end the header
 * slice, each segment, each large block's span and each huge mapping).
 * Depends on the platform layer and the segment layout only; the default
 * build never calls it. */
#ifndef BRISK_GUARD_H
#define BRISK_GUARD_H

#include "segments/layout.h"

/* A new segment: guards at the end of the header slice (an underflow of
 * the first page does not reach the header) and at the end of the segment
 * (an overflow does not reach the next region). */
BRISK_INTERNAL void guard_segment(segment_t *seg);
/* Make the guards at the end of the slices in `mask` accessible again (the
 * segment's last slice keeps its guard for good). false when the OS
 * refused one: it stays a guard, marked in guarded_slices, and the caller
 * must not use those slices. Every refusal of the OS to place or lift a
 * guard is reported (a warning) and counted (protect_failures, by
 * os_protect). */
BRISK_INTERNAL bool guard_lift(segment_t *seg, uint64_t mask);
/* The last 4 KiB of a large block's span become a guard page; span_bytes
 * no longer covers them. */
BRISK_INTERNAL void guard_span_tail(page_t *span);
/* The last 4 KiB of a huge mapping of `mapped` bytes become a guard page. */
BRISK_INTERNAL void guard_huge_tail(segment_t *seg, size_t mapped);

#endif
