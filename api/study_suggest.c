/* POST /v1/studies/{name}/suggestions (docs/design/api.md, "Studies"): the
 * next trials of a study. A client that asks again with a client_id whose
 * trials are still active gets them back, renewed (Vizier's rule). Else,
 * until initial_design completed trials are feasible, the next points of
 * the study's scrambled Sobol sequence (index: the trials made so far, so
 * replicas agree); then gp_bo_suggest on the engine's models with the
 * active trials as fantasies. The trials are inserted at the revision of
 * the snapshot they were computed from: when another write moved it, the
 * snapshot is read again and the trials computed again (bounded tries).
 * A suggestion never waits for a refit: its bound is one store read, the
 * observes since the last stored version, the acquisition's optimisation
 * and one store write, per try. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/study.h"
#include "core/bo/sobol.h"
#include "core/bo/suggest.h"

#define SUGGEST_TRIES 8

_Static_assert(GP_STUDY_MAX_COUNT <= GP_BO_MAX_Q, "a suggestion's count");
_Static_assert(GP_STUDY_MAX_DIM <= GP_BO_MAX_DIM, "the encoded dimension");
_Static_assert((int)GP_ACQ_MAX_VARIANCE == GP_STUDY_MAX_VARIANCE &&
                   (int)GP_ACQ_THOMPSON == GP_STUDY_THOMPSON && (int)GP_ACQ_UCB == GP_STUDY_UCB,
               "the acquisitions in core/bo's order");

static const char *const suggest_keys[] = {"count", "client_id", NULL};

typedef struct suggest_args {
    uint64_t count;
    const char *client_id; /* NULL: none */
} suggest_args;

static int parse_args(json_t *obj, suggest_args *a, gp_error *err)
{
    a->count = 1;
    a->client_id = NULL;
    int rc = gp_json_known_keys(obj, suggest_keys, NULL, err);
    json_t *v = json_object_get(obj, "count");
    if (rc == GP_OK && v) {
        rc = gp_json_get_uint(v, "count", GP_STUDY_MAX_COUNT, &a->count, err);
        if (rc == GP_OK && a->count < 1)
            rc = gp_error_set(err, GP_EINVAL, "count", "count must be 1 to %d",
                              GP_STUDY_MAX_COUNT);
    }
    v = json_object_get(obj, "client_id");
    if (rc || v == NULL)
        return rc;
    const char *s = json_string_value(v);
    size_t n = s ? strlen(s) : 0;
    int ok = n > 0 && n <= GP_STUDY_CLIENT_MAX;
    for (size_t i = 0; ok && i < n; i++)
        ok = (unsigned char)s[i] >= 0x20 && s[i] != 0x7f;
    if (!ok)
        return gp_error_set(err, GP_EINVAL, "client_id",
                            "client_id must be 1 to %d characters with no control character",
                            GP_STUDY_CLIENT_MAX);
    a->client_id = s;
    return GP_OK;
}

/* ---- one try ---- */

typedef struct suggestion {
    size_t q;
    double *u;              /* D x q encoded, snapped */
    const char *source;     /* "sobol" | "model" */
    const char *method;     /* the q > 1 method (the report's) */
    double acq[GP_BO_MAX_Q];
    int has_acq;
} suggestion;

/* The suggestion's seed: the study's and the revision it is computed at,
 * mixed (splitmix64), so every replica computing at one revision agrees. */
static uint64_t mix_seed(uint64_t seed, uint64_t revision)
{
    uint64_t z = seed + 0x9e3779b97f4a7c15ULL * (revision + 1);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static int sobol_points(const gp_study_config *c, const gp_study_row *row, suggestion *s,
                        gp_error *err)
{
    gp_study_space sp;
    gp_study_space_of(c, &sp);
    size_t D = gp_study_dim(c);
    int rc = gp_sobol_points(D, c->seed, row->n_trials, s->q, s->u, err);
    for (size_t j = 0; rc == GP_OK && j < s->q; j++)
        gp_bo_snap(&sp.space, s->u + j * D, s->u + j * D);
    s->source = "sobol";
    s->method = "scrambled Sobol";
    return rc;
}

static int model_points(gp_api *api, const gp_study_config *c, const gp_study_row *row,
                        const gp_study_data *d, suggestion *s, gp_error *err)
{
    gp_study_models *held = NULL;
    const gp_model *const *models = NULL;
    int rc = gp_study_models_acquire(api, row->id, row->name, c, d, &held, &models, err);
    if (rc)
        return rc;
    gp_study_space sp;
    gp_study_space_of(c, &sp);
    double limits[GP_STUDY_MAX_CONSTRAINTS];
    for (size_t k = 0; k < c->n_constraints; k++)
        limits[k] = c->constraints[k].max;
    gp_bo_problem p = {
        .space = &sp.space,
        .objective = models[0],
        .maximize = c->maximize,
        .n_constraints = c->n_constraints,
        .constraints = models + 1,
        .limits = limits,
        .X = d->X,
        .y = d->y,
        .C = c->n_constraints ? d->C : NULL,
        .n = d->n,
        .pending = d->pending,
        .n_pending = d->n_pending,
        .acquisition = (gp_acq_kind)c->acquisition,
        .beta = c->beta,
        .q = s->q,
        .seed = mix_seed(c->seed, row->revision),
        .n_starts = (size_t)c->n_starts,
        .n_raw = (size_t)c->n_raw,
        .cancel = NULL,
    };
    gp_bo_report rep;
    memset(&rep, 0, sizeof rep);
    rc = gp_bo_suggest(&p, s->u, &rep, err);
    gp_study_models_release(held);
    if (rc)
        return rc;
    s->source = "model";
    s->method = rep.method ? rep.method : "";
    s->has_acq = 1;
    memcpy(s->acq, rep.acquisition_value, sizeof s->acq);
    return GP_OK;
}

/* The trials of s as the store keeps them (parameters' JSON texts). */
static int texts_of(const gp_study_config *c, const suggestion *s, char **texts, gp_error *err)
{
    gp_study_space sp;
    gp_study_space_of(c, &sp);
    size_t D = gp_study_dim(c);
    for (size_t j = 0; j < s->q; j++) {
        double value[GP_STUDY_MAX_PARAMS];
        gp_bo_decode(&sp.space, s->u + j * D, value);
        json_t *o = gp_study_values_json(c, value);
        texts[j] = o ? json_dumps(o, GP_JSON_FLAGS) : NULL;
        json_decref(o);
        if (texts[j] == NULL)
            return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    return GP_OK;
}

/* ---- the answer ---- */

static json_t *new_trial_json(int64_t id, const char *params, const char *client, double now,
                              double expires)
{
    gp_trial_row t;
    memset(&t, 0, sizeof t);
    t.id = id;
    snprintf(t.state, sizeof t.state, "active");
    t.parameters = (char *)params;
    if (client)
        snprintf(t.client_id, sizeof t.client_id, "%s", client);
    t.created = t.updated = now;
    t.expires_at = expires;
    return gp_study_trial_json(&t);
}

static void answer(const gp_study_config *c, const suggestion *s, json_t *trials,
                   gp_response *out)
{
    json_t *o = json_object();
    if (o) {
        json_object_set(o, "trials", trials);
        json_object_set_new(o, "source", json_string(s->source));
        json_object_set_new(o, "acquisition", json_string(gp_study_acq_name(c->acquisition)));
        json_object_set_new(o, "method", json_string(s->method));
    }
    gp_json_respond(o, 200, out);
}

/* Vizier's rule: the client's active trials again, their expiry renewed;
 * 1 when it had some (answered), 0 when none. */
static int client_trials(gp_api *api, const gp_study_config *c, const gp_study_row *row,
                         const gp_trial_row *trials, size_t n, const char *client,
                         gp_response *out, gp_error *err)
{
    json_t *list = json_array();
    double expires = gp_api_wall_seconds() + c->trial_timeout_s;
    for (size_t i = 0; list && i < n; i++)
        if (strcmp(trials[i].state, "active") == 0 && strcmp(trials[i].client_id, client) == 0) {
            json_t *t = gp_study_trial_json(&trials[i]);
            json_object_set_new(t, "expires_at", gp_json_real(expires));
            json_array_append_new(list, t);
        }
    if (list == NULL || json_array_size(list) == 0) {
        json_decref(list);
        return list ? 0 : gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    int rc = gp_store_trials_renew(api->store, row->id, client, expires, NULL, err);
    if (rc == GP_OK) {
        suggestion s = {.source = "client", .method = "the client's active trials"};
        answer(c, &s, list, out);
    }
    json_decref(list);
    return rc ? rc : 1;
}

/* Insert s's trials at the snapshot's revision (GP_ECONFLICT with no field:
 * the study changed; the caller tries again) and answer them. */
static int insert(gp_api *api, const gp_request *req, const gp_study_config *c,
                  const gp_study_row *row, const suggest_args *a, const suggestion *s,
                  gp_response *out, gp_error *err)
{
    char *texts[GP_BO_MAX_Q] = {0};
    gp_trial_new tn[GP_BO_MAX_Q];
    int64_t ids[GP_BO_MAX_Q];
    int rc = texts_of(c, s, texts, err);
    for (size_t j = 0; j < s->q; j++)
        tn[j].parameters = texts[j];
    double now = gp_api_wall_seconds(), expires = now + c->trial_timeout_s;
    gp_api_origin o;
    gp_api_origin_of(req, &o);
    gp_audit_put buf;
    if (rc == GP_OK)
        rc = gp_store_trials_add(api->store, row->id, row->revision, a->client_id, tn, s->q, now,
                                 expires, gp_api_audit_put(&o, &buf, row->name, 0, 200), ids,
                                 err);
    json_t *list = rc == GP_OK ? json_array() : NULL;
    for (size_t j = 0; list && j < s->q; j++) {
        json_t *t = new_trial_json(ids[j], texts[j], a->client_id, now, expires);
        if (t && s->has_acq)
            json_object_set_new(t, "acquisition_value", gp_json_real(s->acq[j]));
        json_array_append_new(list, t);
    }
    if (rc == GP_OK)
        answer(c, s, list, out);
    json_decref(list);
    for (size_t j = 0; j < s->q; j++)
        free(texts[j]);
    return rc;
}

/* One try: 0 answered, GP_ECONFLICT (no field) to try again, else the error. */
static int try_once(gp_api *api, const char *name, const gp_request *req, const suggest_args *a,
                    gp_response *out, gp_error *err)
{
    gp_study_row row;
    gp_trial_row *trials = NULL;
    size_t n = 0;
    gp_study_config c;
    memset(&c, 0, sizeof c);
    gp_study_data d;
    memset(&d, 0, sizeof d);
    suggestion s = {.q = (size_t)a->count};
    int rc = gp_store_study_snapshot(api->store, name, &row, &trials, &n, err);
    if (rc)
        return rc;
    rc = gp_study_config_read(api, row.config, &c, err);
    if (rc == GP_OK && a->client_id &&
        (rc = client_trials(api, &c, &row, trials, n, a->client_id, out, err)) == 1)
        rc = GP_OK;
    else if (rc == GP_OK) {
        rc = gp_study_data_build(&c, trials, n, &d, err);
        if (rc == GP_OK && (s.u = calloc(gp_study_dim(&c) * s.q, sizeof *s.u)) == NULL)
            rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        if (rc == GP_OK)
            rc = d.n < c.initial_design ? sobol_points(&c, &row, &s, err)
                                        : model_points(api, &c, &row, &d, &s, err);
        if (rc == GP_OK)
            rc = insert(api, req, &c, &row, a, &s, out, err);
    }
    free(s.u);
    gp_study_data_free(&d);
    gp_study_config_free(&c);
    gp_trial_row_free_array(trials, n);
    gp_study_row_free(&row);
    return rc;
}

/* A short pause between tries, growing, so that clients racing on one
 * study spread out (a few ms; never on the first try). */
static void back_off(int attempt)
{
    long jitter = (long)(gp_api_wall_seconds() * 1e6) % 3;
    struct timespec ts = {0, (attempt * 2L + jitter) * 1000000L};
    nanosleep(&ts, NULL);
}

void gp_api_study_suggest(gp_api *api, const char *name, const gp_request *req,
                          gp_response *out)
{
    json_t *obj = NULL;
    suggest_args a;
    gp_error err;
    gp_error_clear(&err);
    int rc = gp_api_check_json(req, &err);
    if (rc == GP_OK)
        rc = gp_json_parse_body(req, &obj, &err);
    if (rc == GP_OK)
        rc = parse_args(obj, &a, &err);
    /* dead clients' trials first, so that they count no more as pending */
    if (rc == GP_OK)
        rc = gp_api_studies_expire(api, NULL, &err);
    for (int t = 0; rc == GP_OK && t < SUGGEST_TRIES; t++) {
        if (t)
            back_off(t);
        gp_error_clear(&err);
        rc = try_once(api, name, req, &a, out, &err);
        if (!(rc == GP_ECONFLICT && err.field[0] == '\0'))
            break;
        rc = t + 1 < SUGGEST_TRIES ? GP_OK : rc;
    }
    if (rc == GP_ECONFLICT && err.field[0] == '\0')
        gp_error_set(&err, GP_ECONFLICT, NULL,
                     "the study is busy: %d other writes moved it while this suggestion was "
                     "computed; retry", SUGGEST_TRIES);
    if (rc)
        gp_api_error(&err, out);
    json_decref(obj);
}
