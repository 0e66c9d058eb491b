/* The samplers' countdowns and cut lists (sample.h): a countdown per heap
 * and class of bytes until the next sample, drawn from an exponential
 * distribution, and the cut that ends a page's list where the countdown
 * runs out, so that the inline path never counts anything; then the calls
 * out to the profiler. Owner of the heap only. */
#include "heaps/sample.h"

#include <stdatomic.h>
#include <string.h>

#include "base/atomics.h"
#include "guarded/guarded.h"
#include "profiler/profiler.h"
#include "runtime/options.h"

/* ---------------------------------------------------------------------------
 * Arithmetic: libbrisk.so links only the C library, so no libm.
 * ------------------------------------------------------------------------- */
#define LN2 0.6931471805599453

/* ln(m 2^e) for m in [1, 2), the series 2 atanh((m-1)/(m+1)): within
 * 1e-14 for m <= sqrt 2 after scaling (eight terms); it fills the table
 * below, and serves a draw until the table is filled. */
static double ln_series(double m, int e) {
  if (m > 1.4142135623730951) {
    m *= 0.5;
    e++;
  }
  double z = (m - 1) / (m + 1), z2 = z * z;
  double sum = z * (1 + z2 * (1.0 / 3 + z2 * (1.0 / 5 + z2 * (1.0 / 7 + z2 * (1.0 / 9 + z2 * (1.0 / 11 + z2 * (1.0 / 13 + z2 * (1.0 / 15))))))));
  return 2 * sum + e * LN2;
}

/* ln at the middle of each 1/LN_STEPS of [1, 2), and its reciprocal: a
 * draw's logarithm is then the table's value plus the short series of
 * ln(1 + t), |t| < 1/129, without a division (which, with the series
 * above, was most of a sample's arithmetic). Filled once, by the first
 * thread to draw (ln_state 0 -> 1 -> 2; sampling may start before the
 * constructors run); a draw that finds it not yet filled uses the series. */
#define LN_BITS 6
#define LN_STEPS (1 << LN_BITS)
static double ln_mid[LN_STEPS], inv_mid[LN_STEPS];
static _Atomic int ln_state;

static BRISK_NOINLINE void ln_table_fill(void) {
  int expect = 0;
  if (!atomic_compare_exchange_strong_explicit(&ln_state, &expect, 1, memory_order_relaxed,
                                               memory_order_relaxed))
    return; /* another thread fills it */
  for (int i = 0; i < LN_STEPS; i++) {
    double mid = 1 + (i + 0.5) / LN_STEPS;
    ln_mid[i] = ln_series(mid, 0);
    inv_mid[i] = 1 / mid;
  }
  atomic_store_explicit(&ln_state, 2, memory_order_release);
}

/* ln(x) for x > 0 (normal): x = m 2^e, ln x = e ln 2 + ln mid + ln(m / mid),
 * the last within 1e-9 from three terms (a countdown needs no more). */
static double sample_ln(double x) {
  uint64_t bits;
  memcpy(&bits, &x, sizeof(bits));
  int e = (int)((bits >> 52) & 0x7ff) - 1023;
  unsigned i = (unsigned)(bits >> (52 - LN_BITS)) & (LN_STEPS - 1);
  bits = (bits & (((uint64_t)1 << 52) - 1)) | ((uint64_t)1023 << 52);
  double m;
  memcpy(&m, &bits, sizeof(m));
  if (BRISK_UNLIKELY(atomic_load_explicit(&ln_state, memory_order_acquire) != 2)) {
    ln_table_fill();
    return ln_series(m, e);
  }
  double t = m * inv_mid[i] - 1;
  double log1p = t * (1 - t * (0.5 - t * (1.0 / 3)));
  return e * LN2 + ln_mid[i] + log1p;
}

static uint64_t next_random(sampler_t *s) {
  uint64_t z = (s->rng += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

_Atomic(uint32_t) sampler_epoch_now;

void sampler_settings_changed(void) {
  atomic_fetch_add_explicit(&sampler_epoch_now, 1, memory_order_relaxed);
  bool on = prof_recording() || option_load(guard_rate) > 0;
  atomic_store_relaxed(&brisk_read_mostly.sampling, on ? 1 : 0);
}

/* A draw from the exponential distribution of mean `mean`, at least 1. */
static int64_t draw_exponential(sampler_t *s, double mean) {
  double u = (double)((next_random(s) >> 11) + 1) * (1.0 / 9007199254740992.0); /* (0, 1] */
  double x = -sample_ln(u) * mean;
  if (x > 4e18) x = 4e18;
  return (int64_t)x + 1;
}

/* Bytes to the profiler's next sample. */
static int64_t draw_profile(sampler_t *s) {
  return prof_recording() ? draw_exponential(s, (double)option_load(profile_rate)) : SAMPLER_NEVER;
}

/* Bytes of class c to its next guarded sample: each allocation is one
 * with probability 1 / guard_rate, so the count to it is geometric:
 * floor(E / lambda) + 1 with E exponential of mean 1 and lambda =
 * -ln(1 - 1 / rate) (a series where the rate is large). */
static int64_t draw_guard(sampler_t *s, unsigned c) {
  int64_t rate = option_load(guard_rate);
  if (rate <= 0 || c == 0 || class_size(c) > GUARDED_MAX) return SAMPLER_NEVER;
  int64_t n = 1;
  if (rate > 1) {
    double p = 1.0 / (double)rate;
    double lambda = rate < 16 ? -sample_ln(1 - p) : p * (1 + p * (0.5 + p * (1.0 / 3 + p * 0.25)));
    n = draw_exponential(s, 1 / lambda);
  }
  int64_t size = (int64_t)class_size(c);
  return n > SAMPLER_NEVER / size ? SAMPLER_NEVER : n * size;
}

static void countdowns_set(sampler_t *s, unsigned c, int64_t profile, int64_t guard) {
  bool guard_first = guard < profile;
  s->left[c] = guard_first ? guard : profile;
  s->lag[c] = guard_first ? profile - guard : guard - profile;
  s->guard_first[c] = guard_first;
}

void sampler_init(sampler_t *s, uint64_t seed) {
  s->rng = seed;
  sampler_draw_all(s);
}

void sampler_draw_all(sampler_t *s) {
  s->epoch = sampler_epoch();
  for (unsigned c = 0; c < CLASS_COUNT; c++) countdowns_set(s, c, draw_profile(s), draw_guard(s, c));
}

unsigned sampler_expired(sampler_t *s, unsigned c) {
  int64_t left = s->left[c], later = left + s->lag[c];
  int64_t profile = s->guard_first[c] ? later : left;
  int64_t guard = s->guard_first[c] ? left : later;
  unsigned which = 0;
  if (profile <= 0) {
    which |= SAMPLE_PROFILE;
    profile = draw_profile(s);
  }
  if (guard <= 0) {
    which |= SAMPLE_GUARD;
    guard = draw_guard(s, c);
  }
  countdowns_set(s, c, profile, guard);
  return which;
}

/* ---------------------------------------------------------------------------
 * Countdowns and cut lists (the owner of the heap).
 * ------------------------------------------------------------------------- */
/* The fast path's own test: a head it would pop. */
static inline bool in_page(const page_t *pg, const block_t *b) {
  return (uintptr_t)b - (uintptr_t)pg->start < pg->area;
}

static inline bool list_ended(const page_t *pg, const block_t *b) {
  return b == page_list_end(pg) || b == page_list_cut(pg);
}

/* The last block of a list of pg that starts with a block (at most
 * `reserved` steps, so a list made circular by a write after free ends
 * too), or NULL when it ends in a broken link (the slow path reports it
 * when it gets there). */
static block_t *list_tail(const page_t *pg, block_t *b, uint64_t *count) {
  uint64_t n = 1;
  for (block_t *next; n <= pg->reserved && in_page(pg, next = block_next(b)); n++) b = next;
  if (count) *count = n;
  return list_ended(pg, block_next(b)) ? b : NULL;
}

/* pg's free list goes after its local list, and the free list is the
 * cut: the next allocation from pg takes the slow path, which collects
 * the local list and counts what it hands to the inline path. Only the
 * local list is walked (the owner's latest frees, in its cache): the free
 * list may be long and cold (blocks other threads freed), and walking it
 * at every change of a class's page was a tenth of the time of a workload
 * that moves blocks between threads. The free list's end (the cut or the
 * list end) stays as it was: either stops the inline path, and
 * page_refill_pop takes no local list while the heap samples
 * (refill_mask). (Lists that end in a broken link are left as they are,
 * for the slow path to report; the free list's own end is checked by the
 * path that pops it.) */
static void withdraw(page_t *pg) {
  block_t *cut = page_list_cut(pg), *f = pg->free;
  if (!in_page(pg, f)) {
    if (list_ended(pg, f)) pg->free = cut;
    return;
  }
  if (in_page(pg, pg->local_free)) {
    block_t *ltail = list_tail(pg, pg->local_free, NULL);
    if (ltail == NULL) return;
    block_set_next(ltail, f);
  } else if (list_ended(pg, pg->local_free)) {
    pg->local_free = f;
  } else {
    return;
  }
  pg->free = cut;
}

/* The current pages of the classes up to DIRECT_MAX. */
void sampler_attach(heap_t *h) {
  for (unsigned c = 1; c < CLASS_CACHE_FIRST; c++)
    if (h->queues[c].first != NULL) withdraw(h->queues[c].first);
}

/* sampler_expose when the countdown runs out within the list (or its length
 * is not known): walk to the allowed count and cut there; the rest waits
 * on the local list, which the slow path takes next. Out of line, so that
 * the common case saves no registers. */
static BRISK_NOINLINE void expose_cut(sampler_t *s, unsigned c, page_t *pg, uint64_t allow) {
  block_t *b = pg->free, *cut = page_list_cut(pg);
  int64_t size = (int64_t)class_size(c), left = s->left[c];
  uint64_t n = 0;
  block_t *rest;
  if (allow == 0) {
    rest = b;
    pg->free = cut;
  } else {
    n = 1;
    for (block_t *next; n < allow && n <= pg->reserved && in_page(pg, next = block_next(b)); n++) b = next;
    rest = block_next(b);
    if (!list_ended(pg, rest) && !in_page(pg, rest)) { /* a broken link: the fast path reports it */
      s->left[c] = left - (int64_t)n * size;
      return;
    }
    block_set_next(b, cut);
  }
  if (!list_ended(pg, rest)) {
    if (!list_ended(pg, pg->local_free)) {
      block_t *tail = list_tail(pg, rest, NULL);
      if (tail != NULL) block_set_next(tail, pg->local_free);
    }
    pg->local_free = rest;
  }
  s->left[c] = left - (int64_t)n * size;
}

void sampler_expose(sampler_t *s, unsigned c, page_t *pg) {
  if (!in_page(pg, pg->free)) return; /* nothing to hand out (or a broken link: reported later) */
  /* An empty local list (just taken) starts again from the cut, so that
   * the list it becomes ends there too. */
  if (pg->local_free == page_list_end(pg)) pg->local_free = page_list_cut(pg);
  int64_t size = (int64_t)class_size(c), left = s->left[c];
  /* Allocations of this class before the one whose bytes reach the count. */
  uint64_t allow = left > 0 ? (uint64_t)(left - 1) / (uint64_t)size : 0;
  /* The list was just collected (the local list, which withdraw and
   * page_collect fill, or carved blocks) and one block taken: the page's
   * other blocks are all on it, so its length is known without a walk. */
  uint32_t used = page_used(pg) - PAGE_USED_BIAS;
  uint64_t len = list_ended(pg, pg->local_free) && used < pg->reserved ? pg->reserved - used : 0;
  if (len != 0 && allow >= len) {
    s->left[c] = left - (int64_t)len * size;
    return;
  }
  expose_cut(s, c, pg, allow);
}

void sampler_head_change(sampler_t *s, unsigned c, page_t *old, page_t *pg) {
  if (old == pg) return;
  if (old != NULL) {
    /* Counted when exposed, never handed out: they count again when
     * the page serves its class again. */
    uint64_t n = 0;
    if (in_page(old, old->free)) list_tail(old, old->free, &n);
    s->left[c] += (int64_t)n * (int64_t)class_size(c);
    withdraw(old);
  }
  if (pg != NULL) withdraw(pg);
}


/* ---------------------------------------------------------------------------
 * The calls out to the profiler (profiler.h). busy is the owner's flag,
 * ordered with the code around it as a signal handler on the same thread
 * sees it.
 * ------------------------------------------------------------------------- */
static inline void set_busy(sampler_t *s, uint32_t v) {
  atomic_signal_fence(memory_order_seq_cst);
  s->busy = v;
  atomic_signal_fence(memory_order_seq_cst);
}

void sample_taken(sampler_t *s, page_t *pg, size_t requested, unsigned c, size_t counted) {
  set_busy(s, 1); /* to the end: an allocation in a signal handler here takes no sample */
  /* A huge block may be freed by any thread (free_checked): it enters the
   * record at once; the others wait in the heap's batch. */
  prof_sample(&s->prof, &pg->prof_slot, (uintptr_t)pg->start, !(pg->flags & PAGE_HUGE), requested, c,
              counted);
  set_busy(s, 0);
}

void sample_freed(page_t *pg, heap_t *caller) {
  sampler_t *s = caller != NULL ? caller->sampler : NULL;
  /* The calling thread was interrupted inside the profiler (a free in a
   * signal handler): the record stays, rather than wait for a lock this
   * thread holds. */
  if (s != NULL && s->busy) return;
  if (s != NULL) set_busy(s, 1);
  prof_forget(&pg->prof_slot);
  if (s != NULL) set_busy(s, 0);
}

void sample_freed_owned(page_t *pg, heap_t *owner) {
  sampler_t *s = owner->sampler;
  if (s == NULL || s->prof == NULL) { /* no batches: its slot is the record's */
    prof_forget(&pg->prof_slot);
    return;
  }
  bool interrupted = s->busy != 0;
  if (!interrupted) set_busy(s, 1);
  prof_forget_owned(&pg->prof_slot, s->prof, interrupted);
  if (!interrupted) set_busy(s, 0);
}

void sample_heap_gone(heap_t *h) {
  if (h->sampler != NULL && h->sampler->prof != NULL) prof_forget_heap(h->sampler->prof);
}
