/* The uncollapsed sparse variational GP: see core/methods/svgp.h.
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
#include "core/methods/svgp.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/inducing/inducing.h"
#include "core/linalg/linalg.h"
#include "core/model/method.h"
#include "core/optim/driver.h"
#include "core/optim/optim.h"

/* ---- one evaluation over a block of points ---- */

/* What the bound is evaluated at. */
typedef struct svgp_eval {
    const gp_kernel *k;
    const gp_lik *lik;
    const gp_quadrature *q;
    const double *Z;
    size_t m;
    const double *mq, *Lq;
} svgp_eval;

/* Buffers: L and two m x m, three m x cap (Kuf, A, the sensitivity), four of cap. */
typedef struct svgp_work {
    size_t cap;
    double *L, *D, *T, *Kuf, *A, *W;
    double *mu, *var, *gmu, *gv, *agmu;
    double jitter;
} svgp_work;

static void work_free(svgp_work *w)
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
    memset(w, 0, sizeof *w);
}

static int work_alloc(svgp_work *w, size_t m, size_t cap, gp_error *err)
{
    memset(w, 0, sizeof *w);
    size_t mn = 0, mm = 0;
    int rc = gp_checked_size(m, cap, &mn, err);
    if (rc == GP_OK)
        rc = gp_checked_size(m, m, &mm, err);
    if (rc)
        return rc;
    w->cap = cap;
    w->L = gp_alloc_doubles(mm, err);
    w->D = gp_alloc_doubles(mm, err);
    w->T = gp_alloc_doubles(mm, err);
    w->Kuf = gp_alloc_doubles(mn, err);
    w->A = gp_alloc_doubles(mn, err);
    w->W = gp_alloc_doubles(mn, err);
    w->mu = gp_alloc_doubles(cap, err);
    w->var = gp_alloc_doubles(cap, err);
    w->gmu = gp_alloc_doubles(cap, err);
    w->gv = gp_alloc_doubles(cap, err);
    w->agmu = gp_alloc_doubles(m, err);
    if (!w->L || !w->D || !w->T || !w->Kuf || !w->A || !w->W || !w->mu || !w->var || !w->gmu ||
        !w->gv || !w->agmu) {
        work_free(w);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    return GP_OK;
}

/* w->L = chol(Kuu + jitter I). */
static int factor_kuu(const svgp_eval *e, svgp_work *w, gp_error *err)
{
    int rc = gp_inducing_kuu_factor(e->k, e->Z, e->m, w->L, &w->jitter, err);
    if (rc)
        return rc == GP_EDATA ? rc : GP_ENOTPD;
    return GP_OK;
}

/* Kuf, A = L^{-1} Kuf and the marginals (mu, var) of f at the nb points X. */
static void block_moments(const svgp_eval *e, const double *X, size_t nb, svgp_work *w)
{
    size_t m = e->m;
    gp_kernel_cross(e->k, e->Z, m, X, nb, w->Kuf, m);
    memcpy(w->A, w->Kuf, m * nb * sizeof *w->A);
    gp_trsm_lower(w->L, m, m, 0, w->A, nb, m);
    cblas_dgemv(CblasColMajor, CblasTrans, (blasint)m, (blasint)nb, 1.0, w->A, (blasint)m, e->mq,
                1, 0.0, w->mu, 1);
    memcpy(w->W, w->A, m * nb * sizeof *w->W);
    cblas_dtrmm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, (blasint)m,
                (blasint)nb, 1.0, e->Lq, (blasint)m, w->W, (blasint)m);
    double kd = gp_kernel_diag(e->k, X); /* stationary: one point serves */
    for (size_t i = 0; i < nb; i++) {
        const double *a = w->A + i * m, *p = w->W + i * m;
        double aa = cblas_ddot((blasint)m, a, 1, a, 1), pp = cblas_ddot((blasint)m, p, 1, p, 1);
        /* Kff - Q is PSD in exact arithmetic (the jittered Kuu): clamp its rounding. */
        w->var[i] = fmax(kd - aa, 0.0) + pp;
    }
}

/* scale * sum_n E log p(y_n | f_n) over the block; gmu, gv get scale times
 * the derivatives, *dlog_s2 the derivative in log s2 (gaussian, else 0). */
static double block_expect(const svgp_eval *e, const double *y, size_t nb, double scale,
                           svgp_work *w, double *dlog_s2)
{
    double sum = 0.0, ds = 0.0;
    int gauss = e->lik->type == GP_LIK_GAUSSIAN;
    for (size_t i = 0; i < nb; i++) {
        double dm = 0.0, dv = 0.0;
        sum += gp_lik_expected(e->lik, e->q, y[i], w->mu[i], w->var[i], &dm, &dv);
        w->gmu[i] = scale * dm;
        w->gv[i] = scale * dv;
        if (gauss) { /* E = -log(2 pi s2)/2 - r/(2 s2), r = (y - mu)^2 + var */
            double r = (y[i] - w->mu[i]) * (y[i] - w->mu[i]) + w->var[i];
            ds += -0.5 + r / (2.0 * e->lik->noise);
        }
    }
    *dlog_s2 = scale * ds;
    return scale * sum;
}

/* From gmu, gv: D = A diag(gv) A^T, agmu = A gmu, and (with kernel_sens)
 * W = dF/dKuf = L^{-T} G and T = dF/dKuu (see the derivation above). */
static void block_sens(const svgp_eval *e, size_t nb, int kernel_sens, svgp_work *w)
{
    size_t m = e->m;
    blasint bm = (blasint)m, bn = (blasint)nb;
    for (size_t i = 0; i < nb; i++)
        for (size_t j = 0; j < m; j++)
            w->W[j + i * m] = w->A[j + i * m] * w->gv[i];
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, bm, bm, bn, 1.0, w->W, bm, w->A, bm, 0.0,
                w->D, bm);
    gp_symmetrize_average(w->D, m, m);
    cblas_dgemv(CblasColMajor, CblasNoTrans, bm, bn, 1.0, w->A, bm, w->gmu, 1, 0.0, w->agmu, 1);
    if (!kernel_sens)
        return;
    /* G = m gmu^T + 2 (S - I) A diag(gv), with S A diag(gv) = Lq (Lq^T W). */
    cblas_dtrmm(CblasColMajor, CblasLeft, CblasLower, CblasTrans, CblasNonUnit, bm, bn, 1.0,
                e->Lq, bm, w->W, bm);
    cblas_dtrmm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, bm, bn, 1.0,
                e->Lq, bm, w->W, bm);
    for (size_t i = 0; i < nb; i++)
        for (size_t j = 0; j < m; j++)
            w->W[j + i * m] = 2.0 * (w->W[j + i * m] - w->gv[i] * w->A[j + i * m]) +
                              e->mq[j] * w->gmu[i];
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

/* After block_sens with kernel_sens over the nb points X: dF/dtheta then
 * dlog_s2 into theta (gp_kernel_n_params + 1) and dF/dZ into gz (may be NULL). */
static int kernel_grad(const svgp_eval *e, const double *X, size_t nb, const svgp_work *w,
                       double dlog_s2, double *theta, double *gz, gp_error *err)
{
    double wdiag = 0.0;
    for (size_t i = 0; i < nb; i++)
        wdiag += w->gv[i];
    int rc = gp_inducing_contract(e->k, X, nb, e->Z, e->m, w->Kuf, w->W, w->T,
                                  wdiag / (double)nb, theta, gz, err);
    if (rc == GP_OK)
        theta[gp_kernel_n_params(e->k)] = dlog_s2;
    return rc;
}

static double kl_value(const double *mq, const double *Lq, size_t m)
{
    double fro = 0.0, logdiag = 0.0;
    for (size_t j = 0; j < m; j++) {
        for (size_t i = j; i < m; i++)
            fro += Lq[i + j * m] * Lq[i + j * m];
        logdiag += log(Lq[j + j * m]);
    }
    return 0.5 * (fro + cblas_ddot((blasint)m, mq, 1, mq, 1) - (double)m) - logdiag;
}

/* dF/dm = agmu - m into gmean and the lower triangle of dF/dLq = 2 D Lq - Lq +
 * diag(1/Lq_ii) into gchol (either may be NULL). */
static void q_gradient(const svgp_eval *e, const svgp_work *w, double *gmean, double *gchol)
{
    size_t m = e->m;
    for (size_t j = 0; gmean && j < m; j++)
        gmean[j] = w->agmu[j] - e->mq[j];
    if (gchol == NULL)
        return;
    memcpy(gchol, w->D, m * m * sizeof *gchol);
    cblas_dtrmm(CblasColMajor, CblasRight, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)m,
                (blasint)m, 2.0, e->Lq, (blasint)m, gchol, (blasint)m);
    for (size_t j = 0; j < m; j++) {
        for (size_t i = 0; i < j; i++)
            gchol[i + j * m] = 0.0;
        for (size_t i = j; i < m; i++)
            gchol[i + j * m] -= e->Lq[i + j * m];
        gchol[j + j * m] += 1.0 / e->Lq[j + j * m];
    }
}

/* Gradient outputs of one full evaluation (each may be NULL). */
typedef struct svgp_out {
    double *theta, *z, *mean, *chol;
    int sens; /* leave D and agmu in the work for a natural-gradient step */
} svgp_out;

/* The bound over all n points as one block (w->cap >= n). */
static int eval_full(const svgp_eval *e, const double *X, size_t n, const double *y,
                     svgp_work *w, gp_svgp_terms *t, const svgp_out *out, gp_error *err)
{
    int rc = factor_kuu(e, w, err);
    if (rc)
        return rc;
    block_moments(e, X, n, w);
    double dlog_s2 = 0.0;
    t->expected_log_lik = block_expect(e, y, n, 1.0, w, &dlog_s2);
    t->kl = kl_value(e->mq, e->Lq, e->m);
    t->elbo = t->expected_log_lik - t->kl;
    if (!isfinite(t->elbo))
        return gp_error_set(err, GP_ENOTPD, NULL, "the ELBO is not finite");
    int kernel = out && (out->theta || out->z);
    if (out && (kernel || out->mean || out->chol || out->sens))
        block_sens(e, n, kernel, w);
    if (kernel) {
        /* Z alone: the contraction still writes kernel gradients somewhere. */
        double *gt = out->theta ? out->theta
                                : gp_alloc_doubles(gp_kernel_n_params(e->k) + 1, err);
        rc = gt ? kernel_grad(e, X, n, w, dlog_s2, gt, out->z, err) : GP_ENOMEM;
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
static int expected_blocks(const svgp_eval *e, const double *X, size_t d, size_t n,
                           const double *y, svgp_work *w, double *sum, gp_error *err)
{
    int rc = factor_kuu(e, w, err);
    if (rc)
        return rc;
    *sum = 0.0;
    for (size_t s = 0; s < n; s += w->cap) {
        size_t nb = n - s < w->cap ? n - s : w->cap;
        double ds;
        block_moments(e, X + s * d, nb, w);
        *sum += block_expect(e, y + s, nb, 1.0, w, &ds);
    }
    return isfinite(*sum) ? GP_OK : gp_error_set(err, GP_ENOTPD, NULL, "the ELBO is not finite");
}

int gp_svgp_elbo(const gp_kernel *k, const gp_lik *lik, const gp_quadrature *q, const double *X,
                 size_t n, const double *y, const double *Z, size_t m, const double *mq,
                 const double *Lq, gp_svgp_terms *terms, const gp_svgp_grad *grad, gp_error *err)
{
    if (n == 0 || m == 0)
        return gp_error_set(err, GP_EINVAL, NULL, "svgp bound needs n, m >= 1");
    svgp_work w;
    int rc = work_alloc(&w, m, n, err);
    if (rc)
        return rc;
    svgp_eval e = {k, lik, q, Z, m, mq, Lq};
    svgp_out out = {0};
    if (grad)
        out = (svgp_out){grad->theta, grad->z, grad->mean, grad->chol, 0};
    rc = eval_full(&e, X, n, y, &w, terms, grad ? &out : NULL, err);
    work_free(&w);
    return rc;
}

/* ---- natural-gradient steps on q ---- */

/* Buffers of one step: two m x m and one m. */
typedef struct natgrad_buf {
    double *P, *Q, *v;
} natgrad_buf;

static int natgrad_buf_alloc(natgrad_buf *b, size_t m, gp_error *err)
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

static void natgrad_buf_free(natgrad_buf *b)
{
    free(b->P);
    free(b->Q);
    free(b->v);
}

/* The step of the file comment from D (m x m) and agmu (m), both already
 * weighted to the full data; mq and Lq change only on success. */
static int natgrad_update(size_t m, const double *D, const double *agmu, double step, double *mq,
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
    int rc = work_alloc(&w, m, n, err);
    if (rc)
        return rc;
    if (natgrad_buf_alloc(&b, m, err)) {
        work_free(&w);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    svgp_eval e = {k, lik, q, Z, m, mq, Lq};
    double ds;
    rc = factor_kuu(&e, &w, err);
    if (rc == GP_OK) {
        block_moments(&e, X, n, &w);
        block_expect(&e, y, n, scale, &w, &ds);
        block_sens(&e, n, 0, &w);
        rc = natgrad_update(m, w.D, w.agmu, step, mq, Lq, &b, err);
    }
    natgrad_buf_free(&b);
    work_free(&w);
    return rc;
}

/* ---- the fit ---- */

/* A fit's data, likelihood and the parameters being fitted (updated in place). */
typedef struct svgp_fit {
    gp_kernel *k; /* the model's kernel */
    gp_lik lik;
    gp_quadrature quad;
    gp_noise_param np; /* gaussian only; learned 0 otherwise */
    const double *X, *y;
    size_t n, d, m; /* m: the inducing points chosen (selection may return fewer than asked) */
    double *Z, *mq, *Lq;
    int optimize_z;
    const gp_cancel *cancel;
    size_t n_kp, n_free, *free_idx; /* the free kernel parameters */
    double *theta, *gtheta, *gz, *gmean, *gchol;
    double *save; /* m + m x m + m + m x m: q and its D, agmu for the warm start */
    svgp_work w;
    natgrad_buf nb;
} svgp_fit;

static int noise_learned(const svgp_fit *f)
{
    return f->lik.type == GP_LIK_GAUSSIAN && f->np.learned;
}

static size_t hyper_dim(const svgp_fit *f)
{
    return f->n_free + (size_t)noise_learned(f) + (f->optimize_z ? f->m * f->d : 0);
}

static size_t full_dim(const svgp_fit *f)
{
    return hyper_dim(f) + f->m + f->m * (f->m + 1) / 2;
}

static svgp_eval fit_eval(const svgp_fit *f)
{
    return (svgp_eval){f->k, &f->lik, &f->quad, f->Z, f->m, f->mq, f->Lq};
}

/* x = (free kernel log-parameters, the noise's unconstrained value, Z). */
static void pack_hyper(const svgp_fit *f, double x0_noise, double *x)
{
    size_t o = 0;
    for (size_t i = 0; i < f->n_free; i++)
        x[o++] = f->theta[f->free_idx[i]];
    if (noise_learned(f))
        x[o++] = x0_noise;
    if (f->optimize_z)
        memcpy(x + o, f->Z, f->m * f->d * sizeof *x);
}

static void apply_hyper(svgp_fit *f, const double *x)
{
    size_t o = 0;
    for (size_t i = 0; i < f->n_free; i++)
        f->theta[f->free_idx[i]] = x[o++];
    gp_kernel_set_params(f->k, f->theta);
    if (f->lik.type == GP_LIK_GAUSSIAN)
        f->lik.noise = gp_noise_param_value(&f->np, noise_learned(f) ? x[o++] : 0.0);
    if (f->optimize_z)
        memcpy(f->Z, x + o, f->m * f->d * sizeof *x);
}

/* q after the hyperparameters: m, then Lq's lower triangle by columns with
 * the diagonal as its log (Lq stays a valid factor). */
static void pack_q(const svgp_fit *f, double *x)
{
    size_t m = f->m, o = 0;
    memcpy(x, f->mq, m * sizeof *x);
    o = m;
    for (size_t j = 0; j < m; j++)
        for (size_t i = j; i < m; i++)
            x[o++] = i == j ? log(f->Lq[i + j * m]) : f->Lq[i + j * m];
}

static void apply_q(svgp_fit *f, const double *x)
{
    size_t m = f->m, o = m;
    memcpy(f->mq, x, m * sizeof *x);
    for (size_t j = 0; j < m; j++)
        for (size_t i = j; i < m; i++)
            f->Lq[i + j * m] = i == j ? exp(x[o++]) : x[o++];
}

/* -(hyperparameter gradient) into g (hyper_dim entries) from gtheta, gz. */
static void hyper_grad(const svgp_fit *f, double *g)
{
    size_t o = 0;
    for (size_t i = 0; i < f->n_free; i++)
        g[o++] = -f->gtheta[f->free_idx[i]];
    if (noise_learned(f))
        g[o++] = -gp_noise_param_grad(&f->np, f->lik.noise, f->gtheta[f->n_kp]);
    for (size_t i = 0; f->optimize_z && i < f->m * f->d; i++)
        g[o++] = -f->gz[i];
}

/* -ELBO and its gradient over (hyperparameters, q); +inf where it fails. */
static double fit_objective(void *ctx, const double *x, double *g)
{
    svgp_fit *f = ctx;
    size_t h = hyper_dim(f), m = f->m;
    apply_hyper(f, x);
    apply_q(f, x + h);
    if (!isfinite(f->lik.noise))
        return INFINITY;
    svgp_eval e = fit_eval(f);
    int kernel = f->n_free > 0 || noise_learned(f);
    svgp_out out = {kernel ? f->gtheta : NULL, f->optimize_z ? f->gz : NULL, f->gmean, f->gchol,
                    0};
    gp_svgp_terms t;
    gp_error err;
    if (eval_full(&e, f->X, f->n, f->y, &f->w, &t, &out, &err) != GP_OK)
        return INFINITY;
    hyper_grad(f, g);
    size_t o = h;
    for (size_t j = 0; j < m; j++)
        g[o++] = -f->gmean[j];
    for (size_t j = 0; j < m; j++) /* d/dlog l_jj = l_jj d/dl_jj */
        for (size_t i = j; i < m; i++)
            g[o++] = -f->gchol[i + j * m] * (i == j ? f->Lq[i + j * m] : 1.0);
    return -t.elbo;
}

/* Natural-gradient steps on q at fixed hyperparameters, full batch: step 1
 * first (exact for gaussian, a Newton-like step otherwise), halved whenever
 * the ELBO would go down, until it stops improving. Cheap beside L-BFGS, and
 * it starts L-BFGS (whose q block is badly scaled against the kernel's) near
 * the optimal q for the current kernel; run again at the end it makes q
 * optimal for the fitted kernel. *elbo receives the bound reached. */
static int refine_q(svgp_fit *f, int max_steps, double *elbo, gp_error *err)
{
    size_t m = f->m;
    double *mq0 = f->save, *Lq0 = mq0 + m, *D0 = Lq0 + m * m, *ag0 = D0 + m * m;
    svgp_eval e = fit_eval(f);
    svgp_out out = {.sens = 1};
    gp_svgp_terms t0, t1;
    int rc = eval_full(&e, f->X, f->n, f->y, &f->w, &t0, &out, err);
    double step = 1.0;
    for (int s = 0; rc == GP_OK && s < max_steps && step > 1e-3; s++) {
        if (gp_cancel_requested(f->cancel))
            return gp_error_set(err, GP_ECANCELLED, NULL, "cancelled");
        memcpy(mq0, f->mq, m * sizeof *mq0);
        memcpy(Lq0, f->Lq, m * m * sizeof *Lq0);
        memcpy(D0, f->w.D, m * m * sizeof *D0);
        memcpy(ag0, f->w.agmu, m * sizeof *ag0);
        gp_error e2;
        int r2 = natgrad_update(m, D0, ag0, step, f->mq, f->Lq, &f->nb, &e2);
        if (r2 == GP_OK)
            r2 = eval_full(&e, f->X, f->n, f->y, &f->w, &t1, &out, &e2);
        if (r2 == GP_ENOMEM)
            return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        if (r2 != GP_OK || !(t1.elbo >= t0.elbo)) { /* back to q0, with its D and agmu */
            memcpy(f->mq, mq0, m * sizeof *mq0);
            memcpy(f->Lq, Lq0, m * m * sizeof *Lq0);
            memcpy(f->w.D, D0, m * m * sizeof *D0);
            memcpy(f->w.agmu, ag0, m * sizeof *ag0);
            step *= 0.5;
            continue;
        }
        double gain = t1.elbo - t0.elbo;
        t0 = t1;
        if (gain <= 1e-10 * fabs(t1.elbo))
            break;
    }
    if (rc == GP_OK && elbo)
        *elbo = t0.elbo;
    return rc;
}

/* Options of one fit. */
typedef struct svgp_settings {
    int budget;      /* max_iterations: L-BFGS iterations, or the progress scale of Adam */
    double tolerance;
    size_t batch;
    int epochs;
    double lr, natgrad_step, offset;
} svgp_settings;

static int fit_lbfgs(svgp_fit *f, const gp_fit_request *req, const svgp_settings *st,
                     gp_diagnostics *diag, gp_error *err)
{
    size_t dim = full_dim(f);
    double *x = gp_alloc_doubles(dim, err);
    if (x == NULL)
        return GP_ENOMEM;
    pack_hyper(f, gp_noise_param_x0(&f->np), x);
    pack_q(f, x + hyper_dim(f));
    gp_driver_options opt;
    gp_driver_default_options(&opt);
    opt.max_iterations = st->budget;
    opt.tolerance = st->tolerance;
    opt.progress = req->progress;
    opt.progress_ctx = req->progress_ctx;
    opt.cancel = &req->cancel;
    opt.max_total = st->budget;
    opt.objective_offset = st->offset;
    gp_driver_result res;
    int rc = gp_driver_minimize(fit_objective, f, x, dim, &opt, &res, err);
    diag->iterations += res.iterations;
    diag->evaluations += res.evaluations;
    diag->converged = res.converged;
    if (rc == GP_OK) {
        apply_hyper(f, x);
        apply_q(f, x + hyper_dim(f));
    } else if (rc == GP_ENOTPD) {
        gp_error_set(err, GP_ENOTPD, NULL, "the ELBO cannot be evaluated at the starting point");
    }
    free(x);
    return rc;
}

/* ---- minibatch Adam with natural-gradient steps on q ---- */

/* One minibatch (nb points gathered into Xb, yb) at weight n / nb: Adam on
 * the hyperparameters x (h entries), a natural-gradient step on q. *est
 * receives the minibatch estimate of the ELBO. */
static int adam_batch(svgp_fit *f, gp_adam *adam, double *x, double *g, const double *Xb,
                      const double *yb, size_t nb, const svgp_settings *st, double *est,
                      gp_error *err)
{
    size_t h = hyper_dim(f);
    svgp_eval e = fit_eval(f);
    int rc = factor_kuu(&e, &f->w, err);
    if (rc)
        return rc;
    block_moments(&e, Xb, nb, &f->w);
    double ds, scale = (double)f->n / (double)nb;
    *est = block_expect(&e, yb, nb, scale, &f->w, &ds) - kl_value(f->mq, f->Lq, f->m);
    if (!isfinite(*est))
        return gp_error_set(err, GP_ENOTPD, NULL, "the ELBO is not finite");
    block_sens(&e, nb, h > 0, &f->w);
    if (h > 0 && (rc = kernel_grad(&e, Xb, nb, &f->w, ds, f->gtheta,
                                   f->optimize_z ? f->gz : NULL, err)) != GP_OK)
        return rc;
    /* A step that would leave q improper is skipped (the next batch retries). */
    gp_error e2;
    rc = natgrad_update(f->m, f->w.D, f->w.agmu, st->natgrad_step, f->mq, f->Lq, &f->nb, &e2);
    if (rc != GP_OK && rc != GP_ENOTPD)
        return gp_error_set(err, rc, NULL, "out of memory");
    if (h > 0) {
        hyper_grad(f, g);
        gp_adam_step(adam, x, g);
        apply_hyper(f, x);
    }
    return GP_OK;
}

/* One epoch: a seeded shuffle, then the minibatches in order. */
static int adam_epoch(svgp_fit *f, gp_adam *adam, double *x, double *g, size_t *perm,
                      double *Xb, double *yb, gp_rng *rng, const svgp_settings *st,
                      double *mean_est, gp_error *err)
{
    size_t n = f->n, d = f->d, b = f->w.cap;
    for (size_t i = n; i > 1; i--) {
        size_t j = (size_t)gp_rng_below(rng, i), t = perm[i - 1];
        perm[i - 1] = perm[j];
        perm[j] = t;
    }
    double sum = 0.0;
    size_t batches = 0;
    for (size_t s = 0; s < n; s += b) {
        size_t nb = n - s < b ? n - s : b;
        for (size_t i = 0; i < nb; i++) {
            memcpy(Xb + i * d, f->X + perm[s + i] * d, d * sizeof *Xb);
            yb[i] = f->y[perm[s + i]];
        }
        double est;
        int rc = adam_batch(f, adam, x, g, Xb, yb, nb, st, &est, err);
        if (rc)
            return rc;
        if (gp_cancel_requested(f->cancel))
            return gp_error_set(err, GP_ECANCELLED, NULL, "cancelled");
        sum += est;
        batches++;
    }
    *mean_est = sum / (double)batches;
    return GP_OK;
}

/* Progress is reported once per epoch on the scale of the iteration budget
 * (epoch e of E as ceil(e budget / E)), so a job's progress never passes it. */
static int fit_adam(svgp_fit *f, const gp_fit_request *req, const svgp_settings *st,
                    gp_diagnostics *diag, gp_error *err)
{
    size_t h = hyper_dim(f), b = f->w.cap;
    gp_adam adam = {0};
    double *x = gp_alloc_doubles(h + 1, err), *g = gp_alloc_doubles(h + 1, err);
    double *Xb = gp_alloc_doubles(b * f->d, err), *yb = gp_alloc_doubles(b, err);
    size_t *perm = malloc(f->n * sizeof *perm);
    int rc = x && g && Xb && yb && perm ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK && h > 0)
        rc = gp_adam_init(&adam, h, st->lr, err);
    if (rc == GP_OK) {
        pack_hyper(f, gp_noise_param_x0(&f->np), x);
        for (size_t i = 0; i < f->n; i++)
            perm[i] = i;
    }
    gp_rng rng;
    gp_rng_seed(&rng, req->seed);
    for (int ep = 1; rc == GP_OK && ep <= st->epochs; ep++) {
        double est = 0.0;
        rc = adam_epoch(f, &adam, x, g, perm, Xb, yb, &rng, st, &est, err);
        diag->iterations = ep;
        diag->evaluations += (int)((f->n + b - 1) / b);
        long it = ((long)ep * st->budget + st->epochs - 1) / st->epochs;
        if (rc == GP_OK && req->progress &&
            req->progress(req->progress_ctx, (int)it, st->budget, est + st->offset))
            rc = gp_error_set(err, GP_ECANCELLED, NULL, "cancelled");
    }
    diag->converged = 0; /* a fixed number of epochs */
    if (h > 0)
        gp_adam_free(&adam);
    free(x);
    free(g);
    free(Xb);
    free(yb);
    free(perm);
    return rc == GP_ENOMEM ? gp_error_set(err, GP_ENOMEM, NULL, "out of memory") : rc;
}

/* ---- the method ---- */

static const gp_kernel_type svgp_kernels[] = {GP_KERNEL_RBF, GP_KERNEL_MATERN12,
                                              GP_KERNEL_MATERN32, GP_KERNEL_MATERN52,
                                              GP_KERNEL_RQ};

static const gp_likelihood svgp_likelihoods[] = {GP_LIK_GAUSSIAN, GP_LIK_BERNOULLI,
                                                 GP_LIK_POISSON};

static const gp_option_spec svgp_options[] = {
    {"inducing", GP_OPTION_INT, 100, NULL, 1, 8192, NULL,
     "M, the number of inducing points (at most the number of training points)"},
    {"inducing_selection", GP_OPTION_ENUM, 0, "greedy", 0, 0, "greedy|kmeans|random",
     "greedy: maximum residual variance under the initial kernel (deterministic); kmeans: "
     "k-means centres; random: distinct training inputs (both seeded)"},
    {"optimize_inducing", GP_OPTION_BOOL, 0, NULL, 0, 1, NULL,
     "also optimise the inducing inputs Z (off by default: on the shared classification sets "
     "it changed the test log loss by < 0.01 and made L-BFGS 5-10 times slower)"},
    {"optimizer", GP_OPTION_ENUM, 0, "auto", 0, 0, "auto|lbfgs|adam",
     "lbfgs: full-batch L-BFGS over the kernel, noise, Z and q; adam: minibatch Adam on the "
     "kernel, noise and Z with natural-gradient steps on q; auto: lbfgs when its N x M "
     "workspace fits the budget of an exact fit of max_train_points points, else adam"},
    {"max_iterations", GP_OPTION_INT, 200, NULL, 1, 100000, NULL,
     "L-BFGS iterations; with adam the progress budget the epochs are reported against"},
    {"tolerance", GP_OPTION_NUMBER, 1e-7, NULL, 1e-16, 1, NULL,
     "L-BFGS: stop when the relative change of the ELBO in an iteration falls below this"},
    {"quadrature_points", GP_OPTION_INT, GP_LIK_QUADRATURE_POINTS, NULL, 1,
     GP_LIK_QUADRATURE_MAX, NULL,
     "Gauss-Hermite points of the expected log-likelihood (bernoulli; gaussian and poisson "
     "are in closed form)"},
    {"batch_size", GP_OPTION_INT, 256, NULL, 1, 1000000, NULL, "adam: points per minibatch"},
    {"epochs", GP_OPTION_INT, 20, NULL, 1, 100000, NULL, "adam: passes over the data"},
    {"learning_rate", GP_OPTION_NUMBER, 0.01, NULL, 1e-6, 1, NULL,
     "adam: step size on the kernel log-parameters, log noise and Z"},
    {"natgrad_step", GP_OPTION_NUMBER, 0.1, NULL, 1e-4, 1, NULL,
     "adam: natural-gradient step on q (1 with the full batch and a gaussian likelihood is "
     "the exact optimum)"},
};

/* Doubles held during a fit with m inducing points and b points per
 * evaluation (b = n for L-BFGS): three m x b buffers, the working copies of X
 * and y, the m x m matrices and, for L-BFGS, its history of 2 x 10 vectors
 * of the parameter count (about m^2 / 2 + m d). */
static double fit_need(size_t n, size_t d, size_t m, size_t b, int lbfgs)
{
    double dm = (double)m, dd = (double)d;
    double need = (double)n * (dd + 2.0) + (double)b * (3.0 * dm + dd + 4.0) + 12.0 * dm * dm;
    if (lbfgs)
        need += 24.0 * (0.5 * dm * dm + dm * dd + dm);
    return need;
}

/* The optimiser (1: lbfgs, 0: adam) and the memory check, before anything
 * is allocated: within the budget of an exact fit of max_train_points points
 * (sgpr's rule). */
static int choose_optimizer(const gp_fit_request *req, size_t m, size_t batch, int *lbfgs,
                            gp_error *err)
{
    double cap = (double)gp_fit_point_cap(req);
    const char *name = gp_option_string(&gp_method_svgp, req, "optimizer");
    int fits = fit_need(req->n, req->d, m, req->n, 1) <= cap * cap;
    *lbfgs = strcmp(name, "lbfgs") == 0 || (strcmp(name, "auto") == 0 && fits);
    double need = fit_need(req->n, req->d, m, *lbfgs ? req->n : batch, *lbfgs);
    if (need > cap * cap)
        return gp_error_set(err, GP_ETOOBIG, *lbfgs ? "options.optimizer" : "options.inducing",
                            "svgp with %zu inducing points on %zu points needs %.1f GB of "
                            "workspace, above the budget of an exact fit of max_train_points "
                            "= %.0f points (%.1f GB): use %s, fewer inducing points or raise "
                            "--max-train-points",
                            m, req->n, need * 8e-9, cap, cap * cap * 8e-9,
                            *lbfgs ? "optimizer adam" : "a smaller batch_size");
    return GP_OK;
}

static void fit_free(svgp_fit *f)
{
    free(f->Z);
    free(f->mq);
    free(f->Lq);
    free(f->free_idx);
    free(f->theta);
    free(f->gtheta);
    free(f->gz);
    free(f->gmean);
    free(f->gchol);
    free(f->save);
    work_free(&f->w);
    natgrad_buf_free(&f->nb);
}

/* Buffers for M inducing points; q starts at the prior N(0, I). */
static int fit_alloc(svgp_fit *f, size_t M, size_t cap, gp_error *err)
{
    size_t d = f->d, np = gp_kernel_n_params(f->k), mm = M * M;
    f->n_kp = np;
    f->Z = gp_alloc_doubles(d * M, err);
    f->mq = gp_alloc_doubles(M, err);
    f->Lq = gp_alloc_doubles(mm, err);
    f->free_idx = malloc((np + 1) * sizeof *f->free_idx);
    f->theta = gp_alloc_doubles(np + 1, err);
    f->gtheta = gp_alloc_doubles(np + 1, err);
    f->gz = gp_alloc_doubles(d * M, err);
    f->gmean = gp_alloc_doubles(M, err);
    f->gchol = gp_alloc_doubles(mm, err);
    f->save = gp_alloc_doubles(2 * mm + 2 * M, err);
    unsigned char *mask = malloc(np + 1);
    int ok = f->Z && f->mq && f->Lq && f->free_idx && f->theta && f->gtheta && f->gz &&
             f->gmean && f->gchol && f->save && mask;
    if (ok)
        ok = work_alloc(&f->w, M, cap, err) == GP_OK && natgrad_buf_alloc(&f->nb, M, err) == GP_OK;
    if (!ok) {
        free(mask);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    gp_kernel_get_params(f->k, f->theta);
    gp_kernel_free_mask(f->k, mask);
    for (size_t i = 0; i < np; i++)
        if (mask[i])
            f->free_idx[f->n_free++] = i;
    free(mask);
    return GP_OK;
}

/* q = N(0, I) over the m inducing points chosen. */
static void q_prior(svgp_fit *f)
{
    size_t m = f->m;
    memset(f->mq, 0, m * sizeof *f->mq);
    memset(f->Lq, 0, m * m * sizeof *f->Lq);
    for (size_t i = 0; i < m; i++)
        f->Lq[i + i * m] = 1.0;
}

static void settings_read(const gp_fit_request *req, const gp_model *model, svgp_settings *st)
{
    const gp_method *me = &gp_method_svgp;
    st->budget = (int)gp_option_number(me, req, "max_iterations");
    st->tolerance = gp_option_number(me, req, "tolerance");
    st->batch = (size_t)gp_option_number(me, req, "batch_size");
    if (st->batch > req->n)
        st->batch = req->n;
    st->epochs = (int)gp_option_number(me, req, "epochs");
    st->lr = gp_option_number(me, req, "learning_rate");
    st->natgrad_step = gp_option_number(me, req, "natgrad_step");
    st->offset = -(double)req->n * log(model->y_scale);
}

/* The fitted posterior (mt = m, C = Lq Lq^T) and the bound's parts at the end. */
static int build_post(svgp_fit *f, gp_inducing_post *im, gp_svgp_terms *t, gp_error *err)
{
    svgp_eval e = fit_eval(f);
    int rc = expected_blocks(&e, f->X, f->d, f->n, f->y, &f->w, &t->expected_log_lik, err);
    if (rc)
        return rc;
    t->kl = kl_value(f->mq, f->Lq, f->m);
    t->elbo = t->expected_log_lik - t->kl;
    size_t m = f->m;
    if ((rc = gp_inducing_post_alloc(im, m, f->d, err)) != GP_OK)
        return rc;
    memcpy(im->Z, f->Z, f->d * m * sizeof *f->Z);
    memcpy(im->L, f->w.L, m * m * sizeof *f->w.L);
    memcpy(im->mt, f->mq, m * sizeof *f->mq);
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)m, (blasint)m, 1.0, f->Lq,
                (blasint)m, 0.0, im->C, (blasint)m);
    gp_symmetrize_from_lower(im->C, m, m);
    im->jitter = f->w.jitter;
    return gp_inducing_post_prepare(im, f->k, err);
}

static void report(gp_model *model, const svgp_fit *f, int lbfgs,
                   const svgp_settings *st, const gp_svgp_terms *t, const char *selection)
{
    model->diag.objective = t->elbo + st->offset;
    model->diag.jitter = f->w.jitter;
    model->noise_variance = f->lik.type == GP_LIK_GAUSSIAN ? f->lik.noise : 0.0;
    gp_model_info_number(model, "inducing", (double)f->m);
    gp_model_info_string(model, "inducing_selection", selection);
    gp_model_info_number(model, "optimize_inducing", f->optimize_z ? 1.0 : 0.0);
    gp_model_info_string(model, "optimizer", lbfgs ? "lbfgs" : "adam");
    gp_model_info_number(model, "expected_log_lik", t->expected_log_lik + st->offset);
    gp_model_info_number(model, "kl", t->kl);
    if (f->lik.type == GP_LIK_BERNOULLI)
        gp_model_info_number(model, "quadrature_points", (double)f->quad.n);
    if (!lbfgs) {
        gp_model_info_number(model, "epochs", (double)st->epochs);
        gp_model_info_number(model, "batch_size", (double)st->batch);
    }
}

/* The optimisation itself: L-BFGS from a q refined at the initial kernel,
 * then q refined at the fitted one; or Adam with natural gradients. */
static int optimise(svgp_fit *f, const gp_fit_request *req, int lbfgs, const svgp_settings *st,
                    gp_diagnostics *diag, gp_error *err)
{
    if (!lbfgs)
        return fit_adam(f, req, st, diag, err);
    int rc = refine_q(f, 50, NULL, err);
    if (rc == GP_OK)
        rc = fit_lbfgs(f, req, st, diag, err);
    if (rc == GP_OK)
        rc = refine_q(f, 50, NULL, err);
    return rc;
}

/* The lengthscales' share of a pair's scaled squared distance. */
static double scaled_r2(const gp_kernel *k, const double *a, const double *b)
{
    double r2 = 0.0;
    for (size_t t = 0; t < k->n_active; t++) {
        size_t j = k->active_dims ? k->active_dims[t] : t;
        double l = exp(k->log_lengthscale[k->n_lengthscale > 1 ? t : 0]);
        r2 += (a[j] - b[j]) * (a[j] - b[j]) / (l * l);
    }
    return r2;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Initial lengthscales too short for the data: on standardised inputs in d
 * dimensions a pair is about 2d apart in squared distance, so the default
 * lengthscale 1 makes k(x, x') ~ exp(-d) between almost every pair once d is
 * a few tens (sonar, spam): q(u) then only sees the prior, every gradient is
 * exp(-d) small and L-BFGS stops at once at ELBO ~ N log 1/2. When the
 * median scaled squared distance over (up to 200 evenly spaced) points
 * exceeds SVGP_R2_MAX, every free lengthscale is multiplied by the one factor
 * that brings the median to 1 (the median heuristic). Returns the factor (1:
 * unchanged). */
#define SVGP_R2_MAX 8.0
static double rescue_lengthscales(gp_kernel *k, const double *X, size_t n, size_t d)
{
    if (k->n_lengthscale == 0 || (k->fixed & GP_FIX_LENGTHSCALE) || n < 2)
        return 1.0;
    size_t s = n < 200 ? n : 200, pairs = s * (s - 1) / 2, c = 0;
    double *r2 = malloc(pairs * sizeof *r2);
    if (r2 == NULL)
        return 1.0;
    for (size_t a = 0; a < s; a++)
        for (size_t b = a + 1; b < s; b++)
            r2[c++] = scaled_r2(k, X + (a * n / s) * d, X + (b * n / s) * d);
    qsort(r2, pairs, sizeof *r2, cmp_double);
    double med = r2[pairs / 2], factor = 1.0;
    free(r2);
    if (med > SVGP_R2_MAX && isfinite(med)) {
        factor = sqrt(med);
        for (size_t j = 0; j < k->n_lengthscale; j++)
            k->log_lengthscale[j] += log(factor);
    }
    return factor;
}

/* Select Z, optimise, build the posterior. X (d x n) and y in working units. */
static int fit_into(gp_model *model, const gp_fit_request *req, svgp_fit *f, gp_inducing_post *im,
                    gp_error *err)
{
    const gp_method *me = &gp_method_svgp;
    const char *sel_name = gp_option_string(me, req, "inducing_selection");
    gp_inducing_selection sel = (gp_inducing_selection)gp_inducing_selection_from_name(sel_name);
    size_t M = (size_t)gp_option_number(me, req, "inducing");
    if (M > f->n)
        M = f->n;
    svgp_settings st;
    settings_read(req, model, &st);
    int lbfgs = 1;
    int rc = choose_optimizer(req, M, st.batch, &lbfgs, err);
    if (rc == GP_OK)
        rc = fit_alloc(f, M, lbfgs ? f->n : st.batch, err);
    if (rc == GP_OK)
        rc = gp_quadrature_init(&f->quad, (size_t)gp_option_number(me, req, "quadrature_points"),
                                err);
    double rescale = rescue_lengthscales(f->k, f->X, f->n, f->d);
    if (rc == GP_OK)
        rc = gp_inducing_select(sel, f->k, f->X, f->n, f->d, M, req->seed, f->Z, &f->m, err);
    if (rc)
        return rc;
    gp_kernel_get_params(f->k, f->theta);
    q_prior(f);
    rc = optimise(f, req, lbfgs, &st, &model->diag, err);
    gp_svgp_terms t;
    if (rc == GP_OK)
        rc = build_post(f, im, &t, err);
    if (rc == GP_OK) {
        report(model, f, lbfgs, &st, &t, gp_inducing_selection_name(sel));
        if (rescale != 1.0)
            gp_model_info_number(model, "lengthscale_rescaled", rescale);
    }
    return rc;
}

static int svgp_fit_op(const gp_fit_request *req, gp_model **out, gp_error *err)
{
    const gp_method *me = &gp_method_svgp;
    gp_model *model;
    int rc = gp_model_new(me, req, &model, err);
    if (rc != GP_OK)
        return rc;
    gp_inducing_post *im = calloc(1, sizeof *im);
    size_t nd = 0;
    double *X = NULL, *y = gp_alloc_doubles(req->n, err);
    if (gp_checked_size(req->n, req->d, &nd, err) == GP_OK)
        X = gp_alloc_doubles(nd, err);
    model->impl = im;
    rc = im && X && y ? GP_OK : GP_ENOMEM;
    svgp_fit f;
    memset(&f, 0, sizeof f);
    if (rc == GP_OK) {
        gp_model_standardize_points(model, req->X, req->n, X);
        /* The latent f of a non-Gaussian model is in natural units: labels as given. */
        if (req->likelihood == GP_LIK_GAUSSIAN)
            gp_model_working_targets(model, req->y, req->n, y);
        else
            memcpy(y, req->y, req->n * sizeof *y);
        f = (svgp_fit){.k = model->kernel, .lik = {req->likelihood, 0.0}, .X = X, .y = y,
                       .n = req->n, .d = req->d, .cancel = &req->cancel,
                       .optimize_z = gp_option_number(me, req, "optimize_inducing") != 0.0};
        if (req->likelihood == GP_LIK_GAUSSIAN) {
            gp_noise_param_init(&f.np, req, y, req->n);
            f.lik.noise = f.np.start;
        }
        rc = fit_into(model, req, &f, im, err);
    }
    fit_free(&f);
    free(X);
    free(y);
    if (rc) {
        gp_model_free(model);
        return rc == GP_ENOMEM ? gp_error_set(err, GP_ENOMEM, NULL, "out of memory") : rc;
    }
    *out = model;
    return GP_OK;
}

static const gp_method_ops svgp_ops = {
    .fit = svgp_fit_op,
    .predict = gp_inducing_method_predict,
    .batch_invariant = 1, /* core/inducing's predict: per-point arithmetic */
    .sample = gp_inducing_method_sample,
    .export_impl = gp_inducing_method_export,
    .import_impl = gp_inducing_method_import,
    .free_impl = gp_inducing_method_free,
};

static const gp_info_spec svgp_info[] = {
    {"inducing", GP_INFO_NUMBER, "M, the number of inducing points"},
    {"inducing_selection", GP_INFO_STRING, "how Z was chosen (greedy, kmeans or random)"},
    {"optimize_inducing", GP_INFO_NUMBER, "1 when Z moved with the hyperparameters"},
    {"optimizer", GP_INFO_STRING,
     "the optimiser used: lbfgs (full batch) or adam (minibatches, natural gradients on q)"},
    {"expected_log_lik", GP_INFO_NUMBER,
     "sum over the training points of E_q log p(y | f) at the end (original units)"},
    {"kl", GP_INFO_NUMBER, "KL(q(u) || p(u)) at the end; the objective is expected_log_lik - kl"},
    {"quadrature_points", GP_INFO_NUMBER,
     "Gauss-Hermite points of the expected log-likelihood (bernoulli)"},
    {"lengthscale_rescaled", GP_INFO_NUMBER,
     "the factor the initial lengthscales were multiplied by because k(x, x') was near 0 "
     "for most pairs of training points (the median heuristic; absent: kept as given)"},
    {"epochs", GP_INFO_NUMBER, "adam: passes over the data"},
    {"batch_size", GP_INFO_NUMBER, "adam: points per minibatch"},
};

static const gp_option_setting svgp_quick[] = {{"max_iterations", 8}, {"inducing", 8}};

const gp_method gp_method_svgp = {
    .name = "svgp",
    .summary = "Uncollapsed sparse variational GP with M inducing points and a full-covariance "
               "whitened q(u) (Hensman et al.; GPflow's SVGP): gaussian, bernoulli or poisson "
               "likelihood; full-batch L-BFGS with analytic gradients, or minibatch Adam with "
               "natural-gradient steps on q(u) for large N. O(N M^2) per pass, O(M^2) per "
               "predicted point",
    .objective_name = "elbo",
    .options = svgp_options,
    .n_options = sizeof svgp_options / sizeof svgp_options[0],
    .kernels = svgp_kernels,
    .n_kernels = sizeof svgp_kernels / sizeof svgp_kernels[0],
    .composite_kernels = 0,
    .iterations_option = "max_iterations",
    .restarts_option = NULL,
    .likelihoods = svgp_likelihoods,
    .n_likelihoods = sizeof svgp_likelihoods / sizeof svgp_likelihoods[0],
    .info = svgp_info,
    .n_info = sizeof svgp_info / sizeof svgp_info[0],
    .quick = svgp_quick,
    .n_quick = sizeof svgp_quick / sizeof svgp_quick[0],
    .ops = &svgp_ops,
};
