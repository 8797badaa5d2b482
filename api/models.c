/* Fitted models: the LRU cache of loaded models, and the routes that read
 * them (predict, sample, get, list, delete, observe).
 *
 * The cache is keyed by the store row (name, version, row id, created_at), so
 * a model deleted and fitted again under the same name and version is never
 * confused with the old one. Entries are reference counted: eviction takes an
 * entry out of the table at once, and the model is freed when its last user
 * releases it. Every request asks the store for the row first (version 0: the
 * latest), so versions written by another daemon on the same database are
 * served, and a model deleted by another daemon is not. */
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "core/base/rng.h"

#define MAX_QUANTILES 100

struct gp_cache_entry {
    char name[GP_NAME_MAX + 1];
    int version;
    int64_t id;
    char created_at[GP_TIME_LEN];
    gp_model *model;
    int refs;
    int detached; /* out of the table; freed by the last release */
    uint64_t stamp;
};

static void entry_free(gp_cache_entry *e)
{
    gp_model_free(e->model);
    free(e);
}

static int entry_matches(const gp_cache_entry *e, const gp_model_meta *meta)
{
    return e->id == meta->id && e->version == meta->version &&
           strcmp(e->name, meta->name) == 0 && strcmp(e->created_at, meta->created_at) == 0;
}

/* Take slot i out of the table (lock held). */
static void detach_slot(gp_api *api, size_t i)
{
    gp_cache_entry *e = api->cache[i];
    api->cache[i] = NULL;
    api->cache_count--;
    if (e->refs == 0)
        entry_free(e);
    else
        e->detached = 1;
}

static gp_cache_entry *find_locked(gp_api *api, const gp_model_meta *meta)
{
    for (size_t i = 0; i < api->cfg.model_cache; i++)
        if (api->cache[i] && entry_matches(api->cache[i], meta))
            return api->cache[i];
    return NULL;
}

/* Put e in the table, evicting the least recently used entry when full. */
static void insert_locked(gp_api *api, gp_cache_entry *e)
{
    size_t free_slot = SIZE_MAX, lru = SIZE_MAX;
    for (size_t i = 0; i < api->cfg.model_cache; i++) {
        if (api->cache[i] == NULL) {
            if (free_slot == SIZE_MAX)
                free_slot = i;
        } else if (lru == SIZE_MAX || api->cache[i]->stamp < api->cache[lru]->stamp)
            lru = i;
    }
    if (free_slot == SIZE_MAX) {
        detach_slot(api, lru);
        free_slot = lru;
    }
    e->stamp = ++api->cache_clock;
    api->cache[free_slot] = e;
    api->cache_count++;
}

static gp_cache_entry *entry_new(const gp_model_meta *meta, gp_model *model)
{
    gp_cache_entry *e = calloc(1, sizeof *e);
    if (e == NULL)
        return NULL;
    snprintf(e->name, sizeof e->name, "%s", meta->name);
    snprintf(e->created_at, sizeof e->created_at, "%s", meta->created_at);
    e->version = meta->version;
    e->id = meta->id;
    e->model = model;
    return e;
}

void gp_cache_insert(gp_api *api, const gp_model_meta *meta, gp_model *model)
{
    gp_cache_entry *e = entry_new(meta, model);
    if (e == NULL) {
        gp_model_free(model);
        return;
    }
    pthread_mutex_lock(&api->cache_lock);
    if (find_locked(api, meta))
        entry_free(e);
    else
        insert_locked(api, e);
    pthread_mutex_unlock(&api->cache_lock);
}

int gp_cache_acquire(gp_api *api, const char *name, int version, gp_cache_entry **entry,
                     const gp_model **model, gp_error *err)
{
    *entry = NULL;
    *model = NULL;
    if (!gp_api_valid_name(name))
        return gp_error_set(err, GP_EINVAL, "name",
                            "model names are 1 to 64 characters of A-Z a-z 0-9 . _ -");
    gp_model_meta meta;
    memset(&meta, 0, sizeof meta);
    int rc = gp_store_meta_brief(api->store, name, version, &meta, err);
    if (rc)
        return rc;
    pthread_mutex_lock(&api->cache_lock);
    gp_cache_entry *e = find_locked(api, &meta);
    if (e) {
        e->refs++;
        e->stamp = ++api->cache_clock;
    }
    pthread_mutex_unlock(&api->cache_lock);
    if (e == NULL) {
        const gp_method *m = gp_method_find(meta.method);
        gp_state st;
        gp_state_init(&st);
        gp_model *loaded = NULL;
        if (m == NULL)
            rc = gp_error_set(err, GP_EINTERNAL, NULL,
                              "model '%s' version %d uses method '%s', unknown to this build",
                              meta.name, meta.version, meta.method);
        if (rc == GP_OK)
            rc = gp_store_load_state(api->store, meta.id, &st, err);
        if (rc == GP_OK)
            rc = gp_model_import(m, &st, &loaded, err);
        gp_state_free(&st);
        gp_cache_entry *fresh = rc == GP_OK ? entry_new(&meta, loaded) : NULL;
        if (rc == GP_OK && fresh == NULL) {
            gp_model_free(loaded);
            rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        }
        if (rc) {
            if (rc == GP_EDATA) /* a stored model that does not import is our bug */
                rc = err ? (err->code = GP_EINTERNAL) : GP_EINTERNAL;
            gp_model_meta_free(&meta);
            return rc;
        }
        pthread_mutex_lock(&api->cache_lock);
        e = find_locked(api, &meta); /* loaded meanwhile by another request? */
        if (e)
            entry_free(fresh);
        else {
            e = fresh;
            insert_locked(api, e);
        }
        e->refs++;
        e->stamp = ++api->cache_clock;
        pthread_mutex_unlock(&api->cache_lock);
    }
    *entry = e;
    *model = e->model;
    return GP_OK;
}

void gp_cache_release(gp_api *api, gp_cache_entry *e)
{
    if (e == NULL)
        return;
    pthread_mutex_lock(&api->cache_lock);
    int gone = --e->refs == 0 && e->detached;
    pthread_mutex_unlock(&api->cache_lock);
    if (gone)
        entry_free(e);
}

void gp_cache_evict_name(gp_api *api, const char *name)
{
    pthread_mutex_lock(&api->cache_lock);
    for (size_t i = 0; i < api->cfg.model_cache; i++)
        if (api->cache[i] && strcmp(api->cache[i]->name, name) == 0)
            detach_slot(api, i);
    pthread_mutex_unlock(&api->cache_lock);
}

void gp_cache_destroy(gp_api *api)
{
    if (api->cache == NULL)
        return;
    pthread_mutex_lock(&api->cache_lock);
    for (size_t i = 0; i < api->cfg.model_cache; i++)
        if (api->cache[i])
            detach_slot(api, i);
    pthread_mutex_unlock(&api->cache_lock);
}

size_t gp_cache_size(gp_api *api)
{
    pthread_mutex_lock(&api->cache_lock);
    size_t n = api->cache_count;
    pthread_mutex_unlock(&api->cache_lock);
    return n;
}

/* ---- shared request parts ---- */

static int check_json(const gp_request *req, gp_error *err)
{
    if (gp_media_type(req->content_type) != 1)
        return gp_error_set(err, GP_EMEDIATYPE, NULL,
                            "Content-Type must be application/json, not '%.60s'",
                            req->content_type);
    return GP_OK;
}

static int get_version(json_t *obj, int *version, gp_error *err)
{
    json_t *v = json_object_get(obj, "version");
    *version = 0;
    if (v == NULL)
        return GP_OK;
    uint64_t x = 0;
    int rc = gp_json_get_uint(v, "version", INT_MAX, &x, err);
    if (rc == GP_OK && x == 0)
        rc = gp_error_set(err, GP_EINVAL, "version", "version must be an integer >= 1");
    *version = (int)x;
    return rc;
}

static int check_dims(const gp_model *model, const char *name, json_t *X, size_t d,
                      gp_error *err)
{
    if (d == model->input_dim)
        return GP_OK;
    if (json_is_array(json_array_get(X, 0)))
        return gp_error_set(err, GP_EDATA, "X[0]", "X[0] has %zu columns; model '%s' expects %zu",
                            d, name, model->input_dim);
    return gp_error_set(err, GP_EDATA, "X",
                        "X is a flat list (one column); model '%s' expects rows of %zu", name,
                        model->input_dim);
}

static void head(gp_buf *b, const char *name, int version)
{
    gp_buf_puts(b, "{\"name\":");
    gp_buf_json_string(b, name);
    gp_buf_printf(b, ",\"version\":%d", version);
}

/* ---- predict ---- */

static const char *const predict_keys[] = {"X", "version", "include_noise", "full_covariance",
                                           "quantiles", "components", NULL};

static int parse_quantiles(json_t *v, double *q, size_t *nq, gp_error *err)
{
    if (!json_is_array(v))
        return gp_error_set(err, GP_EINVAL, "quantiles",
                            "quantiles must be a list of numbers in (0, 1)");
    size_t n = json_array_size(v);
    if (n > MAX_QUANTILES)
        return gp_error_set(err, GP_EINVAL, "quantiles", "at most %d quantiles", MAX_QUANTILES);
    for (size_t i = 0; i < n; i++) {
        json_t *e = json_array_get(v, i);
        char f[GP_ERROR_FIELD_LEN];
        snprintf(f, sizeof f, "quantiles[%zu]", i);
        if (!json_is_number(e) || !(json_number_value(e) > 0.0 && json_number_value(e) < 1.0))
            return gp_error_set(err, GP_EINVAL, f, "%s must be a number strictly between 0 and 1",
                                f);
        q[i] = json_number_value(e);
        for (size_t j = 0; j < i; j++)
            if (q[j] == q[i])
                return gp_error_set(err, GP_EINVAL, f, "%s repeats quantiles[%zu]", f, j);
    }
    *nq = n;
    return GP_OK;
}

/* What predict and sample bodies share: a JSON object of known keys, an
 * optional "version" and "include_noise" (*include_noise keeps its default
 * when absent). */
static int parse_point_request(const gp_request *req, const char *const *keys, json_t **obj,
                               int *version, int *include_noise, gp_error *err)
{
    json_t *e;
    int rc = check_json(req, err);
    if (rc == GP_OK)
        rc = gp_json_parse_body(req, obj, err);
    if (rc == GP_OK)
        rc = gp_json_known_keys(*obj, keys, NULL, err);
    if (rc == GP_OK)
        rc = get_version(*obj, version, err);
    if (rc == GP_OK && (e = json_object_get(*obj, "include_noise")))
        rc = gp_json_get_bool(e, "include_noise", include_noise, err);
    return rc;
}

/* "components": true is for mixture methods (K = their component count) and
 * additive ones (K = their part count, *parts set); others are 422. */
static int check_components(const gp_model *model, int comps, size_t *K, int *parts,
                            gp_error *err)
{
    *K = 0;
    *parts = 0;
    if (!comps)
        return GP_OK;
    size_t P = gp_model_parts(model);
    if (P > 0) {
        /* the parts are of the latent f; a non-Gaussian model's predict goes
         * through its likelihood, which does not split them */
        if (model->likelihood != GP_LIK_GAUSSIAN)
            return gp_error_set(err, GP_EUNSUPPORTED, "components",
                                "components: the parts of a %s model are not predicted",
                                gp_likelihood_name(model->likelihood));
        *K = P;
        *parts = 1;
        return GP_OK;
    }
    if (!gp_method_is_mixture(model->method))
        return gp_error_set(err, GP_EUNSUPPORTED, "components",
                            "components: method '%s' predicts with one Gaussian, not a mixture "
                            "or a sum of parts",
                            model->method->name);
    *K = gp_model_components(model);
    return GP_OK;
}

/* One block for every output the request asked for (owner: *mem); obs: the
 * six observation-level outputs of a non-Gaussian model. */
static int alloc_prediction(size_t m, int full, size_t nq, size_t K, int obs, double **mem,
                            gp_prediction *pr, gp_error *err)
{
    size_t total = 2 * m + (full ? m * m : 0) + nq * m + 2 * K * m + (obs ? 6 * m : 0);
    *mem = malloc((total ? total : 1) * sizeof **mem);
    if (*mem == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory for %zu points", m);
    double *p = *mem;
    pr->mean = p;
    pr->variance = p + m;
    p += 2 * m;
    pr->covariance = full ? p : NULL;
    p += full ? m * m : 0;
    pr->quantiles = nq ? p : NULL;
    p += nq * m;
    pr->component_mean = K ? p : NULL;
    pr->component_variance = K ? p + K * m : NULL;
    p += 2 * K * m;
    double **outs[6] = {&pr->latent_mean, &pr->latent_variance, &pr->obs_mean,
                        &pr->obs_variance, &pr->rate_mean, &pr->rate_variance};
    for (int k = 0; k < 6; k++)
        *outs[k] = obs ? p + (size_t)k * m : NULL;
    return GP_OK;
}

/* The observation-level lists of a non-Gaussian model's prediction. */
static void write_observation_fields(gp_buf *b, gp_likelihood l, const gp_prediction *pr,
                                     size_t m)
{
    const char *keys[6] = {"latent_mean", "latent_variance", NULL, NULL, NULL, NULL};
    const double *vals[6] = {pr->latent_mean, pr->latent_variance, pr->obs_mean,
                             pr->obs_variance, pr->rate_mean, pr->rate_variance};
    if (l == GP_LIK_BERNOULLI)
        keys[2] = "probability";
    else {
        keys[2] = "count_mean";
        keys[3] = "count_variance";
        keys[4] = "rate_mean";
        keys[5] = "rate_variance";
    }
    for (int k = 0; k < 6; k++) {
        if (keys[k] == NULL)
            continue;
        gp_buf_printf(b, ",\"%s\":", keys[k]);
        gp_buf_json_array(b, vals[k], m, 1);
    }
}

/* "components": {"kind": "mixture" | "additive", "names": [K names] (additive),
 * "mean": [[m values] x K], "variance": [[m values] x K]} */
static void write_components(gp_buf *b, const gp_model *model, int parts,
                             const gp_prediction *pr, size_t m, size_t K)
{
    const char *names[2] = {"mean", "variance"};
    const double *src[2] = {pr->component_mean, pr->component_variance};
    gp_buf_printf(b, ",\"components\":{\"kind\":\"%s\"", parts ? "additive" : "mixture");
    if (parts) {
        gp_buf_puts(b, ",\"names\":[");
        for (size_t k = 0; k < K; k++) {
            char name[64];
            gp_model_part_name(model, k, name, sizeof name);
            if (name[0] == '\0')
                snprintf(name, sizeof name, "part%zu", k);
            if (k)
                gp_buf_put(b, ",", 1);
            gp_buf_json_string(b, name);
        }
        gp_buf_put(b, "]", 1);
    }
    for (int t = 0; t < 2; t++) {
        gp_buf_printf(b, ",\"%s\":[", names[t]);
        for (size_t k = 0; k < K; k++) {
            if (k)
                gp_buf_put(b, ",", 1);
            gp_buf_json_array(b, src[t] + k * m, m, 1);
        }
        gp_buf_put(b, "]", 1);
    }
    gp_buf_put(b, "}", 1);
}

static void do_predict(gp_api *api, const char *name, const gp_request *req, gp_response *out,
                       gp_error *err)
{
    json_t *obj = NULL;
    double *X = NULL, *mem = NULL;
    gp_cache_entry *entry = NULL;
    const gp_model *model = NULL;
    size_t m = 0, d = 0, nq = 0;
    int version = 0, include_noise = 1, full = 0, comps = 0;
    double q[MAX_QUANTILES];
    json_t *e;
    int rc = parse_point_request(req, predict_keys, &obj, &version, &include_noise, err);
    if (rc == GP_OK && (e = json_object_get(obj, "full_covariance")))
        rc = gp_json_get_bool(e, "full_covariance", &full, err);
    if (rc == GP_OK && (e = json_object_get(obj, "components")))
        rc = gp_json_get_bool(e, "components", &comps, err);
    if (rc == GP_OK && (e = json_object_get(obj, "quantiles")))
        rc = parse_quantiles(e, q, &nq, err);
    json_t *Xj = obj ? json_object_get(obj, "X") : NULL;
    if (rc == GP_OK && Xj == NULL)
        rc = gp_error_set(err, GP_EINVAL, "X", "X (the points to predict at) is missing");
    if (rc == GP_OK)
        rc = gp_json_matrix(Xj, "X", api->cfg.max_points, &X, &m, &d, err);
    if (rc == GP_OK && full && m > api->cfg.max_covariance_points)
        rc = gp_error_set(err, GP_ETOOBIG, "X",
                          "a full covariance of %zu points is above the limit "
                          "max_covariance_points = %zu",
                          m, api->cfg.max_covariance_points);
    if (rc == GP_OK)
        rc = gp_cache_acquire(api, name, version, &entry, &model, err);
    if (rc == GP_OK)
        rc = check_dims(model, name, Xj, d, err);
    gp_prediction pr = {0};
    size_t K = 0;
    int parts = 0;
    if (rc == GP_OK)
        rc = check_components(model, comps, &K, &parts, err);
    int obs = rc == GP_OK && model->likelihood != GP_LIK_GAUSSIAN;
    if (rc == GP_OK)
        rc = alloc_prediction(m, full, nq, K, obs, &mem, &pr, err);
    if (rc == GP_OK) {
        gp_predict_request preq = {X, m, d, include_noise, full, q, nq, comps};
        rc = gp_model_predict(model, &preq, &pr, err);
    }
    if (rc == GP_OK) {
        if (pr.clamped)
            atomic_fetch_add(&api->variance_clamps, (uint64_t)pr.clamped);
        gp_buf b;
        gp_buf_init(&b);
        /* entry's name/version are the row that was served */
        head(&b, name, entry->version);
        gp_buf_puts(&b, ",\"mean\":");
        gp_buf_json_array(&b, pr.mean, m, 1);
        gp_buf_puts(&b, ",\"variance\":");
        gp_buf_json_array(&b, pr.variance, m, 1);
        if (obs)
            write_observation_fields(&b, model->likelihood, &pr, m);
        if (full) {
            gp_buf_puts(&b, ",\"covariance\":[");
            for (size_t i = 0; i < m; i++) {
                if (i)
                    gp_buf_put(&b, ",", 1);
                gp_buf_json_array(&b, pr.covariance + i, m, m); /* row i (symmetric) */
            }
            gp_buf_put(&b, "]", 1);
        }
        if (nq) {
            gp_buf_puts(&b, ",\"quantiles\":{");
            for (size_t k = 0; k < nq; k++) {
                char key[32];
                gp_format_shortest(q[k], key, sizeof key);
                if (k)
                    gp_buf_put(&b, ",", 1);
                gp_buf_json_string(&b, key);
                gp_buf_put(&b, ":", 1);
                gp_buf_json_array(&b, pr.quantiles + k * m, m, 1);
            }
            gp_buf_put(&b, "}", 1);
        }
        if (comps)
            write_components(&b, model, parts, &pr, m, K);
        gp_buf_put(&b, "}", 1);
        gp_buf_respond(&b, 200, out);
    }
    gp_cache_release(api, entry);
    free(mem);
    free(X);
    json_decref(obj);
    if (rc)
        gp_api_error(err, out);
}

void gp_api_predict(gp_api *api, const char *name, const gp_request *req, gp_response *out)
{
    gp_error err;
    gp_error_clear(&err);
    do_predict(api, name, req, out, &err);
}

/* ---- sample ---- */

static const char *const sample_keys[] = {"X",           "version",      "n_samples", "seed",
                                          "include_noise", "observations", NULL};

static void write_draws(gp_buf *b, const char *key, const double *S, size_t m, size_t n)
{
    gp_buf_printf(b, ",\"%s\":[", key);
    for (size_t s = 0; s < n; s++) {
        if (s)
            gp_buf_put(b, ",", 1);
        gp_buf_json_array(b, S + s * m, m, 1);
    }
    gp_buf_put(b, "]", 1);
}

void gp_api_sample(gp_api *api, const char *name, const gp_request *req, gp_response *out)
{
    gp_error errs, *err = &errs;
    gp_error_clear(err);
    json_t *obj = NULL, *e;
    double *X = NULL, *S = NULL;
    gp_cache_entry *entry = NULL;
    const gp_model *model = NULL;
    size_t m = 0, d = 0;
    int version = 0, include_noise = 0, observations = 0;
    uint64_t n_samples = 10, seed = 0;
    int rc = parse_point_request(req, sample_keys, &obj, &version, &include_noise, err);
    if (rc == GP_OK && (e = json_object_get(obj, "observations")))
        rc = gp_json_get_bool(e, "observations", &observations, err);
    if (rc == GP_OK && observations && include_noise)
        rc = gp_error_set(err, GP_EINVAL, "observations",
                          "observations draws y beside the latent samples; it does not combine "
                          "with include_noise (which makes the samples themselves draws of y)");
    if (rc == GP_OK && (e = json_object_get(obj, "seed")))
        rc = gp_json_get_uint(e, "seed", 9007199254740992.0, &seed, err);
    if (rc == GP_OK && (e = json_object_get(obj, "n_samples"))) {
        rc = gp_json_get_uint(e, "n_samples", 9007199254740992.0, &n_samples, err);
        if (rc == GP_OK && n_samples == 0)
            rc = gp_error_set(err, GP_EINVAL, "n_samples", "n_samples must be at least 1");
    }
    if (rc == GP_OK && n_samples > api->cfg.max_samples)
        rc = gp_error_set(err, GP_ETOOBIG, "n_samples",
                          "n_samples = %llu is above the limit max_samples = %zu",
                          (unsigned long long)n_samples, api->cfg.max_samples);
    json_t *Xj = obj ? json_object_get(obj, "X") : NULL;
    if (rc == GP_OK && Xj == NULL)
        rc = gp_error_set(err, GP_EINVAL, "X", "X (the points to sample at) is missing");
    if (rc == GP_OK)
        rc = gp_json_matrix(Xj, "X", api->cfg.max_points, &X, &m, &d, err);
    if (rc == GP_OK && m > api->cfg.max_covariance_points)
        rc = gp_error_set(err, GP_ETOOBIG, "X",
                          "joint samples at %zu points are above the limit "
                          "max_covariance_points = %zu",
                          m, api->cfg.max_covariance_points);
    if (rc == GP_OK && (double)m * (double)n_samples > (double)api->cfg.max_sample_values)
        rc = gp_error_set(err, GP_ETOOBIG, "n_samples",
                          "%llu samples x %zu points is above the limit max_sample_values = %zu",
                          (unsigned long long)n_samples, m, api->cfg.max_sample_values);
    if (rc == GP_OK)
        rc = gp_cache_acquire(api, name, version, &entry, &model, err);
    if (rc == GP_OK)
        rc = check_dims(model, name, Xj, d, err);
    size_t count = m * (size_t)n_samples; /* below max_sample_values, checked above */
    if (rc == GP_OK && !(S = malloc((observations ? 2 : 1) * count * sizeof *S)))
        rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory for the samples");
    gp_sample_request sr = {X, m, d, (size_t)n_samples, seed, include_noise};
    if (rc == GP_OK)
        rc = gp_model_sample(model, &sr, S, err);
    if (rc == GP_OK && observations)
        rc = gp_model_sample_observations(model, &sr, S, S + count, err);
    if (rc == GP_OK) {
        gp_buf b;
        gp_buf_init(&b);
        head(&b, name, entry->version);
        write_draws(&b, "samples", S, m, (size_t)n_samples);
        if (observations)
            write_draws(&b, "observations", S + count, m, (size_t)n_samples);
        gp_buf_put(&b, "}", 1);
        gp_buf_respond(&b, 200, out);
    }
    gp_cache_release(api, entry);
    free(S);
    free(X);
    json_decref(obj);
    if (rc)
        gp_api_error(err, out);
}

/* ---- metadata routes ---- */

static int check_name(const char *name, gp_error *err)
{
    if (!gp_api_valid_name(name))
        return gp_error_set(err, GP_EINVAL, "name",
                            "model names are 1 to 64 characters of A-Z a-z 0-9 . _ -");
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
    int rc = check_name(name, &err);
    if (rc == GP_OK && version < 0)
        rc = gp_error_set(&err, GP_EINVAL, "version", "version must be an integer >= 1");
    if (rc == GP_OK)
        rc = gp_store_meta(api->store, name, version, &meta, &err);
    if (rc == GP_OK && version == 0)
        rc = gp_store_versions(api->store, name, &versions, &nv, &err);
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
    gp_model_meta_free(&meta);
    if (rc)
        gp_api_error(&err, out);
    else
        gp_json_respond(o, 200, out);
}

void gp_api_list_models(gp_api *api, gp_response *out)
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
    for (size_t i = 0; i < n; i++) {
        const gp_model_meta *m = &metas[i];
        if (i)
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

void gp_api_delete_model(gp_api *api, const char *name, gp_response *out)
{
    gp_error err;
    gp_error_clear(&err);
    gp_model_meta meta;
    memset(&meta, 0, sizeof meta);
    int rc = check_name(name, &err);
    /* the store may treat deleting nothing as success: 404 it here */
    if (rc == GP_OK)
        rc = gp_store_meta_brief(api->store, name, 0, &meta, &err);
    gp_model_meta_free(&meta);
    if (rc == GP_OK)
        rc = gp_store_delete(api->store, name, &err);
    if (rc) {
        gp_api_error(&err, out);
        return;
    }
    gp_cache_evict_name(api, name);
    free(out->body);
    out->body = NULL;
    out->body_len = 0;
    out->status = 204;
    out->content_type = "application/json";
}

void gp_api_observe(gp_api *api, const char *name, const gp_request *req, gp_response *out)
{
    (void)req;
    gp_error err;
    gp_error_clear(&err);
    gp_model_meta meta;
    memset(&meta, 0, sizeof meta);
    int rc = check_name(name, &err);
    if (rc == GP_OK)
        rc = gp_store_meta_brief(api->store, name, 0, &meta, &err);
    if (rc == GP_OK)
        rc = gp_error_set(&err, GP_EUNSUPPORTED, NULL,
                          "method '%s' does not update online: fit a new version with all the "
                          "data instead",
                          meta.method);
    gp_model_meta_free(&meta);
    gp_api_error(&err, out);
}
