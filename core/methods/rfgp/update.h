/* rfgp: rows into the posterior (rank-one Givens updates or a batch
 * re-factorisation), update.c. */
#ifndef GP_METHODS_RFGP_UPDATE_H
#define GP_METHODS_RFGP_UPDATE_H

#include "core/methods/rfgp/internal.h"

size_t rfgp_crossover(const rfgp_cfg *c);
void rfgp_working_targets(const rfgp_cfg *c, const fmap *m, const double *Y, size_t ldy,
                          size_t start, size_t k, double *Yw);
int rfgp_apply_rows(const rfgp_cfg *c, const gp_input_spec *in, const fmap *m, post *q,
                    double noise, double s0, const double *X, size_t ldx, const double *Y,
                    size_t ldy, size_t start, size_t k, long shift, double *jitter, gp_error *err);

#endif
