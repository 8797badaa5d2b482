/* The in-memory fit of method "svgp" (X and y held): what core/methods/svgp/fit.c shares
 * with the other files of the method. */
#ifndef GP_METHODS_SVGP_FIT_H
#define GP_METHODS_SVGP_FIT_H

#include "core/methods/svgp/internal.h"

int svgp_fit_op(const gp_method *m, const gp_fit_request *req, gp_model **out, gp_error *err);

#endif
