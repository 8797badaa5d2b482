/* gpserve store: the connections and the retry plumbing every store file
 * writes through (store_internal.h): opening the writer and the readers,
 * statements and their errors, write transactions retried while the
 * database is busy, and the retention helper built on them.
 *
 * Three connections per gp_store, each serialised by its own mutex (see
 * struct gp_store in store_internal.h): a writer for saves, deletes, job
 * updates, observations and migrations, a reader for everything else but the
 * replay of an observation log, and a log reader for that replay, so that
 * reads are not held up by a long save or a long replay (they see the last
 * committed state). Every statement is prepared once at open on each
 * connection and takes its values through bindings. Writes run in write
 * transactions (SQLite: BEGIN IMMEDIATE, the file's one write lock taken
 * before the version number is read; PostgreSQL: READ COMMITTED with a lock
 * on the model name, GPS_LOCK_NAME), so savers in several processes get
 * distinct versions; a transaction is retried as a whole if the database
 * reports it busy (or, for a save, a version taken meanwhile) before
 * GP_STORE_BUSY_MS have passed. Reads reset every statement they step before
 * returning, so the reader holds no read transaction (no snapshot) between
 * calls. */
#include "store/store_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- helpers ------------------------------------------------------------- */

gp_db_stmt *gp_store_stmt(gp_store_conn *c, enum gp_store_stmt id)
{
    return gp_db_get(c->db, (int)id);
}

void gp_store_stmt_done(gp_db_stmt *st)
{
    gp_db_reset(st);
}

int gp_store_sql_error(gp_store_conn *c, int rc, gp_error *err, const char *what)
{
    c->last_rc = rc;
    const char *msg = gp_db_errmsg(c->db);
    const char *name = c->db->drv->name;
    switch (rc) {
    case GP_DB_EBUSY:
        return gp_error_set(err, GP_ENOTREADY, NULL, "database busy while %s: %s", what, msg);
    case GP_DB_EDOWN:
        return gp_error_set(err, GP_ENOTREADY, NULL, "database unavailable while %s: %s", what,
                            msg);
    case GP_DB_ENOMEM:
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory while %s: %s", what, msg);
    case GP_DB_EFULL:
        return gp_error_set(err, GP_ESTORAGE, NULL, "the disk is full while %s: %s", what, msg);
    default:
        return gp_error_set(err, GP_EINTERNAL, NULL, "%s error while %s: %s", name, what, msg);
    }
}

int gp_store_step_write(gp_store_conn *c, gp_db_stmt *st, int src, int *changed,
                        gp_error *err, const char *what)
{
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    gp_store_stmt_done(st);
    if (src != GP_DB_DONE)
        return gp_store_sql_error(c, src < 0 ? src : GP_DB_EOTHER, err, what);
    if (changed)
        *changed = (int)gp_db_changes(c->db);
    return GP_OK;
}

int gp_store_exec(gp_store_conn *c, enum gp_store_stmt id, gp_error *err, const char *what)
{
    return gp_store_step_write(c, gp_store_stmt(c, id), GP_DB_OK, NULL, err, what);
}

int gp_store_notify(gp_store *s, gp_error *err, const char *what)
{
    s->notified = 1;
    return gp_store_exec(s->w, GPS_NOTIFY, err, what);
}

void gp_store_rollback(gp_store_conn *c)
{
    if (gp_db_in_txn(c->db)) {
        gp_db_stmt *st = gp_store_stmt(c, GPS_ROLLBACK);
        (void)gp_db_step(st);
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

int gp_store_copy_col(gp_db_stmt *st, int col, char *dst, size_t size, int allow_null)
{
    const char *t = gp_db_col_text(st, col);
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

int gp_store_dup_col(gp_db_stmt *st, int col, char **dst)
{
    const char *t = gp_db_col_text(st, col);
    *dst = NULL;
    if (t == NULL)
        return gp_db_col_type(st, col) == GP_DB_NULL ? 0 : -1;
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
 * fails busy, for up to GP_STORE_BUSY_MS; with retry_unique, also while it
 * fails on a UNIQUE constraint (a save's version number taken by another
 * process meanwhile). The drivers already wait for locks (SQLite's busy
 * handler, PostgreSQL's lock_timeout); this covers the busy results returned
 * without waiting (e.g. while another connection recovers the WAL, or a
 * deadlock PostgreSQL broke by failing this transaction). Called with the
 * writer's mutex held. */
static int busy_retry(gp_store *s, int (*write)(gp_store *, void *, gp_error *), void *ctx,
                      int retry_unique, gp_error *err)
{
    const double start = now_seconds();
    long pause = 1;
    for (;;) {
        s->w->last_rc = GP_DB_OK;
        int rc = write(s, ctx, err);
        const int again = s->w->last_rc == GP_DB_EBUSY ||
                          (retry_unique && s->w->last_rc == GP_DB_EUNIQUE);
        if (rc == GP_OK || !again)
            return rc;
        if ((now_seconds() - start) * 1000.0 >= GP_STORE_BUSY_MS)
            return rc;
        sleep_ms(pause);
        if (pause < 32)
            pause *= 2;
    }
}

/* A write returns once its commit is on disk (store_sync.c): the writer's
 * mutex is released first, so that the next writers commit while this one
 * waits and one sync covers them all. */
static int write_retrying(gp_store *s, int (*write)(gp_store *, void *, gp_error *), void *ctx,
                          int retry_unique, uint64_t *defer, gp_error *err)
{
    pthread_mutex_lock(&s->w->mu);
    int rc = busy_retry(s, write, ctx, retry_unique, err);
    /* A write that changed a model row, committed or not (a failure after
     * the COMMIT, such as no memory for the caller's copy, still changed the
     * database): rows kept by callers are read again from now on. */
    if (s->notified) {
        s->notified = 0;
        gp_store_generation_bump(s);
    }
    uint64_t ticket = 0;
    if (rc == GP_OK) {
        ticket = gp_store_sync_ticket(s);
        if (s->drv->keep_reserve)
            s->drv->keep_reserve(s->w->db);
    }
    pthread_mutex_unlock(&s->w->mu);
    if (defer)
        *defer = ticket; /* the caller waits (gp_store_wait_durable) */
    else if (rc == GP_OK)
        rc = gp_store_sync_wait(s, ticket, err);
    return rc;
}

int gp_store_write(gp_store *s, int (*write)(gp_store *, void *, gp_error *), void *ctx,
                   gp_error *err)
{
    return write_retrying(s, write, ctx, 0, NULL, err);
}

int gp_store_write_unique(gp_store *s, int (*write)(gp_store *, void *, gp_error *), void *ctx,
                          gp_error *err)
{
    return write_retrying(s, write, ctx, 1, NULL, err);
}

int gp_store_wait_durable(gp_store *store, uint64_t ticket, gp_error *err)
{
    return ticket ? gp_store_sync_wait(store, ticket, err) : GP_OK;
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

int gp_store_write_txn_deferred(gp_store *s, int (*body)(gp_store *, void *, gp_error *),
                                void *ctx, const char *what, uint64_t *ticket, gp_error *err)
{
    txn_call call = {body, ctx, what};
    *ticket = 0;
    return write_retrying(s, txn_once, &call, 0, ticket, err);
}

void gp_store_now(char out[GP_TIME_LEN])
{
    time_t t = time(NULL);
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL || strftime(out, GP_TIME_LEN, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        memcpy(out, "1970-01-01T00:00:00Z", sizeof "1970-01-01T00:00:00Z");
}

/* ---- open / close -------------------------------------------------------- */

static void conn_close(gp_store_conn *c)
{
    if (c->db)
        c->db->drv->close(c->db);
    c->db = NULL;
    if (c->mu_ready)
        pthread_mutex_destroy(&c->mu);
    c->mu_ready = 0;
}

static void free_store(gp_store *s)
{
    gp_store_watch_stop(s);
    /* The readers first: the SQLite writer, closed last, checkpoints the WAL
     * into the file (when no other process has the file open). */
    for (size_t i = sizeof s->conn / sizeof s->conn[0]; i-- > 0;)
        conn_close(&s->conn[i]);
    gp_store_sync_destroy(s);
    free(s);
}

/* Open connection c to target; the writer migrates the schema before it
 * prepares its statements. */
static int conn_open(gp_store *s, gp_store_conn *c, const char *target, enum gp_db_role role,
                     gp_error *err)
{
    if (pthread_mutex_init(&c->mu, NULL) != 0)
        return gp_error_set(err, GP_EINTERNAL, NULL, "cannot create the store's mutex");
    c->mu_ready = 1;
    char shown[512];
    gp_db_redact(target, shown, sizeof shown);
    int code = s->drv->open(target, role, &c->db, err);
    if (code == GP_OK && role == GP_DB_WRITER)
        code = s->drv->migrate(c->db, shown, err);
    if (code == GP_OK)
        code = s->drv->prepare(c->db, shown, err);
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
    s->drv = gp_db_driver_for(path);
    s->w = &s->conn[0];
    atomic_init(&s->generation, 1); /* 0 is "unknown" (gp_store_generation) */
    s->watch_target = gp_store_dup_text(path);
    if (s->watch_target == NULL) {
        free(s);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory opening the store");
    }
    int code = gp_store_sync_init(s, err);
    if (code)
        goto fail;
    /* The writer creates the database and migrates the schema (on disk
     * before the store is used); the readers are opened after that, onto the
     * current schema. */
    code = conn_open(s, s->w, path, GP_DB_WRITER, err);
    if (code == GP_OK)
        code = gp_store_sync_wait(s, gp_store_sync_ticket(s), err);
    if (code)
        goto fail;
    if (s->drv->private_db(s->w->db)) {
        /* An in-memory database is private to its connection: read on the
         * writer (reads then wait for writes, as with one connection). */
        s->readers[0] = s->w;
        s->n_readers = 1;
        s->log = s->w;
    } else {
        s->log = &s->conn[1];
        for (size_t i = 0; i < GP_STORE_READERS; i++)
            s->readers[i] = &s->conn[2 + i];
        s->n_readers = GP_STORE_READERS;
        for (size_t i = 1; i < 2 + GP_STORE_READERS && code == GP_OK; i++)
            code = conn_open(s, &s->conn[i], path, GP_DB_READER, err);
        if (code)
            goto fail;
    }
    gp_store_set_part_bytes(s, 0);
    *out = s;
    return GP_OK;
fail:
    free_store(s);
    return code;
}

gp_store_conn *gp_store_reader_lock(gp_store *store)
{
    unsigned start = atomic_fetch_add_explicit(&store->next_reader, 1, memory_order_relaxed);
    for (size_t k = 0; k < store->n_readers; k++) {
        gp_store_conn *c = store->readers[(start + k) % store->n_readers];
        if (pthread_mutex_trylock(&c->mu) == 0)
            return c;
    }
    gp_store_conn *c = store->readers[start % store->n_readers];
    pthread_mutex_lock(&c->mu);
    return c;
}

void gp_store_redact(const char *path, char *out, size_t size)
{
    gp_db_redact(path, out, size);
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
    size_t max = store->drv->max_blob(store->w->db);
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

/* ---- retention ---- */

typedef struct prune_ctx {
    enum gp_store_stmt stmt;
    const char *before, *what;
    int deleted;
} prune_ctx;

static int prune_once(gp_store *s, void *vctx, gp_error *err)
{
    prune_ctx *c = vctx;
    gp_db_stmt *st = gp_store_stmt(s->w, c->stmt);
    int src = gp_db_bind_text(st, 1, c->before);
    return gp_store_step_write(s->w, st, src, &c->deleted, err, c->what);
}

int gp_store_prune_before(gp_store *store, enum gp_store_stmt stmt, const char *before,
                          const char *what, size_t *deleted, gp_error *err)
{
    *deleted = 0;
    if (before == NULL || before[0] == '\0')
        return gp_error_set(err, GP_EINVAL, NULL, "no cut-off time given");
    prune_ctx c = {stmt, before, what, 0};
    int rc = gp_store_write(store, prune_once, &c, err);
    if (rc == GP_OK)
        *deleted = (size_t)c.deleted;
    return rc;
}

int gp_store_row_exists(gp_store_conn *c, enum gp_store_stmt id, const char *name, int version,
                        gp_error *err)
{
    gp_db_stmt *st = gp_store_stmt(c, id);
    int src = gp_db_bind_text(st, 1, name);
    if (src == GP_DB_OK && version > 0)
        src = gp_db_bind_int64(st, 2, version);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    int rc = src == GP_DB_ROW    ? 1
             : src == GP_DB_DONE ? 0
                                 : gp_store_sql_error(c, src, err, "looking up a model");
    gp_store_stmt_done(st);
    return rc;
}

int gp_store_not_found_name(const char *name, gp_error *err)
{
    return gp_error_set(err, GP_ENOTFOUND, "name", "model '%s' not found", name);
}

int gp_store_lock_name(gp_store_conn *w, const char *name, gp_error *err)
{
    gp_db_stmt *st = gp_store_stmt(w, GPS_LOCK_NAME);
    int src = gp_db_bind_text(st, 1, name);
    if (src == GP_DB_OK)
        src = gp_db_step(st);
    gp_store_stmt_done(st);
    if (src != GP_DB_ROW && src != GP_DB_DONE)
        return gp_store_sql_error(w, src, err, "locking a name");
    return GP_OK;
}
