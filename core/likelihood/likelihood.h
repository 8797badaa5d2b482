/* gpserve core: observation models p(y | f) for a latent GP value f, and
 * what the methods and the service need of them
 * (docs/methods/sparse-variational-and-pls.md §1.4(g), §5.2 A5).
 *
 *   gaussian    y real,              p = N(y | f, s2)          (s2 = gp_lik.noise)
 *   bernoulli   y in {0, 1},         p(y=1) = logistic(f)      (logit link)
 *   poisson     y in {0, 1, 2, ...}, rate exp(f)               (log link)
 *   poisson_sq  y in {0, 1, 2, ...}, rate f^2                  (the thesis's square link,
 *               §1.4(g); log f^2 is taken as log(f^2 + GP_LIK_SQ_EPS), pitfall P19, so the
 *               density and its derivatives stay finite at f = 0)
 *   softmax     y in {0, ..., C-1},  p(y=c) = softmax(f)_c over C latent functions, one per
 *               class (core/likelihood/softmax.h; C from the labels, at most
 *               GP_SOFTMAX_MAX_CLASSES). The scalar functions below do not apply to it:
 *               a softmax model's expectations and predictive are softmax.h's.
 *
 * The latent function of a non-Gaussian model is in natural units: labels are
 * never standardised. Predictive distributions of f are given as equally
 * weighted Gaussian mixtures in the layout of core/model/mixture.h (mu and
 * var m x K column-major, column k = component k; K = 1 is one Gaussian). */
#ifndef GP_LIKELIHOOD_H
#define GP_LIKELIHOOD_H

#include <stddef.h>

#include "core/base/error.h"
#include "core/base/rng.h"

typedef enum gp_likelihood {
    GP_LIK_GAUSSIAN = 0, /* the default: a zeroed request is Gaussian */
    GP_LIK_BERNOULLI,
    GP_LIK_POISSON,
    GP_LIK_POISSON_SQ,
    GP_LIK_SOFTMAX, /* multiclass: C latents (softmax.h); persisted as 4 */
    GP_LIK_COUNT
} gp_likelihood;

#define GP_LIK_SQ_EPS 1e-6
/* Gauss-Hermite points of the expectations below (GPflow's default). */
#define GP_LIK_QUADRATURE_POINTS 20
#define GP_LIK_QUADRATURE_MAX 64

/* "gaussian" | "bernoulli" | "poisson" | "poisson_sq" | "softmax"; -1 when unknown. */
int gp_likelihood_from_name(const char *name);
const char *gp_likelihood_name(gp_likelihood l);

/* The likelihood of a model: its type and, for gaussian, the noise variance. */
typedef struct gp_lik {
    gp_likelihood type;
    double noise; /* gaussian only (> 0) */
} gp_lik;

/* GP_EDATA naming the first bad cell "y[i]" when a label does not fit l:
 * bernoulli 0 or 1, the Poisson ones a non-negative integer below 1e9,
 * softmax an integer class 0..GP_SOFTMAX_MAX_CLASSES-1 with at least two
 * classes present (naming "y" when there is one class: gp_softmax_classes). */
int gp_likelihood_check_labels(gp_likelihood l, const double *y, size_t n, gp_error *err);

/* ---- the density and its derivatives in f ---- */
/* log p(y | f) with its normalising constant. */
double gp_lik_log_density(const gp_lik *lik, double y, double f);
/* d/df and d2/df2 of log p(y | f) (either pointer may be NULL). */
void gp_lik_derivatives(const gp_lik *lik, double y, double f, double *d1, double *d2);
/* Vectorised over n points: returns sum_i log p(y_i | f_i); d1 (n, may be
 * NULL) gets the first derivatives. */
double gp_lik_log_density_sum(const gp_lik *lik, const double *y, const double *f, size_t n,
                              double *d1);
/* sup_f -d2/df2 log p(y | f) over f for every label: gaussian 1/s2,
 * bernoulli 1/4; INFINITY for the Poisson ones (unbounded, or not concave). */
double gp_lik_curvature_bound(const gp_lik *lik);

/* ---- Gaussian expectations ---- */
/* Nodes x and weights w (n each, n in 1..GP_LIK_QUADRATURE_MAX) of
 * probabilists' Gauss-Hermite quadrature: sum_i w_i g(x_i) ~ E g(xi) for
 * xi ~ N(0, 1), exact for polynomials of degree < 2n (Golub-Welsch).
 * Nodes ascending, symmetric; weights sum to 1. */
int gp_gauss_hermite(size_t n, double *x, double *w, gp_error *err);

typedef struct gp_quadrature {
    size_t n;
    double x[GP_LIK_QUADRATURE_MAX], w[GP_LIK_QUADRATURE_MAX];
} gp_quadrature;
int gp_quadrature_init(gp_quadrature *q, size_t n, gp_error *err);

/* E[log p(y | f)] for f ~ N(mu, v), v >= 0: closed form for gaussian
 * (-(log 2 pi s2)/2 - ((y - mu)^2 + v) / (2 s2)) and poisson
 * (y mu - exp(mu + v/2) - log Gamma(y + 1)), Gauss-Hermite with q otherwise.
 * dmu and dv (may be NULL) are the exact derivatives of the returned value
 * (of the quadrature sum itself, so finite differences of it agree). */
double gp_lik_expected(const gp_lik *lik, const gp_quadrature *q, double y, double mu, double v,
                       double *dmu, double *dv);

/* ---- the predictive distribution of y ---- */
/* From the latent mixture (mu, var: m x K) at m points, per point: obs_mean
 * and obs_var, the mean and variance of y (bernoulli: p(y=1) integrated over
 * f, not the plug-in, and p(1-p); Poisson: the count's mean and variance,
 * E[rate] and E[rate] + Var[rate]); rate_mean and rate_var, the rate's
 * moments (Poisson ones only; may be NULL otherwise). Gaussian: obs_mean =
 * the mixture mean, obs_var = its variance + s2. Exact moments where they
 * exist in closed form (log-normal and square-of-normal rates), q-point
 * quadrature for the logistic. */
void gp_lik_predict(const gp_lik *lik, const gp_quadrature *q, const double *mu,
                    const double *var, size_t m, size_t K, double *obs_mean, double *obs_var,
                    double *rate_mean, double *rate_var);

/* Quantiles of y per point (out m x nq, column j = levels[j] in (0, 1)):
 * the smallest y with P(Y <= y) >= level. Poisson ones: counts, from the
 * mixed Poisson's CDF (quadrature over each component); bernoulli: 0 or 1;
 * gaussian: of the mixture with s2 added to every variance. */
void gp_lik_quantiles(const gp_lik *lik, const gp_quadrature *q, const double *mu,
                      const double *var, size_t m, size_t K, const double *levels, size_t nq,
                      double *out);

/* P(Y <= c_i) per point (out, m) for the Poisson likelihoods' mixed count
 * of the latent mixture (mu, var: m x K): the CDF gp_lik_quantiles inverts,
 * so y_i >= its level-a quantile exactly when P(Y <= y_i) >= a; 0 for c_i < 0. */
void gp_lik_count_cdf(const gp_lik *lik, const gp_quadrature *q, const double *mu,
                      const double *var, size_t m, size_t K, const double *c, double *out);

/* log p(y_i | data) = log( (1/K) sum_k E_{N(mu_ik, var_ik)} p(y_i | f) ) per
 * point (logp, m): the test log likelihood (log loss with a minus sign). */
void gp_lik_log_predictive(const gp_lik *lik, const gp_quadrature *q, const double *mu,
                           const double *var, size_t m, size_t K, const double *y, double *logp);

/* Draws of y given latent values f (count of them) from rng: gaussian
 * f + sqrt(s2) e, bernoulli 0/1, Poisson counts. */
void gp_lik_draw(const gp_lik *lik, const double *f, size_t count, gp_rng *rng, double *y);

/* ---- Poisson helpers ---- */
/* P(Y <= k) for Y ~ Poisson(rate), rate >= 0 (regularised incomplete gamma). */
double gp_poisson_cdf(double k, double rate);
/* A Poisson(rate) draw (inversion below rate 10, Hormann's PTRS above). */
double gp_rng_poisson(gp_rng *rng, double rate);

#endif
