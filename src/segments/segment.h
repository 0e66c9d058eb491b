/* Mapping and unmapping segments, and purging their free slices. */
#ifndef BRISK_SEGMENT_H
#define BRISK_SEGMENT_H

#include "segments/layout.h"

/* A fresh normal segment, registered; NULL when the OS has no memory. */
/* A pair of keys for the links of free blocks (block.h), from the kernel:
 * the free lists' (never 0) and the remote chains', drawn apart from it and
 * differing from it above the segment bits, so that no chain link looks
 * like a free list's (block_looks_free). */
BRISK_INTERNAL void keys_draw(uintptr_t *link_key, uintptr_t *remote_key);
BRISK_INTERNAL segment_t *segment_map(void);
/* Reset the header of a mapping of `mapped` bytes: every slice free. */
BRISK_INTERNAL void segment_init_header(segment_t *seg, size_t mapped, uint32_t kind);
/* Give a segment or huge mapping back to the OS; the registry keeps its
 * marker (segment_marker) so that a late free is reported as such. false
 * when the OS refused the unmap: the mapping is then registered as it was
 * before the call, and its caller keeps it or leaves it unused. */
BRISK_INTERNAL bool segment_unmap(segment_t *seg);
/* Give the free slices in `mask` back to the OS (MADV_DONTNEED), one
 * system call per run of consecutive slices. Returns the slices the OS
 * refused to purge (locked memory): they keep their contents, so the
 * caller must keep them dirty (resident, not known to be zero). */
BRISK_INTERNAL uint64_t segment_purge_slices(segment_t *seg, uint64_t mask);
#endif
