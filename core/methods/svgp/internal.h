/* Method "svgp": the evaluation, workspace, fit and settings its files share
 * (core/methods/svgp/). */
#ifndef GP_METHODS_SVGP_INTERNAL_H
#define GP_METHODS_SVGP_INTERNAL_H

#include "core/methods/svgp/svgp.h"

#include "core/base/rng.h"
#include "core/inducing/inducing.h"
#include "core/likelihood/softmax.h"
#include "core/linalg/linalg.h"
#include "core/model/method.h"
#include "core/optim/driver.h"
#include "core/optim/optim.h"

/* What the bound is evaluated at. */
typedef struct svgp_eval {
    const gp_kernel *k;
    const gp_lik *lik;
    const gp_quadrature *q;
    const double *Z;
    size_t m;
    const double *mq, *Lq;
    /* Gaussian: the known noise variances of the rows evaluated (NULL: none),
     * each row's variance being lik->noise + r[i]. Aligned with the X and y
     * handed to svgp_eval_full / svgp_expected_blocks; a minibatch gathers its
     * own (svgp_block_expect takes the block's). */
    const double *r;
    /* The mean function's value h(x_i)^T beta at the rows (NULL: zero mean),
     * aligned like r: the latent marginal means are mu_i = a_i^T m + off_i. */
    const double *off;
    /* Softmax (several latents; 0 or 1: one): C latent GPs sharing k and Z,
     * each its own whitened q (mq m x C, Lq m x m x C, class c at c m and c
     * m m); the expected log likelihood is mc's fixed Monte Carlo estimate.
     * The bound is the sum of the classes' KLs subtracted from it. */
    size_t C;
    const gp_softmax_mc *mc;
} svgp_eval;

/* Buffers: L and two m x m, three m x cap (Kuf, A, the sensitivity), four of cap.
 * With C latents: D m x m x C, agmu m x C, mu, var, gmu, gv cap x C (latent
 * c at c cap), and G (m x cap) where the classes' dF/dA add up (C > 1 only). */
typedef struct svgp_work {
    size_t cap, C;
    double *L, *D, *T, *Kuf, *A, *W, *G;
    double *mu, *var, *gmu, *gv, *agmu;
    double jitter;
} svgp_work;

/* Gradient outputs of one full evaluation (each may be NULL). */
typedef struct svgp_out {
    double *theta, *z, *mean, *chol;
    int sens; /* leave D and agmu in the work for a natural-gradient step */
} svgp_out;


/* Buffers of one step: two m x m and one m. */
typedef struct natgrad_buf {
    double *P, *Q, *v;
} natgrad_buf;

/* A fit's data, likelihood and the parameters being fitted (updated in place). */
typedef struct svgp_fit {
    gp_kernel *k; /* the model's kernel */
    gp_lik lik;
    gp_quadrature quad;
    gp_noise_param np; /* gaussian only; learned 0 otherwise */
    const double *X, *y;
    const double *r; /* n: known per-point noise, working units (NULL: none) */
    size_t n, d, m; /* m: the inducing points chosen (selection may return fewer than asked) */
    size_t C;       /* latents: the classes of a softmax fit, else 1 */
    gp_softmax_mc mc; /* softmax: the ELBO's fixed draws */
    double *Z, *mq, *Lq; /* mq m x C, Lq m x m x C */
    int optimize_z;
    const gp_cancel *cancel;
    const gp_hyper_spec *hyper; /* the request's priors, bounds, held parameters */
    size_t n_kp, n_free, *free_idx; /* the free kernel parameters */
    double *theta, *gtheta, *gz, *gmean, *gchol; /* gmean, gchol: C blocks */
    double *save; /* (m + m x m + m + m x m) x C: q and its D, agmu for the warm start */
    /* The latent mean h(x)^T beta (p = 0: zero mean): H (n x p, column-major,
     * the rows of X), beta (p, optimised after the hyperparameters), off = H
     * beta (n), gbeta = dELBO/dbeta = H^T gmu (p). */
    size_t p;
    double *H, *beta, *off, *gbeta;
    svgp_work w;
    natgrad_buf nb;
} svgp_fit;

/* Options of one fit. */
typedef struct svgp_settings {
    int budget;      /* max_iterations: L-BFGS iterations, or the progress scale of Adam */
    double tolerance;
    size_t batch;
    int epochs;
    double lr, natgrad_step, offset;
} svgp_settings;

#endif
