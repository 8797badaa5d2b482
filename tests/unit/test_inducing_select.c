/* inducing selection: names, argument checks, greedy against a dense
 * Schur-complement reference, duplicates (never chosen twice, fewer points
 * back), positive definite Kuu for every method, random's seeding, k-means
 * fixed points and their within-cluster sum of squares, thread-count
 * independence and the large sizes the methods are meant for. */
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
#include "core/inducing/inducing.h"
#include "core/kernel/kernel.h"
#include "core/linalg/linalg.h"

static gp_kernel *rbf(size_t d, int ard)
{
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, d, ard, NULL, 0, &err), GP_OK);
    return k;
}

static int same_point(const double *a, const double *b, size_t d)
{
    for (size_t c = 0; c < d; c++)
        if (a[c] != b[c])
            return 0;
    return 1;
}

/* Index of a point of X equal to z, or n. */
static size_t find_point(const double *X, size_t n, size_t d, const double *z)
{
    for (size_t i = 0; i < n; i++)
        if (same_point(X + i * d, z, d))
            return i;
    return n;
}

static void assert_distinct_columns(const double *Z, size_t m, size_t d)
{
    for (size_t a = 0; a < m; a++)
        for (size_t b = a + 1; b < m; b++)
            assert_false(same_point(Z + a * d, Z + b * d, d));
}

/* nd distinct points on a grid of spacing `gap` in 2-D, each repeated `rep`
 * times, shuffled. X must hold 2 * nd * rep doubles. */
static void grid_with_duplicates(size_t nd, size_t rep, double gap, uint64_t seed, double *X)
{
    size_t n = nd * rep, side = (size_t)ceil(sqrt((double)nd));
    for (size_t i = 0; i < n; i++) {
        size_t u = i % nd;
        X[2 * i] = gap * (double)(u % side);
        X[2 * i + 1] = gap * (double)(u / side);
    }
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = n - 1; i > 0; i--) {
        size_t j = (size_t)gp_rng_below(&rng, i + 1);
        for (size_t c = 0; c < 2; c++) {
            double t = X[2 * i + c];
            X[2 * i + c] = X[2 * j + c];
            X[2 * j + c] = t;
        }
    }
}

/* ------------------------------------------------------------------------ */

static void test_names(void **state)
{
    (void)state;
    const gp_inducing_selection all[] = {GP_INDUCING_GREEDY, GP_INDUCING_KMEANS,
                                         GP_INDUCING_RANDOM};
    for (size_t i = 0; i < 3; i++) {
        const char *name = gp_inducing_selection_name(all[i]);
        assert_non_null(name);
        assert_int_equal(gp_inducing_selection_from_name(name), (int)all[i]);
    }
    assert_string_equal(gp_inducing_selection_name(GP_INDUCING_GREEDY), "greedy");
    assert_string_equal(gp_inducing_selection_name(GP_INDUCING_KMEANS), "kmeans");
    assert_string_equal(gp_inducing_selection_name(GP_INDUCING_RANDOM), "random");
    assert_int_equal(gp_inducing_selection_from_name("Greedy"), -1);
    assert_int_equal(gp_inducing_selection_from_name(""), -1);
    assert_int_equal(gp_inducing_selection_from_name(NULL), -1);
    assert_null(gp_inducing_selection_name((gp_inducing_selection)3));
    assert_null(gp_inducing_selection_name((gp_inducing_selection)-1));
}

static void test_validation(void **state)
{
    (void)state;
    gp_kernel *k = rbf(2, 0);
    double X[8] = {0, 0, 1, 0, 0, 1, 1, 1}, Z[8];
    size_t m = 99;
    gp_error err;
    for (int s = 0; s < 3; s++) {
        gp_inducing_selection sel = (gp_inducing_selection)s;
        assert_int_equal(gp_inducing_select(sel, k, X, 4, 2, 0, 1, Z, &m, &err), GP_EINVAL);
        assert_int_equal(gp_inducing_select(sel, k, X, 0, 2, 2, 1, Z, &m, &err), GP_EINVAL);
        assert_int_equal(gp_inducing_select(sel, k, X, 4, 0, 2, 1, Z, &m, &err), GP_EINVAL);
    }
    assert_int_equal(gp_inducing_select(GP_INDUCING_GREEDY, NULL, X, 4, 2, 2, 1, Z, &m, &err),
                     GP_EINVAL);
    assert_int_equal(gp_inducing_select((gp_inducing_selection)7, k, X, 4, 2, 2, 1, Z, &m, &err),
                     GP_EINVAL);
    /* random and kmeans need no kernel */
    assert_int_equal(gp_inducing_select(GP_INDUCING_RANDOM, NULL, X, 4, 2, 2, 1, Z, &m, &err),
                     GP_OK);
    assert_int_equal(m, 2);
    assert_int_equal(gp_inducing_select(GP_INDUCING_KMEANS, NULL, X, 4, 2, 2, 1, Z, &m, &err),
                     GP_OK);
    assert_int_equal(m, 2);
    /* dimension mismatch with the kernel, non-finite data */
    assert_int_equal(gp_inducing_select(GP_INDUCING_GREEDY, k, X, 2, 4, 2, 1, Z, &m, &err),
                     GP_EDATA);
    X[3] = NAN;
    for (int s = 0; s < 3; s++)
        assert_int_equal(gp_inducing_select((gp_inducing_selection)s, k, X, 4, 2, 2, 1, Z, &m,
                                            &err),
                         GP_EDATA);
    gp_kernel_free(k);
}

/* Greedy = pivoted Cholesky: each pick maximises the diagonal of the Schur
 * complement of the chosen block in the full Kff (computed densely here). */
static void test_greedy_reference(void **state)
{
    (void)state;
    enum { N = 40, D = 3, M = 15 };
    gp_kernel *k = rbf(D, 1);
    k->log_variance = log(1.7);
    k->log_lengthscale[0] = log(0.8);
    k->log_lengthscale[1] = log(1.3);
    k->log_lengthscale[2] = log(2.0);
    gp_rng rng;
    gp_rng_seed(&rng, 11);
    double X[N * D], Z[M * D], S[N * N];
    for (size_t i = 0; i < N * D; i++)
        X[i] = gp_rng_normal(&rng);
    size_t m = 0;
    gp_error err;
    assert_int_equal(gp_inducing_select(GP_INDUCING_GREEDY, k, X, N, D, M, 0, Z, &m, &err),
                     GP_OK);
    assert_int_equal(m, M);
    gp_kernel_gram(k, X, N, S, N);
    for (size_t j = 0; j < M; j++) {
        size_t p = 0;
        for (size_t i = 1; i < N; i++)
            if (S[i + i * N] > S[p + p * N])
                p = i;
        size_t got = find_point(X, N, D, Z + j * D);
        assert_true(got < N);
        /* the chosen point maximises the Schur diagonal (to rounding) */
        assert_true(S[got + got * N] >= S[p + p * N] * (1.0 - 1e-9));
        assert_int_equal(got, p); /* random data: no near-ties */
        double piv = S[p + p * N];
        double col[N];
        for (size_t i = 0; i < N; i++)
            col[i] = S[i + p * N];
        for (size_t b = 0; b < N; b++)
            for (size_t a = 0; a < N; a++)
                S[a + b * N] -= col[a] * col[b] / piv;
    }
    /* deterministic */
    double Z2[M * D];
    size_t m2 = 0;
    assert_int_equal(gp_inducing_select(GP_INDUCING_GREEDY, k, X, N, D, M, 99, Z2, &m2, &err),
                     GP_OK);
    assert_int_equal(m2, m);
    assert_memory_equal(Z, Z2, sizeof Z);
    /* M above n: stops at n (the residuals of all points are then zero) */
    double Zall[N * D];
    assert_int_equal(gp_inducing_select(GP_INDUCING_GREEDY, k, X, 5, D, 8, 0, Zall, &m, &err),
                     GP_OK);
    assert_int_equal(m, 5);
    assert_distinct_columns(Zall, m, D);
    gp_kernel_free(k);
}

static void test_greedy_duplicates(void **state)
{
    (void)state;
    enum { ND = 9, REP = 5, N = ND * REP };
    double X[2 * N], Z[2 * 20];
    grid_with_duplicates(ND, REP, 0.7, 3, X);
    gp_kernel *k = rbf(2, 0);
    size_t m = 0;
    gp_error err;
    assert_int_equal(gp_inducing_select(GP_INDUCING_GREEDY, k, X, N, 2, 20, 0, Z, &m, &err),
                     GP_OK);
    assert_int_equal(m, ND);
    assert_distinct_columns(Z, m, 2);
    for (size_t j = 0; j < m; j++)
        assert_true(find_point(X, N, 2, Z + 2 * j) < N);
    assert_int_equal(gp_inducing_select(GP_INDUCING_GREEDY, k, X, N, 2, 4, 0, Z, &m, &err),
                     GP_OK);
    assert_int_equal(m, 4);
    assert_distinct_columns(Z, m, 2);
    /* every point the same: one comes back */
    double Y[2 * 6] = {1, 2, 1, 2, 1, 2, 1, 2, 1, 2, 1, 2};
    assert_int_equal(gp_inducing_select(GP_INDUCING_GREEDY, k, Y, 6, 2, 3, 0, Z, &m, &err),
                     GP_OK);
    assert_int_equal(m, 1);
    assert_true(Z[0] == 1.0 && Z[1] == 2.0);
    gp_kernel_free(k);
}

/* Kuu = k(Z, Z) of every method's picks factors with no jitter (rbf,
 * lengthscale 1, distinct points 3 apart, many duplicates). */
static void test_kuu_positive_definite(void **state)
{
    (void)state;
    enum { ND = 25, REP = 8, N = ND * REP, MMAX = 40 };
    double X[2 * N], Z[2 * MMAX], K[MMAX * MMAX];
    grid_with_duplicates(ND, REP, 3.0, 5, X);
    gp_kernel *k = rbf(2, 0);
    const size_t Ms[] = {5, 12, 25, 40};
    for (int s = 0; s < 3; s++) {
        for (size_t t = 0; t < sizeof Ms / sizeof Ms[0]; t++) {
            size_t m = 0;
            gp_error err;
            assert_int_equal(gp_inducing_select((gp_inducing_selection)s, k, X, N, 2, Ms[t], 7,
                                                Z, &m, &err),
                             GP_OK);
            assert_int_equal(m, Ms[t] < ND ? Ms[t] : ND);
            assert_distinct_columns(Z, m, 2);
            gp_kernel_gram(k, Z, m, K, m);
            gp_chol_info info;
            assert_int_equal(gp_cholesky_jitter(K, m, m, &info, &err), GP_OK);
            assert_true(info.jitter == 0.0);
        }
    }
    gp_kernel_free(k);
}

static void test_random(void **state)
{
    (void)state;
    enum { N = 500, D = 3, M = 30 };
    double X[N * D], Z1[M * D], Z2[M * D], Z3[M * D];
    gp_rng rng;
    gp_rng_seed(&rng, 21);
    for (size_t i = 0; i < N * D; i++)
        X[i] = gp_rng_normal(&rng);
    for (size_t i = 0; i < N; i += 3) /* duplicates: every third point repeats the first */
        memcpy(X + i * D, X, D * sizeof *X);
    size_t m1, m2, m3;
    gp_error err;
    assert_int_equal(gp_inducing_select(GP_INDUCING_RANDOM, NULL, X, N, D, M, 1, Z1, &m1, &err),
                     GP_OK);
    assert_int_equal(gp_inducing_select(GP_INDUCING_RANDOM, NULL, X, N, D, M, 1, Z2, &m2, &err),
                     GP_OK);
    assert_int_equal(gp_inducing_select(GP_INDUCING_RANDOM, NULL, X, N, D, M, 2, Z3, &m3, &err),
                     GP_OK);
    assert_int_equal(m1, M);
    assert_int_equal(m3, M);
    assert_memory_equal(Z1, Z2, sizeof Z1);
    assert_true(memcmp(Z1, Z3, sizeof Z1) != 0);
    assert_distinct_columns(Z1, M, D);
    assert_distinct_columns(Z3, M, D);
    size_t common = 0;
    for (size_t j = 0; j < M; j++) {
        assert_true(find_point(X, N, D, Z1 + j * D) < N);
        common += find_point(Z3, M, D, Z1 + j * D) < M;
    }
    assert_true(common < M / 2); /* ~M^2/N expected in common */

    /* fewer distinct values than M: all of them, once each */
    enum { ND = 7, REP = 6 };
    double Y[2 * ND * REP], W[2 * 20];
    grid_with_duplicates(ND, REP, 1.0, 4, Y);
    assert_int_equal(gp_inducing_select(GP_INDUCING_RANDOM, NULL, Y, ND * REP, 2, 20, 3, W, &m1,
                                        &err),
                     GP_OK);
    assert_int_equal(m1, ND);
    assert_distinct_columns(W, m1, 2);
    for (size_t i = 0; i < ND * REP; i++)
        assert_true(find_point(W, m1, 2, Y + 2 * i) < m1);

    /* uniform over distinct values, not over rows: a value repeated on most
     * rows is picked about as often as any other */
    enum { NB = 100, TRIALS = 2000 };
    double B[NB], one;
    for (size_t i = 0; i < NB; i++)
        B[i] = i < 90 ? 0.0 : (double)i; /* 11 distinct values, 0 on 90 rows */
    size_t zero = 0;
    for (uint64_t s = 0; s < TRIALS; s++) {
        assert_int_equal(gp_inducing_select(GP_INDUCING_RANDOM, NULL, B, NB, 1, 1, s, &one, &m1,
                                            &err),
                         GP_OK);
        zero += one == 0.0;
    }
    /* expected TRIALS / 11 = 182, sd ~13 */
    assert_true(zero > 120 && zero < 250);
}

/* Nearest centre (lowest index on ties) and within-cluster sum of squares. */
static double wcss(const double *X, size_t n, size_t d, const double *C, size_t m,
                   size_t *assign)
{
    double total = 0.0;
    for (size_t i = 0; i < n; i++) {
        size_t best = 0;
        double bd = INFINITY;
        for (size_t c = 0; c < m; c++) {
            double s = 0.0;
            for (size_t q = 0; q < d; q++) {
                double t = X[i * d + q] - C[c * d + q];
                s += t * t;
            }
            if (s < bd) {
                bd = s;
                best = c;
            }
        }
        if (assign)
            assign[i] = best;
        total += bd;
    }
    return total;
}

static void blobs(size_t n, size_t d, size_t nb, uint64_t seed, double *X)
{
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    double centre[64];
    assert_true(nb * d <= 64);
    for (size_t i = 0; i < nb * d; i++)
        centre[i] = 6.0 * gp_rng_normal(&rng);
    for (size_t i = 0; i < n; i++) {
        size_t b = (size_t)gp_rng_below(&rng, nb);
        for (size_t q = 0; q < d; q++)
            X[i * d + q] = centre[b * d + q] + gp_rng_normal(&rng);
    }
}

static void test_kmeans_fixed_point(void **state)
{
    (void)state;
    enum { N = 1500, D = 2, M = 8 };
    double *X = malloc(N * D * sizeof *X), Z[M * D], R[M * D];
    size_t *assign = malloc(N * sizeof *assign);
    blobs(N, D, 5, 31, X);
    for (size_t i = 0; i < N; i += 4) /* duplicates */
        memcpy(X + i * D, X + (i / 2) * D, D * sizeof *X);
    for (uint64_t seed = 1; seed <= 5; seed++) {
        size_t m = 0, mr = 0;
        gp_error err;
        assert_int_equal(gp_inducing_select(GP_INDUCING_KMEANS, NULL, X, N, D, M, seed, Z, &m,
                                            &err),
                         GP_OK);
        assert_int_equal(m, M);
        double f = wcss(X, N, D, Z, M, assign);
        /* each centre is the mean of its cluster */
        for (size_t c = 0; c < M; c++) {
            double mean[D] = {0.0, 0.0};
            size_t cnt = 0;
            for (size_t i = 0; i < N; i++)
                if (assign[i] == c) {
                    cnt++;
                    for (size_t q = 0; q < D; q++)
                        mean[q] += X[i * D + q];
                }
            assert_true(cnt > 0);
            for (size_t q = 0; q < D; q++)
                assert_true(fabs(mean[q] / (double)cnt - Z[c * D + q]) <=
                            1e-12 * (1.0 + fabs(Z[c * D + q])));
        }
        /* better than M data points as centres (what the seeding starts from) */
        assert_int_equal(gp_inducing_select(GP_INDUCING_RANDOM, NULL, X, N, D, M, seed, R, &mr,
                                            &err),
                         GP_OK);
        assert_true(f < wcss(X, N, D, R, M, NULL));
        /* reproducible */
        double Z2[M * D];
        assert_int_equal(gp_inducing_select(GP_INDUCING_KMEANS, NULL, X, N, D, M, seed, Z2, &m,
                                            &err),
                         GP_OK);
        assert_memory_equal(Z, Z2, sizeof Z);
    }
    free(X);
    free(assign);
}

static void test_kmeans_duplicates_cap(void **state)
{
    (void)state;
    enum { ND = 7, REP = 9, N = ND * REP };
    double X[2 * N], Z[2 * 12];
    grid_with_duplicates(ND, REP, 2.0, 8, X);
    size_t m = 0;
    gp_error err;
    assert_int_equal(gp_inducing_select(GP_INDUCING_KMEANS, NULL, X, N, 2, 12, 5, Z, &m, &err),
                     GP_OK);
    assert_int_equal(m, ND);
    /* one centre on each distinct value */
    assert_distinct_columns(Z, m, 2);
    for (size_t j = 0; j < m; j++)
        assert_true(find_point(X, N, 2, Z + 2 * j) < N);
}

/* An emptied cluster: two far outliers and M larger than the clumps. */
static void test_kmeans_reseed(void **state)
{
    (void)state;
    enum { N = 400, D = 1, M = 6 };
    double X[N], Z[M];
    gp_rng rng;
    gp_rng_seed(&rng, 2);
    for (size_t i = 0; i < N; i++)
        X[i] = (i % 2 ? 0.0 : 10.0) + 1e-3 * gp_rng_normal(&rng);
    X[7] = 1000.0;
    X[9] = -1000.0;
    for (uint64_t seed = 0; seed < 10; seed++) {
        size_t m = 0;
        gp_error err;
        assert_int_equal(gp_inducing_select(GP_INDUCING_KMEANS, NULL, X, N, D, M, seed, Z, &m,
                                            &err),
                         GP_OK);
        assert_int_equal(m, M);
        /* the outliers have their own centres */
        assert_true(find_point(Z, m, 1, &X[7]) < m);
        assert_true(find_point(Z, m, 1, &X[9]) < m);
        size_t assign[N], cnt[M] = {0};
        wcss(X, N, D, Z, M, assign);
        for (size_t i = 0; i < N; i++)
            cnt[assign[i]]++;
        for (size_t c = 0; c < M; c++)
            assert_true(cnt[c] > 0);
    }
}

static void test_thread_independence(void **state)
{
    (void)state;
    enum { N = 6000, D = 4, M = 40 };
    double *X = malloc(N * D * sizeof *X), *Z[3];
    blobs(N, D, 10, 41, X);
    gp_kernel *k = rbf(D, 0);
    for (int s = 0; s < 3; s++) {
        const int threads[] = {1, 2, 4};
        for (int t = 0; t < 3; t++) {
            gp_parallel_set_threads(threads[t]);
            Z[t] = malloc(M * D * sizeof *Z[t]);
            size_t m;
            gp_error err;
            assert_int_equal(gp_inducing_select((gp_inducing_selection)s, k, X, N, D, M, 3, Z[t],
                                                &m, &err),
                             GP_OK);
            assert_int_equal(m, M);
        }
        assert_memory_equal(Z[0], Z[1], M * D * sizeof *Z[0]);
        assert_memory_equal(Z[0], Z[2], M * D * sizeof *Z[0]);
        for (int t = 0; t < 3; t++)
            free(Z[t]);
    }
    gp_parallel_set_threads(0);
    gp_kernel_free(k);
    free(X);
}

/* The sizes random and kmeans are meant for (n = 40000). */
static void test_large(void **state)
{
    (void)state;
    enum { N = 40000, D = 8 };
    double *X = malloc((size_t)N * D * sizeof *X), *Z = malloc(1024 * D * sizeof *Z);
    blobs(N, D, 6, 51, X);
    for (size_t i = 0; i < N; i += 2)
        memcpy(X + i * D, X + (i / 4) * D, D * sizeof *X);
    size_t m;
    gp_error err;
    assert_int_equal(gp_inducing_select(GP_INDUCING_RANDOM, NULL, X, N, D, 1024, 9, Z, &m, &err),
                     GP_OK);
    assert_int_equal(m, 1024);
    assert_int_equal(gp_inducing_select(GP_INDUCING_KMEANS, NULL, X, N, D, 512, 9, Z, &m, &err),
                     GP_OK);
    assert_int_equal(m, 512);
    for (size_t i = 0; i < 512 * D; i++)
        assert_true(isfinite(Z[i]));
    free(X);
    free(Z);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_names),
        cmocka_unit_test(test_validation),
        cmocka_unit_test(test_greedy_reference),
        cmocka_unit_test(test_greedy_duplicates),
        cmocka_unit_test(test_kuu_positive_definite),
        cmocka_unit_test(test_random),
        cmocka_unit_test(test_kmeans_fixed_point),
        cmocka_unit_test(test_kmeans_duplicates_cap),
        cmocka_unit_test(test_kmeans_reseed),
        cmocka_unit_test(test_thread_independence),
        cmocka_unit_test(test_large),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
