#include "core/linalg/linalg.h"

#include <cblas.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/linalg/blocked.h"
#include "core/linalg/fastmath.h"
#include "core/linalg/trs_tiles.h"

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

void gp_solve_lower_trans_vector(const double *L, size_t n, size_t ldl, double *b)
{
    for (size_t i = n; i-- > 0;) {
        const double *col = L + i * ldl;
        b[i] = (b[i] - gp_dot(col + i + 1, b + i + 1, n - i - 1)) / col[i];
    }
}

void gp_chol_solve(const double *L, size_t n, size_t lda, double *B, size_t nrhs, size_t ldb)
{
    gp_trsm_lower(L, n, lda, 0, B, nrhs, ldb);
    gp_trsm_lower(L, n, lda, 1, B, nrhs, ldb);
}

/* ---- the batch-invariant solve (gp_solve_lower_columns) and dot product ----
 *
 * Every column goes through forward substitution in column order, one fma at a
 * time: b_i <- fma(-L_ik, x_k, b_i) for k = 0, 1, ..., i - 1, then x_i = b_i / L_ii.
 * The blocking below only decides when these operations run, never their
 * order on any one b_i, and no operation mixes two columns: a column's bits do
 * not depend on the other columns, on its position, on the block sizes or on
 * which vector lane does the work. fma() rounds once whether it is a vfmadd
 * or libm's, so every clone gives the same bits too (dtrsv and dtrsm do not:
 * their kernels change with the number of columns, docs/design/numerics.md).
 *
 * The clones (GP_CLONES, core/linalg/fastmath.h) carry AVX-512 and AVX2+FMA copies chosen
 * at load time by the CPU's features. */
#define GP_FMA_CLONES GP_CLONES
/* Kernels inlined into their cloned caller, so that they are compiled for its target. */
#define GP_KERNEL static inline __attribute__((always_inline))

/* Columns of L per block (kb below): the 4 x kb values of x a block applies
 * stay in vector registers next to the 4 accumulators. AVX-512's 32 registers
 * hold kb = 4 (~13 us per column at N = 927 on the reference machine, ~14.5
 * with 3); AVX2's 16 hold kb = 3 (~18 us, ~22 with 4). Any kb gives the same
 * bits. */
#define TRS_KB_WIDE 4
#define TRS_KB_NARROW 3
#define TRS_KB_MAX 4
/* Right-hand sides per task (gp_parallel_for). A task whose n x 64 columns
 * exceed TRS_CACHE_DOUBLES (128 KB) works in panels of TRS_ROWS rows (a
 * multiple of both block widths), each taking the updates from the rows above
 * it TRS_KC columns of L at a time: 4 columns of a panel (15 KB) stay in L1
 * while they take a whole chunk, the chunk of L (480 x 60, 225 KB) in L2 while
 * the groups of 4 take it in turn, and L streams from memory once per task.
 * On the reference machine this took N = 3000 from ~250 to ~150 us per column
 * (16..128 columns); smaller tasks stream L column by column (one panel),
 * which is faster for 1 or 2 columns. */
#define TRS_COLS 64
#define TRS_ROWS 480
#define TRS_KC 60
/* Diagonal block of the tiled paths: the rows below a block take its TRS_DB
 * columns of L in one tile pass. */
#define TRS_DB 64
/* Fewest columns of a task that take the tiles. */
#define TRS_TILE_MIN_COLS 4
#define TRS_CACHE_DOUBLES ((size_t)16 << 10)

/* b_r[i] += sum_k l[i + k ldl] x[r kb + k] over i < m, k in increasing order,
 * for r < 4 (x holds the negated solved values). The loop over i is the
 * vectorised one; each lane is one b_r[i]. kb is a constant once inlined, so
 * the loop over k unrolls. */
GP_KERNEL void trs_update4(size_t m, const double *restrict l, size_t ldl, size_t kb,
                           const double *restrict x, double *restrict b0, double *restrict b1,
                           double *restrict b2, double *restrict b3)
{
    for (size_t i = 0; i < m; i++) {
        double a0 = b0[i], a1 = b1[i], a2 = b2[i], a3 = b3[i];
        for (size_t k = 0; k < kb; k++) {
            double v = l[i + k * ldl];
            a0 = fma(v, x[k], a0);
            a1 = fma(v, x[kb + k], a1);
            a2 = fma(v, x[2 * kb + k], a2);
            a3 = fma(v, x[3 * kb + k], a3);
        }
        b0[i] = a0;
        b1[i] = a1;
        b2[i] = a2;
        b3[i] = a3;
    }
}

GP_KERNEL void trs_update2(size_t m, const double *restrict l, size_t ldl, size_t kb,
                           const double *restrict x, double *restrict b0, double *restrict b1)
{
    for (size_t i = 0; i < m; i++) {
        double a0 = b0[i], a1 = b1[i];
        for (size_t k = 0; k < kb; k++) {
            double v = l[i + k * ldl];
            a0 = fma(v, x[k], a0);
            a1 = fma(v, x[kb + k], a1);
        }
        b0[i] = a0;
        b1[i] = a1;
    }
}

GP_KERNEL void trs_update1(size_t m, const double *restrict l, size_t ldl, size_t kb,
                           const double *restrict x, double *restrict b0)
{
    for (size_t i = 0; i < m; i++) {
        double a0 = b0[i];
        for (size_t k = 0; k < kb; k++)
            a0 = fma(l[i + k * ldl], x[k], a0);
        b0[i] = a0;
    }
}

/* -x for rows k0 .. k0 + kb of nr columns of B (negation is exact). */
GP_KERNEL void trs_gather(const double *B, size_t ldb, size_t k0, size_t kb, size_t nr,
                          double *x)
{
    for (size_t r = 0; r < nr; r++)
        for (size_t k = 0; k < kb; k++)
            x[r * kb + k] = -B[r * ldb + k0 + k];
}

/* Rows r0 .. r0 + m of the nrhs columns of B minus L(those rows, k0 .. k1)
 * times B(k0 .. k1, :), rows that are already solved (k1 - k0 a multiple of
 * kb). Columns go 4 at a time (each load of L serves 4 of them), the last 1
 * to 3 by 2 and 1; each group takes the whole range k0 .. k1, block after
 * block, while its rows stay in L1 and L(rows, k0 .. k1) in L2. */
GP_KERNEL void trs_update(const double *L, size_t ldl, size_t k0, size_t k1, size_t kb, size_t r0,
                          size_t m, double *B, size_t nrhs, size_t ldb)
{
    double x[4 * TRS_KB_MAX];
    size_t j = 0;
    for (; j + 4 <= nrhs; j += 4) {
        double *b = B + j * ldb;
        for (size_t k = k0; k < k1; k += kb) {
            trs_gather(b, ldb, k, kb, 4, x);
            trs_update4(m, L + r0 + k * ldl, ldl, kb, x, b + r0, b + ldb + r0,
                        b + 2 * ldb + r0, b + 3 * ldb + r0);
        }
    }
    for (; j + 2 <= nrhs; j += 2) {
        double *b = B + j * ldb;
        for (size_t k = k0; k < k1; k += kb) {
            trs_gather(b, ldb, k, kb, 2, x);
            trs_update2(m, L + r0 + k * ldl, ldl, kb, x, b + r0, b + ldb + r0);
        }
    }
    if (j < nrhs) {
        double *b = B + j * ldb;
        for (size_t k = k0; k < k1; k += kb) {
            trs_gather(b, ldb, k, kb, 1, x);
            trs_update1(m, L + r0 + k * ldl, ldl, kb, x, b + r0);
        }
    }
}

/* Rows k0 .. k1 of one column b: the diagonal block, in the same order. */
GP_KERNEL void trs_diagonal(const double *L, size_t ldl, size_t k0, size_t k1, double *b)
{
    for (size_t k = k0; k < k1; k++) {
        double x = b[k] / L[k + k * ldl];
        b[k] = x;
        for (size_t i = k + 1; i < k1; i++)
            b[i] = fma(-L[i + k * ldl], x, b[i]);
    }
}

/* The update step on one of the paths (trs_tiles.h): a call to the tiles,
 * or the portable update inlined into the clone. */
GP_KERNEL void trs_update_on(int path, const double *L, size_t ldl, size_t k0, size_t k1,
                             size_t kb, size_t r0, size_t m, double *B, size_t nrhs, size_t ldb)
{
#if GP_TRS_TILES
    if (path == GP_TRS_AVX512) {
        gp_trs_update_avx512(L, ldl, k0, k1, r0, m, B, nrhs, ldb);
        return;
    }
#endif
    (void)path;
    trs_update(L, ldl, k0, k1, kb, r0, m, B, nrhs, ldb);
}

/* Rows d0 .. d1 (solved by rows above them): their triangle kb columns at a
 * time, each step's rows first divided, then the rest of the block updated. */
GP_KERNEL void trs_block(int path, const double *L, size_t ldl, size_t d0, size_t d1, size_t kb,
                         double *B, size_t nrhs, size_t ldb)
{
    for (size_t k0 = d0; k0 < d1; k0 += kb) {
        size_t k1 = d1 - k0 < kb ? d1 : k0 + kb;
        for (size_t j = 0; j < nrhs; j++)
            trs_diagonal(L, ldl, k0, k1, B + j * ldb);
        if (k1 < d1)
            trs_update_on(path, L, ldl, k0, k1, kb, k1, d1 - k1, B, nrhs, ldb);
    }
}

/* The solve of nrhs columns in row panels of `rows` rows (a multiple of kb,
 * or n: one panel): a panel first takes the updates of every row above it,
 * TRS_KC columns of L at a time, then solves its own triangle in diagonal
 * blocks of db rows (a multiple of kb): a block's triangle kb columns at a
 * time, then the panel's rows below the block take the block's db columns in
 * one update (the tiles keep their accumulators over all db of them). */
GP_KERNEL void trs_panels(int path, const double *L, size_t n, size_t ldl, double *B, size_t nrhs,
                          size_t ldb, size_t rows, size_t kb, size_t db)
{
    for (size_t i0 = 0; i0 < n; i0 += rows) {
        size_t i1 = n - i0 < rows ? n : i0 + rows;
        for (size_t k0 = 0; k0 < i0; k0 += TRS_KC)
            trs_update_on(path, L, ldl, k0, i0 - k0 < TRS_KC ? i0 : k0 + TRS_KC, kb, i0, i1 - i0,
                          B, nrhs, ldb);
        for (size_t d0 = i0; d0 < i1; d0 += db) {
            size_t d1 = i1 - d0 < db ? i1 : d0 + db;
            trs_block(path, L, ldl, d0, d1, kb, B, nrhs, ldb);
            if (d1 < i1)
                trs_update_on(path, L, ldl, d0, d1, kb, d1, i1 - d1, B, nrhs, ldb);
        }
    }
}

/* The clones: each holds both block widths, each compiled for a constant.
 * The portable path solves a panel's triangle as one block (db = rows: kb
 * columns of L at a time, L streamed column by column); the tiles take
 * blocks of TRS_DB rows. */
GP_FMA_CLONES
static void trs_solve(const double *L, size_t n, size_t ldl, double *B, size_t nrhs, size_t ldb,
                      size_t rows, int path, int wide)
{
    if (path != GP_TRS_PORTABLE)
        trs_panels(path, L, n, ldl, B, nrhs, ldb, rows, TRS_KB_WIDE, TRS_DB);
    else if (wide)
        trs_panels(path, L, n, ldl, B, nrhs, ldb, rows, TRS_KB_WIDE, rows);
    else
        trs_panels(path, L, n, ldl, B, nrhs, ldb, rows, TRS_KB_NARROW, rows);
}

/* 1 where the AVX-512 clone runs (32 vector registers), else 0. */
static int trs_wide(void)
{
#if defined(GP_CLONES_AVX2)
    return 0;
#elif defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") != 0;
#else
    return 1;
#endif
}

/* The tiles where AVX-512 runs them, else the portable update. make
 * GP_CLONES=avx2 leaves the tiles out, as it does the AVX-512 clone. */
static int trs_path(void)
{
#if !defined(GP_CLONES_AVX2)
    if (gp_trs_tiles_supported(GP_TRS_AVX512))
        return GP_TRS_AVX512;
#endif
    return GP_TRS_PORTABLE;
}

typedef struct trs_job {
    const double *L;
    size_t n, ldl, ldb, nrhs;
    double *B;
    int path, wide;
} trs_job;

/* Columns t TRS_COLS .. (t + 1) TRS_COLS. One panel (the whole triangle, L
 * streamed column by column) while they fit the cache, else TRS_ROWS. */
static void trs_task(void *ctx, size_t t)
{
    const trs_job *j = ctx;
    size_t c0 = t * TRS_COLS, w = j->nrhs - c0 < TRS_COLS ? j->nrhs - c0 : TRS_COLS;
    size_t rows = j->n * w <= TRS_CACHE_DOUBLES ? j->n : TRS_ROWS;
    /* 1 to 3 columns stream L column by column (the portable path): the
     * tiles' 64 columns of L at a time were ~3 % slower for one column at
     * N = 2000, where the solve only waits for memory. */
    int path = w < TRS_TILE_MIN_COLS ? GP_TRS_PORTABLE : j->path;
    trs_solve(j->L, j->n, j->ldl, j->B + c0 * j->ldb, w, j->ldb, rows, path, j->wide);
}

void gp_solve_lower_columns_path(const double *L, size_t n, size_t ldl, double *B, size_t nrhs,
                                 size_t ldb, int path)
{
    if (n == 0 || nrhs == 0)
        return;
    if (!gp_trs_tiles_supported(path))
        path = GP_TRS_PORTABLE;
    trs_job job = {L, n, ldl, ldb, nrhs, B, path, trs_wide()};
    size_t tasks = (nrhs + TRS_COLS - 1) / TRS_COLS;
    if (tasks == 1)
        trs_task(&job, 0);
    else
        gp_parallel_for(tasks, trs_task, &job);
}

void gp_solve_lower_columns(const double *L, size_t n, size_t ldl, double *B, size_t nrhs,
                            size_t ldb)
{
    gp_solve_lower_columns_path(L, n, ldl, B, nrhs, ldb, trs_path());
}

/* ---- the same solve with the points across the vector lanes ----
 * For many columns of a small factor (a feature method's 2R of a few dozen)
 * the column sweep spends its time in loop overhead and the n divisions per
 * column. Here a group of TRL_POINTS columns is transposed so that entry i of
 * every column of the group is contiguous, and each row is solved for the
 * whole group at once (row form: a = b_i; a = fma(-L_ik, x_k, a) for k < i in
 * increasing k; x_i = a / L_ii): the sequence gp_solve_lower_columns gives
 * each element, lane by lane, so the bits are the same. Lt is L^T (its row
 * i, L's row, contiguous). */
#define TRL_POINTS 32

GP_FMA_CLONES
static void trl_group(const double *Lt, size_t n, double *G)
{
    for (size_t i = 0; i < n; i++) {
        double a[TRL_POINTS];
        const double *row = Lt + i * n;
        double *gi = G + i * TRL_POINTS;
        for (size_t p = 0; p < TRL_POINTS; p++)
            a[p] = gi[p];
        for (size_t k = 0; k < i; k++) {
            double l = -row[k];
            const double *gk = G + k * TRL_POINTS;
            for (size_t p = 0; p < TRL_POINTS; p++)
                a[p] = fma(l, gk[p], a[p]);
        }
        double d = row[i];
        for (size_t p = 0; p < TRL_POINTS; p++)
            gi[p] = a[p] / d;
    }
}

void gp_solve_lower_columns_lanes(const double *L, size_t n, size_t ldl, double *B, size_t nrhs,
                                  size_t ldb, double *work)
{
    size_t full = nrhs - nrhs % TRL_POINTS;
    if (n == 0 || full == 0) {
        gp_solve_lower_columns(L, n, ldl, B, nrhs, ldb);
        return;
    }
    double *Lt = work, *G = work + n * n;
    for (size_t k = 0; k < n; k++)
        for (size_t i = k; i < n; i++)
            Lt[i * n + k] = L[k * ldl + i];
    for (size_t c0 = 0; c0 < full; c0 += TRL_POINTS) {
        for (size_t p = 0; p < TRL_POINTS; p++)
            for (size_t i = 0; i < n; i++)
                G[i * TRL_POINTS + p] = B[(c0 + p) * ldb + i];
        trl_group(Lt, n, G);
        for (size_t p = 0; p < TRL_POINTS; p++)
            for (size_t i = 0; i < n; i++)
                B[(c0 + p) * ldb + i] = G[i * TRL_POINTS + p];
    }
    gp_solve_lower_columns(L, n, ldl, B + full * ldb, nrhs - full, ldb);
}

/* ---- the same solve on a packed factor ----
 * Column k of P (gp_pack_lower's layout) holds L(k .. n-1, k) from offset
 * k n - k (k - 1) / 2; pk(P, n, k)[i] is then L(i, k) for i >= k. Element i
 * of a column takes fma(L(i, k), -x_k, b_i) for k = 0 .. i - 1 in order and
 * then the division, gp_solve_lower_columns's sequence, so the two give the
 * same bits. L goes 4 columns at a time (4 loads of b per 4 fma per column
 * of B) and B 4 columns at a time (each load of L serves 4). */
GP_KERNEL const double *pk(const double *P, size_t n, size_t k)
{
    return P + k * n - k * (k - 1) / 2 - k;
}

/* Rows k0 .. k0 + kb of the nr columns of B (solved), x = their negation. */
GP_KERNEL void trp_diagonal(const double *const *c, size_t k0, size_t kb, double *B, size_t nr,
                            size_t ldb, double *x)
{
    for (size_t r = 0; r < nr; r++) {
        double *b = B + r * ldb;
        for (size_t q = 0; q < kb; q++) {
            size_t k = k0 + q;
            double v = b[k] / c[q][k];
            b[k] = v;
            for (size_t i = k + 1; i < k0 + kb; i++)
                b[i] = fma(-c[q][i], v, b[i]);
            x[r * TRS_KB_MAX + q] = -v;
        }
    }
}

/* Rows i0 .. n of nr (a constant once inlined: 4 or 1) columns of B take the
 * kb columns c of L, in column order. */
GP_KERNEL void trp_update(const double *const *c, size_t kb, size_t i0, size_t n, double *B,
                          size_t nr, size_t ldb, const double *x)
{
    for (size_t i = i0; i < n; i++)
        for (size_t r = 0; r < nr; r++) {
            double a = B[r * ldb + i];
            for (size_t q = 0; q < kb; q++)
                a = fma(c[q][i], x[r * TRS_KB_MAX + q], a);
            B[r * ldb + i] = a;
        }
}

GP_KERNEL void trp_group(const double *P, size_t n, double *B, size_t nr, size_t ldb)
{
    double x[4 * TRS_KB_MAX];
    for (size_t k0 = 0; k0 < n; k0 += TRS_KB_MAX) {
        size_t kb = n - k0 < TRS_KB_MAX ? n - k0 : TRS_KB_MAX;
        const double *c[TRS_KB_MAX];
        for (size_t q = 0; q < kb; q++)
            c[q] = pk(P, n, k0 + q);
        trp_diagonal(c, k0, kb, B, nr, ldb, x);
        if (kb == TRS_KB_MAX)
            trp_update(c, TRS_KB_MAX, k0 + kb, n, B, nr, ldb, x);
        else
            trp_update(c, kb, k0 + kb, n, B, nr, ldb, x);
    }
}

GP_FMA_CLONES
static void trp_solve(const double *P, size_t n, double *B, size_t nrhs, size_t ldb)
{
    size_t j = 0;
    for (; j + 4 <= nrhs; j += 4)
        trp_group(P, n, B + j * ldb, 4, ldb);
    for (; j < nrhs; j++)
        trp_group(P, n, B + j * ldb, 1, ldb);
}

typedef struct trp_job {
    const double *P;
    size_t n, ldb, nrhs;
    double *B;
} trp_job;

static void trp_task(void *ctx, size_t t)
{
    const trp_job *j = ctx;
    size_t c0 = t * TRS_COLS, w = j->nrhs - c0 < TRS_COLS ? j->nrhs - c0 : TRS_COLS;
    trp_solve(j->P, j->n, j->B + c0 * j->ldb, w, j->ldb);
}

void gp_solve_lower_packed_columns(const double *P, size_t n, double *B, size_t nrhs, size_t ldb)
{
    if (n == 0 || nrhs == 0)
        return;
    trp_job job = {P, n, ldb, nrhs, B};
    size_t tasks = (nrhs + TRS_COLS - 1) / TRS_COLS;
    if (tasks == 1)
        trp_task(&job, 0);
    else
        gp_parallel_for(tasks, trp_task, &job);
}

/* Eight interleaved partial sums (eight independent fma chains, so the loop
 * does not wait on each fma's latency), combined pairwise, then the n mod 8
 * last terms in order. */
GP_FMA_CLONES
static double dot_fixed(const double *restrict x, const double *restrict y, size_t n)
{
    double s[8] = {0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0};
    size_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (size_t r = 0; r < 8; r++)
            s[r] = fma(x[i + r], y[i + r], s[r]);
    double t = ((s[0] + s[4]) + (s[1] + s[5])) + ((s[2] + s[6]) + (s[3] + s[7]));
    for (; i < n; i++)
        t = fma(x[i], y[i], t);
    return t;
}

double gp_dot(const double *x, const double *y, size_t n)
{
    return dot_fixed(x, y, n);
}

/* DOT_TILE x DOT_TILE dots at once, each exactly dot_fixed's sequence (its
 * eight partial sums are one AVX-512 register), sharing the loads of the
 * columns between the dots of the tile. */
#define DOT_TILE 4
GP_KERNEL void dot_tile(const double *A, size_t lda, const double *X, size_t ldx, size_t k,
                        double *C, size_t ldc)
{
    double s[DOT_TILE][DOT_TILE][8] = {{{0.0}}};
    size_t r = 0;
    for (; r + 8 <= k; r += 8)
        for (size_t i = 0; i < DOT_TILE; i++)
            for (size_t j = 0; j < DOT_TILE; j++)
                for (size_t l = 0; l < 8; l++)
                    s[i][j][l] = fma(A[j * lda + r + l], X[i * ldx + r + l], s[i][j][l]);
    for (size_t i = 0; i < DOT_TILE; i++)
        for (size_t j = 0; j < DOT_TILE; j++) {
            const double *v = s[i][j];
            double t = ((v[0] + v[4]) + (v[1] + v[5])) + ((v[2] + v[6]) + (v[3] + v[7]));
            for (size_t q = r; q < k; q++)
                t = fma(A[j * lda + q], X[i * ldx + q], t);
            C[i * ldc + j] = t;
        }
}

GP_FMA_CLONES
static void dot_columns(const double *A, size_t lda, size_t p, const double *X, size_t ldx,
                        size_t q, size_t k, double *C, size_t ldc)
{
    size_t pt = p - p % DOT_TILE, qt = q - q % DOT_TILE;
    for (size_t i = 0; i < qt; i += DOT_TILE)
        for (size_t j = 0; j < pt; j += DOT_TILE)
            dot_tile(A + j * lda, lda, X + i * ldx, ldx, k, C + i * ldc + j, ldc);
    for (size_t i = 0; i < q; i++) /* the edges: the same sums one at a time */
        for (size_t j = i < qt ? pt : 0; j < p; j++)
            C[i * ldc + j] = dot_fixed(A + j * lda, X + i * ldx, k);
}

void gp_dot_columns(const double *A, size_t lda, size_t p, const double *X, size_t ldx,
                    size_t q, size_t k, double *C, size_t ldc)
{
    dot_columns(A, lda, p, X, ldx, q, k, C, ldc);
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

/* The loop is memory-bound on the factor (each update reads and writes the
 * n^2/2 entries below the diagonal once); wide vectors take it from ~140 us
 * (OpenBLAS drot on this build) to ~90 us at n = 800, so x86-64 builds carry
 * AVX-512 and AVX2 clones chosen at load time (GCC target_clones). */
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(GP_CLONES_AVX2)
__attribute__((target_clones("avx2", "default"), optimize("O3")))
#elif defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
__attribute__((target_clones("avx512f", "avx2", "default"), optimize("O3")))
#endif
void gp_givens_rotate(double *restrict col, double *restrict x, size_t m, double c1, double s1,
                      double c2, double s2)
{
    for (size_t i = 0; i < m; i++) {
        double l = col[i], xi = x[i];
        col[i] = c1 * l + s1 * xi;
        x[i] = c2 * xi - s2 * l;
    }
}

/* One rotation pass: (col, x) <- (c col + s x, c x - s col) over m entries. */
static void rotate_pair(double *restrict col, double *restrict x, size_t m, double c, double s)
{
    gp_givens_rotate(col, x, m, c, s, c, s);
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
