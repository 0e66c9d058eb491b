/* The unwind tables (.eh_frame) read for the profiler's fast stack walk
 * (unwind_table.c), and what they say about each return address kept in
 * a cache. Used by stackwalk.c only. */
#ifndef BRISK_UNWIND_TABLE_H
#define BRISK_UNWIND_TABLE_H

#include <link.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/config.h"

enum { RULE_OK = 1, RULE_END = 2, RULE_OTHER = 3 };

typedef struct rule_s {
  uint8_t kind;    /* RULE_* */
  uint8_t cfa_rbp; /* CFA from rbp (else rsp) */
  int32_t cfa_off, ra_off, rbp_off; /* rbp_off 0: rbp not saved by the frame */
} rule_t;

/* Where an object's tables are read from: its mapping, or its file where
 * the mapping is not readable (unwind_table.c). */
#define TABLE_LOADS 8
typedef struct table_src_s {
  int fd; /* -1: the mapping */
  unsigned loads;
  struct {
    uintptr_t lo, hi; /* the file's bytes of a PT_LOAD, as mapped */
    uint64_t off;
  } load[TABLE_LOADS];
  bool failed; /* a read from the file failed: look up again from the mapping */
} table_src_t;

/* The cached rule of pc in the object mapped as map (false: none). */
BRISK_INTERNAL bool cache_get(uintptr_t pc, uintptr_t map, rule_t *out);
BRISK_INTERNAL void cache_put(uintptr_t pc, uintptr_t map, const rule_t *r);
/* The tables of the object that starts at start, described by map. */
BRISK_INTERNAL void src_open(table_src_t *s, uintptr_t start, const struct link_map *map);
BRISK_INTERNAL void src_close(table_src_t *s);
/* The rule at pc, from the search table whose header is at hdr_at. */
BRISK_INTERNAL rule_t find_rule(uintptr_t pc, uintptr_t hdr_at, table_src_t *s);

#endif
