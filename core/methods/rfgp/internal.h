/* Declarations the files of rfgp (core/methods/rfgp/) share: the
 * configuration, the model's state and the selection's context. The
 * functions one file defines for another are in that file's header. */
#ifndef GP_METHODS_RFGP_INTERNAL_H
#define GP_METHODS_RFGP_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/methods/rfgp/embed.h"
#include "core/methods/rfgp/rfgp.h"
#include "core/model/method.h"

/* KJIT's noise (§4: sigma_y^2 = 1e-4), working units, when the request gives none */
#define DEFAULT_NOISE 1e-4
/* rows the width heuristics look at (§4: a subsample of at most 1500) */
#define HEURISTIC_ROWS 1500
/* streams of the fit's seed */
#define STREAM_INNER 1 /* points: the one stage; else W_in, b_in */
#define STREAM_OUTER 2
#define STREAM_SUBSAMPLE 3
#define STREAM_SAMPLE_NOISE 4
/* The crossover of `refactor_batch` "auto", as a fraction of D: measured at
 * D = 800 (bench/bench_rfgp.c), k rank-one updates cost as much as one
 * re-factorisation at k = 240-320, not the note's D / 10 (§7): the
 * re-factorisation rebuilds P = L L^T, a D^3 product, before its dpotrf
 * (docs/methods/kernel-jit-online.md, "As implemented"). */
#define AUTO_CROSSOVER_PER_D (1.0 / 3.0)

/* width_selection */
enum { SEL_MEDIAN = 0, SEL_LOOCV, SEL_ML, SEL_FIXED };

/* The configuration: fixed when the model is created, exported (persist.c). */
typedef struct rfgp_cfg {
    size_t D, d_in, p, warmup, dk, width;
    int two_stage, selection, gate_absolute, noise_learn;
    double median_factor, outer_width, forgetting, refactor_batch, gate_tau, kappa;
    int max_iterations;
    double tolerance;
    uint64_t seed;
} rfgp_cfg;

/* ---- the model's state ---- */

/* The posterior: the packed factor of P, z = L^{-1} b, and b. */
typedef struct post {
    double *L; /* D(D+1)/2, packed lower (column j: its D - j entries from the diagonal) */
    double *z; /* D x p */
    double *b; /* D x p */
    double n;  /* rows absorbed */
    double refactorisations, rank_one;
} post;

/* The feature map and the standardisation fixed at the end of the warm-up. */
typedef struct fmap {
    double *w_in, *b_in;   /* dk x d_in, d_in (two stages) */
    double *w_out, *b_out; /* (d_in or dk) x D, D */
    double *widths;        /* dk, working units */
    double gamma;          /* outer width (two stages) */
    double *x_mean, *x_scale; /* dk (points) */
    double *y_mean, *y_scale; /* p */
} fmap;

typedef struct rfgp_impl {
    rfgp_cfg c;
    int online;
    size_t n_buf;
    double *buf_x; /* warmup x width, leading dimension warmup (original units) */
    double *buf_y; /* warmup x p */
    fmap map;
    post post;
    double *threshold; /* p, original units */
    int always_asks;
} rfgp_impl;

/* The unit draws the widths scale (fixed for the whole selection). */
typedef struct unit_draws {
    double *E, *b1; /* dk x m1, m1: the first stage (points: the only one) */
    double *U, *b2; /* d_in x D, D (two stages) */
} unit_draws;

/* What the selection works on: the warm-up buffer and the staged map. */
typedef struct sel_ctx {
    const gp_model *model;
    const rfgp_cfg *c;
    const gp_input_spec *in;
    const double *X; /* n x width, leading dimension ldx */
    size_t ldx, n;
    double *Yw;      /* n x p working targets (a mean's residual: rfgp_mean_fit) */
    double *Yr;      /* n (leading dimension ldx): a mean's residual of the buffer's y,
                      * original units (NULL: zero mean) */
    double *Xs;      /* the heuristics' subsample rows, ns x width (compact) */
    size_t ns;
    unit_draws u;
    fmap *m;         /* staged: stats set, arrays scaled by the selection */
    const gp_fit_request *req; /* progress and cancellation (NULL in observe) */
    double noise0;   /* the noise the selection starts from */
    /* results */
    double *widths;
    double gamma, s0, noise, objective;
    int iterations, evaluations;
} sel_ctx;

/* What the end of the warm-up produces, committed only when every step (and
 * the rows after it) succeeded: observe is all or nothing. */
typedef struct staged {
    fmap m;
    post q;
    double *beta; /* the mean's coefficients (NULL: zero mean) */
    double s0, noise, objective, jitter;
    int iterations, evaluations;
} staged;

#endif
