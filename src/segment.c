/* Segments: mapping and unmapping them, their headers, the registry
 * markers that stand where brisk's memory went back to the OS, and the
 * purge of a segment's free slices. Depends on platform, registry and the
 * hardened guards only. */
#include "segment.h"

#include "guard.h"
#include "platform.h"
#include "registry.h"
#include "counters.h"

page_t brisk_dead_page = {
    .start = (uint8_t *)UINTPTR_MAX,
    .span = &brisk_dead_page,
};

#define RETIRED_SEGMENT_INIT                                                   \
  {                                                                            \
    .kind = SEGMENT_RETIRED,                                                   \
    .pages = {[0 ... SLICES_PER_SEGMENT - 1] = {.start = (uint8_t *)UINTPTR_MAX, \
                                                .span = &brisk_dead_page}},    \
  }
segment_t brisk_segment_returned = RETIRED_SEGMENT_INIT;
segment_t brisk_segment_destroyed = RETIRED_SEGMENT_INIT;

/* The hardened build's allocation-kind table: one byte per 16 bytes of a
 * segment, in a mapping of its own, away from user data. */
#define KINDS_TABLE_BYTES (SEGMENT_SIZE / 16)

void segment_init_header(segment_t *seg, size_t mapped, uint32_t kind) {
  seg->kinds = NULL;
  seg->guarded_slices = 0;
  seg->mapped_size = mapped;
  seg->kind = kind;
  seg->free_slices = ALL_PAGE_SLICES;
  seg->dirty_slices = 0;
  seg->light_slices = 0;
  seg->purge_slices = 0;
  seg->purge_later = 0;
  seg->purge_at_ms = 0;
  for (size_t i = 0; i < SLICES_PER_SEGMENT; i++) seg->pages[i].span = &brisk_dead_page;
}

/* Hardened: the guard pages and the allocation-kind table. */
static bool segment_harden(segment_t *seg) {
  void *kinds;
  if (os_map_aligned(KINDS_TABLE_BYTES, OS_PAGE_BYTES, &kinds) != 0) return false;
  seg->kinds = kinds;
  guard_segment(seg);
  return true;
}

segment_t *segment_map(void) {
  void *p;
  if (os_map_aligned(SEGMENT_SIZE, SEGMENT_SIZE, &p) != 0) return NULL;
  segment_t *seg = p;
  segment_init_header(seg, SEGMENT_SIZE, SEGMENT_NORMAL);
  if (BRISK_HARDENED && !segment_harden(seg)) {
    os_unmap(p, SEGMENT_SIZE);
    STAT_LEVEL(mapped_bytes, -(int64_t)SEGMENT_SIZE);
    return NULL;
  }
  seg->destroyed = 0;
  STAT_LEVEL(segments, 1);
  registry_set((uintptr_t)seg, SEGMENT_SIZE, seg);
  return seg;
}

void segment_unmap(segment_t *seg) {
  size_t size = seg->mapped_size;
  registry_set((uintptr_t)seg, size, segment_marker(seg));
  STAT_LEVEL(mapped_bytes, -(int64_t)size);
  if (seg->kind == SEGMENT_NORMAL) STAT_LEVEL(segments, -1);
  if (BRISK_HARDENED && seg->kinds != NULL) {
    os_unmap(seg->kinds, KINDS_TABLE_BYTES);
    STAT_LEVEL(mapped_bytes, -(int64_t)KINDS_TABLE_BYTES);
  }
  os_unmap(seg, size);
}

void segment_purge_slices(segment_t *seg, uint64_t mask) {
  while (mask) {
    unsigned first = (unsigned)__builtin_ctzll(mask);
    uint64_t run = mask >> first;
    unsigned len = (~run == 0) ? 64 - first : (unsigned)__builtin_ctzll(~run);
    os_purge((uint8_t *)seg + (size_t)first * SLICE_SIZE, (size_t)len * SLICE_SIZE);
    mask &= ~slice_bits(first, len);
  }
}
