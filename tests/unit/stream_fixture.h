/* Test fixture: fits over rows read in chunks (gp_fit_request.rows) for the
 * streaming methods' tests (test_sgpr_rows.c, test_ssgp_rows.c): requests,
 * one fit per rank of rows_fixture.h's threads, models compared bit for bit
 * (their exported arrays) or to a tolerance (hyperparameters, predictive
 * mean and variance), failures that must end every rank alike, and the
 * reads and heap of a fit. Header-only: include after cmocka.h,
 * testutil.h, method_testutil.h and rows_fixture.h. */
#ifndef SR_STREAM_FIXTURE_H
#define SR_STREAM_FIXTURE_H

#include <malloc.h>
#include <stdatomic.h>

#include "core/base/rng.h"
#include "core/base/state.h"
#include "core/methods/registry.h"
#include "core/model/method.h"

#define SR_MAX_RANKS 4
#define SR_TEST_POINTS 9

/* A model of identity standardisation (x and y as given) in d inputs: the
 * units of a streamed objective evaluated on working-unit rows. */
static gp_model *sr_identity_units(size_t d)
{
    gp_model *u = gp_model_alloc(gp_method_find("sgpr"), 0, d, NULL);
    assert_non_null(u);
    for (size_t j = 0; j < d; j++) {
        u->x_mean[j] = 0.0;
        u->x_scale[j] = 1.0;
    }
    u->y_mean = 0.0;
    u->y_scale = 1.0;
    return u;
}

/* A fit request over rows (rows may be NULL: each rank sets its own). */
static void sr_rows_request(gp_fit_request *req, const gp_rows *rows, const gp_kernel *k,
                            const gp_option_value *opts, size_t n_opts)
{
    memset(req, 0, sizeof *req);
    req->rows = rows;
    req->n = rows ? rows->n_total : 0;
    req->d = rows ? rows->d : 0;
    req->kernel = k;
    req->standardize = 1;
    req->seed = 1;
    req->options = opts;
    req->n_options = n_opts;
}

static void sr_assert_refused(const gp_method *m, const gp_fit_request *req, int code,
                              const char *field)
{
    gp_model *model = NULL;
    gp_error err;
    gp_error_clear(&err);
    int rc = gp_model_fit(m, req, &model, &err);
    if (rc != code || strcmp(err.field, field) != 0)
        fail_msg("%s: want %s naming '%s', got %s naming '%s' (%s)", m->name,
                 gp_status_name(code), field, gp_status_name(rc), err.field, err.message);
    assert_null(model);
}

/* ---- one fit per rank ---- */

typedef struct sr_fit_job {
    const gp_fit_request *base; /* everything but rows */
    const char *method;
    gp_model *models[SR_MAX_RANKS];
    int rcs[SR_MAX_RANKS];
    gp_error errs[SR_MAX_RANKS];
    /* failures to inject (0: none) */
    size_t fail_rank, fail_read; /* rank fail_rank's read number fail_read fails */
    size_t fail_sum;             /* every rank's reduction number fail_sum fails */
} sr_fit_job;

typedef struct sr_rank_rows {
    const gp_rows *inner;
    size_t reads, sums, fail_read, fail_sum;
} sr_rank_rows;

static int sr_read(void *ctx, size_t i, size_t count, double *X, double *y, gp_error *err)
{
    sr_rank_rows *r = ctx;
    if (++r->reads == r->fail_read)
        return gp_error_set(err, GP_EDATA, "data.rows[57]", "row 57 could not be read (test)");
    return r->inner->read(r->inner->read_ctx, i, count, X, y, err);
}

static int sr_allreduce(void *ctx, double *buf, size_t len, gp_error *err)
{
    sr_rank_rows *r = ctx;
    if (++r->sums == r->fail_sum)
        return gp_error_set(err, GP_EINTERNAL, NULL, "rank lost (test)");
    return r->inner->allreduce(r->inner->reduce_ctx, buf, len, err);
}

static int sr_fit_rank(const gp_rows *rows, size_t rank, void *arg)
{
    sr_fit_job *j = arg;
    sr_rank_rows wrap = {.inner = rows,
                         .fail_read = rank == j->fail_rank ? j->fail_read : 0,
                         .fail_sum = j->fail_sum};
    gp_rows mine = *rows;
    mine.read = sr_read;
    mine.read_ctx = &wrap;
    if (rows->allreduce) {
        mine.allreduce = sr_allreduce;
        mine.reduce_ctx = &wrap;
    }
    gp_fit_request req = *j->base;
    req.rows = &mine;
    gp_error_clear(&j->errs[rank]);
    j->rcs[rank] = gp_model_fit(gp_method_find(j->method), &req, &j->models[rank], &j->errs[rank]);
    return j->rcs[rank];
}

static void sr_fit_job_free(sr_fit_job *j)
{
    for (size_t r = 0; r < SR_MAX_RANKS; r++) {
        gp_model_free(j->models[r]);
        j->models[r] = NULL;
    }
}

/* ---- models compared ---- */

static void sr_export(const gp_model *m, gp_state *st)
{
    gp_error err;
    gp_state_init(st);
    if (gp_model_export(m, st, &err) != GP_OK)
        fail_msg("export: %s", err.message);
}

/* Every exported array but the diagnostics (which hold the fit's seconds):
 * the same bits. */
static void sr_assert_models_equal(const gp_model *a, const gp_model *b, const char *what)
{
    gp_state sa, sb;
    sr_export(a, &sa);
    sr_export(b, &sb);
    assert_int_equal(sa.count, sb.count);
    for (size_t i = 0; i < sa.count; i++) {
        const gp_named_array *x = &sa.arrays[i], *y = gp_state_find(&sb, x->name);
        if (y == NULL || x->rows != y->rows || x->cols != y->cols)
            fail_msg("%s: array %s differs in shape", what, x->name);
        if (strcmp(x->name, "diagnostics") != 0 &&
            memcmp(x->data, y->data, x->rows * x->cols * sizeof *x->data) != 0)
            fail_msg("%s: array %s differs in its bits", what, x->name);
    }
    gp_state_free(&sa);
    gp_state_free(&sb);
}

/* Test points spread over the inputs' range (the data of
 * tu_random_problem lie in [-2, 2]^d). */
static void sr_test_points(size_t d, double *Xs)
{
    gp_rng rng;
    gp_rng_seed(&rng, 99);
    for (size_t i = 0; i < SR_TEST_POINTS * d; i++)
        Xs[i] = 4.4 * gp_rng_uniform(&rng) - 2.2;
}

/* Hyperparameters (log scale), noise and the predictive mean and variance
 * at test points within rtol of each other. */
static void sr_assert_models_close(const gp_model *a, const gp_model *b, double rtol,
                                   const char *what)
{
    size_t np = gp_kernel_n_params(a->kernel), d = a->input_dim;
    double pa[16], pb[16], Xs[SR_TEST_POINTS * 8];
    assert_true(np <= 16 && d <= 8);
    gp_kernel_get_params(a->kernel, pa);
    gp_kernel_get_params(b->kernel, pb);
    for (size_t p = 0; p < np; p++)
        tu_assert_close(pb[p], pa[p], rtol, rtol, "%s: kernel parameter %zu", what, p);
    tu_assert_close(b->noise_variance, a->noise_variance, rtol, 0.0, "%s: noise", what);
    sr_test_points(d, Xs);
    double ma[SR_TEST_POINTS], va[SR_TEST_POINTS], mb[SR_TEST_POINTS], vb[SR_TEST_POINTS];
    predict_ok(a, Xs, SR_TEST_POINTS, d, 1, ma, va, NULL);
    predict_ok(b, Xs, SR_TEST_POINTS, d, 1, mb, vb, NULL);
    for (size_t i = 0; i < SR_TEST_POINTS; i++) {
        tu_assert_close(mb[i], ma[i], rtol, rtol, "%s: mean at point %zu", what, i);
        tu_assert_close(vb[i], va[i], rtol, 0.0, "%s: variance at point %zu", what, i);
    }
}

/* The model of a fit over rows is a model like any other: export and import
 * give the same predictions, bit for bit, and it samples. */
static void sr_assert_round_trip(const gp_model *m)
{
    gp_state st;
    sr_export(m, &st);
    gp_model *back = NULL;
    gp_error err;
    if (gp_model_import(m->method, &st, &back, &err) != GP_OK)
        fail_msg("import: %s", err.message);
    size_t d = m->input_dim;
    double Xs[SR_TEST_POINTS * 8], ma[SR_TEST_POINTS], va[SR_TEST_POINTS];
    double mb[SR_TEST_POINTS], vb[SR_TEST_POINTS], draws[SR_TEST_POINTS * 3];
    sr_test_points(d, Xs);
    predict_ok(m, Xs, SR_TEST_POINTS, d, 0, ma, va, NULL);
    predict_ok(back, Xs, SR_TEST_POINTS, d, 0, mb, vb, NULL);
    assert_memory_equal(ma, mb, sizeof ma);
    assert_memory_equal(va, vb, sizeof va);
    gp_sample_request sr = {.X = Xs, .m = SR_TEST_POINTS, .d = d, .n_samples = 3, .seed = 5};
    assert_int_equal(gp_model_sample(back, &sr, draws, &err), GP_OK);
    for (size_t i = 0; i < SR_TEST_POINTS * 3; i++)
        assert_true(isfinite(draws[i]));
    gp_model_free(back);
    gp_state_free(&st);
}

/* ---- shards ---- */

/* Fits of base over p = 1, 2 and 4 shards of chunk rows: every rank ends
 * with the same model bits, the same p again gives the same bits, and the
 * three p agree to rtol (hyperparameters, predictive mean and variance). */
static void sr_check_shards(const gp_fit_request *base, const char *method, const double *X,
                            const double *y, size_t n, size_t d, size_t chunk, double rtol)
{
    gp_model *first[3] = {NULL, NULL, NULL};
    const size_t ranks[] = {1, 2, 4};
    for (size_t r = 0; r < 3; r++) {
        sr_fit_job j = {.base = base, .method = method, .fail_rank = SR_MAX_RANKS};
        assert_int_equal(rf_run_sharded(ranks[r], X, y, n, d, chunk, sr_fit_rank, &j, NULL),
                         GP_OK);
        for (size_t q = 1; q < ranks[r]; q++)
            sr_assert_models_equal(j.models[0], j.models[q], "rank");
        assert_int_equal((size_t)find_info(j.models[0], "ranks")->number, ranks[r]);
        sr_fit_job again = {.base = base, .method = method, .fail_rank = SR_MAX_RANKS};
        assert_int_equal(rf_run_sharded(ranks[r], X, y, n, d, chunk, sr_fit_rank, &again, NULL),
                         GP_OK);
        sr_assert_models_equal(j.models[0], again.models[0], "run to run");
        first[r] = j.models[0];
        j.models[0] = NULL;
        sr_fit_job_free(&j);
        sr_fit_job_free(&again);
    }
    for (size_t r = 1; r < 3; r++)
        sr_assert_models_close(first[0], first[r], rtol, "p = 1 vs 2, 4");
    for (size_t r = 0; r < 3; r++)
        gp_model_free(first[r]);
}

/* ---- failures ---- */

static atomic_int sr_progress_calls;

static int sr_stop_on_third(void *ctx, int it, int max, double f)
{
    (void)ctx;
    (void)it;
    (void)max;
    (void)f;
    return atomic_fetch_add(&sr_progress_calls, 1) == 2; /* one rank's call only */
}

/* Every rank of j ended with code, no model, and the same field and
 * message (the failing rank's words carried to the others). */
static void sr_assert_all_failed(const sr_fit_job *j, size_t p, int code, const char *field,
                                 const char *what)
{
    for (size_t r = 0; r < p; r++) {
        if (j->rcs[r] != code)
            fail_msg("%s: rank %zu ended %s (%s), want %s", what, r, gp_status_name(j->rcs[r]),
                     j->errs[r].message, gp_status_name(code));
        assert_null(j->models[r]);
        if (field)
            assert_string_equal(j->errs[r].field, field);
        assert_string_equal(j->errs[r].message, j->errs[0].message);
    }
}

/* A reader's failure on one rank mid-fit, a reduction failing on every
 * rank, the fit's cancel token and a stop asked by one rank's progress
 * callback: every one of 3 ranks ends with the same error, no model. */
static void sr_check_failures(const gp_fit_request *base, const char *method, const double *X,
                              const double *y, size_t n, size_t d)
{
    const size_t p = 3, chunk = 37;
    sr_fit_job j = {.base = base, .method = method, .fail_rank = 1, .fail_read = 40};
    rf_run_sharded(p, X, y, n, d, chunk, sr_fit_rank, &j, NULL);
    sr_assert_all_failed(&j, p, GP_EDATA, "data.rows[57]", "reader");
    assert_string_equal(j.errs[0].message, "row 57 could not be read (test)");
    sr_fit_job_free(&j);

    sr_fit_job lost = {.base = base, .method = method, .fail_rank = SR_MAX_RANKS, .fail_sum = 12};
    rf_run_sharded(p, X, y, n, d, chunk, sr_fit_rank, &lost, NULL);
    sr_assert_all_failed(&lost, p, GP_EINTERNAL, NULL, "reduction");
    sr_fit_job_free(&lost);

    atomic_long polls = 25;
    gp_fit_request req = *base;
    req.cancel.checks_left = &polls;
    sr_fit_job cancelled = {.base = &req, .method = method, .fail_rank = SR_MAX_RANKS};
    rf_run_sharded(p, X, y, n, d, chunk, sr_fit_rank, &cancelled, NULL);
    sr_assert_all_failed(&cancelled, p, GP_ECANCELLED, NULL, "cancel token");
    sr_fit_job_free(&cancelled);

    atomic_store(&sr_progress_calls, 0);
    req = *base;
    req.progress = sr_stop_on_third;
    sr_fit_job stopped = {.base = &req, .method = method, .fail_rank = SR_MAX_RANKS};
    rf_run_sharded(p, X, y, n, d, chunk, sr_fit_rank, &stopped, NULL);
    sr_assert_all_failed(&stopped, p, GP_ECANCELLED, NULL, "progress");
    sr_fit_job_free(&stopped);
}

/* ---- reads and heap ---- */

typedef struct sr_probe {
    rf_source src;
    size_t max_count;
    size_t base, peak; /* heap in use before the fit, and its peak at reads */
} sr_probe;

static size_t sr_heap_in_use(void)
{
    struct mallinfo2 mi = mallinfo2();
    return mi.uordblks + mi.hblkhd;
}

static int sr_probe_read(void *ctx, size_t i, size_t count, double *X, double *y, gp_error *err)
{
    sr_probe *p = ctx;
    if (count > p->max_count)
        p->max_count = count;
    size_t h = sr_heap_in_use();
    if (h > p->peak)
        p->peak = h;
    return rf_read(&p->src, i, count, X, y, err);
}

/* A fit of n rows in chunks of 256, returning the largest read and the
 * heap's growth above its start, sampled at every read. */
static void sr_probe_fit(const char *method, const gp_kernel *k, const gp_option_value *opts,
                         size_t n_opts, size_t n, size_t *max_count, size_t *growth)
{
    size_t d = k->input_dim;
    double *X = malloc(n * d * sizeof *X), *y = malloc(n * sizeof *y);
    assert_true(X && y);
    tu_random_problem_colmajor(n, d, 11, X, y);
    sr_probe probe = {0};
    gp_rows rows;
    rf_rows_init(&rows, &probe.src, X, y, n, d, 0, n, 256);
    rows.read = sr_probe_read;
    rows.read_ctx = &probe;
    gp_fit_request req;
    sr_rows_request(&req, &rows, k, opts, n_opts);
    probe.base = probe.peak = sr_heap_in_use();
    gp_model *model = fit_ok(gp_method_find(method), &req, "probe");
    *max_count = probe.max_count;
    *growth = probe.peak - probe.base;
    gp_model_free(model);
    free(X);
    free(y);
}

/* Reads are never above the chunk, and the heap a fit holds while it
 * reads does not grow with N: 5000 and 20000 rows within 64 KiB of each
 * other (an O(N) buffer of doubles would differ by 117 KiB, O(N M) by
 * megabytes). Not under ASan, whose allocator mallinfo2 does not see. */
static void sr_check_reads_and_heap(const char *method, const gp_kernel *k,
                                    const gp_option_value *opts, size_t n_opts)
{
    size_t c1, g1, c2, g2;
    sr_probe_fit(method, k, opts, n_opts, 5000, &c1, &g1);
    sr_probe_fit(method, k, opts, n_opts, 20000, &c2, &g2);
    assert_int_equal(c1, 256);
    assert_int_equal(c2, 256);
#if defined(__SANITIZE_ADDRESS__)
    (void)g1;
    (void)g2;
#else
    if (g2 > g1 + 64 * 1024)
        fail_msg("%s: the heap grew by %zu bytes for 5000 rows and %zu for 20000", method, g1, g2);
#endif
}

#endif
