/* gpserve core: sparse variational GP regression with inducing points
 * (method "sgpr"; Titsias 2009, docs/methods/sparse-variational-and-pls.md §5.4).
 *
 * The objective is Titsias' collapsed bound F with its analytic gradient
 * (core/inducing/collapsed.h, shared with gwi's prior fit): O(N M^2 + M^3)
 * per evaluation, no N x N matrix.
 *
 * Options (GET /v1/methods lists them):
 *   inducing            M (default min(N, 256))
 *   inducing_selection  greedy (default) | kmeans | random (core/inducing/inducing.h)
 *   optimize_inducing   true (default): Z is optimised with the hyperparameters
 *                       (on kin40k, M = 512, this takes the test RMSE from 0.31
 *                       to 0.20); false: Z stays where selection put it
 *   reselect            with greedy selection and fixed Z: re-select Z under the
 *                       fitted kernel and refit, up to this many rounds while the
 *                       bound improves (default 2; gp_inducing_fit)
 *   max_iterations, tolerance   L-BFGS limits (per round)
 *
 * Predict: the whitened posterior g ~ N(B^{-1} V y / s2, B^{-1}), O(M^2) per
 * point (core/inducing/inducing.h). Reported: the bound (objective), the trace term
 * and, for N <= GP_SGPR_EXACT_REPORT_MAX, the exact log marginal likelihood
 * and the gap (exact - bound, the KL of q from the posterior).
 *
 * Observe (gp_model_observe, core/methods/sgpr.c): rows added with Z, the
 * kernel and the noise held; the whitened posterior (mt, C = B^{-1}) is
 * updated by Woodbury's identity in O(k M^2) for k rows (chunks of 256),
 * and equals the one a fit on all the rows with those Z and
 * hyperparameters builds, to rounding. The bound reported (objective,
 * trace_term, exact_lml) stays the fit's. Known per-point noise is taken
 * (observe_noise). Not for a coregionalised model (422).
 *
 * Over rows read in chunks (gp_fit_request.rows, descriptor flag
 * streams_rows; docs/design/scale-out.md, "Streamed and sharded fits"): the
 * bound of core/inducing/collapsed_rows.h, two passes and two reductions per
 * evaluation (M(M+1)/2 + M + 2 doubles, then n_theta + d M + 1), memory
 * O(chunk M + M^2) whatever N; Z chosen among min(N, max(4096, 8M))
 * candidate rows (core/inducing/candidates.h: every row up to that, so the
 * in-memory Z); every process of a sharded fit takes the same steps. A
 * mean function and coregionalisation are refused over rows (422), no
 * exact_lml is reported; streamed_rows, chunk_rows, ranks and candidates
 * are. */
#ifndef GP_SGPR_H
#define GP_SGPR_H

#include "core/inducing/collapsed.h"
#include "core/model/model.h"

extern const gp_method gp_method_sgpr;

/* The exact LML and the gap are reported up to this many training points
 * (one N x N Cholesky after the fit). */
#define GP_SGPR_EXACT_REPORT_MAX 5000

#endif
