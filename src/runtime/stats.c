#include "runtime/stats.h"

#include <string.h>

#include "os/platform.h"
#include "runtime/options.h"
#include "runtime/report.h"

#define LOAD(f) ((long long)atomic_load_explicit(&brisk_stats.f, memory_order_relaxed))

size_t stats_json(char *buf, size_t len, const stats_usage_t *usage) {
  char tmp[96];
  size_t pos = 0;
#define APPEND(...)                                                   \
  do {                                                                \
    size_t n_ = format_string(tmp, sizeof(tmp), __VA_ARGS__);         \
    if (buf && pos < len) {                                           \
      size_t room_ = len - pos - 1;                                   \
      memcpy(buf + pos, tmp, n_ < room_ ? n_ : room_);                \
    }                                                                 \
    pos += n_;                                                        \
  } while (0)
  APPEND("{\"version\":\"%d.%d.%d\"", 0, 1, 0);
  /* What the figures depend on: the build and the purge delay in force. */
  APPEND(",\"hardened\":%d,\"purge_delay_ms\":%lld", BRISK_HARDENED ? 1 : 0,
         (long long)option_load(purge_delay_ms));
#define JSON_COUNT(name) APPEND(",\"" #name "\":%lld", LOAD(name));
#define JSON_LEVEL(name) JSON_COUNT(name) JSON_COUNT(name##_peak)
#define JSON_FIELD(name, kind, desc) JSON_##kind(name)
  BRISK_STATS_FIELDS(JSON_FIELD)
#undef JSON_FIELD
#define JSON_USAGE(name, desc) APPEND(",\"" #name "\":%lld", (long long)usage->name);
  BRISK_USAGE_FIELDS(JSON_USAGE)
#undef JSON_USAGE
  os_process_figures_t proc;
  os_process_figures(&proc);
#define JSON_PROCESS(name, member, desc) APPEND(",\"" #name "\":%lld", (long long)proc.member);
  BRISK_PROCESS_FIELDS(JSON_PROCESS)
#undef JSON_PROCESS
  APPEND("}");
#undef APPEND
  if (buf && len) buf[pos < len ? pos : len - 1] = '\0';
  return pos;
}

void stats_text(void (*emit)(const char *line, void *arg), void *arg, const stats_usage_t *usage) {
  char line[160];
  emit("brisk statistics:", arg);
#define TEXT_COUNT(name, desc)                                                  \
  format_string(line, sizeof(line), "  %s: %lld  (%s)", #name, LOAD(name), desc); \
  emit(line, arg);
#define TEXT_LEVEL(name, desc)                                                  \
  format_string(line, sizeof(line), "  %s: %lld, peak %lld  (%s)", #name, LOAD(name), \
                LOAD(name##_peak), desc);                                       \
  emit(line, arg);
#define TEXT_FIELD(name, kind, desc) TEXT_##kind(name, desc)
  BRISK_STATS_FIELDS(TEXT_FIELD)
#undef TEXT_FIELD
#define TEXT_USAGE(name, desc) TEXT_COUNT_OF(name, (long long)usage->name, desc)
#define TEXT_COUNT_OF(name, value, desc)                                        \
  format_string(line, sizeof(line), "  %s: %lld  (%s)", #name, value, desc);    \
  emit(line, arg);
  BRISK_USAGE_FIELDS(TEXT_USAGE)
  os_process_figures_t proc;
  os_process_figures(&proc);
#define TEXT_PROCESS(name, member, desc) TEXT_COUNT_OF(name, (long long)proc.member, desc)
  BRISK_PROCESS_FIELDS(TEXT_PROCESS)
#undef TEXT_PROCESS
#undef TEXT_USAGE
#undef TEXT_COUNT_OF
}

void stats_reset(void) {
#define RESET_COUNT(name) atomic_store_explicit(&brisk_stats.name, 0, memory_order_relaxed);
#define RESET_LEVEL(name)                                                      \
  atomic_store_explicit(&brisk_stats.name##_peak,                              \
                        atomic_load_explicit(&brisk_stats.name, memory_order_relaxed), \
                        memory_order_relaxed);
#define RESET_FIELD(name, kind, desc) RESET_##kind(name)
  BRISK_STATS_FIELDS(RESET_FIELD)
#undef RESET_FIELD
#undef RESET_LEVEL
#undef RESET_COUNT
}

static void emit_stderr(const char *line, void *arg) {
  char buf[200];
  size_t n = format_string(buf, sizeof(buf) - 1, "brisk: %s", line);
  if (n > sizeof(buf) - 2) n = sizeof(buf) - 2;
  buf[n++] = '\n';
  os_write_stderr(buf, n);
}

void stats_print_stderr(const stats_usage_t *usage) { stats_text(emit_stderr, NULL, usage); }
