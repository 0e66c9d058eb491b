#!/usr/bin/env python3
"""Tests of bench/harness.py that depend on no timing and on no allocator.

The harness runs a fake workload (a shell script written here) under fake
allocators named NAME=none: the script reports a time chosen from the
allocator's name and the run number, so medians, ratios and geometric means
have exact expected values, and it logs every run so the interleaving order
can be checked. A second fake (FAKE_SCALE) reports ops and secs chosen from
the allocator and the thread count it is given, for --scaling. Unit tests
cover the parsers and the statistics.

A check that cannot run here (no matplotlib, no strace) is reported as
SKIP and the test exits 77 (skipped) once every other check passed; with
CI=true, where scripts/setup.sh has installed them, a missing tool is a
failure. A check that the machine forbids (ptrace) stays a skip.

ctest-labels: bench
"""
import csv
import importlib.util
import io
import json
import math
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import traceback

# The checks are assert statements: under python3 -O or PYTHONOPTIMIZE they
# would be compiled away and every check would pass. Run again without.
if not __debug__:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONOPTIMIZE"}
    os.execve(sys.executable, [sys.executable, os.path.abspath(__file__)] + sys.argv[1:], env)

SKIP_RETURN_CODE = 77
IN_CI = os.environ.get("CI") == "true"


def missing(tool):
    """What a check returns when a tool it needs is not installed."""
    if IN_CI:
        raise AssertionError("%s is not installed; with CI=true every tool the tests use must be "
                             "(scripts/setup.sh)" % tool)
    return "skipped (no %s)" % tool


SOURCE_DIR = os.environ.get("BRISKTEST_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))
BUILD_DIR = os.environ.get("BRISKTEST_BUILD_DIR") or os.path.join(SOURCE_DIR, "build")
HARNESS = os.path.join(SOURCE_DIR, "bench", "harness.py")

spec = importlib.util.spec_from_file_location("harness", HARNESS)
harness = importlib.util.module_from_spec(spec)
spec.loader.exec_module(harness)  # puts bench/ on sys.path
import runner  # noqa: E402  bench/runner.py: peers, workloads, children, redis

# seconds each fake allocator reports for workload alpha; beta is twice that
BASE = {"brisk": 1.0, "fast": 0.5, "slow": 2.0, "brisk-aa": 1.02}

# The fake workload is a shell script: it starts in a millisecond, so the
# whole file runs in seconds. Times are in milliseconds: base + 10 * run.
FAKE = r'''#!/bin/sh
name=$1; size=$2; alloc=$BENCH_ALLOC; run=$BENCH_RUN
echo "$name $alloc $run ${LD_PRELOAD:--}" >> "$FAKE_LOG"
case $alloc in
  brisk) base=1000 ;; fast) base=500 ;; slow) base=2000 ;; brisk-aa) base=1020 ;; near) base=1010 ;;
  broken) echo "CHECK FAILED: fake corruption" >&2; exit 3 ;;
  crashy) kill -SEGV $$; exit 1 ;;
  *) base=1 ;;
esac
[ "$name" = beta ] && base=$((base * 2))
# wobbly: the A/A copy is 30% slower in the first three rounds only
[ "$name" = wobbly ] && [ "$alloc" = brisk-aa ] && [ "$run" -lt 3 ] && base=1300
ms=$((base + 10 * run))
secs=$(printf "%d.%03d" $((ms / 1000)) $((ms % 1000)))
echo "METRIC id=$name.m value=$size other=$((ms / 100))"
echo "some noise line that is not a result"
echo "RESULT workload=$name threads=1 ops=$size secs=$secs check=ok"
'''


# The --scaling fake: secs from the allocator and the thread count (brisk
# twice as fast from 2 threads on, flat the same at every count, collapsing
# slower the more threads), plus 10 ms * run; ops = size + threads. It is
# named larson and xmalloc (and other) so the harness treats it as those;
# like bench_xmalloc, the xmalloc fake reports an even thread count.
FAKE_SCALE = r'''#!/bin/sh
name=$1; size=$2; t=$3; alloc=$BENCH_ALLOC; run=$BENCH_RUN
echo "$name $alloc $run $t" >> "$FAKE_LOG"
case $alloc in
  brisk) if [ "$t" -lt 2 ]; then ms=1000; else ms=500; fi ;;
  flat) ms=400 ;;
  collapsing) ms=$((250 * t)) ;;
  broken) echo "CHECK FAILED: fake corruption" >&2; exit 3 ;;
  *) ms=1 ;;
esac
ms=$((ms + 10 * run))
reported=$t
[ "$name" = xmalloc ] && reported=$((t / 2 * 2))
secs=$(printf "%d.%03d" $((ms / 1000)) $((ms % 1000)))
echo "RESULT workload=$name threads=$reported ops=$((size + t)) secs=$secs check=ok"
'''
SCALE_SIZE = 1000000


def fake_mops(alloc, t, runs=3):
    """The throughput --scaling should report: ops / median secs."""
    ms = {"brisk": 1000 if t < 2 else 500, "flat": 400, "collapsing": 250 * t}[alloc]
    ms += 10 * ((runs - 1) / 2.0)  # the median run
    return (SCALE_SIZE + t) / (ms / 1000.0) / 1e6


class Env:
    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="brisk-harness-test-")
        self.fake = os.path.join(self.dir, "fake.sh")
        with open(self.fake, "w") as f:
            f.write(FAKE)
        os.chmod(self.fake, 0o755)
        self.log = os.path.join(self.dir, "log.txt")
        self.workloads = os.path.join(self.dir, "workloads.json")
        with open(self.workloads, "w") as f:
            json.dump([{"name": n, "argv": [self.fake, n, "{size}"],
                        "sizes": {"quick": 7, "default": 70, "full": 700}, "time": "reported"}
                       for n in ("alpha", "beta")], f)
        self.fake_scale = os.path.join(self.dir, "fake_scale.sh")
        with open(self.fake_scale, "w") as f:
            f.write(FAKE_SCALE)
        os.chmod(self.fake_scale, 0o755)
        self.scale_workloads = os.path.join(self.dir, "scale_workloads.json")
        with open(self.scale_workloads, "w") as f:
            json.dump([{"name": n, "argv": [self.fake_scale, n, "{size}"],
                        "sizes": {"quick": SCALE_SIZE, "default": 10, "full": 100}}
                       for n in ("other", "larson", "xmalloc")], f)
        spawn_dir = os.path.join(BUILD_DIR, "bench")
        self.bin_dir = spawn_dir if os.access(os.path.join(spawn_dir, "bench_spawn"), os.X_OK) \
            else self.dir

    def run(self, *args, stem="t", charts=False, workloads=None):
        if os.path.exists(self.log):
            os.unlink(self.log)
        env = dict(os.environ, FAKE_LOG=self.log)
        cmd = [sys.executable, HARNESS, "--workloads-file", workloads or self.workloads,
               "--results-dir",
               os.path.join(self.dir, "results"), "--stem", stem, "--bin-dir", self.bin_dir,
               "--no-install", "--quiet"] + ([] if charts else ["--no-charts"]) + list(args)
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
        return r

    def logged(self):
        with open(self.log) as f:
            return [tuple(line.split()) for line in f if line.strip()]

    def result(self, stem, ext):
        return os.path.join(self.dir, "results", stem + ext)


def expected_order(workloads, allocs, runs):
    out = []
    for w in workloads:
        for r in range(runs):
            for i in range(len(allocs)):
                out.append((w, allocs[(i + r) % len(allocs)], r))
    return out


def close(a, b, tol=1e-6):
    return a is not None and b is not None and abs(a - b) <= tol * max(1.0, abs(b))


# ---------------------------------------------------------------- unit tests

def test_parse_output():
    res, metrics = runner.parse_output(
        "hello\nMETRIC id=a.b p50_ns=10.5 p99_ns=20 note=x\n"
        "RESULT workload=w threads=2 ops=100 secs=0.25 check=ok tsc_ghz=2.4\nMETRIC nope=1\n")
    assert res["workload"] == "w" and res["ops"] == 100.0 and res["secs"] == 0.25
    assert res["check"] == "ok"
    assert metrics == {"a.b": {"p50_ns": 10.5, "p99_ns": 20.0}}, metrics
    res, metrics = runner.parse_output("no result here\n")
    assert res is None and metrics == {}


def test_help_prints():
    """--help formats every option's text (a bare % in one made it crash)."""
    for script in (HARNESS, os.path.join(SOURCE_DIR, "bench", "zmq_matrix.py"),
                   os.path.join(SOURCE_DIR, "bench", "rss_return.py")):
        r = subprocess.run([sys.executable, script, "--help"], capture_output=True, text=True,
                           timeout=60)
        assert r.returncode == 0 and "usage:" in r.stdout, (script, r.returncode, r.stderr[-400:])


def test_plan_interleaves_and_rotates():
    ws = [{"name": "w1"}, {"name": "w2"}]
    allocs = [runner.Allocator(n) for n in ("a", "b", "c")]
    got = [(w["name"], a.name, r) for w, r, a in harness.plan(ws, allocs, 3)]
    assert got == expected_order(["w1", "w2"], ["a", "b", "c"], 3), got
    # every allocator runs once per run, and no allocator is always first
    firsts = {got[i][1] for i in range(0, 9, 3)}
    assert firsts == {"a", "b", "c"}


def test_statistics():
    assert harness.median([3, 1, 2]) == 2
    assert harness.median([4, 1, 2, 3]) == 2.5
    assert harness.median([]) is None
    assert close(harness.geomean([2.0, 8.0]), 4.0)
    assert close(harness.geomean([1.0, None, 4.0]), 2.0)
    assert harness.geomean([]) is None
    assert close(harness.ratio(3.0, 2.0), 1.5)
    assert harness.ratio(None, 2.0) is None and harness.ratio(1.0, 0) is None


def test_summarize():
    ws = [{"name": "x"}, {"name": "y"}]
    allocs = [runner.Allocator(n) for n in ("ref", "p", "ref-aa")]
    recs = []
    times = {"ref": [1.0, 3.0, 2.0], "p": [4.0, 5.0, 6.0], "ref-aa": [2.2, 2.2, 2.2]}
    for w, k in (("x", 1), ("y", 2)):
        for a, ts in times.items():
            for r, t in enumerate(ts):
                recs.append({"workload": w, "alloc": a, "run": r, "ok": True, "error": None,
                             "time": t * k, "rss_kib": 1000 * (r + 1) * (2 if a == "p" else 1),
                             "metrics": {"m": {"v": t}}})
    recs.append({"workload": "y", "alloc": "p", "run": 3, "ok": False, "error": "signal SIGSEGV",
                 "time": 0.1, "rss_kib": 5, "metrics": {}})
    cells, geo, aa = harness.summarize(recs, ws, allocs, "ref", "ref-aa")
    assert cells[("x", "ref")]["time"] == 2.0 and cells[("x", "p")]["time"] == 5.0
    # Time ratios pair the runs of a round: 4/1, 5/3, 6/2 -> median 3.0 (the
    # ratio of the medians, 5/2, would be 2.5).
    assert close(cells[("x", "p")]["time_ratio"], 3.0)
    assert close(cells[("y", "p")]["time_ratio"], 3.0)  # the failed run is left out
    assert cells[("y", "p")]["failed"] == 1 and cells[("y", "p")]["errors"] == ["signal SIGSEGV"]
    assert close(cells[("x", "p")]["rss_ratio"], 2.0)
    assert close(cells[("x", "ref")]["spread"], 1.0 / 2.0)  # MAD of 1,2,3 over 2
    assert close(geo["p"]["time_ratio"], 3.0) and close(geo["ref"]["time_ratio"], 1.0)
    assert close(aa["time_max_dev"], 0.1)  # 2.2/1, 2.2/3, 2.2/2 -> median 1.1
    assert cells[("x", "p")]["metrics"] == {"m": {"v": 5.0}}


def test_paired_ratio_cancels_slow_rounds():
    # Rounds 2 and 3 ran on a slow machine (3x): within each round p takes
    # 1.2x the reference, and so does the ratio.
    recs = []
    speeds = [1.0, 3.0, 3.0, 1.0, 1.0]
    for r, sp in enumerate(speeds):
        recs.append({"workload": "x", "alloc": "ref", "run": r, "ok": True, "time": 1.0 * sp})
        recs.append({"workload": "x", "alloc": "p", "run": r, "ok": True, "time": 1.2 * sp})
    assert close(harness.paired_ratio(recs, "x", "p", "ref"), 1.2)
    # A round with a failed run of either side is left out; none left: None.
    recs.append({"workload": "x", "alloc": "p", "run": 9, "ok": True, "time": 50.0})
    assert close(harness.paired_ratio(recs, "x", "p", "ref"), 1.2)
    assert harness.paired_ratio(recs, "x", "q", "ref") is None


def test_strace_and_callgrind_parsers():
    text = """% time     seconds  usecs/call     calls    errors syscall
------ ----------- ----------- --------- --------- ----------------
 60.00    0.000300          10        30           mmap
 30.00    0.000150          15        10         2 futex
 10.00    0.000050           5        10           munmap
------ ----------- ----------- --------- --------- ----------------
100.00    0.000500          10        50         2 total
"""
    assert harness.parse_strace_summary(text) == {"mmap": 30, "futex": 10, "munmap": 10}
    d = tempfile.mkdtemp()
    try:
        p = os.path.join(d, "cg.out")
        with open(p, "w") as f:
            f.write("version: 1\ncmd: x\nevents: Ir\nfn=main\n0 12\nsummary: 123456\n")
        assert harness.parse_callgrind_total(p) == 123456
    finally:
        shutil.rmtree(d)


def fake_lib(d):
    lib = os.path.join(d, "libfake.so.1")
    with open(lib, "wb") as f:
        f.write(b"\x7fELF fake")
    return lib


def assert_alloc_refused(*specs):
    for bad in specs:
        try:
            runner.resolve_allocators(bad, "/nonexistent", False, lambda m: None)
        except SystemExit:
            continue
        raise AssertionError("accepted --alloc %s" % bad)


def test_resolve_custom_allocators_and_aa():
    d = tempfile.mkdtemp()
    try:
        lib = fake_lib(d)
        allocs, notes = runner.resolve_allocators("brisk=%s,other=none" % lib,
                                                   "/nonexistent", False, lambda m: None)
        assert [a.name for a in allocs] == ["brisk", "other"] and notes == []
        assert allocs[0].lib == lib and allocs[1].lib is None
        w = {"needs_glibc_forward": True}
        assert allocs[0].preload(w, "/x/glibc_forward.so") == lib
        assert allocs[1].preload(w, "/x/glibc_forward.so") == "/x/glibc_forward.so"
        assert allocs[1].preload({}, "/x/glibc_forward.so") is None
        aa = runner.make_aa(allocs[0], d)
        assert aa.name == "brisk-aa" and aa.lib != lib and os.path.exists(aa.lib)
        with open(aa.lib, "rb") as f:
            assert f.read() == b"\x7fELF fake"
        assert_alloc_refused("a=/nonexistent/lib.so", "a,a", "nosuchpeer")
    finally:
        shutil.rmtree(d)


def test_allocator_environment():
    """NAME=path:VAR=VALUE sets VAR in that allocator's runs and its A/A
    copy's, and nowhere else."""
    d = tempfile.mkdtemp()
    try:
        lib = fake_lib(d)
        spec = "plain=%s,prof=%s:BRISKTEST_PROBE=/tmp/p/x:BRISKTEST_PROBE_RATE=4096,g=none:A=b=c" % (lib, lib)
        allocs, _ = runner.resolve_allocators(spec, "/nonexistent", False, lambda m: None)
        env = {a.name: a.env for a in allocs}
        assert env == {"plain": {}, "prof": {"BRISKTEST_PROBE": "/tmp/p/x", "BRISKTEST_PROBE_RATE": "4096"},
                       "g": {"A": "b=c"}}, env
        assert allocs[1].lib == lib
        run_env = runner.child_env(allocs[1], 3)
        assert run_env["BRISKTEST_PROBE"] == "/tmp/p/x" and run_env["BENCH_ALLOC"] == "prof"
        assert run_env["BENCH_RUN"] == "3" and "LD_PRELOAD" not in run_env
        assert "BRISKTEST_PROBE" not in runner.child_env(allocs[0], 1)
        aa = runner.make_aa(allocs[1], d)
        assert aa.env == allocs[1].env and runner.child_env(aa, 1)["BRISKTEST_PROBE_RATE"] == "4096"
        assert "BRISKTEST_PROBE=/tmp/p/x" in allocs[1].describe() and allocs[1].to_json()["env"]
        assert_alloc_refused("a=%s:X=1:notvar" % lib, "a=%s:notvar" % lib)
    finally:
        shutil.rmtree(d)


def test_scaling_counts_and_points():
    assert harness.parse_counts("4,1,2,2") == [1, 2, 4]
    for bad in ("", "0,1", "a,2", "1,300"):
        try:
            harness.parse_counts(bad)
        except SystemExit:
            continue
        raise AssertionError("accepted --scaling %r" % bad)
    ws = [{"name": "larson"}, {"name": "xmalloc"}, {"name": "quad", "thread_unit": 4}]
    points, notes = harness.scaling_points(ws, [1, 2, 3, 4, 8])
    got = [(p["name"], p["scaling_threads"]) for p in points]
    assert got == [("larson", 1), ("larson", 2), ("larson", 3), ("larson", 4), ("larson", 8),
                   ("xmalloc", 2), ("xmalloc", 4), ("xmalloc", 8), ("quad", 4), ("quad", 8)], got
    assert all("scaling_threads" not in w for w in ws)  # copies, not the originals
    assert len(notes) == 2 and notes[0].startswith("xmalloc: not run at 1, 3 threads"), notes
    assert "1-thread point would be its 2-thread one" in notes[0], notes


def test_summarize_scaling():
    points = [{"name": "w", "scaling_threads": t} for t in (1, 2, 4)]
    allocs = [runner.Allocator(n) for n in ("ref", "p")]
    # secs per (alloc, threads), three runs each; ops = 1000 * threads
    secs = {("ref", 1): [1.0, 2.0, 3.0], ("ref", 2): [1.0, 1.0, 1.0], ("ref", 4): [0.5, 0.5, 9],
            ("p", 1): [0.5, 0.5, 0.5], ("p", 2): [4.0, 4.0, 4.0], ("p", 4): [8.0, 8.0, 8.0]}
    recs = []
    for (a, t), ss in secs.items():
        for r, x in enumerate(ss):
            recs.append({"workload": "w", "alloc": a, "run": r, "threads": t, "ok": True,
                         "error": None, "time": 99.0, "wall": 99.0, "rss_kib": 10,
                         "result": {"ops": 1000.0 * t, "secs": x, "threads": float(t)}})
    recs.append({"workload": "w", "alloc": "p", "run": 3, "threads": 4, "ok": False,
                 "error": "signal SIGSEGV", "time": 0.1, "wall": 0.1, "rss_kib": 5,
                 "result": None})
    recs.append({"workload": "w", "alloc": "p", "run": 4, "threads": 4, "ok": True,
                 "error": None, "time": 0.1, "wall": 0.1, "rss_kib": 5,
                 "result": {"secs": 0.1, "check": "ok"}})
    cells, collapse = harness.summarize_scaling(recs, points, allocs, "ref")
    assert close(cells[("w", 1, "ref")]["mops"], 1000 / 2.0 / 1e6)  # RESULT secs, not time
    assert close(cells[("w", 4, "ref")]["mops"], 4000 / 0.5 / 1e6)
    assert close(cells[("w", 2, "p")]["mops_ratio"], 0.25)
    assert close(cells[("w", 1, "p")]["mops_ratio"], 4.0)
    c = cells[("w", 4, "p")]
    assert c["ok"] == 3 and c["failed"] == 2 and close(c["mops"], 4000 / 8.0 / 1e6)
    assert c["errors"] == ["no ops= in RESULT", "signal SIGSEGV"], c["errors"]
    k = collapse[("w", "ref")]
    assert k["best_threads"] == 4 and close(k["collapse"], 1.0)
    k = collapse[("w", "p")]  # best 2000 ops/s at 1 thread, 500 at 4
    assert k["best_threads"] == 1 and k["top_threads"] == 4 and close(k["collapse"], 0.25)


def test_resp_client():
    a, b = socket.socketpair()
    try:
        b.sendall(b"+PONG\r\n$3\r\nabc\r\n*2\r\n$1\r\nx\r\n$-1\r\n:42\r\n-ERR no\r\n")
        r = runner.RespReader(a)
        assert r.read() == "PONG" and r.read() == b"abc" and r.read() == [b"x", None]
        assert r.read() == 42 and isinstance(r.read(), RuntimeError)
        assert runner.resp("SET", "k", b"v") == b"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n"
    finally:
        a.close()
        b.close()


# ---------------------------------------------------------- end-to-end runs

def test_matrix_end_to_end(env):
    r = env.run("--quick", "--alloc", "brisk=none,fast=none,slow=none", "--runs", "3")
    assert r.returncode == 0, r.stderr + r.stdout
    allocs = ["brisk", "fast", "slow", "brisk-aa"]
    # interleaving: the order the fake workload saw is the documented plan
    order = [(w, a, int(run)) for w, a, run, _ in env.logged()]
    assert order == expected_order(["alpha", "beta"], allocs, 3), order
    # no preload for NAME=none
    assert all(p == "-" for _, _, _, p in env.logged())
    # the summary CSV: medians, ratios, geometric means
    rows = list(csv.DictReader(open(env.result("t", ".csv"))))
    by = {(x["workload"], x["allocator"]): x for x in rows}
    for w, k in (("alpha", 1), ("beta", 2)):
        for a in allocs:
            want = BASE[a] * k + 0.01  # median of base, base+0.01, base+0.02
            got = float(by[(w, a)]["median_s"])
            assert close(got, want, 1e-4), (w, a, got, want)
            want_ratio = (BASE[a] * k + 0.01) / (BASE["brisk"] * k + 0.01)
            assert close(float(by[(w, a)]["time_ratio_to_brisk"]), want_ratio, 1e-4)
            assert by[(w, a)]["ok"] == "3" and by[(w, a)]["failed"] == "0"
    for a in allocs:
        want = math.sqrt(((BASE[a] + 0.01) / 1.01) * ((2 * BASE[a] + 0.01) / 2.01))
        assert close(float(by[("geomean", a)]["time_ratio_to_brisk"]), want, 1e-4), a
    # every run in the runs CSV, in order
    runs = list(csv.DictReader(open(env.result("t", "-runs.csv"))))
    assert [(x["workload"], x["allocator"], int(x["run"])) for x in runs] == \
        expected_order(["alpha", "beta"], allocs, 3)
    assert all(int(x["rss_kib"]) > 0 for x in runs)
    # JSON: cells consistent with the raw runs (peak RSS medians too)
    doc = json.load(open(env.result("t", ".json")))
    assert doc["reference"] == "brisk" and doc["aa"] == "brisk-aa"
    for c in doc["cells"]:
        mine = [x for x in doc["runs"] if x["workload"] == c["workload"] and
                x["alloc"] == c["alloc"]]
        assert c["rss_kib"] == harness.median([x["rss_kib"] for x in mine])
        assert close(c["metrics"][c["workload"] + ".m"]["value"], 7.0)
    # markdown: both tables, geomean row, A/A line, details
    out = r.stdout
    assert "| workload | brisk | fast | slow | A/A | brisk spread |" in out, out
    want_fast = math.sqrt((0.51 / 1.01) * (1.01 / 2.01))
    assert "| **geomean** | **1.00** | **%.2f** |" % want_fast in out, out
    assert "A/A check: brisk-aa" in out and "## Peak RSS" in out
    assert "### alpha" in out and "alpha.m (value / other)" in out
    # --dry-run prints the same plan without running anything
    d = env.run("--quick", "--alloc", "brisk=none,fast=none,slow=none", "--runs", "3",
                "--dry-run")
    assert d.returncode == 0 and not os.path.exists(env.log)
    got = [tuple(l.split()[1:]) for l in d.stdout.splitlines()]
    assert got == [(w, a, str(run)) for w, a, run in
                   expected_order(["alpha", "beta"], allocs, 3)], got


def test_only_and_no_aa(env):
    r = env.run("--quick", "--only", "beta", "--alloc", "slow=none,brisk=none", "--runs", "2",
                "--no-aa", stem="only")
    assert r.returncode == 0, r.stderr
    assert {w for w, _, _, _ in env.logged()} == {"beta"}
    assert {a for _, a, _, _ in env.logged()} == {"slow", "brisk"}
    rows = list(csv.DictReader(open(env.result("only", ".csv"))))
    by = {(x["workload"], x["allocator"]): x for x in rows}
    assert close(float(by[("beta", "slow")]["time_ratio_to_brisk"]), 4.005 / 2.005, 1e-4)
    assert "A/A" not in r.stdout
    bad = env.run("--quick", "--only", "gamma", "--alloc", "brisk=none", stem="bad")
    assert bad.returncode != 0 and "unknown workload" in bad.stderr


def test_failures_reported(env):
    r = env.run("--quick", "--only", "alpha", "--alloc", "brisk=none,broken=none,crashy=none",
                "--runs", "2", stem="fail")
    assert r.returncode == 0, r.stderr  # a peer failing does not fail the run
    assert "FAIL: check failed (rc 3)" in r.stdout, r.stdout
    assert "FAIL: signal SIGSEGV" in r.stdout, r.stdout
    assert "## Failures" in r.stdout
    rows = list(csv.DictReader(open(env.result("fail", ".csv"))))
    by = {(x["workload"], x["allocator"]): x for x in rows}
    assert by[("alpha", "broken")]["failed"] == "2" and by[("alpha", "broken")]["median_s"] == ""
    strict = env.run("--quick", "--only", "alpha", "--alloc", "brisk=none,broken=none",
                     "--runs", "1", "--strict", stem="strict")
    assert strict.returncode == 1
    ref_broken = env.run("--quick", "--only", "alpha", "--alloc", "broken=none,brisk=none",
                         "--ref", "broken", "--runs", "1", stem="refbroken")
    assert ref_broken.returncode == 1


def test_preload_is_passed(env):
    lib = None
    for d in runner.LIB_DIRS:
        p = os.path.join(d, "libm.so.6")
        if os.path.exists(p):
            lib = p
            break
    if not lib:
        return missing("libm.so.6")
    r = env.run("--quick", "--only", "alpha", "--alloc", "brisk=none,m=%s" % lib, "--runs", "1",
                "--no-aa", stem="preload")
    assert r.returncode == 0, r.stderr
    seen = {a: p for _, a, _, p in env.logged()}
    # the harness runs a snapshot copy of every non-system library, so a
    # rebuild during the run cannot mix builds; the report names the source
    assert seen["brisk"] == "-" and seen["m"] != lib, seen
    assert seen["m"].endswith(os.sep + os.path.basename(lib)), seen
    doc = json.load(open(env.result("preload", ".json")))
    assert {a["name"]: a["lib"] for a in doc["allocators"]} == {"brisk": None, "m": lib}


def test_charts(env):
    if not harness.matplotlib_python():
        return missing("matplotlib")
    r = env.run("--quick", "--only", "alpha", "--alloc", "brisk=none,fast=none", "--runs", "1",
                stem="charts", charts=True)
    assert r.returncode == 0, r.stderr
    for suffix in ("-time.png", "-rss.png"):
        with open(env.result("charts", suffix), "rb") as f:
            assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_scaling_end_to_end(env):
    allocs = ["brisk", "flat", "collapsing"]
    r = env.run("--scaling", "1,2,4", "--alloc", "brisk=none,flat=none,collapsing=none",
                stem="scal", workloads=env.scale_workloads)
    assert r.returncode == 0, r.stderr + r.stdout
    # default workloads larson and xmalloc (not other); 3 runs; xmalloc
    # skips 1 thread; each point interleaved like the matrix, and the
    # thread count reaches the program as its last argument
    got = [(w, a, int(run), int(t)) for w, a, run, t in env.logged()]
    want = []
    for w, counts in (("larson", (1, 2, 4)), ("xmalloc", (2, 4))):
        for t in counts:
            want += [(x, y, z, t) for x, y, z in expected_order([w], allocs, 3)]
    assert got == want, got
    # cells: throughput = ops / median RESULT secs, ratio to brisk
    rows = list(csv.DictReader(open(env.result("scal", ".csv"))))
    by = {(x["workload"], int(x["threads"]), x["allocator"]): x for x in rows}
    assert len(rows) == 5 * 3, len(rows)
    for (w, t, a), x in by.items():
        assert x["ok"] == "3" and x["failed"] == "0" and int(x["ops"]) == SCALE_SIZE + t
        assert close(float(x["mops"]), fake_mops(a, t), 1e-4), (w, t, a, x["mops"])
        assert close(float(x["mops_ratio_to_brisk"]), fake_mops(a, t) / fake_mops("brisk", t),
                     1e-4), (w, t, a)
    runs = list(csv.DictReader(open(env.result("scal", "-runs.csv"))))
    assert [(x["workload"], x["allocator"], int(x["run"]), int(x["threads"]))
            for x in runs] == want
    # collapse: throughput at the highest count / the best at any count
    col = {(x["workload"], x["allocator"]): x
           for x in csv.DictReader(open(env.result("scal", "-collapse.csv")))}
    want_col = fake_mops("collapsing", 4) / fake_mops("collapsing", 1)
    assert close(float(col[("larson", "collapsing")]["collapse"]), want_col, 1e-4)
    assert col[("larson", "collapsing")]["best_threads"] == "1"
    assert col[("larson", "brisk")]["best_threads"] == "4"  # ops grow with threads
    assert close(float(col[("larson", "brisk")]["collapse"]), 1.0)
    assert close(float(col[("xmalloc", "collapsing")]["collapse"]),
                 fake_mops("collapsing", 4) / fake_mops("collapsing", 2), 1e-4)
    doc = json.load(open(env.result("scal", ".json")))
    assert doc["mode"] == "scaling" and doc["meta"]["tier"] == "scaling"
    assert doc["meta"]["size_tier"] == "quick" and doc["meta"]["runs"] == 3
    assert doc["threads"] == {"larson": [1, 2, 4], "xmalloc": [2, 4]}
    assert [a["name"] for a in doc["allocators"]] == allocs  # no A/A copy
    assert all(x["argv"][-1] == str(x["threads"]) for x in doc["runs"])
    # the report: a table per workload, the collapse row and the check
    out = r.stdout
    assert "## larson" in out and "## xmalloc" in out and "## other" not in out, out
    assert "| threads | brisk | flat | collapsing |" in out, out
    f = harness.fmt_num
    row1 = "| 1 | %s | %s (%.2f) | %s (%.2f) |" % (
        f(fake_mops("brisk", 1)), f(fake_mops("flat", 1)),
        fake_mops("flat", 1) / fake_mops("brisk", 1), f(fake_mops("collapsing", 1)),
        fake_mops("collapsing", 1) / fake_mops("brisk", 1))
    assert row1 in out, (row1, out)
    assert "| **collapse 4/best** | **1.00** (best at 4) | **1.00** (best at 4) | **%.2f** " \
        "(best at 1) |" % want_col in out, out
    assert "Collapse check: below 0.50" in out and "larson under collapsing: %.2f" % want_col \
        in out, out
    assert "xmalloc under collapsing" not in out  # 0.505 of its best
    assert "Note: xmalloc: not run at 1 thread" in out, out
    # --only picks other workloads; --dry-run prints the thread counts
    d = env.run("--scaling", "2,8", "--only", "other", "--alloc", "brisk=none", "--dry-run",
                workloads=env.scale_workloads)
    assert d.returncode == 0 and not os.path.exists(env.log), d.stderr
    assert d.stdout.split("\n")[:2] == ["0 other brisk 0 2", "1 other brisk 1 2"], d.stdout
    assert len(d.stdout.splitlines()) == 2 * 3
    # what --scaling refuses
    for bad in (("--scaling", "1,2", "--threads", "4"), ("--scaling", "0"),
                ("--scaling", "1", "--only", "xmalloc"), ("--scaling", "1", "--syscalls")):
        b = env.run(*(bad + ("--alloc", "brisk=none")), workloads=env.scale_workloads)
        assert b.returncode != 0 and "harness:" in b.stderr, (bad, b.stderr)


def test_scaling_failure_and_charts(env):
    r = env.run("--scaling", "1,2", "--only", "larson", "--alloc", "brisk=none,broken=none",
                "--runs", "1", stem="scalfail", charts=True, workloads=env.scale_workloads)
    assert r.returncode == 0, r.stderr  # a peer failing does not fail the run
    assert "| 1 | %s | FAIL: check failed (rc 3) |" % harness.fmt_num(fake_mops("brisk", 1, 1)) \
        in r.stdout, r.stdout
    assert "- larson at 2 threads under broken: 1 of 1 runs failed" in r.stdout, r.stdout
    ref_broken = env.run("--scaling", "1", "--only", "larson", "--alloc", "broken=none",
                         "--runs", "1", stem="scalref", workloads=env.scale_workloads)
    assert ref_broken.returncode == 1
    if not harness.matplotlib_python():
        return missing("matplotlib")
    with open(env.result("scalfail", "-larson.png"), "rb") as f:
        assert f.read(8) == b"\x89PNG\r\n\x1a\n"


def test_syscalls_mode(env):
    if not shutil.which("strace"):
        return missing("strace")
    r = env.run("--syscalls", "--only", "alpha", "--alloc", "brisk=none", stem="sys")
    if r.returncode != 0 and "ptrace" in (r.stderr + r.stdout).lower():
        return "skipped (ptrace not permitted)"
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(open(env.result("sys", ".csv"))))
    assert len(rows) == 1 and rows[0]["allocator"] == "brisk"
    assert int(rows[0]["mmap"]) > 0, rows  # the shell maps its libraries
    assert "| workload | allocator | mmap | munmap | madvise |" in r.stdout


def test_dominant():
    # one workload 30x: the mean without it is given, and it is 1.0
    d = harness.dominant({"a": 1.0, "b": 1.0, "c": 1.0, "large": 30.0})
    assert d is not None and d[0] == "large" and close(d[1], 1.0, 1e-9), d
    # the largest mover is named even when several move the mean
    d = harness.dominant({"a": 0.5, "b": 1.0, "c": 1.0, "d": 4.0})
    assert d is not None and d[0] == "d" and close(d[1], (0.5) ** (1 / 3), 1e-9), d
    # nothing moves it by more than 3%: no such row
    assert harness.dominant({"a": 1.0, "b": 1.05, "c": 0.97, "d": 1.02}) is None
    # fewer than three workloads, or missing ratios, do not count
    assert harness.dominant({"a": 1.0, "b": 9.0}) is None
    assert harness.dominant({"a": 1.0, "b": None, "c": 9.0}) is None


def test_within_noise():
    assert harness.within_noise(1.02, 0.97)
    assert harness.within_noise(0.98, 1.02)
    assert not harness.within_noise(1.04, 0.97)
    assert not harness.within_noise(None, 1.1) and not harness.within_noise(1.0, None)


def test_rss_resolution():
    # 32 pages of 4 KiB per CPU
    assert harness.rss_resolution_kib(2) == 256 and harness.rss_resolution_kib(8) == 1024
    assert harness.within_rss_resolution(1848, 1720, 256)
    assert harness.within_rss_resolution(1720, 1848, 256)
    assert not harness.within_rss_resolution(2000, 1720, 256)
    assert not harness.within_rss_resolution(None, 1720, 256)


def test_rss_within_resolution_marked(env):
    # the fakes are the same shell script: every peak RSS is within the
    # kernel's resolution of brisk's, so each RSS ratio is marked and said
    # why (no A/A copy, whose ratio could mark them first)
    r = env.run("--quick", "--alloc", "brisk=none,slow=none", "--runs", "3", "--no-aa",
                "--stem", "rssres")
    assert r.returncode == 0, r.stderr + r.stdout
    rss = r.stdout.split("## Peak RSS", 1)[1]
    rows = [l for l in rss.splitlines() if l.startswith("| alpha |")]
    assert rows and "~ |" in rows[0], rows
    assert "~ also marks a peak RSS less than" in rss
    time_rows = [l for l in r.stdout.split("## Peak RSS", 1)[0].splitlines() if l.startswith("| alpha |")]
    assert time_rows and "~" not in time_rows[0], time_rows


def test_noise_marked_in_report(env):
    # "near" is 1% slower than brisk, the A/A copy 2%: its ratio is marked,
    # the others' are not
    r = env.run("--quick", "--alloc", "brisk=none,near=none,slow=none", "--runs", "3",
                "--stem", "noise")
    assert r.returncode == 0, r.stderr + r.stdout
    rows = [l for l in r.stdout.splitlines() if l.startswith("| alpha |")]
    assert rows and "| 1.01~ |" in rows[0] and "| 1.99 |" in rows[0], rows
    assert "~ marks a ratio no farther from 1 than the A/A ratio" in r.stdout


def test_settle_runs_unsteady_rows_again(env):
    wl = os.path.join(env.dir, "settle_workloads.json")
    with open(wl, "w") as f:
        json.dump([{"name": n, "argv": [env.fake, n, "{size}"],
                    "sizes": {"quick": 7, "default": 70, "full": 700}, "time": "reported"}
                   for n in ("alpha", "wobbly")], f)
    allocs = ["brisk", "fast", "brisk-aa"]
    r = env.run("--quick", "--alloc", "brisk=none,fast=none", "--runs", "3", stem="settle",
                workloads=wl)
    assert r.returncode == 0, r.stderr + r.stdout
    # wobbly's A/A (1.30) is beyond 10% after 3 rounds: 3 more, after alpha's
    order = [(w, a, int(run)) for w, a, run, _ in env.logged()]
    more = [(w, a, run) for w, a, run in expected_order(["wobbly"], allocs, 6) if run >= 3]
    assert order == expected_order(["alpha", "wobbly"], allocs, 3) + more, order
    rows = list(csv.DictReader(open(env.result("settle", ".csv"))))
    by = {(x["workload"], x["allocator"]): x for x in rows}
    assert by[("wobbly", "brisk")]["ok"] == "6" and by[("alpha", "brisk")]["ok"] == "3"
    # the A/A ratio is the median over all 6 rounds
    ratios = sorted(((1300 if k < 3 else 1020) + 10 * k) / (1000 + 10 * k) for k in range(6))
    assert close(float(by[("wobbly", "brisk-aa")]["time_ratio_to_brisk"]),
                 (ratios[2] + ratios[3]) / 2, 1e-4)
    assert "wobbly (1.30, 6 rounds)" in r.stdout, r.stdout
    # --no-settle: three rounds each, as asked
    r = env.run("--quick", "--alloc", "brisk=none,fast=none", "--runs", "3", "--no-settle",
                stem="unsettled", workloads=wl)
    assert r.returncode == 0, r.stderr + r.stdout
    assert [(w, a, int(run)) for w, a, run, _ in env.logged()] == \
        expected_order(["alpha", "wobbly"], allocs, 3)
    rows = harness.unsettled({("w", "aa"): {"time_ratio": 0.89}, ("v", "aa"): {"time_ratio": 1.09}},
                             [{"name": "w"}, {"name": "v"}], "aa")
    assert [w["name"] for w in rows] == ["w"]


def main():
    env = Env()
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_")]
    passed = failed = skipped = 0
    try:
        for name, fn in tests:
            try:
                res = fn(env) if fn.__code__.co_argcount else fn()
                if isinstance(res, str) and res.startswith("skipped"):
                    skipped += 1
                    print("SKIP %s: %s" % (name, res))
                else:
                    passed += 1
                    print("ok   %s" % name)
            except Exception:  # report and go on
                failed += 1
                print("FAIL %s" % name)
                traceback.print_exc(file=sys.stdout)
    finally:
        shutil.rmtree(env.dir, ignore_errors=True)
    line = "%d passed, %d failed" % (passed, failed)
    if skipped:
        line += ", %d skipped" % skipped
    print(line)
    if failed:
        return 1
    return SKIP_RETURN_CODE if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
