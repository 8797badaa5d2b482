/* gpserve core: the spread of training inputs in lengthscale units and the
 * frequency sampler `auto` picks from it (core/features/sample.h).
 *
 * Pure computation: no I/O, no allocation. The thresholds are measured by
 * bench/bench_kernel_approx (the spread sweep, bench/results/kernel_approx.md);
 * see the comment above gp_freq_sampler_auto. */
#include <math.h>
#include <stddef.h>

#include "core/methods/ssgp/auto.h"

/* One column's share of the spread: its variance in lengthscale units. */
static double spread_term(double var, const double *inv_ls, size_t k)
{
    double w = inv_ls != NULL ? inv_ls[k] : 1.0;
    return var * w * w;
}

static double spread_of(double acc, size_t d)
{
    double spread = sqrt(12.0 * acc / (double)d);
    return isfinite(spread) ? spread : 0.0;
}

double gp_features_spread(const double *X, size_t n, size_t d, const double *inv_ls)
{
    if (X == NULL || n == 0 || d == 0)
        return 0.0;
    double acc = 0.0;
    for (size_t k = 0; k < d; k++) {
        const double *col = X + k * n;
        /* Two passes: the mean, then the centred sum of squares (no
         * cancellation for columns far from 0). */
        double mean = 0.0;
        for (size_t i = 0; i < n; i++)
            mean += col[i];
        mean /= (double)n;
        double ss = 0.0;
        for (size_t i = 0; i < n; i++) {
            double t = col[i] - mean;
            ss += t * t;
        }
        acc += spread_term(ss / (double)n, inv_ls, k);
    }
    return spread_of(acc, d);
}

double gp_features_spread_var(const double *var, size_t d, const double *inv_ls)
{
    if (var == NULL || d == 0)
        return 0.0;
    double acc = 0.0;
    for (size_t k = 0; k < d; k++)
        acc += spread_term(var[k], inv_ls, k);
    return spread_of(acc, d);
}

/* The rule, from bench/bench_kernel_approx (bench/results/kernel_approx.md):
 * RBF, R = 200, N = 1000 points uniform on [0, s]^d (spread s), relative
 * Frobenius error of the feature kernel, mean of 5 seeds, Stein with the
 * options of gp_stein_default_options (2000 iterations, step 0.1, no
 * annealing, total bandwidth, qmc start: what `auto` runs).
 *
 * 1. Stein wins while the data span few lengthscales, then loses (its
 *    frequencies are regular, so the feature kernel turns nearly periodic at
 *    long range). The crossover against the best regular sampler (qmc):
 *      d = 2:  s = 2.5 stein 7.93e-3, qmc 1.24e-2 | s = 3 qmc 1.67e-2, stein 1.93e-2
 *      d = 8:  s = 1.5 stein 7.08e-2, qmc 1.01e-1 | s = 2 qmc 0.242,   stein 0.313
 *    Interpolating the log error ratio linearly in s puts it at s = 2.9
 *    (d = 2) and s = 1.8 (d = 8).
 * 2. At spread 1 (the d sweep) stein stays best up to d = 30, with a
 *    shrinking lead over orf (d = 20: 0.125 vs 0.157; d = 26: 0.261 vs
 *    0.282; d = 30: 0.389 vs 0.398): the crossover for spread 1 is at about
 *    d = 30.
 * So the threshold t(d) interpolates log t linearly in log d through
 * (2, 2.9), (8, 1.8), (30, 1.05); below d = 2 it stays 2.9 (not measured);
 * beyond d = 30 it keeps the slope between d = 8 and 30, t = 1.05 (30/d)^0.41.
 * 3. Above the threshold the regular samplers: qmc up to d = 9 (d = 2,
 *    s = 3-20: qmc 1.67e-2-0.414, orf 5.94e-2-0.541, mc 9.08e-2-0.561;
 *    d = 8, s = 1: qmc 3.13e-2, orf 3.78e-2; d = 8, s >= 2: qmc best or
 *    within 0.2%), orf from d = 10 (s = 1: d = 10 orf 4.43e-2 vs qmc
 *    4.96e-2, d = 12 6.62e-2 vs 7.16e-2, d = 30 0.398 vs 0.431). Beyond
 *    s = 20 (not measured) the same: at d = 2 qmc still leads at s = 20, at
 *    d = 8 every sampler saturates at the same error from s = 5 on.
 * Measured at R = 200 only, with these Stein options: other options move the
 * crossover (with 2000 steps of 0.3 it was s = 4.3 at d = 2; with 1000
 * annealed steps of 0.1, s = 2.25). Re-measure when the defaults change. */
static double stein_threshold(size_t d)
{
    static const double knot_d[3] = {2.0, 8.0, 30.0};
    static const double knot_t[3] = {2.9, 1.8, 1.05};
    double x = (double)d;
    if (x <= knot_d[0])
        return knot_t[0];
    for (int i = 0; i < 2; i++)
        if (x <= knot_d[i + 1]) {
            double f = log(x / knot_d[i]) / log(knot_d[i + 1] / knot_d[i]);
            return exp((1.0 - f) * log(knot_t[i]) + f * log(knot_t[i + 1]));
        }
    double slope = log(knot_t[1] / knot_t[2]) / log(knot_d[2] / knot_d[1]);
    return knot_t[2] * pow(knot_d[2] / x, slope);
}

/* Student-t (Matern) densities: the kernel benchmark's Matern-3/2 sweep at
 * spread 1 (R = 200) has stein best at d = 2 (6.33e-3 against qmc 1.13e-2)
 * and d = 4 (1.41e-2 against 2.59e-2) but worst-but-one at d = 8 (8.11e-2
 * against qmc 6.49e-2) and last at d = 16 (0.463 against orf 0.159): the
 * score-driven frequencies lose the heavy tails in higher dimension. So
 * stein is offered for them only up to this dimension, with the RBF spread
 * threshold (the Matern spread sweep was not measured). */
#define STUDENT_T_STEIN_MAX_DIM 4

gp_freq_sampler gp_freq_sampler_auto(const gp_spectral *s, double spread, size_t d)
{
    gp_freq_sampler regular = d <= 9 ? GP_FREQ_QMC : GP_FREQ_ORF;
    if (!(spread >= 0.0) || d == 0) /* NaN or no dimension: never stein on garbage */
        return regular;
    if (s != NULL && s->family == GP_SPECTRAL_STUDENT_T && d > STUDENT_T_STEIN_MAX_DIM)
        return regular;
    return spread <= stein_threshold(d) ? GP_FREQ_STEIN : regular;
}
