/* Mixture Stein random feature regression: see core/methods/msrfr.h.
 *
 * Working units as in ssgp (standardised inputs and targets unless
 * "standardize": false). The fit holds the M particles pooled as one
 * P x d matrix W (P = M R; component m in rows m R .. m R + R - 1), the
 * layout of the SVGD step, and gathers each component's R x d block into
 * its own contiguous matrix for the random-feature LML (core/features/rff.c). The M
 * LMLs of an iteration are independent and run on the cores (one workspace
 * per thread; a component's result does not depend on which thread or
 * workspace computed it), then the pooled SVGD step runs once. */
#include "core/methods/msrfr.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/base/rng.h"
#include "core/features/rff.h"
#include "core/features/sample.h"
#include "core/linalg/linalg.h"
#include "core/model/method.h"
#include "core/model/mixture.h"
#include "core/optim/optim.h"
#include "core/optim/svgd.h"

#define LOG_2PI 1.8378770664093454836
#define WEIGHT_DECAY 1e-4 /* the authors' decoupled weight decay (docs/methods/stein-random-features.md §2.3) */
/* Streams of the fit seed (gp_rng_derive): the held-out rows of calibrate,
 * and component m's initial frequencies at STREAM_INIT + m. */
#define STREAM_HOLDOUT 1
#define STREAM_INIT 16
/* Streams of a sample request's seed. */
#define SAMPLE_NOISE_STREAM 1
#define SAMPLE_PICK_STREAM 2
#define SAMPLE_WEIGHT_STREAM 3
/* calibrate needs this many rows on each side of the split. */
#define CALIBRATE_MIN_ROWS 8

static const gp_kernel_type msrfr_kernels[] = {GP_KERNEL_RBF, GP_KERNEL_MATERN12,
                                               GP_KERNEL_MATERN32, GP_KERNEL_MATERN52};

static const gp_option_spec msrfr_options[] = {
    {"particles", GP_OPTION_INT, 10, NULL, 1, 200, NULL,
     "M, the number of particles (mixture components), each a whole R x d frequency matrix"},
    {"features", GP_OPTION_INT, 100, NULL, 1, 20000, NULL,
     "R, frequencies per particle; each gives a cos and a sin feature"},
    {"iterations", GP_OPTION_INT, 1000, NULL, 0, 1000000, NULL, "T, SVGD iterations"},
    {"step", GP_OPTION_NUMBER, 0.2, NULL, 1e-8, 10, NULL,
     "learning rate of the Adam step on the SVGD direction"},
    {"lengthscale_step", GP_OPTION_NUMBER, 0.1, NULL, 1e-8, 10, NULL,
     "Adam learning rate of the shared log lengthscales"},
    {"noise_step", GP_OPTION_NUMBER, 0.05, NULL, 1e-8, 10, NULL,
     "Adam learning rate of the log noise variance when it is learned"},
    {"repulsion", GP_OPTION_NUMBER, 0, NULL, 0, 100, NULL,
     "alpha, the weight of the SVGD repulsion between particles (0: none)"},
    {"anneal_power", GP_OPTION_NUMBER, 0.5, NULL, 0, 10, NULL,
     "s of the cyclic annealing of the attraction, ((t mod T/c) / (T/c))^s; 0: none"},
    {"anneal_cycles", GP_OPTION_INT, 5, NULL, 1, 1000, NULL, "c, annealing cycles"},
    {"prior_std", GP_OPTION_NUMBER, 3, NULL, 1e-6, 1e6, NULL,
     "tau, the standard deviation of the N(0, tau^2) prior on every frequency entry"},
    {"likelihood_weight", GP_OPTION_ENUM, 0, "1/M", 0, 0, "1/M|1",
     "weight of each particle's log likelihood in its score: 1/M (the authors' code) or 1 "
     "(the paper)"},
    {"learn_lengthscales", GP_OPTION_BOOL, 1, NULL, 0, 1, NULL,
     "learn the shared ARD lengthscales by Adam ascent on the mean particle LML"},
    {"lengthscale_init", GP_OPTION_ENUM, 0, "median", 0, 0, "median|kernel",
     "start the lengthscales at the median squared pair difference of each input (the "
     "authors' init) or at the kernel's given lengthscales"},
    {"init", GP_OPTION_ENUM, 0, "qmc", 0, 0, "qmc|mc",
     "initial frequencies of each particle: scrambled Halton (qmc) or Monte Carlo draws "
     "of the kernel's spectral density"},
    {"bandwidth", GP_OPTION_ENUM, 0, "per_dim", 0, 0, "per_dim|total|none",
     "SVGD kernel between pooled frequencies: per-dimension median bandwidth (the authors'), "
     "one median over total distances, or none (identity: M independent SSGPs)"},
    {"calibrate", GP_OPTION_BOOL, 0, NULL, 0, 1, NULL,
     "hold out calibration_fraction of the rows, fit, choose the variance scale that "
     "minimises the held-out NLPD, then refit on all rows with that scale"},
    {"calibration_fraction", GP_OPTION_NUMBER, 0.2, NULL, 0.05, 0.5, NULL,
     "share of the training rows calibrate holds out"},
};

enum { BW_PER_DIM = 0, BW_TOTAL, BW_NONE };

typedef struct msrfr_settings {
    size_t M, R;
    int T, cycles, learn_ls, ls_from_kernel, bandwidth, calibrate, lik_one;
    double step, ls_step, noise_step, repulsion, anneal_power, prior_std, lik_weight;
    double calib_fraction;
    gp_freq_sampler init;
} msrfr_settings;

typedef struct msrfr_impl {
    size_t M, R, d, m;    /* m = 2R; d = dimensions the kernel sees */
    size_t *dims;         /* d input columns (owned) */
    double *omega;        /* M blocks of R x d (component k at k R d) */
    double *inv_ls;       /* d */
    double amplitude2;    /* kernel variance (fixed) */
    double *L;            /* M blocks of m x m lower factors (upper zeroed) */
    double *alpha;        /* m x M */
    double variance_scale; /* multiplies every predictive variance (1 unless calibrated) */
} msrfr_impl;

/* ---- impl ---- */

static void impl_free(void *p)
{
    msrfr_impl *im = p;
    if (im == NULL)
        return;
    free(im->dims);
    free(im->omega);
    free(im->inv_ls);
    free(im->L);
    free(im->alpha);
    free(im);
}

static msrfr_impl *impl_alloc(const gp_kernel *k, size_t M, size_t R, gp_error *err)
{
    msrfr_impl *im = calloc(1, sizeof *im);
    if (im == NULL) {
        gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    im->M = M;
    im->R = R;
    im->m = 2 * R;
    im->d = k->n_active;
    im->variance_scale = 1.0;
    size_t rd = 0, mm = 0, P = 0;
    if (gp_checked_size(M, R, &P, err) || gp_checked_size(P, im->d, &rd, err) ||
        gp_checked_size(im->m, im->m, &mm, err) || gp_checked_size(mm, M, &mm, err) ||
        !(im->dims = malloc(im->d * sizeof *im->dims)) ||
        !(im->omega = gp_alloc_doubles(rd, err)) ||
        !(im->inv_ls = gp_alloc_doubles(im->d, err)) || !(im->L = gp_alloc_doubles(mm, err)) ||
        !(im->alpha = gp_alloc_doubles(im->m * M, err))) {
        if (err && err->code == GP_OK)
            gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        impl_free(im);
        return NULL;
    }
    for (size_t j = 0; j < im->d; j++)
        im->dims[j] = k->active_dims ? k->active_dims[j] : j;
    return im;
}

static void impl_set_kernel(msrfr_impl *im, const gp_kernel *k)
{
    for (size_t j = 0; j < im->d; j++)
        im->inv_ls[j] = exp(-k->log_lengthscale[k->n_lengthscale == 1 ? 0 : j]);
    im->amplitude2 = exp(k->log_variance);
}

/* ---- settings ---- */

static void read_settings(const gp_fit_request *req, msrfr_settings *s)
{
    const gp_method *m = &gp_method_msrfr;
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

static const char *bandwidth_name(int bw)
{
    return bw == BW_TOTAL ? "total" : bw == BW_NONE ? "none" : "per_dim";
}

/* ---- the fit ---- */

/* How a run reports: iterations base + 1 .. base + T of total, and the mean
 * LML in original units (n log y_scale below the working-unit value). */
typedef struct progress_span {
    int base, total;
    double y_log_scale;
} progress_span;

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
    gp_msrfr_direction(fs->W, fs->G, fs->M, fs->R, fs->d, bandwidth_name(bw), gamma,
                       fs->set->repulsion, fs->svgd, fs->phi, fs->h);
    size_t nh = bw == BW_TOTAL ? 1 : bw == BW_NONE ? 0 : fs->d;
    double s = 0.0;
    for (size_t k = 0; k < nh; k++)
        s += fs->h[k];
    fs->bandwidth_mean = nh ? s / (double)nh : 0.0;
}

/* Adam ascent of the shared hyperparameters on the mean component LML:
 * the log lengthscales (hyper[0 .. n_ls)) and the noise parameter
 * (hyper[n_ls], when learned), each with its own rate. */
static void hyper_step(fit_state *fs)
{
    size_t M = fs->M, d = fs->d;
    if (fs->set->learn_ls) {
        memset(fs->hgrad, 0, fs->n_ls * sizeof *fs->hgrad);
        for (size_t m = 0; m < M; m++)
            for (size_t k = 0; k < d; k++)
                fs->hgrad[fs->n_ls == 1 ? 0 : k] += fs->comp_gls[m * d + k] / (double)M;
        gp_svgd_adam_step(&fs->adam_h, fs->hyper, fs->hgrad, fs->set->ls_step, 0.0);
        expand_theta(fs);
    }
    if (fs->np.learned) {
        double g = 0.0;
        for (size_t m = 0; m < M; m++)
            g += fs->comp_gnoise[m] / (double)M;
        g = gp_noise_param_grad(&fs->np, fs->noise, g);
        gp_svgd_adam_step(&fs->adam_n, fs->hyper + fs->n_ls, &g, fs->set->noise_step, 0.0);
        fs->noise = gp_noise_param_value(&fs->np, fs->hyper[fs->n_ls]);
    }
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

typedef struct run_result {
    double mean_lml, lml_sd, noise, bandwidth_mean;
    double jitter;
    int noise_learned;
} run_result;

/* SVGD from the initial particles to the cached mixture in im (omega, L,
 * alpha), lengthscales into k, on n rows X (n x d) y (working units). */
static int run_svgd(fit_state *fs, gp_kernel *k, msrfr_impl *im, run_result *res,
                    gp_error *err)
{
    int rc = state_alloc(fs, err);
    if (rc == GP_OK)
        rc = init_lengthscales(fs, k, err);
    if (rc == GP_OK)
        rc = init_particles(fs, err);
    if (rc)
        return rc;
    if (fs->np.learned)
        fs->hyper[fs->n_ls] = gp_noise_param_x0(&fs->np);
    fs->noise = gp_noise_param_value(&fs->np, fs->np.learned ? fs->hyper[fs->n_ls] : 0.0);
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
static int fit_rows(const gp_fit_request *req, const msrfr_settings *set, const gp_spectral *sp,
                    const double *X, const double *y, size_t n, gp_kernel *k, msrfr_impl *im,
                    const progress_span *span, run_result *res, int *iterations, gp_error *err)
{
    fit_state fs;
    memset(&fs, 0, sizeof fs);
    fs.span = span;
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

/* ---- prediction core (working units) ---- */

/* Means and variances of every component at b points whose inputs Xs (b x d)
 * are already divided by the lengthscales: mu, var (b x M, leading
 * dimension ld). Phi: b x 2R scratch; it holds component M-1's whitened
 * features V = Phi L^{-T} on return (the latent variance is s c ||V_i||^2).
 * cov (b x b, may be NULL) accumulates (s c / M) sum_k V_k V_k^T. */
static void component_moments(const msrfr_impl *im, double noise, const double *Xs, size_t b,
                              int include_noise, double *Phi, double *mu, double *var,
                              size_t ld, double *cov)
{
    size_t m = im->m, Rd = im->R * im->d;
    double sc = noise * im->variance_scale;
    for (size_t k = 0; k < im->M; k++) {
        const double *L = im->L + k * m * m;
        gp_rff_features(Xs, b, im->d, NULL, im->omega + k * Rd, im->R, im->amplitude2, Phi, b);
        cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)b, (blasint)m, 1.0, Phi, (blasint)b,
                    im->alpha + k * m, 1, 0.0, mu + k * ld, 1);
        cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, (blasint)b,
                    (blasint)m, 1.0, L, (blasint)m, Phi, (blasint)b);
        for (size_t i = 0; i < b; i++) {
            double v = cblas_ddot((blasint)m, Phi + i, (blasint)b, Phi + i, (blasint)b);
            var[k * ld + i] = sc * (v + (include_noise ? 1.0 : 0.0));
        }
        if (cov)
            cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)b, (blasint)m,
                        sc / (double)im->M, Phi, (blasint)b, 1.0, cov, (blasint)b);
    }
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
        component_moments(fit, noise, Xs, h, 1, Phi, mu, var, h, NULL);
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
    if (rc == GP_OK && !(im = impl_alloc(k0, set->M, set->R, err)))
        rc = GP_ENOMEM;
    if (rc == GP_OK) {
        size_t nt = n - h;
        split_rows(req->seed, n, perm);
        take_rows(X, y, n, d, perm, nt, Xt, yt);
        run_result res;
        int iters = 0;
        progress_span span = {0, 2 * set->T, y_log_scale};
        rc = fit_rows(req, set, sp, Xt, yt, nt, k, im, &span, &res, &iters, err);
        if (rc == GP_OK) {
            impl_set_kernel(im, k);
            take_rows(X, y, n, d, perm + nt, h, Xt, yt);
            rc = heldout_scale(im, k, res.noise, Xt, yt, h, scale, err);
        }
    }
    free(perm);
    free(Xt);
    free(yt);
    gp_kernel_free(k);
    impl_free(im);
    return rc;
}

/* ---- fit entry ---- */

/* The fit's memory, checked before anything is allocated: per thread one
 * random-feature workspace (Phi, scaled inputs, A and its inverse), the M
 * cached factors, and the SVGD step's P x P kernel. The budget is what an
 * exact fit of max_train_points points may use (as for ssgp). */
static int size_guard(const gp_fit_request *req, gp_error *err)
{
    double cap = (double)gp_fit_point_cap(req);
    const gp_method *me = &gp_method_msrfr;
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
    gp_model_info_string(model, "bandwidth", bandwidth_name(set->bandwidth));
    if (set->bandwidth != BW_NONE)
        gp_model_info_number(model, "final_bandwidth_mean", res->bandwidth_mean);
    gp_model_info_number(model, "lml_sd_components", res->lml_sd);
    gp_model_info_string(model, "likelihood_weight", set->lik_one ? "1" : "1/M");
    gp_model_info_string(model, "noise", res->noise_learned ? "learned" : "fixed");
    gp_model_info_number(model, "variance_scale", im->variance_scale);
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
    rc = fit_rows(req, set, &sp, Xw, yw, req->n, model->kernel, im, &span, &res, &iters, err);
    if (rc)
        return rc;
    im->variance_scale = scale;
    model->noise_variance = res.noise;
    impl_set_kernel(im, model->kernel);
    model->diag.objective = res.mean_lml;
    model->diag.iterations = iters;
    model->diag.evaluations = iters + 1;
    model->diag.converged = 1;
    model->diag.jitter = res.jitter;
    record_info(model, set, &res, im);
    return GP_OK;
}

static int msrfr_fit(const gp_fit_request *req, gp_model **out, gp_error *err)
{
    gp_model *model;
    int rc = size_guard(req, err);
    if (rc)
        return rc;
    rc = gp_model_new(&gp_method_msrfr, req, &model, err);
    if (rc)
        return rc;
    msrfr_settings set;
    read_settings(req, &set);
    msrfr_impl *im = impl_alloc(model->kernel, set.M, set.R, err);
    model->impl = im;
    size_t nd = 0;
    double *Xw = NULL, *yw = NULL;
    rc = im ? gp_checked_size(req->n, im->d, &nd, err) : GP_ENOMEM;
    if (rc == GP_OK && (!(Xw = gp_alloc_doubles(nd, err)) || !(yw = gp_alloc_doubles(req->n, err))))
        rc = GP_ENOMEM;
    if (rc == GP_OK) {
        gp_model_leaf_inputs(model, im->dims, im->d, NULL, req->X, req->n, 0, req->n, Xw);
        gp_model_working_targets(model, req->y, req->n, yw);
        impl_set_kernel(im, model->kernel);
        /* The M components run on our threads, each calling BLAS: BLAS
         * itself single-threaded for the whole fit (parallel.h explains
         * why), which also makes the fit independent of its thread count. */
        gp_blas_serial_begin();
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

/* ---- predict ---- */

/* Component means and variances in original units (m x M each), by blocks;
 * cov (m x m, NULL unless full covariance: then one block) gets the
 * within-component part (1/M) sum_k C_k in working units. */
static int components_original(const gp_model *model, const msrfr_impl *im, const double *X,
                               size_t m, int include_noise, double *mu, double *var,
                               double *cov, gp_error *err)
{
    size_t block = cov ? m : gp_predict_block_rows(im->m, m);
    size_t bm = 0, bd = 0;
    int rc = gp_checked_size(block, im->m, &bm, err);
    if (rc == GP_OK)
        rc = gp_checked_size(block, im->d, &bd, err);
    if (rc)
        return rc;
    double *Phi = gp_alloc_doubles(bm, err), *Xs = gp_alloc_doubles(bd, err);
    if (Phi == NULL || Xs == NULL) {
        free(Phi);
        free(Xs);
        return GP_ENOMEM;
    }
    if (cov)
        memset(cov, 0, m * m * sizeof *cov);
    for (size_t start = 0; start < m; start += block) {
        size_t b = m - start < block ? m - start : block;
        gp_model_leaf_inputs(model, im->dims, im->d, im->inv_ls, X, m, start, b, Xs);
        component_moments(im, model->noise_variance, Xs, b, include_noise, Phi, mu + start,
                          var + start, m, cov);
    }
    double ys = model->y_scale, ys2 = ys * ys;
    for (size_t i = 0; i < m * im->M; i++) {
        mu[i] = mu[i] * ys + model->y_mean;
        var[i] *= ys2;
    }
    free(Phi);
    free(Xs);
    return GP_OK;
}

/* The mixture's covariance over the points (law of total covariance):
 * (1/M) sum_k [C_k + (mu_k - mean)(mu_k - mean)^T]; cov holds the first
 * part in working units on entry, everything in original units on exit. */
static int mixture_covariance(const gp_model *model, const msrfr_impl *im, size_t m,
                              const double *mu, const double *mean, int include_noise,
                              double *cov, gp_error *err)
{
    size_t mM = 0;
    int rc = gp_checked_size(m, im->M, &mM, err);
    double *D = rc ? NULL : gp_alloc_doubles(mM, err);
    if (D == NULL)
        return rc ? rc : GP_ENOMEM;
    double ys2 = model->y_scale * model->y_scale;
    for (size_t k = 0; k < im->M; k++)
        for (size_t i = 0; i < m; i++)
            D[k * m + i] = mu[k * m + i] - mean[i];
    for (size_t i = 0; i < m * m; i++)
        cov[i] *= ys2;
    if (include_noise) {
        double s = model->noise_variance * im->variance_scale * ys2;
        for (size_t i = 0; i < m; i++)
            cov[i * m + i] += s;
    }
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)m, (blasint)im->M,
                1.0 / (double)im->M, D, (blasint)m, 1.0, cov, (blasint)m);
    gp_symmetrize_from_lower(cov, m, m);
    free(D);
    return GP_OK;
}

static int msrfr_predict(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                         gp_error *err)
{
    const msrfr_impl *im = model->impl;
    size_t m = req->m, mM = 0;
    if (m == 0)
        return GP_OK;
    int rc = gp_checked_size(m, im->M, &mM, err);
    if (rc)
        return rc;
    double *mu = req->components ? out->component_mean : gp_alloc_doubles(mM, err);
    double *var = req->components ? out->component_variance : gp_alloc_doubles(mM, err);
    if (mu == NULL || var == NULL)
        rc = GP_ENOMEM;
    double *cov = req->full_covariance ? out->covariance : NULL;
    if (rc == GP_OK)
        rc = components_original(model, im, req->X, m, req->include_noise, mu, var, cov, err);
    if (rc == GP_OK)
        gp_mixture_moments(mu, var, m, im->M, out->mean, out->variance);
    if (rc == GP_OK && cov) {
        rc = mixture_covariance(model, im, m, mu, out->mean, req->include_noise, cov, err);
        for (size_t i = 0; rc == GP_OK && i < m; i++)
            out->variance[i] = cov[i * m + i];
    }
    if (rc == GP_OK && req->n_quantiles)
        gp_mixture_quantiles(mu, var, m, im->M, req->quantiles, req->n_quantiles,
                             out->quantiles);
    if (!req->components) {
        free(mu);
        free(var);
    }
    return rc;
}

/* ---- sample ---- */

/* Samples of component k at every point: S weight draws
 * W (2R x S) = alpha_k + sqrt(s c) L_k^{-T} E evaluated at the points. */
static int sample_component(const gp_model *model, const msrfr_impl *im, size_t k,
                            const double *X, size_t m, gp_rng *rng, size_t S, double *out,
                            size_t ldo, gp_error *err)
{
    size_t block = gp_predict_block_rows(im->m, m), mm = im->m;
    double *W = gp_alloc_doubles(mm * S, err), *Phi = gp_alloc_doubles(block * mm, err),
           *Xs = gp_alloc_doubles(block * im->d, err);
    int rc = W && Phi && Xs ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK) {
        gp_rng_normal_fill(rng, W, mm * S);
        cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, (blasint)mm,
                    (blasint)S, sqrt(model->noise_variance * im->variance_scale),
                    im->L + k * mm * mm, (blasint)mm, W, (blasint)mm);
        for (size_t s = 0; s < S; s++)
            cblas_daxpy((blasint)mm, 1.0, im->alpha + k * mm, 1, W + s * mm, 1);
        for (size_t start = 0; start < m; start += block) {
            size_t b = m - start < block ? m - start : block;
            gp_model_leaf_inputs(model, im->dims, im->d, im->inv_ls, X, m, start, b, Xs);
            gp_rff_features(Xs, b, im->d, NULL, im->omega + k * im->R * im->d, im->R,
                            im->amplitude2, Phi, b);
            cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)b, (blasint)S,
                        (blasint)mm, 1.0, Phi, (blasint)b, W, (blasint)mm, 0.0, out + start,
                        (blasint)ldo);
        }
    }
    free(W);
    free(Phi);
    free(Xs);
    return rc;
}

/* Joint draws of the mixture: each sample picks a component uniformly, then
 * draws that component's weight posterior. Samples of one component are
 * drawn together (one matrix product) and written to their own columns. */
static int msrfr_sample(const gp_model *model, const gp_sample_request *req, double *samples,
                        gp_error *err)
{
    const msrfr_impl *im = model->impl;
    size_t m = req->m, S = req->n_samples;
    if (m == 0 || S == 0)
        return GP_OK;
    size_t *pick = malloc(S * sizeof *pick), *cols = malloc(S * sizeof *cols);
    double *buf = gp_alloc_doubles(m * S, err);
    int rc = pick && cols && buf ? GP_OK : GP_ENOMEM;
    gp_rng pr, wr, nr;
    gp_rng_derive(&pr, req->seed, SAMPLE_PICK_STREAM);
    gp_rng_derive(&wr, req->seed, SAMPLE_WEIGHT_STREAM);
    gp_rng_derive(&nr, req->seed, SAMPLE_NOISE_STREAM);
    for (size_t s = 0; rc == GP_OK && s < S; s++)
        pick[s] = (size_t)gp_rng_below(&pr, im->M);
    for (size_t k = 0; rc == GP_OK && k < im->M; k++) {
        size_t c = 0;
        for (size_t s = 0; s < S; s++)
            if (pick[s] == k)
                cols[c++] = s;
        if (c == 0)
            continue;
        rc = sample_component(model, im, k, req->X, m, &wr, c, buf, m, err);
        for (size_t j = 0; rc == GP_OK && j < c; j++)
            memcpy(samples + cols[j] * m, buf + j * m, m * sizeof *buf);
    }
    double sd = sqrt(model->noise_variance * im->variance_scale);
    for (size_t i = 0; rc == GP_OK && i < m * S; i++) {
        double f = samples[i] + (req->include_noise ? sd * gp_rng_normal(&nr) : 0.0);
        samples[i] = f * model->y_scale + model->y_mean;
    }
    free(pick);
    free(cols);
    free(buf);
    return rc;
}

/* ---- export / import ---- */

static int msrfr_export(const gp_model *model, gp_state *st, gp_error *err)
{
    const msrfr_impl *im = model->impl;
    size_t M = im->M, R = im->R, d = im->d, m = im->m, np = m * (m + 1) / 2;
    double *pooled = gp_alloc_doubles(M * R * d, err), *packed = gp_alloc_doubles(np * M, err);
    int rc = pooled && packed ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK) {
        for (size_t k = 0; k < M; k++) {
            for (size_t j = 0; j < d; j++)
                memcpy(pooled + j * M * R + k * R, im->omega + k * R * d + j * R,
                       R * sizeof *pooled);
            gp_pack_lower(im->L + k * m * m, m, m, packed + k * np);
        }
        rc = gp_state_put(st, "omega", M * R, d, pooled, err);
    }
    if (rc == GP_OK)
        rc = gp_state_put(st, "chol_packed", np, M, packed, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "alpha", m, M, im->alpha, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "variance_scale", im->variance_scale, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "particles", (double)M, err);
    free(pooled);
    free(packed);
    return rc;
}

/* The factors from their packed columns; a diagonal that is not positive
 * and finite means a corrupt or foreign array. */
static int import_factors(msrfr_impl *im, const double *packed, gp_error *err)
{
    size_t m = im->m, np = m * (m + 1) / 2;
    for (size_t k = 0; k < im->M; k++) {
        double *L = im->L + k * m * m;
        memset(L, 0, m * m * sizeof *L);
        gp_unpack_lower(packed + k * np, m, L, m);
        for (size_t i = 0; i < m; i++)
            if (!(L[i * m + i] > 0.0) || !isfinite(L[i * m + i]))
                return gp_error_set(err, GP_EDATA, "chol_packed",
                                    "component %zu: the factor's diagonal is not positive", k);
    }
    return GP_OK;
}

static int msrfr_import(gp_model *model, const gp_state *st, gp_error *err)
{
    double Md = 0, scale = 1;
    int rc = gp_state_get_scalar(st, "particles", &Md, err);
    if (rc == GP_OK)
        rc = gp_state_get_scalar(st, "variance_scale", &scale, err);
    if (rc)
        return rc;
    const gp_named_array *om = gp_state_find(st, "omega");
    size_t d = model->kernel->n_active, M = (size_t)Md;
    if (!(Md >= 1 && Md <= 1e6 && Md == floor(Md)) || !(scale > 0 && isfinite(scale)) ||
        om == NULL || om->cols != d || om->rows == 0 || om->rows % M != 0)
        return gp_error_set(err, GP_EDATA, "omega", "missing or malformed particles");
    size_t R = om->rows / M;
    msrfr_impl *im = impl_alloc(model->kernel, M, R, err);
    if (im == NULL)
        return GP_ENOMEM;
    const double *packed, *alpha;
    size_t m = im->m;
    rc = gp_state_get(st, "chol_packed", m * (m + 1) / 2, M, &packed, err);
    if (rc == GP_OK)
        rc = gp_state_get(st, "alpha", m, M, &alpha, err);
    if (rc == GP_OK)
        rc = import_factors(im, packed, err);
    if (rc == GP_OK) {
        for (size_t k = 0; k < M; k++)
            for (size_t j = 0; j < d; j++)
                memcpy(im->omega + k * R * d + j * R, om->data + j * M * R + k * R,
                       R * sizeof *im->omega);
        memcpy(im->alpha, alpha, m * M * sizeof *alpha);
        im->variance_scale = scale;
        impl_set_kernel(im, model->kernel);
        model->impl = im;
        return GP_OK;
    }
    impl_free(im);
    return rc;
}

static size_t msrfr_components(const gp_model *model)
{
    const msrfr_impl *im = model->impl;
    return im->M;
}

static const gp_method_ops msrfr_ops = {
    .fit = msrfr_fit,
    .predict = msrfr_predict,
    .sample = msrfr_sample,
    .export_impl = msrfr_export,
    .import_impl = msrfr_import,
    .free_impl = impl_free,
    .components = msrfr_components,
};

static const gp_info_spec msrfr_info[] = {
    {"particles", GP_INFO_NUMBER,
     "M, the number of particles (mixture components)"},
    {"features", GP_INFO_NUMBER,
     "R, frequencies per particle"},
    {"bandwidth", GP_INFO_STRING,
     "the SVGD bandwidth rule (per_dim, total or none)"},
    {"final_bandwidth_mean", GP_INFO_NUMBER,
     "mean SVGD bandwidth at the last iteration (absent with bandwidth none)"},
    {"lml_sd_components", GP_INFO_NUMBER,
     "standard deviation of the component LMLs at the end"},
    {"likelihood_weight", GP_INFO_STRING,
     "the weight c of the LML in each particle's posterior (\"1\" or \"1/M\")"},
    {"noise", GP_INFO_STRING,
     "\"learned\" or \"fixed\""},
    {"variance_scale", GP_INFO_NUMBER,
     "factor on the predictive variances (1 unless calibrate)"},
};

static const gp_option_setting msrfr_quick[] = {
    {"iterations", 8}, {"particles", 3}, {"features", 10}};

const gp_method gp_method_msrfr = {
    .name = "msrfr",
    .summary = "Mixture Stein random feature regression: a posterior over spectral measures "
               "held as M particles (each a whole frequency matrix and its sparse-spectrum GP) "
               "moved by SVGD; predicts with the equally weighted mixture",
    .objective_name = "mean_component_log_marginal_likelihood",
    .options = msrfr_options,
    .n_options = sizeof msrfr_options / sizeof msrfr_options[0],
    .kernels = msrfr_kernels,
    .n_kernels = sizeof msrfr_kernels / sizeof msrfr_kernels[0],
    .composite_kernels = 0,
    .iterations_option = "iterations",
    .restarts_option = NULL,
    .info = msrfr_info,
    .n_info = sizeof msrfr_info / sizeof msrfr_info[0],
    .quick = msrfr_quick,
    .n_quick = sizeof msrfr_quick / sizeof msrfr_quick[0],
    .ops = &msrfr_ops,
};
