#define _GNU_SOURCE /* accept4 */
#include "server/acceptor.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* The daemons a gp_acceptor can serve (--threads is at most 1024). */
#define MAX_DAEMONS 1024

struct gp_acceptor {
    int fd;
    int wake[2]; /* a byte on wake[1]: stop, or a connection closed while paused */
    unsigned port;
    struct MHD_Daemon **daemons;
    size_t n, limit;
    /* Under lock: connections handed to daemon i and not started yet
     * (assigned), started and not closed (open); paused when at the limit. */
    pthread_mutex_t lock;
    size_t *assigned, *open;
    size_t next; /* where the search for the least loaded starts: ties in turn */
    int paused, stop, running, lock_ready;
    pthread_t thread;
};

gp_acceptor *gp_acceptor_open(const struct sockaddr *addr, socklen_t addrlen)
{
    gp_acceptor *a = calloc(1, sizeof *a);
    if (a == NULL)
        return NULL;
    a->wake[0] = a->wake[1] = -1;
    a->fd = socket(addr->sa_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    int on = 1, saved = 0;
    if (a->fd < 0 || setsockopt(a->fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on) != 0 ||
        (addr->sa_family == AF_INET6 &&
         setsockopt(a->fd, IPPROTO_IPV6, IPV6_V6ONLY, &on, sizeof on) != 0) ||
        bind(a->fd, addr, addrlen) != 0 || listen(a->fd, SOMAXCONN) != 0 ||
        pipe2(a->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
        saved = errno;
        gp_acceptor_free(a);
        errno = saved;
        return NULL;
    }
    struct sockaddr_storage ss;
    socklen_t len = sizeof ss;
    if (getsockname(a->fd, (struct sockaddr *)&ss, &len) == 0)
        a->port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                           : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    pthread_mutex_init(&a->lock, NULL);
    a->lock_ready = 1;
    return a;
}

unsigned gp_acceptor_port(const gp_acceptor *a)
{
    return a->port;
}

static size_t daemon_index(const gp_acceptor *a, const struct MHD_Daemon *d)
{
    for (size_t i = 0; i < a->n; i++)
        if (a->daemons[i] == d)
            return i;
    return a->n;
}

static void poke(gp_acceptor *a)
{
    char c = 1;
    ssize_t w = write(a->wake[1], &c, 1); /* full pipe: a wake-up is pending anyway */
    (void)w;
}

void gp_acceptor_started(gp_acceptor *a, const struct MHD_Daemon *d)
{
    if (a == NULL)
        return;
    pthread_mutex_lock(&a->lock);
    size_t i = daemon_index(a, d);
    if (i < a->n) {
        if (a->assigned[i])
            a->assigned[i]--;
        a->open[i]++;
    }
    pthread_mutex_unlock(&a->lock);
}

void gp_acceptor_closed(gp_acceptor *a, const struct MHD_Daemon *d)
{
    if (a == NULL)
        return;
    pthread_mutex_lock(&a->lock);
    size_t i = daemon_index(a, d);
    if (i < a->n && a->open[i])
        a->open[i]--;
    int wake = a->paused;
    a->paused = 0;
    pthread_mutex_unlock(&a->lock);
    if (wake)
        poke(a);
}

void gp_acceptor_counts(gp_acceptor *a, size_t *counts, size_t n)
{
    pthread_mutex_lock(&a->lock);
    for (size_t i = 0; i < n; i++)
        counts[i] = i < a->n ? a->assigned[i] + a->open[i] : 0;
    pthread_mutex_unlock(&a->lock);
}

/* The daemon with the fewest connections, counted as assigned to it (lock
 * held); a->n when all of them together hold the limit. */
static size_t pick_daemon(gp_acceptor *a)
{
    size_t total = 0, best = a->n, best_load = 0;
    for (size_t k = 0; k < a->n; k++) {
        size_t i = (a->next + k) % a->n, load = a->assigned[i] + a->open[i];
        total += load;
        if (best == a->n || load < best_load) {
            best = i;
            best_load = load;
        }
    }
    if (total >= a->limit)
        return a->n;
    a->next = (best + 1) % a->n;
    a->assigned[best]++;
    return best;
}

/* Accept what is waiting and hand it over; 0 when paused at the limit. */
static int accept_ready(gp_acceptor *a)
{
    for (;;) {
        pthread_mutex_lock(&a->lock);
        size_t i = pick_daemon(a);
        if (i == a->n) {
            a->paused = 1;
            pthread_mutex_unlock(&a->lock);
            return 0;
        }
        pthread_mutex_unlock(&a->lock);
        struct sockaddr_storage ss;
        socklen_t len = sizeof ss;
        int c = accept4(a->fd, (struct sockaddr *)&ss, &len, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (c < 0) {
            int e = errno;
            pthread_mutex_lock(&a->lock);
            a->assigned[i]--;
            pthread_mutex_unlock(&a->lock);
            if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
                struct timespec ts = {0, 10 * 1000 * 1000}; /* out of descriptors: back off */
                nanosleep(&ts, NULL);
            }
            return 1; /* EAGAIN (nothing waits), an aborted connection, or the back-off */
        }
        if (MHD_add_connection(a->daemons[i], c, (struct sockaddr *)&ss, len) != MHD_YES) {
            pthread_mutex_lock(&a->lock); /* closed by libmicrohttpd: never started */
            a->assigned[i]--;
            pthread_mutex_unlock(&a->lock);
        }
    }
}

static void *acceptor_main(void *arg)
{
    gp_acceptor *a = arg;
    int listening = 1;
    for (;;) {
        struct pollfd p[2] = {{a->wake[0], POLLIN, 0}, {a->fd, POLLIN, 0}};
        int r = poll(p, listening ? 2 : 1, -1);
        if (r < 0 && errno != EINTR)
            break;
        if (p[0].revents) {
            char buf[64];
            while (read(a->wake[0], buf, sizeof buf) > 0) {
            }
        }
        pthread_mutex_lock(&a->lock);
        int stop = a->stop;
        pthread_mutex_unlock(&a->lock);
        if (stop)
            break;
        listening = accept_ready(a);
    }
    return NULL;
}

int gp_acceptor_start(gp_acceptor *a, struct MHD_Daemon **daemons, size_t n, size_t limit)
{
    if (n == 0 || n > MAX_DAEMONS)
        return -1;
    a->assigned = calloc(n, sizeof *a->assigned);
    a->open = calloc(n, sizeof *a->open);
    if (a->assigned == NULL || a->open == NULL)
        return -1;
    a->daemons = daemons;
    a->n = n;
    a->limit = limit ? limit : 1;
    if (pthread_create(&a->thread, NULL, acceptor_main, a) != 0)
        return -1;
    a->running = 1;
    return 0;
}

void gp_acceptor_stop(gp_acceptor *a)
{
    if (a == NULL || !a->running)
        return;
    pthread_mutex_lock(&a->lock);
    a->stop = 1;
    pthread_mutex_unlock(&a->lock);
    poke(a);
    pthread_join(a->thread, NULL);
    a->running = 0;
}

void gp_acceptor_free(gp_acceptor *a)
{
    if (a == NULL)
        return;
    gp_acceptor_stop(a);
    if (a->fd >= 0)
        close(a->fd);
    for (int i = 0; i < 2; i++)
        if (a->wake[i] >= 0)
            close(a->wake[i]);
    if (a->lock_ready)
        pthread_mutex_destroy(&a->lock);
    free(a->assigned);
    free(a->open);
    free(a);
}
