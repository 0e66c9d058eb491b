/* Size classes: 16-byte steps up to 128 B, then eight classes per doubling
 * (each at most 12.5% above the one before) up to 64 KiB.
 *   class 1..8:   16, 32, ..., 128
 *   class 9..80:  128 * 2^k + j * 2^(k+4), j = 1..8, up to 65536
 * Class 0 is unused (size 0 is served by class 1). Every class size is a
 * multiple of 16, and a block of class size n in a 64 KiB-aligned page is
 * aligned to the largest power of two dividing n (aligned_alloc uses it). */
#ifndef BRISK_SIZE_CLASS_H
#define BRISK_SIZE_CLASS_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

#define CLASS_COUNT 81
#define CLASS_MAX (CLASS_COUNT - 1)

extern const uint32_t brisk_class_size[CLASS_COUNT] BRISK_INTERNAL;

/* n <= MEDIUM_MAX */
BRISK_INLINE unsigned size_to_class(size_t n) {
  if (n <= 128) return n == 0 ? 1 : (unsigned)((n + 15) >> 4);
  unsigned b = 63u - (unsigned)__builtin_clzll((unsigned long long)(n - 1));
  unsigned off = (unsigned)(((n - 1) - ((size_t)1 << b)) >> (b - 3));
  return 8 + (b - 7) * 8 + off + 1;
}

BRISK_INLINE size_t class_size(unsigned c) { return brisk_class_size[c]; }

/* Slices (64 KiB each) of a page of class c: small classes one, medium two. */
BRISK_INLINE size_t class_page_slices(unsigned c) {
  return brisk_class_size[c] <= SMALL_MAX ? SMALL_PAGE_SLICES : MEDIUM_PAGE_SLICES;
}

#endif
