/* Fit of method "hkd": working coordinates, inducing inputs, the hyperparameter search and the
 * final posterior: what core/methods/hkd/fit.c shares with the other files of the method. */
#ifndef GP_METHODS_HKD_FIT_H
#define GP_METHODS_HKD_FIT_H

#include "core/methods/hkd/internal.h"

int hkd_build_frame(const gp_model *model, const gp_symmetry *s, const double *Xs, size_t n,
                    gp_hkd_frame *f, gp_error *err);

int hkd_alloc_blocks(hkd_impl *im, gp_error *err);

int hkd_fit(const gp_method *m, const gp_fit_request *req, gp_model **out, gp_error *err);

#endif
