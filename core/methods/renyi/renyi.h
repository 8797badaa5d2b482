/* gpserve core: the Renyi Gaussian process (method "renyi"; Yue and Al
 * Kontar, docs/methods/renyi-gp.md): inducing-point GP regression fitted by the
 * Renyi alpha-divergence bound
 *   L_a = log N(y; 0, Xi) - a/(2(1-a)) log|A|,
 *   Xi = s2 I + (1-a) Kff + a Q,   s2 A = Xi - Q   (the corrected
 *   identity of docs/methods/renyi-gp.md §2.2; the paper's (1-2a) form is wrong).
 * a = 0 is the exact LML, a -> 1 the sgpr bound; L_a is non-increasing in a.
 *
 * Dense algorithm with analytic gradients (docs/methods/renyi-gp.md §2.4): one Cholesky of the
 * N x N Xi and its inverse per evaluation, O(N^3) time and three N x N
 * matrices; guarded by the option dense_max_points (default 5000 training
 * points; above it, 413 naming the option, or use sgpr).
 *
 * Options:
 *   alpha               in [0, 1 - 1e-6] (default 0.5), or "auto": each a of
 *                       0.30, 0.35, ..., 0.70 is fitted on 80% of the
 *                       training rows (seeded split) and scored by RMSE on
 *                       the other 20%; the best (ties: closer to 0.5) is
 *                       refitted on all rows and reported
 *   inducing            M (default 64; at most N)
 *   inducing_selection, optimize_inducing, max_iterations, tolerance: as sgpr
 *   dense_max_points    the cap above
 *
 * Predict: the whitened state mt = V Xi^{-1} y, C = I - V Xi^{-1} V^T
 * (docs/methods/renyi-gp.md §3.1), O(M^2) per point; samples §3.2 (core/inducing/inducing.h). Reported: L_a,
 * the exact LML and gap (log p(y) - L_a, the Renyi divergence of q* from the
 * posterior), the trace term t, t / (N v) and the certified bound G(a) of
 * §5.2, and the upper bound L_upper of §5.1. */
#ifndef GP_RENYI_H
#define GP_RENYI_H

#include "core/methods/renyi/bound.h"
#include "core/model/model.h"

extern const gp_method gp_method_renyi;

#define GP_RENYI_ALPHA_MAX (1.0 - 1e-6)
#define GP_RENYI_DENSE_MAX_DEFAULT 5000

#endif
