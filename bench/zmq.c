/* A real client: libzmq throughput and latency, as a matrix of cells.
 *
 * A cell is KIND.PATTERN.TRANSPORT.SIZE.ioN, for example
 * thr.router_router.tcp.65536.io2 or lat.pubsub.inproc.64.io1:
 *   KIND       thr (one end sends as fast as it can, the other receives) or
 *              lat (ping-pong; half the mean round trip)
 *   PATTERN    pair, pubsub, dealer_dealer, dealer_router, router_router,
 *              router_router_poll (both ends driven by zmq_poll and
 *              non-blocking sends and receives), pushpull
 *   TRANSPORT  inproc, ipc, tcp (127.0.0.1)
 *   SIZE       64, 256, 1024, 65536, 131072, 262144 bytes
 *   ioN        ZMQ_IO_THREADS of each context (1 or 2)
 *
 * The allocator under test serves libzmq itself (message bodies above
 * 33 B, encoder and decoder buffers, pipes) on both ends: for inproc the
 * message allocated by the sending thread is freed by the receiving one;
 * for ipc and tcp each end has its own context and I/O threads, as two
 * processes would. Every message carries a sequence number, a type byte,
 * a byte written in each 4 KiB page and a last byte derived from the
 * sequence; the receiver checks them all, and a failed check prints
 * CHECK FAILED and exits with status 3. The latency echo answers with a
 * message of its own (allocated on its thread), so on both legs one
 * thread allocates and another frees.
 *
 * Sockets: the receiving end binds, the sending end connects (for the
 * bidirectional patterns' latency the echo binds). ROUTERs send with
 * ZMQ_ROUTER_MANDATORY (they block at the high-water mark instead of
 * dropping) to the peer's ZMQ_ROUTING_ID; the PUB sets ZMQ_XPUB_NODROP for
 * the same reason. PUB/SUB latency uses two PUB/SUB pairs, one per
 * direction. Before a cell is timed each link is joined: its sender sends
 * small probe messages until its receiver has seen one (a PUB drops
 * messages until the subscription arrives, a ROUTER cannot route before
 * the handshake). The high-water marks hold at most 16 MiB of messages per
 * pipe: 1000 messages (libzmq's default) up to 16 KiB, fewer above.
 *
 * A cell runs a warm-up (not timed), then a timed phase of fixed length;
 * the receiver (thr) or the initiator (lat) reads the clock.
 *
 *   bench_zmq [--secs S] [--warmup S] [--pin TX,RX[,IO]] [--trace S] [--list] CELL...
 *       runs every cell whose name matches one of the CELL globs (fnmatch;
 *       "*" runs the whole matrix), in matrix order, each on fresh
 *       contexts. --pin puts the sending (thr) or initiating (lat) thread
 *       on CPU TX, the other application thread on CPU RX and the I/O
 *       threads on CPU IO. Prints, per cell,
 *         METRIC id=CELL msgs_s=.. mb_s=.. msgs_s_med=.. cpu_us=.. msgs=.. secs=..
 *         METRIC id=CELL us=.. p50_us=.. p99_us=.. cpu_us=.. rounds=.. secs=..
 *       then one RESULT line. msgs_s is the rate over the timed phase,
 *       msgs_s_med the median rate of its ten slices; us the mean half
 *       round trip, p50_us and p99_us percentiles of the rounds'; cpu_us
 *       the process's CPU time (all threads) per message or per round.
 *       --trace S prints to stderr the throughput of
 *       every S seconds of a thr cell (warm-up included).
 *   bench_zmq SIZE [THREADS [FILTER]]
 *       the harness's fixed-work form: PAIR and PUSH/PULL throughput at
 *       every size and transport (SIZE messages of 64 B; a size s sends
 *       SIZE/(1+s/4096)), PAIR latency at 64 B, 1 KiB and 64 KiB
 *       (SIZE/20/(1+s/4096) rounds), one I/O thread, no warm-up; METRIC
 *       ids without the .ioN suffix and with the fields kmsgs_s (thr) or us
 *       (lat, the mean); FILTER keeps the ids that contain it; THREADS is
 *       ignored.
 *
 * BENCH_ZMQ_SKIP=N makes every sender skip sequence number N: the
 * receiver's check must then fail (the tests use it).
 */
#include "bench_common.h"
#include <fnmatch.h>
#include <math.h>
#include <stdatomic.h>
#include <unistd.h>
#include <zmq.h>

static const size_t sizes[] = {64, 256, 1024, 65536, 131072, 262144};
#define NSIZES (sizeof sizes / sizeof sizes[0])
static const char *transports[] = {"inproc", "ipc", "tcp"};
static const char *kinds[] = {"thr", "lat"};

enum { P_PAIR, P_PUBSUB, P_DEALER_DEALER, P_DEALER_ROUTER, P_ROUTER_ROUTER, P_ROUTER_POLL,
       P_PUSHPULL, NPATTERNS };
static const char *pattern_names[NPATTERNS] = {
    "pair", "pubsub", "dealer_dealer", "dealer_router", "router_router", "router_router_poll",
    "pushpull"};
/* socket types: [sending end, receiving end] of one link */
static const int link_types[NPATTERNS][2] = {
    {ZMQ_PAIR, ZMQ_PAIR},       {ZMQ_PUB, ZMQ_SUB},       {ZMQ_DEALER, ZMQ_DEALER},
    {ZMQ_DEALER, ZMQ_ROUTER},   {ZMQ_ROUTER, ZMQ_ROUTER}, {ZMQ_ROUTER, ZMQ_ROUTER},
    {ZMQ_PUSH, ZMQ_PULL}};
/* one socket carries both directions of a ping-pong */
static int bidirectional(int p) { return p != P_PUBSUB && p != P_PUSHPULL; }

#define ZCHECK(x)                                                                   \
  do {                                                                              \
    if ((x) < 0) {                                                                  \
      fprintf(stderr, "bench: zmq: %s failed: %s\n", #x, zmq_strerror(zmq_errno())); \
      exit(2);                                                                      \
    }                                                                               \
  } while (0)

enum { T_DATA = 0, T_PROBE = 1, T_END = 2 };
#define HEADER 16 /* seq (8 bytes), type (1 byte), padding */

/* One socket as the benchmark drives it. */
typedef struct {
  void *s;
  int router;          /* frames travel behind a routing-id frame */
  int poll;            /* zmq_poll plus ZMQ_DONTWAIT instead of blocking calls */
  char peer[32];       /* routing id to send to (ROUTER); learnt from the first message */
  size_t peer_len;
} end_t;

static int link_no;
static long long skip_seq = -1;
static int pin_cpu[3] = {-1, -1, -1}; /* tx, rx, io */
static double trace_every;  /* thr: print the rate of each interval of this length */
static int fixed_work_form; /* the harness's form: its METRIC fields */

/* ---------------------------------------------------------------------- */
/* messages */

static void fill(zmq_msg_t *m, size_t size, uint64_t seq, int type) {
  ZCHECK(zmq_msg_init_size(m, size));
  unsigned char *d = (unsigned char *)zmq_msg_data(m);
  memcpy(d, &seq, 8);
  memset(d + 8, 0, HEADER - 8);
  d[8] = (unsigned char)type;
  if (type == T_DATA) {
    bench_touch_pages(d, size, (unsigned char)(seq * 13u + 1u));
    d[size - 1] = (unsigned char)(seq * 7u + 3u);
  }
}

/* The message's type; checks a data message's size, sequence and bytes. */
static int check(zmq_msg_t *m, size_t size, uint64_t expect, const char *cell) {
  size_t n = zmq_msg_size(m);
  BENCH_CHECK(n >= HEADER, "zmq: %s: message of %zu B, too short", cell, n);
  const unsigned char *d = (const unsigned char *)zmq_msg_data(m);
  int type = d[8];
  if (type != T_DATA) {
    BENCH_CHECK(type == T_PROBE || type == T_END, "zmq: %s: unknown message type %d", cell, type);
    return type;
  }
  uint64_t seq;
  memcpy(&seq, d, 8);
  BENCH_CHECK(n == size && seq == expect && d[size - 1] == (unsigned char)(expect * 7u + 3u) &&
                  bench_pages_ok(d, size, (unsigned char)(expect * 13u + 1u)),
              "zmq: %s: message %llu (size %zu) arrived as seq %llu size %zu", cell,
              (unsigned long long)expect, size, (unsigned long long)seq, n);
  return T_DATA;
}

/* ---------------------------------------------------------------------- */
/* sending and receiving through an end */

static int send_frame(end_t *e, zmq_msg_t *m, int more, int nowait) {
  int flags = more ? ZMQ_SNDMORE : 0;
  if (nowait) return zmq_msg_send(m, e->s, flags | ZMQ_DONTWAIT);
  if (!e->poll) {
    ZCHECK(zmq_msg_send(m, e->s, flags));
    return 0;
  }
  while (zmq_msg_send(m, e->s, flags | ZMQ_DONTWAIT) < 0) {
    if (zmq_errno() != EAGAIN) ZCHECK(-1);
    zmq_pollitem_t it = {e->s, 0, ZMQ_POLLOUT, 0};
    ZCHECK(zmq_poll(&it, 1, 100));
  }
  return 0;
}

static void recv_frame(end_t *e, zmq_msg_t *m) {
  if (!e->poll) {
    ZCHECK(zmq_msg_recv(m, e->s, 0));
    return;
  }
  while (zmq_msg_recv(m, e->s, ZMQ_DONTWAIT) < 0) {
    if (zmq_errno() != EAGAIN) ZCHECK(-1);
    zmq_pollitem_t it = {e->s, 0, ZMQ_POLLIN, 0};
    ZCHECK(zmq_poll(&it, 1, -1));
  }
}

/* Sends m (consumed on success). nowait: returns -1 instead of waiting
 * (EAGAIN at the high-water mark, EHOSTUNREACH before a ROUTER's peer is
 * known); m is then still the caller's. */
static int send_msg(end_t *e, zmq_msg_t *m, int nowait) {
  if (e->router) {
    zmq_msg_t id;
    ZCHECK(zmq_msg_init_size(&id, e->peer_len));
    memcpy(zmq_msg_data(&id), e->peer, e->peer_len);
    if (send_frame(e, &id, 1, nowait) < 0) {
      zmq_msg_close(&id);
      return -1;
    }
  }
  if (send_frame(e, m, 0, nowait) < 0) {
    BENCH_CHECK(!e->router, "zmq: ROUTER refused a frame after its routing id");
    return -1;
  }
  return 0;
}

static void recv_msg(end_t *e, zmq_msg_t *m) {
  if (e->router) {
    zmq_msg_t id;
    ZCHECK(zmq_msg_init(&id));
    recv_frame(e, &id);
    BENCH_CHECK(zmq_msg_more(&id), "zmq: ROUTER received a routing id with no message");
    if (!e->peer_len) {
      size_t n = zmq_msg_size(&id);
      BENCH_CHECK(n > 0 && n <= sizeof e->peer, "zmq: routing id of %zu B", n);
      memcpy(e->peer, zmq_msg_data(&id), n);
      e->peer_len = n;
    }
    zmq_msg_close(&id);
  }
  ZCHECK(zmq_msg_init(m));
  recv_frame(e, m);
  BENCH_CHECK(!zmq_msg_more(m), "zmq: unexpected multi-part message");
}

static void send_control(end_t *e, int type, uint64_t seq) {
  zmq_msg_t m;
  fill(&m, HEADER, seq, type);
  send_msg(e, &m, 0);
}

/* ---------------------------------------------------------------------- */
/* links: joining, sockets, endpoints */

/* The sending side of a link: probes until the receiver has seen one. */
static void join_send(end_t *e, _Atomic int *joined) {
  double deadline = bench_now() + 20.0;
  while (!atomic_load(joined)) {
    zmq_msg_t m;
    fill(&m, HEADER, 0, T_PROBE);
    if (send_msg(e, &m, 1) < 0) zmq_msg_close(&m);
    for (int i = 0; i < 20 && !atomic_load(joined); i++) usleep(50);
    if (bench_now() > deadline) {
      fprintf(stderr, "bench: zmq: a link did not join in 20 s\n");
      exit(2);
    }
  }
}

/* The receiving side: waits for the first probe. */
static void join_recv(end_t *e, _Atomic int *joined, const char *cell) {
  for (;;) {
    zmq_msg_t m;
    recv_msg(e, &m);
    int type = check(&m, 0, 0, cell);
    zmq_msg_close(&m);
    BENCH_CHECK(type == T_PROBE, "zmq: %s: message of type %d before the link joined", cell, type);
    atomic_store(joined, 1);
    return;
  }
}

static void *new_ctx(int io) {
  void *c = zmq_ctx_new();
  if (!c) bench_die("zmq_ctx_new");
  ZCHECK(zmq_ctx_set(c, ZMQ_IO_THREADS, io));
  if (pin_cpu[2] >= 0) ZCHECK(zmq_ctx_set(c, ZMQ_THREAD_AFFINITY_CPU_ADD, pin_cpu[2]));
  return c;
}

static void *new_socket(void *ctx, int type, size_t size, const char *id) {
  void *s = zmq_socket(ctx, type);
  if (!s) bench_die("zmq_socket");
  int hwm = (int)((16u << 20) / size);
  if (hwm > 1000) hwm = 1000;
  if (hwm < 16) hwm = 16;
  ZCHECK(zmq_setsockopt(s, ZMQ_SNDHWM, &hwm, sizeof hwm));
  ZCHECK(zmq_setsockopt(s, ZMQ_RCVHWM, &hwm, sizeof hwm));
  int one = 1;
  if (type == ZMQ_ROUTER) ZCHECK(zmq_setsockopt(s, ZMQ_ROUTER_MANDATORY, &one, sizeof one));
  if (type == ZMQ_PUB) ZCHECK(zmq_setsockopt(s, ZMQ_XPUB_NODROP, &one, sizeof one));
  if (type == ZMQ_SUB) ZCHECK(zmq_setsockopt(s, ZMQ_SUBSCRIBE, "", 0));
  if (id) ZCHECK(zmq_setsockopt(s, ZMQ_ROUTING_ID, id, strlen(id)));
  return s;
}

/* Binds sock on transport; writes the endpoint to connect to. */
static void bind_to(void *sock, const char *transport, char *endpoint, size_t len) {
  if (!strcmp(transport, "inproc")) {
    snprintf(endpoint, len, "inproc://bench-%d", link_no);
  } else if (!strcmp(transport, "ipc")) {
    snprintf(endpoint, len, "ipc:///tmp/brisk-bench-zmq-%d-%d", (int)getpid(), link_no);
  } else {
    snprintf(endpoint, len, "tcp://127.0.0.1:*");
  }
  link_no++;
  ZCHECK(zmq_bind(sock, endpoint));
  size_t l = len;
  ZCHECK(zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, endpoint, &l));
}

static void close_socket(void *s) {
  int zero = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
  zmq_close(s);
}

/* A link from a socket of ctx_tx to a socket of ctx_rx: the receiver
 * binds, the sender connects. ROUTERs get routing ids. */
static void make_link(int pattern, void *ctx_tx, void *ctx_rx, const char *transport, size_t size,
                      end_t *tx, end_t *rx) {
  int router_tx = link_types[pattern][0] == ZMQ_ROUTER;
  int router_rx = link_types[pattern][1] == ZMQ_ROUTER;
  memset(tx, 0, sizeof *tx);
  memset(rx, 0, sizeof *rx);
  rx->s = new_socket(ctx_rx, link_types[pattern][1], size, router_tx ? "bind" : NULL);
  tx->s = new_socket(ctx_tx, link_types[pattern][0], size, router_rx ? "conn" : NULL);
  tx->router = router_tx;
  rx->router = router_rx;
  tx->poll = rx->poll = pattern == P_ROUTER_POLL;
  if (router_tx) {
    memcpy(tx->peer, "bind", 4);
    tx->peer_len = 4;
  }
  char endpoint[256];
  bind_to(rx->s, transport, endpoint, sizeof endpoint);
  ZCHECK(zmq_connect(tx->s, endpoint));
}

static void pin_self(int cpu) {
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  int rc = pthread_setaffinity_np(pthread_self(), sizeof set, &set);
  if (rc) {
    errno = rc;
    bench_die("pthread_setaffinity_np");
  }
}

/* ---------------------------------------------------------------------- */
/* latency histogram: 32 buckets per octave from 1/16 us */

#define HBUCKETS 1024
typedef struct {
  uint32_t n[HBUCKETS];
  long long count;
} histo;

static void histo_add(histo *h, double us) {
  int b = us <= 0.0625 ? 0 : (int)(log2(us * 16.0) * 32.0);
  if (b >= HBUCKETS) b = HBUCKETS - 1;
  h->n[b]++;
  h->count++;
}

static double histo_pct(const histo *h, double q) {
  long long want = (long long)ceil(q * (double)h->count), seen = 0;
  if (want < 1) want = 1;
  for (int b = 0; b < HBUCKETS; b++) {
    seen += h->n[b];
    if (seen >= want) return exp2((b + 0.5) / 32.0) / 16.0;
  }
  return 0;
}

/* ---------------------------------------------------------------------- */
/* one cell */

typedef struct {
  double warmup, secs; /* timed phase: after warmup, for secs (or max units) */
  long long max;       /* 0 = no limit */
} plan_t;

typedef struct {
  end_t tx, rx;       /* thr: the link; lat: tx = echo's receiving end (A->B) */
  end_t back_tx, back_rx; /* lat over two links: B->A */
  size_t size;
  const char *cell;
  int two_links;
  _Atomic int joined, joined_back, stop, done;
} cell_t;

static void *thr_sender(void *arg) {
  cell_t *c = (cell_t *)arg;
  pin_self(pin_cpu[0]);
  join_send(&c->tx, &c->joined);
  uint64_t seq = 0;
  for (; !atomic_load_explicit(&c->stop, memory_order_relaxed); seq++) {
    if ((long long)seq == skip_seq) continue;
    zmq_msg_t m;
    fill(&m, c->size, seq, T_DATA);
    send_msg(&c->tx, &m, 0);
  }
  send_control(&c->tx, T_END, seq);
  unsigned spins = 0;
  while (!atomic_load(&c->done)) bench_pause(&spins); /* keep the pipe until all arrived */
  return NULL;
}

#define SLICES 10
#define MAXSLICES 64

static double cpu_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
  if (n == 0) return 0;
  qsort(v, (size_t)n, sizeof *v, cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* Returns the timed seconds; *units = messages received in them;
 * *slice_median = the median rate of the timed phase's tenths; *cpu = the
 * process's CPU seconds (every thread) in the timed phase. */
static double thr_receive(cell_t *c, const plan_t *pl, long long *units, double *slice_median,
                          double *cpu) {
  pin_self(pin_cpu[1]);
  join_recv(&c->rx, &c->joined, c->cell);
  unsigned every = c->size >= 4096 ? 1 : 16;
  double start = 0, t0 = 0, t1 = 0;
  long long c0 = 0, c1 = 0;
  int phase = 0; /* 0 warm-up, 1 timed, 2 draining */
  /* the timed phase in slices: the median slice's rate resists a
   * moment when another process held a CPU */
  double slice = pl->secs / SLICES, ts = 0, rates[MAXSLICES];
  long long cs = 0, clast = 0;
  int nslices = 0;
  double tlast = 0; /* --trace */
  for (uint64_t expect = 0;;) {
    zmq_msg_t m;
    recv_msg(&c->rx, &m);
    int type = check(&m, c->size, expect, c->cell);
    zmq_msg_close(&m);
    if (type == T_PROBE) continue;
    if (type == T_END) {
      BENCH_CHECK(phase == 2, "zmq: %s: end of stream before the run ended", c->cell);
      break;
    }
    expect++;
    if (phase == 2) continue;
    if (expect % every && !(phase == 1 && pl->max && (long long)expect - c0 >= pl->max)) continue;
    double now = bench_now();
    if (start == 0) start = now;
    if (trace_every > 0) {
      if (tlast == 0) tlast = now, clast = (long long)expect;
      if (now - tlast >= trace_every) {
        fprintf(stderr, "TRACE %s t=%.2f msgs_s=%.0f\n", c->cell, now - start,
                (double)((long long)expect - clast) / (now - tlast));
        tlast = now;
        clast = (long long)expect;
      }
    }
    if (phase == 0 && now - start >= pl->warmup) {
      phase = 1;
      *cpu = cpu_now();
      t0 = ts = now;
      c0 = cs = (long long)expect;
      continue;
    } else if (phase == 1 && now - ts >= slice && nslices < MAXSLICES) {
      rates[nslices++] = (double)((long long)expect - cs) / (now - ts);
      ts = now;
      cs = (long long)expect;
    }
    if (phase == 1 && (now - t0 >= pl->secs || (pl->max && (long long)expect - c0 >= pl->max))) {
      phase = 2;
      *cpu = cpu_now() - *cpu;
      t1 = now;
      c1 = (long long)expect;
      atomic_store(&c->stop, 1);
    }
  }
  *units = c1 - c0;
  *slice_median = median(rates, nslices);
  return t1 - t0;
}

static void *lat_echo(void *arg) {
  cell_t *c = (cell_t *)arg;
  pin_self(pin_cpu[1]);
  end_t *in = &c->rx, *out = c->two_links ? &c->back_tx : &c->rx;
  join_recv(in, &c->joined, c->cell);
  if (c->two_links) join_send(out, &c->joined_back);
  for (uint64_t expect = 0;;) {
    zmq_msg_t m;
    recv_msg(in, &m);
    int type = check(&m, c->size, expect, c->cell);
    zmq_msg_close(&m);
    if (type == T_PROBE) continue;
    if (type == T_END) break;
    uint64_t seq = expect == (uint64_t)skip_seq ? expect + 1 : expect;
    zmq_msg_t r;
    fill(&r, c->size, seq, T_DATA);
    send_msg(out, &r, 0);
    expect++;
  }
  atomic_store(&c->done, 1);
  return NULL;
}

/* The initiator: returns the timed seconds; *units = rounds timed. */
static double lat_initiate(cell_t *c, const plan_t *pl, long long *units, histo *h, double *cpu) {
  pin_self(pin_cpu[0]);
  end_t *out = &c->tx, *in = c->two_links ? &c->back_rx : &c->tx;
  join_send(out, &c->joined);
  if (c->two_links) join_recv(in, &c->joined_back, c->cell);
  double start = bench_now(), t0 = 0, prev = 0, now = 0;
  long long rounds = 0;
  int timed = 0;
  for (uint64_t seq = 0;; seq++) {
    zmq_msg_t m;
    fill(&m, c->size, seq, T_DATA);
    send_msg(out, &m, 0);
    for (;;) {
      recv_msg(in, &m);
      int type = check(&m, c->size, seq, c->cell);
      zmq_msg_close(&m);
      if (type == T_DATA) break;
      BENCH_CHECK(type == T_PROBE, "zmq: %s: end of stream from the echo", c->cell);
    }
    now = bench_now();
    if (!timed) {
      if (now - start >= pl->warmup) {
        timed = 1;
        *cpu = cpu_now();
        t0 = prev = now;
      }
      continue;
    }
    histo_add(h, (now - prev) * 1e6 / 2.0);
    prev = now;
    rounds++;
    if (now - t0 >= pl->secs || (pl->max && rounds >= pl->max)) break;
  }
  *cpu = cpu_now() - *cpu;
  send_control(out, T_END, 0);
  unsigned spins = 0;
  while (!atomic_load(&c->done)) bench_pause(&spins);
  *units = rounds;
  return now - t0;
}

typedef struct {
  double secs;
  long long msgs;
} totals;

static void run_cell(int kind, int pattern, int transport, size_t size, int io, const plan_t *pl,
                     const char *id, totals *tot) {
  const char *tr = transports[transport];
  int inproc = transport == 0;
  void *ctx_a = new_ctx(io);
  void *ctx_b = inproc ? ctx_a : new_ctx(io);
  cell_t *c = (cell_t *)calloc(1, sizeof *c);
  if (!c) bench_die("calloc");
  c->size = size;
  c->cell = id;
  c->two_links = kind == 1 && !bidirectional(pattern);
  /* thr: a = receiver, b = sender. lat: a = initiator, b = echo; a's
   * link to b is "tx -> rx", b's way back is "back_tx -> back_rx" */
  if (kind == 0) make_link(pattern, ctx_b, ctx_a, tr, size, &c->tx, &c->rx);
  else make_link(pattern, ctx_a, ctx_b, tr, size, &c->tx, &c->rx);
  if (c->two_links) make_link(pattern, ctx_b, ctx_a, tr, size, &c->back_tx, &c->back_rx);
  pthread_t t;
  if (pthread_create(&t, NULL, kind == 0 ? thr_sender : lat_echo, c)) bench_die("pthread_create");
  long long units = 0;
  if (kind == 0) {
    double med = 0, cpu = 0, d = thr_receive(c, pl, &units, &med, &cpu);
    atomic_store(&c->done, 1);
    pthread_join(t, NULL);
    double rate = d > 0 ? (double)units / d : 0;
    if (fixed_work_form) printf("METRIC id=%s kmsgs_s=%.1f\n", id, rate / 1e3);
    else printf("METRIC id=%s msgs_s=%.1f mb_s=%.2f msgs_s_med=%.1f cpu_us=%.4f msgs=%lld secs=%.4f\n",
           id, rate, rate * (double)size / 1e6, med, units ? cpu * 1e6 / (double)units : 0.0,
           units, d);
    tot->secs += d;
    tot->msgs += units;
  } else {
    histo *h = (histo *)calloc(1, sizeof *h);
    if (!h) bench_die("calloc");
    double cpu = 0, d = lat_initiate(c, pl, &units, h, &cpu);
    pthread_join(t, NULL);
    if (fixed_work_form)
      printf("METRIC id=%s us=%.2f\n", id, units ? d / (double)units / 2.0 * 1e6 : 0.0);
    else printf("METRIC id=%s us=%.3f p50_us=%.3f p99_us=%.3f cpu_us=%.4f rounds=%lld secs=%.4f\n", id,
           units ? d / (double)units / 2.0 * 1e6 : 0.0, histo_pct(h, 0.5), histo_pct(h, 0.99),
           units ? cpu * 1e6 / (double)units : 0.0, units, d);
    free(h);
    tot->secs += d;
    tot->msgs += 2 * units;
  }
  fflush(stdout);
  close_socket(c->tx.s);
  close_socket(c->rx.s);
  if (c->two_links) {
    close_socket(c->back_tx.s);
    close_socket(c->back_rx.s);
  }
  zmq_ctx_term(ctx_a);
  if (ctx_b != ctx_a) zmq_ctx_term(ctx_b);
  free(c);
}

/* ---------------------------------------------------------------------- */

static void finish(const totals *tot) {
  int major, minor, patch;
  zmq_version(&major, &minor, &patch);
  char extra[64];
  snprintf(extra, sizeof extra, "zmq=%d.%d.%d", major, minor, patch);
  bench_result("zmq", 2, tot->msgs, tot->secs, extra);
}

/* The harness's fixed-work form. */
static int legacy(int argc, char **argv) {
  bench_args a = bench_parse(argc, argv, 1, "SIZE [THREADS [FILTER]]", 200000, 2);
  fixed_work_form = 1;
  const char *filter = argc > 3 ? argv[3] : "";
  static const int pats[] = {P_PAIR, P_PUSHPULL};
  static const size_t lat_sizes[] = {64, 1024, 65536};
  totals tot = {0, 0};
  char id[96];
  for (size_t p = 0; p < 2; p++)
    for (int t = 0; t < 3; t++)
      for (size_t k = 0; k < NSIZES; k++) {
        snprintf(id, sizeof id, "thr.%s.%s.%zu", pattern_names[pats[p]], transports[t], sizes[k]);
        if (!strstr(id, filter)) continue;
        long long count = a.size / (long long)(1 + sizes[k] / 4096);
        plan_t pl = {0, 1e9, count < 100 ? 100 : count};
        run_cell(0, pats[p], t, sizes[k], 1, &pl, id, &tot);
      }
  for (int t = 0; t < 3; t++)
    for (size_t k = 0; k < 3; k++) {
      snprintf(id, sizeof id, "lat.pair.%s.%zu", transports[t], lat_sizes[k]);
      if (!strstr(id, filter)) continue;
      long long rounds = a.size / 20 / (long long)(1 + lat_sizes[k] / 4096);
      plan_t pl = {0, 1e9, rounds < 50 ? 50 : rounds};
      run_cell(1, P_PAIR, t, lat_sizes[k], 1, &pl, id, &tot);
    }
  finish(&tot);
  return 0;
}

static void usage(const char *prog) {
  printf("usage: %s [--secs S] [--warmup S] [--pin TX,RX[,IO]] [--trace S] [--list] CELL...\n"
         "       %s SIZE [THREADS [FILTER]]\n"
         "CELL: glob over KIND.PATTERN.TRANSPORT.SIZE.ioN, e.g. 'thr.pair.tcp.*.io1'\n",
         prog, prog);
}

int main(int argc, char **argv) {
  const char *skip = getenv("BENCH_ZMQ_SKIP");
  if (skip && *skip) skip_seq = bench_parse_count(skip, "BENCH_ZMQ_SKIP");
  if (argc > 1 && argv[1][0] >= '0' && argv[1][0] <= '9') return legacy(argc, argv);
  plan_t pl = {0.1, 0.4, 0};
  int list = 0, first = argc;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--secs") && i + 1 < argc) pl.secs = atof(argv[++i]);
    else if (!strcmp(argv[i], "--warmup") && i + 1 < argc) pl.warmup = atof(argv[++i]);
    else if (!strcmp(argv[i], "--trace") && i + 1 < argc) trace_every = atof(argv[++i]);
    else if (!strcmp(argv[i], "--pin") && i + 1 < argc) {
      int n = sscanf(argv[++i], "%d,%d,%d", &pin_cpu[0], &pin_cpu[1], &pin_cpu[2]);
      if (n < 2) {
        usage(argv[0]);
        return 2;
      }
    } else if (!strcmp(argv[i], "--list")) list = 1;
    else if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
      usage(argv[0]);
      return 0;
    } else if (argv[i][0] == '-') {
      usage(argv[0]);
      return 2;
    } else {
      first = i;
      break;
    }
  }
  if (first == argc && !list) {
    usage(argv[0]);
    return 2;
  }
  totals tot = {0, 0};
  int matched = 0;
  char id[96];
  for (int k = 0; k < 2; k++)
    for (int p = 0; p < NPATTERNS; p++)
      for (int t = 0; t < 3; t++)
        for (size_t z = 0; z < NSIZES; z++)
          for (int io = 1; io <= 2; io++) {
            snprintf(id, sizeof id, "%s.%s.%s.%zu.io%d", kinds[k], pattern_names[p], transports[t],
                     sizes[z], io);
            int want = first == argc;
            for (int i = first; i < argc && !want; i++) want = !fnmatch(argv[i], id, 0);
            if (!want) continue;
            matched++;
            if (list) printf("%s\n", id);
            else run_cell(k, p, t, sizes[z], io, &pl, id, &tot);
          }
  if (list) return 0;
  if (!matched) {
    fprintf(stderr, "bench: zmq: no cell matches\n");
    return 2;
  }
  finish(&tot);
  return 0;
}
