/* gpserve server: the listening socket and the thread that accepts on it.
 *
 * Why not libmicrohttpd's own thread pool: there every pool thread polls the
 * one listening socket and accepts up to 10 connections in a row when it wakes
 * first, so a burst of 16 connects could all land on one thread. That thread
 * then parsed every request and, finding no other request in progress,
 * computed each alone, one after another, while the other cores idled: the
 * "slow mode" of bench/results/http.md (a third of the rate, all the CPU time
 * on one HTTP thread). Here each HTTP thread is a single-threaded
 * libmicrohttpd daemon without a listening socket, and this thread hands every
 * connection it accepts to the daemon holding the fewest (ties in turn), so
 * the request threads always hold the same number of connections to one.
 *
 * At the daemons' connection limit it stops accepting until one closes
 * (connections wait in the kernel's backlog), as libmicrohttpd did. */
#ifndef GP_SERVER_ACCEPTOR_H
#define GP_SERVER_ACCEPTOR_H

#include <microhttpd.h>
#include <stddef.h>
#include <sys/socket.h>

typedef struct gp_acceptor gp_acceptor;

/* A socket bound to addr and listening (SO_REUSEADDR; IPv6 only for an IPv6
 * address). NULL with errno set (EADDRINUSE, EACCES, ...). */
gp_acceptor *gp_acceptor_open(const struct sockaddr *addr, socklen_t addrlen);

/* The port it listens on (the one the kernel chose for port 0). */
unsigned gp_acceptor_port(const gp_acceptor *a);

/* Start accepting for daemons[0..n) (kept, not owned), at most limit open
 * connections in all. 0, or -1 when the thread could not start. */
int gp_acceptor_start(gp_acceptor *a, struct MHD_Daemon **daemons, size_t n, size_t limit);

/* libmicrohttpd's connection notifications, from its daemon's thread: a
 * connection handed to d has started, or closed. */
void gp_acceptor_started(gp_acceptor *a, const struct MHD_Daemon *d);
void gp_acceptor_closed(gp_acceptor *a, const struct MHD_Daemon *d);

/* The connections each daemon holds now (counts[0..n)), for tests and logs. */
void gp_acceptor_counts(gp_acceptor *a, size_t *counts, size_t n);

/* Stop accepting and join the thread. The socket stays open, so that
 * connections made meanwhile wait in the backlog rather than being refused,
 * until gp_acceptor_free closes it. */
void gp_acceptor_stop(gp_acceptor *a);
void gp_acceptor_free(gp_acceptor *a);

#endif
