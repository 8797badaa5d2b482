#!/usr/bin/python3
"""Method "auto" on the shared sets' test20 splits (bench/results/auto.md).

For each set and split: a fit with "method": "auto" (async false, budget_s)
on the training rows; then each candidate its leaderboard validated, fitted
alone (its default options, no validation: the request auto's final fit
makes) on the same rows; then scikit-learn's GP (GaussianProcessRegressor or
GaussianProcessClassifier, the recipes of bench/sklearn_exact.py and
bench/sklearn_classification.py) in the same process. Every model predicts
the test rows and is scored there:
  gaussian   NLPD per point of y from the predictive mean and variance (a
             Gaussian; msrfr's mixture by its moments), RMSE, and the coverage
             of the 95 % interval (the share of test y inside the predicted
             0.025 and 0.975 quantiles: msrfr's are its mixture's);
  bernoulli  log loss from "probability" (clipped to [1e-12, 1 - 1e-12]) and
             accuracy (threshold 0.5);
  poisson    the count log predictive -log E_f Poisson(y | exp f) with f the
             latent N(latent_mean, latent_variance) (32-point Gauss-Hermite),
             RMSE of count_mean, and the 95 % coverage of the count quantiles.
scikit-learn has no count GP: doctor_visits has no peer column. Above
--sklearn-max training rows scikit-learn fits a seeded subset of that many rows
(its N x N x d gradient tensor: spam's ARD GPC on 3681 rows took 19 GB);
GPC on more than 40 inputs uses one length scale (as classification.md's spam).

Usage: /usr/bin/python3 bench/auto_splits.py URL --out FILE.jsonl
          [--sets all|a,b] [--splits 5] [--first 0] [--budget 60]
          [--budget-large 300 --large-n 2000] [--no-sklearn] [--sklearn-max 2000]
       /usr/bin/python3 bench/auto_splits.py URL --fill FILE.jsonl [--sets a,b] [--fill-cap 900]
       /usr/bin/python3 bench/auto_splits.py --table FILE.jsonl [FILE2.jsonl ...]
--fill fits alone, as async jobs cancelled past --fill-cap seconds, every candidate
auto listed but did not validate (skipped for its estimate, or stopped at the
budget), so "the best single method in hindsight" is over the whole rule table.
(URL: a running gpserve, e.g. http://127.0.0.1:8080; the data from
../shared/datasets or $GPSERVE_DATASETS.) --out appends one JSON line per split
and skips the splits a line already holds, so a run can be resumed. numpy and
scikit-learn only for the peer column (make bench-deps).
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

# Every shared set with test20 splits, its likelihood, in the order they run
# (small first: a partial run still covers the most sets).
SETS = [("yacht", "gaussian"), ("boston", "gaussian"), ("energy", "gaussian"),
        ("concrete", "gaussian"), ("wine_red", "gaussian"),
        ("sonar", "bernoulli"), ("ionosphere", "bernoulli"), ("breast_wisconsin", "bernoulli"),
        ("pima", "bernoulli"), ("spam", "bernoulli"), ("doctor_visits", "poisson"),
        ("kin8nm", "gaussian"), ("power", "gaussian"), ("naval", "gaussian"),
        ("protein", "gaussian")]
LIK = dict(SETS)
Q = [0.025, 0.975]


def post(url, body, timeout=7200):
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


_GH = None


def gauss_hermite():
    global _GH
    if _GH is None:
        import numpy as np
        x, w = np.polynomial.hermite.hermgauss(32)
        _GH = (list(x * math.sqrt(2.0)), list(w / math.sqrt(math.pi)))
    return _GH


def poisson_logpred(y, m, v):
    xs, ws = gauss_hermite()
    s = math.sqrt(max(v, 0.0))
    terms = []
    for x, w in zip(xs, ws):
        f = m + s * x
        terms.append(math.log(w) + y * f - math.exp(min(f, 700.0)) - math.lgamma(y + 1.0))
    top = max(terms)
    return top + math.log(sum(math.exp(t - top) for t in terms))


def scores(lik, yte, mean, var, lo=None, hi=None, prob=None, lat=None):
    """Test scores of one model: nlpd (log loss for bernoulli), rmse or accuracy, cover95."""
    n = len(yte)
    out = {}
    if lik == "bernoulli":
        ll, ok = 0.0, 0
        for pr, t in zip(prob, yte):
            ok += (pr >= 0.5) == (t == 1)
            pr = min(max(pr, 1e-12), 1 - 1e-12)
            ll -= math.log(pr if t == 1 else 1 - pr)
        return {"nlpd": ll / n, "accuracy": ok / n}
    if lik == "poisson":
        out["nlpd"] = -sum(poisson_logpred(t, m, v) for t, m, v in zip(yte, *lat)) / n
    else:
        out["nlpd"] = sum(0.5 * math.log(2 * math.pi * v) + (t - m) ** 2 / (2 * v)
                          for m, v, t in zip(mean, var, yte)) / n
    out["rmse"] = math.sqrt(sum((t - m) ** 2 for m, t in zip(mean, yte)) / n)
    if lo is not None:
        out["cover95"] = sum(1 for a, b, t in zip(lo, hi, yte) if a <= t <= b) / n
    return out


def score_model(url, name, Xte, yte, lik):
    body = {"X": Xte}
    if lik != "bernoulli":
        body["quantiles"] = Q
    st, p = post(url + "/v1/models/" + name + "/predict", body)
    if st != 200:
        return {"error": p}
    qs = p.get("quantiles") or {}
    lo, hi = qs.get(str(Q[0])), qs.get(str(Q[1]))
    lat = (p.get("latent_mean"), p.get("latent_variance"))
    return scores(lik, yte, p.get("mean"), p.get("variance"), lo, hi,
                  p.get("probability"), lat)


def fit_and_score(url, name, body, Xte, yte, lik):
    t0 = time.monotonic()
    st, m = post(url + "/v1/models", dict(body, name=name))
    secs = time.monotonic() - t0
    if st != 201:
        return {"error": m, "fit_s": secs}, None
    out = score_model(url, name, Xte, yte, lik)
    out["fit_s"] = secs
    return out, m


def sklearn_fit(lik, Xtr, ytr, Xte, yte, seed, max_n):
    """scikit-learn's GP on (a seeded subset of) the training rows, scored on the test rows."""
    import warnings
    import numpy as np
    from sklearn.gaussian_process import GaussianProcessClassifier, GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel
    from scipy.stats import norm
    Xtr, ytr, Xte = np.asarray(Xtr), np.asarray(ytr), np.asarray(Xte)
    n_full = len(ytr)
    if n_full > max_n:
        keep = np.sort(np.random.default_rng(seed).choice(n_full, max_n, replace=False))
        Xtr, ytr = Xtr[keep], ytr[keep]
    mu, sd = Xtr.mean(0), Xtr.std(0)
    sd[sd == 0] = 1.0
    Xtr, Xte = (Xtr - mu) / sd, (Xte - mu) / sd
    d = Xtr.shape[1]
    info = {"n_fit": int(len(ytr))}
    t0 = time.monotonic()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if lik == "bernoulli":
            ls = 1.0 if d > 40 else np.ones(d)
            info["ard"] = d <= 40
            g = GaussianProcessClassifier(ConstantKernel(1.0) * RBF(ls), n_restarts_optimizer=0,
                                          random_state=0).fit(Xtr, ytr)
            prob = g.predict_proba(Xte)[:, 1]
            out = scores(lik, yte, None, None, prob=list(prob))
        else:
            k = ConstantKernel(1.0) * RBF(np.ones(d)) + WhiteKernel(1.0)
            g = GaussianProcessRegressor(k, normalize_y=True, n_restarts_optimizer=0,
                                         random_state=0).fit(Xtr, ytr)
            m, s = g.predict(Xte, return_std=True)
            s = np.maximum(s, 1e-300)
            z = norm.ppf(0.975)
            out = scores(lik, yte, list(m), list(s * s), list(m - z * s), list(m + z * s))
    out["fit_s"] = time.monotonic() - t0
    out.update(info)
    return out


def run_split(a, ds, k, X, y, test, budget):
    lik = LIK[ds]
    url = a.url.rstrip("/")
    ts = set(test)
    Xtr = [x for i, x in enumerate(X) if i not in ts]
    ytr = [v for i, v in enumerate(y) if i not in ts]
    Xte = [X[i] for i in test]
    yte = [y[i] for i in test]
    base = {"X": Xtr, "y": ytr, "seed": k}
    if lik != "gaussian":
        base["likelihood"] = lik
    name = "bench-auto-%s-%d" % (ds, k)
    auto, m = fit_and_score(url, name, dict(base, method="auto", budget_s=budget,
                                            **{"async": False}), Xte, yte, lik)
    out = {"set": ds, "split": k, "n": len(ytr), "likelihood": lik, "budget_s": budget,
           "auto": auto, "single": {}}
    if m is None:
        return out
    out["chosen"] = m["method"]
    mi = m.get("method_info", {})
    out["leaderboard"] = mi.get("leaderboard", [])
    for key in ("auto_seconds", "total_seconds", "validation_plan"):
        if key in mi:
            out[key] = mi[key]
    mi_auto = mi.get("auto", {})
    for key in ("seconds", "within_budget", "final_fit", "validation"):
        if key in mi_auto:
            out["auto_" + key] = mi_auto[key]
    if a.auto_only:
        return out
    for c in out["leaderboard"]:
        if c.get("status") != "done":
            continue
        body = dict(base, method=c["method"], validation=False)
        if c.get("options"):
            body["options"] = c["options"]
        s, _ = fit_and_score(url, "bench-single-%s-%d-%s" % (ds, k, c["method"]), body,
                             Xte, yte, lik)
        s["val"], s["val_sd"] = c.get("nlpd"), c.get("nlpd_sd")
        s["val_cover95"] = c.get("coverage_95")
        out["single"][c["method"]] = s
    if not a.no_sklearn and lik != "poisson":
        try:
            out["sklearn"] = sklearn_fit(lik, Xtr, ytr, Xte, yte, k, a.sklearn_max)
        except Exception as e:  # a peer's failure is a figure, not a crash of the run
            out["sklearn"] = {"error": repr(e)}
    return out


def get(url, timeout=60):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read() or b"{}")


def fit_capped(url, name, body, Xte, yte, lik, cap_s):
    """One fit as an async job, cancelled past cap_s seconds; scored like fit_and_score."""
    t0 = time.monotonic()
    st, j = post(url + "/v1/models", dict(body, name=name, **{"async": True}))
    if st != 202:
        return {"error": j, "fit_s": time.monotonic() - t0}
    jid = j["job"]
    while True:
        time.sleep(1.0)
        st, job = get(url + "/v1/jobs/" + jid)
        secs = time.monotonic() - t0
        if job.get("status") == "succeeded":
            out = score_model(url, name, Xte, yte, lik)
            out["fit_s"] = secs
            return out
        if job.get("status") in ("failed", "cancelled"):
            return {"error": job.get("error") or job.get("status"), "fit_s": secs}
        if secs > cap_s:
            req = urllib.request.Request(url + "/v1/jobs/" + jid, method="DELETE")
            try:
                urllib.request.urlopen(req, timeout=60).read()
            except urllib.error.HTTPError:
                pass
            return {"error": "cancelled past %g s" % cap_s, "fit_s": secs}


def fill(a):
    """Fit alone every candidate auto listed but did not validate (skipped or stopped), so the
    best single method in hindsight is over the whole rule table, not only what auto ran."""
    url = a.url.rstrip("/")
    with open(a.fill) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    names = None if a.sets == "all" else set(a.sets.split(","))
    data = {}
    for r in rows:
        if "chosen" not in r or (names and r["set"] not in names):
            continue
        ds, k, lik = r["set"], r["split"], r["likelihood"]
        if ds not in data:
            data[ds] = load(ds)
        X, y, splits = data[ds]
        ts = set(splits[k])
        base = {"X": [x for i, x in enumerate(X) if i not in ts],
                "y": [v for i, v in enumerate(y) if i not in ts], "seed": k, "validation": False}
        if lik != "gaussian":
            base["likelihood"] = lik
        Xte, yte = [X[i] for i in splits[k]], [y[i] for i in splits[k]]
        for c in r.get("leaderboard", []):
            if c["method"] in r["single"] or c["method"] in r.get("unvalidated", {}):
                continue
            if a.fill_methods and c["method"] not in a.fill_methods.split(","):
                continue
            body = dict(base, method=c["method"])
            if c.get("options"):
                body["options"] = c["options"]
            s = fit_capped(url, "bench-fill-%s-%d-%s" % (ds, k, c["method"]), body, Xte, yte,
                           lik, a.fill_cap)
            s["auto_status"] = c.get("status")
            r.setdefault("unvalidated", {})[c["method"]] = s
            print(ds, k, c["method"], json.dumps(s), flush=True)
            with open(a.fill + ".tmp", "w") as f:
                f.writelines(json.dumps(x) + "\n" for x in rows)
            os.replace(a.fill + ".tmp", a.fill)
    return 0


def done_splits(path):
    seen = set()
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    r = json.loads(line)
                    seen.add((r["set"], r["split"]))
    return seen


def run(a):
    names = [s for s, _ in SETS] if a.sets == "all" else a.sets.split(",")
    seen = done_splits(a.out)
    for ds in names:
        X, y, splits = load(ds)
        budget = a.budget_large if len(y) * 0.9 > a.large_n else a.budget
        for k in range(a.first, min(a.first + a.splits, len(splits))):
            if (ds, k) in seen:
                continue
            r = run_split(a, ds, k, X, y, splits[k], budget)
            line = json.dumps(r)
            print(line, flush=True)
            if a.out:
                with open(a.out, "a") as f:
                    f.write(line + "\n")
    return 0


# ---- tables ----

def mean(v):
    v = [x for x in v if x is not None and not (isinstance(x, float) and math.isnan(x))]
    return sum(v) / len(v) if v else float("nan")


def fmt(x, spec="%.3f"):
    return "—" if x is None or (isinstance(x, float) and math.isnan(x)) else spec % x


def singles(r):
    """Every candidate fitted alone: those auto validated and (--fill) those it did not."""
    s = {m: v for m, v in r.get("unvalidated", {}).items() if "nlpd" in v}
    s.update({m: v for m, v in r["single"].items() if "nlpd" in v})
    return s


def gap_of(r):
    """auto's test score minus the best single candidate's (the best in hindsight)."""
    s = singles(r)
    if not s or "nlpd" not in r["auto"]:
        return None, None
    best = min(s, key=lambda m: s[m]["nlpd"])
    return r["auto"]["nlpd"] - s[best]["nlpd"], best


def best_overall(rs):
    """The one method with the lowest mean test score over the splits (among those that ran on
    every split: a method stopped on some splits is not comparable)."""
    full = set.intersection(*[set(singles(r)) for r in rs]) if rs else set()
    if not full:
        return "—", float("nan")
    m = min(full, key=lambda m: mean([singles(r)[m]["nlpd"] for r in rs]))
    return m, mean([singles(r)[m]["nlpd"] for r in rs])


def table(paths):
    by_split = {}
    for p in paths:  # a split in several files: the one with the most candidates fitted alone
        with open(p) as f:
            for r in (json.loads(line) for line in f if line.strip()):
                key = (r["set"], r["split"])
                if key not in by_split or len(singles(r)) > len(singles(by_split[key])):
                    by_split[key] = r
    rows = list(by_split.values())
    order = [s for s, _ in SETS]
    sets = sorted({r["set"] for r in rows}, key=order.index)
    print("| set | N train | splits | budget s | auto test | gap to the split's best: mean | max "
          "| best one method over the splits | auto − it | auto's choices | auto s: mean | max "
          "| scikit-learn test | sklearn fit s | auto − sklearn |")
    print("|---|---:|---:|---:|---:|---:|---:|---|---:|---|---:|---:|---:|---:|---:|")
    for ds in sets:
        rs = [r for r in rows if r["set"] == ds and "chosen" in r]
        if not rs:
            print("| %s | no completed split |" % ds)
            continue
        gaps = [gap_of(r)[0] for r in rs]
        choices = {}
        for r in rs:
            choices[r["chosen"]] = choices.get(r["chosen"], 0) + 1
        sk = [r.get("sklearn", {}) for r in rs]
        sk_n = [s.get("nlpd") for s in sk]
        auto_n = [r["auto"].get("nlpd") for r in rs]
        diff = [a_ - b for a_, b in zip(auto_n, sk_n) if a_ is not None and b is not None]
        secs = [r["auto"]["fit_s"] for r in rs]
        best_m, best_mean = best_overall(rs)
        print("| %s | %d | %d | %g | %s | %s | %s | %s %s | %s | %s | %.1f | %.1f | %s | %s | "
              "%s |" % (
            ds, rs[0]["n"], len(rs), rs[0]["budget_s"], fmt(mean(auto_n)),
            fmt(mean(gaps), "%+.3f"), fmt(max([g for g in gaps if g is not None], default=None), "%+.3f"),
            best_m, fmt(best_mean), fmt(mean(auto_n) - best_mean, "%+.3f"),
            ", ".join("%s %d" % kv for kv in sorted(choices.items(), key=lambda kv: -kv[1])),
            mean(secs), max(secs), fmt(mean(sk_n)),
            fmt(mean([s.get("fit_s") for s in sk]), "%.1f"),
            fmt(mean(diff), "%+.3f") if diff else "—"))
    methods = ["exact", "sgpr", "ssgp", "svgp", "pls", "gwi", "msrfr", "hkd"]
    print("\nCoverage of the 95 % intervals on the test rows (mean over splits; nominal 0.95):\n")
    print("| set | " + " | ".join(methods) + " | scikit-learn |")
    print("|---|" + "---:|" * (len(methods) + 1))
    for ds in sets:
        rs = [r for r in rows if r["set"] == ds and "chosen" in r]
        if not rs or rs[0]["likelihood"] == "bernoulli":
            continue
        cells = [fmt(mean([singles(r).get(m, {}).get("cover95") for r in rs]))
                 for m in methods]
        cells.append(fmt(mean([r.get("sklearn", {}).get("cover95") for r in rs])))
        print("| %s | %s |" % (ds, " | ".join(cells)))
    timed = [r for r in rows if "auto_seconds" in r]
    if timed:
        print("\nauto against its budget (method_info.auto; the request's wall clock):\n")
        print("| set | split | budget s | auto s | request s | inside | candidates validated | "
              "final fit | choice | test |")
        print("|---|---:|---:|---:|---:|---|---|---|---|---:|")
        for r in sorted(timed, key=lambda r: (order.index(r["set"]), r["split"])):
            ran = [c["method"] for c in r.get("leaderboard", []) if c.get("status") == "done"]
            print("| %s | %d | %g | %.1f | %.1f | %s | %s | %s | %s | %s |" % (
                r["set"], r["split"], r["budget_s"], r["auto_seconds"], r["auto"]["fit_s"],
                "yes" if r.get("auto_within_budget") else "**no**", ", ".join(ran),
                (r.get("auto_final_fit") or "—").split(":")[0], r.get("chosen"),
                fmt(r["auto"].get("nlpd"))))
    print("\nEvery split (cells: test score (validation mean), single fit s; the chosen one bold):\n")
    print("| set | split | choice | auto test | best in hindsight | gap | auto s | scikit-learn | "
          "candidates |")
    print("|---|---:|---|---:|---|---:|---:|---:|---|")
    for r in sorted(rows, key=lambda r: (order.index(r["set"]), r["split"])):
        if "chosen" not in r:
            print("| %s | %d | error: %s |" % (r["set"], r["split"], r["auto"].get("error")))
            continue
        g, best = gap_of(r)
        cells = []
        for c in r.get("leaderboard", []):
            m_ = c["method"]
            s = r["single"].get(m_)
            u = r.get("unvalidated", {}).get(m_)
            if s is None and u is not None:
                cells.append("%s %s: alone %s, %.0f s" % (
                    m_, c.get("status"), fmt(u.get("nlpd")) if "nlpd" in u else "not done",
                    u.get("fit_s", 0)))
                continue
            if s is None:
                cells.append("%s %s" % (m_, c.get("status")))
                continue
            cell = "%s %s (%s, %.0f s)" % (m_, fmt(s.get("nlpd")), fmt(s.get("val")),
                                          s.get("fit_s", 0))
            cells.append("**%s**" % cell if m_ == r["chosen"] else cell)
        sk = r.get("sklearn", {})
        print("| %s | %d | %s | %s | %s %s | %s | %.1f | %s | %s |" % (
            r["set"], r["split"], r["chosen"], fmt(r["auto"].get("nlpd")), best,
            fmt(singles(r).get(best, {}).get("nlpd")), fmt(g, "%+.3f"), r["auto"]["fit_s"],
            fmt(sk.get("nlpd")), "; ".join(cells)))
    return 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url", nargs="?")
    ap.add_argument("--out", help="append JSON lines here; skip the splits it holds")
    ap.add_argument("--splits", type=int, default=5, help="splits per set")
    ap.add_argument("--first", type=int, default=0, help="the first split")
    ap.add_argument("--budget", type=float, default=60)
    ap.add_argument("--budget-large", type=float, default=300,
                    help="budget_s for sets of more than --large-n training rows")
    ap.add_argument("--large-n", type=int, default=2000)
    ap.add_argument("--sets", default="all")
    ap.add_argument("--no-sklearn", action="store_true")
    ap.add_argument("--auto-only", action="store_true",
                    help="auto's fit alone (its choice, seconds, budget), no single fits")
    ap.add_argument("--sklearn-max", type=int, default=2000)
    ap.add_argument("--table", nargs="+", metavar="FILE.jsonl")
    ap.add_argument("--fill", metavar="FILE.jsonl",
                    help="fit alone the candidates auto skipped or stopped (rewrites FILE)")
    ap.add_argument("--fill-cap", type=float, default=900, help="seconds per such fit")
    ap.add_argument("--fill-methods", help="only these candidates (a,b)")
    a = ap.parse_args()
    if a.table:
        return table(a.table)
    if a.fill:
        if not a.url:
            ap.error("--fill needs the daemon URL")
        return fill(a)
    if not a.url:
        ap.error("a daemon URL, or --table FILE.jsonl")
    return run(a)


if __name__ == "__main__":
    sys.exit(main())
