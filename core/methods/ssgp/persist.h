/* Export and import of a fitted "ssgp" model: what core/methods/ssgp/persist.c shares with the
 * other files of the method. */
#ifndef GP_METHODS_SSGP_PERSIST_H
#define GP_METHODS_SSGP_PERSIST_H

#include "core/methods/ssgp/internal.h"

int ssgp_export(const gp_model *model, gp_state *st, gp_error *err);

int ssgp_import(gp_model *model, const gp_state *st, gp_error *err);

#endif
