/* The error catalogue: one JSON shape and one status per GP_E* code. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

int gp_api_http_status(int code)
{
    return gp_status_http(code);
}

int gp_api_code_from_name(const char *name)
{
    return gp_status_from_name(name);
}

json_t *gp_api_error_json(const gp_error *err)
{
    int code = err->code == GP_OK ? GP_EINTERNAL : err->code;
    json_t *e = json_object();
    if (e == NULL)
        return NULL;
    json_object_set_new(e, "code", json_string(gp_status_name(code)));
    /* Messages are ours, but may quote user input: keep them valid UTF-8 for jansson. */
    json_t *msg = json_string(err->message[0] ? err->message : gp_status_name(code));
    if (msg == NULL)
        msg = json_string(gp_status_name(code));
    json_object_set_new(e, "message", msg);
    if (err->field[0]) {
        json_t *f = json_string(err->field);
        if (f)
            json_object_set_new(e, "field", f);
    }
    return e;
}

void gp_api_error(const gp_error *err, gp_response *out)
{
    /* Only catalogue codes go over HTTP: a cancelled fit never reaches a
     * synchronous caller, so GP_ECANCELLED (and anything unknown) is internal. */
    int code = err->code == GP_OK || err->code == GP_ECANCELLED ? GP_EINTERNAL : err->code;
    gp_buf b;
    gp_buf_init(&b);
    gp_buf_puts(&b, "{\"error\":{\"code\":");
    gp_buf_json_string(&b, gp_status_name(code));
    gp_buf_puts(&b, ",\"message\":");
    gp_buf_json_string(&b, err->message[0] ? err->message : gp_status_name(code));
    if (err->field[0]) {
        gp_buf_puts(&b, ",\"field\":");
        gp_buf_json_string(&b, err->field);
    }
    gp_buf_puts(&b, "}}");
    int status = gp_api_http_status(code);
    free(out->body);
    out->body = NULL;
    out->body_len = 0;
    if (b.failed) {
        gp_buf_free(&b);
        static const char fallback[] =
            "{\"error\":{\"code\":\"internal\",\"message\":\"out of memory\"}}";
        out->body = malloc(sizeof fallback);
        if (out->body) {
            memcpy(out->body, fallback, sizeof fallback);
            out->body_len = sizeof fallback - 1;
        }
        status = 500;
    } else {
        out->body = b.data;
        out->body_len = b.len;
    }
    out->status = status;
    out->content_type = "application/json";
    int retry = gp_status_retry_after(code);
    if (retry > 0 && !b.failed) {
        char v[16];
        snprintf(v, sizeof v, "%d", retry);
        gp_response_header(out, "Retry-After", v);
    }
}

/* Out of memory while the answer was written: the catalogue's 500 instead. */
void gp_buf_respond(gp_buf *b, int status, gp_response *out)
{
    free(out->body);
    out->body = NULL;
    out->body_len = 0;
    if (b->failed) {
        gp_buf_free(b);
        gp_api_fail(out, GP_ENOMEM, NULL, "out of memory building the response");
        return;
    }
    out->status = status;
    out->content_type = "application/json";
    out->body = b->data;
    out->body_len = b->len;
    gp_buf_init(b);
}

void gp_api_fail(gp_response *out, int code, const char *field, const char *fmt, ...)
{
    gp_error err;
    gp_error_clear(&err);
    err.code = code;
    snprintf(err.field, sizeof err.field, "%s", field ? field : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err.message, sizeof err.message, fmt, ap);
    va_end(ap);
    gp_api_error(&err, out);
}

void gp_response_free(gp_response *res)
{
    if (res == NULL)
        return;
    free(res->body);
    res->body = NULL;
    res->body_len = 0;
    res->n_headers = 0;
}

void gp_response_header(gp_response *res, const char *name, const char *value)
{
    if (res->n_headers >= GP_RESPONSE_MAX_HEADERS)
        return;
    gp_header *h = &res->headers[res->n_headers++];
    snprintf(h->name, sizeof h->name, "%s", name);
    snprintf(h->value, sizeof h->value, "%s", value);
}

int gp_api_valid_name(const char *name)
{
    if (name == NULL)
        return 0;
    size_t n = 0;
    for (const char *p = name; *p; p++, n++) {
        char c = *p;
        int ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                 c == '.' || c == '_' || c == '-';
        if (!ok || n >= 64)
            return 0;
    }
    return n >= 1;
}

int gp_api_reserved_name(const char *name)
{
    /* a literal segment of a /v1/models/... route, matched before
     * /v1/models/{name}: a model of that name could not be read or deleted */
    return name != NULL && strcmp(name, "import") == 0;
}

int gp_api_refuse_reserved_name(const char *name, gp_error *err)
{
    if (gp_api_reserved_name(name))
        return gp_error_set(err, GP_EDATA, "name",
                            "'%s' is a route of the API (POST /v1/models/%s): choose another "
                            "model name",
                            name, name);
    return GP_OK;
}

int gp_api_check_name(const char *name, gp_error *err)
{
    if (!gp_api_valid_name(name))
        return gp_error_set(err, GP_EINVAL, "name",
                            "model names are 1 to 64 characters of A-Z a-z 0-9 . _ -");
    return GP_OK;
}


void gp_api_error_request_id(gp_response *res, const char *rid)
{
    static const char head[] = "{\"error\":{";
    size_t n = res->body ? res->body_len : 0;
    if (rid == NULL || n < sizeof head + 1 || memcmp(res->body, head, sizeof head - 1) != 0 ||
        memcmp(res->body + n - 2, "}}", 2) != 0)
        return;
    gp_buf b;
    gp_buf_init(&b);
    gp_buf_put(&b, res->body, n - 2);
    gp_buf_puts(&b, ",\"request_id\":");
    gp_buf_json_string(&b, rid);
    gp_buf_puts(&b, "}}");
    if (b.failed) {
        gp_buf_free(&b);
        return; /* the answer without its id rather than none */
    }
    free(res->body);
    res->body = b.data;
    res->body_len = b.len;
}
