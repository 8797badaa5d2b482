/* gpserve store: definitions shared by the store's source files (not part of
 * the store's API; included by the store sources and by tests/unit/test_store.c for the
 * blob codec). */
#ifndef GP_STORE_INTERNAL_H
#define GP_STORE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "store/db.h"
#include "store/store.h"

/* Milliseconds a write waits for another connection's lock (SQLite's busy
 * handler, PostgreSQL's lock_timeout, plus our own retry of a whole write
 * transaction within the same budget). */
#define GP_STORE_BUSY_MS 5000

/* The schema version every driver migrates to (SQLite: PRAGMA user_version;
 * PostgreSQL: the table gpserve_schema). */
#define GP_STORE_SCHEMA_VERSION 9

/* Prepared statements, prepared once at open on each connection (a reader
 * never writes: a write statement stepped on it fails). The SQL of each is
 * written once (gp_store_sql, store_sql.c); each driver overrides the few
 * whose text must differ for it (db_sqlite.c, db_pg_conn.c). */
enum gp_store_stmt {
    GPS_BEGIN,           /* read transaction (one snapshot for several SELECTs) */
    GPS_BEGIN_IMMEDIATE, /* write transaction: takes the write lock up front */
    GPS_COMMIT,
    GPS_ROLLBACK,
    GPS_MAX_VERSION,
    GPS_INSERT_MODEL,
    GPS_INSERT_ARRAY,
    GPS_META_LATEST,
    GPS_META_VERSION,
    GPS_NAME_EXISTS,
    GPS_VERSIONS,
    GPS_LIST,
    GPS_MODEL_EXISTS,
    GPS_ARRAYS,
    GPS_ARRAY_SUMMARY,
    GPS_DELETE,
    GPS_JOB_PUT,
    GPS_JOB_GET,
    /* durable jobs (store_jobs.c) */
    GPS_JOB_CREATE,
    GPS_JOB_INSERT_ARRAY,
    GPS_JOB_ARRAYS,
    GPS_JOB_ARRAY_SUMMARY,
    GPS_JOB_DROP_ARRAYS,
    GPS_JOB_HELD,
    GPS_JOB_CANCEL_FLAG,
    GPS_JOB_UPDATE,
    GPS_JOB_FINISH,
    GPS_JOB_RELEASE,
    GPS_JOB_RENEW,
    GPS_JOB_HELD_LIST,
    GPS_JOB_EXPIRED,
    GPS_JOB_TAKE,
    GPS_JOB_LEASE,
    GPS_JOB_REQUEST_CANCEL,
    GPS_JOB_ACTIVE,
    GPS_JOB_EXPIRE,
    GPS_JOB_REQUEST,
    GPS_JOB_PRUNE,
    /* online models: the observation log and snapshots (store_observe.c) */
    GPS_META_BRIEF_LATEST,
    GPS_META_BRIEF_VERSION,
    GPS_OBS_HEAD,
    GPS_OBS_INSERT_ARRAY,
    GPS_OBS_ARRAYS,
    GPS_OBS_ARRAY_SUMMARY,
    GPS_OBS_ADVANCE,
    GPS_SNAP_DROP,
    GPS_SNAP_INSERT_ARRAY,
    GPS_SNAP_ARRAYS,
    GPS_SNAP_ARRAY_SUMMARY,
    GPS_SNAP_SEQ,
    /* What SQLite's single write lock gives for free and PostgreSQL takes
     * explicitly: a lock on a model name held to the end of the write
     * transaction (saves and deletes of one name in turn), and the reads of
     * a job row and of a log's head that lock the row (FOR UPDATE). */
    GPS_LOCK_NAME,
    GPS_JOB_GET_LOCK,
    GPS_OBS_HEAD_LOCK,
    /* idempotency keys (store_idem.c) */
    GPS_IDEM_PUT,
    GPS_IDEM_GET,
    GPS_IDEM_PRUNE,
    /* A write that changes a model row (save, delete, log append) tells the
     * other daemons' change watches (PostgreSQL's NOTIFY, delivered at
     * COMMIT; nothing on SQLite, whose watches read PRAGMA data_version). */
    GPS_NOTIFY,
    /* aliases (store_alias.c) */
    GPS_VERSION_EXISTS,
    GPS_ALIAS_PUT,
    GPS_ALIAS_GET,
    GPS_ALIAS_LIST,
    GPS_ALIAS_DELETE,
    GPS_ALIAS_DELETE_ALL,
    GPS_ALIASES_OF_VERSION,
    GPS_DELETE_VERSION,
    GPS_MARK_VERSION,
    GPS_MARK_DELETE,
    GPS_ALIAS_FORGET_PREVIOUS,
    /* the audit trail (store_audit.c) */
    GPS_AUDIT_PUT,
    GPS_AUDIT_LIST_DESC,
    GPS_AUDIT_LIST_ASC,
    GPS_AUDIT_PRUNE,
    /* data sets (store_datasets.c) */
    GPS_DS_INSERT,
    GPS_DS_TOTAL_BYTES,
    GPS_DS_INSERT_PART,
    GPS_DS_GROW,
    GPS_DS_TOUCH,
    GPS_DS_READY_ID,
    GPS_DS_NAME_OF,
    GPS_DS_JOB_USING,
    GPS_DS_READER_USING,
    GPS_DS_DELETE_ID,
    GPS_DS_FINISH,
    GPS_DS_GET,
    GPS_DS_GET_ID,
    GPS_DS_LIST,
    GPS_DS_PARTS,
    GPS_DS_PRUNE_UPLOADS,
    GPS_DS_READER_ADD,
    GPS_DS_READER_RENEW,
    GPS_DS_READER_DROP,
    GPS_DS_READERS_PRUNE,
    /* studies and trials (store_studies.c, store_trials.c) */
    GPS_STUDY_INSERT,
    GPS_STUDY_GET,
    GPS_STUDY_GET_ID,
    GPS_STUDY_LIST,
    GPS_STUDY_DELETE,
    GPS_STUDY_LOCK,
    GPS_STUDY_BUMP,
    GPS_STUDY_RESERVE,
    GPS_STUDY_NEXT_SEQ,
    GPS_STUDY_REFIT_CLAIM,
    GPS_TRIAL_INSERT,
    GPS_TRIALS_OF,
    GPS_TRIAL_GET,
    GPS_TRIAL_STATE,
    GPS_TRIAL_COMPLETE,
    GPS_TRIAL_RENEW,
    GPS_TRIAL_EXPIRED_STUDIES,
    GPS_TRIAL_EXPIRE,
    GPS_STMT_COUNT
};

/* The SQL of each statement, with SQLite's parameters ?1, ?2, ...; NULL
 * where only a driver's override has text (store_sql.c). */
extern const char *const gp_store_sql[GPS_STMT_COUNT];
/* The text a driver prepares for statement id: its override (an entry of
 * override, NULL = none) or else the shared text; NULL when the statement
 * does nothing on that back end. */
const char *gp_store_sql_text(const char *const override[GPS_STMT_COUNT], int id);
/* sql with every parameter ?N outside single-quoted literals written $N
 * (PostgreSQL's spelling), malloc'ed; NULL when out of memory. */
char *gp_store_sql_to_pg(const char *sql);

/* One database connection with its prepared statements, and the mutex that
 * serialises every use of it. */
typedef struct gp_store_conn {
    gp_db *db;
    pthread_mutex_t mu;
    int mu_ready; /* mu was initialised (for cleanup after a failed open) */
    int last_rc;  /* gp_db class of the last failure (for the busy retry) */
} gp_store_conn;

/* The group commit (store_sync.c; docs/design/storage.md, "Acknowledged
 * means on disk"): commits are numbered as they return, under the writer's
 * mutex; a write returns only once a sync that started after its commit has
 * finished. One thread syncs at a time; the commits that return meanwhile
 * are covered by the next sync, which one of their writers runs. */
typedef struct gp_store_sync {
    pthread_mutex_t mu;
    pthread_cond_t done; /* a sync ended */
    int ready;           /* mu and done were initialised */
    int full;            /* GP_STORE_DURABILITY_FULL: writes wait for their sync */
    uint64_t committed;  /* commits returned so far (the last one's number) */
    uint64_t synced;     /* every commit up to this number is on disk */
    int syncing;         /* a sync is running */
} gp_store_sync;

/* Test hook (see gp_store_set_save_hook). */
typedef void (*gp_store_save_hook_fn)(gp_store *store, int64_t model_id, void *arg);

/* Reader connections of one store: reads of one daemon run side by side (on
 * PostgreSQL each is a network round trip, which one connection would
 * serialise: 16 concurrent predicts then waited for each other's
 * latest-version look-up). */
#define GP_STORE_READERS 4

/* Connections to one database (a SQLite file in WAL, or a PostgreSQL
 * database): the writer runs gp_store_save,
 * gp_store_delete, gp_store_observe, the job writes and the migrations; the
 * readers (GP_STORE_READERS, each taken whole by one call:
 * gp_store_reader_lock) run gp_store_meta, gp_store_versions, gp_store_list,
 * gp_store_load_state, gp_store_load_snapshot and the job reads; the log
 * reader runs gp_store_observations only, whose read transaction lasts as long
 * as its caller's callback takes over the whole replay (seconds for a long log
 * on a large model): on a reader it would hold up other reads of the
 * handle, the per-request gp_store_meta_brief of the prediction path first.
 * No call holds two of the mutexes at once (gp_store_observations' callback
 * may call the other functions), so a long save does not hold up reads: they
 * see the last committed state. The readers never keep a read transaction
 * open between calls (statements are reset after use, every BEGIN is ended),
 * so a read that starts after a write returned sees that write. An in-memory
 * database (":memory:") cannot be shared by several connections: there
 * the one reader and the log reader are the writer (one connection, one mutex). */
struct gp_store {
    gp_store_conn conn[2 + GP_STORE_READERS]; /* [0] writer, [1] log reader, [2..] readers */
    gp_store_conn *w;                          /* &conn[0] */
    gp_store_conn *log;                        /* &conn[1], or w for an in-memory database */
    gp_store_conn *readers[GP_STORE_READERS];  /* &conn[2..], or w alone in memory */
    size_t n_readers;
    atomic_uint next_reader; /* where the next reader search starts */
    const gp_db_driver *drv;
    gp_store_sync sync;
    /* Guarded by w->mu: */
    size_t part_bytes; /* largest blob of one `arrays` row (a multiple of 8) */
    gp_store_save_hook_fn save_hook;
    void *save_hook_arg;
    /* The change generation (store_watch.c): bumped after every write of
     * this handle (under w->mu, after the commit) and by the watch thread
     * when another connection committed. watch_ok: the watch is up (the
     * generation covers other connections' commits); 0 while it is down. */
    atomic_uint_least64_t generation;
    atomic_int watch_ok;
    atomic_int watch_stop;
    int watch_started;   /* the thread runs (joined by gp_store_close) */
    pthread_t watch_thread;
    gp_db *watch_db;     /* the watch's own connection (the thread's alone) */
    char *watch_target;  /* what it opens (again, after a loss) */
    int notified;        /* the write under way changed a model row (w->mu) */
};

/* Inside a write transaction that changes a model row (a save, a delete, a
 * log append; caller holds w->mu): NOTIFY the other daemons' watches
 * (PostgreSQL) and have this handle's generation bumped when the
 * transaction ends (store_conn.c). Writes that change no model row (job
 * leases, claims, retention) leave the generation alone. */
int gp_store_notify(gp_store *s, gp_error *err, const char *what);
/* Bump the generation (store_watch.c). */
void gp_store_generation_bump(gp_store *s);
/* Stop the watch thread and close its connection (gp_store_close). */
void gp_store_watch_stop(gp_store *s);

/* Test hook: gp_store_save calls fn(store, model_id, arg) inside its write
 * transaction, after the model row (id model_id) and all its arrays are
 * written and before COMMIT, with the writer's mutex held. fn may call the
 * store's read functions (they use the reader connection), not its write
 * functions (they would wait for the writer's mutex forever). NULL removes
 * the hook. Not concurrently with saves on the same store. */
void gp_store_set_save_hook(gp_store *store, gp_store_save_hook_fn fn, void *arg);

/* The statement `id` of connection c, reset and with its bindings cleared. */
gp_db_stmt *gp_store_stmt(gp_store_conn *c, enum gp_store_stmt id);
/* A reader connection with its mutex held: a free one if any (tried in
 * turn from a rotating start), else the first tried, waited for. The caller
 * unlocks c->mu when done. */
gp_store_conn *gp_store_reader_lock(gp_store *store);
/* Reset and clear the bindings of st (ends its implicit read, drops pointers to
 * caller buffers bound). NULL is ignored. */
void gp_store_stmt_done(gp_db_stmt *st);
/* Map the failure rc (a negative gp_db result) on connection c onto a GP code
 * and fill err with the driver's message: busy and a lost server ->
 * GP_ENOTREADY, no memory -> GP_ENOMEM, a full disk -> GP_ESTORAGE,
 * everything else -> GP_EINTERNAL. `what` says what was being done. */
int gp_store_sql_error(gp_store_conn *c, int rc, gp_error *err, const char *what);
/* One statement with (name[, version > 0]) bound: 1 when it returns a row,
 * 0 when none, a negative GP code on failure ("looking up a model"). */
int gp_store_row_exists(gp_store_conn *c, enum gp_store_stmt id, const char *name, int version,
                        gp_error *err);
/* 404 naming "name": model 'NAME' not found. */
int gp_store_not_found_name(const char *name, gp_error *err);

/* The group commit (store_sync.c). init: 0 or GP_EINTERNAL; destroy after
 * the connections are closed. ticket: the number of the commit that just
 * returned on the writer (caller holds s->w->mu). wait: return once that
 * commit is on disk (at once with durability normal, or when the back end
 * commits durably); GP_EINTERNAL (or GP_ESTORAGE, GP_ENOMEM) when the sync
 * failed: the write is committed but may not survive a power loss. */
int gp_store_sync_init(gp_store *s, gp_error *err);
void gp_store_sync_destroy(gp_store *s);
uint64_t gp_store_sync_ticket(gp_store *s);
int gp_store_sync_wait(gp_store *s, uint64_t ticket, gp_error *err);

/* Whose arrays. The four tables share the parts scheme of `arrays`. */
enum gp_array_table {
    GP_ARRAYS_MODEL,        /* `arrays`: a model row's fitted state */
    GP_ARRAYS_JOB,          /* `job_arrays`: a durable job's request data */
    GP_ARRAYS_OBSERVATIONS, /* `observations`: one entry of a model row's log */
    GP_ARRAYS_SNAPSHOT      /* `snapshots`: a model row's snapshot */
};
typedef struct gp_array_owner {
    enum gp_array_table table;
    int64_t model_id;   /* every table but GP_ARRAYS_JOB */
    const char *job_id; /* GP_ARRAYS_JOB */
    int64_t seq;        /* the log entry (observations), or the entry a snapshot follows */
} gp_array_owner;

/* "model row 12", "job ID", "entry 7 of model row 12's log" or "model row
 * 12's snapshot", for messages. */
void gp_array_owner_label(const gp_array_owner *owner, char *out, size_t size);
/* Before a write transaction: GP_EINVAL (field = the array's name) for an
 * array with count > 0 and no data, GP_ETOOBIG for one whose byte size
 * overflows (what gp_store_write_arrays would refuse half-way). */
int gp_store_check_arrays(const gp_state *state, gp_error *err);
/* Arrays of a state, written on the writer connection inside the caller's
 * write transaction (caller holds s->w->mu), in parts of s->part_bytes. */
int gp_store_write_arrays(gp_store *s, const gp_array_owner *owner, const gp_state *state,
                          gp_error *err);
/* Every array of the owner into tmp (empty, initialised), read on connection
 * c (a reader) inside the caller's read transaction (caller holds c->mu);
 * GP_EDATA naming the array for a corrupt one. An owner without arrays leaves
 * tmp empty. */
int gp_store_read_arrays(gp_store_conn *c, const gp_array_owner *owner, gp_state *tmp,
                         gp_error *err);
/* Move the arrays of tmp to the end of state, as the load functions return
 * them; tmp is left empty (and freed) either way. GP_EINVAL (field = the
 * name) on a name clash, GP_ENOMEM: state is then unchanged. */
int gp_store_append_state(gp_state *state, gp_state *tmp, gp_error *err);

/* The connections and the retry plumbing (store_conn.c), shared by every
 * store file: they depend on it, never it on them. */
/* Step a statement that returns no rows, bound by the caller (src: the
 * bindings' result; not GP_DB_OK skips the step), reset it, and put the rows
 * it changed in *changed (may be NULL). */
int gp_store_step_write(gp_store_conn *c, gp_db_stmt *st, int src, int *changed,
                        gp_error *err, const char *what);
/* One call of a retention statement (jobs, idempotency keys): stmt with
 * the cut-off time `before` as its one text parameter, a bounded DELETE;
 * *deleted gets the rows it removed. */
int gp_store_prune_before(gp_store *store, enum gp_store_stmt stmt, const char *before,
                          const char *what, size_t *deleted, gp_error *err);
/* Run a statement that returns no rows (BEGIN, COMMIT, ...). */
int gp_store_exec(gp_store_conn *c, enum gp_store_stmt id, gp_error *err, const char *what);
/* Roll back c's open transaction, if any (errors ignored). */
void gp_store_rollback(gp_store_conn *c);
/* Run write(s, ctx, err), one whole transaction on the writer, under the
 * writer's mutex (taken here), again while it fails busy (GP_DB_EBUSY: a lock
 * wait ran out, a deadlock), for up to GP_STORE_BUSY_MS. */
int gp_store_write(gp_store *s, int (*write)(gp_store *, void *, gp_error *), void *ctx,
                   gp_error *err);
/* gp_store_write that retries also when the database reports a UNIQUE
 * violation: a save whose version number another process took meanwhile. */
int gp_store_write_unique(gp_store *s, int (*write)(gp_store *, void *, gp_error *), void *ctx,
                          gp_error *err);
/* gp_store_write of BEGIN IMMEDIATE, body(s, ctx, err), COMMIT; rolled back
 * when body or the commit fails. */
/* The reserve file released, under the writer's mutex: 1 when there was one
 * (a delete retries in its space; docs/design/storage.md, "A full disk"). */
int gp_store_release_reserve(gp_store *s);
/* The space a delete freed, back to the file system (best effort). */
void gp_store_reclaim(gp_store *s);
int gp_store_write_txn(gp_store *s, int (*body)(gp_store *, void *, gp_error *), void *ctx,
                       const char *what, gp_error *err);
/* gp_store_write_txn that returns once committed, with *ticket the commit's
 * number for gp_store_wait_durable (0 when nothing was committed). */
int gp_store_write_txn_deferred(gp_store *s, int (*body)(gp_store *, void *, gp_error *),
                                void *ctx, const char *what, uint64_t *ticket, gp_error *err);
/* Column text into a fixed buffer: 0 if it does not fit (or is NULL and
 * allow_null is 0). */
int gp_store_copy_col(gp_db_stmt *st, int col, char *dst, size_t size, int allow_null);
/* Owned copy of column text (NULL stays NULL); -1 on allocation failure. */
int gp_store_dup_col(gp_db_stmt *st, int col, char **dst);
/* Inside the writer's open transaction: end job id (held by owner, or any
 * holder for owner NULL) with status and texts, dropping its request data;
 * GP_ECONFLICT when it is not an active job of owner. */
int gp_store_job_end_locked(gp_store *s, const char *id, const char *owner, const char *status,
                            const char *progress, const char *error, const char *result,
                            gp_error *err);
/* Idempotency keys (store_idem.c). Before a write transaction: GP_EINVAL
 * for texts out of range (idem NULL: GP_OK). Inside the writer's open
 * transaction: record idem's row (its body, or make_body(meta) when body is
 * NULL), GP_ECONFLICT field GP_STORE_KEY_TAKEN when the key is recorded. */
int gp_store_idem_check(const gp_idem_put *idem, gp_error *err);
int gp_store_idem_put_locked(gp_store *s, const gp_idem_put *idem, const gp_model_meta *meta,
                             gp_error *err);
/* Inside the writer's open transaction: insert a's row (a NULL: nothing),
 * with version when a->version is 0 (a save's new version). */
int gp_store_audit_put_locked(gp_store *s, const gp_audit_put *a, int version, gp_error *err);
/* Inside a write transaction: hold name until the transaction ends, so that
 * saves, deletes and alias writes of one name run one after the other
 * (PostgreSQL: an advisory lock on the name's hash; nothing in SQLite, whose
 * write transaction already excludes every other writer). */
int gp_store_lock_name(gp_store_conn *w, const char *name, gp_error *err);
/* Data sets (store_dataset_use.c). Inside a write transaction: hold the name
 * of a data set until it ends (PostgreSQL's advisory lock on
 * "dataset:NAME"; nothing on SQLite); the name and state of row id (1
 * found, 0 none, or a negative code); and the check that row id is a ready
 * data set, under its name's lock, before a job names it (GP_ENOTFOUND
 * field "data.dataset" when it is not). */
int gp_store_dataset_lock(gp_store_conn *w, const char *name, gp_error *err);
/* GP_EINVAL field "name" unless name has 1..GP_NAME_MAX characters. */
int gp_store_dataset_check_name(const char *name, gp_error *err);
int gp_store_dataset_name_of(gp_store_conn *c, int64_t id, char *name, int *ready,
                             gp_error *err);
int gp_store_dataset_hold_locked(gp_store *s, int64_t id, gp_error *err);
/* On connection c (store_dataset_use.c): the ready id of name (1 found,
 * 0 none, or a negative code), and GP_ECONFLICT (field "name", naming the
 * job or the fit) when data set id of name is in use at now. */
int gp_store_dataset_ready_id(gp_store_conn *c, const char *name, int64_t *id, gp_error *err);
int gp_store_dataset_in_use(gp_store_conn *c, int64_t id, const char *name, double now,
                            gp_error *err);
/* Studies (store_studies.c, store_trials.c). The columns of STUDY_COLS and
 * TRIAL_COLS (store_sql.c) of statement st's row into r (zeroed first; its
 * texts owned). GP_EDATA for a corrupt row, GP_ENOMEM. */
int gp_store_study_read_row(gp_db_stmt *st, gp_study_row *r, gp_error *err);
int gp_store_trial_read_row(gp_db_stmt *st, gp_trial_row *r, gp_error *err);
/* The study row id on connection c (1 found, 0 none, or a negative code). */
int gp_store_study_by_id(gp_store_conn *c, int64_t id, gp_study_row *r, gp_error *err);
/* Every trial of study_id on connection c, by id (inside the caller's
 * transaction for a snapshot); *rows malloc'ed, NULL when none. */
int gp_store_trials_of(gp_store_conn *c, int64_t study_id, gp_trial_row **rows, size_t *n,
                       gp_error *err);
/* malloc'ed copy of text, or NULL. */
char *gp_store_dup_text(const char *text);

/* Portable little-endian float64 codec (IEEE 754 doubles whose byte order is
 * that of uint64_t, as on every platform we build for). */
void gp_store_le_encode(const double *src, size_t count, unsigned char *dst);
void gp_store_le_decode(const unsigned char *src, size_t count, double *dst);
/* 1 when the host stores doubles little-endian (blobs are then copied as is). */
int gp_store_host_is_le(void);

#endif
