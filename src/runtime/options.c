#include "runtime/options.h"

#include <signal.h>
#include <string.h>

#include "os/platform.h"
#include "runtime/report.h"

brisk_options_t brisk_options = {
#define BRISK_OPTION_DEFAULT(field, NAME, def, lo, hi, rt, desc) .field = (def),
    BRISK_OPTIONS(BRISK_OPTION_DEFAULT)
#undef BRISK_OPTION_DEFAULT
};

const option_info_t brisk_option_info[OPTION_COUNT] = {
#define BRISK_OPTION_INFO(field, NAME, def, lo, hi, rt, desc) {#NAME, (lo), (hi), (rt) != 0, desc},
    BRISK_OPTIONS(BRISK_OPTION_INFO)
#undef BRISK_OPTION_INFO
};

_Atomic(int64_t) *options_slot(int id) {
  switch (id) {
#define BRISK_OPTION_SLOT(field, NAME, def, lo, hi, rt, desc) \
  case OPTION_##field: return &brisk_options.field;
    BRISK_OPTIONS(BRISK_OPTION_SLOT)
#undef BRISK_OPTION_SLOT
  }
  return NULL;
}

int64_t options_get(int id) { return atomic_load_explicit(options_slot(id), memory_order_relaxed); }

/* The option named by the `len` bytes at name, with or without BRISK_. */
static int options_find_n(const char *name, size_t len) {
  if (len > 6 && strncmp(name, "BRISK_", 6) == 0) {
    name += 6;
    len -= 6;
  }
  for (int i = 0; i < OPTION_COUNT; i++)
    if (strlen(brisk_option_info[i].name) == len && strncmp(brisk_option_info[i].name, name, len) == 0)
      return i;
  return -1;
}

int options_find(const char *name) { return name ? options_find_n(name, strlen(name)) : -1; }

static bool parse_int(const char *s, int64_t *out) {
  int64_t sign = 1, v = 0;
  if (*s == '-') { sign = -1; s++; }
  if (*s == '\0') return false;
  for (; *s; s++) {
    if (*s < '0' || *s > '9') return false;
    v = v * 10 + (*s - '0');
    if (v > ((int64_t)1 << 40)) return false;
  }
  *out = sign * v;
  return true;
}

/* A signal for BRISK_PROFILE_SIGNAL: by name (SIGUSR2 or USR2) among those
 * a program may spare, or a real-time signal by number (SIGRTMIN..SIGRTMAX).
 * Signals that report faults or stop the process are refused. */
static bool parse_signal(const char *s, int64_t *out) {
  static const struct { const char *name; int signo; } names[] = {
      {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP},   {"PROF", SIGPROF},
      {"URG", SIGURG},   {"WINCH", SIGWINCH}, {"TTIN", SIGTTIN}, {"TTOU", SIGTTOU}};
  if (strncmp(s, "SIG", 3) == 0) s += 3;
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (strcmp(s, names[i].name) == 0) { *out = names[i].signo; return true; }
  if (!parse_int(s, out)) return false;
  if (*out == 0) return true; /* none */
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (*out == names[i].signo) return true;
  return *out >= SIGRTMIN && *out <= SIGRTMAX;
}

static bool parse_value(const char *name, const char *s, int64_t *out) {
  /* A path prefix, which profile.c reads from the environment itself: here
   * only whether there is one. */
  if (strcmp(name, "PROFILE") == 0) { *out = s[0] != '\0'; return true; }
  if (strcmp(name, "PROFILE_SIGNAL") == 0) return parse_signal(s, out);
  if (strcmp(name, "ON_ERROR") == 0) {
    if (strcmp(s, "report") == 0 || strcmp(s, "0") == 0) { *out = ON_ERROR_REPORT; return true; }
    if (strcmp(s, "abort") == 0 || strcmp(s, "1") == 0) { *out = ON_ERROR_ABORT; return true; }
    return false;
  }
  if (strcmp(s, "true") == 0 || strcmp(s, "on") == 0 || strcmp(s, "yes") == 0) { *out = 1; return true; }
  if (strcmp(s, "false") == 0 || strcmp(s, "off") == 0 || strcmp(s, "no") == 0) { *out = 0; return true; }
  return parse_int(s, out);
}

/* One line of BRISK_VERBOSE: the value as the user would write it. */
static void option_show(const char *name, int64_t value, const char *desc) {
  if (strcmp(name, "ON_ERROR") == 0)
    report_info("option BRISK_%s=%s (%s)", name, value == ON_ERROR_ABORT ? "abort" : "report", desc);
  else
    report_info("option BRISK_%s=%lld (%s)", name, (long long)value, desc);
}

/* Set once the environment has been read. A program whose first malloc
 * runs before libc has set `environ` (a .preinit_array function, as the
 * sanitizer runtimes have) reads it again from brisk's constructor. */
static bool options_read;

void options_init_if_pending(void) {
  if (!options_read) options_init();
}

void options_init(void) {
  char **env = os_environ();
  if (env == NULL) return;
  options_read = true;
  for (; *env; env++) {
    const char *e = *env;
    if (strncmp(e, "BRISK_", 6) != 0) continue;
    const char *name = e + 6;
    const char *eq = strchr(name, '=');
    if (eq == NULL) continue;
    size_t len = (size_t)(eq - name);
    int id = options_find_n(e, (size_t)(eq - e)); /* the whole BRISK_NAME */
    if (id >= 0) {
      const option_info_t *o = &brisk_option_info[id];
      int64_t v;
      if (parse_value(o->name, eq + 1, &v) && v >= o->min && v <= o->max)
        atomic_store_explicit(options_slot(id), v, memory_order_relaxed);
      else
        report_warning("bad value for option BRISK_%s: '%s' (kept the default)", o->name, eq + 1);
    } else {
      char buf[64];
      if (len >= sizeof(buf)) len = sizeof(buf) - 1;
      memcpy(buf, name, len);
      buf[len] = '\0';
      report_warning("unknown option BRISK_%s", buf);
    }
  }
  report_set_abort_on_error(option_load(on_error) == ON_ERROR_ABORT);
  if (option_load(show_stats)) os_keep_stderr();
  os_fault_kinds((uint32_t)option_load(fault_calls));
  if (option_load(fault_after) >= 0 || option_load(fault_rate) > 0)
    os_fault_injection(option_load(fault_after), (uint32_t)option_load(fault_rate));
  if (option_load(verbose)) {
#define BRISK_OPTION_SHOW(field, NAME, def, lo, hi, rt, desc) option_show(#NAME, option_load(field), desc);
    BRISK_OPTIONS(BRISK_OPTION_SHOW)
#undef BRISK_OPTION_SHOW
  }
}
