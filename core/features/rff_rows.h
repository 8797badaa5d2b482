/* gpserve core: the sparse-spectrum LML (core/features/rff.h) over rows read
 * in chunks and summed over the processes of a fit (core/model/rows.h;
 * docs/design/scale-out.md, "Streamed and sharded fits").
 *
 * One evaluation is two passes over this process's shard, each followed by
 * one reduction (with the GP_ROWS_SYNC_SLOTS of core/model/rows_sync.h):
 *   round one, per chunk: Phi_c (chunk x 2R) and the sums Phi^T Phi (the
 *     lower triangle packed: R (2R + 1)), Phi^T y (2R) and y.y; every
 *     process then factors A = Phi^T Phi + s I and solves alpha;
 *   round two, per chunk: Phi_c again, res_c = y_c - Phi_c alpha and the
 *     sums ||res||^2, y.res and, for the frequency and lengthscale
 *     gradients, dOmega = G_Z^T Xs (R d).
 * The value needs round two too (its quadratic term ||res||^2 + s ||alpha||^2
 * avoids the cancellation of y.y - y^T Phi alpha), so a value alone costs
 * the same two passes without the gradient's product.
 *
 * Memory: O(chunk R) (the chunk's features, inputs and the gradient's row
 * blocks) plus O(R^2) (A, its inverse, the packed sums), whatever N. */
#ifndef GP_FEATURES_RFF_ROWS_H
#define GP_FEATURES_RFF_ROWS_H

#include <stddef.h>

#include "core/base/error.h"
#include "core/features/rff.h"
#include "core/model/model.h"
#include "core/model/rows.h"
#include "core/model/rows_sync.h"

typedef struct gp_rff_rows {
    const gp_rows *rows;
    /* The rows' standardisation (gp_model_new's over the rows) and the d
     * input columns the kernel sees (its active dimensions). */
    const gp_model *units;
    const size_t *dims;
    size_t d;
    gp_rows_sync *sync;
    /* Buffers for R frequencies, allocated by the first evaluation (every
     * process agreeing) and kept; gp_rff_rows_release frees them. */
    struct gp_rff_rows_work *work;
} gp_rff_rows;

/* The LML (and gradient when grad is not NULL) of p's hyperparameters and
 * frequencies (p->X, p->y and p->n are not read: the rows come from s) over
 * every row of every process; identical on every process. Errors as
 * gp_rff_lml's; a reader's failure, a cancel or a failed reduction on any
 * process ends every process with that error, sticky in s->sync. */
int gp_rff_rows_lml(gp_rff_rows *s, const gp_rff_problem *p, double *lml,
                    const gp_rff_grad *grad, gp_error *err);

/* After a successful gp_rff_rows_lml: the work holding A's factor, alpha
 * and the jitter (gp_rff_work_factor ...), and round one's sums Phi^T y (2R)
 * and y.y over every row. */
const gp_rff_work *gp_rff_rows_work(const gp_rff_rows *s);
const double *gp_rff_rows_phi_y(const gp_rff_rows *s);
double gp_rff_rows_y_sq(const gp_rff_rows *s);

void gp_rff_rows_release(gp_rff_rows *s);

/* Doubles an evaluation holds for R frequencies and chunk rows of d inputs
 * (the size guard's figure). */
double gp_rff_rows_doubles(size_t R, size_t chunk, size_t d);

#endif
