/* The in-memory fit of method "svgp": the memory check and the choice of optimiser, the mean
 * function's start, Z and the fit entry (what a fit over rows shares: setup.h). */
#include "core/methods/svgp/fit.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/methods/svgp/classes.h"
#include "core/methods/svgp/elbo.h"
#include "core/methods/svgp/internal.h"
#include "core/methods/svgp/setup.h"
#include "core/methods/svgp/train.h"

/* Doubles a fit holds (C latents: a softmax fit's classes, else 1). */
static double fit_need(size_t n, size_t d, size_t m, size_t b, size_t C, int lbfgs)
{
    double dm = (double)m, dd = (double)d, dc = (double)C;
    double need = (double)n * (dd + 2.0) + (double)b * ((C > 1 ? 4.0 : 3.0) * dm + dd + 4.0 * dc) +
                  (7.0 + 5.0 * dc) * dm * dm;
    if (lbfgs)
        need += 24.0 * (0.5 * dm * dm * dc + dm * dd + dm * dc);
    return need;
}

/* The optimiser (1: lbfgs, 0: adam) and the memory check, before anything
 * is allocated: within the budget of an exact fit of max_train_points points
 * (sgpr's rule). */
static int choose_optimizer(const gp_method *me, const gp_fit_request *req, size_t m,
                            size_t batch, size_t C, int *lbfgs, gp_error *err)
{
    double cap = (double)gp_fit_point_cap(req);
    const char *name = gp_option_string(me, req, "optimizer");
    int fits = fit_need(req->n, req->d, m, req->n, C, 1) <= cap * cap;
    *lbfgs = strcmp(name, "lbfgs") == 0 || (strcmp(name, "auto") == 0 && fits);
    double need = fit_need(req->n, req->d, m, *lbfgs ? req->n : batch, C, *lbfgs);
    if (need > cap * cap)
        return gp_error_set(err, GP_ETOOBIG, *lbfgs ? "options.optimizer" : "options.inducing",
                            "svgp with %zu inducing points on %zu points needs %.1f GB of "
                            "workspace, above the budget of an exact fit of max_train_points "
                            "= %.0f points (%.1f GB): use %s, fewer inducing points or raise "
                            "--max-train-points",
                            m, req->n, need * 8e-9, cap, cap * cap * 8e-9,
                            *lbfgs ? "optimizer adam" : "a smaller batch_size");
    return GP_OK;
}

/* The bound's parts at the end and the fitted posterior. */
static int build_post(svgp_fit *f, gp_inducing_post *im, gp_svgp_terms *t, gp_error *err)
{
    svgp_eval e = svgp_fit_eval(f);
    int rc = svgp_expected_blocks(&e, f->X, f->d, f->n, f->y, &f->w, &t->expected_log_lik, err);
    if (rc)
        return rc;
    t->kl = svgp_kl_sum(f->mq, f->Lq, f->m, f->C);
    t->elbo = t->expected_log_lik - t->kl;
    return svgp_post_build(f, im, err);
}

/* The optimisation itself: L-BFGS from a q refined at the initial kernel,
 * then q refined at the fitted one; or Adam with natural gradients. */
static int optimise(svgp_fit *f, const gp_fit_request *req, int lbfgs, const svgp_settings *st,
                    gp_diagnostics *diag, gp_error *err)
{
    if (!lbfgs)
        return svgp_fit_adam(f, req, st, diag, err);
    int rc = svgp_refine_q(f, 50, NULL, err);
    if (rc == GP_OK)
        rc = svgp_fit_lbfgs(f, req, st, diag, err);
    if (rc == GP_OK)
        rc = svgp_refine_q(f, 50, NULL, err);
    return rc;
}

/* The mean's start on the link scale: gaussian, the least-squares fit of the
 * working targets; bernoulli and poisson, the intercept at the link of the
 * base rate (logit of the share of ones, log of the mean count; a rate of 0
 * or 1 is pulled in by half a row) and the slopes at 0. */
static int mean_start(svgp_fit *f, gp_error *err)
{
    size_t n = f->n, p = f->p;
    memset(f->beta, 0, p * sizeof *f->beta);
    double ybar = 0.0;
    for (size_t i = 0; i < n; i++)
        ybar += f->y[i] / (double)n;
    double lo = 0.5 / (double)n;
    if (f->lik.type == GP_LIK_BERNOULLI) {
        double r = fmin(fmax(ybar, lo), 1.0 - lo);
        f->beta[0] = log(r / (1.0 - r));
    } else if (f->lik.type != GP_LIK_GAUSSIAN) {
        f->beta[0] = log(fmax(ybar, lo));
    } else {
        double *G = gp_alloc_doubles(p * p, err);
        if (G == NULL)
            return GP_ENOMEM;
        cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)p, (blasint)n, 1.0, f->H,
                    (blasint)n, 0.0, G, (blasint)p);
        cblas_dgemv(CblasColMajor, CblasTrans, (blasint)n, (blasint)p, 1.0, f->H, (blasint)n,
                    f->y, 1, 0.0, f->beta, 1);
        int rc = gp_mean_solve_normal(G, f->beta, p, err);
        free(G);
        if (rc)
            return rc;
    }
    svgp_mean_offsets(f);
    return GP_OK;
}

/* The latent mean's basis at the training rows and its start (zero mean:
 * nothing; the model's type and p coefficients). */
static int mean_init(svgp_fit *f, const gp_model *model, gp_error *err)
{
    f->p = gp_mean_n_coef(model->mean_type, f->d);
    if (f->p == 0)
        return GP_OK;
    f->H = gp_model_mean_basis(model, f->X, f->n, err);
    f->beta = gp_alloc_doubles(f->p, err);
    f->gbeta = gp_alloc_doubles(f->p, err);
    f->off = gp_alloc_doubles(f->n, err);
    if (!f->H || !f->beta || !f->gbeta || !f->off)
        return GP_ENOMEM;
    return mean_start(f, err);
}

/* Select Z, optimise, build the posterior. X (d x n) and y in working units. */
static int fit_into(gp_model *model, const gp_fit_request *req, svgp_fit *f, gp_inducing_post *im,
                    gp_error *err)
{
    const gp_method *me = model->method;
    const char *sel_name = gp_option_string(me, req, "inducing_selection");
    gp_inducing_selection sel = (gp_inducing_selection)gp_inducing_selection_from_name(sel_name);
    size_t M = (size_t)gp_option_number(me, req, "inducing");
    if (M > f->n)
        M = f->n;
    svgp_settings st;
    svgp_settings_read(req, model, &st);
    int lbfgs = 1;
    int rc = choose_optimizer(me, req, M, st.batch, f->C, &lbfgs, err);
    if (rc == GP_OK)
        rc = svgp_fit_alloc(f, M, lbfgs ? f->n : st.batch, err);
    if (rc == GP_OK)
        rc = gp_quadrature_init(&f->quad, (size_t)gp_option_number(me, req, "quadrature_points"),
                                err);
    double rescale = svgp_rescue_lengthscales(f->k, f->hyper, f->X, f->n, f->d);
    if (rc == GP_OK)
        rc = gp_inducing_select(sel, f->k, f->X, f->n, f->d, M, req->seed, f->Z, &f->m, err);
    if (rc)
        return rc;
    gp_kernel_get_params(f->k, f->theta);
    svgp_q_prior(f);
    rc = mean_init(f, model, err);
    if (rc == GP_OK)
        rc = optimise(f, req, lbfgs, &st, &model->diag, err);
    gp_svgp_terms t;
    if (rc == GP_OK)
        rc = build_post(f, im, &t, err);
    if (rc == GP_OK) {
        svgp_report(model, f, lbfgs, &st, &t, gp_inducing_selection_name(sel));
        if (f->p)
            memcpy(model->mean_coef, f->beta, f->p * sizeof *f->beta);
        if (rescale != 1.0)
            gp_model_info_number(model, "lengthscale_rescaled", rescale);
    }
    return rc;
}

/* A classifier (bernoulli, poisson) with ARD lengthscales fits under the
 * default priors unless the request states its own or asks for none (an
 * empty spec, "priors": "none"): measured on the five binary sets, the MAP
 * fit's log loss is lower on all five, sonar's by a third (ARD on 60 inputs
 * and 166 rows overfits), and it fits faster (bench/results/priors.md). The
 * model keeps the preset, so its answer says so. */
static int classifier_priors(gp_model *model, const gp_fit_request *req, gp_error *err)
{
    const gp_kernel *k = model->kernel;
    if (req->hyper != NULL || req->likelihood == GP_LIK_GAUSSIAN || k->n_lengthscale < 2)
        return GP_OK;
    int rc = gp_hyper_spec_new(&model->hyper, k, err);
    if (rc == GP_OK)
        gp_hyper_default_priors(model->hyper, k);
    return rc;
}

/* A softmax fit: its classes from the labels (the model's outputs), a zero
 * latent mean, and the ELBO's fixed draws. */
static int softmax_setup(gp_model *model, const gp_fit_request *req, svgp_fit *f, gp_error *err)
{
    if (req->mean != GP_MEAN_ZERO)
        return gp_error_set(err, GP_EUNSUPPORTED, "mean",
                            "mean: a softmax model's latents have a zero mean (each class's "
                            "level is learned by its own q(u))");
    size_t C;
    int rc = gp_softmax_classes(req->y, req->n, &C, err);
    if (rc == GP_OK)
        rc = gp_softmax_mc_init(&f->mc, C, GP_SOFTMAX_DRAWS, err);
    if (rc == GP_OK) {
        f->C = C;
        model->n_outputs = C;
    }
    return rc;
}

int svgp_fit_op(const gp_method *m, const gp_fit_request *req, gp_model **out, gp_error *err)
{
    const gp_method *me = m;
    gp_model *model;
    int rc = gp_model_new(me, req, &model, err);
    if (rc == GP_OK && (rc = classifier_priors(model, req, err)) != GP_OK)
        gp_model_free(model);
    if (rc != GP_OK)
        return rc;
    gp_inducing_post *im = calloc(1, sizeof *im);
    size_t nd = 0;
    double *X = NULL, *y = gp_alloc_doubles(req->n, err);
    if (gp_checked_size(req->n, req->d, &nd, err) == GP_OK)
        X = gp_alloc_doubles(nd, err);
    model->impl = im;
    rc = im && X && y ? GP_OK : GP_ENOMEM;
    svgp_fit f;
    memset(&f, 0, sizeof f);
    if (rc == GP_OK) {
        gp_model_standardize_points(model, req->X, req->n, X);
        /* The latent f of a non-Gaussian model is in natural units: labels as given. */
        if (req->likelihood == GP_LIK_GAUSSIAN)
            gp_model_working_targets(model, req->y, req->n, y);
        else
            memcpy(y, req->y, req->n * sizeof *y);
        f = (svgp_fit){.k = model->kernel, .lik = {req->likelihood, 0.0}, .X = X, .y = y,
                       .n = req->n, .d = req->d, .C = 1, .cancel = &req->cancel,
                       .hyper = model->hyper,
                       .optimize_z = gp_option_number(me, req, "optimize_inducing") != 0.0};
        if (req->likelihood == GP_LIK_SOFTMAX)
            rc = softmax_setup(model, req, &f, err);
        if (req->likelihood == GP_LIK_GAUSSIAN) {
            gp_noise_param_init(&f.np, req, y, req->n);
            f.lik.noise = f.np.start;
        }
        double *r = NULL;
        if (req->likelihood == GP_LIK_GAUSSIAN)
            r = gp_model_working_noise_alloc(model, req->noise_per_point, req->n, &rc, err);
        f.r = r;
        if (rc == GP_OK)
            rc = fit_into(model, req, &f, im, err);
        free(r);
    }
    svgp_fit_free(&f);
    free(X);
    free(y);
    if (rc) {
        gp_model_free(model);
        return rc == GP_ENOMEM ? gp_error_set(err, GP_ENOMEM, NULL, "out of memory") : rc;
    }
    *out = model;
    return GP_OK;
}
