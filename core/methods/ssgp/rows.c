/* Method "ssgp" over rows read in chunks: see core/methods/ssgp/rows.h. */
#include "core/methods/ssgp/rows.h"

#include <stdlib.h>
#include <string.h>

#include "core/linalg/linalg.h"
#include "core/model/rows_passes.h"

int ssgp_rows_refused(const gp_fit_request *req, gp_error *err)
{
    if (req->mean != GP_MEAN_ZERO)
        return gp_error_set(err, GP_EUNSUPPORTED, "mean",
                            "mean: ssgp over a data set fits a zero mean (the rows are "
                            "standardised, so a constant mean is their average)");
    return GP_OK;
}

/* The chunk's working inputs in the kernel's dimensions, the columns whose
 * spread gp_features_spread measures in memory. */
typedef struct leaf_cols {
    const gp_model *units;
    const size_t *dims;
    size_t d;
    double *Xw; /* one chunk's working inputs */
} leaf_cols;

static void leaf_columns(void *ctx, size_t count, const double *X, const double *y,
                         const double **cols)
{
    (void)y;
    leaf_cols *c = ctx;
    gp_model_leaf_inputs(c->units, c->dims, c->d, NULL, X, count, 0, count, c->Xw);
    for (size_t k = 0; k < c->d; k++)
        cols[k] = c->Xw + k * count;
}

int ssgp_rows_column_var(gp_rows_sync *sync, const gp_model *units, const size_t *dims,
                         size_t d, double *var, gp_error *err)
{
    size_t cd = 0;
    gp_error local;
    gp_error_clear(&local);
    int rc = gp_checked_size(sync->rows->chunk, d, &cd, &local);
    double *Xw = rc ? NULL : gp_alloc_doubles(cd, &local);
    double *mean = gp_alloc_doubles(d, &local);
    if (rc == GP_OK && (Xw == NULL || mean == NULL))
        rc = local.code;
    gp_rows_sync_pend(sync, rc, &local); /* agreed by the moments' first sum */
    leaf_cols c = {units, dims, d, Xw};
    rc = gp_rows_column_moments(sync, d, leaf_columns, &c, mean, var, err);
    free(Xw);
    free(mean);
    return rc;
}

void ssgp_rows_cache_targets(ssgp_impl *im, const gp_rff_rows *stream)
{
    memcpy(im->phi_y, gp_rff_rows_phi_y(stream), im->m * sizeof *im->phi_y);
    im->y_sq = gp_rff_rows_y_sq(stream);
    im->log_d = 0.0;
}
