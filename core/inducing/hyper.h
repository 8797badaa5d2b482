/* gpserve core: a prior's hyperparameters by the exact log marginal
 * likelihood on a few points, for methods that fit them on a small set (pls's
 * subsets, gwi's inducing inputs with their targets) and then freeze them.
 *
 * The objective is -LML of t ~ N(0, K + s2 I) (core/kernel/lml.h) over the
 * unconstrained vector x = (the kernel's free log-parameters, in the order of
 * gp_kernel_get_params, then, when the noise is learned, its unconstrained
 * value as gp_noise_param describes it), minimised by gp_driver_minimize. A
 * method that fits once calls gp_hyper_fit_points; one that combines several
 * fits in x (pls averages R subset fits in log space) uses gp_hyper_problem.
 *
 * Points are point-major (each column one point, the kernel's input_dim
 * rows) in the caller's working units. */
#ifndef GP_INDUCING_HYPER_H
#define GP_INDUCING_HYPER_H

#include <stddef.h>

#include "core/base/cancel.h"
#include "core/base/error.h"
#include "core/kernel/kernel.h"
#include "core/model/mean.h"
#include "core/model/method.h"
#include "core/optim/driver.h"

/* The workspace of repeated fits on at most n_max points each. Every array is
 * owned by the problem (gp_hyper_problem_free); the points are borrowed for
 * the length of a fit. Read-only for callers except through the functions. */
typedef struct gp_hyper_problem {
    gp_kernel *k;           /* working copy the objective sets its parameters on */
    const double *Xt, *t;   /* the current fit's points (d x n) and targets (n) */
    size_t n, n_max;        /* points of the current fit; the capacity of A and alpha */
    size_t np, n_free;      /* the kernel's parameters; those optimised */
    size_t *free_idx;       /* n_free indices into the parameter vector */
    gp_noise_param noise;
    double *theta;          /* np (+1 spare): the working copy's parameters, fixed ones included */
    double *grad;           /* np + 1: d LML / d log-parameters, then d / d log s2 */
    double *A, *alpha;      /* n_max x n_max and n_max: gp_exact_lml_grad_on's workspace */
    const gp_cancel *cancel; /* the current fit's token, polled inside an evaluation */
    const gp_hyper_spec *spec; /* the fit's priors, bounds, held parameters (may be NULL) */
    /* A mean profiled out of the LML (gp_hyper_problem_set_mean; zero mean:
     * p 0, every pointer NULL and the objective the plain LML): its basis
     * H of the current fit's points (n_max x p), its scratch, and beta, the
     * GLS coefficients at the point the objective last evaluated. */
    gp_mean_type mean;
    size_t p;
    double *H, *beta, *mean_work;
} gp_hyper_problem;

/* A problem for kernel k (copied: k is not touched) and noise np (copied),
 * fits of at most n_max points, under the priors and bounds of spec (kept by
 * pointer; NULL: none): the fit runs through gp_hyper_minimize, so x stays
 * in the method's coordinates and inside the bounds. On failure p needs no
 * gp_hyper_problem_free. */
int gp_hyper_problem_init(gp_hyper_problem *p, const gp_kernel *k, const gp_noise_param *np,
                          const gp_hyper_spec *spec, size_t n_max, gp_error *err);
void gp_hyper_problem_free(gp_hyper_problem *p);

/* Profile a mean of type t out of every later fit's LML (t zero: nothing):
 * the objective becomes the LML of the residual t - H beta at the GLS
 * estimate beta (gp_exact_lml_grad_basis_on, core/kernel/lml.h), and a
 * successful gp_hyper_problem_fit leaves in p->beta (p->p entries) the
 * coefficients at its best point. */
int gp_hyper_problem_set_mean(gp_hyper_problem *p, gp_mean_type t, gp_error *err);

/* Entries of x: n_free, plus one when the noise is learned (may be 0). */
size_t gp_hyper_problem_dim(const gp_hyper_problem *p);

/* x (gp_hyper_problem_dim entries) = the working copy's free parameters and
 * the noise's start (gp_noise_param_x0). The working copy holds the kernel's
 * values until a fit, then the last point the objective evaluated (not
 * necessarily the best one: the driver returns that in x); pls starts each
 * subset fit from there. */
void gp_hyper_problem_start(const gp_hyper_problem *p, double *x);

/* Minimise -LML on the n <= n_max points Xt with targets t from x (in/out:
 * on success the best point), with gp_driver_minimize and opt (whose cancel
 * token is also polled inside every evaluation). res (not NULL) receives the
 * driver's result; res->f is -LML at x. With nothing to optimise (dim 0) the
 * LML is evaluated once at the start instead: res->evaluations 1, converged
 * 1, GP_ENOTPD when it is not finite. Errors as gp_driver_minimize's. */
int gp_hyper_problem_fit(gp_hyper_problem *p, const double *Xt, size_t n, const double *t,
                         double *x, const gp_driver_options *opt, gp_driver_result *res,
                         gp_error *err);

/* Put x into k's free parameters (k has the structure of the kernel p was made
 * from; its fixed parameters take p's values) and the noise it describes into
 * *s2 (the noise's start when not learned). x's kernel part becomes the
 * point gp_hyper_problem_start reads. */
void gp_hyper_problem_apply(gp_hyper_problem *p, const double *x, gp_kernel *k, double *s2);

/* Maximise the exact log marginal likelihood of t ~ N(0, K + s2 I) on the n
 * points Xt (d x n point-major, working units) over the free parameters of k
 * (updated in place) and the noise as np describes it (its value into *s2),
 * with gp_driver_minimize and the options opt (iterations, tolerance, seed,
 * progress, cancel). res (may be NULL) receives the driver's result. On an
 * error (GP_ECANCELLED, GP_ENOTPD, GP_ENOMEM) k and *s2 are left as they were. */
int gp_hyper_fit_points(gp_kernel *k, const gp_noise_param *np, const gp_hyper_spec *spec,
                        double *s2, const double *Xt, size_t n, const double *t,
                        const gp_driver_options *opt, gp_driver_result *res, gp_error *err);

#endif
