/* gpserve core: the registry of methods, the one place that names them all.
 *
 * Adding a method is its file in core/methods/ and one line in the list of
 * core/methods/registry.c; /v1/methods, the job progress, the OpenAPI method
 * section, the README's option tables and the contract test
 * (tests/unit/test_method_contract.c) all read the registry. */
#ifndef GP_METHODS_REGISTRY_H
#define GP_METHODS_REGISTRY_H

#include <stddef.h>

#include "core/model/model.h"

/* The method called name, NULL when there is none. */
const gp_method *gp_method_find(const char *name);
size_t gp_method_count(void);
/* Method i in registration order (NULL past the end). */
const gp_method *gp_method_at(size_t i);

#endif
