/* gpserve core: the dense Gaussian log marginal likelihood of a kernel,
 *   LML = -y^T (K + s2 I)^{-1} y / 2 - log|K + s2 I| / 2 - (n / 2) log(2 pi),
 * and its analytic gradient. The objective of method exact, and the "exact
 * LML" diagnostic the inducing-point methods report beside their bounds. */
#ifndef GP_KERNEL_LML_H
#define GP_KERNEL_LML_H

#include <stddef.h>

#include "core/base/error.h"
#include "core/kernel/kernel.h"
#include "core/linalg/linalg.h"

/* LML of y ~ N(0, K + noise_variance I) and its gradient with respect to every
 * kernel parameter (log space, gp_kernel_n_params entries) followed by
 * d LML / d log(noise_variance). Xt is d x n point-major (each column a point).
 * grad may be NULL (value only). Uses one n x n buffer allocated here; the
 * jitter policy of gp_cholesky_jitter applies (GP_ENOTPD past its last step). */
int gp_exact_lml_grad(const gp_kernel *k, double noise_variance, const double *Xt, size_t d,
                      size_t n, const double *y, double *lml, double *grad, gp_error *err);

/* The same on caller-provided workspaces: A (n x n) receives the Cholesky
 * factor of K + s2 I (+ jitter, reported in info when non-NULL) and alpha (n)
 * = (K + s2 I)^{-1} y. gp_exact_lml_grad_on with grad != NULL then
 * overwrites A with alpha alpha^T - (K + s2 I)^{-1} (lower triangle).
 * cancel (may be NULL) is polled between blocks of the kernel matrix, of the
 * blocked factorisation and inverse (core/linalg/blocked.h) and of the
 * gradient contraction: GP_ECANCELLED then, with A and alpha garbage. */
int gp_exact_lml_factor(const gp_kernel *k, double s2, const double *Xt, size_t n,
                        const double *y, double *A, double *alpha, double *lml,
                        const gp_cancel *cancel, gp_chol_info *info, gp_error *err);
int gp_exact_lml_grad_on(const gp_kernel *k, double s2, const double *Xt, size_t n,
                         const double *y, double *A, double *alpha, double *lml, double *grad,
                         const gp_cancel *cancel, gp_chol_info *info, gp_error *err);

/* The same with known per-point noise: the covariance is K + s2 I + diag(r)
 * (r: n working-unit variances, NULL: none, the functions above). The
 * gradient's last entry stays d LML / d log s2 (r is constant). */
int gp_exact_lml_grad_noise(const gp_kernel *k, double noise_variance, const double *r,
                            const double *Xt, size_t d, size_t n, const double *y, double *lml,
                            double *grad, gp_error *err);
int gp_exact_lml_factor_noise(const gp_kernel *k, double s2, const double *r, const double *Xt,
                              size_t n, const double *y, double *A, double *alpha, double *lml,
                              const gp_cancel *cancel, gp_chol_info *info, gp_error *err);
int gp_exact_lml_grad_noise_on(const gp_kernel *k, double s2, const double *r,
                               const double *Xt, size_t n, const double *y, double *A,
                               double *alpha, double *lml, double *grad,
                               const gp_cancel *cancel, gp_chol_info *info, gp_error *err);

/* A mean's basis profiled out of the objective (docs/design/numerics.md
 * "Mean functions"): with H (n x p, column-major) the functions below give
 * the LML at the GLS estimate beta = (H^T C^{-1} H)^{-1} H^T C^{-1} y (into
 * beta, p entries), i.e. max over beta of log N(y; H beta, C), alpha =
 * C^{-1} (y - H beta), and the gradient in the kernel parameters and noise
 * at that beta (the envelope theorem: the profiled objective's gradient).
 * work: (n + p + 1) p doubles of scratch. basis NULL or p 0: the plain
 * functions above. */
typedef struct gp_lml_basis {
    const double *H;
    size_t p;
    double *beta;
    double *work;
} gp_lml_basis;

int gp_exact_lml_factor_basis(const gp_kernel *k, double s2, const double *r,
                              const gp_lml_basis *basis, const double *Xt, size_t n,
                              const double *y, double *A, double *alpha, double *lml,
                              const gp_cancel *cancel, gp_chol_info *info, gp_error *err);
int gp_exact_lml_grad_basis_on(const gp_kernel *k, double s2, const double *r,
                               const gp_lml_basis *basis, const double *Xt, size_t n,
                               const double *y, double *A, double *alpha, double *lml,
                               double *grad, const gp_cancel *cancel, gp_chol_info *info,
                               gp_error *err);

#endif
