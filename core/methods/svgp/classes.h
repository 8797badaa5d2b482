/* Method "svgp" with the softmax likelihood: the fitted posterior of C latent
 * GPs that share the kernel and Z (docs/design/numerics.md "Softmax").
 *
 * The model's impl is a gp_inducing_post whose mt and C hold every class:
 * mt is m x C (class c at c m) and C is m x m x C (class c at c m m), and
 * its latents count is C: the inducing posterior predicts every class at once
 * (one kernel row and one triangular solve a point) and its free releases
 * them; Z, L and the jitter are shared. A class's view (for draws) is that
 * posterior with mt and C moved to its block. Predictions are per-point
 * arithmetic: batch-invariant. */
#ifndef GP_METHODS_SVGP_CLASSES_H
#define GP_METHODS_SVGP_CLASSES_H

#include "core/methods/svgp/internal.h"

/* Grow p's mt and C (allocated for one latent) to C latents, contents unset. */
int svgp_classes_widen(gp_inducing_post *p, size_t C, gp_error *err);

/* Draws of the C latents, m x n_samples x C; class c's from its own stream of
 * req->seed (class 0's is the seed's own), so the classes' draws are
 * independent as their posteriors are. */
int svgp_classes_sample(const gp_model *model, const gp_sample_request *req, double *samples,
                        gp_error *err);

/* The shared posterior under its usual names (class 0's mean and covariance
 * there), and every class in "class_mean_white" (m x C) and
 * "class_cov_white_packed" (m (m + 1) / 2 x C). */
int svgp_classes_export(const gp_model *model, gp_state *st, gp_error *err);
int svgp_classes_import(gp_model *model, const gp_state *st, gp_error *err);

#endif
