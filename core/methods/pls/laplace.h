/* pls: the Laplace mode of the potential and its amplitude ([D], §5.2). */
#ifndef GP_METHODS_PLS_LAPLACE_H
#define GP_METHODS_PLS_LAPLACE_H

#include "core/methods/pls/internal.h"

void pls_newton_free(newton_ws *w);
int pls_newton_alloc(newton_ws *w, const gp_lik *lik, const double *Phi, const double *y, size_t n,
                     size_t mk, gp_error *err);
/* Newton from a (mk, updated in place) to the mode; *V gets V(a*), w->H the
 * factor of H* (upper half not zeroed). Stops when the Newton decrement
 * grad^T H^{-1} grad falls below 1e-18 (1 + |V|) or no halving lowers V. */
int pls_newton_mode(newton_ws *w, double *a, double *V, gp_error *err);
/* [D] The amplitude (as implemented, §5.2; P20): the A1 regression on the
 * 0/1 labels gives an amplitude for a function over [0, 1], too small for a
 * logit (poisson keeps its A1 amplitude: log(y + 1/2) is on the log-rate
 * scale already). The kernel's variance is multiplied by
 * the c maximising the Laplace marginal likelihood of the model itself on
 * the training features (golden section over log c in [-2, 8]; the features
 * scale as c^(1/2) in k-mode and c in r-mode). a gets the mode at that c. */
int pls_laplace_amplitude(newton_ws *w, int rmode, double *a, double *log_c);

/* A non-gaussian mean's coefficients beta (p, in: the start, out: the
 * result) on the latent scale: the likelihood's regression of y on the
 * basis H (n x p, column-major) alone, f = H beta, with a weak ridge (a
 * N(0, 100) prior per coefficient), by Newton. For log-concave likelihoods
 * (bernoulli: the logistic regression of the labels). */
int pls_glm_coef(const gp_lik *lik, const double *H, size_t n, size_t p, const double *y,
                 double *beta, gp_error *err);

#endif
