/* A method's descriptor and its options (core/model/descriptor.h): the
 * options' validation and the facts read from the descriptor. Below the
 * model (model.c) and the methods' helpers (method.c), which both call it. */
#include "core/model/descriptor.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "core/model/method.h"
#include "core/model/model.h"

/* ---- options ---- */

const gp_option_spec *gp_method_option_spec(const gp_method *m, const char *name)
{
    for (size_t i = 0; i < m->n_options; i++)
        if (strcmp(m->options[i].name, name) == 0)
            return &m->options[i];
    return NULL;
}

static int choice_listed(const char *choices, const char *value)
{
    size_t len = strlen(value);
    const char *p = choices;
    while (p && *p) {
        const char *bar = strchr(p, '|');
        size_t n = bar ? (size_t)(bar - p) : strlen(p);
        if (n == len && strncmp(p, value, n) == 0)
            return 1;
        p = bar ? bar + 1 : NULL;
    }
    return 0;
}

/* An OBJECT option's check by its method (d = 0: before the data is known). */
static int check_object(const gp_method *m, const gp_option_spec *s, const gp_value *v, size_t d,
                        const char *field, gp_error *err)
{
    if (m->ops == NULL || m->ops->check_option == NULL)
        return gp_error_set(err, GP_EINTERNAL, field, "method '%s' cannot check option '%s'",
                            m->name, s->name);
    return m->ops->check_option(s->name, v, d, field, err);
}

static int validate_one(const gp_method *m, const gp_option_spec *s, const gp_option_value *v,
                        gp_error *err)
{
    char field[GP_ERROR_FIELD_LEN];
    snprintf(field, sizeof field, "options.%s", s->name);
    switch (s->type) {
    case GP_OPTION_OBJECT:
        if (v->object == NULL || v->object->type != GP_VALUE_OBJECT)
            return gp_error_set(err, GP_EINVAL, field, "option '%s' must be an object", s->name);
        return check_object(m, s, v->object, 0, field, err);
    case GP_OPTION_ENUM:
        if (v->string == NULL || !choice_listed(s->choices, v->string))
            return gp_error_set(err, GP_EINVAL, field, "option '%s' must be one of %s", s->name,
                                s->choices);
        return GP_OK;
    case GP_OPTION_BOOL:
        if (v->number != 0.0 && v->number != 1.0)
            return gp_error_set(err, GP_EINVAL, field, "option '%s' must be true or false",
                                s->name);
        return GP_OK;
    case GP_OPTION_INT:
        if (!isfinite(v->number) || v->number != floor(v->number))
            return gp_error_set(err, GP_EINVAL, field, "option '%s' must be an integer", s->name);
        break;
    case GP_OPTION_NUMBER:
        if (v->string != NULL) {
            if (s->choices == NULL || !choice_listed(s->choices, v->string))
                return gp_error_set(err, GP_EINVAL, field,
                                    "option '%s' must be a number%s%s", s->name,
                                    s->choices ? " or one of " : "",
                                    s->choices ? s->choices : "");
            return GP_OK;
        }
        if (!isfinite(v->number))
            return gp_error_set(err, GP_EINVAL, field, "option '%s' must be a finite number",
                                s->name);
        break;
    }
    if (v->number < s->min || v->number > s->max)
        return gp_error_set(err, GP_EINVAL, field, "option '%s' must be in [%.17g, %.17g]",
                            s->name, s->min, s->max);
    return GP_OK;
}

int gp_options_validate(const gp_method *m, const gp_option_value *opts, size_t n, gp_error *err)
{
    for (size_t i = 0; i < n; i++) {
        const gp_option_spec *s = gp_method_option_spec(m, opts[i].name);
        if (s == NULL) {
            char field[GP_ERROR_FIELD_LEN];
            snprintf(field, sizeof field, "options.%s", opts[i].name);
            return gp_error_set(err, GP_EINVAL, field, "method '%s' has no option '%s'", m->name,
                                opts[i].name);
        }
        int rc = validate_one(m, s, &opts[i], err);
        if (rc)
            return rc;
        for (size_t j = 0; j < i; j++)
            if (strcmp(opts[j].name, opts[i].name) == 0)
                return gp_error_set(err, GP_EINVAL, "options", "option '%s' given twice",
                                    opts[i].name);
    }
    return GP_OK;
}

/* ---- facts of a method ---- */

int gp_method_accepts_kernel_type(const gp_method *m, gp_kernel_type t)
{
    if (t == GP_KERNEL_SUM || t == GP_KERNEL_PRODUCT)
        return m->composite_kernels != 0;
    if (m->kernels == NULL)
        return t >= 0 && t < GP_KERNEL_TYPE_COUNT;
    for (size_t i = 0; i < m->n_kernels; i++)
        if (m->kernels[i] == t)
            return 1;
    return 0;
}

static double option_value_or_default(const gp_method *m, const gp_option_value *opts, size_t n,
                                      const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(opts[i].name, name) == 0)
            return opts[i].number;
    const gp_option_spec *s = gp_method_option_spec(m, name);
    return s ? s->default_number : NAN;
}

int gp_method_max_iterations(const gp_method *m, const gp_option_value *opts, size_t n)
{
    if (m->iterations_option == NULL)
        return 0;
    double it = option_value_or_default(m, opts, n, m->iterations_option);
    if (!isfinite(it) || it < 0)
        return 0;
    if (m->restarts_option) {
        double r = option_value_or_default(m, opts, n, m->restarts_option);
        if (isfinite(r) && r > 0)
            it *= r + 1.0;
    }
    return it < 2e9 ? (int)it : 2000000000;
}

int gp_method_accepts_likelihood(const gp_method *m, gp_likelihood l)
{
    if (m->likelihoods == NULL)
        return l == GP_LIK_GAUSSIAN;
    for (size_t i = 0; i < m->n_likelihoods; i++)
        if (m->likelihoods[i] == l)
            return 1;
    return 0;
}

int gp_method_is_mixture(const gp_method *m)
{
    return m->ops->components != NULL;
}

int gp_method_has_parts(const gp_method *m)
{
    return m->ops->parts != NULL;
}

const gp_info_spec *gp_method_info_spec(const gp_method *m, const char *key)
{
    for (size_t i = 0; i < m->n_info; i++)
        if (strcmp(m->info[i].key, key) == 0)
            return &m->info[i];
    return NULL;
}

int gp_options_check_data(const gp_method *m, const gp_option_value *opts, size_t n, size_t d,
                          gp_error *err)
{
    /* every OBJECT option of the method, given or not: a default can depend on d too */
    for (size_t k = 0; k < m->n_options; k++) {
        const gp_option_spec *s = &m->options[k];
        if (s->type != GP_OPTION_OBJECT)
            continue;
        const gp_value *v = NULL;
        for (size_t i = 0; i < n; i++)
            if (strcmp(opts[i].name, s->name) == 0)
                v = opts[i].object;
        char field[GP_ERROR_FIELD_LEN];
        snprintf(field, sizeof field, "options.%s", s->name);
        int rc = check_object(m, s, v, d, field, err);
        if (rc)
            return rc;
    }
    return GP_OK;
}

/* ---- online learning and inputs ---- */

int gp_method_can_observe(const gp_method *m)
{
    return m->ops->observe != NULL;
}

int gp_method_has_gate(const gp_method *m)
{
    return m->gate != 0;
}

int gp_method_batch_shares_work(const gp_method *m)
{
    return m->ops->batch_shares_work != 0;
}

int gp_method_input_spec(const gp_method *m, const gp_option_value *opts, size_t n, size_t d,
                         gp_input_spec *out, gp_error *err)
{
    gp_input_spec_points(out, d);
    const gp_option_spec *s = gp_method_option_spec(m, "input");
    if (s == NULL || s->type != GP_OPTION_OBJECT)
        return GP_OK;
    const gp_value *v = NULL;
    for (size_t i = 0; i < n; i++)
        if (strcmp(opts[i].name, "input") == 0)
            v = opts[i].object;
    gp_input_spec spec;
    int rc = gp_input_spec_parse(v, "options.input", &spec, err);
    if (rc)
        return rc;
    if (spec.kind != GP_INPUT_POINT && !(m->input_kinds & (1u << spec.kind)))
        return gp_error_set(err, GP_EUNSUPPORTED, "options.input.kind",
                            "method '%s' does not take %s inputs", m->name,
                            gp_input_kind_name(spec.kind));
    if (spec.kind == GP_INPUT_POINT) {
        if (spec.dim != 0 && d != 0 && spec.dim != d)
            return gp_error_set(err, GP_EDATA, "options.input.dim",
                                "options.input.dim is %zu but X has %zu columns", spec.dim, d);
        if (spec.dim == 0)
            spec.dim = d;
    }
    *out = spec;
    return GP_OK;
}

size_t gp_method_declared_outputs(const gp_method *m, const gp_option_value *opts, size_t n)
{
    if (gp_method_option_spec(m, "outputs") == NULL)
        return 1;
    double v = option_value_or_default(m, opts, n, "outputs");
    return isfinite(v) && v >= 1 ? (size_t)v : 1;
}
