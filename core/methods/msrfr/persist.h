/* Export and import of a fitted "msrfr" model: what core/methods/msrfr/persist.c shares with the
 * other files of the method. */
#ifndef GP_METHODS_MSRFR_PERSIST_H
#define GP_METHODS_MSRFR_PERSIST_H

#include "core/methods/msrfr/internal.h"

int msrfr_export(const gp_model *model, gp_state *st, gp_error *err);

int msrfr_import(gp_model *model, const gp_state *st, gp_error *err);

#endif
