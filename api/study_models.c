/* The engine's models of a study (docs/design/api.md, "Studies"): per
 * daemon, a table keyed by the study's id holding a copy of the latest
 * stored version of each of its models (study.<name>, study.<name>.c<i>)
 * with the completed trials after it observed one at a time in seq order,
 * so that every replica holding the same history holds the same bits.
 * Before the first version is stored (its refit is a job), an in-memory fit
 * of the same request stands in, never stored. A suggestion never waits for
 * a refit: it takes what is stored and observes the rest (exact: O(N^2) a
 * trial; sgpr: O(M^2)). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/study.h"

#define STUDY_SLOTS 64
#define MAX_MODELS (1 + GP_STUDY_MAX_CONSTRAINTS)

typedef struct study_model {
    gp_model *model; /* owned: the copy (NULL: none yet) */
    int version;     /* the stored version it came from (0: an in-memory fit) */
    size_t base;     /* trials it was fitted on */
    size_t n;        /* trials it holds now (base, then observed) */
} study_model;

struct gp_study_models {
    struct gp_study_engine *table;
    int64_t id;
    pthread_mutex_t lock; /* held by the suggestion using it */
    int busy;             /* users (under the table's lock) */
    uint64_t used;        /* the table's clock when last taken */
    size_t n_models;
    study_model m[MAX_MODELS];
    const gp_model *view[MAX_MODELS];
};

struct gp_study_engine {
    pthread_mutex_t lock;
    gp_study_models *slot[STUDY_SLOTS];
    uint64_t clock;
};

/* ---- the refit schedule ---- */

int gp_study_refit_due(const gp_study_config *c, uint64_t n, uint64_t last)
{
    if (n < c->initial_design || n <= last)
        return 0;
    if (last == 0)
        return 1;
    return (double)n >= ceil(c->refit_ratio * (double)last) || n - last >= c->refit_gap;
}

/* ---- fit requests ---- */

json_t *gp_study_fit_request(const char *study, const gp_study_config *c,
                             const gp_study_data *d, size_t n, int constraint, int async)
{
    char name[GP_NAME_MAX + 1];
    gp_study_model_name(study, constraint, name);
    json_t *fit = json_deep_copy(c->model), *X = json_array(), *y = json_array();
    const double *col = constraint < 0 ? d->y : d->C + (size_t)constraint * d->n;
    for (size_t i = 0; fit && X && y && i < n; i++) {
        json_t *row = json_array();
        for (size_t j = 0; row && j < d->D; j++)
            json_array_append_new(row, json_real(d->X[i * d->D + j]));
        json_array_append_new(X, row);
        json_array_append_new(y, json_real(col[i]));
    }
    if (fit == NULL || X == NULL || y == NULL) {
        json_decref(fit);
        json_decref(X);
        json_decref(y);
        return NULL;
    }
    json_object_set_new(fit, "name", json_string(name));
    json_object_set_new(fit, "method", json_string(gp_study_method_for(c, n)));
    json_object_set_new(fit, "seed", json_integer((json_int_t)c->seed));
    json_object_set_new(fit, "async", json_boolean(async));
    /* a study refits after every few trials: no validation report (its cost
     * would multiply the refit's, docs/design/api.md "Validation") */
    json_object_set_new(fit, "validation", json_false());
    json_object_set_new(fit, "X", X);
    json_object_set_new(fit, "y", y);
    return fit;
}

static int parse_fit(gp_api *api, json_t *fit, gp_fit_job **job, gp_error *err)
{
    char *text = fit ? json_dumps(fit, GP_JSON_FLAGS) : NULL;
    json_decref(fit);
    if (text == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    gp_request req = {.content_type = "application/json", .body = text, .body_len = strlen(text)};
    int rc = gp_api_parse_fit(api, &req, job, err);
    free(text);
    return rc;
}

size_t gp_study_refit_jobs(gp_api *api, const char *study, const gp_study_config *c,
                          const gp_study_data *d, gp_fit_job **jobs)
{
    size_t n = 0;
    for (int k = -1; k < (int)c->n_constraints; k++) {
        gp_error err;
        gp_error_clear(&err);
        if (parse_fit(api, gp_study_fit_request(study, c, d, d->n, k, 1), &jobs[n], &err) ==
            GP_OK)
            n++;
        else
            fprintf(stderr, "gpserve: the refit of study '%s' at %zu trials was not made: %s\n",
                    study, d->n, err.message);
    }
    return n;
}

/* ---- the table ---- */

int gp_study_engine_init(gp_api *api)
{
    api->studies = calloc(1, sizeof *api->studies);
    if (api->studies == NULL)
        return GP_ENOMEM;
    if (pthread_mutex_init(&api->studies->lock, NULL) != 0) {
        free(api->studies);
        api->studies = NULL;
        return GP_EINTERNAL;
    }
    return GP_OK;
}

static void entry_free(gp_study_models *e)
{
    if (e == NULL)
        return;
    for (size_t k = 0; k < MAX_MODELS; k++)
        gp_model_free(e->m[k].model);
    pthread_mutex_destroy(&e->lock);
    free(e);
}

void gp_study_engine_destroy(gp_api *api)
{
    if (api->studies == NULL)
        return;
    for (size_t i = 0; i < STUDY_SLOTS; i++)
        entry_free(api->studies->slot[i]);
    pthread_mutex_destroy(&api->studies->lock);
    free(api->studies);
    api->studies = NULL;
}

/* The entry of study id, made (in the least recently used idle slot) when
 * absent; NULL when every slot is busy or memory ran out. */
static gp_study_models *take_entry(struct gp_study_engine *t, int64_t id)
{
    pthread_mutex_lock(&t->lock);
    gp_study_models *e = NULL;
    size_t free_slot = STUDY_SLOTS, lru = STUDY_SLOTS;
    for (size_t i = 0; i < STUDY_SLOTS && e == NULL; i++) {
        gp_study_models *s = t->slot[i];
        if (s && s->id == id)
            e = s;
        else if (s == NULL && free_slot == STUDY_SLOTS)
            free_slot = i;
        else if (s && s->busy == 0 && (lru == STUDY_SLOTS || s->used < t->slot[lru]->used))
            lru = i;
    }
    size_t victim = free_slot < STUDY_SLOTS ? free_slot : lru;
    if (e == NULL && victim < STUDY_SLOTS && (e = calloc(1, sizeof *e)) != NULL) {
        if (pthread_mutex_init(&e->lock, NULL) != 0) {
            free(e);
            e = NULL;
        } else {
            e->id = id;
            e->table = t;
            entry_free(t->slot[victim]);
            t->slot[victim] = e;
        }
    }
    if (e) {
        e->busy++;
        e->used = ++t->clock;
    }
    pthread_mutex_unlock(&t->lock);
    return e;
}

void gp_study_models_forget(gp_api *api, int64_t id)
{
    struct gp_study_engine *t = api->studies;
    pthread_mutex_lock(&t->lock);
    for (size_t i = 0; i < STUDY_SLOTS; i++)
        if (t->slot[i] && t->slot[i]->id == id && t->slot[i]->busy == 0) {
            entry_free(t->slot[i]);
            t->slot[i] = NULL;
        }
    pthread_mutex_unlock(&t->lock);
}

void gp_study_models_release(gp_study_models *e)
{
    if (e == NULL)
        return;
    struct gp_study_engine *t = e->table;
    pthread_mutex_unlock(&e->lock);
    pthread_mutex_lock(&t->lock);
    e->busy--;
    pthread_mutex_unlock(&t->lock);
}

/* ---- bringing one model up to date ---- */

/* A copy of the latest stored version of name when it holds more trials
 * than sm's base (fresher hyperparameters) and no more than n. */
static int take_version(gp_api *api, const char *name, size_t n, study_model *sm, gp_error *err)
{
    gp_model_meta meta;
    int rc = gp_rows_meta(api, name, 0, 0, &meta, err);
    if (rc == GP_ENOTFOUND) {
        gp_error_clear(err);
        return GP_OK;
    }
    if (rc || meta.version == sm->version) {
        gp_model_meta_free(&meta);
        return rc;
    }
    gp_cache_entry *ce = NULL;
    const gp_model *stored = NULL;
    rc = gp_cache_acquire(api, name, meta.version, &ce, &stored, err);
    gp_online_status os;
    if (rc == GP_OK)
        gp_model_online_status(stored, &os);
    if (rc == GP_OK && os.n > sm->base && os.n <= n) {
        gp_state st;
        gp_state_init(&st);
        gp_model *copy = NULL;
        rc = gp_model_export(stored, &st, err);
        if (rc == GP_OK)
            rc = gp_model_import(stored->method, &st, &copy, err);
        gp_state_free(&st);
        if (rc == GP_OK) {
            gp_model_free(sm->model);
            *sm = (study_model){.model = copy, .version = meta.version, .base = os.n,
                                .n = os.n};
        }
    }
    if (ce)
        gp_cache_release(api, ce);
    gp_model_meta_free(&meta);
    return rc;
}

/* Observe trials sm->n .. n - 1 one at a time (the same steps on every
 * replica, whenever it was asked). */
static int observe_rest(study_model *sm, const gp_study_data *d, const double *col, size_t n,
                        gp_error *err)
{
    for (; sm->n < n; sm->n++) {
        int rc = gp_model_observe(sm->model, d->X + sm->n * d->D, col + sm->n, 1, err);
        if (rc)
            return rc;
    }
    return GP_OK;
}

/* An in-memory fit (never stored) of the first n trials. */
static int fit_in_memory(gp_api *api, const char *study, const gp_study_config *c,
                         const gp_study_data *d, int k, size_t n, study_model *sm, gp_error *err)
{
    gp_fit_job *job = NULL;
    int rc = parse_fit(api, gp_study_fit_request(study, c, d, n, k - 1, 0), &job, err);
    gp_model *model = NULL;
    if (rc == GP_OK)
        rc = gp_api_fit_model(api, job, NULL, NULL, NULL, &model, err);
    gp_fit_job_free(job);
    if (rc)
        return rc;
    gp_model_free(sm->model);
    *sm = (study_model){.model = model, .version = 0, .base = n, .n = n};
    return GP_OK;
}

static int update_model(gp_api *api, const char *study, const gp_study_config *c,
                        const gp_study_data *d, int k, study_model *sm, gp_error *err)
{
    char name[GP_NAME_MAX + 1];
    gp_study_model_name(study, k - 1, name);
    const double *col = k == 0 ? d->y : d->C + (size_t)(k - 1) * d->n;
    int rc = take_version(api, name, d->n, sm, err);
    if (rc)
        return rc;
    /* a model ahead of this snapshot (a later one was served first) holds
     * more of the same history: taken as it is */
    if (sm->model && (sm->n >= d->n || observe_rest(sm, d, col, d->n, err) == GP_OK))
        return GP_OK;
    /* No version yet: the stand-in is fitted on the first initial_design
     * trials (the first refit's, whenever this daemon is asked) and
     * observes the rest, so replicas agree while they wait for the refit.
     * An observe refused (the factor lost definiteness): a fit of them all. */
    gp_error_clear(err);
    size_t base = sm->model == NULL && c->initial_design < d->n ? (size_t)c->initial_design : d->n;
    rc = fit_in_memory(api, study, c, d, k, base, sm, err);
    if (rc == GP_OK && observe_rest(sm, d, col, d->n, err) != GP_OK) {
        gp_error_clear(err);
        rc = fit_in_memory(api, study, c, d, k, d->n, sm, err);
    }
    return rc;
}

int gp_study_models_acquire(gp_api *api, int64_t id, const char *study,
                            const gp_study_config *c, const gp_study_data *d,
                            gp_study_models **out, const gp_model *const **models,
                            gp_error *err)
{
    *out = NULL;
    gp_study_models *e = take_entry(api->studies, id);
    if (e == NULL)
        return gp_error_set(err, GP_EOVERLOADED, NULL,
                            "every study slot of this daemon is in use; retry");
    pthread_mutex_lock(&e->lock);
    e->n_models = 1 + c->n_constraints;
    int rc = GP_OK;
    for (size_t k = 0; k < e->n_models && rc == GP_OK; k++) {
        rc = update_model(api, study, c, d, (int)k, &e->m[k], err);
        e->view[k] = e->m[k].model;
    }
    if (rc) {
        gp_study_models_release(e);
        return rc;
    }
    *out = e;
    *models = e->view;
    return GP_OK;
}
