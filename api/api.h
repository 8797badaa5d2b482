/* gpserve api: requests <-> core/store, with no knowledge of sockets or HTTP
 * libraries. The server hands over a request's body, content type and query
 * parameters; the api parses and validates them (jansson), calls core and the
 * store, and fills a gp_response: a status code, a content type and a body.
 *
 * Every error, whatever the route, has one JSON shape and one status from the
 * error catalogue (docs/design/api.md):
 *   {"error": {"code": "invalid_argument", "message": "...", "field": "X[3]"}}
 * (field omitted when empty). JSON never carries NaN or Inf; numbers are
 * written with 17 significant digits.
 *
 * A gp_api is safe to use from many threads at once: models are immutable once
 * fitted, the model cache is locked and reference counted, and the store
 * serialises its own calls. */
#ifndef GP_API_H
#define GP_API_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/error.h"
#include "core/model/model.h"

/* ---- configuration (flags / environment, set once at start-up) ---- */
typedef struct gp_api_config {
    const char *db_path;          /* SQLite file or postgresql:// URL; default "./gpserve.db" */
    size_t max_train_points;      /* N cap of methods that build N x N matrices; default 20000 */
    size_t max_points;            /* rows of X in one fit/predict/sample request; default 1000000 */
    size_t max_input_dim;         /* input columns of a fit; default 1000 */
    size_t max_covariance_points; /* points of a full_covariance or sample request; default 5000 */
    size_t max_samples;           /* n_samples of one sample request; default 10000 */
    size_t max_sample_values;     /* n_samples x points of one sample request; default 10000000 */
    size_t model_cache;           /* fitted models kept in memory (LRU); default 32 */
    size_t snapshot_interval;     /* observe: log entries between snapshots; default 10000 */
    int durability_normal;        /* 1: writes answered once committed, not once synced to disk
                                     (gp_store_set_durability); default 0 */
    int max_ranks;                /* the most processes of a "distributed" fit; default 16 */
    uint64_t dataset_quota_bytes; /* bytes every data set together may hold (uploads
                                     included); 0: no quota; default 10 GiB */
} gp_api_config;

void gp_api_default_config(gp_api_config *cfg);

typedef struct gp_api gp_api;

/* Open the store at cfg->db_path. The config is copied; a zero limit (or a
 * NULL db_path) means its default. */
int gp_api_open(const gp_api_config *cfg, gp_api **out, gp_error *err);
void gp_api_close(gp_api *api);
/* 1 when the store is open and answers. */
int gp_api_ready(gp_api *api);
/* db (a db_path) as it may be logged: a PostgreSQL URL's password hidden. */
void gp_api_redact_db(const char *db, char *out, size_t size);
/* `gpserve backup` / `gpserve restore` of a SQLite database file (the store's
 * gp_store_sqlite_backup / gp_store_sqlite_restore; a PostgreSQL URL is
 * GP_EUNSUPPORTED: pg_dump / pg_restore). Restore is GP_ECONFLICT while a
 * daemon holds db. */
int gp_api_backup(const char *db, const char *out_file, gp_error *err);
int gp_api_restore(const char *db, const char *from_file, gp_error *err);

/* ---- requests and responses ---- */
typedef struct gp_query_param {
    const char *key;
    const char *value;
} gp_query_param;

typedef struct gp_request {
    const char *content_type; /* the Content-Type header (may carry "; charset=..."), or NULL */
    const char *body;         /* not NUL-terminated; may be NULL when body_len is 0 */
    size_t body_len;
    const gp_query_param *query; /* URL query parameters, already percent-decoded */
    size_t n_query;
    /* The Idempotency-Key header of a fit or observe, or NULL (docs/design/api.md,
     * "Idempotent writes"). */
    const char *idempotency_key;
    /* Who and what, for the audit trail of a write (docs/design/api.md, "The
     * audit trail"): route NULL (a call not from the server) records nothing. */
    const char *key_name; /* the authenticated key's name; NULL when auth is off */
    const char *request_id; /* X-Request-Id (server/access_log.c makes it) */
    const char *route;      /* "METHOD /pattern" of server/routes.def */
} gp_request;

#define GP_RESPONSE_MAX_HEADERS 6

typedef struct gp_header {
    char name[32];
    char value[160];
} gp_header;

typedef struct gp_response {
    int status;               /* HTTP status code */
    const char *content_type; /* static string, e.g. "application/json" */
    char *body;               /* owned (malloc'ed), body_len bytes; NULL for an empty body */
    size_t body_len;
    /* extra headers: Allow, Retry-After, Location; the browser view's caching and security */
    gp_header headers[GP_RESPONSE_MAX_HEADERS];
    size_t n_headers;
} gp_response;

/* Add "request_id": rid to the catalogue's error object of res (a body
 * {"error":{...}}); any other body is left alone. rid holds no character
 * JSON escapes (server/access_log.h). */
void gp_api_error_request_id(gp_response *res, const char *rid);
/* The model version an answer of predict, sample, observe or OIP infer names
 * in its head ({"name":..,"version":N or {"model_name":..,"model_version":"N"),
 * or 0: the access log's version when the request named none (the latest)
 * or an alias. */
int gp_api_answered_version(const char *body, size_t len);
void gp_response_free(gp_response *res);
/* Add an extra header (ignored past GP_RESPONSE_MAX_HEADERS). */
void gp_response_header(gp_response *res, const char *name, const char *value);

/* The catalogue: status of a GP_E* code, and the error response for err. */
int gp_api_http_status(int code); /* GP_ECANCELLED and unknown codes: 500 */
void gp_api_error(const gp_error *err, gp_response *out);
/* Shortcut: error response from a code, field and message. */
void gp_api_fail(gp_response *out, int code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* 1 when name matches [A-Za-z0-9._-]{1,64}. */
int gp_api_valid_name(const char *name);
/* 1 when alias is a valid version alias: [A-Za-z][A-Za-z0-9_.-]{0,63} (a
 * letter first, so that it is never a version number). */
int gp_api_valid_alias(const char *alias);
/* The version that alias of model name points at, into *version. 404
 * field "name" (no such model) or "version" (no such alias); err says which. */
int gp_api_resolve_alias(gp_api *api, const char *name, const char *alias, int *version,
                         gp_error *err);

/* ---- route handlers: each fills *out, errors included ----
 * *out must start zeroed (or freed by gp_response_free): a handler frees any
 * body already there before it writes its own. */
void gp_api_health(gp_response *out);                 /* 200 {"status":"ok"} */
void gp_api_readiness(gp_api *api, gp_response *out); /* 200 {"status":"ready"} or 503 */
void gp_api_openapi(gp_response *out);                /* the OpenAPI 3 document (YAML) */
/* A file of the browser view (web/, embedded at build time) by its path
 * under web/ ("index.html" for GET /): 200 with its bytes, content type,
 * ETag, Cache-Control: no-cache, X-Content-Type-Options: nosniff and the
 * page's Content-Security-Policy; 304 without a body when if_none_match
 * (the request's If-None-Match, or NULL) names its ETag; 404 not_found for
 * a path no file has. */
void gp_api_ui_asset(const char *path, const char *if_none_match, gp_response *out);
/* The Content-Type the browser view serves a file of this path with. */
const char *gp_api_ui_content_type(const char *path);
void gp_api_methods(gp_api *api, gp_response *out);   /* methods, options, defaults, kernels */
/* The models a caller may see: visible(name, ctx) != 0 (visible NULL: every
 * model; a key limited to some model names sees only those). */
typedef int (*gp_model_visible_fn)(const char *name, const void *ctx);
void gp_api_list_models(gp_api *api, gp_model_visible_fn visible, const void *ctx,
                        gp_response *out);
/* version 0: the latest, with "versions": [...]. */
void gp_api_get_model(gp_api *api, const char *name, int version, gp_response *out);
/* 204. req (may be NULL) names who asked, for the audit trail. */
void gp_api_delete_model(gp_api *api, const char *name, const gp_request *req, gp_response *out);
/* The portable model file of a version as served (docs/design/model-file.md):
 * 200 with the file, Content-Disposition naming it; version 0: the latest. */
void gp_api_export_model(gp_api *api, const char *name, int version, gp_response *out);
/* Store a model file as a new version (of ?name=, else of the name it was
 * exported under): 201 with the model JSON and Location; 422 naming the
 * field for a corrupt, truncated, altered or newer-format file, or one of
 * a method this build lacks; nothing stored then. body is req->body,
 * malloc'ed, and the import takes it: a file can be gigabytes, and it is
 * freed once read, before the model is built (req->body is not read after). */
void gp_api_import_model(gp_api *api, const gp_request *req, char *body, gp_response *out);
/* 204; 409 (field "alias") when an alias points at it, 409 (field "version")
 * for the model's only version; gp_store_delete_version. */
void gp_api_delete_version(gp_api *api, const char *name, int version, const gp_request *req,
                           gp_response *out);
/* Aliases (aliases.c; docs/design/api.md, "Aliases"): the list
 * {"name", "aliases": [{"alias", "version", "updated_at", "updated_by"}]},
 * one alias, PUT {"version": N} (200 with the alias; by: who, the caller's
 * key name, or NULL), DELETE (204). */
void gp_api_list_aliases(gp_api *api, const char *name, gp_response *out);
void gp_api_get_alias(gp_api *api, const char *name, const char *alias, gp_response *out);
void gp_api_put_alias(gp_api *api, const char *name, const char *alias, const gp_request *req,
                      const char *by, gp_response *out);
void gp_api_delete_alias(gp_api *api, const char *name, const char *alias,
                         const gp_request *req, gp_response *out);
void gp_api_predict(gp_api *api, const char *name, const gp_request *req, gp_response *out);
void gp_api_sample(gp_api *api, const char *name, const gp_request *req, gp_response *out);
/* ---- predict and sample in two steps, for dynamic batching (server/batcher.c):
 * the body is parsed on the request thread; calls to the same model are then
 * answered together, each response exactly what gp_api_predict or
 * gp_api_sample would give it alone. */
typedef struct gp_point_call gp_point_call;
enum { GP_CALL_PREDICT = 0, GP_CALL_SAMPLE = 1 };
/* GP_OK and *out (caller: gp_api_point_calls_run or gp_api_point_call_free),
 * or an error code with the error response in *res. */
int gp_api_point_call_parse(gp_api *api, int kind, const char *name, const gp_request *req,
                            gp_point_call **out, gp_response *res);
/* Points in the call (0 until known, for inputs given as objects). */
size_t gp_api_point_call_points(const gp_point_call *c);
/* 1 for a sample, or a predict whose points may join others' (no full
 * covariance). */
int gp_api_point_call_batchable(const gp_point_call *c);
/* 1 when a and b may be answered together: both batchable, of one kind, the
 * same model name and version, and for predicts the same options. */
int gp_api_point_call_joinable(const gp_point_call *a, const gp_point_call *b);
/* Answer calls[0..n) (of one kind, model name and version: those of
 * calls[0]) into res[0..n) (zeroed), and free the calls: one model look-up,
 * then predicts by one gp_model_predict_batch (which joins the calls whose
 * options agree), samples by one gp_model_sample_batch (exact: one shared
 * solve). */
void gp_api_point_calls_run(gp_api *api, gp_point_call **calls, size_t n, gp_response *res);
void gp_api_point_call_free(gp_point_call *c);
/* 1 when the model (name, version; 0 = the latest) is of a method whose
 * batched calls share work (gp_method.batch_shares_work), so that joining
 * concurrent requests pays; 0 for any other method and for a name with no
 * such row (its error is answered at once). From the rows kept per store
 * generation: no store round trip while nothing changes. */
int gp_api_batch_pays(gp_api *api, const char *name, int version);

/* ---- the Open Inference Protocol V2 (KServe / Triton REST "v2"; api/oip.c,
 * docs/design/api.md "Open Inference Protocol V2"). Errors are made in the
 * catalogue's shape like every route's; gp_api_oip_error turns an answer
 * into the protocol's {"error": "<field>: <message>"}, status and headers
 * kept (the server applies it to every answer on a /v2 path). */
void gp_api_oip_error(gp_response *res);
void gp_api_oip_server_metadata(gp_response *out); /* {"name", "version", "extensions": []} */
void gp_api_oip_live(gp_response *out);             /* 200 {"live": true} */
void gp_api_oip_ready(gp_api *api, gp_response *out); /* 200 {"ready": true} or 503 */
/* version 0: the latest. {"name", "versions", "platform", "inputs", "outputs"}. */
void gp_api_oip_model_metadata(gp_api *api, const char *name, int version, gp_response *out);
/* 200 {"name", "ready": true}; 404 unknown; 409 while a gate model warms up. */
void gp_api_oip_model_ready(gp_api *api, const char *name, int version, gp_response *out);
/* An infer request as a predict call (answered by gp_api_point_calls_run,
 * batched with v1 predicts whose options agree); as gp_api_point_call_parse. */
int gp_api_oip_infer_parse(gp_api *api, const char *name, int version, const gp_request *req,
                           gp_point_call **out, gp_response *res);
/* Parse and answer at once (no batching). */
void gp_api_oip_infer(gp_api *api, const char *name, int version, const gp_request *req,
                      gp_response *out);

/* Add rows to a model that learns online (docs/design/api.md, "Observe"):
 * 200 {"name", "version", "n", "state", "observations"} once the batch is
 * applied and durable; 422 unsupported for methods that cannot. */
void gp_api_observe(gp_api *api, const char *name, const gp_request *req, gp_response *out);
/* gp_api_observe that does not wait for the disk: with ticket not NULL a
 * 200 in out is committed but is acknowledged only once commit *ticket is
 * on disk (gp_api_wait_durable; 0: nothing to wait for). The server waits
 * off its request threads, so that every observe in flight shares a sync. */
void gp_api_observe_deferred(gp_api *api, const char *name, const gp_request *req,
                             gp_response *out, uint64_t *ticket);
/* Return once commit ticket is on disk (gp_store_wait_durable): 0, or an
 * error (the write is committed but may not survive a power loss). */
int gp_api_wait_durable(gp_api *api, uint64_t ticket, gp_error *err);

/* ---- fits, in two steps so that the server runs the second on a fit worker ---- */
typedef struct gp_fit_job gp_fit_job;

/* Parse and validate a fit request (JSON body, or CSV body with the other fields
 * as query parameters). Nothing is fitted yet. */
int gp_api_parse_fit(gp_api *api, const gp_request *req, gp_fit_job **out, gp_error *err);
int gp_fit_job_async(const gp_fit_job *job);
const char *gp_fit_job_name(const gp_fit_job *job);
const char *gp_fit_job_method(const gp_fit_job *job);
int gp_fit_job_max_iterations(const gp_fit_job *job);
/* A method "auto" job's leaderboard so far (compact JSON; NULL: none yet or
 * another method). Read by the progress callback, on the fit's thread. */
const char *gp_fit_job_leaderboard(const gp_fit_job *job);
void gp_fit_job_free(gp_fit_job *job);
/* The flag (owned by the caller, outliving the fit) whose nonzero value stops
 * the fit inside an evaluation too, not only at a progress report. */
void gp_fit_job_set_cancel(gp_fit_job *job, const atomic_int *flag);

/* Fit, persist the new version and fill out with the 201 fit response (or the
 * error response). progress (may be NULL) sees every iteration and may cancel:
 * then GP_ECANCELLED is returned and nothing is stored. Returns 0 or the code. */
int gp_api_run_fit(gp_api *api, gp_fit_job *job, gp_progress_fn progress, void *ctx,
                   gp_response *out, double *fit_seconds);

/* ---- fits sharded over processes (gpserve-fit under MPI; api/distributed.c,
 * docs/design/scale-out.md "Fits beyond one machine") ----
 * A fit request with "distributed": {"ranks": N} is a durable job that the
 * daemon holding it runs as N processes of gpserve-fit (mpi/); each opens
 * its shard of the rows, fits with the sums over every shard, and rank 0
 * saves the version. */
struct gp_rows;
/* N of "distributed": {"ranks": N}; 0 for a fit that is not distributed. */
int gp_fit_job_ranks(const gp_fit_job *job);
/* Fit the job's model without saving it (*out the caller's): over rows when
 * not NULL (one shard, its sums over every shard through rows->allreduce),
 * else over the request's own X and y. 0 or the code, err filled. */
int gp_api_fit_model(gp_api *api, gp_fit_job *job, const struct gp_rows *rows,
                     gp_progress_fn progress, void *ctx, gp_model **out, gp_error *err);
/* Save model (taken, whatever the outcome) as the job's new version, as
 * gp_api_run_fit does after its fit: out gets the 201 fit response or the
 * error response; a held job (gp_fit_job_hold) ends succeeded with it. */
int gp_api_save_fit(gp_api *api, gp_fit_job *job, gp_model *model, gp_response *out,
                    double *fit_seconds);

/* Rank `rank` of `ranks` processes of the job's fit: its rows are the fixed
 * range [rank N / ranks, (rank + 1) N / ranks) of the N rows of the fit (the
 * data set's row sequence, or the request's X and y), read in chunks of at
 * most chunk rows (0: GP_ROWS_DEFAULT_CHUNK). gp_fit_shard_rows gives them as
 * a gp_rows whose allreduce is NULL (the caller's to set). */
typedef struct gp_fit_shard gp_fit_shard;
int gp_api_fit_shard_open(gp_api *api, const gp_fit_job *job, int rank, int ranks, size_t chunk,
                          gp_fit_shard **out, gp_error *err);
struct gp_rows *gp_fit_shard_rows(gp_fit_shard *shard);
void gp_fit_shard_close(gp_fit_shard *shard);

/* ---- idempotent writes (docs/design/api.md, "Idempotent writes") ----
 * A fit parsed from a request with an Idempotency-Key records its answer with
 * its write (gp_api_run_fit: the new version; gp_api_job_create: the async
 * job). When the key's answer is recorded already, gp_api_fit_replay fills
 * out with it (header Idempotent-Replayed: true), or with 409 conflict for a
 * different request under the same key, and returns 1; 0 when it is not. */
int gp_api_fit_replay(gp_api *api, const gp_fit_job *job, gp_response *out);
/* 1 for the error of a keyed write that found its key recorded meanwhile (a
 * retry ran side by side): nothing was written; answer gp_api_fit_replay. */
int gp_api_key_taken(const gp_error *err);
/* The 202 answer of an async fit queued as job id (body and Location). */
void gp_api_fit_accepted(const char *id, gp_response *out);
/* Remove recorded answers older than age_seconds (up to 1000 a call). */
int gp_api_idem_prune(gp_api *api, double age_seconds, size_t *deleted, gp_error *err);

/* ---- async fit jobs: the server runs them, the api shapes and persists them ---- */
/* The leaderboard of a method "auto" job in its progress (compact JSON). */
#define GP_JOB_LEADERBOARD_MAX 8192
typedef struct gp_job_info {
    char id[40];
    char model_name[65];
    const char *status; /* static: "queued", "running", "succeeded", "failed", "cancelled" */
    int iteration, max_iterations;
    int has_objective;
    double objective;
    double elapsed_seconds;
    char *model_json; /* owned: the fit response body once succeeded, else NULL */
    gp_error error;   /* when failed */
    char created_at[32];
    char updated_at[32];
    int attempts; /* runs started (a run interrupted by a daemon's death counts) */
    /* a method "auto" job: its candidates so far, a JSON array ("" otherwise) */
    char leaderboard[GP_JOB_LEADERBOARD_MAX];
} gp_job_info;

void gp_job_info_free(gp_job_info *job); /* frees model_json */
/* 200 with {"id", "name" (the model's), "status", "progress": {"iteration",
 * "max_iterations", "objective" (null until known), "elapsed_seconds",
 * "leaderboard" (a method "auto" job's candidates so far)},
 * "model": {...} (succeeded) | "error": {...} (failed), "created_at", "updated_at"} */
void gp_api_job_response(const gp_job_info *job, gp_response *out);
/* Persist the job's current state (jobs table), so another daemon on the same
 * database can report it. */
int gp_api_job_save(gp_api *api, const gp_job_info *job, gp_error *err);
/* A job this process does not hold in memory, from the store (GP_ENOTFOUND). */
int gp_api_job_load(gp_api *api, const char *id, gp_job_info *job, gp_error *err);

/* ---- durable async jobs ----
 * A job answered 202 is in the store with its request (the validated fit
 * fields and the data) before the answer; the daemon holding it (owner, a
 * string naming the process) keeps a lease alive until it ends, and a daemon
 * that finds a lease expired takes the job over and runs it again from the
 * stored request (store/store.h). Each holder's write answers GP_ECONFLICT
 * once another daemon has taken the job over. Times are Unix seconds. */
int gp_api_job_create(gp_api *api, const gp_fit_job *fj, const gp_job_info *job,
                      const char *owner, double lease_until, gp_error *err);
/* Mark fj as the run of durable job id held by owner: gp_api_run_fit then
 * saves the model and ends the job succeeded in one transaction (a crash
 * between the two would run the job again and add a second version), and
 * answers GP_ECONFLICT, saving nothing, when owner lost the job. */
int gp_fit_job_hold(gp_fit_job *fj, const char *id, const char *owner);
/* A holder's update: status queued or running, progress; started counts a run. */
int gp_api_job_update(gp_api *api, const gp_job_info *job, const char *owner, int started,
                      gp_error *err);
/* A holder ends a job failed (job->error) or cancelled; the request is dropped. */
int gp_api_job_finish(gp_api *api, const gp_job_info *job, const char *owner, gp_error *err);
/* A holder hands a job back on a graceful stop (another daemon, or this one
 * restarted, runs it). */
int gp_api_job_release(gp_api *api, const char *id, const char *owner, gp_error *err);

typedef struct gp_api_job_hold {
    char id[40];
    int cancel_requested; /* a DELETE reached another daemon */
} gp_api_job_hold;
/* Renew the leases of every job owner holds; list them (*held malloc'ed). */
int gp_api_job_renew(gp_api *api, const char *owner, double lease_until,
                     gp_api_job_hold **held, size_t *count, gp_error *err);

enum gp_api_claim {
    GP_API_CLAIM_NONE = 0, /* nothing to take over */
    GP_API_CLAIM_RUN,      /* *fj and *job: run it (queued, ours) */
    GP_API_CLAIM_ENDED     /* *job ended instead (attempts used up, cancel requested, or
                              its request could not be read back): nothing to run */
};
/* Take over one job whose lease expired before now (the oldest first). A job
 * whose runs were interrupted max_attempts times ends failed ("interrupted"). */
int gp_api_job_claim(gp_api *api, const char *owner, double now, double lease_until,
                     int max_attempts, gp_job_info *job, gp_fit_job **fj, int *outcome,
                     gp_error *err);
/* DELETE of a job this daemon does not hold: 409 when it has ended, 200 when
 * nobody held it alive (cancelled here), 202 when its holder will cancel it. */
void gp_api_job_cancel_stored(gp_api *api, const char *id, double now, gp_response *out);

typedef struct gp_api_job_owner {
    char id[40];
    char owner[128];
} gp_api_job_owner;
/* Active jobs whose owner starts with prefix (*jobs malloc'ed). */
int gp_api_job_owned(gp_api *api, const char *prefix, gp_api_job_owner **jobs, size_t *count,
                     gp_error *err);
/* Remove ended jobs last updated more than age_seconds ago (up to 1000 a
 * call; *deleted says how many). */
int gp_api_job_prune(gp_api *api, double age_seconds, size_t *deleted, gp_error *err);
/* Expire the lease of a job whose holder is known dead. */
int gp_api_job_expire(gp_api *api, const char *id, const char *owner, gp_error *err);

/* Durable job id as gpserve-fit runs it for owner (the daemon holding it):
 * its stored request rebuilt into *fj, held by owner (gp_fit_job_hold), and
 * its row in *info. GP_ECONFLICT when owner does not hold it, GP_ENOTFOUND
 * when it has no request (ended, or no such job). */
int gp_api_job_open(gp_api *api, const char *id, const char *owner, gp_fit_job **fj,
                    gp_job_info *info, gp_error *err);
/* Whether a DELETE asked owner to cancel job id (gp_store_job_cancel_flag):
 * GP_ECONFLICT once owner no longer holds it. */
int gp_api_job_cancel_requested(gp_api *api, const char *id, const char *owner, int *requested,
                                gp_error *err);

/* ---- the audit trail (audit.c; docs/design/api.md, "The audit trail") ----
 * A write answered 2xx is recorded by the api with the write, in its
 * transaction; the server hands every other answer of a write route (and
 * every DELETE of a job, whose effect lands later) to gp_api_audit_answer,
 * which records it alone: model and version as the path named them. */
void gp_api_audit_answer(gp_api *api, const gp_request *req, const char *model, int version,
                         const gp_response *res);
/* GET /v1/audit: ?limit= (1..1000, 100), ?before= / ?after= (an id),
 * ?model=, ?key=, ?since= (RFC 3339); 200 {"entries": [...], "next"}. */
void gp_api_audit(gp_api *api, const gp_request *req, gp_response *out);
/* Remove audit rows older than age_seconds (up to 1000 a call). */
int gp_api_audit_prune(gp_api *api, double age_seconds, size_t *deleted, gp_error *err);

/* ---- data sets (datasets.c; docs/design/api.md, "Data sets") ----
 * PUT /v1/datasets/{name} streams its body into the store as it arrives:
 * begin once the request's headers are in (415 for a Content-Type other
 * than text/csv or application/x-ndjson, 409 when it would replace a data
 * set in use), feed each piece of the body as it comes, finish at its end
 * (201 with the data set, or 200 when it replaced one). A refusal (a row or
 * cell of the body, the quota: 507) is the answer of the feed that found
 * it; what was stored is deleted then, and the caller answers it once the
 * rest of the body is read, then aborts. abort (a dropped connection, or
 * after a refusal) deletes what the upload wrote and frees it; finish
 * frees it too. */
typedef struct gp_dataset_upload gp_dataset_upload;
int gp_api_dataset_upload_begin(gp_api *api, const char *name, const gp_request *req,
                                gp_dataset_upload **out, gp_response *res);
int gp_api_dataset_upload_feed(gp_dataset_upload *up, const char *data, size_t n,
                               gp_response *res);
void gp_api_dataset_upload_finish(gp_dataset_upload *up, gp_response *res);
void gp_api_dataset_upload_abort(gp_dataset_upload *up);
/* GET /v1/datasets/{name}: {"name", "id", "rows", "columns": [{"name",
 * "count", "mean", "sd", "min", "max"}], "sha256", "bytes", "bytes_received",
 * "created_at", "created_by"}; the list {"datasets": [...]} gives the
 * columns' names only (visible as gp_api_list_models). DELETE: 204; 409
 * while a queued or running job or a fit uses it. */
void gp_api_get_dataset(gp_api *api, const char *name, gp_response *out);
void gp_api_list_datasets(gp_api *api, gp_model_visible_fn visible, const void *ctx,
                          gp_response *out);
void gp_api_delete_dataset(gp_api *api, const char *name, const gp_request *req,
                           gp_response *out);
/* An upload that no daemon has heard of for this long is abandoned (its
 * daemon died): gp_api_dataset_prune deletes such uploads (up to 100 a
 * call) and the fits' reader leases expired that long ago. */
#define GP_API_UPLOAD_STALE_SECONDS 900.0
int gp_api_dataset_prune(gp_api *api, double age_seconds, size_t *deleted, gp_error *err);

/* ---- studies (studies.c, study_*.c; docs/design/api.md, "Studies") ----
 * A study is a search space, one objective metric (minimize or maximize),
 * optional constraint metrics (metric <= max), model settings and a seed;
 * its trials live in the store. POST /v1/studies: 201 with the study; 400
 * naming the field of a bad one, 409 (field "name") when it exists. GET:
 * the study with its counts, best_trial and model; the list {"studies"};
 * DELETE: 204 (its trials and its models study.<name>* go too). */
/* visible (may be NULL): the study names the caller may use (as
 * gp_api_list_models'): another name is 403 naming name, and not listed. */
void gp_api_create_study(gp_api *api, const gp_request *req, gp_model_visible_fn visible,
                         const void *ctx, gp_response *out);
void gp_api_list_studies(gp_api *api, gp_model_visible_fn visible, const void *ctx,
                         gp_response *out);
void gp_api_get_study(gp_api *api, const char *name, gp_response *out);
void gp_api_delete_study(gp_api *api, const char *name, const gp_request *req,
                         gp_response *out);
/* POST .../suggestions {"count": q, "client_id": c}: 200 {"trials": [...],
 * "source": "sobol" | "model" | "client", ...}. Runs on the caller's
 * thread: one store read, the models' observes, the acquisition. */
void gp_api_study_suggest(gp_api *api, const char *name, const gp_request *req,
                          gp_response *out);
/* GET .../trials (?state=) and GET .../trials/{trial}. */
void gp_api_study_trials(gp_api *api, const char *name, const gp_request *req,
                         gp_response *out);
void gp_api_study_trial(gp_api *api, const char *name, int64_t trial, gp_response *out);
/* POST .../trials/{trial} completes an active trial ({"metrics": {...}} or
 * {"infeasible": true, "reason": "..."}); POST .../trials attaches a trial
 * run elsewhere ({"parameters": {...}, "metrics": {...}}), completed at
 * once. When the completion makes a refit due (and this daemon claimed
 * it), refits[0..*n_refits) are the fit jobs of the study's models (its
 * objective's, then each constraint's) to queue as async jobs (the
 * caller's); *n_refits is 0 otherwise. */
#define GP_API_STUDY_REFITS 9
void gp_api_study_complete(gp_api *api, const char *name, int64_t trial, const gp_request *req,
                           gp_response *out, gp_fit_job **refits, size_t *n_refits);
void gp_api_study_attach(gp_api *api, const char *name, const gp_request *req,
                         gp_response *out, gp_fit_job **refits, size_t *n_refits);
/* Expire every active trial of every study whose client has not been heard
 * of for its trial_timeout_s (the keeper's sweep; suggestions also do it). */
int gp_api_studies_expire(gp_api *api, size_t *expired, gp_error *err);

/* ---- figures for /metrics ---- */
typedef struct gp_api_stats {
    uint64_t variance_clamps;    /* predictive variances clamped at zero */
    uint64_t jitter_escalations; /* fits whose cached factor needed jitter */
    size_t models_loaded;        /* models held in the cache */
    size_t models_not_finite;    /* stored versions found non-finite, not served */
} gp_api_stats;

void gp_api_get_stats(gp_api *api, gp_api_stats *out);

#endif
