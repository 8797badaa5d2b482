/* The hyperparameter driver: see core/optim/driver.h. */
#include "core/optim/driver.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/linalg/linalg.h"

void gp_driver_default_options(gp_driver_options *opt)
{
    memset(opt, 0, sizeof *opt);
    opt->max_iterations = 200;
    opt->tolerance = 1e-10;
    opt->restart_spread = 2.302585092994046; /* log(10): a decade each way */
}

/* What the L-BFGS iteration callback needs to speak in the fit's terms. */
typedef struct run_progress {
    const gp_driver_options *opt;
    int base, max_total;
} run_progress;

static int on_iteration(void *ctx, int iteration, double f)
{
    const run_progress *p = ctx;
    if (p->opt->progress == NULL)
        return 0;
    return p->opt->progress(p->opt->progress_ctx, p->base + iteration, p->max_total,
                            -f + p->opt->objective_offset);
}

/* Run r's start: x0, perturbed for r > 0. */
static void run_start(const gp_driver_options *opt, int r, const double *x0, double *x, size_t n)
{
    memcpy(x, x0, n * sizeof *x);
    if (r == 0)
        return;
    gp_rng rng;
    gp_rng_derive(&rng, opt->seed, (uint64_t)r);
    for (size_t i = 0; i < n; i++)
        x[i] += opt->restart_spread * (2.0 * gp_rng_uniform(&rng) - 1.0);
}

int gp_driver_minimize(gp_objective_fn fn, void *ctx, double *x, size_t n,
                       const gp_driver_options *opt, gp_driver_result *res, gp_error *err)
{
    memset(res, 0, sizeof *res);
    res->f = INFINITY;
    res->restarts = opt->restarts;
    gp_lbfgs_options lb;
    gp_lbfgs_default_options(&lb);
    lb.max_iterations = opt->max_iterations;
    lb.max_evaluations = 20 * opt->max_iterations;
    lb.rel_tol = opt->tolerance;
    lb.cancel = opt->cancel;
    run_progress prog = {opt, opt->iteration_base,
                         opt->max_total > 0 ? opt->max_total
                                            : opt->iteration_base +
                                                  opt->max_iterations * (opt->restarts + 1)};
    double *x0 = gp_alloc_doubles(n, err), *xr = gp_alloc_doubles(n, err);
    int rc = x0 && xr ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK)
        memcpy(x0, x, n * sizeof *x0);
    for (int r = 0; rc == GP_OK && r <= opt->restarts; r++) {
        if (gp_cancel_requested(opt->cancel)) {
            rc = gp_error_set(err, GP_ECANCELLED, NULL, "fit cancelled");
            break;
        }
        run_start(opt, r, x0, xr, n);
        gp_optim_result run;
        memset(&run, 0, sizeof run);
        gp_error run_err;
        gp_error_clear(&run_err);
        int run_rc = gp_lbfgs_minimize(fn, ctx, xr, n, &lb, on_iteration, &prog, &run, &run_err);
        prog.base += run.iterations;
        res->iterations += run.iterations;
        res->evaluations += run.evaluations;
        if (run_rc == GP_ECANCELLED)
            rc = gp_error_set(err, GP_ECANCELLED, NULL, "fit cancelled");
        else if (run_rc == GP_OK && run.f < res->f) {
            res->f = run.f;
            res->converged = run.converged;
            memcpy(x, xr, n * sizeof *x);
        } else if (run_rc != GP_OK && opt->restarts == 0)
            rc = gp_error_set(err, run_rc, run_err.field, "%s", run_err.message);
    }
    if (rc == GP_OK && !isfinite(res->f))
        rc = gp_error_set(err, GP_ENOTPD, NULL,
                          "no starting point gave a finite objective (the covariance is not "
                          "positive definite there)");
    free(x0);
    free(xr);
    return rc;
}
