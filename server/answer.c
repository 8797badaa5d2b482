/* The answers of the HTTP transport (server/http.c): a response queued on
 * its connection, an error in the shape of its route (server/routes.def),
 * with the challenge of a 401 and the Allow header of a 405 from the same
 * table. */
#include "server/http_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "server/util.h"

#define GP_AUDIT_ROUTE_TEXT 64

/* ---- responses ---- */

/* Queue res (its body is handed to libmicrohttpd). */
enum MHD_Result gp_http_send_response(conn_ctx *ctx, gp_response *res)
{
    if (gp_http_claim_answer(ctx->gc) != 0) {
        gp_response_free(res);
        ctx->state = CS_ANSWERED;
        return MHD_NO; /* the sweeper answered 408 and closed it */
    }
    struct MHD_Response *r;
    size_t len = res->body ? res->body_len : 0;
    /* the access log names the version that answered a request for the
     * latest (or an alias): read from the answer's head before it goes */
    if (ctx->srv->access_log && ctx->match.version == 0 && res->status == 200)
        ctx->answered_version = gp_api_answered_version(res->body, len);
    if (len > 0) {
        r = MHD_create_response_from_buffer(len, res->body, MHD_RESPMEM_MUST_FREE);
        if (r)
            res->body = NULL;
    } else {
        r = MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT);
    }
    if (r == NULL) {
        gp_log("gpserve: request %s: cannot create a response (out of memory)", ctx->rid);
        gp_response_free(res);
        return MHD_NO;
    }
    if (len > 0 || (res->content_type && res->status != 204))
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                                res->content_type ? res->content_type : "application/json");
    MHD_add_response_header(r, "X-Request-Id", ctx->rid);
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
    gp_log("gpserve: request %s: %s %s: error %d: %s", ctx->rid, ctx->method, ctx->path,
           res->status, msg);
}

int gp_http_is_write(gp_route_id r, int verb)
{
    switch (r) {
    case GP_ROUTE_MODELS:
    case GP_ROUTE_MODEL_IMPORT:
    case GP_ROUTE_OBSERVE:
    case GP_ROUTE_STUDIES:
    case GP_ROUTE_STUDY_SUGGEST:
    case GP_ROUTE_STUDY_TRIALS:
    case GP_ROUTE_STUDY_TRIAL:
        return verb == GP_VERB_POST;
    case GP_ROUTE_STUDY:
        return verb == GP_VERB_DELETE;
    case GP_ROUTE_MODEL:
    case GP_ROUTE_MODEL_VERSION:
    case GP_ROUTE_JOB:
        return verb == GP_VERB_DELETE;
    case GP_ROUTE_ALIAS:
    case GP_ROUTE_DATASET:
        return verb == GP_VERB_PUT || verb == GP_VERB_DELETE;
    default:
        return 0;
    }
}

void gp_http_route_text(const conn_ctx *ctx, char *out, size_t size)
{
    snprintf(out, size, "%s %s", ctx->method, gp_route_pattern(ctx->match.route));
}

/* The audit row of a write's answer that the api did not record with the
 * write: a refusal (nothing written, docs/design/api.md "The audit trail"),
 * and a job's DELETE (its effect, the job's end, is recorded when it lands). */
static void audit_answer(conn_ctx *ctx, const gp_response *res)
{
    if (!ctx->audit_write)
        return;
    if (res->status < 300 && ctx->match.route != GP_ROUTE_JOB)
        return;
    ctx->audit_write = 0;
    char route[GP_AUDIT_ROUTE_TEXT];
    gp_http_route_text(ctx, route, sizeof route);
    gp_request req;
    memset(&req, 0, sizeof req);
    req.route = route;
    req.request_id = ctx->rid;
    req.key_name = ctx->key.name[0] ? ctx->key.name : NULL;
    const int named = ctx->match.param_error == GP_PARAM_OK;
    gp_api_audit_answer(ctx->srv->api, &req, named ? ctx->match.name : NULL,
                        named ? ctx->match.version : 0, res);
}

enum MHD_Result gp_http_answer(conn_ctx *ctx, gp_response *res)
{
    log_server_error(ctx, res);
    audit_answer(ctx, res);
    gp_api_error_request_id(res, ctx->rid);
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
    return gp_http_send_response(ctx, res);
}

enum MHD_Result gp_http_fail(conn_ctx *ctx, int code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* The challenge of a 401 (the auth column of server/routes.def). The browser
 * view's routes ask for Basic, so that a browser prompts for the key (as the
 * password) and then sends it with the page's own requests too; the API's
 * routes ask for the Bearer token its clients send (either is accepted on
 * every route: authorized()). */
static const char *auth_challenge(gp_route_id r)
{
    if (gp_route_auth(r) == GP_AUTH_BASIC)
        return "Basic realm=\"gpserve\", charset=\"UTF-8\"";
    return "Bearer realm=\"gpserve\"";
}

/* The error answer of fail and refuse_framing; close: the connection too. */
enum MHD_Result gp_http_fail_va(conn_ctx *ctx, int code, const char *field, int close,
                               const char *fmt, va_list ap) __attribute__((format(printf, 5, 0)));
enum MHD_Result gp_http_fail_va(conn_ctx *ctx, int code, const char *field, int close,
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
    return gp_http_answer(ctx, &res);
}

enum MHD_Result gp_http_fail(conn_ctx *ctx, int code, const char *field, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    enum MHD_Result r = gp_http_fail_va(ctx, code, field, 0, fmt, ap);
    va_end(ap);
    return r;
}

