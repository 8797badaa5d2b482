/* gpserve core: the multiclass softmax likelihood (issue 35; docs/design/numerics.md "Softmax").
 *
 * C latent functions f = (f_0, ..., f_{C-1}), one per class, and
 *     p(y = c | f) = softmax(f)_c = exp(f_c) / sum_k exp(f_k),   labels y in {0, ..., C-1}.
 * A model's posterior over the latents at a point is mean-field over classes:
 * f_c ~ N(mu_c, var_c) independently (one q(u) per class, as GPflow's Softmax
 * with an independent q per latent, or GPyTorch's SoftmaxLikelihood without
 * mixing weights).
 *
 * Expectations over that C-dimensional Gaussian use Monte Carlo with a FIXED
 * set of standard-normal draws (gp_softmax_mc), not Gauss-Hermite: a tensor
 * rule needs n^C points (20^10 for ten classes), and sparse grids have
 * negative weights. The draws are seeded from a constant and come in
 * antithetic pairs (e, -e), so the objective is a deterministic, smooth
 * function of (mu, var) and its gradient is exact for the estimate (an
 * optimiser and a finite-difference test see the same function).
 *
 * Layouts: at m points, mu, var and probabilities are m x C column-major
 * (column c = class c), as core/model/mixture.h lays out components. Nothing
 * here is threaded, and each point's arithmetic reads only that point's row:
 * results are bit-identical for any thread count or batching of the caller. */
#ifndef GP_SOFTMAX_H
#define GP_SOFTMAX_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/error.h"
#include "core/base/rng.h"

/* The most classes a softmax model takes (labels 0..63). */
#define GP_SOFTMAX_MAX_CLASSES 64
/* Draws of the ELBO's expected log likelihood, and of the predictive. */
#define GP_SOFTMAX_DRAWS 64
#define GP_SOFTMAX_PREDICT_DRAWS 1024
/* Most draws of one set (a set is S x C doubles). */
#define GP_SOFTMAX_MAX_DRAWS 65536
/* The constant seed of every draw set: the same draws in every fit and predict. */
#define GP_SOFTMAX_SEED UINT64_C(0x5f0f7a3c1a55e5)
/* A predictive probability is kept in [GP_SOFTMAX_PROB_MIN, 1 - 2^-53]: in
 * (0, 1) and summing to 1 within 1e-12 for any latent means. */
#define GP_SOFTMAX_PROB_MIN 1e-300

/* The class count of labels y (n of them): C = max label + 1. GP_EDATA naming
 * "y[i]" for a label that is not an integer in 0..GP_SOFTMAX_MAX_CLASSES-1
 * (non-finite, fractional, negative, too large), naming "y" when n = 0 or all
 * labels are one class (whichever it is). A class with no label below the maximum is
 * allowed (its latent is then pushed down by the data). */
int gp_softmax_classes(const double *y, size_t n, size_t *classes, gp_error *err);

/* A fixed set of S standard-normal draws in C dimensions: e[s * C + c] is
 * draw s of class c; draw s + S/2 is minus draw s. Owned (gp_softmax_mc_free). */
typedef struct gp_softmax_mc {
    size_t C, S;
    double *e;
} gp_softmax_mc;

/* C in 2..GP_SOFTMAX_MAX_CLASSES, S even in 2..GP_SOFTMAX_MAX_DRAWS (GP_EINVAL
 * otherwise), GP_ENOMEM. The draws depend only on (C, S). */
int gp_softmax_mc_init(gp_softmax_mc *mc, size_t C, size_t S, gp_error *err);
void gp_softmax_mc_free(gp_softmax_mc *mc);

/* The estimate (1/S) sum_s log softmax(mu + sqrt(var) e_s)_y of
 * E_{f ~ N(mu, diag var)} log p(y | f), y in 0..C-1; mu, var: C each (var < 0
 * taken as 0). dmu and dvar (C each; either may be NULL) get its exact
 * derivatives; where var_c = 0 dvar_c is the limit of the expectation's
 * derivative (Price's theorem, E[d2 log p / df_c^2] / 2) since the estimate's
 * own is not finite there. */
double gp_softmax_expected(const gp_softmax_mc *mc, size_t y, const double *mu, const double *var,
                           double *dmu, double *dvar);

/* p(y = c) = E softmax(f)_c per point (prob: m x C), averaged over mc's draws
 * (use GP_SOFTMAX_PREDICT_DRAWS), the integral over the latent posterior, not
 * the plug-in softmax(mu); clamped to (0, 1) as GP_SOFTMAX_PROB_MIN says. */
void gp_softmax_probabilities(const gp_softmax_mc *mc, const double *mu, const double *var,
                              size_t m, double *prob);

/* log p(y_i | data) = log E softmax(f)_{y_i} per point (logp: m), computed in
 * logs (log-mean-exp over the draws) so a confident wrong answer keeps its
 * digits: the test log likelihood (log loss with a minus sign). */
void gp_softmax_log_predictive(const gp_softmax_mc *mc, const double *mu, const double *var,
                               size_t m, const double *y, double *logp);

/* Labels drawn from Categorical(softmax(f)) for latent draws f (C x count
 * column-major: column j = one draw of the C latents), one uniform from rng each. */
void gp_softmax_draw(const double *f, size_t C, size_t count, gp_rng *rng, double *y);

#endif
