/* Training of method "gwi": the starting point (B3) and Adam over the mean parameters and L (B4):
 * what core/methods/gwi/train.c shares with the other files of the method. */
#ifndef GP_METHODS_GWI_TRAIN_H
#define GP_METHODS_GWI_TRAIN_H

#include "core/methods/gwi/internal.h"

void gwi_draw_prefix(gp_rng *rng, size_t *idx, size_t n, size_t k);

void gwi_trainer_free(trainer *T);

int gwi_trainer_init(trainer *T, gp_error *err);

int gwi_train(trainer *T, gp_error *err);

int gwi_temper(trainer *T, double *alpha, double *nll, gp_error *err);

#endif
