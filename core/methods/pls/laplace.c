/* pls: the Laplace mode of the potential and its amplitude ([D], §5.2). */
#include "core/methods/pls/laplace.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/linalg/linalg.h"
#include "core/methods/pls/model.h"
#include "core/model/mean.h"

/* ---- [D] the Laplace mode of V (as implemented, §5.2) ----
 * For a log-concave likelihood (gaussian, bernoulli, poisson with the log
 * link) V(a) = -log p(y | s Phi^T a) + |a|^2 / 2 is convex: Newton with
 * halving steps finds the mode a*, and H* = I + s^2 Phi W Phi^T (W = -d2
 * log p at a*) is the Hessian there. It serves the amplitude scale s (the
 * Laplace marginal likelihood, below), the preconditioner P = H*^{-1} and
 * the particles' start N(a*, H*^{-1}) of pula and mala (§5.2 A4 (iii)
 * generalised: the thesis's prior start and a curvature bound left the
 * chains O(1000) steps from equilibrium). poisson_sq is not log-concave
 * (P19) and keeps the bound preconditioner and the prior start. */

#define NEWTON_MAX 100
#define NEWTON_HALVINGS 40

void pls_newton_free(newton_ws *w)
{
    free(w->H);
    free(w->f);
    free(w->d1);
    free(w->S);
    free(w->grad);
    free(w->step);
    free(w->at);
}

int pls_newton_alloc(newton_ws *w, const gp_lik *lik, const double *Phi, const double *y,
                     size_t n, size_t mk, gp_error *err)
{
    memset(w, 0, sizeof *w);
    size_t cnt = 0;
    int rc = gp_checked_size(mk, n, &cnt, err);
    if (rc)
        return rc;
    *w = (newton_ws){lik, Phi, y, n, mk, 1.0, gp_alloc_doubles(mk * mk, err),
                     gp_alloc_doubles(n, err), gp_alloc_doubles(n, err), gp_alloc_doubles(cnt, err),
                     gp_alloc_doubles(mk, err), gp_alloc_doubles(mk, err),
                     gp_alloc_doubles(mk, err), NULL};
    if (w->H && w->f && w->d1 && w->S && w->grad && w->step && w->at)
        return GP_OK;
    pls_newton_free(w);
    return GP_ENOMEM;
}

/* V at a (f = s Phi^T a + off kept in w->f, d log p / df in w->d1). */
static double newton_value(newton_ws *w, const double *a)
{
    blasint mk = (blasint)w->mk, n = (blasint)w->n;
    cblas_dgemv(CblasColMajor, CblasTrans, mk, n, w->s, w->Phi, mk, a, 1, 0.0, w->f, 1);
    if (w->off)
        cblas_daxpy(n, 1.0, w->off, 1, w->f, 1);
    double ll = gp_lik_log_density_sum(w->lik, w->y, w->f, w->n, w->d1);
    return -ll + 0.5 * cblas_ddot(mk, a, 1, a, 1);
}

/* At a (after newton_value): grad V, H = I + s^2 Phi W Phi^T factored. */
static int newton_hessian(newton_ws *w, const double *a)
{
    size_t mk = w->mk;
    memcpy(w->grad, a, mk * sizeof *a);
    cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)mk, (blasint)w->n, -w->s, w->Phi,
                (blasint)mk, w->d1, 1, 1.0, w->grad, 1);
    for (size_t i = 0; i < w->n; i++) {
        double d2;
        gp_lik_derivatives(w->lik, w->y[i], w->f[i], NULL, &d2);
        double r = w->s * sqrt(d2 < 0.0 ? -d2 : 0.0);
        for (size_t m = 0; m < mk; m++)
            w->S[i * mk + m] = w->Phi[i * mk + m] * r;
    }
    return pls_chol_identity_plus_gram(w->S, mk, w->n, 1.0, w->H);
}

/* Newton from a (mk, updated in place) to the mode; *V gets V(a*), w->H the
 * factor of H* (upper half not zeroed). Stops when the Newton decrement
 * grad^T H^{-1} grad falls below 1e-18 (1 + |V|) or no halving lowers V. */
int pls_newton_mode(newton_ws *w, double *a, double *V, gp_error *err)
{
    size_t mk = w->mk;
    double v = newton_value(w, a);
    for (int it = 0; isfinite(v); it++) {
        if (newton_hessian(w, a) != GP_OK)
            break;
        memcpy(w->step, w->grad, mk * sizeof *a);
        gp_chol_solve(w->H, mk, mk, w->step, 1, mk);
        double dec = cblas_ddot((blasint)mk, w->grad, 1, w->step, 1);
        if (dec < 1e-18 * (1.0 + fabs(v)) || it == NEWTON_MAX) {
            *V = v;
            return GP_OK;
        }
        double t = 1.0, vn = INFINITY;
        for (int h = 0; h < NEWTON_HALVINGS; h++, t *= 0.5) {
            for (size_t m = 0; m < mk; m++)
                w->at[m] = a[m] - t * w->step[m];
            vn = newton_value(w, w->at);
            if (vn <= v)
                break;
        }
        if (!(vn <= v)) { /* round-off floor: the mode to working precision */
            newton_value(w, a);
            *V = v;
            return newton_hessian(w, a) == GP_OK ? GP_OK
                                                 : gp_error_set(err, GP_ENOTPD, NULL,
                                                                "the Laplace Hessian is not "
                                                                "positive definite");
        }
        memcpy(a, w->at, mk * sizeof *a);
        v = vn;
    }
    return gp_error_set(err, GP_ENOTPD, NULL, "the Newton iteration for the Laplace mode failed");
}

double gp_pls_laplace_mode(const gp_lik *lik, const double *Phi, size_t mk, size_t n,
                           const double *y, double *a, double *H)
{
    newton_ws w;
    double V = NAN;
    if (pls_newton_alloc(&w, lik, Phi, y, n, mk, NULL) != GP_OK)
        return NAN;
    if (pls_newton_mode(&w, a, &V, NULL) == GP_OK && H != NULL)
        memcpy(H, w.H, mk * mk * sizeof *H);
    else if (H != NULL)
        V = NAN;
    pls_newton_free(&w);
    return V;
}

/* The Laplace log marginal likelihood at feature scale s (warm start a):
 * -V(a*) - log det(H*) / 2. */
static double laplace_lml(newton_ws *w, double s, double *a)
{
    double V = NAN;
    w->s = s;
    if (pls_newton_mode(w, a, &V, NULL) != GP_OK)
        return NAN;
    return -V - 0.5 * gp_chol_logdet(w->H, w->mk, w->mk);
}

/* [D] The amplitude (as implemented, §5.2; P20): the A1 regression on the
 * 0/1 labels gives an amplitude for a function over [0, 1], too small for a
 * logit (poisson keeps its A1 amplitude: log(y + 1/2) is on the log-rate
 * scale already). The kernel's variance is multiplied by
 * the c maximising the Laplace marginal likelihood of the model itself on
 * the training features (golden section over log c in [-2, 8]; the features
 * scale as c^(1/2) in k-mode and c in r-mode). a gets the mode at that c. */
int pls_laplace_amplitude(newton_ws *w, int rmode, double *a, double *log_c)
{
    const double g = 0.5 * (sqrt(5.0) - 1.0), p = rmode ? 1.0 : 0.5;
    double lo = -2.0, hi = 8.0, x1 = hi - g * (hi - lo), x2 = lo + g * (hi - lo);
    memset(a, 0, w->mk * sizeof *a);
    double f1 = laplace_lml(w, exp(p * x1), a), f2 = laplace_lml(w, exp(p * x2), a);
    while (hi - lo > 0.02) { /* maximise; NAN loses */
        if (!(f1 >= f2)) {
            lo = x1;
            x1 = x2;
            f1 = f2;
            x2 = lo + g * (hi - lo);
            f2 = laplace_lml(w, exp(p * x2), a);
        } else {
            hi = x2;
            x2 = x1;
            f2 = f1;
            x1 = hi - g * (hi - lo);
            f1 = laplace_lml(w, exp(p * x1), a);
        }
    }
    *log_c = isfinite(f1) || isfinite(f2) ? 0.5 * (lo + hi) : 0.0;
    w->s = 1.0;
    return GP_OK;
}

/* ---- a non-gaussian mean's coefficients ----
 * The logistic regression of the labels on the basis alone: beta maximising
 * sum_i log p(y_i | h_i^T beta) - RIDGE |beta|^2 / 2 by Newton with halving
 * steps (the log-likelihood is concave in beta; the ridge, a N(0, 1/RIDGE)
 * prior on the logit scale, keeps separable labels finite). */

#define GLM_RIDGE 1e-2

static double glm_value(const gp_lik *lik, const double *H, size_t n, size_t p, const double *y,
                        const double *beta, double *f)
{
    cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)n, (blasint)p, 1.0, H, (blasint)n, beta, 1,
                0.0, f, 1);
    return gp_lik_log_density_sum(lik, y, f, n, NULL) -
           0.5 * GLM_RIDGE * cblas_ddot((blasint)p, beta, 1, beta, 1);
}

int pls_glm_coef(const gp_lik *lik, const double *H, size_t n, size_t p, const double *y,
                 double *beta, gp_error *err)
{
    double *f = gp_alloc_doubles(n, err), *G = gp_alloc_doubles(p * p, err),
           *g = gp_alloc_doubles(p, err), *at = gp_alloc_doubles(p, err);
    int rc = f && G && g && at ? GP_OK : GP_ENOMEM;
    double v = rc == GP_OK ? glm_value(lik, H, n, p, y, beta, f) : NAN;
    for (int it = 0; rc == GP_OK && it < NEWTON_MAX && isfinite(v); it++) {
        for (size_t j = 0; j < p; j++)
            g[j] = -GLM_RIDGE * beta[j];
        memset(G, 0, p * p * sizeof *G);
        for (size_t i = 0; i < n; i++) {
            double d1, d2;
            gp_lik_derivatives(lik, y[i], f[i], &d1, &d2);
            for (size_t j = 0; j < p; j++) {
                double hj = H[j * n + i];
                g[j] += d1 * hj;
                for (size_t k = j; k < p; k++)
                    G[j * p + k] -= d2 * hj * H[k * n + i];
            }
        }
        for (size_t j = 0; j < p; j++)
            G[j * p + j] += GLM_RIDGE;
        memcpy(at, g, p * sizeof *g);
        rc = gp_mean_solve_normal(G, at, p, err);
        if (rc)
            break;
        double step = 0.0;
        for (size_t j = 0; j < p; j++)
            step += at[j] * g[j];
        if (step < 1e-18 * (1.0 + fabs(v)))
            break;
        double t = 1.0, vn = -INFINITY;
        for (int h = 0; h < NEWTON_HALVINGS; h++, t *= 0.5) {
            for (size_t j = 0; j < p; j++)
                g[j] = beta[j] + t * at[j];
            vn = glm_value(lik, H, n, p, y, g, f);
            if (vn >= v)
                break;
        }
        if (!(vn >= v))
            break; /* round-off floor */
        memcpy(beta, g, p * sizeof *g);
        v = vn;
    }
    free(f);
    free(G);
    free(g);
    free(at);
    return rc;
}
