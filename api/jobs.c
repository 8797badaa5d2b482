/* Async fit jobs: the server runs them; the api shapes their JSON and keeps
 * them in the store's jobs table, so that another daemon on the same database
 * can report them. Texts in the table: progress {"iteration", "max_iterations",
 * "objective", "elapsed_seconds"}, error {"code", "message", "field"?}, result
 * (the fit response body once succeeded). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
    if (job->leaderboard[0]) { /* method "auto": the candidates done so far */
        json_error_t je;
        json_t *lb = json_loads(job->leaderboard, 0, &je);
        if (json_is_array(lb))
            json_object_set_new(p, "leaderboard", lb);
        else
            json_decref(lb);
    }
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
    json_object_set_new(o, "attempts", json_integer(job->attempts));
    if (is_succeeded(job) && job->model_json) {
        json_error_t je;
        json_t *m = json_loads(job->model_json, 0, &je);
        if (m)
            json_object_set_new(o, "model", m);
    }
    /* A job queued or running again after its model found the disk full
     * carries that run's error too: why it waits, and until when. */
    if (is_failed(job) || (job->error.code != GP_OK && !is_succeeded(job))) {
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

static void info_from_row(gp_job_row *row, gp_job_info *job)
{
    snprintf(job->id, sizeof job->id, "%s", row->id);
    snprintf(job->model_name, sizeof job->model_name, "%s", row->model_name);
    job->status = "failed";
    for (size_t i = 0; i < sizeof job_statuses / sizeof job_statuses[0]; i++)
        if (strcmp(row->status, job_statuses[i]) == 0)
            job->status = job_statuses[i];
    snprintf(job->created_at, sizeof job->created_at, "%s", row->created_at);
    snprintf(job->updated_at, sizeof job->updated_at, "%s", row->updated_at);
    job->attempts = row->attempts;
    json_error_t je;
    json_t *p = row->progress ? json_loads(row->progress, JSON_DECODE_INT_AS_REAL, &je) : NULL;
    if (p) {
        double it = number_or(p, "iteration", 0), mx = number_or(p, "max_iterations", 0);
        job->iteration = isfinite(it) && fabs(it) < 2e9 ? (int)it : 0;
        job->max_iterations = isfinite(mx) && fabs(mx) < 2e9 ? (int)mx : 0;
        json_t *obj = json_object_get(p, "objective");
        job->has_objective = json_is_number(obj);
        job->objective = job->has_objective ? json_number_value(obj) : 0.0;
        job->elapsed_seconds = number_or(p, "elapsed_seconds", 0.0);
        json_t *lb = json_object_get(p, "leaderboard");
        char *text = json_is_array(lb) ? json_dumps(lb, JSON_COMPACT) : NULL;
        if (text && strlen(text) < sizeof job->leaderboard)
            snprintf(job->leaderboard, sizeof job->leaderboard, "%s", text);
        free(text);
        json_decref(p);
    }
    gp_error_clear(&job->error);
    json_t *e = row->error ? json_loads(row->error, 0, &je) : NULL;
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
    if (row->result) {
        job->model_json = row->result; /* take it */
        row->result = NULL;
    }
    gp_job_row_free(row);
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
    info_from_row(&row, job);
    return GP_OK;
}

/* ---- durable jobs ---- */

/* The row of job (id, name, status, progress text: owned by the caller). */
static int row_of(const gp_job_info *job, gp_job_row *row, gp_error *err)
{
    memset(row, 0, sizeof *row);
    snprintf(row->id, sizeof row->id, "%s", job->id);
    snprintf(row->model_name, sizeof row->model_name, "%s", job->model_name);
    snprintf(row->status, sizeof row->status, "%s", job->status ? job->status : "queued");
    json_t *p = progress_json(job);
    row->progress = p ? json_dumps(p, GP_JSON_FLAGS) : NULL;
    json_decref(p);
    return row->progress ? GP_OK : gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
}

/* The 202 answer's body (what a keyed async fit records too). */
static void accepted_body(const char *id, char *out, size_t size)
{
    snprintf(out, size, "{\"job\":\"%s\",\"status\":\"queued\"}", id);
}

void gp_api_fit_accepted(const char *id, gp_response *out)
{
    char body[128];
    accepted_body(id, body, sizeof body);
    gp_api_respond_text(out, 202, body);
    if (out->status != 202)
        return;
    out->content_type = "application/json";
    char loc[96];
    snprintf(loc, sizeof loc, "/v1/jobs/%s", id);
    gp_response_header(out, "Location", loc);
}

int gp_api_job_create(gp_api *api, const gp_fit_job *fj, const gp_job_info *job,
                      const char *owner, double lease_until, gp_error *err)
{
    const char *spec = NULL;
    const double *X = NULL, *y = NULL;
    size_t n = 0, d = 0, p = 1;
    if (gp_fit_job_request(fj, &spec, &X, &y, &n, &d, &p) != GP_OK)
        return gp_error_set(err, GP_EINTERNAL, NULL, "the fit job has no request to store");
    /* The state borrows the job's arrays: it is never freed here. A fit
     * over a data set stores no rows: the job names the data set. */
    gp_named_array arrays[2];
    gp_state data;
    gp_api_xy_state(X, y, n, d, p, arrays, &data);
    const int64_t dataset = gp_fit_job_dataset_id(fj);
    gp_job_row row;
    int rc = row_of(job, &row, err);
    row.dataset_id = dataset;
    const gp_api_idem *key = gp_fit_job_idem(fj);
    char body[128];
    accepted_body(job->id, body, sizeof body);
    gp_idem_put idem = gp_api_idem_put(key, 202, body, NULL, NULL);
    gp_audit_put audit; /* the submission; its outcome is the run's (fit_save.c) */
    const gp_audit_put *a = gp_api_audit_put(gp_fit_job_origin(fj), &audit, job->model_name, 0,
                                             202);
    if (a)
        audit.job_id = job->id;
    if (rc == GP_OK)
        rc = gp_store_job_create_audited(api->store, &row, spec, dataset ? NULL : &data, owner,
                                         lease_until, key->present ? &idem : NULL, a, err);
    gp_job_row_free(&row);
    return rc;
}

int gp_api_job_update(gp_api *api, const gp_job_info *job, const char *owner, int started,
                      gp_error *err)
{
    gp_job_row row;
    int rc = row_of(job, &row, err);
    if (rc == GP_OK)
        rc = gp_store_job_update(api->store, &row, owner, started, err);
    gp_job_row_free(&row);
    return rc;
}

/* The audit row of a job that ends failed or cancelled (a success is
 * recorded by its save): the outcome of the fit submitted, whoever runs it.
 * A cancel is recorded as 409 cancelled (a fit that will not be). */
static const gp_audit_put *outcome_audit(const gp_job_info *job, gp_audit_put *a)
{
    if (is_succeeded(job))
        return NULL;
    memset(a, 0, sizeof *a);
    a->route = GP_API_FIT_ROUTE;
    a->model = job->model_name[0] ? job->model_name : NULL;
    a->job_id = job->id;
    const int failed = is_failed(job);
    a->status = failed ? gp_api_http_status(job->error.code) : 409;
    a->code = failed ? gp_status_name(job->error.code) : "cancelled";
    return a;
}

int gp_api_job_finish(gp_api *api, const gp_job_info *job, const char *owner, gp_error *err)
{
    gp_job_row row;
    int rc = row_of(job, &row, err);
    if (rc == GP_OK && is_failed(job)) {
        json_t *e = gp_api_error_json(&job->error);
        row.error = e ? json_dumps(e, GP_JSON_FLAGS) : NULL;
        json_decref(e);
        if (row.error == NULL)
            rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    if (rc == GP_OK && is_succeeded(job))
        row.result = job->model_json;
    gp_audit_put audit;
    if (rc == GP_OK)
        rc = gp_store_job_finish_audited(api->store, &row, owner, outcome_audit(job, &audit),
                                         err);
    if (is_succeeded(job))
        row.result = NULL; /* not ours */
    gp_job_row_free(&row);
    return rc;
}

int gp_api_job_release(gp_api *api, const char *id, const char *owner, gp_error *err)
{
    return gp_store_job_release(api->store, id, owner, err);
}

int gp_api_job_renew(gp_api *api, const char *owner, double lease_until,
                     gp_api_job_hold **held, size_t *count, gp_error *err)
{
    *held = NULL;
    *count = 0;
    gp_job_hold *h = NULL;
    size_t n = 0;
    int rc = gp_store_job_renew(api->store, owner, lease_until, &h, &n, err);
    if (rc || n == 0) {
        free(h);
        return rc;
    }
    gp_api_job_hold *out = calloc(n, sizeof *out);
    if (out == NULL) {
        free(h);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(out[i].id, sizeof out[i].id, "%s", h[i].id);
        out[i].cancel_requested = h[i].cancel_requested;
    }
    free(h);
    *held = out;
    *count = n;
    return GP_OK;
}

/* The stored request of a claimed job, rebuilt into a fit job. */
static int load_request(gp_api *api, const char *id, gp_fit_job **fj, gp_error *err)
{
    gp_job_row row;
    char *spec = NULL;
    gp_state data;
    gp_state_init(&data);
    int rc = gp_store_job_request(api->store, id, &row, &spec, &data, err);
    gp_job_row_free(&row);
    const gp_named_array *X = rc ? NULL : gp_state_find(&data, "X");
    const gp_named_array *y = rc ? NULL : gp_state_find(&data, "y");
    if (rc == GP_OK && data.count == 0) {
        /* a fit over a data set: the request names it, no rows are stored */
        rc = gp_fit_job_from_request(api, spec, NULL, NULL, 0, 0, 1, fj, err);
        gp_state_free(&data);
        free(spec);
        return rc;
    }
    if (rc == GP_OK && (X == NULL || y == NULL || y->rows != X->rows || y->cols < 1))
        rc = gp_error_set(err, GP_EDATA, NULL, "job '%s''s stored data are incomplete", id);
    if (rc == GP_OK) {
        double *xd = X->data, *yd = y->data;
        size_t n = X->rows, d = X->cols, p = y->cols;
        /* Take the arrays out of the state (it frees the rest). */
        ((gp_named_array *)X)->data = NULL;
        ((gp_named_array *)y)->data = NULL;
        rc = gp_fit_job_from_request(api, spec, xd, yd, n, d, p, fj, err);
    }
    gp_state_free(&data);
    free(spec);
    return rc;
}

/* A claimed job whose request cannot be rebuilt ends failed with why. */
static void fail_unloadable(gp_api *api, gp_job_info *job, const char *owner,
                            const gp_error *why)
{
    job->status = "failed";
    job->error = *why;
    /* Should this write fail, the job stays held by nobody in memory: the
     * server's lease keeper hands such jobs back. */
    (void)gp_api_job_finish(api, job, owner, NULL);
}

int gp_api_job_claim(gp_api *api, const char *owner, double now, double lease_until,
                     int max_attempts, gp_job_info *job, gp_fit_job **fj, int *outcome,
                     gp_error *err)
{
    memset(job, 0, sizeof *job);
    *fj = NULL;
    *outcome = GP_API_CLAIM_NONE;
    char gave_up[GP_ERROR_MESSAGE_LEN + 64];
    snprintf(gave_up, sizeof gave_up,
             "{\"code\":\"%s\",\"message\":\"the daemon running this fit stopped during it %d "
             "time%s (the limit of attempts, --job-attempts); it is not run again\"}",
             gp_status_name(GP_EINTERRUPTED), max_attempts, max_attempts == 1 ? "" : "s");
    gp_job_row row;
    int claim = GP_JOB_CLAIM_NONE;
    int rc = gp_store_job_claim(api->store, owner, now, lease_until, max_attempts, gave_up, &row,
                                &claim, err);
    if (rc || claim == GP_JOB_CLAIM_NONE) {
        gp_job_row_free(&row);
        return rc;
    }
    char id[GP_JOB_ID_LEN];
    snprintf(id, sizeof id, "%s", row.id);
    gp_job_row_free(&row);
    /* The row as stored now (status, texts, times). */
    rc = gp_api_job_load(api, id, job, err);
    if (rc)
        return rc;
    if (claim != GP_JOB_CLAIMED) {
        *outcome = GP_API_CLAIM_ENDED;
        return GP_OK;
    }
    gp_error why;
    gp_error_clear(&why);
    if (load_request(api, id, fj, &why) != GP_OK) {
        fail_unloadable(api, job, owner, &why);
        *outcome = GP_API_CLAIM_ENDED;
        return GP_OK;
    }
    *outcome = GP_API_CLAIM_RUN;
    return GP_OK;
}

void gp_api_job_cancel_stored(gp_api *api, const char *id, double now, gp_response *out)
{
    gp_job_row row;
    int outcome = 0;
    gp_error err;
    gp_error_clear(&err);
    int rc = gp_store_job_cancel(api->store, id, now, &row, &outcome, &err);
    if (rc) {
        gp_job_row_free(&row);
        gp_api_error(&err, out);
        return;
    }
    if (outcome == GP_JOB_CANCEL_ENDED) {
        gp_api_fail(out, GP_ECONFLICT, "id", "job '%s' already finished (%s)", id, row.status);
        gp_job_row_free(&row);
        return;
    }
    gp_job_info info;
    memset(&info, 0, sizeof info);
    info_from_row(&row, &info);
    gp_api_job_response(&info, out);
    if (out->status == 200 && outcome == GP_JOB_CANCEL_REQUESTED)
        out->status = 202;
    gp_job_info_free(&info);
}

int gp_api_job_owned(gp_api *api, const char *prefix, gp_api_job_owner **jobs, size_t *count,
                     gp_error *err)
{
    *jobs = NULL;
    *count = 0;
    gp_job_owner *o = NULL;
    size_t n = 0;
    int rc = gp_store_job_owned(api->store, prefix, &o, &n, err);
    if (rc || n == 0) {
        free(o);
        return rc;
    }
    gp_api_job_owner *out = calloc(n, sizeof *out);
    if (out == NULL) {
        free(o);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    for (size_t i = 0; i < n; i++) {
        snprintf(out[i].id, sizeof out[i].id, "%s", o[i].id);
        snprintf(out[i].owner, sizeof out[i].owner, "%s", o[i].owner);
    }
    free(o);
    *jobs = out;
    *count = n;
    return GP_OK;
}

int gp_api_job_expire(gp_api *api, const char *id, const char *owner, gp_error *err)
{
    return gp_store_job_expire(api->store, id, owner, err);
}

int gp_api_job_prune(gp_api *api, double age_seconds, size_t *deleted, gp_error *err)
{
    *deleted = 0;
    if (!(age_seconds > 0) || age_seconds > 1e11)
        return gp_error_set(err, GP_EINVAL, NULL, "job retention out of range");
    time_t cut = time(NULL) - (time_t)age_seconds;
    struct tm tm;
    char before[32];
    if (gmtime_r(&cut, &tm) == NULL || strftime(before, sizeof before, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        return gp_error_set(err, GP_EINTERNAL, NULL, "cannot format the retention cut-off");
    return gp_store_job_prune(api->store, before, deleted, err);
}

/* ---- a durable job run by gpserve-fit (mpi/) for the daemon holding it ---- */

int gp_api_job_cancel_requested(gp_api *api, const char *id, const char *owner, int *requested,
                                gp_error *err)
{
    return gp_store_job_cancel_flag(api->store, id, owner, requested, err);
}

int gp_api_job_open(gp_api *api, const char *id, const char *owner, gp_fit_job **fj,
                    gp_job_info *info, gp_error *err)
{
    *fj = NULL;
    memset(info, 0, sizeof *info);
    int requested = 0;
    int rc = gp_api_job_cancel_requested(api, id, owner, &requested, err);
    if (rc == GP_OK)
        rc = gp_api_job_load(api, id, info, err);
    if (rc == GP_OK)
        rc = load_request(api, id, fj, err);
    if (rc == GP_OK && gp_fit_job_hold(*fj, id, owner) != GP_OK)
        rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    if (rc) {
        gp_fit_job_free(*fj);
        *fj = NULL;
        gp_job_info_free(info);
    }
    return rc;
}
