/* gpserve core: the gradient in x of the whitened inducing-point posterior
 * (core/inducing/inducing.h's gp_inducing_post: sgpr, renyi), the op behind
 * gp_model_predict_grad (core/model/predict_grad.h) for those methods.
 *
 * With a = L^{-1} k(Z, x), prior = k(x, x) - a.a and post = a^T C a, a
 * prediction is mean = a.mt, var = scale (max(prior, 0) + max(post, 0));
 * with dK the kernel row's gradients in x,
 *   dmean = dK^T L^{-T} mt,
 *   dvar  = scale ([prior > 0] (dk** - 2 dK^T L^{-T} a) + [post > 0] 2 dK^T L^{-T} C a),
 * O(M d + M^2) per point, no M x d matrix (gp_kernel_cross_dx_contract). */
#ifndef GP_INDUCING_POST_GRAD_H
#define GP_INDUCING_POST_GRAD_H

#include "core/base/error.h"
#include "core/inducing/inducing.h"

/* The latent mean and variance (working units) of one latent of p at the
 * working point P (input_dim) and their gradients (dmean/dvar: input_dim
 * each, or NULL); the contract of gp_method_ops.predict_grad. */
int gp_inducing_predict_grad(const gp_model *model, const gp_inducing_post *p, const double *P,
                             double *mean, double *var, double *dmean, double *dvar,
                             gp_error *err);
/* gp_method_ops.predict_grad for a method whose impl begins with its
 * gp_inducing_post (renyi; sgpr through its coregionalisation check). */
int gp_inducing_method_predict_grad(const gp_model *model, const double *P, double *mean,
                                    double *var, double *dmean, double *dvar, gp_error *err);

#endif
