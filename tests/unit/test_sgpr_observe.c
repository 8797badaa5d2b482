/* sgpr's observe (core/methods/sgpr.c): rows added to a fitted model with
 * Z, the kernel and the noise held give the collapsed posterior that the
 * bound's own code (gp_sgpr_bound_noise, core/inducing/collapsed.h) builds
 * from all the rows with those Z and hyperparameters: its whitened mean and
 * covariance and its predictions to 1e-9 relative, with a zero or a linear
 * mean, known per-point noise, several batches and a batch of more than one
 * chunk. The observed model's state round-trips bit for bit, replays give
 * the same bits, and refused rows leave the model as it was. */
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
#include "core/base/state.h"
#include "core/inducing/collapsed.h"
#include "core/inducing/inducing.h"
#include "core/methods/registry.h"
#include "core/model/model.h"
#include "tests/unit/method_testutil.h"
#include "tests/unit/testutil.h"

#define D 2
#define NA 50
#define NMAX 400 /* rows of a problem: the fit's then the observed */
#define MT 9     /* test points */
#define INDUCING 10

typedef struct problem {
    double X[NMAX * D], y[NMAX], noise[NMAX]; /* column-major, NMAX rows */
    double Xs[MT * D];
} problem;

static void make_problem(problem *p, uint64_t seed)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < NMAX; i++) {
        double a = 4.0 * gp_rng_uniform(&rng) - 2.0, b = 4.0 * gp_rng_uniform(&rng) - 2.0;
        p->X[i] = 3.0 * a + 1.0; /* columns of their own units: standardisation matters */
        p->X[NMAX + i] = 0.5 * b;
        p->y[i] = 10.0 * (sin(1.3 * a) + 0.5 * cos(b)) + 4.0 + 0.3 * gp_rng_normal(&rng);
        p->noise[i] = 0.05 + 0.2 * gp_rng_uniform(&rng);
    }
    for (size_t i = 0; i < MT; i++) {
        p->Xs[i] = 3.0 * (3.6 * gp_rng_uniform(&rng) - 1.8) + 1.0;
        p->Xs[MT + i] = 0.5 * (3.6 * gp_rng_uniform(&rng) - 1.8);
    }
}

/* Rows s .. s + k of the problem, column-major k x D. */
static void rows_of(const problem *p, size_t s, size_t k, double *X)
{
    for (size_t j = 0; j < D; j++)
        memcpy(X + j * k, p->X + j * NMAX + s, k * sizeof *X);
}

static gp_model *fit_first(const problem *p, gp_mean_type mean, int per_point)
{
    double X[NA * D];
    rows_of(p, 0, NA, X);
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_MATERN52, D, 1, NULL, 0, &err), GP_OK);
    gp_option_value opts[2] = {{.name = "inducing", .number = INDUCING},
                               {.name = "max_iterations", .number = 25}};
    gp_fit_request req;
    fit_request(&req, X, p->y, NA, D, k, opts, 2);
    req.mean = mean;
    req.noise_per_point = per_point ? p->noise : NULL;
    gp_model *model = fit_ok(gp_method_find("sgpr"), &req, "sgpr");
    gp_kernel_free(k);
    return model;
}

static void observe_ok(gp_model *model, const problem *p, size_t s, size_t k, int per_point)
{
    double *X = malloc(k * D * sizeof *X);
    assert_non_null(X);
    rows_of(p, s, k, X);
    gp_error err;
    int rc = gp_model_observe_noise(model, X, p->y + s, per_point ? p->noise + s : NULL, k, &err);
    if (rc)
        fail_msg("observe: %s (%s, field %s)", err.message, gp_status_name(rc), err.field);
    free(X);
}

/* The bound's posterior on rows 0 .. n in the model's working units (the
 * model's statistics, its mean's coefficients held), at its Z, kernel and
 * noise. */
static void reference_post(const gp_model *model, const problem *p, size_t n, int per_point,
                           gp_inducing_post *ref)
{
    const gp_inducing_post *q = model->impl;
    double *P = malloc(n * D * sizeof *P), *yw = malloc(n * sizeof *yw),
           *r = malloc(n * sizeof *r);
    assert_true(P && yw && r);
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < D; j++)
            P[i * D + j] = (p->X[j * NMAX + i] - model->x_mean[j]) / model->x_scale[j];
        yw[i] = (p->y[i] - model->y_mean) / model->y_scale -
                gp_mean_at(model->mean_type, model->mean_coef, P + i * D, D);
        r[i] = p->noise[i] / (model->y_scale * model->y_scale);
    }
    gp_sgpr_terms terms;
    gp_error err;
    memset(ref, 0, sizeof *ref);
    assert_int_equal(gp_sgpr_bound_noise(model->kernel, model->noise_variance,
                                         per_point ? r : NULL, P, n, D, yw, q->Z, q->m, &terms,
                                         NULL, NULL, ref, &err),
                     GP_OK);
    assert_int_equal(gp_inducing_post_prepare(ref, model->kernel, &err), GP_OK);
    free(P);
    free(yw);
    free(r);
}

/* The posterior's latent predictions (working mean function excluded). */
static void post_predict(const gp_model *model, const gp_inducing_post *post, const problem *p,
                         double *mean, double *var)
{
    gp_predict_request req = {.X = p->Xs, .m = MT, .d = D};
    gp_prediction out = {.mean = mean, .variance = var};
    gp_error err;
    assert_int_equal(gp_inducing_predict(model, post, &req, &out, &err), GP_OK);
}

static void check_against_reference(const gp_model *model, const problem *p, size_t n,
                                    int per_point, const char *what)
{
    assert_int_equal(model->n_train, n);
    gp_inducing_post ref;
    reference_post(model, p, n, per_point, &ref);
    const gp_inducing_post *q = model->impl;
    size_t m = q->m;
    double cmax = 0.0, mmax = 0.0;
    for (size_t i = 0; i < m * m; i++)
        cmax = fmax(cmax, fabs(ref.C[i]));
    for (size_t i = 0; i < m; i++)
        mmax = fmax(mmax, fabs(ref.mt[i]));
    for (size_t i = 0; i < m; i++)
        tu_assert_within(q->mt[i], ref.mt[i], 1e-9 * mmax, "%s: mt[%zu]", what, i);
    for (size_t i = 0; i < m * m; i++)
        tu_assert_within(q->C[i], ref.C[i], 1e-9 * cmax, "%s: C[%zu]", what, i);
    double mo[MT], vo[MT], mr[MT], vr[MT];
    post_predict(model, q, p, mo, vo);
    post_predict(model, &ref, p, mr, vr);
    for (size_t i = 0; i < MT; i++) {
        tu_assert_close(mo[i], mr[i], 1e-9, 1e-9 * model->y_scale, "%s: mean %zu", what, i);
        tu_assert_close(vo[i], vr[i], 1e-9, 0.0, "%s: variance %zu", what, i);
    }
    gp_inducing_post_free(&ref);
}

static void test_observe_equals_collapsed(void **state)
{
    (void)state;
    problem p;
    make_problem(&p, 31);
    gp_model *model = fit_first(&p, GP_MEAN_ZERO, 0);
    /* the test can fail: before observing, the posterior is not all rows' */
    gp_inducing_post ref;
    reference_post(model, &p, NA + 20, 0, &ref);
    assert_true(fabs(((gp_inducing_post *)model->impl)->mt[0] - ref.mt[0]) > 1e-6);
    gp_inducing_post_free(&ref);
    observe_ok(model, &p, NA, 20, 0);
    check_against_reference(model, &p, NA + 20, 0, "zero mean, one batch");
    gp_model_free(model);
}

static void test_observe_batches_linear_mean(void **state)
{
    (void)state;
    problem p;
    make_problem(&p, 32);
    gp_model *model = fit_first(&p, GP_MEAN_LINEAR, 0);
    observe_ok(model, &p, NA, 7, 0);
    observe_ok(model, &p, NA + 7, 1, 0);
    observe_ok(model, &p, NA + 8, 12, 0);
    check_against_reference(model, &p, NA + 20, 0, "linear mean, three batches");
    gp_model_free(model);
}

static void test_observe_per_point_noise(void **state)
{
    (void)state;
    problem p;
    make_problem(&p, 33);
    gp_model *model = fit_first(&p, GP_MEAN_ZERO, 1);
    observe_ok(model, &p, NA, 15, 1);
    check_against_reference(model, &p, NA + 15, 1, "per-point noise");
    /* rows without their noise are refused by gp_model_observe */
    double X[D] = {0.1, 0.2}, y = 1.0;
    gp_error err;
    assert_int_equal(gp_model_observe(model, X, &y, 1, &err), GP_EINVAL);
    assert_string_equal(err.field, "noise");
    gp_model_free(model);
}

/* More rows than one chunk: on copies, several Woodbury steps. */
static void test_observe_many_rows(void **state)
{
    (void)state;
    problem p;
    make_problem(&p, 34);
    gp_model *model = fit_first(&p, GP_MEAN_CONSTANT, 0);
    observe_ok(model, &p, NA, NMAX - NA, 0);
    check_against_reference(model, &p, NMAX, 0, "350 rows at once");
    gp_model_free(model);
}

static void predict_all(const gp_model *model, const problem *p, double *mean, double *var)
{
    predict_ok(model, p->Xs, MT, D, 1, mean, var, NULL);
}

static gp_model *roundtrip(const gp_model *model)
{
    gp_state st;
    gp_state_init(&st);
    gp_error err;
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    gp_model *back = NULL;
    assert_int_equal(gp_model_import(model->method, &st, &back, &err), GP_OK);
    gp_state_free(&st);
    return back;
}

/* Export/import of an observed model, and a replay of the same batches
 * from the fitted state, give the same bits. */
static void test_roundtrip_and_replay(void **state)
{
    (void)state;
    problem p;
    make_problem(&p, 35);
    gp_model *model = fit_first(&p, GP_MEAN_LINEAR, 0);
    gp_model *replay = roundtrip(model);
    observe_ok(model, &p, NA, 9, 0);
    observe_ok(model, &p, NA + 9, 4, 0);
    observe_ok(replay, &p, NA, 9, 0);
    observe_ok(replay, &p, NA + 9, 4, 0);
    gp_model *back = roundtrip(model);
    assert_int_equal(back->n_train, NA + 13);
    double m0[MT], v0[MT], m1[MT], v1[MT], m2[MT], v2[MT];
    predict_all(model, &p, m0, v0);
    predict_all(back, &p, m1, v1);
    predict_all(replay, &p, m2, v2);
    assert_memory_equal(m0, m1, sizeof m0);
    assert_memory_equal(v0, v1, sizeof v0);
    assert_memory_equal(m0, m2, sizeof m0);
    assert_memory_equal(v0, v2, sizeof v0);
    /* and the imported model observes on as the original does */
    observe_ok(model, &p, NA + 13, 5, 0);
    observe_ok(back, &p, NA + 13, 5, 0);
    predict_all(model, &p, m0, v0);
    predict_all(back, &p, m1, v1);
    assert_memory_equal(m0, m1, sizeof m0);
    assert_memory_equal(v0, v1, sizeof v0);
    gp_model_free(model);
    gp_model_free(back);
    gp_model_free(replay);
}

/* The same rows observed under 1 and 4 compute threads: the same bits. */
static void test_threads_same_bits(void **state)
{
    (void)state;
    problem p;
    make_problem(&p, 38);
    int saved = gp_parallel_threads();
    gp_model *one = fit_first(&p, GP_MEAN_ZERO, 0);
    gp_model *four = roundtrip(one);
    gp_parallel_set_threads(1);
    observe_ok(one, &p, NA, NMAX - NA, 0);
    gp_parallel_set_threads(4);
    observe_ok(four, &p, NA, NMAX - NA, 0);
    gp_parallel_set_threads(saved);
    const gp_inducing_post *a = one->impl, *b = four->impl;
    assert_memory_equal(a->mt, b->mt, a->m * sizeof *a->mt);
    assert_memory_equal(a->C, b->C, a->m * a->m * sizeof *a->C);
    gp_model_free(one);
    gp_model_free(four);
}

static void expect_refused(gp_model *model, const problem *p, const double *X, const double *y,
                           size_t k, int code, const char *field)
{
    double m0[MT], v0[MT], m1[MT], v1[MT];
    size_t n = model->n_train;
    predict_all(model, p, m0, v0);
    gp_error err;
    assert_int_equal(gp_model_observe(model, X, y, k, &err), code);
    assert_string_equal(err.field, field);
    assert_int_equal(model->n_train, n);
    predict_all(model, p, m1, v1);
    assert_memory_equal(m0, m1, sizeof m0);
    assert_memory_equal(v0, v1, sizeof v0);
}

static void test_refused_rows_change_nothing(void **state)
{
    (void)state;
    problem p;
    make_problem(&p, 36);
    gp_model *model = fit_first(&p, GP_MEAN_ZERO, 0);
    double X[2 * D] = {0.1, 0.2, 0.3, 0.4}, y[2] = {1.0, NAN};
    expect_refused(model, &p, X, y, 2, GP_EDATA, "y[1]");
    y[1] = 1e300; /* finite, beyond the working limit */
    expect_refused(model, &p, X, y, 2, GP_EDATA, "y[1]");
    y[1] = 2.0;
    X[1] = 1e303;
    expect_refused(model, &p, X, y, 2, GP_EDATA, "X[1][0]");
    assert_true(gp_method_can_observe(gp_method_find("sgpr")));
    gp_model_free(model);
}

/* A model without noise of its own (s2 held at 0, per-point noise only)
 * refuses a row whose noise is 0: its precision would be infinite. */
static void test_zero_noise_row_refused(void **state)
{
    (void)state;
    problem p;
    make_problem(&p, 37);
    double X[NA * D];
    rows_of(&p, 0, NA, X);
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, D, 1, NULL, 0, &err), GP_OK);
    gp_option_value opts[2] = {{.name = "inducing", .number = INDUCING},
                               {.name = "max_iterations", .number = 10}};
    gp_fit_request req;
    fit_request(&req, X, p.y, NA, D, k, opts, 2);
    req.noise_per_point = p.noise;
    req.noise_given = req.noise_fixed = 1;
    req.noise_variance = 0.0;
    gp_model *model = fit_ok(gp_method_find("sgpr"), &req, "sgpr");
    double x[D] = {0.5, 0.1}, y = 3.0, r = 0.0;
    assert_int_equal(gp_model_observe_noise(model, x, &y, &r, 1, &err), GP_EDATA);
    assert_string_equal(err.field, "noise");
    assert_int_equal(model->n_train, NA);
    r = 0.1;
    assert_int_equal(gp_model_observe_noise(model, x, &y, &r, 1, &err), GP_OK);
    assert_int_equal(model->n_train, NA + 1);
    gp_model_free(model);
    gp_kernel_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_observe_equals_collapsed),
        cmocka_unit_test(test_observe_batches_linear_mean),
        cmocka_unit_test(test_observe_per_point_noise),
        cmocka_unit_test(test_observe_many_rows),
        cmocka_unit_test(test_roundtrip_and_replay),
        cmocka_unit_test(test_threads_same_bits),
        cmocka_unit_test(test_refused_rows_change_nothing),
        cmocka_unit_test(test_zero_noise_row_refused),
    };
    return cmocka_run_group_tests_name("sgpr_observe", tests, NULL, NULL);
}
