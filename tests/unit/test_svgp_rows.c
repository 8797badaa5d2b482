/* Method "svgp" over rows read in chunks (core/methods/svgp/rows.h): the
 * minibatch plan on global row indices (every block once an epoch, the
 * sizes of batches.h); the data term and its gradients over a minibatch of
 * streamed rows against the in-memory bound on the same rows (the same code:
 * equal to 1e-12, over 1, 2 and 4 shards) and the mean's gradient against
 * central differences. The fits themselves (shards, a real data set,
 * failures and cancellation) are in test_svgp_rows_fit.c. Shards are
 * threads of rows_fixture.h. */
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
#include "core/methods/registry.h"
#include "core/methods/svgp/batches.h"
#include "core/methods/svgp/elbo.h"
#include "core/methods/svgp/stream.h"
#include "core/model/method.h"
#include "core/model/rows_sync.h"
#include "tests/unit/rows_fixture.h"
#include "tests/unit/testutil.h"

/* ---- the minibatch plan ---- */

static void assert_sizes(size_t n, size_t batch, size_t per_step, size_t block)
{
    svgp_batches b;
    svgp_batches_init(&b, n, batch, 1);
    assert_int_equal(b.per_step, per_step);
    assert_int_equal(b.block, block);
    assert_int_equal(b.n_blocks, (n + block - 1) / block);
    assert_int_equal(b.steps, (b.n_blocks + per_step - 1) / per_step);
}

static void test_batch_sizes(void **state)
{
    (void)state;
    assert_sizes(1003, 256, 4, 64);     /* the default batch: four blocks of 64 */
    assert_sizes(1003, 100, 2, 50);     /* below 193 rows: blocks of about 64 */
    assert_sizes(100000, 1000, 4, 250); /* at most 256 rows a block */
    assert_sizes(100000, 10000, 40, 250);
    assert_sizes(1003, 30, 1, 30);
    assert_sizes(1003, 1, 1, 1);
    assert_sizes(50, 256, 1, 50); /* a batch above N is N */
}

/* Every block of an epoch once, whole (aligned on block), and the rows of
 * each step as svgp_batches_rows counts them; *order receives the epoch's
 * first blocks. */
static void check_epoch(const svgp_batches *b, int epoch, size_t *order, size_t n_order)
{
    unsigned char *seen = calloc(b->n_blocks, 1);
    assert_non_null(seen);
    size_t rows = 0, at = 0;
    for (size_t s = 0; s < b->steps; s++) {
        size_t in_step = 0, lo, hi;
        for (size_t j = 0; j < svgp_batches_count(b, s); j++) {
            svgp_batches_block(b, epoch, s, j, &lo, &hi);
            assert_int_equal(lo % b->block, 0);
            assert_true(hi > lo && hi - lo <= b->block && hi <= b->n_total);
            assert_true(hi - lo == b->block || hi == b->n_total);
            assert_int_equal(seen[lo / b->block], 0);
            seen[lo / b->block] = 1;
            in_step += hi - lo;
            if (at < n_order)
                order[at++] = lo / b->block;
        }
        assert_int_equal(in_step, svgp_batches_rows(b, epoch, s));
        rows += in_step;
    }
    assert_int_equal(rows, b->n_total);
    free(seen);
}

static void test_epochs_visit_every_block(void **state)
{
    (void)state;
    svgp_batches b, again, other;
    svgp_batches_init(&b, 1003, 256, 9);
    svgp_batches_init(&again, 1003, 256, 9);
    svgp_batches_init(&other, 1003, 256, 10);
    size_t e1[16], e2[16], a1[16], o1[16];
    check_epoch(&b, 1, e1, 16);
    check_epoch(&b, 2, e2, 16);
    check_epoch(&again, 1, a1, 16);
    check_epoch(&other, 1, o1, 16);
    assert_memory_equal(e1, a1, sizeof e1); /* the seed's order */
    assert_memory_not_equal(e1, e2, sizeof e1); /* a new order each epoch */
    assert_memory_not_equal(e1, o1, sizeof e1); /* and for each seed */
    for (size_t n = 1; n < 70; n++) { /* small and odd sizes: every block still once */
        svgp_batches_init(&b, n, 7, 3);
        check_epoch(&b, 1, NULL, 0);
    }
}

/* 10^9 rows: the permutation needs no memory of N and stays a permutation. */
static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

static void test_permutation_of_many_blocks(void **state)
{
    (void)state;
    enum { K = 4000 };
    svgp_batches b;
    svgp_batches_init(&b, 1000000000, 256, 5);
    size_t *first = malloc(K * sizeof *first), lo, hi;
    assert_non_null(first);
    for (size_t i = 0; i < K; i++) {
        svgp_batches_block(&b, 1, i / b.per_step, i % b.per_step, &lo, &hi);
        assert_true(hi <= b.n_total);
        first[i] = lo;
    }
    qsort(first, K, sizeof *first, cmp_size);
    for (size_t i = 1; i < K; i++)
        assert_true(first[i - 1] < first[i]);
    /* spread over the rows, not a stretch of them: the mean offset near N/2 */
    double mean = 0.0;
    for (size_t i = 0; i < K; i++)
        mean += (double)first[i] / K;
    tu_assert_within(mean, 5e8, 5.0 * 2.9e8 / sqrt((double)K), "mean block offset");
    free(first);
}

/* ---- the sums over streamed rows against the bound in memory ---- */

#define N 700
#define D 2
#define M 6
#define CAP 256

static double X_all[N * D], y_all[N];

/* Inputs far from standardised (the stream standardises them) and a smooth
 * target with noise. */
static void make_data(void)
{
    gp_rng rng;
    gp_rng_seed(&rng, 38);
    for (size_t i = 0; i < N; i++) {
        X_all[i] = 3.0 + 2.0 * gp_rng_normal(&rng);
        X_all[N + i] = -1.0 + 0.5 * gp_rng_normal(&rng);
        double a = (X_all[i] - 3.0) / 2.0, c = (X_all[N + i] + 1.0) / 0.5;
        y_all[i] = 1.0 + 2.0 * (sin(1.3 * a) + 0.5 * cos(c)) + 0.3 * gp_rng_normal(&rng);
    }
}

/* The evaluation point: kernel, likelihood, Z, q (fixed, seeded). */
typedef struct point {
    gp_kernel *k;
    gp_lik lik;
    gp_quadrature quad;
    double Z[D * M], mq[M], Lq[M * M];
    gp_model *units; /* the working units: x_mean, x_scale, y_mean, y_scale, the mean */
} point;

static void point_init(point *pt, gp_mean_type mean)
{
    gp_error err;
    memset(pt, 0, sizeof *pt);
    assert_int_equal(gp_kernel_leaf(&pt->k, GP_KERNEL_RBF, D, 1, NULL, 0, &err), GP_OK);
    pt->k->log_variance = log(1.3);
    pt->k->log_lengthscale[0] = log(0.7);
    pt->k->log_lengthscale[1] = log(1.4);
    pt->lik = (gp_lik){GP_LIK_GAUSSIAN, 0.3};
    assert_int_equal(gp_quadrature_init(&pt->quad, 20, &err), GP_OK);
    pt->units = gp_model_alloc(gp_method_find("svgp"), N, D, &err);
    assert_non_null(pt->units);
    pt->units->x_mean[0] = 3.0;
    pt->units->x_scale[0] = 2.0;
    pt->units->x_mean[1] = -1.0;
    pt->units->x_scale[1] = 0.5;
    pt->units->y_mean = 1.0;
    pt->units->y_scale = 2.0;
    pt->units->mean_type = mean;
    gp_rng rng;
    gp_rng_seed(&rng, 7);
    for (size_t i = 0; i < D * M; i++)
        pt->Z[i] = 1.5 * gp_rng_normal(&rng);
    for (size_t i = 0; i < M; i++)
        pt->mq[i] = 0.5 * gp_rng_normal(&rng);
    for (size_t j = 0; j < M; j++)
        for (size_t i = j; i < M; i++)
            pt->Lq[i + j * M] = i == j ? 0.4 + 0.5 * gp_rng_uniform(&rng) : 0.2 * gp_rng_normal(&rng);
}

static void point_free(point *pt)
{
    gp_kernel_free(pt->k);
    gp_model_free(pt->units);
}

static svgp_eval point_eval(const point *pt)
{
    return (svgp_eval){pt->k, &pt->lik, &pt->quad, pt->Z, M, pt->mq, pt->Lq, NULL, NULL, 1, NULL};
}

/* A minibatch: blocks anywhere, one across the middle (a shard boundary for
 * 2 and 4 shards), one at the end. */
static const size_t blocks[][2] = {{10, 74}, {200, 264}, {340, 360}, {640, 700}, {333, 340}};
#define N_BLOCKS (sizeof blocks / sizeof blocks[0])

typedef struct sums_arg {
    const point *pt;
    double scale;
    svgp_sums layout;
    double *out; /* per rank: layout.len + slots */
} sums_arg;

/* One rank: take its part of the blocks, its sums, the sum over ranks. */
static int sums_rank(const gp_rows *rows, size_t rank, void *arg)
{
    sums_arg *a = arg;
    gp_error err;
    svgp_stream s;
    svgp_work w;
    gp_rows_sync sync;
    double *buf = a->out + rank * (a->layout.len + GP_ROWS_SYNC_SLOTS);
    assert_int_equal(gp_rows_sync_init(&sync, rows, NULL, &err), GP_OK);
    assert_int_equal(svgp_stream_alloc(&s, &sync, a->pt->units, CAP, &err), GP_OK);
    assert_int_equal(svgp_work_alloc(&w, M, CAP, &err), GP_OK);
    for (size_t b = 0; b < N_BLOCKS; b++)
        assert_int_equal(svgp_stream_take(&s, blocks[b][0], blocks[b][1], &err), GP_OK);
    svgp_eval e = point_eval(a->pt);
    assert_int_equal(svgp_factor_kuu(&e, &w, &err), GP_OK);
    svgp_stream_offsets(&s, NULL);
    assert_int_equal(svgp_stream_sums(&e, &s, a->scale, &a->layout, &w, buf, &err), GP_OK);
    int rc = gp_rows_sync_sum(&sync, buf, a->layout.len, &err);
    svgp_work_free(&w);
    svgp_stream_free(&s);
    gp_rows_sync_free(&sync);
    return rc;
}

/* The same rows in memory, standardised, in the blocks' order. */
static size_t gather_blocks(const point *pt, double *Xb, double *yb)
{
    size_t nb = 0;
    for (size_t b = 0; b < N_BLOCKS; b++)
        for (size_t i = blocks[b][0]; i < blocks[b][1]; i++, nb++) {
            for (size_t j = 0; j < D; j++)
                Xb[nb * D + j] = (X_all[i + j * N] - pt->units->x_mean[j]) / pt->units->x_scale[j];
            yb[nb] = (y_all[i] - pt->units->y_mean) / pt->units->y_scale;
        }
    return nb;
}

/* dF/dLq's lower triangle from D and Lq (svgp.h: 2 D Lq - Lq + diag(1/Lq_ii)). */
static void chol_grad(const double *Dm, const double *Lq, double *g)
{
    for (size_t j = 0; j < M; j++)
        for (size_t i = 0; i < M; i++) {
            double v = 0.0;
            for (size_t k = 0; k < M; k++)
                v += 2.0 * Dm[i + k * M] * Lq[k + j * M];
            g[i + j * M] = i < j ? 0.0 : v - Lq[i + j * M] + (i == j ? 1.0 / Lq[j + j * M] : 0.0);
        }
}

static void test_sums_match_memory(void **state)
{
    (void)state;
    make_data();
    point pt;
    point_init(&pt, GP_MEAN_ZERO);
    size_t np = gp_kernel_n_params(pt.k);
    double Xb[CAP * D], yb[CAP];
    size_t nb = gather_blocks(&pt, Xb, yb);
    gp_svgp_terms t;
    double gth[8], gz[D * M], gm[M], gc[M * M], Dm[M * M], agmu[M], theta[8], z[D * M], gc2[M * M];
    gp_svgp_grad g = {gth, gz, gm, gc};
    gp_error err;
    assert_int_equal(gp_svgp_elbo(pt.k, &pt.lik, &pt.quad, Xb, nb, yb, pt.Z, M, pt.mq, pt.Lq, &t,
                                  &g, &err),
                     GP_OK);
    sums_arg a = {&pt, 1.0, {0}, NULL};
    svgp_sums_layout(&a.layout, np + 1, D * M, 0, M);
    size_t stride = a.layout.len + GP_ROWS_SYNC_SLOTS;
    a.out = calloc(4 * stride, sizeof *a.out);
    const size_t ranks[] = {1, 2, 4}, chunks[] = {N, 7};
    for (size_t c = 0; c < 2; c++)
        for (size_t r = 0; r < 3; r++) {
            assert_int_equal(
                rf_run_sharded(ranks[r], X_all, y_all, N, D, chunks[c], sums_rank, &a, NULL),
                GP_OK);
            for (size_t k = 1; k < ranks[r]; k++) /* every rank the same bits */
                assert_memory_equal(a.out + k * stride, a.out, a.layout.len * sizeof *a.out);
            svgp_sums_unpack(&a.layout, a.out, theta, z, NULL, Dm, agmu);
            double rt = ranks[r] == 1 ? 0.0 : 1e-12; /* one shard: the same code, the same bits */
            tu_assert_close(a.out[0], t.expected_log_lik, rt, 0.0, "expected log lik");
            for (size_t i = 0; i <= np; i++)
                tu_assert_close(theta[i], gth[i], rt, 1e-12, "theta[%zu]", i);
            for (size_t i = 0; i < D * M; i++)
                tu_assert_close(z[i], gz[i], rt, 1e-12, "z[%zu]", i);
            for (size_t i = 0; i < M; i++)
                tu_assert_close(agmu[i] - pt.mq[i], gm[i], 1e-12, 1e-12, "mean[%zu]", i);
            chol_grad(Dm, pt.Lq, gc2);
            for (size_t i = 0; i < M * M; i++)
                tu_assert_close(gc2[i], gc[i], 1e-11, 1e-11, "chol[%zu]", i);
        }
    /* a minibatch's weight scales every sum */
    a.scale = 2.5;
    assert_int_equal(rf_run_sharded(1, X_all, y_all, N, D, N, sums_rank, &a, NULL), GP_OK);
    tu_assert_close(a.out[0], 2.5 * t.expected_log_lik, 1e-14, 0.0, "scaled value");
    free(a.out);
    point_free(&pt);
}

/* The value over the blocks at beta, for central differences. */
typedef struct beta_ctx {
    point *pt;
    svgp_stream s;
    svgp_work w;
    svgp_sums value;
} beta_ctx;

static double beta_value(void *ctx, const double *beta)
{
    beta_ctx *c = ctx;
    double v[1];
    svgp_eval e = point_eval(c->pt);
    svgp_stream_offsets(&c->s, beta);
    assert_int_equal(svgp_stream_sums(&e, &c->s, 1.0, &c->value, &c->w, v, NULL), GP_OK);
    return v[0];
}

static void test_mean_gradient(void **state)
{
    (void)state;
    make_data();
    point pt;
    point_init(&pt, GP_MEAN_LINEAR);
    gp_rows rows;
    rf_source src;
    rf_rows_init(&rows, &src, X_all, y_all, N, D, 0, N, 50);
    beta_ctx c = {&pt, {0}, {0}, {0}};
    gp_error err;
    gp_rows_sync sync;
    assert_int_equal(gp_rows_sync_init(&sync, &rows, NULL, &err), GP_OK);
    assert_int_equal(svgp_stream_alloc(&c.s, &sync, pt.units, CAP, &err), GP_OK);
    assert_int_equal(c.s.p, 1 + D);
    assert_int_equal(svgp_work_alloc(&c.w, M, CAP, &err), GP_OK);
    for (size_t b = 0; b < N_BLOCKS; b++)
        assert_int_equal(svgp_stream_take(&c.s, blocks[b][0], blocks[b][1], &err), GP_OK);
    svgp_eval e = point_eval(&pt);
    assert_int_equal(svgp_factor_kuu(&e, &c.w, &err), GP_OK);
    svgp_sums_layout(&c.value, 0, 0, 0, 0);
    double beta[1 + D] = {0.3, -0.2, 0.5}, gbeta[1 + D];
    svgp_sums grads;
    svgp_sums_layout(&grads, gp_kernel_n_params(pt.k) + 1, 0, 1 + D, M);
    double *buf = calloc(grads.len, sizeof *buf);
    svgp_stream_offsets(&c.s, beta);
    assert_int_equal(svgp_stream_sums(&e, &c.s, 1.0, &grads, &c.w, buf, &err), GP_OK);
    svgp_sums_unpack(&grads, buf, NULL, NULL, gbeta, NULL, NULL);
    assert_true(buf[0] == beta_value(&c, beta)); /* the value is the value-only pass's */
    tu_fd_spec spec = {.step = 1e-5, .rtol = 1e-6, .atol = 1e-7, .floor = 1.0, .relative = 1};
    tu_check_gradient(beta_value, &c, beta, 1 + D, gbeta, spec, NULL, "d/d beta");
    free(buf);
    svgp_work_free(&c.w);
    svgp_stream_free(&c.s);
    gp_rows_sync_free(&sync);
    point_free(&pt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_batch_sizes),
        cmocka_unit_test(test_epochs_visit_every_block),
        cmocka_unit_test(test_permutation_of_many_blocks),
        cmocka_unit_test(test_sums_match_memory),
        cmocka_unit_test(test_mean_gradient),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
