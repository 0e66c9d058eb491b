#!/usr/bin/env bash
# The model of the large keep's handshake (tests/model/large_keep.pml): the
# owner pushes and pops kept spans with plain stores and loads and no fence
# (its memory modelled as x86's, with a store buffer), the background
# thread takes unused spans after setting frozen, a membarrier and a read
# of busy. It must pass (the span never held by both, nothing kept with no
# look to come once the owner stops), and each of these variants must
# fail: a membarrier that does not reach the owner (-DNO_FENCE) and a
# background thread that does not read busy (-DNO_BUSY_CHECK), either of
# which lets the owner's pop and the background thread's take meet on one
# span; and a look that leaves a span without scheduling the next
# (-DNO_RELOOK), the span kept with no look to come.
# Prints the states and the depth of each search.
# ctest-labels: model
set -uo pipefail
SKIP_NAME=test_model_keep
src="${BRISKTEST_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
MODEL=large_keep.pml
MEMLIM=1024
PAN_TIMEOUT=60
TRAIL_DROP="\[(s|w|f|b) = 0\]"
. "$src/tests/model/spin_check.sh"

must_pass handshake
must_pass handshake_longer -DOPS=5

# Without the fence, the owner's busy still waits in its store buffer when
# the background thread reads it, and the owner read frozen before it was
# set: both take the span.
expect_violation no_fence "without the membarrier" 'holders==1|kept==1' -DNO_FENCE -DNO_FINAL

# Without the read of busy, the background thread takes the span while the
# owner, inside its pop, takes it too.
expect_violation no_busy_check "without the read of busy" 'holders==1|kept==1' -DNO_BUSY_CHECK -DNO_FINAL

# A look that sees the span and leaves it for the next look, scheduling
# none: the owner stops, and the span stays kept for good.
expect_violation no_relook "without the next look scheduled" 'kept==0' -DNO_RELOOK

if [ $status -eq 0 ]; then echo "$SKIP_NAME: ok"; else echo "$SKIP_NAME: FAILED"; fi
exit $status
