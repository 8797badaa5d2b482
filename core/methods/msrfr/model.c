/* The fitted "msrfr" model: its state, the component moments, predict and sample. */
#include "core/methods/msrfr/model.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/features/rff_points.h"
#include "core/methods/msrfr/internal.h"

/* ---- impl ---- */

void msrfr_impl_free(void *p)
{
    msrfr_impl *im = p;
    if (im == NULL)
        return;
    free(im->dims);
    free(im->omega);
    free(im->inv_ls);
    free(im->L);
    free(im->alpha);
    free(im);
}

msrfr_impl *msrfr_impl_alloc(const gp_kernel *k, size_t M, size_t R, gp_error *err)
{
    msrfr_impl *im = calloc(1, sizeof *im);
    if (im == NULL) {
        gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    im->M = M;
    im->R = R;
    im->m = 2 * R;
    im->d = k->n_active;
    im->variance_scale = 1.0;
    size_t rd = 0, mm = 0, P = 0;
    if (gp_checked_size(M, R, &P, err) || gp_checked_size(P, im->d, &rd, err) ||
        gp_checked_size(im->m, im->m, &mm, err) || gp_checked_size(mm, M, &mm, err) ||
        !(im->dims = malloc(im->d * sizeof *im->dims)) ||
        !(im->omega = gp_alloc_doubles(rd, err)) ||
        !(im->inv_ls = gp_alloc_doubles(im->d, err)) || !(im->L = gp_alloc_doubles(mm, err)) ||
        !(im->alpha = gp_alloc_doubles(im->m * M, err))) {
        if (err && err->code == GP_OK)
            gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        msrfr_impl_free(im);
        return NULL;
    }
    for (size_t j = 0; j < im->d; j++)
        im->dims[j] = k->active_dims ? k->active_dims[j] : j;
    return im;
}

void msrfr_impl_set_kernel(msrfr_impl *im, const gp_kernel *k)
{
    for (size_t j = 0; j < im->d; j++)
        im->inv_ls[j] = exp(-k->log_lengthscale[k->n_lengthscale == 1 ? 0 : j]);
    im->amplitude2 = exp(k->log_variance);
}

/* ---- prediction core (working units) ---- */

/* Means and variances of every component at b points whose inputs Xs (b x d)
 * are already divided by the lengthscales: mu, var (b x M, leading
 * dimension ld). Phi: b x 2R scratch; it holds component M-1's whitened
 * features V = Phi L^{-T} on return (the latent variance is s c ||V_i||^2).
 * cov (b x b, may be NULL) accumulates (s c / M) sum_k V_k V_k^T. */
void msrfr_component_moments(const msrfr_impl *im, double noise, const double *Xs, size_t b,
                             int include_noise, double *Phi, double *mu, double *var,
                             size_t ld, double *cov)
{
    size_t m = im->m, Rd = im->R * im->d;
    double sc = noise * im->variance_scale;
    for (size_t k = 0; k < im->M; k++) {
        const double *L = im->L + k * m * m;
        gp_rff_features(Xs, b, im->d, NULL, im->omega + k * Rd, im->R, im->amplitude2, Phi, b);
        cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)b, (blasint)m, 1.0, Phi, (blasint)b,
                    im->alpha + k * m, 1, 0.0, mu + k * ld, 1);
        cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, (blasint)b,
                    (blasint)m, 1.0, L, (blasint)m, Phi, (blasint)b);
        for (size_t i = 0; i < b; i++) {
            double v = cblas_ddot((blasint)m, Phi + i, (blasint)b, Phi + i, (blasint)b);
            var[k * ld + i] = sc * (v + (include_noise ? 1.0 : 0.0));
        }
        if (cov)
            cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)b, (blasint)m,
                        sc / (double)im->M, Phi, (blasint)b, 1.0, cov, (blasint)b);
    }
}

/* ---- predict ---- */

/* msrfr_component_moments a point at a time (the fit keeps the BLAS one): a
 * point's bits do not depend on the other points of the call
 * (gp_rff_features_columns). F (2R x b) and sumsq (b) scratch, work
 * 2 R b; cov (b x b, may be NULL) accumulates (s c / M) sum_k V_k^T V_k
 * (off the diagonal BLAS's dsyrk; the diagonal is replaced by the variance). */
static void point_moments(const msrfr_impl *im, double noise, const double *Xs, size_t b,
                          int include_noise, double *F, double *work, double *sumsq, double *mu,
                          double *var, size_t ld, double *cov)
{
    size_t m = im->m, Rd = im->R * im->d;
    double sc = noise * im->variance_scale;
    for (size_t k = 0; k < im->M; k++) {
        gp_rff_features_columns(Xs, b, b, im->d, im->omega + k * Rd, im->R, im->amplitude2,
                                work, F);
        gp_rff_moments_columns(F, m, b, im->L + k * m * m, im->alpha + k * m, mu + k * ld,
                               sumsq);
        for (size_t i = 0; i < b; i++)
            var[k * ld + i] = sc * (sumsq[i] + (include_noise ? 1.0 : 0.0));
        if (cov)
            cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)b, (blasint)m,
                        sc / (double)im->M, F, (blasint)m, 1.0, cov, (blasint)b);
    }
}

/* Component means and variances in original units (m x M each), by blocks;
 * cov (m x m, NULL unless full covariance: then one block) gets the
 * within-component part (1/M) sum_k C_k in working units. */
static int components_original(const gp_model *model, const msrfr_impl *im, const double *X,
                               size_t m, int include_noise, double *mu, double *var,
                               double *cov, gp_error *err)
{
    size_t block = cov ? m : gp_predict_block_rows(im->m, m);
    size_t bm = 0, bd = 0, wd = 0;
    int rc = gp_checked_size(block, im->m, &bm, err);
    if (rc == GP_OK)
        rc = gp_checked_size(block, im->d, &bd, err);
    if (rc == GP_OK) /* gp_rff_features_columns: 2 R b */
        rc = gp_checked_size(block, im->m, &wd, err);
    if (rc)
        return rc;
    double *F = gp_alloc_doubles(bm, err), *Xs = gp_alloc_doubles(bd, err);
    double *work = gp_alloc_doubles(wd ? wd : 1, err), *sumsq = gp_alloc_doubles(block, err);
    if (F == NULL || Xs == NULL || work == NULL || sumsq == NULL) {
        free(F);
        free(Xs);
        free(work);
        free(sumsq);
        return GP_ENOMEM;
    }
    if (cov)
        memset(cov, 0, m * m * sizeof *cov);
    for (size_t start = 0; start < m; start += block) {
        size_t b = m - start < block ? m - start : block;
        gp_model_leaf_inputs(model, im->dims, im->d, im->inv_ls, X, m, start, b, Xs);
        point_moments(im, model->noise_variance, Xs, b, include_noise, F, work, sumsq,
                      mu + start, var + start, m, cov);
    }
    double ys = model->y_scale, ys2 = ys * ys;
    for (size_t i = 0; i < m * im->M; i++) {
        mu[i] = mu[i] * ys + model->y_mean;
        var[i] *= ys2;
    }
    free(F);
    free(Xs);
    free(work);
    free(sumsq);
    return GP_OK;
}

/* The mixture's covariance over the points (law of total covariance):
 * (1/M) sum_k [C_k + (mu_k - mean)(mu_k - mean)^T]; cov holds the first
 * part in working units on entry, everything in original units on exit. */
static int mixture_covariance(const gp_model *model, const msrfr_impl *im, size_t m,
                              const double *mu, const double *mean, int include_noise,
                              double *cov, gp_error *err)
{
    size_t mM = 0;
    int rc = gp_checked_size(m, im->M, &mM, err);
    double *D = rc ? NULL : gp_alloc_doubles(mM, err);
    if (D == NULL)
        return rc ? rc : GP_ENOMEM;
    double ys2 = model->y_scale * model->y_scale;
    for (size_t k = 0; k < im->M; k++)
        for (size_t i = 0; i < m; i++)
            D[k * m + i] = mu[k * m + i] - mean[i];
    for (size_t i = 0; i < m * m; i++)
        cov[i] *= ys2;
    if (include_noise) {
        double s = model->noise_variance * im->variance_scale * ys2;
        for (size_t i = 0; i < m; i++)
            cov[i * m + i] += s;
    }
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)m, (blasint)im->M,
                1.0 / (double)im->M, D, (blasint)m, 1.0, cov, (blasint)m);
    gp_symmetrize_from_lower(cov, m, m);
    free(D);
    return GP_OK;
}

int msrfr_predict(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                  gp_error *err)
{
    const msrfr_impl *im = model->impl;
    size_t m = req->m, mM = 0;
    if (m == 0)
        return GP_OK;
    int rc = gp_checked_size(m, im->M, &mM, err);
    if (rc)
        return rc;
    double *mu = req->components ? out->component_mean : gp_alloc_doubles(mM, err);
    double *var = req->components ? out->component_variance : gp_alloc_doubles(mM, err);
    if (mu == NULL || var == NULL)
        rc = GP_ENOMEM;
    double *cov = req->full_covariance ? out->covariance : NULL;
    if (rc == GP_OK)
        rc = components_original(model, im, req->X, m, req->include_noise, mu, var, cov, err);
    if (rc == GP_OK)
        gp_mixture_moments(mu, var, m, im->M, out->mean, out->variance);
    if (rc == GP_OK && cov) {
        rc = mixture_covariance(model, im, m, mu, out->mean, req->include_noise, cov, err);
        for (size_t i = 0; rc == GP_OK && i < m; i++)
            out->variance[i] = cov[i * m + i];
    }
    if (rc == GP_OK && req->n_quantiles)
        gp_mixture_quantiles(mu, var, m, im->M, req->quantiles, req->n_quantiles,
                             out->quantiles);
    if (!req->components) {
        free(mu);
        free(var);
    }
    return rc;
}

/* ---- sample ---- */

/* Samples of component k at every point: S weight draws
 * W (2R x S) = alpha_k + sqrt(s c) L_k^{-T} E evaluated at the points. */
static int sample_component(const gp_model *model, const msrfr_impl *im, size_t k,
                            const double *X, size_t m, gp_rng *rng, size_t S, double *out,
                            size_t ldo, gp_error *err)
{
    size_t block = gp_predict_block_rows(im->m, m), mm = im->m;
    double *W = gp_alloc_doubles(mm * S, err), *Phi = gp_alloc_doubles(block * mm, err),
           *Xs = gp_alloc_doubles(block * im->d, err);
    int rc = W && Phi && Xs ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK) {
        gp_rng_normal_fill(rng, W, mm * S);
        cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, (blasint)mm,
                    (blasint)S, sqrt(model->noise_variance * im->variance_scale),
                    im->L + k * mm * mm, (blasint)mm, W, (blasint)mm);
        for (size_t s = 0; s < S; s++)
            cblas_daxpy((blasint)mm, 1.0, im->alpha + k * mm, 1, W + s * mm, 1);
        for (size_t start = 0; start < m; start += block) {
            size_t b = m - start < block ? m - start : block;
            gp_model_leaf_inputs(model, im->dims, im->d, im->inv_ls, X, m, start, b, Xs);
            gp_rff_features(Xs, b, im->d, NULL, im->omega + k * im->R * im->d, im->R,
                            im->amplitude2, Phi, b);
            cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)b, (blasint)S,
                        (blasint)mm, 1.0, Phi, (blasint)b, W, (blasint)mm, 0.0, out + start,
                        (blasint)ldo);
        }
    }
    free(W);
    free(Phi);
    free(Xs);
    return rc;
}

/* Joint draws of the mixture: each sample picks a component uniformly, then
 * draws that component's weight posterior. Samples of one component are
 * drawn together (one matrix product) and written to their own columns. */
int msrfr_sample(const gp_model *model, const gp_sample_request *req, double *samples,
                 gp_error *err)
{
    const msrfr_impl *im = model->impl;
    size_t m = req->m, S = req->n_samples;
    if (m == 0 || S == 0)
        return GP_OK;
    size_t *pick = malloc(S * sizeof *pick), *cols = malloc(S * sizeof *cols);
    double *buf = gp_alloc_doubles(m * S, err);
    int rc = pick && cols && buf ? GP_OK : GP_ENOMEM;
    gp_rng pr, wr, nr;
    gp_rng_derive(&pr, req->seed, SAMPLE_PICK_STREAM);
    gp_rng_derive(&wr, req->seed, SAMPLE_WEIGHT_STREAM);
    gp_rng_derive(&nr, req->seed, SAMPLE_NOISE_STREAM);
    for (size_t s = 0; rc == GP_OK && s < S; s++)
        pick[s] = (size_t)gp_rng_below(&pr, im->M);
    for (size_t k = 0; rc == GP_OK && k < im->M; k++) {
        size_t c = 0;
        for (size_t s = 0; s < S; s++)
            if (pick[s] == k)
                cols[c++] = s;
        if (c == 0)
            continue;
        rc = sample_component(model, im, k, req->X, m, &wr, c, buf, m, err);
        for (size_t j = 0; rc == GP_OK && j < c; j++)
            memcpy(samples + cols[j] * m, buf + j * m, m * sizeof *buf);
    }
    double sd = sqrt(model->noise_variance * im->variance_scale);
    for (size_t i = 0; rc == GP_OK && i < m * S; i++) {
        double f = samples[i] + (req->include_noise ? sd * gp_rng_normal(&nr) : 0.0);
        samples[i] = f * model->y_scale + model->y_mean;
    }
    free(pick);
    free(cols);
    free(buf);
    return rc;
}

size_t msrfr_components(const gp_model *model)
{
    const msrfr_impl *im = model->impl;
    return im->M;
}
