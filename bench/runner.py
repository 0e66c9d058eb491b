"""The parts of brisk's benchmark harness that find and run things: the
peers, the workload table, one measured child process, the redis driver.
bench/harness.py builds the matrix and the reports on top of this."""

import csv
import json
import os
import platform
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# --------------------------------------------------------------------------
# Peers

# name, library sonames (first found wins), Debian package
PEERS = [
    ("glibc", None, None),
    ("brisk", None, None),  # build/libbrisk.so
    ("mimalloc", ["libmimalloc.so.2"], "libmimalloc2.0"),
    ("jemalloc", ["libjemalloc.so.2"], "libjemalloc2"),
    ("tcmalloc", ["libtcmalloc_minimal.so.4"], "libtcmalloc-minimal4"),
    # The proxy is the library that replaces malloc; libtbbmalloc.so.2
    # alone only offers scalable_malloc.
    ("tbbmalloc", ["libtbbmalloc_proxy.so.2"], "libtbbmalloc2"),
]
PEER_PACKAGES = {name: pkg for name, _, pkg in PEERS if pkg}

# The newest releases, which Debian does not package, built from source
# (see docs/BENCHMARKS.md for how): name, library file, release. They are
# looked for in the directories of BRISK_PEER_DIR (colon-separated), then in
# shared/peers beside the checkout, then in the cache folder shared/peers/
# build.sh builds into; those found join the standard set.
# The secure builds are known by name but run only when asked for.
BUILT_PEERS = [
    ("mimalloc3", "libmimalloc3.so", "mimalloc 3.3.2", True),
    ("snmalloc", "libsnmalloc.so", "snmalloc 0.7.5 (git f126f1c9)", True),
    ("rpmalloc", "librpmalloc-1.4.3.so", "rpmalloc 1.4.3", True),
    ("mimalloc3-secure", "libmimalloc3-secure.so", "mimalloc 3.3.2, secure build", False),
    ("snmalloc-checks", "libsnmalloc-checks.so", "snmalloc 0.7.5 (git f126f1c9), checked build",
     False),
]
BUILT_RELEASE = {name: release for name, _, release, _ in BUILT_PEERS}


def peer_dirs():
    dirs = [d for d in os.environ.get("BRISK_PEER_DIR", "").split(":") if d]
    dirs.append(os.path.join(os.path.dirname(ROOT), "shared", "peers"))
    # where shared/peers/build.sh puts them by default
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    dirs.append(os.path.join(cache, "brisk-peers"))
    return dirs


def find_built_peer(filename):
    for d in peer_dirs():
        p = os.path.join(d, filename)
        if os.path.exists(p):
            return os.path.abspath(p)
    return None
LIB_DIRS = ["/usr/lib/x86_64-linux-gnu", "/lib/x86_64-linux-gnu", "/usr/lib64", "/usr/lib",
            "/usr/local/lib"]


class Allocator:
    """One column of the matrix. lib is None for the process's own malloc
    (glibc), else the library to preload."""

    def __init__(self, name, lib=None, kind="peer", env=None):
        self.name = name
        self.lib = lib
        self.kind = kind  # peer (Debian) | built (BUILT_PEERS) | custom | aa
        self.source = lib  # where lib was copied from (see snapshot)
        self.env = dict(env or {})  # set in this allocator's runs (NAME=path:VAR=VALUE)

    def preload(self, workload, glibc_forward):
        if self.lib:
            return self.lib
        if workload.get("needs_glibc_forward") and glibc_forward:
            return glibc_forward
        return None

    def to_json(self):
        d = {"name": self.name, "lib": self.source, "kind": self.kind}
        if self.env:
            d["env"] = dict(self.env)
        return d

    def describe(self, version=None):
        """The allocator as the reports name it: its version or library,
        and the environment it runs with."""
        text = version or self.lib or "no preload"
        if self.env:
            text += "; " + " ".join("%s=%s" % kv for kv in sorted(self.env.items()))
        return text


ENV_ITEM = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def split_env(part):
    """One --alloc item: NAME, NAME=path, either followed by :VAR=VALUE
    items (the environment of that allocator's runs). Returns (name, path
    or None, env)."""
    pieces = part.split(":")
    head, env = [pieces[0]], {}
    for piece in pieces[1:]:
        if env or ENV_ITEM.match(piece):
            if not ENV_ITEM.match(piece):
                raise SystemExit("harness: --alloc %s: '%s' is not VAR=VALUE" % (part, piece))
            var, value = piece.split("=", 1)
            env[var] = value
        else:
            head.append(piece)  # a ':' inside the path
    head = ":".join(head)
    if "=" in head:
        name, path = head.split("=", 1)
        return name.strip(), path.strip(), env
    return head.strip(), None, env


def ldconfig_map():
    """soname -> path from ldconfig -p (x86-64 entries first)."""
    found = {}
    for exe in ("ldconfig", "/sbin/ldconfig", "/usr/sbin/ldconfig"):
        try:
            out = subprocess.run([exe, "-p"], capture_output=True, text=True, timeout=20).stdout
        except (OSError, subprocess.SubprocessError):
            continue
        for line in out.splitlines():
            m = re.match(r"\s*(\S+)\s+\(([^)]*)\)\s+=>\s+(\S+)", line)
            if m and m.group(1) not in found and ("x86-64" in m.group(2) or "64" in m.group(2)
                                                  or platform.machine() != "x86_64"):
                found[m.group(1)] = m.group(3)
        break
    return found


def find_library(sonames, cache):
    for so in sonames:
        if so in cache and os.path.exists(cache[so]):
            return cache[so]
        for d in LIB_DIRS:
            p = os.path.join(d, so)
            if os.path.exists(p):
                return p
    return None


def install_packages(pkgs, log):
    """apt-get install as root; returns True when apt-get ran successfully."""
    if os.geteuid() != 0 or not shutil.which("apt-get"):
        return False
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    cmd = ["apt-get", "install", "-y", "--no-install-recommends"] + pkgs
    log("installing missing peers: " + " ".join(pkgs))
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        subprocess.run(["apt-get", "update"], capture_output=True, env=env)
        r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        log("apt-get failed: " + (r.stderr.strip().splitlines() or ["?"])[-1])
    return r.returncode == 0


def package_version(pkg):
    try:
        r = subprocess.run(["dpkg-query", "-W", "-f=${Version}", pkg], capture_output=True,
                           text=True, timeout=10)
        return r.stdout.strip() if r.returncode == 0 else None
    except (OSError, subprocess.SubprocessError):
        return None


def quick_allocators():
    """The quick tier's default set, so that `make bench` fits in 3 minutes
    with runs long enough to be steady: brisk, glibc, the newest mimalloc
    found (v3 built from source, else Debian's) and snmalloc if found."""
    names = ["brisk", "glibc"]
    names.append("mimalloc3" if find_built_peer("libmimalloc3.so") else "mimalloc")
    if find_built_peer("libsnmalloc.so"):
        names.append("snmalloc")
    return ",".join(names)


def resolve_allocators(spec, brisk_lib, install, log):
    """Parses --alloc. Returns (allocators, notes). spec None = every peer."""
    notes = []
    items = []
    envs = {}
    if spec:
        for part in spec.split(","):
            part = part.strip()
            if not part:
                continue
            name, path, env = split_env(part)
            items.append((name, path))
            envs[name] = env
    else:
        items = [(name, None) for name, _, _ in PEERS]
        items += [(name, None) for name, f, _, default in BUILT_PEERS
                  if default and find_built_peer(f)]
    names = [n for n, _ in items]
    if len(set(names)) != len(names):
        raise SystemExit("harness: an allocator is named twice in --alloc")
    known = {name: sonames for name, sonames, _ in PEERS}
    built = {name: f for name, f, _, _ in BUILT_PEERS}
    cache = None
    resolved, missing = [], []
    for name, path in items:
        if path is not None:
            if path.lower() in ("none", "-", ""):
                resolved.append(Allocator(name, None, "custom"))
                continue
            if not os.path.exists(path):
                raise SystemExit("harness: %s: no library at %s" % (name, path))
            resolved.append(Allocator(name, os.path.abspath(path), "custom"))
        elif name == "glibc":
            resolved.append(Allocator("glibc"))
        elif name == "brisk":
            if os.path.exists(brisk_lib):
                resolved.append(Allocator("brisk", os.path.abspath(brisk_lib)))
            elif spec:
                raise SystemExit("harness: brisk: %s not found (build it: cmake --build build)"
                                 % brisk_lib)
            else:
                notes.append("brisk: %s not found; build it with cmake --build build" % brisk_lib)
        elif name in built:
            lib = find_built_peer(built[name])
            if lib is None:
                raise SystemExit("harness: %s: %s not found in %s (or name it: %s=/path/%s)"
                                 % (name, built[name], ":".join(peer_dirs()), name, built[name]))
            resolved.append(Allocator(name, lib, "built"))
        elif name in known:
            if cache is None:
                cache = ldconfig_map()
            lib = find_library(known[name], cache)
            if lib:
                resolved.append(Allocator(name, lib))
            else:
                missing.append(name)
                resolved.append(Allocator(name, None, "missing"))
        else:
            raise SystemExit("harness: unknown allocator '%s' (known: %s; or NAME=/path/lib.so)"
                             % (name, ", ".join(list(known) + list(built))))
    if missing:
        pkgs = [PEER_PACKAGES[m] for m in missing]
        if install and install_packages(pkgs, log):
            cache = ldconfig_map()
            for a in resolved:
                if a.kind == "missing":
                    lib = find_library(known[a.name], cache)
                    if lib:
                        a.lib, a.kind = lib, "peer"
        still = [a.name for a in resolved if a.kind == "missing"]
        if still:
            notes.append("missing peers, run without them: %s (install with: sudo apt-get install %s)"
                         % (", ".join(still), " ".join(PEER_PACKAGES[m] for m in still)))
    for a in resolved:
        a.env = dict(envs.get(a.name, {}))
    return [a for a in resolved if a.kind != "missing"], notes


def snapshot(allocs, tmpdir):
    """Copies every library that is not a system peer (brisk, NAME=path)
    into tmpdir and runs the copy, so a rebuild of build/libbrisk.so
    during a run cannot mix two builds in one table."""
    for a in allocs:
        if a.lib and a.kind != "peer" or a.name == "brisk" and a.lib:
            d = os.path.join(tmpdir, "snap-" + a.name)
            os.makedirs(d, exist_ok=True)
            dst = os.path.join(d, os.path.basename(a.lib))
            shutil.copy2(a.lib, dst)
            a.lib = dst


def make_aa(ref, tmpdir):
    """A second copy of the reference library, preloaded as if it were a
    different allocator: the A/A noise check."""
    if ref.lib is None:
        return Allocator(ref.name + "-aa", None, "aa", ref.env)
    base = os.path.basename(ref.lib)
    stem = base.split(".so")[0]
    dst = os.path.join(tmpdir, stem + "-aa.so")
    shutil.copy2(ref.lib, dst)
    aa = Allocator(ref.name + "-aa", dst, "aa", ref.env)
    aa.source = ref.source
    return aa


# --------------------------------------------------------------------------
# Workloads
#
# argv entries: "{bin}" is the benchmark directory, "{size}" the tier's size.
# Each workload has sizes for the tiers quick / default / full, and "instr"
# sizes (n, 2n) for the instruction-count mode where it applies (single
# thread). time: "wall" (the child's wall time, measured here) or
# "reported" (the RESULT line's secs, for programs that time only the part
# that depends on the allocator). "optional": run only when named in
# --only (programs whose results do not depend on the preloaded allocator,
# so a column per allocator would repeat one measurement). "tier_extra":
# arguments added in one tier (the quick tier runs only session's "malloc"
# strategy, the one its time column reports). "tier_runs": more runs than
# the tier's in that tier, for the workloads whose runs differ most.
#
# The quick tier runs 11 short runs per cell rather than 5 long ones: on a
# shared 2-core machine one run of a program can be 30% slower than the
# next, and a median of 5 such runs left A/A ratios of 0.75..1.38; the
# median of 11 halves that spread for the same total time.

WORKLOADS = [
    {"name": "larson", "argv": ["{bin}/bench_larson", "{size}"],
     "sizes": {"quick": 4000000, "default": 20000000, "full": 200000000}, "instr": 100000,
     "what": "server churn: 8..1000 B objects replaced at random, tables handed to the next "
             "round's threads (larson-like)"},
    {"name": "xmalloc", "argv": ["{bin}/bench_xmalloc", "{size}"],
     "sizes": {"quick": 3000000, "default": 10000000, "full": 100000000},
     "what": "producer/consumer: producers allocate small mixed objects, consumers free them "
             "(xmalloc-like)"},
    {"name": "pc-small", "argv": ["{bin}/bench_pc", "pairs", "small", "{size}"],
     "sizes": {"quick": 2000000, "default": 10000000, "full": 100000000},
     "what": "producer/consumer 1:1: 16 B..1 KiB blocks allocated by producers, freed by their "
             "consumers, batches of 64"},
    {"name": "pc-small-mesh", "argv": ["{bin}/bench_pc", "mesh", "small", "{size}"],
     "sizes": {"quick": 2000000, "default": 10000000, "full": 100000000},
     "what": "producer/consumer N:M: 16 B..1 KiB blocks, each producer's batches spread over "
             "every consumer"},
    {"name": "pc-large", "argv": ["{bin}/bench_pc", "pairs", "large", "{size}"],
     "sizes": {"quick": 100000, "default": 400000, "full": 4000000},
     "what": "producer/consumer 1:1: 64..256 KiB blocks, batches of 8"},
    {"name": "pc-large-mesh", "argv": ["{bin}/bench_pc", "mesh", "large", "{size}"],
     "sizes": {"quick": 100000, "default": 400000, "full": 4000000},
     "what": "producer/consumer N:M: 64..256 KiB blocks, each producer's batches spread over "
             "every consumer"},
    {"name": "msgpipe", "argv": ["{bin}/bench_msgpipe", "{size}"],
     "sizes": {"quick": 300000, "default": 300000, "full": 3000000}, "tier_runs": {"quick": 15},
     "what": "messaging pipeline: 64 B..256 KiB buffers allocated on an I/O thread, freed on "
             "an application thread"},
    {"name": "cache-scratch", "argv": ["{bin}/bench_cache", "scratch", "{size}"],
     "sizes": {"quick": 200000, "default": 2000000, "full": 20000000}, "tier_runs": {"quick": 21},
     "what": "passive false sharing: objects freed by the thread they were given to"},
    {"name": "cache-thrash", "argv": ["{bin}/bench_cache", "thrash", "{size}"],
     "sizes": {"quick": 200000, "default": 2000000, "full": 20000000}, "tier_runs": {"quick": 21},
     "what": "active false sharing: small objects written hard by their own threads"},
    {"name": "random-st", "argv": ["{bin}/bench_random", "st", "{size}"],
     "sizes": {"quick": 2000000, "default": 15000000, "full": 150000000}, "instr": 100000,
     "what": "random sizes in a live window, one thread (malloc, calloc, realloc)"},
    {"name": "random-mt", "argv": ["{bin}/bench_random", "mt", "{size}"],
     "sizes": {"quick": 2500000, "default": 20000000, "full": 200000000},
     "what": "random sizes in a live window per thread"},
    {"name": "stress", "argv": ["{bin}/bench_random", "stress", "{size}"],
     "sizes": {"quick": 2000000, "default": 20000000, "full": 50000000}, "tier_runs": {"quick": 21},
     "what": "test-stress style: growing live sets, objects swapped between threads, "
             "threads recreated each round"},
    {"name": "midlarge", "argv": ["{bin}/bench_sizes", "midlarge", "{size}"],
     "sizes": {"quick": 300000, "default": 3000000, "full": 30000000}, "instr": 20000,
     "what": "mid-large: 8..34 KiB, window 2048 per thread"},
    {"name": "linear", "argv": ["{bin}/bench_sizes", "linear", "{size}"],
     "sizes": {"quick": 500000, "default": 3000000, "full": 30000000}, "instr": 20000,
     "what": "1..80000 B uniformly, window 256 per thread, no cross-thread frees"},
    {"name": "realloc", "argv": ["{bin}/bench_realloc", "{size}"],
     "sizes": {"quick": 1000000, "default": 3000000, "full": 30000000}, "instr": 20000,
     "what": "vectors grown by doubling, strings by small appends"},
    {"name": "large", "argv": ["{bin}/bench_sizes", "large", "{size}"],
     "sizes": {"quick": 60, "default": 300, "full": 3000}, "instr": 40,
     "what": "5..25 MiB blocks, window 4 per thread, every page touched"},
    {"name": "latency", "argv": ["{bin}/bench_latency", "{size}"],
     "sizes": {"quick": 50000, "default": 1000000, "full": 4000000}, "time": "reported",
     "what": "tail latency: 4096 live blocks of 16 B..64 KiB, each free + malloc pair timed alone "
             "(P50/P99/P99.9/P99.99 and the worst pair)"},
    {"name": "large-live", "argv": ["{bin}/bench_sizes", "large-live", "{size}"],
     "sizes": {"quick": 40, "default": 200, "full": 2000},
     "what": "5..25 MiB blocks, 20 live (10 per thread), each written in full when allocated"},
    {"name": "requests", "argv": ["{bin}/bench_requests", "{size}"],
     "sizes": {"quick": 60, "default": 400, "full": 4000},
     "what": "a thread per request, 2 at a time: each allocates about 8 MiB of 16 B..64 KiB "
             "blocks, checks and frees them, and exits"},
    {"name": "session", "argv": ["{bin}/bench_session", "{size}"],
     "sizes": {"quick": 200000, "default": 600000, "full": 6000000}, "instr": 20000,
     "instr_extra": ["malloc"], "tier_extra": {"quick": ["malloc"]}, "time": "reported",
     "needs_glibc_forward": True,
     "what": "bursts of 100..10000 256 B messages; per-message latency with rdtsc"},
    {"name": "session-pmr", "argv": ["{bin}/bench_session_pmr", "{size}"],
     "sizes": {"quick": 20000, "default": 100000, "full": 1000000}, "time": "reported",
     "optional": True,
     "what": "std::pmr monotonic and pool resources against brisk heaps and session "
             "arenas in one process (bursts, destroy at 1k..1M live blocks, overflow, "
             "cross-thread free); run with --only session-pmr --alloc brisk"},
    {"name": "zmq", "argv": ["{bin}/bench_zmq", "{size}"],
     "sizes": {"quick": 1250, "default": 50000, "full": 80000}, "time": "reported",
     "what": "libzmq PAIR and PUSH/PULL over inproc, ipc, tcp; 64 B..256 KiB; ping-pong latency"},
    {"name": "redis", "kind": "redis",
     "sizes": {"quick": 6000, "default": 100000, "full": 150000}, "time": "reported",
     "needs_glibc_forward": True,
     "what": "redis-server under each allocator, redis-benchmark set/get/lpush/lpop, "
             "256 B and 4 KiB values, pipelined"},
]

TIER_RUNS = {"quick": 11, "default": 5, "full": 5}
TIER_TIMEOUT = {"quick": 120, "default": 300, "full": 1200}


def load_workloads(path):
    with open(path) as f:
        data = json.load(f)
    if isinstance(data, dict):
        data = data.get("workloads", [])
    for w in data:
        if "name" not in w or ("argv" not in w and w.get("kind") != "redis"):
            raise SystemExit("harness: bad workload in %s: %r" % (path, w))
    return data


def select_workloads(all_workloads, only):
    if not only:
        return [w for w in all_workloads if not w.get("optional")]
    wanted = [x.strip() for x in only.split(",") if x.strip()]
    by_name = {w["name"]: w for w in all_workloads}
    out = []
    for name in wanted:
        if name not in by_name:
            raise SystemExit("harness: unknown workload '%s' (known: %s)"
                             % (name, ", ".join(by_name)))
        out.append(by_name[name])
    return out


def workload_argv(w, bin_dir, size, threads=None, extra=None):
    argv = [a.replace("{bin}", bin_dir).replace("{size}", str(size))
            .replace("{python}", sys.executable) for a in w["argv"]]
    if threads is not None or extra:
        argv.append(str(threads if threads is not None else 0))
    if extra:
        argv.extend(extra)
    return argv


# --------------------------------------------------------------------------
# Running one child

RESULT_RE = re.compile(r"^RESULT\s+(.*)$")
METRIC_RE = re.compile(r"^METRIC\s+(.*)$")


def parse_fields(text):
    """'a=1 b=x' -> {'a': 1.0, 'b': 'x'} (numbers become floats)."""
    out = {}
    for tok in text.split():
        if "=" not in tok:
            continue
        k, v = tok.split("=", 1)
        try:
            out[k] = float(v)
        except ValueError:
            out[k] = v
    return out


def parse_output(stdout):
    """Returns (result fields or None, {metric id: {field: value}})."""
    result, metrics = None, {}
    for line in stdout.splitlines():
        m = RESULT_RE.match(line.strip())
        if m:
            result = parse_fields(m.group(1))
            continue
        m = METRIC_RE.match(line.strip())
        if m:
            f = parse_fields(m.group(1))
            mid = f.pop("id", None)
            if mid is not None:
                metrics[str(mid)] = {k: v for k, v in f.items() if isinstance(v, float)}
    return result, metrics


class Child:
    """A child process measured with wait4: wall time and peak RSS.

    With spawn (the bench_spawn launcher) the launcher forks the program
    and reports the program's own wait4 rusage; without it the child is
    forked from this Python process, whose peak RSS Linux carries into the
    child's ru_maxrss across exec (so small programs all show the
    harness's size). preload becomes the program's LD_PRELOAD only."""

    def __init__(self, argv, env, timeout, spawn=None, preload=None):
        self.out = tempfile.TemporaryFile()
        self.err = tempfile.TemporaryFile()
        self.timed_out = False
        self.report = None
        env = dict(env)
        env.pop("LD_PRELOAD", None)
        if spawn:
            fd, self.report = tempfile.mkstemp(prefix="brisk-spawn-")
            os.close(fd)
            argv = [spawn, self.report, preload or ""] + list(argv)
        elif preload:
            env["LD_PRELOAD"] = preload
        self.argv = argv
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(argv, env=env, stdout=self.out, stderr=self.err,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        self.timer = threading.Timer(timeout, self._timeout) if timeout else None
        if self.timer:
            self.timer.daemon = True
            self.timer.start()
        self.result = None
        self._reaped = None

    def _timeout(self):
        self.timed_out = True
        self.kill()

    def kill(self, sig=signal.SIGKILL):
        try:
            os.killpg(self.proc.pid, sig)
        except (ProcessLookupError, PermissionError):
            pass

    def running(self):
        """True while the child runs (reaps it, keeping its rusage, if not)."""
        if self.result is not None or self._reaped is not None:
            return False
        pid, status, ru = os.wait4(self.proc.pid, os.WNOHANG)
        if pid == 0:
            return True
        self._reaped = (status, ru, time.perf_counter())
        return False

    def wait(self):
        """Reaps the child; returns dict(wall, rss_kib, rc, signal, stdout, stderr)."""
        if self.result is not None:
            return self.result
        if self._reaped is None:
            while True:
                try:
                    _, status, ru = os.wait4(self.proc.pid, 0)
                    break
                except InterruptedError:
                    continue
            self._reaped = (status, ru, time.perf_counter())
        status, ru, t1 = self._reaped
        wall = t1 - self.t0
        if self.timer:
            self.timer.cancel()
        sig = os.WTERMSIG(status) if os.WIFSIGNALED(status) else 0
        rc = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -sig
        self.proc.returncode = rc
        rss = ru.ru_maxrss
        if self.report:
            try:
                with open(self.report) as f:
                    rep = parse_fields(f.read())
                code = int(rep["status"])
                rc, sig = (code, 0) if code >= 0 else (-code, -code)
                rss, wall = int(rep["maxrss_kib"]), rep["wall"]
                if sig:
                    rc = -sig
            except (OSError, KeyError, ValueError):
                pass  # the launcher was killed: keep its own status
            finally:
                os.unlink(self.report)
        self.out.seek(0)
        self.err.seek(0)
        stdout = self.out.read().decode("utf-8", "replace")
        stderr = self.err.read().decode("utf-8", "replace")
        self.out.close()
        self.err.close()
        self.result = {"wall": wall, "rss_kib": rss, "rc": rc, "signal": sig,
                       "timed_out": self.timed_out, "stdout": stdout, "stderr": stderr}
        return self.result


def child_env(alloc, run):
    """The environment of one run: the harness's, without its preload, with
    the allocator's own variables (NAME=path:VAR=VALUE) and its name and
    run number for the workload."""
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    env.update(alloc.env)
    env["BENCH_ALLOC"] = alloc.name
    env["BENCH_RUN"] = str(run)
    return env


def wrap(argv, preload, wrapper):
    """Puts a tracer (strace, valgrind) in front of argv; returns (argv,
    preload for the launched process). strace hands the preload to the
    traced program only; valgrind passes its own LD_PRELOAD on to it."""
    if not wrapper:
        return argv, preload
    if wrapper[0] == "strace":
        pre = ["-E", "LD_PRELOAD=" + preload] if preload else []
        return wrapper + pre + ["--"] + argv, None
    return wrapper + argv, preload


def failure_text(r):
    if r.get("timed_out"):
        return "timeout"
    if r.get("signal"):
        try:
            return "signal %s" % signal.Signals(r["signal"]).name
        except ValueError:
            return "signal %d" % r["signal"]
    if r.get("rc"):
        if "CHECK FAILED" in r.get("stderr", ""):
            return "check failed (rc %d)" % r["rc"]
        return "exit %d" % r["rc"]
    return "no RESULT line"


def run_child(argv, alloc, run, ctx, preload, spawn=None):
    """Run one program to its end (ctx["current"] names it meanwhile, so an
    interrupt can kill it); the Child's result."""
    child = Child(argv, child_env(alloc, run), ctx["timeout"], spawn, preload)
    ctx["current"] = child
    try:
        return child.wait()
    finally:
        ctx["current"] = None
        child.kill()


def run_program(w, alloc, run, size, ctx, wrapper=None, threads=None, extra=None):
    if extra is None:  # arguments a tier adds (the quick tier times less of session)
        extra = w.get("tier_extra", {}).get(ctx.get("size_tier"))
    argv = workload_argv(w, ctx["bin_dir"], size, threads if threads is not None else ctx["threads"],
                         extra)
    argv, preload = wrap(argv, alloc.preload(w, ctx["glibc_forward"]), wrapper)
    r = run_child(argv, alloc, run, ctx, preload, ctx["spawn"])
    result, metrics = parse_output(r["stdout"])
    rec = {"workload": w["name"], "alloc": alloc.name, "run": run, "argv": argv,
           "wall": r["wall"], "rss_kib": r["rss_kib"], "rc": r["rc"], "signal": r["signal"],
           "result": result, "metrics": metrics, "ok": False, "error": None}
    if r["rc"] == 0 and not r["timed_out"] and result is not None and result.get("check") == "ok":
        rec["ok"] = True
    else:
        rec["error"] = failure_text(r)
        rec["stderr_tail"] = r["stderr"][-2000:]
    if w.get("time") == "reported" and result and isinstance(result.get("secs"), float):
        rec["time"] = result["secs"]
    else:
        rec["time"] = r["wall"]
    return rec


# --------------------------------------------------------------------------
# redis: a real server under each allocator

def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def resp(*args):
    out = b"*%d\r\n" % len(args)
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out += b"$%d\r\n%s\r\n" % (len(a), a)
    return out


class RespReader:
    def __init__(self, sock):
        self.sock = sock
        self.buf = b""

    def _line(self):
        while b"\r\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\r\n", 1)
        return line

    def _exact(self, n):
        while len(self.buf) < n + 2:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("redis closed the connection")
            self.buf += chunk
        data, self.buf = self.buf[:n], self.buf[n + 2:]
        return data

    def read(self):
        line = self._line()
        t, rest = line[:1], line[1:]
        if t in (b"+", b"-"):
            return rest.decode() if t == b"+" else RuntimeError(rest.decode())
        if t == b":":
            return int(rest)
        if t == b"$":
            n = int(rest)
            return None if n < 0 else self._exact(n)
        if t == b"*":
            n = int(rest)
            return None if n < 0 else [self.read() for _ in range(n)]
        raise ValueError("bad RESP reply %r" % line)


def redis_command(port, *cmds, timeout=5.0):
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(b"".join(resp(*c) for c in cmds))
        r = RespReader(s)
        return [r.read() for _ in cmds]


def redis_check(port):
    """Round-trips data of both value sizes and a list through the server."""
    value = bytes((i * 131 + 7) & 0xff for i in range(4096))
    replies = redis_command(port, ("SET", "brisk:check", value), ("GET", "brisk:check"),
                            ("DEL", "brisk:list"), ("RPUSH", "brisk:list", "a", value[:256], "c"),
                            ("LRANGE", "brisk:list", 0, -1), ("DBSIZE",))
    return (replies[1] == value and replies[4] == [b"a", value[:256], b"c"]
            and isinstance(replies[5], int) and replies[5] > 0)


def run_redis(w, alloc, run, size, ctx, wrapper=None):
    server_bin, bench_bin = shutil.which("redis-server"), shutil.which("redis-benchmark")
    rec = {"workload": w["name"], "alloc": alloc.name, "run": run, "argv": [],
           "wall": 0.0, "rss_kib": 0, "rc": 0, "signal": 0, "result": None, "metrics": {},
           "ok": False, "error": None, "time": 0.0}
    port = free_port()
    tmp = tempfile.mkdtemp(prefix="brisk-redis-")
    argv = [server_bin, "--port", str(port), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--daemonize", "no", "--dir", tmp,
            "--logfile", os.path.join(tmp, "redis.log"), "--unixsocket", ""]
    argv, preload = wrap(argv, alloc.preload(w, ctx["glibc_forward"]), wrapper)
    rec["argv"] = argv
    server = Child(argv, child_env(alloc, run), ctx["timeout"], ctx["spawn"], preload)
    ctx["current"] = server
    errors = []
    try:
        deadline = time.time() + 10
        while True:
            try:
                if redis_command(port, ("PING",), timeout=1.0)[0] == "PONG":
                    break
            except OSError:
                pass
            if not server.running() or time.time() > deadline:
                raise RuntimeError("redis-server did not start")
            time.sleep(0.02)
        benv = dict(os.environ)
        benv.pop("LD_PRELOAD", None)  # the client is not under test
        total = 0.0
        for value in (256, 4096):
            cmd = [bench_bin, "-h", "127.0.0.1", "-p", str(port), "-t", "set,get,lpush,lpop",
                   "-n", str(size), "-P", "16", "-c", "16", "-d", str(value), "-r", "10000",
                   "--csv"]
            b = subprocess.run(cmd, capture_output=True, text=True, env=benv,
                               timeout=ctx["timeout"])
            if b.returncode != 0:
                raise RuntimeError("redis-benchmark failed: " + b.stderr.strip()[-300:])
            rows = list(csv.reader(b.stdout.splitlines()))
            for row in rows:
                if len(row) >= 2 and row[0] != "test":
                    try:
                        rps = float(row[1])
                    except ValueError:
                        continue
                    test = row[0].split()[0].upper()
                    rec["metrics"]["%s.%d" % (test, value)] = {"krps": rps / 1e3}
                    total += size / rps if rps > 0 else 0
        if len(rec["metrics"]) < 8:
            raise RuntimeError("redis-benchmark printed %d results, expected 8"
                               % len(rec["metrics"]))
        if not redis_check(port):
            raise RuntimeError("redis returned wrong data")
        rec["time"] = total
        rec["result"] = {"secs": total, "check": "ok"}
    except (RuntimeError, OSError, subprocess.SubprocessError, ValueError) as e:
        errors.append(str(e))
    finally:
        try:
            if server.running():
                redis_command(port, ("SHUTDOWN", "NOSAVE"), timeout=2.0)
        except (OSError, ValueError):
            pass  # the connection closes as the server exits
        stopped = []
        stopper = threading.Timer(10, lambda: (stopped.append(1), server.kill()))
        stopper.daemon = True
        stopper.start()
        r = server.wait()
        stopper.cancel()
        server.kill()
        ctx["current"] = None
        shutil.rmtree(tmp, ignore_errors=True)
    rec["wall"] = r["wall"]
    rec["rss_kib"] = r["rss_kib"]
    rec["signal"] = r["signal"]
    rec["rc"] = r["rc"]
    if stopped:
        errors.insert(0, "redis-server did not stop on SHUTDOWN; killed")
    elif r["signal"] or r["rc"]:
        errors.insert(0, "redis-server " + failure_text(r))
    if errors:
        rec["error"] = "; ".join(errors)
        rec["stderr_tail"] = r["stderr"][-2000:]
    else:
        rec["ok"] = True
    return rec


def run_one(w, alloc, run, size, ctx, wrapper=None):
    if w.get("kind") == "redis":
        return run_redis(w, alloc, run, size, ctx, wrapper)
    return run_program(w, alloc, run, size, ctx, wrapper)


def workload_available(w, bin_dir):
    if w.get("kind") == "redis":
        missing = [b for b in ("redis-server", "redis-benchmark") if not shutil.which(b)]
        return (False, "needs %s (apt-get install redis-server redis-tools)" % ", ".join(missing)) \
            if missing else (True, None)
    exe = workload_argv(w, bin_dir, 1)[0]
    if os.sep in exe and not os.access(exe, os.X_OK):
        return False, "%s not built (cmake --build build)" % exe
    return True, None
