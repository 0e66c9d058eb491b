/* A real client: libzmq throughput and latency.
 *
 * The allocator under test serves libzmq itself (message bodies above 33 B,
 * encoder and decoder buffers, pipes) on both ends: for inproc the message
 * allocated by the sending thread is freed by the receiving one; for ipc
 * and tcp each end has its own context and I/O thread, as two processes
 * would.
 *   throughput: PAIR and PUSH/PULL over inproc, ipc, tcp 127.0.0.1, message
 *               sizes 64 B .. 256 KiB; one thread sends, the main thread
 *               receives and checks a sequence number in every message.
 *   latency:    PAIR ping-pong over each transport for 64 B, 1 KiB and
 *               64 KiB; half the mean round trip.
 *
 *   bench_zmq SIZE [THREADS [FILTER]]   SIZE = 64-byte messages per config;
 *                                       larger sizes send SIZE/(1+size/4096)
 *                                       THREADS ignored; FILTER selects
 *                                       configs whose id contains it
 */
#include "bench_common.h"
#include <stdatomic.h>
#include <unistd.h>
#include <zmq.h>

static const size_t sizes[] = {64, 256, 1024, 65536, 131072, 262144};
static const size_t lat_sizes[] = {64, 1024, 65536};
static const char *transports[] = {"inproc", "ipc", "tcp"};

#define ZCHECK(x)                                                                   \
  do {                                                                              \
    if ((x) < 0) {                                                                  \
      fprintf(stderr, "bench: zmq: %s failed: %s\n", #x, zmq_strerror(zmq_errno())); \
      exit(2);                                                                      \
    }                                                                               \
  } while (0)

typedef struct {
  void *ctx;
  char endpoint[256];
  int type;
  size_t size;
  long long count;
  _Atomic int done;
} peer_args;

static int config_no;

/* Binds sock on transport; writes the connect endpoint. */
static void bind_to(void *sock, const char *transport, char *endpoint, size_t len) {
  if (!strcmp(transport, "inproc")) {
    snprintf(endpoint, len, "inproc://bench-%d", config_no);
  } else if (!strcmp(transport, "ipc")) {
    snprintf(endpoint, len, "ipc:///tmp/brisk-bench-zmq-%d-%d", (int)getpid(), config_no);
  } else {
    snprintf(endpoint, len, "tcp://127.0.0.1:*");
  }
  ZCHECK(zmq_bind(sock, endpoint));
  size_t l = len;
  ZCHECK(zmq_getsockopt(sock, ZMQ_LAST_ENDPOINT, endpoint, &l));
}

static void close_socket(void *s) {
  int zero = 0;
  zmq_setsockopt(s, ZMQ_LINGER, &zero, sizeof zero);
  zmq_close(s);
}

static void *sender(void *arg) {
  peer_args *a = (peer_args *)arg;
  void *s = zmq_socket(a->ctx, a->type);
  if (!s) bench_die("zmq_socket");
  ZCHECK(zmq_connect(s, a->endpoint));
  for (long long i = 0; i < a->count; i++) {
    zmq_msg_t m;
    ZCHECK(zmq_msg_init_size(&m, a->size));
    unsigned char *d = (unsigned char *)zmq_msg_data(&m);
    uint64_t seq = (uint64_t)i;
    memcpy(d, &seq, 8);
    d[a->size - 1] = (unsigned char)(i * 7);
    ZCHECK(zmq_msg_send(&m, s, 0));
  }
  unsigned spins = 0;
  while (!atomic_load(&a->done)) bench_pause(&spins); /* keep the pipe until all arrived */
  close_socket(s);
  return NULL;
}

static double throughput(const char *pattern, const char *transport, size_t size, long long count) {
  int pair = !strcmp(pattern, "pair");
  void *ctx_rx = zmq_ctx_new();
  void *ctx_tx = strcmp(transport, "inproc") ? zmq_ctx_new() : ctx_rx;
  void *rx = zmq_socket(ctx_rx, pair ? ZMQ_PAIR : ZMQ_PULL);
  peer_args a;
  memset(&a, 0, sizeof a);
  bind_to(rx, transport, a.endpoint, sizeof a.endpoint);
  a.ctx = ctx_tx;
  a.type = pair ? ZMQ_PAIR : ZMQ_PUSH;
  a.size = size;
  a.count = count;
  atomic_init(&a.done, 0);
  pthread_t t;
  if (pthread_create(&t, NULL, sender, &a)) bench_die("pthread_create");
  double first = 0, last = 0;
  for (long long i = 0; i < count; i++) {
    zmq_msg_t m;
    ZCHECK(zmq_msg_init(&m));
    ZCHECK(zmq_msg_recv(&m, rx, 0));
    if (i == 0) first = bench_now();
    const unsigned char *d = (const unsigned char *)zmq_msg_data(&m);
    uint64_t seq;
    memcpy(&seq, d, 8);
    BENCH_CHECK(zmq_msg_size(&m) == size && seq == (uint64_t)i && d[size - 1] == (unsigned char)(i * 7),
                "zmq: %s %s message %lld of %zu B corrupted", pattern, transport, i, size);
    zmq_msg_close(&m);
  }
  last = bench_now();
  atomic_store(&a.done, 1);
  pthread_join(t, NULL);
  close_socket(rx);
  zmq_ctx_term(ctx_rx);
  if (ctx_tx != ctx_rx) zmq_ctx_term(ctx_tx);
  config_no++;
  return last - first;
}

static void *echo(void *arg) {
  peer_args *a = (peer_args *)arg;
  void *s = zmq_socket(a->ctx, ZMQ_PAIR);
  ZCHECK(zmq_connect(s, a->endpoint));
  for (long long i = 0; i < a->count; i++) {
    zmq_msg_t m;
    ZCHECK(zmq_msg_init(&m));
    ZCHECK(zmq_msg_recv(&m, s, 0));
    ZCHECK(zmq_msg_send(&m, s, 0));
  }
  unsigned spins = 0;
  while (!atomic_load(&a->done)) bench_pause(&spins);
  close_socket(s);
  return NULL;
}

static double latency(const char *transport, size_t size, long long rounds, double *secs) {
  void *ctx_a = zmq_ctx_new();
  void *ctx_b = strcmp(transport, "inproc") ? zmq_ctx_new() : ctx_a;
  void *s = zmq_socket(ctx_a, ZMQ_PAIR);
  peer_args a;
  memset(&a, 0, sizeof a);
  bind_to(s, transport, a.endpoint, sizeof a.endpoint);
  a.ctx = ctx_b;
  a.size = size;
  a.count = rounds + 1;
  atomic_init(&a.done, 0);
  pthread_t t;
  if (pthread_create(&t, NULL, echo, &a)) bench_die("pthread_create");
  double t0 = 0;
  for (long long i = 0; i <= rounds; i++) {
    if (i == 1) t0 = bench_now(); /* round 0 waits for the connection */
    zmq_msg_t m;
    ZCHECK(zmq_msg_init_size(&m, size));
    unsigned char *d = (unsigned char *)zmq_msg_data(&m);
    uint64_t seq = (uint64_t)i;
    memcpy(d, &seq, 8);
    ZCHECK(zmq_msg_send(&m, s, 0));
    ZCHECK(zmq_msg_init(&m));
    ZCHECK(zmq_msg_recv(&m, s, 0));
    memcpy(&seq, zmq_msg_data(&m), 8);
    BENCH_CHECK(zmq_msg_size(&m) == size && seq == (uint64_t)i, "zmq: latency echo %lld corrupted", i);
    zmq_msg_close(&m);
  }
  double d = bench_now() - t0;
  atomic_store(&a.done, 1);
  pthread_join(t, NULL);
  close_socket(s);
  zmq_ctx_term(ctx_a);
  if (ctx_b != ctx_a) zmq_ctx_term(ctx_b);
  config_no++;
  *secs += d;
  return d / (double)rounds / 2.0 * 1e6;
}

int main(int argc, char **argv) {
  bench_args a = bench_parse(argc, argv, 1, "SIZE [THREADS [FILTER]]", 200000, 2);
  const char *filter = argc > 3 ? argv[3] : "";
  static const char *patterns[] = {"pair", "pushpull"};
  double secs = 0;
  long long msgs = 0;
  char id[96];
  for (size_t p = 0; p < 2; p++)
    for (size_t t = 0; t < 3; t++)
      for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        snprintf(id, sizeof id, "thr.%s.%s.%zu", patterns[p], transports[t], sizes[k]);
        if (!strstr(id, filter)) continue;
        long long count = a.size / (long long)(1 + sizes[k] / 4096);
        if (count < 100) count = 100;
        double d = throughput(patterns[p], transports[t], sizes[k], count);
        secs += d;
        msgs += count;
        printf("METRIC id=%s kmsgs_s=%.1f\n", id, d > 0 ? (double)(count - 1) / d / 1e3 : 0.0);
      }
  for (size_t t = 0; t < 3; t++)
    for (size_t k = 0; k < sizeof lat_sizes / sizeof lat_sizes[0]; k++) {
      snprintf(id, sizeof id, "lat.pair.%s.%zu", transports[t], lat_sizes[k]);
      if (!strstr(id, filter)) continue;
      long long rounds = a.size / 20 / (long long)(1 + lat_sizes[k] / 4096);
      if (rounds < 50) rounds = 50;
      double us = latency(transports[t], lat_sizes[k], rounds, &secs);
      msgs += 2 * rounds;
      printf("METRIC id=%s us=%.2f\n", id, us);
    }
  int major, minor, patch;
  zmq_version(&major, &minor, &patch);
  char extra[64];
  snprintf(extra, sizeof extra, "zmq=%d.%d.%d", major, minor, patch);
  bench_result("zmq", 2, msgs, secs, extra);
  return 0;
}
