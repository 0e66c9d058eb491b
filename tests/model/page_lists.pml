/* A model of the page lists, a cross-thread ("remote") free protocol in
 * which a freed block goes straight onto a list of its own page, for spin
 * (tests/test_model_pages.sh runs it):
 *
 *   spin -a page_lists.pml
 *   gcc -O2 -DSAFETY -DCOLLAPSE -o pan pan.c
 *   ./pan -m10000
 *
 * The protocol (src/segments/layout.h, page_remote_t; src/heaps/remote.h,
 * page_remote_push; src/heaps/page.c, src/heaps/remote.c, src/heaps/heap.c,
 * src/heaps/park.c, src/alloc/free.c), for one thread's heap and one page
 * of one size class, whose blocks are 1..NB:
 *
 *   W, the page's atomic word, in one of three states:
 *     open    (head block, count): the page's list; W = 0 when it is
 *             empty. A block's link (nxt) is written by the one thread
 *             that holds the block;
 *     FULL    the page is on the owner's full list, where the owner does
 *             not look for blocks;
 *     CLOSED  the heap has no owner (or the page is broken: not modelled).
 *   Freer(t) (NF of them): a thread that frees a block of the page that
 *     the owner allocated. The push:
 *       loop { old = load(W);
 *              if old is CLOSED: the block goes to the heap's inbox, stop;
 *              if old is FULL: if CAS(W, FULL -> 0): the block goes to the
 *                inbox at once, stop (it tells the owner that the page has
 *                free blocks); else load again;
 *              b.link = old.head;
 *              if CAS(W, old, (b, old.count + 1)): stop }
 *     So a page on the full list may hold blocks on W, pushed after
 *     another freer opened the word, while that freer's block is on its
 *     way to the inbox. A block sent to the inbox is handed over with one
 *     atomic push (the code may hold a CLOSED page's block in the freer's
 *     batch first; that wait is left out). After the push, the inbox of an
 *     abandoned heap is served by the freer (its blocks back in their
 *     pages); else a push into an empty inbox watches the heap, as a push
 *     onto an empty list does: the freer loads the heap's flag `watched`;
 *     if it is 0, it sets it to 1 and schedules a look of the background
 *     thread. Each push and that load must be sequentially consistent (a
 *     store then a load).
 *   Owner: the heap's thread. It allocates from the page's private free
 *     list, and frees its own blocks onto it. A block that comes back to a
 *     page on the full list (its own free, or one it takes in from the
 *     inbox, the parked blocks or W) puts the page back in its queue, and
 *     W is reopened: if W is FULL or CLOSED, CAS(W, that -> 0); an open W
 *     (opened by a freer, and perhaps holding blocks pushed since) is left
 *     as it is. At any time it takes the list of W, v = exchange(W, 0),
 *     its blocks back in the page (the owner does not walk them: the count
 *     says how many; the exchange may find none, taken meanwhile by the
 *     background): when the page runs dry, and at its collect of all its
 *     pages, which takes the lists of the pages on the full list too. A
 *     page in the queue that runs dry with W empty goes to the full list:
 *       loop { if CAS(W, 0 -> FULL): the page goes on the full list, stop;
 *              v = load(W); v holds blocks: v = exchange(W, 0); if it
 *              found blocks, they are the private list and the page stays
 *              in the queue, stop; if it found none (the background took
 *              them in between), the CAS is tried again }
 *     (A page in the queue that runs dry with W FULL or CLOSED reopens it
 *     with the CAS: a word closed while the heap had no owner, only after
 *     an adoption, not reached here.)
 *     It takes in the inbox (one atomic take of the whole list) and the
 *     blocks the background parked, on its slow paths.
 *     It may stop for good at any point, with no more collects (the thread
 *     sleeps, or never allocates again); or keep going, allocating from
 *     other pages, its slow paths taking in the inbox and the parked
 *     blocks; or abandon the heap (its thread exits):
 *       1. its collect: the inbox and the parked blocks taken in, then the
 *          list of every page on the full list, then of every page in the
 *          queue, taken (exchange(W, 0));
 *       2. every word closed: for every page on the full list first, then
 *          for every page in the queue, v = exchange(W, CLOSED), the blocks
 *          of v freed into the page. A page on the full list whose blocks
 *          come back moves to its queue, which reopens its word (the heap
 *          still has its owner); the queue's pass then closes it again;
 *       3. the heap's state becomes abandoned, then it serves the inbox
 *          once (a freer that sent its block before it could see the new
 *          state leaves the block to that serve; one that sees it serves
 *          the inbox itself).
 *     From then on W stays CLOSED: every free goes to the inbox; a serve
 *     returns blocks to their page (a page on the full list goes back to
 *     its queue) and reopens no word. (No thread adopts the heap here.)
 *   Background: when a look is due (scheduled by a freer, or kept due by
 *     the look before), a look: it loads the inbox and the page's word
 *     (every page's, on the queue or the full list, under the set's lock);
 *     if neither holds a block, it clears the watch: store(watched, 0),
 *     then loads them again (sequentially consistent, the other side of
 *     the freer's push-then-load); if they still hold none, no look is
 *     due; else store(watched, 1). Blocks waiting: an abandoned heap is
 *     served (the background's round serves a heap with no owner); else,
 *     if the owner counts as idle (always once it has stopped for good; at
 *     will while it is active: its slow paths bump a counter the idle test
 *     reads, and time is left out here, so the parker may take the lists
 *     of a heap whose owner is still at work, and that must be safe too),
 *     it parks, under the set's lock: the list of W,
 *       v = load(W); if v holds blocks: CAS(W, v, 0), the blocks of v
 *       parked (a failed CAS, a push in between, is left to the next look;
 *       a FULL or CLOSED word holds no block and is left alone),
 *     then the inbox's whole chain. Parked blocks go back to the page when
 *     the owner (or a serve) takes them in, or count as back in their page
 *     once the owner is gone. While blocks wait, a look stays due.
 *
 * where[b] (ghost state, not in the code) says where block b is.
 * Memory is sequentially consistent (spin): the orders the code gives its
 * atomics are not checked here, only that the store-then-load pairs are
 * in the order above. Time is left out: a look may come at any time once
 * due, and the background takes a list only when the owner is idle or at
 * will.
 *
 * Properties (assertions; pan -DSAFETY also reports invalid end states):
 *   P1 no block lost, none taken twice: after every change of W, the
 *      chain from W's head, count blocks long, holds exactly the blocks
 *      marked on W, each once (a block overwritten off W is marked on W
 *      but off the chain: on_w != W_cnt); each take of a chain (the
 *      owner's exchanges, the background's CAS) finds each block on W;
 *      each block the program freed is, at the end, in one place: the
 *      private list (or back in its page) or the parked set.
 *   P2 no push lands on a FULL or CLOSED word: W holds no block unless it
 *      is open; once the owner abandoned the heap, no push lands on W at
 *      all, and at the end W is CLOSED and empty.
 *   P3 no block waits with no look to come: the background runs until no
 *      look is due; at the end, when every thread is done (the owner
 *      stopped for good, went on elsewhere or is gone), neither W nor the
 *      inbox holds a block (an abandoned heap's inbox is served).
 *   P4 the count in W equals the length of its chain (the chain ends,
 *      link 0, after count blocks).
 *   P5 no block is stranded on the word of a page on the full list: when
 *      the owner keeps going, once every freer is done and it has taken
 *      in its inbox and the parked blocks (all it will still do: it
 *      allocates from other pages, and does not look at the full list),
 *      a page on the full list holds no block on W. (A block pushed onto
 *      W of a page on the full list is pushed after a freer opened the
 *      word, and that freer's block, in the inbox or parked, brings the
 *      page back to its queue.)
 *
 * Switches (spin -DNAME -a page_lists.pml):
 *   NO_WATCH_RECHECK   the background clears `watched` and does not load
 *                      the inbox and W again: a push onto an empty list (or
 *                      into an empty inbox) that found the flag still set
 *                      (so scheduled no look) lands just before the clear;
 *                      the owner stops for good, and the blocks wait with
 *                      no look to come (P3 fails);
 *   CLOSE_BY_STORE     the owner makes a dry page's word FULL with
 *                      store(W, FULL) instead of CAS(W, 0 -> FULL): a block
 *                      pushed between its load of W and the store is lost
 *                      (P1 fails);
 *   PUSH_IGNORES_CLOSED  the freer pushes onto a CLOSED W too (the state
 *                      kept): blocks land on a closed word, after the
 *                      abandon (P2 fails);
 *   SERVE_REOPENS      the serve of an abandoned heap treats a block that
 *                      returns to a page on the full list as the owner's
 *                      take does, reopening W: a later free pushes onto the
 *                      abandoned heap's page (P2 fails);
 *   FULL_ON_EMPTY_TAKE after a failed CAS to FULL whose exchange finds no
 *                      block (the background took the list between the CAS
 *                      and the exchange), the page goes on the full list
 *                      with W open instead of trying the CAS again: freers
 *                      push onto it and none opens the word, but the blocks
 *                      the background took are parked, and when the owner
 *                      takes them in the page comes back to its queue (W,
 *                      open, left as it is). This one passes: the retry of
 *                      the CAS is not what the properties rest on;
 *   REOPEN_BY_STORE    the owner reopens W of a page back from the full
 *                      list with store(W, 0) instead of the CAS: blocks
 *                      pushed after a freer opened the FULL word are wiped
 *                      off (P1 fails);
 *   NOTIFY_LATE        the freer that opens a FULL word pushes its block
 *                      onto W instead of sending it to the inbox: the page
 *                      stays on the full list with blocks on W and nothing
 *                      to bring it back, while the owner keeps going
 *                      elsewhere (P5 fails);
 *   NO_OWNER_FREE      the owner frees none of its blocks itself: a
 *                      smaller search;
 *   NB (3, or 4) blocks, NF (2) freers, MAXF (1) frees per freer: the
 *   bounds (the test also runs one freer that frees twice, -DNF=1
 *   -DMAXF=2).
 */

#ifndef NB
#define NB 3
#endif
#ifndef NF
#define NF 2
#endif
#ifndef MAXF
#define MAXF 1
#endif

/* where a block is (ghost) */
#define PRIV 0      /* on the owner's private list (the owner gone: in its page) */
#define ALLOC 1     /* the program's */
#define FREEING 2   /* in a freer's call of free */
#define ON_W 3      /* on W's chain */
#define INBOX 4     /* on the heap's inbox */
#define PARKED 5    /* taken by the background, not yet back with the owner */

/* W's state */
#define W_OPEN 0
#define W_FULL 1
#define W_CLOSED 2

byte W_head;                  /* W open: head block (0: none) ... */
byte W_cnt;                   /* ... and count */
byte W_mode;                  /* W_OPEN, W_FULL or W_CLOSED */
byte nxt[NB + 1];             /* each block's link */
byte where[NB + 1];           /* ghost */

bit pg_full;                  /* the page is on the full list (the owner's) */
bit watched;                  /* the heap's flag */
bit look_pending;             /* ghost: a look of the background is due */
bit w_final;                  /* ghost: the abandon closed W for good */
bit abandoned;                /* the heap is abandoned (its state) */
bit owner_done;               /* the owner stopped for good, went on elsewhere, or abandoned */
byte freers_done;

/* scratch of the checks, used only inside atomic steps (0 between them) */
byte ci, cx, cy, cm, on_w;

#if NB >= 4
#define ANY(x) (where[1] == x || where[2] == x || where[3] == x || where[4] == x)
#else
#define ANY(x) (where[1] == x || where[2] == x || where[3] == x)
#endif

/* b = some block whose place is x (ANY(x) must hold) */
inline pick(x, b) {
  if
  :: where[1] == x -> b = 1
  :: where[2] == x -> b = 2
  :: where[3] == x -> b = 3
#if NB >= 4
  :: where[4] == x -> b = 4
#endif
  fi
}

/* P1, P2, P4 after each change of W */
inline check_W() {
  assert(W_mode == W_OPEN || W_cnt == 0); /* P2: no block on a FULL or CLOSED word */
  ci = 0; cx = W_head; cm = 0;
  do
  :: ci < W_cnt ->
     assert(cx != 0 && where[cx] == ON_W && (cm & (1 << cx)) == 0);  /* P1 */
     cm = cm | (1 << cx); cx = nxt[cx]; ci++
  :: else -> break
  od;
  assert(cx == 0);                        /* P4: the count is the chain's length */
  ci = 1; on_w = 0;
  do
  :: ci <= NB ->
     if
     :: where[ci] == ON_W -> on_w++
     :: else
     fi;
     ci++
  :: else -> break
  od;
  assert(on_w == W_cnt);                  /* P1: no block off the chain */
  ci = 0; cx = 0; cm = 0; on_w = 0
}

/* The chain of W (its count's worth of blocks) goes to place dest;
 * W's head and count become 0 (the caller sets the state if it must). */
inline take_w(dest) {
  ci = 0; cx = W_head;
  do
  :: ci < W_cnt ->
     assert(cx != 0 && where[cx] == ON_W);   /* P1: not taken twice */
     where[cx] = dest;
     cy = nxt[cx]; nxt[cx] = 0; cx = cy; ci++
  :: else -> break
  od;
  assert(cx == 0);                           /* P4 */
  W_head = 0; W_cnt = 0;
  ci = 0; cx = 0; cy = 0
}

/* Every block of the inbox and the parked set back in the page (the
 * owner's take, or the serve of an abandoned heap); got: any came back. */
inline take_in(got) {
  ci = 1;
  do
  :: ci <= NB ->
     if
     :: where[ci] == INBOX || where[ci] == PARKED -> where[ci] = PRIV; got = 1
     :: else
     fi;
     ci++
  :: else -> break
  od;
  ci = 0
}

/* The owner: a block came back to a page on the full list. The page goes
 * back in its queue and W is reopened: a FULL or CLOSED word with
 * CAS(W, that -> 0); an open one is left as it is. */
inline back_to_queue() {
  pg_full = 0;
#ifdef REOPEN_BY_STORE
  W_head = 0; W_cnt = 0; W_mode = W_OPEN;   /* store(W, 0): a block on W is wiped off (P1) */
#else
  if
  :: W_mode != W_OPEN -> W_mode = W_OPEN
  :: else
  fi;
#endif
  check_W()
}

/* The serve of an abandoned heap: its inbox and parked blocks taken in,
 * back in their page, which goes back in its queue; no word is reopened. */
inline serve() {
  atomic {
    take_in(got);
    if
    :: got && pg_full ->
#ifdef SERVE_REOPENS
       back_to_queue()
#else
       pg_full = 0
#endif
    :: else
    fi;
    got = 0
  }
}

/* A freer's push onto the inbox, then: an abandoned heap served; else a
 * push into an empty inbox watches the heap. */
inline send(b) {
  atomic { ie = !ANY(INBOX); assert(where[b] == FREEING); where[b] = INBOX }
  atomic {
    if
    :: abandoned -> serve(); ie = 0
    :: else
    fi
  }
  if
  :: ie -> watch()
  :: else
  fi
}

/* load(watched); if 0, set it and schedule a look */
inline watch() {
  w = watched;
  if
  :: !w -> atomic { watched = 1; look_pending = 1 }
  :: else
  fi
}

proctype Owner() {
  byte b, vc;
  bit ok, got;
  do
  /* malloc from the page's private list */
  :: atomic { ANY(PRIV) -> pick(PRIV, b); where[b] = ALLOC; b = 0 }
#ifndef NO_OWNER_FREE
  /* the owner's own free: onto the private list; a page on the full list
   * goes back in its queue */
  :: atomic {
       ANY(ALLOC) -> pick(ALLOC, b); where[b] = PRIV; b = 0;
       if
       :: pg_full -> back_to_queue()
       :: else
       fi
     }
#endif
  /* the list of W taken, v = load(W), then v = exchange(W, 0) (one step
   * here: a list the load saw and the background took before the
   * exchange leaves it nothing, as a load that saw none), at any time:
   * the page runs dry, or the owner collects all its pages, the full
   * list's too; a page on the full list goes back in its queue */
  :: atomic { W_cnt > 0 -> take_w(PRIV); check_W() }
     if
     :: pg_full -> atomic { back_to_queue() }
     :: else
     fi
  /* the page runs dry, W FULL or CLOSED: CAS(W, that -> 0) (a word closed
   * while the heap had no owner: reached only after an adoption, not
   * modelled) */
  :: atomic { !pg_full && !ANY(PRIV) && W_mode != W_OPEN -> W_mode = W_OPEN; check_W() }
  /* the page runs dry, W open and empty (v = load(W) is 0): the full list */
  :: atomic { !pg_full && !ANY(PRIV) && W_mode == W_OPEN && W_cnt == 0 }
#ifdef CLOSE_BY_STORE
     atomic {                                               /* store(W, FULL) */
       W_head = 0; W_cnt = 0; W_mode = W_FULL; pg_full = 1;
       check_W()
     }
#else
     do
     :: atomic {
          if
          :: W_mode == W_OPEN && W_cnt == 0 ->               /* CAS(W, 0 -> FULL) */
             W_mode = W_FULL; pg_full = 1; ok = 1; check_W()
          :: W_mode != W_OPEN -> pg_full = 1; ok = 1         /* FULL or CLOSED: not reached */
          :: else -> ok = 0                                  /* blocks pushed meanwhile */
          fi
        }
        if
        :: ok -> break
        :: else
        fi;
        atomic {                            /* v = load(W); blocks: exchange(W, 0) */
          vc = W_cnt; take_w(PRIV); check_W()
        }
        if
        :: vc > 0 -> break                  /* its private list: it stays in the queue */
#ifdef FULL_ON_EMPTY_TAKE
        :: else -> pg_full = 1; break       /* none left: full, its word open */
#else
        :: else                             /* none left: the CAS again */
#endif
        fi
     od;
     atomic { ok = 0; vc = 0 }
#endif
  /* take in the inbox and the parked blocks; a page on the full list to
   * which a block came back goes back in its queue */
  :: atomic { ANY(INBOX) || ANY(PARKED) -> take_in(got) }
     if
     :: got && pg_full -> atomic { back_to_queue(); got = 0 }
     :: else -> got = 0
     fi
  /* the owner keeps going elsewhere: once every freer is done, it takes
   * in the inbox and the parked blocks (its slow paths do), and no more
   * (P5) */
  :: atomic { freers_done == NF -> take_in(got) }
     if
     :: got && pg_full -> atomic { back_to_queue() }
     :: else
     fi;
     atomic {
       got = 0;
       assert(!pg_full || W_cnt == 0)          /* P5: no block stranded on W */
     }
     break
  /* thread exit: the heap is abandoned (guards, no else: an else in the
   * first step of a do option is tried only when no other option can
   * run). Its collect: the inbox and the parked blocks taken in, ... */
  :: atomic { take_in(got) }
     if
     :: got && pg_full -> atomic { back_to_queue(); got = 0 }
     :: else -> got = 0
     fi;
     /* ... the lists of the full list's pages, then of the queue's */
     atomic {
       if
       :: pg_full && W_cnt > 0 -> take_w(PRIV); check_W(); got = 1
       :: else
       fi
     }
     if
     :: got -> atomic { back_to_queue(); got = 0 }
     :: else
     fi;
     atomic {
       if
       :: !pg_full && W_cnt > 0 -> take_w(PRIV); check_W()
       :: else
       fi
     }
     /* every word closed, v = exchange(W, CLOSED): the full list's pages
      * first (one whose blocks come back moves to its queue and reopens
      * its word), ... */
     atomic {
       if
       :: pg_full -> got = (W_cnt > 0); take_w(PRIV); W_mode = W_CLOSED; check_W()
       :: else
       fi
     }
     if
     :: got -> atomic { back_to_queue(); got = 0 }
     :: else
     fi;
     /* ... then the queue's */
     atomic {
       if
       :: !pg_full -> take_w(PRIV); W_mode = W_CLOSED; check_W()
       :: else
       fi;
       assert(W_mode == W_CLOSED);
       w_final = 1
     }
     abandoned = 1;                             /* the heap's state */
     serve();
     break
  /* the owner stops for good */
  :: break
  od;
  owner_done = 1
}

proctype Freer(byte t) {
  byte b, oh, oc, om, nf;
  bit done, sent, first, w, got, ie;
  do
  /* free of a block the owner allocated */
  :: atomic { nf < MAXF && ANY(ALLOC) -> pick(ALLOC, b); where[b] = FREEING; nf++ }
     do
     :: atomic { oh = W_head; oc = W_cnt; om = W_mode }     /* old = load(W) */
        atomic {
          if
#ifndef PUSH_IGNORES_CLOSED
          :: om == W_CLOSED -> sent = 1; done = 1           /* CLOSED: to the inbox */
#endif
          :: om == W_FULL ->
             if
             :: W_head == oh && W_cnt == oc && W_mode == om ->   /* CAS(W, FULL -> 0) */
                W_mode = W_OPEN;
                check_W();
#ifndef NOTIFY_LATE
                sent = 1; done = 1                  /* to the inbox, at once */
#endif
             :: else                                /* CAS fails: load again */
             fi
          :: else ->                                /* open (or CLOSED, with
                                                     * PUSH_IGNORES_CLOSED) */
             nxt[b] = oh;                           /* b.link = old.head */
             if
             :: W_head == oh && W_cnt == oc && W_mode == om ->   /* CAS */
                assert(!w_final);                   /* P2: no push after the abandon */
                assert(where[b] == FREEING);
                W_head = b; W_cnt = oc + 1;         /* the state as it was */
                where[b] = ON_W;
                first = (oc == 0);
                done = 1;
                check_W()
             :: else                                /* CAS fails: load again */
             fi
          fi
        }
        if
        :: done -> break
        :: else
        fi
     od;
     if
     :: sent -> send(b)
     :: first -> watch()
     :: else
     fi;
     atomic { b = 0; oh = 0; oc = 0; om = 0; done = 0; sent = 0; first = 0; w = 0; ie = 0 }
  /* the thread frees no more */
  :: break
  od;
  freers_done++
}

proctype Background() {
  byte b, vh, vc;
  bit pend, take, got;
  do
  :: atomic {
       look_pending -> look_pending = 0;
       pend = (ANY(INBOX) || W_cnt > 0)             /* load the inbox and W */
     }
     if
     :: !pend ->
        watched = 0;                                /* store(watched, 0) */
#ifndef NO_WATCH_RECHECK
        pend = (ANY(INBOX) || W_cnt > 0);           /* load them again */
        if
        :: pend -> watched = 1                      /* store(watched, 1) */
        :: else
        fi
#endif
     :: else
     fi;
     if
     :: pend ->
        atomic {
          if
          :: abandoned -> serve()                   /* the round serves it */
          :: !abandoned -> take = 1                 /* the owner counts as idle */
          :: !abandoned && !owner_done              /* the owner is at work */
          fi
        }
        if
        :: take ->
           /* under the set's lock: the list of W, v = load(W); blocks:
            * CAS(W, v, 0) */
           atomic { vh = W_head; vc = W_cnt }
           if
           :: vc > 0 ->
              atomic {
                if
                :: W_head == vh && W_cnt == vc && W_mode == W_OPEN ->
                   take_w(PARKED); check_W()
                :: else                             /* a push meanwhile: the next look */
                fi
              }
           :: else
           fi;
           /* then the inbox's chain, taken whole */
           atomic {
             ci = 1;
             do
             :: ci <= NB ->
                if
                :: where[ci] == INBOX -> where[ci] = PARKED
                :: else
                fi;
                ci++
             :: else -> break
             od;
             ci = 0
           }
        :: else
        fi;
        look_pending = 1                            /* one more look */
     :: else
     fi;
     atomic { vh = 0; vc = 0; pend = 0; take = 0 }
  /* every other thread is done and no look is due */
  :: atomic { !look_pending && owner_done && freers_done == NF -> break }
  od;
  /* the checks at the end */
  atomic {
    check_W();
    /* P3: no look is due, so neither W nor the inbox holds a block */
    assert(W_cnt == 0 && !ANY(INBOX));
    /* P2: after the abandon, W is CLOSED */
    assert(!w_final || W_mode == W_CLOSED);
    /* P1: each block in one place */
    b = 1;
    do
    :: b <= NB ->
       assert(where[b] == ALLOC || where[b] == PRIV || where[b] == PARKED);
       b++
    :: else -> break
    od;
    b = 0
  }
}

init {
  byte i;
  atomic {
    /* the page's blocks all on the private list */
    i = 1;
    do
    :: i <= NB -> where[i] = PRIV; i++
    :: else -> break
    od;
    i = 0;
    run Owner();
    do
    :: i < NF -> run Freer(i); i++
    :: else -> break
    od;
    i = 0;
    run Background()
  }
}
