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
void gp_jobs_expire_dead_local(gp_jobs *js)
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

void *gp_jobs_keeper_main(void *arg)
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
gp_fit_job *gp_jobs_unqueue_locked(gp_jobs *js, job *j)
{
    if (j->waiting) {
        gp_jobs_list_remove(&js->waiting, j);
        j->waiting = 0;
    } else {
        gp_jobs_list_remove(&js->queue, j);
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
                w->fits[w->n_fits++] = gp_jobs_unqueue_locked(js, j);
            else
                atomic_store(&j->cancel, STOP_LOST);
            gp_jobs_table_remove_locked(js, j);
            if (gp_jobs_job_unref_locked(j))
                gp_jobs_list_push(dead, j);
        } else if (h->cancel_requested && (j->queued || j->waiting)) {
            w->fits[w->n_fits++] = gp_jobs_unqueue_locked(js, j);
            j->info.status = "cancelled";
            gp_jobs_touch_locked(j);
            gp_jobs_finished_locked(js, j, dead);
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
        int known = gp_jobs_table_find_locked(js, held[i].id) != NULL;
        pthread_mutex_unlock(&js->lock);
        if (!known)
            gp_jobs_job_release_write(js, held[i].id);
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
    gp_jobs_destroy_list(&dead);
    for (size_t i = 0; i < w.n_fits; i++)
        if (w.fits[i] && js->ops.free_job)
            js->ops.free_job(w.fits[i]);
    for (size_t i = 0; i < w.n_cancelled; i++) {
        gp_metrics_fit(js->metrics, w.cancelled[i]->method, "cancelled", 0);
        gp_jobs_job_end_write(js, w.cancelled[i]);
        gp_jobs_job_unref(js, w.cancelled[i]);
    }
    release_strays(js, held, n);
    free(held);
}

/* Queue a job claimed from the store (lock not held). 0, or -1 when it cannot
 * be queued now (it is handed back to the store). */
static int enqueue_claimed(gp_jobs *js, gp_fit_job *fj, gp_job_info *info)
{
    job *j = gp_jobs_job_new(js, fj, 1);
    if (j == NULL || (js->ops.hold && js->ops.hold(fj, info->id, js->owner) != 0)) {
        if (j)
            gp_jobs_job_destroy(j); /* frees fj */
        else if (js->ops.free_job)
            js->ops.free_job(fj);
        gp_jobs_job_release_write(js, info->id);
        return -1;
    }
    gp_job_info_free(info); /* an active job has no model text */
    int max_it = j->info.max_iterations;
    j->info = *info;
    j->info.status = "queued";
    if (j->info.max_iterations <= 0)
        j->info.max_iterations = max_it;
    pthread_mutex_lock(&js->lock);
    if (js->stopping || gp_jobs_table_find_locked(js, j->info.id)) {
        int stopping = js->stopping;
        pthread_mutex_unlock(&js->lock);
        if (stopping) /* claimed as we stop: hand it straight back */
            gp_jobs_job_release_write(js, j->info.id);
        gp_jobs_job_destroy(j);
        return -1;
    }
    j->refs = 0;
    gp_jobs_table_add_locked(js, j);
    gp_jobs_list_push(&js->queue, j);
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
 * (in batches, so a backlog goes over a few rounds); so do the data set
 * uploads whose daemon died (the first round runs at start-up), and the
 * studies' active trials of clients gone quiet expire. */
static void prune_old(gp_jobs *js)
{
    double now = gp_monotonic_seconds();
    if (js->last_prune > 0 && now - js->last_prune < PRUNE_PERIOD_SECONDS)
        return;
    size_t deleted = 0, keys = 0, audit = 0, uploads = 0;
    gp_error err;
    gp_error_clear(&err);
    if (js->ops.prune && js->retention > 0 &&
        js->ops.prune(js->api, js->retention, &deleted, &err) != 0)
        gp_log("gpserve: removing old jobs failed: %s", err.message);
    if (js->ops.prune_keys && js->key_retention > 0 &&
        js->ops.prune_keys(js->api, js->key_retention, &keys, &err) != 0)
        gp_log("gpserve: removing old idempotency keys failed: %s", err.message);
    if (js->ops.prune_audit && js->audit_retention > 0 &&
        js->ops.prune_audit(js->api, js->audit_retention, &audit, &err) != 0)
        gp_log("gpserve: removing old audit entries failed: %s", err.message);
    if (js->ops.prune_uploads &&
        js->ops.prune_uploads(js->api, GP_API_UPLOAD_STALE_SECONDS, &uploads, &err) != 0)
        gp_log("gpserve: removing abandoned data set uploads failed: %s", err.message);
    else if (uploads > 0)
        gp_log("gpserve: removed %zu data set uploads abandoned for %.0f s (their daemon "
               "stopped during them)", uploads, GP_API_UPLOAD_STALE_SECONDS);
    size_t trials = 0; /* suggestions expire their study's too: this is for the quiet ones */
    if (js->ops.expire_trials && js->ops.expire_trials(js->api, &trials, &err) != 0)
        gp_log("gpserve: expiring the trials of dead clients failed: %s", err.message);
    /* A full batch: more may be waiting; come back next round. */
    js->last_prune =
        deleted >= 1000 || keys >= 1000 || audit >= 1000 || uploads >= 100 ? 0 : now;
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
            gp_jobs_list_remove(&js->waiting, j);
            j->waiting = 0;
            gp_jobs_list_push(&js->queue, j);
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

