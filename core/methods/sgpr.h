/* gpserve core: sparse variational GP regression with inducing points
 * (method "sgpr"; Titsias 2009, docs/methods/sparse-variational-and-pls.md §5.4).
 *
 * The collapsed bound, with V = L^{-1} Kuf (core/inducing/inducing.h), B = I + V V^T / s2,
 * Lb = chol(B), c = Lb^{-1} V y / s2 and the trace term t = sum_i k(x_i,x_i) - tr(V V^T):
 *   F = -N/2 log(2 pi s2) - sum log diag Lb - (y.y / s2 - c.c) / 2 - t / (2 s2)
 *     = log N(y; 0, Q + s2 I) - t / (2 s2).
 * Gradient (derived in core/methods/sgpr.c): with beta = (Q + s2 I)^{-1} y and
 * mw = B^{-1} V y / s2 (= V beta), the sensitivities are
 *   dF/dKuf = 2 L^{-T} E,  E = ((I - B^{-1}) V / s2 + mw beta^T) / 2
 *   dF/dKuu = -L^{-T} (B - 2I + B^{-1} + mw mw^T) L^{-1} / 2
 *   dF/dk_ii = -1 / (2 s2)
 *   dF/ds2 = ((N - M + tr B^{-1}) / s2 - beta.beta) (-1/2) + t / (2 s2^2)
 * O(N M^2 + M^3) time and O(N M) memory per evaluation (three M x N level-3
 * calls: the triangular solve for V, the syrk for B, the gemm for E; the
 * contraction to the kernel parameters and Z reuses Kuf's values, so rbf
 * needs no second exp); no N x N matrix.
 *
 * Options (GET /v1/methods lists them):
 *   inducing            M (default min(N, 256))
 *   inducing_selection  greedy (default) | kmeans | random (core/inducing/inducing.h)
 *   optimize_inducing   true (default): Z is optimised with the hyperparameters
 *                       (on kin40k, M = 512, this takes the test RMSE from 0.31
 *                       to 0.20); false: Z stays where selection put it
 *   reselect            with greedy selection and fixed Z: re-select Z under the
 *                       fitted kernel and refit, up to this many rounds while the
 *                       bound improves (default 2; gp_inducing_fit)
 *   max_iterations, tolerance   L-BFGS limits (per round)
 *
 * Predict: the whitened posterior g ~ N(B^{-1} V y / s2, B^{-1}), O(M^2) per
 * point (core/inducing/inducing.h). Reported: the bound (objective), the trace term
 * and, for N <= GP_SGPR_EXACT_REPORT_MAX, the exact log marginal likelihood
 * and the gap (exact - bound, the KL of q from the posterior). */
#ifndef GP_SGPR_H
#define GP_SGPR_H

#include "core/model/model.h"

extern const gp_method gp_method_sgpr;

/* The exact LML and the gap are reported up to this many training points
 * (one N x N Cholesky after the fit). */
#define GP_SGPR_EXACT_REPORT_MAX 5000

typedef struct gp_sgpr_terms {
    double bound; /* F */
    double trace; /* t = tr(Kff - Q) */
} gp_sgpr_terms;

/* F at kernel k, noise s2, inducing inputs Z (d x m) for data X (d x n,
 * point-major) and targets y (all working units). grad (NULL for the value
 * only): gp_kernel_n_params(k) entries then dF/dlog s2; gz (d x m, may be
 * NULL): dF/dZ. When post is not NULL it receives the whitened posterior
 * (gp_inducing_post, allocated here). GP_ENOTPD when B or Kuu cannot be
 * factorised. */
struct gp_inducing_post;
int gp_sgpr_bound(const gp_kernel *k, double s2, const double *X, size_t n, size_t d,
                  const double *y, const double *Z, size_t m, gp_sgpr_terms *terms,
                  double *grad, double *gz, struct gp_inducing_post *post, gp_error *err);

#endif
