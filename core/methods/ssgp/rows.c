/* Method "ssgp" over rows read in chunks: see core/methods/ssgp/rows.h. */
#include "core/methods/ssgp/rows.h"

#include <stdlib.h>
#include <string.h>

int ssgp_rows_refused(const gp_fit_request *req, gp_error *err)
{
    if (req->mean != GP_MEAN_ZERO)
        return gp_error_set(err, GP_EUNSUPPORTED, "mean",
                            "mean: ssgp over a data set fits a zero mean (the rows are "
                            "standardised, so a constant mean is their average)");
    return GP_OK;
}

typedef struct var_pass {
    const gp_model *units;
    const size_t *dims;
    size_t d;
    double *Xw;         /* one chunk's working inputs */
    const double *mean; /* NULL in the first pass (sums), then d means */
    double *acc;        /* d: the sums, or the centred sums of squares */
} var_pass;

/* Each column's sum over the chunk, then added: the order of
 * gp_features_spread's loops when one chunk holds every row. */
static int var_chunk(void *ctx, size_t i, size_t b, const double *X, const double *y,
                     gp_error *err)
{
    (void)i;
    (void)y;
    (void)err;
    var_pass *v = ctx;
    gp_model_leaf_inputs(v->units, v->dims, v->d, NULL, X, b, 0, b, v->Xw);
    for (size_t k = 0; k < v->d; k++) {
        const double *col = v->Xw + k * b;
        double s = 0.0;
        if (v->mean == NULL) {
            for (size_t r = 0; r < b; r++)
                s += col[r];
        } else {
            for (size_t r = 0; r < b; r++) {
                double t = col[r] - v->mean[k];
                s += t * t;
            }
        }
        v->acc[k] += s;
    }
    return GP_OK;
}

int ssgp_rows_column_var(gp_rows_sync *sync, const gp_model *units, const size_t *dims,
                         size_t d, double *var, gp_error *err)
{
    const gp_rows *rows = sync->rows;
    size_t cd = 0;
    gp_error local;
    gp_error_clear(&local);
    int rc = gp_checked_size(rows->chunk, d, &cd, &local);
    double *Xw = rc ? NULL : gp_alloc_doubles(cd, &local);
    /* the sums and the slots after them, then the means */
    double *buf = gp_alloc_doubles(2 * d + GP_ROWS_SYNC_SLOTS, &local);
    double *mean = buf ? buf + d + GP_ROWS_SYNC_SLOTS : NULL;
    rc = Xw && buf ? GP_OK : GP_ENOMEM;
    rc = gp_rows_sync_agree(sync, rc, &local, err);
    double n = (double)rows->n_total;
    var_pass v = {units, dims, d, Xw, NULL, buf};
    for (int pass = 0; pass < 2 && rc == GP_OK; pass++) {
        memset(buf, 0, d * sizeof *buf);
        gp_rows_sync_each_chunk(sync, var_chunk, &v);
        rc = gp_rows_sync_sum(sync, buf, d, err);
        for (size_t k = 0; rc == GP_OK && k < d; k++) {
            if (pass == 0)
                mean[k] = buf[k] / n;
            else
                var[k] = buf[k] / n;
        }
        v.mean = mean;
    }
    free(Xw);
    free(buf);
    return rc;
}

void ssgp_rows_cache_targets(ssgp_impl *im, const gp_rff_rows *stream)
{
    memcpy(im->phi_y, gp_rff_rows_phi_y(stream), im->m * sizeof *im->phi_y);
    im->y_sq = gp_rff_rows_y_sq(stream);
    im->log_d = 0.0;
}
