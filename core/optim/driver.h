/* gpserve core: the hyperparameter driver, the one L-BFGS loop of every
 * method that fits log-parameters (exact, ssgp, and the inducing-point
 * methods through core/inducing).
 *
 * It minimises an objective (the negative log marginal likelihood or bound)
 * from a start point and from `restarts` seeded perturbations of it, keeps
 * the best run, reports progress in the fit's terms (an iteration count that
 * continues across runs and across calls, the budget, the objective in the
 * caller's units) and stops with GP_ECANCELLED when the progress callback
 * or the cancellation token asks. The objective is a plain gp_objective_fn:
 * the driver knows nothing of kernels or models, so shared numerics can use
 * it. */
#ifndef GP_OPTIM_DRIVER_H
#define GP_OPTIM_DRIVER_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/cancel.h"
#include "core/base/error.h"
#include "core/optim/optim.h"

/* The fit's progress callback: iteration of max_iterations with the
 * objective in the caller's units; nonzero asks the driver to stop. */
typedef int (*gp_driver_progress_fn)(void *ctx, int iteration, int max_iterations,
                                     double objective);

typedef struct gp_driver_options {
    int max_iterations;     /* L-BFGS iterations per run; default 200 */
    double tolerance;       /* relative objective change that ends a run; default 1e-10 */
    int restarts;           /* extra runs from perturbed starts; default 0 */
    double restart_spread;  /* each coordinate of restart r gets U(-spread, spread) from
                               gp_rng_derive(seed, r); default log(10) */
    uint64_t seed;
    gp_driver_progress_fn progress; /* may be NULL */
    void *progress_ctx;
    int iteration_base;       /* progress number of this call's first iteration - 1 */
    int max_total;            /* the max_iterations progress reports; default (0):
                                 iteration_base + max_iterations * (restarts + 1) */
    double objective_offset;  /* progress reports -f + objective_offset */
    /* The fit's cancellation token (may be NULL), polled after every
     * objective call and before every run: the objective may also poll it
     * inside a long evaluation and return +inf, and the driver then ends with
     * GP_ECANCELLED without waiting for the next iteration's progress. */
    const gp_cancel *cancel;
} gp_driver_options;

typedef struct gp_driver_result {
    double f;        /* the objective at the returned x (the best run's) */
    int iterations;  /* over every run */
    int evaluations;
    int converged;   /* the best run met a tolerance */
    int restarts;    /* runs after the first */
} gp_driver_result;

void gp_driver_default_options(gp_driver_options *opt);

/* Minimise fn from x (n > 0 entries; on success the best point found). Run
 * 0 starts at x, run r at x plus its seeded perturbation; the lowest final
 * objective wins. Errors: GP_ECANCELLED when progress asked to stop; without
 * restarts the run's own error (e.g. GP_ENOTPD when fn is not finite at x);
 * with restarts a failed run is skipped and GP_ENOTPD comes back only when
 * no run succeeded; GP_ENOMEM. res is filled in every case. */
int gp_driver_minimize(gp_objective_fn fn, void *ctx, double *x, size_t n,
                       const gp_driver_options *opt, gp_driver_result *res, gp_error *err);

#endif
