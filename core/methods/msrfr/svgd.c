/* The SVGD run of method "msrfr" (core/methods/msrfr/msrfr.h).
 *
 * Working units as in ssgp (standardised inputs and targets unless
 * "standardize": false). The fit holds the M particles pooled as one
 * P x d matrix W (P = M R; component m in rows m R .. m R + R - 1), the
 * layout of the SVGD step, and gathers each component's R x d block into
 * its own contiguous matrix for the random-feature LML (core/features/rff.c). The M
 * LMLs of an iteration are independent and run on the cores (one workspace
 * per thread; a component's result does not depend on which thread or
 * workspace computed it), then the pooled SVGD step runs once. */
#include "core/methods/msrfr/svgd.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/methods/msrfr/internal.h"

const char *msrfr_bandwidth_name(int bw)
{
    return bw == BW_TOTAL ? "total" : bw == BW_NONE ? "none" : "per_dim";
}

/* ---- the fit ---- */

/* Everything one SVGD run needs, on n rows of working-unit data. */
typedef struct fit_state {
    const progress_span *span;
    const gp_fit_request *req;
    const msrfr_settings *set;
    const gp_spectral *spectral;
    const double *X, *y; /* n x d, n (working units) */
    size_t n, d, M, R, P, n_ls, n_hyper;
    double log_amp2;
    gp_noise_param np;
    double noise;        /* current noise variance */
    double *W;           /* P x d pooled particles */
    double *G, *phi;     /* P x d scores and SVGD direction */
    double *theta;       /* d log lengthscales (a shared one repeated) */
    double *hyper;       /* n_ls log lengthscales, then the noise parameter if learned */
    double *hgrad;       /* n_hyper */
    double *comp_omega;  /* M blocks R x d, gathered from W */
    double *comp_grad;   /* M blocks R x d: d LML_m / d Omega_m */
    double *comp_gls;    /* M x d: d LML_m / d log l */
    double *comp_gnoise; /* M: d LML_m / d log s */
    double *comp_lml;    /* M */
    int *comp_rc;
    gp_error *comp_err;
    gp_rff_work **work;
    size_t n_work;
    int with_grad;
    msrfr_impl *cache; /* when set, each component's factor and alpha go here */
    gp_svgd_work *svgd;
    gp_adam adam_w, adam_h, adam_n; /* particles, lengthscales, noise */
    double *h;             /* d bandwidths of the last step */
    double bandwidth_mean; /* their mean */
    int iterations;
    gp_hyper_walk *hw;     /* the request's priors and bounds over hyper (NULL: none) */
    size_t *hcoord;        /* n_hyper: what each entry of hyper is to them */
    double *hprior;        /* n_hyper: -d log p / d hyper */
    const msrfr_mean *mean; /* NULL or p = 0: no mean learned here */
    const double *y0;       /* the run's targets before the mean's step (r0) */
    double *ymean;          /* n: r0 - H delta, what fs->y points to */
    double *comp_gbeta;     /* M x p: d LML_m / d delta = H^T res_m / s */
    double *bgrad;          /* p */
    gp_adam adam_b;
} fit_state;

static void state_free(fit_state *fs)
{
    free(fs->W);
    free(fs->G);
    free(fs->phi);
    free(fs->theta);
    free(fs->h);
    free(fs->hyper);
    free(fs->hgrad);
    free(fs->comp_omega);
    free(fs->comp_grad);
    free(fs->comp_gls);
    free(fs->comp_gnoise);
    free(fs->comp_lml);
    free(fs->comp_rc);
    free(fs->comp_err);
    for (size_t t = 0; fs->work && t < fs->n_work; t++)
        gp_rff_work_free(fs->work[t]);
    free(fs->work);
    gp_svgd_work_free(fs->svgd);
    gp_adam_free(&fs->adam_w);
    gp_adam_free(&fs->adam_h);
    gp_adam_free(&fs->adam_n);
    gp_hyper_walk_free(fs->hw);
    free(fs->hcoord);
    free(fs->hprior);
    free(fs->ymean);
    free(fs->comp_gbeta);
    free(fs->bgrad);
    gp_adam_free(&fs->adam_b);
}

static size_t mean_p(const fit_state *fs)
{
    return fs->mean ? fs->mean->p : 0;
}

/* The mean's buffers; the run's targets become r0 - H delta (delta = 0). */
static int mean_alloc(fit_state *fs, gp_error *err)
{
    size_t p = mean_p(fs);
    if (p == 0)
        return GP_OK;
    fs->y0 = fs->y;
    if (!(fs->ymean = gp_alloc_doubles(fs->n, err)) ||
        !(fs->comp_gbeta = gp_alloc_doubles(fs->M * p, err)) ||
        !(fs->bgrad = gp_alloc_doubles(p, err)))
        return GP_ENOMEM;
    memset(fs->mean->delta, 0, p * sizeof *fs->mean->delta);
    memcpy(fs->ymean, fs->y0, fs->n * sizeof *fs->ymean);
    fs->y = fs->ymean;
    return gp_adam_init(&fs->adam_b, p, fs->set->ls_step, err);
}

static int state_alloc(fit_state *fs, gp_error *err)
{
    size_t Pd = 0, M = fs->M, d = fs->d;
    int rc = gp_checked_size(fs->P, d, &Pd, err);
    if (rc)
        return rc;
    int threads = gp_parallel_threads();
    fs->n_work = (size_t)threads < M ? (size_t)threads : M;
    if (!(fs->W = gp_alloc_doubles(Pd, err)) || !(fs->G = gp_alloc_doubles(Pd, err)) ||
        !(fs->phi = gp_alloc_doubles(Pd, err)) || !(fs->theta = gp_alloc_doubles(d, err)) ||
        !(fs->h = gp_alloc_doubles(d, err)) ||
        !(fs->hyper = gp_alloc_doubles(fs->n_hyper, err)) ||
        !(fs->hgrad = gp_alloc_doubles(fs->n_hyper, err)) ||
        !(fs->comp_omega = gp_alloc_doubles(Pd, err)) ||
        !(fs->comp_grad = gp_alloc_doubles(Pd, err)) ||
        !(fs->comp_gls = gp_alloc_doubles(M * d, err)) ||
        !(fs->comp_gnoise = gp_alloc_doubles(M, err)) ||
        !(fs->comp_lml = gp_alloc_doubles(M, err)) ||
        !(fs->comp_rc = calloc(M, sizeof *fs->comp_rc)) ||
        !(fs->comp_err = calloc(M, sizeof *fs->comp_err)) ||
        !(fs->work = calloc(fs->n_work, sizeof *fs->work)))
        return err && err->code ? err->code : gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t t = 0; t < fs->n_work; t++)
        if ((rc = gp_rff_work_new(fs->n, d, fs->R, &fs->work[t], err)))
            return rc;
    if (fs->set->bandwidth != BW_NONE && (rc = gp_svgd_work_new(fs->P, d, &fs->svgd, err)))
        return rc;
    if ((rc = gp_adam_init(&fs->adam_w, Pd, fs->set->step, err)) ||
        (rc = gp_adam_init(&fs->adam_n, 1, fs->set->noise_step, err)))
        return rc;
    return gp_adam_init(&fs->adam_h, fs->n_ls, fs->set->ls_step, err);
}

/* The authors' lengthscale init (docs/methods/stein-random-features.md §1.1): l_k = the median over all n^2
 * ordered pairs (self pairs included) of the squared difference of input k:
 * the squared, not the plain, distance, a quirk kept for reproduction. A
 * column where most pairs are equal (binary, discrete) has median 0; it
 * starts at l = 1 instead, which is the input's own scale once standardised. */
static int median_lengthscales(const double *X, size_t n, size_t d, double *theta,
                               gp_error *err)
{
    double *buf = gp_alloc_doubles(n, err);
    if (buf == NULL)
        return GP_ENOMEM;
    for (size_t k = 0; k < d; k++) {
        double h = gp_median_pair_sqdiff(X + k * n, n, 1, 1, buf);
        theta[k] = h > 0.0 && isfinite(h) ? log(h) : 0.0;
    }
    free(buf);
    return GP_OK;
}

static void expand_theta(fit_state *fs)
{
    for (size_t k = 0; k < fs->d; k++)
        fs->theta[k] = fs->hyper[fs->n_ls == 1 ? 0 : k];
}

static int init_lengthscales(fit_state *fs, const gp_kernel *k, gp_error *err)
{
    if (fs->set->ls_from_kernel) {
        for (size_t j = 0; j < fs->n_ls; j++)
            fs->hyper[j] = k->log_lengthscale[j];
    } else {
        int rc = median_lengthscales(fs->X, fs->n, fs->d, fs->theta, err);
        if (rc)
            return rc;
        if (fs->n_ls == 1) { /* a shared lengthscale: the geometric mean */
            double s = 0.0;
            for (size_t j = 0; j < fs->d; j++)
                s += fs->theta[j];
            fs->hyper[0] = s / (double)fs->d;
        } else {
            memcpy(fs->hyper, fs->theta, fs->d * sizeof *fs->hyper);
        }
    }
    expand_theta(fs);
    return GP_OK;
}

/* Component m's initial frequencies: its own scrambled Halton (or MC)
 * sequence, from a seed derived from the fit's seed and m. */
static int init_particles(fit_state *fs, gp_error *err)
{
    size_t Rd = fs->R * fs->d;
    for (size_t m = 0; m < fs->M; m++) {
        gp_rng r;
        gp_rng_derive(&r, fs->req->seed, STREAM_INIT + m);
        double *om = fs->comp_omega + m * Rd;
        int rc = gp_frequencies_draw(fs->spectral, fs->set->init, fs->R, fs->d, gp_rng_next(&r),
                                     NULL, NULL, NULL, om, err);
        if (rc)
            return rc;
        for (size_t k = 0; k < fs->d; k++)
            memcpy(fs->W + k * fs->P + m * fs->R, om + k * fs->R, fs->R * sizeof *om);
    }
    return GP_OK;
}

/* W (pooled) -> the M contiguous R x d blocks. */
static void gather_components(fit_state *fs)
{
    size_t R = fs->R, Rd = R * fs->d;
    for (size_t m = 0; m < fs->M; m++)
        for (size_t k = 0; k < fs->d; k++)
            memcpy(fs->comp_omega + m * Rd + k * R, fs->W + k * fs->P + m * R, R * sizeof(double));
}

/* Copy the workspace's factor (lower, upper zeroed) and alpha into the cache. */
static void cache_component(const fit_state *fs, size_t m, const gp_rff_work *w)
{
    msrfr_impl *im = fs->cache;
    size_t mm = im->m;
    double *L = im->L + m * mm * mm;
    const double *src = gp_rff_work_factor(w);
    for (size_t j = 0; j < mm; j++) {
        memset(L + j * mm, 0, j * sizeof *L);
        memcpy(L + j * mm + j, src + j * mm + j, (mm - j) * sizeof *L);
    }
    memcpy(im->alpha + m * mm, gp_rff_work_alpha(w), mm * sizeof *im->alpha);
}

int gp_msrfr_log_posterior(const gp_rff_problem *p, gp_rff_work *w, double lik_weight,
                           double prior_std, double *log_post, double *score,
                           const gp_rff_grad *hyper, double *lml, gp_error *err)
{
    gp_rff_grad g = {score, NULL, NULL, NULL};
    if (hyper) {
        g.log_ls = hyper->log_ls;
        g.log_amplitude2 = hyper->log_amplitude2;
        g.log_noise = hyper->log_noise;
    }
    double v = 0.0;
    int rc = gp_rff_lml(p, w, &v, score ? &g : NULL, err);
    if (rc)
        return rc;
    if (lml)
        *lml = v;
    size_t Rd = p->R * p->d;
    double it2 = 1.0 / (prior_std * prior_std), sq = 0.0;
    for (size_t i = 0; i < Rd; i++) {
        sq += p->omega[i] * p->omega[i];
        if (score)
            score[i] = lik_weight * score[i] - p->omega[i] * it2;
    }
    *log_post = lik_weight * v - 0.5 * sq * it2 -
                (double)Rd * (0.5 * LOG_2PI + log(prior_std));
    return GP_OK;
}

static void eval_component(fit_state *fs, size_t m, gp_rff_work *w)
{
    size_t Rd = fs->R * fs->d;
    gp_rff_problem p = {fs->X, fs->y, fs->n, fs->d, fs->R, fs->comp_omega + m * Rd,
                        fs->theta, fs->log_amp2, log(fs->noise), &fs->req->cancel};
    gp_rff_grad hyper = {NULL, fs->comp_gls + m * fs->d, NULL,
                         fs->np.learned ? fs->comp_gnoise + m : NULL};
    double lp;
    gp_error_clear(&fs->comp_err[m]);
    fs->comp_rc[m] = gp_msrfr_log_posterior(
        &p, w, fs->set->lik_weight, fs->set->prior_std, &lp,
        fs->with_grad ? fs->comp_grad + m * Rd : NULL, fs->with_grad ? &hyper : NULL,
        &fs->comp_lml[m], &fs->comp_err[m]);
    if (fs->comp_rc[m] == GP_OK && fs->cache)
        cache_component(fs, m, w);
    size_t nb = mean_p(fs);
    if (fs->comp_rc[m] == GP_OK && fs->with_grad && nb) {
        const double *res = gp_rff_work_residual(w);
        for (size_t j = 0; j < nb; j++)
            fs->comp_gbeta[m * nb + j] =
                cblas_ddot((blasint)fs->n, fs->mean->H + j * fs->n, 1, res, 1) / fs->noise;
    }
}

/* Task t evaluates components t, t + n_work, ... on workspace t. */
static void component_task(void *ctx, size_t t)
{
    fit_state *fs = ctx;
    for (size_t m = t; m < fs->M; m += fs->n_work)
        eval_component(fs, m, fs->work[t]);
}

/* Every component's LML (and gradient): the first failure is the answer. */
static int eval_all(fit_state *fs, double *mean_lml, gp_error *err)
{
    gather_components(fs);
    gp_parallel_for(fs->n_work, component_task, fs);
    double s = 0.0;
    for (size_t m = 0; m < fs->M; m++) {
        if (fs->comp_rc[m]) {
            if (err)
                *err = fs->comp_err[m];
            return fs->comp_rc[m];
        }
        s += fs->comp_lml[m];
    }
    *mean_lml = s / (double)fs->M;
    return GP_OK;
}

/* The components' scores into the pooled G. */
static void pooled_scores(fit_state *fs)
{
    size_t R = fs->R, Rd = R * fs->d, P = fs->P;
    for (size_t m = 0; m < fs->M; m++)
        for (size_t k = 0; k < fs->d; k++)
            memcpy(fs->G + k * P + m * R, fs->comp_grad + m * Rd + k * R, R * sizeof(double));
}

void gp_msrfr_direction(const double *W, const double *G, size_t M, size_t R, size_t d,
                        const char *bandwidth, double gamma, double repulsion,
                        gp_svgd_work *w, double *phi, double *h)
{
    size_t P = M * R, Pd = P * d;
    if (strcmp(bandwidth, "none") == 0) { /* K = I: the repulsion term vanishes */
        for (size_t i = 0; i < Pd; i++)
            phi[i] = gamma * G[i] / (double)M;
        return;
    }
    gp_svgd_options o;
    gp_svgd_default_options(&o);
    o.bandwidth = strcmp(bandwidth, "total") == 0 ? GP_SVGD_BANDWIDTH_TOTAL
                                                  : GP_SVGD_BANDWIDTH_PER_DIM;
    o.attraction = gamma;
    o.repulsion = repulsion;
    o.divisor = (double)M;
    gp_svgd_direction(W, G, P, d, &o, w, phi, h);
}

static void svgd_direction(fit_state *fs, double gamma)
{
    int bw = fs->set->bandwidth;
    gp_msrfr_direction(fs->W, fs->G, fs->M, fs->R, fs->d, msrfr_bandwidth_name(bw), gamma,
                       fs->set->repulsion, fs->svgd, fs->phi, fs->h);
    size_t nh = bw == BW_TOTAL ? 1 : bw == BW_NONE ? 0 : fs->d;
    double s = 0.0;
    for (size_t k = 0; k < nh; k++)
        s += fs->h[k];
    fs->bandwidth_mean = nh ? s / (double)nh : 0.0;
}

/* The request's priors and bounds over hyper: the log lengthscales of the
 * single leaf (entries 1 ..) when learned, the noise when learned. msrfr
 * holds no single hyperparameter (learn_lengthscales false holds them all). */
static int hyper_walk_init(fit_state *fs, const gp_kernel *k, gp_error *err)
{
    const gp_hyper_spec *hs = fs->req->hyper;
    if (hs == NULL)
        return GP_OK;
    for (size_t i = 0; i <= hs->n_kernel; i++)
        if (hs->entry[i].fixed)
            return gp_error_set(err, GP_EUNSUPPORTED, "kernel.fixed",
                                "msrfr holds no single hyperparameter (learn_lengthscales false "
                                "holds every lengthscale)");
    fs->hcoord = malloc((fs->n_hyper + 1) * sizeof *fs->hcoord);
    fs->hprior = gp_alloc_doubles(fs->n_hyper + 1, err);
    if (fs->hcoord == NULL || fs->hprior == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t j = 0; j < fs->n_ls; j++)
        fs->hcoord[j] = fs->set->learn_ls ? 1 + j : GP_HYPER_OTHER;
    if (fs->np.learned)
        fs->hcoord[fs->n_ls] = GP_HYPER_NOISE;
    gp_hyper_coords hc = {fs->hcoord, fs->n_hyper, fs->np.floor};
    return gp_hyper_walk_new(hs, &hc, k, &fs->hw, err);
}

/* hyper back inside its bounds after a step (a projected ascent step). */
static void hyper_project(fit_state *fs)
{
    if (fs->hw == NULL)
        return;
    gp_hyper_walk_project(fs->hw, fs->hyper);
    expand_theta(fs);
    if (fs->np.learned)
        fs->noise = gp_noise_param_value(&fs->np, fs->hyper[fs->n_ls]);
}

/* Adam ascent of the shared hyperparameters on the mean component LML:
 * the log lengthscales (hyper[0 .. n_ls)) and the noise parameter
 * (hyper[n_ls], when learned), each with its own rate. */
static void hyper_step(fit_state *fs)
{
    size_t M = fs->M, d = fs->d;
    if (fs->hw) { /* a MAP ascent: + d log p at the pre-update values */
        memset(fs->hprior, 0, fs->n_hyper * sizeof *fs->hprior);
        gp_hyper_walk_prior(fs->hw, fs->hyper, fs->hprior);
    }
    if (fs->set->learn_ls) {
        memset(fs->hgrad, 0, fs->n_ls * sizeof *fs->hgrad);
        for (size_t m = 0; m < M; m++)
            for (size_t k = 0; k < d; k++)
                fs->hgrad[fs->n_ls == 1 ? 0 : k] += fs->comp_gls[m * d + k] / (double)M;
        for (size_t j = 0; fs->hw && j < fs->n_ls; j++)
            fs->hgrad[j] -= fs->hprior[j];
        gp_svgd_adam_step(&fs->adam_h, fs->hyper, fs->hgrad, fs->set->ls_step, 0.0);
        expand_theta(fs);
    }
    if (fs->np.learned) {
        double g = 0.0;
        for (size_t m = 0; m < M; m++)
            g += fs->comp_gnoise[m] / (double)M;
        g = gp_noise_param_grad(&fs->np, fs->noise, g);
        if (fs->hw)
            g -= fs->hprior[fs->n_ls];
        gp_svgd_adam_step(&fs->adam_n, fs->hyper + fs->n_ls, &g, fs->set->noise_step, 0.0);
        fs->noise = gp_noise_param_value(&fs->np, fs->hyper[fs->n_ls]);
    }
    hyper_project(fs);
}

/* The mean's step: Adam ascent of the mean component LML in delta (the
 * lengthscales' rate), then the targets r0 - H delta. */
static void mean_step(fit_state *fs)
{
    size_t p = mean_p(fs), M = fs->M;
    memset(fs->bgrad, 0, p * sizeof *fs->bgrad);
    for (size_t m = 0; m < M; m++)
        for (size_t j = 0; j < p; j++)
            fs->bgrad[j] += fs->comp_gbeta[m * p + j] / (double)M;
    gp_svgd_adam_step(&fs->adam_b, fs->mean->delta, fs->bgrad, fs->set->ls_step, 0.0);
    memcpy(fs->ymean, fs->y0, fs->n * sizeof *fs->ymean);
    cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)fs->n, (blasint)p, -1.0, fs->mean->H,
                (blasint)fs->n, fs->mean->delta, 1, 1.0, fs->ymean, 1);
}

/* One iteration of Algorithm 1 (docs/methods/stein-random-features.md §4.4): every gradient at the
 * pre-update parameters, then the particle and hyperparameter steps. */
static int iterate(fit_state *fs, int t, double *mean_lml, gp_error *err)
{
    int rc = eval_all(fs, mean_lml, err);
    if (rc)
        return rc;
    pooled_scores(fs);
    double gamma = gp_svgd_anneal(t, fs->set->T, fs->set->cycles, fs->set->anneal_power);
    svgd_direction(fs, gamma);
    gp_svgd_adam_step(&fs->adam_w, fs->W, fs->phi, fs->set->step, WEIGHT_DECAY);
    if (fs->set->learn_ls || fs->np.learned)
        hyper_step(fs);
    if (mean_p(fs))
        mean_step(fs);
    return GP_OK;
}

/* Iteration t of this run as the job sees it: calibrate's two runs count
 * on from each other (base 0 then T, total 2T). */
static int report_progress(const fit_state *fs, int t, double lml_orig)
{
    const gp_fit_request *req = fs->req;
    const progress_span *ps = fs->span;
    if (req->progress && req->progress(req->progress_ctx, ps->base + t, ps->total, lml_orig))
        return 1;
    return 0;
}

/* SVGD from the initial particles to the cached mixture in im (omega, L,
 * alpha), lengthscales into k, on n rows X (n x d) y (working units). */
static int run_svgd(fit_state *fs, gp_kernel *k, msrfr_impl *im, run_result *res,
                    gp_error *err)
{
    int rc = state_alloc(fs, err);
    if (rc == GP_OK)
        rc = mean_alloc(fs, err);
    if (rc == GP_OK)
        rc = init_lengthscales(fs, k, err);
    if (rc == GP_OK)
        rc = init_particles(fs, err);
    if (rc)
        return rc;
    if (fs->np.learned)
        fs->hyper[fs->n_ls] = gp_noise_param_x0(&fs->np);
    fs->noise = gp_noise_param_value(&fs->np, fs->np.learned ? fs->hyper[fs->n_ls] : 0.0);
    if ((rc = hyper_walk_init(fs, k, err)) != GP_OK)
        return rc;
    hyper_project(fs); /* the median start inside the bounds */
    double lml = 0.0, offset = (double)fs->n * fs->span->y_log_scale;
    fs->with_grad = 1;
    for (int t = 0; rc == GP_OK && t < fs->set->T; t++) {
        if (gp_cancel_requested(&fs->req->cancel))
            return gp_error_set(err, GP_ECANCELLED, NULL, "fit cancelled");
        rc = iterate(fs, t, &lml, err);
        fs->iterations = t + 1;
        if (rc == GP_OK && report_progress(fs, t + 1, lml - offset))
            rc = gp_error_set(err, GP_ECANCELLED, NULL, "fit cancelled");
    }
    if (rc)
        return rc;
    /* The cached mixture, at the final particles and hyperparameters. */
    fs->with_grad = 0;
    fs->cache = im;
    rc = eval_all(fs, &lml, err);
    if (rc)
        return rc;
    double ss = 0.0, jit = 0.0;
    for (size_t m = 0; m < fs->M; m++)
        ss += (fs->comp_lml[m] - lml) * (fs->comp_lml[m] - lml);
    for (size_t t = 0; t < fs->n_work; t++)
        jit = fmax(jit, gp_rff_work_jitter(fs->work[t]));
    memcpy(im->omega, fs->comp_omega, fs->P * fs->d * sizeof *im->omega);
    for (size_t j = 0; j < fs->n_ls; j++)
        k->log_lengthscale[j] = fs->hyper[j];
    res->mean_lml = lml - offset;
    res->lml_sd = sqrt(ss / (double)fs->M);
    res->noise = fs->noise;
    res->bandwidth_mean = fs->bandwidth_mean;
    res->jitter = jit;
    res->noise_learned = fs->np.learned;
    return GP_OK;
}

/* One fit on n rows: state set up from the request and settings. */
int msrfr_fit_rows(const gp_fit_request *req, const msrfr_settings *set, const gp_spectral *sp,
                   const double *X, const double *y, size_t n, gp_kernel *k, msrfr_impl *im,
                   const progress_span *span, const msrfr_mean *mean, run_result *res,
                   int *iterations, gp_error *err)
{
    fit_state fs;
    memset(&fs, 0, sizeof fs);
    fs.span = span;
    fs.mean = mean;
    fs.req = req;
    fs.set = set;
    fs.spectral = sp;
    fs.X = X;
    fs.y = y;
    fs.n = n;
    fs.d = im->d;
    fs.M = set->M;
    fs.R = set->R;
    fs.P = set->M * set->R;
    fs.n_ls = k->n_lengthscale;
    fs.log_amp2 = k->log_variance;
    gp_noise_param_init(&fs.np, req, y, n);
    fs.n_hyper = fs.n_ls + (fs.np.learned ? 1 : 0);
    int rc = run_svgd(&fs, k, im, res, err);
    *iterations = fs.iterations;
    state_free(&fs);
    return rc;
}
