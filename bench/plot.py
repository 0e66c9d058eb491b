#!/usr/bin/env python3
"""Charts of a harness run: time and peak-RSS ratios to the reference.

    python3 bench/plot.py bench/out/quick-....json [OUT_STEM]
    python3 bench/plot.py bench/out/scaling-....json [OUT_STEM]

Writes OUT_STEM-time.png and OUT_STEM-rss.png (default: beside the JSON)
and prints their paths; for a --scaling run, OUT_STEM-WORKLOAD.png per
workload instead: throughput against threads, one line per allocator.
Needs matplotlib (Debian: python3-matplotlib).
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


def scaling_chart(doc, workload, path):
    ref = doc["reference"]
    counts = doc["threads"][workload]
    cells = {(c["threads"], c["alloc"]): c for c in doc["cells"] if c["workload"] == workload}
    allocs = [a["name"] for a in doc["allocators"]]
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for a in allocs:
        pts = [(t, cells[(t, a)]["mops"]) for t in counts if cells[(t, a)].get("mops")]
        if not pts:
            continue
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=a,
                linewidth=2.2 if a == ref else 1.2, color="black" if a == ref else None,
                zorder=3 if a == ref else 2)
    cpus = doc["meta"].get("cpus")
    if cpus and counts and counts[0] <= cpus < counts[-1]:
        ax.axvline(cpus, color="grey", linestyle="--", linewidth=0.8)
        ax.text(cpus, 0.02, " %d CPUs" % cpus, transform=ax.get_xaxis_transform(),
                color="grey", fontsize="small")
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_locator(matplotlib.ticker.FixedLocator(counts))
    ax.xaxis.set_major_formatter(matplotlib.ticker.FormatStrFormatter("%g"))
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    if len(counts) == 1:
        ax.set_xlim(counts[0] / 1.5, counts[0] * 1.5)
    ax.set_ylim(bottom=0)
    ax.set_xlabel("threads")
    ax.set_ylabel("Mops/s (ops / median secs)")
    meta = doc["meta"]
    ax.set_title("%s: throughput vs threads, %s sizes, %d runs, %s"
                 % (workload, meta.get("size_tier"), meta["runs"], meta["date"]))
    ax.legend(fontsize="small", ncol=min(4, len(allocs)))
    ax.grid(which="both", alpha=0.3)
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
    if doc.get("mode") == "scaling":
        for w in doc["workloads"]:
            if doc["threads"].get(w["name"]):
                scaling_chart(doc, w["name"], "%s-%s.png" % (stem, w["name"]))
        return 0
    chart(doc, "time_ratio", "time / %s" % ref, "median time / %s's (above 1: %s faster)"
          % (ref, ref), stem + "-time.png")
    chart(doc, "rss_ratio", "peak RSS / %s" % ref, "median peak RSS / %s's (above 1: %s smaller)"
          % (ref, ref), stem + "-rss.png")
    return 0


if __name__ == "__main__":
    sys.exit(main())
