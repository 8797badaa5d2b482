/* Benchmark support: toy Bayesian logistic regression and EP on it, the
 * source of the messages of KJIT's Experiment 1 (docs/methods/
 * kernel-jit-online.md §5: d = 20, n = 400 points a problem, 5 EP iterations,
 * seeds 1-20, one fixed true w ~ N(0, I)).
 *
 * Model: w ~ N(0, prior_var I) in R^d; x_i ~ N(0, x_scale^2 I); y_i ~
 * Bernoulli(sigma(w^T x_i)). EP keeps one Gaussian site per point on
 * z_i = w^T x_i, in natural parameters (tau_i, nu_i): the posterior is
 * N(Sigma h, Sigma) with Sigma = (I / prior_var + sum tau_i x_i x_i^T)^-1 and
 * h = sum nu_i x_i. Visiting site i: the cavity N(z_i; m, v) (the marginal of
 * z_i with site i removed) is the message m_{z->f}; the observed label's
 * message m_{p->f} is Beta(p; y + 1, 2 - y) (the likelihood sigma(z)^y
 * (1 - sigma(z))^(1-y) of the factor written as a Beta in p = sigma(z)); the
 * projected tilted N(mean, var) (kjit_oracle, or a learned operator) sets the
 * new site, tau = 1/var - 1/v, nu = mean/var - m/v, optionally damped.
 * Sequential EP: sites in order 0..n-1 each sweep; Sigma is refactorised
 * from the sites after each sweep (the rank-one downdates between drift). */
#ifndef GP_BENCH_KJIT_EP_H
#define GP_BENCH_KJIT_EP_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/error.h"

typedef struct gp_kjit_problem {
    size_t n, d;
    double *X; /* n x d, row-major: point i at X + i d */
    double *y; /* n labels in {0, 1} */
} gp_kjit_problem;

/* The true weights: d standard normals from gp_rng seed `seed`. */
int gp_kjit_true_w(size_t d, uint64_t seed, double *w);
/* n points of dimension d (w has d entries) from gp_rng seed `seed`. */
int gp_kjit_problem_make(const double *w, size_t d, size_t n, double x_scale, uint64_t seed,
                         gp_kjit_problem *p, gp_error *err);
void gp_kjit_problem_free(gp_kjit_problem *p);
/* The Beta message of label y: Beta(y + 1, 2 - y). */
void gp_kjit_label_beta(double y, double *a, double *b);

typedef struct gp_kjit_ep {
    const gp_kjit_problem *prob;
    size_t n, d;
    double prior_var;
    double *Sigma; /* d x d (symmetric, both triangles) */
    double *h;     /* d */
    double *mu;    /* d: Sigma h */
    double *tau, *nu; /* n sites */
    double *work;  /* 2 d */
    size_t skipped; /* updates refused: a site or cavity not finite or not proper */
    size_t clamped; /* improper sites set flat (gp_kjit_ep_update) */
} gp_kjit_ep;

/* Sites all zero (the posterior is the prior). */
int gp_kjit_ep_init(gp_kjit_ep *ep, const gp_kjit_problem *p, double prior_var, gp_error *err);
void gp_kjit_ep_free(gp_kjit_ep *ep);
/* The cavity N(z_i; *m, *v) of site i; -1 when its variance is not positive
 * (not seen with the oracle: the logistic sites stay non-negative). */
int gp_kjit_ep_cavity(const gp_kjit_ep *ep, size_t i, double *m, double *v);
/* Site i from the projected tilted N(mean, var) against the cavity (m, v):
 * the damped step (1 - damping) old + damping new; returns 1 when applied as
 * is, 0 when the new site precision came out negative (an outgoing message
 * that is not proper, §8.6: var above the cavity's v) and the site was set
 * flat (tau = nu = 0; counted in ep->clamped), or was not finite and refused
 * (ep->skipped). */
int gp_kjit_ep_update(gp_kjit_ep *ep, size_t i, double m, double v, double mean, double var,
                      double damping);
/* Sigma and mu recomputed from the sites (Cholesky of the precision). */
int gp_kjit_ep_refresh(gp_kjit_ep *ep, gp_error *err);
/* The share of n fresh points (x ~ N(0, x_scale^2 I), labels from w, gp_rng
 * seed `seed`) that the posterior mean mu misclassifies (sign of mu^T x). */
double gp_kjit_test_error(const double *w, const double *mu, size_t d, size_t n, double x_scale,
                          uint64_t seed);
/* KL[N(mu1, S1) || N(mu2, S2)] in d dimensions (S column-major, positive
 * definite); NAN when a Cholesky factorisation fails. */
double gp_kjit_gauss_kl_d(const double *mu1, const double *S1, const double *mu2,
                          const double *S2, size_t d);

#endif
