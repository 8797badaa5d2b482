/* A study's space (docs/design/api.md, "Studies"): its encoded width, as
 * core/bo/space takes it, its metrics and models' names, and a trial's
 * parameters as values and back. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/study.h"

size_t gp_study_dim(const gp_study_config *c)
{
    size_t D = 0;
    for (size_t i = 0; i < c->n_params; i++)
        D += c->params[i].type == GP_STUDY_CATEGORICAL ? c->params[i].n_values : 1;
    return D;
}

void gp_study_space_of(const gp_study_config *c, gp_study_space *out)
{
    memset(out, 0, sizeof *out);
    for (size_t i = 0; i < c->n_params && i < GP_STUDY_MAX_PARAMS; i++) {
        const gp_study_param *p = &c->params[i];
        out->params[i] = (gp_bo_param){.type = (gp_bo_type)p->type, .lo = p->lo, .hi = p->hi,
                                       .log_scale = p->log_scale, .n_values = p->n_values};
    }
    out->space.n_params = c->n_params;
    out->space.params = out->params;
}

size_t gp_study_n_metrics(const gp_study_config *c)
{
    return 1 + c->n_constraints;
}

const char *gp_study_metric_name(const gp_study_config *c, size_t i)
{
    return i == 0 ? c->objective : c->constraints[i - 1].name;
}

void gp_study_model_name(const char *study, int constraint, char *out)
{
    if (constraint < 0)
        snprintf(out, GP_NAME_MAX + 1, GP_STUDY_MODEL_PREFIX "%.54s", study);
    else
        snprintf(out, GP_NAME_MAX + 1, GP_STUDY_MODEL_PREFIX "%.54s.c%u", study,
                 (unsigned)constraint & 7u); /* < GP_STUDY_MAX_CONSTRAINTS */
}

/* ---- a trial's values ---- */

static int value_of(const gp_study_param *p, json_t *v, const char *field, double *out,
                    gp_error *err)
{
    if (p->type == GP_STUDY_CATEGORICAL) {
        const char *s = json_string_value(v);
        for (size_t j = 0; s && j < p->n_values; j++)
            if (strcmp(s, p->values[j]) == 0) {
                *out = (double)j;
                return GP_OK;
            }
        return gp_error_set(err, GP_EINVAL, field, "%s must be one of the parameter's values",
                            field);
    }
    double x = json_is_number(v) ? json_number_value(v) : NAN;
    if (!isfinite(x) || x < p->lo || x > p->hi)
        return gp_error_set(err, GP_EINVAL, field, "%s must be a number in [%g, %g]", field,
                            p->lo, p->hi);
    if (p->type == GP_STUDY_INTEGER && x != floor(x))
        return gp_error_set(err, GP_EINVAL, field, "%s must be an integer", field);
    *out = x;
    return GP_OK;
}

int gp_study_values_from_json(const gp_study_config *c, json_t *obj, const char *prefix,
                              double *value, gp_error *err)
{
    if (!json_is_object(obj))
        return gp_error_set(err, GP_EINVAL, prefix, "%s must be an object of the parameters",
                            prefix);
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        size_t i = 0;
        while (i < c->n_params && strcmp(c->params[i].name, key) != 0)
            i++;
        char f[GP_STUDY_FIELD_BUF];
        snprintf(f, sizeof f, "%s.%.*s", prefix, GP_STUDY_METRIC_MAX, key);
        if (i == c->n_params)
            return gp_error_set(err, GP_EINVAL, f, "%s is not a parameter of the study", f);
    }
    for (size_t i = 0; i < c->n_params; i++) {
        char f[GP_STUDY_FIELD_BUF];
        snprintf(f, sizeof f, "%s.%s", prefix, c->params[i].name);
        json_t *x = json_object_get(obj, c->params[i].name);
        if (x == NULL)
            return gp_error_set(err, GP_EINVAL, f, "%s is missing", f);
        int rc = value_of(&c->params[i], x, f, &value[i], err);
        if (rc)
            return rc;
    }
    return GP_OK;
}

json_t *gp_study_values_json(const gp_study_config *c, const double *value)
{
    json_t *o = json_object();
    for (size_t i = 0; o && i < c->n_params; i++) {
        const gp_study_param *p = &c->params[i];
        json_t *v;
        if (p->type == GP_STUDY_CATEGORICAL) {
            size_t j = value[i] >= 0.0 ? (size_t)value[i] : 0;
            v = json_string(p->values[j < p->n_values ? j : p->n_values - 1]);
        } else if (p->type == GP_STUDY_INTEGER) {
            v = json_integer((json_int_t)value[i]);
        } else {
            v = json_real(value[i]);
        }
        if (v == NULL || json_object_set_new(o, p->name, v) != 0) {
            json_decref(o);
            return NULL;
        }
    }
    return o;
}
