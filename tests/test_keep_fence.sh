#!/usr/bin/env bash
# The large keep's fence (membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED)
# is registered while the process has one thread. Registered once a second
# thread exists, the kernel waits for an RCU grace period (18..28 ms on the
# machine this was written on), inside the first free of a large block that
# the thread makes. Under strace -f, the registration comes before the first
# clone in a program whose large blocks are all allocated and freed on a
# thread (tests/memory_probe.c, scenario "thread"), and is made once.
set -u
lib=${BRISKTEST_LIB:-}
probe=${BRISKTEST_BIN_DIR:-}/memory_probe
if [ -z "$lib" ] || [ ! -f "$lib" ]; then
  echo "[keep_fence] FAILED: BRISKTEST_LIB is not set or not a file ('$lib')"
  exit 1
fi
if [ ! -x "$probe" ]; then
  echo "[keep_fence] FAILED: no memory probe at $probe"
  exit 1
fi
if ! command -v strace >/dev/null; then
  echo "[keep_fence] FAILED: strace is not installed (scripts/setup.sh installs it)"
  exit 1
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0

# 16 MiB of 100,000-byte blocks (two slices each: the keep's sizes), on a
# thread, with the purge delay long enough that the keep holds them.
if ! env -i PATH=/usr/bin:/bin LC_ALL=C BRISK_PURGE_DELAY=1000 \
    strace -f -qq -e trace=membarrier,clone,clone3 -o "$tmp/trace" \
    env LD_PRELOAD="$lib" "$probe" thread 100000 16 0 >"$tmp/out" 2>"$tmp/err"; then
  echo "[keep_fence] FAILED: the probe under strace failed:"
  sed 's/^/      | /' "$tmp/err" | head -20
  exit 1
fi
grep -q DONE "$tmp/out" || { echo "[keep_fence] FAILED: the probe did not finish"; exit 1; }
# The first lines of the trace are env's and the probe's start; strace
# prefixes each with the thread's id.
reg=$(grep -n "MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED" "$tmp/trace" | head -1 | cut -d: -f1)
regs=$(grep -c "MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED" "$tmp/trace")
clone=$(grep -n -E "clone3?\(" "$tmp/trace" | head -1 | cut -d: -f1)
if [ -z "$reg" ]; then
  echo "[keep_fence] FAILED: no registration of the fence in the trace (is the keep off?):"
  sed 's/^/      | /' "$tmp/trace" | head -10
  fails=$((fails + 1))
elif [ -z "$clone" ]; then
  echo "[keep_fence] FAILED: the probe started no thread (setup):"
  sed 's/^/      | /' "$tmp/trace" | head -10
  fails=$((fails + 1))
elif [ "$reg" -gt "$clone" ]; then
  echo "[keep_fence] FAILED: the fence was registered after the process started a thread (trace line $reg, first clone line $clone):"
  sed 's/^/      | /' "$tmp/trace" | head -10
  fails=$((fails + 1))
else
  echo "[keep_fence] registered before the first thread (trace line $reg, first clone line $clone): ok"
fi
if [ "$regs" -gt 1 ]; then
  echo "[keep_fence] FAILED: the fence was registered $regs times"
  fails=$((fails + 1))
fi
if [ "$fails" -ne 0 ]; then
  echo "[keep_fence] FAILED: $fails checks"
  exit 1
fi
echo "[keep_fence] all checks passed"
