/* pls: export and import (§5.2 A6). */
#ifndef GP_METHODS_PLS_PERSIST_H
#define GP_METHODS_PLS_PERSIST_H

#include "core/methods/pls/internal.h"

int pls_export(const gp_model *model, gp_state *st, gp_error *err);
int pls_import(gp_model *model, const gp_state *st, gp_error *err);

#endif
