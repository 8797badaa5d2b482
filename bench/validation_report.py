#!/usr/bin/python3
"""bench/results/validation.md: the time a 5-fold validation adds to a fit, per method and
likelihood, and what it measures (the coverage of the predictive intervals, log loss and
accuracy for classes, count NLPD for counts).

    build/gpserve --port 18841 --db /tmp/vbench.db &
    python3 bench/validation_report.py 18841 ../shared/datasets > bench/results/validation.md

A third argument picks sections (comma-separated: regression, classification, counts; all by
default), a fourth methods (comma-separated; all by default).

Each (set, method): a fit with "validation": false (its time), then the same fit with
"validation": {"folds": 5, "seed": 0} (its time and its report). Wall-clock times of the
request on this machine (2 cores, other work running): read the ratios, not the seconds.
"""
import json
import os
import platform
import random
import subprocess
import sys
import time
import urllib.error
import urllib.request

PORT = sys.argv[1] if len(sys.argv) > 1 else "18841"
DATA = sys.argv[2] if len(sys.argv) > 2 else "../shared/datasets"
SECTIONS = (sys.argv[3] if len(sys.argv) > 3 else "regression,classification,counts").split(",")
ONLY = sys.argv[4].split(",") if len(sys.argv) > 4 else None
FOLDS = {"folds": 5, "seed": 0}


def negate_all(d):
    """hkd's symmetry x -> -x over every input: a stationary kernel is invariant under it, so
    the decomposition is exact whatever the data (harmless, the point of the row is its time
    and calibration, not a gain)."""
    return {"generators": [{"type": "negate", "dims": list(range(d))}],
            "resolve": "per_axis_real", "share_inducing": True, "validate": False}


REGRESSION_SETS = ["yacht", "boston"]
REGRESSION = [
    ("exact", lambda d: {}),
    ("sgpr", lambda d: {"inducing": 64}),
    ("ssgp", lambda d: {"features": 100}),
    ("svgp", lambda d: {"inducing": 64, "max_iterations": 300}),
    ("renyi", lambda d: {"inducing": 64}),
    ("msrfr", lambda d: {"particles": 8, "features": 100, "iterations": 200}),
    ("pls", lambda d: {}),
    ("gwi", lambda d: {}),
    ("hkd", lambda d: {"inducing": 64, "symmetry": negate_all(d)}),
    # warm-up 200 (300 by default): yacht's training parts hold 246 rows
    ("rfgp", lambda d: {"input": {"kind": "point", "dim": d}, "features": 100, "warmup": 200}),
    ("rfgp", lambda d: {"input": {"kind": "point", "dim": d}, "features": 100, "warmup": 200,
                        "width_selection": "ml"}),
]
CLASS_SETS = ["sonar", "ionosphere"]
CLASSIFICATION = [
    ("svgp", "bernoulli", {"inducing": 64, "max_iterations": 300}),
    ("pls", "bernoulli", {}),
]
COUNT_SET, COUNT_ROWS = "doctor_visits", 1000
COUNTS = [
    ("svgp", "poisson", {"inducing": 64, "max_iterations": 300}),
    ("pls", "poisson", {}),
    ("pls", "poisson_sq", {}),
]


def read_csv(name, rows=None):
    lines = open("%s/%s.csv" % (DATA, name)).read().strip().split("\n")[1:]
    if rows and rows < len(lines):
        lines = random.Random(0).sample(lines, rows)
    data = [[float(v) for v in line.split(",")] for line in lines]
    return [r[:-1] for r in data], [r[-1] for r in data]


def fit(name, method, likelihood, options, X, y, validation):
    body = {"name": name, "method": method, "likelihood": likelihood, "seed": 1,
            "options": options, "validation": validation, "X": X, "y": y}
    req = urllib.request.Request("http://127.0.0.1:%s/v1/models" % PORT,
                                 data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    t = time.time()
    try:
        answer = json.load(urllib.request.urlopen(req, timeout=7200))
    except urllib.error.HTTPError as e:
        answer = json.load(e)
    return time.time() - t, answer


def pm(v, key, sub=None):
    """value ± its sd over folds"""
    a, b = v[key], v["sd"][key]
    if sub:
        a, b = a[sub], b[sub]
    return "%.3f ± %.3f" % (a, b)


def run(label, method, likelihood, options, X, y):
    """(fit s, validated s, report) or an error line's text; None for a method not asked"""
    if ONLY and method not in ONLY:
        return None
    t0, b0 = fit("vb-%s-%s" % (label, method), method, likelihood, options, X, y, False)
    t1, b1 = fit("vb-%s-%s" % (label, method), method, likelihood, options, X, y, FOLDS)
    v = b1.get("validation")
    if "error" in b0 or v is None:
        return (b1.get("error") or b0.get("error") or {}).get("message", "?")[:100]
    return t0, t1, v


def times(t0, t1):
    return "%.2f | %.2f | %.2f | %.1f" % (t0, t1, t1 - t0, t1 / t0)


def option_note(method, options):
    if method == "rfgp":
        return "rfgp (%s)" % options.get("width_selection", "median")
    return method


def regression():
    print("## Regression (gaussian)\n")
    print("| set | N | method | fit s | with 5 folds s | added s | x | NLPD | RMSE | "
          "coverage 95 % | coverage 90 % | coverage 50 % |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for s in REGRESSION_SETS:
        X, y = read_csv(s)
        for m, opts in REGRESSION:
            o = opts(len(X[0]))
            r = run(s, m, "gaussian", o, X, y)
            if r is None:
                continue
            label = option_note(m, o)
            if isinstance(r, str):
                print("| %s | %d | %s | %s |" % (s, len(X), label, r))
                continue
            t0, t1, v = r
            print("| %s | %d | %s | %s | %.3f | %.3f | %s | %s | %s |"
                  % (s, len(X), label, times(t0, t1), v["nlpd"], v["rmse"],
                     pm(v, "coverage", "0.95"), pm(v, "coverage", "0.9"),
                     pm(v, "coverage", "0.5")))
            sys.stdout.flush()
    print()


def classification():
    print("## Classification (bernoulli, stratified folds)\n")
    print("| set | N | method | fit s | with 5 folds s | added s | x | log loss | accuracy | "
          "reliability bins |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s in CLASS_SETS:
        X, y = read_csv(s)
        for m, lik, o in CLASSIFICATION:
            r = run(s, m, lik, o, X, y)
            if r is None:
                continue
            if isinstance(r, str):
                print("| %s | %d | %s | %s |" % (s, len(X), m, r))
                continue
            t0, t1, v = r
            bins = " ".join("%.2f→%.2f" % (b["mean_predicted"], b["observed"])
                            for b in v.get("reliability", []) if b["count"] >= 10)
            print("| %s | %d | %s | %s | %s | %s | %s |"
                  % (s, len(X), m, times(t0, t1), pm(v, "log_loss"), pm(v, "accuracy"), bins))
            sys.stdout.flush()
    print()


def counts():
    print("## Counts (%s, a seeded subset of %d rows)\n" % (COUNT_SET, COUNT_ROWS))
    print("| set | N | method | likelihood | fit s | with 5 folds s | added s | x | count NLPD | "
          "RMSE | coverage 95 % | coverage 90 % | coverage 50 % |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    X, y = read_csv(COUNT_SET, COUNT_ROWS)
    for m, lik, o in COUNTS:
        r = run("counts", m, lik, o, X, y)
        if r is None:
            continue
        if isinstance(r, str):
            print("| %s | %d | %s | %s | %s |" % (COUNT_SET, len(X), m, lik, r))
            continue
        t0, t1, v = r
        print("| %s | %d | %s | %s | %s | %.3f | %.3f | %s | %s | %s |"
              % (COUNT_SET, len(X), m, lik, times(t0, t1), v["nlpd"], v["rmse"],
                 pm(v, "coverage", "0.95"), pm(v, "coverage", "0.9"), pm(v, "coverage", "0.5")))
        sys.stdout.flush()
    print()


def cpu_model():
    for line in open("/proc/cpuinfo"):
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or "?"


def main():
    print("# Validation: the time it adds, and what it measures\n")
    print("Regenerate: `build/gpserve --port 18841 --db /tmp/vbench.db &` then")
    print("`python3 bench/validation_report.py 18841 ../shared/datasets > "
          "bench/results/validation.md`.\n")
    load = os.getloadavg()
    print("Run %s on %s, %d CPUs, load average %.1f at the start (the machine is shared with "
          "other work: integration suites and builds; the seconds are loose, read the ratios); "
          "commit %s.\n" % (time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()), cpu_model(),
                            os.cpu_count(), load[0],
                            subprocess.run(["git", "rev-parse", "--short", "HEAD"],
                                           capture_output=True, text=True).stdout.strip()))
    print("Each method fitted on every row of the set without validation, then with 5 seeded "
          "folds (`\"validation\": {\"folds\": 5, \"seed\": 0}`); fit s and with 5 folds s are "
          "the two requests' wall clock, x their ratio. Coverage: the share of held-out y "
          "inside the central 95 % (90 %, 50 %) predictive interval, mean over folds ± sample "
          "sd; a calibrated model has 0.95 (0.90, 0.50).\n")
    for name, fn in (("regression", regression), ("classification", classification),
                     ("counts", counts)):
        if name in SECTIONS:
            fn()


main()
