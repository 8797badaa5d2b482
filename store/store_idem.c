/* gpserve store: idempotency keys (store.h, docs/design/storage.md
 * "Idempotency keys"). A keyed write records its answer inside its own
 * transaction with an INSERT that does nothing when (scope, key) is there
 * already; the writer then rolls the whole write back and says so
 * (GP_ECONFLICT, field GP_STORE_KEY_TAKEN). Two writers with one key, in one
 * process or in several on one database, therefore leave one write and one
 * row: SQLite's write lock runs them one after the other, PostgreSQL's unique
 * index makes the second INSERT wait for the first transaction's end. */
#include "store/store_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int text_in_range(const char *text, size_t max)
{
    return text != NULL && text[0] != '\0' && strlen(text) <= max;
}

static int check_scope_key(const char *scope, const char *key, gp_error *err)
{
    if (!text_in_range(scope, GP_IDEM_SCOPE_MAX))
        return gp_error_set(err, GP_EINVAL, "scope", "an idempotency scope must have 1..%d "
                            "characters", GP_IDEM_SCOPE_MAX);
    if (!text_in_range(key, GP_IDEM_KEY_MAX))
        return gp_error_set(err, GP_EINVAL, "key", "an idempotency key must have 1..%d "
                            "characters", GP_IDEM_KEY_MAX);
    return GP_OK;
}

int gp_store_idem_check(const gp_idem_put *idem, gp_error *err)
{
    if (idem == NULL)
        return GP_OK;
    int rc = check_scope_key(idem->scope, idem->key, err);
    if (rc == GP_OK && !text_in_range(idem->fingerprint, GP_IDEM_FINGERPRINT_MAX))
        rc = gp_error_set(err, GP_EINVAL, "fingerprint", "a request fingerprint must have "
                          "1..%d characters", GP_IDEM_FINGERPRINT_MAX);
    if (rc == GP_OK && idem->body == NULL && idem->make_body == NULL)
        rc = gp_error_set(err, GP_EINVAL, "body", "a keyed write needs its answer");
    return rc;
}

int gp_store_idem_put_locked(gp_store *s, const gp_idem_put *idem, const gp_model_meta *meta,
                             gp_error *err)
{
    char *made = NULL;
    const char *body = idem->body;
    if (body == NULL) {
        made = meta ? idem->make_body(meta, idem->ctx) : NULL;
        if (made == NULL)
            return gp_error_set(err, GP_ENOMEM, NULL, "out of memory recording an answer");
        body = made;
    }
    char now[GP_TIME_LEN];
    gp_store_now(now);
    gp_store_conn *w = s->w;
    gp_db_stmt *st = gp_store_stmt(w, GPS_IDEM_PUT);
    int src = gp_db_bind_text(st, 1, idem->scope);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 2, idem->key);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 3, idem->fingerprint);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 4, idem->status);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 5, body);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 6, now);
    int changed = 0;
    int rc = gp_store_step_write(w, st, src, &changed, err, "recording an idempotency key");
    free(made);
    if (rc == GP_OK && changed == 0)
        rc = gp_error_set(err, GP_ECONFLICT, GP_STORE_KEY_TAKEN,
                          "idempotency key '%.64s' is recorded already", idem->key);
    return rc;
}

void gp_idem_row_free(gp_idem_row *row)
{
    if (row == NULL)
        return;
    free(row->body);
    row->body = NULL;
}

int gp_store_idem_get(gp_store *store, const char *scope, const char *key, gp_idem_row *row,
                      gp_error *err)
{
    memset(row, 0, sizeof *row);
    int rc = check_scope_key(scope, key, err);
    if (rc)
        return rc;
    gp_store_conn *r = gp_store_reader_lock(store);
    gp_db_stmt *st = gp_store_stmt(r, GPS_IDEM_GET);
    int src = gp_db_bind_text(st, 1, scope);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 2, key);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    if (src == GP_DB_DONE) {
        rc = gp_error_set(err, GP_ENOTFOUND, "key", "no answer recorded for this key");
    } else if (src != GP_DB_ROW) {
        rc = gp_store_sql_error(r, src, err, "reading an idempotency key");
    } else {
        const int64_t status = gp_db_col_int64(st, 1);
        if (!gp_store_copy_col(st, 0, row->fingerprint, sizeof row->fingerprint, 0) ||
            !gp_store_copy_col(st, 3, row->created_at, sizeof row->created_at, 0) ||
            gp_db_col_type(st, 2) == GP_DB_NULL || status < 100 || status > 599)
            rc = gp_error_set(err, GP_EDATA, "key", "the answer recorded for this key is corrupt");
        else if (gp_store_dup_col(st, 2, &row->body))
            rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory reading an answer");
        row->status = (int)status;
    }
    gp_store_stmt_done(st);
    pthread_mutex_unlock(&r->mu);
    if (rc)
        gp_idem_row_free(row);
    return rc;
}

int gp_store_idem_prune(gp_store *store, const char *before, size_t *deleted, gp_error *err)
{
    return gp_store_prune_before(store, GPS_IDEM_PRUNE, before, "pruning idempotency keys",
                                 deleted, err);
}
