/* rfgp: width selection by the type-II marginal likelihood (ml.c); the LML
 * for tests is gp_rfgp_primal_lml (rfgp.h). */
#ifndef GP_METHODS_RFGP_ML_H
#define GP_METHODS_RFGP_ML_H

#include "core/methods/rfgp/internal.h"

int rfgp_select_ml(sel_ctx *s, gp_error *err);
int rfgp_selected_lml(sel_ctx *s, double *lml, gp_error *err);
double rfgp_lml_offset(const sel_ctx *s);

#endif
