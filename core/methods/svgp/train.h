/* Training of method "svgp": L-BFGS over the hyperparameters and q, or minibatch Adam with
 * natural-gradient steps on q: what core/methods/svgp/train.c shares with the other files of the
 * method. */
#ifndef GP_METHODS_SVGP_TRAIN_H
#define GP_METHODS_SVGP_TRAIN_H

#include "core/methods/svgp/internal.h"

svgp_eval svgp_fit_eval(const svgp_fit *f);

/* f->off = H beta after beta moved (zero mean: nothing). */
void svgp_mean_offsets(svgp_fit *f);

int svgp_refine_q(svgp_fit *f, int max_steps, double *elbo, gp_error *err);

int svgp_fit_lbfgs(svgp_fit *f, const gp_fit_request *req, const svgp_settings *st,
                   gp_diagnostics *diag, gp_error *err);

int svgp_fit_adam(svgp_fit *f, const gp_fit_request *req, const svgp_settings *st,
                  gp_diagnostics *diag, gp_error *err);

#endif
