/* The process's free-block keys, drawn at start-up into the read-mostly
 * line (block.h), and the random numbers of the hardened build's carving
 * order (page.c). */
#include "heaps/block.h"

#include <stdatomic.h>

#include "os/platform.h"
#include "segments/segment.h"

static _Atomic(uint64_t) shuffle_state;

void block_keys_init(void) {
  uintptr_t link, remote;
  keys_draw(&link, &remote);
  brisk_read_mostly.link_key = link;
  brisk_read_mostly.remote_key = remote;
  /* The hardened build's carving order (block_random_below) from a third. */
  uint64_t seed;
  os_random_bytes(&seed, sizeof(seed));
  atomic_store_explicit(&shuffle_state, seed, memory_order_relaxed);
}

uint32_t block_random_below(uint32_t n) {
  uint64_t x = atomic_fetch_add_explicit(&shuffle_state, 0x9e3779b97f4a7c15ull, memory_order_relaxed);
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  return (uint32_t)(x % n);
}
