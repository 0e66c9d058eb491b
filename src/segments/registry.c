#include "segments/registry.h"

_Atomic(struct segment_s *) brisk_registry[REGISTRY_ENTRIES];

void registry_set(uintptr_t start, size_t size, struct segment_s *seg) {
  uintptr_t first = start >> SEGMENT_SHIFT;
  uintptr_t last = (start + size - 1) >> SEGMENT_SHIFT;
  for (uintptr_t i = first; i <= last && i < REGISTRY_ENTRIES; i++)
    atomic_store_explicit(&brisk_registry[i], seg, memory_order_release);
}
