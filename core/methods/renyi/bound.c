/* The Renyi bound L_a and its gradient (core/methods/renyi/bound.h): the dense
 * algorithm of docs/methods/renyi-gp.md §2.4: Xi (N x N) is built in
 * place over Kff, factorised once, and its inverse then overwritten by the
 * dense gradient weight G_K; the low-rank weight G_Q is kept factored (never
 * N x N) and chained through Q = Kfu Kuu^{-1} Kuf by gp_inducing_contract. */
#include "core/methods/renyi/bound.h"

#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/inducing/inducing.h"
#include "core/linalg/linalg.h"

#define LOG_2PI 1.8378770664093454836

/* ---- the bound ---- */

typedef struct rb_work {
    const gp_kernel *k;
    double s2, a;
    const double *X, *y, *Z;
    const double *r; /* n known per-point noise variances (NULL: none): Xi's diagonal
                        then carries lambda_i = s2 + r_i where it carried s2 */
    size_t n, m, d;
    double *L;  /* m x m chol(Kuu + jitter) */
    double *V;  /* m x n L^{-1} Kuf */
    double *A;  /* n x n Kff -> Xi -> chol(Xi) -> Xi^{-1} -> G_K */
    double *R;  /* n x m Xi^{-1} V^T, then RL = R LC^{-T} */
    double *w;  /* n Xi^{-1} y */
    double *mt; /* m V w */
    double *C;  /* m x m I - V R (full) */
    double *LC; /* m x m chol(C) */
    /* A mean profiled out (renyi_bound_eval): its type, the estimate's
     * destination (p entries), and H, Xi^{-1} H (n x p each) and the
     * residual targets y - H beta, which W->y then points to. */
    gp_mean_type mean;
    size_t p;
    double *beta, *H, *yres;
    double jitter, trace, logdet_xi, logdet_c, bound, upper;
} rb_work;

static void rb_free(rb_work *W)
{
    free(W->L);
    free(W->V);
    free(W->A);
    free(W->R);
    free(W->w);
    free(W->mt);
    free(W->C);
    free(W->LC);
    free(W->H);
    free(W->yres);
}

static int rb_alloc(rb_work *W, gp_error *err)
{
    size_t nn = 0, nm = 0, mm = 0;
    int rc = gp_checked_size(W->n, W->n, &nn, err);
    if (rc == GP_OK)
        rc = gp_checked_size(W->n, W->m, &nm, err);
    if (rc == GP_OK)
        rc = gp_checked_size(W->m, W->m, &mm, err);
    if (rc)
        return rc;
    W->L = gp_alloc_doubles(mm, err);
    W->V = gp_alloc_doubles(nm, err);
    W->A = gp_alloc_doubles(nn, err);
    W->R = gp_alloc_doubles(nm, err);
    W->w = gp_alloc_doubles(W->n, err);
    W->mt = gp_alloc_doubles(W->m, err);
    W->C = gp_alloc_doubles(mm, err);
    W->LC = gp_alloc_doubles(mm, err);
    if (!W->L || !W->V || !W->A || !W->R || !W->w || !W->mt || !W->C || !W->LC)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory for the renyi bound");
    return GP_OK;
}

static double frob2(const double *x, size_t count)
{
    return cblas_ddot((blasint)count, x, 1, x, 1);
}

/* Kuu factor, V, and Xi = s2 I + (1-a) Kff + a V^T V in A (full symmetric);
 * also t = tr(Kff) - ||V||_F^2. */
static int rb_build_xi(rb_work *W, gp_error *err)
{
    size_t n = W->n, m = W->m;
    int rc = gp_inducing_kuu_factor(W->k, W->Z, m, W->L, &W->jitter, err);
    if (rc)
        return rc;
    gp_kernel_cross(W->k, W->Z, m, W->X, n, W->V, m);
    gp_trsm_lower(W->L, m, m, 0, W->V, n, m);
    gp_kernel_gram(W->k, W->X, n, W->A, n);
    double sumk = 0.0;
    for (size_t i = 0; i < n; i++)
        sumk += W->A[i * n + i];
    W->trace = sumk - frob2(W->V, n * m);
    for (size_t j = 0; j < n; j++) {
        double *col = W->A + j * n;
        for (size_t i = j; i < n; i++)
            col[i] *= 1.0 - W->a;
        col[j] += W->s2;
        if (W->r)
            col[j] += W->r[j];
    }
    cblas_dsyrk(CblasColMajor, CblasLower, CblasTrans, (blasint)n, (blasint)m, W->a, W->V,
                (blasint)m, 1.0, W->A, (blasint)n);
    gp_symmetrize_from_lower(W->A, n, n);
    return GP_OK;
}

/* L_upper (docs/methods/renyi-gp.md §5.1) needs y^T (Xi + a t I)^{-1} y: one more Cholesky, on
 * its own buffer B (a copy of Xi taken before rb_value factors it, so that
 * y can be the residual of a profiled mean), done only when the caller asks
 * for the terms. */
static int rb_upper_quad(const rb_work *W, double *B, double *quad, gp_error *err)
{
    size_t n = W->n;
    double *z = gp_alloc_doubles(n, err);
    int rc = z ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK) {
        for (size_t i = 0; i < n; i++)
            B[i * n + i] += W->a * W->trace;
        rc = gp_cholesky_jitter(B, n, n, NULL, err);
    }
    if (rc == GP_OK) {
        memcpy(z, W->y, n * sizeof *z);
        gp_chol_solve(B, n, n, z, 1, n);
        *quad = cblas_ddot((blasint)n, W->y, 1, z, 1);
    }
    free(z);
    return rc;
}

/* The mean profiled out of log N(y; 0, Xi), the only term with y: on the
 * factor of Xi (in A) and w = Xi^{-1} y, beta = (H^T Xi^{-1} H)^{-1} H^T w,
 * then y - H beta into yres (W->y from here on) and w -= Xi^{-1} H beta:
 * O(N^2 p), the maximum over beta of the bound at these hyperparameters. */
static int rb_profile(rb_work *W, gp_error *err)
{
    size_t n = W->n, p = W->p, np = 0;
    /* H, HX (n x p each), G (p x p), b (p) */
    int rc = gp_checked_size(2 * n + p + 1, p, &np, err);
    if (rc == GP_OK && (!(W->H = gp_alloc_doubles(np, err)) ||
                        !(W->yres = gp_alloc_doubles(n, err))))
        rc = GP_ENOMEM;
    if (rc)
        return rc;
    double *HX = W->H + n * p, *G = HX + n * p, *b = G + p * p;
    gp_mean_basis(W->mean, W->X, W->d, n, W->H);
    memcpy(HX, W->H, n * p * sizeof *HX);
    gp_chol_solve(W->A, n, n, HX, p, n);
    cblas_dgemm(CblasColMajor, CblasTrans, CblasNoTrans, (blasint)p, (blasint)p, (blasint)n, 1.0,
                W->H, (blasint)n, HX, (blasint)n, 0.0, G, (blasint)p);
    cblas_dgemv(CblasColMajor, CblasTrans, (blasint)n, (blasint)p, 1.0, W->H, (blasint)n, W->w,
                1, 0.0, b, 1);
    if ((rc = gp_mean_solve_normal(G, b, p, err)) != GP_OK)
        return rc;
    if (W->beta)
        memcpy(W->beta, b, p * sizeof *b);
    memcpy(W->yres, W->y, n * sizeof *W->yres);
    cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)n, (blasint)p, -1.0, W->H, (blasint)n, b, 1,
                1.0, W->yres, 1);
    cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)n, (blasint)p, -1.0, HX, (blasint)n, b, 1,
                1.0, W->w, 1);
    W->y = W->yres;
    return GP_OK;
}

/* C = I - V R, symmetrised against rounding, and its factor LC. */
static int rb_factor_c(rb_work *W, gp_error *err)
{
    size_t m = W->m;
    for (size_t i = 0; i < m * m; i++)
        W->C[i] = 0.0;
    for (size_t i = 0; i < m; i++)
        W->C[i * m + i] = 1.0;
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)m, (blasint)m, (blasint)W->n,
                -1.0, W->V, (blasint)m, W->R, (blasint)W->n, 1.0, W->C, (blasint)m);
    gp_symmetrize_average(W->C, m, m);
    memcpy(W->LC, W->C, m * m * sizeof *W->LC);
    lapack_int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)m, W->LC, (lapack_int)m);
    if (info != 0)
        return gp_error_set(err, GP_ENOTPD, NULL, "C = I - V Xi^{-1} V^T is not positive "
                                                  "definite");
    W->logdet_c = gp_chol_logdet(W->LC, m, m);
    return GP_OK;
}

/* chol(Xi), w, R, C and the value L_a. */
static int rb_value(rb_work *W, gp_error *err)
{
    size_t n = W->n, m = W->m;
    if (gp_cholesky_jitter(W->A, n, n, NULL, err) != GP_OK)
        return gp_error_set(err, GP_ENOTPD, NULL, "Xi cannot be factorised");
    W->logdet_xi = gp_chol_logdet(W->A, n, n);
    memcpy(W->w, W->y, n * sizeof *W->w);
    gp_chol_solve(W->A, n, n, W->w, 1, n);
    if (W->p) {
        int prc = rb_profile(W, err);
        if (prc)
            return prc;
    }
    for (size_t j = 0; j < m; j++)
        cblas_dcopy((blasint)n, W->V + j, (blasint)m, W->R + j * n, 1);
    gp_chol_solve(W->A, n, n, W->R, m, n);
    cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)m, (blasint)n, 1.0, W->V, (blasint)m,
                W->w, 1, 0.0, W->mt, 1);
    int rc = rb_factor_c(W, err);
    if (rc)
        return rc;
    double c = W->a > 0.0 ? W->a / (2.0 * (1.0 - W->a)) : 0.0;
    /* log|A| = log|Xi| + log|C| - log|Lambda|, Lambda = s2 I (+ diag r) */
    double log_lambda = (double)n * log(W->s2);
    if (W->r) {
        log_lambda = 0.0;
        for (size_t i = 0; i < n; i++)
            log_lambda += log(W->s2 + W->r[i]);
    }
    double log_a = W->logdet_xi + W->logdet_c - log_lambda;
    W->bound = -0.5 * (double)n * LOG_2PI - 0.5 * W->logdet_xi -
               0.5 * cblas_ddot((blasint)n, W->y, 1, W->w, 1) - (c > 0.0 ? c * log_a : 0.0);
    return GP_OK;
}

/* The low-rank (Q) part, docs/methods/renyi-gp.md §2.4 step 9: with PRL = L^{-T} V RL and
 * Pw = L^{-T} mt, dL/dKuf = 2 H = a (PRL RL^T + Pw w^T) and
 * dL/dKuu = -H P^T = -a/2 (PRL PRL^T + Pw Pw^T). */
static int rb_grad_q(rb_work *W, double *grad, double *gz, gp_error *err)
{
    size_t n = W->n, m = W->m, nm = n * m;
    double *PRL = gp_alloc_doubles(m * m, err), *Pw = gp_alloc_doubles(m, err);
    double *Wuu = gp_alloc_doubles(m * m, err), *Wuf = gp_alloc_doubles(nm, err);
    int rc = PRL && Pw && Wuu && Wuf ? GP_OK : GP_ENOMEM;
    if (rc == GP_OK) {
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, (blasint)m, (blasint)m,
                    (blasint)n, 1.0, W->V, (blasint)m, W->R, (blasint)n, 0.0, PRL, (blasint)m);
        gp_trsm_lower(W->L, m, m, 1, PRL, m, m);
        memcpy(Pw, W->mt, m * sizeof *Pw);
        gp_trsm_lower(W->L, m, m, 1, Pw, 1, m);
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (blasint)m, (blasint)n, (blasint)m,
                    W->a, PRL, (blasint)m, W->R, (blasint)n, 0.0, Wuf, (blasint)m);
        cblas_dger(CblasColMajor, (blasint)m, (blasint)n, W->a, Pw, 1, W->w, 1, Wuf,
                   (blasint)m);
        cblas_dgemm(CblasColMajor, CblasNoTrans, CblasTrans, (blasint)m, (blasint)m, (blasint)m,
                    -0.5 * W->a, PRL, (blasint)m, PRL, (blasint)m, 0.0, Wuu, (blasint)m);
        cblas_dger(CblasColMajor, (blasint)m, (blasint)m, -0.5 * W->a, Pw, 1, Pw, 1, Wuu,
                   (blasint)m);
        rc = gp_inducing_contract(W->k, W->X, n, W->Z, m, NULL, Wuf, Wuu, 0.0, grad, gz, err);
    }
    free(PRL);
    free(Pw);
    free(Wuu);
    free(Wuf);
    return rc;
}

/* The dense part: A (chol(Xi) on entry) becomes
 * G_K = -1/2 Xi^{-1} + (1-a)/2 w w^T - a/2 RL RL^T (lower), contracted with
 * dKff; and dL/dlog s2 = s2 g_s (docs/methods/renyi-gp.md §2.4 step 8). R must already be RL. */
static int rb_grad_k(rb_work *W, double *gk, double *gs, gp_error *err)
{
    size_t n = W->n, m = W->m;
    lapack_int lrc = LAPACKE_dpotri(LAPACK_COL_MAJOR, 'L', (lapack_int)n, W->A, (lapack_int)n);
    if (lrc != 0)
        return gp_error_set(err, lrc > 0 ? GP_ENOTPD : GP_EINTERNAL, NULL, "dpotri failed (%d)",
                            (int)lrc);
    double tr_xinv = 0.0;
    for (size_t j = 0; j < n; j++) {
        double *col = W->A + j * n;
        tr_xinv += col[j];
        for (size_t i = j; i < n; i++)
            col[i] *= -0.5;
    }
    cblas_dsyr(CblasColMajor, CblasLower, (blasint)n, 0.5 * (1.0 - W->a), W->w, 1, W->A,
               (blasint)n);
    cblas_dsyrk(CblasColMajor, CblasLower, CblasNoTrans, (blasint)n, (blasint)m, -0.5 * W->a,
                W->R, (blasint)n, 1.0, W->A, (blasint)n);
    gp_kernel_gram_grad_contract(W->k, W->X, n, W->A, n, gk);
    double c = W->a / (2.0 * (1.0 - W->a)), ww = frob2(W->w, n);
    double g_s = -0.5 * (tr_xinv - ww);
    /* d log|Lambda| / ds2 = sum_i 1 / lambda_i */
    double inv_lambda = (double)n / W->s2;
    if (W->r) {
        inv_lambda = 0.0;
        for (size_t i = 0; i < n; i++)
            inv_lambda += 1.0 / (W->s2 + W->r[i]);
    }
    if (W->a > 0.0)
        g_s += -c * (tr_xinv + frob2(W->R, n * m)) + c * inv_lambda;
    *gs = W->s2 * g_s;
    return GP_OK;
}

static int rb_gradient(rb_work *W, double *grad, double *gz, gp_error *err)
{
    size_t n = W->n, m = W->m, np = gp_kernel_n_params(W->k);
    /* RL = R LC^{-T}, so that R C^{-1} R^T = RL RL^T. */
    cblas_dtrsm(CblasColMajor, CblasRight, CblasLower, CblasTrans, CblasNonUnit, (blasint)n,
                (blasint)m, 1.0, W->LC, (blasint)m, W->R, (blasint)n);
    int rc = rb_grad_q(W, grad, gz, err);
    double *gk = rc ? NULL : gp_alloc_doubles(np, err);
    if (rc == GP_OK && gk == NULL)
        rc = GP_ENOMEM;
    if (rc == GP_OK)
        rc = rb_grad_k(W, gk, grad + np, err);
    for (size_t p = 0; rc == GP_OK && p < np; p++)
        grad[p] += gk[p];
    free(gk);
    return rc;
}

static int rb_post(const rb_work *W, gp_inducing_post *post, gp_error *err)
{
    size_t m = W->m;
    int rc = gp_inducing_post_alloc(post, m, W->d, err);
    if (rc)
        return rc;
    memcpy(post->Z, W->Z, m * W->d * sizeof *post->Z);
    memcpy(post->L, W->L, m * m * sizeof *post->L);
    memcpy(post->mt, W->mt, m * sizeof *post->mt);
    memcpy(post->C, W->C, m * m * sizeof *post->C);
    post->jitter = W->jitter;
    return GP_OK;
}

static void rb_terms(const rb_work *W, double quad_up, gp_renyi_terms *terms)
{
    double y_sq = frob2(W->y, W->n);
    terms->bound = W->bound;
    terms->trace = W->trace;
    terms->logdet_c = W->logdet_c;
    terms->upper = -0.5 * (double)W->n * LOG_2PI - 0.5 * W->logdet_xi - 0.5 * quad_up;
    terms->certified = gp_renyi_certified_gap(W->a, W->n, W->s2, W->trace, y_sq);
    if (W->r) /* both derived for one s2 only (renyi-gp.md §5): not claimed */
        terms->upper = terms->certified = NAN;
}

/* The bound; want_upper adds L_upper (one more N x N Cholesky), which the
 * optimiser's evaluations skip. */
static int renyi_eval(rb_work *W, gp_renyi_terms *terms, int want_upper, double *grad,
                      double *gz, gp_inducing_post *post, gp_error *err)
{
    double quad_up = NAN, *xi = NULL;
    if (post)
        memset(post, 0, sizeof *post);
    int rc = rb_alloc(W, err);
    if (rc == GP_OK)
        rc = rb_build_xi(W, err);
    if (rc == GP_OK && want_upper && !W->r) {
        if ((xi = gp_alloc_doubles(W->n * W->n, err)) == NULL)
            rc = GP_ENOMEM;
        else
            memcpy(xi, W->A, W->n * W->n * sizeof *xi);
    }
    if (rc == GP_OK)
        rc = rb_value(W, err);
    if (rc == GP_OK && xi && (rc = rb_upper_quad(W, xi, &quad_up, err)) != GP_OK &&
        rc != GP_ENOMEM)
        rc = gp_error_set(err, GP_ENOTPD, NULL, "Xi + a t I cannot be factorised");
    free(xi);
    if (rc == GP_OK && terms)
        rb_terms(W, quad_up, terms);
    if (rc == GP_OK && post)
        rc = rb_post(W, post, err);
    if (rc == GP_OK && grad)
        rc = rb_gradient(W, grad, gz, err);
    rb_free(W);
    if (rc && post)
        gp_inducing_post_free(post);
    return rc;
}

static int bound_args_ok(const gp_kernel *k, double s2, double a, size_t n, size_t d, size_t m,
                         gp_error *err)
{
    if (!(a >= 0.0 && a < 1.0))
        return gp_error_set(err, GP_EINVAL, "options.alpha", "alpha must be in [0, 1)");
    if (!(s2 > 0.0) || n == 0 || m == 0)
        return gp_error_set(err, GP_EINVAL, NULL, "the bound needs s2 > 0, n > 0 and m > 0");
    if (k->input_dim != d)
        return gp_error_set(err, GP_EDATA, "kernel", "kernel dimension %zu != %zu",
                            k->input_dim, d);
    return GP_OK;
}

int renyi_bound_eval(const gp_kernel *k, double s2, double a, const double *X, size_t n,
                     size_t d, const double *y, const double *r, const renyi_mean *mean,
                     const double *Z, size_t m, gp_renyi_terms *terms, int want_upper,
                     double *grad, double *gz, gp_inducing_post *post, gp_error *err)
{
    int rc = bound_args_ok(k, s2, a, n, d, m, err);
    if (rc)
        return rc;
    rb_work W = {.k = k, .s2 = s2, .a = a, .X = X, .y = y, .r = r, .Z = Z, .n = n, .m = m,
                 .d = d};
    if (mean && mean->type != GP_MEAN_ZERO) {
        W.mean = mean->type;
        W.p = gp_mean_n_coef(mean->type, d);
        W.beta = mean->beta;
    }
    return renyi_eval(&W, terms, want_upper, grad, gz, post, err);
}

int gp_renyi_bound(const gp_kernel *k, double s2, double a, const double *X, size_t n, size_t d,
                   const double *y, const double *Z, size_t m, gp_renyi_terms *terms,
                   double *grad, double *gz, struct gp_inducing_post *post, gp_error *err)
{
    return renyi_bound_eval(k, s2, a, X, n, d, y, NULL, NULL, Z, m, terms, terms != NULL, grad,
                            gz, post, err);
}

int gp_renyi_bound_noise(const gp_kernel *k, double s2, const double *r, double a,
                         const double *X, size_t n, size_t d, const double *y, const double *Z,
                         size_t m, gp_renyi_terms *terms, double *grad, double *gz,
                         struct gp_inducing_post *post, gp_error *err)
{
    return renyi_bound_eval(k, s2, a, X, n, d, y, r, NULL, Z, m, terms, terms != NULL, grad,
                            gz, post, err);
}

double gp_renyi_certified_gap(double a, size_t n, double s2, double trace, double y_sq)
{
    if (!(a > 0.0))
        return 0.0;
    double N = (double)n;
    return a * N / (2.0 * (1.0 - a)) * log1p((1.0 - a) * trace / (N * s2)) +
           y_sq * a * trace / (2.0 * s2 * (s2 + a * trace));
}
