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
 * A sample request's draw s uses gp_rng_derive(req->seed, s) (see pls_sample).
 *
 * The folder, each file using only those listed before it: model.c (the
 * state, the features, the potential, prediction and draws, A5);
 * hyper_laplace.c (the Laplace marginal likelihood of the labels, A1 with
 * option hyper = laplace); hyper.c (A1); laplace.c (the [D] Laplace mode and amplitude); landmarks.c (A2-A3);
 * langevin.c (the samplers, A4 (iii)); persist.c (A6); this file (the
 * options, the closed form A4 (i), the fit, the descriptor); internal.h: the
 * types they share. */
#include "core/methods/pls/pls.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/inducing/select.h"
#include "core/linalg/linalg.h"
#include "core/methods/pls/hyper.h"
#include "core/methods/pls/internal.h"
#include "core/methods/pls/landmarks.h"
#include "core/methods/pls/langevin.h"
#include "core/methods/pls/laplace.h"
#include "core/methods/pls/model.h"
#include "core/methods/pls/persist.h"
#include "core/model/hyperspec.h"
#include "core/model/method.h"

#define LANDMARKS_AUTO_MAX 2000
#define LANDMARKS_AUTO_MIN 100

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
    {"hyper", GP_OPTION_ENUM, 0, "auto", 0, 0, "auto|laplace|regression",
     "the objective of the subset fits (with optimize): laplace ([D]) the Laplace marginal "
     "likelihood of the labels under the model's likelihood (bernoulli, poisson); regression "
     "(thesis) the exact marginal likelihood of a regression on transformed labels (0/1, "
     "log(y + 1/2), sqrt(y)); auto: laplace for bernoulli and poisson, regression otherwise"},
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
     "bernoulli with optimize and hyper regression: laplace ([D]) rescales the amplitude "
     "fitted on the 0/1 labels to maximise the model's Laplace marginal likelihood on the "
     "training features; thesis keeps it (poisson keeps it always: its A1 target is on the "
     "log-rate scale; hyper laplace fits the amplitude to the labels already)"},
    {"noise_floor", GP_OPTION_NUMBER, 0.15, NULL, 0, 1, NULL,
     "non-gaussian likelihoods, hyper regression: least noise of the hyperparameter regression "
     "on the transformed labels, as a fraction of their variance ([D]: stops interpolating "
     "fits)"},
    {"precondition", GP_OPTION_ENUM, 0, "auto", 0, 0, "auto|laplace|bound",
     "pula and mala: laplace ([D]) preconditions by the Hessian at the mode of the potential and "
     "starts the particles from the Laplace approximation; bound: the likelihood's curvature "
     "bound and prior draws; auto: laplace for gaussian, bernoulli and poisson, bound for "
     "poisson_sq (not log-concave)"},
    {"eig_rel_tol", GP_OPTION_NUMBER, 1e-10, NULL, 0, 0.01, NULL,
     "drop Nystrom eigenvalues at or below this times the largest"},
};

/* ---- settings ---- */

static size_t auto_number(const gp_fit_request *req, const char *name, size_t fallback)
{
    double v = gp_option_number(&gp_method_pls, req, name);
    return isnan(v) || v < 1.0 ? fallback : (size_t)floor(v);
}

/* The [D] amplitude step rescales the kernel variance after the fit: only
 * where the caller left that variance free and said nothing of it (a held
 * variance, a prior or a bound on it keeps the fitted value). The default
 * preset's weak prior is no statement about it: the preset regularises the
 * subset fits, and [D] still calibrates the amplitude fitted on 0/1 labels. */
static int variance_rescalable(const gp_fit_request *req)
{
    if (req->kernel->fixed & GP_FIX_VARIANCE)
        return 0;
    const gp_hyper_spec *hs = req->hyper;
    if (hs == NULL)
        return 1;
    const gp_hyper_entry *e = &hs->entry[0];
    int bounded = e->lo > 0.0 || e->hi < INFINITY;
    return !e->fixed && !bounded && (e->prior.type == GP_PRIOR_NONE || e->preset);
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
    const char *hyp = gp_option_string(me, req, "hyper");
    int lap_ok = req->likelihood == GP_LIK_BERNOULLI || req->likelihood == GP_LIK_POISSON;
    if (strcmp(hyp, "laplace") == 0 && !lap_ok)
        return gp_error_set(err, GP_EINVAL, "options.hyper",
                            "hyper laplace needs the bernoulli or poisson likelihood, not %s",
                            gp_likelihood_name(req->likelihood));
    s->hyper_lap = s->optimize && lap_ok && strcmp(hyp, "regression") != 0;
    s->laplace_amp = req->likelihood == GP_LIK_BERNOULLI && s->optimize && !s->hyper_lap &&
                     strcmp(gp_option_string(me, req, "amplitude"), "laplace") == 0 &&
                     variance_rescalable(req);
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
    if (s->hyper_lap) /* K, the factor of B and L^{-1} sw K (hyper_laplace.c) */
        sub *= sqrt(3.0);
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

/* ---- A4 (i): the gaussian closed form ---- */

static int closed_form(pls_impl *im, const double *Phi, size_t n, const double *y, double s2,
                       gp_error *err)
{
    size_t mk = im->mk;
    if (pls_chol_identity_plus_gram(Phi, mk, n, 1.0 / s2, im->R) != GP_OK)
        return gp_error_set(err, GP_ENOTPD, NULL, "I + Phi Phi^T / s2 is not positive definite");
    for (size_t j = 0; j < mk; j++) /* zero the dead upper half: exported packed */
        for (size_t i = 0; i < j; i++)
            im->R[j * mk + i] = 0.0;
    cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)mk, (blasint)n, 1.0 / s2, Phi, (blasint)mk,
                y, 1, 0.0, im->mu, 1);
    gp_chol_solve(im->R, mk, mk, im->mu, 1, mk);
    return GP_OK;
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

static void data_free(fit_data *D)
{
    free(D->Xt);
    free(D->y);
    free(D->t);
    free(D->Phi);
    free(D->H);
    free(D->off);
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
    double m = pls_mean_of(D->t, D->n), v = 0.0;
    for (size_t i = 0; i < D->n; i++)
        v += (D->t[i] - m) * (D->t[i] - m) / (double)D->n;
    if (set->noise_floor * v > np->floor)
        np->floor = set->noise_floor * v;
    if (np->start < 2.0 * np->floor)
        np->start = 2.0 * np->floor;
}

/* The mean, once the hyperparameter stage has run (docs/design/numerics.md
 * "Mean functions"): beta is that stage's GLS profile on t (averaged over
 * the subsets), or without optimize the least-squares fit of t; bernoulli
 * replaces it by the logistic regression of the labels on the basis (t's 0/1
 * scale is not the logit's). Then held: gaussian fits the residual targets
 * y - H beta, the other likelihoods see f = s Phi^T a + H beta (D->off). */
static int hold_mean(gp_model *model, const pls_settings *set, fit_data *D, gp_error *err)
{
    size_t p = gp_mean_n_coef(model->mean_type, model->input_dim), n = D->n;
    if (p == 0)
        return GP_OK;
    double *beta = model->mean_coef;
    if ((D->H = gp_model_mean_basis(model, D->Xt, n, err)) == NULL)
        return GP_ENOMEM;
    int rc = GP_OK;
    if (!set->optimize && !set->hyper_lap) {
        double *G = gp_alloc_doubles(p * p, err);
        if (G == NULL)
            return GP_ENOMEM;
        cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)p, (blasint)n, 1.0, D->H,
                    (blasint)n, 0.0, G, (blasint)p);
        cblas_dgemv(CblasColMajor, CblasTrans, (blasint)n, (blasint)p, 1.0, D->H, (blasint)n,
                    D->t, 1, 0.0, beta, 1);
        rc = gp_mean_solve_normal(G, beta, p, err);
        free(G);
    }
    gp_lik lik = {model->likelihood, 1.0};
    if (rc == GP_OK && (model->likelihood == GP_LIK_BERNOULLI || set->hyper_lap)) {
        memset(beta, 0, p * sizeof *beta);
        rc = pls_glm_coef(&lik, D->H, n, p, D->y, beta, err);
    }
    if (rc)
        return rc;
    if (model->likelihood == GP_LIK_GAUSSIAN) {
        cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)n, (blasint)p, -1.0, D->H, (blasint)n,
                    beta, 1, 1.0, D->y, 1);
        return GP_OK;
    }
    if ((D->off = gp_alloc_doubles(n, err)) == NULL)
        return GP_ENOMEM;
    cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)n, (blasint)p, 1.0, D->H, (blasint)n, beta,
                1, 0.0, D->off, 1);
    return GP_OK;
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
    gp_model_info_string(model, "hyper_target", set->hyper_lap ? "labels (laplace)" : target);
    if (model->likelihood != GP_LIK_GAUSSIAN && !set->hyper_lap)
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
    int rc;
    if (set->hyper_lap) { /* the mean first: the latent offset of the Laplace fits */
        rc = hold_mean(model, set, D, err);
        if (rc == GP_OK)
            rc = pls_fit_hyper_laplace(&run, model, D->Xt, D->y, D->off, err);
    } else {
        rc = set->optimize ? pls_fit_hyper(&run, model, D->Xt, D->t, &np, &s2, err) : GP_OK;
        if (rc == GP_OK)
            rc = hold_mean(model, set, D, err);
    }
    if (rc)
        return rc;
    gp_lik lik = {model->likelihood, s2};
    if (model->likelihood == GP_LIK_GAUSSIAN)
        model->noise_variance = s2;
    pls_impl *im = NULL;
    rc = pls_build_basis(model, set, D, &im, err);
    if (rc == GP_OK && set->laplace_amp)
        rc = pls_amplitude_rebuild(model, set, &lik, D, &im, &run.log_c, err);
    sampler_out so = {NAN, NAN};
    if (rc == GP_OK && im->J == 0) {
        rc = closed_form(im, D->Phi, D->n, D->y, s2, err);
        so.energy = rc == GP_OK ? closed_energy(im, D, s2) : NAN;
    } else if (rc == GP_OK) {
        rc = pls_sample_particles(im, &lik, D->Phi, D->n, D->y, D->off, set, req, 0,
                                  run.max_total, &so, err);
    }
    if (rc) {
        pls_impl_free(im);
        return rc;
    }
    double offset = model->likelihood == GP_LIK_GAUSSIAN ? -(double)D->n * log(model->y_scale)
                                                         : 0.0;
    model->diag.objective = -so.energy + offset;
    report(model, set, im, &run, &so, target, s2);
    *out = im;
    return GP_OK;
}

/* [D] hyper laplace with ARD lengthscales fits under the default priors
 * unless the request states its own or asks for none, as svgp's classifiers
 * do (core/methods/svgp/fit.c): without them the Laplace marginal likelihood
 * of a subset that ARD separates grows without bound in the amplitude (spam:
 * log variance 38 and gradients of 1e14), and ARD on 60 inputs and 166 rows
 * (sonar) overfits. Measured: bench/results/classification.md, issue 40. The
 * model keeps the preset, so its answer says so. */
static int laplace_priors(gp_model *model, const gp_fit_request *req, const pls_settings *s,
                          gp_error *err)
{
    const gp_kernel *k = model->kernel;
    if (!s->hyper_lap || req->hyper != NULL || k->n_lengthscale < 2)
        return GP_OK;
    int rc = gp_hyper_spec_new(&model->hyper, k, err);
    if (rc == GP_OK)
        gp_hyper_default_priors(model->hyper, k);
    return rc;
}

static int pls_fit(const gp_method *m, const gp_fit_request *req, gp_model **out, gp_error *err)
{
    pls_settings set;
    memset(&set, 0, sizeof set);
    int rc = read_settings(req, &set, err);
    if (rc == GP_OK)
        rc = size_guard(req, &set, err);
    gp_model *model = NULL;
    if (rc == GP_OK)
        rc = gp_model_new(m, req, &model, err);
    if (rc)
        return rc;
    if ((rc = laplace_priors(model, req, &set, err)) != GP_OK) {
        gp_model_free(model);
        return rc;
    }
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
    .free_impl = pls_impl_free,
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
     "the mean log marginal likelihood of the subset fits (of the regression target, or the "
     "Laplace one of the labels)"},
    {"hyper_target", GP_INFO_STRING,
     "what the hyperparameters were fitted to: the regression targets y, 0/1 labels, sqrt(y) "
     "or log(y + 1/2) (hyper regression), or labels (laplace): the labels under the model's "
     "likelihood (hyper laplace)"},
    {"amplitude_scale", GP_INFO_NUMBER,
     "bernoulli, amplitude laplace: the factor c on the kernel variance fitted to the 0/1 "
     "labels (maximises the Laplace marginal likelihood)"},
    {"preconditioner", GP_INFO_STRING,
     "samplers: laplace (Hessian at the mode, particles started from the Laplace "
     "approximation) or bound (curvature bound, prior start)"},
    {"hyper_noise", GP_INFO_NUMBER,
     "non-gaussian likelihoods, hyper regression: the fitted noise of the regression target "
     "(not used after)"},
};

static const gp_option_setting pls_quick[] = {{"steps", 8}, {"particles", 20}};

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
    .quick = pls_quick,
    .n_quick = sizeof pls_quick / sizeof pls_quick[0],
    .hyper_priors = 1,
    .mean_functions = 1, /* profiled in the subset fits, held: pls.c hold_mean */
    .ops = &pls_ops,
};
