#include "server/jobs_internal.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "server/util.h"

/* ---- workers ---- */
static int on_progress(void *ctx, int iteration, int max_iterations, double objective)
{
    job *j = ctx;
    gp_jobs *js = j->owner;
    if (j->async) {
        int save = 0;
        double now = gp_monotonic_seconds();
        /* read on the fit's thread, which alone changes it */
        const char *lb = js->ops.leaderboard ? js->ops.leaderboard(j->fit) : NULL;
        pthread_mutex_lock(&js->lock);
        if (lb && strcmp(lb, j->info.leaderboard) != 0 && strlen(lb) < sizeof j->info.leaderboard) {
            snprintf(j->info.leaderboard, sizeof j->info.leaderboard, "%s", lb);
            j->last_save = 0.0; /* a candidate ended: written now */
        }
        j->info.iteration = iteration;
        if (max_iterations > 0)
            j->info.max_iterations = max_iterations;
        if (isfinite(objective)) {
            j->info.has_objective = 1;
            j->info.objective = objective;
        }
        j->info.elapsed_seconds = now - j->started;
        if (now - j->last_save >= 1.0) {
            j->last_save = now;
            gp_jobs_touch_locked(j);
            save = 1;
        }
        pthread_mutex_unlock(&js->lock);
        if (save && gp_jobs_job_write(js, j, 0) == GP_ECONFLICT)
            atomic_store(&j->cancel, STOP_LOST);
    } else if (j->alive && !j->alive(j->cookie)) {
        atomic_store(&j->cancel, STOP_GONE); /* the client is gone: free the worker */
    }
    return atomic_load(&j->cancel) != STOP_NONE;
}

void gp_jobs_respond_shutdown(gp_response *res)
{
    gp_api_fail(res, GP_ENOTREADY, NULL, "the server is shutting down; the fit was cancelled");
}

static void finish_sync(gp_jobs *js, job *j, int rc, gp_response *res)
{
    /* From here the keeper no longer asks alive(cookie): done() hands the
     * connection back, after which the cookie may be freed. */
    pthread_mutex_lock(&js->lock);
    j->answered = 1;
    pthread_mutex_unlock(&js->lock);
    if (rc == GP_ECANCELLED) {
        /* Status 0 when the client is gone: no answer, the connection is
         * closed; at shutdown the client still waits and reads why. */
        gp_response_free(res);
        memset(res, 0, sizeof *res);
        if (atomic_load(&j->cancel) != STOP_GONE)
            gp_jobs_respond_shutdown(res);
    } else if (res->status == 0) {
        gp_api_fail(res, GP_EINTERNAL, NULL, "the fit produced no response");
    }
    j->done(j->cookie, res);
}

/* The run's error (from its response body) into err. */
static void run_error(int rc, const gp_response *res, gp_error *err)
{
    gp_error_clear(err);
    err->code = rc;
    if (!gp_json_find_string(res->body, res->body_len, "message", err->message,
                             sizeof err->message))
        snprintf(err->message, sizeof err->message, "%s", gp_status_name(rc));
    gp_json_find_string(res->body, res->body_len, "field", err->field, sizeof err->field);
}

/* The end of an async job's run: memory and store. */
static void finish_async(gp_jobs *js, job *j, int rc, gp_response *res, double wall)
{
    int why = atomic_load(&j->cancel);
    if (rc == GP_ECONFLICT)
        why = STOP_LOST; /* the model was not saved: another daemon holds the job */
    char *model_json = NULL;
    gp_error err;
    gp_error_clear(&err);
    const char *status = "succeeded";
    if (rc == 0 && res->body) {
        model_json = malloc(res->body_len + 1);
        if (model_json) {
            memcpy(model_json, res->body, res->body_len);
            model_json[res->body_len] = '\0';
        }
    } else if (rc == GP_ECANCELLED || why == STOP_LOST) {
        status = why == STOP_USER ? "cancelled" : "queued";
    } else if (rc != 0) {
        status = "failed";
        run_error(rc, res, &err);
        if (rc == GP_ESTORAGE) { /* STORAGE_MAX_WAITS reached */
            snprintf(err.message, sizeof err.message,
                     "the disk stayed full for an hour of retries; this job will not run "
                     "again: free space and submit the fit again");
        }
    }
    pthread_mutex_lock(&js->lock);
    j->info.status = status;
    j->info.elapsed_seconds = wall;
    j->info.model_json = model_json;
    j->info.error = err;
    gp_jobs_touch_locked(j);
    pthread_mutex_unlock(&js->lock);
    if (rc == 0 || why == STOP_LOST)
        return; /* a success was written with its model; a lost job is not ours */
    if (rc == GP_ECANCELLED && why != STOP_USER)
        gp_jobs_job_release_write(js, j->info.id);
    else
        gp_jobs_job_end_write(js, j);
}

/* The model of async job j found the disk full: queued again (memory and,
 * if the disk lets it, the store), with the error saying when it runs
 * again; retire() puts it on the waiting list, the keeper back on the queue. */
static void wait_for_space(gp_jobs *js, job *j, const gp_response *res)
{
    gp_error err;
    run_error(GP_ESTORAGE, res, &err);
    gp_log("gpserve: job %s: the fitted model was not saved (runs again in %.0f s): %s",
           j->info.id, STORAGE_RETRY_SECONDS, err.message);
    /* The answer says what happened and what comes next; the database's
     * message is in the log line above. */
    snprintf(err.message, sizeof err.message,
             "the disk was full when the fitted model was saved; the job runs again every "
             "%.0f s while it stays full, for up to an hour: free space, e.g. DELETE a model",
             STORAGE_RETRY_SECONDS);
    pthread_mutex_lock(&js->lock);
    j->info.status = "queued";
    j->info.error = err;
    j->waiting = 1;
    j->storage_waits++;
    j->retry_at = gp_monotonic_seconds() + STORAGE_RETRY_SECONDS;
    gp_jobs_touch_locked(j);
    pthread_mutex_unlock(&js->lock);
    (void)gp_jobs_job_write(js, j, 0); /* best effort: the disk is full */
}

static void run_job(gp_jobs *js, job *j)
{
    gp_response res;
    memset(&res, 0, sizeof res);
    double secs = 0;
    double t0 = gp_monotonic_seconds();
    int rc;
    if (!j->async && j->alive && !j->alive(j->cookie))
        atomic_store(&j->cancel, STOP_GONE); /* gone while queued */
    if (js->ops.set_cancel) /* DELETE and SIGTERM reach inside an evaluation */
        js->ops.set_cancel(j->fit, &j->cancel);
    if (atomic_load(&j->cancel) != STOP_NONE)
        rc = GP_ECANCELLED;
    else if (j->async && js->ops.ranks && js->ops.ranks(j->fit) > 0)
        rc = gp_jobs_run_distributed(js, j, &res); /* gpserve-fit's ranks, under mpirun */
    else
        rc = js->ops.run(js->api, j->fit, on_progress, j, &res, &secs);
    double wall = gp_monotonic_seconds() - t0;
    if (secs <= 0)
        secs = wall;
    const char *outcome = rc == 0 ? "succeeded"
                          : rc == GP_ECANCELLED || rc == GP_ECONFLICT ? "cancelled"
                                                                      : "failed";
    gp_metrics_fit(js->metrics, j->method, outcome, secs);
    /* A full disk is not the fit's fault: it runs again once space may be
     * back (its request is kept, in memory and in the store). */
    const int wait = j->async && rc == GP_ESTORAGE && atomic_load(&j->cancel) == STOP_NONE &&
                     j->storage_waits < STORAGE_MAX_WAITS;
    if (js->ops.free_job && j->fit && !wait)
        js->ops.free_job(j->fit);
    if (!wait)
        j->fit = NULL;
    if (wait)
        wait_for_space(js, j, &res);
    else if (j->async)
        finish_async(js, j, rc, &res, wall);
    else
        finish_sync(js, j, rc, &res);
    gp_response_free(&res);
}

/* The next queued job, moved to the running list; NULL when stopping. */
static job *take_next(gp_jobs *js)
{
    pthread_mutex_lock(&js->lock);
    while (js->queue.head == NULL && !js->stopping)
        pthread_cond_wait(&js->wake, &js->lock);
    job *j = js->queue.head;
    if (j != NULL) {
        gp_jobs_list_remove(&js->queue, j);
        j->queued = 0;
        js->n_queued--;
        gp_jobs_list_push(&js->running, j);
        js->n_running++;
        if (j->async) {
            j->info.status = "running";
            j->info.attempts++;
            j->started = gp_monotonic_seconds();
            j->last_save = j->started;
            gp_jobs_touch_locked(j);
        }
    }
    pthread_mutex_unlock(&js->lock);
    return j;
}

/* A job off the running list (and, when lost, out of the table). */
static void retire(gp_jobs *js, job *j)
{
    job_list dead = {NULL, NULL};
    pthread_mutex_lock(&js->lock);
    gp_jobs_list_remove(&js->running, j);
    js->n_running--;
    int last = 0;
    gp_fit_job *release_fit = NULL;
    if (j->async && j->waiting && !js->stopping) {
        gp_jobs_list_push(&js->waiting, j); /* keeps the worker's reference */
        pthread_mutex_unlock(&js->lock);
        return;
    }
    if (j->async && j->waiting) { /* stopping: handed back below, as a queued job is */
        j->waiting = 0;
        release_fit = j->fit;
        j->fit = NULL;
    }
    if (j->async) {
        if (atomic_load(&j->cancel) == STOP_LOST && j->in_table) {
            gp_jobs_table_remove_locked(js, j); /* GETs read the store, where the new holder writes */
            j->refs--;
        }
        if (gp_jobs_terminal(j->info.status))
            gp_jobs_finished_locked(js, j, &dead);
        last = gp_jobs_job_unref_locked(j);
    }
    pthread_mutex_unlock(&js->lock);
    gp_jobs_destroy_list(&dead);
    if (release_fit) {
        if (js->ops.free_job)
            js->ops.free_job(release_fit);
        gp_jobs_job_release_write(js, j->info.id);
    }
    if (!j->async || last)
        gp_jobs_job_destroy(j);
}

void *gp_jobs_worker_main(void *arg)
{
    gp_jobs *js = arg;
    job *j;
    while ((j = take_next(js)) != NULL) {
        /* The run counts as an attempt before it starts: a daemon that dies
         * during it leaves the count behind for --job-attempts. */
        if (j->async && gp_jobs_job_write(js, j, 1) == GP_ECONFLICT)
            atomic_store(&j->cancel, STOP_LOST);
        run_job(js, j);
        retire(js, j);
    }
    return NULL;
}

