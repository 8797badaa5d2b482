/* Unit tests for bench/support/kjit_oracle.c, the quadrature oracle of the
 * online benchmark (KJIT Experiment 1, docs/methods/kernel-jit-online.md §5):
 * the moments of t(z) = N(z; m, v) sigma(z)^(a-1) (1 - sigma(z))^(b-1).
 *
 * - Against a brute-force integral: the trapezoidal rule on a uniform grid of
 *   step min(sqrt v, 1) / 20 over [m - v(b-1) - 40 sqrt v, m + v(a-1) + 40 sqrt v]
 *   (the mode lies in [m - v(b-1), m + v(a-1)] and log t falls at least as fast
 *   as the parabola of curvature 1/v away from it, so the range leaves out
 *   e^-800 of the mass), summed in long double with its own long double
 *   integrand. For an analytic integrand decaying on the whole line the
 *   trapezoidal rule converges geometrically in 1/step: its error is of order
 *   exp(-2 pi d / step) with d = pi the distance of sigma's poles from the real
 *   line (below 1e-80 at step 1/20), and exp(-2 pi^2 v / step^2) for the
 *   Gaussian (below 1e-800), so the reference is exact to rounding. Required: 1e-10 relative on the moments
 *   (the mean to 1e-10 x max(|mean|, sd), the variance to 1e-10 relative,
 *   log Z to 1e-10 absolute) over 245 (m, v, a, b) cases from v = 1e-4 to 100.
 * - Exact identities: a = b = 1 gives N(m, v) back; the sigma and 1 - sigma
 *   tilts partition N(m, v) (their Z sum to 1 and their Z-weighted first and
 *   second moments to m and v + m^2); mirroring z -> -z swaps a and b.
 * - The Gaussian KL helper against the direct formula and its small-gap series. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>

#include "bench/support/kjit_oracle.h"
#include "tests/unit/testutil.h"

static long double log_sigmoid_l(long double z)
{
    return z >= 0 ? -log1pl(expl(-z)) : z - log1pl(expl(z));
}

static long double log_t_l(long double z, double m, double v, double a, double b)
{
    long double d = z - (long double)m;
    return -d * d / (2.0L * v) + (a - 1) * log_sigmoid_l(z) + (b - 1) * log_sigmoid_l(-z);
}

typedef struct brute {
    double log_z, mean, var;
} brute;

static brute brute_force(double m, double v, double a, double b)
{
    long double sd = sqrtl((long double)v);
    long double lo = m - v * (b - 1) - 40 * sd, hi = m + v * (a - 1) + 40 * sd;
    long double h = (sd < 1 ? sd : 1.0L) / 20;
    size_t n = (size_t)ceill((hi - lo) / h);
    h = (hi - lo) / (long double)n;
    /* reference level: the largest log t on the grid */
    long double top = -INFINITY;
    for (size_t i = 0; i <= n; i++) {
        long double l = log_t_l(lo + h * (long double)i, m, v, a, b);
        if (l > top)
            top = l;
    }
    long double s0 = 0, s1 = 0;
    for (size_t i = 0; i <= n; i++) {
        long double z = lo + h * (long double)i;
        long double w = expl(log_t_l(z, m, v, a, b) - top) * ((i == 0 || i == n) ? 0.5L : 1.0L);
        s0 += w;
        s1 += w * z;
    }
    long double mean = s1 / s0, s2 = 0;
    for (size_t i = 0; i <= n; i++) {
        long double z = lo + h * (long double)i;
        long double w = expl(log_t_l(z, m, v, a, b) - top) * ((i == 0 || i == n) ? 0.5L : 1.0L);
        s2 += w * (z - mean) * (z - mean);
    }
    brute r;
    r.mean = (double)mean;
    r.var = (double)(s2 / s0);
    r.log_z = (double)(top + logl(s0 * h) - 0.5L * logl(2 * 3.14159265358979323846L * v));
    return r;
}

static void test_against_brute_force_grid(void **state)
{
    (void)state;
    static const double ms[] = {-30, -5, -1, 0, 0.5, 3, 12};
    static const double vs[] = {1e-4, 0.01, 0.3, 1, 5, 25, 100};
    static const double ab[][2] = {{2, 1}, {1, 2}, {1, 1}, {3, 1.5}, {1.2, 7}};
    gp_kjit_oracle o;
    gp_kjit_oracle_init(&o);
    double worst_mean = 0, worst_var = 0, worst_logz = 0;
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++)
        for (size_t j = 0; j < sizeof vs / sizeof vs[0]; j++)
            for (size_t k = 0; k < sizeof ab / sizeof ab[0]; k++) {
                double m = ms[i], v = vs[j], a = ab[k][0], b = ab[k][1];
                gp_kjit_moments q;
                gp_error err;
                assert_int_equal(gp_kjit_logistic_tilted(&o, m, v, a, b, &q, &err), GP_OK);
                brute r = brute_force(m, v, a, b);
                double sd = sqrt(r.var);
                double scale = fabs(r.mean) > sd ? fabs(r.mean) : sd;
                tu_assert_within(q.mean, r.mean, 1e-10 * scale, "mean (m %g, v %g, a %g, b %g)",
                                 m, v, a, b);
                tu_assert_within(q.var, r.var, 1e-10 * r.var, "var (m %g, v %g, a %g, b %g)", m,
                                 v, a, b);
                tu_assert_within(q.log_z, r.log_z, 1e-10, "log Z (m %g, v %g, a %g, b %g)", m, v,
                                 a, b);
                if (fabs(q.mean - r.mean) / scale > worst_mean)
                    worst_mean = fabs(q.mean - r.mean) / scale;
                if (fabs(q.var - r.var) / r.var > worst_var)
                    worst_var = fabs(q.var - r.var) / r.var;
                if (fabs(q.log_z - r.log_z) > worst_logz)
                    worst_logz = fabs(q.log_z - r.log_z);
            }
    printf("kjit oracle against the grid: worst relative mean %.2g, var %.2g, log Z %.2g\n",
           worst_mean, worst_var, worst_logz);
}

static void test_untilted_is_the_gaussian(void **state)
{
    (void)state;
    gp_kjit_oracle o;
    gp_kjit_oracle_init(&o);
    static const double cases[][2] = {{0, 1}, {-7, 1e-3}, {40, 250}, {2.5, 0.04}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        gp_kjit_moments q;
        assert_int_equal(gp_kjit_logistic_tilted(&o, cases[i][0], cases[i][1], 1, 1, &q, NULL),
                         GP_OK);
        tu_assert_within(q.mean, cases[i][0], 1e-13 * (fabs(cases[i][0]) + sqrt(cases[i][1])),
                         "mean %zu", i);
        tu_assert_close(q.var, cases[i][1], 1e-13, 0, "var %zu", i);
        tu_assert_within(q.log_z, 0, 1e-13, "log Z %zu", i);
    }
}

/* sigma(z) + (1 - sigma(z)) = 1: the two tilts split N(m, v) in two. */
static void test_tilts_partition_the_gaussian(void **state)
{
    (void)state;
    gp_kjit_oracle o;
    gp_kjit_oracle_init(&o);
    static const double cases[][2] = {{0, 1}, {-3, 20}, {1.5, 0.2}, {8, 4}, {-0.3, 60}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double m = cases[i][0], v = cases[i][1];
        gp_kjit_moments p, q;
        assert_int_equal(gp_kjit_logistic_tilted(&o, m, v, 2, 1, &p, NULL), GP_OK);
        assert_int_equal(gp_kjit_logistic_tilted(&o, m, v, 1, 2, &q, NULL), GP_OK);
        double zp = exp(p.log_z), zq = exp(q.log_z);
        tu_assert_within(zp + zq, 1, 1e-13, "Z sum %zu", i);
        tu_assert_within(zp * p.mean + zq * q.mean, m, 1e-12 * (fabs(m) + sqrt(v)), "mean %zu", i);
        tu_assert_close(zp * (p.var + p.mean * p.mean) + zq * (q.var + q.mean * q.mean),
                        v + m * m, 1e-12, 0, "second moment %zu", i);
    }
}

/* t(z) with (m, a, b) is t(-z) with (-m, b, a). */
static void test_mirror_swaps_a_and_b(void **state)
{
    (void)state;
    gp_kjit_oracle o;
    gp_kjit_oracle_init(&o);
    gp_kjit_moments p, q;
    assert_int_equal(gp_kjit_logistic_tilted(&o, 1.7, 3.2, 2.5, 1.3, &p, NULL), GP_OK);
    assert_int_equal(gp_kjit_logistic_tilted(&o, -1.7, 3.2, 1.3, 2.5, &q, NULL), GP_OK);
    tu_assert_within(p.mean, -q.mean, 1e-13, "mean");
    tu_assert_close(p.var, q.var, 1e-13, 0, "var");
    tu_assert_within(p.log_z, q.log_z, 1e-13, "log Z");
}

static void test_refuses_bad_arguments(void **state)
{
    (void)state;
    gp_kjit_oracle o;
    gp_kjit_oracle_init(&o);
    gp_kjit_moments q;
    gp_error err;
    assert_int_equal(gp_kjit_logistic_tilted(&o, 0, 0, 2, 1, &q, &err), GP_EINVAL);
    assert_int_equal(gp_kjit_logistic_tilted(&o, 0, -1, 2, 1, &q, &err), GP_EINVAL);
    assert_int_equal(gp_kjit_logistic_tilted(&o, NAN, 1, 2, 1, &q, &err), GP_EINVAL);
    assert_int_equal(gp_kjit_logistic_tilted(&o, 0, 1, 0.5, 1, &q, &err), GP_EINVAL);
    assert_int_equal(gp_kjit_logistic_tilted(&o, 0, 1, 1, INFINITY, &q, &err), GP_EINVAL);
}

static void test_gauss_kl(void **state)
{
    (void)state;
    /* direct formula where nothing cancels */
    double m1 = 0.3, v1 = 2.0, m2 = -1.1, v2 = 0.5;
    double want = 0.5 * (log(v2 / v1) + (v1 + (m1 - m2) * (m1 - m2)) / v2 - 1);
    tu_assert_close(gp_kjit_gauss_kl(m1, log(v1), m2, log(v2)), want, 1e-14, 0, "separated");
    tu_assert_within(gp_kjit_gauss_kl(1, 0.2, 1, 0.2), 0, 0, "equal");
    /* a small log-variance gap: d^2/4 to leading order, from long double */
    double d = 3e-6;
    long double dl = d;
    double ref = (double)(0.5L * (dl + expm1l(-dl)));
    tu_assert_close(gp_kjit_gauss_kl(0, 0, 0, d), ref, 1e-9, 0, "small gap");
    tu_assert_close(gp_kjit_gauss_kl(0, 0, 0, 2e-3), 0.5 * (2e-3 + expm1(-2e-3)), 1e-10, 0,
                    "series edge");
    tu_assert_close(gp_kjit_gauss_kl(0, 0, 0, 9.9e-4), 0.5 * (9.9e-4 + expm1(-9.9e-4)), 1e-9, 0,
                    "series side");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_against_brute_force_grid),
        cmocka_unit_test(test_untilted_is_the_gaussian),
        cmocka_unit_test(test_tilts_partition_the_gaussian),
        cmocka_unit_test(test_mirror_swaps_a_and_b),
        cmocka_unit_test(test_refuses_bad_arguments),
        cmocka_unit_test(test_gauss_kl),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
