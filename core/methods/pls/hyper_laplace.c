/* pls: A1 by the likelihood of the labels ([D], issue 40): the Laplace
 * approximation to the marginal likelihood of an exact GP on the subsets.
 *
 * For bernoulli and poisson (log link) the thesis's A1 regresses a transform
 * of the labels (0/1, log(y + 1/2)) and so fits the amplitude and the
 * lengthscales of a different model (on spam: test log loss 0.273 against
 * svgp's 0.200, bench/results/classification.md). Here the subset fits
 * maximise instead, for latent f ~ GP(m, k) on the subset's points,
 *   log q(y) = -a^T (f^ - m) / 2 + sum_i log p(y_i | f^_i) - sum_i log L_ii,
 * f^ the mode of the posterior of f, a = K^{-1} (f^ - m), L = chol(B),
 * B = I + W^(1/2) K W^(1/2), W = -d2 log p at f^ (Rasmussen & Williams,
 * Algorithm 3.2), with its analytic gradient in the kernel's log-parameters
 * (Algorithm 5.1: the explicit part and the implicit one through f^). Both
 * parts are folded into one weight matrix, so the kernel is differentiated
 * by one contraction as in the Gaussian LML (core/kernel/lml.c). Cost per
 * evaluation: a few Newton steps of O(n^3 / 3) and O(n^3) for the gradient,
 * with three n x n buffers (n = N_sub). */
#include "core/methods/pls/hyper_laplace.h"

#include <cblas.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/inducing/hyper.h"
#include "core/kernel/kernel_gram.h"
#include "core/linalg/blocked.h"
#include "core/linalg/linalg.h"
#include "core/model/hyperfit.h"

#define LAP_NEWTON_MAX 100
#define LAP_HALVINGS 30

/* ---- the Laplace marginal likelihood on one set of points ---- */

void pls_lap_free(pls_lap_ws *w)
{
    free(w->K);
    free(w->L);
    free(w->C);
    free(w->vec);
    memset(w, 0, sizeof *w);
}

int pls_lap_alloc(pls_lap_ws *w, size_t n_max, gp_error *err)
{
    memset(w, 0, sizeof *w);
    size_t nn = 0, cap = n_max ? n_max : 1;
    int rc = gp_checked_size(cap, cap, &nn, err);
    if (rc)
        return rc;
    w->n_max = cap;
    w->K = gp_alloc_doubles(nn, err);
    w->L = gp_alloc_doubles(nn, err);
    w->C = gp_alloc_doubles(nn, err);
    w->vec = gp_alloc_doubles(9 * cap, err);
    if (w->K && w->L && w->C && w->vec) {
        memset(w->vec, 0, 9 * cap * sizeof *w->vec); /* the warm start a = 0 */
        return GP_OK;
    }
    pls_lap_free(w);
    return gp_error_set(err, GP_ENOMEM, NULL,
                        "out of memory for a Laplace marginal likelihood on %zu points", n_max);
}

/* The third derivative of log p(y | f) in f: what moves W with f^. */
static double lik_third(const gp_lik *lik, double f)
{
    if (lik->type == GP_LIK_POISSON)
        return -exp(f);
    double s = 1.0 / (1.0 + exp(-f)); /* bernoulli, logit link */
    return -s * (1.0 - s) * (1.0 - 2.0 * s);
}

/* f = K a + m and Psi(a) = sum log p(y | f) - a^T K a / 2 (g gets d log p / df). */
static double lap_psi(pls_lap_ws *w, const gp_lik *lik, const double *y, const double *off,
                      const double *a, double *f, double *g)
{
    blasint n = (blasint)w->n;
    cblas_dgemv(CblasColMajor, CblasNoTrans, n, n, 1.0, w->K, n, a, 1, 0.0, f, 1);
    double quad = cblas_ddot(n, a, 1, f, 1);
    if (off)
        cblas_daxpy(n, 1.0, off, 1, f, 1);
    return gp_lik_log_density_sum(lik, y, f, w->n, g) - 0.5 * quad;
}

/* At f: sw = sqrt(W) and L = chol(I + sw K sw) (lower, in w->L). */
static int lap_factor(pls_lap_ws *w, const gp_lik *lik, const double *y, const double *f,
                      double *sw, gp_error *err)
{
    size_t n = w->n;
    for (size_t i = 0; i < n; i++) {
        double d2;
        gp_lik_derivatives(lik, y[i], f[i], NULL, &d2);
        sw[i] = sqrt(d2 < 0.0 ? -d2 : 0.0);
    }
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++)
            w->L[j * n + i] = sw[i] * w->K[j * n + i] * sw[j] + (i == j);
    return gp_cholesky_jitter(w->L, n, n, NULL, err);
}

/* One Newton direction (R&W Algorithm 3.1) from a: the new a into an,
 * b = W (f - m) + g, an = b - sw L^-T L^-1 (sw K b). */
static void lap_newton_target(pls_lap_ws *w, const double *f, const double *off, const double *g,
                              const double *sw, double *b, double *an)
{
    size_t n = w->n;
    for (size_t i = 0; i < n; i++)
        b[i] = sw[i] * sw[i] * (f[i] - (off ? off[i] : 0.0)) + g[i];
    cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)n, (blasint)n, 1.0, w->K, (blasint)n, b, 1,
                0.0, an, 1);
    for (size_t i = 0; i < n; i++)
        an[i] *= sw[i];
    gp_chol_solve(w->L, n, n, an, 1, n);
    for (size_t i = 0; i < n; i++)
        an[i] = b[i] - sw[i] * an[i];
}

/* Whether the full Newton step moved f (from f0) by at most 1e-9 of its
 * size: then it is taken whatever Psi says (near the mode Psi's change is
 * below its round-off, and halving would stall there) and the iteration
 * stops. Why the step of f and not the gain of Psi: log q's log det is not
 * stationary at the mode, so a mode good to 1e-6 (a gain of 1e-12) moves
 * log q by 1e-6, noise the outer fit's line search sees; Newton converges
 * quadratically, a full step of 1e-9 leaves ~1e-18. Not the step of
 * a = K^{-1} (f - m): with a long lengthscale K is ill-conditioned and a
 * round-off noise. */
static int newton_converged(const double *f, const double *f0, size_t n)
{
    double step = 0.0, size = 1.0;
    for (size_t i = 0; i < n; i++) {
        step = fmax(step, fabs(f[i] - f0[i]));
        size = fmax(size, fabs(f[i]));
    }
    return step <= 1e-9 * size;
}

/* The mode: Newton on a from the last evaluation's mode (or 0 when that is
 * worse), halving a step until Psi rises; stops after a full step of f
 * below 1e-9 (relative) or when no step raises Psi. Leaves a,
 * f, g at the mode and returns Psi there (NAN on failure). */
static double lap_mode(pls_lap_ws *w, const gp_lik *lik, const double *y, const double *off,
                       gp_error *err)
{
    size_t n = w->n;
    double *a = w->vec, *f = a + w->n_max, *g = f + w->n_max, *sw = g + w->n_max;
    double *b = sw + w->n_max, *an = b + w->n_max, *at = an + w->n_max;
    double psi = lap_psi(w, lik, y, off, a, f, g);
    memset(at, 0, n * sizeof *at);
    double psi0 = lap_psi(w, lik, y, off, at, f, g);
    if (!(psi >= psi0)) {
        memset(a, 0, n * sizeof *a);
        psi = psi0;
    } else {
        psi = lap_psi(w, lik, y, off, a, f, g);
    }
    for (int it = 0; it < LAP_NEWTON_MAX && isfinite(psi); it++) {
        if (lap_factor(w, lik, y, f, sw, err))
            return NAN;
        lap_newton_target(w, f, off, g, sw, b, an);
        memcpy(b, f, n * sizeof *f); /* f before the step */
        double t = 1.0, pn = -INFINITY;
        int done = 0;
        for (int h = 0; h < LAP_HALVINGS; h++, t *= 0.5) {
            for (size_t i = 0; i < n; i++)
                at[i] = a[i] + t * (an[i] - a[i]);
            pn = lap_psi(w, lik, y, off, at, f, g);
            if (h == 0 && (done = newton_converged(f, b, n)))
                break;
            if (pn >= psi)
                break;
        }
        if (!(pn >= psi) && !done) { /* no step rises: the mode to round-off */
            lap_psi(w, lik, y, off, a, f, g);
            break;
        }
        memcpy(a, at, n * sizeof *a);
        psi = pn;
        if (done)
            break;
    }
    if (!isfinite(psi))
        return NAN;
    return lap_factor(w, lik, y, f, sw, err) ? NAN : psi;
}

/* The weights of the gradient (R&W Algorithm 5.1) into w->L's lower
 * triangle, L the factor at the mode on entry:
 *   Z = sw B^{-1} sw, s2 = (diag K - diag(K Z K)) d3 / 2, u = s2 - Z K s2,
 *   Wt = (a a^T - Z + g u^T + u g^T) / 2,
 * so that d log q / d theta = sum_ij Wt_ij dK_ij / d theta. s2 = d log q /
 * d f^ (only log det B moves with the mode: d W_ii / d f_i = -d3_i); the
 * book's Algorithm 5.1 prints it with a minus sign, which the
 * finite-difference test refutes (GPML's infLaplace has the plus). */
static int lap_weights(pls_lap_ws *w, const gp_lik *lik, const gp_cancel *cancel, gp_error *err)
{
    size_t n = w->n;
    double *a = w->vec, *f = a + w->n_max, *g = f + w->n_max, *sw = g + w->n_max;
    double *s2 = sw + 4 * w->n_max, *u = s2 + w->n_max;
    for (size_t j = 0; j < n; j++) /* C = L^{-1} sw K: diag(K Z K) = |C_:j|^2 */
        for (size_t i = 0; i < n; i++)
            w->C[j * n + i] = sw[i] * w->K[j * n + i];
    gp_trsm_lower(w->L, n, n, 0, w->C, n, n);
    for (size_t j = 0; j < n; j++) {
        double c = cblas_ddot((blasint)n, w->C + j * n, 1, w->C + j * n, 1);
        s2[j] = 0.5 * (w->K[j * n + j] - c) * lik_third(lik, f[j]);
    }
    int rc = gp_potri_blocked(w->L, n, n, cancel, err);
    if (rc)
        return rc;
    for (size_t j = 0; j < n; j++) /* Z = sw B^{-1} sw, lower */
        for (size_t i = j; i < n; i++)
            w->L[j * n + i] *= sw[i] * sw[j];
    cblas_dgemv(CblasColMajor, CblasNoTrans, (blasint)n, (blasint)n, 1.0, w->K, (blasint)n, s2, 1,
                0.0, w->C, 1);
    memcpy(u, s2, n * sizeof *u);
    cblas_dsymv(CblasColMajor, CblasLower, (blasint)n, -1.0, w->L, (blasint)n, w->C, 1, 1.0, u,
                1);
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n; i++)
            w->L[j * n + i] = 0.5 * (a[i] * a[j] - w->L[j * n + i] + g[i] * u[j] + u[i] * g[j]);
    return GP_OK;
}

int pls_lap_eval(pls_lap_ws *w, const gp_kernel *k, const gp_lik *lik, const double *Xt,
                 size_t n, const double *y, const double *off, double *lml, double *grad,
                 const gp_cancel *cancel, gp_error *err)
{
    if (n > w->n_max)
        return gp_error_set(err, GP_EINVAL, NULL,
                            "a Laplace marginal likelihood on %zu points, above the %zu allocated",
                            n, w->n_max);
    if (n != w->n) /* another set of points: the last mode is no start */
        memset(w->vec, 0, n * sizeof *w->vec);
    w->n = n;
    if (gp_kernel_gram_cancellable(k, Xt, n, w->K, n, cancel))
        return gp_error_set(err, GP_ECANCELLED, NULL, "cancelled building the kernel matrix");
    double psi = lap_mode(w, lik, y, off, err);
    if (!isfinite(psi))
        return gp_error_set(err, GP_ENOTPD, NULL,
                            "the Laplace approximation has no finite mode at these "
                            "hyperparameters");
    *lml = psi - 0.5 * gp_chol_logdet(w->L, n, n);
    if (grad == NULL)
        return GP_OK;
    int rc = lap_weights(w, lik, cancel, err);
    if (rc == GP_OK &&
        gp_kernel_gram_grad_contract_cancellable(k, Xt, n, w->L, n, grad, cancel) != GP_OK)
        rc = gp_error_set(err, GP_ECANCELLED, NULL, "cancelled during the Laplace gradient");
    return rc;
}

void pls_lap_forget(pls_lap_ws *w)
{
    memset(w->vec, 0, w->n_max * sizeof *w->vec);
}

/* ---- the subset fits ---- */

struct pls_lap_problem {
    gp_hyper_problem hp; /* the kernel copy, its free parameters, priors and bounds */
    pls_lap_ws ws;
    gp_lik lik;
    const double *Xt, *y, *off;
    size_t n;
    const gp_cancel *cancel;
};

/* -log q(y) and its gradient in the free log-parameters; +inf where the mode
 * or the factor fails, so the line search backs off. */
static double lap_objective(void *ctx, const double *x, double *g)
{
    pls_lap_problem *p = ctx;
    gp_hyper_problem *hp = &p->hp;
    for (size_t i = 0; i < hp->n_free; i++)
        hp->theta[hp->free_idx[i]] = x[i];
    gp_kernel_set_params(hp->k, hp->theta);
    double lml;
    gp_error e = {0};
    if (pls_lap_eval(&p->ws, hp->k, &p->lik, p->Xt, p->n, p->y, p->off, &lml, g ? hp->grad : NULL,
                     p->cancel, &e)) {
        pls_lap_forget(&p->ws);
        return INFINITY;
    }
    for (size_t i = 0; g && i < hp->n_free; i++)
        g[i] = -hp->grad[hp->free_idx[i]];
    return -lml;
}

int pls_lap_problem_new(pls_lap_problem **out, const gp_kernel *k, gp_likelihood lik,
                        const gp_hyper_spec *spec, size_t n_max, gp_error *err)
{
    pls_lap_problem *p = calloc(1, sizeof *p);
    if (p == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    gp_noise_param none = {0, 0.0, 0.0};
    int rc = gp_hyper_problem_init(&p->hp, k, &none, spec, 1, err);
    if (rc) {
        free(p);
        return rc;
    }
    rc = pls_lap_alloc(&p->ws, n_max, err);
    if (rc) {
        gp_hyper_problem_free(&p->hp);
        free(p);
        return rc;
    }
    p->lik = (gp_lik){lik, 1.0};
    *out = p;
    return GP_OK;
}

void pls_lap_problem_free(pls_lap_problem *p)
{
    if (p == NULL)
        return;
    gp_hyper_problem_free(&p->hp);
    pls_lap_free(&p->ws);
    free(p);
}

size_t pls_lap_problem_dim(const pls_lap_problem *p)
{
    return p->hp.n_free;
}

void pls_lap_problem_start(const pls_lap_problem *p, double *x)
{
    gp_hyper_problem_start(&p->hp, x);
}

void pls_lap_problem_apply(pls_lap_problem *p, const double *x, gp_kernel *k)
{
    double unused;
    gp_hyper_problem_apply(&p->hp, x, k, &unused);
}

int pls_lap_problem_fit(pls_lap_problem *p, const double *Xt, size_t n, const double *y,
                        const double *off, double *x, const gp_driver_options *opt,
                        gp_driver_result *res, gp_error *err)
{
    p->Xt = Xt;
    p->y = y;
    p->off = off;
    p->n = n;
    p->cancel = opt->cancel;
    pls_lap_forget(&p->ws);
    size_t dim = pls_lap_problem_dim(p);
    if (dim > 0)
        return gp_hyper_minimize_free(p->hp.spec, p->hp.k, p->hp.free_idx, p->hp.n_free, 0, 0.0,
                                      lap_objective, p, x, dim, opt, res, err);
    memset(res, 0, sizeof *res);
    res->f = lap_objective(p, x, NULL);
    res->evaluations = 1;
    res->converged = 1;
    if (gp_cancel_requested(opt->cancel))
        return gp_error_set(err, GP_ECANCELLED, NULL, "fit cancelled");
    if (!isfinite(res->f))
        return gp_error_set(err, GP_ENOTPD, NULL,
                            "the Laplace marginal likelihood cannot be evaluated at the given "
                            "hyperparameters");
    return GP_OK;
}

/* ---- the exposed evaluation, for tests ---- */

int gp_pls_laplace_lml(const gp_kernel *k, const gp_lik *lik, const double *Xt, size_t n,
                       const double *y, const double *off, double *lml, double *grad,
                       gp_error *err)
{
    pls_lap_ws w;
    int rc = pls_lap_alloc(&w, n, err);
    if (rc == GP_OK)
        rc = pls_lap_eval(&w, k, lik, Xt, n, y, off, lml, grad, NULL, err);
    pls_lap_free(&w);
    return rc;
}
