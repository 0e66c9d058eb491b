/* libFuzzer target: random sequences of brisk operations, on two threads,
 * against a shadow model that checks every byte.
 *
 * Built by tests/test_fuzz.sh (and by hand, see fuzz/README.md) with
 *   clang -fsanitize=fuzzer            this file
 *   clang -fsanitize=fuzzer-no-link    brisk's sources (coverage inside brisk)
 * and no AddressSanitizer: brisk is the process's malloc here (its objects
 * define malloc/free/new), and the target calls only the prefixed brisk_*
 * API. Run it with BRISK_ON_ERROR=abort so that any "brisk: error:" line
 * (this target never passes a bad pointer) is a crash.
 *
 * Input format: a sequence of 5-byte operations
 *     op  a  b  c  d
 *   op % OP_COUNT  the operation (enum op below)
 *   a              slot (% NSLOTS), heap (% NHEAPS) or arena (% NARENAS)
 *   b | c << 8     a size, decoded by decode_size() from v = b | c << 8:
 *                    v >> 14 == 0: v & 0xff (0..255)   1: v & 0xfff (0..4095)
 *                    2: (v & 0x3fff) * 8 (0..128 KiB)
 *                    3: bits 12-13 not both set: (v & 0x3fff) * 32 (0..384 KiB)
 *                       else bit 11 clear: (v & 0x7ff) * 1024 (0..2 MiB)
 *                       else 2 MiB + (v & 0x7ff) * 1024 (2..4 MiB, huge blocks)
 *                  (fresh huge blocks cost page faults: they are 1/32 of the
 *                  random values)
 *   d              extra: alignment exponent, fill byte, flags
 * fuzz/make_corpus.py writes seed inputs in this format.
 *
 * The model: NSLOTS slots each hold at most one live block (pointer, size,
 * fill byte, alignment asked, the heap it belongs to). Every byte of a
 * block is checked against its fill byte before it is freed or
 * reallocated, and after a realloc (the kept prefix). brisk_usable_size >=
 * size, alignment, and brisk_owns (first and last byte) are checked for
 * every new block. A second thread (the "worker") takes jobs from a queue:
 * it frees blocks of the main thread (and of its first-class heaps),
 * reallocates them, and allocates blocks that it hands back, so blocks
 * cross threads in both directions. Heaps and arenas are used by the main
 * thread only, as the API requires; destroying a heap forgets its blocks.
 * Fault injection (brisk_fault_injection) can be switched on for a while:
 * then an allocation may return NULL, with errno == ENOMEM, and nothing
 * else may change. Any mismatch prints what went wrong and aborts.
 */
#define _GNU_SOURCE
#include <brisk.h>

#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NSLOTS 64
#define NHEAPS 3
#define NARENAS 3
#define ARENA_TRACK 32
#define LIVE_CAP ((size_t)64 << 20)

enum op {
  OP_MALLOC, OP_CALLOC, OP_REALLOC, OP_ALIGNED, OP_FREE, OP_FREE_SIZED,
  OP_HEAP_NEW, OP_HEAP_DESTROY, OP_HEAP_MALLOC, OP_HEAP_CALLOC, OP_HEAP_REALLOC, OP_HEAP_ALIGNED,
  OP_ARENA_NEW, OP_ARENA_ALLOC, OP_ARENA_RESET, OP_ARENA_DESTROY,
  OP_W_FREE, OP_W_REALLOC, OP_W_MALLOC, OP_DRAIN, OP_SYNC,
  OP_CHECK, OP_COLLECT, OP_FAULTS, OP_FAULTS_OFF, OP_W_RESTART, OP_REALLOC_ZERO, OP_OWNS,
  OP_COUNT
};

static void die(const char *fmt, ...) __attribute__((noreturn, format(printf, 1, 2)));
static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fprintf(stderr, "fuzz_ops: model mismatch: ");
  vfprintf(stderr, fmt, ap);
  fprintf(stderr, "\n");
  va_end(ap);
  abort();
}

/* ---- blocks and their checks ------------------------------------------ */

typedef struct {
  uint8_t *p;
  size_t size;
  size_t align; /* asked alignment (>= 1) */
  uint8_t fill;
  int8_t heap;  /* index into heaps[], or -1: a thread's default heap */
} blk_t;

static volatile int g_faults_on; /* written by main while the worker is idle */

static size_t decode_size(uint8_t b, uint8_t c) {
  unsigned v = (unsigned)b | (unsigned)c << 8;
  switch (v >> 14) {
    case 0: return v & 0xff;
    case 1: return v & 0xfff;
    case 2: return (size_t)(v & 0x3fff) * 8;
    default:
      if (((v >> 12) & 3) != 3) return (size_t)(v & 0x3fff) * 32; /* up to 384 KiB */
      if (v & 0x800) return ((size_t)2 << 20) + (size_t)(v & 0x7ff) * 1024; /* 2..4 MiB: huge */
      return (size_t)(v & 0x7ff) * 1024;                          /* up to 2 MiB: large */
  }
}

/* The byte checks are not instrumented: libFuzzer's compare tracing on
 * every word of every block would cost 90% of the time and tell nothing. */
#if defined(__clang__) && __clang_major__ >= 13
#define NO_COVERAGE __attribute__((no_sanitize("coverage"), noinline))
#else
#define NO_COVERAGE __attribute__((noinline))
#endif

NO_COVERAGE static void check_bytes(const uint8_t *p, size_t n, uint8_t fill, const char *what) {
  uint64_t w = 0x0101010101010101ull * fill;
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t x;
    memcpy(&x, p + i, 8);
    if (x != w) break;
  }
  for (; i < n; i++)
    if (p[i] != fill) die("%s: block %p: byte %zu of %zu is 0x%02x, expected 0x%02x", what, (void *)p, i, n, p[i], fill);
}

static void check_new(const blk_t *b, const char *what) {
  if (((uintptr_t)b->p & (b->align - 1)) != 0) die("%s: %p not aligned to %zu", what, (void *)b->p, b->align);
  if (((uintptr_t)b->p & 15) != 0) die("%s: %p not 16-byte aligned", what, (void *)b->p);
  size_t u = brisk_usable_size(b->p);
  if (u < b->size) die("%s: usable size %zu < %zu", what, u, b->size);
  if (!brisk_owns(b->p)) die("%s: brisk_owns(%p) false", what, (void *)b->p);
  if (b->size && !brisk_owns(b->p + b->size - 1)) die("%s: brisk_owns(last byte of %p) false", what, (void *)b->p);
}

static void check_live(const blk_t *b, const char *what) {
  check_bytes(b->p, b->size, b->fill, what);
  if (!brisk_owns(b->p)) die("%s: brisk_owns(%p) false for a live block", what, (void *)b->p);
  if (brisk_usable_size(b->p) < b->size) die("%s: usable size of a live block < %zu", what, b->size);
}

/* NULL from an allocation: fine only under fault injection, with ENOMEM. */
static void null_result(const char *what, size_t size, int err) {
  if (!g_faults_on) die("%s(%zu) returned NULL with no fault injected (errno %d)", what, size, err);
  if (err != ENOMEM) die("%s(%zu) returned NULL with errno %d under faults, expected ENOMEM", what, size, err);
}

/* ---- the worker thread --------------------------------------------------- */

enum job_kind { JOB_FREE, JOB_FREE_SIZED, JOB_REALLOC, JOB_MALLOC, JOB_CALLOC, JOB_ALIGNED, JOB_EXIT };
typedef struct {
  int kind;
  blk_t b;
  size_t new_size;
} job_t;

#define QCAP 32
#define RCAP 64
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t q_cond = PTHREAD_COND_INITIALIZER;   /* jobs arrived */
static pthread_cond_t q_idle = PTHREAD_COND_INITIALIZER;   /* queue drained / space */
static job_t q_jobs[QCAP];
static int q_head, q_count, q_busy;
static blk_t r_blocks[RCAP]; /* blocks the worker hands back */
static int r_count;
static pthread_t g_worker;
static int g_worker_running;

static void worker_hand_back(const blk_t *b) {
  pthread_mutex_lock(&q_lock);
  if (r_count < RCAP) {
    r_blocks[r_count++] = *b;
    pthread_mutex_unlock(&q_lock);
    return;
  }
  pthread_mutex_unlock(&q_lock);
  check_live(b, "worker: block it could not hand back");
  brisk_free(b->p);
}

static void worker_job(job_t *j) {
  blk_t b = j->b;
  switch (j->kind) {
    case JOB_FREE:
    case JOB_FREE_SIZED:
      check_live(&b, "worker: before free");
      if (j->kind == JOB_FREE) brisk_free(b.p);
      else brisk_free_sized(b.p, b.size);
      return;
    case JOB_REALLOC: {
      check_live(&b, "worker: before realloc");
      errno = 0;
      uint8_t *q = brisk_realloc(b.p, j->new_size);
      if (j->new_size == 0) {
        if (q != NULL) die("worker: brisk_realloc(p, 0) returned %p", (void *)q);
        return;
      }
      if (q == NULL) {
        null_result("worker: brisk_realloc", j->new_size, errno);
        check_live(&b, "worker: after a failed realloc");
        worker_hand_back(&b);
        return;
      }
      size_t keep = b.size < j->new_size ? b.size : j->new_size;
      check_bytes(q, keep, b.fill, "worker: after realloc (prefix)");
      if (q != b.p) b.heap = -1;
      b.p = q;
      b.size = j->new_size;
      b.align = 16;
      check_new(&b, "worker: brisk_realloc");
      memset(q, b.fill, b.size);
      worker_hand_back(&b);
      return;
    }
    case JOB_MALLOC:
    case JOB_CALLOC:
    case JOB_ALIGNED: {
      errno = 0;
      if (j->kind == JOB_MALLOC) b.p = brisk_malloc(b.size);
      else if (j->kind == JOB_CALLOC) b.p = brisk_calloc(1, b.size);
      else b.p = brisk_aligned_alloc(b.align, b.size);
      if (b.p == NULL) {
        null_result("worker: allocation", b.size, errno);
        return;
      }
      check_new(&b, "worker: allocation");
      if (j->kind == JOB_CALLOC) check_bytes(b.p, b.size, 0, "worker: brisk_calloc is not zeroed");
      memset(b.p, b.fill, b.size);
      worker_hand_back(&b);
      return;
    }
  }
}

static void *worker_main(void *arg) {
  (void)arg;
  for (;;) {
    pthread_mutex_lock(&q_lock);
    while (q_count == 0) pthread_cond_wait(&q_cond, &q_lock);
    job_t j = q_jobs[q_head];
    q_head = (q_head + 1) % QCAP;
    q_count--;
    q_busy = 1;
    pthread_mutex_unlock(&q_lock);
    if (j.kind == JOB_EXIT) {
      pthread_mutex_lock(&q_lock);
      q_busy = 0;
      pthread_cond_broadcast(&q_idle);
      pthread_mutex_unlock(&q_lock);
      return NULL;
    }
    worker_job(&j);
    pthread_mutex_lock(&q_lock);
    q_busy = 0;
    pthread_cond_broadcast(&q_idle);
    pthread_mutex_unlock(&q_lock);
  }
}

static void worker_start(void) {
  if (g_worker_running) return;
  if (pthread_create(&g_worker, NULL, worker_main, NULL) != 0) die("pthread_create failed");
  g_worker_running = 1;
}

static void post(const job_t *j) {
  pthread_mutex_lock(&q_lock);
  while (q_count == QCAP) pthread_cond_wait(&q_idle, &q_lock);
  q_jobs[(q_head + q_count) % QCAP] = *j;
  q_count++;
  pthread_cond_signal(&q_cond);
  pthread_mutex_unlock(&q_lock);
}

/* Wait until the worker has done every job. */
static void sync_worker(void) {
  pthread_mutex_lock(&q_lock);
  while (q_count > 0 || q_busy) pthread_cond_wait(&q_idle, &q_lock);
  pthread_mutex_unlock(&q_lock);
}

static void worker_restart(void) {
  job_t j = {.kind = JOB_EXIT};
  post(&j);
  pthread_join(g_worker, NULL);
  g_worker_running = 0;
  worker_start();
}

/* ---- the main thread's model ----------------------------------------------- */

typedef struct {
  brisk_arena_t *a;
  int heap; /* -1: the main thread's default heap */
  blk_t blk[ARENA_TRACK];
  int n;
} arena_t;

static blk_t slots[NSLOTS];
static brisk_heap_t *heaps[NHEAPS];
static arena_t arenas[NARENAS];
static size_t live_bytes;
static uint8_t next_fill = 1;

static uint8_t new_fill(void) {
  next_fill = (uint8_t)(next_fill * 5 + 3);
  if (next_fill == 0) next_fill = 0x5a;
  return next_fill;
}

static int room_for(size_t size) { return size <= LIVE_CAP && live_bytes + size <= LIVE_CAP; }

static void slot_set(int s, uint8_t *p, size_t size, size_t align, int heap, const char *what) {
  blk_t *b = &slots[s];
  b->p = p;
  b->size = size;
  b->align = align;
  b->fill = new_fill();
  b->heap = (int8_t)heap;
  check_new(b, what);
  memset(p, b->fill, size);
  live_bytes += size;
}

static void slot_forget(int s) {
  live_bytes -= slots[s].size;
  memset(&slots[s], 0, sizeof slots[s]);
}

static void slot_free(int s, int sized) {
  blk_t *b = &slots[s];
  if (!b->p) return;
  check_live(b, "before free");
  if (sized) brisk_free_sized(b->p, b->size);
  else brisk_free(b->p);
  slot_forget(s);
}

/* Take the blocks the worker handed back into free slots (or free them). */
static void drain_returns(void) {
  blk_t got[RCAP];
  pthread_mutex_lock(&q_lock);
  int n = r_count;
  memcpy(got, r_blocks, sizeof(blk_t) * (size_t)n);
  r_count = 0;
  pthread_mutex_unlock(&q_lock);
  for (int i = 0; i < n; i++) {
    blk_t *b = &got[i];
    check_live(b, "block handed back by the worker");
    int s = -1;
    for (int k = 0; k < NSLOTS && s < 0; k++)
      if (!slots[k].p) s = k;
    if (s < 0 || !room_for(b->size)) {
      brisk_free(b->p); /* freed here, allocated (or reallocated) there */
      continue;
    }
    slots[s] = *b;
    live_bytes += b->size;
  }
}

static void arena_check(arena_t *ar, const char *what) {
  for (int i = 0; i < ar->n; i++) check_bytes(ar->blk[i].p, ar->blk[i].size, ar->blk[i].fill, what);
}

static void arena_drop(int i, int destroy) {
  arena_t *ar = &arenas[i];
  if (!ar->a) return;
  arena_check(ar, "arena blocks before destroy");
  if (destroy) brisk_arena_destroy(ar->a);
  memset(ar, 0, sizeof *ar);
}

static void heap_drop(int h) {
  if (!heaps[h]) return;
  /* No block of the heap may still be with the worker. */
  sync_worker();
  drain_returns();
  for (int i = 0; i < NARENAS; i++)
    if (arenas[i].a && arenas[i].heap == h) {
      arena_check(&arenas[i], "arena blocks before their heap is destroyed");
      memset(&arenas[i], 0, sizeof arenas[i]); /* its memory goes with the heap */
    }
  for (int s = 0; s < NSLOTS; s++)
    if (slots[s].p && slots[s].heap == h) {
      check_live(&slots[s], "block of a heap about to be destroyed");
      slot_forget(s);
    }
  brisk_heap_destroy(heaps[h]);
  heaps[h] = NULL;
}

static void faults_set(long after, unsigned rate) {
  sync_worker(); /* the worker sees the flag change only between jobs */
  g_faults_on = 1;
  brisk_fault_injection(after, rate);
}

static void faults_clear(void) {
  sync_worker();
  brisk_fault_injection(-1, 0);
  g_faults_on = 0;
}

static size_t decode_align(uint8_t d) { return (size_t)1 << (d % 23); } /* 1 .. 4 MiB */

static void run_op(const uint8_t *o) {
  int op = o[0] % OP_COUNT;
  int s = o[1] % NSLOTS;
  int hi = o[1] % NHEAPS;
  int ai = o[1] % NARENAS;
  size_t size = decode_size(o[2], o[3]);
  uint8_t d = o[4];
  uint8_t *p;
  switch (op) {
    case OP_MALLOC:
    case OP_CALLOC:
    case OP_ALIGNED: {
      slot_free(s, 0);
      if (!room_for(size)) return;
      size_t align = op == OP_ALIGNED ? decode_align(d) : 1;
      errno = 0;
      p = op == OP_MALLOC ? brisk_malloc(size) : op == OP_CALLOC ? brisk_calloc(d % 4 + 1, size / (d % 4 + 1))
                                                                 : brisk_aligned_alloc(align, size);
      if (op == OP_CALLOC) size = size / (d % 4 + 1) * (d % 4 + 1);
      if (!p) { null_result("brisk_malloc/calloc/aligned_alloc", size, errno); return; }
      if (op == OP_CALLOC) check_bytes(p, size, 0, "brisk_calloc is not zeroed");
      slot_set(s, p, size, align, -1, "brisk_malloc/calloc/aligned_alloc");
      return;
    }
    case OP_REALLOC:
    case OP_REALLOC_ZERO: {
      blk_t *b = &slots[s];
      if (op == OP_REALLOC_ZERO) size = 0;
      if (b->p) check_live(b, "before brisk_realloc");
      if (size > b->size && !room_for(size - b->size)) return;
      errno = 0;
      p = brisk_realloc(b->p, size);
      if (size == 0 && b->p) {
        if (p) die("brisk_realloc(p, 0) returned %p, not NULL", (void *)p);
        slot_forget(s);
        return;
      }
      if (!p) {
        null_result("brisk_realloc", size, errno);
        if (b->p) check_live(b, "after a failed brisk_realloc");
        return;
      }
      if (!b->p) { slot_set(s, p, size, 1, -1, "brisk_realloc(NULL)"); return; }
      size_t keep = b->size < size ? b->size : size;
      check_bytes(p, keep, b->fill, "after brisk_realloc (prefix)");
      int heap = p == b->p ? b->heap : -1;
      slot_forget(s);
      slot_set(s, p, size, 1, heap, "brisk_realloc");
      return;
    }
    case OP_FREE: slot_free(s, 0); return;
    case OP_FREE_SIZED: slot_free(s, 1); return;

    case OP_HEAP_NEW:
      if (heaps[hi]) heap_drop(hi);
      errno = 0;
      heaps[hi] = brisk_heap_new();
      if (!heaps[hi]) null_result("brisk_heap_new", 0, errno);
      return;
    case OP_HEAP_DESTROY: heap_drop(hi); return;
    case OP_HEAP_MALLOC:
    case OP_HEAP_CALLOC:
    case OP_HEAP_ALIGNED: {
      int h = d % NHEAPS;
      if (!heaps[h]) return;
      slot_free(s, 0);
      if (!room_for(size)) return;
      size_t align = op == OP_HEAP_ALIGNED ? decode_align(o[1] ^ d) : 1;
      errno = 0;
      p = op == OP_HEAP_MALLOC ? brisk_heap_malloc(heaps[h], size)
          : op == OP_HEAP_CALLOC ? brisk_heap_calloc(heaps[h], 1, size)
                                 : brisk_heap_aligned_alloc(heaps[h], align, size);
      if (!p) { null_result("brisk_heap_malloc/calloc/aligned_alloc", size, errno); return; }
      if (op == OP_HEAP_CALLOC) check_bytes(p, size, 0, "brisk_heap_calloc is not zeroed");
      slot_set(s, p, size, align, h, "brisk_heap_malloc/calloc/aligned_alloc");
      return;
    }
    case OP_HEAP_REALLOC: {
      int h = d % NHEAPS;
      if (!heaps[h]) return;
      blk_t *b = &slots[s];
      if (b->p) check_live(b, "before brisk_heap_realloc");
      if (size > b->size && !room_for(size - b->size)) return;
      errno = 0;
      p = brisk_heap_realloc(heaps[h], b->p, size);
      if (size == 0 && b->p) {
        if (p) die("brisk_heap_realloc(h, p, 0) returned %p, not NULL", (void *)p);
        slot_forget(s);
        return;
      }
      if (!p) {
        null_result("brisk_heap_realloc", size, errno);
        if (b->p) check_live(b, "after a failed brisk_heap_realloc");
        return;
      }
      if (!b->p) { slot_set(s, p, size, 1, h, "brisk_heap_realloc(NULL)"); return; }
      size_t keep = b->size < size ? b->size : size;
      check_bytes(p, keep, b->fill, "after brisk_heap_realloc (prefix)");
      int heap = p == b->p ? b->heap : h;
      slot_forget(s);
      slot_set(s, p, size, 1, heap, "brisk_heap_realloc");
      return;
    }

    case OP_ARENA_NEW: {
      arena_drop(ai, 1);
      int h = d % (NHEAPS + 1) - 1; /* -1: the default heap */
      if (h >= 0 && !heaps[h]) return;
      if (size > ((size_t)8 << 20)) size = (size_t)8 << 20;
      errno = 0;
      brisk_arena_t *a = brisk_arena_new(h >= 0 ? heaps[h] : NULL, size);
      if (!a) { null_result("brisk_arena_new", size, errno); return; }
      arenas[ai].a = a;
      arenas[ai].heap = h;
      arenas[ai].n = 0;
      return;
    }
    case OP_ARENA_ALLOC: {
      arena_t *ar = &arenas[ai];
      if (!ar->a || !room_for(size)) return;
      size_t align = d & 0x80 ? 0 : (size_t)1 << (d % 13);
      errno = 0;
      p = brisk_arena_alloc(ar->a, size, align);
      if (!p) { null_result("brisk_arena_alloc", size, errno); return; }
      size_t want = align < 16 ? 16 : align;
      if ((uintptr_t)p & (want - 1)) die("brisk_arena_alloc(%zu, %zu) = %p misaligned", size, align, (void *)p);
      /* (a 0-byte block may sit just past the end of the arena's buffer) */
      if (size && !brisk_owns(p)) die("brisk_arena_alloc: brisk_owns(%p) false", (void *)p);
      uint8_t f = new_fill();
      memset(p, f, size);
      if (ar->n < ARENA_TRACK) ar->blk[ar->n++] = (blk_t){p, size, want, f, (int8_t)ar->heap};
      arena_check(ar, "arena blocks after an arena allocation");
      return;
    }
    case OP_ARENA_RESET:
      if (!arenas[ai].a) return;
      arena_check(&arenas[ai], "arena blocks before reset");
      brisk_arena_reset(arenas[ai].a);
      arenas[ai].n = 0;
      return;
    case OP_ARENA_DESTROY: arena_drop(ai, 1); return;

    case OP_W_FREE:
    case OP_W_REALLOC: {
      blk_t *b = &slots[s];
      if (!b->p) return;
      if (op == OP_W_REALLOC && size > b->size && !room_for(size - b->size)) return;
      job_t j = {.kind = op == OP_W_FREE ? (d & 1 ? JOB_FREE_SIZED : JOB_FREE) : JOB_REALLOC, .b = *b, .new_size = size};
      slot_forget(s); /* the worker owns it now */
      post(&j);
      return;
    }
    case OP_W_MALLOC: {
      if (!room_for(size)) return;
      job_t j = {.kind = d % 3 == 0 ? JOB_MALLOC : d % 3 == 1 ? JOB_CALLOC : JOB_ALIGNED};
      j.b.size = size;
      j.b.align = j.kind == JOB_ALIGNED ? decode_align(d >> 2) : 1;
      j.b.fill = new_fill();
      j.b.heap = -1;
      post(&j);
      return;
    }
    case OP_DRAIN: drain_returns(); return;
    case OP_SYNC: sync_worker(); drain_returns(); return;
    case OP_CHECK:
      if (slots[s].p) check_live(&slots[s], "check");
      return;
    case OP_COLLECT: brisk_collect(true); return;
    case OP_FAULTS: faults_set(d & 0x80 ? -1 : (long)(d % 16), d & 0x80 ? (unsigned)(d & 0x7f) * 7000u : 0); return;
    case OP_FAULTS_OFF: faults_clear(); return;
    case OP_W_RESTART: /* not under faults: pthread_create itself may fail then */
      if (!g_faults_on) worker_restart();
      return;
    case OP_OWNS: {
      blk_t *b = &slots[s];
      if (!b->p) return;
      size_t off = b->size ? (size_t)(o[2] | o[3] << 8) % b->size : 0;
      if (!brisk_owns(b->p + off)) die("brisk_owns(%p + %zu) false inside a live block of %zu bytes", (void *)b->p, off, b->size);
      if (brisk_usable_size(b->p) < b->size) die("usable size shrank");
      return;
    }
  }
}

/* End of an input: everything is checked and released. */
static void reset_all(void) {
  faults_clear();
  sync_worker();
  drain_returns();
  for (int s = 0; s < NSLOTS; s++) slot_free(s, s & 1);
  for (int i = 0; i < NARENAS; i++) arena_drop(i, 1);
  for (int h = 0; h < NHEAPS; h++) heap_drop(h);
  if (live_bytes != 0) die("internal: %zu live bytes left", live_bytes);
}

/* brisk reads its BRISK_* options when it initialises, at its first
 * allocation. In this binary that happens in the sanitizer runtime's
 * .preinit_array code, before libc has set `environ`, so the options
 * would be lost: read them again now (an internal function, reachable
 * because brisk's objects are linked into this executable). */
extern void options_init(void) __attribute__((visibility("hidden")));

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  options_init();
  const char *e = getenv("BRISK_ON_ERROR");
  if (!e || strcmp(e, "abort") != 0)
    fprintf(stderr, "fuzz_ops: set BRISK_ON_ERROR=abort so that brisk's error reports are crashes\n");
  worker_start();
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  worker_start();
  for (size_t i = 0; i + 5 <= size; i += 5) run_op(data + i);
  reset_all();
  return 0;
}
