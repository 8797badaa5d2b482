/* The fit of a coregionalised sgpr or svgp model: core/coreg/sparse_fit.h.
 *
 * One L-BFGS run (gp_driver_minimize) over x = (the shared parameters'
 * packing, core/coreg/params.h; Z when optimize_inducing; svgp: q's mean and
 * its lower factor with the diagonal as its log, as svgp's own full-batch
 * fit packs it). svgp's q starts at the collapsed optimum of the starting
 * hyperparameters, where its ELBO equals sgpr's bound. */
#include "core/coreg/sparse_fit.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/coreg/sparse_impl.h"
#include "core/coreg/sparse_train.h"
#include "core/linalg/linalg.h"
#include "core/optim/driver.h"


/* ---- the objective ---- */

typedef struct sfit {
    gp_coreg_sparse_impl *im;
    gp_coreg_sparse_kind kind;
    gp_coreg_sparse_data data;
    int optz;
    size_t dim0, dim;          /* the parameters' packing; all of x */
    double *mq, *Lq;           /* svgp */
    double *gk, *gA, *gs, *gz, *gm, *gL, *gB;
    const gp_cancel *cancel;
} sfit;

static void sfit_free(sfit *f)
{
    free(f->mq);
    free(f->Lq);
    free(f->gk);
    free(f->gA);
    free(f->gs);
    free(f->gz);
    free(f->gm);
    free(f->gL);
    free(f->gB);
}

static void pack_q(const sfit *f, double *x)
{
    size_t K = f->im->K, o = K;
    memcpy(x, f->mq, K * sizeof *x);
    for (size_t c = 0; c < K; c++)
        for (size_t r = c; r < K; r++)
            x[o++] = r == c ? log(f->Lq[r + c * K]) : f->Lq[r + c * K];
}

static void apply_q(sfit *f, const double *x)
{
    size_t K = f->im->K, o = K;
    memcpy(f->mq, x, K * sizeof *x);
    for (size_t c = 0; c < K; c++)
        for (size_t r = c; r < K; r++)
            f->Lq[r + c * K] = r == c ? exp(x[o++]) : x[o++];
}

static void pack_all(const sfit *f, double *x)
{
    gp_coreg_sparse_impl *im = f->im;
    gp_coreg_params_pack(&im->cp, x);
    size_t o = f->dim0;
    if (f->optz) {
        memcpy(x + o, im->Z, im->d * im->m * sizeof *x);
        o += im->d * im->m;
    }
    if (f->kind == GP_COREG_SPARSE_SVGP)
        pack_q(f, x + o);
}

static void apply_all(sfit *f, const double *x)
{
    gp_coreg_sparse_impl *im = f->im;
    gp_coreg_params_unpack(&im->cp, x);
    gp_coreg_sparse_build_A(&im->cp, im->A);
    size_t o = f->dim0;
    if (f->optz) {
        memcpy(im->Z, x + o, im->d * im->m * sizeof *x);
        o += im->d * im->m;
    }
    if (f->kind == GP_COREG_SPARSE_SVGP)
        apply_q(f, x + o);
}

/* -F and its gradient; +inf where F cannot be evaluated. */
static double objective(void *ctx, const double *x, double *g)
{
    sfit *f = ctx;
    gp_coreg_sparse_impl *im = f->im;
    if (gp_cancel_requested(f->cancel))
        return INFINITY;
    apply_all(f, x);
    gp_coreg_sparse_at at = gp_coreg_sparse_impl_at(im);
    int svgp = f->kind == GP_COREG_SPARSE_SVGP;
    gp_coreg_sparse_grad gr = {f->gk, f->gA, f->gs, f->optz ? f->gz : NULL,
                               svgp ? f->gm : NULL, svgp ? f->gL : NULL};
    double F;
    gp_error err;
    int rc = svgp ? gp_coreg_svgp_elbo(&at, &f->data, f->mq, f->Lq, &F, NULL, &gr, &err)
                  : gp_coreg_sgpr_bound(&at, &f->data, &F, &gr, NULL, &err);
    if (rc || !isfinite(F))
        return INFINITY;
    gp_coreg_sparse_chain(&im->cp, f->gk, f->gA, f->gs, f->gB, g);
    size_t o = f->dim0;
    for (size_t i = 0; f->optz && i < im->d * im->m; i++)
        g[o++] = f->gz[i];
    if (svgp) {
        size_t K = im->K;
        memcpy(g + o, f->gm, K * sizeof *g);
        o += K;
        for (size_t c = 0; c < K; c++)
            for (size_t r = c; r < K; r++)
                g[o++] = f->gL[r + c * K] * (r == c ? f->Lq[r + c * K] : 1.0);
    }
    for (size_t i = 0; i < f->dim; i++)
        g[i] = -g[i];
    return -F;
}

/* ---- setup ---- */

static int sfit_alloc(sfit *f, gp_coreg_sparse_impl *im, gp_error *err)
{
    size_t K = im->K, p = im->cp.p, q = im->cp.q, L = q * im->per_q;
    f->dim0 = gp_coreg_params_dim(&im->cp);
    f->dim = f->dim0 + (f->optz ? im->d * im->m : 0) +
             (f->kind == GP_COREG_SPARSE_SVGP ? K + K * (K + 1) / 2 : 0);
    f->gk = gp_alloc_doubles(q * im->cp.n_kparams + 1, err);
    f->gA = gp_alloc_doubles(p * L, err);
    f->gs = gp_alloc_doubles(p, err);
    f->gz = gp_alloc_doubles(im->d * im->m, err);
    f->gB = gp_alloc_doubles(q * p * p, err);
    int ok = f->gk && f->gA && f->gs && f->gz && f->gB;
    if (ok && f->kind == GP_COREG_SPARSE_SVGP) {
        f->mq = gp_alloc_doubles(K, err);
        f->Lq = gp_alloc_doubles(K * K, err);
        f->gm = gp_alloc_doubles(K, err);
        f->gL = gp_alloc_doubles(K * K, err);
        ok = f->mq && f->Lq && f->gm && f->gL;
    }
    return ok ? GP_OK : GP_ENOMEM;
}

/* svgp's q at the collapsed optimum of the current parameters. */
static int q_start(sfit *f, gp_error *err)
{
    gp_coreg_sparse_impl *im = f->im;
    gp_coreg_sparse_at at = gp_coreg_sparse_impl_at(im);
    gp_coreg_sparse_post post = {0};
    double F;
    int rc = gp_coreg_sgpr_bound(&at, &f->data, &F, NULL, &post, err);
    if (rc)
        return rc;
    size_t K = im->K;
    memcpy(f->mq, post.mt, K * sizeof *f->mq);
    memcpy(f->Lq, post.C, K * K * sizeof *f->Lq);
    if (LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)K, f->Lq, (lapack_int)K) != 0)
        rc = gp_error_set(err, GP_ENOTPD, NULL, "B^{-1} is not positive definite");
    gp_zero_upper(f->Lq, K, K);
    gp_coreg_sparse_post_free(&post);
    return rc;
}

/* svgp after L-BFGS (as svgp's own fit ends, svgp_refine_q): q made optimal
 * for the fitted parameters by one full-batch natural-gradient step of 1
 * (exact for the gaussian likelihood), kept when the ELBO does not drop. */
static int refine_q(sfit *f, gp_error *err)
{
    gp_coreg_sparse_impl *im = f->im;
    gp_coreg_sparse_at at = gp_coreg_sparse_impl_at(im);
    size_t K = im->K;
    double *mq0 = gp_alloc_doubles(K, err), *Lq0 = gp_alloc_doubles(K * K, err), F0, F1;
    int rc = mq0 && Lq0 ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK)
        rc = gp_coreg_svgp_elbo(&at, &f->data, f->mq, f->Lq, &F0, NULL, NULL, err);
    if (rc == GP_OK) {
        memcpy(mq0, f->mq, K * sizeof *mq0);
        memcpy(Lq0, f->Lq, K * K * sizeof *Lq0);
        gp_error e2;
        int r2 = gp_coreg_svgp_natgrad(&at, &f->data, 1.0, f->mq, f->Lq, &e2);
        if (r2 == GP_OK)
            r2 = gp_coreg_svgp_elbo(&at, &f->data, f->mq, f->Lq, &F1, NULL, NULL, &e2);
        if (r2 == GP_ENOMEM)
            rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        else if (r2 != GP_OK || !(F1 >= F0)) {
            memcpy(f->mq, mq0, K * sizeof *mq0);
            memcpy(f->Lq, Lq0, K * K * sizeof *Lq0);
        }
    }
    free(mq0);
    free(Lq0);
    return rc;
}

/* The fitted posterior: sgpr's optimal q, or svgp's q. */
static int final_post(sfit *f, int full, double *F, gp_error *err)
{
    gp_coreg_sparse_impl *im = f->im;
    gp_coreg_sparse_at at = gp_coreg_sparse_impl_at(im);
    if (f->kind == GP_COREG_SPARSE_SGPR)
        return gp_coreg_sgpr_bound(&at, &f->data, F, NULL, &im->post, err);
    size_t K = im->K;
    int rc = full ? gp_coreg_svgp_elbo(&at, &f->data, f->mq, f->Lq, F, NULL, NULL, err) : GP_OK;
    im->post.m = im->m;
    im->post.K = K;
    im->post.mt = gp_alloc_doubles(K, err);
    im->post.C = gp_alloc_doubles(K * K, err);
    if (rc == GP_OK && (!im->post.mt || !im->post.C))
        rc = GP_ENOMEM;
    if (rc)
        return rc;
    memcpy(im->post.mt, f->mq, K * sizeof *f->mq);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (blasint)K, (blasint)K, (blasint)K, 1.0,
                f->Lq, (blasint)K, f->Lq, (blasint)K, 0.0, im->post.C, (blasint)K);
    gp_symmetrize_average(im->post.C, K, K);
    return GP_OK;
}

/* Doubles of the full-batch evaluation (its K x M buffers and the K x K
 * ones; svgp's L-BFGS history of q's K^2 / 2 coordinates). */
static double full_need(size_t K, size_t M, gp_coreg_sparse_kind kind)
{
    double dK = (double)K;
    return (double)M * (4.0 * dK + 8.0) + 8.0 * dK * dK +
           (kind == GP_COREG_SPARSE_SVGP ? 24.0 * dK * dK : 0.0);
}

/* The optimiser (*lbfgs: full batch; else svgp's minibatch Adam) and the
 * memory check, before the big buffers: within the budget of an exact fit
 * of max_train_points points (sgpr's and svgp's rule). */
static int check_sizes(const gp_method *me, const gp_fit_request *req, size_t K, size_t M,
                       gp_coreg_sparse_kind kind, int *lbfgs, gp_error *err)
{
    double cap = (double)gp_fit_point_cap(req), need = full_need(K, M, kind);
    *lbfgs = 1;
    if (kind == GP_COREG_SPARSE_SVGP) {
        const char *opt = gp_option_string(me, req, "optimizer");
        *lbfgs = strcmp(opt, "lbfgs") == 0 || (strcmp(opt, "auto") == 0 && need <= cap * cap);
        if (!*lbfgs) {
            size_t b = (size_t)gp_option_number(me, req, "batch_size");
            double Mb = (double)(b < req->n ? b : req->n) * (double)req->n_outputs;
            need = Mb * (4.0 * (double)K + 8.0) + 12.0 * (double)K * (double)K;
        }
    }
    if (need > cap * cap)
        return gp_error_set(err, GP_ETOOBIG, *lbfgs ? "options.inducing" : "options.batch_size",
                            "%s: a coregionalised %s with %zu inducing values (latents x "
                            "inducing points) on %zu observed entries needs %.1f GB of "
                            "workspace, above the budget of an exact fit of max_train_points "
                            "= %.0f points: use fewer inducing points, latents or rank%s",
                            *lbfgs ? "options.inducing" : "options.batch_size", me->name, K, M,
                            need * 8e-9, cap,
                            kind == GP_COREG_SPARSE_SVGP ? ", or svgp's optimizer adam" : "");
    return GP_OK;
}

static void report(gp_model *model, const gp_method *me, const gp_fit_request *req,
                   const sfit *f, double F, const char *sel, int lbfgs)
{
    const gp_coreg_sparse_impl *im = f->im;
    double offset = 0.0;
    for (size_t a = 0; a < f->data.M; a++)
        offset -= log(im->cp.y_scale[f->data.out[a]]);
    model->diag.objective = F + offset;
    gp_model_info_number(model, "inducing", (double)im->m);
    gp_model_info_string(model, "inducing_selection", sel);
    gp_model_info_number(model, "optimize_inducing", gp_option_number(me, req, "optimize_inducing"));
    if (f->kind == GP_COREG_SPARSE_SVGP)
        gp_model_info_string(model, "optimizer", lbfgs ? "lbfgs" : "adam");
}

/* ---- the fit ---- */

static int standardise_inputs(gp_model *model, const gp_fit_request *req, double **X,
                              gp_error *err)
{
    if (req->standardize)
        gp_column_stats(req->X, req->n, req->d, model->x_mean, model->x_scale);
    return gp_model_points(model, req->X, req->n, X, err);
}

static int optimise(sfit *f, const gp_method *me, const gp_fit_request *req, double offset,
                    int iterations, gp_diagnostics *diag, gp_error *err)
{
    double *x = gp_alloc_doubles(f->dim, err);
    if (x == NULL)
        return GP_ENOMEM;
    pack_all(f, x);
    gp_driver_options opt;
    gp_driver_default_options(&opt);
    opt.max_iterations = iterations;
    opt.iteration_base = diag->iterations; /* progress continues across rounds */
    opt.max_total = (int)gp_option_number(me, req, "max_iterations");
    opt.tolerance = gp_option_number(me, req, "tolerance");
    opt.progress = req->progress;
    opt.progress_ctx = req->progress_ctx;
    opt.cancel = &req->cancel;
    opt.objective_offset = offset;
    opt.seed = req->seed;
    gp_driver_result res;
    int rc = gp_driver_minimize(objective, f, x, f->dim, &opt, &res, err);
    diag->iterations += res.iterations;
    diag->evaluations += res.evaluations;
    diag->converged = res.converged;
    if (rc == GP_OK)
        apply_all(f, x); /* the best point */
    free(x);
    return rc;
}

/* sgpr: one L-BFGS run. svgp: SVGP_ROUNDS runs sharing the budget, each
 * followed by refine_q: L-BFGS moves q's K (K + 3) / 2 coordinates slowly
 * (their scale is far from the parameters'), and hyperparameters fitted
 * against a stale q drift; restarting from the optimal q of the current
 * parameters keeps the two together, and the fit ends with q optimal. */
#define SVGP_ROUNDS 4
static int full_batch(sfit *f, const gp_method *me, const gp_fit_request *req, double offset,
                      gp_diagnostics *diag, gp_error *err)
{
    int budget = (int)gp_option_number(me, req, "max_iterations");
    if (f->kind == GP_COREG_SPARSE_SGPR)
        return optimise(f, me, req, offset, budget, diag, err);
    int rc = GP_OK, done = 0;
    for (int r = 0; rc == GP_OK && r < SVGP_ROUNDS && done < budget; r++) {
        int it = (budget - done) / (SVGP_ROUNDS - r);
        rc = optimise(f, me, req, offset, it > 0 ? it : 1, diag, err);
        done = diag->iterations;
        if (rc == GP_OK)
            rc = refine_q(f, err);
        if (rc == GP_OK && diag->converged && r > 0)
            break;
    }
    return rc;
}

/* The model's common fields as exact's coregionalised model has them: its
 * kernel is latent 0's, its noise output 0's (every number is in
 * model->coreg), one output's standardisation when p is 1. */
static int fill_common(gp_model *model, const gp_coreg_params *cp, gp_error *err)
{
    double *theta = gp_alloc_doubles(cp->n_kparams + 1, err);
    if (theta == NULL)
        return GP_ENOMEM;
    gp_kernel_get_params(cp->kernels[0], theta);
    gp_kernel_set_params(model->kernel, theta);
    model->kernel->fixed = cp->kernels[0]->fixed;
    free(theta);
    model->noise_variance = cp->noise[0];
    if (cp->p == 1) {
        model->y_mean = cp->y_mean[0];
        model->y_scale = cp->y_scale[0];
    }
    return GP_OK;
}

/* svgp's minibatch path (core/coreg/sparse_train.h) from q = N(0, I). */
static int train_adam(sfit *f, gp_model *model, const gp_method *me, const gp_fit_request *req,
                      double offset, double *F, gp_error *err)
{
    size_t K = f->im->K, b = (size_t)gp_option_number(me, req, "batch_size");
    memset(f->mq, 0, K * sizeof *f->mq);
    memset(f->Lq, 0, K * K * sizeof *f->Lq);
    for (size_t i = 0; i < K; i++)
        f->Lq[i * K + i] = 1.0;
    gp_coreg_adam_settings st = {
        .batch = b < f->data.n ? b : f->data.n,
        .epochs = (int)gp_option_number(me, req, "epochs"),
        .lr = gp_option_number(me, req, "learning_rate"),
        .natgrad_step = gp_option_number(me, req, "natgrad_step"),
        .budget = (int)gp_option_number(me, req, "max_iterations"),
        .offset = offset,
        .optimize_z = f->optz};
    gp_model_info_number(model, "epochs", (double)st.epochs);
    gp_model_info_number(model, "batch_size", (double)st.batch);
    return gp_coreg_svgp_train_adam(f->im, &f->data, &st, f->mq, f->Lq, req, &model->diag, F,
                                    err);
}

static int fit_impl(gp_model *model, const gp_method *me, const gp_fit_request *req,
                    gp_coreg_sparse_kind kind, gp_coreg_sparse_impl *im, const double *X,
                    const gp_coreg_entries *e, const double *yw, gp_error *err)
{
    const char *sel_name = gp_option_string(me, req, "inducing_selection");
    gp_inducing_selection sel = (gp_inducing_selection)gp_inducing_selection_from_name(sel_name);
    size_t Mz = (size_t)gp_option_number(me, req, "inducing"), d = req->d;
    if (Mz > req->n)
        Mz = req->n;
    im->d = d;
    im->per_q = gp_coreg_sparse_per_q(&im->cp);
    int lbfgs;
    int rc = check_sizes(me, req, im->cp.q * im->per_q * Mz, e->M, kind, &lbfgs, err);
    if (rc)
        return rc;
    im->Z = gp_alloc_doubles(d * Mz, err);
    im->A = gp_alloc_doubles(im->cp.p * im->cp.q * im->per_q, err);
    if (!im->Z || !im->A)
        return GP_ENOMEM;
    gp_coreg_sparse_build_A(&im->cp, im->A);
    if ((rc = gp_inducing_select(sel, im->cp.kernels[0], X, req->n, d, Mz, req->seed, im->Z,
                                 &im->m, err)) != GP_OK)
        return rc;
    im->K = im->cp.q * im->per_q * im->m;
    sfit f = {.im = im, .kind = kind, .data = {X, req->n, d, e->M, e->row, e->out, yw, 1.0},
              .optz = gp_option_number(me, req, "optimize_inducing") != 0.0,
              .cancel = &req->cancel};
    rc = sfit_alloc(&f, im, err);
    if (rc == GP_OK && kind == GP_COREG_SPARSE_SVGP && lbfgs)
        rc = q_start(&f, err);
    double offset = 0.0, F = NAN;
    for (size_t a = 0; a < e->M; a++)
        offset -= log(im->cp.y_scale[e->out[a]]);
    if (rc == GP_OK && lbfgs)
        rc = full_batch(&f, me, req, offset, &model->diag, err);
    if (rc == GP_OK && !lbfgs)
        rc = train_adam(&f, model, me, req, offset, &F, err);
    if (rc == GP_OK)
        rc = final_post(&f, lbfgs, &F, err);
    if (rc == GP_OK)
        rc = gp_coreg_sparse_impl_prepare(im, err);
    if (rc == GP_OK)
        report(model, me, req, &f, F, gp_inducing_selection_name(sel), lbfgs);
    sfit_free(&f);
    return rc;
}

int gp_coreg_sparse_fit(const gp_method *me, const gp_fit_request *req, gp_coreg_sparse_kind kind,
                        gp_model **out, gp_error *err)
{
    gp_coreg_spec spec;
    int rc = gp_coreg_spec_from_request(req, 0, &spec, err);
    if (rc)
        return rc;
    gp_model *model;
    if ((rc = gp_model_new(me, req, &model, err)) != GP_OK)
        return rc;
    gp_coreg_sparse_impl *im = calloc(1, sizeof *im);
    model->impl = im;
    if (im == NULL) {
        gp_model_free(model);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    gp_coreg_sparse_impl_mark(im);
    size_t p = req->n_outputs;
    gp_coreg_entries e = {0};
    double *X = NULL, *yw = NULL;
    rc = gp_coreg_params_init(&im->cp, &spec, p, req->kernel, req, err);
    if (rc == GP_OK)
        rc = gp_coreg_entries_build(req->y, req->n, p, &e, err);
    if (rc == GP_OK && !(yw = gp_alloc_doubles(e.M ? e.M : 1, err)))
        rc = GP_ENOMEM;
    if (rc == GP_OK)
        rc = standardise_inputs(model, req, &X, err);
    if (rc == GP_OK) {
        gp_coreg_standardise(&im->cp, req->y, req->n, &e, req->standardize, yw);
        rc = fit_impl(model, me, req, kind, im, X, &e, yw, err);
    }
    if (rc == GP_OK) {
        gp_coreg_params_view(&im->cp, &model->coreg);
        model->coreg.n_observed = e.M;
        rc = fill_common(model, &im->cp, err);
    }
    free(X);
    free(yw);
    gp_coreg_entries_free(&e);
    if (rc) {
        gp_model_free(model);
        return rc;
    }
    *out = model;
    return GP_OK;
}
