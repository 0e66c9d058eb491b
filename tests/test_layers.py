#!/usr/bin/env python3
"""src/ is laid out in one folder per layer (docs/DESIGN.md, "Layers"), and
each folder's files use only their own folder and the folders below it:

  - by #include: every header of brisk's is named with its folder
    ("heaps/page.h"), and names one of a folder at or below the includer's;
  - by symbol: every function or variable an object of the library uses
    from another object is defined in a folder at or below the user's (the
    objects of the build's library, read with nm);
  - no two files use each other, directly or around a circle (by #include
    or by symbol);
  - no source file is over 620 lines.

Environment: BRISKTEST_SOURCE_DIR, BRISKTEST_BUILD_DIR (ctest sets both)."""
import glob
import os
import re
import shutil
import subprocess
import sys

# Bottom to top: a folder may use the folders before it.
LAYERS = ["base", "os", "runtime", "profiler", "guarded", "segments", "heaps", "alloc", "api"]
MAX_LINES = 620

src = os.path.join(os.environ["BRISKTEST_SOURCE_DIR"], "src")
build = os.environ["BRISKTEST_BUILD_DIR"]
rank = {f: i for i, f in enumerate(LAYERS)}
failures = []


def fail(msg):
    failures.append(msg)


def strongly_connected(graph):
    """Tarjan's components of more than one node."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(graph):
        if v not in index:
            visit(v)
    return out


# The folders.
folders = sorted(d for d in os.listdir(src) if os.path.isdir(os.path.join(src, d)))
loose = sorted(f for f in os.listdir(src) if os.path.isfile(os.path.join(src, f)))
if loose:
    fail("files outside the layer folders: %s" % " ".join(loose))
for d in folders:
    if d not in rank:
        fail("folder src/%s/ is in no layer (add it to LAYERS here and to DESIGN.md's table)" % d)
for d in LAYERS:
    if d not in folders:
        fail("layer %s has no folder src/%s/" % (d, d))

files = {}  # "heaps/page.h" -> folder
for d in folders:
    for f in os.listdir(os.path.join(src, d)):
        if f.endswith((".c", ".h", ".cpp")):
            files["%s/%s" % (d, f)] = d
bare = {os.path.basename(p): p for p in files}

# Includes.
include_graph = {}
for path, folder in sorted(files.items()):
    text = open(os.path.join(src, path), encoding="utf-8").read()
    lines = text.count("\n")
    if lines > MAX_LINES:
        fail("src/%s has %d lines (at most %d)" % (path, lines, MAX_LINES))
    for inc in re.findall(r'^\s*#\s*include\s+"([^"]+)"', text, re.M):
        if inc in files:
            if rank.get(files[inc], -1) > rank.get(folder, -1):
                fail("src/%s (%s) includes %s, a layer above it" % (path, folder, inc))
            include_graph.setdefault(path, set()).add(inc)
        elif inc in bare:
            fail("src/%s includes \"%s\" without its folder (\"%s\")" % (path, inc, bare[inc]))
for comp in strongly_connected(include_graph):
    fail("files that include each other: %s" % " ".join(comp))

# Symbols, from the objects of the library built here.
nm = shutil.which("nm")
objdir = os.path.join(build, "CMakeFiles", "brisk_objects.dir", "src")
objects = sorted(glob.glob(os.path.join(objdir, "*", "*.o")))
if nm is None:
    fail("nm (binutils) is not installed: the symbol check cannot run")
elif len(objects) < len([p for p in files if not p.endswith(".h")]):
    fail("the library's objects are not all in %s (%d found): build first" % (objdir, len(objects)))
else:
    strong, weak, used = {}, {}, {}
    for o in objects:
        name = "%s/%s" % (os.path.basename(os.path.dirname(o)), os.path.basename(o)[:-2])
        out = subprocess.run([nm, "--defined-only", o], capture_output=True, text=True, check=True).stdout
        for line in out.splitlines():
            parts = line.split()
            if len(parts) != 3:
                continue
            kind, sym = parts[1], parts[2]
            if kind in "TDBRG":
                strong.setdefault(sym, []).append(name)
            elif kind in "VW":
                weak.setdefault(sym, []).append(name)
        out = subprocess.run([nm, "-u", o], capture_output=True, text=True, check=True).stdout
        used[name] = [line.split()[-1] for line in out.splitlines() if line.strip()]
    symbol_graph = {}
    for user, syms in used.items():
        ufolder = user.split("/")[0]
        for sym in syms:
            for definer in strong.get(sym, []):
                dfolder = definer.split("/")[0]
                if rank[dfolder] > rank[ufolder]:
                    fail("%s (%s) uses %s of %s, a layer above it" % (user, ufolder, sym, definer))
                symbol_graph.setdefault(user, set()).add(definer)
    for comp in strongly_connected(symbol_graph):
        fail("objects that use each other's symbols: %s" % " ".join(comp))
    print("test_layers: %d objects, %d uses of one object by another" %
          (len(objects), sum(len(v) for v in symbol_graph.values())))

print("test_layers: %d files in %d folders: %s" % (len(files), len(folders), " < ".join(LAYERS)))
for f in failures:
    print("test_layers: FAIL: " + f)
sys.exit(1 if failures else 0)
