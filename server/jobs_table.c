/* The fit queue's jobs (server/jobs.h): the intrusive lists they are on,
 * their lifetime and references, the table of async jobs, and their writes
 * to the store. The bottom of the fit queue's files (server/jobs_internal.h). */
#include "server/jobs_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "server/util.h"

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

void gp_jobs_list_push(job_list *l, job *j)
{
    list_push_on(l, j, 0);
}

void gp_jobs_list_remove(job_list *l, job *j)
{
    list_remove_on(l, j, 0);
}

int gp_jobs_terminal(const char *status)
{
    return status && (strcmp(status, "succeeded") == 0 || strcmp(status, "failed") == 0 ||
                      strcmp(status, "cancelled") == 0);
}

/* ---- job lifetime ---- */
job *gp_jobs_job_new(gp_jobs *js, gp_fit_job *fj, int async)
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

void gp_jobs_job_destroy(job *j)
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
int gp_jobs_job_unref_locked(job *j)
{
    return --j->refs == 0;
}

void gp_jobs_job_unref(gp_jobs *js, job *j)
{
    pthread_mutex_lock(&js->lock);
    int last = gp_jobs_job_unref_locked(j);
    pthread_mutex_unlock(&js->lock);
    if (last)
        gp_jobs_job_destroy(j);
}

job *gp_jobs_table_find_locked(gp_jobs *js, const char *id)
{
    for (job *j = js->table.head; j; j = j->tlink.next)
        if (strcmp(j->info.id, id) == 0)
            return j;
    return NULL;
}

void gp_jobs_table_add_locked(gp_jobs *js, job *j)
{
    list_push_on(&js->table, j, 1);
    j->in_table = 1;
    j->refs++;
}

/* Out of the table (lock held); the caller drops the table's reference. */
void gp_jobs_table_remove_locked(gp_jobs *js, job *j)
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
void gp_jobs_finished_locked(gp_jobs *js, job *done, job_list *dead)
{
    if (!done->in_table || done->finished)
        return;
    done->finished = 1;
    js->n_finished++;
    for (job *j = js->table.head; j && js->n_finished > MAX_FINISHED;) {
        job *next = j->tlink.next;
        if (j->finished) {
            gp_jobs_table_remove_locked(js, j);
            if (gp_jobs_job_unref_locked(j))
                gp_jobs_list_push(dead, j);
        }
        j = next;
    }
}

void gp_jobs_destroy_list(job_list *dead)
{
    for (job *j = dead->head; j;) {
        job *next = j->qlink.next;
        gp_jobs_job_destroy(j);
        j = next;
    }
    dead->head = dead->tail = NULL;
}

/* Mark a change (lock held). */
void gp_jobs_touch_locked(job *j)
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
int gp_jobs_job_write(gp_jobs *js, job *j, int started)
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
void gp_jobs_job_end_write(gp_jobs *js, job *j)
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
void gp_jobs_job_release_write(gp_jobs *js, const char *id)
{
    if (js->ops.release == NULL)
        return;
    gp_error err;
    gp_error_clear(&err);
    int rc = js->ops.release(js->api, id, js->owner, &err);
    if (rc && rc != GP_ECONFLICT)
        gp_log("gpserve: job %s: handing it back failed: %s", id, err.message);
}
