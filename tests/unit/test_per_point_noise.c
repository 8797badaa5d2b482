/* Known per-point noise (gp_fit_request.noise_per_point): exact against
 * scikit-learn's GaussianProcessRegressor with an alpha array
 * (tests/fixtures/make_ppnoise_fixtures.py), predict's include_noise with and
 * without the new points' noise, export/import and observe; sgpr's bound
 * with M = N inducing points at the inputs against the exact LML, and its
 * gradient against finite differences; bad input refused naming the field. */
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
#include "core/inducing/collapsed.h"
#include "core/kernel/lml.h"
#include "core/methods/registry.h"
#include "core/model/model.h"
#include "tests/unit/testutil.h"

typedef struct ref_case {
    gp_fixture fx;
    size_t n, m, d;
    const double *X, *y, *Xs, *theta, *noise, *r, *lml, *mean, *sd;
    gp_kernel *k; /* every parameter fixed at theta */
} ref_case;

static void load_case(ref_case *c, const char *name)
{
    char path[256];
    gp_error err;
    snprintf(path, sizeof path, "tests/fixtures/exact_ppnoise_%s.txt", name);
    if (gp_fixture_load(path, &c->fx, &err) != GP_OK)
        fail_msg("cannot load %s: %s", path, err.message);
    const gp_fixture_block *bx = gp_fixture_find(&c->fx, "X"), *bs = gp_fixture_find(&c->fx, "Xs");
    assert_non_null(bx);
    assert_non_null(bs);
    c->n = bx->rows, c->d = bx->cols, c->m = bs->rows;
    size_t n = c->n, m = c->m, d = c->d;
    assert_int_equal(gp_fixture_get(&c->fx, "X", n, d, &c->X, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&c->fx, "y", n, 1, &c->y, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&c->fx, "Xs", m, d, &c->Xs, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&c->fx, "theta", d + 1, 1, &c->theta, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&c->fx, "noise", 1, 1, &c->noise, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&c->fx, "r", n, 1, &c->r, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&c->fx, "lml", 1, 1, &c->lml, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&c->fx, "mean", m, 1, &c->mean, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&c->fx, "std", m, 1, &c->sd, &err), GP_OK);
    assert_int_equal(gp_kernel_leaf(&c->k, GP_KERNEL_RBF, d, 1, NULL, 0, &err), GP_OK);
    gp_kernel_set_params(c->k, c->theta);
    c->k->fixed = GP_FIX_ALL;
}

static void free_case(ref_case *c)
{
    gp_kernel_free(c->k);
    gp_fixture_free(&c->fx);
}

/* A fit of rows [0, n) of the case with their known noise, kernel and the
 * homoscedastic noise fixed, raw units. */
static gp_fit_request case_request(const ref_case *c, const double *X, const double *y,
                                   const double *r, size_t n)
{
    gp_fit_request req;
    memset(&req, 0, sizeof req);
    req.X = X;
    req.y = y;
    req.n = n;
    req.d = c->d;
    req.kernel = c->k;
    req.seed = 1;
    req.noise_given = 1;
    req.noise_fixed = 1;
    req.noise_variance = c->noise[0];
    req.noise_per_point = r;
    return req;
}

static gp_model *fit_case(const ref_case *c, const char *method)
{
    gp_fit_request req = case_request(c, c->X, c->y, c->r, c->n);
    gp_model *model = NULL;
    gp_error err;
    if (gp_model_fit(gp_method_find(method), &req, &model, &err) != GP_OK)
        fail_msg("%s fit: %s (%s)", method, err.message, err.field);
    return model;
}

static void assert_rel(double got, double want, double tol, const char *what, size_t i)
{
    if (!(fabs(got - want) <= tol * fmax(fabs(want), 1e-300)))
        fail_msg("%s[%zu]: got %.17g, want %.17g (rel. error %.3g)", what, i, got, want,
                 fabs(got - want) / fabs(want));
}

static void predict(const gp_model *model, const double *Xs, size_t m, size_t d, int noise,
                    const double *pn, double *mu, double *var)
{
    gp_predict_request pr = {.X = Xs, .m = m, .d = d, .include_noise = noise, .noise = pn};
    gp_prediction out = {.mean = mu, .variance = var};
    gp_error err;
    if (gp_model_predict(model, &pr, &out, &err) != GP_OK)
        fail_msg("predict: %s", err.message);
}

static void check_sklearn(const char *name)
{
    ref_case c;
    load_case(&c, name);
    gp_model *model = fit_case(&c, "exact");
    assert_true(model->per_point_noise);
    assert_rel(model->diag.objective, c.lml[0], 1e-8, "lml", 0);
    size_t m = c.m;
    double mu[64], var[64], pn[64];
    assert_true(m <= 64);
    predict(model, c.Xs, m, c.d, 0, NULL, mu, var);
    for (size_t i = 0; i < m; i++) {
        assert_rel(mu[i], c.mean[i], 1e-8, "mean", i);
        assert_rel(sqrt(var[i]), c.sd[i], 1e-8, "std", i);
    }
    /* include_noise without the points' noise: the latent variance */
    double var2[64];
    predict(model, c.Xs, m, c.d, 1, NULL, mu, var2);
    assert_memory_equal(var, var2, m * sizeof *var);
    /* with it: the homoscedastic part plus each point's own */
    for (size_t i = 0; i < m; i++)
        pn[i] = 0.01 * (double)i;
    predict(model, c.Xs, m, c.d, 1, pn, mu, var2);
    for (size_t i = 0; i < m; i++)
        assert_rel(var2[i], var[i] + c.noise[0] + pn[i], 1e-12, "observation variance", i);
    gp_model_free(model);
    free_case(&c);
}

static void test_exact_sklearn_zero(void **state)
{
    (void)state;
    check_sklearn("zero");
}

static void test_exact_sklearn_small(void **state)
{
    (void)state;
    check_sklearn("small");
}

/* Export/import keeps the noise; a model without per-point noise writes no
 * new arrays (the bitcheck harness checks their bytes). */
static void test_exact_export_import(void **state)
{
    (void)state;
    ref_case c;
    load_case(&c, "small");
    gp_model *model = fit_case(&c, "exact"), *back = NULL;
    gp_state st;
    gp_error err;
    gp_state_init(&st);
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    assert_non_null(gp_state_find(&st, "per_point_noise"));
    assert_non_null(gp_state_find(&st, "noise_train"));
    assert_int_equal(gp_model_import(gp_method_find("exact"), &st, &back, &err), GP_OK);
    assert_true(back->per_point_noise);
    double mu[64], var[64], mu2[64], var2[64];
    predict(model, c.Xs, c.m, c.d, 0, NULL, mu, var);
    predict(back, c.Xs, c.m, c.d, 0, NULL, mu2, var2);
    assert_memory_equal(mu, mu2, c.m * sizeof *mu);
    assert_memory_equal(var, var2, c.m * sizeof *var);
    gp_state_free(&st);
    gp_model_free(back);
    gp_model_free(model);
    free_case(&c);
}

/* Observing the last rows with their noise gives the model of a fit of all. */
static void test_exact_observe(void **state)
{
    (void)state;
    ref_case c;
    load_case(&c, "small");
    size_t n = c.n, n0 = 30, k = n - n0, d = c.d;
    double *X0 = malloc(n0 * d * sizeof *X0), *X1 = malloc(k * d * sizeof *X1);
    for (size_t j = 0; j < d; j++) {
        memcpy(X0 + j * n0, c.X + j * n, n0 * sizeof *X0);
        memcpy(X1 + j * k, c.X + j * n + n0, k * sizeof *X1);
    }
    gp_fit_request req = case_request(&c, X0, c.y, c.r, n0);
    gp_model *model = NULL;
    gp_error err;
    assert_int_equal(gp_model_fit(gp_method_find("exact"), &req, &model, &err), GP_OK);
    /* without the rows' noise: refused, nothing changed */
    assert_int_equal(gp_model_observe(model, X1, c.y + n0, k, &err), GP_EINVAL);
    assert_string_equal(err.field, "noise");
    assert_int_equal(model->n_train, n0);
    double bad[16];
    memcpy(bad, c.r + n0, k * sizeof *bad);
    bad[2] = -1.0;
    assert_int_equal(gp_model_observe_noise(model, X1, c.y + n0, bad, k, &err), GP_EDATA);
    assert_string_equal(err.field, "noise[2]");
    assert_int_equal(gp_model_observe_noise(model, X1, c.y + n0, c.r + n0, k, &err), GP_OK);
    assert_int_equal(model->n_train, n);
    assert_rel(model->diag.objective, c.lml[0], 1e-8, "lml after observe", 0);
    double mu[64], var[64];
    predict(model, c.Xs, c.m, d, 0, NULL, mu, var);
    for (size_t i = 0; i < c.m; i++) {
        assert_rel(mu[i], c.mean[i], 1e-8, "mean after observe", i);
        assert_rel(sqrt(var[i]), c.sd[i], 1e-8, "std after observe", i);
    }
    gp_model_free(model);
    free(X0);
    free(X1);
    free_case(&c);
}

/* sgpr with M = N inducing points at the training inputs is the exact GP:
 * its bound is the exact LML (to the inducing jitter) and so are its
 * predictions, per-point noise included. */
static void test_sgpr_equals_exact(void **state)
{
    (void)state;
    ref_case c;
    load_case(&c, "small");
    size_t n = c.n, d = c.d;
    double *P = malloc(n * d * sizeof *P);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            P[i * d + j] = c.X[j * n + i];
    gp_sgpr_terms t;
    gp_error err;
    double lml;
    assert_int_equal(gp_sgpr_bound_noise(c.k, c.noise[0], c.r, P, n, d, c.y, P, n, &t, NULL, NULL,
                                         NULL, &err),
                     GP_OK);
    assert_int_equal(gp_exact_lml_grad_noise(c.k, c.noise[0], c.r, P, d, n, c.y, &lml, NULL, &err),
                     GP_OK);
    assert_rel(lml, c.lml[0], 1e-8, "exact lml", 0);
    /* Kuu's jitter (GP_INDUCING_JITTER x its mean diagonal) leaves a trace
     * term of ~ n jitter / (2 lambda) ~ 1e-3 here: the bound is below, close */
    assert_true(t.bound <= lml);
    assert_rel(t.bound, lml, 2e-4, "sgpr bound at M = N", 0);
    /* the same noise on every row is the homoscedastic bound at s2 + c, to rounding */
    double rc_[64], c0 = 0.037;
    gp_sgpr_terms th;
    for (size_t i = 0; i < n; i++)
        rc_[i] = c0;
    assert_int_equal(gp_sgpr_bound_noise(c.k, c.noise[0], rc_, P, n, d, c.y, P, 9, &t, NULL, NULL,
                                         NULL, &err),
                     GP_OK);
    assert_int_equal(gp_sgpr_bound(c.k, c.noise[0] + c0, P, n, d, c.y, P, 9, &th, NULL, NULL,
                                   NULL, &err),
                     GP_OK);
    assert_rel(t.bound, th.bound, 1e-11, "constant per-point noise vs s2 + c", 0);
    assert_rel(t.trace, th.trace, 1e-11, "trace term", 0);
    /* the fitted model: all N points as inducing inputs, kernel and noise fixed */
    gp_option_value opts[] = {{"inducing", (double)n, NULL, NULL},
                              {"optimize_inducing", 0, NULL, NULL},
                              {"reselect", 0, NULL, NULL}};
    gp_fit_request req = case_request(&c, c.X, c.y, c.r, n);
    req.options = opts;
    req.n_options = 3;
    gp_model *model = NULL;
    assert_int_equal(gp_model_fit(gp_method_find("sgpr"), &req, &model, &err), GP_OK);
    double mu[64], var[64];
    predict(model, c.Xs, c.m, d, 0, NULL, mu, var);
    for (size_t i = 0; i < c.m; i++) {
        tu_assert_close(mu[i], c.mean[i], 1e-4, 1e-4, "sgpr mean[%zu] (Kuu jitter)", i);
        tu_assert_close(sqrt(var[i]), c.sd[i], 1e-4, 1e-4, "sgpr std[%zu] (Kuu jitter)", i);
    }
    gp_model_free(model);
    free(P);
    free_case(&c);
}

/* sgpr's bound with per-point noise: gradient by central differences in
 * every kernel parameter and log s2. */
typedef struct sgpr_fd {
    gp_kernel *k;
    const double *X, *y, *Z, *r;
    size_t n, m, d, np;
} sgpr_fd;

static double sgpr_value(void *ctx, const double *x)
{
    sgpr_fd *c = ctx;
    gp_kernel_set_params(c->k, x);
    gp_sgpr_terms t;
    gp_error err;
    assert_int_equal(gp_sgpr_bound_noise(c->k, exp(x[c->np]), c->r, c->X, c->n, c->d, c->y,
                                         c->Z, c->m, &t, NULL, NULL, NULL, &err),
                     GP_OK);
    return t.bound;
}

static void test_sgpr_gradient(void **state)
{
    (void)state;
    size_t n = 30, m = 7, d = 2;
    double X[60], y[30], Z[14], r[30], x[4], grad[4], gz[14];
    tu_random_problem(n, d, 7, X, y);
    for (size_t i = 0; i < n; i++)
        r[i] = 0.001 + 0.05 * (double)(i % 5);
    for (size_t i = 0; i < m * d; i++)
        Z[i] = X[3 * i % (n * d)] + 0.1;
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, d, 1, NULL, 0, &err), GP_OK);
    sgpr_fd c = {k, X, y, Z, r, n, m, d, gp_kernel_n_params(k)};
    x[0] = log(1.3), x[1] = log(0.8), x[2] = log(1.4), x[3] = log(0.02);
    gp_kernel_set_params(k, x);
    gp_sgpr_terms t;
    assert_int_equal(gp_sgpr_bound_noise(k, exp(x[3]), r, X, n, d, y, Z, m, &t, grad, gz, NULL,
                                         &err),
                     GP_OK);
    tu_fd_spec spec = {1e-5, 1e-5, 1e-7, 1.0, 0};
    tu_check_gradient(sgpr_value, &c, x, 4, grad, spec, NULL, "sgpr bound with per-point noise");
    gp_kernel_free(k);
}

/* Bad input: refused naming the field, no model. */
static void test_bad_input(void **state)
{
    (void)state;
    ref_case c;
    load_case(&c, "small");
    double r[64];
    memcpy(r, c.r, c.n * sizeof *r);
    gp_model *model = NULL;
    gp_error err;
    const double bads[] = {-1e-3, NAN, INFINITY};
    for (size_t b = 0; b < 3; b++) {
        r[5] = bads[b];
        gp_fit_request req = case_request(&c, c.X, c.y, r, c.n);
        assert_int_equal(gp_model_fit(gp_method_find("exact"), &req, &model, &err), GP_EDATA);
        assert_string_equal(err.field, "noise.per_point[5]");
        assert_null(model);
    }
    /* a method that does not take it */
    gp_fit_request req = case_request(&c, c.X, c.y, c.r, c.n);
    assert_int_equal(gp_model_fit(gp_method_find("msrfr"), &req, &model, &err), GP_EUNSUPPORTED);
    assert_string_equal(err.field, "noise.per_point");
    assert_null(model);
    /* a homoscedastic noise of 0 is for fixed noise with per-point noise only */
    req.noise_variance = 0.0;
    req.noise_fixed = 0;
    assert_int_equal(gp_model_fit(gp_method_find("exact"), &req, &model, &err), GP_EINVAL);
    req.noise_fixed = 1;
    req.noise_per_point = NULL;
    assert_int_equal(gp_model_fit(gp_method_find("exact"), &req, &model, &err), GP_EINVAL);
    assert_null(model);
    /* predict: the points' noise finite and >= 0 */
    model = fit_case(&c, "exact");
    double pn[64] = {0}, mu[64], var[64];
    pn[1] = -2.0;
    gp_predict_request pr = {.X = c.Xs, .m = c.m, .d = c.d, .include_noise = 1, .noise = pn};
    gp_prediction out = {.mean = mu, .variance = var};
    assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_EDATA);
    assert_string_equal(err.field, "noise[1]");
    /* sampling y needs noise the points do not have here */
    gp_sample_request sr = {.X = c.Xs, .m = c.m, .d = c.d, .n_samples = 2, .seed = 1,
                            .include_noise = 1};
    double s[128];
    assert_int_equal(gp_model_sample(model, &sr, s, &err), GP_EUNSUPPORTED);
    gp_model_free(model);
    free_case(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_sklearn_zero),  cmocka_unit_test(test_exact_sklearn_small),
        cmocka_unit_test(test_exact_export_import), cmocka_unit_test(test_exact_observe),
        cmocka_unit_test(test_sgpr_equals_exact),   cmocka_unit_test(test_sgpr_gradient),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
