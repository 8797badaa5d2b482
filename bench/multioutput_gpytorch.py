#!/usr/bin/env python3
"""GPyTorch's multitask exact GP as the peer of gpserve's coregionalised exact GP on Jura
(bench/results/multioutput.md; the protocol is in the shared datasets README): predict Cd at the
100 validation locations from the 259 training locations (Cd, Ni, Zn observed) plus Ni and Zn
observed at the 100 validation locations.

The model is GPyTorch's Hadamard multitask form (its tutorial "Hadamard Multitask GP
Regression"): one observed entry a row, with its task index, so a missing output is simply an
absent row; the covariance is RBF(x, x') * IndexKernel(num_tasks=3, rank=R)[t, t'] (no
ScaleKernel: the IndexKernel carries the scale, B = W W^T + diag(v)), a constant mean, and a
noise variance per task (a small Noise module indexing a vector of 3 noises by the task, since
GPyTorch 1.8's GaussianLikelihood has one noise and its MultitaskGaussianLikelihood needs the
Kronecker, isotopic form). Each output is standardised on its observed entries (as gpserve
does), the two location columns on the 359 fitted locations (as gpserve's `standardize` does on
its rows). Adam as the tutorial trains (lr 0.1, 50 iterations by default; --iterations for a
longer run), float64, torch.manual_seed(seed) before the model is built (IndexKernel's factor
starts random). Also an independent GP on Cd alone (ScaleKernel(RBF), one noise, the 259
training rows, the same Adam). Prints one JSON line per fit: label, seed, rank, iterations, lr,
threads, cd_mae (mg/kg, the 100 validation sites), fit_seconds, mll (the final training exact
marginal log likelihood per entry, working units, as GPyTorch reports it).

Needs torch (Debian: python3-torch) and GPyTorch 1.8.1 from its source tree:
  PYTHONPATH=/work/wt/gpytorch181 /usr/bin/python3 bench/multioutput_gpytorch.py
Without them (or without the Jura files) it prints one line {"skipped": "..."} and exits 0.

Usage: multioutput_gpytorch.py [--datasets DIR] [--ranks 1,2] [--seeds 0,1,2]
                               [--iterations K] [--lr LR] [--threads T]
"""
import argparse
import csv
import json
import os
import sys
import time

OUTPUTS = ("Cd", "Ni", "Zn")


def load(path):
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return [[float(r["Xloc"]), float(r["Yloc"])] for r in rows], \
        [[float(r[o]) for o in OUTPUTS] for r in rows]


def standardise(values):
    n = len(values)
    m = sum(values) / n
    s = (sum((v - m) ** 2 for v in values) / n) ** 0.5
    return m, (s if s > 0 else 1.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--datasets", default=os.environ.get("GPSERVE_DATASETS", "../shared/datasets"))
    ap.add_argument("--ranks", default="1,2")
    ap.add_argument("--seeds", default="0,1,2")
    ap.add_argument("--iterations", type=int, default=50)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--no-independent", action="store_true")
    a = ap.parse_args()
    try:
        import torch
        import gpytorch
    except ImportError as e:
        print(json.dumps({"skipped": "torch or gpytorch missing: %s (Debian python3-torch; "
                          "GPyTorch 1.8.1 source tree on PYTHONPATH)" % e}))
        return 0
    tr_path = os.path.join(a.datasets, "jura_train.csv")
    va_path = os.path.join(a.datasets, "jura_val.csv")
    if not (os.path.exists(tr_path) and os.path.exists(va_path)):
        print(json.dumps({"skipped": "jura_train.csv / jura_val.csv not found under %s" % a.datasets}))
        return 0
    torch.set_num_threads(a.threads)
    torch.use_deterministic_algorithms(True)
    Xtr, Ytr = load(tr_path)
    Xva, Yva = load(va_path)
    locs = Xtr + Xva
    # inputs standardised on the 359 fitted locations, outputs on their observed entries:
    # Cd on the 259 training rows, Ni and Zn on all 359
    xst = [standardise([p[c] for p in locs]) for c in range(2)]
    yst = [standardise([r[0] for r in Ytr])] + \
          [standardise([r[j] for r in Ytr + Yva]) for j in (1, 2)]

    def xw(p):
        return [(p[c] - xst[c][0]) / xst[c][1] for c in range(2)]

    def yw(v, j):
        return (v - yst[j][0]) / yst[j][1]

    # the observed entries, one a row: 259 x 3 training entries, then Ni and Zn at the 100
    # validation locations
    ex, et, ey = [], [], []
    for p, r in zip(Xtr, Ytr):
        for j in range(3):
            ex.append(xw(p)); et.append(j); ey.append(yw(r[j], j))
    for p, r in zip(Xva, Yva):
        for j in (1, 2):
            ex.append(xw(p)); et.append(j); ey.append(yw(r[j], j))
    dt = torch.float64
    Xe = torch.tensor(ex, dtype=dt)
    Te = torch.tensor(et, dtype=torch.long).unsqueeze(-1)
    Ye = torch.tensor(ey, dtype=dt)
    Xv = torch.tensor([xw(p) for p in Xva], dtype=dt)
    Tv = torch.zeros(len(Xva), 1, dtype=torch.long)
    cd_true = [r[0] for r in Yva]

    class TaskNoise(gpytorch.likelihoods.noise_models.Noise):
        """A noise variance per task, picked by each row's task index (the last train input)."""

        def __init__(self, num_tasks):
            super().__init__()
            self.register_parameter("raw_noise", torch.nn.Parameter(torch.zeros(num_tasks)))
            self.register_constraint("raw_noise", gpytorch.constraints.GreaterThan(1e-4))

        def forward(self, *params, shape=None, **kwargs):
            inputs = params[0]
            tasks = inputs[-1] if isinstance(inputs, (list, tuple)) else inputs
            noise = self.raw_noise_constraint.transform(self.raw_noise)
            return gpytorch.lazy.DiagLazyTensor(noise[tasks.reshape(-1)])

    class TaskLikelihood(gpytorch.likelihoods.gaussian_likelihood._GaussianLikelihoodBase):
        def __init__(self, num_tasks):
            super().__init__(noise_covar=TaskNoise(num_tasks))

    class Hadamard(gpytorch.models.ExactGP):
        def __init__(self, train, y, lik, rank):
            super().__init__(train, y, lik)
            self.mean_module = gpytorch.means.ConstantMean()
            self.covar_module = gpytorch.kernels.RBFKernel(ard_num_dims=2)
            self.task_covar_module = gpytorch.kernels.IndexKernel(num_tasks=3, rank=rank)

        def forward(self, x, t):
            k = self.covar_module(x).mul(self.task_covar_module(t))
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), k)

    class Single(gpytorch.models.ExactGP):
        def __init__(self, x, y, lik):
            super().__init__(x, y, lik)
            self.mean_module = gpytorch.means.ConstantMean()
            self.covar_module = gpytorch.kernels.ScaleKernel(gpytorch.kernels.RBFKernel(ard_num_dims=2))

        def forward(self, x):
            return gpytorch.distributions.MultivariateNormal(self.mean_module(x), self.covar_module(x))

    def train(model, lik, inputs, y, with_params):
        model.train()
        lik.train()
        opt = torch.optim.Adam(model.parameters(), lr=a.lr)  # includes the likelihood's noises
        mll = gpytorch.mlls.ExactMarginalLogLikelihood(lik, model)
        loss = None
        for _ in range(a.iterations):
            opt.zero_grad()
            out = model(*inputs)
            loss = -(mll(out, y, inputs) if with_params else mll(out, y))
            loss.backward()
            opt.step()
        with torch.no_grad():
            out = model(*inputs)
            final = float(mll(out, y, inputs) if with_params else mll(out, y))
        return final

    def report(label, seed, rank, mean_w, t, mll):
        pred = [float(v) * yst[0][1] + yst[0][0] for v in mean_w]
        mae = sum(abs(p - q) for p, q in zip(pred, cd_true)) / len(cd_true)
        print(json.dumps({"peer": "gpytorch %s" % gpytorch.__version__, "torch": torch.__version__,
                          "label": label, "seed": seed, "rank": rank, "iterations": a.iterations,
                          "lr": a.lr, "threads": a.threads, "n_entries": len(ey) if rank else 259,
                          "cd_mae": round(mae, 4), "fit_seconds": round(t, 3),
                          "mll": round(mll, 4)}), flush=True)

    seeds = [int(s) for s in a.seeds.split(",") if s != ""]
    ranks = [int(r) for r in a.ranks.split(",") if r != ""]
    for seed in seeds:
        if not a.no_independent:
            torch.manual_seed(seed)
            xi = torch.tensor([xw(p) for p in Xtr], dtype=dt)
            yi = torch.tensor([yw(r[0], 0) for r in Ytr], dtype=dt)
            lik = gpytorch.likelihoods.GaussianLikelihood().double()
            model = Single(xi, yi, lik).double()
            t0 = time.perf_counter()
            mll = train(model, lik, (xi,), yi, False)
            t = time.perf_counter() - t0
            model.eval()
            lik.eval()
            with torch.no_grad():
                mean = model(Xv).mean
            report("independent GP (Cd alone)", seed, 0, mean, t, mll)
        for rank in ranks:
            torch.manual_seed(seed)
            lik = TaskLikelihood(3).double()
            model = Hadamard((Xe, Te), Ye, lik, rank).double()
            t0 = time.perf_counter()
            mll = train(model, lik, (Xe, Te), Ye, True)
            t = time.perf_counter() - t0
            model.eval()
            lik.eval()
            with torch.no_grad():
                mean = model(Xv, Tv).mean
            report("multitask Hadamard, IndexKernel rank %d" % rank, seed, rank, mean, t, mll)
    return 0


if __name__ == "__main__":
    sys.exit(main())
