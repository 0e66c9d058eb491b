/* The large keep's handshake (src/heaps/large_keep.c), checked with spin
 * (tests/test_model_keep.sh).
 *
 * One slot of one heap's keep, its owner and the background thread. The
 * owner's side has no fence, so its memory is modelled as x86's (TSO): its
 * stores wait in a FIFO store buffer, drained to memory at any moment; its
 * loads read its own latest buffered store of a word, else memory. The
 * background thread's stores are each followed by a fence in the code (its
 * lock's RMW, the membarrier call), so it is modelled sequentially
 * consistent. membarrier makes the owner's CPU pass a full barrier while
 * the call runs: here, the call returns only once the owner's buffer is
 * empty (the owner's later loads read memory, where frozen is already set).
 * A lock acquire is an RMW: it drains the owner's buffer first.
 *
 * The owner frees its block into the keep (put) and allocates from it
 * (pop), a few times, each inside the handshake (busy, then a load of
 * frozen; the operation under the lock when frozen); a put that reads the
 * watch clear sets it and schedules a look. The background thread looks
 * while a look is due: it takes the lock (tries), sets frozen, fences,
 * reads busy (set: it backs off and looks again later), then takes the
 * kept span (or leaves it for the next look: which one is up to the
 * search), clears the watch when the slot is empty, clears frozen and
 * lets the lock go.
 *
 * Checked: the span is never held by two (the owner's pop and the
 * background thread's take of the same span); and once the owner is done
 * for good and no look is due, nothing is kept (a put whose watch was
 * cleared unseen would leave its span with no look to come).
 *
 * Variants that must fail: -DNO_FENCE (membarrier does not reach the
 * owner), -DNO_BUSY_CHECK (the background thread does not read busy),
 * -DNO_RELOOK (a look that leaves a span schedules none after it). The
 * first two are searched with -DNO_FINAL (no check of the end state), so
 * that the search shows the pop and the take meeting on one span. */

#define BUSY 0
#define FROZEN 1
#define SLOT 2
#define WATCHED 3
#define LOCK 4
#define NVARS 5

#ifndef OPS
#define OPS 3
#endif

byte mem[NVARS];
/* the owner's store buffer: FIFO of (word, value), and per word its
 * count of pending stores and the latest value */
chan buf = [4] of { byte, byte };
byte pend[NVARS];
byte last[NVARS];

byte due = 0;         /* a look is scheduled */
byte holders = 0;     /* ghost: who holds the span outside the slot */
byte kept = 0;        /* ghost: the span is in the slot (its put issued) */
bool owner_done = false;
bool owner_has = true; /* ghost: the owner holds a live block's span */

inline ostore(v, x) {
  atomic { buf!v,x; pend[v]++; last[v] = x }
}

inline oload(v, r) {
  atomic { if :: pend[v] > 0 -> r = last[v] :: else -> r = mem[v] fi }
}

/* The owner's lock: an RMW, so its buffer drains first. */
inline olock() {
  atomic { empty(buf) && mem[LOCK] == 0 -> mem[LOCK] = 1 }
}

proctype Drain() {
  byte v, x;
end:
  do
  :: atomic { buf?v,x -> mem[v] = x; pend[v]-- }
  od
}

/* The operation on the slot, by the owner (inside the handshake or under
 * the lock). */
inline owner_op() {
  if
  :: owner_has ->                      /* put */
     owner_has = false;
     kept++;
     ostore(SLOT, 1);
     oload(WATCHED, w);
     if
     :: w == 0 -> ostore(WATCHED, 1); watch = true
     :: else -> skip
     fi
  :: !owner_has ->                     /* pop */
     oload(SLOT, s);
     if
     :: s == 1 ->
        ostore(SLOT, 0);
        assert(kept == 1);
        kept--;
        holders++;
        assert(holders == 1);          /* not also taken by the background */
        owner_has = true;
        holders--
     :: else -> owner_has = true       /* nothing kept: a span from the set */
     fi
  fi
}

proctype Owner() {
  byte i = 0, f, s, w;
  bool watch;
  do
  :: i < OPS ->
     watch = false;
     ostore(BUSY, 1);
     oload(FROZEN, f);
     if
     :: f == 0 ->
        owner_op();
        ostore(BUSY, 0)
     :: else ->
        ostore(BUSY, 0);
        olock();
        owner_op();
        ostore(LOCK, 0)
     fi;
     if
     :: watch -> due = 1               /* background_schedule */
     :: else -> skip
     fi;
     i++
  :: i == OPS -> break
  od;
  owner_done = true
}

proctype Background() {
  byte b;
end:
  do
  :: due == 1 ->
     atomic { mem[LOCK] == 0 -> mem[LOCK] = 1 };
     due = 0;
     mem[FROZEN] = 1;
#ifndef NO_FENCE
     empty(buf);                       /* membarrier: the owner's buffer drained */
#endif
     b = mem[BUSY];
#ifdef NO_BUSY_CHECK
     b = 0;
#endif
     if
     :: b == 1 ->                      /* the owner is inside: later */
        due = 1;
        mem[FROZEN] = 0;
        mem[LOCK] = 0
     :: else ->
        if
        :: mem[SLOT] == 1 ->
           if
           :: true ->                  /* unused since the last look: taken */
              mem[SLOT] = 0;
              holders++;
              assert(holders == 1);
              assert(kept == 1);
              kept--;
              holders--;
              mem[WATCHED] = 0         /* the slot is empty now */
           :: true ->                  /* seen now, taken at the next look */
#ifndef NO_RELOOK
              due = 1
#else
              skip
#endif
           fi
        :: else -> mem[WATCHED] = 0
        fi;
        mem[FROZEN] = 0;
        mem[LOCK] = 0
     fi
  od
}

/* Once the owner is done for good, its buffer drained and no look due,
 * nothing may be kept. */
proctype Final() {
  atomic { owner_done && empty(buf) && due == 0 && mem[LOCK] == 0 -> assert(kept == 0) }
}

init {
  atomic {
    run Drain();
    run Owner();
    run Background();
#ifndef NO_FINAL
    run Final()
#endif
  }
}
