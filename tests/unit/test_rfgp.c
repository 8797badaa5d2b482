/* Method "rfgp" (core/methods/rfgp.h, docs/methods/kernel-jit-online.md):
 * streamed rows against a dense batch Bayesian linear regression on the same
 * features (several outputs, with and without forgetting, through the rank-one
 * and the re-factorising routes, and 10^6 rows), the warm-up's equivalence
 * ("fit with all rows" = "fit with the warm-up, then observe the rest"), the
 * gate, the type-II ML gradient against central differences, bad rows refused
 * through gp_model_observe naming the field, the warm-up's refusals and
 * status, a model created without rows, export/import followed by the same
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
#include "core/methods/rfgp.h"
#include "core/model/model.h"
#include "tests/unit/method_testutil.h"
#include "tests/unit/testutil.h"

/* ---- helpers ---- */

static const gp_method *rfgp(void)
{
    const gp_method *m = gp_method_find("rfgp");
    if (m == NULL)
        fail_msg("method 'rfgp' is not registered");
    return m;
}

static double *dalloc(size_t count)
{
    double *p = calloc(count ? count : 1, sizeof *p);
    assert_non_null(p);
    return p;
}

static gp_kernel *rbf(size_t d, int ard, double lengthscale)
{
    gp_kernel *k = NULL;
    gp_error err;
    if (gp_kernel_leaf(&k, GP_KERNEL_RBF, d, ard, NULL, 0, &err) != GP_OK)
        fail_msg("kernel: %s", err.message);
    for (size_t j = 0; j < k->n_lengthscale; j++)
        k->log_lengthscale[j] = log(lengthscale);
    return k;
}

typedef struct opts {
    gp_option_value v[16];
    size_t n;
} opts;

static void opt_num(opts *o, const char *name, double v)
{
    o->v[o->n++] = (gp_option_value){.name = name, .number = v};
}

static void opt_str(opts *o, const char *name, const char *s)
{
    o->v[o->n++] = (gp_option_value){.name = name, .number = NAN, .string = s};
}

/* A toy stream: x uniform in [-2, 2]^d, y_j = sin(2 x_0 + j) + 0.5 cos(x_last) + noise. */
static void toy_rows(uint64_t seed, size_t n, size_t d, size_t p, double *X, double *Y)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n * d; i++)
        X[i] = 4.0 * gp_rng_uniform(&rng) - 2.0;
    for (size_t j = 0; j < p; j++)
        for (size_t i = 0; i < n; i++)
            Y[j * n + i] = sin(2.0 * X[i] + (double)j) + 0.5 * cos(X[(d - 1) * n + i]) +
                           0.05 * gp_rng_normal(&rng);
}

static void observe_ok(gp_model *model, const double *X, const double *Y, size_t k)
{
    gp_error err;
    int rc = gp_model_observe(model, X, Y, k, &err);
    if (rc != GP_OK)
        fail_msg("observe failed: %s (%s, field '%s')", err.message, gp_status_name(rc),
                 err.field);
}

static const gp_named_array *state_array(const gp_state *st, const char *name)
{
    const gp_named_array *a = gp_state_find(st, name);
    if (a == NULL)
        fail_msg("state has no array '%s'", name);
    return a;
}

/* ---- the dense reference: Bayesian linear regression on the same features ----
 * Accumulated and solved in long double (x87: 64-bit mantissa), so that its
 * own rounding stays well below the tolerances the streamed model is held to:
 * a double accumulation of 10^6 rows, solved by normal equations, is itself
 * off by ~1e-7 relative where P is ill-conditioned. */

typedef long double ld;

typedef struct reference {
    size_t D, d;
    const double *W, *b; /* d x D, D: the model's exported map (points, raw inputs) */
    ld *P, *B;           /* D x D precision, D x p right-hand side */
    size_t p;
} reference;

static void ref_features(const reference *r, const double *x, ld *psi)
{
    for (size_t i = 0; i < r->D; i++) {
        ld z = r->b[i];
        for (size_t k = 0; k < r->d; k++)
            z += (ld)r->W[i * r->d + k] * x[k];
        psi[i] = sqrtl(2.0L / (ld)r->D) * cosl(z);
    }
}

/* P and B after the rows (x_i, y_i) in order with forgetting lam, from the
 * prior I / s0: P = lam^n I / s0 + sum lam^(n-1-i) psi psi^T / s. */
static void ref_accumulate(reference *r, const double *X, const double *Y, size_t n, double s,
                           double s0, double lam)
{
    size_t D = r->D;
    ld *psi = calloc(D, sizeof *psi);
    double x[8];
    assert_non_null(psi);
    memset(r->P, 0, D * D * sizeof *r->P);
    memset(r->B, 0, D * r->p * sizeof *r->B);
    for (size_t j = 0; j < D; j++)
        r->P[j * D + j] = 1.0L / s0;
    for (size_t i = 0; i < n; i++) {
        for (size_t k = 0; k < r->d; k++)
            x[k] = X[k * n + i];
        ref_features(r, x, psi);
        for (size_t a = 0; lam != 1.0 && a < D * D; a++)
            r->P[a] *= lam;
        for (size_t a = 0; lam != 1.0 && a < D * r->p; a++)
            r->B[a] *= lam;
        for (size_t a = 0; a < D; a++)
            for (size_t c = 0; c <= a; c++)
                r->P[c * D + a] += psi[a] * psi[c] / s;
        for (size_t j = 0; j < r->p; j++)
            for (size_t a = 0; a < D; a++)
                r->B[j * D + a] += psi[a] * (ld)Y[j * n + i] / s;
    }
    free(psi);
}

/* Solve P v = rhs (lower triangle of P) in long double, by Cholesky. */
static void ref_solve(const reference *r, ld *rhs)
{
    size_t D = r->D;
    ld *L = calloc(D * D, sizeof *L);
    assert_non_null(L);
    for (size_t j = 0; j < D; j++) {
        ld dj = r->P[j * D + j];
        for (size_t k = 0; k < j; k++)
            dj -= L[k * D + j] * L[k * D + j];
        assert_true(dj > 0);
        L[j * D + j] = sqrtl(dj);
        for (size_t i = j + 1; i < D; i++) {
            ld v = r->P[j * D + i];
            for (size_t k = 0; k < j; k++)
                v -= L[k * D + i] * L[k * D + j];
            L[j * D + i] = v / L[j * D + j];
        }
    }
    for (size_t i = 0; i < D; i++) {
        for (size_t k = 0; k < i; k++)
            rhs[i] -= L[k * D + i] * rhs[k];
        rhs[i] /= L[i * D + i];
    }
    for (size_t i = D; i-- > 0;) {
        for (size_t k = i + 1; k < D; k++)
            rhs[i] -= L[i * D + k] * rhs[k];
        rhs[i] /= L[i * D + i];
    }
    free(L);
}

/* The reference's latent mean (per output) and variance at x. */
static void ref_predict(const reference *r, const double *x, double *mean, double *var)
{
    size_t D = r->D, p = r->p;
    ld *psi = calloc(D, sizeof *psi), *v = calloc(D, sizeof *v);
    assert_non_null(psi);
    assert_non_null(v);
    ref_features(r, x, psi);
    memcpy(v, psi, D * sizeof *v);
    ref_solve(r, v); /* P^{-1} psi */
    for (size_t j = 0; j < p; j++) {
        ld m = 0;
        for (size_t i = 0; i < D; i++)
            m += v[i] * r->B[j * D + i];
        mean[j] = (double)m;
    }
    ld vv = 0;
    for (size_t i = 0; i < D; i++)
        vv += psi[i] * v[i];
    *var = (double)vv;
    free(psi);
    free(v);
}

/* A point model online from its creation (warmup 0, fixed widths, raw units). */
static gp_model *fixed_model(size_t d, size_t p, size_t D, double noise, double lam,
                             double refactor, gp_kernel **k)
{
    *k = rbf(d, 1, 0.7);
    opts o = {0};
    opt_num(&o, "warmup", 0);
    opt_str(&o, "width_selection", "fixed");
    opt_num(&o, "features", (double)D);
    opt_num(&o, "outputs", (double)p);
    opt_num(&o, "forgetting", lam);
    if (refactor > 0)
        opt_num(&o, "refactor_batch", refactor);
    gp_fit_request req;
    fit_request(&req, NULL, NULL, 0, d, *k, o.v, o.n);
    req.standardize = 0;
    req.noise_given = 1;
    req.noise_fixed = 1;
    req.noise_variance = noise;
    req.input.kind = GP_INPUT_POINT;
    req.input.dim = d;
    return fit_ok(rfgp(), &req, "fixed model");
}

static void compare_with_reference(gp_model *model, const double *X, const double *Y, size_t n,
                                   size_t d, size_t p, double noise, double lam, double rtol,
                                   const char *what)
{
    gp_state st;
    gp_state_init(&st);
    gp_error err;
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    const gp_named_array *W = state_array(&st, "w_out"), *b = state_array(&st, "b_out");
    size_t D = b->rows;
    reference r = {.D = D, .d = d, .W = W->data, .b = b->data, .P = calloc(D * D, sizeof(ld)),
                   .B = calloc(D * p, sizeof(ld)), .p = p};
    assert_non_null(r.P);
    assert_non_null(r.B);
    ref_accumulate(&r, X, Y, n, noise, 1.0, lam);
    /* the model's b is the reference's, and its predictions the dense solve's */
    const double *mb = state_array(&st, "b")->data;
    for (size_t i = 0; i < D * p; i++)
        tu_assert_close(mb[i], (double)r.B[i], rtol, 1e-12, "%s: b[%zu]", what, i);
    size_t m = 5;
    double Xs[5 * 8], mu[5 * 4], var[5 * 4], x[8], rm[4], rv;
    for (size_t i = 0; i < m * d; i++)
        Xs[i] = -2.5 + 5.0 * (double)((i * 7) % 11) / 10.0;
    predict_ok(model, Xs, m, d, 0, mu, var, NULL);
    for (size_t i = 0; i < m; i++) {
        for (size_t k = 0; k < d; k++)
            x[k] = Xs[k * m + i];
        ref_predict(&r, x, rm, &rv);
        for (size_t j = 0; j < p; j++) {
            tu_assert_close(mu[j * m + i], rm[j], rtol, 1e-12, "%s: mean %zu of output %zu", what,
                            i, j);
            tu_assert_close(var[j * m + i], rv, rtol, 0.0, "%s: variance %zu of output %zu",
                            what, i, j);
        }
    }
    free(r.P);
    free(r.B);
    gp_state_free(&st);
}

/* ---- streamed = batch ---- */

static void stream_case(double lam, size_t batch, double refactor, const char *what)
{
    size_t n = 240, d = 2, p = 3, D = 40;
    double noise = 0.01;
    double *X = dalloc(n * d), *Y = dalloc(n * p), *xb = dalloc(batch * d),
           *yb = dalloc(batch * p);
    toy_rows(3, n, d, p, X, Y);
    gp_kernel *k;
    gp_model *model = fixed_model(d, p, D, noise, lam, refactor, &k);
    for (size_t i = 0; i < n; i += batch) {
        size_t b = n - i < batch ? n - i : batch;
        for (size_t r = 0; r < b; r++) {
            for (size_t c = 0; c < d; c++)
                xb[c * b + r] = X[c * n + i + r];
            for (size_t j = 0; j < p; j++)
                yb[j * b + r] = Y[j * n + i + r];
        }
        observe_ok(model, xb, yb, b);
    }
    assert_int_equal(model->n_train, n);
    compare_with_reference(model, X, Y, n, d, p, noise, lam, 1e-9, what);
    const gp_info_item *it = find_info(model, refactor > 0 && batch >= refactor
                                                  ? "refactorisations"
                                                  : "rank_one_updates");
    assert_non_null(it);
    assert_true(it->number > 0);
    gp_model_free(model);
    gp_kernel_free(k);
    free(X);
    free(Y);
    free(xb);
    free(yb);
}

static void test_stream_equals_batch(void **state)
{
    (void)state;
    stream_case(1.0, 1, 0, "rank-one, no forgetting");
    stream_case(0.98, 1, 0, "rank-one, forgetting 0.98");
    stream_case(1.0, 16, 5, "re-factorised batches of 16");
    stream_case(0.97, 16, 5, "re-factorised batches of 16, forgetting 0.97");
    stream_case(0.99, 7, 0, "rank-one batches of 7, forgetting 0.99");
}

/* 10^6 rows one at a time through gp_model_observe, D small, against the
 * dense accumulation of the same rows: the rank-one updates do not drift. */
static void test_million_rows(void **state)
{
    (void)state;
    size_t n = 1000000, d = 3, p = 1, D = 8;
    double noise = 0.01;
    double *X = dalloc(n * d), *Y = dalloc(n);
    toy_rows(11, n, d, p, X, Y);
    gp_kernel *k;
    gp_model *model = fixed_model(d, p, D, noise, 1.0, 0, &k);
    double x[3];
    for (size_t i = 0; i < n; i++) {
        for (size_t k2 = 0; k2 < d; k2++)
            x[k2] = X[k2 * n + i];
        observe_ok(model, x, Y + i, 1);
    }
    compare_with_reference(model, X, Y, n, d, p, noise, 1.0, 1e-9, "10^6 streamed rows");
    gp_model_free(model);
    gp_kernel_free(k);
    free(X);
    free(Y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_equals_batch),
        cmocka_unit_test(test_million_rows),
    };
    return cmocka_run_group_tests_name("rfgp", tests, NULL, NULL);
}
