/* Stack capture and symbol lookup for the heap profiler (profile.c).
 *
 * The walk reads the unwind tables (.eh_frame) that every x86-64 and
 * arm64 object carries, so a program built without frame pointers (as
 * Debian builds its packages) is walked as well as one built with them.
 * libgcc's unwinder is linked into libbrisk.so with its symbols hidden
 * (CMakeLists.txt): nothing is loaded at run time, nothing is allocated
 * through malloc, and a process without libstdc++ or libgcc_s needs
 * neither. Built into another program (libbrisk.a, the Rust crate), the
 * unwinder is the program's own libgcc.
 *
 * Folder profiler/, the bottom of it: calls the platform layer, report.c (the
 * internal checks' failures), libgcc's unwinder and the C library's loader
 * queries (_dl_find_object, dl_iterate_phdr, dladdr1). */
#ifndef BRISK_STACKWALK_H
#define BRISK_STACKWALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/config.h"

/* The rules of the frames of a thread's last walk, by depth: a frame whose
 * return address is the one at its depth last time, in an object that is
 * never unloaded (the program, libbrisk, the C library), takes its rule
 * from here without a lookup (a sample's stack is most often the last
 * one). Owned by one thread (the profiler's heap state); opaque. */
#define WALK_MEMO_FRAMES 16
typedef struct walk_memo_s {
  uintptr_t pc[WALK_MEMO_FRAMES]; /* 0: none */
  uint64_t rule[WALK_MEMO_FRAMES][2];
  /* The last walk's frames while each had a rule based on rsp: each
   * one's return address and where it sits, as an offset from the walk's
   * first rsp; the leading ones (brisk's own, up to the first address
   * kept), the rsp after them and where the rbp they were called with
   * was saved; and, if every frame was recorded, how many and how many
   * addresses the walk kept. */
  uintptr_t lead_pc[WALK_MEMO_FRAMES];
  int32_t lead_ra[WALK_MEMO_FRAMES];
  int32_t lead_cfa, lead_rbp; /* lead_rbp 0: not saved (rbp unchanged) */
  uint8_t lead_n;             /* 0: none */
  uint8_t whole_n, whole_kept; /* whole_n 0: not all recorded */
  /* Set by each walk: its addresses are the last walk's, all of them. */
  uint8_t same;
} walk_memo_t;

/* Up to `max` return addresses of the calling thread's stack, the
 * innermost first, leaving out the frames of brisk's own code when brisk
 * is a shared object of its own (libbrisk.so): the first address is then
 * in the function that called malloc (or new, or brisk_malloc...). Linked
 * statically into the program, brisk's frames head the stack. Safe in any
 * thread, before main and in a forked child; never allocates. */
BRISK_INTERNAL size_t unwind_backtrace(uintptr_t *pcs, size_t max, walk_memo_t *memo); /* memo: not NULL */

/* The symbol that contains addr, if the dynamic symbol tables name one:
 * *name (NULL if none) and *offset into it; *object the file of the
 * mapping that holds addr (NULL if none) and *object_offset, the address
 * in that file (addr less the object's load bias: what addr2line and nm
 * take). Takes the loader's lock: never call it from a path that
 * may hold brisk's locks while the loader allocates. */
BRISK_INTERNAL void unwind_symbol(uintptr_t addr, const char **name, uintptr_t *offset,
                                  const char **object, uintptr_t *object_offset);

#endif
