/* Checks of the hardened build (libbrisk-hardened.so): how each block was
 * allocated (malloc, operator new, operator new[]) against how it is
 * released, and the size given to a sized release. In the default build
 * BRISK_HARDENED is 0 and the callers' `if (BRISK_HARDENED)` removes them. */
#ifndef BRISK_HARDENED_H
#define BRISK_HARDENED_H

#include <stdbool.h>
#include <stddef.h>

#include "free.h"

enum alloc_kind { KIND_MALLOC = 0, KIND_NEW = 1, KIND_NEW_ARRAY = 2 };

/* Record that p (just allocated) came from operator new or new[]. */
BRISK_INTERNAL void hardened_mark(void *p, enum alloc_kind kind);
/* May p be released through fn (with `size` when sized, rounded up to
 * `alignment`)? Reports and returns false when not; on success the block's
 * kind is reset for its next life. */
BRISK_INTERNAL bool hardened_release_ok(void *p, brisk_fn_t fn, bool sized, size_t size,
                                        size_t alignment) BRISK_NOINLINE;

#endif
