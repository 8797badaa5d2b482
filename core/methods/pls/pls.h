/* gpserve core: projected Langevin sampling (method "pls";
 * docs/methods/sparse-variational-and-pls.md §1.4, Algorithm A of §5.2).
 *
 * The posterior over a GP's projection onto M_k Nystrom eigenfunctions of M
 * greedy landmarks Z, for any likelihood of core/likelihood/likelihood.h:
 *   f(x) = phi(x)^T a + residual,  a ~ N(0, I) a priori (whitened coefficients),
 *   phi(x) = B^T k(Z, x) with K_ZZ / M = V diag(lambda) V^T (descending, kept
 *   lambda > eig_rel_tol lambda_1), and
 *     prior_mode k (default, [D], pitfall P15): B = V diag(1 / sqrt(M lambda)),
 *       the standard GP(0, k); residual k(x, x') - phi(x)^T phi(x');
 *     prior_mode r (thesis): B = V / sqrt(M), the GP with kernel
 *       r(x, x') = (1/M) sum_m k(x, z_m) k(z_m, x'); residual
 *       (1/M) k_Z(x)^T (I - V V^T) k_Z(x') (fixed reference set, P16).
 * The coefficient posterior has the potential
 *   V(a) = -sum_n log p(y_n | (Phi_X^T a)_n) + |a|^2 / 2,
 *   grad V(a) = Phi_X g + a,  g_n = -d log p(y_n | f_n) / df_n.
 * Gaussian likelihood: sampler closed_form (the default) keeps the exact
 * Gaussian N(mu_a, H^{-1}), H = I + Phi_X Phi_X^T / s2 (= the Titsias SVGP
 * with these features). Otherwise J particles, each a chain of K steps of
 * preconditioned ULA (pula) or its Metropolis-adjusted form (mala), started
 * from prior draws; the predictive of f is the equally weighted mixture of
 * the J Gaussians N(phi(x)^T a_j, S_res(x, x)).
 *
 * Hyperparameters (A1): the exact GP marginal likelihood (core/kernel/lml.h)
 * of a regression target on subsets (R repeats of the N_sub points nearest
 * a random training point; the log-parameters averaged): gaussian y itself,
 * bernoulli the 0/1 labels (thesis, P20), poisson_sq sqrt(y), poisson
 * log(y + 1/2) (option hyper = regression). [D] For bernoulli and poisson
 * the default (hyper = laplace) fits instead the Laplace approximation to
 * the marginal likelihood of the labels themselves on the same subsets
 * (gp_pls_laplace_lml below). See core/methods/pls/ for the [D] choices. */
#ifndef GP_METHODS_PLS_H
#define GP_METHODS_PLS_H

#include <stddef.h>

#include "core/likelihood/likelihood.h"
#include "core/model/model.h"

extern const gp_method gp_method_pls;

/* The potential V(a) of the coefficients a (mk) for features Phi (mk x n,
 * column n = phi(x_n)) and labels y (n) under lik; grad (mk, may be NULL)
 * gets grad V(a). What the samplers move on, exposed for the gradient test. */
double gp_pls_potential(const gp_lik *lik, const double *Phi, size_t mk, size_t n,
                        const double *y, const double *a, double *grad);

/* [D] The mode of V for a log-concave lik (gaussian, bernoulli, poisson) by
 * Newton from a (mk, overwritten with the mode); H (mk x mk, may be NULL)
 * gets the lower Cholesky factor of the Hessian I + Phi W Phi^T there (upper
 * half unspecified). Returns V(a*), NAN on failure. The start and
 * preconditioner of the samplers (docs/methods/sparse-variational-and-pls.md
 * §5.2, as implemented), exposed for its test. */
double gp_pls_laplace_mode(const gp_lik *lik, const double *Phi, size_t mk, size_t n,
                           const double *y, double *a, double *H);

/* [D] The Laplace approximation to the log marginal likelihood of labels y
 * (n) under lik (bernoulli or poisson) with latent f ~ GP(off, k) on the n
 * points Xt (d x n point-major; off: n values, NULL: zero) into *lml, and
 * into grad (gp_kernel_n_params entries, may be NULL) its derivatives in the
 * kernel's log-parameters: the objective of A1 with option hyper = laplace
 * (core/methods/pls/hyper_laplace.c), exposed for its gradient test. */
int gp_pls_laplace_lml(const gp_kernel *k, const gp_lik *lik, const double *Xt, size_t n,
                       const double *y, const double *off, double *lml, double *grad,
                       gp_error *err);

#endif
