/* Rows read in chunks (core/model/rows.c): the standardising statistics
 * against gp_column_stats on the same rows held in memory (the same bits when
 * one chunk holds every row; equal to rounding in chunks and across shards),
 * the seeded subsample's indices, and the gather of rows by global index on
 * every shard (exact: x + 0). Shards are threads of rows_fixture.h. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/base/rng.h"
#include "core/model/model.h"
#include "core/model/rows.h"
#include "tests/unit/rows_fixture.h"
#include "tests/unit/testutil.h"

#define N 1003
#define D 3

static double X_all[N * D], y_all[N];

static void make_data(void)
{
    gp_rng rng;
    gp_rng_seed(&rng, 38);
    for (size_t i = 0; i < N * D; i++)
        X_all[i] = 5.0 + 3.0 * gp_rng_normal(&rng);
    for (size_t i = 0; i < N; i++)
        y_all[i] = 100.0 + gp_rng_normal(&rng);
    for (size_t i = 0; i < N; i++) /* a constant column: scale 1, as in memory */
        X_all[2 * N + i] = 7.0;
}

typedef struct stats_out {
    double mean[D], scale[D], ym, ys, power;
} stats_out;

static int stats_rank(const gp_rows *rows, size_t rank, void *arg)
{
    stats_out *out = (stats_out *)arg + rank;
    int rc = gp_rows_column_stats(rows, out->mean, out->scale, &out->ym, &out->ys, NULL);
    if (rc == GP_OK)
        rc = gp_rows_target_power(rows, out->ym, out->ys, &out->power, NULL);
    return rc;
}

static void test_stats_match_memory(void **state)
{
    (void)state;
    make_data();
    double mean[D], scale[D], ym, ys;
    gp_column_stats(X_all, N, D, mean, scale);
    gp_column_stats(y_all, N, 1, &ym, &ys);
    const size_t chunks[] = {N, 100, 7};
    const size_t ranks[] = {1, 2, 4};
    for (size_t c = 0; c < 3; c++)
        for (size_t r = 0; r < 3; r++) {
            stats_out out[4];
            assert_int_equal(rf_run_sharded(ranks[r], X_all, y_all, N, D, chunks[c], stats_rank,
                                            out, NULL),
                             GP_OK);
            for (size_t k = 0; k < ranks[r]; k++) /* every rank the same bits */
                assert_memory_equal(&out[k], &out[0], sizeof out[0]);
            int exact = chunks[c] == N && ranks[r] == 1;
            for (size_t j = 0; j < D; j++) {
                if (exact) {
                    assert_true(out[0].mean[j] == mean[j] && out[0].scale[j] == scale[j]);
                } else {
                    tu_assert_close(out[0].mean[j], mean[j], 1e-13, 0.0, "mean %zu", j);
                    tu_assert_close(out[0].scale[j], scale[j], 1e-12, 0.0, "scale %zu", j);
                }
            }
            assert_true(out[0].scale[2] == 1.0 && out[0].mean[2] == 7.0);
            tu_assert_close(out[0].ym, ym, 1e-13, 0.0, "y mean");
            tu_assert_close(out[0].ys, ys, 1e-12, 0.0, "y scale");
            /* standardised targets have power 1 */
            tu_assert_close(out[0].power, 1.0, 1e-12, 0.0, "power");
        }
}

static void test_sample_indices(void **state)
{
    (void)state;
    size_t idx[500], again[500], all[20];
    assert_int_equal(gp_rows_sample_indices(100000, 500, 7, idx, NULL), GP_OK);
    assert_int_equal(gp_rows_sample_indices(100000, 500, 7, again, NULL), GP_OK);
    assert_memory_equal(idx, again, sizeof idx);
    for (size_t i = 1; i < 500; i++)
        assert_true(idx[i - 1] < idx[i]); /* increasing: distinct */
    assert_true(idx[499] < 100000);
    /* another seed, another sample; every row when k >= n */
    assert_int_equal(gp_rows_sample_indices(100000, 500, 8, again, NULL), GP_OK);
    assert_memory_not_equal(idx, again, sizeof idx);
    assert_int_equal(gp_rows_sample_indices(20, 50, 7, all, NULL), GP_OK);
    for (size_t i = 0; i < 20; i++)
        assert_int_equal(all[i], i);
    /* roughly uniform: the mean index of 500 draws from 0..99999 within 5 sd */
    double s = 0.0;
    for (size_t i = 0; i < 500; i++)
        s += (double)idx[i];
    tu_assert_within(s / 500.0, 49999.5, 5.0 * 28867.5 / sqrt(500.0), "mean index");
}

typedef struct gather_arg {
    const size_t *idx;
    size_t k;
    double *X, *y; /* per rank: k x D and k */
} gather_arg;

static int gather_rank(const gp_rows *rows, size_t rank, void *arg)
{
    gather_arg *g = arg;
    return gp_rows_gather(rows, g->idx, g->k, g->X + rank * g->k * D, g->y + rank * g->k, NULL);
}

static void test_gather_every_shard(void **state)
{
    (void)state;
    make_data();
    size_t k = 64, idx[64];
    assert_int_equal(gp_rows_sample_indices(N, k, 3, idx, NULL), GP_OK);
    idx[0] = 0;          /* the first row and the last */
    idx[k - 1] = N - 1;
    double *X = calloc(4 * k * D, sizeof *X), *y = calloc(4 * k, sizeof *y);
    const size_t ranks[] = {1, 2, 3, 4}, chunks[] = {N, 10};
    for (size_t c = 0; c < 2; c++)
        for (size_t r = 0; r < 4; r++) {
            gather_arg g = {idx, k, X, y};
            assert_int_equal(
                rf_run_sharded(ranks[r], X_all, y_all, N, D, chunks[c], gather_rank, &g, NULL),
                GP_OK);
            for (size_t q = 0; q < ranks[r]; q++)
                for (size_t i = 0; i < k; i++) {
                    for (size_t j = 0; j < D; j++)
                        assert_true(X[q * k * D + i + j * k] == X_all[idx[i] + j * N]);
                    assert_true(y[q * k + i] == y_all[idx[i]]);
                }
        }
    free(X);
    free(y);
}

static void test_bad_shape(void **state)
{
    (void)state;
    gp_rows rows;
    rf_source src;
    rf_rows_init(&rows, &src, X_all, y_all, N, D, N - 5, 10, 16); /* past the end */
    gp_error err;
    assert_int_equal(gp_rows_check(&rows, &err), GP_EINVAL);
    assert_string_equal(err.field, "data");
    rf_rows_init(&rows, &src, X_all, y_all, N, D, 0, N, 0); /* no chunk */
    assert_int_equal(gp_rows_check(&rows, &err), GP_EINVAL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stats_match_memory),
        cmocka_unit_test(test_sample_indices),
        cmocka_unit_test(test_gather_every_shard),
        cmocka_unit_test(test_bad_shape),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
