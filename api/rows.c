/* The rows the api resolved from the store, kept while the store's change
 * generation says nothing changed (docs/design/storage.md, "The change
 * generation"), so that a request for a model that nothing wrote to asks the
 * store nothing: the model cache (cache.c) finds its entry from the row's
 * id, version and created_at, and GET /v1/models/{name} answers from the
 * row and the version list.
 *
 * A slot holds what the store answered for one question: the row of
 * (name, version asked; 0 = the latest), brief or full (with spec and info),
 * the list of a name's versions, or the GET body of (name, version), tagged
 * with the
 * generation read BEFORE the store was asked. It is used while
 * gp_store_generation still answers that tag: any write of this daemon, and
 * any commit of another daemon on the same database (seen by the store's
 * watch within its bound), changes the generation, and every slot is then
 * read again at its next use. Generation 0 (the watch is down) keeps nothing:
 * every request asks the store, as before the watch. Answers other than a
 * row (not found, errors) are not kept. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

/* What a slot holds. */
enum row_kind { ROW_META = 1, ROW_VERSIONS, ROW_BODY, ROW_ALIASES };
/* Slots probed from a name's hash before the least recently used of them is
 * replaced. */
#define ROWS_PROBE 8

struct gp_row_slot {
    char name[GP_NAME_MAX + 1];
    int kind;  /* enum row_kind; 0: empty */
    int asked; /* the version asked (0: the latest; ROW_VERSIONS: 0) */
    uint64_t gen; /* 0: empty */
    uint64_t stamp;
    gp_model_meta meta; /* spec and info NULL for a brief row */
    int *versions;
    size_t n_versions;
    gp_alias_row *aliases; /* ROW_ALIASES: every alias of the name */
    size_t n_aliases;
    char *text; /* a GET body: head, NUL, tail, NUL (text_len bytes) */
    size_t text_len, head_len;
};

static void slot_clear(gp_row_slot *s)
{
    gp_model_meta_free(&s->meta);
    free(s->versions);
    free(s->aliases);
    free(s->text);
    memset(s, 0, sizeof *s);
}

int gp_rows_init(gp_api *api)
{
    size_t n = 64;
    while (n < 4 * api->cfg.model_cache)
        n *= 2;
    api->rows = calloc(n, sizeof *api->rows);
    if (api->rows == NULL)
        return GP_ENOMEM;
    if (pthread_mutex_init(&api->rows_lock, NULL) != 0) {
        free(api->rows);
        api->rows = NULL;
        return GP_EINTERNAL;
    }
    api->n_rows = n;
    return GP_OK;
}

void gp_rows_destroy(gp_api *api)
{
    if (api->rows == NULL)
        return;
    for (size_t i = 0; i < api->n_rows; i++)
        slot_clear(&api->rows[i]);
    free(api->rows);
    api->rows = NULL;
    pthread_mutex_destroy(&api->rows_lock);
}

static size_t slot_home(const gp_api *api, const char *name, int kind, int asked)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    h = (h ^ (uint64_t)(unsigned)kind) * 1099511628211ull;
    h = (h ^ (uint64_t)(unsigned)asked) * 1099511628211ull;
    return (size_t)(h & (api->n_rows - 1));
}

/* The slot of (name, kind, asked) read at generation gen, or NULL
 * (rows_lock held). */
static gp_row_slot *slot_find(gp_api *api, const char *name, int kind, int asked, uint64_t gen)
{
    size_t home = slot_home(api, name, kind, asked);
    for (size_t k = 0; k < ROWS_PROBE; k++) {
        gp_row_slot *s = &api->rows[(home + k) & (api->n_rows - 1)];
        if (s->gen == gen && s->kind == kind && s->asked == asked && strcmp(s->name, name) == 0)
            return s;
    }
    return NULL;
}

/* A slot for (name, kind, asked), emptied: its own, an empty or outdated
 * one, or the least recently used of the probe window (rows_lock held). */
static gp_row_slot *slot_take(gp_api *api, const char *name, int kind, int asked, uint64_t gen)
{
    size_t home = slot_home(api, name, kind, asked);
    gp_row_slot *pick = NULL;
    for (size_t k = 0; k < ROWS_PROBE; k++) {
        gp_row_slot *s = &api->rows[(home + k) & (api->n_rows - 1)];
        if (s->gen != 0 && s->kind == kind && s->asked == asked && strcmp(s->name, name) == 0) {
            pick = s;
            break;
        }
        if (pick == NULL || (pick->gen == gen && (s->gen != gen || s->stamp < pick->stamp)))
            pick = s;
    }
    slot_clear(pick);
    snprintf(pick->name, sizeof pick->name, "%s", name);
    pick->kind = kind;
    pick->asked = asked;
    pick->gen = gen;
    pick->stamp = ++api->rows_clock;
    return pick;
}

/* Copy meta (with its texts when full) into out; 0 or GP_ENOMEM. */
static int meta_copy(const gp_model_meta *meta, int full, gp_model_meta *out)
{
    *out = *meta;
    out->spec = out->info = NULL;
    if (!full || meta->spec == NULL)
        return GP_OK;
    out->spec = strdup(meta->spec);
    out->info = meta->info ? strdup(meta->info) : NULL;
    if (out->spec == NULL || (meta->info && out->info == NULL)) {
        gp_model_meta_free(out);
        return GP_ENOMEM;
    }
    return GP_OK;
}

/* The kept row, if it was read at gen (and holds the texts when full). */
static int row_lookup(gp_api *api, const char *name, int version, int full, uint64_t gen,
                      gp_model_meta *meta)
{
    int found = 0;
    pthread_mutex_lock(&api->rows_lock);
    gp_row_slot *s = slot_find(api, name, ROW_META, version, gen);
    if (s && (!full || s->meta.spec)) {
        s->stamp = ++api->rows_clock;
        found = meta_copy(&s->meta, full, meta) == GP_OK;
    }
    pthread_mutex_unlock(&api->rows_lock);
    return found;
}

static void row_keep(gp_api *api, const char *name, int version, uint64_t gen,
                     const gp_model_meta *meta)
{
    pthread_mutex_lock(&api->rows_lock);
    gp_row_slot *s = slot_take(api, name, ROW_META, version, gen);
    if (meta_copy(meta, 1, &s->meta) != GP_OK)
        slot_clear(s);
    pthread_mutex_unlock(&api->rows_lock);
}

int gp_rows_meta(gp_api *api, const char *name, int version, int full, gp_model_meta *meta,
                 gp_error *err)
{
    memset(meta, 0, sizeof *meta);
    /* Read before the store is asked: a write that commits meanwhile moves
     * the generation past this tag, so what is kept is never used after it. */
    const uint64_t gen = gp_store_generation(api->store);
    if (gen && row_lookup(api, name, version, full, gen, meta))
        return GP_OK;
    int rc = full ? gp_store_meta(api->store, name, version, meta, err)
                  : gp_store_meta_brief(api->store, name, version, meta, err);
    if (rc == GP_OK && gen)
        row_keep(api, name, version, gen, meta);
    return rc;
}

int gp_rows_versions(gp_api *api, const char *name, int **versions, size_t *count,
                     gp_error *err)
{
    *versions = NULL;
    *count = 0;
    const uint64_t gen = gp_store_generation(api->store);
    if (gen) {
        int found = 0;
        pthread_mutex_lock(&api->rows_lock);
        gp_row_slot *s = slot_find(api, name, ROW_VERSIONS, 0, gen);
        if (s) {
            s->stamp = ++api->rows_clock;
            *versions = malloc((s->n_versions ? s->n_versions : 1) * sizeof **versions);
            if (*versions) {
                memcpy(*versions, s->versions, s->n_versions * sizeof **versions);
                *count = s->n_versions;
                found = 1;
            }
        }
        pthread_mutex_unlock(&api->rows_lock);
        if (found)
            return GP_OK;
    }
    int rc = gp_store_versions(api->store, name, versions, count, err);
    if (rc == GP_OK && gen) {
        int *copy = malloc((*count ? *count : 1) * sizeof *copy);
        if (copy) {
            memcpy(copy, *versions, *count * sizeof *copy);
            pthread_mutex_lock(&api->rows_lock);
            gp_row_slot *s = slot_take(api, name, ROW_VERSIONS, 0, gen);
            s->versions = copy;
            s->n_versions = *count;
            pthread_mutex_unlock(&api->rows_lock);
        }
    }
    return rc;
}

/* A malloc'ed copy of n alias rows (one row's room when n is 0: malloc(0) may be NULL). */
static gp_alias_row *aliases_copy(const gp_alias_row *rows, size_t n)
{
    gp_alias_row *copy = malloc((n ? n : 1) * sizeof *copy);
    if (copy && n)
        memcpy(copy, rows, n * sizeof *copy);
    return copy;
}

int gp_rows_aliases(gp_api *api, const char *name, gp_alias_row **rows, size_t *count,
                    gp_error *err)
{
    *rows = NULL;
    *count = 0;
    const uint64_t gen = gp_store_generation(api->store);
    if (gen) {
        pthread_mutex_lock(&api->rows_lock);
        gp_row_slot *s = slot_find(api, name, ROW_ALIASES, 0, gen);
        if (s) {
            s->stamp = ++api->rows_clock;
            *rows = aliases_copy(s->aliases, s->n_aliases);
            *count = *rows ? s->n_aliases : 0;
        }
        pthread_mutex_unlock(&api->rows_lock);
        if (*rows)
            return GP_OK;
    }
    int rc = gp_store_aliases(api->store, name, rows, count, err);
    gp_alias_row *copy = rc == GP_OK && gen ? aliases_copy(*rows, *count) : NULL;
    if (copy) {
        pthread_mutex_lock(&api->rows_lock);
        gp_row_slot *s = slot_take(api, name, ROW_ALIASES, 0, gen);
        s->aliases = copy;
        s->n_aliases = *count;
        pthread_mutex_unlock(&api->rows_lock);
    }
    return rc;
}

int gp_rows_body(gp_api *api, const char *name, int version, uint64_t gen, gp_model_meta *meta,
                 char **text, size_t *head_len)
{
    memset(meta, 0, sizeof *meta);
    *text = NULL;
    *head_len = 0;
    if (gen == 0 || version < 0)
        return 0;
    int found = 0;
    pthread_mutex_lock(&api->rows_lock);
    gp_row_slot *s = slot_find(api, name, ROW_BODY, version, gen);
    if (s && (*text = malloc(s->text_len)) != NULL) {
        s->stamp = ++api->rows_clock;
        memcpy(*text, s->text, s->text_len);
        *head_len = s->head_len;
        meta_copy(&s->meta, 0, meta);
        found = 1;
    }
    pthread_mutex_unlock(&api->rows_lock);
    return found;
}

void gp_rows_body_keep(gp_api *api, const char *name, int version, uint64_t gen,
                       const gp_model_meta *meta, const char *text, size_t head_len,
                       size_t text_len)
{
    if (gen == 0 || version < 0)
        return;
    char *copy = malloc(text_len);
    if (copy == NULL)
        return;
    memcpy(copy, text, text_len);
    pthread_mutex_lock(&api->rows_lock);
    gp_row_slot *s = slot_take(api, name, ROW_BODY, version, gen);
    meta_copy(meta, 0, &s->meta);
    s->text = copy;
    s->text_len = text_len;
    s->head_len = head_len;
    pthread_mutex_unlock(&api->rows_lock);
}
