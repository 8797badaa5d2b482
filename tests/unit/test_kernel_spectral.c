/* kernel: spectral densities and their samplers (types, moments, the
 * multivariate case, the kernel reproduced from samples, the sample layout,
 * the score, normalisation). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/base/rng.h"
#include "core/kernel/kernel.h"
#include "core/kernel/kernel_codec.h"
#include "core/kernel/kernel_spectral.h"
#include "tests/unit/testutil.h"
#include "tests/unit/kernel_fixture.h"

/* ------------------------------------------------------------------------ */
/* spectral densities                                                         */

#define DRAWS 200000
#define SD 3

static double *draw_n(gp_kernel_type type, uint64_t seed, size_t count, gp_spectral *s)
{
    gp_error err;
    assert_int_equal(gp_kernel_spectral(type, s, &err), GP_OK);
    double *w = malloc(count * SD * sizeof *w);
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    gp_spectral_sample(s, SD, count, &rng, w);
    return w;
}

static double *draw(gp_kernel_type type, uint64_t seed, gp_spectral *s)
{
    return draw_n(type, seed, DRAWS, s);
}

static void test_spectral_types(void **state)
{
    (void)state;
    gp_spectral s;
    gp_error err;
    assert_int_equal(gp_kernel_spectral(GP_KERNEL_RBF, &s, &err), GP_OK);
    assert_true(s.family == GP_SPECTRAL_GAUSSIAN && s.nu == 0.0);
    const gp_kernel_type m[3] = {GP_KERNEL_MATERN12, GP_KERNEL_MATERN32, GP_KERNEL_MATERN52};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(gp_kernel_spectral(m[i], &s, &err), GP_OK);
        assert_true(s.family == GP_SPECTRAL_STUDENT_T && s.nu == 0.5 + i);
    }
    const gp_kernel_type none[] = {GP_KERNEL_RQ, GP_KERNEL_PERIODIC, GP_KERNEL_LINEAR,
                                   GP_KERNEL_WHITE, GP_KERNEL_SUM, GP_KERNEL_PRODUCT};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        gp_error_clear(&err);
        assert_int_equal(gp_kernel_spectral(none[i], &s, &err), GP_EUNSUPPORTED);
        assert_int_equal(err.code, GP_EUNSUPPORTED);
        const char *names[4] = {"rbf", "matern12", "matern32", "matern52"};
        for (int j = 0; j < 4; j++)
            assert_non_null(strstr(err.message, names[j]));
    }
}

static void moments(const double *w, size_t n, double *mean, double *cov)
{
    for (int a = 0; a < SD; a++) {
        double s = 0.0;
        for (size_t i = 0; i < n; i++)
            s += w[i + a * n];
        mean[a] = s / (double)n;
    }
    for (int a = 0; a < SD; a++)
        for (int b = 0; b < SD; b++) {
            double s = 0.0;
            for (size_t i = 0; i < n; i++)
                s += (w[i + a * n] - mean[a]) * (w[i + b * n] - mean[b]);
            cov[a + b * SD] = s / (double)(n - 1);
        }
}

static void check_moments(gp_kernel_type type, size_t n, double var, double mean_tol,
                          double rel_tol)
{
    gp_spectral s;
    double *w = draw_n(type, 21 + (uint64_t)type, n, &s), mean[SD], cov[SD * SD];
    moments(w, n, mean, cov);
    for (int a = 0; a < SD; a++) {
        assert_float_equal(mean[a], 0.0, mean_tol);
        for (int b = 0; b < SD; b++)
            assert_float_equal(cov[a + b * SD], a == b ? var : 0.0, rel_tol * var);
    }
    free(w);
}

static void test_spectral_moments(void **state)
{
    (void)state;
    check_moments(GP_KERNEL_RBF, DRAWS, 1.0, 0.015, 0.025);
    check_moments(GP_KERNEL_MATERN52, DRAWS, 5.0 / 3.0, 0.02, 0.06);
    /* 3 degrees of freedom: the variance exists but the fourth moment does not,
     * so the sample covariance converges slowly and with heavy tails; more
     * draws and a looser tolerance (still far from the 1 of a Gaussian or the
     * infinity of a chi-square with nu instead of 2 nu degrees of freedom). */
    check_moments(GP_KERNEL_MATERN32, 5 * DRAWS, 3.0, 0.03, 0.3);
}

/* A bounded, hence tightly estimated, second moment: for a multivariate t with
 * nu' degrees of freedom, E[nu' w w^T / (nu' + |w|^2)] = nu' / (d + nu') I (as
 * |z|^2 / (u + |z|^2) is Beta(d/2, nu'/2)). */
static void test_spectral_normalised_moment(void **state)
{
    (void)state;
    const gp_kernel_type types[3] = {GP_KERNEL_MATERN12, GP_KERNEL_MATERN32,
                                     GP_KERNEL_MATERN52};
    for (int t = 0; t < 3; t++) {
        gp_spectral s;
        double *w = draw(types[t], 51 + (uint64_t)t, &s), dof = 2.0 * s.nu;
        for (int a = 0; a < SD; a++)
            for (int b = 0; b < SD; b++) {
                double sum = 0.0;
                for (size_t i = 0; i < DRAWS; i++) {
                    double n2 = 0.0;
                    for (int c = 0; c < SD; c++)
                        n2 += w[i + c * DRAWS] * w[i + c * DRAWS];
                    sum += dof * w[i + a * DRAWS] * w[i + b * DRAWS] / (dof + n2);
                }
                assert_float_equal(sum / DRAWS, a == b ? dof / (SD + dof) : 0.0, 0.012);
            }
        free(w);
    }
}

static double correlation(const double *a, const double *b, size_t n)
{
    double ma = 0, mb = 0, saa = 0, sbb = 0, sab = 0;
    for (size_t i = 0; i < n; i++) {
        ma += a[i];
        mb += b[i];
    }
    ma /= (double)n;
    mb /= (double)n;
    for (size_t i = 0; i < n; i++) {
        saa += (a[i] - ma) * (a[i] - ma);
        sbb += (b[i] - mb) * (b[i] - mb);
        sab += (a[i] - ma) * (b[i] - mb);
    }
    return sab / sqrt(saa * sbb);
}

/* A multivariate t shares one chi-square across coordinates, so log w1^2 and
 * log w2^2 share the term log(nu'/u): their correlation is
 * trigamma(nu'/2) / (trigamma(1/2) + trigamma(nu'/2)), not the 0 of d
 * independent t's (or of the Gaussian). */
static void test_spectral_multivariate(void **state)
{
    (void)state;
    const double pi2_2 = PI_ * PI_ / 2.0; /* trigamma(1/2) */
    const struct {
        gp_kernel_type type;
        double trigamma; /* of nu'/2 */
    } cases[] = {
        {GP_KERNEL_RBF, 0.0},
        {GP_KERNEL_MATERN12, pi2_2},
        {GP_KERNEL_MATERN32, pi2_2 - 4.0},
        {GP_KERNEL_MATERN52, pi2_2 - 4.0 - 4.0 / 9.0},
    };
    double *l1 = malloc(DRAWS * sizeof *l1), *l2 = malloc(DRAWS * sizeof *l2);
    for (size_t c = 0; c < 4; c++) {
        gp_spectral s;
        double *w = draw(cases[c].type, 31 + c, &s);
        for (size_t i = 0; i < DRAWS; i++) {
            l1[i] = log(w[i] * w[i]);
            l2[i] = log(w[i + DRAWS] * w[i + DRAWS]);
        }
        double want = cases[c].trigamma / (pi2_2 + cases[c].trigamma);
        assert_float_equal(correlation(l1, l2, DRAWS), want, 0.015);
        if (cases[c].type == GP_KERNEL_MATERN52) {
            /* And the squares themselves are positively correlated. */
            for (size_t i = 0; i < DRAWS; i++) {
                l1[i] = w[i] * w[i];
                l2[i] = w[i + DRAWS] * w[i + DRAWS];
            }
            assert_true(correlation(l1, l2, DRAWS) > 0.05);
        }
        free(w);
    }
    free(l1);
    free(l2);
}

/* The spectral measure reproduces the kernel: E cos(w^T tau~) = k(tau) / s2,
 * with tau~ = tau / l the scaled lag. */
static void test_spectral_reproduces_kernel(void **state)
{
    (void)state;
    const gp_kernel_type types[4] = {GP_KERNEL_RBF, GP_KERNEL_MATERN12, GP_KERNEL_MATERN32,
                                     GP_KERNEL_MATERN52};
    const double ls[SD] = {0.7, 1.3, 2.0};
    const double taus[4][SD] = {
        {0.3, -0.2, 0.5}, {0.8, 0.9, -1.1}, {0.0, 0.0, 2.5}, {1.5, 1.5, 1.5}};
    const double zero[SD] = {0, 0, 0};
    for (int t = 0; t < 4; t++) {
        gp_kernel *k = leaf(types[t], 1, NULL, 0);
        set_leaf(k, 2.5, ls, 1.0, 1.0);
        gp_spectral s;
        double *w = draw(types[t], 41 + (uint64_t)t, &s);
        for (int j = 0; j < 4; j++) {
            double sum = 0.0, sum2 = 0.0;
            for (size_t i = 0; i < DRAWS; i++) {
                double dot = 0.0;
                for (int c = 0; c < SD; c++)
                    dot += w[i + c * DRAWS] * taus[j][c] / ls[c];
                double v = cos(dot);
                sum += v;
                sum2 += v * v;
            }
            double mean = sum / DRAWS, se = sqrt((sum2 / DRAWS - mean * mean) / DRAWS);
            double want = gp_kernel_eval(k, taus[j], zero, 0) / 2.5;
            if (!(fabs(mean - want) <= 4.0 * se + 1e-12)) {
                print_error("%s tau %d: MC %.5f +- %.5f, kernel %.5f\n",
                            gp_kernel_type_name(types[t]), j, mean, se, want);
                fail();
            }
        }
        free(w);
        gp_kernel_free(k);
    }
}

static void test_spectral_sample_layout(void **state)
{
    (void)state;
    gp_spectral s = {GP_SPECTRAL_GAUSSIAN, 0.0};
    gp_rng a, b;
    gp_rng_seed(&a, 5);
    gp_rng_seed(&b, 5);
    double w[4 * 2];
    gp_spectral_sample(&s, 2, 4, &a, w);
    /* Draw i is row i of the column-major 4 x 2 matrix, coordinates in order. */
    for (int i = 0; i < 4; i++) {
        double z0 = gp_rng_normal(&b), z1 = gp_rng_normal(&b);
        assert_true(w[i] == z0 && w[i + 4] == z1);
    }
    /* Student-t: the same normals, one shared scale per draw. */
    gp_spectral t = {GP_SPECTRAL_STUDENT_T, 1.5};
    gp_rng_seed(&a, 6);
    gp_rng_seed(&b, 6);
    gp_spectral_sample(&t, 2, 4, &a, w);
    for (int i = 0; i < 4; i++) {
        double z0 = gp_rng_normal(&b), z1 = gp_rng_normal(&b);
        assert_float_equal(w[i] / z0, w[i + 4] / z1, 1e-12 * fabs(w[i] / z0));
        assert_true(w[i] / z0 > 0.0);
        gp_rng_chisq(&b, 3.0);
    }
}

static void test_spectral_score(void **state)
{
    (void)state;
    const gp_spectral fam[4] = {{GP_SPECTRAL_GAUSSIAN, 0.0},
                                {GP_SPECTRAL_STUDENT_T, 0.5},
                                {GP_SPECTRAL_STUDENT_T, 1.5},
                                {GP_SPECTRAL_STUDENT_T, 2.5}};
    const double om[3][SD] = {{0.3, -1.2, 0.7}, {2.5, 0.1, -3.0}, {0.0, 0.0, 0.0}};
    for (int f = 0; f < 4; f++)
        for (int o = 0; o < 3; o++) {
            double score[SD], w[SD];
            gp_spectral_score(&fam[f], SD, om[o], score);
            for (int c = 0; c < SD; c++) {
                memcpy(w, om[o], sizeof w);
                w[c] += 1e-5;
                double up = gp_spectral_log_density(&fam[f], SD, w);
                w[c] -= 2e-5;
                double dn = gp_spectral_log_density(&fam[f], SD, w);
                assert_float_equal(score[c], (up - dn) / 2e-5, 1e-7 * (1 + fabs(score[c])));
            }
        }
    double w0[SD] = {0, 0, 0};
    /* Closed forms at 0: Gaussian (2 pi)^(-3/2); Cauchy in d = 1: 1/pi. */
    assert_float_equal(gp_spectral_log_density(&fam[0], SD, w0), -1.5 * log(2 * PI_), 1e-14);
    assert_float_equal(gp_spectral_log_density(&fam[1], 1, w0), -log(PI_), 1e-14);
}

/* integral over R^d of exp(log p), radially: S_{d-1} int_0^inf rho^(d-1) p(rho) drho
 * with rho = tan(theta) (midpoint rule), which handles the Cauchy's tails. */
static double total_mass(const gp_spectral *s, size_t d)
{
    const size_t steps = 200000;
    const double sphere[4] = {0.0, 2.0, 2.0 * PI_, 4.0 * PI_}; /* d = 1 counts both sides */
    double h = (PI_ / 2.0) / (double)steps, sum = 0.0;
    for (size_t i = 0; i < steps; i++) {
        double th = (i + 0.5) * h, rho = tan(th), c = cos(th);
        double w[SD] = {rho, 0.0, 0.0};
        sum += pow(rho, (double)d - 1.0) * exp(gp_spectral_log_density(s, d, w)) / (c * c);
    }
    return sphere[d] * sum * h;
}

static void test_spectral_normalised(void **state)
{
    (void)state;
    const gp_spectral fam[5] = {{GP_SPECTRAL_GAUSSIAN, 0.0},
                                {GP_SPECTRAL_STUDENT_T, 0.5},
                                {GP_SPECTRAL_STUDENT_T, 1.5},
                                {GP_SPECTRAL_STUDENT_T, 2.5},
                                {GP_SPECTRAL_STUDENT_T, 0.8}}; /* not a half-integer */
    for (int f = 0; f < 5; f++)
        for (size_t d = 1; d <= 3; d++) {
            /* The Cauchy in d >= 2 has tails too heavy for this quadrature. */
            if (f == 1 && d > 1)
                continue;
            double mass = total_mass(&fam[f], d);
            if (!(fabs(mass - 1.0) < 1e-6)) {
                print_error("family %d nu %g d %zu: mass %.10f\n", (int)fam[f].family, fam[f].nu,
                            d, mass);
                fail();
            }
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_spectral_types),
        cmocka_unit_test(test_spectral_moments),
        cmocka_unit_test(test_spectral_normalised_moment),
        cmocka_unit_test(test_spectral_multivariate),
        cmocka_unit_test(test_spectral_reproduces_kernel),
        cmocka_unit_test(test_spectral_sample_layout),
        cmocka_unit_test(test_spectral_score),
        cmocka_unit_test(test_spectral_normalised),
    };
    return cmocka_run_group_tests_name("kernel", tests, NULL, NULL);
}
