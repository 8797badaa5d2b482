/* Predictions and joint samples of a coregionalised exact model
 * (core/coreg/exact.h), the same per-point code on both paths. */
#include "core/coreg/exact_predict.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/linalg/linalg.h"

/* ---- predict ----
 * Column (i, j) of a block: the covariance of (point i, output j) with the
 * entries, c_a = sum_q B_q[j, j_a] k_q(x_i, x_{row a}); its mean c^T alpha
 * and its whitened column v = L^-1 c (gp_solve_lower_columns: a column's
 * bits are its own), so a point's answer does not depend on the others. */

typedef struct pred_block {
    size_t m;        /* points */
    double *Kc;      /* q x (n x m): k_q(X_train, points) */
    double *V;       /* M x (m p): column i + m j */
    double *mu;      /* m p latent means, working units */
    double *prior;   /* q x m: k_q(x_i, x_i) */
} pred_block;

static void block_free(pred_block *b)
{
    free(b->Kc);
    free(b->V);
    free(b->mu);
    free(b->prior);
}

/* The Kronecker path's whitened columns: K^-1 = W W^T with W = (I (x)
 * D^-1/2)(U (x) V) diag(t)^-1/2, so column (i, j) is v[r + n k] = u_r c_jk /
 * sqrt(t_rk) with u = U^T k_x(x_i), and its mean k_x(x_i) . (A B)[:, j]:
 * per-point dots in a fixed order, as the general path's solve. */
static int kron_columns(const gp_coreg_exact *ce, pred_block *b, gp_error *err)
{
    size_t n = ce->n, p = ce->cp.p, m = b->m, M = n * p;
    double *u = gp_alloc_doubles(n ? n : 1, err);
    if (u == NULL)
        return GP_ENOMEM;
    for (size_t i = 0; i < m; i++) {
        const double *kx = b->Kc + i * n;
        for (size_t r = 0; r < n; r++)
            u[r] = gp_dot(ce->kr.U + r * n, kx, n);
        for (size_t j = 0; j < p; j++) {
            double *v = b->V + (j * m + i) * M;
            for (size_t k = 0; k < p; k++)
                for (size_t r = 0; r < n; r++)
                    v[k * n + r] = u[r] * ce->c[j * p + k] * ce->rt[k * n + r];
            b->mu[j * m + i] = gp_dot(kx, ce->AB + j * n, n);
        }
    }
    free(u);
    return GP_OK;
}

static int block_columns(const gp_coreg_exact *ce, const double *P, size_t m, pred_block *b,
                         gp_error *err)
{
    size_t n = ce->n, M = ce->e.M, p = ce->cp.p, q = ce->cp.q, c1 = 0, c2 = 0;
    memset(b, 0, sizeof *b);
    b->m = m;
    int rc = gp_checked_size(q * n, m, &c1, err);
    if (rc == GP_OK)
        rc = gp_checked_size(M, m * p, &c2, err);
    if (rc)
        return rc;
    if (!(b->Kc = gp_alloc_doubles(c1 ? c1 : 1, err)) || !(b->V = gp_alloc_doubles(c2 ? c2 : 1, err)) ||
        !(b->mu = gp_alloc_doubles(m * p + 1, err)) || !(b->prior = gp_alloc_doubles(q * m + 1, err)))
        return GP_ENOMEM;
    for (size_t l = 0; l < q; l++) {
        gp_kernel_cross(ce->cp.kernels[l], ce->Xt, n, P, m, b->Kc + l * n * m, n);
        for (size_t i = 0; i < m; i++)
            b->prior[l * m + i] = gp_kernel_diag(ce->cp.kernels[l], P + i * ce->d);
    }
    if (ce->kronecker)
        return kron_columns(ce, b, err);
    for (size_t j = 0; j < p; j++)
        for (size_t i = 0; i < m; i++) {
            double *v = b->V + (j * m + i) * M;
            for (size_t a = 0; a < M; a++) {
                double s = 0.0;
                for (size_t l = 0; l < q; l++)
                    s += ce->cp.B[l * p * p + ce->e.out[a] * p + j] *
                         b->Kc[l * n * m + i * n + ce->e.row[a]];
                v[a] = s;
            }
            b->mu[j * m + i] = gp_dot(v, ce->alpha, M);
        }
    gp_solve_lower_columns(ce->L, M, M, b->V, m * p, M);
    return GP_OK;
}

/* Latent covariance (working units) of columns c1 = (i1, j1), c2 = (i2, j2). */
static double latent_cov(const gp_coreg_exact *ce, const double *P, const pred_block *b,
                         size_t c1, size_t c2)
{
    size_t m = b->m, p = ce->cp.p, M = ce->e.M;
    size_t i1 = c1 % m, j1 = c1 / m, i2 = c2 % m, j2 = c2 / m;
    double s = 0.0;
    for (size_t l = 0; l < ce->cp.q; l++) {
        double k = i1 == i2 ? b->prior[l * m + i1]
                            : gp_kernel_eval(ce->cp.kernels[l], P + i1 * ce->d, P + i2 * ce->d, 0);
        s += ce->cp.B[l * p * p + j2 * p + j1] * k;
    }
    return s - gp_dot(b->V + c1 * M, b->V + c2 * M, M);
}

static double clamp_variance(double v, size_t *clamped)
{
    if (v < 0.0) {
        (*clamped)++;
        return 0.0;
    }
    return v;
}

static void fill_covariances(const gp_coreg_exact *ce, const double *P, const pred_block *b,
                             int include_noise, gp_prediction *out)
{
    size_t m = b->m, p = ce->cp.p, mp = m * p;
    for (size_t c2 = 0; c2 < mp; c2++)
        for (size_t c1 = 0; c1 < mp; c1++) {
            size_t j1 = c1 / m, j2 = c2 / m;
            double v = latent_cov(ce, P, b, c1, c2);
            if (c1 == c2)
                v = clamp_variance(v + (include_noise ? ce->cp.noise[j1] : 0.0), &out->clamped);
            v *= ce->cp.y_scale[j1] * ce->cp.y_scale[j2];
            if (out->cross_covariance)
                out->cross_covariance[c2 * mp + c1] = v;
            if (j1 == j2 && out->covariance)
                out->covariance[j1 * m * m + (c2 % m) * m + c1 % m] = v;
        }
}

/* Means and variances of the b points P (working units) into out's rows
 * start .. start + b (original units). */
static int predict_rows(const gp_coreg_exact *ce, const double *P, size_t b, size_t start,
                        size_t m, int include_noise, gp_prediction *out, gp_error *err)
{
    pred_block blk;
    int rc = block_columns(ce, P, b, &blk, err);
    for (size_t j = 0; rc == GP_OK && j < ce->cp.p; j++)
        for (size_t i = 0; i < b; i++) {
            size_t c = j * b + i, o = j * m + start + i;
            double v = latent_cov(ce, P, &blk, c, c) + (include_noise ? ce->cp.noise[j] : 0.0);
            out->mean[o] = ce->cp.y_mean[j] + ce->cp.y_scale[j] * blk.mu[c];
            out->variance[o] =
                ce->cp.y_scale[j] * ce->cp.y_scale[j] * clamp_variance(v, &out->clamped);
        }
    block_free(&blk);
    return rc;
}

/* Points per block: the whitened columns (M x b p) stay below 4M doubles;
 * a point's bits do not depend on its block. */
#define PREDICT_BLOCK_DOUBLES ((size_t)4 << 20)

int gp_coreg_exact_predict(const gp_model *model, const gp_coreg_exact *ce,
                           const gp_predict_request *req, gp_prediction *out, gp_error *err)
{
    size_t m = req->m, d = ce->d, per = ce->e.M * ce->cp.p;
    size_t block = per ? PREDICT_BLOCK_DOUBLES / per : m;
    block = block < 1 ? 1 : block > m ? m : block;
    double *P = NULL;
    int rc = gp_model_points(model, req->X, m, &P, err);
    if (rc == GP_OK && req->full_covariance) { /* one block: every pair is asked */
        pred_block b;
        rc = block_columns(ce, P, m, &b, err);
        if (rc == GP_OK)
            fill_covariances(ce, P, &b, req->include_noise, out);
        block_free(&b);
    }
    for (size_t s = 0; rc == GP_OK && s < m; s += block) {
        size_t b = m - s < block ? m - s : block;
        rc = predict_rows(ce, P + s * d, b, s, m, req->include_noise, out, err);
    }
    free(P);
    return rc;
}

/* ---- sample ---- */

int gp_coreg_exact_sample(const gp_model *model, const gp_coreg_exact *ce,
                          const gp_sample_request *req, double *samples, gp_error *err)
{
    size_t m = req->m, p = ce->cp.p, mp = m * p, ns = req->n_samples, cc = 0;
    double *P = NULL, *C = NULL;
    pred_block b;
    memset(&b, 0, sizeof b);
    int rc = gp_model_points(model, req->X, m, &P, err);
    if (rc == GP_OK)
        rc = gp_checked_size(mp, mp, &cc, err);
    if (rc == GP_OK && (C = gp_alloc_doubles(cc ? cc : 1, err)) == NULL)
        rc = GP_ENOMEM;
    if (rc == GP_OK)
        rc = block_columns(ce, P, m, &b, err);
    for (size_t c2 = 0; rc == GP_OK && c2 < mp; c2++)
        for (size_t c1 = 0; c1 < mp; c1++)
            C[c2 * mp + c1] = latent_cov(ce, P, &b, c1, c2) +
                              (c1 == c2 && req->include_noise ? ce->cp.noise[c1 / m] : 0.0);
    gp_chol_info info;
    if (rc == GP_OK && mp > 0)
        rc = gp_cholesky_jitter(C, mp, mp, &info, err);
    if (rc == GP_OK) {
        gp_rng rng;
        gp_rng_seed(&rng, req->seed);
        double *e = gp_alloc_doubles(mp + 1, err);
        for (size_t s = 0; e && s < ns; s++) {
            gp_rng_normal_fill(&rng, e, mp);
            for (size_t c = 0; c < mp; c++) { /* f = mu + L e, L lower */
                double f = b.mu[c];
                for (size_t k = 0; k <= c; k++)
                    f += C[k * mp + c] * e[k];
                size_t i = c % m, j = c / m;
                samples[j * m * ns + s * m + i] = ce->cp.y_mean[j] + ce->cp.y_scale[j] * f;
            }
        }
        rc = e ? GP_OK : GP_ENOMEM;
        free(e);
    }
    block_free(&b);
    free(C);
    free(P);
    return rc;
}

