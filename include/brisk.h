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

/* Non-zero exactly when p points into a block that brisk handed out and
 * whose memory brisk has not returned to the OS. Answered from the address
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
 * of after the purge delay. */
BRISK_API void brisk_collect(void);

#ifdef __cplusplus
}
#endif

#endif /* BRISK_H */
