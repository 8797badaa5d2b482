/* gpserve store: the models (save, look-up, versions, list, load, delete),
 * on either back end (db.h: SQLite or PostgreSQL), written through the
 * connections and retried transactions of store_conn.c. */
#include "store/store_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- models -------------------------------------------------------------- */

void gp_model_meta_free(gp_model_meta *meta)
{
    if (meta == NULL)
        return;
    free(meta->spec);
    free(meta->info);
    meta->spec = NULL;
    meta->info = NULL;
}

void gp_model_meta_free_array(gp_model_meta *metas, size_t count)
{
    if (metas == NULL)
        return;
    for (size_t i = 0; i < count; i++)
        gp_model_meta_free(&metas[i]);
    free(metas);
}

/* Fill meta from a row of id, name, version, method, spec, info, n_train,
 * input_dim, created_at, obs_seq (spec and info NULL in the brief forms, read
 * with with_texts 0). On failure meta holds nothing to free. */
static int read_meta_row(gp_db_stmt *st, gp_model_meta *meta, int with_texts, gp_error *err)
{
    memset(meta, 0, sizeof *meta);
    meta->id = gp_db_col_int64(st, 0);
    const int64_t version = gp_db_col_int64(st, 2);
    const int64_t n_train = gp_db_col_int64(st, 6);
    const int64_t input_dim = gp_db_col_int64(st, 7);
    const int64_t obs_seq = gp_db_col_int64(st, 9);
    if (!gp_store_copy_col(st, 1, meta->name, sizeof meta->name, 0) || version < 1 ||
        version > INT_MAX || !gp_store_copy_col(st, 3, meta->method, sizeof meta->method, 0) ||
        !gp_store_copy_col(st, 8, meta->created_at, sizeof meta->created_at, 1) || n_train < 0 ||
        input_dim < 0 || obs_seq < 0 ||
        (with_texts && (gp_db_col_type(st, 4) == GP_DB_NULL ||
                        gp_db_col_type(st, 5) == GP_DB_NULL)))
        return gp_error_set(err, GP_EDATA, "name", "model row %lld is corrupt",
                            (long long)meta->id);
    meta->version = (int)version;
    meta->n_train = (size_t)n_train;
    meta->input_dim = (size_t)input_dim;
    meta->obs_seq = (uint64_t)obs_seq;
    if (with_texts && (gp_store_dup_col(st, 4, &meta->spec) || gp_store_dup_col(st, 5, &meta->info))) {
        gp_model_meta_free(meta);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory reading model metadata");
    }
    return GP_OK;
}

static int check_name(const char *name, gp_error *err)
{
    if (name == NULL || name[0] == '\0' || strlen(name) > GP_NAME_MAX)
        return gp_error_set(err, GP_EINVAL, "name", "model name must have 1..%d characters",
                            GP_NAME_MAX);
    return GP_OK;
}

typedef struct save_ctx {
    const char *name, *method, *spec, *info;
    size_t n_train, input_dim;
    const gp_state *state;
    const gp_job_done *job; /* NULL, or the durable job this save ends */
    const gp_idem_put *idem; /* NULL, or the key whose answer this save records */
    const gp_audit_put *audit; /* NULL, or the audit row of this save */
    int64_t id;
    int version;
    char created_at[GP_TIME_LEN];
} save_ctx;

/* The new row as the callbacks see it (spec and info borrowed from c). */
static void saved_meta(const save_ctx *c, gp_model_meta *meta)
{
    memset(meta, 0, sizeof *meta);
    meta->id = c->id;
    snprintf(meta->name, sizeof meta->name, "%s", c->name);
    meta->version = c->version;
    snprintf(meta->method, sizeof meta->method, "%s", c->method);
    meta->spec = (char *)c->spec; /* read only: the callbacks take const meta */
    meta->info = (char *)c->info;
    meta->n_train = c->n_train;
    meta->input_dim = c->input_dim;
    memcpy(meta->created_at, c->created_at, sizeof meta->created_at);
}

/* Inside a save's transaction: end c->job succeeded with its result (made
 * from the new row), or GP_ECONFLICT when its owner no longer holds it. */
static int end_job_in_save(gp_store *s, const save_ctx *c, gp_error *err)
{
    const gp_job_done *jd = c->job;
    gp_model_meta meta;
    saved_meta(c, &meta);
    char *result = jd->result ? jd->result(&meta, jd->ctx) : NULL;
    if (jd->result && result == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory writing job '%s''s result",
                            jd->id);
    int rc = gp_store_job_end_locked(s, jd->id, jd->owner, "succeeded", jd->progress, NULL,
                                     result, err);
    free(result);
    return rc;
}

static int save_once(gp_store *s, void *vctx, gp_error *err)
{
    save_ctx *c = vctx;
    gp_store_conn *w = s->w;
    int rc = gp_store_exec(w, GPS_BEGIN_IMMEDIATE, err, "starting a save");
    if (rc)
        return rc;
    if ((rc = gp_store_lock_name(w, c->name, err)))
        goto fail;
    gp_db_stmt *st = gp_store_stmt(w, GPS_MAX_VERSION);
    int src = gp_db_bind_text(st, 1, c->name);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    if (src != GP_DB_ROW) {
        rc = gp_store_sql_error(w, src, err, "reading the latest version");
        gp_store_stmt_done(st);
        goto fail;
    }
    int64_t max = gp_db_col_int64(st, 0);
    gp_store_stmt_done(st);
    if (max < 0 || max >= INT_MAX) {
        rc = gp_error_set(err, GP_EINTERNAL, "name", "model '%s' has no free version number",
                          c->name);
        goto fail;
    }
    c->version = (int)max + 1;
    gp_store_now(c->created_at);
    st = gp_store_stmt(w, GPS_INSERT_MODEL);
    src = gp_db_bind_text(st, 1, c->name);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 2, c->version);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 3, c->method);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 4, c->spec);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 5, c->info);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 6, (int64_t)c->n_train);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 7, (int64_t)c->input_dim);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 8, c->created_at);
    if (src == GP_DB_OK)
        src = gp_db_step(st); /* RETURNING id */
    if (src == GP_DB_ROW)
        c->id = gp_db_col_int64(st, 0);
    gp_store_stmt_done(st);
    if (src != GP_DB_ROW) {
        rc = gp_store_sql_error(w, src, err, "saving a model");
        goto fail;
    }
    /* The key before the arrays: a retry that lost the race writes no more. */
    if (c->idem) {
        gp_model_meta meta;
        saved_meta(c, &meta);
        if ((rc = gp_store_idem_put_locked(s, c->idem, &meta, err)))
            goto fail;
    }
    if (c->state) {
        gp_array_owner owner = {.table = GP_ARRAYS_MODEL, .model_id = c->id};
        rc = gp_store_write_arrays(s, &owner, c->state, err);
        if (rc)
            goto fail;
    }
    if (c->job && (rc = end_job_in_save(s, c, err)))
        goto fail;
    if ((rc = gp_store_audit_put_locked(s, c->audit, c->version, err)))
        goto fail;
    if (s->save_hook)
        s->save_hook(s, c->id, s->save_hook_arg);
    if ((rc = gp_store_notify(s, err, "notifying a save")))
        goto fail;
    rc = gp_store_exec(w, GPS_COMMIT, err, "committing a save");
    if (rc)
        goto fail;
    return GP_OK;
fail:
    gp_store_rollback(w);
    return rc;
}

int gp_store_save(gp_store *store, const char *name, const char *method, const char *spec,
                  const char *info, size_t n_train, size_t input_dim, const gp_state *state,
                  gp_model_meta *meta, gp_error *err)
{
    return gp_store_save_job(store, name, method, spec, info, n_train, input_dim, state, NULL,
                             meta, err);
}

int gp_store_save_job(gp_store *store, const char *name, const char *method, const char *spec,
                      const char *info, size_t n_train, size_t input_dim, const gp_state *state,
                      const gp_job_done *job, gp_model_meta *meta, gp_error *err)
{
    return gp_store_save_keyed(store, name, method, spec, info, n_train, input_dim, state, job,
                               NULL, meta, err);
}

int gp_store_save_keyed(gp_store *store, const char *name, const char *method, const char *spec,
                        const char *info, size_t n_train, size_t input_dim,
                        const gp_state *state, const gp_job_done *job, const gp_idem_put *idem,
                        gp_model_meta *meta, gp_error *err)
{
    return gp_store_save_audited(store, name, method, spec, info, n_train, input_dim, state, job,
                                 idem, NULL, meta, err);
}

int gp_store_save_audited(gp_store *store, const char *name, const char *method,
                          const char *spec, const char *info, size_t n_train, size_t input_dim,
                          const gp_state *state, const gp_job_done *job,
                          const gp_idem_put *idem, const gp_audit_put *audit,
                          gp_model_meta *meta, gp_error *err)
{
    if (meta)
        memset(meta, 0, sizeof *meta);
    int rc = check_name(name, err);
    if (rc == GP_OK)
        rc = gp_store_idem_check(idem, err);
    if (rc)
        return rc;
    if (method == NULL || method[0] == '\0' || strlen(method) > GP_METHOD_NAME_MAX)
        return gp_error_set(err, GP_EINVAL, "method", "method name must have 1..%d characters",
                            GP_METHOD_NAME_MAX);
    if (spec == NULL || info == NULL)
        return gp_error_set(err, GP_EINVAL, NULL, "a model needs its spec and info texts");
    if ((uint64_t)n_train > INT64_MAX || (uint64_t)input_dim > INT64_MAX)
        return gp_error_set(err, GP_EINVAL, NULL, "n_train or input_dim out of range");
    save_ctx c = {.name = name, .method = method, .spec = spec, .info = info,
                  .n_train = n_train, .input_dim = input_dim, .state = state, .job = job,
                  .idem = idem, .audit = audit};
    /* A version number taken by another process meanwhile (a UNIQUE(name,
     * version) violation) is retried like a busy database. */
    rc = gp_store_write_unique(store, save_once, &c, err);
    if (rc || meta == NULL)
        return rc;
    meta->id = c.id;
    memcpy(meta->name, name, strlen(name) + 1);
    meta->version = c.version;
    memcpy(meta->method, method, strlen(method) + 1);
    memcpy(meta->created_at, c.created_at, sizeof meta->created_at);
    meta->n_train = n_train;
    meta->input_dim = input_dim;
    meta->spec = gp_store_dup_text(spec);
    meta->info = gp_store_dup_text(info);
    if (meta->spec == NULL || meta->info == NULL) {
        gp_model_meta_free(meta);
        /* The model is saved; only the copy for the caller failed. */
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory copying the saved metadata");
    }
    return GP_OK;
}

static int meta_lookup(gp_store *store, const char *name, int version, int with_texts,
                       gp_model_meta *meta, gp_error *err)
{
    memset(meta, 0, sizeof *meta);
    if (name == NULL || name[0] == '\0' || strlen(name) > GP_NAME_MAX)
        return gp_store_not_found_name(name ? name : "", err);
    if (version < 0)
        return gp_error_set(err, GP_ENOTFOUND, "version", "model '%s' has no version %d", name,
                            version);
    gp_store_conn *r = gp_store_reader_lock(store);
    gp_db_stmt *st =
        gp_store_stmt(r, with_texts ? (version == 0 ? GPS_META_LATEST : GPS_META_VERSION)
                                    : (version == 0 ? GPS_META_BRIEF_LATEST
                                                    : GPS_META_BRIEF_VERSION));
    int src = gp_db_bind_text(st, 1, name);
    if (src == GP_DB_OK && version > 0)
        src = gp_db_bind_int64(st, 2, version);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    int rc;
    if (src == GP_DB_ROW) {
        rc = read_meta_row(st, meta, with_texts, err);
        gp_store_stmt_done(st);
    } else if (src == GP_DB_DONE) {
        gp_store_stmt_done(st);
        rc = version == 0 ? 0 : gp_store_row_exists(r, GPS_NAME_EXISTS, name, 0, err);
        if (rc == 0)
            rc = gp_store_not_found_name(name, err);
        else if (rc == 1)
            rc = gp_error_set(err, GP_ENOTFOUND, "version", "model '%s' has no version %d", name,
                              version);
    } else {
        rc = gp_store_sql_error(r, src, err, "reading a model");
        gp_store_stmt_done(st);
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int gp_store_meta(gp_store *store, const char *name, int version, gp_model_meta *meta,
                  gp_error *err)
{
    return meta_lookup(store, name, version, 1, meta, err);
}

int gp_store_meta_brief(gp_store *store, const char *name, int version, gp_model_meta *meta,
                        gp_error *err)
{
    return meta_lookup(store, name, version, 0, meta, err);
}

int gp_store_versions(gp_store *store, const char *name, int **versions, size_t *count,
                      gp_error *err)
{
    *versions = NULL;
    *count = 0;
    if (name == NULL || name[0] == '\0' || strlen(name) > GP_NAME_MAX)
        return gp_store_not_found_name(name ? name : "", err);
    int *v = NULL;
    size_t n = 0, cap = 0;
    int rc = GP_OK;
    gp_store_conn *r = gp_store_reader_lock(store);
    gp_db_stmt *st = gp_store_stmt(r, GPS_VERSIONS);
    int src = gp_db_bind_text(st, 1, name);
    if (src == GP_DB_OK) {
        while ((src = gp_db_step(st)) == GP_DB_ROW) {
            if (n == cap) {
                size_t ncap = cap ? 2 * cap : 8;
                int *nv = realloc(v, ncap * sizeof *nv);
                if (nv == NULL) {
                    rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory listing versions");
                    break;
                }
                v = nv;
                cap = ncap;
            }
            int64_t x = gp_db_col_int64(st, 0);
            v[n++] = x < 0 || x > INT_MAX ? 0 : (int)x;
        }
    }
    if (rc == GP_OK && src != GP_DB_DONE)
        rc = gp_store_sql_error(r, src, err, "listing versions");
    gp_store_stmt_done(st);
    pthread_mutex_unlock(&r->mu);
    if (rc == GP_OK && n == 0)
        rc = gp_store_not_found_name(name, err);
    if (rc) {
        free(v);
        return rc;
    }
    *versions = v;
    *count = n;
    return GP_OK;
}

int gp_store_list(gp_store *store, gp_model_meta **metas, size_t *count, gp_error *err)
{
    *metas = NULL;
    *count = 0;
    gp_model_meta *m = NULL;
    size_t n = 0, cap = 0;
    int rc = GP_OK;
    gp_store_conn *r = gp_store_reader_lock(store);
    gp_db_stmt *st = gp_store_stmt(r, GPS_LIST);
    int src;
    while ((src = gp_db_step(st)) == GP_DB_ROW) {
        if (n == cap) {
            size_t ncap = cap ? 2 * cap : 16;
            gp_model_meta *nm = realloc(m, ncap * sizeof *nm);
            if (nm == NULL) {
                rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory listing models");
                break;
            }
            m = nm;
            cap = ncap;
        }
        rc = read_meta_row(st, &m[n], 1, err);
        if (rc)
            break;
        n++;
    }
    if (rc == GP_OK && src != GP_DB_DONE)
        rc = gp_store_sql_error(r, src, err, "listing models");
    gp_store_stmt_done(st);
    pthread_mutex_unlock(&r->mu);
    if (rc) {
        gp_model_meta_free_array(m, n);
        return rc;
    }
    *metas = m;
    *count = n;
    return GP_OK;
}

int gp_store_load_state(gp_store *store, int64_t model_id, gp_state *state, gp_error *err)
{
    gp_state tmp;
    gp_state_init(&tmp);
    gp_store_conn *r = gp_store_reader_lock(store);
    /* One read transaction on the reader: the model row and its arrays from
     * one snapshot (a save commits a model's row and arrays together, so this
     * sees all of a model or none of it). Always ended before the mutex is
     * released, so the next read takes a fresh snapshot. */
    int rc = gp_store_exec(r, GPS_BEGIN, err, "starting a load");
    if (rc == GP_OK) {
        gp_db_stmt *st = gp_store_stmt(r, GPS_MODEL_EXISTS);
        int src = gp_db_bind_int64(st, 1, model_id);
        if (src == GP_DB_OK)
            src = gp_db_step(st);
        if (src == GP_DB_DONE)
            rc = gp_error_set(err, GP_ENOTFOUND, "name", "model row %lld not found",
                              (long long)model_id);
        else if (src != GP_DB_ROW)
            rc = gp_store_sql_error(r, src, err, "loading a model");
        gp_store_stmt_done(st);
        gp_array_owner owner = {.table = GP_ARRAYS_MODEL, .model_id = model_id};
        if (rc == GP_OK)
            rc = gp_store_read_arrays(r, &owner, &tmp, err);
        if (rc == GP_OK)
            rc = gp_store_exec(r, GPS_COMMIT, err, "ending a load");
        gp_store_rollback(r);
    }
    pthread_mutex_unlock(&r->mu);
    if (rc) {
        gp_state_free(&tmp);
        return rc;
    }
    return gp_store_append_state(state, &tmp, err);
}

typedef struct delete_ctx {
    const char *name;
    const gp_audit_put *audit;
    int found;
} delete_ctx;

static int delete_once(gp_store *s, void *vctx, gp_error *err)
{
    delete_ctx *c = vctx;
    gp_store_conn *w = s->w;
    int rc = gp_store_exec(w, GPS_BEGIN_IMMEDIATE, err, "starting a delete");
    if (rc)
        return rc;
    if ((rc = gp_store_lock_name(w, c->name, err))) {
        gp_store_rollback(w);
        return rc;
    }
    /* The model's aliases first: their foreign key holds its versions. */
    gp_db_stmt *st = gp_store_stmt(w, GPS_ALIAS_DELETE_ALL);
    int src = gp_db_bind_text(st, 1, c->name);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    gp_store_stmt_done(st);
    if (src == GP_DB_DONE) { /* and the mark of its deleted versions: a new model starts at 1 */
        st = gp_store_stmt(w, GPS_MARK_DELETE);
        src = gp_db_bind_text(st, 1, c->name);
        if (src == GP_DB_OK)
            src = gp_db_step(st);
        gp_store_stmt_done(st);
    }
    if (src == GP_DB_DONE) {
        st = gp_store_stmt(w, GPS_DELETE);
        src = gp_db_bind_text(st, 1, c->name);
    }
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    gp_store_stmt_done(st);
    if (src != GP_DB_DONE) {
        rc = gp_store_sql_error(w, src, err, "deleting a model");
        gp_store_rollback(w);
        return rc;
    }
    c->found = gp_db_changes(w->db) > 0;
    rc = c->found ? gp_store_audit_put_locked(s, c->audit, 0, err) : GP_OK;
    if (rc == GP_OK)
        rc = gp_store_notify(s, err, "notifying a delete");
    if (rc == GP_OK)
        rc = gp_store_exec(w, GPS_COMMIT, err, "committing a delete");
    if (rc)
        gp_store_rollback(w);
    return rc;
}

int gp_store_release_reserve(gp_store *s)
{
    if (s->drv->release_reserve == NULL)
        return 0;
    pthread_mutex_lock(&s->w->mu);
    int released = s->drv->release_reserve(s->w->db);
    pthread_mutex_unlock(&s->w->mu);
    return released;
}

void gp_store_reclaim(gp_store *s)
{
    if (s->drv->reclaim == NULL)
        return;
    pthread_mutex_lock(&s->w->mu);
    s->drv->reclaim(s->w->db);
    pthread_mutex_unlock(&s->w->mu);
}

/* A delete is how a full disk is freed through the API (docs/design/
 * storage.md, "A full disk"): when its WAL frames find no room, the reserve
 * file beside the database is released and the delete runs again in its
 * space; once committed, the space goes back to the file system. */
int gp_store_delete(gp_store *store, const char *name, gp_error *err)
{
    return gp_store_delete_audited(store, name, NULL, err);
}

int gp_store_delete_audited(gp_store *store, const char *name, const gp_audit_put *audit,
                            gp_error *err)
{
    if (name == NULL || name[0] == '\0' || strlen(name) > GP_NAME_MAX)
        return gp_store_not_found_name(name ? name : "", err);
    delete_ctx c = {.name = name, .audit = audit, .found = 0};
    int rc = gp_store_write(store, delete_once, &c, err);
    if (rc == GP_ESTORAGE && gp_store_release_reserve(store))
        rc = gp_store_write(store, delete_once, &c, err);
    if (rc == GP_OK && c.found)
        gp_store_reclaim(store);
    if (rc == GP_OK && !c.found)
        rc = gp_store_not_found_name(name, err);
    return rc;
}
