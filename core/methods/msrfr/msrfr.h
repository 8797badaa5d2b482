/* gpserve core: mixture Stein random feature regression (method "msrfr";
 * docs/methods/stein-random-features.md §4-5).
 *
 * A posterior over spectral measures held as M particles: each particle is a
 * whole R x d frequency matrix Omega_m, the empirical spectral measure
 * (1/R) sum_r delta(omega_mr), and defines its own sparse-spectrum GP (the
 * ssgp model of core/features/sample.h with those frequencies). The particles move
 * jointly by SVGD on
 *   log p(Omega_m | y) = c_lik log p(y | Omega_m, l, s) + log N(Omega_m; 0, tau^2 I)
 * which is exactly SVGD over the P = M R pooled frequencies, each carrying
 * the score of its own component (docs/methods/stein-random-features.md §4.2):
 *   phi = (gamma_t K G + alpha (diag(K 1) W - K W) / h) / M,
 * K the RBF kernel between pooled frequencies with the median bandwidth h,
 * gamma_t the cyclic annealing of the attraction, then the authors' Adam step
 * with decoupled weight decay 1e-4 (docs/methods/stein-random-features.md §2.3). Shared ARD lengthscales (and
 * the noise, when learned) follow Adam ascent on the mean component LML.
 * Prediction is the equally weighted mixture of the M components' Gaussians
 * (docs/methods/stein-random-features.md §4.5): moment-matched mean and variance, the mixture's own
 * quantiles, and the components on request.
 *
 * Options (GET /v1/methods lists them with their defaults):
 *   particles M, features R, iterations T, step (SVGD Adam rate),
 *   lengthscale_step (Adam rate of the lengthscales), noise_step (Adam rate
 *   of the log noise when learned: the lengthscale rates the paper tuned are
 *   as small as 0.0027, far too slow to move the noise from its start),
 *   repulsion alpha, anneal_power s, anneal_cycles c, prior_std tau,
 *   likelihood_weight "1/M" (authors' code) | "1" (paper),
 *   learn_lengthscales, lengthscale_init "median" (median squared pair
 *   difference, the authors' init) | "kernel" (the kernel's lengthscales),
 *   init "qmc" | "mc", bandwidth "per_dim" (default) | "total" | "none"
 *   (identity particle kernel: M independent SSGPs, an ablation),
 *   calibrate, calibration_fraction.
 * Noise: learned with the correct LML unless the request fixes it
 * (noise.fixed: the paper's setting). Seed: the fit request's seed.
 *
 * calibrate (beyond the paper, which is poorly calibrated: docs/methods/stein-random-features.md §2.2a):
 * the components' variances are too small for their errors, so the fit
 * holds out calibration_fraction of the rows (a seeded permutation), runs
 * the whole SVGD on the rest, finds the scale c of every component variance
 * (noise included) that minimises the held-out mean mixture NLPD (golden
 * section on log c in [-7, 7]), then refits on every row with the same seed
 * and predicts with variances times c. The final particles are exactly those
 * of the same fit without calibrate.
 *
 * Dynamics: with the paper's step sizes the particle trajectories are
 * chaotic: a rounding difference grows about 3e4-fold every 10 iterations
 * (measured against the numpy reference from a common start: 1.6e-10 after
 * 10 iterations, 6e-6 after 20, O(1) after 50), so a fit is a random draw
 * whose distribution, not whose digits, matches the reference; results are
 * still bit-identical for a given seed and any thread count.
 *
 * Kernels: one leaf of type rbf, matern12, matern32 or matern52 (ARD or
 * shared lengthscale, active_dims). The kernel's spectral density gives the
 * initial frequencies; the prior is N(0, prior_std^2) per entry whatever the
 * kernel (docs/methods/stein-random-features.md §4.1), and the kernel variance (1 on standardised targets)
 * stays fixed (there is no amplitude in the paper's model).
 *
 * Exported arrays: omega (M R x d: component m in rows m R .. m R + R - 1),
 * chol_packed (M columns, each a packed 2R x 2R factor), alpha (2R x M),
 * variance_scale (scalar: 1 unless calibrated), particles (scalar M). */
#ifndef GP_MSRFR_H
#define GP_MSRFR_H

#include "core/features/rff.h"
#include "core/model/model.h"
#include "core/optim/optim.h"
#include "core/optim/svgd.h"

extern const gp_method gp_method_msrfr;

/* The log posterior of one particle Omega = p->omega (R x d) as the fit
 * scores it (docs/methods/stein-random-features.md §4.4b):
 *   log_post = lik_weight * LML(Omega) + sum_rk log N(omega_rk; 0, prior_std^2)
 * with its gradient, the particle's score, in score (R x d). lml (may be
 * NULL) receives the LML itself; hyper (may be NULL; its omega member is
 * ignored) the LML's gradient with respect to the log lengthscales and the
 * log noise from the same evaluation. */
int gp_msrfr_log_posterior(const gp_rff_problem *p, gp_rff_work *w, double lik_weight,
                           double prior_std, double *log_post, double *score,
                           const gp_rff_grad *hyper, double *lml, gp_error *err);

/* The pooled SVGD direction of the M particles (docs/methods/stein-random-features.md §4.2): W and G are the
 * P x d (P = M R) pooled frequencies and scores, component m in rows
 * m R .. m R + R - 1;
 *   phi = (gamma K G + repulsion (diag(K 1) W - K W) / h) / M
 * with K the RBF kernel between pooled frequencies under the bandwidth rule
 * "per_dim" (median per dimension, self pairs included), "total" (one
 * median of total squared distances) or "none" (K = I). w: a workspace for
 * P particles in d dimensions (unused, may be NULL, for "none"); h (d
 * entries, may be NULL) receives the bandwidths used. */
void gp_msrfr_direction(const double *W, const double *G, size_t M, size_t R, size_t d,
                        const char *bandwidth, double gamma, double repulsion,
                        gp_svgd_work *w, double *phi, double *h);

#endif
