/* gpserve core: large level-3 products of the sparse fits (sgpr's collapsed
 * bound, the random-feature LML) cut into panels that run as tasks of the
 * shared pool (gp_parallel_for), so a fit uses every compute thread while
 * OpenBLAS runs single-threaded (docs/design/numerics.md "Determinism").
 *
 * The panels split the OUTPUT (columns of a solve or a product, column ranges
 * of a symmetric product's lower triangle), never an inner sum: every output
 * element is one BLAS call's sum over the full inner dimension. Panel
 * boundaries are functions of the sizes alone, so results are bit-identical
 * for any compute thread count. A product too small to be worth a task runs
 * as one BLAS call, as before. */
#ifndef GP_LINALG_PANELS_H
#define GP_LINALG_PANELS_H

#include <stddef.h>

/* Columns of one panel of a column-split solve or product: about 256 KB of
 * right-hand side per 128 rows, many tasks for two threads at N = 10^4. */
#define GP_PANEL_COLS 256
/* Column ranges of a symmetric product's lower triangle (equal pair counts). */
#define GP_PANEL_SYRK_PARTS 8
/* Below this many multiply-adds a product runs as one call. */
#define GP_PANEL_MIN_FLOPS 4.0e6

/* B (n x nrhs, ldb) := L^{-1} B, or L^{-T} B with trans, L lower n x n:
 * gp_trsm_lower on panels of GP_PANEL_COLS columns. */
void gp_panel_trsm_lower(const double *L, size_t n, size_t ldl, int trans, double *B,
                         size_t nrhs, size_t ldb);

/* Lower triangle of C (n x n, ldc) := alpha op(A) op(A)^T, op(A) n x k: A is
 * n x k (lda) when trans is 0, k x n when trans is 1 (so C = alpha A^T A).
 * dsyrk on each range's diagonal block, dgemm below it. The strict upper
 * triangle is left as it was, except inside the diagonal blocks. */
void gp_panel_syrk_lower(int trans, size_t n, size_t k, double alpha, const double *A,
                         size_t lda, double *C, size_t ldc);

/* C (m x n, ldc) := alpha A B + beta C, A m x k (lda), B k x n (ldb), on panels
 * of GP_PANEL_COLS columns of B and C. */
void gp_panel_gemm_nn(size_t m, size_t n, size_t k, double alpha, const double *A, size_t lda,
                      const double *B, size_t ldb, double beta, double *C, size_t ldc);

#endif
