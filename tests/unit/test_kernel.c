/* kernel: closed-form values, gradients against finite differences, Gram and
 * cross blocks, the gradient contraction, parameters and names, the flat
 * encoding and its validation, constructor validation, spectral densities and
 * their samplers. */
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
#include "core/kernel/kernel_codec.h"
#include "core/kernel/kernel_spectral.h"
#include "tests/unit/testutil.h"

#define DIM 3
#define MAX_KERNELS 48
#define MAX_PARAMS 64
#define FD_STEP 1e-6
#define PI_ 3.14159265358979323846

/* ------------------------------------------------------------------------ */
/* helpers                                                                    */

static gp_kernel *leaf(gp_kernel_type type, int ard, const size_t *dims, size_t n_dims)
{
    gp_kernel *k = NULL;
    gp_error err;
    gp_error_clear(&err);
    assert_int_equal(gp_kernel_leaf(&k, type, DIM, ard, dims, n_dims, &err), GP_OK);
    assert_non_null(k);
    return k;
}

static gp_kernel *comp(gp_kernel_type type, size_t n, ...)
{
    gp_kernel *terms[8];
    va_list ap;
    va_start(ap, n);
    for (size_t t = 0; t < n; t++)
        terms[t] = va_arg(ap, gp_kernel *);
    va_end(ap);
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_composite(&k, type, terms, n, &err), GP_OK);
    return k;
}

/* Hyperparameters of a leaf in natural units (ls: n_lengthscale entries). */
static void set_leaf(gp_kernel *k, double s2, const double *ls, double alpha, double period)
{
    k->log_variance = log(s2);
    for (size_t i = 0; i < k->n_lengthscale; i++)
        k->log_lengthscale[i] = log(ls[i]);
    k->log_alpha = log(alpha);
    k->log_period = log(period);
}

static void randomize(gp_kernel *k, gp_rng *rng)
{
    size_t np = gp_kernel_n_params(k);
    double th[MAX_PARAMS];
    assert_true(np <= MAX_PARAMS);
    for (size_t i = 0; i < np; i++)
        th[i] = -0.8 + 1.6 * gp_rng_uniform(rng);
    gp_kernel_set_params(k, th);
}

static void random_points(gp_rng *rng, double *X, size_t n)
{
    for (size_t i = 0; i < n * DIM; i++)
        X[i] = gp_rng_normal(rng);
}

static const size_t dims20[] = {2, 0};
static const size_t dims1[] = {1};

/* Every leaf type with and without ARD and active_dims, and nested composites,
 * all with random hyperparameters. */
static size_t make_kernels(gp_kernel **ks, gp_rng *rng)
{
    size_t n = 0;
    for (int t = 0; t < GP_KERNEL_SUM; t++) {
        ks[n++] = leaf((gp_kernel_type)t, 0, NULL, 0);
        ks[n++] = leaf((gp_kernel_type)t, 1, NULL, 0);
        ks[n++] = leaf((gp_kernel_type)t, 1, dims20, 2);
        ks[n++] = leaf((gp_kernel_type)t, 0, dims1, 1);
    }
    ks[n++] = comp(GP_KERNEL_PRODUCT, 2,
                   comp(GP_KERNEL_SUM, 2, leaf(GP_KERNEL_RBF, 1, NULL, 0),
                        leaf(GP_KERNEL_PERIODIC, 0, dims20, 2)),
                   leaf(GP_KERNEL_MATERN32, 1, dims20, 2));
    ks[n++] = comp(GP_KERNEL_SUM, 3,
                   comp(GP_KERNEL_PRODUCT, 2, leaf(GP_KERNEL_RQ, 1, NULL, 0),
                        leaf(GP_KERNEL_LINEAR, 0, dims1, 1)),
                   leaf(GP_KERNEL_WHITE, 0, NULL, 0), leaf(GP_KERNEL_MATERN12, 0, NULL, 0));
    ks[n++] = comp(GP_KERNEL_PRODUCT, 3,
                   comp(GP_KERNEL_SUM, 2,
                        comp(GP_KERNEL_PRODUCT, 2, leaf(GP_KERNEL_MATERN52, 1, dims20, 2),
                             leaf(GP_KERNEL_RBF, 0, dims1, 1)),
                        leaf(GP_KERNEL_LINEAR, 0, NULL, 0)),
                   leaf(GP_KERNEL_RQ, 0, NULL, 0), leaf(GP_KERNEL_PERIODIC, 0, NULL, 0));
    ks[n++] = comp(GP_KERNEL_SUM, 1, leaf(GP_KERNEL_RBF, 1, NULL, 0));
    assert_true(n <= MAX_KERNELS);
    for (size_t i = 0; i < n; i++)
        randomize(ks[i], rng);
    return n;
}

static void free_kernels(gp_kernel **ks, size_t n)
{
    for (size_t i = 0; i < n; i++)
        gp_kernel_free(ks[i]);
}

static void describe(const gp_kernel *k, char *buf, size_t len)
{
    snprintf(buf, len, "%s ard=%d n_active=%zu%s", gp_kernel_type_name(k->type), k->ard,
             k->n_active, k->active_dims ? " (active_dims)" : "");
}

/* |a - b| <= rel * max(|a|, |b|) + abs, reported with context when not. */
static void check_close(double a, double b, double rel, double abs_tol, const gp_kernel *k,
                        const char *what, size_t p)
{
    double tol = rel * fmax(fabs(a), fabs(b)) + abs_tol;
    if (fabs(a - b) <= tol)
        return;
    char d[128], name[96];
    describe(k, d, sizeof d);
    gp_kernel_param_name(k, p, name, sizeof name);
    tu_assert_within(a, b, tol, "%s [%s] %s", d, name, what);
}

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

/* ------------------------------------------------------------------------ */
/* parameters                                                                 */

/* product(sum(rbf ARD, periodic), matern32): 4 + 3 + 2 parameters. */
static gp_kernel *nested_kernel(void)
{
    return comp(GP_KERNEL_PRODUCT, 2,
                comp(GP_KERNEL_SUM, 2, leaf(GP_KERNEL_RBF, 1, NULL, 0),
                     leaf(GP_KERNEL_PERIODIC, 1, NULL, 0)),
                leaf(GP_KERNEL_MATERN32, 0, NULL, 0));
}

static void test_params_roundtrip(void **state)
{
    (void)state;
    gp_kernel *k = nested_kernel();
    assert_int_equal(gp_kernel_n_params(k), 9);
    double th[9], back[9];
    gp_kernel_get_params(k, th);
    for (int i = 0; i < 9; i++)
        assert_true(th[i] == 0.0); /* every hyperparameter starts at 1 */
    for (int i = 0; i < 9; i++)
        th[i] = 0.1 * (i + 1) - 0.45;
    gp_kernel_set_params(k, th);
    gp_kernel_get_params(k, back);
    assert_memory_equal(th, back, sizeof th);
    /* The order: leaves depth first, each variance, lengthscales, alpha/period. */
    const gp_kernel *rbf = k->terms[0]->terms[0], *per = k->terms[0]->terms[1];
    const gp_kernel *m32 = k->terms[1];
    assert_true(rbf->log_variance == th[0] && rbf->log_lengthscale[2] == th[3]);
    assert_true(per->log_variance == th[4] && per->log_lengthscale[0] == th[5]);
    assert_true(per->log_period == th[6]);
    assert_true(m32->log_variance == th[7] && m32->log_lengthscale[0] == th[8]);

    gp_kernel *r = leaf(GP_KERNEL_RQ, 1, dims20, 2);
    double tr[4] = {0.1, 0.2, 0.3, 0.4};
    gp_kernel_set_params(r, tr);
    assert_true(r->log_alpha == 0.4 && r->log_lengthscale[1] == 0.3);
    gp_kernel_free(r);
    gp_kernel_free(k);
}

static void test_free_mask(void **state)
{
    (void)state;
    gp_kernel *k = nested_kernel();
    unsigned char m[9];
    gp_kernel_free_mask(k, m);
    for (int i = 0; i < 9; i++)
        assert_int_equal(m[i], 1);
    k->terms[0]->terms[0]->fixed = GP_FIX_LENGTHSCALE;
    k->terms[0]->terms[1]->fixed = GP_FIX_PERIOD | GP_FIX_VARIANCE;
    k->terms[1]->fixed = GP_FIX_ALL;
    gp_kernel_free_mask(k, m);
    const unsigned char want[9] = {1, 0, 0, 0, 0, 1, 0, 0, 0};
    assert_memory_equal(m, want, sizeof want);
    gp_kernel *r = leaf(GP_KERNEL_RQ, 0, NULL, 0);
    r->fixed = GP_FIX_ALPHA;
    unsigned char mr[3];
    gp_kernel_free_mask(r, mr);
    assert_true(mr[0] == 1 && mr[1] == 1 && mr[2] == 0);
    gp_kernel_free(r);
    gp_kernel_free(k);
}

static void test_param_names(void **state)
{
    (void)state;
    gp_kernel *k = nested_kernel();
    const char *want[9] = {
        "terms[0].terms[0].variance",       "terms[0].terms[0].lengthscale[0]",
        "terms[0].terms[0].lengthscale[1]", "terms[0].terms[0].lengthscale[2]",
        "terms[0].terms[1].variance",       "terms[0].terms[1].lengthscale",
        "terms[0].terms[1].period",         "terms[1].variance",
        "terms[1].lengthscale",
    };
    char buf[64];
    for (size_t i = 0; i < 9; i++) {
        gp_kernel_param_name(k, i, buf, sizeof buf);
        assert_string_equal(buf, want[i]);
    }
    gp_kernel_param_name(k, 9, buf, sizeof buf);
    assert_string_equal(buf, "");
    gp_kernel_param_name(k, 0, buf, 8); /* truncated, still terminated */
    assert_string_equal(buf, "terms[0");
    gp_kernel_param_name(k, 0, buf, 1);
    assert_string_equal(buf, "");
    gp_kernel_free(k);

    gp_kernel *r = leaf(GP_KERNEL_RQ, 0, NULL, 0);
    const char *rq_names[3] = {"variance", "lengthscale", "alpha"};
    for (size_t i = 0; i < 3; i++) {
        gp_kernel_param_name(r, i, buf, sizeof buf);
        assert_string_equal(buf, rq_names[i]);
    }
    gp_kernel_free(r);
    r = leaf(GP_KERNEL_WHITE, 1, NULL, 0);
    gp_kernel_param_name(r, 0, buf, sizeof buf);
    assert_string_equal(buf, "variance");
    gp_kernel_param_name(r, 1, buf, sizeof buf);
    assert_string_equal(buf, "");
    gp_kernel_free(r);
}

static void assert_same_kernel(const gp_kernel *a, const gp_kernel *b)
{
    assert_int_equal(a->type, b->type);
    assert_int_equal(a->input_dim, b->input_dim);
    assert_int_equal(a->n_active, b->n_active);
    assert_int_equal(a->active_dims == NULL, b->active_dims == NULL);
    if (a->active_dims)
        assert_memory_equal(a->active_dims, b->active_dims, a->n_active * sizeof(size_t));
    assert_int_equal(a->ard, b->ard);
    assert_int_equal(a->fixed, b->fixed);
    /* Bitwise, so -0.0 and NaN payloads would count too. */
    assert_memory_equal(&a->log_variance, &b->log_variance, sizeof(double));
    assert_memory_equal(&a->log_alpha, &b->log_alpha, sizeof(double));
    assert_memory_equal(&a->log_period, &b->log_period, sizeof(double));
    assert_int_equal(a->n_lengthscale, b->n_lengthscale);
    if (a->n_lengthscale)
        assert_memory_equal(a->log_lengthscale, b->log_lengthscale,
                            a->n_lengthscale * sizeof(double));
    assert_int_equal(a->n_terms, b->n_terms);
    for (size_t t = 0; t < a->n_terms; t++) {
        assert_true(a->terms[t] != b->terms[t]);
        assert_same_kernel(a->terms[t], b->terms[t]);
    }
}

static void test_copy(void **state)
{
    (void)state;
    gp_rng rng;
    gp_rng_seed(&rng, 14);
    gp_kernel *ks[MAX_KERNELS];
    size_t nk = make_kernels(ks, &rng);
    gp_error err;
    for (size_t i = 0; i < nk; i++) {
        gp_kernel *c = NULL;
        assert_int_equal(gp_kernel_copy(&c, ks[i], &err), GP_OK);
        assert_same_kernel(ks[i], c);
        /* Independent storage: changing the copy leaves the original alone. */
        double th[MAX_PARAMS], before[MAX_PARAMS];
        size_t np = gp_kernel_n_params(c);
        gp_kernel_get_params(ks[i], before);
        for (size_t p = 0; p < np; p++)
            th[p] = 3.0;
        gp_kernel_set_params(c, th);
        gp_kernel_get_params(ks[i], th);
        assert_memory_equal(th, before, np * sizeof *th);
        gp_kernel_free(c);
    }
    free_kernels(ks, nk);
}

/* ------------------------------------------------------------------------ */
/* encoding                                                                   */

static void roundtrip(const gp_kernel *k)
{
    size_t len = gp_kernel_encode(k, NULL);
    double *code = malloc(len * sizeof *code), *again = malloc(len * sizeof *again);
    assert_int_equal(gp_kernel_encode(k, code), len);
    gp_kernel *d = NULL;
    gp_error err;
    gp_error_clear(&err);
    assert_int_equal(gp_kernel_decode(code, len, &d, &err), GP_OK);
    assert_same_kernel(k, d);
    assert_int_equal(gp_kernel_encode(d, again), len);
    assert_memory_equal(code, again, len * sizeof *code);
    gp_kernel_free(d);
    free(code);
    free(again);
}

static void test_encode_roundtrip(void **state)
{
    (void)state;
    gp_rng rng;
    gp_rng_seed(&rng, 15);
    gp_kernel *ks[MAX_KERNELS];
    size_t nk = make_kernels(ks, &rng);
    for (size_t i = 0; i < nk; i++) {
        ks[i]->fixed = (unsigned)(i % 16);
        roundtrip(ks[i]);
    }
    /* Awkward values and fields the parameter vector does not cover. */
    gp_kernel *k = ks[nk - 2];
    k->log_variance = -0.0;
    k->log_alpha = 5e-324;
    k->log_period = -700.25;
    k->terms[0]->terms[0]->log_variance = 0.1 + 0.2;
    roundtrip(k);
    free_kernels(ks, nk);
}

/* sum(rbf ARD on dims {2, 0}, matern32), whose layout the corruption tests use:
 *   [0] magic [1] version [2] total length = 38
 *   root @3:  type 8, input_dim @4, n_active 0 @5, ard @6, fixed @7, log var/alpha/period @8-10,
 *             n_lengthscale 0 @11, n_terms 2 @12
 *   rbf @13:  type 0, input_dim @14, n_active 2 @15, dims @16 @17, ard 1 @18, fixed @19,
 *             log var/alpha/period @20-22, n_lengthscale 2 @23, @24 @25, n_terms 0 @26
 *   m32 @27:  type 2, input_dim @28, n_active 0 @29, ard 0 @30, fixed @31, @32-34,
 *             n_lengthscale 1 @35, @36, n_terms 0 @37 */
#define CODE_LEN 38

static void small_code(double *code)
{
    gp_kernel *k = comp(GP_KERNEL_SUM, 2, leaf(GP_KERNEL_RBF, 1, dims20, 2),
                        leaf(GP_KERNEL_MATERN32, 0, NULL, 0));
    k->terms[0]->log_lengthscale[1] = 0.25;
    k->terms[1]->log_lengthscale[0] = -0.5;
    assert_int_equal(gp_kernel_encode(k, NULL), CODE_LEN);
    assert_int_equal(gp_kernel_encode(k, code), CODE_LEN);
    assert_true(code[2] == CODE_LEN && code[3] == GP_KERNEL_SUM && code[13] == GP_KERNEL_RBF);
    assert_true(code[25] == 0.25 && code[27] == GP_KERNEL_MATERN32 && code[36] == -0.5);
    gp_kernel_free(k);
}

static int try_decode(const double *code, size_t len)
{
    gp_kernel *k = (gp_kernel *)code; /* anything non-NULL: decode must reset it */
    gp_error err;
    gp_error_clear(&err);
    int rc = gp_kernel_decode(code, len, &k, &err);
    if (rc == GP_OK) {
        assert_non_null(k);
        gp_kernel_free(k);
    } else {
        assert_null(k);
        assert_int_equal(err.code, rc);
        assert_true(strlen(err.message) > 0);
    }
    return rc;
}

static void expect_corrupt_at(size_t pos, double value)
{
    double code[CODE_LEN];
    small_code(code);
    code[pos] = value;
    if (try_decode(code, CODE_LEN) != GP_EDATA) {
        print_error("code[%zu] = %g was accepted\n", pos, value);
        fail();
    }
}

static void test_decode_rejects(void **state)
{
    (void)state;
    double code[CODE_LEN + 2];
    small_code(code);
    assert_int_equal(try_decode(code, CODE_LEN), GP_OK);
    /* Every truncation, with the declared length kept or shortened to match. */
    for (size_t len = 0; len < CODE_LEN; len++) {
        assert_int_equal(try_decode(len ? code : NULL, len), GP_EDATA);
        double cut[CODE_LEN];
        memcpy(cut, code, sizeof cut);
        cut[2] = (double)len;
        if (len >= 3)
            assert_int_equal(try_decode(cut, len), GP_EDATA);
    }
    /* A longer array is fine (the code knows its length); a longer declared
     * length with values past the tree is not. */
    code[CODE_LEN] = code[CODE_LEN + 1] = 0.0;
    assert_int_equal(try_decode(code, CODE_LEN + 2), GP_OK);
    code[2] = CODE_LEN + 2;
    assert_int_equal(try_decode(code, CODE_LEN + 2), GP_EDATA);

    const struct {
        size_t pos;
        double value;
    } bad[] = {
        {0, 0.0},       {1, 2.0},        {2, NAN},       {2, 1e300},     {2, 37.5},
        {3, 10.0},      {3, -1.0},       {3, 8.5},       {3, NAN},       {3, 0.0},
        {4, 4.0},       {4, 0.0},        {5, 1.0},       {6, 1.0},       {7, 16.0},
        {7, -1.0},      {11, 1.0},       {12, 0.0},      {12, 3.0},      {12, 1e300},
        {14, 0.0},      {14, 1e12},      {15, 1e9},      {15, 3.0},      {16, 3.0},
        {16, 1.5},      {17, 2.0},       {18, 0.0},      {18, 2.0},      {19, 0.5},
        {20, NAN},      {21, INFINITY},  {22, -INFINITY}, {23, 3.0},     {23, 1.0},
        {24, NAN},      {26, 1.0},       {28, 4.0},      {30, 1.0},      {35, 2.0},
        {36, INFINITY}, {37, 1.0},       {13, 8.0},      {27, 9.0},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        expect_corrupt_at(bad[i].pos, bad[i].value);
}

/* Whatever one value is replaced with, decoding fails cleanly or succeeds. */
static void test_decode_fuzz(void **state)
{
    (void)state;
    const double values[] = {NAN, -1.0, 0.0, 1.0, 2.0, 3.0, 7.0, 8.0, 9.0, 10.0, 0.5, 1e18, -0.0,
                             INFINITY, 38.0, 100.0};
    double code[CODE_LEN];
    for (size_t pos = 0; pos < CODE_LEN; pos++)
        for (size_t v = 0; v < sizeof values / sizeof values[0] + 1; v++) {
            small_code(code);
            code[pos] = v < sizeof values / sizeof values[0] ? values[v] : code[pos] + 1.0;
            int rc = try_decode(code, CODE_LEN);
            assert_true(rc == GP_OK || rc == GP_EDATA);
        }
}

/* Depth: a code nesting 40 one-term sums is refused (no stack exhaustion), and
 * so is building such a tree. */
static void test_depth_limit(void **state)
{
    (void)state;
    enum { DEPTH = 40 };
    double code[3 + DEPTH * 10 + 10];
    size_t n = 3;
    for (int d = 0; d < DEPTH; d++) {
        const double node[10] = {GP_KERNEL_SUM, 1, 0, 0, 0, 0, 0, 0, 0, 1};
        memcpy(code + n, node, sizeof node);
        n += 10;
    }
    const double white[10] = {GP_KERNEL_WHITE, 1, 0, 0, 0, 0, 0, 0, 0, 0};
    memcpy(code + n, white, sizeof white);
    n += 10;
    code[0] = 1196444494.0;
    code[1] = 1.0;
    code[2] = (double)n;
    assert_int_equal(try_decode(code, n), GP_EDATA);
    /* Shallow enough: the same shape with 3 sums decodes. */
    double small[3 + 40];
    memcpy(small + 3, code + 3, 30 * sizeof *code);
    memcpy(small + 33, white, sizeof white);
    small[0] = code[0];
    small[1] = code[1];
    small[2] = 43;
    assert_int_equal(try_decode(small, 43), GP_OK);

    gp_kernel *k = NULL, *t;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_WHITE, 1, 0, NULL, 0, &err), GP_OK);
    int rc = GP_OK;
    for (int d = 0; d < DEPTH && rc == GP_OK; d++) {
        rc = gp_kernel_composite(&t, GP_KERNEL_SUM, &k, 1, &err);
        if (rc == GP_OK)
            k = t;
    }
    assert_int_equal(rc, GP_EINVAL);
    assert_string_equal(err.field, "terms");
    gp_kernel_free(k);
}

/* ------------------------------------------------------------------------ */
/* validation                                                                 */

static void test_type_names(void **state)
{
    (void)state;
    for (int t = 0; t < GP_KERNEL_TYPE_COUNT; t++)
        assert_int_equal(gp_kernel_type_from_name(gp_kernel_type_name((gp_kernel_type)t)), t);
    assert_string_equal(gp_kernel_type_name(GP_KERNEL_MATERN52), "matern52");
    assert_int_equal(gp_kernel_type_from_name("product"), GP_KERNEL_PRODUCT);
    assert_int_equal(gp_kernel_type_from_name("gaussian"), -1);
    assert_int_equal(gp_kernel_type_from_name(NULL), -1);
    assert_null(gp_kernel_type_name(GP_KERNEL_TYPE_COUNT));
}

static void expect_leaf_error(gp_kernel_type type, size_t input_dim, const size_t *dims, size_t n,
                              const char *field)
{
    gp_kernel *k = (gp_kernel *)&k;
    gp_error err;
    gp_error_clear(&err);
    assert_int_equal(gp_kernel_leaf(&k, type, input_dim, 1, dims, n, &err), GP_EINVAL);
    assert_null(k);
    assert_int_equal(err.code, GP_EINVAL);
    assert_string_equal(err.field, field);
    assert_true(strlen(err.message) > 0);
}

static void test_leaf_validation(void **state)
{
    (void)state;
    const size_t ok[] = {2, 0}, out_of_range[] = {0, 3}, repeated[] = {1, 0, 1};
    expect_leaf_error(GP_KERNEL_SUM, 3, NULL, 0, "type");
    expect_leaf_error(GP_KERNEL_PRODUCT, 3, NULL, 0, "type");
    expect_leaf_error(GP_KERNEL_TYPE_COUNT, 3, NULL, 0, "type");
    expect_leaf_error(GP_KERNEL_RBF, 0, NULL, 0, "input_dim");
    expect_leaf_error(GP_KERNEL_RBF, 3, out_of_range, 2, "active_dims");
    expect_leaf_error(GP_KERNEL_RBF, 3, repeated, 3, "active_dims");
    expect_leaf_error(GP_KERNEL_RBF, 3, NULL, 2, "active_dims");
    expect_leaf_error(GP_KERNEL_RBF, 1, ok, 2, "active_dims");

    gp_kernel *k;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, 3, 1, ok, 2, &err), GP_OK);
    assert_int_equal(k->n_active, 2);
    assert_int_equal(k->n_lengthscale, 2);
    assert_true(k->active_dims != ok && k->active_dims[0] == 2 && k->active_dims[1] == 0);
    gp_kernel_free(k);
    const struct {
        gp_kernel_type type;
        int ard;
        size_t n_ls;
    } shapes[] = {
        {GP_KERNEL_RBF, 0, 1},      {GP_KERNEL_MATERN12, 1, 3}, {GP_KERNEL_MATERN32, 1, 3},
        {GP_KERNEL_MATERN52, 0, 1}, {GP_KERNEL_RQ, 1, 3},       {GP_KERNEL_PERIODIC, 1, 1},
        {GP_KERNEL_LINEAR, 1, 0},   {GP_KERNEL_WHITE, 1, 0},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++) {
        assert_int_equal(gp_kernel_leaf(&k, shapes[i].type, 3, shapes[i].ard, NULL, 0, &err),
                         GP_OK);
        assert_int_equal(k->n_lengthscale, shapes[i].n_ls);
        assert_int_equal(k->n_active, 3);
        assert_null(k->active_dims);
        assert_int_equal(gp_kernel_n_params(k), 1 + shapes[i].n_ls +
                                                    (shapes[i].type == GP_KERNEL_RQ) +
                                                    (shapes[i].type == GP_KERNEL_PERIODIC));
        assert_true(k->log_variance == 0.0 && k->log_alpha == 0.0 && k->log_period == 0.0);
        gp_kernel_free(k);
    }
}

static void expect_composite_error(gp_kernel_type type, gp_kernel **terms, size_t n,
                                   const char *field)
{
    gp_kernel *k = (gp_kernel *)&k;
    gp_error err;
    gp_error_clear(&err);
    assert_int_equal(gp_kernel_composite(&k, type, terms, n, &err), GP_EINVAL);
    assert_null(k);
    assert_string_equal(err.field, field);
    assert_true(strlen(err.message) > 0);
}

static void test_composite_validation(void **state)
{
    (void)state;
    gp_kernel *a = leaf(GP_KERNEL_RBF, 0, NULL, 0), *b = leaf(GP_KERNEL_LINEAR, 0, NULL, 0);
    gp_kernel *other = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&other, GP_KERNEL_RBF, 2, 0, NULL, 0, &err), GP_OK);
    gp_kernel *terms[3] = {a, b, other};
    expect_composite_error(GP_KERNEL_RBF, terms, 2, "type");
    expect_composite_error(GP_KERNEL_SUM, terms, 0, "terms");
    expect_composite_error(GP_KERNEL_SUM, NULL, 2, "terms");
    expect_composite_error(GP_KERNEL_PRODUCT, terms, 3, "terms");
    gp_kernel *dup[2] = {a, a}, *hole[2] = {a, NULL};
    expect_composite_error(GP_KERNEL_SUM, dup, 2, "terms");
    expect_composite_error(GP_KERNEL_SUM, hole, 2, "terms");
    /* The failures left the terms with the caller; a success takes them. */
    gp_kernel *k = NULL;
    assert_int_equal(gp_kernel_composite(&k, GP_KERNEL_PRODUCT, terms, 2, &err), GP_OK);
    terms[0] = terms[1] = NULL; /* the composite's own array is a copy */
    assert_int_equal(k->n_terms, 2);
    assert_true(k->terms[0] == a && k->terms[1] == b);
    assert_int_equal(k->input_dim, DIM);
    assert_int_equal(gp_kernel_n_params(k), 3);
    gp_kernel_free(k);
    gp_kernel_free(other);
}

/* ------------------------------------------------------------------------ */
/* spectral densities                                                         */

#define DRAWS 200000
#define SD 3

static double *draw_n(gp_kernel_type type, uint64_t seed, size_t count, gp_spectral *s)
{
    gp_error err;
    assert_int_equal(gp_kernel_spectral(type, s, &err), GP_OK);
    double *w = malloc(count * SD * sizeof *w);
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    gp_spectral_sample(s, SD, count, &rng, w);
    return w;
}

static double *draw(gp_kernel_type type, uint64_t seed, gp_spectral *s)
{
    return draw_n(type, seed, DRAWS, s);
}

static void test_spectral_types(void **state)
{
    (void)state;
    gp_spectral s;
    gp_error err;
    assert_int_equal(gp_kernel_spectral(GP_KERNEL_RBF, &s, &err), GP_OK);
    assert_true(s.family == GP_SPECTRAL_GAUSSIAN && s.nu == 0.0);
    const gp_kernel_type m[3] = {GP_KERNEL_MATERN12, GP_KERNEL_MATERN32, GP_KERNEL_MATERN52};
    for (int i = 0; i < 3; i++) {
        assert_int_equal(gp_kernel_spectral(m[i], &s, &err), GP_OK);
        assert_true(s.family == GP_SPECTRAL_STUDENT_T && s.nu == 0.5 + i);
    }
    const gp_kernel_type none[] = {GP_KERNEL_RQ, GP_KERNEL_PERIODIC, GP_KERNEL_LINEAR,
                                   GP_KERNEL_WHITE, GP_KERNEL_SUM, GP_KERNEL_PRODUCT};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        gp_error_clear(&err);
        assert_int_equal(gp_kernel_spectral(none[i], &s, &err), GP_EUNSUPPORTED);
        assert_int_equal(err.code, GP_EUNSUPPORTED);
        const char *names[4] = {"rbf", "matern12", "matern32", "matern52"};
        for (int j = 0; j < 4; j++)
            assert_non_null(strstr(err.message, names[j]));
    }
}

static void moments(const double *w, size_t n, double *mean, double *cov)
{
    for (int a = 0; a < SD; a++) {
        double s = 0.0;
        for (size_t i = 0; i < n; i++)
            s += w[i + a * n];
        mean[a] = s / (double)n;
    }
    for (int a = 0; a < SD; a++)
        for (int b = 0; b < SD; b++) {
            double s = 0.0;
            for (size_t i = 0; i < n; i++)
                s += (w[i + a * n] - mean[a]) * (w[i + b * n] - mean[b]);
            cov[a + b * SD] = s / (double)(n - 1);
        }
}

static void check_moments(gp_kernel_type type, size_t n, double var, double mean_tol,
                          double rel_tol)
{
    gp_spectral s;
    double *w = draw_n(type, 21 + (uint64_t)type, n, &s), mean[SD], cov[SD * SD];
    moments(w, n, mean, cov);
    for (int a = 0; a < SD; a++) {
        assert_float_equal(mean[a], 0.0, mean_tol);
        for (int b = 0; b < SD; b++)
            assert_float_equal(cov[a + b * SD], a == b ? var : 0.0, rel_tol * var);
    }
    free(w);
}

static void test_spectral_moments(void **state)
{
    (void)state;
    check_moments(GP_KERNEL_RBF, DRAWS, 1.0, 0.015, 0.025);
    check_moments(GP_KERNEL_MATERN52, DRAWS, 5.0 / 3.0, 0.02, 0.06);
    /* 3 degrees of freedom: the variance exists but the fourth moment does not,
     * so the sample covariance converges slowly and with heavy tails; more
     * draws and a looser tolerance (still far from the 1 of a Gaussian or the
     * infinity of a chi-square with nu instead of 2 nu degrees of freedom). */
    check_moments(GP_KERNEL_MATERN32, 5 * DRAWS, 3.0, 0.03, 0.3);
}

/* A bounded, hence tightly estimated, second moment: for a multivariate t with
 * nu' degrees of freedom, E[nu' w w^T / (nu' + |w|^2)] = nu' / (d + nu') I (as
 * |z|^2 / (u + |z|^2) is Beta(d/2, nu'/2)). */
static void test_spectral_normalised_moment(void **state)
{
    (void)state;
    const gp_kernel_type types[3] = {GP_KERNEL_MATERN12, GP_KERNEL_MATERN32,
                                     GP_KERNEL_MATERN52};
    for (int t = 0; t < 3; t++) {
        gp_spectral s;
        double *w = draw(types[t], 51 + (uint64_t)t, &s), dof = 2.0 * s.nu;
        for (int a = 0; a < SD; a++)
            for (int b = 0; b < SD; b++) {
                double sum = 0.0;
                for (size_t i = 0; i < DRAWS; i++) {
                    double n2 = 0.0;
                    for (int c = 0; c < SD; c++)
                        n2 += w[i + c * DRAWS] * w[i + c * DRAWS];
                    sum += dof * w[i + a * DRAWS] * w[i + b * DRAWS] / (dof + n2);
                }
                assert_float_equal(sum / DRAWS, a == b ? dof / (SD + dof) : 0.0, 0.012);
            }
        free(w);
    }
}

static double correlation(const double *a, const double *b, size_t n)
{
    double ma = 0, mb = 0, saa = 0, sbb = 0, sab = 0;
    for (size_t i = 0; i < n; i++) {
        ma += a[i];
        mb += b[i];
    }
    ma /= (double)n;
    mb /= (double)n;
    for (size_t i = 0; i < n; i++) {
        saa += (a[i] - ma) * (a[i] - ma);
        sbb += (b[i] - mb) * (b[i] - mb);
        sab += (a[i] - ma) * (b[i] - mb);
    }
    return sab / sqrt(saa * sbb);
}

/* A multivariate t shares one chi-square across coordinates, so log w1^2 and
 * log w2^2 share the term log(nu'/u): their correlation is
 * trigamma(nu'/2) / (trigamma(1/2) + trigamma(nu'/2)), not the 0 of d
 * independent t's (or of the Gaussian). */
static void test_spectral_multivariate(void **state)
{
    (void)state;
    const double pi2_2 = PI_ * PI_ / 2.0; /* trigamma(1/2) */
    const struct {
        gp_kernel_type type;
        double trigamma; /* of nu'/2 */
    } cases[] = {
        {GP_KERNEL_RBF, 0.0},
        {GP_KERNEL_MATERN12, pi2_2},
        {GP_KERNEL_MATERN32, pi2_2 - 4.0},
        {GP_KERNEL_MATERN52, pi2_2 - 4.0 - 4.0 / 9.0},
    };
    double *l1 = malloc(DRAWS * sizeof *l1), *l2 = malloc(DRAWS * sizeof *l2);
    for (size_t c = 0; c < 4; c++) {
        gp_spectral s;
        double *w = draw(cases[c].type, 31 + c, &s);
        for (size_t i = 0; i < DRAWS; i++) {
            l1[i] = log(w[i] * w[i]);
            l2[i] = log(w[i + DRAWS] * w[i + DRAWS]);
        }
        double want = cases[c].trigamma / (pi2_2 + cases[c].trigamma);
        assert_float_equal(correlation(l1, l2, DRAWS), want, 0.015);
        if (cases[c].type == GP_KERNEL_MATERN52) {
            /* And the squares themselves are positively correlated. */
            for (size_t i = 0; i < DRAWS; i++) {
                l1[i] = w[i] * w[i];
                l2[i] = w[i + DRAWS] * w[i + DRAWS];
            }
            assert_true(correlation(l1, l2, DRAWS) > 0.05);
        }
        free(w);
    }
    free(l1);
    free(l2);
}

/* The spectral measure reproduces the kernel: E cos(w^T tau~) = k(tau) / s2,
 * with tau~ = tau / l the scaled lag. */
static void test_spectral_reproduces_kernel(void **state)
{
    (void)state;
    const gp_kernel_type types[4] = {GP_KERNEL_RBF, GP_KERNEL_MATERN12, GP_KERNEL_MATERN32,
                                     GP_KERNEL_MATERN52};
    const double ls[SD] = {0.7, 1.3, 2.0};
    const double taus[4][SD] = {
        {0.3, -0.2, 0.5}, {0.8, 0.9, -1.1}, {0.0, 0.0, 2.5}, {1.5, 1.5, 1.5}};
    const double zero[SD] = {0, 0, 0};
    for (int t = 0; t < 4; t++) {
        gp_kernel *k = leaf(types[t], 1, NULL, 0);
        set_leaf(k, 2.5, ls, 1.0, 1.0);
        gp_spectral s;
        double *w = draw(types[t], 41 + (uint64_t)t, &s);
        for (int j = 0; j < 4; j++) {
            double sum = 0.0, sum2 = 0.0;
            for (size_t i = 0; i < DRAWS; i++) {
                double dot = 0.0;
                for (int c = 0; c < SD; c++)
                    dot += w[i + c * DRAWS] * taus[j][c] / ls[c];
                double v = cos(dot);
                sum += v;
                sum2 += v * v;
            }
            double mean = sum / DRAWS, se = sqrt((sum2 / DRAWS - mean * mean) / DRAWS);
            double want = gp_kernel_eval(k, taus[j], zero, 0) / 2.5;
            if (!(fabs(mean - want) <= 4.0 * se + 1e-12)) {
                print_error("%s tau %d: MC %.5f +- %.5f, kernel %.5f\n",
                            gp_kernel_type_name(types[t]), j, mean, se, want);
                fail();
            }
        }
        free(w);
        gp_kernel_free(k);
    }
}

static void test_spectral_sample_layout(void **state)
{
    (void)state;
    gp_spectral s = {GP_SPECTRAL_GAUSSIAN, 0.0};
    gp_rng a, b;
    gp_rng_seed(&a, 5);
    gp_rng_seed(&b, 5);
    double w[4 * 2];
    gp_spectral_sample(&s, 2, 4, &a, w);
    /* Draw i is row i of the column-major 4 x 2 matrix, coordinates in order. */
    for (int i = 0; i < 4; i++) {
        double z0 = gp_rng_normal(&b), z1 = gp_rng_normal(&b);
        assert_true(w[i] == z0 && w[i + 4] == z1);
    }
    /* Student-t: the same normals, one shared scale per draw. */
    gp_spectral t = {GP_SPECTRAL_STUDENT_T, 1.5};
    gp_rng_seed(&a, 6);
    gp_rng_seed(&b, 6);
    gp_spectral_sample(&t, 2, 4, &a, w);
    for (int i = 0; i < 4; i++) {
        double z0 = gp_rng_normal(&b), z1 = gp_rng_normal(&b);
        assert_float_equal(w[i] / z0, w[i + 4] / z1, 1e-12 * fabs(w[i] / z0));
        assert_true(w[i] / z0 > 0.0);
        gp_rng_chisq(&b, 3.0);
    }
}

static void test_spectral_score(void **state)
{
    (void)state;
    const gp_spectral fam[4] = {{GP_SPECTRAL_GAUSSIAN, 0.0},
                                {GP_SPECTRAL_STUDENT_T, 0.5},
                                {GP_SPECTRAL_STUDENT_T, 1.5},
                                {GP_SPECTRAL_STUDENT_T, 2.5}};
    const double om[3][SD] = {{0.3, -1.2, 0.7}, {2.5, 0.1, -3.0}, {0.0, 0.0, 0.0}};
    for (int f = 0; f < 4; f++)
        for (int o = 0; o < 3; o++) {
            double score[SD], w[SD];
            gp_spectral_score(&fam[f], SD, om[o], score);
            for (int c = 0; c < SD; c++) {
                memcpy(w, om[o], sizeof w);
                w[c] += 1e-5;
                double up = gp_spectral_log_density(&fam[f], SD, w);
                w[c] -= 2e-5;
                double dn = gp_spectral_log_density(&fam[f], SD, w);
                assert_float_equal(score[c], (up - dn) / 2e-5, 1e-7 * (1 + fabs(score[c])));
            }
        }
    double w0[SD] = {0, 0, 0};
    /* Closed forms at 0: Gaussian (2 pi)^(-3/2); Cauchy in d = 1: 1/pi. */
    assert_float_equal(gp_spectral_log_density(&fam[0], SD, w0), -1.5 * log(2 * PI_), 1e-14);
    assert_float_equal(gp_spectral_log_density(&fam[1], 1, w0), -log(PI_), 1e-14);
}

/* integral over R^d of exp(log p), radially: S_{d-1} int_0^inf rho^(d-1) p(rho) drho
 * with rho = tan(theta) (midpoint rule), which handles the Cauchy's tails. */
static double total_mass(const gp_spectral *s, size_t d)
{
    const size_t steps = 200000;
    const double sphere[4] = {0.0, 2.0, 2.0 * PI_, 4.0 * PI_}; /* d = 1 counts both sides */
    double h = (PI_ / 2.0) / (double)steps, sum = 0.0;
    for (size_t i = 0; i < steps; i++) {
        double th = (i + 0.5) * h, rho = tan(th), c = cos(th);
        double w[SD] = {rho, 0.0, 0.0};
        sum += pow(rho, (double)d - 1.0) * exp(gp_spectral_log_density(s, d, w)) / (c * c);
    }
    return sphere[d] * sum * h;
}

static void test_spectral_normalised(void **state)
{
    (void)state;
    const gp_spectral fam[5] = {{GP_SPECTRAL_GAUSSIAN, 0.0},
                                {GP_SPECTRAL_STUDENT_T, 0.5},
                                {GP_SPECTRAL_STUDENT_T, 1.5},
                                {GP_SPECTRAL_STUDENT_T, 2.5},
                                {GP_SPECTRAL_STUDENT_T, 0.8}}; /* not a half-integer */
    for (int f = 0; f < 5; f++)
        for (size_t d = 1; d <= 3; d++) {
            /* The Cauchy in d >= 2 has tails too heavy for this quadrature. */
            if (f == 1 && d > 1)
                continue;
            double mass = total_mass(&fam[f], d);
            if (!(fabs(mass - 1.0) < 1e-6)) {
                print_error("family %d nu %g d %zu: mass %.10f\n", (int)fam[f].family, fam[f].nu,
                            d, mass);
                fail();
            }
        }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_type_names),
        cmocka_unit_test(test_leaf_validation),
        cmocka_unit_test(test_composite_validation),
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
        cmocka_unit_test(test_params_roundtrip),
        cmocka_unit_test(test_free_mask),
        cmocka_unit_test(test_param_names),
        cmocka_unit_test(test_copy),
        cmocka_unit_test(test_encode_roundtrip),
        cmocka_unit_test(test_decode_rejects),
        cmocka_unit_test(test_decode_fuzz),
        cmocka_unit_test(test_depth_limit),
        cmocka_unit_test(test_spectral_types),
        cmocka_unit_test(test_spectral_moments),
        cmocka_unit_test(test_spectral_normalised_moment),
        cmocka_unit_test(test_spectral_multivariate),
        cmocka_unit_test(test_spectral_reproduces_kernel),
        cmocka_unit_test(test_spectral_sample_layout),
        cmocka_unit_test(test_spectral_score),
        cmocka_unit_test(test_spectral_normalised),
    };
    return cmocka_run_group_tests_name("kernel", tests, NULL, NULL);
}
