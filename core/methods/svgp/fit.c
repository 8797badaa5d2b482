/* Fit of method "svgp": memory, settings, the fitted posterior and the fit entry. */
#include "core/methods/svgp/fit.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/methods/svgp/classes.h"
#include "core/methods/svgp/elbo.h"
#include "core/methods/svgp/internal.h"
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

static void fit_free(svgp_fit *f)
{
    free(f->Z);
    free(f->mq);
    free(f->Lq);
    free(f->free_idx);
    free(f->theta);
    free(f->gtheta);
    free(f->gz);
    free(f->gmean);
    free(f->gchol);
    free(f->save);
    free(f->H);
    free(f->beta);
    free(f->off);
    free(f->gbeta);
    svgp_work_free(&f->w);
    svgp_natgrad_buf_free(&f->nb);
    gp_softmax_mc_free(&f->mc);
}

/* Buffers for M inducing points and f->C latents; q starts at the prior N(0, I). */
static int fit_alloc(svgp_fit *f, size_t M, size_t cap, gp_error *err)
{
    size_t d = f->d, np = gp_kernel_n_params(f->k), C = f->C, mm = M * M * C;
    f->n_kp = np;
    f->Z = gp_alloc_doubles(d * M, err);
    f->mq = gp_alloc_doubles(M * C, err);
    f->Lq = gp_alloc_doubles(mm, err);
    f->free_idx = malloc((np + 1) * sizeof *f->free_idx);
    f->theta = gp_alloc_doubles(np + 1, err);
    f->gtheta = gp_alloc_doubles(np + 1, err);
    f->gz = gp_alloc_doubles(d * M, err);
    f->gmean = gp_alloc_doubles(M * C, err);
    f->gchol = gp_alloc_doubles(mm, err);
    f->save = gp_alloc_doubles(2 * mm + 2 * M * C, err);
    unsigned char *mask = malloc(np + 1);
    int ok = f->Z && f->mq && f->Lq && f->free_idx && f->theta && f->gtheta && f->gz &&
             f->gmean && f->gchol && f->save && mask;
    if (ok)
        ok = svgp_work_alloc_latents(&f->w, M, cap, C, err) == GP_OK &&
             svgp_natgrad_buf_alloc(&f->nb, M, err) == GP_OK;
    if (!ok) {
        free(mask);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    gp_kernel_get_params(f->k, f->theta);
    gp_hyper_free_mask(f->k, f->hyper, mask);
    for (size_t i = 0; i < np; i++)
        if (mask[i])
            f->free_idx[f->n_free++] = i;
    free(mask);
    return GP_OK;
}

/* Every latent's q = N(0, I) over the m inducing points chosen (the blocks
 * are laid out for the m chosen, which may be fewer than allocated). */
static void q_prior(svgp_fit *f)
{
    size_t m = f->m;
    memset(f->mq, 0, m * f->C * sizeof *f->mq);
    memset(f->Lq, 0, m * m * f->C * sizeof *f->Lq);
    for (size_t c = 0; c < f->C; c++)
        for (size_t i = 0; i < m; i++)
            f->Lq[c * m * m + i + i * m] = 1.0;
}

static void settings_read(const gp_fit_request *req, const gp_model *model, svgp_settings *st)
{
    const gp_method *me = model->method;
    st->budget = (int)gp_option_number(me, req, "max_iterations");
    st->tolerance = gp_option_number(me, req, "tolerance");
    st->batch = (size_t)gp_option_number(me, req, "batch_size");
    if (st->batch > req->n)
        st->batch = req->n;
    st->epochs = (int)gp_option_number(me, req, "epochs");
    st->lr = gp_option_number(me, req, "learning_rate");
    st->natgrad_step = gp_option_number(me, req, "natgrad_step");
    st->offset = -(double)req->n * log(model->y_scale);
}

/* The fitted posterior (mt = m, C = Lq Lq^T; a softmax fit's C classes side
 * by side, classes.h) and the bound's parts at the end. */
static int build_post(svgp_fit *f, gp_inducing_post *im, gp_svgp_terms *t, gp_error *err)
{
    svgp_eval e = svgp_fit_eval(f);
    int rc = svgp_expected_blocks(&e, f->X, f->d, f->n, f->y, &f->w, &t->expected_log_lik, err);
    if (rc)
        return rc;
    t->kl = svgp_kl_sum(f->mq, f->Lq, f->m, f->C);
    t->elbo = t->expected_log_lik - t->kl;
    size_t m = f->m;
    if ((rc = gp_inducing_post_alloc(im, m, f->d, err)) != GP_OK)
        return rc;
    if (f->C > 1 && (rc = svgp_classes_widen(im, f->C, err)) != GP_OK)
        return rc;
    memcpy(im->Z, f->Z, f->d * m * sizeof *f->Z);
    memcpy(im->L, f->w.L, m * m * sizeof *f->w.L);
    memcpy(im->mt, f->mq, m * f->C * sizeof *f->mq);
    for (size_t c = 0; c < f->C; c++) {
        double *S = im->C + c * m * m;
        cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)m, (blasint)m, 1.0,
                    f->Lq + c * m * m, (blasint)m, 0.0, S, (blasint)m);
        gp_symmetrize_from_lower(S, m, m);
    }
    im->jitter = f->w.jitter;
    return gp_inducing_post_prepare(im, f->k, err);
}

static void report(gp_model *model, const svgp_fit *f, int lbfgs,
                   const svgp_settings *st, const gp_svgp_terms *t, const char *selection)
{
    model->diag.objective = t->elbo + st->offset;
    model->diag.jitter = f->w.jitter;
    model->noise_variance = f->lik.type == GP_LIK_GAUSSIAN ? f->lik.noise : 0.0;
    gp_model_info_number(model, "inducing", (double)f->m);
    gp_model_info_string(model, "inducing_selection", selection);
    gp_model_info_number(model, "optimize_inducing", f->optimize_z ? 1.0 : 0.0);
    gp_model_info_string(model, "optimizer", lbfgs ? "lbfgs" : "adam");
    gp_model_info_number(model, "expected_log_lik", t->expected_log_lik + st->offset);
    gp_model_info_number(model, "kl", t->kl);
    if (f->lik.type == GP_LIK_BERNOULLI)
        gp_model_info_number(model, "quadrature_points", (double)f->quad.n);
    if (!lbfgs) {
        gp_model_info_number(model, "epochs", (double)st->epochs);
        gp_model_info_number(model, "batch_size", (double)st->batch);
    }
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

/* The lengthscales' share of a pair's scaled squared distance. */
static double scaled_r2(const gp_kernel *k, const double *a, const double *b)
{
    double r2 = 0.0;
    for (size_t t = 0; t < k->n_active; t++) {
        size_t j = k->active_dims ? k->active_dims[t] : t;
        double l = exp(k->log_lengthscale[k->n_lengthscale > 1 ? t : 0]);
        r2 += (a[j] - b[j]) * (a[j] - b[j]) / (l * l);
    }
    return r2;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Initial lengthscales too short for the data: on standardised inputs in d
 * dimensions a pair is about 2d apart in squared distance, so the default
 * lengthscale 1 makes k(x, x') ~ exp(-d) between almost every pair once d is
 * a few tens (sonar, spam): q(u) then only sees the prior, every gradient is
 * exp(-d) small and L-BFGS stops at once at ELBO ~ N log 1/2. When the
 * median scaled squared distance over (up to 200 evenly spaced) points
 * exceeds SVGP_R2_MAX, every free lengthscale is multiplied by the one factor
 * that brings the median to 1 (the median heuristic). Returns the factor (1:
 * unchanged). */
#define SVGP_R2_MAX 8.0

/* A lengthscale held singly: the caller said what it is, so the rescue
 * leaves every lengthscale as given (a single-leaf kernel: its lengthscales
 * are entries 1 .. n_lengthscale). A prior or a bound does not stop it: the
 * rescue moves the start, and a start outside a bound is put on it. */
static int lengthscales_held(const gp_kernel *k, const gp_hyper_spec *hs)
{
    for (size_t j = 0; hs && j < k->n_lengthscale; j++)
        if (hs->entry[1 + j].fixed)
            return 1;
    return 0;
}

/* The rescued starts inside their bounds. */
static void starts_within_bounds(gp_kernel *k, const gp_hyper_spec *hs)
{
    for (size_t j = 0; hs && j < k->n_lengthscale; j++) {
        double lo, hi;
        gp_hyper_entry_bounds(&hs->entry[1 + j], &lo, &hi);
        if (lo > 0.0 && k->log_lengthscale[j] < log(lo))
            k->log_lengthscale[j] = log(lo);
        if (hi < INFINITY && k->log_lengthscale[j] > log(hi))
            k->log_lengthscale[j] = log(hi);
    }
}
static double rescue_lengthscales(gp_kernel *k, const gp_hyper_spec *hs, const double *X,
                                  size_t n, size_t d)
{
    if (k->n_lengthscale == 0 || (k->fixed & GP_FIX_LENGTHSCALE) || n < 2 ||
        lengthscales_held(k, hs))
        return 1.0;
    size_t s = n < 200 ? n : 200, pairs = s * (s - 1) / 2, c = 0;
    double *r2 = malloc(pairs * sizeof *r2);
    if (r2 == NULL)
        return 1.0;
    for (size_t a = 0; a < s; a++)
        for (size_t b = a + 1; b < s; b++)
            r2[c++] = scaled_r2(k, X + (a * n / s) * d, X + (b * n / s) * d);
    qsort(r2, pairs, sizeof *r2, cmp_double);
    double med = r2[pairs / 2], factor = 1.0;
    free(r2);
    if (med > SVGP_R2_MAX && isfinite(med)) {
        factor = sqrt(med);
        for (size_t j = 0; j < k->n_lengthscale; j++)
            k->log_lengthscale[j] += log(factor);
        starts_within_bounds(k, hs);
    }
    return factor;
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
    settings_read(req, model, &st);
    int lbfgs = 1;
    int rc = choose_optimizer(me, req, M, st.batch, f->C, &lbfgs, err);
    if (rc == GP_OK)
        rc = fit_alloc(f, M, lbfgs ? f->n : st.batch, err);
    if (rc == GP_OK)
        rc = gp_quadrature_init(&f->quad, (size_t)gp_option_number(me, req, "quadrature_points"),
                                err);
    double rescale = rescue_lengthscales(f->k, f->hyper, f->X, f->n, f->d);
    if (rc == GP_OK)
        rc = gp_inducing_select(sel, f->k, f->X, f->n, f->d, M, req->seed, f->Z, &f->m, err);
    if (rc)
        return rc;
    gp_kernel_get_params(f->k, f->theta);
    q_prior(f);
    rc = mean_init(f, model, err);
    if (rc == GP_OK)
        rc = optimise(f, req, lbfgs, &st, &model->diag, err);
    gp_svgp_terms t;
    if (rc == GP_OK)
        rc = build_post(f, im, &t, err);
    if (rc == GP_OK) {
        report(model, f, lbfgs, &st, &t, gp_inducing_selection_name(sel));
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
    fit_free(&f);
    free(X);
    free(y);
    if (rc) {
        gp_model_free(model);
        return rc == GP_ENOMEM ? gp_error_set(err, GP_ENOMEM, NULL, "out of memory") : rc;
    }
    *out = model;
    return GP_OK;
}
