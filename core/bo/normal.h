/* gpserve core: the normal-distribution functions of the acquisitions,
 * accurate where the naive forms underflow (the log expected improvement of
 * Ament et al. 2023, "Unexpected Improvements to Expected Improvement for
 * Bayesian Optimization", eq. 9, and the log normal CDF). */
#ifndef GP_BO_NORMAL_H
#define GP_BO_NORMAL_H

/* erfcx(x) = exp(x^2) erfc(x), x >= 0 (full relative accuracy; negative x
 * through 2 exp(x^2) - erfcx(-x), which overflows beyond x ~ -26). */
double gp_erfcx(double x);

/* log h(z) with h(z) = phi(z) + z Phi(z), the expected improvement of a unit
 * Gaussian over 0, for any finite z (z = -1e4 gives -5e7, not -inf), and its
 * derivative d log h / dz = Phi(z) / h(z) into *dlogh (may be NULL). Three
 * branches: z > -1 the formula; -20 < z <= -1 through erfcx (Ament's
 * log1mexp form: h = phi(z) (1 - r), r = |z| sqrt(pi/2) erfcx(-z/sqrt 2));
 * z <= -20 the asymptotic series of 1 - r = z^-2 sum_k (-1)^k (2k+1)!! z^-2k,
 * which also replaces Ament's last branch (-z^2/2 - log(2 pi)/2 - 2 log|z|,
 * the series' first term). */
double gp_log_h(double z, double *dlogh);

/* log Phi(z) and d log Phi / dz = phi(z) / Phi(z) into *dlog (may be NULL):
 * through erfcx for z < 0, log1p(-Phi(-z)) above. */
double gp_log_ndtr(double z, double *dlog);

#endif
