/* core/likelihood: labels, densities and derivatives, Gauss-Hermite rules,
 * expectations against closed forms and brute-force integrals, the
 * predictive of y (probabilities, rate and count moments, count quantiles,
 * log predictive densities) and the draws.
 *
 * The brute-force reference of E h(f), f ~ N(mu, v), is a midpoint rule with
 * 200001 points over mu +- 12 sd: independent of the code's Gauss-Hermite and
 * trapezoid grids, and accurate far beyond the tolerances used. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/base/rng.h"
#include "core/likelihood/likelihood.h"
#include "tests/unit/testutil.h"

#define BRUTE_POINTS 200001

typedef double (*fn_of_f)(const void *ctx, double f);

static double brute_expect(fn_of_f h, const void *ctx, double mu, double v)
{
    double sd = sqrt(v), a = -12.0, b = 12.0, dz = (b - a) / BRUTE_POINTS, s = 0.0;
    for (size_t i = 0; i < BRUTE_POINTS; i++) {
        double z = a + (i + 0.5) * dz;
        s += exp(-0.5 * z * z) * h(ctx, mu + sd * z);
    }
    return s * dz / sqrt(2.0 * 3.14159265358979323846);
}

static double logistic_of(const void *ctx, double f)
{
    (void)ctx;
    return 1.0 / (1.0 + exp(-f));
}

typedef struct lik_y {
    gp_lik lik;
    double y;
} lik_y;

static double density_of(const void *ctx, double f)
{
    const lik_y *c = ctx;
    return exp(gp_lik_log_density(&c->lik, c->y, f));
}

static double log_density_of(const void *ctx, double f)
{
    const lik_y *c = ctx;
    return gp_lik_log_density(&c->lik, c->y, f);
}

static double exp_of(const void *ctx, double f)
{
    (void)ctx;
    return exp(f);
}

static void test_names_and_labels(void **state)
{
    (void)state;
    for (int l = 0; l < GP_LIK_COUNT; l++)
        assert_int_equal(gp_likelihood_from_name(gp_likelihood_name((gp_likelihood)l)), l);
    assert_int_equal(gp_likelihood_from_name("logit"), -1);
    assert_int_equal(gp_likelihood_from_name(NULL), -1);
    gp_error err;
    double ok01[4] = {0, 1, 1, 0}, bad01[3] = {0, 2, 1};
    assert_int_equal(gp_likelihood_check_labels(GP_LIK_BERNOULLI, ok01, 4, &err), GP_OK);
    assert_int_equal(gp_likelihood_check_labels(GP_LIK_BERNOULLI, bad01, 3, &err), GP_EDATA);
    assert_string_equal(err.field, "y[1]");
    double counts[3] = {0, 7, 1e6}, neg[2] = {3, -1}, frac[3] = {1, 2, 2.5};
    for (int l = GP_LIK_POISSON; l <= GP_LIK_POISSON_SQ; l++) {
        assert_int_equal(gp_likelihood_check_labels((gp_likelihood)l, counts, 3, &err), GP_OK);
        assert_int_equal(gp_likelihood_check_labels((gp_likelihood)l, neg, 2, &err), GP_EDATA);
        assert_string_equal(err.field, "y[1]");
        assert_int_equal(gp_likelihood_check_labels((gp_likelihood)l, frac, 3, &err), GP_EDATA);
        assert_string_equal(err.field, "y[2]");
    }
    double nan1[2] = {0, NAN};
    assert_int_equal(gp_likelihood_check_labels(GP_LIK_BERNOULLI, nan1, 2, &err), GP_EDATA);
}

/* E xi^(2k) = (2k - 1)!! exactly for 2k < 2n; odd moments 0. */
static void test_gauss_hermite_moments(void **state)
{
    (void)state;
    gp_error err;
    size_t sizes[4] = {1, 5, 20, 64};
    for (size_t s = 0; s < 4; s++) {
        size_t n = sizes[s];
        double x[GP_LIK_QUADRATURE_MAX], w[GP_LIK_QUADRATURE_MAX];
        assert_int_equal(gp_gauss_hermite(n, x, w, &err), GP_OK);
        for (size_t p = 0; p < 2 * n && p <= 24; p++) {
            double got = 0.0, scale = 0.0, want = p % 2 ? 0.0 : 1.0;
            for (size_t i = 0; i < n; i++) {
                got += w[i] * pow(x[i], (double)p);
                scale += w[i] * pow(fabs(x[i]), (double)p); /* the rounding's size */
            }
            for (size_t k = p; k > 1 && p % 2 == 0; k -= 2)
                want *= (double)(k - 1);
            tu_assert_close(got, want, 1e-11, 1e-13 * scale, "GH n=%zu moment %zu", n, p);
        }
        for (size_t i = 1; i < n; i++)
            assert_true(x[i] > x[i - 1]);
    }
    double x[2], w[2];
    assert_int_equal(gp_gauss_hermite(0, x, w, &err), GP_EINVAL);
    assert_int_equal(gp_gauss_hermite(GP_LIK_QUADRATURE_MAX + 1, x, w, &err), GP_EINVAL);
}

typedef struct density_ctx {
    gp_lik lik;
    double y;
} density_ctx;

static double fd_log_density(void *ctx, const double *x)
{
    const density_ctx *c = ctx;
    return gp_lik_log_density(&c->lik, c->y, x[0]);
}

static double fd_first_derivative(void *ctx, const double *x)
{
    const density_ctx *c = ctx;
    double d1;
    gp_lik_derivatives(&c->lik, c->y, x[0], &d1, NULL);
    return d1;
}

static void test_derivatives_against_differences(void **state)
{
    (void)state;
    const gp_lik liks[4] = {{GP_LIK_GAUSSIAN, 0.3}, {GP_LIK_BERNOULLI, 0}, {GP_LIK_POISSON, 0},
                            {GP_LIK_POISSON_SQ, 0}};
    const double ys[3] = {0, 1, 4}, fs[5] = {-3.0, -0.4, 0.05, 0.7, 2.5};
    tu_fd_spec spec = {1e-5, 1e-7, 1e-9, 1.0, 0};
    for (int l = 0; l < 4; l++)
        for (int a = 0; a < 3; a++) {
            if (liks[l].type == GP_LIK_BERNOULLI && ys[a] > 1)
                continue;
            for (int b = 0; b < 5; b++) {
                density_ctx c = {liks[l], ys[a]};
                double x = fs[b], d1, d2;
                gp_lik_derivatives(&c.lik, c.y, x, &d1, &d2);
                tu_check_gradient(fd_log_density, &c, &x, 1, &d1, spec, NULL, "d log p / df");
                tu_check_gradient(fd_first_derivative, &c, &x, 1, &d2, spec, NULL,
                                  "d2 log p / df2");
            }
        }
    /* normalised: the densities sum (integrate) to one over y */
    gp_lik bern = {GP_LIK_BERNOULLI, 0}, pois = {GP_LIK_POISSON, 0};
    tu_assert_close(exp(gp_lik_log_density(&bern, 0, 0.8)) + exp(gp_lik_log_density(&bern, 1, 0.8)),
                    1.0, 1e-15, 0, "bernoulli sums to one");
    double s = 0.0;
    for (int k = 0; k < 80; k++)
        s += exp(gp_lik_log_density(&pois, k, log(6.5)));
    tu_assert_close(s, 1.0, 1e-13, 0, "poisson sums to one");
    /* the logistic's extremes stay finite */
    assert_true(isfinite(gp_lik_log_density(&bern, 1, -800.0)));
    assert_true(isfinite(gp_lik_log_density(&bern, 0, 800.0)));
    tu_assert_close(gp_lik_log_density(&bern, 1, -800.0), -800.0, 1e-15, 0, "log sigma(-800)");
}

/* The poisson and gaussian closed forms against the quadrature of the same
 * integrand (a 64-point rule: the log density is polynomial but for e^f). */
static void test_expected_closed_forms_against_quadrature(void **state)
{
    (void)state;
    gp_error err;
    gp_quadrature q;
    assert_int_equal(gp_quadrature_init(&q, GP_LIK_QUADRATURE_MAX, &err), GP_OK);
    const double mus[3] = {-1.2, 0.3, 2.0}, vs[3] = {0.0, 0.25, 1.5}, ys[3] = {0, 3, 11};
    gp_lik liks[2] = {{GP_LIK_GAUSSIAN, 0.4}, {GP_LIK_POISSON, 0}};
    for (int l = 0; l < 2; l++)
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++)
                for (int c = 0; c < 3; c++) {
                    double closed = gp_lik_expected(&liks[l], &q, ys[c], mus[a], vs[b], NULL, NULL);
                    double quad = 0.0, sd = sqrt(vs[b]);
                    for (size_t i = 0; i < q.n; i++)
                        quad += q.w[i] * gp_lik_log_density(&liks[l], ys[c], mus[a] + sd * q.x[i]);
                    tu_assert_close(closed, quad, 1e-12, 1e-12, "%s E log p (mu %g v %g y %g)",
                                    gp_likelihood_name(liks[l].type), mus[a], vs[b], ys[c]);
                }
    /* the bernoulli quadrature against the brute-force integral */
    gp_quadrature q20;
    assert_int_equal(gp_quadrature_init(&q20, GP_LIK_QUADRATURE_POINTS, &err), GP_OK);
    for (int y = 0; y <= 1; y++)
        for (int a = 0; a < 3; a++)
            for (int b = 1; b < 3; b++) {
                lik_y c = {{GP_LIK_BERNOULLI, 0}, (double)y};
                double want = brute_expect(log_density_of, &c, mus[a], vs[b]);
                double got = gp_lik_expected(&c.lik, &q20, y, mus[a], vs[b], NULL, NULL);
                tu_assert_close(got, want, 1e-7, 1e-9, "bernoulli E log p (y %d mu %g v %g)", y,
                                mus[a], vs[b]);
            }
}

typedef struct expected_ctx {
    gp_lik lik;
    const gp_quadrature *q;
    double y;
} expected_ctx;

static double fd_expected(void *ctx, const double *x)
{
    const expected_ctx *c = ctx;
    return gp_lik_expected(&c->lik, c->q, c->y, x[0], x[1], NULL, NULL);
}

static void test_expected_gradients(void **state)
{
    (void)state;
    gp_error err;
    gp_quadrature q;
    assert_int_equal(gp_quadrature_init(&q, GP_LIK_QUADRATURE_POINTS, &err), GP_OK);
    const gp_lik liks[4] = {{GP_LIK_GAUSSIAN, 0.3}, {GP_LIK_BERNOULLI, 0}, {GP_LIK_POISSON, 0},
                            {GP_LIK_POISSON_SQ, 0}};
    const double pts[4][3] = {{0.0, 0.2, 1}, {-1.5, 1.1, 0}, {0.8, 0.05, 1}, {2.1, 3.0, 1}};
    tu_fd_spec spec = {1e-6, 1e-6, 1e-8, 1.0, 0};
    for (int l = 0; l < 4; l++)
        for (int p = 0; p < 4; p++) {
            double y = liks[l].type == GP_LIK_BERNOULLI ? pts[p][2] : 3.0 * pts[p][2] + p;
            expected_ctx c = {liks[l], &q, y};
            double x[2] = {pts[p][0], pts[p][1]}, g[2];
            gp_lik_expected(&c.lik, &q, y, x[0], x[1], &g[0], &g[1]);
            char what[64];
            snprintf(what, sizeof what, "%s E log p", gp_likelihood_name(liks[l].type));
            tu_check_gradient(fd_expected, &c, x, 2, g, spec, NULL, what);
        }
    /* v = 0: the Price limit E[d2]/2, the one-sided derivative of the sum */
    gp_lik bern = {GP_LIK_BERNOULLI, 0};
    double dv, d2;
    gp_lik_expected(&bern, &q, 1, 0.4, 0.0, NULL, &dv);
    gp_lik_derivatives(&bern, 1, 0.4, NULL, &d2);
    tu_assert_close(dv, 0.5 * d2, 1e-14, 0, "dv at v = 0");
    double h = 1e-7;
    double fd = (gp_lik_expected(&bern, &q, 1, 0.4, h, NULL, NULL) -
                 gp_lik_expected(&bern, &q, 1, 0.4, 0.0, NULL, NULL)) / h;
    tu_assert_close(dv, fd, 1e-5, 1e-9, "dv at v = 0 against a forward difference");
}

static void test_bernoulli_probability(void **state)
{
    (void)state;
    gp_error err;
    gp_quadrature q;
    assert_int_equal(gp_quadrature_init(&q, GP_LIK_QUADRATURE_POINTS, &err), GP_OK);
    gp_lik bern = {GP_LIK_BERNOULLI, 0};
    /* from tiny to very large latent variance, where a 20-point rule alone is off */
    const double mus[6] = {-6.0, -1.0, 0.0, 0.5, 2.0, 9.0};
    const double vs[6] = {0.0, 1e-4, 0.8, 4.0, 100.0, 2500.0};
    double mu[36], var[36], p[36], pv[36];
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 6; b++) {
            mu[a * 6 + b] = mus[a];
            var[a * 6 + b] = vs[b];
        }
    gp_lik_predict(&bern, &q, mu, var, 36, 1, p, pv, NULL, NULL);
    for (int i = 0; i < 36; i++) {
        double want = brute_expect(logistic_of, NULL, mu[i], var[i]);
        if (var[i] == 0.0)
            want = 1.0 / (1.0 + exp(-mu[i]));
        tu_assert_close(p[i], want, 1e-9, 1e-12, "p(y=1) at mu %g v %g", mu[i], var[i]);
        tu_assert_close(pv[i], p[i] * (1.0 - p[i]), 1e-15, 0, "p(1-p)");
    }
    /* symmetry: p(mu) + p(-mu) = 1 */
    double m2[2] = {1.3, -1.3}, v2[2] = {7.0, 7.0}, p2[2], pv2[2];
    gp_lik_predict(&bern, &q, m2, v2, 2, 1, p2, pv2, NULL, NULL);
    tu_assert_close(p2[0] + p2[1], 1.0, 1e-13, 0, "p(mu) + p(-mu)");
    /* a mixture is the average of its components' probabilities */
    double mm[2] = {-0.5, 1.5}, vm[2] = {0.3, 2.0}, pm, pvm, pc[2], pvc[2];
    gp_lik_predict(&bern, &q, mm, vm, 1, 2, &pm, &pvm, NULL, NULL);
    gp_lik_predict(&bern, &q, mm, vm, 2, 1, pc, pvc, NULL, NULL);
    tu_assert_close(pm, 0.5 * (pc[0] + pc[1]), 1e-15, 0, "mixture probability");
}

static void test_rate_and_count_moments(void **state)
{
    (void)state;
    gp_error err;
    gp_quadrature q;
    assert_int_equal(gp_quadrature_init(&q, GP_LIK_QUADRATURE_POINTS, &err), GP_OK);
    double mu[3] = {-0.5, 1.0, 2.5}, var[3] = {0.0, 0.3, 1.2}, om[3], ov[3], rm[3], rv[3];
    gp_lik pois = {GP_LIK_POISSON, 0}, sq = {GP_LIK_POISSON_SQ, 0};
    gp_lik_predict(&pois, &q, mu, var, 3, 1, om, ov, rm, rv);
    for (int i = 0; i < 3; i++) {
        double e1 = brute_expect(exp_of, NULL, mu[i], var[i]);
        if (var[i] == 0.0)
            e1 = exp(mu[i]);
        tu_assert_close(rm[i], e1, 1e-9, 0, "log-normal rate mean");
        tu_assert_close(rv[i], exp(2 * mu[i] + 2 * var[i]) - e1 * e1, 1e-9, 1e-14,
                        "log-normal rate variance");
        tu_assert_close(om[i], rm[i], 0, 0, "count mean = rate mean");
        tu_assert_close(ov[i], rm[i] + rv[i], 1e-15, 0, "count variance");
    }
    gp_lik_predict(&sq, &q, mu, var, 3, 1, om, ov, rm, rv);
    for (int i = 0; i < 3; i++) {
        double m = mu[i], v = var[i];
        tu_assert_close(rm[i], m * m + v, 1e-15, 0, "f^2 rate mean");
        /* E f^4 = m^4 + 6 m^2 v + 3 v^2 */
        double e4 = m * m * m * m + 6 * m * m * v + 3 * v * v;
        tu_assert_close(rv[i], e4 - (m * m + v) * (m * m + v), 1e-12, 1e-14, "f^2 rate variance");
    }
    /* mixture: the law of total variance */
    double m2[2] = {0.0, 1.0}, v2[2] = {0.5, 0.5}, a, b, r1, r2, c1[2], c2[2], cr1[2], cr2[2];
    gp_lik_predict(&pois, &q, m2, v2, 1, 2, &a, &b, &r1, &r2);
    gp_lik_predict(&pois, &q, m2, v2, 2, 1, c1, c2, cr1, cr2);
    double mean = 0.5 * (cr1[0] + cr1[1]);
    tu_assert_close(r1, mean, 1e-15, 0, "mixture rate mean");
    tu_assert_close(r2, 0.5 * (cr2[0] + cr2[1]) + 0.25 * (cr1[0] - cr1[1]) * (cr1[0] - cr1[1]),
                    1e-14, 0, "mixture rate variance");
}

static double pmf_sum_cdf(double k, double rate)
{
    double p = exp(-rate), s = 0.0;
    for (int j = 0; j <= (int)k; j++) {
        if (j > 0)
            p *= rate / j;
        s += p;
    }
    return s;
}

static void test_log_gamma(void **state)
{
    (void)state;
    double logfact = 0.0;
    for (int n = 0; n <= 170; n++) {
        if (n > 0)
            logfact += log((double)n);
        tu_assert_close(gp_log_gamma(n + 1.0), logfact, 1e-14, 5e-14, "log Gamma(%d + 1)", n);
    }
    tu_assert_close(gp_log_gamma(0.5), 0.5 * log(3.14159265358979323846), 0, 5e-14,
                    "log Gamma(1/2)");
    tu_assert_close(gp_log_gamma(1e9 + 1.0), 19723265848.226982, 1e-15, 0, "log Gamma(1e9 + 1)");
}

static void test_poisson_cdf(void **state)
{
    (void)state;
    const double rates[5] = {0.01, 0.7, 4.0, 30.0, 400.0};
    for (int r = 0; r < 5; r++)
        for (double k = 0; k < 3 * rates[r] + 10; k += 1 + floor(rates[r] / 7)) {
            double want = pmf_sum_cdf(k, rates[r]);
            tu_assert_close(gp_poisson_cdf(k, rates[r]), want, 1e-11, 1e-14,
                            "P(Y <= %g), rate %g", k, rates[r]);
        }
    assert_true(gp_poisson_cdf(-1, 2.0) == 0.0);
    assert_true(gp_poisson_cdf(3, 0.0) == 1.0);
    assert_true(gp_poisson_cdf(3, INFINITY) == 0.0);
}

/* The count quantiles: F(c - 1) < level <= F(c) under the brute-force mixed
 * Poisson CDF; v = 0 is the plain Poisson. */
typedef struct cdf_ctx {
    double c;
    int square;
} cdf_ctx;

static double poisson_cdf_of(const void *ctx, double f)
{
    const cdf_ctx *c = ctx;
    return gp_poisson_cdf(c->c, c->square ? f * f : exp(f));
}

static void test_count_quantiles(void **state)
{
    (void)state;
    gp_error err;
    gp_quadrature q;
    assert_int_equal(gp_quadrature_init(&q, GP_LIK_QUADRATURE_POINTS, &err), GP_OK);
    double mu[4] = {log(3.0), log(3.0), 0.2, log(40.0)}, var[4] = {0.0, 0.4, 2.0, 0.05};
    double levels[5] = {0.025, 0.25, 0.5, 0.75, 0.975}, out[20];
    gp_lik pois = {GP_LIK_POISSON, 0};
    gp_lik_quantiles(&pois, &q, mu, var, 4, 1, levels, 5, out);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 5; j++) {
            double c = out[i + 4 * j];
            assert_true(c >= 0 && c == floor(c));
            cdf_ctx at = {c, 0}, below = {c - 1, 0};
            double F = var[i] == 0.0 ? gp_poisson_cdf(c, exp(mu[i]))
                                     : brute_expect(poisson_cdf_of, &at, mu[i], var[i]);
            double Fb = c == 0 ? 0.0
                        : var[i] == 0.0 ? gp_poisson_cdf(c - 1, exp(mu[i]))
                                        : brute_expect(poisson_cdf_of, &below, mu[i], var[i]);
            if (!(F >= levels[j] - 1e-9 && Fb < levels[j] + 1e-9))
                fail_msg("point %d level %g: quantile %g has F %.12g, F(below) %.12g", i,
                         levels[j], c, F, Fb);
            if (j > 0)
                assert_true(c >= out[i + 4 * (j - 1)]);
        }
    /* bernoulli: 0 below 1 - p, 1 above */
    gp_lik bern = {GP_LIK_BERNOULLI, 0};
    double m1 = 1.0, v1 = 0.0, lv[2] = {0.2, 0.3}, o[2];
    gp_lik_quantiles(&bern, &q, &m1, &v1, 1, 1, lv, 2, o); /* p = 0.731, 1 - p = 0.269 */
    assert_true(o[0] == 0.0 && o[1] == 1.0);
}

/* The CDF at counts is the one the quantiles invert: for every count y,
 * y >= q(a) exactly when F(y) >= a, and y <= q(a) exactly when F(y - 1) < a
 * (a validation's coverage rests on it), over mixtures of both count
 * likelihoods; F(-1) = 0. */
static void test_count_cdf_inverts_quantiles(void **state)
{
    (void)state;
    gp_error err;
    gp_quadrature q;
    assert_int_equal(gp_quadrature_init(&q, GP_LIK_QUADRATURE_POINTS, &err), GP_OK);
    enum { M = 3, K = 2, NL = 6, NY = 40 };
    double mu[M * K] = {log(3.0), 0.2, log(12.0), log(2.0), 1.1, log(9.0)};
    double var[M * K] = {0.0, 2.0, 0.05, 0.4, 0.3, 0.5};
    double levels[NL] = {0.005, 0.025, 0.25, 0.5, 0.75, 0.975}, qs[M * NL];
    gp_likelihood types[2] = {GP_LIK_POISSON, GP_LIK_POISSON_SQ};
    for (int t = 0; t < 2; t++) {
        gp_lik lik = {types[t], 0};
        gp_lik_quantiles(&lik, &q, mu, var, M, K, levels, NL, qs);
        for (int yv = -1; yv < NY; yv++) {
            double c[M] = {yv, yv, yv}, cb[M] = {yv - 1, yv - 1, yv - 1}, F[M], Fb[M];
            gp_lik_count_cdf(&lik, &q, mu, var, M, K, c, F);
            gp_lik_count_cdf(&lik, &q, mu, var, M, K, cb, Fb);
            for (int i = 0; i < M; i++) {
                if (yv < 0)
                    assert_true(F[i] == 0.0);
                if (yv == 0)
                    assert_true(Fb[i] == 0.0);
                for (int j = 0; j < NL; j++) {
                    double qa = qs[i + M * j];
                    if ((yv >= qa) != (F[i] >= levels[j]) || (yv <= qa) != (Fb[i] < levels[j]))
                        fail_msg("%s point %d level %g: y %d, quantile %g, F %.15g, F(y-1) %.15g",
                                 gp_likelihood_name(types[t]), i, levels[j], yv, qa, F[i], Fb[i]);
                }
            }
        }
    }
}

static void test_log_predictive(void **state)
{
    (void)state;
    gp_error err;
    gp_quadrature q;
    assert_int_equal(gp_quadrature_init(&q, GP_LIK_QUADRATURE_POINTS, &err), GP_OK);
    gp_lik liks[3] = {{GP_LIK_BERNOULLI, 0}, {GP_LIK_POISSON, 0}, {GP_LIK_POISSON_SQ, 0}};
    double mu[3] = {-0.7, 1.2, 2.4}, var[3] = {0.3, 3.0, 0.6};
    double ys[2][3] = {{0, 1, 1}, {0, 5, 17}};
    for (int l = 0; l < 3; l++) {
        const double *y = ys[l == 0 ? 0 : 1];
        double lp[3];
        gp_lik_log_predictive(&liks[l], &q, mu, var, 3, 1, y, lp);
        for (int i = 0; i < 3; i++) {
            lik_y c = {liks[l], y[i]};
            double want = log(brute_expect(density_of, &c, mu[i], var[i]));
            tu_assert_close(lp[i], want, 1e-8, 1e-10, "%s log predictive at %d",
                            gp_likelihood_name(liks[l].type), i);
        }
    }
    /* gaussian: log N(y; mu, v + s2) */
    gp_lik g = {GP_LIK_GAUSSIAN, 0.2};
    double y = 0.9, lp;
    gp_lik_log_predictive(&g, &q, mu, var, 1, 1, &y, &lp);
    double s = var[0] + 0.2;
    tu_assert_close(lp, -0.5 * log(2 * 3.14159265358979323846 * s) -
                            0.5 * (y - mu[0]) * (y - mu[0]) / s,
                    1e-14, 0, "gaussian log predictive");
}

static void test_draws(void **state)
{
    (void)state;
    gp_rng rng;
    const double rates[4] = {0.3, 3.5, 12.0, 250.0};
    for (int r = 0; r < 4; r++) {
        gp_rng_seed(&rng, 11 + (uint64_t)r);
        size_t n = 200000;
        double s = 0.0, ss = 0.0;
        for (size_t i = 0; i < n; i++) {
            double k = gp_rng_poisson(&rng, rates[r]);
            assert_true(k >= 0 && k == floor(k));
            s += k;
            ss += k * k;
        }
        double mean = s / n, var = ss / n - mean * mean, se = sqrt(rates[r] / n);
        tu_assert_within(mean, rates[r], 6 * se, "Poisson(%g) draw mean", rates[r]);
        tu_assert_within(var, rates[r], 6 * rates[r] * sqrt(2.0 / n) + 6 * se,
                         "Poisson(%g) draw variance", rates[r]);
    }
    /* bernoulli draws at f = 0.8 have mean sigma(0.8) */
    gp_lik bern = {GP_LIK_BERNOULLI, 0};
    size_t n = 100000;
    double *f = malloc(n * sizeof *f), *y = malloc(n * sizeof *y);
    assert_non_null(f);
    assert_non_null(y);
    for (size_t i = 0; i < n; i++)
        f[i] = 0.8;
    gp_rng_seed(&rng, 5);
    gp_lik_draw(&bern, f, n, &rng, y);
    double s = 0.0;
    for (size_t i = 0; i < n; i++) {
        assert_true(y[i] == 0.0 || y[i] == 1.0);
        s += y[i];
    }
    double p = 1.0 / (1.0 + exp(-0.8));
    tu_assert_within(s / n, p, 6 * sqrt(p * (1 - p) / n), "bernoulli draw mean");
    free(f);
    free(y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names_and_labels),
        cmocka_unit_test(test_gauss_hermite_moments),
        cmocka_unit_test(test_derivatives_against_differences),
        cmocka_unit_test(test_expected_closed_forms_against_quadrature),
        cmocka_unit_test(test_expected_gradients),
        cmocka_unit_test(test_bernoulli_probability),
        cmocka_unit_test(test_rate_and_count_moments),
        cmocka_unit_test(test_log_gamma),
        cmocka_unit_test(test_poisson_cdf),
        cmocka_unit_test(test_count_quantiles),
        cmocka_unit_test(test_count_cdf_inverts_quantiles),
        cmocka_unit_test(test_log_predictive),
        cmocka_unit_test(test_draws),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
