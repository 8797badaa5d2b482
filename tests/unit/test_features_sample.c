/* Unit tests for core/features/sample.c (frequency samplers, the feature-kernel
 * error) and gp_chisq_quantile of core/base/rng.c. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/methods/ssgp/auto.h"
#include "core/features/sample.h"

/* ---- chi-square quantile ---------------------------------------------------- */

/* P(a, y) by its power series (all terms positive: no cancellation). */
static double chisq_cdf(double x, double k)
{
    double a = 0.5 * k, y = 0.5 * x;
    double term = 1.0, sum = 1.0;
    for (int n = 1; n < 200000; n++) {
        term *= y / (a + (double)n);
        sum += term;
        if (term < 1e-18 * sum)
            break;
    }
    return exp(a * log(y) - y - lgamma(a + 1.0)) * sum;
}

/* Q(a, y) = 1 - P by the continued fraction (Lentz), for the upper tail,
 * where 1 - P(series) has no relative accuracy left. */
static double chisq_sf(double x, double k)
{
    double a = 0.5 * k, y = 0.5 * x;
    double b = y + 1.0 - a, c = 1e300, d = 1.0 / b, h = d;
    for (int i = 1; i < 100000; i++) {
        double an = -(double)i * ((double)i - a);
        b += 2.0;
        d = an * d + b;
        c = b + an / c;
        d = 1.0 / d;
        h *= d * c;
        if (fabs(d * c - 1.0) < 1e-17)
            break;
    }
    return exp(a * log(y) - y - lgamma(a)) * h;
}

static void test_chisq_quantile_known_values(void **state)
{
    (void)state;
    assert_true(fabs(gp_chisq_quantile(0.95, 1.0) - 3.841458820694124) < 1e-12 * 3.84);
    assert_true(fabs(gp_chisq_quantile(0.5, 3.0) - 2.365973884375338) < 1e-12 * 2.37);
    assert_true(fabs(gp_chisq_quantile(0.05, 5.0) - 1.145476226061769) < 1e-12 * 1.15);
    /* k = 2 is exponential: x = -2 log(1 - p). */
    for (double p = 0.01; p < 1.0; p += 0.07)
        assert_true(fabs(gp_chisq_quantile(p, 2.0) + 2.0 * log1p(-p)) <
                    1e-12 * -2.0 * log1p(-p));
    assert_true(gp_chisq_quantile(0.0, 3.0) == 0.0);
    assert_true(isinf(gp_chisq_quantile(1.0, 3.0)));
    assert_true(isnan(gp_chisq_quantile(-0.1, 3.0)));
    assert_true(isnan(gp_chisq_quantile(0.5, 0.0)));
    assert_true(isnan(gp_chisq_quantile(NAN, 3.0)));
}

static void test_chisq_quantile_round_trip(void **state)
{
    (void)state;
    const double ks[] = {0.5, 1.0, 1.5, 3.0, 5.0, 10.0, 37.5, 100.0, 1000.0};
    const double ps[] = {1e-12, 1e-6, 0.001, 0.05, 0.3, 0.5, 0.7, 0.95, 0.999, 1.0 - 1e-6};
    for (size_t i = 0; i < sizeof ks / sizeof ks[0]; i++)
        for (size_t j = 0; j < sizeof ps / sizeof ps[0]; j++) {
            double x = gp_chisq_quantile(ps[j], ks[i]);
            assert_true(x > 0.0 && isfinite(x));
            /* Relative accuracy in x: P(x(1 -+ 1e-11)) brackets p (in the
             * upper tail Q brackets 1 - p, from the other side). */
            double xl = x * (1.0 - 1e-11), xh = x * (1.0 + 1e-11);
            if (ps[j] <= 0.5 || 0.5 * x < 0.5 * ks[i] + 1.0) {
                double tol = 1e-14 * ps[j];
                assert_true(chisq_cdf(xl, ks[i]) <= ps[j] + tol &&
                            chisq_cdf(xh, ks[i]) >= ps[j] - tol);
            } else {
                double q = 1.0 - ps[j], tol = 1e-14 * q;
                assert_true(chisq_sf(xl, ks[i]) >= q - tol && chisq_sf(xh, ks[i]) <= q + tol);
            }
        }
}

/* ---- helpers ---------------------------------------------------------------- */

static gp_spectral spectral(gp_kernel_type t)
{
    gp_spectral s;
    assert_int_equal(gp_kernel_spectral(t, &s, NULL), GP_OK);
    return s;
}

static double *draw(gp_kernel_type kt, gp_freq_sampler smp, size_t R, size_t d, uint64_t seed,
                    const gp_stein_options *so)
{
    gp_spectral s = spectral(kt);
    double *om = malloc(R * d * sizeof(double));
    assert_non_null(om);
    gp_error err;
    int rc = gp_frequencies_draw(&s, smp, R, d, seed, so, NULL, NULL, om, &err);
    if (rc != GP_OK)
        fail_msg("draw failed: %s", err.message);
    return om;
}

static void fill_uniform(double *x, size_t count, uint64_t seed)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < count; i++)
        x[i] = gp_rng_uniform(&rng);
}

/* P(all |omega_k| > c) for the d-variate t with dof degrees of freedom:
 * E_u[erfc(c sqrt(u/dof)/sqrt2)^d], u ~ chi2(dof), by the midpoint rule on
 * the chi-square quantile scale (exact weights 1/M). */
static double mvt_all_large(double dof, size_t d, double c)
{
    const int M = 20000;
    double acc = 0.0;
    for (int i = 0; i < M; i++) {
        double u = gp_chisq_quantile(((double)i + 0.5) / M, dof);
        double t = erfc(c * sqrt(u / dof) / sqrt(2.0));
        acc += pow(t, (double)d);
    }
    return acc / M;
}

/* The same for d independent 1-D t's: P(|t| > c)^d. */
static double product_all_large(double dof, size_t d, double c)
{
    const int M = 20000;
    double acc = 0.0;
    for (int i = 0; i < M; i++) {
        double u = gp_chisq_quantile(((double)i + 0.5) / M, dof);
        acc += erfc(c * sqrt(u / dof) / sqrt(2.0));
    }
    return pow(acc / M, (double)d);
}

/* ---- names and errors --------------------------------------------------------- */

static void test_names_and_defaults(void **state)
{
    (void)state;
    const char *names[] = {"mc", "qmc", "orf", "stein"};
    for (int i = 0; i < GP_FREQ_SAMPLER_COUNT; i++) {
        assert_int_equal(gp_freq_sampler_from_name(names[i]), i);
        assert_string_equal(gp_freq_sampler_name((gp_freq_sampler)i), names[i]);
    }
    assert_int_equal(gp_freq_sampler_from_name("sobol"), -1);
    assert_int_equal(gp_freq_sampler_from_name(NULL), -1);
    assert_null(gp_freq_sampler_name(GP_FREQ_SAMPLER_COUNT));
    gp_stein_options o;
    gp_stein_default_options(&o);
    assert_true(o.iterations > 0 && o.step > 0.0);
    assert_int_equal(o.bandwidth, GP_SVGD_BANDWIDTH_TOTAL);
    assert_int_equal(o.init, GP_FREQ_QMC);
    assert_true(o.anneal_cycles >= 1 && o.weight_decay >= 0.0 && o.anneal_power >= 0.0);
}

static void test_error_codes(void **state)
{
    (void)state;
    gp_spectral g = spectral(GP_KERNEL_RBF), t = spectral(GP_KERNEL_MATERN32);
    gp_error err;
    double om[600];
    assert_int_equal(gp_frequencies_draw(&g, GP_FREQ_MC, 0, 2, 1, NULL, NULL, NULL, om, &err),
                     GP_EINVAL);
    assert_int_equal(gp_frequencies_draw(&g, GP_FREQ_MC, 4, 0, 1, NULL, NULL, NULL, om, &err),
                     GP_EINVAL);
    assert_int_equal(gp_frequencies_draw(&g, GP_FREQ_SAMPLER_COUNT, 4, 2, 1, NULL, NULL, NULL,
                                         om, &err),
                     GP_EINVAL);
    gp_spectral none = {GP_SPECTRAL_NONE, 0.0};
    assert_int_equal(gp_frequencies_draw(&none, GP_FREQ_MC, 4, 2, 1, NULL, NULL, NULL, om, &err),
                     GP_EINVAL);
    /* Halton dimension limits: d for the Gaussian, d + 1 for Student-t. */
    double *big = malloc(2 * 257 * sizeof(double));
    assert_non_null(big);
    assert_int_equal(gp_frequencies_draw(&g, GP_FREQ_QMC, 2, 256, 1, NULL, NULL, NULL, big, &err),
                     GP_OK);
    assert_int_equal(gp_frequencies_draw(&g, GP_FREQ_QMC, 2, 257, 1, NULL, NULL, NULL, big, &err),
                     GP_EINVAL);
    assert_int_equal(gp_frequencies_draw(&t, GP_FREQ_QMC, 2, 256, 1, NULL, NULL, NULL, big, &err),
                     GP_EINVAL);
    assert_int_equal(gp_frequencies_draw(&t, GP_FREQ_QMC, 2, 255, 1, NULL, NULL, NULL, big, &err),
                     GP_OK);
    free(big);
    gp_stein_options so;
    gp_stein_default_options(&so);
    so.step = 0.0;
    assert_int_equal(gp_frequencies_draw(&g, GP_FREQ_STEIN, 4, 2, 1, &so, NULL, NULL, om, &err),
                     GP_EINVAL);
    gp_stein_default_options(&so);
    so.init = GP_FREQ_ORF;
    assert_int_equal(gp_frequencies_draw(&g, GP_FREQ_STEIN, 4, 2, 1, &so, NULL, NULL, om, &err),
                     GP_EINVAL);
    double X[4] = {0.0, 1.0, 0.5, 0.2}, e = 0.0;
    assert_int_equal(gp_features_kernel_error(GP_KERNEL_PERIODIC, X, 2, 2, om, 3, &e, &err),
                     GP_EUNSUPPORTED);
    assert_int_equal(gp_features_kernel_error(GP_KERNEL_RBF, X, 2, 2, om, 0, &e, &err),
                     GP_EINVAL);
}

/* ---- moments and laws ---------------------------------------------------------- */

typedef struct law_case {
    gp_kernel_type kt;
    gp_freq_sampler smp;
    size_t R;
} law_case;

static void check_moments(gp_kernel_type kt, gp_freq_sampler smp, size_t R,
                          const gp_stein_options *so)
{
    const size_t d = 3;
    double *om = draw(kt, smp, R, d, 77, so);
    gp_spectral s = spectral(kt);
    double var = s.family == GP_SPECTRAL_GAUSSIAN ? 1.0 : 2.0 * s.nu / (2.0 * s.nu - 2.0);
    double se = sqrt(var / (double)R);
    for (size_t a = 0; a < d; a++) {
        double m = 0.0;
        for (size_t r = 0; r < R; r++)
            m += om[r + a * R];
        m /= (double)R;
        if (fabs(m) > 5.0 * se)
            fail_msg("%s: mean[%zu] = %g", gp_freq_sampler_name(smp), a, m);
        /* Covariances when the fourth moment exists (dof > 4) or Gaussian. */
        if (s.family == GP_SPECTRAL_GAUSSIAN || s.nu > 2.0)
            for (size_t b = 0; b <= a; b++) {
                double c = 0.0;
                for (size_t r = 0; r < R; r++)
                    c += om[r + a * R] * om[r + b * R];
                c /= (double)R;
                double want = a == b ? var : 0.0;
                /* Short stein runs are slightly overdispersed (the
                 * repulsion-only start of each annealing cycle). */
                double tol = (s.family == GP_SPECTRAL_GAUSSIAN ? 0.08 : 0.25 * var) *
                             (smp == GP_FREQ_STEIN ? 2.0 : 1.0);
                if (fabs(c - want) > tol)
                    fail_msg("%s: cov[%zu][%zu] = %g, want %g", gp_freq_sampler_name(smp), a, b,
                             c, want);
            }
    }
    /* The joint law: the fraction of draws with every |omega_k| > c, for
     * which the multivariate t (one shared radial factor) and a product of
     * 1-D t's differ several-fold. */
    if (s.family == GP_SPECTRAL_STUDENT_T) {
        double c = 1.5, dof = 2.0 * s.nu;
        double pm = mvt_all_large(dof, d, c), pp = product_all_large(dof, d, c);
        size_t hits = 0;
        for (size_t r = 0; r < R; r++) {
            int all = 1;
            for (size_t a = 0; a < d; a++)
                all &= fabs(om[r + a * R]) > c;
            hits += (size_t)all;
        }
        double f = (double)hits / (double)R, sd = sqrt(pm * (1.0 - pm) / (double)R);
        assert_true(pm > 1.8 * pp); /* the test can tell them apart */
        if (!(fabs(f - pm) < 5.0 * sd + 0.1 * pm && fabs(f - pm) < 0.5 * fabs(pp - pm)))
            fail_msg("%s nu=%g: all-large fraction %g, multivariate %g, product %g",
                     gp_freq_sampler_name(smp), s.nu, f, pm, pp);
    }
    free(om);
}

static void test_moments_mc_qmc_orf(void **state)
{
    (void)state;
    const gp_kernel_type kts[] = {GP_KERNEL_RBF, GP_KERNEL_MATERN32, GP_KERNEL_MATERN52};
    for (size_t i = 0; i < 3; i++)
        for (int smp = GP_FREQ_MC; smp <= GP_FREQ_ORF; smp++)
            check_moments(kts[i], (gp_freq_sampler)smp, 20000, NULL);
}

static void test_moments_stein(void **state)
{
    (void)state;
    gp_stein_options so;
    gp_stein_default_options(&so);
    so.iterations = 100;
    const gp_kernel_type kts[] = {GP_KERNEL_RBF, GP_KERNEL_MATERN32, GP_KERNEL_MATERN52};
    for (size_t i = 0; i < 3; i++)
        check_moments(kts[i], GP_FREQ_STEIN, 1000, &so);
}

static void test_orf_blocks_orthogonal(void **state)
{
    (void)state;
    const size_t R = 12, d = 5;
    const gp_kernel_type kts[] = {GP_KERNEL_RBF, GP_KERNEL_MATERN12};
    for (size_t t = 0; t < 2; t++) {
        double *om = draw(kts[t], GP_FREQ_ORF, R, d, 5, NULL);
        double max_in = 0.0, max_across = 0.0;
        for (size_t a = 0; a < R; a++)
            for (size_t b = 0; b < a; b++) {
                double dot = 0.0, na = 0.0, nb = 0.0;
                for (size_t k = 0; k < d; k++) {
                    dot += om[a + k * R] * om[b + k * R];
                    na += om[a + k * R] * om[a + k * R];
                    nb += om[b + k * R] * om[b + k * R];
                }
                double cosang = fabs(dot) / sqrt(na * nb);
                if (a / d == b / d)
                    max_in = fmax(max_in, cosang);
                else
                    max_across = fmax(max_across, cosang);
            }
        assert_true(max_in < 1e-12);
        assert_true(max_across > 0.1); /* blocks are independent, not one frame */
        free(om);
    }
}

static void test_seed_determinism(void **state)
{
    (void)state;
    gp_stein_options so;
    gp_stein_default_options(&so);
    so.iterations = 30;
    const size_t R = 30, d = 3;
    for (int smp = 0; smp < GP_FREQ_SAMPLER_COUNT; smp++)
        for (int fam = 0; fam < 2; fam++) {
            gp_kernel_type kt = fam ? GP_KERNEL_MATERN52 : GP_KERNEL_RBF;
            double *a = draw(kt, (gp_freq_sampler)smp, R, d, 42, &so);
            double *b = draw(kt, (gp_freq_sampler)smp, R, d, 42, &so);
            double *c = draw(kt, (gp_freq_sampler)smp, R, d, 43, &so);
            assert_memory_equal(a, b, R * d * sizeof(double));
            assert_memory_not_equal(a, c, R * d * sizeof(double));
            for (size_t i = 0; i < R * d; i++)
                assert_true(isfinite(a[i]));
            free(a);
            free(b);
            free(c);
        }
}

/* ---- kernel error --------------------------------------------------------------- */

static double brute_kernel(gp_kernel_type t, double r)
{
    switch (t) {
    case GP_KERNEL_RBF:
        return exp(-0.5 * r * r);
    case GP_KERNEL_MATERN12:
        return exp(-r);
    case GP_KERNEL_MATERN32:
        return (1.0 + sqrt(3.0) * r) * exp(-sqrt(3.0) * r);
    default:
        return (1.0 + sqrt(5.0) * r + 5.0 * r * r / 3.0) * exp(-sqrt(5.0) * r);
    }
}

static void test_kernel_error_brute_force(void **state)
{
    (void)state;
    const size_t n = 70, d = 3, R = 9;
    double X[70 * 3], om[9 * 3];
    fill_uniform(X, n * d, 3);
    for (size_t i = 0; i < n * d; i++)
        X[i] *= 2.0;
    const gp_kernel_type kts[] = {GP_KERNEL_RBF, GP_KERNEL_MATERN12, GP_KERNEL_MATERN32,
                                  GP_KERNEL_MATERN52};
    for (size_t t = 0; t < 4; t++) {
        gp_spectral s = spectral(kts[t]);
        assert_int_equal(gp_frequencies_draw(&s, GP_FREQ_MC, R, d, 9, NULL, NULL, NULL, om, NULL),
                         GP_OK);
        double num = 0.0, den = 0.0;
        for (size_t i = 0; i < n; i++)
            for (size_t j = 0; j < n; j++) {
                double r2 = 0.0;
                for (size_t k = 0; k < d; k++) {
                    double u = X[i + k * n] - X[j + k * n];
                    r2 += u * u;
                }
                double kh = 0.0;
                for (size_t r = 0; r < R; r++) {
                    double z = 0.0;
                    for (size_t k = 0; k < d; k++)
                        z += om[r + k * R] * (X[i + k * n] - X[j + k * n]);
                    kh += cos(z);
                }
                kh /= (double)R;
                double kk = brute_kernel(kts[t], sqrt(r2));
                num += (kk - kh) * (kk - kh);
                den += kk * kk;
            }
        double want = sqrt(num / den), got = 0.0;
        assert_int_equal(gp_features_kernel_error(kts[t], X, n, d, om, R, &got, NULL), GP_OK);
        assert_true(fabs(got - want) < 1e-10 * want);
    }
}

/* ---- stein ---------------------------------------------------------------------- */

static void test_stein_improves_on_mc_start(void **state)
{
    (void)state;
    const size_t n = 300, d = 2, R = 50;
    double X[300 * 2];
    fill_uniform(X, n * d, 8);
    gp_stein_options so;
    gp_stein_default_options(&so);
    so.init = GP_FREQ_MC;
    so.iterations = 200;
    double *mc = draw(GP_KERNEL_RBF, GP_FREQ_MC, R, d, 11, NULL);
    double *st = draw(GP_KERNEL_RBF, GP_FREQ_STEIN, R, d, 11, &so);
    double emc = 0.0, est = 0.0;
    assert_int_equal(gp_features_kernel_error(GP_KERNEL_RBF, X, n, d, mc, R, &emc, NULL), GP_OK);
    assert_int_equal(gp_features_kernel_error(GP_KERNEL_RBF, X, n, d, st, R, &est, NULL), GP_OK);
    if (!(est < 0.3 * emc))
        fail_msg("stein %g vs its mc start %g", est, emc);
    free(mc);
    free(st);
}

static double mean_variance(const double *om, size_t R, size_t d)
{
    double v = 0.0;
    for (size_t k = 0; k < d; k++) {
        double m = 0.0, s = 0.0;
        for (size_t r = 0; r < R; r++)
            m += om[r + k * R];
        m /= (double)R;
        for (size_t r = 0; r < R; r++)
            s += (om[r + k * R] - m) * (om[r + k * R] - m);
        v += s / (double)R;
    }
    return v / (double)d;
}

static void test_stein_bandwidth_rules_in_d10(void **state)
{
    (void)state;
    const size_t R = 200, d = 10;
    gp_stein_options so;
    gp_stein_default_options(&so);
    so.iterations = 400;
    so.bandwidth = GP_SVGD_BANDWIDTH_TOTAL;
    double *tot = draw(GP_KERNEL_RBF, GP_FREQ_STEIN, R, d, 3, &so);
    so.bandwidth = GP_SVGD_BANDWIDTH_PER_DIM;
    double *per = draw(GP_KERNEL_RBF, GP_FREQ_STEIN, R, d, 3, &so);
    double vt = mean_variance(tot, R, d), vp = mean_variance(per, R, d);
    if (!(vt > 0.85 && vt < 1.15 && vp < 0.5))
        fail_msg("particle variance: total %g (want ~1), per_dim %g (want << 1)", vt, vp);
    free(tot);
    free(per);
}

typedef struct cancel_ctx {
    int calls, last, stop_at;
} cancel_ctx;

static int cancel_cb(void *ctx, int iteration, double f)
{
    cancel_ctx *c = ctx;
    assert_true(f == 0.0);
    c->calls++;
    c->last = iteration;
    return iteration >= c->stop_at;
}

static void test_stein_cancel(void **state)
{
    (void)state;
    gp_spectral s = spectral(GP_KERNEL_RBF);
    gp_stein_options so;
    gp_stein_default_options(&so);
    so.iterations = 100;
    double om[20 * 2];
    cancel_ctx c = {0, 0, 30};
    gp_error err;
    assert_int_equal(gp_frequencies_draw(&s, GP_FREQ_STEIN, 20, 2, 1, &so, cancel_cb, &c, om, &err),
                     GP_ECANCELLED);
    assert_int_equal(err.code, GP_ECANCELLED);
    assert_int_equal(c.calls, 3);
    assert_int_equal(c.last, 30);
    c = (cancel_ctx){0, 0, 1000};
    assert_int_equal(gp_frequencies_draw(&s, GP_FREQ_STEIN, 20, 2, 1, &so, cancel_cb, &c, om, &err),
                     GP_OK);
    assert_int_equal(c.calls, 10);
    /* iterations = 0 returns the start (qmc by default). */
    double q[40];
    so.iterations = 0;
    assert_int_equal(gp_frequencies_draw(&s, GP_FREQ_STEIN, 20, 2, 1, &so, NULL, NULL, om, NULL),
                     GP_OK);
    assert_int_equal(gp_frequencies_draw(&s, GP_FREQ_QMC, 20, 2, 1, NULL, NULL, NULL, q, NULL),
                     GP_OK);
    assert_memory_equal(om, q, sizeof q);
}

/* gp_features_spread: points uniform on [0, s]^d with unit lengthscales have
 * spread s (sqrt(12) x the standard deviation); lengthscale l divides it. */
static void test_spread_of_uniform_points(void **state)
{
    (void)state;
    enum { N = 20000, D = 3 };
    double *X = malloc((size_t)N * D * sizeof *X);
    assert_non_null(X);
    gp_rng rng;
    gp_rng_seed(&rng, 21);
    for (size_t i = 0; i < (size_t)N * D; i++)
        X[i] = 5.0 * gp_rng_uniform(&rng);
    double s1 = gp_features_spread(X, N, D, NULL);
    assert_true(fabs(s1 - 5.0) < 0.05);
    const double inv_ls[D] = {0.5, 0.5, 0.5};
    assert_true(fabs(gp_features_spread(X, N, D, inv_ls) - 0.5 * s1) < 1e-12);
    free(X);
}

/* gp_freq_sampler_auto: stein for data spanning few lengthscales, a regular
 * sampler beyond (qmc up to d = 9, orf above), never stein for a Student-t
 * density above d = 4 or for a NaN spread. */
static void test_auto_rule(void **state)
{
    (void)state;
    gp_spectral gauss = {GP_SPECTRAL_GAUSSIAN, 0.0}, t32 = {GP_SPECTRAL_STUDENT_T, 1.5};
    assert_int_equal(gp_freq_sampler_auto(&gauss, 1.0, 2), GP_FREQ_STEIN);
    assert_int_equal(gp_freq_sampler_auto(NULL, 1.0, 2), GP_FREQ_STEIN);
    assert_int_equal(gp_freq_sampler_auto(&gauss, 20.0, 2), GP_FREQ_QMC);
    assert_int_equal(gp_freq_sampler_auto(&gauss, 20.0, 16), GP_FREQ_ORF);
    assert_int_equal(gp_freq_sampler_auto(&gauss, 0.5, 8), GP_FREQ_STEIN);
    assert_int_equal(gp_freq_sampler_auto(&gauss, 3.0, 8), GP_FREQ_QMC);
    assert_int_equal(gp_freq_sampler_auto(&t32, 1.0, 2), GP_FREQ_STEIN);
    assert_int_equal(gp_freq_sampler_auto(&t32, 0.5, 8), GP_FREQ_QMC);
    assert_int_equal(gp_freq_sampler_auto(&t32, 0.5, 16), GP_FREQ_ORF);
    assert_int_equal(gp_freq_sampler_auto(&gauss, NAN, 2), GP_FREQ_QMC);
    /* The threshold shrinks with the dimension. */
    for (size_t d = 2; d < 40; d++) {
        int stein_d = gp_freq_sampler_auto(&gauss, 1.6, d) == GP_FREQ_STEIN;
        int stein_lo = gp_freq_sampler_auto(&gauss, 1.6, d - 1) == GP_FREQ_STEIN;
        assert_true(!stein_d || stein_lo);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chisq_quantile_known_values),
        cmocka_unit_test(test_chisq_quantile_round_trip),
        cmocka_unit_test(test_names_and_defaults),
        cmocka_unit_test(test_error_codes),
        cmocka_unit_test(test_moments_mc_qmc_orf),
        cmocka_unit_test(test_moments_stein),
        cmocka_unit_test(test_orf_blocks_orthogonal),
        cmocka_unit_test(test_seed_determinism),
        cmocka_unit_test(test_kernel_error_brute_force),
        cmocka_unit_test(test_stein_improves_on_mc_start),
        cmocka_unit_test(test_stein_bandwidth_rules_in_d10),
        cmocka_unit_test(test_stein_cancel),
        cmocka_unit_test(test_spread_of_uniform_points),
        cmocka_unit_test(test_auto_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
