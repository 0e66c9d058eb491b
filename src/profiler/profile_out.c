/* The profiler's output (profile_out.h): gperftools' legacy heap profile,
 * collapsed stacks for flame graphs, the leak report. Everything goes
 * through a caller's buffer and the platform layer's writes, so nothing
 * here allocates. */
#include "profiler/profile_out.h"

#include <stdarg.h>
#include <string.h>

#include "os/platform.h"
#include "profiler/stackwalk.h"
#include "runtime/report.h"

#define PROF_LEAK_STACKS 20

typedef struct writer_s {
  int fd; /* -1: stderr */
  int err;
  size_t len;
  char *buf;
} writer_t;

static void w_flush(writer_t *w) {
  if (w->len == 0) return;
  if (w->fd < 0) os_write_stderr(w->buf, w->len);
  else if (w->err == 0) w->err = os_file_write(w->fd, w->buf, w->len);
  w->len = 0;
}

static void w_mem(writer_t *w, const char *s, size_t n) {
  while (n > 0) {
    if (w->len == PROF_OUT_BYTES) w_flush(w);
    size_t k = PROF_OUT_BYTES - w->len < n ? PROF_OUT_BYTES - w->len : n;
    memcpy(w->buf + w->len, s, k);
    w->len += k;
    s += k;
    n -= k;
  }
}

static void w_str(writer_t *w, const char *s) { w_mem(w, s, strlen(s)); }

/* Formatted as report.c formats (%s %d %zu %lld %p): numbers, addresses
 * (%p: 0x...) and short text; names of any length go through w_str. */
static void w_fmt(writer_t *w, const char *fmt, ...) {
  char text[256];
  va_list ap;
  va_start(ap, fmt);
  size_t n = format_string_v(text, sizeof(text), fmt, ap);
  va_end(ap);
  w_mem(w, text, n < sizeof(text) ? n : sizeof(text) - 1);
}

/* Text of a frame name or file path, with ';' (between frames) and ' '
 * (before the count) made '_'. */
static void w_name(writer_t *w, const char *s) {
  for (const char *p = s; *p; p++) w_mem(w, (*p == ';' || *p == ' ') ? "_" : p, 1);
}

/* A frame as the collapsed file names it: its symbol when the dynamic
 * symbol tables have one, else <file>+0x<address in the file> (which
 * scripts/brisk-flame.py names with addr2line), else its address. */
static void w_frame(writer_t *w, uintptr_t pc) {
  const char *name, *object;
  uintptr_t off, obj_off;
  unwind_symbol(pc, &name, &off, &object, &obj_off);
  if (name != NULL && name[0] != '\0') {
    w_name(w, name);
  } else if (object != NULL) {
    w_name(w, object);
    w_fmt(w, "+%p", (void *)obj_off);
  } else {
    w_fmt(w, "%p", (void *)pc);
  }
}

static bool snap_before(const prof_snap_t *a, const prof_snap_t *b) {
  if (a->live_b != b->live_b) return a->live_b > b->live_b;
  return a->alloc_b > b->alloc_b;
}

/* Sift v[i] down a heap ordered so that no parent comes before its children. */
static void snap_sift(prof_snap_t *v, size_t i, size_t n) {
  for (;;) {
    size_t l = 2 * i + 1, m = i;
    if (l < n && snap_before(&v[m], &v[l])) m = l;
    if (l + 1 < n && snap_before(&v[m], &v[l + 1])) m = l + 1;
    if (m == i) return;
    prof_snap_t t = v[i];
    v[i] = v[m];
    v[m] = t;
    i = m;
  }
}

/* Largest in-use bytes first: a heap sort (no allocation, no recursion)
 * whose heap keeps the smallest at its root, which goes to the end. */
void prof_snap_sort(prof_snap_t *v, size_t n) {
  for (size_t i = n / 2; i-- > 0;) snap_sift(v, i, n);
  for (size_t end = n; end-- > 1;) {
    prof_snap_t t = v[0];
    v[0] = v[end];
    v[end] = t;
    snap_sift(v, 0, end);
  }
}


/* The legacy heap profile that pprof (google-pprof) and jeprof read:
 *   heap profile: <in-use objects>: <in-use bytes> [<allocated objects>: <allocated bytes>] @ heapprofile
 *   <objects>: <bytes> [<objects>: <bytes>] @ <return addresses, innermost first>
 *   MAPPED_LIBRARIES:
 *   <the process's /proc/self/maps>
 * The counts are already scaled back from the samples ("heapprofile": the
 * reader adjusts nothing): a sampled block of b bytes counts for 1/p
 * blocks and r/p bytes, r the bytes asked for and p = 1 - exp(-b / RATE)
 * the probability that a block of b bytes holds a sampled byte. */
int prof_write_heap(int fd, const prof_snap_t *snap, size_t n, char *buf) {
  writer_t w = {fd, 0, 0, buf};
  uint64_t t[4] = {0, 0, 0, 0};
  for (size_t i = 0; i < n; i++) {
    t[0] += snap[i].live_n;
    t[1] += snap[i].live_b;
    t[2] += snap[i].alloc_n;
    t[3] += snap[i].alloc_b;
  }
  w_fmt(&w, "heap profile: %lld: %lld [ %lld: %lld] @ heapprofile\n", (long long)t[0], (long long)t[1],
        (long long)t[2], (long long)t[3]);
  for (size_t i = 0; i < n; i++) {
    const prof_snap_t *e = &snap[i];
    w_fmt(&w, "%lld: %lld [%lld: %lld] @", (long long)e->live_n, (long long)e->live_b, (long long)e->alloc_n,
          (long long)e->alloc_b);
    /* Return addresses: the readers step back into the call for every
     * frame but the first, which is done here. */
    for (uint32_t f = 0; f < e->depth; f++) w_fmt(&w, " %p", (void *)(e->pc[f] - (f == 0)));
    w_str(&w, "\n");
  }
  w_str(&w, "\nMAPPED_LIBRARIES:\n");
  w_flush(&w);
  if (w.err == 0) w.err = os_file_copy("/proc/self/maps", fd);
  return w.err;
}

/* Collapsed stacks for flame graphs: "outermost;...;innermost <in-use
 * bytes>", one line per stack that holds memory. */
int prof_write_collapsed(int fd, const prof_snap_t *snap, size_t n, char *buf) {
  writer_t w = {fd, 0, 0, buf};
  for (size_t i = 0; i < n; i++) {
    const prof_snap_t *e = &snap[i];
    if (e->live_b == 0) continue;
    for (uint32_t f = e->depth; f-- > 0;) {
      w_frame(&w, e->pc[f] - 1);
      if (f > 0) w_str(&w, ";");
    }
    if (e->depth == 0) w_str(&w, "[unknown]");
    w_fmt(&w, " %lld\n", (long long)e->live_b);
  }
  w_flush(&w);
  return w.err;
}

/* ---------------------------------------------------------------------------
 * The leak report: sampled blocks still live at exit, by stack.
 * ------------------------------------------------------------------------- */
static void leak_frame(writer_t *w, unsigned i, uintptr_t pc) {
  const char *name, *object;
  uintptr_t off, obj_off;
  unwind_symbol(pc - 1, &name, &off, &object, &obj_off);
  w_fmt(w, "brisk:     #%d %p", (int)i, (void *)pc);
  if (name != NULL) {
    w_str(w, " ");
    w_str(w, name);
    w_fmt(w, "+%p", (void *)(off + 1));
  }
  if (object != NULL) {
    w_str(w, " (");
    w_str(w, object);
    w_fmt(w, "+%p)", (void *)(obj_off + 1));
  }
  w_str(w, "\n");
}

void prof_write_leaks(const prof_snap_t *snap, size_t n, char *buf, int64_t rate) {
  writer_t w = {-1, 0, 0, buf};
  uint64_t bytes = 0, blocks = 0, stacks = 0, sampled = 0;
  for (size_t i = 0; i < n; i++) {
    if (snap[i].live_b == 0) continue;
    stacks++;
    bytes += snap[i].live_b;
    blocks += snap[i].live_n;
    sampled += snap[i].samples;
  }
  w_fmt(&w, "brisk: leak report: about %lld bytes in %lld blocks still live at exit, from %lld %s (",
        (long long)bytes, (long long)blocks, (long long)stacks, stacks == 1 ? "stack" : "stacks");
  w_fmt(&w, "%lld sampled blocks; one sampled byte per %lld allocated, on average)\n", (long long)sampled,
        (long long)rate);
  size_t shown = 0;
  for (size_t i = 0; i < n && shown < PROF_LEAK_STACKS; i++) {
    const prof_snap_t *e = &snap[i];
    if (e->live_b == 0) continue;
    shown++;
    w_fmt(&w, "brisk: leak: about %lld bytes in %lld blocks (%lld %s) allocated at:\n", (long long)e->live_b,
          (long long)e->live_n, (long long)e->samples, e->samples == 1 ? "sample" : "samples");
    for (uint32_t f = 0; f < e->depth; f++) leak_frame(&w, f, e->pc[f]);
    w_flush(&w);
  }
  if (stacks > shown) {
    w_fmt(&w, "brisk: leak: %lld smaller stacks not shown\n", (long long)(stacks - shown));
  }
  w_flush(&w);
}

