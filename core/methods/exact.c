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

#include "core/base/parallel.h"
#include "core/base/rng.h"
#include "core/coreg/exact.h"
#include "core/coreg/exact_persist.h"
#include "core/coreg/exact_predict.h"
#include "core/coreg/params.h"
#include "core/kernel/kernel_dx.h"
#include "core/kernel/lml.h"
#include "core/linalg/linalg.h"
#include "core/model/method.h"
#include "core/optim/driver.h"

/* Predict works on blocks of test points whose N x B cross-covariance buffer
 * holds at most this many doubles (32 MB): big blocks make one kernel call and
 * one triangular solve, the bound keeps memory flat for large N. */
#define PREDICT_BLOCK_DOUBLES ((size_t)4 << 20)
#define PREDICT_BLOCK_MIN 16
#define LOG_2PI 1.8378770664093454836

typedef struct exact_impl {
    size_t n, d;
    double *Xt;    /* d x n training points, working units */
    double *L;     /* n x n, leading dimension ld: lower triangle = Cholesky factor of
                      K + s2 I + jitter I, upper triangle zero, rows n.. ld unused */
    size_t ld;     /* n after a fit or an import; observe keeps spare rows (grown_ld) */
    double *alpha; /* n: (K + s2 I + jitter I)^{-1} y */
    double *y;     /* n: the training targets, working units (observe solves for alpha) */
    double *r;     /* n: known per-point noise variances, working units (NULL: none);
                      the factor is then of K + s2 I + diag(r) + jitter I */
    size_t cap;    /* the fit's cap on N (max_train_points), which observe keeps */
    gp_kernel_points *Xp; /* Xt scaled by the fitted kernel, for predictions */
    /* A coregionalised model (options.coregionalization): everything is
     * here, the fields above unused (core/coreg/exact.c). */
    gp_coreg_exact *coreg;
} exact_impl;

static const gp_option_spec exact_options[] = {
    {"restarts", GP_OPTION_INT, 0, NULL, 0, 100, NULL,
     "extra L-BFGS runs from random starting points (seeded); the best LML wins"},
    {"max_iterations", GP_OPTION_INT, 200, NULL, 1, 100000, NULL,
     "L-BFGS iterations per run"},
    {"tolerance", GP_OPTION_NUMBER, 1e-10, NULL, 1e-16, 1, NULL,
     "stop when the relative LML change of an iteration falls below this (default 1e-7 with "
     "coregionalization: its likelihood has flat ridges, docs/design/multioutput.md)"},
    {"coregionalization", GP_OPTION_OBJECT, 0, NULL, 0, 0, gp_coreg_option_schema_solver,
     "several outputs modelled jointly (docs/design/multioutput.md): {\"type\": \"icm\" | "
     "\"lmc\", \"rank\": R (1 .. p, default 1), \"latents\": Q (lmc only, 1 .. 8, default 2), "
     "\"kappa\": learn each output's own share (default true), \"solver\": \"auto\" (Kronecker "
     "eigendecompositions when icm and every output is observed at every row) | \"kronecker\" | "
     "\"general\"}; y rows of p values, null for a missing one"},
};

static void impl_free(void *p)
{
    exact_impl *im = p;
    if (im == NULL)
        return;
    gp_kernel_points_free(im->Xp);
    gp_coreg_exact_free(im->coreg);
    free(im->Xt);
    free(im->L);
    free(im->alpha);
    free(im->y);
    free(im->r);
    free(im);
}

/* Xt and alpha are allocated here (y is the caller's to set); L is not: a fit hands over its n x n
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
    im->ld = n;
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
    const double *r;       /* known per-point noise (NULL: none) */
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
    gp_lml_basis basis;    /* the mean's basis, profiled out (p 0: zero mean) */
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
    if (gp_exact_lml_grad_basis_on(p->k, s2, p->r, &p->basis, p->Xt, p->n, p->y, p->A, p->alpha,
                                   &lml, p->grad, p->cancel, NULL, NULL))
        return INFINITY;
    for (size_t i = 0; i < p->n_free_kernel; i++)
        g[i] = -p->grad[p->free_idx[i]];
    if (p->noise.learned)
        g[p->n_free_kernel] = -gp_noise_param_grad(&p->noise, s2, p->grad[p->n_kparams]);
    return -lml;
}

/* The mean's basis and scratch of the profiled objective (zero mean: none);
 * its estimate lands in the model's coefficients. */
static int basis_init(fit_problem *p, const gp_model *model, gp_error *err)
{
    size_t q = gp_mean_n_coef(model->mean_type, model->input_dim), count = 0;
    if (q == 0)
        return GP_OK;
    p->basis.p = q;
    p->basis.beta = model->mean_coef;
    p->basis.H = gp_model_mean_basis(model, p->Xt, p->n, err);
    if (p->basis.H == NULL || gp_checked_size(p->n + q + 1, q, &count, err) ||
        (p->basis.work = gp_alloc_doubles(count, err)) == NULL)
        return GP_ENOMEM;
    return GP_OK;
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
    gp_hyper_free_mask(p->k, req->hyper, mask);
    for (size_t i = 0; i < p->n_kparams; i++)
        if (mask[i])
            p->free_idx[p->n_free_kernel++] = i;
    free(mask);
    gp_noise_param_init(&p->noise, req, y, req->n);
    return basis_init(p, model, err);
}

static void problem_free(fit_problem *p)
{
    gp_kernel_free(p->k);
    free(p->free_idx);
    free(p->theta);
    free(p->grad);
    free(p->A);
    free(p->alpha);
    free((double *)p->basis.H);
    free(p->basis.work);
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
    int rc = gp_hyper_minimize_free(req->hyper, p->k, p->free_idx, p->n_free_kernel,
                                    p->noise.learned, p->noise.floor, problem_objective, p, best,
                                    problem_dim(p), &opt, &res, err);
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
        gp_model_working_targets(model, y, n, ys);
    return ys;
}

/* Cache L and alpha at the fitted hyperparameters; fills the final LML. */
static int cache_factor(gp_model *model, exact_impl *im, double *y, const gp_lml_basis *basis,
                        const gp_cancel *cancel, gp_error *err)
{
    gp_chol_info info;
    double lml;
    int rc = gp_exact_lml_factor_basis(model->kernel, model->noise_variance, im->r, basis,
                                       im->Xt, im->n, y, im->L, im->alpha, &lml, cancel, &info,
                                       err);
    if (rc)
        return rc;
    /* With a mean the model keeps the residual targets y - H beta, the
     * ones alpha solves for and observe extends. */
    if (basis->p)
        cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)im->n, (blasint)basis->p, -1.0,
                    basis->H, (blasint)im->n, basis->beta, 1, 1.0, y, 1);
    /* Keep only the factor: zero the copy of K left in the upper triangle. */
    gp_zero_upper(im->L, im->n, im->n);
    model->diag.jitter = info.jitter;
    model->diag.objective = lml - (double)im->n * log(model->y_scale);
    return gp_kernel_points_new(model->kernel, im->Xt, im->n, &im->Xp, err);
}

static int exact_fit_into(gp_model *model, const gp_fit_request *req, exact_impl *im,
                          double *ys, gp_error *err)
{
    fit_problem p;
    int rc = problem_init(&p, model, req, im->Xt, ys, err);
    p.r = im->r;
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
        rc = cache_factor(model, im, ys, &p.basis, &req->cancel, err);
        problem_free(&p);
    } else
        problem_free(&p);
    free(best);
    return rc;
}

/* A coregionalised fit: core/coreg/exact.c's model in an empty shell. */
static int exact_fit_coreg(const gp_method *m, const gp_fit_request *req, gp_model **out,
                           gp_error *err)
{
    gp_coreg_exact *ce = NULL;
    int rc = gp_coreg_exact_fit(m, req, out, &ce, err);
    if (rc)
        return rc;
    exact_impl *im = calloc(1, sizeof *im);
    if (im == NULL) {
        gp_coreg_exact_free(ce);
        gp_model_free(*out);
        *out = NULL;
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    im->coreg = ce;
    (*out)->impl = im;
    return GP_OK;
}

static int exact_fit(const gp_method *m, const gp_fit_request *req, gp_model **out, gp_error *err)
{
    if (gp_fit_coregionalised(m, req))
        return exact_fit_coreg(m, req, out, err);
    int rc = size_guard(req, err);
    if (rc)
        return rc;
    gp_model *model;
    rc = gp_model_new(m, req, &model, err);
    if (rc)
        return rc;
    exact_impl *im = impl_alloc(req->n, req->d, err);
    double *ys = working_targets(model, req->y, req->n, err);
    rc = im && ys ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK)
        im->r = gp_model_working_noise_alloc(model, req->noise_per_point, req->n, &rc, err);
    if (rc == GP_OK)
        gp_model_standardize_points(model, req->X, req->n, im->Xt);
    model->impl = im;
    if (rc == GP_OK)
        rc = exact_fit_into(model, req, im, ys, err);
    if (rc == GP_OK) { /* the targets stay with the model: observe solves with them */
        im->y = ys;
        im->cap = gp_fit_point_cap(req);
    } else
        free(ys);
    if (rc) {
        gp_model_free(model);
        return rc;
    }
    *out = model;
    return GP_OK;
}

/* ---- predict ---- */

/* Columns per task of the per-point work after the kernel block: a point's
 * mean dot, its column of the solve and its variance dot. 64 is the solve's
 * own task width (gp_solve_lower_columns), so each task's solve is one piece. */
#define WHITEN_COLS 64

typedef struct whiten_job {
    const gp_model *model;
    const exact_impl *im;
    const double *P;
    size_t b;
    double *V, *mean, *var; /* var NULL: no variances */
} whiten_job;

static double latent_variance(const gp_model *model, const exact_impl *im, const double *P,
                              const double *V, size_t j);

/* Points t WHITEN_COLS .. (t + 1) WHITEN_COLS: means, whitened columns, and
 * variances when asked. */
static void whiten_task(void *ctx, size_t t)
{
    const whiten_job *w = ctx;
    size_t n = w->im->n, c0 = t * WHITEN_COLS;
    size_t c1 = w->b - c0 < WHITEN_COLS ? w->b : c0 + WHITEN_COLS;
    for (size_t j = c0; j < c1; j++)
        w->mean[j] = gp_dot(w->V + j * n, w->im->alpha, n);
    gp_solve_lower_columns(w->im->L, n, w->im->ld, w->V + c0 * n, c1 - c0, n);
    if (w->var != NULL)
        for (size_t j = c0; j < c1; j++)
            w->var[j] = latent_variance(w->model, w->im, w->P, w->V, j);
}

/* Latent means of b points P (d x b, working units) into mean, V = L^-1 K(X,
 * P) into V (n x b), and latent variances into var unless NULL. Each point's
 * arithmetic involves its own column only and runs in an order fixed by n
 * (gp_dot, gp_solve_lower_columns): a point gets the same bits whatever the
 * block, whatever points share it and whichever task or thread does it, which
 * is what lets the server batch concurrent requests (dgemv and dtrsm change
 * kernels with the number of columns). Groups of points are pool tasks, so a
 * large request spreads its solve over the cores. */
static void mean_and_whiten(const gp_model *model, const exact_impl *im, const double *P,
                            size_t b, double *V, double *mean, double *var)
{
    gp_kernel_cross_points(model->kernel, im->Xp, P, b, V, im->n);
    whiten_job job = {model, im, P, b, V, mean, var};
    size_t tasks = (b + WHITEN_COLS - 1) / WHITEN_COLS;
    if (tasks == 1)
        whiten_task(&job, 0);
    else
        gp_parallel_for(tasks, whiten_task, &job);
}

/* The latent variance of point j (of P) from its whitened column V_j. */
static double latent_variance(const gp_model *model, const exact_impl *im, const double *P,
                              const double *V, size_t j)
{
    const double *v = V + j * im->n;
    return gp_kernel_diag(model->kernel, P + j * im->d) - gp_dot(v, v, im->n);
}

/* Latent mean and variance of one block of b points P; Ks (n x b) is scratch. */
static void predict_block(const gp_model *model, const exact_impl *im, const double *P, size_t b,
                          double *Ks, double *mean, double *var)
{
    mean_and_whiten(model, im, P, b, Ks, mean, var);
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
/* C (m x m) = K(P, P) - V^T V from the whitened columns V (n x m) of P: the
 * part of the posterior covariance each sample request of a batch does on
 * its own. */
static void whitened_covariance(const gp_model *model, const exact_impl *im, const double *P,
                                size_t m, const double *V, double *C)
{
    size_t n = im->n;
    gp_kernel_gram(model->kernel, P, m, C, m);
    cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)m, (blasint)n, -1.0, V,
                (blasint)n, 1.0, C, (blasint)m);
    /* The diagonal as predict_block computes it, so that a covariance request's
     * means and variances are those of the same points asked without one (the
     * syrk's sums differ in the last bits) */
    for (size_t j = 0; j < m; j++)
        C[j * m + j] = latent_variance(model, im, P, V, j);
    gp_symmetrize_from_lower(C, m, m);
}

static void posterior_covariance(const gp_model *model, const exact_impl *im, const double *P,
                                 size_t m, double *V, double *C, double *mean)
{
    mean_and_whiten(model, im, P, m, V, mean, NULL);
    whitened_covariance(model, im, P, m, V, C);
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
    if (im->coreg)
        return gp_coreg_exact_predict(model, im->coreg, req, out, err);
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

/* ---- the posterior's gradient in x (gp_model_predict_grad) ---- */

/* dmean = dK^T alpha and dvar = dk** - 2 dK^T L^-T v (dK: the kernel row's
 * gradients, contracted pass by pass without an N x d matrix), given the
 * whitened row v (overwritten by L^-T v); W (2N) and G (2d) are scratch. */
static int exact_gradients(const gp_model *model, const exact_impl *im, const double *P,
                           double *v, double *W, double *G, double *dmean, double *dvar,
                           gp_error *err)
{
    size_t n = im->n, d = im->d;
    gp_solve_lower_trans_vector(im->L, n, im->ld, v);
    memcpy(W, im->alpha, n * sizeof *W);
    for (size_t i = 0; i < n; i++)
        W[n + i] = -2.0 * v[i];
    int rc = gp_kernel_cross_dx_contract(model->kernel, P, im->Xt, n, W, n, 2, G, err);
    if (rc == GP_OK && dvar)
        rc = gp_kernel_diag_dx(model->kernel, P, NULL, dvar, err);
    for (size_t j = 0; rc == GP_OK && j < d; j++) {
        if (dmean)
            dmean[j] = G[j];
        if (dvar)
            dvar[j] += G[d + j];
    }
    return rc;
}

/* One point's latent mean and variance as predict_block computes them (the
 * kernel row of the prepared points, gp_dot, gp_solve_lower_columns: the
 * same bits), then their gradients: O(N d + N^2). */
static int exact_predict_grad(const gp_model *model, const double *P, double *mean, double *var,
                              double *dmean, double *dvar, gp_error *err)
{
    const exact_impl *im = model->impl;
    if (im->coreg)
        return gp_error_set(err, GP_EUNSUPPORTED, "n_outputs",
                            "the posterior gradient in x is for models of one output");
    size_t n = im->n, count = 0;
    /* v (N), W (2N), G (2d) in one buffer */
    int rc = gp_checked_size(n + im->d, 3, &count, err);
    double *v = rc ? NULL : gp_alloc_doubles(count, err);
    if (v == NULL)
        return rc ? rc : GP_ENOMEM;
    gp_kernel_cross_points(model->kernel, im->Xp, P, 1, v, n);
    *mean = gp_dot(v, im->alpha, n);
    gp_solve_lower_columns(im->L, n, im->ld, v, 1, n);
    *var = gp_kernel_diag(model->kernel, P) - gp_dot(v, v, n);
    if (dmean || dvar)
        rc = exact_gradients(model, im, P, v, v + n, v + 3 * n, dmean, dvar, err);
    free(v);
    return rc;
}

/* ---- sample ---- */

/* The most doubles of one shared whitening (n x the points of its requests):
 * requests join it in order while they fit, at least one. */
#define SAMPLE_BATCH_DOUBLES ((size_t)4 << 20)

typedef struct sample_job {
    const gp_model *model;
    const gp_sample_request *reqs;
    double *const *samples;
    int *rcs;
    gp_error *errs;
    const double *P, *V, *mean; /* the requests' points, whitened columns, means */
    const size_t *first;        /* request t's first point among them */
} sample_job;

/* Request t's covariance from its own columns, its factor and its draws from
 * its own seed (gp_model_gaussian_draws): nothing here reads another request. */
static void sample_task(void *ctx, size_t t)
{
    const sample_job *j = ctx;
    const exact_impl *im = j->model->impl;
    size_t m = j->reqs[t].m, o = j->first[t], mm = 0;
    int rc = gp_checked_size(m, m, &mm, &j->errs[t]);
    double *C = rc ? NULL : gp_alloc_doubles(mm, &j->errs[t]);
    if (C == NULL) {
        j->rcs[t] = rc ? rc : GP_ENOMEM;
        return;
    }
    whitened_covariance(j->model, im, j->P + o * im->d, m, j->V + o * im->n, C);
    j->rcs[t] = gp_model_gaussian_draws(j->model, &j->reqs[t], j->mean + o, C, j->samples[t],
                                        &j->errs[t]);
    free(C);
}

/* k requests: their points whitened by one multi-column solve (a column's
 * bits do not depend on the other columns, gp_solve_lower_columns), then a
 * task per request. */
static void sample_group(const gp_model *model, const gp_sample_request *reqs,
                         double *const *samples, int *rcs, gp_error *errs, size_t k)
{
    const exact_impl *im = model->impl;
    size_t total = 0, d = im->d;
    size_t *first = malloc(k * sizeof *first);
    for (size_t t = 0; first && t < k; t++) {
        first[t] = total;
        total += reqs[t].m;
    }
    gp_error err;
    size_t nt = 0;
    int rc = first ? gp_checked_size(im->n, total, &nt, &err)
                   : gp_error_set(&err, GP_ENOMEM, NULL, "out of memory");
    double *P = rc ? NULL : gp_alloc_doubles(total * d, &err);
    double *V = P ? gp_alloc_doubles(nt, &err) : NULL;
    double *mean = V ? gp_alloc_doubles(total, &err) : NULL;
    if (mean == NULL) {
        for (size_t t = 0; t < k; t++) {
            rcs[t] = rc ? rc : GP_ENOMEM;
            errs[t] = err;
        }
    } else {
        for (size_t t = 0; t < k; t++)
            gp_model_standardize_points(model, reqs[t].X, reqs[t].m, P + first[t] * d);
        mean_and_whiten(model, im, P, total, V, mean, NULL);
        sample_job j = {model, reqs, samples, rcs, errs, P, V, mean, first};
        gp_parallel_for(k, sample_task, &j);
    }
    free(first);
    free(P);
    free(V);
    free(mean);
}

/* Joint draws from the posterior covariance of several requests
 * (gp_model_sample_batch), in groups of at most SAMPLE_BATCH_DOUBLES of
 * whitened columns. */
static void exact_sample_batch(const gp_model *model, const gp_sample_request *reqs,
                               double *const *samples, int *rcs, gp_error *errs, size_t n)
{
    const exact_impl *im = model->impl;
    for (size_t i = 0; im->coreg && i < n; i++) {
        gp_error_clear(&errs[i]);
        rcs[i] = gp_coreg_exact_sample(model, im->coreg, &reqs[i], samples[i], &errs[i]);
    }
    if (im->coreg)
        return;
    size_t cap = SAMPLE_BATCH_DOUBLES / (im->n ? im->n : 1);
    for (size_t i = 0; i < n;) {
        size_t k = 1, pts = reqs[i].m;
        while (i + k < n && pts + reqs[i + k].m <= cap)
            pts += reqs[i + k++].m;
        sample_group(model, reqs + i, samples + i, rcs + i, errs + i, k);
        i += k;
    }
}

/* One request: a group of one, so that it gets the bits it gets in a batch. */
static int exact_sample(const gp_model *model, const gp_sample_request *req, double *samples,
                        gp_error *err)
{
    int rc = GP_OK;
    gp_error_clear(err);
    const exact_impl *im = model->impl;
    if (im->coreg)
        return gp_coreg_exact_sample(model, im->coreg, req, samples, err);
    sample_group(model, req, &samples, &rc, err, 1);
    return rc;
}

/* ---- observe ----
 *
 * New rows extend the cached factor with the hyperparameters, standardisation
 * and jitter of the fit: K + (s2 + jitter) I over all N = n + k rows has the
 * factor [L 0; B C] with B = K21 L^{-T} and C = chol(K22 + (s2 + jitter) I -
 * B B^T), the factor a fit with these hyperparameters held would compute,
 * for O(n^2 k) instead of O(N^3). */

/* Everything observe builds before it touches the model (all or nothing). */
typedef struct observe_work {
    double *P;      /* d x k new points, working units */
    double *V;      /* n x k: L^{-1} K12 = B^T */
    double *C;      /* k x k: the Schur complement, then its factor */
    double *Xt, *y, *alpha; /* the N-row arrays */
    double *r;      /* N: the rows' known noise (models fitted with it) */
    double *L;      /* N x N: only when the whole factor is recomputed */
    gp_kernel_points *Xp;
} observe_work;

static void observe_work_free(observe_work *w)
{
    free(w->P);
    free(w->V);
    free(w->C);
    free(w->Xt);
    free(w->y);
    free(w->alpha);
    free(w->r);
    free(w->L);
    gp_kernel_points_free(w->Xp);
}

/* V = L^{-1} K(X, P) and C = chol(K(P, P) + (s2 + jitter) I - V^T V) (lower).
 * Returns 0, or nonzero when C is not positive definite. */
static int border_blocks(const gp_model *model, const exact_impl *im, size_t k,
                         observe_work *w)
{
    size_t n = im->n;
    gp_kernel_cross_points(model->kernel, im->Xp, w->P, k, w->V, n);
    gp_trsm_lower(im->L, n, im->ld, 0, w->V, k, n);
    gp_kernel_gram(model->kernel, w->P, k, w->C, k);
    double shift = model->noise_variance + model->diag.jitter;
    for (size_t i = 0; i < k; i++)
        w->C[i * k + i] += shift;
    for (size_t i = 0; w->r && i < k; i++)
        w->C[i * k + i] += w->r[n + i];
    cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)k, (blasint)n, -1.0, w->V,
                (blasint)n, 1.0, w->C, (blasint)k);
    return LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)k, w->C, (lapack_int)k) != 0;
}

/* The leading dimension a factor of N rows grows to: N plus N / 64 spare
 * rows (at least 16), so that a stream of small batches moves the factor
 * once every N / 64 rows rather than at every batch (moving it was half the
 * time of a 1-row observe at N = 2000), for at most 3 % more memory than N^2
 * and never more than the cap's. */
static size_t grown_ld(size_t N, size_t cap)
{
    size_t ld = N + (N / 64 > 16 ? N / 64 : 16);
    return ld < cap ? ld : cap > N ? cap : N;
}

/* Columns of the n x n factor L from leading dimension ld to new_ld > ld
 * in place, from the last to the first, so none overwrites one not yet
 * moved; the upper triangle is zeroed again. */
static void move_columns(double *L, size_t n, size_t ld, size_t new_ld)
{
    for (size_t j = n; j-- > 0;) {
        memmove(L + j * new_ld + j, L + j * ld + j, (n - j) * sizeof *L);
        memset(L + j * new_ld, 0, j * sizeof *L);
    }
}

/* [L 0; V^T C]: the new rows below the n x n factor and the new columns
 * (leading dimension ld >= n + k). */
static void border_factor(double *L, size_t n, size_t k, size_t ld, const double *V,
                          const double *C)
{
    for (size_t j = 0; j < n; j++)
        for (size_t r = 0; r < k; r++)
            L[j * ld + n + r] = V[r * n + j];
    for (size_t c = 0; c < k; c++) {
        double *col = L + (n + c) * ld;
        memset(col, 0, (n + c) * sizeof *L);
        memcpy(col + n + c, C + c * k + c, (k - c) * sizeof *L);
    }
}

/* The bordered factor in im->L's own block, grown by realloc when its
 * spare rows run out: the one step that can still fail comes last, and a
 * failed realloc leaves the old block as it was (mremap grows a large block
 * without a second copy of it). */
static int grow_factor(exact_impl *im, size_t k, observe_work *w, gp_error *err)
{
    size_t n = im->n, N = n + k;
    if (N > im->ld) {
        size_t ld = grown_ld(N, im->cap), count = 0;
        int rc = gp_checked_size(ld, ld, &count, err);
        if (rc)
            return rc;
        double *L = realloc(im->L, count * sizeof *L);
        if (L == NULL)
            return gp_error_set(err, GP_ENOMEM, NULL,
                                "out of memory growing the factor to %zu x %zu", ld, ld);
        im->L = L;
        move_columns(L, n, im->ld, ld);
        im->ld = ld;
    }
    border_factor(im->L, n, k, im->ld, w->V, w->C);
    memcpy(w->alpha, w->y, N * sizeof *w->alpha);
    gp_chol_solve(im->L, N, im->ld, w->alpha, 1, N);
    return GP_OK;
}

/* When C is not positive definite (rows that repeat others with little
 * noise), the factor of all N rows is recomputed under the fit's jitter
 * policy (gp_cholesky_jitter, from zero up): the model a fit of all rows
 * with these hyperparameters held would give. GP_ENOTPD naming "X" when even
 * the policy's largest jitter fails. O(N^3), in a new buffer. */
static int refactor(gp_model *model, size_t N, observe_work *w, double *lml, gp_error *err)
{
    size_t NN = 0;
    gp_chol_info info;
    int rc = gp_checked_size(N, N, &NN, err);
    if (rc == GP_OK && (w->L = gp_alloc_doubles(NN, err)) == NULL)
        rc = GP_ENOMEM;
    if (rc == GP_OK)
        rc = gp_exact_lml_factor_noise(model->kernel, model->noise_variance, w->r, w->Xt, N, w->y,
                                       w->L, w->alpha, lml, NULL, &info, err);
    if (rc == GP_ENOTPD) {
        char why[GP_ERROR_MESSAGE_LEN];
        snprintf(why, sizeof why, "%s", err ? err->message : "");
        return gp_error_set(err, GP_ENOTPD, "X",
                            "the observed rows make the covariance singular: %s", why);
    }
    if (rc)
        return rc;
    gp_zero_upper(w->L, N, N); /* keep only the factor, as the fit does */
    model->diag.jitter = info.jitter;
    return GP_OK;
}

/* The new rows' working-unit arrays and their prepared points. */
static int observe_prepare(const gp_model *model, const exact_impl *im, const double *X,
                           const double *Y, const double *noise, size_t k, observe_work *w,
                           gp_error *err)
{
    size_t n = im->n, d = im->d, N = n + k, nk = 0, kk = 0, Nd = 0;
    int rc = gp_checked_size(n, k, &nk, err);
    if (rc == GP_OK)
        rc = gp_checked_size(k, k, &kk, err);
    if (rc == GP_OK)
        rc = gp_checked_size(N, d, &Nd, err);
    if (rc == GP_OK)
        rc = gp_model_points(model, X, k, &w->P, err);
    if (rc)
        return rc;
    if (!(w->V = gp_alloc_doubles(nk, err)) || !(w->C = gp_alloc_doubles(kk, err)) ||
        !(w->Xt = gp_alloc_doubles(Nd, err)) || !(w->y = gp_alloc_doubles(N, err)) ||
        !(w->alpha = gp_alloc_doubles(N, err)))
        return GP_ENOMEM;
    memcpy(w->Xt, im->Xt, n * d * sizeof *w->Xt);
    memcpy(w->Xt + n * d, w->P, k * d * sizeof *w->Xt);
    memcpy(w->y, im->y, n * sizeof *w->y);
    gp_model_working_targets(model, Y, k, w->y + n);
    if (im->r) { /* gp_model_observe_noise gave the rows' noise */
        if ((w->r = gp_alloc_doubles(N, err)) == NULL)
            return GP_ENOMEM;
        memcpy(w->r, im->r, n * sizeof *w->r);
        gp_model_working_noise(model, noise, k, w->r + n);
    }
    return gp_kernel_points_new(model->kernel, w->Xt, N, &w->Xp, err);
}

/* Swap the new arrays in; w keeps the old ones for observe_work_free. */
static void observe_commit(gp_model *model, exact_impl *im, size_t N, observe_work *w,
                           double lml)
{
    double *t;
    gp_kernel_points *xp = im->Xp;
    im->Xp = w->Xp;
    w->Xp = xp;
    t = im->Xt, im->Xt = w->Xt, w->Xt = t;
    t = im->y, im->y = w->y, w->y = t;
    t = im->alpha, im->alpha = w->alpha, w->alpha = t;
    t = im->r, im->r = w->r, w->r = t;
    if (w->L) { /* recomputed; else grow_factor already grew im->L */
        t = im->L, im->L = w->L, w->L = t;
        im->ld = N;
    }
    im->n = N;
    model->n_train = N;
    model->diag.objective = lml - (double)N * log(model->y_scale);
}

/* Nothing non-finite enters the model: the new rows of the factor (its
 * border, or the whole factor when recomputed), alpha and the LML are
 * checked before observe_commit makes them the model's. The rows below the
 * n x n factor that grow_factor wrote are outside the model until then.
 * O(N k), like the border itself. */
static int check_update_finite(const exact_impl *im, size_t N, const observe_work *w,
                               double lml, gp_error *err)
{
    size_t n = im->n, k = N - n;
    int ok = isfinite(lml) && gp_all_finite(w->alpha, N, NULL);
    if (ok && w->L)
        for (size_t j = 0; ok && j < N; j++)
            ok = gp_all_finite(w->L + j * N + j, N - j, NULL);
    else if (ok) /* the border is V^T and C's lower triangle (border_factor) */
        for (size_t c = 0; ok && c < k; c++)
            ok = gp_all_finite(w->V + c * n, n, NULL) && gp_all_finite(w->C + c * k + c, k - c, NULL);
    if (ok)
        return GP_OK;
    return gp_error_set(err, GP_EDATA, "y",
                        "the %zu observed rows would make the model's state non-finite "
                        "(float64 overflow); the model is unchanged",
                        k);
}

static int exact_observe_noise(gp_model *model, const double *X, const double *Y,
                               const double *noise, size_t k, gp_error *err)
{
    exact_impl *im = model->impl;
    if (im->coreg)
        return gp_coreg_exact_observe(model, im->coreg, X, Y, k, err);
    size_t n = im->n, N = n + k;
    if (k > im->cap || n > im->cap - k)
        return gp_error_set(err, GP_ETOOBIG, "X",
                            "exact GP needs an N x N matrix: %zu training points and %zu new "
                            "rows exceed max_train_points = %zu (fit a method that scales, "
                            "such as sgpr or ssgp, on all the data)",
                            n, k, im->cap);
    int rc = gp_check_working_points(model, X, k, GP_WORKING_LIMIT, err);
    if (rc == GP_OK)
        rc = gp_check_working_targets(model, Y, k, GP_WORKING_LIMIT, err);
    if (rc)
        return rc;
    observe_work w;
    memset(&w, 0, sizeof w);
    double lml = 0.0, jitter = model->diag.jitter;
    rc = observe_prepare(model, im, X, Y, noise, k, &w, err);
    if (rc == GP_OK) {
        if (border_blocks(model, im, k, &w) == 0)
            rc = grow_factor(im, k, &w, err);
        else
            rc = refactor(model, N, &w, &lml, err);
    }
    if (rc == GP_OK && w.L == NULL) /* the bordered factor: the LML at the same cost as alpha */
        lml = -0.5 * cblas_ddot((blasint)N, w.y, 1, w.alpha, 1) -
              0.5 * gp_chol_logdet(im->L, N, im->ld) - 0.5 * (double)N * LOG_2PI;
    if (rc == GP_OK)
        rc = check_update_finite(im, N, &w, lml, err);
    if (rc == GP_OK)
        observe_commit(model, im, N, &w, lml);
    else
        model->diag.jitter = jitter; /* refactor's, undone */
    observe_work_free(&w);
    return rc;
}

/* gp_model_observe_noise gives the rows' noise exactly when the model was
 * fitted with per-point noise (im->r). */
static int exact_observe(gp_model *model, const double *X, const double *Y, size_t k,
                         gp_error *err)
{
    return exact_observe_noise(model, X, Y, NULL, k, err);
}

/* ---- export / import ---- */

static int exact_export(const gp_model *model, gp_state *st, gp_error *err)
{
    const exact_impl *im = model->impl;
    if (im->coreg)
        return gp_coreg_exact_export(im->coreg, st, err);
    /* the factor's leading dimension may exceed n (observe's spare rows) */
    int rc = gp_state_put_cholesky_ld(st, "chol_packed", im->L, im->n, im->ld, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "X_train", im->d, im->n, im->Xt, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "alpha", im->n, 1, im->alpha, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "y_train", im->n, 1, im->y, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "max_train_points", (double)im->cap, err);
    if (rc == GP_OK && im->r) /* only then: other states keep their arrays */
        rc = gp_state_put(st, "noise_train", im->n, 1, im->r, err);
    return rc;
}

/* y = (L L^T) alpha: the targets of a state written before y_train was
 * stored (equal to the fit's y to rounding: L L^T is the matrix alpha was
 * solved with, jitter included). */
static void targets_from_alpha(exact_impl *im)
{
    size_t n = im->n;
    memcpy(im->y, im->alpha, n * sizeof *im->y);
    cblas_dtrmv(CblasColMajor, CblasLower, CblasTrans, CblasNonUnit, (blasint)n, im->L,
                (blasint)im->ld, im->y, 1);
    cblas_dtrmv(CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)n, im->L,
                (blasint)im->ld, im->y, 1);
}

/* y_train and max_train_points, or for states written before them, y from
 * alpha and the default cap. */
static int import_online(const gp_state *st, exact_impl *im, gp_error *err)
{
    const double *y;
    int rc = GP_OK;
    if ((im->y = gp_alloc_doubles(im->n, err)) == NULL)
        return GP_ENOMEM;
    if (gp_state_find(st, "y_train")) {
        if ((rc = gp_state_get(st, "y_train", im->n, 1, &y, err)) != GP_OK)
            return rc;
        memcpy(im->y, y, im->n * sizeof *y);
    } else
        targets_from_alpha(im);
    im->cap = GP_DEFAULT_MAX_TRAIN_POINTS;
    if (gp_state_find(st, "max_train_points")) {
        double cap;
        rc = gp_state_get_scalar(st, "max_train_points", &cap, err);
        if (rc == GP_OK && !(cap >= 1.0 && cap <= 1e15 && cap == floor(cap)))
            rc = gp_error_set(err, GP_EDATA, "max_train_points", "corrupt point cap %g", cap);
        if (rc == GP_OK)
            im->cap = (size_t)cap;
    }
    return rc;
}

/* noise_train: the rows' known noise of a model fitted with it. */
static int import_noise(const gp_state *st, exact_impl *im, gp_error *err)
{
    const double *r;
    int rc = gp_state_get(st, "noise_train", im->n, 1, &r, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < im->n; i++)
        if (!(isfinite(r[i]) && r[i] >= 0.0))
            return gp_error_set(err, GP_EDATA, "noise_train", "corrupt per-point noise");
    if ((im->r = gp_alloc_doubles(im->n, err)) == NULL)
        return GP_ENOMEM;
    memcpy(im->r, r, im->n * sizeof *r);
    return GP_OK;
}

/* A coregionalised model's state into an empty shell. */
static int exact_import_coreg(gp_model *model, const gp_state *st, gp_error *err)
{
    exact_impl *im = calloc(1, sizeof *im);
    if (im == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    int rc = gp_coreg_exact_import(model, st, &im->coreg, err);
    if (rc) {
        free(im);
        return rc;
    }
    model->impl = im;
    return GP_OK;
}

static int exact_import(gp_model *model, const gp_state *st, gp_error *err)
{
    if (gp_coreg_exact_state(st))
        return exact_import_coreg(model, st, err);
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
        rc = import_online(st, im, err);
    if (rc == GP_OK && model->per_point_noise)
        rc = import_noise(st, im, err);
    if (rc == GP_OK)
        rc = gp_kernel_points_new(model->kernel, im->Xt, n, &im->Xp, err);
    if (rc) {
        impl_free(im);
        return rc;
    }
    model->impl = im;
    return GP_OK;
}

struct gp_coreg_exact *gp_exact_coreg(const gp_model *model)
{
    const exact_impl *im = model->method == &gp_method_exact ? model->impl : NULL;
    return im ? im->coreg : NULL;
}

static const gp_method_ops exact_ops = {
    .fit = exact_fit,
    .predict = exact_predict,
    .sample = exact_sample,
    .sample_batch = exact_sample_batch,
    .export_impl = exact_export,
    .import_impl = exact_import,
    .free_impl = impl_free,
    .observe = exact_observe,
    .observe_noise = exact_observe_noise,
    .predict_grad = exact_predict_grad,
    .check_option = gp_coreg_check_option_solver,
    /* predict_block's arithmetic is per point (gp_dot, gp_solve_lower_columns) */
    .batch_invariant = 1,
    .batch_shares_work = 1, /* a batch streams the factor L once */
};

static const gp_option_setting exact_quick[] = {{"max_iterations", 8}};

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
    .per_point_noise = 1,
    .mean_functions = 1,
    .coregionalization = 1,
    .iterations_option = "max_iterations",
    .restarts_option = "restarts",
    .quick = exact_quick,
    .n_quick = sizeof exact_quick / sizeof exact_quick[0],
    .hyper_priors = 1,
    .ops = &exact_ops,
};
