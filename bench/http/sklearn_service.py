#!/usr/bin/python3
"""The reference service of bench/http: scikit-learn's GaussianProcessRegressor
behind Flask, with the routes and bodies of gpserve that the benchmark uses.

    POST /v1/models                 {"name", "X", "y", "seed"?}     -> 201 (other fields ignored)
    POST /v1/models/NAME/predict    {"X"}                            -> {"mean", "variance"}
    POST /v1/models/NAME/sample     {"X", "n_samples", "seed"}       -> {"samples"}

The model is gpserve's default exact fit: sigma^2 * RBF(ARD) + noise, every
hyperparameter starting at 1 in standardised units, X standardised by the
training statistics, y by normalize_y, no restarts. The variance is the
observation variance (WhiteKernel included), as gpserve's default. Under
gunicorn -w N each worker is a process, so fitted models are pickled to
$SKLEARN_SERVICE_DIR and every worker loads (and caches) them from there.

Run: SKLEARN_SERVICE_DIR=/tmp/d gunicorn -w 2 -b 127.0.0.1:PORT \
         --chdir bench/http sklearn_service:app
"""
import os
import pickle
import tempfile
import time

import numpy as np
from flask import Flask, jsonify, request
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

STORE = os.environ.get("SKLEARN_SERVICE_DIR") or tempfile.mkdtemp(prefix="sklearn-service-")
os.makedirs(STORE, exist_ok=True)
app = Flask(__name__)
_cache = {}  # name -> (mtime_ns, model dict)


def _error(status, code, message, field=None):
    err = {"code": code, "message": message}
    if field:
        err["field"] = field
    return jsonify({"error": err}), status


def _matrix(v):
    X = np.asarray(v, dtype=float)
    if X.ndim == 1:
        X = X[:, None]
    return X


def _path(name):
    return os.path.join(STORE, name.replace("/", "_") + ".pkl")


def _load(name):
    path = _path(name)
    try:
        mtime = os.stat(path).st_mtime_ns
    except FileNotFoundError:
        return None
    hit = _cache.get(name)
    if hit and hit[0] == mtime:
        return hit[1]
    with open(path, "rb") as f:
        model = pickle.load(f)
    _cache[name] = (mtime, model)
    return model


@app.post("/v1/models")
def fit():
    body = request.get_json(force=True)
    name = body["name"]
    X = _matrix(body["X"])
    y = np.asarray(body["y"], dtype=float)
    mu = X.mean(axis=0)
    sd = X.std(axis=0)
    sd[sd == 0] = 1.0
    d = X.shape[1]
    kernel = ConstantKernel(1.0) * RBF(np.ones(d)) + WhiteKernel(1.0)
    t0 = time.perf_counter()
    gpr = GaussianProcessRegressor(kernel=kernel, normalize_y=True, n_restarts_optimizer=0,
                                   random_state=int(body.get("seed", 0)))
    gpr.fit((X - mu) / sd, y)
    seconds = time.perf_counter() - t0
    old = _load(name)
    model = {"gpr": gpr, "mu": mu, "sd": sd, "version": (old["version"] + 1) if old else 1}
    fd, tmp = tempfile.mkstemp(dir=STORE)
    with os.fdopen(fd, "wb") as f:
        pickle.dump(model, f)
    os.replace(tmp, _path(name))
    return jsonify({"name": name, "version": model["version"], "method": "exact",
                    "status": "ready", "n_train": int(X.shape[0]), "input_dim": int(d),
                    "diagnostics": {"objective": float(gpr.log_marginal_likelihood_value_),
                                    "objective_name": "log_marginal_likelihood",
                                    "fit_seconds": seconds}}), 201


@app.post("/v1/models/<name>/predict")
def predict(name):
    model = _load(name)
    if model is None:
        return _error(404, "not_found", "no model '%s'" % name, "name")
    X = _matrix(request.get_json(force=True)["X"])
    mean, std = model["gpr"].predict((X - model["mu"]) / model["sd"], return_std=True)
    return jsonify({"name": name, "version": model["version"], "mean": mean.tolist(),
                    "variance": (std * std).tolist()})


@app.post("/v1/models/<name>/sample")
def sample(name):
    model = _load(name)
    if model is None:
        return _error(404, "not_found", "no model '%s'" % name, "name")
    body = request.get_json(force=True)
    X = _matrix(body["X"])
    draws = model["gpr"].sample_y((X - model["mu"]) / model["sd"],
                                  n_samples=int(body.get("n_samples", 10)),
                                  random_state=int(body.get("seed", 0)))
    return jsonify({"name": name, "version": model["version"],
                    "samples": np.asarray(draws).T.tolist()})


@app.get("/healthz")
def healthz():
    return jsonify({"status": "ok"})
