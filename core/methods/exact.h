/* gpserve core: exact GP regression (method "exact").
 *
 * Hyperparameters maximise the log marginal likelihood (LML) with analytic
 * gradients and L-BFGS, with optional seeded random restarts. The fit caches the
 * Cholesky factor L of K + s2 I (+ jitter) and alpha = (K + s2 I)^{-1} y, so a
 * prediction is a kernel row plus a triangular solve. Memory: one N x N matrix
 * during the fit and one (the factor) per fitted model; N is capped by
 * max_train_points (default 20000).
 *
 * Online (gp_model_observe): k new rows extend the factor by its last k rows
 * and columns with the fit's hyperparameters, standardisation and jitter,
 * O(N^2 k) for N = n + k, and alpha is solved again from the stored targets;
 * the result is the model a fit of all rows with those hyperparameters held
 * gives. The factor keeps spare rows as it grows (at most 3 % of N^2 more
 * memory); the fit's max_train_points stays the cap on N (GP_ETOOBIG naming
 * "X" beyond it). Rows that make the new block singular (repeats under a
 * tiny noise) recompute the whole factor under the jitter policy.
 *
 * Exported arrays: chol_packed, X_train (d x N), alpha, y_train (N, working
 * units) and max_train_points; a state without the last two (written before
 * observe existed) imports with y = (L L^T) alpha and the default cap.
 *
 * Several outputs with options.coregionalization: core/coreg/exact.h. */
#ifndef GP_EXACT_H
#define GP_EXACT_H

#include <stddef.h>

#include "core/model/model.h"

extern const gp_method gp_method_exact;

/* With options.coregionalization the model is core/coreg/exact.c's; its
 * impl, for tests and benchmarks (NULL for a single-output model). */
struct gp_coreg_exact;
struct gp_coreg_exact *gp_exact_coreg(const gp_model *model);

#endif
