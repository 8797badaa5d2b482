/* pls: hyperparameters by the exact marginal likelihood on subsets (§5.2 A1). */
#ifndef GP_METHODS_PLS_HYPER_H
#define GP_METHODS_PLS_HYPER_H

#include "core/methods/pls/internal.h"

/* A1 (§5.2): R subset fits of the regression target t, log-parameters
 * averaged into model->kernel; *s2 gets the averaged noise. */
int pls_fit_hyper(hyp_run *run, gp_model *model, const double *Xt, const double *t,
                  gp_noise_param *np, double *s2, gp_error *err);

/* [D] A1 by the labels' likelihood (bernoulli, poisson; option hyper):
 * R subset fits of the Laplace marginal likelihood of the labels y under
 * the model's likelihood with latent prior GP(off, k) (off: n values of
 * the held mean, NULL: zero), log-parameters averaged into model->kernel. */
int pls_fit_hyper_laplace(hyp_run *run, gp_model *model, const double *Xt, const double *y,
                          const double *off, gp_error *err);

#endif
