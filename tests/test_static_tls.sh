#!/usr/bin/env bash
# dlopen of a shared object that links libbrisk.so, from a program that does
# not link brisk: brisk's TLS must be small enough for glibc's static TLS
# surplus (no "cannot allocate memory in static TLS block").
#
# 1. readelf: libbrisk.so's PT_TLS segment is at most 64 bytes ("a pointer or
#    two", initial-exec). The size and the STATIC_TLS flag are printed.
# 2. A host program (not linked to brisk, not preloaded) mallocs with glibc,
#    starts a thread, then dlopens plugin.so (linked with -lbrisk):
#      a. right away;
#      b. in a second run, after first dlopening another library that takes
#         1 KiB of static TLS (about 600 bytes of glibc's surplus remain).
#    dlopen must succeed. The plugin then uses the prefixed API only:
#    brisk_malloc/calloc/realloc/aligned_alloc/free, brisk_owns (true for its
#    blocks, false for glibc's), brisk_usable_size; on the main thread, on the
#    thread that existed before the dlopen, on new threads, and across
#    threads. glibc's free() of memory malloc'ed before and after the dlopen
#    still works. All threads exit, the plugin is dlclosed, the host exits 0.
# 3. dlclose while a thread that used brisk is alive: the plugin (and with it
#    libbrisk.so, which nothing else holds) is dlclosed, then that thread
#    exits. Whatever brisk registered for thread exit (pthread key destructor,
#    TLS destructor) must not point into the unloaded library: brisk must
#    stay loaded (-z nodelete) or unregister itself. Reported separately.
# Without readelf, parts 2 and 3 run and the test then exits 77 (skipped);
# with CI=true a missing tool is a failure.
set -euo pipefail
: "${BRISKTEST_LIB:?BRISKTEST_LIB must point to libbrisk.so}"
CC=${CC:-cc}
BRISK=$BRISKTEST_LIB
libdir=$(cd "$(dirname "$BRISKTEST_LIB")" && pwd)
incdir=${BRISKTEST_SOURCE_DIR:-$(dirname "$0")/..}/include
# the programs run without the test harness's variables (brisk reports
# unknown BRISK_* names); options a user sets (BRISK_VERBOSE...) pass through
unset BRISKTEST_LIB BRISKTEST_SOURCE_DIR BRISKTEST_BUILD_DIR BRISKTEST_BIN_DIR
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_static_tls: FAIL: $*" >&2; exit 1; }
have_readelf=0
if command -v readelf >/dev/null; then
  have_readelf=1
elif [ "${CI:-}" = true ]; then
  fail "readelf is not installed (binutils); with CI=true every tool the tests use must be"
fi

# --- 1. the size of brisk's TLS ----------------------------------------------
if [ $have_readelf = 1 ]; then
  phdrs=$(readelf -lW "$BRISK") || fail "readelf -lW $BRISK failed"
  tls_line=$(echo "$phdrs" | awk '$1 == "TLS"')
  if [ -n "$tls_line" ]; then
    memsz=$(echo "$tls_line" | awk '{print strtonum($6)}' 2>/dev/null || true)
    [ -n "$memsz" ] || memsz=$(( $(echo "$tls_line" | awk '{print $6}') ))
    static_flag=$(readelf -dW "$BRISK" | grep -c STATIC_TLS || true)
    echo "test_static_tls: libbrisk.so PT_TLS MemSiz = $memsz bytes; STATIC_TLS flag: $([ "$static_flag" -gt 0 ] && echo yes || echo no)"
    [ "$memsz" -le 64 ] || fail "libbrisk.so has $memsz bytes of TLS (PT_TLS MemSiz); it must stay a pointer or two (<= 64 bytes here)"
  else
    echo "test_static_tls: libbrisk.so has no PT_TLS segment"
  fi
fi

# --- 2. dlopen from a program that does not link brisk -----------------------
cat >"$tmp/plugin.c" <<'EOF'
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include "brisk.h"
#define CHECK(c, msg) do { if (!(c)) { fprintf(stderr, "test_static_tls: FAIL (plugin): %s\n", msg); return 0; } } while (0)
/* brisk_* only; returns 1 on success */
int plugin_run(const void *glibc_block, void **out, int nout) {
  CHECK(!brisk_owns(glibc_block), "brisk_owns() is true for a block from glibc's malloc");
  void *keep[64];
  for (int i = 0; i < 64; i++) {
    size_t n = (size_t)1 << (i % 21);
    keep[i] = (i % 3 == 0) ? brisk_calloc(1, n) : brisk_malloc(n);
    CHECK(keep[i] != NULL, "brisk_malloc/brisk_calloc returned NULL");
    CHECK(((uintptr_t)keep[i] & 15) == 0, "block not 16-byte aligned");
    CHECK(brisk_owns(keep[i]), "brisk_owns() is false for brisk's own block");
    CHECK(brisk_usable_size(keep[i]) >= n, "brisk_usable_size() < requested size");
    memset(keep[i], i, n);
  }
  for (int i = 0; i < 64; i++) {
    size_t n = (size_t)1 << (i % 21);
    unsigned char *p = brisk_realloc(keep[i], n * 2 + 1);
    CHECK(p != NULL, "brisk_realloc returned NULL");
    for (size_t k = 0; k < n; k++) CHECK(p[k] == (unsigned char)i, "brisk_realloc lost data");
    brisk_free(p);
  }
  void *a = brisk_aligned_alloc(4096, 10000);
  CHECK(a != NULL && ((uintptr_t)a & 4095) == 0, "brisk_aligned_alloc(4096) failed or misaligned");
  brisk_free(a);
  for (int i = 0; i < nout; i++) {
    out[i] = brisk_malloc(100 + (size_t)i);
    CHECK(out[i] != NULL, "brisk_malloc returned NULL");
    memset(out[i], 0xab, 100 + (size_t)i);
  }
  return 1;
}
int plugin_free_all(void **blocks, int n) {
  for (int i = 0; i < n; i++) {
    CHECK(brisk_owns(blocks[i]), "brisk_owns() is false for a block from another thread");
    const unsigned char *c = blocks[i];
    for (int k = 0; k < 100 + i; k++) CHECK(c[k] == 0xab, "block content changed");
    brisk_free(blocks[i]);
  }
  return 1;
}
EOF

cat >"$tmp/filler.c" <<'EOF'
__attribute__((tls_model("initial-exec"))) __thread char filler_tls[1024];
char *filler_get(void) { return filler_tls; }
EOF

cat >"$tmp/host.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
typedef int (*run_fn)(const void *, void **, int);
typedef int (*free_fn)(void **, int);
static run_fn run;
static free_fn free_all;
static void *glibc_block;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int stage; /* 1: plugin loaded, thread may use it; 2: used; 3: plugin closed, exit */
static void *xblocks[32];
static void die(const char *m, const char *d) { fprintf(stderr, "test_static_tls: FAIL: %s%s%s\n", m, d ? ": " : "", d ? d : ""); exit(1); }
static void wait_stage(int s) { pthread_mutex_lock(&mu); while (stage < s) pthread_cond_wait(&cv, &mu); pthread_mutex_unlock(&mu); }
static void set_stage(int s) { pthread_mutex_lock(&mu); stage = s; pthread_cond_broadcast(&cv); pthread_mutex_unlock(&mu); }
/* a thread that exists before brisk is loaded */
static void *early_thread(void *arg) {
  (void)arg;
  void *g = malloc(1000); /* glibc */
  wait_stage(1);
  void *mine[8];
  if (!run(glibc_block, mine, 8)) die("plugin_run on a thread created before the dlopen", NULL);
  if (!run(g, xblocks, 32)) die("plugin_run on a thread created before the dlopen", NULL);
  if (!free_all(mine, 8)) die("plugin_free_all", NULL);
  free(g);
  set_stage(2);
  wait_stage(3); /* exit only after the plugin (and brisk) were dlclosed */
  return NULL;
}
static void *new_thread(void *arg) {
  void *mine[16];
  if (!run(glibc_block, mine, 16)) die("plugin_run on a new thread", NULL);
  if (!free_all(mine, 16)) die("plugin_free_all on a new thread", NULL);
  return arg;
}
int main(int argc, char **argv) {
  if (argc < 3) die("usage: host plugin.so basic|dlclose [filler.so]", NULL);
  const char *plugin = argv[1], *filler = argc > 3 ? argv[3] : NULL;
  int dlclose_first = !strcmp(argv[2], "dlclose");
  void *before[16];
  for (int i = 0; i < 16; i++) { before[i] = malloc(32 << i); if (!before[i]) die("malloc", NULL); memset(before[i], 1, 32 << i); }
  glibc_block = before[3];
  pthread_t early;
  if (pthread_create(&early, NULL, early_thread, NULL)) die("pthread_create", NULL);
  if (filler) {
    void *hf = dlopen(filler, RTLD_NOW);
    if (!hf) die("dlopen of the 1 KiB static TLS filler failed (test setup)", dlerror());
  }
  void *h = dlopen(plugin, RTLD_NOW | RTLD_LOCAL);
  if (!h) die("dlopen of a library linked with libbrisk failed", dlerror());
  run = (run_fn)dlsym(h, "plugin_run");
  free_all = (free_fn)dlsym(h, "plugin_free_all");
  if (!run || !free_all) die("dlsym", dlerror());
  void *mine[32];
  if (!run(glibc_block, mine, 32)) die("plugin_run on the main thread", NULL);
  set_stage(1);
  pthread_t t[4];
  for (int i = 0; i < 4; i++) if (pthread_create(&t[i], NULL, new_thread, NULL)) die("pthread_create", NULL);
  for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
  wait_stage(2);
  /* blocks the early thread allocated are freed here, on another thread */
  if (!free_all(xblocks, 32)) die("plugin_free_all of another thread's blocks", NULL);
  if (!free_all(mine, 32)) die("plugin_free_all on the main thread", NULL);
  /* glibc's malloc and free still work, for memory from before and after the dlopen */
  for (int i = 0; i < 16; i++) free(before[i]);
  for (int i = 0; i < 1000; i++) { void *p = malloc((size_t)i * 13 + 1); if (!p) die("malloc after dlopen", NULL); free(p); }
  if (dlclose_first) {
    if (dlclose(h)) die("dlclose", dlerror());
    printf("test_static_tls: dlclose done; now the thread that used brisk exits\n");
    fflush(stdout);
    set_stage(3);
    pthread_join(early, NULL); /* the thread that used brisk exits after the dlclose */
    printf("test_static_tls: a thread that used brisk exited after dlclose of the brisk-linked library: OK\n");
  } else {
    set_stage(3);
    pthread_join(early, NULL);
    if (dlclose(h)) die("dlclose", dlerror());
    printf("test_static_tls: dlopen of a brisk-linked library%s, use on 6 threads, dlclose: OK\n",
           filler ? " after a 1 KiB static-TLS library" : "");
  }
  return 0;
}
EOF

$CC -O2 -fPIC -shared -I"$incdir" -o "$tmp/plugin.so" "$tmp/plugin.c" -L"$libdir" -lbrisk -Wl,-rpath,"$libdir"
$CC -O2 -fPIC -shared -o "$tmp/filler.so" "$tmp/filler.c"
$CC -O2 -o "$tmp/host" "$tmp/host.c" -ldl -lpthread
# the host must not link brisk
if [ $have_readelf = 1 ] && readelf -dW "$tmp/host" | grep -q brisk; then fail "test setup: host links brisk"; fi

run_host() {
  local label=$1; shift
  set +e
  env -u LD_PRELOAD "$tmp/host" "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  set -e
  cat "$tmp/out"; cat "$tmp/err" >&2
  if [ $rc -ne 0 ]; then
    if [ $rc -gt 128 ]; then
      echo "test_static_tls: FAIL: $label: host killed by signal $((rc - 128))" >&2
    else
      echo "test_static_tls: FAIL: $label: host exited with status $rc" >&2
    fi
    return 1
  fi
  if grep -qE "brisk: (error|warning)" "$tmp/err"; then
    echo "test_static_tls: FAIL: $label: brisk reported an error or a warning" >&2
    return 1
  fi
  return 0
}
failures=0
run_host "plain dlopen" "$tmp/plugin.so" basic || failures=$((failures + 1))
run_host "dlopen after a 1 KiB static-TLS library" "$tmp/plugin.so" basic "$tmp/filler.so" || failures=$((failures + 1))
run_host "thread exit after dlclose of libbrisk" "$tmp/plugin.so" dlclose || failures=$((failures + 1))
if [ $failures -ne 0 ]; then
  echo "test_static_tls: $failures of 3 runs failed" >&2
  exit 1
fi
if [ $have_readelf = 0 ]; then
  echo "test_static_tls: SKIPPED: the dlopen runs passed; readelf is not installed, so the size of brisk's TLS was not checked"
  exit 77
fi
echo "test_static_tls: PASS"
