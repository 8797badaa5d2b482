/* Fitted models' metadata routes: GET /v1/models/{name} (with what an
 * online model reports about itself), the list, and DELETE; and the model
 * JSON of a store row that the fit routes answer too. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api/cache.h"

json_t *gp_api_model_json(const gp_model_meta *meta, const int *versions, size_t n_versions,
                          gp_error *err)
{
    json_error_t je;
    json_t *info = meta->info ? json_loads(meta->info, 0, &je) : NULL;
    if (!json_is_object(info)) {
        json_decref(info);
        gp_error_set(err, GP_EINTERNAL, NULL, "model '%s' version %d has corrupt metadata",
                     meta->name, meta->version);
        return NULL;
    }
    json_t *o = json_object();
    if (o == NULL) {
        json_decref(info);
        gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    json_object_set_new(o, "name", json_string(meta->name));
    json_object_set_new(o, "version", json_integer(meta->version));
    json_object_set_new(o, "method", json_string(meta->method));
    json_object_set_new(o, "status", json_string("ready"));
    json_object_set_new(o, "n_train", json_integer((json_int_t)meta->n_train));
    json_object_set_new(o, "input_dim", json_integer((json_int_t)meta->input_dim));
    json_object_update(o, info);
    json_decref(info);
    json_object_set_new(o, "created_at", json_string(meta->created_at));
    if (versions) {
        json_t *vs = json_array();
        for (size_t i = 0; i < n_versions; i++)
            json_array_append_new(vs, json_integer(versions[i]));
        json_object_set_new(o, "versions", vs);
    }
    return o;
}

static json_t *real_list(const double *v, size_t p)
{
    if (p == 1)
        return gp_json_real(v[0]);
    json_t *a = json_array();
    for (size_t j = 0; a && j < p; j++)
        json_array_append_new(a, gp_json_real(v[j]));
    return a;
}

/* "online": what a model that learns online reports about itself: the rows
 * it holds (*n), its state, the log entries applied and, for a gate model,
 * the threshold and the oracle rate over the last predicted points. NULL on
 * failure (err says why). */
static json_t *online_status(gp_api *api, const char *name, int version, size_t *n,
                             gp_error *err)
{
    gp_cache_entry *e = NULL;
    const gp_model *model = NULL;
    if (gp_cache_acquire(api, name, version, &e, &model, err))
        return NULL;
    gp_online_status st;
    gp_model_online_status(model, &st);
    json_t *on = json_object();
    if (on == NULL) {
        gp_cache_release(api, e);
        gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    json_object_set_new(on, "n", json_integer((json_int_t)st.n));
    json_object_set_new(on, "state", json_string(st.warmup ? "warmup" : "online"));
    json_object_set_new(on, "observations", json_integer((json_int_t)e->seq));
    *n = st.n;
    if (gp_method_has_gate(model->method)) {
        size_t window = 0;
        double rate = NAN;
        gp_cache_gate_rate(e, &window, &rate);
        if (st.warmup)
            json_object_set_new(on, "warmup_target", json_integer((json_int_t)st.warmup_target));
        json_object_set_new(on, "oracle_threshold", st.has_threshold
                                                         ? real_list(st.threshold, model->n_outputs)
                                                         : json_null());
        json_object_set_new(on, "gate_kappa", isfinite(st.kappa) ? gp_json_real(st.kappa)
                                                                  : json_null());
        json_object_set_new(on, "always_asks", json_boolean(st.always_asks));
        json_object_set_new(on, "oracle_rate", window ? gp_json_real(rate) : json_null());
        json_object_set_new(on, "oracle_window", json_integer((json_int_t)window));
    }
    gp_cache_release(api, e);
    return on;
}

static int add_online_status(gp_api *api, const char *name, int version, json_t *o,
                             gp_error *err)
{
    size_t n = 0;
    json_t *on = online_status(api, name, version, &n, err);
    if (on == NULL)
        return err->code ? err->code : GP_EINTERNAL;
    json_object_set_new(o, "n_train", json_integer((json_int_t)n));
    json_object_set_new(o, "online", on);
    return GP_OK;
}

/* ---- the GET body kept while the store's generation stands (rows.c) ----
 * Rendering a model's JSON (parsing its stored info, writing every number)
 * is most of a GET: the text is kept, cut around n_train's value, which an
 * online model changes with every observation, as "online" (appended last)
 * does; those two are written fresh for each request. A poisoned version is
 * described by the slow path. */

/* n_train's value while the text is rendered for keeping, found with its
 * key (a name cannot hold a quote or a colon, so only the key matches). */
#define NTRAIN_MARK 9007199254740777LL
#define NTRAIN_KEY "\"n_train\":"
#define NTRAIN_MARK_TEXT NTRAIN_KEY "9007199254740777"

static void keep_body(gp_api *api, const char *name, int version, uint64_t gen, json_t *o,
                      const gp_model_meta *meta)
{
    json_t *n = json_object_get(o, "n_train");
    if (gen == 0 || n == NULL)
        return;
    json_incref(n);
    json_object_set_new(o, "n_train", json_integer(NTRAIN_MARK));
    char *text = json_dumps(o, GP_JSON_FLAGS);
    json_object_set_new(o, "n_train", n);
    char *at = text ? strstr(text, NTRAIN_MARK_TEXT) : NULL;
    if (at)
        at += strlen(NTRAIN_KEY);
    size_t len = text ? strlen(text) : 0;
    if (at && len > 1 && text[len - 1] == '}') {
        /* head (up to the value), NUL, tail (after it, without the '}'), NUL */
        const char *tail = at + strlen(NTRAIN_MARK_TEXT) - strlen(NTRAIN_KEY);
        size_t tail_len = (size_t)(text + len - 1 - tail);
        memmove(at + 1, tail, tail_len);
        at[0] = '\0';
        at[1 + tail_len] = '\0';
        gp_rows_body_keep(api, name, version, gen, meta, text, (size_t)(at - text),
                          (size_t)(at - text) + tail_len + 2);
    }
    free(text);
}

/* Answer from the kept text: 1 when done, 0 to take the slow path. */
static int respond_kept(gp_api *api, const char *name, int version, uint64_t gen,
                        gp_response *out)
{
    gp_model_meta meta;
    char *text = NULL;
    size_t head_len = 0;
    if (!gp_rows_body(api, name, version, gen, &meta, &text, &head_len))
        return 0;
    gp_error err;
    gp_error_clear(&err);
    size_t n = meta.n_train;
    json_t *on = NULL;
    const gp_method *method = gp_method_find(meta.method);
    int ok = gp_poisoned_check(api, &meta, &err) == GP_OK;
    if (ok && method && gp_method_can_observe(method))
        ok = (on = online_status(api, name, meta.version, &n, &err)) != NULL;
    char *on_text = on ? json_dumps(on, GP_JSON_FLAGS) : NULL;
    json_decref(on);
    if (ok && on && on_text == NULL)
        ok = 0;
    if (ok) {
        gp_buf b;
        gp_buf_init(&b);
        gp_buf_puts(&b, text);
        gp_buf_printf(&b, "%zu", n);
        gp_buf_puts(&b, text + head_len + 1);
        if (on_text) {
            gp_buf_puts(&b, ",\"online\":");
            gp_buf_puts(&b, on_text);
        }
        gp_buf_put(&b, "}", 1);
        gp_buf_respond(&b, 200, out);
    }
    free(on_text);
    free(text);
    gp_model_meta_free(&meta);
    return ok;
}

/* A version found non-finite (now, or by an earlier request) is described
 * rather than refused: "status": "not_finite" and the reason. */
static int report_poisoned(gp_api *api, const gp_model_meta *meta, json_t *o, int rc,
                           gp_error *err)
{
    if (rc == GP_OK && gp_poisoned_check(api, meta, err) == GP_OK)
        return GP_OK;
    json_object_set_new(o, "status", json_string("not_finite"));
    json_object_set_new(o, "error", json_pack("{s:s, s:s}", "code", "model_not_finite",
                                              "message", err->message));
    gp_error_clear(err);
    return GP_OK;
}

void gp_api_get_model(gp_api *api, const char *name, int version, gp_response *out)
{
    gp_error err;
    gp_error_clear(&err);
    gp_model_meta meta;
    memset(&meta, 0, sizeof meta);
    int *versions = NULL;
    size_t nv = 0;
    int rc = gp_api_check_name(name, &err);
    if (rc == GP_OK && version < 0)
        rc = gp_error_set(&err, GP_EINVAL, "version", "version must be an integer >= 1");
    /* read before anything is: a write meanwhile moves it past what is kept */
    const uint64_t gen = gp_store_generation(api->store);
    if (rc == GP_OK && respond_kept(api, name, version, gen, out))
        return;
    if (rc == GP_OK)
        rc = gp_rows_meta(api, name, version, 1, &meta, &err);
    if (rc == GP_OK && version == 0)
        rc = gp_rows_versions(api, name, &versions, &nv, &err);
    json_t *o = NULL;
    if (rc == GP_OK) {
        /* versions != NULL asks for the list even when empty */
        static const int none[1] = {0};
        o = gp_api_model_json(&meta, version == 0 ? (versions ? versions : none) : NULL,
                              version == 0 ? nv : 0, &err);
        if (o == NULL)
            rc = err.code;
    }
    free(versions);
    if (rc == GP_OK) { /* the model's labels, on every version's page */
        json_t *aliases = gp_api_aliases_object(api, name, &err);
        rc = aliases ? json_object_set_new(o, "aliases", aliases), GP_OK : err.code;
    }
    if (rc == GP_OK)
        keep_body(api, name, version, gen, o, &meta);
    const gp_method *method = rc == GP_OK ? gp_method_find(meta.method) : NULL;
    if (method && gp_method_can_observe(method))
        rc = add_online_status(api, name, meta.version, o, &err);
    if (rc == GP_OK || rc == GP_ENONFINITE)
        rc = report_poisoned(api, &meta, o, rc, &err);
    gp_model_meta_free(&meta);
    if (rc) {
        json_decref(o);
        gp_api_error(&err, out);
    } else
        gp_json_respond(o, 200, out);
}

void gp_api_list_models(gp_api *api, gp_model_visible_fn visible, const void *ctx,
                        gp_response *out)
{
    gp_error err;
    gp_error_clear(&err);
    gp_model_meta *metas = NULL;
    size_t n = 0;
    int rc = gp_store_list(api->store, &metas, &n, &err);
    if (rc) {
        gp_api_error(&err, out);
        return;
    }
    gp_buf b;
    gp_buf_init(&b);
    gp_buf_puts(&b, "{\"models\":[");
    size_t shown = 0;
    for (size_t i = 0; i < n; i++) {
        const gp_model_meta *m = &metas[i];
        if (visible && !visible(m->name, ctx))
            continue;
        if (shown++)
            gp_buf_put(&b, ",", 1);
        gp_buf_puts(&b, "{\"name\":");
        gp_buf_json_string(&b, m->name);
        gp_buf_printf(&b, ",\"version\":%d,\"method\":", m->version);
        gp_buf_json_string(&b, m->method);
        gp_buf_printf(&b, ",\"n_train\":%zu,\"input_dim\":%zu,\"created_at\":", m->n_train,
                      m->input_dim);
        gp_buf_json_string(&b, m->created_at);
        gp_buf_put(&b, "}", 1);
    }
    gp_buf_puts(&b, "]}");
    gp_model_meta_free_array(metas, n);
    gp_buf_respond(&b, 200, out);
}

/* 204: no body (the answer of a delete). */
static void respond_deleted(gp_response *out)
{
    free(out->body);
    out->body = NULL;
    out->body_len = 0;
    out->status = 204;
    out->content_type = "application/json";
}

/* The answer of a delete (rc from the store): 204, the name's cache entries
 * gone at once on this daemon (other daemons' through the change
 * generation); else the error. */
static void answer_delete(gp_api *api, const char *name, int rc, const gp_error *err,
                          gp_response *out)
{
    if (rc) {
        gp_api_error(err, out);
        return;
    }
    gp_cache_evict_name(api, name);
    gp_poisoned_forget(api, name);
    respond_deleted(out);
}

void gp_api_delete_version(gp_api *api, const char *name, int version, const gp_request *req,
                           gp_response *out)
{
    gp_error err;
    gp_error_clear(&err);
    gp_api_origin origin;
    gp_api_origin_of(req, &origin);
    gp_audit_put audit;
    const gp_audit_put *a = gp_api_audit_put(&origin, &audit, name, version, 204);
    int rc = gp_api_check_name(name, &err);
    if (rc == GP_OK)
        rc = gp_store_delete_version_audited(api->store, name, version, a, &err);
    /* the other versions load again on use */
    answer_delete(api, name, rc, &err, out);
}

void gp_api_delete_model(gp_api *api, const char *name, const gp_request *req, gp_response *out)
{
    gp_error err;
    gp_error_clear(&err);
    gp_api_origin origin;
    gp_api_origin_of(req, &origin);
    gp_audit_put audit;
    const gp_audit_put *a = gp_api_audit_put(&origin, &audit, name, 0, 204);
    gp_model_meta meta;
    memset(&meta, 0, sizeof meta);
    int rc = gp_api_check_name(name, &err);
    /* the store may treat deleting nothing as success: 404 it here */
    if (rc == GP_OK)
        rc = gp_store_meta_brief(api->store, name, 0, &meta, &err);
    gp_model_meta_free(&meta);
    if (rc == GP_OK)
        rc = gp_store_delete_audited(api->store, name, a, &err);
    answer_delete(api, name, rc, &err, out);
}
