/* The LRU cache of loaded models (the bottom of api/: it uses the store,
 * core and the leaf helpers, and no route).
 *
 * The cache is keyed by the store row (name, version, row id, created_at), so
 * a model deleted and fitted again under the same name and version is never
 * confused with the old one. Entries are reference counted: eviction takes an
 * entry out of the table at once, and the model is freed when its last user
 * releases it. Every request resolves the row first (version 0: the latest;
 * rows.c, which asks the store only when its change generation moved: a
 * write here, or a commit of another daemon on the same database seen by the
 * store's watch), so versions written by another daemon are served, a model
 * deleted by another daemon is not, and entries it appended to a log are
 * replayed (catch_up). A version is loaded
 * from its snapshot (or fitted arrays) and the observation log entries after
 * it, which this file also writes the shape of (gp_api_xy_state). */
#define _GNU_SOURCE /* pthread_rwlockattr_setkind_np: observes must not starve behind reads */
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/cache.h"

static void entry_free(gp_cache_entry *e)
{
    gp_model_free(e->model);
    free(e->outputs);
    json_decref(e->features);
    json_decref(e->targets);
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

/* info: the version's info JSON (its "outputs"; may be NULL). */
static gp_cache_entry *entry_new(const gp_model_meta *meta, const char *info, gp_model *model)
{
    gp_cache_entry *e = calloc(1, sizeof *e);
    if (e == NULL)
        return NULL;
    if (gp_api_named_outputs(model) &&
        (e->outputs = gp_api_outputs_text(info, model->n_outputs)) == NULL) {
        free(e);
        return NULL;
    }
    e->features = gp_api_info_names(info, "feature_names");
    e->targets = gp_api_info_names(info, "target_names");
    pthread_rwlockattr_t attr;
    pthread_rwlockattr_init(&attr);
    pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    int rc = pthread_rwlock_init(&e->lock, &attr);
    pthread_rwlockattr_destroy(&attr);
    if (rc != 0) {
        json_decref(e->features);
    json_decref(e->targets);
        free(e->outputs);
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
void gp_cache_entry_discard(gp_api *api, gp_cache_entry *e)
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
    gp_cache_entry *e = entry_new(meta, meta->info, model);
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

double gp_cache_seconds_now(void)
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
    const gp_named_array *N = gp_state_find(batch, "noise"); /* known per-point noise */
    if (X == NULL || Y == NULL || X->rows != Y->rows || X->cols != r->model->input_dim ||
        Y->cols != gp_api_target_columns(r->model) || (N && (N->rows != X->rows || N->cols != 1)))
        return gp_error_set(err, GP_EDATA, NULL, "observation log entry %llu is malformed",
                            (unsigned long long)seq);
    r->bytes += (X->rows * (X->cols + Y->cols + (N ? 1 : 0))) * sizeof(double);
    int rc = gp_model_observe_noise(r->model, X->data, Y->data, N ? N->data : NULL, X->rows, err);
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
        double t0 = gp_cache_seconds_now();
        rc = replay(api, e->id, e->model, e->seq, target, &e->logged_bytes, err);
        e->apply_seconds += gp_cache_seconds_now() - t0;
        if (rc == GP_OK) {
            e->since_snapshot += (size_t)(target - e->seq);
            e->seq = target;
        }
        pthread_rwlock_unlock(&e->lock);
        if (rc)
            gp_cache_entry_discard(api, e);
    }
    pthread_mutex_unlock(&e->write_lock);
    return rc;
}

size_t gp_cache_state_bytes(const gp_state *st)
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
    size_t sbytes = gp_cache_state_bytes(&st);
    gp_state_free(&st);
    double t0 = gp_cache_seconds_now();
    if (rc == GP_OK && meta->obs_seq > snap)
        rc = replay(api, meta->id, loaded, snap, meta->obs_seq, &logged, err);
    double replayed = gp_cache_seconds_now() - t0;
    /* the brief row has no info: the names of the outputs and of the inputs
     * (feature_names, which any model may have) are read from the full one */
    gp_model_meta full;
    memset(&full, 0, sizeof full);
    if (rc == GP_OK && meta->info == NULL)
        rc = gp_rows_meta(api, meta->name, meta->version, 1, &full, err);
    gp_cache_entry *fresh =
        rc == GP_OK ? entry_new(meta, meta->info ? meta->info : full.info, loaded) : NULL;
    gp_model_meta_free(&full);
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

void gp_cache_entry_unref(gp_api *api, gp_cache_entry *e)
{
    pthread_mutex_lock(&api->cache_lock);
    int gone = --e->refs == 0 && e->detached;
    pthread_mutex_unlock(&api->cache_lock);
    if (gone)
        entry_free(e);
}

/* The entry of (name, version), referenced and caught up with the store's
 * log, but not locked; *meta_out (may be NULL) gets the row. */
int gp_cache_entry_acquire(gp_api *api, const char *name, int version, gp_cache_entry **entry,
                         gp_model_meta *meta_out, gp_error *err)
{
    *entry = NULL;
    int rc = gp_api_check_name(name, err);
    gp_model_meta meta;
    memset(&meta, 0, sizeof meta);
    gp_cache_entry *e = NULL;
    if (rc == GP_OK)
        rc = gp_rows_meta(api, name, version, 0, &meta, err);
    if (rc == GP_OK)
        rc = entry_get(api, &meta, &e, err);
    if (rc == GP_OK && meta.obs_seq > e->seq && (rc = catch_up(api, e, meta.obs_seq, err))) {
        if (rc == GP_ENONFINITE) /* another daemon logged it: the version is poisoned */
            gp_poisoned_add(api, &meta, err);
        gp_cache_entry_unref(api, e);
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
        int rc = gp_cache_entry_acquire(api, name, version, &e, NULL, err);
        if (rc)
            return rc;
        pthread_rwlock_rdlock(&e->lock);
        if (!e->stale || tries >= GP_CACHE_TRIES) {
            if (e->stale) { /* discarded under us again and again: give up */
                pthread_rwlock_unlock(&e->lock);
                gp_cache_entry_unref(api, e);
                return gp_error_set(err, GP_ENOTREADY, NULL,
                                    "model '%s' is being reloaded; try again", name);
            }
            *entry = e;
            *model = e->model;
            return GP_OK;
        }
        pthread_rwlock_unlock(&e->lock);
        gp_cache_entry_unref(api, e);
    }
}

void gp_cache_release(gp_api *api, gp_cache_entry *e)
{
    if (e == NULL)
        return;
    pthread_rwlock_unlock(&e->lock);
    gp_cache_entry_unref(api, e);
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
 * only the last GP_ORACLE_WINDOW count. */
void gp_cache_gate_record(gp_cache_entry *e, const unsigned char *flags, size_t m)
{
    size_t from = m > GP_ORACLE_WINDOW ? m - GP_ORACLE_WINDOW : 0;
    pthread_mutex_lock(&e->gate_lock);
    for (size_t i = from; i < m; i++) {
        if (e->ring_filled == GP_ORACLE_WINDOW)
            e->ring_ones -= e->ring[e->ring_pos];
        else
            e->ring_filled++;
        e->ring[e->ring_pos] = !flags || flags[i] ? 1 : 0;
        e->ring_ones += e->ring[e->ring_pos];
        e->ring_pos = (e->ring_pos + 1) % GP_ORACLE_WINDOW;
    }
    pthread_mutex_unlock(&e->gate_lock);
}

void gp_cache_gate_rate(gp_cache_entry *e, size_t *window, double *rate)
{
    pthread_mutex_lock(&e->gate_lock);
    *window = e->ring_filled;
    *rate = e->ring_filled ? (double)e->ring_ones / (double)e->ring_filled : NAN;
    pthread_mutex_unlock(&e->gate_lock);
}

/* ---- the observation log's rows ---- */

void gp_api_noise_array(const double *noise, size_t n, gp_named_array *slot, gp_state *st)
{
    memset(slot, 0, sizeof *slot);
    snprintf(slot->name, sizeof slot->name, "noise");
    slot->rows = n;
    slot->cols = 1;
    slot->data = (double *)noise;
    st->count++;
    st->capacity++;
}

void gp_api_xy_state(const double *X, const double *y, size_t n, size_t d, size_t p,
                     gp_named_array arrays[2], gp_state *st)
{
    memset(arrays, 0, 2 * sizeof *arrays);
    snprintf(arrays[0].name, sizeof arrays[0].name, "X");
    arrays[0].rows = n;
    arrays[0].cols = d;
    arrays[0].data = (double *)X;
    snprintf(arrays[1].name, sizeof arrays[1].name, "y");
    arrays[1].rows = n;
    arrays[1].cols = p;
    arrays[1].data = (double *)y;
    *st = (gp_state){.arrays = arrays, .count = 2, .capacity = 2};
}
