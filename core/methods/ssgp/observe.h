/* Observe of method "ssgp": new rows update the weight posterior: what core/methods/ssgp/observe.c
 * shares with the other files of the method. */
#ifndef GP_METHODS_SSGP_OBSERVE_H
#define GP_METHODS_SSGP_OBSERVE_H

#include "core/methods/ssgp/internal.h"

int ssgp_cache_targets(const gp_model *model, ssgp_impl *im, const double *X,
                       const double *yw, size_t n, gp_error *err);

int ssgp_observe(gp_model *model, const double *X, const double *Y, size_t k,
                 gp_error *err);

#endif
