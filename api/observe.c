/* Observe: POST /v1/models/{name}/observe, a batch of rows applied to a
 * model that learns online (in place, logged in the store's observation log
 * and snapshotted now and then), or saved as a new version. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/cache.h"

/* Seconds of updates since the last snapshot after which the next observe
 * writes one: a load replays about this long at most, whatever the method's
 * cost per row (bench/results/online.md measured 7 s for 10,000 entries of a
 * two-stage rfgp before this bound). */
#define SNAPSHOT_REPLAY_SECONDS 0.5

static const char *const observe_keys[] = {"X", "rows", "y", "noise", "version", "new_version", NULL};

typedef struct observe_body {
    json_t *obj;
    json_t *Xj, *rows; /* X, or the named rows (into obj) */
    int version, new_version;
    char alias[GP_ALIAS_MAX + 1]; /* the alias "version" named, or "" */
    double *X, *Y;
    double *noise; /* k known noise variances (NULL: none); the model checks them */
    size_t k, d, p;
    gp_api_origin origin; /* who asked (the audit row written with the entry) */
} observe_body;

static void observe_body_free(observe_body *ob)
{
    json_decref(ob->obj);
    free(ob->X);
    free(ob->Y);
    free(ob->noise);
}

static int parse_observe(gp_api *api, const char *name, const gp_request *req, observe_body *ob,
                         gp_error *err)
{
    json_t *e;
    int rc = gp_api_body_object(api, req, &ob->obj, err);
    if (rc == GP_OK)
        rc = gp_json_known_keys(ob->obj, observe_keys, NULL, err);
    if (rc == GP_OK)
        rc = gp_api_get_version(api, name, ob->obj, &ob->version, ob->alias, err);
    if (rc == GP_OK && (e = json_object_get(ob->obj, "new_version")))
        rc = gp_json_get_bool(e, "new_version", &ob->new_version, err);
    if (rc == GP_OK)
        rc = gp_api_x_or_rows(ob->obj, "the inputs observed", &ob->Xj, &ob->rows, err);
    /* named rows may carry the targets too (by their target_names) */
    if (rc == GP_OK && ob->rows == NULL && json_object_get(ob->obj, "y") == NULL)
        rc = gp_error_set(err, GP_EINVAL, "y", "y (the targets observed) is missing");
    if (rc == GP_OK && ob->Xj)
        rc = gp_api_parse_x_early(api, ob->Xj, &ob->X, &ob->k, &ob->d, err);
    return rc;
}

/* y of named rows without "y": each row's targets, by the model's target_names. */
static int row_targets(const gp_cache_entry *e, const char *name, observe_body *ob,
                       size_t *ny, gp_error *err)
{
    if (e->targets == NULL)
        return gp_error_set(err, GP_EINVAL, "y", "y (the targets observed) is missing, and "
                            "model '%s' has no target_names to find them in the rows", name);
    *ny = json_array_size(ob->rows);
    return gp_api_record_targets(ob->rows, e->targets, &ob->Y, &ob->p, err);
}

/* X and y against the model: the input kind and width, the output count. */
static int observe_data(gp_api *api, const gp_cache_entry *entry, const gp_model *model,
                        const char *name, observe_body *ob, gp_error *err)
{
    size_t ny = 0;
    gp_x_names nm = {ob->rows, entry->features, entry->targets};
    int rc = gp_api_parse_x_late(api, model, name, ob->Xj, &nm, &ob->X, &ob->k, &ob->d, err);
    /* a coregionalised model takes rows with missing outputs (null, NaN in core) */
    json_t *yj = json_object_get(ob->obj, "y");
    int coreg = model->coreg.type != GP_COREG_NONE;
    if (rc == GP_OK && yj == NULL)
        rc = row_targets(entry, name, ob, &ny, err);
    else if (rc == GP_OK && coreg)
        rc = gp_json_targets_missing(yj, api->cfg.max_points, 1, &ob->Y, &ny, &ob->p, err);
    else if (rc == GP_OK && (rc = gp_json_targets_null(yj, err)) == GP_OK)
        rc = gp_json_targets(yj, "y", api->cfg.max_points, gp_api_target_columns(model) > 1,
                             &ob->Y, &ny, &ob->p, err);
    if (rc == GP_OK && ny != ob->k)
        rc = gp_error_set(err, GP_EDATA, "y", "y has %zu rows; X has %zu", ny, ob->k);
    if (rc == GP_OK && ob->p != gp_api_target_columns(model))
        rc = gp_error_set(err, GP_EDATA, "y[0]", "y[0] has %zu outputs; model '%s' has %zu",
                          ob->p, name, gp_api_target_columns(model));
    if (rc == GP_OK && coreg)
        rc = gp_api_check_targets(ob->Y, ob->k, ob->p, 1, 1, NULL, err);
    json_t *e = rc == GP_OK ? json_object_get(ob->obj, "noise") : NULL;
    size_t nn = 0;
    if (e && (rc = gp_json_vector(e, "noise", api->cfg.max_points, &ob->noise, &nn, err)) ==
                 GP_OK && nn != ob->k)
        rc = gp_error_set(err, GP_EDATA, "noise", "noise has %zu entries; X has %zu rows", nn,
                          ob->k);
    return rc;
}

static void respond_observed(gp_buf *b, const char *name, int version, const char *alias,
                             const gp_model *model, uint64_t seq)
{
    gp_online_status st;
    gp_model_online_status(model, &st);
    gp_api_write_head(b, name, version);
    gp_api_write_alias(b, alias);
    gp_buf_printf(b, ",\"n\":%zu,\"state\":\"%s\",\"observations\":%llu}", st.n,
                  st.warmup ? "warmup" : "online", (unsigned long long)seq);
}

/* When the log since the last snapshot outweighs the state, or holds more
 * entries than the configured interval, the next entry carries a snapshot:
 * the store's bytes stay within twice the log, and a load replays a bounded
 * number of entries. */
static int snapshot_due(const gp_api *api, const gp_cache_entry *e)
{
    return e->since_snapshot + 1 >= api->cfg.snapshot_interval ||
           (e->state_bytes > 0 && e->logged_bytes >= e->state_bytes) ||
           e->apply_seconds >= SNAPSHOT_REPLAY_SECONDS;
}


/* Apply the batch to the cached model and log it, under the entry's locks:
 * the model changes and the entry is written in one step as readers see it;
 * if the store refuses the entry the model is discarded (the next request
 * reloads the store's version), so an unacknowledged batch is never served
 * again. */
static int observe_in_place(gp_api *api, gp_cache_entry *e, const observe_body *ob,
                            const gp_api_idem *key, uint64_t *seq, uint64_t *ticket,
                            gp_error *err)
{
    gp_buf answer; /* a keyed observe's answer, recorded with the entry */
    gp_buf_init(&answer);
    gp_named_array arrays[3];
    gp_state batch, snap;
    gp_api_xy_state(ob->X, ob->Y, ob->k, ob->d, ob->p, arrays, &batch);
    if (ob->noise) /* logged with its rows: a replay observes them alike */
        gp_api_noise_array(ob->noise, ob->k, &arrays[2], &batch);
    gp_state_init(&snap);
    pthread_rwlock_wrlock(&e->lock);
    int rc = e->stale ? gp_error_set(err, GP_ECONFLICT, NULL, "stale") : GP_OK;
    double t0 = gp_cache_seconds_now();
    if (rc == GP_OK)
        rc = gp_model_observe_noise(e->model, ob->X, ob->Y, ob->noise, ob->k, err);
    double took = gp_cache_seconds_now() - t0;
    int applied = rc == GP_OK, due = applied && snapshot_due(api, e);
    if (due)
        rc = gp_model_export(e->model, &snap, err);
    gp_online_status st;
    gp_model_online_status(e->model, &st);
    if (rc == GP_OK && key->present) {
        respond_observed(&answer, e->name, e->version, ob->alias, e->model, e->seq + 1);
        if (answer.failed)
            rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory building the response");
    }
    gp_idem_put idem = gp_api_idem_put(key, 200, answer.data, NULL, NULL);
    gp_audit_put audit;
    const gp_audit_put *a = gp_api_audit_put(&ob->origin, &audit, e->name, e->version, 200);
    if (rc == GP_OK)
        rc = gp_store_observe_audited(api->store, e->id, e->seq, &batch, st.n,
                                      due ? &snap : NULL, key->present ? &idem : NULL, a, seq,
                                      ticket, err);
    if (rc == GP_OK) {
        e->seq = *seq;
        e->since_snapshot = due ? 0 : e->since_snapshot + 1;
        e->logged_bytes = due ? 0
                              : e->logged_bytes + ob->k * (ob->d + ob->p + (ob->noise != NULL)) *
                                                      sizeof(double);
        e->apply_seconds = due ? 0.0 : e->apply_seconds + took;
        if (due)
            e->state_bytes = gp_cache_state_bytes(&snap);
    } else if (applied)
        gp_cache_entry_discard(api, e); /* e->stale: readers waiting on the lock retry */
    pthread_rwlock_unlock(&e->lock);
    gp_state_free(&snap);
    gp_buf_free(&answer);
    return rc;
}

/* The answer of a keyed observe with "new_version", made from the new row. */
typedef struct new_version_answer {
    const gp_model *model;
} new_version_answer;

static char *new_version_body(const gp_model_meta *meta, void *ctx)
{
    const new_version_answer *a = ctx;
    gp_buf b;
    gp_buf_init(&b);
    respond_observed(&b, meta->name, meta->version, NULL, a->model, 0);
    if (b.failed) {
        gp_buf_free(&b);
        return NULL;
    }
    return b.data;
}

/* "new_version": true: the model with the batch becomes a new version; the
 * version observed stays as it was. */
static int observe_new_version(gp_api *api, gp_cache_entry *e, const observe_body *ob,
                               const gp_api_idem *key, gp_buf *b, gp_error *err)
{
    gp_model_meta old, saved;
    memset(&old, 0, sizeof old);
    memset(&saved, 0, sizeof saved);
    gp_state st;
    gp_state_init(&st);
    gp_model *copy = NULL;
    pthread_rwlock_rdlock(&e->lock);
    int rc = gp_model_export(e->model, &st, err);
    pthread_rwlock_unlock(&e->lock);
    if (rc == GP_OK)
        rc = gp_model_import(e->model->method, &st, &copy, err);
    gp_state_free(&st);
    gp_state_init(&st);
    if (rc == GP_OK)
        rc = gp_model_observe_noise(copy, ob->X, ob->Y, ob->noise, ob->k, err);
    if (rc == GP_OK)
        rc = gp_store_meta(api->store, e->name, e->version, &old, err);
    if (rc == GP_OK)
        rc = gp_model_export(copy, &st, err);
    new_version_answer answer = {copy};
    gp_idem_put idem = gp_api_idem_put(key, 200, NULL, new_version_body, &answer);
    gp_audit_put audit; /* version 0: the store records the one it made */
    const gp_audit_put *a = gp_api_audit_put(&ob->origin, &audit, e->name, 0, 200);
    if (rc == GP_OK)
        rc = gp_store_save_audited(api->store, e->name, old.method, old.spec, old.info,
                                   copy->n_train, copy->input_dim, &st, NULL,
                                   key->present ? &idem : NULL, a, &saved, err);
    gp_state_free(&st);
    gp_model_meta_free(&old);
    if (rc == GP_OK) {
        respond_observed(b, e->name, saved.version, NULL, copy, 0);
        gp_cache_insert(api, &saved, copy); /* the cache owns it from here */
        copy = NULL;
    }
    gp_model_meta_free(&saved);
    gp_model_free(copy);
    return rc;
}

/* ticket NULL: the answer waits here for the batch to be on disk; else
 * *ticket gets the commit the caller must see synced (gp_api_wait_durable)
 * before it answers, 0 for none. */
static int do_observe(gp_api *api, const char *name, observe_body *ob, const gp_api_idem *key,
                      gp_buf *b, uint64_t *ticket_out, gp_error *err)
{
    for (int tries = 0;; tries++) {
        gp_cache_entry *e = NULL;
        int rc = gp_cache_entry_acquire(api, name, ob->version, &e, NULL, err);
        if (rc)
            return rc;
        const gp_model *model = e->model; /* method, spec and outputs never change */
        if (!gp_method_can_observe(model->method))
            rc = gp_error_set(err, GP_EUNSUPPORTED, NULL,
                              "method '%s' does not update online: fit a new version with all "
                              "the data instead",
                              model->method->name);
        if (rc == GP_OK && ob->Y == NULL)
            rc = observe_data(api, e, model, name, ob, err);
        uint64_t seq = 0, ticket = 0;
        if (rc == GP_OK && ob->new_version) {
            pthread_mutex_lock(&e->write_lock);
            rc = observe_new_version(api, e, ob, key, b, err);
            pthread_mutex_unlock(&e->write_lock);
        } else if (rc == GP_OK) {
            pthread_mutex_lock(&e->write_lock);
            rc = observe_in_place(api, e, ob, key, &seq, &ticket, err);
            if (rc == GP_OK) {
                pthread_rwlock_rdlock(&e->lock);
                respond_observed(b, name, e->version, ob->alias, e->model, seq);
                pthread_rwlock_unlock(&e->lock);
            }
            pthread_mutex_unlock(&e->write_lock);
            /* On disk before the answer, waited for without the model's
             * locks (here, or by the caller without even a request thread):
             * the observes that commit meanwhile share the sync. */
            if (rc == GP_OK && ticket_out)
                *ticket_out = ticket;
            else if (rc == GP_OK)
                rc = gp_store_wait_durable(api->store, ticket, err);
        }
        gp_cache_entry_unref(api, e);
        /* another daemon appended first (or our entry went stale): reload, retry;
         * not when a retry with our key recorded first (it is answered instead) */
        if (rc != GP_ECONFLICT || gp_api_key_taken(err) || tries + 1 >= GP_CACHE_TRIES)
            return rc;
        gp_error_clear(err);
    }
}

void gp_api_observe(gp_api *api, const char *name, const gp_request *req, gp_response *out)
{
    gp_api_observe_deferred(api, name, req, out, NULL);
}

int gp_api_wait_durable(gp_api *api, uint64_t ticket, gp_error *err)
{
    return gp_store_wait_durable(api->store, ticket, err);
}

void gp_api_observe_deferred(gp_api *api, const char *name, const gp_request *req,
                             gp_response *out, uint64_t *ticket)
{
    if (ticket)
        *ticket = 0;
    gp_error err;
    gp_error_clear(&err);
    observe_body ob;
    memset(&ob, 0, sizeof ob);
    gp_api_origin_of(req, &ob.origin);
    gp_buf b;
    gp_buf_init(&b);
    gp_api_idem key;
    int rc = gp_api_check_name(name, &err);
    if (rc == GP_OK)
        rc = gp_api_idem_parse(req, "observe", name, &key, &err);
    /* A retry of a keyed observe: the first answer again, nothing applied. */
    if (rc == GP_OK && gp_api_idem_replay(api, &key, out))
        return;
    if (rc == GP_OK)
        rc = parse_observe(api, name, req, &ob, &err);
    if (rc == GP_OK)
        rc = do_observe(api, name, &ob, &key, &b, ticket, &err);
    observe_body_free(&ob);
    /* A retry with the key ran beside this one and was applied first. */
    if (rc && gp_api_key_taken(&err) && gp_api_idem_replay(api, &key, out)) {
        gp_buf_free(&b);
        return;
    }
    if (rc) {
        gp_buf_free(&b);
        gp_api_error(&err, out);
    } else
        gp_buf_respond(&b, 200, out);
}
