/* Blocks as a memory checker sees them, in a build for one (BRISK_VALGRIND
 * or BRISK_ASAN; checker.h). Every public entry that hands out or takes
 * back a block comes here instead of the core (entry.h), and this layer
 * asks the core for a larger block:
 *
 *   core block                p                    p+size
 *   | left red zone  |left|size|  the program's    | right red zone   |
 *   | (16 B or the alignment) |   bytes            | (>= 16 B)        |
 *
 * All but the program's bytes are inaccessible to the program. The two
 * words before p hold the left zone's length and the size asked for
 * (xored with a constant; another constant once the block is given back):
 * free tells a live block from a freed one by them, without the core's
 * lists, and malloc_usable_size, realloc and the arenas get the size that
 * was asked for, so an overflow or underflow by one byte is caught. No
 * pointer in brisk's own memory (a page's first block, its lists) points
 * at p, so memcheck's leak check sees only the program's pointers. Not
 * compiled in a default build. */
#ifndef BRISK_TRACK_H
#define BRISK_TRACK_H

#include <stdbool.h>
#include <stddef.h>

#include "alloc/free.h"
#include "os/checker.h"

#if BRISK_TRACK
struct heap_s;
/* A block of `size` bytes from `target` (NULL: the calling thread's heap),
 * aligned to `alignment` (0: malloc's), zeroed when `zero`. NULL and
 * ENOMEM when the core has no memory. */
BRISK_INTERNAL void *track_alloc(struct heap_s *target, size_t size, size_t alignment, bool zero);
BRISK_INTERNAL void track_free(void *p, brisk_fn_t fn);
/* The size the block was asked with; anything else takes the core's
 * checks and reports. */
BRISK_INTERNAL size_t track_usable_size(const void *p, brisk_fn_t fn);
BRISK_INTERNAL void *track_realloc(struct heap_s *target, void *p, size_t size, brisk_fn_t fn);
BRISK_INTERNAL void *track_calloc(size_t count, size_t size);
/* brisk_rezalloc: realloc whose new bytes are zero. */
BRISK_INTERNAL void *track_rezalloc(void *p, size_t size);
/* brisk_expand: p when it holds `size` bytes already, else NULL (a block
 * grows only by moving, through realloc). */
BRISK_INTERNAL void *track_expand(void *p, size_t size);
/* Every live block of h given back to the checker, then h destroyed. */
BRISK_INTERNAL void track_heap_destroy(struct heap_s *h);
#endif

#endif
