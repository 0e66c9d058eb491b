/* brisk: a general-purpose memory allocator for Linux C and C++ programs.
 *
 * Public C API. Every function here is safe to call from any thread.
 * When libbrisk.so is preloaded (or linked first) the standard malloc
 * family is replaced as well; these prefixed names always reach brisk.
 */
#ifndef BRISK_H
#define BRISK_H

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
 * form returns the length it needed (excluding the NUL), like snprintf. */
BRISK_API void brisk_stats_print(FILE *out);
BRISK_API size_t brisk_stats_json(char *buf, size_t len);

/* Return memory that the calling thread's heap holds but does not use
 * (empty pages, pending remote frees, purge of idle memory) now, instead
 * of after the purge delay; also the process's cached empty segments and
 * freed huge mappings. */
BRISK_API void brisk_collect(void);

/* Testing: make brisk's requests for memory from the OS fail, as when the
 * system has none left: every one after `fail_after` more (negative: no
 * such limit) and each with probability fail_per_million / 10^6.
 * brisk_fault_injection(-1, 0) switches it off. Also set at start-up by
 * BRISK_FAULT_AFTER and BRISK_FAULT_RATE. */
BRISK_API void brisk_fault_injection(long fail_after, unsigned fail_per_million);

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
/* JSON statistics of one heap; returns the length it needed. */
BRISK_API size_t brisk_heap_stats_json(brisk_heap_t *heap, char *buf, size_t len);

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
 * by default) is recorded with its calling stack; a dump writes the memory
 * in use (and all allocated since the start), scaled back from the samples,
 * by stack: PATH (the legacy heap profile that google-pprof and jeprof
 * read) and PATH.collapsed (frame;frame;frame bytes, for flame graphs; a
 * PATH ending in .heap gives PATH with .collapsed in its place).
 * BRISK_PROFILE=<prefix> starts sampling at start-up; dumps then also go
 * to <prefix>.<pid>.<seq>.heap at exit, every BRISK_PROFILE_INTERVAL bytes
 * of growth of the in-use heap and on BRISK_PROFILE_SIGNAL.
 * ------------------------------------------------------------------------- */
/* Start sampling (or change the prefix of the automatic dumps). 0, or
 * EINVAL for a NULL or empty prefix, ENAMETOOLONG (reported). */
BRISK_API int brisk_profile_start(const char *prefix);
/* Stop sampling new allocations. The blocks sampled so far stay recorded
 * until freed, so a later dump still shows what remains of them; no dump
 * is written at exit. */
BRISK_API void brisk_profile_stop(void);
/* Write a dump now: to PATH and its .collapsed file, or with PATH NULL to
 * the next <prefix>.<pid>.<seq>.heap. 0, or an errno value (a file that
 * cannot be written is reported as a warning). */
BRISK_API int brisk_profile_dump(const char *path);

#ifdef __cplusplus
}
#endif

#endif /* BRISK_H */
