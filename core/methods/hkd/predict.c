/* Predict, sample and parts of a fitted "hkd" model. */
#include "core/methods/hkd/predict.h"

#include <cblas.h>
#include <stdlib.h>
#include <string.h>

#include "core/methods/hkd/bound.h"
#include "core/methods/hkd/internal.h"
#include "core/methods/hkd/state.h"

/* ---- predict ---- */

/* For b working points Pw (dw x b): A (P x b) = the stacked L_t^{-1} k_t*,
 * V = the stacked M_t^{-1} of it, from the kernel values E (mS x b); K
 * (T m b) is scratch. BLAS's products: the sample path (its joint draws
 * are one call). */
static void test_features(const hkd_impl *im, const double *Pw, size_t b, double *E, double *A,
                          double *V, double *K)
{
    size_t mS = hkd_orbit_points(im), mb = im->mb, P = im->P;
    gp_kernel_cross_points(im->kin, im->Op, Pw, b, E, mS);
    hkd_features_from(im, E, b, A, P, K);
    memcpy(V, A, P * b * sizeof *A);
    for (size_t t = 0; t < im->group.blocks; t++)
        if (im->mt[t])
            gp_trsm_lower(im->Mb + t * mb * mb, im->mt[t], mb, 0, V + im->off[t], b, P);
}

/* The same a point at a time (predict): the orbit sums by gp_dot_columns
 * against WT = W^T (S x T), the solves by gp_solve_lower_columns, so a
 * point's A and V do not depend on the other points of the call. */
static void test_features_points(const hkd_impl *im, const double *WT, const double *Pw,
                                 size_t b, double *E, double *A, double *V, double *K)
{
    size_t mS = hkd_orbit_points(im), m = im->m, P = im->P, T = im->group.blocks;
    size_t S = im->group.size, mb = im->mb;
    gp_kernel_cross_points(im->kin, im->Op, Pw, b, E, mS);
    gp_dot_columns(WT, S, T, E, S, m * b, S, K, T);
    for (size_t c = 0; c < b; c++) {
        const double *kc = K + c * m * T;
        for (size_t t = 0; t < T; t++) {
            const size_t *id = im->idx + t * mb;
            double *pt = A + c * P + im->off[t];
            for (size_t j = 0; j < im->mt[t]; j++)
                pt[j] = kc[t + id[j] * T];
        }
    }
    for (size_t t = 0; t < T; t++)
        if (im->mt[t])
            gp_solve_lower_columns(im->L + t * mb * mb, im->mt[t], mb, A + im->off[t], b, P);
    memcpy(V, A, P * b * sizeof *A);
    for (size_t t = 0; t < T; t++)
        if (im->mt[t])
            gp_solve_lower_columns(im->Mb + t * mb * mb, im->mt[t], mb, V + im->off[t], b, P);
}

/* k(x, G^s x) for every group element s into ks (S): the parts' prior
 * variances are k_t(x, x) = sum_s W[t, s] ks[s]. */
static void orbit_self(const hkd_impl *im, const double *x, double *gx, double *ks)
{
    for (size_t s = 0; s < im->group.size; s++) {
        gp_group_apply(&im->group, s, x, gx);
        ks[s] = gp_kernel_eval(im->kin, x, gx, s == 0);
    }
}

static double sumsq(const double *v, size_t n)
{
    return gp_dot(v, v, n);
}

/* Latent mean and variance (working units) of the b points, and the parts. */
static void predict_points(const gp_model *model, const hkd_impl *im, const double *WT,
                           const double *Pw, size_t b, const double *A, const double *V,
                           double *mean,
                           double *var, double *part_mean, double *part_var, size_t ld_parts)
{
    size_t P = im->P, dw = im->frame.dw, T = im->group.blocks, S = im->group.size;
    double gx[GP_SYM_MAX_DIMS + GP_SYM_MAX_GENERATORS], ks[GP_SYM_MAX_SIZE];
    for (size_t c = 0; c < b; c++) {
        const double *a = A + c * P, *v = V + c * P;
        double kxx = gp_kernel_diag(im->kin, Pw + c * dw);
        double prior = kxx - sumsq(a, P), post = sumsq(v, P);
        mean[c] = gp_dot(a, im->mean, P);
        var[c] = (prior > 0.0 ? prior : 0.0) + post;
        if (part_mean)
            orbit_self(im, Pw + c * dw, gx, ks);
        for (size_t t = 0; part_mean && t < T; t++) {
            size_t o = im->off[t], k = im->mt[t];
            double pm = gp_dot(a + o, im->mean + o, k);
            double kt = gp_dot(WT + t * S, ks, S);
            double pv = kt - sumsq(a + o, k) + sumsq(v + o, k);
            part_mean[c + t * ld_parts] = pm * model->y_scale +
                                          (t == 0 ? model->y_mean : 0.0);
            part_var[c + t * ld_parts] = (pv > 0.0 ? pv : 0.0) * model->y_scale *
                                         model->y_scale;
        }
    }
}

/* The latent covariance (working units) of n points from their A and V:
 * K** - A^T A + V^T V. */
static void covariance_of(const hkd_impl *im, const double *Pw, size_t n, const double *A,
                          const double *V, double *S)
{
    gp_kernel_gram(im->kin, Pw, n, S, n);
    if (im->P) {
        cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)n, (blasint)im->P, -1.0, A,
                    (blasint)im->P, 1.0, S, (blasint)n);
        cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)n, (blasint)im->P, 1.0, V,
                    (blasint)im->P, 1.0, S, (blasint)n);
    }
    gp_symmetrize_from_lower(S, n, n);
}

typedef struct test_work {
    double *Pw, *E, *A, *V, *K;
    double *WT; /* S x T: W^T, the orbit weights of a block in a column */
} test_work;

static void test_work_free(test_work *tw)
{
    free(tw->Pw);
    free(tw->E);
    free(tw->A);
    free(tw->V);
    free(tw->K);
    free(tw->WT);
}

/* Working points of the request and buffers for `block` of them at once. */
static int test_work_alloc(const gp_model *model, const hkd_impl *im, const double *X, size_t m,
                           size_t block, test_work *tw, gp_error *err)
{
    memset(tw, 0, sizeof *tw);
    size_t mS = hkd_orbit_points(im), dw = im->frame.dw, nb = 0, na = 0, nw = 0;
    double *Ps = NULL;
    int rc = gp_checked_size(mS, block, &nb, err);
    if (rc == GP_OK)
        rc = gp_checked_size(im->P ? im->P : 1, block, &na, err);
    if (rc == GP_OK)
        rc = gp_checked_size(dw, m, &nw, err);
    if (rc == GP_OK)
        rc = gp_model_points(model, X, m, &Ps, err);
    if (rc)
        return rc;
    tw->Pw = gp_alloc_doubles(nw, err);
    tw->E = gp_alloc_doubles(nb, err);
    tw->A = gp_alloc_doubles(na, err);
    tw->V = gp_alloc_doubles(na, err);
    tw->K = gp_alloc_doubles(nb / im->group.size * im->group.blocks, err);
    tw->WT = gp_alloc_doubles(im->group.size * im->group.blocks, err);
    for (size_t s = 0; tw->WT && s < im->group.size; s++)
        for (size_t t = 0; t < im->group.blocks; t++)
            tw->WT[t * im->group.size + s] = im->group.W[s * im->group.blocks + t];
    if (tw->Pw)
        gp_hkd_frame_apply(&im->frame, Ps, m, tw->Pw);
    free(Ps);
    if (!tw->Pw || !tw->E || !tw->A || !tw->V || !tw->K || !tw->WT) {
        test_work_free(tw);
        return GP_ENOMEM;
    }
    return GP_OK;
}

static double observed(const gp_model *model, double v, int include_noise)
{
    return (v + (include_noise ? model->noise_variance : 0.0)) * model->y_scale * model->y_scale;
}

int hkd_predict(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                gp_error *err)
{
    const hkd_impl *im = model->impl;
    size_t m = req->m, dw = im->frame.dw;
    int full = req->full_covariance;
    size_t block = full ? m : gp_predict_block_rows(hkd_orbit_points(im) + 2 * im->P, m);
    test_work tw;
    int rc = test_work_alloc(model, im, req->X, m, block, &tw, err);
    if (rc)
        return rc;
    int parts = req->components && out->component_mean && out->component_variance;
    for (size_t start = 0; start < m; start += block) {
        size_t b = m - start < block ? m - start : block;
        test_features_points(im, tw.WT, tw.Pw + start * dw, b, tw.E, tw.A, tw.V, tw.K);
        predict_points(model, im, tw.WT, tw.Pw + start * dw, b, tw.A, tw.V, out->mean + start,
                       out->variance + start, parts ? out->component_mean + start : NULL,
                       parts ? out->component_variance + start : NULL, m);
    }
    for (size_t j = 0; j < m; j++) {
        out->mean[j] = out->mean[j] * model->y_scale + model->y_mean;
        out->variance[j] = observed(model, out->variance[j], req->include_noise);
    }
    if (full) {
        double *S = out->covariance, s = model->y_scale * model->y_scale;
        covariance_of(im, tw.Pw, m, tw.A, tw.V, S);
        for (size_t i = 0; i < m * m; i++)
            S[i] *= s;
        for (size_t j = 0; j < m; j++)
            S[j * m + j] = out->variance[j];
    }
    test_work_free(&tw);
    return GP_OK;
}

/* ---- sample: joint draws from the latent covariance (note §5 step 12, exact path) ---- */

int hkd_sample(const gp_model *model, const gp_sample_request *req, double *samples,
               gp_error *err)
{
    const hkd_impl *im = model->impl;
    size_t m = req->m, mm = 0;
    int rc = gp_checked_size(m, m, &mm, err);
    test_work tw;
    if (rc == GP_OK)
        rc = test_work_alloc(model, im, req->X, m, m, &tw, err);
    if (rc)
        return rc;
    double *S = gp_alloc_doubles(mm, err), *mean = gp_alloc_doubles(m, err);
    if (S && mean) {
        test_features(im, tw.Pw, m, tw.E, tw.A, tw.V, tw.K);
        for (size_t c = 0; c < m; c++)
            mean[c] = im->P ? cblas_ddot((blasint)im->P, tw.A + c * im->P, 1, im->mean, 1) : 0.0;
        covariance_of(im, tw.Pw, m, tw.A, tw.V, S);
        rc = gp_model_gaussian_draws(model, req, mean, S, samples, err);
    } else {
        rc = GP_ENOMEM;
    }
    free(S);
    free(mean);
    test_work_free(&tw);
    return rc;
}

/* ---- parts ---- */

size_t hkd_parts(const gp_model *model)
{
    return ((const hkd_impl *)model->impl)->group.blocks;
}

void hkd_part_name(const gp_model *model, size_t i, char *buf, size_t len)
{
    gp_group_block_name(&((const hkd_impl *)model->impl)->group, i, buf, len);
}
