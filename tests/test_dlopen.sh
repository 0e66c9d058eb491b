#!/usr/bin/env bash
# dlopen/dlclose under LD_PRELOAD=libbrisk.so.
#
# Builds, in a temporary directory, a small C plugin and a small C++ plugin
# (std::string, std::vector, std::map, a static object destroyed at dlclose)
# and a host program that does not link brisk. The host runs with
# LD_PRELOAD=$BRISKTEST_LIB and, while two threads of its own allocate and free,
# repeatedly dlopens the plugins (RTLD_LOCAL and RTLD_GLOBAL), frees in the
# host memory the plugins allocated and vice versa, reallocs across the
# boundary, lets a plugin thread allocate blocks the host frees, keeps a
# plugin's block alive across dlclose and frees it afterwards, and dlcloses.
# It also dlopens libbrisk.so itself (already loaded) and dlcloses it.
# Every block is pattern-checked; every block must be owned by brisk
# (brisk_owns, found with dlsym), proving the preload took effect; stderr
# must not contain "brisk: error" or "brisk: warning".
set -euo pipefail
: "${BRISKTEST_LIB:?BRISKTEST_LIB must point to libbrisk.so}"
CC=${CC:-cc}
CXX=${CXX:-c++}
BRISK=$BRISKTEST_LIB
# the programs run without the test harness's variables (brisk reports
# unknown BRISK_* names); options a user sets (BRISK_VERBOSE...) pass through
unset BRISKTEST_LIB BRISKTEST_SOURCE_DIR BRISKTEST_BUILD_DIR BRISKTEST_BIN_DIR
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/plugin.c" <<'EOF'
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
static void *table[100];
static __thread void *tls_ptr;
void plugin_fill(unsigned char *p, size_t n) { for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(((uintptr_t)p >> 4) + i * 7 + n); }
int plugin_check(const unsigned char *p, size_t n) { for (size_t i = 0; i < n; i++) if (p[i] != (unsigned char)(((uintptr_t)p >> 4) + i * 7 + n)) return 0; return 1; }
__attribute__((constructor)) static void init(void) {
  for (int i = 0; i < 100; i++) { table[i] = malloc(16 + (size_t)i * 40); plugin_fill(table[i], 16 + (size_t)i * 40); }
}
__attribute__((destructor)) static void fini(void) {
  for (int i = 0; i < 100; i++) { if (!plugin_check(table[i], 16 + (size_t)i * 40)) abort(); free(table[i]); }
}
void *plugin_alloc(size_t n) { void *p = malloc(n); if (p) plugin_fill(p, n); return p; }
int plugin_free(void *p, size_t n) { if (!plugin_check(p, n)) return 0; free(p); return 1; }
void *plugin_realloc(void *p, size_t n) { return realloc(p, n); }
char *plugin_strdup(const char *s) { return strdup(s); }
int plugin_tls(size_t n) {
  free(tls_ptr);
  tls_ptr = malloc(n);
  if (!tls_ptr) return 0;
  memset(tls_ptr, 1, n);
  return 1;
}
void plugin_tls_release(void) { free(tls_ptr); tls_ptr = NULL; }
static void *thread_main(void *arg) {
  void **out = arg;
  for (int i = 0; i < 64; i++) {
    void *p = plugin_alloc(32 + (size_t)i * 100);
    void *q = malloc(1000);
    free(q);
    out[i] = p;
  }
  plugin_tls(500);
  plugin_tls_release();
  return NULL;
}
/* a thread inside the plugin allocates blocks that the host frees */
int plugin_thread_alloc(void **out) {
  pthread_t t;
  if (pthread_create(&t, NULL, thread_main, out)) return 0;
  pthread_join(t, NULL);
  return 1;
}
EOF

cat >"$tmp/cxxplugin.cpp" <<'EOF'
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <vector>
static std::string global_string(5000, 'g');          // destroyed at dlclose
static std::map<int, std::string> global_map = {{1, std::string(300, 'a')}, {2, "b"}};
extern "C" void *cxx_make(int n) {
  auto *v = new std::vector<std::string>();
  for (int i = 0; i < n; i++) v->push_back(std::string(static_cast<size_t>(i % 200), 'x') + std::to_string(i));
  std::map<std::string, std::unique_ptr<int[]>> m;
  for (int i = 0; i < n; i++) m[(*v)[static_cast<size_t>(i)]] = std::unique_ptr<int[]>(new int[static_cast<size_t>(i % 50 + 1)]);
  return v;
}
extern "C" long cxx_sum(void *p) {
  long s = 0;
  for (auto &x : *static_cast<std::vector<std::string> *>(p)) s += static_cast<long>(x.size());
  return s + static_cast<long>(global_string.size() + global_map.size());
}
extern "C" void cxx_destroy(void *p) { delete static_cast<std::vector<std::string> *>(p); }
extern "C" char *cxx_strdup(int n) { std::string s(static_cast<size_t>(n), 'z'); return strdup(s.c_str()); }
extern "C" void cxx_free(void *p) { std::free(p); }
EOF

cat >"$tmp/host.c" <<'EOF'
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static int (*owns)(const void *);
static void die(const char *what, const char *detail) {
  fprintf(stderr, "test_dlopen: FAIL: %s%s%s\n", what, detail ? ": " : "", detail ? detail : "");
  exit(1);
}
static void *sym(void *h, const char *name) {
  void *s = dlsym(h, name);
  if (!s) die("dlsym failed", name);
  return s;
}
static void must_own(const void *p, const char *what) {
  if (!p) die("allocation returned NULL", what);
  if (!owns(p)) die("block not owned by brisk (brisk_owns == 0)", what);
}
static void fill(unsigned char *p, size_t n) { for (size_t i = 0; i < n; i++) p[i] = (unsigned char)(((uintptr_t)p >> 4) + i * 7 + n); }
static int check(const unsigned char *p, size_t n) { for (size_t i = 0; i < n; i++) if (p[i] != (unsigned char)(((uintptr_t)p >> 4) + i * 7 + n)) return 0; return 1; }
static atomic_int stop;
static void *churn(void *arg) {
  unsigned char *keep[32] = {0};
  size_t sizes[32] = {0};
  unsigned char val[32] = {0};
  unsigned long n = (uintptr_t)arg;
  while (!atomic_load(&stop)) {
    unsigned j = (unsigned)(n * 2654435761u) % 32;
    if (keep[j]) {
      for (size_t i = 0; i < sizes[j]; i++)
        if (keep[j][i] != val[j]) die("block of the host's churn thread corrupted", NULL);
      free(keep[j]);
    }
    sizes[j] = 16 + (n * 7919) % 20000;
    val[j] = (unsigned char)n;
    keep[j] = malloc(sizes[j]);
    if (!keep[j]) die("malloc in churn thread returned NULL", NULL);
    memset(keep[j], val[j], sizes[j]);
    n++;
  }
  for (int i = 0; i < 32; i++) free(keep[i]);
  return NULL;
}
int main(int argc, char **argv) {
  if (argc < 5) die("usage: host plugin.so cxxplugin.so libbrisk.so cycles", NULL);
  const char *plugin = argv[1], *cxxplugin = argv[2], *brisk = argv[3];
  int cycles = atoi(argv[4]);
  owns = (int (*)(const void *))dlsym(RTLD_DEFAULT, "brisk_owns");
  if (!owns) die("brisk_owns not found: is LD_PRELOAD in effect?", dlerror());
  void *m = malloc(100);
  must_own(m, "malloc(100) in the host (is malloc replaced?)");
  free(m);
  pthread_t th[2];
  for (int i = 0; i < 2; i++) if (pthread_create(&th[i], NULL, churn, (void *)(uintptr_t)(i * 1000 + 1))) die("pthread_create", NULL);
  void *survivor = NULL;
  size_t survivor_n = 0;
  for (int c = 0; c < cycles; c++) {
    int mode = RTLD_NOW | (c % 2 ? RTLD_GLOBAL : RTLD_LOCAL);
    void *h = dlopen(plugin, mode);
    if (!h) die("dlopen(plugin)", dlerror());
    void *(*p_alloc)(size_t) = (void *(*)(size_t))sym(h, "plugin_alloc");
    int (*p_free)(void *, size_t) = (int (*)(void *, size_t))sym(h, "plugin_free");
    void *(*p_realloc)(void *, size_t) = (void *(*)(void *, size_t))sym(h, "plugin_realloc");
    char *(*p_strdup)(const char *) = (char *(*)(const char *))sym(h, "plugin_strdup");
    int (*p_thread)(void **) = (int (*)(void **))sym(h, "plugin_thread_alloc");
    int (*p_tls)(size_t) = (int (*)(size_t))sym(h, "plugin_tls");
    void (*p_tls_release)(void) = (void (*)(void))sym(h, "plugin_tls_release");
    /* plugin allocates, host frees */
    for (size_t n = 1; n <= 300000; n = n * 3 + 1) {
      unsigned char *p = p_alloc(n);
      must_own(p, "malloc in plugin");
      if (!check(p, n)) die("content of plugin block wrong in host", NULL);
      free(p);
    }
    /* host allocates, plugin frees */
    for (size_t n = 1; n <= 300000; n = n * 3 + 1) {
      unsigned char *p = malloc(n);
      must_own(p, "malloc in host");
      fill(p, n);
      if (!p_free(p, n)) die("content of host block wrong in plugin", NULL);
    }
    /* realloc across the boundary */
    unsigned char *r = malloc(100);
    fill(r, 100);
    unsigned char *r2 = p_realloc(r, 100000);
    must_own(r2, "realloc in plugin");
    for (int i = 0; i < 100; i++) if (r2[i] != (unsigned char)(((uintptr_t)r >> 4) + (size_t)i * 7 + 100)) die("realloc in plugin lost data", NULL);
    r = realloc(r2, 10);
    must_own(r, "realloc in host of a plugin block");
    free(r);
    char *s = p_strdup("a string duplicated inside the plugin");
    must_own(s, "strdup in plugin");
    if (strcmp(s, "a string duplicated inside the plugin")) die("strdup content", s);
    free(s);
    /* a thread of the plugin allocates, the host frees */
    void *out[64];
    if (!p_thread(out)) die("plugin thread", NULL);
    for (int i = 0; i < 64; i++) {
      must_own(out[i], "block from plugin thread");
      if (!check(out[i], 32 + (size_t)i * 100)) die("content of plugin thread block", NULL);
      free(out[i]);
    }
    if (!p_tls(1000)) die("plugin_tls", NULL);
    p_tls_release();
    /* a block of the plugin that outlives dlclose */
    if (survivor) {
      if (!check(survivor, survivor_n)) die("block allocated by an unloaded plugin was corrupted", NULL);
      free(survivor);
    }
    survivor_n = 1000 + (size_t)c * 37;
    survivor = p_alloc(survivor_n);
    must_own(survivor, "survivor");

    /* the C++ plugin */
    void *hx = dlopen(cxxplugin, RTLD_NOW | RTLD_LOCAL);
    if (!hx) die("dlopen(C++ plugin)", dlerror());
    void *(*x_make)(int) = (void *(*)(int))sym(hx, "cxx_make");
    long (*x_sum)(void *) = (long (*)(void *))sym(hx, "cxx_sum");
    void (*x_destroy)(void *) = (void (*)(void *))sym(hx, "cxx_destroy");
    char *(*x_strdup)(int) = (char *(*)(int))sym(hx, "cxx_strdup");
    void (*x_free)(void *) = (void (*)(void *))sym(hx, "cxx_free");
    void *v = x_make(2000);
    long sum = x_sum(v);
    long expect = 5000 + 2;
    for (int i = 0; i < 2000; i++) { char b[16]; expect += i % 200 + snprintf(b, sizeof b, "%d", i); }
    if (sum != expect) die("C++ plugin computed a wrong sum", NULL);
    x_destroy(v);
    char *z = x_strdup(777);
    must_own(z, "strdup in C++ plugin");
    if (strlen(z) != 777) die("C++ plugin strdup length", NULL);
    free(z);
    z = malloc(4096);
    x_free(z);
    if (dlclose(hx)) die("dlclose(C++ plugin)", dlerror());
    if (dlclose(h)) die("dlclose(plugin)", dlerror());
  }
  if (!check(survivor, survivor_n)) die("block allocated by an unloaded plugin was corrupted", NULL);
  free(survivor);
  /* dlopen of brisk itself (already loaded by LD_PRELOAD) */
  void *hb = dlopen(brisk, RTLD_NOW | RTLD_LOCAL);
  if (!hb) die("dlopen(libbrisk.so)", dlerror());
  void *(*bm)(size_t) = (void *(*)(size_t))sym(hb, "brisk_malloc");
  void (*bf)(void *) = (void (*)(void *))sym(hb, "brisk_free");
  void *b = bm(123);
  must_own(b, "brisk_malloc via dlopen handle");
  free(b);
  b = malloc(321);
  bf(b);
  if (dlclose(hb)) die("dlclose(libbrisk.so)", dlerror());
  b = malloc(50);
  must_own(b, "malloc after dlclose(libbrisk.so)");
  free(b);
  atomic_store(&stop, 1);
  for (int i = 0; i < 2; i++) pthread_join(th[i], NULL);
  printf("test_dlopen: %d dlopen/dlclose cycles of a C and a C++ plugin: OK\n", cycles);
  return 0;
}
EOF
$CC -O2 -fPIC -shared -o "$tmp/libplugin.so" "$tmp/plugin.c" -lpthread
$CXX -O2 -fPIC -shared -o "$tmp/libcxxplugin.so" "$tmp/cxxplugin.cpp"
$CC -O2 -o "$tmp/host" "$tmp/host.c" -ldl -lpthread

cycles=${BRISKTEST_DLOPEN_CYCLES:-200}
start=$(date +%s%N)
set +e
LD_PRELOAD="$BRISK" "$tmp/host" "$tmp/libplugin.so" "$tmp/libcxxplugin.so" "$BRISK" "$cycles" \
  >"$tmp/out" 2>"$tmp/err"
rc=$?
set -e
end=$(date +%s%N)
cat "$tmp/out"
cat "$tmp/err" >&2
if [ $rc -ne 0 ]; then
  if [ $rc -gt 128 ]; then
    echo "test_dlopen: FAIL: host killed by signal $((rc - 128)) (reproduce: see the commands in $0)" >&2
  else
    echo "test_dlopen: FAIL: host exited with status $rc" >&2
  fi
  exit 1
fi
if grep -qE "brisk: (error|warning)" "$tmp/err"; then
  echo "test_dlopen: FAIL: brisk reported an error or a warning (above)" >&2
  exit 1
fi
ms=$(((end - start) / 1000000))
printf 'test_dlopen: PASS (%d.%03d s)\n' $((ms / 1000)) $((ms % 1000))
