#!/usr/bin/env bash
# No pthread key left for brisk: a program takes every key there is
# (PTHREAD_KEYS_MAX), then dlopens libbrisk.so and allocates with it on a
# thread of its own. brisk must say so once ("brisk: warning: no pthread
# key left"), keep working, and leave the program's keys alone: the thread's
# value in the program's first key stays what the program stored, and that
# key's destructor gets that value at the thread's exit (brisk once set the
# key it never got, which is the program's key 0).
set -euo pipefail
: "${BRISKTEST_LIB:?BRISKTEST_LIB must point to libbrisk.so}"
CC=${CC:-cc}
LIB=$BRISKTEST_LIB
unset BRISKTEST_LIB BRISKTEST_SOURCE_DIR BRISKTEST_BUILD_DIR BRISKTEST_BIN_DIR
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

cat >"$tmp/keys.c" <<'EOF'
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
static pthread_key_t mine;
static void *(*b_malloc)(size_t);
static void (*b_free)(void *);
static void *dtor_got = NULL;
static void my_dtor(void *v) { dtor_got = v; }
static void *body(void *arg) {
  (void)arg;
  pthread_setspecific(mine, (void *)0x1234);
  for (int i = 0; i < 1000; i++) {
    char *p = b_malloc(16 + (size_t)i * 8);
    if (p == NULL) { printf("keys: FAIL: brisk_malloc returned NULL\n"); exit(1); }
    memset(p, i, 16 + (size_t)i * 8);
    b_free(p);
  }
  void *now = pthread_getspecific(mine);
  if (now != (void *)0x1234) { printf("keys: FAIL: the program's key now holds %p, not 0x1234\n", now); exit(1); }
  return NULL;
}
int main(int argc, char **argv) {
  if (argc != 2) return 2;
  if (pthread_key_create(&mine, my_dtor) != 0) { printf("keys: FAIL: no first key\n"); return 1; }
  int n = 0;
  pthread_key_t k;
  while (pthread_key_create(&k, NULL) == 0) n++;
  void *lib = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
  if (!lib) { printf("keys: FAIL: dlopen: %s\n", dlerror()); return 1; }
  b_malloc = (void *(*)(size_t))dlsym(lib, "brisk_malloc");
  b_free = (void (*)(void *))dlsym(lib, "brisk_free");
  if (!b_malloc || !b_free) { printf("keys: FAIL: no brisk_malloc/brisk_free\n"); return 1; }
  for (int round = 0; round < 3; round++) {
    dtor_got = NULL;
    pthread_t t;
    if (pthread_create(&t, NULL, body, NULL) != 0) { printf("keys: FAIL: pthread_create\n"); return 1; }
    pthread_join(t, NULL);
    if (dtor_got != (void *)0x1234) {
      printf("keys: FAIL: round %d: the program's key destructor got %p, not 0x1234\n", round, dtor_got);
      return 1;
    }
  }
  printf("keys: ok: %d more keys taken, brisk used on 3 threads, the program's key untouched\n", n);
  return 0;
}
EOF
$CC -O1 -o "$tmp/keys" "$tmp/keys.c" -ldl -lpthread
rc=0
"$tmp/keys" "$LIB" >"$tmp/out" 2>"$tmp/err" || rc=$?
cat "$tmp/out"
sed 's/^/  stderr: /' "$tmp/err"
if [ $rc -ne 0 ]; then
  echo "test_thread_key: FAIL: the program exited with $rc"; exit 1
fi
warnings=$(grep -c "^brisk: warning: no pthread key left" "$tmp/err" || true)
if [ "$warnings" != 1 ]; then
  echo "test_thread_key: FAIL: $warnings 'no pthread key left' warnings, expected exactly 1"; exit 1
fi
if grep -v "^brisk: warning: no pthread key left" "$tmp/err" | grep -q .; then
  echo "test_thread_key: FAIL: other output on stderr"; exit 1
fi
echo "test_thread_key: passed"
