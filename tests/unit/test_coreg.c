/* Coregionalised exact GPs (core/coreg, docs/design/multioutput.md):
 * analytic gradients against finite differences on both paths, the
 * Kronecker path against the general one, ICM with one output against the
 * single-output GP, a diagonal B against independent GPs, a GPyTorch
 * fixture, persistence, observe, batch invariance and bad input. */
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
#include "core/coreg/exact.h"
#include "core/coreg/params.h"
#include "core/kernel/lml.h"
#include "core/methods/exact.h"
#include "core/methods/registry.h"
#include "core/model/model.h"
#include "tests/unit/testutil.h"

/* ---- the option as a gp_value ---- */

typedef struct coreg_opt {
    char *keys[5];
    gp_value items[5];
    gp_value obj;
    gp_option_value ov[2];
} coreg_opt;

static void opt_add(coreg_opt *o, const char *key, gp_value v)
{
    o->keys[o->obj.n] = (char *)key;
    o->items[o->obj.n++] = v;
}

static gp_value str_value(const char *s)
{
    return (gp_value){.type = GP_VALUE_STRING, .string = (char *)s};
}

static gp_value num_value(double x)
{
    return (gp_value){.type = GP_VALUE_NUMBER, .number = x};
}

/* {"type": type, "rank": rank, "latents": latents (lmc), "kappa": kappa,
 * "solver": solver (NULL: none)} plus max_iterations. */
static void opt_make(coreg_opt *o, const char *type, int rank, int latents, int kappa,
                     const char *solver, int iterations)
{
    memset(o, 0, sizeof *o);
    o->obj.type = GP_VALUE_OBJECT;
    o->obj.keys = o->keys;
    o->obj.items = o->items;
    opt_add(o, "type", str_value(type));
    if (rank)
        opt_add(o, "rank", num_value(rank));
    if (latents)
        opt_add(o, "latents", num_value(latents));
    if (!kappa)
        opt_add(o, "kappa", (gp_value){.type = GP_VALUE_BOOL, .number = 0});
    if (solver)
        opt_add(o, "solver", str_value(solver));
    o->ov[0] = (gp_option_value){.name = "coregionalization", .object = &o->obj};
    o->ov[1] = (gp_option_value){.name = "max_iterations", .number = iterations};
}

/* ---- data ---- */

static gp_kernel *rbf(size_t d, int ard)
{
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, d, ard, NULL, 0, &err), GP_OK);
    return k;
}

/* n rows in d dims (column-major X), p correlated outputs (column-major y):
 * output j = (1 + j/2) f(x) + 0.5 g_j(x) + noise, plus an offset and scale
 * of its own; every `hole`-th entry (by a seeded draw) missing. */
static void make_data(size_t n, size_t d, size_t p, double missing, uint64_t seed, double *X,
                      double *y)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n * d; i++)
        X[i] = 4.0 * gp_rng_uniform(&rng) - 2.0;
    for (size_t i = 0; i < n; i++) {
        double f = 0.0, g = 0.0;
        for (size_t k = 0; k < d; k++) {
            f += sin(1.3 * X[k * n + i] + 0.3 * (double)k);
            g += cos(2.1 * X[k * n + i]);
        }
        for (size_t j = 0; j < p; j++)
            y[j * n + i] = 3.0 * (double)j + (1.0 + 0.5 * (double)j) *
                           ((1.0 + 0.5 * (double)j) * f + 0.5 * (j % 2 ? g : -g) +
                            0.1 * gp_rng_normal(&rng));
    }
    for (size_t i = 0; i < n; i++) {
        size_t keep = (size_t)(gp_rng_uniform(&rng) * (double)p) % p; /* one stays observed */
        for (size_t j = 0; j < p; j++)
            if (j != keep && gp_rng_uniform(&rng) < missing)
                y[j * n + i] = NAN;
    }
}

static void request(gp_fit_request *req, const double *X, const double *y, size_t n, size_t d,
                    size_t p, const gp_kernel *k, coreg_opt *o)
{
    memset(req, 0, sizeof *req);
    req->X = X;
    req->y = y;
    req->n = n;
    req->d = d;
    req->n_outputs = p;
    req->kernel = k;
    req->standardize = 1;
    req->seed = 3;
    req->options = o->ov;
    req->n_options = 2;
}

static gp_model *fit_ok(const gp_fit_request *req)
{
    gp_model *model = NULL;
    gp_error err;
    int rc = gp_model_fit(&gp_method_exact, req, &model, &err);
    if (rc)
        fail_msg("fit: %s (%s)", err.message, err.field);
    return model;
}

/* ---- gradients against finite differences ---- */

typedef struct fd_ctx {
    struct gp_coreg_exact *ce;
    int kron;
} fd_ctx;

static double lml_at(void *ctx, const double *x)
{
    fd_ctx *c = ctx;
    double lml;
    gp_error err;
    if (gp_coreg_exact_eval(c->ce, x, c->kron, &lml, NULL, &err))
        fail_msg("eval: %s", err.message);
    return lml;
}

/* The packed parameters moved off the start so no gradient is trivially 0. */
static double *spread_point(struct gp_coreg_exact *ce, size_t *dim)
{
    *dim = gp_coreg_exact_dim(ce);
    double *x = malloc(*dim * sizeof *x);
    gp_coreg_exact_pack(ce, x);
    for (size_t i = 0; i < *dim; i++)
        x[i] += 0.2 * sin(1.9 * (double)i + 0.4);
    return x;
}

static void check_gradient(struct gp_coreg_exact *ce, int kron, const char *what)
{
    size_t dim;
    double *x = spread_point(ce, &dim), *g = malloc(dim * sizeof *g), lml;
    gp_error err;
    assert_int_equal(gp_coreg_exact_eval(ce, x, kron, &lml, g, &err), GP_OK);
    fd_ctx c = {ce, kron};
    tu_check_gradient(lml_at, &c, x, dim, g,
                      (tu_fd_spec){.step = 1e-5, .rtol = 1e-5, .atol = 1e-6, .floor = 1.0},
                      NULL, what);
    free(x);
    free(g);
}

static void test_gradient_general_heterotopic(void **state)
{
    (void)state;
    size_t n = 25, d = 2, p = 3;
    double X[50], y[75];
    make_data(n, d, p, 0.4, 11, X, y);
    gp_kernel *k = rbf(d, 1);
    coreg_opt o;
    opt_make(&o, "lmc", 2, 2, 1, NULL, 1);
    gp_fit_request req;
    request(&req, X, y, n, d, p, k, &o);
    gp_model *model = fit_ok(&req);
    assert_non_null(gp_exact_coreg(model));
    assert_int_equal(model->coreg.type, GP_COREG_LMC);
    assert_int_equal(model->coreg.kronecker, 0);
    check_gradient(gp_exact_coreg(model), 0, "lmc general");
    gp_model_free(model);
    gp_kernel_free(k);
}

static void test_gradient_kronecker(void **state)
{
    (void)state;
    size_t n = 20, d = 2, p = 3;
    double X[40], y[60];
    make_data(n, d, p, 0.0, 12, X, y);
    gp_kernel *k = rbf(d, 1);
    coreg_opt o;
    opt_make(&o, "icm", 2, 0, 1, NULL, 1);
    gp_fit_request req;
    request(&req, X, y, n, d, p, k, &o);
    gp_model *model = fit_ok(&req);
    assert_int_equal(model->coreg.kronecker, 1);
    check_gradient(gp_exact_coreg(model), 1, "icm kronecker");
    check_gradient(gp_exact_coreg(model), 0, "icm general");
    gp_model_free(model);
    gp_kernel_free(k);
}

/* ---- Kronecker == general ---- */

static void test_kronecker_equals_general(void **state)
{
    (void)state;
    size_t n = 30, d = 1, p = 4;
    double X[30], y[120];
    make_data(n, d, p, 0.0, 13, X, y);
    gp_kernel *k = rbf(d, 0);
    coreg_opt o;
    opt_make(&o, "icm", 2, 0, 1, "kronecker", 4);
    gp_fit_request req;
    request(&req, X, y, n, d, p, k, &o);
    gp_model *mk = fit_ok(&req);
    struct gp_coreg_exact *ce = gp_exact_coreg(mk);
    size_t dim;
    double *x = spread_point(ce, &dim), *gk = malloc(dim * sizeof *gk), *gg = malloc(dim * 8);
    double lk, lg;
    gp_error err;
    assert_int_equal(gp_coreg_exact_eval(ce, x, 1, &lk, gk, &err), GP_OK);
    assert_int_equal(gp_coreg_exact_eval(ce, x, 0, &lg, gg, &err), GP_OK);
    tu_assert_close(lk, lg, 1e-9, 0.0, "LML kronecker vs general");
    double gmax = 0.0;
    for (size_t i = 0; i < dim; i++)
        gmax = fmax(gmax, fabs(gg[i]));
    for (size_t i = 0; i < dim; i++)
        tu_assert_close(gk[i], gg[i], 1e-9, 1e-9 * gmax, "grad[%zu] kronecker vs general", i);
    /* the fit's own LML: the Kronecker optimum's value on the general path */
    opt_make(&o, "icm", 2, 0, 1, "general", 4);
    gp_model *mg = fit_ok(&req);
    assert_int_equal(mg->coreg.kronecker, 0);
    /* the same hyperparameters: the same predictions (mean, variance, cross) */
    double *xk = malloc(dim * sizeof *xk);
    gp_coreg_exact_pack(ce, xk);
    assert_int_equal(gp_coreg_exact_set(mg, gp_exact_coreg(mg), xk, &err), GP_OK);
    tu_assert_close(mg->diag.objective, mk->diag.objective, 1e-9, 0.0, "fitted LML");
    double Xs[3] = {-0.3, 0.7, 1.9}, mean[2][12], var[2][12], cov[2][36], cross[2][144];
    gp_model *ms[2] = {mk, mg};
    for (int t = 0; t < 2; t++) {
        gp_predict_request pr = {.X = Xs, .m = 3, .d = 1, .full_covariance = 1};
        gp_prediction out = {.mean = mean[t], .variance = var[t], .covariance = cov[t],
                             .cross_covariance = cross[t]};
        assert_int_equal(gp_model_predict(ms[t], &pr, &out, &err), GP_OK);
    }
    tu_assert_close_array(mean[0], mean[1], 12, 1e-9, 1e-12, "mean");
    tu_assert_close_array(var[0], var[1], 12, 1e-9, 1e-12, "variance");
    tu_assert_close_array(cross[0], cross[1], 144, 1e-9, 1e-12, "cross_covariance");
    /* the Kronecker model's state round trip and a point alone: the same bits */
    gp_state st;
    gp_state_init(&st);
    gp_model *back = NULL;
    assert_int_equal(gp_model_export(mk, &st, &err), GP_OK);
    assert_int_equal(gp_model_import(&gp_method_exact, &st, &back, &err), GP_OK);
    assert_int_equal(back->coreg.kronecker, 1);
    double m3[12], v3[12], m1[4], v1[4];
    gp_predict_request pr = {.X = Xs, .m = 3, .d = 1};
    gp_prediction o3 = {.mean = m3, .variance = v3};
    assert_int_equal(gp_model_predict(back, &pr, &o3, &err), GP_OK);
    assert_memory_equal(m3, mean[0], sizeof m3);
    assert_memory_equal(v3, var[0], sizeof v3);
    gp_predict_request one = {.X = Xs + 1, .m = 1, .d = 1};
    gp_prediction o1 = {.mean = m1, .variance = v1};
    assert_int_equal(gp_model_predict(mk, &one, &o1, &err), GP_OK);
    for (size_t j = 0; j < 4; j++) {
        assert_memory_equal(&m1[j], &mean[0][j * 3 + 1], sizeof(double));
        assert_memory_equal(&v1[j], &var[0][j * 3 + 1], sizeof(double));
    }
    /* observe: isotopic rows keep the Kronecker path and agree with the
     * general model observing them; a row with a missing output switches */
    double Xn[2] = {0.33, -1.4}, Yn[8] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8};
    assert_int_equal(gp_model_observe(mk, Xn, Yn, 2, &err), GP_OK);
    assert_int_equal(gp_model_observe(mg, Xn, Yn, 2, &err), GP_OK);
    assert_int_equal(mk->coreg.kronecker, 1);
    tu_assert_close(mk->diag.objective, mg->diag.objective, 1e-9, 0.0, "observed LML");
    for (int t = 0; t < 2; t++) {
        gp_prediction out = {.mean = mean[t], .variance = var[t]};
        assert_int_equal(gp_model_predict(ms[t], &pr, &out, &err), GP_OK);
    }
    tu_assert_close_array(mean[0], mean[1], 12, 1e-9, 1e-12, "observed mean");
    tu_assert_close_array(var[0], var[1], 12, 1e-9, 1e-12, "observed variance");
    double Yh[4] = {0.1, NAN, 0.3, 0.2};
    assert_int_equal(gp_model_observe(mk, Xn, Yh, 1, &err), GP_OK);
    assert_int_equal(mk->coreg.kronecker, 0);
    assert_int_equal(mk->coreg.n_observed, 30 * 4 + 8 + 3);
    gp_state_free(&st);
    gp_model_free(back);
    free(x);
    free(gk);
    free(gg);
    free(xk);
    gp_model_free(mk);
    gp_model_free(mg);
    gp_kernel_free(k);
}

/* ---- ICM with one output is the single-output GP ---- */

static void test_icm_one_output_is_exact(void **state)
{
    (void)state;
    size_t n = 30, d = 1;
    double X[30], y[30];
    make_data(n, d, 1, 0.0, 14, X, y);
    gp_kernel *k = rbf(d, 0);
    coreg_opt o;
    opt_make(&o, "icm", 1, 0, 0, NULL, 1);
    gp_fit_request req;
    request(&req, X, y, n, d, 1, k, &o);
    gp_model *mc = fit_ok(&req);
    struct gp_coreg_exact *ce = gp_exact_coreg(mc);
    assert_int_equal(gp_coreg_exact_dim(ce), 3); /* lengthscale, W, noise */
    double ls = log(0.7), w = 1.3, s2 = 0.05;
    double x[3] = {ls, w, log(s2)}; /* noise = floor + s2, read back below */
    gp_error err;
    double lml_c;
    assert_int_equal(gp_coreg_exact_eval(ce, x, 0, &lml_c, NULL, &err), GP_OK);
    assert_int_equal(gp_coreg_exact_set(mc, ce, x, &err), GP_OK);
    double noise = mc->coreg.noise[0];
    /* the single-output GP at variance w^2, the same lengthscale and noise */
    gp_kernel *ks = rbf(d, 0);
    ks->log_variance = 2.0 * log(w);
    ks->log_lengthscale[0] = ls;
    ks->fixed = GP_FIX_ALL;
    gp_fit_request rs;
    memset(&rs, 0, sizeof rs);
    rs.X = X, rs.y = y, rs.n = n, rs.d = d, rs.kernel = ks, rs.standardize = 1;
    rs.noise_given = 1, rs.noise_fixed = 1, rs.noise_variance = noise;
    gp_model *ms = NULL;
    assert_int_equal(gp_model_fit(&gp_method_exact, &rs, &ms, &err), GP_OK);
    tu_assert_close(mc->diag.objective, ms->diag.objective, 1e-10, 0.0, "LML");
    double Xs[4] = {-1.5, 0.1, 0.2, 2.5}, m1[4], v1[4], m2[4], v2[4];
    gp_predict_request pr = {.X = Xs, .m = 4, .d = 1, .include_noise = 1};
    gp_prediction o1 = {.mean = m1, .variance = v1}, o2 = {.mean = m2, .variance = v2};
    assert_int_equal(gp_model_predict(mc, &pr, &o1, &err), GP_OK);
    assert_int_equal(gp_model_predict(ms, &pr, &o2, &err), GP_OK);
    tu_assert_close_array(m1, m2, 4, 1e-10, 1e-12, "mean");
    tu_assert_close_array(v1, v2, 4, 1e-10, 1e-12, "variance");
    gp_model_free(mc);
    gp_model_free(ms);
    gp_kernel_free(k);
    gp_kernel_free(ks);
}

/* ---- B diagonal (W = 0): independent GPs ---- */

static void test_diagonal_b_is_independent(void **state)
{
    (void)state;
    size_t n = 24, d = 1, p = 2;
    double X[24], y[48];
    make_data(n, d, p, 0.3, 15, X, y);
    gp_kernel *k = rbf(d, 0);
    coreg_opt o;
    opt_make(&o, "icm", 1, 0, 1, NULL, 1);
    gp_fit_request req;
    request(&req, X, y, n, d, p, k, &o);
    /* unstandardised: a fit on one output's rows alone would scale X by
     * their own spread */
    req.standardize = 0;
    gp_model *mc = fit_ok(&req);
    struct gp_coreg_exact *ce = gp_exact_coreg(mc);
    size_t dim = gp_coreg_exact_dim(ce); /* ls, W (2), log kappa (2), noise (2) */
    assert_int_equal(dim, 7);
    double x[7] = {log(0.8), 0.0, 0.0, log(0.9), log(1.4), log(0.03), log(0.08)};
    gp_error err;
    assert_int_equal(gp_coreg_exact_set(mc, ce, x, &err), GP_OK);
    double Xs[3] = {-1.0, 0.5, 1.7};
    double mean[6], var[6];
    gp_predict_request pr = {.X = Xs, .m = 3, .d = 1};
    gp_prediction out = {.mean = mean, .variance = var};
    assert_int_equal(gp_model_predict(mc, &pr, &out, &err), GP_OK);
    for (size_t j = 0; j < p; j++) {
        double Xj[24], yj[24];
        size_t nj = 0;
        for (size_t i = 0; i < n; i++)
            if (!isnan(y[j * n + i])) {
                Xj[nj] = X[i];
                yj[nj++] = y[j * n + i];
            }
        gp_kernel *ks = rbf(d, 0);
        ks->log_variance = x[3 + j];
        ks->log_lengthscale[0] = x[0];
        ks->fixed = GP_FIX_ALL;
        gp_fit_request rs;
        memset(&rs, 0, sizeof rs);
        rs.X = Xj, rs.y = yj, rs.n = nj, rs.d = d, rs.kernel = ks, rs.standardize = 0;
        rs.noise_given = 1, rs.noise_fixed = 1, rs.noise_variance = mc->coreg.noise[j];
        gp_model *ms = NULL;
        assert_int_equal(gp_model_fit(&gp_method_exact, &rs, &ms, &err), GP_OK);
        double m1[3], v1[3];
        gp_prediction o1 = {.mean = m1, .variance = v1};
        assert_int_equal(gp_model_predict(ms, &pr, &o1, &err), GP_OK);
        tu_assert_close_array(mean + j * 3, m1, 3, 1e-9, 1e-12, "mean");
        tu_assert_close_array(var + j * 3, v1, 3, 1e-9, 1e-12, "variance");
        gp_model_free(ms);
        gp_kernel_free(ks);
    }
    gp_model_free(mc);
    gp_kernel_free(k);
}

/* ---- persistence, observe, batch invariance ---- */

static void predict_all(const gp_model *model, const double *Xs, size_t m, size_t d, size_t p,
                        double *mean, double *var)
{
    gp_error err;
    gp_predict_request pr = {.X = Xs, .m = m, .d = d, .include_noise = 1};
    gp_prediction out = {.mean = mean, .variance = var};
    (void)p;
    if (gp_model_predict(model, &pr, &out, &err))
        fail_msg("predict: %s", err.message);
}

static void test_export_import_identical(void **state)
{
    (void)state;
    size_t n = 20, d = 2, p = 3;
    double X[40], y[60], Xs[10] = {0.1, -0.4, 1.2, 0.3, -1.0, 0.9, 0.2, 0.5, 1.1, -0.7};
    make_data(n, d, p, 0.4, 16, X, y);
    gp_kernel *k = rbf(d, 1);
    coreg_opt o;
    opt_make(&o, "lmc", 0, 2, 1, NULL, 5);
    gp_fit_request req;
    request(&req, X, y, n, d, p, k, &o);
    gp_model *model = fit_ok(&req), *back = NULL;
    gp_state st;
    gp_state_init(&st);
    gp_error err;
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    assert_int_equal(gp_state_check_finite(&st, &err), GP_OK);
    assert_int_equal(gp_model_import(&gp_method_exact, &st, &back, &err), GP_OK);
    double m1[15], v1[15], m2[15], v2[15];
    predict_all(model, Xs, 5, d, p, m1, v1);
    predict_all(back, Xs, 5, d, p, m2, v2);
    assert_memory_equal(m1, m2, sizeof m1);
    assert_memory_equal(v1, v2, sizeof v1);
    assert_int_equal(back->coreg.type, GP_COREG_LMC);
    assert_int_equal(back->coreg.n_observed, model->coreg.n_observed);
    /* samples: the same seed, the same draws; shape m x n_samples x p */
    double s1[5 * 4 * 3], s2[5 * 4 * 3];
    gp_sample_request sr = {.X = Xs, .m = 5, .d = d, .n_samples = 4, .seed = 9};
    assert_int_equal(gp_model_sample(model, &sr, s1, &err), GP_OK);
    assert_int_equal(gp_model_sample(back, &sr, s2, &err), GP_OK);
    assert_memory_equal(s1, s2, sizeof s1);
    /* a point alone gets the bits it gets among others */
    double ma[3], va[3];
    double Xone[2] = {Xs[2], Xs[7]};
    predict_all(model, Xone, 1, d, p, ma, va);
    for (size_t j = 0; j < p; j++) {
        assert_memory_equal(&ma[j], &m1[j * 5 + 2], sizeof(double));
        assert_memory_equal(&va[j], &v1[j * 5 + 2], sizeof(double));
    }
    gp_state_free(&st);
    gp_model_free(model);
    gp_model_free(back);
    gp_kernel_free(k);
}

static void test_observe_equals_refit(void **state)
{
    (void)state;
    size_t n = 26, k_new = 6, n0 = n - k_new, d = 1, p = 2;
    double X[26], y[52], Xs[3] = {-1.1, 0.4, 1.6};
    make_data(n, d, p, 0.4, 17, X, y);
    gp_kernel *k = rbf(d, 0);
    coreg_opt o;
    opt_make(&o, "icm", 1, 0, 1, NULL, 5);
    /* the first n0 rows (own column-major copies) */
    double X0[20], y0[40], Xk[6], yk[12];
    for (size_t i = 0; i < n0; i++) {
        X0[i] = X[i];
        for (size_t j = 0; j < p; j++)
            y0[j * n0 + i] = y[j * n + i];
    }
    for (size_t i = 0; i < k_new; i++) {
        Xk[i] = X[n0 + i];
        for (size_t j = 0; j < p; j++)
            yk[j * k_new + i] = y[j * n + n0 + i];
    }
    gp_fit_request req;
    request(&req, X0, y0, n0, d, p, k, &o);
    /* observe keeps the fit's standardisation and noise floor: both models
     * unstandardised, with a held noise */
    req.standardize = 0;
    req.noise_given = req.noise_fixed = 1;
    req.noise_variance = 0.02;
    gp_model *a = fit_ok(&req);
    gp_error err;
    assert_int_equal(gp_model_observe(a, Xk, yk, k_new, &err), GP_OK);
    assert_int_equal(a->n_train, n);
    request(&req, X, y, n, d, p, k, &o);
    req.standardize = 0;
    req.noise_given = req.noise_fixed = 1;
    req.noise_variance = 0.02;
    gp_model *b = fit_ok(&req);
    struct gp_coreg_exact *cb = gp_exact_coreg(b);
    double *x = malloc(gp_coreg_exact_dim(cb) * sizeof *x);
    gp_coreg_exact_pack(gp_exact_coreg(a), x);
    assert_int_equal(gp_coreg_exact_set(b, cb, x, &err), GP_OK);
    double ma[6], va[6], mb[6], vb[6];
    predict_all(a, Xs, 3, d, p, ma, va);
    predict_all(b, Xs, 3, d, p, mb, vb);
    tu_assert_close_array(ma, mb, 6, 1e-9, 1e-12, "mean");
    tu_assert_close_array(va, vb, 6, 1e-9, 1e-12, "variance");
    tu_assert_close(a->diag.objective, b->diag.objective, 1e-9, 0.0, "LML");
    /* a row with every output missing is refused, the model unchanged */
    double bad_y[2] = {NAN, NAN}, bad_x[1] = {0.3};
    assert_int_equal(gp_model_observe(a, bad_x, bad_y, 1, &err), GP_EDATA);
    assert_string_equal(err.field, "y[0]");
    assert_int_equal(a->n_train, n);
    free(x);
    gp_model_free(a);
    gp_model_free(b);
    gp_kernel_free(k);
}

/* ---- GPyTorch 1.8.1 (tests/fixtures/make_coreg_fixture.py) ---- */

static void test_gpytorch_fixture(void **state)
{
    (void)state;
    char path[512];
    gp_fixture fx;
    gp_error err;
    assert_int_equal(gp_fixture_path(path, sizeof path, "coreg_gpytorch.txt", &err), GP_OK);
    if (gp_fixture_load(path, &fx, &err))
        fail_msg("%s", err.message);
    const gp_fixture_block *bX = gp_fixture_find(&fx, "X"), *by = gp_fixture_find(&fx, "y");
    const gp_fixture_block *bp = gp_fixture_find(&fx, "params"), *bl = gp_fixture_find(&fx, "lml");
    const gp_fixture_block *bs = gp_fixture_find(&fx, "Xs"), *bm = gp_fixture_find(&fx, "mean");
    const gp_fixture_block *bv = gp_fixture_find(&fx, "var");
    assert_true(bX && by && bp && bl && bs && bm && bv);
    const gp_fixture_block *bo = gp_fixture_find(&fx, "observed");
    assert_non_null(bo);
    /* y and observed n x p; NaN where missing */
    size_t n = bX->rows, p = by->cols, m = bs->rows;
    double *y = malloc(n * p * sizeof *y);
    for (size_t i = 0; i < n * p; i++)
        y[i] = bo->data[i] != 0.0 ? by->data[i] : NAN;
    gp_kernel *k = rbf(1, 0);
    coreg_opt o;
    opt_make(&o, "icm", 1, 0, 1, "general", 1);
    gp_fit_request req;
    request(&req, bX->data, y, n, 1, p, k, &o);
    req.standardize = 0;
    gp_model *model = fit_ok(&req);
    struct gp_coreg_exact *ce = gp_exact_coreg(model);
    size_t dim = gp_coreg_exact_dim(ce);
    assert_int_equal(dim, 1 + p + p + p);
    /* params: lengthscale, W (p), kappa (p), noise (p), natural units */
    double *x = malloc(dim * sizeof *x);
    x[0] = log(bp->data[0]);
    for (size_t j = 0; j < p; j++) {
        x[1 + j] = bp->data[1 + j];
        x[1 + p + j] = log(bp->data[1 + p + j]);
        /* the noise coordinate is s = floor + e^x, the floor 1e-8 of the
         * output's power (unstandardised: its observed values' mean square) */
        double pw = 0.0;
        size_t c = 0;
        for (size_t i = 0; i < n; i++)
            if (!isnan(y[j * n + i])) {
                pw += y[j * n + i] * y[j * n + i];
                c++;
            }
        x[1 + 2 * p + j] = log(bp->data[1 + 2 * p + j] - 1e-8 * pw / (double)c);
    }
    assert_int_equal(gp_coreg_exact_set(model, ce, x, &err), GP_OK);
    double lml;
    assert_int_equal(gp_coreg_exact_eval(ce, x, 0, &lml, NULL, &err), GP_OK);
    tu_assert_close(lml, bl->data[0], 1e-9, 0.0, "LML vs GPyTorch");
    double *mean = malloc(m * p * sizeof *mean), *var = malloc(m * p * sizeof *var);
    gp_predict_request pr = {.X = bs->data, .m = m, .d = 1};
    gp_prediction out = {.mean = mean, .variance = var};
    assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_OK);
    tu_assert_close_array(mean, bm->data, m * p, 1e-9, 1e-12, "mean vs GPyTorch");
    tu_assert_close_array(var, bv->data, m * p, 1e-8, 1e-12, "latent variance vs GPyTorch");
    free(x);
    free(y);
    free(mean);
    free(var);
    gp_fixture_free(&fx);
    gp_model_free(model);
    gp_kernel_free(k);
}

/* ---- progress and cancellation ---- */

static int stop_at_second(void *ctx, int iteration, int max_iterations, double objective)
{
    int *calls = ctx;
    (void)iteration;
    assert_true(isfinite(objective));
    assert_int_equal(max_iterations, 50);
    return ++*calls >= 2;
}

static void test_progress_and_cancel(void **state)
{
    (void)state;
    size_t n = 20, d = 1, p = 2;
    double X[20], y[40];
    make_data(n, d, p, 0.3, 19, X, y);
    gp_kernel *k = rbf(d, 0);
    coreg_opt o;
    opt_make(&o, "lmc", 1, 2, 1, NULL, 50);
    gp_fit_request req;
    request(&req, X, y, n, d, p, k, &o);
    int calls = 0;
    req.progress = stop_at_second;
    req.progress_ctx = &calls;
    gp_model *model = NULL;
    gp_error err;
    assert_int_equal(gp_model_fit(&gp_method_exact, &req, &model, &err), GP_ECANCELLED);
    assert_null(model);
    assert_int_equal(calls, 2);
    gp_kernel_free(k);
}

/* ---- bad input, each refusal naming its field ---- */

static void expect_refusal(gp_fit_request *req, int code, const char *field)
{
    gp_model *model = NULL;
    gp_error err;
    int rc = gp_model_fit(&gp_method_exact, req, &model, &err);
    if (rc != code || strcmp(err.field, field) != 0)
        fail_msg("want %d naming %s, got %d naming %s (%s)", code, field, rc, err.field,
                 err.message);
    assert_null(model);
}

static void test_bad_input(void **state)
{
    (void)state;
    size_t n = 10, d = 1, p = 2;
    double X[10], y[20];
    make_data(n, d, p, 0.0, 18, X, y);
    gp_kernel *k = rbf(d, 0);
    coreg_opt o;
    gp_fit_request req;
    opt_make(&o, "icm", 3, 0, 1, NULL, 1);
    request(&req, X, y, n, d, p, k, &o);
    expect_refusal(&req, GP_EINVAL, "options.coregionalization.rank");
    opt_make(&o, "icm", 1, 2, 1, NULL, 1);
    expect_refusal(&req, GP_EINVAL, "options.coregionalization.latents");
    opt_make(&o, "lmc", 1, 9, 1, NULL, 1);
    expect_refusal(&req, GP_EINVAL, "options.coregionalization.latents");
    opt_make(&o, "mlp", 1, 0, 1, NULL, 1);
    expect_refusal(&req, GP_EINVAL, "options.coregionalization.type");
    opt_make(&o, "icm", 1, 0, 1, "fast", 1);
    expect_refusal(&req, GP_EINVAL, "options.coregionalization.solver");
    /* kronecker forced on heterotopic data */
    opt_make(&o, "icm", 1, 0, 1, "kronecker", 1);
    y[3] = NAN;
    expect_refusal(&req, GP_EINVAL, "options.coregionalization.solver");
    opt_make(&o, "lmc", 1, 2, 1, "kronecker", 1);
    y[3] = 1.0;
    expect_refusal(&req, GP_EINVAL, "options.coregionalization.solver");
    /* a row with every output missing; an output never observed; Inf */
    opt_make(&o, "icm", 1, 0, 1, NULL, 1);
    y[4] = y[n + 4] = NAN;
    expect_refusal(&req, GP_EDATA, "y[4]");
    y[4] = y[n + 4] = 0.5;
    double keep[10];
    memcpy(keep, y + n, sizeof keep);
    for (size_t i = 0; i < n; i++)
        y[n + i] = NAN;
    expect_refusal(&req, GP_EDATA, "y");
    memcpy(y + n, keep, sizeof keep);
    y[n + 2] = INFINITY;
    expect_refusal(&req, GP_EDATA, "y[2][1]");
    y[n + 2] = 0.25;
    /* several outputs without the option; NaN without it */
    req.n_options = 0;
    expect_refusal(&req, GP_EUNSUPPORTED, "y");
    req.n_outputs = 1;
    y[1] = NAN;
    expect_refusal(&req, GP_EDATA, "y[1]");
    y[1] = 0.1;
    req.n_outputs = p;
    req.n_options = 2;
    /* what a coregionalised fit does not take yet */
    req.mean = GP_MEAN_CONSTANT;
    expect_refusal(&req, GP_EUNSUPPORTED, "mean");
    req.mean = GP_MEAN_ZERO;
    double r[10] = {0};
    req.noise_per_point = r;
    expect_refusal(&req, GP_EUNSUPPORTED, "noise.per_point");
    req.noise_per_point = NULL;
    /* more outputs than the maximum */
    size_t big = GP_COREG_MAX_OUTPUTS + 1;
    double *yb = malloc(n * big * sizeof *yb);
    for (size_t i = 0; i < n * big; i++)
        yb[i] = sin((double)i);
    req.y = yb;
    req.n_outputs = big;
    expect_refusal(&req, GP_EDATA, "y");
    free(yb);
    req.y = y;
    req.n_outputs = p;
    /* the cap on the matrices: M x M on the general path, N x N on the
     * Kronecker path (isotopic ICM) */
    req.max_train_points = 15;
    opt_make(&o, "icm", 1, 0, 1, "general", 1);
    expect_refusal(&req, GP_ETOOBIG, "X");
    opt_make(&o, "icm", 1, 0, 1, NULL, 1);
    {
        gp_model *mk = NULL;
        gp_error e2;
        req.max_train_points = 10;
        assert_int_equal(gp_model_fit(&gp_method_exact, &req, &mk, &e2), GP_OK);
        assert_int_equal(mk->coreg.kronecker, 1);
        gp_model_free(mk);
        req.max_train_points = 0;
    }
    /* the option on a method that does not take it */
    req.y = y;
    req.n_outputs = p;
    gp_model *model = NULL;
    gp_error err;
    assert_int_equal(gp_model_fit(gp_method_find("ssgp"), &req, &model, &err), GP_EINVAL);
    assert_string_equal(err.field, "options.coregionalization");
    gp_kernel_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gradient_general_heterotopic),
        cmocka_unit_test(test_gradient_kronecker),
        cmocka_unit_test(test_kronecker_equals_general),
        cmocka_unit_test(test_icm_one_output_is_exact),
        cmocka_unit_test(test_diagonal_b_is_independent),
        cmocka_unit_test(test_export_import_identical),
        cmocka_unit_test(test_observe_equals_refit),
        cmocka_unit_test(test_gpytorch_fixture),
        cmocka_unit_test(test_progress_and_cancel),
        cmocka_unit_test(test_bad_input),
    };
    return cmocka_run_group_tests_name("coreg", tests, NULL, NULL);
}
