#!/usr/bin/env bash
# Every kind of system call brisk makes may fail, and none of the failures
# hands out wrong memory: the stress test (every block's content checked
# before it is freed or reallocated, every calloc block zero, alignment,
# usable size and ownership of each) runs with one kind of call failing at
# a time (BRISK_FAULT_CALLS, BRISK_FAULT_RATE), then with every kind at
# random. Allocations may fail with ENOMEM there (BRISKTEST_ENOMEM_OK), a
# realloc that fails must leave its block as it was, and nothing may crash
# or be reported as a bad input. Each run must show that the OS refused
# calls of its kind (the *_failures statistics), so a run whose faults
# never reached the code it is about fails.
#   mmap      ENOMEM     new segments, huge blocks, a growing mremap
#   munmap    ENOMEM     no segment cache: every empty segment is unmapped
#   madvise   EINVAL     purges after 1 ms (as under mlockall)
#   mremap    ENOMEM     huge blocks grown and shrunk by realloc
#   mprotect  ENOMEM     the hardened library's guard pages
#   thread    EAGAIN     the background thread's start, every time
#   membarrier EPERM     the fence of the large keep's handshake, every time
#                        (the keep is then off)
set -u
build="${BRISKTEST_BUILD_DIR:?}"
bin="${BRISKTEST_BIN_DIR:?}"
SKIP_NAME="test_fault_kinds"
. "$(dirname "${BASH_SOURCE[0]}")/skip.sh"
[ -e "$build/libbrisk-hardened.so" ] || skip "libbrisk-hardened.so not built (-DBRISK_HARDENED=OFF?)"
pass=0 fail=0
log=$(mktemp); trap 'rm -f "$log"' EXIT

# run NAME COUNTER PRELOAD ENV... : the stress test under those faults
run() {
  local name=$1 counter=$2 preload=$3; shift 3
  if env "$@" BRISKTEST_ENOMEM_OK=1 BRISKTEST_SCALE=0.15 ${preload:+LD_PRELOAD=$preload} \
      timeout 180 "$bin/test_stress" 4 4 >"$log" 2>&1; then
    local n
    n=$(sed -n "s/^test_stress: refused $counter \([0-9-]*\)$/\1/p" "$log")
    if [ -n "$counter" ] && ! [ "${n:-0}" -gt 0 ] 2>/dev/null; then
      echo "test_fault_kinds: FAIL: $name: the stress test passed, but no call failed ($counter = ${n:-none}): the faults did not reach it"
      fail=$((fail + 1))
    else
      echo "test_fault_kinds: ok: $name (${counter:-every kind}: ${n:-see below}; $(grep -c . "$log") lines)"
      grep "refused\|ENOMEM" "$log" | sed 's/^/    /'
      pass=$((pass + 1))
    fi
  else
    echo "test_fault_kinds: FAIL: $name (exit $?):"
    tail -8 "$log" | sed 's/^/    /'
    fail=$((fail + 1))
  fi
}

run "mmap fails at random" map_failures "" \
  BRISK_FAULT_CALLS=1 BRISK_FAULT_RATE=20000
run "munmap fails at random" unmap_failures "" \
  BRISK_FAULT_CALLS=2 BRISK_FAULT_RATE=300000 BRISK_SEGMENT_CACHE=0 BRISK_PURGE_DELAY=1
run "madvise fails at random" purge_failures "" \
  BRISK_FAULT_CALLS=4 BRISK_FAULT_RATE=300000 BRISK_PURGE_DELAY=1
run "madvise always fails" purge_failures "" \
  BRISK_FAULT_CALLS=4 BRISK_FAULT_AFTER=0 BRISK_PURGE_DELAY=0
run "mremap fails at random" remap_failures "" \
  BRISK_FAULT_CALLS=8 BRISK_FAULT_RATE=300000
run "mprotect fails at random (hardened)" protect_failures "$build/libbrisk-hardened.so" \
  BRISK_FAULT_CALLS=16 BRISK_FAULT_RATE=200000
run "the background thread never starts" thread_failures "" \
  BRISK_FAULT_CALLS=32 BRISK_FAULT_AFTER=0 BRISK_PURGE_DELAY=5
run "membarrier always fails" fence_failures "" \
  BRISK_FAULT_CALLS=64 BRISK_FAULT_AFTER=0 BRISK_PURGE_DELAY=1
run "every kind at random" "" "" \
  BRISK_FAULT_CALLS=127 BRISK_FAULT_RATE=20000 BRISK_SEGMENT_CACHE=0 BRISK_PURGE_DELAY=1
run "every kind at random (hardened)" "" "$build/libbrisk-hardened.so" \
  BRISK_FAULT_CALLS=127 BRISK_FAULT_RATE=20000 BRISK_SEGMENT_CACHE=0 BRISK_PURGE_DELAY=1

echo "$pass passed, $fail failed"
[ "$fail" -eq 0 ]
