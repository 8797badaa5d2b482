/* Export and import of a coregionalised exact model (core/coreg/exact.h). */
#ifndef GP_COREG_EXACT_PERSIST_H
#define GP_COREG_EXACT_PERSIST_H

#include "core/coreg/exact.h"

int gp_coreg_exact_export(const gp_coreg_exact *ce, gp_state *st, gp_error *err);
/* 1 when st is a coregionalised exact model's state. */
int gp_coreg_exact_state(const gp_state *st);
/* Rebuild from st (the model's common fields filled) into *out, pointing
 * model->coreg at it. */
int gp_coreg_exact_import(gp_model *model, const gp_state *st, gp_coreg_exact **out,
                          gp_error *err);

#endif
