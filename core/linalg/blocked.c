/* Blocked, cancellable Cholesky factor and inverse: see core/linalg/blocked.h.
 *
 * Every routine is recursive on the order of its triangle: a triangle of
 * order n > GP_BLOCK_ORDER is split at n1 (a multiple of the block order, about
 * n / 2), so the products between the halves are large gemms (near the BLAS
 * peak) and the recursion ends on triangles LAPACK handles in a few
 * milliseconds. Column-major throughout; T + i + j * ld is element (i, j).
 *
 * The products between the halves are where the time goes, and each is a set
 * of independent panels of rows or columns (panel_width): B L^-T and B L^-1
 * act on each row of B alone, L^-1 B and L^T B on each column, and each column
 * block of a symmetric update is its own output. The panels are the tasks of
 * one gp_parallel_for, so the work spreads over the compute threads even with
 * OpenBLAS single-threaded (the daemon's set-up: core/base/parallel.h). Panel
 * boundaries depend only on the sizes and every panel is computed by the same
 * calls whichever thread runs it, so results do not depend on the thread
 * count. Inside a panel the calls are the sequential recursion below, polling
 * the token before each. */
#include "core/linalg/blocked.h"

#include <cblas.h>
#include <lapacke.h>
#include <stdatomic.h>

#include "core/base/parallel.h"

#define ELEM(M, ld, i, j) ((M) + (size_t)(j) * (ld) + (size_t)(i))
#define MIN(a, b) ((a) < (b) ? (a) : (b))

/* Where a triangle of order n > GP_BLOCK_ORDER is split: n / 2 rounded up to a
 * multiple of the block order, so every base triangle but the last is full. */
static size_t split_at(size_t n)
{
    return (n / 2 + GP_BLOCK_ORDER - 1) / GP_BLOCK_ORDER * GP_BLOCK_ORDER;
}

/* One call of gp_potrf_blocked or gp_potri_blocked: the token, and whether a
 * poll has asked to stop. Tasks running at once share it, so once one of them
 * sees the token the others skip their remaining pieces without polling. */
typedef struct run {
    const gp_cancel *cancel;
    atomic_int stopped;
} run;

static int stop(run *r)
{
    if (atomic_load_explicit(&r->stopped, memory_order_relaxed))
        return GP_ECANCELLED;
    if (!gp_cancel_requested(r->cancel))
        return GP_OK;
    atomic_store_explicit(&r->stopped, 1, memory_order_relaxed);
    return GP_ECANCELLED;
}

/* ---- sequential pieces ---------------------------------------------------- */

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

/* C (m x n) += alpha op(A) op(B), inner dimension k, in calls of at most
 * GP_BLOCK_TILE x GP_BLOCK_TILE outputs and GP_BLOCK_DEPTH inner terms, so
 * that the token is polled often. The inner pieces of one output block are
 * added in order: the result depends on nothing but the sizes. */
static int gemm_tiled(const gemm_args *g, run *r)
{
    for (size_t j = 0; j < g->n; j += GP_BLOCK_TILE)
        for (size_t i = 0; i < g->m; i += GP_BLOCK_TILE)
            for (size_t p = 0; p < g->k; p += GP_BLOCK_DEPTH) {
                if (stop(r))
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

/* Triangular solves and products of one panel, recursive on the triangle:
 * L (k x k, lower, ldl) = [a 0; b c] with a of order k1 = split_at(k). */

/* B (m x k) := B L^-T: X1 = B1 a^-T, B2 -= X1 b^T, X2 = B2 c^-T. */
static int trsm_rlt(size_t m, size_t k, const double *L, size_t ldl, double *B, size_t ldb,
                    run *r)
{
    if (k <= GP_BLOCK_ORDER) {
        if (stop(r))
            return GP_ECANCELLED;
        cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, (blasint)m,
                    (blasint)k, 1.0, L, (blasint)ldl, B, (blasint)ldb);
        return GP_OK;
    }
    size_t k1 = split_at(k), k2 = k - k1;
    gemm_args g = {CblasNoTrans, CblasTrans, m, k2, k1, -1.0, B, ldb,
                   ELEM(L, ldl, k1, 0), ldl, ELEM(B, ldb, 0, k1), ldb};
    int rc = trsm_rlt(m, k1, L, ldl, B, ldb, r);
    if (rc == GP_OK)
        rc = gemm_tiled(&g, r);
    if (rc == GP_OK)
        rc = trsm_rlt(m, k2, ELEM(L, ldl, k1, k1), ldl, ELEM(B, ldb, 0, k1), ldb, r);
    return rc;
}

/* B (m x k) := B L^-1: X2 = B2 c^-1, B1 -= X2 b, X1 = B1 a^-1. */
static int trsm_rln(size_t m, size_t k, const double *L, size_t ldl, double *B, size_t ldb,
                    run *r)
{
    if (k <= GP_BLOCK_ORDER) {
        if (stop(r))
            return GP_ECANCELLED;
        cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit,
                    (blasint)m, (blasint)k, 1.0, L, (blasint)ldl, B, (blasint)ldb);
        return GP_OK;
    }
    size_t k1 = split_at(k), k2 = k - k1;
    gemm_args g = {CblasNoTrans, CblasNoTrans, m, k1, k2, -1.0, ELEM(B, ldb, 0, k1), ldb,
                   ELEM(L, ldl, k1, 0), ldl, B, ldb};
    int rc = trsm_rln(m, k2, ELEM(L, ldl, k1, k1), ldl, ELEM(B, ldb, 0, k1), ldb, r);
    if (rc == GP_OK)
        rc = gemm_tiled(&g, r);
    if (rc == GP_OK)
        rc = trsm_rln(m, k1, L, ldl, B, ldb, r);
    return rc;
}

/* B (k x n) := L^-1 B: X1 = a^-1 B1, B2 -= b X1, X2 = c^-1 B2. */
static int trsm_lln(size_t k, size_t n, const double *L, size_t ldl, double *B, size_t ldb,
                    run *r)
{
    if (k <= GP_BLOCK_ORDER) {
        if (stop(r))
            return GP_ECANCELLED;
        cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)k,
                    (blasint)n, 1.0, L, (blasint)ldl, B, (blasint)ldb);
        return GP_OK;
    }
    size_t k1 = split_at(k), k2 = k - k1;
    gemm_args g = {CblasNoTrans, CblasNoTrans, k2, n, k1, -1.0, ELEM(L, ldl, k1, 0), ldl,
                   B, ldb, B + k1, ldb};
    int rc = trsm_lln(k1, n, L, ldl, B, ldb, r);
    if (rc == GP_OK)
        rc = gemm_tiled(&g, r);
    if (rc == GP_OK)
        rc = trsm_lln(k2, n, ELEM(L, ldl, k1, k1), ldl, B + k1, ldb, r);
    return rc;
}

/* B (k x n) := L^T B: B1 := a^T B1, B1 += b^T B2 (B2 still as given),
 * B2 := c^T B2. */
static int trmm_llt(size_t k, size_t n, const double *L, size_t ldl, double *B, size_t ldb,
                    run *r)
{
    if (k <= GP_BLOCK_ORDER) {
        if (stop(r))
            return GP_ECANCELLED;
        cblas_dtrmm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, (blasint)k,
                    (blasint)n, 1.0, L, (blasint)ldl, B, (blasint)ldb);
        return GP_OK;
    }
    size_t k1 = split_at(k), k2 = k - k1;
    gemm_args g = {CblasTrans, CblasNoTrans, k1, n, k2, 1.0, ELEM(L, ldl, k1, 0), ldl,
                   B + k1, ldb, B, ldb};
    int rc = trmm_llt(k1, n, L, ldl, B, ldb, r);
    if (rc == GP_OK)
        rc = gemm_tiled(&g, r);
    if (rc == GP_OK)
        rc = trmm_llt(k2, n, ELEM(L, ldl, k1, k1), ldl, B + k1, ldb, r);
    return rc;
}

/* ---- panels: the independent parts of one product, as parallel tasks -------
 *
 * The operand B (or C) is cut into panels of panel_width(count) rows or
 * columns (`count` = the total); each task runs `fn` on one panel. A task that
 * finds the run stopped returns at its first poll. */

typedef struct panel_job panel_job;
struct panel_job {
    run *r;
    void (*fn)(const panel_job *j, size_t first, size_t size);
    size_t count;
    size_t k;         /* order of L, or the inner dimension of the update */
    const double *L;  /* the triangle, or A of the symmetric update */
    size_t ldl;
    double *B;        /* updated in place: B, or C of the symmetric update */
    size_t ldb;
    CBLAS_TRANSPOSE trans; /* the symmetric update: C += alpha op(A) op(A)^T */
    double alpha;
};

/* Rows or columns of one panel: GP_BLOCK_PANEL, or a quarter of a smaller
 * count (rounded up to a multiple of 64, at least 64), so that the products
 * of the smaller triangles of the recursion still give two threads 4 tasks
 * to share (at N = 1000-3000 the factor and the inverse take 5-20 % less
 * time than with panels of 256 alone). A function of the count alone, as the
 * results require. */
static size_t panel_width(size_t count)
{
    size_t quarter = (count / 4 + 63) / 64 * 64;
    return quarter < 64 ? 64 : quarter < GP_BLOCK_PANEL ? quarter : GP_BLOCK_PANEL;
}

static void panel_task(void *ctx, size_t t)
{
    const panel_job *j = ctx;
    size_t width = panel_width(j->count), first = t * width;
    j->fn(j, first, MIN(width, j->count - first));
}

static int run_panels(panel_job *j)
{
    size_t width = panel_width(j->count);
    gp_parallel_for((j->count + width - 1) / width, panel_task, j);
    return atomic_load(&j->r->stopped) ? GP_ECANCELLED : GP_OK;
}

/* Rows [first, first + size) of B := B L^-T. */
static void rlt_rows(const panel_job *j, size_t first, size_t size)
{
    trsm_rlt(size, j->k, j->L, j->ldl, j->B + first, j->ldb, j->r);
}

/* Rows of B := -B L^-1 (the off-diagonal block of a triangular inverse);
 * negating first is exact, so the panel is solved as the plain solve. */
static void rln_rows_negated(const panel_job *j, size_t first, size_t size)
{
    if (stop(j->r))
        return;
    for (size_t c = 0; c < j->k; c++) {
        double *col = ELEM(j->B, j->ldb, first, c);
        for (size_t i = 0; i < size; i++)
            col[i] = -col[i];
    }
    trsm_rln(size, j->k, j->L, j->ldl, j->B + first, j->ldb, j->r);
}

/* Columns [first, first + size) of B := L^-1 B. */
static void lln_columns(const panel_job *j, size_t first, size_t size)
{
    trsm_lln(j->k, size, j->L, j->ldl, ELEM(j->B, j->ldb, 0, first), j->ldb, j->r);
}

/* Columns of B := L^T B. */
static void llt_columns(const panel_job *j, size_t first, size_t size)
{
    trmm_llt(j->k, size, j->L, j->ldl, ELEM(j->B, j->ldb, 0, first), j->ldb, j->r);
}

/* Columns [first, first + size) of the lower triangle of C += alpha op(A)
 * op(A)^T, op(A) count x k (A count x k with NoTrans, k x count with Trans):
 * dsyrk on the diagonal block, the rows below it by gemm. */
static void syrk_columns(const panel_job *j, size_t first, size_t size)
{
    int notrans = j->trans == CblasNoTrans;
    const double *A = j->L;
    size_t lda = j->ldl, below = j->count - first - size;
    for (size_t p = 0; p < j->k; p += GP_BLOCK_DEPTH) {
        if (stop(j->r))
            return;
        size_t kb = MIN(GP_BLOCK_DEPTH, j->k - p);
        const double *a = notrans ? ELEM(A, lda, first, p) : ELEM(A, lda, p, first);
        cblas_dsyrk(CblasColMajor, CblasLower, j->trans, (blasint)size, (blasint)kb, j->alpha, a,
                    (blasint)lda, 1.0, ELEM(j->B, j->ldb, first, first), (blasint)j->ldb);
    }
    gemm_args g = {notrans ? CblasNoTrans : CblasTrans,
                   notrans ? CblasTrans : CblasNoTrans,
                   below, size, j->k, j->alpha,
                   notrans ? ELEM(A, lda, first + size, 0) : ELEM(A, lda, 0, first + size), lda,
                   notrans ? ELEM(A, lda, first, 0) : ELEM(A, lda, 0, first), lda,
                   ELEM(j->B, j->ldb, first + size, first), j->ldb};
    gemm_tiled(&g, j->r);
}

static int panels(run *r, void (*fn)(const panel_job *, size_t, size_t), size_t count, size_t k,
                  const double *L, size_t ldl, double *B, size_t ldb)
{
    panel_job j = {r, fn, count, k, L, ldl, B, ldb, CblasNoTrans, 1.0};
    return run_panels(&j);
}

/* Lower triangle of C (n x n) += alpha op(A) op(A)^T, op(A) n x k. */
static int syrk_panels(run *r, CBLAS_TRANSPOSE t, size_t n, size_t k, double alpha,
                       const double *A, size_t lda, double *C, size_t ldc)
{
    panel_job j = {r, syrk_columns, n, k, A, lda, C, ldc, t, alpha};
    return run_panels(&j);
}

/* ---- the factor and the inverse -------------------------------------------
 * A (n x n) = [A11 .; A21 A22] with A11 of order n1 = split_at(n). */

/* A = L L^T: L11 = chol(A11), L21 = A21 L11^-T, L22 = chol(A22 - L21 L21^T). */
static int potrf_rec(double *A, size_t n, size_t lda, run *r)
{
    if (n <= GP_BLOCK_ORDER) {
        if (stop(r))
            return GP_ECANCELLED;
        lapack_int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)n, A, (lapack_int)lda);
        return info == 0 ? GP_OK : info > 0 ? GP_ENOTPD : GP_EINTERNAL;
    }
    size_t n1 = split_at(n), n2 = n - n1;
    double *A21 = A + n1, *A22 = ELEM(A, lda, n1, n1);
    int rc = potrf_rec(A, n1, lda, r);
    if (rc == GP_OK)
        rc = panels(r, rlt_rows, n2, n1, A, lda, A21, lda);
    if (rc == GP_OK)
        rc = syrk_panels(r, CblasNoTrans, n2, n1, -1.0, A21, lda, A22, lda);
    if (rc == GP_OK)
        rc = potrf_rec(A22, n2, lda, r);
    return rc;
}

/* L^-1 = [a^-1 0; -c^-1 b a^-1  c^-1]: the off-diagonal block by two solves
 * against the factor's own halves (row panels, then column panels), then each
 * half inverted. */
static int trtri_rec(double *A, size_t n, size_t lda, run *r)
{
    if (n <= GP_BLOCK_ORDER) {
        if (stop(r))
            return GP_ECANCELLED;
        lapack_int info =
            LAPACKE_dtrtri(LAPACK_COL_MAJOR, 'L', 'N', (lapack_int)n, A, (lapack_int)lda);
        return info == 0 ? GP_OK : info > 0 ? GP_ENOTPD : GP_EINTERNAL;
    }
    size_t n1 = split_at(n), n2 = n - n1;
    double *A21 = A + n1, *A22 = ELEM(A, lda, n1, n1);
    int rc = panels(r, rln_rows_negated, n2, n1, A, lda, A21, lda);
    if (rc == GP_OK)
        rc = panels(r, lln_columns, n1, n2, A22, lda, A21, lda);
    if (rc == GP_OK)
        rc = trtri_rec(A, n1, lda, r);
    if (rc == GP_OK)
        rc = trtri_rec(A22, n2, lda, r);
    return rc;
}

/* A := L^T L (lower) for L = [a 0; b c]: [a^T a + b^T b  .; c^T b  c^T c]. */
static int lauum_rec(double *A, size_t n, size_t lda, run *r)
{
    if (n <= GP_BLOCK_ORDER) {
        if (stop(r))
            return GP_ECANCELLED;
        lapack_int info = LAPACKE_dlauum(LAPACK_COL_MAJOR, 'L', (lapack_int)n, A, (lapack_int)lda);
        return info == 0 ? GP_OK : GP_EINTERNAL;
    }
    size_t n1 = split_at(n), n2 = n - n1;
    double *A21 = A + n1, *A22 = ELEM(A, lda, n1, n1);
    int rc = lauum_rec(A, n1, lda, r);
    if (rc == GP_OK)
        rc = syrk_panels(r, CblasTrans, n1, n2, 1.0, A21, lda, A, lda);
    if (rc == GP_OK)
        rc = panels(r, llt_columns, n1, n2, A22, lda, A21, lda);
    if (rc == GP_OK)
        rc = lauum_rec(A22, n2, lda, r);
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
    run r = {cancel, 0};
    return report(n ? potrf_rec(A, n, lda, &r) : GP_OK, "Cholesky factorisation", n, err);
}

int gp_potri_blocked(double *A, size_t n, size_t lda, const gp_cancel *cancel, gp_error *err)
{
    run r = {cancel, 0};
    int rc = n ? trtri_rec(A, n, lda, &r) : GP_OK;
    if (rc == GP_OK && n)
        rc = lauum_rec(A, n, lda, &r);
    return report(rc, "inverse from the Cholesky factor", n, err);
}
