#!/usr/bin/env python3
"""Memory goes back to the OS within a second of being freed, whatever the
program does next (docs/DESIGN.md, "Returning memory").

tests/memory_probe.c allocates a 256 MiB burst of blocks of one size,
frees it, and then sleeps, keeps allocating another size, runs class-cache
traffic, frees and takes large spans over and over, or had run the burst on
a thread that has exited; or it keeps one block in 4096 alive. For each of those and each block size, RSS one second
after the last free must be under 5% of the burst (with blocks kept: no
more than the pages that hold them, plus 5%). Then:
  - an idle process: the background thread makes no wake-up once nothing
    is due (its own counter, and strace when it is installed);
  - BRISK_PURGE_DELAY=0 returns memory at once, -1 never, and
    BRISK_BACKGROUND=0 starts no thread (a quiet program then keeps it);
  - `true` and `ls` start no thread, and no run wakes it more than about
    twice per purge delay;
  - a forked child starts its own thread and returns its memory.
RSS is read from /proc/self/statm by the probe.

ctest-labels: memory
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

SOURCE_DIR = os.environ.get("BRISKTEST_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))
BIN_DIR = os.environ.get("BRISKTEST_BIN_DIR") or os.path.join(SOURCE_DIR, "build", "tests")
LIB = os.environ.get("BRISKTEST_LIB") or os.path.join(SOURCE_DIR, "build", "libbrisk.so")
PROBE = os.path.join(BIN_DIR, "memory_probe")

BURST_MIB = 256
SIZES = [64, 1024, 16384, 262144, 8 << 20]
SCENARIOS = ["sleep", "churn", "classcache", "spans", "thread", "keep"]
LIMIT_PCT = 5.0
# The background thread runs a round per deadline, and deadlines are a
# purge delay apart (50 ms by default), a retry when an owner held its
# lock 20 ms: in a run of about a second (the burst's frees, then the
# scenario), more rounds than this means it loops.
MAX_ROUNDS_PER_S = 3 * 1000 // 20

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL " + msg)


def clean_env(extra=None):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRISK_")}
    env["LD_PRELOAD"] = LIB
    env.update(extra or {})
    return env


def probe(scenario, block, at, extra=None, wrap=None):
    """Runs the probe; returns (samples, kept_pct, stdout)."""
    argv = [PROBE, scenario, str(block), str(BURST_MIB), ",".join(str(t) for t in at)]
    r = subprocess.run((wrap or []) + argv, env=clean_env(extra), capture_output=True, text=True,
                       timeout=120)
    if r.returncode != 0 or "DONE" not in r.stdout.split():
        raise RuntimeError("%s exited %d: %s %s" % (" ".join(argv), r.returncode, r.stdout[-500:],
                                                  r.stderr[-500:]))
    if "brisk: error" in r.stderr or "brisk: warning" in r.stderr:
        raise RuntimeError("brisk reported: " + r.stderr[-500:])
    samples = []
    kept = None
    for line in r.stdout.splitlines():
        f = dict(kv.split("=", 1) for kv in line.split()[1:] if "=" in kv)
        if line.startswith("SAMPLE"):
            samples.append({k: float(v) for k, v in f.items()})
        elif line.startswith("KEPT"):
            kept = float(f["pct"])
    if len(samples) != len(at):
        raise RuntimeError("expected %d samples: %s" % (len(at), r.stdout[-500:]))
    return samples, kept, r


def table():
    print("%-11s %s" % ("", " ".join("%9s" % s for s in SIZES)))
    for sc in SCENARIOS:
        row = []
        for size in SIZES:
            (s,), kept, _ = probe(sc, size, [1000])
            limit = LIMIT_PCT + (kept or 0.0)
            if s["rounds"] > MAX_ROUNDS_PER_S:
                fail("%s, %d-byte blocks: the background thread ran %d rounds in about 1 s"
                     % (sc, size, s["rounds"]))
            row.append("%8.1f%%" % s["pct"])
            if not s["pct"] < limit:
                fail("%s, %d-byte blocks: %.1f%% of the burst still resident 1 s after the "
                     "frees (limit %.1f%%)" % (sc, size, s["pct"], limit))
        print("%-11s %s" % (sc, " ".join(row)))


def idle_wakeups():
    # Nothing is due after half a second: no wake-up in the next two.
    a, b = probe("sleep", 64, [500, 2500])[0]
    if b["wakeups"] != a["wakeups"] or a["bg_threads"] != 1:
        fail("idle: the background thread woke up %d times between 0.5 s and 2.5 s "
             "(threads running: %d)" % (b["wakeups"] - a["wakeups"], a["bg_threads"]))
    else:
        print("ok   idle: no wake-up between 0.5 s and 2.5 s (%d in all)" % a["wakeups"])
    strace = shutil.which("strace")
    if strace is None:
        fail("strace is not installed (scripts/setup.sh installs it; make test SKIP=memory_return leaves "
             "this test out)")
        return
    with tempfile.TemporaryDirectory() as d:
        log = os.path.join(d, "trace")
        (a, b), _, _ = probe("sleep", 64, [500, 2500],
                             wrap=[strace, "-f", "-ttt", "-qq", "-e", "trace=futex", "-o", log])
        calls = []
        for line in open(log):
            m = re.match(r"\s*(?:\d+\s+)?(\d+\.\d+) futex\(", line)
            if m and a["wall"] < float(m.group(1)) < b["wall"]:
                calls.append(line.strip())
        if calls:
            fail("idle: %d futex calls between 0.5 s and 2.5 s under strace: %s"
                 % (len(calls), calls[:3]))
        else:
            print("ok   idle under strace -f: no futex call between 0.5 s and 2.5 s")


def options():
    # 0: at once, even where the segment still has live blocks
    for sc in ("sleep", "keep"):
        (s,), kept, _ = probe(sc, 64, [0], {"BRISK_PURGE_DELAY": "0"})
        if not s["pct"] < LIMIT_PCT + (kept or 0):
            fail("BRISK_PURGE_DELAY=0, %s: %.1f%% resident right after the frees" % (sc, s["pct"]))
        else:
            print("ok   BRISK_PURGE_DELAY=0, %s: %.1f%% right after the frees" % (sc, s["pct"]))
    # -1: never
    (s,), _, _ = probe("sleep", 64, [1000], {"BRISK_PURGE_DELAY": "-1"})
    if s["purged_bytes"] != 0 or s["pct"] < 40:
        fail("BRISK_PURGE_DELAY=-1: %d bytes purged, %.1f%% resident after 1 s"
             % (s["purged_bytes"], s["pct"]))
    else:
        print("ok   BRISK_PURGE_DELAY=-1: nothing purged, %.1f%% resident after 1 s" % s["pct"])
    # BRISK_BACKGROUND=0: no thread; a program that goes quiet keeps the pool
    (s,), _, _ = probe("sleep", 64, [1000], {"BRISK_BACKGROUND": "0"})
    if s["tasks"] != 1 or s["bg_threads"] != 0 or s["wakeups"] != 0 or s["pct"] < 20:
        fail("BRISK_BACKGROUND=0: %d threads, %d background, %.1f%% resident after 1 s"
             % (s["tasks"], s["bg_threads"], s["pct"]))
    else:
        print("ok   BRISK_BACKGROUND=0: one thread, %.1f%% kept by a quiet program" % s["pct"])


def no_thread_for_small_programs():
    for cmd in (["true"], ["ls", "/"]):
        r = subprocess.run(cmd, env=clean_env({"BRISK_SHOW_STATS": "1"}), capture_output=True,
                           text=True)
        m = re.search(r"background_threads: (\d+), peak (\d+)", r.stderr)
        if r.returncode != 0 or not m:
            fail("%s: exit %d, no background_threads statistic: %s"
                 % (cmd[0], r.returncode, r.stderr[-300:]))
        elif m.group(2) != "0":
            fail("%s started the background thread" % cmd[0])
        else:
            print("ok   %s starts no background thread" % " ".join(cmd))


def forked_child():
    (a, b), _, _ = probe("fork", 64, [100, 1000])
    if b["bg_threads"] != 1 or b["tasks"] != 2 or not b["pct"] < LIMIT_PCT:
        fail("fork: the child has %d threads (%d background) and %.1f%% resident after 1 s"
             % (b["tasks"], b["bg_threads"], b["pct"]))
    else:
        print("ok   fork: the child runs its own background thread; %.1f%% after 1 s" % b["pct"])


def main():
    if not os.path.exists(PROBE) or not os.path.exists(LIB):
        print("FAIL: memory_probe or the library is missing (%s, %s)" % (PROBE, LIB))
        return 1
    try:
        table()
        idle_wakeups()
        options()
        no_thread_for_small_programs()
        forked_child()
    except (RuntimeError, subprocess.TimeoutExpired) as e:
        fail(str(e))
    print("%d failures" % len(failures) if failures else "all checks passed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
