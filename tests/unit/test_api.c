/* api: fit/predict/sample against core, versions, CSV = JSON, reopen gives
 * bit-identical responses, delete, methods, OpenAPI, cache eviction, jobs. */
#include "tests/unit/api_testutil.h"

#include <libpq-fe.h>
#include <pthread.h>

#include "core/methods/registry.h"
#include "api/ui_assets.h"
#include "core/model/model.h"

#define N 40
#define D 2
#define M 7

static gp_api *api;
static char dir[64], db[128];
static double Xtr[N * D], ytr[N], Xte[M * D];

static gp_api *open_api(size_t cache)
{
    gp_api_config cfg;
    gp_api_default_config(&cfg);
    cfg.db_path = db;
    cfg.model_cache = cache;
    cfg.max_train_points = 100;
    gp_api *a = NULL;
    gp_error err;
    if (gp_api_open(&cfg, &a, &err) != GP_OK)
        fail_msg("gp_api_open: %s", err.message);
    return a;
}

static void fit_ok(gp_api *a, const char *body, gp_response *res)
{
    fit_json(a, body, res);
    expect_status(res, 201);
}

static void fit_toy(gp_api *a, const char *name, const char *extra)
{
    char *body = fit_body(name, extra, Xtr, ytr, N, D);
    gp_response res = {0};
    fit_ok(a, body, &res);
    gp_response_free(&res);
    free(body);
}

static int group_setup(void **state)
{
    (void)state;
    tmp_db(dir, sizeof dir, db, sizeof db);
    toy_data(N, D, 11, Xtr, ytr);
    double yte[M];
    toy_data(M, D, 12, Xte, yte);
    gp_api_config cfg;
    gp_api_default_config(&cfg);
    cfg.db_path = db;
    cfg.max_train_points = 100;
    gp_error err;
    if (gp_api_open(&cfg, &api, &err) != GP_OK) {
        fprintf(stderr, "gp_api_open: %s\n", err.message);
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    gp_api_close(api);
    rm_tree(dir);
    return 0;
}

/* The same fit through core directly. */
static gp_model *core_fit(const double *X, const double *y, size_t n, size_t d)
{
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_RBF, d, 1, NULL, 0, &err), GP_OK);
    gp_fit_request fr;
    memset(&fr, 0, sizeof fr);
    fr.X = X;
    fr.y = y;
    fr.n = n;
    fr.d = d;
    fr.kernel = k;
    fr.standardize = 1;
    fr.max_train_points = 100;
    gp_model *m = NULL;
    if (gp_model_fit(gp_method_find("exact"), &fr, &m, &err) != GP_OK)
        fail_msg("core fit: %s", err.message);
    gp_kernel_free(k);
    return m;
}

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
    gp_api_list_models(api, &res);
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
    gp_api_delete_model(api, "gone", &res);
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
    gp_api_delete_model(api, "gone", &res);
    expect_error(&res, 404, "not_found", "name");
    gp_response_free(&res);
    /* a new fit under the name starts again and serves the new model */
    fit_toy(api, "gone", "\"standardize\":false");
    predict_json(api, "gone", pb, &res);
    expect_status(&res, 200);
    gp_response_free(&res);
    free(pb);
}

/* Two api instances on one database, as two replicas behind a load
 * balancer: every predict looks the latest version up in the store (not only
 * in its own cache), so what one replica fits or deletes the other serves at
 * once, with the same bytes. */
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
    predict_json(a, "rep", pb, &ra);
    predict_json(b, "rep", pb, &rb);
    expect_status(&ra, 200);
    expect_status(&rb, 200);
    assert_non_null(strstr(rb.body, "\"version\":2,"));
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
    gp_api_delete_model(a, "rep", &ra);
    expect_status(&ra, 204);
    gp_response_free(&ra);
    predict_json(b, "rep", pb, &rb);
    expect_error(&rb, 404, "not_found", "name");
    gp_response_free(&rb);
    fit_toy(b, "rep", "\"standardize\":false");
    predict_json(a, "rep", pb, &ra);
    predict_json(b, "rep", pb, &rb);
    expect_status(&ra, 200);
    assert_non_null(strstr(ra.body, "\"version\":1,"));
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

static void test_methods_listing(void **state)
{
    (void)state;
    gp_response res = {0};
    gp_api_methods(api, &res);
    expect_status(&res, 200);
    json_t *j = res_json(&res);
    json_t *ms = json_object_get(j, "methods");
    json_t *exact = NULL;
    for (size_t i = 0; i < json_array_size(ms); i++)
        if (strcmp(json_string_value(json_object_get(json_array_get(ms, i), "name")), "exact") ==
            0)
            exact = json_array_get(ms, i);
    assert_non_null(exact);
    assert_string_equal(json_string_value(json_object_get(exact, "objective")),
                        "log_marginal_likelihood");
    assert_int_equal(json_array_size(json_object_get(exact, "kernels")), 10);
    json_t *opts = json_object_get(exact, "options");
    int seen = 0;
    for (size_t i = 0; i < json_array_size(opts); i++) {
        json_t *o = json_array_get(opts, i);
        const char *n = json_string_value(json_object_get(o, "name"));
        if (strcmp(n, "restarts") == 0) {
            seen |= 1;
            assert_string_equal(json_string_value(json_object_get(o, "type")), "integer");
            assert_int_equal(json_integer_value(json_object_get(o, "default")), 0);
            assert_int_equal(json_integer_value(json_object_get(o, "max")), 100);
        } else if (strcmp(n, "max_iterations") == 0) {
            seen |= 2;
            assert_int_equal(json_integer_value(json_object_get(o, "default")), 200);
        } else if (strcmp(n, "tolerance") == 0) {
            seen |= 4;
            assert_string_equal(json_string_value(json_object_get(o, "type")), "number");
        }
        assert_true(json_is_string(json_object_get(o, "help")));
    }
    assert_int_equal(seen, 7);
    json_decref(j);
    gp_response_free(&res);
}

static int json_list_has(json_t *list, const char *s)
{
    for (size_t i = 0; i < json_array_size(list); i++)
        if (strcmp(json_string_value(json_array_get(list, i)), s) == 0)
            return 1;
    return 0;
}

/* The listing states each method's kernels exactly as its descriptor accepts
 * them: it once listed sum and product for the single-leaf methods, which
 * then refused them with 422. */
static void test_methods_listing_kernels(void **state)
{
    (void)state;
    gp_response res = {0};
    gp_api_methods(api, &res);
    json_t *j = res_json(&res);
    json_t *ms = json_object_get(j, "methods");
    assert_int_equal(json_array_size(ms), gp_method_count());
    for (size_t i = 0; i < json_array_size(ms); i++) {
        json_t *o = json_array_get(ms, i);
        const gp_method *m = gp_method_find(json_string_value(json_object_get(o, "name")));
        assert_non_null(m);
        json_t *ks = json_object_get(o, "kernels");
        for (int t = 0; t < GP_KERNEL_TYPE_COUNT; t++) {
            const char *name = gp_kernel_type_name((gp_kernel_type)t);
            if (json_list_has(ks, name) != gp_method_accepts_kernel_type(m, (gp_kernel_type)t))
                fail_msg("%s: kernel %s listed %d, accepted %d", m->name, name,
                         json_list_has(ks, name),
                         gp_method_accepts_kernel_type(m, (gp_kernel_type)t));
        }
        assert_int_equal(json_list_has(ks, "sum"), m->composite_kernels != 0);
        assert_int_equal(json_is_true(json_object_get(o, "mixture")), gp_method_is_mixture(m));
        json_t *info = json_object_get(o, "method_info");
        assert_int_equal(json_array_size(info), m->n_info);
        json_t *pr = json_object_get(o, "progress");
        if (m->iterations_option)
            assert_string_equal(json_string_value(json_object_get(pr, "iterations_option")),
                                m->iterations_option);
    }
    /* The four single-leaf methods: no composites. */
    const char *single[] = {"ssgp", "msrfr", "sgpr", "renyi"};
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(gp_method_find(single[i])->composite_kernels, 0);
    json_decref(j);
    gp_response_free(&res);
}

/* A single-leaf method refuses sum and product with 422 unsupported, and the
 * listing does not offer them. */
static void test_single_leaf_refuses_composite(void **state)
{
    (void)state;
    const char *single[] = {"ssgp", "msrfr", "sgpr", "renyi"};
    for (size_t i = 0; i < 4; i++) {
        char body[512];
        snprintf(body, sizeof body,
                 "{\"name\":\"c\",\"method\":\"%s\",\"kernel\":{\"type\":\"sum\",\"terms\":"
                 "[{\"type\":\"rbf\"},{\"type\":\"rbf\"}]},\"X\":[1,2,3],\"y\":[1,2,1]}",
                 single[i]);
        gp_request req = make_req("application/json", body, NULL, 0);
        gp_fit_job *job = NULL;
        gp_error err;
        assert_int_equal(gp_api_parse_fit(api, &req, &job, &err), GP_EUNSUPPORTED);
        assert_string_equal(err.field, "kernel.type");
        assert_null(job);
    }
}

/* A queued job's budget comes from the method's own iteration option: msrfr's
 * is `iterations` (it was reported as 0 when guessed from option names). */
static void test_job_budget_from_descriptor(void **state)
{
    (void)state;
    struct {
        const char *options;
        const char *method;
        int budget;
    } cases[] = {
        {"{}", "msrfr", 1000},
        {"{\"iterations\":37}", "msrfr", 37},
        {"{}", "ssgp", 200},
        {"{\"max_iterations\":9}", "sgpr", 9},
        {"{\"restarts\":3,\"max_iterations\":10}", "exact", 40},
        {"{}", "renyi", 200},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char body[512];
        snprintf(body, sizeof body,
                 "{\"name\":\"b\",\"method\":\"%s\",\"async\":true,\"options\":%s,"
                 "\"X\":[1,2,3],\"y\":[1,2,1]}",
                 cases[i].method, cases[i].options);
        gp_request req = make_req("application/json", body, NULL, 0);
        gp_fit_job *job = NULL;
        gp_error err;
        assert_int_equal(gp_api_parse_fit(api, &req, &job, &err), GP_OK);
        if (gp_fit_job_max_iterations(job) != cases[i].budget)
            fail_msg("%s %s: budget %d, want %d", cases[i].method, cases[i].options,
                     gp_fit_job_max_iterations(job), cases[i].budget);
        gp_fit_job_free(job);
    }
}

/* Every catalogue code goes over HTTP as its name and status, and a name reads
 * back as a code with that status; GP_ECANCELLED is answered as internal. */
static void test_error_catalogue_table(void **state)
{
    (void)state;
#define CHECK_ROW(code, value, name, http, retry, meaning)                                      \
    assert_int_equal(code, value);                                                               \
    assert_string_equal(gp_status_name(code), name);                                             \
    assert_int_equal(gp_api_http_status(code), http);                                            \
    assert_string_equal(gp_status_name(gp_status_from_name(name)), name);                        \
    assert_int_equal(gp_status_retry_after(code), retry);                                        \
    assert_true(strlen(meaning) > 0);
    GP_ERROR_CATALOGUE(CHECK_ROW)
#undef CHECK_ROW
    assert_int_equal(GP_ERROR_CODE_COUNT, 24);
    assert_int_equal(gp_status_from_name("overloaded"), GP_EOVERLOADED);
    assert_int_equal(gp_status_from_name("internal"), GP_EINTERNAL);
    assert_int_equal(gp_api_http_status(GP_OK), 200);
    assert_int_equal(gp_api_http_status(-1000), 500);
    assert_string_equal(gp_status_name(-1000), "internal");
    gp_error err;
    gp_error_set(&err, GP_ECANCELLED, NULL, "stopped");
    gp_response res = {0};
    gp_api_error(&err, &res);
    expect_error(&res, 500, "internal", "");
    gp_response_free(&res);
}

static void test_openapi_matches_file(void **state)
{
    (void)state;
    FILE *f = fopen("api/openapi.yaml", "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)len + 1);
    assert_int_equal(fread(text, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    gp_response res = {0};
    gp_api_openapi(&res);
    expect_status(&res, 200);
    assert_string_equal(res.content_type, "application/yaml");
    assert_int_equal(res.body_len, (size_t)len);
    assert_memory_equal(res.body, text, (size_t)len);
    /* every route of docs/design/api.md is in it */
    const char *paths[] = {"/healthz:", "/readyz:", "/metrics:", "/openapi.yaml:", "/v1/methods:",
                           "/v1/models:", "/v1/models/{name}:",
                           "/v1/models/{name}/versions/{version}:", "/v1/models/{name}/predict:",
                           "/v1/models/{name}/sample:", "/v1/models/{name}/observe:",
                           "/v1/jobs/{id}:"};
    for (size_t i = 0; i < sizeof paths / sizeof paths[0]; i++)
        if (strstr(res.body, paths[i]) == NULL)
            fail_msg("openapi lacks %s", paths[i]);
    free(text);
    gp_response_free(&res);
}

/* ---- the browser view's files (api/ui.c, mk/gen_assets.sh) ---- */

static const char *header_of(const gp_response *res, const char *name)
{
    for (size_t i = 0; i < res->n_headers; i++)
        if (strcmp(res->headers[i].name, name) == 0)
            return res->headers[i].value;
    return NULL;
}

/* Regular, non-hidden files under dir (recursively). */
static size_t count_files(const char *folder)
{
    DIR *d = opendir(folder);
    assert_non_null(d);
    size_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char path[512];
        snprintf(path, sizeof path, "%s/%s", folder, e->d_name);
        DIR *sub = opendir(path);
        if (sub != NULL) {
            closedir(sub);
            n += count_files(path);
        } else {
            n++;
        }
    }
    closedir(d);
    return n;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *text = malloc((size_t)n + 1);
    assert_non_null(text);
    assert_int_equal(fread(text, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    *len = (size_t)n;
    return text;
}

/* Every file of web/ is served byte for byte, with its type and headers. */
static void test_ui_assets_match_files(void **state)
{
    (void)state;
    size_t count = 0;
    const gp_ui_asset *all = gp_ui_assets(&count);
    assert_int_equal(count, count_files("web"));
    const char *must[] = {"index.html", "app.js", "style.css", "vendor/chart.umd.min.js"};
    for (size_t k = 0; k < sizeof must / sizeof must[0]; k++) {
        size_t i = 0;
        while (i < count && strcmp(all[i].path, must[k]) != 0)
            i++;
        if (i == count)
            fail_msg("web/%s is not embedded", must[k]);
    }
    for (size_t i = 0; i < count; i++) {
        char path[512];
        snprintf(path, sizeof path, "web/%s", all[i].path);
        size_t len = 0;
        char *text = read_file(path, &len);
        gp_response res = {0};
        gp_api_ui_asset(all[i].path, NULL, &res);
        expect_status(&res, 200);
        assert_int_equal(res.body_len, len);
        assert_memory_equal(res.body, text, len);
        assert_string_equal(res.content_type, gp_api_ui_content_type(all[i].path));
        assert_string_equal(header_of(&res, "ETag"), all[i].etag);
        assert_int_equal(strlen(all[i].etag), 34); /* 32 hex digits, quoted */
        assert_string_equal(header_of(&res, "Cache-Control"), "no-cache");
        assert_string_equal(header_of(&res, "X-Content-Type-Options"), "nosniff");
        const char *csp = header_of(&res, "Content-Security-Policy");
        assert_non_null(csp);
        assert_non_null(strstr(csp, "default-src 'self'"));
        assert_null(strstr(csp, "unsafe"));
        free(text);
        gp_response_free(&res);
    }
}

static void test_ui_asset_types_etags_and_404(void **state)
{
    (void)state;
    assert_string_equal(gp_api_ui_content_type("index.html"), "text/html; charset=utf-8");
    assert_string_equal(gp_api_ui_content_type("app.js"), "text/javascript; charset=utf-8");
    assert_string_equal(gp_api_ui_content_type("vendor/chart.umd.min.js"),
                        "text/javascript; charset=utf-8");
    assert_string_equal(gp_api_ui_content_type("style.css"), "text/css; charset=utf-8");
    assert_string_equal(gp_api_ui_content_type("vendor/LICENSE"), "text/plain; charset=utf-8");

    gp_response res = {0};
    gp_api_ui_asset("index.html", NULL, &res);
    expect_status(&res, 200);
    char etag[64];
    snprintf(etag, sizeof etag, "%s", header_of(&res, "ETag"));
    /* the browser's copy is current: 304, no body, the same ETag */
    char weak[80], list[160];
    snprintf(weak, sizeof weak, "W/%s", etag);
    snprintf(list, sizeof list, "\"0123\", %s", etag);
    const char *current[] = {etag, weak, list, "*"};
    for (size_t i = 0; i < 4; i++) {
        gp_api_ui_asset("index.html", current[i], &res);
        expect_status(&res, 304);
        assert_int_equal(res.body_len, 0);
        assert_null(res.body);
        assert_string_equal(header_of(&res, "ETag"), etag);
    }
    /* an older copy, or the tag unquoted: the file again */
    char bare[64];
    snprintf(bare, sizeof bare, "%.32s", etag + 1);
    const char *stale[] = {"\"0123\"", bare, ""};
    for (size_t i = 0; i < 3; i++) {
        gp_api_ui_asset("index.html", stale[i], &res);
        expect_status(&res, 200);
        assert_true(res.body_len > 0);
    }
    /* no such file: 404 in the usual shape; nothing outside the table */
    const char *missing[] = {"", "nope.js", "../Makefile", "/index.html", "vendor",
                             "index.html/", "INDEX.HTML"};
    for (size_t i = 0; i < sizeof missing / sizeof missing[0]; i++) {
        gp_api_ui_asset(missing[i], NULL, &res);
        expect_error(&res, 404, "not_found", "");
    }
    gp_api_ui_asset(NULL, NULL, &res);
    expect_error(&res, 404, "not_found", "");
    gp_response_free(&res);
}

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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_health_and_readiness),
        cmocka_unit_test(test_error_catalogue),
        cmocka_unit_test(test_shortest_format),
        cmocka_unit_test(test_fit_predict_matches_core),
        cmocka_unit_test(test_predict_versions),
        cmocka_unit_test(test_csv_equals_json),
        cmocka_unit_test(test_reopen_bit_identical),
        cmocka_unit_test(test_samples_reproducible),
        cmocka_unit_test(test_delete_then_404),
        cmocka_unit_test(test_two_replicas_sqlite),
        cmocka_unit_test(test_two_replicas_pg),
        cmocka_unit_test(test_methods_listing),
        cmocka_unit_test(test_methods_listing_kernels),
        cmocka_unit_test(test_error_catalogue_table),
        cmocka_unit_test(test_single_leaf_refuses_composite),
        cmocka_unit_test(test_job_budget_from_descriptor),
        cmocka_unit_test(test_openapi_matches_file),
        cmocka_unit_test(test_ui_assets_match_files),
        cmocka_unit_test(test_ui_asset_types_etags_and_404),
        cmocka_unit_test(test_cache_capacity_one),
        cmocka_unit_test(test_concurrent_predict),
        cmocka_unit_test(test_batched_calls_match_alone),
        cmocka_unit_test(test_kernel_json_roundtrip),
        cmocka_unit_test(test_flat_1d_and_limits),
        cmocka_unit_test(test_async_parse),
        cmocka_unit_test(test_cancelled_fit_stores_nothing),
        cmocka_unit_test(test_jobs_save_load),
    };
    return cmocka_run_group_tests_name("api", tests, group_setup, group_teardown);
}
