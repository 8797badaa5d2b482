/* gpserve core: coregionalised sgpr and svgp models (docs/design/multioutput.md):
 * the fit over the shared parameters of core/coreg/params.h, the inducing
 * inputs Z and (svgp) the joint whitened q(u), the bounds of
 * core/coreg/sparse.h, and the model's predict, sample, export and import.
 *
 * sgpr and svgp call these when the request gives options.coregionalization
 * (gp_fit_coregionalised) and dispatch on gp_coreg_sparse_impl_is for the
 * models they hold. */
#ifndef GP_COREG_SPARSE_MODEL_H
#define GP_COREG_SPARSE_MODEL_H

#include "core/model/method.h"

typedef enum gp_coreg_sparse_kind { GP_COREG_SPARSE_SGPR = 0, GP_COREG_SPARSE_SVGP } gp_coreg_sparse_kind;

/* The fit, options read through me (inducing, inducing_selection,
 * optimize_inducing, max_iterations, tolerance; svgp: optimizer, which must
 * be auto or lbfgs). */
int gp_coreg_sparse_fit(const gp_method *me, const gp_fit_request *req, gp_coreg_sparse_kind kind,
                        gp_model **out, gp_error *err);
/* 1 when a model's impl (sgpr's or svgp's) is this module's rather than a
 * gp_inducing_post: this impl begins with one whose Z is a marker. */
int gp_coreg_sparse_impl_is(const void *impl);
int gp_coreg_sparse_predict(const gp_model *model, const gp_predict_request *req,
                            gp_prediction *out, gp_error *err);
/* samples: m x n_samples x p, joint across points and outputs. */
int gp_coreg_sparse_sample(const gp_model *model, const gp_sample_request *req, double *samples,
                           gp_error *err);
int gp_coreg_sparse_export(const gp_model *model, gp_state *st, gp_error *err);
/* 1 when st holds a coregionalised sparse model. */
int gp_coreg_sparse_state_is(const gp_state *st);
int gp_coreg_sparse_import(gp_model *model, const gp_state *st, gp_error *err);
void gp_coreg_sparse_free(void *impl);

#endif
