/* Method "sgpr" (core/sgpr.h): the collapsed bound against the renyi note's
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

#include "core/exact.h"
#include "core/inducing.h"
#include "core/method.h"
#include "core/rng.h"
#include "core/sgpr.h"
#include "core/state.h"

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

/* The renyi note's §9 problem: 8 points, Z = (-1.5, 0, 1.5), rbf v = 1.2,
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

/* Random points in [-2, 2]^d and a smooth target. */
static void random_problem(size_t n, size_t d, uint64_t seed, double *X, double *y)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n * d; i++)
        X[i] = 4.0 * gp_rng_uniform(&rng) - 2.0;
    for (size_t i = 0; i < n; i++) {
        double s = 0.0;
        for (size_t j = 0; j < d; j++)
            s += sin(1.3 * X[i * d + j] + (double)j);
        y[i] = s + 0.1 * gp_rng_normal(&rng);
    }
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

/* ---- the bound ---- */

static void test_reference_vfe(void **state)
{
    (void)state;
    double y[8];
    ref_targets(y);
    gp_kernel *k = ref_kernel();
    /* renyi-gp.md §9: VFE (a -> 1) = -33.23587962680718. */
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
    random_problem(n, d, 7, X, y);
    random_problem(m, d, 8, Z, y + 0); /* Z random too; y reset below */
    random_problem(n, d, 7, X, y);
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
    random_problem(n, d, 11, X, y);
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
static void check_gradients(gp_kernel_type type, int ard, uint64_t seed)
{
    size_t n = 50, d = 2, m = 8;
    double *X = dalloc(n * d), *y = dalloc(n), *Z = dalloc(m * d), *yz = dalloc(m);
    random_problem(n, d, seed, X, y);
    random_problem(m, d, seed + 100, Z, yz);
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
    double s2 = 0.07, h = 1e-5;
    bound_of(k, s2, X, n, d, y, Z, m, grad, gz);
    for (size_t p = 0; p < np; p++) {
        double save = theta[p];
        theta[p] = save + h;
        gp_kernel_set_params(k, theta);
        double fp = bound_of(k, s2, X, n, d, y, Z, m, NULL, NULL);
        theta[p] = save - h;
        gp_kernel_set_params(k, theta);
        double fm = bound_of(k, s2, X, n, d, y, Z, m, NULL, NULL);
        theta[p] = save;
        gp_kernel_set_params(k, theta);
        double fd = (fp - fm) / (2.0 * h);
        if (fabs(fd - grad[p]) > 1e-6 * fmax(1.0, fabs(fd)))
            fail_msg("%s param %zu: analytic %.12g, fd %.12g", gp_kernel_type_name(type), p,
                     grad[p], fd);
    }
    double fp = bound_of(k, s2 * exp(h), X, n, d, y, Z, m, NULL, NULL);
    double fm = bound_of(k, s2 * exp(-h), X, n, d, y, Z, m, NULL, NULL);
    double fd = (fp - fm) / (2.0 * h);
    if (fabs(fd - grad[np]) > 1e-6 * fmax(1.0, fabs(fd)))
        fail_msg("log s2: analytic %.12g, fd %.12g", grad[np], fd);
    for (size_t i = 0; i < m * d; i++) {
        double save = Z[i];
        Z[i] = save + h;
        fp = bound_of(k, s2, X, n, d, y, Z, m, NULL, NULL);
        Z[i] = save - h;
        fm = bound_of(k, s2, X, n, d, y, Z, m, NULL, NULL);
        Z[i] = save;
        fd = (fp - fm) / (2.0 * h);
        if (fabs(fd - gz[i]) > 1e-6 * fmax(1.0, fabs(fd)))
            fail_msg("%s Z[%zu]: analytic %.12g, fd %.12g", gp_kernel_type_name(type), i, gz[i],
                     fd);
    }
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_reference_vfe),
        cmocka_unit_test(test_dense_agreement),
        cmocka_unit_test(test_z_equals_x_is_exact),
        cmocka_unit_test(test_gradients),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
