/* brisk: a general-purpose memory allocator for Linux C and C++ programs.
 *
 * Public C API. Every function here is safe to call from any thread.
 * When libbrisk.so is preloaded (or linked first) the standard malloc
 * family is replaced as well; these prefixed names always reach brisk.
 */
#ifndef BRISK_H
#define BRISK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define BRISK_VERSION_MAJOR 0
#define BRISK_VERSION_MINOR 1
#define BRISK_VERSION_PATCH 0

#if defined(__GNUC__)
#define BRISK_API __attribute__((visibility("default")))
#define BRISK_MALLOC_ATTR __attribute__((malloc, warn_unused_result))
#else
#define BRISK_API
#define BRISK_MALLOC_ATTR
#endif

/* Allocation. Failures return NULL with errno = ENOMEM. Every block is
 * aligned to at least 16 bytes; brisk_malloc(0) returns a unique pointer. */
BRISK_API BRISK_MALLOC_ATTR void *brisk_malloc(size_t size);
BRISK_API BRISK_MALLOC_ATTR void *brisk_calloc(size_t count, size_t size);
BRISK_API void *brisk_realloc(void *p, size_t size);
/* alignment: a power of two (any size is accepted, not only multiples). */
BRISK_API BRISK_MALLOC_ATTR void *brisk_aligned_alloc(size_t alignment, size_t size);

/* Release. NULL is ignored. A pointer brisk did not hand out, an interior
 * pointer or a double free is reported ("brisk: error: ...") and ignored. */
BRISK_API void brisk_free(void *p);
/* As brisk_free; size is the size that was requested (a hint). */
BRISK_API void brisk_free_sized(void *p, size_t size);

/* Bytes usable at p (at least the size requested); 0 for NULL. */
BRISK_API size_t brisk_usable_size(const void *p);

/* The usable size a request of `size` bytes gets, computed without
 * allocating: brisk_usable_size(brisk_malloc(size)) for every size (as
 * jemalloc's nallocx); 0 when no block can be that large. */
BRISK_API size_t brisk_good_size(size_t size);
/* brisk_malloc that also stores the block's usable size in *usable (when
 * usable is not NULL; 0 on failure). All of it may be used. */
BRISK_API BRISK_MALLOC_ATTR void *brisk_malloc_usable(size_t size, size_t *usable);

/* A block whose whole usable size is zero (not only `size` bytes, so that
 * brisk_rezalloc can keep it so). A large or huge block on memory fresh
 * from the OS is not cleared again. */
BRISK_API BRISK_MALLOC_ATTR void *brisk_zalloc(size_t size);
/* brisk_realloc that zeroes what the block gains: the bytes past the old
 * usable size when the block grows in place, past the bytes copied when it
 * moves, up to the new usable size. A block from brisk_zalloc,
 * brisk_heap_zalloc or brisk_rezalloc thus stays zero beyond what the
 * program wrote; a block from brisk_malloc or brisk_calloc (which clears
 * only the `count * size` bytes asked for) may hold old data between the
 * size it was asked for and its usable size, and that is not cleared.
 * brisk_rezalloc(NULL, size) is brisk_zalloc(size); size 0 frees p and
 * returns NULL. */
BRISK_API void *brisk_rezalloc(void *p, size_t size);
/* Resize p in place, or fail: p (with at least `size` usable bytes) when
 * the block already has room (a smaller size keeps it as it is), when a
 * large block (64 KiB .. 2 MiB) grows into the rest of its span or takes
 * the free slices after it, or when a huge block (above 2 MiB) grows or
 * shrinks in its mapping; NULL
 * otherwise, with p unchanged and still valid (a block of a size class
 * never grows, a large one grows only on the thread that owns its heap
 * and up to 2 MiB, a block of the C library's allocator never changes).
 * NULL for p NULL. A bad pointer is reported as by brisk_realloc. */
BRISK_API void *brisk_expand(void *p, size_t size);

/* Non-zero exactly when p points into memory that brisk holds for blocks:
 * a page of a size class, or a large or huge block, that is in use. A
 * freed block of a page still in use counts; memory brisk has returned to
 * the OS, or keeps only for reuse, does not. It answers "is brisk the
 * allocator of p?", not "is p's block live?". Answered from the address
 * registry: O(1), no system call, safe for any pointer value. */
BRISK_API int brisk_owns(const void *p);

/* "MAJOR.MINOR.PATCH" */
BRISK_API const char *brisk_version(void);

/* Process-wide statistics, human-readable or as one JSON object. The JSON
 * form returns the length it needed (excluding the NUL), like snprintf.
 * Besides brisk's counters (levels with their _peak): what a walk of every
 * heap, the pool and the huge cache finds (span_bytes, free_bytes,
 * free_resident_bytes, free_chunks, huge_block_bytes: the figures of
 * mallinfo2) and the process as the OS sees it (process_rss_bytes,
 * process_rss_peak_bytes, process_minor_faults, process_major_faults).
 * While other threads allocate the walked figures are approximate. */
BRISK_API void brisk_stats_print(FILE *out);
BRISK_API size_t brisk_stats_json(char *buf, size_t len);
/* Counters back to 0, the peak of each level (mapped_bytes_peak, ...) to
 * its current value. The process figures are the OS's and stay. */
BRISK_API void brisk_stats_reset(void);
/* The calling thread's own heap (the one behind malloc), as
 * brisk_heap_stats_json shows a heap. Its huge blocks belong to no heap
 * (any thread gives them back to the OS): huge_blocks is 0 here, and the
 * process-wide huge_blocks counts them. */
BRISK_API size_t brisk_thread_stats_json(char *buf, size_t len);

/* Return memory now instead of after the purge delay: the calling
 * thread's heap (pending remote frees, cached blocks, empty pages) and the
 * memory kept for every heap (empty segments, freed huge mappings). force:
 * everything unused, at once; false: only what is past its delay.
 * malloc_trim(0) returns every thread's unused memory. */
BRISK_API void brisk_collect(bool force);

/* Options while running. name: an option of the table in the README
 * without or with its BRISK_ prefix ("PURGE_DELAY", "BRISK_PURGE_DELAY");
 * ON_ERROR's values are 0 (report) and 1 (abort). Both return 0, or an
 * errno value after reporting the bad input: ENOENT for a name that is no
 * option, EINVAL for a NULL name or value pointer or a value out of the
 * option's range, EPERM for setting an option read at start-up only
 * (VERBOSE, FAULT_AFTER, FAULT_RATE, PROFILE, PROFILE_SIGNAL). Any thread
 * may call them; a value set is seen by every thread at once. Changing at
 * run time: PURGE_DELAY (a shorter delay also brings every waiting
 * deadline forward), SEGMENT_CACHE (the surplus goes at once), ON_ERROR,
 * SHOW_STATS, BACKGROUND (on: the thread starts at the next call into
 * brisk that may start it; off: it purges no more and sleeps for good, and
 * the allocating threads return memory themselves), PROFILE_RATE (from
 * each heap's next sample on), PROFILE_INTERVAL and PROFILE_LEAKS (on:
 * sampling starts too). */
BRISK_API int brisk_option_get(const char *name, long *value);
BRISK_API int brisk_option_set(const char *name, long value);

/* Testing: make brisk's requests for memory from the OS fail, as when the
 * system has none left: every one after `fail_after` more (negative: no
 * such limit) and each with probability fail_per_million / 10^6.
 * brisk_fault_injection(-1, 0) switches it off. Also set at start-up by
 * BRISK_FAULT_AFTER and BRISK_FAULT_RATE. */
BRISK_API void brisk_fault_injection(long fail_after, unsigned fail_per_million);
/* Testing: which system calls brisk_fault_injection makes fail, as a set
 * of these bits (also BRISK_FAULT_CALLS at start-up; by default
 * BRISK_FAULT_MMAP). Each fails as the kernel would refuse it: mmap and a
 * growing mremap with ENOMEM, munmap with ENOMEM (a split past
 * vm.max_map_count), madvise(MADV_DONTNEED) with EINVAL (locked memory),
 * mremap with ENOMEM, mprotect with ENOMEM, the background thread's start
 * with EAGAIN, membarrier (the background thread's fence against a thread
 * that keeps large blocks) with EPERM. */
#define BRISK_FAULT_MMAP 1u
#define BRISK_FAULT_MUNMAP 2u
#define BRISK_FAULT_MADVISE 4u
#define BRISK_FAULT_MREMAP 8u
#define BRISK_FAULT_MPROTECT 16u
#define BRISK_FAULT_THREAD 32u
#define BRISK_FAULT_MEMBARRIER 64u
#define BRISK_FAULT_ALL 127u
BRISK_API void brisk_fault_injection_calls(unsigned kinds);

/* ---------------------------------------------------------------------------
 * First-class heaps. A heap allocates on the thread that created it (any
 * other thread's allocation is reported and fails); its blocks are freed
 * with brisk_free/free from any thread. brisk_heap_destroy releases every
 * block of the heap at once without visiting them: its pages go back in
 * bulk, to be reused and purged after the purge delay. Freeing a block of
 * a destroyed heap is reported, not a crash (while its memory is not yet
 * in use by another heap).
 * ------------------------------------------------------------------------- */
typedef struct brisk_heap_s brisk_heap_t;

BRISK_API brisk_heap_t *brisk_heap_new(void);
BRISK_API void brisk_heap_destroy(brisk_heap_t *heap);
BRISK_API BRISK_MALLOC_ATTR void *brisk_heap_malloc(brisk_heap_t *heap, size_t size);
BRISK_API BRISK_MALLOC_ATTR void *brisk_heap_calloc(brisk_heap_t *heap, size_t count, size_t size);
/* p may be a block of any heap (or NULL); the result is a block of `heap`
 * unless p's block already has room or grows in place. */
BRISK_API void *brisk_heap_realloc(brisk_heap_t *heap, void *p, size_t size);
BRISK_API BRISK_MALLOC_ATTR void *brisk_heap_aligned_alloc(brisk_heap_t *heap, size_t alignment,
                                                           size_t size);
/* A block of `heap` whose whole usable size is zero (as brisk_zalloc). */
BRISK_API BRISK_MALLOC_ATTR void *brisk_heap_zalloc(brisk_heap_t *heap, size_t size);
/* JSON statistics of one heap, on its thread; returns the length it
 * needed: segments, pages, full_pages, blocks_in_use (every block: of size
 * classes, large and huge), page_bytes, large_blocks, large_bytes,
 * huge_blocks, huge_bytes, generation. */
BRISK_API size_t brisk_heap_stats_json(brisk_heap_t *heap, char *buf, size_t len);

/* Called for each live block of a heap with its usable size; returns 0 to
 * go on, anything else to end the walk (brisk_heap_visit returns it). */
typedef int (*brisk_block_visitor_t)(brisk_heap_t *heap, void *block, size_t size, void *arg);
/* Visit every live block of `heap`, on the heap's thread. Live: handed
 * out and not freed. Frees that other threads have handed back are taken
 * in first, so their blocks are not visited; a block another thread freed
 * but still holds in its batch of remote frees (up to 63 per thread, until
 * that thread runs out of a page, exits or calls brisk_collect) is. While
 * the visitor runs, the heap does not change: allocating from it (or
 * destroying it, or visiting it again) is reported and fails, and a block
 * of it that is freed (by any thread, the visitor included) goes back when
 * the walk ends, so a block freed before its turn is still visited. Other
 * heaps and malloc work as usual. Returns 0 when every block was visited,
 * the visitor's non-zero value when it ended the walk, and -1 (errno
 * EINVAL, reported) for a heap that is not usable here. */
BRISK_API int brisk_heap_visit(brisk_heap_t *heap, brisk_block_visitor_t visitor, void *arg);
/* Non-zero when p is the start of a block of `heap` (one handed out, or
 * freed since while its page stays in use: brisk_heap_visit tells live
 * blocks), on the heap's thread; O(1), safe for any pointer value. */
BRISK_API int brisk_heap_contains(brisk_heap_t *heap, const void *p);

/* ---------------------------------------------------------------------------
 * Session arenas: bump allocation over a heap (NULL: the calling thread's
 * default heap). When a buffer runs out the arena takes another from its
 * heap, each twice the size of the last, so allocation fails only when the
 * system has no memory. Blocks are not freed one by one: reset keeps the
 * first buffer and returns the rest; destroy returns everything. An arena
 * is used by one thread at a time.
 * ------------------------------------------------------------------------- */
typedef struct brisk_arena_s brisk_arena_t;

BRISK_API brisk_arena_t *brisk_arena_new(brisk_heap_t *heap_or_null, size_t initial_bytes);
/* alignment: a power of two, or 0 for 16. */
BRISK_API void *brisk_arena_alloc(brisk_arena_t *arena, size_t size, size_t alignment);
BRISK_API void brisk_arena_reset(brisk_arena_t *arena);
BRISK_API void brisk_arena_destroy(brisk_arena_t *arena);

/* ---------------------------------------------------------------------------
 * Heap profiling (README, "Finding where memory goes"). A random sample of
 * the bytes allocated (one per BRISK_PROFILE_RATE bytes on average, 512 KiB
 * by default) is recorded with its calling stack, and forgotten when its
 * block is freed. A dump writes the memory in use, and all that was
 * allocated since sampling began, scaled back from the samples, by stack:
 * PATH, the legacy heap profile that google-pprof and jeprof read, and
 * beside it the collapsed stacks ("frame;frame;frame bytes", for flame
 * graphs): PATH with .collapsed in place of a final .heap, or added.
 * BRISK_PROFILE=<prefix> starts sampling at start-up; the dumps that name
 * no path go to <prefix>.<pid>.<seq>.heap: at exit, every
 * BRISK_PROFILE_INTERVAL bytes of growth of the memory in use, on
 * BRISK_PROFILE_SIGNAL and on brisk_profile_dump(NULL). With the profiler
 * off, allocation costs what it costs without it.
 * ------------------------------------------------------------------------- */
/* Start sampling, with `prefix` for the dumps that name no path (called
 * again: a new prefix). 0; EINVAL for a NULL or empty prefix, ENAMETOOLONG
 * for one of 4032 bytes or more (both reported). */
BRISK_API int brisk_profile_start(const char *prefix);
/* Stop sampling new allocations. The blocks sampled so far stay in the
 * dumps until they are freed; no dump is written at exit. */
BRISK_API void brisk_profile_stop(void);
/* Write a dump now: to `path` and its collapsed file, or with NULL to the
 * next <prefix>.<pid>.<seq>.heap. Works whether or not sampling is on.
 * 0, or an errno value: EINVAL (an empty path, or NULL with no prefix),
 * ENAMETOOLONG (both reported); a file that cannot be written, or no
 * memory for the dump, is a warning and returns its errno. */
BRISK_API int brisk_profile_dump(const char *path);

#ifdef __cplusplus
}
#endif

#endif /* BRISK_H */
