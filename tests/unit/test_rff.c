/* Sparse-spectrum GP on one frequency matrix (core/features/sample.h, part 2):
 * the feature map against a direct loop, the low-rank LML against the dense
 * N x N GP of the feature kernel, finite-difference gradients (and NULL
 * blocks), convergence to the exact RBF GP as R grows, the cached factor and
 * alpha, and bad input. Every reference here is computed in the test itself
 * (plain loops and LAPACKE), never by the code under test. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include <lapacke.h>

#include "bench/support/fixture.h"
#include "core/base/parallel.h"
#include "core/base/rng.h"
#include "core/features/rff.h"
#include "core/features/sample.h"
#include "core/kernel/kernel.h"
#include "core/kernel/lml.h"
#include "core/optim/optim.h"
#include "core/optim/svgd.h"
#include "tests/unit/testutil.h"

/* ---- helpers (independent of the code under test) ---- */

static double *dalloc(size_t count)
{
    double *p = malloc((count ? count : 1) * sizeof *p);
    assert_non_null(p);
    return p;
}

/* X (n x d column-major) uniform on [lo, hi), y a smooth function plus noise. */
static void make_data(size_t n, size_t d, uint64_t seed, double lo, double hi, double *X,
                      double *y)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n * d; i++)
        X[i] = lo + (hi - lo) * gp_rng_uniform(&rng);
    for (size_t i = 0; i < n; i++) {
        double s = 0.0;
        for (size_t k = 0; k < d; k++)
            s += sin(1.1 * X[k * n + i] + 0.3 * (double)k) * (1.0 + 0.2 * (double)k);
        y[i] = s + 0.1 * gp_rng_normal(&rng);
    }
}

/* R x d frequencies, normal times a scale, from our own generator. */
static void make_omega(size_t R, size_t d, uint64_t seed, double *omega)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < R * d; i++)
        omega[i] = 1.2 * gp_rng_normal(&rng);
}

/* Phi (n x 2R, leading dimension n) by the definition, one entry at a time. */
static void direct_features(const double *X, size_t n, size_t d, const double *inv_ls,
                            const double *omega, size_t R, double a2, double *Phi)
{
    double c = sqrt(a2 / (double)R);
    for (size_t i = 0; i < n; i++)
        for (size_t r = 0; r < R; r++) {
            double z = 0.0;
            for (size_t k = 0; k < d; k++)
                z += omega[k * R + r] * (X[k * n + i] * inv_ls[k]);
            Phi[r * n + i] = c * cos(z);
            Phi[(R + r) * n + i] = c * sin(z);
        }
}

/* LML of y ~ N(0, K) for a full symmetric K (n x n); K is overwritten. */
static double dense_lml(double *K, size_t n, const double *y)
{
    lapack_int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)n, K, (lapack_int)n);
    if (info != 0)
        fail_msg("dense reference: dpotrf failed (info %d)", (int)info);
    double *a = dalloc(n);
    memcpy(a, y, n * sizeof *a);
    info = LAPACKE_dpotrs(LAPACK_COL_MAJOR, 'L', (lapack_int)n, 1, K, (lapack_int)n, a,
                          (lapack_int)n);
    assert_int_equal(info, 0);
    double quad = 0.0, logdet = 0.0;
    for (size_t i = 0; i < n; i++) {
        quad += y[i] * a[i];
        logdet += 2.0 * log(K[i * n + i]);
    }
    free(a);
    return -0.5 * quad - 0.5 * logdet - 0.5 * (double)n * log(2.0 * 3.14159265358979323846);
}

/* The exact LML of the feature kernel Phi Phi^T + s I, built densely. */
static double feature_kernel_lml(const double *X, const double *y, size_t n, size_t d,
                                 const double *log_ls, const double *omega, size_t R,
                                 double log_a2, double log_s)
{
    double *inv_ls = dalloc(d), *Phi = dalloc(n * 2 * R), *K = dalloc(n * n);
    for (size_t k = 0; k < d; k++)
        inv_ls[k] = exp(-log_ls[k]);
    direct_features(X, n, d, inv_ls, omega, R, exp(log_a2), Phi);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) {
            double s = 0.0;
            for (size_t c = 0; c < 2 * R; c++)
                s += Phi[c * n + i] * Phi[c * n + j];
            K[j * n + i] = s + (i == j ? exp(log_s) : 0.0);
        }
    double lml = dense_lml(K, n, y);
    free(inv_ls);
    free(Phi);
    free(K);
    return lml;
}

static void problem_init(gp_rff_problem *p, const double *X, const double *y, size_t n,
                         size_t d, size_t R, const double *omega, const double *log_ls,
                         double log_a2, double log_s)
{
    memset(p, 0, sizeof *p);
    p->X = X;
    p->y = y;
    p->n = n;
    p->d = d;
    p->R = R;
    p->omega = omega;
    p->log_ls = log_ls;
    p->log_amplitude2 = log_a2;
    p->log_noise = log_s;
}

static double rff_lml(const gp_rff_problem *p, gp_rff_work *w, const gp_rff_grad *g)
{
    double lml = NAN;
    gp_error err;
    int rc = gp_rff_lml(p, w, &lml, g, &err);
    if (rc != GP_OK)
        fail_msg("gp_rff_lml (n %zu, R %zu): %s (%d)", p->n, p->R, err.message, rc);
    assert_true(isfinite(lml));
    return lml;
}

/* ---- feature map ---- */

static void test_features_direct(void **state)
{
    (void)state;
    const size_t n = 13, d = 3, R = 7, ld = n + 4;
    double X[13 * 3], y[13], omega[7 * 3];
    make_data(n, d, 1, -2.0, 2.0, X, y);
    make_omega(R, d, 2, omega);
    const double inv_ls[3] = {1.0 / 0.7, 1.0 / 1.9, 1.0 / 1.3}, a2 = 2.3;
    double ref[13 * 14], Phi[17 * 14];
    for (size_t i = 0; i < ld * 2 * R; i++)
        Phi[i] = -12345.0; /* padding rows must stay untouched */
    direct_features(X, n, d, inv_ls, omega, R, a2, ref);
    gp_rff_features(X, n, d, inv_ls, omega, R, a2, Phi, ld);
    double worst = 0.0;
    for (size_t c = 0; c < 2 * R; c++) {
        for (size_t i = 0; i < n; i++) {
            double e = fabs(Phi[c * ld + i] - ref[c * n + i]);
            if (e > worst)
                worst = e;
            if (e > 1e-14)
                fail_msg("Phi[%zu][%zu] = %.17g, direct loop %.17g (|diff| %.3g)", i, c,
                         Phi[c * ld + i], ref[c * n + i], e);
        }
        for (size_t i = n; i < ld; i++)
            if (Phi[c * ld + i] != -12345.0)
                fail_msg("Phi wrote padding row %zu of column %zu (ldphi %zu > n %zu)", i, c,
                         ld, n);
    }
    printf("features: max |Phi - direct| = %.3g\n", worst);
}

/* ---- LML against the dense GP of the feature kernel ---- */

static void test_lml_matches_dense(void **state)
{
    (void)state;
    struct {
        size_t n, R;
    } sizes[] = {{9, 8}, {16, 8}, {40, 6}, {60, 3}, {25, 20}};
    const double noises[] = {1e-4, 0.3, 4.0};
    const double log_a2s[] = {log(1.7), log(0.4)};
    const size_t d = 3;
    double worst = 0.0;
    for (size_t t = 0; t < sizeof sizes / sizeof sizes[0]; t++) {
        size_t n = sizes[t].n, R = sizes[t].R;
        double *X = dalloc(n * d), *y = dalloc(n), *omega = dalloc(R * d);
        make_data(n, d, 10 + t, -1.5, 1.5, X, y);
        make_omega(R, d, 20 + t, omega);
        const double log_ls[3] = {log(0.8), log(1.5), log(1.1)};
        gp_rff_work *w = NULL;
        gp_error err;
        assert_int_equal(gp_rff_work_new(n, d, R, &w, &err), GP_OK);
        for (size_t a = 0; a < 2; a++)
            for (size_t s = 0; s < 3; s++) {
                gp_rff_problem p;
                problem_init(&p, X, y, n, d, R, omega, log_ls, log_a2s[a], log(noises[s]));
                double got = rff_lml(&p, w, NULL);
                double ref = feature_kernel_lml(X, y, n, d, log_ls, omega, R, log_a2s[a],
                                                log(noises[s]));
                double rel = fabs(got - ref) / fabs(ref);
                if (rel > worst)
                    worst = rel;
                if (rel > 1e-10)
                    fail_msg("N %zu, R %zu, a2 %g, s %g: gp_rff_lml %.15g, dense GP of the "
                             "feature kernel %.15g (relative error %.3g)",
                             n, R, exp(log_a2s[a]), noises[s], got, ref, rel);
            }
        gp_rff_work_free(w);
        free(X);
        free(y);
        free(omega);
    }
    printf("LML vs dense feature-kernel GP: worst relative error %.3g\n", worst);
}

/* ---- gradients ---- */

typedef struct rff_fd {
    const double *X, *y;
    size_t n, d, R;
    gp_rff_work *w;
} rff_fd;

/* The LML at x = (omega R x d, log lengthscales d, log a2, log s). */
static double rff_lml_at(void *ctx, const double *x)
{
    rff_fd *c = ctx;
    size_t Rd = c->R * c->d;
    gp_rff_problem p;
    problem_init(&p, c->X, c->y, c->n, c->d, c->R, x, x + Rd, x[Rd + c->d], x[Rd + c->d + 1]);
    return rff_lml(&p, c->w, NULL);
}

static void rff_param_name(void *ctx, size_t i, char *buf, size_t len)
{
    rff_fd *c = ctx;
    size_t Rd = c->R * c->d;
    if (i < Rd)
        snprintf(buf, len, "omega[%zu][%zu]", i % c->R, i / c->R);
    else if (i < Rd + c->d)
        snprintf(buf, len, "log_ls[%zu]", i - Rd);
    else
        snprintf(buf, len, i == Rd + c->d ? "log_amplitude2" : "log_noise");
}

static void check_gradients(size_t n, size_t R, double noise, uint64_t seed)
{
    const size_t d = 3;
    double *X = dalloc(n * d), *y = dalloc(n), *omega = dalloc(R * d);
    make_data(n, d, seed, -1.5, 1.5, X, y);
    make_omega(R, d, seed + 1, omega);
    double log_ls[3] = {log(0.8), log(1.5), log(1.1)}, log_a2 = log(1.3), log_s = log(noise);
    gp_rff_work *w = NULL;
    gp_error err;
    assert_int_equal(gp_rff_work_new(n, d, R, &w, &err), GP_OK);
    double *g_om = dalloc(R * d), g_ls[3], g_a2 = NAN, g_s = NAN;
    gp_rff_grad g = {.omega = g_om, .log_ls = g_ls, .log_amplitude2 = &g_a2, .log_noise = &g_s};
    gp_rff_problem p;
    problem_init(&p, X, y, n, d, R, omega, log_ls, log_a2, log_s);
    double lml = rff_lml(&p, w, &g);

    /* One vector (omega, log lengthscales, log a2, log s) and its gradient. */
    size_t np = R * d + d + 2;
    double *x = dalloc(np), *ga = dalloc(np);
    memcpy(x, omega, R * d * sizeof *x);
    memcpy(x + R * d, log_ls, d * sizeof *x);
    x[R * d + d] = log_a2;
    x[R * d + d + 1] = log_s;
    memcpy(ga, g_om, R * d * sizeof *ga);
    memcpy(ga + R * d, g_ls, d * sizeof *ga);
    ga[R * d + d] = g_a2;
    ga[R * d + d + 1] = g_s;
    rff_fd c = {X, y, n, d, R, w};
    char what[64];
    snprintf(what, sizeof what, "N %zu, R %zu, s %g: d LML", n, R, noise);
    tu_check_gradient(rff_lml_at, &c, x, np, ga,
                      (tu_fd_spec){.step = 1e-5, .rtol = 1e-6, .atol = 1e-6, .relative = 1},
                      rff_param_name, what);
    free(x);
    free(ga);

    /* NULL blocks: the others and the LML do not change. */
    problem_init(&p, X, y, n, d, R, omega, log_ls, log_a2, log_s);
    double lml0 = rff_lml(&p, w, NULL);
    if (fabs(lml0 - lml) > 1e-13 * fabs(lml))
        fail_msg("LML %.17g without a gradient, %.17g with one", lml0, lml);
    for (int mask = 0; mask < 16; mask++) {
        double *o2 = dalloc(R * d), l2[3] = {NAN, NAN, NAN}, a2v = NAN, s2v = NAN;
        for (size_t i = 0; i < R * d; i++)
            o2[i] = NAN;
        gp_rff_grad g2 = {.omega = (mask & 1) ? o2 : NULL,
                          .log_ls = (mask & 2) ? l2 : NULL,
                          .log_amplitude2 = (mask & 4) ? &a2v : NULL,
                          .log_noise = (mask & 8) ? &s2v : NULL};
        double lml2 = rff_lml(&p, w, &g2);
        if (fabs(lml2 - lml) > 1e-13 * fabs(lml))
            fail_msg("mask %d: LML %.17g with some gradient blocks NULL, %.17g with all", mask,
                     lml2, lml);
#define SAME(a, b, what)                                                                     \
    do {                                                                                     \
        if (!(fabs((a) - (b)) <= 1e-12 * (1.0 + fabs(b))))                                   \
            fail_msg("mask %d: %s = %.17g, %.17g with every block requested", mask, what,  \
                     (a), (b));                                                              \
    } while (0)
        if (mask & 1)
            for (size_t i = 0; i < R * d; i++)
                SAME(o2[i], g_om[i], "d/d omega");
        if (mask & 2)
            for (size_t k = 0; k < d; k++)
                SAME(l2[k], g_ls[k], "d/d log_ls");
        if (mask & 4)
            SAME(a2v, g_a2, "d/d log_amplitude2");
        if (mask & 8)
            SAME(s2v, g_s, "d/d log_noise");
#undef SAME
        free(o2);
    }
    gp_rff_work_free(w);
    free(X);
    free(y);
    free(omega);
    free(g_om);
}

static void test_gradients_fd(void **state)
{
    (void)state;
    check_gradients(24, 5, 0.1, 31); /* N > 2R */
    check_gradients(7, 6, 0.02, 41); /* N < 2R */
    check_gradients(30, 4, 1.7, 51); /* large noise */
    check_gradients(1100, 6, 0.3, 61); /* three row blocks of the gradient in one round */
}

/* ---- convergence to the exact RBF GP ---- */

typedef struct conv_case {
    size_t n, d;
    double *X, *Xt, *y;
    double log_ls[2], log_a2, noise;
    double exact;  /* exact GP LML (gp_exact_lml_grad) */
    double mc_var; /* variance of the first-order LML error per frequency */
} conv_case;

/* Reference quantities of the test computed here: the dense RBF GP, its
 * W = alpha alpha^T - K^{-1}, and the variance of the first-order MC error
 *   g(omega) = a2/2 sum_ij W_ij (cos(omega^T tau_ij) - exp(-|tau_ij|^2/2)),
 * so that LML_R - LML ~ mean of R draws of g and its sd is sqrt(var g / R). */
static void conv_setup(conv_case *c)
{
    size_t n = c->n = 40, d = c->d = 2;
    c->X = dalloc(n * d);
    c->y = dalloc(n);
    make_data(n, d, 77, -2.0, 2.0, c->X, c->y);
    c->Xt = dalloc(n * d);
    for (size_t i = 0; i < n; i++)
        for (size_t k = 0; k < d; k++)
            c->Xt[i * d + k] = c->X[k * n + i];
    c->log_ls[0] = log(0.9);
    c->log_ls[1] = log(1.4);
    c->log_a2 = log(1.5);
    c->noise = 0.1;

    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, d, 1, NULL, 0, &err), GP_OK);
    k->log_variance = c->log_a2;
    k->log_lengthscale[0] = c->log_ls[0];
    k->log_lengthscale[1] = c->log_ls[1];
    assert_int_equal(gp_exact_lml_grad(k, c->noise, c->Xt, d, n, c->y, &c->exact, NULL, &err),
                     GP_OK);
    gp_kernel_free(k);

    /* Our own dense GP: the same LML, and W. */
    double a2 = exp(c->log_a2), *K = dalloc(n * n), *tau = dalloc(n * n * d);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) {
            double r2 = 0.0;
            for (size_t q = 0; q < d; q++) {
                double t = (c->X[q * n + i] - c->X[q * n + j]) * exp(-c->log_ls[q]);
                tau[(j * n + i) * d + q] = t;
                r2 += t * t;
            }
            K[j * n + i] = a2 * exp(-0.5 * r2) + (i == j ? c->noise : 0.0);
        }
    double *Kc = dalloc(n * n);
    memcpy(Kc, K, n * n * sizeof *K);
    double ours = dense_lml(Kc, n, c->y); /* Kc now holds L */
    if (fabs(ours - c->exact) > 1e-9 * fabs(ours))
        fail_msg("gp_exact_lml_grad %.15g disagrees with the test's dense RBF GP %.15g",
                 c->exact, ours);
    double *alpha = dalloc(n);
    memcpy(alpha, c->y, n * sizeof *alpha);
    assert_int_equal(LAPACKE_dpotrs(LAPACK_COL_MAJOR, 'L', (lapack_int)n, 1, Kc, (lapack_int)n,
                                    alpha, (lapack_int)n),
                     0);
    assert_int_equal(LAPACKE_dpotri(LAPACK_COL_MAJOR, 'L', (lapack_int)n, Kc, (lapack_int)n), 0);
    double *W = dalloc(n * n);
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) {
            double kinv = i >= j ? Kc[j * n + i] : Kc[i * n + j];
            W[j * n + i] = alpha[i] * alpha[j] - kinv;
        }
    gp_rng rng;
    gp_rng_seed(&rng, 4242);
    const size_t draws = 3000;
    double sum = 0.0, sum2 = 0.0;
    for (size_t s = 0; s < draws; s++) {
        double om[2] = {gp_rng_normal(&rng), gp_rng_normal(&rng)}, g = 0.0;
        for (size_t j = 0; j < n; j++)
            for (size_t i = 0; i < n; i++) {
                const double *t = tau + (j * n + i) * d;
                double z = om[0] * t[0] + om[1] * t[1];
                double r2 = t[0] * t[0] + t[1] * t[1];
                g += W[j * n + i] * (cos(z) - exp(-0.5 * r2));
            }
        g *= 0.5 * a2;
        sum += g;
        sum2 += g * g;
    }
    double mean = sum / (double)draws;
    c->mc_var = sum2 / (double)draws - mean * mean;
    free(K);
    free(Kc);
    free(tau);
    free(alpha);
    free(W);
}

static void conv_free(conv_case *c)
{
    free(c->X);
    free(c->Xt);
    free(c->y);
}

static double conv_rff_lml(const conv_case *c, size_t R, uint64_t seed)
{
    gp_spectral spec;
    gp_error err;
    assert_int_equal(gp_kernel_spectral(GP_KERNEL_RBF, &spec, &err), GP_OK);
    double *omega = dalloc(R * c->d);
    if (gp_frequencies_draw(&spec, GP_FREQ_MC, R, c->d, seed, NULL, NULL, NULL, omega, &err) !=
        GP_OK)
        fail_msg("gp_frequencies_draw: %s", err.message);
    gp_rff_work *w = NULL;
    assert_int_equal(gp_rff_work_new(c->n, c->d, R, &w, &err), GP_OK);
    gp_rff_problem p;
    problem_init(&p, c->X, c->y, c->n, c->d, R, omega, c->log_ls, c->log_a2, log(c->noise));
    double lml = rff_lml(&p, w, NULL);
    gp_rff_work_free(w);
    free(omega);
    return lml;
}

static void test_converges_to_exact(void **state)
{
    (void)state;
    conv_case c;
    conv_setup(&c);
    /* R x R (2R x 2R) work is O(R^3) whatever N is, so R stays moderate. */
    const size_t R_big = 1500, R_small = 100, seeds = 6, seeds_small = 16;
    double sd_big = sqrt(c.mc_var / (double)R_big), sd_small = sqrt(c.mc_var / (double)R_small);
    double err_big = 0.0, err_small = 0.0, bias_big = 0.0;
    for (uint64_t s = 0; s < seeds; s++) {
        double big = conv_rff_lml(&c, R_big, 100 + s);
        printf("seed %d: exact LML %.6f, R=%zu %.6f (MC sd %.3g)\n", (int)s, c.exact, R_big,
               big, sd_big);
        /* 5 sd of the first-order MC error plus a margin for its O(1/R) bias */
        if (fabs(big - c.exact) > 5.0 * sd_big + 0.05)
            fail_msg("R=%zu seed %d: rff LML %.8f vs exact %.8f: |diff| %.4g > 5 MC sd (%.4g)",
                     R_big, (int)s, big, c.exact, fabs(big - c.exact), 5.0 * sd_big);
        err_big += fabs(big - c.exact) / (double)seeds;
        bias_big += (big - c.exact) / (double)seeds;
    }
    /* Small R is cheap: more seeds (the mean abs error of a few draws is noisy). */
    for (uint64_t s = 0; s < seeds_small; s++)
        err_small += fabs(conv_rff_lml(&c, R_small, 200 + s) - c.exact) / (double)seeds_small;
    printf("mean |LML_R - LML_exact|: R=%zu %.4g, R=%zu %.4g (MC sd %.3g and %.3g, "
           "expected ratio ~%.1f); mean signed error at R=%zu %.4g\n",
           R_small, err_small, R_big, err_big, sd_small, sd_big, sqrt((double)R_big / (double)R_small), R_big,
           bias_big);
    /* The mean of the errors over the seeds: its sd is sd_big / sqrt(seeds). */
    if (fabs(bias_big) > 5.0 * sd_big / sqrt((double)seeds) + 0.05)
        fail_msg("R=%zu: mean error over %zu seeds %.4g exceeds 5 of its sd (%.4g): biased",
                 R_big, seeds, bias_big, sd_big / sqrt((double)seeds));
    if (!(err_big < err_small / 1.8))
        fail_msg("error does not shrink with R: mean abs error %.4g at R=%zu vs %.4g at R=%zu",
                 err_big, R_big, err_small, R_small);
    conv_free(&c);
}

/* ---- the cached factor and alpha ---- */

static void test_factor_and_alpha(void **state)
{
    (void)state;
    struct {
        size_t n, R;
        double noise;
    } cases[] = {{30, 6, 0.05}, {8, 7, 0.3}, {50, 10, 1e-3}};
    const size_t d = 3;
    for (size_t t = 0; t < 3; t++) {
        size_t n = cases[t].n, R = cases[t].R, m = 2 * R;
        double *X = dalloc(n * d), *y = dalloc(n), *omega = dalloc(R * d);
        make_data(n, d, 60 + t, -1.0, 2.0, X, y);
        make_omega(R, d, 70 + t, omega);
        const double log_ls[3] = {log(0.6), log(1.2), log(2.0)}, inv_ls[3] = {1 / 0.6, 1 / 1.2,
                                                                                 1 / 2.0};
        double a2 = 0.8, s = cases[t].noise;
        gp_rff_work *w = NULL;
        gp_error err;
        assert_int_equal(gp_rff_work_new(n, d, R, &w, &err), GP_OK);
        gp_rff_problem p;
        problem_init(&p, X, y, n, d, R, omega, log_ls, log(a2), log(s));
        (void)rff_lml(&p, w, NULL);
        const double *L = gp_rff_work_factor(w), *alpha = gp_rff_work_alpha(w);
        double jit = gp_rff_work_jitter(w);
        assert_non_null(L);
        assert_non_null(alpha);
        assert_true(jit >= 0.0 && isfinite(jit));

        double *Phi = dalloc(n * m), *A = dalloc(m * m), *b = dalloc(m);
        direct_features(X, n, d, inv_ls, omega, R, a2, Phi);
        double amax = 0.0;
        for (size_t j = 0; j < m; j++) {
            for (size_t i = 0; i < m; i++) {
                double acc = 0.0;
                for (size_t q = 0; q < n; q++)
                    acc += Phi[i * n + q] * Phi[j * n + q];
                A[j * m + i] = acc + (i == j ? s : 0.0);
                if (fabs(A[j * m + i]) > amax)
                    amax = fabs(A[j * m + i]);
            }
            double acc = 0.0;
            for (size_t q = 0; q < n; q++)
                acc += Phi[j * n + q] * y[q];
            b[j] = acc;
        }
        /* L L^T = A + jitter I (lower triangle of L only). */
        for (size_t j = 0; j < m; j++)
            for (size_t i = j; i < m; i++) {
                double acc = 0.0;
                for (size_t q = 0; q <= j; q++)
                    acc += L[q * m + i] * L[q * m + j];
                double want = A[j * m + i] + (i == j ? jit : 0.0);
                if (fabs(acc - want) > 1e-12 * amax)
                    fail_msg("case %zu: (L L^T)[%zu][%zu] = %.15g, A = %.15g (jitter %g)", t, i,
                             j, acc, want, jit);
            }
        /* A alpha = Phi^T y (to the accuracy the jitter allows). */
        double bmax = 0.0, rmax = 0.0;
        for (size_t i = 0; i < m; i++) {
            double acc = 0.0;
            for (size_t j = 0; j < m; j++)
                acc += A[j * m + i] * alpha[j];
            if (fabs(b[i]) > bmax)
                bmax = fabs(b[i]);
            if (fabs(acc - b[i]) > rmax)
                rmax = fabs(acc - b[i]);
        }
        double anorm = 0.0;
        for (size_t j = 0; j < m; j++)
            anorm += fabs(alpha[j]);
        if (rmax > 1e-10 * bmax + jit * anorm)
            fail_msg("case %zu: max |A alpha - Phi^T y| = %.3g (|Phi^T y| max %.3g, jitter %g)",
                     t, rmax, bmax, jit);
        free(Phi);
        free(A);
        free(b);
        gp_rff_work_free(w);
        free(X);
        free(y);
        free(omega);
    }
}

/* ---- bad input ---- */

static void test_bad_input(void **state)
{
    (void)state;
    const size_t n = 12, d = 2, R = 4;
    double X[24], y[12], omega[8];
    make_data(n, d, 90, -1.0, 1.0, X, y);
    make_omega(R, d, 91, omega);
    double log_ls[2] = {0.1, -0.2};
    gp_rff_work *w = NULL;
    gp_error err;
    assert_int_equal(gp_rff_work_new(n, d, R, &w, &err), GP_OK);
    gp_rff_problem p;
    double lml = 0.0;
    double g_om[8], g_ls[2], g_a2, g_s;
    gp_rff_grad g = {.omega = g_om, .log_ls = g_ls, .log_amplitude2 = &g_a2, .log_noise = &g_s};

    X[5] = NAN;
    problem_init(&p, X, y, n, d, R, omega, log_ls, 0.0, log(0.1));
    assert_int_equal(gp_rff_lml(&p, w, &lml, &g, &err), GP_EDATA);
    X[5] = 0.3;
    y[3] = INFINITY;
    assert_int_equal(gp_rff_lml(&p, w, &lml, NULL, &err), GP_EDATA);
    y[3] = 0.2;
    omega[6] = NAN;
    assert_int_equal(gp_rff_lml(&p, w, &lml, &g, &err), GP_EDATA);
    omega[6] = 0.5;
    log_ls[1] = NAN;
    assert_int_equal(gp_rff_lml(&p, w, &lml, &g, &err), GP_EDATA);
    log_ls[1] = -0.2;
    p.log_noise = NAN;
    assert_int_equal(gp_rff_lml(&p, w, &lml, &g, &err), GP_EDATA);
    p.log_noise = log(0.1);
    p.log_amplitude2 = INFINITY;
    assert_true(gp_rff_lml(&p, w, &lml, &g, &err) < 0);
    p.log_amplitude2 = 0.0;

    /* The workspace still works after the errors. */
    assert_int_equal(gp_rff_lml(&p, w, &lml, &g, &err), GP_OK);
    assert_true(isfinite(lml));

    /* Absurd noise: s underflows to 0 (N > 2R here, so A = Phi^T Phi may even
     * factor): an error, never a crash or a silently non-finite LML. */
    p.log_noise = -800.0;
    lml = 0.0;
    int rc = gp_rff_lml(&p, w, &lml, &g, &err);
    printf("log_noise -800, N > 2R: rc %d (%s) %s\n", rc, gp_status_name(rc), err.message);
    assert_true(rc < 0);
    p.log_noise = 800.0;
    rc = gp_rff_lml(&p, w, &lml, &g, &err);
    printf("log_noise +800: rc %d (%s) %s\n", rc, gp_status_name(rc), err.message);
    assert_true(rc < 0);
    gp_rff_work_free(w);

    /* N < 2R: A = Phi^T Phi + 0 I is singular. */
    const size_t n2 = 3;
    assert_int_equal(gp_rff_work_new(n2, d, R, &w, &err), GP_OK);
    problem_init(&p, X, y, n2, d, R, omega, log_ls, 0.0, -800.0);
    /* X is n x d with leading dimension n: rebuild a 3 x 2 copy */
    double X2[6] = {X[0], X[1], X[2], X[12], X[13], X[14]};
    p.X = X2;
    rc = gp_rff_lml(&p, w, &lml, &g, &err);
    printf("log_noise -800, N < 2R: rc %d (%s) %s\n", rc, gp_status_name(rc), err.message);
    assert_true(rc < 0);
    gp_rff_work_free(w);
}

/* ---- against the independent numpy implementation of the methods note ----
 * tests/fixtures/rff_reference.txt, written by make_rff_fixtures.py with
 * docs/methods/reference/msrfr_numpy.py: its LML, d/dOmega, chain rule to
 * the log lengthscales, predictive mean and observation variance, and its
 * SVGD direction with both bandwidth rules. */

static double rel_diff(double a, double b)
{
    return fabs(a - b) / (fabs(b) > 1.0 ? fabs(b) : 1.0);
}

static void expect_close(const double *got, const double *want, size_t count, double tol,
                         const char *what)
{
    for (size_t i = 0; i < count; i++)
        tu_assert_within(got[i], want[i], tol * fmax(1.0, fabs(want[i])), "%s[%zu]", what, i);
}

static void test_matches_numpy_reference(void **state)
{
    (void)state;
    char path[512];
    gp_fixture fx;
    gp_error err;
    assert_int_equal(gp_fixture_path(path, sizeof path, "rff_reference.txt", &err), GP_OK);
    assert_int_equal(gp_fixture_load(path, &fx, &err), GP_OK);
    const double *X, *y, *omega, *d_omega, *d_log_ls, *Xt, *mean, *var;
    double noise, lml_ref;
    size_t n = 0, d = 0, R = 0, m = 0;
    assert_int_equal(gp_fixture_get_any(&fx, "X", &n, &d, &X, &err), GP_OK);
    assert_int_equal(gp_fixture_get_any(&fx, "omega", &R, NULL, &omega, &err), GP_OK);
    assert_int_equal(gp_fixture_get_any(&fx, "Xt", &m, NULL, &Xt, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "y", n, 1, &y, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "d_omega", R, d, &d_omega, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "d_log_ls", 1, d, &d_log_ls, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "mean", m, 1, &mean, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "var", m, 1, &var, &err), GP_OK);
    assert_int_equal(gp_fixture_scalar(&fx, "noise", &noise, &err), GP_OK);
    assert_int_equal(gp_fixture_scalar(&fx, "lml", &lml_ref, &err), GP_OK);

    /* The reference takes inputs already divided by the lengthscales and has
     * no amplitude: unit lengthscales and amplitude here. */
    double log_ls[8] = {0}, g_omega[64], g_ls[8], lml;
    assert_true(d <= 8 && R * d <= 64);
    gp_rff_problem p = {X, y, n, d, R, omega, log_ls, 0.0, log(noise), NULL};
    gp_rff_work *w;
    assert_int_equal(gp_rff_work_new(n, d, R, &w, &err), GP_OK);
    gp_rff_grad g = {g_omega, g_ls, NULL, NULL};
    assert_int_equal(gp_rff_lml(&p, w, &lml, &g, &err), GP_OK);
    assert_true(rel_diff(lml, lml_ref) < 1e-12);
    expect_close(g_omega, d_omega, R * d, 1e-10, "d_omega");
    expect_close(g_ls, d_log_ls, d, 1e-10, "d_log_ls");

    /* Predictions from the factor: mean phi^T alpha, variance s (1 + |L^-1 phi|^2). */
    size_t M2 = 2 * R;
    double *Phi = malloc(m * M2 * sizeof *Phi), ones[8];
    for (size_t k = 0; k < d; k++)
        ones[k] = 1.0;
    gp_rff_features(Xt, m, d, ones, omega, R, 1.0, Phi, m);
    const double *L = gp_rff_work_factor(w), *alpha = gp_rff_work_alpha(w);
    for (size_t i = 0; i < m; i++) {
        double phi[64], mu = 0.0, q = 0.0;
        for (size_t j = 0; j < M2; j++) {
            phi[j] = Phi[j * m + i];
            mu += phi[j] * alpha[j];
        }
        for (size_t j = 0; j < M2; j++) { /* forward substitution with L */
            double t = phi[j];
            for (size_t k = 0; k < j; k++)
                t -= L[k * M2 + j] * phi[k];
            phi[j] = t / L[j * M2 + j];
            q += phi[j] * phi[j];
        }
        double v = noise * (1.0 + q);
        expect_close(&mu, &mean[i], 1, 1e-11, "mean");
        expect_close(&v, &var[i], 1, 1e-11, "var");
    }
    free(Phi);
    gp_rff_work_free(w);

    /* The SVGD direction, both bandwidth rules. */
    const double *P, *G, *phi_pd, *h_pd, *phi_sc;
    double a, gamma, denom, h_sc;
    size_t np = 0, pd = 0;
    assert_int_equal(gp_fixture_get_any(&fx, "P", &np, &pd, &P, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "G", np, pd, &G, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "phi_perdim", np, pd, &phi_pd, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "h_perdim", 1, pd, &h_pd, &err), GP_OK);
    assert_int_equal(gp_fixture_get(&fx, "phi_scalar", np, pd, &phi_sc, &err), GP_OK);
    assert_int_equal(gp_fixture_scalar(&fx, "h_scalar", &h_sc, &err), GP_OK);
    assert_int_equal(gp_fixture_scalar(&fx, "alpha", &a, &err), GP_OK);
    assert_int_equal(gp_fixture_scalar(&fx, "gamma", &gamma, &err), GP_OK);
    assert_int_equal(gp_fixture_scalar(&fx, "denom", &denom, &err), GP_OK);
    assert_true(denom == (double)np); /* ours divides by n */
    gp_svgd_work *sw;
    assert_int_equal(gp_svgd_work_new(np, pd, &sw, &err), GP_OK);
    gp_svgd_options so;
    gp_svgd_default_options(&so);
    so.attraction = gamma;
    so.repulsion = a;
    double *phi = malloc(np * pd * sizeof *phi), h[8];
    so.bandwidth = GP_SVGD_BANDWIDTH_PER_DIM;
    gp_svgd_direction(P, G, np, pd, &so, sw, phi, h);
    expect_close(phi, phi_pd, np * pd, 1e-12, "phi_perdim");
    expect_close(h, h_pd, pd, 1e-13, "h_perdim");
    so.bandwidth = GP_SVGD_BANDWIDTH_TOTAL;
    gp_svgd_direction(P, G, np, pd, &so, sw, phi, h);
    expect_close(phi, phi_sc, np * pd, 1e-12, "phi_scalar");
    expect_close(h, &h_sc, 1, 1e-13, "h_scalar");
    free(phi);
    gp_svgd_work_free(sw);
    gp_fixture_free(&fx);
}


/* The products run as pool tasks (A's panels, rounds of gradient blocks): the
 * LML and every gradient are the same bits for 1, 2 and 3 compute threads, at
 * a size with several panels and a partial last round (2600 rows: 6 blocks). */
static void test_threads_same_bits(void **state)
{
    (void)state;
    const size_t n = 2600, d = 3, R = 100;
    double *X = dalloc(n * d), *y = dalloc(n), *omega = dalloc(R * d);
    make_data(n, d, 71, -1.5, 1.5, X, y);
    make_omega(R, d, 72, omega);
    const double log_ls[3] = {log(0.8), log(1.5), log(1.1)};
    gp_rff_work *w = NULL;
    gp_error err;
    assert_int_equal(gp_rff_work_new(n, d, R, &w, &err), GP_OK);
    double first[4 + 300], got[4 + 300];
    for (int threads = 1; threads <= 3; threads++) {
        gp_parallel_set_threads(threads);
        double g_ls[3], g_a2 = NAN, g_s = NAN; /* omega's gradient into got[4..] */
        gp_rff_grad g = {.omega = got + 4, .log_ls = g_ls, .log_amplitude2 = &g_a2,
                         .log_noise = &g_s};
        gp_rff_problem p;
        problem_init(&p, X, y, n, d, R, omega, log_ls, log(1.3), log(0.2));
        got[0] = rff_lml(&p, w, &g);
        got[1] = g_a2;
        got[2] = g_s;
        got[3] = g_ls[0] + 2.0 * g_ls[1] + 3.0 * g_ls[2];
        if (threads == 1)
            memcpy(first, got, sizeof got);
        else if (memcmp(first, got, sizeof got) != 0)
            fail_msg("%d threads: the LML or its gradient differ from 1 thread's", threads);
    }
    gp_parallel_set_threads(0);
    gp_rff_work_free(w);
    free(X);
    free(y);
    free(omega);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_features_direct),
        cmocka_unit_test(test_lml_matches_dense),
        cmocka_unit_test(test_gradients_fd),
        cmocka_unit_test(test_converges_to_exact),
        cmocka_unit_test(test_factor_and_alpha),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_matches_numpy_reference),
        cmocka_unit_test(test_threads_same_bits),
    };
    return cmocka_run_group_tests_name("rff", tests, NULL, NULL);
}
