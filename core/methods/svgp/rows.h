/* Method "svgp" over rows read in chunks (gp_fit_request.rows,
 * core/model/rows.h): a fit over a data set in the store, or one process's
 * shard of it under MPI (docs/design/scale-out.md, "svgp").
 *
 * The rows are never held: memory is O(chunk d + B M + M^2) for minibatches
 * of B rows and M inducing points, whatever N. Minibatch Adam on the kernel,
 * noise, Z and the mean with natural-gradient steps on q, as the in-memory
 * adam optimiser (train.h: svgp_adam_step), over minibatches defined on
 * global row indices (batches.h); each step every process evaluates the data
 * term and its gradients over its part of the minibatch with the in-memory
 * path's block code (stream.h) and one gp_rows_sum adds them, so every
 * process takes the same step. Z is chosen among sgpr's candidates, rows
 * gathered by global index (core/inducing/candidates.h); the reported ELBO
 * is a last pass over every row. Every sum goes through the fit's
 * gp_rows_sync (core/model/rows_sync.h), so a failure, a cancel or a stop on
 * one process ends every process at the same step. The model is the
 * in-memory fit's kind (predict, sample, persist, export).
 *
 * Gaussian likelihood, one output, no per-point noise (gp_model_fit refuses
 * the rest for a fit over rows); optimizer lbfgs and coregionalization are
 * refused here (422 naming the option). */
#ifndef GP_METHODS_SVGP_ROWS_H
#define GP_METHODS_SVGP_ROWS_H

#include "core/methods/svgp/internal.h"

int svgp_rows_fit_op(const gp_method *m, const gp_fit_request *req, gp_model **out,
                     gp_error *err);

#endif
