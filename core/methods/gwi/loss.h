/* The W2 loss of method "gwi" (its entry points gp_gwi_loss, gp_gwi_latent, ... are
 * public, in core/methods/gwi/gwi.h): what core/methods/gwi/loss.c shares besides. */
#ifndef GP_METHODS_GWI_LOSS_H
#define GP_METHODS_GWI_LOSS_H

#include "core/methods/gwi/internal.h"

int gwi_alloc2(double **p, size_t n1, size_t n2, gp_error *err);

#endif
