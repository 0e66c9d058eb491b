/* The prefixed public API (include/brisk.h). */
#include <errno.h>
#include <stdio.h>

#include "brisk.h"

#include "alloc/alloc.h"
#include "alloc/entry.h"
#include "alloc/visit.h"
#include "guarded/guarded.h"
#include "heaps/sample.h"
#include "heaps/usage.h"
#include "os/platform.h"
#include "profiler/profiler.h"
#include "runtime/stats.h"

#define BRISK_EXPORT __attribute__((visibility("default")))

BRISK_EXPORT void *brisk_malloc(size_t size) { return entry_malloc(size); }

BRISK_EXPORT void brisk_free(void *p) { entry_free(p, FN_BRISK_FREE); }

BRISK_EXPORT void brisk_free_sized(void *p, size_t size) {
  entry_free_sized(p, size, 0, FN_BRISK_FREE_SIZED);
}

BRISK_EXPORT void *brisk_calloc(size_t count, size_t size) { return entry_calloc(count, size); }

BRISK_EXPORT void *brisk_realloc(void *p, size_t size) {
  return entry_realloc(NULL, p, size, FN_BRISK_REALLOC);
}

BRISK_EXPORT void *brisk_aligned_alloc(size_t alignment, size_t size) {
  if (alignment == 0 || (alignment & (alignment - 1)) != 0) {
    errno = EINVAL;
    return NULL;
  }
  return entry_aligned(alignment, size);
}

BRISK_EXPORT size_t brisk_usable_size(const void *p) {
  return entry_usable_size(p, FN_BRISK_USABLE_SIZE);
}

BRISK_EXPORT int brisk_owns(const void *p) { return alloc_owns(p) || guarded_owns(p) ? 1 : 0; }

BRISK_EXPORT const char *brisk_version(void) { return "0.1.0"; }

BRISK_EXPORT size_t brisk_good_size(size_t size) { return alloc_good_size(size); }

BRISK_EXPORT void *brisk_malloc_usable(size_t size, size_t *usable) {
  void *p = entry_malloc(size);
  if (usable != NULL) *usable = p != NULL ? entry_usable_size(p, FN_BRISK_USABLE_SIZE) : 0;
  return p;
}

BRISK_EXPORT void *brisk_zalloc(size_t size) { return entry_zalloc(size); }

BRISK_EXPORT void *brisk_rezalloc(void *p, size_t size) { return entry_rezalloc(p, size); }

BRISK_EXPORT void *brisk_expand(void *p, size_t size) { return entry_expand(p, size); }

static void emit_file(const char *line, void *arg) { fprintf((FILE *)arg, "%s\n", line); }

/* The figures are taken first: no lock of brisk's is held while stdio
 * writes (which may allocate). */
BRISK_EXPORT void brisk_stats_print(FILE *out) {
  if (out == NULL) out = stderr;
  alloc_stats_sync();
  stats_usage_t usage;
  usage_collect(&usage);
  stats_text(emit_file, out, &usage);
  fflush(out);
}

BRISK_EXPORT size_t brisk_stats_json(char *buf, size_t len) {
  alloc_stats_sync();
  stats_usage_t usage;
  usage_collect(&usage);
  return stats_json(buf, len, &usage);
}

BRISK_EXPORT void brisk_stats_reset(void) {
  alloc_stats_sync();
  stats_reset();
}

BRISK_EXPORT size_t brisk_thread_stats_json(char *buf, size_t len) {
  heap_t *h = thread_heap();
  if (h->kind == HEAP_KIND_STATIC) h = &brisk_heap_empty; /* a thread that owns nothing yet */
  return heap_stats_json(h, buf, len);
}

BRISK_EXPORT void brisk_collect(bool force) { alloc_collect(force); }

BRISK_EXPORT void brisk_fault_injection(long fail_after, unsigned fail_per_million) {
  os_fault_injection(fail_after < 0 ? -1 : (int64_t)fail_after, fail_per_million);
}

BRISK_EXPORT void brisk_fault_injection_calls(unsigned kinds) { os_fault_kinds(kinds); }

BRISK_EXPORT int brisk_profile_start(const char *prefix) {
  process_init();
  int err = prof_start(prefix);
  if (err == 0) sampler_settings_changed();
  return err;
}

BRISK_EXPORT void brisk_profile_stop(void) {
  prof_stop();
  sampler_settings_changed(); /* the heaps go on counting while guarded samples are on */
}

BRISK_EXPORT int brisk_profile_dump(const char *path) {
  process_init();
  return prof_dump(path);
}
