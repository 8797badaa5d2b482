/* gpserve store: the connections, schema migrations, models and jobs.
 *
 * Three SQLite connections per gp_store, each serialised by its own mutex (see
 * struct gp_store in store_internal.h): a writer for saves, deletes, job
 * updates, observations and migrations, a query_only reader for everything
 * else but the replay of an observation log, and a query_only log reader for
 * that replay, so that reads are not held up by a long save or a long replay
 * (WAL: the readers see the last committed state). Every statement is prepared once at open
 * (sqlite3_prepare_v2) on both connections and takes its values through
 * bindings. Writes run in BEGIN IMMEDIATE transactions (the write lock is taken
 * before the version number is read, so savers in several processes get
 * distinct versions), retried as a whole if SQLite reports SQLITE_BUSY before
 * GP_STORE_BUSY_MS have passed. Reads reset every statement they step before
 * returning, so the reader holds no read transaction (no snapshot) between
 * calls. */
#include "store/store_internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- schema -------------------------------------------------------------- */

/* Migration to version v + 1 is migrations[v]; each runs inside the migration
 * transaction, which also sets PRAGMA user_version. A new version is one more
 * function appended to the table. */
typedef int (*migration_fn)(sqlite3 *db, char **errmsg);

static int migrate_to_v1(sqlite3 *db, char **errmsg)
{
    static const char sql[] =
        "CREATE TABLE models("
        " id INTEGER PRIMARY KEY,"
        " name TEXT NOT NULL,"
        " version INTEGER NOT NULL,"
        " method TEXT NOT NULL,"
        " spec TEXT NOT NULL,"
        " info TEXT NOT NULL,"
        " n_train INTEGER,"
        " input_dim INTEGER,"
        " created_at TEXT,"
        " UNIQUE(name, version));"
        "CREATE TABLE arrays("
        " model_id INTEGER REFERENCES models(id) ON DELETE CASCADE,"
        " key TEXT,"
        " part INTEGER NOT NULL DEFAULT 0,"
        " rows INTEGER,"
        " cols INTEGER,"
        " data BLOB,"
        " PRIMARY KEY(model_id, key, part));"
        "CREATE TABLE jobs("
        " id TEXT PRIMARY KEY,"
        " model_name TEXT,"
        " status TEXT,"
        " progress TEXT,"
        " error TEXT,"
        " result TEXT,"
        " created_at TEXT,"
        " updated_at TEXT);";
    return sqlite3_exec(db, sql, NULL, NULL, errmsg);
}

/* Durable jobs (docs/design/storage.md): a job row keeps the validated
 * request (`request`, the fit's fields without X and y, as JSON) and its data
 * (`job_arrays`: X and y in the parts scheme of `arrays`) until it ends; a
 * daemon holds it with `owner` until `lease_until` (Unix seconds), renewing
 * the lease while it runs; `attempts` counts the runs started;
 * `cancel_requested` is a DELETE seen by a daemon that does not hold it.
 * Jobs of version 1 that were queued or running kept no request: they can
 * never run, so they end as failed. */
static int migrate_to_v2(sqlite3 *db, char **errmsg)
{
    static const char sql[] =
        "ALTER TABLE jobs ADD COLUMN request TEXT;"
        "ALTER TABLE jobs ADD COLUMN owner TEXT;"
        "ALTER TABLE jobs ADD COLUMN lease_until REAL;"
        "ALTER TABLE jobs ADD COLUMN attempts INTEGER NOT NULL DEFAULT 0;"
        "ALTER TABLE jobs ADD COLUMN cancel_requested INTEGER NOT NULL DEFAULT 0;"
        "CREATE TABLE job_arrays("
        " job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
        " key TEXT,"
        " part INTEGER NOT NULL DEFAULT 0,"
        " rows INTEGER,"
        " cols INTEGER,"
        " data BLOB,"
        " PRIMARY KEY(job_id, key, part));"
        "CREATE INDEX jobs_active ON jobs(lease_until) WHERE status IN ('queued', 'running');"
        "CREATE INDEX jobs_ended ON jobs(updated_at)"
        " WHERE status IN ('succeeded', 'failed', 'cancelled');"
        "UPDATE jobs SET status = 'failed',"
        " error = '{\"code\":\"interrupted\",\"message\":\"the daemon holding this job "
        "stopped before gpserve kept jobs durably; submit the fit again\"}'"
        " WHERE status IN ('queued', 'running');";
    return sqlite3_exec(db, sql, NULL, NULL, errmsg);
}

/* Online models (docs/design/storage.md, "Observation log and snapshots"): a
 * version's log of accepted batches, entry seq = 1, 2, ... (each entry's
 * arrays in the parts scheme of `arrays`), the number of entries on the
 * models row (obs_seq), and the version's latest snapshot (one per version:
 * every row of it carries the entry it follows). Both go with their model row
 * (ON DELETE CASCADE; the primary keys lead with model_id, which the cascade
 * and every lookup use). */
static int migrate_to_v3(sqlite3 *db, char **errmsg)
{
    static const char sql[] =
        "ALTER TABLE models ADD COLUMN obs_seq INTEGER NOT NULL DEFAULT 0;"
        "CREATE TABLE observations("
        " model_id INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE,"
        " seq INTEGER NOT NULL,"
        " key TEXT NOT NULL,"
        " part INTEGER NOT NULL DEFAULT 0,"
        " rows INTEGER,"
        " cols INTEGER,"
        " data BLOB,"
        " PRIMARY KEY(model_id, seq, key, part));"
        "CREATE TABLE snapshots("
        " model_id INTEGER NOT NULL REFERENCES models(id) ON DELETE CASCADE,"
        " seq INTEGER NOT NULL,"
        " key TEXT NOT NULL,"
        " part INTEGER NOT NULL DEFAULT 0,"
        " rows INTEGER,"
        " cols INTEGER,"
        " data BLOB,"
        " PRIMARY KEY(model_id, key, part));";
    return sqlite3_exec(db, sql, NULL, NULL, errmsg);
}

static const migration_fn migrations[] = {migrate_to_v1, migrate_to_v2, migrate_to_v3};
#define SCHEMA_VERSION ((int)(sizeof migrations / sizeof migrations[0]))

static const char *const stmt_sql[GPS_STMT_COUNT] = {
    [GPS_BEGIN] = "BEGIN",
    [GPS_BEGIN_IMMEDIATE] = "BEGIN IMMEDIATE",
    [GPS_COMMIT] = "COMMIT",
    [GPS_ROLLBACK] = "ROLLBACK",
    [GPS_MAX_VERSION] = "SELECT COALESCE(MAX(version), 0) FROM models WHERE name = ?1",
    [GPS_INSERT_MODEL] = "INSERT INTO models(name, version, method, spec, info, n_train,"
                         " input_dim, created_at) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
    [GPS_INSERT_ARRAY] = "INSERT INTO arrays(model_id, key, part, rows, cols, data)"
                         " VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
    /* The columns read_meta_row reads; the brief forms leave spec and info
     * NULL (the UNIQUE(name, version) index finds the row either way). */
#define META_COLS "id, name, version, method, spec, info, n_train, input_dim, created_at, obs_seq"
#define BRIEF_COLS "id, name, version, method, NULL, NULL, n_train, input_dim, created_at, obs_seq"
    [GPS_META_LATEST] = "SELECT " META_COLS " FROM models WHERE name = ?1"
                        " ORDER BY version DESC LIMIT 1",
    [GPS_META_VERSION] = "SELECT " META_COLS " FROM models WHERE name = ?1 AND version = ?2",
    [GPS_META_BRIEF_LATEST] = "SELECT " BRIEF_COLS " FROM models WHERE name = ?1"
                              " ORDER BY version DESC LIMIT 1",
    [GPS_META_BRIEF_VERSION] = "SELECT " BRIEF_COLS " FROM models WHERE name = ?1 AND"
                               " version = ?2",
    [GPS_NAME_EXISTS] = "SELECT 1 FROM models WHERE name = ?1 LIMIT 1",
    [GPS_VERSIONS] = "SELECT version FROM models WHERE name = ?1 ORDER BY version",
    [GPS_LIST] = "SELECT " META_COLS " FROM models AS m WHERE version ="
                 " (SELECT MAX(version) FROM models WHERE name = m.name) ORDER BY name",
    [GPS_MODEL_EXISTS] = "SELECT 1 FROM models WHERE id = ?1",
    [GPS_ARRAYS] = "SELECT key, part, rows, cols, data FROM arrays WHERE model_id = ?1"
                   " ORDER BY key, part",
    /* length() reads a blob's size without reading its content. */
    [GPS_ARRAY_SUMMARY] = "SELECT count(*), max(part), sum(length(data)), min(rows), max(rows),"
                          " min(cols), max(cols) FROM arrays WHERE model_id = ?1 AND key = ?2",
    [GPS_DELETE] = "DELETE FROM models WHERE name = ?1",
    [GPS_JOB_PUT] = "INSERT INTO jobs(id, model_name, status, progress, error, result,"
                    " created_at, updated_at) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)"
                    " ON CONFLICT(id) DO UPDATE SET model_name = excluded.model_name,"
                    " status = excluded.status, progress = excluded.progress,"
                    " error = excluded.error, result = excluded.result,"
                    " updated_at = excluded.updated_at",
    [GPS_JOB_GET] = "SELECT id, model_name, status, progress, error, result, created_at,"
                    " updated_at, attempts FROM jobs WHERE id = ?1",
#define ACTIVE " status IN ('queued', 'running')"
    [GPS_JOB_CREATE] = "INSERT INTO jobs(id, model_name, status, progress, created_at,"
                       " updated_at, request, owner, lease_until)"
                       " VALUES(?1, ?2, 'queued', ?3, ?4, ?4, ?5, ?6, ?7)",
    [GPS_JOB_INSERT_ARRAY] = "INSERT INTO job_arrays(job_id, key, part, rows, cols, data)"
                             " VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
    [GPS_JOB_ARRAYS] = "SELECT key, part, rows, cols, data FROM job_arrays WHERE job_id = ?1"
                       " ORDER BY key, part",
    [GPS_JOB_ARRAY_SUMMARY] = "SELECT count(*), max(part), sum(length(data)), min(rows),"
                              " max(rows), min(cols), max(cols) FROM job_arrays"
                              " WHERE job_id = ?1 AND key = ?2",
    [GPS_JOB_DROP_ARRAYS] = "DELETE FROM job_arrays WHERE job_id = ?1",
    [GPS_JOB_HELD] = "SELECT status FROM jobs WHERE id = ?1 AND owner = ?2 AND" ACTIVE,
    /* ?6: 1 when a run starts (an attempt). */
    [GPS_JOB_UPDATE] = "UPDATE jobs SET status = ?3, progress = ?4, updated_at = ?5,"
                       " attempts = attempts + ?6 WHERE id = ?1 AND owner = ?2 AND" ACTIVE,
    [GPS_JOB_FINISH] = "UPDATE jobs SET status = ?3, progress = COALESCE(?4, progress), error = ?5, result = ?6,"
                       " updated_at = ?7, owner = NULL, lease_until = NULL, request = NULL"
                       " WHERE id = ?1 AND (?2 IS NULL OR owner = ?2) AND" ACTIVE,
    /* Handed back (graceful stop): queued, no owner, an interrupted run not counted. */
    [GPS_JOB_RELEASE] = "UPDATE jobs SET status = 'queued', owner = NULL, lease_until = 0,"
                        " attempts = attempts - (status = 'running'), updated_at = ?3"
                        " WHERE id = ?1 AND owner = ?2 AND" ACTIVE,
    [GPS_JOB_RENEW] = "UPDATE jobs SET lease_until = ?2 WHERE owner = ?1 AND" ACTIVE,
    [GPS_JOB_HELD_LIST] = "SELECT id, cancel_requested FROM jobs WHERE owner = ?1 AND" ACTIVE,
    [GPS_JOB_EXPIRED] = "SELECT id, status, attempts, cancel_requested, progress FROM jobs"
                        " WHERE" ACTIVE " AND lease_until < ?1 ORDER BY lease_until, created_at"
                        " LIMIT 1",
    [GPS_JOB_TAKE] = "UPDATE jobs SET status = 'queued', owner = ?2, lease_until = ?3,"
                     " updated_at = ?4 WHERE id = ?1 AND" ACTIVE " AND lease_until < ?5",
    [GPS_JOB_LEASE] = "SELECT lease_until FROM jobs WHERE id = ?1",
    [GPS_JOB_REQUEST_CANCEL] = "UPDATE jobs SET cancel_requested = 1 WHERE id = ?1 AND" ACTIVE,
    [GPS_JOB_ACTIVE] = "SELECT id, owner FROM jobs WHERE" ACTIVE " AND owner IS NOT NULL",
    [GPS_JOB_EXPIRE] = "UPDATE jobs SET lease_until = 0 WHERE id = ?1 AND owner = ?2 AND" ACTIVE,
    [GPS_JOB_REQUEST] = "SELECT request, model_name, created_at, progress, attempts FROM jobs"
                        " WHERE id = ?1",
    /* At most 1000 rows a call, so the write lock is held briefly. */
    [GPS_JOB_PRUNE] = "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE status IN"
                      " ('succeeded', 'failed', 'cancelled') AND updated_at < ?1 LIMIT 1000)",
#undef ACTIVE
    /* The observation log and snapshots (store_observe.c). Array statements
     * bind the model row to ?1, the array's name to ?2 and the entry to ?7
     * (store_arrays.c). */
    [GPS_OBS_HEAD] = "SELECT obs_seq FROM models WHERE id = ?1",
    [GPS_OBS_INSERT_ARRAY] = "INSERT INTO observations(model_id, seq, key, part, rows, cols,"
                             " data) VALUES(?1, ?7, ?2, ?3, ?4, ?5, ?6)",
    [GPS_OBS_ARRAYS] = "SELECT key, part, rows, cols, data FROM observations"
                       " WHERE model_id = ?1 AND seq = ?7 ORDER BY key, part",
    [GPS_OBS_ARRAY_SUMMARY] = "SELECT count(*), max(part), sum(length(data)), min(rows),"
                              " max(rows), min(cols), max(cols) FROM observations"
                              " WHERE model_id = ?1 AND seq = ?7 AND key = ?2",
    [GPS_OBS_ADVANCE] = "UPDATE models SET obs_seq = ?2, n_train = ?3 WHERE id = ?1",
    [GPS_SNAP_DROP] = "DELETE FROM snapshots WHERE model_id = ?1",
    [GPS_SNAP_INSERT_ARRAY] = "INSERT INTO snapshots(model_id, seq, key, part, rows, cols, data)"
                              " VALUES(?1, ?7, ?2, ?3, ?4, ?5, ?6)",
    [GPS_SNAP_ARRAYS] = "SELECT key, part, rows, cols, data FROM snapshots WHERE model_id = ?1"
                        " ORDER BY key, part",
    [GPS_SNAP_ARRAY_SUMMARY] = "SELECT count(*), max(part), sum(length(data)), min(rows),"
                               " max(rows), min(cols), max(cols) FROM snapshots"
                               " WHERE model_id = ?1 AND key = ?2",
    [GPS_SNAP_SEQ] = "SELECT count(*), min(seq), max(seq) FROM snapshots WHERE model_id = ?1",
#undef META_COLS
#undef BRIEF_COLS
};

/* ---- helpers ------------------------------------------------------------- */

sqlite3_stmt *gp_store_stmt(gp_store_conn *c, enum gp_store_stmt id)
{
    sqlite3_stmt *st = c->stmt[id];
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    return st;
}

void gp_store_stmt_done(sqlite3_stmt *st)
{
    if (st == NULL)
        return;
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
}

int gp_store_sql_error(gp_store_conn *c, int rc, gp_error *err, const char *what)
{
    c->last_rc = rc;
    const char *msg = sqlite3_errmsg(c->db);
    switch (rc & 0xff) {
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return gp_error_set(err, GP_ENOTREADY, NULL, "database busy while %s: %s", what, msg);
    case SQLITE_NOMEM:
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory while %s: %s", what, msg);
    case SQLITE_FULL:
        return gp_error_set(err, GP_ESTORAGE, NULL, "the disk is full while %s: %s", what, msg);
    case SQLITE_IOERR:
        /* A write the file system refused for want of space (WAL, journal). */
        if (sqlite3_system_errno(c->db) == ENOSPC)
            return gp_error_set(err, GP_ESTORAGE, NULL, "the disk is full while %s: %s", what,
                                msg);
        return gp_error_set(err, GP_EINTERNAL, NULL, "SQLite error while %s: %s", what, msg);
    default:
        return gp_error_set(err, GP_EINTERNAL, NULL, "SQLite error while %s: %s", what, msg);
    }
}

int gp_store_step_write(gp_store_conn *c, sqlite3_stmt *st, int src, int *changed,
                        gp_error *err, const char *what)
{
    if (src == SQLITE_OK)
        src = sqlite3_step(st);
    gp_store_stmt_done(st);
    if (src != SQLITE_DONE)
        return gp_store_sql_error(c, src, err, what);
    if (changed)
        *changed = sqlite3_changes(c->db);
    return GP_OK;
}

int gp_store_exec(gp_store_conn *c, enum gp_store_stmt id, gp_error *err, const char *what)
{
    return gp_store_step_write(c, gp_store_stmt(c, id), SQLITE_OK, NULL, err, what);
}

void gp_store_rollback(gp_store_conn *c)
{
    if (!sqlite3_get_autocommit(c->db)) {
        sqlite3_stmt *st = gp_store_stmt(c, GPS_ROLLBACK);
        (void)sqlite3_step(st);
        gp_store_stmt_done(st);
    }
}

char *gp_store_dup_text(const char *text)
{
    size_t n = strlen(text) + 1;
    char *p = malloc(n);
    if (p)
        memcpy(p, text, n);
    return p;
}

int gp_store_copy_col(sqlite3_stmt *st, int col, char *dst, size_t size, int allow_null)
{
    const char *t = (const char *)sqlite3_column_text(st, col);
    if (t == NULL) {
        dst[0] = '\0';
        return allow_null;
    }
    size_t n = strlen(t);
    if (n >= size)
        return 0;
    memcpy(dst, t, n + 1);
    return 1;
}

int gp_store_dup_col(sqlite3_stmt *st, int col, char **dst)
{
    const char *t = (const char *)sqlite3_column_text(st, col);
    *dst = NULL;
    if (t == NULL)
        return sqlite3_column_type(st, col) == SQLITE_NULL ? 0 : -1;
    *dst = gp_store_dup_text(t);
    return *dst ? 0 : -1;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Run write(s, ctx, err) (one whole transaction on the writer) again while it
 * fails with SQLITE_BUSY, for up to GP_STORE_BUSY_MS. SQLite's busy handler
 * already waits for locks; this covers the busy results it returns without
 * waiting (e.g. while another connection recovers the WAL). Called with the
 * writer's mutex held. */
static int busy_retry(gp_store *s, int (*write)(gp_store *, void *, gp_error *), void *ctx,
                      gp_error *err)
{
    const double start = now_seconds();
    long pause = 1;
    for (;;) {
        s->w->last_rc = SQLITE_OK;
        int rc = write(s, ctx, err);
        if (rc == GP_OK || (s->w->last_rc & 0xff) != SQLITE_BUSY)
            return rc;
        if ((now_seconds() - start) * 1000.0 >= GP_STORE_BUSY_MS)
            return rc;
        sleep_ms(pause);
        if (pause < 32)
            pause *= 2;
    }
}

int gp_store_write(gp_store *s, int (*write)(gp_store *, void *, gp_error *), void *ctx,
                   gp_error *err)
{
    pthread_mutex_lock(&s->w->mu);
    int rc = busy_retry(s, write, ctx, err);
    pthread_mutex_unlock(&s->w->mu);
    return rc;
}

/* A write transaction around body(s, ctx, err) on the writer, retried while busy. */
typedef struct txn_call {
    int (*body)(gp_store *s, void *ctx, gp_error *err);
    void *ctx;
    const char *what;
} txn_call;

static int txn_once(gp_store *s, void *vcall, gp_error *err)
{
    txn_call *call = vcall;
    int rc = gp_store_exec(s->w, GPS_BEGIN_IMMEDIATE, err, call->what);
    if (rc)
        return rc;
    rc = call->body(s, call->ctx, err);
    if (rc == GP_OK)
        rc = gp_store_exec(s->w, GPS_COMMIT, err, call->what);
    if (rc)
        gp_store_rollback(s->w);
    return rc;
}

int gp_store_write_txn(gp_store *s, int (*body)(gp_store *, void *, gp_error *), void *ctx,
                       const char *what, gp_error *err)
{
    txn_call call = {body, ctx, what};
    return gp_store_write(s, txn_once, &call, err);
}

void gp_store_now(char out[GP_TIME_LEN])
{
    time_t t = time(NULL);
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL || strftime(out, GP_TIME_LEN, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        memcpy(out, "1970-01-01T00:00:00Z", sizeof "1970-01-01T00:00:00Z");
}

/* ---- open / close -------------------------------------------------------- */

static int open_fail(sqlite3 *db, const char *path, const char *what, gp_error *err)
{
    return gp_error_set(err, GP_ENOTREADY, NULL, "cannot open database '%s': %s: %s", path, what,
                        db ? sqlite3_errmsg(db) : "out of memory");
}

/* Run a PRAGMA (constant text) and return its first column as text in out. */
static int pragma_text(sqlite3 *db, const char *sql, char *out, size_t size)
{
    sqlite3_stmt *st = NULL;
    int rc = sqlite3_prepare_v2(db, sql, -1, &st, NULL);
    if (rc != SQLITE_OK)
        return rc;
    out[0] = '\0';
    rc = sqlite3_step(st);
    if (rc == SQLITE_ROW) {
        const char *t = (const char *)sqlite3_column_text(st, 0);
        if (t)
            snprintf(out, size, "%s", t);
        rc = sqlite3_step(st);
    }
    sqlite3_finalize(st);
    return rc == SQLITE_DONE ? SQLITE_OK : rc;
}

static int exec_const(sqlite3 *db, const char *sql)
{
    return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/* Bring the schema to SCHEMA_VERSION in one IMMEDIATE transaction (two
 * processes opening a new file concurrently migrate it once). */
static int migrate(sqlite3 *db, const char *path, gp_error *err)
{
    char buf[32];
    /* Already current (the usual case): no write lock needed. */
    int rc = pragma_text(db, "PRAGMA user_version", buf, sizeof buf);
    if (rc != SQLITE_OK)
        return open_fail(db, path, "reading the schema version", err);
    if (strtol(buf, NULL, 10) == SCHEMA_VERSION)
        return GP_OK;
    rc = exec_const(db, "BEGIN IMMEDIATE");
    if (rc != SQLITE_OK)
        return open_fail(db, path, "starting the migration", err);
    rc = pragma_text(db, "PRAGMA user_version", buf, sizeof buf);
    if (rc != SQLITE_OK) {
        int code = open_fail(db, path, "reading the schema version", err);
        exec_const(db, "ROLLBACK");
        return code;
    }
    long version = strtol(buf, NULL, 10);
    if (version < 0 || version > SCHEMA_VERSION) {
        exec_const(db, "ROLLBACK");
        return gp_error_set(err, GP_ENOTREADY, NULL,
                            "cannot open database '%s': its schema version %ld is not one this "
                            "gpserve knows (0..%d)",
                            path, version, SCHEMA_VERSION);
    }
    for (int v = (int)version; v < SCHEMA_VERSION; v++) {
        char *msg = NULL;
        rc = migrations[v](db, &msg);
        if (rc == SQLITE_OK) {
            /* PRAGMA takes no bound parameters; the value is our own integer. */
            char sql[64];
            snprintf(sql, sizeof sql, "PRAGMA user_version = %d", v + 1);
            rc = exec_const(db, sql);
        }
        if (rc != SQLITE_OK) {
            int code = gp_error_set(err, GP_ENOTREADY, NULL,
                                    "cannot open database '%s': migration to schema version %d "
                                    "failed: %s",
                                    path, v + 1, msg ? msg : sqlite3_errmsg(db));
            sqlite3_free(msg);
            exec_const(db, "ROLLBACK");
            return code;
        }
    }
    rc = exec_const(db, "COMMIT");
    if (rc != SQLITE_OK) {
        int code = open_fail(db, path, "committing the migration", err);
        exec_const(db, "ROLLBACK");
        return code;
    }
    return GP_OK;
}

static void conn_close(gp_store_conn *c)
{
    for (int i = 0; i < GPS_STMT_COUNT; i++)
        sqlite3_finalize(c->stmt[i]);
    sqlite3_close(c->db);
    if (c->mu_ready)
        pthread_mutex_destroy(&c->mu);
    c->mu_ready = 0;
}

static void free_store(gp_store *s)
{
    /* The readers first: the writer, closed last, checkpoints the WAL into the
     * file (when no other process has the file open). */
    conn_close(&s->conn[2]);
    conn_close(&s->conn[1]);
    conn_close(&s->conn[0]);
    free(s);
}

/* Open connection c to path and apply the settings both connections share
 * (extended result codes, busy timeout, synchronous, foreign keys, WAL size
 * limit). The writer (create = 1, which may create the file) switches the file
 * to WAL; the reader only checks that it is in WAL. mode receives the journal
 * mode ("wal", or "memory" for an in-memory database). */
static int conn_open(gp_store_conn *c, const char *path, int create, char *mode, size_t mode_size,
                     gp_error *err)
{
    if (pthread_mutex_init(&c->mu, NULL) != 0)
        return gp_error_set(err, GP_EINTERNAL, NULL, "cannot create the store's mutex");
    c->mu_ready = 1;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
    int rc = sqlite3_open_v2(path, &c->db, flags, NULL);
    if (rc != SQLITE_OK)
        return open_fail(c->db, path, "open", err);
    sqlite3_extended_result_codes(c->db, 1);
    sqlite3_busy_timeout(c->db, GP_STORE_BUSY_MS);
    /* journal_mode is the first statement that reads the file: a file that is
     * not a database fails here. */
    rc = pragma_text(c->db, create ? "PRAGMA journal_mode = WAL" : "PRAGMA journal_mode", mode,
                     mode_size);
    if (rc != SQLITE_OK)
        return open_fail(c->db, path, create ? "setting WAL mode" : "reading the journal mode",
                         err);
    if (strcmp(mode, "wal") != 0 && (!create || strcmp(mode, "memory") != 0))
        return gp_error_set(err, GP_ENOTREADY, NULL,
                            "cannot open database '%s': WAL mode unavailable (journal mode %s)",
                            path, mode);
    /* journal_size_limit: truncate the WAL to 64 MiB after a checkpoint (a
     * large model would otherwise leave a WAL file of its size behind). */
    if (exec_const(c->db, "PRAGMA synchronous = NORMAL") != SQLITE_OK ||
        exec_const(c->db, "PRAGMA foreign_keys = ON") != SQLITE_OK ||
        exec_const(c->db, "PRAGMA journal_size_limit = 67108864") != SQLITE_OK)
        return open_fail(c->db, path, "configuring the connection", err);
    char fk[8];
    if (pragma_text(c->db, "PRAGMA foreign_keys", fk, sizeof fk) != SQLITE_OK ||
        strcmp(fk, "1") != 0)
        return gp_error_set(err, GP_ENOTREADY, NULL,
                            "cannot open database '%s': this SQLite has no foreign keys", path);
    return GP_OK;
}

static int conn_prepare(gp_store_conn *c, const char *path, gp_error *err)
{
    for (int i = 0; i < GPS_STMT_COUNT; i++) {
        if (sqlite3_prepare_v2(c->db, stmt_sql[i], -1, &c->stmt[i], NULL) != SQLITE_OK)
            return open_fail(c->db, path, "preparing statements", err);
    }
    return GP_OK;
}

/* Open a reader (the reader or the log reader) onto the migrated file. */
static int reader_open(gp_store_conn *c, const char *path, gp_error *err)
{
    char mode[32];
    int code = conn_open(c, path, 0, mode, sizeof mode, err);
    /* A reader must never write (its statements include the writer's; a
     * write stepped here fails with SQLITE_READONLY). */
    if (code == GP_OK && exec_const(c->db, "PRAGMA query_only = ON") != SQLITE_OK)
        code = open_fail(c->db, path, "configuring a reader", err);
    if (code == GP_OK)
        code = conn_prepare(c, path, err);
    return code;
}

int gp_store_open(const char *path, gp_store **out, gp_error *err)
{
    *out = NULL;
    if (path == NULL || path[0] == '\0')
        return gp_error_set(err, GP_EINVAL, "db", "no database path given");
    gp_store *s = calloc(1, sizeof *s);
    if (s == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory opening the store");
    s->w = &s->conn[0];
    char mode[32];
    /* The writer creates the file, switches it to WAL and migrates the schema;
     * the reader is opened after that, onto the current schema. */
    int code = conn_open(s->w, path, 1, mode, sizeof mode, err);
    if (code == GP_OK)
        code = migrate(s->w->db, path, err);
    if (code == GP_OK)
        code = conn_prepare(s->w, path, err);
    if (code)
        goto fail;
    if (strcmp(mode, "memory") == 0) {
        /* An in-memory database is private to its connection: read on the
         * writer (reads then wait for writes, as with one connection). */
        s->r = s->w;
        s->log = s->w;
    } else {
        s->r = &s->conn[1];
        s->log = &s->conn[2];
        for (int i = 1; i <= 2 && code == GP_OK; i++)
            code = reader_open(&s->conn[i], path, err);
        if (code)
            goto fail;
    }
    /* One blob per row, below SQLite's length limit (which covers the whole
     * row: leave room for the other columns). */
    gp_store_set_part_bytes(s, 0);
    *out = s;
    return GP_OK;
fail:
    free_store(s);
    return code;
}

void gp_store_close(gp_store *store)
{
    if (store == NULL)
        return;
    free_store(store);
}

void gp_store_set_part_bytes(gp_store *store, size_t bytes)
{
    pthread_mutex_lock(&store->w->mu);
    if (bytes == 0)
        bytes = GP_STORE_PART_BYTES;
    int limit = sqlite3_limit(store->w->db, SQLITE_LIMIT_LENGTH, -1);
    size_t max = limit > 4096 ? (size_t)limit - 1024 : 8;
    if (bytes > max)
        bytes = max;
    bytes -= bytes % 8;
    store->part_bytes = bytes < 8 ? 8 : bytes;
    pthread_mutex_unlock(&store->w->mu);
}

void gp_store_set_save_hook(gp_store *store, gp_store_save_hook_fn fn, void *arg)
{
    pthread_mutex_lock(&store->w->mu);
    store->save_hook = fn;
    store->save_hook_arg = arg;
    pthread_mutex_unlock(&store->w->mu);
}

/* ---- models -------------------------------------------------------------- */

void gp_model_meta_free(gp_model_meta *meta)
{
    if (meta == NULL)
        return;
    free(meta->spec);
    free(meta->info);
    meta->spec = NULL;
    meta->info = NULL;
}

void gp_model_meta_free_array(gp_model_meta *metas, size_t count)
{
    if (metas == NULL)
        return;
    for (size_t i = 0; i < count; i++)
        gp_model_meta_free(&metas[i]);
    free(metas);
}

/* Fill meta from a row of id, name, version, method, spec, info, n_train,
 * input_dim, created_at, obs_seq (spec and info NULL in the brief forms, read
 * with with_texts 0). On failure meta holds nothing to free. */
static int read_meta_row(sqlite3_stmt *st, gp_model_meta *meta, int with_texts, gp_error *err)
{
    memset(meta, 0, sizeof *meta);
    meta->id = sqlite3_column_int64(st, 0);
    const sqlite3_int64 version = sqlite3_column_int64(st, 2);
    const sqlite3_int64 n_train = sqlite3_column_int64(st, 6);
    const sqlite3_int64 input_dim = sqlite3_column_int64(st, 7);
    const sqlite3_int64 obs_seq = sqlite3_column_int64(st, 9);
    if (!gp_store_copy_col(st, 1, meta->name, sizeof meta->name, 0) || version < 1 ||
        version > INT_MAX || !gp_store_copy_col(st, 3, meta->method, sizeof meta->method, 0) ||
        !gp_store_copy_col(st, 8, meta->created_at, sizeof meta->created_at, 1) || n_train < 0 ||
        input_dim < 0 || obs_seq < 0 ||
        (with_texts && (sqlite3_column_type(st, 4) == SQLITE_NULL ||
                        sqlite3_column_type(st, 5) == SQLITE_NULL)))
        return gp_error_set(err, GP_EDATA, "name", "model row %lld is corrupt",
                            (long long)meta->id);
    meta->version = (int)version;
    meta->n_train = (size_t)n_train;
    meta->input_dim = (size_t)input_dim;
    meta->obs_seq = (uint64_t)obs_seq;
    if (with_texts && (gp_store_dup_col(st, 4, &meta->spec) || gp_store_dup_col(st, 5, &meta->info))) {
        gp_model_meta_free(meta);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory reading model metadata");
    }
    return GP_OK;
}

static int check_name(const char *name, gp_error *err)
{
    if (name == NULL || name[0] == '\0' || strlen(name) > GP_NAME_MAX)
        return gp_error_set(err, GP_EINVAL, "name", "model name must have 1..%d characters",
                            GP_NAME_MAX);
    return GP_OK;
}

typedef struct save_ctx {
    const char *name, *method, *spec, *info;
    size_t n_train, input_dim;
    const gp_state *state;
    const gp_job_done *job; /* NULL, or the durable job this save ends */
    int64_t id;
    int version;
    char created_at[GP_TIME_LEN];
} save_ctx;

/* Inside a save's transaction: end c->job succeeded with its result (made
 * from the new row), or GP_ECONFLICT when its owner no longer holds it. */
static int end_job_in_save(gp_store *s, const save_ctx *c, gp_error *err)
{
    const gp_job_done *jd = c->job;
    gp_model_meta meta;
    memset(&meta, 0, sizeof meta);
    meta.id = c->id;
    snprintf(meta.name, sizeof meta.name, "%s", c->name);
    meta.version = c->version;
    snprintf(meta.method, sizeof meta.method, "%s", c->method);
    meta.spec = (char *)c->spec; /* read only: the callback takes const meta */
    meta.info = (char *)c->info;
    meta.n_train = c->n_train;
    meta.input_dim = c->input_dim;
    memcpy(meta.created_at, c->created_at, sizeof meta.created_at);
    char *result = jd->result ? jd->result(&meta, jd->ctx) : NULL;
    if (jd->result && result == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory writing job '%s''s result",
                            jd->id);
    int rc = gp_store_job_end_locked(s, jd->id, jd->owner, "succeeded", jd->progress, NULL,
                                     result, err);
    free(result);
    return rc;
}

static int save_once(gp_store *s, void *vctx, gp_error *err)
{
    save_ctx *c = vctx;
    gp_store_conn *w = s->w;
    int rc = gp_store_exec(w, GPS_BEGIN_IMMEDIATE, err, "starting a save");
    if (rc)
        return rc;
    sqlite3_stmt *st = gp_store_stmt(w, GPS_MAX_VERSION);
    int src = sqlite3_bind_text(st, 1, c->name, -1, SQLITE_STATIC);
    if (src == SQLITE_OK)
        src = sqlite3_step(st);
    if (src != SQLITE_ROW) {
        rc = gp_store_sql_error(w, src, err, "reading the latest version");
        gp_store_stmt_done(st);
        goto fail;
    }
    sqlite3_int64 max = sqlite3_column_int64(st, 0);
    gp_store_stmt_done(st);
    if (max < 0 || max >= INT_MAX) {
        rc = gp_error_set(err, GP_EINTERNAL, "name", "model '%s' has no free version number",
                          c->name);
        goto fail;
    }
    c->version = (int)max + 1;
    gp_store_now(c->created_at);
    st = gp_store_stmt(w, GPS_INSERT_MODEL);
    src = sqlite3_bind_text(st, 1, c->name, -1, SQLITE_STATIC);
    if (src == SQLITE_OK)
        src = sqlite3_bind_int(st, 2, c->version);
    if (src == SQLITE_OK)
        src = sqlite3_bind_text(st, 3, c->method, -1, SQLITE_STATIC);
    if (src == SQLITE_OK)
        src = sqlite3_bind_text(st, 4, c->spec, -1, SQLITE_STATIC);
    if (src == SQLITE_OK)
        src = sqlite3_bind_text(st, 5, c->info, -1, SQLITE_STATIC);
    if (src == SQLITE_OK)
        src = sqlite3_bind_int64(st, 6, (sqlite3_int64)c->n_train);
    if (src == SQLITE_OK)
        src = sqlite3_bind_int64(st, 7, (sqlite3_int64)c->input_dim);
    if (src == SQLITE_OK)
        src = sqlite3_bind_text(st, 8, c->created_at, -1, SQLITE_STATIC);
    if (src == SQLITE_OK)
        src = sqlite3_step(st);
    gp_store_stmt_done(st);
    if (src != SQLITE_DONE) {
        rc = gp_store_sql_error(w, src, err, "saving a model");
        goto fail;
    }
    c->id = sqlite3_last_insert_rowid(w->db);
    if (c->state) {
        gp_array_owner owner = {.table = GP_ARRAYS_MODEL, .model_id = c->id};
        rc = gp_store_write_arrays(s, &owner, c->state, err);
        if (rc)
            goto fail;
    }
    if (c->job && (rc = end_job_in_save(s, c, err)))
        goto fail;
    if (s->save_hook)
        s->save_hook(s, c->id, s->save_hook_arg);
    rc = gp_store_exec(w, GPS_COMMIT, err, "committing a save");
    if (rc)
        goto fail;
    return GP_OK;
fail:
    gp_store_rollback(w);
    return rc;
}

int gp_store_save(gp_store *store, const char *name, const char *method, const char *spec,
                  const char *info, size_t n_train, size_t input_dim, const gp_state *state,
                  gp_model_meta *meta, gp_error *err)
{
    return gp_store_save_job(store, name, method, spec, info, n_train, input_dim, state, NULL,
                             meta, err);
}

int gp_store_save_job(gp_store *store, const char *name, const char *method, const char *spec,
                      const char *info, size_t n_train, size_t input_dim, const gp_state *state,
                      const gp_job_done *job, gp_model_meta *meta, gp_error *err)
{
    if (meta)
        memset(meta, 0, sizeof *meta);
    int rc = check_name(name, err);
    if (rc)
        return rc;
    if (method == NULL || method[0] == '\0' || strlen(method) > GP_METHOD_NAME_MAX)
        return gp_error_set(err, GP_EINVAL, "method", "method name must have 1..%d characters",
                            GP_METHOD_NAME_MAX);
    if (spec == NULL || info == NULL)
        return gp_error_set(err, GP_EINVAL, NULL, "a model needs its spec and info texts");
    if ((uint64_t)n_train > INT64_MAX || (uint64_t)input_dim > INT64_MAX)
        return gp_error_set(err, GP_EINVAL, NULL, "n_train or input_dim out of range");
    save_ctx c = {.name = name, .method = method, .spec = spec, .info = info,
                  .n_train = n_train, .input_dim = input_dim, .state = state, .job = job};
    rc = gp_store_write(store, save_once, &c, err);
    if (rc || meta == NULL)
        return rc;
    meta->id = c.id;
    memcpy(meta->name, name, strlen(name) + 1);
    meta->version = c.version;
    memcpy(meta->method, method, strlen(method) + 1);
    memcpy(meta->created_at, c.created_at, sizeof meta->created_at);
    meta->n_train = n_train;
    meta->input_dim = input_dim;
    meta->spec = gp_store_dup_text(spec);
    meta->info = gp_store_dup_text(info);
    if (meta->spec == NULL || meta->info == NULL) {
        gp_model_meta_free(meta);
        /* The model is saved; only the copy for the caller failed. */
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory copying the saved metadata");
    }
    return GP_OK;
}

/* 1 if a model called name exists, 0 if not, a negative GP code on failure. */
static int name_exists(gp_store_conn *c, const char *name, gp_error *err)
{
    sqlite3_stmt *st = gp_store_stmt(c, GPS_NAME_EXISTS);
    int src = sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    if (src == SQLITE_OK)
        src = sqlite3_step(st);
    int rc = src == SQLITE_ROW    ? 1
             : src == SQLITE_DONE ? 0
                                  : gp_store_sql_error(c, src, err, "looking up a model");
    gp_store_stmt_done(st);
    return rc;
}

static int not_found_name(const char *name, gp_error *err)
{
    return gp_error_set(err, GP_ENOTFOUND, "name", "model '%s' not found", name);
}

static int meta_lookup(gp_store *store, const char *name, int version, int with_texts,
                       gp_model_meta *meta, gp_error *err)
{
    memset(meta, 0, sizeof *meta);
    if (name == NULL || name[0] == '\0' || strlen(name) > GP_NAME_MAX)
        return not_found_name(name ? name : "", err);
    if (version < 0)
        return gp_error_set(err, GP_ENOTFOUND, "version", "model '%s' has no version %d", name,
                            version);
    gp_store_conn *r = store->r;
    pthread_mutex_lock(&r->mu);
    sqlite3_stmt *st =
        gp_store_stmt(r, with_texts ? (version == 0 ? GPS_META_LATEST : GPS_META_VERSION)
                                    : (version == 0 ? GPS_META_BRIEF_LATEST
                                                    : GPS_META_BRIEF_VERSION));
    int src = sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    if (src == SQLITE_OK && version > 0)
        src = sqlite3_bind_int(st, 2, version);
    if (src == SQLITE_OK)
        src = sqlite3_step(st);
    int rc;
    if (src == SQLITE_ROW) {
        rc = read_meta_row(st, meta, with_texts, err);
        gp_store_stmt_done(st);
    } else if (src == SQLITE_DONE) {
        gp_store_stmt_done(st);
        rc = version == 0 ? 0 : name_exists(r, name, err);
        if (rc == 0)
            rc = not_found_name(name, err);
        else if (rc == 1)
            rc = gp_error_set(err, GP_ENOTFOUND, "version", "model '%s' has no version %d", name,
                              version);
    } else {
        rc = gp_store_sql_error(r, src, err, "reading a model");
        gp_store_stmt_done(st);
    }
    pthread_mutex_unlock(&r->mu);
    return rc;
}

int gp_store_meta(gp_store *store, const char *name, int version, gp_model_meta *meta,
                  gp_error *err)
{
    return meta_lookup(store, name, version, 1, meta, err);
}

int gp_store_meta_brief(gp_store *store, const char *name, int version, gp_model_meta *meta,
                        gp_error *err)
{
    return meta_lookup(store, name, version, 0, meta, err);
}

int gp_store_versions(gp_store *store, const char *name, int **versions, size_t *count,
                      gp_error *err)
{
    *versions = NULL;
    *count = 0;
    if (name == NULL || name[0] == '\0' || strlen(name) > GP_NAME_MAX)
        return not_found_name(name ? name : "", err);
    int *v = NULL;
    size_t n = 0, cap = 0;
    int rc = GP_OK;
    gp_store_conn *r = store->r;
    pthread_mutex_lock(&r->mu);
    sqlite3_stmt *st = gp_store_stmt(r, GPS_VERSIONS);
    int src = sqlite3_bind_text(st, 1, name, -1, SQLITE_STATIC);
    if (src == SQLITE_OK) {
        while ((src = sqlite3_step(st)) == SQLITE_ROW) {
            if (n == cap) {
                size_t ncap = cap ? 2 * cap : 8;
                int *nv = realloc(v, ncap * sizeof *nv);
                if (nv == NULL) {
                    rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory listing versions");
                    break;
                }
                v = nv;
                cap = ncap;
            }
            sqlite3_int64 x = sqlite3_column_int64(st, 0);
            v[n++] = x < 0 || x > INT_MAX ? 0 : (int)x;
        }
    }
    if (rc == GP_OK && src != SQLITE_DONE)
        rc = gp_store_sql_error(r, src, err, "listing versions");
    gp_store_stmt_done(st);
    pthread_mutex_unlock(&r->mu);
    if (rc == GP_OK && n == 0)
        rc = not_found_name(name, err);
    if (rc) {
        free(v);
        return rc;
    }
    *versions = v;
    *count = n;
    return GP_OK;
}

int gp_store_list(gp_store *store, gp_model_meta **metas, size_t *count, gp_error *err)
{
    *metas = NULL;
    *count = 0;
    gp_model_meta *m = NULL;
    size_t n = 0, cap = 0;
    int rc = GP_OK;
    gp_store_conn *r = store->r;
    pthread_mutex_lock(&r->mu);
    sqlite3_stmt *st = gp_store_stmt(r, GPS_LIST);
    int src;
    while ((src = sqlite3_step(st)) == SQLITE_ROW) {
        if (n == cap) {
            size_t ncap = cap ? 2 * cap : 16;
            gp_model_meta *nm = realloc(m, ncap * sizeof *nm);
            if (nm == NULL) {
                rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory listing models");
                break;
            }
            m = nm;
            cap = ncap;
        }
        rc = read_meta_row(st, &m[n], 1, err);
        if (rc)
            break;
        n++;
    }
    if (rc == GP_OK && src != SQLITE_DONE)
        rc = gp_store_sql_error(r, src, err, "listing models");
    gp_store_stmt_done(st);
    pthread_mutex_unlock(&r->mu);
    if (rc) {
        gp_model_meta_free_array(m, n);
        return rc;
    }
    *metas = m;
    *count = n;
    return GP_OK;
}

int gp_store_load_state(gp_store *store, int64_t model_id, gp_state *state, gp_error *err)
{
    gp_state tmp;
    gp_state_init(&tmp);
    gp_store_conn *r = store->r;
    pthread_mutex_lock(&r->mu);
    /* One read transaction on the reader: the model row and its arrays from
     * one snapshot (a save commits a model's row and arrays together, so this
     * sees all of a model or none of it). Always ended before the mutex is
     * released, so the next read takes a fresh snapshot. */
    int rc = gp_store_exec(r, GPS_BEGIN, err, "starting a load");
    if (rc == GP_OK) {
        sqlite3_stmt *st = gp_store_stmt(r, GPS_MODEL_EXISTS);
        int src = sqlite3_bind_int64(st, 1, model_id);
        if (src == SQLITE_OK)
            src = sqlite3_step(st);
        if (src == SQLITE_DONE)
            rc = gp_error_set(err, GP_ENOTFOUND, "name", "model row %lld not found",
                              (long long)model_id);
        else if (src != SQLITE_ROW)
            rc = gp_store_sql_error(r, src, err, "loading a model");
        gp_store_stmt_done(st);
        gp_array_owner owner = {.table = GP_ARRAYS_MODEL, .model_id = model_id};
        if (rc == GP_OK)
            rc = gp_store_read_arrays(r, &owner, &tmp, err);
        if (rc == GP_OK)
            rc = gp_store_exec(r, GPS_COMMIT, err, "ending a load");
        gp_store_rollback(r);
    }
    pthread_mutex_unlock(&r->mu);
    if (rc) {
        gp_state_free(&tmp);
        return rc;
    }
    return gp_store_append_state(state, &tmp, err);
}

typedef struct delete_ctx {
    const char *name;
    int found;
} delete_ctx;

static int delete_once(gp_store *s, void *vctx, gp_error *err)
{
    delete_ctx *c = vctx;
    gp_store_conn *w = s->w;
    int rc = gp_store_exec(w, GPS_BEGIN_IMMEDIATE, err, "starting a delete");
    if (rc)
        return rc;
    sqlite3_stmt *st = gp_store_stmt(w, GPS_DELETE);
    int src = sqlite3_bind_text(st, 1, c->name, -1, SQLITE_STATIC);
    if (src == SQLITE_OK)
        src = sqlite3_step(st);
    gp_store_stmt_done(st);
    if (src != SQLITE_DONE) {
        rc = gp_store_sql_error(w, src, err, "deleting a model");
        gp_store_rollback(w);
        return rc;
    }
    c->found = sqlite3_changes(w->db) > 0;
    rc = gp_store_exec(w, GPS_COMMIT, err, "committing a delete");
    if (rc)
        gp_store_rollback(w);
    return rc;
}

int gp_store_delete(gp_store *store, const char *name, gp_error *err)
{
    if (name == NULL || name[0] == '\0' || strlen(name) > GP_NAME_MAX)
        return not_found_name(name ? name : "", err);
    delete_ctx c = {.name = name, .found = 0};
    int rc = gp_store_write(store, delete_once, &c, err);
    if (rc == GP_OK && !c.found)
        rc = not_found_name(name, err);
    return rc;
}
