/* The api object (configuration, store, cache, figures) and the small routes:
 * health, readiness, methods. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

void gp_api_default_config(gp_api_config *cfg)
{
    memset(cfg, 0, sizeof *cfg);
    cfg->db_path = "./gpserve.db";
    cfg->max_train_points = GP_DEFAULT_MAX_TRAIN_POINTS;
    cfg->max_points = 1000000;
    cfg->max_input_dim = 1000;
    cfg->max_covariance_points = 5000;
    cfg->max_samples = 10000;
    cfg->max_sample_values = 10000000;
    cfg->model_cache = 32;
    cfg->snapshot_interval = 10000;
    cfg->max_ranks = 16;
    cfg->dataset_quota_bytes = (uint64_t)10 << 30;
}

int gp_api_open(const gp_api_config *cfg, gp_api **out, gp_error *err)
{
    *out = NULL;
    gp_api_config def;
    gp_api_default_config(&def);
    gp_api *api = calloc(1, sizeof *api);
    if (api == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    api->cfg = cfg ? *cfg : def;
    /* Zero limits mean "the default". */
    if (api->cfg.db_path == NULL)
        api->cfg.db_path = def.db_path;
    if (api->cfg.max_train_points == 0)
        api->cfg.max_train_points = def.max_train_points;
    if (api->cfg.max_points == 0)
        api->cfg.max_points = def.max_points;
    if (api->cfg.max_ranks <= 0)
        api->cfg.max_ranks = def.max_ranks;
    if (api->cfg.max_input_dim == 0)
        api->cfg.max_input_dim = def.max_input_dim;
    if (api->cfg.max_covariance_points == 0)
        api->cfg.max_covariance_points = def.max_covariance_points;
    if (api->cfg.max_samples == 0)
        api->cfg.max_samples = def.max_samples;
    if (api->cfg.max_sample_values == 0)
        api->cfg.max_sample_values = def.max_sample_values;
    if (api->cfg.model_cache == 0)
        api->cfg.model_cache = def.model_cache;
    if (api->cfg.snapshot_interval == 0)
        api->cfg.snapshot_interval = def.snapshot_interval;
    api->db_path = strdup(api->cfg.db_path);
    api->cache = calloc(api->cfg.model_cache, sizeof *api->cache);
    if (api->db_path == NULL || api->cache == NULL) {
        free(api->db_path);
        free(api->cache);
        free(api);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    api->cfg.db_path = api->db_path;
    atomic_init(&api->variance_clamps, 0);
    atomic_init(&api->jitter_escalations, 0);
    if (pthread_mutex_init(&api->cache_lock, NULL) != 0) {
        free(api->db_path);
        free(api->cache);
        free(api);
        return gp_error_set(err, GP_EINTERNAL, NULL, "pthread_mutex_init failed");
    }
    int rc = gp_store_open(api->db_path, &api->store, err);
    if (rc == GP_OK && api->cfg.durability_normal)
        gp_store_set_durability(api->store, GP_STORE_DURABILITY_NORMAL);
    if (rc == GP_OK && (rc = gp_rows_init(api)) != GP_OK)
        gp_error_set(err, rc, NULL, "cannot make the table of resolved rows");
    if (rc == GP_OK && (rc = gp_study_engine_init(api)) != GP_OK)
        gp_error_set(err, rc, NULL, "cannot make the table of the studies' models");
    /* Without the watch the generation stays 0 and every request asks the
     * store (correct, only slower): not a reason to refuse to start. */
    if (rc == GP_OK && gp_store_watch_start(api->store, err) != GP_OK)
        gp_error_clear(err);
    if (rc) {
        gp_study_engine_destroy(api);
        gp_store_close(api->store);
        pthread_mutex_destroy(&api->cache_lock);
        free(api->db_path);
        free(api->cache);
        free(api);
        return rc;
    }
    *out = api;
    return GP_OK;
}

void gp_api_close(gp_api *api)
{
    if (api == NULL)
        return;
    gp_study_engine_destroy(api);
    gp_cache_destroy(api);
    gp_store_close(api->store);
    gp_rows_destroy(api);
    pthread_mutex_destroy(&api->cache_lock);
    free(api->cache);
    free(api->poisoned);
    free(api->db_path);
    free(api);
}

void gp_api_redact_db(const char *db, char *out, size_t size)
{
    gp_store_redact(db, out, size);
}

int gp_api_ready(gp_api *api)
{
    if (api == NULL || api->store == NULL)
        return 0;
    /* A lookup of a name no model can have: the store answers "not found"
     * when it works. */
    gp_model_meta meta;
    memset(&meta, 0, sizeof meta);
    gp_error err;
    gp_error_clear(&err);
    int rc = gp_store_meta(api->store, "-readyz-probe-", 1, &meta, &err);
    gp_model_meta_free(&meta);
    return rc == GP_OK || rc == GP_ENOTFOUND || rc == GP_EINVAL;
}

void gp_api_get_stats(gp_api *api, gp_api_stats *out)
{
    out->variance_clamps = atomic_load(&api->variance_clamps);
    out->jitter_escalations = atomic_load(&api->jitter_escalations);
    out->models_loaded = gp_cache_size(api);
    out->models_not_finite = gp_poisoned_count(api);
}

void gp_api_respond_text(gp_response *out, int status, const char *text)
{
    size_t n = strlen(text);
    free(out->body);
    out->body = malloc(n + 1);
    if (out->body == NULL) {
        out->body_len = 0;
        gp_api_fail(out, GP_ENOMEM, NULL, "out of memory");
        return;
    }
    memcpy(out->body, text, n + 1);
    out->body_len = n;
    out->status = status;
    out->content_type = "application/json";
}

void gp_api_health(gp_response *out)
{
    gp_api_respond_text(out, 200, "{\"status\":\"ok\"}");
}

void gp_api_respond_ready(gp_api *api, gp_response *out, const char *ready_body)
{
    if (gp_api_ready(api))
        gp_api_respond_text(out, 200, ready_body);
    else
        gp_api_fail(out, GP_ENOTREADY, NULL, "the model store is not answering");
}

/* Ready, and the stored versions found non-finite (poisoned.c) listed when
 * there are any: the daemon serves every other model, so it stays ready (a
 * balancer must not take every replica of one database out for one model),
 * but says which it refuses. */
void gp_api_readiness(gp_api *api, gp_response *out)
{
    if (gp_poisoned_count(api) == 0) {
        gp_api_respond_ready(api, out, "{\"status\":\"ready\"}");
        return;
    }
    json_t *o = json_pack("{s:s, s:o}", "status", "ready", "models_not_finite",
                          gp_poisoned_json(api));
    char *text = o ? json_dumps(o, GP_JSON_FLAGS) : NULL;
    json_decref(o);
    if (text)
        gp_api_respond_ready(api, out, text);
    else
        gp_api_fail(out, GP_ENOMEM, NULL, "out of memory");
    free(text);
}

/* "a|b|c" -> ["a", "b", "c"]. */
static json_t *choices_array(const char *choices)
{
    json_t *ch = json_array();
    const char *p = choices;
    while (p && *p) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        json_array_append_new(ch, json_stringn(p, n));
        p = bar ? bar + 1 : NULL;
    }
    return ch;
}

/* An object option's schema: the descriptor's JSON text parsed (the text
 * itself when it does not parse; test_api_options checks every registered
 * one does). */
static json_t *schema_json(const char *text)
{
    json_t *schema = json_loads(text ? text : "{\"type\": \"object\"}", 0, NULL);
    return schema ? schema : json_string(text);
}

static json_t *option_json(const gp_option_spec *s)
{
    static const char *const types[] = {"integer", "number", "boolean", "string", "object"};
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(s->name));
    json_object_set_new(o, "type", json_string((unsigned)s->type < sizeof types / sizeof types[0]
                                                   ? types[s->type]
                                                   : "string"));
    switch (s->type) {
    case GP_OPTION_INT:
        json_object_set_new(o, "default", json_integer((json_int_t)s->default_number));
        json_object_set_new(o, "min", json_integer((json_int_t)s->min));
        json_object_set_new(o, "max", json_integer((json_int_t)s->max));
        break;
    case GP_OPTION_NUMBER: /* a keyword default (default_string) wins over the number */
        json_object_set_new(o, "default", s->default_string ? json_string(s->default_string)
                                                            : gp_json_real(s->default_number));
        json_object_set_new(o, "min", gp_json_real(s->min));
        json_object_set_new(o, "max", gp_json_real(s->max));
        if (s->choices)
            json_object_set_new(o, "keywords", choices_array(s->choices));
        break;
    case GP_OPTION_BOOL:
        json_object_set_new(o, "default", json_boolean(s->default_number != 0.0));
        break;
    case GP_OPTION_ENUM: {
        json_object_set_new(o, "default",
                            s->default_string ? json_string(s->default_string) : json_null());
        json_object_set_new(o, "choices", choices_array(s->choices));
        break;
    }
    case GP_OPTION_OBJECT: {
        /* no default value (absent: the method's documented default) */
        json_object_set_new(o, "default", json_null());
        json_object_set_new(o, "schema", schema_json(s->choices));
        break;
    }
    }
    json_object_set_new(o, "help", json_string(s->help ? s->help : ""));
    return o;
}

/* The descriptor's `quick` preset: {option: value}, integers for INT options. */
static json_t *quick_json(const gp_method *m)
{
    json_t *q = json_object();
    for (size_t i = 0; q && i < m->n_quick; i++) {
        const gp_option_setting *v = &m->quick[i];
        const gp_option_spec *s = gp_method_option_spec(m, v->name);
        json_t *x = s && s->type == GP_OPTION_INT ? json_integer((json_int_t)v->number)
                                                  : gp_json_real(v->number);
        json_object_set_new(q, v->name, x);
    }
    return q;
}

/* The kernel types m accepts, sum and product included when it takes them. */
static json_t *kernels_json(const gp_method *m)
{
    json_t *ks = json_array();
    for (int t = 0; t < GP_KERNEL_TYPE_COUNT; t++)
        if (gp_method_accepts_kernel_type(m, (gp_kernel_type)t))
            json_array_append_new(ks, json_string(gp_kernel_type_name((gp_kernel_type)t)));
    return ks;
}

/* The likelihoods m fits, in the catalogue's order. */
static json_t *likelihoods_json(const gp_method *m)
{
    json_t *ls = json_array();
    for (int l = 0; l < GP_LIK_COUNT; l++)
        if (gp_method_accepts_likelihood(m, (gp_likelihood)l))
            json_array_append_new(ls, json_string(gp_likelihood_name((gp_likelihood)l)));
    return ls;
}

static json_t *info_json(const gp_method *m)
{
    json_t *list = json_array();
    for (size_t i = 0; i < m->n_info; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "key", json_string(m->info[i].key));
        json_object_set_new(o, "type",
                            json_string(m->info[i].type == GP_INFO_STRING ? "string" : "number"));
        json_object_set_new(o, "help", json_string(m->info[i].help));
        json_array_append_new(list, o);
    }
    return list;
}

/* Which options make up the iteration budget a job's progress counts to. */
static json_t *progress_json(const gp_method *m)
{
    json_t *o = json_object();
    json_object_set_new(o, "iterations_option",
                        m->iterations_option ? json_string(m->iterations_option) : json_null());
    json_object_set_new(o, "restarts_option",
                        m->restarts_option ? json_string(m->restarts_option) : json_null());
    return o;
}

static json_t *method_json(const gp_method *m)
{
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(m->name));
    json_object_set_new(o, "summary", json_string(m->summary ? m->summary : ""));
    json_object_set_new(o, "objective", json_string(m->objective_name ? m->objective_name : ""));
    json_object_set_new(o, "kernels", kernels_json(m));
    json_object_set_new(o, "likelihoods", likelihoods_json(m));
    json_object_set_new(o, "mixture", json_boolean(gp_method_is_mixture(m)));
    json_object_set_new(o, "additive", json_boolean(gp_method_has_parts(m)));
    /* online learning: observe, the gate, several outputs, the input kinds */
    json_object_set_new(o, "online", json_boolean(gp_method_can_observe(m)));
    json_object_set_new(o, "gate", json_boolean(gp_method_has_gate(m)));
    json_object_set_new(o, "multi_output", json_boolean(m->multi_output != 0));
    /* known per-point noise in a fit (noise.per_point) */
    json_object_set_new(o, "per_point_noise", json_boolean(m->per_point_noise != 0));
    json_object_set_new(o, "streams_rows", json_boolean(m->streams_rows != 0));
    /* priors, bounds and single held hyperparameters in the kernel JSON */
    json_object_set_new(o, "hyper_priors", json_boolean(m->hyper_priors != 0));
    /* a constant or linear mean in a fit ("mean": {"type": ...}) */
    json_object_set_new(o, "mean_functions", json_boolean(m->mean_functions != 0));
    json_t *kinds = json_array();
    for (int k = 0; kinds && k < GP_INPUT_KIND_COUNT; k++)
        if (k == GP_INPUT_POINT || (m->input_kinds & (1u << k)))
            json_array_append_new(kinds, json_string(gp_input_kind_name((gp_input_kind)k)));
    json_object_set_new(o, "inputs", kinds ? kinds : json_null());
    json_object_set_new(o, "progress", progress_json(m));
    json_t *opts = json_array();
    for (size_t k = 0; k < m->n_options; k++)
        json_array_append_new(opts, option_json(&m->options[k]));
    json_object_set_new(o, "options", opts);
    json_object_set_new(o, "quick", quick_json(m));
    json_object_set_new(o, "method_info", info_json(m));
    return o;
}

void gp_api_methods(gp_api *api, gp_response *out)
{
    (void)api;
    json_t *list = json_array();
    for (size_t i = 0; i < gp_method_count(); i++)
        json_array_append_new(list, method_json(gp_method_at(i)));
    json_t *root = json_object();
    json_object_set_new(root, "methods", list);
    gp_json_respond(root, 200, out);
}

int gp_api_backup(const char *db, const char *out_file, gp_error *err)
{
    return gp_store_sqlite_backup(db, out_file, err);
}

int gp_api_restore(const char *db, const char *from_file, gp_error *err)
{
    return gp_store_sqlite_restore(db, from_file, err);
}
