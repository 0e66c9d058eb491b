#include "options.h"

#include <signal.h>
#include <string.h>

#include "platform.h"
#include "report.h"

brisk_options_t brisk_options = {
#define BRISK_OPTION_DEFAULT(field, NAME, def, desc) .field = (def),
    BRISK_OPTIONS(BRISK_OPTION_DEFAULT)
#undef BRISK_OPTION_DEFAULT
};

typedef struct option_desc_s {
  const char *name;
  int64_t *value;
} option_desc_t;

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

/* A signal by name (SIGUSR2, USR2) or number. */
static bool parse_signal(const char *s, int64_t *out) {
  static const struct { const char *name; int64_t signo; } names[] = {
      {"USR1", SIGUSR1}, {"USR2", SIGUSR2}, {"HUP", SIGHUP}, {"PROF", SIGPROF},
      {"URG", SIGURG},   {"WINCH", SIGWINCH}, {"TTIN", SIGTTIN}, {"TTOU", SIGTTOU}};
  if (strncmp(s, "SIG", 3) == 0) s += 3;
  for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
    if (strcmp(s, names[i].name) == 0) { *out = names[i].signo; return true; }
  return parse_int(s, out) && *out >= 0 && *out < 65;
}

static bool parse_value(const char *name, const char *s, int64_t *out) {
  /* A path prefix: profile.c reads it from the environment itself. */
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
  const option_desc_t table[] = {
#define BRISK_OPTION_DESC(field, NAME, def, desc) {#NAME, &brisk_options.field},
      BRISK_OPTIONS(BRISK_OPTION_DESC)
#undef BRISK_OPTION_DESC
  };
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
    bool known = false;
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
      if (strlen(table[i].name) != len || strncmp(table[i].name, name, len) != 0) continue;
      known = true;
      if (!parse_value(table[i].name, eq + 1, table[i].value))
        report_warning("bad value for option BRISK_%s: '%s' (kept the default)", table[i].name, eq + 1);
      break;
    }
    if (!known) {
      char buf[64];
      if (len >= sizeof(buf)) len = sizeof(buf) - 1;
      memcpy(buf, name, len);
      buf[len] = '\0';
      report_warning("unknown option BRISK_%s", buf);
    }
  }
  report_set_abort_on_error(brisk_options.on_error == ON_ERROR_ABORT);
  if (brisk_options.show_stats) os_keep_stderr();
  if (brisk_options.fault_after >= 0 || brisk_options.fault_rate > 0)
    os_fault_injection(brisk_options.fault_after,
                       (uint32_t)(brisk_options.fault_rate < 0 ? 0 : brisk_options.fault_rate));
  if (brisk_options.verbose) {
#define BRISK_OPTION_SHOW(field, NAME, def, desc) option_show(#NAME, brisk_options.field, desc);
    BRISK_OPTIONS(BRISK_OPTION_SHOW)
#undef BRISK_OPTION_SHOW
  }
}
