/* Studies as resources (docs/design/api.md, "Studies"): create, list, get
 * (with the trials' counts, the best feasible trial and the study's model)
 * and delete (the study, its trials and its models study.<name>*), and the
 * expiry of dead clients' trials. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/study.h"

/* ---- the study's models in the store ---- */

/* Delete every model of study name (the objective's and each constraint's
 * that may exist): the ones not there are no error. */
static void delete_models(gp_api *api, const char *name, const gp_api_origin *o)
{
    for (int k = -1; k < GP_STUDY_MAX_CONSTRAINTS; k++) {
        char model[GP_NAME_MAX + 1];
        gp_study_model_name(name, k, model);
        gp_model_meta meta;
        gp_error err;
        gp_error_clear(&err);
        if (gp_store_meta_brief(api->store, model, 0, &meta, &err) != GP_OK)
            continue;
        gp_model_meta_free(&meta);
        gp_audit_put buf;
        if (gp_store_delete_audited(api->store, model, gp_api_audit_put(o, &buf, model, 0, 204),
                                    &err) != GP_OK)
            fprintf(stderr, "gpserve: model '%s' of study '%s' was not deleted: %s\n", model,
                    name, err.message);
        gp_cache_evict_name(api, model);
        gp_poisoned_forget(api, model);
    }
}

/* ---- create ---- */

static int study_name(json_t *body, const char **name, gp_error *err)
{
    json_t *v = json_object_get(body, "name");
    *name = json_string_value(v);
    if (v == NULL)
        return gp_error_set(err, GP_EINVAL, "name", "name is missing");
    if (*name == NULL || !gp_api_valid_name(*name) || strlen(*name) > GP_STUDY_NAME_MAX)
        return gp_error_set(err, GP_EINVAL, "name",
                            "a study's name must be 1 to %d characters of A-Z a-z 0-9 . _ - "
                            "(its models are named study.<name>)",
                            GP_STUDY_NAME_MAX);
    return GP_OK;
}

static json_t *study_json(gp_api *api, const gp_study_row *row, const gp_study_config *c,
                          const gp_trial_row *trials, size_t n);

void gp_api_create_study(gp_api *api, const gp_request *req, gp_response *out)
{
    json_t *body = NULL, *canon = NULL;
    const char *name = NULL;
    char *text = NULL;
    gp_study_config c;
    memset(&c, 0, sizeof c);
    gp_study_row row;
    memset(&row, 0, sizeof row);
    gp_error err;
    gp_error_clear(&err);
    int rc = gp_api_check_json(req, &err);
    if (rc == GP_OK)
        rc = gp_json_parse_body(req, &body, &err);
    if (rc == GP_OK)
        rc = study_name(body, &name, &err);
    if (rc == GP_OK)
        rc = gp_study_config_parse(api, body, &c, &err);
    if (rc == GP_OK && ((canon = gp_study_config_json(&c)) == NULL ||
                        (text = json_dumps(canon, GP_JSON_FLAGS)) == NULL))
        rc = gp_error_set(&err, GP_ENOMEM, NULL, "out of memory");
    gp_api_origin o;
    gp_api_origin_of(req, &o);
    gp_audit_put buf;
    if (rc == GP_OK) {
        /* models left by a study of the name deleted while its refit ran */
        delete_models(api, name, &o);
        rc = gp_store_study_create(api->store, name, text, req->key_name, gp_api_wall_seconds(),
                                   gp_api_audit_put(&o, &buf, name, 0, 201), &row, &err);
    }
    if (rc) {
        gp_api_error(&err, out);
    } else {
        gp_json_respond(study_json(api, &row, &c, NULL, 0), 201, out);
        char loc[160];
        snprintf(loc, sizeof loc, "/v1/studies/%s", row.name);
        if (out->status == 201)
            gp_response_header(out, "Location", loc);
    }
    gp_study_row_free(&row);
    gp_study_config_free(&c);
    free(text);
    json_decref(canon);
    json_decref(body);
}

/* ---- get ---- */

/* The best completed trial whose constraints hold (ties: the earliest
 * completion), or NULL. */
static const gp_trial_row *best_trial(const gp_study_config *c, const gp_study_data *d,
                                      const gp_trial_row *trials, size_t n)
{
    size_t best = d->n;
    for (size_t i = 0; i < d->n; i++) {
        int feasible = 1;
        for (size_t k = 0; k < c->n_constraints && feasible; k++)
            feasible = d->C[i + k * d->n] <= c->constraints[k].max;
        if (feasible && (best == d->n || (c->maximize ? d->y[i] > d->y[best]
                                                      : d->y[i] < d->y[best])))
            best = i;
    }
    for (size_t i = 0; best < d->n && i < n; i++)
        if (trials[i].id == d->ids[best])
            return &trials[i];
    return NULL;
}

/* {"name", "version", "trials_included", "created_at"} of the latest stored
 * version of a study's model (constraint -1: the objective's), or null. */
static json_t *model_json(gp_api *api, const char *study, int constraint)
{
    char name[GP_NAME_MAX + 1];
    gp_study_model_name(study, constraint, name);
    gp_model_meta meta;
    gp_error err;
    if (gp_rows_meta(api, name, 0, 0, &meta, &err) != GP_OK)
        return json_null();
    json_t *o = json_pack("{s:s, s:i, s:I, s:s}", "name", name, "version", meta.version,
                          "trials_included", (json_int_t)meta.n_train, "created_at",
                          meta.created_at);
    gp_model_meta_free(&meta);
    return o ? o : json_null();
}

static json_t *counts_json(const gp_study_row *row, const gp_study_data *d)
{
    return json_pack("{s:I, s:I, s:I, s:I, s:I}", "total", (json_int_t)row->n_trials, "active",
                     (json_int_t)d->n_active, "completed", (json_int_t)d->n_completed,
                     "infeasible", (json_int_t)d->n_infeasible, "expired",
                     (json_int_t)d->n_expired);
}

/* The study as GET answers it; trials NULL (a new study): none yet. */
static json_t *study_json(gp_api *api, const gp_study_row *row, const gp_study_config *c,
                          const gp_trial_row *trials, size_t n)
{
    gp_study_data d;
    gp_error err;
    if (gp_study_data_build(c, trials, n, &d, &err) != GP_OK)
        return NULL;
    json_t *o = json_object(), *cons = json_array();
    if (o && cons) {
        json_object_set_new(o, "name", json_string(row->name));
        json_object_set_new(o, "config", gp_study_config_json(c));
        json_object_set_new(o, "revision", json_integer((json_int_t)row->revision));
        json_object_set_new(o, "trials", counts_json(row, &d));
        const gp_trial_row *best = best_trial(c, &d, trials, n);
        json_object_set_new(o, "best_trial", best ? gp_study_trial_json(best) : json_null());
        json_object_set_new(o, "model", model_json(api, row->name, -1));
        for (size_t k = 0; k < c->n_constraints; k++)
            json_array_append_new(cons, model_json(api, row->name, (int)k));
        json_object_set(o, "constraint_models", cons);
        json_object_set_new(o, "refit_n", json_integer((json_int_t)row->refit_n));
        json_object_set_new(o, "created_at", json_string(row->created_at));
        if (row->created_by[0])
            json_object_set_new(o, "created_by", json_string(row->created_by));
    }
    json_decref(cons);
    gp_study_data_free(&d);
    return o;
}

void gp_api_get_study(gp_api *api, const char *name, gp_response *out)
{
    gp_study_row row;
    gp_trial_row *trials = NULL;
    size_t n = 0;
    gp_study_config c;
    memset(&c, 0, sizeof c);
    gp_error err;
    gp_error_clear(&err);
    int rc = gp_store_study_snapshot(api->store, name, &row, &trials, &n, &err);
    if (rc) {
        gp_api_error(&err, out);
        return;
    }
    if ((rc = gp_study_config_read(api, row.config, &c, &err)) != GP_OK)
        gp_api_error(&err, out);
    else
        gp_json_respond(study_json(api, &row, &c, trials, n), 200, out);
    gp_study_config_free(&c);
    gp_trial_row_free_array(trials, n);
    gp_study_row_free(&row);
}

/* ---- list ---- */

void gp_api_list_studies(gp_api *api, gp_response *out)
{
    gp_study_row *rows = NULL;
    size_t n = 0;
    gp_error err;
    gp_error_clear(&err);
    if (gp_store_study_list(api->store, &rows, &n, &err) != GP_OK) {
        gp_api_error(&err, out);
        return;
    }
    json_t *list = json_array();
    for (size_t i = 0; list && i < n; i++) {
        json_t *s = json_pack("{s:s, s:I, s:I, s:I, s:s}", "name", rows[i].name, "trials",
                              (json_int_t)rows[i].n_trials, "completed",
                              (json_int_t)rows[i].n_completed, "revision",
                              (json_int_t)rows[i].revision, "created_at", rows[i].created_at);
        if (s && rows[i].created_by[0])
            json_object_set_new(s, "created_by", json_string(rows[i].created_by));
        json_array_append_new(list, s);
    }
    gp_study_row_free_array(rows, n);
    gp_json_respond(list ? json_pack("{s:o}", "studies", list) : NULL, 200, out);
}

/* ---- delete ---- */

void gp_api_delete_study(gp_api *api, const char *name, const gp_request *req,
                         gp_response *out)
{
    gp_study_row row;
    gp_error err;
    gp_error_clear(&err);
    gp_api_origin o;
    gp_api_origin_of(req, &o);
    gp_audit_put buf;
    int rc = gp_store_study_get(api->store, name, &row, &err);
    if (rc == GP_OK)
        rc = gp_store_study_delete(api->store, name, gp_api_audit_put(&o, &buf, name, 0, 204),
                                   &err);
    if (rc) {
        gp_api_error(&err, out);
        return;
    }
    gp_study_models_forget(api, row.id);
    gp_study_row_free(&row);
    delete_models(api, name, &o);
    out->status = 204;
    out->content_type = NULL;
}

int gp_api_studies_expire(gp_api *api, size_t *expired, gp_error *err)
{
    return gp_store_trials_expire(api->store, gp_api_wall_seconds(), expired, err);
}
