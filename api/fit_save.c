/* Fit requests: a fitted model written as the name's new version (the
 * model JSON with the request's names, data set, validation report and auto's
 * leaderboard; nothing non-finite), with its audit row, a durable job's end
 * and an idempotency key's answer in the same transaction; then the 201. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/fit_job.h"

/* The audit row of a fit's save: the request's (201, the version the store
 * makes); a durable job's run is its outcome, recorded even when the run is
 * another daemon's take-over, which knows the job but not who submitted it. */
static const gp_audit_put *fit_audit(const gp_fit_job *job, gp_audit_put *buf)
{
    const gp_audit_put *a = gp_api_audit_put(&job->origin, buf, job->name, 0, 201);
    if (job->hold_owner == NULL)
        return a;
    if (a == NULL) {
        memset(buf, 0, sizeof *buf);
        buf->route = GP_API_FIT_ROUTE;
        buf->model = job->name;
        buf->status = 201;
    }
    buf->job_id = job->hold_id;
    return buf;
}

/* The fit response's body for the new row: a durable job's result, and the
 * answer a keyed fit records. */
char *gp_api_fit_body(const gp_model_meta *meta, void *ctx)
{
    (void)ctx;
    json_t *res = gp_api_model_json(meta, NULL, 0, NULL);
    char *text = res ? json_dumps(res, GP_JSON_FLAGS) : NULL;
    json_decref(res);
    return text;
}

/* method_info.leaderboard (every candidate) and method_info.auto (the
 * budget and the rule it picked by) of an auto fit's version. */
static void auto_method_info(json_t *ij, const gp_api_auto *a)
{
    json_t *mi = json_object_get(ij, "method_info");
    if (!json_is_object(mi)) {
        mi = json_object();
        json_object_set_new(ij, "method_info", mi);
    }
    json_object_set(mi, "leaderboard", a->leaderboard);
    json_t *o = json_object();
    json_object_set_new(o, "budget_s", gp_json_real(a->budget_s));
    json_object_set_new(o, "criterion", json_string("lowest mean held-out nlpd (log loss for "
                                                    "bernoulli and softmax)"));
    json_object_set_new(o, "tie", json_string("within one standard error of the best mean, the "
                                              "earliest in the rule table's order (exact first)"));
    gp_api_auto_info(o, a);
    json_object_set_new(mi, "auto", o);
}

/* The model JSON kept with the version (text, malloc'ed; NULL when out of
 * memory): the model's own, with what the request named and how it was
 * chosen. */
static char *version_info(const gp_fit_job *job, const gp_model *model)
{
    char *info = NULL;
    json_t *ij = gp_api_model_info_json(model);
    if (ij && job->outputs) /* kept with the version: GET, predict, OIP and observe read it */
        json_object_set(ij, "outputs", job->outputs);
    if (ij && job->features) /* the model's signature: records are matched by these */
        json_object_set(ij, "feature_names", job->features);
    if (ij && job->targets)
        json_object_set(ij, "target_names", job->targets);
    if (ij && job->created_by[0]) /* absent when auth is off */
        json_object_set_new(ij, "created_by", json_string(job->created_by));
    if (ij && job->data) /* which data set, and which of its rows */
        json_object_set_new(ij, "dataset", gp_fit_data_json(job->data));
    if (ij && job->validation.report) /* the report of the folds, kept with the version */
        json_object_set(ij, "validation", job->validation.report);
    if (ij && job->autom.on && job->autom.leaderboard) /* how auto chose the method */
        auto_method_info(ij, &job->autom);
    if (ij)
        info = json_dumps(ij, GP_JSON_FLAGS);
    json_decref(ij);
    return info;
}

/* The model's arrays to store; nothing non-finite is stored: a fit that
 * came out so is refused. */
static int export_state(const gp_model *model, gp_state *st, gp_error *err)
{
    int rc = gp_model_export(model, st, err);
    gp_error bad;
    if (rc == GP_OK && gp_state_check_finite(st, &bad) != GP_OK)
        rc = gp_error_set(err, GP_EDATA, NULL,
                          "the fitted model holds a non-finite number (%s): the data is beyond "
                          "what float64 arithmetic can fit; rescale it",
                          bad.message);
    return rc;
}

/* The saved version's 201 (with its Location); the model goes to the cache. */
static int respond_created(gp_api *api, gp_model *model, gp_model_meta *meta, gp_response *out,
                           double *fit_seconds)
{
    gp_error err;
    gp_error_clear(&err);
    if (model->diag.jitter > 0.0)
        atomic_fetch_add(&api->jitter_escalations, 1);
    if (fit_seconds)
        *fit_seconds = model->diag.fit_seconds;
    gp_cache_insert(api, meta, model); /* the cache owns the model from here */
    json_t *res = gp_api_model_json(meta, NULL, 0, &err);
    if (res == NULL) {
        gp_model_meta_free(meta);
        gp_api_error(&err, out);
        return err.code;
    }
    char loc[160];
    snprintf(loc, sizeof loc, "/v1/models/%s/versions/%d", meta->name, meta->version);
    gp_model_meta_free(meta);
    gp_json_respond(res, 201, out);
    if (out->status == 201)
        gp_response_header(out, "Location", loc);
    return out->status == 201 ? GP_OK : GP_ENOMEM;
}

int gp_api_save_fit(gp_api *api, gp_fit_job *job, gp_model *model, gp_response *out,
                    double *fit_seconds)
{
    gp_error err;
    gp_error_clear(&err);
    if (fit_seconds)
        *fit_seconds = 0.0;
    gp_state st;
    gp_state_init(&st);
    char *info = version_info(job, model);
    int rc = info ? export_state(model, &st, &err)
                  : gp_error_set(&err, GP_ENOMEM, NULL, "out of memory");
    gp_model_meta meta;
    memset(&meta, 0, sizeof meta);
    gp_job_done done = {.id = job->hold_id, .owner = job->hold_owner, .progress = NULL,
                        .result = gp_api_fit_body, .ctx = NULL};
    gp_idem_put idem = gp_api_idem_put(&job->idem, 201, NULL, gp_api_fit_body, NULL);
    /* An async fit's key was recorded with its job (the 202); its run saves
     * like any other. */
    const int keyed = job->idem.present && !job->async && job->hold_owner == NULL;
    gp_audit_put audit;
    const gp_audit_put *a = fit_audit(job, &audit);
    if (rc == GP_OK)
        rc = gp_store_save_audited(api->store, job->name, job->method->name, job->spec, info,
                                   job->n, job->d, &st, job->hold_owner ? &done : NULL,
                                   keyed ? &idem : NULL, a, &meta, &err);
    gp_state_free(&st);
    free(info);
    if (rc) {
        gp_model_free(model);
        /* A retry with the key ran beside this one and saved first: its answer. */
        if (keyed && gp_api_key_taken(&err) && gp_api_idem_replay(api, &job->idem, out))
            return out->status < 400 ? GP_OK : GP_ECONFLICT;
        gp_api_error(&err, out);
        return rc;
    }
    return respond_created(api, model, &meta, out, fit_seconds);
}
