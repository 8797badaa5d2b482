/* TEMPORARY minimal version; replaced by the full implementation. */
#include "core/mixture.h"

#include <math.h>

#include "core/rng.h"

void gp_mixture_moments(const double *mu, const double *var, size_t m, size_t K, double *mean,
                        double *variance)
{
    for (size_t i = 0; i < m; i++) {
        double s = 0;
        for (size_t k = 0; k < K; k++)
            s += mu[i + k * m];
        mean[i] = s / (double)K;
        double v = 0;
        for (size_t k = 0; k < K; k++) {
            double dd = mu[i + k * m] - mean[i];
            v += var[i + k * m] + dd * dd;
        }
        variance[i] = v / (double)K;
    }
}

void gp_mixture_quantiles(const double *mu, const double *var, size_t m, size_t K,
                          const double *levels, size_t nq, double *out)
{
    for (size_t q = 0; q < nq; q++)
        for (size_t i = 0; i < m; i++) {
            double lo = 1e300, hi = -1e300, z = gp_normal_quantile(levels[q]);
            for (size_t k = 0; k < K; k++) {
                double x = mu[i + k * m] + sqrt(var[i + k * m]) * z;
                lo = x < lo ? x : lo;
                hi = x > hi ? x : hi;
            }
            for (int it = 0; it < 200; it++) {
                double x = 0.5 * (lo + hi), F = 0;
                for (size_t k = 0; k < K; k++)
                    F += 0.5 * erfc(-(x - mu[i + k * m]) / sqrt(2 * var[i + k * m]));
                if (F / (double)K < levels[q])
                    lo = x;
                else
                    hi = x;
            }
            out[q * m + i] = 0.5 * (lo + hi);
        }
}

void gp_mixture_log_density(const double *mu, const double *var, size_t m, size_t K,
                            const double *y, double *logp)
{
    for (size_t i = 0; i < m; i++) {
        double mx = -INFINITY;
        for (size_t k = 0; k < K; k++) {
            double e = y[i] - mu[i + k * m];
            double l = -0.5 * (1.8378770664093454836 + log(var[i + k * m]) + e * e / var[i + k * m]);
            mx = l > mx ? l : mx;
        }
        double s = 0;
        for (size_t k = 0; k < K; k++) {
            double e = y[i] - mu[i + k * m];
            s += exp(-0.5 * (1.8378770664093454836 + log(var[i + k * m]) + e * e / var[i + k * m]) - mx);
        }
        logp[i] = mx + log(s / (double)K);
    }
}

double gp_mixture_joint_log_density(const double *mu, const double *var, size_t m, size_t K,
                                    const double *y)
{
    (void)mu; (void)var; (void)m; (void)K; (void)y;
    return 0;
}
