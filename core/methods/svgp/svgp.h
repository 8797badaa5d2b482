/* gpserve core: the uncollapsed sparse variational GP with non-Gaussian
 * likelihoods (method "svgp"; Hensman et al. 2013/2015, the baseline of GPflow
 * and GPyTorch; docs/methods/sparse-variational-and-pls.md §1.1(b)).
 *
 * Notation of core/inducing/inducing.h: M inducing inputs Z, Kuu + jitter I =
 * L L^T, A = L^{-1} Kuf (M x N). Whitened variational posterior v = L^{-1} u ~
 * q = N(m, S), S = Lq Lq^T (Lq lower, positive diagonal). Marginals of f_n:
 *   mu_n  = a_n . m,    var_n = k_nn - |a_n|^2 + |Lq^T a_n|^2
 * and the bound
 *   ELBO = sum_n E_{N(mu_n, var_n)} log p(y_n | f_n) - KL(N(m, S) || N(0, I)),
 *   KL   = (|Lq|_F^2 + m.m - M) / 2 - sum log diag Lq,
 * the expectation in closed form for gaussian and poisson, Gauss-Hermite for
 * bernoulli (gp_lik_expected). With a Gaussian likelihood the optimal q is
 * sgpr's (m = B^{-1} A y / s2, S = B^{-1}) and the ELBO there is Titsias'
 * collapsed bound (§1.1(b), §5.4).
 *
 * Gradients (derived in core/methods/svgp/elbo.c), with g_mu, g_v the derivatives
 * of the expectations in mu_n and var_n:
 *   dF/dm   = A g_mu - m
 *   dF/dLq  = 2 A diag(g_v) A^T Lq - Lq + diag(1 / Lq_ii)      (lower triangle)
 *   dF/dKuf = L^{-T} G,   G = m g_mu^T + 2 (S - I) A diag(g_v)
 *   dF/dKuu = L^{-T} Phi(-G A^T) L^{-1}   (Phi: lower triangle, half diagonal, symmetrised)
 *   dF/dk_nn = g_v,n
 * O(N M^2 + M^3) per evaluation, three M x N buffers, no N x N matrix.
 *
 * Optimisers: full-batch L-BFGS over (kernel parameters, noise, Z, m, Lq)
 * when three M x N buffers fit the budget of an exact fit of max_train_points
 * points; otherwise (or optimizer = adam) minibatch Adam on the kernel, noise
 * and Z with natural-gradient steps on q (Salimbeni et al. 2018). A fit over
 * rows read in chunks (gp_fit_request.rows: a data set, or one process's
 * shard of it) takes the Adam path on minibatches of global row indices and
 * never holds the rows (core/methods/svgp/rows.h). */
#ifndef GP_SVGP_H
#define GP_SVGP_H

#include <stddef.h>

#include "core/base/error.h"
#include "core/kernel/kernel.h"
#include "core/likelihood/likelihood.h"
#include "core/likelihood/softmax.h"
#include "core/model/model.h"

extern const gp_method gp_method_svgp;

/* The two parts of the bound at one point. */
typedef struct gp_svgp_terms {
    double elbo;
    double expected_log_lik; /* sum_n E_q log p(y_n | f_n) */
    double kl;               /* KL(N(m, S) || N(0, I)) */
} gp_svgp_terms;

/* Gradient outputs of gp_svgp_elbo (each may be NULL). */
typedef struct gp_svgp_grad {
    double *theta; /* gp_kernel_n_params(k) + 1: kernel log-parameters, then d/dlog s2
                      (0 unless the likelihood is gaussian) */
    double *z;     /* d x m: dF/dZ */
    double *mean;  /* m: dF/dm */
    double *chol;  /* m x m: dF/dLq on and below the diagonal (upper triangle zeroed) */
} gp_svgp_grad;

/* The ELBO at kernel k, likelihood lik (gaussian: lik->noise is s2), Z (d x
 * m), q = N(mq, Lq Lq^T) for data X (d x n point-major, working units) and
 * labels y; q is the quadrature of the non-closed-form expectations. GP_ENOTPD
 * when Kuu cannot be factorised or the bound is not finite. */
int gp_svgp_elbo(const gp_kernel *k, const gp_lik *lik, const gp_quadrature *q, const double *X,
                 size_t n, const double *y, const double *Z, size_t m, const double *mq,
                 const double *Lq, gp_svgp_terms *terms, const gp_svgp_grad *grad, gp_error *err);

/* The same with known per-point noise r (n, working units; NULL: none):
 * gaussian row i has variance lik->noise + r[i]; theta's last entry is then
 * d/dlog lik->noise with r held. */
int gp_svgp_elbo_noise(const gp_kernel *k, const gp_lik *lik, const gp_quadrature *q,
                       const double *X, size_t n, const double *y, const double *r,
                       const double *Z, size_t m, const double *mq, const double *Lq,
                       gp_svgp_terms *terms, const gp_svgp_grad *grad, gp_error *err);

/* Softmax (C = mc->C >= 2 classes, labels y in 0..C-1): C latent GPs sharing
 * k and Z, each with its own whitened q (mq m x C, Lq m x m x C: class c at
 * c m and c m m), the expected log likelihood estimated with mc's fixed
 * draws (core/likelihood/softmax.h):
 *   ELBO = sum_n E log softmax(f_n)_{y_n} - sum_c KL(q_c || N(0, I)).
 * The classes share A, so dF/dA = sum_c G_c and the kernel and Z gradients
 * are one contraction; grad->mean and grad->chol get C blocks. */
int gp_svgp_elbo_softmax(const gp_kernel *k, const gp_softmax_mc *mc, const double *X,
                         size_t n, const double *y, const double *Z, size_t m, const double *mq,
                         const double *Lq, gp_svgp_terms *terms, const gp_svgp_grad *grad,
                         gp_error *err);

/* One natural-gradient step of size `step` on q (mq, Lq updated in place) in
 * the natural parameters (S^{-1} m, -S^{-1}/2), from the n points given, whose
 * expected log-likelihood terms are weighted by `scale` (N / batch size for a
 * minibatch, 1 for the full batch). With a Gaussian likelihood, step 1 and
 * the full batch it lands on the optimal q. GP_ENOTPD (q unchanged) when the
 * new precision is not positive definite. */
int gp_svgp_natgrad(const gp_kernel *k, const gp_lik *lik, const gp_quadrature *q,
                    const double *X, size_t n, const double *y, double scale, const double *Z,
                    size_t m, double step, double *mq, double *Lq, gp_error *err);

#endif
