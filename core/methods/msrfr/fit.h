/* Fit of method "msrfr": settings, calibration of the predictive variance, and the fit entry: what
 * core/methods/msrfr/fit.c shares with the other files of the method. */
#ifndef GP_METHODS_MSRFR_FIT_H
#define GP_METHODS_MSRFR_FIT_H

#include "core/methods/msrfr/internal.h"

int msrfr_fit(const gp_method *m, const gp_fit_request *req, gp_model **out, gp_error *err);

#endif
