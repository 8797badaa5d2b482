/* gpserve core: column-major dense matrices on CBLAS/LAPACKE.
 *
 * Every matrix is column-major with leading dimension equal to its row count
 * (element (i, j) at data[j * rows + i]); every LAPACKE call uses
 * LAPACK_COL_MAJOR so that no hidden transposed copy is made. */
#ifndef GP_LINALG_H
#define GP_LINALG_H

#include <stddef.h>

#include "core/base/cancel.h"
#include "core/base/error.h"

typedef struct gp_matrix {
    size_t rows;
    size_t cols;
    double *data; /* owned by the matrix; rows * cols doubles */
} gp_matrix;

#define GP_AT(m, i, j) ((m)->data[(size_t)(j) * (m)->rows + (size_t)(i)])

/* Largest element count any single allocation may have (guards size_t overflow
 * and absurd requests before malloc). */
#define GP_MAX_ELEMENTS ((size_t)1 << 34)

/* Overflow-checked rows*cols; returns GP_ETOOBIG on overflow or above GP_MAX_ELEMENTS. */
int gp_checked_size(size_t rows, size_t cols, size_t *count, gp_error *err);

/* Allocate an uninitialised (or zeroed) rows x cols matrix; m->data owned by m. */
int gp_matrix_alloc(gp_matrix *m, size_t rows, size_t cols, gp_error *err);
int gp_matrix_zeros(gp_matrix *m, size_t rows, size_t cols, gp_error *err);
void gp_matrix_free(gp_matrix *m);

/* Overflow-checked malloc of count doubles (NULL + err on failure). Free with free(). */
double *gp_alloc_doubles(size_t count, gp_error *err);

/* Outcome of a jittered Cholesky. */
typedef struct gp_chol_info {
    double jitter;  /* absolute value added to the diagonal (0 when none was needed) */
    int attempts;   /* factorisations tried */
} gp_chol_info;

/* Jitter policy (docs/design/numerics.md): NaN/Inf check first (GP_EDATA), then jitter 0, then
 * 1e-8 * mean(diag), x10 per retry up to 1e-2 * mean(diag); GP_ENOTPD after that,
 * naming the largest jitter tried.
 *
 * A (n x n, leading dimension lda) must hold the full symmetric matrix. On success
 * its lower triangle holds L (A + jitter I = L L^T) and its strict upper triangle
 * still holds the original off-diagonal entries; the original diagonal is lost
 * (it is diag(L L^T) - jitter). Only n extra doubles are used: retries rebuild
 * the lower triangle from the untouched upper one. */
int gp_cholesky_jitter(double *A, size_t n, size_t lda, gp_chol_info *info, gp_error *err);
/* The same, polling cancel (may be NULL) between blocks of the factorisation
 * (core/linalg/blocked.h) and of the retries' restores: GP_ECANCELLED leaves
 * A's lower triangle garbage (the upper one is still the original). */
int gp_cholesky_jitter_cancellable(double *A, size_t n, size_t lda, const gp_cancel *cancel,
                                   gp_chol_info *info, gp_error *err);

/* Zero the strict upper triangle of A (n x n, leading dimension lda): what a
 * factorisation leaves there, so that only the lower factor remains. */
void gp_zero_upper(double *A, size_t n, size_t lda);
/* Copy the lower triangle of A onto its upper triangle (A symmetric afterwards). */
void gp_symmetrize_from_lower(double *A, size_t n, size_t lda);
/* Replace A_ij and A_ji by their mean: a product that is symmetric in exact
 * arithmetic made symmetric against rounding. */
void gp_symmetrize_average(double *A, size_t n, size_t lda);

/* 2 * sum(log L_ii) for a lower Cholesky factor. */
double gp_chol_logdet(const double *L, size_t n, size_t lda);

/* Solve L L^T X = B in place (B n x nrhs, leading dimension ldb). */
void gp_chol_solve(const double *L, size_t n, size_t lda, double *B, size_t nrhs, size_t ldb);

/* B <- L^{-1} B (trans = 0) or L^{-T} B (trans = 1), L lower n x n, B n x nrhs. */
void gp_trsm_lower(const double *L, size_t n, size_t lda, int trans, double *B, size_t nrhs,
                   size_t ldb);

/* Solve L X = B in place, L lower triangular with a non-unit diagonal (n x n,
 * leading dimension ldl), B n x nrhs (leading dimension ldb). Batch-invariant:
 * each column gets the same sequence of floating-point operations (forward
 * substitution in column order, one fma() per multiply-add) whatever nrhs, the
 * column's position, the other columns and the thread count, so a column's
 * result is bitwise the one it gets solved alone; gp_trsm_lower's is not
 * (dtrsv and dtrsm change kernels with nrhs). L streams through the cache once
 * per 64 columns; groups of 64 columns run as gp_parallel_for tasks. */
void gp_solve_lower_columns(const double *L, size_t n, size_t ldl, double *B, size_t nrhs,
                            size_t ldb);
/* The same on a path chosen by the caller instead of by the CPU: 0 the
 * portable update (target_clones: 4 columns of L at a time on AVX-512, 3 on
 * AVX2), 1 AVX-512's register tiles (core/linalg/trs_tiles.c; a CPU without
 * AVX-512 falls back to 0). Same bits on every path; it exists so that tests
 * check them all. */
void gp_solve_lower_columns_path(const double *L, size_t n, size_t ldl, double *B, size_t nrhs,
                                 size_t ldb, int path);
/* gp_solve_lower_columns's bits, faster for many columns of a small factor
 * (n of a few dozen): groups of 32 columns solved with the columns across the
 * vector lanes, the rest by gp_solve_lower_columns. work: n (n + 32) doubles.
 * Single-threaded. */
#define GP_SOLVE_LANES_WORK(n) ((n) * ((n) + 32))
void gp_solve_lower_columns_lanes(const double *L, size_t n, size_t ldl, double *B, size_t nrhs,
                                  size_t ldb, double *work);
/* gp_solve_lower_columns on a packed factor P (gp_pack_lower's layout,
 * n(n+1)/2 doubles): the same bits as that solve on the unpacked L, so
 * batch-invariant as well; rfgp's posterior keeps its factor packed for the
 * rank-one updates. */
void gp_solve_lower_packed_columns(const double *P, size_t n, double *B, size_t nrhs, size_t ldb);
/* Solve L^T x = b in place for one vector b (L lower triangular n x n,
 * leading dimension ldl): backward substitution, x_i from gp_dot of L's
 * column i below the diagonal with x_{i+1..n}, so the bits depend on the
 * values and n alone (not on the thread count or the CPU's vector width).
 * O(n^2), reading L column by column as it is stored. */
void gp_solve_lower_trans_vector(const double *L, size_t n, size_t ldl, double *b);
/* x . y (n entries, unit stride) in an order fixed by n alone, with fma(): the
 * same bits for the same vectors wherever they sit in memory, in any thread
 * (OpenBLAS's ddot splits vectors of more than 10000 entries over its threads). */
double gp_dot(const double *x, const double *y, size_t n);
/* C = A^T X with every entry gp_dot's bits: C[j + i ldc] = gp_dot(column j of
 * A, column i of X, k) for the p columns of A (k x p, leading dimension lda)
 * and the q of X (k x q, ldx). What dgemm computes, but a column's results do
 * not depend on p, q, its position or the other columns (OpenBLAS's AVX-512
 * dgemm picks a small-matrix kernel by the product's size); tiles of 4 x 4
 * dots share their loads. */
void gp_dot_columns(const double *A, size_t lda, size_t p, const double *X, size_t ldx,
                    size_t q, size_t k, double *C, size_t ldc);

/* Pack / unpack the lower triangle of an n x n matrix column by column
 * (n(n+1)/2 doubles), used to export Cholesky factors without the dead half. */
void gp_pack_lower(const double *A, size_t n, size_t lda, double *packed);
void gp_unpack_lower(const double *packed, size_t n, double *A, size_t lda);

/* One pass of a Givens rotation over m entries: (col, x) <- (c1 col + s1 x,
 * c2 x - s2 col). c1 = c2 = c, s1 = s2 = s is the plain rotation; rfgp folds
 * its forgetting factor into the factor's side (c1 = c sqrt(l), s2 = s sqrt(l)). */
void gp_givens_rotate(double *restrict col, double *restrict x, size_t m, double c1, double s1,
                      double c2, double s2);
/* Rank-one update of a lower Cholesky factor: on return L L^T is the old
 * L L^T + x x^T (L n x n, leading dimension lda, lower triangle used; x
 * overwritten). Givens rotations applied column by column (each one level-1
 * drot over a contiguous column), O(n^2), stable: the factor never leaves
 * the Cholesky form, unlike Sherman-Morrison on the inverse
 * (docs/methods/kernel-jit-online.md §8.4). A non-positive diagonal entry
 * stays untouched. */
void gp_chol_update_rank1(double *L, size_t n, size_t lda, double *x);
/* The same on a packed lower factor (gp_pack_lower's layout: column j's
 * n - j entries from the diagonal down, one column after the other), which
 * the update streams contiguously: ~90 us at n = 800 against ~140 us for the
 * n x n layout on the reference machine. */
void gp_chol_update_rank1_packed(double *P, size_t n, double *x);
/* The same for k vectors at once: L L^T + X X^T, X n x k (leading dimension
 * ldx, overwritten), one rank-one update per column. */
void gp_chol_update(double *L, size_t n, size_t lda, double *X, size_t k, size_t ldx);

/* 1 if every one of the count values is finite, else 0 and *bad_index set. */
int gp_all_finite(const double *x, size_t count, size_t *bad_index);

#endif
