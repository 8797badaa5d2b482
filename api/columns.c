/* Named columns, a model's signature (docs/design/api.md, "Named columns"):
 * the inputs' names a fit keeps ("feature_names": a CSV header's, or the
 * JSON fit's), and the records that name them at predict, sample and observe
 * time ({"rows": [{"cement": 540, ...}, ...]}, or a text/csv body turned into
 * such rows by csv.c), matched to the model's columns by name in any order.
 * A record's values are read by gp_json_cell, as a positional row's are, so
 * both forms give the model the same doubles. A model fitted without names
 * takes no records: its columns have no names to match (422). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

#define NAME_SHOWN 40

int gp_api_check_names(json_t *v, const char *field, size_t want, gp_error *err)
{
    if (!json_is_array(v))
        return gp_error_set(err, GP_EINVAL, field, "%s must be a list of names (strings)", field);
    if (json_array_size(v) != want)
        return gp_error_set(err, GP_EDATA, field, "%s has %zu names; the data has %zu columns",
                            field, json_array_size(v), want);
    for (size_t i = 0; i < want; i++) {
        int rc = gp_api_check_name_at(v, field, i, err);
        if (rc)
            return rc;
    }
    return GP_OK;
}

json_t *gp_api_info_names(const char *info, const char *key)
{
    json_error_t je;
    json_t *o = info ? json_loads(info, 0, &je) : NULL;
    json_t *names = json_object_get(o, key);
    names = json_is_array(names) ? json_incref(names) : NULL;
    json_decref(o);
    return names;
}

/* 1 when name is one of the list's. */
static int listed(const json_t *list, const char *name)
{
    for (size_t j = 0; j < json_array_size(list); j++)
        if (strcmp(json_string_value(json_array_get(list, j)), name) == 0)
            return 1;
    return 0;
}

/* Row i's values by the model's names into X (column-major m x d). */
static int record(json_t *row, size_t i, const gp_x_names *nm, double *X, size_t m,
                  gp_error *err)
{
    char f[GP_ERROR_FIELD_LEN];
    size_t d = json_array_size(nm->features);
    if (!json_is_object(row)) {
        snprintf(f, sizeof f, "rows[%zu]", i);
        return gp_error_set(err, GP_EINVAL, f, "%s must be an object of the model's columns "
                            "by name", f);
    }
    for (size_t j = 0; j < d; j++) {
        const char *name = json_string_value(json_array_get(nm->features, j));
        json_t *v = json_object_get(row, name);
        gp_fieldf(f, sizeof f, "rows[%zu].%s", i, name);
        if (v == NULL)
            return gp_error_set(err, GP_EDATA, f, "%s is missing: the model's inputs are named "
                                "(feature_names) and each row gives every one", f);
        int rc = gp_json_cell(v, f, &X[j * m + i], err);
        if (rc)
            return rc;
    }
    if (json_object_size(row) == d)
        return GP_OK;
    const char *key;
    json_t *val;
    json_object_foreach(row, key, val) {
        if (listed(nm->features, key) || (nm->targets && listed(nm->targets, key)))
            continue;
        gp_fieldf(f, sizeof f, "rows[%zu].%s", i, key);
        return gp_error_set(err, GP_EDATA, f, "%s: '%.*s' is no column of the model (its "
                            "feature_names)", f, NAME_SHOWN, key);
    }
    return GP_OK;
}

int gp_api_records(const gp_x_names *nm, const char *name, size_t max_rows, double **X,
                   size_t *m, size_t *d, gp_error *err)
{
    *X = NULL;
    if (nm->features == NULL)
        return gp_error_set(err, GP_EDATA, "rows",
                            "model '%s' was fitted without feature_names: give X (positional "
                            "rows), not named rows", name);
    if (!json_is_array(nm->rows))
        return gp_error_set(err, GP_EINVAL, "rows", "rows must be a list of objects");
    size_t n = json_array_size(nm->rows), w = json_array_size(nm->features);
    if (n == 0)
        return gp_error_set(err, GP_EDATA, "rows", "rows is empty");
    if (n > max_rows)
        return gp_error_set(err, GP_ETOOBIG, "rows",
                            "rows has %zu rows; the limit is max_points = %zu", n, max_rows);
    if (w == 0 || w > SIZE_MAX / sizeof(double) / n)
        return gp_error_set(err, GP_ETOOBIG, "rows", "rows is too large");
    double *M = malloc(n * w * sizeof *M);
    if (M == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory for %zu rows", n);
    int rc = GP_OK;
    for (size_t i = 0; i < n && rc == GP_OK; i++)
        rc = record(json_array_get(nm->rows, i), i, nm, M, n, err);
    if (rc) {
        free(M);
        return rc;
    }
    *X = M;
    *m = n;
    *d = w;
    return GP_OK;
}

/* The targets' values of records (an observe whose rows carry y too),
 * column-major n x p; NaN is never made: each target must be given. */
int gp_api_record_targets(json_t *rows, const json_t *targets, double **y, size_t *p,
                          gp_error *err)
{
    size_t n = json_array_size(rows), q = json_array_size(targets);
    *y = malloc((n * q > 0 ? n * q : 1) * sizeof **y);
    if (*y == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < q; j++) {
            char f[GP_ERROR_FIELD_LEN];
            const char *name = json_string_value(json_array_get(targets, j));
            json_t *v = json_object_get(json_array_get(rows, i), name);
            gp_fieldf(f, sizeof f, "rows[%zu].%s", i, name);
            int rc = v ? gp_json_cell(v, f, &(*y)[j * n + i], err)
                       : gp_error_set(err, GP_EDATA, f, "%s (a target) is missing: give y, or "
                                      "the target in every row", f);
            if (rc) {
                free(*y);
                *y = NULL;
                return rc;
            }
        }
    *p = q;
    return GP_OK;
}
