/* api: fits and predictions beyond the basics: cache eviction, kernel JSON
 * round trips, 1-D inputs and limits, asynchronous fits, cancelled fits, jobs
 * saved and loaded, concurrent predictions, the shortest number format, and
 * batched calls equal to single ones. */
#include "tests/unit/api_testutil.h"

#include <libpq-fe.h>
#include <pthread.h>

#include "api/internal.h"
#include "core/methods/registry.h"
#include "api/ui_assets.h"
#include "core/model/model.h"
#include "tests/unit/api_fixture.h"

/* Capacity 1: two models alternate, each answer still right. */
static void test_cache_capacity_one(void **state)
{
    (void)state;
    fit_toy(api, "c1", "");
    double y2[N];
    for (size_t i = 0; i < N; i++)
        y2[i] = 2.0 * ytr[i];
    char *body = fit_body("c2", "", Xtr, y2, N, D);
    gp_response res = {0};
    fit_ok(api, body, &res);
    gp_response_free(&res);
    free(body);
    char *pb = points_body(Xte, M, D, "");
    gp_response ref1 = {0}, ref2 = {0};
    predict_json(api, "c1", pb, &ref1);
    predict_json(api, "c2", pb, &ref2);
    gp_api *small = open_api(1);
    for (int round = 0; round < 3; round++) {
        gp_response a = {0}, b = {0};
        predict_json(small, "c1", pb, &a);
        predict_json(small, "c2", pb, &b);
        expect_status(&a, 200);
        expect_status(&b, 200);
        assert_int_equal(a.body_len, ref1.body_len);
        assert_memory_equal(a.body, ref1.body, a.body_len);
        assert_int_equal(b.body_len, ref2.body_len);
        assert_memory_equal(b.body, ref2.body, b.body_len);
        gp_response_free(&a);
        gp_response_free(&b);
        gp_api_stats st;
        gp_api_get_stats(small, &st);
        assert_int_equal(st.models_loaded, 1);
    }
    /* a model fitted through another api on the same database is served */
    double y3[N];
    for (size_t i = 0; i < N; i++)
        y3[i] = ytr[i] + 10.0;
    body = fit_body("c1", "", Xtr, y3, N, D);
    fit_ok(small, body, &res);
    gp_response_free(&res);
    free(body);
    gp_response after = {0};
    predict_json(api, "c1", pb, &after);
    expect_status(&after, 200);
    assert_non_null(strstr(after.body, "\"version\":2,"));
    gp_response_free(&after);
    gp_api_close(small);
    gp_response_free(&ref1);
    gp_response_free(&ref2);
    free(pb);
}

/* Kernel JSON: a fitted kernel sent back (all fixed) fits to the same values. */
static void test_kernel_json_roundtrip(void **state)
{
    (void)state;
    const char *kj = "{\"type\":\"product\",\"terms\":[{\"type\":\"sum\",\"terms\":["
                     "{\"type\":\"rbf\",\"ard\":true,\"lengthscale\":[0.5,2],\"variance\":1.5},"
                     "{\"type\":\"rq\",\"ard\":false,\"lengthscale\":0.7,\"variance\":0.3,"
                     "\"alpha\":2,\"active_dims\":[1],\"fixed\":[\"alpha\"]}]},"
                     "{\"type\":\"periodic\",\"lengthscale\":1,\"variance\":1,\"period\":3,"
                     "\"active_dims\":[0],\"fixed\":true}]}";
    json_error_t je;
    json_t *in = json_loads(kj, 0, &je);
    assert_non_null(in);
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_from_json(in, "kernel", 2, NULL, &k, &err), GP_OK);
    json_t *out = gp_kernel_to_json(k);
    char *a = json_dumps(out, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    gp_kernel *k2 = NULL;
    assert_int_equal(gp_kernel_from_json(out, "kernel", 2, NULL, &k2, &err), GP_OK);
    json_t *out2 = gp_kernel_to_json(k2);
    char *b = json_dumps(out2, JSON_COMPACT | JSON_SORT_KEYS | JSON_REAL_PRECISION(17));
    assert_string_equal(a, b);
    assert_non_null(strstr(a, "\"fixed\":[\"alpha\"]"));
    assert_non_null(strstr(a, "\"active_dims\":[1]"));
    assert_int_equal(gp_kernel_n_params(k), gp_kernel_n_params(k2));
    free(a);
    free(b);
    json_decref(in);
    json_decref(out);
    json_decref(out2);
    gp_kernel_free(k);
    gp_kernel_free(k2);

    /* everything fixed: the fit only factorises and reports the given values */
    fit_toy(api, "fixed", "\"kernel\":{\"type\":\"matern32\",\"lengthscale\":[0.8,1.25],"
                          "\"variance\":2,\"fixed\":true},"
                          "\"noise\":{\"variance\":0.01,\"fixed\":true}");
    gp_response res = {0};
    gp_api_get_model(api, "fixed", 0, &res);
    json_t *j = res_json(&res);
    json_t *kk = json_object_get(j, "kernel");
    double ls[2];
    json_doubles(json_object_get(kk, "lengthscale"), ls, 2);
    assert_true(fabs(ls[0] - 0.8) < 1e-14 && fabs(ls[1] - 1.25) < 1e-14);
    assert_true(fabs(json_number_value(json_object_get(kk, "variance")) - 2.0) < 1e-14);
    assert_true(json_is_true(json_object_get(kk, "fixed")));
    assert_true(fabs(json_number_value(json_object_get(j, "noise_variance")) - 0.01) < 1e-15);
    json_decref(j);
    gp_response_free(&res);
}

static void test_flat_1d_and_limits(void **state)
{
    (void)state;
    gp_response res = {0};
    fit_ok(api, "{\"name\":\"one\",\"X\":[0,0.5,1,1.5,2,2.5,3],\"y\":[0,0.4,0.8,1,0.9,0.6,0.1],"
                "\"standardize\":false,\"async\":false}",
           &res);
    json_t *j = res_json(&res);
    assert_int_equal(json_integer_value(json_object_get(j, "input_dim")), 1);
    assert_true(json_is_false(json_object_get(j, "standardize")));
    json_decref(j);
    gp_response_free(&res);
    predict_json(api, "one", "{\"X\":[0.25,1.75]}", &res);
    expect_status(&res, 200);
    j = res_json(&res);
    assert_int_equal(json_array_size(json_object_get(j, "mean")), 2);
    json_decref(j);
    gp_response_free(&res);
    predict_json(api, "one", "{\"X\":[[0.25],[1.75]]}", &res);
    expect_status(&res, 200);
    gp_response_free(&res);
    /* above max_train_points (100 in this api): 413 from the size guard */
    double Xb[150], yb[150];
    for (size_t i = 0; i < 150; i++) {
        Xb[i] = (double)i / 10.0;
        yb[i] = sin(Xb[i]);
    }
    char *body = fit_body("big", "", Xb, yb, 150, 1);
    fit_json(api, body, &res);
    free(body);
    expect_error(&res, 413, "payload_too_large", "X");
    gp_response_free(&res);
}

static void test_async_parse(void **state)
{
    (void)state;
    gp_request req =
        make_req("application/json",
                 "{\"name\":\"as\",\"async\":true,\"options\":{\"restarts\":2,\"max_iterations\":50},"
                 "\"X\":[1,2,3],\"y\":[1,2,1]}",
                 NULL, 0);
    gp_fit_job *job = NULL;
    gp_error err;
    assert_int_equal(gp_api_parse_fit(api, &req, &job, &err), GP_OK);
    assert_true(gp_fit_job_async(job));
    assert_string_equal(gp_fit_job_name(job), "as");
    assert_string_equal(gp_fit_job_method(job), "exact");
    assert_int_equal(gp_fit_job_max_iterations(job), 150);
    gp_response res = {0};
    double secs = -1;
    assert_int_equal(gp_api_run_fit(api, job, NULL, NULL, &res, &secs), GP_OK);
    expect_status(&res, 201);
    assert_true(secs >= 0.0);
    gp_response_free(&res);
    gp_fit_job_free(job);
}

static int cancel_at_two(void *ctx, int iteration, int max_iterations, double objective)
{
    (void)max_iterations;
    (void)objective;
    int *calls = ctx;
    (*calls)++;
    return iteration >= 2;
}

static void test_cancelled_fit_stores_nothing(void **state)
{
    (void)state;
    char *body = fit_body("cancelme", "", Xtr, ytr, N, D);
    gp_request req = make_req("application/json", body, NULL, 0);
    gp_fit_job *job = NULL;
    gp_error err;
    assert_int_equal(gp_api_parse_fit(api, &req, &job, &err), GP_OK);
    gp_response res = {0};
    int calls = 0;
    assert_int_equal(gp_api_run_fit(api, job, cancel_at_two, &calls, &res, NULL), GP_ECANCELLED);
    assert_true(calls >= 1);
    gp_response_free(&res);
    gp_fit_job_free(job);
    free(body);
    gp_api_get_model(api, "cancelme", 0, &res);
    expect_error(&res, 404, "not_found", "name");
    gp_response_free(&res);
}

static void test_jobs_save_load(void **state)
{
    (void)state;
    gp_job_info job;
    memset(&job, 0, sizeof job);
    snprintf(job.id, sizeof job.id, "job-1");
    snprintf(job.model_name, sizeof job.model_name, "toy");
    job.status = "running";
    job.iteration = 3;
    job.max_iterations = 200;
    job.has_objective = 1;
    job.objective = -12.5;
    job.elapsed_seconds = 0.25;
    gp_error err;
    assert_int_equal(gp_api_job_save(api, &job, &err), GP_OK);
    gp_job_info back;
    assert_int_equal(gp_api_job_load(api, "job-1", &back, &err), GP_OK);
    assert_string_equal(back.status, "running");
    assert_string_equal(back.model_name, "toy");
    assert_int_equal(back.iteration, 3);
    assert_int_equal(back.max_iterations, 200);
    assert_true(back.has_objective && back.objective == -12.5);
    assert_true(back.elapsed_seconds == 0.25);
    assert_null(back.model_json);
    assert_true(back.created_at[0] != '\0');
    gp_response res = {0};
    gp_api_job_response(&back, &res);
    expect_status(&res, 200);
    json_t *j = res_json(&res);
    assert_string_equal(json_string_value(json_object_get(j, "id")), "job-1");
    assert_string_equal(json_string_value(json_object_get(j, "name")), "toy");
    assert_string_equal(json_string_value(json_object_get(j, "status")), "running");
    json_t *p = json_object_get(j, "progress");
    assert_int_equal(json_integer_value(json_object_get(p, "iteration")), 3);
    assert_true(json_number_value(json_object_get(p, "objective")) == -12.5);
    assert_null(json_object_get(j, "model"));
    assert_null(json_object_get(j, "error"));
    json_decref(j);
    gp_response_free(&res);
    gp_job_info_free(&back);

    /* failed: the error survives */
    job.status = "failed";
    gp_error_set(&job.error, GP_ENOTPD, "kernel", "not PD at jitter %g", 0.01);
    assert_int_equal(gp_api_job_save(api, &job, &err), GP_OK);
    assert_int_equal(gp_api_job_load(api, "job-1", &back, &err), GP_OK);
    assert_string_equal(back.status, "failed");
    assert_int_equal(back.error.code, GP_ENOTPD);
    assert_string_equal(back.error.field, "kernel");
    assert_string_equal(back.error.message, "not PD at jitter 0.01");
    gp_api_job_response(&back, &res);
    j = res_json(&res);
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(j, "error"), "code")),
        "not_positive_definite");
    json_decref(j);
    gp_response_free(&res);
    gp_job_info_free(&back);

    /* succeeded: the model comes back */
    job.status = "succeeded";
    gp_error_clear(&job.error);
    job.model_json = strdup("{\"name\":\"toy\",\"version\":1}");
    assert_int_equal(gp_api_job_save(api, &job, &err), GP_OK);
    assert_int_equal(gp_api_job_load(api, "job-1", &back, &err), GP_OK);
    assert_string_equal(back.model_json, job.model_json);
    gp_api_job_response(&back, &res);
    j = res_json(&res);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "model"), "version")),
                     1);
    json_decref(j);
    gp_response_free(&res);
    gp_job_info_free(&back);
    gp_job_info_free(&job);

    assert_int_equal(gp_api_job_load(api, "nosuch", &back, &err), GP_ENOTFOUND);
}

typedef struct predict_thread {
    gp_api *api;
    const char *body;
    const gp_response *ref[2];
    int failures;
} predict_thread;

static void *predict_loop(void *arg)
{
    predict_thread *t = arg;
    for (int i = 0; i < 40; i++) {
        int which = i % 2;
        gp_response r = {0};
        predict_json(t->api, which ? "t2" : "t1", t->body, &r);
        if (r.status != 200 || r.body_len != t->ref[which]->body_len ||
            memcmp(r.body, t->ref[which]->body, r.body_len) != 0)
            t->failures++;
        gp_response_free(&r);
    }
    return NULL;
}

/* Threads predicting on two models through a cache of one: evictions while
 * models are in use (reference counts; run under ASan by make test SAN=1). */
static void test_concurrent_predict(void **state)
{
    (void)state;
    fit_toy(api, "t1", "");
    fit_toy(api, "t2", "\"kernel\":{\"type\":\"matern12\"}");
    char *pb = points_body(Xte, M, D, "\"quantiles\":[0.25]");
    gp_response ref1 = {0}, ref2 = {0};
    predict_json(api, "t1", pb, &ref1);
    predict_json(api, "t2", pb, &ref2);
    expect_status(&ref1, 200);
    expect_status(&ref2, 200);
    gp_api *small = open_api(1);
    enum { T = 4 };
    pthread_t th[T];
    predict_thread args[T];
    for (int i = 0; i < T; i++) {
        args[i] = (predict_thread){small, pb, {&ref1, &ref2}, 0};
        assert_int_equal(pthread_create(&th[i], NULL, predict_loop, &args[i]), 0);
    }
    for (int i = 0; i < T; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(args[i].failures, 0);
    }
    gp_api_stats st;
    gp_api_get_stats(small, &st);
    assert_int_equal(st.models_loaded, 1);
    gp_api_close(small);
    gp_response_free(&ref1);
    gp_response_free(&ref2);
    free(pb);
}

static void test_shortest_format(void **state)
{
    (void)state;
    char buf[32];
    gp_format_shortest(0.05, buf, sizeof buf);
    assert_string_equal(buf, "0.05");
    gp_format_shortest(0.975, buf, sizeof buf);
    assert_string_equal(buf, "0.975");
    gp_format_shortest(1.0 / 3.0, buf, sizeof buf);
    assert_true(strtod(buf, NULL) == 1.0 / 3.0);
    gp_buf b;
    gp_buf_init(&b);
    gp_buf_json_number(&b, 0.1);
    assert_string_equal(b.data, "0.10000000000000001");
    gp_buf_free(&b);
}

/* Dynamic batching at the api: predict calls with different options (and one
 * with a wrong shape) answered by one gp_api_point_calls_run give the bytes
 * each gets alone from gp_api_predict; samples too. For a single-Gaussian
 * method (exact) and a mixture with components (msrfr). */
static void check_batched_calls(const char *model)
{
    static const char *const bodies[] = {
        "{\"X\":[[0.1,0.2]]}",
        "{\"X\":[[0.3,-0.2],[1.1,0.4]],\"include_noise\":false}",
        "{\"X\":[[-0.7,0.9]],\"quantiles\":[0.1,0.9]}",
        "{\"X\":[[0.5,0.5],[0.6,0.6],[-1.5,1.0]]}",
        "{\"X\":[[0.2,0.1],[0.9,-0.4]],\"full_covariance\":true}",
        "{\"X\":[[1.7,-1.2]],\"include_noise\":false}",
        "{\"X\":[[1.0,2.0,3.0]]}",
        "{\"X\":[[0.4,0.4]],\"components\":true}",
        "{\"X\":[[0.1,0.2]],\"version\":1}",
    };
    enum { NC = sizeof bodies / sizeof bodies[0] };
    gp_point_call *calls[NC];
    gp_response alone[NC], batched[NC];
    for (size_t i = 0; i < NC; i++) {
        predict_json(api, model, bodies[i], &alone[i]);
        memset(&batched[i], 0, sizeof batched[i]);
        gp_request req = make_req("application/json", bodies[i], NULL, 0);
        gp_response res = {0};
        assert_int_equal(gp_api_point_call_parse(api, GP_CALL_PREDICT, model, &req, &calls[i],
                                                 &res), GP_OK);
    }
    assert_true(gp_api_point_call_joinable(calls[0], calls[3]));
    assert_false(gp_api_point_call_joinable(calls[0], calls[1])); /* include_noise */
    assert_false(gp_api_point_call_joinable(calls[0], calls[8])); /* version */
    assert_false(gp_api_point_call_batchable(calls[4]));          /* a covariance */
    gp_api_point_calls_run(api, calls, NC - 1, batched); /* the same model row */
    gp_api_point_calls_run(api, &calls[NC - 1], 1, &batched[NC - 1]);
    for (size_t i = 0; i < NC; i++) {
        if (alone[i].status != batched[i].status || alone[i].body_len != batched[i].body_len ||
            memcmp(alone[i].body, batched[i].body, alone[i].body_len) != 0)
            fail_msg("%s call %zu: batched %d %.*s\nalone %d %.*s", model, i, batched[i].status,
                     (int)batched[i].body_len, batched[i].body, alone[i].status,
                     (int)alone[i].body_len, alone[i].body);
        gp_response_free(&alone[i]);
        gp_response_free(&batched[i]);
    }
    /* samples: one after the other under one look-up, each as alone */
    const char *sb[2] = {"{\"X\":[[0.1,0.2],[0.3,0.4]],\"seed\":5,\"n_samples\":3}",
                         "{\"X\":[[0.1,0.2]],\"seed\":6}"};
    gp_point_call *sc[2];
    gp_response sa[2], sbat[2] = {{0}};
    for (size_t i = 0; i < 2; i++) {
        sample_json(api, model, sb[i], &sa[i]);
        gp_request req = make_req("application/json", sb[i], NULL, 0);
        gp_response res = {0};
        assert_int_equal(gp_api_point_call_parse(api, GP_CALL_SAMPLE, model, &req, &sc[i], &res),
                         GP_OK);
    }
    gp_api_point_calls_run(api, sc, 2, sbat);
    for (size_t i = 0; i < 2; i++) {
        expect_status(&sbat[i], 200);
        assert_int_equal(sa[i].body_len, sbat[i].body_len);
        assert_memory_equal(sa[i].body, sbat[i].body, sa[i].body_len);
        gp_response_free(&sa[i]);
        gp_response_free(&sbat[i]);
    }
}

static void test_batched_calls_match_alone(void **state)
{
    (void)state;
    fit_toy(api, "batch-exact", "");
    check_batched_calls("batch-exact");
    fit_toy(api, "batch-msrfr",
            "\"method\":\"msrfr\",\"options\":{\"particles\":3,\"features\":10,"
            "\"iterations\":10}");
    check_batched_calls("batch-msrfr");
    /* a parse error is answered at once, as gp_api_predict answers it */
    gp_request req = make_req("application/json", "{\"X\":[[0.1,", NULL, 0);
    gp_point_call *c = NULL;
    gp_response res = {0};
    assert_int_not_equal(gp_api_point_call_parse(api, GP_CALL_PREDICT, "batch-exact", &req, &c,
                                                 &res), GP_OK);
    assert_null(c);
    expect_status(&res, 400);
    gp_response_free(&res);
}

/* The key that asked for a fit (gp_request.key_name) is the version's
 * created_by, also when the fit runs from the request its job stored (a
 * durable job run again); a caller cannot state created_by itself, and
 * without a key there is none. */
static void test_created_by_from_the_key(void **state)
{
    (void)state;
    const char *body = "{\"name\":\"cb\",\"X\":[1,2,3],\"y\":[1,2,1]}";
    gp_request req = make_req("application/json", body, NULL, 0);
    req.key_name = "trainer";
    gp_fit_job *job = NULL;
    gp_error err;
    assert_int_equal(gp_api_parse_fit(api, &req, &job, &err), GP_OK);
    const char *spec;
    const double *X, *y;
    size_t n, d, p;
    assert_int_equal(gp_fit_job_request(job, &spec, &X, &y, &n, &d, &p), GP_OK);
    assert_non_null(strstr(spec, "\"created_by\":\"trainer\""));
    double *X2 = malloc(n * d * sizeof *X2), *y2 = malloc(n * sizeof *y2);
    assert_non_null(X2);
    assert_non_null(y2);
    memcpy(X2, X, n * d * sizeof *X2);
    memcpy(y2, y, n * sizeof *y2);
    gp_fit_job *again = NULL;
    assert_int_equal(gp_fit_job_from_request(api, spec, X2, y2, n, d, p, &again, &err), GP_OK);
    gp_response res = {0};
    assert_int_equal(gp_api_run_fit(api, again, NULL, NULL, &res, NULL), GP_OK);
    json_t *o = res_json(&res);
    assert_string_equal(json_string_value(json_object_get(o, "created_by")), "trainer");
    json_decref(o);
    gp_response_free(&res);
    gp_fit_job_free(job);
    gp_fit_job_free(again);
    /* no key: no created_by */
    gp_request anon = make_req("application/json", body, NULL, 0);
    do_fit(api, &anon, &res);
    expect_status(&res, 201);
    o = res_json(&res);
    assert_null(json_object_get(o, "created_by"));
    json_decref(o);
    gp_response_free(&res);
    /* a caller's own created_by is an unknown field */
    gp_request forged = make_req(
        "application/json", "{\"name\":\"cb\",\"created_by\":\"boss\",\"X\":[1,2,3],\"y\":[1,2,1]}",
        NULL, 0);
    do_fit(api, &forged, &res);
    expect_error(&res, 400, "invalid_argument", "created_by");
    gp_response_free(&res);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shortest_format),
        cmocka_unit_test(test_cache_capacity_one),
        cmocka_unit_test(test_concurrent_predict),
        cmocka_unit_test(test_batched_calls_match_alone),
        cmocka_unit_test(test_kernel_json_roundtrip),
        cmocka_unit_test(test_flat_1d_and_limits),
        cmocka_unit_test(test_async_parse),
        cmocka_unit_test(test_cancelled_fit_stores_nothing),
        cmocka_unit_test(test_jobs_save_load),
        cmocka_unit_test(test_created_by_from_the_key),
    };
    return cmocka_run_group_tests_name("api", tests, group_setup, group_teardown);
}
