/* gp_kernel_cross_grad_contract: the theta and Z gradients of
 * F = sum_ij W_ij k(X_i, Z_j) against central finite differences and against
 * gp_kernel_eval_grad pair by pair, for every stationary leaf with and without
 * ARD and active_dims; bit-identical results for any thread count; the
 * unsupported kernels; the symmetric (Z, Z) case; the known-values variant
 * (gp_kernel_cross_grad_contract_known) against the direct one. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/base/parallel.h"
#include "core/base/rng.h"
#include "core/kernel/kernel.h"
#include "tests/unit/testutil.h"

#define DIM 3
#define MAX_PARAMS 16
#define FD_STEP 1e-5
#define FD_RTOL 1e-6

static const gp_kernel_type stationary[] = {GP_KERNEL_RBF, GP_KERNEL_MATERN12,
                                            GP_KERNEL_MATERN32, GP_KERNEL_MATERN52,
                                            GP_KERNEL_RQ};
#define N_STATIONARY (sizeof stationary / sizeof stationary[0])
static const size_t dims02[] = {0, 2};

/* Configuration c (0..3): bit 0 = ARD, bit 1 = active dims {0, 2}. */
static gp_kernel *make_kernel(gp_kernel_type type, int c, gp_rng *rng)
{
    gp_kernel *k = NULL;
    gp_error err;
    int ard = c & 1, act = (c >> 1) & 1;
    assert_int_equal(gp_kernel_leaf(&k, type, DIM, ard, act ? dims02 : NULL, act ? 2 : 0, &err),
                     GP_OK);
    size_t np = gp_kernel_n_params(k);
    double th[MAX_PARAMS];
    assert_true(np <= MAX_PARAMS);
    for (size_t i = 0; i < np; i++)
        th[i] = -0.5 + gp_rng_uniform(rng);
    gp_kernel_set_params(k, th);
    return k;
}

static void fill_normal(gp_rng *rng, double *x, size_t count, double scale)
{
    for (size_t i = 0; i < count; i++)
        x[i] = scale * gp_rng_normal(rng);
}

/* F = sum_ij W_ij k(X_i, Z_j) with W (n x m, leading dimension ldw). */
static double objective(const gp_kernel *k, const double *X, size_t n, const double *Z, size_t m,
                        const double *W, size_t ldw)
{
    double *K = malloc(n * m * sizeof *K), f = 0.0;
    gp_kernel_cross(k, X, n, Z, m, K, n);
    for (size_t j = 0; j < m; j++)
        for (size_t i = 0; i < n; i++)
            f += W[i + j * ldw] * K[i + j * n];
    free(K);
    return f;
}

/* sum_ij W_ij k(Z_i, Z_j) for W (m x m). */
static double sym_objective(const gp_kernel *k, const double *Z, size_t m, const double *W)
{
    double *K = malloc(m * m * sizeof *K), f = 0.0;
    gp_kernel_gram(k, Z, m, K, m);
    for (size_t i = 0; i < m * m; i++)
        f += W[i] * K[i];
    free(K);
    return f;
}

static void assert_close(double got, double want, double rtol, const char *what, size_t i)
{
    tu_assert_within(got, want, rtol * (1.0 + fabs(want)), "%s[%zu]", what, i);
}

typedef struct contract_fd {
    gp_kernel *k;
    const double *X, *W;
    size_t np;
} contract_fd;

/* F at x = (kernel log-parameters, Z). */
static double contract_at(void *ctx, const double *x)
{
    enum { N = 7, M = 5, LDW = N + 2 };
    contract_fd *c = ctx;
    gp_kernel_set_params(c->k, x);
    return objective(c->k, c->X, N, x + c->np, M, c->W, LDW);
}

/* grad and gz against central differences of F. */
static void test_fd(void **state)
{
    (void)state;
    enum { N = 7, M = 5, LDW = N + 2 };
    gp_rng rng;
    gp_rng_seed(&rng, 101);
    for (size_t t = 0; t < N_STATIONARY; t++) {
        for (int c = 0; c < 4; c++) {
            gp_kernel *k = make_kernel(stationary[t], c, &rng);
            size_t np = gp_kernel_n_params(k);
            double X[DIM * N], Z[DIM * M], W[LDW * M], grad[MAX_PARAMS], gz[DIM * M];
            fill_normal(&rng, X, DIM * N, 1.0); /* continuous: no coincident pairs */
            fill_normal(&rng, Z, DIM * M, 1.0);
            fill_normal(&rng, W, LDW * M, 1.0);
            gp_error err;
            assert_int_equal(gp_kernel_cross_grad_contract(k, X, N, Z, M, W, LDW, grad, gz, &err),
                             GP_OK);
            /* One vector (theta, Z) and one gradient in the same order. */
            double x[MAX_PARAMS + DIM * M], g[MAX_PARAMS + DIM * M];
            gp_kernel_get_params(k, x);
            memcpy(x + np, Z, sizeof Z);
            memcpy(g, grad, np * sizeof *g);
            memcpy(g + np, gz, sizeof gz);
            contract_fd cf = {k, X, W, np};
            tu_check_gradient(contract_at, &cf, x, np + DIM * M, g,
                              (tu_fd_spec){.step = FD_STEP, .rtol = FD_RTOL, .atol = FD_RTOL},
                              NULL, gp_kernel_type_name(k->type));
            gp_kernel_set_params(k, x);
            for (size_t i = 0; i < DIM * M; i++)
                if ((c & 2) && i % DIM == 1) /* a dimension the kernel does not see */
                    assert_true(gz[i] == 0.0);
            /* gz may be NULL; grad is the same */
            double grad2[MAX_PARAMS];
            assert_int_equal(gp_kernel_cross_grad_contract(k, X, N, Z, M, W, LDW, grad2, NULL,
                                                           &err),
                             GP_OK);
            assert_memory_equal(grad, grad2, np * sizeof *grad);
            gp_kernel_free(k);
        }
    }
}

/* grad = sum_ij W_ij gp_kernel_eval_grad(X_i, Z_j), to rounding. */
static void test_matches_eval_grad(void **state)
{
    (void)state;
    enum { N = 11, M = 9 };
    gp_rng rng;
    gp_rng_seed(&rng, 202);
    for (size_t t = 0; t < N_STATIONARY; t++) {
        for (int c = 0; c < 4; c++) {
            gp_kernel *k = make_kernel(stationary[t], c, &rng);
            size_t np = gp_kernel_n_params(k);
            double X[DIM * N], Z[DIM * M], W[N * M], grad[MAX_PARAMS];
            double ref[MAX_PARAMS] = {0.0}, mag[MAX_PARAMS] = {0.0}, g[MAX_PARAMS];
            fill_normal(&rng, X, DIM * N, 1.0);
            fill_normal(&rng, Z, DIM * M, 1.0);
            fill_normal(&rng, W, N * M, 1.0);
            gp_error err;
            assert_int_equal(gp_kernel_cross_grad_contract(k, X, N, Z, M, W, N, grad, NULL, &err),
                             GP_OK);
            for (size_t j = 0; j < M; j++)
                for (size_t i = 0; i < N; i++) {
                    gp_kernel_eval_grad(k, X + i * DIM, Z + j * DIM, 0, g);
                    for (size_t p = 0; p < np; p++) {
                        ref[p] += W[i + j * N] * g[p];
                        mag[p] += fabs(W[i + j * N] * g[p]);
                    }
                }
            for (size_t p = 0; p < np; p++)
                assert_true(fabs(grad[p] - ref[p]) <= 1e-12 * (1.0 + mag[p]));
            gp_kernel_free(k);
        }
    }
}

/* A block that is split into tasks: the same bits for 1, 2 and 4 threads. */
static void test_thread_count(void **state)
{
    (void)state;
    enum { N = 200, M = 180 }; /* 36000 pairs >= 32768 */
    gp_rng rng;
    gp_rng_seed(&rng, 303);
    double *X = malloc(DIM * N * sizeof *X), *Z = malloc(DIM * M * sizeof *Z);
    double *W = malloc(N * M * sizeof *W);
    fill_normal(&rng, X, DIM * N, 1.0);
    fill_normal(&rng, Z, DIM * M, 1.0);
    fill_normal(&rng, W, N * M, 1.0);
    const int threads[] = {1, 2, 4};
    for (size_t t = 0; t < N_STATIONARY; t++) {
        for (int c = 0; c < 4; c++) {
            gp_kernel *k = make_kernel(stationary[t], c, &rng);
            size_t np = gp_kernel_n_params(k);
            double grad[3][MAX_PARAMS], *gz[3];
            for (int r = 0; r < 3; r++) {
                gp_parallel_set_threads(threads[r]);
                gz[r] = malloc(DIM * M * sizeof *gz[r]);
                gp_error err;
                assert_int_equal(gp_kernel_cross_grad_contract(k, X, N, Z, M, W, N, grad[r],
                                                               gz[r], &err),
                                 GP_OK);
            }
            for (int r = 1; r < 3; r++) {
                assert_memory_equal(grad[0], grad[r], np * sizeof(double));
                assert_memory_equal(gz[0], gz[r], DIM * M * sizeof(double));
            }
            for (int r = 0; r < 3; r++)
                free(gz[r]);
            gp_kernel_free(k);
        }
    }
    gp_parallel_set_threads(0);
    free(X);
    free(Z);
    free(W);
}

static void test_unsupported(void **state)
{
    (void)state;
    gp_error err;
    gp_kernel *lin = NULL, *per = NULL, *white = NULL, *a = NULL, *b = NULL, *sum = NULL;
    gp_kernel *one = NULL, *prod = NULL;
    assert_int_equal(gp_kernel_leaf(&lin, GP_KERNEL_LINEAR, DIM, 0, NULL, 0, &err), GP_OK);
    assert_int_equal(gp_kernel_leaf(&per, GP_KERNEL_PERIODIC, DIM, 0, NULL, 0, &err), GP_OK);
    assert_int_equal(gp_kernel_leaf(&white, GP_KERNEL_WHITE, DIM, 0, NULL, 0, &err), GP_OK);
    assert_int_equal(gp_kernel_leaf(&a, GP_KERNEL_RBF, DIM, 0, NULL, 0, &err), GP_OK);
    assert_int_equal(gp_kernel_leaf(&b, GP_KERNEL_MATERN32, DIM, 0, NULL, 0, &err), GP_OK);
    gp_kernel *terms[2] = {a, b};
    assert_int_equal(gp_kernel_composite(&sum, GP_KERNEL_SUM, terms, 2, &err), GP_OK);
    assert_int_equal(gp_kernel_leaf(&one, GP_KERNEL_RBF, DIM, 0, NULL, 0, &err), GP_OK);
    gp_kernel *single[1] = {one};
    assert_int_equal(gp_kernel_composite(&prod, GP_KERNEL_PRODUCT, single, 1, &err), GP_OK);
    double X[DIM * 2] = {0, 1, 2, 3, 4, 5}, W[4] = {1, 2, 3, 4}, grad[MAX_PARAMS], gz[DIM * 2];
    gp_kernel *bad[] = {lin, per, white, sum, prod};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gp_error_clear(&err);
        assert_int_equal(gp_kernel_cross_grad_contract(bad[i], X, 2, X, 2, W, 2, grad, gz, &err),
                         GP_EUNSUPPORTED);
        assert_int_equal(err.code, GP_EUNSUPPORTED);
    }
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        gp_kernel_free(bad[i]);
}

/* Symmetric W over (Z, Z): 2 gz is the Z-gradient of sum_ij W_ij k(Z_i, Z_j). */
static void test_symmetric(void **state)
{
    (void)state;
    enum { M = 6 };
    gp_rng rng;
    gp_rng_seed(&rng, 404);
    for (size_t t = 0; t < N_STATIONARY; t++) {
        for (int c = 0; c < 4; c++) {
            gp_kernel *k = make_kernel(stationary[t], c, &rng);
            double Z[DIM * M], W[M * M], grad[MAX_PARAMS], gz[DIM * M];
            fill_normal(&rng, Z, DIM * M, 1.0);
            for (size_t j = 0; j < M; j++)
                for (size_t i = 0; i <= j; i++)
                    W[i + j * M] = W[j + i * M] = gp_rng_normal(&rng);
            gp_error err;
            assert_int_equal(gp_kernel_cross_grad_contract(k, Z, M, Z, M, W, M, grad, gz, &err),
                             GP_OK);
            for (size_t i = 0; i < DIM * M; i++) {
                double save = Z[i];
                Z[i] = save + FD_STEP;
                double fp = sym_objective(k, Z, M, W);
                Z[i] = save - FD_STEP;
                double fm = sym_objective(k, Z, M, W);
                Z[i] = save;
                assert_close(2.0 * gz[i], (fp - fm) / (2.0 * FD_STEP), FD_RTOL, "2gz", i);
            }
            /* and grad is tr(W dK/dtheta) as gp_kernel_gram_grad_contract has it */
            size_t np = gp_kernel_n_params(k);
            double ref[MAX_PARAMS];
            gp_kernel_gram_grad_contract(k, Z, M, W, M, ref);
            for (size_t p = 0; p < np; p++)
                assert_close(grad[p], ref[p], 1e-12, "grad", p);
            gp_kernel_free(k);
        }
    }
}

static void test_empty(void **state)
{
    (void)state;
    gp_rng rng;
    gp_rng_seed(&rng, 5);
    gp_kernel *k = make_kernel(GP_KERNEL_RBF, 1, &rng);
    double X[DIM] = {1, 2, 3}, W[1] = {1}, grad[MAX_PARAMS], gz[DIM];
    for (size_t i = 0; i < MAX_PARAMS; i++)
        grad[i] = 7.0;
    for (size_t i = 0; i < DIM; i++)
        gz[i] = 7.0;
    gp_error err;
    assert_int_equal(gp_kernel_cross_grad_contract(k, X, 0, X, 1, W, 1, grad, gz, &err), GP_OK);
    for (size_t p = 0; p < gp_kernel_n_params(k); p++)
        assert_true(grad[p] == 0.0);
    for (size_t i = 0; i < DIM; i++)
        assert_true(gz[i] == 0.0);
    gp_kernel_free(k);
}


/* The known-values variant, on the transposed layout, equals the direct
 * contraction to rounding for every leaf and configuration, and is the same
 * bit for bit for 1, 2 and 4 threads. */
static void test_known_values(void **state)
{
    (void)state;
    gp_rng rng;
    gp_rng_seed(&rng, 77);
    size_t n = 230, m = 150; /* n m > 32768: split into tasks */
    double *X = malloc(DIM * n * sizeof *X), *Z = malloc(DIM * m * sizeof *Z);
    double *W = malloc(n * m * sizeof *W), *Wt = malloc(n * m * sizeof *Wt);
    double *K = malloc(n * m * sizeof *K);
    double *gz1 = malloc(DIM * m * sizeof *gz1), *gz2 = malloc(DIM * m * sizeof *gz2);
    double *gz3 = malloc(DIM * m * sizeof *gz3);
    assert_true(X && Z && W && Wt && K && gz1 && gz2 && gz3);
    fill_normal(&rng, X, DIM * n, 1.0);
    fill_normal(&rng, Z, DIM * m, 1.0);
    fill_normal(&rng, W, n * m, 1.0);
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < m; j++)
            Wt[j + i * m] = W[i + j * n];
    gp_error err;
    for (size_t t = 0; t < N_STATIONARY; t++)
        for (int c = 0; c < 4; c++) {
            gp_kernel *k = make_kernel(stationary[t], c, &rng);
            size_t np = gp_kernel_n_params(k);
            double g1[MAX_PARAMS], g2[MAX_PARAMS], g3[MAX_PARAMS];
            gp_kernel_cross(k, Z, m, X, n, K, m);
            assert_int_equal(gp_kernel_cross_grad_contract(k, X, n, Z, m, W, n, g1, gz1, &err),
                             GP_OK);
            gp_parallel_set_threads(1);
            assert_int_equal(gp_kernel_cross_grad_contract_known(k, X, n, Z, m, K, m, Wt, m, g2,
                                                                 gz2, &err),
                             GP_OK);
            gp_parallel_set_threads(4);
            assert_int_equal(gp_kernel_cross_grad_contract_known(k, X, n, Z, m, K, m, Wt, m, g3,
                                                                 gz3, &err),
                             GP_OK);
            gp_parallel_set_threads(0);
            assert_memory_equal(g2, g3, np * sizeof *g2);
            assert_memory_equal(gz2, gz3, DIM * m * sizeof *gz2);
            for (size_t p = 0; p < np; p++)
                if (fabs(g1[p] - g2[p]) > 1e-11 * fmax(1.0, fabs(g1[p])))
                    fail_msg("%s config %d param %zu: %.15g vs %.15g",
                             gp_kernel_type_name(stationary[t]), c, p, g1[p], g2[p]);
            for (size_t i = 0; i < DIM * m; i++)
                if (fabs(gz1[i] - gz2[i]) > 1e-11 * fmax(1.0, fabs(gz1[i])))
                    fail_msg("%s config %d gz %zu: %.15g vs %.15g",
                             gp_kernel_type_name(stationary[t]), c, i, gz1[i], gz2[i]);
            gp_kernel_free(k);
        }
    free(X), free(Z), free(W), free(Wt), free(K), free(gz1), free(gz2), free(gz3);
}

/* The lanes of gp_kernel_cross_grad_contract_known (kernel_block.c: the
 * coordinates side by side, q a block of Z at a time) give the bits of the
 * pair loop they replace, here written out pair by pair in its order: every
 * block type, ARD or not, all or some coordinates, m past one block of 64,
 * some weights exactly 0 (skipped); d = 3 (one vector of 8 lanes) and d = 19
 * (three). One task (n m small). */
static void check_known_lanes(gp_kernel *k, size_t d, gp_rng *rng)
{
    enum { N = 5, M = 70, DMAX = 19 };
    double X[DMAX * N], Z[DMAX * M], Wt[N * M], K[N * M], gz[DMAX * M], gzr[DMAX * M];
    fill_normal(rng, X, d * N, 1.0);
    fill_normal(rng, Z, d * M, 1.0);
    fill_normal(rng, Wt, N * M, 1.0);
    for (size_t i = 0; i < N * M; i += 7)
        Wt[i] = 0.0;
    gp_error err;
    size_t np = gp_kernel_n_params(k), na = k->n_active;
    double g[MAX_PARAMS + DMAX], gr[MAX_PARAMS + DMAX] = {0.0}, inv[DMAX];
    gp_kernel_cross(k, Z, M, X, N, K, M);
    assert_int_equal(gp_kernel_cross_grad_contract_known(k, X, N, Z, M, K, M, Wt, M, g, gz, &err),
                     GP_OK);
    memset(gzr, 0, sizeof gzr);
    for (size_t cc = 0; cc < na; cc++)
        inv[cc] = 1.0 / exp(k->log_lengthscale[k->ard ? cc : 0]);
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < M; j++) {
            double w = Wt[j + i * M], kv = K[j + i * M], a[DMAX], b[DMAX], q = 0.0, c0;
            if (w == 0.0)
                continue;
            for (size_t cc = 0; cc < na; cc++) {
                size_t dim = k->active_dims ? k->active_dims[cc] : cc;
                double s = exp(k->log_lengthscale[k->ard ? cc : 0]);
                a[cc] = X[i * d + dim] / s;
                b[cc] = Z[j * d + dim] / s;
                double dd = a[cc] - b[cc];
                q += dd * dd;
            }
            double r = sqrt(q);
            switch (k->type) {
            case GP_KERNEL_RBF: c0 = kv; break;
            case GP_KERNEL_MATERN12: c0 = r > 0.0 ? kv / r : 0.0; break;
            case GP_KERNEL_MATERN32: c0 = 3.0 * kv / (1.0 + 1.73205080756887729353 * r); break;
            default: {
                double s5 = 2.23606797749978969641 * r;
                c0 = (5.0 / 3.0) * (1.0 + s5) * kv / (1.0 + s5 + 5.0 * q / 3.0);
            }
            }
            double wc0 = w * c0;
            gr[0] += w * kv;
            if (!k->ard)
                gr[1] += wc0 * q;
            for (size_t cc = 0; cc < na; cc++) {
                double dd = a[cc] - b[cc];
                if (k->ard)
                    gr[1 + cc] += wc0 * (dd * dd);
                size_t dim = k->active_dims ? k->active_dims[cc] : cc;
                gzr[j * d + dim] += wc0 * dd * inv[cc];
            }
        }
    assert_memory_equal(g, gr, np * sizeof *g);
    assert_memory_equal(gz, gzr, d * M * sizeof *gz);
}

static void test_known_lanes_bits(void **state)
{
    (void)state;
    gp_rng rng;
    gp_rng_seed(&rng, 78);
    gp_error err;
    for (size_t t = 0; t < N_STATIONARY; t++) {
        if (stationary[t] == GP_KERNEL_RQ)
            continue; /* rq keeps the pair loop */
        for (int c = 0; c < 4; c++) {
            gp_kernel *k = make_kernel(stationary[t], c, &rng);
            check_known_lanes(k, DIM, &rng);
            gp_kernel_free(k);
        }
        for (int ard = 0; ard <= 1; ard++) { /* 19 coordinates: three vectors */
            gp_kernel *k = NULL;
            assert_int_equal(gp_kernel_leaf(&k, stationary[t], 19, ard, NULL, 0, &err), GP_OK);
            double th[MAX_PARAMS + 19];
            size_t np = gp_kernel_n_params(k);
            for (size_t i = 0; i < np; i++)
                th[i] = 0.5 + gp_rng_uniform(&rng);
            gp_kernel_set_params(k, th);
            check_known_lanes(k, 19, &rng);
            gp_kernel_free(k);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fd),
        cmocka_unit_test(test_matches_eval_grad),
        cmocka_unit_test(test_thread_count),
        cmocka_unit_test(test_unsupported),
        cmocka_unit_test(test_symmetric),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_known_values),
        cmocka_unit_test(test_known_lanes_bits),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
