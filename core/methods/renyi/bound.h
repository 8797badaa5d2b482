/* The Renyi bound (method "renyi", core/methods/renyi/renyi.h):
 *   L_a = log N(y; 0, Xi) - a/(2(1-a)) log|A|,
 *   Xi = s2 I + (1-a) Kff + a Q,   s2 A = Xi - Q,
 * its analytic gradient and the terms of docs/methods/renyi-gp.md §5. */
#ifndef GP_METHODS_RENYI_BOUND_H
#define GP_METHODS_RENYI_BOUND_H

#include <stddef.h>

#include "core/base/error.h"
#include "core/kernel/kernel.h"
#include "core/model/mean.h"

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

/* A mean profiled out of the bound: its type (basis of the points X) and
 * where the estimate goes (1 + d entries at most; may be NULL). */
typedef struct renyi_mean {
    gp_mean_type type;
    double *beta;
} renyi_mean;

/* The bound behind both (r: known noise or NULL; mean: NULL or zero for
 * none); want_upper adds L_upper (one more N x N Cholesky), which the
 * optimiser's evaluations skip. With a mean, L_a is that of y - H beta at
 * the GLS estimate beta = (H^T Xi^{-1} H)^{-1} H^T Xi^{-1} y (y enters L_a
 * only through log N(y; 0, Xi)), i.e. the maximum over beta; the gradient
 * is the one at that beta (envelope theorem), the posterior, L_upper and
 * G(a) those of the residual. */
int renyi_bound_eval(const gp_kernel *k, double s2, double a, const double *X, size_t n,
                     size_t d, const double *y, const double *r, const renyi_mean *mean,
                     const double *Z, size_t m, gp_renyi_terms *terms, int want_upper,
                     double *grad, double *gz, struct gp_inducing_post *post, gp_error *err);

#endif
