/* gpserve store: the database under the store, behind a small driver
 * interface (docs/design/storage.md, "Two back ends").
 *
 * The store's logic (store.c, store_jobs.c, store_observe.c,
 * store_arrays.c) runs the same transactions on every back end; a driver
 * supplies a connection, the SQL text of each prepared statement
 * (enum gp_store_stmt) in its dialect, the schema migrations, and the calls
 * below: prepare (at open), bind, step, read a column, and a failure
 * classified into what the store does about it (retry, conflict, not ready).
 * Two drivers: SQLite (db_sqlite.c; a file path) and PostgreSQL through
 * libpq (db_pg.c; a postgresql:// or postgres:// URL).
 *
 * Statements follow SQLite's model on both: gp_db_stmt returns a statement
 * reset with its bindings cleared; parameters are numbered from 1 and every
 * number up to the statement's largest is used; the first gp_db_step runs it
 * and returns GP_DB_ROW (a row to read) or GP_DB_DONE, later steps move to
 * the next row; gp_db_reset ends it. Texts and blobs bound are not copied:
 * they must live until the statement is reset. A statement whose SQL is NULL
 * in a dialect (something only the other back end needs, such as
 * PostgreSQL's advisory lock before a version is allocated) steps straight to
 * GP_DB_DONE. */
#ifndef GP_STORE_DB_H
#define GP_STORE_DB_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/error.h"

/* What gp_db_step and the bind calls return: >= 0 success, < 0 a failure
 * class (the connection's gp_db_errmsg says more). */
enum gp_db_result {
    GP_DB_OK = 0,
    GP_DB_ROW = 1,
    GP_DB_DONE = 2,
    GP_DB_EBUSY = -1,     /* a lock stayed held (busy timeout, lock_timeout) or a deadlock:
                             the whole transaction may be retried */
    GP_DB_EUNIQUE = -2,   /* a UNIQUE or PRIMARY KEY constraint */
    GP_DB_EDOWN = -3,     /* the server cannot be reached, the connection was lost */
    GP_DB_ENOMEM = -4,
    GP_DB_EFULL = -5,     /* the disk is full */
    GP_DB_EOTHER = -6     /* anything else (a bug, a corrupt file, a refused statement) */
};

/* A column's type in the current row. */
enum gp_db_type { GP_DB_NULL, GP_DB_INTEGER, GP_DB_FLOAT, GP_DB_TEXT, GP_DB_BLOB };

/* A writer may create and migrate the database; a reader never writes
 * (SQLite: query_only; PostgreSQL: read-only transactions). */
enum gp_db_role { GP_DB_WRITER, GP_DB_READER };

typedef struct gp_db gp_db;
typedef struct gp_db_stmt gp_db_stmt;
typedef struct gp_db_driver gp_db_driver;

/* The head of every driver's connection and statement. */
struct gp_db {
    const gp_db_driver *drv;
};
struct gp_db_stmt {
    gp_db *db;
};

struct gp_db_driver {
    const char *name; /* "SQLite", "PostgreSQL": for messages */
    /* Open a connection to target (created if need be by a writer) and
     * configure it; on failure *out is NULL and err says why (GP_ENOTREADY),
     * with target redacted (gp_db_redact). */
    int (*open)(const char *target, enum gp_db_role role, gp_db **out, gp_error *err);
    /* Bring the schema to the current version (writer only), once however
     * many processes open the database at the same time. */
    int (*migrate)(gp_db *db, const char *target, gp_error *err);
    /* Prepare every statement of the dialect. */
    int (*prepare)(gp_db *db, const char *target, gp_error *err);
    /* 1 when this connection cannot be shared with others on the same
     * database (SQLite ":memory:"): the store then reads on its writer. */
    int (*private_db)(gp_db *db);
    void (*close)(gp_db *db);
    gp_db_stmt *(*stmt)(gp_db *db, int id);
    void (*reset)(gp_db_stmt *st);
    int (*bind_int64)(gp_db_stmt *st, int i, int64_t v);
    int (*bind_double)(gp_db_stmt *st, int i, double v);
    int (*bind_text)(gp_db_stmt *st, int i, const char *text); /* NULL binds NULL */
    int (*bind_blob)(gp_db_stmt *st, int i, const void *data, size_t n); /* n 0: empty */
    int (*step)(gp_db_stmt *st);
    enum gp_db_type (*col_type)(gp_db_stmt *st, int col);
    int64_t (*col_int64)(gp_db_stmt *st, int col);  /* NULL reads 0 */
    double (*col_double)(gp_db_stmt *st, int col);  /* NULL reads 0 */
    const char *(*col_text)(gp_db_stmt *st, int col); /* NULL for NULL */
    const void *(*col_blob)(gp_db_stmt *st, int col);
    size_t (*col_bytes)(gp_db_stmt *st, int col);
    /* Rows changed by the connection's last INSERT, UPDATE or DELETE. */
    int64_t (*changes)(gp_db *db);
    /* 1 inside an open transaction. */
    int (*in_txn)(gp_db *db);
    /* The message of the connection's last failure. */
    const char *(*errmsg)(gp_db *db);
    /* Largest blob one row may hold (the part size is kept below it). */
    size_t (*max_blob)(gp_db *db);
    /* Durability (docs/design/storage.md, "Acknowledged means on disk"): make
     * every commit that returned on this database durable. SQLite in WAL mode
     * with synchronous = NORMAL does not fsync a commit: this syncs the WAL
     * file (opened anew through the connection's VFS: on Linux an fsync of any
     * descriptor of the inode flushes it). NULL where a commit is durable when
     * it returns (PostgreSQL: synchronous_commit, on by default). Called
     * without the connection's mutex, from any thread, while others write: it
     * reads only what open set. GP_DB_OK or a failure class, msg saying why. */
    int (*sync)(gp_db *db, char *msg, size_t size);
    /* A full disk (SQLite's writer; NULL elsewhere), under the writer's mutex.
     * release_reserve: delete the reserve file kept beside the database, so
     * that a write that frees space (a delete) can append to the WAL on a full
     * disk; 1 when there was one. reclaim: give space freed by a delete back
     * to the file system (checkpoint, incremental vacuum, truncate); best
     * effort. keep_reserve: make the reserve again once the file system has
     * room for it (cheap while it exists). */
    int (*release_reserve)(gp_db *db);
    void (*reclaim)(gp_db *db);
    void (*keep_reserve)(gp_db *db);
    /* The change watch (store_watch.c), on a connection opened as a reader
     * and used for nothing else: return within about timeout_ms with
     * *changed 1 when another connection may have committed since the last
     * call (the first call answers 1 at once: nothing is known yet). SQLite:
     * PRAGMA data_version, read after sleeping timeout_ms; PostgreSQL: LISTEN
     * on GP_DB_CHANNEL (its first call), then the notifications the writers
     * send (GPS_NOTIFY) waited for on the socket. GP_DB_OK, or a failure
     * class (the connection lost: every later call tries to make it again). */
    int (*watch)(gp_db *db, int timeout_ms, int *changed);
};

/* The PostgreSQL channel a commit that changes a model row notifies. */
#define GP_DB_CHANNEL "gpserve_models"

extern const gp_db_driver gp_db_sqlite_driver;
extern const gp_db_driver gp_db_pg_driver;

/* The driver for target (db_driver.c): PostgreSQL for a postgresql:// or postgres:// URL,
 * SQLite for anything else (a file path, ":memory:"). */
const gp_db_driver *gp_db_driver_for(const char *target);
/* 1 if target is a postgresql:// or postgres:// URL (any case), the
 * PostgreSQL driver's; anything else is a SQLite path (db.c). */
int gp_db_is_pg_url(const char *target);
/* target as it may be shown: a URL with its password replaced by "***"
 * (user:***@host, and password=*** in the query); a path as is. */
void gp_db_redact(const char *target, char *out, size_t size);

static inline gp_db_stmt *gp_db_get(gp_db *db, int id) { return db->drv->stmt(db, id); }
static inline void gp_db_reset(gp_db_stmt *st)
{
    if (st)
        st->db->drv->reset(st);
}
static inline int gp_db_bind_int64(gp_db_stmt *st, int i, int64_t v)
{
    return st->db->drv->bind_int64(st, i, v);
}
static inline int gp_db_bind_double(gp_db_stmt *st, int i, double v)
{
    return st->db->drv->bind_double(st, i, v);
}
static inline int gp_db_bind_text(gp_db_stmt *st, int i, const char *text)
{
    return st->db->drv->bind_text(st, i, text);
}
static inline int gp_db_bind_blob(gp_db_stmt *st, int i, const void *data, size_t n)
{
    return st->db->drv->bind_blob(st, i, data, n);
}
static inline int gp_db_step(gp_db_stmt *st) { return st->db->drv->step(st); }
static inline enum gp_db_type gp_db_col_type(gp_db_stmt *st, int col)
{
    return st->db->drv->col_type(st, col);
}
static inline int64_t gp_db_col_int64(gp_db_stmt *st, int col)
{
    return st->db->drv->col_int64(st, col);
}
static inline int gp_db_col_int(gp_db_stmt *st, int col)
{
    int64_t v = st->db->drv->col_int64(st, col);
    return v > INT32_MAX ? INT32_MAX : v < INT32_MIN ? INT32_MIN : (int)v;
}
static inline double gp_db_col_double(gp_db_stmt *st, int col)
{
    return st->db->drv->col_double(st, col);
}
static inline const char *gp_db_col_text(gp_db_stmt *st, int col)
{
    return st->db->drv->col_text(st, col);
}
static inline const void *gp_db_col_blob(gp_db_stmt *st, int col)
{
    return st->db->drv->col_blob(st, col);
}
static inline size_t gp_db_col_bytes(gp_db_stmt *st, int col)
{
    return st->db->drv->col_bytes(st, col);
}
static inline int64_t gp_db_changes(gp_db *db) { return db->drv->changes(db); }
static inline int gp_db_in_txn(gp_db *db) { return db->drv->in_txn(db); }
static inline const char *gp_db_errmsg(gp_db *db) { return db->drv->errmsg(db); }

/* Tests: the SQLite handle under a SQLite connection (NULL for another
 * driver), declared as void * so that this header needs no sqlite3.h. */
void *gp_db_sqlite_handle(gp_db *db);

#endif
