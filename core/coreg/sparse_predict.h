/* gpserve core: predict, sample, export and import of a coregionalised
 * sgpr or svgp model (docs/design/multioutput.md; the fit:
 * core/coreg/sparse_fit.h). Original units in and out: output j's values
 * are y_mean[j] + y_scale[j] v of the working v. */
#ifndef GP_COREG_SPARSE_PREDICT_H
#define GP_COREG_SPARSE_PREDICT_H

#include "core/model/method.h"

/* mean and variance m x p; with full_covariance each output's m x m block
 * (covariance) and, when not NULL, cross_covariance ((m p)^2, index i + m j). */
int gp_coreg_sparse_predict(const gp_model *model, const gp_predict_request *req,
                            gp_prediction *out, gp_error *err);
/* samples: m x n_samples x p, joint across points and outputs. */
int gp_coreg_sparse_sample(const gp_model *model, const gp_sample_request *req, double *samples,
                           gp_error *err);
/* Arrays: the parameters' "coreg_*" (core/coreg/params.h), "Z" (d x m),
 * "mean_white" (K x 1), "cov_white_packed" (K(K+1)/2 x 1), the scalar
 * "coreg_n_observed"; the Kuu factors are recomputed at import. */
int gp_coreg_sparse_export(const gp_model *model, gp_state *st, gp_error *err);
/* 1 when st holds a coregionalised model. */
int gp_coreg_sparse_state_is(const gp_state *st);
int gp_coreg_sparse_import(gp_model *model, const gp_state *st, gp_error *err);

/* The ops of an inducing-point method (sgpr, svgp) whose models may be
 * coregionalised: each goes to the functions above for a coregionalised
 * impl (gp_coreg_sparse_impl_is) or state, to core/inducing's otherwise. */
int gp_coreg_inducing_predict(const gp_model *model, const gp_predict_request *req,
                              gp_prediction *out, gp_error *err);
int gp_coreg_inducing_sample(const gp_model *model, const gp_sample_request *req,
                             double *samples, gp_error *err);
int gp_coreg_inducing_export(const gp_model *model, gp_state *st, gp_error *err);
int gp_coreg_inducing_import(gp_model *model, const gp_state *st, gp_error *err);
void gp_coreg_inducing_free(void *impl);

#endif
