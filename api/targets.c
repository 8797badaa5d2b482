/* Targets of several outputs (docs/design/multioutput.md): y as rows of p
 * values where JSON null (a CSV's empty cell) is a missing entry, NaN in
 * core; the checks a fit and an observe make of them; and the outputs'
 * names, kept with the model and returned with its answers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

/* One entry of y: a finite number, or null (NaN: missing). */
static int target_cell(json_t *c, const char *field, double *out, gp_error *err)
{
    if (json_is_null(c)) {
        *out = NAN;
        return GP_OK;
    }
    return gp_json_cell(c, field, out, err);
}

/* Rows of p entries each (column-major n x p into M). */
static int target_rows(json_t *v, size_t rows, size_t cols, double *M, gp_error *err)
{
    char f[GP_ERROR_FIELD_LEN];
    for (size_t i = 0; i < rows; i++) {
        json_t *row = json_array_get(v, i);
        snprintf(f, sizeof f, "y[%zu]", i);
        if (!json_is_array(row))
            return gp_error_set(err, GP_EDATA, f, "%s is not a row of %zu values", f, cols);
        if (json_array_size(row) != cols)
            return gp_error_set(err, GP_EDATA, f,
                                "%s has %zu outputs; y[0] has %zu (every row gives every "
                                "output: null for a missing one)",
                                f, json_array_size(row), cols);
        for (size_t j = 0; j < cols; j++) {
            snprintf(f, sizeof f, "y[%zu][%zu]", i, j);
            int rc = target_cell(json_array_get(row, j), f, &M[j * rows + i], err);
            if (rc)
                return rc;
        }
    }
    return GP_OK;
}

int gp_json_targets_missing(json_t *v, size_t max_rows, int several, double **y, size_t *n,
                            size_t *p, gp_error *err)
{
    *y = NULL;
    *p = 1;
    if (!json_is_array(v))
        return gp_error_set(err, GP_EINVAL, "y", "y must be an array of numbers or of rows");
    size_t rows = json_array_size(v);
    if (rows == 0)
        return gp_error_set(err, GP_EDATA, "y", "y is empty");
    if (rows > max_rows)
        return gp_error_set(err, GP_ETOOBIG, "y", "y has %zu rows; the limit is max_points = %zu",
                            rows, max_rows);
    json_t *first = json_array_get(v, 0);
    int flat = !json_is_array(first);
    if (!flat && !several)
        return gp_error_set(err, GP_EUNSUPPORTED, "y",
                            "y: this method fits one output; give a list of numbers");
    size_t cols = flat ? 1 : json_array_size(first);
    if (cols == 0)
        return gp_error_set(err, GP_EDATA, "y[0]", "y[0] is an empty row");
    if (cols > GP_COREG_MAX_OUTPUTS)
        return gp_error_set(err, GP_EDATA, "y",
                            "y has %zu outputs; a coregionalised model takes at most %d", cols,
                            GP_COREG_MAX_OUTPUTS);
    double *M = malloc(rows * cols * sizeof *M);
    if (M == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    int rc = GP_OK;
    char f[GP_ERROR_FIELD_LEN];
    for (size_t i = 0; flat && rc == GP_OK && i < rows; i++) {
        snprintf(f, sizeof f, "y[%zu]", i);
        json_t *c = json_array_get(v, i);
        rc = json_is_array(c) ? gp_error_set(err, GP_EDATA, f,
                                             "%s is a row, but y[0] is a number (mixed rows "
                                             "and numbers)", f)
                              : target_cell(c, f, &M[i], err);
    }
    if (!flat)
        rc = target_rows(v, rows, cols, M, err);
    if (rc) {
        free(M);
        return rc;
    }
    *y = M;
    *n = rows;
    *p = cols;
    return GP_OK;
}

int gp_json_targets_null(json_t *v, gp_error *err)
{
    char f[GP_ERROR_FIELD_LEN];
    for (size_t i = 0; json_is_array(v) && i < json_array_size(v); i++) {
        json_t *row = json_array_get(v, i);
        size_t cols = json_is_array(row) ? json_array_size(row) : 0;
        for (size_t j = 0; j < cols; j++)
            if (json_is_null(json_array_get(row, j))) {
                snprintf(f, sizeof f, "y[%zu][%zu]", i, j);
                return gp_api_missing_refused(f, err);
            }
        if (json_is_null(row)) {
            snprintf(f, sizeof f, "y[%zu]", i);
            return gp_api_missing_refused(f, err);
        }
    }
    return GP_OK;
}

int gp_api_missing_refused(const char *field, gp_error *err)
{
    return gp_error_set(err, GP_EDATA, field,
                        "%s is missing (null, or an empty CSV cell): missing values need "
                        "options.coregionalization (methods exact, sgpr, svgp)",
                        field);
}

/* Output j's name (its default y<j> when names is NULL). */
static void output_name(json_t *names, size_t j, char *out, size_t len)
{
    const char *s = json_string_value(json_array_get(names, j));
    if (s)
        snprintf(out, len, "%s", s);
    else
        snprintf(out, len, "y%zu", j);
}

int gp_api_check_targets(const double *y, size_t n, size_t p, int coreg, int rows_only,
                         json_t *names, gp_error *err)
{
    char f[GP_ERROR_FIELD_LEN];
    for (size_t i = 0; i < n; i++) {
        size_t seen = 0;
        for (size_t j = 0; j < p; j++) {
            if (!isnan(y[j * n + i])) {
                seen++;
                continue;
            }
            if (p == 1)
                snprintf(f, sizeof f, "y[%zu]", i);
            else
                snprintf(f, sizeof f, "y[%zu][%zu]", i, j);
            if (!coreg)
                return gp_api_missing_refused(f, err);
        }
        if (seen == 0) {
            snprintf(f, sizeof f, "y[%zu]", i);
            return gp_error_set(err, GP_EDATA, f,
                                "%s has every output missing: a row gives at least one", f);
        }
    }
    for (size_t j = 0; !rows_only && j < p; j++) {
        size_t seen = 0;
        for (size_t i = 0; i < n && seen == 0; i++)
            seen += !isnan(y[j * n + i]);
        if (seen)
            continue;
        char name[GP_OUTPUT_NAME_MAX + 1];
        output_name(names, j, name, sizeof name);
        return gp_error_set(err, GP_EDATA, "y",
                            "y: output %zu ('%s') is never observed: every output needs at "
                            "least one value",
                            j, name);
    }
    return GP_OK;
}

int gp_api_check_name_at(json_t *names, const char *field, size_t i, gp_error *err)
{
    char f[GP_ERROR_FIELD_LEN];
    snprintf(f, sizeof f, "%s[%zu]", field, i);
    const char *s = json_string_value(json_array_get(names, i));
    size_t len = s ? strlen(s) : 0;
    if (s == NULL || len == 0 || len > GP_OUTPUT_NAME_MAX)
        return gp_error_set(err, GP_EINVAL, f, "%s must be a non-empty string of at most %d "
                            "bytes", f, GP_OUTPUT_NAME_MAX);
    for (size_t k = 0; k < len; k++)
        if ((unsigned char)s[k] < 0x20)
            return gp_error_set(err, GP_EINVAL, f, "%s holds a control character", f);
    for (size_t k = 0; k < i; k++)
        if (strcmp(s, json_string_value(json_array_get(names, k))) == 0)
            return gp_error_set(err, GP_EINVAL, f, "%s repeats %s[%zu] ('%s')", f, field, k, s);
    return GP_OK;
}

int gp_api_parse_outputs(json_t *v, size_t p, json_t **out, gp_error *err)
{
    *out = NULL;
    if (v == NULL) {
        json_t *a = json_array();
        for (size_t j = 0; a && j < p; j++) {
            char name[32];
            snprintf(name, sizeof name, "y%zu", j);
            json_array_append_new(a, json_string(name));
        }
        if (a == NULL || json_array_size(a) != p) {
            json_decref(a);
            return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        }
        *out = a;
        return GP_OK;
    }
    if (!json_is_array(v))
        return gp_error_set(err, GP_EINVAL, "outputs",
                            "outputs must be a list of the outputs' names (strings)");
    if (json_array_size(v) != p)
        return gp_error_set(err, GP_EINVAL, "outputs",
                            "outputs has %zu names; y has %zu outputs", json_array_size(v), p);
    for (size_t i = 0; i < p; i++) {
        int rc = gp_api_check_name_at(v, "outputs", i, err);
        if (rc)
            return rc;
    }
    *out = json_incref(v);
    return GP_OK;
}

char *gp_api_outputs_text(const char *info, size_t p)
{
    json_error_t je;
    json_t *o = info ? json_loads(info, 0, &je) : NULL;
    json_t *names = json_object_get(o, "outputs");
    json_t *def = NULL;
    gp_error err;
    if (!json_is_array(names) || json_array_size(names) != p) {
        names = NULL;
        if (gp_api_parse_outputs(NULL, p, &def, &err) == GP_OK)
            names = def;
    }
    char *text = names ? json_dumps(names, GP_JSON_FLAGS) : NULL;
    json_decref(def);
    json_decref(o);
    return text;
}

int gp_api_named_outputs(const gp_model *model)
{
    return model->n_outputs > 1 && model->likelihood != GP_LIK_SOFTMAX;
}

size_t gp_api_target_columns(const gp_model *model)
{
    return model->likelihood == GP_LIK_SOFTMAX ? 1 : model->n_outputs;
}
