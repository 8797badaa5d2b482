/* gpserve core: the Cholesky factor and the inverse from it, blocked so that a
 * cancellation reaches them within a fraction of a second, and spread over the
 * compute threads (gp_parallel_for) rather than over OpenBLAS's own.
 *
 * LAPACK's dpotrf and dpotri are single calls that run for tens of seconds at
 * N = 20000 and cannot be interrupted. These do the same work recursively:
 * a triangle of order above GP_BLOCK_ORDER is split in two (Cholesky: factor,
 * triangular solve, symmetric update, factor), every product between the
 * halves is cut into independent panels of at most GP_BLOCK_PANEL rows or
 * columns that run as parallel tasks, each panel's work is level-3 BLAS calls
 * of bounded size, and the token is polled before each call and each
 * base-case LAPACK call. Speed against dpotrf and dpotri: bench/bench_blocked.c,
 * bench/results/blocked.md; with single-threaded OpenBLAS and two compute
 * threads: bench/results/blas_threads.md. Results agree with LAPACK's to
 * rounding (the order of the sums differs), and they do not depend on the
 * compute thread count (panels are fixed by the sizes; OpenBLAS's thread count
 * is process-wide and can change the last bits of its own calls). Only the
 * lower triangle is read and written; the strict upper triangle is left as it
 * was. */
#ifndef GP_LINALG_BLOCKED_H
#define GP_LINALG_BLOCKED_H

#include <stddef.h>

#include "core/base/cancel.h"
#include "core/base/error.h"

/* Order of the triangles handed to LAPACK/BLAS whole; the most rows or
 * columns of one parallel task (a product of 1024 or more has 4 tasks or
 * more, a smaller one 4 narrower panels: enough for 2 threads to share
 * evenly); and the largest gemm call inside a task (outputs per side, inner
 * terms): one call is at most 2 x 256 x 2048 x 1024 flops, about 0.03 s on
 * one core, the longest a cancellation waits for one thread. */
#define GP_BLOCK_ORDER 256
#define GP_BLOCK_PANEL 256
#define GP_BLOCK_TILE 2048
#define GP_BLOCK_DEPTH 1024

/* A = L L^T (lower) in place: GP_OK; GP_ENOTPD when a leading minor is not
 * positive definite (the lower triangle is then partly overwritten);
 * GP_ECANCELLED when the token asked to stop (the lower triangle is then
 * garbage). err may be NULL. */
int gp_potrf_blocked(double *A, size_t n, size_t lda, const gp_cancel *cancel, gp_error *err);

/* From a lower Cholesky factor L in A, the lower triangle of (L L^T)^{-1} in
 * place (LAPACK's dpotri 'L': the triangular inverse, then L^-T L^-1).
 * GP_ENOTPD when L has a zero on its diagonal; GP_ECANCELLED as above. */
int gp_potri_blocked(double *A, size_t n, size_t lda, const gp_cancel *cancel, gp_error *err);

#endif
