/* Exact GP regression: see core/methods/exact.h.
 *
 * Working units: the fit and the cached factors live in the model's working
 * units (standardised unless "standardize": false); predictions and samples are
 * mapped back to original units at the end. */
#include "core/methods/exact.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/kernel/lml.h"
#include "core/linalg/linalg.h"
#include "core/model/method.h"
#include "core/optim/driver.h"

/* Predict works on blocks of test points whose N x B cross-covariance buffer
 * holds at most this many doubles (32 MB): big blocks make one kernel call and
 * one dtrsm, the bound keeps memory flat for large N. */
#define PREDICT_BLOCK_DOUBLES ((size_t)4 << 20)
#define PREDICT_BLOCK_MIN 16

typedef struct exact_impl {
    size_t n, d;
    double *Xt;    /* d x n training points, working units */
    double *L;     /* n x n, lower triangle = Cholesky factor of K + s2 I + jitter I */
    double *alpha; /* n: (K + s2 I + jitter I)^{-1} y */
    gp_kernel_points *Xp; /* Xt scaled by the fitted kernel, for predictions */
} exact_impl;

static const gp_option_spec exact_options[] = {
    {"restarts", GP_OPTION_INT, 0, NULL, 0, 100, NULL,
     "extra L-BFGS runs from random starting points (seeded); the best LML wins"},
    {"max_iterations", GP_OPTION_INT, 200, NULL, 1, 100000, NULL,
     "L-BFGS iterations per run"},
    {"tolerance", GP_OPTION_NUMBER, 1e-10, NULL, 1e-16, 1, NULL,
     "stop when the relative LML change of an iteration falls below this"},
};

static void impl_free(void *p)
{
    exact_impl *im = p;
    if (im == NULL)
        return;
    gp_kernel_points_free(im->Xp);
    free(im->Xt);
    free(im->L);
    free(im->alpha);
    free(im);
}

/* Xt and alpha are allocated here; L is not: a fit hands over its n x n
 * workspace and an import allocates it, so no second n x n matrix exists. */
static exact_impl *impl_alloc(size_t n, size_t d, gp_error *err)
{
    exact_impl *im = calloc(1, sizeof *im);
    size_t nd = 0;
    if (im == NULL) {
        gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    im->n = n;
    im->d = d;
    if (gp_checked_size(n, d, &nd, err) || !(im->Xt = gp_alloc_doubles(nd, err)) ||
        !(im->alpha = gp_alloc_doubles(n, err))) {
        impl_free(im);
        return NULL;
    }
    return im;
}

/* ---- the fit objective over the free log-parameters ---- */

typedef struct fit_problem {
    gp_kernel *k;          /* working copy whose free parameters move */
    const double *Xt, *y;
    size_t n;
    size_t n_kparams;
    size_t *free_idx;      /* indices of free kernel parameters */
    size_t n_free_kernel;
    gp_noise_param noise;
    double *theta;         /* all kernel parameters */
    double *grad;          /* n_kparams + 1 */
    double *A, *alpha;     /* n x n and n workspaces */
    double lml_offset;     /* working -> original units, for progress */
    const gp_cancel *cancel; /* the request's: polled inside every evaluation */
} fit_problem;

static size_t problem_dim(const fit_problem *p)
{
    return p->n_free_kernel + (p->noise.learned ? 1 : 0);
}

static double problem_noise(const fit_problem *p, const double *x)
{
    return gp_noise_param_value(&p->noise, p->noise.learned ? x[p->n_free_kernel] : 0.0);
}

static void problem_apply(fit_problem *p, const double *x)
{
    for (size_t i = 0; i < p->n_free_kernel; i++)
        p->theta[p->free_idx[i]] = x[i];
    gp_kernel_set_params(p->k, p->theta);
}

/* Negative LML; +inf when the covariance cannot be factorised, or when the
 * evaluation was cancelled (the driver polls the same token and stops). */
static double problem_objective(void *ctx, const double *x, double *g)
{
    fit_problem *p = ctx;
    problem_apply(p, x);
    double s2 = problem_noise(p, x), lml;
    if (!isfinite(s2))
        return INFINITY;
    if (gp_exact_lml_grad_on(p->k, s2, p->Xt, p->n, p->y, p->A, p->alpha, &lml, p->grad,
                             p->cancel, NULL, NULL))
        return INFINITY;
    for (size_t i = 0; i < p->n_free_kernel; i++)
        g[i] = -p->grad[p->free_idx[i]];
    if (p->noise.learned)
        g[p->n_free_kernel] = -gp_noise_param_grad(&p->noise, s2, p->grad[p->n_kparams]);
    return -lml;
}

static int problem_init(fit_problem *p, const gp_model *model, const gp_fit_request *req,
                        const double *Xt, const double *y, gp_error *err)
{
    memset(p, 0, sizeof *p);
    p->Xt = Xt;
    p->y = y;
    p->n = req->n;
    p->lml_offset = -(double)req->n * log(model->y_scale);
    p->cancel = &req->cancel;
    int rc = gp_kernel_copy(&p->k, model->kernel, err);
    if (rc)
        return rc;
    p->n_kparams = gp_kernel_n_params(p->k);
    size_t nn = 0;
    unsigned char *mask = malloc(p->n_kparams + 1);
    p->free_idx = malloc((p->n_kparams + 1) * sizeof *p->free_idx);
    p->theta = gp_alloc_doubles(p->n_kparams + 1, err);
    p->grad = gp_alloc_doubles(p->n_kparams + 1, err);
    p->alpha = gp_alloc_doubles(req->n, err);
    if (gp_checked_size(req->n, req->n, &nn, err) == GP_OK)
        p->A = gp_alloc_doubles(nn, err);
    if (!mask || !p->free_idx || !p->theta || !p->grad || !p->alpha || !p->A) {
        free(mask);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory for a fit of %zu points",
                            req->n);
    }
    gp_kernel_get_params(p->k, p->theta);
    gp_kernel_free_mask(p->k, mask);
    for (size_t i = 0; i < p->n_kparams; i++)
        if (mask[i])
            p->free_idx[p->n_free_kernel++] = i;
    free(mask);
    gp_noise_param_init(&p->noise, req, y, req->n);
    return GP_OK;
}

static void problem_free(fit_problem *p)
{
    gp_kernel_free(p->k);
    free(p->free_idx);
    free(p->theta);
    free(p->grad);
    free(p->A);
    free(p->alpha);
}

/* Starting point: the given (or data-based) values. */
static void problem_start(const fit_problem *p, double *x)
{
    for (size_t i = 0; i < p->n_free_kernel; i++)
        x[i] = p->theta[p->free_idx[i]];
    if (p->noise.learned)
        x[p->n_free_kernel] = gp_noise_param_x0(&p->noise);
}

/* The driver from the initial point and `restarts` seeded perturbations of it;
 * best receives the best point found. */
static int optimise(fit_problem *p, const gp_method *m, const gp_fit_request *req, double *best,
                    gp_diagnostics *diag, gp_error *err)
{
    gp_driver_options opt;
    gp_driver_default_options(&opt);
    opt.max_iterations = (int)gp_option_number(m, req, "max_iterations");
    opt.tolerance = gp_option_number(m, req, "tolerance");
    opt.restarts = (int)gp_option_number(m, req, "restarts");
    opt.seed = req->seed;
    opt.progress = req->progress;
    opt.progress_ctx = req->progress_ctx;
    opt.objective_offset = p->lml_offset;
    opt.cancel = p->cancel;
    problem_start(p, best);
    gp_driver_result res;
    int rc = gp_driver_minimize(problem_objective, p, best, problem_dim(p), &opt, &res, err);
    diag->iterations += res.iterations;
    diag->evaluations += res.evaluations;
    diag->converged = res.converged;
    diag->restarts = res.restarts;
    return rc;
}

/* ---- fit ---- */

static int size_guard(const gp_fit_request *req, gp_error *err)
{
    size_t cap = gp_fit_point_cap(req);
    if (req->n > cap)
        return gp_error_set(err, GP_ETOOBIG, "X",
                            "exact GP needs an N x N matrix: %zu training points exceed "
                            "max_train_points = %zu (raise --max-train-points, or use a method "
                            "that scales such as sgpr or ssgp)",
                            req->n, cap);
    return GP_OK;
}

/* Standardised targets. */
static double *working_targets(const gp_model *model, const double *y, size_t n, gp_error *err)
{
    double *ys = gp_alloc_doubles(n, err);
    if (ys)
        for (size_t i = 0; i < n; i++)
            ys[i] = (y[i] - model->y_mean) / model->y_scale;
    return ys;
}

/* Cache L and alpha at the fitted hyperparameters; fills the final LML. */
static int cache_factor(gp_model *model, exact_impl *im, const double *y,
                        const gp_cancel *cancel, gp_error *err)
{
    gp_chol_info info;
    double lml;
    int rc = gp_exact_lml_factor(model->kernel, model->noise_variance, im->Xt, im->n, y, im->L,
                                 im->alpha, &lml, cancel, &info, err);
    if (rc)
        return rc;
    /* Keep only the factor: zero the copy of K left in the upper triangle. */
    for (size_t j = 1; j < im->n; j++)
        memset(im->L + j * im->n, 0, j * sizeof *im->L);
    model->diag.jitter = info.jitter;
    model->diag.objective = lml - (double)im->n * log(model->y_scale);
    return gp_kernel_points_new(model->kernel, im->Xt, im->n, &im->Xp, err);
}

static int exact_fit_into(gp_model *model, const gp_fit_request *req, exact_impl *im,
                          const double *ys, gp_error *err)
{
    fit_problem p;
    int rc = problem_init(&p, model, req, im->Xt, ys, err);
    size_t dim = problem_dim(&p);
    double *best = rc ? NULL : gp_alloc_doubles(dim, err);
    if (rc == GP_OK && best == NULL)
        rc = GP_ENOMEM;
    if (rc == GP_OK && dim > 0)
        rc = optimise(&p, model->method, req, best, &model->diag, err);
    if (rc == GP_OK) {
        problem_apply(&p, best);
        gp_kernel_set_params(model->kernel, p.theta);
        model->noise_variance = dim > 0 ? problem_noise(&p, best) : p.noise.start;
        if (dim == 0)
            model->diag.converged = 1;
        im->L = p.A; /* the fit's n x n workspace becomes the cached factor */
        p.A = NULL;
        problem_free(&p);
        rc = cache_factor(model, im, ys, &req->cancel, err);
    } else
        problem_free(&p);
    free(best);
    return rc;
}

static int exact_fit(const gp_fit_request *req, gp_model **out, gp_error *err)
{
    int rc = size_guard(req, err);
    if (rc)
        return rc;
    gp_model *model;
    rc = gp_model_new(&gp_method_exact, req, &model, err);
    if (rc)
        return rc;
    exact_impl *im = impl_alloc(req->n, req->d, err);
    double *ys = working_targets(model, req->y, req->n, err);
    rc = im && ys ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK)
        gp_model_standardize_points(model, req->X, req->n, im->Xt);
    model->impl = im;
    if (rc == GP_OK)
        rc = exact_fit_into(model, req, im, ys, err);
    free(ys);
    if (rc) {
        gp_model_free(model);
        return rc;
    }
    *out = model;
    return GP_OK;
}

/* ---- predict ---- */

/* Latent mean and variance of one block of b points P (d x b, working units).
 * Ks (n x b) is scratch. */
static void predict_block(const gp_model *model, const exact_impl *im, const double *P, size_t b,
                          double *Ks, double *mean, double *var)
{
    size_t n = im->n;
    gp_kernel_cross_points(model->kernel, im->Xp, P, b, Ks, n);
    cblas_dgemv(CblasColMajor, CblasTrans, (blasint)n, (blasint)b, 1.0, Ks, (blasint)n,
                im->alpha, 1, 0.0, mean, 1);
    gp_trsm_lower(im->L, n, n, 0, Ks, b, n);
    for (size_t j = 0; j < b; j++) {
        const double *v = Ks + j * n;
        var[j] = gp_kernel_diag(model->kernel, P + j * im->d) - cblas_ddot((blasint)n, v, 1, v, 1);
    }
}

/* Latent variance (working units) plus the noise when asked, clamped at 0 with
 * the clamp counted. */
static double observed_variance(const gp_model *model, double v, int include_noise,
                                size_t *clamped)
{
    if (include_noise)
        v += model->noise_variance;
    if (v < 0.0) {
        v = 0.0;
        (*clamped)++;
    }
    return v;
}

/* Full posterior covariance (working units, latent) of m points P into C (m x m);
 * V (n x m) is scratch. Means into mean. */
static void posterior_covariance(const gp_model *model, const exact_impl *im, const double *P,
                                 size_t m, double *V, double *C, double *mean)
{
    size_t n = im->n;
    gp_kernel_cross_points(model->kernel, im->Xp, P, m, V, n);
    cblas_dgemv(CblasColMajor, CblasTrans, (blasint)n, (blasint)m, 1.0, V, (blasint)n, im->alpha,
                1, 0.0, mean, 1);
    gp_trsm_lower(im->L, n, n, 0, V, m, n);
    gp_kernel_gram(model->kernel, P, m, C, m);
    cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)m, (blasint)n, -1.0, V,
                (blasint)n, 1.0, C, (blasint)m);
    gp_symmetrize_from_lower(C, m, m);
}

static int predict_full(const gp_model *model, const exact_impl *im, const double *P,
                        const gp_predict_request *req, gp_prediction *out, gp_error *err)
{
    size_t m = req->m, nm = 0;
    int rc = gp_checked_size(im->n, m, &nm, err);
    double *V = rc ? NULL : gp_alloc_doubles(nm, err);
    if (V == NULL)
        return rc ? rc : GP_ENOMEM;
    double *C = out->covariance, s = model->y_scale * model->y_scale;
    posterior_covariance(model, im, P, m, V, C, out->mean);
    free(V);
    for (size_t j = 0; j < m; j++)
        C[j * m + j] = observed_variance(model, C[j * m + j], req->include_noise, &out->clamped);
    for (size_t i = 0; i < m * m; i++)
        C[i] *= s;
    for (size_t j = 0; j < m; j++)
        out->variance[j] = C[j * m + j];
    return GP_OK;
}

static int predict_blocks(const gp_model *model, const exact_impl *im, const double *P,
                          const gp_predict_request *req, gp_prediction *out, gp_error *err)
{
    size_t block = PREDICT_BLOCK_DOUBLES / im->n, nb = 0;
    if (block < PREDICT_BLOCK_MIN)
        block = PREDICT_BLOCK_MIN;
    if (block > req->m)
        block = req->m;
    int rc = gp_checked_size(im->n, block, &nb, err);
    double *Ks = rc ? NULL : gp_alloc_doubles(nb, err);
    if (Ks == NULL)
        return rc ? rc : GP_ENOMEM;
    for (size_t start = 0; start < req->m; start += block) {
        size_t b = req->m - start < block ? req->m - start : block;
        predict_block(model, im, P + start * im->d, b, Ks, out->mean + start,
                      out->variance + start);
    }
    free(Ks);
    double s = model->y_scale * model->y_scale;
    for (size_t j = 0; j < req->m; j++)
        out->variance[j] =
            s * observed_variance(model, out->variance[j], req->include_noise, &out->clamped);
    return GP_OK;
}

static int exact_predict(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                         gp_error *err)
{
    const exact_impl *im = model->impl;
    double *P;
    int rc = gp_model_points(model, req->X, req->m, &P, err);
    if (rc)
        return rc;
    rc = req->full_covariance ? predict_full(model, im, P, req, out, err)
                              : predict_blocks(model, im, P, req, out, err);
    free(P);
    if (rc == GP_OK)
        for (size_t j = 0; j < req->m; j++)
            out->mean[j] = out->mean[j] * model->y_scale + model->y_mean;
    return rc;
}

/* ---- sample ---- */

/* Joint draws from the posterior covariance (gp_model_gaussian_draws). */
static int exact_sample(const gp_model *model, const gp_sample_request *req, double *samples,
                        gp_error *err)
{
    const exact_impl *im = model->impl;
    size_t m = req->m, nm, mm;
    double *P = NULL, *V = NULL, *C = NULL, *mean = NULL;
    int rc = gp_checked_size(im->n, m, &nm, err);
    if (rc == GP_OK)
        rc = gp_checked_size(m, m, &mm, err);
    if (rc == GP_OK)
        rc = gp_model_points(model, req->X, m, &P, err);
    if (rc == GP_OK && (!(V = gp_alloc_doubles(nm, err)) || !(C = gp_alloc_doubles(mm, err)) ||
                        !(mean = gp_alloc_doubles(m, err))))
        rc = GP_ENOMEM;
    if (rc == GP_OK) {
        posterior_covariance(model, im, P, m, V, C, mean);
        free(V);
        V = NULL;
        rc = gp_model_gaussian_draws(model, req, mean, C, samples, err);
    }
    free(P);
    free(V);
    free(C);
    free(mean);
    return rc;
}

/* ---- export / import ---- */

static int exact_export(const gp_model *model, gp_state *st, gp_error *err)
{
    const exact_impl *im = model->impl;
    int rc = gp_state_put_cholesky(st, "chol_packed", im->L, im->n, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "X_train", im->d, im->n, im->Xt, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "alpha", im->n, 1, im->alpha, err);
    return rc;
}

static int exact_import(gp_model *model, const gp_state *st, gp_error *err)
{
    size_t n = model->n_train, d = model->input_dim, nn = 0;
    const double *Xt, *alpha;
    int rc = gp_checked_size(n, n, &nn, err);
    if (rc == GP_OK)
        rc = gp_state_get(st, "X_train", d, n, &Xt, err);
    if (rc == GP_OK)
        rc = gp_state_get(st, "alpha", n, 1, &alpha, err);
    if (rc)
        return rc;
    exact_impl *im = impl_alloc(n, d, err);
    if (im == NULL)
        return GP_ENOMEM;
    if ((im->L = gp_alloc_doubles(nn, err)) == NULL) {
        impl_free(im);
        return GP_ENOMEM;
    }
    memcpy(im->Xt, Xt, n * d * sizeof *Xt);
    memcpy(im->alpha, alpha, n * sizeof *alpha);
    rc = gp_state_get_cholesky(st, "chol_packed", n, im->L, err);
    if (rc == GP_OK)
        rc = gp_kernel_points_new(model->kernel, im->Xt, n, &im->Xp, err);
    if (rc) {
        impl_free(im);
        return rc;
    }
    model->impl = im;
    return GP_OK;
}

static const gp_method_ops exact_ops = {
    .fit = exact_fit,
    .predict = exact_predict,
    .sample = exact_sample,
    .export_impl = exact_export,
    .import_impl = exact_import,
    .free_impl = impl_free,
};

const gp_method gp_method_exact = {
    .name = "exact",
    .summary = "Exact GP regression: hyperparameters by maximising the log marginal likelihood "
               "(L-BFGS, analytic gradients); O(N^3) fit, O(N^2) per predicted point",
    .objective_name = "log_marginal_likelihood",
    .options = exact_options,
    .n_options = sizeof exact_options / sizeof exact_options[0],
    .kernels = NULL,
    .n_kernels = 0,
    .composite_kernels = 1,
    .iterations_option = "max_iterations",
    .restarts_option = "restarts",
    .ops = &exact_ops,
};
