/* gpserve store: data sets (store.h, "data sets"; docs/design/storage.md,
 * "Data sets"): an upload's row and parts, the transaction that makes it
 * ready, the reads of ready rows, and deletes. Who uses a data set is
 * store_dataset_use.c's; reading its rows store_dataset_read.c's.
 *
 * The parts' writes take one lock on PostgreSQL while they check the quota,
 * so that two uploads cannot both pass it (SQLite's one write lock does the
 * same). */
#include "store/store_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The lock every part write takes on PostgreSQL while it checks the quota. */
#define QUOTA_LOCK "dataset quota:"

void gp_dataset_row_free(gp_dataset_row *row)
{
    if (row == NULL)
        return;
    free(row->columns);
    row->columns = NULL;
}

void gp_dataset_row_free_array(gp_dataset_row *rows, size_t count)
{
    for (size_t i = 0; rows && i < count; i++)
        gp_dataset_row_free(&rows[i]);
    free(rows);
}

/* Columns of DS_COLS (store_sql.c) into row. */
static int read_row(gp_db_stmt *st, gp_dataset_row *row, gp_error *err)
{
    memset(row, 0, sizeof *row);
    row->id = gp_db_col_int64(st, 0);
    int64_t n_rows = gp_db_col_int64(st, 3), n_cols = gp_db_col_int64(st, 4);
    int64_t bytes = gp_db_col_int64(st, 7), received = gp_db_col_int64(st, 8);
    if (!gp_store_copy_col(st, 1, row->name, sizeof row->name, 0) ||
        !gp_store_copy_col(st, 2, row->state, sizeof row->state, 0) ||
        !gp_store_copy_col(st, 6, row->sha256, sizeof row->sha256, 1) ||
        !gp_store_copy_col(st, 9, row->created_at, sizeof row->created_at, 0) ||
        !gp_store_copy_col(st, 10, row->created_by, sizeof row->created_by, 1) || n_rows < 0 ||
        n_cols < 1 || bytes < 0 || received < 0)
        return gp_error_set(err, GP_EDATA, "dataset", "data set row %" PRId64 " is corrupt",
                            row->id);
    row->n_rows = (uint64_t)n_rows;
    row->n_cols = (size_t)n_cols;
    row->bytes = (uint64_t)bytes;
    row->bytes_received = (uint64_t)received;
    if (gp_store_dup_col(st, 5, &row->columns) || row->columns == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory reading a data set");
    return GP_OK;
}

/* One row of statement id (bound to text or to an id) on connection c. */
static int row_on(gp_store_conn *c, enum gp_store_stmt id, const char *name, int64_t key,
                  gp_dataset_row *row, gp_error *err)
{
    gp_db_stmt *st = gp_store_stmt(c, id);
    int src = name ? gp_db_bind_text(st, 1, name) : gp_db_bind_int64(st, 1, key);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    int rc = GP_OK;
    if (src == GP_DB_ROW)
        rc = read_row(st, row, err);
    else if (src == GP_DB_DONE)
        rc = name ? gp_error_set(err, GP_ENOTFOUND, "name", "data set '%s' not found", name)
                  : gp_error_set(err, GP_ENOTFOUND, "dataset", "data set row %" PRId64
                                 " is not there (deleted, or an upload)", key);
    else
        rc = gp_store_sql_error(c, src, err, "reading a data set");
    gp_store_stmt_done(st);
    if (rc)
        gp_dataset_row_free(row);
    return rc;
}

/* ---- an upload ---- */

typedef struct begin_ctx {
    const char *name, *columns, *created_by;
    size_t n_cols;
    double now;
    int64_t id;
} begin_ctx;

static int begin_body(gp_store *s, void *vctx, gp_error *err)
{
    begin_ctx *c = vctx;
    char at[GP_TIME_LEN];
    gp_store_now(at);
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_DS_INSERT);
    int src = gp_db_bind_text(st, 1, c->name);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 2, (int64_t)c->n_cols);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 3, c->columns);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 4, at);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 5, c->created_by && c->created_by[0] ? c->created_by : NULL);
    if (src == GP_DB_OK)
        src = gp_db_bind_double(st, 6, c->now);
    if (src == GP_DB_OK)
        src = gp_db_step(st); /* RETURNING id */
    if (src == GP_DB_ROW)
        c->id = gp_db_col_int64(st, 0);
    gp_store_stmt_done(st);
    return src == GP_DB_ROW ? GP_OK : gp_store_sql_error(s->w, src, err, "starting an upload");
}

int gp_store_dataset_begin(gp_store *store, const char *name, size_t n_cols, const char *columns,
                           const char *created_by, double now, int64_t *id, gp_error *err)
{
    *id = 0;
    int rc = gp_store_dataset_check_name(name, err);
    if (rc)
        return rc;
    if (n_cols == 0 || n_cols > INT32_MAX || columns == NULL)
        return gp_error_set(err, GP_EINVAL, "columns", "a data set has 1 or more columns");
    if (created_by && strlen(created_by) > GP_NAME_MAX)
        created_by = NULL;
    begin_ctx c = {name, columns, created_by, n_cols, now, 0};
    rc = gp_store_write_txn(store, begin_body, &c, "starting an upload", err);
    if (rc == GP_OK)
        *id = c.id;
    return rc;
}

typedef struct part_ctx {
    int64_t id;
    uint64_t part, quota;
    size_t rows, cols;
    const void *blob;
    size_t bytes;
    double now;
} part_ctx;

/* GP_ESTORAGE when bytes more would take every data set past quota. */
static int check_quota(gp_store *s, uint64_t quota, size_t bytes, gp_error *err)
{
    int rc = gp_store_lock_name(s->w, QUOTA_LOCK, err);
    if (rc)
        return rc;
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_DS_TOTAL_BYTES);
    int src = gp_db_step(st);
    int64_t total = src == GP_DB_ROW ? gp_db_col_int64(st, 0) : 0;
    gp_store_stmt_done(st);
    if (src != GP_DB_ROW)
        return gp_store_sql_error(s->w, src, err, "adding up the data sets");
    if (total < 0 || (uint64_t)total > quota || bytes > quota - (uint64_t)total)
        return gp_error_set(err, GP_ESTORAGE, "dataset",
                            "the data sets hold %" PRId64 " bytes; %zu more would pass the quota "
                            "of %" PRIu64 " bytes",
                            total, bytes, quota);
    return GP_OK;
}

/* Why a part's UPDATE changed nothing: the upload is gone, or the part is
 * not the next one. */
static int part_refused(gp_store *s, const part_ctx *c, gp_error *err)
{
    char name[GP_NAME_MAX + 1];
    int ready = 0;
    int rc = gp_store_dataset_name_of(s->w, c->id, name, &ready, err);
    if (rc < 0)
        return rc;
    if (rc == 0 || ready)
        return gp_error_set(err, GP_ENOTFOUND, "dataset",
                            "the upload (data set row %" PRId64 ") is gone", c->id);
    return gp_error_set(err, GP_EINVAL, "part",
                        "part %" PRIu64 " of upload %" PRId64 " is out of order or of another "
                        "width", c->part, c->id);
}

static int part_body(gp_store *s, void *vctx, gp_error *err)
{
    part_ctx *c = vctx;
    int rc = c->quota ? check_quota(s, c->quota, c->bytes, err) : GP_OK;
    if (rc)
        return rc;
    const uint64_t first = c->part * GP_STORE_DATASET_PART_ROWS;
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_DS_GROW);
    int src = gp_db_bind_int64(st, 1, c->id);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 2, (int64_t)c->bytes);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 3, (int64_t)first);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 4, (int64_t)(first + c->rows));
    if (src == GP_DB_OK)
        src = gp_db_bind_double(st, 5, c->now);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 6, (int64_t)c->cols);
    int changed = 0;
    rc = gp_store_step_write(s->w, st, src, &changed, err, "recording a part");
    if (rc == GP_OK && changed != 1)
        return part_refused(s, c, err);
    st = gp_store_stmt(s->w, GPS_DS_INSERT_PART);
    src = gp_db_bind_int64(st, 1, c->id);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 2, (int64_t)c->part);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 3, (int64_t)first);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 4, (int64_t)c->rows);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 5, (int64_t)c->cols);
    if (src == GP_DB_OK)
        src = gp_db_bind_blob(st, 6, c->blob, c->bytes);
    return rc ? rc : gp_store_step_write(s->w, st, src, NULL, err, "writing a part");
}

int gp_store_dataset_put_part(gp_store *store, int64_t id, uint64_t part, size_t rows,
                              size_t cols, const double *data, uint64_t quota_bytes, double now,
                              gp_error *err)
{
    if (rows == 0 || rows > GP_STORE_DATASET_PART_ROWS || cols == 0 || data == NULL ||
        cols > SIZE_MAX / 8 / GP_STORE_DATASET_PART_ROWS ||
        part > (uint64_t)INT64_MAX / GP_STORE_DATASET_PART_ROWS - 1)
        return gp_error_set(err, GP_EINVAL, "part", "a part holds 1..%d rows of 1 or more columns",
                            GP_STORE_DATASET_PART_ROWS);
    part_ctx c = {id, part, quota_bytes, rows, cols, data, rows * cols * 8, now};
    unsigned char *le = NULL;
    if (!gp_store_host_is_le()) {
        if ((le = malloc(c.bytes)) == NULL)
            return gp_error_set(err, GP_ENOMEM, NULL, "out of memory writing a part");
        gp_store_le_encode(data, rows * cols, le);
        c.blob = le;
    }
    /* Not waited on: the finish's commit follows every part's, and it waits. */
    uint64_t ticket = 0;
    int rc = gp_store_write_txn_deferred(store, part_body, &c, "writing a part", &ticket, err);
    free(le);
    return rc;
}

typedef struct touch_ctx {
    int64_t id;
    double now;
} touch_ctx;

static int touch_body(gp_store *s, void *vctx, gp_error *err)
{
    touch_ctx *c = vctx;
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_DS_TOUCH);
    int src = gp_db_bind_int64(st, 1, c->id);
    if (src == GP_DB_OK)
        src = gp_db_bind_double(st, 2, c->now);
    int changed = 0;
    int rc = gp_store_step_write(s->w, st, src, &changed, err, "touching an upload");
    if (rc == GP_OK && changed != 1)
        rc = gp_error_set(err, GP_ENOTFOUND, "dataset",
                          "the upload (data set row %" PRId64 ") is gone", c->id);
    return rc;
}

int gp_store_dataset_touch(gp_store *store, int64_t id, double now, gp_error *err)
{
    touch_ctx c = {id, now};
    uint64_t ticket = 0;
    return gp_store_write_txn_deferred(store, touch_body, &c, "touching an upload", &ticket, err);
}

/* ---- the last step of an upload ---- */

typedef struct finish_ctx {
    int64_t id;
    const gp_dataset_done *done;
    double now;
    const gp_audit_put *audit;
    int replaced;
    gp_dataset_row *row;
} finish_ctx;

static int mark_ready(gp_store *s, const finish_ctx *c, gp_error *err)
{
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_DS_FINISH);
    int src = gp_db_bind_int64(st, 1, c->id);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 2, c->done->columns);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 3, c->done->sha256);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 4, (int64_t)c->done->bytes_received);
    if (src == GP_DB_OK)
        src = gp_db_bind_double(st, 5, c->now);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 6, (int64_t)c->done->n_rows);
    int changed = 0;
    int rc = gp_store_step_write(s->w, st, src, &changed, err, "finishing an upload");
    if (rc == GP_OK && changed != 1)
        rc = gp_error_set(err, GP_EDATA, "dataset",
                          "the upload's parts do not hold its %" PRIu64 " rows",
                          c->done->n_rows);
    return rc;
}

static int delete_id(gp_store_conn *w, int64_t id, gp_error *err)
{
    gp_db_stmt *st = gp_store_stmt(w, GPS_DS_DELETE_ID);
    int src = gp_db_bind_int64(st, 1, id);
    return gp_store_step_write(w, st, src, NULL, err, "deleting a data set");
}

static int finish_body(gp_store *s, void *vctx, gp_error *err)
{
    finish_ctx *c = vctx;
    char name[GP_NAME_MAX + 1];
    int ready = 0;
    c->replaced = 0;
    int rc = gp_store_dataset_name_of(s->w, c->id, name, &ready, err);
    if (rc == 0 || (rc == 1 && ready))
        return gp_error_set(err, GP_ENOTFOUND, "dataset",
                            "the upload (data set row %" PRId64 ") is gone", c->id);
    if (rc < 0 || (rc = gp_store_dataset_lock(s->w, name, err)))
        return rc;
    int64_t old = 0;
    rc = gp_store_dataset_ready_id(s->w, name, &old, err);
    if (rc == 1) {
        c->replaced = 1;
        rc = gp_store_dataset_in_use(s->w, old, name, c->now, err);
        if (rc == GP_OK)
            rc = delete_id(s->w, old, err);
    }
    if (rc == GP_OK)
        rc = mark_ready(s, c, err);
    if (rc == GP_OK)
        rc = gp_store_audit_put_locked(s, c->audit, 0, err);
    if (rc == GP_OK && c->row)
        rc = row_on(s->w, GPS_DS_GET_ID, NULL, c->id, c->row, err);
    return rc;
}

int gp_store_dataset_finish(gp_store *store, int64_t id, const gp_dataset_done *done, double now,
                            const gp_audit_put *audit, int *replaced, gp_dataset_row *row,
                            gp_error *err)
{
    if (row)
        memset(row, 0, sizeof *row);
    if (replaced)
        *replaced = 0;
    if (done == NULL || done->columns == NULL || done->sha256 == NULL)
        return gp_error_set(err, GP_EINVAL, "dataset", "an upload ends with its description");
    finish_ctx c = {id, done, now, audit, 0, row};
    int rc = gp_store_write_txn(store, finish_body, &c, "finishing an upload", err);
    if (rc && row) {
        gp_dataset_row_free(row);
        memset(row, 0, sizeof *row);
    }
    if (rc == GP_OK && replaced)
        *replaced = c.replaced;
    return rc;
}

static int abort_body(gp_store *s, void *vctx, gp_error *err)
{
    const int64_t *id = vctx;
    char name[GP_NAME_MAX + 1];
    int ready = 0;
    int rc = gp_store_dataset_name_of(s->w, *id, name, &ready, err);
    if (rc <= 0 || ready) /* gone already, or not an upload: nothing to do */
        return rc < 0 ? rc : GP_OK;
    return delete_id(s->w, *id, err);
}

int gp_store_dataset_abort(gp_store *store, int64_t id, gp_error *err)
{
    int rc = gp_store_write_txn(store, abort_body, &id, "deleting an upload", err);
    if (rc == GP_ESTORAGE && gp_store_release_reserve(store)) /* a full disk: room to delete */
        rc = gp_store_write_txn(store, abort_body, &id, "deleting an upload", err);
    if (rc == GP_OK)
        gp_store_reclaim(store);
    return rc;
}

/* ---- reads of rows (ready data sets) ---- */

int gp_store_dataset_get(gp_store *store, const char *name, gp_dataset_row *row, gp_error *err)
{
    memset(row, 0, sizeof *row);
    int rc = gp_store_dataset_check_name(name, err);
    if (rc)
        return rc == GP_EINVAL ? gp_error_set(err, GP_ENOTFOUND, "name",
                                              "data set '%s' not found", name ? name : "")
                               : rc;
    gp_store_conn *r = gp_store_reader_lock(store);
    rc = row_on(r, GPS_DS_GET, name, 0, row, err);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int gp_store_dataset_get_id(gp_store *store, int64_t id, gp_dataset_row *row, gp_error *err)
{
    memset(row, 0, sizeof *row);
    gp_store_conn *r = gp_store_reader_lock(store);
    int rc = row_on(r, GPS_DS_GET_ID, NULL, id, row, err);
    pthread_mutex_unlock(&r->mu);
    if (rc == GP_OK && strcmp(row->state, "ready") != 0) {
        gp_dataset_row_free(row);
        memset(row, 0, sizeof *row);
        rc = gp_error_set(err, GP_ENOTFOUND, "dataset",
                          "data set row %" PRId64 " is an upload, not a data set", id);
    }
    return rc;
}

int gp_store_dataset_list(gp_store *store, gp_dataset_row **rows, size_t *count, gp_error *err)
{
    *rows = NULL;
    *count = 0;
    gp_dataset_row *out = NULL;
    size_t n = 0, cap = 0;
    gp_store_conn *r = gp_store_reader_lock(store);
    gp_db_stmt *st = gp_store_stmt(r, GPS_DS_LIST);
    int rc = GP_OK, src;
    while (rc == GP_OK && (src = gp_db_step(st)) == GP_DB_ROW) {
        if (n == cap) {
            size_t c2 = cap ? 2 * cap : 16;
            gp_dataset_row *grown = realloc(out, c2 * sizeof *out);
            if (grown == NULL) {
                rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory listing data sets");
                break;
            }
            out = grown;
            cap = c2;
        }
        rc = read_row(st, &out[n], err);
        if (rc)
            gp_dataset_row_free(&out[n]);
        else
            n++;
    }
    if (rc == GP_OK && src != GP_DB_DONE)
        rc = gp_store_sql_error(r, src, err, "listing data sets");
    gp_store_stmt_done(st);
    pthread_mutex_unlock(&r->mu);
    if (rc || n == 0) {
        gp_dataset_row_free_array(out, n);
        return rc;
    }
    *rows = out;
    *count = n;
    return GP_OK;
}

/* ---- users and deletes ---- */

typedef struct delete_ctx {
    const char *name;
    double now;
    const gp_audit_put *audit;
} delete_ctx;

static int delete_body(gp_store *s, void *vctx, gp_error *err)
{
    delete_ctx *c = vctx;
    int rc = gp_store_dataset_lock(s->w, c->name, err);
    int64_t id = 0;
    if (rc == GP_OK)
        rc = gp_store_dataset_ready_id(s->w, c->name, &id, err);
    if (rc == 0)
        return gp_error_set(err, GP_ENOTFOUND, "name", "data set '%s' not found", c->name);
    if (rc == 1)
        rc = gp_store_dataset_in_use(s->w, id, c->name, c->now, err);
    if (rc == GP_OK)
        rc = delete_id(s->w, id, err);
    if (rc == GP_OK)
        rc = gp_store_audit_put_locked(s, c->audit, 0, err);
    return rc;
}

int gp_store_dataset_delete(gp_store *store, const char *name, double now,
                            const gp_audit_put *audit, gp_error *err)
{
    int rc = gp_store_dataset_check_name(name, err);
    if (rc)
        return rc;
    delete_ctx c = {name, now, audit};
    rc = gp_store_write_txn(store, delete_body, &c, "deleting a data set", err);
    if (rc == GP_ESTORAGE && gp_store_release_reserve(store))
        rc = gp_store_write_txn(store, delete_body, &c, "deleting a data set", err);
    if (rc == GP_OK)
        gp_store_reclaim(store);
    return rc;
}
