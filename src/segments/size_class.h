/* Size classes: 16-byte steps up to 128 B, then eight classes per doubling
 * (each at most 12.5% above the one before) up to 64 KiB, and one more
 * class 64 bytes above each power of two from 1 KiB to 8 KiB.
 *   class 1..8:    16, 32, ..., 128
 *   then per doubling: 128 * 2^k + j * 2^(k+4), j = 1..8, up to 65536,
 *   with 2^m + 64 inserted after 2^m for m = 10..13 (1088 .. 8256)
 * The header classes serve the common "a power of two plus a header"
 * request (a 4 KiB buffer with its 16..64-byte descriptor, a 4 KiB value
 * with its string header): without them 4100 bytes take a 4608-byte block.
 * Above 8 KiB such a class costs more than it saves where sizes spread
 * widely (a 128 KiB page per class and thread: linear's peak RSS rose 8%
 * with header classes up to 32 KiB, 1.2% with them up to 8 KiB).
 * Class 0 is unused (size 0 is served by class 1). Every class size is a
 * multiple of 16, and a block of class size n in a 64 KiB-aligned page is
 * aligned to the largest power of two dividing n (aligned_alloc uses it:
 * a request rounded to a multiple of 128 or more never lands on a header
 * class, since none lies between 2^m and the next such multiple). */
#ifndef BRISK_SIZE_CLASS_H
#define BRISK_SIZE_CLASS_H

#include <stddef.h>
#include <stdint.h>

#include "base/config.h"

#define CLASS_MAX (CLASS_COUNT - 1)

extern const uint32_t brisk_class_size[CLASS_COUNT] BRISK_INTERNAL;
extern const uint8_t brisk_medium_class[MEDIUM_MAX / 64 + 1] BRISK_INTERNAL;

/* For 2^b <= n - 1 < 2^(b+1), b = 7..15: the class of 2^b, or of its
 * header class when it has one; and the smallest n - 1 past that class
 * (2^b + 64 where there is a header class, else 2^b: always past). */
static const uint8_t class_after_pow2[16] = {0, 0, 0, 0, 0, 0, 0, 8, 16, 24, 33, 42, 51, 60, 68, 76};
static const uint32_t past_pow2_class[16] = {
    0, 0, 0, 0, 0, 0, 0, 1u << 7, 1u << 8, 1u << 9,
    (1u << 10) + 64, (1u << 11) + 64, (1u << 12) + 64, (1u << 13) + 64, 1u << 14, 1u << 15};

/* DIRECT_MAX < n <= MEDIUM_MAX: one load */
BRISK_INLINE unsigned size_to_class_above_direct(size_t n) { return brisk_medium_class[(n + 63) >> 6]; }

/* n <= MEDIUM_MAX */
BRISK_INLINE unsigned size_to_class(size_t n) {
  if (n <= 128) return n == 0 ? 1 : (unsigned)((n + 15) >> 4);
  /* one load where most of these sizes are asked for (malloc_above's class
   * cache: the steps below took 16 instructions) */
  if (n > DIRECT_MAX) return size_to_class_above_direct(n);
  /* x = n - 1 = 2^b + over; eight steps of 2^(b-3) per doubling, and a
   * header class covers less than one step, so it only splits the first. */
  size_t x = n - 1;
  unsigned b = 63u - (unsigned)__builtin_clzll((unsigned long long)x);
  return class_after_pow2[b] + (unsigned)((x >> (b - 3)) & 7) + (x >= past_pow2_class[b]);
}

BRISK_INLINE size_t class_size(unsigned c) { return brisk_class_size[c]; }

/* Slices (64 KiB each) of a page of class c: small classes one (a few two),
 * medium two. */
BRISK_INLINE size_t class_page_slices(unsigned c) {
  size_t size = brisk_class_size[c];
  if (size > SMALL_MAX) return MEDIUM_PAGE_SLICES;
  /* The OS page that holds the end of a page's last block is resident
   * whole. Where what it leaves unused is over 1/32 of a 64 KiB page (3328,
   * 4160 and 5632 B: 3.5..5.5%), the class takes two slices (1.0..1.6%). */
  size_t end = SLICE_SIZE / size * size;
  size_t unused = OS_PAGE_CEIL(end) - end;
  return unused > SLICE_SIZE / 32 ? 2 * SMALL_PAGE_SLICES : SMALL_PAGE_SLICES;
}

#endif
