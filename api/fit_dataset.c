/* A fit that names a data set instead of carrying X and y (docs/design/api.md,
 * "Fits over a data set"): its "data" object parsed and checked against the
 * store, the reader its run opens, and what the fitted version records of
 * the data set. The request keeps only the reference: an async job stores
 * no rows (a daemon that takes it over reads the data set itself), pinned
 * to the data set's id of the moment it was accepted. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/dataset_rows.h"
#include "api/internal.h"


struct gp_fit_data {
    char name[GP_NAME_MAX + 1];
    char target[GP_OUTPUT_NAME_MAX + 1];
    char **columns; /* NULL: every column but the target */
    size_t n_columns;
    uint64_t sample, seed;
    gp_dataset_resolved res; /* as resolved when parsed (id pinned from then on) */
};

static const char *const data_keys[] = {"dataset", "target", "columns", "rows", NULL};
static const char *const sample_keys[] = {"sample", "seed", NULL};

void gp_fit_data_free(gp_fit_data *fd)
{
    if (fd == NULL)
        return;
    for (size_t i = 0; i < fd->n_columns; i++)
        free(fd->columns[i]);
    free(fd->columns);
    free(fd);
}

static int parse_columns(json_t *v, gp_fit_data *fd, gp_error *err)
{
    if (!json_is_array(v) || json_array_size(v) == 0)
        return gp_error_set(err, GP_EINVAL, "data.columns",
                            "data.columns must be a list of column names (or left out: every "
                            "column but the target)");
    fd->columns = calloc(json_array_size(v), sizeof *fd->columns);
    if (fd->columns == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    size_t i;
    json_t *c;
    json_array_foreach(v, i, c) {
        if (!json_is_string(c)) {
            char field[48];
            snprintf(field, sizeof field, "data.columns[%zu]", i);
            return gp_error_set(err, GP_EINVAL, field, "%s must be a column's name", field);
        }
        if ((fd->columns[i] = strdup(json_string_value(c))) == NULL)
            return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        fd->n_columns++;
    }
    return GP_OK;
}

/* "rows": "all" | {"sample": k >= 1, "seed": s}. */
static int parse_rows(json_t *v, gp_fit_data *fd, gp_error *err)
{
    if (json_is_string(v) && strcmp(json_string_value(v), "all") == 0)
        return GP_OK;
    if (!json_is_object(v))
        return gp_error_set(err, GP_EINVAL, "data.rows",
                            "data.rows must be \"all\" or {\"sample\": k, \"seed\": s}");
    int rc = gp_json_known_keys(v, sample_keys, "data.rows", err);
    json_t *k = json_object_get(v, "sample"), *s = json_object_get(v, "seed");
    if (rc == GP_OK && k == NULL)
        rc = gp_error_set(err, GP_EINVAL, "data.rows.sample",
                          "data.rows.sample (how many rows) is missing");
    if (rc == GP_OK)
        rc = gp_json_get_uint(k, "data.rows.sample", GP_JSON_UINT_MAX, &fd->sample, err);
    if (rc == GP_OK && fd->sample == 0)
        rc = gp_error_set(err, GP_EINVAL, "data.rows.sample", "data.rows.sample must be >= 1");
    if (rc == GP_OK && s)
        rc = gp_json_get_uint(s, "data.rows.seed", GP_JSON_UINT_MAX, &fd->seed, err);
    return rc;
}

/* The "data" object's own shape (400s). */
static int parse_shape(json_t *v, gp_fit_data *fd, gp_error *err)
{
    if (!json_is_object(v))
        return gp_error_set(err, GP_EINVAL, "data",
                            "data must be an object {\"dataset\": name, \"target\": column, ...}");
    int rc = gp_json_known_keys(v, data_keys, "data", err);
    const char *ds = json_string_value(json_object_get(v, "dataset"));
    const char *target = json_string_value(json_object_get(v, "target"));
    if (rc == GP_OK && (ds == NULL || !gp_api_valid_name(ds)))
        rc = gp_error_set(err, GP_EINVAL, "data.dataset",
                          "data.dataset must be a data set's name ([A-Za-z0-9._-]{1,64})");
    if (rc == GP_OK && (target == NULL || target[0] == '\0' || strlen(target) > GP_OUTPUT_NAME_MAX))
        rc = gp_error_set(err, GP_EINVAL, "data.target",
                          "data.target must name the column of y (1..%d bytes)",
                          GP_OUTPUT_NAME_MAX);
    if (rc)
        return rc;
    snprintf(fd->name, sizeof fd->name, "%s", ds);
    snprintf(fd->target, sizeof fd->target, "%s", target);
    json_t *e;
    if ((e = json_object_get(v, "columns")) && (rc = parse_columns(e, fd, err)))
        return rc;
    if ((e = json_object_get(v, "rows")) && (rc = parse_rows(e, fd, err)))
        return rc;
    return GP_OK;
}

static gp_dataset_ref ref_of(const gp_fit_data *fd, int64_t id)
{
    gp_dataset_ref ref = {.name = fd->name, .id = id, .target = fd->target,
                          .columns = (const char *const *)fd->columns,
                          .n_columns = fd->n_columns, .sample = fd->sample, .seed = fd->seed};
    return ref;
}

/* The methods whose descriptor says they stream their rows, for a refusal. */
static void streaming_methods(char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; gp_method_at(i) && used < size; i++)
        if (gp_method_at(i)->streams_rows)
            used += (size_t)snprintf(out + used, size - used, "%s%s", used ? ", " : "",
                                     gp_method_at(i)->name);
    if (used == 0)
        snprintf(out, size, "none in this build");
}

int gp_fit_data_parse(gp_api *api, json_t *obj, const gp_method *m, int64_t pinned,
                      gp_fit_data **out, gp_error *err)
{
    *out = NULL;
    if (json_object_get(obj, "X") || json_object_get(obj, "y"))
        return gp_error_set(err, GP_EINVAL, "data",
                            "give data (a data set) or X and y, not both");
    gp_fit_data *fd = calloc(1, sizeof *fd);
    if (fd == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    int rc = parse_shape(json_object_get(obj, "data"), fd, err);
    gp_dataset_ref ref = ref_of(fd, pinned);
    if (rc == GP_OK)
        rc = gp_dataset_resolve(api->store, &ref, &fd->res, err);
    if (rc == GP_OK && fd->res.d > api->cfg.max_input_dim)
        rc = gp_error_set(err, GP_ETOOBIG, "data.columns",
                          "the fit takes %zu input columns; the limit is max_input_dim = %zu "
                          "(--max-input-dim)",
                          fd->res.d, api->cfg.max_input_dim);
    if (rc == GP_OK && !m->streams_rows) {
        char names[160];
        streaming_methods(names, sizeof names);
        rc = gp_error_set(err, GP_EUNSUPPORTED, "data.dataset",
                          "method '%s' needs its rows in memory (send X and y); a fit over a "
                          "data set streams them: %s",
                          m->name, names);
    }
    if (rc) {
        gp_fit_data_free(fd);
        return rc;
    }
    *out = fd;
    return GP_OK;
}

size_t gp_fit_data_rows(const gp_fit_data *fd)
{
    return fd->res.n;
}

size_t gp_fit_data_inputs(const gp_fit_data *fd)
{
    return fd->res.d;
}

int64_t gp_fit_data_id(const gp_fit_data *fd)
{
    return fd->res.id;
}

int gp_fit_data_open(gp_api *api, const gp_fit_data *fd, size_t first, size_t count,
                     const char *label, gp_dataset_rows **rows, gp_error *err)
{
    gp_dataset_ref ref = ref_of(fd, fd->res.id);
    int rc = gp_dataset_rows_open(api->store, &ref, first, count, label, rows, err);
    if (rc == GP_OK && gp_dataset_rows_get(*rows)->n_total != fd->res.n) {
        gp_dataset_rows_close(*rows);
        *rows = NULL;
        rc = gp_error_set(err, GP_EINTERNAL, "data.dataset", "data set '%s' changed under the fit",
                          fd->name);
    }
    return rc;
}

json_t *gp_fit_data_json(const gp_fit_data *fd)
{
    json_t *o = json_object(), *cols = json_array();
    if (o == NULL || cols == NULL) {
        json_decref(o);
        json_decref(cols);
        return NULL;
    }
    json_object_set_new(o, "name", json_string(fd->name));
    json_object_set_new(o, "id", json_integer(fd->res.id));
    json_object_set_new(o, "sha256", json_string(fd->res.sha256));
    json_object_set_new(o, "target", json_string(fd->target));
    for (size_t i = 0; i < fd->n_columns; i++)
        json_array_append_new(cols, json_string(fd->columns[i]));
    json_object_set_new(o, "columns", fd->columns ? cols : (json_decref(cols), json_null()));
    json_object_set_new(o, "rows", json_integer((json_int_t)fd->res.n));
    json_object_set_new(o, "dataset_rows", json_integer((json_int_t)fd->res.rows));
    if (fd->sample && fd->res.n < fd->res.rows) {
        json_t *s = json_object();
        json_object_set_new(s, "sample", json_integer((json_int_t)fd->sample));
        json_object_set_new(s, "seed", json_integer((json_int_t)fd->seed));
        json_object_set_new(o, "sample", s);
    }
    return o;
}
