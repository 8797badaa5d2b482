/* Answers that wait for the disk (server/syncer.h). */
#include "server/syncer.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct waiter {
    uint64_t ticket;
    gp_response res;
    gp_syncer_done done;
    void *cookie;
    struct waiter *next;
} waiter;

struct gp_syncer {
    gp_api *api;
    pthread_mutex_t lock;
    pthread_cond_t wake;
    waiter *head, *tail; /* handed in, oldest first */
    int stopping;
    int started;
    pthread_t thread;
};

/* One sync for every waiter of the list, then their answers. */
static void answer_all(gp_syncer *s, waiter *list)
{
    uint64_t newest = 0;
    for (const waiter *w = list; w; w = w->next)
        newest = w->ticket > newest ? w->ticket : newest;
    gp_error err;
    gp_error_clear(&err);
    int rc = gp_api_wait_durable(s->api, newest, &err);
    while (list) {
        waiter *w = list;
        list = w->next;
        if (rc != 0) { /* committed, not known to be on disk: say so, not 200 */
            gp_response_free(&w->res);
            memset(&w->res, 0, sizeof w->res);
            gp_api_error(&err, &w->res);
        }
        w->done(w->cookie, &w->res);
        gp_response_free(&w->res);
        free(w);
    }
}

static void *syncer_main(void *arg)
{
    gp_syncer *s = arg;
    pthread_mutex_lock(&s->lock);
    for (;;) {
        while (s->head == NULL && !s->stopping)
            pthread_cond_wait(&s->wake, &s->lock);
        if (s->head == NULL)
            break; /* stopping, and nothing left */
        waiter *list = s->head;
        s->head = s->tail = NULL;
        pthread_mutex_unlock(&s->lock);
        answer_all(s, list); /* meanwhile the next ones gather */
        pthread_mutex_lock(&s->lock);
    }
    pthread_mutex_unlock(&s->lock);
    return NULL;
}

gp_syncer *gp_syncer_new(gp_api *api)
{
    gp_syncer *s = calloc(1, sizeof *s);
    if (s == NULL)
        return NULL;
    s->api = api;
    pthread_mutex_init(&s->lock, NULL);
    pthread_cond_init(&s->wake, NULL);
    if (pthread_create(&s->thread, NULL, syncer_main, s) != 0) {
        gp_syncer_free(s);
        return NULL;
    }
    s->started = 1;
    return s;
}

int gp_syncer_submit(gp_syncer *s, uint64_t ticket, gp_response *res, gp_syncer_done done,
                     void *cookie)
{
    waiter *w = calloc(1, sizeof *w);
    if (w == NULL)
        return -1;
    pthread_mutex_lock(&s->lock);
    if (s->stopping) {
        pthread_mutex_unlock(&s->lock);
        free(w);
        return -1;
    }
    w->ticket = ticket;
    w->res = *res;
    memset(res, 0, sizeof *res);
    w->done = done;
    w->cookie = cookie;
    if (s->tail)
        s->tail->next = w;
    else
        s->head = w;
    s->tail = w;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    return 0;
}

void gp_syncer_stop(gp_syncer *s)
{
    if (s == NULL)
        return;
    pthread_mutex_lock(&s->lock);
    int join = s->started && !s->stopping;
    s->stopping = 1;
    pthread_cond_signal(&s->wake);
    pthread_mutex_unlock(&s->lock);
    if (join)
        pthread_join(s->thread, NULL);
}

void gp_syncer_free(gp_syncer *s)
{
    if (s == NULL)
        return;
    gp_syncer_stop(s);
    pthread_cond_destroy(&s->wake);
    pthread_mutex_destroy(&s->lock);
    free(s);
}
