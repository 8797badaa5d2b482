/* Unit tests for core/model/mixture.c: moments against a long double direct formula
 * and numerical integration, quantiles against a long double CDF (random
 * mixtures, tails, point masses, bimodal gaps), and the log densities against
 * direct summation and their log-sum-exp bounds. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/model/mixture.h"

#define LOG_2PI_L 1.8378770664093454836L

/* ---- references --------------------------------------------------------------- */

/* Mixture CDF at one point (component k at [k * m]) in long double, in the
 * lower tail F (upper = 0) or the upper tail S = 1 - F (upper = 1): erfcl is
 * accurate in both tails, so the residual is meaningful at 1e-10. */
static long double ref_tail(const double *mu, const double *var, size_t m, size_t K, double x,
                            int upper)
{
    long double s = 0.0L;
    for (size_t k = 0; k < K; k++) {
        long double v = var[k * m], d = (long double)x - mu[k * m];
        if (v == 0.0L) {
            int stepped = d >= 0.0L;
            s += upper ? !stepped : stepped;
            continue;
        }
        long double z = d / sqrtl(v);
        s += 0.5L * erfcl((upper ? z : -z) / sqrtl(2.0L));
    }
    return s / (long double)K;
}

static double ref_density(const double *mu, const double *var, size_t m, size_t K, double x)
{
    long double s = 0.0L;
    for (size_t k = 0; k < K; k++) {
        long double v = var[k * m], d = (long double)x - mu[k * m];
        if (v > 0.0L)
            s += expl(-0.5L * d * d / v) / sqrtl(2.0L * 3.14159265358979323846264L * v);
    }
    return (double)(s / (long double)K);
}

/* Asserts x solves F(x) = q: |F(x) - q| <= 1e-13, and the root lies within
 * d of x: a few ulps of x, of the inputs' rounding, or of the resolution of F
 * itself where x is near 0 (t = min(q, 1 - q), t / f). The bracket is checked in the
 * tail of q, so levels like 1 - 1e-10 are held to relative accuracy. */
static void check_root(const double *mu, const double *var, size_t m, size_t K, double q,
                       double x)
{
    assert_true(isfinite(x));
    int upper = q > 0.5;
    long double t = upper ? 1.0L - q : q;
    long double F = ref_tail(mu, var, m, K, x, 0);
    assert_true(fabsl(F - q) <= 1e-13L);
    double f = ref_density(mu, var, m, K, x);
    /* Rounding x - mu_k, sd_k and mu_k moves component k's CDF by ~eps
     * (|mu_k| + |x - mu_k|) in x, so the root by that, weighted by its share
     * f_k / (K f) of the density: the conditioning of the problem in double. */
    double cond = 0.0;
    for (size_t k = 0; k < K && f > 0.0; k++) {
        double fk = ref_density(mu + k * m, var + k * m, m, 1, x);
        cond += fk / ((double)K * f) * (fabs(mu[k * m]) + fabs(x - mu[k * m]));
    }
    double d = 4.0 * DBL_EPSILON * (fabs(x) + cond + (f > 0.0 ? (double)t / f : 0.0));
    /* K = 1 is mu + sd gp_normal_quantile(q), exact to that function's
     * ~1e-15 relative accuracy rather than to ulps of x. */
    if (K == 1)
        d += 2e-15 * fabs(x - mu[0]);
    long double below = ref_tail(mu, var, m, K, x - d, upper);
    long double above = ref_tail(mu, var, m, K, x + d, upper);
    if (upper)
        assert_true(below >= t && t >= above);
    else
        assert_true(below <= t && t <= above);
}

static const double LEVELS[] = {1e-10, 1e-3, 0.05, 0.5, 0.95, 0.999, 1.0 - 1e-10};
#define NLEVELS (sizeof LEVELS / sizeof LEVELS[0])

/* ---- moments ------------------------------------------------------------------ */

static void test_moments_direct(void **state)
{
    (void)state;
    gp_rng rng;
    gp_rng_seed(&rng, 1);
    enum { M = 3, K = 7 };
    double mu[M * K], var[M * K], mean[M], variance[M];
    for (size_t j = 0; j < M * K; j++) {
        mu[j] = 3.0 * gp_rng_normal(&rng) + 1.5;
        var[j] = 0.1 + gp_rng_uniform(&rng);
    }
    var[4] = 0.0; /* a point mass */
    gp_mixture_moments(mu, var, M, K, mean, variance);
    for (size_t i = 0; i < M; i++) {
        long double s1 = 0.0L, s2 = 0.0L;
        for (size_t k = 0; k < K; k++) {
            long double u = mu[i + k * M];
            s1 += u;
            s2 += var[i + k * M] + u * u; /* E[x^2] of component k */
        }
        long double e1 = s1 / K, e2 = s2 / K;
        assert_true(fabsl(mean[i] - e1) <= 1e-15L * fabsl(e1) + 1e-15L);
        assert_true(fabsl(variance[i] - (e2 - e1 * e1)) <= 1e-14L * (e2 - e1 * e1));
    }
    /* K = 1 is the component itself. */
    gp_mixture_moments(mu, var, M, 1, mean, variance);
    for (size_t i = 0; i < M; i++)
        assert_true(mean[i] == mu[i] && variance[i] == var[i]);
}

/* Means 1e8 + small dyadic offsets: every input and the exact mean and
 * variance are representable, while the one-pass E[x^2] - E[x]^2 loses all
 * its digits to cancellation of two ~1e16 numbers. */
static void test_moments_cancellation(void **state)
{
    (void)state;
    enum { K = 8 };
    const double off[K] = {0.125, -0.25, 0.5, 0.0, 0.375, -0.125, 0.25, -0.875};
    double mu[K], var[K], mean, variance;
    double so = 0.0, sv = 0.0;
    for (size_t k = 0; k < K; k++) {
        mu[k] = 1e8 + off[k];
        var[k] = 0.0625 * (double)(k + 1);
        so += off[k];
        sv += var[k];
    }
    double mo = so / K, spread = 0.0; /* exact: dyadic, small */
    for (size_t k = 0; k < K; k++)
        spread += (off[k] - mo) * (off[k] - mo);
    double want = (sv + spread) / K;
    gp_mixture_moments(mu, var, 1, K, &mean, &variance);
    assert_true(mean == 1e8 + mo);
    assert_true(fabs(variance - want) <= 1e-15 * want);
    /* The naive formula in double really does fail here. */
    double e1 = 0.0, e2 = 0.0;
    for (size_t k = 0; k < K; k++) {
        e1 += mu[k] / K;
        e2 += (var[k] + mu[k] * mu[k]) / K;
    }
    assert_true(fabs((e2 - e1 * e1) - want) > 1e-3 * want);
}

/* Mean and variance by trapezoid integration of the mixture density: the
 * integrand is smooth and decays like a Gaussian, so the trapezoid rule
 * with h = sd_min / 8 is accurate far beyond 1e-8. */
static void test_moments_integration(void **state)
{
    (void)state;
    gp_rng rng;
    gp_rng_seed(&rng, 2);
    for (int trial = 0; trial < 6; trial++) {
        size_t K = 1 + (size_t)trial * 2;
        double mu[16], var[16], mean, variance;
        double lo = INFINITY, hi = -INFINITY, sdmin = INFINITY;
        for (size_t k = 0; k < K; k++) {
            mu[k] = (trial % 2 ? 5.0 : 0.5) * gp_rng_normal(&rng);
            var[k] = 0.2 + 2.0 * gp_rng_uniform(&rng);
            double sd = sqrt(var[k]);
            lo = fmin(lo, mu[k] - 14.0 * sd);
            hi = fmax(hi, mu[k] + 14.0 * sd);
            sdmin = fmin(sdmin, sd);
        }
        gp_mixture_moments(mu, var, 1, K, &mean, &variance);
        size_t n = (size_t)ceil((hi - lo) / (sdmin / 8.0));
        double h = (hi - lo) / (double)n;
        long double I0 = 0.0L, I1 = 0.0L, I2 = 0.0L;
        for (int pass = 0; pass < 2; pass++) {
            long double c = pass ? I1 / I0 : 0.0L;
            for (size_t j = 0; j <= n; j++) {
                double x = lo + h * (double)j;
                long double w = (j == 0 || j == n) ? 0.5L : 1.0L;
                long double f = w * ref_density(mu, var, 1, K, x);
                if (pass == 0) {
                    I0 += f;
                    I1 += f * x;
                } else {
                    I2 += f * (x - c) * (x - c);
                }
            }
        }
        long double nm = I1 / I0, nv = I2 / I0;
        assert_true(fabsl(I0 * h - 1.0L) <= 1e-10L);
        assert_true(fabsl(mean - nm) <= 1e-8L * (fabsl(nm) + sqrtl(nv)));
        assert_true(fabsl(variance - nv) <= 1e-8L * nv);
    }
}

/* ---- quantiles ---------------------------------------------------------------- */

/* Random mixtures at m = 2 points, K = 1..10, spread (modes many sd apart)
 * and overlapping, some centred far from 0. */
static void test_quantiles_random(void **state)
{
    (void)state;
    gp_rng rng;
    gp_rng_seed(&rng, 3);
    enum { M = 2, KMAX = 10 };
    double mu[M * KMAX], var[M * KMAX], out[M * NLEVELS];
    for (size_t K = 1; K <= KMAX; K++) {
        for (int trial = 0; trial < 24; trial++) {
            int spread = trial % 2, far = trial % 3 == 0;
            for (size_t j = 0; j < M * K; j++) {
                mu[j] = (spread ? 10.0 : 0.5) * gp_rng_normal(&rng) + (far ? 100.0 : 0.0);
                double sd = spread ? 0.05 + 2.0 * gp_rng_uniform(&rng)
                                   : 0.5 + 1.5 * gp_rng_uniform(&rng);
                var[j] = sd * sd;
            }
            gp_mixture_quantiles(mu, var, M, K, LEVELS, NLEVELS, out);
            for (size_t i = 0; i < M; i++)
                for (size_t j = 0; j < NLEVELS; j++)
                    check_root(mu + i, var + i, M, K, LEVELS[j], out[i + j * M]);
            /* Point by point equals the m = 1 call on that point's column. */
            for (size_t i = 0; i < M; i++) {
                double mu1[KMAX], var1[KMAX], out1[NLEVELS];
                for (size_t k = 0; k < K; k++) {
                    mu1[k] = mu[i + k * M];
                    var1[k] = var[i + k * M];
                }
                gp_mixture_quantiles(mu1, var1, 1, K, LEVELS, NLEVELS, out1);
                for (size_t j = 0; j < NLEVELS; j++)
                    assert_true(out1[j] == out[i + j * M]);
            }
        }
    }
}

static void test_quantiles_single_component_exact(void **state)
{
    (void)state;
    const double mu[3] = {0.0, -3.25, 1e6}, var[3] = {1.0, 0.3, 42.0};
    double out[3 * NLEVELS];
    gp_mixture_quantiles(mu, var, 3, 1, LEVELS, NLEVELS, out);
    for (size_t i = 0; i < 3; i++)
        for (size_t j = 0; j < NLEVELS; j++)
            assert_true(out[i + j * 3] == mu[i] + sqrt(var[i]) * gp_normal_quantile(LEVELS[j]));
}

static void test_quantiles_monotone(void **state)
{
    (void)state;
    enum { NQ = 201 };
    double levels[NQ], out[NQ];
    for (size_t j = 0; j < NQ; j++) /* 1e-12 .. 1 - 1e-12 on a logit scale */
        levels[j] = 1.0 / (1.0 + exp(-27.0 * ((double)j / (NQ - 1) * 2.0 - 1.0)));
    const double mu[4] = {-3.0, 0.0, 0.2, 8.0}, var[4] = {0.5, 1.0, 0.01, 2.0};
    gp_mixture_quantiles(mu, var, 1, 4, levels, NQ, out);
    for (size_t j = 1; j < NQ; j++)
        assert_true(out[j] > out[j - 1]);
}

static void test_quantiles_symmetric_median(void **state)
{
    (void)state;
    const double c = 3.0;
    for (double a = 0.5; a <= 40.0; a *= 2.0) {
        const double mu[2] = {c - a, c + a}, var[2] = {1.0, 1.0}, half = 0.5;
        double x;
        gp_mixture_quantiles(mu, var, 1, 2, &half, 1, &x);
        if (a < 8.0)
            assert_true(fabs(x - c) <= 1e-14);
        else /* the density at c underflows: any x in the flat gap has F = 1/2 */
            assert_true(ref_tail(mu, var, 1, 2, x, 0) == 0.5L);
    }
    /* Symmetric levels around the median mirror around c. */
    const double mu[2] = {c - 1.5, c + 1.5}, var[2] = {0.7, 0.7};
    const double lv[2] = {0.05, 0.95};
    double x[2];
    gp_mixture_quantiles(mu, var, 1, 2, lv, 2, x);
    assert_true(fabs((x[0] - c) + (x[1] - c)) <= 1e-14);
}

static void test_quantiles_point_mass(void **state)
{
    (void)state;
    /* N(0, 1) and a point mass at 1: F jumps from Phi(1)/2 = 0.42 to 0.92. */
    const double mu[2] = {0.0, 1.0}, var[2] = {1.0, 0.0};
    const double lv[4] = {0.3, 0.6, 0.9, 0.95};
    double x[4];
    gp_mixture_quantiles(mu, var, 1, 2, lv, 4, x);
    assert_true(fabs(x[0] - gp_normal_quantile(0.6)) <= 1e-14);
    assert_true(fabs(x[1] - 1.0) <= 2.0 * DBL_EPSILON && x[1] >= 1.0); /* inside the jump */
    assert_true(fabs(x[2] - 1.0) <= 2.0 * DBL_EPSILON && x[2] >= 1.0);
    assert_true(fabs(x[3] - gp_normal_quantile(0.9)) <= 1e-14);
    check_root(mu, var, 1, 2, 0.3, x[0]);
    check_root(mu, var, 1, 2, 0.95, x[3]);
    /* A point mass on the end of the bracket: the answer is the step itself. */
    const double mu2[2] = {-5.0, 0.0}, var2[2] = {0.0, 1.0}, q = 0.3;
    gp_mixture_quantiles(mu2, var2, 1, 2, &q, 1, x);
    assert_true(fabs(x[0] + 5.0) <= 4.0 * DBL_EPSILON * 5.0 && x[0] >= -5.0);
    /* All point masses: the smallest x with F(x) >= level, exactly. */
    const double mu3[4] = {2.0, 0.0, 3.0, 1.0}, var3[4] = {0.0, 0.0, 0.0, 0.0};
    const double lv3[5] = {0.1, 0.25, 0.5, 0.5000001, 1.0 - 1e-10};
    const double want3[5] = {0.0, 0.0, 1.0, 2.0, 3.0};
    double x3[5];
    gp_mixture_quantiles(mu3, var3, 1, 4, lv3, 5, x3);
    for (size_t j = 0; j < 5; j++)
        assert_true(x3[j] == want3[j]);
}

/* Modes 100 sd apart: between them the density underflows to 0, so Newton
 * from the moment-matched guess (near the centre) has no slope to follow, and
 * just above F = 1/2 a Newton step from the gap lands far outside. */
static void test_quantiles_bimodal(void **state)
{
    (void)state;
    const double mu[3] = {-50.0, 50.0, 50.0}, var[3] = {1.0, 1.0, 1.0};
    const double lv[8] = {1e-10, 0.2, 1.0 / 3.0, 0.3333334, 0.5, 0.5 + 1e-12, 0.9, 1.0 - 1e-10};
    double x[8];
    for (size_t K = 2; K <= 3; K++) {
        gp_mixture_quantiles(mu, var, 1, K, lv, 8, x);
        for (size_t j = 0; j < 8; j++) {
            if (ref_density(mu, var, 1, K, x[j]) < 1e-300) /* a flat stretch: F = level */
                assert_true(fabsl(ref_tail(mu, var, 1, K, x[j], 0) - lv[j]) <= 1e-15L);
            else
                check_root(mu, var, 1, K, lv[j], x[j]);
        }
    }
    /* Narrow, far apart and unequal: two modes of widths 1e-3 and 10. */
    const double mu2[2] = {0.0, 1000.0}, var2[2] = {1e-6, 100.0};
    gp_mixture_quantiles(mu2, var2, 1, 2, LEVELS, NLEVELS, x);
    for (size_t j = 0; j < NLEVELS; j++)
        if (LEVELS[j] != 0.5) /* 0.5 falls in the gap */
            check_root(mu2, var2, 1, 2, LEVELS[j], x[j]);
}

/* ---- densities ---------------------------------------------------------------- */

static long double ref_log_normal(double y, double mu, double var)
{
    long double d = (long double)y - mu;
    return -0.5L * (LOG_2PI_L + logl(var) + d * d / var);
}

static void test_log_density_direct(void **state)
{
    (void)state;
    gp_rng rng;
    gp_rng_seed(&rng, 4);
    enum { M = 5, K = 6 };
    double mu[M * K], var[M * K], y[M], lp[M];
    for (size_t j = 0; j < M * K; j++) {
        mu[j] = gp_rng_normal(&rng);
        var[j] = 0.2 + gp_rng_uniform(&rng);
    }
    for (size_t i = 0; i < M; i++)
        y[i] = 2.0 * gp_rng_normal(&rng);
    gp_mixture_log_density(mu, var, M, K, y, lp);
    for (size_t i = 0; i < M; i++) {
        long double s = 0.0L;
        for (size_t k = 0; k < K; k++)
            s += expl(ref_log_normal(y[i], mu[i + k * M], var[i + k * M]));
        long double want = logl(s / K);
        assert_true(fabsl(lp[i] - want) <= 1e-14L * (1.0L + fabsl(want)));
    }
    /* K = 1 is the Gaussian log density. */
    gp_mixture_log_density(mu, var, M, 1, y, lp);
    for (size_t i = 0; i < M; i++)
        assert_true(fabsl(lp[i] - ref_log_normal(y[i], mu[i], var[i])) <= 1e-14L);
}

/* y 40 sd from both components: exp(-800) underflows in double, so direct
 * summation gives log(0) = -inf; the log-sum-exp value is the closed form
 * a_1 + log1p(exp(a_0 - a_1)) - log 2. */
static void test_log_density_far_tail(void **state)
{
    (void)state;
    const double mu[2] = {0.0, 1.0}, var[2] = {1.0, 1.0}, y = 40.0;
    double lp;
    gp_mixture_log_density(mu, var, 1, 2, &y, &lp);
    double a0 = -0.5 * 1.8378770664093454836 - 800.0, a1 = -0.5 * 1.8378770664093454836 - 760.5;
    double want = a1 + log1p(exp(a0 - a1)) - log(2.0);
    assert_true(isfinite(lp));
    assert_true(fabs(lp - want) <= 1e-14 * fabs(want));
    double naive = log(0.5 * (exp(a0) + exp(a1)));
    assert_true(isinf(naive)); /* the direct formula really does underflow */
    /* One far and one near component: the near one dominates. */
    const double mu2[2] = {0.0, 39.0};
    gp_mixture_log_density(mu2, var, 1, 2, &y, &lp);
    assert_true(fabs(lp - (-0.5 * 1.8378770664093454836 - 0.5 - log(2.0))) <= 1e-14);
}

static void test_joint_log_density(void **state)
{
    (void)state;
    gp_rng rng;
    gp_rng_seed(&rng, 5);
    enum { M = 3, K = 5, MBIG = 400 };
    double mu[MBIG * K], var[MBIG * K], y[MBIG];
    for (size_t j = 0; j < MBIG * K; j++) {
        mu[j] = gp_rng_normal(&rng);
        var[j] = 0.1 + gp_rng_uniform(&rng);
    }
    for (size_t i = 0; i < MBIG; i++)
        y[i] = 1.5 * gp_rng_normal(&rng);
    /* Small m: the direct product formula. */
    long double s = 0.0L;
    for (size_t k = 0; k < K; k++) {
        long double p = 1.0L;
        for (size_t i = 0; i < M; i++)
            p *= expl(ref_log_normal(y[i], mu[i + k * M], var[i + k * M]));
        s += p;
    }
    long double want = logl(s / K);
    double got = gp_mixture_joint_log_density(mu, var, M, K, y);
    assert_true(fabsl(got - want) <= 1e-13L * (1.0L + fabsl(want)));
    /* Bounds: max_k S_k - log K <= J <= max_k S_k, also where the product
     * itself underflows (m = 400, S_k in the -hundreds). */
    for (size_t m = 1; m <= MBIG; m *= 20) {
        double Smax = -INFINITY;
        for (size_t k = 0; k < K; k++) {
            long double S = 0.0L;
            for (size_t i = 0; i < m; i++)
                S += ref_log_normal(y[i], mu[i + k * m], var[i + k * m]);
            Smax = fmax(Smax, (double)S);
        }
        double J = gp_mixture_joint_log_density(mu, var, m, K, y);
        double slack = 1e-12 * (1.0 + fabs(Smax));
        assert_true(isfinite(J));
        assert_true(J >= Smax - log((double)K) - slack && J <= Smax + slack);
    }
    /* Equal S_k: J = S exactly up to rounding (the lower bound is the
     * one-dominant-term case, the upper the all-equal case). */
    double mu1[2 * M], var1[2 * M];
    for (size_t i = 0; i < M; i++) {
        mu1[i] = mu1[i + M] = mu[i];
        var1[i] = var1[i + M] = var[i];
    }
    double J2 = gp_mixture_joint_log_density(mu1, var1, M, 2, y);
    double J1 = gp_mixture_joint_log_density(mu1, var1, M, 1, y);
    assert_true(fabs(J2 - J1) <= 1e-14 * (1.0 + fabs(J1)));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_moments_direct),
        cmocka_unit_test(test_moments_cancellation),
        cmocka_unit_test(test_moments_integration),
        cmocka_unit_test(test_quantiles_random),
        cmocka_unit_test(test_quantiles_single_component_exact),
        cmocka_unit_test(test_quantiles_monotone),
        cmocka_unit_test(test_quantiles_symmetric_median),
        cmocka_unit_test(test_quantiles_point_mass),
        cmocka_unit_test(test_quantiles_bimodal),
        cmocka_unit_test(test_log_density_direct),
        cmocka_unit_test(test_log_density_far_tail),
        cmocka_unit_test(test_joint_log_density),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
