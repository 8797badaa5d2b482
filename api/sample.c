/* Sample: POST /v1/models/{name}/sample, joint draws of the latent function
 * (and of observations) at the points asked; a point call of predict.c that
 * is answered alone, never batched. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/cache.h"

static const char *const sample_keys[] = {"X",           "version",      "n_samples", "seed",
                                          "include_noise", "observations", NULL};

/* n draws of m points: per draw a list of m numbers, or for p outputs m rows
 * of p (output j of draw s at point i: S[(j n + s) m + i]). */
static void write_draws(gp_buf *b, const char *key, const double *S, size_t m, size_t n,
                        size_t p)
{
    gp_buf_printf(b, ",\"%s\":[", key);
    for (size_t s = 0; s < n; s++) {
        if (s)
            gp_buf_put(b, ",", 1);
        if (p == 1) {
            gp_buf_json_array(b, S + s * m, m, 1);
            continue;
        }
        gp_buf_put(b, "[", 1);
        for (size_t i = 0; i < m; i++) {
            if (i)
                gp_buf_put(b, ",", 1);
            gp_buf_json_array(b, S + s * m + i, p, n * m);
        }
        gp_buf_put(b, "]", 1);
    }
    gp_buf_put(b, "]", 1);
}

void gp_sample_answer(gp_api *api, const char *name, const gp_request *req, gp_response *out)
{
    gp_error errs, *err = &errs;
    gp_error_clear(err);
    json_t *obj = NULL, *e;
    double *X = NULL, *S = NULL;
    gp_cache_entry *entry = NULL;
    const gp_model *model = NULL;
    size_t m = 0, d = 0;
    int version = 0, include_noise = 0, observations = 0;
    uint64_t n_samples = 10, seed = 0;
    int rc = gp_api_parse_point_request(req, sample_keys, &obj, &version, &include_noise, err);
    if (rc == GP_OK && (e = json_object_get(obj, "observations")))
        rc = gp_json_get_bool(e, "observations", &observations, err);
    if (rc == GP_OK && observations && include_noise)
        rc = gp_error_set(err, GP_EINVAL, "observations",
                          "observations draws y beside the latent samples; it does not combine "
                          "with include_noise (which makes the samples themselves draws of y)");
    if (rc == GP_OK && (e = json_object_get(obj, "seed")))
        rc = gp_json_get_uint(e, "seed", 9007199254740992.0, &seed, err);
    if (rc == GP_OK && (e = json_object_get(obj, "n_samples"))) {
        rc = gp_json_get_uint(e, "n_samples", 9007199254740992.0, &n_samples, err);
        if (rc == GP_OK && n_samples == 0)
            rc = gp_error_set(err, GP_EINVAL, "n_samples", "n_samples must be at least 1");
    }
    if (rc == GP_OK && n_samples > api->cfg.max_samples)
        rc = gp_error_set(err, GP_ETOOBIG, "n_samples",
                          "n_samples = %llu is above the limit max_samples = %zu",
                          (unsigned long long)n_samples, api->cfg.max_samples);
    json_t *Xj = obj ? json_object_get(obj, "X") : NULL;
    if (rc == GP_OK && Xj == NULL)
        rc = gp_error_set(err, GP_EINVAL, "X", "X (the points to sample at) is missing");
    if (rc == GP_OK)
        rc = gp_api_parse_x_early(api, Xj, &X, &m, &d, err);
    if (rc == GP_OK)
        rc = gp_cache_acquire(api, name, version, &entry, &model, err);
    if (rc == GP_OK)
        rc = gp_api_parse_x_late(api, model, name, Xj, &X, &m, &d, err);
    if (rc == GP_OK && m > api->cfg.max_covariance_points)
        rc = gp_error_set(err, GP_ETOOBIG, "X",
                          "joint samples at %zu points are above the limit "
                          "max_covariance_points = %zu",
                          m, api->cfg.max_covariance_points);
    size_t p = rc == GP_OK ? model->n_outputs : 1;
    if (rc == GP_OK && (double)m * (double)n_samples * (double)p >
                           (double)api->cfg.max_sample_values)
        rc = gp_error_set(err, GP_ETOOBIG, "n_samples",
                          "%llu samples x %zu points x %zu outputs is above the limit "
                          "max_sample_values = %zu",
                          (unsigned long long)n_samples, m, p, api->cfg.max_sample_values);
    size_t count = m * (size_t)n_samples * p; /* below max_sample_values, checked above */
    if (rc == GP_OK && !(S = malloc((observations ? 2 : 1) * count * sizeof *S)))
        rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory for the samples");
    gp_sample_request sr = {X, m, d, (size_t)n_samples, seed, include_noise};
    if (rc == GP_OK)
        rc = gp_model_sample(model, &sr, S, err);
    if (rc == GP_OK && observations)
        rc = gp_model_sample_observations(model, &sr, S, S + count, err);
    if (rc == GP_OK) {
        gp_buf b;
        gp_buf_init(&b);
        gp_api_write_head(&b, name, entry->version);
        write_draws(&b, "samples", S, m, (size_t)n_samples, p);
        if (observations)
            write_draws(&b, "observations", S + count, m, (size_t)n_samples, p);
        gp_buf_put(&b, "}", 1);
        gp_buf_respond(&b, 200, out);
    }
    gp_cache_release(api, entry);
    free(S);
    free(X);
    json_decref(obj);
    if (rc)
        gp_api_error(err, out);
}
