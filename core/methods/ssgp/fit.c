/* Fit of method "ssgp": L-BFGS over the free kernel parameters, the noise and the frequencies. */
#include "core/methods/ssgp/fit.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/methods/ssgp/internal.h"
#include "core/methods/ssgp/model.h"
#include "core/methods/ssgp/observe.h"
#include "core/methods/ssgp/rows.h"
#include "core/model/rows_passes.h"
#include "core/model/mean.h"

/* ---- the fit problem: L-BFGS over free kernel parameters, noise, omega ---- */

/* The fit's rows in working units: inputs (n x d of the kernel's dims),
 * targets, known noise (NULL: none) and a mean's basis of all the inputs
 * (n x p; NULL: zero mean), profiled out of every LML (gp_rff_problem.H).
 * Or rows read in chunks (stream; the others NULL) with what the fit needs
 * of them beyond the LML: the targets' power and the inputs' variances. */
typedef struct ssgp_data {
    const double *Xw, *yw, *rw;
    const double *H;
    gp_rff_rows *stream;
    double power;
    const double *col_var;
} ssgp_data;

typedef struct fit_problem {
    gp_rff_problem rp;
    gp_rff_basis basis; /* a mean's, profiled out (n_coef 0: zero mean) */
    gp_rff_work *work;      /* in memory */
    gp_rff_rows *stream;    /* or streamed (its own work) */
    gp_kernel *k;           /* working copy */
    double *log_ls;         /* d (a shared lengthscale repeated) */
    double *omega;          /* R x d: the frequencies (updated when learned) */
    double *g_omega, *g_ls; /* gradient blocks */
    int free_amp, free_ls, learn_omega;
    size_t n_ls;            /* lengthscale parameters of the kernel (1 or d) */
    gp_noise_param np;
    double noise;           /* the noise variance of the last problem_apply */
    const gp_fit_request *req;
    const double *r;        /* known per-point noise, working units (NULL: none) */
    double lml_offset;
    int iteration_base; /* progress continues over the fits of one request */
} fit_problem;

static size_t problem_dim(const fit_problem *p)
{
    return (p->free_amp ? 1 : 0) + (p->free_ls ? p->n_ls : 0) + (p->np.learned ? 1 : 0) +
           (p->learn_omega ? p->rp.R * p->rp.d : 0);
}

/* Layout of x: [log a2] [log l (n_ls)] [noise] [omega (R d)], each block only
 * when free. */
static void problem_apply(fit_problem *p, const double *x)
{
    size_t i = 0, d = p->rp.d;
    if (p->free_amp)
        p->k->log_variance = x[i++];
    if (p->free_ls) {
        memcpy(p->k->log_lengthscale, x + i, p->n_ls * sizeof *x);
        i += p->n_ls;
    }
    for (size_t j = 0; j < d; j++)
        p->log_ls[j] = p->k->log_lengthscale[p->n_ls == 1 ? 0 : j];
    p->rp.log_amplitude2 = p->k->log_variance;
    double s = gp_noise_param_value(&p->np, p->np.learned ? x[i++] : 0.0);
    p->noise = s;
    p->rp.log_noise = log(s);
    if (p->learn_omega)
        memcpy(p->omega, x + i, p->rp.R * d * sizeof *x);
}

static void problem_start(const fit_problem *p, double *x)
{
    size_t i = 0;
    if (p->free_amp)
        x[i++] = p->k->log_variance;
    if (p->free_ls) {
        memcpy(x + i, p->k->log_lengthscale, p->n_ls * sizeof *x);
        i += p->n_ls;
    }
    if (p->np.learned)
        x[i++] = gp_noise_param_x0(&p->np);
    if (p->learn_omega)
        memcpy(x + i, p->omega, p->rp.R * p->rp.d * sizeof *x);
}

/* The LML at the last problem_apply: of the rows in memory, or streamed. */
static int problem_lml(fit_problem *p, double *lml, const gp_rff_grad *grad, gp_error *err)
{
    if (p->stream)
        return gp_rff_rows_lml(p->stream, &p->rp, lml, grad, err);
    return gp_rff_lml_mean(&p->rp, p->r, &p->basis, p->work, lml, grad, err);
}

/* Negative LML and its gradient; +inf when A cannot be factored. */
static double problem_objective(void *ctx, const double *x, double *g)
{
    fit_problem *p = ctx;
    problem_apply(p, x);
    double lml, g_amp = 0, g_noise = 0;
    gp_rff_grad grad = {p->learn_omega ? p->g_omega : NULL, p->free_ls ? p->g_ls : NULL,
                        &g_amp, &g_noise};
    if (problem_lml(p, &lml, &grad, NULL))
        return INFINITY;
    size_t i = 0, d = p->rp.d;
    if (p->free_amp)
        g[i++] = -g_amp;
    if (p->free_ls) {
        if (p->n_ls == 1) {
            double sum = 0;
            for (size_t j = 0; j < d; j++)
                sum += p->g_ls[j];
            g[i++] = -sum;
        } else
            for (size_t j = 0; j < d; j++)
                g[i++] = -p->g_ls[j];
    }
    if (p->np.learned)
        g[i++] = -gp_noise_param_grad(&p->np, p->noise, g_noise);
    if (p->learn_omega)
        for (size_t j = 0; j < p->rp.R * d; j++)
            g[i++] = -p->g_omega[j];
    return -lml;
}

/* Which blocks are free: the kernel's group bits and the spec's held
 * entries. The lengthscales are one block here (the sampler's frequencies
 * are drawn for them all), so holding some but not all of them is refused. */
static int held_groups(fit_problem *p, const gp_hyper_spec *hs, gp_error *err)
{
    unsigned char *mask = malloc(1 + p->n_ls);
    if (mask == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    gp_hyper_free_mask(p->k, hs, mask);
    size_t free_ls = 0;
    for (size_t j = 0; j < p->n_ls; j++)
        free_ls += mask[1 + j];
    p->free_amp = mask[0];
    p->free_ls = free_ls > 0;
    free(mask);
    if (free_ls > 0 && free_ls < p->n_ls)
        return gp_error_set(err, GP_EUNSUPPORTED, "kernel.fixed",
                            "ssgp learns its lengthscales together: hold all of them or none");
    return GP_OK;
}

/* The driver through the request's priors and bounds; x's layout is
 * problem_apply's, the frequencies the method's own. */
static int problem_minimize(fit_problem *p, double *x, size_t dim, const gp_driver_options *opt,
                            gp_driver_result *res, gp_error *err)
{
    const gp_hyper_spec *hs = p->req->hyper;
    if (hs == NULL)
        return gp_driver_minimize(problem_objective, p, x, dim, opt, res, err);
    size_t *coord = malloc(dim * sizeof *coord), i = 0;
    if (coord == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    if (p->free_amp)
        coord[i++] = 0;
    for (size_t j = 0; p->free_ls && j < p->n_ls; j++)
        coord[i++] = 1 + j;
    if (p->np.learned)
        coord[i++] = GP_HYPER_NOISE;
    while (i < dim)
        coord[i++] = GP_HYPER_OTHER;
    gp_hyper_coords hc = {coord, dim, p->np.floor};
    int rc = gp_hyper_minimize(hs, &hc, p->k, problem_objective, p, x, opt, res, err);
    free(coord);
    return rc;
}

/* A lengthscale with a prior or a bound: the start search leaves it as given. */
static int lengthscales_stated(const fit_problem *p)
{
    const gp_hyper_spec *hs = p->req->hyper;
    for (size_t j = 0; hs && j < p->n_ls; j++)
        if (gp_hyper_entry_stated(&hs->entry[1 + j]))
            return 1;
    return 0;
}

static int problem_init(fit_problem *p, const gp_model *model, const gp_fit_request *req,
                        const ssgp_data *D, ssgp_impl *im, int learn_omega, gp_error *err)
{
    memset(p, 0, sizeof *p);
    size_t n = req->n, d = im->d, R = im->R;
    const double *Xw = D->Xw, *yw = D->yw;
    p->req = req;
    p->r = D->rw;
    p->lml_offset = -(double)n * log(model->y_scale);
    p->rp = (gp_rff_problem){.X = Xw, .y = yw, .n = n, .d = d, .R = R, .omega = im->omega,
                             .cancel = &req->cancel};
    p->basis = (gp_rff_basis){D->H, D->H ? gp_mean_n_coef(model->mean_type, model->input_dim) : 0,
                              model->mean_coef};
    p->omega = im->omega;
    p->learn_omega = learn_omega;
    p->stream = D->stream;
    int rc = gp_kernel_copy(&p->k, model->kernel, err);
    if (rc == GP_OK && p->stream == NULL)
        rc = gp_rff_work_new(n, d, R, &p->work, err);
    if (rc)
        return rc;
    p->n_ls = p->k->n_lengthscale;
    if ((rc = held_groups(p, req->hyper, err)) != GP_OK)
        return rc;
    if (!(p->log_ls = gp_alloc_doubles(d, err)) || !(p->g_ls = gp_alloc_doubles(d, err)) ||
        (learn_omega && !(p->g_omega = gp_alloc_doubles(R * d, err))))
        return GP_ENOMEM;
    p->rp.log_ls = p->log_ls;
    if (p->stream)
        gp_noise_param_init_power(&p->np, req, D->power);
    else
        gp_noise_param_init(&p->np, req, yw, n);
    return GP_OK;
}

static void problem_free(fit_problem *p)
{
    gp_kernel_free(p->k);
    gp_rff_work_free(p->work);
    free(p->log_ls);
    free(p->g_ls);
    free(p->g_omega);
}

/* The sparse-spectrum LML has local optima at short lengthscales, where the
 * fixed frequencies turn into high-frequency features that interpolate the
 * data (measured: an orf fit of sin(3x) from lengthscale 1 ended at 0.02 with
 * LML 19, against 175 at 0.57 from a start of 0.5). So L-BFGS starts from the
 * best of the given lengthscales times 2^k, k = -3..2: six value-only
 * evaluations, and the given values win ties. */
static void best_lengthscale_start(fit_problem *p, double *x)
{
    size_t off = p->free_amp ? 1 : 0;
    double *base = malloc(p->n_ls * sizeof *base);
    if (base == NULL)
        return;
    memcpy(base, x + off, p->n_ls * sizeof *base);
    /* k = 0 first: the given values win ties. */
    static const int order[] = {0, -3, -2, -1, 1, 2};
    double best_f = INFINITY, best_shift = 0.0;
    for (size_t o = 0; o < sizeof order / sizeof order[0]; o++) {
        double shift = order[o] * 0.6931471805599453; /* 2^k */
        for (size_t j = 0; j < p->n_ls; j++)
            x[off + j] = base[j] + shift;
        problem_apply(p, x);
        double lml;
        if (problem_lml(p, &lml, NULL, NULL) == GP_OK && -lml < best_f) {
            best_f = -lml;
            best_shift = shift;
        }
    }
    for (size_t j = 0; j < p->n_ls; j++)
        x[off + j] = base[j] + best_shift;
    free(base);
}

static int optimise(fit_problem *p, const gp_method *m, const gp_fit_request *req,
                    gp_diagnostics *diag, gp_error *err)
{
    size_t dim = problem_dim(p);
    double *x = gp_alloc_doubles(dim ? dim : 1, err);
    if (x == NULL)
        return GP_ENOMEM;
    problem_start(p, x);
    if (p->free_ls && !lengthscales_stated(p))
        best_lengthscale_start(p, x);
    int rc = GP_OK;
    if (dim > 0) {
        gp_driver_options opt;
        gp_driver_default_options(&opt);
        opt.max_iterations = (int)gp_option_number(m, req, "max_iterations");
        opt.tolerance = gp_option_number(m, req, "tolerance");
        opt.progress = req->progress;
        opt.progress_ctx = req->progress_ctx;
        opt.iteration_base = p->iteration_base;
        opt.objective_offset = p->lml_offset;
        opt.cancel = &req->cancel;
        gp_driver_result res;
        rc = problem_minimize(p, x, dim, &opt, &res, err);
        p->iteration_base += res.iterations;
        diag->iterations += res.iterations;
        diag->evaluations += res.evaluations;
        diag->converged = rc == GP_OK && res.converged;
    } else
        diag->converged = 1;
    if (rc == GP_OK)
        problem_apply(p, x);
    free(x);
    return rc;
}

/* ---- fit ---- */

static int read_options(const gp_method *m, const gp_fit_request *req, size_t *R,
                        int *sampler, gp_stein_options *stein, int *learn)
{
    *R = (size_t)gp_option_number(m, req, "features");
    const char *f = gp_option_string(m, req, "frequencies");
    *sampler = strcmp(f, "auto") == 0 ? -1 : gp_freq_sampler_from_name(f);
    gp_stein_default_options(stein);
    stein->iterations = (int)gp_option_number(m, req, "stein_iterations");
    stein->step = gp_option_number(m, req, "stein_step");
    stein->bandwidth = strcmp(gp_option_string(m, req, "bandwidth"), "per_dim") == 0
                           ? GP_SVGD_BANDWIDTH_PER_DIM
                           : GP_SVGD_BANDWIDTH_TOTAL;
    *learn = gp_option_number(m, req, "learn_frequencies") != 0.0;
    /* -1 is auto; a name the spec let through but no sampler has is a bug. */
    return *sampler < 0 && strcmp(f, "auto") != 0 ? GP_EINVAL : GP_OK;
}

/* SVGD progress of the stein draw (ctx: the fit request). It comes before
 * the L-BFGS iterations, so it reports iteration 0 and no objective; the
 * callback's answer still cancels the draw. */
static int stein_progress(void *ctx, int iteration, double f)
{
    (void)iteration;
    (void)f;
    const gp_fit_request *req = ctx;
    return req->progress ? req->progress(req->progress_ctx, 0, 0, NAN) : 0;
}

static int draw_frequencies(const gp_spectral *sp, const gp_fit_request *req, ssgp_impl *im,
                            gp_freq_sampler sampler, const gp_stein_options *stein,
                            gp_error *err)
{
    im->sampler = sampler;
    int rc = gp_frequencies_draw(sp, sampler, im->R, im->d, req->seed, stein, stein_progress,
                             (void *)req, im->omega, err);
    if (rc == GP_ECANCELLED)
        gp_error_set(err, GP_ECANCELLED, NULL, "fit cancelled");
    return rc;
}

/* The factor and alpha at the fitted values (the last problem_apply), on
 * the fit's own workspace: the cached prediction state. */
static int cache_factor(gp_model *model, fit_problem *p, ssgp_impl *im, gp_error *err)
{
    double lml;
    int rc = problem_lml(p, &lml, NULL, err);
    if (rc)
        return rc;
    size_t m = im->m;
    const gp_rff_work *work = p->stream ? gp_rff_rows_work(p->stream) : p->work;
    const double *L = gp_rff_work_factor(work);
    for (size_t j = 0; j < m; j++) {
        memset(im->L + j * m, 0, j * sizeof *im->L);
        memcpy(im->L + j * m + j, L + j * m + j, (m - j) * sizeof *im->L);
    }
    memcpy(im->alpha, gp_rff_work_alpha(work), m * sizeof *im->alpha);
    model->diag.jitter = gp_rff_work_jitter(work);
    model->diag.objective = lml - (double)model->n_train * log(model->y_scale);
    return GP_OK;
}

/* Fit the hyperparameters (and omega when learned) on im's frequencies;
 * model->kernel and noise take the result and im the factor it gives. */
static int fit_once(gp_model *model, const gp_fit_request *req, const ssgp_data *D,
                    ssgp_impl *im, int learn, gp_error *err)
{
    fit_problem p;
    int rc = problem_init(&p, model, req, D, im, learn, err);
    if (rc == GP_OK)
        rc = optimise(&p, model->method, req, &model->diag, err);
    if (rc == GP_OK) {
        model->kernel->log_variance = p.k->log_variance;
        memcpy(model->kernel->log_lengthscale, p.k->log_lengthscale,
               p.n_ls * sizeof *p.k->log_lengthscale);
        model->noise_variance = p.noise; /* a fixed noise comes back unrounded */
        ssgp_impl_set_kernel(im, model->kernel);
        rc = cache_factor(model, &p, im, err);
    }
    problem_free(&p);
    return rc;
}

/* spread of the working inputs at the current lengthscales */
static double current_spread(const gp_model *model, const ssgp_impl *im, const ssgp_data *D)
{
    double *inv = malloc(im->d * sizeof *inv);
    if (inv == NULL)
        return NAN;
    for (size_t j = 0; j < im->d; j++)
        inv[j] = exp(-model->kernel->log_lengthscale[model->kernel->n_lengthscale == 1 ? 0 : j]);
    double s = D->col_var ? gp_features_spread_var(D->col_var, im->d, inv)
                          : gp_features_spread(D->Xw, model->n_train, im->d, inv);
    free(inv);
    return s;
}

/* Draw, fit, and for auto with fixed frequencies check the choice at the
 * learned lengthscales: when they put the data in another sampler's regime,
 * redraw with that sampler and refit once from the learned values. */
static int fit_model(gp_model *model, const gp_fit_request *req, const ssgp_data *D,
                     ssgp_impl *im, gp_error *err)
{
    size_t R;
    int sampler, learn;
    gp_stein_options stein;
    if (read_options(model->method, req, &R, &sampler, &stein, &learn))
        return gp_error_set(err, GP_EINVAL, "options.frequencies", "unknown sampler");
    gp_spectral sp;
    int rc = gp_kernel_spectral(model->kernel->type, &sp, err);
    if (rc)
        return rc;
    int is_auto = sampler < 0;
    double spread = current_spread(model, im, D);
    gp_freq_sampler chosen = is_auto ? gp_freq_sampler_auto(&sp, spread, im->d)
                                     : (gp_freq_sampler)sampler;
    rc = draw_frequencies(&sp, req, im, chosen, &stein, err);
    if (rc == GP_OK)
        rc = fit_once(model, req, D, im, learn, err);
    int redrawn = 0;
    if (rc == GP_OK && is_auto && !learn) {
        double s2 = current_spread(model, im, D);
        gp_freq_sampler again = gp_freq_sampler_auto(&sp, s2, im->d);
        spread = s2;
        if (again != chosen) {
            redrawn = 1;
            chosen = again;
            rc = draw_frequencies(&sp, req, im, chosen, &stein, err);
            if (rc == GP_OK)
                rc = fit_once(model, req, D, im, learn, err);
            if (rc == GP_OK)
                spread = current_spread(model, im, D);
        }
    }
    if (rc)
        return rc;
    gp_model_info_string(model, "frequencies", gp_freq_sampler_name(chosen));
    gp_model_info_number(model, "features", (double)R);
    gp_model_info_number(model, "spread", spread);
    gp_model_info_string(model, "learn_frequencies", learn ? "true" : "false");
    if (is_auto)
        gp_model_info_string(model, "auto_redrawn", redrawn ? "true" : "false");
    return GP_OK;
}

/* The fit's memory, checked before anything is allocated: Phi (N x 2R), the
 * scaled inputs, A and its inverse (2R x 2R each) and the cached factor; over
 * rows read in chunks the streamed evaluation's O(chunk R + R^2)
 * (core/features/rff_rows.h) and the read buffer, whatever N. It gets the
 * budget an exact fit of max_train_points points has (its N x N matrix:
 * 3.2 GB by default), so no request can make the daemon allocate more than
 * the operator allowed for exact. */
static int size_guard(const gp_method *me, const gp_fit_request *req, gp_error *err)
{
    double cap = (double)gp_fit_point_cap(req);
    double R = gp_option_number(me, req, "features"), m = 2.0 * R;
    const gp_rows *rows = req->rows;
    double need = rows ? gp_rff_rows_doubles((size_t)R, rows->chunk, rows->d) +
                             (double)rows->chunk * ((double)rows->d + 1.0)
                       : (double)req->n * (m + 2.0 * (double)req->d);
    need += 3.0 * m * m;
    if (need > cap * cap)
        return gp_error_set(err, GP_ETOOBIG, "options.features",
                            "ssgp with %.0f features on %zu points needs %.1f GB of workspace, "
                            "above the budget of an exact fit of max_train_points = %.0f points "
                            "(%.1f GB): use fewer features, or raise --max-train-points",
                            R, req->n, need * 8e-9, cap, cap * cap * 8e-9);
    return GP_OK;
}

/* A mean's basis of the request's points (zero mean: none). */
static int mean_basis(const gp_model *model, const gp_fit_request *req, ssgp_data *D,
                      gp_error *err)
{
    if (model->mean_type == GP_MEAN_ZERO)
        return GP_OK;
    double *P = NULL;
    int rc = gp_model_points(model, req->X, req->n, &P, err);
    if (rc == GP_OK && (D->H = gp_model_mean_basis(model, P, req->n, err)) == NULL)
        rc = GP_ENOMEM;
    free(P);
    return rc;
}

/* The fit of rows held in memory (req->X, req->y). */
static int fit_held(gp_model *model, const gp_fit_request *req, ssgp_impl *im, gp_error *err)
{
    size_t nd = 0;
    double *Xw = NULL, *yw = NULL;
    int rc = gp_checked_size(req->n, im->d, &nd, err);
    if (rc == GP_OK && (!(Xw = gp_alloc_doubles(nd, err)) || !(yw = gp_alloc_doubles(req->n, err))))
        rc = GP_ENOMEM;
    if (rc == GP_OK) {
        gp_model_leaf_inputs(model, im->dims, im->d, NULL, req->X, req->n, 0, req->n, Xw);
        gp_model_working_targets(model, req->y, req->n, yw);
        double *rw = gp_model_working_noise_alloc(model, req->noise_per_point, req->n, &rc, err);
        ssgp_data D = {Xw, yw, rw, NULL, NULL, 0.0, NULL};
        if (rc == GP_OK)
            rc = mean_basis(model, req, &D, err);
        if (rc == GP_OK)
            rc = fit_model(model, req, &D, im, err);
        /* with a mean the weights model the residual y - H beta */
        if (rc == GP_OK && D.H)
            cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)req->n,
                        (blasint)gp_mean_n_coef(model->mean_type, model->input_dim), -1.0, D.H,
                        (blasint)req->n, model->mean_coef, 1, 1.0, yw, 1);
        if (rc == GP_OK)
            rc = ssgp_cache_targets(model, im, req->X, yw, rw, req->n, err);
        free(rw);
        free((double *)D.H);
    }
    free(Xw);
    free(yw);
    return rc;
}

/* The fit of rows read in chunks (req->rows; core/methods/ssgp/rows.h):
 * every decision between iterations through the sync's request, so that
 * every process of a sharded fit takes it alike. */
static int fit_streamed(gp_model *model, const gp_fit_request *req, ssgp_impl *im,
                        gp_error *err)
{
    gp_rows_sync sync;
    gp_fit_request sreq;
    gp_rff_rows stream = {req->rows, model, im->dims, im->d, &sync, NULL};
    double *var = gp_alloc_doubles(im->d, err);
    if (var == NULL)
        return GP_ENOMEM;
    int rc = gp_rows_sync_init(&sync, req->rows, req, err);
    ssgp_data D = {.stream = &stream, .col_var = var};
    if (rc == GP_OK) {
        gp_rows_sync_request(&sync, req, &sreq);
        rc = gp_rows_target_power(&sync, model->y_mean, model->y_scale, &D.power, err);
        if (rc == GP_OK)
            rc = ssgp_rows_column_var(&sync, model, im->dims, im->d, var, err);
        if (rc == GP_OK)
            rc = fit_model(model, &sreq, &D, im, err);
        rc = gp_rows_sync_result(&sync, rc, err);
        if (rc == GP_OK) {
            ssgp_rows_cache_targets(im, &stream);
            gp_model_info_number(model, "streamed_rows", (double)req->rows->n_total);
            gp_model_info_number(model, "chunk_rows", (double)req->rows->chunk);
            gp_model_info_number(model, "ranks", (double)sync.ranks);
        }
        gp_rff_rows_release(&stream);
    }
    gp_rows_sync_free(&sync);
    free(var);
    return rc;
}

int ssgp_fit(const gp_method *m, const gp_fit_request *req, gp_model **out, gp_error *err)
{
    gp_model *model;
    /* The rows are weighted by s / (s + r_i): a homoscedastic part of 0 has none. */
    if (req->noise_per_point && req->noise_given && !(req->noise_variance > 0.0))
        return gp_error_set(err, GP_EUNSUPPORTED, "noise.variance",
                            "ssgp needs noise.variance > 0 beside noise.per_point (it weights "
                            "each row by s / (s + r_i)); fix it at a small value such as 1e-8 "
                            "or let it be learned");
    int rc = req->rows ? ssgp_rows_refused(req, err) : GP_OK;
    if (rc == GP_OK)
        rc = size_guard(m, req, err);
    if (rc)
        return rc;
    rc = gp_model_new(m, req, &model, err);
    if (rc)
        return rc;
    size_t R = (size_t)gp_option_number(m, req, "features");
    ssgp_impl *im = ssgp_impl_alloc(model->kernel, R, err);
    model->impl = im;
    rc = im == NULL ? GP_ENOMEM : req->rows ? fit_streamed(model, req, im, err)
                                            : fit_held(model, req, im, err);
    if (rc) {
        gp_model_free(model);
        return rc;
    }
    *out = model;
    return GP_OK;
}
