/* Titsias' collapsed bound and its gradient: see core/inducing/collapsed.h.
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
#include "core/inducing/collapsed.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/inducing/inducing.h"
#include "core/linalg/linalg.h"
#include "core/linalg/panels.h"
#include "core/model/mean.h"

#define LOG_2PI 1.8378770664093454836

/* ---- the M x M algebra (shared with core/inducing/collapsed_rows.c) ---- */

void gp_collapsed_mm_free(gp_collapsed_mm *a)
{
    free(a->L);
    free(a->B);
    free(a->Lb);
    free(a->Binv);
    free(a->T);
    free(a->vy);
    free(a->c);
    free(a->mw);
    free(a->h);
    memset(a, 0, sizeof *a);
}

int gp_collapsed_mm_alloc(gp_collapsed_mm *a, size_t m, int with_grad, gp_error *err)
{
    memset(a, 0, sizeof *a);
    a->m = m;
    size_t mm = 0;
    int rc = gp_checked_size(m, m, &mm, err);
    if (rc)
        return rc;
    a->L = gp_alloc_doubles(mm, err);
    a->B = gp_alloc_doubles(mm, err);
    a->Lb = gp_alloc_doubles(mm, err);
    a->Binv = gp_alloc_doubles(mm, err);
    a->vy = gp_alloc_doubles(m, err);
    a->c = gp_alloc_doubles(m, err);
    a->mw = gp_alloc_doubles(m, err);
    int ok = a->L && a->B && a->Lb && a->Binv && a->vy && a->c && a->mw;
    if (ok && with_grad) {
        a->T = gp_alloc_doubles(mm, err);
        a->h = gp_alloc_doubles(m, err);
        ok = a->T && a->h;
    }
    if (!ok) {
        gp_collapsed_mm_free(a);
        return GP_ENOMEM;
    }
    return GP_OK;
}

int gp_collapsed_factor_b(gp_collapsed_mm *a, gp_error *err)
{
    size_t m = a->m;
    for (size_t i = 0; i < m; i++)
        a->B[i * m + i] += 1.0;
    gp_symmetrize_from_lower(a->B, m, m);
    memcpy(a->Lb, a->B, m * m * sizeof *a->B);
    if (LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)m, a->Lb, (lapack_int)m) != 0)
        return gp_error_set(err, GP_ENOTPD, NULL, "I + V V^T / s2 is not positive definite");
    return GP_OK;
}

void gp_collapsed_solve_vy(gp_collapsed_mm *a, double s2)
{
    size_t m = a->m;
    for (size_t i = 0; i < m; i++)
        a->c[i] = a->vy[i] / s2;
    cblas_dtrsv(CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)m, a->Lb,
                (blasint)m, a->c, 1);
    memcpy(a->mw, a->c, m * sizeof *a->c);
    cblas_dtrsv(CblasColMajor, CblasLower, CblasTrans, CblasNonUnit, (blasint)m, a->Lb,
                (blasint)m, a->mw, 1);
}

double gp_collapsed_value(const gp_collapsed_mm *a, double n, double s2, double yy, double trace)
{
    size_t m = a->m;
    double cc = cblas_ddot((blasint)m, a->c, 1, a->c, 1);
    return -0.5 * n * (LOG_2PI + log(s2)) - 0.5 * gp_chol_logdet(a->Lb, m, m) -
           0.5 * (yy / s2 - cc) - trace / (2.0 * s2);
}

int gp_collapsed_invert_b(gp_collapsed_mm *a, gp_error *err)
{
    size_t m = a->m;
    memcpy(a->Binv, a->Lb, m * m * sizeof *a->Lb);
    if (LAPACKE_dpotri(LAPACK_COL_MAJOR, 'L', (lapack_int)m, a->Binv, (lapack_int)m) != 0)
        return gp_error_set(err, GP_ENOTPD, NULL, "B is singular");
    gp_symmetrize_from_lower(a->Binv, m, m);
    return GP_OK;
}

void gp_collapsed_sensitivity_globals(gp_collapsed_mm *a, double s2)
{
    size_t m = a->m;
    for (size_t j = 0; j < m; j++)
        for (size_t i = 0; i < m; i++)
            a->T[i + j * m] = ((i == j ? 1.0 : 0.0) - a->Binv[i + j * m]) / (2.0 * s2);
    gp_trsm_lower(a->L, m, m, 1, a->T, m, m);
    for (size_t i = 0; i < m; i++)
        a->h[i] = 0.5 * a->mw[i];
    cblas_dtrsv(CblasColMajor, CblasLower, CblasTrans, CblasNonUnit, (blasint)m, a->L, (blasint)m,
                a->h, 1);
}

void gp_collapsed_sensitivity_fu(const gp_collapsed_mm *a, double s2, const double *V,
                                 const double *y, size_t n, double *beta, double *Wuf)
{
    size_t m = a->m;
    for (size_t i = 0; i < n; i++)
        beta[i] = y[i];
    cblas_dgemv(CblasColMajor, CblasTrans, (blasint)m, (blasint)n, -1.0, V, (blasint)m, a->mw, 1,
                1.0, beta, 1);
    for (size_t i = 0; i < n; i++)
        beta[i] /= s2;
    gp_panel_gemm_nn(m, n, m, 2.0, a->T, m, V, m, 0.0, Wuf, m);
    cblas_dger(CblasColMajor, (blasint)m, (blasint)n, 2.0, a->h, 1, beta, 1, Wuf, (blasint)m);
}

void gp_collapsed_sensitivity_uu(gp_collapsed_mm *a)
{
    size_t m = a->m;
    double *S = a->T;
    for (size_t j = 0; j < m; j++)
        for (size_t i = 0; i < m; i++)
            S[i + j * m] = a->B[i + j * m] + a->Binv[i + j * m] + a->mw[i] * a->mw[j] -
                           (i == j ? 2.0 : 0.0);
    gp_trsm_lower(a->L, m, m, 1, S, m, m);
    cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)m,
                (blasint)m, -0.5, a->L, (blasint)m, S, (blasint)m);
    gp_symmetrize_average(S, m, m);
}

double gp_collapsed_noise_grad(const gp_collapsed_mm *a, double n, double s2, double bb,
                               double trace)
{
    size_t m = a->m;
    double tr_binv = 0.0;
    for (size_t i = 0; i < m; i++)
        tr_binv += a->Binv[i * m + i];
    double gs = -0.5 * ((n - (double)m + tr_binv) / s2 - bb) + trace / (2.0 * s2 * s2);
    return s2 * gs;
}

int gp_collapsed_fill_post(const gp_collapsed_mm *a, const double *Z, size_t d, double jitter,
                           gp_inducing_post *post, gp_error *err)
{
    size_t m = a->m;
    int rc = gp_inducing_post_alloc(post, m, d, err);
    if (rc)
        return rc;
    memcpy(post->Z, Z, d * m * sizeof *Z);
    memcpy(post->L, a->L, m * m * sizeof *a->L);
    memcpy(post->C, a->Binv, m * m * sizeof *a->Binv);
    memcpy(post->mt, a->mw, m * sizeof *a->mw);
    post->jitter = jitter;
    return GP_OK;
}

/* ---- the bound ---- */

/* Buffers of one evaluation: three m x n (V, and for the gradient Kuf kept
 * from before the solve and the sensitivity to it) and the M x M part. */
typedef struct sgpr_work {
    size_t n, m;
    gp_collapsed_mm mm;
    double *V, *Kuf, *Wuf, *beta;
    /* Known per-point noise r (NULL: none; then the rest is unused): the
     * problem is whitened by the noise, lambda_i = s2 + r_i, V's columns and
     * y times d_i = lambda_i^{-1/2} (ys), so the homoscedastic formulas hold
     * with unit noise (header of collapsed.h). dsq = d_i^2, vv = |V~_i|^2. */
    const double *r;
    double *ys, *dsq, *vv;
    /* A mean's basis H (n x p; p 0: none), profiled out of the bound: y is
     * replaced by the residual y - H beta (res; whitened in ys with r) at
     * the GLS estimate beta under Q + Lambda (mean_beta, p). yeff: the
     * targets the gradient sees (y, res or ys). */
    const double *H;
    size_t p;
    double *mean_beta, *res, *hw;
    const double *yeff;
} sgpr_work;

static void work_free(sgpr_work *w)
{
    gp_collapsed_mm_free(&w->mm);
    free(w->V);
    free(w->Kuf);
    free(w->Wuf);
    free(w->beta);
    free(w->ys);
    free(w->dsq);
    free(w->vv);
    free(w->res);
    free(w->hw);
}

static int work_alloc(sgpr_work *w, size_t n, size_t m, int with_grad, gp_error *err)
{
    memset(w, 0, sizeof *w);
    w->n = n;
    w->m = m;
    size_t mn = 0;
    int rc = gp_checked_size(m, n, &mn, err);
    if (rc == GP_OK)
        rc = gp_collapsed_mm_alloc(&w->mm, m, with_grad, err);
    if (rc)
        return rc;
    w->V = gp_alloc_doubles(mn, err);
    int ok = w->V != NULL;
    if (ok && with_grad) {
        w->Kuf = gp_alloc_doubles(mn, err);
        w->Wuf = gp_alloc_doubles(mn, err);
        w->beta = gp_alloc_doubles(n, err);
        ok = w->Kuf && w->Wuf && w->beta;
    }
    if (!ok) {
        work_free(w);
        return GP_ENOMEM;
    }
    return GP_OK;
}

/* Known per-point noise: lambda_i = s2 + r_i, d_i^2 = 1 / lambda_i, V's
 * columns times d_i, ys = d y, vv_i = |d_i v_i|^2. GP_EINVAL when a
 * lambda_i is not positive (a fixed s2 of 0 and a row of noise 0: the
 * bound's trace term divides by it). */
static int whiten_by_noise(sgpr_work *w, double s2, const double *y, gp_error *err)
{
    size_t n = w->n, m = w->m;
    if (!w->ys && (!(w->ys = gp_alloc_doubles(n, err)) || !(w->dsq = gp_alloc_doubles(n, err)) ||
                   !(w->vv = gp_alloc_doubles(n, err))))
        return GP_ENOMEM;
    for (size_t i = 0; i < n; i++) {
        double lam = s2 + w->r[i];
        if (!(lam > 0.0 && isfinite(lam)))
            return gp_error_set(err, GP_EINVAL, "noise.per_point",
                                "the noise of row %zu is 0: the sparse bound needs every row's "
                                "noise (homoscedastic plus known) positive", i);
        double di = 1.0 / sqrt(lam);
        w->dsq[i] = 1.0 / lam;
        w->ys[i] = di * y[i];
        cblas_dscal((blasint)m, di, w->V + i * m, 1);
        w->vv[i] = gp_dot(w->V + i * m, w->V + i * m, m);
    }
    return GP_OK;
}

/* The bound's noise and trace terms with per-point noise (unit noise after
 * whitening): -sum log(2 pi lambda_i) / 2 - sum t_i / (2 lambda_i), with
 * t_i = k_ii - |v_i|^2 = k - vv_i / d_i^2; terms->trace = sum t_i. */
static void noise_terms(const sgpr_work *w, double kii, gp_sgpr_terms *terms)
{
    double logdet = 0.0, trace = 0.0, wtrace = 0.0;
    for (size_t i = 0; i < w->n; i++) {
        double ti = kii - w->vv[i] / w->dsq[i];
        logdet -= log(w->dsq[i]);
        trace += ti;
        wtrace += ti * w->dsq[i];
    }
    terms->trace = trace;
    terms->bound = -0.5 * ((double)w->n * LOG_2PI + logdet) - 0.5 * wtrace;
}

/* The mean profiled out under Sigma = Q + s2 I on the (whitened) problem:
 * Woodbury gives u^T Sigma^{-1} v = u.v / s2 - (Lb^{-1} V u / s2).(Lb^{-1} V v / s2),
 * so with Ch = Lb^{-1} V H / s2 and cy = Lb^{-1} V y / s2 the normal
 * equations are (H^T H / s2 - Ch^T Ch) beta = H^T y / s2 - Ch^T cy:
 * O(n m p) on the bound's own factors. y (n) becomes y - H beta in place.
 * Rows are whitened (w->r) by d_i: H's rows then too, and s2 = 1. */
static int profile_mean(sgpr_work *w, double s2, double *y, gp_error *err)
{
    size_t n = w->n, m = w->m, p = w->p, count = 0;
    /* Hw (n x p), Ch (m x p), G (p x p), b (p), cy (m) */
    if (gp_checked_size(n + m + p + 1, p, &count, err) || count + m < count)
        return GP_ENOMEM;
    if (!w->hw && !(w->hw = gp_alloc_doubles(count + m, err)))
        return GP_ENOMEM;
    double *Hw = w->hw, *Ch = Hw + n * p, *G = Ch + m * p, *b = G + p * p, *cy = b + p;
    memcpy(Hw, w->H, n * p * sizeof *Hw);
    for (size_t j = 0; w->r && j < p; j++)
        for (size_t i = 0; i < n; i++)
            Hw[j * n + i] *= sqrt(w->dsq[i]);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)m, (blasint)p, (blasint)n,
                1.0 / s2, w->V, (blasint)m, Hw, (blasint)n, 0.0, Ch, (blasint)m);
    cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)m, (blasint)n, 1.0 / s2, w->V, (blasint)m,
                y, 1, 0.0, cy, 1);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)m,
                (blasint)p, 1.0, w->mm.Lb, (blasint)m, Ch, (blasint)m);
    cblas_dtrsv(CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)m, w->mm.Lb,
                (blasint)m, cy, 1);
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (blasint)p, (blasint)p, (blasint)n,
                1.0 / s2, Hw, (blasint)n, Hw, (blasint)n, 0.0, G, (blasint)p);
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (blasint)p, (blasint)p, (blasint)m,
                -1.0, Ch, (blasint)m, Ch, (blasint)m, 1.0, G, (blasint)p);
    cblas_dgemv(CblasColMajor, CblasTrans, (blasint)n, (blasint)p, 1.0 / s2, Hw, (blasint)n, y, 1,
                0.0, b, 1);
    cblas_dgemv(CblasColMajor, CblasTrans, (blasint)m, (blasint)p, -1.0, Ch, (blasint)m, cy, 1,
                1.0, b, 1);
    int rc = gp_mean_solve_normal(G, b, p, err);
    if (rc)
        return rc;
    memcpy(w->mean_beta, b, p * sizeof *b);
    cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)n, (blasint)p, -1.0, Hw, (blasint)n, b, 1,
                1.0, y, 1);
    return GP_OK;
}

/* L, V = L^{-1} Kuf, B = I + V V^T / s2 (full), Lb = chol(B), and the value
 * of F into terms. *jitter receives Kuu's. */
static int bound_value(const gp_kernel *k, double s2, const double *X, const double *y,
                       const double *Z, sgpr_work *w, double *jitter, gp_sgpr_terms *terms,
                       gp_error *err)
{
    size_t n = w->n, m = w->m;
    gp_collapsed_mm *a = &w->mm;
    int rc = gp_inducing_kuu_factor(k, Z, m, a->L, jitter, err);
    if (rc)
        return rc == GP_EDATA ? rc : GP_ENOTPD;
    gp_kernel_cross(k, Z, m, X, n, w->V, m);
    if (w->Kuf) /* the gradient's contraction reuses the values */
        memcpy(w->Kuf, w->V, m * n * sizeof *w->V);
    gp_panel_trsm_lower(a->L, m, m, 0, w->V, n, m);
    if (w->r) {
        if ((rc = whiten_by_noise(w, s2, y, err)) != GP_OK)
            return rc;
        y = w->ys;
        s2 = 1.0;
    }
    gp_panel_syrk_lower(0, m, n, 1.0 / s2, w->V, m, a->B, m);
    if ((rc = gp_collapsed_factor_b(a, err)) != GP_OK)
        return rc;
    w->yeff = y;
    if (w->p) {
        double *res = w->r ? w->ys : w->res;
        if (res == NULL && (res = w->res = gp_alloc_doubles(n, err)) == NULL)
            return GP_ENOMEM;
        if (res != y)
            memcpy(res, y, n * sizeof *res);
        if ((rc = profile_mean(w, s2, res, err)) != GP_OK)
            return rc;
        y = w->yeff = res;
    }
    cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)m, (blasint)n, 1.0, w->V, (blasint)m, y, 1,
                0.0, a->vy, 1);
    gp_collapsed_solve_vy(a, s2);
    double trvv = cblas_ddot((blasint)(m * n), w->V, 1, w->V, 1);
    double kdiag = (double)n * gp_kernel_diag(k, X); /* stationary: one point serves */
    double yy = cblas_ddot((blasint)n, y, 1, y, 1);
    if (w->r) {
        double cc = cblas_ddot((blasint)m, a->c, 1, a->c, 1);
        noise_terms(w, gp_kernel_diag(k, X), terms);
        terms->bound -= 0.5 * gp_chol_logdet(a->Lb, m, m) + 0.5 * (yy - cc);
    } else {
        terms->trace = kdiag - trvv;
        terms->bound = gp_collapsed_value(a, (double)n, s2, yy, terms->trace);
    }
    if (!isfinite(terms->bound))
        return gp_error_set(err, GP_ENOTPD, NULL, "the bound is not finite");
    return GP_OK;
}

static int bound_gradient(const gp_kernel *k, double s2, const double *X, const double *y,
                          const double *Z, const gp_sgpr_terms *terms, sgpr_work *w,
                          double *grad, double *gz, gp_error *err)
{
    size_t n = w->n, m = w->m, np = gp_kernel_n_params(k);
    gp_collapsed_mm *a = &w->mm;
    gp_collapsed_sensitivity_globals(a, s2);
    gp_collapsed_sensitivity_fu(a, s2, w->V, y, n, w->beta, w->Wuf);
    gp_collapsed_sensitivity_uu(a);
    int rc = gp_inducing_contract(k, X, n, Z, m, w->Kuf, w->Wuf, a->T, -1.0 / (2.0 * s2), grad,
                                  gz, err);
    if (rc)
        return rc;
    double bb = cblas_ddot((blasint)n, w->beta, 1, w->beta, 1);
    grad[np] = gp_collapsed_noise_grad(a, (double)n, s2, bb, terms->trace);
    return GP_OK;
}

/* The gradient with known per-point noise, on the whitened problem (unit
 * noise, ys, V~): the sensitivities of gp_collapsed_sensitivity_fu/uu hold
 * for V~, and V~ = V D gives dF/dKuf = dF/dKuf~ D (columns times d_i); the
 * diagonal weight is -1 / (2 lambda_i) per row. The noise: dF/ds2 = sum_i
 * dF/dlambda_i
 *   = (beta.beta - tr Sigma^{-1}) / 2 + sum_i t_i / (2 lambda_i^2),
 * beta_i = d_i beta~_i and Sigma^{-1}_ii = d_i^2 (1 - |Lb^{-1} v~_i|^2). */
static int noise_gradient(const gp_kernel *k, double s2, const double *X, const double *Z,
                          sgpr_work *w, double *grad, double *gz, gp_error *err)
{
    size_t n = w->n, m = w->m, np = gp_kernel_n_params(k);
    gp_collapsed_mm *a = &w->mm;
    double *u2 = gp_alloc_doubles(n, err);
    if (u2 == NULL)
        return GP_ENOMEM;
    memcpy(w->Wuf, w->V, m * n * sizeof *w->V); /* scratch until the sensitivity */
    gp_trsm_lower(a->Lb, m, m, 0, w->Wuf, n, m);
    for (size_t i = 0; i < n; i++)
        u2[i] = gp_dot(w->Wuf + i * m, w->Wuf + i * m, m);
    gp_collapsed_sensitivity_globals(a, 1.0);
    gp_collapsed_sensitivity_fu(a, 1.0, w->V, w->ys, n, w->beta, w->Wuf);
    double sum_dsq = 0.0, gs = 0.0, kii = gp_kernel_diag(k, X);
    for (size_t i = 0; i < n; i++) {
        double dsq = w->dsq[i], di = sqrt(dsq), ti = kii - w->vv[i] / dsq;
        cblas_dscal((blasint)m, di, w->Wuf + i * m, 1);
        sum_dsq += dsq;
        gs += 0.5 * dsq * (w->beta[i] * w->beta[i] - 1.0 + u2[i]) + 0.5 * ti * dsq * dsq;
    }
    free(u2);
    gp_collapsed_sensitivity_uu(a);
    int rc = gp_inducing_contract(k, X, n, Z, m, w->Kuf, w->Wuf, a->T,
                                  -sum_dsq / (2.0 * (double)n), grad, gz, err);
    if (rc == GP_OK)
        grad[np] = s2 * gs;
    return rc;
}

/* gp_sgpr_bound on buffers w of the right sizes (with the gradient's when
 * grad is asked for). */
static int bound_in(sgpr_work *w, const gp_kernel *k, double s2, const double *r,
                    const double *X, size_t d, const double *y, const double *Z,
                    gp_sgpr_terms *terms, double *grad, double *gz, gp_inducing_post *post,
                    gp_error *err)
{
    w->r = r;
    double jitter = 0.0;
    int rc = bound_value(k, s2, X, y, Z, w, &jitter, terms, err);
    if (rc == GP_OK && (grad || post))
        rc = gp_collapsed_invert_b(&w->mm, err);
    if (rc == GP_OK && grad)
        rc = w->r ? noise_gradient(k, s2, X, Z, w, grad, gz, err)
                  : bound_gradient(k, s2, X, w->yeff, Z, terms, w, grad, gz, err);
    if (rc == GP_OK && post)
        rc = gp_collapsed_fill_post(&w->mm, Z, d, jitter, post, err);
    return rc;
}

int gp_sgpr_bound(const gp_kernel *k, double s2, const double *X, size_t n, size_t d,
                  const double *y, const double *Z, size_t m, gp_sgpr_terms *terms,
                  double *grad, double *gz, gp_inducing_post *post, gp_error *err)
{
    return gp_sgpr_bound_noise(k, s2, NULL, X, n, d, y, Z, m, terms, grad, gz, post, err);
}

/* The bound's precondition: some data, and a positive noise (s2 > 0, or
 * s2 >= 0 with known per-point noise, whose rows whiten_by_noise checks). */
static int bound_args_ok(size_t n, size_t m, double s2, const double *r)
{
    return n > 0 && m > 0 && (s2 > 0.0 || (r && s2 == 0.0));
}

int gp_sgpr_bound_noise(const gp_kernel *k, double s2, const double *r, const double *X,
                        size_t n, size_t d, const double *y, const double *Z, size_t m,
                        gp_sgpr_terms *terms, double *grad, double *gz,
                        struct gp_inducing_post *post, gp_error *err)
{
    return gp_sgpr_bound_mean(k, s2, r, NULL, 0, NULL, X, n, d, y, Z, m, terms, grad, gz, post,
                              err);
}

int gp_sgpr_bound_mean(const gp_kernel *k, double s2, const double *r, const double *H,
                       size_t p, double *beta, const double *X, size_t n, size_t d,
                       const double *y, const double *Z, size_t m, gp_sgpr_terms *terms,
                       double *grad, double *gz, struct gp_inducing_post *post, gp_error *err)
{
    if (!bound_args_ok(n, m, s2, r))
        return gp_error_set(err, GP_EINVAL, NULL, "sgpr bound needs n, m >= 1 and s2 > 0");
    sgpr_work w;
    int rc = work_alloc(&w, n, m, grad != NULL, err);
    w.H = H;
    w.p = H ? p : 0;
    w.mean_beta = beta;
    if (rc == GP_OK)
        rc = bound_in(&w, k, s2, r, X, d, y, Z, terms, grad, gz, post, err);
    work_free(&w);
    return rc;
}

struct gp_sgpr_scratch {
    sgpr_work w; /* with the gradient's buffers */
};

void gp_collapsed_data_release(gp_collapsed_data *data)
{
    if (data->scratch == NULL)
        return;
    work_free(&data->scratch->w);
    free(data->scratch);
    data->scratch = NULL;
}

/* The data's kept buffers for m inducing points, allocated (or replaced,
 * for another m) here; NULL without memory. */
static sgpr_work *kept_work(gp_collapsed_data *data, size_t m, gp_error *err)
{
    if (data->scratch && data->scratch->w.m == m)
        return &data->scratch->w;
    gp_collapsed_data_release(data);
    struct gp_sgpr_scratch *s = malloc(sizeof *s);
    if (s == NULL || work_alloc(&s->w, data->n, m, 1, err) != GP_OK) {
        free(s);
        return NULL;
    }
    data->scratch = s;
    return &s->w;
}

int gp_collapsed_objective(void *ctx, const gp_kernel *k, double s2, const double *Z, size_t m,
                           double *f, double *grad, double *gz)
{
    gp_collapsed_data *data = ctx;
    gp_sgpr_terms terms = {NAN, NAN};
    gp_error err;
    int rc;
    if (!bound_args_ok(data->n, m, s2, data->r)) {
        rc = gp_error_set(&err, GP_EINVAL, NULL, "sgpr bound needs n, m >= 1 and s2 > 0");
    } else {
        sgpr_work *w = kept_work(data, m, &err);
        if (w) {
            w->H = data->H;
            w->p = data->H ? data->p : 0;
            w->mean_beta = data->beta;
        }
        rc = w ? bound_in(w, k, s2, data->r, data->X, data->d, data->y, Z, &terms, grad, gz, NULL,
                          &err)
               : GP_ENOMEM;
    }
    *f = terms.bound;
    return rc;
}
