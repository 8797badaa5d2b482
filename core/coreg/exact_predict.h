/* Predictions and joint samples of a coregionalised exact model
 * (core/coreg/exact.h): per-point columns (the general path's solve or the
 * Kronecker path's eigenvectors), so a point's answer does not depend on the
 * other points of a call. */
#ifndef GP_COREG_EXACT_PREDICT_H
#define GP_COREG_EXACT_PREDICT_H

#include "core/coreg/exact.h"

int gp_coreg_exact_predict(const gp_model *model, const gp_coreg_exact *ce,
                           const gp_predict_request *req, gp_prediction *out, gp_error *err);
/* samples: m x n_samples x p, joint draws across points and outputs. */
int gp_coreg_exact_sample(const gp_model *model, const gp_coreg_exact *ce,
                          const gp_sample_request *req, double *samples, gp_error *err);

#endif
