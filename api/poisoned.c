/* Stored versions found non-finite when loaded: reported, not served.
 *
 * A daemon before the finite-value guards (docs/design/numerics.md, "Finite
 * in, finite out") could log an observe that made a model non-finite; such
 * a version would answer null forever. The loader refuses it (cache.c) and
 * records it here, keyed by the store row (id and created_at, as the cache
 * is), so that later requests answer GP_ENONFINITE at once instead of
 * loading and replaying it again, and /readyz, /metrics and its GET say so.
 * The table is bounded: past GP_POISONED_MAX the oldest is forgotten (and
 * found again by its next request). Guarded by api->cache_lock. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

struct gp_poisoned {
    char name[GP_NAME_MAX + 1];
    int version;
    int64_t id;
    char created_at[GP_TIME_LEN];
    char message[GP_ERROR_MESSAGE_LEN];
};

static int same_row(const gp_poisoned *p, const gp_model_meta *meta)
{
    return p->id == meta->id && p->version == meta->version &&
           strcmp(p->name, meta->name) == 0 && strcmp(p->created_at, meta->created_at) == 0;
}

/* The slot of meta, or n_poisoned (lock held). */
static size_t find_locked(const gp_api *api, const gp_model_meta *meta)
{
    size_t i = 0;
    while (i < api->n_poisoned && !same_row(&api->poisoned[i], meta))
        i++;
    return i;
}

int gp_poisoned_check(gp_api *api, const gp_model_meta *meta, gp_error *err)
{
    int rc = GP_OK;
    pthread_mutex_lock(&api->cache_lock);
    size_t i = find_locked(api, meta);
    if (i < api->n_poisoned)
        rc = gp_error_set(err, GP_ENONFINITE, NULL, "%s", api->poisoned[i].message);
    pthread_mutex_unlock(&api->cache_lock);
    return rc;
}

void gp_poisoned_add(gp_api *api, const gp_model_meta *meta, const gp_error *err)
{
    pthread_mutex_lock(&api->cache_lock);
    if (api->poisoned == NULL)
        api->poisoned = calloc(GP_POISONED_MAX, sizeof *api->poisoned);
    size_t i = api->poisoned ? find_locked(api, meta) : 0;
    if (api->poisoned && i == api->n_poisoned) {
        if (i == GP_POISONED_MAX) { /* forget the oldest */
            memmove(api->poisoned, api->poisoned + 1, (i - 1) * sizeof *api->poisoned);
            i--;
        } else
            api->n_poisoned++;
        gp_poisoned *p = &api->poisoned[i];
        snprintf(p->name, sizeof p->name, "%s", meta->name);
        snprintf(p->created_at, sizeof p->created_at, "%s", meta->created_at);
        p->version = meta->version;
        p->id = meta->id;
        snprintf(p->message, sizeof p->message, "%s", err ? err->message : "not finite");
    }
    pthread_mutex_unlock(&api->cache_lock);
}

void gp_poisoned_forget(gp_api *api, const char *name)
{
    pthread_mutex_lock(&api->cache_lock);
    size_t kept = 0;
    for (size_t i = 0; i < api->n_poisoned; i++)
        if (strcmp(api->poisoned[i].name, name) != 0)
            api->poisoned[kept++] = api->poisoned[i];
    api->n_poisoned = kept;
    pthread_mutex_unlock(&api->cache_lock);
}

json_t *gp_poisoned_json(gp_api *api)
{
    json_t *a = json_array();
    pthread_mutex_lock(&api->cache_lock);
    for (size_t i = 0; a && i < api->n_poisoned; i++) {
        const gp_poisoned *p = &api->poisoned[i];
        json_array_append_new(a, json_pack("{s:s, s:i, s:s}", "name", p->name, "version",
                                           p->version, "message", p->message));
    }
    pthread_mutex_unlock(&api->cache_lock);
    return a;
}

size_t gp_poisoned_count(gp_api *api)
{
    pthread_mutex_lock(&api->cache_lock);
    size_t n = api->n_poisoned;
    pthread_mutex_unlock(&api->cache_lock);
    return n;
}
