/* Fit of method "gwi": settings, the data split, inducing inputs, the prior, and the fitted model:
 * what core/methods/gwi/fit.c shares with the other files of the method. */
#ifndef GP_METHODS_GWI_FIT_H
#define GP_METHODS_GWI_FIT_H

#include "core/methods/gwi/internal.h"

void gwi_read_settings(const gp_method *me, const gp_fit_request *req, gwi_settings *st);

/* Combinations refused before any work, and the size guard of the largest
 * fit (worst_factor: with factor_auto, the grid's largest). */
int gwi_check_settings(const gp_fit_request *req, const gwi_settings *st, double worst_factor,
                       gp_error *err);

/* One fit with the settings st (the factor a number), under serial BLAS. */
int gwi_fit_once(const gp_method *m, const gp_fit_request *req, const gwi_settings *st,
                 gp_model **out, gp_error *err);

#endif
