/* Known per-point noise in svgp, ssgp and renyi (the second half of
 * tests/unit/test_per_point_noise.c): each objective's gradient (the noise's
 * included) against central differences; the same noise c on every row
 * equals the homoscedastic objective at s + c; ssgp's LML and fitted
 * posterior against a dense computation of its weight-space model, and its
 * observe with the rows' noise against a fit of all rows; renyi at a = 0
 * against the exact LML; svgp's minibatch path keeps each row's noise with
 * its row; the refusals. */
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

#include "core/features/rff.h"
#include "core/kernel/lml.h"
#include "core/methods/registry.h"
#include "core/methods/renyi/renyi.h"
#include "core/methods/ssgp/internal.h"
#include "core/methods/svgp/svgp.h"
#include "core/model/model.h"
#include "tests/unit/testutil.h"

#define LOG_2PI_ 1.8378770664093454836

static gp_kernel *rbf(size_t d, double var, double ls)
{
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, d, 0, NULL, 0, &err), GP_OK);
    double th[2] = {log(var), log(ls)};
    gp_kernel_set_params(k, th);
    return k;
}

static void noise_rows(double *r, size_t n)
{
    for (size_t i = 0; i < n; i++)
        r[i] = 0.002 + 0.07 * (double)(i % 7) / 6.0;
}

/* ---- svgp ---- */

typedef struct svgp_fd {
    gp_kernel *k;
    const double *X, *y, *r, *Z, *Lq;
    size_t n, m, np;
    double *mq;
} svgp_fd;

static double svgp_elbo_at(const svgp_fd *c, double s2, const double *r, gp_svgp_grad *g)
{
    gp_quadrature q;
    gp_error err;
    assert_int_equal(gp_quadrature_init(&q, GP_LIK_QUADRATURE_POINTS, &err), GP_OK);
    gp_lik lik = {GP_LIK_GAUSSIAN, s2};
    gp_svgp_terms t;
    if (gp_svgp_elbo_noise(c->k, &lik, &q, c->X, c->n, c->y, r, c->Z, c->m, c->mq, c->Lq, &t, g,
                           &err) != GP_OK)
        fail_msg("svgp elbo: %s", err.message);
    return t.elbo;
}

/* x = (kernel log-parameters, log s2, m) */
static double svgp_value(void *ctx, const double *x)
{
    svgp_fd *c = ctx;
    gp_kernel_set_params(c->k, x);
    memcpy(c->mq, x + c->np + 1, c->m * sizeof *c->mq);
    return svgp_elbo_at(c, exp(x[c->np]), c->r, NULL);
}

static void svgp_case(svgp_fd *c, double *X, double *y, double *r, double *Z, double *mq,
                      double *Lq, size_t n, size_t m)
{
    tu_random_problem(n, 2, 11, X, y);
    noise_rows(r, n);
    for (size_t j = 0; j < m; j++) {
        Z[2 * j] = X[2 * (3 * j)] + 0.05;
        Z[2 * j + 1] = X[2 * (3 * j) + 1] - 0.05;
        mq[j] = 0.3 * sin((double)j);
    }
    memset(Lq, 0, m * m * sizeof *Lq);
    for (size_t j = 0; j < m; j++) {
        Lq[j + j * m] = 0.5 + 0.05 * (double)j;
        if (j + 1 < m)
            Lq[j + 1 + j * m] = 0.1;
    }
    *c = (svgp_fd){rbf(2, 1.3, 0.9), X, y, r, Z, Lq, n, m, 0, mq};
    c->np = gp_kernel_n_params(c->k);
}

static void test_svgp_gradient(void **state)
{
    (void)state;
    enum { N = 24, M = 6 };
    double X[2 * N], y[N], r[N], Z[2 * M], mq[M], Lq[M * M], x[3 + M], gt[3], gm[M];
    svgp_fd c;
    svgp_case(&c, X, y, r, Z, mq, Lq, N, M);
    assert_int_equal(c.np, 2);
    gp_kernel_get_params(c.k, x);
    x[2] = log(0.03);
    memcpy(x + 3, mq, M * sizeof *mq);
    gp_svgp_grad g = {gt, NULL, gm, NULL};
    svgp_elbo_at(&c, exp(x[2]), r, &g);
    double an[3 + M];
    memcpy(an, gt, 3 * sizeof *an);
    memcpy(an + 3, gm, M * sizeof *gm);
    tu_fd_spec spec = {1e-5, 1e-5, 1e-6, 1.0, 0};
    tu_check_gradient(svgp_value, &c, x, 3 + M, an, spec, NULL, "svgp ELBO with per-point noise");
    gp_kernel_free(c.k);
}

/* The same known noise c on every row is the homoscedastic ELBO at s2 + c;
 * the noise gradient is then scaled by s2 / (s2 + c) (chain rule). */
static void test_svgp_constant_noise(void **state)
{
    (void)state;
    enum { N = 24, M = 6 };
    double X[2 * N], y[N], r[N], Z[2 * M], mq[M], Lq[M * M], gt[3], gh[3];
    svgp_fd c;
    svgp_case(&c, X, y, r, Z, mq, Lq, N, M);
    double s2 = 0.03, c0 = 0.011;
    for (size_t i = 0; i < N; i++)
        r[i] = c0;
    gp_svgp_grad g = {gt, NULL, NULL, NULL}, h = {gh, NULL, NULL, NULL};
    double e1 = svgp_elbo_at(&c, s2, r, &g), e2 = svgp_elbo_at(&c, s2 + c0, NULL, &h);
    tu_assert_close(e1, e2, 1e-12, 0.0, "ELBO, constant noise vs s2 + c");
    tu_assert_close(gt[2], gh[2] * s2 / (s2 + c0), 1e-10, 1e-12, "d/dlog s2");
    gp_kernel_free(c.k);
}

/* A fit of sin(x) where every third row is an outlier (y + 4) that its known
 * noise (1e4) marks as such: the minibatch path must carry each row's noise
 * with its row through the shuffle, or the outliers pull the mean. */
static void test_svgp_adam_rows_keep_noise(void **state)
{
    (void)state;
    enum { N = 120, T = 25 };
    double X[N], y[N], r[N], Xs[T], mu[T], var[T];
    for (size_t i = 0; i < N; i++) {
        X[i] = -3.0 + 6.0 * (double)i / (N - 1);
        int out = i % 3 == 0;
        y[i] = sin(X[i]) + (out ? 4.0 : 0.0);
        r[i] = out ? 1e4 : 0.0;
    }
    for (size_t j = 0; j < T; j++)
        Xs[j] = -2.5 + 5.0 * (double)j / (T - 1);
    gp_kernel *k = rbf(1, 1.0, 1.0);
    k->fixed = GP_FIX_ALL;
    gp_option_value opts[] = {{"optimizer", 0, "adam", NULL},
                              {"batch_size", 16, NULL, NULL},
                              {"epochs", 60, NULL, NULL},
                              {"natgrad_step", 0.5, NULL, NULL},
                              {"inducing", 15, NULL, NULL}};
    gp_fit_request req = {.X = X, .y = y, .n = N, .d = 1, .kernel = k, .noise_given = 1,
                          .noise_fixed = 1, .noise_variance = 1e-3, .noise_per_point = r,
                          .seed = 3, .options = opts, .n_options = 5};
    gp_model *model = NULL;
    gp_error err;
    if (gp_model_fit(gp_method_find("svgp"), &req, &model, &err) != GP_OK)
        fail_msg("svgp fit: %s", err.message);
    assert_true(model->per_point_noise);
    gp_predict_request pr = {.X = Xs, .m = T, .d = 1};
    gp_prediction out = {.mean = mu, .variance = var};
    assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_OK);
    double worst = 0.0;
    for (size_t j = 0; j < T; j++)
        worst = fmax(worst, fabs(mu[j] - sin(Xs[j])));
    if (!(worst < 0.1))
        fail_msg("svgp adam with marked outliers: max |mean - sin x| = %g", worst);
    gp_model_free(model);
    gp_kernel_free(k);
}

/* ---- ssgp ---- */

/* The dense LML of y under Phi Phi^T + diag(s + r). */
static double dense_lml(const double *Phi, size_t n, size_t m, const double *y, double s,
                        const double *r)
{
    double *C = calloc(n * n, sizeof *C), *z = malloc(n * sizeof *z);
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (int)n, (int)m, 1.0, Phi, (int)n, 0.0,
                C, (int)n);
    for (size_t i = 0; i < n; i++)
        C[i * n + i] += s + r[i];
    assert_int_equal(LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (int)n, C, (int)n), 0);
    memcpy(z, y, n * sizeof *z);
    cblas_dtrsv(CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, (int)n, C, (int)n, z, 1);
    double v = -0.5 * cblas_ddot((int)n, z, 1, z, 1) - 0.5 * (double)n * LOG_2PI_;
    for (size_t i = 0; i < n; i++)
        v -= log(C[i * n + i]);
    free(C);
    free(z);
    return v;
}

typedef struct rff_fd {
    gp_rff_problem p;
    gp_rff_work *w;
    const double *r;
    double *omega;
    size_t d, R;
} rff_fd;

/* x = (log a2, log l (d), log s, omega (R d)) */
static double rff_value(void *ctx, const double *x)
{
    rff_fd *c = ctx;
    c->p.log_amplitude2 = x[0];
    memcpy((double *)c->p.log_ls, x + 1, c->d * sizeof *x);
    c->p.log_noise = x[1 + c->d];
    memcpy(c->omega, x + 2 + c->d, c->R * c->d * sizeof *x);
    double lml;
    gp_error err;
    assert_int_equal(gp_rff_lml_noise(&c->p, c->r, c->w, &lml, NULL, &err), GP_OK);
    return lml;
}

static void test_ssgp_lml_dense_and_gradient(void **state)
{
    (void)state;
    enum { N = 40, D = 2, R = 5 };
    double X[N * D], y[N], r[N], omega[R * D], log_ls[D] = {log(0.8), log(1.2)};
    tu_random_problem_colmajor(N, D, 5, X, y);
    noise_rows(r, N);
    gp_rng rng;
    gp_rng_seed(&rng, 9);
    for (size_t i = 0; i < R * D; i++)
        omega[i] = gp_rng_normal(&rng);
    rff_fd c = {{X, y, N, D, R, omega, log_ls, log(1.4), log(0.02), NULL}, NULL, r, omega, D, R};
    gp_error err;
    assert_int_equal(gp_rff_work_new(N, D, R, &c.w, &err), GP_OK);
    double lml, g_amp, g_noise, g_ls[D], g_om[R * D];
    gp_rff_grad g = {g_om, g_ls, &g_amp, &g_noise};
    assert_int_equal(gp_rff_lml_noise(&c.p, r, c.w, &lml, &g, &err), GP_OK);
    /* dense: Phi from the same features */
    double Phi[N * 2 * R], inv[D] = {1.0 / 0.8, 1.0 / 1.2};
    assert_int_equal(gp_rff_features(X, N, D, inv, omega, R, 1.4, Phi, N), GP_OK);
    tu_assert_close(lml, dense_lml(Phi, N, 2 * R, y, 0.02, r), 1e-10, 0.0,
                    "rff LML with per-point noise vs dense");
    double x[2 + D + R * D], an[2 + D + R * D];
    x[0] = log(1.4), x[1] = log_ls[0], x[2] = log_ls[1], x[3] = log(0.02);
    memcpy(x + 4, omega, R * D * sizeof *x);
    an[0] = g_amp, an[1] = g_ls[0], an[2] = g_ls[1], an[3] = g_noise;
    memcpy(an + 4, g_om, R * D * sizeof *an);
    tu_fd_spec spec = {1e-6, 1e-5, 1e-6, 1.0, 0};
    tu_check_gradient(rff_value, &c, x, 2 + D + R * D, an, spec, NULL,
                      "rff LML with per-point noise");
    gp_rff_work_free(c.w);
}

/* ssgp fit, kernel and noise fixed: its posterior is the weight-space one,
 * Sigma = (Phi^T Lambda^{-1} Phi + I)^{-1}, mean Sigma Phi^T Lambda^{-1} y. */
static gp_fit_request ssgp_request(const double *X, const double *y, const double *r, size_t n,
                                   gp_kernel *k, const gp_option_value *opts)
{
    gp_fit_request req = {.X = X, .y = y, .n = n, .d = 2, .kernel = k, .noise_given = 1,
                          .noise_fixed = 1, .noise_variance = 0.02, .noise_per_point = r,
                          .seed = 4, .options = opts, .n_options = 1, .standardize = 0};
    return req;
}

static void weight_posterior(const double *Phi, size_t n, size_t m, const double *y,
                             const double *lam, const double *phs, size_t t, double *mu,
                             double *var)
{
    double *P = calloc(m * m, sizeof *P), *b = calloc(m, sizeof *b), *v = malloc(m * sizeof *v);
    for (size_t i = 0; i < n; i++)
        for (size_t a = 0; a < m; a++) {
            b[a] += Phi[a * n + i] * y[i] / lam[i];
            for (size_t c = 0; c < m; c++)
                P[a * m + c] += Phi[a * n + i] * Phi[c * n + i] / lam[i];
        }
    for (size_t a = 0; a < m; a++)
        P[a * m + a] += 1.0;
    assert_int_equal(LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (int)m, P, (int)m), 0);
    assert_int_equal(LAPACKE_dpotrs(LAPACK_COL_MAJOR, 'L', (int)m, 1, P, (int)m, b, (int)m), 0);
    for (size_t j = 0; j < t; j++) {
        for (size_t a = 0; a < m; a++)
            v[a] = phs[a * t + j];
        mu[j] = cblas_ddot((int)m, v, 1, b, 1);
        cblas_dtrsv(CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, (int)m, P, (int)m, v,
                    1);
        var[j] = cblas_ddot((int)m, v, 1, v, 1);
    }
    free(P);
    free(b);
    free(v);
}

static void test_ssgp_weight_space(void **state)
{
    (void)state;
    enum { N = 40, T = 9, R = 6 };
    double X[N * 2], y[N], r[N], lam[N], Xs[T * 2], mu[T], var[T], mu2[T], var2[T];
    tu_random_problem_colmajor(N, 2, 6, X, y);
    tu_random_problem_colmajor(T, 2, 8, Xs, mu2);
    noise_rows(r, N);
    gp_kernel *k = rbf(2, 1.1, 0.9);
    k->fixed = GP_FIX_ALL;
    gp_option_value opts[] = {{"features", R, NULL, NULL}};
    gp_fit_request req = ssgp_request(X, y, r, N, k, opts);
    gp_model *model = NULL;
    gp_error err;
    if (gp_model_fit(gp_method_find("ssgp"), &req, &model, &err) != GP_OK)
        fail_msg("ssgp fit: %s", err.message);
    const ssgp_impl *im = model->impl;
    double Phi[N * 2 * R], Ps[T * 2 * R], inv[2] = {1.0 / 0.9, 1.0 / 0.9};
    assert_int_equal(gp_rff_features(X, N, 2, inv, im->omega, R, 1.1, Phi, N), GP_OK);
    assert_int_equal(gp_rff_features(Xs, T, 2, inv, im->omega, R, 1.1, Ps, T), GP_OK);
    for (size_t i = 0; i < N; i++)
        lam[i] = 0.02 + r[i];
    weight_posterior(Phi, N, 2 * R, y, lam, Ps, T, mu2, var2);
    gp_predict_request pr = {.X = Xs, .m = T, .d = 2};
    gp_prediction out = {.mean = mu, .variance = var};
    assert_int_equal(gp_model_predict(model, &pr, &out, &err), GP_OK);
    for (size_t j = 0; j < T; j++) {
        tu_assert_close(mu[j], mu2[j], 1e-9, 1e-12, "ssgp mean[%zu] vs weight space", j);
        tu_assert_close(var[j], var2[j], 1e-9, 1e-14, "ssgp variance[%zu] vs weight space", j);
    }
    tu_assert_close(model->diag.objective, dense_lml(Phi, N, 2 * R, y, 0.02, r), 1e-10, 0.0,
                    "ssgp LML vs dense");
    /* The same noise c on every row: the homoscedastic fit at s + c. */
    double rc_[N];
    for (size_t i = 0; i < N; i++)
        rc_[i] = 0.013;
    gp_model *a = NULL, *b = NULL;
    req.noise_per_point = rc_;
    assert_int_equal(gp_model_fit(gp_method_find("ssgp"), &req, &a, &err), GP_OK);
    req.noise_per_point = NULL;
    req.noise_variance = 0.033;
    assert_int_equal(gp_model_fit(gp_method_find("ssgp"), &req, &b, &err), GP_OK);
    assert_int_equal(gp_model_predict(a, &pr, &out, &err), GP_OK);
    gp_prediction out2 = {.mean = mu2, .variance = var2};
    assert_int_equal(gp_model_predict(b, &pr, &out2, &err), GP_OK);
    for (size_t j = 0; j < T; j++) {
        tu_assert_close(mu[j], mu2[j], 1e-10, 1e-13, "constant noise mean[%zu]", j);
        tu_assert_close(var[j], var2[j], 1e-10, 1e-14, "constant noise variance[%zu]", j);
    }
    tu_assert_close(a->diag.objective, b->diag.objective, 1e-12, 0.0, "constant noise LML");
    gp_model_free(a);
    gp_model_free(b);
    gp_model_free(model);
    gp_kernel_free(k);
}

/* Observe of the last rows with their noise: the fit of all of them (the
 * frequencies and hyperparameters fixed); export/import keeps the LML term;
 * without the noise the observe is refused, a negative one named. */
static void test_ssgp_observe(void **state)
{
    (void)state;
    enum { N = 40, N0 = 28, K = N - N0, T = 7, R = 6 };
    double X[N * 2], y[N], r[N], X0[N0 * 2], X1[K * 2], Xs[T * 2], mu[T], var[T], mu2[T],
        var2[T];
    tu_random_problem_colmajor(N, 2, 6, X, y);
    tu_random_problem_colmajor(T, 2, 8, Xs, mu2);
    noise_rows(r, N);
    for (size_t j = 0; j < 2; j++) {
        memcpy(X0 + j * N0, X + j * N, N0 * sizeof *X);
        memcpy(X1 + j * K, X + j * N + N0, K * sizeof *X);
    }
    gp_kernel *k = rbf(2, 1.1, 0.9);
    k->fixed = GP_FIX_ALL;
    gp_option_value opts[] = {{"features", R, NULL, NULL}};
    gp_fit_request req = ssgp_request(X, y, r, N, k, opts);
    gp_model *all = NULL, *part = NULL, *back = NULL;
    gp_error err;
    assert_int_equal(gp_model_fit(gp_method_find("ssgp"), &req, &all, &err), GP_OK);
    req = ssgp_request(X0, y, r, N0, k, opts);
    assert_int_equal(gp_model_fit(gp_method_find("ssgp"), &req, &part, &err), GP_OK);
    gp_state st;
    gp_state_init(&st);
    assert_int_equal(gp_model_export(part, &st, &err), GP_OK);
    assert_non_null(gp_state_find(&st, "noise_logd"));
    assert_int_equal(gp_model_import(gp_method_find("ssgp"), &st, &back, &err), GP_OK);
    assert_int_equal(gp_model_observe(part, X1, y + N0, K, &err), GP_EINVAL);
    assert_string_equal(err.field, "noise");
    double bad[K];
    memcpy(bad, r + N0, sizeof bad);
    bad[3] = NAN;
    assert_int_equal(gp_model_observe_noise(part, X1, y + N0, bad, K, &err), GP_EDATA);
    assert_string_equal(err.field, "noise[3]");
    assert_int_equal(part->n_train, N0);
    assert_int_equal(gp_model_observe_noise(part, X1, y + N0, r + N0, K, &err), GP_OK);
    assert_int_equal(gp_model_observe_noise(back, X1, y + N0, r + N0, K, &err), GP_OK);
    tu_assert_close(part->diag.objective, all->diag.objective, 1e-10, 0.0, "LML after observe");
    assert_memory_equal(&part->diag.objective, &back->diag.objective, sizeof(double));
    gp_predict_request pr = {.X = Xs, .m = T, .d = 2};
    gp_prediction o1 = {.mean = mu, .variance = var}, o2 = {.mean = mu2, .variance = var2};
    assert_int_equal(gp_model_predict(part, &pr, &o1, &err), GP_OK);
    assert_int_equal(gp_model_predict(all, &pr, &o2, &err), GP_OK);
    for (size_t j = 0; j < T; j++) {
        tu_assert_close(mu[j], mu2[j], 1e-9, 1e-12, "observed mean[%zu]", j);
        tu_assert_close(var[j], var2[j], 1e-9, 1e-14, "observed variance[%zu]", j);
    }
    gp_state_free(&st);
    gp_model_free(all);
    gp_model_free(part);
    gp_model_free(back);
    gp_kernel_free(k);
}

/* ---- renyi ---- */

typedef struct renyi_fd {
    gp_kernel *k;
    const double *X, *y, *r, *Z;
    size_t n, m, d, np;
    double a;
} renyi_fd;

static double renyi_value(void *ctx, const double *x)
{
    renyi_fd *c = ctx;
    gp_kernel_set_params(c->k, x);
    gp_renyi_terms t;
    gp_error err;
    assert_int_equal(gp_renyi_bound_noise(c->k, exp(x[c->np]), c->r, c->a, c->X, c->n, c->d,
                                          c->y, c->Z, c->m, &t, NULL, NULL, NULL, &err),
                     GP_OK);
    return t.bound;
}

static void test_renyi(void **state)
{
    (void)state;
    enum { N = 30, M = 7, D = 2 };
    double X[N * D], y[N], r[N], Z[M * D], x[3], grad[3], rc_[N];
    tu_random_problem(N, D, 7, X, y);
    noise_rows(r, N);
    for (size_t i = 0; i < M * D; i++)
        Z[i] = X[3 * i % (N * D)] + 0.1;
    gp_kernel *k = rbf(D, 1.3, 0.8);
    renyi_fd c = {k, X, y, r, Z, N, M, D, gp_kernel_n_params(k), 0.5};
    gp_kernel_get_params(k, x);
    x[2] = log(0.02);
    gp_renyi_terms t, th;
    gp_error err;
    assert_int_equal(gp_renyi_bound_noise(k, 0.02, r, 0.5, X, N, D, y, Z, M, &t, grad, NULL, NULL,
                                          &err),
                     GP_OK);
    assert_true(isnan(t.upper) && isnan(t.certified));
    tu_fd_spec spec = {1e-5, 1e-5, 1e-7, 1.0, 0};
    tu_check_gradient(renyi_value, &c, x, 3, grad, spec, NULL, "renyi bound with per-point noise");
    /* a = 0 is the exact LML with the rows' noise */
    double lml;
    assert_int_equal(gp_renyi_bound_noise(k, 0.02, r, 0.0, X, N, D, y, Z, M, &t, NULL, NULL, NULL,
                                          &err),
                     GP_OK);
    assert_int_equal(gp_exact_lml_grad_noise(k, 0.02, r, X, D, N, y, &lml, NULL, &err), GP_OK);
    tu_assert_close(t.bound, lml, 1e-10, 0.0, "renyi a = 0 vs exact LML");
    /* the same c on every row: the bound at s2 + c */
    for (size_t i = 0; i < N; i++)
        rc_[i] = 0.017;
    assert_int_equal(gp_renyi_bound_noise(k, 0.02, rc_, 0.5, X, N, D, y, Z, M, &t, NULL, NULL,
                                          NULL, &err),
                     GP_OK);
    assert_int_equal(gp_renyi_bound(k, 0.037, 0.5, X, N, D, y, Z, M, &th, NULL, NULL, NULL, &err),
                     GP_OK);
    tu_assert_close(t.bound, th.bound, 1e-11, 0.0, "renyi constant noise vs s2 + c");
    gp_kernel_free(k);
}

/* A renyi fit takes it and does not claim the certificate. */
static void test_renyi_fit(void **state)
{
    (void)state;
    enum { N = 40 };
    double X[N * 2], y[N], r[N];
    tu_random_problem_colmajor(N, 2, 3, X, y);
    noise_rows(r, N);
    gp_kernel *k = rbf(2, 1.0, 1.0);
    gp_option_value opts[] = {{"inducing", 8, NULL, NULL}, {"max_iterations", 20, NULL, NULL}};
    gp_fit_request req = {.X = X, .y = y, .n = N, .d = 2, .kernel = k, .noise_per_point = r,
                          .seed = 1, .options = opts, .n_options = 2, .standardize = 1};
    gp_model *model = NULL;
    gp_error err;
    if (gp_model_fit(gp_method_find("renyi"), &req, &model, &err) != GP_OK)
        fail_msg("renyi fit: %s", err.message);
    assert_true(model->per_point_noise);
    assert_true(isfinite(model->diag.objective));
    for (size_t i = 0; i < model->diag.n_info; i++)
        assert_true(strcmp(model->diag.info[i].key, "certified_gap") != 0 &&
                    strcmp(model->diag.info[i].key, "upper_bound") != 0);
    gp_model_free(model);
    /* a homoscedastic part of 0: refused for renyi and ssgp, naming it */
    req.noise_given = req.noise_fixed = 1;
    req.noise_variance = 0.0;
    assert_int_equal(gp_model_fit(gp_method_find("renyi"), &req, &model, &err), GP_EUNSUPPORTED);
    assert_string_equal(err.field, "noise.variance");
    req.options = NULL;
    req.n_options = 0;
    assert_int_equal(gp_model_fit(gp_method_find("ssgp"), &req, &model, &err), GP_EUNSUPPORTED);
    assert_string_equal(err.field, "noise.variance");
    assert_null(model);
    gp_kernel_free(k);
}

/* svgp refuses per-point noise with a non-Gaussian likelihood; an sgpr model
 * (no observe) refuses observe with noise. */
static void test_refusals(void **state)
{
    (void)state;
    enum { N = 30 };
    double X[N * 2], y[N], r[N];
    tu_random_problem_colmajor(N, 2, 3, X, y);
    noise_rows(r, N);
    for (size_t i = 0; i < N; i++)
        y[i] = y[i] > 0.0;
    gp_kernel *k = rbf(2, 1.0, 1.0);
    gp_fit_request req = {.X = X, .y = y, .n = N, .d = 2, .kernel = k, .noise_per_point = r,
                          .seed = 1, .likelihood = GP_LIK_BERNOULLI};
    gp_model *model = NULL;
    gp_error err;
    assert_int_equal(gp_model_fit(gp_method_find("svgp"), &req, &model, &err), GP_EUNSUPPORTED);
    assert_string_equal(err.field, "noise.per_point");
    assert_null(model);
    gp_kernel_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_svgp_gradient),
        cmocka_unit_test(test_svgp_constant_noise),
        cmocka_unit_test(test_svgp_adam_rows_keep_noise),
        cmocka_unit_test(test_ssgp_lml_dense_and_gradient),
        cmocka_unit_test(test_ssgp_weight_space),
        cmocka_unit_test(test_ssgp_observe),
        cmocka_unit_test(test_renyi),
        cmocka_unit_test(test_renyi_fit),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
