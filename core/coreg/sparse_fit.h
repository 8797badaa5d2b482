/* gpserve core: the fit of a coregionalised sgpr or svgp model
 * (docs/design/multioutput.md): the shared parameters of
 * core/coreg/params.h, the inducing inputs Z and (svgp) the joint whitened
 * q(u), by the bounds of core/coreg/sparse.h. sgpr and svgp call it when the
 * request gives options.coregionalization (gp_fit_coregionalised); the model
 * it makes is answered by core/coreg/sparse_predict.h, its impl told from
 * the methods' own by gp_coreg_sparse_impl_is (core/coreg/sparse_impl.h). */
#ifndef GP_COREG_SPARSE_FIT_H
#define GP_COREG_SPARSE_FIT_H

#include "core/model/method.h"

typedef enum gp_coreg_sparse_kind {
    GP_COREG_SPARSE_SGPR = 0,
    GP_COREG_SPARSE_SVGP
} gp_coreg_sparse_kind;

/* Options read through me: inducing, inducing_selection, optimize_inducing,
 * max_iterations, tolerance; svgp's optimizer must be auto or lbfgs. */
int gp_coreg_sparse_fit(const gp_method *me, const gp_fit_request *req,
                        gp_coreg_sparse_kind kind, gp_model **out, gp_error *err);

#endif
