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

/* Adam on the hyperparameters (free kernel log-parameters, the noise, Z when
 * optimised, the mean's coefficients) with natural-gradient steps on q: the
 * step both minibatch loops take, in memory (svgp_fit_adam) and over rows
 * read in chunks (core/methods/svgp/rows.c). */
typedef struct svgp_adam_run {
    size_t h;          /* hyperparameter coordinates (0: only q moves) */
    gp_adam adam;      /* when h > 0 */
    gp_hyper_walk *hw; /* the request's priors, bounds and held parameters */
    double *x, *g;     /* h + 1: the coordinates and their gradient */
    size_t *coord;
} svgp_adam_run;

/* The run from the fit's current hyperparameters (projected into bounds). */
int svgp_adam_begin(svgp_fit *f, const svgp_settings *st, svgp_adam_run *run, gp_error *err);
void svgp_adam_end(svgp_adam_run *run);

/* One step from a minibatch's sensitivities, already weighted to the full
 * data: a natural-gradient step of st->natgrad_step on each latent's q from
 * f->w.D and f->w.agmu (skipped for a latent it would make improper), then,
 * when run->h > 0, a projected Adam step from f->gtheta, f->gz and f->gbeta
 * applied to the fit (kernel, noise, Z, beta). */
int svgp_adam_step(svgp_fit *f, svgp_adam_run *run, const svgp_settings *st, gp_error *err);

/* Epoch `epoch` of st->epochs on the scale of the iteration budget,
 * ceil(epoch budget / epochs): a job's progress never passes its budget. */
int svgp_epoch_progress(int epoch, const svgp_settings *st);

#endif
