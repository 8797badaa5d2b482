/* gpserve store: jobs, and durable jobs (store.h).
 *
 * A durable job's row carries its request (the validated fit fields as JSON,
 * and X and y in `job_arrays`) from the transaction that creates it until the
 * one that ends it. The daemon holding it (owner) keeps a lease (lease_until,
 * Unix seconds) alive; every write of a holder says `AND owner = ?`, so a
 * daemon that lost its job to another (its lease expired while it was stopped
 * or slow) changes nothing. Claims run in BEGIN IMMEDIATE transactions: the
 * check that a lease expired and the take-over are one step, so of several
 * daemons exactly one gets each job. */
#include "store/store_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- plain rows ----------------------------------------------------------- */

void gp_job_row_free(gp_job_row *job)
{
    if (job == NULL)
        return;
    free(job->progress);
    free(job->error);
    free(job->result);
    job->progress = job->error = job->result = NULL;
}

/* Bind parameters 1, 2, ... of st from the arguments, one per letter of
 * types: 't' text (const char *, NULL binds NULL), 'd' double, 'i' int. The
 * texts must outlive the statement's step (they are not copied). */
static int bind_values(gp_db_stmt *st, const char *types, ...)
{
    va_list ap;
    va_start(ap, types);
    int src = GP_DB_OK;
    for (int i = 0; types[i] && src == GP_DB_OK; i++) {
        if (types[i] == 't')
            src = gp_db_bind_text(st, i + 1, va_arg(ap, const char *));
        else if (types[i] == 'd')
            src = gp_db_bind_double(st, i + 1, va_arg(ap, double));
        else
            src = gp_db_bind_int64(st, i + 1, va_arg(ap, int));
    }
    va_end(ap);
    return src;
}

static int job_put_once(gp_store *s, void *vctx, gp_error *err)
{
    const gp_job_row *job = vctx;
    char now[GP_TIME_LEN];
    gp_store_now(now);
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_JOB_PUT);
    int src = bind_values(st, "ttttttt", job->id, job->model_name, job->status, job->progress,
                          job->error, job->result, now);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    gp_store_stmt_done(st);
    if (src != GP_DB_DONE)
        return gp_store_sql_error(s->w, src, err, "saving a job");
    return GP_OK;
}

static int check_id(const char *id, gp_error *err)
{
    if (id == NULL || id[0] == '\0' || strnlen(id, GP_JOB_ID_LEN) == GP_JOB_ID_LEN)
        return gp_error_set(err, GP_EINVAL, "id", "job id must have 1..%d characters",
                            GP_JOB_ID_LEN - 1);
    return GP_OK;
}

static int check_row(const gp_job_row *job, gp_error *err)
{
    if (job == NULL)
        return gp_error_set(err, GP_EINVAL, "id", "no job given");
    int rc = check_id(job->id, err);
    if (rc)
        return rc;
    if (strnlen(job->model_name, sizeof job->model_name) == sizeof job->model_name)
        return gp_error_set(err, GP_EINVAL, "name", "job model name too long");
    if (job->status[0] == '\0' ||
        strnlen(job->status, sizeof job->status) == sizeof job->status)
        return gp_error_set(err, GP_EINVAL, "status", "job status must have 1..%zu characters",
                            sizeof job->status - 1);
    return GP_OK;
}

static int check_owner(const char *owner, gp_error *err)
{
    if (owner == NULL || owner[0] == '\0' || strnlen(owner, GP_JOB_OWNER_LEN) == GP_JOB_OWNER_LEN)
        return gp_error_set(err, GP_EINVAL, "owner", "job owner must have 1..%d characters",
                            GP_JOB_OWNER_LEN - 1);
    return GP_OK;
}

int gp_store_job_put(gp_store *store, const gp_job_row *job, gp_error *err)
{
    int rc = check_row(job, err);
    if (rc)
        return rc;
    rc = gp_store_write(store, job_put_once, (void *)job, err);
    return rc;
}

/* Columns 0..8 of GPS_JOB_GET into job. */
static int read_job_row(gp_db_stmt *st, const char *id, gp_job_row *job, gp_error *err)
{
    if (!gp_store_copy_col(st, 0, job->id, sizeof job->id, 0) ||
        !gp_store_copy_col(st, 1, job->model_name, sizeof job->model_name, 1) ||
        !gp_store_copy_col(st, 2, job->status, sizeof job->status, 0) ||
        !gp_store_copy_col(st, 6, job->created_at, sizeof job->created_at, 1) ||
        !gp_store_copy_col(st, 7, job->updated_at, sizeof job->updated_at, 1))
        return gp_error_set(err, GP_EDATA, "id", "job '%s' is corrupt", id);
    if (gp_store_dup_col(st, 3, &job->progress) || gp_store_dup_col(st, 4, &job->error) ||
        gp_store_dup_col(st, 5, &job->result))
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory reading job '%s'", id);
    job->attempts = gp_db_col_int(st, 8);
    return GP_OK;
}

/* The row of id on connection c (whose mutex the caller holds), read with
 * GPS_JOB_GET, or GPS_JOB_GET_LOCK inside a write transaction that goes on
 * to change the row. */
static int job_get_on(gp_store_conn *c, enum gp_store_stmt which, const char *id,
                      gp_job_row *job, gp_error *err)
{
    gp_db_stmt *st = gp_store_stmt(c, which);
    int src = gp_db_bind_text(st, 1, id);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    int rc = GP_OK;
    if (src == GP_DB_ROW)
        rc = read_job_row(st, id, job, err);
    else if (src == GP_DB_DONE)
        rc = gp_error_set(err, GP_ENOTFOUND, "id", "job '%s' not found", id);
    else
        rc = gp_store_sql_error(c, src, err, "reading a job");
    gp_store_stmt_done(st);
    return rc;
}

int gp_store_job_get(gp_store *store, const char *id, gp_job_row *job, gp_error *err)
{
    memset(job, 0, sizeof *job);
    if (id == NULL || id[0] == '\0' || strlen(id) >= GP_JOB_ID_LEN)
        return gp_error_set(err, GP_ENOTFOUND, "id", "job '%s' not found", id ? id : "");
    gp_store_conn *r = gp_store_reader_lock(store);
    int rc = job_get_on(r, GPS_JOB_GET, id, job, err);
    pthread_mutex_unlock(&r->mu);
    if (rc) {
        gp_job_row_free(job);
        memset(job, 0, sizeof *job);
    }
    return rc;
}

/* ---- durable jobs: writes of one statement -------------------------------- */

static int drop_arrays(gp_store_conn *w, const char *id, gp_error *err)
{
    gp_db_stmt *st = gp_store_stmt(w, GPS_JOB_DROP_ARRAYS);
    int src = gp_db_bind_text(st, 1, id);
    return gp_store_step_write(w, st, src, NULL, err, "dropping a job's data");
}

int gp_store_job_end_locked(gp_store *s, const char *id, const char *owner, const char *status,
                            const char *progress, const char *error, const char *result,
                            gp_error *err)
{
    char now[GP_TIME_LEN];
    gp_store_now(now);
    gp_store_conn *w = s->w;
    gp_db_stmt *st = gp_store_stmt(w, GPS_JOB_FINISH);
    int src = bind_values(st, "ttttttt", id, owner, status, progress, error, result, now);
    int changed = 0;
    int rc = gp_store_step_write(w, st, src, &changed, err, "ending a job");
    if (rc)
        return rc;
    if (changed == 0)
        return gp_error_set(err, GP_ECONFLICT, "id",
                            "job '%s' is no longer held by this daemon (another took it over)",
                            id);
    return drop_arrays(w, id, err);
}

/* The same for a body that fills *row: on failure row is freed and zeroed. */
static int row_txn(gp_store *s, int (*body)(gp_store *, void *, gp_error *), void *ctx,
                   gp_job_row *row, const char *what, gp_error *err)
{
    int rc = gp_store_write_txn(s, body, ctx, what, err);
    if (rc) {
        gp_job_row_free(row);
        memset(row, 0, sizeof *row);
    }
    return rc;
}

/* ---- create --------------------------------------------------------------- */

typedef struct create_ctx {
    const gp_job_row *job;
    const char *spec, *owner;
    const gp_state *data;
    double lease_until;
    const gp_idem_put *idem;
    const gp_audit_put *audit;
} create_ctx;

static int create_body(gp_store *s, void *vctx, gp_error *err)
{
    create_ctx *c = vctx;
    char now[GP_TIME_LEN];
    gp_store_now(now);
    /* A fit naming a data set: it must be there now, and stays while the
     * job is queued or running (a delete checks jobs.dataset_id). */
    const int64_t ds = c->job->dataset_id;
    int rc = ds > 0 ? gp_store_dataset_hold_locked(s, ds, err) : GP_OK;
    if (rc)
        return rc;
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_JOB_CREATE);
    int src = bind_values(st, "ttttttd", c->job->id, c->job->model_name, c->job->progress, now,
                          c->spec, c->owner, c->lease_until);
    if (src == GP_DB_OK)
        src = ds > 0 ? gp_db_bind_int64(st, 8, ds) : gp_db_bind_text(st, 8, NULL);
    rc = gp_store_step_write(s->w, st, src, NULL, err, "creating a job");
    if (rc == GP_OK && c->idem)
        rc = gp_store_idem_put_locked(s, c->idem, NULL, err);
    if (rc == GP_OK)
        rc = gp_store_audit_put_locked(s, c->audit, 0, err);
    if (rc)
        return rc;
    gp_array_owner ao = {.table = GP_ARRAYS_JOB, .job_id = c->job->id};
    return c->data ? gp_store_write_arrays(s, &ao, c->data, err) : GP_OK;
}

int gp_store_job_create(gp_store *store, const gp_job_row *job, const char *spec,
                        const gp_state *data, const char *owner, double lease_until,
                        gp_error *err)
{
    return gp_store_job_create_keyed(store, job, spec, data, owner, lease_until, NULL, err);
}

int gp_store_job_create_keyed(gp_store *store, const gp_job_row *job, const char *spec,
                              const gp_state *data, const char *owner, double lease_until,
                              const gp_idem_put *idem, gp_error *err)
{
    return gp_store_job_create_audited(store, job, spec, data, owner, lease_until, idem, NULL,
                                       err);
}

int gp_store_job_create_audited(gp_store *store, const gp_job_row *job, const char *spec,
                                const gp_state *data, const char *owner, double lease_until,
                                const gp_idem_put *idem, const gp_audit_put *audit,
                                gp_error *err)
{
    int rc = check_row(job, err);
    if (rc == GP_OK)
        rc = check_owner(owner, err);
    if (rc == GP_OK)
        rc = gp_store_idem_check(idem, err);
    if (rc == GP_OK && idem && idem->body == NULL)
        rc = gp_error_set(err, GP_EINVAL, "body", "a job's answer is known before it is stored");
    if (rc)
        return rc;
    if (spec == NULL || (data == NULL && job->dataset_id <= 0))
        return gp_error_set(err, GP_EINVAL, NULL, "a durable job needs its request");
    create_ctx c = {job, spec, owner, data, lease_until, idem, audit};
    return gp_store_write_txn(store, create_body, &c, "creating a job", err);
}

/* ---- the stored request --------------------------------------------------- */

static int read_request_row(gp_store_conn *r, const char *id, gp_job_row *row, char **spec,
                            gp_error *err)
{
    gp_db_stmt *st = gp_store_stmt(r, GPS_JOB_REQUEST);
    int src = gp_db_bind_text(st, 1, id);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    int rc = GP_OK;
    if (src == GP_DB_DONE || (src == GP_DB_ROW && gp_db_col_type(st, 0) == GP_DB_NULL)) {
        rc = gp_error_set(err, GP_ENOTFOUND, "id", "job '%s' has no stored request", id);
    } else if (src != GP_DB_ROW) {
        rc = gp_store_sql_error(r, src, err, "reading a job's request");
    } else {
        snprintf(row->id, sizeof row->id, "%s", id);
        if (!gp_store_copy_col(st, 1, row->model_name, sizeof row->model_name, 1) ||
            !gp_store_copy_col(st, 2, row->created_at, sizeof row->created_at, 1))
            rc = gp_error_set(err, GP_EDATA, "id", "job '%s' is corrupt", id);
        else if (gp_store_dup_col(st, 0, spec) || gp_store_dup_col(st, 3, &row->progress))
            rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory reading job '%s'", id);
        row->attempts = gp_db_col_int(st, 4);
    }
    gp_store_stmt_done(st);
    return rc;
}

int gp_store_job_request(gp_store *store, const char *id, gp_job_row *row, char **spec,
                         gp_state *data, gp_error *err)
{
    memset(row, 0, sizeof *row);
    *spec = NULL;
    int rc = check_id(id, err);
    if (rc)
        return rc;
    gp_store_conn *r = gp_store_reader_lock(store);
    /* One snapshot for the row and its arrays. */
    rc = gp_store_exec(r, GPS_BEGIN, err, "reading a job's request");
    if (rc == GP_OK)
        rc = read_request_row(r, id, row, spec, err);
    if (rc == GP_OK) {
        gp_array_owner ao = {.table = GP_ARRAYS_JOB, .job_id = id};
        rc = gp_store_read_arrays(r, &ao, data, err);
    }
    gp_store_rollback(r);
    pthread_mutex_unlock(&r->mu);
    if (rc) {
        free(*spec);
        *spec = NULL;
        gp_job_row_free(row);
    }
    return rc;
}

int gp_store_job_cancel_flag(gp_store *store, const char *id, const char *owner, int *requested,
                             gp_error *err)
{
    *requested = 0;
    int rc = check_id(id, err);
    if (rc == GP_OK)
        rc = check_owner(owner, err);
    if (rc)
        return rc;
    gp_store_conn *r = gp_store_reader_lock(store);
    gp_db_stmt *st = gp_store_stmt(r, GPS_JOB_CANCEL_FLAG);
    int src = bind_values(st, "tt", id, owner);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    if (src == GP_DB_ROW)
        *requested = gp_db_col_int(st, 0) != 0;
    else if (src == GP_DB_DONE)
        rc = gp_error_set(err, GP_ECONFLICT, "id", "job '%s' is not held by '%s' (it ended, or "
                          "another daemon took it over)", id, owner);
    else
        rc = gp_store_sql_error(r, src, err, "reading a job's cancel request");
    gp_store_stmt_done(st);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

/* ---- a holder's writes ---------------------------------------------------- */

typedef struct update_ctx {
    const gp_job_row *job;
    const char *owner;
    int started;
} update_ctx;

static int update_once(gp_store *s, void *vctx, gp_error *err)
{
    update_ctx *c = vctx;
    char now[GP_TIME_LEN];
    gp_store_now(now);
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_JOB_UPDATE);
    int src = bind_values(st, "ttttti", c->job->id, c->owner, c->job->status, c->job->progress,
                          now, c->started ? 1 : 0);
    int changed = 0;
    int rc = gp_store_step_write(s->w, st, src, &changed, err, "updating a job");
    if (rc == GP_OK && changed == 0)
        rc = gp_error_set(err, GP_ECONFLICT, "id",
                          "job '%s' is no longer held by this daemon (another took it over)",
                          c->job->id);
    return rc;
}

int gp_store_job_update(gp_store *store, const gp_job_row *job, const char *owner, int started,
                        gp_error *err)
{
    int rc = check_row(job, err);
    if (rc == GP_OK)
        rc = check_owner(owner, err);
    if (rc)
        return rc;
    update_ctx c = {job, owner, started};
    rc = gp_store_write(store, update_once, &c, err);
    return rc;
}

typedef struct finish_ctx {
    const gp_job_row *job;
    const char *owner;
    const gp_audit_put *audit;
} finish_ctx;

static int finish_body(gp_store *s, void *vctx, gp_error *err)
{
    finish_ctx *c = vctx;
    int rc = gp_store_job_end_locked(s, c->job->id, c->owner, c->job->status, c->job->progress,
                                     c->job->error, c->job->result, err);
    return rc ? rc : gp_store_audit_put_locked(s, c->audit, 0, err);
}

int gp_store_job_finish(gp_store *store, const gp_job_row *job, const char *owner,
                        gp_error *err)
{
    return gp_store_job_finish_audited(store, job, owner, NULL, err);
}

int gp_store_job_finish_audited(gp_store *store, const gp_job_row *job, const char *owner,
                                const gp_audit_put *audit, gp_error *err)
{
    int rc = check_row(job, err);
    if (rc == GP_OK && owner)
        rc = check_owner(owner, err);
    if (rc)
        return rc;
    finish_ctx c = {job, owner, audit};
    return gp_store_write_txn(store, finish_body, &c, "ending a job", err);
}

typedef struct pair_ctx {
    const char *id, *owner;
} pair_ctx;

static int release_once(gp_store *s, void *vctx, gp_error *err)
{
    pair_ctx *c = vctx;
    char now[GP_TIME_LEN];
    gp_store_now(now);
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_JOB_RELEASE);
    int src = bind_values(st, "ttt", c->id, c->owner, now);
    int changed = 0;
    int rc = gp_store_step_write(s->w, st, src, &changed, err, "releasing a job");
    if (rc == GP_OK && changed == 0)
        rc = gp_error_set(err, GP_ECONFLICT, "id", "job '%s' is not held by this daemon", c->id);
    return rc;
}

static int expire_once(gp_store *s, void *vctx, gp_error *err)
{
    pair_ctx *c = vctx;
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_JOB_EXPIRE);
    int src = bind_values(st, "tt", c->id, c->owner);
    return gp_store_step_write(s->w, st, src, NULL, err, "expiring a job's lease");
}

static int pair_write(gp_store *store, int (*once)(gp_store *, void *, gp_error *),
                      const char *id, const char *owner, gp_error *err)
{
    int rc = check_id(id, err);
    if (rc == GP_OK)
        rc = check_owner(owner, err);
    if (rc)
        return rc;
    pair_ctx c = {id, owner};
    rc = gp_store_write(store, once, &c, err);
    return rc;
}

int gp_store_job_release(gp_store *store, const char *id, const char *owner, gp_error *err)
{
    return pair_write(store, release_once, id, owner, err);
}

int gp_store_job_expire(gp_store *store, const char *id, const char *owner, gp_error *err)
{
    return pair_write(store, expire_once, id, owner, err);
}

/* ---- renewal -------------------------------------------------------------- */

typedef struct renew_ctx {
    const char *owner;
    double lease_until;
    gp_job_hold *held;
    size_t count, cap;
} renew_ctx;

static int hold_push(renew_ctx *c, const char *id, int cancel, gp_error *err)
{
    if (c->count == c->cap) {
        size_t cap = c->cap ? 2 * c->cap : 16;
        gp_job_hold *h = realloc(c->held, cap * sizeof *h);
        if (h == NULL)
            return gp_error_set(err, GP_ENOMEM, NULL, "out of memory listing held jobs");
        c->held = h;
        c->cap = cap;
    }
    gp_job_hold *h = &c->held[c->count++];
    snprintf(h->id, sizeof h->id, "%s", id ? id : "");
    h->cancel_requested = cancel;
    return GP_OK;
}

static int renew_body(gp_store *s, void *vctx, gp_error *err)
{
    renew_ctx *c = vctx;
    c->count = 0;
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_JOB_RENEW);
    int src = bind_values(st, "td", c->owner, c->lease_until);
    int rc = gp_store_step_write(s->w, st, src, NULL, err, "renewing leases");
    if (rc)
        return rc;
    st = gp_store_stmt(s->w, GPS_JOB_HELD_LIST);
    src = gp_db_bind_text(st, 1, c->owner);
    if (src == GP_DB_OK)
        while (rc == GP_OK && (src = gp_db_step(st)) == GP_DB_ROW)
            rc = hold_push(c, gp_db_col_text(st, 0),
                           gp_db_col_int(st, 1), err);
    if (rc == GP_OK && src != GP_DB_DONE)
        rc = gp_store_sql_error(s->w, src, err, "listing held jobs");
    gp_store_stmt_done(st);
    return rc;
}

int gp_store_job_renew(gp_store *store, const char *owner, double lease_until,
                       gp_job_hold **held, size_t *count, gp_error *err)
{
    *held = NULL;
    *count = 0;
    int rc = check_owner(owner, err);
    if (rc)
        return rc;
    renew_ctx c = {owner, lease_until, NULL, 0, 0};
    rc = gp_store_write_txn(store, renew_body, &c, "renewing leases", err);
    if (rc) {
        free(c.held);
        return rc;
    }
    *held = c.held;
    *count = c.count;
    return GP_OK;
}

/* ---- claims --------------------------------------------------------------- */

typedef struct claim_ctx {
    const char *owner, *gave_up_error;
    double now, lease_until;
    int max_attempts;
    gp_job_row *row;
    int outcome;
} claim_ctx;

/* The oldest-expired active job into row (GP_ENOTFOUND when none);
 * *cancel_requested as stored. */
static int find_expired(gp_store_conn *w, double now, gp_job_row *row, int *cancel_requested,
                        gp_error *err)
{
    gp_db_stmt *st = gp_store_stmt(w, GPS_JOB_EXPIRED);
    int src = gp_db_bind_double(st, 1, now);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    int rc = GP_OK;
    if (src == GP_DB_DONE) {
        rc = GP_ENOTFOUND;
    } else if (src != GP_DB_ROW) {
        rc = gp_store_sql_error(w, src, err, "looking for expired jobs");
    } else if (!gp_store_copy_col(st, 0, row->id, sizeof row->id, 0) ||
               !gp_store_copy_col(st, 1, row->status, sizeof row->status, 0)) {
        rc = gp_error_set(err, GP_EDATA, "id", "a stored job is corrupt");
    } else {
        row->attempts = gp_db_col_int(st, 2);
        *cancel_requested = gp_db_col_int(st, 3);
        if (gp_store_dup_col(st, 4, &row->progress))
            rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory reading a job");
    }
    gp_store_stmt_done(st);
    return rc;
}

static int take_job(gp_store *s, claim_ctx *c, gp_error *err)
{
    char now[GP_TIME_LEN];
    gp_store_now(now);
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_JOB_TAKE);
    int src = bind_values(st, "ttdtd", c->row->id, c->owner, c->lease_until, now, c->now);
    int changed = 0;
    int rc = gp_store_step_write(s->w, st, src, &changed, err, "claiming a job");
    if (rc == GP_OK && changed != 1)
        rc = gp_error_set(err, GP_EINTERNAL, "id", "claiming job '%s' changed %d rows",
                          c->row->id, changed);
    return rc;
}

static int claim_body(gp_store *s, void *vctx, gp_error *err)
{
    claim_ctx *c = vctx;
    gp_job_row_free(c->row);
    memset(c->row, 0, sizeof *c->row);
    c->outcome = GP_JOB_CLAIM_NONE;
    int cancel = 0;
    int rc = find_expired(s->w, c->now, c->row, &cancel, err);
    if (rc == GP_ENOTFOUND)
        return GP_OK;
    if (rc)
        return rc;
    /* A run that was interrupted counted an attempt when it started. */
    int interrupted = strcmp(c->row->status, "running") == 0;
    if (cancel) {
        c->outcome = GP_JOB_CLAIM_CANCELLED;
        snprintf(c->row->status, sizeof c->row->status, "cancelled");
        rc = gp_store_job_end_locked(s, c->row->id, NULL, "cancelled", c->row->progress, NULL,
                                     NULL, err);
    } else if (interrupted && c->row->attempts >= c->max_attempts) {
        c->outcome = GP_JOB_CLAIM_GAVE_UP;
        snprintf(c->row->status, sizeof c->row->status, "failed");
        rc = gp_store_job_end_locked(s, c->row->id, NULL, "failed", c->row->progress,
                                     c->gave_up_error, NULL, err);
    } else {
        c->outcome = GP_JOB_CLAIMED;
        snprintf(c->row->status, sizeof c->row->status, "queued");
        rc = take_job(s, c, err);
    }
    return rc;
}

int gp_store_job_claim(gp_store *store, const char *owner, double now, double lease_until,
                       int max_attempts, const char *gave_up_error, gp_job_row *row,
                       int *outcome, gp_error *err)
{
    memset(row, 0, sizeof *row);
    *outcome = GP_JOB_CLAIM_NONE;
    int rc = check_owner(owner, err);
    if (rc)
        return rc;
    claim_ctx c = {owner, gave_up_error, now, lease_until, max_attempts, row, 0};
    rc = row_txn(store, claim_body, &c, row, "claiming a job", err);
    if (rc == GP_OK)
        *outcome = c.outcome;
    return rc;
}

/* ---- cancel from anywhere ------------------------------------------------- */

typedef struct cancel_ctx {
    const char *id;
    double now;
    gp_job_row *row;
    int outcome;
} cancel_ctx;

static int cancel_body(gp_store *s, void *vctx, gp_error *err)
{
    cancel_ctx *c = vctx;
    gp_job_row_free(c->row);
    memset(c->row, 0, sizeof *c->row);
    gp_store_conn *w = s->w;
    int rc = job_get_on(w, GPS_JOB_GET_LOCK, c->id, c->row, err);
    if (rc)
        return rc;
    if (strcmp(c->row->status, "queued") != 0 && strcmp(c->row->status, "running") != 0) {
        c->outcome = GP_JOB_CANCEL_ENDED;
        return GP_OK;
    }
    gp_db_stmt *st = gp_store_stmt(w, GPS_JOB_LEASE);
    int src = bind_values(st, "t", c->id);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    double lease = src == GP_DB_ROW ? gp_db_col_double(st, 0) : 0.0;
    gp_store_stmt_done(st);
    if (src != GP_DB_ROW)
        return gp_store_sql_error(w, src, err, "reading a job");
    if (lease < c->now) { /* nobody keeps it alive: end it here */
        c->outcome = GP_JOB_CANCELLED_NOW;
        snprintf(c->row->status, sizeof c->row->status, "cancelled");
        return gp_store_job_end_locked(s, c->id, NULL, "cancelled", c->row->progress, NULL, NULL,
                                       err);
    }
    c->outcome = GP_JOB_CANCEL_REQUESTED;
    st = gp_store_stmt(w, GPS_JOB_REQUEST_CANCEL);
    src = bind_values(st, "t", c->id);
    return gp_store_step_write(w, st, src, NULL, err, "requesting a cancel");
}

int gp_store_job_cancel(gp_store *store, const char *id, double now, gp_job_row *row,
                        int *outcome, gp_error *err)
{
    memset(row, 0, sizeof *row);
    *outcome = 0;
    if (id == NULL || id[0] == '\0' || strlen(id) >= GP_JOB_ID_LEN)
        return gp_error_set(err, GP_ENOTFOUND, "id", "job '%s' not found", id ? id : "");
    cancel_ctx c = {id, now, row, 0};
    int rc = row_txn(store, cancel_body, &c, row, "cancelling a job", err);
    if (rc == GP_OK)
        *outcome = c.outcome;
    return rc;
}

/* ---- retention ------------------------------------------------------------ */

int gp_store_job_prune(gp_store *store, const char *before, size_t *deleted, gp_error *err)
{
    return gp_store_prune_before(store, GPS_JOB_PRUNE, before, "removing old jobs", deleted, err);
}

/* ---- start-up ------------------------------------------------------------- */

int gp_store_job_owned(gp_store *store, const char *prefix, gp_job_owner **jobs, size_t *count,
                       gp_error *err)
{
    *jobs = NULL;
    *count = 0;
    size_t cap = 0, plen = prefix ? strlen(prefix) : 0;
    gp_store_conn *r = gp_store_reader_lock(store);
    gp_db_stmt *st = gp_store_stmt(r, GPS_JOB_ACTIVE);
    int src, rc = GP_OK;
    while (rc == GP_OK && (src = gp_db_step(st)) == GP_DB_ROW) {
        const char *id = gp_db_col_text(st, 0);
        const char *owner = gp_db_col_text(st, 1);
        if (id == NULL || owner == NULL || strncmp(owner, prefix ? prefix : "", plen) != 0)
            continue;
        if (*count == cap) {
            cap = cap ? 2 * cap : 16;
            gp_job_owner *p = realloc(*jobs, cap * sizeof *p);
            if (p == NULL) {
                rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory listing jobs");
                break;
            }
            *jobs = p;
        }
        snprintf((*jobs)[*count].id, GP_JOB_ID_LEN, "%s", id);
        snprintf((*jobs)[*count].owner, GP_JOB_OWNER_LEN, "%s", owner);
        (*count)++;
    }
    if (rc == GP_OK && src != GP_DB_DONE)
        rc = gp_store_sql_error(r, src, err, "listing jobs");
    gp_store_stmt_done(st);
    pthread_mutex_unlock(&r->mu);
    if (rc) {
        free(*jobs);
        *jobs = NULL;
        *count = 0;
    }
    return rc;
}
