/* The HTTP transport. Threads: libmicrohttpd's pool of --threads request
 * threads (epoll, or poll where epoll is missing) and the fit workers of
 * server/jobs.c. A request's context (conn_ctx) is created by the URI-log
 * callback (so routing sees the raw, still percent-encoded path), filled by
 * the access handler, and freed by the request-completed callback, which
 * also writes the log line and the metrics.
 *
 * Per-request state machine (conn_ctx.state):
 *   NEW       first handler call: route, auth, verb, media type and
 *             Content-Length are checked; an error is answered at once,
 *             before any of the body is read.
 *   BODY      upload chunks are appended (up to --max-body-mb);
 *   DISCARD   the body outgrew the cap: the rest is dropped, 413 at the end;
 *   FIT_WAIT  a synchronous fit is queued and the connection suspended; the
 *             fit worker stores the response and resumes the connection;
 *   ANSWERED  a response is queued.
 *
 * Per connection (gp_conn, made and freed by the connection-notify callback)
 * the request deadline (--request-timeout): a request must arrive whole
 * within it, counted from the moment the connection is ready for it (accepted,
 * or the previous request finished), however slowly its bytes trickle in;
 * libmicrohttpd's own timeout (--timeout) is idle time, which every byte
 * resets. A sweeper thread closes connections past the deadline; one whose
 * request line has arrived is first answered 408 request_timeout, written
 * by the sweeper (nothing of an answer has been sent while a request is still
 * arriving). conns_lock orders the sweeper against the request thread's claim
 * to answer (claim_answer), so the two never both write.
 *
 * libmicrohttpd's own error pages (431, 414, a bad request line) are replaced
 * by JSON (library_error, set as server/mhd_shim.h's error page), and a
 * Content-Length it would refuse reaches check_request. A request whose
 * framing is ambiguous (two Content-Length, Content-Length with
 * Transfer-Encoding, ...) is refused 400 and closed before its body is read
 * (check_framing).
 *
 * Connection slots (server/slots.h) are taken when libmicrohttpd reports a
 * new connection (conn_opened, under conns_lock) and given back when it
 * closes; a connection refused one is answered 429 on its socket at once and
 * shut down (refuse_connection), never holding a slot while its request
 * trickles in.
 *
 * The transport is three files around server/http_internal.h: this one
 * (connections, the request deadline, libmicrohttpd's own errors, start and
 * stop), server/request.c (one request, the state machine above and the
 * checks made before its body is read) and server/handlers.c (the route
 * handlers of the route table, server/routes.def, and the dispatch). */
#include "server/http_internal.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "server/mhd_shim.h"
#include "server/util.h"

/* libmicrohttpd's memory per connection: the request line and headers must
 * fit in it (431 / 414 beyond), and responses' headers are built there. */
#define CONN_MEMORY_KIB 64
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

/* ---- libmicrohttpd's own errors, in the JSON shape (server/mhd_shim.h) ---- */

/* The catalogue code for a status libmicrohttpd answers by itself, and why. */
static int library_error_code(unsigned status, const char **why)
{
    switch (status) {
    case MHD_HTTP_URI_TOO_LONG:
        *why = "the request line is longer than the " STRINGIFY(CONN_MEMORY_KIB)
               " KiB a connection reads";
        return GP_EURITOOLONG;
    case MHD_HTTP_REQUEST_HEADER_FIELDS_TOO_LARGE:
        *why = "the request line and headers are larger than the " STRINGIFY(CONN_MEMORY_KIB)
               " KiB a connection reads";
        return GP_EHEADERS;
    case MHD_HTTP_HTTP_VERSION_NOT_SUPPORTED:
        *why = "HTTP version not supported: send HTTP/1.1 or HTTP/1.0";
        return GP_EHTTPVERSION;
    case MHD_HTTP_CONTENT_TOO_LARGE:
        *why = "the request is larger than the daemon accepts";
        return GP_ETOOBIG;
    default:
        break;
    }
    if (status >= 500) {
        *why = "the HTTP layer could not process the request";
        return GP_EINTERNAL;
    }
    *why = "malformed HTTP request: the request line, a header line or the chunked "
           "encoding is not valid HTTP/1.1";
    return GP_EHTTP;
}

/* Log and count a library error of a connection without a request context
 * (its request line never arrived whole); on_completed does the others. */
static void log_library_error(gp_conn *gc, uint64_t id, int status, size_t bytes)
{
    uint64_t us = gp_monotonic_us() - gc->ready_us;
    gp_metrics_request(gc->srv->metrics, GP_ROUTE_NONE, "-", status, (double)us * 1e-6);
    gp_log("- - %d %zu %lluus req=%llu (refused by the HTTP layer)", status, bytes,
           (unsigned long long)us, (unsigned long long)id);
}

static struct MHD_Response *library_error(struct MHD_Connection *c, unsigned *status)
{
    gp_conn *gc = gp_http_conn_of(c);
    conn_ctx *ctx = gc ? gc->req : NULL;
    const char *why = "";
    int code = library_error_code(*status, &why);
    gp_response res;
    memset(&res, 0, sizeof res);
    gp_api_fail(&res, code, NULL, "%s", why);
    if (ctx && ctx->match.v2)
        gp_api_oip_error(&res);
    if (res.body == NULL)
        return NULL;
    struct MHD_Response *r =
        MHD_create_response_from_buffer(res.body_len, res.body, MHD_RESPMEM_MUST_FREE);
    if (r == NULL) {
        gp_response_free(&res);
        return NULL;
    }
    size_t len = res.body_len;
    res.body = NULL;
    uint64_t id = ctx ? ctx->id
              : gc    ? atomic_fetch_add(&gc->srv->next_request_id, 1) + 1
                      : 0;
    char rid[GP_REQUEST_ID_SIZE];
    if (ctx)
        memcpy(rid, ctx->rid, sizeof rid);
    else
        snprintf(rid, sizeof rid, "%llu", (unsigned long long)id);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(r, "X-Request-Id", rid);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    *status = (unsigned)res.status;
    (void)gp_http_claim_answer(gc); /* the library writes its answer now, whatever the sweeper did */
    if (ctx) {
        ctx->status = res.status;
        ctx->resp_bytes = len;
        ctx->state = CS_ANSWERED;
    } else if (gc) {
        log_library_error(gc, id, res.status, len);
    }
    gp_response_free(&res);
    return r;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char buf[512];
    vsnprintf(buf, sizeof buf, fmt, ap);
    size_t n = strlen(buf);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    /* Its error pages are replaced by JSON and logged on the request's line. */
    if (strncmp(buf, "Error processing request (HTTP response code is", 47) == 0)
        return;
    gp_log("gpserve: libmicrohttpd: %s", buf);
}

/* ---- start / stop ---- */

/* Free what gp_server_start made (the daemons and the sweeper stopped). */
static void server_free(gp_server *srv)
{
    gp_acceptor_free(srv->acceptor); /* closes the listening socket */
    free(srv->daemons);
    gp_batcher_free(srv->batcher);
    gp_syncer_free(srv->syncer);
    gp_jobs_free(srv->jobs);
    gp_metrics_free(srv->metrics);
    gp_access_log_close(srv->access_log); /* writes what is buffered */
    pthread_cond_destroy(&srv->sweep_wake);
    pthread_mutex_destroy(&srv->conns_lock);
    free(srv->timeout_body);
    free(srv->timeout_body_v2);
    for (size_t i = 0; i < sizeof srv->refusal / sizeof srv->refusal[0]; i++)
        free(srv->refusal[i]);
    gp_slots_free(srv->slots);
    gp_ratelimit_free(srv->rate);
    gp_tls_free(srv->tls); /* after the daemons: no handshake runs any more */
    free(srv);
}

static int init_locks(gp_server *srv)
{
    if (gp_cond_init_monotonic(&srv->sweep_wake) != 0)
        return -1;
    if (pthread_mutex_init(&srv->conns_lock, NULL) != 0) {
        pthread_cond_destroy(&srv->sweep_wake);
        return -1;
    }
    return 0;
}

/* The listening address of cfg (a4 or a6 filled, *len its size); NULL when
 * --bind is neither. */
static const struct sockaddr *listen_address(const gp_server_config *cfg,
                                             struct sockaddr_in *a4, struct sockaddr_in6 *a6,
                                             socklen_t *len)
{
    memset(a4, 0, sizeof *a4);
    memset(a6, 0, sizeof *a6);
    if (inet_pton(AF_INET, cfg->bind, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)cfg->port);
        *len = sizeof *a4;
        return (const struct sockaddr *)a4;
    }
    if (inet_pton(AF_INET6, cfg->bind, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)cfg->port);
        *len = sizeof *a6;
        return (const struct sockaddr *)a6;
    }
    return NULL;
}

/* The TLS options of a daemon (none without --tls-cert): libmicrohttpd runs
 * GnuTLS on every connection the acceptor hands it (MHD_add_connection), asks
 * server/conn.c's callback for the key pair in each handshake, and trusts
 * --tls-client-ca's certificates for client certificates. */
static void tls_options(const gp_server *srv, struct MHD_OptionItem opts[4])
{
    size_t n = 0;
    if (srv->tls) {
        void *cb;
        gnutls_certificate_retrieve_function2 *fn = gp_http_tls_certificate;
        memcpy(&cb, &fn, sizeof cb); /* an option array carries pointers as void * */
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_PRIORITIES, 0, GP_TLS_PRIORITIES};
        opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_CERT_CALLBACK, 0, cb};
        const char *ca = gp_tls_client_ca_pem(srv->tls);
        if (ca)
            opts[n++] = (struct MHD_OptionItem){MHD_OPTION_HTTPS_MEM_TRUST, 0, (void *)ca};
    }
    opts[n] = (struct MHD_OptionItem){MHD_OPTION_END, 0, NULL};
}

/* One HTTP thread: a libmicrohttpd daemon without a listening socket (the
 * acceptor hands it connections), on epoll or, where epoll is missing, poll. */
static struct MHD_Daemon *start_mhd(gp_server *srv)
{
    const gp_server_config *cfg = &srv->cfg;
    unsigned base = MHD_USE_INTERNAL_POLLING_THREAD | MHD_ALLOW_SUSPEND_RESUME |
                    MHD_USE_ERROR_LOG | MHD_USE_NO_LISTEN_SOCKET | (srv->tls ? MHD_USE_TLS : 0);
    struct MHD_OptionItem tls[4];
    tls_options(srv, tls);
    unsigned pollers[2] = {MHD_USE_EPOLL, MHD_USE_POLL};
    int first = MHD_is_feature_supported(MHD_FEATURE_EPOLL) == MHD_YES ? 0 : 1;
    struct MHD_Daemon *d = NULL;
    for (int i = first; i < 2 && d == NULL; i++) {
        d = MHD_start_daemon(
            base | pollers[i], 0, NULL, NULL, gp_http_on_request, srv, MHD_OPTION_EXTERNAL_LOGGER,
            on_mhd_log, srv, MHD_OPTION_CONNECTION_LIMIT,
            (unsigned)gp_server_connection_sockets(cfg), MHD_OPTION_PER_IP_CONNECTION_LIMIT, 0u,
            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->timeout,
            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY_KIB * 1024,
            MHD_OPTION_URI_LOG_CALLBACK, gp_http_on_uri, srv, MHD_OPTION_NOTIFY_COMPLETED, gp_http_on_completed,
            srv, MHD_OPTION_NOTIFY_CONNECTION, gp_http_on_connection, srv, MHD_OPTION_ARRAY, tls,
            MHD_OPTION_END);
        if (d == NULL && i == 0)
            gp_log("gpserve: starting with epoll failed; trying poll");
    }
    return d;
}

static void stop_daemons(gp_server *srv)
{
    for (size_t i = 0; i < srv->n_daemons; i++)
        MHD_stop_daemon(srv->daemons[i]);
    srv->n_daemons = 0;
}

/* The listening socket, the HTTP threads (--threads, 0: one per CPU) and the
 * acceptor between them; msg says why not. */
static int start_http(gp_server *srv, char *msg, size_t msg_size)
{
    const gp_server_config *cfg = &srv->cfg;
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    socklen_t len = 0;
    const struct sockaddr *addr = listen_address(cfg, &a4, &a6, &len);
    if (addr == NULL) {
        snprintf(msg, msg_size, "--bind '%s' is not an IPv4 or IPv6 address", cfg->bind);
        return -1;
    }
    srv->acceptor = gp_acceptor_open(addr, len);
    if (srv->acceptor == NULL) {
        snprintf(msg, msg_size, "cannot listen on %s:%ld: %s", cfg->bind, cfg->port,
                 strerror(errno));
        return -1;
    }
    srv->port = gp_acceptor_port(srv->acceptor);
    long threads = cfg->threads;
    if (threads <= 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cpus > 0 ? cpus : 1;
    }
    srv->daemons = calloc((size_t)threads, sizeof *srv->daemons);
    if (srv->daemons == NULL) {
        snprintf(msg, msg_size, "out of memory");
        return -1;
    }
    for (long i = 0; i < threads; i++) {
        if ((srv->daemons[i] = start_mhd(srv)) == NULL) {
            snprintf(msg, msg_size, "libmicrohttpd could not start HTTP thread %ld", i + 1);
            stop_daemons(srv);
            return -1;
        }
        srv->n_daemons++;
    }
    if (gp_acceptor_start(srv->acceptor, srv->daemons, srv->n_daemons,
                          (size_t)gp_server_connection_sockets(cfg)) != 0) {
        snprintf(msg, msg_size, "cannot start the accepting thread");
        stop_daemons(srv);
        return -1;
    }
    return 0;
}

gp_server *gp_server_start(const gp_server_config *cfg, gp_api *api, gp_keyring *keys,
                           char *msg, size_t msg_size)
{
    char shim_msg[160];
    int shim = gp_mhd_shim_check(shim_msg, sizeof shim_msg);
    if (shim < 0) {
        snprintf(msg, msg_size, "%s", shim_msg);
        return NULL;
    }
    if (shim > 0)
        gp_log("gpserve: warning: %s", shim_msg);
    gp_mhd_shim_set_error_page(library_error);
    gp_server *srv = calloc(1, sizeof *srv);
    if (srv == NULL || init_locks(srv) != 0) {
        snprintf(msg, msg_size, "out of memory");
        free(srv);
        return NULL;
    }
    srv->cfg = *cfg;
    srv->api = api;
    srv->keys = keys;
    srv->max_body = (size_t)cfg->max_body_mb * 1024 * 1024;
    atomic_init(&srv->stopping, 0);
    atomic_init(&srv->next_request_id, 0);
    atomic_init(&srv->sync_pending, 0);
    atomic_init(&srv->refused_unlogged, 0);
    atomic_init(&srv->refused_logged_us, 0);
    if (cfg->access_log) {
        srv->access_log = gp_access_log_open(cfg->access_log, msg, msg_size);
        if (srv->access_log == NULL) {
            server_free(srv);
            return NULL;
        }
    }
    if (cfg->tls_cert && (srv->tls = gp_tls_open(cfg->tls_cert, cfg->tls_key, cfg->tls_client_ca,
                                                  msg, msg_size)) == NULL) {
        server_free(srv);
        return NULL;
    }
    srv->slots = gp_slots_new((size_t)cfg->max_connections, (size_t)cfg->max_connections_per_ip);
    if (srv->slots == NULL || gp_http_refusals_make(srv) != 0) {
        snprintf(msg, msg_size, "out of memory");
        server_free(srv);
        return NULL;
    }
    /* With keys, any key's rps=/fits_per_minute= may apply (a reload may add one). */
    if ((keys || cfg->rate_limit_rps > 0 || cfg->rate_limit_fits_per_minute > 0) &&
        (srv->rate = gp_ratelimit_new(GP_RATE_PRINCIPALS)) == NULL) {
        snprintf(msg, msg_size, "out of memory");
        server_free(srv);
        return NULL;
    }
    srv->metrics = gp_metrics_new();
    srv->jobs = srv->metrics ? gp_jobs_new(api, (size_t)cfg->queue_size,
                                           (size_t)cfg->fit_workers, srv->metrics, NULL)
                             : NULL;
    if (srv->jobs == NULL) {
        snprintf(msg, msg_size, "out of memory");
        server_free(srv);
        return NULL;
    }
    if (cfg->batch_delay_us > 0 &&
        (srv->batcher = gp_batcher_new(api, cfg->batch_delay_us,
                                       (size_t)cfg->batch_max_points)) == NULL) {
        snprintf(msg, msg_size, "out of memory");
        server_free(srv);
        return NULL;
    }
    if ((srv->syncer = gp_syncer_new(api)) == NULL) {
        snprintf(msg, msg_size, "out of memory");
        server_free(srv);
        return NULL;
    }
    gp_jobs_set_durability(srv->jobs, (double)cfg->job_lease, (int)cfg->job_attempts,
                           3600.0 * (double)cfg->job_retention_hours);
    gp_jobs_set_key_retention(srv->jobs, 3600.0 * (double)cfg->idempotency_hours);
    gp_jobs_set_audit_retention(srv->jobs, 86400.0 * (double)cfg->audit_retention_days);
    gp_jobs_mpi mpi = {cfg->db, cfg->mpi_launcher, cfg->mpi_hostfile, cfg->mpi_args,
                       cfg->fit_program};
    gp_jobs_set_mpi(srv->jobs, &mpi);
    if (start_http(srv, msg, msg_size) != 0) {
        server_free(srv);
        return NULL;
    }
    if (gp_jobs_start(srv->jobs) != 0 || gp_http_sweeper_start(srv) != 0) {
        snprintf(msg, msg_size, "cannot start the fit workers or the request-deadline thread");
        gp_acceptor_stop(srv->acceptor);
        stop_daemons(srv);
        gp_jobs_shutdown(srv->jobs);
        server_free(srv);
        return NULL;
    }
    return srv;
}

long gp_server_connection_sockets(const gp_server_config *cfg)
{
    long extra = cfg->max_connections / 4;
    return cfg->max_connections + (extra > 64 ? extra : 64);
}

unsigned gp_server_port(const gp_server *srv)
{
    return srv->port;
}

void gp_server_keys_reloaded(gp_server *srv, const char *names, size_t n)
{
    if (srv && srv->rate && names)
        gp_ratelimit_retain(srv->rate, names, n);
}

void gp_server_reload(gp_server *srv)
{
    if (srv == NULL || srv->tls == NULL)
        return;
    char msg[512];
    if (gp_tls_reload(srv->tls, msg, sizeof msg) == 0)
        gp_log("gpserve: TLS certificate '%s' and key '%s' re-read; new connections use them",
               srv->cfg.tls_cert, srv->cfg.tls_key);
    else
        gp_log("gpserve: TLS reload failed, the previous certificate stays in use: %s", msg);
}

void gp_server_stop(gp_server *srv)
{
    if (srv == NULL)
        return;
    atomic_store(&srv->stopping, 1);
    gp_http_sweeper_stop(srv);
    gp_acceptor_stop(srv->acceptor); /* the socket stays open: new connects wait */
    size_t queued = 0, running = 0;
    gp_jobs_counts(srv->jobs, &queued, &running);
    gp_log("gpserve: stopped accepting connections; cancelling %zu queued and %zu running fits",
           queued, running);
    gp_jobs_shutdown(srv->jobs);
    gp_batcher_stop(srv->batcher); /* answers every queued predict and sample */
    gp_syncer_stop(srv->syncer);   /* and every observe waiting for the disk */
    /* Every suspended request is resumed now; give them a moment to be answered. */
    for (int i = 0; i < 500 && atomic_load(&srv->sync_pending) > 0; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    stop_daemons(srv);
    server_free(srv);
}
