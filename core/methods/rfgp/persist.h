/* rfgp: export and import of the model's state (persist.c). */
#ifndef GP_METHODS_RFGP_PERSIST_H
#define GP_METHODS_RFGP_PERSIST_H

#include "core/methods/rfgp/internal.h"

int rfgp_export(const gp_model *model, gp_state *st, gp_error *err);
int rfgp_import(gp_model *model, const gp_state *st, gp_error *err);

#endif
