/* gpserve core: a study's search space and its encoding into the unit cube.
 *
 * The suggestion engine (core/bo/suggest.h) and the models it uses work on
 * u in [0,1]^D, never on the caller's values:
 *   double     one column, (v - lo) / (hi - lo), or on log v with log_scale;
 *   integer    one column on [lo - 0.5, hi + 0.5] (log: on the logs of
 *              those ends), so every integer owns a slice of equal width
 *              (equal log width with log_scale) and decodes by rounding;
 *   categorical  one column per value (one-hot), decoded by the argmax
 *              (the first of equal ones).
 * Decoding accepts any u (the relaxed optimum of an acquisition) and clamps
 * into the bounds; gp_bo_snap maps u to the encoding of what it decodes to,
 * the point a trial of u really is. */
#ifndef GP_BO_SPACE_H
#define GP_BO_SPACE_H

#include <stddef.h>

#include "core/base/error.h"

typedef enum { GP_BO_DOUBLE = 0, GP_BO_INTEGER, GP_BO_CATEGORICAL } gp_bo_type;

typedef struct gp_bo_param {
    gp_bo_type type;
    double lo, hi;    /* DOUBLE: bounds (lo < hi; lo > 0 with log_scale); INTEGER: integer bounds lo < hi */
    int log_scale;    /* DOUBLE or INTEGER: encoded on log(value) */
    size_t n_values;  /* CATEGORICAL: number of values (>= 2) */
} gp_bo_param;

typedef struct gp_bo_space {
    size_t n_params;
    const gp_bo_param *params;
} gp_bo_space;

/* The largest encoded width a space may have (categorical values count one
 * column each): the Sobol table's dimension. */
#define GP_BO_MAX_DIM 256

/* D: 1 per double/integer, n_values per categorical. */
size_t gp_bo_space_dim(const gp_bo_space *s);
/* GP_EINVAL naming "parameters[i].bounds", "parameters[i].values",
 * "parameters[i].type" or "parameters" (none, or D > GP_BO_MAX_DIM). */
int gp_bo_space_check(const gp_bo_space *s, gp_error *err);
/* value[i]: the parameter's value (integer as a double, categorical as its
 * index 0..n-1) -> u (D). GP_EDATA naming "parameters[i]" for a value that
 * is not finite, outside the bounds, not an integer where one is needed. */
int gp_bo_encode(const gp_bo_space *s, const double *value, double *u, gp_error *err);
/* u (D, anywhere in [0,1]^D) -> values (integers rounded, categorical
 * argmax, clamped into bounds). A NaN coordinate decodes as 0.5. */
void gp_bo_decode(const gp_bo_space *s, const double *u, double *value);
/* u -> the encoding of its decoded value (what a trial of u really is);
 * u_snapped may be u. */
void gp_bo_snap(const gp_bo_space *s, const double *u, double *u_snapped);

#endif
