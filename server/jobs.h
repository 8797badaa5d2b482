/* gpserve server: the fit queue, its workers, and durable async jobs.
 *
 * Request threads never fit. A fit, synchronous or async, becomes a job in a
 * bounded FIFO queue; --fit-workers threads take jobs from it and run
 * gp_api_run_fit. A synchronous job reports its response through a callback
 * on the worker thread (the HTTP layer resumes the suspended connection
 * there); it is never stored: a daemon that dies during it leaves nothing.
 *
 * An async job is durable (docs/design/architecture.md, "Durable jobs"): it
 * is written to the store with its request before the 202 answer
 * (gp_api_job_create), held by this daemon (its owner string, host:pid:nonce)
 * under a lease that a keeper thread renews every tick, updated at start and
 * about once a second for progress, and ended in the store (a success in the
 * same transaction as the model). The keeper also cancels jobs whose DELETE
 * reached another daemon, forgets jobs another daemon took over, and claims
 * jobs whose lease expired (their daemon died) while the queue has room, so
 * they run again from the stored request, up to --job-attempts runs. At
 * start-up the jobs of dead daemons of this host (their pid is gone) are
 * claimed at once; on a graceful stop the queued and running jobs are handed
 * back, to run after the restart or on another daemon.
 *
 * Locking: one mutex guards the queue, the table and the counters; the
 * store is written outside it, one write at a time per job, newest state
 * last (a sequence number per job orders the progress writes). */
#ifndef GP_SERVER_JOBS_H
#define GP_SERVER_JOBS_H

#include <stddef.h>

#include "api/api.h"
#include "server/metrics.h"

/* The api calls the queue makes; tests substitute fakes. */
typedef struct gp_fit_ops {
    int (*run)(gp_api *api, gp_fit_job *job, gp_progress_fn progress, void *ctx,
               gp_response *out, double *fit_seconds);
    void (*free_job)(gp_fit_job *job);
    const char *(*name)(const gp_fit_job *job);
    const char *(*method)(const gp_fit_job *job);
    int (*max_iterations)(const gp_fit_job *job);
    /* A method "auto" job's leaderboard so far (NULL entry or answer: none). */
    const char *(*leaderboard)(const gp_fit_job *job);
    int (*load)(gp_api *api, const char *id, gp_job_info *job, gp_error *err);
    /* Durable jobs (api.h); a NULL entry is skipped (test fakes), except
     * cancel_stored, which answers DELETE for a job not held here. */
    int (*create)(gp_api *api, const gp_fit_job *fj, const gp_job_info *job, const char *owner,
                  double lease_until, gp_error *err);
    int (*hold)(gp_fit_job *fj, const char *id, const char *owner);
    int (*update)(gp_api *api, const gp_job_info *job, const char *owner, int started,
                  gp_error *err);
    int (*finish)(gp_api *api, const gp_job_info *job, const char *owner, gp_error *err);
    int (*release)(gp_api *api, const char *id, const char *owner, gp_error *err);
    int (*renew)(gp_api *api, const char *owner, double lease_until, gp_api_job_hold **held,
                 size_t *count, gp_error *err);
    int (*claim)(gp_api *api, const char *owner, double now, double lease_until,
                 int max_attempts, gp_job_info *job, gp_fit_job **fj, int *outcome,
                 gp_error *err);
    void (*cancel_stored)(gp_api *api, const char *id, double now, gp_response *out);
    int (*owned)(gp_api *api, const char *prefix, gp_api_job_owner **jobs, size_t *count,
                 gp_error *err);
    int (*expire)(gp_api *api, const char *id, const char *owner, gp_error *err);
    /* Hands the job's cancel flag (nonzero: stop) to the fit, which polls it
     * inside long evaluations; NULL: cancellation at progress reports only. */
    void (*set_cancel)(gp_fit_job *job, const atomic_int *flag);
    int (*prune)(gp_api *api, double age_seconds, size_t *deleted, gp_error *err);
    /* Recorded answers of idempotency keys past their retention (NULL: none). */
    int (*prune_keys)(gp_api *api, double age_seconds, size_t *deleted, gp_error *err);
    /* Audit entries past their retention (NULL: none). */
    int (*prune_audit)(gp_api *api, double age_seconds, size_t *deleted, gp_error *err);
    /* Processes of a distributed fit (0, or NULL: the fit runs on a worker). */
    int (*ranks)(const gp_fit_job *job);
    /* Data set uploads abandoned (their daemon died) and expired reader
     * leases, older than GP_API_UPLOAD_STALE_SECONDS (NULL: none). */
    int (*prune_uploads)(gp_api *api, double age_seconds, size_t *deleted, gp_error *err);
    /* Studies' active trials whose client went quiet past their
     * trial_timeout_s, expired (NULL: none). */
    int (*expire_trials)(gp_api *api, size_t *expired, gp_error *err);
} gp_fit_ops;

/* How a distributed fit's job runs (server/jobs_mpi.c): its holder starts
 *   LAUNCHER [ARGS...] [--hostfile HOSTFILE] -np N PROGRAM --db DB --job ID --owner OWNER
 * and waits for it. Strings are borrowed (they outlive the gp_jobs). */
typedef struct gp_jobs_mpi {
    const char *db;       /* the daemon's --db, which every rank opens */
    const char *launcher; /* --mpi-launcher (default mpirun) */
    const char *hostfile; /* --mpi-hostfile, or NULL */
    const char *args;     /* --mpi-args: extra words split at blanks, or NULL */
    const char *program;  /* --fit-program, or NULL: gpserve-fit beside the daemon's binary */
} gp_jobs_mpi;

typedef struct gp_jobs gp_jobs;

/* Completion of a synchronous fit, on the worker thread: *res (a 201 fit
 * response or an error response) now belongs to the callee. */
typedef void (*gp_job_done_fn)(void *cookie, gp_response *res);
/* Runs under the queue lock right before a synchronous job becomes visible
 * to the workers (the HTTP layer suspends its connection there). */
typedef void (*gp_job_before_fn)(void *cookie);
/* Asked before a synchronous fit starts, at every progress report and by the
 * keeper thread about once a second while it runs (under the queue lock, never
 * after done() was called): 0 when nobody waits for the answer any more (the
 * client closed its connection), which cancels the fit and frees the worker. */
typedef int (*gp_job_alive_fn)(void *cookie);

/* ops NULL: the api functions. metrics may be NULL. */
gp_jobs *gp_jobs_new(gp_api *api, size_t queue_size, size_t workers, gp_metrics *metrics,
                     const gp_fit_ops *ops);
/* Durability settings (before gp_jobs_start): the lease in seconds (a dead
 * daemon's jobs are taken over that long after its last renewal; default 15),
 * the runs a job may start before it fails as interrupted (default 3), and how
 * long ended jobs are kept in the store (seconds; 0 = for ever; default 7
 * days: the keeper removes older ones about once a minute). */
void gp_jobs_set_durability(gp_jobs *js, double lease_seconds, int max_attempts,
                            double retention_seconds);
/* How long the answers of idempotency keys are kept (seconds; 0 = for ever;
 * default 24 hours): the keeper removes older ones with the ended jobs. */
void gp_jobs_set_key_retention(gp_jobs *js, double retention_seconds);
/* How long audit entries are kept (seconds; 0 = for ever; default 90 days):
 * the keeper removes older ones with the ended jobs. */
void gp_jobs_set_audit_retention(gp_jobs *js, double retention_seconds);
/* The launcher of distributed fits (before gp_jobs_start). */
void gp_jobs_set_mpi(gp_jobs *js, const gp_jobs_mpi *mpi);
/* This daemon's owner string (host:pid:nonce). */
const char *gp_jobs_owner(const gp_jobs *js);
/* Start the worker threads and the lease keeper, after claiming the jobs of
 * this host's dead daemons: 0, or -1 when no worker could be started. */
int gp_jobs_start(gp_jobs *js);
/* One round of the keeper (renew, cancel requests, take-overs, claims); the
 * keeper thread runs it every tick; tests call it directly. */
void gp_jobs_keep(gp_jobs *js);

/* Queue an async fit, stored durably first. On 0 the queue owns fj and id
 * (33+ bytes) holds the job id; else fj stays the caller's and err says why:
 * GP_EOVERLOADED (queue full), GP_ENOTREADY (shutting down), GP_ENOMEM, or
 * the store's error (GP_ESTORAGE for a full disk). */
int gp_jobs_submit_async(gp_jobs *js, gp_fit_job *fj, char *id, size_t id_size, gp_error *err);
/* Queue a synchronous fit; same returns. On 0, done(cookie, res) will be
 * called exactly once (after before(cookie), which runs only on 0). */
int gp_jobs_submit_sync(gp_jobs *js, gp_fit_job *fj, gp_job_before_fn before,
                        gp_job_done_fn done, void *cookie);
/* The same, with alive (may be NULL) watched while the fit waits and runs;
 * done is still called once: with a response of status 0 (no body) when the
 * client went away, which means "close the connection, answer nothing". */
int gp_jobs_submit_sync_watched(gp_jobs *js, gp_fit_job *fj, gp_job_before_fn before,
                                gp_job_done_fn done, gp_job_alive_fn alive, void *cookie);

/* The model name of job id (held here, else from the store) into out; 0,
 * or -1 when there is no such job. */
int gp_jobs_model_name(gp_jobs *js, const char *id, char *out, size_t size);
/* GET /v1/jobs/{id}: from memory, else the store (another daemon's job), else 404. */
void gp_jobs_get(gp_jobs *js, const char *id, gp_response *out);
/* DELETE /v1/jobs/{id}: queued -> removed and cancelled (200); running ->
 * cancel flag set, 202 with the current state; finished -> 409 conflict.
 * Another daemon's job: cancelled here when its daemon is dead (200), else
 * requested (202; its daemon cancels it at its next keeper tick). */
void gp_jobs_cancel(gp_jobs *js, const char *id, gp_response *out);

void gp_jobs_counts(gp_jobs *js, size_t *queued, size_t *running);

/* Stop: refuse new jobs, hand the queued and running async jobs back to the
 * store (they run after a restart or on another daemon), answer queued
 * synchronous fits 503 not_ready, stop the running fits, join the threads. */
void gp_jobs_shutdown(gp_jobs *js);
/* After gp_jobs_shutdown (or when never started). */
void gp_jobs_free(gp_jobs *js);

#endif
