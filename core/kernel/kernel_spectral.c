/* Spectral densities of the stationary kernels (core/kernel/kernel_spectral.h). */
#include "core/kernel/kernel_spectral.h"

#include <math.h>

#include "core/kernel/kernel_formula.h"

#define LOG_2PI 1.83787706640934548356
#define LOG_PI 1.14472988584940017414

/* ------------------------------------------------------------------------ */
/* spectral densities                                                         */

int gp_kernel_spectral(gp_kernel_type type, gp_spectral *out, gp_error *err)
{
    out->family = GP_SPECTRAL_NONE;
    out->nu = 0.0;
    if (type == GP_KERNEL_RBF) {
        out->family = GP_SPECTRAL_GAUSSIAN;
        return GP_OK;
    }
    if (type >= GP_KERNEL_MATERN12 && type <= GP_KERNEL_MATERN52) {
        out->family = GP_SPECTRAL_STUDENT_T;
        out->nu = 0.5 + (double)(type - GP_KERNEL_MATERN12); /* 1/2, 3/2, 5/2 */
        return GP_OK;
    }
    return gp_error_set(err, GP_EUNSUPPORTED, "kernel",
                        "kernel '%s' has no spectral density; only rbf, matern12, matern32 and "
                        "matern52 have one",
                        gp_kernel_name_or_unknown((int)type));
}

/* A family the functions below can use (a Student-t needs nu > 0). */
static int spectral_ok(const gp_spectral *s)
{
    return s->family == GP_SPECTRAL_GAUSSIAN ||
           (s->family == GP_SPECTRAL_STUDENT_T && s->nu > 0.0 && isfinite(s->nu));
}

static void student_scale(const gp_spectral *s, size_t d, gp_rng *rng, double *row, size_t step)
{
    /* One chi-square per draw, shared by all coordinates: that is what makes
     * the draw multivariate t rather than d independent t's. */
    double u;
    do
        u = gp_rng_chisq(rng, 2.0 * s->nu);
    while (!(u > 0.0));
    double f = sqrt(2.0 * s->nu / u);
    for (size_t c = 0; c < d; c++)
        row[c * step] *= f;
}

void gp_spectral_sample(const gp_spectral *s, size_t d, size_t count, gp_rng *rng, double *out)
{
    int ok = spectral_ok(s);
    for (size_t i = 0; i < count; i++) {
        for (size_t c = 0; c < d; c++)
            out[i + c * count] = ok ? gp_rng_normal(rng) : NAN;
        if (ok && s->family == GP_SPECTRAL_STUDENT_T)
            student_scale(s, d, rng, out + i, count);
    }
}

/* lgamma(b + 1/2) - lgamma(b) for b > 0. When 2b is an integer, as for every
 * Matern spectral density, by the exact recurrence from b = 1/2 or 1 rather
 * than lgamma, which writes the global signgam (not thread-safe in POSIX). */
static double log_gamma_half_ratio(double b)
{
    if (!(2.0 * b == floor(2.0 * b) && b <= 1e6))
        return lgamma(b + 0.5) - lgamma(b);
    double x = b == floor(b) ? 1.0 : 0.5;
    double acc = x == 1.0 ? 0.5 * LOG_PI - log(2.0) : -0.5 * LOG_PI;
    for (; x < b; x += 1.0)
        acc += log(x + 0.5) - log(x);
    return acc;
}

/* lgamma(a + m/2) - lgamma(a) for a > 0 and an integer m >= 0. */
static double log_gamma_shift(double a, size_t m)
{
    double acc = 0.0;
    size_t whole = m / 2;
    for (size_t k = 0; k < whole; k++)
        acc += log(a + (double)k);
    if (m % 2)
        acc += log_gamma_half_ratio(a + (double)whole);
    return acc;
}

static double sum_sq(const double *v, size_t d)
{
    double s = 0.0;
    for (size_t c = 0; c < d; c++)
        s += v[c] * v[c];
    return s;
}

double gp_spectral_log_density(const gp_spectral *s, size_t d, const double *omega)
{
    double w2 = sum_sq(omega, d), dd = (double)d;
    if (s->family == GP_SPECTRAL_GAUSSIAN)
        return -0.5 * dd * LOG_2PI - 0.5 * w2;
    if (!spectral_ok(s))
        return NAN;
    double dof = 2.0 * s->nu;
    return log_gamma_shift(0.5 * dof, d) - 0.5 * dd * (log(dof) + LOG_PI) -
           0.5 * (dof + dd) * log1p(w2 / dof);
}

void gp_spectral_score(const gp_spectral *s, size_t d, const double *omega, double *score)
{
    double f = NAN;
    if (s->family == GP_SPECTRAL_GAUSSIAN)
        f = -1.0;
    else if (spectral_ok(s))
        f = -(2.0 * s->nu + (double)d) / (2.0 * s->nu + sum_sq(omega, d));
    for (size_t c = 0; c < d; c++)
        score[c] = f * omega[c];
}
