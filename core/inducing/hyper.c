/* Hyperparameters by the exact marginal likelihood on a few points: see
 * core/inducing/hyper.h. */
#include "core/inducing/hyper.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/kernel/lml.h"
#include "core/linalg/linalg.h"

/* -LML and its gradient in x. A covariance that cannot be factorised (or a
 * noise that overflowed) is +inf, which makes the L-BFGS line search back off
 * instead of failing the fit. */
static double hyper_objective(void *ctx, const double *x, double *g)
{
    gp_hyper_problem *p = ctx;
    for (size_t i = 0; i < p->n_free; i++)
        p->theta[p->free_idx[i]] = x[i];
    gp_kernel_set_params(p->k, p->theta);
    double s2 = gp_noise_param_value(&p->noise, p->noise.learned ? x[p->n_free] : 0.0), lml;
    if (!isfinite(s2))
        return INFINITY;
    if (p->p) {
        gp_lml_basis b = {p->H, p->p, p->beta, p->mean_work};
        if (gp_exact_lml_grad_basis_on(p->k, s2, NULL, &b, p->Xt, p->n, p->t, p->A, p->alpha,
                                       &lml, p->grad, p->cancel, NULL, NULL))
            return INFINITY;
    } else if (gp_exact_lml_grad_on(p->k, s2, p->Xt, p->n, p->t, p->A, p->alpha, &lml, p->grad,
                                    p->cancel, NULL, NULL)) {
        return INFINITY;
    }
    for (size_t i = 0; i < p->n_free; i++)
        g[i] = -p->grad[p->free_idx[i]];
    if (p->noise.learned)
        g[p->n_free] = -gp_noise_param_grad(&p->noise, s2, p->grad[p->np]);
    return -lml;
}

int gp_hyper_problem_init(gp_hyper_problem *p, const gp_kernel *k, const gp_noise_param *np,
                          const gp_hyper_spec *spec, size_t n_max, gp_error *err)
{
    memset(p, 0, sizeof *p);
    p->spec = spec;
    int rc = gp_kernel_copy(&p->k, k, err);
    if (rc)
        return rc;
    p->noise = *np;
    p->n_max = n_max;
    p->np = gp_kernel_n_params(p->k);
    size_t nn = 0, cap = n_max ? n_max : 1; /* no zero-size allocations */
    unsigned char *mask = malloc(p->np + 1);
    p->free_idx = malloc((p->np + 1) * sizeof *p->free_idx);
    p->theta = gp_alloc_doubles(p->np + 1, err);
    p->grad = gp_alloc_doubles(p->np + 1, err);
    p->alpha = gp_alloc_doubles(cap, err);
    if (gp_checked_size(cap, cap, &nn, err) == GP_OK)
        p->A = gp_alloc_doubles(nn, err);
    if (!mask || !p->free_idx || !p->theta || !p->grad || !p->alpha || !p->A) {
        free(mask);
        gp_hyper_problem_free(p);
        return gp_error_set(err, GP_ENOMEM, NULL,
                            "out of memory for a marginal likelihood on %zu points", n_max);
    }
    gp_kernel_get_params(p->k, p->theta);
    gp_hyper_free_mask(p->k, spec, mask);
    for (size_t i = 0; i < p->np; i++)
        if (mask[i])
            p->free_idx[p->n_free++] = i;
    free(mask);
    return GP_OK;
}

void gp_hyper_problem_free(gp_hyper_problem *p)
{
    gp_kernel_free(p->k);
    free(p->free_idx);
    free(p->theta);
    free(p->grad);
    free(p->A);
    free(p->alpha);
    free(p->H);
    free(p->beta);
    free(p->mean_work);
    memset(p, 0, sizeof *p);
}

int gp_hyper_problem_set_mean(gp_hyper_problem *p, gp_mean_type t, gp_error *err)
{
    size_t q = gp_mean_n_coef(t, p->k->input_dim), cap = p->n_max ? p->n_max : 1, nh = 0;
    if (q == 0)
        return GP_OK;
    int rc = gp_checked_size(cap + q + 1, q, &nh, err);
    if (rc)
        return rc;
    p->H = gp_alloc_doubles(cap * q, err);
    p->beta = gp_alloc_doubles(q, err);
    p->mean_work = gp_alloc_doubles(nh, err);
    if (p->H == NULL || p->beta == NULL || p->mean_work == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory for the mean's basis");
    memset(p->beta, 0, q * sizeof *p->beta);
    p->mean = t;
    p->p = q;
    return GP_OK;
}

size_t gp_hyper_problem_dim(const gp_hyper_problem *p)
{
    return p->n_free + (p->noise.learned ? 1 : 0);
}

void gp_hyper_problem_start(const gp_hyper_problem *p, double *x)
{
    for (size_t i = 0; i < p->n_free; i++)
        x[i] = p->theta[p->free_idx[i]];
    if (p->noise.learned)
        x[p->n_free] = gp_noise_param_x0(&p->noise);
}

int gp_hyper_problem_fit(gp_hyper_problem *p, const double *Xt, size_t n, const double *t,
                         double *x, const gp_driver_options *opt, gp_driver_result *res,
                         gp_error *err)
{
    if (n > p->n_max)
        return gp_error_set(err, GP_EINVAL, NULL,
                            "a marginal likelihood on %zu points, above the %zu allocated", n,
                            p->n_max);
    p->Xt = Xt;
    p->t = t;
    p->n = n;
    p->cancel = opt->cancel;
    if (p->p)
        gp_mean_basis(p->mean, Xt, p->k->input_dim, n, p->H);
    size_t dim = gp_hyper_problem_dim(p);
    if (dim > 0) {
        int rc = gp_hyper_minimize_free(p->spec, p->k, p->free_idx, p->n_free, p->noise.learned,
                                        p->noise.floor, hyper_objective, p, x, dim, opt, res, err);
        /* beta of the best point x, not of the last one the line search tried */
        if (rc == GP_OK && p->p) {
            double *g = gp_alloc_doubles(dim, err);
            if (g == NULL)
                return GP_ENOMEM;
            double f = hyper_objective(p, x, g);
            free(g);
            if (!isfinite(f))
                return gp_error_set(err, GP_ENOTPD, NULL,
                                    "the marginal likelihood cannot be evaluated at the fitted "
                                    "hyperparameters");
        }
        return rc;
    }
    /* Nothing free: the driver needs n > 0, but the caller still wants the
     * LML at the given values (and to learn that it cannot be evaluated). */
    memset(res, 0, sizeof *res);
    double g_unused = 0.0; /* dim 0: the objective writes no gradient entry */
    res->f = hyper_objective(p, x, &g_unused);
    res->evaluations = 1;
    res->converged = 1;
    if (gp_cancel_requested(opt->cancel))
        return gp_error_set(err, GP_ECANCELLED, NULL, "fit cancelled");
    if (!isfinite(res->f))
        return gp_error_set(err, GP_ENOTPD, NULL,
                            "the marginal likelihood cannot be evaluated at the given "
                            "hyperparameters (the covariance is not positive definite)");
    return GP_OK;
}

void gp_hyper_problem_apply(gp_hyper_problem *p, const double *x, gp_kernel *k, double *s2)
{
    for (size_t i = 0; i < p->n_free; i++)
        p->theta[p->free_idx[i]] = x[i];
    gp_kernel_set_params(k, p->theta);
    *s2 = gp_noise_param_value(&p->noise, p->noise.learned ? x[p->n_free] : 0.0);
}

int gp_hyper_fit_points(gp_kernel *k, const gp_noise_param *np, const gp_hyper_spec *spec,
                        double *s2, const double *Xt, size_t n, const double *t,
                        const gp_driver_options *opt, gp_driver_result *res, gp_error *err)
{
    gp_hyper_problem p;
    gp_driver_result own;
    double *x = NULL;
    int rc = gp_hyper_problem_init(&p, k, np, spec, n, err);
    if (rc)
        return rc;
    /* n_free + 1: never a zero-size allocation */
    x = gp_alloc_doubles(p.n_free + 1, err);
    if (x == NULL)
        rc = GP_ENOMEM;
    if (rc == GP_OK) {
        gp_hyper_problem_start(&p, x);
        rc = gp_hyper_problem_fit(&p, Xt, n, t, x, opt, res ? res : &own, err);
    }
    /* k and *s2 change only on success: a failed fit leaves the caller's start */
    if (rc == GP_OK)
        gp_hyper_problem_apply(&p, x, k, s2);
    free(x);
    gp_hyper_problem_free(&p);
    return rc;
}
