/* pls: the model's state, the potential, prediction and function draws
 * (§5.2 A5). */
#include "core/methods/pls/model.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"
#include "core/linalg/linalg.h"
#include "core/model/method.h"
#include "core/model/mixture.h"

void pls_impl_free(void *p)
{
    pls_impl *im = p;
    if (im == NULL)
        return;
    gp_kernel_points_free(im->Zp);
    free(im->Z);
    free(im->V);
    free(im->lam);
    free(im->B);
    free(im->A);
    free(im->mu);
    free(im->R);
    free(im);
}

pls_impl *pls_impl_alloc(size_t d, size_t M, size_t mk, size_t J, gp_error *err)
{
    pls_impl *im = calloc(1, sizeof *im);
    if (im == NULL) {
        gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        return NULL;
    }
    im->d = d;
    im->M = M;
    im->mk = mk;
    im->J = J;
    im->Z = gp_alloc_doubles(d * M, err);
    im->V = gp_alloc_doubles(M * mk, err);
    im->lam = gp_alloc_doubles(mk, err);
    im->B = gp_alloc_doubles(M * mk, err);
    int ok = im->Z && im->V && im->lam && im->B;
    if (ok && J > 0)
        ok = (im->A = gp_alloc_doubles(mk * J, err)) != NULL;
    if (ok && J == 0)
        ok = (im->mu = gp_alloc_doubles(mk, err)) && (im->R = gp_alloc_doubles(mk * mk, err));
    if (!ok) {
        pls_impl_free(im);
        return NULL;
    }
    return im;
}

/* B from V and lambda (§5.2 A3), and Z prepared for the kernel k of the
 * model (k(Z, x) of every prediction block without rescaling Z): the same
 * code at fit and import, so an imported model predicts bit for bit as the
 * fitted one. Scaling by the number of landmarks M, not mk (pitfall P14). */
int pls_impl_derive(pls_impl *im, const gp_kernel *k, gp_error *err)
{
    double M = (double)im->M;
    for (size_t m = 0; m < im->mk; m++) {
        double s = im->rmode ? 1.0 / sqrt(M) : 1.0 / sqrt(M * im->lam[m]);
        for (size_t i = 0; i < im->M; i++)
            im->B[m * im->M + i] = im->V[m * im->M + i] * s;
    }
    return gp_kernel_points_new(k, im->Z, im->M, &im->Zp, err);
}

/* H (mk x mk) = the lower Cholesky factor of I + alpha S S^T for S (mk x n),
 * the upper half unspecified: the closed form's H, the Laplace Hessian and
 * the bound preconditioner. GP_ENOTPD when it is not positive definite. */
int pls_chol_identity_plus_gram(const double *S, size_t mk, size_t n, double alpha,
                                double *H)
{
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)mk, (blasint)n, alpha, S,
                (blasint)mk, 0.0, H, (blasint)mk);
    for (size_t i = 0; i < mk; i++)
        H[i * mk + i] += 1.0;
    return LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)mk, H, (lapack_int)mk) == 0
               ? GP_OK
               : GP_ENOTPD;
}

/* ---- the potential (§5.2 A3) ---- */

/* log p(y | f) summed, g = -d log p / df (n); clipped for poisson_sq when clip. */
double pls_loglik_and_g(const gp_lik *lik, const double *y, const double *f, size_t n,
                        double *g, int clip)
{
    double ll = gp_lik_log_density_sum(lik, y, f, n, g);
    for (size_t i = 0; i < n; i++) {
        double v = -g[i];
        if (clip && lik->type == GP_LIK_POISSON_SQ)
            v = v > SQ_GRAD_MAX ? SQ_GRAD_MAX : (v < -SQ_GRAD_MAX ? -SQ_GRAD_MAX : v);
        g[i] = v;
    }
    return ll;
}

double gp_pls_potential(const gp_lik *lik, const double *Phi, size_t mk, size_t n,
                        const double *y, const double *a, double *grad)
{
    double *f = malloc(n * sizeof *f), *g = malloc(n * sizeof *g);
    if (f == NULL || g == NULL) {
        free(f);
        free(g);
        return NAN;
    }
    cblas_dgemv(CblasColMajor, CblasTrans, (blasint)mk, (blasint)n, 1.0, Phi, (blasint)mk, a, 1,
                0.0, f, 1);
    double v = -pls_loglik_and_g(lik, y, f, n, g, 0) + 0.5 * cblas_ddot((blasint)mk, a, 1, a, 1);
    if (grad) {
        memcpy(grad, a, mk * sizeof *a);
        cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)mk, (blasint)n, 1.0, Phi, (blasint)mk,
                    g, 1, 1.0, grad, 1);
    }
    free(f);
    free(g);
    return v;
}

/* Phi (mk x b) = B^T k(Z, X) for b points X (d x b); K (M x b) gets k(Z, X).
 * k is the kernel im->Zp was prepared with. */
void pls_features(const gp_kernel *k, const pls_impl *im, const double *X, size_t b,
                  double *K, double *Phi)
{
    gp_kernel_cross_points(k, im->Zp, X, b, K, im->M);
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (blasint)im->mk, (blasint)b,
                (blasint)im->M, 1.0, im->B, (blasint)im->M, K, (blasint)im->M, 0.0, Phi,
                (blasint)im->mk);
}

/* ---- A5: prediction ---- */

/* k -= V t for one point (V M x mk, t mk): column by column in order, so
 * the point's bits are its own (ISO C: no contraction into fma). */
static void subtract_projection(const double *V, size_t M, size_t mk, const double *t, double *k)
{
    for (size_t j = 0; j < mk; j++) {
        const double *v = V + j * M;
        double tj = t[j];
        for (size_t r = 0; r < M; r++)
            k[r] -= v[r] * tj;
    }
}

/* Residual covariance (§5.2 A5) of the b points: res (b) its clamped
 * diagonal; S (b x b, may be NULL) the full matrix with that diagonal.
 * K holds k(Z, X) and is overwritten (r-mode).
 * A point's squared norms are gp_dot, not cblas_ddot: OpenBLAS's SSE2 ddot
 * (the Prescott kernels, what 0.3.21 falls back to on CPUs it does not know)
 * peels one term when a vector is not 16-byte aligned, so the bits of column
 * i of a block (offset i * mk) depended on i's parity, i.e. on the other
 * points of the call (gp_model_predict_batch, core/model/model.h).
 * S, asked with a full covariance only, is BLAS's; its diagonal is res. */
static void residual(const gp_kernel *k, const pls_impl *im, const double *X, size_t b,
                     double *K, const double *Phi, double *res, double *S, double *tmp)
{
    size_t M = im->M, mk = im->mk;
    if (im->rmode) { /* (1/M) |(I - V V^T) k_Z(x)|^2, point by point (see point_means) */
        gp_dot_columns(im->V, M, mk, K, M, b, M, tmp, mk);
        for (size_t i = 0; i < b; i++)
            subtract_projection(im->V, M, mk, tmp + i * mk, K + i * M);
        for (size_t i = 0; i < b; i++)
            res[i] = gp_dot(K + i * M, K + i * M, M) / (double)M;
        if (S)
            cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)b, (blasint)M,
                        1.0 / (double)M, K, (blasint)M, 0.0, S, (blasint)b);
    } else { /* k(x, x) - |phi(x)|^2 */
        for (size_t i = 0; i < b; i++) {
            const double *phi = Phi + i * mk;
            double r = gp_kernel_diag(k, X + i * im->d) - gp_dot(phi, phi, mk);
            res[i] = r > 0.0 ? r : 0.0;
        }
        if (S) {
            gp_kernel_gram(k, X, b, S, b);
            cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)b, (blasint)mk, -1.0,
                        Phi, (blasint)mk, 1.0, S, (blasint)b);
        }
    }
    if (S) {
        for (size_t i = 0; i < b; i++)
            S[i * b + i] = res[i];
        gp_symmetrize_from_lower(S, b, b);
    }
}

typedef struct pred_buf {
    double *Xs, *K, *Phi, *res, *tmp;
} pred_buf;

static void pred_buf_free(pred_buf *p)
{
    free(p->Xs);
    free(p->K);
    free(p->Phi);
    free(p->res);
    free(p->tmp);
}

static int pred_buf_alloc(pred_buf *p, const pls_impl *im, size_t b, gp_error *err)
{
    memset(p, 0, sizeof *p);
    size_t big = im->M > im->mk ? im->M : im->mk, cnt = 0;
    int rc = gp_checked_size(big, b, &cnt, err);
    if (rc)
        return rc;
    p->Xs = gp_alloc_doubles(im->d * b, err);
    p->K = gp_alloc_doubles(cnt, err);
    p->Phi = gp_alloc_doubles(cnt, err);
    p->tmp = gp_alloc_doubles(cnt, err);
    p->res = gp_alloc_doubles(b, err);
    return p->Xs && p->K && p->Phi && p->tmp && p->res ? GP_OK : GP_ENOMEM;
}

/* K (M x b) = k(Z, X), Phi (mk x b) and the component means (rows of mu,
 * ld m) of the b points, each point by its own arithmetic in a fixed order
 * (gp_dot_columns, gp_dot), so that its bits do not depend on the other
 * points of the call and pls is batch_invariant (core/model/method.h).
 * dgemm's would: OpenBLAS's AVX-512 (SkylakeX) dgemm picks a small-matrix
 * kernel or the packed one by the product's size (transposed A: m n <= 1200),
 * so a point got other bits among 16 points than among 32. */
static void point_means(const gp_model *model, const pls_impl *im, pred_buf *p, size_t b,
                        size_t m, double *mu)
{
    size_t mk = im->mk, M = im->M;
    gp_kernel_cross_points(model->kernel, im->Zp, p->Xs, b, p->K, M);
    gp_dot_columns(im->B, M, mk, p->K, M, b, M, p->Phi, mk);
    if (im->J) /* mu[i + j m] = phi_i . a_j */
        gp_dot_columns(p->Phi, mk, b, im->A, mk, im->J, mk, mu, m);
    else
        for (size_t i = 0; i < b; i++)
            mu[i] = gp_dot(p->Phi + i * mk, im->mu, mk);
}

/* Component means and variances of b points at rows start.. of mu/var (ld
 * m), working units; cov (b x b = m x m, may be NULL) the latent covariance
 * given the coefficients' law: closed form W^T W + S_res, particles S_res. */
static void predict_block(const gp_model *model, const pls_impl *im, pred_buf *p, size_t b,
                          size_t m, double *mu, double *var, double *cov)
{
    size_t mk = im->mk, K = im->J ? im->J : 1;
    point_means(model, im, p, b, m, mu);
    residual(model->kernel, im, p->Xs, b, p->K, p->Phi, p->res, cov, p->tmp);
    for (size_t i = 0; i < b; i++)
        for (size_t k = 0; k < K; k++)
            var[k * m + i] = p->res[i];
    if (im->J == 0) { /* + |R^{-1} phi|^2: the invariant solve, gp_dot (see residual) */
        memcpy(p->tmp, p->Phi, mk * b * sizeof *p->Phi);
        gp_solve_lower_columns(im->R, mk, mk, p->tmp, b, mk);
        for (size_t i = 0; i < b; i++)
            var[i] += gp_dot(p->tmp + i * mk, p->tmp + i * mk, mk);
        if (cov) {
            cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)b, (blasint)mk, 1.0,
                        p->tmp, (blasint)mk, 1.0, cov, (blasint)b);
            for (size_t i = 0; i < b; i++)
                cov[i * b + i] = var[i];
            gp_symmetrize_from_lower(cov, b, b);
        }
    }
}

/* Rows s .. s + b of X (m x d, original units) standardised, point-major. */
static void block_points(const gp_model *model, const double *X, size_t m, size_t s, size_t b,
                         double *out)
{
    size_t d = model->input_dim;
    for (size_t k = 0; k < d; k++)
        for (size_t i = 0; i < b; i++)
            out[i * d + k] = (X[k * m + s + i] - model->x_mean[k]) / model->x_scale[k];
}

static int components_all(const gp_model *model, const pls_impl *im, const double *X, size_t m,
                          int noise, double *mu, double *var, double *cov, gp_error *err)
{
    size_t K = im->J ? im->J : 1, width = 3 * (im->M > im->mk ? im->M : im->mk) + K + im->d;
    size_t block = cov ? m : gp_predict_block_rows(width, m);
    pred_buf p;
    int rc = pred_buf_alloc(&p, im, block, err);
    for (size_t s = 0; rc == GP_OK && s < m; s += block) {
        size_t b = m - s < block ? m - s : block;
        block_points(model, X, m, s, b, p.Xs);
        predict_block(model, im, &p, b, m, mu + s, var + s, cov);
    }
    pred_buf_free(&p);
    if (rc)
        return rc;
    double ys = model->y_scale, ys2 = ys * ys;
    double s2 = noise && model->likelihood == GP_LIK_GAUSSIAN ? model->noise_variance : 0.0;
    for (size_t i = 0; i < m * K; i++) {
        mu[i] = mu[i] * ys + model->y_mean;
        var[i] = (var[i] + s2) * ys2;
    }
    if (cov)
        for (size_t i = 0; i < m * m; i++)
            cov[i] = (cov[i] + (i % (m + 1) == 0 ? s2 : 0.0)) * ys2;
    return GP_OK;
}

/* The particles' sample covariance (1/J) sum_j (mu_j - mean)(mu_j - mean)^T
 * added to cov (law of total covariance; 1/J as gp_mixture_moments). */
static int add_between(const double *mu, const double *mean, size_t m, size_t J, double *cov,
                       gp_error *err)
{
    size_t cnt = 0;
    int rc = gp_checked_size(m, J, &cnt, err);
    double *D = rc ? NULL : gp_alloc_doubles(cnt, err);
    if (D == NULL)
        return rc ? rc : GP_ENOMEM;
    for (size_t k = 0; k < J; k++)
        for (size_t i = 0; i < m; i++)
            D[k * m + i] = mu[k * m + i] - mean[i];
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)m, (blasint)J,
                1.0 / (double)J, D, (blasint)m, 1.0, cov, (blasint)m);
    gp_symmetrize_from_lower(cov, m, m);
    free(D);
    return GP_OK;
}

int pls_predict(const gp_model *model, const gp_predict_request *req, gp_prediction *out,
                gp_error *err)
{
    const pls_impl *im = model->impl;
    size_t m = req->m, K = im->J ? im->J : 1, mK = 0;
    if (m == 0)
        return GP_OK;
    int rc = gp_checked_size(m, K, &mK, err);
    if (rc)
        return rc;
    double *mu = req->components ? out->component_mean : gp_alloc_doubles(mK, err);
    double *var = req->components ? out->component_variance : gp_alloc_doubles(mK, err);
    double *cov = req->full_covariance ? out->covariance : NULL;
    rc = mu && var ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK)
        rc = components_all(model, im, req->X, m, req->include_noise, mu, var, cov, err);
    if (rc == GP_OK)
        gp_mixture_moments(mu, var, m, K, out->mean, out->variance);
    if (rc == GP_OK && cov && im->J)
        rc = add_between(mu, out->mean, m, K, cov, err);
    for (size_t i = 0; rc == GP_OK && cov && i < m; i++)
        out->variance[i] = cov[i * m + i];
    if (rc == GP_OK && req->n_quantiles)
        gp_mixture_quantiles(mu, var, m, K, req->quantiles, req->n_quantiles, out->quantiles);
    if (!req->components) {
        free(mu);
        free(var);
    }
    return rc;
}

/* ---- A5: function draws ---- */

/* Coefficients of draw s (mk x S): particle s mod J, or for the closed form
 * a fresh mu + R^{-T} xi with xi the first mk normals of draw s's stream. */
static void draw_coefficients(const pls_impl *im, gp_rng *rng, size_t S, double *C)
{
    size_t mk = im->mk;
    for (size_t s = 0; s < S; s++) {
        double *c = C + s * mk;
        if (im->J) {
            memcpy(c, im->A + (s % im->J) * mk, mk * sizeof *c);
            continue;
        }
        gp_rng_normal_fill(&rng[s], c, mk);
        cblas_dtrsv(CblasColMajor, CblasLower, CblasTrans, CblasNonUnit, (blasint)mk, im->R,
                    (blasint)mk, c, 1);
        cblas_daxpy((blasint)mk, 1.0, im->mu, 1, c, 1);
    }
}

/* samples (m x S) += chol(S_res + jitter) zeta_s, zeta_s the next m normals
 * of draw s's stream; Sres is factored in place (its lower triangle). Nothing
 * when the residual vanishes (every point on the landmarks' span). */
static int add_residual(double *Sres, size_t m, gp_rng *rng, size_t S, double *samples,
                        gp_error *err)
{
    double tr = 0.0;
    for (size_t i = 0; i < m; i++)
        tr += Sres[i * m + i];
    if (!(tr > 1e-300))
        return GP_OK;
    double *z = gp_alloc_doubles(m, err);
    int rc = z ? gp_cholesky_jitter(Sres, m, m, NULL, err) : GP_ENOMEM;
    for (size_t s = 0; rc == GP_OK && s < S; s++) {
        gp_rng_normal_fill(&rng[s], z, m);
        cblas_dtrmv(CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)m, Sres,
                    (blasint)m, z, 1);
        cblas_daxpy((blasint)m, 1.0, z, 1, samples + s * m, 1);
    }
    free(z);
    return rc;
}

/* Joint draws F_s(X*) = phi(X*)^T a_s + chol(S_res(X*, X*)) zeta_s (§5.2 A5):
 * draw s has its own stream gp_rng_derive(req->seed, s) (closed form: mk
 * normals for a_s, then m for zeta_s, then m for the noise). For the
 * particle models a_s is particle s mod J, so draws 0 .. J-1 are the J
 * fitted posterior functions, the same in every request; the residual part
 * is a joint draw over the request's points (same seed and points: same
 * functions). Gaussian: original units, noise added with include_noise. */
int pls_sample(const gp_model *model, const gp_sample_request *req, double *samples,
               gp_error *err)
{
    const pls_impl *im = model->impl;
    size_t m = req->m, S = req->n_samples, mk = im->mk;
    if (m == 0 || S == 0)
        return GP_OK;
    pred_buf p;
    gp_rng *rng = malloc(S * sizeof *rng);
    double *C = gp_alloc_doubles(mk * S, err), *Sres = gp_alloc_doubles(m * m, err);
    int rc = rng && C && Sres ? pred_buf_alloc(&p, im, m, err) : GP_ENOMEM;
    if (rc == GP_OK) {
        for (size_t s = 0; s < S; s++)
            gp_rng_derive(&rng[s], req->seed, s);
        block_points(model, req->X, m, 0, m, p.Xs);
        pls_features(model->kernel, im, p.Xs, m, p.K, p.Phi);
        residual(model->kernel, im, p.Xs, m, p.K, p.Phi, p.res, Sres, p.tmp);
        draw_coefficients(im, rng, S, C);
        cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (blasint)m, (blasint)S, (blasint)mk,
                    1.0, p.Phi, (blasint)mk, C, (blasint)mk, 0.0, samples, (blasint)m);
        rc = add_residual(Sres, m, rng, S, samples, err);
    }
    int noise = req->include_noise && model->likelihood == GP_LIK_GAUSSIAN;
    double sd = sqrt(model->noise_variance);
    for (size_t s = 0; rc == GP_OK && s < S; s++)
        for (size_t i = 0; i < m; i++) {
            double f = samples[s * m + i] + (noise ? sd * gp_rng_normal(&rng[s]) : 0.0);
            samples[s * m + i] = f * model->y_scale + model->y_mean;
        }
    if (rng && C && Sres)
        pred_buf_free(&p);
    free(rng);
    free(C);
    free(Sres);
    return rc;
}
