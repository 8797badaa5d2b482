/* The gradient of the bound of method "hkd" and the objective the hyperparameter search
 * minimises. */
#include "core/methods/hkd/gradient.h"

#include <cblas.h>
#include <lapacke.h>
#include <stdlib.h>
#include <string.h>

#include "core/methods/hkd/bound.h"
#include "core/methods/hkd/internal.h"
#include "core/methods/hkd/state.h"
#include "core/model/mean.h"

/* ---- the gradient ---- */

/* Sinv_t = S_t = B_t^{-1}, then the K_t sensitivity
 * -1/2 L^{-T} (B - 2I + S + mt mt^T) L^{-1} in place; *trace_g += its trace. */
static int prior_sensitivity(const hkd_impl *im, hkd_work *w, double s2, double *tr_s,
                             double *trace_g, gp_error *err)
{
    size_t m = im->mb;
    *tr_s = 0.0;
    *trace_g = 0.0;
    for (size_t t = 0; t < im->group.blocks; t++) {
        size_t k = im->mt[t];
        if (k == 0)
            continue;
        double *S = w->Sinv + t * m * m;
        const double *C = w->C + t * m * m, *mu = im->mean + im->off[t];
        for (size_t l = 0; l < k; l++)
            memcpy(S + l * m, im->Mb + t * m * m + l * m, k * sizeof *S);
        if (LAPACKE_dpotri(LAPACK_COL_MAJOR, 'L', (lapack_int)k, S, (lapack_int)m) != 0)
            return gp_error_set(err, GP_ENOTPD, NULL, "B_t is singular");
        gp_symmetrize_from_lower(S, k, m);
        for (size_t i = 0; i < k; i++)
            *tr_s += S[i + i * m];
        /* keep S_t for the K_uf part: the sensitivity goes to C's storage */
        double *G = w->C + t * m * m;
        for (size_t l = 0; l < k; l++)
            for (size_t j = 0; j < k; j++)
                G[j + l * m] = C[j + l * m] / s2 + S[j + l * m] + mu[j] * mu[l] -
                               (j == l ? 1.0 : 0.0);
        const double *L = im->L + t * m * m;
        gp_trsm_lower(L, k, m, 1, G, k, m);
        cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit,
                    (blasint)k, (blasint)k, -0.5, L, (blasint)m, G, (blasint)m);
        gp_symmetrize_average(G, k, m);
        for (size_t i = 0; i < k; i++)
            *trace_g += G[i + i * m];
    }
    return GP_OK;
}

/* The K_t sensitivities spread over the orbit pairs (z_a, O_o) and contracted. */
static int contract_prior(const hkd_impl *im, hkd_work *w, double *grad, double *gz,
                          gp_error *err)
{
    size_t T = im->group.blocks, S = im->group.size, m = im->m, mb = im->mb;
    size_t mS = hkd_orbit_points(im);
    memset(w->Wzo, 0, mS * m * sizeof *w->Wzo);
    for (size_t t = 0; t < T; t++) {
        const double *G = w->C + t * mb * mb;
        const size_t *id = im->idx + t * mb;
        for (size_t l = 0; l < im->mt[t]; l++)
            for (size_t j = 0; j < im->mt[t]; j++)
                for (size_t s = 0; s < S; s++)
                    w->Wzo[id[l] * S + s + id[j] * mS] += im->group.W[t + s * T] * G[j + l * mb];
    }
    int rc = gp_kernel_cross_grad_contract_known(im->kin, im->Z, m, im->O, mS, w->Koz, mS,
                                                 w->Wzo, mS, grad, w->gzo, err);
    if (rc || gz == NULL)
        return rc;
    /* the first argument of k(z_a, G^s z_b) moves too: the same weights read
     * the other way round (grad's share is already counted above) */
    double gscratch[1 + GP_SYM_MAX_DIMS + GP_SYM_MAX_GENERATORS];
    rc = gp_kernel_cross_grad_contract(im->kin, im->O, mS, im->Z, m, w->Wzo, mS, gscratch,
                                       w->gzt, err);
    for (size_t i = 0; rc == GP_OK && i < im->frame.dw * m; i++)
        gz[i] = w->gzt[i];
    return rc;
}

/* Y_t = L_t^{-T} ((I - S_t) Phi_t / s2 + mt_t beta^T) for one chunk, spread
 * over the orbit (Wo) and contracted with the chunk's kernel values. */
static int contract_chunk(const hkd_impl *im, const hkd_data *data, hkd_work *w, double s2,
                          size_t start, size_t b, double *gtmp, double *grad, gp_error *err)
{
    size_t T = im->group.blocks, S = im->group.size, m = im->m, mS = hkd_orbit_points(im);
    size_t P = im->P, mb = im->mb, ldp;
    const double *Phi = hkd_chunk_features(im, data, w, start, b, 1, &ldp);
    const double *beta = w->r + start;
    for (size_t t = 0; t < T; t++) {
        size_t k = im->mt[t];
        if (k == 0)
            continue;
        const double *St = w->Sinv + t * mb * mb, *Pt = Phi + im->off[t];
        double *Yt = w->Y + im->off[t];
        for (size_t c = 0; c < b; c++)
            memcpy(Yt + c * P, Pt + c * ldp, k * sizeof *Yt);
        cblas_dsymm(CblasColMajor, CblasLeft, CblasLower, (blasint)k, (blasint)b, -1.0 / s2, St,
                    (blasint)mb, Pt, (blasint)ldp, 1.0 / s2, Yt, (blasint)P);
        cblas_dger(CblasColMajor, (blasint)k, (blasint)b, 1.0, im->mean + im->off[t], 1, beta,
                   1, Yt, (blasint)P);
        gp_trsm_lower(im->L + t * mb * mb, k, mb, 1, Yt, b, P);
    }
    /* Wo (S x m b, each column one orbit) = W^T Yk with Yk (T x m b) the
     * blocks' sensitivities scattered back to Z's order (0 where dropped) */
    memset(w->K, 0, T * m * b * sizeof *w->K);
    for (size_t c = 0; c < b; c++)
        for (size_t t = 0; t < T; t++) {
            const double *yt = w->Y + im->off[t] + c * P;
            for (size_t j = 0; j < im->mt[t]; j++)
                w->K[t + (im->idx[t * mb + j] + c * m) * T] = yt[j];
        }
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (blasint)S, (blasint)(m * b), (blasint)T,
                1.0, im->group.W, (blasint)T, w->K, (blasint)T, 0.0, w->Wo, (blasint)S);
    int rc = gp_kernel_cross_grad_contract_known(im->kin, data->X + start * im->frame.dw, b,
                                                 im->O, mS, w->Ecur, mS, w->Wo, mS, gtmp,
                                                 w->gzo ? w->gzt : NULL, err);
    size_t np = gp_kernel_n_params(im->kin);
    for (size_t p = 0; rc == GP_OK && p < np; p++)
        grad[p] += gtmp[p];
    for (size_t i = 0; rc == GP_OK && w->gzo && i < im->frame.dw * mS; i++)
        w->gzo[i] += w->gzt[i];
    return rc;
}

/* gz[:, i] += sum_s (G^s)^T gO[:, (i, s)]: the orbit's gradient carried back
 * to the inducing inputs (O = G^s z with G linear). */
static void orbit_to_inputs(const hkd_impl *im, const double *gO, double *gz)
{
    size_t S = im->group.size, dw = im->frame.dw;
    double v[GP_SYM_MAX_DIMS + GP_SYM_MAX_GENERATORS];
    for (size_t i = 0; i < im->m; i++)
        for (size_t s = 0; s < S; s++) {
            gp_group_apply_transpose(&im->group, s, gO + (i * S + s) * dw, v);
            for (size_t j = 0; j < dw; j++)
                gz[i * dw + j] += v[j];
        }
}

/* dF/dtheta of the working kernel (np entries) then dF/dlog s2, at the state
 * hkd_evaluate() left; gz (dw x m, may be NULL; needs the work's orbit buffers):
 * dF/dZ. */
static int gradient(const hkd_impl *im, const hkd_data *data, hkd_work *w, double s2,
                    const hkd_terms *terms, double *grad, double *gz, gp_error *err)
{
    size_t np = gp_kernel_n_params(im->kin), n = data->n;
    double gtmp[1 + GP_SYM_MAX_DIMS + GP_SYM_MAX_GENERATORS], tr_s, tr_g;
    int rc = prior_sensitivity(im, w, s2, &tr_s, &tr_g, err);
    if (rc == GP_OK)
        rc = contract_prior(im, w, grad, gz, err);
    for (size_t i = 0; i < n; i++)
        w->r[i] /= s2; /* beta */
    for (size_t start = 0; rc == GP_OK && start < n; start += w->chunk) {
        if (gp_cancel_requested(w->cancel))
            rc = gp_error_set(err, GP_ECANCELLED, NULL, "cancelled");
        else
            rc = contract_chunk(im, data, w, s2, start,
                                n - start < w->chunk ? n - start : w->chunk, gtmp, grad, err);
    }
    for (size_t i = 0; i < n; i++)
        w->r[i] *= s2;
    if (rc)
        return rc;
    /* k(x, x) is the same for every x: its weight, with the jitter's eps = c k(x, x) */
    double wdiag = -(double)n / (2.0 * s2) + GP_HKD_JITTER * tr_g;
    gp_kernel_eval_grad(im->kin, data->X, data->X, 1, gtmp);
    for (size_t p = 0; p < np; p++)
        grad[p] += wdiag * gtmp[p];
    if (gz)
        orbit_to_inputs(im, w->gzo, gz);
    double P = (double)im->P;
    double ds2 = -(double)n / (2.0 * s2) +
                 (terms->rr + s2 * (P - tr_s) + terms->trace) / (2.0 * s2 * s2);
    grad[np] = s2 * ds2;
    return GP_OK;
}

/* ---- the hyperparameter objective (gp_inducing_optimise) ---- */

int hkd_objective(void *ctx, const gp_kernel *k, double s2, const double *Z, size_t m,
                  double *f, double *grad, double *gz)
{
    hkd_problem *pb = ctx;
    gp_error err;
    hkd_terms terms;
    if (Z != pb->im->Z) /* the driver moves im->Z itself; others pass their own */
        memcpy(pb->im->Z, Z, pb->im->frame.dw * m * sizeof *Z);
    hkd_orbit_of(pb->im);
    hkd_sync_kernel(k, pb->im);
    int rc = hkd_evaluate(pb->im, pb->data, pb->w, s2, pb->pcg_tol, pb->pcg_max, &terms, &err);
    *f = terms.bound;
    if (rc || (grad == NULL && gz == NULL))
        return rc;
    size_t npk = gp_kernel_n_params(k), npi = gp_kernel_n_params(pb->im->kin);
    double gi[2 + GP_SYM_MAX_DIMS + GP_SYM_MAX_GENERATORS];
    memset(gi, 0, sizeof gi);
    if (gz)
        memset(gz, 0, pb->im->frame.dw * m * sizeof *gz);
    if ((rc = gradient(pb->im, pb->data, pb->w, s2, &terms, gi, gz, &err)) != GP_OK)
        return rc;
    if (grad == NULL)
        return GP_OK;
    memset(grad, 0, (npk + 1) * sizeof *grad);
    for (size_t p = 0; p < npi; p++)
        grad[pb->im->pmap[p]] += gi[p];
    grad[npk] = gi[npi];
    return GP_OK;
}

/* ---- the bound for tests ---- */

int gp_hkd_bound(const gp_model *model, const gp_fit_request *req, const gp_kernel *k, double s2,
                 const double *Z, double *bound, double *grad, double *gz, gp_error *err)
{
    return gp_hkd_bound_mean(model, req, k, s2, Z, bound, grad, gz, NULL, err);
}

int gp_hkd_bound_mean(const gp_model *model, const gp_fit_request *req, const gp_kernel *k,
                      double s2, const double *Z, double *bound, double *grad, double *gz,
                      double *beta, gp_error *err)
{
    /* A copy of the structure with its own factors and kernel: the model stays as it was. */
    const hkd_impl *src = model->impl;
    hkd_impl im = *src;
    size_t n = req->n, d = req->d, dw = src->frame.dw, T = src->group.blocks, m = src->m;
    size_t mb = src->mb;
    im.L = gp_alloc_doubles(T * mb * mb, err);
    im.Mb = gp_alloc_doubles(T * mb * mb, err);
    im.Z = gp_alloc_doubles(dw * m, err);
    im.O = gp_alloc_doubles(dw * m * src->group.size, err);
    im.mean = gp_alloc_doubles(T * mb, err);
    im.jitter = gp_alloc_doubles(T, err);
    im.kin = NULL;
    im.Op = NULL;
    double *Xs = gp_alloc_doubles(n * d, err), *Xw = gp_alloc_doubles(n * dw, err);
    double *y = gp_alloc_doubles(n, err), *H = NULL, bh[1 + GP_SYM_MAX_DIMS];
    size_t p = gp_mean_n_coef(model->mean_type, d);
    int rc = Xs && Xw && y && im.L && im.Mb && im.mean && im.jitter && im.Z && im.O ? GP_OK
                                                                                  : GP_ENOMEM;
    if (rc == GP_OK)
        memcpy(im.Z, Z ? Z : src->Z, dw * m * sizeof *im.Z);
    if (rc == GP_OK)
        rc = gp_kernel_copy(&im.kin, src->kin, err);
    hkd_work w;
    memset(&w, 0, sizeof w);
    if (rc == GP_OK) {
        memset(im.L, 0, T * mb * mb * sizeof *im.L);
        memset(im.Mb, 0, T * mb * mb * sizeof *im.Mb);
        gp_model_standardize_points(model, req->X, n, Xs);
        gp_hkd_frame_apply(&im.frame, Xs, n, Xw);
        gp_model_working_targets(model, req->y, n, y);
        if (p && (H = gp_model_mean_basis(model, Xs, n, err)) == NULL)
            rc = GP_ENOMEM;
        if (rc == GP_OK) /* the caches' paths */
            rc = hkd_work_alloc(&w, &im, n, 1e9, gz ? 2 : grad ? 1 : 0, err);
        if (rc == GP_OK)
            rc = hkd_work_alloc_mean(&w, &im, p, err);
    }
    if (rc == GP_OK) {
        hkd_problem pb = {&im, &(hkd_data){Xw, y, n, H, p, bh}, &w, 1e-13, 10000};
        rc = hkd_objective(&pb, k, s2, im.Z, im.m, bound, grad, gz);
        if (rc)
            gp_error_set(err, rc, NULL, "the bound cannot be evaluated there");
        if (rc == GP_OK && beta)
            memcpy(beta, bh, p * sizeof *bh);
    }
    hkd_work_free(&w);
    gp_kernel_free(im.kin);
    free(im.Z);
    free(im.O);
    free(im.L);
    free(im.Mb);
    free(im.mean);
    free(im.jitter);
    free(Xs);
    free(Xw);
    free(y);
    free(H);
    return rc;
}
