/* kernel_dx: gradients of k(x, z) and k(x, x) with respect to x for every
 * leaf type, ARD, active_dims and sum/product trees (kernel_fixture.h's set),
 * against central differences of gp_kernel_eval; values bit for bit
 * gp_kernel_eval's; the contraction against the full matrix; the limits at
 * x = z; a closed form. */
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
#include "core/kernel/kernel_dx.h"
#include "tests/unit/testutil.h"
#include "tests/unit/kernel_fixture.h"

#define NZ 6

/* Central differences with h = 1e-6 on O(1) points: truncation ~1e-12 times
 * the third derivative, rounding ~1e-10; 1e-6 relative leaves room for the
 * periodic kernel's larger curvature and still fails any wrong factor. */
static const tu_fd_spec fd_spec = {FD_STEP, 1e-6, 1e-8, 1.0, 0};

typedef struct pair_fn {
    const gp_kernel *k;
    const double *z; /* NULL: k(x, x) */
} pair_fn;

static double eval_at(void *ctx, const double *x)
{
    const pair_fn *p = ctx;
    return p->z ? gp_kernel_eval(p->k, x, p->z, 0) : gp_kernel_eval(p->k, x, x, 1);
}

static void test_cross_dx_fd(void **state)
{
    (void)state;
    gp_rng rng;
    gp_rng_seed(&rng, 11);
    gp_kernel *ks[MAX_KERNELS];
    size_t nk = make_kernels(ks, &rng);
    double Z[DIM * NZ], x[DIM], kx[NZ], dk[NZ * DIM];
    for (size_t t = 0; t < nk; t++) {
        random_points(&rng, Z, NZ);
        random_points(&rng, x, 1);
        gp_error err;
        assert_int_equal(gp_kernel_cross_dx(ks[t], x, Z, NZ, kx, dk, NZ, &err), GP_OK);
        char what[160];
        describe(ks[t], what, sizeof what);
        for (size_t i = 0; i < NZ; i++) {
            double want = gp_kernel_eval(ks[t], x, Z + i * DIM, 0);
            assert_memory_equal(&kx[i], &want, sizeof want);
            double g[DIM];
            for (size_t j = 0; j < DIM; j++)
                g[j] = dk[i + j * NZ];
            pair_fn f = {ks[t], Z + i * DIM};
            tu_check_gradient(eval_at, &f, x, DIM, g, fd_spec, NULL, what);
        }
    }
    free_kernels(ks, nk);
}

/* k(x, x): zero for the stationary leaves, 2 s2 x for linear ones, and the
 * product rule through trees that hold both. */
static void test_diag_dx_fd(void **state)
{
    (void)state;
    gp_rng rng;
    gp_rng_seed(&rng, 12);
    gp_kernel *ks[MAX_KERNELS];
    size_t nk = make_kernels(ks, &rng);
    size_t nonzero = 0;
    for (size_t t = 0; t < nk; t++) {
        double x[DIM], g[DIM], kxx;
        random_points(&rng, x, 1);
        gp_error err;
        assert_int_equal(gp_kernel_diag_dx(ks[t], x, &kxx, g, &err), GP_OK);
        double want = gp_kernel_diag(ks[t], x);
        assert_memory_equal(&kxx, &want, sizeof want);
        char what[160];
        describe(ks[t], what, sizeof what);
        pair_fn f = {ks[t], NULL};
        tu_check_gradient(eval_at, &f, x, DIM, g, fd_spec, NULL, what);
        for (size_t j = 0; j < DIM; j++)
            nonzero += g[j] != 0.0;
        int stationary_leaf =
            ks[t]->type < GP_KERNEL_SUM && ks[t]->type != GP_KERNEL_LINEAR;
        for (size_t j = 0; stationary_leaf && j < DIM; j++)
            assert_true(g[j] == 0.0); /* exactly 0, not rounding */
    }
    assert_true(nonzero > 0); /* the linear leaves and the trees holding them */
    free_kernels(ks, nk);
}

/* G = sum_i W_i dk_i, against the full matrix. */
static void test_contract_matches_matrix(void **state)
{
    (void)state;
    gp_rng rng;
    gp_rng_seed(&rng, 13);
    gp_kernel *ks[MAX_KERNELS];
    size_t nk = make_kernels(ks, &rng);
    double Z[DIM * NZ], x[DIM], dk[NZ * DIM], W[NZ * 2], G[DIM * 2];
    for (size_t t = 0; t < nk; t++) {
        random_points(&rng, Z, NZ);
        random_points(&rng, x, 1);
        for (size_t i = 0; i < NZ * 2; i++)
            W[i] = gp_rng_normal(&rng);
        gp_error err;
        assert_int_equal(gp_kernel_cross_dx(ks[t], x, Z, NZ, NULL, dk, NZ, &err), GP_OK);
        assert_int_equal(gp_kernel_cross_dx_contract(ks[t], x, Z, NZ, W, NZ, 2, G, &err), GP_OK);
        for (size_t r = 0; r < 2; r++)
            for (size_t j = 0; j < DIM; j++) {
                double want = 0.0;
                for (size_t i = 0; i < NZ; i++)
                    want += W[i + r * NZ] * dk[i + j * NZ];
                check_close(G[j + r * DIM], want, 1e-13, 1e-15, ks[t], "contraction", 0);
            }
    }
    free_kernels(ks, nk);
}

/* At x = z the stationary and periodic gradients are 0 (matern12: the
 * convention of kernel_dx.h), and dimensions no leaf sees are exactly 0. */
static void test_limits_and_unseen_dims(void **state)
{
    (void)state;
    gp_rng rng;
    gp_rng_seed(&rng, 14);
    double x[DIM] = {0.4, -1.1, 0.9}, dk[DIM];
    for (int t = 0; t <= GP_KERNEL_PERIODIC; t++) {
        gp_kernel *k = leaf((gp_kernel_type)t, 1, NULL, 0);
        randomize(k, &rng);
        gp_error err;
        assert_int_equal(gp_kernel_cross_dx(k, x, x, 1, NULL, dk, 1, &err), GP_OK);
        for (size_t j = 0; j < DIM; j++)
            assert_true(dk[j] == 0.0);
        gp_kernel_free(k);
    }
    double z[DIM] = {1.0, 0.2, -0.3};
    for (int t = 0; t < GP_KERNEL_SUM; t++) {
        gp_kernel *k = leaf((gp_kernel_type)t, 0, dims1, 1);
        randomize(k, &rng);
        gp_error err;
        assert_int_equal(gp_kernel_cross_dx(k, x, z, 1, NULL, dk, 1, &err), GP_OK);
        assert_true(dk[0] == 0.0 && dk[2] == 0.0);
        if (t != GP_KERNEL_WHITE)
            assert_true(dk[1] != 0.0);
        gp_kernel_free(k);
    }
}

/* rbf with ARD: dk/dx_j = -k (x_j - z_j) / l_j^2; linear: s2 z_j. */
static void test_closed_forms(void **state)
{
    (void)state;
    double x[DIM] = {0.3, -1.2, 2.0}, z[DIM] = {1.1, 0.4, 1.5}, ls[DIM] = {0.7, 1.3, 2.1};
    double dk[DIM];
    gp_kernel *k = leaf(GP_KERNEL_RBF, 1, NULL, 0);
    set_leaf(k, 1.7, ls, 1.0, 1.0);
    gp_error err;
    assert_int_equal(gp_kernel_cross_dx(k, x, z, 1, NULL, dk, 1, &err), GP_OK);
    double r2 = 0.0;
    for (size_t j = 0; j < DIM; j++)
        r2 += (x[j] - z[j]) * (x[j] - z[j]) / (ls[j] * ls[j]);
    double kv = 1.7 * exp(-0.5 * r2);
    for (size_t j = 0; j < DIM; j++)
        tu_assert_close(dk[j], -kv * (x[j] - z[j]) / (ls[j] * ls[j]), 1e-14, 0.0, "rbf dk[%zu]",
                        j);
    gp_kernel_free(k);
    k = leaf(GP_KERNEL_LINEAR, 0, NULL, 0);
    set_leaf(k, 2.5, NULL, 1.0, 1.0);
    assert_int_equal(gp_kernel_cross_dx(k, x, z, 1, NULL, dk, 1, &err), GP_OK);
    for (size_t j = 0; j < DIM; j++)
        tu_assert_close(dk[j], 2.5 * z[j], 1e-15, 0.0, "linear dk[%zu]", j);
    gp_kernel_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cross_dx_fd),
        cmocka_unit_test(test_diag_dx_fd),
        cmocka_unit_test(test_contract_matches_matrix),
        cmocka_unit_test(test_limits_and_unseen_dims),
        cmocka_unit_test(test_closed_forms),
    };
    return cmocka_run_group_tests_name("kernel_dx", tests, NULL, NULL);
}
