/* The parts of a model route's body that predict, sample and observe share:
 * the media type, "version", X in two steps, and the answer's head. */
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

int gp_api_check_json(const gp_request *req, gp_error *err)
{
    if (gp_media_type(req->content_type) != 1)
        return gp_error_set(err, GP_EMEDIATYPE, NULL,
                            "Content-Type must be application/json, not '%.60s'",
                            req->content_type);
    return GP_OK;
}

/* Aliases are resolved here, beside the version field they stand for, so
 * that aliases.c (which takes a version field too) depends on this file and
 * not the other way round. */
int gp_api_valid_alias(const char *alias)
{
    return gp_store_alias_valid(alias);
}

int gp_api_resolve_alias(gp_api *api, const char *name, const char *alias, int *version,
                         gp_error *err)
{
    *version = 0;
    if (!gp_store_alias_valid(alias))
        return gp_error_set(err, GP_EINVAL, "version", GP_API_VERSION_RULE);
    /* the model's aliases as kept while nothing was written (api/rows.c):
     * a request named by an alias asks the store nothing more than one
     * named by a number */
    gp_alias_row *rows = NULL;
    size_t n = 0;
    int rc = gp_api_check_name(name, err);
    if (rc == GP_OK)
        rc = gp_rows_aliases(api, name, &rows, &n, err);
    for (size_t i = 0; rc == GP_OK && i < n && *version == 0; i++)
        if (strcmp(rows[i].alias, alias) == 0)
            *version = rows[i].version;
    free(rows);
    if (rc == GP_OK && *version == 0)
        /* where a version was asked for, the version is what is missing */
        rc = gp_error_set(err, GP_ENOTFOUND, "version", "model '%s' has no version or alias '%s'",
                          name, alias);
    return rc;
}

int gp_api_get_version(gp_api *api, const char *name, json_t *obj, int *version, char *alias,
                       gp_error *err)
{
    json_t *v = json_object_get(obj, "version");
    *version = 0;
    alias[0] = '\0';
    if (v == NULL)
        return GP_OK;
    if (json_is_string(v)) {
        /* resolved here, once: everything after sees the numeric version */
        const char *text = json_string_value(v);
        if (!gp_store_alias_valid(text))
            return gp_error_set(err, GP_EINVAL, "version", GP_API_VERSION_RULE);
        snprintf(alias, GP_ALIAS_MAX + 1, "%s", text);
        return gp_api_resolve_alias(api, name, alias, version, err);
    }
    uint64_t x = 0;
    int rc = gp_json_get_uint(v, "version", INT_MAX, &x, err);
    if (rc == GP_OK && x == 0)
        rc = gp_error_set(err, GP_EINVAL, "version", "version must be an integer >= 1");
    *version = (int)x;
    return rc;
}

static int check_dims(const gp_model *model, const char *name, json_t *X, size_t d,
                      gp_error *err)
{
    if (d == model->input_dim)
        return GP_OK;
    if (json_is_array(json_array_get(X, 0)))
        return gp_error_set(err, GP_EDATA, "X[0]", "X[0] has %zu columns; model '%s' expects %zu",
                            d, name, model->input_dim);
    return gp_error_set(err, GP_EDATA, "X",
                        "X is a flat list (one column); model '%s' expects rows of %zu", name,
                        model->input_dim);
}

/* X of a predict, sample or observe body, in two steps: rows of numbers are
 * parsed before the model is looked up (a malformed X is a 400 whatever the
 * model), rows that are objects (distributional inputs) once the model's
 * input spec is known. */
int gp_api_parse_x_early(gp_api *api, json_t *Xj, double **X, size_t *m, size_t *d,
                         gp_error *err)
{
    if (json_is_array(Xj) && json_is_object(json_array_get(Xj, 0)))
        return GP_OK;
    return gp_json_matrix(Xj, "X", api->cfg.max_points, X, m, d, err);
}

int gp_api_parse_x_late(gp_api *api, const gp_model *model, const char *name, json_t *Xj,
                        const gp_x_names *nm, double **X, size_t *m, size_t *d, gp_error *err)
{
    if (nm && nm->rows) {
        if (model->input.kind != GP_INPUT_POINT)
            return gp_error_set(err, GP_EDATA, "rows",
                                "model '%s' takes %s inputs: give X, not named rows", name,
                                gp_input_kind_name(model->input.kind));
        return gp_api_records(nm, name, api->cfg.max_points, X, m, d, err);
    }
    if (model->input.kind == GP_INPUT_POINT) {
        if (*X == NULL) /* objects given to a model of points: gp_json_matrix says what is wrong */
            return gp_json_matrix(Xj, "X", api->cfg.max_points, X, m, d, err);
        return check_dims(model, name, Xj, *d, err);
    }
    if (*X != NULL)
        return gp_error_set(err, GP_EDATA, "X[0]",
                            "model '%s' takes %s inputs: rows like {\"%s\": ...}, not numbers",
                            name, gp_input_kind_name(model->input.kind),
                            gp_input_kind_name(model->input.kind));
    *d = gp_input_width(&model->input);
    return gp_json_inputs(Xj, &model->input, "X", api->cfg.max_points, X, m, err);
}

int gp_api_x_or_rows(json_t *obj, const char *what, json_t **Xj, json_t **rows, gp_error *err)
{
    *Xj = json_object_get(obj, "X");
    *rows = json_object_get(obj, "rows");
    if (*Xj && *rows)
        return gp_error_set(err, GP_EINVAL, "rows", "give X (positional rows) or rows (named "
                            "ones), not both");
    if (*Xj == NULL && *rows == NULL)
        return gp_error_set(err, GP_EINVAL, "X", "X (%s) is missing", what);
    return GP_OK;
}

/* A query parameter's value as JSON: a number, true, false, or a string;
 * the lists (quantiles, noise) as comma-separated values (?quantiles=0.1,0.9). */
static json_t *query_value(const char *k, const char *v)
{
    json_error_t je;
    if (strcmp(k, "quantiles") == 0 || strcmp(k, "noise") == 0) {
        size_t len = strlen(v);
        char *list = malloc(len + 3);
        json_t *a = NULL;
        if (list) {
            snprintf(list, len + 3, "[%s]", v);
            a = json_loads(list, 0, &je);
            free(list);
        }
        return a ? a : json_string(v);
    }
    json_t *j = json_loads(v, JSON_DECODE_ANY, &je);
    if (json_is_number(j) || json_is_boolean(j))
        return j;
    json_decref(j);
    return json_string(v);
}

/* A text/csv body as the JSON object a JSON body would be: its rows as
 * "rows", the query's parameters as the other members (?version=3). */
static int csv_object(gp_api *api, const gp_request *req, json_t **out, gp_error *err)
{
    json_t *rows = NULL;
    int rc = gp_csv_records(req->body, req->body_len, api->cfg.max_points,
                            api->cfg.max_input_dim + GP_COREG_MAX_OUTPUTS, &rows, err);
    if (rc)
        return rc;
    json_t *obj = json_object();
    for (size_t i = 0; obj && i < req->n_query && rc == GP_OK; i++) {
        const char *k = req->query[i].key, *v = req->query[i].value ? req->query[i].value : "";
        if (strcmp(k, "rows") == 0 || strcmp(k, "X") == 0 || json_object_get(obj, k))
            rc = gp_error_set(err, GP_EINVAL, k, "query parameter '%.40s' given twice or in "
                              "the body", k);
        else
            json_object_set_new(obj, k, query_value(k, v));
    }
    if (obj && rc == GP_OK)
        json_object_set_new(obj, "rows", rows);
    else
        json_decref(rows);
    if (obj == NULL)
        rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    if (rc) {
        json_decref(obj);
        return rc;
    }
    *out = obj;
    return GP_OK;
}

int gp_api_body_object(gp_api *api, const gp_request *req, json_t **obj, gp_error *err)
{
    *obj = NULL;
    int media = gp_media_type(req->content_type);
    if (media == 2)
        return csv_object(api, req, obj, err);
    if (media != 1)
        return gp_error_set(err, GP_EMEDIATYPE, NULL,
                            "Content-Type must be application/json or text/csv, not '%.60s'",
                            req->content_type);
    return gp_json_parse_body(req, obj, err);
}

/* What predict and sample bodies share: a JSON object of known keys, an
 * optional "version" and "include_noise" (*include_noise keeps its default
 * when absent). */
int gp_api_parse_point_request(gp_api *api, const char *name, const gp_request *req,
                               const char *const *keys, json_t **obj, int *version, char *alias,
                               int *include_noise, gp_error *err)
{
    json_t *e;
    int rc = gp_api_body_object(api, req, obj, err);
    if (rc == GP_OK)
        rc = gp_json_known_keys(*obj, keys, NULL, err);
    if (rc == GP_OK)
        rc = gp_api_get_version(api, name, *obj, version, alias, err);
    if (rc == GP_OK && (e = json_object_get(*obj, "include_noise")))
        rc = gp_json_get_bool(e, "include_noise", include_noise, err);
    return rc;
}

void gp_api_write_head(gp_buf *b, const char *name, int version)
{
    gp_buf_puts(b, "{\"name\":");
    gp_buf_json_string(b, name);
    gp_buf_printf(b, ",\"version\":%d", version);
}

/* Past the JSON string at p (a model name: no escapes are written for the
 * names gp_api_valid_name allows), or NULL. */
static const char *skip_name(const char *p, const char *end)
{
    if (p >= end || *p != '"')
        return NULL;
    for (p++; p < end && *p != '"'; p++)
        if (*p == '\\')
            return NULL;
    return p < end ? p + 1 : NULL;
}

static int starts(const char *p, const char *end, const char *s, const char **after)
{
    size_t n = strlen(s);
    if ((size_t)(end - p) < n || memcmp(p, s, n) != 0)
        return 0;
    *after = p + n;
    return 1;
}

int gp_api_answered_version(const char *body, size_t len)
{
    if (body == NULL)
        return 0;
    const char *end = body + len, *p;
    int oip = 0;
    if (!starts(body, end, "{\"name\":", &p)) {
        if (!starts(body, end, "{\"model_name\":", &p))
            return 0;
        oip = 1;
    }
    if ((p = skip_name(p, end)) == NULL ||
        !starts(p, end, oip ? ",\"model_version\":\"" : ",\"version\":", &p))
        return 0;
    long v = 0;
    for (; p < end && *p >= '0' && *p <= '9' && v <= INT_MAX / 10; p++)
        v = v * 10 + (*p - '0');
    return v <= INT_MAX ? (int)v : 0;
}

void gp_api_write_alias(gp_buf *b, const char *alias)
{
    if (alias == NULL || alias[0] == '\0')
        return;
    gp_buf_puts(b, ",\"alias\":");
    gp_buf_json_string(b, alias);
}
