/* Request JSON: parsing (jansson), typed field access and numeric matrices,
 * with every error naming its field as docs/design/api.md says ("X[3][1]", "y[7]"). */
#include <ctype.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "api/internal.h"

/* A number too large for a double ("1e999") is a jansson parse error; so that
 * it can be reported as invalid data naming its field, the token is replaced
 * by a marker string ("\u0001" + token) and the body parsed again. */
#define OVERFLOW_MARK '\x01'
#define MAX_OVERFLOW_RETRIES 16

static int is_number_char(char c)
{
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

static int is_overflow_marker(json_t *v)
{
    return json_is_string(v) && json_string_value(v)[0] == OVERFLOW_MARK;
}

int gp_media_type(const char *ct)
{
    if (ct == NULL)
        return 1;
    while (*ct == ' ' || *ct == '\t')
        ct++;
    size_t n = strcspn(ct, ";");
    while (n > 0 && (ct[n - 1] == ' ' || ct[n - 1] == '\t'))
        n--;
    if (n == 0)
        return 1;
    if (n == strlen("application/json") && strncasecmp(ct, "application/json", n) == 0)
        return 1;
    if (n == strlen("text/csv") && strncasecmp(ct, "text/csv", n) == 0)
        return 2;
    return 0;
}

int gp_json_parse_body(const gp_request *req, json_t **out, gp_error *err)
{
    *out = NULL;
    if (req->body_len == 0 || req->body == NULL)
        return gp_error_set(err, GP_EMALFORMED, NULL, "the request body is empty (expected JSON)");
    const size_t flags = JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL;
    const char *text = req->body;
    size_t len = req->body_len;
    char *copy = NULL;
    json_t *root = NULL;
    json_error_t je;
    for (int attempt = 0;; attempt++) {
        root = json_loadb(text, len, flags, &je);
        if (root || json_error_code(&je) != json_error_numeric_overflow ||
            attempt >= MAX_OVERFLOW_RETRIES || je.position <= 0 || (size_t)je.position > len)
            break;
        size_t end = (size_t)je.position, start = end;
        while (start > 0 && is_number_char(text[start - 1]))
            start--;
        if (start == end)
            break;
        /* new text = text[0, start) "\u0001TOKEN" text[end, len) */
        size_t tok = end - start, nlen = len + 8;
        char *next = malloc(nlen);
        if (next == NULL)
            break;
        memcpy(next, text, start);
        memcpy(next + start, "\"\\u0001", 7);
        memcpy(next + start + 7, text + start, tok);
        next[start + 7 + tok] = '"';
        memcpy(next + start + 8 + tok, text + end, len - end);
        free(copy);
        copy = next;
        text = copy;
        len = nlen;
    }
    free(copy);
    if (root == NULL) {
        if (json_error_code(&je) == json_error_numeric_overflow)
            return gp_error_set(err, GP_EDATA, NULL, "a number does not fit a double: %s",
                                je.text);
        return gp_error_set(err, GP_EMALFORMED, NULL, "not valid JSON: %s at line %d column %d",
                            je.text, je.line, je.column);
    }
    if (!json_is_object(root)) {
        json_decref(root);
        return gp_error_set(err, GP_EINVAL, NULL, "the request body must be a JSON object");
    }
    *out = root;
    return GP_OK;
}

int gp_json_known_keys(json_t *obj, const char *const *keys, const char *prefix, gp_error *err)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        int known = 0;
        for (size_t i = 0; keys[i] && !known; i++)
            known = strcmp(keys[i], key) == 0;
        if (!known) {
            char field[GP_ERROR_FIELD_LEN];
            snprintf(field, sizeof field, "%s%s%.48s", prefix ? prefix : "",
                     prefix && prefix[0] ? "." : "", key);
            return gp_error_set(err, GP_EINVAL, field, "unknown field '%s'", field);
        }
    }
    return GP_OK;
}

int gp_json_get_bool(json_t *v, const char *field, int *out, gp_error *err)
{
    if (!json_is_boolean(v))
        return gp_error_set(err, GP_EINVAL, field, "%s must be true or false", field);
    *out = json_is_true(v);
    return GP_OK;
}

int gp_json_get_number(json_t *v, const char *field, double *out, gp_error *err)
{
    if (is_overflow_marker(v))
        return gp_error_set(err, GP_EINVAL, field, "%s = %.40s does not fit a double", field,
                            json_string_value(v) + 1);
    if (!json_is_number(v))
        return gp_error_set(err, GP_EINVAL, field, "%s must be a number", field);
    *out = json_number_value(v);
    return GP_OK;
}

int gp_json_get_positive(json_t *v, const char *field, double *out, gp_error *err)
{
    double x;
    if (is_overflow_marker(v) || !json_is_number(v) || !((x = json_number_value(v)) > 0.0) ||
        !isfinite(x))
        return gp_error_set(err, GP_EINVAL, field, "%s must be a positive finite number", field);
    *out = x;
    return GP_OK;
}

int gp_json_get_uint(json_t *v, const char *field, double max, uint64_t *out, gp_error *err)
{
    double x;
    if (is_overflow_marker(v) || !json_is_number(v) || !isfinite(x = json_number_value(v)) ||
        x < 0.0 || x != floor(x) || x > max)
        return gp_error_set(err, GP_EINVAL, field, "%s must be an integer in [0, %.17g]", field,
                            max);
    *out = (uint64_t)x;
    return GP_OK;
}

/* One cell: a finite number, else invalid data naming it. */
int gp_json_cell(json_t *v, const char *field, double *out, gp_error *err)
{
    if (json_is_number(v)) {
        *out = json_number_value(v);
        if (isfinite(*out))
            return GP_OK;
        return gp_error_set(err, GP_EDATA, field, "%s is not a finite number", field);
    }
    if (is_overflow_marker(v))
        return gp_error_set(err, GP_EDATA, field, "%s = %.40s is not a finite double", field,
                            json_string_value(v) + 1);
    if (json_is_string(v))
        return gp_error_set(err, GP_EDATA, field, "%s is a string (\"%.20s\"), not a number",
                            field, json_string_value(v));
    if (json_is_null(v))
        return gp_error_set(err, GP_EDATA, field, "%s is null, not a number", field);
    if (json_is_array(v))
        return gp_error_set(err, GP_EDATA, field, "%s is an array, not a number", field);
    return gp_error_set(err, GP_EDATA, field, "%s is not a number", field);
}

int gp_json_matrix(json_t *v, const char *field, size_t max_rows, double **X, size_t *n,
                   size_t *d, gp_error *err)
{
    *X = NULL;
    if (!json_is_array(v))
        return gp_error_set(err, GP_EINVAL, field, "%s must be an array of rows of numbers",
                            field);
    size_t rows = json_array_size(v);
    if (rows == 0)
        return gp_error_set(err, GP_EDATA, field, "%s is empty", field);
    if (rows > max_rows)
        return gp_error_set(err, GP_ETOOBIG, field,
                            "%s has %zu rows; the limit is max_points = %zu", field, rows,
                            max_rows);
    json_t *first = json_array_get(v, 0);
    int flat = !json_is_array(first);
    size_t cols = flat ? 1 : json_array_size(first);
    char f[GP_ERROR_FIELD_LEN];
    if (cols == 0) {
        snprintf(f, sizeof f, "%s[0]", field);
        return gp_error_set(err, GP_EDATA, f, "%s is an empty row", f);
    }
    if (cols > SIZE_MAX / sizeof(double) / rows)
        return gp_error_set(err, GP_ETOOBIG, field, "%s is too large", field);
    double *M = malloc(rows * cols * sizeof *M);
    if (M == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory for %zu x %zu values", rows,
                            cols);
    for (size_t i = 0; i < rows; i++) {
        json_t *row = json_array_get(v, i);
        if (flat) {
            if (json_is_array(row)) {
                snprintf(f, sizeof f, "%s[%zu]", field, i);
                free(M);
                return gp_error_set(err, GP_EDATA, f,
                                    "%s is a row, but %s[0] is a number (mixed rows and numbers)",
                                    f, field);
            }
            snprintf(f, sizeof f, "%s[%zu]", field, i);
            int rc = gp_json_cell(row, f, &M[i], err);
            if (rc) {
                free(M);
                return rc;
            }
            continue;
        }
        if (!json_is_array(row) || json_array_size(row) != cols) {
            snprintf(f, sizeof f, "%s[%zu]", field, i);
            free(M);
            if (!json_is_array(row))
                return gp_error_set(err, GP_EDATA, f, "%s is not a row of %zu numbers", f, cols);
            return gp_error_set(err, GP_EDATA, f, "%s has %zu columns; %s[0] has %zu", f,
                                json_array_size(row), field, cols);
        }
        for (size_t j = 0; j < cols; j++) {
            json_t *c = json_array_get(row, j);
            double x;
            if (json_is_number(c) && isfinite(x = json_number_value(c))) {
                M[j * rows + i] = x;
                continue;
            }
            snprintf(f, sizeof f, "%s[%zu][%zu]", field, i, j);
            int rc = gp_json_cell(c, f, &x, err);
            free(M);
            return rc ? rc : GP_EINTERNAL;
        }
    }
    *X = M;
    *n = rows;
    *d = cols;
    return GP_OK;
}

int gp_json_vector(json_t *v, const char *field, size_t max_len, double **y, size_t *n,
                   gp_error *err)
{
    *y = NULL;
    if (!json_is_array(v))
        return gp_error_set(err, GP_EINVAL, field, "%s must be an array of numbers", field);
    size_t len = json_array_size(v);
    if (len == 0)
        return gp_error_set(err, GP_EDATA, field, "%s is empty", field);
    if (len > max_len)
        return gp_error_set(err, GP_ETOOBIG, field, "%s has %zu entries; the limit is %zu", field,
                            len, max_len);
    double *out = malloc(len * sizeof *out);
    if (out == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    char f[GP_ERROR_FIELD_LEN];
    for (size_t i = 0; i < len; i++) {
        snprintf(f, sizeof f, "%s[%zu]", field, i);
        int rc = gp_json_cell(json_array_get(v, i), f, &out[i], err);
        if (rc) {
            free(out);
            return rc;
        }
    }
    *y = out;
    *n = len;
    return GP_OK;
}

void gp_fieldf(char *out, size_t len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, len, fmt, ap);
    va_end(ap);
}

json_t *gp_json_real(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

void gp_json_respond(json_t *v, int status, gp_response *out)
{
    char *text = v ? json_dumps(v, GP_JSON_FLAGS) : NULL;
    json_decref(v);
    free(out->body);
    out->body = NULL;
    out->body_len = 0;
    if (text == NULL) {
        gp_api_fail(out, GP_ENOMEM, NULL, "out of memory building the response");
        return;
    }
    out->status = status;
    out->content_type = "application/json";
    out->body = text;
    out->body_len = strlen(text);
}

/* ---- structured option values: jansson -> gp_value ---- */

typedef struct value_walk {
    size_t nodes; /* converted so far, against GP_VALUE_MAX_NODES */
    const char *root;
    gp_error *err;
} value_walk;

/* field = parent + ".key" or "[i]" (cut at the field length, as every field is). */
static void child_field(char *out, size_t len, const char *parent, const char *key, size_t index)
{
    if (key)
        snprintf(out, len, "%s.%s", parent, key);
    else
        snprintf(out, len, "%s[%zu]", parent, index);
}

static int to_value(value_walk *w, json_t *v, const char *field, int depth, gp_value *out)
{
    memset(out, 0, sizeof *out);
    if (depth > GP_VALUE_MAX_DEPTH)
        return gp_error_set(w->err, GP_EINVAL, w->root,
                            "%s nests deeper than %d levels (at %s)", w->root,
                            GP_VALUE_MAX_DEPTH, field);
    if (++w->nodes > GP_VALUE_MAX_NODES)
        return gp_error_set(w->err, GP_EINVAL, w->root, "%s has more than %d values", w->root,
                            GP_VALUE_MAX_NODES);
    switch (json_typeof(v)) {
    case JSON_NULL:
        out->type = GP_VALUE_NULL;
        return GP_OK;
    case JSON_TRUE:
    case JSON_FALSE:
        out->type = GP_VALUE_BOOL;
        out->number = json_is_true(v) ? 1.0 : 0.0;
        return GP_OK;
    case JSON_INTEGER:
    case JSON_REAL:
        out->type = GP_VALUE_NUMBER;
        out->number = json_number_value(v);
        if (!isfinite(out->number))
            return gp_error_set(w->err, GP_EINVAL, field, "%s is not a finite number", field);
        return GP_OK;
    case JSON_STRING:
        if (is_overflow_marker(v))
            return gp_error_set(w->err, GP_EINVAL, field, "%s = %.40s does not fit a double",
                                field, json_string_value(v) + 1);
        out->type = GP_VALUE_STRING;
        if ((out->string = strdup(json_string_value(v))) == NULL)
            return gp_error_set(w->err, GP_ENOMEM, NULL, "out of memory");
        return GP_OK;
    case JSON_ARRAY:
    case JSON_OBJECT:
        break;
    }
    int object = json_is_object(v);
    size_t n = object ? json_object_size(v) : json_array_size(v);
    out->type = object ? GP_VALUE_OBJECT : GP_VALUE_ARRAY;
    if (n == 0)
        return GP_OK;
    /* a container cannot hold more than the node budget left: checked before allocating */
    if (n > GP_VALUE_MAX_NODES - w->nodes)
        return gp_error_set(w->err, GP_EINVAL, w->root, "%s has more than %d values", w->root,
                            GP_VALUE_MAX_NODES);
    out->items = calloc(n, sizeof *out->items);
    out->keys = object ? calloc(n, sizeof *out->keys) : NULL;
    if (out->items == NULL || (object && out->keys == NULL))
        return gp_error_set(w->err, GP_ENOMEM, NULL, "out of memory");
    char f[GP_ERROR_FIELD_LEN];
    if (object) {
        const char *key;
        json_t *item;
        json_object_foreach(v, key, item) {
            /* n counts the members converted, so that a failure frees just those */
            if ((out->keys[out->n] = strdup(key)) == NULL)
                return gp_error_set(w->err, GP_ENOMEM, NULL, "out of memory");
            child_field(f, sizeof f, field, key, 0);
            int rc = to_value(w, item, f, depth + 1, &out->items[out->n++]);
            if (rc)
                return rc;
        }
        return GP_OK;
    }
    for (size_t i = 0; i < n; i++) {
        child_field(f, sizeof f, field, NULL, i);
        int rc = to_value(w, json_array_get(v, i), f, depth + 1, &out->items[out->n++]);
        if (rc)
            return rc;
    }
    return GP_OK;
}

int gp_json_to_value(json_t *v, const char *field, gp_value **out, gp_error *err)
{
    *out = NULL;
    if (v == NULL)
        return gp_error_set(err, GP_EINVAL, field, "%s is missing", field);
    gp_value *root = calloc(1, sizeof *root);
    if (root == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    value_walk w = {0, field, err};
    int rc = to_value(&w, v, field, 1, root);
    if (rc) {
        gp_value_free(root);
        return rc;
    }
    *out = root;
    return GP_OK;
}
