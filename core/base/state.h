/* gpserve core: a model's exported state, a list of named column-major arrays.
 *
 * This is what store/ persists (one row per array) and what import reads back:
 * it holds every number a method needs to predict bit-for-bit as it did when
 * exported. Scalars are 1 x 1 arrays. The state owns every array it holds. */
#ifndef GP_STATE_H
#define GP_STATE_H

#include <stddef.h>

#include "core/base/error.h"

#define GP_STATE_NAME_LEN 48

typedef struct gp_named_array {
    char name[GP_STATE_NAME_LEN];
    size_t rows;
    size_t cols;
    double *data; /* owned by the state */
} gp_named_array;

typedef struct gp_state {
    gp_named_array *arrays; /* owned */
    size_t count;
    size_t capacity;
} gp_state;

void gp_state_init(gp_state *st);
void gp_state_free(gp_state *st);
/* Copy rows*cols doubles under name (names are unique: GP_EINVAL if taken). */
int gp_state_put(gp_state *st, const char *name, size_t rows, size_t cols, const double *data,
                 gp_error *err);
/* Take ownership of data (malloc'ed) instead of copying; freed on failure. */
int gp_state_put_owned(gp_state *st, const char *name, size_t rows, size_t cols, double *data,
                       gp_error *err);
int gp_state_put_scalar(gp_state *st, const char *name, double value, gp_error *err);
/* NULL when absent. */
const gp_named_array *gp_state_find(const gp_state *st, const char *name);
/* The array `name` with exactly rows x cols (GP_EDATA naming it otherwise). */
int gp_state_get(const gp_state *st, const char *name, size_t rows, size_t cols,
                 const double **data, gp_error *err);
int gp_state_get_scalar(const gp_state *st, const char *name, double *value, gp_error *err);
/* GP_EDATA naming the first non-finite number of any array ("state.NAME[i]",
 * i the column-major index); GP_OK when every number is finite. A model's
 * exported state is all finite (the method contract test checks it), so one
 * that is not was poisoned before it was stored. */
int gp_state_check_finite(const gp_state *st, gp_error *err);

#endif
