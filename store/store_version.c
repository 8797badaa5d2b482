/* gpserve store: deleting one version of a model (store.h,
 * gp_store_delete_version; docs/design/storage.md, "Deleting a version").
 * One transaction under the model name's lock (the lock of a save, an alias
 * write and a model's delete): the version's row goes, and with it (ON DELETE
 * CASCADE) its arrays, observation log and snapshot; the highest version
 * number given out is kept in version_marks first, so the next save never
 * reuses the deleted number. A version an alias points to stays (the caller
 * moves or deletes the alias first), and so does a model's only version (the
 * model's delete is the way to remove the last one). */
#include "store/store_internal.h"

#include <stdio.h>
#include <string.h>

typedef struct delete_version_ctx {
    const char *name;
    int version;
    const gp_audit_put *audit;
} delete_version_ctx;

/* Step statement id with (name, version) bound (version 0: not bound) to its
 * end; *rows counts the rows it returned. */
static int run(gp_store_conn *w, enum gp_store_stmt id, const char *name, int64_t version,
               int *rows, gp_error *err, const char *what)
{
    gp_db_stmt *st = gp_store_stmt(w, id);
    int src = gp_db_bind_text(st, 1, name);
    if (src == GP_DB_OK && version > 0)
        src = gp_db_bind_int64(st, 2, version);
    int n = 0;
    while (src == GP_DB_OK || src == GP_DB_ROW) {
        src = gp_db_step(st);
        n += src == GP_DB_ROW;
    }
    gp_store_stmt_done(st);
    if (rows)
        *rows = n;
    return src == GP_DB_DONE ? GP_OK : gp_store_sql_error(w, src, err, what);
}

/* GP_ENOTFOUND naming what is missing: the model or its version. */
static int missing(gp_store_conn *w, const delete_version_ctx *c, gp_error *err)
{
    int rc = gp_store_row_exists(w, GPS_NAME_EXISTS, c->name, 0, err);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return gp_store_not_found_name(c->name, err);
    return gp_error_set(err, GP_ENOTFOUND, "version", "model '%s' has no version %d", c->name,
                        c->version);
}

/* GP_ECONFLICT field "alias" listing the aliases that point at the version
 * (GP_OK when none does). */
static int refuse_aliased(gp_store_conn *w, const delete_version_ctx *c, gp_error *err)
{
    gp_db_stmt *st = gp_store_stmt(w, GPS_ALIASES_OF_VERSION);
    int src = gp_db_bind_text(st, 1, c->name);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 2, c->version);
    char list[256] = "";
    size_t used = 0;
    int n = 0;
    while ((src == GP_DB_OK || src == GP_DB_ROW) && (src = gp_db_step(st)) == GP_DB_ROW) {
        const char *a = gp_db_col_text(st, 0);
        if (used < sizeof list)
            used += (size_t)snprintf(list + used, sizeof list - used, "%s'%s'", n ? ", " : "",
                                     a ? a : "");
        n++;
    }
    gp_store_stmt_done(st);
    if (src != GP_DB_DONE)
        return gp_store_sql_error(w, src, err, "reading a version's aliases");
    if (n == 0)
        return GP_OK;
    return gp_error_set(err, GP_ECONFLICT, "alias",
                        "version %d of model '%s' is what alias%s %s point%s to: move or delete "
                        "%s first", c->version, c->name, n > 1 ? "es" : "", list,
                        n > 1 ? "" : "s", n > 1 ? "them" : "it");
}

/* The highest version number given out (rows and marks). */
static int given_out(gp_store_conn *w, const char *name, int64_t *max, gp_error *err)
{
    gp_db_stmt *st = gp_store_stmt(w, GPS_MAX_VERSION);
    int src = gp_db_bind_text(st, 1, name);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    *max = src == GP_DB_ROW ? gp_db_col_int64(st, 0) : 0;
    gp_store_stmt_done(st);
    return src == GP_DB_ROW ? GP_OK : gp_store_sql_error(w, src, err, "reading the latest version");
}

static int delete_version_body(gp_store *s, void *vctx, gp_error *err)
{
    delete_version_ctx *c = vctx;
    gp_store_conn *w = s->w;
    int n = 0;
    int64_t max = 0;
    int rc = gp_store_lock_name(w, c->name, err);
    if (rc == GP_OK)
        rc = run(w, GPS_VERSION_EXISTS, c->name, c->version, &n, err, "looking up a version");
    if (rc == GP_OK && n == 0)
        return missing(w, c, err);
    if (rc == GP_OK)
        rc = refuse_aliased(w, c, err);
    if (rc == GP_OK)
        rc = run(w, GPS_VERSIONS, c->name, 0, &n, err, "counting versions");
    if (rc == GP_OK && n < 2)
        return gp_error_set(err, GP_ECONFLICT, "version",
                            "version %d is the only version of model '%s': delete the model "
                            "(DELETE /v1/models/%s) to remove it", c->version, c->name, c->name);
    if (rc == GP_OK)
        rc = given_out(w, c->name, &max, err);
    if (rc == GP_OK)
        rc = run(w, GPS_MARK_VERSION, c->name, max, NULL, err, "keeping the latest version");
    if (rc == GP_OK) /* no roll back to a version that is gone */
        rc = run(w, GPS_ALIAS_FORGET_PREVIOUS, c->name, c->version, NULL, err,
                 "deleting a version");
    if (rc == GP_OK)
        rc = run(w, GPS_DELETE_VERSION, c->name, c->version, NULL, err, "deleting a version");
    if (rc == GP_OK)
        rc = gp_store_audit_put_locked(s, c->audit, c->version, err);
    if (rc == GP_OK)
        rc = gp_store_notify(s, err, "notifying a delete");
    return rc;
}

int gp_store_delete_version(gp_store *store, const char *name, int version, gp_error *err)
{
    return gp_store_delete_version_audited(store, name, version, NULL, err);
}

int gp_store_delete_version_audited(gp_store *store, const char *name, int version,
                                    const gp_audit_put *audit, gp_error *err)
{
    if (name == NULL || name[0] == '\0' || strlen(name) > GP_NAME_MAX)
        return gp_store_not_found_name(name ? name : "", err);
    if (version < 1)
        return gp_error_set(err, GP_EINVAL, "version", "version must be an integer >= 1");
    delete_version_ctx c = {.name = name, .version = version, .audit = audit};
    int rc = gp_store_write_txn(store, delete_version_body, &c, "deleting a version", err);
    if (rc == GP_ESTORAGE && gp_store_release_reserve(store))
        rc = gp_store_write_txn(store, delete_version_body, &c, "deleting a version", err);
    if (rc == GP_OK)
        gp_store_reclaim(store);
    return rc;
}
