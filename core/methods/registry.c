/* The method registry: see core/methods/registry.h. */
#include "core/methods/registry.h"

#include <string.h>

#include "core/methods/exact.h"
#include "core/methods/gwi/gwi.h"
#include "core/methods/hkd/hkd.h"
#include "core/methods/msrfr/msrfr.h"
#include "core/methods/pls/pls.h"
#include "core/methods/renyi/renyi.h"
#include "core/methods/rfgp/rfgp.h"
#include "core/methods/sgpr.h"
#include "core/methods/ssgp/ssgp.h"
#include "core/methods/svgp/svgp.h"

/* Registration order is the order of /v1/methods and of the docs. */
static const gp_method *const registry[] = {
    &gp_method_exact,
    &gp_method_ssgp,
    &gp_method_msrfr,
    &gp_method_sgpr,
    &gp_method_renyi,
    &gp_method_svgp,
    &gp_method_pls,
    &gp_method_hkd,
    &gp_method_rfgp,
    &gp_method_gwi,
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
