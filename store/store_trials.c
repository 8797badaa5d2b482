/* gpserve store: the writes to a study's trials (store.h, "studies and
 * trials"; docs/design/storage.md, "Studies and trials"): the optimistic
 * insert of suggestions, completions in seq order, the clients' heartbeats
 * and the expiry of trials whose client went quiet.
 *
 * Every write that changes trials updates (or, the expiry, locks) the study
 * row first, in its transaction: on SQLite the file's one write lock already
 * runs the writers one at a time; on PostgreSQL (READ COMMITTED) the row
 * lock does it for the writers of one study, which commit in the order they
 * took it, and an UPDATE that waited for another writer's checks its WHERE
 * again on the row that writer committed. So an insert at a stale revision
 * changes nothing, and seq is n_completed + 1 of the row as the previous
 * completion left it. */
#include "store/store_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

/* A client id: NULL or "" is none (allowed where none_ok). */
static int check_client(const char *client_id, int none_ok, gp_error *err)
{
    size_t n = client_id ? strlen(client_id) : 0;
    if ((n == 0 && !none_ok) || n > GP_STUDY_CLIENT_MAX)
        return gp_error_set(err, GP_EINVAL, "client_id", "a client id has 1..%d characters",
                            GP_STUDY_CLIENT_MAX);
    return GP_OK;
}

/* After an update of study_id's row changed nothing: GP_ENOTFOUND field
 * "study" when the row is gone, else `if_there`. */
static int study_gone_or(gp_store *s, int64_t study_id, int if_there, gp_error *err)
{
    gp_study_row row;
    int rc = gp_store_study_by_id(s->w, study_id, &row, err);
    gp_study_row_free(&row);
    if (rc < 0)
        return rc;
    if (rc == 0)
        return gp_error_set(err, GP_ENOTFOUND, "study", "study row %" PRId64 " is gone",
                            study_id);
    return if_there;
}

/* An UPDATE ... RETURNING of one integer, bound (a, b, c; b and c used when
 * nb > 1, > 2): 1 and *out when it changed the row, 0 when it changed none. */
static int update_returning(gp_store_conn *w, enum gp_store_stmt id, int64_t a, int64_t b,
                            int64_t c, int nb, int64_t *out, const char *what, gp_error *err)
{
    gp_db_stmt *st = gp_store_stmt(w, id);
    int src = gp_db_bind_int64(st, 1, a);
    if (src == GP_DB_OK && nb > 1)
        src = gp_db_bind_int64(st, 2, b);
    if (src == GP_DB_OK && nb > 2)
        src = gp_db_bind_int64(st, 3, c);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    *out = src == GP_DB_ROW ? gp_db_col_int64(st, 0) : 0;
    gp_store_stmt_done(st);
    if (src == GP_DB_ROW)
        return 1;
    return src == GP_DB_DONE ? 0 : gp_store_sql_error(w, src, err, what);
}

/* ---- the optimistic insert ---- */

typedef struct add_ctx {
    int64_t study_id;
    uint64_t revision;
    const char *client_id;
    const gp_trial_new *trials;
    size_t q;
    double now, expires_at;
    const gp_audit_put *audit;
    int64_t *ids;
} add_ctx;

static int insert_trial(gp_store *s, const add_ctx *c, int64_t id, const char *parameters,
                        gp_error *err)
{
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_TRIAL_INSERT);
    int src = gp_db_bind_int64(st, 1, c->study_id);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 2, id);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 3, parameters);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 4, c->client_id);
    if (src == GP_DB_OK)
        src = gp_db_bind_double(st, 5, c->now);
    if (src == GP_DB_OK)
        src = gp_db_bind_double(st, 6, c->expires_at);
    return gp_store_step_write(s->w, st, src, NULL, err, "adding a trial");
}

static int add_body(gp_store *s, void *vctx, gp_error *err)
{
    add_ctx *c = vctx;
    int64_t n_trials = 0;
    int rc = update_returning(s->w, GPS_STUDY_RESERVE, c->study_id, (int64_t)c->revision,
                              (int64_t)c->q, 3, &n_trials, "adding trials", err);
    if (rc == 0)
        return study_gone_or(s, c->study_id,
                             gp_error_set(err, GP_ECONFLICT, NULL, "study changed"), err);
    if (rc < 0)
        return rc;
    const int64_t first = n_trials - (int64_t)c->q + 1;
    for (size_t i = 0; i < c->q && rc >= 0; i++) {
        c->ids[i] = first + (int64_t)i;
        rc = insert_trial(s, c, c->ids[i], c->trials[i].parameters, err);
    }
    return rc < 0 ? rc : gp_store_audit_put_locked(s, c->audit, 0, err);
}

int gp_store_trials_add(gp_store *s, int64_t study_id, uint64_t revision, const char *client_id,
                        const gp_trial_new *trials, size_t q, double now, double expires_at,
                        const gp_audit_put *audit, int64_t *ids_out, gp_error *err)
{
    int rc = check_client(client_id, 1, err);
    if (rc)
        return rc;
    if (q == 0 || q > INT32_MAX || trials == NULL || ids_out == NULL)
        return gp_error_set(err, GP_EINVAL, "count", "trials are added 1 or more at a time");
    for (size_t i = 0; i < q; i++)
        if (trials[i].parameters == NULL)
            return gp_error_set(err, GP_EINVAL, "parameters", "trial %zu has no parameters", i);
    if (revision > (uint64_t)INT64_MAX)
        return gp_error_set(err, GP_ECONFLICT, NULL, "study changed");
    add_ctx c = {study_id, revision, client_id && client_id[0] ? client_id : NULL, trials, q,
                 now, expires_at, audit, ids_out};
    rc = gp_store_write_txn(s, add_body, &c, "adding trials", err);
    if (rc)
        memset(ids_out, 0, q * sizeof *ids_out);
    return rc;
}

/* ---- heartbeats ---- */

typedef struct renew_ctx {
    int64_t study_id;
    const char *client_id;
    double expires_at;
    int renewed;
} renew_ctx;

static int renew_body(gp_store *s, void *vctx, gp_error *err)
{
    renew_ctx *c = vctx;
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_TRIAL_RENEW);
    int src = gp_db_bind_int64(st, 1, c->study_id);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 2, c->client_id);
    if (src == GP_DB_OK)
        src = gp_db_bind_double(st, 3, c->expires_at);
    return gp_store_step_write(s->w, st, src, &c->renewed, err, "renewing trials");
}

int gp_store_trials_renew(gp_store *s, int64_t study_id, const char *client_id, double expires_at,
                          size_t *renewed, gp_error *err)
{
    if (renewed)
        *renewed = 0;
    int rc = check_client(client_id, 0, err);
    if (rc)
        return rc;
    renew_ctx c = {study_id, client_id, expires_at, 0};
    /* Not waited on to reach the disk: a heartbeat lost with a power cut
     * costs nothing the next one does not mend, and clients send many. */
    uint64_t ticket = 0;
    rc = gp_store_write_txn_deferred(s, renew_body, &c, "renewing trials", &ticket, err);
    if (rc == GP_OK && renewed)
        *renewed = (size_t)c.renewed;
    return rc;
}

/* ---- completions ---- */

typedef struct complete_ctx {
    int64_t study_id, id;
    const char *state, *metrics, *reason;
    double now;
    const gp_audit_put *audit;
    uint64_t seq;
    gp_study_row *after;
} complete_ctx;

/* Why the trial's UPDATE changed nothing: no such trial, or not active. */
static int not_completed(gp_store *s, const complete_ctx *c, gp_error *err)
{
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_TRIAL_STATE);
    int src = gp_db_bind_int64(st, 1, c->study_id);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 2, c->id);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    char state[16] = "";
    if (src == GP_DB_ROW && !gp_store_copy_col(st, 0, state, sizeof state, 0))
        memcpy(state, "?", 2);
    gp_store_stmt_done(st);
    if (src == GP_DB_ROW)
        return gp_error_set(err, GP_ECONFLICT, "trial", "trial %" PRId64 " is %s, not active",
                            c->id, state);
    if (src == GP_DB_DONE)
        return gp_error_set(err, GP_ENOTFOUND, "trial", "the study has no trial %" PRId64,
                            c->id);
    return gp_store_sql_error(s->w, src, err, "reading a trial");
}

static int complete_body(gp_store *s, void *vctx, gp_error *err)
{
    complete_ctx *c = vctx;
    int64_t seq = 0;
    /* The study row first: its lock orders the completions (seq). */
    int rc = update_returning(s->w, GPS_STUDY_NEXT_SEQ, c->study_id, 0, 0, 1, &seq,
                              "completing a trial", err);
    if (rc == 0)
        return study_gone_or(s, c->study_id,
                             gp_error_set(err, GP_EINTERNAL, NULL, "a study row unchanged"), err);
    if (rc < 0)
        return rc;
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_TRIAL_COMPLETE);
    int src = gp_db_bind_int64(st, 1, c->study_id);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 2, c->id);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 3, c->state);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 4, c->metrics);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 5, c->reason);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 6, seq);
    if (src == GP_DB_OK)
        src = gp_db_bind_double(st, 7, c->now);
    int changed = 0;
    rc = gp_store_step_write(s->w, st, src, &changed, err, "completing a trial");
    if (rc == GP_OK && changed != 1)
        return not_completed(s, c, err);
    if (rc == GP_OK)
        rc = gp_store_audit_put_locked(s, c->audit, 0, err);
    if (rc == GP_OK && c->after) {
        rc = gp_store_study_by_id(s->w, c->study_id, c->after, err);
        rc = rc == 1   ? GP_OK
             : rc == 0 ? gp_error_set(err, GP_EINTERNAL, NULL, "a study row vanished")
                       : rc;
    }
    c->seq = (uint64_t)seq;
    return rc;
}

int gp_store_trial_complete(gp_store *s, int64_t study_id, int64_t id, const char *state,
                            const char *metrics, const char *reason, double now,
                            const gp_audit_put *audit, uint64_t *seq_out,
                            gp_study_row *study_after, gp_error *err)
{
    if (seq_out)
        *seq_out = 0;
    if (study_after)
        memset(study_after, 0, sizeof *study_after);
    const int completed = state && strcmp(state, "completed") == 0;
    if (!completed && !(state && strcmp(state, "infeasible") == 0))
        return gp_error_set(err, GP_EINVAL, "state",
                            "a trial ends completed or infeasible, not '%s'", state ? state : "");
    if (completed && metrics == NULL)
        return gp_error_set(err, GP_EINVAL, "metrics", "a completed trial has its metrics");
    complete_ctx c = {study_id, id, state, metrics, reason, now, audit, 0, study_after};
    int rc = gp_store_write_txn(s, complete_body, &c, "completing a trial", err);
    if (rc && study_after) {
        gp_study_row_free(study_after);
        memset(study_after, 0, sizeof *study_after);
    }
    if (rc == GP_OK && seq_out)
        *seq_out = c.seq;
    return rc;
}

/* ---- expiry ---- */

#define EXPIRE_STUDIES_MAX 1000 /* GPS_TRIAL_EXPIRED_STUDIES' LIMIT */

typedef struct expire_ctx {
    double now;
    size_t expired;
} expire_ctx;

/* The ids of the studies with an active trial past now (at most
 * EXPIRE_STUDIES_MAX) into ids. */
static int expiring_studies(gp_store *s, double now, int64_t *ids, size_t *n, gp_error *err)
{
    *n = 0;
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_TRIAL_EXPIRED_STUDIES);
    int src = gp_db_bind_double(st, 1, now);
    while (src == GP_DB_OK || src == GP_DB_ROW) {
        if ((src = gp_db_step(st)) == GP_DB_ROW && *n < EXPIRE_STUDIES_MAX)
            ids[(*n)++] = gp_db_col_int64(st, 0);
    }
    gp_store_stmt_done(st);
    return src == GP_DB_DONE ? GP_OK
                             : gp_store_sql_error(s->w, src, err, "finding trials to expire");
}

/* One study's expired trials; its revision bumped when there were any. */
static int expire_study(gp_store *s, int64_t study_id, double now, size_t *expired,
                        gp_error *err)
{
    /* Hold the row first, as every writer of the study's trials does. */
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_STUDY_LOCK);
    int src = gp_db_bind_int64(st, 1, study_id);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    gp_store_stmt_done(st);
    if (src == GP_DB_DONE)
        return GP_OK; /* deleted meanwhile, trials and all */
    if (src != GP_DB_ROW)
        return gp_store_sql_error(s->w, src, err, "expiring trials");
    st = gp_store_stmt(s->w, GPS_TRIAL_EXPIRE);
    src = gp_db_bind_int64(st, 1, study_id);
    if (src == GP_DB_OK)
        src = gp_db_bind_double(st, 2, now);
    int changed = 0;
    int rc = gp_store_step_write(s->w, st, src, &changed, err, "expiring trials");
    if (rc || changed == 0)
        return rc;
    *expired += (size_t)changed;
    st = gp_store_stmt(s->w, GPS_STUDY_BUMP);
    src = gp_db_bind_int64(st, 1, study_id);
    return gp_store_step_write(s->w, st, src, NULL, err, "expiring trials");
}

static int expire_body(gp_store *s, void *vctx, gp_error *err)
{
    expire_ctx *c = vctx;
    c->expired = 0;
    int64_t *ids = malloc(EXPIRE_STUDIES_MAX * sizeof *ids);
    if (ids == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory expiring trials");
    size_t n = 0;
    int rc = expiring_studies(s, c->now, ids, &n, err);
    for (size_t i = 0; rc == GP_OK && i < n; i++)
        rc = expire_study(s, ids[i], c->now, &c->expired, err);
    free(ids);
    return rc;
}

int gp_store_trials_expire(gp_store *s, double now, size_t *expired, gp_error *err)
{
    if (expired)
        *expired = 0;
    expire_ctx c = {now, 0};
    int rc = gp_store_write_txn(s, expire_body, &c, "expiring trials", err);
    if (rc == GP_OK && expired)
        *expired = c.expired;
    return rc;
}
