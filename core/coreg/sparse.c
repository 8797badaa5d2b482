/* The sparse coregionalised bounds and their gradients: see core/coreg/sparse.h.
 *
 * sgpr (derivation). With Lambda = diag(lambda_a), Sigma = V^T V + Lambda,
 * beta = Sigma^{-1} y, Vt = V Lambda^{-1/2}, B = I + Vt Vt^T,
 * mw = B^{-1} Vt Lambda^{-1/2} y (= V beta), Woodbury gives
 * V Sigma^{-1} = B^{-1} V Lambda^{-1}, so
 *   dF/dV      = V (beta beta^T - Sigma^{-1}) + V Lambda^{-1}
 *              = mw beta^T + (I - B^{-1}) V Lambda^{-1}
 *   dF/dkd_a   = -1 / (2 lambda_a)
 *   dF/dlambda_a = (beta_a^2 - Sigma^{-1}_aa) / 2 + t_a / (2 lambda_a^2),
 * with Sigma^{-1}_aa = (1 - |Lb^{-1} vt_a|^2) / lambda_a, t_a = kd_a - |v_a|^2,
 * beta = Lambda^{-1/2} (Lambda^{-1/2} y - Vt^T mw).
 *
 * svgp (the single-output svgp's formulas on the K-dimensional whitened u):
 * with g_mu = (y - mu) / lambda, g_v = -1 / (2 lambda), S = Lq Lq^T,
 *   dF/dmq = V g_mu - mq,  dF/dLq = lower(2 V diag(g_v) V^T Lq - Lq + diag(1/Lq_ii)),
 *   dF/dV = mq g_mu^T + 2 (S - I) V diag(g_v),  dF/dkd_a = g_v,a,
 *   dF/dlambda_a = -1 / (2 lambda_a) + ((y_a - mu_a)^2 + var_a) / (2 lambda_a^2). */
#include "core/coreg/sparse.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/inducing/inducing.h"
#include "core/linalg/linalg.h"

#define LOG_2PI 1.8378770664093454836

/* The whitened projections of one evaluation. */
typedef struct proj {
    size_t q, per_q, L, m, K, n, M;
    double *Lf;    /* q blocks m x m: chol(Kuu_q + jitter) */
    double *Kuf;   /* q blocks m x n */
    double *Aw;    /* q blocks m x n: L_q^{-1} Kuf_q */
    double *V;     /* K x M */
    double *kd;    /* M */
    double *kdiag; /* q */
    double *lam;   /* M: the entries' noises */
} proj;

static void proj_free(proj *pr)
{
    free(pr->Lf);
    free(pr->Kuf);
    free(pr->Aw);
    free(pr->V);
    free(pr->kd);
    free(pr->kdiag);
    free(pr->lam);
}

static int proj_alloc(proj *pr, const gp_coreg_sparse_at *at, const gp_coreg_sparse_data *d,
                      gp_error *err)
{
    memset(pr, 0, sizeof *pr);
    pr->q = at->q;
    pr->per_q = at->per_q;
    pr->L = at->q * at->per_q;
    pr->m = at->m;
    pr->K = pr->L * at->m;
    pr->n = d->n;
    pr->M = d->M;
    size_t qmn = 0, KM = 0;
    int rc = gp_checked_size(at->q * at->m, at->m > d->n ? at->m : d->n, &qmn, err);
    if (rc == GP_OK)
        rc = gp_checked_size(pr->K, pr->M, &KM, err);
    if (rc)
        return rc;
    pr->Lf = gp_alloc_doubles(at->q * at->m * at->m, err);
    pr->Kuf = gp_alloc_doubles(at->q * at->m * d->n, err);
    pr->Aw = gp_alloc_doubles(at->q * at->m * d->n, err);
    pr->V = gp_alloc_doubles(KM, err);
    pr->kd = gp_alloc_doubles(pr->M, err);
    pr->kdiag = gp_alloc_doubles(at->q, err);
    pr->lam = gp_alloc_doubles(pr->M, err);
    if (!pr->Lf || !pr->Kuf || !pr->Aw || !pr->V || !pr->kd || !pr->kdiag || !pr->lam) {
        proj_free(pr);
        return GP_ENOMEM;
    }
    return GP_OK;
}

int gp_coreg_sparse_kuu(const gp_coreg_sparse_at *at, double *Lq_all, gp_error *err)
{
    size_t m = at->m;
    for (size_t q = 0; q < at->q; q++) {
        double jitter;
        int rc = gp_inducing_kuu_factor(at->kernels[q], at->Z, m, Lq_all + q * m * m, &jitter,
                                        err);
        if (rc)
            return rc == GP_EDATA ? rc : GP_ENOTPD;
    }
    return GP_OK;
}

/* Factors, Kuf, Aw, V, kd and the entries' noises. */
static int proj_build(proj *pr, const gp_coreg_sparse_at *at, const gp_coreg_sparse_data *d,
                      gp_error *err)
{
    size_t m = pr->m, n = pr->n, p = at->p;
    int rc = gp_coreg_sparse_kuu(at, pr->Lf, err);
    if (rc)
        return rc;
    for (size_t q = 0; q < pr->q; q++) {
        double *Kuf = pr->Kuf + q * m * n, *Aw = pr->Aw + q * m * n;
        gp_kernel_cross(at->kernels[q], at->Z, m, d->X, n, Kuf, m);
        memcpy(Aw, Kuf, m * n * sizeof *Aw);
        gp_trsm_lower(pr->Lf + q * m * m, m, m, 0, Aw, n, m);
        pr->kdiag[q] = gp_kernel_diag(at->kernels[q], d->X); /* stationary */
    }
    for (size_t a = 0; a < pr->M; a++) {
        size_t i = d->row[a], j = d->out[a];
        double *v = pr->V + a * pr->K, kd = 0.0;
        for (size_t l = 0; l < pr->L; l++) {
            size_t q = l / pr->per_q;
            double Ajl = at->A[j + l * p];
            const double *aw = pr->Aw + q * m * n + i * m;
            for (size_t r = 0; r < m; r++)
                v[l * m + r] = Ajl * aw[r];
            kd += Ajl * Ajl * pr->kdiag[q];
        }
        pr->kd[a] = kd;
        pr->lam[a] = at->noise[j];
        if (!(pr->lam[a] > 0.0))
            return gp_error_set(err, GP_EINVAL, "noise", "output %zu has a noise of 0", j);
    }
    return GP_OK;
}

/* dF/dV = G (K x M) and dF/dkd (M) back to A, the kernels and Z. */
static int chain_back(const proj *pr, const gp_coreg_sparse_at *at,
                      const gp_coreg_sparse_data *d, const double *G, const double *gkd,
                      const gp_coreg_sparse_grad *grad, gp_error *err)
{
    size_t m = pr->m, n = pr->n, p = at->p, dim = d->d;
    if (grad->A) {
        memset(grad->A, 0, p * pr->L * sizeof *grad->A);
        for (size_t a = 0; a < pr->M; a++) {
            size_t i = d->row[a], j = d->out[a];
            for (size_t l = 0; l < pr->L; l++) {
                size_t q = l / pr->per_q;
                const double *aw = pr->Aw + q * m * n + i * m;
                grad->A[j + l * p] += gp_dot(G + a * pr->K + l * m, aw, m) +
                                      2.0 * at->A[j + l * p] * pr->kdiag[q] * gkd[a];
            }
        }
    }
    if (!grad->kernel && !grad->z)
        return GP_OK;
    size_t np = gp_kernel_n_params(at->kernels[0]);
    double *Gq = gp_alloc_doubles(m * n, err), *Wuu = gp_alloc_doubles(m * m, err);
    double *gk = gp_alloc_doubles(np, err), *gz = gp_alloc_doubles(dim * m, err);
    int rc = Gq && Wuu && gk && gz ? GP_OK : GP_ENOMEM;
    if (grad->z)
        memset(grad->z, 0, dim * m * sizeof *grad->z);
    for (size_t q = 0; rc == GP_OK && q < pr->q; q++) {
        const double *Lf = pr->Lf + q * m * m, *Aw = pr->Aw + q * m * n;
        double wdiag = 0.0;
        memset(Gq, 0, m * n * sizeof *Gq);
        for (size_t a = 0; a < pr->M; a++) {
            size_t i = d->row[a], j = d->out[a];
            for (size_t l = q * pr->per_q; l < (q + 1) * pr->per_q; l++) {
                double Ajl = at->A[j + l * p];
                cblas_daxpy((blasint)m, Ajl, G + a * pr->K + l * m, 1, Gq + i * m, 1);
                wdiag += gkd[a] * Ajl * Ajl;
            }
        }
        /* Wuu = L^{-T} sym(Phi(-Gq Aw^T)) L^{-1} */
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (blasint)m, (blasint)m, (blasint)n,
                    -1.0, Gq, (blasint)m, Aw, (blasint)m, 0.0, Wuu, (blasint)m);
        for (size_t c = 0; c < m; c++) {
            Wuu[c * m + c] *= 0.5;
            for (size_t r = 0; r < c; r++)
                Wuu[r + c * m] = 0.0;
        }
        for (size_t c = 0; c < m; c++)
            for (size_t r = c + 1; r < m; r++)
                Wuu[r + c * m] = Wuu[c + r * m] = 0.5 * Wuu[r + c * m];
        gp_trsm_lower(Lf, m, m, 1, Wuu, m, m);
        cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit,
                    (blasint)m, (blasint)m, 1.0, Lf, (blasint)m, Wuu, (blasint)m);
        gp_symmetrize_average(Wuu, m, m);
        gp_trsm_lower(Lf, m, m, 1, Gq, n, m); /* Wuf = L^{-T} Gq */
        rc = gp_inducing_contract(at->kernels[q], d->X, n, at->Z, m, pr->Kuf + q * m * n, Gq,
                                  Wuu, wdiag / (double)n, gk, grad->z ? gz : NULL, err);
        if (rc == GP_OK && grad->kernel)
            memcpy(grad->kernel + q * np, gk, np * sizeof *gk);
        for (size_t t = 0; rc == GP_OK && grad->z && t < dim * m; t++)
            grad->z[t] += gz[t];
    }
    free(Gq);
    free(Wuu);
    free(gk);
    free(gz);
    return rc;
}

static void noise_grad_sum(const proj *pr, const gp_coreg_sparse_data *d, size_t p,
                           const double *glam, double *gnoise)
{
    memset(gnoise, 0, p * sizeof *gnoise);
    for (size_t a = 0; a < pr->M; a++)
        gnoise[d->out[a]] += glam[a];
}

/* ---- sgpr ---- */

typedef struct sgpr_buf {
    double *Vt, *B, *Lb, *c, *mw, *Binv, *G, *beta, *gkd, *glam;
} sgpr_buf;

static void sgpr_buf_free(sgpr_buf *b)
{
    free(b->Vt);
    free(b->B);
    free(b->Lb);
    free(b->c);
    free(b->mw);
    free(b->Binv);
    free(b->G);
    free(b->beta);
    free(b->gkd);
    free(b->glam);
}

static int sgpr_value(const proj *pr, const gp_coreg_sparse_data *d, sgpr_buf *b, double *F,
                      gp_error *err)
{
    size_t K = pr->K, M = pr->M;
    double quad = 0.0, logl = 0.0, trace = 0.0;
    memcpy(b->Vt, pr->V, K * M * sizeof *b->Vt);
    for (size_t a = 0; a < M; a++) {
        double s = 1.0 / sqrt(pr->lam[a]), *v = pr->V + a * K;
        cblas_dscal((blasint)K, s, b->Vt + a * K, 1);
        b->beta[a] = d->y[a] * s; /* y~ until the gradient */
        quad += b->beta[a] * b->beta[a];
        logl += log(pr->lam[a]);
        trace += (pr->kd[a] - gp_dot(v, v, K)) / pr->lam[a];
    }
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)K, (blasint)M, 1.0, b->Vt,
                (blasint)K, 0.0, b->B, (blasint)K);
    for (size_t i = 0; i < K; i++)
        b->B[i * K + i] += 1.0;
    gp_symmetrize_from_lower(b->B, K, K);
    memcpy(b->Lb, b->B, K * K * sizeof *b->B);
    if (LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)K, b->Lb, (lapack_int)K) != 0)
        return gp_error_set(err, GP_ENOTPD, NULL, "I + V V^T / s2 is not positive definite");
    gp_zero_upper(b->Lb, K, K);
    cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)K, (blasint)M, 1.0, b->Vt, (blasint)K,
                b->beta, 1, 0.0, b->c, 1);
    cblas_dtrsv(CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)K, b->Lb,
                (blasint)K, b->c, 1);
    memcpy(b->mw, b->c, K * sizeof *b->c);
    cblas_dtrsv(CblasColMajor, CblasLower, CblasTrans, CblasNonUnit, (blasint)K, b->Lb,
                (blasint)K, b->mw, 1);
    double cc = gp_dot(b->c, b->c, K);
    *F = -0.5 * ((double)M * LOG_2PI + logl) - 0.5 * gp_chol_logdet(b->Lb, K, K) -
         0.5 * (quad - cc) - 0.5 * trace;
    if (!isfinite(*F))
        return gp_error_set(err, GP_ENOTPD, NULL, "the bound is not finite");
    return GP_OK;
}

static int sgpr_sens(const proj *pr, sgpr_buf *b, gp_error *err)
{
    size_t K = pr->K, M = pr->M;
    memcpy(b->Binv, b->Lb, K * K * sizeof *b->Lb);
    if (LAPACKE_dpotri(LAPACK_COL_MAJOR, 'L', (lapack_int)K, b->Binv, (lapack_int)K) != 0)
        return gp_error_set(err, GP_ENOTPD, NULL, "B is singular");
    gp_symmetrize_from_lower(b->Binv, K, K);
    /* beta = Lambda^{-1/2} (y~ - Vt^T mw) */
    cblas_dgemv(CblasColMajor, CblasTrans, (blasint)K, (blasint)M, -1.0, b->Vt, (blasint)K, b->mw,
                1, 1.0, b->beta, 1);
    for (size_t a = 0; a < M; a++)
        b->beta[a] /= sqrt(pr->lam[a]);
    /* G = (I - B^{-1}) V Lambda^{-1} + mw beta^T; Vt becomes V Lambda^{-1} */
    for (size_t a = 0; a < M; a++)
        cblas_dscal((blasint)K, 1.0 / sqrt(pr->lam[a]), b->Vt + a * K, 1);
    memcpy(b->G, b->Vt, K * M * sizeof *b->G);
    cblas_dsymm(CblasColMajor, CblasLeft, CblasLower, (blasint)K, (blasint)M, -1.0, b->Binv,
                (blasint)K, b->Vt, (blasint)K, 1.0, b->G, (blasint)K);
    cblas_dger(CblasColMajor, (blasint)K, (blasint)M, 1.0, b->mw, 1, b->beta, 1, b->G,
               (blasint)K);
    /* Sigma^{-1}_aa = (1 - |Lb^{-1} vt_a|^2) / lambda_a: vt_a = lambda_a^{1/2} (V Lambda^{-1})_a */
    for (size_t a = 0; a < M; a++)
        cblas_dscal((blasint)K, sqrt(pr->lam[a]), b->Vt + a * K, 1);
    gp_trsm_lower(b->Lb, K, K, 0, b->Vt, M, K);
    for (size_t a = 0; a < M; a++) {
        const double *u = b->Vt + a * K, *v = pr->V + a * K;
        double lam = pr->lam[a], sinv = (1.0 - gp_dot(u, u, K)) / lam;
        double t = pr->kd[a] - gp_dot(v, v, K);
        b->gkd[a] = -0.5 / lam;
        b->glam[a] = 0.5 * (b->beta[a] * b->beta[a] - sinv) + t / (2.0 * lam * lam);
    }
    return GP_OK;
}

static int sgpr_buf_alloc(sgpr_buf *b, size_t K, size_t M, gp_error *err)
{
    memset(b, 0, sizeof *b);
    b->Vt = gp_alloc_doubles(K * M, err);
    b->B = gp_alloc_doubles(K * K, err);
    b->Lb = gp_alloc_doubles(K * K, err);
    b->Binv = gp_alloc_doubles(K * K, err);
    b->G = gp_alloc_doubles(K * M, err);
    b->c = gp_alloc_doubles(K, err);
    b->mw = gp_alloc_doubles(K, err);
    b->beta = gp_alloc_doubles(M, err);
    b->gkd = gp_alloc_doubles(M, err);
    b->glam = gp_alloc_doubles(M, err);
    if (!b->Vt || !b->B || !b->Lb || !b->Binv || !b->G || !b->c || !b->mw || !b->beta ||
        !b->gkd || !b->glam) {
        sgpr_buf_free(b);
        return GP_ENOMEM;
    }
    return GP_OK;
}

static int post_fill(gp_coreg_sparse_post *post, const proj *pr, const double *mt,
                     const double *C, gp_error *err)
{
    size_t K = pr->K;
    post->m = pr->m;
    post->K = K;
    post->mt = gp_alloc_doubles(K, err);
    post->C = gp_alloc_doubles(K * K, err);
    if (!post->mt || !post->C) {
        gp_coreg_sparse_post_free(post);
        return GP_ENOMEM;
    }
    memcpy(post->mt, mt, K * sizeof *mt);
    memcpy(post->C, C, K * K * sizeof *C);
    return GP_OK;
}

int gp_coreg_sgpr_bound(const gp_coreg_sparse_at *at, const gp_coreg_sparse_data *data,
                        double *F, const gp_coreg_sparse_grad *grad,
                        gp_coreg_sparse_post *post, gp_error *err)
{
    proj pr;
    sgpr_buf b;
    *F = NAN;
    if (data->M == 0 || at->m == 0)
        return gp_error_set(err, GP_EINVAL, NULL, "the bound needs observed entries and Z");
    int rc = proj_alloc(&pr, at, data, err);
    if (rc)
        return rc;
    if ((rc = sgpr_buf_alloc(&b, pr.K, pr.M, err)) != GP_OK) {
        proj_free(&pr);
        return rc;
    }
    rc = proj_build(&pr, at, data, err);
    if (rc == GP_OK)
        rc = sgpr_value(&pr, data, &b, F, err);
    if (rc == GP_OK && (grad || post))
        rc = sgpr_sens(&pr, &b, err);
    if (rc == GP_OK && grad) {
        if (grad->noise) {
            noise_grad_sum(&pr, data, at->p, b.glam, grad->noise);
        }
        rc = chain_back(&pr, at, data, b.G, b.gkd, grad, err);
    }
    if (rc == GP_OK && post)
        rc = post_fill(post, &pr, b.mw, b.Binv, err);
    sgpr_buf_free(&b);
    proj_free(&pr);
    return rc;
}

/* ---- svgp ---- */

static double kl_of(const double *mq, const double *Lq, size_t K)
{
    double fro = 0.0, logd = 0.0;
    for (size_t c = 0; c < K; c++) {
        for (size_t r = c; r < K; r++)
            fro += Lq[r + c * K] * Lq[r + c * K];
        logd += log(Lq[c * K + c]);
    }
    return 0.5 * (fro + gp_dot(mq, mq, K) - (double)K) - logd;
}

int gp_coreg_svgp_elbo(const gp_coreg_sparse_at *at, const gp_coreg_sparse_data *data,
                       const double *mq, const double *Lq, double *F, double *kl,
                       const gp_coreg_sparse_grad *grad, gp_error *err)
{
    proj pr;
    *F = NAN;
    if (data->M == 0 || at->m == 0)
        return gp_error_set(err, GP_EINVAL, NULL, "the bound needs observed entries and Z");
    int rc = proj_alloc(&pr, at, data, err);
    if (rc)
        return rc;
    size_t K = pr.K, M = pr.M;
    double *LtV = gp_alloc_doubles(K * M, err), *mu = gp_alloc_doubles(M, err);
    double *gmu = gp_alloc_doubles(M, err), *gv = gp_alloc_doubles(M, err);
    double *glam = gp_alloc_doubles(M, err);
    if (!LtV || !mu || !gmu || !gv || !glam)
        rc = GP_ENOMEM;
    if (rc == GP_OK)
        rc = proj_build(&pr, at, data, err);
    double ell = 0.0, klv = 0.0, w = data->weight > 0.0 ? data->weight : 1.0;
    if (rc == GP_OK) {
        memcpy(LtV, pr.V, K * M * sizeof *LtV);
        cblas_dtrmm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, (blasint)K,
                    (blasint)M, 1.0, Lq, (blasint)K, LtV, (blasint)K);
        for (size_t a = 0; a < M; a++) {
            const double *v = pr.V + a * K, *lv = LtV + a * K;
            double lam = pr.lam[a];
            double var = pr.kd[a] - gp_dot(v, v, K) + gp_dot(lv, lv, K);
            mu[a] = gp_dot(v, mq, K);
            double r = data->y[a] - mu[a];
            ell += w * (-0.5 * (LOG_2PI + log(lam)) - (r * r + var) / (2.0 * lam));
            gmu[a] = w * r / lam;
            gv[a] = -0.5 * w / lam;
            glam[a] = w * (-0.5 / lam + (r * r + var) / (2.0 * lam * lam));
        }
        klv = kl_of(mq, Lq, K);
        *F = ell - klv;
        if (kl)
            *kl = klv;
        if (!isfinite(*F))
            rc = gp_error_set(err, GP_ENOTPD, NULL, "the bound is not finite");
    }
    if (rc == GP_OK && grad) {
        double *G = gp_alloc_doubles(K * M, err), *P = gp_alloc_doubles(K * K, err);
        rc = G && P ? GP_OK : GP_ENOMEM;
        if (rc == GP_OK) {
            /* G = 2 (Lq (Lq^T V) - V) diag(gv) + mq gmu^T */
            memcpy(G, LtV, K * M * sizeof *G);
            cblas_dtrmm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit,
                        (blasint)K, (blasint)M, 1.0, Lq, (blasint)K, G, (blasint)K);
            for (size_t a = 0; a < M; a++) {
                double *g = G + a * K;
                const double *v = pr.V + a * K;
                for (size_t r = 0; r < K; r++)
                    g[r] = 2.0 * gv[a] * (g[r] - v[r]) + mq[r] * gmu[a];
            }
            if (grad->mean) {
                memcpy(grad->mean, mq, K * sizeof *mq);
                cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)K, (blasint)M, 1.0, pr.V,
                            (blasint)K, gmu, 1, -1.0, grad->mean, 1);
            }
            if (grad->chol) {
                /* P = V diag(gv) V^T (in LtV's place, then 2 P Lq - Lq + diag(1/Lq_ii)) */
                for (size_t a = 0; a < M; a++)
                    for (size_t r = 0; r < K; r++)
                        LtV[a * K + r] = pr.V[a * K + r] * gv[a];
                cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (blasint)K, (blasint)K,
                            (blasint)M, 2.0, LtV, (blasint)K, pr.V, (blasint)K, 0.0, P,
                            (blasint)K);
                memcpy(grad->chol, Lq, K * K * sizeof *Lq);
                cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)K, (blasint)K,
                            (blasint)K, 1.0, P, (blasint)K, Lq, (blasint)K, -1.0, grad->chol,
                            (blasint)K);
                for (size_t c = 0; c < K; c++) {
                    grad->chol[c * K + c] += 1.0 / Lq[c * K + c];
                    for (size_t r = 0; r < c; r++)
                        grad->chol[r + c * K] = 0.0;
                }
            }
            if (grad->noise)
                noise_grad_sum(&pr, data, at->p, glam, grad->noise);
            rc = chain_back(&pr, at, data, G, gv, grad, err);
        }
        free(G);
        free(P);
    }
    free(LtV);
    free(mu);
    free(gmu);
    free(gv);
    free(glam);
    proj_free(&pr);
    return rc;
}

/* Lambda_new (K x K) and theta (K) of the step, from q's precision P = S^{-1}. */
static void natgrad_target(const proj *pr, const gp_coreg_sparse_data *d, double step, double *P,
                           double *theta, const double *mq)
{
    size_t K = pr->K, M = pr->M;
    double w = d->weight > 0.0 ? d->weight : 1.0;
    cblas_dsymv(CblasColMajor, CblasLower, (blasint)K, 1.0 - step, P, (blasint)K, mq, 1, 0.0,
                theta, 1);
    for (size_t i = 0; i < K * K; i++)
        P[i] *= 1.0 - step;
    for (size_t i = 0; i < K; i++)
        P[i * K + i] += step;
    for (size_t a = 0; a < M; a++) {
        const double *v = pr->V + a * K;
        double s = step * w / pr->lam[a];
        cblas_dsyr(CblasColMajor, CblasLower, (blasint)K, s, v, 1, P, (blasint)K);
        cblas_daxpy((blasint)K, s * d->y[a], v, 1, theta, 1);
    }
}

int gp_coreg_svgp_natgrad(const gp_coreg_sparse_at *at, const gp_coreg_sparse_data *data,
                          double step, double *mq, double *Lq, gp_error *err)
{
    proj pr;
    if (data->M == 0 || at->m == 0)
        return gp_error_set(err, GP_EINVAL, NULL, "the step needs observed entries and Z");
    int rc = proj_alloc(&pr, at, data, err);
    if (rc)
        return rc;
    size_t K = pr.K;
    double *P = gp_alloc_doubles(K * K, err), *theta = gp_alloc_doubles(K, err);
    rc = P && theta ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK)
        rc = proj_build(&pr, at, data, err);
    if (rc == GP_OK) {
        memcpy(P, Lq, K * K * sizeof *P); /* S^{-1} from S's factor */
        if (LAPACKE_dpotri(LAPACK_COL_MAJOR, 'L', (lapack_int)K, P, (lapack_int)K) != 0)
            rc = gp_error_set(err, GP_ENOTPD, NULL, "q's covariance is singular");
    }
    if (rc == GP_OK) {
        natgrad_target(&pr, data, step, P, theta, mq);
        if (LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)K, P, (lapack_int)K) != 0)
            rc = gp_error_set(err, GP_ENOTPD, NULL, "the new precision is not positive definite");
    }
    if (rc == GP_OK) { /* m = Lambda^{-1} theta, S = Lambda^{-1}, Lq = chol(S) */
        LAPACKE_dpotrs(LAPACK_COL_MAJOR, 'L', (lapack_int)K, 1, P, (lapack_int)K, theta,
                       (lapack_int)K);
        if (LAPACKE_dpotri(LAPACK_COL_MAJOR, 'L', (lapack_int)K, P, (lapack_int)K) != 0 ||
            LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)K, P, (lapack_int)K) != 0)
            rc = gp_error_set(err, GP_ENOTPD, NULL, "the new covariance is not positive definite");
    }
    if (rc == GP_OK) {
        gp_zero_upper(P, K, K);
        memcpy(Lq, P, K * K * sizeof *P);
        memcpy(mq, theta, K * sizeof *theta);
    }
    free(P);
    free(theta);
    proj_free(&pr);
    return rc;
}

void gp_coreg_sparse_post_free(gp_coreg_sparse_post *p)
{
    if (p == NULL)
        return;
    free(p->mt);
    free(p->C);
    p->mt = p->C = NULL;
}
