/* gpserve core: Gaussian Wasserstein inference for regression (method "gwi";
 * Wild, Hu & Sejdinovic 2022, the thesis's chapter 4;
 * docs/methods/sparse-variational-and-pls.md §1.2, algorithm §5.3, pitfalls
 * §6 P1-P9, oracles T6-T7 of §7).
 *
 * Generalised variational inference in function space: the posterior
 * measure Q = GP(m_Q, r) minimises the expected negative log-likelihood plus
 * the squared 2-Wasserstein distance to the prior P = GP(0, k) (instead of
 * the KL of the usual sparse GP), which frees the mean from the kernel.
 *   covariance (the SVGP kernel, thesis (4.18) with P5's fix):
 *     r(x, x') = k(x, x') - k_Z(x)^T Kzz^{-1} k_Z(x') + k_Z(x)^T Sigma k_Z(x'),
 *     Sigma = L L^T, L lower triangular (m x m), free
 *   mean: kernel_sum (GWI-SVGP) m_Q(x) = k_Z(x)^T beta, beta in R^m free;
 *         mlp (GWI-net) m_Q(x) = g(x), a D -> h -> h -> 1 tanh network.
 * Working units throughout (standardised inputs and targets, prior mean 0);
 * Kzz means k(Z, Z) + jitter I, factored Lk Lk^T.
 *
 * The loss of one minibatch B (nb points) with comparison points S (ns
 * training inputs drawn afresh every step), N the training rows:
 *   nll  = (N/2) log(2 pi s2) + (N/nb) sum_b [(y_b - m_b)^2 + r_bb] / (2 s2)
 *   w2sq, bures_sym [D]: (1/ns) [ sum_s m_s^2 + tr K_SS + tr R_SS
 *                                 - 2 tr (K_SS^{1/2} R_SS K_SS^{1/2})^{1/2} ]
 *         (the exact squared W2 between the two measures' marginals at S,
 *         over ns: real, >= 0, zero when Q = P);
 *         thesis_nonsym [T (B.43)-(B.44)]: (1/nb) sum_b (m_b^2 + k_bb + r_bb)
 *         - 2 / sqrt(nb ns) sum_s sqrt(max(Re lambda_s, 0)), lambda the
 *         eigenvalues of r(S, B) k(B, S);
 *   loss: thesis_w2sq  nll + w2sq
 *         code_w [C]   (nll - (N/2) log(2 pi s2_0)) / N + sqrt(max(w2sq, 0))
 *                      (the released code: the batch's mean expected NLL
 *                      plus the unsquared distance, P1; s2_0 is the
 *                      setup's s2, so with learn_noise the noise's own
 *                      log term stays in the loss, as it must).
 * The gradients are analytic (derived in core/methods/gwi/loss.c) and checked
 * against finite differences (tests/unit/test_gwi.c, T7).
 *
 * Fit (B0-B5): a seeded validation split; Z = M distinct training inputs
 * (M = inducing, or round(inducing_factor sqrt(N))); the prior's
 * hyperparameters by the exact marginal likelihood on (Z, y_Z) [T (B.58)],
 * then frozen; Sigma = (Kzz + Kzx Kxz / s2)^{-1} and, for kernel_sum, beta =
 * (s2 Kzz + Kzx Kxz)^{-1} Kzx y (the Titsias optimum, so the initial mean is
 * sgpr's at the same Z and hyperparameters); Adam over (mean parameters, L)
 * on minibatches, the validation NLL after every epoch, the best epoch's
 * parameters kept (early stopping with `patience`); then the closed-form
 * tempering alpha = mean_val[(y - m_Q)^2 / (r + s2)] (clipped to
 * [GP_GWI_TEMPER_MIN, GP_GWI_TEMPER_MAX]).
 *
 * Predict (B6): mean m_Q(x*), latent variance alpha r(x*, x*), observation
 * alpha (r + s2); covariance alpha r(X*, X*). Samples: m_Q(X*) plus
 * sqrt(alpha) times a joint draw of GP(0, r) (and of the noise). */
#ifndef GP_GWI_H
#define GP_GWI_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/error.h"
#include "core/kernel/kernel.h"
#include "core/model/model.h"

extern const gp_method gp_method_gwi;

/* The tempering factor's clip (P9: the thesis's text says [0, 1], its code's
 * grid (0, 2]; we keep the code's upper end, so an over-confident fit can
 * widen its bands). */
#define GP_GWI_TEMPER_MIN 1e-6
#define GP_GWI_TEMPER_MAX 2.0
/* Fewer validation rows than this leave alpha at 1: a variance factor
 * estimated from a handful of residuals is noise (a 3-row fit holds out one
 * row, and tempered its variance to 1e-6 of the prior's). */
#define GP_GWI_TEMPER_MIN_ROWS 10

typedef enum gp_gwi_mean_kind { GP_GWI_MEAN_KERNEL_SUM = 0, GP_GWI_MEAN_MLP } gp_gwi_mean_kind;
typedef enum gp_gwi_w2_kind { GP_GWI_W2_BURES_SYM = 0, GP_GWI_W2_THESIS_NONSYM } gp_gwi_w2_kind;
typedef enum gp_gwi_objective_kind {
    GP_GWI_OBJECTIVE_THESIS_W2SQ = 0,
    GP_GWI_OBJECTIVE_CODE_W
} gp_gwi_objective_kind;

/* The fixed part of a problem (working units; pointers borrowed). */
typedef struct gp_gwi_setup {
    const gp_kernel *k; /* one stationary leaf, the frozen prior */
    double s2;          /* noise variance */
    const double *Z;    /* d x m inducing inputs, point-major */
    size_t m, d;
    const double *Lk;   /* m x m lower, chol(k(Z, Z) + jitter I) (gp_inducing_kuu_factor) */
    gp_gwi_mean_kind mean;
    size_t hidden;      /* mlp: the width h of both hidden layers */
    gp_gwi_w2_kind w2;
    gp_gwi_objective_kind objective;
    size_t n_total;     /* N, the training rows (the data term's N / nb) */
    /* [D] 1: the noise is a parameter too (theta's last entry x, noise
     * GP_GWI_NOISE_FLOOR + exp(x); s2 is then only its start). */
    int learn_noise;
} gp_gwi_setup;

#define GP_GWI_NOISE_FLOOR 1e-8

/* The parameter vector theta: the mean's parameters first, then the lower
 * triangle of L column by column (gp_pack_lower's layout, m(m+1)/2).
 * kernel_sum: beta (m). mlp: W1 (h x d), b1 (h), W2 (h x h), b2 (h),
 * W3 (1 x h), b3 (1), each column-major, in that order. With learn_noise,
 * one more entry last: the noise's unconstrained value. */
size_t gp_gwi_mlp_size(size_t d, size_t h);
size_t gp_gwi_mean_size(const gp_gwi_setup *s);
size_t gp_gwi_n_params(const gp_gwi_setup *s);
/* The noise variance at theta (s->s2 unless learn_noise). */
double gp_gwi_noise(const gp_gwi_setup *s, const double *theta);

typedef struct gp_gwi_terms {
    double loss; /* what the fit minimises (objective above) */
    double nll;  /* the data term nll */
    double w2sq; /* the W2^2 estimate */
} gp_gwi_terms;

/* Workspace for batches of up to nb points and ns comparison points
 * (checked sizes, allocated once per fit). */
typedef struct gp_gwi_work gp_gwi_work;
int gp_gwi_work_new(const gp_gwi_setup *s, size_t nb, size_t ns, gp_gwi_work **out,
                    gp_error *err);
void gp_gwi_work_free(gp_gwi_work *w);

/* The loss of the batch XB (d x nb), yB with comparison points XS (d x ns)
 * at theta; grad (gp_gwi_n_params entries, may be NULL) receives its
 * gradient. nb, ns at most the workspace's. GP_ENOTPD when an
 * eigendecomposition fails or the loss is not finite. */
int gp_gwi_loss(const gp_gwi_setup *s, gp_gwi_work *w, const double *theta, const double *XB,
                const double *yB, size_t nb, const double *XS, size_t ns, gp_gwi_terms *t,
                double *grad, gp_error *err);

/* Latent mean m_Q and variance r(x, x) (untempered, working units) at the n
 * points X (d x n), in blocks of the workspace's nb; var may be NULL. */
int gp_gwi_latent(const gp_gwi_setup *s, gp_gwi_work *w, const double *theta, const double *X,
                  size_t n, double *mean, double *var, gp_error *err);

/* The starting point B3 into theta: L = chol((Kzz + Kzx Kxz / s2)^{-1}) from
 * the n training points X (d x n) and, for kernel_sum, beta = (s2 Kzz + Kzx
 * Kxz)^{-1} Kzx y; for mlp the weights U(-1/sqrt(fan_in), 1/sqrt(fan_in))
 * and biases 0 from a stream of seed. */
int gp_gwi_init(const gp_gwi_setup *s, const double *X, const double *y, size_t n,
                uint64_t seed, double *theta, gp_error *err);

#endif
