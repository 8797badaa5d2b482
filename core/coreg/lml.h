/* gpserve core: the log marginal likelihood of a coregionalised GP over
 * the observed entries of y and its analytic gradient in the packed
 * coordinates of gp_coreg_params (docs/design/multioutput.md, "The
 * computation").
 *
 * General path: the M x M covariance K_ab = sum_q B_q[j_a,j_b] k_q(x_a,x_b)
 * + noise_{j_a} delta_ab of the observed entries, one Cholesky factor.
 * Kronecker path (ICM, isotopic): K = K_x (x) B + I (x) D in the entries'
 * row order, by eigen-decompositions of K_x (N x N) and D^-1/2 B D^-1/2. */
#ifndef GP_COREG_LML_H
#define GP_COREG_LML_H

#include <stddef.h>

#include "core/base/cancel.h"
#include "core/coreg/params.h"
#include "core/linalg/linalg.h"

typedef struct gp_coreg_data {
    const double *Xt;           /* d x n rows, working units, point-major */
    size_t n, d;
    const gp_coreg_entries *e;  /* the observed entries (row order) */
    const double *yw;           /* M working targets */
} gp_coreg_data;

/* The M x M covariance of the entries into K (full, leading dimension M),
 * with the noises on the diagonal; Kx: q x (n x n) scratch that receives
 * each latent kernel's Gram over the rows. */
int gp_coreg_covariance(const gp_coreg_params *cp, const gp_coreg_data *D, double *Kx, double *K,
                        const gp_cancel *cancel, gp_error *err);

/* General path. A (M x M) receives the Cholesky factor (lower; the upper
 * triangle keeps K's off-diagonal), alpha (M) = K^-1 y, *lml the LML. With
 * grad (gp_coreg_params_dim entries, d LML / d x) A is then overwritten by
 * the inverse's weights. Jitter policy of gp_cholesky_jitter (info). */
int gp_coreg_lml_general(const gp_coreg_params *cp, const gp_coreg_data *D, double *A,
                         double *alpha, double *lml, double *grad, const gp_cancel *cancel,
                         gp_chol_info *info, gp_error *err);

/* Kronecker path (cp->q == 1, every entry observed): the same LML and
 * gradient with O(N^3 + N^2 p) work and N x N memory. GP_ENOTPD when the
 * covariance is not positive definite (no jitter). */
int gp_coreg_lml_kronecker(const gp_coreg_params *cp, const gp_coreg_data *D, double *lml,
                           double *grad, const gp_cancel *cancel, gp_error *err);

/* The Kronecker path's decomposition at the parameters (kept by a model
 * fitted on it, for predictions): K_x = U diag(s) U^T, D^-1/2 B D^-1/2 =
 * V diag(l) V^T, and alpha as an n x p matrix A (A[i + n j] = alpha of row
 * i's output j). Z and T are scratch. */
typedef struct gp_coreg_kron {
    size_t n, p;
    double *U, *s;  /* n x n, n */
    double *V, *l;  /* p x p, p */
    double *Z, *A, *T; /* n x p each */
} gp_coreg_kron;

/* The decomposition and the LML (no jitter: GP_ENOTPD when the covariance
 * is not positive definite); *w allocated here (gp_coreg_kron_free). */
int gp_coreg_kron_factor(const gp_coreg_params *cp, const gp_coreg_data *D, gp_coreg_kron *w,
                         double *lml, const gp_cancel *cancel, gp_error *err);
void gp_coreg_kron_free(gp_coreg_kron *w);

#endif
