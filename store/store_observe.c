/* gpserve store: the observation log and snapshots of online models (store.h,
 * docs/design/storage.md "Observation log and snapshots").
 *
 * An entry of the log is the arrays of one accepted batch in `observations`
 * under (model_id, seq); the models row counts the entries (obs_seq). An
 * append checks obs_seq and writes the entry, the new obs_seq and n_train,
 * and the optional snapshot in one BEGIN IMMEDIATE transaction, so that of
 * two writers that read the same obs_seq (two daemons on one file) exactly one
 * appends and the other gets GP_ECONFLICT, and a failure anywhere leaves the
 * log, the row and the previous snapshot as they were. Reads run in one read
 * transaction each: the snapshot on the reader, like a model's arrays; the
 * replay of the log on the log reader, entry by entry, so that neither the
 * log nor the other reads of the handle wait for the caller's callback. */
#include "store/store_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The row's obs_seq, on connection c inside its open transaction (with
 * GPS_OBS_HEAD, or GPS_OBS_HEAD_LOCK in a write transaction, which holds the
 * row until it ends); GP_ENOTFOUND when the row is gone. */
static int read_head(gp_store_conn *c, enum gp_store_stmt which, int64_t model_id,
                     uint64_t *obs_seq, gp_error *err)
{
    gp_db_stmt *st = gp_store_stmt(c, which);
    int src = gp_db_bind_int64(st, 1, model_id);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    int rc = GP_OK;
    if (src == GP_DB_ROW) {
        const int64_t v = gp_db_col_int64(st, 0);
        if (v < 0)
            rc = gp_error_set(err, GP_EDATA, "name", "model row %lld is corrupt (obs_seq %lld)",
                              (long long)model_id, (long long)v);
        else
            *obs_seq = (uint64_t)v;
    } else if (src == GP_DB_DONE) {
        rc = gp_error_set(err, GP_ENOTFOUND, "name", "model row %lld not found",
                          (long long)model_id);
    } else {
        rc = gp_store_sql_error(c, src, err, "reading a model's log");
    }
    gp_store_stmt_done(st);
    return rc;
}

/* ---- append --------------------------------------------------------------- */

typedef struct observe_ctx {
    int64_t model_id;
    uint64_t expected, n_after;
    const gp_state *batch, *snapshot;
    const gp_idem_put *idem;
    const gp_audit_put *audit;
} observe_ctx;

/* Inside the write transaction (gp_store_write_txn commits or rolls back). */
static int observe_body(gp_store *s, void *vctx, gp_error *err)
{
    observe_ctx *c = vctx;
    gp_store_conn *w = s->w;
    uint64_t head = 0;
    int rc = read_head(w, GPS_OBS_HEAD_LOCK, c->model_id, &head, err);
    if (rc)
        return rc;
    if (head != c->expected)
        return gp_error_set(err, GP_ECONFLICT, "name",
                            "model row %lld's log has %llu entries, not %llu: another writer "
                            "appended first",
                            (long long)c->model_id, (unsigned long long)head,
                            (unsigned long long)c->expected);
    if (c->idem && (rc = gp_store_idem_put_locked(s, c->idem, NULL, err)))
        return rc;
    if ((rc = gp_store_audit_put_locked(s, c->audit, 0, err)))
        return rc;
    const int64_t seq = (int64_t)c->expected + 1;
    const gp_array_owner entry = {.table = GP_ARRAYS_OBSERVATIONS, .model_id = c->model_id,
                                  .seq = seq};
    rc = gp_store_write_arrays(s, &entry, c->batch, err);
    if (rc)
        return rc;
    gp_db_stmt *st = gp_store_stmt(w, GPS_OBS_ADVANCE);
    int src = gp_db_bind_int64(st, 1, c->model_id);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 2, seq);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 3, (int64_t)c->n_after);
    rc = gp_store_step_write(w, st, src, NULL, err, "counting an observation");
    if (rc == GP_OK)
        rc = gp_store_notify(s, err, "notifying an observation");
    if (rc || c->snapshot == NULL)
        return rc;
    /* One snapshot per version: the new one replaces the old in this
     * transaction, so a reader sees the old one or the new one, whole. */
    st = gp_store_stmt(w, GPS_SNAP_DROP);
    src = gp_db_bind_int64(st, 1, c->model_id);
    rc = gp_store_step_write(w, st, src, NULL, err, "replacing a snapshot");
    if (rc)
        return rc;
    const gp_array_owner snap = {.table = GP_ARRAYS_SNAPSHOT, .model_id = c->model_id,
                                 .seq = seq};
    return gp_store_write_arrays(s, &snap, c->snapshot, err);
}

int gp_store_observe(gp_store *store, int64_t model_id, uint64_t expected_seq,
                     const gp_state *batch, size_t n_after, const gp_state *snapshot,
                     uint64_t *seq, gp_error *err)
{
    return gp_store_observe_keyed(store, model_id, expected_seq, batch, n_after, snapshot, NULL,
                                  seq, err);
}

int gp_store_observe_keyed(gp_store *store, int64_t model_id, uint64_t expected_seq,
                           const gp_state *batch, size_t n_after, const gp_state *snapshot,
                           const gp_idem_put *idem, uint64_t *seq, gp_error *err)
{
    uint64_t ticket = 0;
    int rc = gp_store_observe_deferred(store, model_id, expected_seq, batch, n_after, snapshot,
                                       idem, seq, &ticket, err);
    if (rc == GP_OK)
        rc = gp_store_wait_durable(store, ticket, err);
    if (rc != GP_OK && seq)
        *seq = 0;
    return rc;
}

int gp_store_observe_deferred(gp_store *store, int64_t model_id, uint64_t expected_seq,
                              const gp_state *batch, size_t n_after, const gp_state *snapshot,
                              const gp_idem_put *idem, uint64_t *seq, uint64_t *ticket,
                              gp_error *err)
{
    return gp_store_observe_audited(store, model_id, expected_seq, batch, n_after, snapshot, idem,
                                    NULL, seq, ticket, err);
}

int gp_store_observe_audited(gp_store *store, int64_t model_id, uint64_t expected_seq,
                             const gp_state *batch, size_t n_after, const gp_state *snapshot,
                             const gp_idem_put *idem, const gp_audit_put *audit, uint64_t *seq,
                             uint64_t *ticket, gp_error *err)
{
    *ticket = 0;
    if (seq)
        *seq = 0;
    /* Everything that can be refused is refused before the transaction. An
     * entry is its arrays' rows: one without arrays could not be read back. */
    if (batch == NULL || batch->count == 0)
        return gp_error_set(err, GP_EINVAL, "batch", "an observation needs at least one array");
    if (snapshot && snapshot->count == 0)
        return gp_error_set(err, GP_EINVAL, "snapshot", "a snapshot needs at least one array");
    if (expected_seq >= (uint64_t)INT64_MAX)
        return gp_error_set(err, GP_EINVAL, "seq", "observation log entry %llu out of range",
                            (unsigned long long)expected_seq);
    if ((uint64_t)n_after > (uint64_t)INT64_MAX)
        return gp_error_set(err, GP_EINVAL, "n_train", "n_train out of range");
    int rc = gp_store_check_arrays(batch, err);
    if (rc == GP_OK && snapshot)
        rc = gp_store_check_arrays(snapshot, err);
    if (rc == GP_OK)
        rc = gp_store_idem_check(idem, err);
    if (rc == GP_OK && idem && idem->body == NULL)
        rc = gp_error_set(err, GP_EINVAL, "body", "an observation's answer is known before it "
                          "is stored");
    if (rc)
        return rc;
    observe_ctx c = {.model_id = model_id, .expected = expected_seq, .n_after = n_after,
                     .batch = batch, .snapshot = snapshot, .idem = idem, .audit = audit};
    rc = gp_store_write_txn_deferred(store, observe_body, &c, "appending an observation", ticket,
                                     err);
    if (rc == GP_OK && seq)
        *seq = expected_seq + 1;
    return rc;
}

/* ---- the snapshot --------------------------------------------------------- */

/* The entry the row's snapshot follows (0: none), checked against the log's
 * length head: every row of a snapshot carries the same entry, 1..head. */
static int snapshot_seq(gp_store_conn *c, int64_t model_id, uint64_t head, uint64_t *at,
                        gp_error *err)
{
    gp_db_stmt *st = gp_store_stmt(c, GPS_SNAP_SEQ);
    int src = gp_db_bind_int64(st, 1, model_id);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    if (src != GP_DB_ROW) {
        int rc = gp_store_sql_error(c, src, err, "reading a snapshot");
        gp_store_stmt_done(st);
        return rc;
    }
    const int64_t n = gp_db_col_int64(st, 0);
    const int64_t lo = gp_db_col_int64(st, 1), hi = gp_db_col_int64(st, 2);
    gp_store_stmt_done(st);
    *at = 0;
    if (n == 0)
        return GP_OK;
    if (lo != hi)
        return gp_error_set(err, GP_EDATA, "snapshot",
                            "the snapshot of model row %lld is corrupt: its rows follow "
                            "entries %lld to %lld",
                            (long long)model_id, (long long)lo, (long long)hi);
    if (lo < 1 || (uint64_t)lo > head)
        return gp_error_set(err, GP_EDATA, "snapshot",
                            "the snapshot of model row %lld is corrupt: it follows entry %lld "
                            "of a log of %llu",
                            (long long)model_id, (long long)lo, (unsigned long long)head);
    *at = (uint64_t)lo;
    return GP_OK;
}

int gp_store_load_snapshot(gp_store *store, int64_t model_id, gp_state *state, uint64_t *seq,
                           gp_error *err)
{
    if (seq)
        *seq = 0;
    gp_state tmp;
    gp_state_init(&tmp);
    uint64_t head = 0, at = 0;
    gp_store_conn *r = gp_store_reader_lock(store);
    /* One snapshot of the file: the row, the snapshot's entry and its arrays
     * (an append replaces a snapshot in one transaction). */
    int rc = gp_store_exec(r, GPS_BEGIN, err, "starting to load a snapshot");
    if (rc == GP_OK) {
        rc = read_head(r, GPS_OBS_HEAD, model_id, &head, err);
        if (rc == GP_OK)
            rc = snapshot_seq(r, model_id, head, &at, err);
        const gp_array_owner snap = {.table = GP_ARRAYS_SNAPSHOT, .model_id = model_id,
                                     .seq = (int64_t)at};
        if (rc == GP_OK && at > 0)
            rc = gp_store_read_arrays(r, &snap, &tmp, err);
        if (rc == GP_OK)
            rc = gp_store_exec(r, GPS_COMMIT, err, "ending the load of a snapshot");
        gp_store_rollback(r);
    }
    pthread_mutex_unlock(&r->mu);
    if (rc == GP_OK && at > 0 && tmp.count == 0)
        rc = gp_error_set(err, GP_EDATA, "snapshot",
                          "the snapshot of model row %lld has no arrays", (long long)model_id);
    if (rc) {
        gp_state_free(&tmp);
        return rc;
    }
    if (at == 0)
        return GP_OK;
    rc = gp_store_append_state(state, &tmp, err);
    if (rc == GP_OK && seq)
        *seq = at;
    return rc;
}

/* ---- replay --------------------------------------------------------------- */

/* Entries after+1 .. upto, one at a time, inside c's read transaction. */
static int replay(gp_store_conn *c, int64_t model_id, uint64_t after, uint64_t upto,
                  gp_observation_fn fn, void *ctx, gp_error *err)
{
    int rc = GP_OK;
    for (uint64_t seq = after + 1; seq <= upto && rc == GP_OK; seq++) {
        gp_state batch;
        gp_state_init(&batch);
        const gp_array_owner entry = {.table = GP_ARRAYS_OBSERVATIONS, .model_id = model_id,
                                      .seq = (int64_t)seq};
        rc = gp_store_read_arrays(c, &entry, &batch, err);
        if (rc == GP_OK && batch.count == 0)
            rc = gp_error_set(err, GP_EDATA, "seq",
                              "the log of model row %lld is corrupt: entry %llu is missing",
                              (long long)model_id, (unsigned long long)seq);
        if (rc == GP_OK)
            rc = fn(ctx, seq, &batch, err);
        gp_state_free(&batch);
    }
    return rc;
}

int gp_store_observations(gp_store *store, int64_t model_id, uint64_t after, uint64_t upto,
                          gp_observation_fn fn, void *ctx, gp_error *err)
{
    if (fn == NULL)
        return gp_error_set(err, GP_EINVAL, NULL, "no observation callback given");
    if (upto > (uint64_t)INT64_MAX)
        return gp_error_set(err, GP_EINVAL, "upto", "observation log entry %llu out of range",
                            (unsigned long long)upto);
    if (after > upto)
        return gp_error_set(err, GP_EINVAL, "after",
                            "observation log range starts after it ends (%llu > %llu)",
                            (unsigned long long)after, (unsigned long long)upto);
    uint64_t head = 0;
    gp_store_conn *c = store->log;
    pthread_mutex_lock(&c->mu);
    int rc = gp_store_exec(c, GPS_BEGIN, err, "starting to read a log");
    if (rc == GP_OK) {
        rc = read_head(c, GPS_OBS_HEAD, model_id, &head, err);
        if (rc == GP_OK && upto > head)
            rc = gp_error_set(err, GP_EINVAL, "upto",
                              "model row %lld's log has %llu entries, not %llu",
                              (long long)model_id, (unsigned long long)head,
                              (unsigned long long)upto);
        if (rc == GP_OK)
            rc = replay(c, model_id, after, upto, fn, ctx, err);
        if (rc == GP_OK)
            rc = gp_store_exec(c, GPS_COMMIT, err, "ending the read of a log");
        gp_store_rollback(c);
    }
    pthread_mutex_unlock(&c->mu);
    return rc;
}
