/* Inputs of models that take distributions (core/model/inputs.h): the JSON
 * rows of X, {"gaussian": {"mean": [...], "var": [...]}} (or "cov": rows),
 * {"samples": [[...], ...]} and {"messages": [{"normal": {"mean": m, "var": v}},
 * {"beta": {"a": a, "b": b}}, {"gamma": {"shape": s, "rate": r}}]}, encoded
 * into the fixed-width numeric rows core reads. The JSON's shape is checked
 * here (400 invalid_argument naming the member); its values against the
 * model's spec (arity, dimensions, message types: 422 invalid_data) here too,
 * and their constraints (positive variances, a covariance that is one) by
 * core's gp_input_check. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

#define FIELD_LEN 160

static int number_at(json_t *v, const char *f, double *out, gp_error *err)
{
    return gp_json_cell(v, f, out, err);
}

/* A list of exactly len numbers into out[j * stride] (stride: the encoded
 * matrix's column step, its row count). */
static int numbers(json_t *v, const char *f, size_t len, double *out, size_t stride,
                   gp_error *err)
{
    if (!json_is_array(v))
        return gp_error_set(err, GP_EINVAL, f, "%s must be a list of %zu numbers", f, len);
    if (json_array_size(v) != len)
        return gp_error_set(err, GP_EDATA, f, "%s has %zu numbers; the model's inputs have %zu",
                            f, json_array_size(v), len);
    for (size_t j = 0; j < len; j++) {
        char g[FIELD_LEN];
        gp_fieldf(g, sizeof g, "%s[%zu]", f, j);
        int rc = number_at(json_array_get(v, j), g, &out[j * stride], err);
        if (rc)
            return rc;
    }
    return GP_OK;
}

/* The single member of a row object, which must be `kind`. */
static int row_member(json_t *row, const char *f, const char *kind, json_t **out, gp_error *err)
{
    if (!json_is_object(row))
        return gp_error_set(err, GP_EINVAL, f, "%s must be an object {\"%s\": ...}", f, kind);
    *out = json_object_get(row, kind);
    if (*out == NULL || json_object_size(row) != 1)
        return gp_error_set(err, GP_EDATA, f, "%s must be {\"%s\": ...}: the model takes %s inputs",
                            f, kind, kind);
    return GP_OK;
}

static int gaussian_row(json_t *g, const char *f, const gp_input_spec *s, double *M, size_t n,
                        gp_error *err)
{
    char mf[FIELD_LEN];
    size_t d = s->dim;
    const char *want = s->full_covariance ? "cov" : "var", *other = s->full_covariance ? "var" : "cov";
    if (!json_is_object(g))
        return gp_error_set(err, GP_EINVAL, f, "%s must be an object {\"mean\", \"%s\"}", f, want);
    const char *key;
    json_t *val;
    json_object_foreach(g, key, val) {
        if (strcmp(key, "mean") == 0 || strcmp(key, want) == 0)
            continue;
        gp_fieldf(mf, sizeof mf, "%s.%s", f, key);
        if (strcmp(key, other) == 0)
            return gp_error_set(err, GP_EDATA, mf, "%s: this model's Gaussians carry a %s "
                                "covariance (\"%s\")", mf, s->full_covariance ? "full" : "diagonal",
                                want);
        return gp_error_set(err, GP_EINVAL, mf, "%s: unknown member (mean, %s)", mf, want);
    }
    gp_fieldf(mf, sizeof mf, "%s.mean", f);
    if (json_object_get(g, "mean") == NULL)
        return gp_error_set(err, GP_EINVAL, mf, "%s is missing", mf);
    int rc = numbers(json_object_get(g, "mean"), mf, d, M, n, err);
    gp_fieldf(mf, sizeof mf, "%s.%s", f, want);
    json_t *c = json_object_get(g, want);
    if (rc == GP_OK && c == NULL)
        rc = gp_error_set(err, GP_EINVAL, mf, "%s is missing", mf);
    if (rc || !s->full_covariance)
        return rc ? rc : numbers(c, mf, d, M + d * n, n, err);
    if (!json_is_array(c) || json_array_size(c) != d)
        return gp_error_set(err, json_is_array(c) ? GP_EDATA : GP_EINVAL, mf,
                            "%s must be %zu rows of %zu numbers", mf, d, d);
    for (size_t a = 0; a < d; a++) {
        char rf[FIELD_LEN];
        gp_fieldf(rf, sizeof rf, "%s[%zu]", mf, a);
        /* row a of the covariance: entries (a, b) at column d + b d + a */
        if ((rc = numbers(json_array_get(c, a), rf, d, M + (d + a) * n, d * n, err)))
            return rc;
    }
    return GP_OK;
}

static int samples_row(json_t *v, const char *f, const gp_input_spec *s, double *M, size_t n,
                       gp_error *err)
{
    size_t d = s->dim, S = s->samples;
    if (!json_is_array(v))
        return gp_error_set(err, GP_EINVAL, f, "%s must be a list of %zu points", f, S);
    if (json_array_size(v) != S)
        return gp_error_set(err, GP_EDATA, f, "%s has %zu points; the model takes %zu per input",
                            f, json_array_size(v), S);
    for (size_t k = 0; k < S; k++) {
        char rf[FIELD_LEN];
        gp_fieldf(rf, sizeof rf, "%s[%zu]", f, k);
        int rc = numbers(json_array_get(v, k), rf, d, M + k * d * n, n, err);
        if (rc)
            return rc;
    }
    return GP_OK;
}

static int message(json_t *v, const char *f, gp_message_type want, double *M, size_t n,
                   gp_error *err)
{
    static const char *const params[GP_MESSAGE_TYPE_COUNT][2] = {
        {"mean", "var"}, {"a", "b"}, {"shape", "rate"}};
    const char *name = gp_message_type_name(want);
    if (!json_is_object(v) || json_object_size(v) != 1)
        return gp_error_set(err, GP_EINVAL, f, "%s must be an object {\"%s\": {...}}", f, name);
    const char *key = json_object_iter_key(json_object_iter(v));
    json_t *p = json_object_get(v, key);
    gp_message_type got;
    if (!gp_message_type_from_name(key, &got))
        return gp_error_set(err, GP_EINVAL, f, "%s: unknown message type '%.20s' (normal, beta, "
                            "gamma)", f, key);
    if (got != want)
        return gp_error_set(err, GP_EDATA, f, "%s is a %s message; the model takes %s here", f,
                            key, name);
    char pf[FIELD_LEN];
    gp_fieldf(pf, sizeof pf, "%s.%s", f, name);
    if (!json_is_object(p) || json_object_size(p) != 2)
        return gp_error_set(err, GP_EINVAL, pf, "%s must be {\"%s\": ..., \"%s\": ...}", pf,
                            params[want][0], params[want][1]);
    for (int j = 0; j < 2; j++) {
        char qf[FIELD_LEN];
        gp_fieldf(qf, sizeof qf, "%s.%s", pf, params[want][j]);
        json_t *x = json_object_get(p, params[want][j]);
        if (x == NULL)
            return gp_error_set(err, GP_EINVAL, qf, "%s is missing", qf);
        int rc = number_at(x, qf, &M[(size_t)j * n], err);
        if (rc)
            return rc;
    }
    return GP_OK;
}

static int messages_row(json_t *v, const char *f, const gp_input_spec *s, double *M, size_t n,
                        gp_error *err)
{
    if (!json_is_array(v))
        return gp_error_set(err, GP_EINVAL, f, "%s must be a list of %zu messages", f, s->arity);
    if (json_array_size(v) != s->arity)
        return gp_error_set(err, GP_EDATA, f, "%s has %zu messages; the model takes %zu", f,
                            json_array_size(v), s->arity);
    for (size_t k = 0; k < s->arity; k++) {
        char mf[FIELD_LEN];
        gp_fieldf(mf, sizeof mf, "%s[%zu]", f, k);
        int rc = message(json_array_get(v, k), mf, s->messages[k], M + 2 * k * n, n, err);
        if (rc)
            return rc;
    }
    return GP_OK;
}

static int encode_row(json_t *row, const char *field, size_t i, const gp_input_spec *s,
                      double *M, size_t n, gp_error *err)
{
    char f[FIELD_LEN], mf[FIELD_LEN];
    const char *kind = gp_input_kind_name(s->kind);
    gp_fieldf(f, sizeof f, "%s[%zu]", field, i);
    json_t *v = NULL;
    int rc = row_member(row, f, kind, &v, err);
    gp_fieldf(mf, sizeof mf, "%s.%s", f, kind);
    if (rc)
        return rc;
    switch (s->kind) {
    case GP_INPUT_GAUSSIAN:
        return gaussian_row(v, mf, s, M + i, n, err);
    case GP_INPUT_SAMPLES:
        return samples_row(v, mf, s, M + i, n, err);
    case GP_INPUT_MESSAGES:
        return messages_row(v, mf, s, M + i, n, err);
    default:
        return numbers(v, mf, s->dim, M + i, n, err);
    }
}

int gp_json_inputs(json_t *v, const gp_input_spec *s, const char *field, size_t max_rows,
                   double **X, size_t *n, gp_error *err)
{
    *X = NULL;
    size_t w = gp_input_width(s);
    if (!json_is_array(v))
        return gp_error_set(err, GP_EINVAL, field, "%s must be a list of %s inputs", field,
                            gp_input_kind_name(s->kind));
    size_t rows = json_array_size(v);
    if (rows == 0)
        return gp_error_set(err, GP_EDATA, field, "%s is empty", field);
    if (rows > max_rows)
        return gp_error_set(err, GP_ETOOBIG, field,
                            "%s has %zu rows; the limit is max_points = %zu", field, rows,
                            max_rows);
    if (w == 0 || w > SIZE_MAX / sizeof(double) / rows)
        return gp_error_set(err, GP_ETOOBIG, field, "%s is too large", field);
    double *M = malloc(rows * w * sizeof *M);
    if (M == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory for %zu inputs", rows);
    int rc = GP_OK;
    for (size_t i = 0; i < rows && rc == GP_OK; i++)
        rc = encode_row(json_array_get(v, i), field, i, s, M, rows, err);
    if (rc == GP_OK)
        rc = gp_input_check(s, M, rows, field, err);
    if (rc) {
        free(M);
        return rc;
    }
    *X = M;
    *n = rows;
    return GP_OK;
}

int gp_json_model_inputs(json_t *v, const gp_input_spec *s, const char *field, size_t max_rows,
                         double **X, size_t *n, size_t *d, gp_error *err)
{
    if (s->kind == GP_INPUT_POINT)
        return gp_json_matrix(v, field, max_rows, X, n, d, err);
    *d = gp_input_width(s);
    return gp_json_inputs(v, s, field, max_rows, X, n, err);
}

int gp_json_targets(json_t *v, const char *field, size_t max_rows, int several, double **y,
                    size_t *n, size_t *p, gp_error *err)
{
    *p = 1;
    if (json_is_array(v) && json_is_array(json_array_get(v, 0))) {
        if (!several)
            return gp_error_set(err, GP_EUNSUPPORTED, field,
                                "%s: this method fits one output; give a list of numbers", field);
        return gp_json_matrix(v, field, max_rows, y, n, p, err);
    }
    return gp_json_vector(v, field, max_rows, y, n, err);
}
