/* pls: hyperparameters on subsets (§5.2 A1): the exact marginal likelihood
 * of a regression target (thesis) or the Laplace marginal likelihood of the
 * labels ([D], hyper_laplace.c). */
#include "core/methods/pls/hyper.h"

#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/inducing/hyper.h"
#include "core/linalg/linalg.h"
#include "core/methods/pls/hyper_laplace.h"
#include "core/model/method.h"
#include "core/optim/driver.h"

/* ---- A1: hyperparameters by the exact marginal likelihood on subsets ---- */

/* Indices of the sub points nearest (Euclidean, standardised) to point c;
 * ties by index, so the choice is deterministic. */
typedef struct dist_idx {
    double d;
    size_t i;
} dist_idx;

static int dist_cmp(const void *a, const void *b)
{
    const dist_idx *x = a, *y = b;
    if (x->d != y->d)
        return x->d < y->d ? -1 : 1;
    return x->i < y->i ? -1 : (x->i > y->i);
}

static int nearest_subset(const double *Xt, size_t n, size_t d, size_t c, size_t sub,
                          size_t *idx, gp_error *err)
{
    dist_idx *di = malloc(n * sizeof *di);
    if (di == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        double s = 0.0;
        for (size_t k = 0; k < d; k++) {
            double e = Xt[i * d + k] - Xt[c * d + k];
            s += e * e;
        }
        di[i].d = s;
        di[i].i = i;
    }
    qsort(di, n, sizeof *di, dist_cmp);
    for (size_t i = 0; i < sub; i++)
        idx[i] = di[i].i;
    free(di);
    return GP_OK;
}

static int size_cmp(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : (x > y);
}

/* [D] sub distinct indices uniformly (partial Fisher-Yates), increasing:
 * a subset that sees the whole input distribution (the nearest-neighbour
 * subsets of spam's heavy-tailed inputs saw constant columns). */
static int random_subset(gp_rng *rng, size_t n, size_t sub, size_t *idx, gp_error *err)
{
    size_t *perm = malloc(n * sizeof *perm);
    if (perm == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    for (size_t i = 0; i < sub; i++) {
        size_t j = i + (size_t)gp_rng_below(rng, n - i), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (size_t i = 0; i < sub; i++)
        idx[i] = perm[i];
    free(perm);
    qsort(idx, sub, sizeof *idx, size_cmp);
    return GP_OK;
}

/* The job budget of a fit is the Langevin steps (the descriptor's
 * iterations_option), so the subset fits of A1 report iteration 0 of it: a
 * job shows them as under way, with their objective, and can be cancelled
 * during them, and the progress never runs past the budget. */
static int hyper_progress(void *ctx, int iteration, int max_iterations, double objective)
{
    (void)iteration;
    (void)max_iterations;
    const hyp_run *run = ctx;
    return run->req->progress(run->req->progress_ctx, 0, run->max_total, objective);
}

/* The optimiser's options of one subset fit (both objectives of A1). */
static void subset_options(hyp_run *run, gp_driver_options *opt)
{
    gp_driver_default_options(opt);
    opt->max_iterations = run->set->max_iterations;
    opt->tolerance = run->set->tolerance;
    opt->seed = run->req->seed;
    opt->progress = run->req->progress ? hyper_progress : NULL;
    opt->progress_ctx = run;
    opt->iteration_base = 0;
    opt->max_total = run->max_total;
    opt->cancel = &run->req->cancel;
}

/* A subset fit's iterations and objective into the run's diagnostics. */
static void subset_account(hyp_run *run, const gp_driver_result *res)
{
    run->diag->iterations += res->iterations;
    run->diag->evaluations += res->evaluations;
    run->diag->converged = res->converged;
    run->lml_sum += -res->f;
}

/* One subset fit on Xs, ts; x gets the free log-parameters and, last, the
 * noise's unconstrained value. It starts where the previous subset's fit left
 * the problem's kernel (gp_hyper_problem_start), the noise from its start. */
static int hyp_fit_one(hyp_run *run, gp_hyper_problem *p, const double *Xs, const double *ts,
                       size_t sub, double *x, gp_error *err)
{
    gp_hyper_problem_start(p, x);
    if (gp_hyper_problem_dim(p) == 0)
        return GP_OK;
    gp_driver_options opt;
    subset_options(run, &opt);
    gp_driver_result res;
    int rc = gp_hyper_problem_fit(p, Xs, sub, ts, x, &opt, &res, err);
    subset_account(run, &res);
    return rc;
}

/* The subset of repeat r into Xs, ts and, when off is not NULL, offs (all
 * points when there is one fit). */
static int hyp_subset(const hyp_run *run, const double *Xt, const double *t, const double *off,
                      size_t n, size_t d, size_t sub, size_t r, double *Xs, double *ts,
                      double *offs, gp_error *err)
{
    if (sub == n) {
        memcpy(Xs, Xt, n * d * sizeof *Xt);
        memcpy(ts, t, n * sizeof *t);
        if (off)
            memcpy(offs, off, n * sizeof *off);
        return GP_OK;
    }
    gp_rng rng;
    gp_rng_derive(&rng, run->req->seed, STREAM_SUBSET + r);
    size_t c = (size_t)gp_rng_below(&rng, n), *idx = malloc(sub * sizeof *idx);
    if (idx == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    int rc = run->set->subset_random ? random_subset(&rng, n, sub, idx, err)
                                     : nearest_subset(Xt, n, d, c, sub, idx, err);
    for (size_t i = 0; rc == GP_OK && i < sub; i++) {
        memcpy(Xs + i * d, Xt + idx[i] * d, d * sizeof *Xt);
        ts[i] = t[idx[i]];
        if (off)
            offs[i] = off[idx[i]];
    }
    free(idx);
    return rc;
}

/* A1 (§5.2): R subset fits of the regression target t, log-parameters
 * averaged into model->kernel; *s2 gets the averaged noise. A mean is
 * profiled in each subset's LML (GLS of t on the basis) and its coefficients
 * averaged over the R fits like the log-parameters, into model->mean_coef. */
int pls_fit_hyper(hyp_run *run, gp_model *model, const double *Xt, const double *t,
                  gp_noise_param *np, double *s2, gp_error *err)
{
    size_t n = model->n_train, d = model->input_dim, sub = run->set->subset;
    size_t R = n > sub ? run->set->repeats : 1;
    if (sub > n)
        sub = n;
    gp_hyper_problem p;
    double *Xs = NULL, *ts = NULL, *x = NULL, *avg = NULL;
    int rc = gp_hyper_problem_init(&p, model->kernel, np, run->req->hyper, sub, err);
    if (rc)
        return rc;
    rc = gp_hyper_problem_set_mean(&p, model->mean_type, err);
    if (rc) {
        gp_hyper_problem_free(&p);
        return rc;
    }
    for (size_t j = 0; j < p.p; j++)
        model->mean_coef[j] = 0.0;
    Xs = gp_alloc_doubles(sub * d, err);
    ts = gp_alloc_doubles(sub, err);
    x = gp_alloc_doubles(p.n_free + 1, err);
    avg = gp_alloc_doubles(p.n_free + 1, err);
    rc = Xs && ts && x && avg ? GP_OK : GP_ENOMEM;
    if (avg)
        memset(avg, 0, (p.n_free + 1) * sizeof *avg);
    for (size_t r = 0; rc == GP_OK && r < R; r++) {
        rc = hyp_subset(run, Xt, t, NULL, n, d, sub, r, Xs, ts, NULL, err);
        if (rc == GP_OK)
            rc = hyp_fit_one(run, &p, Xs, ts, sub, x, err);
        for (size_t i = 0; rc == GP_OK && i <= p.n_free; i++)
            avg[i] += x[i] / (double)R;
        for (size_t j = 0; rc == GP_OK && j < p.p; j++)
            model->mean_coef[j] += p.beta[j] / (double)R;
    }
    if (rc == GP_OK) {
        gp_hyper_problem_apply(&p, avg, model->kernel, s2);
        run->lml_sum /= (double)R;
    }
    gp_hyper_problem_free(&p);
    free(Xs);
    free(ts);
    free(x);
    free(avg);
    return rc;
}

/* One subset fit of the Laplace objective, from where the previous one left
 * the kernel; as hyp_fit_one. */
static int lap_fit_one(hyp_run *run, pls_lap_problem *p, const double *Xs, const double *ys,
                       const double *offs, size_t sub, double *x, gp_error *err)
{
    pls_lap_problem_start(p, x);
    gp_driver_options opt;
    subset_options(run, &opt);
    gp_driver_result res;
    int rc = pls_lap_problem_fit(p, Xs, sub, ys, offs, x, &opt, &res, err);
    subset_account(run, &res);
    return rc;
}

/* [D] A1 by the labels' likelihood: R subset fits of the Laplace marginal
 * likelihood of y under the model's likelihood, latent prior GP(off, k)
 * (off: the held mean, NULL: zero), log-parameters averaged into
 * model->kernel. */
int pls_fit_hyper_laplace(hyp_run *run, gp_model *model, const double *Xt, const double *y,
                          const double *off, gp_error *err)
{
    size_t n = model->n_train, d = model->input_dim, sub = run->set->subset;
    size_t R = n > sub ? run->set->repeats : 1;
    if (sub > n)
        sub = n;
    pls_lap_problem *p = NULL;
    const gp_hyper_spec *spec = model->hyper ? model->hyper : run->req->hyper;
    int rc = pls_lap_problem_new(&p, model->kernel, model->likelihood, spec, sub, err);
    if (rc)
        return rc;
    size_t dim = pls_lap_problem_dim(p);
    double *Xs = gp_alloc_doubles(sub * d, err), *ys = gp_alloc_doubles(sub, err);
    double *offs = off ? gp_alloc_doubles(sub, err) : NULL;
    double *x = gp_alloc_doubles(dim + 1, err), *avg = gp_alloc_doubles(dim + 1, err);
    rc = Xs && ys && x && avg && (offs || !off) ? GP_OK : GP_ENOMEM;
    if (avg)
        memset(avg, 0, (dim + 1) * sizeof *avg);
    for (size_t r = 0; rc == GP_OK && r < R; r++) {
        rc = hyp_subset(run, Xt, y, off, n, d, sub, r, Xs, ys, offs, err);
        if (rc == GP_OK)
            rc = lap_fit_one(run, p, Xs, ys, offs, sub, x, err);
        for (size_t i = 0; rc == GP_OK && i < dim; i++)
            avg[i] += x[i] / (double)R;
    }
    if (rc == GP_OK) {
        pls_lap_problem_apply(p, avg, model->kernel);
        run->lml_sum /= (double)R;
    }
    pls_lap_problem_free(p);
    free(Xs);
    free(ys);
    free(offs);
    free(x);
    free(avg);
    return rc;
}
