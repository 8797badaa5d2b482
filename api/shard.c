/* One process's shard of a fit's rows (api.h, "fits sharded over
 * processes"): rank r of P reads the fixed range [r N / P, (r + 1) N / P) of
 * the fit's rows as a gp_rows (core/model/rows.h), for gpserve-fit (mpi/). */
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "core/model/rows.h"

struct gp_fit_shard {
    gp_rows rows;
    /* The request's own rows (X n_all x d column-major, y n_all), borrowed
     * from the fit job: a request file's, for tests and benchmarks. */
    const double *X, *y;
    size_t n_all;
};

static int read_request_rows(void *ctx, size_t i, size_t count, double *X, double *y,
                             gp_error *err)
{
    const gp_fit_shard *s = ctx;
    if (i > s->rows.n || count > s->rows.n - i || count > s->rows.chunk)
        return gp_error_set(err, GP_EINTERNAL, "data", "rows %zu .. %zu are beyond the shard",
                            i, i + count);
    size_t at = s->rows.first + i;
    for (size_t j = 0; j < s->rows.d; j++)
        memcpy(X + j * count, s->X + j * s->n_all + at, count * sizeof *X);
    memcpy(y, s->y + at, count * sizeof *y);
    return GP_OK;
}

int gp_api_fit_shard_open(gp_api *api, const gp_fit_job *job, int rank, int ranks, size_t chunk,
                          gp_fit_shard **out, gp_error *err)
{
    (void)api;
    *out = NULL;
    if (ranks < 1 || rank < 0 || rank >= ranks)
        return gp_error_set(err, GP_EINVAL, "distributed.ranks",
                            "rank %d of %d processes is not a shard", rank, ranks);
    const char *spec = NULL;
    const double *X = NULL, *y = NULL;
    size_t n = 0, d = 0, p = 1;
    int rc = gp_fit_job_request(job, &spec, &X, &y, &n, &d, &p);
    if (rc == GP_OK && (X == NULL || y == NULL || n == 0))
        /* A data set's rows: read through the data set's reader (issue 38's
         * data sets in the store), which this build does not have yet. */
        rc = gp_error_set(err, GP_EUNSUPPORTED, "data.dataset",
                          "this gpserve-fit reads a request's own X and y only");
    else if (rc == GP_OK && p != 1)
        rc = gp_error_set(err, GP_EUNSUPPORTED, "y",
                          "a sharded fit has one output; y has %zu columns", p);
    else if (rc)
        rc = gp_error_set(err, GP_EINTERNAL, NULL, "the fit job has no request");
    if (rc)
        return rc;
    gp_fit_shard *s = calloc(1, sizeof *s);
    if (s == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    s->X = X;
    s->y = y;
    s->n_all = n;
    /* Fixed boundaries: the same N and rank count give the same shards, so
     * a run is bit-identical to the last (core/model/rows.h). */
    size_t first = (size_t)((unsigned long long)n * (unsigned)rank / (unsigned)ranks);
    size_t end = (size_t)((unsigned long long)n * ((unsigned)rank + 1) / (unsigned)ranks);
    s->rows = (gp_rows){.n = end - first, .first = first, .n_total = n, .d = d,
                        .chunk = chunk ? chunk : GP_ROWS_DEFAULT_CHUNK,
                        .read = read_request_rows, .read_ctx = s};
    *out = s;
    return GP_OK;
}

gp_rows *gp_fit_shard_rows(gp_fit_shard *shard)
{
    return &shard->rows;
}

void gp_fit_shard_close(gp_fit_shard *shard)
{
    free(shard);
}
