/* A JSON-shaped option value: see core/base/value.h. */
#include "core/base/value.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/error.h"

void gp_value_clear(gp_value *v)
{
    if (v == NULL)
        return;
    for (size_t i = 0; v->items && i < v->n; i++)
        gp_value_clear(&v->items[i]);
    for (size_t i = 0; v->keys && i < v->n; i++)
        free(v->keys[i]);
    free(v->items);
    free(v->keys);
    free(v->string);
    memset(v, 0, sizeof *v);
}

void gp_value_free(gp_value *v)
{
    gp_value_clear(v);
    free(v);
}

static char *dup_text(const char *s)
{
    size_t len = strlen(s) + 1;
    char *out = malloc(len);
    if (out)
        memcpy(out, s, len);
    return out;
}

int gp_value_copy(gp_value *out, const gp_value *src)
{
    memset(out, 0, sizeof *out);
    out->type = src->type;
    out->number = src->number;
    if (src->string && (out->string = dup_text(src->string)) == NULL)
        return GP_ENOMEM;
    if (src->n == 0)
        return GP_OK;
    out->items = calloc(src->n, sizeof *out->items);
    if (src->keys)
        out->keys = calloc(src->n, sizeof *out->keys);
    if (out->items == NULL || (src->keys && out->keys == NULL)) {
        gp_value_clear(out);
        return GP_ENOMEM;
    }
    out->n = src->n;
    for (size_t i = 0; i < src->n; i++) {
        int bad = gp_value_copy(&out->items[i], &src->items[i]) != GP_OK;
        if (!bad && src->keys && (out->keys[i] = dup_text(src->keys[i])) == NULL)
            bad = 1;
        if (bad) {
            gp_value_clear(out);
            return GP_ENOMEM;
        }
    }
    return GP_OK;
}

const gp_value *gp_value_get(const gp_value *v, const char *key)
{
    if (v == NULL || v->type != GP_VALUE_OBJECT)
        return NULL;
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->keys[i], key) == 0)
            return &v->items[i];
    return NULL;
}

const char *gp_value_type_name(gp_value_type t)
{
    static const char *const names[] = {"null", "boolean", "number", "string", "array", "object"};
    return (unsigned)t < sizeof names / sizeof names[0] ? names[t] : "unknown";
}
