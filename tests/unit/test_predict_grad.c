/* gp_model_predict_grad: the latent posterior at one point and its gradient
 * in x, for exact, sgpr and renyi models of several kernels (ARD, a sum and
 * a product tree, a linear leaf), with and without standardisation and a
 * mean function. Values against gp_model_predict's latent mean and variance
 * (1e-10 relative); gradients against central differences of the values;
 * the refusals (a method without the op, several outputs, a non-Gaussian
 * likelihood, a point that is not finite or beyond the working limit). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/base/parallel.h"
#include "core/base/rng.h"
#include "core/kernel/kernel.h"
#include "core/methods/registry.h"
#include "core/model/model.h"
#include "tests/unit/testutil.h"
#include "tests/unit/method_testutil.h"

#define N 40
#define D 3
#define M_TEST 12

typedef enum { K_RBF_ARD, K_MATERN52_ARD, K_SUM_PRODUCT, K_RQ, K_LINEAR_SUM } kernel_case;

typedef struct grad_case {
    const char *method;
    kernel_case kernel;
    int standardize;
    gp_mean_type mean;
    double x_scale, y_scale; /* the data's own units: columns times x_scale^j, y times y_scale */
} grad_case;

static const grad_case cases[] = {
    {"exact", K_RBF_ARD, 1, GP_MEAN_ZERO, 10.0, 100.0},
    {"exact", K_MATERN52_ARD, 0, GP_MEAN_LINEAR, 1.0, 1.0},
    {"exact", K_SUM_PRODUCT, 1, GP_MEAN_CONSTANT, 3.0, 0.01},
    {"exact", K_LINEAR_SUM, 1, GP_MEAN_LINEAR, 2.0, 5.0},
    {"exact", K_RQ, 0, GP_MEAN_ZERO, 1.0, 1.0},
    {"sgpr", K_RBF_ARD, 1, GP_MEAN_LINEAR, 10.0, 100.0},
    {"sgpr", K_MATERN52_ARD, 0, GP_MEAN_ZERO, 1.0, 1.0},
    {"sgpr", K_RQ, 1, GP_MEAN_CONSTANT, 0.5, 20.0},
    {"renyi", K_RBF_ARD, 1, GP_MEAN_ZERO, 4.0, 3.0},
};
#define N_CASES (sizeof cases / sizeof cases[0])

static gp_kernel *leaf_k(gp_kernel_type t, int ard, const size_t *dims, size_t nd)
{
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, t, D, ard, dims, nd, &err), GP_OK);
    return k;
}

static gp_kernel *composite(gp_kernel_type t, gp_kernel *a, gp_kernel *b)
{
    gp_kernel *terms[2] = {a, b}, *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_composite(&k, t, terms, 2, &err), GP_OK);
    return k;
}

static gp_kernel *make_kernel(kernel_case c)
{
    static const size_t d0[] = {0}, d12[] = {1, 2};
    switch (c) {
    case K_RBF_ARD: return leaf_k(GP_KERNEL_RBF, 1, NULL, 0);
    case K_MATERN52_ARD: return leaf_k(GP_KERNEL_MATERN52, 1, NULL, 0);
    case K_RQ: return leaf_k(GP_KERNEL_RQ, 0, NULL, 0);
    case K_SUM_PRODUCT: /* rbf(x0) * periodic(x1, x2)... + matern32 ARD */
        return composite(GP_KERNEL_SUM,
                         composite(GP_KERNEL_PRODUCT, leaf_k(GP_KERNEL_RBF, 0, d0, 1),
                                   leaf_k(GP_KERNEL_RBF, 1, d12, 2)),
                         leaf_k(GP_KERNEL_MATERN32, 1, NULL, 0));
    case K_LINEAR_SUM: /* linear + rbf: k(x, x) moves with x */
        return composite(GP_KERNEL_SUM, leaf_k(GP_KERNEL_LINEAR, 0, NULL, 0),
                         leaf_k(GP_KERNEL_RBF, 1, NULL, 0));
    }
    return NULL;
}

/* Data in the case's units: column j of X times x_scale^j plus j, y times
 * y_scale plus 7 y_scale. */
static void make_data(const grad_case *c, double *X, double *y)
{
    tu_random_problem_colmajor(N, D, 21, X, y);
    for (size_t j = 0; j < D; j++)
        for (size_t i = 0; i < N; i++)
            X[j * N + i] = X[j * N + i] * pow(c->x_scale, (double)j) + (double)j;
    for (size_t i = 0; i < N; i++)
        y[i] = c->y_scale * (y[i] + 7.0);
}

static gp_model *fit_case(const grad_case *c, double *X, double *y)
{
    make_data(c, X, y);
    gp_kernel *k = make_kernel(c->kernel);
    gp_option_value opts[2] = {{.name = "max_iterations", .number = 30},
                               {.name = "inducing", .number = M_TEST}};
    gp_fit_request req;
    fit_request(&req, X, y, N, D, k, opts, strcmp(c->method, "exact") ? 2 : 1);
    req.standardize = c->standardize;
    req.mean = c->mean;
    gp_model *model = fit_ok(gp_method_find(c->method), &req, c->method);
    gp_kernel_free(k);
    return model;
}

/* A test point near the data: training row i moved by a fixed fraction of
 * each column's spread. */
static void test_point(const grad_case *c, const double *X, size_t i, double *x)
{
    for (size_t j = 0; j < D; j++)
        x[j] = X[j * N + i] + (0.3 - 0.17 * (double)j) * pow(c->x_scale, (double)j);
}

static void grad_ok(const gp_model *model, const double *x, double *mean, double *var,
                    double *dmean, double *dvar)
{
    gp_error err;
    int rc = gp_model_predict_grad(model, x, mean, var, dmean, dvar, &err);
    if (rc)
        fail_msg("predict_grad: %s (%s, field %s)", err.message, gp_status_name(rc), err.field);
}

static void test_values_match_predict(void **state)
{
    (void)state;
    double X[N * D], y[N];
    for (size_t t = 0; t < N_CASES; t++) {
        const grad_case *c = &cases[t];
        gp_model *model = fit_case(c, X, y);
        double ys2 = c->y_scale * c->y_scale;
        for (size_t i = 0; i < 5; i++) {
            double x[D], Xs[D], mean, var, pm, pv;
            test_point(c, X, 7 * i, x);
            for (size_t j = 0; j < D; j++)
                Xs[j] = x[j]; /* one point: column-major 1 x D is the same */
            grad_ok(model, x, &mean, &var, NULL, NULL);
            predict_ok(model, Xs, 1, D, 0, &pm, &pv, NULL);
            tu_assert_close(mean, pm, 1e-10, 1e-12 * c->y_scale, "case %zu (%s) mean", t,
                            c->method);
            tu_assert_close(var, pv, 1e-10, 1e-14 * ys2, "case %zu (%s) var", t, c->method);
            assert_true(var > 0.0);
        }
        gp_model_free(model);
    }
}

typedef struct value_fn {
    const gp_model *model;
    int want_var;
} value_fn;

static double value_at(void *ctx, const double *x)
{
    const value_fn *f = ctx;
    double mean, var;
    grad_ok(f->model, x, &mean, &var, NULL, NULL);
    return f->want_var ? var : mean;
}

static void test_gradients_fd(void **state)
{
    (void)state;
    double X[N * D], y[N];
    for (size_t t = 0; t < N_CASES; t++) {
        const grad_case *c = &cases[t];
        gp_model *model = fit_case(c, X, y);
        char what[96];
        for (size_t i = 0; i < 4; i++) {
            double x[D], mean, var, dmean[D], dvar[D], only_mean[D];
            test_point(c, X, 9 * i + 2, x);
            grad_ok(model, x, &mean, &var, dmean, dvar);
            grad_ok(model, x, &mean, &var, only_mean, NULL); /* the same with dvar NULL */
            assert_memory_equal(only_mean, dmean, sizeof dmean);
            /* step 1e-6 of each column's unit (relative to its scale), tolerance
             * 1e-5 relative: central differences' error is ~1e-10 here */
            double step = 1e-6;
            for (size_t j = 0; j < D; j++) {
                double h = step * pow(c->x_scale, (double)j), xj = x[j];
                value_fn fm = {model, 0}, fv = {model, 1};
                x[j] = xj + h;
                double mp = value_at(&fm, x), vp = value_at(&fv, x);
                x[j] = xj - h;
                double mm = value_at(&fm, x), vm = value_at(&fv, x);
                x[j] = xj;
                double sm = c->y_scale / pow(c->x_scale, (double)j);
                snprintf(what, sizeof what, "case %zu (%s) dmean[%zu]", t, c->method, j);
                tu_assert_within(dmean[j], (mp - mm) / (2.0 * h),
                                 1e-5 * fabs(dmean[j]) + 1e-7 * sm, "%s", what);
                snprintf(what, sizeof what, "case %zu (%s) dvar[%zu]", t, c->method, j);
                tu_assert_within(dvar[j], (vp - vm) / (2.0 * h),
                                 1e-5 * fabs(dvar[j]) + 1e-7 * sm * c->y_scale, "%s", what);
            }
        }
        gp_model_free(model);
    }
}

/* The gradient must be able to be nonzero where the test looks: a flat
 * answer would pass any FD check. */
static void test_gradients_not_trivial(void **state)
{
    (void)state;
    double X[N * D], y[N];
    const grad_case *c = &cases[0];
    gp_model *model = fit_case(c, X, y);
    double x[D], mean, var, dmean[D], dvar[D];
    test_point(c, X, 3, x);
    grad_ok(model, x, &mean, &var, dmean, dvar);
    double nm = 0.0, nv = 0.0;
    for (size_t j = 0; j < D; j++) {
        nm += fabs(dmean[j]) * pow(c->x_scale, (double)j);
        nv += fabs(dvar[j]) * pow(c->x_scale, (double)j);
    }
    assert_true(nm > 1e-3 * c->y_scale);
    assert_true(nv > 1e-6 * c->y_scale * c->y_scale);
    gp_model_free(model);
}

/* The same bits for 1 and 4 compute threads. */
static void test_threads_same_bits(void **state)
{
    (void)state;
    double X[N * D], y[N];
    int saved = gp_parallel_threads();
    for (size_t t = 0; t < N_CASES; t++) {
        const grad_case *c = &cases[t];
        gp_model *model = fit_case(c, X, y);
        double x[D], a[2 + 2 * D], b[2 + 2 * D];
        test_point(c, X, 5, x);
        gp_parallel_set_threads(1);
        grad_ok(model, x, &a[0], &a[1], a + 2, a + 2 + D);
        gp_parallel_set_threads(4);
        grad_ok(model, x, &b[0], &b[1], b + 2, b + 2 + D);
        assert_memory_equal(a, b, sizeof a);
        gp_model_free(model);
    }
    gp_parallel_set_threads(saved);
}

static void expect(const gp_model *model, const double *x, int code, const char *field)
{
    double mean, var, dm[D], dv[D];
    gp_error err;
    gp_error_clear(&err);
    int rc = gp_model_predict_grad(model, x, &mean, &var, dm, dv, &err);
    assert_int_equal(rc, code);
    if (field)
        assert_string_equal(err.field, field);
}

static void test_refused(void **state)
{
    (void)state;
    double X[N * D], y[N];
    const grad_case *c = &cases[0];
    gp_model *model = fit_case(c, X, y);
    double x[D];
    test_point(c, X, 0, x);
    x[1] = NAN;
    expect(model, x, GP_EDATA, "x[1]");
    test_point(c, X, 0, x);
    x[2] = INFINITY;
    expect(model, x, GP_EDATA, "x[2]");
    test_point(c, X, 0, x);
    x[0] = 1e303; /* finite, beyond GP_WORKING_LIMIT once standardised */
    expect(model, x, GP_EDATA, "x[0]");
    test_point(c, X, 0, x);
    model->likelihood = GP_LIK_BERNOULLI; /* the check, on a model that cannot have it */
    expect(model, x, GP_EUNSUPPORTED, "likelihood");
    model->likelihood = GP_LIK_GAUSSIAN;
    model->n_outputs = 2;
    expect(model, x, GP_EUNSUPPORTED, "n_outputs");
    model->n_outputs = 1;
    expect(model, x, GP_OK, NULL);
    gp_model_free(model);
    /* a method without the op: refused before anything of the model is read */
    gp_model shell;
    memset(&shell, 0, sizeof shell);
    shell.method = gp_method_find("ssgp");
    assert_false(gp_method_can_predict_grad(shell.method));
    expect(&shell, x, GP_EUNSUPPORTED, "method");
    assert_true(gp_method_can_predict_grad(gp_method_find("exact")));
    assert_true(gp_method_can_predict_grad(gp_method_find("sgpr")));
}

/* A coregionalised exact model (two outputs, ICM) is refused. */
static void test_coregionalised_refused(void **state)
{
    (void)state;
    double X[N * D], y[2 * N];
    tu_random_problem_colmajor(N, D, 5, X, y);
    for (size_t i = 0; i < N; i++)
        y[N + i] = 2.0 * y[i] + 1.0;
    char *keys[1] = {"type"};
    gp_value items[1] = {{.type = GP_VALUE_STRING, .string = "icm"}};
    gp_value obj = {.type = GP_VALUE_OBJECT, .keys = keys, .items = items, .n = 1};
    gp_option_value opts[2] = {{.name = "coregionalization", .object = &obj},
                               {.name = "max_iterations", .number = 5}};
    gp_kernel *k = make_kernel(K_RBF_ARD);
    gp_fit_request req;
    fit_request(&req, X, y, N, D, k, opts, 2);
    req.n_outputs = 2;
    gp_model *model = fit_ok(gp_method_find("exact"), &req, "coreg");
    double x[D] = {0.1, 0.2, 0.3};
    expect(model, x, GP_EUNSUPPORTED, "n_outputs");
    gp_model_free(model);
    gp_kernel_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_values_match_predict),
        cmocka_unit_test(test_gradients_fd),
        cmocka_unit_test(test_gradients_not_trivial),
        cmocka_unit_test(test_threads_same_bits),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_coregionalised_refused),
    };
    return cmocka_run_group_tests_name("predict_grad", tests, NULL, NULL);
}
