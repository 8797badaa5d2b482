/* Export and import of a fitted "hkd" model: what core/methods/hkd/persist.c shares with the other
 * files of the method. */
#ifndef GP_METHODS_HKD_PERSIST_H
#define GP_METHODS_HKD_PERSIST_H

#include "core/methods/hkd/internal.h"

int hkd_export(const gp_model *model, gp_state *st, gp_error *err);

int hkd_import(gp_model *model, const gp_state *st, gp_error *err);

#endif
