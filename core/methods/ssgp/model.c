/* The fitted "ssgp" model: its state, predict and sample. */
#include "core/methods/ssgp/model.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/features/rff_points.h"
#include "core/methods/ssgp/internal.h"

void ssgp_impl_free(void *p)
{
    ssgp_impl *im = p;
    if (im == NULL)
        return;
    free(im->dims);
    free(im->omega);
    free(im->inv_ls);
    free(im->L);
    free(im->alpha);
    free(im->phi_y);
    free(im);
}

/* dims, inv_ls and amplitude2 from the kernel leaf; buffers for R frequencies. */
ssgp_impl *ssgp_impl_alloc(const gp_kernel *k, size_t R, gp_error *err)
{
    ssgp_impl *im = calloc(1, sizeof *im);
    if (im == NULL) {
        gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    im->R = R;
    im->m = 2 * R;
    im->d = k->n_active;
    size_t rd = 0, mm = 0;
    if (gp_checked_size(R, im->d, &rd, err) || gp_checked_size(im->m, im->m, &mm, err) ||
        !(im->dims = malloc(im->d * sizeof *im->dims)) ||
        !(im->omega = gp_alloc_doubles(rd, err)) ||
        !(im->inv_ls = gp_alloc_doubles(im->d, err)) || !(im->L = gp_alloc_doubles(mm, err)) ||
        !(im->alpha = gp_alloc_doubles(im->m, err)) ||
        !(im->phi_y = gp_alloc_doubles(im->m, err))) {
        if (err && err->code == GP_OK)
            gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        ssgp_impl_free(im);
        return NULL;
    }
    for (size_t k2 = 0; k2 < im->d; k2++)
        im->dims[k2] = k->active_dims ? k->active_dims[k2] : k2;
    return im;
}

/* Lengthscales and variance of the (fitted) kernel into the impl. */
void ssgp_impl_set_kernel(ssgp_impl *im, const gp_kernel *k)
{
    for (size_t j = 0; j < im->d; j++)
        im->inv_ls[j] = exp(-k->log_lengthscale[k->n_lengthscale == 1 ? 0 : j]);
    im->amplitude2 = exp(k->log_variance);
}

/* ---- predict ---- */

/* Features of b test points (original units, rows start..start+b of X with
 * leading dimension ldx = the request's m) into Phi (b x 2R); Xw (b x d)
 * scratch receives the standardised points divided by the lengthscales. */
void ssgp_test_features(const gp_model *model, const ssgp_impl *im, const double *X,
                        size_t ldx, size_t start, size_t b, double *Xw, double *Phi)
{
    gp_model_leaf_inputs(model, im->dims, im->d, im->inv_ls, X, ldx, start, b, Xw);
    gp_rff_features(Xw, b, im->d, NULL, im->omega, im->R, im->amplitude2, Phi, b);
}

static double finish_variance(const gp_model *model, double v, int include_noise,
                              size_t *clamped)
{
    if (include_noise)
        v += model->noise_variance;
    if (v < 0.0) {
        v = 0.0;
        (*clamped)++;
    }
    return v * model->y_scale * model->y_scale;
}

/* Per-point scratch of up to b points: features F (2R x b, whitened in
 * place), the feature map's work and the standardised points. */
typedef struct point_work {
    double *F, *work, *Xw, *sumsq;
} point_work;

static void point_work_free(point_work *w)
{
    free(w->F);
    free(w->work);
    free(w->Xw);
    free(w->sumsq);
}

static int point_work_alloc(const ssgp_impl *im, size_t b, point_work *w, gp_error *err)
{
    size_t nm = 0, nd = 0, wd = 0;
    memset(w, 0, sizeof *w);
    int rc = gp_checked_size(b, im->m, &nm, err);
    if (rc == GP_OK)
        rc = gp_checked_size(b, im->d, &nd, err);
    if (rc == GP_OK) /* gp_rff_features_columns: 2 R b */
        rc = gp_checked_size(b, im->m, &wd, err);
    if (rc)
        return rc;
    w->F = gp_alloc_doubles(nm, err);
    w->Xw = gp_alloc_doubles(nd, err);
    w->work = gp_alloc_doubles(wd ? wd : 1, err);
    w->sumsq = gp_alloc_doubles(b, err);
    if (w->F && w->Xw && w->work && w->sumsq)
        return GP_OK;
    point_work_free(w);
    return GP_ENOMEM;
}

/* Working-unit means and whitened squared norms of the points start..start+b
 * (w->F holds their whitened features V_i = L^{-1} phi_i afterwards): a
 * point's arithmetic is its own (gp_rff_features_columns), so its bits do
 * not depend on the other points of the call. */
static void point_moments(const gp_model *model, const ssgp_impl *im, const double *X,
                          size_t ldx, size_t start, size_t b, point_work *w, double *mean)
{
    gp_model_leaf_inputs(model, im->dims, im->d, im->inv_ls, X, ldx, start, b, w->Xw);
    gp_rff_features_columns(w->Xw, b, b, im->d, im->omega, im->R, im->amplitude2, w->work,
                            w->F);
    gp_rff_moments_columns(w->F, im->m, b, im->L, im->alpha, mean, w->sumsq);
}

/* Off the diagonal s V^T V (BLAS's dsyrk, as the covariance is asked of one
 * call); its diagonal is the variance, the same bits as without covariance. */
static int predict_full(const gp_model *model, const ssgp_impl *im,
                        const gp_predict_request *req, gp_prediction *out, gp_error *err)
{
    size_t m = req->m;
    point_work w;
    int rc = point_work_alloc(im, m, &w, err);
    if (rc)
        return rc;
    point_moments(model, im, req->X, m, 0, m, &w, out->mean);
    double s = model->noise_variance, ys2 = model->y_scale * model->y_scale;
    double *C = out->covariance;
    cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)m, (blasint)im->m, s * ys2, w.F,
                (blasint)im->m, 0.0, C, (blasint)m);
    gp_symmetrize_from_lower(C, m, m);
    for (size_t j = 0; j < m; j++) {
        double v = finish_variance(model, s * w.sumsq[j], req->include_noise, &out->clamped);
        C[j * m + j] = v;
        out->variance[j] = v;
    }
    point_work_free(&w);
    return GP_OK;
}

static int predict_blocks(const gp_model *model, const ssgp_impl *im,
                          const gp_predict_request *req, gp_prediction *out, gp_error *err)
{
    size_t block = gp_predict_block_rows(im->m, req->m);
    point_work w;
    int rc = point_work_alloc(im, block, &w, err);
    if (rc)
        return rc;
    double s = model->noise_variance;
    for (size_t start = 0; start < req->m; start += block) {
        size_t b = req->m - start < block ? req->m - start : block;
        point_moments(model, im, req->X, req->m, start, b, &w, out->mean + start);
        for (size_t i = 0; i < b; i++)
            out->variance[start + i] =
                finish_variance(model, s * w.sumsq[i], req->include_noise, &out->clamped);
    }
    point_work_free(&w);
    return GP_OK;
}

int ssgp_predict(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                 gp_error *err)
{
    const ssgp_impl *im = model->impl;
    if (req->m == 0)
        return GP_OK;
    int rc = req->full_covariance ? predict_full(model, im, req, out, err)
                                  : predict_blocks(model, im, req, out, err);
    if (rc == GP_OK)
        for (size_t j = 0; j < req->m; j++)
            out->mean[j] = out->mean[j] * model->y_scale + model->y_mean;
    return rc;
}

/* ---- sample ---- */

/* Weight draws W (2R x S) = alpha + sqrt(s) L^{-T} E: exact draws of the
 * weight posterior N(alpha, s A^{-1}). */
static void draw_weights(const gp_model *model, const ssgp_impl *im, uint64_t seed, size_t S,
                         double *W)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    gp_rng_normal_fill(&rng, W, im->m * S);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, (blasint)im->m,
                (blasint)S, sqrt(model->noise_variance), im->L, (blasint)im->m, W,
                (blasint)im->m);
    for (size_t s = 0; s < S; s++)
        cblas_daxpy((blasint)im->m, 1.0, im->alpha, 1, W + s * im->m, 1);
}

int ssgp_sample(const gp_model *model, const gp_sample_request *req, double *samples,
                gp_error *err)
{
    const ssgp_impl *im = model->impl;
    size_t m = req->m, S = req->n_samples, ws = 0;
    if (m == 0 || S == 0)
        return GP_OK;
    int rc = gp_checked_size(im->m, S, &ws, err);
    if (rc)
        return rc;
    size_t block = gp_predict_block_rows(im->m, m);
    double *W = gp_alloc_doubles(ws, err), *Phi = gp_alloc_doubles(block * im->m, err),
           *Xw = gp_alloc_doubles(block * im->d, err);
    if (W == NULL || Phi == NULL || Xw == NULL) {
        free(W);
        free(Phi);
        free(Xw);
        return GP_ENOMEM;
    }
    draw_weights(model, im, req->seed, S, W);
    for (size_t start = 0; start < m; start += block) {
        size_t b = m - start < block ? m - start : block;
        ssgp_test_features(model, im, req->X, m, start, b, Xw, Phi);
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)b, (blasint)S,
                    (blasint)im->m, 1.0, Phi, (blasint)b, W, (blasint)im->m, 0.0,
                    samples + start, (blasint)m);
    }
    gp_rng noise;
    gp_rng_derive(&noise, req->seed, SAMPLE_NOISE_STREAM);
    double sd = sqrt(model->noise_variance);
    for (size_t i = 0; i < m * S; i++) {
        double f = samples[i] + (req->include_noise ? sd * gp_rng_normal(&noise) : 0.0);
        samples[i] = f * model->y_scale + model->y_mean;
    }
    free(W);
    free(Phi);
    free(Xw);
    return GP_OK;
}
