/* The fitted "msrfr" model: its state, the component moments, predict and sample: what
 * core/methods/msrfr/model.c shares with the other files of the method. */
#ifndef GP_METHODS_MSRFR_MODEL_H
#define GP_METHODS_MSRFR_MODEL_H

#include "core/methods/msrfr/internal.h"

void msrfr_impl_free(void *p);

msrfr_impl *msrfr_impl_alloc(const gp_kernel *k, size_t M, size_t R, gp_error *err);

void msrfr_impl_set_kernel(msrfr_impl *im, const gp_kernel *k);

void msrfr_component_moments(const msrfr_impl *im, double noise, const double *Xs, size_t b,
                             int include_noise, double *Phi, double *mu, double *var,
                             size_t ld, double *cov);

int msrfr_predict(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                  gp_error *err);

int msrfr_sample(const gp_model *model, const gp_sample_request *req, double *samples,
                 gp_error *err);

size_t msrfr_components(const gp_model *model);

#endif
