/* gpserve store: the SQLite driver (db.h). A file path opens a SQLite
 * database in WAL mode with foreign keys, a busy timeout of GP_STORE_BUSY_MS
 * and synchronous = NORMAL; ":memory:" opens a private in-memory database.
 * Commits are not fsynced (synchronous = NORMAL): the store's group commit
 * syncs the WAL once for the commits that arrived meanwhile (sq_sync,
 * store_sync.c). A new file gets incremental auto-vacuum, and the writer
 * keeps a reserve file beside it, so that a delete can commit on a full disk
 * and give its space back (db_sqlite_disk.c).
 * Schema version in PRAGMA user_version, migrated forward in one BEGIN
 * IMMEDIATE transaction (two processes opening a new file migrate it once).
 * Write transactions are BEGIN IMMEDIATE: SQLite's one write lock serialises
 * every writer of the file, so the store's transactions need no row locks
 * here (GPS_LOCK_NAME is empty, the *_LOCK reads are plain reads). */
#include "store/store_internal.h"

#include <errno.h>
#include <sqlite3.h>
#include <stdio.h>
#include <time.h>

#include "store/db_sqlite_disk.h"
#include <stdlib.h>
#include <string.h>

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

/* Idempotency keys (docs/design/storage.md, "Idempotency keys"): the answer
 * of a write sent with an Idempotency-Key, written in the same transaction as
 * the write (a fit's version, an async fit's job row, an observe's log
 * entry), one row per (scope, key); created_at (ISO 8601 UTC) is what the
 * job keeper prunes by. */
static int migrate_to_v4(sqlite3 *db, char **errmsg)
{
    static const char sql[] =
        "CREATE TABLE idempotency("
        " scope TEXT NOT NULL,"
        " key TEXT NOT NULL,"
        " fingerprint TEXT NOT NULL,"
        " status INTEGER NOT NULL,"
        " body TEXT NOT NULL,"
        " created_at TEXT NOT NULL,"
        " PRIMARY KEY(scope, key));"
        "CREATE INDEX idempotency_created ON idempotency(created_at);";
    return sqlite3_exec(db, sql, NULL, NULL, errmsg);
}

/* Aliases (docs/design/storage.md, "Aliases"): a movable label of a model
 * pointing at one of its versions. The foreign key holds the label to an
 * existing version; a delete of a version a label points to fails (RESTRICT),
 * so a version cannot lose a label behind the API's back; deleting a model
 * deletes its labels first, in the same transaction. */
static int migrate_to_v5(sqlite3 *db, char **errmsg)
{
    static const char sql[] =
        "CREATE TABLE aliases("
        " name TEXT NOT NULL,"
        " alias TEXT NOT NULL,"
        " version INTEGER NOT NULL,"
        " updated_at TEXT NOT NULL,"
        " updated_by TEXT,"
        " PRIMARY KEY(name, alias),"
        " FOREIGN KEY(name, version) REFERENCES models(name, version) ON DELETE RESTRICT);";
    return sqlite3_exec(db, sql, NULL, NULL, errmsg);
}

/* Deleted versions (docs/design/storage.md, "Deleting a version"): the
 * highest version number a model has given out, kept when that version is
 * deleted, so a later save takes the next number and never reuses one (a
 * client holding "version 3" must never get another model under it). A
 * model's delete removes its row: a new model of the name starts at 1, as
 * before. And an alias's previous target (what a roll back points it at
 * again): set by a move, NULL when there is none or it was deleted. */
static int migrate_to_v6(sqlite3 *db, char **errmsg)
{
    static const char sql[] = "CREATE TABLE version_marks("
                              " name TEXT PRIMARY KEY,"
                              " last_version INTEGER NOT NULL);"
                              "ALTER TABLE aliases ADD COLUMN previous_version INTEGER;";
    return sqlite3_exec(db, sql, NULL, NULL, errmsg);
}

/* The audit trail (docs/design/storage.md, "The audit trail"): one row per
 * write, inserted in the write's transaction, so every page it dirties is a
 * WAL frame of every write: the rowid alone (no AUTOINCREMENT, whose
 * sqlite_sequence update is one more page; the prune keeps the newest row
 * instead, so an id is never given out twice) and one index, on `at`, which
 * the prune and ?since= need (?model= walks the ids newest first). Measured
 * in docs/design/storage.md. */
static int migrate_to_v7(sqlite3 *db, char **errmsg)
{
    static const char sql[] = "CREATE TABLE audit("
                              " id INTEGER PRIMARY KEY,"
                              " at TEXT NOT NULL,"
                              " key_name TEXT,"
                              " route TEXT NOT NULL,"
                              " model TEXT,"
                              " version INTEGER,"
                              " status INTEGER NOT NULL,"
                              " code TEXT,"
                              " request_id TEXT,"
                              " job_id TEXT);"
                              "CREATE INDEX audit_at ON audit(at);";
    return sqlite3_exec(db, sql, NULL, NULL, errmsg);
}

/* Data sets (docs/design/storage.md, "Data sets"): a named table of float64
 * columns uploaded in parts. A row is `uploading` (its own id, seen by no
 * read but its upload's) until the upload's last transaction makes it
 * `ready`, replacing a ready one of the same name (the partial UNIQUE index
 * allows one ready row a name and any number of uploads). `columns` is the
 * api's JSON text (names and summary statistics; the store gives it no
 * meaning); `touched_at` (Unix seconds) is an upload's last sign of life, by
 * which an abandoned one is found. dataset_parts holds rows first_row ..
 * first_row + rows - 1, float64 column-major rows x cols (at most
 * GP_STORE_DATASET_PART_ROWS rows). dataset_readers are the leases of the
 * fits reading a data set (lease_until, Unix seconds), and jobs.dataset_id
 * the data set a queued or running async job names: a delete or a replace of
 * a data set in use is refused while either holds. The id is never given
 * out again (AUTOINCREMENT): a model version records the id it was fitted
 * on, and an id must not come to name another data set. */
static int migrate_to_v8(sqlite3 *db, char **errmsg)
{
    static const char sql[] = "CREATE TABLE datasets("
                              " id INTEGER PRIMARY KEY AUTOINCREMENT,"
                              " name TEXT NOT NULL,"
                              " state TEXT NOT NULL,"
                              " n_rows INTEGER NOT NULL DEFAULT 0,"
                              " n_cols INTEGER NOT NULL,"
                              " columns TEXT NOT NULL,"
                              " sha256 TEXT,"
                              " bytes INTEGER NOT NULL DEFAULT 0,"
                              " bytes_received INTEGER NOT NULL DEFAULT 0,"
                              " created_at TEXT NOT NULL,"
                              " created_by TEXT,"
                              " touched_at REAL NOT NULL);"
                              "CREATE UNIQUE INDEX datasets_ready ON datasets(name)"
                              " WHERE state = 'ready';"
                              "CREATE INDEX datasets_uploading ON datasets(touched_at)"
                              " WHERE state = 'uploading';"
                              "CREATE TABLE dataset_parts("
                              " dataset_id INTEGER NOT NULL REFERENCES datasets(id)"
                              " ON DELETE CASCADE,"
                              " part INTEGER NOT NULL,"
                              " first_row INTEGER NOT NULL,"
                              " rows INTEGER NOT NULL,"
                              " cols INTEGER NOT NULL,"
                              " data BLOB NOT NULL,"
                              " PRIMARY KEY(dataset_id, part));"
                              "CREATE TABLE dataset_readers("
                              " id TEXT PRIMARY KEY,"
                              " dataset_id INTEGER NOT NULL REFERENCES datasets(id)"
                              " ON DELETE CASCADE,"
                              " label TEXT NOT NULL,"
                              " lease_until REAL NOT NULL);"
                              "CREATE INDEX dataset_readers_of ON dataset_readers(dataset_id);"
                              "ALTER TABLE jobs ADD COLUMN dataset_id INTEGER;"
                              "CREATE INDEX jobs_dataset ON jobs(dataset_id)"
                              " WHERE dataset_id IS NOT NULL;";
    return sqlite3_exec(db, sql, NULL, NULL, errmsg);
}

/* Studies and trials (docs/design/storage.md, "Studies and trials"): a
 * study's `config` is the api's JSON text; its counters are what the
 * optimistic insert and the completion order rest on (revision: bumped by
 * every write to its trials; n_trials: the ids given out; n_completed: the
 * last seq; refit_n: the largest refit claimed). A trial is keyed by its
 * study and its id 1, 2, ... (the primary key leads with study_id, which
 * the cascade of a study's delete and every read use); `seq` numbers the
 * completions 1, 2, ... (0 while active or expired: the partial UNIQUE index
 * makes a seq given twice an error, not a fork of the history); the partial
 * index on expires_at finds the active trials past their time. The study id
 * is never given out again (AUTOINCREMENT), so a daemon's in-memory models
 * of a study deleted and made anew under its name are seen to be stale. */
static int migrate_to_v9(sqlite3 *db, char **errmsg)
{
    static const char sql[] = "CREATE TABLE studies("
                              " id INTEGER PRIMARY KEY AUTOINCREMENT,"
                              " name TEXT NOT NULL UNIQUE,"
                              " config TEXT NOT NULL,"
                              " revision INTEGER NOT NULL DEFAULT 0,"
                              " n_trials INTEGER NOT NULL DEFAULT 0,"
                              " n_completed INTEGER NOT NULL DEFAULT 0,"
                              " refit_n INTEGER NOT NULL DEFAULT 0,"
                              " created_at TEXT NOT NULL,"
                              " created_by TEXT);"
                              "CREATE TABLE trials("
                              " study_id INTEGER NOT NULL REFERENCES studies(id)"
                              " ON DELETE CASCADE,"
                              " id INTEGER NOT NULL,"
                              " state TEXT NOT NULL,"
                              " parameters TEXT NOT NULL,"
                              " metrics TEXT,"
                              " reason TEXT,"
                              " client_id TEXT,"
                              " seq INTEGER NOT NULL DEFAULT 0,"
                              " created REAL NOT NULL,"
                              " updated REAL NOT NULL,"
                              " expires_at REAL NOT NULL,"
                              " PRIMARY KEY(study_id, id));"
                              "CREATE UNIQUE INDEX trials_seq ON trials(study_id, seq)"
                              " WHERE seq > 0;"
                              "CREATE INDEX trials_active ON trials(expires_at)"
                              " WHERE state = 'active';";
    return sqlite3_exec(db, sql, NULL, NULL, errmsg);
}

static const migration_fn migrations[] = {migrate_to_v1, migrate_to_v2, migrate_to_v3,
                                          migrate_to_v4, migrate_to_v5, migrate_to_v6,
                                          migrate_to_v7, migrate_to_v8, migrate_to_v9};

/* Where SQLite's text differs from the shared one (store_sql.c). */
static const char *const sqlite_sql[GPS_STMT_COUNT] = {
    /* A write transaction takes the file's one write lock up front, so the
     * store's write transactions need no row locks (GPS_LOCK_NAME has no
     * text here, the *_LOCK reads are the plain ones). */
    [GPS_BEGIN_IMMEDIATE] = "BEGIN IMMEDIATE",
};
#define SCHEMA_VERSION ((int)(sizeof migrations / sizeof migrations[0]))
_Static_assert(SCHEMA_VERSION == GP_STORE_SCHEMA_VERSION, "one schema version for every back end");

/* ---- connection and statements --------------------------------------------- */

typedef struct sq_stmt {
    gp_db_stmt head;
    sqlite3_stmt *st; /* NULL: the statement does nothing in SQLite */
} sq_stmt;

typedef struct sq_db {
    gp_db head;
    sqlite3 *db;
    int memory; /* ":memory:" (journal mode "memory"): private to this connection */
    sq_stmt stmt[GPS_STMT_COUNT];
    /* Set at open, read by sq_sync from any thread: */
    sqlite3_vfs *vfs;  /* the connection's */
    const char *wal;   /* its WAL file's name (SQLite's, valid while db is open) */
    /* The writer's reserve file (NULL for a reader or in memory), under the
     * writer's mutex: */
    char *reserve;       /* "<db>-reserve" */
    int reserve_held;    /* made (or found) by this connection and not released */
    time_t reserve_next; /* the earliest time keep_reserve tries again */
    /* The change watch (sq_watch), on a connection of its own: */
    sqlite3_stmt *data_version_st; /* PRAGMA data_version, prepared at the first call */
    int64_t data_version;          /* its value at the last call */
    int watch_primed;              /* data_version was read once */
} sq_db;

static sq_db *sq(gp_db *db) { return (sq_db *)db; }
static sqlite3_stmt *raw(gp_db_stmt *st) { return ((sq_stmt *)st)->st; }
static sqlite3 *handle(gp_db_stmt *st) { return sq(st->db)->db; }

/* A SQLite result code as a gp_db result. */
static int classify(sqlite3 *db, int rc)
{
    switch (rc & 0xff) {
    case SQLITE_OK:
        return GP_DB_OK;
    case SQLITE_ROW:
        return GP_DB_ROW;
    case SQLITE_DONE:
        return GP_DB_DONE;
    case SQLITE_BUSY:
    case SQLITE_LOCKED:
        return GP_DB_EBUSY;
    case SQLITE_NOMEM:
        return GP_DB_ENOMEM;
    case SQLITE_FULL:
        return GP_DB_EFULL;
    case SQLITE_IOERR:
        /* A write the file system refused for want of space (WAL, journal). */
        return sqlite3_system_errno(db) == ENOSPC ? GP_DB_EFULL : GP_DB_EOTHER;
    case SQLITE_CONSTRAINT:
        return rc == SQLITE_CONSTRAINT_UNIQUE || rc == SQLITE_CONSTRAINT_PRIMARYKEY
                   ? GP_DB_EUNIQUE
                   : GP_DB_EOTHER;
    default:
        return GP_DB_EOTHER;
    }
}

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

static void sq_close(gp_db *gdb)
{
    if (gdb == NULL)
        return;
    sq_db *d = sq(gdb);
    for (int i = 0; i < GPS_STMT_COUNT; i++)
        sqlite3_finalize(d->stmt[i].st);
    sqlite3_finalize(d->data_version_st);
    sqlite3_close(d->db);
    free(d->reserve);
    free(d);
}

/* The file's WAL for sq_sync, and the writer's reserve file (made now when
 * there is room: gp_sqlite_reserve_make). */
static int setup_disk(sq_db *d, const char *path, int writer, gp_error *err)
{
    const char *main_file = sqlite3_db_filename(d->db, "main");
    if (sqlite3_file_control(d->db, "main", SQLITE_FCNTL_VFS_POINTER, &d->vfs) != SQLITE_OK ||
        d->vfs == NULL || main_file == NULL || main_file[0] == '\0')
        return open_fail(d->db, path, "finding the database's file", err);
    d->wal = sqlite3_filename_wal(main_file);
    if (!writer)
        return GP_OK;
    size_t n = strlen(main_file);
    d->reserve = malloc(n + sizeof "-reserve");
    if (d->reserve == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory opening the store");
    memcpy(d->reserve, main_file, n);
    memcpy(d->reserve + n, "-reserve", sizeof "-reserve");
    d->reserve_held = gp_sqlite_reserve_make(d->reserve);
    return GP_OK;
}

/* Open a connection to path with the settings every connection shares
 * (extended result codes, busy timeout, synchronous, foreign keys, WAL size
 * limit). The writer (which may create the file) switches the file to WAL;
 * a reader only checks that it is in WAL, and is query_only. */
static int sq_open(const char *path, enum gp_db_role role, gp_db **out, gp_error *err)
{
    *out = NULL;
    sq_db *d = calloc(1, sizeof *d);
    if (d == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory opening the store");
    d->head.drv = &gp_db_sqlite_driver;
    for (int i = 0; i < GPS_STMT_COUNT; i++)
        d->stmt[i].head.db = &d->head;
    const int create = role == GP_DB_WRITER;
    int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_FULLMUTEX | (create ? SQLITE_OPEN_CREATE : 0);
    int code = GP_OK;
    char mode[32];
    if (sqlite3_open_v2(path, &d->db, flags, NULL) != SQLITE_OK) {
        code = open_fail(d->db, path, "open", err);
        goto fail;
    }
    sqlite3_extended_result_codes(d->db, 1);
    sqlite3_busy_timeout(d->db, GP_STORE_BUSY_MS);
    /* Incremental auto-vacuum lets a delete give its pages back to the file
     * system (gp_sqlite_reclaim). It takes only on a new, empty file, and only
     * before journal_mode below writes the first page; on an existing file
     * it changes nothing (that would take a VACUUM). A failure here (a file
     * that is not a database) is reported by journal_mode. */
    if (create)
        (void)exec_const(d->db, "PRAGMA auto_vacuum = INCREMENTAL");
    /* journal_mode is the first statement that reads the file: a file that is
     * not a database fails here. */
    if (pragma_text(d->db, create ? "PRAGMA journal_mode = WAL" : "PRAGMA journal_mode", mode,
                    sizeof mode) != SQLITE_OK) {
        code = open_fail(d->db, path, create ? "setting WAL mode" : "reading the journal mode",
                         err);
        goto fail;
    }
    if (strcmp(mode, "wal") != 0 && (!create || strcmp(mode, "memory") != 0)) {
        code = gp_error_set(err, GP_ENOTREADY, NULL,
                            "cannot open database '%s': WAL mode unavailable (journal mode %s)",
                            path, mode);
        goto fail;
    }
    d->memory = strcmp(mode, "memory") == 0;
    /* journal_size_limit: truncate the WAL to 64 MiB after a checkpoint (a
     * large model would otherwise leave a WAL file of its size behind). */
    if (exec_const(d->db, "PRAGMA synchronous = NORMAL") != SQLITE_OK ||
        exec_const(d->db, "PRAGMA foreign_keys = ON") != SQLITE_OK ||
        exec_const(d->db, "PRAGMA journal_size_limit = 67108864") != SQLITE_OK) {
        code = open_fail(d->db, path, "configuring the connection", err);
        goto fail;
    }
    char fk[8];
    if (pragma_text(d->db, "PRAGMA foreign_keys", fk, sizeof fk) != SQLITE_OK ||
        strcmp(fk, "1") != 0) {
        code = gp_error_set(err, GP_ENOTREADY, NULL,
                            "cannot open database '%s': this SQLite has no foreign keys", path);
        goto fail;
    }
    /* A reader must never write (its statements include the writer's; a
     * write stepped here fails with SQLITE_READONLY). */
    if (!create && exec_const(d->db, "PRAGMA query_only = ON") != SQLITE_OK) {
        code = open_fail(d->db, path, "configuring a reader", err);
        goto fail;
    }
    if (!d->memory && (code = setup_disk(d, path, create, err)) != GP_OK)
        goto fail;
    *out = &d->head;
    return GP_OK;
fail:
    sq_close(&d->head);
    return code;
}

/* Bring the schema to SCHEMA_VERSION in one IMMEDIATE transaction (two
 * processes opening a new file concurrently migrate it once). */
static int sq_migrate(gp_db *gdb, const char *path, gp_error *err)
{
    sqlite3 *db = sq(gdb)->db;
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

static int sq_prepare(gp_db *gdb, const char *path, gp_error *err)
{
    sq_db *d = sq(gdb);
    for (int i = 0; i < GPS_STMT_COUNT; i++) {
        const char *sql = gp_store_sql_text(sqlite_sql, i);
        if (sql == NULL)
            continue;
        if (sqlite3_prepare_v2(d->db, sql, -1, &d->stmt[i].st, NULL) != SQLITE_OK)
            return open_fail(d->db, path, "preparing statements", err);
    }
    return GP_OK;
}

static int sq_private(gp_db *db) { return sq(db)->memory; }

static void sq_reset(gp_db_stmt *st)
{
    sqlite3_stmt *s = raw(st);
    if (s) {
        sqlite3_reset(s);
        sqlite3_clear_bindings(s);
    }
}

static gp_db_stmt *sq_stmt_get(gp_db *db, int id)
{
    gp_db_stmt *st = &sq(db)->stmt[id].head;
    sq_reset(st);
    return st;
}

static int sq_bind_int64(gp_db_stmt *st, int i, int64_t v)
{
    return raw(st) ? classify(handle(st), sqlite3_bind_int64(raw(st), i, v)) : GP_DB_OK;
}

static int sq_bind_double(gp_db_stmt *st, int i, double v)
{
    return raw(st) ? classify(handle(st), sqlite3_bind_double(raw(st), i, v)) : GP_DB_OK;
}

static int sq_bind_text(gp_db_stmt *st, int i, const char *text)
{
    if (raw(st) == NULL)
        return GP_DB_OK;
    int rc = text ? sqlite3_bind_text(raw(st), i, text, -1, SQLITE_STATIC)
                  : sqlite3_bind_null(raw(st), i);
    return classify(handle(st), rc);
}

static int sq_bind_blob(gp_db_stmt *st, int i, const void *data, size_t n)
{
    if (raw(st) == NULL)
        return GP_DB_OK;
    /* A NULL pointer would bind SQL NULL: an empty array is an empty blob. */
    int rc = n == 0 ? sqlite3_bind_zeroblob(raw(st), i, 0)
                    : sqlite3_bind_blob64(raw(st), i, data, n, SQLITE_STATIC);
    return classify(handle(st), rc);
}

static int sq_step(gp_db_stmt *st)
{
    return raw(st) ? classify(handle(st), sqlite3_step(raw(st))) : GP_DB_DONE;
}

static enum gp_db_type sq_col_type(gp_db_stmt *st, int col)
{
    switch (sqlite3_column_type(raw(st), col)) {
    case SQLITE_INTEGER:
        return GP_DB_INTEGER;
    case SQLITE_FLOAT:
        return GP_DB_FLOAT;
    case SQLITE_TEXT:
        return GP_DB_TEXT;
    case SQLITE_BLOB:
        return GP_DB_BLOB;
    default:
        return GP_DB_NULL;
    }
}

static int64_t sq_col_int64(gp_db_stmt *st, int col)
{
    return sqlite3_column_int64(raw(st), col);
}

static double sq_col_double(gp_db_stmt *st, int col)
{
    return sqlite3_column_double(raw(st), col);
}

static const char *sq_col_text(gp_db_stmt *st, int col)
{
    return (const char *)sqlite3_column_text(raw(st), col);
}

static const void *sq_col_blob(gp_db_stmt *st, int col)
{
    return sqlite3_column_blob(raw(st), col);
}

static size_t sq_col_bytes(gp_db_stmt *st, int col)
{
    int n = sqlite3_column_bytes(raw(st), col);
    return n < 0 ? 0 : (size_t)n;
}

static int64_t sq_changes(gp_db *db) { return sqlite3_changes(sq(db)->db); }
static int sq_in_txn(gp_db *db) { return !sqlite3_get_autocommit(sq(db)->db); }
static const char *sq_errmsg(gp_db *db) { return sqlite3_errmsg(sq(db)->db); }

/* SQLite's length limit covers the whole row: leave room for the other
 * columns. */
static size_t sq_max_blob(gp_db *db)
{
    int limit = sqlite3_limit(sq(db)->db, SQLITE_LIMIT_LENGTH, -1);
    return limit > 4096 ? (size_t)limit - 1024 : 8;
}

/* ---- durability and a full disk (db_sqlite_disk.c) ---------------------------- */

static int sq_sync(gp_db *db, char *msg, size_t size)
{
    sq_db *d = sq(db);
    if (d->memory)
        return GP_DB_OK;
    int rc = gp_sqlite_sync_wal(d->vfs, d->wal, msg, size);
    if (rc == SQLITE_OK)
        return GP_DB_OK;
    return (rc & 0xff) == SQLITE_FULL ? GP_DB_EFULL : (rc & 0xff) == SQLITE_NOMEM ? GP_DB_ENOMEM
                                                                                : GP_DB_EOTHER;
}

static int sq_release_reserve(gp_db *db)
{
    sq_db *d = sq(db);
    if (d->reserve == NULL)
        return 0;
    d->reserve_held = 0;
    d->reserve_next = 0;
    return gp_sqlite_reserve_release(d->reserve);
}

/* On a full disk the checkpoint itself may need room (the file grows by
 * the pages the WAL added since the last one): then the reserve goes. */
static void sq_reclaim(gp_db *db)
{
    sq_db *d = sq(db);
    if (d->memory)
        return;
    int rc = gp_sqlite_reclaim(d->db);
    if (rc != SQLITE_OK && classify(d->db, rc) != GP_DB_EBUSY && sq_release_reserve(db))
        (void)gp_sqlite_reclaim(d->db);
}

/* Tried at most every 10 s: each try is a statvfs. */
static void sq_keep_reserve(gp_db *db)
{
    sq_db *d = sq(db);
    if (d->reserve == NULL || d->reserve_held)
        return;
    time_t now = time(NULL);
    if (now < d->reserve_next)
        return;
    d->reserve_next = now + 10;
    d->reserve_held = gp_sqlite_reserve_make(d->reserve);
}

/* PRAGMA data_version changes when another connection (of this process or
 * another) commits to the file; reading it touches only the WAL index in
 * shared memory, no page of the database. */
static int sq_watch(gp_db *gdb, int timeout_ms, int *changed)
{
    sq_db *d = sq(gdb);
    *changed = 0;
    if (d->watch_primed) {
        struct timespec ts = {.tv_sec = timeout_ms / 1000,
                              .tv_nsec = (long)(timeout_ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
    }
    int rc = SQLITE_OK;
    if (d->data_version_st == NULL)
        rc = sqlite3_prepare_v2(d->db, "PRAGMA data_version", -1, &d->data_version_st, NULL);
    if (rc == SQLITE_OK && (rc = sqlite3_step(d->data_version_st)) == SQLITE_ROW)
        rc = SQLITE_OK;
    int64_t v = rc == SQLITE_OK ? sqlite3_column_int64(d->data_version_st, 0) : 0;
    if (d->data_version_st)
        sqlite3_reset(d->data_version_st);
    if (rc != SQLITE_OK)
        return classify(d->db, rc) < 0 ? classify(d->db, rc) : GP_DB_EOTHER;
    *changed = !d->watch_primed || v != d->data_version;
    d->data_version = v;
    d->watch_primed = 1;
    return GP_DB_OK;
}

void *gp_db_sqlite_handle(gp_db *db)
{
    return db && db->drv == &gp_db_sqlite_driver ? (void *)sq(db)->db : NULL;
}

const gp_db_driver gp_db_sqlite_driver = {
    .name = "SQLite",
    .open = sq_open,
    .migrate = sq_migrate,
    .prepare = sq_prepare,
    .private_db = sq_private,
    .close = sq_close,
    .stmt = sq_stmt_get,
    .reset = sq_reset,
    .bind_int64 = sq_bind_int64,
    .bind_double = sq_bind_double,
    .bind_text = sq_bind_text,
    .bind_blob = sq_bind_blob,
    .step = sq_step,
    .col_type = sq_col_type,
    .col_int64 = sq_col_int64,
    .col_double = sq_col_double,
    .col_text = sq_col_text,
    .col_blob = sq_col_blob,
    .col_bytes = sq_col_bytes,
    .changes = sq_changes,
    .in_txn = sq_in_txn,
    .errmsg = sq_errmsg,
    .max_blob = sq_max_blob,
    .sync = sq_sync,
    .release_reserve = sq_release_reserve,
    .reclaim = sq_reclaim,
    .keep_reserve = sq_keep_reserve,
    .watch = sq_watch,
};
