#!/usr/bin/env python3
"""Which heap attacks an allocator detects, measured: every mode of
tests/attack_probe.c and tests/attack_probe_cxx.cpp (built as
build/tests/attack_probe and attack_probe_cxx) run under each allocator,
and a markdown table of what happened (docs/SECURITY.md, "What it catches,
measured").

    python3 scripts/detection_table.py [options] ALLOCATOR...

ALLOCATOR is NAME=PATH (a shared library to preload), optionally followed
by ,VAR=VALUE settings made after the environment is cleaned
(brisk-guards=build/libbrisk.so,BRISK_GUARD_RATE=1), or the word glibc (no
preload: glibc's malloc). Options:
    --bin-dir DIR   where the probes are (default: build/tests of the tree)
    --json PATH     the raw outcome of every cell, stdout and stderr included
                    (default: /tmp/detection_table.json)
    --modes A,B     only these modes
    --timeout S     seconds before a run is killed (default 10)
    --check         compare the cells of the allocators named brisk,
                    brisk-hardened and brisk-guards with EXPECTED below and
                    exit 1 on any difference (tests/test_detection.sh)

Each run is a child with stdin from /dev/null, stdout and stderr captured,
in a session of its own (no controlling terminal), no core dump, and an
environment without MALLOC_*, BRISK_*, MIMALLOC_*, SCUDO_*, SNMALLOC_*,
GLIBC_TUNABLES and LD_PRELOAD (then LD_PRELOAD set to the allocator) and
with LIBC_FATAL_STDERR_=1 (glibc writes its heap messages to stderr, not
to a terminal): every allocator runs with its defaults. A cell is
    detected (message)  the run printed a message about the heap on stderr
                        (brisk: error:, glibc's "free(): ..." family,
                        mimalloc: error:/warning:, Scudo ERROR:, snmalloc's
                        "Fatal Error!"), whether or not the process then ended
    detected (silent)   the process ended abnormally with no such message;
                        how follows: a signal (SIGSEGV, SIGABRT, SIGILL ...)
                        or an exit status
    hang                killed at the timeout, no message
    missed              the probe completed and no message appeared; the
                        consequence the probe saw follows, if any
                        ("missed, duplicate"; tests/attack_probe.h)
A C++ mode whose operator new and delete did not come from the preloaded
library (libstdc++'s, which call malloc and free) is marked "(libstdc++
new/delete)".
"""
import argparse
import json
import os
import re
import resource
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = ["attack_probe", "attack_probe_cxx"]

# The cells tests/test_detection.sh asserts: brisk's three columns as
# measured (the hardened build and the guarded samples as the default
# build's cells with theirs that differ). A change in any cell (a detection that became a miss, or a miss
# that became a detection) fails the test: then the table in
# docs/SECURITY.md is stale and must be measured again.
EXPECTED = {
    "brisk": {
        "double-free-local": "detected (message)",
        "double-free-remote": "detected (message)",
        "double-free-transit": "detected (message)",
        "uaf-write": "detected (message)",
        "uaf-read": "missed, read-stale",
        "overflow-next": "missed, neighbour-changed",
        "overflow-metadata": "detected (message)",
        "overflow-large": "missed",
        "free-interior": "detected (message)",
        "free-stack": "detected (message)",
        "free-wild": "detected (message)",
        "free-foreign": "detected (message)",
        "mismatch-new-free": "missed",
        "mismatch-new-array-delete": "missed",
    },
}
EXPECTED["brisk-hardened"] = dict(EXPECTED["brisk"], **{
    "uaf-read": "missed, read-cleared",
    "mismatch-new-free": "detected (message)",
    "mismatch-new-array-delete": "detected (message)",
})
# The default build with every allocation a guarded sample (until the 256
# slots are all live): BRISK_GUARD_RATE=1.
EXPECTED["brisk-guards"] = dict(EXPECTED["brisk"], **{
    "uaf-read": "detected (message)",
})

# Lines on stderr that name a heap problem, by allocator.
MESSAGE = re.compile(
    r"^(brisk: error: "                                       # brisk
    r"|(free|malloc|realloc|calloc|munmap_chunk|malloc_consolidate"
    r"|_int_malloc|_int_free|_int_realloc|tcache_thread_shutdown)\(\): "  # glibc
    r"|double free or corruption|corrupted size vs\. prev_size"
    r"|corrupted double-linked list|Fatal glibc error: malloc"
    r"|mimalloc: (error|warning): "                            # mimalloc
    r"|Scudo ERROR"                                            # Scudo
    r"|Fatal Error!|snmalloc"                                  # snmalloc
    r")")
CLEAN_PREFIXES = ("MALLOC_", "BRISK_", "MIMALLOC_", "SCUDO_", "SNMALLOC_")
CLEAN_NAMES = ("GLIBC_TUNABLES", "LD_PRELOAD")


def child_env(lib, settings=()):
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(CLEAN_PREFIXES) and k not in CLEAN_NAMES}
    env["LIBC_FATAL_STDERR_"] = "1"
    if lib:
        env["LD_PRELOAD"] = lib
    env.update(settings)
    return env


def no_core():
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run(program, mode, lib, timeout, settings=()):
    start = time.monotonic()
    proc = subprocess.Popen([program, mode], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, env=child_env(lib, settings), start_new_session=True,
                            preexec_fn=no_core)
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
    return {"returncode": proc.returncode, "timed_out": timed_out,
            "seconds": round(time.monotonic() - start, 3),
            "stdout": out.decode(errors="replace"), "stderr": err.decode(errors="replace")}


def classify(mode, r, lib):
    """The cell for one run (see the module's docstring)."""
    messages = [l for l in r["stderr"].splitlines() if MESSAGE.match(l)]
    prefix = "attack_probe: %s: " % mode
    lines = [l[len(prefix):] for l in r["stdout"].splitlines() if l.startswith(prefix)]
    note = ""
    for l in lines:
        m = re.match(r"operator new from (.*), operator delete from (.*)$", l)
        if m and (not lib or not all(os.path.realpath(f) == os.path.realpath(lib) for f in m.groups())):
            note = " (libstdc++ new/delete)" if "libstdc++" in l else " (new/delete not the allocator's)"
    if messages:
        return "detected (message)" + note
    if r["timed_out"]:
        return "hang" + note
    rc = r["returncode"]
    if rc != 0 or "completed" not in lines:
        how = ("SIGKILL" if rc == -9 else signal.Signals(-rc).name) if rc < 0 else "exit %d" % rc
        return "detected (silent), %s%s" % (how, note)
    consequence = [l[len("consequence: "):] for l in lines if l.startswith("consequence: ")]
    cell = "missed"
    if consequence and consequence[-1] != "none":
        cell += ", " + consequence[-1]
    return cell + note


def modes_of(program):
    out = subprocess.run([program, "--list"], stdout=subprocess.PIPE, check=True, env=child_env(None))
    return out.stdout.decode().split()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("allocators", nargs="+", metavar="ALLOCATOR")
    ap.add_argument("--bin-dir", default=os.path.join(ROOT, "build", "tests"))
    ap.add_argument("--json", default="/tmp/detection_table.json")
    ap.add_argument("--modes")
    ap.add_argument("--timeout", type=float, default=10)
    ap.add_argument("--check", action="store_true")
    args = ap.parse_args()

    allocators = []
    for a in args.allocators:
        if a == "glibc":
            allocators.append(("glibc", None, {}))
            continue
        name, sep, rest = a.partition("=")
        path, *extra = rest.split(",")
        settings = dict(e.partition("=")[::2] for e in extra)
        if not sep or not name or not path or not all(settings) or not all(settings.values()):
            ap.error("an allocator is NAME=PATH[,VAR=VALUE...] or glibc: %r" % a)
        path = os.path.abspath(os.path.expanduser(path))
        if not os.path.exists(path):
            sys.exit("detection_table: %s: no library at %s" % (name, path))
        allocators.append((name, path, settings))
    if args.check:
        unknown = [n for n, _, _ in allocators if n not in EXPECTED]
        if unknown:
            ap.error("--check knows the expected cells of %s only, not %s"
                     % (" and ".join(EXPECTED), ", ".join(unknown)))

    rows = []  # (program path, mode)
    for p in PROGRAMS:
        path = os.path.join(args.bin_dir, p)
        if not os.access(path, os.X_OK):
            sys.exit("detection_table: %s is not built (cmake --build build)" % path)
        rows += [(path, m) for m in modes_of(path)]
    if args.modes:
        wanted = args.modes.split(",")
        missing = set(wanted) - {m for _, m in rows}
        if missing:
            ap.error("no such mode: %s" % ", ".join(sorted(missing)))
        rows = [r for r in rows if r[1] in wanted]

    raw = []
    cells = {}
    for name, lib, settings in allocators:
        for program, mode in rows:
            r = run(program, mode, lib, args.timeout, settings)
            cell = classify(mode, r, lib)
            cells[(name, mode)] = cell
            raw.append(dict(allocator=name, library=lib, program=os.path.basename(program), mode=mode,
                            cell=cell, **r))
            print("%-16s %-26s %s (%.1f s)" % (name, mode, cell, r["seconds"]), file=sys.stderr)
    with open(args.json, "w") as f:
        json.dump(raw, f, indent=1)

    names = [n for n, _, _ in allocators]
    print("| attack | " + " | ".join(names) + " |")
    print("|---|" + "---|" * len(names))
    for _, mode in rows:
        print("| `%s` | " % mode + " | ".join(cells[(n, mode)] for n in names) + " |")
    print("\nraw stdout and stderr of every cell: %s" % args.json, file=sys.stderr)

    if args.check:
        diffs = 0
        for name in names:
            for _, mode in rows:
                want, got = EXPECTED[name].get(mode), cells[(name, mode)]
                if want != got:
                    diffs += 1
                    r = next(x for x in raw if x["allocator"] == name and x["mode"] == mode)
                    print("CHANGED %s / %s: expected %r, measured %r (exit %s); stderr: %r"
                          % (name, mode, want, got, r["returncode"], r["stderr"][-400:]))
        if diffs:
            print("%d cell(s) differ from EXPECTED in scripts/detection_table.py: the table in "
                  "docs/SECURITY.md (\"What it catches, measured\") is stale" % diffs)
            return 1
        print("all %d cells as expected" % (len(names) * len(rows)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
