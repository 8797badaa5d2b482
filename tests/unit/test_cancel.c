/* Cancellation inside one evaluation (issue 13): the blocked Cholesky factor
 * and inverse against LAPACK's, and the token polled by them, by the kernel
 * Gram matrix and gradient contraction, by L-BFGS and by every method's fit.
 *
 * The token's test hook (gp_cancel.checks_left) stops a computation at its
 * k-th poll, so every block boundary is exercised deterministically; one test
 * sets the flag from another thread as the server does. Nothing here looks at
 * the clock: how soon a cancellation takes effect is measured by the
 * integration area "cancel" and by bench_exact. */
#include <cblas.h>
#include <lapacke.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/base/cancel.h"
#include "core/base/parallel.h"
#include "core/kernel/kernel.h"
#include "core/linalg/blocked.h"
#include "core/linalg/linalg.h"
#include "core/methods/registry.h"
#include "core/model/model.h"
#include "core/optim/optim.h"
#include "tests/unit/testutil.h"

/* ---- matrices ---- */

/* A_ij = exp(-(x_i - x_j)^2 / 2) + [i = j] for seeded x_i in [0, 10): SPD
 * (a Gram matrix plus I), condition number below n + 1, and O(n^2) to build
 * so that large orders stay cheap. Full. */
static double *random_spd(size_t n, unsigned seed)
{
    double *x = malloc(n * sizeof *x), *A = malloc(n * n * sizeof *A);
    uint64_t s = 0x9E3779B97F4A7C15ull * (seed + 1);
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[i] = 10.0 * (double)(s >> 11) / 9007199254740992.0;
    }
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) {
            double d = x[i] - x[j];
            A[j * n + i] = exp(-0.5 * d * d) + (i == j ? 1.0 : 0.0);
        }
    free(x);
    return A;
}

/* max |a - b| / max |b| over the lower triangles. */
static double lower_rel_diff(const double *a, const double *b, size_t n)
{
    double d = 0.0, m = 0.0;
    for (size_t j = 0; j < n; j++)
        for (size_t i = j; i < n; i++) {
            d = fmax(d, fabs(a[j * n + i] - b[j * n + i]));
            m = fmax(m, fabs(b[j * n + i]));
        }
    return m > 0.0 ? d / m : d;
}

static double *copy_of(const double *A, size_t count)
{
    double *C = malloc(count * sizeof *C);
    memcpy(C, A, count * sizeof *C);
    return C;
}

/* The factor and the inverse of A (n x n) by LAPACK and by the blocked code
 * agree to rounding, and the strict upper triangle is left alone. */
static void check_against_lapack(size_t n, unsigned seed)
{
    double *A = random_spd(n, seed), *ref = copy_of(A, n * n), *got = copy_of(A, n * n);
    gp_error err;
    assert_int_equal(LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)n, ref, (lapack_int)n), 0);
    assert_int_equal(gp_potrf_blocked(got, n, n, NULL, &err), GP_OK);
    tu_assert_within(lower_rel_diff(got, ref, n), 0.0, 1e-12, "factor of order %zu", n);
    assert_int_equal(LAPACKE_dpotri(LAPACK_COL_MAJOR, 'L', (lapack_int)n, ref, (lapack_int)n), 0);
    assert_int_equal(gp_potri_blocked(got, n, n, NULL, &err), GP_OK);
    tu_assert_within(lower_rel_diff(got, ref, n), 0.0, 1e-12, "inverse of order %zu", n);
    for (size_t j = 1; j < n; j++)
        for (size_t i = 0; i < j; i++)
            if (got[j * n + i] != A[j * n + i])
                fail_msg("order %zu: upper element (%zu, %zu) changed", n, i, j);
    free(A);
    free(ref);
    free(got);
}

/* Orders around the block (256), the split points and the gemm depth (1024),
 * none a multiple of anything. */
static void test_blocked_matches_lapack(void **state)
{
    (void)state;
    static const size_t orders[] = {1, 2, 7, 255, 256, 257, 300, 513, 777, 1031, 2100};
    for (size_t i = 0; i < sizeof orders / sizeof *orders; i++)
        check_against_lapack(orders[i], (unsigned)i);
}

/* An order whose symmetric updates cut their rows into more than one gemm
 * call (2440 - 256 rows below a panel of the factor's, 2560 - 256 in the
 * inverse's, beyond the tile of 2048) and their inner terms into three. */
static void test_blocked_matches_lapack_beyond_one_tile(void **state)
{
    (void)state;
    check_against_lapack(5000, 99);
}

static void test_blocked_not_positive_definite(void **state)
{
    (void)state;
    size_t n = 600;
    double *A = random_spd(n, 5);
    A[400 * n + 400] = -1.0; /* leading minor 401 is not positive definite */
    gp_error err;
    assert_int_equal(gp_potrf_blocked(A, n, n, NULL, &err), GP_ENOTPD);
    assert_int_equal(err.code, GP_ENOTPD);
    free(A);
}

/* ---- the token at every poll of the factor and the inverse ---- */

typedef int (*blocked_fn)(double *A, size_t n, size_t lda, const gp_cancel *c, gp_error *err);

/* Polls one call makes when nothing cancels. */
static long polls_of(blocked_fn fn, const double *A0, size_t n)
{
    double *A = copy_of(A0, n * n);
    atomic_long left = LONG_MAX / 2;
    gp_cancel c = {NULL, &left};
    assert_int_equal(fn(A, n, n, &c, NULL), GP_OK);
    free(A);
    return LONG_MAX / 2 - atomic_load(&left);
}

/* The panels of every product are parallel tasks fixed by the sizes: with
 * OpenBLAS single-threaded, as the daemon runs it, 1, 2 and 3 compute threads
 * give the same bits and poll the token as often. Order 2100 splits at 1280:
 * the products have 4-5 panels of up to 256, those of the halves narrower
 * ones (a quarter of their count each). */
static void test_blocked_same_bits_any_thread_count(void **state)
{
    (void)state;
    size_t n = 2100;
    int blas = openblas_get_num_threads();
    openblas_set_num_threads(1);
    double *A = random_spd(n, 21), *ref = NULL, *got = malloc(n * n * sizeof *got);
    long ref_polls[2] = {0, 0};
    for (int threads = 1; threads <= 3; threads++) {
        gp_parallel_set_threads(threads);
        memcpy(got, A, n * n * sizeof *got);
        assert_int_equal(gp_potrf_blocked(got, n, n, NULL, NULL), GP_OK);
        long polls[2] = {polls_of(gp_potrf_blocked, A, n), polls_of(gp_potri_blocked, got, n)};
        assert_int_equal(gp_potri_blocked(got, n, n, NULL, NULL), GP_OK);
        if (ref == NULL) {
            ref = copy_of(got, n * n);
            memcpy(ref_polls, polls, sizeof polls);
            continue;
        }
        if (memcmp(got, ref, n * n * sizeof *got) != 0)
            fail_msg("%d threads: the factor and inverse differ from 1 thread's", threads);
        assert_int_equal(polls[0], ref_polls[0]);
        assert_int_equal(polls[1], ref_polls[1]);
    }
    gp_parallel_set_threads(0);
    openblas_set_num_threads(blas);
    free(A);
    free(ref);
    free(got);
}

/* Cancelling at poll k (every k below the count) gives GP_ECANCELLED; a
 * budget of exactly the count finishes, bit-identical to no token. */
static void check_every_poll(blocked_fn fn, const double *A0, size_t n, const char *what)
{
    long polls = polls_of(fn, A0, n);
    assert_true(polls > 8); /* several blocks, not one LAPACK call */
    double *ref = copy_of(A0, n * n);
    assert_int_equal(fn(ref, n, n, NULL, NULL), GP_OK);
    double *A = malloc(n * n * sizeof *A);
    for (long k = 0; k <= polls; k++) {
        memcpy(A, A0, n * n * sizeof *A);
        atomic_long left = k;
        gp_cancel c = {NULL, &left};
        gp_error err;
        int rc = fn(A, n, n, &c, &err);
        if (k < polls && (rc != GP_ECANCELLED || err.code != GP_ECANCELLED))
            fail_msg("%s: cancel at poll %ld of %ld gave %s", what, k, polls, gp_status_name(rc));
        if (k == polls && (rc != GP_OK || memcmp(A, ref, n * n * sizeof *A) != 0))
            fail_msg("%s: a budget of all %ld polls changed the result (%s)", what, polls,
                     gp_status_name(rc));
    }
    free(A);
    free(ref);
}

static void test_blocked_cancel_at_every_poll(void **state)
{
    (void)state;
    size_t n = 1300;
    double *A = random_spd(n, 11), *L = copy_of(A, n * n);
    check_every_poll(gp_potrf_blocked, A, n, "factor");
    assert_int_equal(gp_potrf_blocked(L, n, n, NULL, NULL), GP_OK);
    check_every_poll(gp_potri_blocked, L, n, "inverse");
    free(A);
    free(L);
}

/* The server's way: the flag set from another thread while factorisations
 * run; once it is set every call stops at its first poll. */
typedef struct setter {
    atomic_int *flag;
    atomic_int *started;
} setter;

static void *set_flag_soon(void *arg)
{
    setter *s = arg;
    while (!atomic_load(s->started))
        ;
    atomic_store(s->flag, 1);
    return NULL;
}

static void test_flag_from_another_thread(void **state)
{
    (void)state;
    size_t n = 900;
    double *A0 = random_spd(n, 3), *A = malloc(n * n * sizeof *A);
    atomic_int flag = 0, started = 0;
    gp_cancel c = {&flag, NULL};
    setter s = {&flag, &started};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, set_flag_soon, &s), 0);
    int rc = GP_OK;
    for (int i = 0; i < 100000 && rc == GP_OK; i++) {
        memcpy(A, A0, n * n * sizeof *A);
        atomic_store(&started, 1);
        rc = gp_potrf_blocked(A, n, n, &c, NULL);
    }
    pthread_join(t, NULL);
    assert_int_equal(rc, GP_ECANCELLED);
    memcpy(A, A0, n * n * sizeof *A);
    assert_int_equal(gp_cholesky_jitter_cancellable(A, n, n, &c, NULL, NULL), GP_ECANCELLED);
    free(A0);
    free(A);
}

/* ---- kernel matrices ---- */

static gp_kernel *rbf_1d(void)
{
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, 1, 0, NULL, 0, &err), GP_OK);
    return k;
}

static long gram_polls(const gp_kernel *k, const double *X, size_t n, double *K)
{
    atomic_long left = LONG_MAX / 2;
    gp_cancel c = {NULL, &left};
    assert_int_equal(gp_kernel_gram_cancellable(k, X, n, K, n, &c), GP_OK);
    return LONG_MAX / 2 - atomic_load(&left);
}

/* The Gram matrix stops at any poll, polls as often with 1 or 2 threads, and
 * a token that never fires changes no bit. */
static void test_gram_cancel(void **state)
{
    (void)state;
    size_t n = 700;
    double *X = malloc(n * sizeof *X), *K = malloc(n * n * sizeof *K),
           *ref = malloc(n * n * sizeof *ref);
    for (size_t i = 0; i < n; i++)
        X[i] = 0.01 * (double)i;
    gp_kernel *k = rbf_1d();
    gp_kernel_gram(k, X, n, ref, n);
    gp_parallel_set_threads(1);
    long polls1 = gram_polls(k, X, n, K);
    gp_parallel_set_threads(2);
    long polls2 = gram_polls(k, X, n, K);
    assert_int_equal(polls1, polls2);
    assert_true(polls1 >= (long)n); /* one a column at least */
    assert_memory_equal(K, ref, n * n * sizeof *K);
    static const long at[] = {0, 1, 5, 350, 699, 700};
    for (size_t i = 0; i < sizeof at / sizeof *at; i++) {
        atomic_long left = at[i];
        gp_cancel c = {NULL, &left};
        assert_int_equal(gp_kernel_gram_cancellable(k, X, n, K, n, &c), GP_ECANCELLED);
    }
    atomic_int flag = 1;
    gp_cancel set = {&flag, NULL};
    assert_int_equal(gp_kernel_gram_cancellable(k, X, n, K, n, &set), GP_ECANCELLED);
    double g[2], gref[2];
    gp_kernel_gram_grad_contract(k, X, n, ref, n, gref);
    assert_int_equal(gp_kernel_gram_grad_contract_cancellable(k, X, n, ref, n, g, &set),
                     GP_ECANCELLED);
    flag = 0;
    assert_int_equal(gp_kernel_gram_grad_contract_cancellable(k, X, n, ref, n, g, &set), GP_OK);
    assert_memory_equal(g, gref, sizeof g);
    gp_parallel_set_threads(0);
    gp_kernel_free(k);
    free(X);
    free(K);
    free(ref);
}

/* ---- L-BFGS ---- */

/* A quadratic that sets the flag at its 4th call, as a long evaluation of
 * the exact LML sees the server's flag and returns +inf. */
typedef struct quad_ctx {
    int calls;
    atomic_int *flag;
} quad_ctx;

static double quad(void *ctx, const double *x, double *g)
{
    quad_ctx *q = ctx;
    if (++q->calls == 4) {
        atomic_store(q->flag, 1);
        return INFINITY;
    }
    g[0] = 2.0 * (x[0] - 3.0);
    g[1] = 20.0 * (x[1] + 1.0);
    return (x[0] - 3.0) * (x[0] - 3.0) + 10.0 * (x[1] + 1.0) * (x[1] + 1.0);
}

static void test_lbfgs_stops_inside_a_search(void **state)
{
    (void)state;
    atomic_int flag = 0;
    gp_cancel c = {&flag, NULL};
    quad_ctx q = {0, &flag};
    gp_lbfgs_options o = {0};
    o.cancel = &c;
    double x[2] = {0.0, 0.0};
    gp_optim_result res;
    gp_error err;
    assert_int_equal(gp_lbfgs_minimize(quad, &q, x, 2, &o, NULL, NULL, &res, &err),
                     GP_ECANCELLED);
    assert_int_equal(q.calls, 4); /* no evaluation after the one that saw the flag */
    assert_string_equal(res.reason, "cancelled");
    assert_true(isfinite(x[0]) && isfinite(x[1]));
    assert_true(res.f < 37.0); /* the best point so far, better than the start */
}

/* ---- whole fits ---- */

static void data_1d(double *X, double *y, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        X[i] = 5.0 * (double)i / (double)n;
        y[i] = sin(2.0 * X[i]) + 0.05 * cos(17.0 * (double)i);
    }
}

typedef struct progress_seen {
    int calls;
} progress_seen;

static int count_progress(void *ctx, int iteration, int max_iterations, double objective)
{
    (void)iteration, (void)max_iterations, (void)objective;
    ((progress_seen *)ctx)->calls++;
    return 0;
}

/* An exact fit stopped at polls inside its first evaluation (the Gram
 * matrix's columns, the factor's blocks): GP_ECANCELLED before any progress
 * report; a budget that never runs out gives the same model as no token. */
static void test_exact_fit_cancelled_inside_first_evaluation(void **state)
{
    (void)state;
    size_t n = 600;
    double *X = malloc(n * sizeof *X), *y = malloc(n * sizeof *y);
    data_1d(X, y, n);
    gp_kernel *k = rbf_1d();
    const gp_method *m = gp_method_find("exact");
    static const long at[] = {0, 3, 400, 650};
    for (size_t i = 0; i < sizeof at / sizeof *at; i++) {
        progress_seen seen = {0};
        atomic_long left = at[i];
        gp_fit_request req = {.X = X, .y = y, .n = n, .d = 1, .kernel = k, .standardize = 1,
                              .seed = 1, .progress = count_progress, .progress_ctx = &seen,
                              .cancel = {NULL, &left}};
        gp_model *model = NULL;
        gp_error err;
        assert_int_equal(gp_model_fit(m, &req, &model, &err), GP_ECANCELLED);
        assert_null(model);
        assert_int_equal(seen.calls, 0);
    }
    gp_fit_request plain = {.X = X, .y = y, .n = n, .d = 1, .kernel = k, .standardize = 1,
                            .seed = 1};
    atomic_long left = LONG_MAX / 2;
    gp_fit_request polled = plain;
    polled.cancel.checks_left = &left;
    gp_model *a = NULL, *b = NULL;
    gp_error err;
    assert_int_equal(gp_model_fit(m, &plain, &a, &err), GP_OK);
    assert_int_equal(gp_model_fit(m, &polled, &b, &err), GP_OK);
    assert_true(a->noise_variance == b->noise_variance);
    assert_true(a->diag.objective == b->diag.objective);
    assert_int_equal(a->diag.evaluations, b->diag.evaluations);
    gp_model_free(a);
    gp_model_free(b);
    gp_kernel_free(k);
    free(X);
    free(y);
}

/* Every registered method: a set flag stops the fit before it reports any
 * progress, and a stop at a few later polls is GP_ECANCELLED or, when the
 * fit needed fewer polls, a fitted model - never anything else. */
static void test_every_method_sees_the_token(void **state)
{
    (void)state;
    size_t n = 80;
    double *X = malloc(n * sizeof *X), *y = malloc(n * sizeof *y);
    data_1d(X, y, n);
    gp_kernel *k = rbf_1d();
    for (size_t i = 0; i < gp_method_count(); i++) {
        const gp_method *m = gp_method_at(i);
        atomic_int flag = 1;
        progress_seen seen = {0};
        gp_fit_request req = {.X = X, .y = y, .n = n, .d = 1, .kernel = k, .standardize = 1,
                              .seed = 1, .progress = count_progress, .progress_ctx = &seen,
                              .cancel = {&flag, NULL}};
        gp_model *model = NULL;
        gp_error err;
        int rc = gp_model_fit(m, &req, &model, &err);
        if (rc != GP_ECANCELLED || model != NULL)
            fail_msg("%s: a set flag gave %s", m->name, gp_status_name(rc));
        static const long at[] = {1, 7, 40};
        for (size_t j = 0; j < sizeof at / sizeof *at; j++) {
            atomic_long left = at[j];
            req.cancel = (gp_cancel){NULL, &left};
            rc = gp_model_fit(m, &req, &model, &err);
            if (rc != GP_ECANCELLED && rc != GP_OK)
                fail_msg("%s: a stop at poll %ld gave %s: %s", m->name, at[j],
                         gp_status_name(rc), err.message);
            if (rc == GP_OK)
                gp_model_free(model);
            model = NULL;
        }
    }
    gp_kernel_free(k);
    free(X);
    free(y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_blocked_matches_lapack),
        cmocka_unit_test(test_blocked_matches_lapack_beyond_one_tile),
        cmocka_unit_test(test_blocked_not_positive_definite),
        cmocka_unit_test(test_blocked_same_bits_any_thread_count),
        cmocka_unit_test(test_blocked_cancel_at_every_poll),
        cmocka_unit_test(test_flag_from_another_thread),
        cmocka_unit_test(test_gram_cancel),
        cmocka_unit_test(test_lbfgs_stops_inside_a_search),
        cmocka_unit_test(test_exact_fit_cancelled_inside_first_evaluation),
        cmocka_unit_test(test_every_method_sees_the_token),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
