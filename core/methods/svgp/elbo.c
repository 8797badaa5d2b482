/* The ELBO of method "svgp" and its natural-gradient steps (core/methods/svgp/svgp.h).
 *
 * Derivation of the gradient (docs/methods/sparse-variational-and-pls.md
 * §1.1(b), whitened). Write F = sum_n E_n(mu_n, var_n) - KL and let g_mu,
 * g_v be dE_n/dmu_n, dE_n/dvar_n. With A = L^{-1} Kuf,
 *   mu = A^T m,   var_n = k_nn - a_n.a_n + a_n^T S a_n,
 * so dF/dA = G = m g_mu^T + 2 (S - I) A diag(g_v) and, the KL not depending
 * on A, dF/dm = A g_mu - m and dF/dS = D - (I - S^{-1}) / 2 with D = A
 * diag(g_v) A^T; S = Lq Lq^T gives dF/dLq = 2 dF/dS Lq, whose lower triangle
 * is 2 D Lq - Lq + diag(1/Lq_ii) (S^{-1} Lq = Lq^{-T} is upper triangular).
 * A = L^{-1} Kuf: dA = L^{-1} dKuf - L^{-1} dL A, hence dF/dKuf = L^{-T} G and
 * dF/dL = -L^{-T} G A^T. Through the Cholesky factor (Murray 2016), with
 * Phi(P) the lower triangle of P with the diagonal halved, a function of L
 * changes by tr(W dKuu) for
 *   W = L^{-T} sym(Phi(L^T dF/dL)) L^{-1} = L^{-T} sym(Phi(-G A^T)) L^{-1},
 * where sym(Y) = (Y + Y^T) / 2: the factor L cancels and no M x M inverse is
 * formed. The jitter's share is added by gp_inducing_contract.
 *
 * Natural gradients (Salimbeni, Eleftheriadis & Hensman 2018): in theta1 =
 * S^{-1} m, theta2 = -S^{-1}/2, the natural gradient is the gradient in the
 * expectation parameters (m, S + m m^T): dF/dm - 2 dF/dS m and dF/dS. A step
 * gamma gives
 *   S^{-1} <- (1 - gamma) S^{-1} + gamma (I - 2 D)
 *   S^{-1} m <- (1 - gamma) S^{-1} m + gamma (A g_mu - 2 D m)
 * and for a Gaussian likelihood (g_mu = (y - mu) / s2, g_v = -1 / (2 s2)) with
 * gamma = 1 the new q is B^{-1} A y / s2, B^{-1} whatever the old one was:
 * sgpr's optimum (§5.4). */
#include "core/methods/svgp/elbo.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/methods/svgp/internal.h"

/* ---- one evaluation over a block of points ---- */

void svgp_work_free(svgp_work *w)
{
    free(w->L);
    free(w->D);
    free(w->T);
    free(w->Kuf);
    free(w->A);
    free(w->W);
    free(w->mu);
    free(w->var);
    free(w->gmu);
    free(w->gv);
    free(w->agmu);
    free(w->G);
    memset(w, 0, sizeof *w);
}

int svgp_work_alloc(svgp_work *w, size_t m, size_t cap, gp_error *err)
{
    return svgp_work_alloc_latents(w, m, cap, 1, err);
}

int svgp_work_alloc_latents(svgp_work *w, size_t m, size_t cap, size_t C, gp_error *err)
{
    memset(w, 0, sizeof *w);
    size_t mn = 0, mm = 0, mmc = 0, capc = 0;
    int rc = gp_checked_size(m, cap, &mn, err);
    if (rc == GP_OK)
        rc = gp_checked_size(m, m, &mm, err);
    if (rc == GP_OK)
        rc = gp_checked_size(mm, C, &mmc, err);
    if (rc == GP_OK)
        rc = gp_checked_size(cap, C, &capc, err);
    if (rc)
        return rc;
    w->cap = cap;
    w->C = C;
    w->L = gp_alloc_doubles(mm, err);
    w->D = gp_alloc_doubles(mmc, err);
    w->T = gp_alloc_doubles(mm, err);
    w->Kuf = gp_alloc_doubles(mn, err);
    w->A = gp_alloc_doubles(mn, err);
    w->W = gp_alloc_doubles(mn, err);
    w->G = C > 1 ? gp_alloc_doubles(mn, err) : NULL;
    w->mu = gp_alloc_doubles(capc, err);
    w->var = gp_alloc_doubles(capc, err);
    w->gmu = gp_alloc_doubles(capc, err);
    w->gv = gp_alloc_doubles(capc, err);
    w->agmu = gp_alloc_doubles(m * C, err);
    if (!w->L || !w->D || !w->T || !w->Kuf || !w->A || !w->W || !w->mu || !w->var || !w->gmu ||
        !w->gv || !w->agmu || (C > 1 && !w->G)) {
        svgp_work_free(w);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    return GP_OK;
}

/* The latents of an evaluation (a zeroed C is one). */
static size_t latents(const svgp_eval *e)
{
    return e->C > 1 ? e->C : 1;
}

/* w->L = chol(Kuu + jitter I). */
int svgp_factor_kuu(const svgp_eval *e, svgp_work *w, gp_error *err)
{
    int rc = gp_inducing_kuu_factor(e->k, e->Z, e->m, w->L, &w->jitter, err);
    if (rc)
        return rc == GP_EDATA ? rc : GP_ENOTPD;
    return GP_OK;
}

/* Kuf, A = L^{-1} Kuf and the marginals (mu, var) of every latent at the nb
 * points X (latent c at c cap); off: the mean function's values there (NULL:
 * zero mean). A is shared by the latents; each has its own q. */
void svgp_block_moments(const svgp_eval *e, const double *X, const double *off, size_t nb,
                        svgp_work *w)
{
    size_t m = e->m;
    gp_kernel_cross(e->k, e->Z, m, X, nb, w->Kuf, m);
    memcpy(w->A, w->Kuf, m * nb * sizeof *w->A);
    gp_trsm_lower(w->L, m, m, 0, w->A, nb, m);
    double kd = gp_kernel_diag(e->k, X); /* stationary: one point serves */
    for (size_t c = 0; c < latents(e); c++) {
        double *mu = w->mu + c * w->cap, *var = w->var + c * w->cap;
        cblas_dgemv(CblasColMajor, CblasTrans, (blasint)m, (blasint)nb, 1.0, w->A, (blasint)m,
                    e->mq + c * m, 1, 0.0, mu, 1);
        for (size_t i = 0; off && i < nb; i++)
            mu[i] += off[i];
        memcpy(w->W, w->A, m * nb * sizeof *w->W);
        cblas_dtrmm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, (blasint)m,
                    (blasint)nb, 1.0, e->Lq + c * m * m, (blasint)m, w->W, (blasint)m);
        for (size_t i = 0; i < nb; i++) {
            const double *a = w->A + i * m, *p = w->W + i * m;
            double aa = cblas_ddot((blasint)m, a, 1, a, 1), pp = cblas_ddot((blasint)m, p, 1, p, 1);
            /* Kff - Q is PSD in exact arithmetic (the jittered Kuu): clamp its rounding. */
            var[i] = fmax(kd - aa, 0.0) + pp;
        }
    }
}

/* Softmax: each point's C latents at once (gp_softmax_expected); the
 * derivatives scattered back to the latents' columns. */
static double block_expect_softmax(const svgp_eval *e, const double *y, size_t nb, double scale,
                                   svgp_work *w)
{
    size_t C = e->C, cap = w->cap;
    double mu[GP_SOFTMAX_MAX_CLASSES], var[GP_SOFTMAX_MAX_CLASSES];
    double dm[GP_SOFTMAX_MAX_CLASSES], dv[GP_SOFTMAX_MAX_CLASSES], sum = 0.0;
    for (size_t i = 0; i < nb; i++) {
        for (size_t c = 0; c < C; c++) {
            mu[c] = w->mu[c * cap + i];
            var[c] = w->var[c * cap + i];
        }
        sum += gp_softmax_expected(e->mc, (size_t)y[i], mu, var, dm, dv);
        for (size_t c = 0; c < C; c++) {
            w->gmu[c * cap + i] = scale * dm[c];
            w->gv[c * cap + i] = scale * dv[c];
        }
    }
    return scale * sum;
}

/* Gaussian with known per-point noise r: row i has variance lam = s2 + r_i,
 * so E_i is the homoscedastic term at lam, and d/dlog s2 = (s2 / lam) dE_i/dlog lam. */
static double block_expect_noise(const svgp_eval *e, const double *y, const double *r,
                                 size_t nb, double scale, svgp_work *w, double *dlog_s2)
{
    double sum = 0.0, ds = 0.0, s2 = e->lik->noise;
    gp_lik row = *e->lik;
    for (size_t i = 0; i < nb; i++) {
        double dm = 0.0, dv = 0.0, lam = s2 + r[i];
        row.noise = lam;
        sum += gp_lik_expected(&row, e->q, y[i], w->mu[i], w->var[i], &dm, &dv);
        w->gmu[i] = scale * dm;
        w->gv[i] = scale * dv;
        double res = (y[i] - w->mu[i]) * (y[i] - w->mu[i]) + w->var[i];
        ds += (s2 / lam) * (-0.5 + res / (2.0 * lam));
    }
    *dlog_s2 = scale * ds;
    return scale * sum;
}

/* scale * sum_n E log p(y_n | f_n) over the block; gmu, gv get scale times
 * the derivatives, *dlog_s2 the derivative in log s2 (gaussian, else 0).
 * r: the block's known noise variances (gaussian only; NULL: none). */
double svgp_block_expect(const svgp_eval *e, const double *y, const double *r, size_t nb,
                         double scale, svgp_work *w, double *dlog_s2)
{
    int gauss = e->lik->type == GP_LIK_GAUSSIAN;
    *dlog_s2 = 0.0;
    if (e->lik->type == GP_LIK_SOFTMAX)
        return block_expect_softmax(e, y, nb, scale, w);
    if (gauss && r)
        return block_expect_noise(e, y, r, nb, scale, w, dlog_s2);
    double sum = 0.0, ds = 0.0;
    for (size_t i = 0; i < nb; i++) {
        double dm = 0.0, dv = 0.0;
        sum += gp_lik_expected(e->lik, e->q, y[i], w->mu[i], w->var[i], &dm, &dv);
        w->gmu[i] = scale * dm;
        w->gv[i] = scale * dv;
        if (gauss) { /* E = -log(2 pi s2)/2 - r/(2 s2), r = (y - mu)^2 + var */
            double r2 = (y[i] - w->mu[i]) * (y[i] - w->mu[i]) + w->var[i];
            ds += -0.5 + r2 / (2.0 * e->lik->noise);
        }
    }
    *dlog_s2 = scale * ds;
    return scale * sum;
}

/* Latent c's part of the sensitivities: D_c = A diag(gv_c) A^T, agmu_c =
 * A gmu_c and (with kernel_sens) its dF/dA, G_c = m_c gmu_c^T + 2 (S_c - I) A
 * diag(gv_c), left in W. */
static void latent_sens(const svgp_eval *e, size_t c, size_t nb, int kernel_sens, svgp_work *w)
{
    size_t m = e->m;
    blasint bm = (blasint)m, bn = (blasint)nb;
    const double *gv = w->gv + c * w->cap, *gmu = w->gmu + c * w->cap;
    const double *mq = e->mq + c * m, *Lq = e->Lq + c * m * m;
    double *D = w->D + c * m * m;
    for (size_t i = 0; i < nb; i++)
        for (size_t j = 0; j < m; j++)
            w->W[j + i * m] = w->A[j + i * m] * gv[i];
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, bm, bm, bn, 1.0, w->W, bm, w->A, bm, 0.0,
                D, bm);
    gp_symmetrize_average(D, m, m);
    cblas_dgemv(CblasColMajor, CblasNoTrans, bm, bn, 1.0, w->A, bm, gmu, 1, 0.0, w->agmu + c * m,
                1);
    if (!kernel_sens)
        return;
    /* S A diag(gv) = Lq (Lq^T W) */
    cblas_dtrmm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, bm, bn, 1.0, Lq,
                bm, w->W, bm);
    cblas_dtrmm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, bm, bn, 1.0, Lq,
                bm, w->W, bm);
    for (size_t i = 0; i < nb; i++)
        for (size_t j = 0; j < m; j++)
            w->W[j + i * m] = 2.0 * (w->W[j + i * m] - gv[i] * w->A[j + i * m]) + mq[j] * gmu[i];
}

/* From gmu, gv: every latent's D and agmu, and (with kernel_sens) W = dF/dKuf
 * = L^{-T} G, G = sum_c G_c, and T = dF/dKuu (see the derivation above: the
 * latents share A, so their dF/dA add up before the chain rule). */
void svgp_block_sens(const svgp_eval *e, size_t nb, int kernel_sens, svgp_work *w)
{
    size_t m = e->m, C = latents(e);
    blasint bm = (blasint)m, bn = (blasint)nb;
    for (size_t c = 0; c < C; c++) {
        latent_sens(e, c, nb, kernel_sens, w);
        if (kernel_sens && C > 1) {
            if (c == 0)
                memcpy(w->G, w->W, m * nb * sizeof *w->G);
            else
                cblas_daxpy((blasint)(m * nb), 1.0, w->W, 1, w->G, 1);
        }
    }
    if (!kernel_sens)
        return;
    if (C > 1)
        memcpy(w->W, w->G, m * nb * sizeof *w->W);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, bm, bm, bn, 1.0, w->W, bm, w->A, bm, 0.0,
                w->T, bm);
    gp_trsm_lower(w->L, m, m, 1, w->W, nb, m);
    /* sym(Phi(-G A^T)): the lower triangle of -T/2 mirrored. */
    for (size_t j = 0; j < m; j++)
        for (size_t i = j; i < m; i++) {
            double v = -0.5 * w->T[i + j * m];
            w->T[i + j * m] = v;
            w->T[j + i * m] = v;
        }
    gp_trsm_lower(w->L, m, m, 1, w->T, m, m);
    cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, bm, bm, 1.0,
                w->L, bm, w->T, bm);
    gp_symmetrize_average(w->T, m, m);
}

/* After svgp_block_sens with kernel_sens over the nb points X: dF/dtheta then
 * dlog_s2 into theta (gp_kernel_n_params + 1) and dF/dZ into gz (may be NULL). */
int svgp_kernel_grad(const svgp_eval *e, const double *X, size_t nb, const svgp_work *w,
                     double dlog_s2, double *theta, double *gz, gp_error *err)
{
    double wdiag = 0.0;
    for (size_t c = 0; c < latents(e); c++)
        for (size_t i = 0; i < nb; i++)
            wdiag += w->gv[c * w->cap + i];
    int rc = gp_inducing_contract(e->k, X, nb, e->Z, e->m, w->Kuf, w->W, w->T,
                                  wdiag / (double)nb, theta, gz, err);
    if (rc == GP_OK)
        theta[gp_kernel_n_params(e->k)] = dlog_s2;
    return rc;
}

double svgp_kl_value(const double *mq, const double *Lq, size_t m)
{
    double fro = 0.0, logdiag = 0.0;
    for (size_t j = 0; j < m; j++) {
        for (size_t i = j; i < m; i++)
            fro += Lq[i + j * m] * Lq[i + j * m];
        logdiag += log(Lq[j + j * m]);
    }
    return 0.5 * (fro + cblas_ddot((blasint)m, mq, 1, mq, 1) - (double)m) - logdiag;
}

double svgp_kl_sum(const double *mq, const double *Lq, size_t m, size_t C)
{
    double kl = 0.0;
    for (size_t c = 0; c < (C > 1 ? C : 1); c++)
        kl += svgp_kl_value(mq + c * m, Lq + c * m * m, m);
    return kl;
}

/* Latent c: dF/dm = agmu - m into gmean and the lower triangle of dF/dLq =
 * 2 D Lq - Lq + diag(1/Lq_ii) into gchol (either may be NULL). */
static void latent_q_gradient(size_t m, const double *mq, const double *Lq, const double *D,
                              const double *agmu, double *gmean, double *gchol)
{
    for (size_t j = 0; gmean && j < m; j++)
        gmean[j] = agmu[j] - mq[j];
    if (gchol == NULL)
        return;
    memcpy(gchol, D, m * m * sizeof *gchol);
    cblas_dtrmm(CblasColMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)m,
                (blasint)m, 2.0, Lq, (blasint)m, gchol, (blasint)m);
    for (size_t j = 0; j < m; j++) {
        for (size_t i = 0; i < j; i++)
            gchol[i + j * m] = 0.0;
        for (size_t i = j; i < m; i++)
            gchol[i + j * m] -= Lq[i + j * m];
        gchol[j + j * m] += 1.0 / Lq[j + j * m];
    }
}

/* Every latent's q gradient, in the blocks of mq and Lq. */
static void q_gradient(const svgp_eval *e, const svgp_work *w, double *gmean, double *gchol)
{
    size_t m = e->m, mm = m * m;
    for (size_t c = 0; c < latents(e); c++)
        latent_q_gradient(m, e->mq + c * m, e->Lq + c * mm, w->D + c * mm, w->agmu + c * m,
                          gmean ? gmean + c * m : NULL, gchol ? gchol + c * mm : NULL);
}

/* The bound over all n points as one block (w->cap >= n). */
int svgp_eval_full(const svgp_eval *e, const double *X, size_t n, const double *y,
                   svgp_work *w, gp_svgp_terms *t, const svgp_out *out, gp_error *err)
{
    int rc = svgp_factor_kuu(e, w, err);
    if (rc)
        return rc;
    svgp_block_moments(e, X, e->off, n, w);
    double dlog_s2 = 0.0;
    t->expected_log_lik = svgp_block_expect(e, y, e->r, n, 1.0, w, &dlog_s2);
    t->kl = svgp_kl_sum(e->mq, e->Lq, e->m, latents(e));
    t->elbo = t->expected_log_lik - t->kl;
    if (!isfinite(t->elbo))
        return gp_error_set(err, GP_ENOTPD, NULL, "the ELBO is not finite");
    int kernel = out && (out->theta || out->z);
    if (out && (kernel || out->mean || out->chol || out->sens))
        svgp_block_sens(e, n, kernel, w);
    if (kernel) {
        /* Z alone: the contraction still writes kernel gradients somewhere. */
        double *gt = out->theta ? out->theta
                                : gp_alloc_doubles(gp_kernel_n_params(e->k) + 1, err);
        rc = gt ? svgp_kernel_grad(e, X, n, w, dlog_s2, gt, out->z, err) : GP_ENOMEM;
        if (gt != out->theta)
            free(gt);
        if (rc)
            return rc;
    }
    if (out && (out->mean || out->chol))
        q_gradient(e, w, out->mean, out->chol);
    return GP_OK;
}

/* The expected log-likelihood over n points in blocks of w->cap (value only). */
int svgp_expected_blocks(const svgp_eval *e, const double *X, size_t d, size_t n,
                         const double *y, svgp_work *w, double *sum, gp_error *err)
{
    int rc = svgp_factor_kuu(e, w, err);
    if (rc)
        return rc;
    *sum = 0.0;
    for (size_t s = 0; s < n; s += w->cap) {
        size_t nb = n - s < w->cap ? n - s : w->cap;
        double ds;
        svgp_block_moments(e, X + s * d, e->off ? e->off + s : NULL, nb, w);
        *sum += svgp_block_expect(e, y + s, e->r ? e->r + s : NULL, nb, 1.0, w, &ds);
    }
    return isfinite(*sum) ? GP_OK : gp_error_set(err, GP_ENOTPD, NULL, "the ELBO is not finite");
}

int gp_svgp_elbo(const gp_kernel *k, const gp_lik *lik, const gp_quadrature *q, const double *X,
                 size_t n, const double *y, const double *Z, size_t m, const double *mq,
                 const double *Lq, gp_svgp_terms *terms, const gp_svgp_grad *grad, gp_error *err)
{
    return gp_svgp_elbo_noise(k, lik, q, X, n, y, NULL, Z, m, mq, Lq, terms, grad, err);
}

int gp_svgp_elbo_noise(const gp_kernel *k, const gp_lik *lik, const gp_quadrature *q,
                       const double *X, size_t n, const double *y, const double *r,
                       const double *Z, size_t m, const double *mq, const double *Lq,
                       gp_svgp_terms *terms, const gp_svgp_grad *grad, gp_error *err)
{
    if (n == 0 || m == 0)
        return gp_error_set(err, GP_EINVAL, NULL, "svgp bound needs n, m >= 1");
    svgp_work w;
    int rc = svgp_work_alloc(&w, m, n, err);
    if (rc)
        return rc;
    svgp_eval e = {k, lik, q, Z, m, mq, Lq, r, NULL, 1, NULL};
    svgp_out out = {0};
    if (grad)
        out = (svgp_out){grad->theta, grad->z, grad->mean, grad->chol, 0};
    rc = svgp_eval_full(&e, X, n, y, &w, terms, grad ? &out : NULL, err);
    svgp_work_free(&w);
    return rc;
}

int gp_svgp_elbo_softmax(const gp_kernel *k, const gp_softmax_mc *mc, const double *X,
                         size_t n, const double *y, const double *Z, size_t m, const double *mq,
                         const double *Lq, gp_svgp_terms *terms, const gp_svgp_grad *grad,
                         gp_error *err)
{
    if (n == 0 || m == 0 || mc == NULL || mc->C < 2)
        return gp_error_set(err, GP_EINVAL, NULL, "svgp softmax bound needs n, m >= 1, C >= 2");
    svgp_work w;
    int rc = svgp_work_alloc_latents(&w, m, n, mc->C, err);
    if (rc)
        return rc;
    gp_lik lik = {GP_LIK_SOFTMAX, 0.0};
    svgp_eval e = {k, &lik, NULL, Z, m, mq, Lq, NULL, NULL, mc->C, mc};
    svgp_out out = {0};
    if (grad)
        out = (svgp_out){grad->theta, grad->z, grad->mean, grad->chol, 0};
    rc = svgp_eval_full(&e, X, n, y, &w, terms, grad ? &out : NULL, err);
    svgp_work_free(&w);
    return rc;
}

/* ---- natural-gradient steps on q ---- */
int svgp_natgrad_buf_alloc(natgrad_buf *b, size_t m, gp_error *err)
{
    b->P = gp_alloc_doubles(m * m, err);
    b->Q = gp_alloc_doubles(m * m, err);
    b->v = gp_alloc_doubles(m, err);
    if (b->P && b->Q && b->v)
        return GP_OK;
    free(b->P);
    free(b->Q);
    free(b->v);
    return GP_ENOMEM;
}

void svgp_natgrad_buf_free(natgrad_buf *b)
{
    free(b->P);
    free(b->Q);
    free(b->v);
}

/* The step of the file comment from D (m x m) and agmu (m), both already
 * weighted to the full data; mq and Lq change only on success. */
int svgp_natgrad_update(size_t m, const double *D, const double *agmu, double step, double *mq,
                        double *Lq, natgrad_buf *b, gp_error *err)
{
    blasint bm = (blasint)m;
    /* P = S^{-1} = Lq^{-T} Lq^{-1}, v = S^{-1} m */
    memcpy(b->Q, Lq, m * m * sizeof *Lq);
    if (LAPACKE_dtrtri(LAPACK_COL_MAJOR, 'L', 'N', (lapack_int)m, b->Q, (lapack_int)m) != 0)
        return gp_error_set(err, GP_ENOTPD, NULL, "the factor of S is singular");
    for (size_t j = 1; j < m; j++)
        memset(b->Q + j * m, 0, j * sizeof *b->Q);
    cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, bm, bm, 1.0, b->Q, bm, 0.0, b->P, bm);
    gp_symmetrize_from_lower(b->P, m, m);
    cblas_dsymv(CblasColMajor, CblasLower, bm, 1.0, b->P, bm, mq, 1, 0.0, b->v, 1);
    /* new precision and theta1 */
    cblas_dsymv(CblasColMajor, CblasLower, bm, -2.0 * step, D, bm, mq, 1, 1.0 - step, b->v, 1);
    cblas_daxpy(bm, step, agmu, 1, b->v, 1);
    for (size_t j = 0; j < m; j++)
        for (size_t i = 0; i < m; i++)
            b->P[i + j * m] = (1.0 - step) * b->P[i + j * m] +
                              step * ((i == j ? 1.0 : 0.0) - 2.0 * D[i + j * m]);
    if (LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)m, b->P, (lapack_int)m) != 0)
        return gp_error_set(err, GP_ENOTPD, NULL, "the new precision of q is not positive definite");
    /* m = P^{-1} v; S = P^{-1}; Lq = chol(S) */
    gp_chol_solve(b->P, m, m, b->v, 1, m);
    if (LAPACKE_dpotri(LAPACK_COL_MAJOR, 'L', (lapack_int)m, b->P, (lapack_int)m) != 0 ||
        LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)m, b->P, (lapack_int)m) != 0)
        return gp_error_set(err, GP_ENOTPD, NULL, "the new covariance of q is not positive definite");
    for (size_t j = 1; j < m; j++)
        memset(b->P + j * m, 0, j * sizeof *b->P);
    memcpy(Lq, b->P, m * m * sizeof *Lq);
    memcpy(mq, b->v, m * sizeof *mq);
    return GP_OK;
}

int gp_svgp_natgrad(const gp_kernel *k, const gp_lik *lik, const gp_quadrature *q,
                    const double *X, size_t n, const double *y, double scale, const double *Z,
                    size_t m, double step, double *mq, double *Lq, gp_error *err)
{
    if (n == 0 || m == 0)
        return gp_error_set(err, GP_EINVAL, NULL, "svgp step needs n, m >= 1");
    svgp_work w;
    natgrad_buf b;
    int rc = svgp_work_alloc(&w, m, n, err);
    if (rc)
        return rc;
    if (svgp_natgrad_buf_alloc(&b, m, err)) {
        svgp_work_free(&w);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    svgp_eval e = {k, lik, q, Z, m, mq, Lq, NULL, NULL, 1, NULL};
    double ds;
    rc = svgp_factor_kuu(&e, &w, err);
    if (rc == GP_OK) {
        svgp_block_moments(&e, X, NULL, n, &w);
        svgp_block_expect(&e, y, NULL, n, scale, &w, &ds);
        svgp_block_sens(&e, n, 0, &w);
        rc = svgp_natgrad_update(m, w.D, w.agmu, step, mq, Lq, &b, err);
    }
    svgp_natgrad_buf_free(&b);
    svgp_work_free(&w);
    return rc;
}
