/* The gradient of a model's posterior with respect to the input point
 * (predict_grad.c); core/model/model.h includes this header, so every user
 * of models sees it. What an optimiser of an acquisition function over x
 * needs (core/bo): the latent posterior at one point and its gradients, from
 * the method's predict_grad op (core/model/method.h) and the chain of the
 * model's standardisation and mean function here. */
#ifndef GP_MODEL_PREDICT_GRAD_H
#define GP_MODEL_PREDICT_GRAD_H

#include "core/base/error.h"

typedef struct gp_method gp_method;
typedef struct gp_model gp_model;

/* 1 when the method's models answer gp_model_predict_grad (an op predict_grad). */
int gp_method_can_predict_grad(const gp_method *m);
/* The latent posterior at one point x (input_dim values, the caller's units)
 * of a single-output Gaussian model: mean and variance of f(x) in the
 * caller's units of y (noise excluded, the mean function included), and
 * their gradients with respect to x (input_dim each, caller's units of x):
 * dmean[j] = d mean / d x[j], dvar[j] = d var / d x[j]. dmean/dvar may be
 * NULL (values only). GP_EUNSUPPORTED for a method without the op or a
 * model of several outputs; GP_EDATA naming "x[j]" for a non-finite point or
 * one beyond GP_WORKING_LIMIT. Thread-safe on a const model.
 *
 * With x_w = (x - x_mean) / x_scale the working point and f_w, v_w the
 * method's latent mean and variance there:
 *   mean = y_mean + y_scale (f_w + h(x_w)^T beta),  var = y_scale^2 v_w,
 *   dmean[j] = y_scale (df_w[j] + dh[j]^T beta) / x_scale[j],
 *   dvar[j] = y_scale^2 dv_w[j] / x_scale[j].
 * mean and var are gp_model_predict's latent mean and variance at x (to
 * rounding: the sums are ordered differently). A latent variance that
 * rounding makes negative is 0, as gp_model_predict clamps it, with a zero
 * gradient. */
int gp_model_predict_grad(const gp_model *model, const double *x, double *mean, double *var,
                          double *dmean, double *dvar, gp_error *err);

#endif
