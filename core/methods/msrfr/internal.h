/* Method "msrfr": the settings, run result and fitted state its files share
 * (core/methods/msrfr/). */
#ifndef GP_METHODS_MSRFR_INTERNAL_H
#define GP_METHODS_MSRFR_INTERNAL_H

#include "core/methods/msrfr/msrfr.h"

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

/* How a run reports: iterations base + 1 .. base + T of total, and the mean
 * LML in original units (n log y_scale below the working-unit value). */
typedef struct progress_span {
    int base, total;
    double y_log_scale;
} progress_span;

/* The mean learned jointly with the hyperparameters (p = 0: none): the run's
 * targets y are the residual r0 of a start beta0, and it learns the step
 * delta (p) by the same Adam ascent of the mean component LML, its targets
 * becoming r0 - H delta; H (n x p, column-major) are the rows' basis. */
typedef struct msrfr_mean {
    const double *H;
    size_t p;
    double *delta; /* in: 0; out: the learned step */
} msrfr_mean;

typedef struct run_result {
    double mean_lml, lml_sd, noise, bandwidth_mean;
    double jitter;
    int noise_learned;
} run_result;

#endif
