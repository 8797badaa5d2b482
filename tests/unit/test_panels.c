/* Unit tests for core/linalg/panels.c: the panelled solve, symmetric product
 * and product agree with one BLAS call to rounding, give the same bits for 1,
 * 2 and 3 compute threads, and leave what they must not write alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/linalg/panels.h"

static double *random_matrix(size_t count, unsigned seed)
{
    double *a = malloc(count * sizeof *a);
    assert_non_null(a);
    uint64_t s = 0x9e3779b97f4a7c15ULL * (seed + 1);
    for (size_t i = 0; i < count; i++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        a[i] = (double)(s >> 11) / 9007199254740992.0 - 0.5;
    }
    return a;
}

/* A well-conditioned lower triangle (n x n). */
static double *lower_factor(size_t n)
{
    double *L = random_matrix(n * n, 7);
    for (size_t j = 0; j < n; j++) {
        for (size_t i = 0; i < j; i++)
            L[i + j * n] = 0.0;
        L[j + j * n] = 2.0 + fabs(L[j + j * n]);
        for (size_t i = j + 1; i < n; i++)
            L[i + j * n] *= 0.1;
    }
    return L;
}

static double max_rel_diff(const double *a, const double *b, size_t count)
{
    double worst = 0.0, scale = 0.0;
    for (size_t i = 0; i < count; i++)
        scale = fmax(scale, fabs(b[i]));
    for (size_t i = 0; i < count; i++)
        worst = fmax(worst, fabs(a[i] - b[i]));
    return scale > 0.0 ? worst / scale : worst;
}

enum { OP_TRSM, OP_TRSM_T, OP_SYRK_N, OP_SYRK_T, OP_GEMM };

/* Sizes large enough for several panels (GP_PANEL_COLS, GP_PANEL_SYRK_PARTS). */
#define TN 120   /* order of the triangle, rows of the gemm */
#define TCOLS 1100 /* right-hand sides, columns of the gemm: 5 panels */
#define SN 300   /* order of the symmetric product */
#define SK 700   /* its inner dimension */

static void run_op(int op, const double *L, const double *A, const double *B, double *C)
{
    switch (op) {
    case OP_TRSM:
    case OP_TRSM_T:
        gp_panel_trsm_lower(L, TN, TN, op == OP_TRSM_T, C, TCOLS, TN);
        break;
    case OP_SYRK_N: /* A is SN x SK */
        gp_panel_syrk_lower(0, SN, SK, 0.5, A, SN, C, SN);
        break;
    case OP_SYRK_T: /* A is SK x SN */
        gp_panel_syrk_lower(1, SN, SK, 0.5, A, SK, C, SN);
        break;
    default: /* C (TN x TCOLS) = 2 L B - C */
        gp_panel_gemm_nn(TN, TCOLS, TN, 2.0, L, TN, B, TN, -1.0, C, TN);
    }
}

static void run_reference(int op, const double *L, const double *A, const double *B, double *C)
{
    switch (op) {
    case OP_TRSM:
    case OP_TRSM_T:
        cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower,
                    op == OP_TRSM_T ? CblasTrans : CblasNoTrans, CblasNonUnit, TN, TCOLS, 1.0, L,
                    TN, C, TN);
        break;
    case OP_SYRK_N:
        cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, SN, SK, 0.5, A, SN, 0.0, C, SN);
        break;
    case OP_SYRK_T:
        cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, SN, SK, 0.5, A, SK, 0.0, C, SN);
        break;
    default:
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, TN, TCOLS, TN, 2.0, L, TN, B, TN,
                    -1.0, C, TN);
    }
}

/* The lower triangle of an SN x SN matrix into a packed copy (what syrk writes). */
static void lower_of(const double *C, double *out)
{
    size_t k = 0;
    for (size_t j = 0; j < SN; j++)
        for (size_t i = j; i < SN; i++)
            out[k++] = C[i + j * SN];
}

static void check_op(int op)
{
    int syrk = op == OP_SYRK_N || op == OP_SYRK_T;
    size_t count = syrk ? SN * SN : TN * TCOLS;
    double *L = lower_factor(TN), *A = random_matrix(SN * SK, 3), *B = random_matrix(TN * TCOLS, 5);
    double *start = random_matrix(count, 11), *ref = malloc(count * sizeof *ref);
    double *got = malloc(count * sizeof *got), *first = malloc(count * sizeof *first);
    assert_true(ref && got && first);
    memcpy(ref, start, count * sizeof *ref);
    run_reference(op, L, A, B, ref);
    for (int threads = 1; threads <= 3; threads++) {
        gp_parallel_set_threads(threads);
        memcpy(got, start, count * sizeof *got);
        run_op(op, L, A, B, got);
        if (syrk) { /* only the lower triangle is the answer */
            double *pg = malloc(count * sizeof *pg), *pr = malloc(count * sizeof *pr);
            assert_true(pg && pr);
            lower_of(got, pg);
            lower_of(ref, pr);
            size_t packed = SN * (SN + 1) / 2;
            if (max_rel_diff(pg, pr, packed) > 1e-13)
                fail_msg("op %d: %g from one BLAS call", op, max_rel_diff(pg, pr, packed));
            free(pg);
            free(pr);
        } else if (max_rel_diff(got, ref, count) > 1e-13) {
            fail_msg("op %d: %g from one BLAS call", op, max_rel_diff(got, ref, count));
        }
        if (threads == 1)
            memcpy(first, got, count * sizeof *first);
        else if (memcmp(first, got, count * sizeof *got) != 0)
            fail_msg("op %d: %d threads give other bits than 1", op, threads);
    }
    gp_parallel_set_threads(0);
    free(L);
    free(A);
    free(B);
    free(start);
    free(ref);
    free(got);
    free(first);
}

static void test_trsm(void **state)
{
    (void)state;
    check_op(OP_TRSM);
    check_op(OP_TRSM_T);
}

static void test_syrk(void **state)
{
    (void)state;
    check_op(OP_SYRK_N);
    check_op(OP_SYRK_T);
}

static void test_gemm(void **state)
{
    (void)state;
    check_op(OP_GEMM);
}

/* The symmetric product writes the lower triangle and at most the upper
 * parts of its diagonal blocks: entries above the largest block stay. */
static void test_syrk_leaves_far_upper(void **state)
{
    (void)state;
    double *A = random_matrix(SN * SK, 3), *C = malloc(SN * SN * sizeof *C);
    assert_non_null(C);
    for (size_t i = 0; i < SN * SN; i++)
        C[i] = 42.0;
    gp_panel_syrk_lower(0, SN, SK, 1.0, A, SN, C, SN);
    assert_true(C[0 + (SN - 1) * SN] == 42.0); /* row 0, last column */
    free(A);
    free(C);
}

int main(void)
{
    openblas_set_num_threads(1); /* as the daemon runs it: all threads are the pool's */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trsm),
        cmocka_unit_test(test_syrk),
        cmocka_unit_test(test_gemm),
        cmocka_unit_test(test_syrk_leaves_far_upper),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
