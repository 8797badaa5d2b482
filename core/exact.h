/* gpserve core: exact GP regression (method "exact").
 *
 * Hyperparameters maximise the log marginal likelihood (LML) with analytic
 * gradients and L-BFGS, with optional seeded random restarts. The fit caches the
 * Cholesky factor L of K + s2 I (+ jitter) and alpha = (K + s2 I)^{-1} y, so a
 * prediction is a kernel row plus a triangular solve. Memory: one N x N matrix
 * during the fit and one (the factor) per fitted model; N is capped by
 * max_train_points (default 20000). */
#ifndef GP_EXACT_H
#define GP_EXACT_H

#include <stddef.h>

#include "core/kernel.h"
#include "core/method.h"

extern const gp_method gp_method_exact;

/* LML of y ~ N(0, K + noise_variance I) and its gradient with respect to every
 * kernel parameter (log space, gp_kernel_n_params entries) followed by
 * d LML / d log(noise_variance). Xt is d x n point-major (each column a point).
 * grad may be NULL (value only). Uses one n x n buffer allocated here; the
 * jitter policy of gp_cholesky_jitter applies (GP_ENOTPD past its last step). */
int gp_exact_lml_grad(const gp_kernel *k, double noise_variance, const double *Xt, size_t d,
                      size_t n, const double *y, double *lml, double *grad, gp_error *err);

#endif
