#!/usr/bin/env python3
"""GPyTorch's SGPR (Titsias' collapsed bound, InducingPointKernel) as the peer of
gpserve's sgpr on kin40k: the fixed split (rows 0-9999 train, 10000-39999
test), inputs and targets standardised by the training rows, float64, RBF ARD
with a scale, M inducing inputs started at a seeded random subset of the
training inputs and optimised with the hyperparameters (Adam), as GPyTorch's
SGPR example does. Prints one JSON line: fit seconds, fit and test-mean seconds,
RMSE (original units), iterations, torch threads.

Needs torch (Debian: python3-torch) and GPyTorch from its source tree, e.g.
  git clone https://github.com/cornellius-gp/gpytorch; git -C gpytorch checkout v1.8.1
  PYTHONPATH=gpytorch /usr/bin/python3 bench/sgpr_gpytorch.py --datasets ../shared/datasets

Usage: sgpr_gpytorch.py [--datasets DIR] [--inducing M] [--iterations K] [--lr LR]
                        [--threads T] [--seed S]
"""
import argparse
import csv
import json
import os
import sys
import time


def load_kin40k(root):
    path = os.path.join(root, "kin40k.csv")
    with open(path) as f:
        rows = list(csv.reader(f))
    data = [[float(v) for v in r] for r in rows[1:]]
    return data[:10000], data[10000:40000]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", default=os.environ.get("GPSERVE_DATASETS", "../shared/datasets"))
    ap.add_argument("--inducing", type=int, default=512)
    ap.add_argument("--iterations", type=int, default=200)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    try:
        import torch
        import gpytorch
    except ImportError as e:
        print(json.dumps({"skipped": "torch or gpytorch missing: %s" % e}))
        return 0
    if not os.path.exists(os.path.join(a.datasets, "kin40k.csv")):
        print(json.dumps({"skipped": "kin40k.csv not found under %s" % a.datasets}))
        return 0
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    train, test = load_kin40k(a.datasets)
    tr = torch.tensor(train, dtype=torch.float64)
    te = torch.tensor(test, dtype=torch.float64)
    X, y, Xt, yt = tr[:, :-1], tr[:, -1], te[:, :-1], te[:, -1]
    xm, xs = X.mean(0), X.std(0, unbiased=False)
    ym, ys = y.mean(), y.std(unbiased=False)
    X, Xt, yw = (X - xm) / xs, (Xt - xm) / xs, (y - ym) / ys

    class SGPR(gpytorch.models.ExactGP):
        def __init__(self, X, y, lik, Z):
            super().__init__(X, y, lik)
            self.mean_module = gpytorch.means.ConstantMean()
            base = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=X.shape[1]))
            self.covar_module = gpytorch.kernels.InducingPointKernel(
                base, inducing_points=Z.clone(), likelihood=lik)

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x),
                                                             self.covar_module(x))

    Z = X[torch.randperm(X.shape[0])[: a.inducing]]
    lik = gpytorch.likelihoods.GaussianLikelihood().double()
    model = SGPR(X, yw, lik, Z).double()
    t0 = time.perf_counter()
    model.train()
    lik.train()
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    mll = gpytorch.mlls.ExactMarginalLogLikelihood(lik, model)
    for _ in range(a.iterations):
        opt.zero_grad()
        loss = -mll(model(X), yw)
        loss.backward()
        opt.step()
    fit_seconds = time.perf_counter() - t0
    model.eval()
    lik.eval()
    with torch.no_grad(), gpytorch.settings.fast_pred_var():
        mean = model(Xt).mean * ys + ym
    seconds = time.perf_counter() - t0
    rmse = float(torch.sqrt(torch.mean((mean - yt) ** 2)))
    print(json.dumps({"peer": "gpytorch %s SGPR" % gpytorch.__version__, "torch": torch.__version__,
                      "threads": a.threads, "inducing": a.inducing, "iterations": a.iterations,
                      "lr": a.lr, "fit_seconds": round(fit_seconds, 2),
                      "fit_predict_seconds": round(seconds, 2), "rmse": round(rmse, 4)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
