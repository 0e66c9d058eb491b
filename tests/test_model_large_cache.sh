#!/usr/bin/env bash
# The model of a heap's own cache of large blocks' spans
# (tests/model/large_cache.pml, docs/DESIGN.md "The large-block cache and
# the span cache"), checked with spin. The owner's time with the heap ends
# in one of: going idle, the heap owned; its destruction; its destruction
# and the reuse of the heap object by a new owner, a new life; its
# abandonment and its adoption by a new owner (the new owner then does a
# few operations). The model as the code has it must pass (no assertion
# violated, no invalid end state), with two slots and with three; the
# model whose take loads the slot and then stores 0
# (-DTAKE_WITHOUT_EXCHANGE) must fail, a span owned twice; the model whose
# background thread clears `watched` without loading the slots again
# (-DCLEAR_WITHOUT_RECHECK) must fail, a span left in its slot with no
# round to come; the model whose give-back neither takes the set's lock
# nor checks the heap's state (-DSTEAL_WITHOUT_STATE_CHECK) must fail, a
# span released into the set of a destroyed heap or of another life; and
# the model whose reuse and adoption leave `watched` as the owner before
# left it (-DNO_WATCH_RESET) must fail, a span of the new owner left in
# its slot with no round to come.
# Prints the states, the depth and the time of each search.
# ctest-labels: model
set -uo pipefail
SKIP_NAME=test_model_large_cache
MODEL=large_cache.pml
# The longest search, with three slots, takes about 8 s and 600 MB. The
# model's own bounds (slots, spans, the owners' operations) are in
# large_cache.pml; with three slots the owners do fewer (-DOPS, -DOPS2).
TIME=60
TRAIL_QUIET='i|v|s|w|n|any|due|got|next|second'
. "${BRISKTEST_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}/tests/model/spin_check.sh"

expect_pass fixed
expect_pass fixed_3slots -DNSLOT=3 -DOPS=5 -DOPS2=2

# P1: a move of a span that does not start where the span is, the
# background thread's give-back of the span the owner has taken (or the
# owner's use of the one it gave back).
expect_violation take_without_exchange "with a take in two steps" \
  '\(sp\[[a-z]+\]==[0-9]+\)' -DTAKE_WITHOUT_EXCHANGE

# P3: a span still kept once the owner has finished and no round is
# pending.
expect_violation clear_without_recheck "without the look after the clearing" \
  '\(sp\[v\]!=[0-9]+\)' -DCLEAR_WITHOUT_RECHECK

# P2: a release into the set after the heap's memory went, or into the
# set of the heap's next life.
expect_violation steal_without_state_check "without the lock and the state check" \
  'violated \(mem&&' -DSTEAL_WITHOUT_STATE_CHECK

# P3: a put of the new owner finding `watched` set, a round taken while
# the heap was not owned.
expect_violation no_watch_reset "without the clearing of watched at reuse and adoption" \
  '\(sp\[v\]!=[0-9]+\)' -DNO_WATCH_RESET

finish
