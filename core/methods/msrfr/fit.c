/* Fit of method "msrfr": settings, calibration of the predictive variance, and the fit entry. */
#include "core/methods/msrfr/fit.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/methods/msrfr/internal.h"
#include "core/methods/msrfr/model.h"
#include "core/methods/msrfr/svgd.h"

/* ---- settings ---- */

static void read_settings(const gp_method *m, const gp_fit_request *req, msrfr_settings *s)
{
    s->M = (size_t)gp_option_number(m, req, "particles");
    s->R = (size_t)gp_option_number(m, req, "features");
    s->T = (int)gp_option_number(m, req, "iterations");
    s->step = gp_option_number(m, req, "step");
    s->ls_step = gp_option_number(m, req, "lengthscale_step");
    s->noise_step = gp_option_number(m, req, "noise_step");
    s->repulsion = gp_option_number(m, req, "repulsion");
    s->anneal_power = gp_option_number(m, req, "anneal_power");
    s->cycles = (int)gp_option_number(m, req, "anneal_cycles");
    s->prior_std = gp_option_number(m, req, "prior_std");
    /* "1" (the paper) or "1/M" (the authors' code) */
    s->lik_one = strcmp(gp_option_string(m, req, "likelihood_weight"), "1") == 0;
    s->lik_weight = s->lik_one ? 1.0 : 1.0 / (double)s->M;
    s->learn_ls = gp_option_number(m, req, "learn_lengthscales") != 0.0;
    s->ls_from_kernel = strcmp(gp_option_string(m, req, "lengthscale_init"), "kernel") == 0;
    s->init = strcmp(gp_option_string(m, req, "init"), "mc") == 0 ? GP_FREQ_MC : GP_FREQ_QMC;
    const char *bw = gp_option_string(m, req, "bandwidth");
    s->bandwidth = strcmp(bw, "total") == 0 ? BW_TOTAL
                   : strcmp(bw, "none") == 0 ? BW_NONE
                                             : BW_PER_DIM;
    s->calibrate = gp_option_number(m, req, "calibrate") != 0.0;
    s->calib_fraction = gp_option_number(m, req, "calibration_fraction");
}

/* ---- calibration ---- */

/* Mean held-out NLPD of the mixture with every variance times c. */
static double scaled_nlpd(const double *mu, const double *var, size_t h, size_t M,
                          const double *y, double log_c, double *tmp, double *lp)
{
    double c = exp(log_c);
    for (size_t i = 0; i < h * M; i++)
        tmp[i] = var[i] * c;
    gp_mixture_log_density(mu, tmp, h, M, y, lp);
    double s = 0.0;
    for (size_t i = 0; i < h; i++)
        s -= lp[i];
    return s / (double)h;
}

/* Golden-section search of log c in [-7, 7] (c in about [1e-3, 1e3]); the
 * NLPD is unimodal in log c for one Gaussian and in practice for these
 * mixtures; 80 steps narrow the interval below 1e-15. */
static double best_log_scale(const double *mu, const double *var, size_t h, size_t M,
                             const double *y, double *tmp, double *lp)
{
    const double g = 0.6180339887498949;
    double a = -7.0, b = 7.0;
    double x1 = b - g * (b - a), x2 = a + g * (b - a);
    double f1 = scaled_nlpd(mu, var, h, M, y, x1, tmp, lp);
    double f2 = scaled_nlpd(mu, var, h, M, y, x2, tmp, lp);
    for (int it = 0; it < 80; it++) {
        if (f1 <= f2) {
            b = x2;
            x2 = x1;
            f2 = f1;
            x1 = b - g * (b - a);
            f1 = scaled_nlpd(mu, var, h, M, y, x1, tmp, lp);
        } else {
            a = x1;
            x1 = x2;
            f1 = f2;
            x2 = a + g * (b - a);
            f2 = scaled_nlpd(mu, var, h, M, y, x2, tmp, lp);
        }
    }
    return 0.5 * (a + b);
}

/* Held-out rows: a seeded permutation; the last h rows of perm are held out. */
static void split_rows(uint64_t seed, size_t n, size_t *perm)
{
    gp_rng r;
    gp_rng_derive(&r, seed, STREAM_HOLDOUT);
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)gp_rng_below(&r, i + 1);
        size_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
}

static void take_rows(const double *X, const double *y, size_t n, size_t d, const size_t *rows,
                      size_t count, double *Xo, double *yo)
{
    for (size_t i = 0; i < count; i++) {
        yo[i] = y[rows[i]];
        for (size_t k = 0; k < d; k++)
            Xo[k * count + i] = X[k * n + rows[i]];
    }
}

/* Predict the held-out rows with a mixture fitted on the others (working
 * units) and return the NLPD-optimal variance scale. */
static int heldout_scale(const msrfr_impl *fit, const gp_kernel *k, double noise,
                         const double *Xh, const double *yh, size_t h, double *scale,
                         gp_error *err)
{
    size_t M = fit->M, d = fit->d;
    double *Xs = gp_alloc_doubles(h * d, err), *Phi = gp_alloc_doubles(h * fit->m, err);
    double *mu = gp_alloc_doubles(h * M, err), *var = gp_alloc_doubles(h * M, err);
    double *tmp = gp_alloc_doubles(h * M, err), *lp = gp_alloc_doubles(h, err);
    int rc = Xs && Phi && mu && var && tmp && lp ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK) {
        for (size_t j = 0; j < d; j++) {
            double il = exp(-k->log_lengthscale[k->n_lengthscale == 1 ? 0 : j]);
            for (size_t i = 0; i < h; i++)
                Xs[j * h + i] = Xh[j * h + i] * il;
        }
        msrfr_component_moments(fit, noise, Xs, h, 1, Phi, mu, var, h, NULL);
        *scale = exp(best_log_scale(mu, var, h, M, yh, tmp, lp));
    }
    free(Xs);
    free(Phi);
    free(mu);
    free(var);
    free(tmp);
    free(lp);
    return rc;
}

/* calibrate: fit on (1 - f) of the rows, scale from the rest. */
static int calibrate(const gp_fit_request *req, const msrfr_settings *set, const gp_spectral *sp,
                     const double *X, const double *y, size_t n, const gp_kernel *k0,
                     double y_log_scale, double *scale, gp_error *err)
{
    size_t h = (size_t)floor(set->calib_fraction * (double)n + 0.5), d = k0->n_active;
    if (h < CALIBRATE_MIN_ROWS || n - h < CALIBRATE_MIN_ROWS)
        return gp_error_set(err, GP_EINVAL, "options.calibrate",
                            "calibrate needs at least %d training rows on each side of the "
                            "split (%zu rows, fraction %g)",
                            CALIBRATE_MIN_ROWS, n, set->calib_fraction);
    size_t *perm = malloc(n * sizeof *perm);
    double *Xt = gp_alloc_doubles(n * d, err), *yt = gp_alloc_doubles(n, err);
    gp_kernel *k = NULL;
    msrfr_impl *im = NULL;
    int rc = perm && Xt && yt ? gp_kernel_copy(&k, k0, err) : GP_ENOMEM;
    if (rc == GP_OK && !(im = msrfr_impl_alloc(k0, set->M, set->R, err)))
        rc = GP_ENOMEM;
    if (rc == GP_OK) {
        size_t nt = n - h;
        split_rows(req->seed, n, perm);
        take_rows(X, y, n, d, perm, nt, Xt, yt);
        run_result res;
        int iters = 0;
        progress_span span = {0, 2 * set->T, y_log_scale};
        rc = msrfr_fit_rows(req, set, sp, Xt, yt, nt, k, im, &span, NULL, &res, &iters, err);
        if (rc == GP_OK) {
            msrfr_impl_set_kernel(im, k);
            take_rows(X, y, n, d, perm + nt, h, Xt, yt);
            rc = heldout_scale(im, k, res.noise, Xt, yt, h, scale, err);
        }
    }
    free(perm);
    free(Xt);
    free(yt);
    gp_kernel_free(k);
    msrfr_impl_free(im);
    return rc;
}

/* ---- fit entry ---- */

/* The fit's memory, checked before anything is allocated: per thread one
 * random-feature workspace (Phi, scaled inputs, A and its inverse), the M
 * cached factors, and the SVGD step's P x P kernel. The budget is what an
 * exact fit of max_train_points points may use (as for ssgp). */
static int size_guard(const gp_method *me, const gp_fit_request *req, gp_error *err)
{
    double cap = (double)gp_fit_point_cap(req);
    double M = gp_option_number(me, req, "particles"), R = gp_option_number(me, req, "features");
    double m = 2.0 * R, P = M * R, d = (double)req->d;
    double threads = fmin(M, (double)gp_parallel_threads());
    double need = threads * ((double)req->n * (m + 2.0 * d) + 2.0 * m * m) + M * m * m +
                  P * P + 8.0 * P * d;
    if (need > cap * cap)
        return gp_error_set(err, GP_ETOOBIG, "options.particles",
                            "msrfr with %.0f particles of %.0f features on %zu points needs "
                            "%.1f GB of workspace, above the budget of an exact fit of "
                            "max_train_points = %.0f points (%.1f GB): use fewer particles or "
                            "features, or raise --max-train-points",
                            M, R, req->n, need * 8e-9, cap, cap * cap * 8e-9);
    return GP_OK;
}

static void record_info(gp_model *model, const msrfr_settings *set, const run_result *res,
                        const msrfr_impl *im)
{
    gp_model_info_number(model, "particles", (double)set->M);
    gp_model_info_number(model, "features", (double)set->R);
    gp_model_info_string(model, "bandwidth", msrfr_bandwidth_name(set->bandwidth));
    if (set->bandwidth != BW_NONE)
        gp_model_info_number(model, "final_bandwidth_mean", res->bandwidth_mean);
    gp_model_info_number(model, "lml_sd_components", res->lml_sd);
    gp_model_info_string(model, "likelihood_weight", set->lik_one ? "1" : "1/M");
    gp_model_info_string(model, "noise", res->noise_learned ? "learned" : "fixed");
    gp_model_info_number(model, "variance_scale", im->variance_scale);
}

/* The mean's basis at the training rows (working units) for the joint run;
 * *H NULL for a zero mean. */
static int mean_basis(const gp_model *model, const gp_fit_request *req, double **H,
                      gp_error *err)
{
    *H = NULL;
    if (model->mean_type == GP_MEAN_ZERO)
        return GP_OK;
    double *P = NULL;
    int rc = gp_model_points(model, req->X, req->n, &P, err);
    if (rc == GP_OK && (*H = gp_model_mean_basis(model, P, req->n, err)) == NULL)
        rc = GP_ENOMEM;
    free(P);
    return rc;
}

/* The run on all rows; a mean's coefficients are the least-squares start
 * (model->mean_coef, yw its residual) plus the step learned in the run. */
static int fit_rows_mean(gp_model *model, const gp_fit_request *req, const msrfr_settings *set,
                         const gp_spectral *sp, const double *Xw, const double *yw,
                         msrfr_impl *im, const progress_span *span, run_result *res, int *iters,
                         gp_error *err)
{
    size_t p = gp_mean_n_coef(model->mean_type, model->input_dim);
    double *H = NULL, *delta = p ? gp_alloc_doubles(p, err) : NULL;
    int rc = p && delta == NULL ? GP_ENOMEM : mean_basis(model, req, &H, err);
    msrfr_mean mean = {H, p, delta};
    if (rc == GP_OK)
        rc = msrfr_fit_rows(req, set, sp, Xw, yw, req->n, model->kernel, im, span,
                            p ? &mean : NULL, res, iters, err);
    for (size_t j = 0; rc == GP_OK && j < p; j++)
        model->mean_coef[j] += delta[j];
    free(H);
    free(delta);
    return rc;
}

static int fit_all(gp_model *model, const gp_fit_request *req, const msrfr_settings *set,
                   const double *Xw, const double *yw, msrfr_impl *im, gp_error *err)
{
    gp_spectral sp;
    int rc = gp_kernel_spectral(model->kernel->type, &sp, err);
    double scale = 1.0;
    if (rc == GP_OK && set->calibrate)
        rc = calibrate(req, set, &sp, Xw, yw, req->n, model->kernel, log(model->y_scale), &scale,
                       err);
    if (rc)
        return rc;
    run_result res;
    int iters = 0;
    progress_span span = {set->calibrate ? set->T : 0, set->calibrate ? 2 * set->T : set->T,
                          log(model->y_scale)};
    rc = fit_rows_mean(model, req, set, &sp, Xw, yw, im, &span, &res, &iters, err);
    if (rc)
        return rc;
    im->variance_scale = scale;
    model->noise_variance = res.noise;
    msrfr_impl_set_kernel(im, model->kernel);
    model->diag.objective = res.mean_lml;
    model->diag.iterations = iters;
    model->diag.evaluations = iters + 1;
    model->diag.converged = 1;
    model->diag.jitter = res.jitter;
    record_info(model, set, &res, im);
    return GP_OK;
}

int msrfr_fit(const gp_method *m, const gp_fit_request *req, gp_model **out, gp_error *err)
{
    gp_model *model;
    int rc = size_guard(m, req, err);
    if (rc)
        return rc;
    rc = gp_model_new(m, req, &model, err);
    if (rc)
        return rc;
    msrfr_settings set;
    read_settings(m, req, &set);
    msrfr_impl *im = msrfr_impl_alloc(model->kernel, set.M, set.R, err);
    model->impl = im;
    size_t nd = 0;
    double *Xw = NULL, *yw = NULL;
    rc = im ? gp_checked_size(req->n, im->d, &nd, err) : GP_ENOMEM;
    if (rc == GP_OK && (!(Xw = gp_alloc_doubles(nd, err)) || !(yw = gp_alloc_doubles(req->n, err))))
        rc = GP_ENOMEM;
    if (rc == GP_OK) {
        gp_model_leaf_inputs(model, im->dims, im->d, NULL, req->X, req->n, 0, req->n, Xw);
        gp_model_working_targets(model, req->y, req->n, yw);
        /* a constant or linear mean: its least-squares fit is the start,
         * learned on jointly with the hyperparameters in the SVGD run
         * (fit_rows_mean; docs/design/numerics.md) */
        rc = gp_model_mean_residual_ols(model, req->X, req->n, yw, err);
        msrfr_impl_set_kernel(im, model->kernel);
        /* The M components run on our threads, each calling BLAS: BLAS
         * itself single-threaded for the whole fit (parallel.h explains
         * why), which also makes the fit independent of its thread count. */
        gp_blas_serial_begin();
        if (rc == GP_OK)
            rc = fit_all(model, req, &set, Xw, yw, im, err);
        gp_blas_serial_end();
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
