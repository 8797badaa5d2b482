/* gpserve core: sparse-spectrum GP regression (method "ssgp").
 *
 * GP regression on R random Fourier frequencies of the kernel's spectral
 * density (core/features/sample.h), each giving a cos and a sin feature, so the model
 * is a Bayesian linear model on 2R features with the kernel's variance as the
 * weights' prior variance. Kernels: one leaf of type rbf, matern12, matern32 or
 * matern52 (ARD or shared lengthscale, active_dims honoured).
 *
 * Options (GET /v1/methods lists them):
 *   features           R, the number of frequencies (default 100)
 *   frequencies        mc | qmc | orf | stein | auto (default auto: chosen from
 *                      the spread of the training inputs in lengthscale units,
 *                      gp_freq_sampler_auto; the choice is reported in the
 *                      model's info as method_info.frequencies)
 *   stein_iterations   SVGD iterations of the stein sampler (default 2000)
 *   stein_step         its Adam learning rate (default 0.1)
 *   bandwidth          total | per_dim: the SVGD median bandwidth rule
 *                      (default total; docs/methods/stein-random-features.md §2.2a)
 *   learn_frequencies  false (default): the frequencies are a fixed
 *                      approximation of the chosen kernel and only the
 *                      lengthscales, variance and noise are learned; true: the
 *                      frequencies are hyperparameters too (the original SSGP)
 *   max_iterations, tolerance   L-BFGS limits, as for exact
 *
 * Fit: L-BFGS on the correct low-rank LML (docs/methods/stein-random-features.md §1.3) with analytic
 * gradients, O(N R d + N R^2 + R^3) per evaluation, no N x N matrix. Learned
 * noise is floored at 1e-8 var(y) as in exact. The fit caches the Cholesky
 * factor L of A = Phi^T Phi + s I (2R x 2R) and alpha = A^{-1} Phi^T y.
 *
 * Predict: mean phi*^T alpha; latent variance s ||L^{-1} phi*||^2; observation
 * variance adds s. O(R d + R^2) per point. Sample: exact joint draws of the
 * weight posterior N(alpha, s A^{-1}) evaluated at the points.
 *
 * Online (gp_model_observe): new rows add their features' outer products to
 * A (k Givens rank-one updates of L, or a re-factorisation of L L^T plus
 * them for batches of 2R / 4 rows and more) and their terms to Phi^T y, with
 * the fit's frequencies, hyperparameters, standardisation and jitter: the
 * model a fit of all rows with those held (and the same seed) gives. O(k R
 * (d + R)) per batch of k rows, plus O(R^3) when it re-factorises, whatever N.
 *
 * Over rows read in chunks (gp_fit_request.rows, descriptor flag
 * streams_rows; docs/design/scale-out.md, "Streamed and sharded fits"): the
 * LML of core/features/rff_rows.h, two passes and two reductions per
 * evaluation (R(2R+1) + 2R + 1 doubles, then 2 + R d), memory O(chunk R +
 * R^2) whatever N; auto's spread from the columns' variances summed over
 * the rows (core/methods/ssgp/rows.h), Phi^T y and y^T y for observe from
 * the last evaluation. A mean function is refused over rows (422);
 * streamed_rows, chunk_rows and ranks are reported.
 *
 * Exported arrays: omega (R x d_active), chol_packed (the factor, packed lower),
 * alpha (2R), sampler (scalar: gp_freq_sampler of the frequencies), phi_y
 * (Phi^T y, 2R) and y_sq (y^T y, working units: the LML after observe). A
 * state without the last two (written before observe existed) imports with
 * Phi^T y = A alpha and y^T y solved from the stored objective. */
#ifndef GP_SSGP_H
#define GP_SSGP_H

#include "core/model/model.h"

extern const gp_method gp_method_ssgp;

#endif
