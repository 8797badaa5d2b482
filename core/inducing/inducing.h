/* gpserve core: the inducing-point machinery shared by sgpr and renyi.
 *
 * Notation (docs/methods/renyi-gp.md §0): M inducing inputs Z, u = f(Z),
 *   Kuu + jitter I = L L^T,   V = L^{-1} Kuf (M x N),   Q = V^T V.
 * The jitter is GP_INDUCING_JITTER times the mean of diag k(Z, Z) (it scales
 * with the kernel variance, docs/methods/renyi-gp.md §7.6) and the SAME jittered Kuu is used in
 * the bound, its gradient and prediction, so Kff - Q stays PSD. Its
 * derivative is part of every gradient (gp_inducing_contract).
 *
 * Kernels: one stationary leaf (rbf, matern12/32/52, rq), ARD or not; the
 * inducing-input gradient is implemented for those (gp_kernel_cross_grad_contract).
 *
 * All points are point-major (each column one point, input_dim rows) and in
 * the model's working units. */
#ifndef GP_INDUCING_H
#define GP_INDUCING_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/error.h"
#include "core/base/state.h"
#include "core/inducing/select.h"
#include "core/kernel/kernel.h"
#include "core/model/method.h"

#define GP_INDUCING_JITTER 1e-6

/* ---- Kuu ---- */
/* L (m x m, lower, upper triangle zeroed) = chol(k(Z, Z) + jitter I) with
 * jitter = GP_INDUCING_JITTER * mean diag; should that fail, the extra jitter
 * of gp_cholesky_jitter on top. *jitter receives the total added. */
int gp_inducing_kuu_factor(const gp_kernel *k, const double *Z, size_t m, double *L,
                           double *jitter, gp_error *err);

/* ---- gradients ---- */
/* The chain rule from matrix sensitivities of an objective F to the kernel
 * parameters and Z. Given
 *   Wuf (m x n):  dF/dKuf, i.e. F changes by sum_{j,i} Wuf[j][i] dKuf[j][i]
 *                 (Kuf[j][i] = k(Z_j, X_i), the layout gp_kernel_cross(k, Z,
 *                 m, X, n, ...) writes);
 *   Kuf (m x n, may be NULL): those kernel values when the caller has them
 *                 (they spare the kernel evaluations; NULL computes them);
 *   Wuu (m x m, symmetric): dF/dKuu for the jittered Kuu;
 *   wdiag: F's weight on every k(x_i, x_i) (sum_i wdiag dk_ii; the kernel is
 *          stationary, so every k(x_i, x_i) is the same function of theta);
 * writes grad (gp_kernel_n_params) = dF/dtheta and, when gz is not NULL,
 * gz (d x m) = dF/dZ. The base jitter's dependence on the kernel is
 * included (the escalation of a failed factorisation, if any, is not).
 * Wuu is not modified. Gradients of a dense Kff sensitivity are the
 * caller's (gp_kernel_gram_grad_contract). */
int gp_inducing_contract(const gp_kernel *k, const double *X, size_t n, const double *Z,
                         size_t m, const double *Kuf, const double *Wuf, const double *Wuu,
                         double wdiag, double *grad, double *gz, gp_error *err);

/* The part of gp_inducing_contract that holds no row: the Kuu term (Wuu,
 * with the jitter's share) and the diagonal's (wdiag on each of n rows,
 * stationary: x is any point), ADDED to grad and gz. A fit whose rows are
 * summed in chunks contracts each chunk's Kuf term (gp_kernel_cross_grad_
 * contract_known) and adds this once. */
int gp_inducing_contract_kuu(const gp_kernel *k, const double *Z, size_t m, const double *Wuu,
                             double wdiag, double n, const double *x, double *grad, double *gz,
                             gp_error *err);

/* ---- the fit driver ---- */
/* An objective to maximise: F at kernel k, noise s2 and inducing inputs Z
 * (d x m), with grad = dF/dtheta (gp_kernel_n_params entries) then
 * dF/dlog s2, and gz = dF/dZ when gz is not NULL. A nonzero return means F
 * cannot be evaluated there (e.g. not positive definite): the optimiser backs
 * off. */
typedef int (*gp_inducing_objective)(void *ctx, const gp_kernel *k, double s2, const double *Z,
                                     size_t m, double *f, double *grad, double *gz);

typedef struct gp_inducing_fit_spec {
    gp_inducing_objective fn;
    void *ctx;
    int optimize_z;
    int max_iterations;      /* L-BFGS iterations */
    double tolerance;        /* relative change of F that stops it */
    /* Progress (req->progress): iteration_base + iteration out of max_total,
     * with F + objective_offset (working -> original units). */
    double objective_offset;
    int iteration_base, max_total;
    double *result_f; /* out (may be NULL): F at the point returned */
} gp_inducing_fit_spec;

/* Maximise spec->fn by L-BFGS over the free parameters of k (updated in
 * place), the noise as np describes it (result in *s2) and, with
 * optimize_z, Z (updated in place). req supplies progress and cancellation
 * (GP_ECANCELLED). iterations, evaluations and converged are added to diag.
 * GP_ENOTPD when F cannot be evaluated at the start. */
int gp_inducing_optimise(gp_kernel *k, const gp_noise_param *np, double *s2, double *Z, size_t m,
                         const gp_fit_request *req, const gp_inducing_fit_spec *spec,
                         gp_diagnostics *diag, gp_error *err);

/* Choose Z (up to M points of X, d x n) with sel under k, then optimise
 * (gp_inducing_optimise). With greedy selection and Z not optimised, then up
 * to `rounds` times: choose Z again under the fitted kernel and optimise
 * again from the fitted values, keeping a round only when it raises F (the
 * alternation of Burt et al. 2020: greedy conditional-variance selection
 * under good hyperparameters matches gradient-optimised Z at far less cost).
 * Z holds d x M; *m receives the number chosen. Progress counts on from
 * diag->iterations (earlier fits of the same request), and spec->max_total is
 * raised to cover every round when it is smaller. */
int gp_inducing_fit(gp_kernel *k, const gp_noise_param *np, double *s2,
                    gp_inducing_selection sel, size_t M, int rounds, const double *X, size_t n,
                    double *Z, size_t *m, const gp_fit_request *req, gp_inducing_fit_spec *spec,
                    gp_diagnostics *diag, gp_error *err);

/* ---- the fitted posterior over u, whitened (docs/methods/renyi-gp.md §1.2, §3.1) ----
 * g = L^{-1} u ~ N(mt, C). At a test point x*, aw = L^{-1} k(Z, x*):
 *   mean  = aw . mt
 *   var_f = max(k** - aw.aw, 0) + max(aw^T C aw, 0)   (two non-negative terms)
 * and the joint latent covariance of test points is
 *   (K** - Aw^T Aw) + Aw^T C Aw.
 * sgpr is the case mt = B^{-1} V y / s2, C = B^{-1} (B = I + V V^T / s2);
 * renyi has mt = V Xi^{-1} y, C = I - V Xi^{-1} V^T. */
typedef struct gp_inducing_post {
    size_t m, d;
    double *Z;  /* d x m */
    double *L;  /* m x m lower Cholesky of Kuu + jitter I (upper zeroed) */
    double *mt; /* m */
    double *C;  /* m x m, full symmetric */
    double jitter;
    /* Latent functions sharing Z and L (1 from gp_inducing_post_alloc): a
     * softmax svgp model's classes (core/methods/svgp/classes.h), whose mt is
     * m x latents and C m x m x latents, class l's at l m and l m m.
     * gp_inducing_predict answers every latent, m x latents (one kernel row
     * and one solve per point, shared); sampling and export take one latent. */
    size_t latents;
    /* Multiplies every predictive variance and covariance, latent and
     * observed, and the random part of every draw: 1 (gp_inducing_post_alloc)
     * except for gwi's tempering (core/methods/gwi/gwi.h). Not exported: a method
     * that sets it keeps it with its own arrays. */
    double scale;
    gp_kernel_points *Zp; /* Z prepared for the fitted kernel (gp_inducing_post_prepare) */
} gp_inducing_post;

/* Allocate the arrays of an m-point posterior in d dimensions (contents unset). */
int gp_inducing_post_alloc(gp_inducing_post *p, size_t m, size_t d, gp_error *err);
void gp_inducing_post_free(gp_inducing_post *p);
/* Prepare Z for predictions under the fitted kernel k (which must outlive p
 * unchanged); done by the fit and by import, before any predict. */
int gp_inducing_post_prepare(gp_inducing_post *p, const gp_kernel *k, gp_error *err);

/* Predict and sample for a model whose impl holds this posterior; same
 * contracts as gp_method.predict / .sample (original units in and out). */
int gp_inducing_predict(const gp_model *model, const gp_inducing_post *p,
                        const gp_predict_request *req, gp_prediction *out, gp_error *err);
int gp_inducing_sample(const gp_model *model, const gp_inducing_post *p,
                       const gp_sample_request *req, double *samples, gp_error *err);

/* The same on points already standardised (P: d x req->m, gp_model_points),
 * for a method that needs them for more than the posterior (gwi's network
 * mean): the inputs are standardised once per request. */
int gp_inducing_predict_points(const gp_model *model, const gp_inducing_post *p,
                               const double *P, const gp_predict_request *req,
                               gp_prediction *out, gp_error *err);
int gp_inducing_sample_points(const gp_model *model, const gp_inducing_post *p,
                              const double *P, const gp_sample_request *req, double *samples,
                              gp_error *err);

/* gp_method.predict and .sample for a method whose impl struct begins with
 * its gp_inducing_post (sgpr, renyi). */
int gp_inducing_method_predict(const gp_model *model, const gp_predict_request *req,
                               gp_prediction *out, gp_error *err);
int gp_inducing_method_sample(const gp_model *model, const gp_sample_request *req,
                              double *samples, gp_error *err);
/* gp_method.export_impl and .import_impl for a method whose impl is its
 * gp_inducing_post alone (sgpr, svgp): the arrays of gp_inducing_post_export;
 * import allocates model->impl (free it with gp_inducing_post_free, then free). */
int gp_inducing_method_export(const gp_model *model, gp_state *st, gp_error *err);
int gp_inducing_method_import(gp_model *model, const gp_state *st, gp_error *err);
/* gp_method.free_impl for such a method: the posterior and the struct. */
void gp_inducing_method_free(void *impl);

/* Arrays "Z" (d x m), "chol_kuu_packed", "mean_white" (m x 1),
 * "cov_white_packed" (the lower triangle of C) and "jitter" (1 x 1). Import
 * checks shapes, finiteness and the factor's diagonal (GP_EDATA naming the
 * array) and fills p (allocated here; gp_inducing_post_free). */
int gp_inducing_post_export(const gp_inducing_post *p, gp_state *st, gp_error *err);
int gp_inducing_post_import(const gp_model *model, const gp_state *st, gp_inducing_post *p,
                            gp_error *err);

#endif
