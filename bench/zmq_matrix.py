#!/usr/bin/env python3
"""brisk's messaging benchmark: the libzmq matrix over allocators.

    python3 bench/zmq_matrix.py --quick            # 8 cells, brisk, glibc, A/A: about 40 s
    python3 bench/zmq_matrix.py --full             # the whole matrix within the hour
    python3 bench/zmq_matrix.py --io 1 --runs 3 --alloc brisk,glibc,mimalloc
    python3 bench/zmq_matrix.py --only router_router/tcp,pair/inproc/64 --alloc brisk,glibc
    python3 bench/zmq_matrix.py --alloc brisk,glibc,mimalloc3=/path/libmimalloc3.so

A cell is KIND.PATTERN.TRANSPORT.SIZE.ioN (bench/zmq.c lists them: thr or
lat; pair, pubsub, dealer_dealer, dealer_router, router_router,
router_router_poll, pushpull; inproc, ipc, tcp; 64 B to 256 KiB; one or two
I/O threads). Each run of a cell is one process, `bench_zmq CELL`, started
through the bench_spawn launcher so its peak RSS is the cell's own. Runs are
interleaved: for each cell, run r of every allocator, the order of the
allocators rotated by r. Every allocator but glibc is preloaded; brisk-aa is
a second copy of brisk's library run as if it were another allocator.

Per cell and allocator: the median throughput (messages/s and MB/s) or the
median latency (half the round trip of the median round, us; the mean is
kept too), the median peak RSS and the run spread (median absolute
deviation of the runs over their median).

The A/A spread of a cell, A = max(D, R), where D = |m(brisk)/m(brisk-aa) - 1|
(m: the median of the runs) and R = the larger run spread of the two
copies. A comparison X vs Y on a cell is its speed ratio s (thr: X/Y, lat:
Y/X; above 1 = X better); X improves on Y beyond the A/A spread when
s > 1 + A and regresses when s < 1/(1 + A). brisk against brisk-aa counts
the cells where D > R instead (the copies differ beyond their own runs).

Output: a markdown summary on stdout, and under bench/out/ (or
--results-dir) <stem>.csv (per cell and allocator), <stem>-runs.csv (every
run), <stem>.json (everything). --from-json FILE re-reads a <stem>.json and
prints its summary again without running anything.

Any plan can be run in sittings. Every run is
appended to <stem>.journal as it ends (one JSON line; the first line holds
the plan: cells, allocators, settings and the sha256 of every library and of
bench_zmq). --stop-after MINUTES ends a sitting at the next cell boundary;
--resume STEM goes on where the journal ends. All the runs of a cell are
made in one sitting, interleaved as above: a cell left midway (the process
killed) is run again whole. Until every cell is done the outputs hold the
cells done so far and say so.
"""

import argparse
import csv
import datetime
import fnmatch
import hashlib
import json
import math
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from runner import (  # noqa: E402  (run as a script)
    Child, child_env, failure_text, find_built_peer, make_aa, parse_output, resolve_allocators,
    snapshot)

KINDS = ["thr", "lat"]
PATTERNS = ["pair", "pubsub", "dealer_dealer", "dealer_router", "router_router",
            "router_router_poll", "pushpull"]
TRANSPORTS = ["inproc", "ipc", "tcp"]
SIZES = [64, 256, 1024, 65536, 131072, 262144]
IOS = [1, 2]

# A handful of cells: inproc, ipc and tcp; small and large; a pattern of
# each family (PAIR, PUB/SUB, DEALER, ROUTER, poll-driven ROUTER); both kinds.
QUICK_CELLS = [
    "thr.pair.inproc.64.io1",
    "thr.pubsub.ipc.1024.io1",
    "thr.dealer_router.tcp.65536.io1",
    "thr.router_router_poll.inproc.262144.io1",
    "lat.pair.tcp.64.io1",
    "lat.pubsub.inproc.1024.io1",
    "lat.dealer_dealer.ipc.262144.io1",
    "lat.router_router.inproc.64.io1",
]

# Two I/O threads on a subset: every pattern, the ipc and tcp transports
# (inproc uses no I/O thread), a small and a large size, both kinds.
IO2_CELLS = ["%s.%s.%s.%d.io2" % (k, p, t, s) for k in KINDS for p, t, s in [
    ("pair", "tcp", 64), ("pair", "ipc", 65536),
    ("pubsub", "ipc", 1024), ("pubsub", "tcp", 262144),
    ("dealer_dealer", "tcp", 256), ("dealer_dealer", "ipc", 131072),
    ("dealer_router", "tcp", 64), ("dealer_router", "ipc", 262144),
    ("router_router", "ipc", 1024), ("router_router_poll", "tcp", 65536),
    ("pushpull", "tcp", 1024), ("pushpull", "ipc", 131072)]]

TIERS = {  # runs, warm-up s, timed s
    "quick": {"runs": 3, "warmup": 0.2, "secs": 0.3},
    "default": {"runs": 5, "warmup": 0.3, "secs": 0.6},
    # every io1 cell and IO2_CELLS, 5 runs of 6 allocators: within the
    # hour on 2 cores. A longer timed part does not make the A/A spread
    # smaller here (median over ten cells: 4.1% at 0.1 + 0.25 s, 4.2 and
    # 8.2% at 0.15 + 0.4 s, 8.6% at 0.3 + 0.6 s; docs/BENCHMARKS.md,
    # "Messaging"): the runs go to more runs per cell instead.
    "full": {"runs": 5, "warmup": 0.1, "secs": 0.25},
}
# The full tier's allocators unless --alloc names others: brisk, glibc, the
# two peers that lead libzmq's own throughput tools (Debian's tcmalloc and
# mimalloc 2.0.9), and mimalloc v3 when it is built (runner.BUILT_PEERS).
FULL_ALLOCATORS = "brisk,glibc,tcmalloc,mimalloc"
START_COST = 0.015  # seconds a cell's process takes besides its warm-up and timed phase

REF = "brisk"
BASE = "glibc"


# --------------------------------------------------------------------------
# Cells

def all_cells():
    return ["%s.%s.%s.%d.io%d" % (k, p, t, s, io)
            for k in KINDS for p in PATTERNS for t in TRANSPORTS for s in SIZES for io in IOS]


def full_cells():
    """Every cell with one I/O thread, then IO2_CELLS."""
    return [c for c in all_cells() if c.endswith(".io1")] + list(IO2_CELLS)


def parse_cell(name):
    """'thr.pair.tcp.64.io1' -> dict(kind, pattern, transport, size, io)."""
    parts = name.split(".")
    if len(parts) != 5 or parts[0] not in KINDS or not parts[4].startswith("io"):
        raise ValueError("not a cell name: %r" % name)
    return {"kind": parts[0], "pattern": parts[1], "transport": parts[2], "size": int(parts[3]),
            "io": int(parts[4][2:])}


def _match_term(term, name):
    """A filter term: PATTERN[/TRANSPORT[/SIZE[/KIND]]] (each part a glob,
    empty = any), a glob on the whole name, or one word naming a pattern,
    transport, size or kind."""
    c = parse_cell(name)
    if "/" in term:
        parts = term.split("/")
        fields = [c["pattern"], c["transport"], str(c["size"]), c["kind"]]
        if len(parts) > 4:
            raise SystemExit("zmq_matrix: bad --only term %r" % term)
        return all(not p or fnmatch.fnmatchcase(f, p) for p, f in zip(parts, fields))
    if any(ch in term for ch in ".*?["):
        return fnmatch.fnmatchcase(name, term)
    return term in (c["pattern"], c["transport"], str(c["size"]), c["kind"])


def select_cells(tier, only=None, ios=None):
    cells = (list(QUICK_CELLS) if tier == "quick" and not only
             else full_cells() if tier == "full" and not only else all_cells())
    if only:
        terms = [t.strip() for t in only.split(",") if t.strip()]
        cells = [c for c in cells if any(_match_term(t, c) for t in terms)]
    if ios:
        cells = [c for c in cells if parse_cell(c)["io"] in ios]
    return cells


def plan(cells, names, runs):
    """(cell, run, allocator) in run order: per cell, run r of every
    allocator, the order rotated by r."""
    n = len(names)
    return [(c, r, names[(i + r) % n]) for c in cells for r in range(runs) for i in range(n)]


# --------------------------------------------------------------------------
# Statistics

def median(xs):
    return statistics.median(xs) if xs else None


def geomean(xs):
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def rel_mad(xs):
    """Median absolute deviation over the median (0 for a single run)."""
    if not xs:
        return None
    m = median(xs)
    if len(xs) < 2 or not m:
        return 0.0
    return median([abs(x - m) for x in xs]) / m


def value_of(rec):
    """The figure a run is judged by: for thr its messages/s over the timed
    phase; for lat the median round's half round trip in us (the mean
    swings with the rare rounds in which another process held a core)."""
    if not rec.get("ok"):
        return None
    return rec.get("p50_us") if parse_cell(rec["cell"])["kind"] == "lat" else rec.get("msgs_s")


def cell_stats(records, cells, names, modes=None):
    """{(cell, alloc): medians, spread, run count} over the ok runs. In a
    cell with two modes (mode_splits) value and spread are over the runs
    in the cell's mode (all its runs for an allocator with none there);
    value_all is the median of every run."""
    out = {}
    modes = modes or {}
    for c in cells:
        kind = parse_cell(c)["kind"]
        for a in names:
            rs = [r for r in records if r["cell"] == c and r["alloc"] == a]
            ok = [r for r in rs if r.get("ok")]
            every = [value_of(r) for r in ok if value_of(r) is not None]
            vals = every
            if c in modes:
                vals = [v for v in every if in_mode(modes[c], v)] or every

            def med(key):
                return median([r[key] for r in ok if r.get(key) is not None])
            out[(c, a)] = {
                "cell": c, "alloc": a, "kind": kind, "runs": len(rs), "ok": len(ok),
                "errors": sorted(set(r.get("error") or "" for r in rs if not r.get("ok"))),
                "value": median(vals), "spread": rel_mad(vals), "value_all": median(every),
                "min": min(vals) if vals else None, "max": max(vals) if vals else None,
                "msgs_s": med("msgs_s") if kind == "thr" else None,
                "mb_s": med("mb_s") if kind == "thr" else None,
                "us": med("us") if kind == "lat" else None,
                "cpu_us": med("cpu_us"),
                "p50_us": med("p50_us") if kind == "lat" else None,
                "p99_us": med("p99_us") if kind == "lat" else None,
                "rss_kib": med("rss_kib"),
                "rss_spread": rel_mad([r["rss_kib"] for r in ok if r.get("rss_kib")]),
            }
    return out


def speed_ratio(stats, cell, x, y):
    """Above 1 when x is better than y on the cell (thr: x/y; lat: y/x)."""
    a, b = stats.get((cell, x)), stats.get((cell, y))
    if not a or not b or not a["value"] or not b["value"]:
        return None
    return a["value"] / b["value"] if a["kind"] == "thr" else b["value"] / a["value"]


def aa_spreads(stats, cells, ref, aa, key="value", spread="spread"):
    """Per cell: D (the copies' medians apart), R (their larger run
    spread), A = max(D, R); of the cell's figure, or with key="rss_kib",
    spread="rss_spread" of its peak RSS."""
    out = {}
    for c in cells:
        a, b = stats.get((c, ref)), stats.get((c, aa))
        if not a or not b or not a[key] or not b[key]:
            out[c] = None
            continue
        d = abs(a[key] / b[key] - 1)
        r = max(a[spread] or 0.0, b[spread] or 0.0)
        out[c] = {"D": d, "R": r, "A": max(d, r)}
    return out


def pct_diff(stats, cell, x, y):
    """x against y in percent of y's figure (thr: + is faster; lat: - is faster)."""
    a, b = stats.get((cell, x)), stats.get((cell, y))
    if not a or not b or not a["value"] or not b["value"]:
        return None
    return (a["value"] / b["value"] - 1) * 100


def compare(stats, cells, x, y, spreads, self_aa=False):
    """x against y, per kind: mean/median/min/max percent difference, best
    and worst cells, counts beyond the A/A spread."""
    out = {}
    for kind in KINDS:
        rows = []
        for c in cells:
            if parse_cell(c)["kind"] != kind:
                continue
            d, s = pct_diff(stats, c, x, y), speed_ratio(stats, c, x, y)
            if d is None:
                continue
            rows.append((c, d, s))
        out[kind] = summarize_rows(rows, spreads, self_aa)
    return out


def summarize_rows(rows, spreads, self_aa=False):
    """Rows (cell, percent difference, speed ratio: above 1 = better):
    mean/median/min/max difference, best and worst cells, the cells better
    and worse beyond their A/A spread (self_aa: the copies' medians further
    apart than their runs). None without rows."""
    if not rows:
        return None
    ds = [d for _, d, _ in rows]
    best = max(rows, key=lambda t: t[2])
    worst = min(rows, key=lambda t: t[2])
    better, worse = [], []
    for c, _, s in rows:
        sp = spreads.get(c) if spreads else None
        if sp is None:
            continue
        if self_aa:
            if sp["D"] > sp["R"]:
                (better if s > 1 else worse).append(c)
        elif s > 1 + sp["A"]:
            better.append(c)
        elif s < 1 / (1 + sp["A"]):
            worse.append(c)
    return {"cells": len(rows), "mean": statistics.mean(ds), "median": median(ds),
            "min": min(ds), "max": max(ds),
            "best": best[0], "best_pct": best[1], "worst": worst[0], "worst_pct": worst[1],
            "improved": len(better), "regressed": len(worse),
            "improved_cells": better, "regressed_cells": worse}


def compare_rss(stats, cells, x, y, spreads, self_aa=False):
    """compare() for the peak RSS over every cell (percent of y's; - is
    smaller, which counts as better)."""
    rows = []
    for c in cells:
        a, b = stats.get((c, x)), stats.get((c, y))
        if a and b and a["rss_kib"] and b["rss_kib"]:
            rows.append((c, (a["rss_kib"] / b["rss_kib"] - 1) * 100, b["rss_kib"] / a["rss_kib"]))
    return summarize_rows(rows, spreads, self_aa)


# A cell has two modes when the runs of one allocator fall into two groups
# at least this many times apart (a throughput cell whose receiver keeps up
# in some runs and lets the pipes fill in others).
MODE_GAP = 1.5


def mode_splits(records, cells, names):
    """The cells with two modes: where some allocator's runs have a gap of
    at least MODE_GAP between two of them (differences between allocators
    are not modes). The widest such gap sets the cell's boundary, which
    sorts every allocator's runs into the fast and the slow mode (for lat
    the fast mode is the lower latency). Per cell: the gap, the boundary,
    per allocator its (fast, slow) runs, and the mode most runs fell into
    (ties: the fast one), which the cell's comparisons use."""
    out = {}
    for c in cells:
        per = {}
        for r in records:
            v = value_of(r) if r["cell"] == c else None
            if v:
                per.setdefault(r["alloc"], []).append(v)
        best = None
        for vals in per.values():
            vals = sorted(vals)
            for i in range(len(vals) - 1):
                g = vals[i + 1] / vals[i]
                if g >= MODE_GAP and (best is None or g > best[0]):
                    best = (g, math.sqrt(vals[i] * vals[i + 1]))
        if best is None:
            continue
        gap, cut = best
        lat = parse_cell(c)["kind"] == "lat"
        split = {}
        for a in names:
            mine = per.get(a, [])
            hi = sum(1 for v in mine if v > cut)
            split[a] = (len(mine) - hi, hi) if lat else (hi, len(mine) - hi)
        fast = sum(f for f, _ in split.values())
        slow = sum(sl for _, sl in split.values())
        out[c] = {"gap": gap, "cut": cut, "split": split, "lat": lat,
                  "mode": "fast" if fast >= slow else "slow"}
    return out


def in_mode(m, v):
    """Is figure v (of a cell with modes m) in the mode the cell is judged by?"""
    fast = (v < m["cut"]) if m["lat"] else (v > m["cut"])
    return fast == (m["mode"] == "fast")


def versus_best_peer(stats, cells, ref, peers, spreads, threshold=0.90):
    """Per cell the best peer; the cells where ref is below threshold x the
    best peer's speed and beyond the cell's A/A spread."""
    losses, leads, rows = [], 0, []
    for c in cells:
        cand = [(speed_ratio(stats, c, p, ref), p) for p in peers]
        cand = [(s, p) for s, p in cand if s is not None]
        if not cand or not stats.get((c, ref)) or not stats[(c, ref)]["value"]:
            continue
        s_best, best = max(cand)
        r = 1.0 / s_best  # ref's speed over the best peer's
        sp = spreads.get(c) if spreads else None
        a = sp["A"] if sp else 0.0
        rows.append({"cell": c, "best_peer": best, "ratio": r})
        if r >= 1:
            leads += 1
        if r < threshold and r < 1 / (1 + a):
            losses.append({"cell": c, "best_peer": best, "ratio": r, "aa": a})
    losses.sort(key=lambda x: x["ratio"])
    return {"cells": len(rows), "leads": leads, "losses": losses, "per_cell": rows,
            "threshold": threshold}


def runs_apart(records, cells, ref, aa, peers):
    """Per peer, the cells where every run of the peer is better than every
    run of ref and of its A/A copy ("ahead"), and the reverse ("behind").
    With n runs each, chance alone puts n runs on one side of 2n others in
    1 of C(3n, n) cells (1 in 84 for 3 runs)."""
    vals = {}
    for r in records:
        v = value_of(r)
        if v is not None:
            vals.setdefault((r["cell"], r["alloc"]), []).append(v)
    out = {}
    for p in peers:
        ahead, behind = [], []
        for c in cells:
            mine = vals.get((c, ref), []) + (vals.get((c, aa), []) if aa else [])
            theirs = vals.get((c, p), [])
            if len(mine) < 2 or len(theirs) < 2:
                continue
            if parse_cell(c)["kind"] == "lat":  # lower is better: compare speeds
                mine, theirs = [1 / x for x in mine], [1 / x for x in theirs]
            ratio = statistics.median(theirs) / statistics.median(mine)
            if min(theirs) > max(mine):
                ahead.append((c, ratio))
            elif max(theirs) < min(mine):
                behind.append((c, ratio))
        out[p] = {"ahead": sorted(ahead, key=lambda t: -t[1]),
                  "behind": sorted(behind, key=lambda t: t[1])}
    return out


def geomeans(stats, cells, names):
    """Per allocator over the cells every allocator has: throughput
    geomean (msgs/s), latency geomean (us), and against glibc: the
    geomean of the peak RSS ratios."""
    out = {}
    for kind, key in (("thr", "thr_msgs_s"), ("lat", "lat_us")):
        common = [c for c in cells if parse_cell(c)["kind"] == kind
                  and all(stats.get((c, a)) and stats[(c, a)]["value"] for a in names)]
        for a in names:
            out.setdefault(a, {})[key] = geomean([stats[(c, a)]["value"] for c in common])
            out[a][kind + "_cells"] = len(common)
    rss_common = [c for c in cells
                  if all(stats.get((c, a)) and stats[(c, a)]["rss_kib"] for a in names)]
    for a in names:
        out[a]["rss_kib"] = geomean([stats[(c, a)]["rss_kib"] for c in rss_common])
        out[a]["rss_vs_glibc"] = (geomean([stats[(c, a)]["rss_kib"] / stats[(c, BASE)]["rss_kib"]
                                           for c in rss_common]) if BASE in names else None)
        out[a]["rss_cells"] = len(rss_common)
    return out


def summarize(records, cells, names, ref=REF, aa=None, base=BASE):
    modes = mode_splits(records, cells, names)
    stats = cell_stats(records, cells, names, modes)
    spreads = aa_spreads(stats, cells, ref, aa) if aa and aa in names and ref in names else {}
    known = [s for s in spreads.values() if s]
    aa_dist = None
    if known:
        As = sorted(s["A"] for s in known)
        aa_dist = {"cells": len(As), "median": median(As), "max": As[-1],
                   "p90": As[min(len(As) - 1, int(math.ceil(0.9 * len(As))) - 1)],
                   "under_10pct": sum(1 for x in As if x < 0.10),
                   "worst": sorted(((s["A"], c) for c, s in spreads.items() if s),
                                   reverse=True)[:5]}
    vs_base = {}
    if base in names:
        for a in names:
            if a != base:
                vs_base[a] = compare(stats, cells, a, base, spreads)
    self_aa = compare(stats, cells, ref, aa, spreads, self_aa=True) if spreads else None
    peers = [a for a in names if a not in (ref, aa)]
    best = versus_best_peer(stats, cells, ref, peers, spreads) if ref in names and peers else None
    apart = runs_apart(records, cells, ref, aa, peers) if ref in names else {}
    rss_spreads = aa_spreads(stats, cells, ref, aa, "rss_kib", "rss_spread") if spreads else {}
    rss_vs = {}
    if base in names:
        for a in names:
            if a not in (base, aa):
                rss_vs["%s vs %s" % (a, base)] = compare_rss(stats, cells, a, base, rss_spreads)
    for a in names:
        if a not in (ref, aa, base):
            rss_vs["%s vs %s" % (ref, a)] = compare_rss(stats, cells, ref, a, rss_spreads)
    if rss_spreads:
        rss_vs["%s vs %s" % (ref, aa)] = compare_rss(stats, cells, ref, aa, rss_spreads, True)
    peer_vs = {a: compare(stats, cells, ref, a, spreads) for a in names
               if a not in (ref, aa, base)} if spreads else {}
    failures = [{"cell": s["cell"], "alloc": s["alloc"], "failed": s["runs"] - s["ok"],
                 "errors": s["errors"]} for s in stats.values() if s["runs"] > s["ok"]]
    return {"stats": stats, "spreads": spreads, "aa": aa_dist, "vs_base": vs_base,
            "self_aa": self_aa, "best_peer": best, "apart": apart, "peer_vs": peer_vs,
            "rss_vs": rss_vs, "modes": modes,
            "geo": geomeans(stats, cells, names),
            "failures": failures, "ref": ref, "aa_name": aa, "base": base, "names": names,
            "cells": cells}


# --------------------------------------------------------------------------
# Report

def _f(x, fmt="%.1f"):
    return "-" if x is None else fmt % x


def _pct(x):
    return "-" if x is None else "%+.1f%%" % x


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def _cmp_rows(label, cmp_, kind):
    k = cmp_.get(kind) if cmp_ else None
    if not k:
        return [label, "-", "-", "-", "-", "-", "-", "-", "-"]
    return [label, k["cells"], _pct(k["mean"]), _pct(k["median"]), _pct(k["min"]), _pct(k["max"]),
            "%s (%s)" % (k["best"], _pct(k["best_pct"])),
            "%s (%s)" % (k["worst"], _pct(k["worst_pct"])),
            "%d / %d" % (k["improved"], k["regressed"])]


def report(summary, meta):
    s = summary
    ref, aa, base, names = s["ref"], s["aa_name"], s["base"], s["names"]
    L = []
    L.append("# brisk messaging matrix: %s (%s, %d runs, %s)"
             % (meta.get("tier", "?"), meta.get("date", "?"), meta.get("runs", 0),
                meta.get("host", "?")))
    L.append("")
    if meta.get("command"):
        L.append("Command: `%s`" % meta["command"])
        L.append("")
    if meta.get("partial"):
        L.append("**Partial: %s done** (the others wait in the journal's next sitting)."
                 % meta["partial"])
        L.append("")
    if meta.get("sittings"):
        L.append("Made in %d sittings: %s." % (len(meta["sittings"]), "; ".join(
            "%s, %d runs in %.0f s" % (x["date"], x["runs"], x["elapsed_s"])
            for x in meta["sittings"])))
        L.append("")
    L.append("%d cells (%d throughput, %d latency); allocators: %s; each cell %s s timed after "
             "%s s of warm-up, one process per run (peak RSS per cell)."
             % (len(s["cells"]), sum(1 for c in s["cells"] if c.startswith("thr.")),
                sum(1 for c in s["cells"] if c.startswith("lat.")), ", ".join(names),
                meta.get("secs", "?"), meta.get("warmup", "?")))
    L.append("")
    L.append("Throughput: median over the runs of messages/s, compared as percent of the "
             "other's (+ = faster). Latency: median over the runs of the median round's half "
             "round trip in us (- = faster); the mean is in the CSV.")
    L.append("")
    if s["aa"]:
        d = s["aa"]
        L.append("## A/A spread")
        L.append("")
        L.append("Per cell, A = max(D, R): D = |median(%s)/median(%s) - 1|, R = the larger "
                 "run spread (median absolute deviation over the median) of the two copies. "
                 "A difference counts as beyond the A/A spread on a cell when the speed ratio "
                 "(thr: X/Y, lat: Y/X) is above 1 + A or below 1/(1 + A)." % (ref, aa))
        L.append("")
        L.append("A over %d cells: median %.1f%%, 90th percentile %.1f%%, max %.1f%%; "
                 "%d of %d cells under 10%%. Widest: %s."
                 % (d["cells"], d["median"] * 100, d["p90"] * 100, d["max"] * 100,
                    d["under_10pct"], d["cells"],
                    ", ".join("%s %.1f%%" % (c, a * 100) for a, c in d["worst"])))
        L.append("")
    hdr = ["", "cells", "mean", "median", "min", "max", "best cell", "worst cell",
           "beyond A/A: better / worse"]
    if s["vs_base"] or s["self_aa"]:
        for kind, title in (("thr", "Throughput"), ("lat", "Latency")):
            L.append("## %s against %s, per cell" % (title, base))
            L.append("")
            rows = [_cmp_rows("%s vs %s" % (a, base), s["vs_base"][a], kind)
                    for a in names if a in s["vs_base"] and a != aa]
            if s["self_aa"]:
                r = _cmp_rows("%s vs %s" % (ref, aa), s["self_aa"], kind)
                rows.append(r)
            L.append(md_table(hdr, rows))
            L.append("")
        if s["self_aa"]:
            L.append("(%s vs %s counts the cells whose medians are further apart than either "
                     "copy's run spread.)" % (ref, aa))
            L.append("")
    if s.get("peer_vs"):
        for kind, title in (("thr", "Throughput"), ("lat", "Latency")):
            L.append("## %s: %s against each peer, per cell" % (title, ref))
            L.append("")
            L.append(md_table(hdr, [_cmp_rows("%s vs %s" % (ref, a), c, kind)
                                    for a, c in s["peer_vs"].items()]))
            L.append("")
    if s.get("rss_vs"):
        L.append("## Peak RSS, per cell")
        L.append("")
        L.append("Percent of the second's peak RSS (- = smaller); beyond A/A against the "
                 "cell's RSS A/A spread, counted as smaller / larger.")
        L.append("")
        L.append(md_table(hdr, [_cmp_rows(label, {"rss": c}, "rss")
                                for label, c in s["rss_vs"].items()]))
        L.append("")
    if s.get("modes"):
        m = s["modes"]
        L.append("## Cells with two modes")
        L.append("")
        L.append("%d of %d cells where an allocator's runs fall into two groups at least "
                 "%.1fx apart; the widest such gap is the cell's boundary. Per allocator its "
                 "runs in the fast / slow mode. The cell's figures above are the medians of "
                 "the runs in the mode most runs fell into (judged by), so that a median does "
                 "not land on one mode by chance." % (len(m), len(s["cells"]), MODE_GAP))
        L.append("")
        L.append(md_table(["cell", "gap", "judged by"] + list(names),
                          [[c, "%.1fx" % d["gap"], d["mode"]] +
                           ["%d/%d" % d["split"][a] for a in names]
                           for c, d in sorted(m.items())]))
        L.append("")
    g = s["geo"]
    shown = [a for a in names if a != aa]
    if ref in g:
        L.append("## Geometric means")
        L.append("")
        rows = []
        for a in shown:
            t, l = g[a].get("thr_msgs_s"), g[a].get("lat_us")
            tr = t / g[ref]["thr_msgs_s"] if t and g[ref].get("thr_msgs_s") else None
            lr = l / g[ref]["lat_us"] if l and g[ref].get("lat_us") else None
            rows.append([a, _f(t, "%.0f"), _f(tr, "%.3f"), _f(l, "%.2f"), _f(lr, "%.3f"),
                         _f(g[a].get("rss_kib") and g[a]["rss_kib"] / 1024, "%.1f"),
                         _f(g[a].get("rss_vs_glibc"), "%.3f")])
        L.append(md_table(["allocator", "thr geomean msgs/s", "thr vs %s" % ref,
                           "lat geomean us", "lat vs %s" % ref, "peak RSS geomean MiB",
                           "RSS vs %s" % base], rows))
        L.append("")
        L.append("(thr vs %s above 1 = faster than %s; lat vs %s below 1 = faster. Over the "
                 "%d thr and %d lat cells where every allocator has a result; RSS over %d.)"
                 % (ref, ref, ref, g[ref].get("thr_cells", 0), g[ref].get("lat_cells", 0),
                    g[ref].get("rss_cells", 0)))
        L.append("")
    b = s["best_peer"]
    if b:
        L.append("## %s against the best peer of each cell" % ref)
        L.append("")
        L.append("%s leads or ties on %d of %d cells; below %.2fx the best peer beyond the A/A "
                 "spread on %d (the best of several noisy medians is biased upward when the "
                 "A/A spread is wide; see the runs entirely apart below):"
                 % (ref, b["leads"], b["cells"], b["threshold"], len(b["losses"])))
        L.append("")
        if b["losses"]:
            L.append(md_table(["cell", "leading peer", "%s / best" % ref, "A/A spread"],
                              [[x["cell"], x["best_peer"], "%.2f" % x["ratio"],
                                "%.1f%%" % (x["aa"] * 100)] for x in b["losses"]]))
        else:
            L.append("(none)")
        L.append("")
    if s.get("apart"):
        L.append("## Runs entirely apart")
        L.append("")
        L.append("Cells where every run of a peer is faster than every run of %s and %s "
                 "(ahead), or slower than all of them (behind); speed ratio peer/%s (thr: "
                 "msgs/s, lat: 1/us). A/A-free evidence: by chance, with n runs each, 1 cell "
                 "in C(3n, n)." % (ref, aa or ref, ref))
        L.append("")
        rows = []
        for p, d in s["apart"].items():
            rows.append([p, len(d["ahead"]), ", ".join("%s %.2f" % t for t in d["ahead"]) or "-",
                         len(d["behind"])])
        L.append(md_table(["peer", "ahead", "cells ahead (peer/%s)" % ref, "behind"], rows))
        L.append("")
    if s["failures"]:
        L.append("## Failed runs")
        L.append("")
        L.append(md_table(["cell", "allocator", "failed", "errors"],
                          [[f["cell"], f["alloc"], f["failed"], "; ".join(f["errors"])]
                           for f in s["failures"]]))
        L.append("")
    for n in meta.get("notes", []):
        L.append("Note: " + n)
    return "\n".join(L).rstrip() + "\n"


# --------------------------------------------------------------------------
# Output files

def _num(x):
    if x is None:
        return ""
    if isinstance(x, float):
        return "%.6g" % x
    return x


def write_outputs(results_dir, stem, meta, summary, records):
    os.makedirs(results_dir, exist_ok=True)
    s = summary
    paths = {}
    p = os.path.join(results_dir, stem + ".csv")
    with open(p, "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["cell", "kind", "pattern", "transport", "size", "io", "allocator", "runs",
                     "ok", "msgs_s", "mb_s", "lat_p50_us", "lat_mean_us", "p99_us", "cpu_us",
                     "peak_rss_kib",
                     "spread", "aa_spread", "speed_vs_glibc", "speed_vs_brisk", "errors"])
        for c in s["cells"]:
            pc = parse_cell(c)
            sp = s["spreads"].get(c)
            for a in s["names"]:
                st = s["stats"][(c, a)]
                wr.writerow([c, pc["kind"], pc["pattern"], pc["transport"], pc["size"], pc["io"],
                             a, st["runs"], st["ok"], _num(st["msgs_s"]), _num(st["mb_s"]),
                             _num(st["p50_us"]), _num(st["us"]), _num(st["p99_us"]),
                             _num(st["cpu_us"]),
                             _num(st["rss_kib"]), _num(st["spread"]),
                             _num(sp["A"] if sp else None),
                             _num(speed_ratio(s["stats"], c, a, s["base"])),
                             _num(speed_ratio(s["stats"], c, a, s["ref"])),
                             "; ".join(st["errors"])])
    paths["csv"] = p
    p = os.path.join(results_dir, stem + "-runs.csv")
    with open(p, "w", newline="") as f:
        wr = csv.writer(f)
        keys = ["cell", "alloc", "run", "ok", "msgs_s", "mb_s", "msgs_s_med", "us", "p50_us",
                "p99_us", "cpu_us", "load",
                "rss_kib", "wall", "error"]
        wr.writerow(["order"] + keys)
        for i, r in enumerate(records):
            wr.writerow([i] + [_num(int(r[k]) if k == "ok" else r.get(k)) for k in keys])
    paths["runs_csv"] = p
    p = os.path.join(results_dir, stem + ".json")
    doc = {"meta": meta, "reference": s["ref"], "aa": s["aa_name"], "base": s["base"],
           "allocators": meta.get("allocators", [{"name": n} for n in s["names"]]),
           "cells": s["cells"],
           "stats": [s["stats"][(c, a)] for c in s["cells"] for a in s["names"]],
           "aa_spread": s["spreads"], "aa_distribution": s["aa"], "vs_glibc": s["vs_base"],
           "self_aa": s["self_aa"], "best_peer": s["best_peer"], "geomean": s["geo"],
           "runs_apart": s["apart"],
           "failures": s["failures"], "runs": records}
    with open(p, "w") as f:
        json.dump(doc, f, indent=1, default=str)
    paths["json"] = p
    return paths


# --------------------------------------------------------------------------
# Running

def loadavg():
    """The machine's 1-minute load average (other processes compete for the cores)."""
    try:
        with open("/proc/loadavg") as f:
            return float(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def run_cell(bench, cell, alloc, run, ctx):
    argv = [bench, "--secs", str(ctx["secs"]), "--warmup", str(ctx["warmup"])]
    if ctx.get("pin"):
        argv += ["--pin", ctx["pin"]]
    argv.append(cell)
    if ctx.get("cpus"):
        argv = ["taskset", "-c", ctx["cpus"]] + argv
    child = Child(argv, child_env(alloc, run), ctx["timeout"], ctx["spawn"], alloc.lib)
    ctx["current"] = child
    try:
        r = child.wait()
    finally:
        ctx["current"] = None
        child.kill()
    result, metrics = parse_output(r["stdout"])
    m = metrics.get(cell, {})
    rec = {"cell": cell, "alloc": alloc.name, "run": run, "ok": False, "error": None,
           "rss_kib": r["rss_kib"], "wall": r["wall"], "load": loadavg()}
    for k in ("msgs_s", "mb_s", "msgs_s_med", "us", "p50_us", "p99_us", "cpu_us"):
        if k in m:
            rec[k] = m[k]
    if (r["rc"] == 0 and not r["timed_out"] and result and result.get("check") == "ok"
            and ("msgs_s" in m or "us" in m)):
        rec["ok"] = True
    else:
        rec["error"] = failure_text(r) if r["rc"] or r["timed_out"] or r["signal"] else \
            "no METRIC line for the cell"
        rec["stderr_tail"] = r["stderr"][-1000:]
    return rec


def parse_args(argv):
    p = argparse.ArgumentParser(description="brisk's libzmq matrix over allocators",
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__)
    t = p.add_mutually_exclusive_group()
    t.add_argument("--quick", action="store_const", dest="tier", const="quick",
                   help="%d cells, 3 runs, brisk and glibc unless --alloc" % len(QUICK_CELLS))
    t.add_argument("--full", action="store_const", dest="tier", const="full",
                   help="every cell with one I/O thread and %d with two, 3 runs, brisk, glibc, "
                        "tcmalloc, mimalloc (and mimalloc3 when built) unless --alloc: within "
                        "the hour" % len(IO2_CELLS))
    p.add_argument("--only", help="comma list: PATTERN[/TRANSPORT[/SIZE[/KIND]]] (parts are "
                                  "globs), a glob on cell names, or a pattern, transport, size "
                                  "or kind")
    p.add_argument("--io", help="I/O thread counts to keep, e.g. 1 or 1,2")
    p.add_argument("--alloc", help="comma list: peer names, NAME=/path/lib.so, NAME=none "
                                   "(default: brisk,glibc for --quick, else every peer "
                                   "runner.py knows)")
    p.add_argument("--runs", type=int, help="runs per cell and allocator")
    p.add_argument("--secs", type=float, help="timed seconds per cell")
    p.add_argument("--warmup", type=float, help="warm-up seconds per cell")
    p.add_argument("--pin", help="bench_zmq --pin TX,RX[,IO]: CPUs of the two application "
                                 "threads (and the I/O threads)")
    p.add_argument("--cpus", help="run every cell under taskset -c CPUS")
    p.add_argument("--no-aa", action="store_true", help="skip the A/A copy of brisk")
    p.add_argument("--build-dir", default=os.environ.get("BRISK_BUILD_DIR",
                                                          os.path.join(ROOT, "build")))
    p.add_argument("--brisk-lib", help="default: BUILD_DIR/libbrisk.so")
    p.add_argument("--bin-dir", help="default: BUILD_DIR/bench")
    p.add_argument("--results-dir", default=os.path.join(HERE, "out"))
    p.add_argument("--stem", help="output name stem (default zmq-TIER-DATE)")
    p.add_argument("--resume", metavar="STEM",
                   help="go on with the run STEM from its journal (RESULTS_DIR/STEM.journal): "
                        "its cells, allocators and settings, which the other options cannot "
                        "change (--brisk-lib included); runs already made are not made again, "
                        "a cell left midway is run again whole, and a library that changed "
                        "stops it")
    p.add_argument("--stop-after", type=float, metavar="MINUTES",
                   help="stop at the first cell boundary after MINUTES, one cell at least (the "
                        "journal keeps every run: --resume STEM goes on)")
    p.add_argument("--timeout", type=float, default=60.0, help="seconds per run")
    p.add_argument("--from-json", help="print the summary of an earlier <stem>.json; run nothing")
    p.add_argument("--no-install", action="store_true", help="never apt-get install peers")
    p.add_argument("--dry-run", action="store_true", help="print the cells and run order; stop")
    p.add_argument("--quiet", action="store_true")
    a = p.parse_args(argv)
    a.tier = a.tier or "default"
    return a


def records_from_json(path):
    with open(path) as f:
        doc = json.load(f)
    return doc


# --------------------------------------------------------------------------
# The journal: a run in sittings

JOURNAL_VERSION = 1
# the options that make the plan; a resumed run takes them from its journal
PLAN_ARGS = ("tier", "only", "io", "alloc", "runs", "secs", "warmup", "pin", "cpus", "no_aa",
             "timeout", "brisk_lib")


def file_sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def journal_path(results_dir, stem):
    return os.path.join(results_dir, stem + ".journal")


def read_journal(path):
    """(header, records, sittings) of a journal. A line cut short (the
    process killed while writing it) is skipped."""
    header, records, sittings = None, [], []
    with open(path) as f:
        for line in f:
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if header is None:
                header = doc
            elif "sitting" in doc:
                sittings.append(doc["sitting"])
            else:
                records.append(doc)
    if not header or header.get("journal") != JOURNAL_VERSION:
        raise SystemExit("zmq_matrix: %s is not a journal of this version" % path)
    return header, records, sittings


def complete_cells(records, cells, names, runs):
    """The cells of which every planned run (each allocator, each run) is
    recorded, in plan order."""
    have = {}
    for r in records:
        have.setdefault(r["cell"], set()).add((r["alloc"], r["run"]))
    want = {(a, run) for a in names for run in range(runs)}
    return [c for c in cells if want <= have.get(c, set())]


def check_same_plan(header, cells, names, libs, bench_sha):
    """A resumed run must measure what its journal began with."""
    why = []
    if header["cells"] != cells:
        why.append("the cells differ")
    if header["names"] != names:
        why.append("the allocators differ (%s, now %s)" % (",".join(header["names"]),
                                                            ",".join(names)))
    for n in names:
        was, now = header["libs"].get(n), libs.get(n)
        if n in header["libs"] and was != now:
            why.append("%s's library changed (sha256 %s, now %s)"
                       % (n, (was or "none")[:12], (now or "none")[:12]))
    if header["bench_sha256"] != bench_sha:
        why.append("bench_zmq changed")
    if why:
        raise SystemExit("zmq_matrix: cannot resume: %s. One table is one build measured "
                         "under one plan: start a new run." % "; ".join(why))


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    log = lambda m: sys.stderr.write("zmq_matrix: %s\n" % m)  # noqa: E731
    if args.from_json:
        doc = records_from_json(args.from_json)
        names = [a["name"] for a in doc["allocators"]]
        s = summarize(doc["runs"], doc["cells"], names, doc.get("reference", REF), doc.get("aa"))
        sys.stdout.write(report(s, doc["meta"]))
        return 0
    if args.brisk_lib:
        args.brisk_lib = os.path.abspath(args.brisk_lib)  # a resume may start elsewhere
    header, journaled, sittings = None, [], []
    if args.resume:
        jpath = journal_path(args.results_dir, args.resume)
        if not os.path.exists(jpath):
            raise SystemExit("zmq_matrix: no journal %s (a finished run removes its journal)"
                             % jpath)
        header, journaled, sittings = read_journal(jpath)
        for k in PLAN_ARGS:
            setattr(args, k, header["args"].get(k, getattr(args, k)))
        args.stem = args.resume
    build_dir = os.path.abspath(args.build_dir)
    bin_dir = os.path.abspath(args.bin_dir or os.path.join(build_dir, "bench"))
    brisk_lib = args.brisk_lib or os.environ.get("BRISK_LIB") or os.path.join(build_dir,
                                                                              "libbrisk.so")
    bench = os.path.join(bin_dir, "bench_zmq")
    tier = TIERS[args.tier]
    runs = args.runs or tier["runs"]
    if runs < 1:
        raise SystemExit("zmq_matrix: --runs must be at least 1")
    ios = [int(x) for x in args.io.split(",")] if args.io else None
    cells = select_cells(args.tier, args.only, ios)
    if not cells:
        raise SystemExit("zmq_matrix: no cell selected")
    if not os.access(bench, os.X_OK):
        raise SystemExit("zmq_matrix: %s not built (libzmq3-dev, then cmake --build build)"
                         % bench)
    # --quick is for make bench: brisk against glibc (and the A/A copy) only
    spec = args.alloc or ("brisk,glibc" if args.tier == "quick" else
                          FULL_ALLOCATORS + (",mimalloc3" if find_built_peer("libmimalloc3.so")
                                             else "") if args.tier == "full" else None)
    allocs, notes = resolve_allocators(spec, brisk_lib, not args.no_install, log)
    names = [a.name for a in allocs]
    libs = {a.name: file_sha256(a.lib) if a.lib else None for a in allocs}
    bench_sha = file_sha256(bench)
    aa_planned = REF in names and not args.no_aa
    if header:
        check_same_plan(header, cells, names + ([REF + "-aa"] if aa_planned else []), libs,
                        bench_sha)
    tmpdir = tempfile.mkdtemp(prefix="brisk-zmq-")
    snapshot(allocs, tmpdir)
    # run a copy, so that a rebuild during the matrix cannot mix two builds
    bench_copy = os.path.join(tmpdir, "bench_zmq")
    shutil.copy2(bench, bench_copy)
    bench = bench_copy
    aa_name = None
    if aa_planned:
        aa = make_aa(allocs[names.index(REF)], tmpdir)
        allocs.append(aa)
        aa_name = aa.name
        names.append(aa_name)
    if BASE not in names:
        notes.append("glibc not among the allocators: no comparisons against glibc")
    secs = args.secs if args.secs is not None else tier["secs"]
    warmup = args.warmup if args.warmup is not None else tier["warmup"]
    order = plan(cells, names, runs)
    done = set(complete_cells(journaled, cells, names, runs))
    records = [r for r in journaled if r["cell"] in done]
    if len(records) < len(journaled):
        notes.append("%d cell(s) left midway in an earlier sitting: run again whole"
                     % len({r["cell"] for r in journaled if r["cell"] not in done}))
    todo = [o for o in order if o[0] not in done]
    est = len(todo) * (secs + warmup + START_COST)
    spawn = os.path.join(bin_dir, "bench_spawn")
    if not os.access(spawn, os.X_OK):
        spawn = None
        notes.append("bench_spawn not built: peak RSS includes the driver's own")
    now = datetime.datetime.now()
    meta = {"tier": args.tier, "date": now.strftime("%Y-%m-%d %H:%M"), "runs": runs,
            "secs": secs, "warmup": warmup, "pin": args.pin, "cpus": args.cpus,
            "host": "%s, %d cpus" % (platform.node() or "host", os.cpu_count() or 0),
            "command": " ".join(["python3", os.path.relpath(os.path.abspath(__file__), ROOT)] +
                                (sys.argv[1:] if argv is None else list(argv))),
            "kernel": platform.release(), "notes": notes,
            "allocators": [a.to_json() for a in allocs]}
    if header:
        meta["date"], meta["command"] = header["date"], header["command"]
    stem = args.stem or "zmq-%s-%s" % (args.tier, now.strftime("%Y%m%d-%H%M%S"))
    for n in notes:
        log(n)
    log("%d cells x %d allocators x %d runs = %d processes%s, about %.0f s"
        % (len(cells), len(names), runs, len(order),
           " (%d to go)" % len(todo) if header else "", est))
    if args.dry_run:
        for i, (c, r, a) in enumerate(order):
            print("%d %s %s %d" % (i, c, a, r))
        shutil.rmtree(tmpdir, ignore_errors=True)
        return 0
    os.makedirs(args.results_dir, exist_ok=True)
    jpath = journal_path(args.results_dir, stem)
    if not header and os.path.exists(jpath):
        shutil.rmtree(tmpdir, ignore_errors=True)
        raise SystemExit("zmq_matrix: %s holds an unfinished run: --resume %s goes on with it; "
                         "remove the file to start again" % (jpath, stem))
    journal = open(jpath, "a" if header else "w")
    if not header:
        journal.write(json.dumps({"journal": JOURNAL_VERSION, "date": meta["date"],
                                  "command": meta["command"],
                                  "args": {k: getattr(args, k) for k in PLAN_ARGS},
                                  "cells": cells, "names": names, "libs": libs,
                                  "bench_sha256": bench_sha}) + "\n")
        journal.flush()
    by_name = {a.name: a for a in allocs}
    ctx = {"secs": secs, "warmup": warmup, "pin": args.pin, "cpus": args.cpus,
           "timeout": args.timeout, "spawn": spawn, "current": None}
    t0 = time.time()
    tty = sys.stderr.isatty()
    made = 0
    try:
        for i, (c, r, a) in enumerate(todo):
            # a sitting makes at least one cell
            if (args.stop_after is not None and i > 0 and todo[i - 1][0] != c
                    and time.time() - t0 >= args.stop_after * 60):
                break
            if not args.quiet and (tty or i % 50 == 0):
                el = time.time() - t0
                eta = el / i * (len(todo) - i) if i else est
                line = "[%d/%d] %s %s run %d  elapsed %ds eta %ds" % (i + 1, len(todo), c, a,
                                                                      r + 1, el, eta)
                sys.stderr.write(("\r" + line.ljust(100)) if tty else line + "\n")
                sys.stderr.flush()
            rec = run_cell(bench, c, by_name[a], r, ctx)
            journal.write(json.dumps(rec, default=str) + "\n")
            journal.flush()
            records.append(rec)
            made += 1
    except KeyboardInterrupt:
        notes.append("interrupted after %d of %d runs" % (made, len(todo)))
    finally:
        if ctx["current"]:
            ctx["current"].kill()
        shutil.rmtree(tmpdir, ignore_errors=True)
    if tty and not args.quiet:
        sys.stderr.write("\n")
    sitting = {"date": now.strftime("%Y-%m-%d %H:%M"), "elapsed_s": round(time.time() - t0, 1),
               "runs": made}
    journal.write(json.dumps({"sitting": sitting}) + "\n")
    journal.close()
    sittings.append(sitting)
    meta["elapsed_s"] = round(sum(x["elapsed_s"] for x in sittings), 1)
    if len(sittings) > 1:
        meta["sittings"] = sittings
    finished = complete_cells(records, cells, names, runs)
    if len(finished) < len(cells):
        meta["partial"] = "%d of %d cells" % (len(finished), len(cells))
        notes.append("partial: %d of %d cells done; go on with: python3 %s --resume %s%s"
                     % (len(finished), len(cells),
                        os.path.relpath(os.path.abspath(__file__), ROOT), stem,
                        "" if args.results_dir == os.path.join(HERE, "out")
                        else " --results-dir " + args.results_dir))
        log(notes[-1])
    else:
        os.remove(jpath)  # the JSON output holds every run
    out_records = [x for x in records if x["cell"] in set(finished)]
    s = summarize(out_records, finished, names, REF if REF in names else names[0], aa_name)
    text = report(s, meta)
    paths = write_outputs(args.results_dir, stem, meta, s, out_records)
    sys.stdout.write(text)
    sys.stdout.write("\nWrote %s\n" % ", ".join(os.path.relpath(p) for p in paths.values()))
    bad = [f for f in s["failures"] if f["alloc"] in (REF, aa_name)]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
