/* The address registry: for any pointer value, the segment that holds it,
 * or NULL when brisk owns no memory there. One flat table with an entry
 * per 4 MiB of address space; a lookup is one shift, one compare and one
 * load, never a system call, and safe for garbage values.
 *
 *   index = address >> 22        (2^25 entries cover the 47-bit user space)
 *   registry[index] = the segment whose mapping covers that 4 MiB, or NULL
 *
 * The table lives in .bss (256 MiB of address space, zero pages until
 * written): one 4 KiB page of it covers 2 GiB of address space, so only a
 * few pages ever become resident. Writers (segment map/unmap) store with
 * release; the fast path loads with acquire (a plain load on x86-64).
 */
#ifndef BRISK_REGISTRY_H
#define BRISK_REGISTRY_H

#include <stdatomic.h>
#include <stdint.h>

#include "base/config.h"

struct segment_s;

#define REGISTRY_ENTRIES ((size_t)1 << (BRISK_ADDRESS_BITS - SEGMENT_SHIFT))

extern _Atomic(struct segment_s *) brisk_registry[REGISTRY_ENTRIES] BRISK_INTERNAL;

/* For the free fast path: the index wraps instead of being bounds-checked.
 * A pointer above the covered space then names some other segment, and
 * the block index check that follows fails for it (its offset is at least
 * 2^47, no block is), sending it to the slow path, which uses
 * registry_lookup. */
BRISK_INLINE struct segment_s *registry_lookup_wrapped(uintptr_t addr) {
  uintptr_t index = (addr >> SEGMENT_SHIFT) & (REGISTRY_ENTRIES - 1);
  return atomic_load_explicit(&brisk_registry[index], memory_order_acquire);
}

BRISK_INLINE struct segment_s *registry_lookup(uintptr_t addr) {
  uintptr_t index = addr >> SEGMENT_SHIFT;
  if (BRISK_UNLIKELY(index >= REGISTRY_ENTRIES)) return NULL;
  return atomic_load_explicit(&brisk_registry[index], memory_order_acquire);
}

/* Record (or clear, with seg == NULL) the segment covering [start, start+size). */
BRISK_INTERNAL void registry_set(uintptr_t start, size_t size, struct segment_s *seg);

#endif
