#!/usr/bin/python3
"""scikit-learn side of the `exact` benchmark (bench/bench_exact.c).

    /usr/bin/python3 bench/sklearn_exact.py --splits DIR [--quick] [--only TAG,...]

DIR is the folder written by `build/bench/bench_exact --splits-out DIR`
(bench/run.sh does both): configs.tsv lists the configurations (tag, dataset,
scheme, split, max_train, seed) and DIR/<tag>.train.txt / <tag>.test.txt hold
the 0-based CSV data-row indices the C side used. Reading them (instead of
re-implementing the C subsampling generator) guarantees both sides fit the
same rows. Without --splits, the configurations without subsampling are
rebuilt here from the split files and the subsampled ones are skipped.

Per configuration: X standardised by the training mean and population std
(ddof=0, zero std -> 1), as the C core does; GaussianProcessRegressor(
ConstantKernel(1.0)*RBF(ones(d)) + WhiteKernel(1.0), normalize_y=True,
n_restarts_optimizer=0, random_state=0). Reports fit seconds, the LML
(normalize_y=True makes it the LML of the standardised targets), and RMSE and
mean NLPD per test point in original units, with the observation std (the
WhiteKernel noise is part of predict's std).
"""

import argparse
import os
import sys
import time
import warnings

import numpy as np
import sklearn
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Same list as bench_exact.c (used only when no --splits folder is given).
DEFAULT_CONFIGS = [
    # tag, dataset, scheme, split, max_train, quick
    ("concrete", "concrete", "test20", 0, 0, 1),
    ("airfoil", "airfoil", "fold10", 0, 0, 0),
    ("energy", "energy", "test20", 0, 0, 1),
    ("wine_red", "wine_red", "test20", 0, 0, 0),
    ("kin8nm_n2000", "kin8nm", "test20", 0, 2000, 1),
    ("kin8nm_n4000", "kin8nm", "test20", 0, 4000, 0),
    ("power_n2000", "power", "test20", 0, 2000, 0),
    ("power_n4000", "power", "test20", 0, 4000, 0),
]


def datasets_dir():
    env = os.environ.get("GPSERVE_DATASETS")
    if env:
        return env
    return os.path.join(os.path.dirname(REPO), "shared", "datasets")


def read_indices(path):
    with open(path) as f:
        return np.array([int(t) for t in f.read().split()], dtype=int)


def split_from_file(ddir, name, scheme, k, n):
    path = os.path.join(ddir, "splits", "%s_%s.txt" % (name, scheme))
    with open(path) as f:
        text = f.read()
    if scheme == "test20":
        test = np.array([int(t) for t in text.split("\n")[k].split()], dtype=int)
        is_test = np.zeros(n, dtype=bool)
        is_test[test] = True
    elif scheme == "fold10":
        folds = np.array([int(t) for t in text.split()], dtype=int)
        assert folds.size == n, path
        is_test = folds == k
    else:
        raise ValueError("scheme %s" % scheme)
    return np.nonzero(~is_test)[0], np.nonzero(is_test)[0]


def load_configs(splits):
    if splits is None:
        return [dict(tag=c[0], dataset=c[1], scheme=c[2], split=c[3], max_train=c[4],
                     quick=c[5]) for c in DEFAULT_CONFIGS]
    out = []
    with open(os.path.join(splits, "configs.tsv")) as f:
        header = f.readline().rstrip("\n").split("\t")
        for line in f:
            if not line.strip():
                continue
            row = dict(zip(header, line.rstrip("\n").split("\t")))
            for key in ("split", "max_train", "seed", "quick"):
                row[key] = int(row[key])
            out.append(row)
    return out


def column_stats(A):
    mu = A.mean(axis=0)
    sd = A.std(axis=0)
    sd = np.where((sd > 0) & np.isfinite(sd), sd, 1.0)
    return mu, sd


def run(cfg, ddir, splits, cache):
    name = cfg["dataset"]
    if name not in cache:
        data = np.loadtxt(os.path.join(ddir, name + ".csv"), delimiter=",", skiprows=1, ndmin=2)
        cache.clear()
        cache[name] = data
    data = cache[name]
    X, y = data[:, :-1], data[:, -1]
    if splits is not None:
        train = read_indices(os.path.join(splits, cfg["tag"] + ".train.txt"))
        test = read_indices(os.path.join(splits, cfg["tag"] + ".test.txt"))
        if cfg["max_train"] == 0:  # cross-check the C side's split with our own reading
            tr2, te2 = split_from_file(ddir, name, cfg["scheme"], cfg["split"], X.shape[0])
            assert np.array_equal(train, tr2) and np.array_equal(test, te2), cfg["tag"]
    else:
        if cfg["max_train"] > 0:
            return None
        train, test = split_from_file(ddir, name, cfg["scheme"], cfg["split"], X.shape[0])
    mu, sd = column_stats(X[train])
    Xtr, Xte = (X[train] - mu) / sd, (X[test] - mu) / sd
    ytr, yte = y[train], y[test]
    d = X.shape[1]
    kernel = ConstantKernel(1.0) * RBF(np.ones(d)) + WhiteKernel(1.0)
    gpr = GaussianProcessRegressor(kernel=kernel, normalize_y=True, n_restarts_optimizer=0,
                                   random_state=0)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        t0 = time.perf_counter()
        gpr.fit(Xtr, ytr)
        secs = time.perf_counter() - t0
        mean, std = gpr.predict(Xte, return_std=True)
    notes = sorted(set(type(w.message).__name__ for w in caught))
    var = std ** 2
    r = yte - mean
    rmse = float(np.sqrt(np.mean(r ** 2)))
    nlpd = float(np.mean(0.5 * np.log(2 * np.pi * var) + r ** 2 / (2 * var)))
    theta = np.exp(gpr.kernel_.theta)
    return dict(n_train=train.size, n_test=test.size, d=d, secs=secs,
                lml=gpr.log_marginal_likelihood_value_, rmse=rmse, nlpd=nlpd,
                noise=theta[-1], notes=notes)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--splits", help="folder written by bench_exact --splits-out")
    ap.add_argument("--quick", action="store_true", help="the --quick configurations only")
    ap.add_argument("--only", help="comma-separated tags")
    args = ap.parse_args()
    ddir = datasets_dir()
    print("## scikit-learn %s: exact GP (split 0; RMSE and NLPD in original units)\n"
          % sklearn.__version__)
    if not os.path.isdir(os.path.join(ddir, "splits")):
        print("skipped: datasets directory %s not found\n" % ddir)
        return 0
    if args.splits is not None and not os.path.isfile(os.path.join(args.splits, "configs.tsv")):
        print("skipped: %s/configs.tsv not found (run bench_exact --splits-out first)\n"
              % args.splits)
        return 0
    configs = load_configs(args.splits)
    only = set(args.only.split(",")) if args.only else None
    print("Kernel ConstantKernel(1)*RBF(ones(d)) + WhiteKernel(1), normalize_y=True, "
          "n_restarts_optimizer=0, random_state=0; X standardised by training stats "
          "(ddof=0).\n")
    print("| dataset | split | N train | N test | d | fit s | LML (std units) | RMSE | NLPD | "
          "noise (std) | warnings |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    sys.stdout.flush()
    cache = {}
    for cfg in configs:
        if only is not None and cfg["tag"] not in only:
            continue
        if args.quick and not cfg.get("quick", 0):
            continue
        if not os.path.isfile(os.path.join(ddir, cfg["dataset"] + ".csv")):
            print("| %s | skipped: %s.csv not found | | | | | | | | | |" % (cfg["tag"],
                                                                         cfg["dataset"]))
            continue
        print("sklearn_exact: fitting %s..." % cfg["tag"], file=sys.stderr)
        res = run(cfg, ddir, args.splits, cache)
        if res is None:
            print("| %s | skipped: subsampled rows need --splits (bench_exact --splits-out) "
                  "| | | | | | | | | |" % cfg["tag"])
            continue
        print("| %s | %s %d | %d | %d | %d | %.2f | %.3f | %.4g | %.4f | %.3g | %s |" % (
            cfg["tag"], cfg["scheme"], cfg["split"], res["n_train"], res["n_test"], res["d"],
            res["secs"], res["lml"], res["rmse"], res["nlpd"], res["noise"],
            ", ".join(res["notes"])))
        sys.stdout.flush()
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
