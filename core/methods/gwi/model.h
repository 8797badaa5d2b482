/* The fitted "gwi" model: its posterior, predict and sample: what core/methods/gwi/model.c shares
 * with the other files of the method. */
#ifndef GP_METHODS_GWI_MODEL_H
#define GP_METHODS_GWI_MODEL_H

#include "core/methods/gwi/internal.h"

void gwi_free(void *p);

int gwi_build_post(const gp_gwi_setup *s, const double *theta, double jitter, double alpha,
                   gp_inducing_post *p, gp_error *err);

int gwi_predict(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                gp_error *err);

int gwi_sample(const gp_model *model, const gp_sample_request *req, double *samples,
               gp_error *err);

#endif
