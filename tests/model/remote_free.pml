/* A model of brisk's cross-thread ("remote") free protocol, for spin
 * (tests/test_model.sh runs it):
 *
 *   spin -a remote_free.pml
 *   gcc -O2 -DSAFETY -DCOLLAPSE -o pan pan.c
 *   ./pan -m10000
 *
 * The protocol (src/heaps/remote.c, src/heaps/remote.h, src/alloc/free.c,
 * src/heaps/heap.c, src/heaps/park.c, src/heaps/heap_types.h; docs/DESIGN.md,
 * "Threads and ownership"):
 *
 *   H, one heap object: its generation g (heap_t.generation, full width)
 *     and its inbox word (list, tag), tag = g mod TAGS (TAGS = 65536 in the
 *     code: the 16 bits above INBOX_GEN_SHIFT; small here, so that the wrap
 *     is reachable), and the inbox's watch flag (heap_t.inbox_watched).
 *     Each life of H (the time between heap_create or heap_reuse_free and
 *     heap_destroy) has a generation of its own.
 *   Owner (proctype Owner): H's owner thread. H is either a first-class
 *     heap (HEAP_KIND_USER: its lives end with heap_destroy, and the object
 *     is reused by heap_reuse_free, FREE -> BUSY -> OWNED, unless it was
 *     retired) or a thread's heap (HEAP_KIND_THREAD: one life; heap_abandon
 *     when its thread exits, OWNED -> ABANDONED; heap_adopt_abandoned by a
 *     new thread, ABANDONED -> BUSY -> OWNED). init picks one. Right
 *     after H becomes OWNED again (reused or adopted), heap_handed_over
 *     clears the watch flag. The owner's drains leave the flag alone. The
 *     owner may go idle for good with H OWNED, its inbox not taken in.
 *   Freer(t) (NT of them): a thread that frees H's blocks. A small block:
 *     free_remote / free_remote_uncommon take the tag of the block's life
 *     from its segment (segment_t.heap_generation, the life it joined H in);
 *     a slot that collects for another heap or tag is handed over and
 *     retargeted (heap_outbox_retarget); heap_remote_free links the block
 *     into the slot's batch (plain writes). A batch is handed over
 *     (heap_outbox_flush_slot -> inbox_push) when full, when retargeted,
 *     when its thread runs out of a page or exits, or never, if the thread
 *     goes idle for good. A large block is linked the same way and its
 *     batch handed over at once (heap_remote_free's urgent flush). (A huge
 *     block, freed under the set's lock, is not modelled.) After a push
 *     (inbox_pushed), an ABANDONED heap is served; else a push that found
 *     the inbox empty (PUSH_FIRST) watches it (park_watch): if the flag is
 *     clear, it sets it and schedules a look (background_schedule).
 *   Background: heaps_background_round, a round when one is due (a look
 *     was scheduled: ghost look_pending, which the round consumes, as
 *     background_main takes the deadline) or, when H is ABANDONED, at any
 *     time (a round for other deadlines). H OWNED: a look (park_idle_inbox:
 *     none if the flag is clear; an empty inbox clears it; a non-empty one
 *     is looked at again later or parked, its chain taken under the set's
 *     lock, then looked at again). H ABANDONED: served (ABANDONED -> BUSY,
 *     heap_drain_inbox, -> ABANDONED), then a look. H BUSY with the flag
 *     set (another thread holds it, to serve, adopt or reuse it; a push
 *     that landed after a serve's drain watched the inbox): retried, the
 *     look stays due (the round comes back PURGE_RETRY_MS later). H in
 *     any other state (FREE, RETIRED, BUSY unwatched): passed by, and no
 *     look at it is scheduled again. Once every thread is done: the round
 *     that is due, if one is and H is ABANDONED (none for other
 *     deadlines), then the checks at the end.
 *
 * Each life of H has NB blocks of its own memory (block b belongs to life
 * b / NB): blocks 0 and 1 small, block 2 large. where[b] (ghost state, not
 * in the code) says where each block is.
 *
 * What the model assumes of the program: it frees each block once, while
 * the block's life lasts; a free returns before the owner destroys H
 * (nfreeing).
 * Memory is sequentially consistent (spin): the orders the code gives its
 * atomics are not checked here.
 *
 * Left out: H's own outbox (heap_destroy and heap_abandon flush it, but
 * only a thread's heap, never a first-class one, collects frees, and with
 * one heap object it holds none of H's blocks); heap_remote_free_direct
 * (a free from a thread without a heap: a batch of one block pushed at
 * once, which is a free followed at once by a flush here); the owner's own
 * frees (free_local, owner-only lists); page and span reuse within a life
 * (a block is allocated at most once per life); time: a look at a
 * non-empty watched inbox parks it or looks again later, either at any
 * time, and a round for other deadlines comes only when H is ABANDONED;
 * the parked arrays (a parked block counts as back in its page: the
 * owner's take of the arrays and heap_destroy's drop of them are left
 * out).
 *
 * Properties (assertions; pan -DSAFETY also reports invalid end states):
 *   P1 no write into the memory of a destroyed life: inbox_push's link of
 *      a batch's tail, a drain's free of a block. A
 *      batch built for life L is linked into life L only and takes no block
 *      of another life.
 *   P2 no block on two lists: each move of a block (program -> outbox
 *      batch -> inbox -> page) starts from where the block must be, and a
 *      drain finds exactly the blocks that were pushed.
 *   P3 no block lost, every batch delivered or dropped: a batch is dropped
 *      only when its life has ended, and at the end each block the program
 *      freed is back in its page or went with its destroyed life. Two
 *      exceptions: the batch of a thread that went idle for good stays in
 *      that thread's slot (it is handed over, or dropped if its life has
 *      ended, when the thread next frees to that slot, runs out of a page
 *      or exits; until then its blocks are unavailable to their heap); and
 *      the inbox of H OWNED by an owner idle for good holds blocks until
 *      the background thread parks them (P4).
 *   P4 no block waits in an owned heap's inbox with nobody to come by: at
 *      the end, if H is OWNED and its inbox holds blocks, a look is due and
 *      the flag is set; and whenever a look finds the flag clear, H OWNED
 *      and its inbox holding blocks, the push that brought them is still on
 *      its way to its watch, or the adopter to its drain (the pusher's CAS
 *      then load of the flag, the look's clear then load of the inbox).
 *   P5 no block waits in an abandoned heap's inbox with no look to come:
 *      at the end, after the round that is due (if any), if H is ABANDONED
 *      and its inbox holds blocks, a look is due. (A round for other
 *      deadlines would serve it too, but nothing promises one.)
 *
 * Switches (spin -DNAME -a remote_free.pml):
 *   NO_RETIRE       heap_destroy never retires H: it is reused whatever its
 *                   next tag, the tag wraps, and a batch of a destroyed life
 *                   is linked into a later one (P1 fails);
 *   NO_PUSH_GUARD   inbox_push does not count itself in (pushers) from its
 *                   load of the inbox word to its CAS or its drop, and
 *                   heap_destroy does not wait for the count to reach 0
 *                   after its exchange: a push writes its tail's link into
 *                   memory that went with a destroyed life (P1 fails);
 *   NO_HANDOVER_CLEAR  heap_reuse_free and heap_adopt_abandoned do not
 *                   clear the watch flag: a flag set in H's life before,
 *                   whose look a round passed by while H was FREE, keeps
 *                   the next life's first push from scheduling a look, and
 *                   the idle owner's inbox holds its blocks with no look to
 *                   come (P4 fails; with THREAD_HEAP it passes: a round
 *                   retries H BUSY in an adoption, and a flag set before is
 *                   looked at once H is OWNED);
 *   NO_BUSY_RETRY   a round passes a BUSY heap by, its flag set or not: the
 *                   look scheduled by a push that landed after the drain of
 *                   an exiting owner's (or a freeing thread's) serve is
 *                   used up, the serve stores ABANDONED, and the push's
 *                   blocks wait in the inbox with no look to come (P5
 *                   fails; the test runs it with THREAD_HEAP, where the
 *                   search finds it at once);
 *   NO_FINAL_SERVE  no background round once everything else is done: an
 *                   ABANDONED heap's blocks stay in its inbox, their look
 *                   due (P3 fails);
 *   SPLIT_LOOK      a look's clear of the flag and its second load of the
 *                   inbox are steps of their own (one step otherwise), so
 *                   that a push may land between them: park_watch's
 *                   store-then-load pair with both sides apart (passes,
 *                   23,114,429 states, depth 287, 45 s; the test runs the
 *                   model without it);
 *   USER_HEAP, THREAD_HEAP  only that kind of heap;
 *   TAGS (3), NT (2), MAX_ABANDON (2): the bounds. With TAGS tags, H has
 *   at most TAGS - 1 lives (TAGS + 1 with NO_RETIRE).
 */

#ifndef NO_PUSH_GUARD
#define PUSH_GUARD         /* as the code has it (inbox_push, heap_destroy) */
#endif

#ifndef TAGS
#define TAGS 3
#endif
#ifndef NT
#define NT 2
#endif
#define NB 3               /* blocks per life: 0, 1 small, 2 large */
#define LARGE 2
#define LIVES (TAGS + 1)   /* the owner destroys at most TAGS times */
#define NBLK (LIVES * NB)
#define BATCH 2            /* OUTBOX_BATCH (64 in the code) */
#ifndef MAX_ABANDON
#define MAX_ABANDON 2      /* exits (and adoptions) of a thread's heap */
#endif
#define NIL 255
#define NOLIFE 255

/* heap_t.state (enum heap_state); RETIRED: destroyed on the last tag */
#define FREE 0
#define OWNED 1
#define ABANDONED 2
#define BUSY 3
#define RETIRED 4

/* where a block is (ghost) */
#define W_NEW 6       /* not yet allocated in its life */
#define W_PAGE 0      /* freed back into its page */
#define W_ALLOC 1     /* the program's */
#define W_FREEING 2   /* in a call of free */
#define W_OUTBOX 3    /* in the batch of thread ow[b]'s outbox slot */
#define W_INBOX 4     /* on H's inbox list */
#define W_DROPPED 5   /* went with its destroyed life */

byte state = OWNED;           /* heap_t.state */
bool user;                    /* HEAP_KIND_USER (else HEAP_KIND_THREAD) */
byte g = 0;                   /* heap_t.generation */
byte mem = 0;                 /* ghost: the life whose memory exists */
byte inbox_head = NIL;        /* heap_t.inbox: the list ... */
byte inbox_tag = 0;           /* ... and the tag, generation mod TAGS */
byte inbox_n = 0;             /* ghost: blocks pushed since the last take */
bit seglock;                  /* segment_set_t.lock */
byte nfreeing;                /* ghost: free calls of small blocks under way */
#ifdef PUSH_GUARD
byte pushers;
#endif
bit watched;                  /* heap_t.inbox_watched */
bit look_pending;             /* ghost: a background round is due for H */
byte towatch;                 /* ghost: pushes into an empty inbox not yet
                               * through their watch (or their serve) */
bit adopting;                 /* ghost: an adopter's drain is still to come */
bit owner_idle;               /* the owner went idle for good, H OWNED */

byte where[NBLK];
byte ow[NBLK];
byte nxt[NBLK];               /* a block's remote link (block_set_remote_next) */

/* each freeing thread's outbox slot for H (outbox_slot_t) */
byte s_tag[NT];               /* slot->generation; NIL: another heap's */
byte s_life[NT];              /* ghost: the life its batch was built for */
byte s_head[NT];
byte s_tail[NT];
byte s_cnt[NT];
bit idle[NT];

byte freers_done;
bit owner_done;

#define LIFE(b) ((b) / NB)

/* heap_drain_inbox: one exchange of the inbox word to (empty, same tag),
 * then each block is freed into its page (free_local: owner-only lists).
 * Run by the owner, or by a thread that holds H as BUSY. */
inline drain() {
  atomic {
    hd = inbox_head; inbox_head = NIL;
    k = inbox_n; inbox_n = 0;
    adopting = 0
  }
  atomic {
    n = 0;
    do
    :: hd != NIL ->
       assert(n < NBLK);                  /* P2: no cycle */
       assert(where[hd] == W_INBOX);      /* P2 */
       assert(LIFE(hd) == g && mem == g); /* P1: free_local into this life */
       where[hd] = W_PAGE;
       n++;
       k2 = nxt[hd]; nxt[hd] = NIL; hd = k2
    :: else -> break
    od;
    assert(n == k);                       /* P2/P3: all that was pushed */
    hd = 0; n = 0; k = 0; k2 = 0
  }
}

/* heap_serve_abandoned (heap_abandon's, for frees that arrived while the
 * thread left): CAS ABANDONED -> BUSY, take the inbox, store ABANDONED. */
inline serve() {
  atomic {
    if
    :: state == ABANDONED -> state = BUSY; srv = 1
    :: else -> srv = 0
    fi
  }
  if
  :: srv -> drain(); atomic { state = ABANDONED; srv = 0 }
  :: else
  fi
}

/* The background thread's park of H's inbox (park_chain, under the set's
 * lock, H OWNED): one CAS that keeps the tag takes the chain; here the
 * blocks count as back in their page (the owner frees them into it when
 * it takes the array in; heap_destroy drops them with their life). */
inline park() {
  hd = inbox_head; inbox_head = NIL; k = inbox_n; inbox_n = 0;
  n = 0;
  do
  :: hd != NIL ->
     assert(n < NBLK);
     assert(where[hd] == W_INBOX);      /* P2 */
     assert(LIFE(hd) == g && mem == g); /* P1 */
     where[hd] = W_PAGE;
     n++;
     k2 = nxt[hd]; nxt[hd] = NIL; hd = k2
  :: else -> break
  od;
  assert(n == k);                       /* P2/P3 */
  hd = 0; n = 0; k = 0; k2 = 0
}

/* park_idle_inbox, the background thread's look at H (OWNED, or
 * ABANDONED just after the round served it). Time is left out: a look at
 * a non-empty watched inbox either looks again later (the inbox moved
 * since the last look, or has not been still for a whole delay, or H is
 * not OWNED, or the set's lock is busy) or, H OWNED, parks the chain and
 * looks once more. An empty watched inbox is cleared, then read again
 * (park_watch's store-then-load pair): one step here, two with SPLIT_LOOK
 * (the Background's look_again). */
inline look() {
  if
  :: !watched ->                          /* nothing to watch: no next look */
     /* P4: an owned heap's blocks wait unwatched only while the push
      * that brought them is on its way to its watch, or the adopter to
      * its drain */
     assert(state != OWNED || inbox_head == NIL || towatch > 0 || adopting)
#ifdef SPLIT_LOOK
  :: watched && inbox_head == NIL -> watched = 0; lk = 1
#else
  :: watched && inbox_head == NIL -> watched = 0  /* still empty: no next look */
#endif
  :: watched && inbox_head != NIL -> look_pending = 1  /* look again later */
  :: watched && inbox_head != NIL && state == OWNED && seglock == 0 ->
     park(); look_pending = 1             /* parked; one more look */
  fi
}

/* A round of the background thread (background_main takes the deadline,
 * heaps_background_round loads H's state), up to its first step that
 * lets others in: an OWNED heap is looked at; an ABANDONED one is taken
 * (CAS to BUSY) to be served (serve_end), then looked at; a BUSY one
 * whose flag is set (another thread holds it, to serve, adopt or reuse
 * it; a push that landed after a serve's drain watched it) is retried:
 * the look stays due (the round comes back PURGE_RETRY_MS later); a heap
 * in any other state (FREE, RETIRED, BUSY unwatched) is passed by, and
 * no look at it is scheduled again. (One step: the round's start, its
 * loads of the state and of the flag and the CAS of an ABANDONED heap,
 * which, were it to fail after the load, would only schedule a retry; a
 * look's loads and what it decides.) */
inline round() {
  atomic {
    rs == 0 && lk == 0 && (look_pending || state == ABANDONED) ->
    look_pending = 0;
    if
    :: state == OWNED -> look()
    :: state == ABANDONED -> state = BUSY; rs = 1
#ifndef NO_BUSY_RETRY
    :: state == BUSY && watched -> look_pending = 1  /* retried */
#endif
    :: else                               /* passed by */
    fi
  }
}

/* The rest of a round that took an ABANDONED heap: heap_drain_inbox, the
 * store of ABANDONED, and a look (at a push that came while it was BUSY). */
inline serve_end() {
  drain();
  atomic { state = ABANDONED; rs = 0; look() }
}

#ifdef SPLIT_LOOK
/* look_again: the look's second load of the inbox, after its clear of
 * the flag; set again, and looked at later, if a push came */
inline look_again() {
  atomic { lk == 1 ->
    if
    :: inbox_head == NIL                  /* still empty: no next look */
    :: else -> watched = 1; look_pending = 1
    fi;
    lk = 0
  }
}
#endif

/* Drop thread t's batch: its life has ended, its blocks went with it. */
inline drop_batch(t) {
  assert(s_life[t] != g);                 /* P3: never a live life's batch */
  hd = s_head[t]; n = 0;
  do
  :: n < s_cnt[t] ->
     assert(where[hd] == W_OUTBOX && ow[hd] == t);
     where[hd] = W_DROPPED; ow[hd] = 0; n++;
     k = nxt[hd]; nxt[hd] = NIL; hd = k
  :: else -> break
  od;
  k = 0
}

/* heap_outbox_flush_slot -> inbox_push(dst, slot->generation, head, tail):
 *   old = load(inbox)                                 -- step 1
 *   do { if (tag(old) != batch tag) return false;     -- step 2: dropped,
 *        tail->link = list(old);                      --   or a write into
 *   } while (!CAS(inbox, old, head | tag));           --   the batch and CAS
 * then, if dst is ABANDONED, heap_serve_abandoned(dst). The check, the
 * write and the CAS are one step here (the write goes to memory only the
 * pusher touches until the CAS succeeds), but the load is one of its own:
 * the life may end between the load and the write. */
inline push(t) {
  atomic {
#ifdef PUSH_GUARD
    pushers++;
#endif
    ph = inbox_head; pt = inbox_tag; ok = 0
  }
  do
  :: ok -> break
  :: else ->
     atomic {
       if
       :: pt != s_tag[t] ->
          /* the life moved on: the batch is dropped, its blocks went with it */
          drop_batch(t);
          ok = 1
       :: else ->
          /* the tail's link, a write into the batch: the tag still
           * matches only in the batch's own life (P1, the wrap) and the
           * batch's memory must still be there (P1: the life did not end
           * since the load) */
          assert(inbox_tag != pt || s_life[t] == g);
          assert(mem == s_life[t]);
          assert(where[s_tail[t]] == W_OUTBOX && ow[s_tail[t]] == t); /* P2 */
          nxt[s_tail[t]] = ph;
          if
          :: inbox_head == ph && inbox_tag == pt ->           /* CAS succeeds */
             assert(s_life[t] == g && mem == g);              /* P1: its own life */
             inbox_head = s_head[t]; inbox_tag = s_tag[t];   /* head | tag */
             hd = s_head[t]; n = 0;
             do
             :: n < s_cnt[t] ->
                assert(where[hd] == W_OUTBOX && ow[hd] == t); /* P2 */
                where[hd] = W_INBOX; ow[hd] = 0; n++; hd = nxt[hd]
             :: else -> break
             od;
             inbox_n = inbox_n + s_cnt[t];
             if
             :: ph == NIL -> first = 1; towatch++ /* PUSH_FIRST */
             :: else
             fi;
             ok = 1
          :: else ->                                          /* CAS fails: reload */
             ph = inbox_head; pt = inbox_tag
          fi
       fi
     }
  od;
  atomic {
#ifdef PUSH_GUARD
    pushers--;
#endif
    s_head[t] = NIL; s_tail[t] = NIL; s_cnt[t] = 0; s_life[t] = 0;
    ph = 0; pt = 0; ok = 0; hd = 0; n = 0
  }
  /* inbox_pushed: an ABANDONED heap is served; else a push into an empty
   * inbox has it watched (park_watch: the flag's load and store are one
   * step here). A dropped batch does neither (only a first-class heap
   * drops, and it is never ABANDONED). */
  atomic {
    if
    :: state == ABANDONED -> state = BUSY; srv = 1
    :: else ->
       if
       :: first && !watched -> watched = 1; look_pending = 1 /* background_schedule */
       :: else                                  /* watched: a look is due */
       fi
    fi;
    if
    :: first -> towatch--; first = 0
    :: else
    fi
  }
  if
  :: srv -> drain(); atomic { state = ABANDONED; srv = 0 }
  :: else
  fi
}

/* heap_handed_over, right after H became OWNED (heap_reuse_free,
 * heap_adopt_abandoned): its inbox starts unwatched. */
inline handed_over() {
#ifndef NO_HANDOVER_CLEAR
  watched = 0
#else
  skip
#endif
}

/* heap_remote_free: b joins thread t's batch */
inline link(t, b) {
  if
  :: s_cnt[t] == 0 -> s_life[t] = LIFE(b); s_tail[t] = b
  :: else -> assert(s_life[t] == LIFE(b))   /* P1: one life per batch */
  fi;
  nxt[b] = s_head[t]; s_head[t] = b; s_cnt[t]++;
  where[b] = W_OUTBOX; ow[b] = t
}

proctype Owner() {
  byte hd, n, k, k2, b, abandons;
  bit srv;
  do
  /* malloc: page_pop of a small block of this life */
  :: atomic {
       if
       :: where[g * NB + 0] == W_NEW -> b = g * NB + 0
       :: where[g * NB + 1] == W_NEW -> b = g * NB + 1
       fi;
       where[b] = W_ALLOC; b = 0
     }
  /* malloc of a large block: a span (span_alloc_large, under the lock) */
  :: atomic { seglock == 0 && where[g * NB + LARGE] == W_NEW ->
       where[g * NB + LARGE] = W_ALLOC }
  /* heap_housekeeping / heap_collect / alloc_large: take the inbox */
  :: drain()
  /* heap_destroy (a first-class heap). The program has finished its
   * frees of this life's blocks (nfreeing == 0); batches may still wait in
   * other threads' outboxes. */
  :: atomic { user && nfreeing == 0 && g < LIVES - 1 ->
       g++;                                  /* h->generation + 1 */
       /* exchange the inbox to (empty, new tag): what it held is dropped */
       hd = inbox_head; inbox_head = NIL; inbox_n = 0;
       inbox_tag = g % TAGS;
       n = 0;
       do
       :: hd != NIL ->
          assert(n < NBLK && where[hd] == W_INBOX);
          where[hd] = W_DROPPED; n++;
          k = nxt[hd]; nxt[hd] = NIL; hd = k
       :: else -> break
       od;
       hd = 0; n = 0; k = 0; k2 = 0
     }
     /* heap_flush_outbox(h): H's own outbox holds no block of H */
#ifdef PUSH_GUARD
     (pushers == 0);
#endif
     /* segment_set_release_all, under the set's lock: the life's memory
      * goes; blocks in outboxes are dropped at their push */
     atomic { seglock == 0 ->
       b = (g - 1) * NB;
       do
       :: b < g * NB ->
          if
          :: where[b] == W_NEW || where[b] == W_PAGE || where[b] == W_ALLOC ||
             where[b] == W_FREEING ->
             where[b] = W_DROPPED
          :: else
          fi;
          b++
       :: else -> break
       od;
       mem = NOLIFE; b = 0
     }
#ifndef NO_RETIRE
     if
     :: g % TAGS == TAGS - 1 ->
        /* the last tag: retired, never reused; its inbox keeps the tag */
        state = RETIRED;
        break
     :: else
     fi;
#endif
     state = FREE;
     if
     :: /* heap_reuse_free: CAS FREE -> BUSY, heap_init_fields, OWNED */
        atomic { state == FREE -> state = BUSY }
        atomic { mem = g; state = OWNED };
        handed_over()
     :: break                                /* left FREE */
     fi
  /* thread exit (a thread's heap): heap_abandon */
  :: !user && abandons < MAX_ABANDON ->
     abandons++;
     drain();                                /* heap_collect; own outbox: empty */
     state = ABANDONED;                      /* release */
     serve();                                /* frees that arrived meanwhile */
     if
     :: /* a new thread: heap_adopt_abandoned */
        atomic { state == ABANDONED -> state = BUSY; adopting = 1 }
        state = OWNED;
        handed_over();
        drain()
     :: break                                /* no thread adopts it */
     fi
  /* the program stops using H, its frees done: later slow paths drain */
  :: freers_done == NT -> drain(); break
  /* the owner goes idle for good (sleeps, or never allocates again): its
   * inbox waits for the background thread */
  :: owner_idle = 1; break
  od;
  owner_done = 1
}

proctype Freer(byte t) {
  byte b, tag, ph, pt, hd, n, k, k2;
  bit ok, srv, rt, lg, first;
  do
  /* free of a block of H from this thread: free_remote. The tag is
   * that of the block's life, which its segment keeps (the life of H it
   * joined in); a slot for another heap or tag is retargeted
   * (free_remote_uncommon, heap_outbox_retarget), which hands its batch
   * over first; then heap_remote_free links b into the batch (plain
   * writes to b and to the thread's own slot). A large block's batch is
   * handed over at once (urgent). */
  :: atomic {
       if
       :: where[g * NB + 0] == W_ALLOC -> b = g * NB + 0
       :: where[g * NB + 1] == W_ALLOC -> b = g * NB + 1
       :: where[g * NB + LARGE] == W_ALLOC -> b = g * NB + LARGE; lg = 1
       fi;
       tag = LIFE(b) % TAGS;                 /* seg->heap_generation: b's life */
       assert(tag == inbox_tag);             /* a free within its life: H's */
       if
       :: s_tag[t] == tag || s_cnt[t] == 0 ->
          s_tag[t] = tag;                    /* nothing to hand over */
          link(t, b);
          b = 0; tag = 0
       :: else ->
          where[b] = W_FREEING; nfreeing++;  /* the call goes on */
          rt = 1
       fi
     }
     if
     :: rt ->
        push(t);                             /* heap_outbox_retarget */
        atomic {
          s_tag[t] = tag;
          assert(where[b] == W_FREEING);
          link(t, b);
          nfreeing--; b = 0; tag = 0; rt = 0
        }
     :: else
     fi;
     if
     :: lg -> lg = 0; push(t)                /* a large block: at once */
     :: else
     fi;
     if
     :: s_cnt[t] >= BATCH -> push(t)         /* full: OUTBOX_BATCH */
     :: else
     fi
  /* the slot is handed over: its thread ran out of a page, or the slot is
   * taken for another heap */
  :: s_cnt[t] > 0 -> push(t)
  /* thread exit: heap_flush_outbox */
  :: if
     :: s_cnt[t] > 0 -> push(t)
     :: else
     fi;
     break
  /* the thread goes idle for good, holding its batch */
  :: idle[t] = 1; break
  od;
  freers_done++
}

proctype Background() {
  byte hd, n, k, k2, rs, lk;
  /* a round: one that is due (look_pending), or one run for other
   * deadlines (only when it serves H) */
  do
  :: round()
  :: rs == 1 -> serve_end()
#ifdef SPLIT_LOOK
  :: look_again()
#endif
  :: rs == 0 && lk == 0 && owner_done && freers_done == NT -> break
  od;
  /* Every other process is done: the round that is due, if one is and H
   * is ABANDONED, to its end; none for other deadlines. One is enough:
   * its drain leaves the inbox empty, nobody pushes any more, and its
   * look schedules no other (checked). */
#ifndef NO_FINAL_SERVE
  if
  :: state == ABANDONED && look_pending ->
     round(); serve_end();
#ifdef SPLIT_LOOK
     if
     :: lk == 1 -> look_again()
     :: else
     fi;
#endif
     assert(!look_pending)
  :: else
  fi;
#endif
  /* P4 at the end: an owned heap's blocks never wait in its inbox with
   * no look to come */
  assert(state != OWNED || inbox_head == NIL || look_pending);
  assert(state != OWNED || inbox_head == NIL || watched);
  /* P5: nor an abandoned heap's */
  assert(state != ABANDONED || inbox_head == NIL || look_pending);
  /* P3 at the end */
  d_step {
    hd = 0;
    do
    :: hd < NBLK ->
       assert(where[hd] == W_NEW || where[hd] == W_PAGE || where[hd] == W_ALLOC ||
              where[hd] == W_DROPPED ||
              (where[hd] == W_OUTBOX && idle[ow[hd]]) ||
              (where[hd] == W_INBOX && state == OWNED && owner_idle));
       hd++
    :: else -> break
    od;
    hd = 0;
    do
    :: hd < NT -> assert(s_cnt[hd] == 0 || idle[hd]); hd++
    :: else -> break
    od
  }
}

init {
  byte i;
  atomic {
    i = 0;
    do
    :: i < NBLK -> nxt[i] = NIL; where[i] = W_NEW; i++
    :: else -> break
    od;
    i = 0;
    do
    :: i < NT -> s_tag[i] = NIL; s_head[i] = NIL; s_tail[i] = NIL; i++
    :: else -> break
    od;
#if defined(USER_HEAP)
    user = 1;
#elif defined(THREAD_HEAP)
    user = 0;
#else
    if
    :: user = 1
    :: user = 0
    fi;
#endif
    run Owner();
    i = 0;
    do
    :: i < NT -> run Freer(i); i++
    :: else -> break
    od;
    run Background()
  }
}
