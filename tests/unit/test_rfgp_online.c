/* Method "rfgp" online (core/methods/rfgp/rfgp.h,
 * docs/methods/kernel-jit-online.md): the warm-up's equivalence ("fit with all
 * rows" = "fit with the warm-up, then observe the rest"), its refusals and
 * status, a model created without rows, the gate, bad rows refused through
 * gp_model_observe naming the field, export/import followed by the same
 * observes (bit-identical), and independence of the BLAS thread count. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <cmocka.h>
#include <lapacke.h>

#include "core/base/rng.h"
#include "core/base/state.h"
#include "core/methods/registry.h"
#include "core/methods/rfgp/rfgp.h"
#include "core/model/model.h"
#include "tests/unit/method_testutil.h"
#include "tests/unit/testutil.h"
#include "tests/unit/rfgp_fixture.h"

/* ---- the warm-up ---- */

static int state_equal(const gp_model *a, const gp_model *b, const char *what)
{
    gp_state sa, sb;
    gp_state_init(&sa);
    gp_state_init(&sb);
    gp_error err;
    assert_int_equal(gp_model_export(a, &sa, &err), GP_OK);
    assert_int_equal(gp_model_export(b, &sb, &err), GP_OK);
    if (sa.count != sb.count)
        fail_msg("%s: %zu arrays against %zu", what, sa.count, sb.count);
    for (size_t i = 0; i < sa.count; i++) {
        const gp_named_array *x = &sa.arrays[i];
        const gp_named_array *y = gp_state_find(&sb, x->name);
        if (y == NULL || y->rows != x->rows || y->cols != x->cols)
            fail_msg("%s: array '%s' missing or of another shape", what, x->name);
        if (strcmp(x->name, "diagnostics") == 0) /* fit_seconds */
            continue;
        if (memcmp(x->data, y->data, x->rows * x->cols * sizeof *x->data) != 0)
            fail_msg("%s: array '%s' differs", what, x->name);
    }
    gp_state_free(&sa);
    gp_state_free(&sb);
    return 1;
}

static gp_model *warm_model(const double *X, const double *Y, size_t n, size_t d, size_t p,
                            size_t k_rows, gp_kernel *k)
{
    opts o = {0};
    opt_num(&o, "warmup", 30);
    opt_num(&o, "features", 50);
    opt_num(&o, "outputs", (double)p);
    gp_fit_request req;
    /* the first k_rows rows, as a k_rows x d matrix */
    double *Xk = dalloc(k_rows * d), *Yk = dalloc(k_rows * p);
    for (size_t c = 0; c < d; c++)
        memcpy(Xk + c * k_rows, X + c * n, k_rows * sizeof *X);
    for (size_t j = 0; j < p; j++)
        memcpy(Yk + j * k_rows, Y + j * n, k_rows * sizeof *Y);
    fit_request(&req, Xk, Yk, k_rows, d, k, o.v, o.n);
    req.n_outputs = p;
    gp_model *model = fit_ok(rfgp(), &req, "warm model");
    free(Xk);
    free(Yk);
    return model;
}

/* rows a .. b of X (n x d) and Y (n x p) observed as one batch */
static void observe_rows(gp_model *model, const double *X, const double *Y, size_t n, size_t d,
                         size_t p, size_t a, size_t b)
{
    size_t k = b - a;
    double *Xk = dalloc(k * d), *Yk = dalloc(k * p);
    for (size_t c = 0; c < d; c++)
        memcpy(Xk + c * k, X + c * n + a, k * sizeof *X);
    for (size_t j = 0; j < p; j++)
        memcpy(Yk + j * k, Y + j * n + a, k * sizeof *Y);
    observe_ok(model, Xk, Yk, k);
    free(Xk);
    free(Yk);
}

static void test_warmup_equivalence(void **state)
{
    (void)state;
    size_t n = 100, d = 2, p = 2;
    double X[200], Y[200];
    toy_rows(21, n, d, p, X, Y);
    gp_kernel *k = rbf(d, 1, 1.0);
    gp_model *all = warm_model(X, Y, n, d, p, n, k);
    gp_model *split = warm_model(X, Y, n, d, p, 30, k);
    observe_rows(split, X, Y, n, d, p, 30, n);
    gp_model *empty = warm_model(X, Y, n, d, p, 0, k);
    observe_rows(empty, X, Y, n, d, p, 0, n);
    assert_int_equal(all->n_train, n);
    assert_int_equal(split->n_train, n);
    state_equal(all, split, "fit with all rows vs the warm-up then one observe");
    state_equal(all, empty, "fit with all rows vs no rows then one observe");
    gp_model_free(all);
    gp_model_free(split);
    gp_model_free(empty);
    gp_kernel_free(k);
}

static void test_warmup_status(void **state)
{
    (void)state;
    size_t n = 100, d = 2, p = 2;
    double X[200], Y[200];
    toy_rows(22, n, d, p, X, Y);
    gp_kernel *k = rbf(d, 1, 1.0);
    gp_model *model = warm_model(X, Y, n, d, p, 12, k);
    gp_online_status st;
    gp_model_online_status(model, &st);
    assert_int_equal(st.n, 12);
    assert_int_equal(st.warmup, 1);
    assert_int_equal(st.warmup_target, 30);
    assert_int_equal(st.has_threshold, 0);
    double mu[4], var[4];
    gp_predict_request pr = {.X = X, .m = 2, .d = d};
    gp_prediction out = {.mean = mu, .variance = var};
    gp_error err;
    assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_ECONFLICT);
    gp_sample_request sr = {.X = X, .m = 2, .d = d, .n_samples = 1, .seed = 1};
    assert_int_equal(gp_model_sample(model, &sr, mu, &err), GP_ECONFLICT);
    assert_string_equal(find_info(model, "state")->string, "warmup");
    observe_rows(model, X, Y, n, d, p, 12, 40);
    gp_model_online_status(model, &st);
    assert_int_equal(st.n, 40);
    assert_int_equal(st.warmup, 0);
    assert_int_equal(st.has_threshold, 1);
    assert_true(st.kappa == 1.0);
    assert_int_equal(st.always_asks, 0);
    assert_string_equal(find_info(model, "state")->string, "online");
    /* relative: tau_j = log(s s_j^2) + log(1 + kappa), s_j the output's scale */
    for (size_t j = 0; j < p; j++) {
        double mean = 0, ss = 0;
        for (size_t i = 0; i < 30; i++)
            mean += Y[j * n + i] / 30.0;
        for (size_t i = 0; i < 30; i++)
            ss += (Y[j * n + i] - mean) * (Y[j * n + i] - mean) / 30.0;
        tu_assert_close(st.threshold[j], log(1e-4 * ss) + log(2.0), 1e-12, 0,
                        "threshold of output %zu", j);
    }
    gp_model_free(model);
    /* warmup 0 without fixed widths is refused, naming the option */
    opts o = {0};
    opt_num(&o, "warmup", 0);
    gp_fit_request req;
    fit_request(&req, X, Y, n, d, k, o.v, o.n);
    gp_model *bad = NULL;
    assert_int_equal(gp_model_fit(rfgp(), &req, &bad, &err), GP_EINVAL);
    assert_string_equal(err.field, "options.warmup");
    gp_kernel_free(k);
}

/* A model created without rows takes d and p from its options. */
static void test_starts_empty(void **state)
{
    (void)state;
    size_t n = 60, d = 3, p = 2;
    double X[180], Y[120];
    toy_rows(23, n, d, p, X, Y);
    gp_kernel *k = rbf(d, 1, 1.0);
    opts o = {0};
    opt_num(&o, "warmup", 40);
    opt_num(&o, "features", 40);
    opt_num(&o, "outputs", 2);
    input_opt io;
    input_value(&io, "point", d, NULL, 0, NULL, 0);
    gp_fit_request req;
    kind_request(&req, &o, &io, NULL, NULL, 0, 0, k);
    assert_int_equal(req.d, d);
    gp_model *model = fit_ok(rfgp(), &req, "empty");
    assert_int_equal(model->n_train, 0);
    assert_int_equal(model->n_outputs, 2);
    observe_rows(model, X, Y, n, d, p, 0, 25);
    observe_rows(model, X, Y, n, d, p, 25, n);
    gp_online_status st;
    gp_model_online_status(model, &st);
    assert_int_equal(st.warmup, 0);
    double mu[8], var[8];
    predict_ok(model, X, 4, d, 1, mu, var, NULL);
    for (size_t i = 0; i < 8; i++)
        assert_true(isfinite(mu[i]) && var[i] > 0);
    /* outputs that contradict the rows */
    opts o2 = {0};
    opt_num(&o2, "outputs", 3);
    fit_request(&req, X, Y, n, d, k, o2.v, o2.n);
    req.n_outputs = 2;
    gp_model *bad = NULL;
    gp_error err;
    assert_int_equal(gp_model_fit(rfgp(), &req, &bad, &err), GP_EINVAL);
    assert_string_equal(err.field, "options.outputs");
    gp_model_free(model);
    gp_kernel_free(k);
}

/* ---- the gate ---- */

static gp_model *gate_model(const char *threshold, double tau, gp_kernel *k)
{
    size_t n = 60;
    double X[60], Y[60];
    gp_rng rng;
    gp_rng_seed(&rng, 31);
    for (size_t i = 0; i < n; i++) {
        X[i] = 2.0 * gp_rng_uniform(&rng) - 1.0;
        Y[i] = sin(3.0 * X[i]) + 0.01 * gp_rng_normal(&rng);
    }
    opts o = {0};
    opt_num(&o, "warmup", 60);
    opt_num(&o, "features", 200);
    if (threshold)
        opt_str(&o, "gate_threshold", threshold);
    else
        opt_num(&o, "gate_threshold", tau);
    gp_fit_request req;
    fit_request(&req, X, Y, n, 1, k, o.v, o.n);
    return fit_ok(rfgp(), &req, "gate");
}

static void gate_of(const gp_model *model, const double *Xs, size_t m, unsigned char *ask)
{
    double mu[8], var[8];
    gp_predict_request pr = {.X = Xs, .m = m, .d = 1, .include_noise = 0};
    gp_prediction out = {.mean = mu, .variance = var, .ask_oracle = ask};
    gp_error err;
    assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_OK);
}

static void test_gate(void **state)
{
    (void)state;
    gp_kernel *k = rbf(1, 0, 1.0);
    double Xs[4] = {0.0, 0.45, 6.0, -8.0};
    unsigned char ask[4];
    gp_model *model = gate_model("relative", 0, k);
    gate_of(model, Xs, 4, ask);
    assert_int_equal(ask[0], 0);
    assert_int_equal(ask[1], 0);
    assert_int_equal(ask[2], 1);
    assert_int_equal(ask[3], 1);
    gp_model_free(model);
    /* an absolute tau below the log noise: every point asks, and it is said */
    model = gate_model(NULL, -100.0, k);
    gate_of(model, Xs, 4, ask);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(ask[i], 1);
    gp_online_status st;
    gp_model_online_status(model, &st);
    assert_int_equal(st.always_asks, 1);
    assert_true(isnan(st.kappa));
    assert_true(st.threshold[0] == -100.0);
    assert_string_equal(find_info(model, "always_asks")->string, "true");
    gp_model_free(model);
    model = gate_model(NULL, 100.0, k);
    gate_of(model, Xs, 4, ask);
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(ask[i], 0);
    gp_model_free(model);
    gp_kernel_free(k);
}

/* ---- bad rows through gp_model_observe ---- */

static void test_bad_rows(void **state)
{
    (void)state;
    static const char *const msgs[2] = {"normal", "beta"};
    size_t n = 20;
    double X[80], Y[20];
    kind_rows("messages", 0, n, 2, 0, X, Y, 41);
    gp_kernel *k = rbf(2, 1, 1.0);
    opts o = {0};
    opt_num(&o, "warmup", 10);
    opt_num(&o, "features", 20);
    opt_num(&o, "inner_features", 10);
    input_opt io;
    input_value(&io, "messages", 0, NULL, 0, msgs, 2);
    gp_fit_request req;
    kind_request(&req, &o, &io, X, Y, n, 1, k);
    gp_model *model = fit_ok(rfgp(), &req, "messages");
    gp_state before;
    gp_state_init(&before);
    gp_error err;
    assert_int_equal(gp_model_export(model, &before, &err), GP_OK);
    double row[4] = {0.1, 0.2, 2.0, 3.0}, y = 0.5;
    row[2] = 0.0; /* beta a must be positive */
    assert_int_equal(gp_model_observe(model, row, &y, 1, &err), GP_EDATA);
    assert_string_equal(err.field, "X[0].messages[1].beta.a");
    row[2] = 2.0;
    row[1] = -0.1; /* a normal's variance must not be negative */
    assert_int_equal(gp_model_observe(model, row, &y, 1, &err), GP_EDATA);
    assert_string_equal(err.field, "X[0].messages[0].normal.var");
    row[1] = 0.2;
    y = NAN;
    assert_int_equal(gp_model_observe(model, row, &y, 1, &err), GP_EDATA);
    assert_string_equal(err.field, "y[0]");
    assert_int_equal(model->n_train, n);
    gp_kernel_free(k);
    /* gaussian rows: a negative variance */
    double G[4 * 20];
    kind_rows("gaussian", 0, n, 2, 0, G, Y, 42);
    k = rbf(2, 1, 1.0);
    opts o2 = {0};
    opt_num(&o2, "warmup", 10);
    opt_num(&o2, "features", 20);
    opt_num(&o2, "inner_features", 10);
    input_value(&io, "gaussian", 2, NULL, 0, NULL, 0);
    kind_request(&req, &o2, &io, G, Y, n, 1, k);
    gp_model *gm = fit_ok(rfgp(), &req, "gaussian");
    double grow[4] = {0.1, 0.2, 0.3, -1.0};
    y = 0.0;
    assert_int_equal(gp_model_observe(gm, grow, &y, 1, &err), GP_EDATA);
    assert_string_equal(err.field, "X[0].gaussian.var[1]");
    gp_model_free(gm);
    gp_kernel_free(k);
    /* nothing changed */
    gp_state after;
    gp_state_init(&after);
    assert_int_equal(gp_model_export(model, &after, &err), GP_OK);
    assert_int_equal(after.count, before.count);
    for (size_t i = 0; i < after.count; i++)
        assert_memory_equal(after.arrays[i].data, before.arrays[i].data,
                            after.arrays[i].rows * after.arrays[i].cols * sizeof(double));
    gp_state_free(&before);
    gp_state_free(&after);
    gp_model_free(model);
}

/* ---- export / import ---- */

static gp_model *reimport(const gp_model *model)
{
    gp_state st;
    gp_state_init(&st);
    gp_error err;
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    gp_model *back = NULL;
    if (gp_model_import(rfgp(), &st, &back, &err) != GP_OK)
        fail_msg("import: %s", err.message);
    gp_state_free(&st);
    return back;
}

typedef struct full_pred {
    double mu[10], var[10], cov[50];
    unsigned char ask[5];
} full_pred;

static void predict_full(const gp_model *model, const double *Xs, size_t d, full_pred *o)
{
    memset(o, 0, sizeof *o);
    gp_predict_request pr = {.X = Xs, .m = 5, .d = d, .include_noise = 1, .full_covariance = 1};
    gp_prediction out = {.mean = o->mu, .variance = o->var, .covariance = o->cov,
                         .ask_oracle = o->ask};
    gp_error err;
    assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_OK);
}

static void roundtrip_case(size_t k_fit, size_t a_end, const char *what)
{
    size_t n = 100, d = 2, p = 2;
    double X[200], Y[200], Xs[10];
    toy_rows(51, n, d, p, X, Y);
    for (size_t i = 0; i < 10; i++)
        Xs[i] = -1.0 + 0.3 * (double)i;
    gp_kernel *k = rbf(d, 1, 1.0);
    gp_model *model = warm_model(X, Y, n, d, p, k_fit, k);
    observe_rows(model, X, Y, n, d, p, k_fit, a_end); /* A */
    gp_model *back = reimport(model);
    state_equal(model, back, what);
    /* B: single rows, then a batch that re-factorises */
    for (size_t i = a_end; i < a_end + 3; i++)
        observe_rows(model, X, Y, n, d, p, i, i + 1), observe_rows(back, X, Y, n, d, p, i, i + 1);
    observe_rows(model, X, Y, n, d, p, a_end + 3, n);
    observe_rows(back, X, Y, n, d, p, a_end + 3, n);
    state_equal(model, back, what);
    full_pred pa, pb;
    predict_full(model, Xs, d, &pa);
    predict_full(back, Xs, d, &pb);
    assert_memory_equal(&pa, &pb, sizeof pa);
    gp_model_free(model);
    gp_model_free(back);
    gp_kernel_free(k);
}

static void test_roundtrip(void **state)
{
    (void)state;
    roundtrip_case(40, 43, "online: export, import, the same observes");
    roundtrip_case(10, 20, "in warm-up: export, import, the same observes");
    /* a model online from its creation (warmup 0) */
    size_t n = 30, d = 2, p = 2;
    double X[60], Y[60];
    toy_rows(52, n, d, p, X, Y);
    gp_kernel *k;
    gp_model *model = fixed_model(d, p, 20, 0.01, 0.95, 0, &k);
    observe_rows(model, X, Y, n, d, p, 0, 10);
    gp_model *back = reimport(model);
    observe_rows(model, X, Y, n, d, p, 10, n);
    observe_rows(back, X, Y, n, d, p, 10, n);
    state_equal(model, back, "warmup 0: export, import, the same observes");
    gp_model_free(model);
    gp_model_free(back);
    gp_kernel_free(k);
}

/* ---- BLAS threads ---- */

static void test_blas_threads(void **state)
{
    (void)state;
    size_t n = 400, d = 2, p = 2;
    double *X = dalloc(n * d), *Y = dalloc(n * p), Xs[10];
    toy_rows(61, n, d, p, X, Y);
    for (size_t i = 0; i < 10; i++)
        Xs[i] = -1.0 + 0.3 * (double)i;
    full_pred out[2];
    int saved = openblas_get_num_threads();
    for (int t = 1; t <= 2; t++) {
        openblas_set_num_threads(t);
        gp_kernel *k = rbf(d, 1, 1.0);
        opts o = {0};
        opt_num(&o, "warmup", 300);
        opt_num(&o, "features", 400);
        opt_num(&o, "outputs", 2);
        opt_str(&o, "width_selection", "loocv");
        gp_fit_request req;
        fit_request(&req, X, Y, 300, d, k, o.v, o.n);
        req.n_outputs = p;
        /* the first 300 rows are X's first 300 (column-major, leading dimension n) */
        double *Xf = dalloc(300 * d), *Yf = dalloc(300 * p);
        for (size_t c = 0; c < d; c++)
            memcpy(Xf + c * 300, X + c * n, 300 * sizeof *X);
        for (size_t j = 0; j < p; j++)
            memcpy(Yf + j * 300, Y + j * n, 300 * sizeof *Y);
        req.X = Xf;
        req.y = Yf;
        gp_model *model = fit_ok(rfgp(), &req, "threads");
        observe_rows(model, X, Y, n, d, p, 300, 302);
        observe_rows(model, X, Y, n, d, p, 302, n);
        predict_full(model, Xs, d, &out[t - 1]);
        gp_model_free(model);
        gp_kernel_free(k);
        free(Xf);
        free(Yf);
    }
    openblas_set_num_threads(saved);
    if (memcmp(&out[0], &out[1], sizeof out[0]) != 0)
        fail_msg("predictions differ between 1 and 2 BLAS threads");
    free(X);
    free(Y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_warmup_equivalence),
        cmocka_unit_test(test_warmup_status),
        cmocka_unit_test(test_starts_empty),
        cmocka_unit_test(test_gate),
        cmocka_unit_test(test_bad_rows),
        cmocka_unit_test(test_roundtrip),
        cmocka_unit_test(test_blas_threads),
    };
    return cmocka_run_group_tests_name("rfgp", tests, NULL, NULL);
}
