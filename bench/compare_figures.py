#!/usr/bin/env python3
"""The figures of bench/compare.sh: reads the markdown outputs
DIR/out.B.SIDE.R (benchmark B, side old or new, round R) and prints one table
per benchmark: every numeric cell of every markdown table, keyed by the
section heading, the row's first cell and the column header, with the median
of the rounds on each side and NEW/OLD. Usage: compare_figures.py DIR THRESHOLD.
Exit status 1 when a figure is worse by more than THRESHOLD."""
import glob
import os
import re
import statistics
import sys

NUM = re.compile(r"^\s*([-+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(.*)$")
TIME_UNIT = re.compile(r"(^|[^a-z/])(s|ms|us|µs|ns|seconds?)\b")


def figures(path):
    """{(heading, row, column): (value, unit text)} of one markdown output."""
    out = {}
    heading, header = "", None
    for line in open(path, encoding="utf-8", errors="replace"):
        line = line.rstrip("\n")
        if line.startswith("#"):
            heading, header = line.lstrip("# ").strip(), None
            continue
        if not line.startswith("|"):
            header = None
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells
            continue
        if all(set(c) <= set("-: ") for c in cells):
            continue
        for col, cell in zip(header[1:], cells[1:]):
            m = NUM.match(cell)
            if m:
                out[(heading, cells[0], col)] = (float(m.group(1)), m.group(2).strip())
    return out


def direction(column, unit):
    """+1: larger is worse (times, ratios to a floor); -1: smaller is worse
    (rates); 0: no verdict."""
    text = (column + " " + unit).lower()
    if "/s" in text or "per s" in text or "throughput" in text:
        return -1
    if "ratio" in text or "/ best" in text or TIME_UNIT.search(text):
        return 1
    return 0


def main():
    d, threshold = sys.argv[1], float(sys.argv[2])
    benches = open(os.path.join(d, "benches"), encoding="utf-8").read().splitlines()
    flagged = 0
    for b, cmd in enumerate(benches, 1):
        sides = {}
        for side in ("old", "new"):
            runs = [figures(p) for p in sorted(glob.glob(os.path.join(d, f"out.{b}.{side}.*")))]
            merged = {}
            for run in runs:
                for key, (v, unit) in run.items():
                    merged.setdefault(key, ([], unit))[0].append(v)
            sides[side] = {k: (statistics.median(v), u) for k, (v, u) in merged.items()}
        print(f"\n## {cmd}\n")
        print("| section | row | figure | OLD | NEW | NEW/OLD | |")
        print("|---|---|---|---:|---:|---:|---|")
        keys = list(sides["old"]) + [k for k in sides["new"] if k not in sides["old"]]
        for key in keys:
            old, new = sides["old"].get(key), sides["new"].get(key)
            fmt = lambda f: "—" if f is None else f"{f[0]:.4g}{(' ' + f[1]) if f[1] else ''}"
            ratio, mark = "", ""
            if old is not None and new is not None and old[0] != 0:
                r = new[0] / old[0]
                ratio = f"{r:.2f}"
                sense = direction(key[2], (old[1] or new[1]))
                if (sense > 0 and r > threshold) or (sense < 0 and r < 1.0 / threshold):
                    mark = "**slower**"
                    flagged += 1
            print(f"| {key[0][:40]} | {key[1]} | {key[2]} | {fmt(old)} | {fmt(new)} | {ratio} | {mark} |")
    print(f"\n{flagged} figure(s) of NEW worse than OLD by more than {threshold}x.")
    return 1 if flagged else 0


if __name__ == "__main__":
    sys.exit(main())
