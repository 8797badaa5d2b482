#include "core/linalg/linalg.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/linalg/blocked.h"

int gp_checked_size(size_t rows, size_t cols, size_t *count, gp_error *err)
{
    if (cols != 0 && rows > SIZE_MAX / cols)
        return gp_error_set(err, GP_ETOOBIG, NULL, "matrix of %zu x %zu overflows", rows, cols);
    size_t c = rows * cols;
    if (c > GP_MAX_ELEMENTS)
        return gp_error_set(err, GP_ETOOBIG, NULL,
                            "matrix of %zu x %zu exceeds the %zu-element allocation limit", rows,
                            cols, (size_t)GP_MAX_ELEMENTS);
    *count = c;
    return GP_OK;
}

double *gp_alloc_doubles(size_t count, gp_error *err)
{
    if (count > GP_MAX_ELEMENTS) {
        gp_error_set(err, GP_ETOOBIG, NULL, "allocation of %zu doubles exceeds the limit", count);
        return NULL;
    }
    double *p = malloc((count ? count : 1) * sizeof *p);
    if (p == NULL)
        gp_error_set(err, GP_ENOMEM, NULL, "out of memory allocating %zu doubles", count);
    return p;
}

int gp_matrix_alloc(gp_matrix *m, size_t rows, size_t cols, gp_error *err)
{
    size_t count = 0;
    m->rows = m->cols = 0;
    m->data = NULL;
    int rc = gp_checked_size(rows, cols, &count, err);
    if (rc)
        return rc;
    m->data = gp_alloc_doubles(count, err);
    if (m->data == NULL)
        return err ? err->code : GP_ENOMEM;
    m->rows = rows;
    m->cols = cols;
    return GP_OK;
}

int gp_matrix_zeros(gp_matrix *m, size_t rows, size_t cols, gp_error *err)
{
    int rc = gp_matrix_alloc(m, rows, cols, err);
    if (rc == GP_OK)
        memset(m->data, 0, rows * cols * sizeof *m->data);
    return rc;
}

void gp_matrix_free(gp_matrix *m)
{
    if (m == NULL)
        return;
    free(m->data);
    m->data = NULL;
    m->rows = m->cols = 0;
}

int gp_all_finite(const double *x, size_t count, size_t *bad_index)
{
    for (size_t i = 0; i < count; i++) {
        if (!isfinite(x[i])) {
            if (bad_index)
                *bad_index = i;
            return 0;
        }
    }
    return 1;
}

/* GP_EDATA for NaN/Inf anywhere in the lower triangle (the part dpotrf
 * reads); a scan of n^2 / 2 doubles, so it polls the token every block of
 * columns like the factorisation after it. */
static int check_lower_finite(const double *A, size_t n, size_t lda, const gp_cancel *cancel,
                              gp_error *err)
{
    for (size_t j = 0; j < n; j++) {
        if (j % GP_BLOCK_ORDER == 0 && gp_cancel_requested(cancel))
            return gp_error_set(err, GP_ECANCELLED, NULL, "cancelled checking the matrix");
        for (size_t i = j; i < n; i++)
            if (!isfinite(A[j * lda + i]))
                return gp_error_set(err, GP_EDATA, NULL,
                                    "covariance matrix has a non-finite entry at (%zu, %zu)", i,
                                    j);
    }
    return GP_OK;
}

/* Rebuild the lower triangle from the untouched strict upper triangle and the
 * saved diagonal, plus jitter. A transposed copy of n^2 / 2 doubles takes
 * seconds at n = 20000, so it polls the token every block of columns. */
static int restore_lower(double *A, size_t n, size_t lda, const double *diag, double jitter,
                         const gp_cancel *cancel)
{
    for (size_t j = 0; j < n; j++) {
        if (j % GP_BLOCK_ORDER == 0 && gp_cancel_requested(cancel))
            return GP_ECANCELLED;
        A[j * lda + j] = diag[j] + jitter;
        for (size_t i = j + 1; i < n; i++)
            A[j * lda + i] = A[i * lda + j];
    }
    return GP_OK;
}

int gp_cholesky_jitter(double *A, size_t n, size_t lda, gp_chol_info *info, gp_error *err)
{
    return gp_cholesky_jitter_cancellable(A, n, lda, NULL, info, err);
}

int gp_cholesky_jitter_cancellable(double *A, size_t n, size_t lda, const gp_cancel *cancel,
                                   gp_chol_info *info, gp_error *err)
{
    gp_chol_info local = {0.0, 0};
    if (info == NULL)
        info = &local;
    info->jitter = 0.0;
    info->attempts = 0;
    if (n == 0)
        return GP_OK;
    int rc = check_lower_finite(A, n, lda, cancel, err);
    if (rc)
        return rc;
    double *diag = gp_alloc_doubles(n, err);
    if (diag == NULL)
        return GP_ENOMEM;
    double mean_diag = 0.0;
    for (size_t j = 0; j < n; j++) {
        diag[j] = A[j * lda + j];
        mean_diag += diag[j];
    }
    mean_diag /= (double)n;

    /* Jitter sequence: 0, then 1e-8 .. 1e-2 times mean(diag), x10 per retry. */
    double jitter = 0.0, rel = 1e-8;
    for (;;) {
        if (info->attempts > 0 && restore_lower(A, n, lda, diag, jitter, cancel)) {
            rc = gp_error_set(err, GP_ECANCELLED, NULL, "cancelled between jitter retries");
            break;
        }
        info->attempts++;
        rc = gp_potrf_blocked(A, n, lda, cancel, NULL);
        if (rc == GP_OK)
            break;
        if (rc != GP_ENOTPD) {
            rc = rc == GP_ECANCELLED
                     ? gp_error_set(err, rc, NULL, "cancelled during a Cholesky factorisation")
                     : gp_error_set(err, rc, NULL, "dpotrf failed on a matrix of size %zu", n);
            break;
        }
        if (!(mean_diag > 0.0) || rel > 1e-2 * (1.0 + 1e-9)) {
            rc = gp_error_set(err, GP_ENOTPD, NULL,
                              "matrix of size %zu is not positive definite even with jitter %.3g "
                              "(1e-2 x mean diagonal %.3g)",
                              n, jitter, mean_diag);
            if (restore_lower(A, n, lda, diag, 0.0, cancel))
                rc = gp_error_set(err, GP_ECANCELLED, NULL, "cancelled restoring the matrix");
            break;
        }
        jitter = rel * mean_diag;
        rel *= 10.0;
    }
    info->jitter = rc == GP_OK ? jitter : 0.0;
    free(diag);
    return rc;
}

void gp_symmetrize_from_lower(double *A, size_t n, size_t lda)
{
    for (size_t j = 0; j < n; j++)
        for (size_t i = j + 1; i < n; i++)
            A[i * lda + j] = A[j * lda + i];
}

double gp_chol_logdet(const double *L, size_t n, size_t lda)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += log(L[i * lda + i]);
    return 2.0 * s;
}

void gp_trsm_lower(const double *L, size_t n, size_t lda, int trans, double *B, size_t nrhs,
                   size_t ldb)
{
    if (n == 0 || nrhs == 0)
        return;
    if (nrhs == 1)
        cblas_dtrsv(CblasColMajor, CblasLower, trans ? CblasTrans : CblasNoTrans, CblasNonUnit,
                    (blasint)n, L, (blasint)lda, B, 1);
    else
        cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, trans ? CblasTrans : CblasNoTrans,
                    CblasNonUnit, (blasint)n, (blasint)nrhs, 1.0, L, (blasint)lda, B,
                    (blasint)ldb);
}

void gp_chol_solve(const double *L, size_t n, size_t lda, double *B, size_t nrhs, size_t ldb)
{
    gp_trsm_lower(L, n, lda, 0, B, nrhs, ldb);
    gp_trsm_lower(L, n, lda, 1, B, nrhs, ldb);
}

void gp_pack_lower(const double *A, size_t n, size_t lda, double *packed)
{
    size_t k = 0;
    for (size_t j = 0; j < n; j++) {
        memcpy(packed + k, A + j * lda + j, (n - j) * sizeof *packed);
        k += n - j;
    }
}

void gp_unpack_lower(const double *packed, size_t n, double *A, size_t lda)
{
    size_t k = 0;
    for (size_t j = 0; j < n; j++) {
        for (size_t i = 0; i < j; i++)
            A[j * lda + i] = 0.0;
        memcpy(A + j * lda + j, packed + k, (n - j) * sizeof *packed);
        k += n - j;
    }
}

void gp_symmetrize_average(double *A, size_t n, size_t lda)
{
    for (size_t j = 0; j < n; j++)
        for (size_t i = j + 1; i < n; i++) {
            double v = 0.5 * (A[i + j * lda] + A[j + i * lda]);
            A[i + j * lda] = A[j + i * lda] = v;
        }
}

/* One rotation pass: (col, x) <- (c col + s x, c x - s col) over m entries.
 * The loop is memory-bound on the factor (each update reads and writes the
 * n^2/2 entries below the diagonal once); wide vectors take it from ~140 us
 * (OpenBLAS drot on this build) to ~90 us at n = 800, so x86-64 builds carry
 * AVX-512 and AVX2 clones chosen at load time (GCC target_clones). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default"), optimize("O3")))
#endif
static void rotate_pair(double *restrict col, double *restrict x, size_t m, double c, double s)
{
    for (size_t i = 0; i < m; i++) {
        double l = col[i], xi = x[i];
        col[i] = c * l + s * xi;
        x[i] = c * xi - s * l;
    }
}

void gp_chol_update_rank1(double *L, size_t n, size_t lda, double *x)
{
    for (size_t j = 0; j < n; j++) {
        double *col = L + j * lda;
        double a = col[j], b = x[j];
        if (b == 0.0)
            continue;
        double r = hypot(a, b);
        if (!(r > 0.0))
            continue;
        double c = a / r, s = b / r;
        col[j] = r;
        x[j] = 0.0;
        rotate_pair(col + j + 1, x + j + 1, n - j - 1, c, s);
    }
}

void gp_chol_update_rank1_packed(double *P, size_t n, double *x)
{
    double *col = P; /* column j: its n - j entries from the diagonal down */
    for (size_t j = 0; j < n; col += n - j, j++) {
        double a = col[0], b = x[j];
        if (b == 0.0)
            continue;
        double r = hypot(a, b);
        if (!(r > 0.0))
            continue;
        col[0] = r;
        x[j] = 0.0;
        rotate_pair(col + 1, x + j + 1, n - j - 1, a / r, b / r);
    }
}

void gp_chol_update(double *L, size_t n, size_t lda, double *X, size_t k, size_t ldx)
{
    for (size_t i = 0; i < k; i++)
        gp_chol_update_rank1(L, n, lda, X + i * ldx);
}

void gp_zero_upper(double *A, size_t n, size_t lda)
{
    for (size_t j = 1; j < n; j++)
        memset(A + j * lda, 0, j * sizeof *A);
}
