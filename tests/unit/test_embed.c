/* The random features of core/methods/rfgp/embed.h against their expectations
 * (docs/methods/kernel-jit-online.md §3):
 *   - the closed-form inner feature of a Gaussian, cos(w^T m + b) exp(-w^T V w
 *     / 2), against the Monte Carlo average of cos over draws of it (diagonal
 *     and full covariances), and the samples kind on the same draws against
 *     that average exactly;
 *   - moment matching of messages: a tuple (normal, beta, gamma) has the inner
 *     features of the Gaussian with the messages' moments, and those moments
 *     are the Monte Carlo moments of draws of the messages;
 *   - stage one: phi(r)^T phi(s) against the exact expected product kernel of
 *     two Gaussians (§3's closed form);
 *   - stage two: psi(r)^T psi(s) against the Gaussian kernel of width gamma on
 *     the embeddings, and point features against the rbf kernel.
 * Monte Carlo tolerances are 5 standard errors (computed, not guessed). */
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
#include "core/methods/rfgp/embed.h"
#include "tests/unit/testutil.h"

static double *dalloc(size_t count)
{
    double *p = calloc(count ? count : 1, sizeof *p);
    assert_non_null(p);
    return p;
}

/* W (m x D) = unit draws / widths (row k by width k), b (D). */
static void draws(uint64_t seed, size_t m, size_t D, const double *widths, double *W, double *b)
{
    gp_embed_draw(seed, 1, m, D, W, b);
    for (size_t i = 0; i < D; i++)
        for (size_t k = 0; k < m; k++)
            W[i * m + k] /= widths ? widths[k] : 1.0;
}

static gp_embed gaussian_embed(size_t d, int full, size_t din, const double *W, const double *b)
{
    gp_embed e = {0};
    e.input.kind = GP_INPUT_GAUSSIAN;
    e.input.dim = d;
    e.input.full_covariance = full;
    e.dk = d;
    e.d_in = din;
    e.d_out = 1;
    e.w_in = W;
    e.b_in = b;
    return e;
}

/* ---- the closed-form Gaussian inner feature against Monte Carlo ---- */

static void gaussian_vs_mc(int full)
{
    size_t d = 2, din = 6, K = 200000;
    double widths[2] = {0.8, 1.3}, W[12], b[6];
    draws(7, d, din, widths, W, b);
    double m[2] = {0.4, -0.7}, V[4] = {0.3, 0.1, 0.1, 0.5}; /* full: column-major */
    if (!full)
        V[1] = V[2] = 0.0;
    /* one encoded row */
    double row[6];
    size_t width = full ? d + d * d : 2 * d;
    row[0] = m[0];
    row[1] = m[1];
    if (full)
        memcpy(row + 2, V, 4 * sizeof *V);
    else {
        row[2] = V[0];
        row[3] = V[3];
    }
    (void)width;
    gp_embed e = gaussian_embed(d, full, din, W, b);
    double phi[6];
    gp_error err;
    assert_int_equal(gp_embed_inner(&e, row, 1, 0, 1, phi, &err), GP_OK);
    /* draws x = m + C e with C C^T = V */
    double c00 = sqrt(V[0]), c10 = V[1] / c00, c11 = sqrt(V[3] - c10 * c10);
    gp_rng rng;
    gp_rng_seed(&rng, 99);
    double sum[6] = {0}, sum2[6] = {0}, c0 = sqrt(2.0 / (double)din);
    for (size_t t = 0; t < K; t++) {
        double e0 = gp_rng_normal(&rng), e1 = gp_rng_normal(&rng);
        double x0 = m[0] + c00 * e0, x1 = m[1] + c10 * e0 + c11 * e1;
        for (size_t i = 0; i < din; i++) {
            double v = c0 * cos(W[i * d] * x0 + W[i * d + 1] * x1 + b[i]);
            sum[i] += v;
            sum2[i] += v * v;
        }
    }
    for (size_t i = 0; i < din; i++) {
        double mean = sum[i] / (double)K, var = sum2[i] / (double)K - mean * mean;
        tu_assert_within(phi[i], mean, 5.0 * sqrt(var / (double)K),
                         "%s covariance: inner feature %zu vs Monte Carlo", full ? "full" : "diag",
                         i);
    }
}

static void test_gaussian_inner_vs_monte_carlo(void **state)
{
    (void)state;
    gaussian_vs_mc(0);
    gaussian_vs_mc(1);
}

/* The samples kind is the average of the cosines over its points, exactly. */
static void test_samples_kind_is_the_average(void **state)
{
    (void)state;
    size_t d = 2, din = 5, S = 300;
    double W[10], b[5];
    draws(8, d, din, NULL, W, b);
    double *row = dalloc(S * d);
    gp_rng rng;
    gp_rng_seed(&rng, 5);
    for (size_t i = 0; i < S * d; i++)
        row[i] = gp_rng_normal(&rng);
    gp_embed e = {0};
    e.input.kind = GP_INPUT_SAMPLES;
    e.input.dim = d;
    e.input.samples = S;
    e.dk = d;
    e.d_in = din;
    e.d_out = 1;
    e.w_in = W;
    e.b_in = b;
    double phi[5];
    gp_error err;
    assert_int_equal(gp_embed_inner(&e, row, 1, 0, 1, phi, &err), GP_OK);
    for (size_t i = 0; i < din; i++) {
        double s = 0.0;
        for (size_t t = 0; t < S; t++)
            s += cos(W[i * d] * row[t * d] + W[i * d + 1] * row[t * d + 1] + b[i]);
        tu_assert_close(phi[i], sqrt(2.0 / (double)din) * s / (double)S, 1e-12, 1e-15,
                        "samples: feature %zu", i);
    }
    free(row);
}

/* ---- messages ---- */

static void test_messages_moment_matched(void **state)
{
    (void)state;
    size_t din = 7, c = 3;
    double W[21], b[7];
    draws(9, c, din, NULL, W, b);
    /* normal(0.3, 0.2), beta(2, 5), gamma(3, 2) */
    double row[6] = {0.3, 0.2, 2.0, 5.0, 3.0, 2.0};
    gp_embed e = {0};
    e.input.kind = GP_INPUT_MESSAGES;
    e.input.arity = c;
    e.input.messages[0] = GP_MESSAGE_NORMAL;
    e.input.messages[1] = GP_MESSAGE_BETA;
    e.input.messages[2] = GP_MESSAGE_GAMMA;
    e.dk = c;
    e.d_in = din;
    e.d_out = 1;
    e.w_in = W;
    e.b_in = b;
    double phi[7], M[3], V[3];
    gp_error err;
    assert_int_equal(gp_embed_inner(&e, row, 1, 0, 1, phi, &err), GP_OK);
    gp_embed_moments(&e, row, 1, 0, 1, M, V);
    /* the moments are the messages' own, by Monte Carlo */
    size_t K = 400000;
    gp_rng rng;
    gp_rng_seed(&rng, 17);
    double s1[3] = {0}, s2[3] = {0};
    for (size_t t = 0; t < K; t++) {
        double x[3];
        x[0] = 0.3 + sqrt(0.2) * gp_rng_normal(&rng);
        double g1 = gp_rng_gamma(&rng, 2.0), g2 = gp_rng_gamma(&rng, 5.0);
        x[1] = g1 / (g1 + g2);
        x[2] = gp_rng_gamma(&rng, 3.0) / 2.0; /* rate 2 */
        for (size_t k = 0; k < 3; k++) {
            s1[k] += x[k];
            s2[k] += x[k] * x[k];
        }
    }
    for (size_t k = 0; k < 3; k++) {
        double mean = s1[k] / (double)K, var = s2[k] / (double)K - mean * mean;
        /* standard errors of the mean and (roughly, 4th moment <= 10 var^2) the variance */
        tu_assert_within(M[k], mean, 5.0 * sqrt(var / (double)K), "message %zu: mean", k);
        tu_assert_within(V[k], var, 5.0 * sqrt(10.0 * var * var / (double)K),
                         "message %zu: variance", k);
    }
    /* and the features are those of the Gaussian with these moments */
    gp_embed g = gaussian_embed(c, 0, din, W, b);
    double grow[6] = {M[0], M[1], M[2], V[0], V[1], V[2]}, gphi[7];
    assert_int_equal(gp_embed_inner(&g, grow, 1, 0, 1, gphi, &err), GP_OK);
    tu_assert_close_array(phi, gphi, din, 1e-14, 1e-16, "messages vs their Gaussian");
}

/* ---- stage one: the expected product kernel ---- */

/* E_p E_q k(x, y) for k(x, y) = exp(-(x-y)^T S^{-1} (x-y) / 2), S = diag(l^2),
 * p = N(mp, Vp), q = N(mq, Vq) diagonal: sqrt(det(Dpq) / det(S^{-1}))
 * exp(-(mp-mq)^T Dpq (mp-mq) / 2) with Dpq = (Vp + Vq + S)^{-1} (§3). */
static double epp(const double *mp, const double *vp, const double *mq, const double *vq,
                  const double *l, size_t d)
{
    double logdet = 0.0, quad = 0.0;
    for (size_t k = 0; k < d; k++) {
        double dk = 1.0 / (vp[k] + vq[k] + l[k] * l[k]), diff = mp[k] - mq[k];
        logdet += log(dk) + 2.0 * log(l[k]);
        quad += diff * diff * dk;
    }
    return exp(0.5 * logdet - 0.5 * quad);
}

static void test_inner_products_vs_expected_product_kernel(void **state)
{
    (void)state;
    size_t d = 2, din = 40000;
    double l[2] = {0.9, 0.6};
    double *W = dalloc(d * din), *b = dalloc(din);
    draws(21, d, din, l, W, b);
    gp_embed e = gaussian_embed(d, 0, din, W, b);
    /* three Gaussians: rows (m0, m1, v0, v1) */
    double rows[3][4] = {{0.0, 0.0, 0.1, 0.2}, {0.5, -0.3, 0.3, 0.05}, {1.5, 1.0, 0.02, 0.4}};
    double *phi = dalloc(3 * din);
    gp_error err;
    for (size_t r = 0; r < 3; r++)
        assert_int_equal(gp_embed_inner(&e, rows[r], 1, 0, 1, phi + r * din, &err), GP_OK);
    for (size_t r = 0; r < 3; r++)
        for (size_t s = r; s < 3; s++) {
            double ip = 0.0;
            for (size_t i = 0; i < din; i++)
                ip += phi[r * din + i] * phi[s * din + i];
            double want = epp(rows[r], rows[r] + 2, rows[s], rows[s] + 2, l, d);
            /* each term of the sum is bounded by 2 / din: the average of din
             * bounded terms, standard error <= sqrt(2 / din) */
            tu_assert_within(ip, want, 5.0 * sqrt(2.0 / (double)din),
                             "phi(%zu)^T phi(%zu) vs the expected product kernel", r, s);
        }
    free(W);
    free(b);
    free(phi);
}

/* ---- stage two, and points ---- */

static void test_outer_and_point_kernels(void **state)
{
    (void)state;
    size_t m = 3, D = 40000;
    double gamma = 0.7;
    double *W = dalloc(m * D), *b = dalloc(D), *psi = dalloc(3 * D);
    draws(31, m, D, NULL, W, b);
    for (size_t i = 0; i < m * D; i++)
        W[i] /= gamma;
    /* three embeddings */
    double emb[9] = {0.1, 0.2, -0.3, 0.4, 0.1, 0.0, -0.5, 0.9, 0.3};
    gp_embed_map(W, b, m, D, emb, 3, psi, NULL);
    for (size_t r = 0; r < 3; r++)
        for (size_t s = r; s < 3; s++) {
            double ip = 0.0, d2 = 0.0;
            for (size_t i = 0; i < D; i++)
                ip += psi[r * D + i] * psi[s * D + i];
            for (size_t k = 0; k < m; k++)
                d2 += (emb[r * m + k] - emb[s * m + k]) * (emb[r * m + k] - emb[s * m + k]);
            tu_assert_within(ip, exp(-d2 / (2.0 * gamma * gamma)), 5.0 * sqrt(2.0 / (double)D),
                             "psi(%zu)^T psi(%zu) vs the Gaussian kernel on embeddings", r, s);
        }
    /* points through gp_embed_features: the rbf kernel of the standardised inputs */
    double l[3] = {0.8, 1.2, 2.0};
    draws(32, m, D, l, W, b);
    gp_embed e = {0};
    e.input.kind = GP_INPUT_POINT;
    e.input.dim = m;
    e.dk = m;
    e.d_out = D;
    e.w_out = W;
    e.b_out = b;
    double mean[3] = {1.0, -1.0, 0.5}, scale[3] = {2.0, 1.0, 0.5};
    e.x_mean = mean;
    e.x_scale = scale;
    double X[6] = {1.2, 2.0, -1.0, -0.2, 0.6, 0.3}; /* 2 points, column-major 2 x 3 */
    gp_error err;
    assert_int_equal(gp_embed_features(&e, X, 2, 0, 2, psi, &err), GP_OK);
    double ip = 0.0, d2 = 0.0;
    for (size_t i = 0; i < D; i++)
        ip += psi[i] * psi[D + i];
    for (size_t k = 0; k < m; k++) {
        double diff = (X[k * 2] - X[k * 2 + 1]) / scale[k] / l[k];
        d2 += diff * diff;
    }
    tu_assert_within(ip, exp(-0.5 * d2), 5.0 * sqrt(2.0 / (double)D), "points vs rbf");
    free(W);
    free(b);
    free(psi);
}

/* ---- the median of squared distances ---- */

static void test_median_sq_dist(void **state)
{
    (void)state;
    /* 1-D points 0, 1, 3: squared distances 1, 9, 4 -> median 4 */
    double A[3] = {0.0, 1.0, 3.0};
    gp_error err;
    tu_assert_close(gp_embed_median_sq_dist(A, 1, 3, NULL, 0, &err), 4.0, 0, 0, "odd count");
    /* 0, 1, 3, 6: 1, 9, 36, 4, 25, 9 -> sorted 1 4 9 9 25 36 -> (9 + 9) / 2 */
    double B[4] = {0.0, 1.0, 3.0, 6.0};
    tu_assert_close(gp_embed_median_sq_dist(B, 1, 4, NULL, 0, &err), 9.0, 0, 0, "even count");
    double C[5] = {5, 1, 4, 2, 3};
    tu_assert_close(gp_select_kth(C, 5, 0), 1.0, 0, 0, "smallest");
    tu_assert_close(gp_select_kth(C, 5, 4), 5.0, 0, 0, "largest");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_gaussian_inner_vs_monte_carlo),
        cmocka_unit_test(test_samples_kind_is_the_average),
        cmocka_unit_test(test_messages_moment_matched),
        cmocka_unit_test(test_inner_products_vs_expected_product_kernel),
        cmocka_unit_test(test_outer_and_point_kernels),
        cmocka_unit_test(test_median_sq_dist),
    };
    return cmocka_run_group_tests_name("embed", tests, NULL, NULL);
}
