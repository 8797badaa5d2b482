/* Fit of method "gwi": settings, the data split, inducing inputs, the prior, and the fitted model:
 * what core/methods/gwi/fit.c shares with the other files of the method. */
#ifndef GP_METHODS_GWI_FIT_H
#define GP_METHODS_GWI_FIT_H

#include "core/methods/gwi/internal.h"

int gwi_fit(const gp_method *m, const gp_fit_request *req, gp_model **out, gp_error *err);

/* One fit with the settings st (the factor a number), under serial BLAS. */
int gwi_fit_once(const gp_method *m, const gp_fit_request *req, const gwi_settings *st,
                 gp_model **out, gp_error *err);

#endif
