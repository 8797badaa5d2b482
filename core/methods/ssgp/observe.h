/* Observe of method "ssgp": new rows update the weight posterior: what core/methods/ssgp/observe.c
 * shares with the other files of the method. */
#ifndef GP_METHODS_SSGP_OBSERVE_H
#define GP_METHODS_SSGP_OBSERVE_H

#include "core/methods/ssgp/internal.h"

/* rw: the rows' known noise in working units (NULL: none). */
int ssgp_cache_targets(const gp_model *model, ssgp_impl *im, const double *X,
                       const double *yw, const double *rw, size_t n, gp_error *err);

int ssgp_observe(gp_model *model, const double *X, const double *Y, size_t k,
                 gp_error *err);

/* The same with the rows' known noise (caller's units; NULL for a model
 * fitted without, gp_model_observe_noise checks which). */
int ssgp_observe_noise(gp_model *model, const double *X, const double *Y, const double *noise,
                       size_t k, gp_error *err);

#endif
