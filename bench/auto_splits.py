"""Method "auto" on the shared sets' test20 splits (bench/results/auto.md).

For each set and split: a fit with "method": "auto" (async false, budget_s)
on the training rows, then each candidate its leaderboard validated, fitted
alone (its default options, no validation) on the same rows; every model
predicts the test rows (include_noise, the default) and is scored there:
gaussian NLPD per point from the predictive mean and variance (a Gaussian;
msrfr's mixture is scored by its moments too), bernoulli log loss from
"probability". Prints one line per split and a markdown table of the gaps.

Usage: python3 bench/auto_splits.py URL [--splits 2] [--first 0] [--budget 60]
       [--sets yacht,boston,energy,ionosphere]
(URL: a running gpserve, e.g. http://127.0.0.1:8080; the data from
../shared/datasets or $GPSERVE_DATASETS.) Standard library only.
"""

import argparse
import csv
import json
import math
import os
import sys
import time
import urllib.error
import urllib.request

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.environ.get("GPSERVE_DATASETS",
                      os.path.join(HERE, "..", "..", "shared", "datasets"))
if not os.path.isdir(DATA):
    DATA = "/work/shared/datasets"
BERNOULLI = {"ionosphere", "sonar", "pima", "breast_wisconsin", "spam"}


def post(url, body, timeout=3600):
    req = urllib.request.Request(url, json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def load(name):
    with open(os.path.join(DATA, name + ".csv")) as f:
        rows = list(csv.reader(f))
    head, rows = rows[0], [[float(v) for v in r] for r in rows[1:]]
    yi = head.index("y")
    X = [[v for j, v in enumerate(r) if j != yi] for r in rows]
    y = [r[yi] for r in rows]
    with open(os.path.join(DATA, "splits", name + "_test20.txt")) as f:
        splits = [[int(t) for t in line.split()] for line in f if line.strip()]
    return X, y, splits


def score(url, name, Xte, yte, lik):
    st, p = post(url + "/v1/models/" + name + "/predict", {"X": Xte})
    if st != 200:
        return float("nan")
    total = 0.0
    if lik == "bernoulli":
        for pr, t in zip(p["probability"], yte):
            pr = min(max(pr, 1e-12), 1 - 1e-12)
            total -= math.log(pr if t == 1 else 1 - pr)
    else:
        for m, v, t in zip(p["mean"], p["variance"], yte):
            total += 0.5 * math.log(2 * math.pi * v) + (t - m) ** 2 / (2 * v)
    return total / len(yte)


def run_split(url, ds, k, X, y, test, budget, lik):
    ts = set(test)
    Xtr = [x for i, x in enumerate(X) if i not in ts]
    ytr = [v for i, v in enumerate(y) if i not in ts]
    Xte = [X[i] for i in test]
    yte = [y[i] for i in test]
    base = {"X": Xtr, "y": ytr, "seed": k}
    if lik != "gaussian":
        base["likelihood"] = lik
    name = "bench-auto-%s-%d" % (ds, k)
    t0 = time.monotonic()
    st, m = post(url + "/v1/models",
                 dict(base, name=name, method="auto", budget_s=budget, **{"async": False}))
    auto_s = time.monotonic() - t0
    if st != 201:
        return {"error": m}
    out = {"set": ds, "split": k, "n": len(ytr), "chosen": m["method"], "auto_s": auto_s,
           "auto_test": score(url, name, Xte, yte, lik), "single": {},
           "leaderboard": m["method_info"]["leaderboard"]}
    for c in out["leaderboard"]:
        if c["status"] != "done":
            continue
        sname = "bench-single-%s-%d-%s" % (ds, k, c["method"])
        body = dict(base, name=sname, method=c["method"], validation=False)
        if c.get("options"):
            body["options"] = c["options"]
        t0 = time.monotonic()
        st, _ = post(url + "/v1/models", body)
        secs = time.monotonic() - t0
        if st == 201:
            out["single"][c["method"]] = {"test": score(url, sname, Xte, yte, lik),
                                          "fit_s": secs, "val": c["nlpd"],
                                          "cover95": c.get("coverage_95")}
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--splits", type=int, default=2)
    ap.add_argument("--first", type=int, default=0, help="the first split")
    ap.add_argument("--budget", type=float, default=60)
    ap.add_argument("--sets", default="yacht,boston,energy,ionosphere")
    a = ap.parse_args()
    results = []
    for ds in a.sets.split(","):
        X, y, splits = load(ds)
        lik = "bernoulli" if ds in BERNOULLI else "gaussian"
        for k in range(a.first, min(a.first + a.splits, len(splits))):
            r = run_split(a.url.rstrip("/"), ds, k, X, y, splits[k], a.budget, lik)
            results.append(r)
            print(json.dumps(r), flush=True)
    print("\n| set | split | N | auto's choice | auto test | best single (test) | gap | "
          "auto s (budget %g) | candidates: test (validation), fit s |" % a.budget)
    print("|---|---:|---:|---|---:|---|---:|---:|---|")
    for r in results:
        if "error" in r:
            print("| %s | error: %s |" % (r.get("set"), r["error"]))
            continue
        s = r["single"]
        best = min(s, key=lambda m: s[m]["test"]) if s else None
        gap = r["auto_test"] - s[best]["test"] if best else float("nan")
        cells = "; ".join("%s %.3f (%.3f), %.1f s" % (m, v["test"], v["val"], v["fit_s"])
                          for m, v in s.items())
        skipped = [c["method"] + " " + c["status"] for c in r["leaderboard"]
                   if c["status"] != "done"]
        if skipped:
            cells += "; " + ", ".join(skipped)
        print("| %s | %d | %d | %s | %.3f | %s %.3f | %+.3f | %.1f | %s |" % (
            r["set"], r["split"], r["n"], r["chosen"], r["auto_test"], best,
            s[best]["test"] if best else float("nan"), gap, r["auto_s"], cells))
    return 0


if __name__ == "__main__":
    sys.exit(main())
