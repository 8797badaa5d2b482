/* pls: the model's state, the potential, prediction and function draws
 * (§5.2 A5). */
#ifndef GP_METHODS_PLS_MODEL_H
#define GP_METHODS_PLS_MODEL_H

#include "core/methods/pls/internal.h"

void pls_impl_free(void *p);
pls_impl *pls_impl_alloc(size_t d, size_t M, size_t mk, size_t J, gp_error *err);
/* B from V and lambda (§5.2 A3), and Z prepared for the kernel k of the
 * model (k(Z, x) of every prediction block without rescaling Z): the same
 * code at fit and import, so an imported model predicts bit for bit as the
 * fitted one. Scaling by the number of landmarks M, not mk (pitfall P14). */
int pls_impl_derive(pls_impl *im, const gp_kernel *k, gp_error *err);
/* H (mk x mk) = the lower Cholesky factor of I + alpha S S^T for S (mk x n),
 * the upper half unspecified: the closed form's H, the Laplace Hessian and
 * the bound preconditioner. GP_ENOTPD when it is not positive definite. */
int pls_chol_identity_plus_gram(const double *S, size_t mk, size_t n, double alpha, double *H);
/* log p(y | f) summed, g = -d log p / df (n); clipped for poisson_sq when clip. */
double pls_loglik_and_g(const gp_lik *lik, const double *y, const double *f, size_t n, double *g,
                        int clip);
/* Phi (mk x b) = B^T k(Z, X) for b points X (d x b); K (M x b) gets k(Z, X).
 * k is the kernel im->Zp was prepared with. */
void pls_features(const gp_kernel *k, const pls_impl *im, const double *X, size_t b, double *K,
                  double *Phi);
int pls_predict(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                gp_error *err);
/* Joint draws F_s(X*) = phi(X*)^T a_s + chol(S_res(X*, X*)) zeta_s (§5.2 A5):
 * draw s has its own stream gp_rng_derive(req->seed, s) (closed form: mk
 * normals for a_s, then m for zeta_s, then m for the noise). For the
 * particle models a_s is particle s mod J, so draws 0 .. J-1 are the J
 * fitted posterior functions, the same in every request; the residual part
 * is a joint draw over the request's points (same seed and points: same
 * functions). Gaussian: original units, noise added with include_noise. */
int pls_sample(const gp_model *model, const gp_sample_request *req, double *samples, gp_error *err);

#endif
