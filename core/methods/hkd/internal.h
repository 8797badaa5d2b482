/* Method "hkd": the fitted state and the evaluation workspace its files share
 * (core/methods/hkd/). */
#ifndef GP_METHODS_HKD_INTERNAL_H
#define GP_METHODS_HKD_INTERNAL_H

#include "core/methods/hkd/hkd.h"

#include "core/base/rng.h"
#include "core/inducing/inducing.h"
#include "core/linalg/linalg.h"
#include "core/methods/hkd/group.h"
#include "core/model/method.h"

#define LOG_2PI 1.8378770664093454836
#define GP_HKD_JITTER 1e-6
#define GP_HKD_DROP 1e-8
#define KMEANS_ROWS 10000
#define FINAL_PCG_TOL 1e-10 /* the posterior the model keeps */
#define CHUNK_DOUBLES (1u << 21) /* the kernel values of one chunk: 16 MB */

/* ---- the fitted state ---- */

typedef struct hkd_impl {
    gp_symmetry sym;
    gp_hkd_frame frame;
    gp_group group;
    gp_kernel *kin; /* the model's kernel on the working coordinates (dw inputs) */
    size_t *pmap;   /* kin parameter p is the model kernel's parameter pmap[p] */
    size_t m, P;    /* inducing inputs; stacked block rows */
    size_t mb;      /* a block's capacity (leading dimension of the block arrays and stride of
                       idx): m when the blocks share Z; m / T with "share_inducing": false,
                       where block t owns Z's points t mb .. t mb + mb - 1 */
    double *Z;      /* dw x m */
    double *O;      /* dw x (m S): the orbit */
    size_t *mt;     /* T: block sizes */
    size_t *off;    /* T: first stacked row of each block */
    size_t *idx;    /* T x mb: idx[t mb + j] = the Z index of block t's point j */
    double *L;      /* T blocks of mb x mb (ld mb): chol(K_t + eps I) */
    double *Mb;     /* T blocks of mb x mb: chol(I + C_t / s2) */
    double *mean;   /* P: the whitened means, stacked */
    double *jitter; /* T */
    gp_kernel_points *Op; /* the orbit prepared for the fitted kernel (predictions) */
} hkd_impl;

/* ---- evaluation workspace ---- */

typedef struct hkd_data {
    const double *X; /* dw x n, working coordinates */
    const double *y; /* n, working units */
    size_t n;
    /* A mean's basis, profiled out of the bound (bound.c): H (n x p,
     * column-major, of the standardised points, not hkd's frame; p 0: zero
     * mean) and beta (p), where each evaluation leaves the GLS estimate. */
    const double *H;
    size_t p;
    double *beta;
} hkd_data;

typedef struct hkd_work {
    size_t chunk;
    double *Koz;  /* mS x m */
    double *E;    /* mS x chunk: kernel values of a chunk */
    double *Phi;  /* P x chunk */
    double *Y;    /* P x chunk: the gradient's sensitivities */
    double *Wo;   /* mS x chunk */
    double *K;    /* T x m x chunk: the blocks' orbit sums before the gather */
    double *Wzo;  /* mS x m */
    double *C;    /* T x mb x mb */
    double *Sinv; /* T x mb x mb: S_t = B_t^{-1}, then the K_t sensitivity */
    double *g, *r, *pcg; /* P; n; 4 P */
    double *ph, *U, *hh; /* a mean's basis: Phi H, (I + Phi Phi^T / s2)^{-1} Phi H / s2 (P x p
                            each) and [H^T H | H^T y] (p x (p + 1)); NULL without one */
    double *gzo, *gzt;   /* dw x mS: dF/dO and one contraction's share (Z optimised) */
    double *cache;       /* P x n, or NULL */
    double *kcache;      /* mS x n: the kernel values of the data pass, for the gradient's
                            contraction (only beside a Phi cache), or NULL */
    const double *Ecur;  /* the current chunk's kernel values */
    int cached;          /* the cache holds Phi at the current factors */
    int warm;            /* im->mean holds an earlier solution of this work's data */
    int warm_h;          /* U holds an earlier solution of this work's basis */
    double r0, yy;
    int pcg_iterations;
    double pcg_residual;
    const gp_cancel *cancel;
} hkd_work;

typedef struct hkd_terms {
    double bound, trace, rr;
} hkd_terms;

typedef struct hkd_problem {
    hkd_impl *im;
    const hkd_data *data;
    hkd_work *w;
    double pcg_tol;
    int pcg_max;
} hkd_problem;

#endif
