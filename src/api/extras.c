/* glibc's allocator extras, answered by brisk: malloc_trim, mallinfo2,
 * mallinfo, malloc_stats, malloc_info, mallopt. Part of the build that
 * replaces the malloc family (with override.c): a build without it
 * (rust/brisk-sys without its `override` feature) leaves glibc's.
 *
 * mallinfo's fields, with glibc's meanings (glibc keeps mmapped chunks out
 * of arena and uordblks; brisk keeps its huge blocks out the same way, so
 * uordblks + hblkhd is what is in use and arena + hblkhd what is mapped):
 *   arena     bytes mapped from the OS, huge blocks in use aside
 *   ordblks   free chunks: runs of free slices in the heaps' segments,
 *             empty segments in the pool, freed huge mappings kept
 *   smblks    0 (no fastbins)
 *   hblks     huge blocks in use (each a mapping of its own)
 *   hblkhd    bytes mapped for them, their kept tails aside
 *   usmblks   0 (as in glibc)
 *   fsmblks   0
 *   uordblks  bytes of pages of size classes and of large blocks in use;
 *             a page counts whole while any of its blocks is in use
 *   fordblks  bytes mapped but not in use: free slices of the heaps'
 *             segments, empty segments (their page slices), huge memory
 *             kept (freed mappings, tails)
 *   keepcost  the part of fordblks not yet returned to the OS: what
 *             malloc_trim(0) would give back now
 * arena - uordblks - fordblks is brisk's own: segment headers, heap
 * objects, the hardened build's side tables. The figures come from a walk
 * of every heap's segments, each under its lock, the pool and the huge
 * cache (usage.c), and from the counters; while other threads allocate
 * they are approximate, and arena is at least uordblks + fordblks. */
#include <errno.h>
#include <limits.h>
#include <malloc.h>
#include <stdio.h>

#include "alloc/alloc.h"
#include "api/settings.h"
#include "base/atomics.h"
#include "heaps/thread.h"
#include "heaps/usage.h"
#include "os/platform.h"
#include "runtime/options.h"
#include "runtime/report.h"
#include "runtime/stats.h"

#define BRISK_EXPORT __attribute__((visibility("default")))
#define LOAD(f) atomic_load_explicit(&brisk_stats.f, memory_order_relaxed)

/* Android's names for a purge now, of the calling thread and of all. */
#ifndef M_PURGE
#define M_PURGE (-101)
#endif
#ifndef M_PURGE_ALL
#define M_PURGE_ALL (-104)
#endif

static heap_t *own_heap_or_null(void) {
  heap_t *h = thread_heap();
  return h->kind == HEAP_KIND_STATIC ? NULL : h;
}

/* pad: glibc keeps that much at the top of its heap; brisk has no top and
 * returns everything unused. */
BRISK_EXPORT int malloc_trim(size_t pad) {
  (void)pad;
  return usage_trim(own_heap_or_null()) ? 1 : 0;
}

static size_t at_least_zero(int64_t v) { return v < 0 ? 0 : (size_t)v; }

static struct mallinfo2 mallinfo_figures(stats_usage_t *u) {
  alloc_stats_sync();
  usage_collect(u);
  struct mallinfo2 mi = {0};
  int64_t arena = LOAD(mapped_bytes) - u->huge_block_bytes;
  if (arena < u->span_bytes + u->free_bytes) arena = u->span_bytes + u->free_bytes;
  mi.arena = at_least_zero(arena);
  mi.ordblks = at_least_zero(u->free_chunks);
  mi.hblks = at_least_zero(LOAD(huge_blocks));
  mi.hblkhd = at_least_zero(u->huge_block_bytes);
  mi.uordblks = at_least_zero(u->span_bytes);
  mi.fordblks = at_least_zero(u->free_bytes);
  mi.keepcost = at_least_zero(u->free_resident_bytes);
  return mi;
}

BRISK_EXPORT struct mallinfo2 mallinfo2(void) {
  stats_usage_t u;
  return mallinfo_figures(&u);
}

/* int fields, saturated at INT_MAX as glibc's are. */
static int saturate(size_t v) { return v > (size_t)INT_MAX ? INT_MAX : (int)v; }

BRISK_EXPORT struct mallinfo mallinfo(void) {
  stats_usage_t u;
  struct mallinfo2 m = mallinfo_figures(&u);
  struct mallinfo mi = {
      .arena = saturate(m.arena),
      .ordblks = saturate(m.ordblks),
      .smblks = saturate(m.smblks),
      .hblks = saturate(m.hblks),
      .hblkhd = saturate(m.hblkhd),
      .usmblks = saturate(m.usmblks),
      .fsmblks = saturate(m.fsmblks),
      .uordblks = saturate(m.uordblks),
      .fordblks = saturate(m.fordblks),
      .keepcost = saturate(m.keepcost),
  };
  return mi;
}

static void line_to_stderr(const char *fmt, long long v) {
  char line[96];
  size_t n = format_string(line, sizeof(line) - 1, fmt, v);
  if (n > sizeof(line) - 2) n = sizeof(line) - 2;
  line[n++] = '\n';
  os_write_stderr(line, n);
}

/* glibc's totals, then brisk's statistics; on stderr, as glibc writes them,
 * without allocating. */
BRISK_EXPORT void malloc_stats(void) {
  stats_usage_t u;
  struct mallinfo2 m = mallinfo_figures(&u);
  os_write_stderr("Total (incl. mmap):\n", 20);
  line_to_stderr("system bytes     = %lld", (long long)(m.arena + m.hblkhd));
  line_to_stderr("in use bytes     = %lld", (long long)(m.uordblks + m.hblkhd));
  line_to_stderr("max mmap regions = %lld", (long long)LOAD(huge_blocks_peak));
  line_to_stderr("max mmap bytes   = %lld", (long long)LOAD(huge_bytes_peak));
  stats_print_stderr(&u);
}

/* glibc's shape: a <heap> per heap that holds segments, then the totals
 * (rest: free memory; mmap: huge blocks; system: mapped but for huge
 * blocks, and its peak, huge blocks included). */
BRISK_EXPORT int malloc_info(int options, FILE *fp) {
  if (options != 0) {
    report_error("malloc_info(%d, %p): options must be 0", options, (void *)fp);
    errno = EINVAL;
    return -1;
  }
  if (fp == NULL) {
    report_error("malloc_info(0, NULL): no stream to write to");
    errno = EINVAL;
    return -1;
  }
  fprintf(fp, "<malloc version=\"brisk-%d.%d.%d\">\n", 0, 1, 0);
  int nr = 0;
  /* Each heap's figures are taken under its lock, and written after: no
   * lock of brisk's is held while stdio writes (which may allocate). */
  for (heap_t *h = heap_first(); h; h = h->next_all) {
    usage_heap_t f;
    if (!usage_heap(h, &f)) continue;
    long long system = (long long)f.segments * (long long)SEGMENT_SIZE;
    fprintf(fp,
            "<heap nr=\"%d\">\n<sizes>\n</sizes>\n"
            "<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
            "<total type=\"rest\" count=\"%lld\" size=\"%lld\"/>\n"
            "<system type=\"current\" size=\"%lld\"/>\n<system type=\"max\" size=\"%lld\"/>\n"
            "<aspace type=\"total\" size=\"%lld\"/>\n<aspace type=\"mprotect\" size=\"%lld\"/>\n"
            "</heap>\n",
            nr++, (long long)f.free_runs, (long long)f.free_bytes, system, system, system, system);
  }
  stats_usage_t u;
  struct mallinfo2 m = mallinfo_figures(&u);
  long long peak = (long long)LOAD(mapped_bytes_peak);
  if (peak < (long long)m.arena) peak = (long long)m.arena;
  fprintf(fp,
          "<total type=\"fast\" count=\"0\" size=\"0\"/>\n"
          "<total type=\"rest\" count=\"%zu\" size=\"%zu\"/>\n"
          "<total type=\"mmap\" count=\"%zu\" size=\"%zu\"/>\n"
          "<system type=\"current\" size=\"%zu\"/>\n<system type=\"max\" size=\"%lld\"/>\n"
          "<aspace type=\"total\" size=\"%zu\"/>\n<aspace type=\"mprotect\" size=\"%zu\"/>\n"
          "</malloc>\n",
          m.ordblks, m.fordblks, m.hblks, m.hblkhd, m.arena, peak, m.arena, m.arena);
  return 0;
}

/* glibc's parameters, mapped onto brisk's options where brisk has such a
 * setting: 1 when accepted, 0 for a value glibc refuses too or a
 * parameter unknown to brisk (glibc answers 1 to those: brisk tells). */
BRISK_EXPORT int mallopt(int param, int value) {
  switch (param) {
    case M_TRIM_THRESHOLD: {
      /* Free memory glibc keeps before trimming: the empty segments brisk
       * keeps mapped (BRISK_SEGMENT_CACHE, 4 MiB each); negative: never
       * trim, keep them all. When freed memory goes back (purge) is
       * BRISK_PURGE_DELAY's. */
      int64_t segments = value < 0 ? SEGMENT_CACHE_MAX : (int64_t)value / (int64_t)SEGMENT_SIZE;
      return settings_apply(OPTION_segment_cache, segments) == 0;
    }
    case M_CHECK_ACTION:
      /* bit 1: abort on a bad free (BRISK_ON_ERROR=abort); brisk always
       * reports the error first and cannot ignore it silently. */
      return settings_apply(OPTION_on_error, (value & 2) ? ON_ERROR_ABORT : ON_ERROR_REPORT) == 0;
    case M_MXFAST:
      return value >= 0 && (size_t)value <= 80 * sizeof(size_t) / 4; /* no fastbins */
    case M_MMAP_THRESHOLD: /* brisk's is fixed: blocks above 2 MiB get a mapping */
    case M_TOP_PAD:     /* no top of heap to pad */
    case M_MMAP_MAX:    /* huge blocks always get a mapping */
    case M_PERTURB:     /* the hardened build fills freed blocks itself */
    case M_ARENA_TEST:  /* one heap per thread, not arenas */
    case M_ARENA_MAX:
      return 1;
    case M_PURGE:
      alloc_collect(true);
      return 1;
    case M_PURGE_ALL:
      usage_trim(own_heap_or_null());
      return 1;
    default:
      return 0;
  }
}
