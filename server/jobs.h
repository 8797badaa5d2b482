/* gpserve server: the fit queue and its workers.
 *
 * Request threads never fit. A fit, synchronous or async, becomes a job in a
 * bounded FIFO queue; --fit-workers threads take jobs from it and run
 * gp_api_run_fit. Async jobs also live in an in-memory table (their
 * gp_job_info) and are saved to the store with gp_api_job_save on every state
 * change and, while running, at most about once a second for progress.
 * A synchronous job reports its response through a callback on the worker
 * thread (the HTTP layer resumes the suspended connection there).
 *
 * Locking: one mutex guards the queue, the table and the counters; the
 * store is written outside it, one save at a time per job, newest state
 * last (a sequence number per job orders the saves). */
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
    int (*save)(gp_api *api, const gp_job_info *job, gp_error *err);
    int (*load)(gp_api *api, const char *id, gp_job_info *job, gp_error *err);
} gp_fit_ops;

typedef struct gp_jobs gp_jobs;

/* Completion of a synchronous fit, on the worker thread: *res (a 201 fit
 * response or an error response) now belongs to the callee. */
typedef void (*gp_job_done_fn)(void *cookie, gp_response *res);
/* Runs under the queue lock right before a synchronous job becomes visible
 * to the workers (the HTTP layer suspends its connection there). */
typedef void (*gp_job_before_fn)(void *cookie);
/* Asked on the worker before a synchronous fit starts and at every progress
 * report: 0 when nobody waits for the answer any more (the client closed its
 * connection), which cancels the fit and frees the worker. */
typedef int (*gp_job_alive_fn)(void *cookie);

/* ops NULL: the api functions. metrics may be NULL. */
gp_jobs *gp_jobs_new(gp_api *api, size_t queue_size, size_t workers, gp_metrics *metrics,
                     const gp_fit_ops *ops);
/* Start the worker threads: 0, or -1 when none could be started. */
int gp_jobs_start(gp_jobs *js);

/* Queue an async fit. On 0 the queue owns fj and id (33+ bytes) holds the
 * job id; else fj stays the caller's: GP_EOVERLOADED (queue full) or
 * GP_ENOTREADY (shutting down) or GP_ENOMEM. */
int gp_jobs_submit_async(gp_jobs *js, gp_fit_job *fj, char *id, size_t id_size);
/* Queue a synchronous fit; same returns. On 0, done(cookie, res) will be
 * called exactly once (after before(cookie), which runs only on 0). */
int gp_jobs_submit_sync(gp_jobs *js, gp_fit_job *fj, gp_job_before_fn before,
                        gp_job_done_fn done, void *cookie);
/* The same, with alive (may be NULL) watched while the fit waits and runs;
 * done is still called once: with a response of status 0 (no body) when the
 * client went away, which means "close the connection, answer nothing". */
int gp_jobs_submit_sync_watched(gp_jobs *js, gp_fit_job *fj, gp_job_before_fn before,
                                gp_job_done_fn done, gp_job_alive_fn alive, void *cookie);

/* GET /v1/jobs/{id}: from memory, else the store (another daemon's job), else 404. */
void gp_jobs_get(gp_jobs *js, const char *id, gp_response *out);
/* DELETE /v1/jobs/{id}: queued -> removed and cancelled (200); running ->
 * cancel flag set, 202 with the current state; finished -> 409 conflict. */
void gp_jobs_cancel(gp_jobs *js, const char *id, gp_response *out);

void gp_jobs_counts(gp_jobs *js, size_t *queued, size_t *running);

/* Stop: refuse new jobs, cancel the queued ones (synchronous ones complete
 * with 503 not_ready), ask the running fits to stop, join the workers. */
void gp_jobs_shutdown(gp_jobs *js);
/* After gp_jobs_shutdown (or when never started). */
void gp_jobs_free(gp_jobs *js);

#endif
