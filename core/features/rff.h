/* gpserve core: random Fourier features and the sparse-spectrum GP of one
 * frequency matrix (the second half of the feature machinery; the samplers
 * are core/features/sample.h). See the description at the top of sample.h, part 2. */
#ifndef GP_FEATURES_RFF_H
#define GP_FEATURES_RFF_H

#include <stddef.h>

#include "core/base/cancel.h"
#include "core/base/error.h"

/* ---- 2. the sparse-spectrum GP of one frequency matrix ---- */

/* Phi (n x 2R, leading dimension ldphi >= n) = sqrt(a2/R) [cos Z, sin Z] with
 * Z = (X diag(inv_ls)) Omega^T; X is n x d column-major (leading dimension n).
 * inv_ls NULL: X is already divided by the lengthscales (no scaled copy is
 * made, the prediction path; cannot fail). Otherwise GP_ENOMEM when the n x d
 * scaled copy cannot be allocated.
 * Runs on gp_parallel_for over row blocks (bit-identical for any thread count). */
int gp_rff_features(const double *X, size_t n, size_t d, const double *inv_ls,
                    const double *omega, size_t R, double amplitude2, double *Phi,
                    size_t ldphi);

typedef struct gp_rff_problem {
    const double *X; /* n x d column-major, working units */
    const double *y; /* n */
    size_t n, d, R;
    const double *omega;   /* R x d column-major */
    const double *log_ls;  /* d log lengthscales (repeat one value for a shared lengthscale) */
    double log_amplitude2; /* log a2 */
    double log_noise;      /* log s */
    /* The fit's token (may be NULL), polled between the phases of an
     * evaluation and between row blocks of the frequency gradient. */
    const gp_cancel *cancel;
} gp_rff_problem;

/* Gradient of the LML; any pointer may be NULL to skip that block (omega
 * costs one extra O(N R d) product; the others are almost free once the
 * O(N R^2) part is done). */
typedef struct gp_rff_grad {
    double *omega;  /* R x d */
    double *log_ls; /* d */
    double *log_amplitude2;
    double *log_noise;
} gp_rff_grad;

/* Workspace of one problem size (n, d, R): owned by the caller. */
typedef struct gp_rff_work gp_rff_work;
int gp_rff_work_new(size_t n, size_t d, size_t R, gp_rff_work **out, gp_error *err);
void gp_rff_work_free(gp_rff_work *w);

/* The LML (and gradient when grad != NULL). GP_ENOTPD when A cannot be
 * factored even with jitter (A's eigenvalues are >= s, so this means s has
 * underflowed); GP_EDATA for non-finite values; GP_ECANCELLED when p->cancel
 * asked to stop. */
int gp_rff_lml(const gp_rff_problem *p, gp_rff_work *w, double *lml, const gp_rff_grad *grad,
               gp_error *err);

/* The same with known noise variances of the n rows (noise: NULL for none;
 * finite, >= 0): row i has noise s + noise[i]. Evaluated by weighting: with
 * d_i = s / (s + noise[i]), row i of Phi and y is scaled by sqrt(d_i), which
 * makes the problem homoscedastic at s, and the LML gains sum log d_i / 2;
 * the work's factor and alpha are then those of the weighted rows (alpha is
 * still the posterior mean of the weights). log_noise's gradient is the
 * total derivative in log s with noise held. */
int gp_rff_lml_noise(const gp_rff_problem *p, const double *noise, gp_rff_work *w, double *lml,
                     const gp_rff_grad *grad, gp_error *err);

/* A mean's basis H (n x n_coef, column-major) profiled out of the LML:
 * every evaluation takes the GLS estimate beta = (H^T C^{-1} H)^{-1} H^T C^{-1} y
 * under C = Phi Phi^T + s I (+ the known noise), by Woodbury on A's factor
 * at O(N R p), and is then the LML of y - H beta, i.e. the maximum over
 * beta; the gradient is the one at that beta (envelope theorem). beta
 * (n_coef; may be NULL) receives the estimate; the work's alpha is then the
 * residual's. */
typedef struct gp_rff_basis {
    const double *H;
    size_t n_coef;
    double *beta;
} gp_rff_basis;

/* gp_rff_lml_noise with a mean's basis profiled out (basis NULL or n_coef 0:
 * none, the same bits as without). */
int gp_rff_lml_mean(const gp_rff_problem *p, const double *noise, const gp_rff_basis *basis,
                    gp_rff_work *w, double *lml, const gp_rff_grad *grad, gp_error *err);

/* After a successful gp_rff_lml on w: the factor L (2R x 2R, lower, column-
 * major, the strict upper triangle undefined), alpha (2R) and the absolute
 * jitter added to A's diagonal. Pointers into w, valid until its next use. */
const double *gp_rff_work_factor(const gp_rff_work *w);
const double *gp_rff_work_alpha(const gp_rff_work *w);
/* The residual y - Phi alpha (n): s K^{-1} y, so d LML / dy = -res / s. */
const double *gp_rff_work_residual(const gp_rff_work *w);
double gp_rff_work_jitter(const gp_rff_work *w);

/* ---- 3. the LML of rows read in chunks (core/features/rff_rows.h) ----
 * The LML needs the rows only through sums: Phi^T Phi, Phi^T y and y.y
 * (round one), then ||res||^2, y.res and dOmega = G_Z^T Xs with res =
 * y - Phi alpha (round two: the value's quadratic term, as in memory
 * ||res||^2 + s ||alpha||^2, and the gradient). A work made for `chunk` rows
 * (gp_rff_work_new's n) takes any chunk of b <= chunk rows: p->X (b x d,
 * working units), p->y (b) and p->n = b; the functions below share the
 * in-memory LML's arithmetic. Homoscedastic, zero mean. */

/* Round one of a chunk: adds Phi^T Phi's lower triangle, packed column by
 * column (2R (2R + 1) / 2), to gram, Phi^T y to phi_y (2R) and y.y to *yy.
 * Uses the work's A as scratch. */
void gp_rff_chunk_gram(const gp_rff_problem *p, size_t b, gp_rff_work *w, double *gram,
                       double *phi_y, double *yy);
/* Between the rounds, from the sums of every row: A = gram + s I factored
 * (with gp_rff_lml's jitter policy), alpha = A^{-1} phi_y and, with_inverse
 * (the gradient), A^{-1}. GP_ENOTPD when A cannot be factored. */
int gp_rff_factor_sums(const gp_rff_problem *p, gp_rff_work *w, const double *gram,
                       const double *phi_y, int with_inverse, gp_error *err);
/* Round two of a chunk, after gp_rff_factor_sums: adds res.res to sums[0],
 * y.res to sums[1] and, when dOmega is not NULL (it needs the inverse),
 * G_Z^T Xs to dOmega (R x d). */
int gp_rff_chunk_residual(const gp_rff_problem *p, size_t b, gp_rff_work *w, double *sums,
                          double *dOmega);
/* The LML of p->n rows (every row now) from round two's sums and the work's
 * factor, and its gradient when grad is not NULL (dOmega NULL: no
 * frequency or lengthscale blocks). */
int gp_rff_lml_from_sums(const gp_rff_problem *p, const gp_rff_work *w, double rr, double yres,
                         const double *dOmega, double *lml, const gp_rff_grad *grad,
                         gp_error *err);

#endif
