#!/usr/bin/env bash
# brisk's Debian packages, as a user gets them: scripts/deb.sh builds
# libbrisk0 and libbrisk-dev (lintian: no errors, or it fails); their
# contents are checked; both are unpacked into a throw-away root (dpkg -x,
# the files dpkg -i would install, under /usr); a consumer is built with
# pkg-config against the unpacked headers and libraries and run, and a
# program that links only libc runs with LD_PRELOAD of the unpacked
# libbrisk.so.0 and finds its malloc is brisk's. Exit 77 (a failure under CI,
# and for make test unless SKIP=deb) when dpkg-deb or lintian is missing.
set -uo pipefail
src=${BRISKTEST_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
for tool in dpkg-deb dpkg-architecture dpkg-shlibdeps lintian pkg-config cc; do
  if ! command -v "$tool" >/dev/null; then
    echo "test_deb: $tool not found (scripts/setup.sh installs it)"
    exit 77
  fi
done
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "test_deb: FAIL: $*"; exit 1; }

bash "$src/scripts/deb.sh" "$tmp/out" >"$tmp/deb.log" 2>&1 || { cat "$tmp/deb.log"; fail "scripts/deb.sh failed"; }
grep '^deb: ' "$tmp/deb.log"
arch=$(dpkg-architecture -qDEB_HOST_ARCH)
ma=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
version=$(sed -n 's/^project(brisk VERSION \([0-9.]*\).*/\1/p' "$src/CMakeLists.txt")
rt="$tmp/out/libbrisk0_${version}-1_${arch}.deb"
dev="$tmp/out/libbrisk-dev_${version}-1_${arch}.deb"
[ -f "$rt" ] && [ -f "$dev" ] || fail "the packages are not where scripts/deb.sh says"

# What each package holds.
expect() { # PACKAGE FILE...
  local deb=$1 listing
  shift
  listing=$(dpkg-deb -c "$deb" | awk '{print $6}')
  for f in "$@"; do
    grep -qx "./$f" <<<"$listing" || fail "$(basename "$deb") lacks /$f"
  done
}
expect "$rt" "usr/lib/$ma/libbrisk.so.0" "usr/lib/$ma/libbrisk.so.$version" "usr/lib/$ma/libbrisk-hardened.so.0" \
  "usr/share/doc/libbrisk0/copyright" "usr/share/doc/libbrisk0/changelog.Debian.gz"
expect "$dev" "usr/include/brisk.h" "usr/include/brisk/pmr.hpp" "usr/lib/$ma/libbrisk.so" "usr/lib/$ma/libbrisk.a" \
  "usr/lib/$ma/pkgconfig/brisk.pc" "usr/lib/$ma/cmake/brisk/briskConfig.cmake" "usr/share/doc/libbrisk-dev/copyright"
dpkg-deb -f "$dev" Depends | grep -qx "libbrisk0 (= ${version}-1)" || fail "libbrisk-dev does not depend on its libbrisk0"
dpkg-deb -f "$rt" Depends | grep -q "libc6" || fail "libbrisk0 does not depend on libc6"
echo "test_deb: ok   the packages hold the libraries, headers, static library, CMake and pkg-config files"

# Unpacked as dpkg -i would install them, into a root of our own.
root="$tmp/root"
dpkg -x "$rt" "$root" && dpkg -x "$dev" "$root" || fail "dpkg -x failed"
libdir="$root/usr/lib/$ma"

cat >"$tmp/consumer.c" <<'C'
#include <brisk.h>
#include <stdio.h>
#include <string.h>
int main(void) {
  brisk_heap_t *h = brisk_heap_new();
  if (!h) return 1;
  char *p = brisk_heap_malloc(h, 100);
  if (!p || !brisk_owns(p)) return 2;
  strcpy(p, "from the package");
  printf("consumer: %s\n", p);
  brisk_heap_destroy(h);
  return 0;
}
C
flags=$(PKG_CONFIG_SYSROOT_DIR="$root" PKG_CONFIG_LIBDIR="$libdir/pkgconfig" pkg-config --cflags --libs brisk) ||
  fail "pkg-config does not find brisk.pc in the unpacked package"
grep -q -- "-I$root/usr/include" <<<"$flags" || fail "pkg-config's flags do not name the package's headers: $flags"
cc -o "$tmp/consumer" "$tmp/consumer.c" $flags || fail "the consumer does not build with pkg-config's flags ($flags)"
out=$(LD_LIBRARY_PATH="$libdir" "$tmp/consumer") || fail "the consumer failed: $out"
[ "$out" = "consumer: from the package" ] || fail "the consumer printed '$out'"
ldd_out=$(LD_LIBRARY_PATH="$libdir" ldd "$tmp/consumer")
grep -q "libbrisk.so.0 => $libdir/libbrisk.so.0" <<<"$ldd_out" || fail "the consumer did not load the package's libbrisk.so.0: $ldd_out"
echo "test_deb: ok   a consumer built with pkg-config against the package runs on its libbrisk.so.0"

# A program that links only libc, with the package's library preloaded.
cat >"$tmp/preloaded.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
int main(void) {
  int (*owns)(const void *) = (int (*)(const void *))dlsym(RTLD_DEFAULT, "brisk_owns");
  void *p = malloc(1000);
  if (!owns || !p || !owns(p)) { puts("preloaded: malloc is not brisk's"); return 1; }
  free(p);
  puts("preloaded: malloc is brisk's");
  return 0;
}
C
cc -o "$tmp/preloaded" "$tmp/preloaded.c" -ldl || fail "the preloaded program does not build"
out=$(LD_PRELOAD="$libdir/libbrisk.so.0" "$tmp/preloaded") || fail "under LD_PRELOAD: $out"
[ "$out" = "preloaded: malloc is brisk's" ] || fail "under LD_PRELOAD it printed '$out'"
echo "test_deb: ok   LD_PRELOAD=<root>/usr/lib/$ma/libbrisk.so.0 makes brisk a program's malloc"
echo "test_deb: passed"
