/* Method "svgp" over rows read in chunks: see core/methods/svgp/rows.h. */
#include "core/methods/svgp/rows.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/inducing/candidates.h"
#include "core/methods/svgp/batches.h"
#include "core/methods/svgp/elbo.h"
#include "core/methods/svgp/setup.h"
#include "core/methods/svgp/stream.h"
#include "core/methods/svgp/train.h"
#include "core/model/method.h"
#include "core/model/rows_passes.h"
#include "core/model/rows_sync.h"

/* A fit over rows: the in-memory fit's state (f: X, y and off unused) and
 * what reading and summing the rows needs. */
typedef struct rows_fit {
    svgp_fit f;
    const gp_rows *rows;
    gp_rows_sync sync;   /* failures, cancels and stops agreed by every process */
    gp_fit_request sreq; /* the request as every process sees it (gp_rows_sync_request) */
    svgp_settings st;
    svgp_batches plan;
    svgp_stream s;
    svgp_sums step; /* a step's sums */
    double *buf;    /* a step's sums for M inducing points, and the slots */
} rows_fit;

static void rows_fit_free(rows_fit *r)
{
    svgp_fit_free(&r->f);
    svgp_stream_free(&r->s);
    gp_rows_sync_free(&r->sync);
    free(r->buf);
}

/* What a fit over rows cannot do, before anything is read. */
static int rows_refuse(const gp_method *me, const gp_fit_request *req, gp_error *err)
{
    if (req->likelihood != GP_LIK_GAUSSIAN)
        return gp_error_set(err, GP_EUNSUPPORTED, "likelihood",
                            "svgp over a data set takes the gaussian likelihood");
    if (gp_fit_coregionalised(me, req))
        return gp_error_set(err, GP_EUNSUPPORTED, "options.coregionalization",
                            "a fit over a data set has one output: coregionalization needs "
                            "several");
    if (strcmp(gp_option_string(me, req, "optimizer"), "lbfgs") == 0)
        return gp_error_set(err, GP_EUNSUPPORTED, "options.optimizer",
                            "svgp over a data set trains on minibatches (optimizer adam or "
                            "auto): lbfgs needs every row in memory");
    return GP_OK;
}

/* Doubles the fit holds: the step's buffers (work, rows taken, one read),
 * the M x M ones, and the candidates with the greedy selection's K x M. */
static double rows_need(size_t K, size_t d, size_t M, size_t cap, size_t chunk, size_t p)
{
    double dm = (double)M, dd = (double)d;
    return (double)cap * (3.0 * dm + dd + 6.0 + (double)p) + (double)chunk * (dd + 1.0) +
           12.0 * dm * dm + (double)K * (2.0 * dd + dm + 1.0);
}

/* Every buffer of the fit for M inducing points (local: a failure here is
 * this process's, agreed by the caller). */
static int rows_alloc(rows_fit *r, const gp_model *model, size_t M, gp_error *err)
{
    svgp_fit *f = &r->f;
    size_t cap = svgp_batches_cap(&r->plan), d = f->d;
    int rc = svgp_fit_alloc(f, M, cap, err);
    if (rc == GP_OK)
        rc = gp_quadrature_init(&f->quad, GP_LIK_QUADRATURE_POINTS, err);
    if (rc == GP_OK)
        rc = svgp_stream_alloc(&r->s, &r->sync, model, cap, err);
    if (rc)
        return rc;
    f->p = r->s.p;
    svgp_sums full;
    svgp_sums_layout(&full, gp_kernel_n_params(f->k) + 1, d * M, f->p, M);
    r->buf = gp_alloc_doubles(full.len + GP_ROWS_SYNC_SLOTS, err);
    if (f->p) {
        f->beta = gp_alloc_doubles(f->p, err);
        f->gbeta = gp_alloc_doubles(f->p, err);
    }
    if (!r->buf || (f->p && (!f->beta || !f->gbeta)))
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    return GP_OK;
}

/* The settings, the minibatch plan, M, the candidates' count and the memory
 * check (the same on every process: nothing is read yet). */
static int rows_plan(rows_fit *r, const gp_model *model, const gp_fit_request *req, size_t *M,
                     gp_error *err)
{
    const gp_rows *rows = req->rows;
    r->rows = rows;
    svgp_settings_read(req, model, &r->st);
    svgp_batches_init(&r->plan, rows->n_total, r->st.batch, req->seed);
    *M = (size_t)gp_option_number(model->method, req, "inducing");
    if (*M > rows->n_total)
        *M = rows->n_total;
    double budget = (double)gp_fit_point_cap(req);
    double need = rows_need(gp_inducing_candidate_count(rows->n_total, *M), rows->d, *M,
                            svgp_batches_cap(&r->plan), rows->chunk,
                            gp_mean_n_coef(model->mean_type, rows->d));
    if (need > budget * budget)
        return gp_error_set(err, GP_ETOOBIG, "options.inducing",
                            "svgp over a data set with %zu inducing points needs %.1f GB of "
                            "workspace, above the budget of an exact fit of max_train_points "
                            "= %.0f points (%.1f GB): use fewer inducing points, a smaller "
                            "batch_size or raise --max-train-points",
                            *M, need * 8e-9, budget, budget * budget * 8e-9);
    return GP_OK;
}

/* The plan, the noise's start and the buffers, agreed between every
 * process. The sync is the fit's from here on: every later failure, cancel
 * or stop ends every process at the same sum. */
static int rows_setup(rows_fit *r, gp_model *model, const gp_fit_request *req, size_t *M,
                      gp_error *err)
{
    int rc = rows_plan(r, model, req, M, err);
    if (rc == GP_OK)
        rc = gp_rows_sync_init(&r->sync, req->rows, req, err);
    if (rc)
        return rc;
    gp_rows_sync_request(&r->sync, req, &r->sreq);
    const gp_rows *rows = req->rows;
    svgp_fit *f = &r->f;
    *f = (svgp_fit){.k = model->kernel, .lik = {GP_LIK_GAUSSIAN, 0.0}, .n = rows->n_total,
                    .d = rows->d, .C = 1, .cancel = &r->sreq.cancel, .hyper = model->hyper,
                    .optimize_z =
                        gp_option_number(model->method, req, "optimize_inducing") != 0.0};
    double power = 1.0;
    rc = gp_rows_target_power(&r->sync, model->y_mean, model->y_scale, &power, err);
    if (rc)
        return rc;
    gp_noise_param_init_power(&f->np, req, power);
    f->lik.noise = f->np.start;
    gp_error local;
    gp_error_clear(&local);
    rc = rows_alloc(r, model, *M, &local);
    return gp_rows_sync_agree(&r->sync, rc, &local, err);
}

/* Z among the candidate rows drawn by global index (core/inducing/
 * candidates.h: the same rows on every process, sgpr's), after the
 * lengthscale start on them. */
static int rows_inducing(rows_fit *r, const gp_model *model, const gp_fit_request *req,
                         gp_inducing_selection sel, size_t M, double *rescale, gp_error *err)
{
    svgp_fit *f = &r->f;
    size_t K = 0, d = f->d;
    double *P = NULL;
    int rc = gp_inducing_candidates(&r->sync, model, M, req->seed, &P, &K, err);
    if (rc == GP_OK) {
        *rescale = svgp_rescue_lengthscales(f->k, f->hyper, P, K, d);
        rc = gp_inducing_select(sel, f->k, P, K, d, M, req->seed, f->Z, &f->m, err);
    }
    free(P);
    return rc;
}

/* ---- the mean function's start: least squares over every row ---- */

typedef struct normal_eq {
    size_t p;
    const double *beta; /* zeros */
    double *G, *b;      /* p x p (lower triangle) and p: H^T H and H^T y */
} normal_eq;

static int normal_piece(void *ctx, svgp_stream *s, gp_error *err)
{
    (void)err;
    normal_eq *q = ctx;
    blasint p = (blasint)q->p, nb = (blasint)s->nb;
    svgp_stream_offsets(s, q->beta);
    cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, p, nb, 1.0, s->H, nb, 1.0, q->G, p);
    cblas_dgemv(CblasColMajor, CblasTrans, nb, p, 1.0, s->H, nb, s->y, 1, 1.0, q->b, 1);
    return GP_OK;
}

/* beta from the normal equations summed over every row: the in-memory
 * start of a gaussian fit's mean (fit.c, mean_start). */
static int rows_mean_start(rows_fit *r, gp_error *err)
{
    svgp_fit *f = &r->f;
    size_t p = f->p, len = p * p + p;
    if (p == 0)
        return GP_OK;
    memset(f->beta, 0, p * sizeof *f->beta);
    double *buf = calloc(len + GP_ROWS_SYNC_SLOTS, sizeof *buf);
    gp_error local;
    gp_error_clear(&local);
    int rc = buf ? GP_OK : gp_error_set(&local, GP_ENOMEM, NULL, "out of memory");
    rc = gp_rows_sync_agree(&r->sync, rc, &local, err);
    if (rc == GP_OK) {
        normal_eq q = {p, f->beta, buf, buf + p * p};
        svgp_stream_pass(&r->s, normal_piece, &q);
        rc = gp_rows_sync_sum(&r->sync, buf, len, err);
    }
    if (rc == GP_OK) {
        memcpy(f->beta, buf + p * p, p * sizeof *f->beta);
        rc = gp_mean_solve_normal(buf, f->beta, p, err);
    }
    free(buf);
    return rc;
}

/* ---- training ---- */

/* The sums of one step over this process's part of its minibatch, the
 * reduction, then the step itself on every process. *est receives the
 * minibatch estimate of the ELBO. */
static int rows_step(rows_fit *r, svgp_adam_run *run, int epoch, size_t step, double *est,
                     gp_error *err)
{
    svgp_fit *f = &r->f;
    gp_error local;
    gp_error_clear(&local);
    svgp_stream_clear(&r->s);
    int rc = GP_OK;
    size_t lo, hi, blocks = svgp_batches_count(&r->plan, step);
    for (size_t j = 0; j < blocks && rc == GP_OK && !gp_rows_sync_skip(&r->sync); j++) {
        svgp_batches_block(&r->plan, epoch, step, j, &lo, &hi);
        rc = svgp_stream_take(&r->s, lo, hi, &local);
    }
    svgp_eval e = svgp_fit_eval(f);
    memset(r->buf, 0, r->step.len * sizeof *r->buf);
    if (rc == GP_OK && !gp_rows_sync_skip(&r->sync))
        rc = svgp_factor_kuu(&e, &f->w, &local);
    if (rc == GP_OK && !gp_rows_sync_skip(&r->sync)) {
        double scale = (double)f->n / (double)svgp_batches_rows(&r->plan, epoch, step);
        svgp_stream_offsets(&r->s, f->beta);
        rc = svgp_stream_sums(&e, &r->s, scale, &r->step, &f->w, r->buf, &local);
    }
    gp_rows_sync_pend(&r->sync, rc, &local);
    if ((rc = gp_rows_sync_sum(&r->sync, r->buf, r->step.len, err)) != GP_OK)
        return rc;
    *est = r->buf[0] - svgp_kl_value(f->mq, f->Lq, f->m);
    if (!isfinite(*est))
        return gp_error_set(err, GP_ENOTPD, NULL, "the ELBO is not finite");
    svgp_sums_unpack(&r->step, r->buf, f->gtheta, f->optimize_z ? f->gz : NULL, f->gbeta,
                     f->w.D, f->w.agmu);
    return svgp_adam_step(f, run, &r->st, err);
}

/* The epochs, with progress once an epoch as the in-memory Adam reports it;
 * a stop the callback asks for reaches every process at the next sum (req:
 * the sync's request, whose progress defers the stop). */
static int rows_epochs(rows_fit *r, svgp_adam_run *run, const gp_fit_request *req,
                       gp_diagnostics *diag, gp_error *err)
{
    const svgp_settings *st = &r->st;
    int rc = GP_OK;
    for (int ep = 1; rc == GP_OK && ep <= st->epochs; ep++) {
        double sum = 0.0, est = 0.0;
        for (size_t s = 0; rc == GP_OK && s < r->plan.steps; s++) {
            rc = rows_step(r, run, ep, s, &est, err);
            sum += est;
        }
        diag->iterations = ep;
        diag->evaluations += (int)r->plan.steps;
        if (rc == GP_OK)
            req->progress(req->progress_ctx, svgp_epoch_progress(ep, st), st->budget,
                          sum / (double)r->plan.steps + st->offset);
    }
    diag->converged = 0; /* a fixed number of epochs */
    return rc;
}

/* Adam from the fit's start (its buffers agreed between the processes). */
static int rows_train(rows_fit *r, const gp_fit_request *req, gp_diagnostics *diag,
                      gp_error *err)
{
    svgp_fit *f = &r->f;
    int hyper = f->n_free > 0 || f->np.learned || f->optimize_z || f->p > 0;
    svgp_sums_layout(&r->step, hyper ? f->n_kp + 1 : 0, f->optimize_z ? f->d * f->m : 0, f->p,
                     f->m);
    svgp_adam_run run;
    gp_error local;
    gp_error_clear(&local);
    int rc = svgp_adam_begin(f, &r->st, &run, &local);
    rc = gp_rows_sync_agree(&r->sync, rc, &local, err);
    if (rc == GP_OK)
        rc = rows_epochs(r, &run, req, diag, err);
    svgp_adam_end(&run);
    return rc;
}

/* ---- the bound at the end: a pass over every row ---- */

typedef struct bound_pass {
    const svgp_eval *e;
    const double *beta; /* the mean's coefficients (NULL: zero mean) */
    const svgp_sums *value; /* the value alone */
    svgp_work *w;
    double one[1], sum;
} bound_pass;

static int bound_piece(void *ctx, svgp_stream *s, gp_error *err)
{
    bound_pass *b = ctx;
    svgp_stream_offsets(s, b->beta);
    int rc = svgp_stream_sums(b->e, s, 1.0, b->value, b->w, b->one, err);
    b->sum += b->one[0];
    return rc;
}

static int rows_bound(rows_fit *r, gp_svgp_terms *t, gp_error *err)
{
    svgp_fit *f = &r->f;
    svgp_eval e = svgp_fit_eval(f);
    svgp_sums value;
    svgp_sums_layout(&value, 0, 0, 0, 0);
    bound_pass b = {&e, f->beta, &value, &f->w, {0.0}, 0.0};
    gp_error local;
    gp_error_clear(&local);
    gp_rows_sync_pend(&r->sync, svgp_factor_kuu(&e, &f->w, &local), &local);
    svgp_stream_pass(&r->s, bound_piece, &b);
    double buf[1 + GP_ROWS_SYNC_SLOTS] = {b.sum};
    int rc = gp_rows_sync_sum(&r->sync, buf, 1, err);
    if (rc)
        return rc;
    t->expected_log_lik = buf[0];
    t->kl = svgp_kl_value(f->mq, f->Lq, f->m);
    t->elbo = t->expected_log_lik - t->kl;
    return isfinite(t->elbo) ? GP_OK : gp_error_set(err, GP_ENOTPD, NULL, "the ELBO is not finite");
}

/* ---- the fit ---- */

/* Z, q's start, the mean's start, training, the bound and the posterior. */
static int rows_fit_into(rows_fit *r, gp_model *model, const gp_fit_request *req, size_t M,
                         gp_inducing_post *im, gp_error *err)
{
    svgp_fit *f = &r->f;
    const char *sel_name = gp_option_string(model->method, req, "inducing_selection");
    gp_inducing_selection sel = (gp_inducing_selection)gp_inducing_selection_from_name(sel_name);
    double rescale = 1.0;
    gp_error local;
    gp_error_clear(&local);
    int rc = rows_inducing(r, model, req, sel, M, &rescale, &local);
    if ((rc = gp_rows_sync_agree(&r->sync, rc, &local, err)) != GP_OK)
        return rc;
    gp_kernel_get_params(f->k, f->theta);
    svgp_q_prior(f);
    rc = rows_mean_start(r, err);
    if (rc == GP_OK)
        rc = rows_train(r, &r->sreq, &model->diag, err);
    gp_svgp_terms t;
    if (rc == GP_OK)
        rc = rows_bound(r, &t, err);
    if (rc == GP_OK) { /* gp_model_fit sums over the rows once more after a success */
        rc = svgp_post_build(f, im, &local);
        rc = gp_rows_sync_agree(&r->sync, rc, &local, err);
    }
    if (rc == GP_OK) {
        svgp_report(model, f, 0, &r->st, &t, gp_inducing_selection_name(sel));
        if (f->p)
            memcpy(model->mean_coef, f->beta, f->p * sizeof *f->beta);
        if (rescale != 1.0)
            gp_model_info_number(model, "lengthscale_rescaled", rescale);
    }
    return rc;
}

int svgp_rows_fit_op(const gp_method *m, const gp_fit_request *req, gp_model **out,
                     gp_error *err)
{
    gp_model *model;
    int rc = rows_refuse(m, req, err);
    if (rc == GP_OK)
        rc = gp_model_new(m, req, &model, err);
    if (rc)
        return rc;
    gp_inducing_post *im = calloc(1, sizeof *im);
    model->impl = im;
    rows_fit r;
    memset(&r, 0, sizeof r);
    size_t M = 0;
    rc = im ? rows_setup(&r, model, req, &M, err)
            : gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    if (rc == GP_OK)
        rc = rows_fit_into(&r, model, req, M, im, err);
    rows_fit_free(&r);
    if (rc) {
        gp_model_free(model);
        return rc;
    }
    *out = model;
    return GP_OK;
}
