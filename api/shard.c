/* One process's shard of a fit's rows (api.h, "fits sharded over
 * processes"): rank r of P reads the fixed range [r N / P, (r + 1) N / P) of
 * the fit's rows as a gp_rows (core/model/rows.h), for gpserve-fit (mpi/). */
#include <stdlib.h>
#include <string.h>

#include <stdio.h>

#include "api/dataset_rows.h"
#include "api/internal.h"
#include "core/model/rows.h"

struct gp_fit_shard {
    gp_rows rows;
    /* The request's own rows (X n_all x d column-major, y n_all), borrowed
     * from the fit job: a request file's, for tests and benchmarks. */
    const double *X, *y;
    size_t n_all;
    /* Or a data set's reader over the shard (NULL for a request's rows). */
    gp_dataset_rows *dataset;
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

/* Fixed boundaries: the same N and rank count give the same shards, so a
 * run is bit-identical to the last (core/model/rows.h). */
static void shard_range(size_t n, int rank, int ranks, size_t *first, size_t *end)
{
    *first = (size_t)((unsigned long long)n * (unsigned)rank / (unsigned)ranks);
    *end = (size_t)((unsigned long long)n * ((unsigned)rank + 1) / (unsigned)ranks);
}

/* Rank r's shard of the request's own X and y (a request file's: tests and
 * benchmarks), read chunk rows at a time. */
static int open_request_shard(const gp_fit_job *job, int rank, int ranks, size_t chunk,
                              gp_fit_shard *s, gp_error *err)
{
    const char *spec = NULL;
    const double *X = NULL, *y = NULL;
    size_t n = 0, d = 0, p = 1;
    int rc = gp_fit_job_request(job, &spec, &X, &y, &n, &d, &p);
    if (rc)
        return gp_error_set(err, GP_EINTERNAL, NULL, "the fit job has no request");
    if (X == NULL || y == NULL || n == 0)
        return gp_error_set(err, GP_EDATA, "X", "the fit has no rows to shard");
    if (p != 1)
        return gp_error_set(err, GP_EUNSUPPORTED, "y",
                            "a sharded fit has one output; y has %zu columns", p);
    s->X = X;
    s->y = y;
    s->n_all = n;
    size_t first, end;
    shard_range(n, rank, ranks, &first, &end);
    s->rows = (gp_rows){.n = end - first, .first = first, .n_total = n, .d = d,
                        .chunk = chunk ? chunk : GP_ROWS_DEFAULT_CHUNK,
                        .read = read_request_rows, .read_ctx = s};
    return GP_OK;
}

/* Rank r's shard of the data set the fit names, through its reader (which
 * holds a lease on the data set while the rank runs). */
static int open_dataset_shard(gp_api *api, const gp_fit_job *job, const gp_fit_data *fd,
                              int rank, int ranks, gp_fit_shard *s, gp_error *err)
{
    size_t first, end;
    shard_range(gp_fit_data_rows(fd), rank, ranks, &first, &end);
    char label[96];
    snprintf(label, sizeof label, "rank %d of %d of a sharded fit (gpserve-fit)", rank, ranks);
    (void)job;
    int rc = gp_fit_data_open(api, fd, first, end - first, label, &s->dataset, err);
    if (rc == GP_OK)
        s->rows = *gp_dataset_rows_get(s->dataset);
    return rc;
}

int gp_api_fit_shard_open(gp_api *api, const gp_fit_job *job, int rank, int ranks, size_t chunk,
                          gp_fit_shard **out, gp_error *err)
{
    *out = NULL;
    if (ranks < 1 || rank < 0 || rank >= ranks)
        return gp_error_set(err, GP_EINVAL, "distributed.ranks",
                            "rank %d of %d processes is not a shard", rank, ranks);
    gp_fit_shard *s = calloc(1, sizeof *s);
    if (s == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    const gp_fit_data *fd = gp_fit_job_data(job);
    int rc = fd ? open_dataset_shard(api, job, fd, rank, ranks, s, err)
                : open_request_shard(job, rank, ranks, chunk, s, err);
    if (rc) {
        gp_fit_shard_close(s);
        return rc;
    }
    *out = s;
    return GP_OK;
}

gp_rows *gp_fit_shard_rows(gp_fit_shard *shard)
{
    return &shard->rows;
}

void gp_fit_shard_close(gp_fit_shard *shard)
{
    if (shard)
        gp_dataset_rows_close(shard->dataset);
    free(shard);
}
