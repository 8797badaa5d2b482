/* Fit of method "gwi": settings, the data split, inducing inputs, the prior, and the fitted
 * model. */
#include "core/methods/gwi/fit.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/methods/gwi/internal.h"
#include "core/methods/gwi/loss.h"
#include "core/methods/gwi/model.h"
#include "core/methods/gwi/train.h"
#include "core/model/mean.h"

void gwi_read_settings(const gp_method *me, const gp_fit_request *req, gwi_settings *st)
{
    st->mean = strcmp(gp_option_string(me, req, "mean"), "mlp") == 0 ? GP_GWI_MEAN_MLP
                                                                      : GP_GWI_MEAN_KERNEL_SUM;
    st->hidden = (size_t)gp_option_number(me, req, "hidden");
    st->w2 = strcmp(gp_option_string(me, req, "w2_estimator"), "thesis_nonsym") == 0
                 ? GP_GWI_W2_THESIS_NONSYM
                 : GP_GWI_W2_BURES_SYM;
    st->objective = strcmp(gp_option_string(me, req, "objective"), "code_w") == 0
                        ? GP_GWI_OBJECTIVE_CODE_W
                        : GP_GWI_OBJECTIVE_THESIS_W2SQ;
    st->inducing = (size_t)gp_option_number(me, req, "inducing");
    st->factor_auto = gp_option_string(me, req, "inducing_factor") != NULL;
    st->factor = st->factor_auto ? NAN : gp_option_number(me, req, "inducing_factor");
    st->batch = (size_t)gp_option_number(me, req, "batch");
    st->w2_points = (size_t)gp_option_number(me, req, "w2_points");
    st->epochs = (int)gp_option_number(me, req, "epochs");
    st->patience = (int)gp_option_number(me, req, "patience");
    st->temper = gp_option_number(me, req, "temper") != 0.0;
    st->prior_sgpr = strcmp(gp_option_string(me, req, "prior"), "sgpr") == 0;
    st->optimize_inducing = gp_option_number(me, req, "optimize_inducing") != 0.0;
    st->learn_noise = gp_option_number(me, req, "learn_noise") != 0.0 && !req->noise_fixed;
    st->greedy = strcmp(gp_option_string(me, req, "inducing_selection"), "greedy") == 0;
    st->learning_rate = gp_option_number(me, req, "learning_rate");
    st->validation_fraction = gp_option_number(me, req, "validation_fraction");
}

/* Rows held out for validation: round(fraction n) (at least 1 when fraction
 * > 0 and n >= 3), leaving at least 2 to gwi_train on; none below 3 rows. */
static size_t validation_rows(size_t n, double fraction)
{
    if (n < 3)
        return 0;
    size_t v = (size_t)floor(fraction * (double)n + 0.5);
    if (fraction > 0.0 && v == 0)
        v = 1;
    return v > n - 2 ? n - 2 : v;
}

/* N_B for a training set of n rows: the option, or N/10 within [100, 1000]. */
static size_t batch_size(const gwi_settings *st, size_t n)
{
    size_t b = st->batch;
    if (b == 0)
        b = n / 10 < 100 ? 100 : n / 10 > 1000 ? 1000 : n / 10;
    return b < n ? b : n;
}

/* M for a training set of n rows. */
static size_t inducing_count(const gwi_settings *st, size_t n)
{
    size_t M = st->inducing;
    if (M == 0)
        M = (size_t)floor(st->factor * sqrt((double)n) + 0.5);
    if (M < 1)
        M = 1;
    return M > n ? n : M;
}

static void data_free(gwi_data *D)
{
    free(D->Xtr);
    free(D->ytr);
    free(D->Xva);
    free(D->yva);
    memset(D, 0, sizeof *D);
}

/* Standardise, then split by a seeded permutation (rows keep their order). */
static int data_split(const gp_model *model, const gp_fit_request *req, double fraction,
                      gwi_data *D, gp_error *err)
{
    size_t n = req->n, d = req->d;
    memset(D, 0, sizeof *D);
    D->d = d;
    D->nva = validation_rows(n, fraction);
    D->ntr = n - D->nva;
    double *P = NULL, *t = NULL;
    unsigned char *held = calloc(n, 1);
    size_t *perm = malloc(n * sizeof *perm);
    int rc = held && perm ? GP_OK : gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    if (rc == GP_OK)
        rc = gwi_alloc2(&P, d, n, err);
    if (rc == GP_OK)
        rc = gwi_alloc2(&t, n, 1, err);
    if (rc == GP_OK)
        rc = gwi_alloc2(&D->Xtr, d, D->ntr, err);
    if (rc == GP_OK)
        rc = gwi_alloc2(&D->ytr, D->ntr, 1, err);
    if (rc == GP_OK)
        rc = gwi_alloc2(&D->Xva, d, D->nva, err);
    if (rc == GP_OK)
        rc = gwi_alloc2(&D->yva, D->nva, 1, err);
    if (rc == GP_OK) {
        gp_model_standardize_points(model, req->X, n, P);
        gp_model_working_targets(model, req->y, n, t);
        gp_rng rng;
        gp_rng_derive(&rng, req->seed, STREAM_SPLIT);
        for (size_t i = 0; i < n; i++)
            perm[i] = i;
        gwi_draw_prefix(&rng, perm, n, D->nva);
        for (size_t i = 0; i < D->nva; i++)
            held[perm[i]] = 1;
        size_t a = 0, b = 0;
        for (size_t i = 0; i < n; i++) {
            double *X = held[i] ? D->Xva + b * d : D->Xtr + a * d;
            memcpy(X, P + i * d, d * sizeof *P);
            if (held[i])
                D->yva[b++] = t[i];
            else
                D->ytr[a++] = t[i];
        }
    }
    free(P);
    free(t);
    free(held);
    free(perm);
    if (rc)
        data_free(D);
    return rc;
}

/* B1: up to M distinct training inputs, uniformly without replacement (P6),
 * with their targets. */
static int choose_inducing(const gwi_data *D, size_t M, uint64_t seed, double *Z, double *yZ,
                           size_t *m, gp_error *err)
{
    size_t n = D->ntr, d = D->d, taken = 0;
    size_t *perm = malloc(n * sizeof *perm);
    if (perm == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    gp_rng rng;
    gp_rng_derive(&rng, seed, STREAM_INDUCING);
    for (size_t i = 0; i < n; i++)
        perm[i] = i;
    for (size_t i = 0; i < n && taken < M; i++) {
        gwi_draw_prefix(&rng, perm + i, n - i, 1); /* one more draw, until M distinct inputs */
        const double *p = D->Xtr + perm[i] * d;
        int dup = 0;
        for (size_t k = 0; k < taken && !dup; k++)
            dup = memcmp(Z + k * d, p, d * sizeof *p) == 0;
        if (dup)
            continue;
        memcpy(Z + taken * d, p, d * sizeof *p);
        yZ[taken++] = D->ytr[perm[i]];
    }
    free(perm);
    *m = taken;
    return GP_OK;
}

/* The prior's fit (either kind) reports iteration 0 of the epoch budget: a
 * job shows it under way and can cancel it. */
typedef struct progress_ctx {
    const gp_fit_request *req;
    int epochs;
} progress_ctx;

static int hyper_progress(void *ctx, int iteration, int max_iterations, double objective)
{
    (void)iteration;
    (void)max_iterations;
    const progress_ctx *pc = ctx;
    return pc->req->progress(pc->req->progress_ctx, 0, pc->epochs, objective);
}

/* [D] prior "sgpr" (P7): Titsias' collapsed bound on every training row,
 * with Z moving too when optimize_inducing (the thesis learns GWI-SVGP's Z,
 * B.7; here it is learned by the bound, before the W2 training); the
 * hyperparameters and Z are then frozen as in the thesis. Z gets the
 * optimised inputs. */
static int fit_prior_sgpr(gp_model *model, const gp_fit_request *req, const gwi_settings *st,
                          const gwi_data *D, const double *H, double *Z, size_t m, gp_error *err)
{
    gp_noise_param np;
    gp_noise_param_init(&np, req, D->ytr, D->ntr);
    progress_ctx pc = {req, st->epochs};
    gp_fit_request quiet = *req;
    quiet.progress = req->progress ? hyper_progress : NULL;
    quiet.progress_ctx = &pc;
    double f = NAN;
    gp_collapsed_data data = {D->Xtr, D->ytr, D->ntr, D->d, NULL, NULL, H,
                              H ? gp_mean_n_coef(model->mean_type, D->d) : 0, model->mean_coef};
    gp_inducing_fit_spec spec = {.fn = gp_collapsed_objective, .ctx = &data,
                                 .optimize_z = st->optimize_inducing,
                                 .max_iterations = 200, .tolerance = 1e-9,
                                 .max_total = st->epochs, .result_f = &f};
    int rc = gp_inducing_optimise(model->kernel, &np, &model->noise_variance, Z, m, &quiet, &spec,
                                  &model->diag, err);
    /* the profiled beta of the hyperparameters kept (the search's last
     * evaluation need not be at them) */
    double f_end;
    if (rc == GP_OK && H &&
        gp_collapsed_objective(&data, model->kernel, model->noise_variance, Z, m, &f_end, NULL,
                               NULL) != GP_OK)
        rc = gp_error_set(err, GP_ENOTPD, NULL, "the prior's bound fails at its own optimum");
    gp_collapsed_data_release(&data);
    gp_model_info_number(model, "prior_objective", f);
    return rc;
}

/* B2: the prior's hyperparameters by the exact marginal likelihood on (Z,
 * y_Z) [T (B.58)] (or fit_prior_sgpr), then frozen. */
static int fit_prior(gp_model *model, const gp_fit_request *req, const gwi_settings *st,
                     const gwi_data *D, const double *H, double *Z, const double *yZ, size_t m,
                     gp_error *err)
{
    if (st->prior_sgpr)
        return fit_prior_sgpr(model, req, st, D, H, Z, m, err);
    gp_noise_param np;
    gp_noise_param_init(&np, req, yZ, m);
    progress_ctx pc = {req, st->epochs};
    gp_driver_options opt;
    gp_driver_default_options(&opt);
    opt.seed = req->seed;
    opt.progress = req->progress ? hyper_progress : NULL;
    opt.progress_ctx = &pc;
    opt.max_total = st->epochs;
    opt.cancel = &req->cancel;
    gp_driver_result res;
    memset(&res, 0, sizeof res);
    int rc = gp_hyper_fit_points(model->kernel, &np, req->hyper, &model->noise_variance, Z, m, yZ, &opt,
                                 &res, err);
    gp_model_info_number(model, "prior_objective", -res.f);
    return rc;
}

/* ---- a mean function: the prior's mean, GP(h^T beta, k) ----
 * beta is the prior's (profiled by prior sgpr's bound; least squares on the
 * training rows for prior inducing) and frozen with its hyperparameters;
 * Q and P shifted by the same function are as far apart in W2, so gwi
 * trains its own mean (kernel_sum or the network) on the residual targets
 * y - h^T beta against GP(0, k), and core/model/model.c adds h^T beta back. */

/* The basis rows of the training and validation points (*Htr, *Hva; NULL
 * for a zero mean). */
static int mean_bases(const gp_model *model, const gwi_data *D, double **Htr, double **Hva,
                      gp_error *err)
{
    *Htr = *Hva = NULL;
    if (model->mean_type == GP_MEAN_ZERO)
        return GP_OK;
    *Htr = gp_model_mean_basis(model, D->Xtr, D->ntr, err);
    *Hva = gp_model_mean_basis(model, D->Xva, D->nva, err);
    return *Htr && *Hva ? GP_OK : GP_ENOMEM;
}

/* beta by least squares on the training rows (prior inducing: M points
 * are too few to carry 1 + d coefficients beside the kernel's). */
static int mean_least_squares(gp_model *model, const gwi_data *D, const double *H, gp_error *err)
{
    size_t p = gp_mean_n_coef(model->mean_type, D->d), n = D->ntr;
    double *G = gp_alloc_doubles(p * p, err);
    if (G == NULL)
        return GP_ENOMEM;
    cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)p, (blasint)n, 1.0, H,
                (blasint)n, 0.0, G, (blasint)p);
    cblas_dgemv(CblasColMajor, CblasTrans, (blasint)n, (blasint)p, 1.0, H, (blasint)n, D->ytr, 1,
                0.0, model->mean_coef, 1);
    int rc = gp_mean_solve_normal(G, model->mean_coef, p, err);
    free(G);
    return rc;
}

/* y -= H beta on the training and validation rows. */
static void mean_residuals(const gp_model *model, gwi_data *D, const double *Htr,
                           const double *Hva)
{
    size_t p = gp_mean_n_coef(model->mean_type, D->d);
    cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)D->ntr, (blasint)p, -1.0, Htr,
                (blasint)D->ntr, model->mean_coef, 1, 1.0, D->ytr, 1);
    if (D->nva)
        cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)D->nva, (blasint)p, -1.0, Hva,
                    (blasint)D->nva, model->mean_coef, 1, 1.0, D->yva, 1);
}

/* The workspace of the largest fit (with factor auto: the grid's largest
 * factor, worst_factor). */
static int size_guard(const gp_fit_request *req, const gwi_settings *st0, double worst_factor,
                      gp_error *err)
{
    gwi_settings big = *st0;
    const gwi_settings *st = &big;
    if (big.factor_auto)
        big.factor = worst_factor;
    double n = (double)req->n, d = (double)req->d, m = (double)inducing_count(st, req->n);
    double nb = (double)batch_size(st, req->n), ns = fmin((double)st->w2_points, n);
    double h = st->mean == GP_GWI_MEAN_MLP ? (double)st->hidden : 0.0;
    double need = 3.0 * n * (d + 1.0) + (st->prior_sgpr ? 3.0 * m * n : 0.0) +
                  6.0 * m * (nb + ns) + 2.0 * m * fmax(nb, ns) + 12.0 * ns * ns + 8.0 * m * m +
                  (4.0 * h + d) * (nb + ns) + 2.0 * nb * ns + 3.0 * (h * h + h * d);
    double cap = (double)gp_fit_point_cap(req);
    if (need > cap * cap)
        return gp_error_set(err, GP_ETOOBIG, "options.inducing",
                            "gwi with %.0f inducing points, batch %.0f and %.0f W2 points on %zu "
                            "rows needs %.1f GB of workspace, above the budget of an exact fit "
                            "of max_train_points = %.0f points (%.1f GB): use fewer inducing "
                            "points, a smaller batch or raise --max-train-points",
                            m, nb, ns, req->n, need * 8e-9, cap, cap * cap * 8e-9);
    return GP_OK;
}

static const char *mean_name(gp_gwi_mean_kind k)
{
    return k == GP_GWI_MEAN_MLP ? "mlp" : "kernel_sum";
}

static void report(gp_model *model, const trainer *T, size_t m, double alpha, double nll)
{
    const gwi_data *D = T->D;
    model->diag.objective = nll + log(model->y_scale);
    model->diag.iterations = T->epochs_run;
    model->diag.evaluations = T->steps;
    model->diag.converged = T->stopped_early;
    gp_model_info_number(model, "inducing", (double)m);
    if (T->st->inducing == 0) /* M came from the factor */
        gp_model_info_number(model, "inducing_factor", T->st->factor);
    gp_model_info_string(model, "mean", mean_name(T->s->mean));
    gp_model_info_number(model, "train_rows", (double)D->ntr);
    gp_model_info_number(model, "validation_rows", (double)D->nva);
    gp_model_info_number(model, "batch", (double)T->nb);
    gp_model_info_number(model, "w2_points", (double)T->ns);
    gp_model_info_number(model, "epochs_run", (double)T->epochs_run);
    gp_model_info_number(model, "best_epoch", (double)T->best_epoch);
    gp_model_info_number(model, "skipped_steps", (double)T->skipped);
    gp_model_info_number(model, "temper", alpha);
    gp_model_info_number(model, "untempered_nll", T->best_nll + log(model->y_scale));
}

/* B3-B5 with the prior fixed: gwi_train, gwi_temper, keep the posterior. */
static int train_into(gp_model *model, const gp_fit_request *req, const gwi_settings *st,
                      const gwi_data *D, gp_gwi_setup *s, double jitter, gwi_impl *im,
                      gp_error *err)
{
    trainer T;
    memset(&T, 0, sizeof T);
    T.s = s, T.D = D, T.st = st, T.req = req, T.y_scale = model->y_scale;
    T.nb = batch_size(st, D->ntr);
    T.ns = st->w2_points < D->ntr ? st->w2_points : D->ntr;
    T.np = gp_gwi_n_params(s);
    im->n_theta = T.np;
    int rc = gwi_alloc2(&im->theta, T.np, 1, err);
    T.theta = im->theta;
    if (rc == GP_OK)
        rc = gp_gwi_work_new(s, T.nb, T.ns, &T.w, err);
    if (rc == GP_OK)
        rc = gwi_trainer_init(&T, err);
    if (rc == GP_OK) {
        uint64_t net_seed = 0;
        gp_rng rng;
        gp_rng_derive(&rng, req->seed, STREAM_NETWORK);
        net_seed = gp_rng_next(&rng);
        rc = gp_gwi_init(s, D->Xtr, D->ytr, D->ntr, net_seed, T.theta, err);
    }
    if (rc == GP_OK)
        rc = gwi_train(&T, err);
    if (rc == GP_OK)
        model->noise_variance = gp_gwi_noise(s, T.theta);
    double alpha = 1.0, nll = 0.0;
    if (rc == GP_OK)
        rc = gwi_temper(&T, &alpha, &nll, err);
    if (rc == GP_OK)
        rc = gwi_build_post(s, T.theta, jitter, alpha, &im->post, err);
    if (rc == GP_OK)
        rc = gp_inducing_post_prepare(&im->post, model->kernel, err);
    if (rc == GP_OK)
        report(model, &T, s->m, alpha, nll);
    gwi_trainer_free(&T);
    gp_gwi_work_free(T.w);
    return rc;
}

static int fit_into(gp_model *model, const gp_fit_request *req, const gwi_settings *st,
                    gwi_impl *im, gp_error *err)
{
    gwi_data D;
    int rc = data_split(model, req, st->validation_fraction, &D, err);
    if (rc)
        return rc;
    size_t M = inducing_count(st, D.ntr), m = 0, d = D.d;
    double *Z = NULL, *yZ = NULL, *Lk = NULL, jitter = 0.0, *Htr = NULL, *Hva = NULL;
    rc = mean_bases(model, &D, &Htr, &Hva, err);
    if (rc == GP_OK && Htr && !st->prior_sgpr) { /* the inducing points' targets: residuals */
        rc = mean_least_squares(model, &D, Htr, err);
        if (rc == GP_OK)
            mean_residuals(model, &D, Htr, Hva);
    }
    if (rc == GP_OK)
        rc = gwi_alloc2(&Z, d, M, err);
    if (rc == GP_OK)
        rc = gwi_alloc2(&yZ, M, 1, err);
    if (rc == GP_OK && st->greedy) /* [D] sgpr's choice, under the starting kernel */
        rc = gp_inducing_select(GP_INDUCING_GREEDY, model->kernel, D.Xtr, D.ntr, d, M, req->seed,
                                Z, &m, err);
    else if (rc == GP_OK)
        rc = choose_inducing(&D, M, req->seed, Z, yZ, &m, err);
    if (rc == GP_OK)
        rc = fit_prior(model, req, st, &D, st->prior_sgpr ? Htr : NULL, Z, yZ, m, err);
    if (rc == GP_OK && Htr && st->prior_sgpr)
        mean_residuals(model, &D, Htr, Hva);
    if (rc == GP_OK)
        rc = gwi_alloc2(&Lk, m, m, err);
    if (rc == GP_OK)
        rc = gp_inducing_kuu_factor(model->kernel, Z, m, Lk, &jitter, err);
    if (rc == GP_OK) {
        gp_gwi_setup s = {.k = model->kernel, .s2 = model->noise_variance, .Z = Z, .m = m,
                          .d = d, .Lk = Lk, .mean = st->mean, .hidden = st->hidden,
                          .w2 = st->w2, .objective = st->objective, .n_total = D.ntr,
                          .learn_noise = st->learn_noise};
        im->mean = st->mean;
        im->hidden = st->hidden;
        im->learn_noise = st->learn_noise;
        model->diag.jitter = jitter;
        rc = train_into(model, req, st, &D, &s, jitter, im, err);
    }
    free(Z);
    free(yZ);
    free(Lk);
    free(Htr);
    free(Hva);
    data_free(&D);
    return rc;
}

int gwi_fit_once(const gp_method *m, const gp_fit_request *req, const gwi_settings *st,
                 gp_model **out, gp_error *err)
{
    gp_model *model;
    int rc = gp_model_new(m, req, &model, err);
    if (rc != GP_OK)
        return rc;
    gwi_impl *im = calloc(1, sizeof *im);
    model->impl = im;
    if (im == NULL)
        rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    /* serial BLAS: the same bits for any thread count (replayable fits) */
    gp_blas_serial_begin();
    if (rc == GP_OK)
        rc = fit_into(model, req, st, im, err);
    gp_blas_serial_end();
    if (rc) {
        gp_model_free(model);
        return rc;
    }
    *out = model;
    return GP_OK;
}

int gwi_check_settings(const gp_fit_request *req, const gwi_settings *st, double worst_factor,
                       gp_error *err)
{
    if (st->greedy && !st->prior_sgpr) /* greedy points have no targets of their own to fit on */
        return gp_error_set(err, GP_EINVAL, "options.inducing_selection",
                            "inducing_selection greedy needs prior sgpr (prior inducing fits "
                            "the inducing points' own targets, so they must be training rows "
                            "drawn at random)");
    if (st->factor_auto && st->inducing != 0)
        return gp_error_set(err, GP_EINVAL, "options.inducing_factor",
                            "inducing_factor auto chooses M itself: leave inducing at 0 (or give "
                            "a number for inducing_factor)");
    if (st->factor_auto && !(st->validation_fraction > 0.0))
        return gp_error_set(err, GP_EINVAL, "options.inducing_factor",
                            "inducing_factor auto chooses by the validation NLL: it needs "
                            "validation_fraction > 0");
    return size_guard(req, st, worst_factor, err);
}
