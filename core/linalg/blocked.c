/* Blocked, cancellable Cholesky factor and inverse: see core/linalg/blocked.h.
 *
 * Every routine is recursive on the order of its triangle: a triangle of
 * order n > GP_BLOCK_ORDER is split at n1 (a multiple of the block order, about
 * n / 2), so the products between the halves are large gemms (near the BLAS
 * peak) and the recursion ends on triangles LAPACK handles in a few
 * milliseconds. Column-major throughout; T + i + j * ld is element (i, j). */
#include "core/linalg/blocked.h"

#include <cblas.h>
#include <lapacke.h>

#define ELEM(M, ld, i, j) ((M) + (size_t)(j) * (ld) + (size_t)(i))
#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* Where a triangle of order n > GP_BLOCK_ORDER is split: n / 2 rounded up to a
 * multiple of the block order, so every base triangle but the last is full. */
static size_t split_at(size_t n)
{
    return (n / 2 + GP_BLOCK_ORDER - 1) / GP_BLOCK_ORDER * GP_BLOCK_ORDER;
}

static int stop(const gp_cancel *c)
{
    return gp_cancel_requested(c) ? GP_ECANCELLED : GP_OK;
}

/* ---- tiled products ---------------------------------------------------- */

typedef struct gemm_args {
    CBLAS_TRANSPOSE ta, tb;
    size_t m, n, k;
    double alpha;
    const double *A;
    size_t lda;
    const double *B;
    size_t ldb;
    double *C;
    size_t ldc;
} gemm_args;

/* C (m x n) += alpha op(A) op(B), inner dimension k, tile by tile. The inner
 * pieces of one output tile are added in order, so the result does not depend
 * on anything but the sizes. */
static int gemm_tiled(const gemm_args *g, const gp_cancel *c)
{
    for (size_t j = 0; j < g->n; j += GP_BLOCK_TILE)
        for (size_t i = 0; i < g->m; i += GP_BLOCK_TILE)
            for (size_t p = 0; p < g->k; p += GP_BLOCK_DEPTH) {
                if (stop(c))
                    return GP_ECANCELLED;
                size_t mb = MIN(GP_BLOCK_TILE, g->m - i), nb = MIN(GP_BLOCK_TILE, g->n - j),
                       kb = MIN(GP_BLOCK_DEPTH, g->k - p);
                const double *a = g->ta == CblasNoTrans ? ELEM(g->A, g->lda, i, p)
                                                        : ELEM(g->A, g->lda, p, i);
                const double *b = g->tb == CblasNoTrans ? ELEM(g->B, g->ldb, p, j)
                                                        : ELEM(g->B, g->ldb, j, p);
                cblas_dgemm(CblasColMajor, g->ta, g->tb, (blasint)mb, (blasint)nb, (blasint)kb,
                            g->alpha, a, (blasint)g->lda, b, (blasint)g->ldb, 1.0,
                            ELEM(g->C, g->ldc, i, j), (blasint)g->ldc);
            }
    return GP_OK;
}

/* Lower triangle of C (n x n) += alpha op(A) op(A)^T with op(A) n x k: A is
 * n x k (NoTrans) or k x n (Trans). Column panels: a dsyrk on the diagonal
 * block, a tiled gemm below it. */
static int syrk_tiled(CBLAS_TRANSPOSE t, size_t n, size_t k, double alpha, const double *A,
                      size_t lda, double *C, size_t ldc, const gp_cancel *c)
{
    int notrans = t == CblasNoTrans;
    for (size_t j = 0; j < n; j += GP_BLOCK_TILE) {
        size_t jb = MIN(GP_BLOCK_TILE, n - j);
        for (size_t p = 0; p < k; p += GP_BLOCK_DEPTH) {
            if (stop(c))
                return GP_ECANCELLED;
            size_t kb = MIN(GP_BLOCK_DEPTH, k - p);
            const double *a = notrans ? ELEM(A, lda, j, p) : ELEM(A, lda, p, j);
            cblas_dsyrk(CblasColMajor, CblasLower, t, (blasint)jb, (blasint)kb, alpha, a,
                        (blasint)lda, 1.0, ELEM(C, ldc, j, j), (blasint)ldc);
        }
        gemm_args g = {notrans ? CblasNoTrans : CblasTrans,
                       notrans ? CblasTrans : CblasNoTrans,
                       n - j - jb, jb, k, alpha,
                       notrans ? ELEM(A, lda, j + jb, 0) : ELEM(A, lda, 0, j + jb), lda,
                       notrans ? ELEM(A, lda, j, 0) : ELEM(A, lda, 0, j), lda,
                       ELEM(C, ldc, j + jb, j), ldc};
        if (gemm_tiled(&g, c))
            return GP_ECANCELLED;
    }
    return GP_OK;
}

/* ---- triangular solves and products, recursive on the triangle ------------
 * L (k x k, lower, ldl) = [a 0; b c] with a of order k1 = split_at(k). */

/* B (m x k) := B L^-T: X1 = B1 a^-T, B2 -= X1 b^T, X2 = B2 c^-T. */
static int trsm_rlt(size_t m, size_t k, const double *L, size_t ldl, double *B, size_t ldb,
                    const gp_cancel *c)
{
    if (k <= GP_BLOCK_ORDER) {
        if (stop(c))
            return GP_ECANCELLED;
        cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, (blasint)m,
                    (blasint)k, 1.0, L, (blasint)ldl, B, (blasint)ldb);
        return GP_OK;
    }
    size_t k1 = split_at(k), k2 = k - k1;
    gemm_args g = {CblasNoTrans, CblasTrans, m, k2, k1, -1.0, B, ldb,
                   ELEM(L, ldl, k1, 0), ldl, ELEM(B, ldb, 0, k1), ldb};
    int rc = trsm_rlt(m, k1, L, ldl, B, ldb, c);
    if (rc == GP_OK)
        rc = gemm_tiled(&g, c);
    if (rc == GP_OK)
        rc = trsm_rlt(m, k2, ELEM(L, ldl, k1, k1), ldl, ELEM(B, ldb, 0, k1), ldb, c);
    return rc;
}

/* B (m x k) := B L^-1: X2 = B2 c^-1, B1 -= X2 b, X1 = B1 a^-1. */
static int trsm_rln(size_t m, size_t k, const double *L, size_t ldl, double *B, size_t ldb,
                    const gp_cancel *c)
{
    if (k <= GP_BLOCK_ORDER) {
        if (stop(c))
            return GP_ECANCELLED;
        cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit,
                    (blasint)m, (blasint)k, 1.0, L, (blasint)ldl, B, (blasint)ldb);
        return GP_OK;
    }
    size_t k1 = split_at(k), k2 = k - k1;
    gemm_args g = {CblasNoTrans, CblasNoTrans, m, k1, k2, -1.0, ELEM(B, ldb, 0, k1), ldb,
                   ELEM(L, ldl, k1, 0), ldl, B, ldb};
    int rc = trsm_rln(m, k2, ELEM(L, ldl, k1, k1), ldl, ELEM(B, ldb, 0, k1), ldb, c);
    if (rc == GP_OK)
        rc = gemm_tiled(&g, c);
    if (rc == GP_OK)
        rc = trsm_rln(m, k1, L, ldl, B, ldb, c);
    return rc;
}

/* B (k x n) := L^-1 B: X1 = a^-1 B1, B2 -= b X1, X2 = c^-1 B2. */
static int trsm_lln(size_t k, size_t n, const double *L, size_t ldl, double *B, size_t ldb,
                    const gp_cancel *c)
{
    if (k <= GP_BLOCK_ORDER) {
        if (stop(c))
            return GP_ECANCELLED;
        cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)k,
                    (blasint)n, 1.0, L, (blasint)ldl, B, (blasint)ldb);
        return GP_OK;
    }
    size_t k1 = split_at(k), k2 = k - k1;
    gemm_args g = {CblasNoTrans, CblasNoTrans, k2, n, k1, -1.0, ELEM(L, ldl, k1, 0), ldl,
                   B, ldb, B + k1, ldb};
    int rc = trsm_lln(k1, n, L, ldl, B, ldb, c);
    if (rc == GP_OK)
        rc = gemm_tiled(&g, c);
    if (rc == GP_OK)
        rc = trsm_lln(k2, n, ELEM(L, ldl, k1, k1), ldl, B + k1, ldb, c);
    return rc;
}

/* B (k x n) := L^T B: B1 := a^T B1, B1 += b^T B2 (B2 still as given),
 * B2 := c^T B2. */
static int trmm_llt(size_t k, size_t n, const double *L, size_t ldl, double *B, size_t ldb,
                    const gp_cancel *c)
{
    if (k <= GP_BLOCK_ORDER) {
        if (stop(c))
            return GP_ECANCELLED;
        cblas_dtrmm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, (blasint)k,
                    (blasint)n, 1.0, L, (blasint)ldl, B, (blasint)ldb);
        return GP_OK;
    }
    size_t k1 = split_at(k), k2 = k - k1;
    gemm_args g = {CblasTrans, CblasNoTrans, k1, n, k2, 1.0, ELEM(L, ldl, k1, 0), ldl,
                   B + k1, ldb, B, ldb};
    int rc = trmm_llt(k1, n, L, ldl, B, ldb, c);
    if (rc == GP_OK)
        rc = gemm_tiled(&g, c);
    if (rc == GP_OK)
        rc = trmm_llt(k2, n, ELEM(L, ldl, k1, k1), ldl, B + k1, ldb, c);
    return rc;
}

/* ---- the factor and the inverse -------------------------------------------
 * A (n x n) = [A11 .; A21 A22] with A11 of order n1 = split_at(n). */

/* A = L L^T: L11 = chol(A11), L21 = A21 L11^-T, L22 = chol(A22 - L21 L21^T). */
static int potrf_rec(double *A, size_t n, size_t lda, const gp_cancel *c)
{
    if (n <= GP_BLOCK_ORDER) {
        if (stop(c))
            return GP_ECANCELLED;
        lapack_int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)n, A, (lapack_int)lda);
        return info == 0 ? GP_OK : info > 0 ? GP_ENOTPD : GP_EINTERNAL;
    }
    size_t n1 = split_at(n), n2 = n - n1;
    double *A21 = A + n1, *A22 = ELEM(A, lda, n1, n1);
    int rc = potrf_rec(A, n1, lda, c);
    if (rc == GP_OK)
        rc = trsm_rlt(n2, n1, A, lda, A21, lda, c);
    if (rc == GP_OK)
        rc = syrk_tiled(CblasNoTrans, n2, n1, -1.0, A21, lda, A22, lda, c);
    if (rc == GP_OK)
        rc = potrf_rec(A22, n2, lda, c);
    return rc;
}

/* -A21 before the solves of trtri_rec, a column block at a time. */
static int negate(double *B, size_t m, size_t n, size_t ldb, const gp_cancel *c)
{
    for (size_t j = 0; j < n; j++) {
        if (j % GP_BLOCK_ORDER == 0 && stop(c))
            return GP_ECANCELLED;
        double *col = ELEM(B, ldb, 0, j);
        for (size_t i = 0; i < m; i++)
            col[i] = -col[i];
    }
    return GP_OK;
}

/* L^-1 = [a^-1 0; -c^-1 b a^-1  c^-1]: the off-diagonal block by two solves
 * against the factor's own halves, then each half inverted. */
static int trtri_rec(double *A, size_t n, size_t lda, const gp_cancel *c)
{
    if (n <= GP_BLOCK_ORDER) {
        if (stop(c))
            return GP_ECANCELLED;
        lapack_int info =
            LAPACKE_dtrtri(LAPACK_COL_MAJOR, 'L', 'N', (lapack_int)n, A, (lapack_int)lda);
        return info == 0 ? GP_OK : info > 0 ? GP_ENOTPD : GP_EINTERNAL;
    }
    size_t n1 = split_at(n), n2 = n - n1;
    double *A21 = A + n1, *A22 = ELEM(A, lda, n1, n1);
    int rc = negate(A21, n2, n1, lda, c);
    if (rc == GP_OK)
        rc = trsm_rln(n2, n1, A, lda, A21, lda, c);
    if (rc == GP_OK)
        rc = trsm_lln(n2, n1, A22, lda, A21, lda, c);
    if (rc == GP_OK)
        rc = trtri_rec(A, n1, lda, c);
    if (rc == GP_OK)
        rc = trtri_rec(A22, n2, lda, c);
    return rc;
}

/* A := L^T L (lower) for L = [a 0; b c]: [a^T a + b^T b  .; c^T b  c^T c]. */
static int lauum_rec(double *A, size_t n, size_t lda, const gp_cancel *c)
{
    if (n <= GP_BLOCK_ORDER) {
        if (stop(c))
            return GP_ECANCELLED;
        lapack_int info = LAPACKE_dlauum(LAPACK_COL_MAJOR, 'L', (lapack_int)n, A, (lapack_int)lda);
        return info == 0 ? GP_OK : GP_EINTERNAL;
    }
    size_t n1 = split_at(n), n2 = n - n1;
    double *A21 = A + n1, *A22 = ELEM(A, lda, n1, n1);
    int rc = lauum_rec(A, n1, lda, c);
    if (rc == GP_OK)
        rc = syrk_tiled(CblasTrans, n1, n2, 1.0, A21, lda, A, lda, c);
    if (rc == GP_OK)
        rc = trmm_llt(n2, n1, A22, lda, A21, lda, c);
    if (rc == GP_OK)
        rc = lauum_rec(A22, n2, lda, c);
    return rc;
}

static int report(int rc, const char *what, size_t n, gp_error *err)
{
    if (rc == GP_ECANCELLED)
        return gp_error_set(err, rc, NULL, "cancelled during the %s of order %zu", what, n);
    if (rc == GP_ENOTPD)
        return gp_error_set(err, rc, NULL, "matrix of order %zu is not positive definite (%s)",
                            n, what);
    if (rc)
        return gp_error_set(err, rc, NULL, "LAPACK failed in the %s of order %zu", what, n);
    return GP_OK;
}

int gp_potrf_blocked(double *A, size_t n, size_t lda, const gp_cancel *cancel, gp_error *err)
{
    return report(n ? potrf_rec(A, n, lda, cancel) : GP_OK, "Cholesky factorisation", n, err);
}

int gp_potri_blocked(double *A, size_t n, size_t lda, const gp_cancel *cancel, gp_error *err)
{
    int rc = n ? trtri_rec(A, n, lda, cancel) : GP_OK;
    if (rc == GP_OK && n)
        rc = lauum_rec(A, n, lda, cancel);
    return report(rc, "inverse from the Cholesky factor", n, err);
}
