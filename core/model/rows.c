/* Rows read in chunks and the sums over them: see core/model/rows.h. */
#include "core/model/rows.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/linalg/linalg.h"

int gp_rows_check(const gp_rows *rows, gp_error *err)
{
    if (rows == NULL || rows->read == NULL || rows->d == 0 || rows->chunk == 0 ||
        rows->n > rows->n_total || rows->first > rows->n_total - rows->n)
        return gp_error_set(err, GP_EINVAL, "data",
                            "the rows of the fit are not a shard of the data set");
    return GP_OK;
}

int gp_rows_sum(const gp_rows *rows, double *buf, size_t len, gp_error *err)
{
    if (rows->allreduce == NULL || len == 0)
        return GP_OK;
    return rows->allreduce(rows->reduce_ctx, buf, len, err);
}

int gp_rows_each_chunk(const gp_rows *rows, gp_rows_chunk_fn fn, void *ctx, gp_error *err)
{
    size_t count = 0;
    int rc = gp_checked_size(rows->chunk, rows->d + 1, &count, err);
    if (rc)
        return rc;
    double *X = gp_alloc_doubles(count, err);
    if (X == NULL)
        return GP_ENOMEM;
    double *y = X + rows->chunk * rows->d;
    for (size_t i = 0; i < rows->n && rc == GP_OK; i += rows->chunk) {
        size_t b = rows->n - i < rows->chunk ? rows->n - i : rows->chunk;
        rc = rows->read(rows->read_ctx, i, b, X, y, err);
        if (rc == GP_OK)
            rc = fn(ctx, i, b, X, y, err);
    }
    free(X);
    return rc;
}

/* ---- the standardising statistics ---- */

typedef struct stats_pass {
    size_t d;
    const double *mean; /* NULL in the first pass (sums), then d + 1 means */
    double *acc;        /* d + 1: sum of x (or of (x - mean)^2), then of y */
} stats_pass;

static int stats_chunk(void *ctx, size_t i, size_t count, const double *X, const double *y,
                       gp_error *err)
{
    (void)i;
    (void)err;
    stats_pass *p = ctx;
    for (size_t j = 0; j <= p->d; j++) {
        const double *c = j < p->d ? X + j * count : y;
        double s = 0.0;
        if (p->mean == NULL) {
            for (size_t r = 0; r < count; r++)
                s += c[r];
        } else {
            double m = p->mean[j];
            for (size_t r = 0; r < count; r++)
                s += (c[r] - m) * (c[r] - m);
        }
        p->acc[j] += s;
    }
    return GP_OK;
}

int gp_rows_column_stats(const gp_rows *rows, double *x_mean, double *x_scale, double *y_mean,
                         double *y_scale, gp_error *err)
{
    int rc = gp_rows_check(rows, err);
    if (rc)
        return rc;
    size_t d = rows->d;
    double *acc = calloc(2 * (d + 1), sizeof *acc);
    if (acc == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    double *mean = acc + d + 1, nt = (double)rows->n_total;
    stats_pass pass = {d, NULL, acc};
    rc = gp_rows_each_chunk(rows, stats_chunk, &pass, err);
    if (rc == GP_OK)
        rc = gp_rows_sum(rows, acc, d + 1, err);
    if (rc == GP_OK) {
        for (size_t j = 0; j <= d; j++) {
            mean[j] = nt > 0 ? acc[j] / nt : 0.0;
            acc[j] = 0.0;
        }
        pass.mean = mean;
        rc = gp_rows_each_chunk(rows, stats_chunk, &pass, err);
    }
    if (rc == GP_OK)
        rc = gp_rows_sum(rows, acc, d + 1, err);
    if (rc == GP_OK) {
        for (size_t j = 0; j <= d; j++) {
            double sd = nt > 0 ? sqrt(acc[j] / nt) : 0.0;
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
    }
    free(acc);
    return rc;
}

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

int gp_rows_target_power(const gp_rows *rows, double y_mean, double y_scale, double *power,
                         gp_error *err)
{
    power_pass p = {y_mean, y_scale, 0.0};
    int rc = gp_rows_each_chunk(rows, power_chunk, &p, err);
    if (rc == GP_OK)
        rc = gp_rows_sum(rows, &p.ss, 1, err);
    if (rc == GP_OK)
        *power = rows->n_total && p.ss > 0.0 && isfinite(p.ss) ? p.ss / (double)rows->n_total
                                                              : 1.0;
    return rc;
}

/* ---- subsamples by global index ---- */

/* Is v among the sorted first `count` entries of s? */
static int sorted_has(const size_t *s, size_t count, size_t v)
{
    size_t lo = 0, hi = count;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s[mid] == v)
            return 1;
        if (s[mid] < v)
            lo = mid + 1;
        else
            hi = mid;
    }
    return 0;
}

/* Insert v into the sorted array s of count entries (room for one more). */
static void sorted_insert(size_t *s, size_t count, size_t v)
{
    size_t at = count;
    while (at > 0 && s[at - 1] > v) {
        s[at] = s[at - 1];
        at--;
    }
    s[at] = v;
}

int gp_rows_sample_indices(size_t n_total, size_t k, uint64_t seed, size_t *out, gp_error *err)
{
    (void)err;
    if (k >= n_total) {
        for (size_t i = 0; i < n_total; i++)
            out[i] = i;
        return GP_OK;
    }
    /* Floyd: for j = n - k .. n - 1 take t uniform in [0, j]; t if new, else
     * j. Each k-subset is equally likely. The insertion keeps out sorted for
     * the membership test (O(k^2) moves at worst; k is a few thousand). */
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    size_t count = 0;
    for (size_t j = n_total - k; j < n_total; j++) {
        size_t t = (size_t)gp_rng_below(&rng, (uint64_t)j + 1);
        size_t v = sorted_has(out, count, t) ? j : t;
        sorted_insert(out, count, v);
        count++;
    }
    return GP_OK;
}

/* Copy the rows of idx[*next ..] that fall in the chunk [lo, lo + count)
 * (global indices) into X (k x d) and y. */
static void gather_chunk(const size_t *idx, size_t k, size_t *next, size_t lo, size_t count,
                         size_t d, const double *Xc, const double *yc, double *X, double *y)
{
    while (*next < k && idx[*next] < lo + count) {
        size_t r = idx[*next] - lo;
        for (size_t j = 0; j < d; j++)
            X[*next + j * k] = Xc[r + j * count];
        if (y)
            y[*next] = yc[r];
        (*next)++;
    }
}

/* This shard's rows of idx into X and y (zeros elsewhere): only the chunks
 * that hold one of them are read. */
static int gather_local(const gp_rows *rows, const size_t *idx, size_t k, double *X, double *y,
                        gp_error *err)
{
    size_t next = 0, d = rows->d, count = 0;
    while (next < k && idx[next] < rows->first)
        next++;
    int rc = gp_checked_size(rows->chunk, d + 1, &count, err);
    double *Xc = rc ? NULL : gp_alloc_doubles(count, err);
    if (Xc == NULL)
        return rc ? rc : GP_ENOMEM;
    double *yc = Xc + rows->chunk * d;
    size_t end = rows->first + rows->n;
    while (rc == GP_OK && next < k && idx[next] < end) {
        size_t i = (idx[next] - rows->first) / rows->chunk * rows->chunk;
        size_t b = rows->n - i < rows->chunk ? rows->n - i : rows->chunk;
        rc = rows->read(rows->read_ctx, i, b, Xc, yc, err);
        if (rc == GP_OK)
            gather_chunk(idx, k, &next, rows->first + i, b, d, Xc, yc, X, y);
    }
    free(Xc);
    return rc;
}

int gp_rows_gather(const gp_rows *rows, const size_t *idx, size_t k, double *X, double *y,
                   gp_error *err)
{
    int rc = gp_rows_check(rows, err);
    size_t xd = 0;
    if (rc == GP_OK)
        rc = gp_checked_size(k, rows->d, &xd, err);
    if (rc)
        return rc;
    memset(X, 0, xd * sizeof *X);
    if (y)
        memset(y, 0, k * sizeof *y);
    rc = gather_local(rows, idx, k, X, y, err);
    if (rc)
        return rc;
    if (rows->allreduce == NULL)
        return GP_OK;
    /* One reduction: X and y together. */
    double *buf = gp_alloc_doubles(xd + k, err);
    if (buf == NULL)
        return GP_ENOMEM;
    memcpy(buf, X, xd * sizeof *buf);
    if (y)
        memcpy(buf + xd, y, k * sizeof *buf);
    else
        memset(buf + xd, 0, k * sizeof *buf);
    rc = gp_rows_sum(rows, buf, xd + k, err);
    if (rc == GP_OK) {
        memcpy(X, buf, xd * sizeof *buf);
        if (y)
            memcpy(y, buf + xd, k * sizeof *buf);
    }
    free(buf);
    return rc;
}
