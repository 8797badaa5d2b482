/* gpserve core: random Fourier features on a kernel's spectral density.
 *
 * Shared by the feature methods (ssgp, and msrfr whose particles are whole
 * frequency matrices). Two parts: part 1 is this header (sample.c, and the
 * `auto` choice in core/methods/ssgp/auto.h, method ssgp); part 2 is core/features/rff.h.
 *
 * 1. Frequency samplers. R frequencies omega_r in R^d (an R x d column-major
 *    matrix, one frequency per row) for a spectral density of core/kernel/kernel_spectral.h
 *    (unit lengthscale: inputs are divided by their lengthscales first):
 *      mc     i.i.d. draws (gp_spectral_sample)
 *      qmc    scrambled Halton through the normal quantile; for Student-t one
 *             more Halton coordinate goes through the chi-square quantile, so
 *             omega = z sqrt(2 nu / u) stays one joint d-dimensional draw
 *      orf    orthogonal random features (Yu et al. 2016): blocks of d rows
 *             S Q^T, Q from the QR of a d x d Gaussian matrix, the row norms
 *             S drawn from the radial law of the density (chi(d) for the
 *             Gaussian, chi(d) sqrt(2 nu / u) for Student-t); the last block
 *             is truncated
 *      stein  Stein random features: start from qmc (or mc) and move the R
 *             frequencies by SVGD towards the density (its score only), with
 *             the Adam + weight decay + cyclic annealing step of the authors'
 *             code (docs/methods/stein-random-features.md §2.3, §3.1) and the median bandwidth rule of
 *             gp_svgd_options (total by default: docs/methods/stein-random-features.md §2.2a).
 *    Every draw is a function of the seed alone: same seed, same frequencies.
 *
 * 2. The sparse-spectrum GP of one frequency matrix (docs/methods/stein-random-features.md §1.2-1.5),
 *    with an amplitude a2 (the kernel's variance) docs/methods/stein-random-features.md leaves as optional:
 *      phi(x) = sqrt(a2 / R) [cos(Omega x~), sin(Omega x~)],  x~ = x / l
 *      A = Phi^T Phi + s I_{2R},  alpha = A^{-1} Phi^T y
 *      LML = -(||y - Phi alpha||^2 + s ||alpha||^2) / (2 s) - log|A| / 2
 *            + R log s - (N / 2) log(2 pi s)
 *    and its analytic gradient with respect to Omega, the log lengthscales,
 *    log a2 and log s. No N x N matrix anywhere: O(N R d + N R^2 + R^3). */
#ifndef GP_FEATURES_SAMPLE_H
#define GP_FEATURES_SAMPLE_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/error.h"
#include "core/kernel/kernel.h"
#include "core/kernel/kernel_spectral.h"
#include "core/optim/optim.h"
#include "core/optim/svgd.h"

/* ---- 1. frequency samplers ---- */

typedef enum gp_freq_sampler {
    GP_FREQ_MC = 0,
    GP_FREQ_QMC,
    GP_FREQ_ORF,
    GP_FREQ_STEIN,
    GP_FREQ_SAMPLER_COUNT
} gp_freq_sampler;

/* "mc", "qmc", "orf", "stein" <-> enum; -1 / NULL when unknown. */
int gp_freq_sampler_from_name(const char *name);
const char *gp_freq_sampler_name(gp_freq_sampler s);

typedef struct gp_stein_options {
    int iterations;            /* SVGD steps; default 2000 */
    double step;               /* Adam learning rate; default 0.1 */
    gp_svgd_bandwidth bandwidth; /* default GP_SVGD_BANDWIDTH_TOTAL */
    double bandwidth_scale;    /* multiplies the median; 0 (default): gp_stein_bandwidth_scale */
    double anneal_power;       /* p of the cyclic schedule, default 0 (none; the authors: 0.5) */
    int anneal_cycles;         /* c, default 5 */
    double weight_decay;       /* decoupled, default 1e-4 */
    gp_freq_sampler init;      /* GP_FREQ_QMC (default) or GP_FREQ_MC */
} gp_stein_options;

void gp_stein_default_options(gp_stein_options *opt);

/* The factor on the median bandwidth that stein uses by default for R
 * frequencies in d dimensions:
 *   2 sqrt(2 / d) max(1, (R / 200)^(1/4)),  clamped to [0.5, 4].
 * Measured on the Figure 2 protocol (2000 steps of 0.3 from a Halton start;
 * bench/results/kernel_approx.md has the full sweeps): the plain median
 * leaves the particles' second moment short of the target's (variance 0.9975
 * at d = 2, R = 200) and that deficit dominates the kernel error; a wider
 * kernel repels more and removes most of it in low dimension (d = 2,
 * R = 200: 1.6e-4 at scale 1, 6.3e-5 at 2, 8.2e-5 at 3; R = 1000: 1.8e-5 at
 * 2, 1.4e-5 at 3), while in high dimension the median kernel is already too
 * wide (d = 10: 8.9e-3 at 1, 3.3e-2 at 2; d = 20: 0.145 at 1, 0.117 at
 * 0.35-0.5; d = 30: 0.39 at 0.5, 0.42 at 1). */
double gp_stein_bandwidth_scale(size_t R, size_t d);

/* Draw R frequencies in d dimensions for the spectral density s into omega
 * (R x d, column-major). stein may be NULL (defaults) and is read only for
 * GP_FREQ_STEIN. on_iter (may be NULL) is called every 10 SVGD iterations
 * with (ctx, iteration, 0.0) and a nonzero return cancels (GP_ECANCELLED). Errors: GP_EINVAL for R = 0, d = 0, d too large for qmc
 * (GP_HALTON_MAX_DIM - 1 for Student-t), unknown sampler; GP_ENOMEM. */
int gp_frequencies_draw(const gp_spectral *s, gp_freq_sampler sampler, size_t R, size_t d,
                        uint64_t seed, const gp_stein_options *stein, gp_iter_fn on_iter,
                        void *iter_ctx, double *omega, gp_error *err);

/* Relative Frobenius error ||K - K^||_F / ||K||_F of the feature kernel
 * K^_ij = (1/R) sum_r cos(omega_r^T (x_i - x_j)) against the kernel k of
 * unit variance and unit lengthscale (leaf type rbf or matern*), on the
 * points X (n x d column-major). O(n^2 (R + d)); for benchmarks and tests. */
int gp_features_kernel_error(gp_kernel_type type, const double *X, size_t n, size_t d,
                             const double *omega, size_t R, double *rel_error, gp_error *err);

#endif
