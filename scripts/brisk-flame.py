#!/usr/bin/env python3
"""A flame graph, as a standalone SVG, from a collapsed-stack file.

    python3 scripts/brisk-flame.py prof.1234.0.collapsed -o memory.svg

Input: one stack per line, "outermost;...;innermost BYTES" (the
.collapsed file of brisk's heap profiler; any file of that shape will do).
Each frame is a box as wide as the bytes of every stack that passes
through it; a box's children stand on it, sorted by name, and the root,
"all", spans the bottom. Hovering over a box shows its name, bytes and
share of the total.

Frames that brisk could not name from the loader's symbol tables are
written FILE+0xADDRESS; they are named here with addr2line (binutils) when
it is installed and the file is still there, and otherwise shown as
basename+0xADDRESS.
"""
import argparse
import html
import os
import re
import shutil
import subprocess
import sys
import zlib

FRAME_AT = re.compile(r"^(?P<file>/.*)\+0x(?P<addr>[0-9a-fA-F]+)$")


class Node:
    __slots__ = ("name", "bytes", "children")

    def __init__(self, name):
        self.name = name
        self.bytes = 0
        self.children = {}

    def child(self, name):
        node = self.children.get(name)
        if node is None:
            node = self.children[name] = Node(name)
        return node


def read_collapsed(lines):
    """[(frames, bytes)] from collapsed lines; bad lines raise ValueError
    naming the line."""
    stacks = []
    for number, line in enumerate(lines, 1):
        line = line.rstrip("\n")
        if not line.strip():
            continue
        stack, _, count = line.rpartition(" ")
        if not stack or not re.fullmatch(r"\d+", count):
            raise ValueError("line %d is not 'frame;frame;... bytes': %r" % (number, line[:120]))
        stacks.append((stack.split(";"), int(count)))
    return stacks


def addr2line_names(stacks):
    """{FILE+0xADDR: function} for the frames addr2line can name."""
    wanted = {}
    for frames, _ in stacks:
        for f in frames:
            m = FRAME_AT.match(f)
            if m and os.path.exists(m.group("file")):
                wanted.setdefault(m.group("file"), set()).add(m.group("addr"))
    names = {}
    tool = shutil.which("addr2line")
    if tool is None:
        return names
    for path, addrs in wanted.items():
        addrs = sorted(addrs)
        try:
            out = subprocess.run([tool, "-f", "-C", "-e", path] + ["0x" + a for a in addrs],
                                 capture_output=True, text=True, timeout=60).stdout.splitlines()
        except (OSError, subprocess.SubprocessError):
            continue
        # two lines per address: the function, then file:line
        for addr, fn in zip(addrs, out[0::2]):
            if fn and fn != "??":
                names["%s+0x%s" % (path, addr)] = fn
    return names


def short_name(frame, names):
    if frame in names:
        return names[frame]
    m = FRAME_AT.match(frame)
    if m:
        return "%s+0x%s" % (os.path.basename(m.group("file")), m.group("addr"))
    return frame


def build_tree(stacks, names):
    root = Node("all")
    for frames, count in stacks:
        root.bytes += count
        node = root
        for f in frames:
            node = node.child(short_name(f, names))
            node.bytes += count
    return root


def human(n):
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if n < 1024 or unit == "TiB":
            return ("%d %s" % (n, unit)) if unit == "B" else ("%.1f %s" % (n, unit))
        n /= 1024.0


def color(name):
    """A stable colour per name: greens to blues (memory, not CPU time)."""
    h = zlib.crc32(name.encode("utf-8", "replace"))
    r = 40 + h % 60
    g = 140 + (h >> 8) % 80
    b = 110 + (h >> 16) % 120
    return "rgb(%d,%d,%d)" % (r, g, b)


def layout(root, width, min_width):
    """[(node, depth, x, w)] for every box at least min_width wide."""
    boxes = []
    scale = width / root.bytes if root.bytes else 0.0

    def place(node, depth, x):
        w = node.bytes * scale
        if w < min_width:
            return
        boxes.append((node, depth, x, w))
        cx = x
        for name in sorted(node.children):
            child = node.children[name]
            place(child, depth + 1, cx)
            cx += child.bytes * scale

    place(root, 0, 0.0)
    return boxes


def render(root, title, width=1200, frame_height=17, min_width=0.3, font_size=11):
    pad, top = 10, 44
    boxes = layout(root, width - 2 * pad, min_width)
    depth = max((d for _, d, _, _ in boxes), default=0) + 1
    height = top + depth * frame_height + 30
    char_w = font_size * 0.59
    out = []
    out.append('<?xml version="1.0" encoding="UTF-8" standalone="no"?>')
    out.append('<svg xmlns="http://www.w3.org/2000/svg" version="1.1" width="%d" height="%d" '
               'viewBox="0 0 %d %d" font-family="Verdana, sans-serif" font-size="%d">'
               % (width, height, width, height, font_size))
    out.append('<rect x="0" y="0" width="%d" height="%d" fill="#f8f8f4"/>' % (width, height))
    out.append('<text x="%d" y="22" font-size="%d" text-anchor="middle">%s</text>'
               % (width // 2, font_size + 5, html.escape(title)))
    out.append('<text x="%d" y="38" fill="#555" text-anchor="middle">%s in use; width: bytes, '
               'bottom to top: callers to callees</text>' % (width // 2, html.escape(human(root.bytes))))
    total = root.bytes or 1
    for node, d, x, w in boxes:
        y = height - 30 - (d + 1) * frame_height
        label = "%s (%s, %.1f%%)" % (node.name, human(node.bytes), 100.0 * node.bytes / total)
        out.append('<g><title>%s</title>' % html.escape(label))
        out.append('<rect x="%.2f" y="%d" width="%.2f" height="%d" rx="2" fill="%s" stroke="#f8f8f4" '
                   'stroke-width="0.5"/>' % (pad + x, y, w, frame_height - 1, color(node.name)))
        fits = int((w - 6) / char_w)
        if fits >= 3:
            text = node.name if len(node.name) <= fits else node.name[:fits - 2] + ".."
            out.append('<text x="%.2f" y="%d">%s</text>' % (pad + x + 3, y + frame_height - 5,
                                                             html.escape(text)))
        out.append('</g>')
    out.append('</svg>')
    return "\n".join(out) + "\n"


def main(argv=None):
    p = argparse.ArgumentParser(description="flame graph (SVG) from collapsed stacks")
    p.add_argument("collapsed", help="the .collapsed file ('-': standard input)")
    p.add_argument("-o", "--output", help="the SVG file (default: standard output)")
    p.add_argument("--title", default="Memory in use by stack")
    p.add_argument("--width", type=int, default=1200)
    p.add_argument("--no-addr2line", action="store_true",
                   help="leave FILE+0xADDRESS frames unnamed")
    args = p.parse_args(argv)
    try:
        if args.collapsed == "-":
            stacks = read_collapsed(sys.stdin)
        else:
            with open(args.collapsed, encoding="utf-8", errors="replace") as f:
                stacks = read_collapsed(f)
    except (OSError, ValueError) as e:
        print("brisk-flame: error: %s: %s" % (args.collapsed, e), file=sys.stderr)
        return 1
    if args.width < 200:
        print("brisk-flame: error: --width %d: at least 200 pixels" % args.width, file=sys.stderr)
        return 1
    names = {} if args.no_addr2line else addr2line_names(stacks)
    svg = render(build_tree(stacks, names), args.title, args.width)
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(svg)
    else:
        sys.stdout.write(svg)
    return 0


if __name__ == "__main__":
    sys.exit(main())
