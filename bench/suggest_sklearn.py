#!/usr/bin/env python3
"""The Bayesian-optimisation loop people write by hand, as the peer of gpserve's studies in
bench/suggest.py: scikit-learn's GaussianProcessRegressor (constant x Matern 2.5 with one
length scale per input, plus a WhiteKernel; normalize_y; hyperparameters by its default
L-BFGS-B on the log marginal likelihood, no restarts) on the inputs scaled to [0, 1]^D,
expected improvement maximised with scipy's L-BFGS-B (finite-difference gradients) from 10
uniformly random starts, the best end point taken. Constrained problems: one more GP per
constraint and EI times the probability that every constraint holds (the probability alone
until a feasible point is found). The initial design: scipy's scrambled Sobol points, as many
as the study's initial design.

One run: run_loop(problem, seed, budget, n_init) -> the metric dicts in evaluation order.
Also a script: suggest_sklearn.py PROBLEM SEED BUDGET N_INIT prints one JSON line.
"""
import json
import math
import sys
import warnings

import numpy as np
from scipy.optimize import minimize
from scipy.stats import norm, qmc
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import ConstantKernel, Matern, WhiteKernel

from suggest_problems import PROBLEMS

N_STARTS = 10


def fit_gp(U, y, seed):
    d = U.shape[1]
    kernel = (ConstantKernel(1.0, (1e-3, 1e3)) * Matern(np.full(d, 0.5), (1e-3, 1e2), nu=2.5)
              + WhiteKernel(1e-6, (1e-10, 1e-1)))
    gp = GaussianProcessRegressor(kernel, normalize_y=True, random_state=seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        gp.fit(U, y)
    return gp


def acquisition(gp, cgps, best):
    """-EI x P(feasible) at one point (a function to minimise)."""
    def neg(u):
        u = u.reshape(1, -1)
        value = 1.0
        if gp is not None:
            mu, sd = gp.predict(u, return_std=True)
            sd = max(sd[0], 1e-12)
            z = (best - mu[0]) / sd
            value = (best - mu[0]) * norm.cdf(z) + sd * norm.pdf(z)
        for cgp in cgps:
            mc, sc = cgp.predict(u, return_std=True)
            value *= norm.cdf(-mc[0] / max(sc[0], 1e-12))
        return -value
    return neg


def next_point(U, metrics, problem, rng, seed):
    y = np.array([m["y"] for m in metrics])
    feasible = [problem.feasible(m) for m in metrics]
    cgps = [fit_gp(U, np.array([m[name] for m in metrics]), seed)
            for name, _ in problem.constraints]
    gp = None
    best = None
    if any(feasible):
        gp = fit_gp(U, y, seed)
        best = y[np.array(feasible)].min()
    fn = acquisition(gp, cgps, best)
    top_u, top_v = None, math.inf
    for start in rng.random((N_STARTS, U.shape[1])):
        r = minimize(fn, start, method="L-BFGS-B", bounds=[(0.0, 1.0)] * U.shape[1])
        if r.fun < top_v:
            top_u, top_v = np.clip(r.x, 0.0, 1.0), r.fun
    return top_u


def run_loop(problem, seed, budget, n_init):
    rng = np.random.default_rng(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # "balance properties" of a non-2^m Sobol
        U = qmc.Sobol(problem.dim, scramble=True, seed=seed).random(n_init)
    metrics = [problem.metrics(problem.from_unit(u)) for u in U]
    while len(metrics) < budget:
        u = next_point(U, metrics, problem, rng, seed)
        U = np.vstack([U, u])
        metrics.append(problem.metrics(problem.from_unit(u)))
    return metrics[:budget]


if __name__ == "__main__":
    name, seed, budget, n_init = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    print(json.dumps({"problem": name, "seed": seed,
                      "metrics": run_loop(PROBLEMS[name], seed, budget, n_init)}))
