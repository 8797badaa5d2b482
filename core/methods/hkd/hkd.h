/* gpserve core: harmonic kernel decomposition (method "hkd": the HVGP of
 * docs/methods/harmonic-kernel-decomposition.md, Sun, Shi, Wilson and Grosse
 * 2021), a sparse variational GP that spends its inducing points on the
 * symmetry of the kernel.
 *
 * When the kernel is invariant under a finite group G of transformations
 * (negating axes or PCA directions, translating a periodic coordinate,
 * rotating a plane, cycling coordinates), k = sum_t k_t with
 *   k_t(x, x') = sum_s W[t, s] k(x, G^s x')
 * (the real-resolved DFT along the orbit, note §1, §5 step 2), the k_t are
 * PSD and orthogonal, and f = sum_t f_t is an additive GP with independent
 * parts. hkd gives every part (block) m inducing points and an independent
 * Gaussian q_t: T blocks of m points cost O(N T m^2) per data pass and
 * O(T m^3) to factorise, against O(N T^2 m^2) and O(T^3 m^3) for one sparse
 * GP with T m points.
 *
 * The fit (note §5 steps 1-10, Gaussian likelihood, fixed inducing inputs):
 * working coordinates (standardised, rotated into the PCA basis for
 * negate_pca, periodic coordinates embedded on a circle for translate),
 * k-means on the data folded into a fundamental domain, the prior blocks
 * K_t = chol factors L_t, a streaming data pass (Phi_t = L_t^{-1} K_t,uf,
 * C_t = Phi_t Phi_t^T, g_t = Phi_t y, the Nystrom residual r0), the closed-form
 * covariances S_t = (I + C_t / s2)^{-1}, the coupled means by block-Jacobi
 * PCG (pitfall 8: never per-block solves), the collapsed bound
 *   L* = -N/2 log(2 pi s2) - (y.y - sum_t m_t.g_t) / (2 s2)
 *        - 1/2 sum_t log|I + C_t / s2| - r0 / (2 s2)
 * and hyperparameters maximising L* by L-BFGS with its analytic gradient
 * (core/methods/hkd/bound.c derives it) on a subsample, then one full-data pass.
 * For T = 1 (no generators) L* is Titsias' bound: hkd is sgpr with fixed Z.
 *
 * A constant or linear mean m(x) = h(x)^T beta (of the standardised inputs)
 * is profiled out of L* at every evaluation (the GLS estimate under
 * Phi^T Phi + s2 I, core/methods/hkd/bound.c profile_mean) and belongs to
 * the total latent mean, not to a part: the parts model the residual, their
 * means sum to the latent mean minus m(x) (core/model/model.c adds m back
 * to the total only). The symmetry is the kernel's: a linear mean is not
 * invariant under the group (a constant one is), so a problem that is
 * invariant is best fitted without a linear mean.
 *
 * Options: see the method descriptor (GET /v1/methods). */
#ifndef GP_HKD_H
#define GP_HKD_H

#include "core/model/model.h"

extern const gp_method gp_method_hkd;

/* The Nystrom trace error of the study of the paper's Fig. 6 (note §6.3):
 * sum_t tr(K_t,ff - K_t,fu K_t^{-1} K_t,uf) / n over the request's training
 * inputs, in the working units of the fit (standardised inputs, kernel
 * variance as given), with the inducing inputs the fit would choose
 * (req->options: symmetry, inducing, seed) and the request's kernel as given
 * (no hyperparameter fit). With "generators": [] (one block) it is the
 * trace error of a sparse GP with the same m points. */
int gp_hkd_trace_error(const gp_fit_request *req, double *trace, gp_error *err);

/* The bound and its gradient for tests: at the fitted model's structure
 * (symmetry, standardisation and blocks), the inducing inputs Z (working
 * coordinates, working_dims x m; NULL: the model's), the kernel k and noise
 * s2 (working units), over the request's training data. grad (may be NULL):
 * gp_kernel_n_params(k) entries then dF/dlog s2; gz (may be NULL): dF/dZ.
 * The bound is in working units (the model's objective plus N log y_scale).
 * The model is not changed. */
int gp_hkd_bound(const gp_model *model, const gp_fit_request *req, const gp_kernel *k, double s2,
                 const double *Z, double *bound, double *grad, double *gz, gp_error *err);
/* The same with the model's mean function profiled out (its basis of the
 * model's standardised points, as the fit does): the bound of the residual
 * y - H beta-hat; beta (may be NULL) receives beta-hat (1 or 1 + d). */
int gp_hkd_bound_mean(const gp_model *model, const gp_fit_request *req, const gp_kernel *k,
                      double s2, const double *Z, double *bound, double *grad, double *gz,
                      double *beta, gp_error *err);

#endif
