/* Export and import of a fitted "gwi" model (B7): what core/methods/gwi/persist.c shares with the
 * other files of the method. */
#ifndef GP_METHODS_GWI_PERSIST_H
#define GP_METHODS_GWI_PERSIST_H

#include "core/methods/gwi/internal.h"

int gwi_export(const gp_model *model, gp_state *st, gp_error *err);

int gwi_import(gp_model *model, const gp_state *st, gp_error *err);

#endif
