#!/usr/bin/env python3
"""Fits beyond one request (issue 38; bench/results/scale_fit.md): data sets uploaded to the
store and fitted in chunks by ssgp, sgpr and svgp, beside GPyTorch 1.8's SVGP on the same rows
in the same run, and the sharded fit of gpserve-fit under mpirun.

The rows are synthetic, a stated function of 8 inputs plus noise:
  x ~ U[0, 1]^8,  f(x) = 10 sin(pi x0 x1) + 20 (x2 - 0.5)^2 + 10 x3 + 5 x4
                         + 3 sin(2 pi x5) x6 + 2 cos(pi x7),
  y = f(x) + e, e ~ N(0, 1)   (Friedman #1 extended to 8 active inputs)
training sets of each --sizes rows (seed 1), one test set of --test rows (seed 2); the best
possible test RMSE is the noise's, 1.0.

Parts (--parts, default all):
  single  for each size: BUILD/gpserve on 127.0.0.1 (port 0, a temporary SQLite store removed
          at the end), the CSV uploaded with curl (PUT /v1/datasets/NAME, streamed), then an
          async fit naming the data set for each method; upload seconds, fit seconds (the
          model's diagnostics), the daemon's peak RSS during the fit (VmHWM, reset before it
          through /proc/PID/clear_refs) and test RMSE (predict over HTTP).
  peer    GPyTorch 1.8.1's SVGP (bench/scale_fit_gpytorch.py) on the first --peer-rows rows,
          when --gpytorch names its source tree and torch imports.
  mpi     BUILD/gpserve-fit under mpirun -np 1, 2, 4 (--oversubscribe) on the largest size's
          data set: seconds per objective evaluation, allreduce bytes and seconds (its --stats).

Every request is bounded (--timeout); the daemon is stopped (SIGTERM) at the end. Prints
markdown; --jsonl FILE also writes one JSON line per measurement.

Usage: scale_fit.py [--build build] [--sizes 100000,1000000] [--test 10000] [--parts ...]
                    [--gpytorch PATH] [--peer-rows 100000] [--keep-data DIR] [--quick]
"""
import argparse
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

D = 8


def f_true(x):
    return (10 * math.sin(math.pi * x[0] * x[1]) + 20 * (x[2] - 0.5) ** 2 + 10 * x[3] +
            5 * x[4] + 3 * math.sin(2 * math.pi * x[5]) * x[6] + 2 * math.cos(math.pi * x[7]))


def write_rows(path, n, seed):
    """n rows of the benchmark's function (header x0..x7,y), seeded."""
    rng = random.Random(seed)
    with open(path, "w") as out:
        out.write(",".join(["x%d" % j for j in range(D)] + ["y"]) + "\n")
        buf = []
        for _ in range(n):
            x = [rng.random() for _ in range(D)]
            y = f_true(x) + rng.gauss(0.0, 1.0)
            buf.append(",".join("%.17g" % v for v in x + [y]))
            if len(buf) == 10000:
                out.write("\n".join(buf) + "\n")
                buf = []
        if buf:
            out.write("\n".join(buf) + "\n")


def read_rows(path):
    X, y = [], []
    with open(path) as f:
        f.readline()
        for line in f:
            v = [float(t) for t in line.split(",")]
            X.append(v[:D])
            y.append(v[D])
    return X, y


class Daemon:
    """BUILD/gpserve on a loopback port the kernel picks, a temporary store."""

    def __init__(self, binary, timeout, extra, db_dir=None):
        self.own_dir = db_dir is None
        self.dir = db_dir or tempfile.mkdtemp(prefix="gpserve-scale-fit.")
        self.log = open(os.path.join(self.dir, "log"), "a+")
        self.log.seek(0, os.SEEK_END)
        start = self.log.tell()  # this daemon's lines only (the store may be reused)
        env = {k: v for k, v in os.environ.items() if not k.startswith("GPSERVE_")}
        for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY"):
            env.pop(k, None)
        env.setdefault("OPENBLAS_THREAD_TIMEOUT", "16")
        self.db = os.path.join(self.dir, "gpserve.db")
        self.proc = subprocess.Popen([binary, "--bind", "127.0.0.1", "--port", "0", "--db",
                                      self.db] + extra,
                                     stdout=self.log, stderr=subprocess.STDOUT, env=env)
        self.timeout = timeout
        self.port = None
        for _ in range(300):
            self.log.seek(start)
            m = re.search(r"gpserve listening on 127\.0\.0\.1:(\d+)", self.log.read())
            if m:
                self.port = int(m.group(1))
                break
            if self.proc.poll() is not None:
                break
            time.sleep(0.1)
        if self.port is None:
            self.log.seek(0)
            text = self.log.read()
            self.stop()
            raise RuntimeError("gpserve did not start: " + text[-500:])

    def url(self, path):
        return "http://127.0.0.1:%d%s" % (self.port, path)

    def call(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url(path), data, {"Content-Type": "application/json"},
                                     method=method)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as r:
                text = r.read()
                return json.loads(text) if text else None
        except urllib.error.HTTPError as e:
            raise RuntimeError("%s %s: %d %s" % (method, path, e.code,
                                                 e.read()[:400].decode("utf-8", "replace")))

    def upload(self, name, path):
        """PUT the CSV with curl (streamed from the file); seconds."""
        t0 = time.perf_counter()
        r = subprocess.run(["curl", "-sS", "--fail-with-body", "--max-time", str(int(self.timeout)),
                            "-T", path, "-H", "Content-Type: text/csv",
                            self.url("/v1/datasets/%s" % name)],
                           capture_output=True, text=True, timeout=self.timeout + 10)
        if r.returncode != 0:
            raise RuntimeError("upload %s: %s %s" % (name, r.stdout[-400:], r.stderr[-400:]))
        return time.perf_counter() - t0, json.loads(r.stdout)

    def reset_peak(self):
        try:
            with open("/proc/%d/clear_refs" % self.proc.pid, "w") as f:
                f.write("5")
            return True
        except OSError:
            return False

    def peak_rss_mb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            m = re.search(r"VmHWM:\s*(\d+) kB", f.read())
        return int(m.group(1)) / 1024.0 if m else float("nan")

    def rss_mb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            m = re.search(r"VmRSS:\s*(\d+) kB", f.read())
        return int(m.group(1)) / 1024.0 if m else float("nan")

    def fit_job(self, body):
        """An async fit; waits for its job; the model's description."""
        r = self.call("POST", "/v1/models", dict(body, **{"async": True}))
        job = r["job"]
        deadline = time.time() + self.timeout
        while time.time() < deadline:
            j = self.call("GET", "/v1/jobs/%s" % job)
            if j.get("status") in ("succeeded", "failed", "cancelled"):
                if j["status"] != "succeeded":
                    raise RuntimeError("job %s %s: %s" % (job, j["status"],
                                                          json.dumps(j.get("error"))[:400]))
                return self.call("GET", "/v1/models/%s" % body["name"])
            time.sleep(0.5)
        raise RuntimeError("job %s did not end within %.0f s" % (job, self.timeout))

    def rmse(self, name, X, y):
        se = 0.0
        for i in range(0, len(X), 2000):
            p = self.call("POST", "/v1/models/%s/predict" % name, {"X": X[i:i + 2000]})
            se += sum((m - t) ** 2 for m, t in zip(p["mean"], y[i:i + 2000]))
        return math.sqrt(se / len(X))

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()
        if self.own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


def methods(n, quick):
    """(label, method, options) of the single-machine part at n rows."""
    big = n >= 1000000
    # L-BFGS budgets that fit a bench run on 2 cores: at 10^6 rows an evaluation of
    # ssgp R = 256 or sgpr M = 512 costs ~30 s here, so 5 iterations (~8 evaluations)
    iters = 5 if quick or big else 30
    return [
        ("ssgp R = 256", "ssgp", {"features": 256, "frequencies": "qmc", "max_iterations": iters}),
        ("sgpr M = 512", "sgpr", {"inducing": 512, "inducing_selection": "kmeans",
                                  "optimize_inducing": False, "max_iterations": iters}),
        ("svgp M = 512", "svgp", {"inducing": 512, "inducing_selection": "kmeans",
                                  "optimizer": "adam", "batch_size": 1024,
                                  "epochs": 1 if (big or quick) else 5}),
    ]


def fit_one(a, db_dir, n, label, method, opts, test, out):
    """One fit over the data set synthN in a daemon of its own on the store db_dir (so that
    its peak RSS is this fit's and the daemon's, nothing left from another fit)."""
    d = Daemon(os.path.join(a.build, "gpserve"), a.timeout, ["--dataset-quota-mb", "100000"],
               db_dir)
    try:
        name = "%s-%d" % (method, n)
        base = d.rss_mb()
        d.reset_peak()
        t0 = time.perf_counter()
        try:
            model = d.fit_job({"name": name, "method": method, "seed": 1,
                               "data": {"dataset": "synth%d" % n, "target": "y"},
                               "options": opts})
        except RuntimeError as e:
            line = {"part": "fit", "rows": n, "label": label, "ok": False, "error": str(e)[:300]}
            out(line)
            return line
        wall = time.perf_counter() - t0
        peak = d.peak_rss_mb()
        dg = model.get("diagnostics", {})
        line = {"part": "fit", "rows": n, "label": label, "ok": True,
                "fit_seconds": round(dg.get("fit_seconds") or float("nan"), 2),
                "wall_seconds": round(wall, 2), "evaluations": dg.get("evaluations"),
                "iterations": dg.get("iterations"), "rss_before_mb": round(base),
                "peak_rss_mb": round(peak), "rmse": round(d.rmse(name, test[0], test[1]), 4)}
        out(line)
        return line
    finally:
        d.stop()


def run_single(a, sizes, paths, test, out):
    rows = []
    for n in sizes:
        db_dir = tempfile.mkdtemp(prefix="gpserve-scale-fit.")
        try:
            d = Daemon(os.path.join(a.build, "gpserve"), a.timeout,
                       ["--dataset-quota-mb", "100000"], db_dir)
            try:
                up_s, desc = d.upload("synth%d" % n, paths[n])
            finally:
                d.stop()
            line = {"part": "upload", "rows": n, "seconds": round(up_s, 2),
                    "csv_mb": round(os.path.getsize(paths[n]) / 2 ** 20, 1),
                    "stored_mb": round((desc.get("bytes") or 0) / 2 ** 20, 1)}
            out(line)
            rows.append(line)
            for label, method, opts in methods(n, a.quick):
                if a.methods and method not in a.methods.split(","):
                    continue
                rows.append(fit_one(a, db_dir, n, label, method, opts, test, out))
        finally:
            shutil.rmtree(db_dir, ignore_errors=True)
    return rows


def run_peer(a, paths, test_path, out):
    if not a.gpytorch:
        return [{"part": "peer", "skipped": "no --gpytorch"}]
    big = max(paths)
    env = dict(os.environ, PYTHONPATH=a.gpytorch)
    rows = []
    for n in sorted({min(a.peer_rows, big)}):
        cmd = ["/usr/bin/python3", "bench/scale_fit_gpytorch.py", "--train", paths[big],
               "--test", test_path, "--rows", str(n), "--epochs", "1" if a.quick else "5",
               "--batch", "1024", "--inducing", "512"]
        r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=a.timeout)
        try:
            line = json.loads(r.stdout.strip().splitlines()[-1])
        except (IndexError, ValueError):
            line = {"error": (r.stderr or r.stdout)[-300:]}
        line["part"] = "peer"
        out(line)
        rows.append(line)
    return rows


def run_mpi(a, paths, out):
    """gpserve-fit's sharded fit; its --stats line per rank count."""
    prog = os.path.join(a.build, "gpserve-fit")
    if not os.path.exists(prog) or shutil.which("mpirun") is None:
        line = {"part": "mpi", "skipped": "no %s or no mpirun" % prog}
        out(line)
        return [line]
    rows = []
    n = min(paths)  # per-evaluation figures: the smallest size keeps 9 runs short
    tmp = tempfile.mkdtemp(prefix="gpserve-scale-mpi.")
    try:
        d = Daemon(os.path.join(a.build, "gpserve"), a.timeout, ["--dataset-quota-mb", "100000"])
        try:
            d.upload("synth", paths[n])
        finally:
            db = d.db
            d.proc.send_signal(signal.SIGTERM)
            d.proc.wait(timeout=30)
        shutil.copy(db, os.path.join(tmp, "gpserve.db"))
        d.log.close()
        shutil.rmtree(d.dir, ignore_errors=True)
        env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OPENBLAS_NUM_THREADS="1")
        for label, method, opts in methods(n, True):
            req = os.path.join(tmp, "req.json")
            with open(req, "w") as f:
                json.dump({"name": "mpi-" + method, "method": method, "seed": 1,
                           "data": {"dataset": "synth", "target": "y"},
                           "options": dict(opts, max_iterations=5)}, f)
            for p in (1, 2, 4):
                cmd = ["mpirun", "--oversubscribe", "-np", str(p), prog, "--db",
                       os.path.join(tmp, "gpserve.db"), "--request", req, "--stats"]
                r = subprocess.run(cmd, env=env, capture_output=True, text=True,
                                   timeout=a.timeout)
                try:
                    line = json.loads(r.stdout.strip().splitlines()[-1])
                except (IndexError, ValueError):
                    line = {"error": (r.stderr or r.stdout)[-300:]}
                line.update(part="mpi", label=label, ranks=p, rows=n)
                out(line)
                rows.append(line)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return rows


def lscpu_model():
    try:
        o = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        m = re.search(r"Model name:\s*(.+)", o)
        c = re.search(r"^CPU\(s\):\s*(\d+)", o, re.M)
        return "%s, %s CPUs" % (m.group(1).strip() if m else "?", c.group(1) if c else "?")
    except (OSError, subprocess.SubprocessError):
        return "?"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", default="build")
    ap.add_argument("--sizes", default="100000,1000000")
    ap.add_argument("--test", type=int, default=10000)
    ap.add_argument("--parts", default="single,peer,mpi")
    ap.add_argument("--gpytorch", default=os.environ.get("GPYTORCH_PATH", ""))
    ap.add_argument("--peer-rows", type=int, default=100000)
    ap.add_argument("--keep-data", default="", help="write (or reuse) the CSV files here")
    ap.add_argument("--timeout", type=float, default=7200)
    ap.add_argument("--methods", default="", help="only these of ssgp,sgpr,svgp (single part)")
    ap.add_argument("--quick", action="store_true", help="sizes 20000, tiny budgets")
    ap.add_argument("--jsonl", default="")
    a = ap.parse_args()
    sizes = [20000] if a.quick else [int(s) for s in a.sizes.split(",")]
    parts = a.parts.split(",")
    ddir = a.keep_data or tempfile.mkdtemp(prefix="gpserve-scale-data.")
    os.makedirs(ddir, exist_ok=True)
    jl = open(a.jsonl, "w") if a.jsonl else None
    results = []

    def out(line):
        results.append(line)
        print(json.dumps(line), file=sys.stderr)
        if jl:
            jl.write(json.dumps(line) + "\n")
            jl.flush()

    try:
        paths = {}
        for n in sizes:
            paths[n] = os.path.join(ddir, "train_%d.csv" % n)
            if not os.path.exists(paths[n]):
                write_rows(paths[n], n, 1)
        test_path = os.path.join(ddir, "test_%d.csv" % a.test)
        if not os.path.exists(test_path):
            write_rows(test_path, a.test, 2)
        test = read_rows(test_path)
        print("# scale_fit: %s; sizes %s; test %d rows\n" % (lscpu_model(), sizes, a.test))
        if "single" in parts:
            run_single(a, sizes, paths, test, out)
        if "peer" in parts:
            run_peer(a, paths, test_path, out)
        if "mpi" in parts:
            run_mpi(a, paths, out)
        for line in results:
            print("| " + " | ".join("%s=%s" % (k, v) for k, v in line.items()) + " |")
    finally:
        if jl:
            jl.close()
        if not a.keep_data:
            shutil.rmtree(ddir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
