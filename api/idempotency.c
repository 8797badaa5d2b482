/* Idempotent writes (docs/design/api.md, "Idempotent writes"): a fit or an
 * observe sent with an Idempotency-Key records its answer in the store in
 * the same transaction as the write; a retry with the key is answered that
 * answer again and writes nothing. The store keeps rows; what a key, a scope
 * and a fingerprint are, and what a replay looks like, is decided here. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api/internal.h"

/* The key's text without a structured-field string's quotes (RFC 8941
 * §3.3.3, the form draft-ietf-httpapi-idempotency-key-header writes):
 * "abc" and abc are the same key. */
static int unquote(const char *v, const char **start, size_t *len)
{
    size_t n = strlen(v);
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') {
        *start = v + 1;
        *len = n - 2;
        return 1;
    }
    *start = v;
    *len = n;
    return 0;
}

static int bad_key(gp_error *err, const char *why)
{
    return gp_error_set(err, GP_EINVAL, GP_IDEM_HEADER,
                        GP_IDEM_HEADER " must be 1..%d visible ASCII characters (e.g. a UUID): %s",
                        GP_IDEM_KEY_MAX, why);
}

static void hash_part(gp_sha256 *h, const char *s, size_t n)
{
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)((uint64_t)n >> (8 * i));
    /* The length first: parts cannot run into each other. */
    gp_sha256_update(h, len, sizeof len);
    if (n > 0)
        gp_sha256_update(h, s, n);
}

static void fingerprint(const gp_request *req, char out[65])
{
    gp_sha256 h;
    gp_sha256_init(&h);
    const char *ct = req->content_type ? req->content_type : "";
    hash_part(&h, ct, strlen(ct));
    for (size_t i = 0; i < req->n_query; i++) {
        const char *k = req->query[i].key ? req->query[i].key : "";
        const char *v = req->query[i].value ? req->query[i].value : "";
        hash_part(&h, k, strlen(k));
        hash_part(&h, v, strlen(v));
    }
    hash_part(&h, req->body ? req->body : "", req->body ? req->body_len : 0);
    gp_sha256_hex(&h, out);
}

int gp_api_idem_parse(const gp_request *req, const char *route, const char *name,
                      gp_api_idem *k, gp_error *err)
{
    memset(k, 0, sizeof *k);
    if (req->idempotency_key == NULL)
        return GP_OK;
    const char *key;
    size_t n;
    int quoted = unquote(req->idempotency_key, &key, &n);
    if (n == 0)
        return bad_key(err, "it is empty");
    if (n > GP_IDEM_KEY_MAX)
        return bad_key(err, "it is too long");
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)key[i];
        if (c <= ' ' || c > '~' || (quoted && (c == '"' || c == '\\')))
            return bad_key(err, "it holds a space, a control or a non-ASCII character");
    }
    memcpy(k->key, key, n);
    k->key[n] = '\0';
    snprintf(k->scope, sizeof k->scope, "%s:%s", route, name);
    fingerprint(req, k->fingerprint);
    k->present = 1;
    return GP_OK;
}

gp_idem_put gp_api_idem_put(const gp_api_idem *k, int status, const char *body,
                            gp_job_result_fn make_body, void *ctx)
{
    gp_idem_put p = {.scope = k->scope, .key = k->key, .fingerprint = k->fingerprint,
                     .status = status, .body = body, .make_body = make_body, .ctx = ctx};
    return p;
}

/* A replayed fit's or import's Location, as the first answer had it. */
static void fit_location(const gp_idem_row *row, gp_response *out)
{
    json_error_t je;
    json_t *o = json_loads(row->body, 0, &je);
    const char *name = json_string_value(json_object_get(o, "name"));
    const char *job = json_string_value(json_object_get(o, "job"));
    json_t *version = json_object_get(o, "version");
    char loc[160];
    if (row->status == 202 && job) {
        snprintf(loc, sizeof loc, "/v1/jobs/%s", job);
        gp_response_header(out, "Location", loc);
    } else if (row->status == 201 && name && json_is_integer(version)) {
        snprintf(loc, sizeof loc, "/v1/models/%s/versions/%lld", name,
                 (long long)json_integer_value(version));
        gp_response_header(out, "Location", loc);
    }
    json_decref(o);
}

int gp_api_idem_replay(gp_api *api, const gp_api_idem *k, gp_response *out)
{
    if (!k->present)
        return 0;
    gp_idem_row row;
    gp_error err;
    gp_error_clear(&err);
    int rc = gp_store_idem_get(api->store, k->scope, k->key, &row, &err);
    if (rc == GP_ENOTFOUND)
        return 0;
    gp_response_free(out);
    if (rc) {
        gp_api_error(&err, out);
        return 1;
    }
    if (strcmp(row.fingerprint, k->fingerprint) != 0) {
        gp_api_fail(out, GP_ECONFLICT, GP_IDEM_HEADER,
                    "this " GP_IDEM_HEADER " was used at %s for a different request to this "
                    "route and model; a new request needs a new key",
                    row.created_at);
        gp_idem_row_free(&row);
        return 1;
    }
    out->status = row.status;
    out->content_type = "application/json";
    out->body = row.body; /* the response owns it from here */
    out->body_len = strlen(row.body);
    row.body = NULL;
    gp_response_header(out, "Idempotent-Replayed", "true");
    if (strncmp(k->scope, "fit:", 4) == 0 || strncmp(k->scope, "import:", 7) == 0) {
        row.body = out->body; /* borrowed for the look-up */
        fit_location(&row, out);
    }
    return 1;
}

int gp_api_key_taken(const gp_error *err)
{
    return err->code == GP_ECONFLICT && strcmp(err->field, GP_STORE_KEY_TAKEN) == 0;
}

int gp_api_idem_prune(gp_api *api, double age_seconds, size_t *deleted, gp_error *err)
{
    *deleted = 0;
    char before[GP_TIME_LEN];
    int rc = gp_api_retention_cutoff(age_seconds, "idempotency", before, err);
    return rc ? rc : gp_store_idem_prune(api->store, before, deleted, err);
}
