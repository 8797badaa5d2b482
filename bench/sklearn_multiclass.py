#!/usr/bin/python3
"""Peer side of the multiclass benchmark (bench/experiments/multiclass.json).

    /usr/bin/python3 bench/sklearn_multiclass.py [--jsonl] [--datasets a,b]
        [--n-splits S] [--digits-splits S] [--digits-ovo-splits S] [--peers ovr,ovo]
    /usr/bin/python3 bench/sklearn_multiclass.py --verdict FILE.jsonl

--verdict: no fits; from gpbench's lines of bench/experiments/multiclass.json
(its peers' lines included, "peer" set) the comparison of every svgp row with
the peers of that run, the fit-time ratios and the verdict against issue 35's
targets: log loss below GPC's (one-vs-rest: the only one with probabilities),
accuracy within 1 point of the better GPC, fit >= 5x faster than the faster
GPC (ratios of mean fit seconds, both from the same run).

Rows: the seeded 80/20 splits of bench/data/splits/<name>_test20.txt
(bench/multiclass_splits.py; seed 3500 + k), the same file gpbench reads.
Peers: scikit-learn's GaussianProcessClassifier (Laplace per binary problem)
with multi_class="one_vs_rest" and "one_vs_one", kernel ConstantKernel(1) *
RBF(ones(d)) (ARD), n_restarts_optimizer=0, random_state=0, inputs
standardised with the training mean and population std (a constant training
column left as is). digits (d = 64): ARD makes sklearn build the N x N x 65
gradient tensor per class and evaluation, so there GPC takes one isotropic
length scale, ConstantKernel(1) * RBF(1.0), and one-vs-rest runs the first
--digits-splits splits, one-vs-one the first --digits-ovo-splits (default:
--digits-splits; both default to all --n-splits). one_vs_one has no predict_proba in
scikit-learn (its classes are voted), so its lines carry accuracy and fit time
but no log loss.

Scores: accuracy (% argmax of the probabilities = sklearn's predict), mean
log loss of the true class's probability clipped to [1e-15, 1]; fit s = wall
time of fit(). --jsonl: one JSON line per fit (what gpbench reads as the
experiment's peer), else a markdown table, mean ± std (ddof 0) over splits.
"""

import argparse
import json
import os
import sys
import time
import warnings

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SETS = ["wine_classes", "digits"]
ISOTROPIC = {"digits"}  # GPC with one length scale there (see above)
CLIP = 1e-15
PEERS = {
    "ovr": ("GPC one-vs-rest (sklearn)", "one_vs_rest"),
    "ovo": ("GPC one-vs-one (sklearn)", "one_vs_one"),
}


def datasets_dir():
    env = os.environ.get("GPSERVE_DATASETS")
    if env:
        return env
    return os.path.join(os.path.dirname(REPO), "shared", "datasets")


def split_rows(name, k, n):
    path = os.path.join(REPO, "bench", "data", "splits", "%s_test20.txt" % name)
    with open(path) as f:
        test = np.array([int(t) for t in f.read().split("\n")[k].split()], dtype=int)
    is_test = np.zeros(n, dtype=bool)
    is_test[test] = True
    return np.nonzero(~is_test)[0], np.nonzero(is_test)[0]


def standardise(X, train, test):
    mu, sd = X[train].mean(axis=0), X[train].std(axis=0)
    sd = np.where((sd > 0) & np.isfinite(sd), sd, 1.0)
    return (X[train] - mu) / sd, (X[test] - mu) / sd


def scores(y, classes, proba, labels):
    out = dict(accuracy=100.0 * float(np.mean(labels == y)))
    if proba is not None:
        idx = np.searchsorted(classes, y)
        p = np.clip(proba[np.arange(y.size), idx], CLIP, 1.0)
        out["log_loss"] = float(-np.mean(np.log(p)))
        out["accuracy"] = 100.0 * float(np.mean(classes[np.argmax(proba, axis=1)] == y))
    return out


def fit_gpc(multi_class, iso, Xtr, ytr, Xte):
    from sklearn.gaussian_process import GaussianProcessClassifier
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel
    ls = 1.0 if iso else np.ones(Xtr.shape[1])
    gpc = GaussianProcessClassifier(ConstantKernel(1.0) * RBF(ls), n_restarts_optimizer=0,
                                    random_state=0, multi_class=multi_class)
    t0 = time.perf_counter()
    gpc.fit(Xtr, ytr)
    secs = time.perf_counter() - t0
    proba = gpc.predict_proba(Xte) if multi_class == "one_vs_rest" else None
    return gpc.classes_, proba, gpc.predict(Xte), secs


def run(args, names):
    ddir = datasets_dir()
    for name in names:
        data = np.loadtxt(os.path.join(ddir, name + ".csv"), delimiter=",", skiprows=1,
                          ndmin=2)
        X, y = data[:, :-1], data[:, -1]
        iso = name in ISOTROPIC
        for key in args.peers:
            label, multi_class = PEERS[key]
            n_splits = args.n_splits
            cap = args.digits_ovo_splits if key == "ovo" else None
            cap = cap if cap is not None else args.digits_splits
            if name == "digits" and cap is not None:
                n_splits = min(n_splits, cap)
            for k in range(n_splits):
                train, test = split_rows(name, k, X.shape[0])
                Xtr, Xte = standardise(X, train, test)
                print("sklearn_multiclass: %s %s split %d..." % (name, label, k),
                      file=sys.stderr, flush=True)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    classes, proba, labels, secs = fit_gpc(multi_class, iso, Xtr, y[train], Xte)
                line = dict(dataset=name, method=label, label=label, ok=True, split=k,
                            seconds=secs, kernel="rbf iso" if iso else "rbf ARD",
                            n_train=int(train.size), n_test=int(test.size))
                line.update(scores(y[test], classes, proba, labels))
                yield line


def ms(vals, fmt):
    v = np.array(vals, dtype=float)
    return (fmt + " ± " + fmt) % (v.mean(), v.std()) if v.size else "—"


def print_table(lines):
    import sklearn
    print("## Peers: scikit-learn %s\n" % sklearn.__version__)
    print("| dataset | method | kernel | accuracy % | log loss | fit s | splits |")
    print("|---|---|---|---:|---:|---:|---:|")
    groups = {}
    for r in lines:
        groups.setdefault((r["dataset"], r["label"], r["kernel"]), []).append(r)
    for (name, label, kernel), rows in groups.items():
        ll = [r["log_loss"] for r in rows if "log_loss" in r]
        print("| %s | %s | %s | %s | %s | %s | %d |" % (
            name, label, kernel, ms([r["accuracy"] for r in rows], "%.2f"),
            ms(ll, "%.4f") if ll else "— (no predict_proba)",
            ms([r["seconds"] for r in rows], "%.2f"), len(rows)))


def read_lines(path):
    gp, peers = {}, {}
    with open(path) as f:
        for line in f:
            r = json.loads(line) if line.strip() else None
            if not r or not r.get("ok"):
                continue
            side = peers if "peer" in r else gp
            side.setdefault((r["dataset"], r["label"]), []).append(r)
    return gp, peers


def mean(rows, key):
    v = [r[key] for r in rows if r.get(key) is not None]
    return float(np.mean(v)) if v else float("nan")


def met(ok):
    return "**met**" if ok else "**not met**"


def on_splits(rows, peer_rows):
    """rows restricted to the splits the peer fitted: each comparison on common rows."""
    have = {r["split"] for r in peer_rows}
    return [r for r in rows if r["split"] in have]


def verdict_row(name, label, rows, peers):
    ovr = peers.get((name, PEERS["ovr"][0]), [])
    ovo = peers.get((name, PEERS["ovo"][0]), [])
    a, b = on_splits(rows, ovr), on_splits(rows, ovo)
    r_ovr = mean(ovr, "seconds") / mean(a, "seconds")
    r_ovo = mean(ovo, "seconds") / mean(b, "seconds")
    ll, pll = mean(a, "log_loss"), mean(ovr, "log_loss")
    acc_ovr, acc_ovo = mean(a, "accuracy"), mean(b, "accuracy")
    ll_ok = ll < pll
    acc_ok = (acc_ovr >= mean(ovr, "accuracy") - 1.0) and (acc_ovo >= mean(ovo, "accuracy") - 1.0)
    fit_ok = min(r_ovr, r_ovo) >= 5.0
    print("| %s | %s | %.4f vs %.4f: %s | %.2f vs %.2f (OvR), %.2f vs %.2f (OvO): %s "
          "| %.3g× OvR, %.3g× OvO: %s | %d, %d |" % (
              name, label, ll, pll, met(ll_ok), acc_ovr, mean(ovr, "accuracy"), acc_ovo,
              mean(ovo, "accuracy"), met(acc_ok), r_ovr, r_ovo, met(fit_ok), len(a), len(b)))
    return ll_ok and acc_ok and fit_ok


def print_verdict(path):
    gp, peers = read_lines(path)
    print("## Verdict against issue 35's targets\n")
    print("Each comparison on the splits the peer fitted (svgp's lines of the other splits "
          "left out): log loss below GPC one-vs-rest's (one-vs-one gives no probabilities); "
          "accuracy at least each GPC's minus 1 point; fit ratio = GPC's mean fit s / "
          "svgp's on the same splits (> 1: svgp faster), the target >= 5x against both.\n")
    print("| dataset | svgp row | log loss (svgp vs OvR) | accuracy % (svgp vs GPC) "
          "| fit ratio | splits (OvR, OvO) |")
    print("|---|---|---|---|---|---:|")
    for (name, label), rows in gp.items():
        if (name, PEERS["ovr"][0]) in peers:
            verdict_row(name, label, rows, peers)
    print()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--jsonl", action="store_true", help="one JSON line per fit")
    ap.add_argument("--datasets", help="comma-separated subset of %s" % ",".join(SETS))
    ap.add_argument("--n-splits", type=int, default=10, help="splits per dataset (1..10)")
    ap.add_argument("--digits-splits", type=int, help="at most this many splits of digits")
    ap.add_argument("--digits-ovo-splits", type=int,
                    help="one-vs-one's cap on digits (default --digits-splits)")
    ap.add_argument("--peers", default="ovr,ovo", help="ovr, ovo (comma-separated)")
    ap.add_argument("--verdict", metavar="FILE.jsonl", help="gpbench's lines: the verdict")
    args = ap.parse_args()
    if args.verdict:
        print_verdict(args.verdict)
        return 0
    names = [n for n in (args.datasets or ",".join(SETS)).split(",") if n]
    args.peers = [p for p in args.peers.split(",") if p]
    if [n for n in names if n not in SETS] or [p for p in args.peers if p not in PEERS]:
        ap.error("unknown dataset or peer")
    if not 1 <= args.n_splits <= 10:
        ap.error("--n-splits must be in 1..10")
    if args.jsonl:
        for line in run(args, names):
            print(json.dumps(line), flush=True)
        return 0
    print_table(list(run(args, names)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
