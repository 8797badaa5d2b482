/* Sparse-spectrum GP regression: see core/methods/ssgp.h.
 *
 * Working units as in exact: standardised inputs and targets unless
 * "standardize": false; predictions are mapped back at the end. The model is
 * held in the 2R-dimensional weight space: the cached factor L of
 * A = Phi^T Phi + s I and alpha = A^{-1} Phi^T y give the posterior of the
 * weights, N(alpha, s A^{-1}), from which every prediction and sample follows
 * without touching the training data again. */
#include "core/methods/ssgp.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/features/auto.h"
#include "core/features/rff.h"
#include "core/features/sample.h"
#include "core/linalg/linalg.h"
#include "core/model/method.h"
#include "core/optim/driver.h"
#include "core/optim/optim.h"

/* Stream indices of the fit's seed (gp_rng_derive): frequencies use the seed
 * itself through gp_frequencies_draw. */
#define SAMPLE_NOISE_STREAM 1
#define LOG_2PI 1.8378770664093454836

static const gp_kernel_type ssgp_kernels[] = {GP_KERNEL_RBF, GP_KERNEL_MATERN12,
                                              GP_KERNEL_MATERN32, GP_KERNEL_MATERN52};

static const gp_option_spec ssgp_options[] = {
    {"features", GP_OPTION_INT, 100, NULL, 1, 20000, NULL,
     "R, the number of random frequencies; each gives a cos and a sin feature"},
    {"frequencies", GP_OPTION_ENUM, 0, "auto", 0, 0, "auto|mc|qmc|orf|stein",
     "how the frequencies are drawn from the kernel's spectral density: Monte Carlo, "
     "scrambled Halton (qmc), orthogonal random features, Stein random features (SVGD "
     "towards the density), or auto: chosen from the spread of the inputs in lengthscale "
     "units (reported as method_info.frequencies)"},
    {"stein_iterations", GP_OPTION_INT, 2000, NULL, 0, 1000000, NULL,
     "SVGD iterations of the stein sampler"},
    {"stein_step", GP_OPTION_NUMBER, 0.1, NULL, 1e-6, 10, NULL,
     "Adam learning rate of the stein sampler"},
    {"bandwidth", GP_OPTION_ENUM, 0, "total", 0, 0, "total|per_dim",
     "SVGD median bandwidth: one over total squared distances (total), or per dimension "
     "(the authors' code; collapses the particles above a few dimensions)"},
    {"learn_frequencies", GP_OPTION_BOOL, 0, NULL, 0, 1, NULL,
     "false: the frequencies are a fixed approximation of the kernel; true: they are "
     "hyperparameters learned with the others (the original SSGP)"},
    {"max_iterations", GP_OPTION_INT, 200, NULL, 1, 100000, NULL, "L-BFGS iterations"},
    {"tolerance", GP_OPTION_NUMBER, 1e-10, NULL, 1e-16, 1, NULL,
     "stop when the relative LML change of an iteration falls below this"},
};

typedef struct ssgp_impl {
    size_t R, d, m;       /* d = dimensions the kernel sees; m = 2R */
    size_t *dims;         /* d input columns (owned) */
    double *omega;        /* R x d */
    double *inv_ls;       /* d */
    double amplitude2;    /* kernel variance */
    double *L;            /* m x m lower Cholesky factor of A (upper zeroed) */
    double *alpha;        /* m */
    double *phi_y;        /* m: Phi^T y, which observe adds the new rows' terms to */
    double y_sq;          /* y^T y (working units): the LML after observe; NAN if unknown */
    gp_freq_sampler sampler;
} ssgp_impl;

static void impl_free(void *p)
{
    ssgp_impl *im = p;
    if (im == NULL)
        return;
    free(im->dims);
    free(im->omega);
    free(im->inv_ls);
    free(im->L);
    free(im->alpha);
    free(im->phi_y);
    free(im);
}

/* dims, inv_ls and amplitude2 from the kernel leaf; buffers for R frequencies. */
static ssgp_impl *impl_alloc(const gp_kernel *k, size_t R, gp_error *err)
{
    ssgp_impl *im = calloc(1, sizeof *im);
    if (im == NULL) {
        gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    im->R = R;
    im->m = 2 * R;
    im->d = k->n_active;
    size_t rd = 0, mm = 0;
    if (gp_checked_size(R, im->d, &rd, err) || gp_checked_size(im->m, im->m, &mm, err) ||
        !(im->dims = malloc(im->d * sizeof *im->dims)) ||
        !(im->omega = gp_alloc_doubles(rd, err)) ||
        !(im->inv_ls = gp_alloc_doubles(im->d, err)) || !(im->L = gp_alloc_doubles(mm, err)) ||
        !(im->alpha = gp_alloc_doubles(im->m, err)) ||
        !(im->phi_y = gp_alloc_doubles(im->m, err))) {
        if (err && err->code == GP_OK)
            gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        impl_free(im);
        return NULL;
    }
    for (size_t k2 = 0; k2 < im->d; k2++)
        im->dims[k2] = k->active_dims ? k->active_dims[k2] : k2;
    return im;
}

/* Lengthscales and variance of the (fitted) kernel into the impl. */
static void impl_set_kernel(ssgp_impl *im, const gp_kernel *k)
{
    for (size_t j = 0; j < im->d; j++)
        im->inv_ls[j] = exp(-k->log_lengthscale[k->n_lengthscale == 1 ? 0 : j]);
    im->amplitude2 = exp(k->log_variance);
}

/* ---- the fit problem: L-BFGS over free kernel parameters, noise, omega ---- */

typedef struct fit_problem {
    gp_rff_problem rp;
    gp_rff_work *work;
    gp_kernel *k;           /* working copy */
    double *log_ls;         /* d (a shared lengthscale repeated) */
    double *omega;          /* R x d: the frequencies (updated when learned) */
    double *g_omega, *g_ls; /* gradient blocks */
    int free_amp, free_ls, learn_omega;
    size_t n_ls;            /* lengthscale parameters of the kernel (1 or d) */
    gp_noise_param np;
    double noise;           /* the noise variance of the last problem_apply */
    const gp_fit_request *req;
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

/* Negative LML and its gradient; +inf when A cannot be factored. */
static double problem_objective(void *ctx, const double *x, double *g)
{
    fit_problem *p = ctx;
    problem_apply(p, x);
    double lml, g_amp = 0, g_noise = 0;
    gp_rff_grad grad = {p->learn_omega ? p->g_omega : NULL, p->free_ls ? p->g_ls : NULL,
                        &g_amp, &g_noise};
    if (gp_rff_lml(&p->rp, p->work, &lml, &grad, NULL))
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

static int problem_init(fit_problem *p, const gp_model *model, const gp_fit_request *req,
                        const double *Xw, const double *yw, ssgp_impl *im, int learn_omega,
                        gp_error *err)
{
    memset(p, 0, sizeof *p);
    size_t n = req->n, d = im->d, R = im->R;
    p->req = req;
    p->lml_offset = -(double)n * log(model->y_scale);
    p->rp = (gp_rff_problem){.X = Xw, .y = yw, .n = n, .d = d, .R = R, .omega = im->omega,
                             .cancel = &req->cancel};
    p->omega = im->omega;
    p->learn_omega = learn_omega;
    int rc = gp_kernel_copy(&p->k, model->kernel, err);
    if (rc == GP_OK)
        rc = gp_rff_work_new(n, d, R, &p->work, err);
    if (rc)
        return rc;
    p->n_ls = p->k->n_lengthscale;
    p->free_amp = !(p->k->fixed & GP_FIX_VARIANCE);
    p->free_ls = !(p->k->fixed & GP_FIX_LENGTHSCALE);
    if (!(p->log_ls = gp_alloc_doubles(d, err)) || !(p->g_ls = gp_alloc_doubles(d, err)) ||
        (learn_omega && !(p->g_omega = gp_alloc_doubles(R * d, err))))
        return GP_ENOMEM;
    p->rp.log_ls = p->log_ls;
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
        if (gp_rff_lml(&p->rp, p->work, &lml, NULL, NULL) == GP_OK && -lml < best_f) {
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
    if (p->free_ls)
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
        rc = gp_driver_minimize(problem_objective, p, x, dim, &opt, &res, err);
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

static int cache_targets(const gp_model *model, ssgp_impl *im, const double *X,
                         const double *yw, size_t n, gp_error *err);

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
    int rc = gp_rff_lml(&p->rp, p->work, &lml, NULL, err);
    if (rc)
        return rc;
    size_t m = im->m;
    const double *L = gp_rff_work_factor(p->work);
    for (size_t j = 0; j < m; j++) {
        memset(im->L + j * m, 0, j * sizeof *im->L);
        memcpy(im->L + j * m + j, L + j * m + j, (m - j) * sizeof *im->L);
    }
    memcpy(im->alpha, gp_rff_work_alpha(p->work), m * sizeof *im->alpha);
    model->diag.jitter = gp_rff_work_jitter(p->work);
    model->diag.objective = lml - (double)model->n_train * log(model->y_scale);
    return GP_OK;
}

/* Fit the hyperparameters (and omega when learned) on im's frequencies;
 * model->kernel and noise take the result and im the factor it gives. */
static int fit_once(gp_model *model, const gp_fit_request *req, const double *Xw,
                    const double *yw, ssgp_impl *im, int learn, gp_error *err)
{
    fit_problem p;
    int rc = problem_init(&p, model, req, Xw, yw, im, learn, err);
    if (rc == GP_OK)
        rc = optimise(&p, model->method, req, &model->diag, err);
    if (rc == GP_OK) {
        model->kernel->log_variance = p.k->log_variance;
        memcpy(model->kernel->log_lengthscale, p.k->log_lengthscale,
               p.n_ls * sizeof *p.k->log_lengthscale);
        model->noise_variance = p.noise; /* a fixed noise comes back unrounded */
        impl_set_kernel(im, model->kernel);
        rc = cache_factor(model, &p, im, err);
    }
    problem_free(&p);
    return rc;
}

/* spread of the working inputs at the current lengthscales */
static double current_spread(const gp_model *model, const ssgp_impl *im, const double *Xw)
{
    double *inv = malloc(im->d * sizeof *inv);
    if (inv == NULL)
        return NAN;
    for (size_t j = 0; j < im->d; j++)
        inv[j] = exp(-model->kernel->log_lengthscale[model->kernel->n_lengthscale == 1 ? 0 : j]);
    double s = gp_features_spread(Xw, model->n_train, im->d, inv);
    free(inv);
    return s;
}

/* Draw, fit, and for auto with fixed frequencies check the choice at the
 * learned lengthscales: when they put the data in another sampler's regime,
 * redraw with that sampler and refit once from the learned values. */
static int fit_model(gp_model *model, const gp_fit_request *req, const double *Xw,
                     const double *yw, ssgp_impl *im, gp_error *err)
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
    double spread = current_spread(model, im, Xw);
    gp_freq_sampler chosen = is_auto ? gp_freq_sampler_auto(&sp, spread, im->d)
                                     : (gp_freq_sampler)sampler;
    rc = draw_frequencies(&sp, req, im, chosen, &stein, err);
    if (rc == GP_OK)
        rc = fit_once(model, req, Xw, yw, im, learn, err);
    int redrawn = 0;
    if (rc == GP_OK && is_auto && !learn) {
        double s2 = current_spread(model, im, Xw);
        gp_freq_sampler again = gp_freq_sampler_auto(&sp, s2, im->d);
        spread = s2;
        if (again != chosen) {
            redrawn = 1;
            chosen = again;
            rc = draw_frequencies(&sp, req, im, chosen, &stein, err);
            if (rc == GP_OK)
                rc = fit_once(model, req, Xw, yw, im, learn, err);
            if (rc == GP_OK)
                spread = current_spread(model, im, Xw);
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
 * scaled inputs, A and its inverse (2R x 2R each) and the cached factor. It
 * gets the budget an exact fit of max_train_points points has (its N x N
 * matrix: 3.2 GB by default), so no request can make the daemon allocate
 * more than the operator allowed for exact. */
static int size_guard(const gp_fit_request *req, gp_error *err)
{
    double cap = (double)gp_fit_point_cap(req);
    double R = gp_option_number(&gp_method_ssgp, req, "features"), m = 2.0 * R;
    double need = (double)req->n * (m + 2.0 * (double)req->d) + 3.0 * m * m;
    if (need > cap * cap)
        return gp_error_set(err, GP_ETOOBIG, "options.features",
                            "ssgp with %.0f features on %zu points needs %.1f GB of workspace, "
                            "above the budget of an exact fit of max_train_points = %.0f points "
                            "(%.1f GB): use fewer features, or raise --max-train-points",
                            R, req->n, need * 8e-9, cap, cap * cap * 8e-9);
    return GP_OK;
}

static int ssgp_fit(const gp_fit_request *req, gp_model **out, gp_error *err)
{
    gp_model *model;
    int rc = size_guard(req, err);
    if (rc)
        return rc;
    rc = gp_model_new(&gp_method_ssgp, req, &model, err);
    if (rc)
        return rc;
    size_t R = (size_t)gp_option_number(&gp_method_ssgp, req, "features");
    ssgp_impl *im = impl_alloc(model->kernel, R, err);
    model->impl = im;
    size_t nd = 0;
    double *Xw = NULL, *yw = NULL;
    rc = im ? gp_checked_size(req->n, im->d, &nd, err) : GP_ENOMEM;
    if (rc == GP_OK && (!(Xw = gp_alloc_doubles(nd, err)) || !(yw = gp_alloc_doubles(req->n, err))))
        rc = GP_ENOMEM;
    if (rc == GP_OK) {
        gp_model_leaf_inputs(model, im->dims, im->d, NULL, req->X, req->n, 0, req->n, Xw);
        gp_model_working_targets(model, req->y, req->n, yw);
        rc = fit_model(model, req, Xw, yw, im, err);
        if (rc == GP_OK)
            rc = cache_targets(model, im, req->X, yw, req->n, err);
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

/* ---- predict ---- */

/* Features of b test points (original units, rows start..start+b of X with
 * leading dimension ldx = the request's m) into Phi (b x 2R); Xw (b x d)
 * scratch receives the standardised points divided by the lengthscales. */
static void test_features(const gp_model *model, const ssgp_impl *im, const double *X,
                          size_t ldx, size_t start, size_t b, double *Xw, double *Phi)
{
    gp_model_leaf_inputs(model, im->dims, im->d, im->inv_ls, X, ldx, start, b, Xw);
    gp_rff_features(Xw, b, im->d, NULL, im->omega, im->R, im->amplitude2, Phi, b);
}

/* Mean (working units) and V = Phi L^{-T} (in place): latent variance
 * s ||V_i||^2, covariance s V V^T. */
static void mean_and_whiten(const ssgp_impl *im, double *Phi, size_t b, double *mean)
{
    cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)b, (blasint)im->m, 1.0, Phi, (blasint)b,
                im->alpha, 1, 0.0, mean, 1);
    cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, (blasint)b,
                (blasint)im->m, 1.0, im->L, (blasint)im->m, Phi, (blasint)b);
}

static double finish_variance(const gp_model *model, double v, int include_noise,
                              size_t *clamped)
{
    if (include_noise)
        v += model->noise_variance;
    if (v < 0.0) {
        v = 0.0;
        (*clamped)++;
    }
    return v * model->y_scale * model->y_scale;
}

static int predict_full(const gp_model *model, const ssgp_impl *im,
                        const gp_predict_request *req, gp_prediction *out, gp_error *err)
{
    size_t m = req->m, nm = 0, nd = 0;
    int rc = gp_checked_size(m, im->m, &nm, err);
    if (rc == GP_OK)
        rc = gp_checked_size(m, im->d, &nd, err);
    if (rc)
        return rc;
    double *Phi = gp_alloc_doubles(nm, err), *Xw = gp_alloc_doubles(nd, err);
    if (Phi == NULL || Xw == NULL) {
        free(Phi);
        free(Xw);
        return GP_ENOMEM;
    }
    test_features(model, im, req->X, m, 0, m, Xw, Phi);
    mean_and_whiten(im, Phi, m, out->mean);
    double s = model->noise_variance, ys2 = model->y_scale * model->y_scale;
    double *C = out->covariance;
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)m, (blasint)im->m, s * ys2, Phi,
                (blasint)m, 0.0, C, (blasint)m);
    gp_symmetrize_from_lower(C, m, m);
    for (size_t j = 0; j < m; j++) {
        double v = finish_variance(model, C[j * m + j] / ys2, req->include_noise, &out->clamped);
        C[j * m + j] = v;
        out->variance[j] = v;
    }
    free(Phi);
    free(Xw);
    return GP_OK;
}

static int predict_blocks(const gp_model *model, const ssgp_impl *im,
                          const gp_predict_request *req, gp_prediction *out, gp_error *err)
{
    size_t block = gp_predict_block_rows(im->m, req->m);
    double *Phi = gp_alloc_doubles(block * im->m, err), *Xw = gp_alloc_doubles(block * im->d, err);
    if (Phi == NULL || Xw == NULL) {
        free(Phi);
        free(Xw);
        return GP_ENOMEM;
    }
    double s = model->noise_variance;
    for (size_t start = 0; start < req->m; start += block) {
        size_t b = req->m - start < block ? req->m - start : block;
        test_features(model, im, req->X, req->m, start, b, Xw, Phi);
        mean_and_whiten(im, Phi, b, out->mean + start);
        for (size_t i = 0; i < b; i++) {
            double v = cblas_ddot((blasint)im->m, Phi + i, (blasint)b, Phi + i, (blasint)b);
            out->variance[start + i] =
                finish_variance(model, s * v, req->include_noise, &out->clamped);
        }
    }
    free(Phi);
    free(Xw);
    return GP_OK;
}

static int ssgp_predict(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                        gp_error *err)
{
    const ssgp_impl *im = model->impl;
    if (req->m == 0)
        return GP_OK;
    int rc = req->full_covariance ? predict_full(model, im, req, out, err)
                                  : predict_blocks(model, im, req, out, err);
    if (rc == GP_OK)
        for (size_t j = 0; j < req->m; j++)
            out->mean[j] = out->mean[j] * model->y_scale + model->y_mean;
    return rc;
}

/* ---- sample ---- */

/* Weight draws W (2R x S) = alpha + sqrt(s) L^{-T} E: exact draws of the
 * weight posterior N(alpha, s A^{-1}). */
static void draw_weights(const gp_model *model, const ssgp_impl *im, uint64_t seed, size_t S,
                         double *W)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    gp_rng_normal_fill(&rng, W, im->m * S);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, (blasint)im->m,
                (blasint)S, sqrt(model->noise_variance), im->L, (blasint)im->m, W,
                (blasint)im->m);
    for (size_t s = 0; s < S; s++)
        cblas_daxpy((blasint)im->m, 1.0, im->alpha, 1, W + s * im->m, 1);
}

static int ssgp_sample(const gp_model *model, const gp_sample_request *req, double *samples,
                       gp_error *err)
{
    const ssgp_impl *im = model->impl;
    size_t m = req->m, S = req->n_samples, ws = 0;
    if (m == 0 || S == 0)
        return GP_OK;
    int rc = gp_checked_size(im->m, S, &ws, err);
    if (rc)
        return rc;
    size_t block = gp_predict_block_rows(im->m, m);
    double *W = gp_alloc_doubles(ws, err), *Phi = gp_alloc_doubles(block * im->m, err),
           *Xw = gp_alloc_doubles(block * im->d, err);
    if (W == NULL || Phi == NULL || Xw == NULL) {
        free(W);
        free(Phi);
        free(Xw);
        return GP_ENOMEM;
    }
    draw_weights(model, im, req->seed, S, W);
    for (size_t start = 0; start < m; start += block) {
        size_t b = m - start < block ? m - start : block;
        test_features(model, im, req->X, m, start, b, Xw, Phi);
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)b, (blasint)S,
                    (blasint)im->m, 1.0, Phi, (blasint)b, W, (blasint)im->m, 0.0,
                    samples + start, (blasint)m);
    }
    gp_rng noise;
    gp_rng_derive(&noise, req->seed, SAMPLE_NOISE_STREAM);
    double sd = sqrt(model->noise_variance);
    for (size_t i = 0; i < m * S; i++) {
        double f = samples[i] + (req->include_noise ? sd * gp_rng_normal(&noise) : 0.0);
        samples[i] = f * model->y_scale + model->y_mean;
    }
    free(W);
    free(Phi);
    free(Xw);
    return GP_OK;
}

/* ---- observe ----
 *
 * The weight posterior depends on the rows only through A = Phi^T Phi + s I
 * and Phi^T y: new rows add their features' outer products to A (through
 * its factor L) and their terms to Phi^T y, with the frequencies, the
 * hyperparameters, the standardisation and the jitter of the fit. */

/* What a path does with the features (b x m) of one block of rows. */
typedef void (*rows_fn)(void *ctx, const double *Phi, size_t b);

/* phi_y += Phi^T yw over n rows of X (original units), taken in blocks of
 * `block` rows; returns yw^T yw. Phi (block x m) and Xw (block x d) are
 * scratch; `use` (when not NULL) gets each block's features. */
static double add_rows(const gp_model *model, const ssgp_impl *im, const double *X,
                       const double *yw, size_t n, size_t block, double *Phi, double *Xw,
                       double *phi_y, rows_fn use, void *ctx)
{
    double ysq = 0.0;
    for (size_t start = 0; start < n; start += block) {
        size_t b = n - start < block ? n - start : block;
        test_features(model, im, X, n, start, b, Xw, Phi);
        cblas_dgemv(CblasColMajor, CblasTrans, (blasint)b, (blasint)im->m, 1.0, Phi, (blasint)b,
                    yw + start, 1, 1.0, phi_y, 1);
        ysq += cblas_ddot((blasint)b, yw + start, 1, yw + start, 1);
        if (use)
            use(ctx, Phi, b);
    }
    return ysq;
}

/* Phi^T y and y^T y of the fit's rows at the fitted hyperparameters (X
 * original units, yw working targets), computed again from the rows rather
 * than as A alpha, which would carry alpha's error times cond(A). */
static int cache_targets(const gp_model *model, ssgp_impl *im, const double *X,
                         const double *yw, size_t n, gp_error *err)
{
    size_t block = gp_predict_block_rows(im->m, n);
    double *Phi = gp_alloc_doubles(block * im->m, err), *Xw = gp_alloc_doubles(block * im->d, err);
    int rc = Phi && Xw ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK) {
        memset(im->phi_y, 0, im->m * sizeof *im->phi_y);
        im->y_sq = add_rows(model, im, X, yw, n, block, Phi, Xw, im->phi_y, NULL, NULL);
    }
    free(Phi);
    free(Xw);
    return rc;
}

/* Batches of at least this many rows re-factorise A = L L^T + Phi_k^T Phi_k
 * (two dsyrk and one Cholesky factorisation, O(m^3) at level 3) instead of
 * applying k Givens rank-one updates to L (O(k m^2) at level 1). Measured on
 * one thread (the reference machine's OpenBLAS): the two cost the same at
 * k = 48 for m = 200 (0.37 ms) and at k = 200 or so for m = 800 (19 ms),
 * i.e. at k = m / 4. */
static size_t refactor_rows(size_t m)
{
    return m / 4 > 8 ? m / 4 : 8;
}

/* The Givens path: each block's feature rows, as columns of T (m x b), go
 * into L one rank-one update at a time. */
typedef struct givens_ctx {
    double *L, *T;
    size_t m;
} givens_ctx;

static void givens_rows(void *ctx, const double *Phi, size_t b)
{
    givens_ctx *g = ctx;
    for (size_t j = 0; j < g->m; j++)
        for (size_t i = 0; i < b; i++)
            g->T[i * g->m + j] = Phi[j * b + i];
    gp_chol_update(g->L, g->m, g->m, g->T, b, g->m);
}

/* The re-factorisation path: A += Phi^T Phi (lower). */
typedef struct gram_ctx {
    double *A;
    size_t m;
} gram_ctx;

static void gram_rows(void *ctx, const double *Phi, size_t b)
{
    gram_ctx *g = ctx;
    cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)g->m, (blasint)b, 1.0, Phi,
                (blasint)b, 1.0, g->A, (blasint)g->m);
}

/* The LML of the model's rows from A's factor, alpha, Phi^T y and y^T y:
 * q = y^T y - b^T alpha - jitter ||alpha||^2 equals the fit's
 * ||y - Phi alpha||^2 + s ||alpha||^2 (gp_rff_lml). Left as it was when y^T y
 * is not known. */
static void update_objective(gp_model *model, const ssgp_impl *im)
{
    if (!isfinite(im->y_sq))
        return;
    blasint m = (blasint)im->m;
    double s = model->noise_variance, n = (double)model->n_train;
    double q = im->y_sq - cblas_ddot(m, im->phi_y, 1, im->alpha, 1) -
               model->diag.jitter * cblas_ddot(m, im->alpha, 1, im->alpha, 1);
    double lml = -q / (2.0 * s) - 0.5 * gp_chol_logdet(im->L, im->m, im->m) +
                 (double)im->R * log(s) - 0.5 * n * (LOG_2PI + log(s));
    model->diag.objective = lml - n * log(model->y_scale);
}

typedef struct observe_work {
    double *Phi, *Xw, *yw, *b, *alpha;
    double *A; /* m x m, the re-factorisation path */
    double *T; /* m x block, the Givens path */
} observe_work;

static void observe_work_free(observe_work *w)
{
    free(w->Phi);
    free(w->Xw);
    free(w->yw);
    free(w->b);
    free(w->alpha);
    free(w->A);
    free(w->T);
}

/* A = L L^T + Phi_k^T Phi_k factorised into w->A under the jitter policy (a
 * jitter it adds is added to the model's; A's eigenvalues are at least
 * s + jitter, so none is expected). */
static int refactor(gp_model *model, const ssgp_impl *im, const double *X, size_t k,
                    size_t block, observe_work *w, double *ysq, gp_error *err)
{
    size_t m = im->m;
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)m, (blasint)m, 1.0, im->L,
                (blasint)m, 0.0, w->A, (blasint)m);
    gram_ctx g = {w->A, m};
    *ysq = add_rows(model, im, X, w->yw, k, block, w->Phi, w->Xw, w->b, gram_rows, &g);
    gp_symmetrize_from_lower(w->A, m, m);
    gp_chol_info ci;
    int rc = gp_cholesky_jitter(w->A, m, m, &ci, err);
    if (rc)
        return rc;
    gp_zero_upper(w->A, m, m);
    model->diag.jitter += ci.jitter;
    return GP_OK;
}

static int ssgp_observe(gp_model *model, const double *X, const double *Y, size_t k,
                        gp_error *err)
{
    ssgp_impl *im = model->impl;
    size_t m = im->m, block = gp_predict_block_rows(m + im->d, k);
    int whole = k >= refactor_rows(m);
    /* Bounded working values keep the Givens path (in place, it cannot be
     * undone) finite: rotations preserve column norms, so L's entries grow
     * by at most the features' magnitude per row, and Phi^T y by at most
     * |Phi| GP_WORKING_LIMIT per row; both stay far below DBL_MAX. */
    int rc = gp_check_working_points(model, X, k, GP_WORKING_LIMIT, err);
    if (rc == GP_OK)
        rc = gp_check_working_targets(model, Y, k, GP_WORKING_LIMIT, err);
    if (rc)
        return rc;
    observe_work w;
    memset(&w, 0, sizeof w);
    if (whole)
        w.A = gp_alloc_doubles(m * m, err);
    else
        w.T = gp_alloc_doubles(block * m, err);
    if (!(whole ? w.A : w.T) || !(w.Phi = gp_alloc_doubles(block * m, err)) ||
        !(w.Xw = gp_alloc_doubles(block * im->d, err)) || !(w.yw = gp_alloc_doubles(k, err)) ||
        !(w.b = gp_alloc_doubles(m, err)) || !(w.alpha = gp_alloc_doubles(m, err))) {
        observe_work_free(&w);
        return GP_ENOMEM;
    }
    gp_model_working_targets(model, Y, k, w.yw);
    memcpy(w.b, im->phi_y, m * sizeof *w.b);
    double ysq = 0.0, jitter = model->diag.jitter;
    if (whole) {
        rc = refactor(model, im, X, k, block, &w, &ysq, err);
        if (rc == GP_OK && !(gp_all_finite(w.A, m * m, NULL) && gp_all_finite(w.b, m, NULL) &&
                             isfinite(ysq))) {
            model->diag.jitter = jitter;
            rc = gp_error_set(err, GP_EDATA, "y",
                              "the %zu observed rows would make the model's state non-finite "
                              "(float64 overflow); the model is unchanged",
                              k);
        }
    }
    else { /* cannot fail from here on: L is updated in place */
        givens_ctx g = {im->L, w.T, m};
        ysq = add_rows(model, im, X, w.yw, k, block, w.Phi, w.Xw, w.b, givens_rows, &g);
    }
    if (rc == GP_OK) {
        double *t;
        if (whole)
            t = im->L, im->L = w.A, w.A = t;
        memcpy(w.alpha, w.b, m * sizeof *w.alpha);
        gp_chol_solve(im->L, m, m, w.alpha, 1, m);
        t = im->phi_y, im->phi_y = w.b, w.b = t;
        t = im->alpha, im->alpha = w.alpha, w.alpha = t;
        im->y_sq += ysq;
        model->n_train += k;
        update_objective(model, im);
    }
    observe_work_free(&w);
    return rc;
}

/* ---- export / import ---- */

static int ssgp_export(const gp_model *model, gp_state *st, gp_error *err)
{
    const ssgp_impl *im = model->impl;
    size_t m = im->m;
    int rc = gp_state_put_cholesky(st, "chol_packed", im->L, m, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "omega", im->R, im->d, im->omega, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "alpha", m, 1, im->alpha, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "sampler", (double)im->sampler, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "phi_y", m, 1, im->phi_y, err);
    if (rc == GP_OK && isfinite(im->y_sq)) /* unknown for some states from before phi_y */
        rc = gp_state_put_scalar(st, "y_sq", im->y_sq, err);
    return rc;
}

/* Phi^T y and y^T y of a state written before they were stored: Phi^T y =
 * A alpha (to alpha's rounding times cond(A)), and y^T y from the stored
 * objective, whose q = y^T y - b^T alpha - jitter ||alpha||^2 it solves for
 * (update_objective's formula); NAN when the objective is not finite. */
static void targets_from_alpha(const gp_model *model, ssgp_impl *im)
{
    size_t m = im->m;
    memcpy(im->phi_y, im->alpha, m * sizeof *im->phi_y);
    cblas_dtrmv(CblasColMajor, CblasLower, CblasTrans, CblasNonUnit, (blasint)m, im->L,
                (blasint)m, im->phi_y, 1);
    cblas_dtrmv(CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)m, im->L,
                (blasint)m, im->phi_y, 1);
    double s = model->noise_variance, n = (double)model->n_train;
    double lml = model->diag.objective + n * log(model->y_scale);
    double q = -2.0 * s * (lml + 0.5 * gp_chol_logdet(im->L, m, m) - (double)im->R * log(s) +
                           0.5 * n * (LOG_2PI + log(s)));
    im->y_sq = q + cblas_ddot((blasint)m, im->phi_y, 1, im->alpha, 1) +
               model->diag.jitter * cblas_ddot((blasint)m, im->alpha, 1, im->alpha, 1);
    if (!isfinite(im->y_sq))
        im->y_sq = NAN;
}

static int import_targets(const gp_model *model, const gp_state *st, ssgp_impl *im,
                          gp_error *err)
{
    const double *b;
    if (gp_state_find(st, "phi_y") == NULL) {
        targets_from_alpha(model, im);
        return GP_OK;
    }
    int rc = gp_state_get(st, "phi_y", im->m, 1, &b, err);
    if (rc)
        return rc;
    memcpy(im->phi_y, b, im->m * sizeof *b);
    im->y_sq = NAN;
    if (gp_state_find(st, "y_sq"))
        rc = gp_state_get_scalar(st, "y_sq", &im->y_sq, err);
    return rc;
}

static int ssgp_import(gp_model *model, const gp_state *st, gp_error *err)
{
    const gp_named_array *om = gp_state_find(st, "omega");
    if (om == NULL || om->rows == 0 || om->cols != model->kernel->n_active)
        return gp_error_set(err, GP_EDATA, "omega", "missing or malformed frequencies");
    ssgp_impl *im = impl_alloc(model->kernel, om->rows, err);
    if (im == NULL)
        return GP_ENOMEM;
    const double *alpha;
    double sampler = 0;
    size_t m = im->m;
    int rc = gp_state_get_cholesky(st, "chol_packed", m, im->L, err);
    if (rc == GP_OK)
        rc = gp_state_get(st, "alpha", m, 1, &alpha, err);
    if (rc == GP_OK)
        rc = gp_state_get_scalar(st, "sampler", &sampler, err);
    if (rc == GP_OK && !(sampler >= 0 && sampler < GP_FREQ_SAMPLER_COUNT))
        rc = gp_error_set(err, GP_EDATA, "sampler", "unknown frequency sampler");
    if (rc == GP_OK) {
        memcpy(im->omega, om->data, im->R * im->d * sizeof *im->omega);
        memcpy(im->alpha, alpha, m * sizeof *alpha);
        im->sampler = (gp_freq_sampler)sampler;
        impl_set_kernel(im, model->kernel);
        rc = import_targets(model, st, im, err);
    }
    if (rc) {
        impl_free(im);
        return rc;
    }
    model->impl = im;
    return GP_OK;
}

static const gp_method_ops ssgp_ops = {
    .fit = ssgp_fit,
    .predict = ssgp_predict,
    .sample = ssgp_sample,
    .export_impl = ssgp_export,
    .import_impl = ssgp_import,
    .free_impl = impl_free,
    .observe = ssgp_observe,
};

static const gp_info_spec ssgp_info[] = {
    {"frequencies", GP_INFO_STRING,
     "the frequency sampler used (the one auto chose, when auto)"},
    {"features", GP_INFO_NUMBER,
     "R, the number of frequencies (2R features)"},
    {"spread", GP_INFO_NUMBER,
     "spread of the training inputs in lengthscale units, which auto decides on"},
    {"learn_frequencies", GP_INFO_STRING,
     "\"true\" when the frequencies were optimised as hyperparameters"},
    {"auto_redrawn", GP_INFO_STRING,
     "auto only: \"true\" when the choice changed at the learned lengthscales and the "
     "frequencies were redrawn and refitted"},
};

static const gp_option_setting ssgp_quick[] = {
    {"max_iterations", 8}, {"features", 16}, {"stein_iterations", 40}};

const gp_method gp_method_ssgp = {
    .name = "ssgp",
    .summary = "Sparse-spectrum GP: regression on R random Fourier frequencies of the kernel's "
               "spectral density (Monte Carlo, QMC, orthogonal or Stein random features), "
               "optionally learned; O(N R^2) fit, O(R^2) per predicted point",
    .objective_name = "log_marginal_likelihood",
    .options = ssgp_options,
    .n_options = sizeof ssgp_options / sizeof ssgp_options[0],
    .kernels = ssgp_kernels,
    .n_kernels = sizeof ssgp_kernels / sizeof ssgp_kernels[0],
    .composite_kernels = 0,
    .iterations_option = "max_iterations",
    .restarts_option = NULL,
    .info = ssgp_info,
    .n_info = sizeof ssgp_info / sizeof ssgp_info[0],
    .quick = ssgp_quick,
    .n_quick = sizeof ssgp_quick / sizeof ssgp_quick[0],
    .ops = &ssgp_ops,
};
