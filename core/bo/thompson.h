/* gpserve core: Thompson sampling's continuous posterior draws.
 *
 * A draw of the latent f of a fitted model as a function of u that can be
 * evaluated and differentiated anywhere (so it is maximised by the same
 * multi-start box L-BFGS as the other acquisitions), from random Fourier
 * features (Rahimi & Recht 2007; the weight-space view of Rasmussen &
 * Williams §2.1): in the model's working units (x_w = (u - x_mean) /
 * x_scale, targets (y - y_mean) / y_scale less the mean function),
 *   phi_r(x) = sqrt(2 s2 / R) cos(omega_r^T (x_w / l) + b_r),  r = 1..R,
 * omega_r drawn from the kernel's spectral density (core/kernel/
 * kernel_spectral.h; rbf, matern12/32/52, with or without ARD), b_r uniform
 * on [0, 2 pi); then the Bayesian linear regression of the targets on phi
 * with prior w ~ N(0, I) and the model's noise s:
 *   A = Phi^T Phi + s I,  w | y ~ N(A^-1 Phi^T y_w, s A^-1),
 * and one draw w = mean + sqrt(s) L^-T z (A = L L^T) per draw index. The
 * function is y_mean + y_scale (phi(x_w)^T w + h(x_w)^T beta). Cost:
 * O(n R^2 + R^3) to build, O(R D) per value and gradient. Kernels without a
 * spectral density (sums, products, rq, periodic, linear, white, leaves on
 * some dimensions only): GP_EUNSUPPORTED naming "acquisition.type". */
#ifndef GP_BO_THOMPSON_H
#define GP_BO_THOMPSON_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/error.h"
#include "core/model/model.h"

#define GP_BO_THOMPSON_FEATURES 1024
/* The widest input a draw takes (the encoded search space's limit). */
#define GP_BO_THOMPSON_MAX_DIM 256

typedef struct gp_bo_thompson gp_bo_thompson;

/* The weight posterior of model on its n observations X (D x n, point-major,
 * the model's input units) and y (n, caller's units), with R features (0:
 * GP_BO_THOMPSON_FEATURES) from seed. */
int gp_bo_thompson_new(const gp_model *model, const double *X, const double *y, size_t n,
                       size_t R, uint64_t seed, gp_bo_thompson **out, gp_error *err);
/* Draw k's weights (a function of the seed and k alone). */
void gp_bo_thompson_draw(gp_bo_thompson *t, uint64_t k);
/* The current draw at u (D values) in the caller's units of y, and its
 * gradient with respect to u into grad (D entries, may be NULL). */
double gp_bo_thompson_value(const gp_bo_thompson *t, const double *u, double *grad);
void gp_bo_thompson_free(gp_bo_thompson *t);

#endif
