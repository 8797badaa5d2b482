/* A study's trials (docs/design/api.md, "Studies"): the history the engine
 * reads from a snapshot (completed trials in seq order, encoded), trials as
 * JSON, GET of the list and of one, and the writes that complete a trial:
 * POST .../trials/{id} (metrics, or infeasible) and POST .../trials (a trial
 * run elsewhere, attached completed). A completion that makes a refit due
 * claims it in the store and hands the caller its fit job. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/study.h"

static const char *const complete_keys[] = {"metrics", "infeasible", "reason", NULL};
static const char *const attach_keys[] = {"parameters", "metrics", "infeasible", "reason", NULL};
#define REASON_MAX 1000
#define ATTACH_TRIES 8

void gp_study_space_of(const gp_study_config *c, gp_study_space *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < c->n_params && i < GP_STUDY_MAX_PARAMS; i++) {
        const gp_study_param *p = &c->params[i];
        out->params[i] = (gp_bo_param){.type = (gp_bo_type)p->type, .lo = p->lo, .hi = p->hi,
                                       .log_scale = p->log_scale, .n_values = p->n_values};
    }
    out->space.n_params = c->n_params;
    out->space.params = out->params;
}

/* ---- the history ---- */

void gp_study_data_free(gp_study_data *d)
{
    if (d == NULL)
        return;
    free(d->X);
    free(d->y);
    free(d->C);
    free(d->ids);
    free(d->pending);
    memset(d, 0, sizeof *d);
}

/* A completed trial's encoded point and metrics (objective, then each
 * constraint); 0 when the stored texts read back whole. */
static int read_trial(const gp_study_config *c, const gp_study_space *sp, const gp_trial_row *t,
                      double *u, double *metric)
{
    double value[GP_STUDY_MAX_PARAMS];
    gp_error ignored;
    json_error_t je;
    json_t *p = t->parameters ? json_loads(t->parameters, JSON_DECODE_INT_AS_REAL, &je) : NULL;
    int rc = p && gp_study_values_from_json(c, p, "parameters", value, &ignored) == GP_OK &&
                     gp_bo_encode(&sp->space, value, u, &ignored) == GP_OK
                 ? 0
                 : -1;
    json_decref(p);
    if (rc || metric == NULL)
        return rc;
    json_t *m = t->metrics ? json_loads(t->metrics, JSON_DECODE_INT_AS_REAL, &je) : NULL;
    for (size_t k = 0; rc == 0 && k < gp_study_n_metrics(c); k++) {
        json_t *v = json_object_get(m, gp_study_metric_name(c, k));
        metric[k] = json_is_number(v) ? json_number_value(v) : NAN;
        rc = isfinite(metric[k]) ? 0 : -1;
    }
    json_decref(m);
    return rc;
}

static int by_seq(const void *a, const void *b)
{
    const gp_trial_row *x = *(const gp_trial_row *const *)a, *y = *(const gp_trial_row *const *)b;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static void count_state(gp_study_data *d, const gp_trial_row *t)
{
    if (strcmp(t->state, "completed") == 0)
        d->n_completed++;
    else if (strcmp(t->state, "infeasible") == 0)
        d->n_infeasible++;
    else if (strcmp(t->state, "active") == 0)
        d->n_active++;
    else
        d->n_expired++;
}

int gp_study_data_build(const gp_study_config *c, const gp_trial_row *trials, size_t n,
                        gp_study_data *out, gp_error *err)
{
    memset(out, 0, sizeof *out);
    gp_study_space sp;
    gp_study_space_of(c, &sp);
    const size_t D = gp_study_dim(c), K = c->n_constraints;
    out->D = D;
    const gp_trial_row **done = calloc(n ? n : 1, sizeof *done);
    out->X = calloc(D * (n ? n : 1), sizeof *out->X);
    out->y = calloc(n ? n : 1, sizeof *out->y);
    out->C = calloc((K ? K : 1) * (n ? n : 1), sizeof *out->C);
    out->ids = calloc(n ? n : 1, sizeof *out->ids);
    out->pending = calloc(D * (n ? n : 1), sizeof *out->pending);
    if (!done || !out->X || !out->y || !out->C || !out->ids || !out->pending) {
        free(done);
        gp_study_data_free(out);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    size_t nd = 0;
    for (size_t i = 0; i < n; i++) {
        count_state(out, &trials[i]);
        if (strcmp(trials[i].state, "completed") == 0)
            done[nd++] = &trials[i];
        else if (strcmp(trials[i].state, "active") == 0 &&
                 read_trial(c, &sp, &trials[i], out->pending + D * out->n_pending, NULL) == 0)
            out->n_pending++;
    }
    qsort(done, nd, sizeof *done, by_seq);
    double metric[1 + GP_STUDY_MAX_CONSTRAINTS];
    for (size_t i = 0; i < nd; i++) {
        /* a trial whose texts do not read back (written by another build) is left out */
        if (read_trial(c, &sp, done[i], out->X + D * out->n, metric) != 0)
            continue;
        out->y[out->n] = metric[0];
        for (size_t k = 0; k < K; k++)
            out->C[out->n + k * n] = metric[1 + k];
        out->ids[out->n] = done[i]->id;
        out->n++;
    }
    /* C's columns are n apart (the rows allotted): closed up to out->n */
    for (size_t k = 1; k < K && out->n < n; k++)
        memmove(out->C + k * out->n, out->C + k * n, out->n * sizeof *out->C);
    free(done);
    return GP_OK;
}

/* ---- trials as JSON ---- */

static void set_text_json(json_t *o, const char *key, const char *text)
{
    json_error_t je;
    json_t *v = text ? json_loads(text, JSON_DECODE_ANY, &je) : NULL;
    if (v)
        json_object_set_new(o, key, v);
}

json_t *gp_study_trial_json(const gp_trial_row *t)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    json_object_set_new(o, "id", json_integer((json_int_t)t->id));
    json_object_set_new(o, "state", json_string(t->state));
    set_text_json(o, "parameters", t->parameters);
    set_text_json(o, "metrics", t->metrics);
    if (t->reason)
        json_object_set_new(o, "reason", json_string(t->reason));
    if (t->client_id[0])
        json_object_set_new(o, "client_id", json_string(t->client_id));
    if (t->seq)
        json_object_set_new(o, "seq", json_integer((json_int_t)t->seq));
    json_object_set_new(o, "created", gp_json_real(t->created));
    json_object_set_new(o, "updated", gp_json_real(t->updated));
    if (strcmp(t->state, "active") == 0)
        json_object_set_new(o, "expires_at", gp_json_real(t->expires_at));
    return o;
}

/* The study (name) and its configuration, or the error answered. */
static int load_study(gp_api *api, const char *name, gp_study_row *row, gp_study_config *c,
                      gp_response *out)
{
    gp_error err;
    gp_error_clear(&err);
    int rc = gp_store_study_get(api->store, name, row, &err);
    if (rc == GP_OK && (rc = gp_study_config_read(api, row->config, c, &err)) != GP_OK)
        gp_study_row_free(row);
    if (rc)
        gp_api_error(&err, out);
    return rc;
}

static int wanted_state(const gp_request *req, const char **state, gp_response *out)
{
    *state = NULL;
    for (size_t i = 0; i < req->n_query; i++) {
        const char *k = req->query[i].key, *v = req->query[i].value;
        if (k && strcmp(k, "state") == 0 && v &&
            (strcmp(v, "active") == 0 || strcmp(v, "completed") == 0 ||
             strcmp(v, "infeasible") == 0 || strcmp(v, "expired") == 0)) {
            *state = v;
        } else if (k) {
            gp_api_fail(out, GP_EINVAL, k,
                        strcmp(k, "state") == 0
                            ? "state must be active, completed, infeasible or expired"
                            : "unknown query parameter (GET trials takes state)");
            return -1;
        }
    }
    return 0;
}

void gp_api_study_trials(gp_api *api, const char *name, const gp_request *req,
                         gp_response *out)
{
    const char *state = NULL;
    if (wanted_state(req, &state, out))
        return;
    gp_study_row row;
    gp_trial_row *trials = NULL;
    size_t n = 0;
    gp_error err;
    gp_error_clear(&err);
    if (gp_store_study_snapshot(api->store, name, &row, &trials, &n, &err) != GP_OK) {
        gp_api_error(&err, out);
        return;
    }
    json_t *o = json_object(), *list = json_array();
    for (size_t i = 0; list && i < n; i++)
        if (state == NULL || strcmp(trials[i].state, state) == 0)
            json_array_append_new(list, gp_study_trial_json(&trials[i]));
    if (o && list) {
        json_object_set_new(o, "study", json_string(row.name));
        json_object_set_new(o, "revision", json_integer((json_int_t)row.revision));
        json_object_set(o, "trials", list);
    }
    json_decref(list);
    gp_trial_row_free_array(trials, n);
    gp_study_row_free(&row);
    gp_json_respond(o, 200, out);
}

void gp_api_study_trial(gp_api *api, const char *name, int64_t trial, gp_response *out)
{
    gp_study_row row;
    gp_trial_row t;
    memset(&t, 0, sizeof t);
    gp_error err;
    gp_error_clear(&err);
    int rc = gp_store_study_get(api->store, name, &row, &err);
    if (rc == GP_OK) {
        rc = gp_store_trial_get(api->store, row.id, trial, &t, &err);
        gp_study_row_free(&row);
    }
    if (rc) {
        gp_api_error(&err, out);
        return;
    }
    json_t *o = gp_study_trial_json(&t);
    gp_trial_row_free(&t);
    gp_json_respond(o, 200, out);
}

/* ---- completing ---- */

/* The body's metrics as the text the store keeps: every metric of the
 * study a finite number (422 naming metrics.<name> otherwise), no other
 * name; infeasible: each optional, a number or null. */
static int metrics_text(const gp_study_config *c, json_t *m, int infeasible, char **text,
                        gp_error *err)
{
    *text = NULL;
    if (m == NULL && infeasible)
        return GP_OK;
    if (!json_is_object(m))
        return gp_error_set(err, GP_EDATA, "metrics",
                            m ? "metrics must be an object {\"%s\": value, ...}"
                              : "metrics is missing: {\"%s\": value, ...} (or \"infeasible\": "
                                "true)",
                            c->objective);
    const char *key;
    json_t *v;
    json_object_foreach(m, key, v) {
        size_t k = 0;
        while (k < gp_study_n_metrics(c) && strcmp(gp_study_metric_name(c, k), key) != 0)
            k++;
        char f[GP_STUDY_FIELD_BUF];
        snprintf(f, sizeof f, "metrics.%.*s", GP_STUDY_METRIC_MAX, key);
        if (k == gp_study_n_metrics(c))
            return gp_error_set(err, GP_EDATA, f, "%s is not a metric of the study (its "
                                "objective is '%s')", f, c->objective);
    }
    for (size_t k = 0; k < gp_study_n_metrics(c); k++) {
        char f[GP_STUDY_FIELD_BUF];
        snprintf(f, sizeof f, "metrics.%s", gp_study_metric_name(c, k));
        v = json_object_get(m, gp_study_metric_name(c, k));
        int ok = json_is_number(v) && isfinite(json_number_value(v));
        if (!ok && !(infeasible && (v == NULL || json_is_null(v))))
            return gp_error_set(err, GP_EDATA, f,
                                "%s must be a finite number%s", f,
                                infeasible ? " or null" : " (else report the trial infeasible)");
    }
    if ((*text = json_dumps(m, GP_JSON_FLAGS)) == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    return GP_OK;
}

typedef struct completion {
    int infeasible;
    char *metrics;
    const char *reason;
} completion;

static int parse_completion(const gp_study_config *c, json_t *obj, completion *cp,
                            gp_error *err)
{
    json_t *inf = json_object_get(obj, "infeasible"), *r = json_object_get(obj, "reason");
    int rc = inf ? gp_json_get_bool(inf, "infeasible", &cp->infeasible, err) : GP_OK;
    if (rc == GP_OK && r && (!json_is_string(r) || strlen(json_string_value(r)) > REASON_MAX))
        rc = gp_error_set(err, GP_EINVAL, "reason", "reason must be a string of at most %d bytes",
                          REASON_MAX);
    if (rc == GP_OK && r && !cp->infeasible)
        rc = gp_error_set(err, GP_EINVAL, "reason", "reason is an infeasible trial's");
    cp->reason = r ? json_string_value(r) : NULL;
    if (rc == GP_OK)
        rc = metrics_text(c, json_object_get(obj, "metrics"), cp->infeasible, &cp->metrics, err);
    return rc;
}

/* After a completion: when the feasible count makes a refit due and this
 * daemon claims it, the refits' fit jobs into jobs (how many returned; 0
 * otherwise, or when anything fails: the next completion tries again). */
static size_t claim_refit(gp_api *api, const gp_study_row *study, const gp_study_config *c,
                          gp_fit_job **jobs)
{
    gp_study_row row;
    gp_trial_row *trials = NULL;
    size_t n = 0;
    gp_error err;
    gp_error_clear(&err);
    if (gp_store_study_snapshot(api->store, study->name, &row, &trials, &n, &err) != GP_OK)
        return 0;
    gp_study_data d;
    size_t made = 0;
    int claimed = 0;
    if (gp_study_data_build(c, trials, n, &d, &err) == GP_OK) {
        if (gp_study_refit_due(c, d.n, row.refit_n) &&
            gp_store_study_refit_claim(api->store, row.id, d.n, &claimed, &err) == GP_OK &&
            claimed)
            made = gp_study_refit_jobs(api, row.name, c, &d, jobs);
        gp_study_data_free(&d);
    }
    gp_trial_row_free_array(trials, n);
    gp_study_row_free(&row);
    return made;
}

/* The answer of a completion: the trial as it is now. */
static void answer_trial(gp_api *api, int64_t study_id, int64_t id, gp_response *out)
{
    gp_trial_row t;
    memset(&t, 0, sizeof t);
    gp_error err;
    gp_error_clear(&err);
    if (gp_store_trial_get(api->store, study_id, id, &t, &err) != GP_OK) {
        gp_api_error(&err, out);
        return;
    }
    gp_json_respond(gp_study_trial_json(&t), 200, out);
    gp_trial_row_free(&t);
}

static int complete(gp_api *api, const gp_request *req, const gp_study_row *row, int64_t id,
                    const completion *cp, gp_error *err)
{
    gp_api_origin o;
    gp_api_origin_of(req, &o);
    gp_audit_put buf;
    return gp_store_trial_complete(api->store, row->id, id, cp->infeasible ? "infeasible"
                                                                            : "completed",
                                   cp->metrics, cp->reason, gp_api_wall_seconds(),
                                   gp_api_audit_put(&o, &buf, row->name, 0, 200), NULL, NULL,
                                   err);
}

/* The body, its study and configuration, and its completion parsed (the
 * answer made on failure). */
static int begin_write(gp_api *api, const char *name, const gp_request *req,
                       const char *const *keys, json_t **obj, gp_study_row *row,
                       gp_study_config *c, completion *cp, gp_response *out)
{
    gp_error err;
    gp_error_clear(&err);
    int rc = gp_json_parse_body(req, obj, &err);
    if (rc == GP_OK)
        rc = gp_json_known_keys(*obj, keys, NULL, &err);
    if (rc) {
        json_decref(*obj);
        gp_api_error(&err, out);
        return rc;
    }
    if ((rc = load_study(api, name, row, c, out)) != GP_OK) {
        json_decref(*obj);
        return rc;
    }
    if ((rc = parse_completion(c, *obj, cp, &err)) != GP_OK) {
        json_decref(*obj);
        gp_study_row_free(row);
        gp_study_config_free(c);
        gp_api_error(&err, out);
    }
    return rc;
}

static void end_write(json_t *obj, gp_study_row *row, gp_study_config *c, completion *cp)
{
    json_decref(obj);
    gp_study_row_free(row);
    gp_study_config_free(c);
    free(cp->metrics);
}

void gp_api_study_complete(gp_api *api, const char *name, int64_t trial, const gp_request *req,
                           gp_response *out, gp_fit_job **refits, size_t *n_refits)
{
    *n_refits = 0;
    json_t *obj = NULL;
    gp_study_row row;
    gp_study_config c;
    memset(&c, 0, sizeof c);
    completion cp = {0};
    if (begin_write(api, name, req, complete_keys, &obj, &row, &c, &cp, out) != GP_OK)
        return;
    gp_error err;
    gp_error_clear(&err);
    if (complete(api, req, &row, trial, &cp, &err) != GP_OK) {
        gp_api_error(&err, out);
    } else {
        answer_trial(api, row.id, trial, out);
        if (!cp.infeasible)
            *n_refits = claim_refit(api, &row, &c, refits);
    }
    end_write(obj, &row, &c, &cp);
}

/* A trial run elsewhere: inserted active at the study's revision (again
 * when another write moved it), then completed. */
static int attach(gp_api *api, const gp_request *req, gp_study_row *row,
                  const gp_study_config *c, json_t *params, const completion *cp, int64_t *id,
                  gp_error *err)
{
    double value[GP_STUDY_MAX_PARAMS];
    int rc = gp_study_values_from_json(c, params, "parameters", value, err);
    json_t *canon = rc == GP_OK ? gp_study_values_json(c, value) : NULL;
    char *text = canon ? json_dumps(canon, GP_JSON_FLAGS) : NULL;
    json_decref(canon);
    if (rc == GP_OK && text == NULL)
        rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    gp_api_origin o;
    gp_api_origin_of(req, &o);
    gp_audit_put buf;
    gp_trial_new tn = {.parameters = text};
    for (int t = 0; rc == GP_OK && t < ATTACH_TRIES; t++) {
        double now = gp_api_wall_seconds();
        rc = gp_store_trials_add(api->store, row->id, row->revision, NULL, &tn, 1, now,
                                 now + c->trial_timeout_s,
                                 gp_api_audit_put(&o, &buf, row->name, 0, 201), id, err);
        if (rc != GP_ECONFLICT || err->field[0])
            break;
        char name[GP_NAME_MAX + 1];
        memcpy(name, row->name, sizeof name);
        gp_study_row_free(row);
        rc = gp_store_study_get(api->store, name, row, err);
    }
    free(text);
    if (rc == GP_ECONFLICT && err->field[0] == '\0')
        gp_error_set(err, GP_ECONFLICT, NULL, "the study is busy (%d writes moved it while this "
                     "one tried); retry", ATTACH_TRIES);
    return rc ? rc : complete(api, req, row, *id, cp, err);
}

void gp_api_study_attach(gp_api *api, const char *name, const gp_request *req,
                         gp_response *out, gp_fit_job **refits, size_t *n_refits)
{
    *n_refits = 0;
    json_t *obj = NULL;
    gp_study_row row;
    gp_study_config c;
    memset(&c, 0, sizeof c);
    completion cp = {0};
    if (begin_write(api, name, req, attach_keys, &obj, &row, &c, &cp, out) != GP_OK)
        return;
    gp_error err;
    gp_error_clear(&err);
    int64_t id = 0;
    json_t *params = json_object_get(obj, "parameters");
    if (params == NULL) {
        gp_api_fail(out, GP_EINVAL, "parameters", "parameters is missing: {\"%s\": value, ...}",
                    c.params[0].name);
    } else if (attach(api, req, &row, &c, params, &cp, &id, &err) != GP_OK) {
        gp_api_error(&err, out);
    } else {
        answer_trial(api, row.id, id, out);
        out->status = out->status == 200 ? 201 : out->status;
        if (!cp.infeasible)
            *n_refits = claim_refit(api, &row, &c, refits);
    }
    end_write(obj, &row, &c, &cp);
}
