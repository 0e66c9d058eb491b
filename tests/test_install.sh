#!/usr/bin/env bash
# Install brisk from $BRISKTEST_SOURCE_DIR into a temporary prefix (own build
# directory, tests and benchmarks off, cmake --install), then build a tiny
# consumer against the installed package three ways and run it:
#   1. CMake: find_package(brisk) + target brisk::brisk
#   2. pkg-config --cflags --libs brisk
#   3. static: -l:libbrisk.a -lpthread (must not need libbrisk.so at run time)
# Each consumer prints brisk_version(), brisk_owns(brisk_malloc(..)),
# brisk_good_size(100) against the usable size of such a block, the blocks
# brisk_heap_visit finds in a heap of three, and whether glibc's extras
# (mallopt, mallinfo2) are brisk's, as they are where brisk is the malloc.
# A C++17 consumer of the installed brisk/pmr.hpp and brisk/allocator.hpp is
# built through 1 and 2 as well: it prints what containers over
# brisk::heap_resource, a moved brisk::session_arena, brisk::allocator and
# brisk::heap_allocator hold, whether their storage is brisk's and on the
# heap given, and is_equal of two resources over one heap.
set -u
src=${BRISKTEST_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
tmp=$(mktemp -d /tmp/brisk-install-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
prefix=$tmp/prefix
fails=0
ok()  { echo "[install] $1: ok"; }
bad() { echo "[install] $1: FAILED: $2"; fails=$((fails + 1)); }
die() { echo "[install] $1: FAILED: $2"; [ -n "${3:-}" ] && tail -40 "$3" | sed 's/^/      | /'; echo "[install] FAILED"; exit 1; }

# --- build and install ------------------------------------------------------
cmake -S "$src" -B "$tmp/build" -DCMAKE_BUILD_TYPE=Release -DBRISK_BUILD_TESTS=OFF -DBRISK_BUILD_BENCH=OFF \
  -DCMAKE_INSTALL_PREFIX="$prefix" >"$tmp/configure.log" 2>&1 \
  || die "configure" "cmake configure failed" "$tmp/configure.log"
cmake --build "$tmp/build" -j 2 >"$tmp/build.log" 2>&1 || die "build" "cmake --build failed" "$tmp/build.log"
cmake --install "$tmp/build" >"$tmp/install.log" 2>&1 || die "install" "cmake --install failed" "$tmp/install.log"
ok "configure + build + install into a temporary prefix"

so=$(find "$prefix" -name 'libbrisk.so' | head -1)
[ -n "$so" ] || die "layout" "libbrisk.so not installed: $(cd "$prefix" && find . -type f | tr '\n' ' ')"
libdir=$(dirname "$so")
rel=${libdir#"$prefix"/}
for f in "include/brisk.h" "include/brisk/pmr.hpp" "include/brisk/allocator.hpp" "$rel/libbrisk.a" "$rel/pkgconfig/brisk.pc" "$rel/cmake/brisk/briskConfig.cmake" \
         "$rel/cmake/brisk/briskConfigVersion.cmake" "$rel/cmake/brisk/briskTargets.cmake"; do
  [ -e "$prefix/$f" ] || bad "layout" "$f is not installed"
done
ls "$libdir"/libbrisk.so.0* >/dev/null 2>&1 || bad "layout" "no versioned libbrisk.so.0 (SOVERSION) in $rel"
[ $fails -eq 0 ] && ok "layout (include/brisk.h, include/brisk/{pmr,allocator}.hpp, $rel/libbrisk.{so,a}, pkgconfig, cmake package)"

# --- the installed header stands alone ----------------------------------------
echo '#include <brisk.h>' >"$tmp/hdr.c"
gcc -std=c99 -Wall -Wextra -pedantic -Werror -fsyntax-only -I"$prefix/include" "$tmp/hdr.c" >"$tmp/hdr.log" 2>&1 \
  && g++ -x c++ -std=c++17 -Wall -Wextra -Werror -fsyntax-only -I"$prefix/include" "$tmp/hdr.c" >>"$tmp/hdr.log" 2>&1 \
  && ok "installed brisk.h compiles alone as C99 and C++17" \
  || { bad "header" "brisk.h does not compile alone"; sed 's/^/      | /' "$tmp/hdr.log" | head -20; }
for h in brisk/pmr.hpp brisk/allocator.hpp; do
  echo "#include <$h>" >"$tmp/hdr.cpp"
  g++ -std=c++17 -Wall -Wextra -Werror -fsyntax-only -I"$prefix/include" "$tmp/hdr.cpp" >"$tmp/hdr.log" 2>&1 \
    && ok "installed $h compiles alone as C++17" \
    || { bad "header" "$h does not compile alone"; sed 's/^/      | /' "$tmp/hdr.log" | head -20; }
done

# --- consumer program ------------------------------------------------------------
mkdir -p "$tmp/consumer"
cat >"$tmp/consumer/main.c" <<'EOF'
#include <brisk.h>
#include <malloc.h>
#include <stdio.h>
#include <string.h>
static int count(brisk_heap_t *h, void *block, size_t size, void *arg) {
  (void)h; (void)block;
  if (size >= 16) ++*(int *)arg;
  return 0;
}
int main(void) {
  char *p = brisk_malloc(100);
  if (!p) { puts("brisk_malloc failed"); return 2; }
  memset(p, 7, 100);
  int owns = brisk_owns(p) != 0;
  int foreign = brisk_owns(&owns) != 0;
  int good = brisk_good_size(100) == brisk_usable_size(p) ? (int)brisk_good_size(100) : -1;
  brisk_heap_t *h = brisk_heap_new();
  void *a = brisk_heap_malloc(h, 10), *b = brisk_heap_malloc(h, 5000), *c = brisk_heap_malloc(h, 100000);
  int visited = 0;
  brisk_heap_visit(h, count, &visited);
  struct mallinfo2 mi = mallinfo2();
  int extras = mallopt(12345, 1) == 0 && mi.uordblks >= 65536 && mi.arena >= mi.uordblks + mi.fordblks;
  printf("version=%s owns=%d stack=%d good=%d visited=%d extras=%s\n", brisk_version(), owns, foreign, good, visited,
         extras ? "brisk" : "glibc");
  brisk_free(a);
  brisk_free(b);
  brisk_free(c);
  brisk_heap_destroy(h);
  brisk_free(p);
  return 0;
}
EOF
expected="version=0.1.0 owns=1 stack=0 good=112 visited=3 extras=brisk"
cat >"$tmp/consumer/main.cpp" <<'EOF'
#include <brisk/allocator.hpp>
#include <brisk/pmr.hpp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>
static int blocks(brisk_heap_t *h) {
  char buf[512];
  brisk_heap_stats_json(h, buf, sizeof buf);
  const char *s = std::strstr(buf, "\"blocks_in_use\":");
  return s ? std::atoi(s + 16) : -1;
}
int main() {
  brisk::heap_resource hr;
  std::pmr::vector<std::pmr::string> v(&hr);
  for (int i = 0; i < 100; i++) v.emplace_back(std::string(50, static_cast<char>('a' + i % 26)).c_str());
  brisk::session_arena arena(4096);
  brisk::session_arena moved(std::move(arena));
  std::pmr::map<int, int> m(&moved);
  for (int i = 0; i < 100; i++) m[i] = i * i;
  std::vector<long, brisk::allocator<long>> g(1000, 7);
  std::vector<int, brisk::heap_allocator<int>> w{brisk::heap_allocator<int>(hr.heap())};
  w.assign(500, 3);
  brisk::heap_resource borrow(hr.heap());
  std::printf("pmr=%s,%d arena=%d,%d allocator=%ld,%d heap_allocator=%d,%d heap_blocks=%d equal=%d\n",
              v[99].c_str() + 48, brisk_owns(v[99].data()) != 0, m.at(99), arena.heap() == nullptr, g[999],
              brisk_owns(g.data()) != 0, w[499], w.get_allocator().heap() == hr.heap(), blocks(hr.heap()),
              borrow == hr);
  return 0;
}
EOF
expected_cxx="pmr=vv,1 arena=9801,1 allocator=7,1 heap_allocator=3,1 heap_blocks=102 equal=1"

check_run() { # name binary [env...]   (a binary named *_cxx or *.cxx: the C++ consumer)
  local name=$1 bin=$2; shift 2
  local want=$expected
  case $bin in *.cxx | *_cxx) want=$expected_cxx ;; esac
  local out
  out=$(env "$@" "$bin" 2>"$tmp/run.err")
  local rc=$?
  if [ $rc -ne 0 ]; then bad "$name" "consumer exited $rc: $out $(head -5 "$tmp/run.err")"
  elif [ "$out" != "$want" ]; then bad "$name" "printed '$out', expected '$want'"
  else ok "$name ($out)"; fi
}

# 1. CMake package
cat >"$tmp/consumer/CMakeLists.txt" <<'EOF'
cmake_minimum_required(VERSION 3.16)
project(brisk_consumer C CXX)
set(CMAKE_CXX_STANDARD 17)
set(CMAKE_CXX_STANDARD_REQUIRED ON)
find_package(brisk 0.1 REQUIRED)
add_executable(consumer main.c)
target_link_libraries(consumer PRIVATE brisk::brisk)
add_executable(consumer_cxx main.cpp)
target_link_libraries(consumer_cxx PRIVATE brisk::brisk)
EOF
if cmake -S "$tmp/consumer" -B "$tmp/consumer/build" -DCMAKE_PREFIX_PATH="$prefix" >"$tmp/cc.log" 2>&1 \
   && cmake --build "$tmp/consumer/build" >>"$tmp/cc.log" 2>&1; then
  check_run "find_package(brisk) + brisk::brisk" "$tmp/consumer/build/consumer" LD_LIBRARY_PATH="$libdir"
  check_run "find_package(brisk): C++ (pmr.hpp, allocator.hpp)" "$tmp/consumer/build/consumer_cxx" \
    LD_LIBRARY_PATH="$libdir"
  # it must really use the installed library
  if ldd "$tmp/consumer/build/consumer" 2>/dev/null | grep -q "libbrisk.so"; then
    LD_LIBRARY_PATH="$libdir" ldd "$tmp/consumer/build/consumer" | grep -q "$prefix" \
      || bad "find_package(brisk)" "consumer does not resolve libbrisk.so from the prefix"
  else
    bad "find_package(brisk)" "consumer is not linked to libbrisk.so"
  fi
else
  bad "find_package(brisk) + brisk::brisk" "configure/build of the consumer failed"
  tail -30 "$tmp/cc.log" | sed 's/^/      | /'
fi

# 2. pkg-config
pcdir=$libdir/pkgconfig
if ! command -v pkg-config >/dev/null; then
  bad "pkg-config" "pkg-config is not installed"
else
  ver=$(PKG_CONFIG_PATH="$pcdir" pkg-config --modversion brisk 2>&1)
  [ "$ver" = "0.1.0" ] || bad "pkg-config --modversion brisk" "got '$ver', expected 0.1.0"
  flags=$(PKG_CONFIG_PATH="$pcdir" pkg-config --cflags --libs brisk 2>&1)
  if [ $? -ne 0 ]; then
    bad "pkg-config --cflags --libs brisk" "$flags"
  else
    # shellcheck disable=SC2086
    if gcc "$tmp/consumer/main.c" $flags -o "$tmp/consumer/pc" >"$tmp/pc.log" 2>&1; then
      check_run "pkg-config ($flags)" "$tmp/consumer/pc" LD_LIBRARY_PATH="$libdir"
    else
      bad "pkg-config" "gcc main.c $flags failed"
      sed 's/^/      | /' "$tmp/pc.log" | head -20
    fi
    # shellcheck disable=SC2086
    if g++ -std=c++17 "$tmp/consumer/main.cpp" $flags -o "$tmp/consumer/pc.cxx" >"$tmp/pc.log" 2>&1; then
      check_run "pkg-config: C++ (pmr.hpp, allocator.hpp)" "$tmp/consumer/pc.cxx" LD_LIBRARY_PATH="$libdir"
    else
      bad "pkg-config: C++" "g++ main.cpp $flags failed"
      sed 's/^/      | /' "$tmp/pc.log" | head -20
    fi
  fi
fi

# 3. static library
if gcc "$tmp/consumer/main.c" -I"$prefix/include" -L"$libdir" -l:libbrisk.a -lpthread -o "$tmp/consumer/st" \
     >"$tmp/st.log" 2>&1; then
  if ldd "$tmp/consumer/st" 2>/dev/null | grep -q libbrisk; then
    bad "static" "the consumer linked with -l:libbrisk.a still needs libbrisk.so"
  fi
  check_run "static (-l:libbrisk.a -lpthread)" "$tmp/consumer/st"
else
  bad "static (-l:libbrisk.a -lpthread)" "link failed"
  sed 's/^/      | /' "$tmp/st.log" | head -20
fi

if [ $fails -ne 0 ]; then echo "[install] FAILED: $fails checks"; exit 1; fi
echo "[install] all checks passed"
