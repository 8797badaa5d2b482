/* gpserve core: small reusable optimisers (all minimise).
 *
 * The objective returns f(x) and writes its gradient; it may return +INFINITY
 * (or NaN) for a point where it cannot be evaluated, e.g. a failed Cholesky, and
 * both optimisers then back off instead of failing. */
#ifndef GP_OPTIM_H
#define GP_OPTIM_H

#include <stddef.h>

#include "core/base/cancel.h"
#include "core/base/error.h"

typedef double (*gp_objective_fn)(void *ctx, const double *x, double *grad);

/* Called after every accepted iteration with the current objective; a nonzero
 * return stops the optimiser with GP_ECANCELLED. May be NULL. */
typedef int (*gp_iter_fn)(void *ctx, int iteration, double f);

typedef struct gp_lbfgs_options {
    int max_iterations;   /* default 200 */
    int memory;           /* history pairs, default 10 */
    double grad_tol;      /* stop when max|g_i| <= grad_tol * max(1, |f|); default 1e-6 */
    double rel_tol;       /* stop when |f_prev - f| <= rel_tol * max(|f_prev|, |f|, 1); default 1e-10 */
    int max_evaluations;  /* objective calls, default 20 * max_iterations */
    /* Polled after every objective call (default NULL: never): an objective
     * that stops early on it returns +inf, and the run ends with
     * GP_ECANCELLED instead of searching on. */
    const gp_cancel *cancel;
} gp_lbfgs_options;

typedef struct gp_optim_result {
    double f;            /* objective at the returned x */
    int iterations;
    int evaluations;
    int converged;       /* 1 when a tolerance was met, 0 when a limit stopped it */
    const char *reason;  /* static text: "gradient tolerance", "max iterations", ... */
} gp_optim_result;

void gp_lbfgs_default_options(gp_lbfgs_options *opt);

/* Minimise from x (n entries, updated in place to the best point found).
 * Line search: backtracking with the strong Wolfe conditions (c1 = 1e-4,
 * c2 = 0.9) and cubic interpolation; a non-finite objective along the search
 * direction shrinks the step by 10x, and a direction that is not a descent
 * direction resets the history to steepest descent. Returns GP_OK (see
 * result->converged), GP_ECANCELLED, GP_ENOMEM, or GP_ENOTPD when the objective is
 * not finite at the starting point. */
int gp_lbfgs_minimize(gp_objective_fn fn, void *ctx, double *x, size_t n,
                      const gp_lbfgs_options *opt, gp_iter_fn on_iter, void *iter_ctx,
                      gp_optim_result *result, gp_error *err);

/* Adam (Kingma & Ba) state for n parameters; the caller owns m and v buffers
 * through gp_adam_init / gp_adam_free. */
typedef struct gp_adam {
    size_t n;
    double lr, beta1, beta2, eps;
    long t;
    double *m; /* owned */
    double *v; /* owned */
} gp_adam;

/* lr > 0; beta1 = 0.9, beta2 = 0.999, eps = 1e-8 unless changed afterwards. */
int gp_adam_init(gp_adam *adam, size_t n, double lr, gp_error *err);
/* One step x <- x - lr * mhat / (sqrt(vhat) + eps) for a gradient of the
 * objective being minimised. Non-finite gradient entries are treated as 0. */
void gp_adam_step(gp_adam *adam, double *x, const double *grad);
/* Same with an explicit learning rate for this step (annealing schedules). */
void gp_adam_step_lr(gp_adam *adam, double *x, const double *grad, double lr);
void gp_adam_free(gp_adam *adam);

/* Fit with Adam for up to max_iterations steps, keeping the best x seen. */
int gp_adam_minimize(gp_objective_fn fn, void *ctx, double *x, size_t n, double lr,
                     int max_iterations, gp_iter_fn on_iter, void *iter_ctx,
                     gp_optim_result *result, gp_error *err);

#endif
