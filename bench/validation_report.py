#!/usr/bin/python3
"""bench/results/validation.md: the time a 5-fold validation adds to a fit, per method, on
two shared regression sets, and the coverage of the 95 % predictive intervals it measures.

    build/gpserve --port 18841 --db /tmp/vbench.db &
    python3 bench/validation_report.py 18841 ../shared/datasets > bench/results/validation.md

Each (set, method): a fit with "validation": false (its time), then the same fit with
"validation": {"folds": 5, "seed": 0} (its time and its report). Wall-clock times of the
request on this machine (2 cores, other work running): read the ratios, not the seconds.
"""
import json
import sys
import time
import urllib.error
import urllib.request

PORT = sys.argv[1] if len(sys.argv) > 1 else "18841"
DATA = sys.argv[2] if len(sys.argv) > 2 else "../shared/datasets"
SETS = ["yacht", "boston"]
METHODS = [
    ("exact", {}),
    ("sgpr", {"inducing": 64}),
    ("ssgp", {"features": 100}),
    ("svgp", {"inducing": 64, "max_iterations": 300}),
    ("renyi", {"inducing": 64}),
    ("msrfr", {"particles": 8, "features": 100, "iterations": 200}),
    ("pls", {}),
]


def fit(csv, name, method, options, validation):
    q = "name=%s&method=%s&seed=1&options=%s&validation=%s" % (
        name, method, urllib.request.quote(json.dumps(options)),
        urllib.request.quote(json.dumps(validation)))
    req = urllib.request.Request("http://127.0.0.1:%s/v1/models?%s" % (PORT, q), data=csv,
                                 headers={"Content-Type": "text/csv"})
    t = time.time()
    try:
        body = json.load(urllib.request.urlopen(req, timeout=3600))
    except urllib.error.HTTPError as e:
        body = json.load(e)
    return time.time() - t, body


def main():
    print("# Validation: the time it adds, and the coverage it measures\n")
    print("Regenerate: `build/gpserve --port 18841 --db /tmp/vbench.db &` then")
    print("`python3 bench/validation_report.py 18841 ../shared/datasets > "
          "bench/results/validation.md`.\n")
    print("Each method fitted on every row of the set without validation, then with 5 seeded "
          "folds (`\"validation\": {\"folds\": 5, \"seed\": 0}`); times are the request's "
          "wall clock on a 2-core machine shared with other work (ratios matter, not seconds). "
          "Coverage: the share of held-out y inside the central 95 % (and 50 %) predictive "
          "interval, mean over folds ± sample sd; a calibrated model has 0.95 and 0.50.\n")
    print("| set | N | method | fit s | with 5 folds s | added s | x | NLPD | RMSE | "
          "coverage 95 % | coverage 50 % |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for s in SETS:
        csv = open("%s/%s.csv" % (DATA, s), "rb").read()
        n = csv.count(b"\n") - 1
        for m, opts in METHODS:
            t0, b0 = fit(csv, "vb-%s-%s" % (s, m), m, opts, False)
            t1, b1 = fit(csv, "vb-%s-%s" % (s, m), m, opts, {"folds": 5, "seed": 0})
            v = b1.get("validation")
            if "error" in b0 or v is None:
                err = (b1.get("error") or b0.get("error") or {}).get("message", "?")
                print("| %s | %d | %s | %s |" % (s, n, m, err[:80]))
                continue
            print("| %s | %d | %s | %.2f | %.2f | %.2f | %.1f | %.3f | %.3f | %.3f ± %.3f | "
                  "%.3f ± %.3f |" % (s, n, m, t0, t1, t1 - t0, t1 / t0, v["nlpd"], v["rmse"],
                                     v["coverage"]["0.95"], v["sd"]["coverage"]["0.95"],
                                     v["coverage"]["0.5"], v["sd"]["coverage"]["0.5"]))
            sys.stdout.flush()


main()
