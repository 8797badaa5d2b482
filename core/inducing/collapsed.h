/* gpserve core: Titsias' collapsed bound for inducing points and its
 * analytic gradient (the objective of sgpr, docs/methods/sparse-variational-
 * and-pls.md §5.4, and of gwi's prior fit), in the notation of
 * core/inducing/inducing.h:
 *   V = L^{-1} Kuf, B = I + V V^T / s2, Lb = chol(B), c = Lb^{-1} V y / s2,
 *   t = sum_i k(x_i, x_i) - tr(V V^T),
 *   F = -N/2 log(2 pi s2) - sum log diag Lb - (y.y / s2 - c.c) / 2 - t / (2 s2)
 *     = log N(y; 0, Q + s2 I) - t / (2 s2).
 * Gradient (derived in core/inducing/collapsed.c): with beta = (Q + s2 I)^{-1} y
 * and mw = B^{-1} V y / s2 (= V beta), the sensitivities are
 *   dF/dKuf = 2 L^{-T} E,  E = ((I - B^{-1}) V / s2 + mw beta^T) / 2
 *   dF/dKuu = -L^{-T} (B - 2I + B^{-1} + mw mw^T) L^{-1} / 2
 *   dF/dk_ii = -1 / (2 s2)
 *   dF/ds2 = ((N - M + tr B^{-1}) / s2 - beta.beta) (-1/2) + t / (2 s2^2)
 * O(N M^2 + M^3) time and O(N M) memory per evaluation; no N x N matrix. */
#ifndef GP_INDUCING_COLLAPSED_H
#define GP_INDUCING_COLLAPSED_H

#include <stddef.h>

#include "core/base/error.h"
#include "core/inducing/inducing.h"
#include "core/kernel/kernel.h"

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

/* The same with known per-point noise r (n working-unit variances, NULL:
 * gp_sgpr_bound): the noise of row i is lambda_i = s2 + r_i (s2 may be 0
 * when every r_i > 0), so F = log N(y; 0, Q + Lambda) - sum t_i / (2
 * lambda_i); grad's last entry is dF/dlog s2 with r held; terms->trace is
 * the unweighted sum of t_i. Computed by whitening rows with lambda_i^{-1/2}
 * (collapsed.c, whiten_by_noise): the posterior post is q(u) under Lambda. */
int gp_sgpr_bound_noise(const gp_kernel *k, double s2, const double *r, const double *X,
                        size_t n, size_t d, const double *y, const double *Z, size_t m,
                        gp_sgpr_terms *terms, double *grad, double *gz,
                        struct gp_inducing_post *post, gp_error *err);

/* The same with a mean's basis H (n x p, column-major; NULL: none)
 * profiled out: F at the GLS estimate beta = (H^T S^{-1} H)^{-1} H^T S^{-1} y
 * under S = Q + Lambda (into beta, p entries), i.e. max over beta of the
 * bound for targets y - H beta (the trace term does not involve y); the
 * gradient is the one at that beta (envelope theorem). The posterior post is
 * then of the residual y - H beta. */
int gp_sgpr_bound_mean(const gp_kernel *k, double s2, const double *r, const double *H,
                       size_t p, double *beta, const double *X, size_t n, size_t d,
                       const double *y, const double *Z, size_t m, gp_sgpr_terms *terms,
                       double *grad, double *gz, struct gp_inducing_post *post, gp_error *err);

/* ---- the M x M algebra ----
 * Everything of an evaluation after the sums over rows, shared by the bound
 * on rows in memory (collapsed.c) and the bound on rows read in chunks and
 * summed over processes (core/inducing/collapsed_rows.h), so that both do
 * the same arithmetic on the same sums. The caller writes L (Kuu's factor),
 * the lower triangle of B (V V^T / s2) and vy (V y); the functions below
 * take it from there, in this order. */
typedef struct gp_collapsed_mm {
    size_t m;
    double *L;    /* chol(Kuu + jitter I) */
    double *B;    /* I + V V^T / s2, full after gp_collapsed_factor_b */
    double *Lb;   /* chol(B) */
    double *Binv; /* B^{-1}, full */
    double *T;    /* L^{-T} (I - B^{-1}) / (2 s2), then dF/dKuu (gradient only) */
    double *vy;   /* V y */
    double *c;    /* Lb^{-1} V y / s2 */
    double *mw;   /* B^{-1} V y / s2 */
    double *h;    /* L^{-T} mw / 2 (gradient only) */
} gp_collapsed_mm;

/* T and h only with_grad. */
int gp_collapsed_mm_alloc(gp_collapsed_mm *a, size_t m, int with_grad, gp_error *err);
void gp_collapsed_mm_free(gp_collapsed_mm *a);
/* B = I + lower(B) made full, Lb = chol(B); GP_ENOTPD when it fails. */
int gp_collapsed_factor_b(gp_collapsed_mm *a, gp_error *err);
/* c and mw from vy. */
void gp_collapsed_solve_vy(gp_collapsed_mm *a, double s2);
/* F of n rows with y.y = yy and trace t = sum k_ii - tr(V V^T). */
double gp_collapsed_value(const gp_collapsed_mm *a, double n, double s2, double yy, double trace);
/* Binv from Lb. */
int gp_collapsed_invert_b(gp_collapsed_mm *a, gp_error *err);
/* The gradient's global quantities T and h (from Binv and mw). */
void gp_collapsed_sensitivity_globals(gp_collapsed_mm *a, double s2);
/* The sensitivity to Kuf of n rows (V m x n, y n): beta = (y - V^T mw) / s2
 * (n) and Wuf = 2 T V + 2 h beta^T (m x n); after the globals. */
void gp_collapsed_sensitivity_fu(const gp_collapsed_mm *a, double s2, const double *V,
                                 const double *y, size_t n, double *beta, double *Wuf);
/* dF/dKuu (symmetric) into T, once every row's Wuf has been used. */
void gp_collapsed_sensitivity_uu(gp_collapsed_mm *a);
/* dF/dlog s2 of n rows, with bb = beta.beta over them all. */
double gp_collapsed_noise_grad(const gp_collapsed_mm *a, double n, double s2, double bb,
                               double trace);
/* post (allocated here) = the whitened posterior: Z (d x m), L, Binv, mw. */
int gp_collapsed_fill_post(const gp_collapsed_mm *a, const double *Z, size_t d, double jitter,
                           struct gp_inducing_post *post, gp_error *err);

/* The training data of a collapsed-bound fit (working units, point-major
 * X: d x n), and the bound as the gp_inducing_objective that
 * gp_inducing_optimise / gp_inducing_fit maximise (ctx: a gp_collapsed_data):
 * sgpr's objective, and gwi's prior fit. */
typedef struct gp_collapsed_data {
    const double *X, *y;
    size_t n, d;
    /* The objective's buffers (three m x n among them), allocated by its
     * first call and kept for the next ones, so that an optimisation does
     * not map and fault in ~100 MB an evaluation at n = 10000, m = 512.
     * NULL to begin with; gp_collapsed_data_release frees them. */
    struct gp_sgpr_scratch *scratch;
    const double *r; /* known per-point noise, working units (NULL: none) */
    /* A mean's basis (n x p; NULL: zero mean) profiled out by every
     * evaluation, its estimate written to beta (p). */
    const double *H;
    size_t p;
    double *beta;
} gp_collapsed_data;

int gp_collapsed_objective(void *ctx, const gp_kernel *k, double s2, const double *Z, size_t m,
                           double *f, double *grad, double *gz);
void gp_collapsed_data_release(gp_collapsed_data *data);

#endif
