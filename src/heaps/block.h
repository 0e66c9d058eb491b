/* Free blocks and their links: how a page's free lists and the chains of
 * remote frees are stored inside the freed memory itself.
 *
 * A free block holds one word: the link to the next free block, XORed with
 * a random key: the process's, or in the hardened build its segment's
 * (segment_t.link_key), so that a key read from one freed block forges no
 * link in another segment. Lists of a page end at the page's segment
 * header (page_list_end), never at NULL, so the link of every block on a
 * page's lists decodes to an address in the block's own segment:
 *
 *   block on a free list:  link ^ key  ->  next block, or segment header
 *   live block:            user data, which decodes to such an address only
 *                          by a 1 in 2^25 chance
 *
 * free uses that to send a probable double free to the slow path, which
 * walks the page's lists to be sure (block_looks_free). Chains of remote
 * frees (outbox, inbox) use a second key and end at NULL:
 *
 *   block in a remote chain:  link ^ remote_key -> (next | suspect bit)
 */
#ifndef BRISK_BLOCK_H
#define BRISK_BLOCK_H

#include <stdbool.h>
#include <stdint.h>

#include "base/config.h"
#include "base/read_mostly.h"
#include "segments/layout.h"

typedef struct block_s {
  uintptr_t link;
} block_t;

/* The keys (brisk_read_mostly, read_mostly.h): drawn once from the
 * kernel, before any block exists (block.c). */
BRISK_INTERNAL void block_keys_init(void);
/* The hardened build's carving order (page.c): a random number below n,
 * from a state drawn with the keys. */
BRISK_INTERNAL uint32_t block_random_below(uint32_t n);

/* The segment header of a block's segment (no huge block is ever linked,
 * and none starts 4 MiB or more into its mapping). */
BRISK_INLINE const segment_t *block_segment(const block_t *b) {
  return (const segment_t *)((uintptr_t)b & ~(uintptr_t)(SEGMENT_SIZE - 1));
}
BRISK_INLINE uintptr_t block_link_key(const block_t *b) {
  return BRISK_HARDENED ? block_segment(b)->link_key : brisk_read_mostly.link_key;
}
BRISK_INLINE uintptr_t block_chain_key(const block_t *b) {
  return BRISK_HARDENED ? block_segment(b)->remote_key : brisk_read_mostly.remote_key;
}

BRISK_INLINE block_t *block_next(const block_t *b) {
  return (block_t *)(b->link ^ block_link_key(b));
}
BRISK_INLINE void block_set_next(block_t *b, const void *next) {
  b->link = (uintptr_t)next ^ block_link_key(b);
}
/* Links of remote-free chains (outbox, inbox) use another key, so that a
 * chain overwritten by a local free of one of its blocks is noticed when
 * it is drained. Bit 0 of such a link marks a block that looked free when
 * another thread freed it: its owner checks its lists before taking it. */
#define REMOTE_LINK_SUSPECT ((uintptr_t)1)
BRISK_INLINE void block_set_remote_next(block_t *b, const void *next, bool suspect) {
  b->link = ((uintptr_t)next | (suspect ? REMOTE_LINK_SUSPECT : 0)) ^ block_chain_key(b);
}
BRISK_INLINE uintptr_t block_remote_link(const block_t *b) { return b->link ^ block_chain_key(b); }

/* The second word of a block in a remote-free chain: the block REMOTE_SKIP
 * links further on (or NULL), which the freeing thread knows from its own
 * recent frees. The drain only prefetches it: a chain is a run of loads
 * that each wait for the one before, and the blocks were last written by
 * another core. Never followed, so a wrong value costs a wasted prefetch. */
BRISK_INLINE void block_set_remote_skip(block_t *b, const void *ahead) {
  (&b->link)[1] = (uintptr_t)ahead ^ block_chain_key(b);
}
BRISK_INLINE const void *block_remote_skip(const block_t *b) {
  return (const void *)((&b->link)[1] ^ block_chain_key(b));
}

BRISK_INLINE bool block_looks_free(const block_t *b) {
  return (((b->link ^ block_link_key(b)) ^ (uintptr_t)b) >> SEGMENT_SHIFT) == 0;
}

/* Where the lists of a page end: its segment header, which is no block. */
BRISK_INLINE block_t *page_list_end(const page_t *pg) {
  return (block_t *)segment_of_page(pg);
}

#endif
