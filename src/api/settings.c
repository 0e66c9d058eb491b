/* Options while running (brisk_option_get, brisk_option_set): the table of
 * options.h says which may change; each change is one atomic store,
 * followed by what makes it take effect at once. Any thread may set an
 * option: readers load it as a relaxed atomic, any value it held being a
 * right answer for them. Two threads setting the same option at once leave
 * one of the two values. Nothing here holds a lock of its own, so a fork
 * never finds one held. */
#include "api/settings.h"

#include <errno.h>

#include "brisk.h"

#include "alloc/alloc.h"
#include "heaps/sample.h"
#include "heaps/thread.h"
#include "heaps/usage.h"
#include "os/platform.h"
#include "profiler/profiler.h"
#include "runtime/background.h"
#include "runtime/report.h"
#include "segments/span.h"

#define BRISK_EXPORT __attribute__((visibility("default")))

int settings_apply(int id, int64_t value) {
  const option_info_t *o = &brisk_option_info[id];
  if (!o->runtime) return EPERM;
  if (value < o->min || value > o->max) return EINVAL;
  process_init(); /* the environment is read before any change */
  uint64_t now = os_now_ms();
  switch (id) {
    case OPTION_purge_delay_ms:
      atomic_store(&brisk_options.purge_delay_ms, value);
      /* A shorter delay brings the deadlines of waiting slices forward; the
       * pool and the huge cache count theirs from when memory arrived. A
       * longer one leaves waiting slices their deadline. */
      usage_reschedule(now);
      background_kick(now);
      if (!background_running()) segments_maintain(now, false);
      break;
    case OPTION_segment_cache:
      atomic_store(&brisk_options.segment_cache, value);
      segments_maintain(now, false); /* the surplus goes now */
      break;
    case OPTION_on_error:
      atomic_store(&brisk_options.on_error, value);
      report_set_abort_on_error(value == ON_ERROR_ABORT);
      break;
    case OPTION_show_stats:
      if (value) os_keep_stderr(); /* before: the exit may need it */
      atomic_store(&brisk_options.show_stats, value);
      break;
    case OPTION_profile_leaks:
      prof_leaks_changed(value != 0); /* before: the exit may need stderr */
      atomic_store(&brisk_options.profile_leaks, value);
      sampler_settings_changed(); /* the leak report needs samples */
      break;
    case OPTION_guard_rate:
      atomic_store(&brisk_options.guard_rate, value);
      sampler_settings_changed(); /* the heaps count from their next slow path */
      break;
    case OPTION_background:
      background_set_enabled(value != 0);
      if (value == 0) heaps_abandoned_give_back(true);
      background_poll(); /* a safe point: no lock of brisk's is held */
      break;
    default:
      atomic_store(options_slot(id), value);
      break;
  }
  return 0;
}

/* The option named `name`, or -1 after reporting. */
static int option_named(const char *name, const char *fn) {
  if (name == NULL) {
    report_error("%s(NULL): no option name", fn);
    return -1;
  }
  int id = options_find(name);
  if (id < 0) report_error("%s(%s): unknown option", fn, name);
  return id;
}

BRISK_EXPORT int brisk_option_get(const char *name, long *value) {
  int id = option_named(name, "brisk_option_get");
  if (id < 0) return name == NULL ? EINVAL : ENOENT;
  if (value == NULL) {
    report_error("brisk_option_get(%s): no place for the value (NULL)", name);
    return EINVAL;
  }
  *value = (long)options_get(id);
  return 0;
}

BRISK_EXPORT int brisk_option_set(const char *name, long value) {
  int id = option_named(name, "brisk_option_set");
  if (id < 0) return name == NULL ? EINVAL : ENOENT;
  const option_info_t *o = &brisk_option_info[id];
  int err = settings_apply(id, (int64_t)value);
  if (err == EPERM)
    report_error("brisk_option_set(%s, %lld): BRISK_%s is read at start-up only", name, (long long)value,
                 o->name);
  else if (err == EINVAL)
    report_error("brisk_option_set(%s, %lld): bad value (BRISK_%s takes %lld .. %lld)", name,
                 (long long)value, o->name, (long long)o->min, (long long)o->max);
  return err;
}
