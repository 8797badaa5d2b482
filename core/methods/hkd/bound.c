/* The bound of method "hkd" (core/methods/hkd/hkd.h), its notation and its gradient.
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
 * With a mean function (hkd_data.H, p columns) y is y - H beta with
 * beta profiled (profile_mean: the GLS estimate under Phi^T Phi + s2 I at
 * every evaluation); the bound and the gradient below are those of the
 * residual, exact by the envelope theorem (dF/dbeta = 0 at beta-hat).
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
#include "core/methods/hkd/bound.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/methods/hkd/internal.h"
#include "core/methods/hkd/state.h"
#include "core/model/mean.h"

void hkd_work_free(hkd_work *w)
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
    free(w->ph);
    free(w->U);
    free(w->hh);
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
int hkd_work_alloc(hkd_work *w, const hkd_impl *im, size_t n, double cache_bytes, int grad,
                   gp_error *err)
{
    int with_z = grad == 2;
    memset(w, 0, sizeof *w);
    size_t mS = hkd_orbit_points(im), m = im->m, mb = im->mb, T = im->group.blocks, P = im->P;
    w->chunk = chunk_rows(mS, n);
    size_t tmm = 0, cmS = 0, cP = 0, mmS = 0;
    int rc = gp_checked_size(T * mb, mb, &tmm, err);
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
        hkd_work_free(w);
        return GP_ENOMEM;
    }
    /* optional: without them the passes recompute what they need chunk by chunk */
    if ((double)P * (double)n * 8.0 <= cache_bytes)
        w->cache = malloc((P ? P : 1) * n * sizeof *w->cache);
    if (w->cache && grad && (double)(P + mS) * (double)n * 8.0 <= cache_bytes)
        w->kcache = malloc(mS * n * sizeof *w->kcache);
    return GP_OK;
}

int hkd_work_alloc_mean(hkd_work *w, const hkd_impl *im, size_t p, gp_error *err)
{
    if (p == 0)
        return GP_OK;
    w->ph = gp_alloc_doubles((im->P ? im->P : 1) * p, err);
    w->U = gp_alloc_doubles((im->P ? im->P : 1) * p, err);
    w->hh = gp_alloc_doubles(p * (p + 1), err);
    w->warm_h = 0;
    return w->ph && w->U && w->hh ? GP_OK : GP_ENOMEM;
}

/* ---- the prior blocks ---- */

/* L_t = chol(K_t + eps I); Koz must hold k(O, Z) at the current kernel. */
static int factor_prior(hkd_impl *im, const double *Koz, gp_error *err)
{
    size_t T = im->group.blocks, S = im->group.size, m = im->mb, mS = hkd_orbit_points(im);
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
void hkd_features_from(const hkd_impl *im, const double *E, size_t b, double *Phi, size_t ldp,
                       double *K)
{
    size_t T = im->group.blocks, S = im->group.size, m = im->m, mb = im->mb;
    /* K (T x m b) = W (T x S) E, E read as S x m b (each column one orbit):
     * every block's weighted orbit sums in one level-3 call */
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)T, (blasint)(m * b),
                (blasint)S, 1.0, im->group.W, (blasint)T, E, (blasint)S, 0.0, K, (blasint)T);
    for (size_t c = 0; c < b; c++) {
        double *phi = Phi + c * ldp;
        const double *kc = K + c * m * T;
        for (size_t t = 0; t < T; t++) {
            const size_t *id = im->idx + t * mb;
            double *pt = phi + im->off[t];
            for (size_t j = 0; j < im->mt[t]; j++)
                pt[j] = kc[t + id[j] * T];
        }
    }
    for (size_t t = 0; t < T; t++)
        if (im->mt[t])
            gp_trsm_lower(im->L + t * mb * mb, im->mt[t], mb, 0, Phi + im->off[t], b, ldp);
}

/* Phi of rows start .. start + b: from the cache when it is filled, else
 * computed (into the cache when there is one, else into w->Phi). With
 * with_kernel, w->Ecur points at the chunk's kernel values k(O, x): from the
 * kernel cache when it is filled, else computed. */
const double *hkd_chunk_features(const hkd_impl *im, const hkd_data *data, hkd_work *w,
                                 size_t start, size_t b, int with_kernel, size_t *ldp)
{
    size_t P = im->P, mS = hkd_orbit_points(im), dw = im->frame.dw;
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
    hkd_features_from(im, E, b, Phi, P, w->K);
    return Phi;
}

/* ---- the data pass ---- */

/* A mean's share of one chunk: Phi H into w->ph, [H^T H | H^T y] into w->hh. */
static void basis_chunk(const hkd_impl *im, const hkd_data *data, hkd_work *w, const double *Phi,
                        size_t ldp, size_t start, size_t b)
{
    size_t p = data->p, n = data->n;
    const double *Hc = data->H + start;
    if (im->P)
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)im->P, (blasint)p,
                    (blasint)b, 1.0, Phi, (blasint)ldp, Hc, (blasint)n, 1.0, w->ph,
                    (blasint)im->P);
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (blasint)p, (blasint)p, (blasint)b, 1.0,
                Hc, (blasint)n, Hc, (blasint)n, 1.0, w->hh, (blasint)p);
    cblas_dgemv(CblasColMajor, CblasTrans, (blasint)b, (blasint)p, 1.0, Hc, (blasint)n,
                data->y + start, 1, 1.0, w->hh + p * p, 1);
}

/* C_t, g = Phi y, r0 and y.y over all chunks (filling the cache). */
static int data_pass(const hkd_impl *im, const hkd_data *data, hkd_work *w, gp_error *err)
{
    size_t T = im->group.blocks, m = im->mb, P = im->P, n = data->n;
    memset(w->C, 0, T * m * m * sizeof *w->C);
    memset(w->g, 0, (P + 1) * sizeof *w->g);
    if (data->p) {
        memset(w->ph, 0, (P ? P : 1) * data->p * sizeof *w->ph);
        memset(w->hh, 0, data->p * (data->p + 1) * sizeof *w->hh);
    }
    double kdiag = gp_kernel_diag(im->kin, data->X), r0 = 0.0;
    w->cached = 0;
    for (size_t start = 0; start < n; start += w->chunk) {
        if (gp_cancel_requested(w->cancel))
            return gp_error_set(err, GP_ECANCELLED, NULL, "cancelled");
        size_t b = n - start < w->chunk ? n - start : w->chunk, ldp;
        const double *Phi = hkd_chunk_features(im, data, w, start, b, 0, &ldp);
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
        if (data->p)
            basis_chunk(im, data, w, Phi, ldp, start, b);
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
    size_t T = im->group.blocks, m = im->mb;
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
        const double *Phi = hkd_chunk_features(im, data, w, start, b, 0, &ldp);
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
    size_t m = im->mb;
    memcpy(z, v, im->P * sizeof *v);
    for (size_t t = 0; t < im->group.blocks; t++)
        if (im->mt[t])
            gp_chol_solve(im->Mb + t * m * m, im->mt[t], m, z + im->off[t], 1, im->mt[t]);
}

/* (I + Phi Phi^T / s2) x = rhs / s2 by PCG, from x itself when warm (the
 * last solve of this search: the hyperparameters moved a little since), else
 * from the block-diagonal solution. */
static int solve_system(const hkd_impl *im, const hkd_data *data, hkd_work *w, double s2,
                        const double *rhs, double *x, int warm, double tol, int max_it,
                        int *iterations, double *residual, gp_error *err)
{
    size_t P = im->P;
    double *res = w->pcg, *z = res + P, *p = z + P, *q = p + P;
    *iterations = 0;
    *residual = 0.0;
    if (P == 0)
        return GP_OK;
    for (size_t i = 0; i < P; i++)
        res[i] = rhs[i] / s2;
    double bnorm = cblas_dnrm2((blasint)P, res, 1);
    if (!warm)
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
    *iterations = it;
    *residual = rel;
    return GP_OK;
}

/* The coupled means of y: (I + Phi Phi^T / s2) mean = g / s2. */
static int solve_means(hkd_impl *im, const hkd_data *data, hkd_work *w, double s2, double tol,
                       int max_it, gp_error *err)
{
    int rc = solve_system(im, data, w, s2, w->g, im->mean, w->warm, tol, max_it,
                          &w->pcg_iterations, &w->pcg_residual, err);
    if (rc == GP_OK && im->P)
        w->warm = 1;
    return rc;
}

/* A mean profiled out: y enters the bound only through the Gaussian term
 * log N(y; 0, Sigma), Sigma = Phi^T Phi + s2 I (the ELBO at the optimal q
 * is that minus r0 / (2 s2) and the log-determinants), so the maximum over
 * beta is the GLS estimate under Sigma. By Woodbury, with A = I + Phi Phi^T / s2,
 *   s2 H^T Sigma^{-1} H = H^T H - (Phi H)^T U,  U = A^{-1} Phi H / s2,
 *   s2 H^T Sigma^{-1} y = H^T y - (Phi H)^T mean,
 * (the 1/s2 cancels in the normal equations), U by p more PCG solves with
 * the same system and preconditioner as the means (A couples the blocks:
 * no per-block shortcut, pitfall 8), and by linearity the means of the
 * residual y - H beta are mean - U beta. The solves add p times the means'
 * PCG work; the iterations reported are the sum. */
static int profile_mean(hkd_impl *im, const hkd_data *data, hkd_work *w, double s2, double tol,
                        int max_it, gp_error *err)
{
    size_t p = data->p, P = im->P;
    for (size_t j = 0; j < p; j++) {
        int it;
        double rel;
        int rc = solve_system(im, data, w, s2, w->ph + j * P, w->U + j * P, w->warm_h, tol,
                              max_it, &it, &rel, err);
        if (rc)
            return rc;
        w->pcg_iterations += it;
        w->pcg_residual = rel > w->pcg_residual ? rel : w->pcg_residual;
    }
    w->warm_h = P > 0;
    double G[(1 + GP_SYM_MAX_DIMS) * (1 + GP_SYM_MAX_DIMS)], b[1 + GP_SYM_MAX_DIMS];
    for (size_t j = 0; j < p; j++) {
        for (size_t k = j; k < p; k++) /* symmetric in exact arithmetic: PCG's is not */
            G[k + j * p] = w->hh[k + j * p] -
                           (P ? 0.5 * (cblas_ddot((blasint)P, w->ph + k * P, 1, w->U + j * P, 1) +
                                       cblas_ddot((blasint)P, w->ph + j * P, 1, w->U + k * P, 1))
                              : 0.0);
        b[j] = w->hh[p * p + j] -
               (P ? cblas_ddot((blasint)P, w->ph + j * P, 1, im->mean, 1) : 0.0);
    }
    int rc = gp_mean_solve_normal(G, b, p, err);
    if (rc)
        return rc;
    memcpy(data->beta, b, p * sizeof *b);
    if (P)
        cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)P, (blasint)p, -1.0, w->U, (blasint)P,
                    b, 1, 1.0, im->mean, 1);
    return GP_OK;
}

/* r = y - H beta - Phi^T mean. */
static int residuals(const hkd_impl *im, const hkd_data *data, hkd_work *w, gp_error *err)
{
    size_t P = im->P, n = data->n;
    for (size_t start = 0; start < n; start += w->chunk) {
        if (gp_cancel_requested(w->cancel))
            return gp_error_set(err, GP_ECANCELLED, NULL, "cancelled");
        size_t b = n - start < w->chunk ? n - start : w->chunk, ldp;
        const double *Phi = hkd_chunk_features(im, data, w, start, b, 0, &ldp);
        memcpy(w->r + start, data->y + start, b * sizeof *w->r);
        if (data->p)
            cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)b, (blasint)data->p, -1.0,
                        data->H + start, (blasint)n, data->beta, 1, 1.0, w->r + start, 1);
        if (P)
            cblas_dgemv(CblasColMajor, CblasTrans, (blasint)P, (blasint)b, -1.0, Phi,
                        (blasint)ldp, im->mean, 1, 1.0, w->r + start, 1);
    }
    return GP_OK;
}

static double bound_value(const hkd_impl *im, const hkd_work *w, size_t n, double s2,
                          hkd_terms *terms)
{
    size_t m = im->mb;
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
int hkd_evaluate(hkd_impl *im, const hkd_data *data, hkd_work *w, double s2, double tol,
                 int max_it, hkd_terms *terms, gp_error *err)
{
    hkd_orbit_gram(im, w->Koz);
    int rc = factor_prior(im, w->Koz, err);
    if (rc == GP_OK)
        rc = data_pass(im, data, w, err);
    if (rc == GP_OK)
        rc = factor_posterior(im, w, s2, err);
    if (rc == GP_OK)
        rc = solve_means(im, data, w, s2, tol, max_it, err);
    if (rc == GP_OK && data->p)
        rc = profile_mean(im, data, w, s2, tol, max_it, err);
    if (rc == GP_OK)
        rc = residuals(im, data, w, err);
    if (rc == GP_OK && !isfinite(bound_value(im, w, data->n, s2, terms)))
        rc = gp_error_set(err, GP_ENOTPD, NULL, "the bound is not finite");
    return rc;
}
