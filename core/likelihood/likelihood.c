/* Observation models (core/likelihood/likelihood.h).
 *
 * Expectations over a latent Gaussian N(mu, v) come in two flavours:
 *  - gp_lik_expected, the ELBO's term, always uses the caller's Gauss-Hermite
 *    rule, so its derivatives are those of the very sum it returns (what an
 *    optimiser and a finite-difference test need);
 *  - the predictive quantities (probabilities, count CDFs, log predictive
 *    densities) are answers to users and must be right to many digits for any
 *    variance: a Gauss-Hermite rule converges slowly once the standard
 *    deviation is large against the scale on which the integrand changes
 *    (the logistic has poles at distance pi from the real axis; a Poisson
 *    density in f is 1/sqrt(y) wide), so above that scale they integrate with
 *    the trapezoid rule on a grid finer than it, which converges
 *    geometrically for such analytic integrands. */
#include "core/likelihood/likelihood.h"

#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/likelihood/softmax.h"
#include "core/model/mixture.h"

#define LOG_2PI 1.8378770664093454836
#define PI 3.14159265358979323846
#define MAX_LABEL 1e9
/* The rate of a Poisson draw is capped here (exp(f) overflows past f = 709). */
#define MAX_RATE 1e15
/* Trapezoid grid of a predictive expectation: mu +- GRID_HALF_WIDTH sd. */
#define GRID_HALF_WIDTH 9.0
#define GRID_MAX 4096

static const char *const names[GP_LIK_COUNT] = {"gaussian", "bernoulli", "poisson",
                                                 "poisson_sq", "softmax"};

int gp_likelihood_from_name(const char *name)
{
    for (int i = 0; name && i < GP_LIK_COUNT; i++)
        if (strcmp(names[i], name) == 0)
            return i;
    return -1;
}

const char *gp_likelihood_name(gp_likelihood l)
{
    return l >= 0 && l < GP_LIK_COUNT ? names[l] : "unknown";
}

static int label_fits(gp_likelihood l, double y)
{
    switch (l) {
    case GP_LIK_BERNOULLI:
        return y == 0.0 || y == 1.0;
    case GP_LIK_POISSON:
    case GP_LIK_POISSON_SQ:
        return y >= 0.0 && y <= MAX_LABEL && y == floor(y);
    default:
        return isfinite(y);
    }
}

int gp_likelihood_check_labels(gp_likelihood l, const double *y, size_t n, gp_error *err)
{
    if (l == GP_LIK_SOFTMAX) {
        size_t classes;
        return gp_softmax_classes(y, n, &classes, err);
    }
    for (size_t i = 0; i < n; i++) {
        if (label_fits(l, y[i]))
            continue;
        char field[GP_ERROR_FIELD_LEN];
        snprintf(field, sizeof field, "y[%zu]", i);
        const char *want = l == GP_LIK_BERNOULLI ? "0 or 1"
                           : l == GP_LIK_GAUSSIAN
                               ? "a finite number"
                               : "a non-negative integer (a count, at most 1e9)";
        return gp_error_set(err, GP_EDATA, field, "%s = %.17g: a %s label must be %s", field,
                            y[i], gp_likelihood_name(l), want);
    }
    return GP_OK;
}

/* ---- the density ---- */

/* log(1 + exp(x)) without overflow or loss for large |x|. */
static double softplus(double x)
{
    return x > 0.0 ? x + log1p(exp(-x)) : log1p(exp(x));
}

static double logistic(double x)
{
    if (x >= 0.0)
        return 1.0 / (1.0 + exp(-x));
    double e = exp(x);
    return e / (1.0 + e);
}

double gp_lik_log_density(const gp_lik *lik, double y, double f)
{
    switch (lik->type) {
    case GP_LIK_BERNOULLI:
        return y > 0.5 ? -softplus(-f) : -softplus(f);
    case GP_LIK_POISSON:
        return y * f - exp(f) - gp_log_gamma(y + 1.0);
    case GP_LIK_POISSON_SQ:
        return y * log(f * f + GP_LIK_SQ_EPS) - f * f - gp_log_gamma(y + 1.0);
    default: {
        double r = y - f;
        return -0.5 * (LOG_2PI + log(lik->noise)) - 0.5 * r * r / lik->noise;
    }
    }
}

void gp_lik_derivatives(const gp_lik *lik, double y, double f, double *d1, double *d2)
{
    double g, h;
    switch (lik->type) {
    case GP_LIK_BERNOULLI: {
        double p = logistic(f);
        g = y - p;
        h = -p * (1.0 - p);
        break;
    }
    case GP_LIK_POISSON: {
        double r = exp(f);
        g = y - r;
        h = -r;
        break;
    }
    case GP_LIK_POISSON_SQ: {
        double s = f * f + GP_LIK_SQ_EPS;
        g = 2.0 * y * f / s - 2.0 * f;
        h = 2.0 * y * (GP_LIK_SQ_EPS - f * f) / (s * s) - 2.0;
        break;
    }
    default:
        g = (y - f) / lik->noise;
        h = -1.0 / lik->noise;
        break;
    }
    if (d1)
        *d1 = g;
    if (d2)
        *d2 = h;
}

double gp_lik_log_density_sum(const gp_lik *lik, const double *y, const double *f, size_t n,
                              double *d1)
{
    double s = 0.0;
    for (size_t i = 0; i < n; i++) {
        s += gp_lik_log_density(lik, y[i], f[i]);
        if (d1)
            gp_lik_derivatives(lik, y[i], f[i], &d1[i], NULL);
    }
    return s;
}

double gp_lik_curvature_bound(const gp_lik *lik)
{
    switch (lik->type) {
    case GP_LIK_GAUSSIAN:
        return 1.0 / lik->noise;
    case GP_LIK_BERNOULLI:
        return 0.25;
    default:
        return INFINITY;
    }
}

/* ---- Gauss-Hermite ---- */

int gp_gauss_hermite(size_t n, double *x, double *w, gp_error *err)
{
    if (n < 1 || n > GP_LIK_QUADRATURE_MAX)
        return gp_error_set(err, GP_EINVAL, "quadrature_points",
                            "Gauss-Hermite needs 1 to %d points", GP_LIK_QUADRATURE_MAX);
    /* Golub-Welsch: the Jacobi matrix of the monic probabilists' Hermite
     * polynomials (x He_k = He_{k+1} + k He_{k-1}) has the nodes as
     * eigenvalues; each weight is the squared first eigenvector entry. */
    double e[GP_LIK_QUADRATURE_MAX], z[GP_LIK_QUADRATURE_MAX * GP_LIK_QUADRATURE_MAX];
    for (size_t i = 0; i < n; i++) {
        x[i] = 0.0;
        e[i] = i + 1 < n ? sqrt((double)(i + 1)) : 0.0;
    }
    if (LAPACKE_dstev(LAPACK_COL_MAJOR, 'V', (lapack_int)n, x, e, z, (lapack_int)n) != 0)
        return gp_error_set(err, GP_EINTERNAL, NULL, "dstev failed on the Hermite matrix");
    double sum = 0.0;
    for (size_t i = 0; i < n; i++) {
        w[i] = z[i * n] * z[i * n];
        sum += w[i];
    }
    for (size_t i = 0; i < n; i++)
        w[i] /= sum;
    /* Exact symmetry: dstev's nodes differ from their mirror images in the last bits. */
    for (size_t i = 0; i < n / 2; i++) {
        double a = 0.5 * (x[n - 1 - i] - x[i]), b = 0.5 * (w[i] + w[n - 1 - i]);
        x[i] = -a;
        x[n - 1 - i] = a;
        w[i] = w[n - 1 - i] = b;
    }
    if (n % 2)
        x[n / 2] = 0.0;
    return GP_OK;
}

int gp_quadrature_init(gp_quadrature *q, size_t n, gp_error *err)
{
    q->n = n;
    return gp_gauss_hermite(n, q->x, q->w, err);
}

double gp_lik_expected(const gp_lik *lik, const gp_quadrature *q, double y, double mu, double v,
                       double *dmu, double *dv)
{
    if (v < 0.0)
        v = 0.0;
    if (lik->type == GP_LIK_GAUSSIAN) {
        double r = y - mu;
        if (dmu)
            *dmu = r / lik->noise;
        if (dv)
            *dv = -0.5 / lik->noise;
        return -0.5 * (LOG_2PI + log(lik->noise)) - 0.5 * (r * r + v) / lik->noise;
    }
    if (lik->type == GP_LIK_POISSON) {
        double r = exp(mu + 0.5 * v);
        if (dmu)
            *dmu = y - r;
        if (dv)
            *dv = -0.5 * r;
        return y * mu - r - gp_log_gamma(y + 1.0);
    }
    double sd = sqrt(v), e = 0.0, gm = 0.0, gv = 0.0;
    for (size_t i = 0; i < q->n; i++) {
        double f = mu + sd * q->x[i], d1, d2;
        gp_lik_derivatives(lik, y, f, &d1, &d2);
        e += q->w[i] * gp_lik_log_density(lik, y, f);
        gm += q->w[i] * d1;
        /* d/dv of the sum itself: f depends on v through sd; at v = 0 the
         * limit, Price's theorem's E[d2]/2. */
        gv += sd > 0.0 ? q->w[i] * d1 * q->x[i] / (2.0 * sd) : 0.5 * q->w[i] * d2;
    }
    if (dmu)
        *dmu = gm;
    if (dv)
        *dv = gv;
    return e;
}

/* ---- predictive expectations ---- */

/* The rule of E h(f), f ~ N(mu, v), where h changes on the scale `feature`
 * (see the file comment): Gauss-Hermite while the standard deviation is
 * below it, else the trapezoid rule with a step of feature / 2 (coarser only
 * past GRID_MAX nodes). Nodes and weights (summing to 1) are computed on
 * demand (rule_node), so no expectation allocates. */
typedef struct gauss_rule {
    const gp_quadrature *q; /* NULL: trapezoid */
    size_t n;
    double mu, sd, h, sum; /* trapezoid: step in z = (f - mu) / sd, and the weights' sum */
} gauss_rule;

static double trapezoid_z(const gauss_rule *r, size_t i)
{
    return -GRID_HALF_WIDTH + (double)i * r->h / r->sd;
}

static void rule_for(const gp_quadrature *q, double mu, double v, double feature, gauss_rule *r)
{
    r->mu = mu;
    r->sd = v > 0.0 ? sqrt(v) : 0.0;
    if (r->sd <= feature) {
        r->q = q;
        r->n = q->n;
        return;
    }
    r->q = NULL;
    r->h = 0.5 * feature;
    double span = 2.0 * GRID_HALF_WIDTH * r->sd;
    r->n = (size_t)ceil(span / r->h) + 1;
    if (r->n > GRID_MAX) {
        r->n = GRID_MAX;
        r->h = span / (double)(r->n - 1);
    }
    r->sum = 0.0;
    for (size_t i = 0; i < r->n; i++) {
        double z = trapezoid_z(r, i);
        r->sum += exp(-0.5 * z * z);
    }
}

static void rule_node(const gauss_rule *r, size_t i, double *f, double *w)
{
    if (r->q) {
        *f = r->mu + r->sd * r->q->x[i];
        *w = r->q->w[i];
        return;
    }
    double z = trapezoid_z(r, i);
    *f = r->mu + r->sd * z;
    *w = exp(-0.5 * z * z) / r->sum;
}

/* The scale on which a likelihood's predictive integrands change in f. */
static double feature_scale(gp_likelihood l, double y)
{
    switch (l) {
    case GP_LIK_BERNOULLI:
        return 1.0;
    case GP_LIK_POISSON:
        return 1.0 / sqrt(1.0 + y);
    case GP_LIK_POISSON_SQ:
        return 0.25;
    default:
        return INFINITY;
    }
}

static double rate_of(gp_likelihood l, double f)
{
    if (l == GP_LIK_POISSON_SQ)
        return f * f;
    return f > 34.5 ? MAX_RATE : fmin(exp(f), MAX_RATE);
}

/* Moments of the rate under N(mu, v): exact for both links. */
static void rate_moments(gp_likelihood l, double mu, double v, double *mean, double *var)
{
    if (l == GP_LIK_POISSON_SQ) {
        *mean = mu * mu + v;
        *var = 2.0 * v * v + 4.0 * mu * mu * v;
        return;
    }
    *mean = exp(mu + 0.5 * v);
    *var = expm1(v) * exp(2.0 * mu + v);
}

static double logistic_expectation(const gp_quadrature *q, double mu, double v)
{
    gauss_rule r;
    rule_for(q, mu, v, feature_scale(GP_LIK_BERNOULLI, 0.0), &r);
    double p = 0.0, f, w;
    for (size_t i = 0; i < r.n; i++) {
        rule_node(&r, i, &f, &w);
        p += w * logistic(f);
    }
    return p;
}

void gp_lik_predict(const gp_lik *lik, const gp_quadrature *q, const double *mu,
                    const double *var, size_t m, size_t K, double *obs_mean, double *obs_var,
                    double *rate_mean, double *rate_var)
{
    if (lik->type == GP_LIK_GAUSSIAN) {
        gp_mixture_moments(mu, var, m, K, obs_mean, obs_var);
        for (size_t i = 0; i < m; i++)
            obs_var[i] += lik->noise;
        return;
    }
    for (size_t i = 0; i < m; i++) {
        if (lik->type == GP_LIK_BERNOULLI) {
            double p = 0.0;
            for (size_t k = 0; k < K; k++)
                p += logistic_expectation(q, mu[i + k * m], var[i + k * m]);
            p /= (double)K;
            obs_mean[i] = p;
            obs_var[i] = p * (1.0 - p);
            continue;
        }
        /* The mixture's rate moments, two passes (mean first) as in
         * gp_mixture_moments, so no cancellation between large moments. */
        double rm = 0.0, rv = 0.0, a, b;
        for (size_t k = 0; k < K; k++) {
            rate_moments(lik->type, mu[i + k * m], var[i + k * m], &a, &b);
            rm += a;
        }
        rm /= (double)K;
        for (size_t k = 0; k < K; k++) {
            rate_moments(lik->type, mu[i + k * m], var[i + k * m], &a, &b);
            rv += b + (a - rm) * (a - rm);
        }
        rv /= (double)K;
        if (rate_mean)
            rate_mean[i] = rm;
        if (rate_var)
            rate_var[i] = rv;
        obs_mean[i] = rm;
        obs_var[i] = rm + rv;
    }
}

/* ---- count quantiles ---- */

/* P(Y <= c) at one point for the mixed Poisson of the K components. */
static double count_cdf(gp_likelihood l, const gp_quadrature *q, const double *mu,
                        const double *var, size_t i, size_t m, size_t K, double c)
{
    double F = 0.0, f, w;
    for (size_t k = 0; k < K; k++) {
        gauss_rule r;
        rule_for(q, mu[i + k * m], var[i + k * m], feature_scale(l, c), &r);
        for (size_t j = 0; j < r.n; j++) {
            rule_node(&r, j, &f, &w);
            F += w * gp_poisson_cdf(c, rate_of(l, f));
        }
    }
    return F / (double)K;
}

/* The smallest count c with P(Y <= c) >= level: doubling search upward from
 * a start near the mean, then bisection. */
static double count_quantile(gp_likelihood l, const gp_quadrature *q, const double *mu,
                             const double *var, size_t i, size_t m, size_t K, double level,
                             double start)
{
    double lo = -1.0, hi = floor(start);
    if (hi < 0.0)
        hi = 0.0;
    if (count_cdf(l, q, mu, var, i, m, K, hi) >= level) {
        /* hi qualifies: the answer is in (lo, hi] */
    } else {
        double step = fmax(1.0, hi);
        lo = hi;
        for (;;) {
            hi = lo + step;
            if (hi >= MAX_RATE || count_cdf(l, q, mu, var, i, m, K, hi) >= level)
                break;
            lo = hi;
            step *= 2.0;
        }
    }
    while (hi - lo > 1.0) {
        double mid = floor(0.5 * (lo + hi));
        if (count_cdf(l, q, mu, var, i, m, K, mid) >= level)
            hi = mid;
        else
            lo = mid;
    }
    return hi;
}

void gp_lik_quantiles(const gp_lik *lik, const gp_quadrature *q, const double *mu,
                      const double *var, size_t m, size_t K, const double *levels, size_t nq,
                      double *out)
{
    if (lik->type == GP_LIK_GAUSSIAN) {
        double *v = malloc(m * K * sizeof *v);
        if (v == NULL) {
            for (size_t i = 0; i < m * nq; i++)
                out[i] = NAN;
            return;
        }
        for (size_t i = 0; i < m * K; i++)
            v[i] = var[i] + lik->noise;
        gp_mixture_quantiles(mu, v, m, K, levels, nq, out);
        free(v);
        return;
    }
    if (lik->type == GP_LIK_BERNOULLI) {
        double *p = malloc(2 * m * sizeof *p);
        if (p == NULL) {
            for (size_t i = 0; i < m * nq; i++)
                out[i] = NAN;
            return;
        }
        gp_lik_predict(lik, q, mu, var, m, K, p, p + m, NULL, NULL);
        for (size_t j = 0; j < nq; j++)
            for (size_t i = 0; i < m; i++)
                out[i + j * m] = 1.0 - p[i] >= levels[j] ? 0.0 : 1.0;
        free(p);
        return;
    }
    double *mean = malloc(2 * m * sizeof *mean);
    if (mean == NULL) {
        for (size_t i = 0; i < m * nq; i++)
            out[i] = NAN;
        return;
    }
    gp_lik_predict(lik, q, mu, var, m, K, mean, mean + m, NULL, NULL);
    for (size_t j = 0; j < nq; j++)
        for (size_t i = 0; i < m; i++)
            out[i + j * m] = count_quantile(lik->type, q, mu, var, i, m, K, levels[j],
                                            mean[i]);
    free(mean);
}

/* The mixed count CDF at given counts: a validation's coverage of a central
 * interval needs only F(y) and F(y - 1), two evaluations a point instead of
 * a search for each interval end (gp_lik_quantiles); the same count_cdf, so
 * the same interval membership. */
void gp_lik_count_cdf(const gp_lik *lik, const gp_quadrature *q, const double *mu,
                      const double *var, size_t m, size_t K, const double *c, double *out)
{
    for (size_t i = 0; i < m; i++)
        out[i] = c[i] < 0.0 ? 0.0 : count_cdf(lik->type, q, mu, var, i, m, K, floor(c[i]));
}

/* ---- log predictive density ---- */

static double log_sum_exp(const double *a, size_t n)
{
    double mx = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (a[i] > mx)
            mx = a[i];
    if (!isfinite(mx))
        return mx;
    double s = 0.0;
    for (size_t i = 0; i < n; i++)
        s += exp(a[i] - mx);
    return mx + log(s);
}

/* log E p(y | f) for one component, in logs throughout (a Poisson density of
 * a large count underflows long before its log does); t holds GRID_MAX. */
static double log_expected_density(const gp_lik *lik, const gp_quadrature *q, double y,
                                   double mu, double v, double *t)
{
    if (lik->type == GP_LIK_GAUSSIAN) {
        double s = v + lik->noise, r = y - mu;
        return -0.5 * (LOG_2PI + log(s)) - 0.5 * r * r / s;
    }
    gauss_rule r;
    rule_for(q, mu, v, feature_scale(lik->type, y), &r);
    double f, w;
    for (size_t j = 0; j < r.n; j++) {
        rule_node(&r, j, &f, &w);
        t[j] = log(w) + gp_lik_log_density(lik, y, f);
    }
    return log_sum_exp(t, r.n);
}

void gp_lik_log_predictive(const gp_lik *lik, const gp_quadrature *q, const double *mu,
                           const double *var, size_t m, size_t K, const double *y, double *logp)
{
    double *t = malloc(GRID_MAX * sizeof *t), *c = malloc((K ? K : 1) * sizeof *c);
    for (size_t i = 0; i < m; i++) {
        if (t == NULL || c == NULL) {
            logp[i] = NAN;
            continue;
        }
        for (size_t k = 0; k < K; k++)
            c[k] = log_expected_density(lik, q, y[i], mu[i + k * m], var[i + k * m], t);
        logp[i] = log_sum_exp(c, K) - log((double)K);
    }
    free(t);
    free(c);
}

/* ---- draws ---- */

void gp_lik_draw(const gp_lik *lik, const double *f, size_t count, gp_rng *rng, double *y)
{
    for (size_t i = 0; i < count; i++) {
        switch (lik->type) {
        case GP_LIK_BERNOULLI:
            y[i] = gp_rng_uniform(rng) < logistic(f[i]) ? 1.0 : 0.0;
            break;
        case GP_LIK_POISSON:
        case GP_LIK_POISSON_SQ:
            y[i] = gp_rng_poisson(rng, rate_of(lik->type, f[i]));
            break;
        default:
            y[i] = f[i] + sqrt(lik->noise) * gp_rng_normal(rng);
            break;
        }
    }
}

/* ---- Poisson helpers ---- */

double gp_poisson_cdf(double k, double rate)
{
    if (k < 0.0)
        return 0.0;
    if (!(rate > 0.0))
        return 1.0;
    if (!isfinite(rate))
        return 0.0;
    /* P(Y <= k) = Q(k + 1, rate) */
    double P, Q;
    gp_incomplete_gamma(floor(k) + 1.0, rate, &P, &Q);
    return Q;
}

double gp_rng_poisson(gp_rng *rng, double rate)
{
    if (!(rate > 0.0))
        return 0.0;
    if (rate > MAX_RATE)
        rate = MAX_RATE;
    if (rate < 10.0) { /* inversion by sequential search */
        double p = exp(-rate), u = gp_rng_uniform(rng), k = 0.0, cdf = p;
        while (u > cdf && k < 1000.0) {
            k += 1.0;
            p *= rate / k;
            cdf += p;
        }
        return k;
    }
    /* PTRS, the transformed rejection of Hormann (1993), as numpy draws it */
    double slam = sqrt(rate), loglam = log(rate);
    double b = 0.931 + 2.53 * slam, a = -0.059 + 0.02483 * b;
    double invalpha = 1.1239 + 1.1328 / (b - 3.4), vr = 0.9277 - 3.6224 / (b - 2.0);
    for (;;) {
        double U = gp_rng_uniform(rng) - 0.5, V = gp_rng_uniform(rng);
        double us = 0.5 - fabs(U);
        double k = floor((2.0 * a / us + b) * U + rate + 0.43);
        if (us >= 0.07 && V <= vr)
            return k;
        if (k < 0.0 || (us < 0.013 && V > us))
            continue;
        if (log(V) + log(invalpha) - log(a / (us * us) + b) <= -rate + k * loglam - gp_log_gamma(k + 1.0))
            return k;
    }
}
