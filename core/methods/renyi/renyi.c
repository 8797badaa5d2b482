/* The Renyi GP (method "renyi"): see core/methods/renyi/renyi.h and docs/methods/renyi-gp.md.
 * Its options, the fit (L-BFGS on the bound of core/methods/renyi/bound.c), alpha = "auto"
 * and the descriptor; its short sections follow renyi-gp.md §3-§5 in order. */
#include "core/methods/renyi/renyi.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/inducing/inducing.h"
#include "core/inducing/post_grad.h"
#include "core/kernel/lml.h"
#include "core/linalg/linalg.h"
#include "core/methods/renyi/bound.h"
#include "core/model/method.h"

#define LOG_2PI 1.8378770664093454836

/* ---- the method ---- */

/* Stream of the fit's seed (gp_rng_derive) for the auto-alpha split. */
#define SPLIT_STREAM 0x52454e5949ULL
#define AUTO_GRID 9 /* a = 0.30, 0.35, ..., 0.70 */

static const gp_kernel_type renyi_kernels[] = {GP_KERNEL_RBF, GP_KERNEL_MATERN12,
                                               GP_KERNEL_MATERN32, GP_KERNEL_MATERN52,
                                               GP_KERNEL_RQ};

static const gp_option_spec renyi_options[] = {
    {"alpha", GP_OPTION_NUMBER, 0.5, NULL, 0, GP_RENYI_ALPHA_MAX, "auto",
     "the Renyi order a in [0, 1 - 1e-6] (0: the exact LML, towards 1: the sgpr bound), or "
     "\"auto\": a from 0.30, 0.35, ..., 0.70 by validation RMSE on a seeded 20% of the "
     "training rows, then refitted on all of them"},
    {"inducing", GP_OPTION_INT, 64, NULL, 1, 8192, NULL,
     "M, the number of inducing inputs (at most N)"},
    {"inducing_selection", GP_OPTION_ENUM, 0, "greedy", 0, 0, "greedy|kmeans|random",
     "how Z is chosen: greedy maximum residual variance (pivoted Cholesky), k-means centres, "
     "or a seeded random subset of the inputs"},
    {"optimize_inducing", GP_OPTION_BOOL, 1, NULL, 0, 1, NULL,
     "true (default): Z is optimised with the hyperparameters; false: Z stays where selection "
     "put it (with alpha auto, the grid's other fits keep the alpha = 0.5 fit's Z either way)"},
    {"reselect", GP_OPTION_INT, 2, NULL, 0, 10, NULL,
     "greedy selection without optimize_inducing: choose Z again under the fitted kernel and "
     "refit, up to this many times while the bound improves"},
    {"dense_max_points", GP_OPTION_INT, GP_RENYI_DENSE_MAX_DEFAULT, NULL, 1, 20000, NULL,
     "the most training points the dense O(N^3) bound accepts (three N x N matrices)"},
    {"max_iterations", GP_OPTION_INT, 200, NULL, 1, 100000, NULL, "L-BFGS iterations per fit"},
    {"tolerance", GP_OPTION_NUMBER, 1e-9, NULL, 1e-16, 1, NULL,
     "stop when the relative change of the bound in an iteration falls below this"},
};

/* The posterior first: gp_inducing_method_predict/sample read it through impl. */
typedef struct renyi_impl {
    gp_inducing_post post;
    double alpha;
} renyi_impl;

static void impl_free(void *p)
{
    renyi_impl *im = p;
    if (im == NULL)
        return;
    gp_inducing_post_free(&im->post);
    free(im);
}

/* The options of one fit. */
typedef struct renyi_opts {
    double alpha; /* NAN for auto */
    size_t inducing;
    gp_inducing_selection selection;
    int optimize_z, max_iterations, reselect;
    double tolerance;
} renyi_opts;

static void read_options(const gp_fit_request *req, renyi_opts *o)
{
    const gp_method *m = &gp_method_renyi;
    const char *kw = gp_option_string(m, req, "alpha");
    o->alpha = kw ? NAN : gp_option_number(m, req, "alpha");
    o->inducing = (size_t)gp_option_number(m, req, "inducing");
    int sel = gp_inducing_selection_from_name(gp_option_string(m, req, "inducing_selection"));
    o->selection = sel < 0 ? GP_INDUCING_GREEDY : (gp_inducing_selection)sel;
    o->optimize_z = gp_option_number(m, req, "optimize_inducing") != 0.0;
    o->max_iterations = (int)gp_option_number(m, req, "max_iterations");
    o->reselect = (int)gp_option_number(m, req, "reselect");
    o->tolerance = gp_option_number(m, req, "tolerance");
}

/* Before anything is allocated: the dense bound holds N x N matrices. */
static int size_guard(const gp_fit_request *req, gp_error *err)
{
    size_t dense = (size_t)gp_option_number(&gp_method_renyi, req, "dense_max_points");
    size_t cap = gp_fit_point_cap(req);
    if (req->n > dense)
        return gp_error_set(err, GP_ETOOBIG, "options.dense_max_points",
                            "the dense renyi bound is O(N^3) with three N x N matrices: %zu "
                            "training points exceed dense_max_points = %zu (raise it, or use "
                            "method sgpr)",
                            req->n, dense);
    if (req->n > cap)
        return gp_error_set(err, GP_ETOOBIG, "X",
                            "the renyi bound needs N x N matrices: %zu training points exceed "
                            "max_train_points = %zu (raise --max-train-points, or use sgpr)",
                            req->n, cap);
    return GP_OK;
}

/* One data set (working units) a fit runs on. */
typedef struct fit_data {
    const double *X, *y;
    size_t n, d;
    const double *r; /* known per-point noise of the rows (NULL: none) */
    /* a mean profiled out of every bound (type zero: none) and where its
     * estimate on these rows goes */
    renyi_mean mean;
} fit_data;

typedef struct objective_ctx {
    const fit_data *data;
    double a;
} objective_ctx;

static int objective(void *ctx, const gp_kernel *k, double s2, const double *Z, size_t m,
                     double *f, double *grad, double *gz)
{
    const objective_ctx *oc = ctx;
    const fit_data *D = oc->data;
    gp_renyi_terms t;
    gp_error err;
    int rc = renyi_bound_eval(k, s2, oc->a, D->X, D->n, D->d, D->y, D->r, &D->mean, Z, m, &t, 0,
                              grad, gz, NULL, &err);
    if (rc == GP_OK)
        *f = t.bound;
    return rc;
}

/* Progress and bookkeeping shared by all the fits of one request. */
typedef struct fit_run {
    const gp_fit_request *req;
    const renyi_opts *o;
    double y_scale;
    int max_total;
    gp_diagnostics *diag;
} fit_run;

/* The driver's settings for maximising L_a (oc) on D; progress continues
 * from the request's earlier fits. */
static gp_inducing_fit_spec fit_spec(const fit_run *run, objective_ctx *oc, int optimize_z)
{
    gp_inducing_fit_spec spec = {
        .fn = objective,
        .ctx = oc,
        .optimize_z = optimize_z,
        .max_iterations = run->o->max_iterations,
        .tolerance = run->o->tolerance,
        .objective_offset = -(double)oc->data->n * log(run->y_scale),
        .iteration_base = run->diag->iterations,
        .max_total = run->max_total,
    };
    return spec;
}

/* Maximise L_a over k, *s2 (start: np->start) and, when optimised, Z. */
static int fit_one(const fit_run *run, const fit_data *D, double a, gp_kernel *k,
                   const gp_noise_param *np, double *s2, double *Z, size_t m, int optimize_z,
                   gp_error *err)
{
    objective_ctx oc = {D, a};
    gp_inducing_fit_spec spec = fit_spec(run, &oc, optimize_z);
    return gp_inducing_optimise(k, np, s2, Z, m, run->req, &spec, run->diag, err);
}

/* *Z (allocated here) with room for M = min(inducing, n) points of D. */
static int alloc_z(const fit_run *run, const fit_data *D, size_t *M, double **Z, gp_error *err)
{
    size_t dm = 0;
    *M = run->o->inducing < D->n ? run->o->inducing : D->n;
    int rc = gp_checked_size(D->d, *M, &dm, err);
    if (rc)
        return rc;
    return (*Z = gp_alloc_doubles(dm, err)) != NULL ? GP_OK : GP_ENOMEM;
}

static int check_chosen(size_t m, gp_error *err)
{
    return m > 0 ? GP_OK
                 : gp_error_set(err, GP_EDATA, "X", "no inducing input could be chosen");
}

/* Z for the data set D, chosen with the initial kernel k0. */
static int choose_z(const fit_run *run, const gp_kernel *k0, const fit_data *D, double **Z,
                    size_t *m, gp_error *err)
{
    size_t M;
    int rc = alloc_z(run, D, &M, Z, err);
    if (rc == GP_OK)
        rc = gp_inducing_select(run->o->selection, k0, D->X, D->n, D->d, M, run->req->seed, *Z,
                                m, err);
    return rc ? rc : check_chosen(*m, err);
}

/* The fit on all rows at order a: Z chosen under k (the request's kernel,
 * or with auto the chosen a's fitted one), then gp_inducing_fit (optimised
 * Z, or greedy re-selection rounds for fixed Z). *Z is allocated here. */
static int final_fit(const fit_run *run, const fit_data *D, double a, gp_kernel *k,
                     const gp_noise_param *np, double *s2, double **Z, size_t *m,
                     gp_error *err)
{
    size_t M;
    int rc = alloc_z(run, D, &M, Z, err);
    if (rc)
        return rc;
    objective_ctx oc = {D, a};
    gp_inducing_fit_spec spec = fit_spec(run, &oc, run->o->optimize_z);
    rc = gp_inducing_fit(k, np, s2, run->o->selection, M, run->o->reselect, D->X, D->n, *Z, m,
                         run->req, &spec, run->diag, err);
    return rc ? rc : check_chosen(*m, err);
}

/* ---- alpha = "auto" (docs/methods/renyi-gp.md §4.5) ---- */

/* RMSE (working units) of the posterior's latent means at the points of D,
 * plus the mean h(x)^T beta of the training rows' fit (mean: its type). */
static double validation_rmse(const gp_kernel *k, const gp_inducing_post *p, const fit_data *D,
                              const renyi_mean *mean, gp_error *err)
{
    size_t m = p->m, mn = 0;
    if (gp_checked_size(m, D->n, &mn, err))
        return NAN;
    double *Aw = gp_alloc_doubles(mn, err), sse = 0.0;
    if (Aw == NULL)
        return NAN;
    gp_kernel_cross(k, p->Z, m, D->X, D->n, Aw, m);
    gp_trsm_lower(p->L, m, m, 0, Aw, D->n, m);
    for (size_t j = 0; j < D->n; j++) {
        double r = cblas_ddot((blasint)m, Aw + j * m, 1, p->mt, 1) - D->y[j];
        if (mean->type != GP_MEAN_ZERO)
            r += gp_mean_at(mean->type, mean->beta, D->X + j * D->d, D->d);
        sse += r * r;
    }
    free(Aw);
    return sqrt(sse / (double)D->n);
}

/* The seeded 80/20 split of D's rows (Fisher-Yates) into tr and va, whose
 * arrays (allocated here, one block: Xtr, Xva, ytr, yva, r, and the
 * training rows' mean coefficients) *buf owns. */
static int split_rows(const fit_data *D, uint64_t seed, fit_data *tr, fit_data *va,
                      double **buf, gp_error *err)
{
    size_t n = D->n, d = D->d, *perm = malloc(n * sizeof *perm), nd = 0;
    int rc = perm ? gp_checked_size(n, d + 1 + (D->r ? 1 : 0), &nd, err) : GP_ENOMEM;
    if (rc == GP_OK && nd + d + 1 < nd)
        rc = gp_error_set(err, GP_ETOOBIG, NULL, "too many rows");
    nd += d + 1;
    *buf = rc ? NULL : gp_alloc_doubles(nd, err);
    if (*buf == NULL) {
        free(perm);
        return rc ? rc : gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    gp_rng rng;
    gp_rng_derive(&rng, seed, SPLIT_STREAM);
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)gp_rng_below(&rng, (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    size_t nv = n / 5 > 0 ? n / 5 : 1;
    double *X = *buf, *y = *buf + n * d;
    for (size_t i = 0; i < n; i++) {
        memcpy(X + i * d, D->X + perm[i] * d, d * sizeof *X);
        y[i] = D->y[perm[i]];
    }
    renyi_mean mean = {D->mean.type, y + n + (D->r ? n : 0)};
    *tr = (fit_data){X, y, n - nv, d, NULL, mean};
    *va = (fit_data){X + (n - nv) * d, y + (n - nv), nv, d, NULL, mean};
    if (D->r) { /* each row's known noise follows it */
        double *r = y + n;
        for (size_t i = 0; i < n; i++)
            r[i] = D->r[perm[i]];
        tr->r = r;
        va->r = r + (n - nv);
    }
    free(perm);
    return GP_OK;
}

/* Grid value i in the order 0.50, 0.45, 0.55, ..., 0.30, 0.70: ties go to
 * the earlier, i.e. closer to 0.5, value. */
static double grid_alpha(int i)
{
    int step = i % 2 ? -(i + 1) / 2 : i / 2;
    return (double)(10 + step) / 20.0;
}

/* The state a grid fit starts from and returns: kernel, noise and Z. */
typedef struct grid_point {
    gp_kernel *k;
    gp_noise_param np;
    double s2;
    double *Z;
    size_t m;
} grid_point;

/* Fit a on tr from `from` (copied) and score it on va, Z optimised only when
 * optimize_z. A fit that fails for numerical reasons scores +inf;
 * cancellation and memory errors stop. */
static int grid_fit(const fit_run *run, const fit_data *tr, const fit_data *va, double a,
                    int optimize_z, const grid_point *from, grid_point *out, double *rmse,
                    gp_error *err)
{
    *rmse = INFINITY;
    out->s2 = NAN;
    out->np = from->np;
    out->m = from->m;
    int rc = gp_kernel_copy(&out->k, from->k, err);
    if (rc == GP_OK && (out->Z = gp_alloc_doubles(from->m * tr->d, err)) == NULL)
        rc = GP_ENOMEM;
    if (rc)
        return rc;
    memcpy(out->Z, from->Z, from->m * tr->d * sizeof *out->Z);
    rc = fit_one(run, tr, a, out->k, &out->np, &out->s2, out->Z, out->m, optimize_z, err);
    gp_inducing_post p;
    if (rc == GP_OK)
        rc = renyi_bound_eval(out->k, out->s2, a, tr->X, tr->n, tr->d, tr->y, tr->r, &tr->mean,
                              out->Z, out->m, NULL, 0, NULL, NULL, &p, err);
    if (rc == GP_OK) {
        *rmse = validation_rmse(out->k, &p, va, &tr->mean, err) * run->y_scale;
        gp_inducing_post_free(&p);
        if (isnan(*rmse))
            return GP_ENOMEM;
    }
    return rc == GP_ECANCELLED || rc == GP_ENOMEM ? rc : GP_OK;
}

static void grid_point_free(grid_point *g)
{
    gp_kernel_free(g->k);
    free(g->Z);
    memset(g, 0, sizeof *g);
}

/* The noise a warm start begins from (a fixed noise stays fixed). */
static gp_noise_param warm_noise(const gp_noise_param *np, double s2)
{
    gp_noise_param w = *np;
    if (w.learned && isfinite(s2))
        w.start = s2;
    return w;
}

/* Run the grid on tr/va from the start point; *best receives the winner. */
static int run_grid(const fit_run *run, const fit_data *tr, const fit_data *va,
                    grid_point *start, grid_point *best, double *a_best, double *rmse_best,
                    gp_error *err)
{
    grid_point half = {0}, cur = {0};
    int rc = GP_OK;
    *rmse_best = INFINITY;
    for (int i = 0; i < AUTO_GRID && rc == GP_OK; i++) {
        double a = grid_alpha(i), rmse;
        /* Only the first (a = 0.5) fit moves Z: the others keep its Z and fit the
         * hyperparameters alone, which converges in a fraction of the iterations
         * and compares the values of a on one inducing set. */
        rc = grid_fit(run, tr, va, a, i == 0 && run->o->optimize_z, i == 0 ? start : &half,
                      &cur, &rmse, err);
        if (rc == GP_OK && rmse < *rmse_best) {
            *rmse_best = rmse;
            *a_best = a;
            grid_point_free(best);
            if ((rc = gp_kernel_copy(&best->k, cur.k, err)) == GP_OK)
                best->s2 = cur.s2;
        }
        if (i == 0) {
            half = cur; /* the others warm-start from the 0.5 optimum */
            half.np = warm_noise(&start->np, cur.s2);
            memset(&cur, 0, sizeof cur);
        } else
            grid_point_free(&cur);
    }
    grid_point_free(&half);
    grid_point_free(&cur);
    if (rc == GP_OK && !isfinite(*rmse_best))
        rc = gp_error_set(err, GP_ENOTPD, NULL, "no alpha of the auto grid could be fitted");
    return rc;
}

/* Choose a by validation RMSE; k (the model's kernel) and *np take the
 * chosen fit's hyperparameters as the final refit's start. */
static int auto_alpha(const fit_run *run, const gp_kernel *k0, const fit_data *all,
                      gp_kernel *k, gp_noise_param *np, double *a, double *rmse, gp_error *err)
{
    *a = 0.5;
    *rmse = NAN;
    if (all->n < 2)
        return GP_OK; /* nothing to validate on */
    fit_data tr = {0}, va = {0};
    double *buf;
    int rc = split_rows(all, run->req->seed, &tr, &va, &buf, err);
    if (rc)
        return rc;
    grid_point start = {.np = *np}, best = {0};
    rc = gp_kernel_copy(&start.k, k0, err);
    if (rc == GP_OK)
        rc = choose_z(run, k0, &tr, &start.Z, &start.m, err);
    if (rc == GP_OK)
        rc = run_grid(run, &tr, &va, &start, &best, a, rmse, err);
    if (rc == GP_OK) {
        double *theta = gp_alloc_doubles(gp_kernel_n_params(k), err);
        if (theta == NULL)
            rc = GP_ENOMEM;
        else {
            gp_kernel_get_params(best.k, theta);
            gp_kernel_set_params(k, theta);
            *np = warm_noise(np, best.s2);
        }
        free(theta);
    }
    grid_point_free(&start);
    grid_point_free(&best);
    free(buf);
    return rc;
}

/* ---- fit ---- */

/* The final bound at the fitted values: the posterior and the report. */
static int finish(gp_model *model, renyi_impl *im, const fit_data *D, const double *Z, size_t m,
                  gp_error *err)
{
    gp_renyi_terms t;
    const gp_kernel *k = model->kernel;
    double s2 = model->noise_variance, off = -(double)D->n * log(model->y_scale), exact;
    int rc = renyi_bound_eval(k, s2, im->alpha, D->X, D->n, D->d, D->y, D->r, &D->mean, Z, m,
                              &t, 1, NULL, NULL, &im->post, err);
    if (rc == GP_OK)
        rc = gp_inducing_post_prepare(&im->post, k, err);
    if (rc)
        return rc;
    /* with a mean: the exact LML at the bound's coefficients, of the residual */
    double *res = gp_alloc_doubles(D->n, err);
    if (res == NULL)
        return GP_ENOMEM;
    for (size_t i = 0; i < D->n; i++)
        res[i] = D->y[i] - (D->mean.type != GP_MEAN_ZERO
                                ? gp_mean_at(D->mean.type, D->mean.beta, D->X + i * D->d, D->d)
                                : 0.0);
    gp_error xerr;
    if (gp_exact_lml_grad_noise(k, s2, D->r, D->X, D->d, D->n, res, &exact, NULL, &xerr) !=
        GP_OK)
        exact = NAN; /* reported as unknown; the fit itself stands */
    free(res);
    model->diag.objective = t.bound + off;
    model->diag.jitter = im->post.jitter;
    double sumk = (double)D->n * gp_kernel_diag(k, D->X);
    gp_model_info_number(model, "inducing", (double)m);
    gp_model_info_number(model, "trace_term", t.trace);
    gp_model_info_number(model, "trace_fraction", sumk > 0.0 ? t.trace / sumk : NAN);
    gp_model_info_number(model, "exact_lml", exact + off);
    gp_model_info_number(model, "gap", exact - t.bound);
    if (D->r == NULL) { /* derived for one noise variance only */
        gp_model_info_number(model, "certified_gap", t.certified);
        gp_model_info_number(model, "upper_bound", t.upper + off);
    }
    return GP_OK;
}

static void report_options(gp_model *model, const renyi_opts *o, double a, double rmse)
{
    gp_model_info_number(model, "alpha", a);
    gp_model_info_string(model, "alpha_selection", isnan(o->alpha) ? "auto" : "fixed");
    gp_model_info_string(model, "inducing_selection", gp_inducing_selection_name(o->selection));
    gp_model_info_number(model, "optimize_inducing", o->optimize_z ? 1.0 : 0.0);
    if (isnan(o->alpha))
        gp_model_info_number(model, "validation_rmse", rmse);
}

static int fit_model(gp_model *model, const gp_fit_request *req, const fit_data *all,
                     gp_error *err)
{
    renyi_opts o;
    read_options(req, &o);
    int is_auto = isnan(o.alpha);
    gp_noise_param np;
    gp_noise_param_init(&np, req, all->y, all->n);
    fit_run run = {req, &o, model->y_scale, o.max_iterations * (is_auto ? AUTO_GRID + 1 : 1),
                   &model->diag};
    double a = o.alpha, rmse = NAN, s2 = np.start, *Z = NULL;
    size_t m = 0;
    int rc = is_auto ? auto_alpha(&run, req->kernel, all, model->kernel, &np, &a, &rmse, err)
                     : GP_OK;
    if (rc == GP_OK)
        rc = final_fit(&run, all, a, model->kernel, &np, &s2, &Z, &m, err);
    renyi_impl *im = model->impl;
    im->alpha = a;
    if (rc == GP_OK) {
        model->noise_variance = s2;
        report_options(model, &o, a, rmse);
        rc = finish(model, im, all, Z, m, err);
    }
    free(Z);
    return rc;
}

static int renyi_fit(const gp_method *m, const gp_fit_request *req, gp_model **out, gp_error *err)
{
    gp_model *model;
    /* the bound's c log|A| divides by s2 (renyi-gp.md §2) */
    if (req->noise_per_point && req->noise_given && !(req->noise_variance > 0.0))
        return gp_error_set(err, GP_EUNSUPPORTED, "noise.variance",
                            "renyi needs noise.variance > 0 beside noise.per_point; fix it at a "
                            "small value such as 1e-8 or let it be learned");
    int rc = size_guard(req, err);
    if (rc == GP_OK)
        rc = gp_model_new(m, req, &model, err);
    if (rc)
        return rc;
    double *Xw = NULL, *yw = NULL;
    if ((model->impl = calloc(1, sizeof(renyi_impl))) == NULL)
        rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    if (rc == GP_OK)
        rc = gp_model_points(model, req->X, req->n, &Xw, err);
    if (rc == GP_OK && (yw = gp_alloc_doubles(req->n, err)) == NULL)
        rc = GP_ENOMEM;
    if (rc == GP_OK) {
        gp_model_working_targets(model, req->y, req->n, yw);
        double *r = gp_model_working_noise_alloc(model, req->noise_per_point, req->n, &rc, err);
        fit_data all = {Xw, yw, req->n, req->d, r, {model->mean_type, model->mean_coef}};
        if (rc == GP_OK)
            rc = fit_model(model, req, &all, err);
        free(r);
    }
    free(Xw);
    free(yw);
    if (rc) {
        gp_model_free(model);
        return rc;
    }
    *out = model;
    return GP_OK;
}

/* ---- predict, sample, export, import: the whitened posterior ---- */

static int renyi_export(const gp_model *model, gp_state *st, gp_error *err)
{
    const renyi_impl *im = model->impl;
    int rc = gp_inducing_post_export(&im->post, st, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "alpha", im->alpha, err);
    return rc;
}

static int renyi_import(gp_model *model, const gp_state *st, gp_error *err)
{
    double a = NAN;
    int rc = gp_state_get_scalar(st, "alpha", &a, err);
    if (rc == GP_OK && !(a >= 0.0 && a <= GP_RENYI_ALPHA_MAX))
        rc = gp_error_set(err, GP_EDATA, "alpha", "alpha must be in [0, 1 - 1e-6]");
    if (rc)
        return rc;
    renyi_impl *im = calloc(1, sizeof *im);
    if (im == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    im->alpha = a;
    rc = gp_inducing_post_import(model, st, &im->post, err);
    if (rc) {
        free(im);
        return rc;
    }
    model->impl = im;
    return GP_OK;
}

static const gp_method_ops renyi_ops = {
    .fit = renyi_fit,
    .predict = gp_inducing_method_predict,
    .predict_grad = gp_inducing_method_predict_grad,
    .batch_invariant = 1, /* core/inducing's predict: per-point arithmetic */
    .sample = gp_inducing_method_sample,
    .export_impl = renyi_export,
    .import_impl = renyi_import,
    .free_impl = impl_free,
};

static const gp_info_spec renyi_info[] = {
    {"alpha", GP_INFO_NUMBER,
     "the alpha of the bound"},
    {"alpha_selection", GP_INFO_STRING,
     "\"fixed\" or \"auto\""},
    {"inducing", GP_INFO_NUMBER,
     "M, the number of inducing points"},
    {"inducing_selection", GP_INFO_STRING,
     "how Z was chosen (greedy, kmeans or random)"},
    {"optimize_inducing", GP_INFO_NUMBER,
     "1 when Z moved with the hyperparameters"},
    {"trace_term", GP_INFO_NUMBER,
     "tr(Kff - Q) at the optimum"},
    {"trace_fraction", GP_INFO_NUMBER,
     "tr(Kff - Q) / tr(Kff)"},
    {"exact_lml", GP_INFO_NUMBER,
     "the exact log marginal likelihood at the fitted hyperparameters"},
    {"gap", GP_INFO_NUMBER,
     "exact_lml minus the bound: the Renyi divergence of q from the posterior"},
    {"certified_gap", GP_INFO_NUMBER,
     "the certified bound G(alpha) on the gap"},
    {"upper_bound", GP_INFO_NUMBER,
     "an upper bound on the exact log marginal likelihood"},
    {"validation_rmse", GP_INFO_NUMBER,
     "alpha auto only: the held-out RMSE of the chosen alpha"},
};

static const gp_option_setting renyi_quick[] = {{"max_iterations", 8}, {"inducing", 8}};

const gp_method gp_method_renyi = {
    .name = "renyi",
    .summary = "Renyi GP (Yue and Al Kontar): inducing-point regression fitted by the Renyi "
               "alpha-divergence bound, between the exact LML (a = 0) and the sgpr bound "
               "(a -> 1); dense O(N^3) fit, O(M^2) per predicted point",
    .objective_name = "renyi_bound",
    .options = renyi_options,
    .n_options = sizeof renyi_options / sizeof renyi_options[0],
    .kernels = renyi_kernels,
    .n_kernels = sizeof renyi_kernels / sizeof renyi_kernels[0],
    .composite_kernels = 0,
    .iterations_option = "max_iterations",
    .restarts_option = NULL,
    .info = renyi_info,
    .n_info = sizeof renyi_info / sizeof renyi_info[0],
    .quick = renyi_quick,
    .n_quick = sizeof renyi_quick / sizeof renyi_quick[0],
    .hyper_priors = 1,
    .per_point_noise = 1,
    .mean_functions = 1,
    .ops = &renyi_ops,
};
