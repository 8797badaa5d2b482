/* The gradient of the bound of method "hkd" and the objective the hyperparameter search minimises:
 * what core/methods/hkd/gradient.c shares with the other files of the method. */
#ifndef GP_METHODS_HKD_GRADIENT_H
#define GP_METHODS_HKD_GRADIENT_H

#include "core/methods/hkd/internal.h"

int hkd_objective(void *ctx, const gp_kernel *k, double s2, const double *Z, size_t m,
                  double *f, double *grad, double *gz);

#endif
