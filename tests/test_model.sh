#!/usr/bin/env bash
# The model of the remote-free protocol (tests/model/remote_free.pml,
# docs/DESIGN.md "The model of the remote-free protocol"), checked with spin:
# the model as the code has it must pass (no assertion violated, no invalid
# end state); the model without the retirement of a heap object on its
# last tag (-DNO_RETIRE) must fail, a batch of a destroyed life being linked
# into a later life once the tag wraps; the model without the push guard
# (-DNO_PUSH_GUARD) must fail, a push writing into a destroyed life; and the
# model without the clear of the inbox's watch flag when a heap changes
# hands (-DNO_HANDOVER_CLEAR) must fail, an owned heap's inbox holding
# blocks with no look of the background thread to come; and the model
# whose background rounds pass a busy watched heap by instead of retrying
# it (-DNO_BUSY_RETRY) must fail, an abandoned heap's inbox holding blocks
# with no look to come.
# Prints the states and the depth of each search.
# ctest-labels: model
set -uo pipefail
SKIP_NAME=test_model
src="${BRISKTEST_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
# The model's own bounds (blocks, threads, tags) are in remote_free.pml.
MODEL=remote_free.pml
MEMLIM=2048
TRAIL_DROP="\[(hd|n|k|k2|b|tag|ok|ph|pt|srv|first|rs|lk) = 0\]"
. "$src/tests/model/spin_check.sh"

# The protocol as the code has it: heap_destroy retires the object on its
# last tag.
must_pass fixed

# Without the retirement the tag wraps. With the push guarded (as the
# code has it), the violation found can only be the wrap: a batch whose
# tag matches a later life of its heap object.
expect_violation no_retire "without retirement" \
  '\(inbox_tag!=pt\)\|\|\(s_life\[t\]==g\)|\(s_life\[t\]==\(b/3\)\)' -DNO_RETIRE

# Without the push guard, a push that loaded the old tag writes its tail's
# link after the heap's memory went (one destroy is enough).
expect_violation no_push_guard "without the push guard" 'mem==s_life\[t\]' -DNO_PUSH_GUARD

# Without the clear at the handover, a watch flag set before H was reused,
# whose look the background thread passed by while H was FREE, stays set:
# the next push into the empty inbox schedules no look, and the idle
# owner's blocks wait with none to come (P4).
expect_violation no_handover_clear "without the clear at the handover" \
  '\(state!=1\)\|\|\(inbox_head==255\)\)\|\|look_pending\)' -DNO_HANDOVER_CLEAR

# Without the retry of a BUSY watched heap, a round passes by H while an
# exiting owner's serve holds it, using up the look that a push landing
# after the serve's drain scheduled: the serve stores ABANDONED, and the
# push's blocks wait in the inbox with no look to come (P5). Only a
# thread's heap is abandoned: the search, made for that kind alone, finds
# it at once (with both kinds, after the first-class heap's 6.5 million
# states).
expect_violation no_busy_retry "without the retry of a busy heap" \
  '\(state!=2\)\|\|\(inbox_head==255\)\)\|\|look_pending\)' -DNO_BUSY_RETRY -DTHREAD_HEAP

if [ $status -eq 0 ]; then echo "$SKIP_NAME: PASS"; else echo "$SKIP_NAME: FAILED"; fi
exit $status
