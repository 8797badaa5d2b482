/* gpserve core: method exact with options.coregionalization
 * (docs/design/multioutput.md). core/methods/exact.c hands a fit whose
 * request gives the option, and every operation of a model so fitted, to
 * these functions; its impl then holds a gp_coreg_exact and nothing else.
 *
 * The fit maximises the LML of the observed entries (core/coreg/lml.h) by
 * L-BFGS, on the Kronecker path when the model is ICM and every output is
 * observed at every row (solver auto), else on the general path. A model
 * keeps its path's state: the general path's M x M factor, or the Kronecker
 * path's eigendecompositions (no M x M matrix); predictions and samples are
 * the same per-point code on both (docs/design/multioutput.md, "In core").
 * Predictions and samples: core/coreg/exact_predict.h; export and import:
 * core/coreg/exact_persist.h. */
#ifndef GP_COREG_EXACT_H
#define GP_COREG_EXACT_H

#include "core/coreg/lml.h"
#include "core/coreg/params.h"
#include "core/model/method.h"

typedef struct gp_coreg_exact gp_coreg_exact;

/* The model's state, shared by core/coreg/exact.c (fit, observe),
 * exact_predict.c and exact_persist.c: the rows' standardised points Xt
 * (d x n), the observed entries (row order), their working targets yw (M),
 * and one path's state at the fitted parameters. */
struct gp_coreg_exact {
    gp_coreg_params cp;
    gp_coreg_entries e;
    size_t n, d, cap;
    double *Xt, *yw;
    double *L, *alpha; /* the general path's factor and K^-1 y (NULL on the Kronecker path) */
    int kronecker;
    /* The Kronecker path's state (kronecker set): the decomposition and what
     * a point's columns need, c (p x p, column j = V^T D^-1/2 B[:,j]), rt
     * (n x p, 1 / sqrt(s_r l_k + 1)) and AB (n x p, A B: the means' weights). */
    gp_coreg_kron kr;
    double *c, *rt, *AB;
};

/* c, rt and AB from ce->kr and the parameters. */
int gp_coreg_exact_kron_derived(gp_coreg_exact *ce, gp_error *err);
/* model->coreg pointed at ce's arrays. */
void gp_coreg_exact_point_view(gp_model *model, gp_coreg_exact *ce);

/* The fit: *out a model whose impl the caller sets (exact's shell holding
 * *ce); model->coreg points into *ce. */
int gp_coreg_exact_fit(const gp_method *m, const gp_fit_request *req, gp_model **out,
                       gp_coreg_exact **ce, gp_error *err);
/* Append k rows (Y may hold NaN), all or nothing: the state of all rows
 * recomputed with the same hyperparameters (the Kronecker path while every
 * output stays observed, else the general one). */
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
