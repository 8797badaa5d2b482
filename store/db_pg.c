/* gpserve store: the PostgreSQL driver (db.h), through libpq.
 *
 * A --db of postgresql://... or postgres://... (anything libpq's
 * PQconnectdb takes as a URL) opens three connections to that database, as
 * the SQLite driver opens three to a file. The same store transactions run
 * here; what SQLite's single write lock gave for free is explicit:
 *   - write transactions are READ COMMITTED; a save or delete first takes a
 *     transaction-scoped advisory lock on its model name
 *     (pg_advisory_xact_lock(hashtextextended(name, 0))), so that the
 *     MAX(version) + 1 it reads is still free when it inserts, and
 *     UNIQUE(name, version) stays as the backstop (a violation retries);
 *   - the reads that decide a write lock their row (FOR UPDATE): a job about
 *     to be cancelled, a log's head about to be appended to; a claim takes
 *     the oldest expired job with FOR UPDATE SKIP LOCKED, so concurrent
 *     claimers each get a different one;
 *   - read transactions (a model and its arrays, a log replay) are
 *     REPEATABLE READ, READ ONLY: one snapshot, as SQLite's read transaction.
 * Parameters and results travel in binary (PQexecPrepared with binary
 * formats: float64 arrays as bytea with exactly the bytes SQLite stores,
 * integers and doubles as their binary forms); texts go as texts. Every
 * connection sets lock_timeout to GP_STORE_BUSY_MS, and a statement_timeout
 * (PG_STATEMENT_TIMEOUT_MS) as a guard against a hung server. A connection
 * found broken is reset (PQreset) and its statements prepared again before
 * the next statement, so a restarted server needs no restart of gpserve; a
 * transaction cut by the loss fails (GP_ENOTREADY) and is not replayed.
 * Schema version in the table gpserve_schema, migrated in one transaction
 * under an advisory lock, so several replicas starting at once migrate once. */
#include "store/db_pg_conn.h"
#include "store/store_internal.h"

#include <errno.h>
#include <libpq-fe.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The advisory lock the migrations are applied under (any constant that the
 * name locks, hashes of model names, are unlikely to hit; a collision would
 * only make two transactions wait for each other). */
#define PG_MIGRATION_LOCK "7453010373645655345"

/* ---- schema -------------------------------------------------------------- */

/* The SQLite schema's versions (db_sqlite.c) in PostgreSQL types: BIGSERIAL
 * and BIGINT for the integers, DOUBLE PRECISION for lease_until, BYTEA for
 * the arrays' bytes (stored uncompressed: EXTERNAL, since float64 data do
 * not compress and pglz would only cost time). Migration to version v + 1 is
 * pg_migrations[v], run in the migration transaction. */
static const char *const pg_migrations[] = {
    /* version 1 */
    "CREATE TABLE models("
    " id BIGSERIAL PRIMARY KEY,"
    " name TEXT NOT NULL,"
    " version BIGINT NOT NULL,"
    " method TEXT NOT NULL,"
    " spec TEXT NOT NULL,"
    " info TEXT NOT NULL,"
    " n_train BIGINT,"
    " input_dim BIGINT,"
    " created_at TEXT,"
    " UNIQUE(name, version));"
    "CREATE TABLE arrays("
    " model_id BIGINT REFERENCES models(id) ON DELETE CASCADE,"
    " key TEXT,"
    " part BIGINT NOT NULL DEFAULT 0,"
    " rows BIGINT,"
    " cols BIGINT,"
    " data BYTEA,"
    " PRIMARY KEY(model_id, key, part));"
    "ALTER TABLE arrays ALTER COLUMN data SET STORAGE EXTERNAL;"
    "CREATE TABLE jobs("
    " id TEXT PRIMARY KEY,"
    " model_name TEXT,"
    " status TEXT,"
    " progress TEXT,"
    " error TEXT,"
    " result TEXT,"
    " created_at TEXT,"
    " updated_at TEXT);",
    /* version 2: durable jobs */
    "ALTER TABLE jobs ADD COLUMN request TEXT;"
    "ALTER TABLE jobs ADD COLUMN owner TEXT;"
    "ALTER TABLE jobs ADD COLUMN lease_until DOUBLE PRECISION;"
    "ALTER TABLE jobs ADD COLUMN attempts BIGINT NOT NULL DEFAULT 0;"
    "ALTER TABLE jobs ADD COLUMN cancel_requested BIGINT NOT NULL DEFAULT 0;"
    "CREATE TABLE job_arrays("
    " job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE CASCADE,"
    " key TEXT,"
    " part BIGINT NOT NULL DEFAULT 0,"
    " rows BIGINT,"
    " cols BIGINT,"
    " data BYTEA,"
    " PRIMARY KEY(job_id, key, part));"
    "ALTER TABLE job_arrays ALTER COLUMN data SET STORAGE EXTERNAL;"
    "CREATE INDEX jobs_active ON jobs(lease_until) WHERE status IN ('queued', 'running');"
    "CREATE INDEX jobs_ended ON jobs(updated_at)"
    " WHERE status IN ('succeeded', 'failed', 'cancelled');"
    "UPDATE jobs SET status = 'failed',"
    " error = '{\"code\":\"interrupted\",\"message\":\"the daemon holding this job "
    "stopped before gpserve kept jobs durably; submit the fit again\"}'"
    " WHERE status IN ('queued', 'running');",
    /* version 3: online models */
    "ALTER TABLE models ADD COLUMN obs_seq BIGINT NOT NULL DEFAULT 0;"
    "CREATE TABLE observations("
    " model_id BIGINT NOT NULL REFERENCES models(id) ON DELETE CASCADE,"
    " seq BIGINT NOT NULL,"
    " key TEXT NOT NULL,"
    " part BIGINT NOT NULL DEFAULT 0,"
    " rows BIGINT,"
    " cols BIGINT,"
    " data BYTEA,"
    " PRIMARY KEY(model_id, seq, key, part));"
    "ALTER TABLE observations ALTER COLUMN data SET STORAGE EXTERNAL;"
    "CREATE TABLE snapshots("
    " model_id BIGINT NOT NULL REFERENCES models(id) ON DELETE CASCADE,"
    " seq BIGINT NOT NULL,"
    " key TEXT NOT NULL,"
    " part BIGINT NOT NULL DEFAULT 0,"
    " rows BIGINT,"
    " cols BIGINT,"
    " data BYTEA,"
    " PRIMARY KEY(model_id, key, part));"
    "ALTER TABLE snapshots ALTER COLUMN data SET STORAGE EXTERNAL;",
    /* version 4: idempotency keys */
    "CREATE TABLE idempotency("
    " scope TEXT NOT NULL,"
    " key TEXT NOT NULL,"
    " fingerprint TEXT NOT NULL,"
    " status BIGINT NOT NULL,"
    " body TEXT NOT NULL,"
    " created_at TEXT NOT NULL,"
    " PRIMARY KEY(scope, key));"
    "CREATE INDEX idempotency_created ON idempotency(created_at);",
    /* version 5: aliases (db_sqlite.c, migrate_to_v5) */
    "CREATE TABLE aliases("
    " name TEXT NOT NULL,"
    " alias TEXT NOT NULL,"
    " version BIGINT NOT NULL,"
    " updated_at TEXT NOT NULL,"
    " updated_by TEXT,"
    " PRIMARY KEY(name, alias),"
    " FOREIGN KEY(name, version) REFERENCES models(name, version) ON DELETE RESTRICT);",
    /* version 6: the highest version given out, an alias's previous target
     * (db_sqlite.c, migrate_to_v6) */
    "CREATE TABLE version_marks("
    " name TEXT PRIMARY KEY,"
    " last_version BIGINT NOT NULL);"
    "ALTER TABLE aliases ADD COLUMN previous_version BIGINT;",
    /* version 7: the audit trail (db_sqlite.c, migrate_to_v7) */
    "CREATE TABLE audit("
    " id BIGSERIAL PRIMARY KEY,"
    " at TEXT NOT NULL,"
    " key_name TEXT,"
    " route TEXT NOT NULL,"
    " model TEXT,"
    " version BIGINT,"
    " status BIGINT NOT NULL,"
    " code TEXT,"
    " request_id TEXT,"
    " job_id TEXT);"
    "CREATE INDEX audit_at ON audit(at);",
    /* version 8: data sets (db_sqlite.c, migrate_to_v8) */
    "CREATE TABLE datasets("
    " id BIGSERIAL PRIMARY KEY,"
    " name TEXT NOT NULL,"
    " state TEXT NOT NULL,"
    " n_rows BIGINT NOT NULL DEFAULT 0,"
    " n_cols BIGINT NOT NULL,"
    " columns TEXT NOT NULL,"
    " sha256 TEXT,"
    " bytes BIGINT NOT NULL DEFAULT 0,"
    " bytes_received BIGINT NOT NULL DEFAULT 0,"
    " created_at TEXT NOT NULL,"
    " created_by TEXT,"
    " touched_at DOUBLE PRECISION NOT NULL);"
    "CREATE UNIQUE INDEX datasets_ready ON datasets(name) WHERE state = 'ready';"
    "CREATE INDEX datasets_uploading ON datasets(touched_at) WHERE state = 'uploading';"
    "CREATE TABLE dataset_parts("
    " dataset_id BIGINT NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,"
    " part BIGINT NOT NULL,"
    " first_row BIGINT NOT NULL,"
    " rows BIGINT NOT NULL,"
    " cols BIGINT NOT NULL,"
    " data BYTEA NOT NULL,"
    " PRIMARY KEY(dataset_id, part));"
    "ALTER TABLE dataset_parts ALTER COLUMN data SET STORAGE EXTERNAL;"
    "CREATE TABLE dataset_readers("
    " id TEXT PRIMARY KEY,"
    " dataset_id BIGINT NOT NULL REFERENCES datasets(id) ON DELETE CASCADE,"
    " label TEXT NOT NULL,"
    " lease_until DOUBLE PRECISION NOT NULL);"
    "CREATE INDEX dataset_readers_of ON dataset_readers(dataset_id);"
    "ALTER TABLE jobs ADD COLUMN dataset_id BIGINT;"
    "CREATE INDEX jobs_dataset ON jobs(dataset_id) WHERE dataset_id IS NOT NULL;",
    /* version 9: studies and trials (db_sqlite.c, migrate_to_v9) */
    "CREATE TABLE studies("
    " id BIGSERIAL PRIMARY KEY,"
    " name TEXT NOT NULL UNIQUE,"
    " config TEXT NOT NULL,"
    " revision BIGINT NOT NULL DEFAULT 0,"
    " n_trials BIGINT NOT NULL DEFAULT 0,"
    " n_completed BIGINT NOT NULL DEFAULT 0,"
    " refit_n BIGINT NOT NULL DEFAULT 0,"
    " created_at TEXT NOT NULL,"
    " created_by TEXT);"
    "CREATE TABLE trials("
    " study_id BIGINT NOT NULL REFERENCES studies(id) ON DELETE CASCADE,"
    " id BIGINT NOT NULL,"
    " state TEXT NOT NULL,"
    " parameters TEXT NOT NULL,"
    " metrics TEXT,"
    " reason TEXT,"
    " client_id TEXT,"
    " seq BIGINT NOT NULL DEFAULT 0,"
    " created DOUBLE PRECISION NOT NULL,"
    " updated DOUBLE PRECISION NOT NULL,"
    " expires_at DOUBLE PRECISION NOT NULL,"
    " PRIMARY KEY(study_id, id));"
    "CREATE UNIQUE INDEX trials_seq ON trials(study_id, seq) WHERE seq > 0;"
    "CREATE INDEX trials_active ON trials(expires_at) WHERE state = 'active';",
};
#define SCHEMA_VERSION ((int)(sizeof pg_migrations / sizeof pg_migrations[0]))
_Static_assert(SCHEMA_VERSION == GP_STORE_SCHEMA_VERSION, "one schema version for every back end");

/* ---- the driver (the connection plumbing is db_pg_conn.c's) ------------------ */

/* Type OIDs (PostgreSQL's pg_type.dat; fixed since 7.x). */
#define OID_BOOL 16
#define OID_BYTEA 17
#define OID_NAME 19
#define OID_INT8 20
#define OID_INT2 21
#define OID_INT4 23
#define OID_TEXT 25
#define OID_FLOAT4 700
#define OID_FLOAT8 701
#define OID_UNKNOWN 705
#define OID_VARCHAR 1043

static void pg_close(gp_db *gdb)
{
    if (gdb == NULL)
        return;
    pg_db *d = pg(gdb);
    for (int i = 0; i < GPS_STMT_COUNT; i++)
        PQclear(d->stmt[i].res);
    PQfinish(d->conn);
    free(d->password);
    free(d);
}

/* The password of a connection string (NULL: none), for gp_pg_scrub. */
static char *url_password(const char *url)
{
    PQconninfoOption *opts = PQconninfoParse(url, NULL);
    char *pw = NULL;
    for (PQconninfoOption *o = opts; o && o->keyword; o++)
        if (strcmp(o->keyword, "password") == 0 && o->val && o->val[0])
            pw = strdup(o->val);
    PQconninfoFree(opts);
    return pw;
}

static void notice_ignore(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

static int pg_open(const char *url, enum gp_db_role role, gp_db **out, gp_error *err)
{
    *out = NULL;
    char shown[512];
    gp_db_redact(url, shown, sizeof shown);
    pg_db *d = calloc(1, sizeof *d);
    if (d == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory opening the store");
    d->head.drv = &gp_db_pg_driver;
    d->role = role;
    for (int i = 0; i < GPS_STMT_COUNT; i++) {
        d->stmt[i].head.db = &d->head;
        d->stmt[i].id = i;
    }
    d->password = url_password(url);
    /* Defaults the URL may override (it is expanded where it stands, after
     * them): a bounded connect, and a name in pg_stat_activity. */
    const char *const keys[] = {"connect_timeout", "application_name", "dbname", NULL};
    const char *const vals[] = {"5", "gpserve", url, NULL};
    d->conn = PQconnectdbParams(keys, vals, 1);
    if (d->conn == NULL) {
        pg_close(&d->head);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory connecting to PostgreSQL");
    }
    PQsetNoticeProcessor(d->conn, notice_ignore, NULL);
    int code = GP_OK;
    if (PQstatus(d->conn) != CONNECTION_OK) {
        gp_pg_set_err(d, "%s", PQerrorMessage(d->conn));
        code =
            gp_error_set(err, GP_ENOTREADY, NULL, "cannot open database '%s': %s", shown, d->err);
    } else if (gp_pg_setup_session(d) != GP_DB_OK) {
        code = gp_error_set(err, GP_ENOTREADY, NULL,
                            "cannot open database '%s': configuring the connection: %s", shown,
                            d->err);
    }
    if (code) {
        pg_close(&d->head);
        return code;
    }
    *out = &d->head;
    return GP_OK;
}

/* The schema version recorded in gpserve_schema (0: none yet), read inside
 * the migration transaction. */
static int read_version(pg_db *d, long *version, int *has_row)
{
    PGresult *res = PQexec(d->conn, "SELECT version FROM gpserve_schema");
    int rc = PQresultStatus(res) == PGRES_TUPLES_OK ? GP_DB_OK : gp_pg_fail_result(d, res);
    if (rc == GP_DB_OK) {
        *has_row = PQntuples(res) > 0;
        *version = *has_row ? strtol(PQgetvalue(res, 0, 0), NULL, 10) : 0;
    }
    PQclear(res);
    return rc;
}

/* In one transaction under the migration lock (a second replica starting at
 * the same time waits, then finds the schema current): create the version
 * table if need be, apply the migrations from its version on, record the
 * new version. */
static int pg_migrate(gp_db *gdb, const char *shown, gp_error *err)
{
    pg_db *d = pg(gdb);
    long version = 0;
    int has_row = 0;
    const char *step = "starting the migration";
    int rc = gp_pg_exec_simple(d, "BEGIN ISOLATION LEVEL READ COMMITTED");
    if (rc == GP_DB_OK && (step = "waiting for the migration lock") &&
        (rc = gp_pg_exec_simple(d, "SELECT pg_advisory_xact_lock(" PG_MIGRATION_LOCK ")")) ==
            GP_DB_OK &&
        (step = "creating gpserve_schema") &&
        (rc = gp_pg_exec_simple(d, "CREATE TABLE IF NOT EXISTS gpserve_schema("
                                   "version INTEGER NOT NULL)")) == GP_DB_OK &&
        (step = "reading the schema version"))
        rc = read_version(d, &version, &has_row);
    if (rc) {
        gp_pg_exec_simple(d, "ROLLBACK");
        return gp_error_set(err, GP_ENOTREADY, NULL, "cannot open database '%s': %s: %s", shown,
                            step, d->err);
    }
    if (version < 0 || version > SCHEMA_VERSION) {
        gp_pg_exec_simple(d, "ROLLBACK");
        return gp_error_set(err, GP_ENOTREADY, NULL,
                            "cannot open database '%s': its schema version %ld is not one this "
                            "gpserve knows (0..%d)",
                            shown, version, SCHEMA_VERSION);
    }
    for (long v = version; v < SCHEMA_VERSION; v++) {
        if ((rc = gp_pg_exec_simple(d, pg_migrations[v])) != GP_DB_OK) {
            gp_pg_exec_simple(d, "ROLLBACK");
            return gp_error_set(err, GP_ENOTREADY, NULL,
                                "cannot open database '%s': migration to schema version %ld "
                                "failed: %s",
                                shown, v + 1, d->err);
        }
    }
    char sql[96];
    snprintf(sql, sizeof sql,
             has_row ? "UPDATE gpserve_schema SET version = %d"
                     : "INSERT INTO gpserve_schema(version) VALUES(%d)",
             SCHEMA_VERSION);
    if ((rc = gp_pg_exec_simple(d, sql)) != GP_DB_OK ||
        (rc = gp_pg_exec_simple(d, "COMMIT")) != GP_DB_OK) {
        gp_pg_exec_simple(d, "ROLLBACK");
        return gp_error_set(err, GP_ENOTREADY, NULL,
                            "cannot open database '%s': committing the migration: %s", shown,
                            d->err);
    }
    return GP_OK;
}

static int pg_prepare(gp_db *gdb, const char *shown, gp_error *err)
{
    pg_db *d = pg(gdb);
    if (gp_pg_prepare_all(d) != GP_DB_OK)
        return gp_error_set(err, GP_ENOTREADY, NULL,
                            "cannot open database '%s': preparing statements: %s", shown, d->err);
    d->ready = 1;
    return GP_OK;
}

static int pg_private(gp_db *db)
{
    (void)db;
    return 0;
}

static void pg_reset(gp_db_stmt *gst)
{
    pg_stmt *st = pst(gst);
    PQclear(st->res);
    st->res = NULL;
    st->ran = 0;
    st->row = 0;
    st->nrows = 0;
    memset(st->bound, 0, sizeof st->bound);
}

static gp_db_stmt *pg_stmt_get(gp_db *db, int id)
{
    gp_db_stmt *st = &pg(db)->stmt[id].head;
    pg_reset(st);
    return st;
}

static pg_value *slot(gp_db_stmt *gst, int i)
{
    return i >= 1 && i <= PG_MAX_PARAMS ? &pst(gst)->bound[i - 1] : NULL;
}

static int pg_bind_int64(gp_db_stmt *st, int i, int64_t v)
{
    pg_value *s = slot(st, i);
    if (s == NULL)
        return GP_DB_EOTHER;
    *s = (pg_value){.kind = 'i', .i = v};
    return GP_DB_OK;
}

static int pg_bind_double(gp_db_stmt *st, int i, double v)
{
    pg_value *s = slot(st, i);
    if (s == NULL)
        return GP_DB_EOTHER;
    *s = (pg_value){.kind = 'd', .d = v};
    return GP_DB_OK;
}

static int pg_bind_text(gp_db_stmt *st, int i, const char *text)
{
    pg_value *s = slot(st, i);
    if (s == NULL)
        return GP_DB_EOTHER;
    *s = text ? (pg_value){.kind = 't', .p = text} : (pg_value){.kind = 0};
    return GP_DB_OK;
}

static int pg_bind_blob(gp_db_stmt *st, int i, const void *data, size_t n)
{
    pg_value *s = slot(st, i);
    if (s == NULL || n > (size_t)INT_MAX)
        return GP_DB_EOTHER;
    *s = (pg_value){.kind = 'b', .p = n ? data : "", .n = n};
    return GP_DB_OK;
}

static void put_be(char *dst, uint64_t v, int bytes)
{
    for (int b = 0; b < bytes; b++)
        dst[b] = (char)(unsigned char)(v >> (8 * (bytes - 1 - b)));
}

static uint64_t get_be(const char *src, int bytes)
{
    uint64_t v = 0;
    for (int b = 0; b < bytes; b++)
        v = (v << 8) | (unsigned char)src[b];
    return v;
}

/* Parameter k of st as the server wants it: binary for the numbers and
 * bytea of the statement's declared types, text for texts (and a number
 * bound where the server inferred something else: its decimal text). */
static int encode_param(pg_db *d, pg_stmt *st, int k, const char **value, int *length,
                        int *format)
{
    const pg_value *v = &st->bound[k];
    char *buf = st->scratch[k];
    const Oid type = st->types[k];
    *value = NULL;
    *length = 0;
    *format = 0;
    switch (v->kind) {
    case 0:
        return GP_DB_OK;
    case 't':
        *value = v->p;
        return GP_DB_OK;
    case 'b':
        if (type != OID_BYTEA)
            break;
        *value = v->p;
        *length = (int)v->n;
        *format = 1;
        return GP_DB_OK;
    case 'i':
        *value = buf;
        *format = 1;
        if (type == OID_INT8) {
            put_be(buf, (uint64_t)v->i, 8);
            *length = 8;
        } else if (type == OID_INT4 && v->i >= INT32_MIN && v->i <= INT32_MAX) {
            put_be(buf, (uint64_t)(uint32_t)(int32_t)v->i, 4);
            *length = 4;
        } else if (type == OID_INT2 && v->i >= INT16_MIN && v->i <= INT16_MAX) {
            put_be(buf, (uint64_t)(uint16_t)(int16_t)v->i, 2);
            *length = 2;
        } else if (type == OID_FLOAT8) {
            double x = (double)v->i;
            uint64_t u;
            memcpy(&u, &x, sizeof u);
            put_be(buf, u, 8);
            *length = 8;
        } else if (type == OID_INT4 || type == OID_INT2) {
            break;
        } else {
            snprintf(buf, sizeof st->scratch[k], "%lld", (long long)v->i);
            *format = 0;
        }
        return GP_DB_OK;
    case 'd':
        *value = buf;
        if (type == OID_FLOAT8) {
            uint64_t u;
            memcpy(&u, &v->d, sizeof u);
            put_be(buf, u, 8);
            *length = 8;
            *format = 1;
            return GP_DB_OK;
        }
        if (type == OID_INT8 || type == OID_INT4 || type == OID_INT2)
            break;
        snprintf(buf, sizeof st->scratch[k], "%.17g", v->d);
        return GP_DB_OK;
    default:
        break;
    }
    gp_pg_set_err(d, "statement %d: parameter %d of type %u cannot take the value bound (%c)",
                  st->id, k + 1, (unsigned)type, v->kind ? v->kind : '0');
    return GP_DB_EOTHER;
}

/* Run st once: GP_DB_ROW / GP_DB_DONE, or a failure class. */
static int exec_once(pg_db *d, pg_stmt *st)
{
    int rc = gp_pg_ensure_session(d);
    if (rc)
        return rc;
    const char *values[PG_MAX_PARAMS];
    int lengths[PG_MAX_PARAMS], formats[PG_MAX_PARAMS];
    for (int k = 0; k < st->nparams; k++)
        if ((rc = encode_param(d, st, k, &values[k], &lengths[k], &formats[k])) != GP_DB_OK)
            return rc;
    char name[16];
    snprintf(name, sizeof name, "gps%d", st->id);
    PGresult *res = PQexecPrepared(d->conn, name, st->nparams, values, lengths, formats, 1);
    const ExecStatusType status = PQresultStatus(res);
    if (status == PGRES_TUPLES_OK || status == PGRES_COMMAND_OK) {
        const char *n = PQcmdTuples(res);
        d->changes = n && n[0] ? strtoll(n, NULL, 10) : 0;
        if (status == PGRES_TUPLES_OK && PQntuples(res) > 0) {
            st->res = res;
            st->nrows = PQntuples(res);
            st->row = 0;
            return GP_DB_ROW;
        }
        PQclear(res);
        return GP_DB_DONE;
    }
    rc = gp_pg_fail_result(d, res);
    PQclear(res);
    return rc;
}

static int pg_step(gp_db_stmt *gst)
{
    pg_stmt *st = pst(gst);
    pg_db *d = pg(gst->db);
    if (gp_pg_sql_text(st->id) == NULL)
        return GP_DB_DONE;
    if (st->ran) {
        if (st->res && st->row + 1 < st->nrows) {
            st->row++;
            return GP_DB_ROW;
        }
        st->row = st->nrows;
        return GP_DB_DONE;
    }
    st->ran = 1;
    const PGTransactionStatusType before = PQtransactionStatus(d->conn);
    /* COMMIT of a failed transaction "succeeds" as a ROLLBACK: say it. */
    if (st->id == GPS_COMMIT && before == PQTRANS_INERROR) {
        gp_pg_set_err(d, "the transaction failed before its commit");
        return GP_DB_EOTHER;
    }
    int rc = exec_once(d, st);
    /* Lost outside a transaction: nothing of ours was under way, so the
     * statement can run again on a new connection if it cannot have written
     * anything (the start of a transaction, a reader's statement). */
    if (rc == GP_DB_EDOWN && before == PQTRANS_IDLE &&
        (st->id == GPS_BEGIN || st->id == GPS_BEGIN_IMMEDIATE || d->role == GP_DB_READER))
        rc = exec_once(d, st);
    return rc;
}

static int have_row(pg_stmt *st) { return st->res && st->row < st->nrows; }

static enum gp_db_type pg_col_type(gp_db_stmt *gst, int col)
{
    pg_stmt *st = pst(gst);
    if (!have_row(st) || PQgetisnull(st->res, st->row, col))
        return GP_DB_NULL;
    switch (PQftype(st->res, col)) {
    case OID_BOOL:
    case OID_INT2:
    case OID_INT4:
    case OID_INT8:
        return GP_DB_INTEGER;
    case OID_FLOAT4:
    case OID_FLOAT8:
        return GP_DB_FLOAT;
    case OID_BYTEA:
        return GP_DB_BLOB;
    default:
        return GP_DB_TEXT;
    }
}

static const char *value_of(pg_stmt *st, int col, int *len)
{
    if (!have_row(st) || PQgetisnull(st->res, st->row, col))
        return NULL;
    *len = PQgetlength(st->res, st->row, col);
    return PQgetvalue(st->res, st->row, col);
}

static double pg_col_double(gp_db_stmt *gst, int col);

static int64_t pg_col_int64(gp_db_stmt *gst, int col)
{
    pg_stmt *st = pst(gst);
    int len = 0;
    const char *v = value_of(st, col, &len);
    if (v == NULL)
        return 0;
    switch (PQftype(st->res, col)) {
    case OID_INT8:
        return len == 8 ? (int64_t)get_be(v, 8) : 0;
    case OID_INT4:
        return len == 4 ? (int64_t)(int32_t)(uint32_t)get_be(v, 4) : 0;
    case OID_INT2:
        return len == 2 ? (int64_t)(int16_t)(uint16_t)get_be(v, 2) : 0;
    case OID_BOOL:
        return len == 1 ? v[0] != 0 : 0;
    case OID_FLOAT4:
    case OID_FLOAT8:
        return (int64_t)pg_col_double(gst, col);
    case OID_TEXT:
    case OID_VARCHAR:
    case OID_NAME:
    case OID_UNKNOWN:
        return strtoll(v, NULL, 10);
    default:
        return 0;
    }
}

static double pg_col_double(gp_db_stmt *gst, int col)
{
    pg_stmt *st = pst(gst);
    int len = 0;
    const char *v = value_of(st, col, &len);
    if (v == NULL)
        return 0.0;
    switch (PQftype(st->res, col)) {
    case OID_FLOAT8: {
        if (len != 8)
            return 0.0;
        uint64_t u = get_be(v, 8);
        double x;
        memcpy(&x, &u, sizeof x);
        return x;
    }
    case OID_FLOAT4: {
        if (len != 4)
            return 0.0;
        uint32_t u = (uint32_t)get_be(v, 4);
        float x;
        memcpy(&x, &u, sizeof x);
        return x;
    }
    case OID_TEXT:
    case OID_VARCHAR:
    case OID_UNKNOWN:
        return strtod(v, NULL);
    default:
        return (double)pg_col_int64(gst, col);
    }
}

static const char *pg_col_text(gp_db_stmt *gst, int col)
{
    pg_stmt *st = pst(gst);
    int len = 0;
    const char *v = value_of(st, col, &len);
    if (v == NULL)
        return NULL;
    switch (PQftype(st->res, col)) {
    case OID_BOOL:
    case OID_INT2:
    case OID_INT4:
    case OID_INT8:
        snprintf(st->text, sizeof st->text, "%lld", (long long)pg_col_int64(gst, col));
        return st->text;
    case OID_FLOAT4:
    case OID_FLOAT8:
        snprintf(st->text, sizeof st->text, "%.17g", pg_col_double(gst, col));
        return st->text;
    default:
        return v; /* libpq ends every value with a NUL */
    }
}

static const void *pg_col_blob(gp_db_stmt *gst, int col)
{
    int len = 0;
    return value_of(pst(gst), col, &len);
}

static size_t pg_col_bytes(gp_db_stmt *gst, int col)
{
    int len = 0;
    return value_of(pst(gst), col, &len) && len > 0 ? (size_t)len : 0;
}

static int64_t pg_changes(gp_db *db) { return pg(db)->changes; }

static int pg_in_txn(gp_db *db)
{
    PGTransactionStatusType t = PQtransactionStatus(pg(db)->conn);
    return t == PQTRANS_INTRANS || t == PQTRANS_INERROR || t == PQTRANS_ACTIVE;
}

static const char *pg_errmsg(gp_db *db) { return pg(db)->err; }

/* A bytea value, and the whole Bind message that carries it, stays below
 * PostgreSQL's 1 GB allocation limit; leave room for the other parameters. */
static size_t pg_max_blob(gp_db *db)
{
    (void)db;
    return ((size_t)1 << 30) - 65536;
}

/* The change watch: LISTEN once per session (a session made again after a
 * loss has forgotten it, and may have missed notifications: *changed 1),
 * then wait on the socket for the NOTIFY of other connections' commits. */
static int pg_watch(gp_db *gdb, int timeout_ms, int *changed)
{
    pg_db *d = pg(gdb);
    *changed = 0;
    if (PQstatus(d->conn) != CONNECTION_OK)
        d->listening = 0;
    if (!d->listening) {
        int rc = gp_pg_ensure_session(d);
        if (rc == GP_DB_OK)
            rc = gp_pg_exec_simple(d, "LISTEN " GP_DB_CHANNEL);
        if (rc)
            return rc;
        d->listening = 1;
        *changed = 1;
        return GP_DB_OK;
    }
    struct pollfd p = {.fd = PQsocket(d->conn), .events = POLLIN};
    int n = poll(&p, 1, timeout_ms);
    if (n < 0 && errno != EINTR) {
        gp_pg_set_err(d, "waiting for notifications: %s", strerror(errno));
        return GP_DB_EOTHER;
    }
    if (n > 0 && !PQconsumeInput(d->conn)) {
        d->listening = 0;
        gp_pg_set_err(d, "the notification connection was lost: %s", PQerrorMessage(d->conn));
        return GP_DB_EDOWN;
    }
    PGnotify *note;
    while ((note = PQnotifies(d->conn)) != NULL) {
        *changed = 1;
        PQfreemem(note);
    }
    if (PQstatus(d->conn) != CONNECTION_OK) {
        d->listening = 0;
        return GP_DB_EDOWN;
    }
    return GP_DB_OK;
}

const gp_db_driver gp_db_pg_driver = {
    .name = "PostgreSQL",
    .open = pg_open,
    .migrate = pg_migrate,
    .prepare = pg_prepare,
    .private_db = pg_private,
    .close = pg_close,
    .stmt = pg_stmt_get,
    .reset = pg_reset,
    .bind_int64 = pg_bind_int64,
    .bind_double = pg_bind_double,
    .bind_text = pg_bind_text,
    .bind_blob = pg_bind_blob,
    .step = pg_step,
    .col_type = pg_col_type,
    .col_int64 = pg_col_int64,
    .col_double = pg_col_double,
    .col_text = pg_col_text,
    .col_blob = pg_col_blob,
    .col_bytes = pg_col_bytes,
    .changes = pg_changes,
    .in_txn = pg_in_txn,
    .errmsg = pg_errmsg,
    .max_blob = pg_max_blob,
    .watch = pg_watch,
};
