/* gpserve core: Titsias' collapsed bound (core/inducing/collapsed.h) over rows
 * read in chunks and summed over the processes of a fit (core/model/rows.h;
 * docs/design/scale-out.md, "Streamed and sharded fits").
 *
 * The bound needs the rows only through sums (docs/design/scale-out.md,
 * "The statistics, method by method"), so one evaluation is two passes over
 * this process's shard, each followed by one reduction:
 *   round one, per chunk: Kuf = k(Z, X_c), V_c = L^{-1} Kuf, and the sums
 *     V V^T / s2 (the lower triangle, packed: m (m + 1) / 2), V y (m), y.y
 *     and tr(V V^T); reduced together, they give B, its factor, c, mw and F
 *     on every process (gp_collapsed_mm: the arithmetic of the in-memory
 *     bound on the same sums);
 *   round two (the gradient only), per chunk: Kuf and V_c again, beta_c and
 *     Wuf_c = 2 T V_c + 2 h beta_c^T from the globals T and h, and their
 *     contraction with dKuf/dtheta and dKuf/dZ; reduced: the kernel
 *     gradient's Kuf part (n_theta), dF/dZ's (d m, when Z is optimised) and
 *     beta.beta; every process then adds the Kuu and diagonal terms
 *     (gp_inducing_contract_kuu) and the noise's.
 * A value alone (or the posterior) is round one. Each reduction carries
 * GP_ROWS_SYNC_SLOTS more doubles (core/model/rows_sync.h: failures and
 * cancellations agreed by every process).
 *
 * Memory: O(chunk m) for the chunk (Kuf, V, Wuf: three m x chunk, and the
 * chunk's points) plus O(m^2) (the M x M algebra, the packed sums and one
 * chunk's V V^T), whatever N: nothing of size N is held.
 *
 * Only the homoscedastic bound with a zero mean streams: known per-point
 * noise and a mean's basis are refused by the fit over rows (sgpr.c). */
#ifndef GP_INDUCING_COLLAPSED_ROWS_H
#define GP_INDUCING_COLLAPSED_ROWS_H

#include <stddef.h>

#include "core/base/error.h"
#include "core/inducing/collapsed.h"
#include "core/inducing/inducing.h"
#include "core/model/rows.h"
#include "core/model/rows_sync.h"

/* The rows of a streamed collapsed-bound fit and its kept buffers. */
typedef struct gp_collapsed_rows {
    const gp_rows *rows;
    /* The standardisation of the rows (x_mean, x_scale, y_mean, y_scale:
     * gp_model_new's over the rows) and their input dimension. */
    const gp_model *units;
    gp_rows_sync *sync; /* agreed failures; its chunk buffers are the reads' */
    /* Buffers of the last m, allocated by the first evaluation and kept for
     * the next ones (agreed by every process when allocated). NULL to begin
     * with; gp_collapsed_rows_release frees them. */
    struct gp_collapsed_rows_work *work;
} gp_collapsed_rows;

/* F at kernel k, noise s2 and inducing inputs Z (d x m) over every row of
 * every process, as gp_sgpr_bound: grad (NULL: the value only) gets
 * gp_kernel_n_params(k) entries then dF/dlog s2, gz (may be NULL) dF/dZ,
 * post (may be NULL) the whitened posterior. Identical results on every
 * process. GP_ENOTPD where the bound cannot be evaluated (on every process
 * alike); a reader's failure, a cancel or a failed reduction on any process
 * ends every process with that error, sticky in data->sync. */
int gp_sgpr_rows_bound(gp_collapsed_rows *data, const gp_kernel *k, double s2, const double *Z,
                       size_t m, gp_sgpr_terms *terms, double *grad, double *gz,
                       gp_inducing_post *post, gp_error *err);

/* The bound as the gp_inducing_objective of gp_inducing_fit (ctx: a
 * gp_collapsed_rows). */
int gp_collapsed_rows_objective(void *ctx, const gp_kernel *k, double s2, const double *Z,
                                size_t m, double *f, double *grad, double *gz);

void gp_collapsed_rows_release(gp_collapsed_rows *data);

/* Doubles a streamed evaluation holds for m inducing points, chunk rows of
 * d inputs and np kernel parameters (the size guard's figure; the
 * candidates and the selection are the caller's). */
double gp_collapsed_rows_doubles(size_t m, size_t chunk, size_t d, size_t np);

#endif
