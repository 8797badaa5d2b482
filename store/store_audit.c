/* gpserve store: the audit trail (store.h, docs/design/storage.md "The audit
 * trail"). A write's row is inserted inside the write's own transaction
 * (gp_store_audit_put_locked, called by the *_audited writes before their
 * commit), so the write and its row are kept or lost together; a refused
 * write, which wrote nothing, gets a row of its own (gp_store_audit_add). */
#include "store/store_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* text cut to at most max characters into buf (NULL and "" stay NULL). */
static const char *cut(const char *text, char *buf, size_t max)
{
    if (text == NULL || text[0] == '\0')
        return NULL;
    if (strlen(text) <= max)
        return text;
    memcpy(buf, text, max); /* buf holds max + 1 */
    buf[max] = '\0';
    return buf;
}

int gp_store_audit_put_locked(gp_store *s, const gp_audit_put *a, int version, gp_error *err)
{
    if (a == NULL)
        return GP_OK;
    char now[GP_TIME_LEN], key[GP_NAME_MAX + 1], route[GP_AUDIT_ROUTE_MAX + 1];
    char model[GP_NAME_MAX + 1], code[GP_AUDIT_CODE_MAX + 1];
    char rid[GP_AUDIT_REQUEST_ID_MAX + 1], job[GP_JOB_ID_LEN];
    gp_store_now(now);
    const int v = a->version > 0 ? a->version : version;
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_AUDIT_PUT);
    int src = gp_db_bind_text(st, 1, now);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 2, cut(a->key_name, key, GP_NAME_MAX));
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 3, a->route ? cut(a->route, route, GP_AUDIT_ROUTE_MAX) : "-");
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 4, cut(a->model, model, GP_NAME_MAX));
    if (src == GP_DB_OK)
        src = v > 0 ? gp_db_bind_int64(st, 5, v) : gp_db_bind_text(st, 5, NULL);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 6, a->status);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 7, cut(a->code, code, GP_AUDIT_CODE_MAX));
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 8, cut(a->request_id, rid, GP_AUDIT_REQUEST_ID_MAX));
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 9, cut(a->job_id, job, GP_JOB_ID_LEN - 1));
    return gp_store_step_write(s->w, st, src, NULL, err, "recording an audit entry");
}

static int add_body(gp_store *s, void *vctx, gp_error *err)
{
    return gp_store_audit_put_locked(s, vctx, 0, err);
}

int gp_store_audit_add(gp_store *store, const gp_audit_put *a, gp_error *err)
{
    if (a == NULL)
        return gp_error_set(err, GP_EINVAL, NULL, "no audit entry given");
    return gp_store_write_txn(store, add_body, (void *)a, "recording an audit entry", err);
}

int gp_store_audit_prune(gp_store *store, const char *before, size_t *deleted, gp_error *err)
{
    return gp_store_prune_before(store, GPS_AUDIT_PRUNE, before, "pruning the audit trail",
                                 deleted, err);
}

static int read_audit_row(gp_db_stmt *st, gp_audit_row *row, gp_error *err)
{
    memset(row, 0, sizeof *row);
    row->id = gp_db_col_int64(st, 0);
    const int64_t version = gp_db_col_int64(st, 5); /* NULL reads 0 */
    const int64_t status = gp_db_col_int64(st, 6);
    row->has_key = gp_db_col_type(st, 2) != GP_DB_NULL;
    if (!gp_store_copy_col(st, 1, row->at, sizeof row->at, 0) ||
        !gp_store_copy_col(st, 2, row->key_name, sizeof row->key_name, 1) ||
        !gp_store_copy_col(st, 3, row->route, sizeof row->route, 0) ||
        !gp_store_copy_col(st, 4, row->model, sizeof row->model, 1) ||
        !gp_store_copy_col(st, 7, row->code, sizeof row->code, 1) ||
        !gp_store_copy_col(st, 8, row->request_id, sizeof row->request_id, 1) ||
        !gp_store_copy_col(st, 9, row->job_id, sizeof row->job_id, 1) || version < 0 ||
        version > INT_MAX || status < 0 || status > 999)
        return gp_error_set(err, GP_EDATA, "audit", "audit entry %lld is corrupt",
                            (long long)row->id);
    row->version = (int)version;
    row->status = (int)status;
    return GP_OK;
}

static int bind_query(gp_db_stmt *st, const gp_audit_query *q, int asc)
{
    int src = gp_db_bind_text(st, 1, q->model);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 2, q->key_name);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 3, q->since);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 4, asc || q->cursor > 0 ? q->cursor : INT64_MAX);
    if (src == GP_DB_OK) /* one more than asked: whether a next page exists */
        src = gp_db_bind_int64(st, 5, (int64_t)q->limit + 1);
    return src;
}

int gp_store_audit_list(gp_store *store, const gp_audit_query *q, gp_audit_row **rows,
                        size_t *count, int *more, gp_error *err)
{
    *rows = NULL;
    *count = 0;
    *more = 0;
    if (q->limit < 1 || q->limit > 1000)
        return gp_error_set(err, GP_EINVAL, "limit", "limit must be 1..1000");
    gp_audit_row *out = calloc(q->limit, sizeof *out);
    if (out == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory reading the audit trail");
    const int asc = q->ascending != 0;
    gp_store_conn *r = gp_store_reader_lock(store);
    gp_db_stmt *st = gp_store_stmt(r, asc ? GPS_AUDIT_LIST_ASC : GPS_AUDIT_LIST_DESC);
    int src = bind_query(st, q, asc);
    int rc = GP_OK;
    size_t n = 0;
    while (rc == GP_OK && src == GP_DB_OK && (src = gp_db_step(st)) == GP_DB_ROW) {
        if (n == q->limit) {
            *more = 1;
            break;
        }
        rc = read_audit_row(st, &out[n], err);
        n += rc == GP_OK;
        src = GP_DB_OK;
    }
    if (rc == GP_OK && src != GP_DB_ROW && src != GP_DB_DONE)
        rc = gp_store_sql_error(r, src, err, "reading the audit trail");
    gp_store_stmt_done(st);
    pthread_mutex_unlock(&r->mu);
    if (rc || n == 0) {
        free(out);
        *more = 0;
        return rc;
    }
    *rows = out;
    *count = n;
    return GP_OK;
}
