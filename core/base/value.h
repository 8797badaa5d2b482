/* gpserve core: a structured option value (a JSON-shaped tree) that core can
 * read without a JSON library. api/ builds it from the request's JSON
 * (api/json.c, gp_json_to_value); the method that declares an
 * GP_OPTION_OBJECT option reads it and names the offending member in its
 * errors (e.g. "options.symmetry.generators[1].dims").
 *
 * Ownership: a tree is one allocation per node; gp_value_free frees the
 * node, its keys, strings and children. */
#ifndef GP_BASE_VALUE_H
#define GP_BASE_VALUE_H

#include <stddef.h>

typedef enum gp_value_type {
    GP_VALUE_NULL = 0,
    GP_VALUE_BOOL,
    GP_VALUE_NUMBER,
    GP_VALUE_STRING,
    GP_VALUE_ARRAY,
    GP_VALUE_OBJECT
} gp_value_type;

typedef struct gp_value {
    gp_value_type type;
    double number;   /* NUMBER; BOOL as 0/1 */
    char *string;    /* STRING (owned) */
    size_t n;        /* ARRAY, OBJECT: number of items */
    char **keys;     /* OBJECT: n owned keys */
    struct gp_value *items; /* ARRAY, OBJECT: n owned items */
} gp_value;

/* Free the contents of v (not v itself) and zero it. */
void gp_value_clear(gp_value *v);
/* Free a heap-allocated tree (NULL is fine). */
void gp_value_free(gp_value *v);
/* Deep copy of src into *out (zeroed on failure); GP_OK or GP_ENOMEM. */
int gp_value_copy(gp_value *out, const gp_value *src);
/* The member `key` of an OBJECT, NULL when absent or v is not an object. */
const gp_value *gp_value_get(const gp_value *v, const char *key);
/* The type's name as JSON calls it ("object", "array", "number", ...). */
const char *gp_value_type_name(gp_value_type t);

#endif
