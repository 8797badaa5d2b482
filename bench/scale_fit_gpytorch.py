#!/usr/bin/env python3
"""GPyTorch 1.8's SVGP as the same-run peer of gpserve's svgp in bench/scale_fit.py
(bench/results/scale_fit.md): the synthetic rows of that benchmark (CSV files it writes: a
header x0..x7,y then one row per point), inputs and targets standardised by the training rows,
float64, RBF ARD with a scale, M inducing inputs started at a seeded random subset of the
training inputs and learned, a Cholesky variational distribution, the variational ELBO with
Adam in minibatches (GPyTorch's SVGP example). Prints one JSON line: rows, fit seconds, test
RMSE (original units), peak RSS of this process (MB), epochs, batch size, torch threads.

Needs torch (Debian: python3-torch) and GPyTorch 1.8.1 from its source tree, e.g.
  git clone https://github.com/cornellius-gp/gpytorch; git -C gpytorch checkout v1.8.1
  PYTHONPATH=gpytorch /usr/bin/python3 bench/scale_fit_gpytorch.py --train T.csv --test S.csv

Usage: scale_fit_gpytorch.py --train CSV --test CSV [--rows N] [--inducing M] [--epochs E]
                             [--batch B] [--lr LR] [--threads T] [--seed S]
"""
import argparse
import json
import os
import resource
import sys
import time


def load(path, rows, np):
    """The first `rows` data rows of a CSV of the benchmark (0: every row)."""
    with open(path) as f:
        f.readline()
        data = np.loadtxt(f, delimiter=",", max_rows=rows if rows else None, ndmin=2)
    return data[:, :-1], data[:, -1]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--train", required=True)
    ap.add_argument("--test", required=True)
    ap.add_argument("--rows", type=int, default=0)
    ap.add_argument("--inducing", type=int, default=512)
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batch", type=int, default=1024)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    try:
        import numpy as np
        import torch
        import gpytorch
    except ImportError as e:
        print(json.dumps({"skipped": "torch or gpytorch missing: %s" % e}))
        return 0
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    X, y = load(a.train, a.rows, np)
    Xt, yt = load(a.test, 0, np)
    t0 = time.perf_counter()
    X, y = torch.from_numpy(X), torch.from_numpy(y)
    Xt, yt = torch.from_numpy(Xt), torch.from_numpy(yt)
    xm, xs = X.mean(0), X.std(0, unbiased=False)
    ym, ys = y.mean(), y.std(unbiased=False)
    X, Xt, yw = (X - xm) / xs, (Xt - xm) / xs, (y - ym) / ys
    n, d = X.shape
    Z0 = X[torch.randperm(n)[: a.inducing]].clone()

    class SVGP(gpytorch.models.ApproximateGP):
        def __init__(self, Z):
            dist = gpytorch.variational.CholeskyVariationalDistribution(Z.size(0))
            strat = gpytorch.variational.VariationalStrategy(
                self, Z, dist, learn_inducing_locations=True)
            super().__init__(strat)
            self.mean_module = gpytorch.means.ZeroMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(
                gpytorch.kernels.RBFKernel(ard_num_dims=d))

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x),
                                                             self.covar_module(x))

    model = SVGP(Z0).double()
    lik = gpytorch.likelihoods.GaussianLikelihood().double()
    model.train()
    lik.train()
    opt = torch.optim.Adam([{"params": model.parameters()}, {"params": lik.parameters()}],
                           lr=a.lr)
    mll = gpytorch.mlls.VariationalELBO(lik, model, num_data=n)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(X, yw),
                                         batch_size=a.batch, shuffle=True)
    steps = 0
    for _ in range(a.epochs):
        for xb, yb in loader:
            opt.zero_grad()
            loss = -mll(model(xb), yb)
            loss.backward()
            opt.step()
            steps += 1
    fit_s = time.perf_counter() - t0
    model.eval()
    lik.eval()
    with torch.no_grad():
        mean = torch.cat([lik(model(Xt[i:i + 4096])).mean for i in range(0, len(Xt), 4096)])
    rmse = float(((mean * ys + ym - yt) ** 2).mean().sqrt())
    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0
    print(json.dumps({"peer": "gpytorch %s SVGP" % gpytorch.__version__, "rows": n,
                      "fit_seconds": round(fit_s, 2), "rmse": rmse, "peak_rss_mb": round(rss_mb),
                      "epochs": a.epochs, "batch": a.batch, "steps": steps,
                      "inducing": a.inducing, "threads": torch.get_num_threads()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
