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
 * by JSON (gp_http_library_error, through server/mhd_shim.h), and a
 * Content-Length it would refuse reaches check_request. A request whose
 * framing is ambiguous (two Content-Length, Content-Length with
 * Transfer-Encoding, ...) is refused 400 and closed before its body is read
 * (check_framing).
 *
 * Connection slots (server/slots.h) are taken when libmicrohttpd reports a
 * new connection (conn_opened, under conns_lock) and given back when it
 * closes; a connection refused one is answered 429 on its socket at once and
 * shut down (refuse_connection), never holding a slot while its request
 * trickles in. */
#include "server/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "server/batcher.h"
#include "server/jobs.h"
#include "server/metrics.h"
#include "server/mhd_shim.h"
#include "server/route.h"
#include "server/slots.h"
#include "server/syncer.h"
#include "server/util.h"

#define LOG_PATH_MAX 200
/* A body past the cap is read and dropped so that the 413 can be answered;
 * a client that keeps sending this much more is cut off instead. */
#define DISCARD_LIMIT ((size_t)1 << 30)
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
/* libmicrohttpd's memory per connection: the request line and headers must
 * fit in it (431 / 414 beyond), and responses' headers are built there. */
#define CONN_MEMORY_KIB 64
#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)
/* How often the sweeper looks for requests past their deadline. */
#define SWEEP_INTERVAL_MS 250

typedef struct gp_conn gp_conn;

struct gp_server {
    gp_server_config cfg;
    gp_api *api;
    const char *api_key;
    size_t api_key_len;
    size_t max_body;
    struct MHD_Daemon *daemon;
    MHD_socket listen_fd;
    unsigned port;
    gp_jobs *jobs;
    gp_batcher *batcher; /* NULL: batching off (--batch-delay-us 0) */
    gp_syncer *syncer;   /* observes waiting for the disk (server/syncer.h) */
    gp_metrics *metrics;
    atomic_int stopping;
    atomic_uint_fast64_t next_request_id;
    atomic_int sync_pending; /* synchronous fits not answered yet */
    /* The open connections, for the request deadline (under conns_lock). */
    pthread_mutex_t conns_lock;
    pthread_cond_t sweep_wake;
    gp_conn *conns;
    int sweep_stop;
    int sweeper_running;
    pthread_t sweeper;
    char *timeout_body; /* the 408 body, made at start-up */
    size_t timeout_body_len;
    char *timeout_body_v2; /* the same in the Open Inference Protocol's shape */
    size_t timeout_body_v2_len;
    /* The connection slots (server/slots.h), under conns_lock. */
    gp_slots *slots;
    /* The answers of a connection refused by them (indexed by GP_SLOT_*), made at start-up. */
    char *refusal[4];
    size_t refusal_len[4];
    /* Refusals not logged yet, and when the last log line was written. */
    atomic_uint_fast64_t refused_unlogged;
    atomic_uint_fast64_t refused_logged_us;
};

struct conn_ctx;

/* One open connection. Fields marked (lock) are read and written under
 * srv->conns_lock (the sweeper reads them); req only by the connection's
 * request thread. */
struct gp_conn {
    gp_server *srv;
    gp_conn *prev, *next; /* (lock) */
    int fd;
    uint64_t ready_us;    /* (lock) when the connection became ready for its request */
    int receiving;        /* (lock) the request has not all arrived and is not answered */
    uint64_t request_id;  /* (lock) its id once its request line arrived, else 0 */
    int v2;               /* (lock) that request is on a /v2 path (its 408 in that shape) */
    int expired;          /* (lock) closed by the sweeper past the deadline, or refused */
    int refused;          /* refused a slot (GP_SLOT_*): answered and shut down at once */
    int counted;          /* holds a slot of srv->slots under key */
    gp_slot_key key;
    struct conn_ctx *req; /* the request in progress */
};

enum conn_state { CS_NEW = 0, CS_BODY, CS_DISCARD, CS_FIT_WAIT, CS_DEFERRED, CS_ANSWERED };

typedef struct conn_ctx {
    gp_server *srv;
    struct MHD_Connection *conn;
    gp_conn *gc; /* its connection (NULL when that could not be allocated) */
    int fd; /* the socket, kept when a synchronous fit suspends the connection */
    uint64_t id;
    uint64_t t0_us;
    enum conn_state state;
    char method[12];
    char path[LOG_PATH_MAX + 1]; /* for the log, control characters replaced */
    gp_route_match match;
    int verb;
    int body_types; /* gp_route_body_types of this request */
    /* body */
    char *body;
    size_t len, cap;
    size_t discarded;
    /* synchronous fit, or a predict/sample queued for a batch */
    int fit_pending;        /* counted in srv->sync_pending */
    gp_response fit_res;    /* written by the worker before it resumes us */
    int batch_counted;      /* counted in the batcher's requests in progress */
    /* An error found in the first call of a request without a body is sent
     * in the final call: answered earlier, libmicrohttpd closes the
     * connection (it cannot tell that no body follows). */
    int defer;
    gp_response deferred;
    /* the answer, for the log and metrics */
    int status;
    size_t resp_bytes;
} conn_ctx;

/* ---- connections and the request deadline ---- */

/* The request thread is about to answer, or has the whole request: the
 * sweeper leaves the connection alone from now on. -1 when the sweeper
 * already closed it (its 408 is sent): then nothing more may be written. */
static int claim_answer(gp_conn *gc)
{
    if (gc == NULL)
        return 0;
    pthread_mutex_lock(&gc->srv->conns_lock);
    int expired = gc->expired;
    gc->receiving = 0;
    pthread_mutex_unlock(&gc->srv->conns_lock);
    return expired ? -1 : 0;
}

/* The request of gc ended (answered or not): the deadline of the next one
 * starts now. Returns whether the sweeper closed the connection. */
static int request_finished(gp_conn *gc)
{
    pthread_mutex_lock(&gc->srv->conns_lock);
    int expired = gc->expired;
    gc->receiving = 1;
    gc->ready_us = gp_monotonic_us();
    gc->request_id = 0;
    gc->v2 = 0;
    pthread_mutex_unlock(&gc->srv->conns_lock);
    gc->req = NULL;
    return expired;
}

static void refuse_connection(gp_server *srv, gp_conn *gc);

static void conn_opened(gp_server *srv, struct MHD_Connection *conn, void **socket_context)
{
    gp_conn *gc = calloc(1, sizeof *gc);
    *socket_context = gc;
    if (gc == NULL)
        return; /* served without a deadline or a slot */
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ai =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    gc->srv = srv;
    gc->fd = ci ? ci->connect_fd : -1;
    gc->receiving = 1;
    gc->ready_us = gp_monotonic_us();
    gp_slot_key_of(ai ? ai->client_addr : NULL, &gc->key);
    pthread_mutex_lock(&srv->conns_lock);
    int rc = gp_slots_take(srv->slots, &gc->key);
    gc->counted = rc == GP_SLOT_OK;
    gc->refused = rc;
    gc->expired = rc != GP_SLOT_OK; /* nothing more may be written on a refused one */
    gc->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = gc;
    srv->conns = gc;
    pthread_mutex_unlock(&srv->conns_lock);
    if (rc != GP_SLOT_OK)
        refuse_connection(srv, gc);
}

/* libmicrohttpd calls this before it closes the socket, so the sweeper never
 * touches a descriptor that may have been reused. */
static void conn_closed(gp_server *srv, void **socket_context)
{
    gp_conn *gc = *socket_context;
    if (gc == NULL)
        return;
    *socket_context = NULL;
    pthread_mutex_lock(&srv->conns_lock);
    if (gc->prev)
        gc->prev->next = gc->next;
    else
        srv->conns = gc->next;
    if (gc->next)
        gc->next->prev = gc->prev;
    if (gc->counted)
        gp_slots_give(srv->slots, &gc->key);
    pthread_mutex_unlock(&srv->conns_lock);
    free(gc);
}

static void on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    if (code == MHD_CONNECTION_NOTIFY_STARTED)
        conn_opened(cls, conn, socket_context);
    else if (code == MHD_CONNECTION_NOTIFY_CLOSED)
        conn_closed(cls, socket_context);
}

static gp_conn *conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* Write the whole answer head + body on fd, without blocking: nothing has
 * been written on the connection yet, so the send buffer has room; a client
 * that does not read loses the answer only. */
static void send_raw_answer(int fd, const char *status_line, uint64_t id, const char *body,
                            size_t body_len, const char *extra)
{
    char head[320];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %s\r\nConnection: close\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n%s"
                     "X-Request-Id: %llu\r\n\r\n",
                     status_line, body_len, extra, (unsigned long long)id);
    if (n < 0 || (size_t)n >= sizeof head)
        return;
    struct iovec iov[2] = {{head, (size_t)n}, {(void *)body, body_len}};
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = iov;
    mh.msg_iovlen = 2;
    (void)sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* Under conns_lock: close gc past its deadline, answering 408 first when its
 * request line has arrived. Shutting the socket down (not closing it) wakes
 * libmicrohttpd's poll, which then closes the connection itself. */
static void expire(gp_server *srv, gp_conn *gc)
{
    gc->expired = 1;
    char *body = gc->v2 ? srv->timeout_body_v2 : srv->timeout_body;
    size_t body_len = gc->v2 ? srv->timeout_body_v2_len : srv->timeout_body_len;
    if (gc->request_id != 0 && body != NULL && gc->fd >= 0)
        send_raw_answer(gc->fd, "408 Request Timeout", gc->request_id, body, body_len, "");
    if (gc->fd >= 0)
        shutdown(gc->fd, SHUT_RDWR);
}

/* A connection refused a slot (server/slots.h) is answered at once, before
 * its request is read (so it never holds a slot while a slow client sends
 * it), in the /v1 shape (its path is not known yet), and shut down:
 * libmicrohttpd then sees the end of the stream and closes it. Logged at most
 * once a second, as a count. */
static void refuse_connection(gp_server *srv, gp_conn *gc)
{
    int why = gc->refused;
    if (gc->fd >= 0 && srv->refusal[why] != NULL) {
        uint64_t id = atomic_fetch_add(&srv->next_request_id, 1) + 1;
        char retry[48];
        snprintf(retry, sizeof retry, "Retry-After: %d\r\n",
                 gp_status_retry_after(GP_EOVERLOADED));
        send_raw_answer(gc->fd, "429 Too Many Requests", id, srv->refusal[why],
                        srv->refusal_len[why], retry);
    }
    if (gc->fd >= 0)
        shutdown(gc->fd, SHUT_RDWR);
    gp_metrics_request(srv->metrics, GP_ROUTE_NONE, "-", 429, 0.0);
    atomic_fetch_add(&srv->refused_unlogged, 1);
    uint64_t now = gp_monotonic_us();
    uint64_t last = atomic_load(&srv->refused_logged_us);
    if (now - last < 1000000u ||
        !atomic_compare_exchange_strong(&srv->refused_logged_us, &last, now))
        return;
    uint64_t n = atomic_exchange(&srv->refused_unlogged, 0);
    gp_log("gpserve: %llu connections refused 429 by the connection limits (--max-connections "
           "%ld, --max-connections-per-ip %ld, a quarter kept for addresses holding fewer "
           "than %d) since the last such line",
           (unsigned long long)n, srv->cfg.max_connections, srv->cfg.max_connections_per_ip,
           GP_SLOTS_LIGHT);
}

/* The sweeper: every SWEEP_INTERVAL_MS, the connections whose request has
 * not arrived within --request-timeout are closed. */
static void *sweeper_main(void *arg)
{
    gp_server *srv = arg;
    uint64_t limit_us = (uint64_t)srv->cfg.request_timeout * 1000000u;
    pthread_mutex_lock(&srv->conns_lock);
    while (!srv->sweep_stop) {
        gp_cond_wait_ms(&srv->sweep_wake, &srv->conns_lock, SWEEP_INTERVAL_MS);
        if (srv->sweep_stop)
            break;
        uint64_t now = gp_monotonic_us();
        size_t closed = 0, answered = 0;
        for (gp_conn *gc = srv->conns; gc; gc = gc->next) {
            if (!gc->receiving || gc->expired || now - gc->ready_us < limit_us)
                continue;
            answered += gc->request_id != 0;
            expire(srv, gc);
            closed++;
        }
        if (closed > 0) {
            pthread_mutex_unlock(&srv->conns_lock);
            gp_log("gpserve: %zu connections past the request deadline (%ld s, "
                   "--request-timeout) closed, %zu of them answered 408",
                   closed, srv->cfg.request_timeout, answered);
            pthread_mutex_lock(&srv->conns_lock);
        }
    }
    pthread_mutex_unlock(&srv->conns_lock);
    return NULL;
}

/* The 408 body the sweeper sends (v2: in the Open Inference Protocol's shape). */
static char *timeout_body(const gp_server *srv, int v2, size_t *len)
{
    gp_response res;
    memset(&res, 0, sizeof res);
    gp_api_fail(&res, GP_ETIMEOUT, NULL,
                "the request did not arrive whole within %ld s (--request-timeout)",
                srv->cfg.request_timeout);
    if (v2)
        gp_api_oip_error(&res);
    *len = res.body_len;
    return res.body;
}

/* The answers of connections refused a slot, one per reason (GP_SLOT_*). */
static int refusals_make(gp_server *srv)
{
    const gp_server_config *c = &srv->cfg;
    for (int why = GP_SLOT_FULL; why <= GP_SLOT_RESERVED; why++) {
        gp_response res;
        memset(&res, 0, sizeof res);
        if (why == GP_SLOT_FULL)
            gp_api_fail(&res, GP_EOVERLOADED, NULL,
                        "every connection slot is taken (%ld, --max-connections); retry later",
                        c->max_connections);
        else if (why == GP_SLOT_ADDRESS)
            gp_api_fail(&res, GP_EOVERLOADED, NULL,
                        "this client address holds %ld connections, the most one may "
                        "(--max-connections-per-ip); retry later",
                        c->max_connections_per_ip);
        else
            gp_api_fail(&res, GP_EOVERLOADED, NULL,
                        "this client address holds %d or more connections and the slots left "
                        "are kept for addresses that hold fewer; retry later",
                        GP_SLOTS_LIGHT);
        srv->refusal[why] = res.body;
        srv->refusal_len[why] = res.body_len;
        res.body = NULL;
        gp_response_free(&res);
        if (srv->refusal[why] == NULL)
            return -1;
    }
    return 0;
}

static int sweeper_start(gp_server *srv)
{
    if (srv->cfg.request_timeout <= 0)
        return 0;
    srv->timeout_body = timeout_body(srv, 0, &srv->timeout_body_len);
    srv->timeout_body_v2 = timeout_body(srv, 1, &srv->timeout_body_v2_len);
    if (pthread_create(&srv->sweeper, NULL, sweeper_main, srv) != 0)
        return -1;
    srv->sweeper_running = 1;
    return 0;
}

static void sweeper_stop(gp_server *srv)
{
    if (!srv->sweeper_running)
        return;
    pthread_mutex_lock(&srv->conns_lock);
    srv->sweep_stop = 1;
    pthread_cond_signal(&srv->sweep_wake);
    pthread_mutex_unlock(&srv->conns_lock);
    pthread_join(srv->sweeper, NULL);
    srv->sweeper_running = 0;
}

/* ---- responses ---- */

/* Queue res (its body is handed to libmicrohttpd). */
static enum MHD_Result send_response(conn_ctx *ctx, gp_response *res)
{
    if (claim_answer(ctx->gc) != 0) {
        gp_response_free(res);
        ctx->state = CS_ANSWERED;
        return MHD_NO; /* the sweeper answered 408 and closed it */
    }
    struct MHD_Response *r;
    size_t len = res->body ? res->body_len : 0;
    if (len > 0) {
        r = MHD_create_response_from_buffer(len, res->body, MHD_RESPMEM_MUST_FREE);
        if (r)
            res->body = NULL;
    } else {
        r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    }
    if (r == NULL) {
        gp_log("gpserve: request %llu: cannot create a response (out of memory)",
               (unsigned long long)ctx->id);
        gp_response_free(res);
        return MHD_NO;
    }
    if (len > 0 || (res->content_type && res->status != 204))
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                                res->content_type ? res->content_type : "application/json");
    char rid[24];
    snprintf(rid, sizeof rid, "%llu", (unsigned long long)ctx->id);
    MHD_add_response_header(r, "X-Request-Id", rid);
    for (size_t i = 0; i < res->n_headers && i < GP_RESPONSE_MAX_HEADERS; i++)
        MHD_add_response_header(r, res->headers[i].name, res->headers[i].value);
    int status = res->status ? res->status : 500;
    enum MHD_Result ret = MHD_queue_response(ctx->conn, (unsigned)status, r);
    MHD_destroy_response(r);
    gp_response_free(res);
    ctx->status = status;
    ctx->resp_bytes = len;
    ctx->state = CS_ANSWERED;
    return ret;
}

/* Log the message of a 5xx error body before it is sent. */
static void log_server_error(conn_ctx *ctx, const gp_response *res)
{
    if (res->status < 500)
        return;
    char msg[GP_ERROR_MESSAGE_LEN];
    if (!gp_json_find_string(res->body, res->body_len, "message", msg, sizeof msg))
        snprintf(msg, sizeof msg, "(no message)");
    gp_log("gpserve: request %llu: %s %s: error %d: %s", (unsigned long long)ctx->id,
           ctx->method, ctx->path, res->status, msg);
}

static enum MHD_Result answer(conn_ctx *ctx, gp_response *res)
{
    log_server_error(ctx, res);
    /* Every answer on a /v2 path, whoever made it (the early checks, a
     * handler, a batch), carries the Open Inference Protocol's error shape. */
    if (ctx->match.v2)
        gp_api_oip_error(res);
    if (ctx->defer) {
        ctx->defer = 0;
        ctx->deferred = *res;
        memset(res, 0, sizeof *res);
        ctx->state = CS_DEFERRED;
        return MHD_YES;
    }
    return send_response(ctx, res);
}

static enum MHD_Result fail(conn_ctx *ctx, int code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The challenge of a 401. The browser view's routes ask for Basic, so that a
 * browser prompts for the key (as the password) and then sends it with the
 * page's own requests too; the API's routes ask for the Bearer token its
 * clients send (either is accepted on every route: authorized()). */
static const char *auth_challenge(gp_route_id r)
{
    if (r == GP_ROUTE_UI_INDEX || r == GP_ROUTE_UI_ASSET)
        return "Basic realm=\"gpserve\", charset=\"UTF-8\"";
    return "Bearer realm=\"gpserve\"";
}

/* The error answer of fail and refuse_framing; close: the connection too. */
static enum MHD_Result fail_va(conn_ctx *ctx, int code, const char *field, int close,
                               const char *fmt, va_list ap) __attribute__((format(printf, 5, 0)));
static enum MHD_Result fail_va(conn_ctx *ctx, int code, const char *field, int close,
                               const char *fmt, va_list ap)
{
    char message[GP_ERROR_MESSAGE_LEN];
    vsnprintf(message, sizeof message, fmt, ap);
    gp_response res;
    memset(&res, 0, sizeof res);
    gp_api_fail(&res, code, field, "%s", message);
    if (code == GP_EUNAUTHORIZED)
        gp_response_header(&res, "WWW-Authenticate", auth_challenge(ctx->match.route));
    else if (code == GP_EMETHOD)
        gp_response_header(&res, "Allow", gp_route_allow(ctx->match.route));
    if (close)
        gp_response_header(&res, MHD_HTTP_HEADER_CONNECTION, "close");
    return answer(ctx, &res);
}

static enum MHD_Result fail(conn_ctx *ctx, int code, const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    enum MHD_Result r = fail_va(ctx, code, field, 0, fmt, ap);
    va_end(ap);
    return r;
}

/* The answer when the fit queue refuses a job (async or sync). */
static enum MHD_Result queue_failure(conn_ctx *ctx, int rc)
{
    if (rc == GP_EOVERLOADED)
        return fail(ctx, rc, NULL, "the fit queue is full (%ld jobs); retry later",
                    ctx->srv->cfg.queue_size);
    if (rc == GP_ENOTREADY)
        return fail(ctx, rc, NULL, "the server is shutting down");
    return fail(ctx, GP_EINTERNAL, NULL, "cannot queue the fit");
}

/* ---- request context ---- */

static void copy_for_log(char *dst, size_t size, const char *src, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 1 < size; i++) {
        unsigned char c = (unsigned char)src[i];
        dst[o++] = (c < 0x20 || c == 0x7f) ? '?' : (char)c;
    }
    dst[o] = '\0';
}

static conn_ctx *ctx_new(gp_server *srv, const char *uri)
{
    conn_ctx *ctx = calloc(1, sizeof *ctx);
    if (ctx == NULL)
        return NULL;
    ctx->srv = srv;
    ctx->t0_us = gp_monotonic_us();
    ctx->id = atomic_fetch_add(&srv->next_request_id, 1) + 1;
    const char *u = uri ? uri : "";
    size_t plen = strcspn(u, "?");
    copy_for_log(ctx->path, sizeof ctx->path, u, plen);
    gp_route_match_path(u, &ctx->match);
    return ctx;
}

/* The request line has arrived: the request's context, known to its connection. */
static void attach(conn_ctx *ctx, struct MHD_Connection *conn)
{
    gp_conn *gc = conn_of(conn);
    ctx->gc = gc;
    if (gc == NULL)
        return;
    gc->req = ctx;
    pthread_mutex_lock(&gc->srv->conns_lock);
    gc->request_id = ctx->id;
    gc->v2 = ctx->match.v2;
    pthread_mutex_unlock(&gc->srv->conns_lock);
}

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    conn_ctx *ctx = ctx_new(cls, uri);
    if (ctx)
        attach(ctx, conn);
    return ctx;
}

/* A predict or sample request is no longer arriving (parsed: queued, answered
 * here or refused; or ended some other way), for the batcher's count. */
static void arrived(conn_ctx *ctx)
{
    if (ctx->batch_counted) {
        ctx->batch_counted = 0;
        gp_batcher_end(ctx->srv->batcher);
    }
}

static void on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    (void)conn;
    gp_server *srv = cls;
    conn_ctx *ctx = *con_cls;
    if (ctx == NULL)
        return;
    *con_cls = NULL;
    uint64_t us = gp_monotonic_us() - ctx->t0_us;
    /* A refused connection is "expired" too, but its answer was the 429. */
    int refused = ctx->gc && ctx->gc->refused;
    if (ctx->gc && request_finished(ctx->gc) && ctx->status == 0 && !refused) {
        ctx->status = 408; /* the sweeper's answer */
        ctx->resp_bytes = srv->timeout_body_len;
    }
    if (ctx->status) {
        gp_metrics_request(srv->metrics, ctx->match.route, ctx->method, ctx->status,
                           (double)us * 1e-6);
        gp_log("%s %s %d %zu %lluus req=%llu", ctx->method[0] ? ctx->method : "-", ctx->path,
               ctx->status, ctx->resp_bytes, (unsigned long long)us,
               (unsigned long long)ctx->id);
    } else {
        const char *why = toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? "timed out"
                          : toe == MHD_REQUEST_TERMINATED_CLIENT_ABORT ? "client went away"
                          : toe == MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN ? "daemon shutdown"
                                                                           : "closed";
        /* No method: libmicrohttpd refused the request itself (e.g. 431). */
        gp_log("%s %s - 0 %lluus req=%llu (%s before an answer)",
               ctx->method[0] ? ctx->method : "-", ctx->path, (unsigned long long)us,
               (unsigned long long)ctx->id, why);
    }
    if (ctx->fit_pending) {
        ctx->fit_pending = 0;
        atomic_fetch_sub(&srv->sync_pending, 1);
    }
    arrived(ctx);
    gp_response_free(&ctx->fit_res);
    gp_response_free(&ctx->deferred);
    free(ctx->body);
    free(ctx);
}

/* ---- query parameters ---- */
typedef struct query_list {
    gp_query_param *items;
    size_t n, cap;
} query_list;

static enum MHD_Result collect_query(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    (void)kind;
    query_list *q = cls;
    if (q->n < q->cap && key) {
        q->items[q->n].key = key;
        q->items[q->n].value = value ? value : "";
        q->n++;
    }
    return MHD_YES;
}

static int get_query(struct MHD_Connection *conn, query_list *q)
{
    q->items = NULL;
    q->n = 0;
    int count = MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, NULL, NULL);
    q->cap = count > 0 ? (size_t)count : 0;
    if (q->cap == 0)
        return 0;
    q->items = calloc(q->cap, sizeof *q->items);
    if (q->items == NULL)
        return -1;
    MHD_get_connection_values(conn, MHD_GET_ARGUMENT_KIND, collect_query, q);
    return 0;
}

/* ---- fits ---- */
static void fit_before_queue(void *cookie)
{
    conn_ctx *ctx = cookie;
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(ctx->conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    ctx->fd = ci ? ci->connect_fd : -1;
    MHD_suspend_connection(ctx->conn);
}

/* Whether the client of a suspended synchronous fit still waits: a peek at its
 * socket (libmicrohttpd does not watch a suspended connection) sees an
 * orderly close (0) or a reset. Pipelined bytes or nothing yet: still there. */
static int fit_client_alive(void *cookie)
{
    const conn_ctx *ctx = cookie;
    if (ctx->fd < 0)
        return 1;
    char c;
    ssize_t r = recv(ctx->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT);
    if (r == 0)
        return 0;
    return !(r < 0 && (errno == ECONNRESET || errno == ENOTCONN || errno == EPIPE));
}

static void fit_done(void *cookie, gp_response *res)
{
    conn_ctx *ctx = cookie;
    struct MHD_Connection *conn = ctx->conn;
    ctx->fit_res = *res;
    memset(res, 0, sizeof *res);
    /* From here on the request thread owns ctx again. */
    MHD_resume_connection(conn);
}

static enum MHD_Result handle_fit(conn_ctx *ctx, const gp_request *req)
{
    gp_server *srv = ctx->srv;
    if (atomic_load(&srv->stopping))
        return fail(ctx, GP_ENOTREADY, NULL, "the server is shutting down");
    gp_fit_job *fj = NULL;
    gp_error err;
    gp_error_clear(&err);
    if (gp_api_parse_fit(srv->api, req, &fj, &err) != 0 || fj == NULL) {
        gp_response res;
        memset(&res, 0, sizeof res);
        if (err.code == GP_OK)
            gp_error_set(&err, GP_EINTERNAL, NULL, "the fit request could not be parsed");
        gp_api_error(&err, &res);
        return answer(ctx, &res);
    }
    gp_response res;
    memset(&res, 0, sizeof res);
    /* A retry of a keyed fit: the first answer again, nothing fitted. */
    if (gp_api_fit_replay(srv->api, fj, &res)) {
        gp_fit_job_free(fj);
        return answer(ctx, &res);
    }
    if (gp_fit_job_async(fj)) {
        char id[GP_ROUTE_ID_MAX];
        int rc = gp_jobs_submit_async(srv->jobs, fj, id, sizeof id, &err);
        if (rc != 0) {
            /* A retry that ran beside this one stored its job first. */
            int replayed = gp_api_key_taken(&err) && gp_api_fit_replay(srv->api, fj, &res);
            gp_fit_job_free(fj);
            if (replayed)
                return answer(ctx, &res);
            if (rc == GP_EOVERLOADED || rc == GP_ENOTREADY)
                return queue_failure(ctx, rc);
            gp_api_error(&err, &res); /* the store's answer, e.g. 507 for a full disk */
            return answer(ctx, &res);
        }
        gp_api_fit_accepted(id, &res);
        return answer(ctx, &res);
    }
    /* Synchronous: count it first, so that shutdown waits for the answer. */
    ctx->fit_pending = 1;
    atomic_fetch_add(&srv->sync_pending, 1);
    ctx->state = CS_FIT_WAIT;
    int rc = gp_jobs_submit_sync_watched(srv->jobs, fj, fit_before_queue, fit_done,
                                         fit_client_alive, ctx);
    if (rc != 0) {
        ctx->fit_pending = 0;
        atomic_fetch_sub(&srv->sync_pending, 1);
        ctx->state = CS_BODY;
        gp_fit_job_free(fj);
        return queue_failure(ctx, rc);
    }
    return MHD_YES; /* suspended; fit_done resumes us */
}

/* ---- predict and sample: batched on the shared pool (server/batcher.h) ---- */

static int is_infer(gp_route_id r)
{
    return r == GP_ROUTE_V2_INFER || r == GP_ROUTE_V2_VERSION_INFER;
}

/* kind: GP_CALL_PREDICT or GP_CALL_SAMPLE; an infer (V2) is a predict. */
static enum MHD_Result handle_point(conn_ctx *ctx, int kind, const gp_request *req)
{
    gp_server *srv = ctx->srv;
    const gp_route_match *m = &ctx->match;
    gp_point_call *c = NULL;
    gp_response res;
    memset(&res, 0, sizeof res);
    int rc = is_infer(m->route)
                 ? gp_api_oip_infer_parse(srv->api, m->name, m->version, req, &c, &res)
                 : gp_api_point_call_parse(srv->api, kind, m->name, req, &c, &res);
    arrived(ctx);
    if (rc != 0)
        return answer(ctx, &res);
    if (gp_batcher_try_alone(srv->batcher)) {
        gp_api_point_calls_run(srv->api, &c, 1, &res);
        gp_batcher_alone_done(srv->batcher);
        return answer(ctx, &res);
    }
    /* Suspended before it is queued: fit_done (a batch answers like a fit)
     * may resume it at once. */
    ctx->fit_pending = 1;
    atomic_fetch_add(&srv->sync_pending, 1);
    ctx->state = CS_FIT_WAIT;
    MHD_suspend_connection(ctx->conn);
    if (gp_batcher_submit(srv->batcher, c, fit_done, ctx) != 0) {
        gp_api_point_calls_run(srv->api, &c, 1, &res); /* shutting down: answer here */
        fit_done(ctx, &res);
    }
    return MHD_YES;
}

/* ---- answers that wait for the disk (server/syncer.h) ---- */

/* The answer res once commit ticket is on disk: the connection suspended
 * and answered by the syncer (fit_done resumes it, as a fit's answer), so
 * that the request thread serves others meanwhile and every write in flight
 * shares one sync. Waited for here when the syncer is stopping. */
static enum MHD_Result answer_when_durable(conn_ctx *ctx, uint64_t ticket, gp_response *res)
{
    gp_server *srv = ctx->srv;
    ctx->fit_pending = 1;
    atomic_fetch_add(&srv->sync_pending, 1);
    ctx->state = CS_FIT_WAIT;
    MHD_suspend_connection(ctx->conn);
    if (srv->syncer == NULL || gp_syncer_submit(srv->syncer, ticket, res, fit_done, ctx) != 0) {
        gp_error err;
        gp_error_clear(&err);
        if (gp_api_wait_durable(srv->api, ticket, &err) != 0) {
            gp_response_free(res);
            memset(res, 0, sizeof *res);
            gp_api_error(&err, res);
        }
        fit_done(ctx, res);
    }
    return MHD_YES;
}

/* ---- metrics ---- */
static void handle_metrics(gp_server *srv, gp_response *res)
{
    gp_metrics_gauges g;
    memset(&g, 0, sizeof g);
    gp_jobs_counts(srv->jobs, &g.jobs_queued, &g.jobs_running);
    gp_api_stats st;
    memset(&st, 0, sizeof st);
    gp_api_get_stats(srv->api, &st);
    g.models_loaded = st.models_loaded;
    g.models_not_finite = st.models_not_finite;
    g.jitter_escalations = st.jitter_escalations;
    g.variance_clamps = st.variance_clamps;
    if (srv->batcher) {
        gp_batcher_stats bs;
        gp_batcher_get_stats(srv->batcher, &bs);
        g.batches = bs.batches;
        g.batched_requests = bs.calls;
        g.batched_points = bs.points;
        g.batch_max_requests = bs.max_calls;
    }
    size_t len = 0;
    char *text = gp_metrics_render(srv->metrics, &g, &len);
    if (text == NULL) {
        gp_api_fail(res, GP_ENOMEM, NULL, "out of memory");
        return;
    }
    res->status = 200;
    res->content_type = METRICS_CONTENT_TYPE;
    res->body = text;
    res->body_len = len;
}

/* ---- dispatch of a complete request ---- */
static enum MHD_Result dispatch(conn_ctx *ctx)
{
    gp_server *srv = ctx->srv;
    gp_api *api = srv->api;
    const gp_route_match *m = &ctx->match;
    query_list q;
    if (get_query(ctx->conn, &q) != 0)
        return fail(ctx, GP_ENOMEM, NULL, "out of memory");
    gp_request req;
    memset(&req, 0, sizeof req);
    req.content_type =
        MHD_lookup_connection_value(ctx->conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    req.body = ctx->body;
    req.body_len = ctx->len;
    req.query = q.items;
    req.n_query = q.n;
    req.idempotency_key = MHD_lookup_connection_value(ctx->conn, MHD_HEADER_KIND,
                                                      "Idempotency-Key");

    gp_response res;
    memset(&res, 0, sizeof res);
    enum MHD_Result ret;
    switch (m->route) {
    case GP_ROUTE_HEALTHZ:
        gp_api_health(&res);
        break;
    case GP_ROUTE_METRICS:
        handle_metrics(srv, &res);
        break;
    case GP_ROUTE_OPENAPI:
        gp_api_openapi(&res);
        break;
    case GP_ROUTE_METHODS:
        gp_api_methods(api, &res);
        break;
    case GP_ROUTE_MODELS:
        if (ctx->verb == GP_VERB_POST) {
            ret = handle_fit(ctx, &req);
            free(q.items);
            return ret;
        }
        gp_api_list_models(api, &res);
        break;
    case GP_ROUTE_MODEL:
        if (ctx->verb == GP_VERB_DELETE)
            gp_api_delete_model(api, m->name, &res);
        else
            gp_api_get_model(api, m->name, 0, &res);
        break;
    case GP_ROUTE_MODEL_VERSION:
        gp_api_get_model(api, m->name, m->version, &res);
        break;
    case GP_ROUTE_PREDICT:
    case GP_ROUTE_SAMPLE:
        if (srv->batcher) {
            ret = handle_point(ctx, m->route == GP_ROUTE_PREDICT ? GP_CALL_PREDICT
                                                                 : GP_CALL_SAMPLE, &req);
            free(q.items);
            return ret;
        }
        if (m->route == GP_ROUTE_PREDICT)
            gp_api_predict(api, m->name, &req, &res);
        else
            gp_api_sample(api, m->name, &req, &res);
        break;
    case GP_ROUTE_OBSERVE: {
        uint64_t ticket = 0;
        gp_api_observe_deferred(api, m->name, &req, &res, &ticket);
        if (ticket != 0) {
            free(q.items);
            return answer_when_durable(ctx, ticket, &res);
        }
        break;
    }
    case GP_ROUTE_JOB:
        if (ctx->verb == GP_VERB_DELETE)
            gp_jobs_cancel(srv->jobs, m->id, &res);
        else
            gp_jobs_get(srv->jobs, m->id, &res);
        break;
    case GP_ROUTE_V2_SERVER:
        gp_api_oip_server_metadata(&res);
        break;
    case GP_ROUTE_V2_LIVE:
        gp_api_oip_live(&res);
        break;
    case GP_ROUTE_READYZ:
    case GP_ROUTE_V2_READY:
    case GP_ROUTE_V2_MODEL_READY:
    case GP_ROUTE_V2_VERSION_READY:
        if (atomic_load(&srv->stopping))
            gp_api_fail(&res, GP_ENOTREADY, NULL, "the server is shutting down");
        else if (m->route == GP_ROUTE_READYZ)
            gp_api_readiness(api, &res);
        else if (m->route == GP_ROUTE_V2_READY)
            gp_api_oip_ready(api, &res);
        else
            gp_api_oip_model_ready(api, m->name, m->version, &res);
        break;
    case GP_ROUTE_V2_MODEL:
    case GP_ROUTE_V2_MODEL_VERSION:
        gp_api_oip_model_metadata(api, m->name, m->version, &res);
        break;
    case GP_ROUTE_V2_INFER:
    case GP_ROUTE_V2_VERSION_INFER:
        if (srv->batcher) {
            ret = handle_point(ctx, GP_CALL_PREDICT, &req);
            free(q.items);
            return ret;
        }
        gp_api_oip_infer(api, m->name, m->version, &req, &res);
        break;
    case GP_ROUTE_UI_INDEX:
    case GP_ROUTE_UI_ASSET:
        gp_api_ui_asset(m->route == GP_ROUTE_UI_INDEX ? "index.html" : m->asset,
                        MHD_lookup_connection_value(ctx->conn, MHD_HEADER_KIND,
                                                    MHD_HTTP_HEADER_IF_NONE_MATCH),
                        &res);
        break;
    default:
        gp_api_fail(&res, GP_ENOTFOUND, NULL, "no route %s %s", ctx->method, ctx->path);
        break;
    }
    free(q.items);
    if (res.status == 0)
        gp_api_fail(&res, GP_EINTERNAL, NULL, "the handler produced no response");
    return answer(ctx, &res);
}

/* ---- checks made before the body is read ---- */
static int authorized(gp_server *srv, struct MHD_Connection *conn)
{
    if (srv->api_key == NULL)
        return 1;
    const char *h =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    const char *tok = "";
    size_t toklen = 0;
    /* A Bearer token, or the password of Basic credentials (what a browser
     * can send on navigation); the user name is not looked at. Decoded
     * credentials are shorter than the header that carries them. */
    char *basic = NULL;
    int have = gp_bearer_token(h, &tok, &toklen);
    if (!have && h != NULL && (basic = malloc(strlen(h) + 1)) != NULL)
        have = gp_basic_password(h, basic, strlen(h) + 1, &tok, &toklen);
    if (!have) {
        tok = "";
        toklen = 0;
    }
    /* Compare even without a token, so that timing says nothing. */
    int same = gp_ct_equal(tok, toklen, srv->api_key, srv->api_key_len);
    free(basic);
    return have && same;
}

/* ---- the request's framing (RFC 9112 §6.1, §6.3) ----
 *
 * libmicrohttpd 0.9.75 takes the first of several Content-Length headers,
 * lets any Transfer-Encoding win over Content-Length, reads a body of
 * unknown length for a Transfer-Encoding other than "chunked", and keeps a
 * header name with white space before its colon ("Transfer-Encoding :") as a
 * different header. A proxy in front may frame the same bytes otherwise and
 * smuggle a second request inside the body; so each of these is refused 400
 * and the connection closed (its body is not read: where it ends is the
 * question). Identical duplicate Content-Length headers are refused too:
 * the RFC allows either, and no sound client sends two. */
typedef struct framing {
    int lengths;        /* Content-Length headers (those the shim renamed too) */
    int encodings;      /* Transfer-Encoding headers */
    const char *encoding; /* the first one's value */
    const char *spaced; /* a header name holding white space, or NULL */
} framing;

static enum MHD_Result count_framing(void *cls, enum MHD_ValueKind kind, const char *key,
                                     const char *value)
{
    (void)kind;
    framing *f = cls;
    if (key == NULL)
        return MHD_YES;
    if (strcasecmp(key, MHD_HTTP_HEADER_CONTENT_LENGTH) == 0 ||
        strcasecmp(key, GP_MHD_BAD_CONTENT_LENGTH) == 0) {
        f->lengths++;
    } else if (strcasecmp(key, MHD_HTTP_HEADER_TRANSFER_ENCODING) == 0) {
        if (f->encodings++ == 0)
            f->encoding = value ? value : "";
    } else if (f->spaced == NULL && key[strcspn(key, " \t")] != '\0') {
        f->spaced = key;
    }
    return MHD_YES;
}

/* Whether the value of a Transfer-Encoding is "chunked" as libmicrohttpd
 * reads it: in any case, nothing around it (it strips the blanks before a
 * value, not those after; "chunked " would be a body of unknown length). */
static int is_chunked(const char *v)
{
    return strcasecmp(v, "chunked") == 0;
}

static void framing_of(struct MHD_Connection *conn, framing *f)
{
    memset(f, 0, sizeof *f);
    MHD_get_connection_values(conn, MHD_HEADER_KIND, count_framing, f);
}

static int framing_sound(const framing *f, const char *version)
{
    if (f->spaced || f->lengths > 1)
        return 0;
    if (f->encodings == 0)
        return 1;
    return f->lengths == 0 && f->encodings == 1 && is_chunked(f->encoding) &&
           (version == NULL || strcmp(version, MHD_HTTP_VERSION_1_0) != 0);
}

static int framing_refused(conn_ctx *ctx, const char *version)
{
    framing f;
    framing_of(ctx->conn, &f);
    return !framing_sound(&f, version);
}

static enum MHD_Result refuse_framing(conn_ctx *ctx, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static enum MHD_Result refuse_framing(conn_ctx *ctx, const char *field, const char *fmt, ...)
{
    ctx->defer = 0; /* answered before the body: libmicrohttpd reads none of it and closes */
    va_list ap;
    va_start(ap, fmt);
    enum MHD_Result r = fail_va(ctx, GP_EHTTP, field, 1, fmt, ap);
    va_end(ap);
    return r;
}

static void printable(char *dst, size_t size, const char *s);

/* The answer to a request whose framing is not sound (framing_refused). */
static enum MHD_Result check_framing(conn_ctx *ctx, const char *version)
{
    framing f;
    framing_of(ctx->conn, &f);
    char shown[48];
    if (f.spaced) {
        printable(shown, sizeof shown, f.spaced);
        return refuse_framing(ctx, NULL,
                              "the header name '%s' holds white space (none is allowed "
                              "before the colon, RFC 9112 §5.1)", shown);
    }
    if (f.lengths > 1)
        return refuse_framing(ctx, MHD_HTTP_HEADER_CONTENT_LENGTH,
                              "Content-Length appears %d times; send it once", f.lengths);
    if (f.lengths > 0)
        return refuse_framing(ctx, MHD_HTTP_HEADER_TRANSFER_ENCODING,
                              "both Transfer-Encoding and Content-Length: send one of them "
                              "(RFC 9112 §6.3)");
    if (version && strcmp(version, MHD_HTTP_VERSION_1_0) == 0)
        return refuse_framing(ctx, MHD_HTTP_HEADER_TRANSFER_ENCODING,
                              "Transfer-Encoding in an HTTP/1.0 request (RFC 9112 §6.1)");
    printable(shown, sizeof shown, f.encoding ? f.encoding : "");
    return refuse_framing(ctx, MHD_HTTP_HEADER_TRANSFER_ENCODING,
                          "Transfer-Encoding '%s'%s: only a single 'chunked' is accepted",
                          shown, f.encodings > 1 ? " (and more)" : "");
}

static enum MHD_Result check_request(conn_ctx *ctx, const char *cl);

static enum MHD_Result first_call(conn_ctx *ctx, const char *method, const char *version)
{
    struct MHD_Connection *conn = ctx->conn;
    if (ctx->gc && ctx->gc->refused)
        return MHD_NO; /* refused a slot: answered already, libmicrohttpd read it anyway */
    snprintf(ctx->method, sizeof ctx->method, "%s", method ? method : "?");
    ctx->verb = gp_verb_of(method);
    ctx->state = CS_BODY;
    gp_route_id r = ctx->match.route;
    if (ctx->srv->batcher && (r == GP_ROUTE_PREDICT || r == GP_ROUTE_SAMPLE || is_infer(r))) {
        gp_batcher_begin(ctx->srv->batcher);
        ctx->batch_counted = 1;
    }
    const char *cl =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *te =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    if (framing_refused(ctx, version))
        return check_framing(ctx, version);
    ctx->defer = te == NULL && (cl == NULL || strspn(cl, "0") == strlen(cl));
    enum MHD_Result ret = check_request(ctx, cl);
    ctx->defer = 0;
    return ret;
}

/* Printable ASCII of s (at most size - 1 bytes), others as '?': header
 * values may hold any byte, and a JSON message must be UTF-8. */
static void printable(char *dst, size_t size, const char *s)
{
    size_t o = 0;
    for (; s[o] != '\0' && o + 1 < size; o++)
        dst[o] = (s[o] >= 0x20 && s[o] < 0x7f) ? s[o] : '?';
    dst[o] = '\0';
}

/* A Content-Length libmicrohttpd would refuse (server/mhd_shim.h): the body's
 * extent is unknown, so the answer closes the connection. */
static enum MHD_Result refuse_length(conn_ctx *ctx, const char *value)
{
    char shown[48];
    printable(shown, sizeof shown, value);
    int digits = value[0] != '\0' && strspn(value, "0123456789") == strlen(value);
    gp_response res;
    memset(&res, 0, sizeof res);
    if (digits)
        gp_api_fail(&res, GP_ETOOBIG, MHD_HTTP_HEADER_CONTENT_LENGTH,
                    "Content-Length %s is beyond 64 bits; the body cap is %ld MiB "
                    "(--max-body-mb)", shown, ctx->srv->cfg.max_body_mb);
    else
        gp_api_fail(&res, GP_EHTTP, MHD_HTTP_HEADER_CONTENT_LENGTH,
                    "Content-Length '%s' is not a number of bytes (decimal digits only)",
                    shown);
    gp_response_header(&res, MHD_HTTP_HEADER_CONNECTION, "close");
    return answer(ctx, &res);
}

/* The checks of first_call; errors are answered (or deferred) here. */
static enum MHD_Result check_request(conn_ctx *ctx, const char *cl)
{
    gp_server *srv = ctx->srv;
    struct MHD_Connection *conn = ctx->conn;
    gp_route_id r = ctx->match.route;
    /* The request's framing first: nothing else of it can be trusted. */
    const char *bad_cl =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, GP_MHD_BAD_CONTENT_LENGTH);
    if (bad_cl)
        return refuse_length(ctx, bad_cl);
    if (r == GP_ROUTE_NONE)
        return fail(ctx, GP_ENOTFOUND, NULL, "no route %s", ctx->path);
    if (gp_route_needs_auth(r) && !authorized(srv, conn))
        return fail(ctx, GP_EUNAUTHORIZED, NULL,
                    "missing or wrong API key (send 'Authorization: Bearer KEY', or the key "
                    "as the password of Basic credentials)");
    if ((gp_route_verbs(r) & ctx->verb) == 0)
        return fail(ctx, GP_EMETHOD, NULL, "%s is not allowed on %s (allowed: %s)", ctx->method,
                    gp_route_pattern(r), gp_route_allow(r));
    switch (ctx->match.param_error) {
    case GP_PARAM_OK:
        break;
    case GP_PARAM_BAD_NAME:
        return fail(ctx, GP_EINVAL, "name",
                    "a model name must match [A-Za-z0-9._-]{1,64}");
    case GP_PARAM_BAD_VERSION:
        return fail(ctx, GP_EINVAL, "version", "a version must be an integer >= 1");
    case GP_PARAM_BAD_ID:
        return fail(ctx, GP_EINVAL, "id", "a job id must match [A-Za-z0-9._-]{1,39}");
    }
    ctx->body_types = gp_route_body_types(r, ctx->verb);
    if (ctx->body_types) {
        const char *ct =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
        int ok = gp_media_type_is(ct, "application/json") ||
                 ((ctx->body_types & 2) && gp_media_type_is(ct, "text/csv"));
        if (!ok)
            return fail(ctx, GP_EMEDIATYPE, NULL, "Content-Type must be %s (got %s)",
                        (ctx->body_types & 2) ? "application/json or text/csv"
                                              : "application/json",
                        ct ? ct : "none");
    }
    if (cl) {
        char *end = NULL;
        unsigned long long n = strtoull(cl, &end, 10);
        if (end != cl && n > srv->max_body)
            return fail(ctx, GP_ETOOBIG, NULL,
                        "the request body (%llu bytes) is larger than %ld MiB (--max-body-mb)",
                        n, srv->cfg.max_body_mb);
        if (ctx->body_types && end != cl && n > 0 && n <= srv->max_body) {
            /* Room for the announced body (grown later past 8 MiB, so that
             * a claim alone does not reserve much). */
            size_t want = n < ((size_t)8 << 20) ? (size_t)n : ((size_t)8 << 20);
            ctx->body = malloc(want);
            if (ctx->body)
                ctx->cap = want;
        }
    }
    return MHD_YES;
}

static int append_body(conn_ctx *ctx, const char *data, size_t n)
{
    size_t max = ctx->srv->max_body;
    if (n > max - ctx->len)
        return 1; /* too large */
    if (ctx->len + n > ctx->cap) {
        size_t cap = ctx->cap ? ctx->cap : 64 * 1024;
        while (cap < ctx->len + n)
            cap = cap > max / 2 ? max : cap * 2;
        char *b = realloc(ctx->body, cap);
        if (b == NULL)
            return -1;
        ctx->body = b;
        ctx->cap = cap;
    }
    memcpy(ctx->body + ctx->len, data, n);
    ctx->len += n;
    return 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    gp_server *srv = cls;
    conn_ctx *ctx = *con_cls;
    if (ctx == NULL) {
        /* The URI callback always runs first; this is only a fallback. */
        ctx = ctx_new(srv, url);
        if (ctx == NULL)
            return MHD_NO;
        attach(ctx, conn);
        *con_cls = ctx;
    }
    ctx->conn = conn;
    switch (ctx->state) {
    case CS_NEW:
        return first_call(ctx, method, version);
    case CS_FIT_WAIT: {
        /* Resumed by fit_done: answer with the fit's response. */
        gp_response res = ctx->fit_res;
        memset(&ctx->fit_res, 0, sizeof ctx->fit_res);
        if (ctx->fit_pending) {
            ctx->fit_pending = 0;
            atomic_fetch_sub(&srv->sync_pending, 1);
        }
        *upload_data_size = 0;
        if (res.status == 0) { /* the client went away: the fit was cancelled */
            gp_response_free(&res);
            return MHD_NO;
        }
        return answer(ctx, &res);
    }
    case CS_DEFERRED:
        if (*upload_data_size > 0) {
            *upload_data_size = 0;
            return MHD_YES;
        }
        return send_response(ctx, &ctx->deferred);
    case CS_ANSWERED:
        /* Upload data after an early answer: drop it. */
        *upload_data_size = 0;
        return MHD_YES;
    case CS_BODY:
    case CS_DISCARD:
        break;
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (ctx->state == CS_DISCARD || !ctx->body_types) {
            ctx->discarded += n;
            if (ctx->discarded > DISCARD_LIMIT)
                return MHD_NO;
            return MHD_YES;
        }
        int rc = append_body(ctx, upload_data, n);
        if (rc == 1) {
            ctx->state = CS_DISCARD;
            ctx->discarded = ctx->len + n;
            free(ctx->body);
            ctx->body = NULL;
            ctx->len = ctx->cap = 0;
        } else if (rc < 0) {
            ctx->state = CS_DISCARD;
            ctx->discarded = n;
        }
        return MHD_YES;
    }
    /* The whole request is in: past the sweeper's reach from here. */
    if (claim_answer(ctx->gc) != 0)
        return MHD_NO;
    if (ctx->state == CS_DISCARD)
        return fail(ctx, GP_ETOOBIG, NULL,
                    "the request body is larger than %ld MiB (--max-body-mb)",
                    srv->cfg.max_body_mb);
    return dispatch(ctx);
}

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

struct MHD_Response *gp_http_library_error(struct MHD_Connection *c, unsigned *status)
{
    gp_conn *gc = conn_of(c);
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
    char rid[24];
    snprintf(rid, sizeof rid, "%llu", (unsigned long long)id);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "application/json");
    MHD_add_response_header(r, "X-Request-Id", rid);
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONNECTION, "close");
    *status = (unsigned)res.status;
    (void)claim_answer(gc); /* the library writes its answer now, whatever the sweeper did */
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

/* Free what gp_server_start made (the daemon and the sweeper stopped). */
static void server_free(gp_server *srv)
{
    gp_batcher_free(srv->batcher);
    gp_syncer_free(srv->syncer);
    gp_jobs_free(srv->jobs);
    gp_metrics_free(srv->metrics);
    pthread_cond_destroy(&srv->sweep_wake);
    pthread_mutex_destroy(&srv->conns_lock);
    free(srv->timeout_body);
    free(srv->timeout_body_v2);
    for (size_t i = 0; i < sizeof srv->refusal / sizeof srv->refusal[0]; i++)
        free(srv->refusal[i]);
    gp_slots_free(srv->slots);
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

/* The listening address of cfg (sa4 or sa6 filled); NULL when --bind is neither. */
static const struct sockaddr *listen_address(const gp_server_config *cfg,
                                             struct sockaddr_in *a4, struct sockaddr_in6 *a6,
                                             unsigned *ipv6)
{
    memset(a4, 0, sizeof *a4);
    memset(a6, 0, sizeof *a6);
    *ipv6 = 0;
    if (inet_pton(AF_INET, cfg->bind, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)cfg->port);
        return (const struct sockaddr *)a4;
    }
    if (inet_pton(AF_INET6, cfg->bind, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)cfg->port);
        *ipv6 = MHD_USE_IPv6;
        return (const struct sockaddr *)a6;
    }
    return NULL;
}

/* Start libmicrohttpd on addr: epoll, or poll where epoll is missing. */
static struct MHD_Daemon *start_mhd(gp_server *srv, const struct sockaddr *addr, unsigned ipv6)
{
    const gp_server_config *cfg = &srv->cfg;
    long threads = cfg->threads;
    if (threads <= 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cpus > 0 ? cpus : 1;
    }
    unsigned base = MHD_USE_INTERNAL_POLLING_THREAD | MHD_ALLOW_SUSPEND_RESUME |
                    MHD_USE_ERROR_LOG | ipv6;
    unsigned pollers[2] = {MHD_USE_EPOLL, MHD_USE_POLL};
    int first = MHD_is_feature_supported(MHD_FEATURE_EPOLL) == MHD_YES ? 0 : 1;
    struct MHD_Daemon *d = NULL;
    for (int i = first; i < 2 && d == NULL; i++) {
        errno = 0;
        d = MHD_start_daemon(
            base | pollers[i], 0, NULL, NULL, on_request, srv, MHD_OPTION_EXTERNAL_LOGGER,
            on_mhd_log, srv, MHD_OPTION_SOCK_ADDR, addr, MHD_OPTION_THREAD_POOL_SIZE,
            (unsigned)threads, MHD_OPTION_CONNECTION_LIMIT,
            (unsigned)gp_server_connection_sockets(cfg), MHD_OPTION_PER_IP_CONNECTION_LIMIT, 0u,
            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)cfg->timeout,
            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)CONN_MEMORY_KIB * 1024,
            MHD_OPTION_URI_LOG_CALLBACK, on_uri, srv, MHD_OPTION_NOTIFY_COMPLETED, on_completed,
            srv, MHD_OPTION_NOTIFY_CONNECTION, on_connection, srv, MHD_OPTION_END);
        if (d == NULL && i == 0) {
            if (errno == EADDRINUSE || errno == EADDRNOTAVAIL || errno == EACCES)
                break;
            gp_log("gpserve: starting with epoll failed; trying poll");
        }
    }
    return d;
}

gp_server *gp_server_start(const gp_server_config *cfg, gp_api *api, const char *api_key,
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
    gp_server *srv = calloc(1, sizeof *srv);
    if (srv == NULL || init_locks(srv) != 0) {
        snprintf(msg, msg_size, "out of memory");
        free(srv);
        return NULL;
    }
    srv->cfg = *cfg;
    srv->api = api;
    srv->api_key = api_key;
    srv->api_key_len = api_key ? strlen(api_key) : 0;
    srv->max_body = (size_t)cfg->max_body_mb * 1024 * 1024;
    srv->listen_fd = MHD_INVALID_SOCKET;
    atomic_init(&srv->stopping, 0);
    atomic_init(&srv->next_request_id, 0);
    atomic_init(&srv->sync_pending, 0);
    atomic_init(&srv->refused_unlogged, 0);
    atomic_init(&srv->refused_logged_us, 0);
    srv->slots = gp_slots_new((size_t)cfg->max_connections, (size_t)cfg->max_connections_per_ip);
    if (srv->slots == NULL || refusals_make(srv) != 0) {
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
    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    unsigned ipv6 = 0;
    const struct sockaddr *addr = listen_address(cfg, &a4, &a6, &ipv6);
    if (addr == NULL) {
        snprintf(msg, msg_size, "--bind '%s' is not an IPv4 or IPv6 address", cfg->bind);
        server_free(srv);
        return NULL;
    }
    srv->daemon = start_mhd(srv, addr, ipv6);
    if (srv->daemon == NULL) {
        snprintf(msg, msg_size, "cannot listen on %s:%ld: %s", cfg->bind, cfg->port,
                 errno ? strerror(errno) : "libmicrohttpd could not start");
        server_free(srv);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
    srv->port = info && info->port ? info->port : (unsigned)cfg->port;
    if (gp_jobs_start(srv->jobs) != 0 || sweeper_start(srv) != 0) {
        snprintf(msg, msg_size, "cannot start the fit workers or the request-deadline thread");
        MHD_stop_daemon(srv->daemon);
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

void gp_server_stop(gp_server *srv)
{
    if (srv == NULL)
        return;
    atomic_store(&srv->stopping, 1);
    sweeper_stop(srv);
    srv->listen_fd = MHD_quiesce_daemon(srv->daemon);
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
    MHD_stop_daemon(srv->daemon);
    if (srv->listen_fd != MHD_INVALID_SOCKET)
        close(srv->listen_fd);
    server_free(srv);
}
