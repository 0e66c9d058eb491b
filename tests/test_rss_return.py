#!/usr/bin/env python3
"""Tests of bench/rss_return.py's parsing, statistics and table on fake
bench_rss_return output (so the percentages and the yes/no column have
exact expected values), and the workload itself run against brisk: a 256
MiB burst of 64-byte blocks, freed, then a program that keeps allocating
a little; one second after the frees, under 5% of the burst may remain.

ctest-labels: bench
"""
import csv
import importlib.util
import json
import re
import os
import shutil
import subprocess
import sys
import tempfile
import traceback

SOURCE_DIR = os.environ.get("BRISKTEST_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))
SCRIPT = os.path.join(SOURCE_DIR, "bench", "rss_return.py")

spec = importlib.util.spec_from_file_location("rss_return", SCRIPT)
rr = importlib.util.module_from_spec(spec)
spec.loader.exec_module(rr)

BASE, PEAK = 1000, 101000  # a burst of 100000 KiB: 1000 KiB is 1%


def fake_output(points, base=BASE, peak=PEAK, check="ok", metric=True):
    """bench_rss_return's output: points are (t_ms, % of the burst)."""
    lines = ["# bench_rss_return: fake"]
    for t, p in points:
        lines.append("SAMPLE t_ms=%.1f rss_kib=%d" % (t, base + p * (peak - base) // 100))
    if metric:
        lines.append("METRIC id=rss_return peak_kib=%d base_kib=%d after_free_pct=0 "
                     "at_100ms_pct=0 at_1s_pct=0 at_end_pct=0" % (peak, base))
    lines.append("RESULT workload=rss_return threads=1 ops=100 secs=0.5 mops=0.000 check=%s "
                 "mib=64 peak_kib=%d base_kib=%d" % (check, peak, base))
    return "\n".join(lines) + "\n"


def close(a, b, tol=1e-9):
    return a is not None and b is not None and abs(a - b) <= tol * max(1.0, abs(b))


def record(alloc, run, text):
    rec = rr.parse_run(text)
    rec.update({"alloc": alloc, "run": run, "ok": rec["error"] is None})
    return rec


# Falls to 2% by 600 ms and stays there.
FAST = [(0.8, 60), (50.2, 30), (100.1, 10), (110.0, 8), (600.0, 2), (1000.0, 2), (1010.0, 2),
        (3000.0, 2)]
# Holds everything.
HOLDS = [(1.0, 100), (100.0, 100), (1000.0, 99), (3000.0, 98)]
# Below 5% only after 1 s.
LATE = [(1.0, 100), (99.0, 50), (1000.5, 4), (1500.0, 4), (3000.0, 3)]
# Below 5% at 1 s, but back above it at the end.
REBOUND = [(1.0, 100), (900.0, 3), (2000.0, 6), (3000.0, 7)]


def test_parse_samples_and_percentages():
    text = fake_output(FAST) + "noise SAMPLE t_ms=5 rss_kib=1\nSAMPLE t_ms=x rss_kib=2\n"
    rec = rr.parse_run(text)
    assert rec["error"] is None, rec["error"]
    assert len(rec["samples"]) == len(FAST), rec["samples"]
    assert rec["samples"][0] == (0.8, BASE + 60000)
    assert rec["peak_kib"] == PEAK and rec["base_kib"] == BASE
    assert close(rec["after_free_pct"], 60.0)
    assert close(rec["at_100ms_pct"], 30.0)  # the last sample at or before 100 ms
    assert close(rec["at_1s_pct"], 2.0)
    assert close(rec["at_end_pct"], 2.0)
    assert rec["meets"] is True


def test_baseline_subtracted():
    assert close(rr.pct(BASE, BASE, PEAK), 0.0)
    assert close(rr.pct(PEAK, BASE, PEAK), 100.0)
    assert close(rr.pct(BASE + 5000, BASE, PEAK), 5.0)
    assert close(rr.pct(BASE - 1000, BASE, PEAK), -1.0)  # below the baseline
    assert rr.pct(10, 20, 20) is None and rr.pct(10, None, 20) is None


def test_rss_at():
    s = [(1.0, 10), (99.9, 20), (100.0, 30), (100.1, 40)]
    assert rr.rss_at(s, 100.0) == 30
    assert rr.rss_at(s, 0.5) == 10  # before the first sample: the first
    assert rr.rss_at(s, 1e9) == 40
    assert rr.rss_at([], 5) is None
    # samples out of order are sorted by time
    rec = rr.parse_run(fake_output([(1000.0, 1), (1.0, 90), (2000.0, 1)]))
    assert [t for t, _ in rec["samples"]] == [1.0, 1000.0, 2000.0]
    assert close(rec["after_free_pct"], 90.0)


def test_meets_boundaries():
    cases = [(HOLDS, False), (LATE, False), (REBOUND, False), (FAST, True),
             ([(0.0, 5), (3000.0, 4)], False),   # exactly 5% at 1 s is not below
             ([(0.0, 4), (3000.0, 4)], True)]
    for points, want in cases:
        rec = rr.parse_run(fake_output(points))
        assert rec["meets"] is want, (points, rec)
    rec = rr.parse_run(fake_output(LATE))
    assert close(rec["at_100ms_pct"], 50.0) and close(rec["at_1s_pct"], 50.0)
    assert close(rec["at_end_pct"], 3.0)


def test_bad_outputs():
    assert rr.parse_run("")["error"] == "no RESULT line"
    assert rr.parse_run(fake_output(FAST, check="bad"))["error"] == "check failed"
    assert rr.parse_run(fake_output([]))["error"] == "no SAMPLE lines"
    rec = rr.parse_run(fake_output(FAST, metric=False))
    assert rec["error"] and "METRIC" in rec["error"] and rec["meets"] is False
    assert rr.parse_run(fake_output(FAST, peak=BASE))["error"]


def test_summary_and_table():
    records = [record("fast", 0, fake_output(FAST)), record("fast", 1, fake_output(FAST)),
               record("holds", 0, fake_output(HOLDS)), record("holds", 1, fake_output(HOLDS)),
               record("mixed", 0, fake_output(FAST)), record("mixed", 1, fake_output(LATE)),
               record("broken", 0, ""), record("broken", 1, "")]
    names = ["fast", "holds", "mixed", "broken"]
    s = rr.summarize(records, names)
    assert s["fast"]["meets"] and s["fast"]["meets_runs"] == 2
    assert not s["holds"]["meets"] and s["holds"]["meets_runs"] == 0
    assert not s["mixed"]["meets"] and s["mixed"]["meets_runs"] == 1
    assert close(s["mixed"]["at_1s_pct"], 26.0)  # median of 2 and 50
    assert close(s["holds"]["peak_kib"], PEAK)
    assert s["broken"]["ok"] == 0 and s["broken"]["errors"] == ["no RESULT line"]
    table = rr.report_table(s, names).splitlines()
    assert table[0] == ('| allocator | peak MiB | after free % | at 100 ms % | at 1 s % | '
                        'at end % | meets "<5% within 1 s" |'), table[0]
    rows = {l.split(" | ")[0].lstrip("| "): [c.strip() for c in l.strip("|").split("|")]
            for l in table[2:]}
    assert rows["fast"] == ["fast", "99", "60.0", "30.0", "2.0", "2.0", "yes"], rows["fast"]
    assert rows["holds"] == ["holds", "99", "100.0", "100.0", "99.0", "98.0", "no"]
    assert rows["mixed"][-1] == "no (1 of 2 runs)"
    assert rows["broken"][1].startswith("FAIL: no RESULT line") and rows["broken"][-1] == "no"
    # one failed run of two: the good run's numbers, but not a yes
    s = rr.summarize([record("x", 0, fake_output(FAST)), record("x", 1, "")], ["x"])
    row = rr.report_table(s, ["x"]).splitlines()[2]
    assert "(1 of 2 runs failed)" in row and row.endswith("| no (1 of 2 runs) |"), row


def test_outputs():
    d = tempfile.mkdtemp(prefix="brisk-rss-test-")
    try:
        records = [record("a", 0, fake_output(FAST)), record("b", 0, fake_output(HOLDS))]
        s = rr.summarize(records, ["a", "b"])
        meta = {"date": "2026-01-01 00:00", "runs": 1, "mib": 64, "seconds": 3.0, "host": "h",
                "command": "x", "versions": {}, "notes": []}
        paths = rr.write_outputs(d, "t", meta, records, s, ["a", "b"])
        rows = list(csv.DictReader(open(paths["csv"])))
        assert len(rows) == len(FAST) + len(HOLDS)
        assert rows[0] == {"allocator": "a", "run": "0", "t_ms": "0.8",
                           "rss_kib": str(BASE + 60000)}, rows[0]
        doc = json.load(open(paths["json"]))
        assert doc["allocators"] == ["a", "b"] and doc["target"] == {"pct": 5.0, "ms": 1000.0}
        assert [c["meets"] for c in doc["summary"]] == [True, False]
        text = rr.report_markdown(meta, s, ["a", "b"])
        assert "| a | 99 | 60.0 | 30.0 | 2.0 | 2.0 | yes |" in text, text
    finally:
        shutil.rmtree(d, ignore_errors=True)


BUILD_DIR = os.environ.get("BRISKTEST_BUILD_DIR") or os.path.join(SOURCE_DIR, "build")
LIB = os.environ.get("BRISKTEST_LIB") or os.path.join(BUILD_DIR, "libbrisk.so")
WORKLOAD = os.path.join(BUILD_DIR, "bench", "bench_rss_return")


class Skip(Exception):
    pass


def test_workload_against_brisk():
    if not os.path.exists(WORKLOAD):
        raise Skip("bench_rss_return is not built (the benchmarks are off in this build)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRISK_")}
    env["LD_PRELOAD"] = LIB
    r = subprocess.run([WORKLOAD, "256", "1.2"], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, (r.returncode, r.stderr[-500:])
    assert "brisk: error" not in r.stderr and "brisk: warning" not in r.stderr, r.stderr[-500:]
    m = re.search(r"METRIC id=rss_return .*\bat_1s_pct=(-?[0-9.]+)", r.stdout)
    assert m, r.stdout[-500:]
    at_1s = float(m.group(1))
    print("     bench_rss_return 256 MiB under brisk: %.1f%% of the burst resident at 1 s" % at_1s)
    assert at_1s < 5.0, "%.1f%% of the burst still resident 1 s after the frees" % at_1s


def main():
    tests = [(n, f) for n, f in sorted(globals().items()) if n.startswith("test_")]
    passed = failed = skipped = 0
    for name, fn in tests:
        try:
            fn()
            passed += 1
            print("ok   %s" % name)
        except Skip as e:
            if os.environ.get("CI") == "true":
                failed += 1
                print("FAIL %s: %s (nothing may be skipped under CI)" % (name, e))
            else:
                skipped += 1
                print("SKIP %s: %s" % (name, e))
        except Exception:  # report and go on
            failed += 1
            print("FAIL %s" % name)
            traceback.print_exc(file=sys.stdout)
    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 1 if failed else 77 if skipped else 0


if __name__ == "__main__":
    sys.exit(main())
