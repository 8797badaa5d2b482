/* api: health, the error catalogue's answers, fit/predict/sample against core,
 * versions, CSV = JSON, reopen gives bit-identical responses, delete, two
 * replicas on one database. What the api describes of itself is
 * test_api_describe.c's, the cache, jobs and batched calls test_api_fits.c's. */
#include "tests/unit/api_testutil.h"

#include <libpq-fe.h>
#include <limits.h>
#include <pthread.h>
#include <time.h>

#include "core/methods/registry.h"
#include "api/ui_assets.h"
#include "core/model/model.h"
#include "tests/unit/api_fixture.h"

static void test_health_and_readiness(void **state)
{
    (void)state;
    gp_response res = {0};
    gp_api_health(&res);
    expect_status(&res, 200);
    assert_string_equal(res.body, "{\"status\":\"ok\"}");
    gp_response_free(&res);
    gp_api_readiness(api, &res);
    expect_status(&res, 200);
    assert_string_equal(res.body, "{\"status\":\"ready\"}");
    assert_true(gp_api_ready(api));
    gp_response_free(&res);
}

static void test_error_catalogue(void **state)
{
    (void)state;
    assert_int_equal(gp_api_http_status(GP_EINVAL), 400);
    assert_int_equal(gp_api_http_status(GP_EMALFORMED), 400);
    assert_int_equal(gp_api_http_status(GP_EDATA), 422);
    assert_int_equal(gp_api_http_status(GP_ENOTPD), 422);
    assert_int_equal(gp_api_http_status(GP_EUNSUPPORTED), 422);
    assert_int_equal(gp_api_http_status(GP_ETOOBIG), 413);
    assert_int_equal(gp_api_http_status(GP_ENOTFOUND), 404);
    assert_int_equal(gp_api_http_status(GP_EMEDIATYPE), 415);
    assert_int_equal(gp_api_http_status(GP_EOVERLOADED), 429);
    assert_int_equal(gp_api_http_status(GP_ENOTREADY), 503);
    assert_int_equal(gp_api_http_status(GP_ENOMEM), 503);
    assert_int_equal(gp_api_http_status(GP_ESTORAGE), 507);
    assert_int_equal(gp_api_http_status(GP_EINTERNAL), 500);
    assert_int_equal(gp_api_http_status(GP_ECANCELLED), 500);
    assert_int_equal(gp_api_http_status(GP_EUNAUTHORIZED), 401);
    assert_int_equal(gp_api_http_status(GP_EMETHOD), 405);
    assert_int_equal(gp_api_http_status(GP_ECONFLICT), 409);
    gp_response res = {0};
    gp_api_fail(&res, GP_EDATA, "X[3]", "X[3] has %d columns; model '%s' expects %d", 4,
                "concrete", 8);
    assert_string_equal(res.body, "{\"error\":{\"code\":\"invalid_data\",\"message\":\"X[3] has 4 "
                                  "columns; model 'concrete' expects 8\",\"field\":\"X[3]\"}}");
    gp_response_free(&res);
    /* no field: omitted; control characters and bad UTF-8 escaped */
    gp_api_fail(&res, GP_EINVAL, NULL, "a\"b\n\xff");
    assert_string_equal(res.body, "{\"error\":{\"code\":\"invalid_argument\",\"message\":"
                                  "\"a\\\"b\\u000a\\ufffd\"}}");
    gp_response_free(&res);
    assert_true(gp_api_valid_name("a.B_9-z"));
    assert_false(gp_api_valid_name(""));
    assert_false(gp_api_valid_name("a b"));
    char long_name[70];
    memset(long_name, 'x', 65);
    long_name[65] = '\0';
    assert_false(gp_api_valid_name(long_name));
    long_name[64] = '\0';
    assert_true(gp_api_valid_name(long_name));
}

/* Fit through the API, predict; the same fit through core predicts the same
 * numbers bit for bit (17 significant digits read back exactly). */
static void test_fit_predict_matches_core(void **state)
{
    (void)state;
    char *body = fit_body("toy", "\"seed\":0", Xtr, ytr, N, D);
    gp_response res = {0};
    fit_ok(api, body, &res);
    free(body);
    json_t *fit = res_json(&res);
    assert_string_equal(json_string_value(json_object_get(fit, "name")), "toy");
    assert_int_equal(json_integer_value(json_object_get(fit, "version")), 1);
    assert_string_equal(json_string_value(json_object_get(fit, "status")), "ready");
    assert_string_equal(json_string_value(json_object_get(fit, "method")), "exact");
    assert_int_equal(json_integer_value(json_object_get(fit, "n_train")), N);
    assert_int_equal(json_integer_value(json_object_get(fit, "input_dim")), D);
    json_t *diag = json_object_get(fit, "diagnostics");
    assert_string_equal(json_string_value(json_object_get(diag, "objective_name")),
                        "log_marginal_likelihood");
    assert_true(json_is_number(json_object_get(diag, "objective")));
    assert_true(json_is_integer(json_object_get(diag, "iterations")));
    assert_true(json_is_integer(json_object_get(diag, "evaluations")));
    assert_true(json_is_boolean(json_object_get(diag, "converged")));
    assert_true(json_is_number(json_object_get(diag, "fit_seconds")));
    assert_true(json_is_number(json_object_get(fit, "noise_variance")));
    assert_true(json_is_object(json_object_get(fit, "standardization")));
    assert_true(json_is_string(json_object_get(fit, "created_at")));
    assert_non_null(json_object_get(json_object_get(fit, "hyperparameters"), "lengthscale[1]"));
    assert_int_equal(res.n_headers, 1);
    assert_string_equal(res.headers[0].name, "Location");
    assert_string_equal(res.headers[0].value, "/v1/models/toy/versions/1");
    gp_model *model = core_fit(Xtr, ytr, N, D);
    /* the fitted kernel is the core's */
    json_t *kj = gp_kernel_to_json(model->kernel);
    assert_true(json_equal(kj, json_object_get(fit, "kernel")));
    json_decref(kj);
    json_decref(fit);
    gp_response_free(&res);

    double mean[M], var[M], cov[M * M], got[M], gcov[M];
    gp_prediction pr = {.mean = mean, .variance = var, .covariance = cov};
    gp_predict_request preq = {.X = Xte, .m = M, .d = D, .include_noise = 1, .full_covariance = 1};
    gp_error err;
    assert_int_equal(gp_model_predict(model, &preq, &pr, &err), GP_OK);
    body = points_body(Xte, M, D, "\"full_covariance\":true,\"quantiles\":[0.05,0.5,0.975]");
    predict_json(api, "toy", body, &res);
    free(body);
    expect_status(&res, 200);
    json_t *p = res_json(&res);
    assert_string_equal(json_string_value(json_object_get(p, "name")), "toy");
    assert_int_equal(json_integer_value(json_object_get(p, "version")), 1);
    json_doubles(json_object_get(p, "mean"), got, M);
    for (size_t i = 0; i < M; i++)
        assert_true(got[i] == mean[i]);
    json_doubles(json_object_get(p, "variance"), got, M);
    for (size_t i = 0; i < M; i++)
        assert_true(got[i] == var[i]);
    json_t *c = json_object_get(p, "covariance");
    assert_int_equal(json_array_size(c), M);
    for (size_t i = 0; i < M; i++) {
        json_doubles(json_array_get(c, i), gcov, M);
        for (size_t j = 0; j < M; j++)
            assert_true(gcov[j] == cov[j * M + i]);
    }
    json_t *q = json_object_get(p, "quantiles");
    assert_int_equal(json_object_size(q), 3);
    const char *keys[3] = {"0.05", "0.5", "0.975"};
    double ps[3] = {0.05, 0.5, 0.975};
    for (size_t k = 0; k < 3; k++) {
        json_doubles(json_object_get(q, keys[k]), got, M);
        for (size_t i = 0; i < M; i++)
            assert_true(got[i] == mean[i] + sqrt(var[i]) * gp_normal_quantile(ps[k]));
    }
    json_decref(p);
    gp_response_free(&res);

    /* include_noise false gives the latent variance */
    preq.include_noise = 0;
    preq.full_covariance = 0;
    pr.covariance = NULL;
    assert_int_equal(gp_model_predict(model, &preq, &pr, &err), GP_OK);
    body = points_body(Xte, M, D, "\"include_noise\":false");
    predict_json(api, "toy", body, &res);
    free(body);
    expect_status(&res, 200);
    p = res_json(&res);
    json_doubles(json_object_get(p, "variance"), got, M);
    for (size_t i = 0; i < M; i++)
        assert_true(got[i] == var[i]);
    assert_null(json_object_get(p, "covariance"));
    assert_null(json_object_get(p, "quantiles"));
    json_decref(p);
    gp_response_free(&res);

    /* samples equal the core's for the same seed */
    double S[M * 3], gs[M];
    gp_sample_request sr = {Xte, M, D, 3, 5, 0};
    assert_int_equal(gp_model_sample(model, &sr, S, &err), GP_OK);
    body = points_body(Xte, M, D, "\"n_samples\":3,\"seed\":5");
    sample_json(api, "toy", body, &res);
    free(body);
    expect_status(&res, 200);
    p = res_json(&res);
    json_t *samples = json_object_get(p, "samples");
    assert_int_equal(json_array_size(samples), 3);
    for (size_t s = 0; s < 3; s++) {
        json_doubles(json_array_get(samples, s), gs, M);
        for (size_t i = 0; i < M; i++)
            assert_true(gs[i] == S[s * M + i]);
    }
    json_decref(p);
    gp_response_free(&res);
    gp_model_free(model);
}

static void test_predict_versions(void **state)
{
    (void)state;
    double y2[N];
    for (size_t i = 0; i < N; i++)
        y2[i] = -ytr[i];
    fit_toy(api, "ver", "");
    char *body = fit_body("ver", "", Xtr, y2, N, D);
    gp_response res = {0};
    fit_ok(api, body, &res);
    free(body);
    json_t *j = res_json(&res);
    assert_int_equal(json_integer_value(json_object_get(j, "version")), 2);
    json_decref(j);
    gp_response_free(&res);

    char *pb = points_body(Xte, M, D, "");
    char *pb1 = points_body(Xte, M, D, "\"version\":1");
    char *pb2 = points_body(Xte, M, D, "\"version\":2");
    gp_response latest = {0}, v1 = {0}, v2 = {0};
    predict_json(api, "ver", pb, &latest);
    predict_json(api, "ver", pb1, &v1);
    predict_json(api, "ver", pb2, &v2);
    expect_status(&latest, 200);
    expect_status(&v1, 200);
    expect_status(&v2, 200);
    assert_int_equal(latest.body_len, v2.body_len);
    assert_memory_equal(latest.body, v2.body, v2.body_len);
    assert_non_null(strstr(v1.body, "\"version\":1,"));
    assert_non_null(strstr(v2.body, "\"version\":2,"));
    json_t *a = res_json(&v1), *b = res_json(&v2);
    double m1[M], m2[M];
    json_doubles(json_object_get(a, "mean"), m1, M);
    json_doubles(json_object_get(b, "mean"), m2, M);
    for (size_t i = 0; i < M; i++)
        assert_true(fabs(m1[i] + m2[i]) < 1e-6 * (1 + fabs(m1[i])));
    json_decref(a);
    json_decref(b);
    gp_response_free(&latest);
    gp_response_free(&v1);
    gp_response_free(&v2);
    free(pb);
    free(pb1);
    free(pb2);

    /* GET: latest with versions; one version */
    gp_api_get_model(api, "ver", 0, &res);
    expect_status(&res, 200);
    j = res_json(&res);
    assert_int_equal(json_integer_value(json_object_get(j, "version")), 2);
    json_t *vs = json_object_get(j, "versions");
    assert_int_equal(json_array_size(vs), 2);
    assert_int_equal(json_integer_value(json_array_get(vs, 0)), 1);
    assert_int_equal(json_integer_value(json_array_get(vs, 1)), 2);
    json_decref(j);
    gp_response_free(&res);
    gp_api_get_model(api, "ver", 1, &res);
    expect_status(&res, 200);
    j = res_json(&res);
    assert_int_equal(json_integer_value(json_object_get(j, "version")), 1);
    assert_null(json_object_get(j, "versions"));
    assert_true(json_is_object(json_object_get(j, "kernel")));
    json_decref(j);
    gp_response_free(&res);

    /* list */
    gp_api_list_models(api, NULL, NULL, &res);
    expect_status(&res, 200);
    j = res_json(&res);
    json_t *models = json_object_get(j, "models");
    int found = 0;
    for (size_t i = 0; i < json_array_size(models); i++) {
        json_t *m = json_array_get(models, i);
        if (strcmp(json_string_value(json_object_get(m, "name")), "ver") == 0) {
            found = 1;
            assert_int_equal(json_integer_value(json_object_get(m, "version")), 2);
            assert_int_equal(json_integer_value(json_object_get(m, "n_train")), N);
            assert_int_equal(json_integer_value(json_object_get(m, "input_dim")), D);
            assert_string_equal(json_string_value(json_object_get(m, "method")), "exact");
        }
    }
    assert_true(found);
    json_decref(j);
    gp_response_free(&res);
}

/* A CSV body fits the same model as the JSON body with the same data. */
static void test_csv_equals_json(void **state)
{
    (void)state;
    fit_toy(api, "viajson", "\"seed\":3");
    gp_buf b;
    gp_buf_init(&b);
    gp_buf_puts(&b, "\xEF\xBB\xBFtarget, a ,b\r\n"); /* BOM, blanks, CRLF */
    for (size_t i = 0; i < N; i++) {
        gp_buf_json_number(&b, ytr[i]);
        for (size_t k = 0; k < D; k++) {
            gp_buf_puts(&b, ",");
            gp_buf_json_number(&b, Xtr[k * N + i]);
        }
        gp_buf_puts(&b, "\r\n");
    }
    gp_buf_puts(&b, "\r\n\n");
    gp_query_param q[] = {{"name", "viacsv"}, {"target", "target"}, {"seed", "3"},
                          {"method", "exact"}};
    gp_request req = make_req("text/csv; charset=utf-8", b.data, q, 4);
    gp_response res = {0};
    do_fit(api, &req, &res);
    expect_status(&res, 201);
    json_t *csvfit = res_json(&res);
    gp_response_free(&res);
    /* target by index too */
    q[1].value = "0";
    q[0].value = "viacsv2";
    do_fit(api, &req, &res);
    expect_status(&res, 201);
    gp_response_free(&res);
    gp_buf_free(&b);

    gp_api_get_model(api, "viajson", 0, &res);
    json_t *jsonfit = res_json(&res);
    gp_response_free(&res);
    assert_true(json_equal(json_object_get(csvfit, "kernel"), json_object_get(jsonfit, "kernel")));
    assert_true(json_equal(json_object_get(csvfit, "noise_variance"),
                           json_object_get(jsonfit, "noise_variance")));
    json_decref(csvfit);
    json_decref(jsonfit);

    char *pb = points_body(Xte, M, D, "");
    gp_response a = {0}, c = {0}, c2 = {0};
    predict_json(api, "viajson", pb, &a);
    predict_json(api, "viacsv", pb, &c);
    predict_json(api, "viacsv2", pb, &c2);
    free(pb);
    const char *ma = strstr(a.body, "\"mean\""), *mc = strstr(c.body, "\"mean\""),
               *mc2 = strstr(c2.body, "\"mean\"");
    assert_non_null(ma);
    assert_non_null(mc);
    assert_string_equal(ma, mc);
    assert_string_equal(ma, mc2);
    gp_response_free(&a);
    gp_response_free(&c);
    gp_response_free(&c2);

    /* the stored spec of a CSV fit is reported back through GET (method, seed) */
    gp_api_get_model(api, "viacsv", 1, &res);
    expect_status(&res, 200);
    gp_response_free(&res);
}

/* Close and reopen on the same database: byte-identical predict and sample. */
static void test_reopen_bit_identical(void **state)
{
    (void)state;
    fit_toy(api, "persist", "\"kernel\":{\"type\":\"sum\",\"terms\":[{\"type\":\"matern52\"},"
                            "{\"type\":\"linear\",\"active_dims\":[1]}]}");
    char *pb = points_body(Xte, M, D, "\"full_covariance\":true,\"quantiles\":[0.1]");
    char *sb = points_body(Xte, M, D, "\"n_samples\":4,\"seed\":99,\"include_noise\":true");
    gp_response p1 = {0}, s1 = {0}, p2 = {0}, s2 = {0}, g1 = {0}, g2 = {0};
    predict_json(api, "persist", pb, &p1);
    sample_json(api, "persist", sb, &s1);
    gp_api_get_model(api, "persist", 0, &g1);
    expect_status(&p1, 200);
    expect_status(&s1, 200);
    gp_api_close(api);
    api = open_api(32);
    gp_api_stats st;
    gp_api_get_stats(api, &st);
    assert_int_equal(st.models_loaded, 0);
    predict_json(api, "persist", pb, &p2);
    sample_json(api, "persist", sb, &s2);
    gp_api_get_model(api, "persist", 0, &g2);
    expect_status(&p2, 200);
    expect_status(&s2, 200);
    assert_int_equal(p1.body_len, p2.body_len);
    assert_memory_equal(p1.body, p2.body, p1.body_len);
    assert_int_equal(s1.body_len, s2.body_len);
    assert_memory_equal(s1.body, s2.body, s1.body_len);
    assert_int_equal(g1.body_len, g2.body_len);
    assert_memory_equal(g1.body, g2.body, g1.body_len);
    gp_api_get_stats(api, &st);
    assert_int_equal(st.models_loaded, 1);
    free(pb);
    free(sb);
    gp_response_free(&p1);
    gp_response_free(&p2);
    gp_response_free(&s1);
    gp_response_free(&s2);
    gp_response_free(&g1);
    gp_response_free(&g2);
}

static void test_samples_reproducible(void **state)
{
    (void)state;
    fit_toy(api, "samp", "");
    char *a = points_body(Xte, M, D, "\"seed\":1");
    char *b = points_body(Xte, M, D, "\"seed\":2");
    gp_response r1 = {0}, r2 = {0}, r3 = {0};
    sample_json(api, "samp", a, &r1);
    sample_json(api, "samp", a, &r2);
    sample_json(api, "samp", b, &r3);
    expect_status(&r1, 200);
    assert_int_equal(r1.body_len, r2.body_len);
    assert_memory_equal(r1.body, r2.body, r1.body_len);
    assert_true(r1.body_len != r3.body_len || memcmp(r1.body, r3.body, r1.body_len) != 0);
    json_t *j = res_json(&r1);
    json_t *s = json_object_get(j, "samples");
    assert_int_equal(json_array_size(s), 10); /* default n_samples */
    assert_int_equal(json_array_size(json_array_get(s, 9)), M);
    json_decref(j);
    free(a);
    free(b);
    gp_response_free(&r1);
    gp_response_free(&r2);
    gp_response_free(&r3);
}

static void test_delete_then_404(void **state)
{
    (void)state;
    fit_toy(api, "gone", "");
    char *pb = points_body(Xte, M, D, "");
    gp_response res = {0};
    predict_json(api, "gone", pb, &res);
    expect_status(&res, 200);
    gp_response_free(&res);
    gp_api_stats before, after;
    gp_api_get_stats(api, &before);
    gp_api_delete_model(api, "gone", NULL, &res);
    expect_status(&res, 204);
    assert_null(res.body);
    assert_int_equal(res.body_len, 0);
    gp_response_free(&res);
    gp_api_get_stats(api, &after);
    assert_int_equal(after.models_loaded + 1, before.models_loaded);
    predict_json(api, "gone", pb, &res);
    expect_error(&res, 404, "not_found", "name");
    gp_response_free(&res);
    gp_api_get_model(api, "gone", 0, &res);
    expect_error(&res, 404, "not_found", "name");
    gp_response_free(&res);
    gp_api_delete_model(api, "gone", NULL, &res);
    expect_error(&res, 404, "not_found", "name");
    gp_response_free(&res);
    /* a new fit under the name starts again and serves the new model */
    fit_toy(api, "gone", "\"standardize\":false");
    predict_json(api, "gone", pb, &res);
    expect_status(&res, 200);
    gp_response_free(&res);
    free(pb);
}

/* Predict on replica r until its answer satisfies `want` (the replica's
 * store watch has seen another replica's commit: docs/design/storage.md,
 * "The change generation"); fails when it never does, as a replica that
 * kept its resolved rows without invalidation would. Not a timing
 * assertion: the bound is generous (tens of seconds under the sanitizers). */
static void predict_until(gp_api *r, const char *name, const char *pb, gp_response *res,
                          int (*want)(const gp_response *res))
{
    for (int tries = 0; tries < 20000; tries++) {
        predict_json(r, name, pb, res);
        if (want(res))
            return;
        gp_response_free(res);
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
    fail_msg("replica never served the other replica's write to '%s'", name);
}

/* Until r's store watch is up (its generation known): bounded, as above. */
static void await_watch(gp_api *r)
{
    for (int tries = 0; tries < 20000 && gp_store_generation(r->store) == 0; tries++)
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    assert_true(gp_store_generation(r->store) != 0);
}

static int is_version_2(const gp_response *res)
{
    return res->status == 200 && strstr(res->body, "\"version\":2,") != NULL;
}

static int is_not_found(const gp_response *res) { return res->status == 404; }

static int is_version_1(const gp_response *res)
{
    return res->status == 200 && strstr(res->body, "\"version\":1,") != NULL;
}

/* Two api instances on one database, as two replicas behind a load
 * balancer: a replica keeps the rows it resolved only while its store's
 * change generation stands, which another replica's commit moves (within
 * the watch's bound), so what one replica fits or deletes the other serves,
 * with the same bytes; what a replica writes itself it serves at once. */
static void two_replicas(const char *path)
{
    gp_api_config cfg;
    gp_api_default_config(&cfg);
    cfg.db_path = path;
    cfg.max_train_points = 100;
    gp_api *a = NULL, *b = NULL;
    gp_error err;
    if (gp_api_open(&cfg, &a, &err) != GP_OK || gp_api_open(&cfg, &b, &err) != GP_OK)
        fail_msg("gp_api_open: %s", err.message);
    /* Both watches up (PostgreSQL's connects after the open), so that the
     * rows resolved below are kept and must be invalidated. */
    await_watch(a);
    await_watch(b);
    double y2[N];
    for (size_t i = 0; i < N; i++)
        y2[i] = 2.0 * ytr[i] + 1.0;
    char *pb = points_body(Xte, M, D, "");
    gp_response ra = {0}, rb = {0};
    fit_toy(a, "rep", "");
    predict_json(b, "rep", pb, &rb); /* b loads version 1 into its cache */
    expect_status(&rb, 200);
    assert_non_null(strstr(rb.body, "\"version\":1,"));
    gp_response_free(&rb);
    char *body = fit_body("rep", "", Xtr, y2, N, D);
    fit_ok(a, body, &ra);
    free(body);
    gp_response_free(&ra);
    predict_json(a, "rep", pb, &ra); /* a's own write: at once */
    expect_status(&ra, 200);
    assert_non_null(strstr(ra.body, "\"version\":2,"));
    predict_until(b, "rep", pb, &rb, is_version_2);
    assert_int_equal(ra.body_len, rb.body_len);
    assert_memory_equal(ra.body, rb.body, ra.body_len);
    gp_response_free(&ra);
    gp_response_free(&rb);
    /* Deleted by a: gone from b; fitted again by b: a serves the new row.
     * (A model of a higher row id stays: SQLite gives a new row the largest
     * id + 1, so with "rep"'s rows the last ones it would reuse id 1, and b,
     * whose cache still holds the old version 1 under (name, version, id,
     * created_at), would serve it if the refit fell in the same second.
     * PostgreSQL's BIGSERIAL never reuses an id.) */
    fit_toy(a, "rep-keeper", "");
    gp_api_delete_model(a, "rep", NULL, &ra);
    expect_status(&ra, 204);
    gp_response_free(&ra);
    predict_until(b, "rep", pb, &rb, is_not_found);
    expect_error(&rb, 404, "not_found", "name");
    gp_response_free(&rb);
    predict_json(a, "rep", pb, &ra); /* a's own delete: at once */
    expect_error(&ra, 404, "not_found", "name");
    gp_response_free(&ra);
    fit_toy(b, "rep", "\"standardize\":false");
    predict_json(b, "rep", pb, &rb);
    expect_status(&rb, 200);
    assert_non_null(strstr(rb.body, "\"version\":1,"));
    predict_until(a, "rep", pb, &ra, is_version_1);
    assert_int_equal(ra.body_len, rb.body_len);
    assert_memory_equal(ra.body, rb.body, ra.body_len);
    gp_response_free(&ra);
    gp_response_free(&rb);
    free(pb);
    gp_api_close(a);
    gp_api_close(b);
}

static void test_two_replicas_sqlite(void **state)
{
    (void)state;
    char path[200];
    snprintf(path, sizeof path, "%s/replicas.db", dir);
    two_replicas(path);
}

/* The same on PostgreSQL (GPSERVE_TEST_PG_URL, a schema of its own). */
static void test_two_replicas_pg(void **state)
{
    (void)state;
    const char *url = getenv("GPSERVE_TEST_PG_URL");
    if (url == NULL || url[0] == '\0') {
        print_message("[  SKIP    ] no PostgreSQL (GPSERVE_TEST_PG_URL unset)\n");
        skip();
    }
    char schema[32], sql[96], path[600];
    snprintf(schema, sizeof schema, "gpapi%ld", (long)getpid());
    PGconn *c = PQconnectdb(url);
    assert_int_equal(PQstatus(c), CONNECTION_OK);
    snprintf(sql, sizeof sql, "CREATE SCHEMA %s", schema);
    PGresult *r = PQexec(c, sql);
    assert_int_equal(PQresultStatus(r), PGRES_COMMAND_OK);
    PQclear(r);
    snprintf(path, sizeof path, "%s%soptions=-csearch_path%%3D%s", url,
             strchr(url, '?') ? "&" : "?", schema);
    two_replicas(path);
    snprintf(sql, sizeof sql, "SET client_min_messages = warning; DROP SCHEMA %s CASCADE",
             schema);
    PQclear(PQexec(c, sql));
    PQfinish(c);
}

/* GET /v1/models/{name} answered from the body kept while the store's
 * generation stands is the body the slow path renders, byte for byte: for
 * the latest version and one version, after an observation (n_train and
 * "online" written fresh), and for a model whose name is the digits of the
 * mark the kept text is cut at. */
static void expect_same_get(const char *name, int version)
{
    gp_response r1 = {0}, r2 = {0}, r3 = {0};
    gp_api_get_model(api, name, version, &r1); /* rendered (and kept) */
    gp_api_get_model(api, name, version, &r2); /* from the kept text */
    gp_api_get_model(api, name, version, &r3);
    expect_status(&r1, 200);
    expect_status(&r2, 200);
    assert_int_equal(r1.body_len, r2.body_len);
    assert_memory_equal(r1.body, r2.body, r1.body_len);
    assert_int_equal(r1.body_len, r3.body_len);
    assert_memory_equal(r1.body, r3.body, r1.body_len);
    gp_response_free(&r1);
    gp_response_free(&r2);
    gp_response_free(&r3);
}

static void test_get_kept_body(void **state)
{
    (void)state;
    const char *names[] = {"kept", "9007199254740777"};
    for (size_t i = 0; i < 2; i++) {
        fit_toy(api, names[i], "");
        expect_same_get(names[i], 0);
        expect_same_get(names[i], 1);
        char body[128];
        snprintf(body, sizeof body, "{\"X\":[[%.3f,%.3f]],\"y\":[0.5]}", 0.25, -0.5);
        gp_request req = make_req("application/json", body, NULL, 0);
        gp_response res = {0};
        gp_api_observe(api, names[i], &req, &res);
        expect_status(&res, 200);
        gp_response_free(&res);
        expect_same_get(names[i], 0);
        gp_api_get_model(api, names[i], 0, &res);
        json_t *o = json_loads(res.body, 0, NULL);
        assert_int_equal(json_integer_value(json_object_get(o, "n_train")), N + 1);
        assert_string_equal(json_string_value(json_object_get(o, "name")), names[i]);
        json_decref(o);
        gp_response_free(&res);
        /* the largest version a request may ask: not found, twice (nothing kept) */
        for (int k = 0; k < 2; k++) {
            gp_api_get_model(api, names[i], INT_MAX, &res);
            expect_error(&res, 404, "not_found", "version");
            gp_response_free(&res);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_health_and_readiness),
        cmocka_unit_test(test_error_catalogue),
        cmocka_unit_test(test_fit_predict_matches_core),
        cmocka_unit_test(test_predict_versions),
        cmocka_unit_test(test_csv_equals_json),
        cmocka_unit_test(test_reopen_bit_identical),
        cmocka_unit_test(test_samples_reproducible),
        cmocka_unit_test(test_delete_then_404),
        cmocka_unit_test(test_get_kept_body),
        cmocka_unit_test(test_two_replicas_sqlite),
        cmocka_unit_test(test_two_replicas_pg),
    };
    return cmocka_run_group_tests_name("api", tests, group_setup, group_teardown);
}
