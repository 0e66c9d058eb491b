#!/usr/bin/env python3
"""The heap profiler end to end: tests/profile_sites.c (three allocation
sites of known sizes, one leaking; built without frame pointers) run
under LD_PRELOAD=libbrisk.so with BRISK_PROFILE at a 4 KiB rate.

  - the dump it asks for while the three are live, read by google-pprof
    --text: each site named, its in-use bytes within 10% of the truth (and
    those of a fourth, make_early, which allocates before main);
    the dump at exit: allocated bytes within 10% for all three, in use
    only the leaking one;
  - every dump is well formed: the header is the sum of the stack lines,
    MAPPED_LIBRARIES lists the program and libbrisk.so;
  - the collapsed file: its total is the dump's in-use bytes, each site's
    stack within 10% of the truth;
  - the leak report (BRISK_PROFILE_LEAKS=1) on stderr: the leaking site
    first, within 10%, and neither freed site;
  - scripts/brisk-flame.py makes a well-formed SVG from the collapsed file,
    each site's box as wide as its share;
  - a dump on BRISK_PROFILE_SIGNAL while the program sleeps (the background
    thread writes it); dumps every BRISK_PROFILE_INTERVAL bytes of growth;
    nothing written and nothing printed when the
    profiler is off; BRISK_PROFILE_LEAKS=1 alone reports without files;
  - bad settings and unwritable paths: one warning line each, and the
    program runs to its end; allocations that fail (fault injection)
    while sampling and dumping crash nothing.

When google-pprof (Debian: google-perftools; scripts/setup.sh installs it)
is missing, the checks that need it are skipped and the test exits 77
(skipped) after the others; under CI (CI=true) it fails instead.
"""
import glob
import os
import platform
import re
import signal
import subprocess
import sys
import tempfile
import time
import shutil
import xml.etree.ElementTree as ET

SOURCE_DIR = os.environ.get("BRISKTEST_SOURCE_DIR") or os.path.dirname(
    os.path.dirname(os.path.abspath(__file__)))
BUILD_DIR = os.environ.get("BRISKTEST_BUILD_DIR") or os.path.join(SOURCE_DIR, "build")
BIN_DIR = os.environ.get("BRISKTEST_BIN_DIR") or os.path.join(BUILD_DIR, "tests")
LIB = os.environ.get("BRISKTEST_LIB") or os.path.join(BUILD_DIR, "libbrisk.so")
PROG = os.path.join(BIN_DIR, "profile_sites")
FLAME = os.path.join(SOURCE_DIR, "scripts", "brisk-flame.py")

# profile_sites.c: site -> (blocks, bytes each); make_leaked is never freed
SITES = {"make_record": (200000, 48), "make_buffer": (10000, 2000), "make_leaked": (300, 40000)}
TRUTH = {k: n * size for k, (n, size) in SITES.items()}
EARLY_TRUTH = 4000 * 2000  # make_early, from a constructor: live to the exit
TOLERANCE = 0.10

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("[profile] FAIL %s" % what)
    return cond


def near(got, want):
    return got is not None and abs(got - want) <= TOLERANCE * want


def no_aslr():
    """In the child: the same address layout every run (personality's
    ADDR_NO_RANDOMIZE), so that the kernel's 64 KiB fault-around windows
    fall on the same pages of a library in two runs."""
    import ctypes
    ctypes.CDLL(None, use_errno=True).personality(0x0040000)


def run(args, env_extra, timeout=120, preexec_fn=None):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("BRISK_"):
            del env[k]
    env["LD_PRELOAD"] = LIB
    env.update(env_extra)
    return subprocess.run([PROG] + args, env=env, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=preexec_fn)


HEADER = re.compile(r"^heap profile: (\d+): (\d+) \[ (\d+): (\d+)\] @ heapprofile$")
STACK = re.compile(r"^(\d+): (\d+) \[(\d+): (\d+)\] @((?: 0x[0-9a-f]+)*)$")


def parse_heap(path):
    """(header totals, [(counts, pcs)], mapped lines); raises on bad form."""
    with open(path) as f:
        lines = f.read().split("\n")
    m = HEADER.match(lines[0])
    if not m:
        raise ValueError("%s: bad header %r" % (path, lines[0]))
    total = tuple(int(x) for x in m.groups())
    stacks, i = [], 1
    while i < len(lines) and lines[i]:
        s = STACK.match(lines[i])
        if not s:
            raise ValueError("%s: bad stack line %r" % (path, lines[i]))
        stacks.append((tuple(int(x) for x in s.groups()[:4]), s.group(5).split()))
        i += 1
    if i + 1 >= len(lines) or lines[i + 1] != "MAPPED_LIBRARIES:":
        raise ValueError("%s: no MAPPED_LIBRARIES section after the stacks" % path)
    return total, stacks, [l for l in lines[i + 2:] if l]


def check_heap_file(path):
    try:
        total, stacks, maps = parse_heap(path)
    except (OSError, ValueError) as e:
        check(False, str(e))
        return None
    sums = tuple(sum(c[k] for c, _ in stacks) for k in range(4))
    check(sums == total, "%s: header %s is not the sum of its stacks %s" % (path, total, sums))
    check(all(c[1] <= c[3] and c[0] <= c[2] for c, _ in stacks),
          "%s: a stack has more in use than it allocated" % path)
    check(any(l.endswith(os.path.realpath(PROG)) or l.endswith(PROG) for l in maps),
          "%s: MAPPED_LIBRARIES does not list %s" % (path, PROG))
    check(any("libbrisk" in l for l in maps), "%s: MAPPED_LIBRARIES does not list libbrisk" % path)
    return total


def stat_of(stderr, name):
    """A statistic of BRISK_SHOW_STATS=1's report; None (a failed check) if absent."""
    m = re.search(r"^brisk:   %s: (\d+)" % name, stderr, re.M)
    check(m is not None, "BRISK_SHOW_STATS printed no %s: %r" % (name, stderr[-1000:]))
    return int(m.group(1)) if m else None


def read_collapsed(path):
    out = []
    with open(path) as f:
        for line in f:
            stack, _, n = line.rstrip("\n").rpartition(" ")
            out.append((stack.split(";"), int(n)))
    return out


def site_bytes_collapsed(stacks):
    got = {k: 0 for k in SITES}
    for frames, n in stacks:
        if frames[-1] in got:
            got[frames[-1]] += n
    return got


PPROF_LINE = re.compile(r"^\s*(\d+)\s+[\d.]+%\s+[\d.]+%\s+(\d+)\s+[\d.]+%\s+(\S+)")


def pprof_flat(pprof, heap, mode):
    """{function: flat bytes} from google-pprof --text."""
    r = subprocess.run([pprof, "--text", "--show_bytes", mode, PROG, heap],
                       capture_output=True, text=True, timeout=120)
    check(r.returncode == 0, "google-pprof %s %s: exit %d: %s" % (mode, heap, r.returncode, r.stderr[-500:]))
    flat = {}
    for line in r.stdout.splitlines():
        m = PPROF_LINE.match(line)
        if m:
            flat[m.group(3)] = int(m.group(1))
    return flat, r.stdout


def test_sites(tmp, pprof):
    prefix = os.path.join(tmp, "sites")
    mid = os.path.join(tmp, "mid.heap")
    r = run(["sites", mid], {"BRISK_PROFILE": prefix, "BRISK_PROFILE_RATE": "4096",
                             "BRISK_PROFILE_LEAKS": "1", "PROFILE_SITES_EARLY": "1"})
    if not check(r.returncode == 0, "profile_sites sites: exit %d, stderr %s" % (r.returncode, r.stderr[-2000:])):
        return
    exits = glob.glob(prefix + ".*.0.heap")
    check(len(exits) == 1, "one dump at exit expected, found %s" % exits)
    check(os.path.exists(os.path.join(tmp, "mid.collapsed")), "mid.collapsed was not written beside mid.heap")
    total = check_heap_file(mid)
    for e in exits:
        check_heap_file(e)
        check(os.path.exists(e[:-len(".heap")] + ".collapsed"), "%s has no .collapsed file" % e)

    # the collapsed file: its total is the dump's in-use bytes; each site near the truth
    coll = read_collapsed(os.path.join(tmp, "mid.collapsed"))
    if total is not None:
        check(sum(n for _, n in coll) == total[1],
              "mid.collapsed totals %d bytes, the dump's in-use bytes are %d" % (sum(n for _, n in coll), total[1]))
    got = site_bytes_collapsed(coll)
    for site, want in TRUTH.items():
        check(near(got[site], want), "mid.collapsed: %s has %d bytes, truth %d" % (site, got[site], want))
    print("[profile] collapsed, while live: %s (truth %s)" % (got, TRUTH))

    # the leak report: the leaking site first, the freed ones absent
    leaks = [l for l in r.stderr.splitlines() if l.startswith("brisk: leak")]
    check(leaks and leaks[0].startswith("brisk: leak report: about "), "no leak report on stderr: %r" % r.stderr[-1000:])
    first = next((i for i, l in enumerate(r.stderr.splitlines()) if l.startswith("brisk: leak: about ")), None)
    if check(first is not None, "the leak report names no stack"):
        lines = r.stderr.splitlines()
        m = re.match(r"brisk: leak: about (\d+) bytes in (\d+) blocks", lines[first])
        frame0 = lines[first + 1] if first + 1 < len(lines) else ""
        check(m and near(int(m.group(1)), TRUTH["make_leaked"]),
              "largest leak %r, truth %d bytes" % (lines[first], TRUTH["make_leaked"]))
        check(" make_leaked+" in frame0, "the largest leak's first frame is not make_leaked: %r" % frame0)
        check("make_record" not in r.stderr and "make_buffer" not in r.stderr,
              "the leak report names a site whose blocks were freed")
    print("[profile] leak report: %s" % (lines[first] if first is not None else None))

    # scripts/brisk-flame.py: a well-formed SVG, boxes as wide as their share
    svg = os.path.join(tmp, "mid.svg")
    f = subprocess.run([sys.executable, FLAME, os.path.join(tmp, "mid.collapsed"), "-o", svg],
                       capture_output=True, text=True, timeout=120)
    if check(f.returncode == 0, "brisk-flame.py: exit %d: %s" % (f.returncode, f.stderr)):
        try:
            root = ET.parse(svg).getroot()
        except ET.ParseError as e:
            check(False, "brisk-flame.py wrote no well-formed SVG: %s" % e)
            root = None
        if root is not None:
            ns = "{http://www.w3.org/2000/svg}"
            widths = {}
            for g in root.iter(ns + "g"):
                t, rect = g.find(ns + "title"), g.find(ns + "rect")
                if t is not None and rect is not None:  # a function may have a box per caller
                    name = t.text.split(" (")[0]
                    widths[name] = widths.get(name, 0.0) + float(rect.get("width"))
            full = widths.get("all", 0)
            for site, n in got.items():
                w = widths.get(site)
                check(w is not None and full and abs(w / full - n / sum(c for _, c in coll)) < 0.005,
                      "flame graph: %s is %s px of %s" % (site, w, full))

    if pprof is None:
        return
    flat, text = pprof_flat(pprof, mid, "--inuse_space")
    check(near(flat.get("make_early"), EARLY_TRUTH),
          "google-pprof --text: make_early (before main) %s, truth %d" % (flat.get("make_early"), EARLY_TRUTH))
    for site, want in TRUTH.items():
        check(near(flat.get(site), want), "google-pprof --text (in use, while live): %s %s, truth %d"
              % (site, flat.get(site), want))
    print("[profile] google-pprof --text --inuse_space, while live:\n" + text)
    for e in exits:
        flat, text = pprof_flat(pprof, e, "--alloc_space")
        for site, want in TRUTH.items():
            check(near(flat.get(site), want), "google-pprof (allocated, at exit): %s %s, truth %d"
                  % (site, flat.get(site), want))
        flat, text = pprof_flat(pprof, e, "--inuse_space")
        check(near(flat.get("make_leaked"), TRUTH["make_leaked"]),
              "google-pprof (in use, at exit): make_leaked %s" % flat.get("make_leaked"))
        check(not flat.get("make_record") and not flat.get("make_buffer"),
              "google-pprof (in use, at exit): freed sites show bytes: %s" % flat)


def test_sites_in_thread(tmp):
    """The sites in a thread of their own. The walk finds a stack again
    whole when it is the last sample's: each site, and each caller of a
    site, must still get its own bytes when the stack changes."""
    mid = os.path.join(tmp, "thread.heap")
    r = run(["sites", mid], {"BRISK_PROFILE": os.path.join(tmp, "thread"), "BRISK_PROFILE_RATE": "4096",
                             "PROFILE_SITES_THREAD": "1"})
    if not check(r.returncode == 0, "profile_sites sites in a thread: exit %d, stderr %s"
                 % (r.returncode, r.stderr[-2000:])):
        return
    coll = read_collapsed(os.path.join(tmp, "thread.collapsed"))
    got = site_bytes_collapsed(coll)
    for site, want in TRUTH.items():
        check(near(got[site], want), "thread.collapsed: %s has %d bytes, truth %d" % (site, got[site], want))
    # make_buffer's two callers: the same innermost frame, other stacks
    callers = {c: sum(n for stack, n in coll if stack[-2:] == [c, "make_buffer"]) for c in ("fill_queue", "prefetch")}
    for c, want in (("fill_queue", 6000 * 2000), ("prefetch", 4000 * 2000)):  # profile_sites.c: fill_queue, prefetch
        check(near(callers[c], want), "thread.collapsed: %s;make_buffer has %d bytes, truth %d" % (c, callers[c], want))
    print("[profile] collapsed, sites in a thread: %s, make_buffer by caller %s (truth %s)" % (got, callers, TRUTH))


def test_few_samples(tmp):
    """Fewer samples than a heap keeps in its batch before it enters them
    in the record: a dump still counts them, and forgets the freed ones."""
    r = run(["few", tmp], {"BRISK_PROFILE": os.path.join(tmp, "few"), "BRISK_PROFILE_RATE": "4096"})
    if not check(r.returncode == 0, "profile_sites few: exit %d, stderr %s" % (r.returncode, r.stderr[-2000:])):
        return
    # at 4 KiB, a 100000-byte block is sampled with probability 1 - e^-24
    for name, live in (("few1", 8), ("few2", 5)):
        coll = read_collapsed(os.path.join(tmp, name + ".collapsed"))
        got = sum(n for stack, n in coll if any(f.startswith("make_few") for f in stack))
        check(near(got, live * 100000), "%s.collapsed: make_few has %d bytes in use, truth %d"
              % (name, got, live * 100000))
        print("[profile] %s: make_few %d bytes in use (truth %d)" % (name, got, live * 100000))


def test_churn(tmp, pprof):
    """Two sites of one class with a class cache: make_reused always takes
    the block just freed (from the cache), make_kept finds the cache empty.
    Each must be sampled for what it allocated: a scheme that counted the
    cached blocks without letting a sample fall on them would give
    make_reused nothing."""
    heap = os.path.join(tmp, "churn.heap")
    r = run(["churn", heap], {"BRISK_PROFILE": os.path.join(tmp, "churn"), "BRISK_PROFILE_RATE": "4096",
                              "BRISK_SHOW_STATS": "1"})
    if not check(r.returncode == 0, "profile_sites churn: exit %d, stderr %s" % (r.returncode, r.stderr[-2000:])):
        return
    # On x86-64 brisk reads the unwind tables itself: no frame of this
    # ordinary program (-O2, no frame pointers, functions that save no
    # rbp) may need libgcc's unwinder, ten times as slow per sample.
    # ... and reads them from the objects' files, not through their mappings
    for stat, what in (("profile_unwinder_walks", "stack walks left to libgcc's unwinder"),
                       ("profile_rules_read_mapped", "frame rules read through a mapping, not the file")):
        n = stat_of(r.stderr, stat)
        if platform.machine() == "x86_64":
            check(n == 0, "churn: %s %s" % (n, what))
        print("[profile] churn: %s %s" % (n, what))
    slots, rounds, size = 2000, 20, 3000  # profile_sites.c: CHURN_*
    live = {"make_reused": slots * size, "make_kept": slots * rounds // 4 * size}
    coll = read_collapsed(os.path.join(tmp, "churn.collapsed"))
    for site, want in live.items():
        got = sum(n for stack, n in coll if stack[-1] == site)
        check(near(got, want), "churn.collapsed: %s has %d bytes in use, truth %d" % (site, got, want))
        print("[profile] churn: %s %d bytes in use (truth %d)" % (site, got, want))
    if pprof is None:
        return
    flat, _ = pprof_flat(pprof, heap, "--alloc_space")
    allocated = {"make_reused": slots * rounds * size, "make_kept": live["make_kept"]}
    for site, want in allocated.items():
        check(near(flat.get(site), want), "google-pprof (allocated, churn): %s %s, truth %d"
              % (site, flat.get(site), want))
    print("[profile] churn, allocated: %s (truth %s)" % ({k: flat.get(k) for k in allocated}, allocated))


def test_small_refills(tmp, pprof):
    """A small class whose blocks are freed and taken again from the page's
    local list: every refill is counted, or the site's allocated bytes
    fall far below the truth."""
    heap = os.path.join(tmp, "small.heap")
    r = run(["small", heap], {"BRISK_PROFILE": os.path.join(tmp, "small"), "BRISK_PROFILE_RATE": "4096"})
    if not check(r.returncode == 0, "profile_sites small: exit %d, stderr %s" % (r.returncode, r.stderr[-2000:])):
        return
    if pprof is None:
        return
    want = 400 * 1000 * 64  # profile_sites.c: SMALL_ROUNDS x N_SMALL x SMALL
    flat, _ = pprof_flat(pprof, heap, "--alloc_space")
    check(near(flat.get("make_small"), want), "google-pprof (allocated, small): make_small %s, truth %d"
          % (flat.get("make_small"), want))
    print("[profile] small refills, allocated: make_small %s (truth %d)" % (flat.get("make_small"), want))


def test_large_weights(tmp, pprof):
    """Large blocks of two sizes at the default rate: a sample of an 80 KiB
    block stands for about 7 of them, one of a 1 MiB block for 1.16; with
    either weight given to the other size, that site is off by 6x."""
    heap = os.path.join(tmp, "large.heap")
    r = run(["large", heap], {"BRISK_PROFILE": os.path.join(tmp, "large")})
    if not check(r.returncode == 0, "profile_sites large: exit %d, stderr %s" % (r.returncode, r.stderr[-2000:])):
        return
    if pprof is None:
        return
    want = {"make_mid": 9600 * 80 * 1024, "make_big": 400 * 1024 * 1024}  # profile_sites.c
    flat, _ = pprof_flat(pprof, heap, "--alloc_space")
    for site, n in want.items():
        check(near(flat.get(site), n), "google-pprof (allocated, large): %s %s, truth %d" % (site, flat.get(site), n))
    print("[profile] large blocks, allocated: %s (truth %s)" % ({k: flat.get(k) for k in want}, want))


def test_tables(tmp):
    """The stack walk reads unwind tables with pread: a sampling process
    has no more pages of the C library's tables resident than the same
    process unprofiled (through the mapping, the kernel's fault-around
    made 16 pages resident at once)."""
    got = {}
    for name, env in (("off", {}), ("on", {"BRISK_PROFILE": os.path.join(tmp, "tables"),
                                           "BRISK_PROFILE_RATE": "4096"})):
        r = run(["tables", "20000"], env, preexec_fn=no_aslr)
        m = re.search(r"^tables: (\d+) of (\d+) pages resident", r.stdout, re.M)
        if not check(r.returncode == 0 and m is not None, "profile_sites tables (%s): exit %d, %r %r"
                     % (name, r.returncode, r.stdout[-500:], r.stderr[-1000:])):
            return
        got[name] = int(m.group(1))
    print("[profile] pages of the C library's unwind tables resident: %d unprofiled, %d profiled"
          % (got["off"], got["on"]))
    if platform.machine() == "x86_64":  # elsewhere libgcc's walk reads them through the mapping
        check(got["on"] <= got["off"] + 4, "sampling made %d more pages of the C library's unwind tables resident"
              % (got["on"] - got["off"]))


def test_replaced(tmp):
    """A loaded library whose file is then replaced by another build (as a
    package upgrade does): the walk must not read the new file's tables
    for the old code (its build id differs), and the stacks stay right."""
    d = os.path.join(tmp, "replaced")
    os.makedirs(d)
    shutil.copy(os.path.join(BIN_DIR, "libprofile_plugin_a.so"), os.path.join(d, "plugin.so"))
    shutil.copy(os.path.join(BIN_DIR, "libprofile_plugin_b.so"), os.path.join(d, "plugin_b.so"))
    r = run(["replaced", d], {"BRISK_PROFILE": os.path.join(d, "r"), "BRISK_PROFILE_RATE": "4096",
                              "BRISK_SHOW_STATS": "1"})
    if not check(r.returncode == 0, "profile_sites replaced: exit %d, stderr %s" % (r.returncode, r.stderr[-2000:])):
        return
    want = 2000 * 3000  # profile_sites.c: N_PLUGIN x PLUGIN
    exits = glob.glob(os.path.join(d, "r.*.collapsed"))  # the exit dump: PREFIX.PID.SEQ
    if not check(len(exits) == 1, "replaced plugin: exit dumps %r" % exits):
        return
    coll = read_collapsed(exits[0])
    got = sum(n for stack, n in coll if stack[-2:] == ["run_replaced", "plugin_make"])
    check(near(got, want), "replaced plugin: run_replaced;plugin_make has %d bytes in use, truth %d" % (got, want))
    mapped = stat_of(r.stderr, "profile_rules_read_mapped")
    if platform.machine() == "x86_64":
        check(mapped is not None and mapped >= 1,
              "replaced plugin: no frame rule was read through the mapping (%s)" % mapped)
    print("[profile] replaced plugin: run_replaced;plugin_make %d bytes in use (truth %d), "
          "%s rules read through the mapping" % (got, want, mapped))


def test_signal(tmp):
    """A dump on the signal while the program sleeps: written by the
    background thread, before the exit."""
    prefix = os.path.join(tmp, "sig")
    env = dict(os.environ)
    for k in list(env):
        if k.startswith("BRISK_"):
            del env[k]
    env.update({"LD_PRELOAD": LIB, "BRISK_PROFILE": prefix, "BRISK_PROFILE_SIGNAL": "SIGUSR2",
                "BRISK_PROFILE_RATE": "4096"})
    p = subprocess.Popen([PROG, "idle", "4000"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    time.sleep(0.5)
    p.send_signal(signal.SIGUSR2)
    seen = None
    deadline = time.time() + 3
    while time.time() < deadline and p.poll() is None:
        found = glob.glob("%s.%d.0.heap" % (prefix, p.pid))
        if found and os.path.exists(found[0][:-5] + ".collapsed"):
            seen = found[0]
            break
        time.sleep(0.05)
    check(seen is not None and p.poll() is None,
          "no dump on SIGUSR2 while the program slept (found %s, exit %s)" % (seen, p.poll()))
    out, err = p.communicate(timeout=60)
    check(p.returncode == 0 and err == "", "profile_sites idle: exit %d, stderr %r" % (p.returncode, err))
    if seen:
        time.sleep(0.1)
        check_heap_file(seen)
    check(os.path.exists("%s.%d.1.heap" % (prefix, p.pid)), "no dump at exit after the signal's")


def test_interval(tmp):
    """BRISK_PROFILE_INTERVAL: a dump each time the memory in use grew by
    that much (without the background thread, the allocating thread
    writes them at once, so their number is known)."""
    prefix = os.path.join(tmp, "grow")
    r = run(["sites", os.path.join(tmp, "grow-mid.heap")],
            {"BRISK_PROFILE": prefix, "BRISK_PROFILE_RATE": "4096", "BRISK_PROFILE_INTERVAL": "8000000",
             "BRISK_BACKGROUND": "0"})
    check(r.returncode == 0 and r.stderr == "", "interval run: exit %d, stderr %r" % (r.returncode, r.stderr[-500:]))
    dumps = sorted(glob.glob(prefix + ".*.heap"), key=lambda p: int(p.split(".")[-2]))
    # 42 MB grow in steps of 8 MB: 4 or 5 dumps on the way, then the exit's
    check(5 <= len(dumps) <= 7, "BRISK_PROFILE_INTERVAL=8000000: %d dumps" % len(dumps))
    in_use = [t[1] for t in (check_heap_file(d) for d in dumps[:-1]) if t]
    check(all(b > a for a, b in zip(in_use, in_use[1:])) and in_use and in_use[0] >= 8000000 * 0.8,
          "the interval dumps' in-use bytes: %s" % in_use)
    print("[profile] interval dumps, in use: %s" % in_use)


def test_off_and_leaks_alone(tmp):
    d = os.path.join(tmp, "off")
    os.mkdir(d)
    r = subprocess.run([PROG, "idle", "10"], cwd=d, capture_output=True, text=True, timeout=60,
                       env={k: v for k, v in dict(os.environ, LD_PRELOAD=LIB).items() if not k.startswith("BRISK_")})
    check(r.returncode == 0 and r.stderr == "" and os.listdir(d) == [],
          "profiler off: exit %d, stderr %r, files %s" % (r.returncode, r.stderr, os.listdir(d)))
    r = subprocess.run([PROG, "idle", "10"], cwd=d, capture_output=True, text=True, timeout=60,
                       env=dict({k: v for k, v in os.environ.items() if not k.startswith("BRISK_")},
                                LD_PRELOAD=LIB, BRISK_PROFILE_LEAKS="1", BRISK_PROFILE_RATE="4096"))
    check(r.returncode == 0 and "brisk: leak report: about " in r.stderr and " make_buffer+" in r.stderr,
          "BRISK_PROFILE_LEAKS=1 alone: exit %d, stderr %r" % (r.returncode, r.stderr[-1500:]))
    check(os.listdir(d) == [], "BRISK_PROFILE_LEAKS=1 alone wrote files: %s" % os.listdir(d))


def test_bad_settings(tmp):
    cases = [
        ({"BRISK_PROFILE": os.path.join(tmp, "b"), "BRISK_PROFILE_RATE": "100"},
         ["brisk: warning: bad value for option BRISK_PROFILE_RATE: '100' (kept the default)"]),
        ({"BRISK_PROFILE": os.path.join(tmp, "b"), "BRISK_PROFILE_SIGNAL": "SIGSEGV"},
         ["brisk: warning: bad value for option BRISK_PROFILE_SIGNAL: 'SIGSEGV' (kept the default)"]),
        ({"BRISK_PROFILE": os.path.join(tmp, "b"), "BRISK_PROFILE_SIGNAL": "9"},
         ["brisk: warning: bad value for option BRISK_PROFILE_SIGNAL: '9' (kept the default)"]),
        ({"BRISK_PROFILE": os.path.join(tmp, "b"), "BRISK_PROFILE_INTERVAL": "-5"},
         ["brisk: warning: bad value for option BRISK_PROFILE_INTERVAL: '-5' (kept the default)"]),
        ({"BRISK_PROFILE_SIGNAL": "USR2"},
         ["brisk: warning: BRISK_PROFILE_SIGNAL has no effect without BRISK_PROFILE=<prefix> (or "
          "brisk_profile_start)"]),
        ({"BRISK_PROFILE": "/nonexistent-dir/p"},
         ["brisk: warning: heap profile: cannot write /nonexistent-dir/p.{pid}.0.heap: ENOENT"]),
    ]
    for env, want in cases:
        p = subprocess.Popen([PROG, "idle", "10"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                             env=dict({k: v for k, v in os.environ.items() if not k.startswith("BRISK_")},
                                      LD_PRELOAD=LIB, **env))
        out, err = p.communicate(timeout=60)
        want = [w.replace("{pid}", str(p.pid)) for w in want]
        check(p.returncode == 0 and err.splitlines() == want,
              "%s: exit %d, stderr %r, expected %r" % (env, p.returncode, err, want))


def test_faults(tmp):
    r = run(["faults", "12"], {"BRISK_PROFILE": os.path.join(tmp, "f"), "BRISK_PROFILE_RATE": "4096",
                               "BRISK_FAULT_RATE": "250000"})
    bad = [l for l in r.stderr.splitlines() if not l.startswith("brisk: warning: heap profile: ")]
    check(r.returncode == 0 and not bad, "faults while sampling: exit %d, stderr %r" % (r.returncode, r.stderr[-1500:]))


def test_sample_memory(tmp):
    """Bursts of 10,000 x 256 B, each freed whole: about 5 samples live per
    burst, each a span of its own whose block touches one page. The
    profiled run's RSS at a burst's end stays within 256 KiB of the
    unprofiled run's (when a sample held a slice that class pages had
    made resident, the heap faulted in fresh slices for them: +500 KiB).
    RSS is read from smaps_rollup (a walk of the page tables, exact); the
    difference measured 156..164 KiB with the library before the remote
    free's rework and 168..184 KiB after it, with the same mappings in
    both runs; the bound leaves room for that and catches the +500 KiB.
    The best of three runs each way."""
    def peak(env):
        best = None
        for _ in range(3):
            r = run(["bursts", "8"], env)
            if not check(r.returncode == 0, "profile_sites bursts: exit %d, stderr %s"
                         % (r.returncode, r.stderr[-2000:])):
                return None
            m = re.search(r"^peak_rss_kib (\d+)$", r.stdout, re.M)
            if not check(m is not None, "profile_sites bursts printed no peak: %r" % r.stdout[-500:]):
                return None
            best = int(m.group(1)) if best is None else min(best, int(m.group(1)))
        return best
    off = peak({})
    on = peak({"BRISK_PROFILE": os.path.join(tmp, "bursts")})
    if off is None or on is None:
        return
    check(on - off <= 256, "sampling added %d KiB to a burst's RSS (%d -> %d KiB; at most 256)"
          % (on - off, off, on))
    print("[profile] bursts of 256 B: RSS at a burst's end %d KiB, sampled %d KiB" % (off, on))


def main():
    for path in (PROG, LIB, FLAME):
        if not os.path.exists(path):
            print("[profile] FAILED: %s not found (build first)" % path)
            return 1
    pprof = shutil.which("google-pprof") or shutil.which("pprof-legacy")
    tmp = tempfile.mkdtemp(prefix="brisk-profile-")
    try:
        test_sites(tmp, pprof)
        test_sites_in_thread(tmp)
        test_few_samples(tmp)
        test_churn(tmp, pprof)
        test_small_refills(tmp, pprof)
        test_large_weights(tmp, pprof)
        test_sample_memory(tmp)
        test_tables(tmp)
        test_replaced(tmp)
        test_signal(tmp)
        test_interval(tmp)
        test_off_and_leaks_alone(tmp)
        test_bad_settings(tmp)
        test_faults(tmp)
    finally:
        if not failures:
            shutil.rmtree(tmp, ignore_errors=True)
        else:
            print("[profile] files kept in %s" % tmp)
    if failures:
        print("[profile] FAILED: %d checks" % len(failures))
        return 1
    if pprof is None:
        if os.environ.get("CI") == "true":
            print("[profile] FAILED: google-pprof is needed under CI (scripts/setup.sh installs google-perftools)")
            return 1
        print("[profile] SKIPPED the google-pprof checks: google-pprof not found "
              "(install google-perftools, or run scripts/setup.sh as root); the others passed")
        return 77
    print("[profile] all checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
