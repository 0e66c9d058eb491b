/* A model of a heap's own cache of large blocks' spans, for spin
 * (tests/test_model_large_cache.sh runs it):
 *
 *   spin -a large_cache.pml
 *   gcc -O2 -DSAFETY -DCOLLAPSE -o pan pan.c
 *   ./pan -m10000
 *
 * The protocol (src/heaps/large_cache.c, src/heaps/large_cache.h,
 * src/heaps/heap_types.h: large_cache_t; src/heaps/heap.c:
 * heaps_background_round, heap_collect, heap_abandon, heap_destroy,
 * heap_reuse_free, heap_init_fields, heap_adopt_abandoned;
 * src/runtime/background.c: the deadline a round takes and answers;
 * docs/DESIGN.md, "The large-block cache and the span cache"):
 *
 *   H, one heap: NSLOT slots (LARGE_CACHE_SLOTS, 8 in the code), each an
 *     atomic pointer to a span (here a span number, 0: empty); the flag
 *     watched; its state (OWNED while it has an owner; FREE once
 *     destroyed; ABANDONED once abandoned; BUSY while a new owner takes
 *     it); its set's lock.
 *   Owner (proctype Owner): H's owner thread, the only one that fills a
 *     slot, and after it H's next owner. Its view of the slots (view:
 *     large_cache_t.used) says which slots it filled and has not emptied;
 *     it may still count a slot the background thread emptied, and finds
 *     out when its exchange returns 0 or when it loads the slots again
 *     (view_sync). Its operations, at most OPS of them:
 *       the free of a large block (page_notify_push): large_cache_put, or,
 *         when the span does not fit or no slot is empty even after a
 *         view_sync, span_free_large into the set's free slices (under the
 *         lock). A put first loads the slots of its view again
 *         (view_sync) when the view is full (the code also does when the
 *         slices would pass the cache's bound: here it may at any put),
 *         takes the lowest slot empty in the view, marks the span kept
 *         (span_keep_large), stores it (sequentially consistent) and loads
 *         watched (sequentially consistent); if it finds the flag clear,
 *         it sets it and schedules a round (watch).
 *       a large block (alloc_large): large_cache_take, one exchange with 0
 *         per slot of the view until one returns a span (the sizes, which
 *         decide which slots it tries and in which order, are left open
 *         here), else a span from the set's free slices (large_span, under
 *         the lock).
 *       large_cache_flush (heap_collect, large_span_try_grow): under the
 *         set's lock, each slot of the view exchanged with 0, what it
 *         returns released into the set (span_release_kept_locked).
 *     Then the owner's time with H ends in one of four ways:
 *       it stops using H, which stays owned (the thread goes idle for
 *         good, its spans kept);
 *       it destroys H (heap_destroy): large_cache_flush, then
 *         segment_set_release_all under the lock (H's memory goes, with
 *         every span in it), then the state FREE;
 *       it destroys H, and the heap object is reused by a new owner
 *         (heap_reuse_free), a new life: the state FREE exchanged for BUSY
 *         (the CAS), heap_init_fields (segment_set_reset: a new set, in new
 *         memory, whose spans are NS+1..2*NS, the new owner's blocks), the
 *         state OWNED, then watched = 0 (heap_handed_over, sequentially
 *         consistent);
 *       it abandons H (heap_abandon: heap_collect, whose large_cache_flush
 *         empties every slot; then the state ABANDONED), and a new owner
 *         adopts it (heap_adopt_abandoned): the same memory and spans, the
 *         state ABANDONED exchanged for BUSY, the state OWNED, then
 *         watched = 0 (heap_handed_over).
 *     The new owner, whose view is empty (the flush emptied
 *     large_cache_t.used), does at most OPS2 more operations, then goes
 *     idle for good, H owned.
 *   Background (proctype Background): the background thread. A round may
 *     come at any time (another heap's deadline, the set's purge); each
 *     takes the deadline (next_deadline exchanged to 0: pending = 0) and
 *     loads H's state: H not OWNED (FREE, BUSY or ABANDONED), the round
 *     passes it by, and whatever deadline H had is gone with the one taken
 *     (the round's work on an abandoned heap does not touch the cache). H
 *     OWNED, it runs large_cache_idle, however H's state changes
 *     meanwhile: nothing if watched is clear; else it loads each slot
 *     (relaxed) and compares it with what it saw at its last look (seen:
 *     large_cache_t.seen, kept from one life or owner to the next as the
 *     code keeps it). A slot that holds the span it saw before is idle
 *     once a whole purge delay has passed since it first saw it: time is
 *     not modelled, so at each look after the first the delay may or may
 *     not have passed (ripe), and once passed it stays passed. Every slot
 *     empty: it stores watched = 0, then loads every slot again (both
 *     sequentially consistent); a span found sets watched again and asks
 *     for another round. Some slot idle: lock_try_acquire of the set's
 *     lock (a failure asks for another round), then give_back: H still
 *     OWNED, each idle slot still holding the span seen is exchanged with
 *     0 and what it returns released into the set; then one more round.
 *     Any slot full and none idle: another round. The round's answer, a
 *     deadline, is pending = 1. The thread stops once the owners have
 *     finished and no round is pending, then the checks at the end.
 *
 * sp[s] (ghost state, not in the code) says where each span is: INUSE (a
 * block of the program), KEPT (in a slot, or in the hands of whoever
 * emptied the slot), FREE (the set's free slices), GONE (in no life's
 * memory: H's memory went, or the life it is in has not begun). Spans
 * 1..NS are in the first life's memory and start as the program's blocks;
 * spans NS+1..2*NS are in the memory of the life after a reuse (life 1).
 *
 * What the model assumes of the program: it frees only blocks it has, and
 * each once; the blocks the first owner leaves in use when it abandons H
 * are the new owner's to free (the frees of other threads reach the owner
 * through H's inbox).
 * Memory is sequentially consistent (spin): the orders the code gives its
 * atomics (the relaxed loads of the look, view_sync, the state and the
 * first load of watched; the acquire exchanges; the release stores of the
 * state) are not checked here.
 *
 * Left out: sizes (a span's slice count, room, held and the slice bound of
 * the cache: a put may fail, a take may skip a slot, whatever they are);
 * large_cache_take_span (a take, as the model has it); malloc_trim's
 * large_cache_trim (a give-back of every slot under the lock, from another
 * thread); the purge delay itself (a delay of 0 keeps nothing, an infinite
 * one never schedules a round, by design); whether the background thread
 * runs at all (a round scheduled is taken to come); the set's own
 * structures (a move into or out of the free slices is one step under the
 * lock); an abandoned heap's serving (by the round, or by a thread that
 * frees into it: H BUSY meanwhile, a put refused as H is not OWNED, the
 * frees into the set under the lock); more than one change of owner, and
 * the end of the next owner's time with H other than going idle; the
 * reuse of addresses from one life to the next (the new life's spans are
 * new numbers, so a look's seen from the life before never matches one:
 * in the code a span put where one seen before lay may be given back at
 * the first look, under the lock, H OWNED, by an exchange, as any
 * give-back).
 *
 * Properties (assertions; pan -DSAFETY also reports invalid end states):
 *   P1 a span is never owned twice: each move of a span starts from where
 *      it must be (sp[s] == from): a put only of a block in use, and into
 *      an empty slot; a take, from a slot, of a kept span only, which
 *      becomes a block in use; a release, from a slot, of a kept span
 *      only, which becomes free; a free or an allocation through the set
 *      only of a block in use or a free span. So no span is both a block
 *      and free, released twice, or two blocks.
 *   P2 nothing is released into or taken from the set of a destroyed heap
 *      (mem: the memory of H's life is there), and no span is released
 *      into the set of a life other than its own (the new life's set is a
 *      new set: HOME(s) == life).
 *   P3 no span is stranded: when the owners have finished and the
 *      background thread has nothing pending, every slot is empty and no
 *      span is kept. A full slot then would stay full: no round would come
 *      for it. Destruction and abandonment empty every slot (checked
 *      there).
 *
 * Switches (spin -DNAME -a large_cache.pml):
 *   TAKE_WITHOUT_EXCHANGE      the owner's take loads the slot, then
 *                              stores 0 (two steps): the background thread
 *                              gives back the span in between, and the
 *                              owner uses it too (P1 fails);
 *   CLEAR_WITHOUT_RECHECK      the background thread stores watched = 0
 *                              without loading the slots again: a span put
 *                              after its look, whose put found the flag
 *                              still set, waits with no round to come
 *                              (P3 fails);
 *   STEAL_WITHOUT_STATE_CHECK  the give-back neither takes the set's lock
 *                              nor checks that H is owned (the round's
 *                              check of the state before its look stays):
 *                              a span it took before H's destruction
 *                              emptied the slots is released into the set
 *                              after H's memory went, or into the new
 *                              life's set (P2 fails);
 *   NO_WATCH_RESET             the reuse and the adoption leave watched as
 *                              the owner before left it: set by its put,
 *                              its round taken while H was not owned, the
 *                              flag keeps the new owner's put from
 *                              scheduling a round (P3 fails);
 *   NSLOT (2), NS (3), OPS (6), OPS2 (3): the bounds (NS spans in each
 *                              life).
 */

#ifndef NSLOT
#define NSLOT 2            /* LARGE_CACHE_SLOTS (8 in the code) */
#endif
#ifndef NS
#define NS 3               /* spans of each life; 0: an empty slot */
#endif
#ifndef OPS
#define OPS 6              /* the first owner's frees, allocations and flushes */
#endif
#ifndef OPS2
#define OPS2 3             /* the next owner's, after a reuse or an adoption */
#endif
#define ALL ((1 << NSLOT) - 1)

/* heap_t.state (enum heap_state) */
#define FREE_HEAP 0        /* HEAP_FREE */
#define OWNED 1            /* HEAP_OWNED */
#define BUSY 2             /* HEAP_BUSY */
#define ABANDONED 3        /* HEAP_ABANDONED */

/* the life whose memory span x is in: spans 1..NS are the first life's,
 * NS+1..2*NS the next one's (ghost) */
#define HOME(x) (((x) - 1) / NS)

/* where a span is (ghost) */
#define GONE 0             /* in no life's memory: it went, or is not yet */
#define INUSE 1            /* a block of the program */
#define KEPT 2             /* in a slot, or taken from one by its exchange */
#define FREE 3             /* the set's free slices */

byte slot[NSLOT];          /* large_cache_t.slot */
bit watched;               /* large_cache_t.watched */
bit pending;               /* a round is scheduled (background.c: next_deadline) */
byte state = OWNED;        /* heap_t.state */
bit lock;                  /* segment_set_t.lock */
bit life;                  /* ghost: H's life, 1 once the object is reused */
bit mem = 1;               /* ghost: the memory of H's life is there */
byte sp[2 * NS + 1];       /* ghost: where each span is */
bit owner_done;

/* A span moves: it must be where the move starts (P1). */
inline move(x, from, to) {
  assert(sp[x] == from);
  sp[x] = to
}

/* span_release_kept_locked: a span taken from a slot goes to the set's
 * free slices (the caller holds the lock). */
inline release(x) {
  atomic {
    /* P2: into the set of a heap that exists, the set of the span's life */
    assert(mem && HOME(x) == life);
    move(x, KEPT, FREE)
  }
}

/* s: a span in state `want`, any of them, or 0 (the program has none, or
 * picks none). */
inline pick(want) {
  s = 1;
  do
  :: s <= 2 * NS && sp[s] == want -> break
  :: s <= 2 * NS -> s++
  :: s > 2 * NS -> s = 0; break
  od
}

/* span_free_large: the span goes to the set's free slices, under the
 * set's lock. */
inline to_set() {
  atomic { lock == 0 ->
    assert(mem);           /* P2 */
    move(s, INUSE, FREE)
  }
}

/* view_sync: the slots of the view the background thread emptied leave
 * it (a relaxed load of each). */
inline view_sync() {
  i = 0;
  do
  :: i < NSLOT ->
     atomic {
       if
       :: (view >> i) & 1 && slot[i] == 0 -> view = view & ~(1 << i)
       :: else
       fi;
       i++
     }
  :: else -> break
  od
}

/* large_cache_put(H, s); on failure span_free_large. */
inline put() {
  if
  :: view_sync()                 /* the view full, or its slices over the bound */
  :: view != ALL
  fi;
  atomic {
    /* the lowest slot empty in the view (ctz(~used)) */
    i = 0;
    do
    :: i < NSLOT && (view >> i) & 1 -> i++
    :: else -> break
    od;
    if
    :: i < NSLOT ->
       assert(slot[i] == 0);     /* P1: only an empty slot is filled */
       move(s, INUSE, KEPT);     /* span_keep_large */
       slot[i] = s;              /* sequentially consistent store */
       view = view | (1 << i)
    :: else
    fi
  }
  if
  :: i == NSLOT -> to_set()      /* the cache is full */
  :: else ->
     w = watched;                /* sequentially consistent load */
     if
     :: w == 0 ->
        watched = 1;
        pending = 1              /* watch(): background_schedule */
     :: else
     fi
  fi;
  i = 0; w = 0
}

/* The free of the program's block of span s. */
inline free_large() {
  atomic { pick(INUSE) }
  if
  :: s == 0
  :: s != 0 -> put()
  :: s != 0 -> to_set()          /* it does not fit the cache */
  fi;
  s = 0
}

/* slot_take(i): slot i leaves the view and is emptied; v: what it held. */
inline slot_take() {
#ifndef TAKE_WITHOUT_EXCHANGE
  atomic {
    v = slot[i]; slot[i] = 0;    /* one exchange */
    view = view & ~(1 << i);
    if
    :: v != 0 -> move(v, KEPT, INUSE)  /* P1: a block of the owner's */
    :: else
    fi
  }
#else
  atomic {
    v = slot[i];                 /* a load ... */
    view = view & ~(1 << i)
  }
  atomic {
    slot[i] = 0;                 /* ... then a store */
    if
    :: v != 0 -> move(v, KEPT, INUSE)  /* P1 */
    :: else
    fi
  }
#endif
}

/* A large block: large_cache_take, else the set's free slices. */
inline alloc_large() {
  do
  :: view != 0 ->
     atomic {
       /* a slot of the view: which ones hold spans of the block's size,
        * and in which order they are tried, is left open */
       i = 0;
       do
       :: (view >> i) & 1 -> break
       :: (view >> (i + 1)) != 0 -> i++
       od
     }
     slot_take();
     if
     :: v != 0 -> break          /* the block's span */
     :: else                     /* the background thread gave it back */
     fi
  :: break                       /* no slot (left) of the block's size */
  od;
  if
  :: v == 0 ->
     /* large_span: a span of the set's free slices, under the lock, or
      * new memory (not modelled) */
     atomic { lock == 0 ->
       pick(FREE);
       if
       :: s != 0 ->
          assert(mem);           /* P2: from the set of a heap that exists */
          move(s, FREE, INUSE)
       :: else
       fi
     }
  :: else
  fi;
  i = 0; v = 0; s = 0
}

/* large_cache_flush: every slot of the view emptied under the set's lock,
 * what each held released into the set. */
inline flush() {
  if
  :: view != 0 ->
     atomic { lock == 0 -> lock = 1 }
     i = 0;
     do
     :: i < NSLOT ->
        if
        :: (view >> i) & 1 ->
           atomic {
             v = slot[i]; slot[i] = 0;   /* slot_take: one exchange */
             view = view & ~(1 << i);
             if
             :: v != 0 -> release(v)
             :: else
             fi
           }
        :: else
        fi;
        i++
     :: else -> break
     od;
     atomic { lock = 0; i = 0; v = 0 }
  :: else
  fi
}

/* After the owner's flush: the view had every full slot, so all are
 * empty (P3). */
inline emptied() {
  atomic {
    i = 0;
    do
    :: i < NSLOT -> assert(slot[i] == 0); i++
    :: else -> break
    od;
    i = 0
  }
}

/* heap_destroy (what the cache takes part in) */
inline destroy() {
  flush();
  emptied();
  /* segment_set_release_all, under the lock: H's memory goes, with every
   * span in it */
  atomic { lock == 0 ->
    mem = 0;
    s = 1;
    do
    :: s <= 2 * NS -> sp[s] = GONE; s++
    :: else -> break
    od;
    s = 0
  }
  state = FREE_HEAP                /* release store */
}

/* heap_reuse_free: the destroyed heap object taken by a new owner, a new
 * life. */
inline reuse() {
  atomic { state == FREE_HEAP -> state = BUSY }   /* the CAS */
  /* heap_init_fields: segment_set_reset, a new set; the new owner's
   * blocks are in its memory (where they come from is not modelled) */
  atomic {
    life = 1; mem = 1;
    s = NS + 1;
    do
    :: s <= 2 * NS -> sp[s] = INUSE; s++
    :: else -> break
    od;
    s = 0
  }
  state = OWNED;                   /* release store */
#ifndef NO_WATCH_RESET
  watched = 0                      /* sequentially consistent store */
#else
  skip
#endif
}

/* heap_abandon: heap_collect (large_cache_flush), then ABANDONED. */
inline abandon() {
  flush();
  emptied();
  state = ABANDONED                /* release store */
}

/* heap_adopt_abandoned: the same heap, its memory and its spans, with a
 * new owner. */
inline adopt() {
  atomic { state == ABANDONED -> state = BUSY }   /* the CAS */
  state = OWNED;                   /* release store */
#ifndef NO_WATCH_RESET
  watched = 0                      /* sequentially consistent store */
#else
  skip
#endif
}

/* H's owner, then (second) its next owner. */
proctype Owner() {
  byte n = OPS, i, s, v, view;
  bit w, second;
  do
  :: n > 0 ->
     n--;
     if
     :: free_large()
     :: alloc_large()
     :: flush()
     fi
  :: !second -> destroy(); break
  :: !second -> destroy(); reuse(); second = 1; n = OPS2
  :: !second -> abandon(); adopt(); second = 1; n = OPS2
  :: break                         /* the thread goes idle for good */
  od;
  atomic { n = 0; view = 0; second = 0; owner_done = 1 }
}

/* give_back(H, now, delay, false), the caller holding the set's lock (as
 * the code has it): each idle slot that still holds the span seen is
 * exchanged with 0, what it returns released into the set. */
inline give_back() {
  i = 0;
  do
  :: i < NSLOT ->
     if
     :: seen[i] != 0 && ripe[i] ->
        atomic {
          v = seen[i]; seen[i] = 0; ripe[i] = 0;
          if
          :: slot[i] != v -> v = 0   /* relaxed load: taken meanwhile */
          :: else
          fi
        }
        if
        :: v != 0 ->
           atomic { v = slot[i]; slot[i] = 0 }   /* one exchange */
           if
           :: v != 0 -> release(v)
           :: else
           fi
        :: else
        fi
     :: else
     fi;
     v = 0;
     i++
  :: else -> break
  od;
  i = 0
}

/* large_cache_idle(H, now): the background thread's look at H's cache.
 * next: the look asks for another round. */
inline idle() {
  w = watched;                   /* relaxed load */
  if
  :: w ->
     i = 0;
     do
     :: i < NSLOT ->
        atomic {
          v = slot[i];           /* relaxed load */
          if
          :: v == 0 -> seen[i] = 0; ripe[i] = 0
          :: v != 0 && v != seen[i] ->
             any = 1; seen[i] = v; ripe[i] = 0   /* new since the last look */
          :: v != 0 && v == seen[i] && ripe[i] -> any = 1; due = 1
          :: v != 0 && v == seen[i] && !ripe[i] ->
             any = 1;
             if
             :: ripe[i] = 1; due = 1             /* a whole delay has passed */
             :: skip                             /* not yet */
             fi
          fi;
          v = 0;
          i++
        }
     :: else -> break
     od;
     i = 0;
     if
     :: !any ->
        watched = 0;             /* sequentially consistent store */
#ifndef CLEAR_WITHOUT_RECHECK
        do
        :: i < NSLOT && slot[i] == 0 -> i++      /* sequentially consistent load */
        :: i < NSLOT && slot[i] != 0 ->
           watched = 1;          /* a span put meanwhile */
           next = 1;
           break
        :: i == NSLOT -> break
        od;
#endif
        i = 0
     :: any && !due -> next = 1
     :: any && due ->
#ifndef STEAL_WITHOUT_STATE_CHECK
        atomic {                 /* lock_try_acquire */
          if
          :: lock == 0 -> lock = 1; got = 1
          :: else -> got = 0
          fi
        }
        if
        :: got ->
           if
           :: state == OWNED -> give_back()
           :: else
           fi;
           atomic { lock = 0; got = 0 }
        :: else                  /* PURGE_RETRY_MS later */
        fi;
#else
        give_back();
#endif
        next = 1
     fi;
     any = 0; due = 0
  :: else
  fi;
  w = 0
}

proctype Background() {
  byte i, v, seen[NSLOT];
  bit w, any, due, got, next, ripe[NSLOT];
  do
  :: /* a round: it takes the deadline, then looks at each heap */
     pending = 0;
     if
     :: state == OWNED -> idle()   /* heaps_background_round: an owned heap */
     :: else                       /* FREE, BUSY, ABANDONED: passed by */
     fi;
     if
     :: next -> next = 0; pending = 1   /* its answer: the next deadline */
     :: else
     fi
  :: owner_done && !pending -> break
  od;
  /* P3 at the end: no span kept (a span in a slot is kept), so every
   * slot empty */
  atomic {
    v = 1;
    do
    :: v <= 2 * NS -> assert(sp[v] != KEPT); v++
    :: else -> break
    od;
    i = 0;
    do
    :: i < NSLOT -> assert(slot[i] == 0); i++
    :: else -> break
    od
  }
}

init {
  byte k;
  atomic {
    k = 1;
    do
    :: k <= NS -> sp[k] = INUSE; k++
    :: else -> break
    od;
    k = 0;
    run Owner();
    run Background()
  }
}
