#include "server/jobs.h"

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

/* Finished async jobs kept in memory (older ones are answered from the store). */
#define MAX_FINISHED 1024
#define DEFAULT_LEASE_SECONDS 15.0
#define DEFAULT_MAX_ATTEMPTS 3
#define DEFAULT_RETENTION_SECONDS (7 * 24 * 3600.0)
#define DEFAULT_KEY_RETENTION_SECONDS (24 * 3600.0)
#define PRUNE_PERIOD_SECONDS 60.0
/* An async fit whose model found the disk full (insufficient_storage) runs
 * again this long after, while the disk stays full for up to
 * STORAGE_MAX_WAITS such waits (an hour); then it fails for good. */
#define STORAGE_RETRY_SECONDS 10.0
#define STORAGE_MAX_WAITS 360

/* Why a job's fit is being stopped (job.cancel). */
enum {
    STOP_NONE = 0,
    STOP_USER,     /* DELETE: the job ends cancelled */
    STOP_SHUTDOWN, /* a graceful stop: the job is handed back to the store */
    STOP_LOST,     /* another daemon took the job over: write nothing */
    STOP_GONE      /* a synchronous fit's client went away: answer nothing */
};

typedef struct job job;

/* Links of one intrusive doubly linked list. */
typedef struct job_link {
    job *prev, *next;
} job_link;

struct job {
    gp_jobs *owner;
    int async;
    gp_fit_job *fit; /* owned until the fit has run (or the job is cancelled) */
    char method[32];
    atomic_int cancel; /* STOP_* */

    /* Async: guarded by owner->lock. */
    gp_job_info info;
    uint64_t seq;      /* bumped on every change worth writing */
    int refs;          /* table + workers/requests holding the job */
    int in_table;
    int queued;        /* on the queue list (not yet taken by a worker) */
    int waiting;       /* on the waiting list: its model found the disk full */
    int storage_waits; /* times it did */
    double retry_at;   /* monotonic seconds: back on the queue (waiting) */
    int creating;      /* being written to the store by its submitter */
    int answered;      /* sync: done() is being called (its cookie may be gone) */
    int finished;      /* counted in owner->n_finished */
    double started;    /* monotonic seconds when the fit began */
    double last_save;  /* monotonic seconds of the last progress write */
    job_link tlink; /* table (creation order) */

    /* Progress writes: one at a time, newest last. */
    pthread_mutex_t save_lock;
    uint64_t saved_seq;

    /* Sync. */
    gp_job_done_fn done;
    gp_job_alive_fn alive; /* may be NULL */
    void *cookie;

    /* Queue / running list (guarded by owner->lock). */
    job_link qlink;
};

typedef struct job_list {
    job *head, *tail;
} job_list;

struct gp_jobs {
    gp_api *api;
    gp_metrics *metrics;
    gp_fit_ops ops;
    size_t queue_size, n_workers, n_started;
    pthread_t *threads;
    /* Durability: set before start, read-only after. */
    char owner[128];
    char host_prefix[80]; /* "host:" (this host's daemons) */
    double lease;
    int max_attempts;
    double retention;  /* seconds ended jobs are kept; 0 = for ever */
    double key_retention; /* seconds idempotency keys' answers are kept; 0 = for ever */
    double last_prune; /* monotonic seconds (keeper thread only) */
    pthread_t keeper;
    int keeper_started;

    pthread_mutex_t lock;
    pthread_cond_t wake;
    pthread_cond_t keeper_wake;
    int stopping;
    int keeper_stop;
    job_list queue;   /* queued, FIFO */
    job_list running; /* being fitted */
    job_list waiting; /* async, queued again once space may be back (keeper) */
    size_t n_queued, n_running;
    job_list table;   /* async jobs, linked through tlink */
    size_t n_finished;            /* async jobs in the table in a terminal state */
};

/* ---- the api as default ops ---- */
static const gp_fit_ops api_ops = {
    .run = gp_api_run_fit,
    .free_job = gp_fit_job_free,
    .name = gp_fit_job_name,
    .method = gp_fit_job_method,
    .max_iterations = gp_fit_job_max_iterations,
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
};

/* ---- lists ----
 * A job sits on two intrusive lists at once: the queue/running list (qlink) and
 * the async job table (tlink); one pair of functions serves both. */
static job_link *link_of(job *j, int table)
{
    return table ? &j->tlink : &j->qlink;
}

static void list_push_on(job_list *l, job *j, int table)
{
    job_link *lk = link_of(j, table);
    lk->next = NULL;
    lk->prev = l->tail;
    if (l->tail)
        link_of(l->tail, table)->next = j;
    else
        l->head = j;
    l->tail = j;
}

static void list_remove_on(job_list *l, job *j, int table)
{
    job_link *lk = link_of(j, table);
    if (lk->prev)
        link_of(lk->prev, table)->next = lk->next;
    else
        l->head = lk->next;
    if (lk->next)
        link_of(lk->next, table)->prev = lk->prev;
    else
        l->tail = lk->prev;
    lk->prev = lk->next = NULL;
}

static void list_push(job_list *l, job *j)
{
    list_push_on(l, j, 0);
}

static void list_remove(job_list *l, job *j)
{
    list_remove_on(l, j, 0);
}

static int terminal(const char *status)
{
    return status && (strcmp(status, "succeeded") == 0 || strcmp(status, "failed") == 0 ||
                      strcmp(status, "cancelled") == 0);
}

/* ---- job lifetime ---- */
static job *job_new(gp_jobs *js, gp_fit_job *fj, int async)
{
    job *j = calloc(1, sizeof *j);
    if (j == NULL)
        return NULL;
    j->owner = js;
    j->async = async;
    j->fit = fj;
    atomic_init(&j->cancel, STOP_NONE);
    pthread_mutex_init(&j->save_lock, NULL);
    const char *m = js->ops.method ? js->ops.method(fj) : NULL;
    snprintf(j->method, sizeof j->method, "%s", m ? m : "unknown");
    if (async) {
        const char *name = js->ops.name ? js->ops.name(fj) : NULL;
        snprintf(j->info.model_name, sizeof j->info.model_name, "%s", name ? name : "");
        j->info.status = "queued";
        j->info.max_iterations = js->ops.max_iterations ? js->ops.max_iterations(fj) : 0;
        gp_utc_now(j->info.created_at, sizeof j->info.created_at);
        memcpy(j->info.updated_at, j->info.created_at, sizeof j->info.updated_at);
        gp_error_clear(&j->info.error);
        j->seq = 1;
    }
    return j;
}

static void job_destroy(job *j)
{
    if (j->fit && j->owner->ops.free_job)
        j->owner->ops.free_job(j->fit);
    j->fit = NULL;
    free(j->info.model_json);
    j->info.model_json = NULL;
    pthread_mutex_destroy(&j->save_lock);
    free(j);
}

/* Caller holds js->lock. Returns 1 when the last reference went. */
static int job_unref_locked(job *j)
{
    return --j->refs == 0;
}

static void job_unref(gp_jobs *js, job *j)
{
    pthread_mutex_lock(&js->lock);
    int last = job_unref_locked(j);
    pthread_mutex_unlock(&js->lock);
    if (last)
        job_destroy(j);
}

static job *table_find_locked(gp_jobs *js, const char *id)
{
    for (job *j = js->table.head; j; j = j->tlink.next)
        if (strcmp(j->info.id, id) == 0)
            return j;
    return NULL;
}

static void table_add_locked(gp_jobs *js, job *j)
{
    list_push_on(&js->table, j, 1);
    j->in_table = 1;
    j->refs++;
}

/* Out of the table (lock held); the caller drops the table's reference. */
static void table_remove_locked(gp_jobs *js, job *j)
{
    list_remove_on(&js->table, j, 1);
    j->in_table = 0;
    if (j->finished) {
        j->finished = 0;
        js->n_finished--;
    }
}

/* A job reached a terminal state (lock held): count it and evict the oldest
 * finished jobs beyond MAX_FINISHED. Evicted jobs whose last reference went
 * are appended to *dead for the caller to destroy outside the lock. */
static void finished_locked(gp_jobs *js, job *done, job_list *dead)
{
    if (!done->in_table || done->finished)
        return;
    done->finished = 1;
    js->n_finished++;
    for (job *j = js->table.head; j && js->n_finished > MAX_FINISHED;) {
        job *next = j->tlink.next;
        if (j->finished) {
            table_remove_locked(js, j);
            if (job_unref_locked(j))
                list_push(dead, j);
        }
        j = next;
    }
}

static void destroy_list(job_list *dead)
{
    for (job *j = dead->head; j;) {
        job *next = j->qlink.next;
        job_destroy(j);
        j = next;
    }
    dead->head = dead->tail = NULL;
}

/* Mark a change (lock held). */
static void touch_locked(job *j)
{
    j->seq++;
    gp_utc_now(j->info.updated_at, sizeof j->info.updated_at);
}

/* ---- store writes of a held job (the caller holds a reference) ---- */

static void log_write_failure(const job *j, const char *what, const gp_error *err)
{
    gp_log("gpserve: job %s: %s failed: %s", j->info.id, what, err->message);
}

/* Write j's status (queued | running) and progress unless a newer state was
 * written already; started counts a run. GP_ECONFLICT: another daemon has
 * taken the job over. */
static int job_write(gp_jobs *js, job *j, int started)
{
    if (js->ops.update == NULL)
        return GP_OK;
    pthread_mutex_lock(&js->lock);
    gp_job_info snap = j->info; /* model_json unused by update */
    uint64_t seq = j->seq;
    pthread_mutex_unlock(&js->lock);
    int rc = GP_OK;
    pthread_mutex_lock(&j->save_lock);
    if (seq > j->saved_seq || started) {
        gp_error err;
        gp_error_clear(&err);
        rc = js->ops.update(js->api, &snap, js->owner, started, &err);
        if (rc && rc != GP_ECONFLICT)
            log_write_failure(j, "writing its progress", &err);
        j->saved_seq = seq;
    }
    pthread_mutex_unlock(&j->save_lock);
    return rc == GP_ECONFLICT ? rc : GP_OK;
}

/* Write j's end (failed or cancelled: a success is written with its model). */
static void job_end_write(gp_jobs *js, job *j)
{
    if (js->ops.finish == NULL)
        return;
    pthread_mutex_lock(&js->lock);
    gp_job_info snap = j->info;
    pthread_mutex_unlock(&js->lock);
    gp_error err;
    gp_error_clear(&err);
    pthread_mutex_lock(&j->save_lock);
    int rc = js->ops.finish(js->api, &snap, js->owner, &err);
    pthread_mutex_unlock(&j->save_lock);
    if (rc && rc != GP_ECONFLICT)
        log_write_failure(j, "writing its end", &err);
}

/* Hand a job back to the store (graceful stop). */
static void job_release_write(gp_jobs *js, const char *id)
{
    if (js->ops.release == NULL)
        return;
    gp_error err;
    gp_error_clear(&err);
    int rc = js->ops.release(js->api, id, js->owner, &err);
    if (rc && rc != GP_ECONFLICT)
        gp_log("gpserve: job %s: handing it back failed: %s", id, err.message);
}

/* ---- workers ---- */
static int on_progress(void *ctx, int iteration, int max_iterations, double objective)
{
    job *j = ctx;
    gp_jobs *js = j->owner;
    if (j->async) {
        int save = 0;
        double now = gp_monotonic_seconds();
        pthread_mutex_lock(&js->lock);
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
            touch_locked(j);
            save = 1;
        }
        pthread_mutex_unlock(&js->lock);
        if (save && job_write(js, j, 0) == GP_ECONFLICT)
            atomic_store(&j->cancel, STOP_LOST);
    } else if (j->alive && !j->alive(j->cookie)) {
        atomic_store(&j->cancel, STOP_GONE); /* the client is gone: free the worker */
    }
    return atomic_load(&j->cancel) != STOP_NONE;
}

static void respond_shutdown(gp_response *res)
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
            respond_shutdown(res);
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
    touch_locked(j);
    pthread_mutex_unlock(&js->lock);
    if (rc == 0 || why == STOP_LOST)
        return; /* a success was written with its model; a lost job is not ours */
    if (rc == GP_ECANCELLED && why != STOP_USER)
        job_release_write(js, j->info.id);
    else
        job_end_write(js, j);
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
    touch_locked(j);
    pthread_mutex_unlock(&js->lock);
    (void)job_write(js, j, 0); /* best effort: the disk is full */
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
        list_remove(&js->queue, j);
        j->queued = 0;
        js->n_queued--;
        list_push(&js->running, j);
        js->n_running++;
        if (j->async) {
            j->info.status = "running";
            j->info.attempts++;
            j->started = gp_monotonic_seconds();
            j->last_save = j->started;
            touch_locked(j);
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
    list_remove(&js->running, j);
    js->n_running--;
    int last = 0;
    gp_fit_job *release_fit = NULL;
    if (j->async && j->waiting && !js->stopping) {
        list_push(&js->waiting, j); /* keeps the worker's reference */
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
            table_remove_locked(js, j); /* GETs read the store, where the new holder writes */
            j->refs--;
        }
        if (terminal(j->info.status))
            finished_locked(js, j, &dead);
        last = job_unref_locked(j);
    }
    pthread_mutex_unlock(&js->lock);
    destroy_list(&dead);
    if (release_fit) {
        if (js->ops.free_job)
            js->ops.free_job(release_fit);
        job_release_write(js, j->info.id);
    }
    if (!j->async || last)
        job_destroy(j);
}

static void *worker_main(void *arg)
{
    gp_jobs *js = arg;
    job *j;
    while ((j = take_next(js)) != NULL) {
        /* The run counts as an attempt before it starts: a daemon that dies
         * during it leaves the count behind for --job-attempts. */
        if (j->async && job_write(js, j, 1) == GP_ECONFLICT)
            atomic_store(&j->cancel, STOP_LOST);
        run_job(js, j);
        retire(js, j);
    }
    return NULL;
}

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

void gp_jobs_set_key_retention(gp_jobs *js, double retention_seconds)
{
    if (retention_seconds >= 0)
        js->key_retention = retention_seconds;
}

const char *gp_jobs_owner(const gp_jobs *js)
{
    return js->owner;
}

/* The pid in an owner string host:pid:nonce, or -1. */
static long owner_pid(const char *owner)
{
    const char *p = strchr(owner, ':');
    if (p == NULL)
        return -1;
    char *end = NULL;
    long pid = strtol(p + 1, &end, 10);
    return end && *end == ':' && pid > 0 ? pid : -1;
}

/* At start-up: expire the leases of jobs held by dead daemons of this host
 * (their pid is gone, or is ours: a previous life of this process id, as in
 * a container restarted with the same hostname), so the first keeper round
 * takes them over at once instead of a lease later. */
static void expire_dead_local(gp_jobs *js)
{
    if (js->ops.owned == NULL || js->ops.expire == NULL)
        return;
    gp_api_job_owner *jobs = NULL;
    size_t n = 0;
    gp_error err;
    gp_error_clear(&err);
    if (js->ops.owned(js->api, js->host_prefix, &jobs, &n, &err) != 0) {
        gp_log("gpserve: listing this host's jobs failed: %s", err.message);
        return;
    }
    size_t expired = 0;
    for (size_t i = 0; i < n; i++) {
        long pid = owner_pid(jobs[i].owner);
        int dead = pid == (long)getpid() || (pid > 0 && kill((pid_t)pid, 0) != 0 && errno == ESRCH);
        if (dead && strcmp(jobs[i].owner, js->owner) != 0 &&
            js->ops.expire(js->api, jobs[i].id, jobs[i].owner, &err) == 0)
            expired++;
    }
    if (expired)
        gp_log("gpserve: %zu job%s of a stopped gpserve on this host will run again", expired,
               expired == 1 ? "" : "s");
    free(jobs);
}

/* At most a second: the keeper also watches the clients of synchronous fits. */
static double keeper_tick(const gp_jobs *js)
{
    double t = js->lease / 4.0;
    return t < 0.2 ? 0.2 : t > 1.0 ? 1.0 : t;
}

/* A running synchronous fit whose client closed its connection is cancelled
 * now, not at its next progress report (the first evaluation of a large
 * exact fit takes minutes): the fit polls the flag inside its loops. alive()
 * is a non-blocking peek at the suspended socket, asked under the lock so
 * that finish_sync cannot hand the connection back meanwhile. */
static void watch_sync_clients(gp_jobs *js)
{
    pthread_mutex_lock(&js->lock);
    for (job *j = js->running.head; j; j = j->qlink.next)
        if (!j->async && !j->answered && j->alive && atomic_load(&j->cancel) == STOP_NONE &&
            !j->alive(j->cookie))
            atomic_store(&j->cancel, STOP_GONE);
    pthread_mutex_unlock(&js->lock);
}

static void *keeper_main(void *arg)
{
    gp_jobs *js = arg;
    pthread_mutex_lock(&js->lock);
    while (!js->keeper_stop) {
        pthread_mutex_unlock(&js->lock);
        gp_jobs_keep(js);
        pthread_mutex_lock(&js->lock);
        if (js->keeper_stop)
            break;
        gp_cond_wait_ms(&js->keeper_wake, &js->lock, (long)(keeper_tick(js) * 1000.0));
    }
    pthread_mutex_unlock(&js->lock);
    return NULL;
}

int gp_jobs_start(gp_jobs *js)
{
    expire_dead_local(js);
    for (size_t i = 0; i < js->n_workers; i++) {
        if (pthread_create(&js->threads[i], NULL, worker_main, js) != 0)
            break;
        js->n_started++;
    }
    if (js->n_started < js->n_workers)
        gp_log("gpserve: started %zu of %zu fit workers", js->n_started, js->n_workers);
    if (js->n_started > 0 && pthread_create(&js->keeper, NULL, keeper_main, js) == 0)
        js->keeper_started = 1;
    else if (js->n_started > 0)
        gp_log("gpserve: the job keeper could not start; async jobs are not renewed");
    return js->n_started > 0 ? 0 : -1;
}

/* ---- the keeper's round ---- */

static const gp_api_job_hold *find_hold(const gp_api_job_hold *held, size_t n, const char *id)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(held[i].id, id) == 0)
            return &held[i];
    return NULL;
}

/* A queued job off the queue (lock held): its fit is returned for the caller
 * to free outside the lock; the queue's reference goes. */
/* Off the queue, or off the waiting list. */
static gp_fit_job *unqueue_locked(gp_jobs *js, job *j)
{
    if (j->waiting) {
        list_remove(&js->waiting, j);
        j->waiting = 0;
    } else {
        list_remove(&js->queue, j);
        j->queued = 0;
        js->n_queued--;
    }
    j->refs--; /* the queue's (the caller holds one) */
    gp_fit_job *fit = j->fit;
    j->fit = NULL;
    return fit;
}

/* Jobs the keeper acts on after its pass under the lock (each referenced). */
typedef struct keep_work {
    job *cancelled[64]; /* queued jobs cancelled by a request: write their end */
    size_t n_cancelled;
    gp_fit_job *fits[64]; /* fits of jobs off the queue: free them */
    size_t n_fits;
} keep_work;

/* Is j a job the store should list as ours (lock held)? Not while it is
 * being written, nor once ended or handed back. */
static int held_in_memory(const job *j)
{
    if (j->finished || j->creating)
        return 0;
    if (strcmp(j->info.status, "running") == 0)
        return 1;
    return strcmp(j->info.status, "queued") == 0 && (j->queued || j->waiting);
}

/* Compare memory with the store's list of jobs we hold (lock held): a job
 * missing from it was taken over by another daemon (forget it; a running fit
 * stops without writing), and one with a cancel request is cancelled. */
static void reconcile_locked(gp_jobs *js, const gp_api_job_hold *held, size_t n, keep_work *w,
                             job_list *dead)
{
    for (job *j = js->table.head; j && w->n_fits < 64 && w->n_cancelled < 64;) {
        job *next = j->tlink.next;
        const gp_api_job_hold *h = held_in_memory(j) ? find_hold(held, n, j->info.id) : NULL;
        if (!held_in_memory(j)) {
            /* nothing to reconcile */
        } else if (h == NULL) {
            if (j->queued || j->waiting)
                w->fits[w->n_fits++] = unqueue_locked(js, j);
            else
                atomic_store(&j->cancel, STOP_LOST);
            table_remove_locked(js, j);
            if (job_unref_locked(j))
                list_push(dead, j);
        } else if (h->cancel_requested && (j->queued || j->waiting)) {
            w->fits[w->n_fits++] = unqueue_locked(js, j);
            j->info.status = "cancelled";
            touch_locked(j);
            finished_locked(js, j, dead);
            j->refs++;
            w->cancelled[w->n_cancelled++] = j;
        } else if (h->cancel_requested) {
            atomic_store(&j->cancel, STOP_USER);
        }
        j = next;
    }
}

/* Jobs the store says we hold but memory does not know (a claim whose fit
 * could not be queued, a create whose hold failed): hand them back. */
static void release_strays(gp_jobs *js, const gp_api_job_hold *held, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        pthread_mutex_lock(&js->lock);
        int known = table_find_locked(js, held[i].id) != NULL;
        pthread_mutex_unlock(&js->lock);
        if (!known)
            job_release_write(js, held[i].id);
    }
}

static void renew_and_reconcile(gp_jobs *js)
{
    gp_api_job_hold *held = NULL;
    size_t n = 0;
    gp_error err;
    gp_error_clear(&err);
    if (js->ops.renew(js->api, js->owner, gp_wall_seconds() + js->lease, &held, &n, &err) != 0) {
        gp_log("gpserve: renewing job leases failed: %s", err.message);
        return;
    }
    keep_work w;
    memset(&w, 0, sizeof w);
    job_list dead = {NULL, NULL};
    pthread_mutex_lock(&js->lock);
    reconcile_locked(js, held, n, &w, &dead);
    pthread_mutex_unlock(&js->lock);
    destroy_list(&dead);
    for (size_t i = 0; i < w.n_fits; i++)
        if (w.fits[i] && js->ops.free_job)
            js->ops.free_job(w.fits[i]);
    for (size_t i = 0; i < w.n_cancelled; i++) {
        gp_metrics_fit(js->metrics, w.cancelled[i]->method, "cancelled", 0);
        job_end_write(js, w.cancelled[i]);
        job_unref(js, w.cancelled[i]);
    }
    release_strays(js, held, n);
    free(held);
}

/* Queue a job claimed from the store (lock not held). 0, or -1 when it cannot
 * be queued now (it is handed back to the store). */
static int enqueue_claimed(gp_jobs *js, gp_fit_job *fj, gp_job_info *info)
{
    job *j = job_new(js, fj, 1);
    if (j == NULL || (js->ops.hold && js->ops.hold(fj, info->id, js->owner) != 0)) {
        if (j)
            job_destroy(j); /* frees fj */
        else if (js->ops.free_job)
            js->ops.free_job(fj);
        job_release_write(js, info->id);
        return -1;
    }
    gp_job_info_free(info); /* an active job has no model text */
    int max_it = j->info.max_iterations;
    j->info = *info;
    j->info.status = "queued";
    if (j->info.max_iterations <= 0)
        j->info.max_iterations = max_it;
    pthread_mutex_lock(&js->lock);
    if (js->stopping || table_find_locked(js, j->info.id)) {
        int stopping = js->stopping;
        pthread_mutex_unlock(&js->lock);
        if (stopping) /* claimed as we stop: hand it straight back */
            job_release_write(js, j->info.id);
        job_destroy(j);
        return -1;
    }
    j->refs = 0;
    table_add_locked(js, j);
    list_push(&js->queue, j);
    j->queued = 1;
    j->refs++;
    js->n_queued++;
    pthread_cond_signal(&js->wake);
    pthread_mutex_unlock(&js->lock);
    gp_log("gpserve: job %s (model '%s') taken over from a stopped gpserve (run %d)",
           j->info.id, j->info.model_name, j->info.attempts + 1);
    return 0;
}

static int queue_has_room(gp_jobs *js)
{
    pthread_mutex_lock(&js->lock);
    int room = !js->stopping && js->n_queued < js->queue_size;
    pthread_mutex_unlock(&js->lock);
    return room;
}

/* Take over jobs whose lease expired while the queue has room. */
static void claim_expired(gp_jobs *js)
{
    if (js->ops.claim == NULL)
        return;
    while (queue_has_room(js)) {
        gp_job_info info;
        gp_fit_job *fj = NULL;
        int outcome = GP_API_CLAIM_NONE;
        gp_error err;
        gp_error_clear(&err);
        double now = gp_wall_seconds();
        int rc = js->ops.claim(js->api, js->owner, now, now + js->lease, js->max_attempts,
                               &info, &fj, &outcome, &err);
        if (rc != 0) {
            gp_log("gpserve: taking over expired jobs failed: %s", err.message);
            return;
        }
        if (outcome == GP_API_CLAIM_ENDED)
            gp_log("gpserve: job %s (model '%s') ended %s: %s", info.id, info.model_name,
                   info.status ? info.status : "?", info.error.message);
        if (outcome == GP_API_CLAIM_RUN)
            enqueue_claimed(js, fj, &info);
        gp_job_info_free(&info);
        if (outcome == GP_API_CLAIM_NONE)
            return;
    }
}

/* Ended jobs older than the retention leave the store, about once a minute
 * (in batches, so a backlog goes over a few rounds). */
static void prune_old(gp_jobs *js)
{
    double now = gp_monotonic_seconds();
    if (js->last_prune > 0 && now - js->last_prune < PRUNE_PERIOD_SECONDS)
        return;
    size_t deleted = 0, keys = 0;
    gp_error err;
    gp_error_clear(&err);
    if (js->ops.prune && js->retention > 0 &&
        js->ops.prune(js->api, js->retention, &deleted, &err) != 0)
        gp_log("gpserve: removing old jobs failed: %s", err.message);
    if (js->ops.prune_keys && js->key_retention > 0 &&
        js->ops.prune_keys(js->api, js->key_retention, &keys, &err) != 0)
        gp_log("gpserve: removing old idempotency keys failed: %s", err.message);
    /* A full batch: more may be waiting; come back next round. */
    js->last_prune = deleted >= 1000 || keys >= 1000 ? 0 : now;
}

/* Jobs whose model found the disk full, back on the queue when their wait
 * is over (however full the queue: they were admitted already). */
static void requeue_waiting(gp_jobs *js)
{
    const double now = gp_monotonic_seconds();
    pthread_mutex_lock(&js->lock);
    for (job *j = js->waiting.head; j && !js->stopping;) {
        job *next = j->qlink.next;
        if (now >= j->retry_at) {
            list_remove(&js->waiting, j);
            j->waiting = 0;
            list_push(&js->queue, j);
            j->queued = 1;
            js->n_queued++;
            pthread_cond_signal(&js->wake);
        }
        j = next;
    }
    pthread_mutex_unlock(&js->lock);
}

void gp_jobs_keep(gp_jobs *js)
{
    watch_sync_clients(js);
    requeue_waiting(js);
    if (js->ops.renew == NULL)
        return;
    renew_and_reconcile(js);
    claim_expired(js);
    prune_old(js);
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
    job *j = job_new(js, fj, 1);
    if (j == NULL)
        return refuse(err, GP_ENOMEM);
    pthread_mutex_lock(&js->lock);
    int rc = admission_locked(js);
    if (rc != 0) {
        pthread_mutex_unlock(&js->lock);
        j->fit = NULL; /* stays the caller's */
        job_destroy(j);
        return refuse(err, rc);
    }
    do
        gp_job_id_generate(j->info.id);
    while (table_find_locked(js, j->info.id) != NULL);
    j->refs = 1; /* ours */
    table_add_locked(js, j);
    j->creating = 1;
    js->n_queued++; /* its slot, held while it is written */
    pthread_mutex_unlock(&js->lock);

    rc = create_durable(js, j, fj, err);

    pthread_mutex_lock(&js->lock);
    j->creating = 0;
    if (rc != 0) {
        js->n_queued--;
        table_remove_locked(js, j);
        j->refs--;
        pthread_mutex_unlock(&js->lock);
        j->fit = NULL; /* stays the caller's */
        job_unref(js, j);
        return rc;
    }
    int stopping = js->stopping;
    if (stopping) {
        js->n_queued--; /* stored: it runs after the restart or elsewhere */
    } else {
        list_push(&js->queue, j);
        j->queued = 1;
        j->refs++; /* the queue's / the worker's */
        pthread_cond_signal(&js->wake);
    }
    pthread_mutex_unlock(&js->lock);
    if (stopping)
        job_release_write(js, j->info.id);
    snprintf(id, id_size, "%s", j->info.id);
    job_unref(js, j);
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
    job *j = job_new(js, fj, 0);
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
        job_destroy(j);
        return rc;
    }
    if (before)
        before(cookie);
    list_push(&js->queue, j);
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

void gp_jobs_get(gp_jobs *js, const char *id, gp_response *out)
{
    pthread_mutex_lock(&js->lock);
    job *j = table_find_locked(js, id);
    if (j)
        j->refs++;
    pthread_mutex_unlock(&js->lock);
    if (j == NULL) {
        respond_stored(js, id, out);
        return;
    }
    respond_job(js, j, 0, out);
    job_unref(js, j);
}

void gp_jobs_cancel(gp_jobs *js, const char *id, gp_response *out)
{
    job_list dead = {NULL, NULL};
    pthread_mutex_lock(&js->lock);
    job *j = table_find_locked(js, id);
    if (j == NULL) {
        pthread_mutex_unlock(&js->lock);
        /* Held elsewhere, or by nobody alive: the store decides. */
        js->ops.cancel_stored(js->api, id, gp_wall_seconds(), out);
        return;
    }
    j->refs++;
    const char *status = j->info.status;
    if (strcmp(status, "queued") == 0 && (j->queued || j->waiting)) {
        gp_fit_job *fit = unqueue_locked(js, j);
        j->info.status = "cancelled";
        touch_locked(j);
        finished_locked(js, j, &dead);
        pthread_mutex_unlock(&js->lock);
        destroy_list(&dead);
        if (fit && js->ops.free_job)
            js->ops.free_job(fit);
        gp_metrics_fit(js->metrics, j->method, "cancelled", 0);
        job_end_write(js, j);
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
    job_unref(js, j);
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
        list_push(&waiting, j);
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
            job_release_write(js, j->info.id); /* it runs after the restart */
            job_unref(js, j);                  /* the queue's reference */
        } else {
            gp_metrics_fit(js->metrics, j->method, "cancelled", 0);
            gp_response res;
            memset(&res, 0, sizeof res);
            respond_shutdown(&res);
            j->done(j->cookie, &res);
            job_destroy(j);
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
        job_destroy(j);
        j = next;
    }
    pthread_cond_destroy(&js->keeper_wake);
    pthread_cond_destroy(&js->wake);
    pthread_mutex_destroy(&js->lock);
    free(js->threads);
    free(js);
}
