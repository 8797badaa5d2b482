/* Sparse variational GP regression (Titsias' collapsed bound): see
 * core/methods/sgpr.h; the bound and its gradient are core/inducing/collapsed.c. */
#include "core/methods/sgpr.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/coreg/params.h"
#include "core/coreg/sparse_fit.h"
#include "core/coreg/sparse_impl.h"
#include "core/coreg/sparse_predict.h"
#include "core/inducing/candidates.h"
#include "core/inducing/collapsed_rows.h"
#include "core/inducing/inducing.h"
#include "core/inducing/post_grad.h"
#include "core/kernel/lml.h"
#include "core/linalg/linalg.h"
#include "core/model/method.h"
#include "core/model/rows_passes.h"
#include "core/model/rows_sync.h"

/* ---- the method ---- */

static const gp_kernel_type sgpr_kernels[] = {GP_KERNEL_RBF, GP_KERNEL_MATERN12,
                                              GP_KERNEL_MATERN32, GP_KERNEL_MATERN52,
                                              GP_KERNEL_RQ};

static const gp_option_spec sgpr_options[] = {
    {"inducing", GP_OPTION_INT, 256, NULL, 1, 8192, NULL,
     "M, the number of inducing points (at most the number of training points)"},
    {"inducing_selection", GP_OPTION_ENUM, 0, "greedy", 0, 0, "greedy|kmeans|random",
     "greedy: maximum residual variance (pivoted Cholesky, deterministic); kmeans: k-means "
     "centres; random: distinct training inputs (both seeded)"},
    {"optimize_inducing", GP_OPTION_BOOL, 1, NULL, 0, 1, NULL,
     "also optimise the inducing inputs Z with the hyperparameters (default; false keeps "
     "Z where the selection put it)"},
    {"reselect", GP_OPTION_INT, 2, NULL, 0, 10, NULL,
     "greedy selection without optimize_inducing: choose Z again under the fitted kernel and "
     "refit, up to this many times while the bound improves"},
    {"max_iterations", GP_OPTION_INT, 200, NULL, 1, 100000, NULL, "L-BFGS iterations per fit"},
    {"tolerance", GP_OPTION_NUMBER, 1e-9, NULL, 1e-16, 1, NULL,
     "stop when the relative change of the bound in an iteration falls below this"},
    {"coregionalization", GP_OPTION_OBJECT, 0, NULL, 0, 0, gp_coreg_option_schema,
     gp_coreg_option_help},
};

/* The workspace of a fit in doubles: three m x n buffers per evaluation plus
 * the working copy of X; over rows read in chunks, the evaluation's
 * O(chunk m + m^2) (core/inducing/collapsed_rows.h), the read buffer and the
 * candidates with greedy's factor, O(K m), whatever N. */
static double workspace(const gp_fit_request *req, size_t m)
{
    const gp_rows *rows = req->rows;
    if (rows == NULL)
        return (double)req->n * (3.0 * (double)m + (double)req->d + 4.0) +
               6.0 * (double)m * (double)m;
    double K = (double)gp_inducing_candidate_count(rows->n_total, m), d = (double)rows->d;
    return gp_collapsed_rows_doubles(m, rows->chunk, rows->d, gp_kernel_n_params(req->kernel)) +
           (double)rows->chunk * (d + 1.0) + K * (2.0 * d + (double)m + 2.0);
}

/* Memory checked before anything is allocated, within the budget of an
 * exact fit of max_train_points points (as for the other methods). */
static int size_guard(const gp_fit_request *req, size_t m, gp_error *err)
{
    double cap = (double)gp_fit_point_cap(req);
    double need = workspace(req, m);
    if (need > cap * cap)
        return gp_error_set(err, GP_ETOOBIG, "options.inducing",
                            "sgpr with %zu inducing points on %zu points needs %.1f GB of "
                            "workspace, above the budget of an exact fit of max_train_points "
                            "= %.0f points (%.1f GB): use fewer inducing points or raise "
                            "--max-train-points",
                            m, req->n, need * 8e-9, cap, cap * cap * 8e-9);
    return GP_OK;
}

/* What every fit reports: the bound in the caller's units, Z, the trace term
 * of n rows whose prior variance is kdiag each. */
static void report_bound(gp_model *model, const gp_fit_request *req, const gp_sgpr_terms *terms,
                         size_t m, const char *selection, double n, double kdiag)
{
    double offset = -n * log(model->y_scale);
    model->diag.objective = terms->bound + offset;
    gp_model_info_number(model, "inducing", (double)m);
    gp_model_info_string(model, "inducing_selection", selection);
    gp_model_info_number(model, "optimize_inducing",
                         gp_option_number(model->method, req, "optimize_inducing"));
    gp_model_info_number(model, "trace_term", terms->trace);
    gp_model_info_number(model, "trace_fraction", terms->trace / (n * kdiag));
}

static void report(gp_model *model, const gp_fit_request *req, const gp_collapsed_data *data,
                   const gp_sgpr_terms *terms, size_t m, const char *selection)
{
    report_bound(model, req, terms, m, selection, (double)data->n,
                 gp_kernel_diag(model->kernel, data->X));
    size_t cap = gp_fit_point_cap(req);
    double lml, offset = -(double)data->n * log(model->y_scale);
    gp_error err;
    /* with a mean: the exact LML at the bound's coefficients, of the residual */
    double *res = gp_alloc_doubles(data->n, &err);
    if (res == NULL)
        return;
    memcpy(res, data->y, data->n * sizeof *res);
    if (data->H)
        cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)data->n, (blasint)data->p, -1.0,
                    data->H, (blasint)data->n, data->beta, 1, 1.0, res, 1);
    if (data->n <= GP_SGPR_EXACT_REPORT_MAX && data->n <= cap &&
        gp_exact_lml_grad_noise(model->kernel, model->noise_variance, data->r, data->X, data->d,
                                data->n, res, &lml, NULL, &err) == GP_OK) {
        gp_model_info_number(model, "exact_lml", lml + offset);
        gp_model_info_number(model, "gap", lml - terms->bound);
    }
    free(res);
}

/* Select Z, optimise, and build the posterior at the optimum. */
static int fit_into(gp_model *model, const gp_fit_request *req, const gp_collapsed_data *data,
                    gp_inducing_post *im, gp_error *err)
{
    const gp_method *me = model->method;
    const char *sel_name = gp_option_string(me, req, "inducing_selection");
    gp_inducing_selection sel = (gp_inducing_selection)gp_inducing_selection_from_name(sel_name);
    size_t M = (size_t)gp_option_number(me, req, "inducing"), m = 0, d = data->d;
    if (M > data->n)
        M = data->n;
    double *Z = gp_alloc_doubles(d * M, err);
    if (Z == NULL)
        return GP_ENOMEM;
    gp_noise_param np;
    gp_noise_param_init(&np, req, data->y, data->n);
    gp_inducing_fit_spec spec = {
        .fn = gp_collapsed_objective, .ctx = (void *)data,
        .optimize_z = gp_option_number(me, req, "optimize_inducing") != 0.0,
        .max_iterations = (int)gp_option_number(me, req, "max_iterations"),
        .tolerance = gp_option_number(me, req, "tolerance"),
        .objective_offset = -(double)data->n * log(model->y_scale)};
    int rounds = (int)gp_option_number(me, req, "reselect");
    int rc = gp_inducing_fit(model->kernel, &np, &model->noise_variance, sel, M, rounds, data->X,
                             data->n, Z, &m, req, &spec, &model->diag, err);
    gp_sgpr_terms terms;
    if (rc == GP_OK)
        rc = gp_sgpr_bound_mean(model->kernel, model->noise_variance, data->r, data->H, data->p,
                                data->beta, data->X, data->n, d, data->y, Z, m, &terms, NULL,
                                NULL, im, err);
    if (rc == GP_OK)
        rc = gp_inducing_post_prepare(im, model->kernel, err);
    if (rc == GP_OK) {
        model->diag.jitter = im->jitter;
        report(model, req, data, &terms, m, gp_inducing_selection_name(sel));
    }
    free(Z);
    return rc;
}

/* ---- a fit over rows read in chunks (core/inducing/collapsed_rows.h) ---- */

/* What streams: the homoscedastic bound with a zero mean (known per-point
 * noise is refused by gp_model_fit; several outputs too). */
static int rows_refused(const gp_method *me, const gp_fit_request *req, gp_error *err)
{
    if (req->mean != GP_MEAN_ZERO)
        return gp_error_set(err, GP_EUNSUPPORTED, "mean",
                            "mean: sgpr over a data set fits a zero mean (the rows are "
                            "standardised, so a constant mean is their average)");
    if (gp_fit_coregionalised(me, req))
        return gp_error_set(err, GP_EUNSUPPORTED, "options.coregionalization",
                            "options.coregionalization: sgpr over a data set fits one output");
    return GP_OK;
}

static void rows_report(gp_model *model, const gp_fit_request *req, const gp_sgpr_terms *terms,
                        size_t m, const char *selection, const gp_rows_sync *sync,
                        const double *Z)
{
    const gp_rows *rows = req->rows;
    double n = (double)rows->n_total;
    report_bound(model, req, terms, m, selection, n, gp_kernel_diag(model->kernel, Z));
    gp_model_info_number(model, "streamed_rows", n);
    gp_model_info_number(model, "chunk_rows", (double)rows->chunk);
    gp_model_info_number(model, "ranks", (double)sync->ranks);
    gp_model_info_number(model, "candidates",
                         (double)gp_inducing_candidate_count(rows->n_total, m));
}

/* Select Z among the candidates, optimise over the streamed bound, and build
 * the posterior at the optimum. sreq: the request as every process sees it
 * (gp_rows_sync_request). */
static int rows_fit_into(gp_model *model, const gp_fit_request *sreq, gp_rows_sync *sync,
                         gp_inducing_post *im, gp_error *err)
{
    const gp_method *me = model->method;
    const gp_rows *rows = sreq->rows;
    const char *sel_name = gp_option_string(me, sreq, "inducing_selection");
    gp_inducing_selection sel = (gp_inducing_selection)gp_inducing_selection_from_name(sel_name);
    size_t M = (size_t)gp_option_number(me, sreq, "inducing"), m = 0, d = rows->d, K = 0;
    M = M < rows->n_total ? M : rows->n_total;
    gp_error local;
    gp_error_clear(&local);
    double power = 1.0, *P = NULL, *Z = gp_alloc_doubles(d * M, &local);
    gp_rows_sync_pend(sync, Z ? GP_OK : local.code, &local); /* agreed by the next sum */
    int rc = gp_rows_target_power(sync, model->y_mean, model->y_scale, &power, err);
    if (rc == GP_OK)
        rc = gp_inducing_candidates(sync, model, M, sreq->seed, &P, &K, err);
    gp_collapsed_rows data = {rows, model, sync, NULL};
    gp_noise_param np;
    gp_noise_param_init_power(&np, sreq, power);
    gp_inducing_fit_spec spec = {
        .fn = gp_collapsed_rows_objective, .ctx = &data,
        .optimize_z = gp_option_number(me, sreq, "optimize_inducing") != 0.0,
        .max_iterations = (int)gp_option_number(me, sreq, "max_iterations"),
        .tolerance = gp_option_number(me, sreq, "tolerance"),
        .objective_offset = -(double)rows->n_total * log(model->y_scale)};
    int rounds = (int)gp_option_number(me, sreq, "reselect");
    if (rc == GP_OK)
        rc = gp_inducing_fit(model->kernel, &np, &model->noise_variance, sel, M, rounds, P, K, Z,
                             &m, sreq, &spec, &model->diag, err);
    gp_sgpr_terms terms;
    if (rc == GP_OK)
        rc = gp_sgpr_rows_bound(&data, model->kernel, model->noise_variance, Z, m, &terms, NULL,
                                NULL, im, err);
    if (rc == GP_OK)
        rc = gp_inducing_post_prepare(im, model->kernel, err);
    if (rc == GP_OK) {
        model->diag.jitter = im->jitter;
        rows_report(model, sreq, &terms, m, gp_inducing_selection_name(sel), sync, Z);
    }
    gp_collapsed_rows_release(&data);
    free(P);
    free(Z);
    return gp_rows_sync_result(sync, rc, err);
}

static int sgpr_fit_rows(const gp_method *me, const gp_fit_request *req, gp_model **out,
                         gp_error *err)
{
    size_t M = (size_t)gp_option_number(me, req, "inducing");
    int rc = rows_refused(me, req, err);
    if (rc == GP_OK)
        rc = size_guard(req, M < req->n ? M : req->n, err);
    gp_model *model = NULL;
    if (rc == GP_OK)
        rc = gp_model_new(me, req, &model, err);
    if (rc)
        return rc;
    gp_rows_sync sync;
    gp_fit_request sreq;
    gp_inducing_post *im = calloc(1, sizeof *im);
    model->impl = im;
    rc = gp_rows_sync_init(&sync, req->rows, req, err);
    if (rc == GP_OK && im == NULL)
        rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    if (rc == GP_OK) {
        gp_rows_sync_request(&sync, req, &sreq);
        rc = rows_fit_into(model, &sreq, &sync, im, err);
    }
    gp_rows_sync_free(&sync);
    if (rc) {
        gp_model_free(model);
        return rc;
    }
    *out = model;
    return GP_OK;
}

static int sgpr_fit(const gp_method *m, const gp_fit_request *req, gp_model **out, gp_error *err)
{
    const gp_method *me = m;
    if (req->rows)
        return sgpr_fit_rows(me, req, out, err);
    if (gp_fit_coregionalised(me, req))
        return gp_coreg_sparse_fit(me, req, GP_COREG_SPARSE_SGPR, out, err);
    size_t M = (size_t)gp_option_number(me, req, "inducing");
    int rc = size_guard(req, M < req->n ? M : req->n, err);
    if (rc)
        return rc;
    gp_model *model;
    if ((rc = gp_model_new(me, req, &model, err)) != GP_OK)
        return rc;
    gp_inducing_post *im = calloc(1, sizeof *im);
    size_t nd = 0;
    double *X = NULL, *y = gp_alloc_doubles(req->n, err);
    if (gp_checked_size(req->n, req->d, &nd, err) == GP_OK)
        X = gp_alloc_doubles(nd, err);
    model->impl = im;
    rc = im && X && y ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK) {
        gp_model_standardize_points(model, req->X, req->n, X);
        gp_model_working_targets(model, req->y, req->n, y);
        double *r = gp_model_working_noise_alloc(model, req->noise_per_point, req->n, &rc, err);
        gp_collapsed_data data = {X, y, req->n, req->d, NULL, r, NULL, 0, model->mean_coef};
        data.p = gp_mean_n_coef(model->mean_type, req->d);
        if (rc == GP_OK && data.p && !(data.H = gp_model_mean_basis(model, X, req->n, err)))
            rc = GP_ENOMEM;
        if (rc == GP_OK)
            rc = fit_into(model, req, &data, im, err);
        free(r);
        free((double *)data.H);
        gp_collapsed_data_release(&data);
    }
    free(X);
    free(y);
    if (rc) {
        gp_model_free(model);
        return rc;
    }
    *out = model;
    return GP_OK;
}

/* ---- observe: rows added to the collapsed posterior ----
 *
 * Z, the kernel and the noise are held; the fit's whitened posterior
 * (core/inducing/inducing.h) is mt = B^-1 V Lambda^-1 y and C = B^-1 with
 * B = I + V Lambda^-1 V^T (Lambda: s2 plus each row's known noise). k new
 * rows, U = V_k Lambda_k^-1/2 (M x k), make B' = B + U U^T, and Woodbury's
 * identity updates what the model keeps without B:
 *   W = C U,  S = I + U^T W = Ls Ls^T,  G = W Ls^-T,
 *   C' = C - G G^T,  mt' = mt + W S^-1 (Lambda_k^-1/2 y_k - U^T mt):
 * O(k M^2 + k^2 M + k^3), the posterior a fit on all the rows with these Z
 * and hyperparameters holds (to rounding). Rows go in chunks of at most
 * OBSERVE_CHUNK (S stays small); every sum is a gp_dot in a fixed order, so
 * a replay of the same batches gives the same bits on any thread count, and
 * C stays exactly symmetric, which its packed export keeps. */
#define OBSERVE_CHUNK 256

typedef struct observe_work {
    double *P;      /* d x c: the chunk's working points */
    double *U, *W;  /* M x c each */
    double *Gt;     /* c x M: G^T, point j's c entries contiguous */
    double *S;      /* c x c: S and its factor, row-major */
    double *yk, *z; /* c each */
    double *mt;     /* M: the new mean */
} observe_work;

static int observe_work_alloc(observe_work *w, size_t M, size_t d, size_t c, gp_error *err)
{
    size_t Mc = 0, dc = 0, cc = 0;
    memset(w, 0, sizeof *w);
    int rc = gp_checked_size(M, c, &Mc, err);
    if (rc == GP_OK)
        rc = gp_checked_size(d, c, &dc, err);
    if (rc == GP_OK)
        rc = gp_checked_size(c, c, &cc, err);
    if (rc)
        return rc;
    if (!(w->P = gp_alloc_doubles(dc, err)) || !(w->U = gp_alloc_doubles(Mc, err)) ||
        !(w->W = gp_alloc_doubles(Mc, err)) || !(w->Gt = gp_alloc_doubles(Mc, err)) ||
        !(w->S = gp_alloc_doubles(cc, err)) || !(w->yk = gp_alloc_doubles(c, err)) ||
        !(w->z = gp_alloc_doubles(c, err)) || !(w->mt = gp_alloc_doubles(M, err)))
        return GP_ENOMEM;
    return GP_OK;
}

static void observe_work_free(observe_work *w)
{
    free(w->P);
    free(w->U);
    free(w->W);
    free(w->Gt);
    free(w->S);
    free(w->yk);
    free(w->z);
    free(w->mt);
}

/* S (c x c, row-major, lower triangle) into its lower Cholesky factor in
 * place. S >= I in exact arithmetic; GP_ENOTPD only for a pivot that
 * overflowed. */
static int small_cholesky(double *S, size_t c)
{
    for (size_t a = 0; a < c; a++) {
        double *ra = S + a * c;
        for (size_t b = 0; b <= a; b++) {
            const double *rb = S + b * c;
            double v = ra[b] - gp_dot(ra, rb, b);
            if (b < a) {
                ra[b] = v / rb[b];
            } else if (v > 0.0 && isfinite(v)) {
                ra[a] = sqrt(v);
            } else {
                return GP_ENOTPD;
            }
        }
    }
    return GP_OK;
}

/* x <- Ls^-1 x and x <- Ls^-T x for small_cholesky's factor. */
static void small_forward(const double *Ls, size_t c, double *x)
{
    for (size_t a = 0; a < c; a++)
        x[a] = (x[a] - gp_dot(Ls + a * c, x, a)) / Ls[a * c + a];
}

static void small_backward(const double *Ls, size_t c, double *x)
{
    for (size_t a = c; a-- > 0;) {
        double v = x[a];
        for (size_t b = a + 1; b < c; b++)
            v -= Ls[b * c + a] * x[b];
        x[a] = v / Ls[a * c + a];
    }
}

/* Rows s .. s + c of X (k x d, the caller's units), their targets and
 * noise, as U and the whitened targets yk: column i of U is
 * L^-1 k(Z, x_i) / sqrt(lambda_i), yk_i = y_i / sqrt(lambda_i). GP_EDATA
 * naming "noise[i]" for a row without noise in a model without any. */
static int observe_rows(const gp_model *model, const gp_inducing_post *p, const double *X,
                        const double *Y, const double *noise, size_t k, size_t s, size_t c,
                        observe_work *w, gp_error *err)
{
    size_t M = p->m, d = p->d;
    for (size_t j = 0; j < d; j++) /* gp_model_standardize_points' arithmetic */
        for (size_t i = 0; i < c; i++)
            w->P[i * d + j] = (X[j * k + s + i] - model->x_mean[j]) / model->x_scale[j];
    gp_kernel_cross_points(model->kernel, p->Zp, w->P, c, w->U, M);
    gp_solve_lower_columns(p->L, M, M, w->U, c, M);
    gp_model_working_targets(model, Y + s, c, w->yk);
    if (noise)
        gp_model_working_noise(model, noise + s, c, w->z);
    for (size_t i = 0; i < c; i++) {
        double lambda = model->noise_variance + (noise ? w->z[i] : 0.0);
        if (!(lambda > 0.0 && isfinite(lambda)))
            return gp_error_set(err, GP_EDATA, "noise",
                                "noise[%zu]: a row of noise variance 0 in a model without "
                                "noise of its own cannot be observed", s + i);
        double f = 1.0 / sqrt(lambda);
        w->yk[i] *= f;
        for (size_t j = 0; j < M; j++)
            w->U[i * M + j] *= f;
    }
    return GP_OK;
}

/* W, S's factor, the new mean into w->mt and G^T; GP_EDATA when any of
 * them is not finite (nothing of p changed). */
static int chunk_factors(const gp_inducing_post *p, const double *C, const double *mt, size_t c,
                         observe_work *w, gp_error *err)
{
    size_t M = p->m;
    for (size_t i = 0; i < c; i++)
        for (size_t j = 0; j < M; j++)
            w->W[i * M + j] = gp_dot(C + j * M, w->U + i * M, M); /* C symmetric: (C u_i)_j */
    for (size_t a = 0; a < c; a++) {
        for (size_t b = 0; b <= a; b++)
            w->S[a * c + b] = (a == b ? 1.0 : 0.0) + gp_dot(w->U + a * M, w->W + b * M, M);
        w->z[a] = w->yk[a] - gp_dot(w->U + a * M, mt, M);
    }
    int ok = small_cholesky(w->S, c) == GP_OK;
    if (ok) {
        small_forward(w->S, c, w->z);
        small_backward(w->S, c, w->z);
        memcpy(w->mt, mt, M * sizeof *mt);
        for (size_t i = 0; i < c; i++)
            for (size_t j = 0; j < M; j++)
                w->mt[j] += w->W[i * M + j] * w->z[i];
        ok = gp_all_finite(w->mt, M, NULL);
    }
    for (size_t j = 0; ok && j < M; j++) {
        double *g = w->Gt + j * c;
        for (size_t i = 0; i < c; i++)
            g[i] = w->W[i * M + j];
        small_forward(w->S, c, g);
        ok = isfinite(gp_dot(g, g, c)); /* then every product of two columns is finite */
    }
    if (ok)
        return GP_OK;
    return gp_error_set(err, GP_EDATA, "y",
                        "the observed rows would make the model's state non-finite (float64 "
                        "overflow); the model is unchanged");
}

/* C <- C - G G^T (lower triangle, mirrored: C stays exactly symmetric) and
 * mt <- w->mt. Cannot fail: chunk_factors checked what goes in. */
static void chunk_apply(size_t M, size_t c, double *C, double *mt, const observe_work *w)
{
    for (size_t j = 0; j < M; j++)
        for (size_t i = j; i < M; i++) {
            double v = C[j * M + i] - gp_dot(w->Gt + i * c, w->Gt + j * c, c);
            C[j * M + i] = v;
            C[i * M + j] = v;
        }
    memcpy(mt, w->mt, M * sizeof *mt);
}

/* Every chunk into C and mt (p's own arrays for one chunk: chunk_factors
 * fails before anything changes; copies for several). */
static int observe_chunks(const gp_model *model, const gp_inducing_post *p, const double *X,
                          const double *Y, const double *noise, size_t k, double *C, double *mt,
                          gp_error *err)
{
    size_t c0 = k < OBSERVE_CHUNK ? k : OBSERVE_CHUNK;
    observe_work w;
    int rc = observe_work_alloc(&w, p->m, p->d, c0, err);
    for (size_t s = 0; rc == GP_OK && s < k; s += c0) {
        size_t c = k - s < c0 ? k - s : c0;
        rc = observe_rows(model, p, X, Y, noise, k, s, c, &w, err);
        if (rc == GP_OK)
            rc = chunk_factors(p, C, mt, c, &w, err);
        if (rc == GP_OK)
            chunk_apply(p->m, c, C, mt, &w);
    }
    observe_work_free(&w);
    return rc;
}

static int sgpr_observe_noise(gp_model *model, const double *X, const double *Y,
                              const double *noise, size_t k, gp_error *err)
{
    if (gp_coreg_sparse_impl_is(model->impl))
        return gp_error_set(err, GP_EUNSUPPORTED, "options.coregionalization",
                            "a coregionalised sgpr model does not update online: fit a new "
                            "version with all the data");
    gp_inducing_post *p = model->impl;
    int rc = gp_check_working_points(model, X, k, GP_WORKING_LIMIT, err);
    if (rc == GP_OK)
        rc = gp_check_working_targets(model, Y, k, GP_WORKING_LIMIT, err);
    if (rc)
        return rc;
    size_t M = p->m;
    if (k <= OBSERVE_CHUNK) {
        rc = observe_chunks(model, p, X, Y, noise, k, p->C, p->mt, err);
    } else { /* on copies, swapped in when every chunk went in */
        double *C = gp_alloc_doubles(M * M, err), *mt = gp_alloc_doubles(M, err);
        rc = C && mt ? GP_OK : GP_ENOMEM;
        if (rc == GP_OK) {
            memcpy(C, p->C, M * M * sizeof *C);
            memcpy(mt, p->mt, M * sizeof *mt);
            rc = observe_chunks(model, p, X, Y, noise, k, C, mt, err);
        }
        if (rc == GP_OK) {
            double *t = p->C;
            p->C = C, C = t;
            t = p->mt, p->mt = mt, mt = t;
        }
        free(C);
        free(mt);
    }
    if (rc == GP_OK)
        model->n_train += k;
    return rc;
}

static int sgpr_observe(gp_model *model, const double *X, const double *Y, size_t k,
                        gp_error *err)
{
    return sgpr_observe_noise(model, X, Y, NULL, k, err);
}

/* ---- the posterior's gradient in x (gp_model_predict_grad) ---- */

static int sgpr_predict_grad(const gp_model *model, const double *P, double *mean, double *var,
                             double *dmean, double *dvar, gp_error *err)
{
    if (gp_coreg_sparse_impl_is(model->impl))
        return gp_error_set(err, GP_EUNSUPPORTED, "n_outputs",
                            "the posterior gradient in x is for models of one output");
    return gp_inducing_method_predict_grad(model, P, mean, var, dmean, dvar, err);
}

static const gp_method_ops sgpr_ops = {
    .fit = sgpr_fit,
    /* the impl is the inducing posterior or a coregionalised model's */
    .predict = gp_coreg_inducing_predict,
    .predict_grad = sgpr_predict_grad,
    .observe = sgpr_observe,
    .observe_noise = sgpr_observe_noise,
    .batch_invariant = 1, /* core/inducing's and core/coreg's predict: per-point arithmetic */
    .sample = gp_coreg_inducing_sample,
    .export_impl = gp_coreg_inducing_export,
    .import_impl = gp_coreg_inducing_import,
    .free_impl = gp_coreg_inducing_free,
    .check_option = gp_coreg_check_option,
};

static const gp_info_spec sgpr_info[] = {
    {"inducing", GP_INFO_NUMBER,
     "M, the number of inducing points"},
    {"inducing_selection", GP_INFO_STRING,
     "how Z was chosen (greedy, kmeans or random)"},
    {"optimize_inducing", GP_INFO_NUMBER,
     "1 when Z moved with the hyperparameters"},
    {"trace_term", GP_INFO_NUMBER,
     "tr(Kff - Q) at the optimum"},
    {"trace_fraction", GP_INFO_NUMBER,
     "tr(Kff - Q) / tr(Kff)"},
    {"exact_lml", GP_INFO_NUMBER,
     "the exact log marginal likelihood at the fitted hyperparameters (up to 5000 "
     "training points)"},
    {"gap", GP_INFO_NUMBER,
     "exact_lml minus the bound: the KL divergence of q from the posterior (with exact_lml)"},
    {"streamed_rows", GP_INFO_NUMBER,
     "a fit over a data set: the rows it read in chunks (every process's)"},
    {"chunk_rows", GP_INFO_NUMBER, "a fit over a data set: rows per chunk read"},
    {"ranks", GP_INFO_NUMBER,
     "a fit over a data set: processes whose sums it added (1 on one machine)"},
    {"candidates", GP_INFO_NUMBER,
     "a fit over a data set: the rows Z was chosen among (every row up to "
     "max(4096, 8 inducing))"},
};

static const gp_option_setting sgpr_quick[] = {{"max_iterations", 8}, {"inducing", 8}};

const gp_method gp_method_sgpr = {
    .name = "sgpr",
    .summary = "Sparse variational GP with M inducing points (Titsias' collapsed bound, L-BFGS "
               "with analytic gradients): O(N M^2) per evaluation, no N x N matrix; O(M^2) per "
               "predicted point",
    .objective_name = "elbo",
    .options = sgpr_options,
    .n_options = sizeof sgpr_options / sizeof sgpr_options[0],
    .kernels = sgpr_kernels,
    .n_kernels = sizeof sgpr_kernels / sizeof sgpr_kernels[0],
    .composite_kernels = 0,
    .per_point_noise = 1,
    .mean_functions = 1,
    .iterations_option = "max_iterations",
    .restarts_option = NULL,
    .info = sgpr_info,
    .n_info = sizeof sgpr_info / sizeof sgpr_info[0],
    .quick = sgpr_quick,
    .n_quick = sizeof sgpr_quick / sizeof sgpr_quick[0],
    .hyper_priors = 1,
    .coregionalization = 1,
    .streams_rows = 1,
    .ops = &sgpr_ops,
};
