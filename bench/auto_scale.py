"""Method "auto" at 5 000-50 000 rows (bench/results/auto.md, "Budgets at scale").

Two measurements on the shared sets' first test20 split (its training rows):

  times URL --sets kin8nm,power --methods sgpr,ssgp --rows 5000,20000
      one fit of each method alone (validation false, its default options)
      on the first ROWS training rows: wall clock and the model's own
      fit_seconds, to set the rule table's estimates (core/model/auto.c).
  spread URL --sets kin8nm --rows 5000 --methods sgpr,ssgp
      the models `times` left, scored on the split's test rows: the mean and
      the standard deviation of one row's NLPD, and of the per-row difference
      of the first method against each other one (the standard error of a
      hold-out of h rows is that sd / sqrt(h): GP_AUTO_HOLDOUT_MIN_ROWS).
  auto URL --budget 60 --sets kin8nm,power
      one auto fit (async false) per set: the client's wall clock, the
      daemon's method_info.auto (seconds, within_budget, final_fit,
      validation), each candidate's status, estimate, seconds and reason,
      and the chosen model's test NLPD (log loss for bernoulli).

URL: a running gpserve built from this tree, e.g. build/gpserve --port 18440
--db /tmp/scale.db. Data from ../shared/datasets or $GPSERVE_DATASETS.
Standard library only; one JSON line per fit, then a markdown table.
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
LIKELIHOOD = {"spam": "bernoulli", "ionosphere": "bernoulli", "sonar": "bernoulli",
              "pima": "bernoulli", "breast_wisconsin": "bernoulli",
              "doctor_visits": "poisson"}


def post(url, body, timeout=7200):
    req = urllib.request.Request(url, json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def load(name):
    """The first test20 split: training X, y and test X, y."""
    with open(os.path.join(DATA, name + ".csv")) as f:
        rows = list(csv.reader(f))
    head, rows = rows[0], [[float(v) for v in r] for r in rows[1:]]
    yi = head.index("y")
    X = [[v for j, v in enumerate(r) if j != yi] for r in rows]
    y = [r[yi] for r in rows]
    with open(os.path.join(DATA, "splits", name + "_test20.txt")) as f:
        test = set(int(t) for t in f.readline().split())
    tr = [i for i in range(len(y)) if i not in test]
    te = sorted(test)
    return [X[i] for i in tr], [y[i] for i in tr], [X[i] for i in te], [y[i] for i in te]


def score(url, name, Xte, yte, lik):
    st, p = post(url + "/v1/models/" + name + "/predict", {"X": Xte})
    if st != 200:
        return float("nan")
    total = 0.0
    if lik == "bernoulli":
        for pr, t in zip(p["probability"], yte):
            pr = min(max(pr, 1e-12), 1 - 1e-12)
            total -= math.log(pr if t == 1 else 1 - pr)
    elif lik == "gaussian":
        for m, v, t in zip(p["mean"], p["variance"], yte):
            total += 0.5 * math.log(2 * math.pi * v) + (t - m) ** 2 / (2 * v)
    else:
        return float("nan")
    return total / len(yte)


def per_row_nlpd(url, name, Xte, yte):
    st, p = post(url + "/v1/models/" + name + "/predict", {"X": Xte})
    if st != 200:
        return None
    return [0.5 * math.log(2 * math.pi * v) + (t - m) ** 2 / (2 * v)
            for m, v, t in zip(p["mean"], p["variance"], yte)]


def mean_sd(v):
    m = sum(v) / len(v)
    return m, math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1))


def spread(a):
    for ds in a.sets.split(","):
        _, _, Xte, yte = load(ds)
        n = int(a.rows.split(",")[0])
        ms = a.methods.split(",")
        rows = {m: per_row_nlpd(a.url, "scale-t-%s-%d-%s" % (ds, n, m), Xte, yte) for m in ms}
        for m in ms:
            if rows[m] is None:
                print("%s %s: no model" % (ds, m))
                continue
            mu, sd = mean_sd(rows[m])
            print("%s n=%d %s: test rows %d, NLPD mean %.3f, per-row sd %.3f" % (
                ds, n, m, len(yte), mu, sd))
            if m != ms[0] and rows[ms[0]] is not None:
                d = [x - y for x, y in zip(rows[m], rows[ms[0]])]
                mu, sd = mean_sd(d)
                print("%s n=%d %s - %s: difference mean %.3f, per-row sd %.3f; "
                      "se at 400 held-out rows %.4f" % (ds, n, m, ms[0], mu, sd,
                                                        sd / math.sqrt(400)))


def body(ds, X, y, **kw):
    b = {"X": X, "y": y, "seed": 0}
    lik = LIKELIHOOD.get(ds, "gaussian")
    if lik != "gaussian":
        b["likelihood"] = lik
    b.update(kw)
    return b


def times(a):
    rows = []
    for ds in a.sets.split(","):
        Xtr, ytr, _, _ = load(ds)
        for n in [int(v) for v in a.rows.split(",")]:
            if n > len(ytr):
                continue
            for m in a.methods.split(","):
                name = "scale-t-%s-%d-%s" % (ds, n, m)
                t0 = time.monotonic()
                st, r = post(a.url + "/v1/models",
                             body(ds, Xtr[:n], ytr[:n], name=name, method=m, validation=False))
                wall = time.monotonic() - t0
                fit_s = (r.get("diagnostics") or {}).get("fit_seconds") if st == 201 else None
                row = {"set": ds, "n": n, "method": m, "status": st, "wall_s": wall,
                       "fit_s": fit_s, "error": None if st == 201 else r.get("error")}
                rows.append(row)
                print(json.dumps(row), flush=True)
    print("\n| set | rows | method | fit s (model) | wall s |")
    print("|---|---:|---|---:|---:|")
    for r in rows:
        print("| %s | %d | %s | %s | %.1f |" % (
            r["set"], r["n"], r["method"],
            "%.1f" % r["fit_s"] if r["fit_s"] is not None else "error %s" % r["status"],
            r["wall_s"]))


def auto(a):
    rows = []
    for ds in a.sets.split(","):
        Xtr, ytr, Xte, yte = load(ds)
        name = "scale-a-%s-%g" % (ds, a.budget)
        t0 = time.monotonic()
        st, m = post(a.url + "/v1/models",
                     body(ds, Xtr, ytr, name=name, method="auto", budget_s=a.budget,
                          **{"async": False}))
        wall = time.monotonic() - t0
        row = {"set": ds, "n": len(ytr), "budget": a.budget, "status": st, "wall_s": wall}
        if st == 201:
            mi = m["method_info"]
            row.update(chosen=m["method"], auto=mi["auto"],
                       test=score(a.url, name, Xte, yte, LIKELIHOOD.get(ds, "gaussian")),
                       leaderboard=[{k: c.get(k) for k in ("method", "status",
                                                           "estimated_seconds", "seconds",
                                                           "nlpd", "reason")}
                                    for c in mi["leaderboard"]])
        else:
            row["error"] = m.get("error")
        rows.append(row)
        print(json.dumps(row), flush=True)
    print("\n| set | rows | budget s | auto s (daemon; client) | inside | chosen | test | "
          "candidates: status, estimated s / took s |")
    print("|---|---:|---:|---:|---|---|---:|---|")
    for r in rows:
        if r["status"] != 201:
            print("| %s | %d | %g | - | - | %s | - | %s |" % (
                r["set"], r["n"], r["budget"], "error %d" % r["status"],
                (r.get("error") or {}).get("message", "")))
            continue
        cells = "; ".join("%s %s, %.0f/%s" % (
            c["method"], c["status"], c["estimated_seconds"] or 0,
            "%.0f" % c["seconds"] if c.get("seconds") is not None else "-")
            for c in r["leaderboard"])
        print("| %s | %d | %g | %.1f; %.1f | %s | %s | %.3f | %s |" % (
            r["set"], r["n"], r["budget"], r["auto"]["seconds"], r["wall_s"],
            "yes" if r["auto"]["within_budget"] else "no", r["chosen"], r["test"], cells))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("what", choices=["times", "auto", "spread"])
    ap.add_argument("url")
    ap.add_argument("--sets", default="kin8nm,power,naval,protein,spam,doctor_visits")
    ap.add_argument("--methods", default="sgpr,ssgp,svgp,pls,gwi")
    ap.add_argument("--rows", default="5000,20000")
    ap.add_argument("--budget", type=float, default=60)
    a = ap.parse_args()
    a.url = a.url.rstrip("/")
    {"times": times, "auto": auto, "spread": spread}[a.what](a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
