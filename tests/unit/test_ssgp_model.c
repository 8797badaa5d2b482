/* Method "ssgp" (core/methods/ssgp/ssgp.h), a fitted model: full covariance,
 * joint samples, export/import, Matern kernels, active_dims, shared
 * lengthscale, a large N without an N x N matrix, bad input, and a real
 * dataset against the exact GP. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <lapacke.h>

#include "bench/support/dataset.h"
#include "core/base/rng.h"
#include "core/base/state.h"
#include "core/features/sample.h"
#include "core/methods/exact.h"
#include "core/methods/registry.h"
#include "core/model/model.h"
#include "tests/unit/method_testutil.h"
#include "tests/unit/ssgp_fixture.h"

/* ---- full covariance and samples ---- */

static gp_model *toy_model(size_t n, size_t d, uint64_t seed, gp_kernel_type t)
{
    double *X = dalloc(n * d), *y = dalloc(n);
    toy_data(n, d, seed, 0.1, X, y, NULL);
    gp_kernel *k = leaf(t, d, 1, NULL, 0);
    gp_option_value opts[1] = {{.name = "features", .number = 60}};
    gp_fit_request req;
    fit_request(&req, X, y, n, d, k, opts, 1);
    gp_model *model = fit_ok(ssgp(), &req, "toy model");
    gp_kernel_free(k);
    free(X);
    free(y);
    return model;
}

static void test_full_covariance(void **state)
{
    (void)state;
    gp_model *model = toy_model(150, 2, 31, GP_KERNEL_RBF);
    const size_t m = 25;
    double Xs[50], mu[25], var[25], mu2[25], var2[25], C[625];
    for (size_t i = 0; i < 2 * m; i++)
        Xs[i] = 2.3 * sin(1.37 * (double)i + 0.2);
    for (int noise = 0; noise <= 1; noise++) {
        predict_ok(model, Xs, m, 2, noise, mu, var, C);
        predict_ok(model, Xs, m, 2, noise, mu2, var2, NULL);
        double vmax = 0.0;
        for (size_t i = 0; i < m; i++) {
            assert_float_equal(mu[i], mu2[i], 1e-12 * (1.0 + fabs(mu2[i])));
            assert_float_equal(var[i], var2[i], 1e-12 * var2[i]);
            if (fabs(C[i * m + i] - var[i]) > 1e-12 * var[i])
                fail_msg("include_noise %d: cov[%zu][%zu] = %.17g, variance %.17g", noise, i, i,
                         C[i * m + i], var[i]);
            vmax = fmax(vmax, var[i]);
        }
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < i; j++)
                if (fabs(C[j * m + i] - C[i * m + j]) > 1e-14 * vmax)
                    fail_msg("include_noise %d: cov not symmetric at (%zu,%zu): %.17g vs %.17g",
                             noise, i, j, C[j * m + i], C[i * m + j]);
        /* PSD: Cholesky with a tiny jitter succeeds. */
        for (size_t i = 0; i < m; i++)
            C[i * m + i] += 1e-10 * vmax;
        lapack_int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)m, C, (lapack_int)m);
        if (info != 0)
            fail_msg("include_noise %d: covariance not PSD (dpotrf info %d)", noise, (int)info);
    }
    gp_model_free(model);
}

static void test_samples(void **state)
{
    (void)state;
    gp_model *model = toy_model(100, 2, 41, GP_KERNEL_MATERN32);
    const size_t m = 6, S = 4000;
    double Xs[12];
    for (size_t i = 0; i < 12; i++)
        Xs[i] = -2.5 + 0.45 * (double)i;
    double *samples = dalloc(m * S), mu[6], var[6], C[36], vnoise[6];
    gp_error err;
    gp_sample_request sr = {.X = Xs, .m = m, .d = 2, .n_samples = S, .seed = 11,
                            .include_noise = 0};
    assert_int_equal(gp_model_sample(model, &sr, samples, &err), GP_OK);
    predict_ok(model, Xs, m, 2, 0, mu, var, C);
    double em[6];
    for (size_t i = 0; i < m; i++) {
        em[i] = 0.0;
        for (size_t s = 0; s < S; s++)
            em[i] += samples[s * m + i];
        em[i] /= (double)S;
        if (fabs(em[i] - mu[i]) > 5.0 * sqrt(var[i] / (double)S))
            fail_msg("point %zu: sample mean %.6g, predictive mean %.6g (se %.3g)", i, em[i],
                     mu[i], sqrt(var[i] / (double)S));
    }
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j <= i; j++) {
            double ec = 0.0;
            for (size_t s = 0; s < S; s++)
                ec += (samples[s * m + i] - em[i]) * (samples[s * m + j] - em[j]);
            ec /= (double)(S - 1);
            double se = sqrt((C[i * m + i] * C[j * m + j] + C[j * m + i] * C[j * m + i]) /
                             (double)S);
            if (fabs(ec - C[j * m + i]) > 5.0 * se + 1e-12)
                fail_msg("cov(%zu,%zu): empirical %.6g, predictive %.6g (se %.3g)", i, j, ec,
                         C[j * m + i], se);
        }

    /* Same seed, same samples; another seed, other samples. */
    double a[6 * 10], b[6 * 10], c[6 * 10];
    gp_sample_request s10 = {.X = Xs, .m = m, .d = 2, .n_samples = 10, .seed = 5};
    assert_int_equal(gp_model_sample(model, &s10, a, &err), GP_OK);
    assert_int_equal(gp_model_sample(model, &s10, b, &err), GP_OK);
    assert_memory_equal(a, b, sizeof a);
    s10.seed = 6;
    assert_int_equal(gp_model_sample(model, &s10, c, &err), GP_OK);
    assert_memory_not_equal(a, c, sizeof a);

    /* include_noise: the empirical variance matches the observation variance,
     * which is the latent one plus the noise. */
    sr.include_noise = 1;
    sr.seed = 12;
    assert_int_equal(gp_model_sample(model, &sr, samples, &err), GP_OK);
    predict_ok(model, Xs, m, 2, 1, mu, vnoise, NULL);
    double noise = model->noise_variance * model->y_scale * model->y_scale;
    for (size_t i = 0; i < m; i++) {
        assert_float_equal(vnoise[i], var[i] + noise, 1e-10 * vnoise[i]);
        double mean = 0.0, ev = 0.0;
        for (size_t s = 0; s < S; s++)
            mean += samples[s * m + i];
        mean /= (double)S;
        for (size_t s = 0; s < S; s++)
            ev += (samples[s * m + i] - mean) * (samples[s * m + i] - mean);
        ev /= (double)(S - 1);
        double se = vnoise[i] * sqrt(2.0 / (double)S);
        if (fabs(ev - vnoise[i]) > 5.0 * se)
            fail_msg("include_noise: point %zu: sample variance %.6g, observation variance "
                     "%.6g (latent %.6g + noise %.6g; se %.3g)",
                     i, ev, vnoise[i], var[i], noise, se);
    }
    free(samples);
    gp_model_free(model);
}

/* ---- export / import ---- */

static void test_export_import(void **state)
{
    (void)state;
    const size_t n = 90, d = 3, R = 35;
    double X[270], y[90];
    toy_data(n, d, 51, 0.1, X, y, NULL);
    const size_t dims[2] = {0, 2};
    gp_kernel *k = leaf(GP_KERNEL_MATERN52, d, 1, dims, 2);
    gp_option_value opts[2] = {{.name = "features", .number = (double)R},
                               {.name = "frequencies", .string = "qmc"}};
    gp_fit_request req;
    fit_request(&req, X, y, n, d, k, opts, 2);
    gp_model *model = fit_ok(ssgp(), &req, "export model");
    gp_state st;
    gp_state_init(&st);
    gp_error err;
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    const gp_named_array *a;
    if ((a = gp_state_find(&st, "omega")) == NULL)
        fail_msg("exported state has no array 'omega'");
    assert_int_equal(a->rows, R);
    assert_int_equal(a->cols, 2);
    if ((a = gp_state_find(&st, "alpha")) == NULL)
        fail_msg("exported state has no array 'alpha'");
    assert_int_equal(a->rows * a->cols, 2 * R);
    if ((a = gp_state_find(&st, "chol_packed")) == NULL)
        fail_msg("exported state has no array 'chol_packed'");
    assert_int_equal(a->rows * a->cols, (2 * R) * (2 * R + 1) / 2);
    if ((a = gp_state_find(&st, "sampler")) != NULL) {
        assert_int_equal(a->rows * a->cols, 1);
        assert_true(a->data[0] == (double)GP_FREQ_QMC);
    }

    gp_model *copy = NULL;
    if (gp_model_import(ssgp(), &st, &copy, &err) != GP_OK)
        fail_msg("import: %s", err.message);
    const size_t m = 29;
    double Xs[87];
    for (size_t i = 0; i < 3 * m; i++)
        Xs[i] = 2.0 * sin(0.7 * (double)i);
    double mu1[29], v1[29], mu2[29], v2[29], C1[29 * 29], C2[29 * 29];
    for (int noise = 0; noise <= 1; noise++) {
        predict_ok(model, Xs, m, d, noise, mu1, v1, C1);
        predict_ok(copy, Xs, m, d, noise, mu2, v2, C2);
        assert_memory_equal(mu1, mu2, sizeof mu1);
        assert_memory_equal(v1, v2, sizeof v1);
        assert_memory_equal(C1, C2, sizeof C1);
    }
    double s1[29 * 5], s2[29 * 5];
    for (int noise = 0; noise <= 1; noise++) {
        gp_sample_request sr = {.X = Xs, .m = m, .d = d, .n_samples = 5, .seed = 3,
                                .include_noise = noise};
        assert_int_equal(gp_model_sample(model, &sr, s1, &err), GP_OK);
        assert_int_equal(gp_model_sample(copy, &sr, s2, &err), GP_OK);
        assert_memory_equal(s1, s2, sizeof s1);
    }
    assert_true(copy->noise_variance == model->noise_variance);
    assert_true(copy->diag.objective == model->diag.objective);

    /* A state with a truncated array is refused. */
    gp_named_array *om = (gp_named_array *)gp_state_find(&st, "omega");
    om->rows -= 1;
    gp_model *bad = NULL;
    assert_true(gp_model_import(ssgp(), &st, &bad, &err) < 0);
    assert_null(bad);
    gp_state_free(&st);
    gp_model_free(model);
    gp_model_free(copy);
    gp_kernel_free(k);
}

/* ---- kernels and inputs ---- */

static void test_matern(void **state)
{
    (void)state;
    const size_t n = 200, d = 2, m = 100;
    double X[400], y[200], Xs[200], fs[100], ys[100], mu[100], var[100];
    toy_data(n, d, 61, 0.1, X, y, NULL);
    toy_data(m, d, 62, 0.1, Xs, ys, fs);
    double sd = stddev(fs, m);
    const gp_kernel_type types[] = {GP_KERNEL_MATERN12, GP_KERNEL_MATERN32, GP_KERNEL_MATERN52};
    for (size_t t = 0; t < 3; t++) {
        gp_kernel *k = leaf(types[t], d, 1, NULL, 0);
        gp_fit_request req;
        fit_request(&req, X, y, n, d, k, NULL, 0);
        gp_model *model = fit_ok(ssgp(), &req, gp_kernel_type_name(types[t]));
        predict_ok(model, Xs, m, d, 1, mu, var, NULL);
        for (size_t i = 0; i < m; i++)
            if (!(isfinite(mu[i]) && isfinite(var[i]) && var[i] > 0.0))
                fail_msg("%s: point %zu: mean %g variance %g", gp_kernel_type_name(types[t]), i,
                         mu[i], var[i]);
        double e = rmse(mu, fs, m);
        const gp_info_item *it = find_info(model, "frequencies");
        printf("%s: RMSE %.4f vs target sd %.4f (frequencies %s)\n",
               gp_kernel_type_name(types[t]), e, sd, it && it->string ? it->string : "?");
        if (!(e < 0.3 * sd))
            fail_msg("%s: test RMSE %.4f, target sd %.4f", gp_kernel_type_name(types[t]), e, sd);
        gp_model_free(model);
        gp_kernel_free(k);
    }
}

static void test_active_dims(void **state)
{
    (void)state;
    const size_t n = 150, d = 3, m = 20, R = 30;
    double X[450], y[150];
    gp_rng rng;
    gp_rng_seed(&rng, 71);
    for (size_t i = 0; i < n * d; i++)
        X[i] = -2.0 + 4.0 * gp_rng_uniform(&rng);
    for (size_t i = 0; i < n; i++)
        y[i] = sin(1.2 * X[i]) + cos(0.8 * X[2 * n + i]) + 0.05 * gp_rng_normal(&rng);
    const size_t dims[2] = {0, 2};
    gp_kernel *k = leaf(GP_KERNEL_RBF, d, 1, dims, 2);
    gp_option_value opts[1] = {{.name = "features", .number = (double)R}};
    gp_fit_request req;
    fit_request(&req, X, y, n, d, k, opts, 1);
    gp_model *model = fit_ok(ssgp(), &req, "active_dims {0, 2}");
    gp_state st;
    gp_state_init(&st);
    gp_error err;
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    const gp_named_array *om = gp_state_find(&st, "omega");
    assert_non_null(om);
    assert_int_equal(om->rows, R);
    assert_int_equal(om->cols, 2);
    gp_state_free(&st);

    double Xs[60], Xs2[60], mu1[20], v1[20], mu2[20], v2[20], C1[400], C2[400];
    for (size_t i = 0; i < 3 * m; i++)
        Xs[i] = Xs2[i] = 1.8 * sin(0.77 * (double)i + 0.1);
    for (size_t i = 0; i < m; i++)
        Xs2[m + i] = 100.0 + 17.0 * (double)i; /* column 1, far outside the data */
    predict_ok(model, Xs, m, d, 1, mu1, v1, C1);
    predict_ok(model, Xs2, m, d, 1, mu2, v2, C2);
    assert_memory_equal(mu1, mu2, sizeof mu1);
    assert_memory_equal(v1, v2, sizeof v1);
    assert_memory_equal(C1, C2, sizeof C1);
    double s1[40], s2[40];
    gp_sample_request sr = {.X = Xs, .m = m, .d = d, .n_samples = 2, .seed = 9};
    assert_int_equal(gp_model_sample(model, &sr, s1, &err), GP_OK);
    sr.X = Xs2;
    assert_int_equal(gp_model_sample(model, &sr, s2, &err), GP_OK);
    assert_memory_equal(s1, s2, sizeof s1);
    /* and the fit is good on the columns it sees */
    double f[20];
    for (size_t i = 0; i < m; i++)
        f[i] = sin(1.2 * Xs[i]) + cos(0.8 * Xs[2 * m + i]);
    double e = rmse(mu1, f, m);
    printf("active_dims {0, 2}: RMSE %.4f\n", e);
    assert_true(e < 0.15);
    gp_model_free(model);
    gp_kernel_free(k);
}

static void test_shared_lengthscale(void **state)
{
    (void)state;
    const size_t n = 150, d = 2, m = 60;
    double X[300], y[150], Xs[120], fs[60], ys[60], mu[60], var[60];
    toy_data(n, d, 81, 0.1, X, y, NULL);
    toy_data(m, d, 82, 0.1, Xs, ys, fs);
    gp_kernel *k = leaf(GP_KERNEL_RBF, d, 0, NULL, 0);
    gp_option_value opts[2] = {{.name = "features", .number = 50},
                               {.name = "frequencies", .string = "orf"}};
    gp_fit_request req;
    fit_request(&req, X, y, n, d, k, opts, 2);
    gp_model *model = fit_ok(ssgp(), &req, "shared lengthscale");
    assert_int_equal(model->kernel->ard, 0);
    assert_int_equal(model->kernel->n_lengthscale, 1);
    predict_ok(model, Xs, m, d, 0, mu, var, NULL);
    for (size_t i = 0; i < m; i++)
        assert_true(isfinite(mu[i]) && isfinite(var[i]) && var[i] >= 0.0);
    double e = rmse(mu, fs, m);
    printf("shared lengthscale %.4g: RMSE %.4f (target sd %.4f)\n",
           exp(model->kernel->log_lengthscale[0]), e, stddev(fs, m));
    assert_true(e < 0.3 * stddev(fs, m));
    gp_model_free(model);
    gp_kernel_free(k);
}

/* N = 20000 with R = 50: an N x N matrix would be 3.2 GB; the fit must not need one. */
static void test_large_n(void **state)
{
    (void)state;
    const size_t n = 20000, d = 2, m = 200;
    double *X = dalloc(n * d), *y = dalloc(n);
    toy_data(n, d, 91, 0.2, X, y, NULL);
    gp_kernel *k = leaf(GP_KERNEL_RBF, d, 1, NULL, 0);
    gp_option_value opts[3] = {{.name = "features", .number = 50},
                               {.name = "frequencies", .string = "mc"},
                               {.name = "max_iterations", .number = 40}};
    gp_fit_request req;
    fit_request(&req, X, y, n, d, k, opts, 3);
    gp_model *model = fit_ok(ssgp(), &req, "N = 20000");
    double Xs[400], ys[200], fs[200], mu[200], var[200];
    toy_data(m, d, 92, 0.2, Xs, ys, fs);
    predict_ok(model, Xs, m, d, 1, mu, var, NULL);
    double e = rmse(mu, fs, m);
    printf("N=20000, R=50: RMSE %.4f, noise %.4g (true 0.04), %d iterations\n", e,
           model->noise_variance * model->y_scale * model->y_scale, model->diag.iterations);
    assert_true(e < 0.1);
    gp_model_free(model);
    gp_kernel_free(k);
    free(X);
    free(y);
}

static void test_bad_input(void **state)
{
    (void)state;
    double X[40], y[40];
    sine_data(40, 101, X, y);
    gp_kernel *k = leaf(GP_KERNEL_RBF, 1, 1, NULL, 0);
    gp_fit_request req;
    fit_request(&req, X, y, 40, 1, k, NULL, 0);
    gp_model *model = NULL;
    gp_error err;
    X[17] = NAN;
    assert_int_equal(gp_model_fit(ssgp(), &req, &model, &err), GP_EDATA);
    assert_string_equal(err.field, "X[17][0]");
    assert_null(model);
    X[17] = 0.5;

    gp_option_value zero = {.name = "features", .number = 0};
    assert_int_equal(gp_options_validate(ssgp(), &zero, 1, &err), GP_EINVAL);
    assert_string_equal(err.field, "options.features");
    req.options = &zero;
    req.n_options = 1;
    assert_int_equal(gp_model_fit(ssgp(), &req, &model, &err), GP_EINVAL);
    assert_null(model);
    gp_option_value frac = {.name = "features", .number = 2.5};
    assert_int_equal(gp_options_validate(ssgp(), &frac, 1, &err), GP_EINVAL);

    /* The memory guard, before any allocation: 20000 features need two
     * 40000 x 40000 matrices (25 GB), above the default budget (an exact fit
     * of 20000 points, 3.2 GB); a tiny max_train_points refuses R = 100. */
    gp_option_value huge = {.name = "features", .number = 20000};
    assert_int_equal(gp_options_validate(ssgp(), &huge, 1, &err), GP_OK);
    req.options = &huge;
    req.n_options = 1;
    assert_int_equal(gp_model_fit(ssgp(), &req, &model, &err), GP_ETOOBIG);
    assert_string_equal(err.field, "options.features");
    assert_null(model);
    req.n_options = 0;
    req.max_train_points = 10;
    assert_int_equal(gp_model_fit(ssgp(), &req, &model, &err), GP_ETOOBIG);
    assert_null(model);
    req.max_train_points = 0;

    /* NaN in a predict request names the point. */
    req.n_options = 0;
    model = fit_ok(ssgp(), &req, "clean data");
    double xs[3] = {0.1, NAN, 0.3}, mu[3], var[3];
    gp_predict_request pr = {.X = xs, .m = 3, .d = 1};
    gp_prediction out = {.mean = mu, .variance = var};
    assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_EDATA);
    assert_string_equal(err.field, "X[1][0]");
    gp_model_free(model);
    gp_kernel_free(k);
}

/* ---- a real dataset ---- */

static void test_concrete_vs_exact(void **state)
{
    (void)state;
    char why[256];
    if (!gp_datasets_present(why, sizeof why) || !gp_dataset_exists("concrete")) {
        printf("skipped: shared datasets absent (%s)\n", why);
        skip();
    }
    gp_dataset train, test;
    gp_error err;
    assert_int_equal(
        gp_dataset_load_split("concrete", "test20", 0, 0, 0, &train, &test, NULL, &err), GP_OK);
    double *mu = dalloc(test.n), *var = dalloc(test.n), r[2];
    for (int which = 0; which < 2; which++) {
        gp_kernel *k = leaf(GP_KERNEL_RBF, train.d, 1, NULL, 0);
        gp_option_value opts[1] = {{.name = "features", .number = 100}};
        gp_fit_request req;
        fit_request(&req, train.X, train.y, train.n, train.d, k, which ? opts : NULL,
                    which ? 1 : 0);
        gp_model *model = fit_ok(which ? ssgp() : &gp_method_exact, &req,
                                 which ? "concrete ssgp" : "concrete exact");
        predict_ok(model, test.X, test.n, test.d, 1, mu, var, NULL);
        r[which] = rmse(mu, test.y, test.n);
        const gp_info_item *it = find_info(model, "frequencies");
        printf("concrete (N=%zu): %s test RMSE %.4f%s%s\n", train.n, which ? "ssgp R=100" : "exact",
               r[which], which ? ", frequencies " : "", which && it && it->string ? it->string : "");
        gp_model_free(model);
        gp_kernel_free(k);
    }
    if (!(r[1] <= 1.5 * r[0]))
        fail_msg("concrete: ssgp RMSE %.4f > 1.5 x exact's %.4f", r[1], r[0]);
    free(mu);
    free(var);
    gp_dataset_free(&train);
    gp_dataset_free(&test);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_covariance),
        cmocka_unit_test(test_samples),
        cmocka_unit_test(test_export_import),
        cmocka_unit_test(test_matern),
        cmocka_unit_test(test_active_dims),
        cmocka_unit_test(test_shared_lengthscale),
        cmocka_unit_test(test_large_n),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_concrete_vs_exact),
    };
    return cmocka_run_group_tests_name("ssgp", tests, NULL, NULL);
}
