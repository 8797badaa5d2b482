/* Method "svgp": what an in-memory fit (core/methods/svgp/fit.c) and a fit
 * over rows read in chunks (core/methods/svgp/rows.c) share: a fit's buffers,
 * its settings, the start of its kernel and q, the fitted posterior and the
 * report. */
#ifndef GP_METHODS_SVGP_SETUP_H
#define GP_METHODS_SVGP_SETUP_H

#include "core/methods/svgp/internal.h"

/* Everything svgp_fit_alloc and the fit allocated (f's fields; f itself is
 * the caller's). */
void svgp_fit_free(svgp_fit *f);

/* Buffers for M inducing points, f->C latents and blocks of cap rows; the
 * free kernel parameters from f->hyper. */
int svgp_fit_alloc(svgp_fit *f, size_t M, size_t cap, gp_error *err);

/* Every latent's q = N(0, I) over the f->m inducing points chosen. */
void svgp_q_prior(svgp_fit *f);

/* The options of a fit (batch_size capped at N). */
void svgp_settings_read(const gp_fit_request *req, const gp_model *model, svgp_settings *st);

/* Multiplies every free lengthscale of k by the factor that brings the
 * median scaled squared distance among (up to 200 evenly spaced of) the n
 * points X (d x n, working units) to 1 when it is too large (the median
 * heuristic); returns the factor (1: unchanged). */
double svgp_rescue_lengthscales(gp_kernel *k, const gp_hyper_spec *hs, const double *X, size_t n,
                                size_t d);

/* The fitted posterior into im from f's Z and q, and f->w's chol(Kuu) and
 * jitter (left there by the last evaluation of the bound). */
int svgp_post_build(const svgp_fit *f, gp_inducing_post *im, gp_error *err);

/* The model's objective, noise and method_info from the bound's parts t. */
void svgp_report(gp_model *model, const svgp_fit *f, int lbfgs, const svgp_settings *st,
                 const gp_svgp_terms *t, const char *selection);

#endif
