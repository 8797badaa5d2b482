/* gpserve core: equally weighted Gaussian mixtures, the predictive
 * distribution of mixture methods (msrfr:
 * docs/methods/stein-random-features.md §4.5 and §5.4).
 *
 * K components at m points are given as two m x K column-major arrays: mu
 * (means) and var (variances), column k = component k, so point i of
 * component k is at [i + k m]. Every component has weight 1/K. */
#ifndef GP_MIXTURE_H
#define GP_MIXTURE_H

#include <stddef.h>

/* Moment matching per point: mean_i = (1/K) sum_k mu_ik and
 * variance_i = (1/K) sum_k [var_ik + (mu_ik - mean_i)^2], two passes (the
 * mean first), so no cancellation between large second moments. */
void gp_mixture_moments(const double *mu, const double *var, size_t m, size_t K, double *mean,
                        double *variance);

/* Quantiles of the mixture itself at each point: out (m x nq, column j =
 * level j) holds x with F_i(x) = levels[j], F_i(x) = (1/K) sum_k
 * Phi((x - mu_ik) / sqrt(var_ik)), found by safeguarded root finding
 * (bracketed Newton with bisection fallback) to within a few ulps of x (or
 * of what the rounding of x - mu_ik allows in a far tail). Levels above 1/2
 * are solved in the upper tail, so 1 - 1e-10 is as accurate as 1e-10. A
 * component of variance 0 is a point mass (its CDF a step); when the level
 * falls on a step the result is the smallest x with F_i(x) >= level. levels
 * in (0, 1) (0 gives -inf, 1 +inf, anything else NaN).
 * K = 1 gives mu + sqrt(var) gp_normal_quantile(level) exactly. */
void gp_mixture_quantiles(const double *mu, const double *var, size_t m, size_t K,
                          const double *levels, size_t nq, double *out);

/* Per-point log density of the mixture at y_i:
 * logp_i = log((1/K) sum_k N(y_i; mu_ik, var_ik)), with log-sum-exp.
 * Variances must be > 0. */
void gp_mixture_log_density(const double *mu, const double *var, size_t m, size_t K,
                            const double *y, double *logp);

/* The log density of the whole vector y under the mixture of K joint
 * diagonal Gaussians, log((1/K) sum_k prod_i N(y_i; mu_ik, var_ik)): what the
 * paper's Table 1 NLPD negates (docs/methods/stein-random-features.md §5.4; not the per-point mixture).
 * Variances must be > 0. */
double gp_mixture_joint_log_density(const double *mu, const double *var, size_t m, size_t K,
                                    const double *y);

#endif
