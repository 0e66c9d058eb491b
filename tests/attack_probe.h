/* What tests/attack_probe.c and tests/attack_probe_cxx.cpp share: after
 * a mode's attack, the program keeps using the heap a little and reports
 * what it can see of the attack's consequence (scripts/detection_table.py
 * reads the lines):
 *
 *   attack_probe: MODE: attack done
 *   attack_probe: MODE: consequence: WORD[, WORD...]     ("none" if none seen)
 *   attack_probe: MODE: completed
 *
 * on stdout, each written with write(2) at once (no stdio buffer), then
 * exit 0. Other lines say more for a reader of the raw output ("first
 * duplicate: ADDR (N bytes) and ADDR (N bytes)", the C++ probe's "operator
 * new from FILE ..."). The words:
 *   duplicate          two live blocks have the same address
 *   overlap            two live blocks overlap
 *   wild               malloc returned a pointer that is misaligned or not
 *                      readable and writable memory (it is not used)
 *   foreign-block      malloc returned memory inside a range the program
 *                      owns itself (the stack buffer or mapping it freed)
 *   neighbour-changed  a live block the attack wrote into has other data
 *   corrupted          a live block the attack did not write into has
 *                      other data
 *   read-stale         (uaf-read) the freed block still held its data
 *   read-cleared       (uaf-read) it did not
 * Every block is checked for these before it is written, and a duplicate
 * or overlapping block is never freed (so that a report is the allocator's
 * answer to the attack, not to the probe's clean-up).
 *
 * Runs under LD_PRELOAD of the allocator under test: libc only, no brisk
 * header. C11 and C++17. */
#ifndef BRISK_TEST_ATTACK_PROBE_H
#define BRISK_TEST_ATTACK_PROBE_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define AP_FN static __attribute__((unused))

enum {
  AP_DUPLICATE = 1 << 0,
  AP_OVERLAP = 1 << 1,
  AP_WILD = 1 << 2,
  AP_FOREIGN_BLOCK = 1 << 3,
  AP_NEIGHBOUR_CHANGED = 1 << 4,
  AP_CORRUPTED = 1 << 5,
  AP_READ_STALE = 1 << 6,
  AP_READ_CLEARED = 1 << 7,
};
static const char *const ap_words[] = {"duplicate",         "overlap",   "wild",       "foreign-block",
                                       "neighbour-changed", "corrupted", "read-stale", "read-cleared"};

static const char *ap_mode = "?";
static unsigned ap_seen;

/* A line on stdout, written at once. */
AP_FN void ap_say(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
AP_FN void ap_say(const char *fmt, ...) {
  char line[256];
  int n = snprintf(line, sizeof line, "attack_probe: %s: ", ap_mode);
  va_list ap;
  va_start(ap, fmt);
  n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
  va_end(ap);
  if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
  line[n++] = '\n';
  ssize_t w = write(1, line, (size_t)n);
  (void)w;
}

AP_FN void ap_note(unsigned what) { ap_seen |= what; }

/* Hide a pointer from the compiler (no assumption about what it holds). */
AP_FN void *ap_opaque(void *p) {
  __asm__ volatile("" : "+r"(p));
  return p;
}

/* Is the byte at p readable and writable? Asked of the kernel through a
 * pipe (EFAULT instead of a fault): the byte goes out and back. */
static int ap_pipe[2] = {-1, -1};
AP_FN int ap_rw(void *p) {
  char c;
  if (ap_pipe[0] < 0 && pipe(ap_pipe) != 0) return 1;
  if (write(ap_pipe[1], p, 1) != 1) return 0;
  if (read(ap_pipe[0], &c, 1) != 1) return 0;
  if (write(ap_pipe[1], &c, 1) != 1) return 0;
  return read(ap_pipe[0], p, 1) == 1;
}

/* ---- live blocks ------------------------------------------------------------ */

enum { AP_MAX = 8192, AP_RANGES = 8 };
typedef struct {
  char *p;
  size_t n;
  unsigned seed;
  int filled; /* holds its pattern (written after the overlap check) */
  int bad;    /* a duplicate or overlap: never written or freed */
  int kind;   /* how it is released: 0 free(), others ap_release's */
} ap_block;
static ap_block ap_live[AP_MAX];
static int ap_nlive;
static unsigned ap_next_seed = 1;
/* Releases a block of a kind other than 0 (the C++ probe's new and new[]). */
static void (*ap_release)(void *p, int kind);

/* Ranges the attack wrote into, and ranges the program owns itself. */
static struct { uintptr_t lo, hi; } ap_written[AP_RANGES], ap_foreign_r[AP_RANGES];
static int ap_nwritten, ap_nforeign;

AP_FN void ap_attack_wrote(void *p, size_t n) {
  if (ap_nwritten < AP_RANGES) {
    ap_written[ap_nwritten].lo = (uintptr_t)p;
    ap_written[ap_nwritten++].hi = (uintptr_t)p + n;
  }
}
AP_FN void ap_foreign(void *p, size_t n) {
  if (ap_nforeign < AP_RANGES) {
    ap_foreign_r[ap_nforeign].lo = (uintptr_t)p;
    ap_foreign_r[ap_nforeign++].hi = (uintptr_t)p + n;
  }
}

AP_FN unsigned char ap_pat(size_t i, unsigned seed) { return (unsigned char)(i * 167u + seed * 31u + 3u); }

/* A block malloc returned: checked (aligned, mapped read-write at both
 * ends, not in a foreign range) and kept as live; NULL if it is wild or
 * foreign (then it is not used). Not written yet. */
AP_FN void *ap_adopt_kind(void *q, size_t n, int kind) {
  if (!q) return NULL;
  uintptr_t a = (uintptr_t)q;
  if ((a & 15) != 0 || !ap_rw(q) || !ap_rw((char *)q + n - 1)) {
    ap_note(AP_WILD);
    return NULL;
  }
  for (int i = 0; i < ap_nforeign; i++)
    if (a < ap_foreign_r[i].hi && a + n > ap_foreign_r[i].lo) {
      ap_note(AP_FOREIGN_BLOCK);
      return NULL;
    }
  if (ap_nlive < AP_MAX) {
    ap_block *b = &ap_live[ap_nlive++];
    b->p = (char *)q;
    b->n = n;
    b->seed = ap_next_seed++;
    b->filled = 0;
    b->bad = 0;
    b->kind = kind;
  }
  return q;
}
AP_FN void *ap_adopt(void *q, size_t n) { return ap_adopt_kind(q, n, 0); }

AP_FN void ap_fill(ap_block *b) {
  for (size_t i = 0; i < b->n; i++) b->p[i] = (char)ap_pat(i, b->seed);
  b->filled = 1;
}

/* malloc(n), kept as live and filled with its pattern at once: blocks
 * made before the attack, whose data the attack must leave alone. */
AP_FN void *ap_keep(size_t n) {
  void *q = ap_adopt(malloc(n), n);
  if (q) ap_fill(&ap_live[ap_nlive - 1]);
  return q;
}

AP_FN ap_block *ap_find(void *p) {
  for (int i = 0; i < ap_nlive; i++)
    if (ap_live[i].p == (char *)p) return &ap_live[i];
  return NULL;
}

/* Forget a live block (the mode frees it itself). */
AP_FN void ap_forget(void *p) {
  ap_block *b = ap_find(p);
  if (b) *b = ap_live[--ap_nlive];
}

/* Has a filled block other data than its pattern? Which word it earns
 * depends on whether the attack wrote into it. */
AP_FN void ap_check_data(void) {
  for (int i = 0; i < ap_nlive; i++) {
    ap_block *b = &ap_live[i];
    if (!b->filled || b->bad) continue;
    size_t k = 0;
    while (k < b->n && (unsigned char)b->p[k] == ap_pat(k, b->seed)) k++;
    if (k == b->n) continue;
    int hit = 0;
    for (int r = 0; r < ap_nwritten; r++)
      if ((uintptr_t)b->p < ap_written[r].hi && (uintptr_t)b->p + b->n > ap_written[r].lo) hit = 1;
    ap_note(hit ? AP_NEIGHBOUR_CHANGED : AP_CORRUPTED);
  }
}

/* Duplicates and overlaps among the live blocks: sorted by address (a
 * shell sort of indices: no qsort, which may allocate). The later of two
 * such blocks is marked bad. */
static int ap_order[AP_MAX];
AP_FN void ap_check_overlaps(void) {
  int n = ap_nlive;
  for (int i = 0; i < n; i++) ap_order[i] = i;
  for (int gap = n / 2; gap > 0; gap /= 2)
    for (int i = gap; i < n; i++) {
      int t = ap_order[i], j = i;
      while (j >= gap && ap_live[ap_order[j - gap]].p > ap_live[t].p) {
        ap_order[j] = ap_order[j - gap];
        j -= gap;
      }
      ap_order[j] = t;
    }
  char *end = NULL;
  ap_block *last = NULL; /* the block that reaches furthest so far */
  for (int i = 0; i < n; i++) {
    ap_block *b = &ap_live[ap_order[i]];
    if (end && b->p < end) {
      unsigned what = b->p == last->p ? AP_DUPLICATE : AP_OVERLAP;
      if (!(ap_seen & what))
        ap_say("first %s: %p (%zu bytes) and %p (%zu bytes)", what == AP_DUPLICATE ? "duplicate" : "overlap",
               (void *)last->p, last->n, (void *)b->p, b->n);
      ap_note(what);
      b->bad = 1;
    }
    if (!end || b->p + b->n > end) {
      end = b->p + b->n;
      last = b;
    }
  }
}

/* The rest of the run: `count` more blocks of the attacked size and 16 of
 * each of a few others, all live at once; the checks above; the
 * consequence line; then every good block written and freed, and the
 * completed line. */
AP_FN void ap_after(size_t size, int count) {
  static const size_t others[] = {16, 48, 100, 1000, 5000};
  ap_check_data();
  for (int i = 0; i < count; i++) ap_adopt(malloc(size), size);
  for (size_t s = 0; s < sizeof others / sizeof others[0]; s++)
    for (int i = 0; i < 16; i++) ap_adopt(malloc(others[s]), others[s]);
  ap_check_overlaps();
  char words[200] = "";
  size_t len = 0;
  for (unsigned w = 0; w < sizeof ap_words / sizeof ap_words[0]; w++)
    if (ap_seen & (1u << w)) len += (size_t)snprintf(words + len, sizeof words - len, "%s%s", len ? ", " : "", ap_words[w]);
  ap_say("consequence: %s", len ? words : "none");
  for (int i = 0; i < ap_nlive; i++)
    if (!ap_live[i].bad && !ap_live[i].filled) ap_fill(&ap_live[i]);
  for (int i = 0; i < ap_nlive; i++)
    if (!ap_live[i].bad) {
      if (ap_live[i].kind && ap_release) ap_release(ap_live[i].p, ap_live[i].kind);
      else free(ap_live[i].p);
    }
  ap_nlive = 0;
  ap_say("completed");
}

#endif
