#!/usr/bin/env bash
# brisk's C++ headers (brisk/pmr.hpp, brisk/allocator.hpp) in every build
# mode: default, -fno-rtti, -fno-exceptions, and both, with g++; clang++
# (when installed) builds the mode with both off.
#   1. each header compiles alone (-Wall -Wextra -Wpedantic -Werror), and
#      brisk/allocator.hpp does not include <memory_resource>;
#   2. tests/cxx_modes_probe.cpp is built in each mode against the built
#      libbrisk.so and run: it reports the mode the compiler saw (which must
#      be the one asked for) and checks equality without RTTI, containers
#      over every resource and both allocators, moves (see the probe);
#   3. failures, each in a child process: under brisk's fault injection
#      (and on moved-from resources) every resource and allocator throws
#      std::bad_alloc when exceptions are on; without exceptions each prints
#      its one-line report on stderr and aborts (SIGABRT), as the headers say;
#   4. the probe passes under libbrisk-hardened.so, which checks every sized
#      release against its block.
set -u
src=${BRISKTEST_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}
build=${BRISKTEST_BUILD_DIR:-$src/build}
lib=${BRISKTEST_LIB:-$build/libbrisk.so}
[ -e "$lib" ] || { echo "[cxx_modes] FAILED: $lib is not built"; exit 1; }
libdir=$(cd "$(dirname "$lib")" && pwd)
tmp=$(mktemp -d /tmp/brisk-cxx-modes.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
ulimit -c 0
fails=0
ok()  { echo "[cxx_modes] $1: ok"; }
bad() { echo "[cxx_modes] $1: FAILED: $2"; fails=$((fails + 1)); }

# name|flags|rtti|exceptions
modes=("default||1|1" "no-rtti|-fno-rtti|0|1" "no-exceptions|-fno-exceptions|1|0" "neither|-fno-rtti -fno-exceptions|0|0")
builds=()  # compiler|mode
for m in "${modes[@]}"; do builds+=("g++|$m"); done
clangxx=""
if command -v clang++ >/dev/null 2>&1; then
  clangxx=clang++
  builds+=("clang++|${modes[3]}")
fi
cxxflags="-std=c++17 -Wall -Wextra -Wpedantic -Werror -I$src/include"

# Runs "$@" in the background, at most two at a time.
pids=()
spawn() {
  "$@" &
  pids+=($!)
  if [ ${#pids[@]} -ge 2 ]; then wait "${pids[0]}"; pids=("${pids[@]:1}"); fi
}

# --- 1. headers alone ------------------------------------------------------------
n=0
for cxx in g++ $clangxx; do
  for hdr in brisk/pmr.hpp brisk/allocator.hpp; do
    n=$((n + 1))
    echo "#include <$hdr>" >"$tmp/hdr$n.cpp"
    # shellcheck disable=SC2086
    spawn bash -c "$cxx $cxxflags -fsyntax-only '$tmp/hdr$n.cpp' >'$tmp/hdr$n.log' 2>&1 || echo '$cxx $hdr' >'$tmp/hdr$n.bad'"
  done
done
echo '#include <brisk/allocator.hpp>' >"$tmp/alloc.cpp"
# shellcheck disable=SC2086
spawn bash -c "g++ $cxxflags -H -fsyntax-only '$tmp/alloc.cpp' >'$tmp/h.log' 2>&1"
wait
pids=()
for i in $(seq 1 $n); do
  if [ -e "$tmp/hdr$i.bad" ]; then
    bad "$(cat "$tmp/hdr$i.bad") alone" "does not compile"
    sed 's/^/      | /' "$tmp/hdr$i.log" | head -20
  fi
done
if grep -Eq '/memory_resource$' "$tmp/h.log"; then
  bad "brisk/allocator.hpp" "includes <memory_resource>: $(grep -E '/memory_resource$' "$tmp/h.log" | head -1)"
elif ! grep -q 'brisk.h$' "$tmp/h.log"; then
  bad "g++ -H brisk/allocator.hpp" "lists no headers (brisk.h missing):"
  sed 's/^/      | /' "$tmp/h.log" | head -5
fi
[ $fails -eq 0 ] && ok "headers compile alone (g++ $clangxx); allocator.hpp does not include <memory_resource>"

# --- 2. the probe in every mode ------------------------------------------------------
for b in "${builds[@]}"; do
IFS='|' read -r cxx name flags _ _ <<<"$b"
out="$tmp/probe-$cxx-$name"
# shellcheck disable=SC2086
spawn bash -c "$cxx $cxxflags $flags -O1 '$src/tests/cxx_modes_probe.cpp' -o '$out' '$lib' -Wl,-rpath,'$libdir' -lpthread >'$out.log' 2>&1"
done
wait

# expected stderr line of each failure without exceptions
expect_line() { # what
  local big="67108864"
  case $1 in
    heap_resource) echo "brisk: allocation failed: brisk::heap_resource could not allocate $big bytes (alignment 16); aborting" ;;
    session_arena) echo "brisk: allocation failed: brisk::session_arena could not allocate $big bytes (alignment 16); aborting" ;;
    default_resource) echo "brisk: allocation failed: brisk::default_resource() could not allocate $big bytes (alignment 16); aborting" ;;
    allocator) echo "brisk: allocation failed: brisk::allocator could not allocate $big bytes (alignment 1); aborting" ;;
    heap_allocator) echo "brisk: allocation failed: brisk::heap_allocator could not allocate $big bytes (alignment 1); aborting" ;;
    moved_heap) echo "brisk: allocation failed: brisk::heap_resource could not allocate 64 bytes (alignment 16): empty (moved from); aborting" ;;
    moved_arena) echo "brisk: allocation failed: brisk::session_arena could not allocate 64 bytes (alignment 16): empty (moved from); aborting" ;;
  esac
}

for b in "${builds[@]}"; do
  IFS='|' read -r cxx name flags rtti exc <<<"$b"
  probe="$tmp/probe-$cxx-$name"
  label="$cxx $name${flags:+ ($flags)}"
  if [ ! -x "$probe" ]; then
    bad "$label" "the probe does not build"
    sed 's/^/      | /' "$probe.log" | head -30
    continue
  fi
  # --- 2. run ---
  out=$("$probe" run 2>"$tmp/run.err")
  rc=$?
  first=$(head -1 <<<"$out")
  if [ "$first" != "rtti=$rtti exceptions=$exc" ]; then
    bad "$label" "the compiler saw '$first', expected 'rtti=$rtti exceptions=$exc'"
  elif [ $rc -ne 0 ] || [ "$(tail -1 <<<"$out")" != "ok" ]; then
    bad "$label" "the probe exited $rc:"
    sed 's/^/      | /' <<<"$out" | head -20
    sed 's/^/      | /' "$tmp/run.err" | head -5
  else
    ok "$label: probe ($first)"
  fi
  # --- 3. failures ---
  failed_here=0
  for what in heap_resource session_arena default_resource allocator heap_allocator moved_heap moved_arena; do
    out=$("$probe" fail "$what" 2>"$tmp/fail.err")
    rc=$?
    if [ "$exc" = 1 ]; then
      if [ $rc -ne 0 ] || [ "$out" != "caught std::bad_alloc" ]; then
        bad "$label: $what fails" "exit $rc, printed '$out' (expected 'caught std::bad_alloc')"
        failed_here=1
      fi
    else
      want=$(expect_line "$what")
      if [ $rc -ne 134 ]; then
        bad "$label: $what fails" "exit $rc, expected 134 (SIGABRT); stdout '$out'"
        failed_here=1
      elif ! grep -qxF "$want" "$tmp/fail.err"; then
        bad "$label: $what fails" "stderr lacks the line '$want':"
        sed 's/^/      | /' "$tmp/fail.err" | head -5
        failed_here=1
      fi
    fi
  done
  if [ $failed_here -eq 0 ]; then
    if [ "$exc" = 1 ]; then ok "$label: 7 failures throw std::bad_alloc"
    else ok "$label: 7 failures report one line and abort"; fi
  fi
done

# --- 4. under the hardened library ------------------------------------------------
hardened="$libdir/libbrisk-hardened.so"
if [ -e "$hardened" ]; then
  for name in default neither; do
    out=$(LD_PRELOAD="$hardened" "$tmp/probe-g++-$name" run 2>"$tmp/h.err")
    rc=$?
    if [ $rc -ne 0 ] || [ "$(tail -1 <<<"$out")" != "ok" ]; then
      bad "g++ $name under libbrisk-hardened.so" "exit $rc:"
      sed 's/^/      | /' <<<"$out" | head -10
      sed 's/^/      | /' "$tmp/h.err" | head -10
    else
      ok "g++ $name: probe under libbrisk-hardened.so"
    fi
  done
else
  bad "$hardened not built (-DBRISK_HARDENED=OFF): the hardened run cannot be made" \
    "(make test SKIP=cxx_modes leaves this test out)"
fi

if [ $fails -ne 0 ]; then echo "[cxx_modes] FAILED: $fails checks"; exit 1; fi
echo "[cxx_modes] all checks passed"
