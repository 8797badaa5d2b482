/* Candidate points for inducing inputs over streamed rows: see
 * core/inducing/candidates.h. */
#include "core/inducing/candidates.h"

#include <stdlib.h>

#include "core/base/rng.h"
#include "core/linalg/linalg.h"
#include "core/model/method.h"
#include "core/model/rows_passes.h"

/* The stream of the fit's seed the candidate indices come from (the
 * selection itself takes the seed as given). */
#define CANDIDATE_STREAM 0x43414e44u /* "CAND" */

size_t gp_inducing_candidate_count(size_t n_total, size_t M)
{
    size_t per = M <= SIZE_MAX / GP_INDUCING_CANDIDATES_PER_M ? GP_INDUCING_CANDIDATES_PER_M * M
                                                              : SIZE_MAX;
    size_t k = per > GP_INDUCING_CANDIDATES_MIN ? per : GP_INDUCING_CANDIDATES_MIN;
    return k < n_total ? k : n_total;
}

int gp_inducing_candidates(gp_rows_sync *s, const gp_model *model, size_t M, uint64_t seed,
                           double **P, size_t *K, gp_error *err)
{
    const gp_rows *rows = s->rows;
    *P = NULL;
    size_t k = gp_inducing_candidate_count(rows->n_total, M), kd = 0;
    gp_error local;
    gp_error_clear(&local);
    int rc = gp_checked_size(k, rows->d, &kd, &local);
    size_t *idx = malloc((k ? k : 1) * sizeof *idx);
    double *X = gp_alloc_doubles(kd ? kd : 1, &local);
    double *out = gp_alloc_doubles(kd ? kd : 1, &local);
    if (rc == GP_OK && (idx == NULL || X == NULL || out == NULL))
        rc = gp_error_set(&local, GP_ENOMEM, NULL, "out of memory");
    gp_rng rng;
    gp_rng_derive(&rng, seed, CANDIDATE_STREAM);
    if (rc == GP_OK)
        rc = gp_rows_sample_indices(rows->n_total, k, gp_rng_next(&rng), idx, &local);
    gp_rows_sync_pend(s, rc, &local); /* agreed by the gather's first sum */
    rc = gp_rows_gather(s, idx, k, X, NULL, err);
    if (rc == GP_OK) {
        gp_model_standardize_points(model, X, k, out);
        *P = out;
        *K = k;
        out = NULL;
    }
    free(idx);
    free(X);
    free(out);
    return rc;
}
