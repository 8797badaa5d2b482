/* Method "gwi": the settings, data, trainer and fitted state its files share
 * (core/methods/gwi/). */
#ifndef GP_METHODS_GWI_INTERNAL_H
#define GP_METHODS_GWI_INTERNAL_H

#include "core/methods/gwi/gwi.h"

#include "core/base/parallel.h"
#include "core/base/rng.h"
#include "core/inducing/collapsed.h"
#include "core/inducing/hyper.h"
#include "core/inducing/inducing.h"
#include "core/linalg/linalg.h"
#include "core/model/method.h"
#include "core/optim/driver.h"
#include "core/optim/optim.h"

#define LOG_2PI 1.8378770664093454836
/* Eigenvalues of Bm (or of the thesis's A) below this fraction of the
 * largest take no part in the gradient: 1/sqrt(mu) blows up there (P4). */
#define GP_GWI_EIG_FLOOR 1e-10

typedef struct mlp_view {
    const double *W1, *b1, *W2, *b2, *W3, *b3;
} mlp_view;

/* ---- the method ---- */

/* Streams of the fit seed (gp_rng_derive): each random choice has its own,
 * so changing one option does not move the others' draws. */
enum { STREAM_SPLIT = 1, STREAM_INDUCING, STREAM_NETWORK, STREAM_TRAIN };

typedef struct gwi_settings {
    gp_gwi_mean_kind mean;
    size_t hidden;
    gp_gwi_w2_kind w2;
    gp_gwi_objective_kind objective;
    size_t inducing; /* 0: round(factor sqrt(N)) */
    double factor;   /* NAN with factor_auto */
    int factor_auto; /* inducing_factor "auto": B1's grid by validation NLL (select.c) */
    size_t batch, w2_points;
    int epochs, patience, temper;
    int prior_sgpr; /* prior "sgpr": the collapsed bound on every training row */
    int optimize_inducing; /* with prior sgpr: Z moves with the hyperparameters */
    int learn_noise;       /* the noise is trained with q (not when the request fixes it) */
    int greedy;            /* inducing_selection greedy (prior sgpr only) */
    double learning_rate, validation_fraction;
} gwi_settings;

/* The fit's data in working units, point-major: training and validation rows. */
typedef struct gwi_data {
    size_t d, ntr, nva;
    double *Xtr, *ytr, *Xva, *yva;
} gwi_data;

typedef struct trainer {
    const gp_gwi_setup *s;
    gp_gwi_work *w;
    const gwi_data *D;
    const gwi_settings *st;
    const gp_fit_request *req;
    double y_scale;
    size_t nb, ns, np;
    size_t *order, *pool;
    double *XB, *yB, *XS;
    double *theta, *grad, *best;
    double *vm, *vv; /* validation means and variances */
    gp_adam adam;
    gp_rng rng;
    /* outcome */
    int epochs_run, best_epoch, steps, skipped, stopped_early;
    double best_nll; /* working units, untempered */
} trainer;

/* ---- the fitted model ---- */

typedef struct gwi_impl {
    gp_inducing_post post; /* first: Z, Lk, mt = Lk^T beta (0 for mlp), C = Lk^T Sigma Lk,
                              scale = alpha (gp_inducing_predict reads it) */
    gp_gwi_mean_kind mean;
    size_t hidden;
    int learn_noise; /* theta ends with the noise's unconstrained value */
    double *theta; /* the fitted parameters (gwi.h's layout) */
    size_t n_theta;
} gwi_impl;

#endif
