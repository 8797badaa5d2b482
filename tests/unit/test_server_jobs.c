/* Unit tests for server/'s fit queue (jobs.h), with fake fit jobs instead of
 * the api's, so no fit runs: the queue without workers, synchronous fits whose
 * client goes away, workers, the lease keeper over a fake store (renewals,
 * claims, pruning of jobs and idempotency keys), and eviction. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/config.h"
#include "server/jobs.h"
#include "server/metrics.h"
#include "server/route.h"
#include "server/slots.h"
#include "server/util.h"

/* ---- the fit queue, with fake fit jobs ---- */

typedef struct fake_fit {
    char name[16];
    int iterations; /* progress calls before finishing */
    int rc;         /* result when not cancelled */
    int *freed;
} fake_fit;

static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fake_cond = PTHREAD_COND_INITIALIZER;
static int fake_gate_open = 1; /* fits wait while 0 */
static int fake_started;
static int fake_saves;
static char fake_last_status[16];

static int fake_run(gp_api *api, gp_fit_job *job, gp_progress_fn progress, void *ctx,
                    gp_response *out, double *fit_seconds)
{
    (void)api;
    fake_fit *f = (fake_fit *)job;
    pthread_mutex_lock(&fake_lock);
    fake_started++;
    pthread_cond_broadcast(&fake_cond);
    pthread_mutex_unlock(&fake_lock);
    for (int i = 0; i < f->iterations; i++) {
        pthread_mutex_lock(&fake_lock);
        while (!fake_gate_open)
            pthread_cond_wait(&fake_cond, &fake_lock);
        pthread_mutex_unlock(&fake_lock);
        if (progress(ctx, i + 1, f->iterations, -1.0 * i)) {
            gp_api_fail(out, GP_ECANCELLED, NULL, "cancelled");
            return GP_ECANCELLED;
        }
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    *fit_seconds = 0.01;
    if (f->rc != 0) {
        gp_api_fail(out, f->rc, "X[0]", "bad \"data\"");
        return f->rc;
    }
    out->status = 201;
    out->content_type = "application/json";
    out->body = strdup("{\"name\":\"m\",\"version\":1}");
    out->body_len = strlen(out->body);
    return 0;
}

static void fake_free(gp_fit_job *job)
{
    fake_fit *f = (fake_fit *)job;
    if (f->freed)
        (*f->freed)++;
    free(f);
}

static const char *fake_name(const gp_fit_job *job)
{
    return ((const fake_fit *)job)->name;
}

static const char *fake_method(const gp_fit_job *job)
{
    (void)job;
    return "exact";
}

static int fake_max_iterations(const gp_fit_job *job)
{
    return ((const fake_fit *)job)->iterations;
}

static int fake_releases;

static void fake_record(const char *status)
{
    pthread_mutex_lock(&fake_lock);
    fake_saves++;
    snprintf(fake_last_status, sizeof fake_last_status, "%s", status);
    pthread_mutex_unlock(&fake_lock);
}

static int fake_update(gp_api *api, const gp_job_info *job, const char *owner, int started,
                       gp_error *err)
{
    (void)api;
    (void)owner;
    (void)started;
    (void)err;
    fake_record(job->status);
    return 0;
}

static int fake_finish(gp_api *api, const gp_job_info *job, const char *owner, gp_error *err)
{
    (void)api;
    (void)owner;
    (void)err;
    fake_record(job->status);
    return 0;
}

static int fake_release(gp_api *api, const char *id, const char *owner, gp_error *err)
{
    (void)api;
    (void)id;
    (void)owner;
    (void)err;
    pthread_mutex_lock(&fake_lock);
    fake_releases++;
    pthread_mutex_unlock(&fake_lock);
    fake_record("released");
    return 0;
}

static int fake_load(gp_api *api, const char *id, gp_job_info *job, gp_error *err)
{
    (void)api;
    memset(job, 0, sizeof *job);
    if (strcmp(id, "elsewhere") == 0) {
        snprintf(job->id, sizeof job->id, "%s", id);
        job->status = "succeeded";
        return 0;
    }
    return gp_error_set(err, GP_ENOTFOUND, "id", "job '%s' not found", id);
}

/* DELETE of a job not held here: the fake store has only "elsewhere", ended. */
static void fake_cancel_stored(gp_api *api, const char *id, double now, gp_response *out)
{
    (void)api;
    (void)now;
    if (strcmp(id, "elsewhere") == 0)
        gp_api_fail(out, GP_ECONFLICT, "id", "job '%s' already finished (succeeded)", id);
    else
        gp_api_fail(out, GP_ENOTFOUND, "id", "job '%s' not found", id);
}

/* No store: the durable-job entries that only write are recorded; renew and
 * claim stay NULL (no keeper rounds over a store). */
static const gp_fit_ops fake_ops = {.run = fake_run,
                                    .free_job = fake_free,
                                    .name = fake_name,
                                    .method = fake_method,
                                    .max_iterations = fake_max_iterations,
                                    .load = fake_load,
                                    .update = fake_update,
                                    .finish = fake_finish,
                                    .release = fake_release,
                                    .cancel_stored = fake_cancel_stored};

static gp_fit_job *fake_job(const char *name, int iterations, int rc, int *freed)
{
    fake_fit *f = calloc(1, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->iterations = iterations;
    f->rc = rc;
    f->freed = freed;
    return (gp_fit_job *)f;
}

static int response_has(const gp_response *res, const char *text)
{
    if (res->body == NULL)
        return 0;
    char *s = strndup(res->body, res->body_len);
    int found = strstr(s, text) != NULL;
    free(s);
    return found;
}

static void test_jobs_queue_without_workers(void **state)
{
    (void)state;
    int freed = 0;
    gp_metrics *m = gp_metrics_new();
    gp_jobs *js = gp_jobs_new(NULL, 2, 1, m, &fake_ops);
    assert_non_null(js);
    char id1[40], id2[40], id3[40];
    assert_int_equal(gp_jobs_submit_async(js, fake_job("a", 3, 0, &freed), id1, sizeof id1, NULL), 0);
    assert_int_equal(gp_jobs_submit_async(js, fake_job("b", 3, 0, &freed), id2, sizeof id2, NULL), 0);
    gp_fit_job *third = fake_job("c", 3, 0, &freed);
    assert_int_equal(gp_jobs_submit_async(js, third, id3, sizeof id3, NULL), GP_EOVERLOADED);
    assert_int_equal(gp_jobs_submit_sync(js, third, NULL, NULL, NULL), GP_EOVERLOADED);
    fake_free(third); /* still ours after a refusal */
    assert_int_equal(freed, 1);
    assert_int_equal(strlen(id1), 32);
    assert_string_not_equal(id1, id2);
    size_t queued, running;
    gp_jobs_counts(js, &queued, &running);
    assert_int_equal(queued, 2);
    assert_int_equal(running, 0);

    gp_response res;
    memset(&res, 0, sizeof res);
    gp_jobs_get(js, id1, &res);
    assert_int_equal(res.status, 200);
    assert_true(response_has(&res, "\"queued\""));
    gp_response_free(&res);

    /* cancel a queued job: removed, cancelled, its fit freed */
    gp_jobs_cancel(js, id1, &res);
    assert_int_equal(res.status, 200);
    assert_true(response_has(&res, "\"cancelled\""));
    gp_response_free(&res);
    assert_int_equal(freed, 2);
    gp_jobs_counts(js, &queued, &running);
    assert_int_equal(queued, 1);
    pthread_mutex_lock(&fake_lock);
    assert_string_equal(fake_last_status, "cancelled");
    pthread_mutex_unlock(&fake_lock);
    /* cancelling again: already finished */
    gp_jobs_cancel(js, id1, &res);
    assert_int_equal(res.status, 409);
    gp_response_free(&res);

    /* unknown: the store says 404; another daemon's finished job: 200 / 409 */
    gp_jobs_get(js, "nosuchjob", &res);
    assert_int_equal(res.status, 404);
    gp_response_free(&res);
    gp_jobs_cancel(js, "nosuchjob", &res);
    assert_int_equal(res.status, 404);
    gp_response_free(&res);
    gp_jobs_get(js, "elsewhere", &res);
    assert_int_equal(res.status, 200);
    gp_response_free(&res);
    gp_jobs_cancel(js, "elsewhere", &res);
    assert_int_equal(res.status, 409);
    gp_response_free(&res);

    /* a freed slot takes a new job */
    assert_int_equal(
        gp_jobs_submit_async(js, fake_job("d", 3, 0, &freed), id3, sizeof id3, NULL), 0);
    int released = fake_releases;
    gp_jobs_shutdown(js); /* hands the two queued ones back to the store */
    assert_int_equal(freed, 4);
    assert_int_equal(fake_releases, released + 2);
    gp_jobs_get(js, id2, &res);
    assert_true(response_has(&res, "\"queued\""));
    gp_response_free(&res);
    char id4[40];
    gp_fit_job *late = fake_job("e", 1, 0, &freed);
    assert_int_equal(gp_jobs_submit_async(js, late, id4, sizeof id4, NULL), GP_ENOTREADY);
    assert_int_equal(freed, 4);
    fake_free(late);
    gp_jobs_free(js);
    gp_metrics_free(m);
}

typedef struct sync_result {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int before, done;
    gp_response res;
} sync_result;

static void sync_before(void *cookie)
{
    sync_result *r = cookie;
    r->before++; /* called under the queue lock */
}

static void sync_done(void *cookie, gp_response *res)
{
    sync_result *r = cookie;
    pthread_mutex_lock(&r->lock);
    r->res = *res;
    memset(res, 0, sizeof *res);
    r->done++;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
}

/* A synchronous fit's client that goes away after `calls` checks. */
typedef struct watched {
    sync_result r;
    atomic_int calls, gone_after;
} watched;

static int watched_alive(void *cookie)
{
    watched *w = cookie;
    return atomic_fetch_add(&w->calls, 1) < atomic_load(&w->gone_after);
}

static void watched_done(void *cookie, gp_response *res)
{
    sync_done(&((watched *)cookie)->r, res);
}

static void wait_done(sync_result *r)
{
    pthread_mutex_lock(&r->lock);
    while (!r->done)
        pthread_cond_wait(&r->cond, &r->lock);
    pthread_mutex_unlock(&r->lock);
}

/* A synchronous fit whose client disconnects is cancelled at its next
 * progress report and frees the worker: a long fit (100000 fake iterations)
 * ends after the client goes, and the next fit runs on the one worker. */
static void test_jobs_sync_client_gone(void **state)
{
    (void)state;
    int freed = 0;
    gp_metrics *m = gp_metrics_new();
    gp_jobs *js = gp_jobs_new(NULL, 4, 1, m, &fake_ops);
    assert_int_equal(gp_jobs_start(js), 0);
    watched w;
    memset(&w, 0, sizeof w);
    pthread_mutex_init(&w.r.lock, NULL);
    pthread_cond_init(&w.r.cond, NULL);
    atomic_init(&w.calls, 0);
    atomic_init(&w.gone_after, 3); /* the start check and two progress reports */
    assert_int_equal(gp_jobs_submit_sync_watched(js, fake_job("gone", 100000, 0, &freed), NULL,
                                                 watched_done, watched_alive, &w),
                     0);
    wait_done(&w.r);
    assert_int_equal(w.r.res.status, 0); /* no answer: the client is gone */
    /* cancelled at the first "gone" (the keeper, once a second, may ask once more) */
    assert_in_range(atomic_load(&w.calls), 4, 5);
    gp_response_free(&w.r.res);
    /* Gone before it starts: never run. */
    watched w2;
    memset(&w2, 0, sizeof w2);
    pthread_mutex_init(&w2.r.lock, NULL);
    pthread_cond_init(&w2.r.cond, NULL);
    atomic_init(&w2.calls, 0);
    atomic_init(&w2.gone_after, 0);
    int started = fake_started;
    assert_int_equal(gp_jobs_submit_sync_watched(js, fake_job("gone2", 5, 0, &freed), NULL,
                                                 watched_done, watched_alive, &w2),
                     0);
    wait_done(&w2.r);
    assert_int_equal(fake_started, started);
    assert_int_equal(w2.r.res.status, 0);
    gp_response_free(&w2.r.res);
    /* The worker is free: a plain synchronous fit completes. */
    sync_result r;
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.lock, NULL);
    pthread_cond_init(&r.cond, NULL);
    assert_int_equal(gp_jobs_submit_sync(js, fake_job("next", 2, 0, &freed), NULL, sync_done, &r),
                     0);
    wait_done(&r);
    assert_int_equal(r.res.status, 201);
    gp_response_free(&r.res);
    gp_jobs_shutdown(js);
    gp_jobs_free(js);
    gp_metrics_free(m);
    assert_int_equal(freed, 3);
}

static void wait_status(gp_jobs *js, const char *id, const char *status)
{
    char want[40];
    snprintf(want, sizeof want, "\"status\":\"%s\"", status);
    for (int i = 0; i < 5000; i++) {
        gp_response res;
        memset(&res, 0, sizeof res);
        gp_jobs_get(js, id, &res);
        int ok = response_has(&res, want);
        gp_response_free(&res);
        if (ok)
            return;
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    fail_msg("job %s never reached %s", id, status);
}

static void test_jobs_with_workers(void **state)
{
    (void)state;
    int freed = 0;
    fake_started = 0;
    gp_metrics *m = gp_metrics_new();
    gp_jobs *js = gp_jobs_new(NULL, 4, 1, m, &fake_ops);
    assert_int_equal(gp_jobs_start(js), 0);

    /* a synchronous fit completes through the callback */
    sync_result r;
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.lock, NULL);
    pthread_cond_init(&r.cond, NULL);
    assert_int_equal(gp_jobs_submit_sync(js, fake_job("s", 2, 0, &freed), sync_before, sync_done,
                                         &r),
                     0);
    pthread_mutex_lock(&r.lock);
    while (!r.done)
        pthread_cond_wait(&r.cond, &r.lock);
    pthread_mutex_unlock(&r.lock);
    assert_int_equal(r.before, 1);
    assert_int_equal(r.res.status, 201);
    gp_response_free(&r.res);

    /* async: success, failure */
    char ok_id[40], bad_id[40], slow_id[40], queued_id[40];
    assert_int_equal(gp_jobs_submit_async(js, fake_job("ok", 2, 0, &freed), ok_id, 40, NULL), 0);
    assert_int_equal(gp_jobs_submit_async(js, fake_job("bad", 1, GP_EDATA, &freed), bad_id, 40, NULL),
                     0);
    wait_status(js, ok_id, "succeeded");
    wait_status(js, bad_id, "failed");
    gp_response res;
    memset(&res, 0, sizeof res);
    gp_jobs_get(js, ok_id, &res);
    assert_true(response_has(&res, "\"model\""));
    gp_response_free(&res);
    gp_jobs_get(js, bad_id, &res);
    assert_true(response_has(&res, "invalid_data"));
    assert_true(response_has(&res, "bad \\\"data\\\""));
    gp_response_free(&res);

    /* a running job is cancelled through the progress callback */
    pthread_mutex_lock(&fake_lock);
    fake_gate_open = 0;
    int started = fake_started;
    pthread_mutex_unlock(&fake_lock);
    assert_int_equal(gp_jobs_submit_async(js, fake_job("slow", 1000000, 0, &freed), slow_id, 40, NULL),
                     0);
    assert_int_equal(gp_jobs_submit_async(js, fake_job("q", 5, 0, &freed), queued_id, 40, NULL), 0);
    pthread_mutex_lock(&fake_lock);
    while (fake_started == started)
        pthread_cond_wait(&fake_cond, &fake_lock);
    pthread_mutex_unlock(&fake_lock);
    wait_status(js, slow_id, "running");
    gp_jobs_cancel(js, slow_id, &res);
    assert_int_equal(res.status, 202);
    gp_response_free(&res);
    pthread_mutex_lock(&fake_lock);
    fake_gate_open = 1;
    pthread_cond_broadcast(&fake_cond);
    pthread_mutex_unlock(&fake_lock);
    wait_status(js, slow_id, "cancelled");
    wait_status(js, queued_id, "succeeded");
    gp_jobs_cancel(js, queued_id, &res);
    assert_int_equal(res.status, 409);
    gp_response_free(&res);

    size_t queued, running;
    gp_jobs_counts(js, &queued, &running);
    assert_int_equal(queued, 0);
    assert_int_equal(running, 0);

    /* shutdown stops a running fit; a queued synchronous one gets 503 */
    pthread_mutex_lock(&fake_lock);
    started = fake_started;
    pthread_mutex_unlock(&fake_lock);
    assert_int_equal(gp_jobs_submit_async(js, fake_job("long", 1000000, 0, &freed), slow_id, 40, NULL),
                     0);
    pthread_mutex_lock(&fake_lock);
    while (fake_started == started)
        pthread_cond_wait(&fake_cond, &fake_lock);
    pthread_mutex_unlock(&fake_lock);
    memset(&r.res, 0, sizeof r.res);
    r.done = 0;
    assert_int_equal(gp_jobs_submit_sync(js, fake_job("s2", 2, 0, &freed), sync_before, sync_done,
                                         &r),
                     0);
    int released = fake_releases;
    gp_jobs_shutdown(js);
    assert_int_equal(r.done, 1);
    assert_int_equal(r.res.status, 503);
    gp_response_free(&r.res);
    /* the running async fit was stopped and handed back, to run after a restart */
    wait_status(js, slow_id, "queued");
    assert_int_equal(fake_releases, released + 1);
    assert_int_equal(freed, 7);
    pthread_mutex_lock(&fake_lock);
    assert_true(fake_saves > 0);
    pthread_mutex_unlock(&fake_lock);

    size_t len;
    gp_metrics_gauges g;
    memset(&g, 0, sizeof g);
    char *text = gp_metrics_render(m, &g, &len);
    assert_non_null(strstr(text, "gpserve_fits_total{method=\"exact\",outcome=\"succeeded\"} 3"));
    assert_non_null(strstr(text, "gpserve_fits_total{method=\"exact\",outcome=\"failed\"} 1"));
    assert_non_null(strstr(text, "gpserve_fits_total{method=\"exact\",outcome=\"cancelled\"} 3"));
    free(text);
    gp_jobs_free(js);
    gp_metrics_free(m);
    pthread_mutex_destroy(&r.lock);
    pthread_cond_destroy(&r.cond);
}

/* ---- the lease keeper, over a fake store ---- */

static gp_api_job_hold fake_held[4]; /* what the fake store says we hold */
static size_t fake_n_held;
static int fake_claims_left;         /* jobs the fake store lets us take over */
static int *fake_claim_freed;

static int fake_renew(gp_api *api, const char *owner, double lease_until,
                      gp_api_job_hold **held, size_t *count, gp_error *err)
{
    (void)api;
    (void)owner;
    (void)lease_until;
    (void)err;
    pthread_mutex_lock(&fake_lock);
    *count = fake_n_held;
    *held = fake_n_held ? calloc(fake_n_held, sizeof **held) : NULL;
    if (fake_n_held)
        memcpy(*held, fake_held, fake_n_held * sizeof **held);
    pthread_mutex_unlock(&fake_lock);
    return 0;
}

static int fake_claim(gp_api *api, const char *owner, double now, double lease_until,
                      int max_attempts, gp_job_info *job, gp_fit_job **fj, int *outcome,
                      gp_error *err)
{
    (void)api;
    (void)owner;
    (void)now;
    (void)lease_until;
    (void)max_attempts;
    (void)err;
    memset(job, 0, sizeof *job);
    *fj = NULL;
    *outcome = GP_API_CLAIM_NONE;
    if (fake_claims_left == 0)
        return 0;
    fake_claims_left--;
    snprintf(job->id, sizeof job->id, "taken-over");
    snprintf(job->model_name, sizeof job->model_name, "t");
    job->status = "queued";
    job->attempts = 1;
    *fj = fake_job("t", 2, 0, fake_claim_freed);
    *outcome = GP_API_CLAIM_RUN;
    return 0;
}

/* The keeper: a job missing from the store's list was taken over by another
 * daemon (its fit stops and nothing is written; GETs read the store); a job
 * with a cancel request is cancelled; a job whose lease expired is taken over
 * and run. */
static void test_jobs_keeper(void **state)
{
    (void)state;
    int freed = 0;
    fake_claim_freed = &freed;
    fake_claims_left = 0;
    gp_fit_ops ops = fake_ops;
    ops.renew = fake_renew;
    ops.claim = fake_claim;
    gp_jobs *js = gp_jobs_new(NULL, 4, 1, NULL, &ops);
    /* No worker yet: both jobs stay queued. */
    char lost[40], asked[40];
    assert_int_equal(gp_jobs_submit_async(js, fake_job("l", 3, 0, &freed), lost, 40, NULL), 0);
    assert_int_equal(gp_jobs_submit_async(js, fake_job("c", 3, 0, &freed), asked, 40, NULL), 0);
    pthread_mutex_lock(&fake_lock);
    fake_n_held = 1;
    snprintf(fake_held[0].id, sizeof fake_held[0].id, "%s", asked);
    fake_held[0].cancel_requested = 1;
    snprintf(fake_last_status, sizeof fake_last_status, "-");
    pthread_mutex_unlock(&fake_lock);
    gp_jobs_keep(js);
    size_t queued, running;
    gp_jobs_counts(js, &queued, &running);
    assert_int_equal(queued, 0);
    assert_int_equal(freed, 2);
    gp_response res;
    memset(&res, 0, sizeof res);
    gp_jobs_get(js, lost, &res); /* forgotten here: the (fake) store does not know it */
    assert_int_equal(res.status, 404);
    gp_response_free(&res);
    gp_jobs_get(js, asked, &res);
    assert_true(response_has(&res, "\"cancelled\""));
    gp_response_free(&res);
    pthread_mutex_lock(&fake_lock);
    assert_string_equal(fake_last_status, "cancelled");
    fake_n_held = 0;
    pthread_mutex_unlock(&fake_lock);

    /* A job of a dead daemon: taken over, run, succeeded. */
    fake_claims_left = 1;
    assert_int_equal(gp_jobs_start(js), 0); /* the keeper's first round claims it */
    wait_status(js, "taken-over", "succeeded");
    assert_int_equal(fake_claims_left, 0);
    gp_jobs_get(js, "taken-over", &res);
    assert_true(response_has(&res, "\"attempts\":2"));
    gp_response_free(&res);
    gp_jobs_shutdown(js);
    gp_jobs_free(js);
    assert_int_equal(freed, 3);
}

/* The keeper removes ended jobs and idempotency keys past their retentions
 * (about once a minute: the first round prunes), keys with
 * --idempotency-hours (24 by default), and not at all with retention 0. */
static double fake_pruned_jobs_age, fake_pruned_keys_age;

static int fake_prune(gp_api *api, double age, size_t *deleted, gp_error *err)
{
    (void)api;
    (void)err;
    fake_pruned_jobs_age = age;
    *deleted = 0;
    return 0;
}

static int fake_prune_keys(gp_api *api, double age, size_t *deleted, gp_error *err)
{
    (void)api;
    (void)err;
    fake_pruned_keys_age = age;
    *deleted = 0;
    return 0;
}

static void test_jobs_keeper_prunes_keys(void **state)
{
    (void)state;
    gp_fit_ops ops = fake_ops;
    ops.renew = fake_renew; /* the keeper's round runs with a store (here, a fake one) */
    ops.claim = fake_claim;
    fake_n_held = 0;
    fake_claims_left = 0;
    ops.prune = fake_prune;
    ops.prune_keys = fake_prune_keys;
    const double hours[] = {-1, 5, 0}; /* -1: the default */
    const double expect[] = {24 * 3600.0, 5 * 3600.0, -1};
    for (int i = 0; i < 3; i++) {
        gp_jobs *js = gp_jobs_new(NULL, 4, 1, NULL, &ops);
        if (hours[i] >= 0)
            gp_jobs_set_key_retention(js, 3600.0 * hours[i]);
        fake_pruned_jobs_age = fake_pruned_keys_age = -1;
        gp_jobs_keep(js);
        assert_true(fake_pruned_keys_age == expect[i]);
        assert_true(fake_pruned_jobs_age == 7 * 24 * 3600.0); /* jobs as before */
        gp_jobs_free(js);
    }
}

/* Finished jobs beyond the in-memory limit are answered from the store. */
static void test_jobs_eviction(void **state)
{
    (void)state;
    int freed = 0;
    gp_jobs *js = gp_jobs_new(NULL, 1, 1, NULL, &fake_ops);
    char first[40] = "", last[40] = "";
    gp_response res;
    memset(&res, 0, sizeof res);
    for (int i = 0; i < 1100; i++) {
        char id[40];
        assert_int_equal(gp_jobs_submit_async(js, fake_job("x", 1, 0, &freed), id, sizeof id, NULL), 0);
        gp_jobs_cancel(js, id, &res);
        assert_int_equal(res.status, 200);
        gp_response_free(&res);
        if (i == 0)
            memcpy(first, id, sizeof id);
        memcpy(last, id, sizeof id);
    }
    assert_int_equal(freed, 1100);
    gp_jobs_get(js, last, &res);
    assert_int_equal(res.status, 200);
    gp_response_free(&res);
    gp_jobs_get(js, first, &res); /* evicted: the (fake) store does not know it */
    assert_int_equal(res.status, 404);
    gp_response_free(&res);
    gp_jobs_shutdown(js);
    gp_jobs_free(js);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jobs_queue_without_workers),
        cmocka_unit_test(test_jobs_with_workers),
        cmocka_unit_test(test_jobs_sync_client_gone),
        cmocka_unit_test(test_jobs_eviction),
        cmocka_unit_test(test_jobs_keeper),
        cmocka_unit_test(test_jobs_keeper_prunes_keys),
    };
    return cmocka_run_group_tests_name("server", tests, NULL, NULL);
}
