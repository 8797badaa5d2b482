/* linalg: jitter policy, solves, log-determinant, packing, state arrays. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/base/state.h"
#include "core/linalg/linalg.h"

/* A = B B^T + shift I for a fixed pseudo-random B: SPD with known structure. */
static double *spd_matrix(size_t n, double shift)
{
    double *B = malloc(n * n * sizeof *B), *A = calloc(n * n, sizeof *A);
    for (size_t i = 0; i < n * n; i++)
        B[i] = sin(1.0 + 0.37 * (double)i) + 0.1 * cos(2.3 * (double)i);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++) {
            double s = 0;
            for (size_t k = 0; k < n; k++)
                s += B[k * n + i] * B[k * n + j];
            A[j * n + i] = s + (i == j ? shift : 0.0);
        }
    free(B);
    return A;
}

static void test_cholesky_reconstructs(void **state)
{
    (void)state;
    size_t n = 7;
    double *A = spd_matrix(n, 0.5), *orig = malloc(n * n * sizeof *orig);
    memcpy(orig, A, n * n * sizeof *A);
    gp_chol_info info;
    gp_error err;
    assert_int_equal(gp_cholesky_jitter(A, n, n, &info, &err), GP_OK);
    assert_true(info.jitter == 0.0);
    assert_int_equal(info.attempts, 1);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j <= i; j++) {
            double s = 0;
            for (size_t k = 0; k <= j; k++)
                s += A[k * n + i] * A[k * n + j];
            assert_float_equal(s, orig[j * n + i], 1e-10 * fabs(orig[j * n + j]));
        }
    /* The strict upper triangle still holds the original matrix. */
    for (size_t j = 1; j < n; j++)
        for (size_t i = 0; i < j; i++)
            assert_true(A[j * n + i] == orig[j * n + i]);
    free(A);
    free(orig);
}

static void test_cholesky_jitter_on_singular(void **state)
{
    (void)state;
    /* Rank-1 (duplicated rows): exactly singular, needs jitter. */
    size_t n = 5;
    double A[25];
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < n; j++)
            A[j * n + i] = 2.0;
    gp_chol_info info;
    gp_error err;
    assert_int_equal(gp_cholesky_jitter(A, n, n, &info, &err), GP_OK);
    assert_true(info.jitter > 0.0);
    assert_true(info.jitter <= 1e-2 * 2.0 * (1 + 1e-12));
    assert_true(info.attempts >= 2);
    /* The recorded jitter is what was added: L L^T = A + jitter I. */
    double s = 0;
    for (size_t k = 0; k < n; k++)
        s += A[k * n + (n - 1)] * A[k * n + (n - 1)];
    assert_float_equal(s, 2.0 + info.jitter, 1e-12);
}

static void test_cholesky_nan_and_indefinite(void **state)
{
    (void)state;
    double A[9] = {1, 0.5, 0, 0.5, 1, 0, 0, 0, 1};
    A[1] = NAN;
    gp_error err;
    assert_int_equal(gp_cholesky_jitter(A, 3, 3, NULL, &err), GP_EDATA);
    assert_int_equal(err.code, GP_EDATA);
    assert_non_null(strstr(err.message, "non-finite"));
    double B[4] = {1, 2, 2, 1}; /* eigenvalues 3 and -1: jitter up to 1e-2 cannot help */
    assert_int_equal(gp_cholesky_jitter(B, 2, 2, NULL, &err), GP_ENOTPD);
    assert_non_null(strstr(err.message, "jitter"));
    /* The input is left as it was (lower triangle restored). */
    assert_true(B[0] == 1 && B[1] == 2 && B[3] == 1);
}

static void test_solve_and_logdet(void **state)
{
    (void)state;
    size_t n = 6;
    double *A = spd_matrix(n, 1.0), *orig = malloc(n * n * sizeof *orig);
    memcpy(orig, A, n * n * sizeof *A);
    double b[6] = {1, -2, 0.5, 3, -1, 0.25}, x[6];
    memcpy(x, b, sizeof b);
    assert_int_equal(gp_cholesky_jitter(A, n, n, NULL, NULL), GP_OK);
    gp_chol_solve(A, n, n, x, 1, n);
    for (size_t i = 0; i < n; i++) {
        double s = 0;
        for (size_t j = 0; j < n; j++)
            s += orig[j * n + i] * x[j];
        assert_float_equal(s, b[i], 1e-10);
    }
    /* log det via an independent route: product of LU pivots by Gaussian elimination. */
    double *G = malloc(n * n * sizeof *G), det = 1.0;
    memcpy(G, orig, n * n * sizeof *G);
    for (size_t k = 0; k < n; k++) {
        det *= G[k * n + k];
        for (size_t i = k + 1; i < n; i++) {
            double f = G[k * n + i] / G[k * n + k];
            for (size_t j = k; j < n; j++)
                G[j * n + i] -= f * G[j * n + k];
        }
    }
    assert_float_equal(gp_chol_logdet(A, n, n), log(det), 1e-10);
    free(G);
    free(A);
    free(orig);
}

static void test_pack_roundtrip(void **state)
{
    (void)state;
    size_t n = 5;
    double A[25], B[25], packed[15];
    for (size_t i = 0; i < 25; i++)
        A[i] = (double)i + 0.5;
    gp_pack_lower(A, n, n, packed);
    gp_unpack_lower(packed, n, B, n);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++)
            assert_true(B[j * n + i] == (i >= j ? A[j * n + i] : 0.0));
}

static void test_sizes_and_state(void **state)
{
    (void)state;
    size_t c;
    gp_error err;
    assert_int_equal(gp_checked_size(SIZE_MAX / 2, 3, &c, &err), GP_ETOOBIG);
    assert_int_equal(gp_checked_size(1000, 1000, &c, &err), GP_OK);
    assert_int_equal(c, 1000000);
    gp_state st;
    gp_state_init(&st);
    double v[3] = {1, 2, 3};
    assert_int_equal(gp_state_put(&st, "v", 3, 1, v, &err), GP_OK);
    assert_int_equal(gp_state_put(&st, "v", 3, 1, v, &err), GP_EINVAL);
    assert_int_equal(gp_state_put_scalar(&st, "s", 4.5, &err), GP_OK);
    const double *p;
    assert_int_equal(gp_state_get(&st, "v", 1, 3, &p, &err), GP_EDATA);
    assert_string_equal(err.field, "v");
    assert_int_equal(gp_state_get(&st, "v", 3, 1, &p, &err), GP_OK);
    assert_true(p[2] == 3.0 && p != v);
    double s;
    assert_int_equal(gp_state_get_scalar(&st, "s", &s, &err), GP_OK);
    assert_true(s == 4.5);
    assert_int_equal(gp_state_get_scalar(&st, "missing", &s, &err), GP_EDATA);
    gp_state_free(&st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cholesky_reconstructs),
        cmocka_unit_test(test_cholesky_jitter_on_singular),
        cmocka_unit_test(test_cholesky_nan_and_indefinite),
        cmocka_unit_test(test_solve_and_logdet),
        cmocka_unit_test(test_pack_roundtrip),
        cmocka_unit_test(test_sizes_and_state),
    };
    return cmocka_run_group_tests_name("linalg", tests, NULL, NULL);
}
