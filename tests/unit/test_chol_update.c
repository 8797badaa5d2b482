/* Drift of the Givens rank-one Cholesky updates (core/linalg/linalg.h:
 * gp_chol_update_rank1 and gp_chol_update_rank1_packed), the update rfgp
 * streams (docs/methods/kernel-jit-online.md §7, pitfall 4): 10^5 random
 * updates of an n = 24 factor against a fresh Cholesky factorisation of the
 * accumulated matrix (accumulated in long double, so that the reference's own
 * rounding is negligible).
 *
 * The bounds. One Givens update is backward stable: the computed factor L'
 * satisfies L' L'^T = L L^T + x x^T + E with |E| <= c n u (|L|^2 + |x|^2)
 * (u = 2^-53; Stewart, "Matrix Algorithms I", §4.3 on plane rotations), and
 * the factor never leaves the Cholesky form, so errors only add up: after N
 * updates the residual |L L^T - A|_F / |A|_F is at most about c n u N (every
 * error the same sign, A growing linearly): with n = 24, N = 10^5, n u N =
 * 2.7e-10. Rounding errors of independent updates do not share a sign: they
 * add as a random walk, n u sqrt(N) = 8.4e-13, the bound asserted (c = 1);
 * and since |A| grows with the updates, the early errors weigh less still:
 * seen 2.2e-14 (the test prints it). An update that lost the Cholesky form
 * (Sherman-Morrison on the inverse, §8.4) drifts with the condition number on
 * top of that.
 * The factor itself is compared with the fresh one: A is well conditioned
 * (x ~ N(0, I): A ~ N I), so the factor's forward error is of the residual's
 * order; the same bound applies. */
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

#include "core/base/rng.h"
#include "core/linalg/linalg.h"
#include "tests/unit/testutil.h"

#define NDIM 24
#define UPDATES 100000

typedef long double ld;

static double frob(const double *A, size_t count)
{
    double s = 0.0;
    for (size_t i = 0; i < count; i++)
        s += A[i] * A[i];
    return sqrt(s);
}

static void drift(int packed)
{
    size_t n = NDIM;
    double L[NDIM * NDIM] = {0}, P[NDIM * (NDIM + 1) / 2], x[NDIM];
    ld A[NDIM * NDIM] = {0};
    for (size_t j = 0; j < n; j++) {
        L[j * n + j] = 1.0;
        A[j * n + j] = 1.0L;
    }
    gp_pack_lower(L, n, n, P);
    gp_rng rng;
    gp_rng_seed(&rng, 2024);
    for (size_t t = 0; t < UPDATES; t++) {
        for (size_t i = 0; i < n; i++)
            x[i] = gp_rng_normal(&rng);
        for (size_t a = 0; a < n; a++)
            for (size_t b = 0; b <= a; b++)
                A[b * n + a] += (ld)x[a] * (ld)x[b];
        if (packed)
            gp_chol_update_rank1_packed(P, n, x);
        else
            gp_chol_update_rank1(L, n, n, x);
    }
    if (packed)
        gp_unpack_lower(P, n, L, n);
    /* the residual L L^T - A, and the fresh factor of A */
    double R[NDIM * NDIM], F[NDIM * NDIM], Ad[NDIM * NDIM];
    for (size_t a = 0; a < n; a++)
        for (size_t b = 0; b < n; b++) {
            ld s = 0;
            for (size_t k = 0; k <= (a < b ? a : b); k++)
                s += (ld)L[k * n + a] * (ld)L[k * n + b];
            ld av = a >= b ? A[b * n + a] : A[a * n + b];
            R[b * n + a] = (double)(s - av);
            Ad[b * n + a] = (double)av;
            F[b * n + a] = a >= b ? (double)av : 0.0;
        }
    assert_int_equal(LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)n, F, (lapack_int)n), 0);
    for (size_t a = 0; a < n; a++)
        for (size_t b = a + 1; b < n; b++)
            F[b * n + a] = 0.0;
    double D[NDIM * NDIM];
    for (size_t i = 0; i < n * n; i++)
        D[i] = L[i] - F[i];
    double residual = frob(R, n * n) / frob(Ad, n * n);
    double forward = frob(D, n * n) / frob(F, n * n);
    double bound = (double)n * ldexp(1.0, -53) * sqrt((double)UPDATES);
    print_message("%s: after %d updates, relative residual %.3g, factor vs fresh %.3g "
                  "(bound %.3g; worst case, every error of one sign: %.3g)\n",
                  packed ? "packed" : "full", UPDATES, residual, forward, bound,
                  (double)n * ldexp(1.0, -53) * (double)UPDATES);
    tu_assert_within(residual, 0.0, bound, "%s: |L L^T - A| / |A|", packed ? "packed" : "full");
    tu_assert_within(forward, 0.0, bound, "%s: |L - chol(A)| / |chol(A)|",
                     packed ? "packed" : "full");
}

static void test_drift_full(void **state)
{
    (void)state;
    drift(0);
}

static void test_drift_packed(void **state)
{
    (void)state;
    drift(1);
}

/* The two layouts are the same arithmetic: identical bits. */
static void test_layouts_agree(void **state)
{
    (void)state;
    size_t n = 9;
    double L[81] = {0}, P[45], x[9], y[9], back[81];
    for (size_t j = 0; j < n; j++)
        L[j * n + j] = 1.0 + (double)j;
    gp_pack_lower(L, n, n, P);
    gp_rng rng;
    gp_rng_seed(&rng, 3);
    for (int t = 0; t < 50; t++) {
        for (size_t i = 0; i < n; i++)
            x[i] = y[i] = gp_rng_normal(&rng);
        gp_chol_update_rank1(L, n, n, x);
        gp_chol_update_rank1_packed(P, n, y);
    }
    gp_unpack_lower(P, n, back, n);
    assert_memory_equal(back, L, sizeof L);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_drift_full),
        cmocka_unit_test(test_drift_packed),
        cmocka_unit_test(test_layouts_agree),
    };
    return cmocka_run_group_tests_name("chol_update", tests, NULL, NULL);
}
