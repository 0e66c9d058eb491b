#!/usr/bin/env python3
"""brisk benchmark harness: workloads x allocators, side by side.

    python3 bench/harness.py --quick                 # the README's command
    python3 bench/harness.py --full
    python3 bench/harness.py --only larson,msgpipe --alloc brisk,mimalloc
    python3 bench/harness.py --alloc brisk=build/libbrisk.so,old=/tmp/old/libbrisk.so
    python3 bench/harness.py --alloc brisk,profiled=build/libbrisk.so:BRISK_PROFILE=/tmp/p/x
    python3 bench/harness.py --quick --syscalls      # strace -c counts
    python3 bench/harness.py --instructions          # callgrind, instr/op
    python3 bench/harness.py --profile --only msgpipe --alloc brisk,mimalloc
    python3 bench/harness.py --scaling 1,2,4,8,16    # throughput vs threads

Every allocator but glibc is swapped in with LD_PRELOAD. Runs are
interleaved: for each workload, run 1 of every allocator, then run 2 of
every allocator (the order rotated each run), and so on, so slow drifts of
the machine hit every allocator alike. Each cell reports the median wall
time and the median peak RSS (ru_maxrss from wait4 on the child); every
peer is shown as a ratio to the reference allocator (brisk), with a
geometric-mean row. An A/A column runs a second copy of the reference
library as if it were another allocator: differences smaller than its
spread are noise.

Output: a markdown report on stdout, and under bench/out/ (ignored by git;
or --results-dir) <stem>.csv (medians and ratios), <stem>-runs.csv (every
run), <stem>.json (everything), <stem>-time.png and <stem>-rss.png.

--scaling 1,2,4,8,16 runs each selected workload (default: larson and
xmalloc) at each of those thread counts, allocators interleaved run by run
as above (quick sizes and 3 runs unless --full/--runs say otherwise; no
A/A column). A point's throughput is the RESULT line's ops divided by the
median of its runs' secs (the program's own timed part), in Mops/s, with
each peer's throughput as a ratio to brisk's. The collapse figure of an
allocator is its throughput at the highest thread count divided by its
best at any count: well below 1 means it falls apart once threads
outnumber cores. Every count must be a multiple of a workload's thread
unit: xmalloc runs THREADS/2 producer/consumer pairs, so its 1-thread
point (which would run the same 2 threads as its 2-thread point) is
skipped with a note, and odd counts likewise. Output: one table per
workload, <stem>.csv (one row per workload, thread count and allocator),
<stem>-runs.csv, <stem>-collapse.csv, <stem>.json and a chart per workload,
<stem>-WORKLOAD.png; the stem is scaling-DATE.

Only the Python standard library is needed; charts need matplotlib, which
is looked for in this interpreter and then in /usr/bin/python3 (Debian's
python3-matplotlib).
"""

import argparse
import csv
import datetime
import hashlib
import json
import math
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from runner import (  # noqa: E402  (the harness is run as a script)
    BUILT_RELEASE, PEER_PACKAGES, quick_allocators, TIER_RUNS, TIER_TIMEOUT, WORKLOADS, Allocator, Child, child_env,
    failure_text,
    load_workloads, make_aa, package_version, parse_output, resolve_allocators, run_one,
    select_workloads, snapshot, workload_argv, workload_available, wrap)


# --------------------------------------------------------------------------
# Plan, statistics, report

def plan(workloads, allocs, runs):
    """The order of the runs: per workload, run r of every allocator, the
    allocator order rotated by r so none is always first. A workload may
    ask for more runs in its tier ("tier_runs")."""
    order = []
    n = len(allocs)
    for w in workloads:
        for r in range(w.get("_runs", runs)):
            for i in range(n):
                order.append((w, r, allocs[(i + r) % n]))
    return order


# A workload whose A/A time ratio is farther from 1 than this after its
# rounds is run for as many rounds again (--settle, on in the quick tier):
# its estimate then rests on twice the rounds. Once only, and every run is
# kept, so a row is not re-drawn until it looks steady.
SETTLE_LIMIT = 0.10


def unsettled(cells, workloads, aa_name):
    """The workloads whose A/A time ratio is beyond SETTLE_LIMIT."""
    out = []
    for w in workloads:
        c = cells.get((w["name"], aa_name))
        if c and c["time_ratio"] is not None and abs(c["time_ratio"] - 1) > SETTLE_LIMIT:
            out.append(w)
    return out


def plan_more(workloads, allocs, records):
    """As plan, for as many more rounds of each workload as it has had,
    numbered after them (each workload copied with its new round count)."""
    order = []
    n = len(allocs)
    for w in workloads:
        done = 1 + max((r["run"] for r in records if r["workload"] == w["name"]), default=-1)
        more = dict(w, _runs=2 * done)
        for r in range(done, 2 * done):
            for i in range(n):
                order.append((more, r, allocs[(i + r) % n]))
    return order


def median(xs):
    return statistics.median(xs) if xs else None


def geomean(xs):
    xs = [x for x in xs if x is not None and x > 0]
    return math.exp(sum(math.log(x) for x in xs) / len(xs)) if xs else None


def ratio(a, b):
    if a is None or b is None or b <= 0:
        return None
    return a / b


def paired_ratio(records, workload, name, ref_name):
    """A time ratio to the reference: the median over the rounds of the
    allocator's time over the reference's in the same round. The runs of a
    round are adjacent in time, so a slow spell of the machine falls on
    both sides of each ratio; a median of per-allocator medians keeps it
    (on a shared 2-core machine, A/A ratios of 0.84 against 0.99 for the
    same runs). None when no round has an ok run of both."""
    def by_run(n):
        return {r["run"]: r["time"] for r in records
                if r["workload"] == workload and r["alloc"] == n and r["ok"]}
    mine, ref = by_run(name), by_run(ref_name)
    ratios = [mine[k] / ref[k] for k in mine if k in ref and ref[k] > 0]
    return median(ratios)


def summarize(records, workloads, allocs, ref_name, aa_name):
    """Medians, ratios to the reference (time: paired_ratio) and geometric
    means."""
    cells = {}
    for w in workloads:
        for a in allocs:
            rs = [r for r in records if r["workload"] == w["name"] and r["alloc"] == a.name]
            ok = [r for r in rs if r["ok"]]
            times = [r["time"] for r in ok]
            rss = [r["rss_kib"] for r in ok]
            metrics = {}
            for r in ok:
                for mid, fields in r["metrics"].items():
                    for k, v in fields.items():
                        metrics.setdefault(mid, {}).setdefault(k, []).append(v)
            cells[(w["name"], a.name)] = {
                "workload": w["name"], "alloc": a.name, "runs": len(rs), "ok": len(ok),
                "failed": len(rs) - len(ok),
                "errors": sorted(set(r["error"] for r in rs if r["error"])),
                "time": median(times), "time_min": min(times) if times else None,
                "time_max": max(times) if times else None,
                "rss_kib": median(rss),
                # median absolute deviation of the runs, relative to the median
                "spread": (median([abs(t - median(times)) for t in times]) / median(times)
                           if len(times) > 1 and median(times) > 0 else None),
                "metrics": {mid: {k: median(v) for k, v in fs.items()}
                            for mid, fs in metrics.items()},
            }
    for w in workloads:
        ref = cells.get((w["name"], ref_name))
        for a in allocs:
            c = cells[(w["name"], a.name)]
            c["time_ratio"] = paired_ratio(records, w["name"], a.name, ref_name) if ref else None
            c["rss_ratio"] = ratio(c["rss_kib"], ref["rss_kib"]) if ref else None
    geo = {}
    for a in allocs:
        geo[a.name] = {
            "time_ratio": geomean([cells[(w["name"], a.name)]["time_ratio"] for w in workloads]),
            "rss_ratio": geomean([cells[(w["name"], a.name)]["rss_ratio"] for w in workloads]),
            "workloads": sum(1 for w in workloads
                             if cells[(w["name"], a.name)]["time_ratio"] is not None),
        }
    aa = None
    if aa_name:
        tr = [cells[(w["name"], aa_name)]["time_ratio"] for w in workloads]
        mr = [cells[(w["name"], aa_name)]["rss_ratio"] for w in workloads]
        tr = [x for x in tr if x]
        mr = [x for x in mr if x]
        aa = {"time_max_dev": max((abs(x - 1) for x in tr), default=None),
              "rss_max_dev": max((abs(x - 1) for x in mr), default=None),
              "time_geomean": geomean(tr), "rss_geomean": geomean(mr)}
    return cells, geo, aa


# A workload dominates a geometric mean when leaving it out moves the mean
# by more than this (relative): the report then gives the mean without it.
DOMINANT_MOVE = 0.03


def dominant(ratios):
    """ratios: {workload: ratio}. Returns (workload, geomean without it) for
    the workload whose removal moves the geometric mean most, if that move
    is above DOMINANT_MOVE; else None."""
    vals = {w: r for w, r in ratios.items() if r is not None and r > 0}
    if len(vals) < 3:
        return None
    full = geomean(list(vals.values()))
    best = None
    for w in vals:
        rest = geomean([r for x, r in vals.items() if x != w])
        move = abs(math.log(rest / full))
        if best is None or move > best[2]:
            best = (w, rest, move)
    return (best[0], best[1]) if best[2] > math.log1p(DOMINANT_MOVE) else None


def within_noise(r, aa):
    """Is ratio r no farther from 1 than the A/A ratio of its row?"""
    return r is not None and aa is not None and abs(r - 1) <= abs(aa - 1)


def rss_resolution_kib(cpus=None):
    """How far a child's peak RSS (ru_maxrss) can be from the truth. Linux
    counts a process's resident pages per CPU and adds each CPU's count to
    the total only once it reaches 32 pages (percpu_counter_batch; before
    Linux 6.2, per thread every 64 events), and VmHWM is taken from that
    total: each CPU can hold back up to 32 pages, in either direction. On
    2 CPUs that is 256 KiB, 15% of a 1.7 MiB process (the same run of
    cache-thrash reads 1720 or 1848 KiB, while a walk of its page tables,
    /proc/PID/smaps_rollup, finds 1848 every time)."""
    cpus = cpus or os.cpu_count() or 1
    return 32 * 4 * cpus


def within_rss_resolution(kib, ref_kib, resolution):
    """Are two peak RSS medians closer than the kernel's count resolves?"""
    return kib is not None and ref_kib is not None and abs(kib - ref_kib) < resolution


def fmt_time(s):
    if s is None:
        return "-"
    if s >= 10:
        return "%.1f s" % s
    if s >= 1:
        return "%.2f s" % s
    return "%.0f ms" % (s * 1e3) if s >= 0.01 else "%.2f ms" % (s * 1e3)


def fmt_mib(kib):
    return "-" if kib is None else ("%.1f MiB" % (kib / 1024.0) if kib < 1024 * 100
                                    else "%.0f MiB" % (kib / 1024.0))


def fmt_ratio(x):
    return "-" if x is None else "%.2f" % x


def fmt_num(x):
    a = abs(x)
    return "%.0f" % x if a >= 100 else "%.1f" % x if a >= 10 else "%.2f" % x


def fmt_pct(x):
    return "-" if x is None else "±%.1f%%" % (x * 100)


def md_table(header, rows):
    out = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    out += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(out)


def report_markdown(meta, workloads, allocs, ref_name, aa_name, cells, geo, aa):
    shown = [a for a in allocs if a.name != aa_name]
    others = [a for a in shown if a.name != ref_name]
    lines = []
    lines.append("# brisk benchmark: %s (%s, %d runs, %s)"
                 % (meta["tier"], meta["date"], meta["runs"], meta["host"]))
    lines.append("")
    lines.append("Command: `%s`" % meta["command"])
    lines.append("")
    lines.append("Allocators: " + ", ".join(
        "%s (%s)" % (a.name, a.describe(meta["versions"].get(a.name))) for a in allocs))
    lines.append("")

    def cell_text(c, key, fmt):
        if c["ok"] == 0:
            return "FAIL: " + ", ".join(c["errors"] or ["no run"])
        text = fmt(c[key])
        if c["failed"]:
            text += " (%d/%d failed: %s)" % (c["failed"], c["runs"], ", ".join(c["errors"]))
        return text

    for title, key, rkey, fmt, note in (
            ("Time", "time", "time_ratio", fmt_time,
             "median time; a peer's cell is the median over the rounds of its time over %s's in the same round (above 1: %s is faster)"),
            ("Peak RSS", "rss_kib", "rss_ratio", fmt_mib,
             "median peak RSS; a peer's cell is its ratio to %s (above 1: %s uses less)")):
        lines.append("## %s" % title)
        lines.append("")
        lines.append(note % (ref_name, ref_name))
        lines.append("")
        header = ["workload", ref_name] + [a.name for a in others]
        if aa_name:
            header.append("A/A")
        if key == "time":
            header.append("%s spread" % ref_name)
        rows = []
        noisy = 0
        rss_ties = 0
        for w in workloads:
            ref = cells[(w["name"], ref_name)]
            row = [w["name"], cell_text(ref, key, fmt)]
            aa_r = cells[(w["name"], aa_name)][rkey] if aa_name else None
            for a in others:
                c = cells[(w["name"], a.name)]
                if c["ok"] == 0 or ref["ok"] == 0 or c[rkey] is None:
                    row.append(cell_text(c, key, fmt) if c["ok"] == 0 else fmt(c[key]))
                else:
                    mark = "~" if within_noise(c[rkey], aa_r) else ""
                    noisy += bool(mark)
                    if key == "rss_kib" and not mark and within_rss_resolution(
                            c[key], ref[key], meta.get("rss_resolution_kib", 0)):
                        mark = "~"
                        rss_ties += 1
                    row.append(fmt_ratio(c[rkey]) + mark + ("" if not c["failed"] else
                                                            " (%d failed)" % c["failed"]))
            if aa_name:
                row.append(fmt_ratio(cells[(w["name"], aa_name)][rkey]))
            if key == "time":
                row.append(fmt_pct(ref["spread"]))
            rows.append(row)
        grow = ["geomean", "1.00"] + [fmt_ratio(geo[a.name][rkey]) for a in others]
        if aa_name:
            grow.append(fmt_ratio(geo[aa_name][rkey]))
        if key == "time":
            grow.append("")
        rows.append(["**%s**" % x if x else x for x in grow])
        # A workload that dominates a mean: the mean without it, beside.
        drow, any_dom = ["geomean without its dominant workload", ""], False
        for a in others + ([allocs[[x.name for x in allocs].index(aa_name)]] if aa_name else []):
            d = dominant({w["name"]: cells[(w["name"], a.name)][rkey] for w in workloads})
            drow.append("%s (w/o %s)" % (fmt_ratio(d[1]), d[0]) if d else "-")
            any_dom |= d is not None
        if key == "time":
            drow.append("")
        if any_dom:
            rows.append(drow)
        lines.append(md_table(header, rows))
        lines.append("")
        if noisy:
            lines.append("~ marks a ratio no farther from 1 than the A/A ratio of its row: on "
                         "that workload the difference is within the noise of this run.")
            lines.append("")
        if rss_ties:
            lines.append("~ also marks a peak RSS less than %d KiB from %s's: the kernel's count "
                         "of resident pages, which ru_maxrss reports, is only that exact on this "
                         "machine (32 pages per CPU)." % (meta["rss_resolution_kib"], ref_name))
            lines.append("")
        if aa:
            dev = aa["time_max_dev"] if key == "time" else aa["rss_max_dev"]
            lines.append("A/A check: %s-aa (a second copy of the same library) differs from %s "
                         "by up to %s across workloads; a ratio closer to 1 than that is noise."
                         % (ref_name, ref_name, fmt_pct(dev)))
            lines.append("")
        if key == "time":
            lines.append("%s spread: the median absolute deviation of its own runs, relative to "
                         "their median, per workload." % ref_name)
            lines.append("")

    detail = [w for w in workloads if any(cells[(w["name"], a.name)]["metrics"] for a in allocs)]
    if detail:
        lines.append("## Details (medians)")
        lines.append("")
    for w in detail:
        ids, fields = [], {}
        for a in allocs:
            for mid, fs in cells[(w["name"], a.name)]["metrics"].items():
                if mid not in fields:
                    ids.append(mid)
                    fields[mid] = list(fs)
        lines.append("### %s" % w["name"])
        lines.append("")
        header = ["metric"] + [a.name for a in allocs]
        rows = []
        for mid in ids:
            row = ["%s (%s)" % (mid, " / ".join(fields[mid]))]
            for a in allocs:
                fs = cells[(w["name"], a.name)]["metrics"].get(mid)
                row.append("-" if not fs else " / ".join(
                    fmt_num(fs[k]) if fs.get(k) is not None else "-" for k in fields[mid]))
            rows.append(row)
        lines.append(md_table(header, rows))
        lines.append("")
    fails = [c for c in cells.values() if c["failed"]]
    if fails:
        lines.append("## Failures")
        lines.append("")
        for c in fails:
            lines.append("- %s under %s: %d of %d runs failed: %s"
                         % (c["workload"], c["alloc"], c["failed"], c["runs"],
                            ", ".join(c["errors"])))
        lines.append("")
    for n in meta["notes"]:
        lines.append("Note: " + n)
    return "\n".join(lines).rstrip() + "\n"


# --------------------------------------------------------------------------
# Output files

def write_outputs(results_dir, stem, meta, workloads, allocs, records, cells, geo, aa, ref_name,
                  aa_name):
    os.makedirs(results_dir, exist_ok=True)
    paths = {}
    p = os.path.join(results_dir, stem + ".csv")
    with open(p, "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["workload", "allocator", "runs", "ok", "failed", "median_s", "min_s", "max_s",
                     "median_rss_kib", "time_ratio_to_" + ref_name, "rss_ratio_to_" + ref_name,
                     "errors"])
        for w in workloads:
            for a in allocs:
                c = cells[(w["name"], a.name)]
                wr.writerow([w["name"], a.name, c["runs"], c["ok"], c["failed"],
                             _num(c["time"]), _num(c["time_min"]), _num(c["time_max"]),
                             _num(c["rss_kib"]), _num(c["time_ratio"]), _num(c["rss_ratio"]),
                             "; ".join(c["errors"])])
        for a in allocs:
            wr.writerow(["geomean", a.name, "", "", "", "", "", "", "",
                         _num(geo[a.name]["time_ratio"]), _num(geo[a.name]["rss_ratio"]), ""])
    paths["csv"] = p
    p = os.path.join(results_dir, stem + "-runs.csv")
    with open(p, "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["order", "workload", "allocator", "run", "ok", "time_s", "wall_s", "rss_kib",
                     "rc", "signal", "error"])
        for i, r in enumerate(records):
            wr.writerow([i, r["workload"], r["alloc"], r["run"], int(r["ok"]), _num(r["time"]),
                         _num(r["wall"]), r["rss_kib"], r["rc"], r["signal"], r["error"] or ""])
    paths["runs_csv"] = p
    p = os.path.join(results_dir, stem + ".json")
    doc = {"meta": meta, "reference": ref_name, "aa": aa_name,
           "allocators": [a.to_json() for a in allocs],
           "workloads": [{k: v for k, v in w.items()} for w in workloads],
           "cells": [cells[(w["name"], a.name)] for w in workloads for a in allocs],
           "geomean": geo, "aa_check": aa, "runs": records}
    with open(p, "w") as f:
        json.dump(doc, f, indent=1, default=str)
    paths["json"] = p
    return paths


def _num(x):
    if x is None:
        return ""
    return "%.6g" % x if isinstance(x, float) else x


def matplotlib_python():
    """An interpreter that can import matplotlib: this one, else Debian's."""
    try:
        import matplotlib  # noqa: F401
        return sys.executable
    except ImportError:
        pass
    for exe in ("/usr/bin/python3", shutil.which("python3")):
        if exe and os.path.exists(exe) and os.path.realpath(exe) != os.path.realpath(sys.executable):
            r = subprocess.run([exe, "-c", "import matplotlib"], capture_output=True)
            if r.returncode == 0:
                return exe
    return None


def make_charts(json_path, stem_path, log):
    py = matplotlib_python()
    if not py:
        log("charts skipped: matplotlib not found (apt-get install python3-matplotlib)")
        return []
    r = subprocess.run([py, os.path.join(HERE, "plot.py"), json_path, stem_path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        log("charts failed: " + r.stderr.strip()[-500:])
        return []
    return [l.strip() for l in r.stdout.splitlines() if l.strip().endswith(".png")]


# --------------------------------------------------------------------------
# Syscall and instruction modes

SYSCALLS = ["mmap", "munmap", "madvise", "mprotect", "futex", "brk", "mremap"]


def parse_strace_summary(text):
    """strace -c table -> {syscall: calls}."""
    out = {}
    for line in text.splitlines():
        t = line.split()
        if len(t) >= 5 and re.match(r"^\d+(\.\d+)?$", t[0]) and re.match(r"^[a-z_0-9]+$", t[-1]) \
                and t[-1] != "total":
            try:
                out[t[-1]] = int(t[3])
            except ValueError:
                pass
    return out


def parse_callgrind_total(path):
    with open(path) as f:
        for line in f:
            if line.startswith("summary:") or line.startswith("totals:"):
                return int(line.split()[1])
    return None


# --------------------------------------------------------------------------
# Main

class Progress:
    def __init__(self, total, enabled):
        self.total = total
        self.done = 0
        self.t0 = time.time()
        self.tty = sys.stderr.isatty()
        self.enabled = enabled
        self.last_len = 0

    def show(self, text, group=None):
        if not self.enabled:
            return
        el = time.time() - self.t0
        if not self.tty:  # a log: one line per workload, or every 15 s
            if group == getattr(self, "group", None) and el - getattr(self, "said", 0) < 15:
                return
            self.group, self.said = group, el
        eta = el / self.done * (self.total - self.done) if self.done else 0
        line = "[%*d/%d] %s  elapsed %s  eta %s" % (len(str(self.total)), self.done + 1,
                                                      self.total, text, _clock(el), _clock(eta))
        if self.tty:
            sys.stderr.write("\r" + line.ljust(self.last_len))
            self.last_len = len(line)
        else:
            sys.stderr.write(line + "\n")
        sys.stderr.flush()

    def step(self):
        self.done += 1

    def end(self):
        if self.enabled and self.tty:
            sys.stderr.write("\r" + " " * self.last_len + "\r")
            sys.stderr.flush()


def _clock(s):
    s = int(s)
    return "%d:%02d" % (s // 60, s % 60)


def parse_args(argv):
    p = argparse.ArgumentParser(description="brisk benchmark harness",
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__)
    tier = p.add_mutually_exclusive_group()
    tier.add_argument("--quick", action="store_const", dest="tier", const="quick",
                      help="the quick matrix (a few minutes on 2 cores)")
    tier.add_argument("--full", action="store_const", dest="tier", const="full",
                      help="full sizes (about 10 s per run)")
    p.add_argument("--only", help="comma list of workloads")
    p.add_argument("--alloc", help="comma list: peer names, NAME=/path/lib.so, NAME=none; each "
                   "may end in :VAR=VALUE items, set in that allocator's runs (and its A/A copy)")
    p.add_argument("--ref", help="reference allocator for ratios (default brisk, else the first)")
    p.add_argument("--runs", type=int, help="runs per cell (default 5; 1 for --syscalls)")
    p.add_argument("--size", type=int, help="override the size of every selected workload")
    p.add_argument("--threads", type=int, help="thread count for every workload")
    p.add_argument("--scaling", metavar="COUNTS",
                   help="comma list of thread counts (e.g. 1,2,4,8,16): throughput of each "
                        "workload (default larson,xmalloc) at each count")
    p.add_argument("--no-aa", action="store_true", help="skip the A/A copy of the reference")
    p.add_argument("--settle", action=argparse.BooleanOptionalAction, default=None,
                   help="run a workload whose A/A time ratio is beyond %d%%%% for as many rounds "
                        "again (default: on in the quick tier)" % round(SETTLE_LIMIT * 100))
    p.add_argument("--syscalls", action="store_true",
                   help="count mmap/munmap/madvise/mprotect/futex/brk with strace -c -f")
    p.add_argument("--instructions", action="store_true",
                   help="instructions per operation under callgrind (single-thread workloads)")
    p.add_argument("--profile", action="store_true",
                   help="perf record -e cpu-clock once per cell; print the top symbols")
    p.add_argument("--instr-baseline", default=os.path.join(HERE, "instructions.json"),
                   help="record of instr/op that --instructions compares with "
                        "(default bench/instructions.json, when it exists)")
    p.add_argument("--save-instr", help="write the --instructions result as a baseline JSON")
    p.add_argument("--build-dir", default=os.environ.get("BRISK_BUILD_DIR",
                                                          os.path.join(ROOT, "build")))
    p.add_argument("--brisk-lib", help="default: BUILD_DIR/libbrisk.so")
    p.add_argument("--bin-dir", help="default: BUILD_DIR/bench")
    p.add_argument("--results-dir", default=os.path.join(HERE, "out"))
    p.add_argument("--stem", help="output file name stem (default MODE-DATE)")
    p.add_argument("--workloads-file", help="JSON list of workloads replacing the built-in ones")
    p.add_argument("--timeout", type=float, help="seconds per run before it is killed")
    p.add_argument("--no-charts", action="store_true")
    p.add_argument("--no-install", action="store_true",
                   help="never apt-get install missing peers")
    p.add_argument("--strict", action="store_true",
                   help="exit non-zero when any cell fails, not only the reference")
    p.add_argument("--dry-run", action="store_true", help="print the run order and exit")
    p.add_argument("--report", metavar="JSON",
                   help="summarise a saved run (its .json) again and write its files under --stem")
    p.add_argument("--quiet", action="store_true", help="no progress line")
    a = p.parse_args(argv)
    a.tier = a.tier or "default"
    if a.settle is None:
        a.settle = a.tier == "quick"
    return a


def report_saved(args, log):
    """--report: the report and files of a saved run, summarised again."""
    with open(args.report) as f:
        doc = json.load(f)
    allocs = []
    for a in doc["allocators"]:
        alloc = Allocator(a["name"], a.get("lib"), a.get("kind", "peer"), a.get("env"))
        allocs.append(alloc)
    workloads, records, meta = doc["workloads"], doc["runs"], doc["meta"]
    ref_name, aa_name = doc["reference"], doc.get("aa")
    meta["notes"] = list(meta.get("notes", [])) + ["summarised again from %s" % os.path.basename(args.report)]
    cells, geo, aa = summarize(records, workloads, allocs, ref_name, aa_name)
    text = report_markdown(meta, workloads, allocs, ref_name, aa_name, cells, geo, aa)
    stem = args.stem or os.path.splitext(os.path.basename(args.report))[0] + "-again"
    paths = write_outputs(args.results_dir, stem, meta, workloads, allocs, records, cells, geo, aa,
                          ref_name, aa_name)
    return finish(args, stem, text, paths, log, False, cells, (ref_name, aa_name))


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    log = lambda m: sys.stderr.write("harness: %s\n" % m)
    if args.report:
        return report_saved(args, log)
    build_dir = os.path.abspath(args.build_dir)
    bin_dir = os.path.abspath(args.bin_dir or os.path.join(build_dir, "bench"))
    brisk_lib = args.brisk_lib or os.environ.get("BRISK_LIB") or os.path.join(build_dir,
                                                                              "libbrisk.so")
    all_workloads = load_workloads(args.workloads_file) if args.workloads_file else WORKLOADS
    scaling = parse_counts(args.scaling) if args.scaling else None
    only = args.only
    if scaling:
        if args.syscalls or args.instructions or args.profile:
            raise SystemExit("harness: --scaling is a mode of its own; not with --syscalls, "
                             "--instructions or --profile")
        if args.threads is not None:
            raise SystemExit("harness: --scaling sets the thread counts; drop --threads")
        if not only:
            known = [w["name"] for w in all_workloads]
            only = ",".join(n for n in SCALING_DEFAULT if n in known) or None
    workloads = select_workloads(all_workloads, only)
    notes = []
    if scaling and any(w.get("kind") == "redis" for w in workloads):
        workloads = [w for w in workloads if w.get("kind") != "redis"]
        notes.append("--scaling skips redis (redis-server's threads are not the harness's "
                     "to set)")
    if args.instructions:
        workloads = [w for w in workloads if w.get("instr")]
        if not workloads:
            raise SystemExit("harness: no selected workload has an instruction-count mode")
    avail = []
    for w in workloads:
        ok, why = workload_available(w, bin_dir)
        if ok:
            avail.append(w)
        else:
            notes.append("skipped %s: %s" % (w["name"], why))
    workloads = avail
    if not workloads:
        for n in notes:
            log(n)
        raise SystemExit("harness: nothing to run")

    spec = args.alloc
    if spec is None and args.tier == "quick" and not args.scaling:
        spec = quick_allocators()
        notes.append("quick tier: %s and the A/A copy (--alloc names others; --full runs every "
                     "peer found)" % spec)
    allocs, anotes = resolve_allocators(spec, brisk_lib, not args.no_install, log)
    notes += anotes
    if not allocs:
        raise SystemExit("harness: no allocator to run")
    names = [a.name for a in allocs]
    ref_name = args.ref or ("brisk" if "brisk" in names else names[0])
    if ref_name not in names:
        raise SystemExit("harness: --ref %s is not among the allocators" % ref_name)
    mode = ("syscalls" if args.syscalls else "instructions" if args.instructions
            else "profile" if args.profile else "scaling" if scaling else args.tier)
    single = args.syscalls or args.instructions or args.profile
    tmpdir = tempfile.mkdtemp(prefix="brisk-bench-")
    aa_name = None
    snapshot(allocs, tmpdir)
    if not args.no_aa and not single and not scaling:
        ref = allocs[names.index(ref_name)]
        aa = make_aa(ref, tmpdir)
        allocs.append(aa)
        aa_name = aa.name
    glibc_forward = os.path.join(bin_dir, "glibc_forward.so")
    if not os.path.exists(glibc_forward):
        glibc_forward = None
        if any(w.get("needs_glibc_forward") for w in workloads):
            notes.append("glibc_forward.so not built: glibc column of redis/session is the "
                         "program's linked malloc")

    runs = args.runs or (1 if single else SCALING_RUNS if scaling else TIER_RUNS[args.tier])
    if runs < 1:
        raise SystemExit("harness: --runs must be at least 1")
    if not (args.runs or single or scaling):
        for w in workloads:
            if args.tier in w.get("tier_runs", {}):
                w["_runs"] = w["tier_runs"][args.tier]
    spawn = os.path.join(bin_dir, "bench_spawn")
    if not os.access(spawn, os.X_OK):
        spawn = None
        notes.append("bench_spawn not built: peak RSS includes the harness's own (about %d MiB)"
                     % (_self_rss_kib() // 1024))
    ctx = {"bin_dir": bin_dir, "glibc_forward": glibc_forward, "threads": args.threads,
           "spawn": spawn,
           "timeout": args.timeout or TIER_TIMEOUT[args.tier] * (20 if args.instructions else 1),
           "current": None}
    # strace and perf slow programs down, and --scaling runs every cell at
    # every thread count: those modes use quick sizes unless a tier is
    # asked for.
    size_tier = "quick" if (args.syscalls or args.profile or scaling) \
        and args.tier == "default" else args.tier
    ctx["size_tier"] = size_tier

    def size_of(w):
        if args.size:
            return args.size
        return w.get("sizes", {}).get(size_tier, 1)

    now = datetime.datetime.now()
    meta = {"tier": mode, "date": now.strftime("%Y-%m-%d %H:%M"), "runs": runs,
            "host": "%s, %d cpus, %s" % (platform.node() or "host", os.cpu_count() or 0,
                                         _cpu_model()),
            "command": " ".join(["python3", os.path.relpath(__file__, ROOT)] +
                                (sys.argv[1:] if argv is None else list(argv))),
            "kernel": platform.release(), "glibc": " ".join(platform.libc_ver()),
            "versions": _versions(allocs, brisk_lib), "notes": notes,
            "sizes": {w["name"]: size_of(w) for w in workloads}, "size_tier": size_tier,
            "cpus": os.cpu_count() or 1, "rss_resolution_kib": rss_resolution_kib()}
    stem = args.stem or "%s-%s" % (mode, now.strftime("%Y%m%d-%H%M%S"))
    points = None
    if scaling:
        points, pnotes = scaling_points(workloads, scaling)
        notes += pnotes
        meta["threads"] = scaling
        if not points:
            for n in notes:
                log(n)
            shutil.rmtree(tmpdir, ignore_errors=True)
            raise SystemExit("harness: no workload can run at those thread counts")

    for n in notes:
        log(n)
    if args.dry_run:
        for i, (w, r, a) in enumerate(plan(points or workloads, allocs, runs)):
            print("%d %s %s %d%s" % (i, w["name"], a.name, r,
                                     "" if points is None else " %d" % w["scaling_threads"]))
        shutil.rmtree(tmpdir, ignore_errors=True)
        return 0

    try:
        if args.syscalls:
            return run_syscalls(args, workloads, allocs, runs, ctx, size_of, meta, stem, log)
        if args.instructions:
            return run_instructions(args, workloads, allocs, ctx, meta, stem, ref_name, log)
        if args.profile:
            return run_profile(args, workloads, allocs, ctx, size_of, meta, stem, log)
        if scaling:
            return run_scaling(args, workloads, points, allocs, runs, ctx, size_of, meta, stem,
                               ref_name, log)
        return run_matrix(args, workloads, allocs, runs, ctx, size_of, meta, stem, ref_name,
                          aa_name, log)
    finally:
        cur = ctx.get("current")
        if cur:
            cur.kill()
        shutil.rmtree(tmpdir, ignore_errors=True)


def _self_rss_kib():
    try:
        import resource
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    except (ImportError, OSError):
        return 0


def _cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "?"


def _versions(allocs, brisk_lib):
    v = {}
    for a in allocs:
        if a.name in PEER_PACKAGES and a.kind == "peer":
            v[a.name] = "%s %s" % (PEER_PACKAGES[a.name], package_version(PEER_PACKAGES[a.name]))
        elif a.name == "glibc":
            v[a.name] = "libc6 %s" % package_version("libc6")
        elif a.lib:
            src = a.source or a.lib
            try:
                with open(a.lib, "rb") as f:
                    digest = hashlib.sha256(f.read()).hexdigest()[:12]
                where = os.path.relpath(src, ROOT) if src.startswith(ROOT) else src
                if a.kind == "built":
                    v[a.name] = "%s (%s sha256:%s)" % (BUILT_RELEASE[a.name],
                                                       os.path.basename(src), digest)
                else:
                    v[a.name] = "%s%s sha256:%s" % (where, " (copy)" if a.kind == "aa" else "",
                                                    digest)
            except OSError:
                v[a.name] = src
    for pkg in ("libzmq5", "redis-server"):
        ver = package_version(pkg)
        if ver:
            v[pkg] = ver
    return v


def point_name(w):
    """A workload's label; a scaling point's carries its thread count."""
    t = w.get("scaling_threads")
    return w["name"] if t is None else "%s x%d" % (w["name"], t)


def execute(order, runs, ctx, size_of, meta, quiet):
    """Runs the plan, in its order; returns (records, interrupted). A
    scaling point (a workload with scaling_threads) runs at that thread
    count, and its records say so in "threads"."""
    progress = Progress(len(order), not quiet)
    records = []
    interrupted = False
    try:
        for w, r, a in order:
            label = point_name(w)
            progress.show("%s / %s / run %d of %d" % (label, a.name, r + 1, w.get("_runs", runs)),
                          label)
            threads = w.get("scaling_threads")
            if threads is not None:
                ctx["threads"] = threads
            rec = run_one(w, a, r, size_of(w), ctx)
            if threads is not None:
                rec["threads"] = threads
            records.append(rec)
            progress.step()
    except KeyboardInterrupt:
        interrupted = True
        meta["notes"].append("interrupted after %d of %d runs" % (len(records), len(order)))
    progress.end()
    return records, interrupted


def run_matrix(args, workloads, allocs, runs, ctx, size_of, meta, stem, ref_name, aa_name, log):
    records, interrupted = execute(plan(workloads, allocs, runs), runs, ctx, size_of, meta,
                                   args.quiet)
    cells, geo, aa = summarize(records, workloads, allocs, ref_name, aa_name)
    redo = unsettled(cells, workloads, aa_name) if args.settle and aa_name and not interrupted else []
    if redo:
        meta["notes"].append("A/A time ratio beyond %d%% after the first rounds: %s; each ran "
                             "as many rounds again (--settle), and its figures use all of them"
                             % (round(SETTLE_LIMIT * 100), ", ".join(
                                 "%s (%.2f, %d rounds)" % (w["name"],
                                                           cells[(w["name"], aa_name)]["time_ratio"],
                                                           2 * w.get("_runs", runs))
                                 for w in redo)))
        more, interrupted = execute(plan_more(redo, allocs, records), runs, ctx, size_of, meta,
                                    args.quiet)
        records += more
        cells, geo, aa = summarize(records, workloads, allocs, ref_name, aa_name)
    text = report_markdown(meta, workloads, allocs, ref_name, aa_name, cells, geo, aa)
    paths = write_outputs(args.results_dir, stem, meta, workloads, allocs, records, cells, geo, aa,
                          ref_name, aa_name)
    return finish(args, stem, text, paths, log, interrupted, cells, (ref_name, aa_name))


def finish(args, stem, text, paths, log, interrupted, cells, must_pass):
    """Charts, the report on stdout, the file list; the exit status: 130 when
    interrupted, 1 when a run of an allocator in must_pass (or, with
    --strict, of any) failed."""
    charts = [] if args.no_charts else make_charts(paths["json"],
                                                   os.path.join(args.results_dir, stem), log)
    sys.stdout.write(text)
    sys.stdout.write("\nFiles: %s\n" % ", ".join(
        os.path.relpath(p, os.getcwd()) for p in list(paths.values()) + charts))
    sys.stdout.flush()
    if interrupted:
        return 130
    bad = [c for c in cells.values() if c["failed"] and (args.strict or c["alloc"] in must_pass)]
    return 1 if bad else 0


# --------------------------------------------------------------------------
# Thread scaling

SCALING_DEFAULT = ["larson", "xmalloc"]  # the workloads --scaling runs without --only
SCALING_RUNS = 3
# Threads per unit of work: a count that is not a multiple is not run.
# bench_xmalloc runs THREADS/2 producer/consumer pairs (1 pair for 1).
THREAD_UNIT = {"xmalloc": 2, "pc-small": 2, "pc-small-mesh": 2, "pc-large": 2, "pc-large-mesh": 2}
COLLAPSE_WARN = 0.5  # a collapse figure below this is called out


def parse_counts(text):
    """'1,2,4' -> [1, 2, 4] (sorted, without repeats)."""
    try:
        counts = sorted(set(int(x) for x in text.split(",") if x.strip()))
    except ValueError:
        raise SystemExit("harness: --scaling wants a comma list of thread counts, got '%s'"
                         % text)
    if not counts or counts[0] < 1 or counts[-1] > 256:
        raise SystemExit("harness: --scaling thread counts must be 1..256, got '%s'" % text)
    return counts


def thread_unit(w):
    return int(w.get("thread_unit", THREAD_UNIT.get(w["name"], 1)))


def scaling_points(workloads, counts):
    """One copy of each workload per thread count it can run at; returns
    (points, notes on the counts left out)."""
    points, notes = [], []
    for w in workloads:
        unit = thread_unit(w)
        left = [t for t in counts if t % unit]
        for t in counts:
            if t % unit == 0:
                points.append(dict(w, scaling_threads=t))
        if left:
            notes.append("%s: not run at %s thread%s: it runs THREADS/%d %s, so only "
                         "multiples of %d are distinct runs%s"
                         % (w["name"], ", ".join(map(str, left)), "" if len(left) == 1 else "s",
                            unit, "producer/consumer pairs" if unit == 2 and
                            w["name"] == "xmalloc" else "groups of %d threads" % unit, unit,
                            "; its 1-thread point would be its %d-thread one" % unit
                            if 1 in left else ""))
    return points, notes


def run_secs(rec):
    """The seconds a run's ops took: its RESULT secs, else its time."""
    res = rec.get("result") or {}
    secs = res.get("secs")
    return secs if isinstance(secs, float) and secs > 0 else rec["time"]


def summarize_scaling(records, points, allocs, ref_name):
    """Cells keyed (workload, threads, allocator), and the collapse figure
    keyed (workload, allocator)."""
    cells = {}
    for p in points:
        name, t = p["name"], p["scaling_threads"]
        for a in allocs:
            rs = [r for r in records
                  if r["workload"] == name and r.get("threads") == t and r["alloc"] == a.name]
            good, errors = [], []
            for r in rs:
                ops = (r.get("result") or {}).get("ops")
                if not r["ok"]:
                    errors.append(r["error"])
                elif not isinstance(ops, float) or ops <= 0 or not run_secs(r):
                    errors.append("no ops= in RESULT")
                else:
                    good.append(r)
            secs = [run_secs(r) for r in good]
            ops = median([r["result"]["ops"] for r in good])
            med = median(secs)
            reported = sorted(set(int(r["result"]["threads"]) for r in good
                                  if isinstance(r["result"].get("threads"), float)))
            cells[(name, t, a.name)] = {
                "workload": name, "threads": t, "alloc": a.name, "runs": len(rs),
                "ok": len(good), "failed": len(rs) - len(good), "errors": sorted(set(errors)),
                "ops": ops, "secs": med, "secs_min": min(secs) if secs else None,
                "secs_max": max(secs) if secs else None,
                "wall": median([r["wall"] for r in good]),
                "rss_kib": median([r["rss_kib"] for r in good]),
                "mops": ops / med / 1e6 if good and med > 0 else None,
                "reported_threads": reported,
            }
    for (name, t, an), c in cells.items():
        ref = cells.get((name, t, ref_name))
        c["mops_ratio"] = ratio(c["mops"], ref["mops"]) if ref else None
    collapse = {}
    names = []
    for p in points:
        if p["name"] not in names:
            names.append(p["name"])
    for name in names:
        counts = [p["scaling_threads"] for p in points if p["name"] == name]
        top = counts[-1]
        for a in allocs:
            got = [(cells[(name, t, a.name)]["mops"], t) for t in counts
                   if cells[(name, t, a.name)]["mops"] is not None]
            best, best_t = max(got, key=lambda x: x[0]) if got else (None, None)
            last = cells[(name, top, a.name)]["mops"]
            collapse[(name, a.name)] = {
                "workload": name, "alloc": a.name, "best_mops": best, "best_threads": best_t,
                "top_threads": top, "top_mops": last, "collapse": ratio(last, best)}
    return cells, collapse


def report_scaling(meta, workloads, points, allocs, ref_name, cells, collapse):
    others = [a for a in allocs if a.name != ref_name]
    cpus = meta["cpus"]
    lines = ["# brisk thread scaling (%s, %s sizes, %d run%s, %s)"
             % (meta["date"], meta["size_tier"], meta["runs"], "" if meta["runs"] == 1 else "s",
                meta["host"]), "",
             "Command: `%s`" % meta["command"], "",
             "Allocators: " + ", ".join(
                 "%s (%s)" % (a.name, a.describe(meta["versions"].get(a.name)))
                 for a in allocs), "",
             "Throughput in Mops/s: the RESULT line's ops divided by the median of the runs' "
             "secs (the program's timed part). A peer's cell is followed by its throughput / "
             "%s's (below 1: %s is faster). Thread counts marked * outnumber the %d CPUs. "
             "Collapse: throughput at the highest count / the best at any count (1: no loss "
             "past the peak)." % (ref_name, ref_name, cpus), ""]

    def cell_text(c, with_ratio):
        if c["ok"] == 0:
            return "FAIL: " + ", ".join(c["errors"] or ["no run"])
        text = fmt_num(c["mops"])
        if with_ratio and c["mops_ratio"] is not None:
            text += " (%s)" % fmt_ratio(c["mops_ratio"])
        if c["failed"]:
            text += " (%d/%d failed)" % (c["failed"], c["runs"])
        return text

    warn = []
    for w in workloads:
        counts = [p["scaling_threads"] for p in points if p["name"] == w["name"]]
        if not counts:
            continue
        lines.append("## %s" % w["name"])
        lines.append("")
        if w.get("what"):
            lines.append(w["what"])
            lines.append("")
        header = ["threads", ref_name] + [a.name for a in others]
        rows = []
        for t in counts:
            row = ["%d%s" % (t, "*" if t > cpus else "")]
            row.append(cell_text(cells[(w["name"], t, ref_name)], False))
            for a in others:
                row.append(cell_text(cells[(w["name"], t, a.name)], True))
            rows.append(row)
        crow = ["**collapse %d/best**" % counts[-1]]
        for a in [x for x in allocs if x.name == ref_name] + others:
            k = collapse[(w["name"], a.name)]
            if k["collapse"] is None:
                crow.append("-")
            else:
                crow.append("**%s** (best at %d)" % (fmt_ratio(k["collapse"]), k["best_threads"]))
                if k["collapse"] < COLLAPSE_WARN:
                    warn.append("%s under %s: %s of its best (%s Mops/s at %d thread%s) at %d"
                                % (w["name"], a.name, fmt_ratio(k["collapse"]),
                                   fmt_num(k["best_mops"]), k["best_threads"],
                                   "" if k["best_threads"] == 1 else "s", k["top_threads"]))
        rows.append(crow)
        lines.append(md_table(header, rows))
        lines.append("")
    if warn:
        lines.append("Collapse check: below %.2f (lost more than half the best throughput): %s."
                     % (COLLAPSE_WARN, "; ".join(warn)))
    else:
        lines.append("Collapse check: no allocator fell below %.2f of its best throughput at "
                     "the highest thread count." % COLLAPSE_WARN)
    lines.append("")
    odd = [c for c in cells.values() if c["reported_threads"] and
           c["reported_threads"] != [c["threads"]]]
    for c in odd:
        meta["notes"].append("%s at %d threads under %s: the program reported threads=%s"
                             % (c["workload"], c["threads"], c["alloc"],
                                ",".join(map(str, c["reported_threads"]))))
    fails = [c for c in cells.values() if c["failed"]]
    if fails:
        lines.append("## Failures")
        lines.append("")
        for c in fails:
            lines.append("- %s at %d thread%s under %s: %d of %d runs failed: %s"
                         % (c["workload"], c["threads"], "" if c["threads"] == 1 else "s",
                            c["alloc"], c["failed"], c["runs"],
                            ", ".join(c["errors"])))
        lines.append("")
    for n in meta["notes"]:
        lines.append("Note: " + n)
    return "\n".join(lines).rstrip() + "\n"


def write_scaling_outputs(results_dir, stem, meta, workloads, points, allocs, records, cells,
                          collapse, ref_name):
    os.makedirs(results_dir, exist_ok=True)
    paths = {}
    p = os.path.join(results_dir, stem + ".csv")
    with open(p, "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["workload", "threads", "allocator", "runs", "ok", "failed", "ops",
                     "median_s", "min_s", "max_s", "mops", "mops_ratio_to_" + ref_name,
                     "median_wall_s", "median_rss_kib", "errors"])
        for pt in points:
            for a in allocs:
                c = cells[(pt["name"], pt["scaling_threads"], a.name)]
                wr.writerow([c["workload"], c["threads"], a.name, c["runs"], c["ok"],
                             c["failed"], _count(c["ops"]), _num(c["secs"]), _num(c["secs_min"]),
                             _num(c["secs_max"]), _num(c["mops"]), _num(c["mops_ratio"]),
                             _num(c["wall"]), _num(c["rss_kib"]), "; ".join(c["errors"])])
    paths["csv"] = p
    p = os.path.join(results_dir, stem + "-collapse.csv")
    with open(p, "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["workload", "allocator", "best_mops", "best_threads", "top_threads",
                     "top_mops", "collapse"])
        for k in collapse.values():
            wr.writerow([k["workload"], k["alloc"], _num(k["best_mops"]),
                         _count(k["best_threads"]), k["top_threads"], _num(k["top_mops"]),
                         _num(k["collapse"])])
    paths["collapse_csv"] = p
    p = os.path.join(results_dir, stem + "-runs.csv")
    with open(p, "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["order", "workload", "threads", "allocator", "run", "ok", "ops", "secs",
                     "wall_s", "rss_kib", "rc", "signal", "error"])
        for i, r in enumerate(records):
            res = r.get("result") or {}
            wr.writerow([i, r["workload"], r["threads"], r["alloc"], r["run"], int(r["ok"]),
                         _count(res.get("ops")), _num(run_secs(r)), _num(r["wall"]),
                         r["rss_kib"], r["rc"], r["signal"], r["error"] or ""])
    paths["runs_csv"] = p
    p = os.path.join(results_dir, stem + ".json")
    doc = {"meta": meta, "reference": ref_name, "mode": "scaling",
           "allocators": [a.to_json() for a in allocs],
           "workloads": [{k: v for k, v in w.items()} for w in workloads],
           "threads": {w["name"]: [pt["scaling_threads"] for pt in points
                                   if pt["name"] == w["name"]] for w in workloads},
           "cells": [cells[(pt["name"], pt["scaling_threads"], a.name)]
                     for pt in points for a in allocs],
           "collapse": list(collapse.values()), "collapse_warn": COLLAPSE_WARN,
           "runs": records}
    with open(p, "w") as f:
        json.dump(doc, f, indent=1, default=str)
    paths["json"] = p
    return paths


def _count(x):
    """An operation count, in full (_num would round it to 6 digits)."""
    if not isinstance(x, (int, float)):
        return ""
    return "%d" % x if x == int(x) else "%.1f" % x


def run_scaling(args, workloads, points, allocs, runs, ctx, size_of, meta, stem, ref_name, log):
    records, interrupted = execute(plan(points, allocs, runs), runs, ctx, size_of, meta,
                                   args.quiet)
    cells, collapse = summarize_scaling(records, points, allocs, ref_name)
    text = report_scaling(meta, workloads, points, allocs, ref_name, cells, collapse)
    paths = write_scaling_outputs(args.results_dir, stem, meta, workloads, points, allocs,
                                  records, cells, collapse, ref_name)
    return finish(args, stem, text, paths, log, interrupted, cells, (ref_name,))


def run_syscalls(args, workloads, allocs, runs, ctx, size_of, meta, stem, log):
    if not shutil.which("strace"):
        raise SystemExit("harness: --syscalls needs strace (apt-get install strace)")
    order = plan(workloads, allocs, runs)
    progress = Progress(len(order), not args.quiet)
    tmp = tempfile.mkdtemp(prefix="brisk-strace-")
    rows = []
    try:
        for i, (w, r, a) in enumerate(order):
            progress.show("strace %s / %s" % (w["name"], a.name), w["name"])
            out = os.path.join(tmp, "%d.txt" % i)
            wrapper = ["strace", "-f", "-c", "-o", out, "-e", "trace=" + ",".join(SYSCALLS)]
            rec = run_one(w, a, r, size_of(w), ctx, wrapper)
            counts = {}
            if os.path.exists(out):
                with open(out) as f:
                    counts = parse_strace_summary(f.read())
            rows.append({"workload": w["name"], "alloc": a.name, "run": r, "ok": rec["ok"],
                         "error": rec["error"], "counts": counts})
            progress.step()
    finally:
        progress.end()
        shutil.rmtree(tmp, ignore_errors=True)
    med = {}
    for w in workloads:
        for a in allocs:
            rs = [x for x in rows if x["workload"] == w["name"] and x["alloc"] == a.name]
            med[(w["name"], a.name)] = {
                s: median([x["counts"].get(s, 0) for x in rs]) for s in SYSCALLS}, rs
    lines = ["# brisk syscall profile (%s, strace -c -f, %d run%s, %s sizes)"
             % (meta["date"], runs, "s" if runs > 1 else "", meta["size_tier"]), "",
             "Command: `%s`" % meta["command"], ""]
    header = ["workload", "allocator"] + SYSCALLS
    trows = []
    for w in workloads:
        for a in allocs:
            counts, rs = med[(w["name"], a.name)]
            fail = [x["error"] for x in rs if not x["ok"]]
            trows.append([w["name"], a.name] + ["%d" % counts[s] for s in SYSCALLS])
            if fail:
                trows[-1][1] += " (FAIL: %s)" % ", ".join(sorted(set(fail)))
    lines.append(md_table(header, trows))
    text = "\n".join(lines) + "\n"
    os.makedirs(args.results_dir, exist_ok=True)
    p = os.path.join(args.results_dir, stem + ".csv")
    with open(p, "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["workload", "allocator"] + SYSCALLS)
        for w in workloads:
            for a in allocs:
                counts, _ = med[(w["name"], a.name)]
                wr.writerow([w["name"], a.name] + [counts[s] for s in SYSCALLS])
    pj = os.path.join(args.results_dir, stem + ".json")
    with open(pj, "w") as f:
        json.dump({"meta": meta, "runs": rows}, f, indent=1, default=str)
    sys.stdout.write(text + "\nFiles: %s, %s\n" % (os.path.relpath(p), os.path.relpath(pj)))
    return 0


def run_profile(args, workloads, allocs, ctx, size_of, meta, stem, log):
    """One perf record (software cpu-clock event: this machine's VM has no
    hardware counters) per workload and allocator; prints the top symbols
    and keeps each report as a text file."""
    if not shutil.which("perf"):
        raise SystemExit("harness: --profile needs perf (apt-get install linux-perf)")
    if any(w.get("kind") == "redis" for w in workloads):
        workloads = [w for w in workloads if w.get("kind") != "redis"]
        log("--profile skips redis (profile redis-server by hand with perf record -p)")
    os.makedirs(args.results_dir, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix="brisk-perf-")
    pairs = [(w, a) for w in workloads for a in allocs]
    progress = Progress(len(pairs), not args.quiet)
    lines = ["# brisk perf profiles (%s, perf record -e cpu-clock, %s sizes)"
             % (meta["date"], meta["size_tier"]), "", "Command: `%s`" % meta["command"], ""]
    try:
        for w, a in pairs:
            progress.show("perf %s / %s" % (w["name"], a.name), w["name"])
            data = os.path.join(tmp, "perf.data")
            argv = workload_argv(w, ctx["bin_dir"], size_of(w), ctx["threads"])
            preload = a.preload(w, ctx["glibc_forward"])
            if ctx["spawn"]:  # the preload reaches the workload, not perf
                argv = [ctx["spawn"], os.devnull, preload or ""] + argv
                preload = None
            child = Child(["perf", "record", "-q", "-e", "cpu-clock", "-F", "4000", "-o", data,
                           "--"] + argv, child_env(a, 0), ctx["timeout"], None, preload)
            r = child.wait()
            rep = subprocess.run(["perf", "report", "-i", data, "--stdio", "--no-children",
                                  "--sort", "dso,sym", "-g", "none", "--percent-limit", "1.5"],
                                 capture_output=True, text=True)
            top = [l.rstrip() for l in rep.stdout.splitlines() if l.strip() and
                   not l.startswith("#")][:15]
            path = os.path.join(args.results_dir, "%s-%s-%s.txt" % (stem, w["name"], a.name))
            with open(path, "w") as f:
                f.write(rep.stdout)
            lines.append("## %s under %s%s" % (w["name"], a.name, "" if r["rc"] == 0 else
                                                 " (%s)" % failure_text(r)))
            lines.append("")
            lines.append("```")
            lines.extend(top or ["(no samples)"])
            lines.append("```")
            lines.append("")
            progress.step()
    finally:
        progress.end()
        shutil.rmtree(tmp, ignore_errors=True)
    sys.stdout.write("\n".join(lines) + "\nReports: %s/%s-*.txt\n"
                     % (os.path.relpath(args.results_dir), stem))
    return 0


def run_instructions(args, workloads, allocs, ctx, meta, stem, ref_name, log):
    """Instructions per operation: callgrind at sizes n and 2n, single
    thread; the difference cancels start-up and exit."""
    if not shutil.which("valgrind"):
        raise SystemExit("harness: --instructions needs valgrind (apt-get install valgrind)")
    tmp = tempfile.mkdtemp(prefix="brisk-callgrind-")
    pairs = [(w, a) for w in workloads for a in allocs]
    progress = Progress(2 * len(pairs), not args.quiet)
    result = {}
    try:
        for w, a in pairs:
            got = []
            for k, n in enumerate((w["instr"], 2 * w["instr"])):
                progress.show("callgrind %s / %s / size %d" % (w["name"], a.name, n), w["name"])
                out = os.path.join(tmp, "%s-%s-%d.out" % (w["name"], a.name, k))
                wrapper = ["valgrind", "--tool=callgrind", "--callgrind-out-file=" + out,
                           "--dump-instr=no", "--compress-strings=no"]
                argv = workload_argv(w, ctx["bin_dir"], n, 1, w.get("instr_extra"))
                argv, preload = wrap(argv, a.preload(w, ctx["glibc_forward"]), wrapper)
                child = Child(argv, child_env(a, 0), ctx["timeout"], None, preload)
                ctx["current"] = child
                r = child.wait()
                ctx["current"] = None
                res, _ = parse_output(r["stdout"])
                ir = parse_callgrind_total(out) if os.path.exists(out) else None
                if r["rc"] != 0 or not res or ir is None:
                    got = None
                    result[(w["name"], a.name)] = {"error": failure_text(r)}
                    progress.step()
                    break
                got.append((ir, res.get("ops", 0)))
                progress.step()
            if got and len(got) == 2:
                dops = got[1][1] - got[0][1]
                result[(w["name"], a.name)] = {
                    "instr_per_op": (got[1][0] - got[0][0]) / dops if dops > 0 else None,
                    "ir": [g[0] for g in got], "ops": [g[1] for g in got]}
    finally:
        progress.end()
        shutil.rmtree(tmp, ignore_errors=True)
    baseline = {}
    if args.instr_baseline and os.path.exists(args.instr_baseline):
        with open(args.instr_baseline) as f:
            baseline = json.load(f).get("instr_per_op", {})
    lines = ["# brisk instructions per operation (callgrind, 1 thread, %s)" % meta["date"], "",
             "Command: `%s`" % meta["command"], "",
             "Instructions of the program at size 2n minus size n, divided by the extra "
             "operations; a peer's ratio is to %s." % ref_name, ""]
    header = ["workload"] + [a.name for a in allocs]
    if baseline:
        header.append("%s vs baseline" % ref_name)
    rows = []
    for w in workloads:
        ref = result.get((w["name"], ref_name), {}).get("instr_per_op")
        row = [w["name"]]
        for a in allocs:
            c = result.get((w["name"], a.name), {})
            ipo = c.get("instr_per_op")
            if ipo is None:
                row.append("FAIL: " + c.get("error", "?"))
            elif a.name == ref_name or not ref:
                row.append("%.1f" % ipo)
            else:
                row.append("%.1f (%.2f)" % (ipo, ipo / ref))
        if baseline:
            b = baseline.get(w["name"])
            row.append("-" if not (b and ref) else "%+.1f%% (was %.1f)" % ((ref / b - 1) * 100, b))
        rows.append(row)
    text = "\n".join(lines) + "\n" + md_table(header, rows) + "\n"
    os.makedirs(args.results_dir, exist_ok=True)
    pj = os.path.join(args.results_dir, stem + ".json")
    doc = {"meta": meta, "reference": ref_name,
           "cells": [dict(workload=w, alloc=a, **v) for (w, a), v in result.items()]}
    with open(pj, "w") as f:
        json.dump(doc, f, indent=1)
    if args.save_instr:
        rec = {"date": meta["date"], "allocator": ref_name, "instr_per_op": {
            w["name"]: result.get((w["name"], ref_name), {}).get("instr_per_op")
            for w in workloads}}
        with open(args.save_instr, "w") as f:
            json.dump(rec, f, indent=1)
    sys.stdout.write(text + "\nFiles: %s\n" % os.path.relpath(pj))
    failed = [v for (w, a), v in result.items() if a == ref_name and "error" in v]
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:
        sys.exit(1)
