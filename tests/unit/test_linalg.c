/* linalg: jitter policy, solves (the batch-invariant one against dtrsm and against
 * itself), log-determinant, packing, state arrays. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>
#include <cmocka.h>

#include "core/base/parallel.h"
#include "core/base/state.h"
#include "core/linalg/linalg.h"
#include "tests/unit/testutil.h"

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

/* ---- gp_solve_lower_columns ---- */

/* The sizes of L tried: the edge cases, the remainders of the 4-column blocks,
 * and 1100, where a group of 64 columns no longer fits the solve's cache
 * budget and it works in row panels of 480 (core/linalg/linalg.c). */
static const size_t solve_sizes[] = {1, 2, 3, 5, 8, 63, 200, 1100};
#define N_SOLVE_SIZES (sizeof solve_sizes / sizeof solve_sizes[0])

/* L = chol(K + 0.1 I), K an rbf kernel on n seeded points of [0, 10) (a factor
 * exact caches), with leading dimension ldl > n; its strict upper triangle and
 * the rows below n hold NaN, which a solve reading them would spread. */
static double *factor_with_nan(size_t n, size_t ldl)
{
    double *x = malloc(n * sizeof *x), *L = malloc(ldl * n * sizeof *L);
    uint64_t s = 0x2545F4914F6CDD1Dull;
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[i] = 10.0 * (double)(s >> 11) / 9007199254740992.0;
    }
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < ldl; i++) {
            double d = i < n ? x[i] - x[j] : 0.0;
            L[j * ldl + i] = i < n ? exp(-0.5 * d * d) + (i == j ? 0.1 : 0.0) : NAN;
        }
    assert_int_equal(gp_cholesky_jitter(L, n, ldl, NULL, NULL), GP_OK);
    for (size_t j = 1; j < n; j++)
        for (size_t i = 0; i < j; i++)
            L[j * ldl + i] = NAN;
    free(x);
    return L;
}

/* n x k right-hand sides (leading dimension ldb) of seeded values, the rows
 * below n set to a sentinel the solve must leave alone. */
static double *rhs(size_t n, size_t k, size_t ldb, double sentinel)
{
    double *B = malloc(ldb * k * sizeof *B);
    for (size_t j = 0; j < k; j++)
        for (size_t i = 0; i < ldb; i++)
            B[j * ldb + i] = i < n ? sin(0.7 * (double)i + 1.3 * (double)j) + 0.1 : sentinel;
    return B;
}

static void test_solve_columns_against_dtrsm(void **state)
{
    (void)state;
    static const size_t counts[] = {1, 2, 3, 4, 7, 17, 70};
    for (size_t a = 0; a < N_SOLVE_SIZES; a++) {
        size_t n = solve_sizes[a], ldl = n + 3, ldb = n + 2;
        double *L = factor_with_nan(n, ldl), *Lc = malloc(n * n * sizeof *Lc);
        /* dtrsm gets a clean copy: its kernels may read the upper triangle's padding. */
        for (size_t j = 0; j < n; j++)
            for (size_t i = 0; i < n; i++)
                Lc[j * n + i] = i >= j ? L[j * ldl + i] : 0.0;
        for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
            size_t k = counts[c];
            double *B = rhs(n, k, ldb, -7.5), *R = rhs(n, k, ldb, -7.5);
            gp_solve_lower_columns(L, n, ldl, B, k, ldb);
            cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit,
                        (blasint)n, (blasint)k, 1.0, Lc, (blasint)n, R, (blasint)ldb);
            for (size_t j = 0; j < k; j++) {
                double scale = 0.0;
                for (size_t i = 0; i < n; i++)
                    scale = fmax(scale, fabs(R[j * ldb + i]));
                for (size_t i = 0; i < n; i++)
                    tu_assert_within(B[j * ldb + i], R[j * ldb + i], 1e-12 * scale,
                                     "n %zu, %zu columns: x[%zu, %zu]", n, k, i, j);
                for (size_t i = n; i < ldb; i++)
                    assert_true(B[j * ldb + i] == -7.5);
            }
            free(B);
            free(R);
        }
        free(L);
        free(Lc);
    }
}

/* The order of operations gp_solve_lower_columns promises, one column at a
 * time and unblocked: b_i <- fma(-L_ik, x_k, b_i) for k < i in increasing k,
 * then x_i = b_i / L_ii (fma here is libm's: the same bits as any vfmadd). */
static void forward_substitution(const double *L, size_t n, size_t ldl, double *b)
{
    for (size_t k = 0; k < n; k++) {
        b[k] /= L[k * ldl + k];
        for (size_t i = k + 1; i < n; i++)
            b[i] = fma(-L[k * ldl + i], b[k], b[i]);
    }
}

/* Solve columns [c0, c0 + g) of B (leading dimension ldb) on their own. */
static void solve_group(const double *L, size_t n, size_t ldl, double *B, size_t ldb, size_t c0,
                        size_t g)
{
    gp_solve_lower_columns(L, n, ldl, B + c0 * ldb, g, ldb);
}

static void test_solve_columns_batch_invariant(void **state)
{
    (void)state;
    size_t k = 70; /* more than one task of 64 columns */
    for (size_t a = 0; a < N_SOLVE_SIZES; a++) {
        size_t n = solve_sizes[a], ldl = n + 1, ldb = n + 5, col = n * sizeof(double);
        double *L = factor_with_nan(n, ldl), *ref = rhs(n, k, ldb, 0.0);
        double *B = malloc(ldb * k * sizeof *B), *one = malloc(col);
        gp_solve_lower_columns(L, n, ldl, ref, k, ldb);

        /* Each column alone, in a buffer of its own (leading dimension n), and
         * by the unblocked loop: the same bits. */
        for (size_t j = 0; j < k; j++) {
            double *B0 = rhs(n, k, ldb, 0.0);
            memcpy(one, B0 + j * ldb, col);
            gp_solve_lower_columns(L, n, ldl, one, 1, n);
            assert_memory_equal(one, ref + j * ldb, col);
            forward_substitution(L, n, ldl, B0 + j * ldb);
            assert_memory_equal(B0 + j * ldb, ref + j * ldb, col);
            free(B0);
        }
        /* Consecutive groups of every size 1..17: a column sits at every
         * position of a group, next to every other column. */
        for (size_t g = 1; g <= 17; g++) {
            double *B0 = rhs(n, k, ldb, 0.0);
            for (size_t c0 = 0; c0 < k; c0 += g)
                solve_group(L, n, ldl, B0, ldb, c0, k - c0 < g ? k - c0 : g);
            for (size_t j = 0; j < k; j++)
                assert_memory_equal(B0 + j * ldb, ref + j * ldb, col);
            free(B0);
        }
        /* The columns in reverse order, and one column copied into all 17
         * places of a group. */
        double *B0 = rhs(n, k, ldb, 0.0);
        for (size_t j = 0; j < k; j++)
            memcpy(B + j * ldb, B0 + (k - 1 - j) * ldb, col);
        gp_solve_lower_columns(L, n, ldl, B, k, ldb);
        for (size_t j = 0; j < k; j++)
            assert_memory_equal(B + j * ldb, ref + (k - 1 - j) * ldb, col);
        for (size_t j = 0; j < 17; j++)
            memcpy(B + j * ldb, B0 + 5 * ldb, col);
        gp_solve_lower_columns(L, n, ldl, B, 17, ldb);
        for (size_t j = 0; j < 17; j++)
            assert_memory_equal(B + j * ldb, ref + 5 * ldb, col);
        /* Every update path this CPU runs (the solve picks the fastest). */
        for (int path = 0; path <= 1; path++) {
            memcpy(B, B0, ldb * k * sizeof *B);
            gp_solve_lower_columns_path(L, n, ldl, B, k, ldb, path);
            for (size_t j = 0; j < k; j++)
                assert_memory_equal(B + j * ldb, ref + j * ldb, col);
        }
        /* One thread and two: the tasks of 64 columns split differently. */
        for (int t = 1; t <= 2; t++) {
            gp_parallel_set_threads(t);
            memcpy(B, B0, ldb * k * sizeof *B);
            gp_solve_lower_columns(L, n, ldl, B, k, ldb);
            for (size_t j = 0; j < k; j++)
                assert_memory_equal(B + j * ldb, ref + j * ldb, col);
        }
        gp_parallel_set_threads(0);
        free(B0);
        free(B);
        free(one);
        free(ref);
        free(L);
    }
}

/* The packed solve gives gp_solve_lower_columns's bits on the unpacked
 * factor for every column: in one call of 70 (two tasks), in groups of 1..9
 * (every position of a 4-column group and of the remainder), alone, and
 * with 1 and 2 threads; the rows beyond n stay untouched. */
static void test_solve_packed_columns(void **state)
{
    (void)state;
    size_t k = 70;
    for (size_t a = 0; a < N_SOLVE_SIZES; a++) {
        size_t n = solve_sizes[a], ldl = n + 1, ldb = n + 3, col = n * sizeof(double);
        double *L = factor_with_nan(n, ldl), *ref = rhs(n, k, ldb, -7.5);
        double *P = malloc(n * (n + 1) / 2 * sizeof *P);
        gp_pack_lower(L, n, ldl, P);
        gp_solve_lower_columns(L, n, ldl, ref, k, ldb);
        for (size_t g = 1; g <= 9; g++) {
            double *B = rhs(n, k, ldb, -7.5);
            for (size_t c0 = 0; c0 < k; c0 += g)
                gp_solve_lower_packed_columns(P, n, B + c0 * ldb, k - c0 < g ? k - c0 : g, ldb);
            for (size_t j = 0; j < k; j++) {
                assert_memory_equal(B + j * ldb, ref + j * ldb, col);
                for (size_t i = n; i < ldb; i++)
                    assert_true(B[j * ldb + i] == -7.5);
            }
            free(B);
        }
        for (int t = 1; t <= 2; t++) {
            gp_parallel_set_threads(t);
            double *B = rhs(n, k, ldb, -7.5);
            gp_solve_lower_packed_columns(P, n, B, k, ldb);
            for (size_t j = 0; j < k; j++)
                assert_memory_equal(B + j * ldb, ref + j * ldb, col);
            free(B);
        }
        gp_parallel_set_threads(0);
        free(P);
        free(ref);
        free(L);
    }
}

/* The lanes solve gives gp_solve_lower_columns's bits for every column: 70
 * (two groups of 32 and 6 more) and 5 (no group), the rows beyond n intact. */
static void test_solve_lanes_columns(void **state)
{
    (void)state;
    size_t counts[] = {70, 5};
    for (size_t a = 0; a < N_SOLVE_SIZES; a++)
        for (size_t c = 0; c < 2; c++) {
            size_t n = solve_sizes[a], k = counts[c], ldl = n + 1, ldb = n + 3;
            double *L = factor_with_nan(n, ldl), *ref = rhs(n, k, ldb, -7.5);
            double *B = rhs(n, k, ldb, -7.5), *work = malloc(GP_SOLVE_LANES_WORK(n) * sizeof *work);
            gp_solve_lower_columns(L, n, ldl, ref, k, ldb);
            gp_solve_lower_columns_lanes(L, n, ldl, B, k, ldb, work);
            assert_memory_equal(B, ref, ldb * k * sizeof *B);
            free(work);
            free(B);
            free(ref);
            free(L);
        }
}

static void test_dot_fixed_order(void **state)
{
    (void)state;
    /* Exact sums (small integers) for every remainder of the 8 partial sums,
     * then the same bits wherever the vectors sit in memory. */
    double x[45], y[45], xs[46], ys[46];
    for (size_t i = 0; i < 45; i++) {
        x[i] = (double)(i % 7) - 3.0;
        y[i] = (double)(i % 5) + 1.0;
    }
    for (size_t n = 0; n <= 45; n++) {
        double want = 0.0;
        for (size_t i = 0; i < n; i++)
            want += x[i] * y[i];
        assert_true(gp_dot(x, y, n) == want);
    }
    for (size_t i = 0; i < 45; i++) {
        x[i] = sin(1.1 * (double)i) * 1e3;
        y[i] = cos(0.3 * (double)i) / 7.0;
    }
    memcpy(xs + 1, x, sizeof x);
    memcpy(ys, y, sizeof y);
    for (size_t n = 0; n <= 45; n++) {
        double a = gp_dot(x, y, n), b = gp_dot(xs + 1, ys, n);
        assert_memory_equal(&a, &b, sizeof a);
    }
}

/* gp_dot_columns: every entry gp_dot's bits, for every shape around the 4 x 4
 * tiles (full tiles, edges, k below and above 8), with leading dimensions
 * larger than k; and a column's results the same whatever the other columns
 * and its position (the call on one column of X alone, at another offset). */
static void test_dot_columns_is_gp_dot(void **state)
{
    (void)state;
    enum { KM = 21, PM = 9, QM = 10 };
    double A[(KM + 1) * PM], X[(KM + 3) * QM + 1], C[(PM + 2) * QM], one[PM];
    for (size_t i = 0; i < sizeof A / sizeof *A; i++)
        A[i] = sin(0.7 * (double)i) * 1e2;
    for (size_t i = 0; i < sizeof X / sizeof *X; i++)
        X[i] = cos(1.3 * (double)i) / 3.0;
    for (size_t k = 0; k <= KM; k++)
        for (size_t p = 1; p <= PM; p++)
            for (size_t q = 1; q <= QM; q++) {
                size_t lda = KM + 1, ldx = KM + 3, ldc = PM + 2;
                gp_dot_columns(A, lda, p, X, ldx, q, k, C, ldc);
                for (size_t i = 0; i < q; i++) {
                    for (size_t j = 0; j < p; j++) {
                        double want = gp_dot(A + j * lda, X + i * ldx, k);
                        if (memcmp(&want, &C[i * ldc + j], sizeof want) != 0)
                            fail_msg("k %zu p %zu q %zu: entry (%zu, %zu) is not gp_dot's", k,
                                     p, q, j, i);
                    }
                    double Xi[KM + 1];
                    memcpy(Xi + 1, X + i * ldx, k * sizeof *Xi);
                    gp_dot_columns(A, lda, p, Xi + 1, k, 1, k, one, p);
                    assert_memory_equal(one, C + i * ldc, p * sizeof *one);
                }
            }
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
        cmocka_unit_test(test_solve_columns_against_dtrsm),
        cmocka_unit_test(test_solve_columns_batch_invariant),
        cmocka_unit_test(test_solve_packed_columns),
        cmocka_unit_test(test_solve_lanes_columns),
        cmocka_unit_test(test_dot_fixed_order),
        cmocka_unit_test(test_dot_columns_is_gp_dot),
        cmocka_unit_test(test_pack_roundtrip),
        cmocka_unit_test(test_sizes_and_state),
    };
    return cmocka_run_group_tests_name("linalg", tests, NULL, NULL);
}
