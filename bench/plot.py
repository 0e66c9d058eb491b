#!/usr/bin/env python3
"""Charts of a harness run: time and peak-RSS ratios to the reference.

    python3 bench/plot.py bench/results/quick-....json [OUT_STEM]

Writes OUT_STEM-time.png and OUT_STEM-rss.png (default: beside the JSON)
and prints their paths. Needs matplotlib (Debian: python3-matplotlib).
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402


def chart(doc, key, title, ylabel, path):
    ref, aa = doc["reference"], doc.get("aa")
    workloads = [w["name"] for w in doc["workloads"]]
    allocs = [a["name"] for a in doc["allocators"] if a["name"] != ref]
    cells = {(c["workload"], c["alloc"]): c for c in doc["cells"]}
    labels = workloads + ["geomean"]
    fig, ax = plt.subplots(figsize=(max(8, 0.9 * len(labels) + 2), 4.8))
    width = 0.8 / max(1, len(allocs))
    for i, a in enumerate(allocs):
        ys = [cells[(w, a)].get(key) or 0 for w in workloads]
        ys.append(doc["geomean"][a].get(key) or 0)
        xs = [j + (i - (len(allocs) - 1) / 2) * width for j in range(len(labels))]
        ax.bar(xs, ys, width, label=a, hatch="//" if a == aa else None,
               edgecolor="black" if a == aa else None, linewidth=0.5)
    ax.axhline(1.0, color="black", linewidth=0.8)
    check = doc.get("aa_check") or {}
    dev = check.get("time_max_dev" if key == "time_ratio" else "rss_max_dev")
    if dev:
        ax.axhspan(1 - dev, 1 + dev, color="grey", alpha=0.2, label="A/A noise")
    ax.set_yscale("log")
    ticks = [0.125, 0.25, 0.5, 0.67, 0.8, 1, 1.25, 1.5, 2, 3, 4, 8]
    ax.yaxis.set_major_locator(matplotlib.ticker.FixedLocator(ticks))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
    ax.set_xticks(range(len(labels)))
    ax.set_xticklabels(labels, rotation=35, ha="right")
    ax.set_ylabel(ylabel)
    meta = doc["meta"]
    ax.set_title("%s: %s, %d runs, %s" % (title, meta["tier"], meta["runs"], meta["date"]))
    ax.legend(fontsize="small", ncol=min(4, len(allocs) + 1))
    ax.grid(axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    print(path)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    with open(sys.argv[1]) as f:
        doc = json.load(f)
    stem = sys.argv[2] if len(sys.argv) > 2 else os.path.splitext(sys.argv[1])[0]
    ref = doc["reference"]
    chart(doc, "time_ratio", "time / %s" % ref, "median time / %s's (above 1: %s faster)"
          % (ref, ref), stem + "-time.png")
    chart(doc, "rss_ratio", "peak RSS / %s" % ref, "median peak RSS / %s's (above 1: %s smaller)"
          % (ref, ref), stem + "-rss.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
