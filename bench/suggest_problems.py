"""The test problems of bench/suggest.py (and of the hand-written peer loop,
bench/suggest_sklearn.py): each a search space in gpserve's study shape, the
objective (minimised) and constraints (feasible when <= 0) as plain Python,
and the known optimum the simple regret is measured from.

  branin     2-D, x1 in [-5, 10], x2 in [0, 15]; f* = 0.397887357729739
             (three global minima; Dixon and Szego 1978).
  hartmann6  6-D on [0, 1]^6; f* = -3.32236801141551 at
             (0.20169, 0.150011, 0.476874, 0.275332, 0.311652, 0.6573).
  gramacy    2-D on [0, 1]^2 with two constraints (Gramacy et al. 2016, "Modeling an
             augmented Lagrangian for blackbox constrained optimization", Technometrics 58):
             f = x1 + x2,  c1 = 1.5 - x1 - 2 x2 - 0.5 sin(2 pi (x1^2 - 2 x2)) <= 0,
             c2 = x1^2 + x2^2 - 1.5 <= 0;  f* = 0.5997880513 at (0.195123, 0.404666)
             (SLSQP from 200 starts, this repository; the paper gives 0.5998).
             Before the first feasible evaluation, the regret counts f's largest value
             on the box (2) minus f*.
"""

import math

_HA = [1.0, 1.2, 3.0, 3.2]
_HA_A = [[10, 3, 17, 3.5, 1.7, 8], [0.05, 10, 17, 0.1, 8, 14],
         [3, 3.5, 1.7, 10, 17, 8], [17, 8, 0.05, 10, 0.1, 14]]
_HA_P = [[0.1312, 0.1696, 0.5569, 0.0124, 0.8283, 0.5886],
         [0.2329, 0.4135, 0.8307, 0.3736, 0.1004, 0.9991],
         [0.2348, 0.1451, 0.3522, 0.2883, 0.3047, 0.6650],
         [0.4047, 0.8828, 0.8732, 0.5743, 0.1091, 0.0381]]


def branin(x):
    x1, x2 = x
    return ((x2 - 5.1 / (4 * math.pi ** 2) * x1 ** 2 + 5 / math.pi * x1 - 6) ** 2
            + 10 * (1 - 1 / (8 * math.pi)) * math.cos(x1) + 10)


def hartmann6(x):
    return -sum(a * math.exp(-sum(A * (v - P) ** 2 for A, v, P in zip(Ai, x, Pi)))
                for a, Ai, Pi in zip(_HA, _HA_A, _HA_P))


def gramacy(x):
    return x[0] + x[1]


def gramacy_c1(x):
    return 1.5 - x[0] - 2 * x[1] - 0.5 * math.sin(2 * math.pi * (x[0] ** 2 - 2 * x[1]))


def gramacy_c2(x):
    return x[0] ** 2 + x[1] ** 2 - 1.5


class Problem:
    def __init__(self, name, bounds, f, f_star, constraints=(), worst=None):
        self.name = name
        self.bounds = bounds                  # [(lo, hi)] per input
        self.f = f
        self.f_star = f_star
        self.constraints = list(constraints)  # [(metric name, c(x))], feasible when c <= 0
        self.worst = worst                    # the regret's f before a feasible point

    @property
    def dim(self):
        return len(self.bounds)

    def parameters(self):
        """The study's parameters: x0, x1, ... as doubles in their bounds."""
        return [{"name": "x%d" % j, "type": "double", "bounds": [lo, hi]}
                for j, (lo, hi) in enumerate(self.bounds)]

    def point(self, params):
        return [float(params["x%d" % j]) for j in range(self.dim)]

    def metrics(self, x):
        out = {"y": self.f(x)}
        for name, c in self.constraints:
            out[name] = c(x)
        return out

    def feasible(self, metrics):
        return all(metrics[name] <= 0 for name, _ in self.constraints)

    def from_unit(self, u):
        return [lo + (hi - lo) * v for v, (lo, hi) in zip(u, self.bounds)]

    def regret_trace(self, evaluations):
        """Simple regret after each evaluation: the best feasible f so far minus f*.
        evaluations: metric dicts in evaluation order (None: infeasible, no metrics)."""
        best = math.inf
        trace = []
        for m in evaluations:
            if m is not None and self.feasible(m):
                best = min(best, m["y"])
            f = best if best < math.inf else self.worst
            trace.append(f - self.f_star if f is not None else math.inf)
        return trace


PROBLEMS = {
    "branin": Problem("branin", [(-5.0, 10.0), (0.0, 15.0)], branin, 0.397887357729739),
    "hartmann6": Problem("hartmann6", [(0.0, 1.0)] * 6, hartmann6, -3.32236801141551),
    "gramacy": Problem("gramacy", [(0.0, 1.0)] * 2, gramacy, 0.5997880513358005,
                       constraints=[("c1", gramacy_c1), ("c2", gramacy_c2)], worst=2.0),
}
