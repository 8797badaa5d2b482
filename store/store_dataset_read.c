/* gpserve store: reading a data set's rows (store.h, "data sets"): rows of
 * chosen columns, one statement at a time (a fit reads for minutes; it never
 * holds a transaction across its reads: SQLite's WAL readers and
 * PostgreSQL's snapshots let the writers go on meanwhile); and the prune of
 * abandoned uploads and expired reader leases. */
#include "store/store_internal.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* What a read wants and how far it got. */
typedef struct read_req {
    int64_t id;
    uint64_t n_rows, first;
    size_t count;
    const size_t *cols;
    size_t n;
    double *const *out;
    uint64_t next_part; /* the part expected next */
} read_req;

static int bad_part(const read_req *q, uint64_t part, gp_error *err)
{
    return gp_error_set(err, GP_EDATA, "dataset",
                        "data set row %" PRId64 ": part %" PRIu64 " is missing or of the wrong "
                        "shape",
                        q->id, part);
}

/* Copy what rows [q->first, q->first + q->count) need of the part in the
 * current row of st. */
static int take_part(read_req *q, gp_db_stmt *st, gp_error *err)
{
    const int64_t part = gp_db_col_int64(st, 0), first = gp_db_col_int64(st, 1);
    const int64_t rows = gp_db_col_int64(st, 2), cols = gp_db_col_int64(st, 3);
    const uint64_t start = q->next_part * GP_STORE_DATASET_PART_ROWS;
    const uint64_t left = q->n_rows - start;
    const uint64_t want_rows = left < GP_STORE_DATASET_PART_ROWS ? left
                                                                 : GP_STORE_DATASET_PART_ROWS;
    if (part < 0 || (uint64_t)part != q->next_part || first < 0 || (uint64_t)first != start ||
        rows < 1 || (uint64_t)rows != want_rows || cols < 1)
        return bad_part(q, q->next_part, err);
    const size_t r = (size_t)rows, c = (size_t)cols;
    const size_t bytes = gp_db_col_bytes(st, 4);
    const unsigned char *blob = gp_db_col_blob(st, 4);
    if (c > SIZE_MAX / 8 / r || bytes != r * c * 8 || blob == NULL)
        return bad_part(q, q->next_part, err);
    /* the rows of this part within the range */
    const uint64_t lo = q->first > start ? q->first - start : 0;
    const uint64_t end = q->first + q->count;
    const uint64_t hi = end < start + r ? end - start : r;
    const size_t dst = (size_t)(start + lo - q->first);
    const int le = gp_store_host_is_le();
    for (size_t j = 0; j < q->n; j++) {
        if (q->cols[j] >= c)
            return bad_part(q, q->next_part, err);
        const unsigned char *src = blob + (q->cols[j] * r + lo) * 8;
        if (le)
            memcpy(q->out[j] + dst, src, (size_t)(hi - lo) * 8);
        else
            gp_store_le_decode(src, (size_t)(hi - lo), q->out[j] + dst);
    }
    q->next_part++;
    return GP_OK;
}

int gp_store_dataset_read(gp_store *store, int64_t id, uint64_t n_rows, uint64_t first,
                          size_t count, const size_t *cols, size_t n, double *const *out,
                          gp_error *err)
{
    if (count == 0)
        return GP_OK;
    if (first > n_rows || count > n_rows - first || n == 0 || cols == NULL || out == NULL)
        return gp_error_set(err, GP_EINVAL, "rows",
                            "rows %" PRIu64 "..%" PRIu64 " are not rows of a data set of %" PRIu64,
                            first, first + count, n_rows);
    read_req q = {id, n_rows, first, count, cols, n, out, first / GP_STORE_DATASET_PART_ROWS};
    const uint64_t last = (first + count - 1) / GP_STORE_DATASET_PART_ROWS;
    gp_store_conn *r = gp_store_reader_lock(store);
    gp_db_stmt *st = gp_store_stmt(r, GPS_DS_PARTS);
    int src = gp_db_bind_int64(st, 1, id);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 2, (int64_t)q.next_part);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 3, (int64_t)last);
    int rc = GP_OK;
    while (rc == GP_OK && src == GP_DB_OK && (src = gp_db_step(st)) == GP_DB_ROW) {
        rc = take_part(&q, st, err);
        src = GP_DB_OK;
    }
    if (rc == GP_OK && src != GP_DB_DONE && src != GP_DB_OK)
        rc = gp_store_sql_error(r, src, err, "reading a data set");
    gp_store_stmt_done(st);
    pthread_mutex_unlock(&r->mu);
    if (rc == GP_OK && q.next_part != last + 1)
        rc = bad_part(&q, q.next_part, err);
    return rc;
}

typedef struct prune_ctx {
    double before;
    int deleted;
} prune_ctx;

static int prune_body(gp_store *s, void *vctx, gp_error *err)
{
    prune_ctx *c = vctx;
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_DS_PRUNE_UPLOADS);
    int src = gp_db_bind_double(st, 1, c->before);
    int rc = gp_store_step_write(s->w, st, src, &c->deleted, err, "removing abandoned uploads");
    if (rc == GP_OK) {
        st = gp_store_stmt(s->w, GPS_DS_READERS_PRUNE);
        src = gp_db_bind_double(st, 1, c->before);
        rc = gp_store_step_write(s->w, st, src, NULL, err, "removing expired readers");
    }
    return rc;
}

int gp_store_dataset_prune(gp_store *store, double before, size_t *deleted, gp_error *err)
{
    *deleted = 0;
    prune_ctx c = {before, 0};
    int rc = gp_store_write_txn(store, prune_body, &c, "removing abandoned uploads", err);
    if (rc == GP_OK && c.deleted > 0) {
        *deleted = (size_t)c.deleted;
        gp_store_reclaim(store);
    }
    return rc;
}
