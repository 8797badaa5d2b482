/* gpserve store: aliases, the movable labels of a model's versions (store.h,
 * docs/design/storage.md "Aliases"). A label is one row of `aliases`, written
 * in one transaction under the model name's lock (the same lock a save and a
 * delete of the name take), after checking that the version exists: a set
 * either points the label at an existing version or changes nothing. The
 * foreign key (name, version) -> models repeats that check in the database
 * and keeps a version with a label from being deleted. */
#include "store/store_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gp_store_alias_valid(const char *alias)
{
    if (alias == NULL)
        return 0;
    size_t n = strlen(alias);
    if (n == 0 || n > GP_ALIAS_MAX)
        return 0;
    char c = alias[0];
    if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')))
        return 0;
    for (size_t i = 1; i < n; i++) {
        c = alias[i];
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 c == '_' || c == '.' || c == '-';
        if (!ok)
            return 0;
    }
    return 1;
}

static int check_args(const char *name, const char *alias, gp_error *err)
{
    if (name == NULL || name[0] == '\0' || strlen(name) > GP_NAME_MAX)
        return gp_error_set(err, GP_ENOTFOUND, "name", "model '%.64s' not found",
                            name ? name : "");
    if (!gp_store_alias_valid(alias))
        return gp_error_set(err, GP_EINVAL, "alias",
                            "an alias must match [A-Za-z][A-Za-z0-9_.-]{0,63} (a letter first, "
                            "so it is never a version number)");
    return GP_OK;
}

/* The row of an alias statement's current result: alias, version, updated_at,
 * updated_by, previous_version. */
static int read_alias_row(gp_db_stmt *st, gp_alias_row *row, gp_error *err)
{
    memset(row, 0, sizeof *row);
    const int64_t version = gp_db_col_int64(st, 1);
    if (!gp_store_copy_col(st, 0, row->alias, sizeof row->alias, 0) || version < 1 ||
        version > INT_MAX || !gp_store_copy_col(st, 2, row->updated_at, sizeof row->updated_at, 0) ||
        !gp_store_copy_col(st, 3, row->updated_by, sizeof row->updated_by, 1))
        return gp_error_set(err, GP_EDATA, "alias", "an alias row is corrupt");
    row->version = (int)version;
    const int64_t previous = gp_db_col_int64(st, 4); /* NULL reads 0 */
    row->previous_version = previous > 0 && previous <= INT_MAX ? (int)previous : 0;
    return GP_OK;
}

typedef struct set_ctx {
    const char *name, *alias, *by;
    const gp_audit_put *audit;
    int version;
    char now[GP_TIME_LEN];
    gp_alias_row row; /* as stored (its previous_version is the database's) */
} set_ctx;

/* The row of name's alias as the writer sees it, inside its transaction. */
static int read_back(gp_store_conn *w, set_ctx *c, gp_error *err)
{
    gp_db_stmt *st = gp_store_stmt(w, GPS_ALIAS_GET);
    int src = gp_db_bind_text(st, 1, c->name);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 2, c->alias);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    int rc = src == GP_DB_ROW ? read_alias_row(st, &c->row, err)
                              : gp_store_sql_error(w, src, err, "reading an alias back");
    gp_store_stmt_done(st);
    return rc;
}

static int set_body(gp_store *s, void *vctx, gp_error *err)
{
    set_ctx *c = vctx;
    gp_store_conn *w = s->w;
    int rc = gp_store_lock_name(w, c->name, err);
    if (rc == GP_OK)
        rc = gp_store_row_exists(w, GPS_VERSION_EXISTS, c->name, c->version, err);
    if (rc == 0) { /* no such version: which is missing, the model or the version? */
        rc = gp_store_row_exists(w, GPS_NAME_EXISTS, c->name, 0, err);
        if (rc == 0)
            return gp_store_not_found_name(c->name, err);
        if (rc == 1)
            return gp_error_set(err, GP_ENOTFOUND, "version", "model '%s' has no version %d",
                                c->name, c->version);
    }
    if (rc < 0)
        return rc;
    gp_db_stmt *st = gp_store_stmt(w, GPS_ALIAS_PUT);
    int src = gp_db_bind_text(st, 1, c->name);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 2, c->alias);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 3, c->version);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 4, c->now);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 5, c->by && c->by[0] ? c->by : NULL);
    rc = gp_store_step_write(w, st, src, NULL, err, "setting an alias");
    if (rc == GP_OK)
        rc = read_back(w, c, err);
    if (rc == GP_OK)
        rc = gp_store_audit_put_locked(s, c->audit, c->version, err);
    if (rc == GP_OK)
        rc = gp_store_notify(s, err, "notifying an alias change");
    return rc;
}

int gp_store_alias_set(gp_store *store, const char *name, const char *alias, int version,
                       const char *by, gp_alias_row *row, gp_error *err)
{
    return gp_store_alias_set_audited(store, name, alias, version, by, NULL, row, err);
}

int gp_store_alias_set_audited(gp_store *store, const char *name, const char *alias, int version,
                               const char *by, const gp_audit_put *audit, gp_alias_row *row,
                               gp_error *err)
{
    if (row)
        memset(row, 0, sizeof *row);
    int rc = check_args(name, alias, err);
    if (rc)
        return rc;
    if (version < 1)
        return gp_error_set(err, GP_EINVAL, "version", "version must be an integer >= 1");
    if (by && strlen(by) > GP_NAME_MAX)
        return gp_error_set(err, GP_EINVAL, "updated_by", "who set an alias has at most %d "
                            "characters", GP_NAME_MAX);
    set_ctx c = {.name = name, .alias = alias, .by = by, .audit = audit, .version = version};
    gp_store_now(c.now);
    rc = gp_store_write_txn(store, set_body, &c, "setting an alias", err);
    if (rc == GP_OK && row)
        *row = c.row;
    return rc;
}

int gp_store_alias_get(gp_store *store, const char *name, const char *alias, gp_alias_row *row,
                       gp_error *err)
{
    memset(row, 0, sizeof *row);
    int rc = check_args(name, alias, err);
    if (rc)
        return rc;
    gp_store_conn *r = gp_store_reader_lock(store);
    gp_db_stmt *st = gp_store_stmt(r, GPS_ALIAS_GET);
    int src = gp_db_bind_text(st, 1, name);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 2, alias);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    if (src == GP_DB_ROW)
        rc = read_alias_row(st, row, err);
    else if (src != GP_DB_DONE)
        rc = gp_store_sql_error(r, src, err, "reading an alias");
    gp_store_stmt_done(st);
    if (src == GP_DB_DONE) {
        rc = gp_store_row_exists(r, GPS_NAME_EXISTS, name, 0, err);
        if (rc == 0)
            rc = gp_store_not_found_name(name, err);
        else if (rc == 1)
            rc = gp_error_set(err, GP_ENOTFOUND, "alias", "model '%s' has no alias '%s'", name,
                              alias);
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

/* Append the statement's rows to *rows (growing *cap). */
static int read_alias_rows(gp_db_stmt *st, gp_alias_row **rows, size_t *count, int *src,
                           gp_error *err)
{
    size_t cap = 0;
    while ((*src = gp_db_step(st)) == GP_DB_ROW) {
        if (*count == cap) {
            size_t ncap = cap ? 2 * cap : 4;
            gp_alias_row *nr = realloc(*rows, ncap * sizeof *nr);
            if (nr == NULL)
                return gp_error_set(err, GP_ENOMEM, NULL, "out of memory listing aliases");
            *rows = nr;
            cap = ncap;
        }
        int rc = read_alias_row(st, &(*rows)[*count], err);
        if (rc)
            return rc;
        (*count)++;
    }
    return GP_OK;
}

int gp_store_aliases(gp_store *store, const char *name, gp_alias_row **rows, size_t *count,
                     gp_error *err)
{
    *rows = NULL;
    *count = 0;
    if (name == NULL || name[0] == '\0' || strlen(name) > GP_NAME_MAX)
        return gp_store_not_found_name(name ? name : "", err);
    gp_store_conn *r = gp_store_reader_lock(store);
    gp_db_stmt *st = gp_store_stmt(r, GPS_ALIAS_LIST);
    int src = gp_db_bind_text(st, 1, name);
    int rc = GP_OK;
    if (src == GP_DB_OK)
        rc = read_alias_rows(st, rows, count, &src, err);
    if (rc == GP_OK && src != GP_DB_DONE)
        rc = gp_store_sql_error(r, src, err, "listing aliases");
    gp_store_stmt_done(st);
    if (rc == GP_OK && *count == 0) {
        rc = gp_store_row_exists(r, GPS_NAME_EXISTS, name, 0, err);
        rc = rc == 0 ? gp_store_not_found_name(name, err) : rc < 0 ? rc : GP_OK;
    }
    pthread_mutex_unlock(&r->mu);
    if (rc) {
        free(*rows);
        *rows = NULL;
        *count = 0;
    }
    return rc;
}

typedef struct delete_ctx {
    const char *name, *alias;
    const gp_audit_put *audit;
    int changed;
} delete_ctx;

static int delete_body(gp_store *s, void *vctx, gp_error *err)
{
    delete_ctx *c = vctx;
    gp_store_conn *w = s->w;
    int rc = gp_store_lock_name(w, c->name, err);
    if (rc)
        return rc;
    gp_db_stmt *st = gp_store_stmt(w, GPS_ALIAS_DELETE);
    int src = gp_db_bind_text(st, 1, c->name);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 2, c->alias);
    rc = gp_store_step_write(w, st, src, &c->changed, err, "deleting an alias");
    if (rc == GP_OK && c->changed == 0) { /* nothing to change: say what is missing */
        rc = gp_store_row_exists(w, GPS_NAME_EXISTS, c->name, 0, err);
        return rc == 0   ? gp_store_not_found_name(c->name, err)
               : rc == 1 ? gp_error_set(err, GP_ENOTFOUND, "alias", "model '%s' has no alias '%s'",
                                        c->name, c->alias)
                         : rc;
    }
    if (rc == GP_OK)
        rc = gp_store_audit_put_locked(s, c->audit, 0, err);
    if (rc == GP_OK)
        rc = gp_store_notify(s, err, "notifying an alias change");
    return rc;
}

int gp_store_alias_delete(gp_store *store, const char *name, const char *alias, gp_error *err)
{
    return gp_store_alias_delete_audited(store, name, alias, NULL, err);
}

int gp_store_alias_delete_audited(gp_store *store, const char *name, const char *alias,
                                  const gp_audit_put *audit, gp_error *err)
{
    int rc = check_args(name, alias, err);
    if (rc)
        return rc;
    delete_ctx c = {.name = name, .alias = alias, .audit = audit, .changed = 0};
    return gp_store_write_txn(store, delete_body, &c, "deleting an alias", err);
}
