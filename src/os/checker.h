/* What brisk tells a memory checker about its memory, in a build for one:
 * BRISK_VALGRIND (valgrind's memcheck, through its client requests) or
 * BRISK_ASAN (AddressSanitizer, through its poisoning interface). In a
 * default build every function here is empty and BRISK_TRACK is 0.
 *
 * The block-level bookkeeping (sizes, red zones, which block is live) is
 * track.c's; this file has only the primitives, at the bottom of the
 * layers, so that the OS layer can unpoison what it unmaps and a thread
 * of brisk's own can quiet the checker.
 *
 * brisk itself is never instrumented: its objects are built without
 * -fsanitize=address, and under memcheck its own reads and writes of free
 * blocks (the links of its lists) are made with error reporting off
 * (checker_quiet_begin/end around every tracked entry, and for the whole
 * life of the background thread). */
#ifndef BRISK_CHECKER_H
#define BRISK_CHECKER_H

#include <stdbool.h>
#include <stddef.h>

#include "base/config.h"

#ifndef BRISK_VALGRIND
#define BRISK_VALGRIND 0
#endif
#ifndef BRISK_ASAN
#define BRISK_ASAN 0
#endif
#define BRISK_TRACK (BRISK_VALGRIND || BRISK_ASAN)

#if BRISK_VALGRIND
#include <valgrind/memcheck.h>
#endif

#if BRISK_ASAN
/* Weak: a program that is not built with -fsanitize=address has no
 * AddressSanitizer runtime, and then brisk poisons nothing. */
extern void __asan_poison_memory_region(void const volatile *addr, size_t size)
    __attribute__((weak));
extern void __asan_unpoison_memory_region(void const volatile *addr, size_t size)
    __attribute__((weak));
/* Set by a constructor (platform.c), which runs after the sanitizer's
 * runtime has started: its start allocates (through brisk) before its
 * shadow memory exists, and those blocks stay unpoisoned. */
BRISK_INTERNAL extern bool checker_asan_ready;
#define ASAN_CALL(fn, p, n) \
  do {                      \
    if (fn && checker_asan_ready) fn(p, n); \
  } while (0)
#endif

/* A block of `size` bytes at p is handed out (its contents zero when
 * `zeroed`): memcheck records it as a heap block, ASan unpoisons it. */
static inline void checker_block_alloc(void *p, size_t size, bool zeroed) {
#if BRISK_VALGRIND
  VALGRIND_MALLOCLIKE_BLOCK(p, size, 0, zeroed);
#endif
#if BRISK_ASAN
  ASAN_CALL(__asan_unpoison_memory_region, p, size);
#endif
  (void)p, (void)size, (void)zeroed;
}

/* The block at p is given back: memcheck forgets it (and reports a free of
 * anything it does not know as a block), its bytes become inaccessible. */
static inline void checker_block_free(void *p) {
#if BRISK_VALGRIND
  VALGRIND_FREELIKE_BLOCK(p, 0);
#endif
  (void)p;
}

/* Bytes no program may touch: a block's red zone, a free block. */
static inline void checker_no_access(void *p, size_t size) {
#if BRISK_VALGRIND
  VALGRIND_MAKE_MEM_NOACCESS(p, size);
#endif
#if BRISK_ASAN
  ASAN_CALL(__asan_poison_memory_region, p, size);
#endif
  (void)p, (void)size;
}

/* Bytes brisk is about to read or write itself (a red zone's record), or
 * that leave brisk (a range given back to the OS): accessible again. */
static inline void checker_access(void *p, size_t size) {
#if BRISK_VALGRIND
  VALGRIND_MAKE_MEM_DEFINED(p, size);
#endif
#if BRISK_ASAN
  ASAN_CALL(__asan_unpoison_memory_region, p, size);
#endif
  (void)p, (void)size;
}

/* memcheck reports nothing the calling thread does between begin and end:
 * brisk's own accesses to free blocks. They nest. */
static inline void checker_quiet_begin(void) {
#if BRISK_VALGRIND
  VALGRIND_DISABLE_ERROR_REPORTING;
#endif
}
static inline void checker_quiet_end(void) {
#if BRISK_VALGRIND
  VALGRIND_ENABLE_ERROR_REPORTING;
#endif
}

#endif
