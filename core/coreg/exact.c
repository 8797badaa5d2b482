/* exact with options.coregionalization: core/coreg/exact.h.
 *
 * State: the rows' standardised points Xt (d x n), the observed entries
 * (row order), their working targets yw (M), the general path's factor L
 * (M x M) of K + jitter I and alpha = K^-1 yw. Output j's answers are
 * y_mean[j] + y_scale[j] v. */
#include "core/coreg/exact.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/coreg/lml.h"
#include "core/coreg/params.h"
#include "core/linalg/linalg.h"
#include "core/optim/driver.h"

struct gp_coreg_exact {
    gp_coreg_params cp;
    gp_coreg_entries e;
    size_t n, d, cap;
    double *Xt, *yw, *L, *alpha;
    int kronecker;
};

void gp_coreg_exact_free(gp_coreg_exact *ce)
{
    if (ce == NULL)
        return;
    gp_coreg_params_free(&ce->cp);
    gp_coreg_entries_free(&ce->e);
    free(ce->Xt);
    free(ce->yw);
    free(ce->L);
    free(ce->alpha);
    free(ce);
}

static gp_coreg_data data_of(const gp_coreg_exact *ce)
{
    gp_coreg_data D = {ce->Xt, ce->n, ce->d, &ce->e, ce->yw};
    return D;
}

static void point_view(gp_model *model, gp_coreg_exact *ce)
{
    gp_coreg_params_view(&ce->cp, &model->coreg);
    model->coreg.n_observed = ce->e.M;
    model->coreg.kronecker = ce->kronecker;
}

/* The LML in original units: each entry's density carries 1 / y_scale. */
static double original_lml(const gp_coreg_exact *ce, double lml)
{
    for (size_t a = 0; a < ce->e.M; a++)
        lml -= log(ce->cp.y_scale[ce->e.out[a]]);
    return lml;
}

/* L, alpha and the LML at the current parameters (general path), into new
 * buffers that replace ce's only on success. */
static int refactor(gp_model *model, gp_coreg_exact *ce, const gp_cancel *cancel, gp_error *err)
{
    size_t M = ce->e.M, MM = 0;
    int rc = gp_checked_size(M, M, &MM, err);
    double *L = rc ? NULL : gp_alloc_doubles(MM, err);
    double *alpha = L ? gp_alloc_doubles(M, err) : NULL;
    gp_chol_info info = {0};
    double lml = 0.0;
    gp_coreg_data D = data_of(ce);
    if (alpha == NULL)
        rc = rc ? rc : GP_ENOMEM;
    else
        rc = gp_coreg_lml_general(&ce->cp, &D, L, alpha, &lml, NULL, cancel, &info, err);
    if (rc) {
        free(L);
        free(alpha);
        return rc;
    }
    gp_zero_upper(L, M, M);
    free(ce->L);
    free(ce->alpha);
    ce->L = L;
    ce->alpha = alpha;
    model->diag.jitter = info.jitter;
    model->diag.objective = original_lml(ce, lml);
    return GP_OK;
}

/* ---- the fit's objective ---- */

typedef struct coreg_problem {
    gp_coreg_exact *ce;
    double *A, *alpha, *grad; /* general path's M x M and M; grad dim */
    const gp_cancel *cancel;
} coreg_problem;

static int evaluate(gp_coreg_exact *ce, double *A, double *alpha, double *lml, double *grad,
                    const gp_cancel *cancel, gp_error *err)
{
    gp_coreg_data D = data_of(ce);
    if (ce->kronecker)
        return gp_coreg_lml_kronecker(&ce->cp, &D, lml, grad, cancel, err);
    return gp_coreg_lml_general(&ce->cp, &D, A, alpha, lml, grad, cancel, NULL, err);
}

static double problem_objective(void *ctx, const double *x, double *g)
{
    coreg_problem *pr = ctx;
    gp_coreg_params_unpack(&pr->ce->cp, x);
    double lml;
    if (evaluate(pr->ce, pr->A, pr->alpha, &lml, g ? pr->grad : NULL, pr->cancel, NULL) ||
        !isfinite(lml))
        return INFINITY;
    size_t dim = gp_coreg_params_dim(&pr->ce->cp);
    for (size_t i = 0; g && i < dim; i++)
        g[i] = -pr->grad[i];
    return -lml;
}

static int optimise(const gp_method *m, const gp_fit_request *req, gp_model *model,
                    gp_coreg_exact *ce, gp_error *err)
{
    size_t dim = gp_coreg_params_dim(&ce->cp), M = ce->e.M, MM = 0;
    coreg_problem pr = {ce, NULL, NULL, NULL, &req->cancel};
    double *x = gp_alloc_doubles(dim, err);
    pr.grad = gp_alloc_doubles(dim, err);
    int rc = x && pr.grad ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK && !ce->kronecker && (rc = gp_checked_size(M, M, &MM, err)) == GP_OK &&
        (!(pr.A = gp_alloc_doubles(MM, err)) || !(pr.alpha = gp_alloc_doubles(M, err))))
        rc = GP_ENOMEM;
    gp_driver_options opt;
    gp_driver_default_options(&opt);
    opt.max_iterations = (int)gp_option_number(m, req, "max_iterations");
    opt.tolerance = gp_option_number(m, req, "tolerance");
    opt.restarts = (int)gp_option_number(m, req, "restarts");
    opt.seed = req->seed;
    opt.progress = req->progress;
    opt.progress_ctx = req->progress_ctx;
    opt.objective_offset = original_lml(ce, 0.0);
    opt.cancel = &req->cancel;
    gp_driver_result res = {0};
    if (rc == GP_OK) {
        gp_coreg_params_pack(&ce->cp, x);
        rc = gp_driver_minimize(problem_objective, &pr, x, dim, &opt, &res, err);
    }
    if (rc == GP_OK)
        gp_coreg_params_unpack(&ce->cp, x);
    model->diag.iterations += res.iterations;
    model->diag.evaluations += res.evaluations;
    model->diag.converged = res.converged;
    model->diag.restarts = res.restarts;
    free(x);
    free(pr.grad);
    free(pr.A);
    free(pr.alpha);
    return rc;
}

/* ---- fit ---- */

static int choose_solver(const gp_coreg_spec *spec, gp_coreg_exact *ce, gp_error *err)
{
    int iso = gp_coreg_entries_isotopic(&ce->e, ce->n, ce->cp.p);
    int can = ce->cp.q == 1 && iso;
    if (spec->solver == GP_COREG_SOLVER_KRONECKER && !can)
        return gp_error_set(err, GP_EINVAL, "options.coregionalization.solver",
                            "options.coregionalization.solver: \"kronecker\" needs icm (one "
                            "latent kernel) and every output observed at every row%s",
                            iso ? "" : " (y has missing values)");
    ce->kronecker = can && spec->solver != GP_COREG_SOLVER_GENERAL;
    return GP_OK;
}

/* The rows, entries, parameters and working targets of the request. */
static int fit_setup(gp_model *model, const gp_fit_request *req, const gp_coreg_spec *spec,
                     gp_coreg_exact *ce, gp_error *err)
{
    size_t n = req->n, d = req->d, p = req->n_outputs ? req->n_outputs : 1, nd = 0;
    ce->n = n;
    ce->d = d;
    ce->cap = gp_fit_point_cap(req);
    int rc = gp_coreg_entries_build(req->y, n, p, &ce->e, err);
    if (rc == GP_OK && ce->e.M > ce->cap)
        rc = gp_error_set(err, GP_ETOOBIG, "X",
                          "exact GP needs an M x M matrix of the %zu observed values: they "
                          "exceed max_train_points = %zu (use sgpr or svgp)",
                          ce->e.M, ce->cap);
    if (rc == GP_OK)
        rc = gp_checked_size(n, d, &nd, err);
    if (rc == GP_OK && (!(ce->Xt = gp_alloc_doubles(nd, err)) ||
                        !(ce->yw = gp_alloc_doubles(ce->e.M ? ce->e.M : 1, err))))
        rc = GP_ENOMEM;
    if (rc == GP_OK)
        rc = gp_coreg_params_init(&ce->cp, spec, p, model->kernel, req, err);
    if (rc == GP_OK)
        rc = choose_solver(spec, ce, err);
    if (rc)
        return rc;
    if (model->standardize && p > 1) /* gp_model_new standardises one output's X only */
        gp_column_stats(req->X, n, d, model->x_mean, model->x_scale);
    gp_model_standardize_points(model, req->X, n, ce->Xt);
    gp_coreg_standardise(&ce->cp, req->y, n, &ce->e, model->standardize, ce->yw);
    return GP_OK;
}

/* The model's common fields from the fitted parameters: its kernel is
 * latent 0's, its noise output 0's (every number is in model->coreg). */
static void fill_common(gp_model *model, gp_coreg_exact *ce)
{
    double *theta = malloc((ce->cp.n_kparams + 1) * sizeof *theta);
    if (theta) {
        gp_kernel_get_params(ce->cp.kernels[0], theta);
        gp_kernel_set_params(model->kernel, theta);
        model->kernel->fixed = ce->cp.kernels[0]->fixed;
    }
    free(theta);
    model->noise_variance = ce->cp.noise[0];
    if (ce->cp.p == 1) {
        model->y_mean = ce->cp.y_mean[0];
        model->y_scale = ce->cp.y_scale[0];
    }
    point_view(model, ce);
}

int gp_coreg_exact_fit(const gp_method *m, const gp_fit_request *req, gp_model **out,
                       gp_coreg_exact **ce_out, gp_error *err)
{
    gp_coreg_spec spec;
    int rc = gp_coreg_spec_from_request(req, 1, &spec, err);
    if (rc)
        return rc;
    gp_model *model;
    if ((rc = gp_model_new(m, req, &model, err)) != GP_OK)
        return rc;
    gp_coreg_exact *ce = calloc(1, sizeof *ce);
    rc = ce ? fit_setup(model, req, &spec, ce, err)
            : gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    if (rc == GP_OK && gp_coreg_params_dim(&ce->cp) > 0)
        rc = optimise(m, req, model, ce, err);
    if (rc == GP_OK)
        rc = refactor(model, ce, &req->cancel, err);
    if (rc) {
        gp_coreg_exact_free(ce);
        gp_model_free(model);
        return rc;
    }
    fill_common(model, ce);
    *out = model;
    *ce_out = ce;
    return GP_OK;
}

/* ---- predict ----
 * Column (i, j) of a block: the covariance of (point i, output j) with the
 * entries, c_a = sum_q B_q[j, j_a] k_q(x_i, x_{row a}); its mean c^T alpha
 * and its whitened column v = L^-1 c (gp_solve_lower_columns: a column's
 * bits are its own), so a point's answer does not depend on the others. */

typedef struct pred_block {
    size_t m;        /* points */
    double *Kc;      /* q x (n x m): k_q(X_train, points) */
    double *V;       /* M x (m p): column i + m j */
    double *mu;      /* m p latent means, working units */
    double *prior;   /* q x m: k_q(x_i, x_i) */
} pred_block;

static void block_free(pred_block *b)
{
    free(b->Kc);
    free(b->V);
    free(b->mu);
    free(b->prior);
}

static int block_columns(const gp_coreg_exact *ce, const double *P, size_t m, pred_block *b,
                         gp_error *err)
{
    size_t n = ce->n, M = ce->e.M, p = ce->cp.p, q = ce->cp.q, c1 = 0, c2 = 0;
    memset(b, 0, sizeof *b);
    b->m = m;
    int rc = gp_checked_size(q * n, m, &c1, err);
    if (rc == GP_OK)
        rc = gp_checked_size(M, m * p, &c2, err);
    if (rc)
        return rc;
    if (!(b->Kc = gp_alloc_doubles(c1 ? c1 : 1, err)) || !(b->V = gp_alloc_doubles(c2 ? c2 : 1, err)) ||
        !(b->mu = gp_alloc_doubles(m * p + 1, err)) || !(b->prior = gp_alloc_doubles(q * m + 1, err)))
        return GP_ENOMEM;
    for (size_t l = 0; l < q; l++) {
        gp_kernel_cross(ce->cp.kernels[l], ce->Xt, n, P, m, b->Kc + l * n * m, n);
        for (size_t i = 0; i < m; i++)
            b->prior[l * m + i] = gp_kernel_diag(ce->cp.kernels[l], P + i * ce->d);
    }
    for (size_t j = 0; j < p; j++)
        for (size_t i = 0; i < m; i++) {
            double *v = b->V + (j * m + i) * M;
            for (size_t a = 0; a < M; a++) {
                double s = 0.0;
                for (size_t l = 0; l < q; l++)
                    s += ce->cp.B[l * p * p + ce->e.out[a] * p + j] *
                         b->Kc[l * n * m + i * n + ce->e.row[a]];
                v[a] = s;
            }
            b->mu[j * m + i] = gp_dot(v, ce->alpha, M);
        }
    gp_solve_lower_columns(ce->L, M, M, b->V, m * p, M);
    return GP_OK;
}

/* Latent covariance (working units) of columns c1 = (i1, j1), c2 = (i2, j2). */
static double latent_cov(const gp_coreg_exact *ce, const double *P, const pred_block *b,
                         size_t c1, size_t c2)
{
    size_t m = b->m, p = ce->cp.p, M = ce->e.M;
    size_t i1 = c1 % m, j1 = c1 / m, i2 = c2 % m, j2 = c2 / m;
    double s = 0.0;
    for (size_t l = 0; l < ce->cp.q; l++) {
        double k = i1 == i2 ? b->prior[l * m + i1]
                            : gp_kernel_eval(ce->cp.kernels[l], P + i1 * ce->d, P + i2 * ce->d, 0);
        s += ce->cp.B[l * p * p + j2 * p + j1] * k;
    }
    return s - gp_dot(b->V + c1 * M, b->V + c2 * M, M);
}

static double clamp_variance(double v, size_t *clamped)
{
    if (v < 0.0) {
        (*clamped)++;
        return 0.0;
    }
    return v;
}

static void fill_covariances(const gp_coreg_exact *ce, const double *P, const pred_block *b,
                             int include_noise, gp_prediction *out)
{
    size_t m = b->m, p = ce->cp.p, mp = m * p;
    for (size_t c2 = 0; c2 < mp; c2++)
        for (size_t c1 = 0; c1 < mp; c1++) {
            size_t j1 = c1 / m, j2 = c2 / m;
            double v = latent_cov(ce, P, b, c1, c2);
            if (c1 == c2)
                v = clamp_variance(v + (include_noise ? ce->cp.noise[j1] : 0.0), &out->clamped);
            v *= ce->cp.y_scale[j1] * ce->cp.y_scale[j2];
            if (out->cross_covariance)
                out->cross_covariance[c2 * mp + c1] = v;
            if (j1 == j2 && out->covariance)
                out->covariance[j1 * m * m + (c2 % m) * m + c1 % m] = v;
        }
}

/* Means and variances of the b points P (working units) into out's rows
 * start .. start + b (original units). */
static int predict_rows(const gp_coreg_exact *ce, const double *P, size_t b, size_t start,
                        size_t m, int include_noise, gp_prediction *out, gp_error *err)
{
    pred_block blk;
    int rc = block_columns(ce, P, b, &blk, err);
    for (size_t j = 0; rc == GP_OK && j < ce->cp.p; j++)
        for (size_t i = 0; i < b; i++) {
            size_t c = j * b + i, o = j * m + start + i;
            double v = latent_cov(ce, P, &blk, c, c) + (include_noise ? ce->cp.noise[j] : 0.0);
            out->mean[o] = ce->cp.y_mean[j] + ce->cp.y_scale[j] * blk.mu[c];
            out->variance[o] =
                ce->cp.y_scale[j] * ce->cp.y_scale[j] * clamp_variance(v, &out->clamped);
        }
    block_free(&blk);
    return rc;
}

/* Points per block: the whitened columns (M x b p) stay below 4M doubles;
 * a point's bits do not depend on its block. */
#define PREDICT_BLOCK_DOUBLES ((size_t)4 << 20)

int gp_coreg_exact_predict(const gp_model *model, const gp_coreg_exact *ce,
                           const gp_predict_request *req, gp_prediction *out, gp_error *err)
{
    size_t m = req->m, d = ce->d, per = ce->e.M * ce->cp.p;
    size_t block = per ? PREDICT_BLOCK_DOUBLES / per : m;
    block = block < 1 ? 1 : block > m ? m : block;
    double *P = NULL;
    int rc = gp_model_points(model, req->X, m, &P, err);
    if (rc == GP_OK && req->full_covariance) { /* one block: every pair is asked */
        pred_block b;
        rc = block_columns(ce, P, m, &b, err);
        if (rc == GP_OK)
            fill_covariances(ce, P, &b, req->include_noise, out);
        block_free(&b);
    }
    for (size_t s = 0; rc == GP_OK && s < m; s += block) {
        size_t b = m - s < block ? m - s : block;
        rc = predict_rows(ce, P + s * d, b, s, m, req->include_noise, out, err);
    }
    free(P);
    return rc;
}

/* ---- sample ---- */

int gp_coreg_exact_sample(const gp_model *model, const gp_coreg_exact *ce,
                          const gp_sample_request *req, double *samples, gp_error *err)
{
    size_t m = req->m, p = ce->cp.p, mp = m * p, ns = req->n_samples, cc = 0;
    double *P = NULL, *C = NULL;
    pred_block b;
    memset(&b, 0, sizeof b);
    int rc = gp_model_points(model, req->X, m, &P, err);
    if (rc == GP_OK)
        rc = gp_checked_size(mp, mp, &cc, err);
    if (rc == GP_OK && (C = gp_alloc_doubles(cc ? cc : 1, err)) == NULL)
        rc = GP_ENOMEM;
    if (rc == GP_OK)
        rc = block_columns(ce, P, m, &b, err);
    for (size_t c2 = 0; rc == GP_OK && c2 < mp; c2++)
        for (size_t c1 = 0; c1 < mp; c1++)
            C[c2 * mp + c1] = latent_cov(ce, P, &b, c1, c2) +
                              (c1 == c2 && req->include_noise ? ce->cp.noise[c1 / m] : 0.0);
    gp_chol_info info;
    if (rc == GP_OK && mp > 0)
        rc = gp_cholesky_jitter(C, mp, mp, &info, err);
    if (rc == GP_OK) {
        gp_rng rng;
        gp_rng_seed(&rng, req->seed);
        double *e = gp_alloc_doubles(mp + 1, err);
        for (size_t s = 0; e && s < ns; s++) {
            gp_rng_normal_fill(&rng, e, mp);
            for (size_t c = 0; c < mp; c++) { /* f = mu + L e, L lower */
                double f = b.mu[c];
                for (size_t k = 0; k <= c; k++)
                    f += C[k * mp + c] * e[k];
                size_t i = c % m, j = c / m;
                samples[j * m * ns + s * m + i] = ce->cp.y_mean[j] + ce->cp.y_scale[j] * f;
            }
        }
        rc = e ? GP_OK : GP_ENOMEM;
        free(e);
    }
    block_free(&b);
    free(C);
    free(P);
    return rc;
}

/* ---- export / import ---- */

int gp_coreg_exact_state(const gp_state *st)
{
    return gp_state_find(st, "coreg_sizes") != NULL;
}

int gp_coreg_exact_export(const gp_coreg_exact *ce, gp_state *st, gp_error *err)
{
    size_t M = ce->e.M;
    double *idx = gp_alloc_doubles(2 * M + 1, err);
    if (idx == NULL)
        return GP_ENOMEM;
    for (size_t a = 0; a < M; a++) {
        idx[a] = (double)ce->e.row[a];
        idx[M + a] = (double)ce->e.out[a];
    }
    int rc = gp_coreg_params_export(&ce->cp, st, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "coreg_entries", M, 2, idx, err);
    free(idx);
    if (rc == GP_OK)
        rc = gp_state_put(st, "X_train", ce->d, ce->n, ce->Xt, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "y_train", M, 1, ce->yw, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "alpha", M, 1, ce->alpha, err);
    if (rc == GP_OK)
        rc = gp_state_put_cholesky(st, "chol_packed", ce->L, M, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "max_train_points", (double)ce->cap, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "coreg_kronecker", (double)ce->kronecker, err);
    return rc;
}

/* The entries: rows < n in row order, outputs < p, each row observed. */
static int import_entries(gp_coreg_exact *ce, const gp_state *st, gp_error *err)
{
    const gp_named_array *a = gp_state_find(st, "coreg_entries");
    if (a == NULL || a->cols != 2 || a->rows == 0)
        return gp_error_set(err, GP_EDATA, "coreg_entries", "missing or corrupt entries");
    size_t M = a->rows;
    ce->e.M = M;
    ce->e.row = malloc(M * sizeof *ce->e.row);
    ce->e.out = malloc(M * sizeof *ce->e.out);
    if (!ce->e.row || !ce->e.out)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t i = 0; i < M; i++) {
        double r = a->data[i], o = a->data[M + i];
        if (!(r >= 0 && r < (double)ce->n && r == floor(r) && o >= 0 &&
              o < (double)ce->cp.p && o == floor(o)))
            return gp_error_set(err, GP_EDATA, "coreg_entries", "corrupt entries");
        ce->e.row[i] = (size_t)r;
        ce->e.out[i] = (size_t)o;
        if (i > 0 && (ce->e.row[i] < ce->e.row[i - 1] ||
                      (ce->e.row[i] == ce->e.row[i - 1] && ce->e.out[i] <= ce->e.out[i - 1])))
            return gp_error_set(err, GP_EDATA, "coreg_entries", "corrupt entries");
    }
    return GP_OK;
}

static int import_arrays(gp_coreg_exact *ce, const gp_state *st, gp_error *err)
{
    size_t M = ce->e.M, MM = 0;
    const double *Xt, *y, *alpha;
    double cap = 0, kron = 0;
    int rc = gp_state_get(st, "X_train", ce->d, ce->n, &Xt, err);
    if (rc == GP_OK)
        rc = gp_state_get(st, "y_train", M, 1, &y, err);
    if (rc == GP_OK)
        rc = gp_state_get(st, "alpha", M, 1, &alpha, err);
    if (rc == GP_OK)
        rc = gp_state_get_scalar(st, "max_train_points", &cap, err);
    if (rc == GP_OK)
        rc = gp_state_get_scalar(st, "coreg_kronecker", &kron, err);
    if (rc == GP_OK && !(cap >= 1 && cap <= 1e15 && cap == floor(cap) && cap >= (double)M))
        rc = gp_error_set(err, GP_EDATA, "max_train_points", "corrupt point cap");
    if (rc == GP_OK)
        rc = gp_checked_size(M, M, &MM, err);
    if (rc)
        return rc;
    ce->cap = (size_t)cap;
    ce->kronecker = kron != 0.0;
    if (!(ce->Xt = gp_alloc_doubles(ce->d * ce->n, err)) || !(ce->yw = gp_alloc_doubles(M, err)) ||
        !(ce->alpha = gp_alloc_doubles(M, err)) || !(ce->L = gp_alloc_doubles(MM, err)))
        return GP_ENOMEM;
    memcpy(ce->Xt, Xt, ce->d * ce->n * sizeof *Xt);
    memcpy(ce->yw, y, M * sizeof *y);
    memcpy(ce->alpha, alpha, M * sizeof *alpha);
    return gp_state_get_cholesky(st, "chol_packed", M, ce->L, err);
}

int gp_coreg_exact_import(gp_model *model, const gp_state *st, gp_coreg_exact **out,
                          gp_error *err)
{
    gp_coreg_exact *ce = calloc(1, sizeof *ce);
    if (ce == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    ce->n = model->n_train;
    ce->d = model->input_dim;
    int rc = gp_coreg_params_import(&ce->cp, st, model->kernel, err);
    if (rc == GP_OK && ce->cp.p != model->n_outputs)
        rc = gp_error_set(err, GP_EDATA, "coreg_sizes", "output count differs from the model's");
    if (rc == GP_OK)
        rc = import_entries(ce, st, err);
    if (rc == GP_OK)
        rc = import_arrays(ce, st, err);
    if (rc) {
        gp_coreg_exact_free(ce);
        return rc;
    }
    point_view(model, ce);
    *out = ce;
    return GP_OK;
}

/* ---- observe ---- */

/* ce's rows, entries and targets with the k new rows appended, in new
 * arrays swapped in by the caller. */
static int append_rows(const gp_model *model, const gp_coreg_exact *ce, const double *X,
                       const double *Y, size_t k, gp_coreg_exact *nw, gp_error *err)
{
    size_t n = ce->n, N = n + k, d = ce->d, p = ce->cp.p, Nd = 0;
    gp_coreg_entries add = {0};
    int rc = gp_checked_size(N, d, &Nd, err);
    if (rc == GP_OK)
        rc = gp_coreg_entries_build(Y, k, p, &add, err);
    size_t M = ce->e.M + add.M;
    if (rc == GP_OK && (M > ce->cap || M < ce->e.M))
        rc = gp_error_set(err, GP_ETOOBIG, "X",
                          "exact GP needs an M x M matrix: %zu observed values exceed "
                          "max_train_points = %zu",
                          M, ce->cap);
    if (rc == GP_OK &&
        (!(nw->Xt = gp_alloc_doubles(Nd, err)) || !(nw->yw = gp_alloc_doubles(M, err)) ||
         !(nw->e.row = malloc(M * sizeof *nw->e.row)) || !(nw->e.out = malloc(M * sizeof *nw->e.out))))
        rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    if (rc == GP_OK) {
        memcpy(nw->Xt, ce->Xt, n * d * sizeof *nw->Xt);
        gp_model_standardize_points(model, X, k, nw->Xt + n * d);
        memcpy(nw->yw, ce->yw, ce->e.M * sizeof *nw->yw);
        memcpy(nw->e.row, ce->e.row, ce->e.M * sizeof *nw->e.row);
        memcpy(nw->e.out, ce->e.out, ce->e.M * sizeof *nw->e.out);
        for (size_t a = 0; a < add.M; a++) {
            size_t j = add.out[a], b = ce->e.M + a;
            nw->e.row[b] = n + add.row[a];
            nw->e.out[b] = j;
            nw->yw[b] = (Y[j * k + add.row[a]] - ce->cp.y_mean[j]) / ce->cp.y_scale[j];
        }
        nw->e.M = M;
        if (!gp_all_finite(nw->yw + ce->e.M, add.M, NULL) ||
            !gp_all_finite(nw->Xt + n * d, k * d, NULL))
            rc = gp_error_set(err, GP_EDATA, "y", "the observed rows are beyond float64's reach "
                                                  "in the model's working units");
    }
    gp_coreg_entries_free(&add);
    return rc;
}

static void swap_state(gp_coreg_exact *a, gp_coreg_exact *b)
{
    gp_coreg_entries te = a->e;
    a->e = b->e;
    b->e = te;
    double *t = a->Xt;
    a->Xt = b->Xt, b->Xt = t;
    t = a->yw, a->yw = b->yw, b->yw = t;
    size_t tn = a->n;
    a->n = b->n, b->n = tn;
}

int gp_coreg_exact_observe(gp_model *model, gp_coreg_exact *ce, const double *X,
                           const double *Y, size_t k, gp_error *err)
{
    int rc = gp_check_working_points(model, X, k, GP_WORKING_LIMIT, err);
    gp_coreg_exact nw;
    memset(&nw, 0, sizeof nw);
    if (rc == GP_OK)
        rc = append_rows(model, ce, X, Y, k, &nw, err);
    if (rc == GP_OK) {
        nw.n = ce->n + k;
        double jitter = model->diag.jitter, objective = model->diag.objective;
        swap_state(ce, &nw);
        rc = refactor(model, ce, NULL, err);
        if (rc) { /* all or nothing: the old rows back */
            swap_state(ce, &nw);
            model->diag.jitter = jitter;
            model->diag.objective = objective;
        } else {
            model->n_train = ce->n;
            ce->kronecker = ce->kronecker && gp_coreg_entries_isotopic(&ce->e, ce->n, ce->cp.p);
            point_view(model, ce);
        }
    }
    gp_coreg_entries_free(&nw.e);
    free(nw.Xt);
    free(nw.yw);
    return rc;
}

/* ---- tests and benchmarks ---- */

size_t gp_coreg_exact_dim(const gp_coreg_exact *ce)
{
    return gp_coreg_params_dim(&ce->cp);
}

void gp_coreg_exact_pack(const gp_coreg_exact *ce, double *x)
{
    gp_coreg_params_pack(&ce->cp, x);
}

int gp_coreg_exact_set(gp_model *model, gp_coreg_exact *ce, const double *x, gp_error *err)
{
    gp_coreg_params_unpack(&ce->cp, x);
    int rc = refactor(model, ce, NULL, err);
    if (rc == GP_OK)
        fill_common(model, ce);
    return rc;
}

int gp_coreg_exact_eval(gp_coreg_exact *ce, const double *x, int kronecker, double *lml,
                        double *grad, gp_error *err)
{
    size_t dim = gp_coreg_params_dim(&ce->cp), M = ce->e.M, MM = 0;
    double *keep = gp_alloc_doubles(dim + 1, err), *A = NULL, *alpha = NULL;
    int rc = keep ? gp_checked_size(M, M, &MM, err) : GP_ENOMEM;
    if (rc == GP_OK && !kronecker &&
        (!(A = gp_alloc_doubles(MM, err)) || !(alpha = gp_alloc_doubles(M, err))))
        rc = GP_ENOMEM;
    if (rc == GP_OK) {
        gp_coreg_params_pack(&ce->cp, keep);
        gp_coreg_params_unpack(&ce->cp, x);
        int was = ce->kronecker;
        ce->kronecker = kronecker;
        rc = evaluate(ce, A, alpha, lml, grad, NULL, err);
        ce->kronecker = was;
        gp_coreg_params_unpack(&ce->cp, keep);
    }
    free(keep);
    free(A);
    free(alpha);
    return rc;
}
