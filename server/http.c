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
 *   ANSWERED  a response is queued. */
#include "server/http.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "server/jobs.h"
#include "server/metrics.h"
#include "server/route.h"
#include "server/util.h"

#define LOG_PATH_MAX 200
/* A body past the cap is read and dropped so that the 413 can be answered;
 * a client that keeps sending this much more is cut off instead. */
#define DISCARD_LIMIT ((size_t)1 << 30)
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

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
    gp_metrics *metrics;
    atomic_int stopping;
    atomic_uint_fast64_t next_request_id;
    atomic_int sync_pending; /* synchronous fits not answered yet */
};

enum conn_state { CS_NEW = 0, CS_BODY, CS_DISCARD, CS_FIT_WAIT, CS_DEFERRED, CS_ANSWERED };

typedef struct conn_ctx {
    gp_server *srv;
    struct MHD_Connection *conn;
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
    /* synchronous fit */
    int fit_pending;        /* counted in srv->sync_pending */
    gp_response fit_res;    /* written by the worker before it resumes us */
    /* An error found in the first call of a request without a body is sent
     * in the final call: answered earlier, libmicrohttpd closes the
     * connection (it cannot tell that no body follows). */
    int defer;
    gp_response deferred;
    /* the answer, for the log and metrics */
    int status;
    size_t resp_bytes;
} conn_ctx;

/* ---- responses ---- */

/* Queue res (its body is handed to libmicrohttpd). */
static enum MHD_Result send_response(conn_ctx *ctx, gp_response *res)
{
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

static enum MHD_Result fail(conn_ctx *ctx, int code, const char *field, const char *fmt, ...)
{
    char message[GP_ERROR_MESSAGE_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    gp_response res;
    memset(&res, 0, sizeof res);
    gp_api_fail(&res, code, field, "%s", message);
    if (code == GP_EUNAUTHORIZED)
        gp_response_header(&res, "WWW-Authenticate", "Bearer");
    else if (code == GP_EMETHOD)
        gp_response_header(&res, "Allow", gp_route_allow(ctx->match.route));
    return answer(ctx, &res);
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

static void *on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    (void)conn;
    return ctx_new(cls, uri);
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
    if (gp_fit_job_async(fj)) {
        char id[GP_ROUTE_ID_MAX];
        int rc = gp_jobs_submit_async(srv->jobs, fj, id, sizeof id);
        if (rc != 0) {
            gp_fit_job_free(fj);
            return queue_failure(ctx, rc);
        }
        gp_response res;
        memset(&res, 0, sizeof res);
        res.status = 202;
        res.content_type = "application/json";
        char body[128];
        int n = snprintf(body, sizeof body, "{\"job\":\"%s\",\"status\":\"queued\"}", id);
        res.body = malloc((size_t)n + 1);
        if (res.body == NULL)
            return fail(ctx, GP_ENOMEM, NULL, "out of memory");
        memcpy(res.body, body, (size_t)n + 1);
        res.body_len = (size_t)n;
        char loc[96];
        snprintf(loc, sizeof loc, "/v1/jobs/%s", id);
        gp_response_header(&res, "Location", loc);
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
    g.jitter_escalations = st.jitter_escalations;
    g.variance_clamps = st.variance_clamps;
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

    gp_response res;
    memset(&res, 0, sizeof res);
    enum MHD_Result ret;
    switch (m->route) {
    case GP_ROUTE_HEALTHZ:
        gp_api_health(&res);
        break;
    case GP_ROUTE_READYZ:
        if (atomic_load(&srv->stopping))
            gp_api_fail(&res, GP_ENOTREADY, NULL, "the server is shutting down");
        else
            gp_api_readiness(api, &res);
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
        gp_api_predict(api, m->name, &req, &res);
        break;
    case GP_ROUTE_SAMPLE:
        gp_api_sample(api, m->name, &req, &res);
        break;
    case GP_ROUTE_OBSERVE:
        gp_api_observe(api, m->name, &req, &res);
        break;
    case GP_ROUTE_JOB:
        if (ctx->verb == GP_VERB_DELETE)
            gp_jobs_cancel(srv->jobs, m->id, &res);
        else
            gp_jobs_get(srv->jobs, m->id, &res);
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
    int have = gp_bearer_token(h, &tok, &toklen);
    /* Compare even without a token, so that timing says nothing. */
    int same = gp_ct_equal(tok, toklen, srv->api_key, srv->api_key_len);
    return have && same;
}

static enum MHD_Result check_request(conn_ctx *ctx, const char *cl);

static enum MHD_Result first_call(conn_ctx *ctx, const char *method)
{
    struct MHD_Connection *conn = ctx->conn;
    snprintf(ctx->method, sizeof ctx->method, "%s", method ? method : "?");
    ctx->verb = gp_verb_of(method);
    ctx->state = CS_BODY;
    const char *cl =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
    const char *te =
        MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING);
    ctx->defer = te == NULL && (cl == NULL || strspn(cl, "0") == strlen(cl));
    enum MHD_Result ret = check_request(ctx, cl);
    ctx->defer = 0;
    return ret;
}

/* The checks of first_call; errors are answered (or deferred) here. */
static enum MHD_Result check_request(conn_ctx *ctx, const char *cl)
{
    gp_server *srv = ctx->srv;
    struct MHD_Connection *conn = ctx->conn;
    gp_route_id r = ctx->match.route;
    if (r == GP_ROUTE_NONE)
        return fail(ctx, GP_ENOTFOUND, NULL, "no route %s", ctx->path);
    if (gp_route_needs_auth(r) && !authorized(srv, conn))
        return fail(ctx, GP_EUNAUTHORIZED, NULL,
                    "missing or wrong API key (send 'Authorization: Bearer KEY')");
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
    (void)version;
    gp_server *srv = cls;
    conn_ctx *ctx = *con_cls;
    if (ctx == NULL) {
        /* The URI callback always runs first; this is only a fallback. */
        ctx = ctx_new(srv, url);
        if (ctx == NULL)
            return MHD_NO;
        *con_cls = ctx;
    }
    ctx->conn = conn;
    switch (ctx->state) {
    case CS_NEW:
        return first_call(ctx, method);
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
    /* The whole request is in. */
    if (ctx->state == CS_DISCARD)
        return fail(ctx, GP_ETOOBIG, NULL,
                    "the request body is larger than %ld MiB (--max-body-mb)",
                    srv->cfg.max_body_mb);
    return dispatch(ctx);
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    (void)cls;
    char buf[512];
    vsnprintf(buf, sizeof buf, fmt, ap);
    size_t n = strlen(buf);
    while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == '\r'))
        buf[--n] = '\0';
    gp_log("gpserve: libmicrohttpd: %s", buf);
}

/* ---- start / stop ---- */
gp_server *gp_server_start(const gp_server_config *cfg, gp_api *api, const char *api_key,
                           char *msg, size_t msg_size)
{
    gp_server *srv = calloc(1, sizeof *srv);
    if (srv == NULL) {
        snprintf(msg, msg_size, "out of memory");
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
    srv->metrics = gp_metrics_new();
    srv->jobs = srv->metrics ? gp_jobs_new(api, (size_t)cfg->queue_size,
                                           (size_t)cfg->fit_workers, srv->metrics, NULL)
                             : NULL;
    if (srv->jobs == NULL) {
        snprintf(msg, msg_size, "out of memory");
        gp_metrics_free(srv->metrics);
        free(srv);
        return NULL;
    }

    struct sockaddr_in a4;
    struct sockaddr_in6 a6;
    const struct sockaddr *addr;
    unsigned ipv6 = 0;
    memset(&a4, 0, sizeof a4);
    memset(&a6, 0, sizeof a6);
    if (inet_pton(AF_INET, cfg->bind, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)cfg->port);
        addr = (const struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, cfg->bind, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)cfg->port);
        addr = (const struct sockaddr *)&a6;
        ipv6 = MHD_USE_IPv6;
    } else {
        snprintf(msg, msg_size, "--bind '%s' is not an IPv4 or IPv6 address", cfg->bind);
        gp_jobs_free(srv->jobs);
        gp_metrics_free(srv->metrics);
        free(srv);
        return NULL;
    }

    long threads = cfg->threads;
    if (threads <= 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        threads = cpus > 0 ? cpus : 1;
    }
    unsigned base = MHD_USE_INTERNAL_POLLING_THREAD | MHD_ALLOW_SUSPEND_RESUME |
                    MHD_USE_ERROR_LOG | ipv6;
    unsigned pollers[2] = {MHD_USE_EPOLL, MHD_USE_POLL};
    int first = MHD_is_feature_supported(MHD_FEATURE_EPOLL) == MHD_YES ? 0 : 1;
    for (int i = first; i < 2 && srv->daemon == NULL; i++) {
        errno = 0;
        srv->daemon = MHD_start_daemon(
            base | pollers[i], 0, NULL, NULL, on_request, srv, MHD_OPTION_EXTERNAL_LOGGER,
            on_mhd_log, srv, MHD_OPTION_SOCK_ADDR, addr,
            MHD_OPTION_THREAD_POOL_SIZE, (unsigned)threads, MHD_OPTION_CONNECTION_LIMIT,
            (unsigned)cfg->max_connections, MHD_OPTION_PER_IP_CONNECTION_LIMIT,
            (unsigned)cfg->max_connections_per_ip, MHD_OPTION_CONNECTION_TIMEOUT,
            (unsigned)cfg->timeout, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)64 * 1024,
            MHD_OPTION_URI_LOG_CALLBACK, on_uri, srv, MHD_OPTION_NOTIFY_COMPLETED,
            on_completed, srv, MHD_OPTION_END);
        if (srv->daemon == NULL && i == 0) {
            if (errno == EADDRINUSE || errno == EADDRNOTAVAIL || errno == EACCES)
                break;
            gp_log("gpserve: starting with epoll failed; trying poll");
        }
    }
    if (srv->daemon == NULL) {
        snprintf(msg, msg_size, "cannot listen on %s:%ld: %s", cfg->bind, cfg->port,
                 errno ? strerror(errno) : "libmicrohttpd could not start");
        gp_jobs_free(srv->jobs);
        gp_metrics_free(srv->metrics);
        free(srv);
        return NULL;
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(srv->daemon, MHD_DAEMON_INFO_BIND_PORT);
    srv->port = info && info->port ? info->port : (unsigned)cfg->port;
    if (gp_jobs_start(srv->jobs) != 0) {
        snprintf(msg, msg_size, "cannot start the fit workers");
        MHD_stop_daemon(srv->daemon);
        gp_jobs_free(srv->jobs);
        gp_metrics_free(srv->metrics);
        free(srv);
        return NULL;
    }
    return srv;
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
    srv->listen_fd = MHD_quiesce_daemon(srv->daemon);
    size_t queued = 0, running = 0;
    gp_jobs_counts(srv->jobs, &queued, &running);
    gp_log("gpserve: stopped accepting connections; cancelling %zu queued and %zu running fits",
           queued, running);
    gp_jobs_shutdown(srv->jobs);
    /* Every suspended request is resumed now; give them a moment to be answered. */
    for (int i = 0; i < 500 && atomic_load(&srv->sync_pending) > 0; i++) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    MHD_stop_daemon(srv->daemon);
    if (srv->listen_fd != MHD_INVALID_SOCKET)
        close(srv->listen_fd);
    gp_jobs_free(srv->jobs);
    gp_metrics_free(srv->metrics);
    free(srv);
}
