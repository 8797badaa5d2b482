/* Fits sharded over processes, the api's part (api.h, "fits sharded over
 * processes"): what a request's "distributed" field may say, and the shard
 * of rows one process of gpserve-fit reads. The processes, the sums over
 * them and the job's run are mpi/'s and server/'s (docs/design/scale-out.md,
 * "Fits beyond one machine"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "core/model/rows.h"

static const char *const distributed_keys[] = {"ranks", NULL};

/* The methods whose descriptor says they stream their rows, comma separated. */
static void streaming_methods(char *out, size_t len)
{
    out[0] = '\0';
    for (size_t i = 0, used = 0; gp_method_at(i) && used < len; i++)
        if (gp_method_at(i)->streams_rows)
            used += (size_t)snprintf(out + used, len - used, "%s%s", used ? ", " : "",
                                     gp_method_at(i)->name);
}

int gp_api_parse_distributed(gp_api *api, json_t *fit, json_t *v, const gp_method *m,
                             int *ranks, gp_error *err)
{
    *ranks = 0;
    if (!json_is_object(v))
        return gp_error_set(err, GP_EINVAL, "distributed",
                            "distributed must be an object {\"ranks\": N}");
    int rc = gp_json_known_keys(v, distributed_keys, "distributed", err);
    if (rc)
        return rc;
    json_t *r = json_object_get(v, "ranks");
    double n = json_is_number(r) ? json_number_value(r) : 0.0;
    const int max = api->cfg.max_ranks;
    if (r == NULL || !json_is_number(r) || n != (double)(long long)n || n < 1 || n > max)
        return gp_error_set(err, GP_EINVAL, "distributed.ranks",
                            "distributed.ranks must be an integer from 1 to %d (the processes "
                            "of gpserve-fit; --mpi-max-ranks)", max);
    json_t *async = json_object_get(fit, "async");
    if (async && !json_is_true(async))
        return gp_error_set(err, GP_EINVAL, "async",
                            "a distributed fit runs as a job: async must be true or absent");
    json_t *data = json_object_get(fit, "data");
    if (!json_is_object(data) || !json_is_string(json_object_get(data, "dataset")))
        return gp_error_set(err, GP_EINVAL, "data.dataset",
                            "a distributed fit reads its rows from a data set: give "
                            "data.dataset (PUT /v1/datasets/{name}), not X and y");
    if (!m->streams_rows) {
        char names[256];
        streaming_methods(names, sizeof names);
        return gp_error_set(err, GP_EUNSUPPORTED, "distributed",
                            "method '%s' needs its rows in memory and cannot be distributed; "
                            "%s stream them (GET /v1/methods: streams_rows)", m->name,
                            names[0] ? names : "no method");
    }
    *ranks = (int)n;
    return GP_OK;
}

/* ---- one process's shard of the rows ---- */

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
