/* Fit of method "ssgp": L-BFGS over the free kernel parameters, the noise and the frequencies:
 * what core/methods/ssgp/fit.c shares with the other files of the method. */
#ifndef GP_METHODS_SSGP_FIT_H
#define GP_METHODS_SSGP_FIT_H

#include "core/methods/ssgp/internal.h"

int ssgp_fit(const gp_method *m, const gp_fit_request *req, gp_model **out, gp_error *err);

#endif
