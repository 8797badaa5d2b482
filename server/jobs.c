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

/* ---- the api as default ops ---- */
static const gp_fit_ops api_ops = {
    .run = gp_api_run_fit,
    .free_job = gp_fit_job_free,
    .name = gp_fit_job_name,
    .method = gp_fit_job_method,
    .max_iterations = gp_fit_job_max_iterations,
    .leaderboard = gp_fit_job_leaderboard,
    .load = gp_api_job_load,
    .set_cancel = gp_fit_job_set_cancel,
    .create = gp_api_job_create,
    .hold = gp_fit_job_hold,
    .update = gp_api_job_update,
    .finish = gp_api_job_finish,
    .release = gp_api_job_release,
    .renew = gp_api_job_renew,
    .claim = gp_api_job_claim,
    .cancel_stored = gp_api_job_cancel_stored,
    .owned = gp_api_job_owned,
    .expire = gp_api_job_expire,
    .prune = gp_api_job_prune,
    .prune_keys = gp_api_idem_prune,
    .prune_audit = gp_api_audit_prune,
    .ranks = gp_fit_job_ranks,
    .prune_uploads = gp_api_dataset_prune,
    .expire_trials = gp_api_studies_expire,
};

/* ---- set-up ---- */

/* host:pid:nonce — unique per process; the host part lets a restarted daemon
 * recognise the jobs of this host's dead daemons. */
static void make_owner(gp_jobs *js)
{
    char host[64] = "localhost";
    if (gethostname(host, sizeof host) != 0 || host[0] == '\0')
        snprintf(host, sizeof host, "localhost");
    host[sizeof host - 1] = '\0';
    for (char *p = host; *p; p++)
        if (*p == ':')
            *p = '_';
    char nonce[33];
    gp_job_id_generate(nonce);
    nonce[12] = '\0';
    snprintf(js->host_prefix, sizeof js->host_prefix, "%s:", host);
    snprintf(js->owner, sizeof js->owner, "%s:%ld:%s", host, (long)getpid(), nonce);
}

gp_jobs *gp_jobs_new(gp_api *api, size_t queue_size, size_t workers, gp_metrics *metrics,
                     const gp_fit_ops *ops)
{
    gp_jobs *js = calloc(1, sizeof *js);
    if (js == NULL)
        return NULL;
    js->api = api;
    js->metrics = metrics;
    js->ops = ops ? *ops : api_ops;
    js->queue_size = queue_size ? queue_size : 1;
    js->n_workers = workers ? workers : 1;
    js->lease = DEFAULT_LEASE_SECONDS;
    js->max_attempts = DEFAULT_MAX_ATTEMPTS;
    js->retention = DEFAULT_RETENTION_SECONDS;
    js->key_retention = DEFAULT_KEY_RETENTION_SECONDS;
    js->audit_retention = 90.0 * 86400.0;
    make_owner(js);
    js->threads = calloc(js->n_workers, sizeof *js->threads);
    if (js->threads == NULL || gp_cond_init_monotonic(&js->keeper_wake) != 0) {
        free(js->threads);
        free(js);
        return NULL;
    }
    pthread_mutex_init(&js->lock, NULL);
    pthread_cond_init(&js->wake, NULL);
    return js;
}

void gp_jobs_set_durability(gp_jobs *js, double lease_seconds, int max_attempts,
                            double retention_seconds)
{
    if (lease_seconds > 0)
        js->lease = lease_seconds;
    if (max_attempts > 0)
        js->max_attempts = max_attempts;
    if (retention_seconds >= 0)
        js->retention = retention_seconds;
}

void gp_jobs_set_audit_retention(gp_jobs *js, double retention_seconds)
{
    if (retention_seconds >= 0)
        js->audit_retention = retention_seconds;
}

void gp_jobs_set_key_retention(gp_jobs *js, double retention_seconds)
{
    if (retention_seconds >= 0)
        js->key_retention = retention_seconds;
}

void gp_jobs_set_mpi(gp_jobs *js, const gp_jobs_mpi *mpi)
{
    js->mpi = *mpi;
    if (js->mpi.launcher == NULL)
        js->mpi.launcher = "mpirun";
    if (js->mpi.program == NULL) {
        /* gpserve-fit beside this binary (build/, or /usr/local/bin in the image) */
        ssize_t n = readlink("/proc/self/exe", js->fit_program, sizeof js->fit_program - 16);
        js->fit_program[n > 0 ? n : 0] = '\0';
        char *slash = strrchr(js->fit_program, '/');
        if (slash)
            snprintf(slash + 1, 16, "gpserve-fit");
        else
            snprintf(js->fit_program, sizeof js->fit_program, "gpserve-fit");
        js->mpi.program = js->fit_program;
    }
}

const char *gp_jobs_owner(const gp_jobs *js)
{
    return js->owner;
}

/* The pid in an owner string host:pid:nonce, or -1. */

int gp_jobs_start(gp_jobs *js)
{
    gp_jobs_expire_dead_local(js);
    for (size_t i = 0; i < js->n_workers; i++) {
        if (pthread_create(&js->threads[i], NULL, gp_jobs_worker_main, js) != 0)
            break;
        js->n_started++;
    }
    if (js->n_started < js->n_workers)
        gp_log("gpserve: started %zu of %zu fit workers", js->n_started, js->n_workers);
    if (js->n_started > 0 && pthread_create(&js->keeper, NULL, gp_jobs_keeper_main, js) == 0)
        js->keeper_started = 1;
    else if (js->n_started > 0)
        gp_log("gpserve: the job keeper could not start; async jobs are not renewed");
    return js->n_started > 0 ? 0 : -1;
}

/* ---- submitting ---- */

/* May another job be queued (lock held)? 0, or why not. */
static int admission_locked(const gp_jobs *js)
{
    if (js->stopping)
        return GP_ENOTREADY;
    if (js->n_queued >= js->queue_size)
        return GP_EOVERLOADED;
    return 0;
}

static int refuse(gp_error *err, int rc)
{
    if (rc == GP_EOVERLOADED)
        return gp_error_set(err, rc, NULL, "the fit queue is full; retry later");
    if (rc == GP_ENOTREADY)
        return gp_error_set(err, rc, NULL, "the server is shutting down");
    return gp_error_set(err, rc, NULL, "out of memory");
}

/* Write the new job with its request, and mark its fit as the job's run. */
static int create_durable(gp_jobs *js, job *j, gp_fit_job *fj, gp_error *err)
{
    int rc = GP_OK;
    if (js->ops.create) {
        pthread_mutex_lock(&js->lock);
        gp_job_info snap = j->info;
        pthread_mutex_unlock(&js->lock);
        rc = js->ops.create(js->api, fj, &snap, js->owner, gp_wall_seconds() + js->lease, err);
    }
    if (rc == GP_OK && js->ops.hold && js->ops.hold(fj, j->info.id, js->owner) != 0)
        rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    return rc;
}

int gp_jobs_submit_async(gp_jobs *js, gp_fit_job *fj, char *id, size_t id_size, gp_error *err)
{
    job *j = gp_jobs_job_new(js, fj, 1);
    if (j == NULL)
        return refuse(err, GP_ENOMEM);
    pthread_mutex_lock(&js->lock);
    int rc = admission_locked(js);
    if (rc != 0) {
        pthread_mutex_unlock(&js->lock);
        j->fit = NULL; /* stays the caller's */
        gp_jobs_job_destroy(j);
        return refuse(err, rc);
    }
    do
        gp_job_id_generate(j->info.id);
    while (gp_jobs_table_find_locked(js, j->info.id) != NULL);
    j->refs = 1; /* ours */
    gp_jobs_table_add_locked(js, j);
    j->creating = 1;
    js->n_queued++; /* its slot, held while it is written */
    pthread_mutex_unlock(&js->lock);

    rc = create_durable(js, j, fj, err);

    pthread_mutex_lock(&js->lock);
    j->creating = 0;
    if (rc != 0) {
        js->n_queued--;
        gp_jobs_table_remove_locked(js, j);
        j->refs--;
        pthread_mutex_unlock(&js->lock);
        j->fit = NULL; /* stays the caller's */
        gp_jobs_job_unref(js, j);
        return rc;
    }
    int stopping = js->stopping;
    if (stopping) {
        js->n_queued--; /* stored: it runs after the restart or elsewhere */
    } else {
        gp_jobs_list_push(&js->queue, j);
        j->queued = 1;
        j->refs++; /* the queue's / the worker's */
        pthread_cond_signal(&js->wake);
    }
    pthread_mutex_unlock(&js->lock);
    if (stopping)
        gp_jobs_job_release_write(js, j->info.id);
    snprintf(id, id_size, "%s", j->info.id);
    gp_jobs_job_unref(js, j);
    return 0;
}

int gp_jobs_submit_sync(gp_jobs *js, gp_fit_job *fj, gp_job_before_fn before,
                        gp_job_done_fn done, void *cookie)
{
    return gp_jobs_submit_sync_watched(js, fj, before, done, NULL, cookie);
}

int gp_jobs_submit_sync_watched(gp_jobs *js, gp_fit_job *fj, gp_job_before_fn before,
                                gp_job_done_fn done, gp_job_alive_fn alive, void *cookie)
{
    job *j = gp_jobs_job_new(js, fj, 0);
    if (j == NULL)
        return GP_ENOMEM;
    j->done = done;
    j->alive = alive;
    j->cookie = cookie;
    j->refs = 1;
    pthread_mutex_lock(&js->lock);
    int rc = admission_locked(js);
    if (rc != 0) {
        pthread_mutex_unlock(&js->lock);
        j->fit = NULL;
        gp_jobs_job_destroy(j);
        return rc;
    }
    if (before)
        before(cookie);
    gp_jobs_list_push(&js->queue, j);
    j->queued = 1;
    js->n_queued++;
    pthread_cond_signal(&js->wake);
    pthread_mutex_unlock(&js->lock);
    return 0;
}

/* ---- reading and cancelling ---- */

/* Respond from a job the caller references (snapshot under the lock). */
static void respond_job(gp_jobs *js, job *j, int status, gp_response *out)
{
    pthread_mutex_lock(&js->lock);
    gp_job_info snap = j->info;
    if (strcmp(snap.status, "running") == 0)
        snap.elapsed_seconds = gp_monotonic_seconds() - j->started;
    pthread_mutex_unlock(&js->lock);
    gp_api_job_response(&snap, out);
    if (status && out->status == 200)
        out->status = status;
}

static void respond_stored(gp_jobs *js, const char *id, gp_response *out)
{
    gp_job_info info;
    memset(&info, 0, sizeof info);
    gp_error err;
    gp_error_clear(&err);
    int rc = js->ops.load ? js->ops.load(js->api, id, &info, &err)
                          : gp_error_set(&err, GP_ENOTFOUND, "id", "no job '%s'", id);
    if (rc != 0) {
        if (err.code == GP_OK)
            gp_error_set(&err, rc, "id", "no job '%s'", id);
        gp_api_error(&err, out);
        return;
    }
    gp_api_job_response(&info, out);
    gp_job_info_free(&info);
}

int gp_jobs_model_name(gp_jobs *js, const char *id, char *out, size_t size)
{
    out[0] = '\0';
    pthread_mutex_lock(&js->lock);
    job *j = gp_jobs_table_find_locked(js, id);
    if (j)
        snprintf(out, size, "%s", j->info.model_name);
    pthread_mutex_unlock(&js->lock);
    if (j)
        return 0;
    gp_job_info info;
    memset(&info, 0, sizeof info);
    gp_error err;
    gp_error_clear(&err);
    if (js->ops.load == NULL || js->ops.load(js->api, id, &info, &err) != 0)
        return -1;
    snprintf(out, size, "%s", info.model_name);
    gp_job_info_free(&info);
    return 0;
}

void gp_jobs_get(gp_jobs *js, const char *id, gp_response *out)
{
    pthread_mutex_lock(&js->lock);
    job *j = gp_jobs_table_find_locked(js, id);
    if (j)
        j->refs++;
    pthread_mutex_unlock(&js->lock);
    if (j == NULL) {
        respond_stored(js, id, out);
        return;
    }
    respond_job(js, j, 0, out);
    gp_jobs_job_unref(js, j);
}

void gp_jobs_cancel(gp_jobs *js, const char *id, gp_response *out)
{
    job_list dead = {NULL, NULL};
    pthread_mutex_lock(&js->lock);
    job *j = gp_jobs_table_find_locked(js, id);
    if (j == NULL) {
        pthread_mutex_unlock(&js->lock);
        /* Held elsewhere, or by nobody alive: the store decides. */
        js->ops.cancel_stored(js->api, id, gp_wall_seconds(), out);
        return;
    }
    j->refs++;
    const char *status = j->info.status;
    if (strcmp(status, "queued") == 0 && (j->queued || j->waiting)) {
        gp_fit_job *fit = gp_jobs_unqueue_locked(js, j);
        j->info.status = "cancelled";
        gp_jobs_touch_locked(j);
        gp_jobs_finished_locked(js, j, &dead);
        pthread_mutex_unlock(&js->lock);
        gp_jobs_destroy_list(&dead);
        if (fit && js->ops.free_job)
            js->ops.free_job(fit);
        gp_metrics_fit(js->metrics, j->method, "cancelled", 0);
        gp_jobs_job_end_write(js, j);
        respond_job(js, j, 200, out);
    } else if (strcmp(status, "running") == 0 || j->creating) {
        /* Running, or being written: the fit (or the check before it) sees it. */
        atomic_store(&j->cancel, STOP_USER);
        pthread_mutex_unlock(&js->lock);
        respond_job(js, j, 202, out);
    } else {
        pthread_mutex_unlock(&js->lock);
        gp_api_fail(out, GP_ECONFLICT, "id", "job '%s' already finished (%s)", id, status);
    }
    gp_jobs_job_unref(js, j);
}

void gp_jobs_counts(gp_jobs *js, size_t *queued, size_t *running)
{
    pthread_mutex_lock(&js->lock);
    *queued = js->n_queued;
    *running = js->n_running;
    pthread_mutex_unlock(&js->lock);
}

/* ---- stopping ---- */

static void stop_keeper(gp_jobs *js)
{
    if (!js->keeper_started)
        return;
    pthread_mutex_lock(&js->lock);
    js->keeper_stop = 1;
    pthread_cond_broadcast(&js->keeper_wake);
    pthread_mutex_unlock(&js->lock);
    pthread_join(js->keeper, NULL);
    js->keeper_started = 0;
}

void gp_jobs_shutdown(gp_jobs *js)
{
    pthread_mutex_lock(&js->lock);
    js->stopping = 1;
    job_list waiting = js->queue;
    js->queue.head = js->queue.tail = NULL;
    js->n_queued = 0;
    /* Jobs waiting for space join them (all async: handed back below). */
    for (job *j = js->waiting.head; j;) {
        job *next = j->qlink.next;
        j->waiting = 0;
        gp_jobs_list_push(&waiting, j);
        j = next;
    }
    js->waiting.head = js->waiting.tail = NULL;
    for (job *j = waiting.head; j; j = j->qlink.next)
        j->queued = 0;
    for (job *j = js->running.head; j; j = j->qlink.next)
        if (atomic_load(&j->cancel) == STOP_NONE)
            atomic_store(&j->cancel, STOP_SHUTDOWN);
    pthread_cond_broadcast(&js->wake);
    pthread_mutex_unlock(&js->lock);

    for (job *j = waiting.head; j;) {
        job *next = j->qlink.next;
        if (j->fit && js->ops.free_job)
            js->ops.free_job(j->fit);
        j->fit = NULL;
        if (j->async) {
            gp_jobs_job_release_write(js, j->info.id); /* it runs after the restart */
            gp_jobs_job_unref(js, j);                  /* the queue's reference */
        } else {
            gp_metrics_fit(js->metrics, j->method, "cancelled", 0);
            gp_response res;
            memset(&res, 0, sizeof res);
            gp_jobs_respond_shutdown(&res);
            j->done(j->cookie, &res);
            gp_jobs_job_destroy(j);
        }
        j = next;
    }
    for (size_t i = 0; i < js->n_started; i++)
        pthread_join(js->threads[i], NULL);
    js->n_started = 0;
    /* Last: the leases of the fits that were stopping stayed renewed. */
    stop_keeper(js);
}

void gp_jobs_free(gp_jobs *js)
{
    if (js == NULL)
        return;
    stop_keeper(js);
    for (job *j = js->table.head; j;) {
        job *next = j->tlink.next;
        gp_jobs_job_destroy(j);
        j = next;
    }
    pthread_cond_destroy(&js->keeper_wake);
    pthread_cond_destroy(&js->wake);
    pthread_mutex_destroy(&js->lock);
    free(js->threads);
    free(js);
}
