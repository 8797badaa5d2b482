/* Fit requests: a method's "options" object, each option parsed by the type
 * its spec gives, then checked by the method (gp_options_validate). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

void gp_api_free_options(gp_option_value *opts, size_t n)
{
    for (size_t i = 0; opts && i < n; i++) {
        free((char *)opts[i].string);
        gp_value_free((gp_value *)opts[i].object);
    }
    free(opts);
}

/* One option's value by its spec's type (o->name set by the caller). */
static int parse_option(const gp_option_spec *s, json_t *val, const char *field,
                        gp_option_value *o, gp_error *err)
{
    switch (s->type) {
    case GP_OPTION_INT:
        if (!json_is_number(val) || !isfinite(json_number_value(val)) ||
            json_number_value(val) != floor(json_number_value(val)))
            return gp_error_set(err, GP_EINVAL, field, "%s must be an integer", field);
        o->number = json_number_value(val);
        return GP_OK;
    case GP_OPTION_NUMBER:
        if (json_is_string(val) && s->choices) { /* a keyword such as "auto" */
            o->number = NAN;
            if ((o->string = strdup(json_string_value(val))) == NULL)
                return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
            return GP_OK;
        }
        if (!json_is_number(val))
            return gp_error_set(err, GP_EINVAL, field, "%s must be a number%s%s", field,
                                s->choices ? " or one of " : "", s->choices ? s->choices : "");
        o->number = json_number_value(val);
        return GP_OK;
    case GP_OPTION_BOOL:
        if (!json_is_boolean(val))
            return gp_error_set(err, GP_EINVAL, field, "%s must be true or false", field);
        o->number = json_is_true(val) ? 1.0 : 0.0;
        return GP_OK;
    case GP_OPTION_ENUM:
        if (!json_is_string(val))
            return gp_error_set(err, GP_EINVAL, field, "%s must be one of %s", field,
                                s->choices ? s->choices : "");
        if ((o->string = strdup(json_string_value(val))) == NULL)
            return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        return GP_OK;
    case GP_OPTION_OBJECT: {
        /* a JSON object, converted for core (bounded in depth and size); the
         * method's check_option runs in gp_options_validate */
        if (!json_is_object(val))
            return gp_error_set(err, GP_EINVAL, field, "%s must be a JSON object", field);
        gp_value *tree = NULL;
        int rc = gp_json_to_value(val, field, &tree, err);
        o->object = tree;
        return rc;
    }
    }
    return gp_error_set(err, GP_EINTERNAL, field, "option '%s' has an unknown type", s->name);
}

int gp_api_parse_options(const gp_method *m, json_t *v, gp_option_value **opts, size_t *n,
                         gp_error *err)
{
    *opts = NULL;
    *n = 0;
    if (!json_is_object(v))
        return gp_error_set(err, GP_EINVAL, "options", "options must be an object");
    size_t size = json_object_size(v);
    if (size == 0)
        return GP_OK;
    if ((*opts = calloc(size, sizeof **opts)) == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    const char *key;
    json_t *val;
    json_object_foreach(v, key, val) {
        char field[GP_ERROR_FIELD_LEN];
        snprintf(field, sizeof field, "options.%.48s", key);
        const gp_option_spec *s = gp_method_option_spec(m, key);
        if (s == NULL) {
            char names[256] = "";
            size_t pos = 0;
            for (size_t i = 0; i < m->n_options && pos < sizeof names; i++) {
                int w = snprintf(names + pos, sizeof names - pos, "%s%s", i ? ", " : "",
                                 m->options[i].name);
                if (w > 0)
                    pos += (size_t)w;
            }
            return gp_error_set(err, GP_EINVAL, field, "method '%s' has no option '%.48s' (it has: %s)",
                                m->name, key, names[0] ? names : "none");
        }
        gp_option_value *o = &(*opts)[*n];
        o->name = s->name;
        (*n)++; /* counted before parsing, so that what it allocated is freed on failure */
        int rc = parse_option(s, val, field, o, err);
        if (rc)
            return rc;
    }
    return gp_options_validate(m, *opts, *n, err);
}
