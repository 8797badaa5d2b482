/* gpserve store: studies (store.h, "studies and trials";
 * docs/design/storage.md, "Studies and trials"): a study's row (create, get,
 * list, delete, the refit claim), the reads of its trials, and the snapshot
 * of both. The writes to trials are store_trials.c's. */
#include "store/store_internal.h"

#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

void gp_study_row_free(gp_study_row *r)
{
    if (r == NULL)
        return;
    free(r->config);
    r->config = NULL;
}

void gp_study_row_free_array(gp_study_row *r, size_t n)
{
    for (size_t i = 0; r && i < n; i++)
        gp_study_row_free(&r[i]);
    free(r);
}

void gp_trial_row_free(gp_trial_row *r)
{
    if (r == NULL)
        return;
    free(r->parameters);
    free(r->metrics);
    free(r->reason);
    r->parameters = r->metrics = r->reason = NULL;
}

void gp_trial_row_free_array(gp_trial_row *r, size_t n)
{
    for (size_t i = 0; r && i < n; i++)
        gp_trial_row_free(&r[i]);
    free(r);
}

/* A counter column: a non-negative integer. */
static int counter(gp_db_stmt *st, int col, uint64_t *out)
{
    int64_t v = gp_db_col_int64(st, col);
    *out = (uint64_t)v;
    return v >= 0;
}

int gp_store_study_read_row(gp_db_stmt *st, gp_study_row *r, gp_error *err)
{
    memset(r, 0, sizeof *r);
    r->id = gp_db_col_int64(st, 0);
    if (!gp_store_copy_col(st, 1, r->name, sizeof r->name, 0) ||
        !counter(st, 3, &r->revision) || !counter(st, 4, &r->n_trials) ||
        !counter(st, 5, &r->n_completed) || !counter(st, 6, &r->refit_n) ||
        !gp_store_copy_col(st, 7, r->created_at, sizeof r->created_at, 0) ||
        !gp_store_copy_col(st, 8, r->created_by, sizeof r->created_by, 1))
        return gp_error_set(err, GP_EDATA, "study", "study row %" PRId64 " is corrupt", r->id);
    if (gp_store_dup_col(st, 2, &r->config) || r->config == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory reading a study");
    return GP_OK;
}

int gp_store_trial_read_row(gp_db_stmt *st, gp_trial_row *r, gp_error *err)
{
    memset(r, 0, sizeof *r);
    r->id = gp_db_col_int64(st, 0);
    r->created = gp_db_col_double(st, 7);
    r->updated = gp_db_col_double(st, 8);
    r->expires_at = gp_db_col_double(st, 9);
    if (!gp_store_copy_col(st, 1, r->state, sizeof r->state, 0) ||
        !gp_store_copy_col(st, 5, r->client_id, sizeof r->client_id, 1) ||
        !counter(st, 6, &r->seq))
        return gp_error_set(err, GP_EDATA, "trial", "trial %" PRId64 " is corrupt", r->id);
    if (gp_store_dup_col(st, 2, &r->parameters) || r->parameters == NULL ||
        gp_store_dup_col(st, 3, &r->metrics) || gp_store_dup_col(st, 4, &r->reason)) {
        gp_trial_row_free(r);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory reading a trial");
    }
    return GP_OK;
}

/* One study row of statement id, bound to name or (name NULL) to key: 1
 * found, 0 none, or a negative code. */
static int study_on(gp_store_conn *c, enum gp_store_stmt id, const char *name, int64_t key,
                    gp_study_row *r, gp_error *err)
{
    memset(r, 0, sizeof *r);
    gp_db_stmt *st = gp_store_stmt(c, id);
    int src = name ? gp_db_bind_text(st, 1, name) : gp_db_bind_int64(st, 1, key);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    int rc = 0;
    if (src == GP_DB_ROW) {
        int read = gp_store_study_read_row(st, r, err);
        rc = read ? read : 1;
    } else if (src != GP_DB_DONE) {
        rc = gp_store_sql_error(c, src, err, "reading a study");
    }
    gp_store_stmt_done(st);
    if (rc != 1)
        gp_study_row_free(r);
    return rc;
}

int gp_store_study_by_id(gp_store_conn *c, int64_t id, gp_study_row *r, gp_error *err)
{
    return study_on(c, GPS_STUDY_GET_ID, NULL, id, r, err);
}

static int study_not_found(const char *name, gp_error *err)
{
    return gp_error_set(err, GP_ENOTFOUND, "name", "study '%s' not found", name ? name : "");
}

static int valid_name(const char *name)
{
    size_t n = name ? strlen(name) : 0;
    return n >= 1 && n <= GP_NAME_MAX;
}

/* ---- create ---- */

typedef struct create_ctx {
    const char *name, *config, *created_by;
    const gp_audit_put *audit;
    gp_study_row *out;
} create_ctx;

static int create_body(gp_store *s, void *vctx, gp_error *err)
{
    create_ctx *c = vctx;
    char at[GP_TIME_LEN];
    gp_store_now(at);
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_STUDY_INSERT);
    int src = gp_db_bind_text(st, 1, c->name);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 2, c->config);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 3, at);
    if (src == GP_DB_OK)
        src = gp_db_bind_text(st, 4, c->created_by);
    if (src == GP_DB_OK)
        src = gp_db_step(st); /* RETURNING id; no row: the name is taken */
    int64_t id = src == GP_DB_ROW ? gp_db_col_int64(st, 0) : 0;
    gp_store_stmt_done(st);
    if (src == GP_DB_DONE)
        return gp_error_set(err, GP_ECONFLICT, "name", "study '%s' exists", c->name);
    if (src != GP_DB_ROW)
        return gp_store_sql_error(s->w, src, err, "creating a study");
    int rc = gp_store_audit_put_locked(s, c->audit, 0, err);
    if (rc == GP_OK && c->out) {
        rc = gp_store_study_by_id(s->w, id, c->out, err);
        rc = rc == 1 ? GP_OK : rc == 0 ? gp_error_set(err, GP_EINTERNAL, NULL, "study vanished")
                                       : rc;
    }
    return rc;
}

int gp_store_study_create(gp_store *s, const char *name, const char *config, const char *created_by,
                          double now, const gp_audit_put *audit, gp_study_row *out,
                          gp_error *err)
{
    (void)now; /* created_at is the store's clock, as the other rows' */
    if (out)
        memset(out, 0, sizeof *out);
    if (!valid_name(name))
        return gp_error_set(err, GP_EINVAL, "name", "a study's name has 1..%d characters",
                            GP_NAME_MAX);
    if (config == NULL)
        return gp_error_set(err, GP_EINVAL, "config", "a study needs its configuration");
    if (created_by && (created_by[0] == '\0' || strlen(created_by) > GP_NAME_MAX))
        created_by = NULL;
    create_ctx c = {name, config, created_by, audit, out};
    int rc = gp_store_write_txn(s, create_body, &c, "creating a study", err);
    if (rc && out) {
        gp_study_row_free(out);
        memset(out, 0, sizeof *out);
    }
    return rc;
}

/* ---- reads ---- */

int gp_store_study_get(gp_store *s, const char *name, gp_study_row *out, gp_error *err)
{
    memset(out, 0, sizeof *out);
    if (!valid_name(name))
        return study_not_found(name, err);
    gp_store_conn *r = gp_store_reader_lock(s);
    int rc = study_on(r, GPS_STUDY_GET, name, 0, out, err);
    pthread_mutex_unlock(&r->mu);
    return rc == 1 ? GP_OK : rc == 0 ? study_not_found(name, err) : rc;
}

/* The rows of a stepped-through statement st (bound by the caller) into a
 * malloc'ed array of `size`-byte rows, each read by read. */
static int read_rows(gp_store_conn *c, gp_db_stmt *st, size_t size,
                     int (*read)(gp_db_stmt *, void *, gp_error *), void (*drop)(void *, size_t),
                     void **rows, size_t *n, const char *what, gp_error *err)
{
    *rows = NULL;
    *n = 0;
    char *out = NULL;
    size_t count = 0, cap = 0;
    int rc = GP_OK, src;
    while ((src = gp_db_step(st)) == GP_DB_ROW) {
        if (count == cap) {
            size_t c2 = cap ? 2 * cap : 16;
            char *grown = realloc(out, c2 * size);
            if (grown == NULL) {
                rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory %s", what);
                break;
            }
            out = grown;
            cap = c2;
        }
        if ((rc = read(st, out + count * size, err)) != GP_OK)
            break;
        count++;
    }
    if (rc == GP_OK && src != GP_DB_DONE)
        rc = gp_store_sql_error(c, src, err, what);
    if (rc || count == 0) {
        drop(out, count);
        return rc;
    }
    *rows = out;
    *n = count;
    return GP_OK;
}

static int read_study(gp_db_stmt *st, void *row, gp_error *err)
{
    int rc = gp_store_study_read_row(st, row, err);
    if (rc)
        gp_study_row_free(row);
    return rc;
}

static int read_trial(gp_db_stmt *st, void *row, gp_error *err)
{
    return gp_store_trial_read_row(st, row, err);
}

static void drop_studies(void *rows, size_t n) { gp_study_row_free_array(rows, n); }
static void drop_trials(void *rows, size_t n) { gp_trial_row_free_array(rows, n); }

int gp_store_study_list(gp_store *s, gp_study_row **rows, size_t *n, gp_error *err)
{
    gp_store_conn *r = gp_store_reader_lock(s);
    gp_db_stmt *st = gp_store_stmt(r, GPS_STUDY_LIST);
    void *out = NULL;
    int rc = read_rows(r, st, sizeof(gp_study_row), read_study, drop_studies, &out, n,
                       "listing studies", err);
    gp_store_stmt_done(st);
    pthread_mutex_unlock(&r->mu);
    *rows = out;
    return rc;
}

int gp_store_trials_of(gp_store_conn *c, int64_t study_id, gp_trial_row **rows, size_t *n,
                       gp_error *err)
{
    gp_db_stmt *st = gp_store_stmt(c, GPS_TRIALS_OF);
    void *out = NULL;
    int src = gp_db_bind_int64(st, 1, study_id);
    int rc = src == GP_DB_OK ? read_rows(c, st, sizeof(gp_trial_row), read_trial, drop_trials,
                                         &out, n, "reading trials", err)
                             : gp_store_sql_error(c, src, err, "reading trials");
    gp_store_stmt_done(st);
    *rows = out;
    return rc;
}

int gp_store_study_snapshot(gp_store *s, const char *name, gp_study_row *study, gp_trial_row **trials,
                            size_t *n, gp_error *err)
{
    memset(study, 0, sizeof *study);
    *trials = NULL;
    *n = 0;
    if (!valid_name(name))
        return study_not_found(name, err);
    gp_store_conn *r = gp_store_reader_lock(s);
    /* One read transaction: the trials of the study row read, as of one
     * commit (every write to them updates the row in its transaction). */
    int rc = gp_store_exec(r, GPS_BEGIN, err, "starting to read a study");
    if (rc == GP_OK) {
        rc = study_on(r, GPS_STUDY_GET, name, 0, study, err);
        rc = rc == 1 ? GP_OK : rc == 0 ? study_not_found(name, err) : rc;
        if (rc == GP_OK)
            rc = gp_store_trials_of(r, study->id, trials, n, err);
        if (rc == GP_OK)
            rc = gp_store_exec(r, GPS_COMMIT, err, "ending a read of a study");
        gp_store_rollback(r);
    }
    pthread_mutex_unlock(&r->mu);
    if (rc == GP_OK && *n != study->n_trials)
        rc = gp_error_set(err, GP_EDATA, "study", "study '%s' counts %" PRIu64
                          " trials and holds %zu", name, study->n_trials, *n);
    if (rc) {
        gp_study_row_free(study);
        gp_trial_row_free_array(*trials, *n);
        *trials = NULL;
        *n = 0;
    }
    return rc;
}

int gp_store_trial_get(gp_store *s, int64_t study_id, int64_t id, gp_trial_row *out,
                       gp_error *err)
{
    memset(out, 0, sizeof *out);
    gp_store_conn *r = gp_store_reader_lock(s);
    gp_db_stmt *st = gp_store_stmt(r, GPS_TRIAL_GET);
    int src = gp_db_bind_int64(st, 1, study_id);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 2, id);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    int rc = src == GP_DB_ROW    ? gp_store_trial_read_row(st, out, err)
             : src == GP_DB_DONE ? gp_error_set(err, GP_ENOTFOUND, "trial",
                                                "trial %" PRId64 " not found", id)
                                 : gp_store_sql_error(r, src, err, "reading a trial");
    gp_store_stmt_done(st);
    pthread_mutex_unlock(&r->mu);
    return rc;
}

/* ---- delete ---- */

typedef struct delete_ctx {
    const char *name;
    const gp_audit_put *audit;
} delete_ctx;

static int delete_body(gp_store *s, void *vctx, gp_error *err)
{
    delete_ctx *c = vctx;
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_STUDY_DELETE);
    int src = gp_db_bind_text(st, 1, c->name);
    int changed = 0;
    int rc = gp_store_step_write(s->w, st, src, &changed, err, "deleting a study");
    if (rc == GP_OK && changed == 0)
        return study_not_found(c->name, err);
    return rc ? rc : gp_store_audit_put_locked(s, c->audit, 0, err);
}

int gp_store_study_delete(gp_store *s, const char *name, const gp_audit_put *audit,
                          gp_error *err)
{
    if (!valid_name(name))
        return study_not_found(name, err);
    delete_ctx c = {name, audit};
    int rc = gp_store_write_txn(s, delete_body, &c, "deleting a study", err);
    if (rc == GP_ESTORAGE && gp_store_release_reserve(s)) /* a full disk: room to delete */
        rc = gp_store_write_txn(s, delete_body, &c, "deleting a study", err);
    if (rc == GP_OK)
        gp_store_reclaim(s);
    return rc;
}

/* ---- the refit claim ---- */

typedef struct claim_ctx {
    int64_t study_id;
    uint64_t n;
    int claimed;
} claim_ctx;

static int claim_body(gp_store *s, void *vctx, gp_error *err)
{
    claim_ctx *c = vctx;
    gp_db_stmt *st = gp_store_stmt(s->w, GPS_STUDY_REFIT_CLAIM);
    int src = gp_db_bind_int64(st, 1, c->study_id);
    if (src == GP_DB_OK)
        src = gp_db_bind_int64(st, 2, (int64_t)c->n);
    int changed = 0;
    int rc = gp_store_step_write(s->w, st, src, &changed, err, "claiming a refit");
    c->claimed = changed == 1;
    if (rc || c->claimed)
        return rc;
    gp_study_row row;
    rc = gp_store_study_by_id(s->w, c->study_id, &row, err);
    gp_study_row_free(&row);
    return rc == 1 ? GP_OK
           : rc == 0 ? gp_error_set(err, GP_ENOTFOUND, "study", "study row %" PRId64
                                    " is gone", c->study_id)
                     : rc;
}

int gp_store_study_refit_claim(gp_store *s, int64_t study_id, uint64_t n, int *claimed,
                               gp_error *err)
{
    *claimed = 0;
    if (n == 0 || n > (uint64_t)INT64_MAX)
        return gp_error_set(err, GP_EINVAL, "n", "a refit is claimed for 1 or more trials");
    claim_ctx c = {study_id, n, 0};
    int rc = gp_store_write_txn(s, claim_body, &c, "claiming a refit", err);
    if (rc == GP_OK)
        *claimed = c.claimed;
    return rc;
}
