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

#include "core/model/model.h"

extern const gp_method gp_method_renyi;

#define GP_RENYI_ALPHA_MAX (1.0 - 1e-6)
#define GP_RENYI_DENSE_MAX_DEFAULT 5000

typedef struct gp_renyi_terms {
    double bound;      /* L_a */
    double trace;      /* t = tr(Kff - Q) */
    double logdet_c;   /* log|C| */
    double upper;      /* L_upper (docs/methods/renyi-gp.md §5.1) */
    double certified;  /* G(a) (docs/methods/renyi-gp.md §5.2) */
} gp_renyi_terms;

/* L_a at kernel k, noise s2, order a in [0, 1) and inducing inputs Z (d x m)
 * for data X (d x n, point-major) and targets y (working units). grad (NULL
 * for the value only): gp_kernel_n_params(k) entries then dL/dlog s2; gz
 * (d x m, may be NULL): dL/dZ. post (may be NULL) receives the whitened
 * posterior (allocated here). Uses three n x n buffers allocated here.
 * GP_ENOTPD when Xi, C or Kuu cannot be factorised. */
struct gp_inducing_post;
int gp_renyi_bound(const gp_kernel *k, double s2, double a, const double *X, size_t n, size_t d,
                   const double *y, const double *Z, size_t m, gp_renyi_terms *terms,
                   double *grad, double *gz, struct gp_inducing_post *post, gp_error *err);

/* The same with known per-point noise r (n, working units; NULL: none): Xi =
 * Lambda + (1-a) Kff + a Q, Lambda = diag(s2 + r_i), and log|A| = log|Xi| +
 * log|C| - log|Lambda|; grad's last entry is dL/dlog s2 with r held. The
 * terms' upper and certified are NAN with r (derived for one s2 only). */
int gp_renyi_bound_noise(const gp_kernel *k, double s2, const double *r, double a,
                         const double *X, size_t n, size_t d, const double *y, const double *Z,
                         size_t m, gp_renyi_terms *terms, double *grad, double *gz,
                         struct gp_inducing_post *post, gp_error *err);

/* G(a) = a N/(2(1-a)) log(1 + (1-a) t/(N s2)) + ||y||^2 a t / (2 s2 (s2 + a t)). */
double gp_renyi_certified_gap(double a, size_t n, double s2, double trace, double y_sq);

#endif
