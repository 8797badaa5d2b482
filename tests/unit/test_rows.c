/* Rows read in chunks (core/model/rows.c, rows_passes.c, rows_sync.c): the
 * standardising statistics against gp_column_stats on the same rows held in
 * memory (the same bits when one chunk holds every row; equal to rounding in
 * chunks and across shards), the seeded subsample's indices, the gather of
 * rows by global index on every shard (exact: x + 0), and failures agreed by
 * every rank: a reader failing, a cancel or a refused buffer on one rank ends
 * every rank with the same code in each pass (rows_fixture.h makes a rank
 * that ended alone fail the others' reductions, so a pass that did not agree
 * fails these tests instead of hanging them). Shards are threads of
 * rows_fixture.h. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/base/rng.h"
#include "core/model/model.h"
#include "core/model/rows.h"
#include "core/model/rows_passes.h"
#include "core/model/rows_sync.h"
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
    gp_rows_sync s;
    int rc = gp_rows_sync_init(&s, rows, NULL, NULL);
    if (rc == GP_OK)
        rc = gp_rows_column_stats(&s, out->mean, out->scale, &out->ym, &out->ys, NULL);
    if (rc == GP_OK)
        rc = gp_rows_target_power(&s, out->ym, out->ys, &out->power, NULL);
    gp_rows_sync_free(&s);
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
    gp_rows_sync s;
    int rc = gp_rows_sync_init(&s, rows, NULL, NULL);
    if (rc == GP_OK)
        rc = gp_rows_gather(&s, g->idx, g->k, g->X + rank * g->k * D, g->y + rank * g->k, NULL);
    gp_rows_sync_free(&s);
    return rc;
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

/* ---- failures every rank agrees on ---- */

typedef enum pass_kind { PASS_STATS, PASS_POWER, PASS_GATHER } pass_kind;

/* What one rank meets. */
typedef struct trouble {
    int code;        /* its reader fails with this from read reads_ok on (0: never) */
    size_t reads_ok;
    int cancelled;   /* its cancel token is set from the start */
    size_t chunk;    /* its rows' chunk (0: the fixture's) */
} trouble;

typedef struct fail_arg {
    pass_kind kind;
    trouble t[4];
    const size_t *idx; /* PASS_GATHER: K_GATHER indices */
    int rc[4], again[4];
    gp_error err[4];
    size_t reread[4]; /* rows read by a pass after the failure (none: it is sticky) */
} fail_arg;

#define K_GATHER 64

typedef struct troubled {
    const gp_rows *inner;
    const trouble *t;
    size_t reads, rows;
} troubled;

static int troubled_read(void *ctx, size_t i, size_t count, double *X, double *y, gp_error *err)
{
    troubled *r = ctx;
    if (r->t->code && r->reads >= r->t->reads_ok)
        return gp_error_set(err, r->t->code, "data.dataset", "part at row %zu lost",
                            r->inner->first + i);
    r->reads++;
    r->rows += count;
    return r->inner->read(r->inner->read_ctx, i, count, X, y, err);
}

static int run_pass(gp_rows_sync *s, pass_kind kind, const size_t *idx, gp_error *err)
{
    double mean[D], scale[D], ym, ys, power, X[K_GATHER * D];
    switch (kind) {
    case PASS_STATS:
        return gp_rows_column_stats(s, mean, scale, &ym, &ys, err);
    case PASS_POWER:
        return gp_rows_target_power(s, 100.0, 2.0, &power, err);
    default:
        return gp_rows_gather(s, idx, K_GATHER, X, NULL, err);
    }
}

/* No asserts here (a thread): the main thread checks what is recorded. */
static int fail_rank(const gp_rows *rows, size_t rank, void *arg)
{
    fail_arg *a = arg;
    troubled rd = {rows, &a->t[rank], 0, 0};
    gp_rows mine = *rows;
    mine.read = troubled_read;
    mine.read_ctx = &rd;
    if (a->t[rank].chunk)
        mine.chunk = a->t[rank].chunk;
    atomic_int flag;
    atomic_init(&flag, a->t[rank].cancelled);
    gp_fit_request req;
    memset(&req, 0, sizeof req);
    req.cancel.flag = &flag;
    gp_rows_sync s;
    gp_error *err = &a->err[rank];
    gp_error_clear(err);
    int rc = gp_rows_sync_init(&s, &mine, &req, err);
    if (rc == GP_OK)
        rc = run_pass(&s, a->kind, a->idx, err);
    size_t read = rd.rows;
    a->again[rank] = rc ? run_pass(&s, PASS_POWER, NULL, NULL) : rc;
    a->reread[rank] = rd.rows - read;
    gp_rows_sync_free(&s);
    a->rc[rank] = rc;
    return rc;
}

/* Every rank ended with code, each failure sticky; with words_of < p, every
 * rank carries that rank's field and message. */
static void assert_every_rank(const fail_arg *a, size_t p, int code, size_t words_of)
{
    for (size_t r = 0; r < p; r++) {
        if (a->rc[r] != code || a->err[r].code != code)
            fail_msg("rank %zu ended %s (%s), not %s", r, gp_status_name(a->rc[r]),
                     a->err[r].message, gp_status_name(code));
        assert_int_equal(a->again[r], code);
        assert_int_equal(a->reread[r], 0);
        if (words_of < p) {
            assert_string_equal(a->err[r].field, a->err[words_of].field);
            assert_string_equal(a->err[r].message, a->err[words_of].message);
        }
    }
}

static int run_troubled(fail_arg *a, size_t p)
{
    return rf_run_sharded(p, X_all, y_all, N, D, 100, fail_rank, a, NULL);
}

/* Rank 1 (rows 250 .. 500, three chunks of 100) loses a part of its data
 * set in each pass, at its first read or later (in the statistics' second
 * pass too): every rank ends with its error, in its words. */
static void test_reader_failure_on_one_rank(void **state)
{
    (void)state;
    make_data();
    size_t idx[K_GATHER];
    assert_int_equal(gp_rows_sample_indices(N, K_GATHER, 3, idx, NULL), GP_OK);
    size_t on_rank_1 = 0;
    for (size_t i = 0; i < K_GATHER; i++)
        on_rank_1 += idx[i] >= 250 && idx[i] < 501;
    assert_true(on_rank_1 > 0); /* rank 1 reads in the gather */
    const struct {
        pass_kind kind;
        size_t reads_ok;
    } cases[] = {{PASS_STATS, 0}, {PASS_STATS, 1}, {PASS_STATS, 3}, {PASS_POWER, 0},
                 {PASS_POWER, 2}, {PASS_GATHER, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        fail_arg a;
        memset(&a, 0, sizeof a);
        a.kind = cases[c].kind;
        a.idx = idx;
        a.t[1] = (trouble){GP_ESTORAGE, cases[c].reads_ok, 0, 0};
        assert_int_equal(run_troubled(&a, 4), GP_ESTORAGE);
        assert_every_rank(&a, 4, GP_ESTORAGE, 1);
        assert_string_equal(a.err[0].field, "data.dataset");
        assert_non_null(strstr(a.err[0].message, "part at row"));
    }
    /* alone: the reader's error as it is */
    fail_arg a;
    memset(&a, 0, sizeof a);
    a.t[0] = (trouble){GP_ESTORAGE, 4, 0, 0};
    assert_int_equal(run_troubled(&a, 1), GP_ESTORAGE);
    assert_every_rank(&a, 1, GP_ESTORAGE, 0);
    assert_string_equal(a.err[0].field, "data.dataset");
}

/* A cancel on one rank, a cancel beside a failure, failures of different
 * codes, and a buffer one rank could not have. */
static void test_cancel_and_mixed_failures(void **state)
{
    (void)state;
    make_data();
    fail_arg a;
    memset(&a, 0, sizeof a);
    a.t[2].cancelled = 1;
    assert_int_equal(run_troubled(&a, 4), GP_ECANCELLED);
    assert_every_rank(&a, 4, GP_ECANCELLED, 4);
    /* rank 2's cancel beside rank 1's failure: the failure, in rank 1's words */
    memset(&a, 0, sizeof a);
    a.kind = PASS_POWER;
    a.t[1] = (trouble){GP_ESTORAGE, 0, 0, 0};
    a.t[2].cancelled = 1;
    assert_int_equal(run_troubled(&a, 4), GP_ESTORAGE);
    assert_every_rank(&a, 4, GP_ESTORAGE, 1);
    /* three failures of two codes: the more common on every rank */
    memset(&a, 0, sizeof a);
    a.t[1] = (trouble){GP_ESTORAGE, 0, 0, 0};
    a.t[2] = a.t[3] = (trouble){GP_EDATA, 1, 0, 0};
    assert_int_equal(run_troubled(&a, 4), GP_EDATA);
    assert_every_rank(&a, 4, GP_EDATA, 4);
    assert_non_null(strstr(a.err[0].message, "3 processes"));
    assert_non_null(strstr(a.err[1].message, "part at row")); /* its own words kept */
    /* rank 1's chunk buffer is refused (too big): kept pending by the sync's
     * set-up, agreed by the pass's first sum */
    memset(&a, 0, sizeof a);
    a.t[1].chunk = (size_t)1 << 40;
    assert_int_equal(run_troubled(&a, 4), GP_ETOOBIG);
    assert_every_rank(&a, 4, GP_ETOOBIG, 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stats_match_memory),
        cmocka_unit_test(test_sample_indices),
        cmocka_unit_test(test_gather_every_shard),
        cmocka_unit_test(test_bad_shape),
        cmocka_unit_test(test_reader_failure_on_one_rank),
        cmocka_unit_test(test_cancel_and_mixed_failures),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
