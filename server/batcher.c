#include "server/batcher.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base/parallel.h"
#include "server/util.h"

typedef struct item {
    gp_point_call *call;
    gp_batch_done_fn done;
    void *cookie;
    uint64_t queued_us;
    struct item *next;
} item;

struct gp_batcher {
    gp_api *api;
    uint64_t delay_us;
    size_t max_points;
    pthread_mutex_t lock;
    pthread_cond_t wake;    /* a call was queued, or a request ended */
    pthread_cond_t idle;    /* a runner left */
    item *head, *tail;
    size_t queued;          /* items in the queue */
    size_t running;         /* calls being answered */
    size_t in_progress;     /* predict/sample requests arriving: begun, not yet queued */
    int runners, max_runners;
    int waiting;            /* runners in a timed wait */
    int stopping;
    gp_batcher_stats stats;
};

gp_batcher *gp_batcher_new(gp_api *api, long delay_us, size_t max_points)
{
    gp_batcher *b = calloc(1, sizeof *b);
    if (b == NULL)
        return NULL;
    if (gp_cond_init_monotonic(&b->wake) != 0) {
        free(b);
        return NULL;
    }
    pthread_cond_init(&b->idle, NULL);
    pthread_mutex_init(&b->lock, NULL);
    b->api = api;
    b->delay_us = delay_us > 0 ? (uint64_t)delay_us : 0;
    b->max_points = max_points ? max_points : 1;
    b->max_runners = gp_parallel_threads();
    return b;
}

void gp_batcher_begin(gp_batcher *b)
{
    pthread_mutex_lock(&b->lock);
    b->in_progress++;
    pthread_mutex_unlock(&b->lock);
}

void gp_batcher_end(gp_batcher *b)
{
    pthread_mutex_lock(&b->lock);
    if (b->in_progress)
        b->in_progress--;
    if (b->waiting)
        pthread_cond_broadcast(&b->wake); /* maybe no one else is coming now */
    pthread_mutex_unlock(&b->lock);
}

/* The calls that join h, h first, unlinked from the queue into out (lock
 * held); returns how many. Each joins while the points stay within the cap;
 * a call not batchable (a covariance, a sample) goes alone. */
static size_t take_group(gp_batcher *b, item **out, size_t cap, size_t *points, int dry)
{
    item *h = b->head;
    size_t n = 0, pts = 0;
    item **link = &b->head, *prev = NULL;
    int alone = !gp_api_point_call_batchable(h->call);
    for (item *it = b->head; it && n < cap;) {
        item *nx = it->next;
        size_t m = gp_api_point_call_points(it->call);
        int join = it == h || (!alone && gp_api_point_call_batchable(it->call) &&
                               gp_api_point_call_joinable(h->call, it->call) &&
                               pts + m <= b->max_points);
        if (join) {
            pts += m;
            if (!dry) {
                out[n] = it;
                *link = nx;
                if (b->tail == it)
                    b->tail = prev;
                it->next = NULL;
            }
            n++;
            if (alone)
                break;
        }
        if (!join || dry) {
            prev = it;
            link = &it->next;
        }
        it = nx;
    }
    *points = pts;
    return n;
}

/* Whether the runner should wait for more calls to join the head (lock held):
 * the batch has room, the delay has not run out since the head was queued,
 * and requests are arriving (received or being parsed, not yet queued). Not
 * for the next requests of the clients being answered: waiting a round trip
 * for them made batches wait in step with the clients (measured: 16
 * connections to one model at times served at half the rate). */
static int worth_waiting(gp_batcher *b, size_t points, uint64_t *deadline)
{
    if (b->stopping || b->delay_us == 0 || points >= b->max_points ||
        !gp_api_point_call_batchable(b->head->call))
        return 0;
    *deadline = b->head->queued_us + b->delay_us;
    return b->in_progress > 0 && gp_monotonic_us() < *deadline;
}

static void wait_until(gp_batcher *b, uint64_t deadline_us)
{
    struct timespec now, ts;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t now_us = (uint64_t)now.tv_sec * 1000000u + (uint64_t)now.tv_nsec / 1000u;
    uint64_t left = deadline_us > now_us ? deadline_us - now_us : 0;
    ts.tv_sec = now.tv_sec + (time_t)(left / 1000000u);
    ts.tv_nsec = now.tv_nsec + (long)(left % 1000000u) * 1000;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    b->waiting++;
    pthread_cond_timedwait(&b->wake, &b->lock, &ts);
    b->waiting--;
}

/* Answer one group (lock not held). */
static void answer_group(gp_batcher *b, item **g, size_t n)
{
    gp_point_call **calls = malloc(n * sizeof *calls);
    gp_response *res = calloc(n, sizeof *res);
    if (calls == NULL || res == NULL) {
        for (size_t i = 0; i < n; i++) {
            gp_response r;
            memset(&r, 0, sizeof r);
            gp_api_fail(&r, GP_ENOMEM, NULL, "out of memory");
            gp_api_point_call_free(g[i]->call);
            g[i]->done(g[i]->cookie, &r);
        }
    } else {
        for (size_t i = 0; i < n; i++)
            calls[i] = g[i]->call;
        gp_api_point_calls_run(b->api, calls, n, res); /* frees the calls */
        for (size_t i = 0; i < n; i++)
            g[i]->done(g[i]->cookie, &res[i]);
    }
    free(calls);
    free(res);
    for (size_t i = 0; i < n; i++)
        free(g[i]);
}

static void runner(void *arg)
{
    gp_batcher *b = arg;
    size_t cap = 0;
    item **g = NULL;
    pthread_mutex_lock(&b->lock);
    while (b->head) {
        size_t points = 0, n = take_group(b, NULL, SIZE_MAX, &points, 1);
        uint64_t deadline = 0;
        if (worth_waiting(b, points, &deadline)) {
            wait_until(b, deadline);
            continue;
        }
        if (n > cap) {
            item **grown = realloc(g, n * sizeof *g);
            if (grown == NULL)
                n = cap ? cap : 0;
            else {
                g = grown;
                cap = n;
            }
            if (n == 0)
                break; /* out of memory: the next submit starts another runner */
        }
        n = take_group(b, g, n, &points, 0);
        b->queued -= n;
        b->running += n;
        b->stats.batches++;
        b->stats.calls += n;
        b->stats.points += points;
        if (n > b->stats.max_calls)
            b->stats.max_calls = n;
        pthread_mutex_unlock(&b->lock);
        answer_group(b, g, n);
        pthread_mutex_lock(&b->lock);
        b->running -= n;
    }
    b->runners--;
    pthread_cond_broadcast(&b->idle);
    pthread_mutex_unlock(&b->lock);
    free(g);
}

int gp_batcher_try_alone(gp_batcher *b)
{
    pthread_mutex_lock(&b->lock);
    int alone = !b->stopping && b->in_progress <= 1 && b->queued == 0 && b->running == 0;
    if (alone)
        b->running++;
    pthread_mutex_unlock(&b->lock);
    return alone;
}

void gp_batcher_alone_done(gp_batcher *b)
{
    pthread_mutex_lock(&b->lock);
    b->running--;
    pthread_mutex_unlock(&b->lock);
}

int gp_batcher_submit(gp_batcher *b, gp_point_call *c, gp_batch_done_fn done, void *cookie)
{
    item *it = calloc(1, sizeof *it);
    if (it == NULL)
        return -1;
    it->call = c;
    it->done = done;
    it->cookie = cookie;
    it->queued_us = gp_monotonic_us();
    pthread_mutex_lock(&b->lock);
    if (b->stopping) {
        pthread_mutex_unlock(&b->lock);
        free(it);
        return -1;
    }
    if (b->tail)
        b->tail->next = it;
    else
        b->head = it;
    b->tail = it;
    b->queued++;
    int start = b->runners < b->max_runners;
    if (start)
        b->runners++;
    else if (b->waiting)
        pthread_cond_broadcast(&b->wake);
    pthread_mutex_unlock(&b->lock);
    if (start && gp_pool_run(runner, b) != 0)
        runner(b); /* no pool: answer on this thread */
    return 0;
}

void gp_batcher_get_stats(gp_batcher *b, gp_batcher_stats *st)
{
    pthread_mutex_lock(&b->lock);
    *st = b->stats;
    pthread_mutex_unlock(&b->lock);
}

void gp_batcher_stop(gp_batcher *b)
{
    if (b == NULL)
        return;
    pthread_mutex_lock(&b->lock);
    b->stopping = 1; /* runners stop waiting and answer what is queued */
    pthread_cond_broadcast(&b->wake);
    while (b->runners > 0)
        pthread_cond_wait(&b->idle, &b->lock);
    pthread_mutex_unlock(&b->lock);
}

void gp_batcher_free(gp_batcher *b)
{
    if (b == NULL)
        return;
    gp_batcher_stop(b);
    pthread_cond_destroy(&b->wake);
    pthread_cond_destroy(&b->idle);
    pthread_mutex_destroy(&b->lock);
    free(b);
}
