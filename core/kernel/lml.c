/* The dense Gaussian log marginal likelihood: see core/kernel/lml.h. */
#include "core/kernel/lml.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/linalg/blocked.h"
#include "core/model/mean.h"

#define LOG_2PI 1.8378770664093454836

/* ---- the LML and its gradient on a caller-provided n x n buffer ---- */

/* Factorise K + s2 I (+ diag r) into A (lower). */
static int factor_covariance(const gp_kernel *k, double s2, const double *r, const double *Xt,
                             size_t n, double *A, const gp_cancel *cancel, gp_chol_info *info,
                             gp_error *err)
{
    if (gp_kernel_gram_cancellable(k, Xt, n, A, n, cancel))
        return gp_error_set(err, GP_ECANCELLED, NULL, "cancelled building the kernel matrix");
    for (size_t i = 0; i < n; i++)
        A[i * n + i] += s2;
    for (size_t i = 0; r && i < n; i++)
        A[i * n + i] += r[i];
    return gp_cholesky_jitter_cancellable(A, n, n, cancel, info, err);
}

/* The mean profiled out on the factor L of C (in A): W = L^{-1} H, z =
 * L^{-1} y (in alpha), beta = (W^T W)^{-1} W^T z (the GLS estimate
 * (H^T C^{-1} H)^{-1} H^T C^{-1} y), and z := z - W beta = L^{-1} (y - H beta).
 * O(n^2 p). */
static int profile_mean(const double *A, size_t n, const gp_lml_basis *b, double *z,
                        gp_error *err)
{
    size_t p = b->p;
    double *G = b->work + n * p, *rhs = G + p * p;
    memcpy(b->work, b->H, n * p * sizeof *b->work);
    gp_trsm_lower(A, n, n, 0, b->work, p, n);
    cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)p, (blasint)n, 1.0, b->work,
                (blasint)n, 0.0, G, (blasint)p);
    cblas_dgemv(CblasColMajor, CblasTrans, (blasint)n, (blasint)p, 1.0, b->work, (blasint)n, z, 1,
                0.0, rhs, 1);
    int rc = gp_mean_solve_normal(G, rhs, p, err);
    if (rc)
        return rc;
    memcpy(b->beta, rhs, p * sizeof *rhs);
    cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)n, (blasint)p, -1.0, b->work, (blasint)n,
                rhs, 1, 1.0, z, 1);
    return GP_OK;
}

/* alpha = C^{-1} (y - H beta) and the LML of the residual, with the mean
 * profiled (basis not NULL): the quadratic form is |L^{-1} (y - H beta)|^2. */
static int solve_profiled(const double *A, size_t n, const double *y, const gp_lml_basis *b,
                          double *alpha, double *lml, const gp_cancel *cancel, gp_error *err)
{
    memcpy(alpha, y, n * sizeof *alpha);
    gp_trsm_lower(A, n, n, 0, alpha, 1, n);
    int rc = profile_mean(A, n, b, alpha, err);
    if (rc)
        return rc;
    double quad = cblas_ddot((blasint)n, alpha, 1, alpha, 1);
    if (gp_cancel_requested(cancel))
        return gp_error_set(err, GP_ECANCELLED, NULL, "cancelled solving for alpha");
    gp_trsm_lower(A, n, n, 1, alpha, 1, n);
    *lml = -0.5 * quad - 0.5 * gp_chol_logdet(A, n, n) - 0.5 * (double)n * LOG_2PI;
    return GP_OK;
}

int gp_exact_lml_factor_basis(const gp_kernel *k, double s2, const double *r,
                              const gp_lml_basis *basis, const double *Xt, size_t n,
                              const double *y, double *A, double *alpha, double *lml,
                              const gp_cancel *cancel, gp_chol_info *info, gp_error *err)
{
    int rc = factor_covariance(k, s2, r, Xt, n, A, cancel, info, err);
    if (rc)
        return rc;
    if (basis && basis->p)
        return solve_profiled(A, n, y, basis, alpha, lml, cancel, err);
    /* Two triangular solves, each a pass over n^2 / 2 doubles (a few tenths
     * of a second at n = 20000): the token is polled between them. */
    memcpy(alpha, y, n * sizeof *alpha);
    gp_trsm_lower(A, n, n, 0, alpha, 1, n);
    if (gp_cancel_requested(cancel))
        return gp_error_set(err, GP_ECANCELLED, NULL, "cancelled solving for alpha");
    gp_trsm_lower(A, n, n, 1, alpha, 1, n);
    *lml = -0.5 * cblas_ddot((blasint)n, y, 1, alpha, 1) - 0.5 * gp_chol_logdet(A, n, n) -
           0.5 * (double)n * LOG_2PI;
    return GP_OK;
}

/* Factorise K + s2 I (+ diag r) into A (lower) and solve alpha; returns the LML. */
int gp_exact_lml_factor_noise(const gp_kernel *k, double s2, const double *r, const double *Xt,
                              size_t n, const double *y, double *A, double *alpha, double *lml,
                              const gp_cancel *cancel, gp_chol_info *info, gp_error *err)
{
    return gp_exact_lml_factor_basis(k, s2, r, NULL, Xt, n, y, A, alpha, lml, cancel, info, err);
}

int gp_exact_lml_factor(const gp_kernel *k, double s2, const double *Xt, size_t n,
                        const double *y, double *A, double *alpha, double *lml,
                        const gp_cancel *cancel, gp_chol_info *info, gp_error *err)
{
    return gp_exact_lml_factor_noise(k, s2, NULL, Xt, n, y, A, alpha, lml, cancel, info, err);
}

/* A (the inverse, lower) := alpha alpha^T - A, a band of columns between
 * polls; returns the trace of the result, or NAN when cancelled. */
static double weights_from_inverse(double *A, size_t n, const double *alpha,
                                   const gp_cancel *cancel)
{
    double trace = 0.0;
    for (size_t j = 0; j < n; j++) {
        if (j % GP_BLOCK_ORDER == 0 && gp_cancel_requested(cancel))
            return NAN;
        double aj = alpha[j];
        double *col = A + j * n;
        for (size_t i = j; i < n; i++)
            col[i] = alpha[i] * aj - col[i];
        trace += col[j];
    }
    return trace;
}

/* grad_theta LML = 1/2 tr((alpha alpha^T - K^{-1}) dK/dtheta). A holds the
 * factor on entry and is overwritten with W = alpha alpha^T - K^{-1} (lower).
 * The inverse is the blocked one so that a cancellation reaches it. */
static int lml_gradient(const gp_kernel *k, double s2, const double *Xt, size_t n, double *A,
                        const double *alpha, double *grad, const gp_cancel *cancel,
                        gp_error *err)
{
    int rc = gp_potri_blocked(A, n, n, cancel, err);
    if (rc)
        return rc;
    double trace = weights_from_inverse(A, n, alpha, cancel);
    size_t np = gp_kernel_n_params(k);
    if (isnan(trace) ||
        gp_kernel_gram_grad_contract_cancellable(k, Xt, n, A, n, grad, cancel) != GP_OK)
        return gp_error_set(err, GP_ECANCELLED, NULL, "cancelled during the LML gradient");
    for (size_t i = 0; i < np; i++)
        grad[i] *= 0.5;
    grad[np] = 0.5 * s2 * trace; /* dK/dlog s2 = s2 I */
    return GP_OK;
}

/* With the mean profiled, the gradient at the estimate is the gradient at
 * fixed beta (envelope theorem: dLML/dbeta = 0 there), i.e. the formula
 * with alpha of the residual. */
int gp_exact_lml_grad_basis_on(const gp_kernel *k, double s2, const double *r,
                               const gp_lml_basis *basis, const double *Xt, size_t n,
                               const double *y, double *A, double *alpha, double *lml,
                               double *grad, const gp_cancel *cancel, gp_chol_info *info,
                               gp_error *err)
{
    int rc = gp_exact_lml_factor_basis(k, s2, r, basis, Xt, n, y, A, alpha, lml, cancel, info,
                                       err);
    if (rc == GP_OK && grad) /* the known r is constant: d/dlog s2 is unchanged */
        rc = lml_gradient(k, s2, Xt, n, A, alpha, grad, cancel, err);
    return rc;
}

int gp_exact_lml_grad_noise_on(const gp_kernel *k, double s2, const double *r,
                               const double *Xt, size_t n, const double *y, double *A,
                               double *alpha, double *lml, double *grad,
                               const gp_cancel *cancel, gp_chol_info *info, gp_error *err)
{
    return gp_exact_lml_grad_basis_on(k, s2, r, NULL, Xt, n, y, A, alpha, lml, grad, cancel,
                                      info, err);
}

int gp_exact_lml_grad_on(const gp_kernel *k, double s2, const double *Xt, size_t n,
                         const double *y, double *A, double *alpha, double *lml, double *grad,
                         const gp_cancel *cancel, gp_chol_info *info, gp_error *err)
{
    return gp_exact_lml_grad_noise_on(k, s2, NULL, Xt, n, y, A, alpha, lml, grad, cancel, info,
                                      err);
}

int gp_exact_lml_grad(const gp_kernel *k, double noise_variance, const double *Xt, size_t d,
                      size_t n, const double *y, double *lml, double *grad, gp_error *err)
{
    return gp_exact_lml_grad_noise(k, noise_variance, NULL, Xt, d, n, y, lml, grad, err);
}

int gp_exact_lml_grad_noise(const gp_kernel *k, double noise_variance, const double *r,
                            const double *Xt, size_t d, size_t n, const double *y, double *lml,
                            double *grad, gp_error *err)
{
    size_t nn = 0;
    if (k->input_dim != d)
        return gp_error_set(err, GP_EDATA, "kernel", "kernel dimension %zu != %zu",
                            k->input_dim, d);
    int rc = gp_checked_size(n, n, &nn, err);
    if (rc)
        return rc;
    double *A = gp_alloc_doubles(nn, err);
    double *alpha = gp_alloc_doubles(n, err);
    rc = A && alpha ? gp_exact_lml_grad_noise_on(k, noise_variance, r, Xt, n, y, A, alpha, lml,
                                                 grad, NULL, NULL, err)
                    : GP_ENOMEM;
    free(A);
    free(alpha);
    return rc;
}
