/* Fit requests, the entry points: a request (JSON body, or CSV body with the
 * other fields as query parameters) or a stored job's spec into a fit job
 * (api/fit_job.h). The job is run by fit_run.c and saved by fit_save.c. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/fit_job.h"

int gp_api_parse_fit(gp_api *api, const gp_request *req, gp_fit_job **out, gp_error *err)
{
    *out = NULL;
    int media = gp_media_type(req->content_type);
    if (media == 0)
        return gp_error_set(err, GP_EMEDIATYPE, NULL,
                            "Content-Type must be application/json or text/csv, not '%.60s'",
                            req->content_type);
    gp_fit_job *job = calloc(1, sizeof *job);
    if (job == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    if (req->key_name && gp_api_valid_name(req->key_name))
        snprintf(job->created_by, sizeof job->created_by, "%s", req->key_name);
    /* The key first: its scope gets the model's name once it is parsed. */
    gp_api_origin_of(req, &job->origin);
    int rc = gp_api_idem_parse(req, "fit", "", &job->idem, err);
    if (rc) {
        gp_fit_job_free(job);
        return rc;
    }
    if (media == 1) {
        json_t *obj = NULL;
        rc = gp_json_parse_body(req, &obj, err);
        if (rc == GP_OK)
            rc = gp_fit_parse_fields(api, obj, job, 0, err);
        json_decref(obj);
    } else {
        rc = gp_fit_parse_csv(api, req, job, err);
    }
    if (rc) {
        gp_fit_job_free(job);
        return rc;
    }
    if (job->idem.present)
        snprintf(job->idem.scope, sizeof job->idem.scope, "fit:%s", job->name);
    *out = job;
    return GP_OK;
}

/* A stored spec's "created_by" and "dataset_id" (written by gp_fit_parse_fields,
 * never a caller's fields: a request naming one is refused as an unknown
 * field) into the job. */
static void take_created_by(json_t *obj, gp_fit_job *job)
{
    const char *by = json_string_value(json_object_get(obj, "created_by"));
    if (by && gp_api_valid_name(by))
        snprintf(job->created_by, sizeof job->created_by, "%s", by);
    json_t *ds = json_object_get(obj, "dataset_id"); /* written by gp_fit_parse_fields too */
    if (json_is_number(ds) && json_number_value(ds) >= 1)
        job->dataset_id = (int64_t)json_number_value(ds);
    if (json_is_object(obj)) {
        json_object_del(obj, "created_by");
        json_object_del(obj, "dataset_id");
    }
}

int gp_fit_job_from_request(gp_api *api, const char *spec, double *X, double *y, size_t n,
                            size_t d, size_t p, gp_fit_job **out, gp_error *err)
{
    *out = NULL;
    gp_fit_job *job = calloc(1, sizeof *job);
    if (job == NULL) {
        free(X);
        free(y);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    job->X = X;
    job->y = y;
    job->n = n;
    job->d = d;
    job->p = p;
    json_error_t je;
    json_t *obj = spec ? json_loads(spec, JSON_DECODE_INT_AS_REAL, &je) : NULL;
    take_created_by(obj, job);
    int rc = json_is_object(obj) ? gp_fit_parse_fields(api, obj, job, 1, err)
                                 : gp_error_set(err, GP_EDATA, NULL,
                                                "the stored request is not a JSON object");
    json_decref(obj);
    if (rc) {
        gp_fit_job_free(job);
        return rc;
    }
    *out = job;
    return GP_OK;
}
