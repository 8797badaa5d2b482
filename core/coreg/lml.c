/* The coregionalised LML and its gradient: core/coreg/lml.h. */
#include "core/coreg/lml.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/linalg/blocked.h"

#define LOG_2PI 1.8378770664093454836

static int cancelled(gp_error *err)
{
    return gp_error_set(err, GP_ECANCELLED, NULL, "cancelled during the coregionalised LML");
}

int gp_coreg_covariance(const gp_coreg_params *cp, const gp_coreg_data *D, double *Kx, double *K,
                        const gp_cancel *cancel, gp_error *err)
{
    size_t n = D->n, M = D->e->M, p = cp->p;
    const size_t *row = D->e->row, *out = D->e->out;
    for (size_t l = 0; l < cp->q; l++)
        if (gp_kernel_gram_cancellable(cp->kernels[l], D->Xt, n, Kx + l * n * n, n, cancel))
            return cancelled(err);
    for (size_t b = 0; b < M; b++) {
        if (b % 256 == 0 && gp_cancel_requested(cancel))
            return cancelled(err);
        for (size_t a = 0; a < M; a++) {
            double s = 0.0;
            for (size_t l = 0; l < cp->q; l++)
                s += cp->B[l * p * p + out[b] * p + out[a]] * Kx[l * n * n + row[b] * n + row[a]];
            K[b * M + a] = s;
        }
        K[b * M + b] += cp->noise[out[b]];
    }
    return GP_OK;
}

/* d LML / d (each latent's kernel parameters, B_q's entries, noises) from
 * the weights G = (alpha alpha^T - K^-1) / 2 (lower triangle of A): the
 * entries' pairs folded onto the rows (one N x N weight per latent, one
 * kernel contraction each) and onto the outputs (B_q, noises). */
static int fold_gradient(const gp_coreg_params *cp, const gp_coreg_data *D, const double *A,
                         const double *Kx, double *gk, double *gB, double *gs,
                         const gp_cancel *cancel, gp_error *err)
{
    size_t n = D->n, M = D->e->M, p = cp->p, np = cp->n_kparams;
    const size_t *row = D->e->row, *out = D->e->out;
    double *Wr = gp_alloc_doubles(n * n, err);
    if (Wr == NULL)
        return GP_ENOMEM;
    memset(gB, 0, cp->q * p * p * sizeof *gB);
    memset(gs, 0, p * sizeof *gs);
    for (size_t a = 0; a < M; a++)
        gs[out[a]] += 0.5 * A[a * M + a];
    int rc = GP_OK;
    for (size_t l = 0; rc == GP_OK && l < cp->q; l++) {
        const double *B = cp->B + l * p * p, *K = Kx + l * n * n;
        double *G = gB + l * p * p;
        memset(Wr, 0, n * n * sizeof *Wr);
        for (size_t b = 0; b < M; b++)
            for (size_t a = b; a < M; a++) { /* rows ascend with a: row[a] >= row[b] */
                double g = 0.5 * A[b * M + a], twice = a == b ? 1.0 : 2.0;
                double w = g * B[out[b] * p + out[a]];
                Wr[row[b] * n + row[a]] += row[a] == row[b] ? twice * w : w;
                double kg = g * K[row[b] * n + row[a]];
                G[out[b] * p + out[a]] += kg;
                if (a != b)
                    G[out[a] * p + out[b]] += kg;
            }
        if (gp_kernel_gram_grad_contract_cancellable(cp->kernels[l], D->Xt, n, Wr, n,
                                                     gk + l * np, cancel) != GP_OK)
            rc = cancelled(err);
    }
    free(Wr);
    return rc;
}

static int general_gradient(const gp_coreg_params *cp, const gp_coreg_data *D, double *A,
                            const double *alpha, const double *Kx, double *grad,
                            const gp_cancel *cancel, gp_error *err)
{
    size_t M = D->e->M, p = cp->p;
    int rc = gp_potri_blocked(A, M, M, cancel, err);
    if (rc)
        return rc;
    for (size_t j = 0; j < M; j++) /* A := alpha alpha^T - K^-1 (lower) */
        for (size_t i = j; i < M; i++)
            A[j * M + i] = alpha[i] * alpha[j] - A[j * M + i];
    double *gk = gp_alloc_doubles(cp->q * cp->n_kparams + 1, err);
    double *gB = gp_alloc_doubles(cp->q * p * p, err);
    double *gs = gp_alloc_doubles(p, err);
    rc = gk && gB && gs ? fold_gradient(cp, D, A, Kx, gk, gB, gs, cancel, err) : GP_ENOMEM;
    if (rc == GP_OK)
        gp_coreg_params_chain(cp, gk, gB, gs, grad);
    free(gk);
    free(gB);
    free(gs);
    return rc;
}

int gp_coreg_lml_general(const gp_coreg_params *cp, const gp_coreg_data *D, double *A,
                         double *alpha, double *lml, double *grad, const gp_cancel *cancel,
                         gp_chol_info *info, gp_error *err)
{
    size_t n = D->n, M = D->e->M, count = 0;
    int rc = gp_checked_size(cp->q * n, n, &count, err);
    double *Kx = rc ? NULL : gp_alloc_doubles(count, err);
    if (Kx == NULL)
        return rc ? rc : GP_ENOMEM;
    rc = gp_coreg_covariance(cp, D, Kx, A, cancel, err);
    if (rc == GP_OK)
        rc = gp_cholesky_jitter_cancellable(A, M, M, cancel, info, err);
    if (rc == GP_OK) {
        memcpy(alpha, D->yw, M * sizeof *alpha);
        gp_trsm_lower(A, M, M, 0, alpha, 1, M);
        double quad = cblas_ddot((blasint)M, alpha, 1, alpha, 1);
        gp_trsm_lower(A, M, M, 1, alpha, 1, M);
        *lml = -0.5 * quad - 0.5 * gp_chol_logdet(A, M, M) - 0.5 * (double)M * LOG_2PI;
        if (grad)
            rc = general_gradient(cp, D, A, alpha, Kx, grad, cancel, err);
    }
    free(Kx);
    return rc;
}

/* ---- the Kronecker path ----
 * Entries in row order a = i p + j make Y an N x p matrix (row-major in a,
 * i.e. Y[i,j] = yw[i p + j]) and K = K_x (x) B + I (x) D. With K_x = U S U^T
 * and D^-1/2 B D^-1/2 = V L V^T, K = (I (x) D^1/2)(U (x) V)(S (x) L + I)(U (x)
 * V)^T (I (x) D^1/2), so with Z = U^T Y D^-1/2 V and t_ik = s_i l_k + 1:
 *   LML = -1/2 sum Z_ik^2 / t_ik - N/2 sum_j log D_j - 1/2 sum log t_ik - M/2 log 2pi
 * and alpha = U (Z ./ t) V^T D^-1/2 (N x p, A). The gradient's traces:
 *   kernel:  1/2 tr(dK_x (A B A^T - U diag(c) U^T)),  c_i = sum_k l_k / t_ik
 *   B_jj':   1/2 ((A^T K_x A) - D^-1/2 V diag(e) V^T D^-1/2)_jj',  e_k = sum_i s_i / t_ik
 *   D_j:     1/2 (sum_i A_ij^2 - sum_k V_jk^2 f_k / D_j),  f_k = sum_i 1 / t_ik */

typedef gp_coreg_kron kron_work;

void gp_coreg_kron_free(gp_coreg_kron *w)
{
    free(w->U);
    free(w->s);
    free(w->V);
    free(w->l);
    free(w->Z);
    free(w->A);
    free(w->T);
    memset(w, 0, sizeof *w);
}

#define kron_free gp_coreg_kron_free

static int kron_alloc(kron_work *w, size_t n, size_t p, gp_error *err)
{
    memset(w, 0, sizeof *w);
    w->n = n;
    w->p = p;
    size_t nn = 0;
    int rc = gp_checked_size(n, n, &nn, err);
    if (rc)
        return rc;
    if (!(w->U = gp_alloc_doubles(nn, err)) || !(w->s = gp_alloc_doubles(n, err)) ||
        !(w->V = gp_alloc_doubles(p * p, err)) || !(w->l = gp_alloc_doubles(p, err)) ||
        !(w->Z = gp_alloc_doubles(n * p, err)) || !(w->A = gp_alloc_doubles(n * p, err)) ||
        !(w->T = gp_alloc_doubles(n * p, err)))
        return GP_ENOMEM;
    return GP_OK;
}

static int kron_eigen(const gp_coreg_params *cp, const gp_coreg_data *D, kron_work *w,
                      const gp_cancel *cancel, gp_error *err)
{
    size_t n = w->n, p = w->p;
    if (gp_kernel_gram_cancellable(cp->kernels[0], D->Xt, n, w->U, n, cancel))
        return cancelled(err);
    if (LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'L', (lapack_int)n, w->U, (lapack_int)n, w->s))
        return gp_error_set(err, GP_ENOTPD, NULL, "the kernel matrix's eigendecomposition failed");
    for (size_t j = 0; j < p; j++)
        for (size_t i = 0; i < p; i++)
            w->V[j * p + i] = cp->B[j * p + i] / sqrt(cp->noise[i] * cp->noise[j]);
    if (LAPACKE_dsyevd(LAPACK_COL_MAJOR, 'V', 'L', (lapack_int)p, w->V, (lapack_int)p, w->l))
        return gp_error_set(err, GP_ENOTPD, NULL, "B's eigendecomposition failed");
    return GP_OK;
}

/* Z = U^T Y D^-1/2 V, the LML, then Z ./ t and A = U Z V^T D^-1/2. */
static int kron_solve(const gp_coreg_params *cp, const gp_coreg_data *D, kron_work *w,
                      double *lml, gp_error *err)
{
    size_t n = w->n, p = w->p;
    for (size_t i = 0; i < n; i++) /* T = Y D^-1/2 (n x p column-major) */
        for (size_t j = 0; j < p; j++)
            w->T[j * n + i] = D->yw[i * p + j] / sqrt(cp->noise[j]);
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (blasint)n, (blasint)p, (blasint)n, 1.0,
                w->U, (blasint)n, w->T, (blasint)n, 0.0, w->A, (blasint)n);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)n, (blasint)p, (blasint)p,
                1.0, w->A, (blasint)n, w->V, (blasint)p, 0.0, w->Z, (blasint)n);
    double quad = 0.0, logdet = 0.0;
    for (size_t k = 0; k < p; k++)
        for (size_t i = 0; i < n; i++) {
            double t = w->s[i] * w->l[k] + 1.0;
            if (!(t > 0.0))
                return gp_error_set(err, GP_ENOTPD, NULL,
                                    "the coregionalised covariance is not positive definite");
            double z = w->Z[k * n + i];
            quad += z * z / t;
            logdet += log(t);
            w->Z[k * n + i] = z / t;
        }
    for (size_t j = 0; j < p; j++)
        logdet += (double)n * log(cp->noise[j]);
    *lml = -0.5 * quad - 0.5 * logdet - 0.5 * (double)(n * p) * LOG_2PI;
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (blasint)n, (blasint)p, (blasint)p, 1.0,
                w->Z, (blasint)n, w->V, (blasint)p, 0.0, w->T, (blasint)n);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)n, (blasint)p, (blasint)n,
                1.0, w->U, (blasint)n, w->T, (blasint)n, 0.0, w->A, (blasint)n);
    for (size_t j = 0; j < p; j++)
        cblas_dscal((blasint)n, 1.0 / sqrt(cp->noise[j]), w->A + j * n, 1);
    return GP_OK;
}

/* The kernel's N x N weight (A B A^T - U diag(c) U^T) / 2 and its contraction. */
static int kron_kernel_grad(const gp_coreg_params *cp, const gp_coreg_data *D, kron_work *w,
                            double *gk, const gp_cancel *cancel, gp_error *err)
{
    size_t n = w->n, p = w->p;
    double *Wt = gp_alloc_doubles(n * n, err), *US = gp_alloc_doubles(n * n, err);
    if (Wt == NULL || US == NULL) {
        free(Wt);
        free(US);
        return GP_ENOMEM;
    }
    for (size_t i = 0; i < n; i++) {
        double c = 0.0;
        for (size_t k = 0; k < p; k++)
            c += w->l[k] / (w->s[i] * w->l[k] + 1.0);
        for (size_t r = 0; r < n; r++)
            US[i * n + r] = -0.5 * c * w->U[i * n + r];
    }
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (blasint)n, (blasint)n, (blasint)n, 1.0,
                US, (blasint)n, w->U, (blasint)n, 0.0, Wt, (blasint)n);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)n, (blasint)p, (blasint)p, 1.0,
                w->A, (blasint)n, cp->B, (blasint)p, 0.0, w->T, (blasint)n);
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (blasint)n, (blasint)n, (blasint)p, 0.5,
                w->T, (blasint)n, w->A, (blasint)n, 1.0, Wt, (blasint)n);
    free(US);
    int rc = gp_kernel_gram_grad_contract_cancellable(cp->kernels[0], D->Xt, n, Wt, n, gk, cancel)
                 ? cancelled(err)
                 : GP_OK;
    free(Wt);
    return rc;
}

/* d LML / d B (p x p) and d / d noise (p). */
static void kron_output_grad(const gp_coreg_params *cp, kron_work *w, double *gB, double *gs)
{
    size_t n = w->n, p = w->p;
    double e[GP_COREG_MAX_OUTPUTS], f[GP_COREG_MAX_OUTPUTS];
    for (size_t k = 0; k < p; k++) {
        e[k] = f[k] = 0.0;
        for (size_t i = 0; i < n; i++) {
            double t = w->s[i] * w->l[k] + 1.0;
            e[k] += w->s[i] / t;
            f[k] += 1.0 / t;
        }
    }
    /* T = U^T A: A^T K_x A = T^T S T */
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (blasint)n, (blasint)p, (blasint)n, 1.0,
                w->U, (blasint)n, w->A, (blasint)n, 0.0, w->T, (blasint)n);
    for (size_t j2 = 0; j2 < p; j2++)
        for (size_t j1 = 0; j1 < p; j1++) {
            double q = 0.0, r = 0.0;
            for (size_t i = 0; i < n; i++)
                q += w->s[i] * w->T[j1 * n + i] * w->T[j2 * n + i];
            for (size_t k = 0; k < p; k++)
                r += w->V[k * p + j1] * w->V[k * p + j2] * e[k];
            r /= sqrt(cp->noise[j1] * cp->noise[j2]);
            gB[j2 * p + j1] = 0.5 * (q - r);
        }
    for (size_t j = 0; j < p; j++) {
        double a2 = 0.0, v = 0.0;
        for (size_t i = 0; i < n; i++)
            a2 += w->A[j * n + i] * w->A[j * n + i];
        for (size_t k = 0; k < p; k++)
            v += w->V[k * p + j] * w->V[k * p + j] * f[k];
        gs[j] = 0.5 * (a2 - v / cp->noise[j]);
    }
}

int gp_coreg_kron_factor(const gp_coreg_params *cp, const gp_coreg_data *D, gp_coreg_kron *w,
                         double *lml, const gp_cancel *cancel, gp_error *err)
{
    size_t n = D->n, p = cp->p;
    memset(w, 0, sizeof *w);
    if (cp->q != 1 || D->e->M != n * p)
        return gp_error_set(err, GP_EINVAL, "options.coregionalization.solver",
                            "the Kronecker path needs icm and every output at every row");
    int rc = kron_alloc(w, n, p, err);
    if (rc == GP_OK)
        rc = kron_eigen(cp, D, w, cancel, err);
    if (rc == GP_OK)
        rc = kron_solve(cp, D, w, lml, err);
    if (rc)
        gp_coreg_kron_free(w);
    return rc;
}

int gp_coreg_lml_kronecker(const gp_coreg_params *cp, const gp_coreg_data *D, double *lml,
                           double *grad, const gp_cancel *cancel, gp_error *err)
{
    kron_work w;
    int rc = gp_coreg_kron_factor(cp, D, &w, lml, cancel, err);
    if (rc)
        return rc;
    if (grad) {
        double *gk = gp_alloc_doubles(cp->n_kparams + 1, err);
        double gB[GP_COREG_MAX_OUTPUTS * GP_COREG_MAX_OUTPUTS], gs[GP_COREG_MAX_OUTPUTS];
        rc = gk ? kron_kernel_grad(cp, D, &w, gk, cancel, err) : GP_ENOMEM;
        if (rc == GP_OK) {
            kron_output_grad(cp, &w, gB, gs);
            gp_coreg_params_chain(cp, gk, gB, gs, grad);
        }
        free(gk);
    }
    kron_free(&w);
    return rc;
}
