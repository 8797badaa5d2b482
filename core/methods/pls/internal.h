/* Declarations the files of pls (core/methods/pls/) share: the settings, the
 * model's state and the constants of the fit. The functions one file defines
 * for another are in that file's header. */
#ifndef GP_METHODS_PLS_INTERNAL_H
#define GP_METHODS_PLS_INTERNAL_H

#include "core/methods/pls/pls.h"
#include "core/model/method.h"

#define STREAM_SUBSET 1
#define STREAM_PARTICLE 4096

/* poisson_sq: |d log p / df| is clipped here in the samplers (pitfall P19:
 * near f = 0 the gradient is ~ y / sqrt(eps) and one step would fling a
 * particle far across the mode). */
#define SQ_GRAD_MAX 1e3

/* Rows of Phi_X built per kernel block (keeps k(Z, X) at M x 4096). */
#define FEATURE_BLOCK 4096

enum { SAMPLER_CLOSED = 0, SAMPLER_PULA, SAMPLER_MALA };

typedef struct pls_settings {
    size_t M, J, subset, repeats;
    int selection, subset_random;
    int rmode, sampler, optimize, max_iterations, laplace_amp, laplace_start;
    int hyper_lap; /* A1 by the labels' Laplace marginal likelihood (option hyper) */
    long steps;
    double step, tolerance, eig_tol, noise_floor;
} pls_settings;

typedef struct pls_impl {
    size_t d, M, mk, J; /* J = 0: closed form */
    int rmode;
    double *Z;   /* d x M landmarks, standardised */
    double *V;   /* M x mk eigenvectors of K_ZZ / M, eigenvalues descending */
    double *lam; /* mk */
    double *B;   /* M x mk: phi(x) = B^T k(Z, x); derived from V, lam */
    gp_kernel_points *Zp; /* Z prepared for k(Z, x) under the model's kernel; derived */
    double *A;   /* mk x J particles */
    double *mu;  /* mk, closed form */
    double *R;   /* mk x mk lower factor of H, closed form */
} pls_impl;

typedef struct hyp_run {
    const gp_fit_request *req;
    const pls_settings *set;
    int max_total;
    gp_diagnostics *diag;
    double lml_sum; /* of the subset fits, for the report */
    double log_c;   /* the [D] amplitude correction (0: none) */
} hyp_run;

typedef struct newton_ws {
    const gp_lik *lik;
    const double *Phi, *y;
    size_t n, mk;
    double s;              /* the feature scale */
    double *H;             /* mk x mk lower factor of H at the last point evaluated */
    double *f, *d1, *S;    /* n, n, mk x n */
    double *grad, *step, *at; /* mk each */
    const double *off;        /* n: the mean's h(x)^T beta added to f (NULL: none) */
} newton_ws;

typedef struct sampler_out {
    double energy;     /* mean final energy */
    double acceptance; /* mala; NAN otherwise */
} sampler_out;

typedef struct fit_data {
    double *Xt, *y, *t, *Phi;
    double *H;   /* n x p: the mean's basis of the training points (NULL: zero mean) */
    double *off; /* n: h(x)^T beta, the latent offset of a non-gaussian mean (NULL: none) */
    size_t n, d;
    uint64_t seed; /* of the landmark selection (kmeans, random) */
} fit_data;

#endif
