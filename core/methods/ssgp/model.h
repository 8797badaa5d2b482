/* The fitted "ssgp" model: its state, predict and sample: what core/methods/ssgp/model.c shares
 * with the other files of the method. */
#ifndef GP_METHODS_SSGP_MODEL_H
#define GP_METHODS_SSGP_MODEL_H

#include "core/methods/ssgp/internal.h"

void ssgp_impl_free(void *p);

ssgp_impl *ssgp_impl_alloc(const gp_kernel *k, size_t R, gp_error *err);

void ssgp_impl_set_kernel(ssgp_impl *im, const gp_kernel *k);

void ssgp_test_features(const gp_model *model, const ssgp_impl *im, const double *X,
                        size_t ldx, size_t start, size_t b, double *Xw, double *Phi);

int ssgp_predict(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                 gp_error *err);

int ssgp_sample(const gp_model *model, const gp_sample_request *req, double *samples,
                gp_error *err);

#endif
