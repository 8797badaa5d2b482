/* Sparse variational GP regression (Titsias' collapsed bound): see core/methods/sgpr.h.
 *
 * Derivation of the gradient. With Sigma = Q + s2 I, beta = Sigma^{-1} y and
 * G_Q = -(Sigma^{-1} - beta beta^T)/2 + I/(2 s2) (the trace term's -tr(Q)
 * contributes the identity), dF = tr(G_Q dQ) - sum_i dk_ii/(2 s2) + dF/ds2 ds2.
 * Q = Kfu Kuu^{-1} Kuf with P = Kuu^{-1} Kuf = L^{-T} V gives
 *   tr(G_Q dQ) = 2 tr(H dKfu) - tr(H P^T dKuu),   H = P G_Q (m x n).
 * Woodbury (Sigma^{-1} = (I - V^T B^{-1} V / s2) / s2) makes V Sigma^{-1} =
 * B^{-1} V / s2 and V beta = mw = B^{-1} V y / s2, so
 *   H = L^{-T} E,   E = ((I - B^{-1}) V / s2 + mw beta^T) / 2,
 *   H P^T = L^{-T} (B - 2I + B^{-1} + mw mw^T) L^{-1} / 2     (V V^T = s2 (B - I)),
 * all from m x m matrices and V: no n x n matrix. */
#include "core/methods/sgpr.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/inducing/inducing.h"
#include "core/kernel/lml.h"
#include "core/linalg/linalg.h"
#include "core/model/method.h"

#define LOG_2PI 1.8378770664093454836

/* ---- the bound ---- */

/* Buffers of one evaluation: three m x n (V, and for the gradient Kuf kept
 * from before the solve and the sensitivity to it), a handful of m x m. */
typedef struct sgpr_work {
    size_t n, m;
    double *L, *V, *B, *Lb, *Binv, *T, *Kuf, *Wuf;
    double *vy, *c, *mw, *beta, *h;
} sgpr_work;

static void work_free(sgpr_work *w)
{
    free(w->L);
    free(w->V);
    free(w->B);
    free(w->Lb);
    free(w->Binv);
    free(w->T);
    free(w->Kuf);
    free(w->Wuf);
    free(w->vy);
    free(w->c);
    free(w->mw);
    free(w->beta);
    free(w->h);
}

static int work_alloc(sgpr_work *w, size_t n, size_t m, int with_grad, gp_error *err)
{
    memset(w, 0, sizeof *w);
    w->n = n;
    w->m = m;
    size_t mn = 0, mm = 0;
    int rc = gp_checked_size(m, n, &mn, err);
    if (rc == GP_OK)
        rc = gp_checked_size(m, m, &mm, err);
    if (rc)
        return rc;
    w->L = gp_alloc_doubles(mm, err);
    w->V = gp_alloc_doubles(mn, err);
    w->B = gp_alloc_doubles(mm, err);
    w->Lb = gp_alloc_doubles(mm, err);
    w->Binv = gp_alloc_doubles(mm, err);
    w->vy = gp_alloc_doubles(m, err);
    w->c = gp_alloc_doubles(m, err);
    w->mw = gp_alloc_doubles(m, err);
    int ok = w->L && w->V && w->B && w->Lb && w->Binv && w->vy && w->c && w->mw;
    if (ok && with_grad) {
        w->T = gp_alloc_doubles(mm, err);
        w->Kuf = gp_alloc_doubles(mn, err);
        w->Wuf = gp_alloc_doubles(mn, err);
        w->beta = gp_alloc_doubles(n, err);
        w->h = gp_alloc_doubles(m, err);
        ok = w->T && w->Kuf && w->Wuf && w->beta && w->h;
    }
    if (!ok) {
        work_free(w);
        return GP_ENOMEM;
    }
    return GP_OK;
}

/* L, V = L^{-1} Kuf, B = I + V V^T / s2 (full), Lb = chol(B), and the value
 * of F into terms. *jitter receives Kuu's. */
static int bound_value(const gp_kernel *k, double s2, const double *X, const double *y,
                       const double *Z, sgpr_work *w, double *jitter, gp_sgpr_terms *terms,
                       gp_error *err)
{
    size_t n = w->n, m = w->m;
    int rc = gp_inducing_kuu_factor(k, Z, m, w->L, jitter, err);
    if (rc)
        return rc == GP_EDATA ? rc : GP_ENOTPD;
    gp_kernel_cross(k, Z, m, X, n, w->V, m);
    if (w->Kuf) /* the gradient's contraction reuses the values */
        memcpy(w->Kuf, w->V, m * n * sizeof *w->V);
    gp_trsm_lower(w->L, m, m, 0, w->V, n, m);
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)m, (blasint)n, 1.0 / s2, w->V,
                (blasint)m, 0.0, w->B, (blasint)m);
    for (size_t i = 0; i < m; i++)
        w->B[i * m + i] += 1.0;
    gp_symmetrize_from_lower(w->B, m, m);
    memcpy(w->Lb, w->B, m * m * sizeof *w->B);
    if (LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)m, w->Lb, (lapack_int)m) != 0)
        return gp_error_set(err, GP_ENOTPD, NULL, "I + V V^T / s2 is not positive definite");
    cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)m, (blasint)n, 1.0, w->V, (blasint)m, y, 1,
                0.0, w->vy, 1);
    for (size_t i = 0; i < m; i++)
        w->c[i] = w->vy[i] / s2;
    cblas_dtrsv(CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)m, w->Lb,
                (blasint)m, w->c, 1);
    memcpy(w->mw, w->c, m * sizeof *w->c);
    cblas_dtrsv(CblasColMajor, CblasLower, CblasTrans, CblasNonUnit, (blasint)m, w->Lb,
                (blasint)m, w->mw, 1);
    double trvv = cblas_ddot((blasint)(m * n), w->V, 1, w->V, 1);
    double kdiag = (double)n * gp_kernel_diag(k, X); /* stationary: one point serves */
    double yy = cblas_ddot((blasint)n, y, 1, y, 1), cc = cblas_ddot((blasint)m, w->c, 1, w->c, 1);
    terms->trace = kdiag - trvv;
    terms->bound = -0.5 * (double)n * (LOG_2PI + log(s2)) - 0.5 * gp_chol_logdet(w->Lb, m, m) -
                   0.5 * (yy / s2 - cc) - terms->trace / (2.0 * s2);
    if (!isfinite(terms->bound))
        return gp_error_set(err, GP_ENOTPD, NULL, "the bound is not finite");
    return GP_OK;
}

/* Binv = B^{-1} (full) from Lb. */
static int invert_b(sgpr_work *w, gp_error *err)
{
    size_t m = w->m;
    memcpy(w->Binv, w->Lb, m * m * sizeof *w->Lb);
    if (LAPACKE_dpotri(LAPACK_COL_MAJOR, 'L', (lapack_int)m, w->Binv, (lapack_int)m) != 0)
        return gp_error_set(err, GP_ENOTPD, NULL, "B is singular");
    gp_symmetrize_from_lower(w->Binv, m, m);
    return GP_OK;
}

/* Wuf = 2 H = 2 T V + 2 h beta^T with T = L^{-T} (I - B^{-1}) / (2 s2) and
 * h = L^{-T} mw / 2; beta = (y - V^T mw) / s2. */
static void sensitivity_fu(double s2, const double *y, sgpr_work *w)
{
    size_t n = w->n, m = w->m;
    for (size_t i = 0; i < n; i++)
        w->beta[i] = y[i];
    cblas_dgemv(CblasColMajor, CblasTrans, (blasint)m, (blasint)n, -1.0, w->V, (blasint)m, w->mw,
                1, 1.0, w->beta, 1);
    for (size_t i = 0; i < n; i++)
        w->beta[i] /= s2;
    for (size_t j = 0; j < m; j++)
        for (size_t i = 0; i < m; i++)
            w->T[i + j * m] = ((i == j ? 1.0 : 0.0) - w->Binv[i + j * m]) / (2.0 * s2);
    gp_trsm_lower(w->L, m, m, 1, w->T, m, m);
    for (size_t i = 0; i < m; i++)
        w->h[i] = 0.5 * w->mw[i];
    cblas_dtrsv(CblasColMajor, CblasLower, CblasTrans, CblasNonUnit, (blasint)m, w->L, (blasint)m,
                w->h, 1);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)m, (blasint)n, (blasint)m,
                2.0, w->T, (blasint)m, w->V, (blasint)m, 0.0, w->Wuf, (blasint)m);
    cblas_dger(CblasColMajor, (blasint)m, (blasint)n, 2.0, w->h, 1, w->beta, 1, w->Wuf,
               (blasint)m);
}

/* Wuu = -L^{-T} (B - 2I + B^{-1} + mw mw^T) L^{-1} / 2 into T (reused). */
static void sensitivity_uu(sgpr_work *w)
{
    size_t m = w->m;
    double *S = w->T;
    for (size_t j = 0; j < m; j++)
        for (size_t i = 0; i < m; i++)
            S[i + j * m] = w->B[i + j * m] + w->Binv[i + j * m] + w->mw[i] * w->mw[j] -
                           (i == j ? 2.0 : 0.0);
    gp_trsm_lower(w->L, m, m, 1, S, m, m);
    cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)m,
                (blasint)m, -0.5, w->L, (blasint)m, S, (blasint)m);
    gp_symmetrize_average(S, m, m);
}

static int bound_gradient(const gp_kernel *k, double s2, const double *X, const double *y,
                          const double *Z, const gp_sgpr_terms *terms, sgpr_work *w,
                          double *grad, double *gz, gp_error *err)
{
    size_t n = w->n, m = w->m, np = gp_kernel_n_params(k);
    sensitivity_fu(s2, y, w);
    sensitivity_uu(w);
    int rc = gp_inducing_contract(k, X, n, Z, m, w->Kuf, w->Wuf, w->T, -1.0 / (2.0 * s2), grad,
                                  gz, err);
    if (rc)
        return rc;
    double tr_binv = 0.0;
    for (size_t i = 0; i < m; i++)
        tr_binv += w->Binv[i * m + i];
    double bb = cblas_ddot((blasint)n, w->beta, 1, w->beta, 1);
    double gs = -0.5 * (((double)n - (double)m + tr_binv) / s2 - bb) +
                terms->trace / (2.0 * s2 * s2);
    grad[np] = s2 * gs;
    return GP_OK;
}

static void fill_post(const sgpr_work *w, const double *Z, size_t d, double jitter,
                      gp_inducing_post *post)
{
    size_t m = w->m;
    memcpy(post->Z, Z, d * m * sizeof *Z);
    memcpy(post->L, w->L, m * m * sizeof *w->L);
    memcpy(post->C, w->Binv, m * m * sizeof *w->Binv);
    memcpy(post->mt, w->mw, m * sizeof *w->mw);
    post->jitter = jitter;
}

int gp_sgpr_bound(const gp_kernel *k, double s2, const double *X, size_t n, size_t d,
                  const double *y, const double *Z, size_t m, gp_sgpr_terms *terms,
                  double *grad, double *gz, gp_inducing_post *post, gp_error *err)
{
    if (n == 0 || m == 0 || !(s2 > 0.0))
        return gp_error_set(err, GP_EINVAL, NULL, "sgpr bound needs n, m >= 1 and s2 > 0");
    sgpr_work w;
    double jitter = 0.0;
    int rc = work_alloc(&w, n, m, grad != NULL, err);
    if (rc == GP_OK)
        rc = bound_value(k, s2, X, y, Z, &w, &jitter, terms, err);
    if (rc == GP_OK && (grad || post))
        rc = invert_b(&w, err);
    if (rc == GP_OK && grad)
        rc = bound_gradient(k, s2, X, y, Z, terms, &w, grad, gz, err);
    if (rc == GP_OK && post) {
        rc = gp_inducing_post_alloc(post, m, d, err);
        if (rc == GP_OK)
            fill_post(&w, Z, d, jitter, post);
    }
    work_free(&w);
    return rc;
}

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
};

/* Memory checked before anything is allocated: three m x n buffers per
 * evaluation plus the working copy of X, within the budget of an exact fit of
 * max_train_points points (as for the other methods). */
static int size_guard(const gp_fit_request *req, size_t m, gp_error *err)
{
    double cap = (double)gp_fit_point_cap(req);
    double need = (double)req->n * (3.0 * (double)m + (double)req->d + 4.0) +
                  6.0 * (double)m * (double)m;
    if (need > cap * cap)
        return gp_error_set(err, GP_ETOOBIG, "options.inducing",
                            "sgpr with %zu inducing points on %zu points needs %.1f GB of "
                            "workspace, above the budget of an exact fit of max_train_points "
                            "= %.0f points (%.1f GB): use fewer inducing points or raise "
                            "--max-train-points",
                            m, req->n, need * 8e-9, cap, cap * cap * 8e-9);
    return GP_OK;
}

typedef struct sgpr_data {
    const double *X, *y;
    size_t n, d;
} sgpr_data;

static int sgpr_objective(void *ctx, const gp_kernel *k, double s2, const double *Z, size_t m,
                          double *f, double *grad, double *gz)
{
    const sgpr_data *data = ctx;
    gp_sgpr_terms terms;
    gp_error err;
    int rc = gp_sgpr_bound(k, s2, data->X, data->n, data->d, data->y, Z, m, &terms, grad, gz,
                           NULL, &err);
    *f = terms.bound;
    return rc;
}

static void report(gp_model *model, const gp_fit_request *req, const sgpr_data *data,
                   const gp_sgpr_terms *terms, size_t m, const char *selection)
{
    double offset = -(double)data->n * log(model->y_scale);
    model->diag.objective = terms->bound + offset;
    gp_model_info_number(model, "inducing", (double)m);
    gp_model_info_string(model, "inducing_selection", selection);
    gp_model_info_number(model, "optimize_inducing",
                         gp_option_number(model->method, req, "optimize_inducing"));
    gp_model_info_number(model, "trace_term", terms->trace);
    gp_model_info_number(model, "trace_fraction",
                         terms->trace / ((double)data->n * gp_kernel_diag(model->kernel, data->X)));
    size_t cap = gp_fit_point_cap(req);
    double lml;
    gp_error err;
    if (data->n <= GP_SGPR_EXACT_REPORT_MAX && data->n <= cap &&
        gp_exact_lml_grad(model->kernel, model->noise_variance, data->X, data->d, data->n,
                          data->y, &lml, NULL, &err) == GP_OK) {
        gp_model_info_number(model, "exact_lml", lml + offset);
        gp_model_info_number(model, "gap", lml - terms->bound);
    }
}

/* Select Z, optimise, and build the posterior at the optimum. */
static int fit_into(gp_model *model, const gp_fit_request *req, const sgpr_data *data,
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
        .fn = sgpr_objective, .ctx = (void *)data,
        .optimize_z = gp_option_number(me, req, "optimize_inducing") != 0.0,
        .max_iterations = (int)gp_option_number(me, req, "max_iterations"),
        .tolerance = gp_option_number(me, req, "tolerance"),
        .objective_offset = -(double)data->n * log(model->y_scale)};
    int rounds = (int)gp_option_number(me, req, "reselect");
    int rc = gp_inducing_fit(model->kernel, &np, &model->noise_variance, sel, M, rounds, data->X,
                             data->n, Z, &m, req, &spec, &model->diag, err);
    gp_sgpr_terms terms;
    if (rc == GP_OK)
        rc = gp_sgpr_bound(model->kernel, model->noise_variance, data->X, data->n, d, data->y,
                           Z, m, &terms, NULL, NULL, im, err);
    if (rc == GP_OK)
        rc = gp_inducing_post_prepare(im, model->kernel, err);
    if (rc == GP_OK) {
        model->diag.jitter = im->jitter;
        report(model, req, data, &terms, m, gp_inducing_selection_name(sel));
    }
    free(Z);
    return rc;
}

static int sgpr_fit(const gp_fit_request *req, gp_model **out, gp_error *err)
{
    const gp_method *me = &gp_method_sgpr;
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
        sgpr_data data = {X, y, req->n, req->d};
        rc = fit_into(model, req, &data, im, err);
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

static const gp_method_ops sgpr_ops = {
    .fit = sgpr_fit,
    .predict = gp_inducing_method_predict,
    .sample = gp_inducing_method_sample,
    .export_impl = gp_inducing_method_export,
    .import_impl = gp_inducing_method_import,
    .free_impl = gp_inducing_method_free,
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
};

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
    .iterations_option = "max_iterations",
    .restarts_option = NULL,
    .info = sgpr_info,
    .n_info = sizeof sgpr_info / sizeof sgpr_info[0],
    .ops = &sgpr_ops,
};
