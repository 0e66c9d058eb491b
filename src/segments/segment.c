/* Segments: mapping and unmapping them, their headers, the registry
 * markers that stand where brisk's memory went back to the OS, and the
 * purge of a segment's free slices. Depends on platform, registry and the
 * hardened guards only. */
#include "segments/segment.h"

#include "base/counters.h"
#include "os/platform.h"
#include "segments/guard.h"
#include "segments/registry.h"

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

void keys_draw(uintptr_t *link_key, uintptr_t *remote_key) {
  uint64_t r[2];
  os_random_bytes(r, sizeof(r));
  uint64_t link = r[0] | ((uint64_t)1 << 63) | 1; /* a zero-filled word is no link */
  uint64_t remote = r[1] | 1;
  if (((remote ^ link) >> SEGMENT_SHIFT) == 0) remote ^= (uint64_t)1 << 62;
  *link_key = (uintptr_t)link;
  *remote_key = (uintptr_t)remote;
}

void segment_init_header(segment_t *seg, size_t mapped, uint32_t kind) {
  seg->kinds = NULL;
  /* Hardened: keys of its own for the life of the mapping, so that a key
   * read from one freed block forges no link in another segment. */
  if (BRISK_HARDENED) keys_draw(&seg->link_key, &seg->remote_key);
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
    /* Never registered: if it cannot be unmapped, it stays mapped unused */
    os_unmap(p, SEGMENT_SIZE);
    return NULL;
  }
  seg->destroyed = 0;
  STAT_LEVEL(segments, 1);
  registry_set((uintptr_t)seg, SEGMENT_SIZE, seg);
  return seg;
}

bool segment_unmap(segment_t *seg) {
  size_t size = seg->mapped_size;
  uint32_t kind = seg->kind;
  uint8_t *kinds = seg->kinds;
  segment_t *before = registry_lookup((uintptr_t)seg);
  /* The marker first: a mapping made at this address after the unmap
   * registers itself, and must not be overwritten by us. */
  registry_set((uintptr_t)seg, size, segment_marker(seg));
  if (os_unmap(seg, size) != 0) {
    /* Still mapped: registered as before, for the caller to keep or to
     * leave unused. */
    registry_set((uintptr_t)seg, size, before);
    return false;
  }
  /* (seg is gone: only what was read before) */
  if (kind == SEGMENT_NORMAL) STAT_LEVEL(segments, -1);
  /* The kinds table is the hardened build's metadata, apart from the
   * segment: if it cannot go, its few pages stay mapped and unused. */
  if (BRISK_HARDENED && kinds != NULL) os_unmap(kinds, KINDS_TABLE_BYTES);
  return true;
}

uint64_t segment_purge_slices(segment_t *seg, uint64_t mask) {
  uint64_t kept = 0;
  while (mask) {
    unsigned first = (unsigned)__builtin_ctzll(mask);
    uint64_t run = mask >> first;
    unsigned len = (~run == 0) ? 64 - first : (unsigned)__builtin_ctzll(~run);
    if (os_purge((uint8_t *)seg + (size_t)first * SLICE_SIZE, (size_t)len * SLICE_SIZE) != 0)
      kept |= slice_bits(first, len);
    mask &= ~slice_bits(first, len);
  }
  return kept;
}
