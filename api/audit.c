/* The audit trail (docs/design/api.md, "The audit trail"): who wrote what.
 * A write's row goes to the store with the write, in its transaction
 * (gp_api_audit_put, used by fit, jobs, observe, aliases, models and
 * transfer); a refused write's row alone (gp_api_audit_answer, called by the
 * server for the answer it sends); GET /v1/audit reads them a page at a time. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/internal.h"

#define AUDIT_LIMIT_DEFAULT 100
#define AUDIT_LIMIT_MAX 1000

static void copy_text(char *dst, size_t size, const char *src)
{
    snprintf(dst, size, "%s", src ? src : "");
}

void gp_api_origin_of(const gp_request *req, gp_api_origin *o)
{
    memset(o, 0, sizeof *o);
    if (req == NULL || req->route == NULL)
        return; /* not a request of the server: nothing to audit */
    o->present = 1;
    o->has_key = req->key_name != NULL;
    copy_text(o->key_name, sizeof o->key_name, req->key_name);
    copy_text(o->route, sizeof o->route, req->route);
    copy_text(o->request_id, sizeof o->request_id, req->request_id);
}

const gp_audit_put *gp_api_audit_put(const gp_api_origin *o, gp_audit_put *buf,
                                     const char *model, int version, int status)
{
    if (o == NULL || !o->present)
        return NULL;
    memset(buf, 0, sizeof *buf);
    buf->key_name = o->has_key ? o->key_name : NULL;
    buf->route = o->route;
    buf->model = model;
    buf->version = version;
    buf->status = status;
    buf->request_id = o->request_id[0] ? o->request_id : NULL;
    return buf;
}

/* The catalogue's code of an error answer's body, into code ("" when none). */
static void answer_code(const gp_response *res, char *code, size_t size)
{
    code[0] = '\0';
    if (res->body == NULL || res->body_len == 0)
        return;
    json_t *v = json_loadb(res->body, res->body_len, 0, NULL);
    json_t *c = json_object_get(json_object_get(v, "error"), "code");
    if (json_is_string(c))
        copy_text(code, size, json_string_value(c));
    json_decref(v);
}

void gp_api_audit_answer(gp_api *api, const gp_request *req, const char *model, int version,
                         const gp_response *res)
{
    gp_api_origin o;
    gp_api_origin_of(req, &o);
    gp_audit_put a;
    if (gp_api_audit_put(&o, &a, model && model[0] ? model : NULL, version, res->status) == NULL)
        return;
    char code[GP_AUDIT_CODE_MAX + 1];
    if (res->status >= 300) {
        answer_code(res, code, sizeof code);
        a.code = code[0] ? code : NULL;
    }
    gp_error err;
    gp_error_clear(&err);
    /* A refused write wrote nothing: its row is a small write of its own,
     * and a store that cannot take it only costs the trail that row. */
    (void)gp_store_audit_add(api->store, &a, &err);
}

/* ---- GET /v1/audit ---- */

static long days_from_civil(long y, unsigned m, unsigned d)
{
    y -= m <= 2;
    const long era = (y >= 0 ? y : y - 399) / 400;
    const unsigned yoe = (unsigned)(y - era * 400);
    const unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    const unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (long)doe - 719468;
}

/* An RFC 3339 date-time (YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM)) as the
 * store's UTC text (seconds; a fraction rounds down). */
int gp_api_rfc3339_utc(const char *text, char out[GP_TIME_LEN])
{
    int y, mo, d, h, mi, s, n = 0;
    if (text == NULL ||
        sscanf(text, "%4d-%2d-%2d%*1[Tt ]%2d:%2d:%2d%n", &y, &mo, &d, &h, &mi, &s, &n) != 6 ||
        n != 19 || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || s > 60)
        return GP_EINVAL;
    const char *p = text + n;
    if (*p == '.') {
        p++;
        if (*p < '0' || *p > '9')
            return GP_EINVAL;
        while (*p >= '0' && *p <= '9')
            p++;
    }
    long offset = 0;
    if ((*p == 'Z' || *p == 'z') && p[1] == '\0') {
        offset = 0;
    } else if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':') {
        int oh, om;
        if (sscanf(p + 1, "%2d:%2d", &oh, &om) != 2 || oh > 23 || om > 59)
            return GP_EINVAL;
        offset = (*p == '+' ? 1 : -1) * (oh * 3600L + om * 60L);
    } else {
        return GP_EINVAL;
    }
    const long long t = (long long)days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400LL +
                        h * 3600LL + mi * 60LL + s - offset;
    const time_t tt = (time_t)t;
    struct tm tm;
    if (gmtime_r(&tt, &tm) == NULL ||
        strftime(out, GP_TIME_LEN, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        return GP_EINVAL;
    return GP_OK;
}

static int query_int(const char *field, const char *text, int64_t lo, int64_t hi, int64_t *out,
                     gp_error *err)
{
    char *end = NULL;
    long long v = text[0] >= '0' && text[0] <= '9' ? strtoll(text, &end, 10) : -1;
    if (end == NULL || *end != '\0' || v < lo || v > hi)
        return gp_error_set(err, GP_EINVAL, field, "%s must be an integer in %lld..%lld", field,
                            (long long)lo, (long long)hi);
    *out = v;
    return GP_OK;
}

static int parse_audit_query(const gp_request *req, gp_audit_query *q, char since[GP_TIME_LEN],
                             gp_error *err)
{
    memset(q, 0, sizeof *q);
    q->limit = AUDIT_LIMIT_DEFAULT;
    int rc = GP_OK, cursors = 0;
    for (size_t i = 0; rc == GP_OK && i < req->n_query; i++) {
        const char *k = req->query[i].key, *v = req->query[i].value;
        int64_t n = 0;
        if (strcmp(k, "limit") == 0) {
            rc = query_int("limit", v, 1, AUDIT_LIMIT_MAX, &n, err);
            q->limit = (size_t)n;
        } else if (strcmp(k, "before") == 0 || strcmp(k, "after") == 0) {
            if (cursors++)
                rc = gp_error_set(err, GP_EINVAL, k, "give one of before and after");
            else
                rc = query_int(k, v, k[0] == 'b' ? 1 : 0, INT64_MAX - 1, &q->cursor, err);
            q->ascending = k[0] == 'a'; /* after=0: from the oldest */
        } else if (strcmp(k, "model") == 0) {
            q->model = v;
        } else if (strcmp(k, "key") == 0) {
            q->key_name = v;
        } else if (strcmp(k, "since") == 0) {
            if (gp_api_rfc3339_utc(v, since) != GP_OK)
                rc = gp_error_set(err, GP_EINVAL, "since", "since must be an RFC 3339 date-time "
                                  "(2026-11-29T14:00:00Z)");
            q->since = since;
        } else {
            rc = gp_error_set(err, GP_EINVAL, k, "unknown query parameter (limit, before, after, "
                              "model, key, since)");
        }
    }
    return rc;
}

static json_t *text_or_null(const char *s)
{
    return s[0] ? json_string(s) : json_null();
}

static json_t *audit_row_json(const gp_audit_row *r)
{
    json_t *o = json_object();
    if (o == NULL)
        return NULL;
    json_object_set_new(o, "id", json_integer(r->id));
    json_object_set_new(o, "at", json_string(r->at));
    json_object_set_new(o, "key", r->has_key ? json_string(r->key_name) : json_null());
    json_object_set_new(o, "route", json_string(r->route));
    json_object_set_new(o, "model", text_or_null(r->model));
    json_object_set_new(o, "version", r->version ? json_integer(r->version) : json_null());
    json_object_set_new(o, "status", json_integer(r->status));
    json_object_set_new(o, "code", text_or_null(r->code));
    json_object_set_new(o, "request_id", text_or_null(r->request_id));
    json_object_set_new(o, "job_id", text_or_null(r->job_id));
    return o;
}

void gp_api_audit(gp_api *api, const gp_request *req, gp_response *out)
{
    gp_error err;
    gp_error_clear(&err);
    gp_audit_query q;
    char since[GP_TIME_LEN];
    gp_audit_row *rows = NULL;
    size_t n = 0;
    int more = 0;
    int rc = parse_audit_query(req, &q, since, &err);
    if (rc == GP_OK)
        rc = gp_store_audit_list(api->store, &q, &rows, &n, &more, &err);
    if (rc) {
        gp_api_error(&err, out);
        return;
    }
    json_t *o = json_object(), *list = json_array();
    for (size_t i = 0; o && list && i < n; i++)
        json_array_append_new(list, audit_row_json(&rows[i]));
    /* the cursor of the next page: the last id, with the direction asked */
    json_t *next = more && n > 0 ? json_integer(rows[n - 1].id) : json_null();
    free(rows);
    if (o == NULL || list == NULL || json_array_size(list) != n) {
        json_decref(o);
        json_decref(list);
        json_decref(next);
        gp_api_fail(out, GP_ENOMEM, NULL, "out of memory");
        return;
    }
    json_object_set_new(o, "entries", list);
    json_object_set_new(o, "next", next);
    gp_json_respond(o, 200, out);
}

int gp_api_retention_cutoff(double age_seconds, const char *what, char before[GP_TIME_LEN],
                            gp_error *err)
{
    if (!(age_seconds > 0) || age_seconds > 1e11)
        return gp_error_set(err, GP_EINVAL, NULL, "%s retention out of range", what);
    time_t cut = time(NULL) - (time_t)age_seconds;
    struct tm tm;
    if (gmtime_r(&cut, &tm) == NULL ||
        strftime(before, GP_TIME_LEN, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0)
        return gp_error_set(err, GP_EINTERNAL, NULL, "cannot format the retention cut-off");
    return GP_OK;
}

int gp_api_audit_prune(gp_api *api, double age_seconds, size_t *deleted, gp_error *err)
{
    *deleted = 0;
    char before[GP_TIME_LEN];
    int rc = gp_api_retention_cutoff(age_seconds, "audit", before, err);
    return rc ? rc : gp_store_audit_prune(api->store, before, deleted, err);
}
