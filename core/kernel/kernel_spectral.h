/* Spectral densities of the stationary kernels (kernel_spectral.c). */
#ifndef GP_KERNEL_SPECTRAL_H
#define GP_KERNEL_SPECTRAL_H

#include <stddef.h>

#include "core/base/error.h"
#include "core/base/rng.h"
#include "core/kernel/kernel.h"

/* ---- spectral densities (stationary kernels with a known spectral measure) ----
 * For inputs scaled by their lengthscales (x~ = x / l), the normalised spectral
 * density (k(tau) = E_omega[cos(omega^T tau)] with k(0) = 1) of
 *   rbf:       N(0, I_d)
 *   matern-nu: multivariate Student-t, 2 nu degrees of freedom, unit scale:
 *              p(omega) ~ (2 nu + ||omega||^2)^(-(nu + d/2))
 * (one joint d-dimensional density, not a product of 1-D densities). */
typedef enum gp_spectral_family {
    GP_SPECTRAL_NONE = 0,
    GP_SPECTRAL_GAUSSIAN,
    GP_SPECTRAL_STUDENT_T
} gp_spectral_family;

typedef struct gp_spectral {
    gp_spectral_family family;
    double nu; /* Matern smoothness (0.5, 1.5, 2.5); 0 for the Gaussian */
} gp_spectral;

/* The spectral density of a leaf kernel type; GP_EUNSUPPORTED for the others. */
int gp_kernel_spectral(gp_kernel_type type, gp_spectral *out, gp_error *err);
/* count draws of omega in R^d, written row-wise into the column-major count x d
 * matrix out. Gaussian: z ~ N(0, I); Student-t: z * sqrt(2nu / u), u ~ chi2(2nu). */
void gp_spectral_sample(const gp_spectral *s, size_t d, size_t count, gp_rng *rng, double *out);
/* Normalised log density at one frequency omega (length d). */
double gp_spectral_log_density(const gp_spectral *s, size_t d, const double *omega);
/* Score grad_omega log p(omega) into score (length d). */
void gp_spectral_score(const gp_spectral *s, size_t d, const double *omega, double *score);

#endif
