/* The passes over streamed rows besides a method's own sums: see
 * core/model/rows_passes.h. */
#include "core/model/rows_passes.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/linalg/linalg.h"

/* ---- column moments ---- */

typedef struct moments_pass {
    size_t width;
    gp_rows_columns_fn columns;
    void *ctx;
    const double **cols;
    const double *mean; /* NULL in the first pass (sums), then width means */
    double *acc;        /* width: the sums, or the centred sums of squares */
} moments_pass;

static int moments_chunk(void *ctx, size_t i, size_t count, const double *X, const double *y,
                         gp_error *err)
{
    (void)i;
    (void)err;
    moments_pass *p = ctx;
    p->columns(p->ctx, count, X, y, p->cols);
    for (size_t j = 0; j < p->width; j++) {
        const double *c = p->cols[j];
        double s = 0.0;
        if (p->mean == NULL) {
            for (size_t r = 0; r < count; r++)
                s += c[r];
        } else {
            double m = p->mean[j];
            for (size_t r = 0; r < count; r++) {
                double t = c[r] - m;
                s += t * t;
            }
        }
        p->acc[j] += s;
    }
    return GP_OK;
}

int gp_rows_column_moments(gp_rows_sync *s, size_t width, gp_rows_columns_fn columns, void *ctx,
                           double *mean, double *var, gp_error *err)
{
    gp_error local;
    gp_error_clear(&local);
    /* the sums and the slots after them */
    double *acc = width <= SIZE_MAX - GP_ROWS_SYNC_SLOTS
                      ? gp_alloc_doubles(width + GP_ROWS_SYNC_SLOTS, &local)
                      : NULL;
    const double **cols = malloc((width ? width : 1) * sizeof *cols);
    int rc = acc && cols ? GP_OK
             : local.code ? local.code
                          : gp_error_set(&local, GP_ENOMEM, NULL, "out of memory");
    rc = gp_rows_sync_agree(s, rc, &local, err);
    double n = (double)s->rows->n_total;
    moments_pass p = {width, columns, ctx, cols, NULL, acc};
    for (int pass = 0; pass < 2 && rc == GP_OK; pass++) {
        memset(acc, 0, width * sizeof *acc);
        gp_rows_sync_each_chunk(s, moments_chunk, &p);
        rc = gp_rows_sync_sum(s, acc, width, err);
        double *out = pass == 0 ? mean : var;
        for (size_t j = 0; rc == GP_OK && j < width; j++)
            out[j] = n > 0 ? acc[j] / n : 0.0;
        p.mean = mean;
    }
    free(acc);
    free(cols);
    return rc;
}

/* ---- the standardising statistics ---- */

/* The chunk's input columns as read, then its targets. */
static void raw_columns(void *ctx, size_t count, const double *X, const double *y,
                        const double **cols)
{
    size_t d = *(const size_t *)ctx;
    for (size_t j = 0; j < d; j++)
        cols[j] = X + j * count;
    cols[d] = y;
}

int gp_rows_column_stats(gp_rows_sync *s, double *x_mean, double *x_scale, double *y_mean,
                         double *y_scale, gp_error *err)
{
    size_t d = s->rows->d, width = d + 1, both = 0;
    gp_error local;
    gp_error_clear(&local);
    int rc = gp_checked_size(2, width, &both, &local);
    double *mean = rc ? NULL : gp_alloc_doubles(both, &local);
    if (mean == NULL) /* the others learn it at the moments' first sum */
        return gp_rows_sync_agree(s, local.code ? local.code : GP_ENOMEM, &local, err);
    double *var = mean + width;
    rc = gp_rows_column_moments(s, width, raw_columns, &d, mean, var, err);
    for (size_t j = 0; rc == GP_OK && j < width; j++) {
        double sd = sqrt(var[j]);
        /* A constant column gets scale 1, as in gp_column_stats. */
        double scale = sd > 0.0 && isfinite(sd) ? sd : 1.0;
        if (j < d) {
            x_mean[j] = mean[j];
            x_scale[j] = scale;
        } else {
            *y_mean = mean[j];
            *y_scale = scale;
        }
    }
    free(mean);
    return rc;
}

/* ---- the targets' power ---- */

typedef struct power_pass {
    double mean, scale, ss;
} power_pass;

static int power_chunk(void *ctx, size_t i, size_t count, const double *X, const double *y,
                       gp_error *err)
{
    (void)i;
    (void)X;
    (void)err;
    power_pass *p = ctx;
    double s = 0.0;
    for (size_t r = 0; r < count; r++) {
        double t = (y[r] - p->mean) / p->scale;
        s += t * t;
    }
    p->ss += s;
    return GP_OK;
}

int gp_rows_target_power(gp_rows_sync *s, double y_mean, double y_scale, double *power,
                         gp_error *err)
{
    power_pass p = {y_mean, y_scale, 0.0};
    gp_rows_sync_each_chunk(s, power_chunk, &p);
    double buf[1 + GP_ROWS_SYNC_SLOTS] = {p.ss};
    int rc = gp_rows_sync_sum(s, buf, 1, err);
    size_t n = s->rows->n_total;
    if (rc == GP_OK)
        *power = n && buf[0] > 0.0 && isfinite(buf[0]) ? buf[0] / (double)n : 1.0;
    return rc;
}

/* ---- rows by global index ---- */

/* Copy the rows of idx[*next ..] that fall in the chunk [lo, lo + count)
 * (global indices) into X (k x d) and y. */
static void gather_chunk(const size_t *idx, size_t k, size_t *next, size_t lo, size_t count,
                         size_t d, const double *Xc, const double *yc, double *X, double *y)
{
    while (*next < k && idx[*next] < lo + count) {
        size_t r = idx[*next] - lo;
        for (size_t j = 0; j < d; j++)
            X[*next + j * k] = Xc[r + j * count];
        y[*next] = yc[r];
        (*next)++;
    }
}

/* This shard's rows of idx into X and y (left at zero elsewhere): only the
 * chunks that hold one of them are read. A failure stays pending in s. */
static void gather_local(gp_rows_sync *s, const size_t *idx, size_t k, double *X, double *y)
{
    const gp_rows *rows = s->rows;
    size_t next = 0, end = rows->first + rows->n;
    while (next < k && idx[next] < rows->first)
        next++;
    while (next < k && idx[next] < end) {
        size_t i = (idx[next] - rows->first) / rows->chunk * rows->chunk;
        size_t b = rows->n - i < rows->chunk ? rows->n - i : rows->chunk;
        if (gp_rows_sync_read(s, i, b))
            return;
        gather_chunk(idx, k, &next, rows->first + i, b, rows->d, s->X, s->y, X, y);
    }
}

int gp_rows_gather(gp_rows_sync *s, const size_t *idx, size_t k, double *X, double *y,
                   gp_error *err)
{
    size_t d = s->rows->d, len = 0;
    gp_error local;
    gp_error_clear(&local);
    int rc = gp_checked_size(k, d + 1, &len, &local);
    double *buf = NULL; /* X and y together, then the slots: one reduction */
    if (rc == GP_OK && len > SIZE_MAX - GP_ROWS_SYNC_SLOTS)
        rc = gp_error_set(&local, GP_ETOOBIG, NULL, "%zu rows to gather", k);
    if (rc == GP_OK && (buf = gp_alloc_doubles(len + GP_ROWS_SYNC_SLOTS, &local)) == NULL)
        rc = local.code;
    rc = gp_rows_sync_agree(s, rc, &local, err);
    if (rc == GP_OK) {
        memset(buf, 0, len * sizeof *buf);
        gather_local(s, idx, k, buf, buf + k * d);
        rc = gp_rows_sync_sum(s, buf, len, err);
    }
    if (rc == GP_OK) {
        memcpy(X, buf, k * d * sizeof *X);
        if (y)
            memcpy(y, buf + k * d, k * sizeof *y);
    }
    free(buf);
    return rc;
}
