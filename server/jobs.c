#include "server/jobs.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/util.h"

/* Finished async jobs kept in memory (older ones are answered from the store). */
#define MAX_FINISHED 1024

typedef struct job job;

/* Links of one intrusive doubly linked list. */
typedef struct job_link {
    job *prev, *next;
} job_link;

struct job {
    gp_jobs *owner;
    int async;
    int client_gone; /* sync: the client closed its connection; nobody reads the answer */
    gp_fit_job *fit; /* owned until the fit has run (or the job is cancelled) */
    char method[32];
    atomic_int cancel;

    /* Async: guarded by owner->lock. */
    gp_job_info info;
    uint64_t seq;      /* bumped on every change worth saving */
    int refs;          /* table + workers/requests holding the job */
    int in_table;
    int finished;      /* counted in owner->n_finished */
    double started;    /* monotonic seconds when the fit began */
    double last_save;  /* monotonic seconds of the last progress save */
    job_link tlink; /* table (creation order) */

    /* Saves: one at a time, newest last. */
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

    pthread_mutex_t lock;
    pthread_cond_t wake;
    int stopping;
    job_list queue;   /* queued, FIFO */
    job_list running; /* being fitted */
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
    .save = gp_api_job_save,
    .load = gp_api_job_load,
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
    atomic_init(&j->cancel, 0);
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

static void table_remove_locked(gp_jobs *js, job *j)
{
    list_remove_on(&js->table, j, 1);
    j->in_table = 0;
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
            js->n_finished--;
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

/* Persist j's current state unless a newer one was saved already. The caller
 * holds a reference. */
static void job_save(gp_jobs *js, job *j)
{
    if (js->ops.save == NULL)
        return;
    pthread_mutex_lock(&js->lock);
    gp_job_info snap = j->info; /* model_json stays valid while referenced */
    uint64_t seq = j->seq;
    pthread_mutex_unlock(&js->lock);
    pthread_mutex_lock(&j->save_lock);
    if (seq > j->saved_seq) {
        gp_error err;
        gp_error_clear(&err);
        if (js->ops.save(js->api, &snap, &err) != 0)
            gp_log("gpserve: job %s: saving its state failed: %s", snap.id, err.message);
        j->saved_seq = seq;
    }
    pthread_mutex_unlock(&j->save_lock);
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
        if (save)
            job_save(js, j);
    } else if (j->alive && !j->alive(j->cookie)) {
        j->client_gone = 1;
        atomic_store(&j->cancel, 1); /* the client is gone: free the worker */
    }
    return atomic_load(&j->cancel) ? 1 : 0;
}

static void respond_shutdown(gp_response *res)
{
    gp_api_fail(res, GP_ENOTREADY, NULL, "the server is shutting down; the fit was cancelled");
}

static void run_job(gp_jobs *js, job *j)
{
    gp_response res;
    memset(&res, 0, sizeof res);
    double secs = 0;
    double t0 = gp_monotonic_seconds();
    int rc;
    if (!j->async && j->alive && !j->alive(j->cookie)) {
        j->client_gone = 1;
        atomic_store(&j->cancel, 1); /* gone while queued */
    }
    if (atomic_load(&j->cancel))
        rc = GP_ECANCELLED;
    else
        rc = js->ops.run(js->api, j->fit, on_progress, j, &res, &secs);
    double wall = gp_monotonic_seconds() - t0;
    if (secs <= 0)
        secs = wall;
    const char *outcome = rc == 0 ? "succeeded" : rc == GP_ECANCELLED ? "cancelled" : "failed";
    gp_metrics_fit(js->metrics, j->method, outcome, secs);
    if (js->ops.free_job && j->fit)
        js->ops.free_job(j->fit);
    j->fit = NULL;

    if (!j->async) {
        if (rc == GP_ECANCELLED) {
            /* Status 0 when the client is gone: no answer, the connection is
             * closed; at shutdown the client still waits and reads why. */
            gp_response_free(&res);
            memset(&res, 0, sizeof res);
            if (!j->client_gone)
                respond_shutdown(&res);
        } else if (res.status == 0) {
            gp_api_fail(&res, GP_EINTERNAL, NULL, "the fit produced no response");
        }
        j->done(j->cookie, &res);
        return;
    }

    char *model_json = NULL;
    gp_error err;
    gp_error_clear(&err);
    if (rc == 0 && res.body) {
        model_json = malloc(res.body_len + 1);
        if (model_json) {
            memcpy(model_json, res.body, res.body_len);
            model_json[res.body_len] = '\0';
        }
    } else if (rc != 0 && rc != GP_ECANCELLED) {
        err.code = rc;
        if (!gp_json_find_string(res.body, res.body_len, "message", err.message,
                                 sizeof err.message))
            snprintf(err.message, sizeof err.message, "%s", gp_status_name(rc));
        gp_json_find_string(res.body, res.body_len, "field", err.field, sizeof err.field);
    }
    gp_response_free(&res);
    pthread_mutex_lock(&js->lock);
    j->info.status = outcome;
    j->info.elapsed_seconds = wall;
    j->info.model_json = model_json;
    j->info.error = err;
    touch_locked(j);
    pthread_mutex_unlock(&js->lock);
    job_save(js, j);
}

static void *worker_main(void *arg)
{
    gp_jobs *js = arg;
    for (;;) {
        pthread_mutex_lock(&js->lock);
        while (js->queue.head == NULL && !js->stopping)
            pthread_cond_wait(&js->wake, &js->lock);
        job *j = js->queue.head;
        if (j == NULL) {
            pthread_mutex_unlock(&js->lock);
            break;
        }
        list_remove(&js->queue, j);
        js->n_queued--;
        list_push(&js->running, j);
        js->n_running++;
        if (j->async) {
            j->info.status = "running";
            j->started = gp_monotonic_seconds();
            j->last_save = j->started;
            touch_locked(j);
        }
        pthread_mutex_unlock(&js->lock);
        if (j->async)
            job_save(js, j);

        run_job(js, j);

        job_list dead = {NULL, NULL};
        pthread_mutex_lock(&js->lock);
        list_remove(&js->running, j);
        js->n_running--;
        int last = 0;
        if (j->async) {
            finished_locked(js, j, &dead);
            last = job_unref_locked(j);
        }
        pthread_mutex_unlock(&js->lock);
        destroy_list(&dead);
        if (!j->async || last)
            job_destroy(j);
    }
    return NULL;
}

/* ---- public ---- */
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
    js->threads = calloc(js->n_workers, sizeof *js->threads);
    if (js->threads == NULL) {
        free(js);
        return NULL;
    }
    pthread_mutex_init(&js->lock, NULL);
    pthread_cond_init(&js->wake, NULL);
    return js;
}

int gp_jobs_start(gp_jobs *js)
{
    for (size_t i = 0; i < js->n_workers; i++) {
        if (pthread_create(&js->threads[i], NULL, worker_main, js) != 0)
            break;
        js->n_started++;
    }
    if (js->n_started < js->n_workers)
        gp_log("gpserve: started %zu of %zu fit workers", js->n_started, js->n_workers);
    return js->n_started > 0 ? 0 : -1;
}

/* May another job be queued (lock held)? 0, or why not. */
static int admission_locked(const gp_jobs *js)
{
    if (js->stopping)
        return GP_ENOTREADY;
    if (js->n_queued >= js->queue_size)
        return GP_EOVERLOADED;
    return 0;
}

int gp_jobs_submit_async(gp_jobs *js, gp_fit_job *fj, char *id, size_t id_size)
{
    job *j = job_new(js, fj, 1);
    if (j == NULL)
        return GP_ENOMEM;
    pthread_mutex_lock(&js->lock);
    int rc = admission_locked(js);
    if (rc != 0) {
        pthread_mutex_unlock(&js->lock);
        j->fit = NULL; /* stays the caller's */
        job_destroy(j);
        return rc;
    }
    do
        gp_job_id_generate(j->info.id);
    while (table_find_locked(js, j->info.id) != NULL);
    j->refs = 1; /* ours, until saved */
    table_add_locked(js, j);
    j->refs++; /* the queue's / the worker's */
    list_push(&js->queue, j);
    js->n_queued++;
    snprintf(id, id_size, "%s", j->info.id);
    pthread_cond_signal(&js->wake);
    pthread_mutex_unlock(&js->lock);
    job_save(js, j);
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
    js->n_queued++;
    pthread_cond_signal(&js->wake);
    pthread_mutex_unlock(&js->lock);
    return 0;
}

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

static void respond_stored(gp_jobs *js, const char *id, int for_cancel, gp_response *out)
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
    if (!for_cancel)
        gp_api_job_response(&info, out);
    else if (terminal(info.status))
        gp_api_fail(out, GP_ECONFLICT, "id", "job '%s' already finished (%s)", id, info.status);
    else
        gp_api_fail(out, GP_ECONFLICT, "id",
                    "job '%s' is %s in another gpserve process; cancel it there", id,
                    info.status ? info.status : "held");
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
        respond_stored(js, id, 0, out);
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
        respond_stored(js, id, 1, out);
        return;
    }
    j->refs++;
    const char *status = j->info.status;
    if (strcmp(status, "queued") == 0) {
        list_remove(&js->queue, j);
        js->n_queued--;
        j->refs--; /* the queue's reference (we still hold ours) */
        gp_fit_job *fit = j->fit;
        j->fit = NULL;
        j->info.status = "cancelled";
        touch_locked(j);
        finished_locked(js, j, &dead);
        pthread_mutex_unlock(&js->lock);
        destroy_list(&dead);
        if (fit && js->ops.free_job)
            js->ops.free_job(fit);
        gp_metrics_fit(js->metrics, j->method, "cancelled", 0);
        job_save(js, j);
        respond_job(js, j, 200, out);
    } else if (strcmp(status, "running") == 0) {
        atomic_store(&j->cancel, 1);
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

void gp_jobs_shutdown(gp_jobs *js)
{
    job_list dead = {NULL, NULL};
    pthread_mutex_lock(&js->lock);
    js->stopping = 1;
    job_list cancelled = js->queue;
    js->queue.head = js->queue.tail = NULL;
    js->n_queued = 0;
    for (job *j = cancelled.head; j; j = j->qlink.next) {
        if (j->async) {
            j->info.status = "cancelled";
            touch_locked(j);
            finished_locked(js, j, &dead);
        }
    }
    for (job *j = js->running.head; j; j = j->qlink.next)
        atomic_store(&j->cancel, 1);
    pthread_cond_broadcast(&js->wake);
    pthread_mutex_unlock(&js->lock);
    destroy_list(&dead);

    for (job *j = cancelled.head; j;) {
        job *next = j->qlink.next;
        if (j->fit && js->ops.free_job)
            js->ops.free_job(j->fit);
        j->fit = NULL;
        gp_metrics_fit(js->metrics, j->method, "cancelled", 0);
        if (j->async) {
            job_save(js, j);
            job_unref(js, j); /* the queue's reference */
        } else {
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
}

void gp_jobs_free(gp_jobs *js)
{
    if (js == NULL)
        return;
    for (job *j = js->table.head; j;) {
        job *next = j->tlink.next;
        job_destroy(j);
        j = next;
    }
    pthread_cond_destroy(&js->wake);
    pthread_mutex_destroy(&js->lock);
    free(js->threads);
    free(js);
}
