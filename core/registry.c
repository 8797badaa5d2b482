/* The method registry: adding a method is one line here (and its file). */
#include <string.h>

#include "core/method.h"

extern const gp_method gp_method_exact;
extern const gp_method gp_method_ssgp;
extern const gp_method gp_method_msrfr;
extern const gp_method gp_method_sgpr;
extern const gp_method gp_method_renyi;

static const gp_method *const registry[] = {
    &gp_method_exact,
    &gp_method_ssgp,
    &gp_method_msrfr,
    &gp_method_sgpr,
    &gp_method_renyi,
};

size_t gp_method_count(void)
{
    return sizeof registry / sizeof registry[0];
}

const gp_method *gp_method_at(size_t i)
{
    return i < gp_method_count() ? registry[i] : NULL;
}

const gp_method *gp_method_find(const char *name)
{
    for (size_t i = 0; i < gp_method_count(); i++)
        if (strcmp(registry[i]->name, name) == 0)
            return registry[i];
    return NULL;
}
