/* Fits sharded over processes, the api's part (api.h, "fits sharded over
 * processes"): what a request's "distributed" field may say (fit_parse.c asks it;
 * the shard of rows a process reads is shard.c). The processes, the sums
 * over them and the job's run are mpi/'s and server/'s
 * (docs/design/scale-out.md, "Fits beyond one machine"). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

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
