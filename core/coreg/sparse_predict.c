/* Predict, sample, export and import of a coregionalised sgpr or svgp model:
 * core/coreg/sparse_predict.h.
 *
 * At a point x, aw_q = L_q^{-1} k_q(Z, x) for every kernel; output j's
 * whitened projection a_j (K) has block l = A[j,l] aw_{q(l)}, so
 *   mean_j = a_j . mt,   var_j = max(kd_j - |a_j|^2, 0) + max(a_j^T C a_j, 0),
 * kd_j = sum_l A[j,l]^2 k_q(x, x), and the joint covariance of (x, i) and
 * (x', j) is sum_q B_q[i,j] k_q(x, x') - a_i(x) . a_j(x') + a_i(x)^T C a_j(x').
 * The mean and variance are per-point arithmetic in a fixed order (the
 * kernel row, gp_solve_lower_columns, gp_dot), so a point's answer does not
 * depend on the other points of the call (batch_invariant). */
#include "core/coreg/sparse_predict.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/coreg/sparse_impl.h"
#include "core/linalg/linalg.h"



/* ---- predict ---- */

/* ca = C a (symmetric C, lower triangle read) column by column with short
 * dots in a fixed order: inducing.c's quad_form_lower, so a . ca = a^T C a
 * has the same bits whatever else the call holds. */
static void quad_form_lower(const double *C, size_t K, const double *a, double *ca)
{
    for (size_t j = 0; j < K; j++) {
        const double *col = C + j * K;
        double off = j + 1 < K ? gp_dot(col + j + 1, a + j + 1, K - j - 1) : 0.0;
        ca[j] = col[j] * a[j] + 2.0 * off;
    }
}

/* aw (q blocks m x b) of the b points P (d x b). */
static void point_projections(const gp_coreg_sparse_impl *im, const double *P, size_t b,
                              double *aw)
{
    size_t m = im->m;
    for (size_t q = 0; q < im->cp.q; q++) {
        double *Aq = aw + q * m * b;
        gp_kernel_cross_points(im->cp.kernels[q], im->Zp[q], P, b, Aq, m);
        gp_solve_lower_columns(im->Lf + q * m * m, m, m, Aq, b, m);
    }
}

/* Output j's whitened projection a (K) of point i of a block of b. */
static void output_projection(const gp_coreg_sparse_impl *im, const double *aw, size_t b,
                              size_t i, size_t j, double *a)
{
    size_t m = im->m, p = im->cp.p, L = im->cp.q * im->per_q;
    for (size_t l = 0; l < L; l++) {
        size_t q = l / im->per_q;
        double Ajl = im->A[j + l * p];
        const double *w = aw + q * m * b + i * m;
        for (size_t r = 0; r < m; r++)
            a[l * m + r] = Ajl * w[r];
    }
}

static double prior_var(const gp_coreg_sparse_impl *im, const double *x, size_t j)
{
    size_t p = im->cp.p, L = im->cp.q * im->per_q;
    double kd = 0.0;
    for (size_t l = 0; l < L; l++) {
        double Ajl = im->A[j + l * p];
        kd += Ajl * Ajl * gp_kernel_diag(im->cp.kernels[l / im->per_q], x);
    }
    return kd;
}

/* Latent means and variances (working units) of the b points P, m x p each
 * at ld (column j at j ld). */
static void predict_block(const gp_coreg_sparse_impl *im, const double *P, size_t b,
                          double *aw, double *a, double *ca, double *mean, double *var,
                          size_t ld)
{
    size_t K = im->K;
    point_projections(im, P, b, aw);
    for (size_t i = 0; i < b; i++)
        for (size_t j = 0; j < im->cp.p; j++) {
            output_projection(im, aw, b, i, j, a);
            quad_form_lower(im->post.C, K, a, ca);
            double prior = prior_var(im, P + i * im->d, j) - gp_dot(a, a, K);
            double post = gp_dot(a, ca, K);
            mean[j * ld + i] = gp_dot(a, im->post.mt, K);
            var[j * ld + i] = (prior > 0.0 ? prior : 0.0) + (post > 0.0 ? post : 0.0);
        }
}

/* The joint latent covariance (working units) of the n points P: S (n p x
 * n p, index i + n j), with its diagonal from var (n x p) so that it agrees
 * with the per-point variances. */
static int joint_covariance(const gp_coreg_sparse_impl *im, const double *P, size_t n,
                            const double *var, double *S, gp_error *err)
{
    size_t K = im->K, m = im->m, p = im->cp.p, np = n * p;
    double *aw = gp_alloc_doubles(im->cp.q * m * n, err), *Ab = gp_alloc_doubles(K * np, err);
    double *CA = gp_alloc_doubles(K * np, err), *G = gp_alloc_doubles(n * n, err);
    int rc = aw && Ab && CA && G ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK) {
        point_projections(im, P, n, aw);
        for (size_t j = 0; j < p; j++)
            for (size_t i = 0; i < n; i++)
                output_projection(im, aw, n, i, j, Ab + (i + n * j) * K);
        memset(S, 0, np * np * sizeof *S);
        for (size_t q = 0; q < im->cp.q; q++) { /* sum_q B_q[i,j] k_q */
            gp_kernel_gram(im->cp.kernels[q], P, n, G, n);
            const double *B = im->cp.B + q * p * p;
            for (size_t j2 = 0; j2 < p; j2++)
                for (size_t j1 = 0; j1 < p; j1++)
                    for (size_t c = 0; c < n; c++)
                        for (size_t r = 0; r < n; r++)
                            S[(r + n * j1) + (c + n * j2) * np] += B[j1 + j2 * p] * G[r + c * n];
        }
        cblas_dsymm(CblasColMajor, CblasLeft, CblasLower, (blasint)K, (blasint)np, 1.0,
                    im->post.C, (blasint)K, Ab, (blasint)K, 0.0, CA, (blasint)K);
        for (size_t i = 0; i < K * np; i++)
            CA[i] -= Ab[i];
        cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (blasint)np, (blasint)np, (blasint)K,
                    1.0, Ab, (blasint)K, CA, (blasint)K, 1.0, S, (blasint)np);
        gp_symmetrize_average(S, np, np);
        for (size_t i = 0; i < np; i++)
            S[i * np + i] = var[i];
    }
    free(aw);
    free(Ab);
    free(CA);
    free(G);
    return rc;
}

/* The full covariances of a prediction in original units: the cross
 * covariance (when asked) and each output's block. */
static int covariances(const gp_model *model, const gp_coreg_sparse_impl *im, const double *P,
                       const gp_predict_request *req, const double *var_w, gp_prediction *out,
                       gp_error *err)
{
    size_t n = req->m, p = im->cp.p, np = n * p, count;
    int rc = gp_checked_size(np, np, &count, err);
    double *S = rc ? NULL : gp_alloc_doubles(count, err);
    if (S == NULL)
        return rc ? rc : GP_ENOMEM;
    rc = joint_covariance(im, P, n, var_w, S, err);
    const double *sc = im->cp.y_scale;
    for (size_t c = 0; rc == GP_OK && c < np; c++)
        for (size_t r = 0; r < np; r++) {
            double v = S[r + c * np] * sc[r / n] * sc[c / n];
            if (r == c)
                v = out->variance[r]; /* noise and clamping as the variance */
            S[r + c * np] = v;
        }
    for (size_t j = 0; rc == GP_OK && out->covariance && j < p; j++)
        for (size_t c = 0; c < n; c++)
            memcpy(out->covariance + j * n * n + c * n, S + (c + n * j) * np + n * j,
                   n * sizeof *S);
    if (rc == GP_OK && out->cross_covariance)
        memcpy(out->cross_covariance, S, np * np * sizeof *S);
    (void)model;
    free(S);
    return rc;
}

int gp_coreg_sparse_predict(const gp_model *model, const gp_predict_request *req,
                            gp_prediction *out, gp_error *err)
{
    const gp_coreg_sparse_impl *im = model->impl;
    size_t n = req->m, p = im->cp.p, K = im->K, m = im->m;
    size_t block = gp_predict_block_rows(im->cp.q * m, n);
    double *P = NULL, *aw = gp_alloc_doubles(im->cp.q * m * block, err);
    double *a = gp_alloc_doubles(K, err), *ca = gp_alloc_doubles(K, err);
    double *var_w = req->full_covariance ? gp_alloc_doubles(n * p, err) : NULL;
    int rc = aw && a && ca && (var_w || !req->full_covariance) ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK)
        rc = gp_model_points(model, req->X, n, &P, err);
    for (size_t s = 0; rc == GP_OK && s < n; s += block) {
        size_t b = n - s < block ? n - s : block;
        predict_block(im, P + s * im->d, b, aw, a, ca, out->mean + s, out->variance + s, n);
    }
    if (var_w)
        memcpy(var_w, out->variance, n * p * sizeof *var_w);
    for (size_t j = 0; rc == GP_OK && j < p; j++) {
        double sc = im->cp.y_scale[j];
        for (size_t i = 0; i < n; i++) {
            double v = out->variance[j * n + i] + (req->include_noise ? im->cp.noise[j] : 0.0);
            if (v < 0.0) {
                v = 0.0;
                out->clamped++;
            }
            out->variance[j * n + i] = v * sc * sc;
            out->mean[j * n + i] = im->cp.y_mean[j] + sc * out->mean[j * n + i];
        }
    }
    if (rc == GP_OK && req->full_covariance)
        rc = covariances(model, im, P, req, var_w, out, err);
    free(P);
    free(aw);
    free(a);
    free(ca);
    free(var_w);
    return rc;
}

/* ---- sample ---- */

int gp_coreg_sparse_sample(const gp_model *model, const gp_sample_request *req, double *samples,
                           gp_error *err)
{
    const gp_coreg_sparse_impl *im = model->impl;
    size_t n = req->m, p = im->cp.p, np = n * p, ns = req->n_samples, count, total;
    int rc = gp_checked_size(np, np, &count, err);
    if (rc == GP_OK)
        rc = gp_checked_size(np, ns, &total, err);
    if (rc)
        return rc;
    double *S = gp_alloc_doubles(count, err), *mean = gp_alloc_doubles(np, err);
    double *var = gp_alloc_doubles(np, err), *draws = gp_alloc_doubles(total, err);
    double *aw = gp_alloc_doubles(im->cp.q * im->m * (n ? n : 1), err);
    double *a = gp_alloc_doubles(im->K, err), *ca = gp_alloc_doubles(im->K, err), *P = NULL;
    rc = S && mean && var && draws && aw && a && ca ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK)
        rc = gp_model_points(model, req->X, n, &P, err);
    if (rc == GP_OK) {
        predict_block(im, P, n, aw, a, ca, mean, var, n);
        rc = joint_covariance(im, P, n, var, S, err);
    }
    if (rc == GP_OK) {
        /* original units: the draws' own standardisation is then the identity */
        const double *sc = im->cp.y_scale;
        for (size_t c = 0; c < np; c++) {
            for (size_t r = 0; r < np; r++)
                S[r + c * np] *= sc[r / n] * sc[c / n];
            if (req->include_noise)
                S[c + c * np] += im->cp.noise[c / n] * sc[c / n] * sc[c / n];
            mean[c] = im->cp.y_mean[c / n] + sc[c / n] * mean[c];
        }
        gp_model unit = *model;
        unit.y_mean = 0.0;
        unit.y_scale = 1.0;
        gp_sample_request r = *req;
        r.m = np;
        r.include_noise = 0;
        rc = gp_model_gaussian_draws(&unit, &r, mean, S, draws, err);
    }
    /* (i + n j) + np s  ->  i + n s + n ns j */
    for (size_t s = 0; rc == GP_OK && s < ns; s++)
        for (size_t j = 0; j < p; j++)
            memcpy(samples + n * s + n * ns * j, draws + np * s + n * j, n * sizeof *draws);
    if (rc == GP_EDATA && strncmp(err->field, "X[", 2) == 0) /* name the point, not the pair */
        gp_error_set(err, GP_EDATA, "X", "the posterior is not a finite number: a point lies "
                                         "too far from the training data for float64 arithmetic");
    free(S);
    free(mean);
    free(var);
    free(draws);
    free(aw);
    free(a);
    free(ca);
    free(P);
    return rc;
}

/* ---- export / import ---- */

int gp_coreg_sparse_state_is(const gp_state *st)
{
    return gp_state_find(st, "coreg_sizes") != NULL;
}

int gp_coreg_sparse_export(const gp_model *model, gp_state *st, gp_error *err)
{
    const gp_coreg_sparse_impl *im = model->impl;
    size_t K = im->K, packed = K * (K + 1) / 2;
    int rc = gp_coreg_params_export(&im->cp, st, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "Z", im->d, im->m, im->Z, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "mean_white", K, 1, im->post.mt, err);
    if (rc == GP_OK)
        rc = gp_state_put_scalar(st, "coreg_n_observed", (double)model->coreg.n_observed, err);
    double *Cp = rc ? NULL : gp_alloc_doubles(packed, err);
    if (rc == GP_OK && Cp == NULL)
        rc = GP_ENOMEM;
    if (rc == GP_OK) {
        gp_pack_lower(im->post.C, K, K, Cp);
        rc = gp_state_put_owned(st, "cov_white_packed", packed, 1, Cp, err);
    }
    return rc;
}

static int import_arrays(gp_coreg_sparse_impl *im, const gp_state *st, double *n_obs,
                         gp_error *err)
{
    const gp_named_array *z = gp_state_find(st, "Z");
    if (z == NULL || z->rows != im->d || z->cols == 0)
        return gp_error_set(err, GP_EDATA, "Z", "the state has no %zu x M array Z", im->d);
    im->m = z->cols;
    im->per_q = gp_coreg_sparse_per_q(&im->cp);
    im->K = im->cp.q * im->per_q * im->m;
    size_t K = im->K;
    const double *Z, *mt, *Cp;
    int rc = gp_state_get(st, "Z", im->d, im->m, &Z, err);
    if (rc == GP_OK)
        rc = gp_state_get(st, "mean_white", K, 1, &mt, err);
    if (rc == GP_OK)
        rc = gp_state_get(st, "cov_white_packed", K * (K + 1) / 2, 1, &Cp, err);
    if (rc == GP_OK)
        rc = gp_state_get_scalar(st, "coreg_n_observed", n_obs, err);
    if (rc)
        return rc;
    if (!gp_all_finite(Z, im->d * im->m, NULL) || !gp_all_finite(mt, K, NULL) ||
        !gp_all_finite(Cp, K * (K + 1) / 2, NULL) || !(*n_obs >= 0.0))
        return gp_error_set(err, GP_EDATA, "state",
                            "the coregionalised posterior holds a non-finite number");
    im->Z = gp_alloc_doubles(im->d * im->m, err);
    im->A = gp_alloc_doubles(im->cp.p * im->cp.q * im->per_q, err);
    im->post.mt = gp_alloc_doubles(K, err);
    im->post.C = gp_alloc_doubles(K * K, err);
    if (!im->Z || !im->A || !im->post.mt || !im->post.C)
        return GP_ENOMEM;
    im->post.m = im->m;
    im->post.K = K;
    memcpy(im->Z, Z, im->d * im->m * sizeof *Z);
    memcpy(im->post.mt, mt, K * sizeof *mt);
    gp_unpack_lower(Cp, K, im->post.C, K);
    gp_symmetrize_from_lower(im->post.C, K, K);
    gp_coreg_sparse_build_A(&im->cp, im->A);
    return GP_OK;
}

int gp_coreg_sparse_import(gp_model *model, const gp_state *st, gp_error *err)
{
    gp_coreg_sparse_impl *im = calloc(1, sizeof *im);
    if (im == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    gp_coreg_sparse_impl_mark(im);
    im->d = model->input_dim;
    double n_obs = 0.0;
    int rc = gp_coreg_params_import(&im->cp, st, model->kernel, err);
    if (rc == GP_OK && im->cp.p != model->n_outputs)
        rc = gp_error_set(err, GP_EDATA, "coreg_sizes", "the output count disagrees with the model's");
    if (rc == GP_OK)
        rc = import_arrays(im, st, &n_obs, err);
    if (rc == GP_OK)
        rc = gp_coreg_sparse_impl_prepare(im, err);
    if (rc) {
        gp_coreg_sparse_free(im);
        return rc;
    }
    model->impl = im;
    gp_coreg_params_view(&im->cp, &model->coreg);
    model->coreg.n_observed = (size_t)n_obs;
    return GP_OK;
}

/* ---- the inducing-point methods' ops, for both kinds of model ---- */

int gp_coreg_inducing_predict(const gp_model *model, const gp_predict_request *req,
                              gp_prediction *out, gp_error *err)
{
    if (gp_coreg_sparse_impl_is(model->impl))
        return gp_coreg_sparse_predict(model, req, out, err);
    return gp_inducing_method_predict(model, req, out, err);
}

int gp_coreg_inducing_sample(const gp_model *model, const gp_sample_request *req,
                             double *samples, gp_error *err)
{
    if (gp_coreg_sparse_impl_is(model->impl))
        return gp_coreg_sparse_sample(model, req, samples, err);
    return gp_inducing_method_sample(model, req, samples, err);
}

int gp_coreg_inducing_export(const gp_model *model, gp_state *st, gp_error *err)
{
    if (gp_coreg_sparse_impl_is(model->impl))
        return gp_coreg_sparse_export(model, st, err);
    return gp_inducing_method_export(model, st, err);
}

int gp_coreg_inducing_import(gp_model *model, const gp_state *st, gp_error *err)
{
    if (gp_coreg_sparse_state_is(st))
        return gp_coreg_sparse_import(model, st, err);
    return gp_inducing_method_import(model, st, err);
}

void gp_coreg_inducing_free(void *impl)
{
    if (gp_coreg_sparse_impl_is(impl))
        gp_coreg_sparse_free(impl);
    else
        gp_inducing_method_free(impl);
}
