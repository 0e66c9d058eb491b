/* Process-wide counters: one field list, compiled into relaxed atomic
 * counters. Only slow paths count (segment and OS events); the inline fast
 * paths never touch a counter, and frequent events (remote frees, pages,
 * large blocks) are added in batches: one shared cache line written per
 * event would cost every thread. */
#ifndef BRISK_COUNTERS_H
#define BRISK_COUNTERS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* X(name, kind, description): kind is COUNT (only grows) or LEVEL (goes up
 * and down; its peak is kept beside it as name_peak). */
#define BRISK_STATS_FIELDS(X)                                                  \
  X(mapped_bytes, LEVEL, "bytes mapped from the OS")                          \
  X(segments, LEVEL, "4 MiB segments mapped")                                 \
  X(huge_bytes, LEVEL, "bytes mapped for huge blocks, their tails included")  \
  X(huge_retained, LEVEL, "bytes of huge mappings kept for reuse")            \
  X(huge_blocks, LEVEL, "huge blocks in use (each a mapping of its own)")     \
  X(pages, LEVEL, "pages in use")                                             \
  X(heaps, LEVEL, "heaps alive (threads and first-class)")                    \
  X(mmap_calls, COUNT, "mmap calls")                                          \
  X(munmap_calls, COUNT, "munmap calls")                                      \
  X(madvise_calls, COUNT, "madvise calls (purges)")                           \
  X(purged_bytes, COUNT, "bytes returned to the OS by purge")                 \
  X(map_failures, COUNT, "mmap calls the OS refused (or a growing mremap): the request failed or took another way") \
  X(remap_failures, COUNT, "mremap calls the OS refused: the block was copied or kept its size") \
  X(thread_failures, COUNT, "background thread starts the OS refused: tried again at the next deadline") \
  X(fence_failures, COUNT, "membarrier calls the OS refused: the large keep is switched off") \
  X(purge_failures, COUNT, "purges the OS refused (locked memory): kept resident, not known zero") \
  X(unmap_failures, COUNT, "munmap calls the OS refused: the memory stays mapped and is kept or left unused") \
  X(protect_failures, COUNT, "mprotect calls the OS refused (the hardened build's guard pages, guarded samples' slots)") \
  X(guarded_allocs, COUNT, "guarded samples handed out (BRISK_GUARD_RATE)")    \
  X(guarded_live, LEVEL, "guarded samples live")                             \
  X(huge_allocs, COUNT, "huge allocations")                                   \
  X(large_allocs, COUNT, "large allocations")                                 \
  X(large_keep_returned, COUNT, "freed large spans a thread kept unused for a delay, given back by the background thread") \
  X(remote_batches, COUNT, "batches of remote frees handed over")             \
  X(remote_frees, COUNT, "blocks freed by a thread other than the owner")     \
  X(remote_parked, COUNT, "of those, blocks taken from an idle owner's inbox by the background thread (their pages purged)") \
  X(heaps_abandoned, COUNT, "heaps abandoned by exiting threads")             \
  X(heaps_adopted, COUNT, "abandoned heaps adopted by new threads")           \
  X(foreign_frees, COUNT, "pointers forwarded to the previous allocator")     \
  X(background_threads, LEVEL, "background purger threads running (0 or 1)")  \
  X(background_rounds, COUNT, "purge rounds of the background thread")        \
  X(background_wakeups, COUNT, "times the background thread woke up")        \
  X(background_wake_calls, COUNT, "times a thread woke the background thread") \
  X(profile_rules_read, COUNT, "heap profiler frame rules read from unwind tables (the rule cache's misses)") \
  X(profile_rules_read_mapped, COUNT, "of those, read through the object's mapping (its file not usable, or past the first 4,096 reads), which faults pages in") \
  X(profile_unwinder_walks, COUNT, "heap profiler stack walks left to libgcc's unwinder (a frame the fast walk does not read)") \
  X(errors, COUNT, "bad inputs reported")

typedef struct brisk_stats_s {
#define BRISK_STAT_COUNT(name) _Atomic(int64_t) name;
#define BRISK_STAT_LEVEL(name) _Atomic(int64_t) name; _Atomic(int64_t) name##_peak;
#define BRISK_STAT_FIELD(name, kind, desc) BRISK_STAT_##kind(name)
  BRISK_STATS_FIELDS(BRISK_STAT_FIELD)
#undef BRISK_STAT_FIELD
#undef BRISK_STAT_COUNT
#undef BRISK_STAT_LEVEL
} brisk_stats_t;

extern brisk_stats_t brisk_stats __attribute__((visibility("hidden")));

static inline void stat_add(_Atomic(int64_t) *c, int64_t v) {
  atomic_fetch_add_explicit(c, v, memory_order_relaxed);
}
#define STAT_COUNT(name, v) stat_add(&brisk_stats.name, (v))
/* Raise a level and its peak (the peak may lag by a race; it is a report). */
#define STAT_LEVEL(name, v)                                                     \
  do {                                                                          \
    int64_t now_ = atomic_fetch_add_explicit(&brisk_stats.name, (v), memory_order_relaxed) + (v); \
    if (now_ > atomic_load_explicit(&brisk_stats.name##_peak, memory_order_relaxed))           \
      atomic_store_explicit(&brisk_stats.name##_peak, now_, memory_order_relaxed);             \
  } while (0)

#endif
