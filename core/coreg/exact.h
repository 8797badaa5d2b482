/* gpserve core: method exact with options.coregionalization
 * (docs/design/multioutput.md). core/methods/exact.c hands a fit whose
 * request gives the option, and every operation of a model so fitted, to
 * these functions; its impl then holds a gp_coreg_exact and nothing else.
 *
 * The fit maximises the LML of the observed entries (core/coreg/lml.h) by
 * L-BFGS, on the Kronecker path when the model is ICM and every output is
 * observed at every row (solver auto), else on the general path; the model
 * then caches the general path's M x M factor, so that predictions,
 * samples, export and observe are the same whichever path fitted it. */
#ifndef GP_COREG_EXACT_H
#define GP_COREG_EXACT_H

#include "core/model/method.h"

typedef struct gp_coreg_exact gp_coreg_exact;

/* The fit: *out a model whose impl the caller sets (exact's shell holding
 * *ce); model->coreg points into *ce. */
int gp_coreg_exact_fit(const gp_method *m, const gp_fit_request *req, gp_model **out,
                       gp_coreg_exact **ce, gp_error *err);
int gp_coreg_exact_predict(const gp_model *model, const gp_coreg_exact *ce,
                           const gp_predict_request *req, gp_prediction *out, gp_error *err);
/* samples: m x n_samples x p, joint draws across points and outputs. */
int gp_coreg_exact_sample(const gp_model *model, const gp_coreg_exact *ce,
                          const gp_sample_request *req, double *samples, gp_error *err);
int gp_coreg_exact_export(const gp_coreg_exact *ce, gp_state *st, gp_error *err);
/* 1 when st is a coregionalised exact model's state. */
int gp_coreg_exact_state(const gp_state *st);
/* Rebuild from st (the model's common fields filled) into *out, pointing
 * model->coreg at it. */
int gp_coreg_exact_import(gp_model *model, const gp_state *st, gp_coreg_exact **out,
                          gp_error *err);
/* Append k rows (Y may hold NaN), all or nothing: the factor of all rows
 * recomputed with the same hyperparameters. */
int gp_coreg_exact_observe(gp_model *model, gp_coreg_exact *ce, const double *X,
                           const double *Y, size_t k, gp_error *err);
void gp_coreg_exact_free(gp_coreg_exact *ce);

/* For tests and benchmarks: the LML and its gradient (d LML / dx, may be
 * NULL) of a fitted model's data at packed parameters x (gp_coreg_params'
 * coordinates, gp_coreg_exact_dim of them), on the path asked (1:
 * Kronecker); the model's own parameters are left as they were. */
size_t gp_coreg_exact_dim(const gp_coreg_exact *ce);
void gp_coreg_exact_pack(const gp_coreg_exact *ce, double *x);
/* Set the packed parameters x and recompute the factor (the model a fit
 * ending there would give). */
int gp_coreg_exact_set(gp_model *model, gp_coreg_exact *ce, const double *x, gp_error *err);
int gp_coreg_exact_eval(gp_coreg_exact *ce, const double *x, int kronecker, double *lml,
                        double *grad, gp_error *err);

#endif
