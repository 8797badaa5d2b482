/* Method "sgpr" (core/methods/sgpr.h): the collapsed bound against docs/methods/renyi-gp.md's
 * §9 reference value (VFE) and against a dense N x N evaluation, Z = X
 * against the exact GP (LML and predictions), finite-difference gradients for
 * the kernel, the noise and Z, the whitened predictive against the dense
 * formula, method-level fits (every selection, optimize_inducing), samples,
 * export/import, the size guard and bad kernels. */
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

#include "core/base/parallel.h"
#include "core/base/rng.h"
#include "core/base/state.h"
#include "core/inducing/inducing.h"
#include "core/kernel/lml.h"
#include "core/methods/registry.h"
#include "core/methods/sgpr.h"
#include "core/model/model.h"
#include "tests/unit/method_testutil.h"
#include "tests/unit/testutil.h"

#define LOG_2PI 1.8378770664093454836

/* ---- helpers ---- */

static double *dalloc(size_t count)
{
    double *p = calloc(count ? count : 1, sizeof *p);
    assert_non_null(p);
    return p;
}

static gp_kernel *leaf(gp_kernel_type t, size_t d, int ard)
{
    gp_kernel *k = NULL;
    gp_error err;
    if (gp_kernel_leaf(&k, t, d, ard, NULL, 0, &err) != GP_OK)
        fail_msg("kernel: %s", err.message);
    return k;
}

/* The problem of docs/methods/renyi-gp.md §9: 8 points, Z = (-1.5, 0, 1.5), rbf v = 1.2,
 * l = 0.8, s2 = 0.05. */
static const double ref_x[8] = {-2, -1.4, -0.8, -0.2, 0.4, 1.0, 1.6, 2.2};
static const double ref_z[3] = {-1.5, 0.0, 1.5};

static void ref_targets(double *y)
{
    for (int i = 0; i < 8; i++)
        y[i] = sin(1.5 * ref_x[i]) + 0.1 * cos(7.0 * ref_x[i]);
}

static gp_kernel *ref_kernel(void)
{
    gp_kernel *k = leaf(GP_KERNEL_RBF, 1, 0);
    k->log_variance = log(1.2);
    k->log_lengthscale[0] = log(0.8);
    return k;
}

static double bound_of(const gp_kernel *k, double s2, const double *X, size_t n, size_t d,
                       const double *y, const double *Z, size_t m, double *grad, double *gz)
{
    gp_sgpr_terms t;
    gp_error err;
    int rc = gp_sgpr_bound(k, s2, X, n, d, y, Z, m, &t, grad, gz, NULL, &err);
    if (rc != GP_OK)
        fail_msg("sgpr bound: %s", err.message);
    return t.bound;
}

/* Dense Kuu (with the method's jitter), Kuf for checks. */
static void dense_q(const gp_kernel *k, const double *X, size_t n, const double *Z, size_t m,
                    double *Q)
{
    double *Kuu = dalloc(m * m), *Kuf = dalloc(m * n);
    gp_kernel_gram(k, Z, m, Kuu, m);
    double mean = 0.0;
    for (size_t i = 0; i < m; i++)
        mean += Kuu[i * m + i];
    for (size_t i = 0; i < m; i++)
        Kuu[i * m + i] += GP_INDUCING_JITTER * mean / (double)m;
    gp_kernel_cross(k, Z, m, X, n, Kuf, m);
    assert_int_equal(LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (int)m, Kuu, (int)m), 0);
    double *S = dalloc(m * n);
    memcpy(S, Kuf, m * n * sizeof *S);
    assert_int_equal(LAPACKE_dpotrs(LAPACK_COL_MAJOR, 'L', (int)m, (int)n, Kuu, (int)m, S, (int)m),
                     0);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double s = 0.0;
            for (size_t a = 0; a < m; a++)
                s += Kuf[a + i * m] * S[a + j * m];
            Q[i + j * n] = s;
        }
    free(Kuu);
    free(Kuf);
    free(S);
}

/* log N(y; 0, Q + s2 I) - tr(Kff - Q)/(2 s2), densely. */
static double dense_bound(const gp_kernel *k, double s2, const double *X, size_t n,
                          const double *y, const double *Z, size_t m)
{
    double *Q = dalloc(n * n), *A = dalloc(n * n), *b = dalloc(n);
    dense_q(k, X, n, Z, m, Q);
    double t = 0.0;
    for (size_t i = 0; i < n; i++)
        t += gp_kernel_diag(k, X + i * k->input_dim) - Q[i * n + i];
    memcpy(A, Q, n * n * sizeof *A);
    for (size_t i = 0; i < n; i++)
        A[i * n + i] += s2;
    assert_int_equal(LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (int)n, A, (int)n), 0);
    memcpy(b, y, n * sizeof *b);
    assert_int_equal(LAPACKE_dpotrs(LAPACK_COL_MAJOR, 'L', (int)n, 1, A, (int)n, b, (int)n), 0);
    double ld = 0.0, q = 0.0;
    for (size_t i = 0; i < n; i++) {
        ld += 2.0 * log(A[i * n + i]);
        q += y[i] * b[i];
    }
    free(Q);
    free(A);
    free(b);
    return -0.5 * ((double)n * LOG_2PI + ld + q) - t / (2.0 * s2);
}

/* ---- method-level helpers ---- */

static const gp_method *sgpr(void)
{
    const gp_method *m = gp_method_find("sgpr");
    if (m == NULL)
        fail_msg("method 'sgpr' is not registered");
    return m;
}

/* ---- the bound ---- */

static void test_reference_vfe(void **state)
{
    (void)state;
    double y[8];
    ref_targets(y);
    gp_kernel *k = ref_kernel();
    /* docs/methods/renyi-gp.md §9: VFE (a -> 1) = -33.23587962680718. */
    double F = bound_of(k, 0.05, ref_x, 8, 1, y, ref_z, 3, NULL, NULL);
    assert_true(fabs(F - -33.23587962680718) < 1e-9);
    gp_sgpr_terms t;
    gp_error err;
    assert_int_equal(gp_sgpr_bound(k, 0.05, ref_x, 8, 1, y, ref_z, 3, &t, NULL, NULL, NULL, &err),
                     GP_OK);
    assert_true(fabs(t.trace - 1.8840734092707367) < 1e-9);
    gp_kernel_free(k);
}

static void test_dense_agreement(void **state)
{
    (void)state;
    size_t n = 60, d = 2, m = 12;
    double *X = dalloc(n * d), *y = dalloc(n), *Z = dalloc(m * d);
    tu_random_problem(n, d, 7, X, y);
    tu_random_problem(m, d, 8, Z, y + 0); /* Z random too; y reset below */
    tu_random_problem(n, d, 7, X, y);
    gp_kernel *k = leaf(GP_KERNEL_MATERN52, d, 1);
    k->log_lengthscale[0] = log(0.7);
    k->log_lengthscale[1] = log(1.4);
    k->log_variance = log(0.9);
    double F = bound_of(k, 0.03, X, n, d, y, Z, m, NULL, NULL);
    double D = dense_bound(k, 0.03, X, n, y, Z, m);
    assert_true(fabs(F - D) < 1e-9 * fmax(1.0, fabs(D)));
    gp_kernel_free(k);
    free(X);
    free(y);
    free(Z);
}

/* Z = X: Q = Kff up to the jitter, so the bound is the exact LML up to terms
 * of the jitter's size (t ~ n jitter, a few times n jitter / s2 in F). */
static void test_z_equals_x_is_exact(void **state)
{
    (void)state;
    size_t n = 40, d = 2;
    double *X = dalloc(n * d), *y = dalloc(n);
    tu_random_problem(n, d, 11, X, y);
    gp_kernel *k = leaf(GP_KERNEL_RBF, d, 1);
    k->log_lengthscale[0] = log(0.9);
    k->log_lengthscale[1] = log(1.3);
    double s2 = 0.1, lml;
    gp_error err;
    assert_int_equal(gp_exact_lml_grad(k, s2, X, d, n, y, &lml, NULL, &err), GP_OK);
    double F = bound_of(k, s2, X, n, d, y, X, n, NULL, NULL);
    assert_true(F <= lml + 1e-9);
    assert_true(lml - F < 10.0 * (double)n * 1e-6 / s2);
    gp_kernel_free(k);
    free(X);
    free(y);
}

/* F(params) with grad = dF/d(kernel params, log s2) and gz = dF/dZ against
 * central differences. */
typedef struct bound_fd {
    gp_kernel *k;
    const double *X, *y;
    size_t n, d, m, np;
} bound_fd;

/* The bound at x = (kernel log-parameters, log s2, Z). */
static double bound_at(void *ctx, const double *x)
{
    bound_fd *c = ctx;
    gp_kernel_set_params(c->k, x);
    return bound_of(c->k, exp(x[c->np]), c->X, c->n, c->d, c->y, x + c->np + 1, c->m, NULL,
                    NULL);
}

static void bound_param_name(void *ctx, size_t i, char *buf, size_t len)
{
    bound_fd *c = ctx;
    name_theta_s2_z(c->k, c->np, i, buf, len);
}

static void check_gradients(gp_kernel_type type, int ard, uint64_t seed)
{
    size_t n = 50, d = 2, m = 8;
    double *X = dalloc(n * d), *y = dalloc(n), *Z = dalloc(m * d), *yz = dalloc(m);
    tu_random_problem(n, d, seed, X, y);
    tu_random_problem(m, d, seed + 100, Z, yz);
    gp_kernel *k = leaf(type, d, ard);
    size_t np = gp_kernel_n_params(k);
    double *theta = dalloc(np), *grad = dalloc(np + 1), *gz = dalloc(m * d);
    gp_kernel_get_params(k, theta);
    theta[0] = log(1.3);
    theta[1] = log(0.8);
    if (ard)
        theta[2] = log(1.5);
    if (type == GP_KERNEL_RQ)
        theta[np - 1] = log(2.0);
    gp_kernel_set_params(k, theta);
    double s2 = 0.07;
    bound_of(k, s2, X, n, d, y, Z, m, grad, gz);
    /* One vector (theta, log s2, Z) and one gradient in the same order. */
    size_t nx = np + 1 + m * d;
    double *x = dalloc(nx), *g = dalloc(nx);
    memcpy(x, theta, np * sizeof *x);
    x[np] = log(s2);
    memcpy(x + np + 1, Z, m * d * sizeof *x);
    memcpy(g, grad, (np + 1) * sizeof *g);
    memcpy(g + np + 1, gz, m * d * sizeof *g);
    bound_fd c = {k, X, y, n, d, m, np};
    tu_check_gradient(bound_at, &c, x, nx, g, (tu_fd_spec){.step = 1e-5, .rtol = 1e-6, .floor = 1},
                      bound_param_name, gp_kernel_type_name(type));
    free(x);
    free(g);
    gp_kernel_free(k);
    free(X);
    free(y);
    free(Z);
    free(yz);
    free(theta);
    free(grad);
    free(gz);
}

static void test_gradients(void **state)
{
    (void)state;
    check_gradients(GP_KERNEL_RBF, 1, 21);
    check_gradients(GP_KERNEL_RBF, 0, 22);
    check_gradients(GP_KERNEL_MATERN52, 1, 23);
    check_gradients(GP_KERNEL_MATERN32, 0, 24);
    check_gradients(GP_KERNEL_RQ, 1, 25);
}

/* ---- the method ---- */

/* With every training input inducing and the hyperparameters held, sgpr
 * predicts as the exact GP (up to the 1e-6 v jitter). */
static void test_fit_z_equals_x_predicts_exact(void **state)
{
    (void)state;
    size_t n = 50, d = 2, m = 7;
    double *X = dalloc(n * d), *y = dalloc(n), *Xs = dalloc(m * d);
    tu_random_problem_colmajor(n, d, 31, X, y);
    tu_random_problem_colmajor(m, d, 32, Xs, y + 0);
    tu_random_problem_colmajor(n, d, 31, X, y);
    gp_kernel *k = leaf(GP_KERNEL_RBF, d, 1);
    k->log_lengthscale[0] = log(0.8);
    k->log_lengthscale[1] = log(1.2);
    k->fixed = GP_FIX_ALL;
    gp_option_value o[] = {{"inducing", (double)n, NULL, NULL}, {"optimize_inducing", 0, NULL, NULL}};
    gp_fit_request req;
    fit_request(&req, X, y, n, d, k, o, 2);
    req.standardize = 0;
    req.noise_given = 1;
    req.noise_variance = 0.05;
    req.noise_fixed = 1;
    gp_model *sp = fit_ok(sgpr(), &req, "sgpr");
    req.n_options = 0;
    gp_model *ex = fit_ok(gp_method_find("exact"), &req, "exact");
    double mu1[7], v1[7], mu2[7], v2[7], c1[49], c2[49];
    predict_ok(sp, Xs, m, d, 0, mu1, v1, c1);
    predict_ok(ex, Xs, m, d, 0, mu2, v2, c2);
    for (size_t i = 0; i < m; i++) {
        assert_true(fabs(mu1[i] - mu2[i]) < 1e-4);
        assert_true(fabs(v1[i] - v2[i]) < 1e-4);
    }
    for (size_t i = 0; i < m * m; i++)
        assert_true(fabs(c1[i] - c2[i]) < 1e-4);
    const gp_info_item *gap = find_info(sp, "gap");
    assert_non_null(gap);
    assert_true(gap->number >= -1e-9 && gap->number < 1e-2);
    gp_model_free(sp);
    gp_model_free(ex);
    gp_kernel_free(k);
    free(X);
    free(y);
    free(Xs);
}

/* The whitened O(M^2) predictive equals the dense DTC formulas
 * mean Q*f (Q + s2 I)^{-1} y, cov K** - Q*f (Q + s2 I)^{-1} Qf*. */
static void test_predict_matches_dense_formula(void **state)
{
    (void)state;
    size_t n = 70, d = 2, m = 6, M = 9;
    double *X = dalloc(n * d), *y = dalloc(n), *Xs = dalloc(m * d), *ys = dalloc(m);
    tu_random_problem_colmajor(n, d, 41, X, y);
    tu_random_problem_colmajor(m, d, 42, Xs, ys);
    gp_kernel *k = leaf(GP_KERNEL_MATERN52, d, 1);
    gp_option_value o[] = {{"inducing", (double)M, NULL, NULL}, {"max_iterations", 30, NULL, NULL}};
    gp_fit_request req;
    fit_request(&req, X, y, n, d, k, o, 2);
    req.standardize = 0;
    gp_model *model = fit_ok(sgpr(), &req, "sgpr");
    double mu[6], var[6], cov[36];
    predict_ok(model, Xs, m, d, 0, mu, var, cov);
    gp_state st;
    gp_state_init(&st);
    gp_error err;
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    const gp_named_array *za = gp_state_find(&st, "Z");
    assert_non_null(za);
    size_t Mz = za->cols;
    /* Dense: Q over [X; Xs] with the model's Z, kernel and noise. */
    size_t N = n + m;
    double *P = dalloc(N * d), *Qall = dalloc(N * N), *yy = dalloc(n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < d; j++)
            P[i * d + j] = X[j * n + i];
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < d; j++)
            P[(n + i) * d + j] = Xs[j * m + i];
    dense_q(model->kernel, P, N, za->data, Mz, Qall);
    double s2 = model->noise_variance;
    double *A = dalloc(n * n), *B = dalloc(n * m);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++)
            A[i + j * n] = Qall[i + j * N] + (i == j ? s2 : 0.0);
    for (size_t j = 0; j < m; j++)
        for (size_t i = 0; i < n; i++)
            B[i + j * n] = Qall[i + (n + j) * N];
    memcpy(yy, y, n * sizeof *yy);
    assert_int_equal(LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (int)n, A, (int)n), 0);
    double *Sy = dalloc(n), *SB = dalloc(n * m);
    memcpy(Sy, y, n * sizeof *Sy);
    memcpy(SB, B, n * m * sizeof *SB);
    LAPACKE_dpotrs(LAPACK_COL_MAJOR, 'L', (int)n, 1, A, (int)n, Sy, (int)n);
    LAPACKE_dpotrs(LAPACK_COL_MAJOR, 'L', (int)n, (int)m, A, (int)n, SB, (int)n);
    for (size_t a = 0; a < m; a++) {
        double mean = 0.0;
        for (size_t i = 0; i < n; i++)
            mean += B[i + a * n] * Sy[i];
        assert_true(fabs(mean - mu[a]) < 1e-9 * fmax(1.0, fabs(mean)));
        for (size_t b = 0; b < m; b++) {
            double c = gp_kernel_eval(model->kernel, P + (n + a) * d, P + (n + b) * d, a == b);
            for (size_t i = 0; i < n; i++)
                c -= B[i + a * n] * SB[i + b * n];
            assert_true(fabs(c - cov[a + b * m]) < 1e-9);
        }
        assert_true(fabs(var[a] - cov[a + a * m]) < 1e-12);
    }
    gp_state_free(&st);
    gp_model_free(model);
    gp_kernel_free(k);
    free(X), free(y), free(Xs), free(ys), free(P), free(Qall), free(yy);
    free(A), free(B), free(Sy), free(SB);
}

static gp_model *small_fit(size_t n, size_t d, const gp_option_value *o, size_t no, uint64_t s,
                           double **Xout, double **yout)
{
    double *X = dalloc(n * d), *y = dalloc(n);
    tu_random_problem_colmajor(n, d, s, X, y);
    gp_kernel *k = leaf(GP_KERNEL_RBF, d, 1);
    gp_fit_request req;
    fit_request(&req, X, y, n, d, k, o, no);
    gp_model *model = fit_ok(sgpr(), &req, "sgpr");
    gp_kernel_free(k);
    *Xout = X;
    *yout = y;
    return model;
}

static void test_export_import_bit_identical(void **state)
{
    (void)state;
    double *X, *y;
    gp_option_value o[] = {{"inducing", 15, NULL, NULL}};
    gp_model *model = small_fit(120, 3, o, 1, 51, &X, &y);
    gp_state st;
    gp_state_init(&st);
    gp_error err;
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    gp_model *copy = NULL;
    assert_int_equal(gp_model_import(sgpr(), &st, &copy, &err), GP_OK);
    double mu1[120], v1[120], mu2[120], v2[120];
    predict_ok(model, X, 40, 3, 1, mu1, v1, NULL);
    predict_ok(copy, X, 40, 3, 1, mu2, v2, NULL);
    assert_memory_equal(mu1, mu2, 40 * sizeof *mu1);
    assert_memory_equal(v1, v2, 40 * sizeof *v1);
    /* One point at a time (the level-2 path) agrees with the block path. */
    for (size_t i = 0; i < 40; i += 7) {
        double x1[3] = {X[i], X[40 + i], X[80 + i]}, mu, v; /* as the 40 x 3 block reads X */
        predict_ok(copy, x1, 1, 3, 1, &mu, &v, NULL);
        assert_true(fabs(mu - mu1[i]) <= 1e-12 * fmax(1.0, fabs(mu1[i])));
        assert_true(fabs(v - v1[i]) <= 1e-12 * fmax(1.0, v1[i]));
    }
    /* A corrupt factor is refused, naming the array. */
    for (size_t i = 0; i < st.count; i++)
        if (strcmp(st.arrays[i].name, "chol_kuu_packed") == 0)
            st.arrays[i].data[0] = -1.0;
    gp_model *bad = NULL;
    assert_int_equal(gp_model_import(sgpr(), &st, &bad, &err), GP_EDATA);
    assert_string_equal(err.field, "chol_kuu_packed");
    assert_null(bad);
    gp_state_free(&st);
    gp_model_free(model);
    gp_model_free(copy);
    free(X);
    free(y);
}

/* 20000 joint draws against the predictive mean and covariance. */
static void test_samples_match_covariance(void **state)
{
    (void)state;
    double *X, *y;
    gp_option_value o[] = {{"inducing", 10, NULL, NULL}};
    gp_model *model = small_fit(80, 2, o, 1, 61, &X, &y);
    size_t m = 4, S = 20000;
    double Xs[8] = {-1.0, -0.5, 0.3, 1.5, 0.2, 0.9, -1.2, 0.0};
    double mu[4], var[4], cov[16];
    predict_ok(model, Xs, m, 2, 1, mu, var, cov);
    double *draws = dalloc(m * S);
    gp_sample_request sr = {.X = Xs, .m = m, .d = 2, .n_samples = S, .seed = 5, .include_noise = 1};
    gp_error err;
    assert_int_equal(gp_model_sample(model, &sr, draws, &err), GP_OK);
    for (size_t a = 0; a < m; a++) {
        double mean = 0.0;
        for (size_t s = 0; s < S; s++)
            mean += draws[s * m + a];
        mean /= (double)S;
        assert_true(fabs(mean - mu[a]) < 5.0 * sqrt(var[a] / (double)S));
        for (size_t b = 0; b < m; b++) {
            double c = 0.0;
            for (size_t s = 0; s < S; s++)
                c += (draws[s * m + a] - mu[a]) * (draws[s * m + b] - mu[b]);
            c /= (double)S;
            assert_true(fabs(c - cov[a + b * m]) < 0.05 * sqrt(var[a] * var[b]));
        }
    }
    free(draws);
    gp_model_free(model);
    free(X);
    free(y);
}

/* Optimising Z from the same start reaches at least the fixed-Z bound, and
 * the report carries the bound's pieces. */
static void test_optimize_inducing_improves_bound(void **state)
{
    (void)state;
    double *X, *y, *X2, *y2;
    gp_option_value fixed[] = {{"inducing", 6, NULL, NULL}, {"optimize_inducing", 0, NULL, NULL},
                               {"reselect", 0, NULL, NULL}};
    gp_option_value moved[] = {{"inducing", 6, NULL, NULL}, {"optimize_inducing", 1, NULL, NULL}};
    gp_model *a = small_fit(150, 2, fixed, 3, 71, &X, &y);
    gp_model *b = small_fit(150, 2, moved, 2, 71, &X2, &y2);
    assert_true(b->diag.objective >= a->diag.objective - 1e-6);
    const char *keys[] = {"inducing", "inducing_selection", "trace_term", "trace_fraction",
                          "exact_lml", "gap"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        if (find_info(a, keys[i]) == NULL)
            fail_msg("info '%s' missing", keys[i]);
    assert_true(find_info(a, "gap")->number >= -1e-8);
    assert_true(fabs(find_info(a, "exact_lml")->number - find_info(a, "gap")->number -
                     a->diag.objective) < 1e-6);
    assert_int_equal((int)find_info(b, "optimize_inducing")->number, 1);
    gp_model_free(a);
    gp_model_free(b);
    free(X), free(y), free(X2), free(y2);
}

/* Every row repeated three times: the inducing set never holds a repeated
 * input, Kuu stays positive definite, and the fit works for every selection. */
static void test_duplicate_inputs(void **state)
{
    (void)state;
    size_t base = 20, n = 3 * base, d = 2;
    double *X0 = dalloc(base * d), *y0 = dalloc(base), *X = dalloc(n * d), *y = dalloc(n);
    tu_random_problem_colmajor(base, d, 81, X0, y0);
    for (size_t r = 0; r < 3; r++)
        for (size_t i = 0; i < base; i++) {
            for (size_t j = 0; j < d; j++)
                X[j * n + r * base + i] = X0[j * base + i];
            y[r * base + i] = y0[i] + 0.01 * (double)r;
        }
    const char *sels[] = {"greedy", "kmeans", "random", NULL};
    gp_kernel *k = leaf(GP_KERNEL_RBF, d, 0);
    for (size_t s = 0; s < 3; s++) {
        gp_option_value o[] = {{"inducing", (double)n, NULL, NULL},
                               {"inducing_selection", 0, sels[s], NULL}};
        gp_fit_request req;
        fit_request(&req, X, y, n, d, k, o, 2);
        gp_model *model = fit_ok(sgpr(), &req, sels[s]);
        const gp_info_item *mi = find_info(model, "inducing");
        assert_non_null(mi);
        if (mi->number > (double)base)
            fail_msg("%s chose %g inducing points among %zu distinct inputs", sels[s],
                     mi->number, base);
        gp_model_free(model);
    }
    gp_kernel_free(k);
    free(X0), free(y0), free(X), free(y);
}

static void test_bad_requests(void **state)
{
    (void)state;
    size_t n = 30, d = 2;
    double *X = dalloc(n * d), *y = dalloc(n);
    tu_random_problem_colmajor(n, d, 91, X, y);
    gp_kernel *lin = leaf(GP_KERNEL_LINEAR, d, 0), *k = leaf(GP_KERNEL_RBF, d, 0);
    gp_fit_request req;
    gp_model *model = NULL;
    gp_error err;
    fit_request(&req, X, y, n, d, lin, NULL, 0);
    assert_int_equal(gp_model_fit(sgpr(), &req, &model, &err), GP_EUNSUPPORTED);
    assert_string_equal(err.field, "kernel.type");
    gp_option_value o[] = {{"inducing", 30, NULL, NULL}};
    fit_request(&req, X, y, n, d, k, o, 1);
    req.max_train_points = 20; /* budget 400 doubles */
    assert_int_equal(gp_model_fit(sgpr(), &req, &model, &err), GP_ETOOBIG);
    assert_string_equal(err.field, "options.inducing");
    gp_option_value bad[] = {{"inducing_selection", 0, "kdpp", NULL}};
    fit_request(&req, X, y, n, d, k, bad, 1);
    assert_int_equal(gp_model_fit(sgpr(), &req, &model, &err), GP_EINVAL);
    assert_string_equal(err.field, "options.inducing_selection");
    assert_null(model);
    gp_kernel_free(lin);
    gp_kernel_free(k);
    free(X);
    free(y);
}

/* The bound's large products run as pool tasks (core/linalg/panels.h): the
 * bound and its gradients are the same bits for 1, 2 and 3 compute threads,
 * at a size with several panels of every product (n = 1300, m = 160). */
static void test_threads_same_bits(void **state)
{
    (void)state;
    const size_t n = 1300, m = 160, d = 2;
    double *X = dalloc(n * d), *y = dalloc(n), *Z = dalloc(m * d);
    gp_rng rng;
    gp_rng_seed(&rng, 77);
    for (size_t i = 0; i < n * d; i++)
        X[i] = 4.0 * gp_rng_uniform(&rng) - 2.0;
    for (size_t i = 0; i < n; i++)
        y[i] = sin(2.0 * X[i * d]) + 0.1 * gp_rng_normal(&rng);
    for (size_t i = 0; i < m; i++)
        memcpy(Z + i * d, X + (i * 7) * d, d * sizeof *Z);
    gp_kernel *k = leaf(GP_KERNEL_MATERN52, d, 1);
    size_t np = gp_kernel_n_params(k), count = 1 + np + 1 + m * d;
    double *first = dalloc(count), *got = dalloc(count);
    for (int threads = 1; threads <= 3; threads++) {
        gp_parallel_set_threads(threads);
        got[0] = bound_of(k, 0.05, X, n, d, y, Z, m, got + 1, got + 2 + np);
        if (threads == 1)
            memcpy(first, got, count * sizeof *got);
        else if (memcmp(first, got, count * sizeof *got) != 0)
            fail_msg("%d threads: the bound or its gradient differ from 1 thread's", threads);
    }
    gp_parallel_set_threads(0);
    gp_kernel_free(k);
    free(X);
    free(y);
    free(Z);
    free(first);
    free(got);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_vfe),
        cmocka_unit_test(test_dense_agreement),
        cmocka_unit_test(test_z_equals_x_is_exact),
        cmocka_unit_test(test_gradients),
        cmocka_unit_test(test_fit_z_equals_x_predicts_exact),
        cmocka_unit_test(test_predict_matches_dense_formula),
        cmocka_unit_test(test_export_import_bit_identical),
        cmocka_unit_test(test_samples_match_covariance),
        cmocka_unit_test(test_optimize_inducing_improves_bound),
        cmocka_unit_test(test_duplicate_inputs),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test(test_threads_same_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
