/* Method "renyi" (core/methods/renyi/renyi.h): the reference values of docs/methods/renyi-gp.md §9, the limits
 * and orderings of the bound (L_0 = exact, monotone in a, VFE as a -> 1,
 * gap <= G(a), L_a <= log p(y) <= L_upper), finite-difference gradients in
 * theta, log s2 and Z, the whitened posterior against the direct N x N
 * formulas, and method-level fits (fixed and auto alpha, export/import, the
 * size guard, kernel restriction). */
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

#include "core/base/rng.h"
#include "core/base/state.h"
#include "core/inducing/inducing.h"
#include "core/kernel/lml.h"
#include "core/linalg/linalg.h"
#include "core/methods/registry.h"
#include "core/methods/renyi/renyi.h"
#include "core/model/model.h"
#include "tests/unit/method_testutil.h"
#include "tests/unit/testutil.h"

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

static void near(double got, double want, double tol, const char *what)
{
    tu_assert_within(got, want, tol * fmax(1.0, fabs(want)), "%s", what);
}

static double bound_ok(const gp_kernel *k, double s2, double a, const double *X, size_t n,
                       size_t d, const double *y, const double *Z, size_t m,
                       gp_renyi_terms *terms, double *grad, double *gz, gp_inducing_post *post)
{
    gp_error err;
    gp_renyi_terms t;
    int rc = gp_renyi_bound(k, s2, a, X, n, d, y, Z, m, terms ? terms : &t, grad, gz, post,
                            &err);
    if (rc != GP_OK)
        fail_msg("gp_renyi_bound(a=%g): %s", a, err.message);
    return terms ? terms->bound : t.bound;
}

/* ---- docs/methods/renyi-gp.md §9 reference values ---- */

static const double ref_x[8] = {-2, -1.4, -0.8, -0.2, 0.4, 1.0, 1.6, 2.2};
static const double ref_z[3] = {-1.5, 0.0, 1.5};
#define REF_S2 0.05
#define REF_EXACT (-6.271190182471778)
#define REF_TRACE 1.8840734092707367
#define REF_VFE (-33.23587962680718)

typedef struct ref_row {
    double a, bound, upper, gap, logdet_c, grad[3], mean[2], var[2];
} ref_row;

static const ref_row ref_rows[4] = {
    {0.00, -6.271190182471778, -6.271190182471778, 0, -10.449724446097887,
     {-1.773201854121, 3.360744065039, -0.813159682485},
     {0.441681141454, 0.136579228877}, {0.359539235895, 1.164465006195}},
    {0.25, -7.328056625232293, -5.3626262825969, 35.09251147218872, -10.557733517219235,
     {-2.052123234998, 4.349622475765, -0.298994689132},
     {0.439344196942, 0.135551793208}, {0.358651488741, 1.164436807757}},
    {0.50, -9.067298113421039, -4.6330604322326785, 39.586503876950275, -10.714679335662584,
     {-2.565390740499, 6.097358268795, 0.645946867808},
     {0.435034988684, 0.133778648352}, {0.35742988753, 1.164393352963}},
    {0.75, -12.715499030504244, -3.7025135864343586, 44.676668639488966, -10.97954453030123,
     {-3.848348889789, 10.093168556939, 3.009850396251},
     {0.426306915402, 0.130083234714}, {0.355556423419, 1.164313269961}},
};

static gp_kernel *ref_kernel(void)
{
    gp_kernel *k = leaf(GP_KERNEL_RBF, 1, 0);
    k->log_variance = log(1.2);
    k->log_lengthscale[0] = log(0.8);
    return k;
}

static void ref_targets(double *y)
{
    for (size_t i = 0; i < 8; i++)
        y[i] = sin(1.5 * ref_x[i]) + 0.1 * cos(7.0 * ref_x[i]);
}

/* Latent mean and variance at the points P (1-D) from the whitened posterior. */
static void post_predict(const gp_kernel *k, const gp_inducing_post *p, const double *P,
                         size_t b, double *mean, double *var)
{
    size_t m = p->m;
    double *aw = dalloc(m), *ca = dalloc(m);
    for (size_t j = 0; j < b; j++) {
        gp_kernel_cross(k, p->Z, m, P + j * p->d, 1, aw, m);
        gp_trsm_lower(p->L, m, m, 0, aw, 1, m);
        double mu = 0, prior = gp_kernel_diag(k, P + j * p->d), post = 0;
        for (size_t i = 0; i < m; i++) {
            mu += aw[i] * p->mt[i];
            prior -= aw[i] * aw[i];
            ca[i] = 0;
            for (size_t l = 0; l < m; l++)
                ca[i] += p->C[l * m + i] * aw[l];
            post += aw[i] * ca[i];
        }
        mean[j] = mu;
        var[j] = (prior > 0 ? prior : 0) + (post > 0 ? post : 0);
    }
    free(aw);
    free(ca);
}

static void test_reference_values(void **state)
{
    (void)state;
    gp_kernel *k = ref_kernel();
    double y[8], grad[3], mean[2], var[2], xs[2] = {0.7, 3.0};
    ref_targets(y);
    for (size_t r = 0; r < 4; r++) {
        const ref_row *row = &ref_rows[r];
        gp_renyi_terms t;
        gp_inducing_post post;
        bound_ok(k, REF_S2, row->a, ref_x, 8, 1, y, ref_z, 3, &t, grad, NULL, &post);
        near(t.bound, row->bound, 1e-9, "L_a");
        near(t.trace, REF_TRACE, 1e-9, "trace");
        near(t.upper, row->upper, 1e-9, "L_upper");
        near(t.certified, row->gap, 1e-9, "G(a)");
        near(t.logdet_c, row->logdet_c, 1e-9, "log|C|");
        for (size_t i = 0; i < 3; i++)
            near(grad[i], row->grad[i], 1e-9, "gradient");
        post_predict(k, &post, xs, 2, mean, var);
        for (size_t i = 0; i < 2; i++) {
            near(mean[i], row->mean[i], 1e-9, "predictive mean");
            near(var[i], row->var[i], 1e-9, "predictive variance");
        }
        gp_inducing_post_free(&post);
    }
    double lml;
    gp_error err;
    assert_int_equal(gp_exact_lml_grad(k, REF_S2, ref_x, 1, 8, y, &lml, NULL, &err), GP_OK);
    near(lml, REF_EXACT, 1e-12, "exact LML");
    gp_kernel_free(k);
}

static void test_reference_limits(void **state)
{
    (void)state;
    gp_kernel *k = ref_kernel();
    double y[8];
    ref_targets(y);
    double prev = INFINITY;
    for (int i = 0; i <= 20; i++) {
        double a = i < 20 ? 0.05 * i : 0.999;
        double b = bound_ok(k, REF_S2, a, ref_x, 8, 1, y, ref_z, 3, NULL, NULL, NULL, NULL);
        if (!(b <= prev + 1e-12))
            fail_msg("L_a increased at a = %g: %.15g > %.15g", a, b, prev);
        prev = b;
    }
    double vfe = bound_ok(k, REF_S2, 1.0 - 1e-9, ref_x, 8, 1, y, ref_z, 3, NULL, NULL, NULL,
                          NULL);
    if (!(fabs(vfe - REF_VFE) < 1e-4))
        fail_msg("L_{1-1e-9} = %.15g, VFE %.15g", vfe, REF_VFE);
    gp_error err;
    assert_int_equal(gp_renyi_bound(k, REF_S2, 1.0, ref_x, 8, 1, y, ref_z, 3, NULL, NULL, NULL,
                                    NULL, &err),
                     GP_EINVAL);
    gp_kernel_free(k);
}

/* ---- random problems ---- */

typedef struct problem {
    size_t n, d, m;
    double *X, *y, *Z;
} problem;

static void problem_make(problem *P, size_t n, size_t d, size_t m, uint64_t seed)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    P->n = n;
    P->d = d;
    P->m = m;
    P->X = dalloc(n * d);
    P->y = dalloc(n);
    P->Z = dalloc(m * d);
    for (size_t i = 0; i < n * d; i++)
        P->X[i] = 4.0 * gp_rng_uniform(&rng) - 2.0;
    for (size_t i = 0; i < n; i++)
        P->y[i] = sin(2.0 * P->X[i * d]) + (d > 1 ? 0.5 * P->X[i * d + 1] : 0.0) +
                  0.1 * gp_rng_normal(&rng);
    for (size_t i = 0; i < m * d; i++)
        P->Z[i] = 3.0 * gp_rng_uniform(&rng) - 1.5;
}

static void problem_free(problem *P)
{
    free(P->X);
    free(P->y);
    free(P->Z);
}

static gp_kernel *random_kernel(gp_kernel_type t, size_t d, int ard)
{
    gp_kernel *k = leaf(t, d, ard);
    k->log_variance = log(0.9);
    for (size_t j = 0; j < k->n_lengthscale; j++)
        k->log_lengthscale[j] = log(0.7 + 0.3 * (double)j);
    return k;
}

static void test_orderings(void **state)
{
    (void)state;
    for (uint64_t seed = 1; seed <= 5; seed++) {
        problem P;
        problem_make(&P, 40, 2, 6, seed);
        gp_kernel *k = random_kernel(seed % 2 ? GP_KERNEL_RBF : GP_KERNEL_MATERN32, 2, 1);
        double s2 = 0.02 * (double)seed, lml, prev = INFINITY;
        gp_error err;
        assert_int_equal(gp_exact_lml_grad(k, s2, P.X, 2, P.n, P.y, &lml, NULL, &err), GP_OK);
        for (int i = 0; i <= 10; i++) {
            double a = i < 10 ? 0.1 * i : 0.99;
            gp_renyi_terms t;
            bound_ok(k, s2, a, P.X, P.n, 2, P.y, P.Z, P.m, &t, NULL, NULL, NULL);
            if (i == 0)
                near(t.bound, lml, 1e-10, "L_0 = exact LML");
            if (!(t.bound <= prev + 1e-10))
                fail_msg("seed %d: L_a increased at a = %g", (int)seed, a);
            if (!(t.bound <= lml + 1e-10 && lml <= t.upper + 1e-10))
                fail_msg("seed %d a %g: not L_a %.12g <= log p %.12g <= L_upper %.12g",
                         (int)seed, a, t.bound, lml, t.upper);
            if (!(lml - t.bound <= t.certified + 1e-10))
                fail_msg("seed %d a %g: gap %.12g > G(a) %.12g", (int)seed, a, lml - t.bound,
                         t.certified);
            prev = t.bound;
        }
        gp_kernel_free(k);
        problem_free(&P);
    }
}

/* ---- finite differences: theta, log s2 and Z ---- */

typedef struct renyi_fd {
    gp_kernel *k;
    double a;
    const problem *P;
    size_t np;
} renyi_fd;

/* The bound at x = (kernel log-parameters, log s2, Z). */
static double renyi_at(void *ctx, const double *x)
{
    renyi_fd *c = ctx;
    const problem *P = c->P;
    gp_kernel_set_params(c->k, x);
    return bound_ok(c->k, exp(x[c->np]), c->a, P->X, P->n, P->d, P->y, x + c->np + 1, P->m, NULL,
                    NULL, NULL, NULL);
}

static void renyi_param_name(void *ctx, size_t i, char *buf, size_t len)
{
    renyi_fd *c = ctx;
    name_theta_s2_z(c->k, c->np, i, buf, len);
}

static void fd_case(gp_kernel *k, double s2, double a, const problem *P)
{
    size_t np = gp_kernel_n_params(k), dm = P->d * P->m, nx = np + 1 + dm;
    double *x = dalloc(nx), *g = dalloc(nx);
    bound_ok(k, s2, a, P->X, P->n, P->d, P->y, P->Z, P->m, NULL, g, g + np + 1, NULL);
    gp_kernel_get_params(k, x);
    x[np] = log(s2);
    memcpy(x + np + 1, P->Z, dm * sizeof *x);
    renyi_fd c = {k, a, P, np};
    char what[32];
    snprintf(what, sizeof what, "renyi a = %g", a);
    tu_check_gradient(renyi_at, &c, x, nx, g, (tu_fd_spec){.step = 1e-5, .rtol = 1e-6, .floor = 1},
                      renyi_param_name, what);
    gp_kernel_set_params(k, x);
    free(x);
    free(g);
}

static void test_gradients_fd(void **state)
{
    (void)state;
    static const double alphas[4] = {0.0, 0.3, 0.5, 0.9};
    problem P;
    problem_make(&P, 30, 2, 5, 7);
    gp_kernel *ks[2] = {random_kernel(GP_KERNEL_RBF, 2, 1),
                        random_kernel(GP_KERNEL_MATERN52, 2, 0)};
    for (size_t t = 0; t < 2; t++)
        for (size_t i = 0; i < 4; i++)
            fd_case(ks[t], 0.08, alphas[i], &P);
    gp_kernel_free(ks[0]);
    gp_kernel_free(ks[1]);
    problem_free(&P);
}

/* ---- the whitened posterior against the direct N x N formulas ---- */

/* out (rows x cols) = k(A_i, B_j) with Kuu's jitter when A = B = Z. */
static double *cross(const gp_kernel *k, const double *A, size_t na, const double *B, size_t nb)
{
    double *K = dalloc(na * nb);
    gp_kernel_cross(k, A, na, B, nb, K, na);
    return K;
}

/* Solve S X = B (S n x n symmetric PD, copied) for nrhs columns in place. */
static void spd_solve(const double *S, size_t n, double *B, size_t nrhs)
{
    double *F = dalloc(n * n);
    memcpy(F, S, n * n * sizeof *F);
    assert_int_equal(LAPACKE_dposv(LAPACK_COL_MAJOR, 'L', (lapack_int)n, (lapack_int)nrhs, F,
                                   (lapack_int)n, B, (lapack_int)n),
                     0);
    free(F);
}

static void test_posterior_direct(void **state)
{
    (void)state;
    problem P;
    problem_make(&P, 35, 2, 6, 11);
    gp_kernel *k = random_kernel(GP_KERNEL_RBF, 2, 1);
    double s2 = 0.05, a = 0.4, xs[6] = {0.3, -0.2, 1.7, 0.9, -1.1, -1.4};
    size_t n = P.n, m = P.m, ns = 3;
    gp_inducing_post post;
    bound_ok(k, s2, a, P.X, n, 2, P.y, P.Z, m, NULL, NULL, NULL, &post);
    double mean[3], var[3];
    post_predict(k, &post, xs, ns, mean, var);
    /* Q_AB = K_Au Kuu^{-1} K_uB with the same jittered Kuu. */
    double *Kuu = cross(k, P.Z, m, P.Z, m), *Kuf = cross(k, P.Z, m, P.X, n);
    double *Kus = cross(k, P.Z, m, xs, ns), *Kff = cross(k, P.X, n, P.X, n);
    for (size_t i = 0; i < m; i++)
        Kuu[i * m + i] += post.jitter;
    double *KiKuf = dalloc(m * n), *Qff = dalloc(n * n), *Qsf = dalloc(ns * n);
    memcpy(KiKuf, Kuf, m * n * sizeof *Kuf);
    spd_solve(Kuu, m, KiKuf, n);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            for (size_t l = 0; l < m; l++)
                Qff[j * n + i] += Kuf[i * m + l] * KiKuf[j * m + l];
    for (size_t s = 0; s < ns; s++)
        for (size_t j = 0; j < n; j++)
            for (size_t l = 0; l < m; l++)
                Qsf[j * ns + s] += Kus[s * m + l] * KiKuf[j * m + l];
    double *Xi = dalloc(n * n), *rhs = dalloc(n * (ns + 1));
    for (size_t i = 0; i < n * n; i++)
        Xi[i] = (1.0 - a) * Kff[i] + a * Qff[i];
    for (size_t i = 0; i < n; i++)
        Xi[i * n + i] += s2;
    memcpy(rhs, P.y, n * sizeof *rhs);
    for (size_t s = 0; s < ns; s++)
        for (size_t j = 0; j < n; j++)
            rhs[(s + 1) * n + j] = Qsf[j * ns + s];
    spd_solve(Xi, n, rhs, ns + 1);
    for (size_t s = 0; s < ns; s++) {
        double mu = 0, q = 0;
        for (size_t j = 0; j < n; j++) {
            mu += Qsf[j * ns + s] * rhs[j];
            q += Qsf[j * ns + s] * rhs[(s + 1) * n + j];
        }
        near(mean[s], mu, 1e-10, "whitened mean vs direct");
        near(var[s], gp_kernel_diag(k, xs + 2 * s) - q, 1e-10, "whitened variance vs direct");
    }
    free(Kuu);
    free(Kuf);
    free(Kus);
    free(Kff);
    free(KiKuf);
    free(Qff);
    free(Qsf);
    free(Xi);
    free(rhs);
    gp_inducing_post_free(&post);
    gp_kernel_free(k);
    problem_free(&P);
}

/* ---- the method ---- */

static const gp_method *renyi(void)
{
    const gp_method *m = gp_method_find("renyi");
    if (m == NULL)
        fail_msg("method 'renyi' is not registered");
    return m;
}

/* n x 2 column-major inputs and targets of a smooth 2-D function. */
static void synth(size_t n, uint64_t seed, double *X, double *y)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n; i++) {
        X[i] = 6.0 * gp_rng_uniform(&rng) - 3.0;
        X[n + i] = 4.0 * gp_rng_uniform(&rng);
        y[i] = 3.0 + 2.0 * sin(X[i]) + 0.5 * X[n + i] + 0.1 * gp_rng_normal(&rng);
    }
}

static void renyi_fit_request(gp_fit_request *req, const double *X, const double *y, size_t n,
                        const gp_kernel *k, const gp_option_value *opts, size_t n_opts)
{
    memset(req, 0, sizeof *req);
    req->X = X;
    req->y = y;
    req->n = n;
    req->d = 2;
    req->kernel = k;
    req->standardize = 1;
    req->seed = 3;
    req->options = opts;
    req->n_options = n_opts;
}

static const gp_info_item *info(const gp_model *model, const char *key)
{
    for (size_t i = 0; i < model->diag.n_info; i++)
        if (strcmp(model->diag.info[i].key, key) == 0)
            return &model->diag.info[i];
    fail_msg("info key '%s' missing", key);
    return NULL;
}

static void renyi_predict_ok(const gp_model *model, const double *Xs, size_t m, double *mu,
                       double *var)
{
    gp_predict_request pr = {.X = Xs, .m = m, .d = 2, .include_noise = 1};
    gp_prediction out = {.mean = mu, .variance = var};
    gp_error err;
    if (gp_model_predict(model, &pr, &out, &err) != GP_OK)
        fail_msg("predict: %s", err.message);
}

/* Info, finite predictions, and export -> import -> predict bit-identical. */
static void check_model(const gp_model *model, const double *Xs, size_t m, double rmse_max,
                        const double *ys)
{
    static const char *const keys[] = {"alpha", "alpha_selection", "inducing",
                                       "inducing_selection", "optimize_inducing", "trace_term",
                                       "trace_fraction", "exact_lml", "gap", "certified_gap",
                                       "upper_bound"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++)
        info(model, keys[i]);
    assert_true(isfinite(model->diag.objective));
    assert_true(info(model, "exact_lml")->number >= model->diag.objective - 1e-6);
    assert_true(info(model, "gap")->number <= info(model, "certified_gap")->number + 1e-6);
    double *mu = dalloc(m), *var = dalloc(m), *mu2 = dalloc(m), *var2 = dalloc(m), sse = 0;
    renyi_predict_ok(model, Xs, m, mu, var);
    for (size_t i = 0; i < m; i++) {
        assert_true(isfinite(mu[i]) && isfinite(var[i]) && var[i] > 0);
        sse += (mu[i] - ys[i]) * (mu[i] - ys[i]);
    }
    if (!(sqrt(sse / (double)m) < rmse_max))
        fail_msg("test RMSE %g >= %g", sqrt(sse / (double)m), rmse_max);
    gp_state st;
    gp_state_init(&st);
    gp_error err;
    gp_model *back = NULL;
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    if (gp_model_import(renyi(), &st, &back, &err) != GP_OK)
        fail_msg("import: %s", err.message);
    renyi_predict_ok(back, Xs, m, mu2, var2);
    assert_memory_equal(mu, mu2, m * sizeof *mu);
    assert_memory_equal(var, var2, m * sizeof *var);
    gp_model_free(back);
    gp_state_free(&st);
    free(mu);
    free(var);
    free(mu2);
    free(var2);
}

static gp_model *renyi_fit_ok(const gp_fit_request *req)
{
    gp_model *model = NULL;
    gp_error err;
    int rc = gp_model_fit(renyi(), req, &model, &err);
    if (rc != GP_OK)
        fail_msg("fit: %s (field '%s')", err.message, err.field);
    return model;
}

static void test_method_fit(void **state)
{
    (void)state;
    size_t n = 200, m = 50;
    double *X = dalloc(2 * n), *y = dalloc(n), *Xs = dalloc(2 * m), *ys = dalloc(m);
    synth(n, 5, X, y);
    synth(m, 6, Xs, ys);
    gp_kernel *k = leaf(GP_KERNEL_RBF, 2, 1);
    gp_fit_request req;
    renyi_fit_request(&req, X, y, n, k, NULL, 0);
    gp_model *model = renyi_fit_ok(&req);
    assert_string_equal(model->diag.objective_name, "renyi_bound");
    near(info(model, "alpha")->number, 0.5, 0, "alpha");
    assert_string_equal(info(model, "alpha_selection")->string, "fixed");
    near(info(model, "inducing")->number, 64, 0, "inducing");
    check_model(model, Xs, m, 0.3, ys);
    gp_model_free(model);

    gp_option_value opts[2] = {{.name = "alpha", .number = NAN, .string = "auto"},
                               {.name = "inducing", .number = 20}};
    renyi_fit_request(&req, X, y, n, k, opts, 2);
    model = renyi_fit_ok(&req);
    double a = info(model, "alpha")->number;
    int on_grid = 0;
    for (int i = 6; i <= 14; i++)
        on_grid |= a == (double)i / 20.0;
    if (!on_grid)
        fail_msg("auto alpha %.17g is not on the grid", a);
    assert_string_equal(info(model, "alpha_selection")->string, "auto");
    assert_true(isfinite(info(model, "validation_rmse")->number));
    check_model(model, Xs, m, 0.3, ys);
    gp_model_free(model);
    gp_kernel_free(k);
    free(X);
    free(y);
    free(Xs);
    free(ys);
}

static void test_method_errors(void **state)
{
    (void)state;
    size_t n = 60;
    double *X = dalloc(2 * n), *y = dalloc(n);
    synth(n, 8, X, y);
    gp_kernel *k = leaf(GP_KERNEL_MATERN52, 2, 0);
    gp_option_value cap = {.name = "dense_max_points", .number = 50};
    gp_fit_request req;
    gp_model *model = NULL;
    gp_error err;
    renyi_fit_request(&req, X, y, n, k, &cap, 1);
    assert_int_equal(gp_model_fit(renyi(), &req, &model, &err), GP_ETOOBIG);
    assert_string_equal(err.field, "options.dense_max_points");
    assert_non_null(strstr(err.message, "sgpr"));
    renyi_fit_request(&req, X, y, n, k, NULL, 0);
    req.max_train_points = 50;
    assert_int_equal(gp_model_fit(renyi(), &req, &model, &err), GP_ETOOBIG);
    assert_string_equal(err.field, "X");
    gp_option_value bad = {.name = "alpha", .number = 1.0};
    renyi_fit_request(&req, X, y, n, k, &bad, 1);
    assert_int_equal(gp_model_fit(renyi(), &req, &model, &err), GP_EINVAL);
    gp_kernel *lin = leaf(GP_KERNEL_LINEAR, 2, 0);
    renyi_fit_request(&req, X, y, n, lin, NULL, 0);
    assert_int_equal(gp_model_fit(renyi(), &req, &model, &err), GP_EUNSUPPORTED);
    assert_null(model);
    gp_kernel_free(lin);
    gp_kernel_free(k);
    free(X);
    free(y);
}

typedef struct progress_log {
    int calls, stop_after, max_iteration, max_total;
} progress_log;

static int progress(void *ctx, int iteration, int max_total, double objective)
{
    progress_log *pl = ctx;
    assert_true(isfinite(objective));
    pl->calls++;
    if (iteration > pl->max_iteration)
        pl->max_iteration = iteration;
    pl->max_total = max_total;
    return pl->stop_after > 0 && pl->calls >= pl->stop_after;
}

/* Progress counts every fit of auto as one span; a cancel in any of them
 * (the first grid fit, a later one, the final refit) stops the whole fit. */
static void test_progress_cancel(void **state)
{
    (void)state;
    size_t n = 80;
    double *X = dalloc(2 * n), *y = dalloc(n);
    synth(n, 9, X, y);
    gp_kernel *k = leaf(GP_KERNEL_RBF, 2, 0);
    gp_option_value opts[2] = {{.name = "alpha", .number = NAN, .string = "auto"},
                               {.name = "max_iterations", .number = 30}};
    gp_fit_request req;
    renyi_fit_request(&req, X, y, n, k, opts, 2);
    progress_log pl = {0};
    req.progress = progress;
    req.progress_ctx = &pl;
    gp_model *model = renyi_fit_ok(&req);
    assert_int_equal(pl.max_total, 300);
    assert_true(pl.max_iteration <= 300 && pl.max_iteration == model->diag.iterations);
    int total = pl.calls;
    gp_model_free(model);
    int stops[3] = {2, total / 2, total - 1};
    for (int i = 0; i < 3; i++) {
        gp_error err;
        pl = (progress_log){.stop_after = stops[i]};
        model = NULL;
        assert_int_equal(gp_model_fit(renyi(), &req, &model, &err), GP_ECANCELLED);
        assert_null(model);
    }
    gp_kernel_free(k);
    free(X);
    free(y);
}

/* Other selections, and Z optimised with the hyperparameters. */
static void test_method_selections(void **state)
{
    (void)state;
    size_t n = 120, m = 40;
    double *X = dalloc(2 * n), *y = dalloc(n), *Xs = dalloc(2 * m), *ys = dalloc(m);
    synth(n, 12, X, y);
    synth(m, 13, Xs, ys);
    gp_kernel *k = leaf(GP_KERNEL_MATERN32, 2, 1);
    static const char *const sel[3] = {"greedy", "kmeans", "random"};
    for (int i = 0; i < 3; i++) {
        gp_option_value opts[3] = {{.name = "inducing_selection", .string = sel[i]},
                                   {.name = "inducing", .number = 15},
                                   {.name = "optimize_inducing", .number = i != 2}};
        gp_fit_request req;
        renyi_fit_request(&req, X, y, n, k, opts, 3);
        gp_model *model = renyi_fit_ok(&req);
        assert_string_equal(info(model, "inducing_selection")->string, sel[i]);
        near(info(model, "optimize_inducing")->number, i != 2, 0, "optimize_inducing");
        near(info(model, "inducing")->number, 15, 0, "inducing");
        check_model(model, Xs, m, 0.4, ys);
        gp_model_free(model);
    }
    gp_kernel_free(k);
    free(X);
    free(y);
    free(Xs);
    free(ys);
}

static void expect_import_error(gp_state *st, const char *name, size_t i, double value,
                                const char *field)
{
    gp_named_array *a = (gp_named_array *)gp_state_find(st, name);
    assert_non_null(a);
    double keep = a->data[i];
    a->data[i] = value;
    gp_model *back = NULL;
    gp_error err;
    assert_int_equal(gp_model_import(renyi(), st, &back, &err), GP_EDATA);
    assert_null(back);
    if (field && strcmp(err.field, field) != 0)
        fail_msg("corrupt %s: field '%s', want '%s'", name, err.field, field);
    a->data[i] = keep;
}

static void test_import_corrupt(void **state)
{
    (void)state;
    size_t n = 60;
    double *X = dalloc(2 * n), *y = dalloc(n);
    synth(n, 14, X, y);
    gp_kernel *k = leaf(GP_KERNEL_RBF, 2, 0);
    gp_option_value opts[1] = {{.name = "inducing", .number = 10}};
    gp_fit_request req;
    renyi_fit_request(&req, X, y, n, k, opts, 1);
    gp_model *model = renyi_fit_ok(&req), *back = NULL;
    gp_state st;
    gp_state_init(&st);
    gp_error err;
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    expect_import_error(&st, "alpha", 0, 1.0, "alpha");
    expect_import_error(&st, "alpha", 0, NAN, "alpha");
    expect_import_error(&st, "chol_kuu_packed", 0, -1.0, "chol_kuu_packed");
    expect_import_error(&st, "mean_white", 3, INFINITY, NULL);
    gp_named_array *z = (gp_named_array *)gp_state_find(&st, "Z");
    z->rows = 1;
    z->cols *= 2;
    assert_int_equal(gp_model_import(renyi(), &st, &back, &err), GP_EDATA);
    assert_string_equal(err.field, "Z");
    z->rows = 2;
    z->cols /= 2;
    assert_int_equal(gp_model_import(renyi(), &st, &back, &err), GP_OK);
    gp_model_free(back);
    gp_state_free(&st);
    gp_model_free(model);
    gp_kernel_free(k);
    free(X);
    free(y);
}

/* Selection on 1-D inputs with only 4 distinct values: every selection
 * returns at most 4 points, greedy and random distinct training inputs. */
static void test_selection_duplicates(void **state)
{
    (void)state;
    double X[12] = {0, 1, 2, 3, 0, 1, 2, 3, 3, 3, 0, 1}, Z[8];
    gp_kernel *k = leaf(GP_KERNEL_RBF, 1, 0);
    gp_error err;
    for (int s = 0; s < 3; s++) {
        size_t m = 0;
        assert_int_equal(gp_inducing_select((gp_inducing_selection)s, k, X, 12, 1, 8, 5, Z, &m,
                                            &err),
                         GP_OK);
        assert_int_equal(m, 4);
        for (size_t i = 0; i < m; i++)
            for (size_t j = 0; j < i; j++)
                assert_true(Z[i] != Z[j]);
    }
    size_t m = 0;
    assert_int_equal(gp_inducing_select(GP_INDUCING_GREEDY, k, X, 12, 1, 2, 5, Z, &m, &err),
                     GP_OK);
    assert_int_equal(m, 2);
    assert_int_equal(gp_inducing_selection_from_name("kmeans"), GP_INDUCING_KMEANS);
    assert_int_equal(gp_inducing_selection_from_name("dpp"), -1);
    assert_string_equal(gp_inducing_selection_name(GP_INDUCING_RANDOM), "random");
    gp_kernel_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_values),
        cmocka_unit_test(test_reference_limits),
        cmocka_unit_test(test_orderings),
        cmocka_unit_test(test_gradients_fd),
        cmocka_unit_test(test_posterior_direct),
        cmocka_unit_test(test_method_fit),
        cmocka_unit_test(test_method_errors),
        cmocka_unit_test(test_progress_cancel),
        cmocka_unit_test(test_method_selections),
        cmocka_unit_test(test_import_corrupt),
        cmocka_unit_test(test_selection_duplicates),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
