#!/usr/bin/env bash
# The model of the page lists (tests/model/page_lists.pml), a remote-free
# protocol in which a freed block goes onto its own page's atomic word W
# (open, holding the page's list; FULL, the page on its owner's full list,
# where the first free opens the word and goes to the inbox at once to
# bring the page back; CLOSED, the heap without an owner), checked with
# spin: the model of the protocol must pass (no assertion violated, no
# invalid end state), with two freers that free a block each and with one
# freer that frees two; and each of these variants must fail: the
# background's clear of the watch flag without its second load of the
# inbox and W (-DNO_WATCH_RECHECK), blocks waiting with no look to come;
# the owner making a dry page's word FULL by a store instead of a CAS from
# 0 (-DCLOSE_BY_STORE), a block pushed just before lost; a freer that
# pushes onto a CLOSED word (-DPUSH_IGNORES_CLOSED), a block on the word of
# an abandoned heap's page; a serve of an abandoned heap's inbox that
# reopens a page back from the full list (-DSERVE_REOPENS), the word open
# after the abandon; the owner reopening a page back from the full list by
# a store of 0 instead of a CAS from FULL or CLOSED (-DREOPEN_BY_STORE),
# blocks pushed after a freer opened the word wiped off; and the freer that
# opens a FULL word pushing its block onto it instead of sending it to the
# inbox (-DNOTIFY_LATE), blocks stranded on the word of a page on the full
# list while the owner keeps going elsewhere.
# Prints the states and the depth of each search.
# ctest-labels: model
set -uo pipefail
SKIP_NAME=test_model_pages
src="${BRISKTEST_SOURCE_DIR:-$(cd "$(dirname "$0")/.." && pwd)}"
# The model's own bounds (blocks, freers, frees) are in page_lists.pml.
MODEL=page_lists.pml
MEMLIM=1024
PAN_TIMEOUT=60
TRAIL_DROP="\[(ci|cx|cy|cm|on_w) = |\[\(\(?(ci|cx)[<>=]|\[\(\(?where\[ci\]|\[assert\(|\[(b|oh|oc|om|done|sent|first|w|ie|vh|vc|pend|take|ok|got) = 0\]"
. "$src/tests/model/spin_check.sh"

# The protocol: two freers that free one block each; one freer that frees
# two blocks, one after the other.
must_pass fixed
must_pass fixed_one_freer -DNF=1 -DMAXF=2


# Without the second load of the inbox and W after the clear of the flag,
# a push onto the empty list (or into the empty inbox) that found the flag
# still set, and so scheduled no look, lands just before the clear; the
# owner stops for good, and the blocks wait with no look to come (P3).
expect_violation no_watch_recheck "without the load of the inbox and W after the clear" \
  '\(W_cnt==0\)&&' -DNO_WATCH_RECHECK

# A store of FULL: the owner loads W empty, a freer pushes, the store wipes
# the block off W (P1: a block marked on W off its chain).
expect_violation close_by_store "making a dry page's word FULL by a store" 'on_w==W_cnt' -DCLOSE_BY_STORE

# A push onto a CLOSED word: a block on the word of an abandoned heap's
# page, or on a closed word (P2).
expect_violation push_ignores_closed "pushing onto a closed word" \
  '!\(w_final\)|\(W_mode==0\)\|\|\(W_cnt==0\)' -DPUSH_IGNORES_CLOSED

# A serve of the abandoned heap that reopens a page back from the full
# list: the word is open after the abandon, and a later free pushes onto
# it (P2).
expect_violation serve_reopens "reopening a page in the serve of an abandoned heap" \
  '!\(w_final\)' -DSERVE_REOPENS

# A reopen by a store of 0: a freer opens the FULL word (its block on its
# way to the inbox), another pushes onto it, and the owner, bringing the
# page back, wipes that block off (P1).
expect_violation reopen_by_store "reopening a page back from the full list by a store" \
  'on_w==W_cnt' -DREOPEN_BY_STORE

# The freer that opens a FULL word pushes its block onto it: nothing goes
# to the inbox, the page stays on the full list with the block on W, and
# the owner, which keeps going elsewhere, never takes it (P5).
expect_violation notify_late "pushing the block that opens a FULL word onto it" \
  '!\(pg_full\)\|\|\(W_cnt==0\)' -DNOTIFY_LATE

if [ $status -eq 0 ]; then echo "$SKIP_NAME: ok"; else echo "$SKIP_NAME: FAILED"; fi
exit $status
