/* core/likelihood/softmax: labels and their error fields, the fixed draw set,
 * the expected log likelihood's exact gradients (central differences of the
 * estimate itself), the two-class identity with the logistic, a fixture of
 * tensor Gauss-Hermite integrals (tests/fixtures/make_softmax_fixture.py, cross-checked there
 * against GPyTorch 1.8.1's SoftmaxLikelihood), probabilities in (0, 1)
 * summing to 1, batching invariance, and label draws.
 *
 * Monte Carlo tolerances: an estimate from S antithetic draws has variance
 * sigma^2 (1 + rho) / S <= 2 sigma^2 / S (sigma one draw's standard deviation,
 * rho the correlation within a pair), so the tests allow 5 sqrt(2) sigma / sqrt(S),
 * with sigma from the reference integrals. The draws are fixed, so each check
 * is deterministic. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "bench/support/fixture.h"
#include "core/base/rng.h"
#include "core/likelihood/likelihood.h"
#include "core/likelihood/softmax.h"
#include "tests/unit/testutil.h"

static double mc_tol(double sigma, size_t S)
{
    return 5.0 * sqrt(2.0) * sigma / sqrt((double)S) + 1e-8;
}

static void mc_ok(gp_softmax_mc *mc, size_t C, size_t S)
{
    gp_error err;
    if (gp_softmax_mc_init(mc, C, S, &err))
        fail_msg("%s", err.message);
}

static void test_labels(void **state)
{
    (void)state;
    gp_error err;
    size_t C = 0;
    double ok[4] = {0, 2, 1, 2};
    assert_int_equal(gp_softmax_classes(ok, 4, &C, &err), GP_OK);
    assert_int_equal(C, 3);
    /* a missing class below the maximum is allowed: C still max + 1 */
    double gap[3] = {0, 3, 3};
    assert_int_equal(gp_softmax_classes(gap, 3, &C, &err), GP_OK);
    assert_int_equal(C, 4);
    double top[2] = {0, GP_SOFTMAX_MAX_CLASSES - 1};
    assert_int_equal(gp_softmax_classes(top, 2, &C, &err), GP_OK);
    assert_int_equal(C, GP_SOFTMAX_MAX_CLASSES);
    const double bad[] = {1.5, -1.0, NAN, INFINITY, GP_SOFTMAX_MAX_CLASSES, 1e300};
    for (size_t b = 0; b < sizeof bad / sizeof bad[0]; b++) {
        double y[3] = {0, 1, bad[b]};
        C = 99;
        assert_int_equal(gp_softmax_classes(y, 3, &C, &err), GP_EDATA);
        assert_string_equal(err.field, "y[2]");
        assert_int_equal(C, 99);
    }
    double one[3] = {0, 0, 0};
    assert_int_equal(gp_softmax_classes(one, 3, &C, &err), GP_EDATA);
    assert_string_equal(err.field, "y");
    assert_int_equal(gp_softmax_classes(one, 0, &C, &err), GP_EDATA);
    assert_string_equal(err.field, "y");
}

static void test_draw_set(void **state)
{
    (void)state;
    gp_softmax_mc a, b;
    gp_error err;
    assert_int_equal(gp_softmax_mc_init(&a, 1, 64, &err), GP_EINVAL);
    assert_int_equal(gp_softmax_mc_init(&a, GP_SOFTMAX_MAX_CLASSES + 1, 64, &err), GP_EINVAL);
    assert_int_equal(gp_softmax_mc_init(&a, 3, 63, &err), GP_EINVAL);
    assert_int_equal(gp_softmax_mc_init(&a, 3, 0, &err), GP_EINVAL);
    assert_int_equal(gp_softmax_mc_init(&a, 3, GP_SOFTMAX_MAX_DRAWS + 2, &err), GP_EINVAL);
    mc_ok(&a, 5, GP_SOFTMAX_DRAWS);
    mc_ok(&b, 5, GP_SOFTMAX_DRAWS);
    /* the same draws every time, antithetic halves */
    assert_memory_equal(a.e, b.e, a.S * a.C * sizeof *a.e);
    size_t half = a.S / 2 * a.C;
    for (size_t i = 0; i < half; i++)
        assert_true(a.e[half + i] == -a.e[i]);
    gp_softmax_mc_free(&a);
    gp_softmax_mc_free(&b);
}

/* Central differences of the estimate (the draws are fixed, so it is a smooth
 * deterministic function) against its reported derivatives. */
static void test_expected_gradients(void **state)
{
    (void)state;
    const size_t Cs[3] = {2, 3, 7};
    gp_rng rng;
    gp_rng_seed(&rng, 35);
    for (size_t t = 0; t < 3; t++) {
        size_t C = Cs[t];
        gp_softmax_mc mc;
        mc_ok(&mc, C, GP_SOFTMAX_DRAWS);
        for (size_t rep = 0; rep < 4; rep++) {
            double mu[8], var[8], dmu[8], dvar[8], g2[8];
            for (size_t c = 0; c < C; c++) {
                mu[c] = 4.0 * gp_rng_uniform(&rng) - 2.0;
                var[c] = 0.05 + 2.0 * gp_rng_uniform(&rng);
            }
            size_t y = rep % C;
            double v = gp_softmax_expected(&mc, y, mu, var, dmu, dvar);
            /* the value is the same with and without derivatives */
            assert_true(v == gp_softmax_expected(&mc, y, mu, var, NULL, g2));
            assert_memory_equal(g2, dvar, C * sizeof *g2);
            const double h = 1e-5;
            for (size_t c = 0; c < C; c++) {
                double keep = mu[c];
                mu[c] = keep + h;
                double up = gp_softmax_expected(&mc, y, mu, var, NULL, NULL);
                mu[c] = keep - h;
                double dn = gp_softmax_expected(&mc, y, mu, var, NULL, NULL);
                mu[c] = keep;
                tu_assert_within(dmu[c], (up - dn) / (2 * h), 1e-7, "C=%zu dmu[%zu]", C, c);
                keep = var[c];
                var[c] = keep + h;
                up = gp_softmax_expected(&mc, y, mu, var, NULL, NULL);
                var[c] = keep - h;
                dn = gp_softmax_expected(&mc, y, mu, var, NULL, NULL);
                var[c] = keep;
                tu_assert_within(dvar[c], (up - dn) / (2 * h), 1e-7, "C=%zu dvar[%zu]", C, c);
            }
        }
        gp_softmax_mc_free(&mc);
    }
}

/* At var = 0 the estimate is log softmax(mu)_y exactly; dvar is Price's
 * limit -p_c (1 - p_c) / 2. */
static void test_expected_at_zero_variance(void **state)
{
    (void)state;
    gp_softmax_mc mc;
    mc_ok(&mc, 3, GP_SOFTMAX_DRAWS);
    double mu[3] = {0.3, -1.2, 2.0}, var[3] = {0, 0, -1e-3}, dmu[3], dvar[3];
    double lse = log(exp(mu[0]) + exp(mu[1]) + exp(mu[2]));
    double v = gp_softmax_expected(&mc, 1, mu, var, dmu, dvar);
    tu_assert_within(v, mu[1] - lse, 1e-14, "log softmax");
    for (size_t c = 0; c < 3; c++) {
        double p = exp(mu[c] - lse);
        tu_assert_within(dmu[c], (c == 1) - p, 1e-14, "dmu[%zu]", c);
        tu_assert_within(dvar[c], -0.5 * p * (1 - p), 1e-14, "dvar[%zu]", c);
    }
    /* latents far apart: finite, no overflow */
    double far[3] = {800.0, -800.0, 0.0}, one[3] = {1, 1, 1};
    v = gp_softmax_expected(&mc, 0, far, one, dmu, dvar);
    assert_true(isfinite(v) && fabs(v) < 1e-100);
    v = gp_softmax_expected(&mc, 1, far, one, dmu, dvar);
    tu_assert_within(v, -1600.0, 1e-9, "far label");
    gp_softmax_mc_free(&mc);
}

/* C = 2: log softmax(f0, f1)_0 = log logistic(f0 - f1) and
 * softmax_0 = logistic(f0 - f1), f0 - f1 ~ N(mu0 - mu1, v0 + v1): the
 * bernoulli likelihood's 64-point Gauss-Hermite of the difference. */
static void test_two_classes_are_logistic(void **state)
{
    (void)state;
    gp_error err;
    gp_quadrature q;
    assert_int_equal(gp_quadrature_init(&q, GP_LIK_QUADRATURE_MAX, &err), GP_OK);
    gp_lik bern = {GP_LIK_BERNOULLI, 0.0};
    const double cases[][4] = {{0.5, -0.2, 0.3, 0.7}, {-1.0, 1.5, 2.0, 0.1}, {2.5, 0.0, 0.01, 0.02},
                               {0.0, 0.0, 1.0, 1.0}};
    const size_t Ss[2] = {GP_SOFTMAX_DRAWS, GP_SOFTMAX_MAX_DRAWS};
    for (size_t si = 0; si < 2; si++) {
        gp_softmax_mc mc;
        mc_ok(&mc, 2, Ss[si]);
        for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
            double mu[2] = {cases[k][0], cases[k][1]}, var[2] = {cases[k][2], cases[k][3]};
            double dm = mu[0] - mu[1], dv = var[0] + var[1], sd = sqrt(dv);
            for (size_t y = 0; y < 2; y++) {
                /* class 0 is the bernoulli's y = 1 */
                double yb = y == 0 ? 1.0 : 0.0;
                double want = gp_lik_expected(&bern, &q, yb, dm, dv, NULL, NULL), m2 = 0.0;
                for (size_t i = 0; i < q.n; i++) {
                    double l = gp_lik_log_density(&bern, yb, dm + sd * q.x[i]) - want;
                    m2 += q.w[i] * l * l;
                }
                double got = gp_softmax_expected(&mc, y, mu, var, NULL, NULL);
                tu_assert_within(got, want, mc_tol(sqrt(m2), mc.S), "S=%zu case %zu y=%zu", mc.S,
                                 k, y);
            }
            double p1, pv, prob[2];
            gp_lik_predict(&bern, &q, &dm, &dv, 1, 1, &p1, &pv, NULL, NULL);
            gp_softmax_probabilities(&mc, mu, var, 1, prob);
            /* one draw's logistic has sd <= 1/2 */
            tu_assert_within(prob[0], p1, mc_tol(0.5, mc.S), "S=%zu case %zu p0", mc.S, k);
            tu_assert_within(prob[0] + prob[1], 1.0, 1e-12, "sum");
        }
        gp_softmax_mc_free(&mc);
    }
}

static const gp_fixture_block *block(const gp_fixture *fx, const char *name, size_t C)
{
    char full[32];
    snprintf(full, sizeof full, "%s%zu", name, C);
    const gp_fixture_block *b = gp_fixture_find(fx, full);
    if (b == NULL)
        fail_msg("fixture block %s missing", full);
    return b;
}

static void check_fixture_cases(const gp_fixture *fx, size_t C, size_t S)
{
    const gp_fixture_block *bm = block(fx, "mu", C), *bv = block(fx, "var", C),
                           *by = block(fx, "y", C), *be = block(fx, "ell", C),
                           *bes = block(fx, "ellsd", C), *bp = block(fx, "prob", C),
                           *bps = block(fx, "probsd", C);
    size_t n = bm->rows;
    assert_int_equal(bm->cols, C);
    gp_softmax_mc mc;
    mc_ok(&mc, C, S);
    double *prob = malloc(n * C * sizeof *prob), *logp = malloc(n * sizeof *logp);
    gp_softmax_probabilities(&mc, bm->data, bv->data, n, prob);
    gp_softmax_log_predictive(&mc, bm->data, bv->data, n, by->data, logp);
    for (size_t i = 0; i < n; i++) {
        double mu[GP_SOFTMAX_MAX_CLASSES], var[GP_SOFTMAX_MAX_CLASSES];
        for (size_t c = 0; c < C; c++) {
            mu[c] = bm->data[i + c * n];
            var[c] = bv->data[i + c * n];
        }
        size_t y = (size_t)by->data[i];
        double got = gp_softmax_expected(&mc, y, mu, var, NULL, NULL);
        tu_assert_within(got, be->data[i], mc_tol(bes->data[i], S), "C=%zu S=%zu ell[%zu]", C, S,
                         i);
        for (size_t c = 0; c < C; c++)
            tu_assert_within(prob[i + c * n], bp->data[i + c * n],
                             mc_tol(bps->data[i + c * n], S), "C=%zu S=%zu prob[%zu][%zu]", C,
                             S, i, c);
        /* the log predictive is the log of the class probability, in logs */
        tu_assert_within(logp[i], log(prob[i + y * n]), 1e-12, "C=%zu logp[%zu]", C, i);
    }
    free(prob);
    free(logp);
    gp_softmax_mc_free(&mc);
}

static void test_fixture(void **state)
{
    (void)state;
    char path[512];
    gp_fixture fx;
    gp_error err;
    assert_int_equal(gp_fixture_path(path, sizeof path, "softmax_reference.txt", &err), GP_OK);
    if (gp_fixture_load(path, &fx, &err))
        fail_msg("%s", err.message);
    for (size_t C = 2; C <= 4; C++) {
        check_fixture_cases(&fx, C, GP_SOFTMAX_DRAWS);
        check_fixture_cases(&fx, C, GP_SOFTMAX_PREDICT_DRAWS);
        check_fixture_cases(&fx, C, GP_SOFTMAX_MAX_DRAWS);
    }
    gp_fixture_free(&fx);
}

/* Every probability in (0, 1), rows summing to 1 within 1e-12, for latent
 * means from ordinary to absurd; the same bits one row at a time as batched. */
static void test_probabilities(void **state)
{
    (void)state;
    enum { M = 7, C = 5 };
    double mu[M * C], var[M * C], prob[M * C], row[C];
    gp_rng rng;
    gp_rng_seed(&rng, 7);
    for (size_t i = 0; i < M * C; i++) {
        mu[i] = 6.0 * gp_rng_normal(&rng);
        var[i] = 3.0 * gp_rng_uniform(&rng);
    }
    /* row 5: one class 1600 above another; row 6: zero variance, tied */
    for (size_t c = 0; c < C; c++) {
        mu[5 + c * M] = c == 0 ? 800.0 : c == 1 ? -800.0 : 0.0;
        mu[6 + c * M] = 1.0;
        var[6 + c * M] = 0.0;
    }
    var[5] = 1e4;
    gp_softmax_mc mc;
    mc_ok(&mc, C, GP_SOFTMAX_PREDICT_DRAWS);
    gp_softmax_probabilities(&mc, mu, var, M, prob);
    for (size_t i = 0; i < M; i++) {
        double s = 0.0;
        for (size_t c = 0; c < C; c++) {
            double p = prob[i + c * M];
            assert_true(p > 0.0 && p < 1.0);
            s += p;
        }
        tu_assert_within(s, 1.0, 1e-12, "row %zu sum", i);
        double mi[C], vi[C];
        for (size_t c = 0; c < C; c++) {
            mi[c] = mu[i + c * M];
            vi[c] = var[i + c * M];
        }
        gp_softmax_probabilities(&mc, mi, vi, 1, row);
        for (size_t c = 0; c < C; c++)
            assert_true(row[c] == prob[i + c * M]);
    }
    tu_assert_within(prob[6], 0.2, 1e-13, "tied"); /* 1024 sums of 0.2 */
    gp_softmax_mc_free(&mc);
}

/* Label draws: frequencies within 5 binomial standard errors of softmax(f),
 * and the same labels from the same seed. */
static void test_draws(void **state)
{
    (void)state;
    enum { C = 4, N = 100000 };
    double f0[C] = {0.5, -1.0, 1.5, 0.0}, *f = malloc(C * N * sizeof *f);
    double *y = malloc(N * sizeof *y), *y2 = malloc(N * sizeof *y2);
    for (size_t j = 0; j < N; j++)
        for (size_t c = 0; c < C; c++)
            f[c + j * C] = f0[c] + (j % 2 ? 700.0 : 0.0); /* a shift changes nothing */
    gp_rng rng;
    gp_rng_seed(&rng, 11);
    gp_softmax_draw(f, C, N, &rng, y);
    gp_rng_seed(&rng, 11);
    gp_softmax_draw(f, C, N, &rng, y2);
    assert_memory_equal(y, y2, N * sizeof *y);
    double count[C] = {0}, z = 0.0;
    for (size_t j = 0; j < N; j++) {
        assert_true(y[j] >= 0.0 && y[j] < C && y[j] == floor(y[j]));
        count[(size_t)y[j]] += 1.0;
    }
    for (size_t c = 0; c < C; c++)
        z += exp(f0[c]);
    for (size_t c = 0; c < C; c++) {
        double p = exp(f0[c]) / z;
        tu_assert_within(count[c] / N, p, 5.0 * sqrt(p * (1 - p) / N), "class %zu", c);
    }
    free(f);
    free(y);
    free(y2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_labels),
        cmocka_unit_test(test_draw_set),
        cmocka_unit_test(test_expected_gradients),
        cmocka_unit_test(test_expected_at_zero_variance),
        cmocka_unit_test(test_two_classes_are_logistic),
        cmocka_unit_test(test_fixture),
        cmocka_unit_test(test_probabilities),
        cmocka_unit_test(test_draws),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
