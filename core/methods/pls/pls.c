/* Projected Langevin sampling: see core/methods/pls/pls.h and
 * docs/methods/sparse-variational-and-pls.md §5.2 (Algorithm A, steps A0-A6).
 *
 * Working units: standardised inputs (A0); gaussian targets standardised by
 * the model, other labels raw (the latent f is in natural units). The fit
 * keeps Phi_X (mk x N) and, for the samplers, the particles A (mk x J) and
 * N x J buffers of f and g; no N x N matrix (the subset fits of A1 use
 * N_sub x N_sub).
 *
 * Random streams (gp_rng_derive of the fit seed): the centroid of subset r
 * at STREAM_SUBSET + r, particle j's chain (prior draw, then per step its
 * mk normals and, for mala, one uniform) at STREAM_PARTICLE + j: a particle
 * depends on nothing else, so results do not depend on the thread count.
 * A sample request's draw s uses gp_rng_derive(req->seed, s) (see pls_sample). */
#include "core/methods/pls/pls.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/base/rng.h"
#include "core/inducing/hyper.h"
#include "core/inducing/select.h"
#include "core/linalg/linalg.h"
#include "core/model/method.h"
#include "core/model/mixture.h"
#include "core/optim/driver.h"

#define STREAM_SUBSET 1
#define STREAM_PARTICLE 4096
#define LANDMARKS_AUTO_MAX 2000
#define LANDMARKS_AUTO_MIN 100
/* poisson_sq: |d log p / df| is clipped here in the samplers (pitfall P19:
 * near f = 0 the gradient is ~ y / sqrt(eps) and one step would fling a
 * particle far across the mode). */
#define SQ_GRAD_MAX 1e3
/* Rows of Phi_X built per kernel block (keeps k(Z, X) at M x 4096). */
#define FEATURE_BLOCK 4096

enum { SAMPLER_CLOSED = 0, SAMPLER_PULA, SAMPLER_MALA };
static const char *const sampler_names[] = {"closed_form", "pula", "mala"};

static const gp_kernel_type pls_kernels[] = {GP_KERNEL_RBF, GP_KERNEL_MATERN12,
                                             GP_KERNEL_MATERN32, GP_KERNEL_MATERN52};

static const gp_likelihood pls_likelihoods[] = {GP_LIK_GAUSSIAN, GP_LIK_BERNOULLI,
                                                GP_LIK_POISSON, GP_LIK_POISSON_SQ};

static const gp_option_spec pls_options[] = {
    {"landmarks", GP_OPTION_NUMBER, 0, NULL, 0, 8192, "auto",
     "M, landmarks chosen greedily by conditional variance (pivoted Cholesky); 0 or \"auto\": "
     "max(floor(sqrt(N)), 100), at most N and 2000"},
    {"landmark_selection", GP_OPTION_ENUM, 0, "auto", 0, 0, "auto|greedy|kmeans|random",
     "greedy: conditional variance (pivoted Cholesky; thesis); kmeans: k-means centres (seeded), "
     "each moved to its nearest training input ([D]: discrete inputs keep their values); "
     "random: distinct training inputs (seeded); auto: greedy for gaussian, kmeans otherwise "
     "([D]: greedy picks the outliers of heavy-tailed inputs first, P26)"},
    {"particles", GP_OPTION_INT, 100, NULL, 1, 10000, NULL,
     "J, independent Langevin chains (mixture components of the predictive); not used by the "
     "closed form"},
    {"prior_mode", GP_OPTION_ENUM, 0, "k", 0, 0, "k|r",
     "k: the GP with kernel k (residual variance restores the prior away from the landmarks); "
     "r: the thesis prior with kernel r(x,x') = mean_m k(x,z_m) k(z_m,x')"},
    {"sampler", GP_OPTION_ENUM, 0, "auto", 0, 0, "auto|closed_form|pula|mala",
     "auto: closed_form for gaussian, pula otherwise; closed_form (gaussian only): the exact "
     "Gaussian coefficient posterior; pula: preconditioned unadjusted Langevin; mala: "
     "Metropolis-adjusted"},
    {"step", GP_OPTION_NUMBER, 0.05, NULL, 1e-8, 1, NULL,
     "eta, the Langevin step after preconditioning (dimensionless)"},
    {"steps", GP_OPTION_INT, 200, NULL, 0, 1000000, NULL,
     "K, Langevin steps per particle (from the Laplace start, 200 are past burn-in on the "
     "shared classification sets)"},
    {"optimize", GP_OPTION_BOOL, 1, NULL, 0, 1, NULL,
     "fit the kernel hyperparameters (and gaussian noise) by the exact marginal likelihood on "
     "subsets; false keeps the given values"},
    {"subset", GP_OPTION_NUMBER, 0, NULL, 0, 20000, "auto",
     "N_sub, points per hyperparameter fit; 0 or \"auto\": 2000 for gaussian, 500 otherwise"},
    {"repeats", GP_OPTION_NUMBER, 0, NULL, 0, 100, "auto",
     "R, subset fits averaged in log space when N > N_sub; 0 or \"auto\": 10 for gaussian, 2 "
     "otherwise"},
    {"subset_selection", GP_OPTION_ENUM, 0, "auto", 0, 0, "auto|nearest|random",
     "the points of a subset fit when N > N_sub: nearest: the N_sub nearest to a random training "
     "point (thesis); random: N_sub distinct points drawn uniformly; auto: nearest for gaussian, "
     "random otherwise ([D])"},
    {"max_iterations", GP_OPTION_INT, 200, NULL, 1, 100000, NULL,
     "L-BFGS iterations per subset fit"},
    {"tolerance", GP_OPTION_NUMBER, 1e-9, NULL, 1e-16, 1, NULL,
     "stop a subset fit when the relative LML change of an iteration falls below this"},
    {"amplitude", GP_OPTION_ENUM, 0, "laplace", 0, 0, "laplace|thesis",
     "bernoulli with optimize: laplace ([D]) rescales the amplitude fitted on the 0/1 labels "
     "to maximise the model's Laplace marginal likelihood on the training features; thesis "
     "keeps it (poisson keeps it always: its A1 target is on the log-rate scale)"},
    {"noise_floor", GP_OPTION_NUMBER, 0.15, NULL, 0, 1, NULL,
     "non-gaussian likelihoods: least noise of the hyperparameter regression on the "
     "transformed labels, as a fraction of their variance ([D]: stops interpolating fits)"},
    {"precondition", GP_OPTION_ENUM, 0, "auto", 0, 0, "auto|laplace|bound",
     "pula and mala: laplace ([D]) preconditions by the Hessian at the mode of the potential and "
     "starts the particles from the Laplace approximation; bound: the likelihood's curvature "
     "bound and prior draws; auto: laplace for gaussian, bernoulli and poisson, bound for "
     "poisson_sq (not log-concave)"},
    {"eig_rel_tol", GP_OPTION_NUMBER, 1e-10, NULL, 0, 0.01, NULL,
     "drop Nystrom eigenvalues at or below this times the largest"},
};

typedef struct pls_settings {
    size_t M, J, subset, repeats;
    int selection, subset_random;
    int rmode, sampler, optimize, max_iterations, laplace_amp, laplace_start;
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

static void impl_free(void *p)
{
    pls_impl *im = p;
    if (im == NULL)
        return;
    gp_kernel_points_free(im->Zp);
    free(im->Z);
    free(im->V);
    free(im->lam);
    free(im->B);
    free(im->A);
    free(im->mu);
    free(im->R);
    free(im);
}

static pls_impl *impl_alloc(size_t d, size_t M, size_t mk, size_t J, gp_error *err)
{
    pls_impl *im = calloc(1, sizeof *im);
    if (im == NULL) {
        gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    im->d = d;
    im->M = M;
    im->mk = mk;
    im->J = J;
    im->Z = gp_alloc_doubles(d * M, err);
    im->V = gp_alloc_doubles(M * mk, err);
    im->lam = gp_alloc_doubles(mk, err);
    im->B = gp_alloc_doubles(M * mk, err);
    int ok = im->Z && im->V && im->lam && im->B;
    if (ok && J > 0)
        ok = (im->A = gp_alloc_doubles(mk * J, err)) != NULL;
    if (ok && J == 0)
        ok = (im->mu = gp_alloc_doubles(mk, err)) && (im->R = gp_alloc_doubles(mk * mk, err));
    if (!ok) {
        impl_free(im);
        return NULL;
    }
    return im;
}

/* B from V and lambda (§5.2 A3), and Z prepared for the kernel k of the
 * model (k(Z, x) of every prediction block without rescaling Z): the same
 * code at fit and import, so an imported model predicts bit for bit as the
 * fitted one. Scaling by the number of landmarks M, not mk (pitfall P14). */
static int impl_derive(pls_impl *im, const gp_kernel *k, gp_error *err)
{
    double M = (double)im->M;
    for (size_t m = 0; m < im->mk; m++) {
        double s = im->rmode ? 1.0 / sqrt(M) : 1.0 / sqrt(M * im->lam[m]);
        for (size_t i = 0; i < im->M; i++)
            im->B[m * im->M + i] = im->V[m * im->M + i] * s;
    }
    return gp_kernel_points_new(k, im->Z, im->M, &im->Zp, err);
}

/* H (mk x mk) = the lower Cholesky factor of I + alpha S S^T for S (mk x n),
 * the upper half unspecified: the closed form's H, the Laplace Hessian and
 * the bound preconditioner. GP_ENOTPD when it is not positive definite. */
static int chol_identity_plus_gram(const double *S, size_t mk, size_t n, double alpha,
                                   double *H)
{
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)mk, (blasint)n, alpha, S,
                (blasint)mk, 0.0, H, (blasint)mk);
    for (size_t i = 0; i < mk; i++)
        H[i * mk + i] += 1.0;
    return LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)mk, H, (lapack_int)mk) == 0
               ? GP_OK
               : GP_ENOTPD;
}

/* ---- the potential (§5.2 A3) ---- */

/* log p(y | f) summed, g = -d log p / df (n); clipped for poisson_sq when clip. */
static double loglik_and_g(const gp_lik *lik, const double *y, const double *f, size_t n,
                           double *g, int clip)
{
    double ll = gp_lik_log_density_sum(lik, y, f, n, g);
    for (size_t i = 0; i < n; i++) {
        double v = -g[i];
        if (clip && lik->type == GP_LIK_POISSON_SQ)
            v = v > SQ_GRAD_MAX ? SQ_GRAD_MAX : (v < -SQ_GRAD_MAX ? -SQ_GRAD_MAX : v);
        g[i] = v;
    }
    return ll;
}

double gp_pls_potential(const gp_lik *lik, const double *Phi, size_t mk, size_t n,
                        const double *y, const double *a, double *grad)
{
    double *f = malloc(n * sizeof *f), *g = malloc(n * sizeof *g);
    if (f == NULL || g == NULL) {
        free(f);
        free(g);
        return NAN;
    }
    cblas_dgemv(CblasColMajor, CblasTrans, (blasint)mk, (blasint)n, 1.0, Phi, (blasint)mk, a, 1,
                0.0, f, 1);
    double v = -loglik_and_g(lik, y, f, n, g, 0) + 0.5 * cblas_ddot((blasint)mk, a, 1, a, 1);
    if (grad) {
        memcpy(grad, a, mk * sizeof *a);
        cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)mk, (blasint)n, 1.0, Phi, (blasint)mk,
                    g, 1, 1.0, grad, 1);
    }
    free(f);
    free(g);
    return v;
}

/* ---- settings ---- */

static size_t auto_number(const gp_fit_request *req, const char *name, size_t fallback)
{
    double v = gp_option_number(&gp_method_pls, req, name);
    return isnan(v) || v < 1.0 ? fallback : (size_t)floor(v);
}

static int read_settings(const gp_fit_request *req, pls_settings *s, gp_error *err)
{
    const gp_method *me = &gp_method_pls;
    int gauss = req->likelihood == GP_LIK_GAUSSIAN;
    /* [D] auto = max(floor(sqrt(N)), 100): the thesis's sqrt(N) left 12-24
     * eigenfunctions on the shared classification sets and test log losses
     * of 0.20-0.59; 100 gave 0.14-0.48 (docs/methods/sparse-variational-and-pls.md §5.2). */
    size_t m_auto = (size_t)floor(sqrt((double)req->n));
    if (m_auto < LANDMARKS_AUTO_MIN)
        m_auto = LANDMARKS_AUTO_MIN;
    s->M = auto_number(req, "landmarks", m_auto > LANDMARKS_AUTO_MAX ? LANDMARKS_AUTO_MAX
                                                                      : (m_auto ? m_auto : 1));
    if (s->M > req->n)
        s->M = req->n;
    /* [D] non-gaussian 500 x 2 (thesis 1000 x 5): an ARD gradient costs
     * O(N_sub^3 + D N_sub^2), and spam (57 inputs) took minutes. */
    s->subset = auto_number(req, "subset", gauss ? 2000 : 500);
    s->repeats = auto_number(req, "repeats", gauss ? 10 : 2);
    s->J = (size_t)gp_option_number(me, req, "particles");
    s->rmode = strcmp(gp_option_string(me, req, "prior_mode"), "r") == 0;
    const char *smp = gp_option_string(me, req, "sampler");
    if (strcmp(smp, "auto") == 0)
        s->sampler = gauss ? SAMPLER_CLOSED : SAMPLER_PULA;
    else
        s->sampler = strcmp(smp, "closed_form") == 0 ? SAMPLER_CLOSED
                     : strcmp(smp, "mala") == 0      ? SAMPLER_MALA
                                                     : SAMPLER_PULA;
    if (s->sampler == SAMPLER_CLOSED && !gauss)
        return gp_error_set(err, GP_EINVAL, "options.sampler",
                            "the closed form needs the gaussian likelihood, not %s",
                            gp_likelihood_name(req->likelihood));
    s->step = gp_option_number(me, req, "step");
    s->steps = (long)gp_option_number(me, req, "steps");
    s->optimize = gp_option_number(me, req, "optimize") != 0.0;
    s->max_iterations = (int)gp_option_number(me, req, "max_iterations");
    s->tolerance = gp_option_number(me, req, "tolerance");
    s->eig_tol = gp_option_number(me, req, "eig_rel_tol");
    int concave = req->likelihood != GP_LIK_POISSON_SQ;
    s->laplace_amp = req->likelihood == GP_LIK_BERNOULLI &&
                     s->optimize && strcmp(gp_option_string(me, req, "amplitude"), "laplace") == 0;
    const char *pre = gp_option_string(me, req, "precondition");
    if (strcmp(pre, "laplace") == 0 && !concave)
        return gp_error_set(err, GP_EINVAL, "options.precondition",
                            "the Laplace preconditioner needs a log-concave likelihood, not %s",
                            gp_likelihood_name(req->likelihood));
    s->laplace_start = concave && strcmp(pre, "bound") != 0;
    s->noise_floor = gp_option_number(me, req, "noise_floor");
    const char *ss = gp_option_string(me, req, "subset_selection");
    s->subset_random = strcmp(ss, "random") == 0 || (strcmp(ss, "auto") == 0 && !gauss);
    const char *sel = gp_option_string(me, req, "landmark_selection");
    s->selection = strcmp(sel, "auto") == 0 ? (gauss ? GP_INDUCING_GREEDY : GP_INDUCING_KMEANS)
                                            : gp_inducing_selection_from_name(sel);
    return GP_OK;
}

/* Memory checked before anything is allocated, against the budget of an
 * exact fit of max_train_points points (as for the other methods): Phi_X,
 * a kernel block, the particles' f and g, and a subset fit's N_sub^2. */
static int size_guard(const gp_fit_request *req, const pls_settings *s, gp_error *err)
{
    double cap = (double)gp_fit_point_cap(req);
    double n = (double)req->n, M = (double)s->M, J = s->sampler == SAMPLER_CLOSED ? 0 : s->J;
    double sub = s->optimize ? fmin(n, (double)s->subset) : 0.0;
    double need = n * (M + (double)req->d + 3.0 * J + 4.0) + M * FEATURE_BLOCK + 6.0 * M * M +
                  4.0 * M * J + sub * sub;
    if (need > cap * cap)
        return gp_error_set(err, GP_ETOOBIG, "options.landmarks",
                            "pls with %zu landmarks and %zu particles on %zu points needs %.1f "
                            "GB of workspace, above the budget of an exact fit of "
                            "max_train_points = %.0f points (%.1f GB)",
                            s->M, s->J, req->n, need * 8e-9, cap, cap * cap * 8e-9);
    return GP_OK;
}

/* ---- A1: hyperparameters by the exact marginal likelihood on subsets ---- */

/* Indices of the sub points nearest (Euclidean, standardised) to point c;
 * ties by index, so the choice is deterministic. */
typedef struct dist_idx {
    double d;
    size_t i;
} dist_idx;

static int dist_cmp(const void *a, const void *b)
{
    const dist_idx *x = a, *y = b;
    if (x->d != y->d)
        return x->d < y->d ? -1 : 1;
    return x->i < y->i ? -1 : (x->i > y->i);
}

static int nearest_subset(const double *Xt, size_t n, size_t d, size_t c, size_t sub,
                          size_t *idx, gp_error *err)
{
    dist_idx *di = malloc(n * sizeof *di);
    if (di == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        double s = 0.0;
        for (size_t k = 0; k < d; k++) {
            double e = Xt[i * d + k] - Xt[c * d + k];
            s += e * e;
        }
        di[i].d = s;
        di[i].i = i;
    }
    qsort(di, n, sizeof *di, dist_cmp);
    for (size_t i = 0; i < sub; i++)
        idx[i] = di[i].i;
    free(di);
    return GP_OK;
}

static int size_cmp(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : (x > y);
}

/* [D] sub distinct indices uniformly (partial Fisher-Yates), increasing:
 * a subset that sees the whole input distribution (the nearest-neighbour
 * subsets of spam's heavy-tailed inputs saw constant columns). */
static int random_subset(gp_rng *rng, size_t n, size_t sub, size_t *idx, gp_error *err)
{
    size_t *perm = malloc(n * sizeof *perm);
    if (perm == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    for (size_t i = 0; i < sub; i++) {
        size_t j = i + (size_t)gp_rng_below(rng, n - i), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (size_t i = 0; i < sub; i++)
        idx[i] = perm[i];
    free(perm);
    qsort(idx, sub, sizeof *idx, size_cmp);
    return GP_OK;
}

typedef struct hyp_run {
    const gp_fit_request *req;
    const pls_settings *set;
    int max_total;
    gp_diagnostics *diag;
    double lml_sum; /* of the subset fits, for the report */
    double log_c;   /* the [D] amplitude correction (0: none) */
} hyp_run;

/* The job budget of a fit is the Langevin steps (the descriptor's
 * iterations_option), so the subset fits of A1 report iteration 0 of it: a
 * job shows them as under way, with their objective, and can be cancelled
 * during them, and the progress never runs past the budget. */
static int hyper_progress(void *ctx, int iteration, int max_iterations, double objective)
{
    (void)iteration;
    (void)max_iterations;
    const hyp_run *run = ctx;
    return run->req->progress(run->req->progress_ctx, 0, run->max_total, objective);
}

/* One subset fit on Xs, ts; x gets the free log-parameters and, last, the
 * noise's unconstrained value. It starts where the previous subset's fit left
 * the problem's kernel (gp_hyper_problem_start), the noise from its start. */
static int hyp_fit_one(hyp_run *run, gp_hyper_problem *p, const double *Xs, const double *ts,
                       size_t sub, double *x, gp_error *err)
{
    gp_hyper_problem_start(p, x);
    if (gp_hyper_problem_dim(p) == 0)
        return GP_OK;
    gp_driver_options opt;
    gp_driver_default_options(&opt);
    opt.max_iterations = run->set->max_iterations;
    opt.tolerance = run->set->tolerance;
    opt.seed = run->req->seed;
    opt.progress = run->req->progress ? hyper_progress : NULL;
    opt.progress_ctx = run;
    opt.iteration_base = 0;
    opt.max_total = run->max_total;
    opt.cancel = &run->req->cancel;
    gp_driver_result res;
    int rc = gp_hyper_problem_fit(p, Xs, sub, ts, x, &opt, &res, err);
    run->diag->iterations += res.iterations;
    run->diag->evaluations += res.evaluations;
    run->diag->converged = res.converged;
    run->lml_sum += -res.f;
    return rc;
}

/* The subset of repeat r into Xs, ts (all points when there is one fit). */
static int hyp_subset(const hyp_run *run, const double *Xt, const double *t, size_t n, size_t d,
                      size_t sub, size_t r, double *Xs, double *ts, gp_error *err)
{
    if (sub == n) {
        memcpy(Xs, Xt, n * d * sizeof *Xt);
        memcpy(ts, t, n * sizeof *t);
        return GP_OK;
    }
    gp_rng rng;
    gp_rng_derive(&rng, run->req->seed, STREAM_SUBSET + r);
    size_t c = (size_t)gp_rng_below(&rng, n), *idx = malloc(sub * sizeof *idx);
    if (idx == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    int rc = run->set->subset_random ? random_subset(&rng, n, sub, idx, err)
                                     : nearest_subset(Xt, n, d, c, sub, idx, err);
    for (size_t i = 0; rc == GP_OK && i < sub; i++) {
        memcpy(Xs + i * d, Xt + idx[i] * d, d * sizeof *Xt);
        ts[i] = t[idx[i]];
    }
    free(idx);
    return rc;
}

/* A1 (§5.2): R subset fits of the regression target t, log-parameters
 * averaged into model->kernel; *s2 gets the averaged noise. */
static int fit_hyper(hyp_run *run, gp_model *model, const double *Xt, const double *t,
                     gp_noise_param *np, double *s2, gp_error *err)
{
    size_t n = model->n_train, d = model->input_dim, sub = run->set->subset;
    size_t R = n > sub ? run->set->repeats : 1;
    if (sub > n)
        sub = n;
    gp_hyper_problem p;
    double *Xs = NULL, *ts = NULL, *x = NULL, *avg = NULL;
    int rc = gp_hyper_problem_init(&p, model->kernel, np, sub, err);
    if (rc)
        return rc;
    Xs = gp_alloc_doubles(sub * d, err);
    ts = gp_alloc_doubles(sub, err);
    x = gp_alloc_doubles(p.n_free + 1, err);
    avg = gp_alloc_doubles(p.n_free + 1, err);
    rc = Xs && ts && x && avg ? GP_OK : GP_ENOMEM;
    if (avg)
        memset(avg, 0, (p.n_free + 1) * sizeof *avg);
    for (size_t r = 0; rc == GP_OK && r < R; r++) {
        rc = hyp_subset(run, Xt, t, n, d, sub, r, Xs, ts, err);
        if (rc == GP_OK)
            rc = hyp_fit_one(run, &p, Xs, ts, sub, x, err);
        for (size_t i = 0; rc == GP_OK && i <= p.n_free; i++)
            avg[i] += x[i] / (double)R;
    }
    if (rc == GP_OK) {
        gp_hyper_problem_apply(&p, avg, model->kernel, s2);
        run->lml_sum /= (double)R;
    }
    gp_hyper_problem_free(&p);
    free(Xs);
    free(ts);
    free(x);
    free(avg);
    return rc;
}

/* ---- [D] the Laplace mode of V (as implemented, §5.2) ----
 * For a log-concave likelihood (gaussian, bernoulli, poisson with the log
 * link) V(a) = -log p(y | s Phi^T a) + |a|^2 / 2 is convex: Newton with
 * halving steps finds the mode a*, and H* = I + s^2 Phi W Phi^T (W = -d2
 * log p at a*) is the Hessian there. It serves the amplitude scale s (the
 * Laplace marginal likelihood, below), the preconditioner P = H*^{-1} and
 * the particles' start N(a*, H*^{-1}) of pula and mala (§5.2 A4 (iii)
 * generalised: the thesis's prior start and a curvature bound left the
 * chains O(1000) steps from equilibrium). poisson_sq is not log-concave
 * (P19) and keeps the bound preconditioner and the prior start. */

#define NEWTON_MAX 100
#define NEWTON_HALVINGS 40

typedef struct newton_ws {
    const gp_lik *lik;
    const double *Phi, *y;
    size_t n, mk;
    double s;              /* the feature scale */
    double *H;             /* mk x mk lower factor of H at the last point evaluated */
    double *f, *d1, *S;    /* n, n, mk x n */
    double *grad, *step, *at; /* mk each */
} newton_ws;

static void newton_free(newton_ws *w)
{
    free(w->H);
    free(w->f);
    free(w->d1);
    free(w->S);
    free(w->grad);
    free(w->step);
    free(w->at);
}

static int newton_alloc(newton_ws *w, const gp_lik *lik, const double *Phi, const double *y,
                        size_t n, size_t mk, gp_error *err)
{
    memset(w, 0, sizeof *w);
    size_t cnt = 0;
    int rc = gp_checked_size(mk, n, &cnt, err);
    if (rc)
        return rc;
    *w = (newton_ws){lik, Phi, y, n, mk, 1.0, gp_alloc_doubles(mk * mk, err),
                     gp_alloc_doubles(n, err), gp_alloc_doubles(n, err), gp_alloc_doubles(cnt, err),
                     gp_alloc_doubles(mk, err), gp_alloc_doubles(mk, err),
                     gp_alloc_doubles(mk, err)};
    if (w->H && w->f && w->d1 && w->S && w->grad && w->step && w->at)
        return GP_OK;
    newton_free(w);
    return GP_ENOMEM;
}

/* V at a (f = s Phi^T a kept in w->f, d log p / df in w->d1). */
static double newton_value(newton_ws *w, const double *a)
{
    blasint mk = (blasint)w->mk, n = (blasint)w->n;
    cblas_dgemv(CblasColMajor, CblasTrans, mk, n, w->s, w->Phi, mk, a, 1, 0.0, w->f, 1);
    double ll = gp_lik_log_density_sum(w->lik, w->y, w->f, w->n, w->d1);
    return -ll + 0.5 * cblas_ddot(mk, a, 1, a, 1);
}

/* At a (after newton_value): grad V, H = I + s^2 Phi W Phi^T factored. */
static int newton_hessian(newton_ws *w, const double *a)
{
    size_t mk = w->mk;
    memcpy(w->grad, a, mk * sizeof *a);
    cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)mk, (blasint)w->n, -w->s, w->Phi,
                (blasint)mk, w->d1, 1, 1.0, w->grad, 1);
    for (size_t i = 0; i < w->n; i++) {
        double d2;
        gp_lik_derivatives(w->lik, w->y[i], w->f[i], NULL, &d2);
        double r = w->s * sqrt(d2 < 0.0 ? -d2 : 0.0);
        for (size_t m = 0; m < mk; m++)
            w->S[i * mk + m] = w->Phi[i * mk + m] * r;
    }
    return chol_identity_plus_gram(w->S, mk, w->n, 1.0, w->H);
}

/* Newton from a (mk, updated in place) to the mode; *V gets V(a*), w->H the
 * factor of H* (upper half not zeroed). Stops when the Newton decrement
 * grad^T H^{-1} grad falls below 1e-18 (1 + |V|) or no halving lowers V. */
static int newton_mode(newton_ws *w, double *a, double *V, gp_error *err)
{
    size_t mk = w->mk;
    double v = newton_value(w, a);
    for (int it = 0; isfinite(v); it++) {
        if (newton_hessian(w, a) != GP_OK)
            break;
        memcpy(w->step, w->grad, mk * sizeof *a);
        gp_chol_solve(w->H, mk, mk, w->step, 1, mk);
        double dec = cblas_ddot((blasint)mk, w->grad, 1, w->step, 1);
        if (dec < 1e-18 * (1.0 + fabs(v)) || it == NEWTON_MAX) {
            *V = v;
            return GP_OK;
        }
        double t = 1.0, vn = INFINITY;
        for (int h = 0; h < NEWTON_HALVINGS; h++, t *= 0.5) {
            for (size_t m = 0; m < mk; m++)
                w->at[m] = a[m] - t * w->step[m];
            vn = newton_value(w, w->at);
            if (vn <= v)
                break;
        }
        if (!(vn <= v)) { /* round-off floor: the mode to working precision */
            newton_value(w, a);
            *V = v;
            return newton_hessian(w, a) == GP_OK ? GP_OK
                                                 : gp_error_set(err, GP_ENOTPD, NULL,
                                                                "the Laplace Hessian is not "
                                                                "positive definite");
        }
        memcpy(a, w->at, mk * sizeof *a);
        v = vn;
    }
    return gp_error_set(err, GP_ENOTPD, NULL, "the Newton iteration for the Laplace mode failed");
}

double gp_pls_laplace_mode(const gp_lik *lik, const double *Phi, size_t mk, size_t n,
                           const double *y, double *a, double *H)
{
    newton_ws w;
    double V = NAN;
    if (newton_alloc(&w, lik, Phi, y, n, mk, NULL) != GP_OK)
        return NAN;
    if (newton_mode(&w, a, &V, NULL) == GP_OK && H != NULL)
        memcpy(H, w.H, mk * mk * sizeof *H);
    else if (H != NULL)
        V = NAN;
    newton_free(&w);
    return V;
}

/* The Laplace log marginal likelihood at feature scale s (warm start a):
 * -V(a*) - log det(H*) / 2. */
static double laplace_lml(newton_ws *w, double s, double *a)
{
    double V = NAN;
    w->s = s;
    if (newton_mode(w, a, &V, NULL) != GP_OK)
        return NAN;
    return -V - 0.5 * gp_chol_logdet(w->H, w->mk, w->mk);
}

/* [D] The amplitude (as implemented, §5.2; P20): the A1 regression on the
 * 0/1 labels gives an amplitude for a function over [0, 1], too small for a
 * logit (poisson keeps its A1 amplitude: log(y + 1/2) is on the log-rate
 * scale already). The kernel's variance is multiplied by
 * the c maximising the Laplace marginal likelihood of the model itself on
 * the training features (golden section over log c in [-2, 8]; the features
 * scale as c^(1/2) in k-mode and c in r-mode). a gets the mode at that c. */
static int laplace_amplitude(newton_ws *w, int rmode, double *a, double *log_c)
{
    const double g = 0.5 * (sqrt(5.0) - 1.0), p = rmode ? 1.0 : 0.5;
    double lo = -2.0, hi = 8.0, x1 = hi - g * (hi - lo), x2 = lo + g * (hi - lo);
    memset(a, 0, w->mk * sizeof *a);
    double f1 = laplace_lml(w, exp(p * x1), a), f2 = laplace_lml(w, exp(p * x2), a);
    while (hi - lo > 0.02) { /* maximise; NAN loses */
        if (!(f1 >= f2)) {
            lo = x1;
            x1 = x2;
            f1 = f2;
            x2 = lo + g * (hi - lo);
            f2 = laplace_lml(w, exp(p * x2), a);
        } else {
            hi = x2;
            x2 = x1;
            f2 = f1;
            x1 = hi - g * (hi - lo);
            f1 = laplace_lml(w, exp(p * x1), a);
        }
    }
    *log_c = isfinite(f1) || isfinite(f2) ? 0.5 * (lo + hi) : 0.0;
    w->s = 1.0;
    return GP_OK;
}

/* ---- A2-A3: landmarks, eigenbasis, features ---- */

/* Eigenpairs of K_ZZ / M, descending, kept while lambda > tol lambda_1 and
 * > 0 (pitfall P25): V (M x M on entry) keeps its first *mk columns. */
static int eigenbasis(const gp_kernel *k, const double *Z, size_t M, double tol, double *V,
                      double *lam, size_t *mk, gp_error *err)
{
    gp_kernel_gram(k, Z, M, V, M);
    for (size_t i = 0; i < M * M; i++)
        V[i] /= (double)M;
    double *w = gp_alloc_doubles(M, err), *tmp = gp_alloc_doubles(M, err);
    if (w == NULL || tmp == NULL) {
        free(w);
        free(tmp);
        return GP_ENOMEM;
    }
    lapack_int info = LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'L', (lapack_int)M, V, (lapack_int)M, w);
    if (info != 0) {
        free(w);
        free(tmp);
        return gp_error_set(err, GP_ENOTPD, NULL, "the eigendecomposition of K_ZZ failed (%d)",
                            (int)info);
    }
    for (size_t i = 0; i < M / 2; i++) { /* ascending -> descending */
        size_t j = M - 1 - i;
        double t = w[i];
        w[i] = w[j];
        w[j] = t;
        memcpy(tmp, V + i * M, M * sizeof *V);
        memcpy(V + i * M, V + j * M, M * sizeof *V);
        memcpy(V + j * M, tmp, M * sizeof *V);
    }
    size_t kept = 0;
    while (kept < M && w[kept] > 0.0 && w[kept] > tol * w[0])
        kept++;
    memcpy(lam, w, kept * sizeof *w);
    free(w);
    free(tmp);
    if (kept == 0)
        return gp_error_set(err, GP_ENOTPD, NULL, "K_ZZ has no positive eigenvalue");
    *mk = kept;
    return GP_OK;
}

/* Phi (mk x b) = B^T k(Z, X) for b points X (d x b); K (M x b) gets k(Z, X).
 * k is the kernel im->Zp was prepared with. */
static void features(const gp_kernel *k, const pls_impl *im, const double *X, size_t b,
                     double *K, double *Phi)
{
    gp_kernel_cross_points(k, im->Zp, X, b, K, im->M);
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (blasint)im->mk, (blasint)b,
                (blasint)im->M, 1.0, im->B, (blasint)im->M, K, (blasint)im->M, 0.0, Phi,
                (blasint)im->mk);
}

/* Phi_X (mk x n) by blocks of points. */
static int train_features(const gp_kernel *k, const pls_impl *im, const double *Xt, size_t n,
                          double *Phi, gp_error *err)
{
    size_t blk = n < FEATURE_BLOCK ? n : FEATURE_BLOCK;
    double *K = gp_alloc_doubles(im->M * blk, err);
    if (K == NULL)
        return GP_ENOMEM;
    for (size_t s = 0; s < n; s += blk) {
        size_t b = n - s < blk ? n - s : blk;
        features(k, im, Xt + s * im->d, b, K, Phi + s * im->mk);
    }
    free(K);
    return GP_OK;
}

/* ---- A4 (i): the gaussian closed form ---- */

static int closed_form(pls_impl *im, const double *Phi, size_t n, const double *y, double s2,
                       gp_error *err)
{
    size_t mk = im->mk;
    if (chol_identity_plus_gram(Phi, mk, n, 1.0 / s2, im->R) != GP_OK)
        return gp_error_set(err, GP_ENOTPD, NULL, "I + Phi Phi^T / s2 is not positive definite");
    for (size_t j = 0; j < mk; j++) /* zero the dead upper half: exported packed */
        for (size_t i = 0; i < j; i++)
            im->R[j * mk + i] = 0.0;
    cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)mk, (blasint)n, 1.0 / s2, Phi, (blasint)mk,
                y, 1, 0.0, im->mu, 1);
    gp_chol_solve(im->R, mk, mk, im->mu, 1, mk);
    return GP_OK;
}

/* ---- A4 (iii): the particle samplers ---- */

typedef struct chain {
    const gp_lik *lik;
    const double *Phi, *y, *w; /* w: per-point curvature of the preconditioner (n) */
    size_t n, mk, J;
    int clip;
    double *Rb;          /* mk x mk lower: chol(I + Phi diag(w) Phi^T) */
    double *A, *Ap;      /* mk x J: particles, proposals (mala) */
    double *P, *Pp;      /* mk x J: Rb^{-1} grad V at A, at Ap */
    double *F;           /* n x J: f, then g */
    double *Xi, *T;      /* mk x J: normals, the step */
    double *E, *Ep;      /* J: energies */
    double *mode;        /* mk: the Laplace start's centre; NULL: prior draws */
    gp_rng *rng;         /* J streams */
    long accepted, proposed;
} chain;

static void chain_free(chain *c)
{
    free(c->Rb);
    free(c->A);
    free(c->Ap);
    free(c->P);
    free(c->Pp);
    free(c->F);
    free(c->Xi);
    free(c->T);
    free(c->E);
    free(c->Ep);
    free(c->mode);
    free(c->rng);
}

static int chain_alloc(chain *c, size_t n, size_t mk, size_t J, int mala, gp_error *err)
{
    size_t nJ = 0;
    int rc = gp_checked_size(n, J, &nJ, err);
    if (rc)
        return rc;
    c->n = n;
    c->mk = mk;
    c->J = J;
    c->Rb = gp_alloc_doubles(mk * mk, err);
    c->A = gp_alloc_doubles(mk * J, err);
    c->P = gp_alloc_doubles(mk * J, err);
    c->F = gp_alloc_doubles(nJ, err);
    c->Xi = gp_alloc_doubles(mk * J, err);
    c->T = gp_alloc_doubles(mk * J, err);
    c->E = gp_alloc_doubles(J, err);
    c->rng = malloc(J * sizeof *c->rng);
    int ok = c->Rb && c->A && c->P && c->F && c->Xi && c->T && c->E && c->rng;
    if (ok && mala) {
        c->Ap = gp_alloc_doubles(mk * J, err);
        c->Pp = gp_alloc_doubles(mk * J, err);
        c->Ep = gp_alloc_doubles(J, err);
        ok = c->Ap && c->Pp && c->Ep;
    }
    if (!ok)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory for %zu particles", (size_t)J);
    return GP_OK;
}

/* Per-point curvature of -log p for the preconditioner (§5.2 A4 (iii)): the
 * likelihood's bound where it has one (gaussian 1/s2, bernoulli 1/4). The
 * Poisson links have none ([D]): the curvature at the posterior mode is
 * about the count there, so log link y + 1/2 (the rate's curvature exp(f)
 * at f = log(y + 1/2), the transform of A1), square link 4 where y > 0 (2 y
 * / f^2 + 2 at f^2 = y) and 2 at y = 0 (the thesis's constant). */
static void precond_weights(const gp_lik *lik, const double *y, size_t n, double *w)
{
    double bound = gp_lik_curvature_bound(lik);
    for (size_t i = 0; i < n; i++) {
        if (isfinite(bound))
            w[i] = bound;
        else if (lik->type == GP_LIK_POISSON)
            w[i] = y[i] + 0.5;
        else
            w[i] = y[i] > 0.0 ? 4.0 : 2.0;
    }
}

static int chain_precondition(chain *c, gp_error *err)
{
    size_t mk = c->mk, n = c->n;
    double *S = gp_alloc_doubles(mk * n, err);
    if (S == NULL)
        return GP_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        double s = sqrt(c->w[i]);
        for (size_t m = 0; m < mk; m++)
            S[i * mk + m] = c->Phi[i * mk + m] * s;
    }
    int rc = chol_identity_plus_gram(S, mk, n, 1.0, c->Rb);
    free(S);
    if (rc != GP_OK)
        return gp_error_set(err, GP_ENOTPD, NULL, "the preconditioner is not positive definite");
    return GP_OK;
}

typedef struct lik_task {
    chain *c;
    const double *A;
    double *E;
} lik_task;

#define LIK_TASKS 16

/* Task t: columns t, t + LIK_TASKS, ...: f -> g in place and the energies
 * of those particles. Each column depends on nothing else, so the split over
 * threads changes no result. */
static void lik_columns(void *ctx, size_t task)
{
    lik_task *t = ctx;
    chain *c = t->c;
    double *g = malloc(c->n * sizeof *g);
    for (size_t j = task; j < c->J; j += LIK_TASKS) {
        if (g == NULL) {
            t->E[j] = NAN;
            continue;
        }
        double *col = c->F + j * c->n;
        double ll = loglik_and_g(c->lik, c->y, col, c->n, g, c->clip);
        memcpy(col, g, c->n * sizeof *g);
        const double *a = t->A + j * c->mk;
        t->E[j] = -ll + 0.5 * cblas_ddot((blasint)c->mk, a, 1, a, 1);
    }
    free(g);
}

/* P = Rb^{-1} grad V(A) and E = V(A) for all particles: two dgemm and one
 * dtrsm over the J columns at once (level 3). */
static void chain_gradient(chain *c, const double *A, double *P, double *E)
{
    blasint mk = (blasint)c->mk, n = (blasint)c->n, J = (blasint)c->J;
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, n, J, mk, 1.0, c->Phi, mk, A, mk, 0.0,
                c->F, n);
    lik_task t = {c, A, E};
    gp_parallel_for(c->J < LIK_TASKS ? c->J : LIK_TASKS, lik_columns, &t);
    memcpy(P, A, c->mk * c->J * sizeof *A);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, mk, J, n, 1.0, c->Phi, mk, c->F, n,
                1.0, P, mk);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, mk, J, 1.0,
                c->Rb, mk, P, mk);
}

static void chain_normals(chain *c)
{
    for (size_t j = 0; j < c->J; j++)
        gp_rng_normal_fill(&c->rng[j], c->Xi + j * c->mk, c->mk);
}

/* out = base + Rb^{-T} (sqrt(2 eta) Xi - eta P): the preconditioned step,
 * A <- A - eta Hb^{-1} grad V + sqrt(2 eta) Hb^{-1/2} xi. Xi is overwritten
 * with Rb^T (out - base). */
static void chain_move(chain *c, double eta, const double *base, double *out)
{
    size_t cnt = c->mk * c->J;
    double s = sqrt(2.0 * eta);
    for (size_t i = 0; i < cnt; i++)
        c->Xi[i] = s * c->Xi[i] - eta * c->P[i];
    memcpy(c->T, c->Xi, cnt * sizeof *c->T);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, (blasint)c->mk,
                (blasint)c->J, 1.0, c->Rb, (blasint)c->mk, c->T, (blasint)c->mk);
    for (size_t i = 0; i < cnt; i++)
        out[i] = base[i] + c->T[i];
}

static void pula_step(chain *c, double eta)
{
    chain_gradient(c, c->A, c->P, c->E);
    chain_normals(c);
    chain_move(c, eta, c->A, c->A);
}

/* MALA: with D = Rb^T (a' - a) (= Xi after chain_move) the proposal log
 * densities are -|D + eta P(a)|^2 / (4 eta) forward and -|-D + eta P(a')|^2
 * / (4 eta) backward (Hb-metric, the same normaliser both ways). P and E
 * hold the current particles' values on entry and exit. */
static void mala_step(chain *c, double eta)
{
    size_t mk = c->mk;
    chain_normals(c);
    chain_move(c, eta, c->A, c->Ap);
    chain_gradient(c, c->Ap, c->Pp, c->Ep);
    for (size_t j = 0; j < c->J; j++) {
        const double *D = c->Xi + j * mk, *p = c->P + j * mk, *pp = c->Pp + j * mk;
        double fw = 0.0, bw = 0.0;
        for (size_t m = 0; m < mk; m++) {
            double a = D[m] + eta * p[m], b = -D[m] + eta * pp[m];
            fw += a * a;
            bw += b * b;
        }
        double log_acc = c->E[j] - c->Ep[j] - (bw - fw) / (4.0 * eta);
        double u = gp_rng_uniform_pos(&c->rng[j]);
        c->proposed++;
        if (isfinite(c->Ep[j]) && log(u) < log_acc) {
            c->accepted++;
            memcpy(c->A + j * mk, c->Ap + j * mk, mk * sizeof *c->A);
            memcpy(c->P + j * mk, pp, mk * sizeof *c->P);
            c->E[j] = c->Ep[j];
        }
    }
}

static double mean_of(const double *x, size_t n)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += x[i];
    return s / (double)n;
}

/* [D] The Laplace preconditioner and start (see newton_mode): Rb = chol(H*),
 * c->mode = a*, Newton from a = 0. */
static int laplace_precondition(chain *c, gp_error *err)
{
    newton_ws w;
    c->mode = calloc(c->mk, sizeof *c->mode);
    if (c->mode == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    int rc = newton_alloc(&w, c->lik, c->Phi, c->y, c->n, c->mk, err);
    double V;
    if (rc == GP_OK)
        rc = newton_mode(&w, c->mode, &V, err);
    if (rc == GP_OK)
        memcpy(c->Rb, w.H, c->mk * c->mk * sizeof *c->Rb);
    newton_free(&w);
    return rc;
}

typedef struct sampler_out {
    double energy;     /* mean final energy */
    double acceptance; /* mala; NAN otherwise */
} sampler_out;

/* Start draws (prior N(0, I), or N(a*, H*^{-1}) = a* + Rb^{-T} xi for the
 * Laplace start), then K steps; progress after every step. */
static int run_chains(chain *c, const pls_settings *set, const gp_fit_request *req,
                      int iteration_base, int max_total, sampler_out *so, gp_error *err)
{
    int mala = set->sampler == SAMPLER_MALA;
    for (size_t j = 0; j < c->J; j++) {
        gp_rng_derive(&c->rng[j], req->seed, STREAM_PARTICLE + j);
        gp_rng_normal_fill(&c->rng[j], c->A + j * c->mk, c->mk);
    }
    if (c->mode) {
        cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit,
                    (blasint)c->mk, (blasint)c->J, 1.0, c->Rb, (blasint)c->mk, c->A,
                    (blasint)c->mk);
        for (size_t j = 0; j < c->J; j++)
            cblas_daxpy((blasint)c->mk, 1.0, c->mode, 1, c->A + j * c->mk, 1);
    }
    if (mala)
        chain_gradient(c, c->A, c->P, c->E);
    for (long i = 0; i < set->steps; i++) {
        if (mala)
            mala_step(c, set->step);
        else
            pula_step(c, set->step);
        double e = mean_of(c->E, c->J);
        if (gp_cancel_requested(&req->cancel) ||
            (req->progress &&
             req->progress(req->progress_ctx, iteration_base + (int)i + 1, max_total, -e)))
            return gp_error_set(err, GP_ECANCELLED, NULL, "the fit was cancelled");
    }
    chain_gradient(c, c->A, c->P, c->E); /* the final particles' energies */
    so->energy = mean_of(c->E, c->J);
    so->acceptance = mala ? (c->proposed ? (double)c->accepted / (double)c->proposed : NAN) : NAN;
    if (!isfinite(so->energy))
        return gp_error_set(err, GP_ENOTPD, "options.step",
                            "the Langevin chains diverged (mean energy %g): use a smaller step",
                            so->energy);
    return GP_OK;
}

static int sample_particles(pls_impl *im, const gp_lik *lik, const double *Phi, size_t n,
                            const double *y, const pls_settings *set, const gp_fit_request *req,
                            int iteration_base, int max_total, sampler_out *so, gp_error *err)
{
    chain c;
    memset(&c, 0, sizeof c);
    double *w = gp_alloc_doubles(n, err);
    int rc = w ? chain_alloc(&c, n, im->mk, im->J, set->sampler == SAMPLER_MALA, err) : GP_ENOMEM;
    if (rc == GP_OK) {
        c.lik = lik;
        c.Phi = Phi;
        c.y = y;
        c.w = w;
        c.clip = 1;
        if (set->laplace_start) {
            rc = laplace_precondition(&c, err);
        } else {
            precond_weights(lik, y, n, w);
            rc = chain_precondition(&c, err);
        }
    }
    if (rc == GP_OK)
        rc = run_chains(&c, set, req, iteration_base, max_total, so, err);
    if (rc == GP_OK)
        memcpy(im->A, c.A, im->mk * im->J * sizeof *im->A);
    chain_free(&c);
    free(w);
    return rc;
}

/* ---- the fit ---- */

/* The regression target of A1 (§5.2): gaussian y (working units); bernoulli
 * the 0/1 labels (thesis, P20); poisson_sq sqrt(y) ([D], §5.2 A1); poisson
 * log(y + 1/2) ([D]: the log link's f at rate ~ y, finite at y = 0). */
static const char *hyper_target(gp_likelihood l, const double *y, size_t n, double *t)
{
    for (size_t i = 0; i < n; i++)
        t[i] = l == GP_LIK_POISSON_SQ ? sqrt(y[i])
               : l == GP_LIK_POISSON  ? log(y[i] + 0.5)
                                      : y[i];
    return l == GP_LIK_POISSON_SQ ? "sqrt(y)"
           : l == GP_LIK_POISSON  ? "log(y + 1/2)"
           : l == GP_LIK_BERNOULLI ? "0/1 labels"
                                  : "y";
}

typedef struct fit_data {
    double *Xt, *y, *t, *Phi;
    size_t n, d;
    uint64_t seed; /* of the landmark selection (kmeans, random) */
} fit_data;

static void data_free(fit_data *D)
{
    free(D->Xt);
    free(D->y);
    free(D->t);
    free(D->Phi);
}

static int data_init(fit_data *D, gp_model *model, const gp_fit_request *req, gp_error *err)
{
    memset(D, 0, sizeof *D);
    D->n = req->n;
    D->d = req->d;
    D->seed = req->seed;
    int rc = gp_model_points(model, req->X, req->n, &D->Xt, err);
    if (rc)
        return rc;
    D->y = gp_alloc_doubles(req->n, err);
    D->t = gp_alloc_doubles(req->n, err);
    if (D->y == NULL || D->t == NULL)
        return GP_ENOMEM;
    if (model->likelihood == GP_LIK_GAUSSIAN)
        gp_model_working_targets(model, req->y, req->n, D->y);
    else
        memcpy(D->y, req->y, req->n * sizeof *D->y);
    return GP_OK;
}

/* Noise of the A1 regression: the gaussian model's own (request fields);
 * for the other likelihoods a learned nuisance of the transformed target,
 * at least noise_floor times its variance ([D], as implemented §5.2: 0/1
 * labels are exactly interpolable, and breast_wisconsin's fit went to noise
 * 3e-9 with lengthscales 1e-28 and 1e29). */
static void hyper_noise_param(const gp_fit_request *req, const pls_settings *set,
                              const fit_data *D, gp_noise_param *np)
{
    gp_fit_request r = *req;
    if (req->likelihood != GP_LIK_GAUSSIAN) {
        r.noise_given = 0;
        r.noise_fixed = 0;
    }
    gp_noise_param_init(np, &r, D->t, D->n);
    if (req->likelihood == GP_LIK_GAUSSIAN)
        return;
    double m = mean_of(D->t, D->n), v = 0.0;
    for (size_t i = 0; i < D->n; i++)
        v += (D->t[i] - m) * (D->t[i] - m) / (double)D->n;
    if (set->noise_floor * v > np->floor)
        np->floor = set->noise_floor * v;
    if (np->start < 2.0 * np->floor)
        np->start = 2.0 * np->floor;
}

/* [D] k-means centres moved to their nearest training inputs, distinct
 * (each centre in turn takes the nearest input not taken yet). Landmarks
 * that are data points keep the values of discrete inputs, on which A1 can
 * fit a vanishing lengthscale (doctor_visits: 1e-25 on a count column): a
 * centre between two such values is uncorrelated with every point, and the
 * basis collapsed to the prior on whole test splits (test log likelihood
 * -1.05 against -0.61). X and Z are point-major (d x n, d x m). */
static int snap_to_data(const double *X, size_t n, size_t d, double *Z, size_t m,
                        gp_error *err)
{
    unsigned char *taken = calloc(n ? n : 1, 1);
    if (taken == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t j = 0; j < m; j++) {
        size_t best = n;
        double best_d = INFINITY;
        for (size_t i = 0; i < n; i++) {
            if (taken[i])
                continue;
            double s = 0.0;
            for (size_t k = 0; k < d; k++) {
                double t = X[i * d + k] - Z[j * d + k];
                s += t * t;
            }
            if (s < best_d) {
                best_d = s;
                best = i;
            }
        }
        if (best == n)
            break; /* m <= n: not reached */
        taken[best] = 1;
        memcpy(Z + j * d, X + best * d, d * sizeof *Z);
    }
    free(taken);
    return GP_OK;
}

/* A2-A3: landmarks (greedy under the fitted kernel, or k-means snapped to
 * the data / random, seeded by the fit seed), the eigenbasis, Phi_X. */
static int build_basis(gp_model *model, const pls_settings *set, fit_data *D, pls_impl **out,
                       gp_error *err)
{
    uint64_t seed = D->seed;
    size_t M = set->M, m = 0, d = D->d, mk = 0;
    double *Z = gp_alloc_doubles(d * M, err), *V = gp_alloc_doubles(M * M, err),
           *lam = gp_alloc_doubles(M, err);
    int rc = Z && V && lam ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK)
        rc = gp_inducing_select((gp_inducing_selection)set->selection, model->kernel, D->Xt,
                                D->n, d, M, seed, Z, &m, err);
    if (rc == GP_OK && set->selection == GP_INDUCING_KMEANS)
        rc = snap_to_data(D->Xt, D->n, d, Z, m, err);
    if (rc == GP_OK)
        rc = eigenbasis(model->kernel, Z, m, set->eig_tol, V, lam, &mk, err);
    pls_impl *im = NULL;
    if (rc == GP_OK) {
        im = impl_alloc(d, m, mk, set->sampler == SAMPLER_CLOSED ? 0 : set->J, err);
        rc = im ? GP_OK : GP_ENOMEM;
    }
    if (rc == GP_OK) {
        im->rmode = set->rmode;
        memcpy(im->Z, Z, d * m * sizeof *Z);
        memcpy(im->V, V, m * mk * sizeof *V);
        memcpy(im->lam, lam, mk * sizeof *lam);
        rc = impl_derive(im, model->kernel, err);
    }
    if (rc == GP_OK) {
        size_t cnt = 0;
        rc = gp_checked_size(mk, D->n, &cnt, err);
        if (rc == GP_OK && (D->Phi = gp_alloc_doubles(cnt, err)) == NULL)
            rc = GP_ENOMEM;
        if (rc == GP_OK)
            rc = train_features(model->kernel, im, D->Xt, D->n, D->Phi, err);
    }
    free(Z);
    free(V);
    free(lam);
    if (rc) {
        impl_free(im);
        return rc;
    }
    *out = im;
    return GP_OK;
}

/* The [D] amplitude (laplace_amplitude) on the first basis, then landmarks,
 * eigenbasis and features again under the rescaled kernel (the greedy
 * order is scale-free; the features are rebuilt rather than rescaled so a
 * refit from the stored kernel gives the same numbers). */
static int amplitude_rebuild(gp_model *model, const pls_settings *set, const gp_lik *lik,
                             fit_data *D, pls_impl **im, double *log_c, gp_error *err)
{
    newton_ws w;
    double *a = gp_alloc_doubles((*im)->mk, err);
    int rc = a ? newton_alloc(&w, lik, D->Phi, D->y, D->n, (*im)->mk, err) : GP_ENOMEM;
    if (rc == GP_OK) {
        rc = laplace_amplitude(&w, (*im)->rmode, a, log_c);
        newton_free(&w);
    }
    free(a);
    if (rc)
        return rc;
    model->kernel->log_variance += *log_c;
    impl_free(*im);
    *im = NULL;
    free(D->Phi);
    D->Phi = NULL;
    return build_basis(model, set, D, im, err);
}

static void report(gp_model *model, const pls_settings *set, const pls_impl *im,
                   const hyp_run *run, const sampler_out *so, const char *target, double hs2)
{
    gp_model_info_number(model, "landmarks", (double)im->M);
    gp_model_info_number(model, "eigenpairs", (double)im->mk);
    gp_model_info_string(model, "sampler", sampler_names[set->sampler]);
    gp_model_info_string(model, "prior_mode", im->rmode ? "r" : "k");
    if (im->J) {
        gp_model_info_number(model, "particles", (double)im->J);
        gp_model_info_number(model, "steps", (double)set->steps);
        gp_model_info_string(model, "preconditioner", set->laplace_start ? "laplace" : "bound");
        gp_model_info_number(model, "final_mean_energy", so->energy);
        if (!isnan(so->acceptance))
            gp_model_info_number(model, "acceptance_rate", so->acceptance);
    }
    if (set->optimize) {
        size_t R = model->n_train > set->subset ? set->repeats : 1;
        gp_model_info_number(model, "hyper_subset",
                             (double)(set->subset < model->n_train ? set->subset
                                                                   : model->n_train));
        gp_model_info_number(model, "hyper_repeats", (double)R);
        gp_model_info_number(model, "hyper_lml", run->lml_sum);
    }
    gp_model_info_string(model, "hyper_target", target);
    if (model->likelihood != GP_LIK_GAUSSIAN)
        gp_model_info_number(model, "hyper_noise", hs2);
    if (set->laplace_amp)
        gp_model_info_number(model, "amplitude_scale", exp(run->log_c));
}

/* The energy of the closed form, E_q V(a) = V(mu) + mk / 2 for q = N(mu, H^{-1})
 * (tr(H^{-1} H) = mk), so the objective means the same for every sampler. */
static double closed_energy(const pls_impl *im, const fit_data *D, double s2)
{
    gp_lik lik = {GP_LIK_GAUSSIAN, s2};
    return gp_pls_potential(&lik, D->Phi, im->mk, D->n, D->y, im->mu, NULL) +
           0.5 * (double)im->mk;
}

static int fit_all(gp_model *model, const gp_fit_request *req, const pls_settings *set,
                   fit_data *D, pls_impl **out, gp_error *err)
{
    const char *target = hyper_target(model->likelihood, D->y, D->n, D->t);
    gp_noise_param np;
    hyper_noise_param(req, set, D, &np);
    /* gp_method_max_iterations: the steps option, whatever the sampler */
    long budget = set->steps;
    hyp_run run = {req, set, budget > 2000000000L ? 2000000000 : (int)budget, &model->diag, 0.0,
                   0.0};
    double s2 = np.start;
    int rc = set->optimize ? fit_hyper(&run, model, D->Xt, D->t, &np, &s2, err) : GP_OK;
    if (rc)
        return rc;
    gp_lik lik = {model->likelihood, s2};
    if (model->likelihood == GP_LIK_GAUSSIAN)
        model->noise_variance = s2;
    pls_impl *im = NULL;
    rc = build_basis(model, set, D, &im, err);
    if (rc == GP_OK && set->laplace_amp)
        rc = amplitude_rebuild(model, set, &lik, D, &im, &run.log_c, err);
    sampler_out so = {NAN, NAN};
    if (rc == GP_OK && im->J == 0) {
        rc = closed_form(im, D->Phi, D->n, D->y, s2, err);
        so.energy = rc == GP_OK ? closed_energy(im, D, s2) : NAN;
    } else if (rc == GP_OK) {
        rc = sample_particles(im, &lik, D->Phi, D->n, D->y, set, req, 0, run.max_total, &so,
                              err);
    }
    if (rc) {
        impl_free(im);
        return rc;
    }
    double offset = model->likelihood == GP_LIK_GAUSSIAN ? -(double)D->n * log(model->y_scale)
                                                         : 0.0;
    model->diag.objective = -so.energy + offset;
    report(model, set, im, &run, &so, target, s2);
    *out = im;
    return GP_OK;
}

static int pls_fit(const gp_fit_request *req, gp_model **out, gp_error *err)
{
    pls_settings set;
    memset(&set, 0, sizeof set);
    int rc = read_settings(req, &set, err);
    if (rc == GP_OK)
        rc = size_guard(req, &set, err);
    gp_model *model = NULL;
    if (rc == GP_OK)
        rc = gp_model_new(&gp_method_pls, req, &model, err);
    if (rc)
        return rc;
    model->likelihood = req->likelihood;
    if (req->likelihood != GP_LIK_GAUSSIAN) { /* labels are never standardised */
        model->y_mean = 0.0;
        model->y_scale = 1.0;
        model->noise_variance = 0.0;
    }
    fit_data D;
    pls_impl *im = NULL;
    rc = data_init(&D, model, req, err);
    if (rc == GP_OK)
        rc = fit_all(model, req, &set, &D, &im, err);
    data_free(&D);
    if (rc) {
        gp_model_free(model);
        return rc;
    }
    model->impl = im;
    *out = model;
    return GP_OK;
}

/* ---- A5: prediction ---- */

/* k -= V t for one point (V M x mk, t mk): column by column in order, so
 * the point's bits are its own (ISO C: no contraction into fma). */
static void subtract_projection(const double *V, size_t M, size_t mk, const double *t, double *k)
{
    for (size_t j = 0; j < mk; j++) {
        const double *v = V + j * M;
        double tj = t[j];
        for (size_t r = 0; r < M; r++)
            k[r] -= v[r] * tj;
    }
}

/* Residual covariance (§5.2 A5) of the b points: res (b) its clamped
 * diagonal; S (b x b, may be NULL) the full matrix with that diagonal.
 * K holds k(Z, X) and is overwritten (r-mode).
 * A point's squared norms are gp_dot, not cblas_ddot: OpenBLAS's SSE2 ddot
 * (the Prescott kernels, what 0.3.21 falls back to on CPUs it does not know)
 * peels one term when a vector is not 16-byte aligned, so the bits of column
 * i of a block (offset i * mk) depended on i's parity, i.e. on the other
 * points of the call (gp_model_predict_batch, core/model/model.h).
 * S, asked with a full covariance only, is BLAS's; its diagonal is res. */
static void residual(const gp_kernel *k, const pls_impl *im, const double *X, size_t b,
                     double *K, const double *Phi, double *res, double *S, double *tmp)
{
    size_t M = im->M, mk = im->mk;
    if (im->rmode) { /* (1/M) |(I - V V^T) k_Z(x)|^2, point by point (see point_means) */
        gp_dot_columns(im->V, M, mk, K, M, b, M, tmp, mk);
        for (size_t i = 0; i < b; i++)
            subtract_projection(im->V, M, mk, tmp + i * mk, K + i * M);
        for (size_t i = 0; i < b; i++)
            res[i] = gp_dot(K + i * M, K + i * M, M) / (double)M;
        if (S)
            cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)b, (blasint)M,
                        1.0 / (double)M, K, (blasint)M, 0.0, S, (blasint)b);
    } else { /* k(x, x) - |phi(x)|^2 */
        for (size_t i = 0; i < b; i++) {
            const double *phi = Phi + i * mk;
            double r = gp_kernel_diag(k, X + i * im->d) - gp_dot(phi, phi, mk);
            res[i] = r > 0.0 ? r : 0.0;
        }
        if (S) {
            gp_kernel_gram(k, X, b, S, b);
            cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)b, (blasint)mk, -1.0,
                        Phi, (blasint)mk, 1.0, S, (blasint)b);
        }
    }
    if (S) {
        for (size_t i = 0; i < b; i++)
            S[i * b + i] = res[i];
        gp_symmetrize_from_lower(S, b, b);
    }
}

typedef struct pred_buf {
    double *Xs, *K, *Phi, *res, *tmp;
} pred_buf;

static void pred_buf_free(pred_buf *p)
{
    free(p->Xs);
    free(p->K);
    free(p->Phi);
    free(p->res);
    free(p->tmp);
}

static int pred_buf_alloc(pred_buf *p, const pls_impl *im, size_t b, gp_error *err)
{
    memset(p, 0, sizeof *p);
    size_t big = im->M > im->mk ? im->M : im->mk, cnt = 0;
    int rc = gp_checked_size(big, b, &cnt, err);
    if (rc)
        return rc;
    p->Xs = gp_alloc_doubles(im->d * b, err);
    p->K = gp_alloc_doubles(cnt, err);
    p->Phi = gp_alloc_doubles(cnt, err);
    p->tmp = gp_alloc_doubles(cnt, err);
    p->res = gp_alloc_doubles(b, err);
    return p->Xs && p->K && p->Phi && p->tmp && p->res ? GP_OK : GP_ENOMEM;
}

/* K (M x b) = k(Z, X), Phi (mk x b) and the component means (rows of mu,
 * ld m) of the b points, each point by its own arithmetic in a fixed order
 * (gp_dot_columns, gp_dot), so that its bits do not depend on the other
 * points of the call and pls is batch_invariant (core/model/method.h).
 * dgemm's would: OpenBLAS's AVX-512 (SkylakeX) dgemm picks a small-matrix
 * kernel or the packed one by the product's size (transposed A: m n <= 1200),
 * so a point got other bits among 16 points than among 32. */
static void point_means(const gp_model *model, const pls_impl *im, pred_buf *p, size_t b,
                        size_t m, double *mu)
{
    size_t mk = im->mk, M = im->M;
    gp_kernel_cross_points(model->kernel, im->Zp, p->Xs, b, p->K, M);
    gp_dot_columns(im->B, M, mk, p->K, M, b, M, p->Phi, mk);
    if (im->J) /* mu[i + j m] = phi_i . a_j */
        gp_dot_columns(p->Phi, mk, b, im->A, mk, im->J, mk, mu, m);
    else
        for (size_t i = 0; i < b; i++)
            mu[i] = gp_dot(p->Phi + i * mk, im->mu, mk);
}

/* Component means and variances of b points at rows start.. of mu/var (ld
 * m), working units; cov (b x b = m x m, may be NULL) the latent covariance
 * given the coefficients' law: closed form W^T W + S_res, particles S_res. */
static void predict_block(const gp_model *model, const pls_impl *im, pred_buf *p, size_t b,
                          size_t m, double *mu, double *var, double *cov)
{
    size_t mk = im->mk, K = im->J ? im->J : 1;
    point_means(model, im, p, b, m, mu);
    residual(model->kernel, im, p->Xs, b, p->K, p->Phi, p->res, cov, p->tmp);
    for (size_t i = 0; i < b; i++)
        for (size_t k = 0; k < K; k++)
            var[k * m + i] = p->res[i];
    if (im->J == 0) { /* + |R^{-1} phi|^2: the invariant solve, gp_dot (see residual) */
        memcpy(p->tmp, p->Phi, mk * b * sizeof *p->Phi);
        gp_solve_lower_columns(im->R, mk, mk, p->tmp, b, mk);
        for (size_t i = 0; i < b; i++)
            var[i] += gp_dot(p->tmp + i * mk, p->tmp + i * mk, mk);
        if (cov) {
            cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)b, (blasint)mk, 1.0,
                        p->tmp, (blasint)mk, 1.0, cov, (blasint)b);
            for (size_t i = 0; i < b; i++)
                cov[i * b + i] = var[i];
            gp_symmetrize_from_lower(cov, b, b);
        }
    }
}

/* Rows s .. s + b of X (m x d, original units) standardised, point-major. */
static void block_points(const gp_model *model, const double *X, size_t m, size_t s, size_t b,
                         double *out)
{
    size_t d = model->input_dim;
    for (size_t k = 0; k < d; k++)
        for (size_t i = 0; i < b; i++)
            out[i * d + k] = (X[k * m + s + i] - model->x_mean[k]) / model->x_scale[k];
}

static int components_all(const gp_model *model, const pls_impl *im, const double *X, size_t m,
                          int noise, double *mu, double *var, double *cov, gp_error *err)
{
    size_t K = im->J ? im->J : 1, width = 3 * (im->M > im->mk ? im->M : im->mk) + K + im->d;
    size_t block = cov ? m : gp_predict_block_rows(width, m);
    pred_buf p;
    int rc = pred_buf_alloc(&p, im, block, err);
    for (size_t s = 0; rc == GP_OK && s < m; s += block) {
        size_t b = m - s < block ? m - s : block;
        block_points(model, X, m, s, b, p.Xs);
        predict_block(model, im, &p, b, m, mu + s, var + s, cov);
    }
    pred_buf_free(&p);
    if (rc)
        return rc;
    double ys = model->y_scale, ys2 = ys * ys;
    double s2 = noise && model->likelihood == GP_LIK_GAUSSIAN ? model->noise_variance : 0.0;
    for (size_t i = 0; i < m * K; i++) {
        mu[i] = mu[i] * ys + model->y_mean;
        var[i] = (var[i] + s2) * ys2;
    }
    if (cov)
        for (size_t i = 0; i < m * m; i++)
            cov[i] = (cov[i] + (i % (m + 1) == 0 ? s2 : 0.0)) * ys2;
    return GP_OK;
}

/* The particles' sample covariance (1/J) sum_j (mu_j - mean)(mu_j - mean)^T
 * added to cov (law of total covariance; 1/J as gp_mixture_moments). */
static int add_between(const double *mu, const double *mean, size_t m, size_t J, double *cov,
                       gp_error *err)
{
    size_t cnt = 0;
    int rc = gp_checked_size(m, J, &cnt, err);
    double *D = rc ? NULL : gp_alloc_doubles(cnt, err);
    if (D == NULL)
        return rc ? rc : GP_ENOMEM;
    for (size_t k = 0; k < J; k++)
        for (size_t i = 0; i < m; i++)
            D[k * m + i] = mu[k * m + i] - mean[i];
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)m, (blasint)J,
                1.0 / (double)J, D, (blasint)m, 1.0, cov, (blasint)m);
    gp_symmetrize_from_lower(cov, m, m);
    free(D);
    return GP_OK;
}

static int pls_predict(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                       gp_error *err)
{
    const pls_impl *im = model->impl;
    size_t m = req->m, K = im->J ? im->J : 1, mK = 0;
    if (m == 0)
        return GP_OK;
    int rc = gp_checked_size(m, K, &mK, err);
    if (rc)
        return rc;
    double *mu = req->components ? out->component_mean : gp_alloc_doubles(mK, err);
    double *var = req->components ? out->component_variance : gp_alloc_doubles(mK, err);
    double *cov = req->full_covariance ? out->covariance : NULL;
    rc = mu && var ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK)
        rc = components_all(model, im, req->X, m, req->include_noise, mu, var, cov, err);
    if (rc == GP_OK)
        gp_mixture_moments(mu, var, m, K, out->mean, out->variance);
    if (rc == GP_OK && cov && im->J)
        rc = add_between(mu, out->mean, m, K, cov, err);
    for (size_t i = 0; rc == GP_OK && cov && i < m; i++)
        out->variance[i] = cov[i * m + i];
    if (rc == GP_OK && req->n_quantiles)
        gp_mixture_quantiles(mu, var, m, K, req->quantiles, req->n_quantiles, out->quantiles);
    if (!req->components) {
        free(mu);
        free(var);
    }
    return rc;
}

/* ---- A5: function draws ---- */

/* Coefficients of draw s (mk x S): particle s mod J, or for the closed form
 * a fresh mu + R^{-T} xi with xi the first mk normals of draw s's stream. */
static void draw_coefficients(const pls_impl *im, gp_rng *rng, size_t S, double *C)
{
    size_t mk = im->mk;
    for (size_t s = 0; s < S; s++) {
        double *c = C + s * mk;
        if (im->J) {
            memcpy(c, im->A + (s % im->J) * mk, mk * sizeof *c);
            continue;
        }
        gp_rng_normal_fill(&rng[s], c, mk);
        cblas_dtrsv(CblasColMajor, CblasLower, CblasTrans, CblasNonUnit, (blasint)mk, im->R,
                    (blasint)mk, c, 1);
        cblas_daxpy((blasint)mk, 1.0, im->mu, 1, c, 1);
    }
}

/* samples (m x S) += chol(S_res + jitter) zeta_s, zeta_s the next m normals
 * of draw s's stream; Sres is factored in place (its lower triangle). Nothing
 * when the residual vanishes (every point on the landmarks' span). */
static int add_residual(double *Sres, size_t m, gp_rng *rng, size_t S, double *samples,
                        gp_error *err)
{
    double tr = 0.0;
    for (size_t i = 0; i < m; i++)
        tr += Sres[i * m + i];
    if (!(tr > 1e-300))
        return GP_OK;
    double *z = gp_alloc_doubles(m, err);
    int rc = z ? gp_cholesky_jitter(Sres, m, m, NULL, err) : GP_ENOMEM;
    for (size_t s = 0; rc == GP_OK && s < S; s++) {
        gp_rng_normal_fill(&rng[s], z, m);
        cblas_dtrmv(CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)m, Sres,
                    (blasint)m, z, 1);
        cblas_daxpy((blasint)m, 1.0, z, 1, samples + s * m, 1);
    }
    free(z);
    return rc;
}

/* Joint draws F_s(X*) = phi(X*)^T a_s + chol(S_res(X*, X*)) zeta_s (§5.2 A5):
 * draw s has its own stream gp_rng_derive(req->seed, s) (closed form: mk
 * normals for a_s, then m for zeta_s, then m for the noise). For the
 * particle models a_s is particle s mod J, so draws 0 .. J-1 are the J
 * fitted posterior functions, the same in every request; the residual part
 * is a joint draw over the request's points (same seed and points: same
 * functions). Gaussian: original units, noise added with include_noise. */
static int pls_sample(const gp_model *model, const gp_sample_request *req, double *samples,
                      gp_error *err)
{
    const pls_impl *im = model->impl;
    size_t m = req->m, S = req->n_samples, mk = im->mk;
    if (m == 0 || S == 0)
        return GP_OK;
    pred_buf p;
    gp_rng *rng = malloc(S * sizeof *rng);
    double *C = gp_alloc_doubles(mk * S, err), *Sres = gp_alloc_doubles(m * m, err);
    int rc = rng && C && Sres ? pred_buf_alloc(&p, im, m, err) : GP_ENOMEM;
    if (rc == GP_OK) {
        for (size_t s = 0; s < S; s++)
            gp_rng_derive(&rng[s], req->seed, s);
        block_points(model, req->X, m, 0, m, p.Xs);
        features(model->kernel, im, p.Xs, m, p.K, p.Phi);
        residual(model->kernel, im, p.Xs, m, p.K, p.Phi, p.res, Sres, p.tmp);
        draw_coefficients(im, rng, S, C);
        cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (blasint)m, (blasint)S, (blasint)mk,
                    1.0, p.Phi, (blasint)mk, C, (blasint)mk, 0.0, samples, (blasint)m);
        rc = add_residual(Sres, m, rng, S, samples, err);
    }
    int noise = req->include_noise && model->likelihood == GP_LIK_GAUSSIAN;
    double sd = sqrt(model->noise_variance);
    for (size_t s = 0; rc == GP_OK && s < S; s++)
        for (size_t i = 0; i < m; i++) {
            double f = samples[s * m + i] + (noise ? sd * gp_rng_normal(&rng[s]) : 0.0);
            samples[s * m + i] = f * model->y_scale + model->y_mean;
        }
    if (rng && C && Sres)
        pred_buf_free(&p);
    free(rng);
    free(C);
    free(Sres);
    return rc;
}

/* ---- A6: export / import ---- */

static int pls_export(const gp_model *model, gp_state *st, gp_error *err)
{
    const pls_impl *im = model->impl;
    int rc = gp_state_put(st, "Z", im->d, im->M, im->Z, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "V", im->M, im->mk, im->V, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "lambda", im->mk, 1, im->lam, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "prior_mode_r", im->rmode ? 1.0 : 0.0, err);
    if (rc == GP_OK && im->J)
        rc = gp_state_put(st, "particles", im->mk, im->J, im->A, err);
    if (rc == GP_OK && !im->J)
        rc = gp_state_put(st, "mu", im->mk, 1, im->mu, err);
    if (rc == GP_OK && !im->J)
        rc = gp_state_put_cholesky(st, "H_chol", im->R, im->mk, err);
    return rc;
}

static int check_finite(const gp_named_array *a, gp_error *err)
{
    size_t bad = 0;
    if (!gp_all_finite(a->data, a->rows * a->cols, &bad))
        return gp_error_set(err, GP_EDATA, a->name, "%s holds a non-finite value at %zu",
                            a->name, bad);
    return GP_OK;
}

/* Shapes of the stored arrays: M landmarks of the model's dimension, mk <= M
 * eigenpairs with positive eigenvalues, and J particles or the closed form. */
static int import_shapes(const gp_model *model, const gp_state *st, size_t *M, size_t *mk,
                         size_t *J, gp_error *err)
{
    const gp_named_array *z = gp_state_find(st, "Z"), *v = gp_state_find(st, "V"),
                         *l = gp_state_find(st, "lambda"), *a = gp_state_find(st, "particles");
    if (z == NULL || z->rows != model->input_dim || z->cols == 0)
        return gp_error_set(err, GP_EDATA, "Z", "missing or malformed landmarks");
    if (v == NULL || v->rows != z->cols || v->cols == 0 || v->cols > v->rows)
        return gp_error_set(err, GP_EDATA, "V", "missing or malformed eigenvectors");
    if (l == NULL || l->rows != v->cols || l->cols != 1)
        return gp_error_set(err, GP_EDATA, "lambda", "missing or malformed eigenvalues");
    if (a && (a->rows != v->cols || a->cols == 0))
        return gp_error_set(err, GP_EDATA, "particles", "malformed particles");
    const gp_named_array *all[4] = {z, v, l, a};
    for (size_t i = 0; i < 4; i++) {
        int rc = all[i] ? check_finite(all[i], err) : GP_OK;
        if (rc)
            return rc;
    }
    for (size_t i = 0; i < l->rows; i++)
        if (!(l->data[i] > 0.0))
            return gp_error_set(err, GP_EDATA, "lambda", "eigenvalue %zu is not positive", i);
    *M = z->cols;
    *mk = v->cols;
    *J = a ? a->cols : 0;
    return GP_OK;
}

static int import_closed(pls_impl *im, const gp_state *st, gp_error *err)
{
    const double *mu;
    int rc = gp_state_get(st, "mu", im->mk, 1, &mu, err);
    if (rc == GP_OK)
        rc = check_finite(gp_state_find(st, "mu"), err);
    if (rc == GP_OK)
        rc = gp_state_get_cholesky(st, "H_chol", im->mk, im->R, err);
    if (rc == GP_OK)
        memcpy(im->mu, mu, im->mk * sizeof *mu);
    return rc;
}

static int pls_import(gp_model *model, const gp_state *st, gp_error *err)
{
    size_t M = 0, mk = 0, J = 0;
    double rmode = 0.0;
    int rc = import_shapes(model, st, &M, &mk, &J, err);
    if (rc == GP_OK)
        rc = gp_state_get_scalar(st, "prior_mode_r", &rmode, err);
    if (rc == GP_OK && rmode != 0.0 && rmode != 1.0)
        rc = gp_error_set(err, GP_EDATA, "prior_mode_r", "prior_mode_r must be 0 or 1");
    if (rc == GP_OK)
        rc = gp_method_check_kernel(model->method, model->kernel, err);
    if (rc)
        return rc;
    pls_impl *im = impl_alloc(model->input_dim, M, mk, J, err);
    if (im == NULL)
        return GP_ENOMEM;
    im->rmode = rmode != 0.0;
    memcpy(im->Z, gp_state_find(st, "Z")->data, model->input_dim * M * sizeof *im->Z);
    memcpy(im->V, gp_state_find(st, "V")->data, M * mk * sizeof *im->V);
    memcpy(im->lam, gp_state_find(st, "lambda")->data, mk * sizeof *im->lam);
    if (J)
        memcpy(im->A, gp_state_find(st, "particles")->data, mk * J * sizeof *im->A);
    else
        rc = import_closed(im, st, err);
    if (rc == GP_OK)
        rc = impl_derive(im, model->kernel, err);
    if (rc) {
        impl_free(im);
        return rc;
    }
    model->impl = im;
    return GP_OK;
}

static size_t pls_components(const gp_model *model)
{
    const pls_impl *im = model->impl;
    return im->J ? im->J : 1;
}

static const gp_method_ops pls_ops = {
    .fit = pls_fit,
    .predict = pls_predict,
    .sample = pls_sample,
    .export_impl = pls_export,
    .import_impl = pls_import,
    .free_impl = impl_free,
    .components = pls_components,
    .batch_invariant = 1, /* predict: per-point arithmetic (point_means, residual) */
};

static const gp_info_spec pls_info[] = {
    {"landmarks", GP_INFO_NUMBER, "M, the landmarks chosen"},
    {"eigenpairs", GP_INFO_NUMBER,
     "M_k, Nystrom eigenpairs kept (eigenvalue above eig_rel_tol times the largest)"},
    {"sampler", GP_INFO_STRING, "closed_form, pula or mala"},
    {"prior_mode", GP_INFO_STRING, "k or r"},
    {"particles", GP_INFO_NUMBER, "J, the particles (samplers only)"},
    {"steps", GP_INFO_NUMBER, "K, the Langevin steps run (samplers only)"},
    {"final_mean_energy", GP_INFO_NUMBER,
     "the particles' mean potential V(a) after the last step (samplers only)"},
    {"acceptance_rate", GP_INFO_NUMBER, "the fraction of MALA proposals accepted (mala only)"},
    {"hyper_subset", GP_INFO_NUMBER, "N_sub, points per hyperparameter fit"},
    {"hyper_repeats", GP_INFO_NUMBER, "R, subset fits averaged"},
    {"hyper_lml", GP_INFO_NUMBER,
     "the mean log marginal likelihood of the subset fits (of the regression target)"},
    {"hyper_target", GP_INFO_STRING,
     "the regression target of the hyperparameter fit: y, 0/1 labels, sqrt(y) or log(y + 1/2)"},
    {"amplitude_scale", GP_INFO_NUMBER,
     "bernoulli, amplitude laplace: the factor c on the kernel variance fitted to the 0/1 "
     "labels (maximises the Laplace marginal likelihood)"},
    {"preconditioner", GP_INFO_STRING,
     "samplers: laplace (Hessian at the mode, particles started from the Laplace "
     "approximation) or bound (curvature bound, prior start)"},
    {"hyper_noise", GP_INFO_NUMBER,
     "non-gaussian likelihoods: the fitted noise of the regression target (not used after)"},
};

const gp_method gp_method_pls = {
    .name = "pls",
    .summary = "Projected Langevin sampling: the posterior over the coefficients of M Nystrom "
               "eigenfunctions of greedy landmarks, sampled by J preconditioned Langevin chains "
               "(closed form for gaussian); any likelihood; predicts with the mixture of the "
               "particles' Gaussians",
    .objective_name = "negative_mean_energy",
    .options = pls_options,
    .n_options = sizeof pls_options / sizeof pls_options[0],
    .kernels = pls_kernels,
    .n_kernels = sizeof pls_kernels / sizeof pls_kernels[0],
    .composite_kernels = 0,
    .iterations_option = "steps",
    .restarts_option = NULL,
    .likelihoods = pls_likelihoods,
    .n_likelihoods = sizeof pls_likelihoods / sizeof pls_likelihoods[0],
    .info = pls_info,
    .n_info = sizeof pls_info / sizeof pls_info[0],
    .ops = &pls_ops,
};
