/* gpserve core: the points inducing inputs are chosen from when the rows of
 * a fit are read in chunks (core/model/rows.h) rather than held.
 *
 * Greedy, k-means and random selection (core/inducing/select.h) need the
 * candidates together in memory, and every process of a sharded fit must
 * choose the same Z. So the candidates are K rows drawn by GLOBAL index
 * with a seed derived from the fit's (gp_rows_sample_indices), gathered on
 * every process (gp_rows_gather: one reduction of K (d + 1) numbers, through
 * the fit's gp_rows_sync, so a failure on one process ends every process)
 * and standardised like the fit's rows:
 *   K = min(N, max(GP_INDUCING_CANDIDATES_MIN, GP_INDUCING_CANDIDATES_PER_M * M)).
 * While N <= K every row is a candidate, in order: the selection is then
 * the one a fit of the same rows in memory makes (the same Z, bit for bit).
 * Above it the selection sees a uniform subsample of 8 candidates per
 * inducing point (at least 4096): greedy's pivoted Cholesky costs O(K M^2)
 * time and O(K M) memory instead of O(N M), which keeps the fit's memory
 * independent of N. */
#ifndef GP_INDUCING_CANDIDATES_H
#define GP_INDUCING_CANDIDATES_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/error.h"
#include "core/model/model.h"
#include "core/model/rows_sync.h"

#define GP_INDUCING_CANDIDATES_MIN 4096
#define GP_INDUCING_CANDIDATES_PER_M 8

/* K for n_total rows and M inducing points (the formula above). */
size_t gp_inducing_candidate_count(size_t n_total, size_t M);

/* The K candidates of the sync's rows for M inducing points and the fit's
 * seed, in the working units of model (gp_model_standardize_points: x_mean,
 * x_scale), point-major d x K in *P (allocated here; caller frees). A
 * failure on any process (its buffers, its reader) is agreed by every one
 * (then *P is NULL everywhere). */
int gp_inducing_candidates(gp_rows_sync *s, const gp_model *model, size_t M, uint64_t seed,
                           double **P, size_t *K, gp_error *err);

#endif
