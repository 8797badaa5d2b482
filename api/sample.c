/* Sample: POST /v1/models/{name}/sample, joint draws of the latent function
 * (and of observations) at the points asked; a point call of predict.c:
 * parsed on the request thread, answered with the other sample calls of its
 * model and version (gp_model_sample_batch), each exactly as alone. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/cache.h"

static const char *const sample_keys[] = {"X", "rows", "version",      "n_samples", "seed",
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

int gp_sample_parse(gp_api *api, const char *name, const gp_request *req, gp_sample_call *c,
                    int *version, gp_error *err)
{
    gp_sample_args *a = &c->a;
    json_t *e, *obj = NULL;
    a->n_samples = 10;
    int rc = gp_api_parse_point_request(api, name, req, sample_keys, &obj, version, c->alias,
                                        &a->include_noise, err);
    c->obj = obj;
    if (rc == GP_OK && (e = json_object_get(obj, "observations")))
        rc = gp_json_get_bool(e, "observations", &a->observations, err);
    if (rc == GP_OK && a->observations && a->include_noise)
        rc = gp_error_set(err, GP_EINVAL, "observations",
                          "observations draws y beside the latent samples; it does not combine "
                          "with include_noise (which makes the samples themselves draws of y)");
    if (rc == GP_OK && (e = json_object_get(obj, "seed")))
        rc = gp_json_get_uint(e, "seed", GP_JSON_UINT_MAX, &a->seed, err);
    if (rc == GP_OK && (e = json_object_get(obj, "n_samples"))) {
        rc = gp_json_get_uint(e, "n_samples", GP_JSON_UINT_MAX, &a->n_samples, err);
        if (rc == GP_OK && a->n_samples == 0)
            rc = gp_error_set(err, GP_EINVAL, "n_samples", "n_samples must be at least 1");
    }
    if (rc == GP_OK && a->n_samples > api->cfg.max_samples)
        rc = gp_error_set(err, GP_ETOOBIG, "n_samples",
                          "n_samples = %llu is above the limit max_samples = %zu",
                          (unsigned long long)a->n_samples, api->cfg.max_samples);
    if (rc == GP_OK)
        rc = gp_api_x_or_rows(obj, "the points to sample at", &c->Xj, &c->rows, err);
    if (rc == GP_OK && c->Xj)
        rc = gp_api_parse_x_early(api, c->Xj, &c->X, &c->m, &c->d, err);
    return rc;
}

/* The checks of call c against the model and its buffer: c->S, count. */
static int sample_prepare(gp_api *api, const gp_model *model, const json_t *features,
                          const char *name, gp_sample_call *c, size_t *count, gp_error *err)
{
    gp_x_names nm = {c->rows, features, NULL};
    int rc = gp_api_parse_x_late(api, model, name, c->Xj, &nm, &c->X, &c->m, &c->d, err);
    size_t m = c->m, p = model->n_outputs;
    if (rc == GP_OK && m > api->cfg.max_covariance_points)
        rc = gp_error_set(err, GP_ETOOBIG, "X",
                          "joint samples at %zu points are above the limit "
                          "max_covariance_points = %zu",
                          m, api->cfg.max_covariance_points);
    if (rc == GP_OK && (double)m * (double)c->a.n_samples * (double)p >
                           (double)api->cfg.max_sample_values)
        rc = gp_error_set(err, GP_ETOOBIG, "n_samples",
                          "%llu samples x %zu points x %zu outputs is above the limit "
                          "max_sample_values = %zu",
                          (unsigned long long)c->a.n_samples, m, p, api->cfg.max_sample_values);
    *count = m * (size_t)c->a.n_samples * p; /* below max_sample_values, checked above */
    if (rc == GP_OK && !(c->S = malloc((c->a.observations ? 2 : 1) * *count * sizeof *c->S)))
        rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory for the samples");
    return rc;
}

static void sample_respond(const gp_model *model, const char *name, int version,
                           const char *outputs, const gp_sample_call *c, size_t count,
                           gp_response *out)
{
    size_t m = c->m, n = (size_t)c->a.n_samples, p = model->n_outputs;
    gp_buf b;
    gp_buf_init(&b);
    gp_api_write_head(&b, name, version);
    gp_api_write_alias(&b, c->alias);
    if (outputs) /* the names of several outputs */
        gp_buf_printf(&b, ",\"outputs\":%s", outputs);
    write_draws(&b, "samples", c->S, m, n, p);
    /* draws of y are one column a draw: a softmax model's are labels, one
     * per point (its p columns are the classes' latents); other models with
     * several outputs draw y with include_noise, not observations */
    if (c->a.observations)
        write_draws(&b, "observations", c->S + count, m, n, 1);
    gp_buf_put(&b, "}", 1);
    gp_buf_respond(&b, 200, out);
}

/* The calls that pass their checks, sampled together. */
static void sample_calls(const gp_model *model, gp_sample_call **calls, const size_t *idx,
                         size_t k, int *rcs, gp_error *errs)
{
    gp_sample_request *reqs = calloc(k ? k : 1, sizeof *reqs);
    double **outs = calloc(k ? k : 1, sizeof *outs);
    int *brc = calloc(k ? k : 1, sizeof *brc);
    gp_error *berr = calloc(k ? k : 1, sizeof *berr);
    if (!reqs || !outs || !brc || !berr) {
        for (size_t j = 0; j < k; j++)
            rcs[idx[j]] = gp_error_set(&errs[idx[j]], GP_ENOMEM, NULL, "out of memory");
    } else {
        for (size_t j = 0; j < k; j++) {
            const gp_sample_call *c = calls[idx[j]];
            reqs[j] = (gp_sample_request){c->X, c->m, c->d, (size_t)c->a.n_samples, c->a.seed,
                                          c->a.include_noise};
            outs[j] = c->S;
        }
        if (k)
            gp_model_sample_batch(model, reqs, outs, brc, berr, k);
        for (size_t j = 0; j < k; j++) {
            rcs[idx[j]] = brc[j];
            if (brc[j])
                errs[idx[j]] = berr[j];
        }
    }
    free(reqs);
    free(outs);
    free(brc);
    free(berr);
}

void gp_sample_run(gp_api *api, const char *name, int version, gp_sample_call **calls,
                   size_t n, gp_response *res)
{
    gp_cache_entry *entry = NULL;
    const gp_model *model = NULL;
    gp_error err;
    gp_error_clear(&err);
    int *rcs = calloc(n, sizeof *rcs);
    gp_error *errs = calloc(n, sizeof *errs);
    size_t *counts = calloc(n, sizeof *counts), *idx = calloc(n, sizeof *idx);
    int rc = rcs && errs && counts && idx ? GP_OK
                                          : gp_error_set(&err, GP_ENOMEM, NULL, "out of memory");
    if (rc == GP_OK)
        rc = gp_cache_acquire(api, name, version, &entry, &model, &err);
    if (rc) {
        for (size_t i = 0; i < n; i++)
            gp_api_error(&err, &res[i]);
    } else {
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            gp_error_clear(&errs[i]);
            rcs[i] = sample_prepare(api, model, entry->features, name, calls[i], &counts[i], &errs[i]);
            if (rcs[i] == GP_OK)
                idx[k++] = i;
        }
        sample_calls(model, calls, idx, k, rcs, errs);
        for (size_t i = 0; i < n; i++) {
            gp_sample_call *c = calls[i];
            gp_sample_request sr = {c->X, c->m, c->d, (size_t)c->a.n_samples, c->a.seed,
                                    c->a.include_noise};
            if (rcs[i] == GP_OK && c->a.observations)
                rcs[i] = gp_model_sample_observations(model, &sr, c->S, c->S + counts[i],
                                                      &errs[i]);
            if (rcs[i] == GP_OK)
                sample_respond(model, name, entry->version, entry->outputs, c, counts[i],
                               &res[i]);
            else
                gp_api_error(&errs[i], &res[i]);
        }
    }
    gp_cache_release(api, entry);
    free(rcs);
    free(errs);
    free(counts);
    free(idx);
}

void gp_sample_call_free(gp_sample_call *c)
{
    free(c->S);
    free(c->X);
    json_decref(c->obj);
    memset(c, 0, sizeof *c);
}
