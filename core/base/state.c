#include "core/base/state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/linalg/linalg.h"

void gp_state_init(gp_state *st)
{
    st->arrays = NULL;
    st->count = 0;
    st->capacity = 0;
}

void gp_state_free(gp_state *st)
{
    if (st == NULL)
        return;
    for (size_t i = 0; i < st->count; i++)
        free(st->arrays[i].data);
    free(st->arrays);
    gp_state_init(st);
}

const gp_named_array *gp_state_find(const gp_state *st, const char *name)
{
    for (size_t i = 0; i < st->count; i++)
        if (strcmp(st->arrays[i].name, name) == 0)
            return &st->arrays[i];
    return NULL;
}

static int check_new_name(const gp_state *st, const char *name, gp_error *err)
{
    size_t len = strlen(name);
    if (len == 0 || len >= GP_STATE_NAME_LEN)
        return gp_error_set(err, GP_EINVAL, NULL, "array name '%s' must have 1..%d characters",
                            name, GP_STATE_NAME_LEN - 1);
    if (gp_state_find(st, name))
        return gp_error_set(err, GP_EINVAL, NULL, "array '%s' already in the state", name);
    return GP_OK;
}

static int grow(gp_state *st, gp_error *err)
{
    if (st->count < st->capacity)
        return GP_OK;
    size_t cap = st->capacity ? 2 * st->capacity : 16;
    gp_named_array *a = realloc(st->arrays, cap * sizeof *a);
    if (a == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory growing a model state");
    st->arrays = a;
    st->capacity = cap;
    return GP_OK;
}

int gp_state_put_owned(gp_state *st, const char *name, size_t rows, size_t cols, double *data,
                       gp_error *err)
{
    size_t count = 0;
    int rc = check_new_name(st, name, err);
    if (rc == GP_OK)
        rc = gp_checked_size(rows, cols, &count, err);
    if (rc == GP_OK)
        rc = grow(st, err);
    if (rc) {
        free(data);
        return rc;
    }
    gp_named_array *a = &st->arrays[st->count++];
    memset(a->name, 0, sizeof a->name);
    memcpy(a->name, name, strlen(name));
    a->rows = rows;
    a->cols = cols;
    a->data = data;
    return GP_OK;
}

int gp_state_put(gp_state *st, const char *name, size_t rows, size_t cols, const double *data,
                 gp_error *err)
{
    size_t count = 0;
    int rc = gp_checked_size(rows, cols, &count, err);
    if (rc)
        return rc;
    double *copy = gp_alloc_doubles(count, err);
    if (copy == NULL)
        return GP_ENOMEM;
    if (count)
        memcpy(copy, data, count * sizeof *copy);
    return gp_state_put_owned(st, name, rows, cols, copy, err);
}

int gp_state_put_scalar(gp_state *st, const char *name, double value, gp_error *err)
{
    return gp_state_put(st, name, 1, 1, &value, err);
}

int gp_state_get(const gp_state *st, const char *name, size_t rows, size_t cols,
                 const double **data, gp_error *err)
{
    const gp_named_array *a = gp_state_find(st, name);
    if (a == NULL)
        return gp_error_set(err, GP_EDATA, name, "model state has no array '%s'", name);
    if (a->rows != rows || a->cols != cols)
        return gp_error_set(err, GP_EDATA, name,
                            "model array '%s' is %zu x %zu; expected %zu x %zu", name, a->rows,
                            a->cols, rows, cols);
    *data = a->data;
    return GP_OK;
}

int gp_state_get_scalar(const gp_state *st, const char *name, double *value, gp_error *err)
{
    const double *p;
    int rc = gp_state_get(st, name, 1, 1, &p, err);
    if (rc == GP_OK)
        *value = p[0];
    return rc;
}

int gp_state_check_finite(const gp_state *st, gp_error *err)
{
    for (size_t a = 0; a < st->count; a++) {
        const gp_named_array *arr = &st->arrays[a];
        size_t bad = 0;
        if (gp_all_finite(arr->data, arr->rows * arr->cols, &bad))
            continue;
        char field[GP_ERROR_FIELD_LEN];
        snprintf(field, sizeof field, "state.%s[%zu]", arr->name, bad);
        return gp_error_set(err, GP_EDATA, field,
                            "model array '%s' holds a non-finite number at %zu (%g)", arr->name,
                            bad, arr->data[bad]);
    }
    return GP_OK;
}
