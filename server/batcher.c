#include "server/batcher.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

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

/* Whether it may join the batch of the head h, which holds pts points. A
 * call that is not batchable (a covariance) goes alone; predicts join
 * predicts, samples samples. */
static int joins(const gp_batcher *b, const item *h, const item *it, size_t pts)
{
    return gp_api_point_call_joinable(h->call, it->call) &&
           pts + gp_api_point_call_points(it->call) <= b->max_points;
}

/* The points the head's batch would hold now (lock held). */
static size_t group_points(const gp_batcher *b)
{
    const item *h = b->head;
    size_t pts = gp_api_point_call_points(h->call);
    for (const item *it = h->next; it; it = it->next)
        if (joins(b, h, it, pts))
            pts += gp_api_point_call_points(it->call);
    return pts;
}

/* Unlink the head and the calls that join it, in queue order, as a list
 * (lock held); *n and *points get its length and points. */
static item *take_group(gp_batcher *b, size_t *n, size_t *points)
{
    item *h = b->head, *tail = h;
    size_t pts = gp_api_point_call_points(h->call), k = 1;
    b->head = h->next;
    item **link = &b->head, *prev = NULL;
    for (item *it = b->head; it; it = *link) {
        if (!joins(b, h, it, pts)) {
            prev = it;
            link = &it->next;
            continue;
        }
        pts += gp_api_point_call_points(it->call);
        *link = it->next; /* out of the queue, onto the group */
        tail->next = it;
        tail = it;
        k++;
    }
    tail->next = NULL;
    b->tail = prev;
    *n = k;
    *points = pts;
    return h;
}

/* Whether the runner should wait for more calls to join the head (lock held):
 * the batch has room, the delay has not run out since the head was queued,
 * and requests are arriving (received or being parsed, not yet queued). Not
 * for the next requests of the clients being answered: waiting a round trip
 * for them made batches wait in step with the clients (measured: 16
 * connections to one model at times served at half the rate). */
static int worth_waiting(const gp_batcher *b, uint64_t *deadline)
{
    if (b->stopping || b->delay_us == 0 || b->in_progress == 0 ||
        !gp_api_point_call_batchable(b->head->call) || group_points(b) >= b->max_points)
        return 0;
    *deadline = b->head->queued_us + b->delay_us;
    return gp_monotonic_us() < *deadline;
}

/* Answer the group of n calls g (lock not held), and free its items. */
static void answer_group(gp_batcher *b, item *g, size_t n)
{
    gp_point_call **calls = malloc(n * sizeof *calls);
    gp_response *res = calloc(n, sizeof *res);
    size_t i = 0;
    if (calls && res) {
        for (item *it = g; it; it = it->next)
            calls[i++] = it->call;
        gp_api_point_calls_run(b->api, calls, n, res); /* frees the calls */
    }
    i = 0;
    for (item *it = g, *nx; it; it = nx, i++) {
        nx = it->next;
        gp_response r;
        memset(&r, 0, sizeof r);
        if (calls && res)
            r = res[i];
        else {
            gp_api_point_call_free(it->call);
            gp_api_fail(&r, GP_ENOMEM, NULL, "out of memory");
        }
        it->done(it->cookie, &r);
        free(it);
    }
    free(calls);
    free(res);
}

static void runner(void *arg)
{
    gp_batcher *b = arg;
    pthread_mutex_lock(&b->lock);
    while (b->head) {
        uint64_t deadline = 0;
        if (worth_waiting(b, &deadline)) {
            uint64_t now = gp_monotonic_us();
            b->waiting++;
            gp_cond_wait_us(&b->wake, &b->lock, deadline > now ? deadline - now : 0);
            b->waiting--;
            continue;
        }
        size_t n = 0, points = 0;
        item *g = take_group(b, &n, &points);
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
}

int gp_batcher_try_alone(gp_batcher *b)
{
    pthread_mutex_lock(&b->lock);
    int alone = !b->stopping && b->in_progress == 0 && b->queued == 0 && b->running == 0;
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
