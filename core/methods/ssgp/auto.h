/* gpserve core: the sampler `auto` chooses (see core/features/sample.h).
 *
 * Defined in core/methods/ssgp/auto.c. */
#ifndef GP_METHODS_SSGP_AUTO_H
#define GP_METHODS_SSGP_AUTO_H

#include <stddef.h>

#include "core/features/sample.h"

/* The spread of training inputs in lengthscale units, the quantity that
 * decides which sampler approximates the kernel best (docs/methods/stein-random-features.md §2.2b):
 *   spread = sqrt(12 * mean_k var_k / l_k^2)
 * over the d columns of X (n x d column-major), with var_k the population
 * variance of column k and l_k = 1 / inv_ls[k]. Points uniform on [0, s]^d
 * with unit lengthscales give spread s. */
double gp_features_spread(const double *X, size_t n, size_t d, const double *inv_ls);
/* The same from the columns' population variances var (d), for rows that
 * are not held (core/methods/ssgp/rows.h sums them over the rows). */
double gp_features_spread_var(const double *var, size_t d, const double *inv_ls);

/* The sampler `auto` picks for data of this spread in d dimensions and the
 * spectral density s (stein, qmc or orf), with thresholds measured by
 * bench/bench_kernel_approx (bench/results/kernel_approx.md: the spread sweep
 * on the RBF, and the Matern-3/2 d sweep, which keeps stein to d <= 4 for
 * Student-t densities). s may be NULL (Gaussian). */
gp_freq_sampler gp_freq_sampler_auto(const gp_spectral *s, double spread, size_t d);

#endif
