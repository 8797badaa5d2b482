/* gpserve store: who uses a data set (store.h, "data sets"): the lock of a
 * data set's name, the check that nothing uses it before a delete or a
 * replace, a job or a fit taking it, and the fits' reader leases. A lease is
 * renewed by its holder and expires when it dies, so a dead daemon's fit
 * leaves no count behind: it only delays a delete until its lease runs out
 * (gp_store_dataset_prune removes expired ones). A queued or running job
 * holds its data set through jobs.dataset_id, which its end releases.
 *
 * On PostgreSQL the writes that decide something about a name (finish,
 * delete, a job or a reader taking a data set) first take a lock on
 * "dataset:NAME" (GPS_LOCK_NAME: ':' is in no model name, so it never meets
 * a model's lock), so that a check "not in use" and the delete it allows
 * are one step, and a data set cannot be taken between them. SQLite's one
 * write lock does the same. */
#include "store/store_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int gp_store_dataset_check_name(const char *name, gp_error *err)
{
    size_t n = name ? strnlen(name, GP_NAME_MAX + 1) : 0;
    if (n == 0 || n > GP_NAME_MAX)
        return gp_error_set(err, GP_EINVAL, "name", "a data set name has 1..%d characters",
                            GP_NAME_MAX);
    return GP_OK;
}

int gp_store_dataset_lock(gp_store_conn *w, const char *name, gp_error *err)
{
    char key[GP_NAME_MAX + 16];
    snprintf(key, sizeof key, "dataset:%s", name);
    return gp_store_lock_name(w, key, err);
}

/* The name and state of row id into name (GP_NAME_MAX + 1) and *ready:
 * 1 found, 0 none, or a negative code. */
int gp_store_dataset_name_of(gp_store_conn *c, int64_t id, char *name, int *ready,
                             gp_error *err)
{
    gp_db_stmt *st = gp_store_stmt(c, GPS_DS_NAME_OF);
    int src = gp_db_bind_int64(st, 1, id);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    int rc = 0;
    if (src == GP_DB_ROW) {
        const char *state = gp_db_col_text(st, 1);
        *ready = state && strcmp(state, "ready") == 0;
        rc = gp_store_copy_col(st, 0, name, GP_NAME_MAX + 1, 0)
                 ? 1
                 : gp_error_set(err, GP_EDATA, "dataset", "data set row %" PRId64
                                " is corrupt", id);
    } else if (src != GP_DB_DONE) {
        rc = gp_store_sql_error(c, src, err, "reading a data set");
    }
    gp_store_stmt_done(st);
    return rc;
}

/* One text column of a one-row query bound (?1 id[, ?2 now]) into out: 1
 * found, 0 none, or a negative code. */
static int first_text(gp_store_conn *c, enum gp_store_stmt which, int64_t id, const double *now,
                      char *out, size_t size, gp_error *err)
{
    gp_db_stmt *st = gp_store_stmt(c, which);
    int src = gp_db_bind_int64(st, 1, id);
    if (src == GP_DB_OK && now)
        src = gp_db_bind_double(st, 2, *now);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    int rc = 0;
    if (src == GP_DB_ROW) {
        const char *t = gp_db_col_text(st, 0);
        snprintf(out, size, "%s", t ? t : "?");
        rc = 1;
    } else if (src != GP_DB_DONE) {
        rc = gp_store_sql_error(c, src, err, "looking for the users of a data set");
    }
    gp_store_stmt_done(st);
    return rc;
}

/* GP_ECONFLICT when data set id (of name) is in use on connection c: a
 * queued or running job names it, or a reader lease holds at now. */
int gp_store_dataset_in_use(gp_store_conn *c, int64_t id, const char *name, double now, gp_error *err)
{
    char who[160];
    int rc = first_text(c, GPS_DS_JOB_USING, id, NULL, who, sizeof who, err);
    if (rc == 1)
        return gp_error_set(err, GP_ECONFLICT, "name",
                            "data set '%s' is in use: async job '%s' (queued or running) fits on "
                            "it; try again when it ends, or cancel it (DELETE /v1/jobs/%s)",
                            name, who, who);
    if (rc == 0)
        rc = first_text(c, GPS_DS_READER_USING, id, &now, who, sizeof who, err);
    if (rc == 1)
        return gp_error_set(err, GP_ECONFLICT, "name",
                            "data set '%s' is in use: %s reads it; try again when it ends", name,
                            who);
    return rc;
}

/* The ready id of name on c: 1 found (*id), 0 none, or a negative code. */
int gp_store_dataset_ready_id(gp_store_conn *c, const char *name, int64_t *id, gp_error *err)
{
    gp_db_stmt *st = gp_store_stmt(c, GPS_DS_READY_ID);
    int src = gp_db_bind_text(st, 1, name);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    int rc = src == GP_DB_ROW ? 1 : src == GP_DB_DONE ? 0 : -1;
    if (rc == 1)
        *id = gp_db_col_int64(st, 0);
    gp_store_stmt_done(st);
    return rc < 0 ? gp_store_sql_error(c, src, err, "looking up a data set") : rc;
}

int gp_store_dataset_check_unused(gp_store *store, const char *name, double now, int missing_ok,
                                  gp_error *err)
{
    int rc = gp_store_dataset_check_name(name, err);
    if (rc)
        return rc;
    gp_store_conn *r = gp_store_reader_lock(store);
    int64_t id = 0;
    rc = gp_store_dataset_ready_id(r, name, &id, err);
    if (rc == 1)
        rc = gp_store_dataset_in_use(r, id, name, now, err);
    else if (rc == 0 && !missing_ok)
        rc = gp_error_set(err, GP_ENOTFOUND, "name", "data set '%s' not found", name);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int gp_store_dataset_hold_locked(gp_store *s, int64_t id, gp_error *err)
{
    char name[GP_NAME_MAX + 1];
    int ready = 0;
    int rc = gp_store_dataset_name_of(s->w, id, name, &ready, err);
    if (rc == 1)
        rc = gp_store_dataset_lock(s->w, name, err);
    /* again under the lock: a delete or replace that held it has committed */
    if (rc == GP_OK)
        rc = gp_store_dataset_name_of(s->w, id, name, &ready, err);
    if (rc == 1 && ready)
        return GP_OK;
    return rc < 0 ? rc
                  : gp_error_set(err, GP_ENOTFOUND, "data.dataset",
                                 "the data set (row %" PRId64 ") was deleted or replaced", id);
}

/* ---- reader leases ---- */

typedef struct reader_ctx {
    int64_t id;
    const char *token, *label;
    double lease_until;
} reader_ctx;

static int reader_add_body(gp_store *s, void *vctx, gp_error *err)
{
    reader_ctx *c = vctx;
    int rc = gp_store_dataset_hold_locked(s, c->id, err);
    if (rc)
        return rc;
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_DS_READER_ADD);
    int src = gp_db_bind_text(st, 1, c->token);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 2, c->id);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 3, c->label);
    if (src == GP_DB_OK)
        src = gp_db_bind_double(st, 4, c->lease_until);
    return gp_store_step_write(s->w, st, src, NULL, err, "taking a data set");
}

static int check_token(const char *token, gp_error *err)
{
    if (token == NULL || token[0] == '\0' || strnlen(token, GP_JOB_ID_LEN) == GP_JOB_ID_LEN)
        return gp_error_set(err, GP_EINVAL, "token", "a reader's token has 1..%d characters",
                            GP_JOB_ID_LEN - 1);
    return GP_OK;
}

int gp_store_dataset_reader_add(gp_store *store, int64_t id, const char *token, const char *label,
                                double lease_until, gp_error *err)
{
    int rc = check_token(token, err);
    if (rc)
        return rc;
    reader_ctx c = {id, token, label && label[0] ? label : "a fit", lease_until};
    return gp_store_write_txn(store, reader_add_body, &c, "taking a data set", err);
}

static int reader_renew_body(gp_store *s, void *vctx, gp_error *err)
{
    reader_ctx *c = vctx;
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_DS_READER_RENEW);
    int src = gp_db_bind_text(st, 1, c->token);
    if (src == GP_DB_OK)
        src = gp_db_bind_double(st, 2, c->lease_until);
    return gp_store_step_write(s->w, st, src, NULL, err, "renewing a data set's reader");
}

int gp_store_dataset_reader_renew(gp_store *store, const char *token, double lease_until,
                                  gp_error *err)
{
    int rc = check_token(token, err);
    if (rc)
        return rc;
    reader_ctx c = {0, token, NULL, lease_until};
    uint64_t ticket = 0; /* a lease need not reach the disk: a crash ends it anyway */
    return gp_store_write_txn_deferred(store, reader_renew_body, &c, "renewing a reader",
                                       &ticket, err);
}

static int reader_drop_body(gp_store *s, void *vctx, gp_error *err)
{
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_DS_READER_DROP);
    int src = gp_db_bind_text(st, 1, vctx);
    return gp_store_step_write(s->w, st, src, NULL, err, "dropping a data set's reader");
}

int gp_store_dataset_reader_drop(gp_store *store, const char *token, gp_error *err)
{
    int rc = check_token(token, err);
    if (rc)
        return rc;
    uint64_t ticket = 0;
    return gp_store_write_txn_deferred(store, reader_drop_body, (void *)token, "dropping a reader",
                                       &ticket, err);
}
