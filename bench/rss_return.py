#!/usr/bin/env python3
"""Memory returned to the OS: RSS over time after a burst is freed.

    python3 bench/rss_return.py                       # 1 GiB, 3 s, every peer
    python3 bench/rss_return.py --mib 64 --seconds 1  # quick look
    python3 bench/rss_return.py --alloc brisk,mimalloc --runs 3
    python3 bench/rss_return.py --alloc brisk,old=/tmp/old/libbrisk.so

The requirement: after a burst of 1 GiB of 64-byte blocks is freed, RSS
falls below 5% of the burst's peak within 1 s while the program keeps
running. bench_rss_return (bench/rss_return.c) allocates, writes, checks and
frees the burst, then does light malloc/free work for SECONDS and samples
its RSS every 10 ms. This script runs it under every peer (LD_PRELOAD, found
the way bench/harness.py finds them; runs interleaved, the order rotated
each run), and writes under bench/out/ (or --results-dir):

    rss-return-<date>.csv   allocator,run,t_ms,rss_kib: every sample
    rss-return-<date>.json  the runs, their samples and the summary
    rss-return-<date>.png   RSS after the free, % of the burst and MiB

Percentages are of the burst: 100 * (rss - base) / (peak - base), base being
the RSS before the burst and peak the RSS just before the first free (the
program's pointer array left out of both). "at 100 ms" and "at 1 s" are the
last sample taken at or before that time since the last free; "at end" is
the last sample. An allocator meets the requirement in a run when it is
below 5% at 1 s and still below 5% at the end; the table shows medians over
runs and "yes" only when every run met it.

Only the standard library is needed to run; the chart needs matplotlib,
looked for in this interpreter and then in /usr/bin/python3.
"""

import argparse
import csv
import datetime
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

sys.path.insert(0, HERE)
from runner import (  # noqa: E402  (run as a script)
    failure_text, parse_output, resolve_allocators, run_child, snapshot)
from harness import _versions, matplotlib_python, md_table, plan  # noqa: E402

TARGET_PCT = 5.0     # RSS must fall below this share of the burst...
TARGET_MS = 1000.0   # ...within this long after the last free
SAMPLE_RE = re.compile(r"^SAMPLE\s+(.*)$")


# --------------------------------------------------------------------------
# Parsing and statistics (no process is run here: tests/test_rss_return.py)

def pct(rss_kib, base_kib, peak_kib):
    """RSS as a percentage of the burst, the baseline subtracted from both."""
    if peak_kib is None or base_kib is None or peak_kib <= base_kib:
        return None
    return 100.0 * (rss_kib - base_kib) / (peak_kib - base_kib)


def rss_at(samples, t_ms):
    """RSS of the last sample taken at or before t_ms (the first if none was)."""
    if not samples:
        return None
    r = samples[0][1]
    for t, rss in samples:
        if t > t_ms:
            break
        r = rss
    return r


def parse_samples(stdout):
    """'SAMPLE t_ms=.. rss_kib=..' lines -> [(t_ms, rss_kib)] in time order."""
    out = []
    for line in stdout.splitlines():
        m = SAMPLE_RE.match(line.strip())
        if not m:
            continue
        f = dict(tok.split("=", 1) for tok in m.group(1).split() if "=" in tok)
        try:
            out.append((float(f["t_ms"]), int(float(f["rss_kib"]))))
        except (KeyError, ValueError):
            continue
    out.sort(key=lambda s: s[0])
    return out


def parse_run(stdout):
    """One run's output -> dict: samples, peak_kib, base_kib, the four
    percentages, meets; error is set (and the rest may be None) when the
    output lacks what is needed."""
    result, metrics = parse_output(stdout)
    m = metrics.get("rss_return", {})
    samples = parse_samples(stdout)
    peak, base = m.get("peak_kib"), m.get("base_kib")
    rec = {"samples": samples, "peak_kib": peak, "base_kib": base, "after_free_pct": None,
           "at_100ms_pct": None, "at_1s_pct": None, "at_end_pct": None, "meets": False,
           "error": None}
    if result is None or result.get("check") != "ok":
        rec["error"] = "no RESULT line" if result is None else "check failed"
    elif not samples:
        rec["error"] = "no SAMPLE lines"
    elif peak is None or base is None or peak <= base:
        rec["error"] = "no burst (METRIC peak_kib/base_kib missing or peak <= base)"
    if rec["error"]:
        return rec
    rec["after_free_pct"] = pct(samples[0][1], base, peak)
    rec["at_100ms_pct"] = pct(rss_at(samples, 100.0), base, peak)
    rec["at_1s_pct"] = pct(rss_at(samples, TARGET_MS), base, peak)
    rec["at_end_pct"] = pct(samples[-1][1], base, peak)
    rec["meets"] = rec["at_1s_pct"] < TARGET_PCT and rec["at_end_pct"] < TARGET_PCT
    return rec


KEYS = ("peak_kib", "after_free_pct", "at_100ms_pct", "at_1s_pct", "at_end_pct")


def summarize(records, alloc_names):
    """Per allocator: medians of the good runs, how many met the target."""
    out = {}
    for name in alloc_names:
        rs = [r for r in records if r["alloc"] == name]
        ok = [r for r in rs if r["ok"]]
        cell = {"alloc": name, "runs": len(rs), "ok": len(ok),
                "errors": sorted(set(r["error"] for r in rs if r["error"])),
                "meets_runs": sum(1 for r in ok if r["meets"])}
        for k in KEYS:
            vals = [r[k] for r in ok if r[k] is not None]
            cell[k] = statistics.median(vals) if vals else None
        cell["meets"] = bool(ok) and len(ok) == len(rs) and cell["meets_runs"] == len(rs)
        out[name] = cell
    return out


def fmt_pct(x):
    return "-" if x is None else "%.1f" % x


def meets_text(c):
    if c["ok"] == 0:
        return "no"
    if c["meets"]:
        return "yes"
    if c["meets_runs"]:
        return "no (%d of %d runs)" % (c["meets_runs"], c["runs"])
    return "no"


def report_table(summary, alloc_names):
    header = ["allocator", "peak MiB", "after free %", "at 100 ms %", "at 1 s %", "at end %",
              'meets "<%g%% within %g s"' % (TARGET_PCT, TARGET_MS / 1000)]
    rows = []
    for name in alloc_names:
        c = summary[name]
        if c["ok"] == 0:
            rows.append([name, "FAIL: " + ", ".join(c["errors"] or ["no run"]), "-", "-", "-",
                         "-", "no"])
            continue
        peak = "-" if c["peak_kib"] is None else "%.0f" % (c["peak_kib"] / 1024.0)
        if c["ok"] < c["runs"]:
            peak += " (%d of %d runs failed)" % (c["runs"] - c["ok"], c["runs"])
        rows.append([name, peak] + [fmt_pct(c[k]) for k in KEYS[1:]] + [meets_text(c)])
    return md_table(header, rows)


def report_markdown(meta, summary, alloc_names):
    lines = ["# RSS returned after a burst (%s, %d run%s, %s)"
             % (meta["date"], meta["runs"], "s" if meta["runs"] > 1 else "", meta["host"]), "",
             "Command: `%s`" % meta["command"], "",
             "Burst: %d MiB of 64-byte blocks, written, checked and freed; then %g s of light "
             "malloc/free work, RSS sampled every 10 ms." % (meta["mib"], meta["seconds"]), "",
             "Allocators: " + ", ".join("%s (%s)" % (n, meta["versions"].get(n) or "no preload")
                                        for n in alloc_names), "",
             report_table(summary, alloc_names), "",
             "Percentages are of the burst: (RSS - RSS before the burst) / (peak - RSS before "
             "the burst); peak MiB is the RSS just before the first free. \"at 1 s\" is the last "
             "sample at or before 1 s after the last free; meets = below %g%% at 1 s and at the "
             "end%s." % (TARGET_PCT, ", in every run" if meta["runs"] > 1 else "")]
    for n in meta["notes"]:
        lines.append("")
        lines.append("Note: " + n)
    return "\n".join(lines).rstrip() + "\n"


# --------------------------------------------------------------------------
# Output files

def write_outputs(results_dir, stem, meta, records, summary, alloc_names):
    os.makedirs(results_dir, exist_ok=True)
    paths = {}
    p = os.path.join(results_dir, stem + ".csv")
    with open(p, "w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow(["allocator", "run", "t_ms", "rss_kib"])
        for r in records:
            for t, rss in r["samples"]:
                wr.writerow([r["alloc"], r["run"], "%.1f" % t, rss])
    paths["csv"] = p
    p = os.path.join(results_dir, stem + ".json")
    doc = {"meta": meta, "allocators": alloc_names,
           "target": {"pct": TARGET_PCT, "ms": TARGET_MS},
           "summary": [summary[n] for n in alloc_names], "runs": records}
    with open(p, "w") as f:
        json.dump(doc, f, indent=1, default=str)
    paths["json"] = p
    return paths


def chart(doc, path):
    """RSS after the free: % of the burst (log scale, dashed line at the
    target) above, MiB below; one colour per allocator, a line per run."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    meta = doc["meta"]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10.5, 7.5), sharex=True,
                                      gridspec_kw={"height_ratios": [3, 2]})
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    floor = 0.1  # % shown at the bottom of the log scale
    for i, name in enumerate(doc["allocators"]):
        color = colors[i % len(colors)]
        labelled = False
        for r in doc["runs"]:
            if r["alloc"] != name or not r["ok"]:
                continue
            ts = [s[0] / 1000.0 for s in r["samples"]]
            ps = [max(floor, pct(s[1], r["base_kib"], r["peak_kib"])) for s in r["samples"]]
            mib = [s[1] / 1024.0 for s in r["samples"]]
            label = None if labelled else name
            labelled = True
            top.plot(ts, ps, color=color, linewidth=1.3, label=label)
            bottom.plot(ts, mib, color=color, linewidth=1.3, label=label)
    top.axhline(doc["target"]["pct"], color="black", linestyle="--", linewidth=1,
                label="%g%% of the burst" % doc["target"]["pct"])
    for ax in (top, bottom):
        ax.axvline(doc["target"]["ms"] / 1000.0, color="grey", linestyle=":", linewidth=1)
        ax.grid(which="both", alpha=0.3)
    top.set_yscale("log")
    top.set_ylim(floor * 0.9, 150)
    top.yaxis.set_major_locator(matplotlib.ticker.FixedLocator(
        [0.1, 0.2, 0.5, 1, 2, 5, 10, 20, 50, 100]))
    top.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    top.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    top.set_ylabel("RSS above the baseline, % of the burst")
    top.set_title("RSS after %d MiB of 64 B blocks are freed: %d run%s, %s"
                  % (meta["mib"], meta["runs"], "s" if meta["runs"] > 1 else "", meta["date"]))
    top.legend(fontsize="small", loc="upper left", bbox_to_anchor=(1.01, 1.0))
    bottom.set_ylabel("RSS, MiB")
    bottom.set_xlabel("seconds since the last free (dotted: %g s)"
                      % (doc["target"]["ms"] / 1000.0))
    bottom.set_ylim(bottom=0)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def make_chart(json_path, png_path, log):
    py = matplotlib_python()
    if not py:
        log("chart skipped: matplotlib not found (apt-get install python3-matplotlib)")
        return []
    r = subprocess.run([py, os.path.abspath(__file__), "--plot", json_path, png_path],
                       capture_output=True, text=True)
    if r.returncode != 0:
        log("chart failed: " + r.stderr.strip()[-500:])
        return []
    return [png_path]


# --------------------------------------------------------------------------
# Running

def run_one(alloc, run, ctx):
    argv = [ctx["program"], str(ctx["mib"]), "%g" % ctx["seconds"]]
    r = run_child(argv, alloc, run, ctx, alloc.lib)
    rec = parse_run(r["stdout"])
    rec.update({"alloc": alloc.name, "run": run, "wall": r["wall"], "rc": r["rc"],
                "ok": False})
    if r["rc"] != 0 or r["timed_out"] or r["signal"]:
        rec["error"] = failure_text(r)
    if rec["error"]:
        rec["stderr_tail"] = r["stderr"][-2000:]
    else:
        rec["ok"] = True
    return rec


def parse_args(argv):
    p = argparse.ArgumentParser(description="RSS returned after a burst, every peer",
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog=__doc__)
    p.add_argument("--mib", type=int, default=1024, help="burst size in MiB (default 1024)")
    p.add_argument("--seconds", type=float, default=3.0,
                   help="how long the program keeps running after the free (default 3)")
    p.add_argument("--alloc", help="comma list: peer names, NAME=/path/lib.so, NAME=none")
    p.add_argument("--runs", type=int, default=1, help="runs per allocator (default 1)")
    p.add_argument("--build-dir", default=os.environ.get("BRISK_BUILD_DIR",
                                                          os.path.join(ROOT, "build")))
    p.add_argument("--brisk-lib", help="default: BUILD_DIR/libbrisk.so")
    p.add_argument("--bin-dir", help="default: BUILD_DIR/bench")
    p.add_argument("--results-dir", default=os.path.join(HERE, "out"))
    p.add_argument("--stem", help="output file name stem (default rss-return-DATE)")
    p.add_argument("--timeout", type=float, help="seconds per run before it is killed")
    p.add_argument("--no-charts", action="store_true")
    p.add_argument("--no-install", action="store_true",
                   help="never apt-get install missing peers")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    a = p.parse_args(argv)
    if a.runs < 1:
        p.error("--runs must be at least 1")
    if a.mib < 1:
        p.error("--mib must be at least 1")
    return a


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["--plot"]:  # the chart, run by an interpreter with matplotlib
        with open(argv[1]) as f:
            chart(json.load(f), argv[2])
        return 0
    args = parse_args(argv)
    log = lambda m: sys.stderr.write("rss_return: %s\n" % m)
    build_dir = os.path.abspath(args.build_dir)
    bin_dir = os.path.abspath(args.bin_dir or os.path.join(build_dir, "bench"))
    brisk_lib = args.brisk_lib or os.environ.get("BRISK_LIB") or os.path.join(build_dir,
                                                                              "libbrisk.so")
    program = os.path.join(bin_dir, "bench_rss_return")
    if not os.access(program, os.X_OK):
        raise SystemExit("rss_return: %s not built (cmake --build %s)" % (program, build_dir))
    allocs, notes = resolve_allocators(args.alloc, brisk_lib, not args.no_install, log)
    if not allocs:
        raise SystemExit("rss_return: no allocator to run")
    names = [a.name for a in allocs]
    tmpdir = tempfile.mkdtemp(prefix="brisk-rss-")
    snapshot(allocs, tmpdir)
    now = datetime.datetime.now()
    meta = {"date": now.strftime("%Y-%m-%d %H:%M"), "runs": args.runs, "mib": args.mib,
            "seconds": args.seconds,
            "host": "%s, %d cpus" % (platform.node() or "host", os.cpu_count() or 0),
            "command": " ".join(["python3", os.path.relpath(os.path.abspath(__file__), ROOT)]
                                + argv),
            "kernel": platform.release(), "glibc": " ".join(platform.libc_ver()),
            "versions": _versions(allocs, brisk_lib), "notes": notes,
            "libs": {a.name: a.source for a in allocs}}
    stem = args.stem or "rss-return-%s" % now.strftime("%Y%m%d-%H%M%S")
    ctx = {"program": program, "mib": args.mib, "seconds": args.seconds, "current": None,
           "timeout": args.timeout or 120 + args.seconds + args.mib / 8.0}
    order = plan([{"name": "rss_return"}], allocs, args.runs)
    records = []
    for n in notes:
        log(n)
    try:
        for i, (_, run, a) in enumerate(order):
            if not args.quiet:
                log("[%d/%d] %s, run %d of %d" % (i + 1, len(order), a.name, run + 1, args.runs))
            records.append(run_one(a, run, ctx))
    except KeyboardInterrupt:
        meta["notes"].append("interrupted after %d of %d runs" % (len(records), len(order)))
    finally:
        if ctx["current"]:
            ctx["current"].kill()
        shutil.rmtree(tmpdir, ignore_errors=True)
    summary = summarize(records, names)
    text = report_markdown(meta, summary, names)
    paths = write_outputs(args.results_dir, stem, meta, records, summary, names)
    charts = [] if args.no_charts else make_chart(
        paths["json"], os.path.join(args.results_dir, stem + ".png"), log)
    sys.stdout.write(text)
    sys.stdout.write("\nFiles: %s\n" % ", ".join(
        os.path.relpath(p, os.getcwd()) for p in list(paths.values()) + charts))
    failed = [r for r in records if not r["ok"]]
    for r in failed:
        sys.stdout.write("Failed: %s run %d: %s\n" % (r["alloc"], r["run"] + 1, r["error"]))
    return 1 if any(r["alloc"] == "brisk" for r in failed) else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except BrokenPipeError:
        sys.exit(1)
