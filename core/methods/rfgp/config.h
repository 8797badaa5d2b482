/* rfgp: the configuration read from a fit request, and method_info (config.c). */
#ifndef GP_METHODS_RFGP_CONFIG_H
#define GP_METHODS_RFGP_CONFIG_H

#include "core/methods/rfgp/internal.h"

/* The configuration of a fit of m (rfgp's descriptor: its options' defaults). */
int rfgp_read_cfg(const gp_method *m, const gp_fit_request *req, rfgp_cfg *c, gp_error *err);
void rfgp_set_info(gp_model *model);

#endif
