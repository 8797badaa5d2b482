/* One request of the HTTP transport (server/http.c), from its first byte to
 * its answer: the per-request state machine described there, the checks made
 * before the body is read (route, auth, verb, parameters, media type, length,
 * framing), the body, the answer and its log line and metrics. */
#include "server/http_internal.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "server/mhd_shim.h"
#include "server/util.h"

/* A body past the cap is read and dropped so that the 413 can be answered;
 * a client that keeps sending this much more is cut off instead. */
#define DISCARD_LIMIT ((size_t)1 << 30)

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
    gp_request_id_choose(NULL, ctx->rid); /* the request's own, once its headers are read */
    const char *u = uri ? uri : "";
    size_t plen = strcspn(u, "?");
    copy_for_log(ctx->path, sizeof ctx->path, u, plen);
    gp_route_match_path(u, &ctx->match);
    return ctx;
}

/* The request line has arrived: the request's context, known to its connection. */
static void attach(conn_ctx *ctx, struct MHD_Connection *conn)
{
    gp_conn *gc = gp_http_conn_of(conn);
    ctx->gc = gc;
    if (gc == NULL)
        return;
    gc->req = ctx;
    pthread_mutex_lock(&gc->srv->conns_lock);
    gc->request_id = ctx->id;
    gc->v2 = ctx->match.v2;
    pthread_mutex_unlock(&gc->srv->conns_lock);
}

void *gp_http_on_uri(void *cls, const char *uri, struct MHD_Connection *conn)
{
    conn_ctx *ctx = ctx_new(cls, uri);
    if (ctx)
        attach(ctx, conn);
    return ctx;
}


/* The access log's line of an answered request (--access-log). */
static void access_log(gp_server *srv, struct MHD_Connection *conn, const conn_ctx *ctx,
                       uint64_t us)
{
    if (srv->access_log == NULL)
        return;
    char client[INET6_ADDRSTRLEN] = "";
    const union MHD_ConnectionInfo *ci =
        conn ? MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS) : NULL;
    if (ci && ci->client_addr) {
        const struct sockaddr *sa = ci->client_addr;
        const void *a = sa->sa_family == AF_INET6
                            ? (const void *)&((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr
                            : (const void *)&((const struct sockaddr_in *)(const void *)sa)->sin_addr;
        if (inet_ntop(sa->sa_family, a, client, sizeof client) == NULL)
            client[0] = '\0';
    }
    int named = ctx->match.route != GP_ROUTE_NONE && ctx->match.param_error == GP_PARAM_OK;
    gp_access_entry e = {
        .request_id = ctx->rid,
        .client = client[0] ? client : NULL,
        .key_name = ctx->key.name[0] ? ctx->key.name : NULL,
        .method = ctx->method[0] ? ctx->method : NULL,
        .route = gp_route_name(ctx->match.route),
        .model = named && ctx->match.name[0] ? ctx->match.name : NULL,
        .version = named ? (ctx->match.version ? ctx->match.version : ctx->answered_version) : 0,
        .status = ctx->status,
        .bytes = ctx->resp_bytes,
        .duration_us = us,
    };
    gp_access_log_write(srv->access_log, &e);
}

void gp_http_on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    gp_server *srv = cls;
    conn_ctx *ctx = *con_cls;
    if (ctx == NULL)
        return;
    *con_cls = NULL;
    uint64_t us = gp_monotonic_us() - ctx->t0_us;
    /* A refused connection is "expired" too, but its answer was the 429. */
    int refused = ctx->gc && ctx->gc->refused;
    if (ctx->gc && gp_http_request_finished(ctx->gc) && ctx->status == 0 && !refused) {
        ctx->status = 408; /* the sweeper's answer */
        ctx->resp_bytes = srv->timeout_body_len;
    }
    if (ctx->status) {
        gp_metrics_request(srv->metrics, ctx->match.route, ctx->method, ctx->status,
                           (double)us * 1e-6);
        gp_log("%s %s %d %zu %lluus req=%s", ctx->method[0] ? ctx->method : "-", ctx->path,
               ctx->status, ctx->resp_bytes, (unsigned long long)us, ctx->rid);
        access_log(srv, conn, ctx, us);
    } else {
        const char *why = toe == MHD_REQUEST_TERMINATED_TIMEOUT_REACHED ? "timed out"
                          : toe == MHD_REQUEST_TERMINATED_CLIENT_ABORT ? "client went away"
                          : toe == MHD_REQUEST_TERMINATED_DAEMON_SHUTDOWN ? "daemon shutdown"
                                                                           : "closed";
        /* No method: libmicrohttpd refused the request itself (e.g. 431). */
        gp_log("%s %s - 0 %lluus req=%s (%s before an answer)",
               ctx->method[0] ? ctx->method : "-", ctx->path, (unsigned long long)us, ctx->rid,
               why);
    }
    if (ctx->fit_pending) {
        ctx->fit_pending = 0;
        atomic_fetch_sub(&srv->sync_pending, 1);
    }
    if (ctx->upload) {
        /* The body never ended (a dropped connection, a timeout, a
         * shutdown): what the upload stored goes, nothing of it is seen. */
        gp_log("gpserve: request %s: the upload of data set '%s' ended before its body: "
               "deleted", ctx->rid, ctx->match.name);
        gp_api_dataset_upload_abort(ctx->upload);
        ctx->upload = NULL;
    }
    gp_http_arrived(ctx);
    if (ctx->refused)
        gp_response_free(ctx->refused);
    free(ctx->refused);
    gp_response_free(&ctx->fit_res);
    gp_response_free(&ctx->deferred);
    free(ctx->body);
    free(ctx);
}


/* ---- checks made before the body is read ---- */
/* Whether the request carries a key of the keyring; its facts into ctx->key. */
static int authorized(conn_ctx *ctx)
{
    const char *h = MHD_lookup_connection_value(ctx->conn, MHD_HEADER_KIND,
                                                MHD_HTTP_HEADER_AUTHORIZATION);
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
    /* Look up even without a token, so that timing says nothing. */
    int found = gp_keyring_check(ctx->srv->keys, tok, toklen, &ctx->key);
    free(basic);
    if (!(have && found))
        memset(&ctx->key, 0, sizeof ctx->key);
    return have && found;
}

/* The key's scope and model names against the route (docs/design/api.md,
 * "Authentication and scopes"): 0, or the 403 answered. */
static enum MHD_Result forbidden(conn_ctx *ctx, int *refused)
{
    const gp_key *k = &ctx->key;
    gp_route_id r = ctx->match.route;
    int need = gp_route_scope(r, ctx->verb);
    *refused = 1;
    if (!gp_key_allows_scope(k, need))
        return gp_http_fail(ctx, GP_EFORBIDDEN, "scope",
                            "%s %s needs the %s scope; key '%s' has %s", ctx->method,
                            gp_route_pattern(r), gp_scope_name(need), k->name,
                            gp_scope_name(k->scope));
    if (ctx->match.name[0] && !gp_key_allows_model(k, ctx->match.name))
        return gp_http_fail(ctx, GP_EFORBIDDEN, "name",
                            "key '%s' may not name model '%s' (its models= patterns)", k->name,
                            ctx->match.name);
    if (r == GP_ROUTE_MODEL_IMPORT && k->n_models > 0)
        /* the name is inside the file, read after these checks: a limited
         * key is refused rather than trusted with any name */
        return gp_http_fail(ctx, GP_EFORBIDDEN, "name",
                            "key '%s' is limited to some model names and cannot import (the "
                            "model file names the model)",
                            k->name);
    *refused = 0;
    return MHD_YES;
}

/* ---- rate limits (server/ratelimit.h; docs/design/api.md, "Rate limits") ---- */

/* Whether r is limited: the /v1 and /v2 routes but the open ones (health,
 * readiness), which a load balancer polls and which must say the truth. */
static int rate_limited_route(gp_route_id r)
{
    const char *p = gp_route_pattern(r);
    return gp_route_needs_auth(r) && p[0] == '/' && p[1] == 'v' && (p[2] == '1' || p[2] == '2');
}

/* v in decimal at o; past its last digit returned. */
static char *put_octet(char *o, unsigned v)
{
    if (v >= 100)
        *o++ = (char)('0' + v / 100);
    if (v >= 10)
        *o++ = (char)('0' + v / 10 % 10);
    *o++ = (char)('0' + v % 10);
    return o;
}

/* The principal of an unauthenticated request: its client address as the
 * connection slots count it (an IPv4 address; an IPv6 one by its /64, as
 * one subscriber holds all of them). */
static void address_principal(const gp_conn *gc, char *out, size_t size)
{
    snprintf(out, size, "-");
    if (gc == NULL)
        return;
    const unsigned char *b = gc->key.b;
    if (b[0] == 4) { /* by hand: snprintf cost ~1,500 instructions a request */
        char *o = out;
        for (int i = 12; i < 16; i++) {
            o = put_octet(o, b[i]);
            *o++ = i < 15 ? '.' : '\0';
        }
    } else if (b[15] == 6) {
        struct in6_addr a;
        memset(&a, 0, sizeof a);
        memcpy(a.s6_addr, b, 8);
        char t[INET6_ADDRSTRLEN];
        if (inet_ntop(AF_INET6, &a, t, sizeof t))
            snprintf(out, size, "%s/64", t);
    }
}

/* The 429 of an empty bucket, Retry-After the seconds until its next token. */
static enum MHD_Result refuse_rate(conn_ctx *ctx, const char *who, int kind, long rate,
                                   long retry_after)
{
    gp_metrics_rate_limited(ctx->srv->metrics, ctx->key.name, kind);
    gp_response res;
    memset(&res, 0, sizeof res);
    gp_api_fail(&res, GP_EOVERLOADED, gp_rate_kind_name(kind),
                "rate limit: %s %s at most %ld %s; retry in %ld s",
                ctx->key.name[0] ? "key" : "client", who, rate,
                kind == GP_RATE_RPS ? "requests a second" : "fits a minute", retry_after);
    char v[24];
    snprintf(v, sizeof v, "%ld", retry_after);
    for (size_t i = 0; i < res.n_headers; i++) /* the catalogue's fixed figure, replaced */
        if (strcmp(res.headers[i].name, "Retry-After") == 0)
            snprintf(res.headers[i].value, sizeof res.headers[i].value, "%s", v);
    return gp_http_answer(ctx, &res);
}

_Static_assert(GP_RATE_PRINCIPAL_MAX >= GP_KEY_NAME_MAX, "a key name fits a principal");

/* A token of each budget the request spends: 0, or the 429 answered. A key's
 * own rps=/fits_per_minute= wins over the flags' default. */
static enum MHD_Result check_rate(conn_ctx *ctx, int *refused)
{
    gp_server *srv = ctx->srv;
    const gp_key *k = &ctx->key;
    char who[GP_RATE_PRINCIPAL_MAX];
    if (k->name[0])
        memcpy(who, k->name, sizeof k->name); /* NUL-terminated, GP_KEY_NAME_MAX <= the size */
    else
        address_principal(ctx->gc, who, sizeof who);
    long limit[GP_RATE_KINDS] = {
        k->rps > 0 ? k->rps : srv->cfg.rate_limit_rps,
        k->fits_per_minute > 0 ? k->fits_per_minute : srv->cfg.rate_limit_fits_per_minute,
    };
    int fit = ctx->match.route == GP_ROUTE_MODELS && ctx->verb == GP_VERB_POST;
    uint64_t now = limit[0] > 0 || (fit && limit[1] > 0) ? gp_monotonic_us() : 0;
    *refused = 1;
    long retry = 0;
    for (int kind = 0; kind < (fit ? 2 : 1); kind++)
        if (!gp_ratelimit_take(srv->rate, who, kind, limit[kind], now, &retry))
            return refuse_rate(ctx, who, kind, limit[kind], retry);
    *refused = 0;
    return MHD_YES;
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
    enum MHD_Result r = gp_http_fail_va(ctx, GP_EHTTP, field, 1, fmt, ap);
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
    const char *rid = MHD_lookup_connection_value(conn, MHD_HEADER_KIND, "X-Request-Id");
    if (rid)
        gp_request_id_choose(rid, ctx->rid);
    ctx->verb = gp_verb_of(method);
    ctx->state = CS_BODY;
    gp_route_id r = ctx->match.route;
    /* Batched only when the model's method shares work across a batch
     * (gp_api_batch_pays); decided once, here, for the whole request. */
    ctx->batched = ctx->srv->batcher && gp_route_batched(r) &&
                   ctx->match.param_error == GP_PARAM_OK &&
                   gp_api_batch_pays(ctx->srv->api, ctx->match.name, ctx->match.version);
    if (ctx->batched) {
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
    return gp_http_answer(ctx, &res);
}

/* ---- uploads (PUT /v1/datasets/{name}) ----
 *
 * The body of an upload is not gathered: each piece libmicrohttpd hands over
 * goes to the api's upload (gp_api_dataset_upload_feed), which parses it and
 * writes a part to the store every GP_STORE_DATASET_PART_ROWS rows, so an
 * upload of any size holds one part's rows in memory. It is bounded by the
 * data sets' quota (--dataset-quota-mb, 507), not by --max-body-mb; and in
 * time not by --request-timeout alone: its deadline grows by one
 * --request-timeout per UPLOAD_BYTES_PER_DEADLINE received (server/conn.c),
 * so an upload must keep up an average rate, and --timeout closes one that
 * stalls. A refusal (a row, a cell, the quota) deletes what was stored at
 * once; the rest of the body is read and dropped and the refusal answered at
 * its end, as a 413 is. A connection that drops before the end aborts the
 * upload in gp_http_on_completed. */
static enum MHD_Result begin_upload(conn_ctx *ctx)
{
    gp_request req;
    memset(&req, 0, sizeof req);
    req.content_type = MHD_lookup_connection_value(ctx->conn, MHD_HEADER_KIND,
                                                   MHD_HTTP_HEADER_CONTENT_TYPE);
    req.key_name = ctx->key.name[0] ? ctx->key.name : NULL;
    req.request_id = ctx->rid;
    char route[64];
    gp_http_route_text(ctx, route, sizeof route);
    req.route = route;
    gp_response res;
    memset(&res, 0, sizeof res);
    if (gp_api_dataset_upload_begin(ctx->srv->api, ctx->match.name, &req, &ctx->upload, &res))
        return gp_http_answer(ctx, &res);
    ctx->state = CS_UPLOAD;
    return MHD_YES;
}

/* A piece of an upload's body. */
static enum MHD_Result upload_piece(conn_ctx *ctx, const char *data, size_t n)
{
    if (ctx->gc)
        atomic_fetch_add_explicit(&ctx->gc->upload_bytes, n, memory_order_relaxed);
    if (ctx->state == CS_UPLOAD_REFUSED) {
        ctx->discarded += n;
        return ctx->discarded > DISCARD_LIMIT ? MHD_NO : MHD_YES;
    }
    if (ctx->refused == NULL && (ctx->refused = calloc(1, sizeof *ctx->refused)) == NULL)
        return MHD_NO; /* out of memory: drop the connection, the upload is aborted */
    if (gp_api_dataset_upload_feed(ctx->upload, data, n, ctx->refused) != 0) {
        gp_api_dataset_upload_abort(ctx->upload);
        ctx->upload = NULL;
        ctx->state = CS_UPLOAD_REFUSED;
    }
    return MHD_YES;
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
        return gp_http_fail(ctx, GP_ENOTFOUND, NULL, "no route %s", ctx->path);
    if (srv->keys && gp_route_needs_auth(r) && !authorized(ctx))
        return gp_http_fail(ctx, GP_EUNAUTHORIZED, NULL,
                    "missing or wrong API key (send 'Authorization: Bearer KEY', or the key "
                    "as the password of Basic credentials)");
    /* Before audit_write is set: a 429 is not written to the audit trail,
     * or a flood of refused writes would become a flood of store writes. */
    if (srv->rate && rate_limited_route(r)) {
        int refused = 0;
        enum MHD_Result ret = check_rate(ctx, &refused);
        if (refused)
            return ret;
    }
    ctx->audit_write = gp_http_is_write(r, ctx->verb);
    if ((gp_route_verbs(r) & ctx->verb) == 0)
        return gp_http_fail(ctx, GP_EMETHOD, NULL, "%s is not allowed on %s (allowed: %s)", ctx->method,
                    gp_route_pattern(r), gp_route_allow(r));
    switch (ctx->match.param_error) {
    case GP_PARAM_OK:
        break;
    case GP_PARAM_BAD_NAME:
        return gp_http_fail(ctx, GP_EINVAL, "name",
                    "a model name must match [A-Za-z0-9._-]{1,64}");
    case GP_PARAM_BAD_VERSION:
        return gp_http_fail(ctx, GP_EINVAL, "version",
                    "a version must be an integer >= 1 or an alias ([A-Za-z][A-Za-z0-9_.-]{0,63})");
    case GP_PARAM_BAD_ALIAS:
        return gp_http_fail(ctx, GP_EINVAL, "alias",
                    "an alias must match [A-Za-z][A-Za-z0-9_.-]{0,63} (a letter first: never "
                    "a number)");
    case GP_PARAM_BAD_ID:
        return gp_http_fail(ctx, GP_EINVAL, "id", "a job id must match [A-Za-z0-9._-]{1,39}");
    case GP_PARAM_BAD_TRIAL:
        return gp_http_fail(ctx, GP_EINVAL, "trial", "a trial id must be an integer >= 1");
    }
    if (ctx->key.name[0]) {
        int refused = 0;
        enum MHD_Result ret = forbidden(ctx, &refused);
        if (refused)
            return ret;
    }
    if (ctx->match.version_alias[0] != '\0' && r == GP_ROUTE_MODEL_VERSION &&
        ctx->verb == GP_VERB_DELETE)
        /* an alias moves: deleting through one could delete another version
         * than the one its sender saw, so a delete names the number */
        return gp_http_fail(ctx, GP_EINVAL, "version",
                    "delete a version by its number, not through an alias ('%s')",
                    ctx->match.version_alias);
    if (ctx->match.version_alias[0] != '\0') {
        /* {v} named by an alias: resolved here, once, for every route */
        gp_error err;
        gp_error_clear(&err);
        if (gp_api_resolve_alias(srv->api, ctx->match.name, ctx->match.version_alias,
                                 &ctx->match.version, &err))
            return gp_http_fail(ctx, err.code, err.field, "%s", err.message);
    }
    ctx->body_types = gp_route_body_types(r, ctx->verb);
    if (ctx->body_types == GP_BODY_DATASET)
        return begin_upload(ctx); /* its own media types, no --max-body-mb */
    if (ctx->body_types) {
        const char *ct =
            MHD_lookup_connection_value(conn, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
        int model = ctx->body_types == GP_BODY_MODEL;
        int ok = model ? gp_media_type_is(ct, "application/vnd.gpserve.model") ||
                             gp_media_type_is(ct, "application/octet-stream")
                       : gp_media_type_is(ct, "application/json") ||
                             ((ctx->body_types & 2) && gp_media_type_is(ct, "text/csv"));
        if (!ok)
            return gp_http_fail(ctx, GP_EMEDIATYPE, NULL, "Content-Type must be %s (got %s)",
                        model                    ? "application/vnd.gpserve.model or "
                                                   "application/octet-stream"
                        : (ctx->body_types & 2) ? "application/json or text/csv"
                                                : "application/json",
                        ct ? ct : "none");
    }
    if (cl) {
        char *end = NULL;
        unsigned long long n = strtoull(cl, &end, 10);
        if (end != cl && n > srv->max_body)
            return gp_http_fail(ctx, GP_ETOOBIG, NULL,
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

enum MHD_Result gp_http_on_request(void *cls, struct MHD_Connection *conn, const char *url,
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
        return gp_http_answer(ctx, &res);
    }
    case CS_DEFERRED:
        if (*upload_data_size > 0) {
            *upload_data_size = 0;
            return MHD_YES;
        }
        return gp_http_send_response(ctx, &ctx->deferred);
    case CS_ANSWERED:
        /* Upload data after an early answer: drop it. */
        *upload_data_size = 0;
        return MHD_YES;
    case CS_UPLOAD:
    case CS_UPLOAD_REFUSED:
        if (*upload_data_size > 0) {
            size_t n = *upload_data_size;
            *upload_data_size = 0;
            return upload_piece(ctx, upload_data, n);
        }
        if (gp_http_claim_answer(ctx->gc) != 0)
            return MHD_NO;
        if (ctx->state == CS_UPLOAD_REFUSED) {
            gp_response res = *ctx->refused;
            memset(ctx->refused, 0, sizeof *ctx->refused);
            return gp_http_answer(ctx, &res);
        }
        return gp_http_dispatch(ctx); /* route_dataset finishes the upload */
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
    if (gp_http_claim_answer(ctx->gc) != 0)
        return MHD_NO;
    if (ctx->state == CS_DISCARD)
        return gp_http_fail(ctx, GP_ETOOBIG, NULL,
                    "the request body is larger than %ld MiB (--max-body-mb)",
                    srv->cfg.max_body_mb);
    return gp_http_dispatch(ctx);
}

