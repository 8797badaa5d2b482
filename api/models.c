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
#define _GNU_SOURCE /* pthread_rwlockattr_setkind_np: observes must not starve behind reads */
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/internal.h"
#include "core/base/rng.h"

#define MAX_QUANTILES 100
/* Predicted points over which GET reports a gate model's oracle rate. */
#define ORACLE_WINDOW 1000
/* Tries of an observe that another daemon's append overtook (each catches up). */
#define OBSERVE_TRIES 3
/* Seconds of updates since the last snapshot after which the next observe
 * writes one: a load replays about this long at most, whatever the method's
 * cost per row (bench/results/online.md measured 7 s for 10,000 entries of a
 * two-stage rfgp before this bound). */
#define SNAPSHOT_REPLAY_SECONDS 0.5

struct gp_cache_entry {
    char name[GP_NAME_MAX + 1];
    int version;
    int64_t id;
    char created_at[GP_TIME_LEN];
    gp_model *model;
    int refs;
    int detached; /* out of the table; freed by the last release */
    uint64_t stamp;
    /* Online models. Readers (predict, sample, get) hold `lock` shared while
     * they use the model; an observe applies its batch holding it exclusive.
     * `write_lock` serialises the writers of this entry (observes, and the
     * catch-up that replays log entries written by another daemon). */
    pthread_rwlock_t lock;
    pthread_mutex_t write_lock;
    uint64_t seq;          /* log entries applied (written under lock, exclusive) */
    int stale;             /* the model differs from the store: never serve it again */
    size_t since_snapshot; /* entries logged since the last snapshot (write_lock) */
    size_t logged_bytes;   /* their bytes */
    size_t state_bytes;    /* bytes of the model's last exported state, 0 unknown */
    double apply_seconds;  /* time spent applying them: about what replaying them costs */
    /* the gate's rolling oracle rate over the last ORACLE_WINDOW predicted points */
    pthread_mutex_t gate_lock;
    unsigned char ring[ORACLE_WINDOW];
    size_t ring_pos, ring_filled, ring_ones;
};

static void entry_free(gp_cache_entry *e)
{
    gp_model_free(e->model);
    pthread_rwlock_destroy(&e->lock);
    pthread_mutex_destroy(&e->write_lock);
    pthread_mutex_destroy(&e->gate_lock);
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
        if (api->cache[i] && !api->cache[i]->stale && entry_matches(api->cache[i], meta))
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
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    int rc = pthread_rwlock_init(&e->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    if (rc != 0) {
        free(e);
        return NULL;
    }
    pthread_mutex_init(&e->write_lock, NULL);
    pthread_mutex_init(&e->gate_lock, NULL);
    snprintf(e->name, sizeof e->name, "%s", meta->name);
    snprintf(e->created_at, sizeof e->created_at, "%s", meta->created_at);
    e->version = meta->version;
    e->id = meta->id;
    e->model = model;
    e->seq = meta->obs_seq;
    return e;
}

/* Take e out of the table (if still there) and mark it stale: its model no
 * longer equals the store's, so the next request loads the version again. */
static void entry_discard(gp_api *api, gp_cache_entry *e)
{
    pthread_mutex_lock(&api->cache_lock);
    e->stale = 1;
    for (size_t i = 0; i < api->cfg.model_cache; i++)
        if (api->cache[i] == e) {
            api->cache[i] = NULL;
            api->cache_count--;
            e->detached = 1;
        }
    pthread_mutex_unlock(&api->cache_lock);
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

static double seconds_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* ---- the observation log: replay ---- */

typedef struct replay_ctx {
    gp_model *model;
    size_t bytes;
} replay_ctx;

static int replay_one(void *ctx, uint64_t seq, const gp_state *batch, gp_error *err)
{
    replay_ctx *r = ctx;
    const gp_named_array *X = gp_state_find(batch, "X"), *Y = gp_state_find(batch, "y");
    if (X == NULL || Y == NULL || X->rows != Y->rows || X->cols != r->model->input_dim ||
        Y->cols != r->model->n_outputs)
        return gp_error_set(err, GP_EDATA, NULL, "observation log entry %llu is malformed",
                            (unsigned long long)seq);
    r->bytes += (X->rows * (X->cols + Y->cols)) * sizeof(double);
    int rc = gp_model_observe(r->model, X->data, Y->data, X->rows, err);
    char why[GP_ERROR_MESSAGE_LEN];
    snprintf(why, sizeof why, "%s", err && rc ? err->message : "");
    if (rc == GP_EDATA) /* logged by a daemon before the finite-value guards */
        return gp_error_set(err, GP_ENONFINITE, NULL,
                            "observation log entry %llu holds rows that make the model "
                            "non-finite (%s); the version is not served: fit a new version "
                            "or delete it",
                            (unsigned long long)seq, why);
    if (rc)
        /* the entry was accepted once: failing now is a bug or a corrupt log */
        return gp_error_set(err, GP_EINTERNAL, NULL,
                            "replaying observation log entry %llu failed: %s",
                            (unsigned long long)seq, why);
    return GP_OK;
}

/* Apply the log entries (from, upto] to model. */
static int replay(gp_api *api, int64_t id, gp_model *model, uint64_t from, uint64_t upto,
                  size_t *bytes, gp_error *err)
{
    replay_ctx r = {model, 0};
    int rc = gp_store_observations(api->store, id, from, upto, replay_one, &r, err);
    if (bytes)
        *bytes += r.bytes;
    return rc;
}

/* Bring e up to log entry `target` (written by another daemon, or before a
 * restart): the entries after e->seq applied under the exclusive lock. */
static int catch_up(gp_api *api, gp_cache_entry *e, uint64_t target, gp_error *err)
{
    int rc = GP_OK;
    pthread_mutex_lock(&e->write_lock);
    if (!e->stale && e->seq < target) {
        pthread_rwlock_wrlock(&e->lock);
        double t0 = seconds_now();
        rc = replay(api, e->id, e->model, e->seq, target, &e->logged_bytes, err);
        e->apply_seconds += seconds_now() - t0;
        if (rc == GP_OK) {
            e->since_snapshot += (size_t)(target - e->seq);
            e->seq = target;
        }
        pthread_rwlock_unlock(&e->lock);
        if (rc)
            entry_discard(api, e);
    }
    pthread_mutex_unlock(&e->write_lock);
    return rc;
}

static size_t state_bytes(const gp_state *st)
{
    size_t b = 0;
    for (size_t i = 0; i < st->count; i++)
        b += st->arrays[i].rows * st->arrays[i].cols * sizeof(double);
    return b;
}

/* A version loaded from the store: its snapshot (or its fitted arrays) and
 * the log entries after it, up to meta->obs_seq. */
static int load_entry(gp_api *api, const gp_model_meta *meta, gp_cache_entry **out,
                      gp_error *err)
{
    const gp_method *m = gp_method_find(meta->method);
    gp_state st;
    gp_state_init(&st);
    gp_model *loaded = NULL;
    uint64_t snap = 0;
    size_t logged = 0;
    int rc = GP_OK;
    if (m == NULL)
        rc = gp_error_set(err, GP_EINTERNAL, NULL,
                          "model '%s' version %d uses method '%s', unknown to this build",
                          meta->name, meta->version, meta->method);
    if (rc == GP_OK && meta->obs_seq > 0)
        rc = gp_store_load_snapshot(api->store, meta->id, &st, &snap, err);
    if (rc == GP_OK && snap == 0)
        rc = gp_store_load_state(api->store, meta->id, &st, err);
    gp_error bad;
    if (rc == GP_OK && gp_state_check_finite(&st, &bad) != GP_OK)
        rc = gp_error_set(err, GP_ENONFINITE, NULL,
                          "model '%s' version %d is stored with a non-finite number (%s); it "
                          "is not served: fit a new version or delete it",
                          meta->name, meta->version, bad.message);
    if (rc == GP_OK)
        rc = gp_model_import(m, &st, &loaded, err);
    size_t sbytes = state_bytes(&st);
    gp_state_free(&st);
    double t0 = seconds_now();
    if (rc == GP_OK && meta->obs_seq > snap)
        rc = replay(api, meta->id, loaded, snap, meta->obs_seq, &logged, err);
    double replayed = seconds_now() - t0;
    gp_cache_entry *fresh = rc == GP_OK ? entry_new(meta, loaded) : NULL;
    if (rc == GP_OK && fresh == NULL)
        rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    if (rc) {
        gp_model_free(loaded);
        if (rc == GP_EDATA) /* a stored model that does not import is our bug */
            rc = err ? (err->code = GP_EINTERNAL) : GP_EINTERNAL;
        return rc;
    }
    /* another daemon may have written a newer snapshot between the row read
     * and the snapshot read: the model is then at snap, past obs_seq */
    fresh->seq = snap > meta->obs_seq ? snap : meta->obs_seq;
    fresh->since_snapshot = (size_t)(fresh->seq - snap);
    fresh->logged_bytes = logged;
    fresh->state_bytes = sbytes;
    fresh->apply_seconds = replayed;
    *out = fresh;
    return GP_OK;
}

/* The entry of the row meta, found or loaded, with a reference taken. */
static int entry_get(gp_api *api, const gp_model_meta *meta, gp_cache_entry **out,
                     gp_error *err)
{
    pthread_mutex_lock(&api->cache_lock);
    gp_cache_entry *e = find_locked(api, meta);
    if (e) {
        e->refs++;
        e->stamp = ++api->cache_clock;
    }
    pthread_mutex_unlock(&api->cache_lock);
    if (e == NULL) {
        gp_cache_entry *fresh = NULL;
        int rc = gp_poisoned_check(api, meta, err);
        if (rc == GP_OK && (rc = load_entry(api, meta, &fresh, err)) == GP_ENONFINITE)
            gp_poisoned_add(api, meta, err);
        if (rc)
            return rc;
        pthread_mutex_lock(&api->cache_lock);
        e = find_locked(api, meta); /* loaded meanwhile by another request? */
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
    *out = e;
    return GP_OK;
}

static void entry_unref(gp_api *api, gp_cache_entry *e)
{
    pthread_mutex_lock(&api->cache_lock);
    int gone = --e->refs == 0 && e->detached;
    pthread_mutex_unlock(&api->cache_lock);
    if (gone)
        entry_free(e);
}

static int check_name(const char *name, gp_error *err)
{
    if (!gp_api_valid_name(name))
        return gp_error_set(err, GP_EINVAL, "name",
                            "model names are 1 to 64 characters of A-Z a-z 0-9 . _ -");
    return GP_OK;
}

/* The entry of (name, version), referenced and caught up with the store's
 * log, but not locked; *meta_out (may be NULL) gets the row. */
static int entry_acquire(gp_api *api, const char *name, int version, gp_cache_entry **entry,
                         gp_model_meta *meta_out, gp_error *err)
{
    *entry = NULL;
    int rc = check_name(name, err);
    gp_model_meta meta;
    memset(&meta, 0, sizeof meta);
    gp_cache_entry *e = NULL;
    if (rc == GP_OK)
        rc = gp_store_meta_brief(api->store, name, version, &meta, err);
    if (rc == GP_OK)
        rc = entry_get(api, &meta, &e, err);
    if (rc == GP_OK && meta.obs_seq > e->seq && (rc = catch_up(api, e, meta.obs_seq, err))) {
        if (rc == GP_ENONFINITE) /* another daemon logged it: the version is poisoned */
            gp_poisoned_add(api, &meta, err);
        entry_unref(api, e);
        e = NULL;
    }
    if (rc == GP_OK && meta_out)
        *meta_out = meta;
    else
        gp_model_meta_free(&meta);
    *entry = e;
    return rc;
}

int gp_cache_acquire(gp_api *api, const char *name, int version, gp_cache_entry **entry,
                     const gp_model **model, gp_error *err)
{
    *entry = NULL;
    *model = NULL;
    for (int tries = 0;; tries++) {
        gp_cache_entry *e = NULL;
        int rc = entry_acquire(api, name, version, &e, NULL, err);
        if (rc)
            return rc;
        pthread_rwlock_rdlock(&e->lock);
        if (!e->stale || tries >= OBSERVE_TRIES) {
            if (e->stale) { /* discarded under us again and again: give up */
                pthread_rwlock_unlock(&e->lock);
                entry_unref(api, e);
                return gp_error_set(err, GP_ENOTREADY, NULL,
                                    "model '%s' is being reloaded; try again", name);
            }
            *entry = e;
            *model = e->model;
            return GP_OK;
        }
        pthread_rwlock_unlock(&e->lock);
        entry_unref(api, e);
    }
}

void gp_cache_release(gp_api *api, gp_cache_entry *e)
{
    if (e == NULL)
        return;
    pthread_rwlock_unlock(&e->lock);
    entry_unref(api, e);
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

/* ---- the gate's oracle rate ---- */

/* The flags of m predicted points (NULL: all asked, a model in warm-up);
 * only the last ORACLE_WINDOW count. */
static void gate_record(gp_cache_entry *e, const unsigned char *flags, size_t m)
{
    size_t from = m > ORACLE_WINDOW ? m - ORACLE_WINDOW : 0;
    pthread_mutex_lock(&e->gate_lock);
    for (size_t i = from; i < m; i++) {
        if (e->ring_filled == ORACLE_WINDOW)
            e->ring_ones -= e->ring[e->ring_pos];
        else
            e->ring_filled++;
        e->ring[e->ring_pos] = !flags || flags[i] ? 1 : 0;
        e->ring_ones += e->ring[e->ring_pos];
        e->ring_pos = (e->ring_pos + 1) % ORACLE_WINDOW;
    }
    pthread_mutex_unlock(&e->gate_lock);
}

static void gate_rate(gp_cache_entry *e, size_t *window, double *rate)
{
    pthread_mutex_lock(&e->gate_lock);
    *window = e->ring_filled;
    *rate = e->ring_filled ? (double)e->ring_ones / (double)e->ring_filled : NAN;
    pthread_mutex_unlock(&e->gate_lock);
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

/* X of a predict, sample or observe body, in two steps: rows of numbers are
 * parsed before the model is looked up (a malformed X is a 400 whatever the
 * model), rows that are objects (distributional inputs) once the model's
 * input spec is known. */
static int parse_x_early(gp_api *api, json_t *Xj, double **X, size_t *m, size_t *d,
                         gp_error *err)
{
    if (json_is_array(Xj) && json_is_object(json_array_get(Xj, 0)))
        return GP_OK;
    return gp_json_matrix(Xj, "X", api->cfg.max_points, X, m, d, err);
}

static int parse_x_late(gp_api *api, const gp_model *model, const char *name, json_t *Xj,
                        double **X, size_t *m, size_t *d, gp_error *err)
{
    if (model->input.kind == GP_INPUT_POINT) {
        if (*X == NULL) /* objects given to a model of points: gp_json_matrix says what is wrong */
            return gp_json_matrix(Xj, "X", api->cfg.max_points, X, m, d, err);
        return check_dims(model, name, Xj, *d, err);
    }
    if (*X != NULL)
        return gp_error_set(err, GP_EDATA, "X[0]",
                            "model '%s' takes %s inputs: rows like {\"%s\": ...}, not numbers",
                            name, gp_input_kind_name(model->input.kind),
                            gp_input_kind_name(model->input.kind));
    *d = gp_input_width(&model->input);
    return gp_json_inputs(Xj, &model->input, "X", api->cfg.max_points, X, m, err);
}

/* m values per output, p outputs one after the other (column-major m x p):
 * a list of m numbers for one output, m rows of p numbers for several. */
static void write_outputs(gp_buf *b, const double *v, size_t m, size_t p)
{
    if (p == 1) {
        gp_buf_json_array(b, v, m, 1);
        return;
    }
    gp_buf_put(b, "[", 1);
    for (size_t i = 0; i < m; i++) {
        if (i)
            gp_buf_put(b, ",", 1);
        gp_buf_json_array(b, v + i, p, m);
    }
    gp_buf_put(b, "]", 1);
}

/* The gate of a model whose method has one: "state", "ask_oracle" (m flags;
 * NULL: all true, in warm-up) and "oracle_threshold" (per output, original
 * units; null before known). */
static void write_gate(gp_buf *b, const gp_online_status *st, const unsigned char *flags,
                       size_t m, size_t p)
{
    gp_buf_printf(b, ",\"state\":\"%s\",\"ask_oracle\":[", st->warmup ? "warmup" : "online");
    for (size_t i = 0; i < m; i++)
        gp_buf_printf(b, "%s%s", i ? "," : "", !flags || flags[i] ? "true" : "false");
    gp_buf_puts(b, "],\"oracle_threshold\":");
    if (!st->has_threshold)
        gp_buf_puts(b, "null");
    else if (p == 1)
        gp_buf_json_number(b, st->threshold[0]);
    else
        gp_buf_json_array(b, st->threshold, p, 1);
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
static int alloc_prediction(size_t m, size_t np, int full, size_t nq, size_t K, int obs,
                            double **mem, gp_prediction *pr, gp_error *err)
{
    /* np outputs: m np means and variances, np covariances, m nq np quantiles
     * (np is at most a few: the request's m is bounded, and np by the fit) */
    size_t total = 2 * m * np + (full ? m * m * np : 0) + nq * m * np + 2 * K * m +
                   (obs ? 6 * m : 0) + m; /* + m: the gate's flags */
    *mem = malloc(total * sizeof **mem);
    if (*mem == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory for %zu points", m);
    double *p = *mem;
    pr->mean = p;
    pr->variance = p + m * np;
    p += 2 * m * np;
    pr->covariance = full ? p : NULL;
    p += full ? m * m * np : 0;
    pr->quantiles = nq ? p : NULL;
    p += nq * m * np;
    pr->component_mean = K ? p : NULL;
    pr->component_variance = K ? p + K * m : NULL;
    p += 2 * K * m;
    double **outs[6] = {&pr->latent_mean, &pr->latent_variance, &pr->obs_mean,
                        &pr->obs_variance, &pr->rate_mean, &pr->rate_variance};
    for (int k = 0; k < 6; k++)
        *outs[k] = obs ? p + (size_t)k * m : NULL;
    p += obs ? 6 * m : 0;
    pr->ask_oracle = (unsigned char *)p;
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

/* quantiles: {"level": values} with each level's values as write_outputs. */
static void write_quantiles(gp_buf *b, const double *q, size_t nq, const double *Q, size_t m,
                            size_t p)
{
    gp_buf_puts(b, ",\"quantiles\":{");
    for (size_t k = 0; k < nq; k++) {
        char key[32];
        gp_format_shortest(q[k], key, sizeof key);
        if (k)
            gp_buf_put(b, ",", 1);
        gp_buf_json_string(b, key);
        gp_buf_put(b, ":", 1);
        if (p == 1) {
            gp_buf_json_array(b, Q + k * m, m, 1);
            continue;
        }
        gp_buf_put(b, "[", 1);
        for (size_t i = 0; i < m; i++) {
            if (i)
                gp_buf_put(b, ",", 1);
            gp_buf_json_array(b, Q + k * m + i, p, nq * m); /* output j at (j nq + k) m + i */
        }
        gp_buf_put(b, "]", 1);
    }
    gp_buf_put(b, "}", 1);
}

/* covariance: m rows of m for one output; a list of p such matrices for several. */
static void write_covariance(gp_buf *b, const double *C, size_t m, size_t p)
{
    gp_buf_puts(b, ",\"covariance\":");
    if (p > 1)
        gp_buf_put(b, "[", 1);
    for (size_t j = 0; j < p; j++) {
        gp_buf_puts(b, j ? ",[" : "[");
        for (size_t i = 0; i < m; i++) {
            if (i)
                gp_buf_put(b, ",", 1);
            gp_buf_json_array(b, C + j * m * m + i, m, m); /* row i (symmetric) */
        }
        gp_buf_put(b, "]", 1);
    }
    if (p > 1)
        gp_buf_put(b, "]", 1);
}

/* A gate model in warm-up predicts nothing yet: every point asks the oracle. */
static void respond_warmup(gp_buf *b, const gp_online_status *st, size_t m, size_t p)
{
    gp_buf_puts(b, ",\"mean\":null,\"variance\":null");
    write_gate(b, st, NULL, m, p);
}

typedef struct predict_args {
    int include_noise, full, comps;
    double q[MAX_QUANTILES];
    size_t nq;
} predict_args;

static int parse_predict_args(json_t *obj, predict_args *a, gp_error *err)
{
    json_t *e;
    int rc = GP_OK;
    if ((e = json_object_get(obj, "full_covariance")))
        rc = gp_json_get_bool(e, "full_covariance", &a->full, err);
    if (rc == GP_OK && (e = json_object_get(obj, "components")))
        rc = gp_json_get_bool(e, "components", &a->comps, err);
    if (rc == GP_OK && (e = json_object_get(obj, "quantiles")))
        rc = parse_quantiles(e, a->q, &a->nq, err);
    return rc;
}

static void write_prediction(gp_buf *b, const gp_model *model, const predict_args *a,
                             const gp_prediction *pr, size_t m, size_t K, int parts)
{
    size_t p = model->n_outputs;
    gp_buf_puts(b, ",\"mean\":");
    write_outputs(b, pr->mean, m, p);
    gp_buf_puts(b, ",\"variance\":");
    write_outputs(b, pr->variance, m, p);
    if (model->likelihood != GP_LIK_GAUSSIAN)
        write_observation_fields(b, model->likelihood, pr, m);
    if (a->full)
        write_covariance(b, pr->covariance, m, p);
    if (a->nq)
        write_quantiles(b, a->q, a->nq, pr->quantiles, m, p);
    if (a->comps)
        write_components(b, model, parts, pr, m, K);
}

/* ---- predict and sample calls: parsed on the request thread, answered in
 * batches (server/batcher.c) or at once ---- */

struct gp_point_call {
    int kind;                /* GP_CALL_PREDICT or GP_CALL_SAMPLE */
    char name[GP_NAME_MAX + 1];
    int version;             /* 0: the latest */
    json_t *obj;             /* the parsed body (owned); Xj points into it */
    json_t *Xj;
    double *X;               /* rows of numbers, parsed early (owned); NULL for objects */
    size_t m, d;
    predict_args a;          /* predict */
    gp_request req;          /* sample: the body, answered by gp_api_sample's own code */
    char *body;              /* sample: owned copy of the body */
    gp_oip_call *oip;        /* an Open Inference Protocol infer (owned), else NULL */
};

void gp_api_point_call_free(gp_point_call *c)
{
    if (c == NULL)
        return;
    json_decref(c->obj);
    free(c->X);
    free(c->body);
    gp_oip_call_free(c->oip);
    free(c);
}

int gp_point_call_from_points(const char *name, int version, double *X, size_t m, size_t d,
                              int include_noise, gp_oip_call *oip, gp_point_call **out,
                              gp_error *err)
{
    *out = NULL;
    gp_point_call *c = calloc(1, sizeof *c);
    if (c == NULL) {
        free(X);
        gp_oip_call_free(oip);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    c->kind = GP_CALL_PREDICT;
    snprintf(c->name, sizeof c->name, "%s", name);
    c->version = version;
    c->X = X;
    c->m = m;
    c->d = d;
    c->a.include_noise = include_noise;
    c->oip = oip;
    *out = c;
    return GP_OK;
}

static int parse_predict_call(gp_api *api, const gp_request *req, gp_point_call *c,
                              gp_error *err)
{
    c->a.include_noise = 1;
    int rc = parse_point_request(req, predict_keys, &c->obj, &c->version, &c->a.include_noise,
                                 err);
    if (rc == GP_OK)
        rc = parse_predict_args(c->obj, &c->a, err);
    c->Xj = c->obj ? json_object_get(c->obj, "X") : NULL;
    if (rc == GP_OK && c->Xj == NULL)
        rc = gp_error_set(err, GP_EINVAL, "X", "X (the points to predict at) is missing");
    if (rc == GP_OK)
        rc = parse_x_early(api, c->Xj, &c->X, &c->m, &c->d, err);
    return rc;
}

int gp_api_point_call_parse(gp_api *api, int kind, const char *name, const gp_request *req,
                            gp_point_call **out, gp_response *res)
{
    gp_error err;
    gp_error_clear(&err);
    *out = NULL;
    gp_point_call *c = calloc(1, sizeof *c);
    int rc = c ? GP_OK : gp_error_set(&err, GP_ENOMEM, NULL, "out of memory");
    if (rc == GP_OK) {
        c->kind = kind;
        snprintf(c->name, sizeof c->name, "%s", name);
    }
    if (rc == GP_OK && kind == GP_CALL_PREDICT)
        rc = parse_predict_call(api, req, c, &err);
    else if (rc == GP_OK) { /* a sample is parsed where it runs; its body is kept */
        c->req = *req;
        c->req.query = NULL;
        c->req.n_query = 0;
        c->body = malloc(req->body_len ? req->body_len : 1);
        if (c->body == NULL)
            rc = gp_error_set(&err, GP_ENOMEM, NULL, "out of memory");
        else if (req->body_len)
            memcpy(c->body, req->body, req->body_len);
        c->req.body = c->body;
    }
    if (rc) {
        gp_api_point_call_free(c);
        gp_api_error(&err, res);
        return rc;
    }
    *out = c;
    return GP_OK;
}

size_t gp_api_point_call_points(const gp_point_call *c)
{
    return c->m;
}

int gp_api_point_call_batchable(const gp_point_call *c)
{
    return c->kind == GP_CALL_PREDICT && !c->a.full;
}

int gp_api_point_call_joinable(const gp_point_call *a, const gp_point_call *b)
{
    if (!gp_api_point_call_batchable(a) || !gp_api_point_call_batchable(b) ||
        strcmp(a->name, b->name) != 0 || a->version != b->version)
        return 0;
    const predict_args *x = &a->a, *y = &b->a;
    return x->include_noise == y->include_noise && x->comps == y->comps && x->nq == y->nq &&
           memcmp(x->q, y->q, x->nq * sizeof x->q[0]) == 0;
}

/* One predict call's state between its checks and its answer. */
typedef struct call_state {
    int rc;
    gp_error err;
    double *mem;
    gp_prediction pr;
    size_t K;
    int parts;
} call_state;

/* The checks of call c against the model, and its buffers (st->rc). */
static void predict_prepare(gp_api *api, const gp_model *model, gp_point_call *c, int gate,
                            const gp_online_status *ost, call_state *st)
{
    gp_error *err = &st->err;
    const predict_args *a = &c->a;
    int rc = c->oip ? gp_oip_prepare(c->oip, model, c->name, ost->warmup, err)
                    : parse_x_late(api, model, c->name, c->Xj, &c->X, &c->m, &c->d, err);
    if (rc == GP_OK && a->full && c->m > api->cfg.max_covariance_points)
        rc = gp_error_set(err, GP_ETOOBIG, "X",
                          "a full covariance of %zu points is above the limit "
                          "max_covariance_points = %zu",
                          c->m, api->cfg.max_covariance_points);
    if (rc == GP_OK)
        rc = check_components(model, a->comps, &st->K, &st->parts, err);
    int obs = model->likelihood != GP_LIK_GAUSSIAN;
    if (rc == GP_OK && !ost->warmup)
        rc = alloc_prediction(c->m, model->n_outputs, a->full, a->nq, st->K, obs, &st->mem,
                              &st->pr, err);
    if (rc == GP_OK && !gate)
        st->pr.ask_oracle = NULL;
    st->rc = rc;
}

static void predict_respond(gp_api *api, gp_cache_entry *entry, const gp_model *model,
                            const gp_point_call *c, int gate, const gp_online_status *ost,
                            call_state *st, gp_response *out)
{
    if (st->rc) {
        gp_api_error(&st->err, out);
        return;
    }
    size_t m = c->m;
    if (st->pr.clamped)
        atomic_fetch_add(&api->variance_clamps, (uint64_t)st->pr.clamped);
    gp_buf b;
    gp_buf_init(&b);
    if (c->oip) { /* an infer is never answered in warm-up (gp_oip_prepare) */
        gp_oip_write_response(&b, c->oip, model, c->name, entry->version, &st->pr, m);
        if (gate)
            gate_record(entry, st->pr.ask_oracle, m);
        gp_buf_respond(&b, 200, out);
        return;
    }
    /* entry's name/version are the row that was served */
    head(&b, c->name, entry->version);
    if (ost->warmup) {
        respond_warmup(&b, ost, m, model->n_outputs);
        gate_record(entry, NULL, m);
    } else
        write_prediction(&b, model, &c->a, &st->pr, m, st->K, st->parts);
    if (gate && !ost->warmup) {
        write_gate(&b, ost, st->pr.ask_oracle, m, model->n_outputs);
        gate_record(entry, st->pr.ask_oracle, m);
    }
    gp_buf_put(&b, "}", 1);
    gp_buf_respond(&b, 200, out);
}

/* Predict calls of one model and version: one look-up, one batched predict
 * (gp_model_predict_batch answers each as it would be answered alone). */
static void run_predicts(gp_api *api, gp_point_call **calls, size_t n, gp_response *res)
{
    gp_cache_entry *entry = NULL;
    const gp_model *model = NULL;
    gp_error err;
    gp_error_clear(&err);
    call_state *st = calloc(n, sizeof *st);
    gp_predict_request *reqs = calloc(n, sizeof *reqs);
    gp_prediction *outs = calloc(n, sizeof *outs);
    int *rcs = calloc(n, sizeof *rcs);
    gp_error *errs = calloc(n, sizeof *errs);
    size_t *idx = calloc(n, sizeof *idx);
    int rc = st && reqs && outs && rcs && errs && idx
                 ? GP_OK
                 : gp_error_set(&err, GP_ENOMEM, NULL, "out of memory");
    if (rc == GP_OK)
        rc = gp_cache_acquire(api, calls[0]->name, calls[0]->version, &entry, &model, &err);
    if (rc) {
        for (size_t i = 0; i < n; i++)
            gp_api_error(&err, &res[i]);
    } else {
        int gate = gp_method_has_gate(model->method);
        gp_online_status ost = {0};
        if (gate)
            gp_model_online_status(model, &ost);
        size_t k = 0;
        for (size_t i = 0; i < n; i++) {
            predict_prepare(api, model, calls[i], gate, &ost, &st[i]);
            if (st[i].rc || ost.warmup)
                continue;
            const predict_args *a = &calls[i]->a;
            reqs[k] = (gp_predict_request){calls[i]->X, calls[i]->m, calls[i]->d,
                                           a->include_noise, a->full, a->q, a->nq, a->comps};
            outs[k] = st[i].pr;
            idx[k++] = i;
        }
        if (k)
            gp_model_predict_batch(model, reqs, outs, rcs, errs, k);
        for (size_t j = 0; j < k; j++) {
            st[idx[j]].pr = outs[j];
            st[idx[j]].rc = rcs[j];
            if (rcs[j])
                st[idx[j]].err = errs[j];
        }
        for (size_t i = 0; i < n; i++)
            predict_respond(api, entry, model, calls[i], gate, &ost, &st[i], &res[i]);
    }
    gp_cache_release(api, entry);
    for (size_t i = 0; st && i < n; i++)
        free(st[i].mem);
    free(st);
    free(reqs);
    free(outs);
    free(rcs);
    free(errs);
    free(idx);
}

static void sample_body(gp_api *api, const char *name, const gp_request *req,
                        gp_response *out);

void gp_api_point_calls_run(gp_api *api, gp_point_call **calls, size_t n, gp_response *res)
{
    if (n == 0)
        return;
    if (calls[0]->kind == GP_CALL_PREDICT)
        run_predicts(api, calls, n, res);
    else
        for (size_t i = 0; i < n; i++)
            sample_body(api, calls[i]->name, &calls[i]->req, &res[i]);
    for (size_t i = 0; i < n; i++)
        gp_api_point_call_free(calls[i]);
}

static void run_one(gp_api *api, int kind, const char *name, const gp_request *req,
                    gp_response *out)
{
    gp_point_call *c = NULL;
    if (gp_api_point_call_parse(api, kind, name, req, &c, out) == GP_OK)
        gp_api_point_calls_run(api, &c, 1, out);
}

void gp_api_predict(gp_api *api, const char *name, const gp_request *req, gp_response *out)
{
    run_one(api, GP_CALL_PREDICT, name, req, out);
}

void gp_api_sample(gp_api *api, const char *name, const gp_request *req, gp_response *out)
{
    run_one(api, GP_CALL_SAMPLE, name, req, out);
}

/* ---- sample ---- */

static const char *const sample_keys[] = {"X",           "version",      "n_samples", "seed",
                                          "include_noise", "observations", NULL};

/* n draws of m points: per draw a list of m numbers, or for p outputs m rows
 * of p (output j of draw s at point i: S[(j n + s) m + i]). */
static void write_draws(gp_buf *b, const char *key, const double *S, size_t m, size_t n,
                        size_t p)
{
    gp_buf_printf(b, ",\"%s\":[", key);
    for (size_t s = 0; s < n; s++) {
        if (s)
            gp_buf_put(b, ",", 1);
        if (p == 1) {
            gp_buf_json_array(b, S + s * m, m, 1);
            continue;
        }
        gp_buf_put(b, "[", 1);
        for (size_t i = 0; i < m; i++) {
            if (i)
                gp_buf_put(b, ",", 1);
            gp_buf_json_array(b, S + s * m + i, p, n * m);
        }
        gp_buf_put(b, "]", 1);
    }
    gp_buf_put(b, "]", 1);
}

static void sample_body(gp_api *api, const char *name, const gp_request *req,
                        gp_response *out)
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
        rc = parse_x_early(api, Xj, &X, &m, &d, err);
    if (rc == GP_OK)
        rc = gp_cache_acquire(api, name, version, &entry, &model, err);
    if (rc == GP_OK)
        rc = parse_x_late(api, model, name, Xj, &X, &m, &d, err);
    if (rc == GP_OK && m > api->cfg.max_covariance_points)
        rc = gp_error_set(err, GP_ETOOBIG, "X",
                          "joint samples at %zu points are above the limit "
                          "max_covariance_points = %zu",
                          m, api->cfg.max_covariance_points);
    size_t p = rc == GP_OK ? model->n_outputs : 1;
    if (rc == GP_OK && (double)m * (double)n_samples * (double)p >
                           (double)api->cfg.max_sample_values)
        rc = gp_error_set(err, GP_ETOOBIG, "n_samples",
                          "%llu samples x %zu points x %zu outputs is above the limit "
                          "max_sample_values = %zu",
                          (unsigned long long)n_samples, m, p, api->cfg.max_sample_values);
    size_t count = m * (size_t)n_samples * p; /* below max_sample_values, checked above */
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
        write_draws(&b, "samples", S, m, (size_t)n_samples, p);
        if (observations)
            write_draws(&b, "observations", S + count, m, (size_t)n_samples, p);
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
 * it holds, its state, the log entries applied and, for a gate model, the
 * threshold and the oracle rate over the last predicted points. */
static int add_online_status(gp_api *api, const char *name, int version, json_t *o,
                             gp_error *err)
{
    gp_cache_entry *e = NULL;
    const gp_model *model = NULL;
    int rc = gp_cache_acquire(api, name, version, &e, &model, err);
    if (rc)
        return rc;
    gp_online_status st;
    gp_model_online_status(model, &st);
    json_t *on = json_object();
    if (on == NULL) {
        gp_cache_release(api, e);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    json_object_set_new(on, "n", json_integer((json_int_t)st.n));
    json_object_set_new(on, "state", json_string(st.warmup ? "warmup" : "online"));
    json_object_set_new(on, "observations", json_integer((json_int_t)e->seq));
    json_object_set_new(o, "n_train", json_integer((json_int_t)st.n));
    if (gp_method_has_gate(model->method)) {
        size_t window = 0;
        double rate = NAN;
        gate_rate(e, &window, &rate);
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
    json_object_set_new(o, "online", on);
    gp_cache_release(api, e);
    return GP_OK;
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
    gp_poisoned_forget(api, name);
    free(out->body);
    out->body = NULL;
    out->body_len = 0;
    out->status = 204;
    out->content_type = "application/json";
}

/* ---- observe ---- */

static const char *const observe_keys[] = {"X", "y", "version", "new_version", NULL};

typedef struct observe_body {
    json_t *obj;
    int version, new_version;
    double *X, *Y;
    size_t k, d, p;
} observe_body;

static void observe_body_free(observe_body *ob)
{
    json_decref(ob->obj);
    free(ob->X);
    free(ob->Y);
}

static int parse_observe(gp_api *api, const gp_request *req, observe_body *ob, gp_error *err)
{
    json_t *e;
    int rc = check_json(req, err);
    if (rc == GP_OK)
        rc = gp_json_parse_body(req, &ob->obj, err);
    if (rc == GP_OK)
        rc = gp_json_known_keys(ob->obj, observe_keys, NULL, err);
    if (rc == GP_OK)
        rc = get_version(ob->obj, &ob->version, err);
    if (rc == GP_OK && (e = json_object_get(ob->obj, "new_version")))
        rc = gp_json_get_bool(e, "new_version", &ob->new_version, err);
    json_t *Xj = rc == GP_OK ? json_object_get(ob->obj, "X") : NULL;
    if (rc == GP_OK && Xj == NULL)
        rc = gp_error_set(err, GP_EINVAL, "X", "X (the inputs observed) is missing");
    if (rc == GP_OK && json_object_get(ob->obj, "y") == NULL)
        rc = gp_error_set(err, GP_EINVAL, "y", "y (the targets observed) is missing");
    if (rc == GP_OK)
        rc = parse_x_early(api, Xj, &ob->X, &ob->k, &ob->d, err);
    return rc;
}

/* X and y against the model: the input kind and width, the output count. */
static int observe_data(gp_api *api, const gp_model *model, const char *name, observe_body *ob,
                        gp_error *err)
{
    size_t ny = 0;
    int rc = parse_x_late(api, model, name, json_object_get(ob->obj, "X"), &ob->X, &ob->k,
                          &ob->d, err);
    if (rc == GP_OK)
        rc = gp_json_targets(json_object_get(ob->obj, "y"), "y", api->cfg.max_points,
                             model->n_outputs > 1, &ob->Y, &ny, &ob->p, err);
    if (rc == GP_OK && ny != ob->k)
        rc = gp_error_set(err, GP_EDATA, "y", "y has %zu rows; X has %zu", ny, ob->k);
    if (rc == GP_OK && ob->p != model->n_outputs)
        rc = gp_error_set(err, GP_EDATA, "y[0]", "y[0] has %zu outputs; model '%s' has %zu",
                          ob->p, name, model->n_outputs);
    return rc;
}

static void respond_observed(gp_buf *b, const char *name, int version, const gp_model *model,
                             uint64_t seq)
{
    gp_online_status st;
    gp_model_online_status(model, &st);
    head(b, name, version);
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
    gp_named_array arrays[2];
    gp_state batch, snap;
    gp_api_xy_state(ob->X, ob->Y, ob->k, ob->d, ob->p, arrays, &batch);
    gp_state_init(&snap);
    pthread_rwlock_wrlock(&e->lock);
    int rc = e->stale ? gp_error_set(err, GP_ECONFLICT, NULL, "stale") : GP_OK;
    double t0 = seconds_now();
    if (rc == GP_OK)
        rc = gp_model_observe(e->model, ob->X, ob->Y, ob->k, err);
    double took = seconds_now() - t0;
    int applied = rc == GP_OK, due = applied && snapshot_due(api, e);
    if (due)
        rc = gp_model_export(e->model, &snap, err);
    gp_online_status st;
    gp_model_online_status(e->model, &st);
    if (rc == GP_OK && key->present) {
        respond_observed(&answer, e->name, e->version, e->model, e->seq + 1);
        if (answer.failed)
            rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory building the response");
    }
    gp_idem_put idem = gp_api_idem_put(key, 200, answer.data, NULL, NULL);
    if (rc == GP_OK)
        rc = gp_store_observe_deferred(api->store, e->id, e->seq, &batch, st.n,
                                       due ? &snap : NULL, key->present ? &idem : NULL, seq,
                                       ticket, err);
    if (rc == GP_OK) {
        e->seq = *seq;
        e->since_snapshot = due ? 0 : e->since_snapshot + 1;
        e->logged_bytes = due ? 0 : e->logged_bytes + ob->k * (ob->d + ob->p) * sizeof(double);
        e->apply_seconds = due ? 0.0 : e->apply_seconds + took;
        if (due)
            e->state_bytes = state_bytes(&snap);
    } else if (applied)
        entry_discard(api, e); /* e->stale: readers waiting on the lock retry */
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
    respond_observed(&b, meta->name, meta->version, a->model, 0);
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
        rc = gp_model_observe(copy, ob->X, ob->Y, ob->k, err);
    if (rc == GP_OK)
        rc = gp_store_meta(api->store, e->name, e->version, &old, err);
    if (rc == GP_OK)
        rc = gp_model_export(copy, &st, err);
    new_version_answer answer = {copy};
    gp_idem_put idem = gp_api_idem_put(key, 200, NULL, new_version_body, &answer);
    if (rc == GP_OK)
        rc = gp_store_save_keyed(api->store, e->name, old.method, old.spec, old.info,
                                 copy->n_train, copy->input_dim, &st, NULL,
                                 key->present ? &idem : NULL, &saved, err);
    gp_state_free(&st);
    gp_model_meta_free(&old);
    if (rc == GP_OK) {
        respond_observed(b, e->name, saved.version, copy, 0);
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
        int rc = entry_acquire(api, name, ob->version, &e, NULL, err);
        if (rc)
            return rc;
        const gp_model *model = e->model; /* method, spec and outputs never change */
        if (!gp_method_can_observe(model->method))
            rc = gp_error_set(err, GP_EUNSUPPORTED, NULL,
                              "method '%s' does not update online: fit a new version with all "
                              "the data instead",
                              model->method->name);
        if (rc == GP_OK && ob->Y == NULL)
            rc = observe_data(api, model, name, ob, err);
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
                respond_observed(b, name, e->version, e->model, seq);
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
        entry_unref(api, e);
        /* another daemon appended first (or our entry went stale): reload, retry;
         * not when a retry with our key recorded first (it is answered instead) */
        if (rc != GP_ECONFLICT || gp_api_key_taken(err) || tries + 1 >= OBSERVE_TRIES)
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
    gp_buf b;
    gp_buf_init(&b);
    gp_api_idem key;
    int rc = check_name(name, &err);
    if (rc == GP_OK)
        rc = gp_api_idem_parse(req, "observe", name, &key, &err);
    /* A retry of a keyed observe: the first answer again, nothing applied. */
    if (rc == GP_OK && gp_api_idem_replay(api, &key, out))
        return;
    if (rc == GP_OK)
        rc = parse_observe(api, req, &ob, &err);
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
