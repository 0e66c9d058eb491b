#include "runtime/report.h"

#include <stdint.h>
#include <string.h>

#include "base/counters.h"
#include "os/platform.h"

static _Atomic(bool) abort_on_error;

void report_set_abort_on_error(bool v) { atomic_store_explicit(&abort_on_error, v, memory_order_relaxed); }

typedef struct out_s {
  char *buf;
  size_t len;
  size_t pos;
} out_t;

static void put_char(out_t *o, char c) {
  if (o->pos + 1 < o->len) o->buf[o->pos] = c;
  o->pos++;
}

static void put_str(out_t *o, const char *s) {
  if (s == NULL) s = "(null)";
  while (*s) put_char(o, *s++);
}

static void put_unsigned(out_t *o, uint64_t v, unsigned base) {
  char tmp[24];
  int n = 0;
  do {
    unsigned d = (unsigned)(v % base);
    tmp[n++] = (char)(d < 10 ? '0' + d : 'a' + d - 10);
    v /= base;
  } while (v);
  while (n) put_char(o, tmp[--n]);
}

size_t format_string_v(char *buf, size_t len, const char *fmt, va_list ap) {
  out_t o = {buf, len, 0};
  for (const char *f = fmt; *f; f++) {
    if (*f != '%') { put_char(&o, *f); continue; }
    f++;
    switch (*f) {
      case 's': put_str(&o, va_arg(ap, const char *)); break;
      case 'd': {
        int v = va_arg(ap, int);
        if (v < 0) { put_char(&o, '-'); put_unsigned(&o, (uint64_t)(-(int64_t)v), 10); }
        else put_unsigned(&o, (uint64_t)v, 10);
        break;
      }
      case 'z': f++; /* %zu */ put_unsigned(&o, va_arg(ap, size_t), 10); break;
      case 'l': f++; /* %lld as int64 */
        if (*f == 'l') f++;
        { int64_t v = va_arg(ap, long long);
          if (v < 0) { put_char(&o, '-'); put_unsigned(&o, (uint64_t)(-v), 10); }
          else put_unsigned(&o, (uint64_t)v, 10); }
        break;
      case 'x': put_unsigned(&o, va_arg(ap, unsigned), 16); break;
      case 'p': {
        uintptr_t v = (uintptr_t)va_arg(ap, void *);
        if (v == 0) put_str(&o, "(nil)");
        else { put_str(&o, "0x"); put_unsigned(&o, v, 16); }
        break;
      }
      case '%': put_char(&o, '%'); break;
      case '\0': f--; break;
      default: put_char(&o, '%'); put_char(&o, *f); break;
    }
  }
  if (len) buf[o.pos < len ? o.pos : len - 1] = '\0';
  return o.pos;
}

size_t format_string(char *buf, size_t len, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  size_t n = format_string_v(buf, len, fmt, ap);
  va_end(ap);
  return n;
}

static void emit(const char *prefix, const char *fmt, va_list ap) {
  char line[512];
  size_t p = strlen(prefix);
  memcpy(line, prefix, p);
  size_t n = format_string_v(line + p, sizeof(line) - p - 1, fmt, ap);
  size_t total = p + (n < sizeof(line) - p - 2 ? n : sizeof(line) - p - 2);
  line[total++] = '\n';
  os_write_stderr(line, total);
}

static void error_v(const char *fmt, va_list ap) {
  STAT_COUNT(errors, 1);
  emit("brisk: error: ", fmt, ap);
}

void report_error_only(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  error_v(fmt, ap);
  va_end(ap);
}

void report_abort_if_asked(void) {
  if (atomic_load_explicit(&abort_on_error, memory_order_relaxed)) os_abort();
}

void report_error(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  error_v(fmt, ap);
  va_end(ap);
  report_abort_if_asked();
}

void report_warning(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit("brisk: warning: ", fmt, ap);
  va_end(ap);
}

void report_info(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  emit("brisk: ", fmt, ap);
  va_end(ap);
}

void brisk_assert_fail(const char *cond, const char *file, int line) {
  char line_buf[300];
  size_t n = format_string(line_buf, sizeof(line_buf) - 1, "brisk: assertion failed: %s (%s:%d)\n",
                           cond, file, line);
  if (n > sizeof(line_buf) - 1) n = sizeof(line_buf) - 1;
  os_write_stderr(line_buf, n);
  os_abort();
}
