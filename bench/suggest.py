#!/usr/bin/env python3
"""Studies that suggest the next experiment (issue 39; bench/results/suggest.md): simple regret
of gpserve's suggestions on Branin, Hartmann-6 and Gramacy et al.'s constrained problem
(bench/suggest_problems.py) beside random search, a plain scrambled Sobol sequence and the loop
people write by hand with scikit-learn (bench/suggest_sklearn.py), all in the same run; and the
latency of a suggestion at 50, 500 and 2000 completed trials, exact and sgpr.

Parts (--parts, default regret,latency):
  regret   for each problem, method and seed (--seeds, 20): a study on BUILD/gpserve (a daemon
           of its own on 127.0.0.1, port 0, a temporary SQLite store) driven through the Python
           client (clients/python): suggest, evaluate the function, complete, --budget (50)
           times; the simple regret (best feasible value so far minus the optimum) after each
           evaluation. Methods: log_ei, ucb (beta 2), thompson, log_ei_q4 (log EI, 4 trials per
           suggestion), sobol (a study whose initial design is the whole budget: the daemon's
           scrambled Sobol sequence), random (uniform, Python's random.Random(seed)), sklearn
           (bench/suggest_sklearn.py in a process of its own beside the daemon's runs). Every
           study's initial design is 2 (D + 1) points, the sklearn loop's too.
  latency  Hartmann-6 studies with method exact and sgpr: n = 50, 500, 2000 trials attached
           (POST /v1/studies/S/trials; initial_design n, so that they make one refit), the
           refit waited for, then --latency-n (50) suggestions,
           each completed before the next: median and p99 of the suggestion's wall time as the
           client sees it.

Results: one JSON line per run in --jsonl (default bench/results/data/suggest.jsonl); --resume
keeps that file's lines and runs only what is missing; the markdown tables are made from the
file's lines and printed (and written to --out FILE); --table-only makes them alone (the prose
of bench/results/suggest.md is written by hand around them).
--quick: 3 seeds, a budget of 25, latency at 50 and 500 trials only (suggest.quick.jsonl).

Usage: suggest.py [--build build] [--seeds 20] [--budget 50] [--problems a,b] [--methods a,b]
                  [--parts regret,latency] [--jobs 2] [--resume] [--quick] [--table-only]
                  [--url http://HOST:PORT (a running daemon instead of one of its own)]
"""
import argparse
import concurrent.futures
import json
import math
import os
import platform
import random
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "clients", "python"))

from gpserve_client import Client, errors  # noqa: E402
from scale_fit import Daemon  # noqa: E402
from suggest_problems import PROBLEMS  # noqa: E402

DAEMON_METHODS = {
    "log_ei": ({"type": "log_ei"}, 1),
    "ucb": ({"type": "ucb", "beta": 2.0}, 1),
    "thompson": ({"type": "thompson"}, 1),
    "log_ei_q4": ({"type": "log_ei"}, 4),
    "sobol": (None, 1),
}
METHODS = ["log_ei", "ucb", "thompson", "log_ei_q4", "sobol", "random", "sklearn"]
CHECKPOINTS = (10, 25, 50)


def n_init(problem):
    return 2 * (problem.dim + 1)


# ------------------------------------------------------------------ one run of each kind

def run_study(client, problem, method, seed, budget):
    """A study driven to `budget` evaluations; (metrics in evaluation order, suggest seconds)."""
    acquisition, batch = DAEMON_METHODS[method]
    name = "bench-%s-%s-%d-%d" % (problem.name, method, seed, os.getpid())
    fields = {"seed": seed, "initial_design": budget if method == "sobol" else n_init(problem)}
    if acquisition is not None:
        fields["acquisition"] = acquisition
    if problem.constraints:
        fields["constraints"] = [{"name": c, "max": 0.0} for c, _ in problem.constraints]
    try:
        client.delete_study(name)
    except errors.NotFound:
        pass
    study = client.create_study(name, problem.parameters(), {"name": "y", "goal": "minimize"},
                                **fields)
    evaluations, waits = [], []
    try:
        while len(evaluations) < budget:
            t0 = time.perf_counter()
            trials = study.suggest(count=min(batch, budget - len(evaluations)),
                                   client_id="bench")
            waits.append(time.perf_counter() - t0)
            for trial in trials:
                m = problem.metrics(problem.point(trial.parameters))
                trial.complete(metrics=m)
                evaluations.append(m)
    finally:
        study.delete()
    return evaluations, waits


def run_random(problem, seed, budget):
    rng = random.Random(seed)
    return [problem.metrics([rng.uniform(lo, hi) for lo, hi in problem.bounds])
            for _ in range(budget)]


def run_sklearn(problem_name, seed, budget):
    """In a worker process (numpy and scikit-learn stay out of the daemon's client)."""
    from suggest_sklearn import run_loop
    problem = PROBLEMS[problem_name]
    t0 = time.perf_counter()
    metrics = run_loop(problem, seed, budget, n_init(problem))
    return metrics, time.perf_counter() - t0


def regret_line(problem, method, seed, evaluations, seconds, waits=None):
    line = {"part": "regret", "problem": problem.name, "method": method, "seed": seed,
            "regret": [round(r, 10) for r in problem.regret_trace(evaluations)],
            "seconds": round(seconds, 2)}
    if waits:
        s = sorted(waits)
        line["suggest_ms_median"] = round(1e3 * s[len(s) // 2], 2)
    return line


# ------------------------------------------------------------------ the parts

class Sink:
    """The JSON-lines file (appended and flushed line by line: a run can resume)."""

    def __init__(self, path, resume):
        self.path = path
        self.lines = []
        self.lock = threading.Lock()
        if resume and os.path.exists(path):
            with open(path) as f:
                self.lines = [json.loads(t) for t in f if t.strip()]
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        self.file = open(path, "a" if resume else "w")

    def has(self, **key):
        return any(all(line.get(k) == v for k, v in key.items()) for line in self.lines)

    def put(self, line):
        with self.lock:
            self.lines.append(line)
            self.file.write(json.dumps(line) + "\n")
            self.file.flush()
            print(json.dumps(line)[:160], file=sys.stderr, flush=True)


def part_regret(a, url, sink):
    jobs = [(p, m, s) for p in a.problems for m in a.methods for s in range(1, a.seeds + 1)
            if not sink.has(part="regret", problem=p, method=m, seed=s)]
    sk = [j for j in jobs if j[1] == "sklearn"]
    rest = [j for j in jobs if j[1] != "sklearn"]
    pool = concurrent.futures.ProcessPoolExecutor(max_workers=1) if sk else None
    futures = {pool.submit(run_sklearn, p, s, a.budget): (p, s) for p, _, s in sk} if sk else {}

    def one(job):
        p, m, s = job
        problem = PROBLEMS[p]
        t0 = time.perf_counter()
        try:
            if m == "random":
                sink.put(regret_line(problem, m, s, run_random(problem, s, a.budget), 0.0))
                return
            client = Client(url, timeout=a.timeout)
            evaluations, waits = run_study(client, problem, m, s, a.budget)
            sink.put(regret_line(problem, m, s, evaluations, time.perf_counter() - t0, waits))
        except (errors.GPServeError, RuntimeError, KeyError, ValueError) as e:
            sink.put({"part": "regret", "problem": p, "method": m, "seed": s,
                      "error": str(e)[:300]})

    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as threads:
        list(threads.map(one, rest))
    for fut in concurrent.futures.as_completed(futures):
        p, s = futures[fut]
        try:
            metrics, seconds = fut.result()
            sink.put(regret_line(PROBLEMS[p], "sklearn", s, metrics, seconds))
        except Exception as e:  # noqa: BLE001 - a failed peer run is recorded, not fatal
            sink.put({"part": "regret", "problem": p, "method": "sklearn", "seed": s,
                      "error": "%s: %s" % (type(e).__name__, str(e)[:300])})
    if pool:
        pool.shutdown()


def wait_for_model(client, name, timeout):
    """Seconds until the study's latest claimed refit has saved its model (the refit of the
    largest n the schedule reached: the trials after it are observed, not refitted)."""
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        study = client.get_study(name)
        model = study.get("model") or {}
        if model.get("version") and (model.get("trials_included") or 0) >= study["refit_n"]:
            return time.perf_counter() - t0, model["trials_included"]
        time.sleep(0.5)
    raise RuntimeError("study %s: the refit did not end within %.0f s" % (name, timeout))


def part_latency(a, url, sink):
    problem = PROBLEMS["hartmann6"]
    client = Client(url, timeout=a.timeout)
    for method in ("exact", "sgpr"):
        for n in a.latency_sizes:
            if sink.has(part="latency", method=method, trials=n):
                continue
            name = "bench-latency-%s-%d-%d" % (method, n, os.getpid())
            try:
                sink.put(latency_run(a, client, problem, name, method, n))
            except (errors.GPServeError, RuntimeError) as e:
                sink.put({"part": "latency", "method": method, "trials": n,
                          "error": str(e)[:300]})
            finally:
                try:
                    client.delete_study(name)
                except errors.GPServeError:
                    pass


def latency_run(a, client, problem, name, method, n):
    # initial_design = n: the n attached trials make one refit (the schedule's first), as a
    # study that grew by suggestions has one recent refit, not one per attach.
    study = client.create_study(name, problem.parameters(), {"name": "y", "goal": "minimize"},
                                seed=1, model={"method": method}, initial_design=n)
    rng = random.Random(n)
    t0 = time.perf_counter()
    for _ in range(n):
        x = [rng.random() for _ in range(problem.dim)]
        study.attach({"x%d" % j: v for j, v in enumerate(x)}, problem.f(x))
    attach_s = time.perf_counter() - t0
    refit_s, refit_n = wait_for_model(client, name, a.timeout)
    waits = []
    for i in range(a.latency_n + 1):
        t1 = time.perf_counter()
        trial = study.suggest(count=1, client_id="lat-%d" % i)[0]
        if i:                                  # the first one warms the daemon's model cache
            waits.append(time.perf_counter() - t1)
        trial.complete(problem.f(problem.point(trial.parameters)))
    s = sorted(waits)
    return {"part": "latency", "method": method, "trials": n, "suggestions": len(s),
            "median_ms": round(1e3 * s[len(s) // 2], 1),
            "p99_ms": round(1e3 * s[min(len(s) - 1, int(math.ceil(0.99 * len(s))) - 1)], 1),
            "max_ms": round(1e3 * s[-1], 1), "attach_s": round(attach_s, 1),
            "refit_wait_s": round(refit_s, 1), "refit_trials": refit_n}


# ------------------------------------------------------------------ the tables

def quartiles(values):
    v = sorted(values)
    if not v:
        return None

    def q(p):
        x = p * (len(v) - 1)
        i = int(math.floor(x))
        return v[i] if i + 1 >= len(v) else v[i] + (x - i) * (v[i + 1] - v[i])
    return q(0.25), q(0.5), q(0.75)


def fmt(x):
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if x == 0:
        return "0"
    return "%.3g" % x if abs(x) >= 1e-3 else "%.1e" % x


def regret_tables(lines, budget):
    out = []
    for p in PROBLEMS:
        rows = [line for line in lines if line.get("part") == "regret" and line["problem"] == p]
        if not rows:
            continue
        out += ["", "### %s" % p, "",
                "| method | runs | " + " | ".join("after %d" % c for c in CHECKPOINTS
                                                  if c <= budget) +
                " | seconds per run (median) |",
                "|---|---:|" + "---:|" * len([c for c in CHECKPOINTS if c <= budget]) + "---:|"]
        for m in METHODS:
            ok = [r for r in rows if r["method"] == m and "regret" in r]
            bad = [r for r in rows if r["method"] == m and "error" in r]
            if not ok and not bad:
                continue
            cells = []
            for c in CHECKPOINTS:
                if c > budget:
                    continue
                qs = quartiles([r["regret"][c - 1] for r in ok if len(r["regret"]) >= c])
                cells.append("%s [%s, %s]" % (fmt(qs[1]), fmt(qs[0]), fmt(qs[2])) if qs else "–")
            secs = quartiles([r["seconds"] for r in ok])
            runs = "%d" % len(ok) + (" (%d failed: %s)" % (len(bad), bad[0]["error"][:80])
                                     if bad else "")
            out.append("| %s | %s | %s | %s |" % (m, runs, " | ".join(cells),
                                                  fmt(secs[1]) if secs else "–"))
    return out


def latency_table(lines):
    rows = [line for line in lines if line.get("part") == "latency"]
    if not rows:
        return []
    out = ["", "| model | completed trials | suggestions | median (ms) | p99 (ms) | max (ms) "
           "| attach n trials (s) | wait for the refit (s) | trials in the refit |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in sorted(rows, key=lambda r: (r["method"], r["trials"])):
        if "error" in r:
            out.append("| %s | %d | failed: %s | | | | | | |" % (r["method"], r["trials"],
                                                               r["error"][:100]))
        else:
            out.append("| %s | %d | %d | %s | %s | %s | %s | %s | %s |" % (
                r["method"], r["trials"], r["suggestions"], r["median_ms"], r["p99_ms"],
                r["max_ms"], r["attach_s"], r["refit_wait_s"], r.get("refit_trials", "")))
    return out


def cpu_model():
    try:
        text = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in text.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def markdown(a, lines):
    out = ["<!-- made by bench/suggest.py%s from %s -->" % (" --quick" if a.quick else "",
                                                         os.path.relpath(a.jsonl, ROOT)),
           "", "Simple regret (median [first quartile, third quartile] over the seeds) after "
           "%s evaluations; CPU: %s (%d cores)." % (
               ", ".join(str(c) for c in CHECKPOINTS if c <= a.budget), cpu_model(),
               os.cpu_count() or 0)]
    out += regret_tables(lines, a.budget)
    lat = latency_table(lines)
    if lat:
        out += ["", "### Suggest latency (Hartmann-6, log EI)"] + lat
    return "\n".join(out) + "\n"


# ------------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build")
    ap.add_argument("--url", default=None)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--budget", type=int, default=50)
    ap.add_argument("--problems", default=",".join(PROBLEMS))
    ap.add_argument("--methods", default=",".join(METHODS))
    ap.add_argument("--parts", default="regret,latency")
    ap.add_argument("--latency-sizes", default="50,500,2000")
    ap.add_argument("--latency-n", type=int, default=50)
    ap.add_argument("--jobs", type=int, default=2, help="studies run at once (threads)")
    ap.add_argument("--timeout", type=float, default=900.0)
    ap.add_argument("--jsonl", default=None)
    ap.add_argument("--out", default=None)
    ap.add_argument("--resume", action="store_true")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--table-only", action="store_true")
    a = ap.parse_args()
    if a.quick:
        a.seeds, a.budget, a.latency_sizes = min(a.seeds, 3), min(a.budget, 25), "50,500"
    suffix = ".quick" if a.quick else ""
    a.jsonl = a.jsonl or os.path.join(HERE, "results", "data", "suggest%s.jsonl" % suffix)
    a.problems = [p for p in a.problems.split(",") if p]
    a.methods = [m for m in a.methods.split(",") if m]
    a.latency_sizes = [int(n) for n in a.latency_sizes.split(",") if n]
    for p in a.problems:
        if p not in PROBLEMS:
            ap.error("unknown problem %r (%s)" % (p, ", ".join(PROBLEMS)))
    for m in a.methods:
        if m not in METHODS:
            ap.error("unknown method %r (%s)" % (m, ", ".join(METHODS)))
    sink = Sink(a.jsonl, a.resume or a.table_only)
    t0 = time.time()
    if not a.table_only:
        daemon = None
        url = a.url
        if url is None:
            daemon = Daemon(os.path.join(a.build, "gpserve"), a.timeout, [])
            url = "http://127.0.0.1:%d" % daemon.port
        try:
            parts = a.parts.split(",")
            if "regret" in parts:
                part_regret(a, url, sink)
            if "latency" in parts:
                part_latency(a, url, sink)
        finally:
            if daemon:
                daemon.stop()
        sink.put({"part": "run", "seconds": round(time.time() - t0, 1), "cpu": cpu_model(),
                  "quick": a.quick})
    text = markdown(a, sink.lines)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text)
    print(text)


if __name__ == "__main__":
    main()
