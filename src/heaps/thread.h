/* Process and thread lifecycle: brisk's start-up, each thread's default
 * heap (one initial-exec TLS pointer), thread exit, and fork. */
#ifndef BRISK_THREAD_H
#define BRISK_THREAD_H

#include "heaps/heap.h"

extern __thread heap_t *brisk_tls_heap BRISK_INTERNAL __attribute__((tls_model("initial-exec")));

BRISK_INLINE heap_t *thread_heap(void) { return brisk_tls_heap; }

/* The calling thread's heap, creating or adopting one on first use;
 * NULL when the OS has no memory for it. */
BRISK_INTERNAL heap_t *thread_heap_init(void) BRISK_NOINLINE;
/* The heap a freeing thread batches its remote frees in, or NULL when it
 * has none (it has exited, or never allocated and cannot get one). */
BRISK_INTERNAL heap_t *thread_heap_for_free(void);
BRISK_INTERNAL void process_init(void);

#endif
