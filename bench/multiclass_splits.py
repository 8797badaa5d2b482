#!/usr/bin/python3
"""Write the seeded 80/20 splits of the multiclass sets (bench/experiments/multiclass.json).

    /usr/bin/python3 bench/multiclass_splits.py [--out bench/data/splits] [--check]

The shared datasets wine_classes.csv and digits.csv come without split files
(../shared/datasets/README.md, "Multiclass datasets"). Split k of a set of N
rows: numpy.random.default_rng(SEED + k).permutation(N), its first
floor(0.2 N) entries the test rows (written ascending); SEED = 3500, k = 0..9.
The output is the test20 format (line k: split k's test rows, 0-based,
space-separated), which gpbench reads through a dataset's "split_file" and
bench/sklearn_multiclass.py reads too, so both fit the same rows. The files
are committed; --check regenerates them in memory and exits 1 when a
committed file differs (numpy's PCG64 stream is stable across versions).
"""

import argparse
import os
import sys

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETS = {"wine_classes": 178, "digits": 1797}
SEED = 3500
SPLITS = 10
TEST_FRACTION = 0.2


def split_lines(n):
    lines = []
    for k in range(SPLITS):
        perm = np.random.default_rng(SEED + k).permutation(n)
        test = np.sort(perm[: int(np.floor(TEST_FRACTION * n))])
        lines.append(" ".join(str(int(i)) for i in test))
    return "\n".join(lines) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=os.path.join(REPO, "bench", "data", "splits"))
    ap.add_argument("--check", action="store_true", help="compare with the committed files")
    args = ap.parse_args()
    bad = 0
    for name, n in SETS.items():
        path = os.path.join(args.out, "%s_test20.txt" % name)
        text = split_lines(n)
        if args.check:
            with open(path) as f:
                same = f.read() == text
            print("%s: %s" % (path, "same" if same else "DIFFERS"))
            bad += not same
            continue
        os.makedirs(args.out, exist_ok=True)
        with open(path, "w") as f:
            f.write(text)
        print("wrote %s (%d splits, %d test rows of %d)" % (
            path, SPLITS, int(np.floor(TEST_FRACTION * n)), n))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
