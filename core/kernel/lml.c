/* The dense Gaussian log marginal likelihood: see core/kernel/lml.h. */
#include "core/kernel/lml.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/linalg/blocked.h"

#define LOG_2PI 1.8378770664093454836

/* ---- the LML and its gradient on a caller-provided n x n buffer ---- */

/* Factorise K + s2 I (+ diag r) into A (lower) and solve alpha; returns the LML. */
int gp_exact_lml_factor_noise(const gp_kernel *k, double s2, const double *r, const double *Xt,
                              size_t n, const double *y, double *A, double *alpha, double *lml,
                              const gp_cancel *cancel, gp_chol_info *info, gp_error *err)
{
    if (gp_kernel_gram_cancellable(k, Xt, n, A, n, cancel))
        return gp_error_set(err, GP_ECANCELLED, NULL, "cancelled building the kernel matrix");
    for (size_t i = 0; i < n; i++)
        A[i * n + i] += s2;
    for (size_t i = 0; r && i < n; i++)
        A[i * n + i] += r[i];
    int rc = gp_cholesky_jitter_cancellable(A, n, n, cancel, info, err);
    if (rc)
        return rc;
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

int gp_exact_lml_grad_noise_on(const gp_kernel *k, double s2, const double *r,
                               const double *Xt, size_t n, const double *y, double *A,
                               double *alpha, double *lml, double *grad,
                               const gp_cancel *cancel, gp_chol_info *info, gp_error *err)
{
    int rc = gp_exact_lml_factor_noise(k, s2, r, Xt, n, y, A, alpha, lml, cancel, info, err);
    if (rc == GP_OK && grad) /* the known r is constant: d/dlog s2 is unchanged */
        rc = lml_gradient(k, s2, Xt, n, A, alpha, grad, cancel, err);
    return rc;
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
