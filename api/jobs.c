/* Async fit jobs: the server runs them; the api shapes their JSON and keeps
 * them in the store's jobs table, so that another daemon on the same database
 * can report them. Texts in the table: progress {"iteration", "max_iterations",
 * "objective", "elapsed_seconds"}, error {"code", "message", "field"?}, result
 * (the fit response body once succeeded). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

static const char *const job_statuses[] = {"queued", "running", "succeeded", "failed",
                                           "cancelled"};

void gp_job_info_free(gp_job_info *job)
{
    if (job == NULL)
        return;
    free(job->model_json);
    job->model_json = NULL;
}

static json_t *progress_json(const gp_job_info *job)
{
    json_t *p = json_object();
    json_object_set_new(p, "iteration", json_integer(job->iteration));
    json_object_set_new(p, "max_iterations", json_integer(job->max_iterations));
    json_object_set_new(p, "objective",
                        job->has_objective ? gp_json_real(job->objective) : json_null());
    json_object_set_new(p, "elapsed_seconds", gp_json_real(job->elapsed_seconds));
    return p;
}

static int is_failed(const gp_job_info *job)
{
    return job->status && strcmp(job->status, "failed") == 0;
}

static int is_succeeded(const gp_job_info *job)
{
    return job->status && strcmp(job->status, "succeeded") == 0;
}

void gp_api_job_response(const gp_job_info *job, gp_response *out)
{
    json_t *o = json_object();
    json_object_set_new(o, "id", json_string(job->id));
    json_object_set_new(o, "name", json_string(job->model_name));
    json_object_set_new(o, "status", json_string(job->status ? job->status : "queued"));
    json_object_set_new(o, "progress", progress_json(job));
    if (is_succeeded(job) && job->model_json) {
        json_error_t je;
        json_t *m = json_loads(job->model_json, 0, &je);
        if (m)
            json_object_set_new(o, "model", m);
    }
    if (is_failed(job)) {
        json_t *e = gp_api_error_json(&job->error);
        if (e)
            json_object_set_new(o, "error", e);
    }
    json_object_set_new(o, "created_at", json_string(job->created_at));
    json_object_set_new(o, "updated_at", json_string(job->updated_at));
    gp_json_respond(o, 200, out);
}

int gp_api_job_save(gp_api *api, const gp_job_info *job, gp_error *err)
{
    gp_job_row row;
    memset(&row, 0, sizeof row);
    snprintf(row.id, sizeof row.id, "%s", job->id);
    snprintf(row.model_name, sizeof row.model_name, "%s", job->model_name);
    snprintf(row.status, sizeof row.status, "%s", job->status ? job->status : "queued");
    snprintf(row.created_at, sizeof row.created_at, "%s", job->created_at);
    snprintf(row.updated_at, sizeof row.updated_at, "%s", job->updated_at);
    json_t *p = progress_json(job);
    row.progress = json_dumps(p, GP_JSON_FLAGS);
    json_decref(p);
    if (is_failed(job)) {
        json_t *e = gp_api_error_json(&job->error);
        row.error = e ? json_dumps(e, GP_JSON_FLAGS) : NULL;
        json_decref(e);
    }
    if (is_succeeded(job))
        row.result = job->model_json;
    int rc = row.progress ? gp_store_job_put(api->store, &row, err)
                          : gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    row.result = NULL; /* not ours */
    free(row.progress);
    free(row.error);
    return rc;
}

static double number_or(json_t *o, const char *key, double dflt)
{
    json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

int gp_api_job_load(gp_api *api, const char *id, gp_job_info *job, gp_error *err)
{
    memset(job, 0, sizeof *job);
    gp_job_row row;
    memset(&row, 0, sizeof row);
    int rc = gp_store_job_get(api->store, id, &row, err);
    if (rc) {
        gp_job_row_free(&row);
        return rc;
    }
    snprintf(job->id, sizeof job->id, "%s", row.id);
    snprintf(job->model_name, sizeof job->model_name, "%s", row.model_name);
    job->status = "failed";
    for (size_t i = 0; i < sizeof job_statuses / sizeof job_statuses[0]; i++)
        if (strcmp(row.status, job_statuses[i]) == 0)
            job->status = job_statuses[i];
    snprintf(job->created_at, sizeof job->created_at, "%s", row.created_at);
    snprintf(job->updated_at, sizeof job->updated_at, "%s", row.updated_at);
    json_error_t je;
    json_t *p = row.progress ? json_loads(row.progress, JSON_DECODE_INT_AS_REAL, &je) : NULL;
    if (p) {
        double it = number_or(p, "iteration", 0), mx = number_or(p, "max_iterations", 0);
        job->iteration = isfinite(it) && fabs(it) < 2e9 ? (int)it : 0;
        job->max_iterations = isfinite(mx) && fabs(mx) < 2e9 ? (int)mx : 0;
        json_t *obj = json_object_get(p, "objective");
        job->has_objective = json_is_number(obj);
        job->objective = job->has_objective ? json_number_value(obj) : 0.0;
        job->elapsed_seconds = number_or(p, "elapsed_seconds", 0.0);
        json_decref(p);
    }
    gp_error_clear(&job->error);
    json_t *e = row.error ? json_loads(row.error, 0, &je) : NULL;
    if (e) {
        job->error.code = gp_api_code_from_name(json_string_value(json_object_get(e, "code")));
        const char *msg = json_string_value(json_object_get(e, "message"));
        const char *field = json_string_value(json_object_get(e, "field"));
        snprintf(job->error.message, sizeof job->error.message, "%s", msg ? msg : "");
        snprintf(job->error.field, sizeof job->error.field, "%s", field ? field : "");
        json_decref(e);
    } else if (job->status == job_statuses[3]) {
        gp_error_set(&job->error, GP_EINTERNAL, NULL, "the job failed");
    }
    if (row.result) {
        job->model_json = row.result; /* take it */
        row.result = NULL;
    }
    gp_job_row_free(&row);
    return GP_OK;
}
