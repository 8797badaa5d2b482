/* The fit of a coregionalised sgpr or svgp model: core/coreg/sparse_model.h.
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

/* The fitted posterior: sgpr's optimal q, or svgp's q. */
static int final_post(sfit *f, double *F, gp_error *err)
{
    gp_coreg_sparse_impl *im = f->im;
    gp_coreg_sparse_at at = gp_coreg_sparse_impl_at(im);
    if (f->kind == GP_COREG_SPARSE_SGPR)
        return gp_coreg_sgpr_bound(&at, &f->data, F, NULL, &im->post, err);
    size_t K = im->K;
    int rc = gp_coreg_svgp_elbo(&at, &f->data, f->mq, f->Lq, F, NULL, NULL, err);
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

static int check_sizes(const gp_method *me, const gp_fit_request *req, size_t K, size_t M,
                       gp_coreg_sparse_kind kind, gp_error *err)
{
    double cap = (double)gp_fit_point_cap(req), dK = (double)K;
    double need = (double)M * (4.0 * dK + 8.0) + 8.0 * dK * dK +
                  (kind == GP_COREG_SPARSE_SVGP ? 24.0 * dK * dK : 0.0);
    if (kind == GP_COREG_SPARSE_SVGP) {
        const char *opt = gp_option_string(me, req, "optimizer");
        if (opt && strcmp(opt, "adam") == 0)
            return gp_error_set(err, GP_EUNSUPPORTED, "options.optimizer",
                                "options.optimizer: a coregionalised svgp trains by full-batch "
                                "L-BFGS (auto or lbfgs); adam is not supported with "
                                "options.coregionalization yet");
    }
    if (need > cap * cap)
        return gp_error_set(err, GP_ETOOBIG, "options.inducing",
                            "options.inducing: a coregionalised %s with %zu inducing values "
                            "(latents x inducing points) on %zu observed entries needs %.1f GB "
                            "of workspace, above the budget of an exact fit of "
                            "max_train_points = %.0f points: use fewer inducing points, "
                            "latents or rank",
                            me->name, K, M, need * 8e-9, cap);
    return GP_OK;
}

static void report(gp_model *model, const gp_method *me, const gp_fit_request *req,
                   const sfit *f, double F, const char *sel)
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
        gp_model_info_string(model, "optimizer", "lbfgs");
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
                    gp_diagnostics *diag, gp_error *err)
{
    double *x = gp_alloc_doubles(f->dim, err);
    if (x == NULL)
        return GP_ENOMEM;
    pack_all(f, x);
    gp_driver_options opt;
    gp_driver_default_options(&opt);
    opt.max_iterations = (int)gp_option_number(me, req, "max_iterations");
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
    int rc = check_sizes(me, req, im->cp.q * im->per_q * Mz, e->M, kind, err);
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
    sfit f = {.im = im, .kind = kind, .data = {X, req->n, d, e->M, e->row, e->out, yw},
              .optz = gp_option_number(me, req, "optimize_inducing") != 0.0,
              .cancel = &req->cancel};
    rc = sfit_alloc(&f, im, err);
    if (rc == GP_OK && kind == GP_COREG_SPARSE_SVGP)
        rc = q_start(&f, err);
    double offset = 0.0, F = NAN;
    for (size_t a = 0; a < e->M; a++)
        offset -= log(im->cp.y_scale[e->out[a]]);
    if (rc == GP_OK)
        rc = optimise(&f, me, req, offset, &model->diag, err);
    if (rc == GP_OK)
        rc = final_post(&f, &F, err);
    if (rc == GP_OK)
        rc = gp_coreg_sparse_impl_prepare(im, err);
    if (rc == GP_OK)
        report(model, me, req, &f, F, gp_inducing_selection_name(sel));
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
        model->noise_variance = im->cp.noise[0];
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
