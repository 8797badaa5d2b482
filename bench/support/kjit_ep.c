/* See kjit_ep.h. */
#include "bench/support/kjit_ep.h"

#include <lapacke.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "core/base/rng.h"

int gp_kjit_true_w(size_t d, uint64_t seed, double *w)
{
    gp_rng r;
    gp_rng_seed(&r, seed);
    gp_rng_normal_fill(&r, w, d);
    return GP_OK;
}

static double sigmoid(double z)
{
    if (z >= 0)
        return 1 / (1 + exp(-z));
    double e = exp(z);
    return e / (1 + e);
}

int gp_kjit_problem_make(const double *w, size_t d, size_t n, double x_scale, uint64_t seed,
                         gp_kjit_problem *p, gp_error *err)
{
    memset(p, 0, sizeof *p);
    if (d == 0 || n == 0 || n > (size_t)1 << 24 || d > 4096)
        return gp_error_set(err, GP_EINVAL, NULL, "problem sizes n %zu, d %zu", n, d);
    p->X = malloc(n * d * sizeof *p->X);
    p->y = malloc(n * sizeof *p->y);
    if (p->X == NULL || p->y == NULL) {
        gp_kjit_problem_free(p);
        return gp_error_set(err, GP_ENOMEM, NULL, "problem of %zu x %zu", n, d);
    }
    p->n = n;
    p->d = d;
    gp_rng r;
    gp_rng_seed(&r, seed);
    for (size_t i = 0; i < n; i++) {
        double z = 0;
        for (size_t j = 0; j < d; j++) {
            double x = x_scale * gp_rng_normal(&r);
            p->X[i * d + j] = x;
            z += w[j] * x;
        }
        p->y[i] = gp_rng_uniform(&r) < sigmoid(z) ? 1 : 0;
    }
    return GP_OK;
}

void gp_kjit_problem_free(gp_kjit_problem *p)
{
    free(p->X);
    free(p->y);
    memset(p, 0, sizeof *p);
}

void gp_kjit_label_beta(double y, double *a, double *b)
{
    *a = y + 1;
    *b = 2 - y;
}

int gp_kjit_ep_init(gp_kjit_ep *ep, const gp_kjit_problem *p, double prior_var, gp_error *err)
{
    memset(ep, 0, sizeof *ep);
    size_t d = p->d, n = p->n;
    ep->Sigma = calloc(d * d, sizeof *ep->Sigma);
    ep->h = calloc(d, sizeof *ep->h);
    ep->mu = calloc(d, sizeof *ep->mu);
    ep->tau = calloc(n, sizeof *ep->tau);
    ep->nu = calloc(n, sizeof *ep->nu);
    ep->work = calloc(2 * d, sizeof *ep->work);
    if (!ep->Sigma || !ep->h || !ep->mu || !ep->tau || !ep->nu || !ep->work) {
        gp_kjit_ep_free(ep);
        return gp_error_set(err, GP_ENOMEM, NULL, "EP state of %zu sites, d %zu", n, d);
    }
    ep->prob = p;
    ep->n = n;
    ep->d = d;
    ep->prior_var = prior_var;
    for (size_t j = 0; j < d; j++)
        ep->Sigma[j * d + j] = prior_var;
    return GP_OK;
}

void gp_kjit_ep_free(gp_kjit_ep *ep)
{
    free(ep->Sigma);
    free(ep->h);
    free(ep->mu);
    free(ep->tau);
    free(ep->nu);
    free(ep->work);
    memset(ep, 0, sizeof *ep);
}

/* Sigma x into out; returns x^T Sigma x. */
static double sigma_times(const gp_kjit_ep *ep, const double *x, double *out)
{
    size_t d = ep->d;
    double q = 0;
    for (size_t r = 0; r < d; r++) {
        double s = 0;
        for (size_t c = 0; c < d; c++)
            s += ep->Sigma[c * d + r] * x[c];
        out[r] = s;
        q += x[r] * s;
    }
    return q;
}

int gp_kjit_ep_cavity(const gp_kjit_ep *ep, size_t i, double *m, double *v)
{
    const double *x = ep->prob->X + i * ep->d;
    double vi = sigma_times(ep, x, ep->work), mi = 0;
    for (size_t j = 0; j < ep->d; j++)
        mi += x[j] * ep->mu[j];
    double prec = 1 / vi - ep->tau[i];
    if (!(prec > 0) || !isfinite(prec))
        return -1;
    *v = 1 / prec;
    *m = *v * (mi / vi - ep->nu[i]);
    return 0;
}

int gp_kjit_ep_update(gp_kjit_ep *ep, size_t i, double m, double v, double mean, double var,
                      double damping)
{
    double tau_new = 1 / var - 1 / v, nu_new = mean / var - m / v;
    double tau = (1 - damping) * ep->tau[i] + damping * tau_new;
    double nu = (1 - damping) * ep->nu[i] + damping * nu_new;
    int proper = 1;
    if (!isfinite(tau) || !isfinite(nu)) {
        ep->skipped++;
        return 0;
    }
    if (tau < 0) {
        /* the outgoing message is not proper (§8.6): it becomes the flat
         * message (precision and linear term 0), rather than keep the old
         * site, a stale one of an earlier sweep; tau 0 with the linear term
         * kept was far worse in the stream of bench_online (KL of the
         * posterior ~1e3 against ~5) */
        tau = 0;
        nu = 0;
        proper = 0;
        ep->clamped++;
    }
    size_t d = ep->d;
    const double *x = ep->prob->X + i * d;
    double dt = tau - ep->tau[i], dn = nu - ep->nu[i];
    double *sx = ep->work;
    double q = sigma_times(ep, x, sx);
    double c = dt / (1 + dt * q);
    for (size_t col = 0; col < d; col++)
        for (size_t r = 0; r < d; r++)
            ep->Sigma[col * d + r] -= c * sx[r] * sx[col];
    for (size_t j = 0; j < d; j++)
        ep->h[j] += dn * x[j];
    for (size_t r = 0; r < d; r++) {
        double s = 0;
        for (size_t col = 0; col < d; col++)
            s += ep->Sigma[col * d + r] * ep->h[col];
        ep->mu[r] = s;
    }
    ep->tau[i] = tau;
    ep->nu[i] = nu;
    return proper;
}

int gp_kjit_ep_refresh(gp_kjit_ep *ep, gp_error *err)
{
    size_t d = ep->d, n = ep->n;
    const double *X = ep->prob->X;
    double *P = ep->Sigma;
    memset(P, 0, d * d * sizeof *P);
    memset(ep->h, 0, d * sizeof *ep->h);
    for (size_t j = 0; j < d; j++)
        P[j * d + j] = 1 / ep->prior_var;
    for (size_t i = 0; i < n; i++) {
        const double *x = X + i * d;
        for (size_t col = 0; col < d; col++) {
            ep->h[col] += ep->nu[i] * x[col];
            for (size_t r = col; r < d; r++)
                P[col * d + r] += ep->tau[i] * x[r] * x[col];
        }
    }
    if (LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)d, P, (lapack_int)d) != 0 ||
        LAPACKE_dpotri(LAPACK_COL_MAJOR, 'L', (lapack_int)d, P, (lapack_int)d) != 0)
        return gp_error_set(err, GP_ENOTPD, NULL, "the EP precision is not positive definite");
    for (size_t col = 0; col < d; col++)
        for (size_t r = 0; r < col; r++)
            P[col * d + r] = P[r * d + col];
    for (size_t r = 0; r < d; r++) {
        double s = 0;
        for (size_t col = 0; col < d; col++)
            s += P[col * d + r] * ep->h[col];
        ep->mu[r] = s;
    }
    return GP_OK;
}

double gp_kjit_test_error(const double *w, const double *mu, size_t d, size_t n, double x_scale,
                          uint64_t seed)
{
    gp_rng r;
    gp_rng_seed(&r, seed);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) {
        double z = 0, f = 0;
        for (size_t j = 0; j < d; j++) {
            double x = x_scale * gp_rng_normal(&r);
            z += w[j] * x;
            f += mu[j] * x;
        }
        int y = gp_rng_uniform(&r) < sigmoid(z);
        wrong += (f > 0) != y;
    }
    return n ? (double)wrong / (double)n : NAN;
}

double gp_kjit_gauss_kl_d(const double *mu1, const double *S1, const double *mu2,
                          const double *S2, size_t d)
{
    /* KL = 0.5 [tr(S2^-1 S1) + dm^T S2^-1 dm - d + log|S2| - log|S1|] */
    double *L2 = malloc(d * d * sizeof *L2), *L1 = malloc(d * d * sizeof *L1);
    double *B = malloc(d * (d + 1) * sizeof *B);
    double kl = NAN;
    if (L1 == NULL || L2 == NULL || B == NULL)
        goto done;
    memcpy(L1, S1, d * d * sizeof *L1);
    memcpy(L2, S2, d * d * sizeof *L2);
    if (LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)d, L1, (lapack_int)d) != 0 ||
        LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)d, L2, (lapack_int)d) != 0)
        goto done;
    /* B = [L1 | dm]; solve L2 B' = B: tr(S2^-1 S1) = |L2^-1 L1|_F^2, the Mahalanobis
     * term |L2^-1 dm|^2 */
    for (size_t c = 0; c < d; c++)
        for (size_t r = 0; r < d; r++)
            B[c * d + r] = r >= c ? L1[c * d + r] : 0;
    for (size_t r = 0; r < d; r++)
        B[d * d + r] = mu1[r] - mu2[r];
    if (LAPACKE_dtrtrs(LAPACK_COL_MAJOR, 'L', 'N', 'N', (lapack_int)d, (lapack_int)(d + 1), L2,
                       (lapack_int)d, B, (lapack_int)d) != 0)
        goto done;
    double tr = 0, maha = 0, ld = 0;
    for (size_t c = 0; c < d; c++)
        for (size_t r = 0; r < d; r++)
            tr += B[c * d + r] * B[c * d + r];
    for (size_t r = 0; r < d; r++)
        maha += B[d * d + r] * B[d * d + r];
    for (size_t j = 0; j < d; j++)
        ld += 2 * (log(L2[j * d + j]) - log(L1[j * d + j]));
    kl = 0.5 * (tr + maha - (double)d + ld);
done:
    free(L1);
    free(L2);
    free(B);
    return kl;
}
