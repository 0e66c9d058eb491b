/* Session arenas: bump allocation over a heap, growing geometrically.
 *
 *   arena ──► buffer 1 (first, kept by reset) ──► buffer 2 ──► buffer 3 ...
 *             [header|used ......|free    ]        each twice the last
 *                                ^cur     ^end     (cur/end: the newest)
 */
#include <errno.h>
#include <string.h>

#include "brisk.h"

#include "alloc/alloc.h"
#include "alloc/entry.h"
#include "runtime/report.h"

#define BRISK_EXPORT __attribute__((visibility("default")))

typedef struct arena_buffer_s {
  struct arena_buffer_s *next;
  size_t size; /* bytes of the whole buffer, header included */
} arena_buffer_t;

#define ARENA_MAGIC 0x61726e61u /* "arna": a live arena */

struct brisk_arena_s {
  uint8_t *cur;
  uint8_t *end;
  uint32_t magic;
  brisk_heap_t *heap;          /* NULL: the calling thread's default heap */
  arena_buffer_t *first;       /* kept by reset */
  arena_buffer_t *last;        /* the one cur points into */
  size_t next_size;
};

#define ARENA_HEADER ((sizeof(arena_buffer_t) + 15) & ~(size_t)15)
#define ARENA_MIN_BUFFER ((size_t)4096)

static void *arena_heap_alloc(brisk_heap_t *heap, size_t size) {
  return heap ? brisk_heap_malloc(heap, size) : entry_malloc(size);
}

static arena_buffer_t *buffer_new(brisk_arena_t *a, size_t size) {
  arena_buffer_t *b = arena_heap_alloc(a->heap, size);
  if (b == NULL) return NULL;
  b->next = NULL;
  /* The block may be larger than asked (size classes): use all of it. */
  size_t usable = entry_usable_size(b, FN_BRISK_USABLE_SIZE);
  b->size = usable > size ? usable : size;
  return b;
}

static void buffer_enter(brisk_arena_t *a, arena_buffer_t *b) {
  a->cur = (uint8_t *)b + ARENA_HEADER;
  a->end = (uint8_t *)b + b->size;
  a->last = b;
}

BRISK_EXPORT brisk_arena_t *brisk_arena_new(brisk_heap_t *heap, size_t initial_bytes) {
  brisk_arena_t *a = arena_heap_alloc(heap, sizeof(*a));
  if (a == NULL) return NULL;
  memset(a, 0, sizeof(*a));
  a->magic = ARENA_MAGIC;
  a->heap = heap;
  size_t size = initial_bytes + ARENA_HEADER;
  if (size < ARENA_MIN_BUFFER || size < initial_bytes) size = ARENA_MIN_BUFFER;
  arena_buffer_t *b = buffer_new(a, size);
  if (b == NULL) {
    entry_free(a, FN_BRISK_FREE);
    return NULL;
  }
  a->first = b;
  buffer_enter(a, b);
  a->next_size = b->size * 2;
  return a;
}

/* An arena from brisk_arena_new, not yet destroyed; else reported. */
static bool arena_valid(const brisk_arena_t *a, const char *fn) {
  /* The registry first: a pointer into memory brisk returned is not read. */
  if (alloc_owns(a) && a->magic == ARENA_MAGIC) return true;
  report_error("%s(%p): not an arena made by brisk_arena_new (or one already destroyed)", fn,
               (const void *)a);
  return false;
}

/* The current buffer is exhausted: take one big enough from the heap. */
static BRISK_NOINLINE void *arena_overflow(brisk_arena_t *a, size_t size, size_t alignment) {
  if (!arena_valid(a, "brisk_arena_alloc")) {
    errno = EINVAL;
    return NULL;
  }
  size_t need = size + alignment + ARENA_HEADER;
  if (need < size) {
    errno = ENOMEM;
    return NULL;
  }
  size_t bsize = a->next_size > need ? a->next_size : need;
  arena_buffer_t *b = buffer_new(a, bsize);
  if (b == NULL && bsize > need) b = buffer_new(a, need);
  if (b == NULL) return NULL;
  a->last->next = b;
  buffer_enter(a, b);
  if (a->next_size < ((size_t)1 << 40)) a->next_size *= 2;
  uintptr_t p = ((uintptr_t)a->cur + alignment - 1) & ~(uintptr_t)(alignment - 1);
  a->cur = (uint8_t *)(p + size);
  return (void *)p;
}

BRISK_EXPORT void *brisk_arena_alloc(brisk_arena_t *a, size_t size, size_t alignment) {
  if (BRISK_UNLIKELY(a == NULL)) {
    arena_valid(a, "brisk_arena_alloc");
    errno = EINVAL;
    return NULL;
  }
  if (BRISK_UNLIKELY((alignment & (alignment - 1)) != 0)) {
    report_error("brisk_arena_alloc(%p): alignment %zu is not a power of two", (void *)a, alignment);
    errno = EINVAL;
    return NULL;
  }
  if (alignment < 16) alignment = 16;
  uintptr_t p = ((uintptr_t)a->cur + alignment - 1) & ~(uintptr_t)(alignment - 1);
  if (BRISK_LIKELY(p <= (uintptr_t)a->end && size <= (uintptr_t)a->end - p)) {
    a->cur = (uint8_t *)(p + size);
    return (void *)p;
  }
  return arena_overflow(a, size, alignment);
}

static void free_buffers_after(arena_buffer_t *b) {
  arena_buffer_t *next = b->next;
  b->next = NULL;
  while (next) {
    arena_buffer_t *n = next->next;
    entry_free(next, FN_BRISK_FREE);
    next = n;
  }
}

BRISK_EXPORT void brisk_arena_reset(brisk_arena_t *a) {
  if (!arena_valid(a, "brisk_arena_reset")) return;
  free_buffers_after(a->first);
  buffer_enter(a, a->first);
  a->next_size = a->first->size * 2;
}

BRISK_EXPORT void brisk_arena_destroy(brisk_arena_t *a) {
  if (a == NULL) return;
  if (!arena_valid(a, "brisk_arena_destroy")) return;
  a->magic = 0;
  free_buffers_after(a->first);
  entry_free(a->first, FN_BRISK_FREE);
  entry_free(a, FN_BRISK_FREE);
}
