/* ssgp over rows read in chunks (core/features/rff_rows.h, the fit in
 * core/methods/ssgp/fit.c): the streamed LML and gradient against the
 * in-memory gp_rff_lml for chunks 7, 100 and N and across shards, its
 * gradient against central differences, two reductions per evaluation of
 * the sizes the design gives, reads of at most one chunk and a heap that
 * does not grow with N; a whole fit over rows (fixed frequencies, auto,
 * learned frequencies) against the fit in memory, and observe after it;
 * p = 1, 2, 4 shards (threads of rows_fixture.h) agreeing with each other
 * and bit-identical on every rank and run to run; a reader's failure, a
 * failed reduction and a cancel ending every rank with the same error; what
 * a fit over rows refuses. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/base/rng.h"
#include "core/base/state.h"
#include "core/features/rff_rows.h"
#include "core/methods/registry.h"
#include "core/model/method.h"
#include "core/model/rows_sync.h"
#include "tests/unit/rows_fixture.h"
#include "tests/unit/testutil.h"
#include "tests/unit/method_testutil.h"
#include "tests/unit/stream_fixture.h"

#define N 401
#define D 2
#define NR 15

static double X_all[N * D], y_all[N], omega0[NR * D];
static const size_t dims[D] = {0, 1};

/* Inputs uniform on [-2, 2]^2 and a target with a few wiggles over them
 * (well-determined hyperparameters), and frequencies N(0, 1). */
static void make_data(void)
{
    gp_rng g;
    gp_rng_seed(&g, 38);
    for (size_t i = 0; i < N * D; i++)
        X_all[i] = 4.0 * gp_rng_uniform(&g) - 2.0;
    for (size_t i = 0; i < N; i++)
        y_all[i] = sin(2.5 * X_all[i]) * cos(1.5 * X_all[N + i]) + 0.1 * gp_rng_normal(&g);
    for (size_t i = 0; i < NR * D; i++)
        omega0[i] = gp_rng_normal(&g);
}

static gp_kernel *kernel_rbf(void)
{
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, D, 1, NULL, 0, &err), GP_OK);
    return k;
}

/* The problem's hyperparameters: x = log a2, log l (D), log s, omega (R D). */
#define NX (1 + D + 1 + NR * D)

static void problem_at(gp_rff_problem *p, const double *x)
{
    *p = (gp_rff_problem){.X = X_all, .y = y_all, .n = N, .d = D, .R = NR, .omega = x + 2 + D,
                          .log_ls = x + 1, .log_amplitude2 = x[0], .log_noise = x[1 + D]};
}

static void start_point(double *x)
{
    x[0] = log(0.8);
    x[1] = log(0.6);
    x[2] = log(1.3);
    x[1 + D] = log(0.05);
    memcpy(x + 2 + D, omega0, sizeof omega0);
}

/* ---- the LML: streamed against memory ---- */

typedef struct eval_out {
    double f, g[NX];
    size_t sums_first, sums_second, summed_second;
    int rc;
} eval_out;

typedef struct eval_job {
    const double *x;
    eval_out out[4];
} eval_job;

static gp_rff_grad grad_into(double *g)
{
    return (gp_rff_grad){.omega = g + 2 + D, .log_ls = g + 1, .log_amplitude2 = g,
                         .log_noise = g + 1 + D};
}

/* Two evaluations on each rank (identity standardisation), counting the
 * reductions of each. */
static int eval_rank(const gp_rows *rows, size_t rank, void *arg)
{
    eval_job *j = arg;
    eval_out *o = &j->out[rank];
    gp_model *units = sr_identity_units(D);
    gp_rows_sync sync;
    gp_error err;
    assert_int_equal(gp_rows_sync_init(&sync, rows, NULL, &err), GP_OK);
    gp_rff_rows s = {rows, units, dims, D, &sync, NULL};
    gp_rff_problem p;
    problem_at(&p, j->x);
    gp_rff_grad g = grad_into(o->g);
    o->rc = gp_rff_rows_lml(&s, &p, &o->f, &g, &err);
    o->sums_first = sync.sums;
    size_t before = sync.summed;
    if (o->rc == GP_OK)
        o->rc = gp_rff_rows_lml(&s, &p, &o->f, &g, &err);
    o->sums_second = sync.sums - o->sums_first;
    o->summed_second = sync.summed - before;
    gp_rff_rows_release(&s);
    gp_rows_sync_free(&sync);
    gp_model_free(units);
    return o->rc;
}

static void test_lml_matches_memory(void **state)
{
    (void)state;
    make_data();
    double x[NX], g[NX], f;
    start_point(x);
    gp_rff_problem p;
    problem_at(&p, x);
    gp_rff_work *w = NULL;
    assert_int_equal(gp_rff_work_new(N, D, NR, &w, NULL), GP_OK);
    gp_rff_grad grad = grad_into(g);
    assert_int_equal(gp_rff_lml(&p, w, &f, &grad, NULL), GP_OK);
    gp_rff_work_free(w);
    const size_t chunks[] = {7, 100, N}, ranks[] = {1, 2, 4};
    for (size_t c = 0; c < 3; c++)
        for (size_t r = 0; r < 3; r++) {
            eval_job j = {.x = x};
            assert_int_equal(rf_run_sharded(ranks[r], X_all, y_all, N, D, chunks[c], eval_rank,
                                            &j, NULL),
                             GP_OK);
            for (size_t q = 0; q < ranks[r]; q++) /* every rank the same bits */
                assert_memory_equal(&j.out[q].f, &j.out[0].f,
                                    sizeof j.out[0].f + sizeof j.out[0].g);
            const eval_out *o = &j.out[0];
            tu_assert_close(o->f, f, 1e-12, 0.0, "LML chunk %zu ranks %zu", chunks[c], ranks[r]);
            for (size_t i = 0; i < NX; i++)
                tu_assert_close(o->g[i], g[i], 1e-12, 1e-12 * fabs(f),
                                "gradient[%zu] chunk %zu ranks %zu", i, chunks[c], ranks[r]);
            /* the first evaluation agrees on its buffers (one sum of the
             * slots), then two reductions: R (2R + 1) + 2R + 1 doubles, then
             * 2 + R d, each with the slots */
            assert_int_equal(o->sums_first, 3);
            assert_int_equal(o->sums_second, 2);
            assert_int_equal(o->summed_second,
                             (NR * (2 * NR + 1) + 2 * NR + 1) + (2 + NR * D) + 2 * GP_ROWS_SYNC_SLOTS);
        }
}

/* ---- the streamed gradient against central differences ---- */

typedef struct fd_ctx {
    gp_rff_rows *s;
} fd_ctx;

static double fd_lml(void *ctx, const double *x)
{
    fd_ctx *c = ctx;
    gp_rff_problem p;
    problem_at(&p, x);
    double f;
    assert_int_equal(gp_rff_rows_lml(c->s, &p, &f, NULL, NULL), GP_OK);
    return f;
}

static void test_gradient_fd(void **state)
{
    (void)state;
    make_data();
    gp_rows rows;
    rf_source src;
    rf_rows_init(&rows, &src, X_all, y_all, N, D, 0, N, 7);
    gp_model *units = sr_identity_units(D);
    gp_rows_sync sync;
    assert_int_equal(gp_rows_sync_init(&sync, &rows, NULL, NULL), GP_OK);
    gp_rff_rows s = {&rows, units, dims, D, &sync, NULL};
    double x[NX], g[NX], f;
    start_point(x);
    gp_rff_problem p;
    problem_at(&p, x);
    gp_rff_grad grad = grad_into(g);
    assert_int_equal(gp_rff_rows_lml(&s, &p, &f, &grad, NULL), GP_OK);
    fd_ctx c = {&s};
    tu_fd_spec spec = {.step = 1e-5, .rtol = 1e-5, .atol = 1e-6, .floor = 1.0, .relative = 1};
    tu_check_gradient(fd_lml, &c, x, NX, g, spec, NULL, "streamed ssgp LML");
    gp_rff_rows_release(&s);
    gp_rows_sync_free(&sync);
    gp_model_free(units);
}

/* ---- a whole fit over rows against the fit in memory ---- */

static void test_fit_matches_memory(void **state)
{
    (void)state;
    make_data();
    gp_kernel *k = kernel_rbf();
    gp_option_value qmc[] = {{"features", NR, NULL, NULL}, {"frequencies", 0, "qmc", NULL}};
    gp_option_value automatic[] = {{"features", NR, NULL, NULL}, {"stein_iterations", 60, NULL, NULL}};
    gp_option_value learned[] = {{"features", NR, NULL, NULL}, {"frequencies", 0, "orf", NULL},
                                 {"learn_frequencies", 1, NULL, NULL},
                                 {"max_iterations", 30, NULL, NULL}};
    const gp_option_value *opts[] = {qmc, automatic, learned};
    const size_t n_opts[] = {2, 2, 4};
    for (size_t o = 0; o < 3; o++) {
        gp_fit_request mem, req;
        fit_request(&mem, X_all, y_all, N, D, k, opts[o], n_opts[o]);
        gp_model *a = fit_ok(gp_method_find("ssgp"), &mem, "in memory");
        gp_rows rows;
        rf_source src;
        rf_rows_init(&rows, &src, X_all, y_all, N, D, 0, N, N);
        sr_rows_request(&req, &rows, k, opts[o], n_opts[o]);
        gp_model *b = fit_ok(gp_method_find("ssgp"), &req, "over rows");
        assert_string_equal(find_info(b, "frequencies")->string, find_info(a, "frequencies")->string);
        tu_assert_close(find_info(b, "spread")->number, find_info(a, "spread")->number, 1e-14,
                        0.0, "spread");
        sr_assert_models_close(a, b, 1e-8, "rows vs memory");
        /* one chunk on one process: the in-memory arithmetic on the same
         * sums (0 + x = x), so the same model bit for bit */
        sr_assert_models_equal(a, b, "rows vs memory");
        assert_int_equal((size_t)find_info(b, "streamed_rows")->number, N);
        sr_assert_round_trip(b);
        /* observe after the fit: the same model as in memory */
        double Xn[3 * D] = {0.1, -0.4, 1.2, 0.3, 0.5, -1.1}, yn[3] = {0.2, -0.1, 0.4};
        gp_error err;
        assert_int_equal(gp_model_observe(a, Xn, yn, 3, &err), GP_OK);
        assert_int_equal(gp_model_observe(b, Xn, yn, 3, &err), GP_OK);
        sr_assert_models_close(a, b, 1e-8, "after observe");
        gp_model_free(a);
        gp_model_free(b);
    }
    gp_kernel_free(k);
}

/* ---- shards ---- */

static const gp_option_value shard_opts[] = {{"features", NR, NULL, NULL},
                                             {"frequencies", 0, "qmc", NULL},
                                             {"max_iterations", 200, NULL, NULL},
                                             {"tolerance", 1e-15, NULL, NULL}};

static void base_request(gp_fit_request *base, const gp_kernel *k)
{
    sr_rows_request(base, NULL, k, shard_opts, 4);
    base->n = N;
    base->d = D;
}

static void test_shards_agree(void **state)
{
    (void)state;
    make_data();
    gp_kernel *k = kernel_rbf();
    gp_fit_request base;
    base_request(&base, k);
    sr_check_shards(&base, "ssgp", X_all, y_all, N, D, 37, 1e-10);
    gp_kernel_free(k);
}

/* ---- failures end every rank ---- */

static void test_failures_end_every_rank(void **state)
{
    (void)state;
    make_data();
    gp_kernel *k = kernel_rbf();
    gp_fit_request base;
    base_request(&base, k);
    sr_check_failures(&base, "ssgp", X_all, y_all, N, D);
    gp_kernel_free(k);
}

/* ---- reads and memory ---- */

static void test_reads_and_heap(void **state)
{
    (void)state;
    gp_kernel *k = kernel_rbf();
    gp_option_value opts[] = {{"features", 20, NULL, NULL},
                              {"frequencies", 0, "qmc", NULL},
                              {"max_iterations", 3, NULL, NULL}};
    sr_check_reads_and_heap("ssgp", k, opts, 3);
    gp_kernel_free(k);
}

/* ---- what a fit over rows refuses ---- */

static void test_refused(void **state)
{
    (void)state;
    make_data();
    gp_kernel *k = kernel_rbf();
    gp_rows rows;
    rf_source src;
    rf_rows_init(&rows, &src, X_all, y_all, N, D, 0, N, 64);
    gp_option_value opts[] = {{"features", NR, NULL, NULL}};
    gp_fit_request req;
    sr_rows_request(&req, &rows, k, opts, 1);
    req.mean = GP_MEAN_CONSTANT;
    sr_assert_refused(gp_method_find("ssgp"), &req, GP_EUNSUPPORTED, "mean");
    /* a chunk whose buffers exceed the memory budget */
    gp_option_value big[] = {{"features", 20000, NULL, NULL}};
    rf_rows_init(&rows, &src, X_all, y_all, N, D, 0, N, (size_t)1 << 20);
    sr_rows_request(&req, &rows, k, big, 1);
    req.max_train_points = 1000;
    sr_assert_refused(gp_method_find("ssgp"), &req, GP_ETOOBIG, "options.features");
    /* a method that needs its rows in memory */
    sr_rows_request(&req, &rows, k, NULL, 0);
    sr_assert_refused(gp_method_find("exact"), &req, GP_EUNSUPPORTED, "data.dataset");
    gp_kernel_free(k);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lml_matches_memory),
        cmocka_unit_test(test_gradient_fd),
        cmocka_unit_test(test_fit_matches_memory),
        cmocka_unit_test(test_shards_agree),
        cmocka_unit_test(test_failures_end_every_rank),
        cmocka_unit_test(test_reads_and_heap),
        cmocka_unit_test(test_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
