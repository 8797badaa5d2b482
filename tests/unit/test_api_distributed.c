/* api: the pieces of a fit sharded over processes (api/distributed.c) that
 * gpserve-fit (mpi/) builds on: the "distributed" field against the method,
 * a rank's shard of the rows (fixed boundaries, every row once, its own bits),
 * a fit over rows refused by a method that does not stream them, and a
 * durable job opened for its holder only, with its cancel request. */
#include "tests/unit/api_testutil.h"

#include "core/model/rows.h"
#include "tests/unit/api_fixture.h"

static gp_fit_job *parse_job(const char *extra)
{
    char *body = fit_body("sh", extra, Xtr, ytr, N, D);
    gp_request req = make_req("application/json", body, NULL, 0);
    gp_fit_job *job = NULL;
    gp_error err;
    if (gp_api_parse_fit(api, &req, &job, &err) != GP_OK)
        fail_msg("parse: %s (%s)", err.message, err.field);
    free(body);
    return job;
}

/* A method that needs its rows in memory is refused, naming those that stream. */
static void test_distributed_needs_a_streaming_method(void **state)
{
    (void)state;
    json_error_t je;
    json_t *fit = json_loads("{\"data\":{\"dataset\":\"d\"}}", 0, &je);
    json_t *v = json_loads("{\"ranks\":2}", 0, &je);
    int ranks = -1;
    gp_error err;
    assert_int_equal(gp_api_parse_distributed(api, fit, v, gp_method_find("exact"), &ranks, &err),
                     GP_EUNSUPPORTED);
    assert_string_equal(err.field, "distributed");
    assert_non_null(strstr(err.message, "method 'exact'"));
    assert_int_equal(ranks, 0);
    /* a method that streams takes it (whichever do in this build) */
    for (size_t i = 0; gp_method_at(i); i++) {
        if (!gp_method_at(i)->streams_rows)
            continue;
        assert_int_equal(gp_api_parse_distributed(api, fit, v, gp_method_at(i), &ranks, &err),
                         GP_OK);
        assert_int_equal(ranks, 2);
    }
    json_decref(fit);
    json_decref(v);
}

/* Ranks 1..5 of N rows: contiguous fixed ranges covering every row once, each
 * read giving the request's own rows, in chunks that never pass the shard. */
static void test_shards_cover_the_rows(void **state)
{
    (void)state;
    gp_fit_job *job = parse_job("\"method\":\"sgpr\"");
    for (int p = 1; p <= 5; p++) {
        size_t next = 0;
        for (int r = 0; r < p; r++) {
            gp_fit_shard *s = NULL;
            gp_error err;
            assert_int_equal(gp_api_fit_shard_open(api, job, r, p, 3, &s, &err), GP_OK);
            gp_rows *rows = gp_fit_shard_rows(s);
            assert_int_equal(gp_rows_check(rows, &err), GP_OK);
            assert_int_equal(rows->first, next);
            assert_int_equal(rows->first, (size_t)N * (size_t)r / (size_t)p);
            assert_int_equal(rows->n_total, N);
            assert_int_equal(rows->d, D);
            assert_null(rows->allreduce);
            double X[3 * D], y[3];
            for (size_t i = 0; i < rows->n; i += 3) {
                size_t c = rows->n - i < 3 ? rows->n - i : 3;
                assert_int_equal(rows->read(rows->read_ctx, i, c, X, y, &err), GP_OK);
                for (size_t k = 0; k < c; k++) {
                    size_t g = rows->first + i + k;
                    assert_memory_equal(&y[k], &ytr[g], sizeof(double));
                    for (size_t j = 0; j < D; j++)
                        assert_memory_equal(&X[j * c + k], &Xtr[j * N + g], sizeof(double));
                }
            }
            /* past the shard: refused, nothing read */
            assert_int_equal(rows->read(rows->read_ctx, rows->n, 1, X, y, &err), GP_EINTERNAL);
            next = rows->first + rows->n;
            gp_fit_shard_close(s);
        }
        assert_int_equal(next, N);
    }
    gp_fit_shard *s = NULL;
    gp_error err;
    assert_int_equal(gp_api_fit_shard_open(api, job, 2, 2, 0, &s, &err), GP_EINVAL);
    assert_int_equal(gp_api_fit_shard_open(api, job, -1, 2, 0, &s, &err), GP_EINVAL);
    assert_null(s);
    gp_fit_job_free(job);
}

/* A method that needs its rows in memory refuses them in chunks. */
static void test_fit_over_rows_needs_a_streaming_method(void **state)
{
    (void)state;
    gp_fit_job *job = parse_job("\"method\":\"exact\"");
    gp_fit_shard *s = NULL;
    gp_error err;
    assert_int_equal(gp_api_fit_shard_open(api, job, 0, 1, 0, &s, &err), GP_OK);
    gp_model *model = NULL;
    assert_int_equal(gp_api_fit_model(api, job, gp_fit_shard_rows(s), NULL, NULL, &model, &err),
                     GP_EUNSUPPORTED);
    assert_null(model);
    assert_string_equal(err.field, "data.dataset");
    /* the same job in memory fits, and is saved like any fit */
    assert_int_equal(gp_api_fit_model(api, job, NULL, NULL, NULL, &model, &err), GP_OK);
    gp_response res = {0};
    double secs = -1;
    assert_int_equal(gp_api_save_fit(api, job, model, &res, &secs), GP_OK);
    expect_status(&res, 201);
    assert_true(secs >= 0);
    gp_response_free(&res);
    gp_fit_shard_close(s);
    gp_fit_job_free(job);
}

/* A durable job opens for its holder only; a DELETE reaching another daemon
 * shows as its cancel request. */
static void test_job_open_for_its_holder(void **state)
{
    (void)state;
    gp_fit_job *job = parse_job("\"method\":\"sgpr\",\"async\":true");
    gp_job_info info;
    memset(&info, 0, sizeof info);
    snprintf(info.id, sizeof info.id, "job-open-1");
    snprintf(info.model_name, sizeof info.model_name, "sh");
    info.status = "queued";
    gp_error err;
    assert_int_equal(gp_api_job_create(api, job, &info, "H:1:a", 1e12, &err), GP_OK);
    gp_fit_job_free(job);

    gp_fit_job *fj = NULL;
    gp_job_info got;
    assert_int_equal(gp_api_job_open(api, "job-open-1", "other:2:b", &fj, &got, &err),
                     GP_ECONFLICT);
    assert_null(fj);
    assert_int_equal(gp_api_job_open(api, "job-open-1", "H:1:a", &fj, &got, &err), GP_OK);
    assert_string_equal(got.model_name, "sh");
    assert_string_equal(gp_fit_job_method(fj), "sgpr");
    assert_int_equal(gp_fit_job_ranks(fj), 0);
    gp_job_info_free(&got);
    gp_fit_job_free(fj);

    int requested = -1;
    assert_int_equal(gp_api_job_cancel_requested(api, "job-open-1", "H:1:a", &requested, &err),
                     GP_OK);
    assert_int_equal(requested, 0);
    gp_response res = {0};
    gp_api_job_cancel_stored(api, "job-open-1", 0.0, &res);
    expect_status(&res, 202);
    gp_response_free(&res);
    assert_int_equal(gp_api_job_cancel_requested(api, "job-open-1", "H:1:a", &requested, &err),
                     GP_OK);
    assert_int_equal(requested, 1);
    assert_int_equal(gp_api_job_open(api, "no-such-job", "H:1:a", &fj, &got, &err),
                     GP_ECONFLICT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_distributed_needs_a_streaming_method),
        cmocka_unit_test(test_shards_cover_the_rows),
        cmocka_unit_test(test_fit_over_rows_needs_a_streaming_method),
        cmocka_unit_test(test_job_open_for_its_holder),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
