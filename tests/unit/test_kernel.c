/* kernel: closed-form values, gradients against finite differences, Gram and
 * cross blocks, the gradient contraction. Parameters, names, the flat encoding
 * and validation are test_kernel_params.c's, spectral densities
 * test_kernel_spectral.c's. */
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
#include "core/kernel/kernel.h"
#include "core/kernel/kernel_block.h"
#include "core/kernel/kernel_codec.h"
#include "core/kernel/kernel_spectral.h"
#include "tests/unit/testutil.h"
#include "tests/unit/kernel_fixture.h"

/* ------------------------------------------------------------------------ */
/* closed-form values                                                         */

static double sq(double v)
{
    return v * v;
}

typedef struct hand_case {
    double x[DIM], z[DIM];
} hand_case;

static const hand_case hand[2] = {
    {{0.3, -1.2, 2.0}, {1.1, 0.4, 1.5}},
    {{-0.5, 0.25, 0.0}, {0.7, -0.9, 1.1}},
};

/* Values computed independently at 40 digits (mpmath) for the two cases. */
static const double hand_ref[8][2] = {
    {0.31934491125024828695, 0.13729217795641148121}, /* rbf ARD */
    {0.44902666042782472691, 0.11353171932812635411}, /* rbf, dims {0,2} */
    {0.37684771570290020978, 0.34425320520315912671}, /* matern12 */
    {0.12944901032337346117, 0.051388503463633602154}, /* matern32 ARD, dims {1,0} */
    {0.48043349235518071862, 0.40271528977114835145}, /* matern52 */
    {0.67664093870491342276, 0.42046213678257854447}, /* rq ARD */
    {1.0470902296832050115, 0.65873122818883131533},  /* periodic, dims {0,1} */
    {1.512, -0.135},                                  /* linear, dims {2,1} */
};

static void check_hand(gp_kernel *k, size_t which, double (*closed)(const double *, const double *))
{
    for (size_t c = 0; c < 2; c++) {
        const double *x = hand[c].x, *z = hand[c].z;
        double v = gp_kernel_eval(k, x, z, 0);
        check_close(v, closed(x, z), 1e-14, 0.0, k, "closed form", 0);
        check_close(v, hand_ref[which][c], 2e-15, 0.0, k, "reference value", 0);
        /* Symmetric in its arguments. */
        assert_true(gp_kernel_eval(k, z, x, 0) == v);
    }
}

static double rbf_ard_closed(const double *x, const double *z)
{
    double r2 = sq((x[0] - z[0]) / 0.6) + sq((x[1] - z[1]) / 1.3) + sq((x[2] - z[2]) / 2.2);
    return 1.7 * exp(-0.5 * r2);
}

static double rbf_iso_closed(const double *x, const double *z)
{
    double r2 = (sq(x[0] - z[0]) + sq(x[2] - z[2])) / sq(0.8);
    return 0.9 * exp(-0.5 * r2);
}

static double m12_closed(const double *x, const double *z)
{
    double r = sqrt(sq(x[0] - z[0]) + sq(x[1] - z[1]) + sq(x[2] - z[2])) / 1.5;
    return 1.3 * exp(-r);
}

static double m32_closed(const double *x, const double *z)
{
    double r = sqrt(sq((x[1] - z[1]) / 2.0) + sq((x[0] - z[0]) / 0.5));
    return 0.7 * (1.0 + sqrt(3.0) * r) * exp(-sqrt(3.0) * r);
}

static double m52_closed(const double *x, const double *z)
{
    double r = sqrt(sq(x[0] - z[0]) + sq(x[1] - z[1]) + sq(x[2] - z[2])) / 1.1;
    return 2.2 * (1.0 + sqrt(5.0) * r + 5.0 * r * r / 3.0) * exp(-sqrt(5.0) * r);
}

static double rq_closed(const double *x, const double *z)
{
    double r2 = sq((x[0] - z[0]) / 0.9) + sq((x[1] - z[1]) / 1.7) + sq((x[2] - z[2]) / 0.6);
    return 1.4 * pow(1.0 + r2 / (2.0 * 0.8), -0.8);
}

static double periodic_closed(const double *x, const double *z)
{
    double d = sqrt(sq(x[0] - z[0]) + sq(x[1] - z[1]));
    return 1.2 * exp(-2.0 * sq(sin(PI_ * d / 1.9)) / sq(0.7));
}

static double linear_closed(const double *x, const double *z)
{
    return 0.6 * (x[2] * z[2] + x[1] * z[1]);
}

static void test_hand_values(void **state)
{
    (void)state;
    static const size_t d02[] = {0, 2}, d10[] = {1, 0}, d01[] = {0, 1}, d21[] = {2, 1};
    gp_kernel *k;

    k = leaf(GP_KERNEL_RBF, 1, NULL, 0);
    set_leaf(k, 1.7, (const double[]){0.6, 1.3, 2.2}, 1.0, 1.0);
    check_hand(k, 0, rbf_ard_closed);
    gp_kernel_free(k);

    k = leaf(GP_KERNEL_RBF, 0, d02, 2);
    set_leaf(k, 0.9, (const double[]){0.8}, 1.0, 1.0);
    check_hand(k, 1, rbf_iso_closed);
    gp_kernel_free(k);

    k = leaf(GP_KERNEL_MATERN12, 0, NULL, 0);
    set_leaf(k, 1.3, (const double[]){1.5}, 1.0, 1.0);
    check_hand(k, 2, m12_closed);
    gp_kernel_free(k);

    k = leaf(GP_KERNEL_MATERN32, 1, d10, 2);
    set_leaf(k, 0.7, (const double[]){2.0, 0.5}, 1.0, 1.0);
    check_hand(k, 3, m32_closed);
    gp_kernel_free(k);

    k = leaf(GP_KERNEL_MATERN52, 0, NULL, 0);
    set_leaf(k, 2.2, (const double[]){1.1}, 1.0, 1.0);
    check_hand(k, 4, m52_closed);
    gp_kernel_free(k);

    k = leaf(GP_KERNEL_RQ, 1, NULL, 0);
    set_leaf(k, 1.4, (const double[]){0.9, 1.7, 0.6}, 0.8, 1.0);
    check_hand(k, 5, rq_closed);
    gp_kernel_free(k);

    /* ard is ignored by periodic: one lengthscale whatever is asked. */
    k = leaf(GP_KERNEL_PERIODIC, 1, d01, 2);
    assert_int_equal(k->n_lengthscale, 1);
    set_leaf(k, 1.2, (const double[]){0.7}, 1.0, 1.9);
    check_hand(k, 6, periodic_closed);
    gp_kernel_free(k);

    k = leaf(GP_KERNEL_LINEAR, 1, d21, 2);
    assert_int_equal(k->n_lengthscale, 0);
    set_leaf(k, 0.6, NULL, 1.0, 1.0);
    check_hand(k, 7, linear_closed);
    gp_kernel_free(k);

    /* white: nonzero only for the same point, never for equal points. */
    k = leaf(GP_KERNEL_WHITE, 0, NULL, 0);
    set_leaf(k, 0.5, NULL, 1.0, 1.0);
    const double *x = hand[0].x, *z = hand[0].z;
    assert_true(gp_kernel_eval(k, x, z, 0) == 0.0);
    assert_true(gp_kernel_eval(k, x, x, 0) == 0.0);
    assert_float_equal(gp_kernel_eval(k, x, x, 1), 0.5, 1e-15);
    assert_float_equal(gp_kernel_diag(k, z), 0.5, 1e-15);
    gp_kernel_free(k);
}

static void test_composite_values(void **state)
{
    (void)state;
    gp_kernel *a = leaf(GP_KERNEL_RBF, 1, NULL, 0), *b = leaf(GP_KERNEL_LINEAR, 0, NULL, 0);
    gp_kernel *c = leaf(GP_KERNEL_MATERN12, 0, NULL, 0);
    set_leaf(a, 1.7, (const double[]){0.6, 1.3, 2.2}, 1.0, 1.0);
    set_leaf(b, 0.6, NULL, 1.0, 1.0);
    set_leaf(c, 1.3, (const double[]){1.5}, 1.0, 1.0);
    gp_kernel *k = comp(GP_KERNEL_SUM, 2, comp(GP_KERNEL_PRODUCT, 2, a, b), c);
    const double *x = hand[0].x, *z = hand[0].z;
    double lin = 0.6 * (x[0] * z[0] + x[1] * z[1] + x[2] * z[2]);
    double want = rbf_ard_closed(x, z) * lin + m12_closed(x, z);
    assert_float_equal(gp_kernel_eval(k, x, z, 0), want, 1e-14 * fabs(want));
    gp_kernel_free(k);
}

/* ------------------------------------------------------------------------ */
/* gradients                                                                  */

/* What the finite differences of this file vary: a kernel's log-parameters,
 * with either one pair (x, z) or a weighted Gram sum over X held fixed. */
typedef struct kernel_fd {
    gp_kernel *k;
    const double *x, *z;
    int same;
    const double *X, *W;
    size_t n;
    double *K;
} kernel_fd;

static double eval_at(void *ctx, const double *th)
{
    kernel_fd *c = ctx;
    gp_kernel_set_params(c->k, th);
    return gp_kernel_eval(c->k, c->x, c->z, c->same);
}

static void param_name(void *ctx, size_t i, char *buf, size_t len)
{
    kernel_fd *c = ctx;
    char d[128], name[96];
    describe(c->k, d, sizeof d);
    gp_kernel_param_name(c->k, i, name, sizeof name);
    snprintf(buf, len, "%s [%s]", d, name);
}

static void check_eval_grad(gp_kernel *k, const double *x, const double *z, int same)
{
    size_t np = gp_kernel_n_params(k);
    double th[MAX_PARAMS], g[MAX_PARAMS];
    gp_kernel_get_params(k, th);
    double v = gp_kernel_eval_grad(k, x, z, same, g);
    check_close(v, gp_kernel_eval(k, x, z, same), 1e-15, 1e-300, k, "eval_grad value", 0);
    for (size_t p = 0; p < np; p++)
        assert_true(isfinite(g[p]));
    kernel_fd c = {.k = k, .x = x, .z = z, .same = same};
    tu_check_gradient(eval_at, &c, th, np, g,
                      (tu_fd_spec){.step = FD_STEP, .rtol = 1e-6, .atol = 1e-9 * (1.0 + fabs(v))},
                      param_name, "d k / d theta");
    gp_kernel_set_params(k, th);
}

static void test_eval_grad_fd(void **state)
{
    (void)state;
    gp_rng rng;
    gp_rng_seed(&rng, 11);
    gp_kernel *ks[MAX_KERNELS];
    size_t nk = make_kernels(ks, &rng);
    double x[DIM], z[DIM];
    /* Orthogonal points: linear factors are 0, so the product rule must not
     * divide by a term's value. */
    const double e0[DIM] = {1.0, 0.0, 0.0}, e1[DIM] = {0.0, 1.0, 0.0};
    /* Equal in dimensions 0 and 2 only: r = 0 for leaves that see {2, 0}. */
    const double p0[DIM] = {0.4, -0.3, 1.2}, p1[DIM] = {0.4, 0.9, 1.2};
    for (size_t i = 0; i < nk; i++) {
        for (int rep = 0; rep < 4; rep++) {
            random_points(&rng, x, 1);
            random_points(&rng, z, 1);
            check_eval_grad(ks[i], x, z, 0);
        }
        check_eval_grad(ks[i], x, x, 1); /* r = 0, white on */
        check_eval_grad(ks[i], x, x, 0); /* r = 0, white off */
        check_eval_grad(ks[i], e0, e1, 0);
        check_eval_grad(ks[i], p0, p1, 0);
    }
    free_kernels(ks, nk);
}

/* At r = 0 the Matern-1/2 lengthscale derivative is the limit 0, not NaN. */
static void test_matern12_grad_at_zero(void **state)
{
    (void)state;
    gp_kernel *k = leaf(GP_KERNEL_MATERN12, 1, NULL, 0);
    double g[4], x[DIM] = {0.1, 0.2, 0.3};
    double v = gp_kernel_eval_grad(k, x, x, 0, g);
    assert_float_equal(v, 1.0, 1e-15);
    assert_float_equal(g[0], 1.0, 1e-15);
    for (int i = 1; i < 4; i++)
        assert_true(g[i] == 0.0);
    gp_kernel_free(k);
}

/* sum_ab W_ab K_ab with the full symmetric W (n x n, leading dimension n). */
static double weighted_gram(const gp_kernel *k, const double *X, size_t n, const double *W,
                            double *K)
{
    gp_kernel_gram(k, X, n, K, n);
    double s = 0.0;
    for (size_t i = 0; i < n * n; i++)
        s += W[i] * K[i];
    return s;
}

static double weighted_gram_at(void *ctx, const double *th)
{
    kernel_fd *c = ctx;
    gp_kernel_set_params(c->k, th);
    return weighted_gram(c->k, c->X, c->n, c->W, c->K);
}

static void check_contract(gp_kernel *k, gp_rng *rng)
{
    enum { N = 7, LDW = N + 2 };
    double X[N * DIM], W[N * N], Wl[LDW * N], K[N * N], g[MAX_PARAMS], want[MAX_PARAMS];
    double gp[MAX_PARAMS], th[MAX_PARAMS];
    random_points(rng, X, N);
    /* Two equal points: r = 0 off the diagonal. */
    memcpy(X + 5 * DIM, X + 1 * DIM, DIM * sizeof *X);
    for (size_t j = 0; j < N; j++)
        for (size_t i = j; i < N; i++)
            W[i + j * N] = W[j + i * N] = gp_rng_normal(rng);
    /* Only the lower triangle may be read: the rest is NaN. */
    for (size_t j = 0; j < N; j++)
        for (size_t i = 0; i < LDW; i++)
            Wl[i + j * LDW] = i >= j && i < N ? W[i + j * N] : NAN;
    size_t np = gp_kernel_n_params(k);
    gp_kernel_gram_grad_contract(k, X, N, Wl, LDW, g);

    /* The definition, pair by pair over the full W. */
    memset(want, 0, sizeof want);
    for (size_t a = 0; a < N; a++)
        for (size_t b = 0; b < N; b++) {
            gp_kernel_eval_grad(k, X + a * DIM, X + b * DIM, a == b, gp);
            for (size_t p = 0; p < np; p++)
                want[p] += W[a + b * N] * gp[p];
        }
    gp_kernel_get_params(k, th);
    double scale = 0.0;
    for (size_t i = 0; i < N * N; i++)
        scale += fabs(W[i]);
    for (size_t p = 0; p < np; p++)
        check_close(g[p], want[p], 1e-12, 1e-13 * scale, k, "contract vs pairwise", p);
    kernel_fd c = {.k = k, .X = X, .W = W, .n = N, .K = K};
    tu_check_gradient(weighted_gram_at, &c, th, np, g,
                      (tu_fd_spec){.step = FD_STEP, .rtol = 1e-6, .atol = 1e-8 * scale}, param_name,
                      "contract vs finite difference");
    gp_kernel_set_params(k, th);
}

static void test_contract_fd(void **state)
{
    (void)state;
    gp_rng rng;
    gp_rng_seed(&rng, 12);
    gp_kernel *ks[MAX_KERNELS];
    size_t nk = make_kernels(ks, &rng);
    for (size_t i = 0; i < nk; i++)
        check_contract(ks[i], &rng);
    free_kernels(ks, nk);
}

static void test_contract_edge_sizes(void **state)
{
    (void)state;
    gp_kernel *k = leaf(GP_KERNEL_RBF, 1, NULL, 0);
    double g[4] = {7, 7, 7, 7}, x[DIM] = {1, 2, 3}, w = 2.5;
    gp_kernel_gram_grad_contract(k, x, 0, &w, 1, g);
    for (int i = 0; i < 4; i++)
        assert_true(g[i] == 0.0);
    /* One point: only the diagonal, k = s2, no lengthscale dependence. */
    gp_kernel_gram_grad_contract(k, x, 1, &w, 1, g);
    assert_float_equal(g[0], 2.5, 1e-15);
    for (int i = 1; i < 4; i++)
        assert_true(g[i] == 0.0);
    gp_kernel_free(k);
}

/* ------------------------------------------------------------------------ */
/* Gram and cross blocks                                                      */

static void check_blocks(const gp_kernel *k, gp_rng *rng)
{
    enum { N = 9, M = 5, LDK = N + 2 };
    const double sentinel = 12345.0;
    double X[N * DIM], Z[M * DIM], K[LDK * N], C[LDK * M];
    random_points(rng, X, N);
    random_points(rng, Z, M);
    memcpy(X + 6 * DIM, X + 2 * DIM, DIM * sizeof *X); /* equal points inside X */
    memcpy(Z, X + 3 * DIM, DIM * sizeof *Z);          /* and shared with Z */
    for (size_t i = 0; i < LDK * N; i++)
        K[i] = (i % LDK) < N ? NAN : sentinel;
    for (size_t i = 0; i < LDK * M; i++)
        C[i] = (i % LDK) < N ? NAN : sentinel;
    gp_kernel_gram(k, X, N, K, LDK);
    gp_kernel_cross(k, X, N, Z, M, C, LDK);
    for (size_t j = 0; j < N; j++)
        for (size_t i = 0; i < LDK; i++) {
            double v = K[i + j * LDK];
            if (i >= N) {
                assert_true(v == sentinel);
                continue;
            }
            assert_true(v == K[j + i * LDK]); /* exactly symmetric */
            check_close(v, gp_kernel_eval(k, X + i * DIM, X + j * DIM, i == j), 1e-15, 1e-300, k,
                        "gram vs eval", 0);
        }
    for (size_t j = 0; j < M; j++)
        for (size_t i = 0; i < LDK; i++) {
            double v = C[i + j * LDK];
            if (i >= N) {
                assert_true(v == sentinel);
                continue;
            }
            check_close(v, gp_kernel_eval(k, X + i * DIM, Z + j * DIM, 0), 1e-15, 1e-300, k,
                        "cross vs eval", 0);
        }
    for (size_t i = 0; i < N; i++) {
        double d = gp_kernel_diag(k, X + i * DIM);
        assert_true(d == gp_kernel_eval(k, X + i * DIM, X + i * DIM, 1));
        check_close(d, K[i + i * LDK], 1e-15, 1e-300, k, "diag vs gram", 0);
    }
}

static void test_gram_cross_diag(void **state)
{
    (void)state;
    gp_rng rng;
    gp_rng_seed(&rng, 13);
    gp_kernel *ks[MAX_KERNELS];
    size_t nk = make_kernels(ks, &rng);
    for (size_t i = 0; i < nk; i++)
        check_blocks(ks[i], &rng);
    free_kernels(ks, nk);
}

/* Blocks larger than the tiles the Gram mirror works in, and a contraction
 * over them against the pair-by-pair definition. */
static void test_large_blocks(void **state)
{
    (void)state;
    enum { N = 150, M = 70, LDK = N + 3 };
    gp_rng rng;
    gp_rng_seed(&rng, 16);
    gp_kernel *ks[2] = {leaf(GP_KERNEL_MATERN52, 1, dims20, 2),
                        comp(GP_KERNEL_SUM, 2, leaf(GP_KERNEL_RBF, 0, NULL, 0),
                             leaf(GP_KERNEL_WHITE, 0, NULL, 0))};
    double *X = malloc(N * DIM * sizeof *X), *K = malloc(LDK * N * sizeof *K);
    double *W = malloc(N * N * sizeof *W), *C = malloc(LDK * M * sizeof *C);
    random_points(&rng, X, N);
    for (size_t i = 0; i < N * N; i++)
        W[i] = gp_rng_normal(&rng);
    for (int t = 0; t < 2; t++) {
        randomize(ks[t], &rng);
        for (size_t i = 0; i < LDK * N; i++)
            K[i] = NAN;
        gp_kernel_gram(ks[t], X, N, K, LDK);
        gp_kernel_cross(ks[t], X, N, X + 10 * DIM, M, C, LDK);
        for (size_t j = 0; j < N; j++)
            for (size_t i = 0; i < N; i++) {
                double v = gp_kernel_eval(ks[t], X + i * DIM, X + j * DIM, i == j);
                check_close(K[i + j * LDK], v, 1e-15, 1e-300, ks[t], "large gram", 0);
                if (j < M)
                    check_close(C[i + j * LDK],
                                gp_kernel_eval(ks[t], X + i * DIM, X + (j + 10) * DIM, 0), 1e-15,
                                1e-300, ks[t], "large cross", 0);
            }
        double g[MAX_PARAMS], want[MAX_PARAMS] = {0}, gp[MAX_PARAMS], scale = 0.0;
        size_t np = gp_kernel_n_params(ks[t]);
        gp_kernel_gram_grad_contract(ks[t], X, N, W, N, g);
        for (size_t b = 0; b < N; b++)
            for (size_t a = 0; a < N; a++) {
                /* The lower triangle of W, mirrored: what the contraction reads. */
                double w = a >= b ? W[a + b * N] : W[b + a * N];
                gp_kernel_eval_grad(ks[t], X + a * DIM, X + b * DIM, a == b, gp);
                for (size_t p = 0; p < np; p++)
                    want[p] += w * gp[p];
                scale += fabs(w);
            }
        for (size_t p = 0; p < np; p++)
            check_close(g[p], want[p], 1e-11, 1e-13 * scale, ks[t], "large contract", p);
        gp_kernel_free(ks[t]);
    }
    free(X);
    free(K);
    free(W);
    free(C);
}

static void test_white_blocks(void **state)
{
    (void)state;
    gp_kernel *k = leaf(GP_KERNEL_WHITE, 0, NULL, 0);
    k->log_variance = log(0.3);
    double X[4 * DIM] = {1, 2, 3, 1, 2, 3, 0, 0, 0, 4, 5, 6}; /* X_0 == X_1 */
    double K[16], C[8];
    gp_kernel_gram(k, X, 4, K, 4);
    for (size_t j = 0; j < 4; j++)
        for (size_t i = 0; i < 4; i++)
            if (i == j)
                assert_float_equal(K[i + j * 4], 0.3, 1e-15);
            else
                assert_true(K[i + j * 4] == 0.0);
    gp_kernel_cross(k, X, 4, X, 2, C, 4); /* the same points as a test set: never `same` */
    for (size_t i = 0; i < 8; i++)
        assert_true(C[i] == 0.0);
    gp_kernel_free(k);
}

/* r^2 is a sum of squared differences, not |x|^2 + |z|^2 - 2 x^T z: two points
 * 1e-7 apart at coordinates ~100 keep their distance. */
static void test_close_points_accuracy(void **state)
{
    (void)state;
    gp_kernel *k = leaf(GP_KERNEL_MATERN12, 0, NULL, 0);
    double X[2 * DIM] = {100.0, -200.0, 300.0, 100.0 + 1e-7, -200.0, 300.0 - 2e-7};
    double r = sqrt(sq(X[3] - X[0]) + sq(X[5] - X[2]));
    double want = exp(-r), K[4], C;
    gp_kernel_gram(k, X, 2, K, 2);
    gp_kernel_cross(k, X, 1, X + DIM, 1, &C, 1);
    assert_float_equal(1.0 - K[1], -expm1(-r), 1e-6 * r);
    assert_float_equal(1.0 - C, -expm1(-r), 1e-6 * r);
    assert_float_equal(gp_kernel_eval(k, X, X + DIM, 0), want, 1e-15);
    gp_kernel_free(k);
}

static void test_empty_blocks(void **state)
{
    (void)state;
    gp_kernel *k = leaf(GP_KERNEL_RBF, 0, NULL, 0);
    double X[DIM] = {0, 0, 0}, K[1] = {42.0};
    gp_kernel_gram(k, X, 0, K, 1);
    gp_kernel_cross(k, X, 1, X, 0, K, 1);
    gp_kernel_cross(k, X, 0, X, 1, K, 1);
    assert_true(K[0] == 42.0);
    gp_kernel_gram(k, X, 1, K, 1);
    assert_float_equal(K[0], 1.0, 1e-15);
    gp_kernel_free(k);
}

/* The vector blocks (core/kernel/kernel_block.c) give each pair the single
 * pair's bits: Gram and cross entries of every block type, ARD and not,
 * over columns longer than a block and with a tail, equal gp_kernel_eval
 * exactly; the blocks' gradient factor equals leaf_terms's c[0]. Points up to
 * 40 apart put some pairs beyond exp's fast range (argument below -708). */
static void test_block_bits(void **state)
{
    (void)state;
    enum { N = 150, M = 67 };
    gp_rng rng;
    gp_rng_seed(&rng, 21);
    double *X = malloc(N * DIM * sizeof *X), *K = malloc(N * N * sizeof *K);
    double *C = malloc(N * M * sizeof *C);
    assert_non_null(X);
    assert_non_null(K);
    assert_non_null(C);
    for (size_t i = 0; i < N * DIM; i++)
        X[i] = 40.0 * gp_rng_uniform(&rng) - 20.0;
    const gp_kernel_type types[4] = {GP_KERNEL_RBF, GP_KERNEL_MATERN12, GP_KERNEL_MATERN32,
                                      GP_KERNEL_MATERN52};
    for (int t = 0; t < 4; t++)
        for (int ard = 0; ard <= 1; ard++) {
            gp_kernel *k = leaf(types[t], ard, NULL, 0);
            randomize(k, &rng);
            gp_kernel_gram(k, X, N, K, N);
            gp_kernel_cross(k, X, N, X + 20 * DIM, M, C, N);
            for (size_t j = 0; j < N; j++)
                for (size_t i = j; i < N; i++) {
                    double v = gp_kernel_eval(k, X + i * DIM, X + j * DIM, i == j);
                    assert_memory_equal(&K[i + j * N], &v, sizeof v);
                    if (j < M) {
                        double c = gp_kernel_eval(k, X + i * DIM, X + (j + 20) * DIM, 0);
                        assert_memory_equal(&C[i + j * N], &c, sizeof c);
                    }
                }
            gp_kernel_free(k);
            /* The factors themselves, on q from 0 to beyond the fast range. */
            leaf_par p = {types[t], 1.7, 1.0, 1.0, 1.0};
            double q[GP_KERNEL_BLOCK], v[GP_KERNEL_BLOCK], c0[GP_KERNEL_BLOCK], w[GP_KERNEL_BLOCK];
            for (size_t i = 0; i < GP_KERNEL_BLOCK; i++)
                q[i] = i == 0 ? 0.0 : exp(0.25 * (double)i - 6.0);
            gp_kernel_block_terms(&p, q, GP_KERNEL_BLOCK, v, c0, w);
            for (size_t i = 0; i < GP_KERNEL_BLOCK; i++) {
                double c[2] = {0.0, 0.0};
                double want = leaf_terms(&p, q[i], 0, c);
                assert_memory_equal(&v[i], &want, sizeof want);
                assert_memory_equal(&c0[i], &c[0], sizeof c[0]);
            }
        }
    free(X);
    free(K);
    free(C);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_block_bits),
        cmocka_unit_test(test_hand_values),
        cmocka_unit_test(test_composite_values),
        cmocka_unit_test(test_eval_grad_fd),
        cmocka_unit_test(test_matern12_grad_at_zero),
        cmocka_unit_test(test_contract_fd),
        cmocka_unit_test(test_contract_edge_sizes),
        cmocka_unit_test(test_gram_cross_diag),
        cmocka_unit_test(test_large_blocks),
        cmocka_unit_test(test_white_blocks),
        cmocka_unit_test(test_close_points_accuracy),
        cmocka_unit_test(test_empty_blocks),
    };
    return cmocka_run_group_tests_name("kernel", tests, NULL, NULL);
}
