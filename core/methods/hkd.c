/* Harmonic kernel decomposition (method "hkd"): see core/methods/hkd.h.
 *
 * Notation: Z (m shared inducing inputs in working coordinates), the orbit
 * O = {G^s z_i} (column i S + s, S the group size), block t keeps the m_t
 * points of Z with k_t(z, z) above GP_HKD_DROP sigma_f^2 (pitfall 7: a point
 * near a fixed point of G carries nothing in the non-trivial blocks), and
 *   K_t[j, l]     = sum_s W[t, s] k(z_j, G^s z_l) + eps I = L_t L_t^T
 *   K_t,uf[j, n]  = sum_s W[t, s] k(G^s z_j, x_n)           (G-invariance)
 *   Phi_t = L_t^{-1} K_t,uf,  C_t = Phi_t Phi_t^T,  B_t = I + C_t / s2 = M_t M_t^T
 * with eps = GP_HKD_JITTER sigma_f^2. The stacked Phi (P = sum m_t rows)
 * is the whitened inter-domain feature map; the optimal q has covariances
 * S_t = B_t^{-1} and coupled means (I + Phi Phi^T / s2) mt = Phi y / s2,
 * solved by PCG preconditioned with blockdiag(B_t) (note §5 step 8).
 *
 * The bound is evaluated as the ELBO at those q,
 *   F = -N/2 log(2 pi s2) - |r|^2 / (2 s2) - |mt|^2 / 2 - 1/2 sum_t log|B_t|
 *       - r0 / (2 s2),   r = y - Phi^T mt,  r0 = sum_n k(x_n, x_n) - |Phi|_F^2,
 * which equals L* of note §5 step 9 at the exact mean and stays a valid
 * lower bound for a PCG mean that is not.
 *
 * Gradient (envelope theorem: at the optimal q the bound's derivative is the
 * ELBO's at fixed q; with the unwhitened q held, dF/dK needs no derivative of
 * a Cholesky factor). With beta = r / s2, per block:
 *   dF/dK_t,uf = L_t^{-T} (mt_t beta^T + (I - S_t) Phi_t / s2)
 *   dF/dK_t    = -1/2 L_t^{-T} (B_t - 2I + S_t + mt_t mt_t^T) L_t^{-1}
 *   dF/dk_nn   = -1 / (2 s2)
 *   dF/ds2     = -N / (2 s2) + (|r|^2 + s2 sum_t (m_t - tr S_t) + r0) / (2 s2^2)
 * (the optimal means satisfy mt_t = Phi_t beta, which reduces the K_t part
 * to this form; for T = 1 these are sgpr's formulas, core/methods/sgpr.h).
 * The K sensitivities are spread over the orbit pairs with the weights W
 * and contracted with the kernel's parameter derivatives
 * (gp_kernel_cross_grad_contract_known): no N x N and no N x S m matrix
 * beyond one chunk. */
#include "core/methods/hkd.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/inducing/inducing.h"
#include "core/linalg/linalg.h"
#include "core/model/method.h"
#include "core/symmetry/group.h"

#define LOG_2PI 1.8378770664093454836
#define GP_HKD_JITTER 1e-6
#define GP_HKD_DROP 1e-8
#define KMEANS_ROWS 10000
#define FINAL_PCG_TOL 1e-10 /* the posterior the model keeps */
#define CHUNK_DOUBLES (1u << 21) /* the kernel values of one chunk: 16 MB */

/* ---- the fitted state ---- */

typedef struct hkd_impl {
    gp_symmetry sym;
    gp_hkd_frame frame;
    gp_group group;
    gp_kernel *kin; /* the model's kernel on the working coordinates (dw inputs) */
    size_t *pmap;   /* kin parameter p is the model kernel's parameter pmap[p] */
    size_t m, P;    /* shared inducing inputs; stacked block rows */
    double *Z;      /* dw x m */
    double *O;      /* dw x (m S): the orbit */
    size_t *mt;     /* T: block sizes */
    size_t *off;    /* T: first stacked row of each block */
    size_t *idx;    /* T x m: idx[t m + j] = the Z index of block t's point j */
    double *L;      /* T blocks of m x m (ld m): chol(K_t + eps I) */
    double *Mb;     /* T blocks of m x m: chol(I + C_t / s2) */
    double *mean;   /* P: the whitened means, stacked */
    double *jitter; /* T */
    gp_kernel_points *Op; /* the orbit prepared for the fitted kernel (predictions) */
} hkd_impl;

static void impl_free(void *p)
{
    hkd_impl *im = p;
    if (im == NULL)
        return;
    gp_hkd_frame_free(&im->frame);
    gp_group_free(&im->group);
    gp_kernel_free(im->kin);
    free(im->pmap);
    free(im->Z);
    free(im->O);
    free(im->mt);
    free(im->off);
    free(im->idx);
    free(im->L);
    free(im->Mb);
    free(im->mean);
    free(im->jitter);
    gp_kernel_points_free(im->Op);
    free(im);
}

static size_t orbit_points(const hkd_impl *im)
{
    return im->m * im->group.size;
}

/* ---- the working kernel ---- */

/* kin: the model kernel's type on dw inputs; with ARD the translated input's
 * lengthscale serves both coordinates of its circle. */
static int working_kernel(const gp_kernel *k, hkd_impl *im, gp_error *err)
{
    const gp_hkd_frame *f = &im->frame;
    int rc = gp_kernel_leaf(&im->kin, k->type, f->dw, k->ard, NULL, 0, err);
    if (rc)
        return rc;
    size_t np = gp_kernel_n_params(im->kin);
    if ((im->pmap = calloc(np, sizeof *im->pmap)) == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t p = 0; p < np; p++)
        im->pmap[p] = p < gp_kernel_n_params(k) ? p : 0;
    for (size_t q = 0; k->ard && q < f->n_trans; q++)
        im->pmap[1 + f->d + q] = 1 + f->trans_dim[q];
    return GP_OK;
}

/* kin's parameters from the model kernel's parameter vector src. */
static void set_working_params(hkd_impl *im, const double *src, gp_kernel *kin)
{
    double theta[1 + GP_SYM_MAX_DIMS + GP_SYM_MAX_GENERATORS];
    size_t np = gp_kernel_n_params(kin);
    for (size_t p = 0; p < np; p++)
        theta[p] = src[im->pmap[p]];
    gp_kernel_set_params(kin, theta);
}

static void sync_kernel(const gp_kernel *k, hkd_impl *im)
{
    double src[1 + GP_SYM_MAX_DIMS];
    gp_kernel_get_params(k, src);
    set_working_params(im, src, im->kin);
}

/* ---- block structure ---- */

static void orbit_of(hkd_impl *im)
{
    size_t S = im->group.size, dw = im->frame.dw;
    for (size_t i = 0; i < im->m; i++)
        for (size_t s = 0; s < S; s++)
            gp_group_apply(&im->group, s, im->Z + i * dw, im->O + (i * S + s) * dw);
}

/* k(O_o, z_a) into Koz (mS x m). */
static void orbit_gram(const hkd_impl *im, double *Koz)
{
    gp_kernel_cross(im->kin, im->O, orbit_points(im), im->Z, im->m, Koz, orbit_points(im));
}

/* The first stacked row of every block, and P. */
static void index_blocks(hkd_impl *im)
{
    size_t T = im->group.blocks, P = 0;
    for (size_t t = 0; t < T; t++) {
        im->off[t] = P;
        P += im->mt[t];
    }
    im->P = P;
}

/* Block t keeps z_i while k_t(z_i, z_i) >= GP_HKD_DROP sigma_f^2. */
static void choose_blocks(hkd_impl *im, const double *Koz)
{
    size_t T = im->group.blocks, S = im->group.size, m = im->m, mS = orbit_points(im);
    double var = gp_kernel_diag(im->kin, im->Z);
    for (size_t t = 0; t < T; t++) {
        size_t n = 0;
        for (size_t i = 0; i < m; i++) {
            double kt = 0.0;
            for (size_t s = 0; s < S; s++)
                kt += im->group.W[t + s * T] * Koz[i * S + s + i * mS];
            if (kt >= GP_HKD_DROP * var)
                im->idx[t * m + n++] = i;
        }
        im->mt[t] = n;
    }
    index_blocks(im);
}

/* ---- evaluation workspace ---- */

typedef struct hkd_data {
    const double *X; /* dw x n, working coordinates */
    const double *y; /* n, working units */
    size_t n;
} hkd_data;

typedef struct hkd_work {
    size_t chunk;
    double *Koz;  /* mS x m */
    double *E;    /* mS x chunk: kernel values of a chunk */
    double *Phi;  /* P x chunk */
    double *Y;    /* P x chunk: the gradient's sensitivities */
    double *Wo;   /* mS x chunk */
    double *K;    /* T x m x chunk: the blocks' orbit sums before the gather */
    double *Wzo;  /* mS x m */
    double *C;    /* T x m x m */
    double *Sinv; /* T x m x m: S_t = B_t^{-1}, then the K_t sensitivity */
    double *g, *r, *pcg; /* P; n; 4 P */
    double *gzo, *gzt;   /* dw x mS: dF/dO and one contraction's share (Z optimised) */
    double *cache;       /* P x n, or NULL */
    double *kcache;      /* mS x n: the kernel values of the data pass, for the gradient's
                            contraction (only beside a Phi cache), or NULL */
    const double *Ecur;  /* the current chunk's kernel values */
    int cached;          /* the cache holds Phi at the current factors */
    int warm;            /* im->mean holds an earlier solution of this work's data */
    double r0, yy;
    int pcg_iterations;
    double pcg_residual;
    const gp_cancel *cancel;
} hkd_work;

static void work_free(hkd_work *w)
{
    free(w->Koz);
    free(w->E);
    free(w->Phi);
    free(w->Y);
    free(w->Wo);
    free(w->K);
    free(w->Wzo);
    free(w->C);
    free(w->Sinv);
    free(w->g);
    free(w->r);
    free(w->pcg);
    free(w->gzo);
    free(w->gzt);
    free(w->cache);
    free(w->kcache);
    memset(w, 0, sizeof *w);
}

static size_t chunk_rows(size_t mS, size_t n)
{
    size_t c = CHUNK_DOUBLES / (mS ? mS : 1);
    if (c < 64)
        c = 64;
    if (c > 4096)
        c = 4096;
    return c < n ? c : (n ? n : 1);
}

/* grad: 0 value only, 1 with the gradient, 2 also with respect to Z. */
static int work_alloc(hkd_work *w, const hkd_impl *im, size_t n, double cache_bytes, int grad,
                      gp_error *err)
{
    int with_z = grad == 2;
    memset(w, 0, sizeof *w);
    size_t mS = orbit_points(im), m = im->m, T = im->group.blocks, P = im->P;
    w->chunk = chunk_rows(mS, n);
    size_t tmm = 0, cmS = 0, cP = 0, mmS = 0;
    int rc = gp_checked_size(T * m, m, &tmm, err);
    if (rc == GP_OK)
        rc = gp_checked_size(mS, w->chunk, &cmS, err);
    if (rc == GP_OK)
        rc = gp_checked_size(P ? P : 1, w->chunk, &cP, err);
    if (rc == GP_OK)
        rc = gp_checked_size(mS, m, &mmS, err);
    if (rc)
        return rc;
    w->Koz = gp_alloc_doubles(mmS, err);
    w->E = gp_alloc_doubles(cmS, err);
    w->Phi = gp_alloc_doubles(cP, err);
    w->Y = gp_alloc_doubles(cP, err);
    w->Wo = gp_alloc_doubles(cmS, err);
    w->K = gp_alloc_doubles(T * m * w->chunk, err);
    w->Wzo = gp_alloc_doubles(mmS, err);
    w->C = gp_alloc_doubles(tmm, err);
    w->Sinv = gp_alloc_doubles(tmm, err);
    w->g = gp_alloc_doubles(P + 1, err);
    w->r = gp_alloc_doubles(n, err);
    w->pcg = gp_alloc_doubles(4 * P + 4, err);
    if (with_z) {
        w->gzo = gp_alloc_doubles(im->frame.dw * mS, err);
        w->gzt = gp_alloc_doubles(im->frame.dw * (mS > m ? mS : m), err);
    }
    if (!w->Koz || !w->E || !w->Phi || !w->Y || !w->Wo || !w->K || !w->Wzo || !w->C || !w->Sinv ||
        !w->g || !w->r || !w->pcg || (with_z && (!w->gzo || !w->gzt))) {
        work_free(w);
        return GP_ENOMEM;
    }
    /* optional: without them the passes recompute what they need chunk by chunk */
    if ((double)P * (double)n * 8.0 <= cache_bytes)
        w->cache = malloc((P ? P : 1) * n * sizeof *w->cache);
    if (w->cache && grad && (double)(P + mS) * (double)n * 8.0 <= cache_bytes)
        w->kcache = malloc(mS * n * sizeof *w->kcache);
    return GP_OK;
}

/* ---- the prior blocks ---- */

/* L_t = chol(K_t + eps I); Koz must hold k(O, Z) at the current kernel. */
static int factor_prior(hkd_impl *im, const double *Koz, gp_error *err)
{
    size_t T = im->group.blocks, S = im->group.size, m = im->m, mS = orbit_points(im);
    double eps = GP_HKD_JITTER * gp_kernel_diag(im->kin, im->Z);
    for (size_t t = 0; t < T; t++) {
        size_t n = im->mt[t];
        double *Lt = im->L + t * m * m;
        const size_t *id = im->idx + t * m;
        for (size_t l = 0; l < n; l++)
            for (size_t j = l; j < n; j++) {
                double a = 0.0, b = 0.0;
                for (size_t s = 0; s < S; s++) {
                    double w = im->group.W[t + s * T];
                    a += w * Koz[id[l] * S + s + id[j] * mS];
                    b += w * Koz[id[j] * S + s + id[l] * mS];
                }
                Lt[j + l * m] = 0.5 * (a + b); /* symmetric in exact arithmetic */
            }
        for (size_t j = 0; j < n; j++)
            Lt[j + j * m] += eps;
        gp_chol_info info;
        int rc = gp_cholesky_jitter(Lt, n, m, &info, err);
        if (rc)
            return rc == GP_EDATA ? rc : GP_ENOTPD;
        for (size_t l = 0; l < n; l++)
            for (size_t j = 0; j < l; j++)
                Lt[j + l * m] = 0.0;
        im->jitter[t] = eps + info.jitter;
    }
    return GP_OK;
}

/* ---- one chunk's feature map ---- */

/* Phi (P x b, leading dimension ldp) from the kernel values E (mS x b):
 * the weighted orbit sums gathered into the blocks, then L_t^{-1}. */
static void features_from(const hkd_impl *im, const double *E, size_t b, double *Phi, size_t ldp,
                          double *K)
{
    size_t T = im->group.blocks, S = im->group.size, m = im->m;
    /* K (T x m b) = W (T x S) E, E read as S x m b (each column one orbit):
     * every block's weighted orbit sums in one level-3 call */
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)T, (blasint)(m * b),
                (blasint)S, 1.0, im->group.W, (blasint)T, E, (blasint)S, 0.0, K, (blasint)T);
    for (size_t c = 0; c < b; c++) {
        double *phi = Phi + c * ldp;
        const double *kc = K + c * m * T;
        for (size_t t = 0; t < T; t++) {
            const size_t *id = im->idx + t * m;
            double *pt = phi + im->off[t];
            for (size_t j = 0; j < im->mt[t]; j++)
                pt[j] = kc[t + id[j] * T];
        }
    }
    for (size_t t = 0; t < T; t++)
        if (im->mt[t])
            gp_trsm_lower(im->L + t * m * m, im->mt[t], m, 0, Phi + im->off[t], b, ldp);
}

/* Phi of rows start .. start + b: from the cache when it is filled, else
 * computed (into the cache when there is one, else into w->Phi). With
 * with_kernel, w->Ecur points at the chunk's kernel values k(O, x): from the
 * kernel cache when it is filled, else computed. */
static const double *chunk_features(const hkd_impl *im, const hkd_data *data, hkd_work *w,
                                    size_t start, size_t b, int with_kernel, size_t *ldp)
{
    size_t P = im->P, mS = orbit_points(im), dw = im->frame.dw;
    *ldp = P;
    if (w->cache && w->cached && !with_kernel)
        return w->cache + start * P;
    if (w->kcache && w->cached) {
        w->Ecur = w->kcache + start * mS;
        return w->cache + start * P;
    }
    double *E = w->kcache ? w->kcache + start * mS : w->E;
    gp_kernel_cross(im->kin, im->O, mS, data->X + start * dw, b, E, mS);
    w->Ecur = E;
    if (w->cache && w->cached)
        return w->cache + start * P;
    double *Phi = w->cache ? w->cache + start * P : w->Phi;
    features_from(im, E, b, Phi, P, w->K);
    return Phi;
}

/* ---- the data pass ---- */

/* C_t, g = Phi y, r0 and y.y over all chunks (filling the cache). */
static int data_pass(const hkd_impl *im, const hkd_data *data, hkd_work *w, gp_error *err)
{
    size_t T = im->group.blocks, m = im->m, P = im->P, n = data->n;
    memset(w->C, 0, T * m * m * sizeof *w->C);
    memset(w->g, 0, (P + 1) * sizeof *w->g);
    double kdiag = gp_kernel_diag(im->kin, data->X), r0 = 0.0;
    w->cached = 0;
    for (size_t start = 0; start < n; start += w->chunk) {
        if (gp_cancel_requested(w->cancel))
            return gp_error_set(err, GP_ECANCELLED, NULL, "cancelled");
        size_t b = n - start < w->chunk ? n - start : w->chunk, ldp;
        const double *Phi = chunk_features(im, data, w, start, b, 0, &ldp);
        for (size_t t = 0; t < T; t++) {
            size_t k = im->mt[t];
            if (k == 0)
                continue;
            cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)k, (blasint)b, 1.0,
                        Phi + im->off[t], (blasint)ldp, 1.0, w->C + t * m * m, (blasint)m);
        }
        if (P)
            cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)P, (blasint)b, 1.0, Phi,
                        (blasint)ldp, data->y + start, 1, 1.0, w->g, 1);
        for (size_t c = 0; c < b; c++)
            r0 += kdiag - (P ? cblas_ddot((blasint)P, Phi + c * ldp, 1, Phi + c * ldp, 1) : 0.0);
    }
    w->cached = w->cache != NULL;
    w->r0 = r0;
    w->yy = cblas_ddot((blasint)n, data->y, 1, data->y, 1);
    return GP_OK;
}

/* M_t = chol(I + C_t / s2) (C_t kept, full symmetric). */
static int factor_posterior(hkd_impl *im, hkd_work *w, double s2, gp_error *err)
{
    size_t T = im->group.blocks, m = im->m;
    for (size_t t = 0; t < T; t++) {
        size_t k = im->mt[t];
        double *C = w->C + t * m * m, *M = im->Mb + t * m * m;
        gp_symmetrize_from_lower(C, k, m);
        for (size_t l = 0; l < k; l++)
            for (size_t j = 0; j < k; j++)
                M[j + l * m] = (j >= l ? C[j + l * m] / s2 : 0.0) + (j == l ? 1.0 : 0.0);
        if (k && LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)k, M, (lapack_int)m) != 0)
            return gp_error_set(err, GP_ENOTPD, NULL, "I + C_t / s2 is not positive definite");
    }
    return GP_OK;
}

/* ---- the coupled means: PCG ---- */

/* out = v + Phi (Phi^T v) / s2 over the data, in column blocks small enough
 * that the second product reads Phi from cache, not memory. */
static int apply_system(const hkd_impl *im, const hkd_data *data, hkd_work *w, double s2,
                        const double *v, double *out, gp_error *err)
{
    size_t P = im->P, n = data->n, sub = (1u << 17) / (P ? P : 1);
    if (sub < 8)
        sub = 8;
    memcpy(out, v, P * sizeof *v);
    for (size_t start = 0; start < n; start += w->chunk) {
        if (gp_cancel_requested(w->cancel))
            return gp_error_set(err, GP_ECANCELLED, NULL, "cancelled");
        size_t b = n - start < w->chunk ? n - start : w->chunk, ldp;
        const double *Phi = chunk_features(im, data, w, start, b, 0, &ldp);
        for (size_t c = 0; c < b; c += sub) {
            size_t k = b - c < sub ? b - c : sub;
            double *u = w->r + start + c;
            cblas_dgemv(CblasColMajor, CblasTrans, (blasint)P, (blasint)k, 1.0, Phi + c * ldp,
                        (blasint)ldp, v, 1, 0.0, u, 1);
            cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)P, (blasint)k, 1.0 / s2,
                        Phi + c * ldp, (blasint)ldp, u, 1, 1.0, out, 1);
        }
    }
    return GP_OK;
}

/* z = blockdiag(B_t)^{-1} v. */
static void precondition(const hkd_impl *im, const double *v, double *z)
{
    size_t m = im->m;
    memcpy(z, v, im->P * sizeof *v);
    for (size_t t = 0; t < im->group.blocks; t++)
        if (im->mt[t])
            gp_chol_solve(im->Mb + t * m * m, im->mt[t], m, z + im->off[t], 1, im->mt[t]);
}

/* (I + Phi Phi^T / s2) mean = g / s2 by PCG from the block-diagonal solution. */
static int solve_means(hkd_impl *im, const hkd_data *data, hkd_work *w, double s2, double tol,
                       int max_it, gp_error *err)
{
    size_t P = im->P;
    double *x = im->mean, *res = w->pcg, *z = res + P, *p = z + P, *q = p + P;
    w->pcg_iterations = 0;
    w->pcg_residual = 0.0;
    if (P == 0)
        return GP_OK;
    for (size_t i = 0; i < P; i++)
        res[i] = w->g[i] / s2;
    double bnorm = cblas_dnrm2((blasint)P, res, 1);
    /* Start from the last solve of this search (the hyperparameters moved a
     * little since), else from the block-diagonal solution. */
    if (!w->warm)
        precondition(im, res, x);
    int rc = apply_system(im, data, w, s2, x, q, err);
    if (rc)
        return rc;
    for (size_t i = 0; i < P; i++)
        res[i] -= q[i];
    precondition(im, res, z);
    memcpy(p, z, P * sizeof *z);
    double rz = cblas_ddot((blasint)P, res, 1, z, 1);
    double rel = bnorm > 0 ? cblas_dnrm2((blasint)P, res, 1) / bnorm : 0.0;
    int it = 0;
    while (rel > tol && it < max_it) {
        if ((rc = apply_system(im, data, w, s2, p, q, err)) != GP_OK)
            return rc;
        double pq = cblas_ddot((blasint)P, p, 1, q, 1);
        if (!(pq > 0))
            break;
        double alpha = rz / pq;
        cblas_daxpy((blasint)P, alpha, p, 1, x, 1);
        cblas_daxpy((blasint)P, -alpha, q, 1, res, 1);
        it++;
        rel = cblas_dnrm2((blasint)P, res, 1) / bnorm;
        precondition(im, res, z);
        double rz2 = cblas_ddot((blasint)P, res, 1, z, 1);
        for (size_t i = 0; i < P; i++)
            p[i] = z[i] + (rz2 / rz) * p[i];
        rz = rz2;
    }
    w->pcg_iterations = it;
    w->pcg_residual = rel;
    w->warm = 1;
    return GP_OK;
}

/* r = y - Phi^T mean. */
static int residuals(const hkd_impl *im, const hkd_data *data, hkd_work *w, gp_error *err)
{
    size_t P = im->P, n = data->n;
    for (size_t start = 0; start < n; start += w->chunk) {
        if (gp_cancel_requested(w->cancel))
            return gp_error_set(err, GP_ECANCELLED, NULL, "cancelled");
        size_t b = n - start < w->chunk ? n - start : w->chunk, ldp;
        const double *Phi = chunk_features(im, data, w, start, b, 0, &ldp);
        memcpy(w->r + start, data->y + start, b * sizeof *w->r);
        if (P)
            cblas_dgemv(CblasColMajor, CblasTrans, (blasint)P, (blasint)b, -1.0, Phi,
                        (blasint)ldp, im->mean, 1, 1.0, w->r + start, 1);
    }
    return GP_OK;
}

typedef struct hkd_terms {
    double bound, trace, rr;
} hkd_terms;

static double bound_value(const hkd_impl *im, const hkd_work *w, size_t n, double s2,
                          hkd_terms *terms)
{
    size_t m = im->m;
    double logdet = 0.0;
    for (size_t t = 0; t < im->group.blocks; t++)
        logdet += im->mt[t] ? gp_chol_logdet(im->Mb + t * m * m, im->mt[t], m) : 0.0;
    double rr = cblas_ddot((blasint)n, w->r, 1, w->r, 1);
    double mm = im->P ? cblas_ddot((blasint)im->P, im->mean, 1, im->mean, 1) : 0.0;
    terms->rr = rr;
    terms->trace = w->r0;
    terms->bound = -0.5 * (double)n * (LOG_2PI + log(s2)) - rr / (2.0 * s2) - 0.5 * mm -
                   0.5 * logdet - w->r0 / (2.0 * s2);
    return terms->bound;
}

/* The factors, means and bound at the current kernel and s2. */
static int evaluate(hkd_impl *im, const hkd_data *data, hkd_work *w, double s2, double tol,
                    int max_it, hkd_terms *terms, gp_error *err)
{
    orbit_gram(im, w->Koz);
    int rc = factor_prior(im, w->Koz, err);
    if (rc == GP_OK)
        rc = data_pass(im, data, w, err);
    if (rc == GP_OK)
        rc = factor_posterior(im, w, s2, err);
    if (rc == GP_OK)
        rc = solve_means(im, data, w, s2, tol, max_it, err);
    if (rc == GP_OK)
        rc = residuals(im, data, w, err);
    if (rc == GP_OK && !isfinite(bound_value(im, w, data->n, s2, terms)))
        rc = gp_error_set(err, GP_ENOTPD, NULL, "the bound is not finite");
    return rc;
}

/* ---- the gradient ---- */

/* Sinv_t = S_t = B_t^{-1}, then the K_t sensitivity
 * -1/2 L^{-T} (B - 2I + S + mt mt^T) L^{-1} in place; *trace_g += its trace. */
static int prior_sensitivity(const hkd_impl *im, hkd_work *w, double s2, double *tr_s,
                             double *trace_g, gp_error *err)
{
    size_t m = im->m;
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
    size_t T = im->group.blocks, S = im->group.size, m = im->m, mS = orbit_points(im);
    memset(w->Wzo, 0, mS * m * sizeof *w->Wzo);
    for (size_t t = 0; t < T; t++) {
        const double *G = w->C + t * m * m;
        const size_t *id = im->idx + t * m;
        for (size_t l = 0; l < im->mt[t]; l++)
            for (size_t j = 0; j < im->mt[t]; j++)
                for (size_t s = 0; s < S; s++)
                    w->Wzo[id[l] * S + s + id[j] * mS] += im->group.W[t + s * T] * G[j + l * m];
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
    size_t T = im->group.blocks, S = im->group.size, m = im->m, mS = orbit_points(im);
    size_t P = im->P, ldp;
    const double *Phi = chunk_features(im, data, w, start, b, 1, &ldp);
    const double *beta = w->r + start;
    for (size_t t = 0; t < T; t++) {
        size_t k = im->mt[t];
        if (k == 0)
            continue;
        const double *St = w->Sinv + t * m * m, *Pt = Phi + im->off[t];
        double *Yt = w->Y + im->off[t];
        for (size_t c = 0; c < b; c++)
            memcpy(Yt + c * P, Pt + c * ldp, k * sizeof *Yt);
        cblas_dsymm(CblasColMajor, CblasLeft, CblasLower, (blasint)k, (blasint)b, -1.0 / s2, St,
                    (blasint)m, Pt, (blasint)ldp, 1.0 / s2, Yt, (blasint)P);
        cblas_dger(CblasColMajor, (blasint)k, (blasint)b, 1.0, im->mean + im->off[t], 1, beta,
                   1, Yt, (blasint)P);
        gp_trsm_lower(im->L + t * m * m, k, m, 1, Yt, b, P);
    }
    /* Wo (S x m b, each column one orbit) = W^T Yk with Yk (T x m b) the
     * blocks' sensitivities scattered back to Z's order (0 where dropped) */
    memset(w->K, 0, T * m * b * sizeof *w->K);
    for (size_t c = 0; c < b; c++)
        for (size_t t = 0; t < T; t++) {
            const double *yt = w->Y + im->off[t] + c * P;
            for (size_t j = 0; j < im->mt[t]; j++)
                w->K[t + (im->idx[t * m + j] + c * m) * T] = yt[j];
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
 * evaluate() left; gz (dw x m, may be NULL; needs the work's orbit buffers):
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

typedef struct hkd_problem {
    hkd_impl *im;
    const hkd_data *data;
    hkd_work *w;
    double pcg_tol;
    int pcg_max;
} hkd_problem;

static int hkd_objective(void *ctx, const gp_kernel *k, double s2, const double *Z, size_t m,
                         double *f, double *grad, double *gz)
{
    hkd_problem *pb = ctx;
    gp_error err;
    hkd_terms terms;
    if (Z != pb->im->Z) /* the driver moves im->Z itself; others pass their own */
        memcpy(pb->im->Z, Z, pb->im->frame.dw * m * sizeof *Z);
    orbit_of(pb->im);
    sync_kernel(k, pb->im);
    int rc = evaluate(pb->im, pb->data, pb->w, s2, pb->pcg_tol, pb->pcg_max, &terms, &err);
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

/* ---- options ---- */

static const gp_kernel_type hkd_kernels[] = {GP_KERNEL_RBF, GP_KERNEL_MATERN12,
                                             GP_KERNEL_MATERN32, GP_KERNEL_MATERN52};

static const gp_option_spec hkd_options[] = {
    {"symmetry", GP_OPTION_OBJECT, 0, NULL, 0, 0,
     "{\"type\": \"object\", \"additionalProperties\": false, "
     "\"properties\": {\"generators\": {\"type\": \"array\", \"maxItems\": 8, "
     "\"items\": {\"type\": \"object\", \"required\": [\"type\"], "
     "\"properties\": {\"type\": {\"type\": \"string\", \"enum\": [\"negate\", \"negate_pca\", "
     "\"translate\", \"rotate2d\", \"cycle_dims\"]}, \"dims\": {\"type\": \"array\", "
     "\"items\": {\"type\": \"integer\", \"minimum\": 0}}, \"dim\": {\"type\": \"integer\", "
     "\"minimum\": 0}, \"ways\": {\"type\": \"integer\", \"minimum\": 1, \"maximum\": 8}, "
     "\"order\": {\"type\": \"integer\", \"minimum\": 2, \"maximum\": 64}, "
     "\"period\": {\"type\": \"number\", \"minimum\": 0, \"exclusiveMinimum\": true}, "
     "\"shift\": {\"type\": \"integer\", \"minimum\": 1}}}}, "
     "\"resolve\": {\"type\": \"string\", \"enum\": [\"per_axis_real\"]}, "
     "\"share_inducing\": {\"type\": \"boolean\", \"enum\": [true]}, "
     "\"validate\": {\"type\": \"boolean\"}, \"center\": {\"type\": \"string\", "
     "\"enum\": [\"mean\", \"origin\"]}}}",
     "the group the kernel is invariant under: {\"generators\": [...]} of negate {dims}, "
     "negate_pca {ways}, translate {dim, period, order}, rotate2d {dims: [i, j], order}, "
     "cycle_dims {dims, shift}; commuting, combined into their product; \"center\": \"mean\" "
     "(default: the group acts about the training mean) or \"origin\". Absent: negate every "
     "input (x -> -x, 2 blocks); []: one block (sgpr with fixed Z)"},
    {"inducing", GP_OPTION_INT, 128, NULL, 1, 2048, NULL,
     "m, the inducing points of every block (the shared k-means Z; at most the number of "
     "training points)"},
    {"optimize_inducing", GP_OPTION_BOOL, 1, NULL, 0, 1, NULL,
     "also move the inducing inputs Z with the hyperparameters (the bound's gradient "
     "through the orbit; not with a translated input); false keeps the folded k-means Z"},
    {"inducing_selection", GP_OPTION_ENUM, 0, "kmeans", 0, 0, "kmeans|random",
     "kmeans: k-means centres of the data folded into a fundamental domain of the group; "
     "random: distinct folded training points (both seeded)"},
    {"hyper_subsample", GP_OPTION_INT, 10000, NULL, 0, 100000000, NULL,
     "rows the hyperparameter search uses (a seeded subsample; 0: all); the final posterior "
     "always uses every row"},
    {"max_iterations", GP_OPTION_INT, 100, NULL, 0, 100000, NULL,
     "L-BFGS iterations of the hyperparameter search (0: keep the kernel as given)"},
    {"tolerance", GP_OPTION_NUMBER, 1e-8, NULL, 1e-16, 1, NULL,
     "stop when the relative change of the bound in an iteration falls below this"},
    {"pcg_tolerance", GP_OPTION_NUMBER, 1e-7, NULL, 1e-14, 1e-2, NULL,
     "relative residual at which the coupled means' PCG stops during the hyperparameter "
     "search (each step starts from the last solve; the bound stays a bound for an inexact "
     "mean, its gradient is exact only at the solution: 1e-6 slowed L-BFGS on "
     "bench/results/hkd.md's keggdirected); the final solve on every row goes to 1e-10 or "
     "this, whichever is smaller"},
    {"pcg_max_iterations", GP_OPTION_INT, 200, NULL, 1, 100000, NULL,
     "PCG iterations per solve during the search at most; the final solve may take 20 times "
     "as many"},
    {"cache_mb", GP_OPTION_INT, 1024, NULL, 0, 1048576, NULL,
     "memory for the features Phi of all rows (N x T m doubles), which spares a kernel "
     "pass per PCG iteration; beyond it the passes recompute them chunk by chunk"},
};

/* v NULL: the option is absent (its default is checked against d). */
static int hkd_check_option(const char *name, const gp_value *v, size_t d, const char *field,
                            gp_error *err)
{
    if (strcmp(name, "symmetry") != 0)
        return gp_error_set(err, GP_EINVAL, field, "unknown option");
    gp_symmetry sym;
    return gp_symmetry_parse(v, d, field, &sym, err);
}

/* ---- fit ---- */

/* Standardisation that the group can act on: a rotated plane and a cycled
 * set of inputs share one scale (and a cycled set one mean), so that the
 * transformation of the original inputs is the same one of the standardised
 * ones; a translated (periodic) input keeps its origin. */
static void adjust_standardisation(gp_model *model, const gp_symmetry *s)
{
    double *mu = model->x_mean, *sc = model->x_scale;
    for (size_t j = 0; s->center_origin && j < model->input_dim; j++)
        mu[j] = 0.0;
    for (size_t g = 0; model->standardize && g < s->n_gen; g++) {
        const gp_sym_generator *G = &s->gen[g];
        size_t n = G->n_dims;
        if (G->type == GP_SYM_TRANSLATE)
            mu[G->dims[0]] = 0.0;
        if (G->type != GP_SYM_ROTATE2D && G->type != GP_SYM_CYCLE_DIMS)
            continue;
        double mean = 0.0, var = 0.0;
        for (size_t i = 0; i < n; i++)
            mean += mu[G->dims[i]] / (double)n;
        for (size_t i = 0; i < n; i++) {
            double dm = G->type == GP_SYM_CYCLE_DIMS ? mu[G->dims[i]] - mean : 0.0;
            var += (sc[G->dims[i]] * sc[G->dims[i]] + dm * dm) / (double)n;
        }
        for (size_t i = 0; i < n; i++) {
            sc[G->dims[i]] = sqrt(var);
            if (G->type == GP_SYM_CYCLE_DIMS)
                mu[G->dims[i]] = mean;
        }
    }
}

/* U: the eigenvectors of the inputs' second moments, by descending
 * eigenvalue (pitfall 6), each with its largest entry positive. */
static int pca_basis(const double *X, size_t n, size_t d, double **U, gp_error *err)
{
    double *A = gp_alloc_doubles(d * d, err), *ev = gp_alloc_doubles(d, err);
    *U = gp_alloc_doubles(d * d, err);
    int rc = A && ev && *U ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK) {
        cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)d, (blasint)n,
                    1.0 / (double)n, X, (blasint)d, 0.0, A, (blasint)d);
        if (LAPACKE_dsyev(LAPACK_COL_MAJOR, 'V', 'L', (lapack_int)d, A, (lapack_int)d, ev) != 0)
            rc = gp_error_set(err, GP_ENOTPD, NULL, "the PCA eigenproblem failed");
    }
    for (size_t j = 0; rc == GP_OK && j < d; j++) {
        const double *col = A + (d - 1 - j) * d;
        size_t big = 0;
        for (size_t i = 1; i < d; i++)
            if (fabs(col[i]) > fabs(col[big]))
                big = i;
        double sign = col[big] < 0 ? -1.0 : 1.0;
        for (size_t i = 0; i < d; i++)
            (*U)[i + j * d] = sign * col[i];
    }
    free(A);
    free(ev);
    if (rc) {
        free(*U);
        *U = NULL;
    }
    return rc;
}

static int build_frame(const gp_model *model, const gp_symmetry *s, const double *Xs, size_t n,
                       gp_hkd_frame *f, gp_error *err)
{
    memset(f, 0, sizeof *f);
    f->d = model->input_dim;
    for (size_t g = 0; g < s->n_gen; g++) {
        const gp_sym_generator *G = &s->gen[g];
        if (G->type == GP_SYM_NEGATE_PCA && Xs) {
            int rc = pca_basis(Xs, n, f->d, &f->U, err);
            if (rc)
                return rc;
        }
        if (G->type == GP_SYM_TRANSLATE) {
            size_t k = f->n_trans++, i = G->dims[0];
            f->trans_dim[k] = i;
            f->trans_omega[k] = 6.283185307179586476925 * model->x_scale[i] / G->period;
            f->trans_radius[k] = 1.0 / f->trans_omega[k];
        }
    }
    f->dw = f->d + f->n_trans;
    return GP_OK;
}

/* Up to KMEANS_ROWS of the working points, folded, then k-means (or random). */
static int choose_inducing(hkd_impl *im, const double *Xw, size_t n, size_t M,
                           const char *selection, uint64_t seed, gp_error *err)
{
    size_t dw = im->frame.dw, rows = n < KMEANS_ROWS ? n : KMEANS_ROWS;
    double *F = gp_alloc_doubles(rows * dw, err), *scratch = gp_alloc_doubles(dw, err);
    int rc = F && scratch ? GP_OK : GP_ENOMEM;
    gp_rng rng;
    gp_rng_seed(&rng, seed ^ 0x9e3779b97f4a7c15ULL);
    for (size_t i = 0; rc == GP_OK && i < rows; i++) {
        size_t src = rows == n ? i : (size_t)gp_rng_below(&rng, n);
        gp_group_fold(&im->group, Xw + src * dw, F + i * dw, scratch);
    }
    if (rc == GP_OK) {
        gp_inducing_selection sel =
            strcmp(selection, "random") == 0 ? GP_INDUCING_RANDOM : GP_INDUCING_KMEANS;
        rc = gp_inducing_select(sel, NULL, F, rows, dw, M, seed, im->Z, &im->m, err);
    }
    free(F);
    free(scratch);
    return rc;
}

static int alloc_blocks(hkd_impl *im, gp_error *err)
{
    size_t T = im->group.blocks, m = im->m, S = im->group.size, dw = im->frame.dw, tmm = 0;
    int rc = gp_checked_size(T * m, m, &tmm, err);
    if (rc)
        return rc;
    im->O = gp_alloc_doubles(dw * m * S, err);
    im->mt = calloc(T, sizeof *im->mt);
    im->off = calloc(T, sizeof *im->off);
    im->idx = calloc(T * m, sizeof *im->idx);
    im->L = gp_alloc_doubles(tmm, err);
    im->Mb = gp_alloc_doubles(tmm, err);
    im->mean = gp_alloc_doubles(T * m, err);
    im->jitter = gp_alloc_doubles(T, err);
    if (!im->O || !im->mt || !im->off || !im->idx || !im->L || !im->Mb ||
        !im->mean || !im->jitter)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory for hkd's blocks");
    memset(im->L, 0, tmm * sizeof *im->L);
    memset(im->Mb, 0, tmm * sizeof *im->Mb);
    return GP_OK;
}

/* The same kernel family with lengthscales spread around the data's scale
 * (seeded), ties of the working kernel kept: what the validation also
 * checks, because the fit moves the lengthscales. */
static int perturbed_kernel(const gp_model *model, hkd_impl *im, uint64_t seed, gp_kernel **out,
                            gp_error *err)
{
    int rc = gp_kernel_copy(out, im->kin, err);
    if (rc)
        return rc;
    double theta[1 + GP_SYM_MAX_DIMS];
    size_t np = gp_kernel_n_params(model->kernel);
    gp_kernel_get_params(model->kernel, theta);
    gp_rng rng;
    gp_rng_seed(&rng, seed ^ 0x2545f4914f6cdd1dULL);
    for (size_t p = 1; p < np; p++) /* the lengthscales, around the inputs' scale */
        theta[p] = log(sqrt((double)model->input_dim)) + gp_rng_uniform(&rng) - 0.5;
    set_working_params(im, theta, *out);
    return GP_OK;
}

static int validate_symmetry(const gp_model *model, hkd_impl *im, const double *Xw, size_t n,
                             uint64_t seed, gp_error *err)
{
    gp_kernel *kp = NULL;
    int rc = perturbed_kernel(model, im, seed, &kp, err);
    if (rc)
        return rc;
    const gp_kernel *ks[2] = {im->kin, kp};
    rc = gp_group_validate(&im->group, &im->sym, ks, 2, Xw, n, seed, "options.symmetry", err);
    gp_kernel_free(kp);
    return rc;
}

/* The structure of the model: frame, group, working kernel, validation, Z,
 * orbit and blocks. Xs: standardised inputs (d x n); Xw receives the working
 * ones (dw x n, allocated here). */
static int build_structure(gp_model *model, const gp_fit_request *req, hkd_impl *im,
                           const double *Xs, double **Xw, gp_error *err)
{
    size_t n = req->n;
    int rc = build_frame(model, &im->sym, Xs, n, &im->frame, err);
    if (rc == GP_OK)
        rc = gp_group_build(&im->sym, &im->frame, &im->group, err);
    if (rc == GP_OK)
        rc = working_kernel(model->kernel, im, err);
    if (rc)
        return rc;
    sync_kernel(model->kernel, im);
    size_t dw = im->frame.dw, nw = 0;
    if ((rc = gp_checked_size(dw, n, &nw, err)) != GP_OK)
        return rc;
    if ((*Xw = gp_alloc_doubles(nw, err)) == NULL)
        return GP_ENOMEM;
    gp_hkd_frame_apply(&im->frame, Xs, n, *Xw);
    if (im->sym.validate && (rc = validate_symmetry(model, im, *Xw, n, req->seed, err)))
        return rc;
    const gp_method *me = model->method;
    size_t M = (size_t)gp_option_number(me, req, "inducing");
    if ((im->Z = gp_alloc_doubles(dw * (M < n ? M : n), err)) == NULL)
        return GP_ENOMEM;
    rc = choose_inducing(im, *Xw, n, M < n ? M : n,
                         gp_option_string(me, req, "inducing_selection"), req->seed, err);
    if (rc == GP_OK)
        rc = alloc_blocks(im, err);
    return rc;
}

/* Structure after Z: orbit and the blocks each point joins (at the kernel
 * as it starts). */
static int place_blocks(hkd_impl *im, gp_error *err)
{
    orbit_of(im);
    size_t mS = orbit_points(im);
    double *Koz = gp_alloc_doubles(mS * im->m, err);
    if (Koz == NULL)
        return GP_ENOMEM;
    orbit_gram(im, Koz);
    choose_blocks(im, Koz);
    free(Koz);
    if (im->P == 0)
        return gp_error_set(err, GP_EDATA, "X",
                            "every inducing point sits at a fixed point of the group");
    return GP_OK;
}

/* A seeded subsample of `rows` of the n working points and targets. */
static int subsample(const double *Xw, const double *y, size_t n, size_t dw, size_t rows,
                     uint64_t seed, double **Xs, double **ys, gp_error *err)
{
    *Xs = gp_alloc_doubles(rows * dw, err);
    *ys = gp_alloc_doubles(rows, err);
    unsigned char *taken = calloc(n, 1);
    if (!*Xs || !*ys || !taken) {
        free(taken);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    gp_rng rng;
    gp_rng_seed(&rng, seed ^ 0x7f4a7c159e3779b9ULL);
    for (size_t picked = 0; picked < rows;) { /* Floyd-free: rows << n here */
        size_t i = (size_t)gp_rng_below(&rng, n);
        if (!taken[i]) {
            taken[i] = 1;
            picked++;
        }
    }
    for (size_t i = 0, k = 0; i < n; i++)
        if (taken[i]) {
            memcpy(*Xs + k * dw, Xw + i * dw, dw * sizeof *Xw);
            (*ys)[k++] = y[i];
        }
    free(taken);
    return GP_OK;
}

/* The budget of an exact fit of max_train_points points (as for the other
 * methods), in doubles. */
static double budget_doubles(const gp_fit_request *req)
{
    double cap = (double)gp_fit_point_cap(req);
    return cap * cap;
}

/* The feature cache: cache_mb, and never beyond the fit's memory budget. */
static double cache_bytes(const gp_method *me, const gp_fit_request *req)
{
    double want = gp_option_number(me, req, "cache_mb") * 1048576.0;
    double cap = 8.0 * budget_doubles(req);
    return want < cap ? want : cap;
}

/* Hyperparameters by L-BFGS on the bound over (a subsample of) the data. */
static int fit_hyper(gp_model *model, const gp_fit_request *req, hkd_impl *im,
                     const hkd_data *full, gp_error *err)
{
    const gp_method *me = model->method;
    int iters = (int)gp_option_number(me, req, "max_iterations");
    /* the driver's Z has the kernel's d rows: not the circle of a translated input */
    int optimize_z = gp_option_number(me, req, "optimize_inducing") != 0.0 &&
                     im->frame.dw == im->frame.d;
    gp_model_info_number(model, "optimize_inducing", optimize_z);
    size_t rows = (size_t)gp_option_number(me, req, "hyper_subsample");
    if (rows == 0 || rows > full->n)
        rows = full->n;
    gp_model_info_number(model, "hyper_rows", (double)rows);
    gp_noise_param np;
    gp_noise_param_init(&np, req, full->y, full->n);
    if (iters == 0) {
        model->noise_variance = np.start;
        return GP_OK;
    }
    double *Xs = NULL, *ys = NULL;
    hkd_data sub = *full;
    int rc = GP_OK;
    if (rows < full->n) {
        rc = subsample(full->X, full->y, full->n, im->frame.dw, rows, req->seed, &Xs, &ys, err);
        sub = (hkd_data){Xs, ys, rows};
    }
    hkd_work w;
    if (rc == GP_OK)
        rc = work_alloc(&w, im, sub.n, cache_bytes(me, req), optimize_z ? 2 : 1, err);
    if (rc == GP_OK) {
        w.cancel = &req->cancel;
        hkd_problem pb = {im, &sub, &w, gp_option_number(me, req, "pcg_tolerance"),
                          (int)gp_option_number(me, req, "pcg_max_iterations")};
        gp_inducing_fit_spec spec = {
            .fn = hkd_objective, .ctx = &pb, .optimize_z = optimize_z, .max_iterations = iters,
            .tolerance = gp_option_number(me, req, "tolerance"),
            .objective_offset = -(double)sub.n * log(model->y_scale), .max_total = iters};
        rc = gp_inducing_optimise(model->kernel, &np, &model->noise_variance, im->Z, im->m, req,
                                  &spec, &model->diag, err);
        work_free(&w);
    }
    free(Xs);
    free(ys);
    return rc;
}

static void report(gp_model *model, const hkd_impl *im, const hkd_work *w,
                   const hkd_terms *terms, size_t n)
{
    double offset = -(double)n * log(model->y_scale), jit = 0.0;
    size_t dropped = 0;
    for (size_t t = 0; t < im->group.blocks; t++) {
        dropped += im->m - im->mt[t];
        jit = im->jitter[t] > jit ? im->jitter[t] : jit;
    }
    model->diag.objective = terms->bound + offset;
    model->diag.jitter = jit;
    gp_model_info_number(model, "n_blocks", (double)im->group.blocks);
    gp_model_info_number(model, "group_size", (double)im->group.size);
    gp_model_info_number(model, "collapsed_bound", terms->bound + offset);
    gp_model_info_number(model, "pcg_iterations", (double)w->pcg_iterations);
    gp_model_info_number(model, "pcg_residual", w->pcg_residual);
    gp_model_info_number(model, "inducing", (double)im->m);
    gp_model_info_number(model, "inducing_dropped", (double)dropped);
    gp_model_info_number(model, "working_dims", (double)im->frame.dw);
    gp_model_info_number(model, "trace_fraction",
                         terms->trace / ((double)n * gp_kernel_diag(im->kin, im->Z)));
    gp_model_info_number(model, "features_cached", w->cache ? 1.0 : 0.0);
}

/* The posterior on every row at the fitted hyperparameters. */
static int fit_posterior(gp_model *model, const gp_fit_request *req, hkd_impl *im,
                         const hkd_data *data, gp_error *err)
{
    const gp_method *me = model->method;
    hkd_work w;
    int rc = work_alloc(&w, im, data->n, cache_bytes(me, req), 0, err);
    if (rc)
        return rc;
    w.cancel = &req->cancel;
    orbit_of(im); /* Z as the search left it */
    sync_kernel(model->kernel, im);
    hkd_terms terms;
    double tol = gp_option_number(me, req, "pcg_tolerance");
    int max_it = 20 * (int)gp_option_number(me, req, "pcg_max_iterations");
    rc = evaluate(im, data, &w, model->noise_variance, tol < FINAL_PCG_TOL ? tol : FINAL_PCG_TOL,
                  max_it, &terms, err);
    if (rc == GP_OK)
        report(model, im, &w, &terms, data->n);
    if (rc == GP_OK)
        rc = gp_kernel_points_new(im->kin, im->O, orbit_points(im), &im->Op, err);
    work_free(&w);
    return rc;
}

/* Memory checked before anything is allocated: the T blocks' four m x m
 * matrices, the orbit's two m S x m ones, one chunk's buffers and the
 * working copies of the data (the feature cache is optional and has its own
 * limit, cache_bytes). */
static int size_guard(const gp_fit_request *req, const gp_symmetry *sym, size_t m,
                      gp_error *err)
{
    if (req->kernel && req->kernel->n_active != req->d)
        return gp_error_set(err, GP_EUNSUPPORTED, "kernel.active_dims",
                            "hkd's kernel sees every input (the group acts on all of them)");
    size_t S, T;
    gp_symmetry_counts(sym, &S, &T);
    double mm = (double)m * (double)m, chunk = 4096.0;
    double need = 4.0 * (double)T * mm + 2.0 * (double)S * mm +
                  chunk * (2.0 * (double)S * (double)m + 2.0 * (double)T * (double)m) +
                  (double)req->n * (2.0 * (double)req->d + 12.0);
    if (need > budget_doubles(req))
        return gp_error_set(err, GP_ETOOBIG, "options.inducing",
                            "hkd with %zu blocks of %zu inducing points (a group of %zu) on %zu "
                            "points needs %.1f GB of workspace, above the budget of an exact fit "
                            "of max_train_points points (%.1f GB): use fewer inducing points or "
                            "a smaller group, or raise --max-train-points",
                            T, m, S, req->n, need * 8e-9, budget_doubles(req) * 8e-9);
    return GP_OK;
}

static int fit_into(gp_model *model, const gp_fit_request *req, hkd_impl *im, gp_error *err)
{
    size_t n = req->n, d = req->d;
    double *Xs = gp_alloc_doubles(n * d, err), *y = gp_alloc_doubles(n, err), *Xw = NULL;
    int rc = Xs && y ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK) {
        adjust_standardisation(model, &im->sym);
        gp_model_standardize_points(model, req->X, n, Xs);
        gp_model_working_targets(model, req->y, n, y);
        rc = build_structure(model, req, im, Xs, &Xw, err);
    }
    if (rc == GP_OK)
        rc = place_blocks(im, err);
    hkd_data data = {Xw, y, n};
    if (rc == GP_OK)
        rc = fit_hyper(model, req, im, &data, err);
    if (rc == GP_OK)
        rc = fit_posterior(model, req, im, &data, err);
    free(Xs);
    free(Xw);
    free(y);
    return rc;
}

static int hkd_fit(const gp_fit_request *req, gp_model **out, gp_error *err)
{
    const gp_method *me = &gp_method_hkd;
    hkd_impl *im = calloc(1, sizeof *im);
    if (im == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    int rc = gp_symmetry_parse(gp_option_object(req, "symmetry"), req->d, "options.symmetry",
                               &im->sym, err);
    if (rc == GP_OK)
        rc = size_guard(req, &im->sym, (size_t)gp_option_number(me, req, "inducing"), err);
    gp_model *model = NULL;
    if (rc == GP_OK)
        rc = gp_model_new(me, req, &model, err);
    if (rc) {
        impl_free(im);
        return rc;
    }
    model->impl = im;
    if ((rc = fit_into(model, req, im, err)) != GP_OK) {
        gp_model_free(model);
        return rc;
    }
    *out = model;
    return GP_OK;
}

/* ---- predict ---- */

/* For b working points Pw (dw x b): A (P x b) = the stacked L_t^{-1} k_t*,
 * V = the stacked M_t^{-1} of it, from the kernel values E (mS x b); K
 * (T m b) is scratch. */
static void test_features(const hkd_impl *im, const double *Pw, size_t b, double *E, double *A,
                          double *V, double *K)
{
    size_t mS = orbit_points(im), m = im->m, P = im->P;
    gp_kernel_cross_points(im->kin, im->Op, Pw, b, E, mS);
    features_from(im, E, b, A, P, K);
    memcpy(V, A, P * b * sizeof *A);
    for (size_t t = 0; t < im->group.blocks; t++)
        if (im->mt[t])
            gp_trsm_lower(im->Mb + t * m * m, im->mt[t], m, 0, V + im->off[t], b, P);
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
    return n ? cblas_ddot((blasint)n, v, 1, v, 1) : 0.0;
}

/* Latent mean and variance (working units) of the b points, and the parts. */
static void predict_points(const gp_model *model, const hkd_impl *im, const double *Pw,
                           size_t b, const double *A, const double *V, double *mean,
                           double *var, double *part_mean, double *part_var, size_t ld_parts)
{
    size_t P = im->P, dw = im->frame.dw, T = im->group.blocks, S = im->group.size;
    double gx[GP_SYM_MAX_DIMS + GP_SYM_MAX_GENERATORS], ks[GP_SYM_MAX_SIZE];
    for (size_t c = 0; c < b; c++) {
        const double *a = A + c * P, *v = V + c * P;
        double kxx = gp_kernel_diag(im->kin, Pw + c * dw);
        double prior = kxx - sumsq(a, P), post = sumsq(v, P);
        mean[c] = P ? cblas_ddot((blasint)P, a, 1, im->mean, 1) : 0.0;
        var[c] = (prior > 0.0 ? prior : 0.0) + post;
        if (part_mean)
            orbit_self(im, Pw + c * dw, gx, ks);
        for (size_t t = 0; part_mean && t < T; t++) {
            size_t o = im->off[t], k = im->mt[t];
            double pm = k ? cblas_ddot((blasint)k, a + o, 1, im->mean + o, 1) : 0.0;
            double kt = cblas_ddot((blasint)S, im->group.W + t, (blasint)T, ks, 1);
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
} test_work;

static void test_work_free(test_work *tw)
{
    free(tw->Pw);
    free(tw->E);
    free(tw->A);
    free(tw->V);
    free(tw->K);
}

/* Working points of the request and buffers for `block` of them at once. */
static int test_work_alloc(const gp_model *model, const hkd_impl *im, const double *X, size_t m,
                           size_t block, test_work *tw, gp_error *err)
{
    memset(tw, 0, sizeof *tw);
    size_t mS = orbit_points(im), dw = im->frame.dw, nb = 0, na = 0, nw = 0;
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
    if (tw->Pw)
        gp_hkd_frame_apply(&im->frame, Ps, m, tw->Pw);
    free(Ps);
    if (!tw->Pw || !tw->E || !tw->A || !tw->V || !tw->K) {
        test_work_free(tw);
        return GP_ENOMEM;
    }
    return GP_OK;
}

static double observed(const gp_model *model, double v, int include_noise)
{
    return (v + (include_noise ? model->noise_variance : 0.0)) * model->y_scale * model->y_scale;
}

static int hkd_predict(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                       gp_error *err)
{
    const hkd_impl *im = model->impl;
    size_t m = req->m, dw = im->frame.dw;
    int full = req->full_covariance;
    size_t block = full ? m : gp_predict_block_rows(orbit_points(im) + 2 * im->P, m);
    test_work tw;
    int rc = test_work_alloc(model, im, req->X, m, block, &tw, err);
    if (rc)
        return rc;
    int parts = req->components && out->component_mean && out->component_variance;
    for (size_t start = 0; start < m; start += block) {
        size_t b = m - start < block ? m - start : block;
        test_features(im, tw.Pw + start * dw, b, tw.E, tw.A, tw.V, tw.K);
        predict_points(model, im, tw.Pw + start * dw, b, tw.A, tw.V, out->mean + start,
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

static int hkd_sample(const gp_model *model, const gp_sample_request *req, double *samples,
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

static size_t hkd_parts(const gp_model *model)
{
    return ((const hkd_impl *)model->impl)->group.blocks;
}

static void hkd_part_name(const gp_model *model, size_t i, char *buf, size_t len)
{
    gp_group_block_name(&((const hkd_impl *)model->impl)->group, i, buf, len);
}

/* ---- export / import ---- */

/* T blocks of m x m lower factors (only the leading m_t x m_t used), packed
 * one after the other: T m (m + 1) / 2 values. */
static int put_blocks(gp_state *st, const char *name, const hkd_impl *im, const double *F,
                      gp_error *err)
{
    size_t m = im->m, T = im->group.blocks, pk = m * (m + 1) / 2;
    double *buf = gp_alloc_doubles(T * pk, err);
    if (buf == NULL)
        return GP_ENOMEM;
    for (size_t t = 0; t < T; t++)
        gp_pack_lower(F + t * m * m, m, m, buf + t * pk);
    return gp_state_put_owned(st, name, T * pk, 1, buf, err);
}

static int hkd_export(const gp_model *model, gp_state *st, gp_error *err)
{
    const hkd_impl *im = model->impl;
    size_t T = im->group.blocks, m = im->m, d = im->frame.d;
    size_t nc = gp_symmetry_encode(&im->sym, NULL);
    double *code = gp_alloc_doubles(nc, err), *bi = gp_alloc_doubles(T * (m + 1), err);
    if (code == NULL || bi == NULL) {
        free(code);
        free(bi);
        return GP_ENOMEM;
    }
    gp_symmetry_encode(&im->sym, code);
    for (size_t t = 0; t < T; t++) {
        bi[t * (m + 1)] = (double)im->mt[t];
        for (size_t j = 0; j < m; j++)
            bi[t * (m + 1) + 1 + j] = j < im->mt[t] ? (double)im->idx[t * m + j] : 0.0;
    }
    int rc = gp_state_put_owned(st, "symmetry", nc, 1, code, err);
    if (rc == GP_OK)
        rc = gp_state_put_owned(st, "blocks", m + 1, T, bi, err);
    else
        free(bi);
    if (rc == GP_OK && im->frame.U)
        rc = gp_state_put(st, "pca_basis", d, d, im->frame.U, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "Z", im->frame.dw, m, im->Z, err);
    if (rc == GP_OK)
        rc = put_blocks(st, "chol_kuu_blocks", im, im->L, err);
    if (rc == GP_OK)
        rc = put_blocks(st, "chol_b_blocks", im, im->Mb, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "mean_white", im->P, 1, im->mean, err);
    if (rc == GP_OK)
        rc = gp_state_put(st, "jitter", T, 1, im->jitter, err);
    return rc;
}

static int bad_state(const char *name, gp_error *err)
{
    return gp_error_set(err, GP_EDATA, name, "the hkd state's %s is malformed", name);
}

static int get_blocks(const gp_state *st, const char *name, hkd_impl *im, double *F,
                      gp_error *err)
{
    size_t m = im->m, T = im->group.blocks, pk = m * (m + 1) / 2;
    const double *buf;
    int rc = gp_state_get(st, name, T * pk, 1, &buf, err);
    if (rc)
        return rc;
    size_t bad;
    if (!gp_all_finite(buf, T * pk, &bad))
        return bad_state(name, err);
    for (size_t t = 0; t < T; t++) {
        double *Ft = F + t * m * m;
        gp_unpack_lower(buf + t * pk, m, Ft, m);
        for (size_t j = 0; j < im->mt[t]; j++)
            if (!(Ft[j + j * m] > 0.0))
                return bad_state(name, err);
    }
    return GP_OK;
}

static int import_blocks(const gp_state *st, hkd_impl *im, gp_error *err)
{
    size_t T = im->group.blocks, m = im->m;
    const double *bi;
    int rc = gp_state_get(st, "blocks", m + 1, T, &bi, err);
    if (rc)
        return rc;
    for (size_t t = 0; t < T; t++) {
        const double *col = bi + t * (m + 1);
        if (!(col[0] >= 0 && col[0] <= (double)m && col[0] == floor(col[0])))
            return bad_state("blocks", err);
        im->mt[t] = (size_t)col[0];
        for (size_t j = 0; j < im->mt[t]; j++) {
            /* increasing, as choose_blocks writes them */
            if (!(col[1 + j] >= 0 && col[1 + j] < (double)m && col[1 + j] == floor(col[1 + j])) ||
                (j > 0 && !(col[1 + j] > col[j])))
                return bad_state("blocks", err);
            im->idx[t * m + j] = (size_t)col[1 + j];
        }
    }
    index_blocks(im);
    return GP_OK;
}

static int import_arrays(const gp_model *model, const gp_state *st, hkd_impl *im,
                         gp_error *err)
{
    size_t d = model->input_dim, bad;
    const gp_named_array *code = gp_state_find(st, "symmetry"), *z = gp_state_find(st, "Z");
    if (code == NULL || code->cols != 1)
        return bad_state("symmetry", err);
    int rc = gp_symmetry_decode(code->data, code->rows, d, &im->sym, err);
    if (rc == GP_OK)
        rc = build_frame(model, &im->sym, NULL, 0, &im->frame, err);
    if (rc)
        return rc;
    if (gp_state_find(st, "pca_basis")) {
        const double *U;
        if ((rc = gp_state_get(st, "pca_basis", d, d, &U, err)) != GP_OK)
            return rc;
        if ((im->frame.U = gp_alloc_doubles(d * d, err)) == NULL)
            return GP_ENOMEM;
        memcpy(im->frame.U, U, d * d * sizeof *U);
    }
    if (z == NULL || z->rows != im->frame.dw || z->cols == 0)
        return bad_state("Z", err);
    im->m = z->cols;
    if ((rc = gp_group_build(&im->sym, &im->frame, &im->group, err)) != GP_OK ||
        (rc = working_kernel(model->kernel, im, err)) != GP_OK)
        return rc;
    sync_kernel(model->kernel, im);
    if ((im->Z = gp_alloc_doubles(im->frame.dw * im->m, err)) == NULL)
        return GP_ENOMEM;
    memcpy(im->Z, z->data, im->frame.dw * im->m * sizeof *im->Z);
    if (!gp_all_finite(im->Z, im->frame.dw * im->m, &bad))
        return bad_state("Z", err);
    if ((rc = alloc_blocks(im, err)) != GP_OK || (rc = import_blocks(st, im, err)) != GP_OK)
        return rc;
    orbit_of(im);
    const double *mean, *jit;
    if ((rc = get_blocks(st, "chol_kuu_blocks", im, im->L, err)) != GP_OK ||
        (rc = get_blocks(st, "chol_b_blocks", im, im->Mb, err)) != GP_OK ||
        (rc = gp_state_get(st, "mean_white", im->P, 1, &mean, err)) != GP_OK ||
        (rc = gp_state_get(st, "jitter", im->group.blocks, 1, &jit, err)) != GP_OK)
        return rc;
    if (!gp_all_finite(mean, im->P, &bad) || !gp_all_finite(jit, im->group.blocks, &bad))
        return bad_state("mean_white", err);
    memcpy(im->mean, mean, im->P * sizeof *mean);
    memcpy(im->jitter, jit, im->group.blocks * sizeof *jit);
    return gp_kernel_points_new(im->kin, im->O, orbit_points(im), &im->Op, err);
}

static int hkd_import(gp_model *model, const gp_state *st, gp_error *err)
{
    hkd_impl *im = calloc(1, sizeof *im);
    if (im == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    int rc = gp_method_check_kernel(model->method, model->kernel, err);
    if (rc == GP_OK)
        rc = import_arrays(model, st, im, err);
    if (rc) {
        impl_free(im);
        return rc;
    }
    model->impl = im;
    return GP_OK;
}

/* ---- Nystrom trace study ---- */

int gp_hkd_trace_error(const gp_fit_request *req, double *trace, gp_error *err)
{
    gp_fit_request r = *req;
    gp_option_value opts[16];
    size_t n = 0;
    for (size_t i = 0; i < req->n_options && n < 15; i++)
        if (strcmp(req->options[i].name, "max_iterations") != 0)
            opts[n++] = req->options[i];
    opts[n++] = (gp_option_value){.name = "max_iterations", .number = 0.0};
    r.options = opts;
    r.n_options = n;
    if (!r.noise_given) {
        r.noise_given = 1;
        r.noise_variance = 1.0;
    }
    gp_model *model;
    int rc = gp_model_fit(&gp_method_hkd, &r, &model, err);
    if (rc)
        return rc;
    double frac = NAN;
    for (size_t i = 0; i < model->diag.n_info; i++)
        if (strcmp(model->diag.info[i].key, "trace_fraction") == 0)
            frac = model->diag.info[i].number;
    *trace = frac * gp_kernel_diag(model->kernel, req->X);
    gp_model_free(model);
    return GP_OK;
}

/* ---- the descriptor ---- */

static const gp_method_ops hkd_ops = {
    .fit = hkd_fit,
    .predict = hkd_predict,
    .sample = hkd_sample,
    .export_impl = hkd_export,
    .import_impl = hkd_import,
    .free_impl = impl_free,
    .parts = hkd_parts,
    .part_name = hkd_part_name,
    .check_option = hkd_check_option,
};

static const gp_info_spec hkd_info[] = {
    {"n_blocks", GP_INFO_NUMBER, "T, the real blocks (additive parts) of the decomposition"},
    {"group_size", GP_INFO_NUMBER, "the number of group elements (kernel evaluations per "
                                   "inducing point and input)"},
    {"collapsed_bound", GP_INFO_NUMBER, "L*, the collapsed bound at the fitted "
                                        "hyperparameters on every training row"},
    {"pcg_iterations", GP_INFO_NUMBER, "PCG iterations of the final coupled-mean solve"},
    {"pcg_residual", GP_INFO_NUMBER, "its final relative residual"},
    {"inducing", GP_INFO_NUMBER, "m, the shared inducing points"},
    {"inducing_dropped", GP_INFO_NUMBER,
     "(block, point) pairs left out because k_t(z, z) is negligible (points near a fixed "
     "point of the group)"},
    {"optimize_inducing", GP_INFO_NUMBER, "1 when Z moved with the hyperparameters"},
    {"hyper_rows", GP_INFO_NUMBER, "training rows the hyperparameter search used"},
    {"working_dims", GP_INFO_NUMBER,
     "inputs the kernel sees (one more per translated, circle-embedded input)"},
    {"trace_fraction", GP_INFO_NUMBER,
     "sum_t tr(K_t,ff - Q_t) / tr(Kff): the share of the prior variance the blocks miss"},
    {"features_cached", GP_INFO_NUMBER,
     "1 when the final pass held Phi for every row in memory (cache_mb)"},
};

static const gp_option_setting hkd_quick[] = {{"max_iterations", 8}};

const gp_method gp_method_hkd = {
    .name = "hkd",
    .summary = "Harmonic kernel decomposition (HVGP): a sparse variational GP whose kernel is "
               "split by a symmetry group into T orthogonal blocks of m inducing points each; "
               "costs O(N T m^2) per pass against O(N T^2 m^2) for T m points",
    .objective_name = "elbo",
    .options = hkd_options,
    .n_options = sizeof hkd_options / sizeof hkd_options[0],
    .kernels = hkd_kernels,
    .n_kernels = sizeof hkd_kernels / sizeof hkd_kernels[0],
    .composite_kernels = 0,
    .iterations_option = "max_iterations",
    .restarts_option = NULL,
    .info = hkd_info,
    .n_info = sizeof hkd_info / sizeof hkd_info[0],
    .quick = hkd_quick,
    .n_quick = sizeof hkd_quick / sizeof hkd_quick[0],
    .ops = &hkd_ops,
};

/* ---- the bound for tests ---- */

int gp_hkd_bound(const gp_model *model, const gp_fit_request *req, const gp_kernel *k, double s2,
                 const double *Z, double *bound, double *grad, double *gz, gp_error *err)
{
    /* A copy of the structure with its own factors and kernel: the model stays as it was. */
    const hkd_impl *src = model->impl;
    hkd_impl im = *src;
    size_t n = req->n, d = req->d, dw = src->frame.dw, T = src->group.blocks, m = src->m;
    im.L = gp_alloc_doubles(T * m * m, err);
    im.Mb = gp_alloc_doubles(T * m * m, err);
    im.Z = gp_alloc_doubles(dw * m, err);
    im.O = gp_alloc_doubles(dw * m * src->group.size, err);
    im.mean = gp_alloc_doubles(T * m, err);
    im.jitter = gp_alloc_doubles(T, err);
    im.kin = NULL;
    im.Op = NULL;
    double *Xs = gp_alloc_doubles(n * d, err), *Xw = gp_alloc_doubles(n * dw, err);
    double *y = gp_alloc_doubles(n, err);
    int rc = Xs && Xw && y && im.L && im.Mb && im.mean && im.jitter && im.Z && im.O ? GP_OK
                                                                                  : GP_ENOMEM;
    if (rc == GP_OK)
        memcpy(im.Z, Z ? Z : src->Z, dw * m * sizeof *im.Z);
    if (rc == GP_OK)
        rc = gp_kernel_copy(&im.kin, src->kin, err);
    hkd_work w;
    memset(&w, 0, sizeof w);
    if (rc == GP_OK) {
        memset(im.L, 0, T * m * m * sizeof *im.L);
        memset(im.Mb, 0, T * m * m * sizeof *im.Mb);
        gp_model_standardize_points(model, req->X, n, Xs);
        gp_hkd_frame_apply(&im.frame, Xs, n, Xw);
        gp_model_working_targets(model, req->y, n, y);
        rc = work_alloc(&w, &im, n, 1e9, gz ? 2 : grad ? 1 : 0, err); /* the caches' paths */
    }
    if (rc == GP_OK) {
        hkd_problem pb = {&im, &(hkd_data){Xw, y, n}, &w, 1e-13, 10000};
        rc = hkd_objective(&pb, k, s2, im.Z, im.m, bound, grad, gz);
        if (rc)
            gp_error_set(err, rc, NULL, "the bound cannot be evaluated there");
    }
    work_free(&w);
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
    return rc;
}
