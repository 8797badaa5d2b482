/* Method "gwi": its fit's entry, and inducing_factor "auto", the thesis's model selection over
 * M (B1, [T B.7]). */
#ifndef GP_METHODS_GWI_SELECT_H
#define GP_METHODS_GWI_SELECT_H

#include "core/methods/gwi/internal.h"

/* The method's fit: one fit, or with inducing_factor "auto" the grid's. */
int gwi_fit(const gp_method *m, const gp_fit_request *req, gp_model **out, gp_error *err);

/* Fit every factor of the grid ({0.5, 1, 1.5, 2} for mlp, {1, 2, 3, 4, 5}
 * for kernel_sum) with st's other settings and keep the fit of the lowest
 * validation NLL (ties: the smaller factor). st->factor_auto is set. */
int gwi_fit_auto_factor(const gp_method *m, const gp_fit_request *req, const gwi_settings *st,
                        gp_model **out, gp_error *err);

#endif
