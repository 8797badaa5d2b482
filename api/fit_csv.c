/* Fit requests with a CSV body (text/csv): the rows and their header's
 * names from the body, the other fields from the query parameters, then
 * checked as a JSON request's are (fit_parse.c). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/fit_job.h"

static json_t *query_scalar(const char *v)
{
    if (strcmp(v, "true") == 0)
        return json_true();
    if (strcmp(v, "false") == 0)
        return json_false();
    /* decimal only, as in CSV cells: "0x10" stays a string (and is refused) */
    double x;
    if (gp_decimal_parse(v, strlen(v), &x) == 0 && isfinite(x))
        return json_real(x);
    json_t *s = json_string(v);
    return s ? s : json_string("?");
}

/* 1 when query parameter k was given before (into obj, noise or q). */
static int given_twice(const char *k, json_t *obj, json_t *noise, const gp_csv_request *q)
{
    return json_object_get(obj, k) ||
           (strncmp(k, "noise_", 6) == 0 && json_object_get(noise, k + 6)) ||
           (strcmp(k, "target") == 0 && q->target) ||
           (strcmp(k, "targets") == 0 && q->targets) ||
           (strcmp(k, "noise_column") == 0 && q->noise_column);
}

/* One query parameter k = v: a field of the fit (into obj), of its noise
 * (noise_*, into noise) or a choice of columns (into q). */
static int query_field(const char *k, const char *v, json_t *obj, json_t *noise,
                       gp_csv_request *q, gp_error *err)
{
    if (given_twice(k, obj, noise, q))
        return gp_error_set(err, GP_EINVAL, k, "query parameter '%.40s' given twice", k);
    if (strcmp(k, "target") == 0) {
        q->target = v;
    } else if (strcmp(k, "targets") == 0) {
        q->targets = v;
    } else if (strcmp(k, "noise_column") == 0) {
        q->noise_column = v;
    } else if (strcmp(k, "name") == 0 || strcmp(k, "method") == 0 ||
               strcmp(k, "likelihood") == 0) {
        json_t *s = json_string(v);
        if (s == NULL)
            return gp_error_set(err, GP_EINVAL, k, "%s is not valid UTF-8", k);
        json_object_set_new(obj, k, s);
    } else if (strcmp(k, "kernel") == 0 || strcmp(k, "options") == 0 ||
               strcmp(k, "mean") == 0 || strcmp(k, "validation") == 0) {
        json_error_t je;
        /* validation may be true or false too */
        size_t any = strcmp(k, "validation") == 0 ? JSON_DECODE_ANY : 0;
        json_t *j = json_loads(v, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL | any, &je);
        if (j == NULL)
            return gp_error_set(err, GP_EINVAL, k, "query parameter %s is not valid JSON: %s", k,
                                je.text);
        json_object_set_new(obj, k, j);
    } else if (strcmp(k, "standardize") == 0 || strcmp(k, "seed") == 0 ||
               strcmp(k, "async") == 0 || strcmp(k, "budget_s") == 0) {
        json_object_set_new(obj, k, query_scalar(v));
    } else if (strcmp(k, "noise_variance") == 0 || strcmp(k, "noise_fixed") == 0) {
        json_object_set_new(noise, k + 6, query_scalar(v));
    } else {
        return gp_error_set(err, GP_EINVAL, k,
                            "unknown query parameter '%.40s' (a CSV fit takes name, method, "
                            "target, targets, kernel, likelihood, options, mean, noise_variance, "
                            "noise_fixed, noise_column, standardize, seed, async, validation, "
                            "budget_s)",
                            k);
    }
    return GP_OK;
}

/* The query's fields as a fit request's JSON (*out; its noise_* as "noise"),
 * and its choice of columns in q. */
static int csv_fields(const gp_request *req, json_t **out, gp_csv_request *q, gp_error *err)
{
    q->target = NULL;
    q->noise_column = NULL;
    q->targets = NULL;
    json_t *obj = json_object(), *noise = json_object();
    if (obj == NULL || noise == NULL) {
        json_decref(obj);
        json_decref(noise);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    int rc = GP_OK;
    for (size_t i = 0; i < req->n_query && rc == GP_OK; i++) {
        const char *k = req->query[i].key, *v = req->query[i].value ? req->query[i].value : "";
        if (k != NULL)
            rc = query_field(k, v, obj, noise, q, err);
    }
    if (rc == GP_OK && json_object_size(noise))
        json_object_set(obj, "noise", noise);
    json_decref(noise);
    if (rc) {
        json_decref(obj);
        return rc;
    }
    *out = obj;
    return GP_OK;
}

/* A CSV header's names as the fit's feature_names and target_names (kept in
 * its spec, so a stored job's run keeps them too); names that could not be a
 * signature (an empty one, one over GP_OUTPUT_NAME_MAX bytes or with a control
 * character) leave the model without one, as before names were kept: the CSV
 * itself is valid. */
static void keep_header_names(json_t *obj, const gp_csv_request *q, const gp_fit_job *job)
{
    gp_error ignored;
    if (json_object_get(obj, "feature_names") == NULL &&
        gp_api_check_names(q->feature_names, "feature_names", job->d, &ignored) == GP_OK)
        json_object_set(obj, "feature_names", q->feature_names);
    if (json_object_get(obj, "target_names") == NULL &&
        gp_api_check_names(q->target_names, "target_names", job->p ? job->p : 1, &ignored) ==
            GP_OK)
        json_object_set(obj, "target_names", q->target_names);
}

int gp_fit_parse_csv(gp_api *api, const gp_request *req, gp_fit_job *job, gp_error *err)
{
    json_t *obj = NULL;
    gp_csv_request q = {.max_rows = api->cfg.max_points, .max_inputs = api->cfg.max_input_dim};
    int rc = csv_fields(req, &obj, &q, err);
    /* name first, so that a CSV without ?name= says so before parsing the data */
    if (rc == GP_OK && json_object_get(obj, "name") == NULL)
        rc = gp_error_set(err, GP_EINVAL, "name", "name is missing (a CSV fit takes it as ?name=)");
    json_t *names = rc == GP_OK && q.targets ? json_array() : NULL;
    q.feature_names = json_array();
    q.target_names = json_array();
    if (rc == GP_OK && (q.feature_names == NULL || q.target_names == NULL))
        rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    if (rc == GP_OK)
        rc = gp_csv_parse_request(req->body, req->body_len, &q, &job->X, &job->y, &job->noise_pp,
                                  &job->n, &job->d, &job->p, names, err);
    /* the target columns' names are the outputs' (kept in the spec) */
    if (rc == GP_OK && names)
        json_object_set(obj, "outputs", names);
    /* the header's names are the model's signature; names the request
     * also gives in the query are checked against the data instead */
    if (rc == GP_OK)
        keep_header_names(obj, &q, job);
    json_decref(q.feature_names);
    json_decref(q.target_names);
    json_decref(names);
    if (rc == GP_OK && job->noise_pp) /* checked with the rest by gp_fit_parse_fields */
        job->n_noise_pp = job->n;
    if (rc == GP_OK)
        rc = gp_fit_parse_fields(api, obj, job, 1, err);
    json_decref(obj);
    return rc;
}
