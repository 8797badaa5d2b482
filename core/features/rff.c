/* The sparse-spectrum GP of one frequency matrix: features, the low-rank LML
 * and its analytic gradient (core/features/rff.h; docs/methods/stein-random-features.md §1.2-1.4).
 *
 * Everything is O(N R d + N R^2 + R^3): the N x 2R design matrix Phi, the
 * 2R x 2R matrix A = Phi^T Phi + s I and its Cholesky factor. The gradient with
 * respect to Phi,
 *   G_Phi = res alpha^T / s - Phi A^{-1},
 * is formed a block of rows at a time and contracted straight away, so no
 * second N x 2R matrix exists. */
#include "core/features/rff.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/parallel.h"
#include "core/linalg/fastmath.h"
#include "core/linalg/linalg.h"
#include "core/linalg/panels.h"
#include "core/model/mean.h"

#define LOG_2PI 1.8378770664093454836
/* Rows per block of the gradient's Phi A^{-1} product: big enough for dsymm
 * to run at level-3 speed, small enough to stay in cache-friendly memory. */
#define GRAD_BLOCK_ROWS 512
/* Blocks whose Phi A^{-1} products run as parallel tasks at once: a round's
 * contractions are then added into dOmega one block after the other, in
 * block order, exactly as one block at a time did (the same bits for any
 * thread count, and as before the tasks). Four tasks keep two threads even. */
#define GRAD_ROUND_BLOCKS 4
/* Rows per task of the feature map (the trigonometric loop). */
#define FEATURE_TASK_ROWS 2048

struct gp_rff_work {
    size_t n, d, R, m;  /* m = 2R; n: the rows of the problem (of the chunk, streamed) */
    size_t cap;         /* the rows the buffers hold (n unless streamed) */
    double *Xs;         /* n x d: X / l */
    double *inv_ls;     /* d: 1 / l */
    double *Phi;        /* n x m */
    double *A;          /* m x m: lower = L, strict upper = Phi^T Phi */
    double *Ainv;       /* m x m: A^{-1} (full symmetric), gradient only */
    double *alpha;      /* m */
    double *res;        /* n: y - Phi alpha */
    double *B;          /* GRAD_ROUND_BLOCKS x GRAD_BLOCK_ROWS x m */
    double *GZ;         /* GRAD_ROUND_BLOCKS x GRAD_BLOCK_ROWS x R */
    double *dOmega;     /* R x d */
    double *wt, *yt;    /* n each, per-point noise only (allocated on first use):
                           sqrt(d_i) and the weighted targets */
    double *ym;         /* n: the residual targets y - H beta (a mean only) */
    double *hw;         /* the mean's profile scratch, hw_p coefficients */
    size_t hw_p;
    const double *yeff; /* the targets of the last evaluation (y, yt or ym) */
    double jitter;
    double ainv_trace;  /* tr A^{-1} (streamed: gp_rff_factor_sums with the inverse) */
};

void gp_rff_work_free(gp_rff_work *w)
{
    if (w == NULL)
        return;
    free(w->Xs);
    free(w->inv_ls);
    free(w->Phi);
    free(w->A);
    free(w->Ainv);
    free(w->alpha);
    free(w->res);
    free(w->B);
    free(w->GZ);
    free(w->dOmega);
    free(w->wt);
    free(w->yt);
    free(w->ym);
    free(w->hw);
    free(w);
}

int gp_rff_work_new(size_t n, size_t d, size_t R, gp_rff_work **out, gp_error *err)
{
    *out = NULL;
    if (n == 0 || d == 0 || R == 0)
        return gp_error_set(err, GP_EINVAL, NULL, "empty random-feature problem (n, d, R > 0)");
    size_t nd = 0, nm = 0, mm = 0, rd = 0, m = 0;
    if (gp_checked_size(R, 2, &m, err) || gp_checked_size(n, d, &nd, err) ||
        gp_checked_size(n, m, &nm, err) || gp_checked_size(m, m, &mm, err) ||
        gp_checked_size(R, d, &rd, err))
        return err ? err->code : GP_ETOOBIG;
    gp_rff_work *w = calloc(1, sizeof *w);
    if (w == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    w->n = w->cap = n;
    w->d = d;
    w->R = R;
    w->m = m;
    size_t blk = n < GRAD_BLOCK_ROWS ? n : GRAD_BLOCK_ROWS;
    size_t blocks = (n + GRAD_BLOCK_ROWS - 1) / GRAD_BLOCK_ROWS;
    blk *= blocks < GRAD_ROUND_BLOCKS ? blocks : GRAD_ROUND_BLOCKS;
    if (!(w->Xs = gp_alloc_doubles(nd, err)) || !(w->inv_ls = gp_alloc_doubles(d, err)) ||
        !(w->Phi = gp_alloc_doubles(nm, err)) ||
        !(w->A = gp_alloc_doubles(mm, err)) || !(w->Ainv = gp_alloc_doubles(mm, err)) ||
        !(w->alpha = gp_alloc_doubles(m, err)) || !(w->res = gp_alloc_doubles(n, err)) ||
        !(w->B = gp_alloc_doubles(blk * m, err)) || !(w->GZ = gp_alloc_doubles(blk * R, err)) ||
        !(w->dOmega = gp_alloc_doubles(rd, err))) {
        gp_rff_work_free(w);
        return err ? err->code : GP_ENOMEM;
    }
    *out = w;
    return GP_OK;
}

const double *gp_rff_work_factor(const gp_rff_work *w)
{
    return w->A;
}

const double *gp_rff_work_alpha(const gp_rff_work *w)
{
    return w->alpha;
}

const double *gp_rff_work_residual(const gp_rff_work *w)
{
    return w->res;
}

double gp_rff_work_jitter(const gp_rff_work *w)
{
    return w->jitter;
}

/* ---- the feature map ---- */

typedef struct trig_task {
    double *Phi;
    size_t n, R, ld;
    double scale;
} trig_task;

/* Z is in Phi's first R columns; overwrite them with scale cos Z and the next R
 * with scale sin Z, for the task's rows (core/linalg/fastmath.h: libm's cos and sin
 * were a third of one LML evaluation). */
static void trig_rows(void *ctx, size_t task)
{
    const trig_task *t = ctx;
    size_t lo = task * FEATURE_TASK_ROWS;
    size_t hi = lo + FEATURE_TASK_ROWS < t->n ? lo + FEATURE_TASK_ROWS : t->n;
    for (size_t r = 0; r < t->R; r++) {
        double *c = t->Phi + r * t->ld;
        double *s = t->Phi + (t->R + r) * t->ld;
        gp_sincos_scaled(c + lo, s + lo, hi - lo, t->scale);
    }
}

static void scale_columns(const double *X, size_t n, size_t d, const double *inv_ls, double *Xs)
{
    for (size_t k = 0; k < d; k++)
        for (size_t i = 0; i < n; i++)
            Xs[k * n + i] = X[k * n + i] * inv_ls[k];
}

/* Phi from already scaled points Xs (n x d). */
static void features_scaled(const double *Xs, size_t n, size_t d, const double *omega, size_t R,
                            double amplitude2, double *Phi, size_t ldphi)
{
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (int)n, (int)R, (int)d, 1.0, Xs, (int)n,
                omega, (int)R, 0.0, Phi, (int)ldphi);
    trig_task t = {Phi, n, R, ldphi, sqrt(amplitude2 / (double)R)};
    gp_parallel_for((n + FEATURE_TASK_ROWS - 1) / FEATURE_TASK_ROWS, trig_rows, &t);
}

int gp_rff_features(const double *X, size_t n, size_t d, const double *inv_ls,
                    const double *omega, size_t R, double amplitude2, double *Phi,
                    size_t ldphi)
{
    if (inv_ls == NULL) { /* X is already divided by the lengthscales */
        features_scaled(X, n, d, omega, R, amplitude2, Phi, ldphi);
        return GP_OK;
    }
    /* The scaled copy of X is small (n x d) next to Phi (n x 2R); scaling
     * omega instead would change the rounding of the products. */
    double *Xs = malloc(n * d * sizeof *Xs);
    if (Xs == NULL)
        return GP_ENOMEM;
    scale_columns(X, n, d, inv_ls, Xs);
    features_scaled(Xs, n, d, omega, R, amplitude2, Phi, ldphi);
    free(Xs);
    return GP_OK;
}

/* ---- the LML ---- */

static int check_problem(const gp_rff_problem *p, const gp_rff_work *w, gp_error *err)
{
    if (p->n != w->n || p->d != w->d || p->R != w->R)
        return gp_error_set(err, GP_EINVAL, NULL, "workspace made for another problem size");
    size_t bad = 0;
    if (!gp_all_finite(p->X, p->n * p->d, &bad))
        return gp_error_set(err, GP_EDATA, "X", "X[%zu][%zu] is not finite", bad % p->n,
                            bad / p->n);
    if (!gp_all_finite(p->y, p->n, &bad))
        return gp_error_set(err, GP_EDATA, "y", "y[%zu] is not finite", bad);
    if (!gp_all_finite(p->omega, p->R * p->d, &bad) || !gp_all_finite(p->log_ls, p->d, &bad) ||
        !isfinite(p->log_amplitude2) || !isfinite(p->log_noise))
        return gp_error_set(err, GP_EDATA, NULL, "non-finite hyperparameters");
    double s = exp(p->log_noise), a2 = exp(p->log_amplitude2);
    if (!(s > 0) || !isfinite(s) || !(a2 > 0) || !isfinite(a2))
        return gp_error_set(err, GP_ENOTPD, "noise_variance",
                            "noise or signal variance out of the representable range");
    return GP_OK;
}

/* The feature map of the problem's rows into the work: Xs = X / l, Phi. */
static void features_of(const gp_rff_problem *p, gp_rff_work *w)
{
    size_t n = w->n, d = w->d;
    for (size_t k = 0; k < d; k++)
        w->inv_ls[k] = exp(-p->log_ls[k]);
    scale_columns(p->X, n, d, w->inv_ls, w->Xs);
    features_scaled(w->Xs, n, d, p->omega, w->R, exp(p->log_amplitude2), w->Phi, n);
}

/* A = (Phi^T Phi in A's lower triangle) + s I, made full and factored in
 * place (lower). */
static int factor_gram(gp_rff_work *w, double s, gp_error *err)
{
    size_t m = w->m;
    for (size_t i = 0; i < m; i++)
        w->A[i * m + i] += s;
    gp_symmetrize_from_lower(w->A, m, m);
    gp_chol_info ci;
    int rc = gp_cholesky_jitter(w->A, m, m, &ci, err);
    if (rc)
        return rc;
    w->jitter = ci.jitter;
    return GP_OK;
}

/* A = Phi^T Phi + s I factored in place (lower). */
static int factor(gp_rff_work *w, double s, gp_error *err)
{
    size_t n = w->n, m = w->m;
    gp_panel_syrk_lower(1, m, n, 1.0, w->Phi, n, w->A, m);
    return factor_gram(w, s, err);
}

/* res = y - Phi alpha. */
static void residual(const double *y, gp_rff_work *w)
{
    size_t n = w->n, m = w->m;
    memcpy(w->res, y, n * sizeof *w->res);
    cblas_dgemv(CblasColMajor, CblasNoTrans, (int)n, (int)m, -1.0, w->Phi, (int)n, w->alpha, 1,
                1.0, w->res, 1);
}

/* alpha = A^{-1} Phi^T y and res = y - Phi alpha on the factor. */
static void solve(const double *y, gp_rff_work *w)
{
    size_t n = w->n, m = w->m;
    w->yeff = y;
    cblas_dgemv(CblasColMajor, CblasTrans, (int)n, (int)m, 1.0, w->Phi, (int)n, y, 1, 0.0,
                w->alpha, 1);
    gp_chol_solve(w->A, m, m, w->alpha, 1, m);
    residual(y, w);
}

/* The mean profiled out: with C^{-1} = (I - Phi A^{-1} Phi^T) / s (Woodbury),
 * U = L^{-1} Phi^T H and c = L^{-1} Phi^T y, the normal equations are
 * (H^T H - U^T U) beta = H^T y - U^T c (the 1/s cancels): O(N R p) on the
 * factor at hand. Rows weighted for per-point noise (w->wt, y already
 * weighted) weight H too: the weighted problem is homoscedastic at s. The
 * residual y - H beta (weighted rows) goes to w->ym. */
static int profile_mean(const gp_rff_basis *p, const double *y, int weighted, gp_rff_work *w,
                        gp_error *err)
{
    size_t n = w->n, m = w->m, q = p->n_coef, count = 0;
    if (w->hw_p != q) {
        free(w->hw);
        w->hw = NULL;
        w->hw_p = 0;
        if (gp_checked_size(n + m + q + 1, q, &count, err) || count + m < count ||
            !(w->hw = gp_alloc_doubles(count + m, err)))
            return GP_ENOMEM;
        w->hw_p = q;
    }
    if (!w->ym && !(w->ym = gp_alloc_doubles(n, err)))
        return GP_ENOMEM;
    double *Hw = w->hw, *U = Hw + n * q, *G = U + m * q, *b = G + q * q, *c = b + q;
    memcpy(Hw, p->H, n * q * sizeof *Hw);
    for (size_t j = 0; weighted && j < q; j++)
        for (size_t i = 0; i < n; i++)
            Hw[j * n + i] *= w->wt[i];
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (int)m, (int)q, (int)n, 1.0, w->Phi,
                (int)n, Hw, (int)n, 0.0, U, (int)m);
    cblas_dgemv(CblasColMajor, CblasTrans, (int)n, (int)m, 1.0, w->Phi, (int)n, y, 1, 0.0, c, 1);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, (int)m, (int)q,
                1.0, w->A, (int)m, U, (int)m);
    cblas_dtrsv(CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, (int)m, w->A, (int)m, c, 1);
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (int)q, (int)q, (int)n, 1.0, Hw, (int)n,
                Hw, (int)n, 0.0, G, (int)q);
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (int)q, (int)q, (int)m, -1.0, U, (int)m,
                U, (int)m, 1.0, G, (int)q);
    cblas_dgemv(CblasColMajor, CblasTrans, (int)n, (int)q, 1.0, Hw, (int)n, y, 1, 0.0, b, 1);
    cblas_dgemv(CblasColMajor, CblasTrans, (int)m, (int)q, -1.0, U, (int)m, c, 1, 1.0, b, 1);
    int rc = gp_mean_solve_normal(G, b, q, err);
    if (rc)
        return rc;
    if (p->beta)
        memcpy(p->beta, b, q * sizeof *b);
    memcpy(w->ym, y, n * sizeof *w->ym);
    cblas_dgemv(CblasColMajor, CblasNoTrans, (int)n, (int)q, -1.0, Hw, (int)n, b, 1, 1.0, w->ym,
                1);
    return GP_OK;
}

/* A^{-1} (full symmetric) from the factor; returns its trace. */
static double inverse_from_factor(gp_rff_work *w)
{
    size_t m = w->m;
    for (size_t j = 0; j < m; j++)
        memcpy(w->Ainv + j * m + j, w->A + j * m + j, (m - j) * sizeof *w->Ainv);
    LAPACKE_dpotri(LAPACK_COL_MAJOR, 'L', (lapack_int)m, w->Ainv, (lapack_int)m);
    gp_symmetrize_from_lower(w->Ainv, m, m);
    double tr = 0;
    for (size_t i = 0; i < m; i++)
        tr += w->Ainv[i * m + i];
    return tr;
}

typedef struct grad_round {
    gp_rff_work *w;
    double s;
    size_t first; /* the round's first row */
} grad_round;

/* Rows [lo, lo + b) of the round's block t: B_t = Phi_blk A^{-1}, then G_Z. */
static void grad_block(void *ctx, size_t t)
{
    const grad_round *gr = ctx;
    gp_rff_work *w = gr->w;
    size_t n = w->n, R = w->R, m = w->m, lo = gr->first + t * GRAD_BLOCK_ROWS;
    size_t b = n - lo < GRAD_BLOCK_ROWS ? n - lo : GRAD_BLOCK_ROWS;
    double *Bt = w->B + t * GRAD_BLOCK_ROWS * m, *GZt = w->GZ + t * GRAD_BLOCK_ROWS * R;
    cblas_dsymm(CblasColMajor, CblasRight, CblasLower, (int)b, (int)m, 1.0, w->Ainv, (int)m,
                w->Phi + lo, (int)n, 0.0, Bt, (int)b);
    for (size_t r = 0; r < R; r++) {
        const double *pc = w->Phi + r * n + lo, *ps = w->Phi + (R + r) * n + lo;
        const double *bc = Bt + r * b, *bs = Bt + (R + r) * b;
        double ac = w->alpha[r] / gr->s, as = w->alpha[R + r] / gr->s;
        double *gz = GZt + r * b;
        for (size_t i = 0; i < b; i++) {
            double rr = w->res[lo + i];
            gz[i] = -ps[i] * (rr * ac - bc[i]) + pc[i] * (rr * as - bs[i]);
        }
    }
}

/* dOmega += G_Z^T Xs with G_Z[i,r] = -Phi[i,R+r] G_Phi[i,r] + Phi[i,r] G_Phi[i,R+r]
 * (the amplitude cancels: d(c cos z)/dz = -c sin z = -Phi_sin). Blocks of
 * rows in rounds of GRAD_ROUND_BLOCKS parallel tasks. */
static int omega_gradient(gp_rff_work *w, double s, const gp_cancel *cancel, double *dOmega)
{
    size_t n = w->n, R = w->R, d = w->d, round_rows = GRAD_ROUND_BLOCKS * GRAD_BLOCK_ROWS;
    for (size_t first = 0; first < n; first += round_rows) {
        if (gp_cancel_requested(cancel))
            return GP_ECANCELLED;
        size_t rows = n - first < round_rows ? n - first : round_rows;
        grad_round gr = {w, s, first};
        gp_parallel_for((rows + GRAD_BLOCK_ROWS - 1) / GRAD_BLOCK_ROWS, grad_block, &gr);
        for (size_t t = 0, lo = first; lo < first + rows; t++, lo += GRAD_BLOCK_ROWS) {
            size_t b = n - lo < GRAD_BLOCK_ROWS ? n - lo : GRAD_BLOCK_ROWS;
            cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (int)R, (int)d, (int)b, 1.0,
                        w->GZ + t * GRAD_BLOCK_ROWS * R, (int)b, w->Xs + lo, (int)n, 1.0,
                        dOmega, (int)R);
        }
    }
    return GP_OK;
}

/* Per-point noise: dLML/dlog s = 1/2 sum_i d_i (res_i^2 / s - 1 + h_i) on the
 * weighted rows, h_i = phi_i^T A^{-1} phi_i (the derivative in each row's own
 * lambda_i = s + r_i times d lambda_i / dlog s = s; homoscedastic it is the
 * formula of fill_gradient). A^{-1} must be in w->Ainv; w->B is scratch. */
static double weighted_noise_grad(gp_rff_work *w, double s)
{
    size_t n = w->n, m = w->m;
    double g = 0.0;
    for (size_t lo = 0; lo < n; lo += GRAD_BLOCK_ROWS) {
        size_t b = n - lo < GRAD_BLOCK_ROWS ? n - lo : GRAD_BLOCK_ROWS;
        cblas_dsymm(CblasColMajor, CblasRight, CblasLower, (int)b, (int)m, 1.0, w->Ainv, (int)m,
                    w->Phi + lo, (int)n, 0.0, w->B, (int)b);
        for (size_t i = 0; i < b; i++) {
            double h = 0.0, di = w->wt[lo + i] * w->wt[lo + i], r = w->res[lo + i];
            for (size_t j = 0; j < m; j++)
                h += w->B[j * b + i] * w->Phi[j * n + lo + i];
            g += di * (r * r / s - 1.0 + h);
        }
    }
    return 0.5 * g;
}

/* Scale Phi's rows and y by sqrt(d_i), d_i = s / (s + noise_i), into w->wt,
 * w->yt; returns sum log d_i (the LML's Jacobian term). */
static double weight_rows(const gp_rff_problem *p, const double *noise, gp_rff_work *w,
                          double s)
{
    size_t n = w->n;
    double log_d = 0.0;
    for (size_t i = 0; i < n; i++) {
        double di = s / (s + noise[i]);
        w->wt[i] = sqrt(di);
        w->yt[i] = w->wt[i] * p->y[i];
        log_d += log(di);
    }
    for (size_t j = 0; j < w->m; j++)
        for (size_t i = 0; i < n; i++)
            w->Phi[j * n + i] *= w->wt[i];
    return log_d;
}

/* The homoscedastic noise and amplitude gradients from rr = res.res,
 * yres = y.res and tr A^{-1} over n rows. */
static void scalar_gradients(double rr, double yres, double tr, double n, size_t R, double s,
                             const gp_rff_grad *grad)
{
    if (grad->log_noise)
        *grad->log_noise = rr / (2 * s) - (n - 2.0 * (double)R) / 2 - s * tr / 2;
    if (grad->log_amplitude2) {
        double fit_res = yres - rr; /* (Phi alpha)^T res */
        *grad->log_amplitude2 = 0.5 * (fit_res / s - 2.0 * (double)R + s * tr);
    }
}

/* The frequencies' and lengthscales' gradients from dOmega. */
static void frequency_gradients(const gp_rff_problem *p, const double *dOmega,
                                const gp_rff_grad *grad)
{
    size_t R = p->R, d = p->d;
    if (grad->omega)
        memcpy(grad->omega, dOmega, R * d * sizeof *grad->omega);
    if (grad->log_ls)
        for (size_t k = 0; k < d; k++) {
            double g = 0;
            for (size_t r = 0; r < R; r++)
                g -= p->omega[k * R + r] * dOmega[k * R + r];
            grad->log_ls[k] = g;
        }
}

static int fill_gradient(const gp_rff_problem *p, const double *noise, gp_rff_work *w,
                         double s, const gp_rff_grad *grad)
{
    size_t n = w->n, R = w->R, d = w->d;
    const double *y = w->yeff;
    double tr = inverse_from_factor(w);
    double rr = cblas_ddot((int)n, w->res, 1, w->res, 1);
    double yres = grad->log_amplitude2 ? cblas_ddot((int)n, y, 1, w->res, 1) : 0.0;
    scalar_gradients(rr, yres, tr, (double)n, R, s, grad);
    if (noise && grad->log_noise)
        *grad->log_noise = weighted_noise_grad(w, s);
    if (grad->omega == NULL && grad->log_ls == NULL)
        return GP_OK;
    memset(w->dOmega, 0, R * d * sizeof *w->dOmega);
    if (omega_gradient(w, s, p->cancel, w->dOmega))
        return GP_ECANCELLED;
    frequency_gradients(p, w->dOmega, grad);
    return GP_OK;
}

/* The LML of n rows from q = ||res||^2 + s ||alpha||^2 and A's factor. */
static double lml_value(const gp_rff_problem *p, const gp_rff_work *w, double q, double n)
{
    double s = exp(p->log_noise);
    return -q / (2 * s) - 0.5 * gp_chol_logdet(w->A, w->m, w->m) + (double)p->R * p->log_noise -
           0.5 * n * (LOG_2PI + p->log_noise);
}

int gp_rff_lml(const gp_rff_problem *p, gp_rff_work *w, double *lml, const gp_rff_grad *grad,
               gp_error *err)
{
    return gp_rff_lml_noise(p, NULL, w, lml, grad, err);
}

int gp_rff_lml_noise(const gp_rff_problem *p, const double *noise, gp_rff_work *w, double *lml,
                     const gp_rff_grad *grad, gp_error *err)
{
    return gp_rff_lml_mean(p, noise, NULL, w, lml, grad, err);
}

int gp_rff_lml_mean(const gp_rff_problem *p, const double *noise, const gp_rff_basis *basis,
                    gp_rff_work *w, double *lml, const gp_rff_grad *grad, gp_error *err)
{
    int rc = check_problem(p, w, err);
    if (rc)
        return rc;
    size_t n = w->n, m = w->m;
    double s = exp(p->log_noise);
    features_of(p, w);
    if (gp_cancel_requested(p->cancel))
        return gp_error_set(err, GP_ECANCELLED, NULL, "cancelled after the feature map");
    double log_d = 0.0;
    if (noise) {
        if ((!w->wt && !(w->wt = gp_alloc_doubles(n, err))) ||
            (!w->yt && !(w->yt = gp_alloc_doubles(n, err))))
            return GP_ENOMEM;
        log_d = weight_rows(p, noise, w, s);
    }
    if ((rc = factor(w, s, err)) != GP_OK)
        return rc;
    const double *y = noise ? w->yt : p->y;
    if (basis && basis->H && basis->n_coef) {
        if ((rc = profile_mean(basis, y, noise != NULL, w, err)) != GP_OK)
            return rc;
        y = w->ym;
    }
    solve(y, w);
    /* y^T y - b^T alpha = ||res||^2 + s ||alpha||^2 avoids the cancellation. */
    double q = cblas_ddot((int)n, w->res, 1, w->res, 1) +
               s * cblas_ddot((int)m, w->alpha, 1, w->alpha, 1);
    double v = lml_value(p, w, q, (double)n);
    if (noise)
        v += 0.5 * log_d;
    if (!isfinite(v))
        return gp_error_set(err, GP_ENOTPD, NULL, "the log marginal likelihood is not finite");
    *lml = v;
    if (grad && fill_gradient(p, noise, w, s, grad))
        return gp_error_set(err, GP_ECANCELLED, NULL, "cancelled during the LML gradient");
    return GP_OK;
}

/* ---- the LML streamed in chunks (core/features/rff_rows.c) ---- */

/* The chunk's b rows as the work's problem (b within its capacity). */
static void chunk_rows(const gp_rff_problem *p, size_t b, gp_rff_work *w)
{
    w->n = b <= w->cap ? b : w->cap;
    features_of(p, w);
}

void gp_rff_chunk_gram(const gp_rff_problem *p, size_t b, gp_rff_work *w, double *gram,
                       double *phi_y, double *yy)
{
    size_t m = w->m, at = 0;
    chunk_rows(p, b, w);
    gp_panel_syrk_lower(1, m, w->n, 1.0, w->Phi, w->n, w->A, m);
    for (size_t j = 0; j < m; j++)
        for (size_t i = j; i < m; i++)
            gram[at++] += w->A[i + j * m];
    cblas_dgemv(CblasColMajor, CblasTrans, (int)w->n, (int)m, 1.0, w->Phi, (int)w->n, p->y, 1,
                1.0, phi_y, 1);
    *yy += cblas_ddot((int)w->n, p->y, 1, p->y, 1);
}

int gp_rff_factor_sums(const gp_rff_problem *p, gp_rff_work *w, const double *gram,
                       const double *phi_y, int with_inverse, gp_error *err)
{
    size_t m = w->m;
    double s = exp(p->log_noise);
    if (!(s > 0) || !isfinite(s) || !isfinite(p->log_amplitude2))
        return gp_error_set(err, GP_ENOTPD, "noise_variance",
                            "noise or signal variance out of the representable range");
    gp_unpack_lower(gram, m, w->A, m);
    int rc = factor_gram(w, s, err);
    if (rc)
        return rc;
    memcpy(w->alpha, phi_y, m * sizeof *w->alpha);
    gp_chol_solve(w->A, m, m, w->alpha, 1, m);
    w->ainv_trace = with_inverse ? inverse_from_factor(w) : NAN;
    return GP_OK;
}

int gp_rff_chunk_residual(const gp_rff_problem *p, size_t b, gp_rff_work *w, double *sums,
                          double *dOmega)
{
    chunk_rows(p, b, w);
    residual(p->y, w);
    sums[0] += cblas_ddot((int)w->n, w->res, 1, w->res, 1);
    sums[1] += cblas_ddot((int)w->n, p->y, 1, w->res, 1);
    if (dOmega && omega_gradient(w, exp(p->log_noise), NULL, dOmega))
        return GP_ECANCELLED;
    return GP_OK;
}

int gp_rff_lml_from_sums(const gp_rff_problem *p, const gp_rff_work *w, double rr, double yres,
                         const double *dOmega, double *lml, const gp_rff_grad *grad,
                         gp_error *err)
{
    size_t m = w->m;
    double s = exp(p->log_noise);
    double q = rr + s * cblas_ddot((int)m, w->alpha, 1, w->alpha, 1);
    double v = lml_value(p, w, q, (double)p->n);
    if (!isfinite(v))
        return gp_error_set(err, GP_ENOTPD, NULL, "the log marginal likelihood is not finite");
    *lml = v;
    if (grad == NULL)
        return GP_OK;
    scalar_gradients(rr, yres, w->ainv_trace, (double)p->n, p->R, s, grad);
    if (dOmega)
        frequency_gradients(p, dOmega, grad);
    return GP_OK;
}
