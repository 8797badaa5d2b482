/* pls: A1 by the likelihood of the labels ([D], issue 40): the Laplace
 * marginal likelihood of an exact GP on the subsets (see hyper_laplace.c). */
#ifndef GP_METHODS_PLS_HYPER_LAPLACE_H
#define GP_METHODS_PLS_HYPER_LAPLACE_H

#include "core/methods/pls/internal.h"
#include "core/optim/driver.h"

/* The workspace of evaluations on at most n_max points: K, the factor of B
 * (then the gradient's weights) and L^{-1} sw K, n_max x n_max each, and
 * nine vectors (a, f, g, sw, b, a_new, a_try, s2, u). a is the warm start
 * of the next evaluation's Newton iteration. */
typedef struct pls_lap_ws {
    size_t n, n_max;
    double *K, *L, *C, *vec;
} pls_lap_ws;

int pls_lap_alloc(pls_lap_ws *w, size_t n_max, gp_error *err);
void pls_lap_free(pls_lap_ws *w);
/* Start the next evaluation's Newton iteration from a = 0. */
void pls_lap_forget(pls_lap_ws *w);
/* log q(y) on the n points Xt (d x n) with labels y, latent prior GP(off, k)
 * (off: n values, NULL: zero) into *lml; grad (gp_kernel_n_params entries,
 * may be NULL) gets its derivatives in the kernel's log-parameters. lik:
 * bernoulli or poisson (log-concave with the third derivative of
 * hyper_laplace.c). */
int pls_lap_eval(pls_lap_ws *w, const gp_kernel *k, const gp_lik *lik, const double *Xt,
                 size_t n, const double *y, const double *off, double *lml, double *grad,
                 const gp_cancel *cancel, gp_error *err);

/* Repeated subset fits of -log q(y) over the free log-parameters of a copy
 * of k (priors, bounds and held parameters of spec), as gp_hyper_problem
 * does for the Gaussian LML (core/inducing/hyper.h): start, fit, apply. */
typedef struct pls_lap_problem pls_lap_problem;
int pls_lap_problem_new(pls_lap_problem **out, const gp_kernel *k, gp_likelihood lik,
                        const gp_hyper_spec *spec, size_t n_max, gp_error *err);
void pls_lap_problem_free(pls_lap_problem *p);
size_t pls_lap_problem_dim(const pls_lap_problem *p);
void pls_lap_problem_start(const pls_lap_problem *p, double *x);
/* Minimise -log q(y) on n <= n_max points from x (in/out: the best point);
 * res->f is -log q there. */
int pls_lap_problem_fit(pls_lap_problem *p, const double *Xt, size_t n, const double *y,
                        const double *off, double *x, const gp_driver_options *opt,
                        gp_driver_result *res, gp_error *err);
/* x into k's free parameters (k has the structure of the problem's kernel). */
void pls_lap_problem_apply(pls_lap_problem *p, const double *x, gp_kernel *k);

#endif
