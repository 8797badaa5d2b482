/* gpserve store: persistence of fitted models (as named arrays), the
 * observation logs of online models, and jobs, in a SQLite file or a
 * PostgreSQL database (a postgresql:// URL; store/db.h, db_pg.c: the same
 * transactions with PostgreSQL's row and advisory locks where SQLite's write
 * lock serialised writers; what follows says SQLite, and holds for both but
 * where docs/design/storage.md, "Two back ends", says otherwise).
 *
 * SQLite in WAL mode, foreign_keys=ON, a busy timeout, prepared statements
 * only, schema version in PRAGMA user_version with forward migrations. One
 * gp_store holds six connections to the database, each with its own mutex: a
 * writer (gp_store_save, gp_store_delete, gp_store_observe, the job writes,
 * migrations; these are serialised with each other), four read-only readers
 * (gp_store_meta, gp_store_versions, gp_store_list, gp_store_load_state,
 * gp_store_load_snapshot, the job reads; a call takes a free one) and a
 * read-only log reader (gp_store_observations alone, whose replay lasts as
 * long as its callback); gp_store_watch_start adds one for the change watch
 * (below). A read therefore does not wait for a write in
 * progress, however long (saving a large model takes seconds): it sees the
 * last committed state, never part of a save; and a read that starts after a
 * write returned sees that write. The store is safe to use from many threads;
 * several processes may open the same file (WAL), and each sees the models the
 * others wrote. (An in-memory database, path ":memory:", cannot be shared by
 * several connections: it uses one for all, so its reads wait for its writes.)
 *
 * Schema (docs/design/storage.md, with one departure from the original contract: an array larger than GP_STORE_PART_BYTES
 * (below SQLite's 1e9-byte default blob limit) is stored in several rows,
 * `part` 0, 1, ..., each a multiple of 8 bytes; an empty array is one part 0
 * with a zero-length blob), and jobs has a `result` column:
 *   models(id INTEGER PRIMARY KEY, name TEXT NOT NULL, version INTEGER NOT NULL,
 *          method TEXT NOT NULL, spec TEXT NOT NULL, info TEXT NOT NULL,
 *          n_train INTEGER, input_dim INTEGER, created_at TEXT, UNIQUE(name, version))
 *   arrays(model_id INTEGER REFERENCES models(id) ON DELETE CASCADE, key TEXT,
 *          part INTEGER NOT NULL DEFAULT 0, rows INTEGER, cols INTEGER,
 *          data BLOB,  -- little-endian float64, column-major
 *          PRIMARY KEY(model_id, key, part))
 *   jobs(id TEXT PRIMARY KEY, model_name TEXT, status TEXT, progress TEXT,
 *        error TEXT, result TEXT, created_at TEXT, updated_at TEXT)
 * and, since version 2, the durable-job columns and job_arrays; since version
 * 3, models.obs_seq, observations(model_id, seq, key, part, rows, cols, data)
 * and snapshots(model_id, seq, key, part, rows, cols, data), in the parts
 * scheme of arrays (see "online models" below); since version 4,
 * idempotency(scope, key, ...); since version 5, aliases(name, alias,
 * version, updated_at, updated_by) with a foreign key (name, version) to
 * models (see "aliases" below); since version 6, version_marks and
 * aliases.previous_version; since version 7, audit(id, at, key_name, route,
 * model, version, status, code, request_id, job_id) (see "the audit trail"
 * below); since version 8, datasets, dataset_parts, dataset_readers and
 * jobs.dataset_id (see "data sets" below); since version 9, studies and trials
 * (see "studies and trials" below).
 *
 * Every function returns 0 or a negative GP_E* code (core/base/error.h) and fills
 * err: GP_ENOTFOUND for an unknown model/version/job (field "name", "version"
 * or "id"), GP_ENOTREADY when the database cannot be used (cannot be opened,
 * is not a database, has a newer schema, or stays locked by another connection
 * beyond the 5 s busy timeout), GP_EINTERNAL for other SQLite failures (with
 * SQLite's message), GP_EINVAL for bad arguments, GP_EDATA for a stored array
 * that is corrupt. Functions that fill an output struct zero it first, so it
 * can be freed after an error too. */
#ifndef GP_STORE_H
#define GP_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/error.h"
#include "core/base/state.h"

#define GP_NAME_MAX 64
#define GP_METHOD_NAME_MAX 31
#define GP_TIME_LEN 32
#define GP_JOB_ID_LEN 40

typedef struct gp_store gp_store;

/* Open (creating if needed) and migrate the database at path: a SQLite file
 * (or ":memory:"), or a PostgreSQL database for a postgresql:// or
 * postgres:// URL (what libpq's PQconnectdb takes). *out is NULL on failure
 * (GP_ENOTREADY with the path, its password hidden, and the database's
 * message; GP_EINVAL for an empty path). */
int gp_store_open(const char *path, gp_store **out, gp_error *err);
/* When a write returns (docs/design/storage.md, "Acknowledged means on
 * disk"). FULL, the default of gp_store_open: on disk, so it survives a power
 * loss (SQLite: the WAL synced once for the writes that committed meanwhile,
 * a group commit; PostgreSQL syncs every commit itself). NORMAL: committed,
 * survives a crash of the process but the last writes before a power loss may
 * be lost (SQLite's synchronous = NORMAL in WAL mode; PostgreSQL unchanged). */
enum gp_store_durability { GP_STORE_DURABILITY_FULL = 0, GP_STORE_DURABILITY_NORMAL = 1 };
/* Set before the store is shared between threads. */
void gp_store_set_durability(gp_store *store, enum gp_store_durability durability);

/* path as it may be logged or shown: a URL's password (user:PASSWORD@ and
 * password=PASSWORD in the query) replaced by "***"; a file path as is.
 * Truncated to size - 1 characters. */
void gp_store_redact(const char *path, char *out, size_t size);
/* NULL is ignored. Not concurrently with other calls on the same store. */
void gp_store_close(gp_store *store);

/* One row of `models` (what a model is, without its arrays). */
typedef struct gp_model_meta {
    int64_t id;
    char name[GP_NAME_MAX + 1];
    int version;
    char method[GP_METHOD_NAME_MAX + 1];
    char *spec; /* owned JSON text */
    char *info; /* owned JSON text */
    size_t n_train, input_dim;
    char created_at[GP_TIME_LEN]; /* ISO 8601 UTC, e.g. 2026-11-21T06:12:20Z */
    uint64_t obs_seq; /* entries in the version's observation log (0: none) */
} gp_model_meta;

void gp_model_meta_free(gp_model_meta *meta);          /* frees spec/info, not meta itself */
void gp_model_meta_free_array(gp_model_meta *metas, size_t count); /* and the array */

/* Save a new version of model `name` in one transaction (the version is one
 * more than the largest existing one, 1 for a new name; concurrent savers of
 * the same name from several processes each get their own version). meta
 * receives the stored row (id, version, created_at, copies of the texts); it may
 * be NULL. GP_EINVAL (field "name" / "method" / the array's name) for a name
 * outside 1..GP_NAME_MAX characters, a method outside 1..GP_METHOD_NAME_MAX,
 * NULL spec or info, or a state array with count > 0 and no data; state may be
 * NULL (no arrays). Nothing is written on failure (GP_ENOMEM while copying the
 * texts into meta is the one error after the commit). */
int gp_store_save(gp_store *store, const char *name, const char *method, const char *spec,
                  const char *info, size_t n_train, size_t input_dim, const gp_state *state,
                  gp_model_meta *meta, gp_error *err);

/* Row of version `version` of `name` (version 0: the latest). Unknown name:
 * GP_ENOTFOUND field "name"; known name without that version (or version < 0):
 * GP_ENOTFOUND field "version". */
int gp_store_meta(gp_store *store, const char *name, int version, gp_model_meta *meta,
                  gp_error *err);
/* The same row without the spec and info texts (left NULL): the per-request
 * lookup of the prediction path, which only needs id, version and method. */
int gp_store_meta_brief(gp_store *store, const char *name, int version, gp_model_meta *meta,
                        gp_error *err);
/* Every version of `name`, ascending; *versions is malloc'ed (caller frees).
 * Unknown name: GP_ENOTFOUND field "name". */
int gp_store_versions(gp_store *store, const char *name, int **versions, size_t *count,
                      gp_error *err);
/* Latest version of every model, ordered by name; free with gp_model_meta_free_array.
 * No models: *metas NULL, *count 0, GP_OK. */
int gp_store_list(gp_store *store, gp_model_meta **metas, size_t *count, gp_error *err);
/* All arrays of model row `model_id` into state (initialised by the caller;
 * appended if it already holds arrays, GP_EINVAL on a name clash), read in one
 * snapshot. Unknown row: GP_ENOTFOUND field "name". A missing, extra, short or
 * mis-shaped part: GP_EDATA with field = the array's name. On failure state is
 * unchanged. */
int gp_store_load_state(gp_store *store, int64_t model_id, gp_state *state, gp_error *err);
/* Delete every version of `name` and their arrays (one transaction). Unknown
 * name: GP_ENOTFOUND field "name". */
int gp_store_delete(gp_store *store, const char *name, gp_error *err);
/* Delete version `version` of `name` and everything keyed by it (its arrays,
 * observation log and snapshot) in one transaction under the name's lock
 * (store_version.c). "The latest" is then the highest remaining version; the
 * deleted number is never given out again (schema v6, version_marks). Unknown
 * name or version: GP_ENOTFOUND field "name" / "version". GP_ECONFLICT field
 * "alias" (the message lists them) when an alias points at the version;
 * GP_ECONFLICT field "version" when it is the model's only version (delete
 * the model instead). */
int gp_store_delete_version(gp_store *store, const char *name, int version, gp_error *err);

/* ---- aliases (store_alias.c; docs/design/storage.md, "Aliases") ----
 * A movable label of a model ("champion") pointing at one of its versions,
 * set, moved and removed atomically: a label always names a version that
 * exists (a foreign key). Deleting a model removes its labels with it; a
 * version a label points to cannot be deleted. Every alias write changes the
 * change generation like a save (other daemons see it through their watch). */
#define GP_ALIAS_MAX 64
typedef struct gp_alias_row {
    char alias[GP_ALIAS_MAX + 1];
    int version;
    char updated_at[GP_TIME_LEN];    /* ISO 8601 UTC */
    char updated_by[GP_NAME_MAX + 1]; /* who set it; "" when not known */
    int previous_version; /* what it pointed at before its last move (a roll back's
                           * target); 0: never moved, or that version was deleted */
} gp_alias_row;
/* 1 when alias is a valid label: [A-Za-z][A-Za-z0-9_.-]{0,63} (URL-safe as
 * it is, and never a number, so that a version field is either). */
int gp_store_alias_valid(const char *alias);
/* Point alias of name at version (created or moved), recording when and
 * by (NULL or "": not known). GP_EINVAL field "alias" for an invalid label;
 * GP_ENOTFOUND field "name" (no such model) or "version" (no such version).
 * row (may be NULL) receives the stored row. A move to another version keeps
 * the version it leaves as previous_version (schema v6). */
int gp_store_alias_set(gp_store *store, const char *name, const char *alias, int version,
                       const char *by, gp_alias_row *row, gp_error *err);
/* One label. GP_ENOTFOUND field "alias" (unknown label of a known model) or
 * "name" (no such model). */
int gp_store_alias_get(gp_store *store, const char *name, const char *alias, gp_alias_row *row,
                       gp_error *err);
/* Every label of name, by label; *rows malloc'ed (NULL when none). A model
 * without labels: GP_OK, count 0; no such model: GP_ENOTFOUND field "name". */
int gp_store_aliases(gp_store *store, const char *name, gp_alias_row **rows, size_t *count,
                     gp_error *err);
/* Remove a label. GP_ENOTFOUND field "alias" or "name" as gp_store_alias_get. */
int gp_store_alias_delete(gp_store *store, const char *name, const char *alias, gp_error *err);

/* Jobs (store_jobs.c). Texts are JSON (progress, error, result: the fitted
 * model's metadata) or NULL. */
typedef struct gp_job_row {
    char id[GP_JOB_ID_LEN];
    char model_name[GP_NAME_MAX + 1];
    char status[16]; /* queued | running | succeeded | failed | cancelled */
    char *progress;  /* owned, may be NULL */
    char *error;     /* owned, may be NULL */
    char *result;    /* owned, may be NULL */
    char created_at[GP_TIME_LEN];
    char updated_at[GP_TIME_LEN];
    int attempts;    /* runs started (durable jobs) */
    /* The ready data set a durable job's fit names (0: none): set when the
     * job is created, in the same transaction that checks it is ready; a
     * data set stays while a queued or running job names it. */
    int64_t dataset_id;
} gp_job_row;

void gp_job_row_free(gp_job_row *job); /* frees the texts */
/* Insert or replace the job row (updated_at set to now; created_at kept if the
 * row exists, else now; the row's own created_at/updated_at are ignored).
 * GP_EINVAL for an empty or unterminated id or status. */
int gp_store_job_put(gp_store *store, const gp_job_row *job, gp_error *err);
/* Unknown id: GP_ENOTFOUND field "id". */
int gp_store_job_get(gp_store *store, const char *id, gp_job_row *job, gp_error *err);

/* ---- durable jobs ----
 * A job is created queued together with its request (spec: the validated fit
 * fields as JSON; data: the arrays "X" and "y") in one transaction, held by an
 * owner (a daemon's identity) until lease_until (Unix seconds, the callers'
 * clock). The holder renews the lease, moves the job to running (an attempt)
 * and ends it; every write of a holder is conditional on still holding the
 * job, and answers GP_ECONFLICT when another daemon has taken it over (the
 * lease had expired). Ending a job drops its request data; the row keeps the
 * outcome. */
#define GP_JOB_OWNER_LEN 128

/* The job's row (id, model_name, progress used; status is queued) with its
 * request, held by owner until lease_until. */
int gp_store_job_create(gp_store *store, const gp_job_row *job, const char *spec,
                        const gp_state *data, const char *owner, double lease_until,
                        gp_error *err);
/* The stored request of a job (spec malloc'ed, arrays appended to data, an
 * initialised state), with its model name, created_at, progress and attempts in
 * row. GP_ENOTFOUND when the job has no request (it has ended). */
int gp_store_job_request(gp_store *store, const char *id, gp_job_row *row, char **spec,
                         gp_state *data, gp_error *err);
/* A holder's update of status (queued | running) and progress; started = 1
 * counts an attempt. */
int gp_store_job_update(gp_store *store, const gp_job_row *job, const char *owner, int started,
                        gp_error *err);
/* End a job (status succeeded | failed | cancelled, with progress, error and
 * result) and drop its request; owner NULL ends it whoever holds it. */
int gp_store_job_finish(gp_store *store, const gp_job_row *job, const char *owner,
                        gp_error *err);
/* Whether a DELETE asked holder owner to cancel job id (*requested 0 or 1):
 * what gpserve-fit's rank 0 polls while it runs the job for its daemon.
 * GP_ECONFLICT when owner no longer holds it (ended, or taken over). */
int gp_store_job_cancel_flag(gp_store *store, const char *id, const char *owner, int *requested,
                             gp_error *err);
/* Hand a held job back (a graceful stop): queued, no owner, its lease expired,
 * an interrupted run not counted as an attempt. */
int gp_store_job_release(gp_store *store, const char *id, const char *owner, gp_error *err);

/* One job an owner holds, as gp_store_job_renew reports it. */
typedef struct gp_job_hold {
    char id[GP_JOB_ID_LEN];
    int cancel_requested;
} gp_job_hold;

/* Extend the lease of every job owner holds to lease_until and list them
 * (*held malloc'ed, caller frees; NULL when none). */
int gp_store_job_renew(gp_store *store, const char *owner, double lease_until,
                       gp_job_hold **held, size_t *count, gp_error *err);

/* What gp_store_job_claim did. */
enum gp_job_claim_outcome {
    GP_JOB_CLAIM_NONE = 0,  /* no job with an expired lease */
    GP_JOB_CLAIMED,         /* row->id is ours now, queued: run it */
    GP_JOB_CLAIM_GAVE_UP,   /* row->id had been started max_attempts times: now failed */
    GP_JOB_CLAIM_CANCELLED  /* row->id had a cancel request: now cancelled */
};
/* Take over the oldest-expired job (lease_until < now) for owner until
 * lease_until, in one write transaction: exactly one daemon gets it. A job
 * whose interrupted runs reached max_attempts ends failed with gave_up_error
 * (JSON text) instead, and one with a pending cancel request ends cancelled.
 * *outcome says which; row gets the job's id, model name, status, progress
 * and attempts. */
int gp_store_job_claim(gp_store *store, const char *owner, double now, double lease_until,
                       int max_attempts, const char *gave_up_error, gp_job_row *row,
                       int *outcome, gp_error *err);

/* What gp_store_job_cancel did to a job this process does not hold. */
enum gp_job_cancel_outcome {
    GP_JOB_CANCEL_ENDED = 1,     /* already finished: row->status says how */
    GP_JOB_CANCELLED_NOW,        /* nobody held it alive (lease expired): cancelled */
    GP_JOB_CANCEL_REQUESTED      /* its holder will cancel it at its next lease renewal */
};
/* DELETE of a job from any daemon. Unknown id: GP_ENOTFOUND field "id". */
int gp_store_job_cancel(gp_store *store, const char *id, double now, gp_job_row *row,
                        int *outcome, gp_error *err);

/* The active jobs' (id, owner) pairs whose owner starts with prefix, for a
 * daemon that reclaims its own dead jobs at start-up (*held malloc'ed). */
typedef struct gp_job_owner {
    char id[GP_JOB_ID_LEN];
    char owner[GP_JOB_OWNER_LEN];
} gp_job_owner;
int gp_store_job_owned(gp_store *store, const char *prefix, gp_job_owner **jobs, size_t *count,
                       gp_error *err);
/* Expire the lease of a job owner holds (its holder is known dead): the next
 * claim takes it. */
int gp_store_job_expire(gp_store *store, const char *id, const char *owner, gp_error *err);

/* Delete up to 1000 ended jobs (succeeded, failed, cancelled) last updated
 * before `before` (ISO 8601 UTC, as updated_at); *deleted says how many. */
int gp_store_job_prune(gp_store *store, const char *before, size_t *deleted, gp_error *err);

/* A model saved as the result of a durable job: gp_store_save_job saves the
 * model and ends the job succeeded in the same transaction, so that a crash
 * leaves either both or neither (a job that ran again would add a second
 * version). result(meta, ctx) makes the job's result text (malloc'ed) from the
 * new row; GP_ECONFLICT when owner no longer holds the job (nothing saved). */
typedef char *(*gp_job_result_fn)(const gp_model_meta *meta, void *ctx);
typedef struct gp_job_done {
    const char *id;
    const char *owner;
    const char *progress; /* the job's final progress text */
    gp_job_result_fn result;
    void *ctx;
} gp_job_done;

int gp_store_save_job(gp_store *store, const char *name, const char *method, const char *spec,
                      const char *info, size_t n_train, size_t input_dim, const gp_state *state,
                      const gp_job_done *job, gp_model_meta *meta, gp_error *err);

/* ---- online models: the observation log and snapshots ----
 * A model version that learns online (POST .../observe) keeps, beside its
 * fitted arrays, an append-only log of the accepted batches: entry seq
 * 1, 2, ... holds the rows of one request (arrays "X", k x input width, and
 * "y", k x outputs, in the parts scheme of `arrays`; the store keeps whatever
 * named arrays it is given, at least one), and the models row counts them
 * (obs_seq) and the rows the model holds (n_train). Now and then the whole
 * model state after entry s is written as the version's snapshot (one per
 * version: a newer one replaces the older), so that a load reads the snapshot
 * and replays only the entries after it. The log itself is kept (it is the
 * data a re-fit needs) until the version is deleted (gp_store_delete: the
 * cascade removes log and snapshot with the row). docs/design/storage.md,
 * "Observation log and snapshots", has the costs and what is durable when. */

/* Append one batch to version model_id's log in one transaction, as entry
 * expected_seq + 1, and set the row's obs_seq and n_train (n_after). When
 * snapshot is not NULL it becomes the version's snapshot, at the new entry,
 * in the same transaction (the previous one is deleted in it). GP_ECONFLICT
 * (field "name") when the row's obs_seq is not expected_seq (another writer
 * appended first: catch up and retry); GP_ENOTFOUND (field "name") when the
 * row is gone. GP_EINVAL, before any write: batch NULL or without arrays
 * (field "batch"), snapshot without arrays (field "snapshot"), an array with
 * count > 0 and no data (field = its name), expected_seq or n_after out of
 * range. On any failure nothing is written (the log, the row and the previous
 * snapshot are as they were). Once it returns GP_OK the entry is on disk
 * (durability full; with normal it survives a crash of the process, and a
 * power loss once the WAL is next synced). *seq (may be NULL) gets the new
 * entry's number (0 on failure). */
int gp_store_observe(gp_store *store, int64_t model_id, uint64_t expected_seq,
                     const gp_state *batch, size_t n_after, const gp_state *snapshot,
                     uint64_t *seq, gp_error *err);

/* The version's snapshot, if any: its arrays appended to state (initialised
 * by the caller; GP_EINVAL on a name clash) and *seq (may be NULL) its entry;
 * none: state untouched, *seq 0. Read in one snapshot of the file on the
 * reader. Unknown row: GP_ENOTFOUND field "name". A missing, short or
 * mis-shaped part: GP_EDATA with field = the array's name; rows that disagree
 * on their entry, or an entry past the row's obs_seq: GP_EDATA field
 * "snapshot". On failure state is unchanged. */
int gp_store_load_snapshot(gp_store *store, int64_t model_id, gp_state *state, uint64_t *seq,
                           gp_error *err);

/* Call fn for every log entry after `after` up to and including `upto`, in
 * order, with its arrays ("X" and "y" in batch, owned by the store for the
 * call). fn returns 0 to go on, or an error code, which is returned. The
 * entries are read in one snapshot of the file (what is appended or deleted
 * meanwhile does not change them), one entry in memory at a time, on the log
 * reader: fn may call the store's other functions, not gp_store_observations
 * on the same store (nor any function of an in-memory store, whose one
 * connection the replay holds). Unknown row: GP_ENOTFOUND field "name";
 * after > upto, or upto past the row's obs_seq: GP_EINVAL field "after" /
 * "upto"; a missing entry in the range: GP_EDATA field "seq"; a missing,
 * short or mis-shaped part: GP_EDATA with field = the array's name. The
 * entries before the failing one have been given to fn. */
typedef int (*gp_observation_fn)(void *ctx, uint64_t seq, const gp_state *batch,
                                 gp_error *err);
int gp_store_observations(gp_store *store, int64_t model_id, uint64_t after, uint64_t upto,
                          gp_observation_fn fn, void *ctx, gp_error *err);

/* ---- idempotency keys (store_idem.c) ----
 * The answer of a write sent with an idempotency key, kept so that a retry of
 * the write answers it again instead of writing twice: a row per (scope, key)
 * with a fingerprint of the request, the answer's status and body, and when
 * it was made. The store gives these no meaning (the api chooses scopes,
 * fingerprints and statuses: docs/design/api.md, "Idempotent writes"); it
 * writes the row in the same transaction as the write it answers
 * (gp_store_save_keyed, gp_store_job_create_keyed, gp_store_observe_keyed),
 * so that the write and its row are both kept or neither, whatever process
 * (of several sharing the database) made them. */
#define GP_IDEM_KEY_MAX 255
#define GP_IDEM_SCOPE_MAX 127
#define GP_IDEM_FINGERPRINT_MAX 127
/* err->field of the GP_ECONFLICT a keyed write answers when (scope, key) was
 * recorded already (by a retry that ran side by side with this one, here or
 * in another process): nothing was written; gp_store_idem_get reads the
 * answer recorded. */
#define GP_STORE_KEY_TAKEN "idempotency_key"

/* A keyed write's row: body is the answer, or NULL for a save, whose answer
 * body(meta, ctx) makes from the new row (malloc'ed text; NULL: out of
 * memory) inside the transaction. */
typedef struct gp_idem_put {
    const char *scope;       /* 1..GP_IDEM_SCOPE_MAX characters */
    const char *key;         /* 1..GP_IDEM_KEY_MAX characters */
    const char *fingerprint; /* 1..GP_IDEM_FINGERPRINT_MAX characters */
    int status;
    const char *body;
    gp_job_result_fn make_body;
    void *ctx;
} gp_idem_put;

/* A recorded answer. */
typedef struct gp_idem_row {
    char fingerprint[GP_IDEM_FINGERPRINT_MAX + 1];
    int status;
    char *body; /* owned */
    char created_at[GP_TIME_LEN];
} gp_idem_row;

void gp_idem_row_free(gp_idem_row *row); /* frees body */
/* The answer recorded for (scope, key), read on a reader. None: GP_ENOTFOUND
 * (field "key"). */
int gp_store_idem_get(gp_store *store, const char *scope, const char *key, gp_idem_row *row,
                      gp_error *err);
/* Delete up to 1000 rows made before `before` (ISO 8601 UTC); *deleted says
 * how many. */
int gp_store_idem_prune(gp_store *store, const char *before, size_t *deleted, gp_error *err);

/* gp_store_save_job, gp_store_job_create and gp_store_observe with the row
 * of idem (NULL: none, which is what those functions are) written in their
 * transaction. GP_EINVAL (field "key" / "scope" / "fingerprint") for a text
 * out of its range, before any write; GP_ECONFLICT with field
 * GP_STORE_KEY_TAKEN when (scope, key) is recorded already: nothing written. */
int gp_store_save_keyed(gp_store *store, const char *name, const char *method, const char *spec,
                        const char *info, size_t n_train, size_t input_dim,
                        const gp_state *state, const gp_job_done *job, const gp_idem_put *idem,
                        gp_model_meta *meta, gp_error *err);
int gp_store_job_create_keyed(gp_store *store, const gp_job_row *job, const char *spec,
                              const gp_state *data, const char *owner, double lease_until,
                              const gp_idem_put *idem, gp_error *err);
int gp_store_observe_keyed(gp_store *store, int64_t model_id, uint64_t expected_seq,
                           const gp_state *batch, size_t n_after, const gp_state *snapshot,
                           const gp_idem_put *idem, uint64_t *seq, gp_error *err);
/* gp_store_observe_keyed that returns once the entry is committed, before it is
 * on disk: the caller may release its own locks (so that the next writers
 * commit and share the sync) and must call gp_store_wait_durable(*ticket)
 * before it acknowledges the entry. */
int gp_store_observe_deferred(gp_store *store, int64_t model_id, uint64_t expected_seq,
                              const gp_state *batch, size_t n_after, const gp_state *snapshot,
                              const gp_idem_put *idem, uint64_t *seq, uint64_t *ticket,
                              gp_error *err);
/* Return once the commit numbered ticket is on disk (at once for ticket 0,
 * with durability normal, or on PostgreSQL); GP_EINTERNAL (GP_ESTORAGE) when
 * the sync failed: the write is committed but may not survive a power loss. */
int gp_store_wait_durable(gp_store *store, uint64_t ticket, gp_error *err);

/* ---- the audit trail (store_audit.c; docs/design/storage.md, "The audit
 * trail") ----
 * One row per write: who (the key's name, NULL while keys have none), when
 * (set by the store), which route, model and version, the outcome (HTTP
 * status, and the catalogue's code when refused) and the request id. The
 * *_audited writes below insert it in their own transaction, so a crash
 * keeps the write and its row or neither; gp_store_audit_add inserts one
 * alone (a refused write, which wrote nothing to go with it). Texts longer
 * than the row's fields are cut (an audit row never refuses a write). */
#define GP_AUDIT_ROUTE_MAX 63
#define GP_AUDIT_CODE_MAX 31
#define GP_AUDIT_REQUEST_ID_MAX 64
typedef struct gp_audit_put {
    const char *key_name;   /* NULL: auth off, or keys without names */
    const char *route;      /* "DELETE /v1/models/{name}" */
    const char *model;      /* NULL: none (a job cancel of a job not known here) */
    int version;            /* 0: none; a save records the version it made */
    int status;             /* HTTP status of the outcome */
    const char *code;       /* the catalogue's code when refused, else NULL */
    const char *request_id; /* X-Request-Id */
    const char *job_id;     /* an async fit's job, else NULL */
} gp_audit_put;

typedef struct gp_audit_row {
    int64_t id;
    char at[GP_TIME_LEN];
    char key_name[GP_NAME_MAX + 1]; /* "" when NULL (has_key 0) */
    int has_key;
    char route[GP_AUDIT_ROUTE_MAX + 1];
    char model[GP_NAME_MAX + 1];    /* "" when none */
    int version;                    /* 0 when none */
    int status;
    char code[GP_AUDIT_CODE_MAX + 1]; /* "" when none */
    char request_id[GP_AUDIT_REQUEST_ID_MAX + 1];
    char job_id[GP_JOB_ID_LEN];
} gp_audit_row;

/* A page of the trail: newest first, ids below cursor (0: from the newest),
 * or with ascending oldest first, ids above cursor; model, key_name and
 * since (ISO 8601 UTC, at >= since) filter when not NULL. */
typedef struct gp_audit_query {
    int64_t cursor;
    int ascending;
    const char *model, *key_name, *since;
    size_t limit; /* 1..1000 */
} gp_audit_query;
/* *rows malloc'ed (NULL when none), *more 1 when rows past the page match. */
int gp_store_audit_list(gp_store *store, const gp_audit_query *q, gp_audit_row **rows,
                        size_t *count, int *more, gp_error *err);
/* One row in a transaction of its own. */
int gp_store_audit_add(gp_store *store, const gp_audit_put *a, gp_error *err);
/* Delete up to 1000 rows made before `before` (ISO 8601 UTC). */
int gp_store_audit_prune(gp_store *store, const char *before, size_t *deleted, gp_error *err);

/* The writes with their audit row (audit NULL: none, which is what the
 * functions without the suffix are). */
int gp_store_save_audited(gp_store *store, const char *name, const char *method,
                          const char *spec, const char *info, size_t n_train, size_t input_dim,
                          const gp_state *state, const gp_job_done *job,
                          const gp_idem_put *idem, const gp_audit_put *audit,
                          gp_model_meta *meta, gp_error *err);
int gp_store_job_create_audited(gp_store *store, const gp_job_row *job, const char *spec,
                                const gp_state *data, const char *owner, double lease_until,
                                const gp_idem_put *idem, const gp_audit_put *audit,
                                gp_error *err);
int gp_store_job_finish_audited(gp_store *store, const gp_job_row *job, const char *owner,
                                const gp_audit_put *audit, gp_error *err);
int gp_store_observe_audited(gp_store *store, int64_t model_id, uint64_t expected_seq,
                             const gp_state *batch, size_t n_after, const gp_state *snapshot,
                             const gp_idem_put *idem, const gp_audit_put *audit, uint64_t *seq,
                             uint64_t *ticket, gp_error *err);
int gp_store_alias_set_audited(gp_store *store, const char *name, const char *alias, int version,
                               const char *by, const gp_audit_put *audit, gp_alias_row *row,
                               gp_error *err);
int gp_store_alias_delete_audited(gp_store *store, const char *name, const char *alias,
                                  const gp_audit_put *audit, gp_error *err);
int gp_store_delete_audited(gp_store *store, const char *name, const gp_audit_put *audit,
                            gp_error *err);
int gp_store_delete_version_audited(gp_store *store, const char *name, int version,
                                    const gp_audit_put *audit, gp_error *err);

/* ---- data sets (store_datasets.c; docs/design/storage.md, "Data sets") ----
 * A named table of float64 columns, uploaded in parts as its rows arrive
 * (PUT /v1/datasets/{name}) and read back in chunks by the fits that name it.
 * An upload is a row of its own in state `uploading`, seen by nothing but
 * the upload (not by get, list or the fits) and holding the parts written so
 * far; gp_store_dataset_finish makes it `ready` in one transaction that also
 * deletes the ready data set of the same name it replaces. An upload that
 * does not finish is deleted with its parts: at once by
 * gp_store_dataset_abort (a dropped connection, a refused row), else by
 * gp_store_dataset_prune_uploads once it has shown no sign of life for a
 * while (its daemon died). Part p holds rows p * GP_STORE_DATASET_PART_ROWS
 * onwards, GP_STORE_DATASET_PART_ROWS of them but in the last part, so one
 * chunk of a fit's reader is one part. A data set in use (a queued or
 * running async job names it, or a fit holds a reader lease on it) is not
 * deleted or replaced: GP_ECONFLICT naming who uses it. Times called `now`
 * and leases are Unix seconds of the caller's clock, as the jobs' leases. */
#define GP_STORE_DATASET_PART_ROWS 4096

typedef struct gp_dataset_row {
    int64_t id;
    char name[GP_NAME_MAX + 1];
    char state[16];          /* "uploading" | "ready" */
    uint64_t n_rows;
    size_t n_cols;
    char *columns;           /* owned: the caller's JSON text (names, statistics) */
    char sha256[65];         /* hex digest of the bytes received ("" while uploading) */
    uint64_t bytes;          /* bytes of its parts' float64 data (what the quota counts) */
    uint64_t bytes_received; /* bytes of the upload's body */
    char created_at[GP_TIME_LEN];
    char created_by[GP_NAME_MAX + 1]; /* "" when not known */
} gp_dataset_row;

void gp_dataset_row_free(gp_dataset_row *row);           /* frees columns */
void gp_dataset_row_free_array(gp_dataset_row *rows, size_t count); /* and the array */

/* Start an upload of data set name (1..GP_NAME_MAX characters; GP_EINVAL
 * field "name") with n_cols columns described by columns (text kept until
 * the finish replaces it): *id is its row, in state uploading. */
int gp_store_dataset_begin(gp_store *store, const char *name, size_t n_cols, const char *columns,
                           const char *created_by, double now, int64_t *id, gp_error *err);
/* Append part `part` of an upload: rows x cols float64 column-major, the
 * data set's rows part * GP_STORE_DATASET_PART_ROWS onwards (rows <=
 * GP_STORE_DATASET_PART_ROWS; the parts come in order and only the last may
 * be short). One transaction, committed but not waited on to reach the disk
 * (gp_store_dataset_finish waits for every commit before it). GP_ESTORAGE
 * field "dataset" when quota_bytes > 0 and the bytes of every data set
 * (uploads included) would pass it; GP_ENOTFOUND field "dataset" when the
 * upload is gone (pruned); GP_EINVAL for a part out of order or of another
 * width. Nothing is written on failure. */
int gp_store_dataset_put_part(gp_store *store, int64_t id, uint64_t part, size_t rows,
                              size_t cols, const double *data, uint64_t quota_bytes, double now,
                              gp_error *err);
/* An upload's sign of life between parts (so that a slow one is not taken
 * for abandoned). GP_ENOTFOUND when the upload is gone. */
int gp_store_dataset_touch(gp_store *store, int64_t id, double now, gp_error *err);
/* What the last transaction of an upload records. */
typedef struct gp_dataset_done {
    uint64_t n_rows;          /* every row written (the parts must hold exactly these) */
    const char *columns;      /* the final description (names and statistics) */
    const char *sha256;       /* 64 hex digits of the body */
    uint64_t bytes_received;
} gp_dataset_done;
/* Make upload id ready, replacing (deleting) the ready data set of its name
 * if any, in one transaction with the audit row (may be NULL); durable when
 * it returns. *replaced 1 when one was replaced; row (may be NULL) gets the
 * ready row. GP_ECONFLICT field "name" when the data set it would replace is
 * in use (nothing changes: the upload stays, for the caller to abort);
 * GP_ENOTFOUND when the upload is gone; GP_EDATA when its parts do not hold
 * done->n_rows rows. */
int gp_store_dataset_finish(gp_store *store, int64_t id, const gp_dataset_done *done, double now,
                            const gp_audit_put *audit, int *replaced, gp_dataset_row *row,
                            gp_error *err);
/* Delete upload id and its parts (an upload only: a ready data set is
 * never touched here). An upload already gone is GP_OK. */
int gp_store_dataset_abort(gp_store *store, int64_t id, gp_error *err);
/* The ready data set of name; GP_ENOTFOUND field "name" when there is none. */
int gp_store_dataset_get(gp_store *store, const char *name, gp_dataset_row *row, gp_error *err);
/* The data set row id, ready; GP_ENOTFOUND field "dataset" otherwise (an
 * upload, or deleted). */
int gp_store_dataset_get_id(gp_store *store, int64_t id, gp_dataset_row *row, gp_error *err);
/* Every ready data set by name (*rows malloc'ed, NULL when none). */
int gp_store_dataset_list(gp_store *store, gp_dataset_row **rows, size_t *count, gp_error *err);
/* Is the ready data set of name, or one replacing it, in use? 0 when not,
 * else GP_ECONFLICT (field "name") naming the job or the fit that uses it;
 * GP_ENOTFOUND when there is no ready data set of the name (GP_OK then
 * with missing_ok). */
int gp_store_dataset_check_unused(gp_store *store, const char *name, double now, int missing_ok,
                                  gp_error *err);
/* Delete the ready data set of name and its parts, with the audit row (may
 * be NULL). GP_ENOTFOUND field "name"; GP_ECONFLICT field "name" while in
 * use (a queued or running job names it, or a reader lease holds at now). */
int gp_store_dataset_delete(gp_store *store, const char *name, double now,
                            const gp_audit_put *audit, gp_error *err);
/* Rows [first, first + count) of ready data set id, the columns cols[0 ..
 * n), into out[j][0 .. count) for column cols[j]: one statement (one
 * snapshot, no lock held after it returns) over the parts that hold them.
 * GP_EINVAL for a column or a row out of range; GP_EDATA for parts missing
 * or of the wrong shape. The values are not checked (the caller does). */
int gp_store_dataset_read(gp_store *store, int64_t id, uint64_t n_rows, uint64_t first,
                          size_t count, const size_t *cols, size_t n, double *const *out,
                          gp_error *err);
/* A fit's lease on ready data set id (token: 1..GP_JOB_ID_LEN - 1
 * characters, unique; label says who, for the 409 of a delete), until
 * lease_until: the data set is not deleted or replaced while it holds.
 * GP_ENOTFOUND field "dataset" when the data set is no longer ready. */
int gp_store_dataset_reader_add(gp_store *store, int64_t id, const char *token, const char *label,
                                double lease_until, gp_error *err);
int gp_store_dataset_reader_renew(gp_store *store, const char *token, double lease_until,
                                  gp_error *err);
int gp_store_dataset_reader_drop(gp_store *store, const char *token, gp_error *err);
/* Delete up to 100 uploads untouched since before (their daemon died, or
 * never finished them) with their parts, and the reader leases expired
 * before `before`; *deleted counts the uploads. */
int gp_store_dataset_prune(gp_store *store, double before, size_t *deleted, gp_error *err);

/* ---- studies and trials (store_studies.c, store_trials.c;
 * docs/design/storage.md, "Studies and trials") ----
 * A study is the api's JSON text of a search space, objective and settings
 * (config, given no meaning here) with its trials: the suggestions made
 * (ids 1, 2, ... within the study), each active until completed (metrics),
 * found infeasible, or expired (its client stopped renewing it). The study
 * row counts what happened: `revision` is bumped by every write to its
 * trials (an insert, a completion, an expiry; not a renewal), so an insert
 * made at the revision a suggestion was computed from fails when anything
 * changed meanwhile (optimistic: the caller computes again); `seq` numbers
 * the completions 1, 2, ... in the order they commit, with no gap, so a
 * reader always sees a prefix of the completions and every replica derives
 * the same models from the same prefix. Times called now, expires_at and the
 * trial's created/updated are Unix seconds of the caller's clock, as the
 * jobs' leases. The writes take an audit row (gp_audit_put, NULL: none) in
 * their own transaction, as the *_audited writes above. */
#define GP_STUDY_CLIENT_MAX 128
typedef struct gp_study_row {
    int64_t id;              /* never given out again (a study made anew has another id) */
    char name[GP_NAME_MAX + 1];
    char *config;            /* owned: the api's JSON text of the study (space, objective, ...) */
    uint64_t revision;       /* bumped by every write to the study's trials */
    uint64_t n_trials;       /* trials made (ids 1..n_trials) */
    uint64_t n_completed;    /* completions so far (= the last seq), infeasible included */
    uint64_t refit_n;        /* the largest n a refit was claimed for (0: none) */
    char created_at[GP_TIME_LEN];
    char created_by[GP_NAME_MAX + 1]; /* "" when not known */
} gp_study_row;
typedef struct gp_trial_row {
    int64_t id;              /* 1, 2, ... within its study */
    char state[16];          /* "active" | "completed" | "infeasible" | "expired" */
    char *parameters;        /* owned JSON text (the api's: {"x0": 0.3, ...}) */
    char *metrics;           /* owned JSON text or NULL while active */
    char *reason;            /* owned or NULL: an infeasible trial's reason */
    char client_id[GP_STUDY_CLIENT_MAX + 1]; /* "" when none (or expired) */
    uint64_t seq;            /* completion order (1..), 0 while active or expired */
    double created, updated, expires_at; /* Unix seconds (caller's clock) */
} gp_trial_row;
void gp_study_row_free(gp_study_row *r);                   /* frees config, not r */
void gp_study_row_free_array(gp_study_row *r, size_t n);   /* and the array */
void gp_trial_row_free(gp_trial_row *r);                   /* frees the texts, not r */
void gp_trial_row_free_array(gp_trial_row *r, size_t n);   /* and the array */
/* A new study (name: 1..GP_NAME_MAX characters, GP_EINVAL field "name";
 * config not NULL, GP_EINVAL field "config"); created_by NULL or "": not
 * known. GP_ECONFLICT field "name" when a study of the name exists; *out
 * (may be NULL) filled (revision 0, no trials). */
int gp_store_study_create(gp_store *s, const char *name, const char *config, const char *created_by,
                          double now, const gp_audit_put *audit, gp_study_row *out,
                          gp_error *err);
/* GP_ENOTFOUND field "name" when there is no such study. */
int gp_store_study_get(gp_store *s, const char *name, gp_study_row *out, gp_error *err);
/* Every study by name (*rows malloc'ed, NULL when none). */
int gp_store_study_list(gp_store *s, gp_study_row **rows, size_t *n, gp_error *err);
/* The study and its trials in one transaction (GP_ENOTFOUND field "name");
 * nothing else: the api deletes the study's models. */
int gp_store_study_delete(gp_store *s, const char *name, const gp_audit_put *audit,
                          gp_error *err);
/* The study and all its trials (ordered by id; *trials malloc'ed, NULL when
 * none) read in one transaction: a consistent snapshot (the completions a
 * prefix of seq, n_trials the trials read). GP_ENOTFOUND field "name". */
int gp_store_study_snapshot(gp_store *s, const char *name, gp_study_row *study, gp_trial_row **trials,
                            size_t *n, gp_error *err);
/* Trial id of study study_id: GP_ENOTFOUND field "trial" when the study has
 * no such trial (or the study is gone). */
int gp_store_trial_get(gp_store *s, int64_t study_id, int64_t id, gp_trial_row *out,
                       gp_error *err);
typedef struct gp_trial_new { const char *parameters; } gp_trial_new;
/* One transaction: GP_ECONFLICT (field NULL, message "study changed") unless
 * the study's revision is still `revision`; then q trials (q >= 1, each
 * parameters not NULL) get ids n_trials+1.., state active, client_id (NULL
 * or "": none; at most GP_STUDY_CLIENT_MAX characters, GP_EINVAL field
 * "client_id"), created now, expires_at; the revision is bumped once;
 * ids_out[q] filled. GP_ENOTFOUND field "study" when the study is gone.
 * Nothing written on failure. Two inserts at one revision, from any
 * connections: exactly one commits. */
int gp_store_trials_add(gp_store *s, int64_t study_id, uint64_t revision, const char *client_id,
                        const gp_trial_new *trials, size_t q, double now, double expires_at,
                        const gp_audit_put *audit, int64_t *ids_out, gp_error *err);
/* A client's heartbeat: its active trials' expires_at set to expires_at (no
 * revision bump); *renewed (may be NULL) gets how many. Committed, not
 * waited on to reach the disk (a lost heartbeat is mended by the next).
 * GP_EINVAL field "client_id" for an empty or too long client. */
int gp_store_trials_renew(gp_store *s, int64_t study_id, const char *client_id, double expires_at,
                          size_t *renewed, gp_error *err);
/* Complete trial `id`: GP_ENOTFOUND field "trial" when the study has no such
 * trial; GP_ECONFLICT field "trial" when it is not active (naming its
 * state). state "completed" (metrics JSON, not NULL) or "infeasible"
 * (metrics may be NULL, reason may be NULL); GP_EINVAL field "state" or
 * "metrics" otherwise. seq = n_completed + 1 (the study row is updated first:
 * concurrent completions get 1, 2, ... and commit in that order); revision
 * bumped; *seq_out (may be NULL) and *study_after (may be NULL; the row as
 * this transaction left it) filled. One transaction; nothing written on
 * failure. */
int gp_store_trial_complete(gp_store *s, int64_t study_id, int64_t id, const char *state,
                            const char *metrics, const char *reason, double now,
                            const gp_audit_put *audit, uint64_t *seq_out,
                            gp_study_row *study_after, gp_error *err);
/* Expire every active trial with expires_at < now (all studies; up to 1000
 * studies a call): state expired, client cleared, parameters kept; each
 * study's revision bumped once. *expired (may be NULL) counts the trials. */
int gp_store_trials_expire(gp_store *s, double now, size_t *expired, gp_error *err);
/* Claim the refit at n: 1 in *claimed when refit_n < n (and sets it to n),
 * 0 when someone claimed n or more. GP_ENOTFOUND field "study" when the
 * study is gone. No revision bump (the trials are unchanged). */
int gp_store_study_refit_claim(gp_store *s, int64_t study_id, uint64_t n, int *claimed,
                               gp_error *err);

/* Largest blob of one `arrays` row (256 MiB): a larger array is split into
 * parts of this size (see the schema above). Kept below SQLite's length limit
 * (SQLITE_LIMIT_LENGTH, 1e9 by default, which covers a whole row). */
#define GP_STORE_PART_BYTES ((size_t)256 << 20)

/* Test hook: split arrays into parts of `bytes` (rounded down to a multiple of
 * 8, at least 8, at most what the back end allows: SQLite's length limit,
 * PostgreSQL's 1 GB field; 0 restores GP_STORE_PART_BYTES) for this handle's
 * later writes of arrays (saves, job requests, log entries, snapshots).
 * Loading accepts parts of any sizes (multiples of 8) that add up. */
void gp_store_set_part_bytes(gp_store *store, size_t bytes);

/* ---- the change generation (store_watch.c; docs/design/storage.md, "The
 * change generation") ----
 * A number that changes whenever what the read functions return may have
 * changed, so that a caller may keep rows it read, tagged with the
 * generation read BEFORE it read them, and use them while
 * gp_store_generation still answers that tag. This handle's saves, deletes,
 * log appends and alias writes change it before they return (committed or failed; job
 * writes do not, they change no model row); another
 * connection's commits (another daemon on the same database, an operator's
 * SQL) change it within GP_STORE_WATCH_MS of the commit, plus the time the
 * watch thread waits for a CPU: SQLite's PRAGMA data_version polled every
 * GP_STORE_WATCH_MS on a connection of the watch's own; PostgreSQL's
 * notifications (saves, deletes, log appends and alias writes NOTIFY in their
 * transaction;
 * the watch LISTENs), delivered as they commit. */
#define GP_STORE_WATCH_MS 5
/* How long the watch waits before it opens its connection again after a loss. */
#define GP_STORE_WATCH_RETRY_MS 100
/* Start the watch (a thread and one more connection; an in-memory store
 * needs neither). Idempotent; stopped by gp_store_close. */
int gp_store_watch_start(gp_store *store, gp_error *err);
/* The current generation, never 0 while the watch is up; 0 when it is not
 * (not started, or its connection lost and not yet made again): nothing
 * kept may then be trusted, ask the store. */
uint64_t gp_store_generation(gp_store *store);

/* Current UTC time as ISO 8601 with seconds ("2026-11-21T06:12:20Z"). */
void gp_store_now(char out[GP_TIME_LEN]);

/* ---- backups of a SQLite file (sqlite_backup.c) ---- */
/* Copy the live database db_path to out_path (replaced whole, never left
 * partial) with SQLite's online backup API, in steps that do not hold the
 * writers back. GP_ENOTFOUND (no database), GP_EDATA (not a gpserve
 * database), GP_EUNSUPPORTED (a PostgreSQL URL: pg_dump), GP_ESTORAGE. */
int gp_store_sqlite_backup(const char *db_path, const char *out_path, gp_error *err);
/* Put the backup from_path into db_path (created if missing), in WAL mode.
 * GP_ECONFLICT when a daemon (any SQLite connection) holds db_path open. */
int gp_store_sqlite_restore(const char *db_path, const char *from_path, gp_error *err);
/* 1 when some process has the WAL database db_path open (its -shm lock). */
int gp_store_sqlite_held(const char *db_path);

#endif
