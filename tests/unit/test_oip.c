/* api: the Open Inference Protocol V2 (api/oip.c): server and model metadata,
 * readiness, infer against v1 predict (the same numbers, byte for byte, alone
 * and in one batch with v1 predicts), the outputs of each likelihood and of
 * a gate model, multi-output tensors, every refused request with its status
 * and field, and the protocol's error shape. */
#include "tests/unit/api_testutil.h"

#define N 30
#define D 2
#define M 5

static gp_api *api;
static char dir[64], db[128];
static double Xtr[N * D], ytr[N], Xte[M * D];

static void fit_ok(const char *body)
{
    gp_response res = {0};
    fit_json(api, body, &res);
    expect_status(&res, 201);
    gp_response_free(&res);
}

static int group_setup(void **state)
{
    (void)state;
    tmp_db(dir, sizeof dir, db, sizeof db);
    toy_data(N, D, 21, Xtr, ytr);
    double yte[M];
    toy_data(M, D, 22, Xte, yte);
    gp_api_config cfg;
    gp_api_default_config(&cfg);
    cfg.db_path = db;
    cfg.max_points = 1000;
    gp_error err;
    if (gp_api_open(&cfg, &api, &err) != GP_OK) {
        fprintf(stderr, "gp_api_open: %s\n", err.message);
        return -1;
    }
    /* "toy": an exact GP on 2 inputs, two versions */
    char *body = fit_body("toy", "\"seed\":1", Xtr, ytr, N, D);
    fit_ok(body);
    fit_ok(body);
    free(body);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    gp_api_close(api);
    rm_tree(dir);
    return 0;
}

/* ---- helpers ---- */

/* res holds a response or is zeroed (every response here starts as {0}). */
static void infer(const char *name, int version, const char *body, gp_response *res)
{
    gp_response_free(res);
    memset(res, 0, sizeof *res);
    gp_request req = make_req("application/json", body, NULL, 0);
    gp_api_oip_infer(api, name, version, &req, res);
}

/* The text of the JSON array that follows marker (and then "data": when
 * data is set) in body, brackets removed: the numbers as written. */
static char *array_text(const char *body, const char *marker, int data)
{
    const char *p = strstr(body, marker);
    if (p == NULL)
        fail_msg("'%s' not in %s", marker, body);
    if (data) {
        p = strstr(p, "\"data\":");
        assert_non_null(p);
    }
    p = strchr(p, '[');
    assert_non_null(p);
    int depth = 0;
    size_t n = 0;
    char *out = malloc(strlen(p) + 1);
    assert_non_null(out);
    for (; *p; p++) {
        if (*p == '[')
            depth++;
        else if (*p == ']' && --depth == 0)
            break;
        if (*p != '[' && *p != ']')
            out[n++] = *p;
    }
    out[n] = '\0';
    return out;
}

/* The output `name` of an infer answer has the same numbers, byte for byte,
 * as key of the v1 answer. */
static void same_numbers(const gp_response *v1, const char *key, const gp_response *v2,
                         const char *name)
{
    char k[64], nm[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    snprintf(nm, sizeof nm, "\"name\":\"%s\"", name);
    char *a = array_text(v1->body, k, 0), *b = array_text(v2->body, nm, 1);
    if (strcmp(a, b) != 0)
        fail_msg("%s: v1 [%s] but v2 [%s]", name, a, b);
    assert_true(strlen(a) > 0);
    free(a);
    free(b);
}

/* {"inputs": [{"name": "X", "shape": [m, d], "datatype": "FP64", "data": X}]<extra>}: X
 * row-major, flat or as rows (nested). */
static char *infer_body(const double *X, size_t m, size_t d, int nested, const char *extra)
{
    gp_buf b;
    gp_buf_init(&b);
    gp_buf_printf(&b, "{\"inputs\":[{\"name\":\"X\",\"shape\":[%zu,%zu],\"datatype\":\"FP64\","
                      "\"data\":",
                  m, d);
    put_matrix(&b, X, m, d, !nested); /* flat: x00, x01, x10, ... (row-major) */
    gp_buf_printf(&b, "}]%s%s}", extra[0] ? "," : "", extra);
    assert_false(b.failed);
    return b.data;
}

static void predict(const char *name, const char *body, gp_response *res)
{
    gp_response_free(res);
    predict_json(api, name, body, res);
}

static json_t *body_json(const gp_response *res)
{
    return res_json(res);
}

/* The protocol's error: status, {"error": "<string>"} that contains want. */
static void expect_oip_error(gp_response *res, int status, const char *want)
{
    gp_api_oip_error(res);
    if (res->status != status)
        fail_msg("status %d, expected %d: %.*s", res->status, status, (int)res->body_len,
                 res->body);
    json_t *j = body_json(res);
    assert_int_equal(json_object_size(j), 1);
    const char *msg = json_string_value(json_object_get(j, "error"));
    if (msg == NULL || strstr(msg, want) == NULL)
        fail_msg("error '%s' does not contain '%s'", msg ? msg : "(not a string)", want);
    json_decref(j);
}

/* ---- server metadata and health ---- */

static void test_server_metadata_and_health(void **state)
{
    (void)state;
    gp_response res = {0};
    gp_api_oip_server_metadata(&res);
    expect_status(&res, 200);
    assert_string_equal(res.body, "{\"name\":\"gpserve\",\"version\":\"1\",\"extensions\":[]}");
    gp_api_oip_live(&res);
    expect_status(&res, 200);
    assert_string_equal(res.body, "{\"live\":true}");
    gp_api_oip_ready(api, &res);
    expect_status(&res, 200);
    assert_string_equal(res.body, "{\"ready\":true}");
    gp_response_free(&res);
}

/* ---- model metadata and readiness ---- */

static void test_model_metadata(void **state)
{
    (void)state;
    gp_response res = {0};
    gp_api_oip_model_metadata(api, "toy", 0, &res);
    expect_status(&res, 200);
    assert_string_equal(res.body,
                        "{\"name\":\"toy\",\"versions\":[\"1\",\"2\"],\"platform\":\"gpserve\","
                        "\"inputs\":[{\"name\":\"X\",\"datatype\":\"FP64\",\"shape\":[-1,2]}],"
                        "\"outputs\":[{\"name\":\"mean\",\"datatype\":\"FP64\",\"shape\":[-1]},"
                        "{\"name\":\"variance\",\"datatype\":\"FP64\",\"shape\":[-1]}]}");
    gp_api_oip_model_metadata(api, "toy", 1, &res);
    expect_status(&res, 200);
    json_t *j = body_json(&res);
    json_t *v = json_object_get(j, "versions");
    assert_int_equal(json_array_size(v), 1);
    assert_string_equal(json_string_value(json_array_get(v, 0)), "1");
    json_decref(j);
    gp_api_oip_model_metadata(api, "nope", 0, &res);
    expect_error(&res, 404, "not_found", "name");
    expect_oip_error(&res, 404, "nope");
    gp_api_oip_model_metadata(api, "toy", 9, &res);
    expect_error(&res, 404, "not_found", "version");

    gp_api_oip_model_ready(api, "toy", 0, &res);
    expect_status(&res, 200);
    assert_string_equal(res.body, "{\"name\":\"toy\",\"ready\":true}");
    gp_api_oip_model_ready(api, "toy", 2, &res);
    expect_status(&res, 200);
    gp_api_oip_model_ready(api, "nope", 0, &res);
    expect_oip_error(&res, 404, "nope");
    gp_api_oip_model_ready(api, "toy", 3, &res);
    expect_status(&res, 404);
    gp_response_free(&res);
}

/* ---- infer = v1 predict ---- */

static void test_infer_equals_predict(void **state)
{
    (void)state;
    gp_response v1 = {0}, v2 = {0};
    char *pb = points_body(Xte, M, D, "");
    predict("toy", pb, &v1);
    expect_status(&v1, 200);
    for (int nested = 0; nested < 2; nested++) {
        char *ib = infer_body(Xte, M, D, nested, "\"id\":\"42\"");
        infer("toy", 0, ib, &v2);
        expect_status(&v2, 200);
        same_numbers(&v1, "mean", &v2, "mean");
        same_numbers(&v1, "variance", &v2, "variance");
        json_t *j = body_json(&v2);
        assert_string_equal(json_string_value(json_object_get(j, "model_name")), "toy");
        assert_string_equal(json_string_value(json_object_get(j, "model_version")), "2");
        assert_string_equal(json_string_value(json_object_get(j, "id")), "42");
        json_t *outs = json_object_get(j, "outputs");
        assert_int_equal(json_array_size(outs), 2);
        for (size_t k = 0; k < 2; k++) {
            json_t *o = json_array_get(outs, k);
            assert_string_equal(json_string_value(json_object_get(o, "name")),
                                k ? "variance" : "mean");
            assert_string_equal(json_string_value(json_object_get(o, "datatype")), "FP64");
            json_t *shape = json_object_get(o, "shape");
            assert_int_equal(json_array_size(shape), 1);
            assert_int_equal(json_integer_value(json_array_get(shape, 0)), M);
            assert_int_equal(json_array_size(json_object_get(o, "data")), M);
        }
        json_decref(j);
        free(ib);
    }
    free(pb);

    /* include_noise false, version 1, the outputs asked in their order */
    pb = points_body(Xte, M, D, "\"include_noise\":false,\"version\":1");
    predict("toy", pb, &v1);
    expect_status(&v1, 200);
    char *ib = infer_body(Xte, M, D, 0,
                          "\"parameters\":{\"include_noise\":false},"
                          "\"outputs\":[{\"name\":\"variance\"},{\"name\":\"mean\","
                          "\"parameters\":{\"binary_data\":false}}]");
    infer("toy", 1, ib, &v2);
    expect_status(&v2, 200);
    same_numbers(&v1, "variance", &v2, "variance");
    same_numbers(&v1, "mean", &v2, "mean");
    assert_non_null(strstr(v2.body, "\"model_version\":\"1\""));
    assert_null(strstr(v2.body, "\"id\""));
    assert_true(strstr(v2.body, "\"name\":\"variance\"") < strstr(v2.body, "\"name\":\"mean\""));
    free(ib);
    /* one output only */
    ib = infer_body(Xte, M, D, 0, "\"outputs\":[{\"name\":\"variance\"}]");
    infer("toy", 0, ib, &v2);
    expect_status(&v2, 200);
    assert_null(strstr(v2.body, "\"name\":\"mean\""));
    free(ib);
    free(pb);
    gp_response_free(&v1);
    gp_response_free(&v2);
}

/* Infers and v1 predicts answered in one batch (gp_api_point_calls_run, as
 * the batcher runs them): each answer is the one it gets alone. */
static void test_infer_in_a_batch(void **state)
{
    (void)state;
    enum { CALLS = 4 };
    gp_point_call *calls[CALLS];
    gp_response alone[CALLS], batched[CALLS];
    char *bodies[CALLS];
    for (int i = 0; i < CALLS; i++) {
        /* a different point set per call: 2 + i points from Xte's rows */
        double X[M * D];
        size_t m = 2 + (size_t)i % 3;
        for (size_t r = 0; r < m; r++)
            for (size_t j = 0; j < D; j++)
                X[j * m + r] = Xte[j * M + (r + (size_t)i) % M];
        int v2 = i % 2 == 0;
        bodies[i] = v2 ? infer_body(X, m, D, 0, "") : points_body(X, m, D, "");
        gp_request req = make_req("application/json", bodies[i], NULL, 0);
        memset(&alone[i], 0, sizeof alone[i]);
        memset(&batched[i], 0, sizeof batched[i]);
        if (v2)
            gp_api_oip_infer(api, "toy", 0, &req, &alone[i]);
        else
            gp_api_predict(api, "toy", &req, &alone[i]);
        expect_status(&alone[i], 200);
        int rc = v2 ? gp_api_oip_infer_parse(api, "toy", 0, &req, &calls[i], &batched[i])
                    : gp_api_point_call_parse(api, GP_CALL_PREDICT, "toy", &req, &calls[i],
                                              &batched[i]);
        assert_int_equal(rc, GP_OK);
    }
    for (int i = 1; i < CALLS; i++)
        assert_true(gp_api_point_call_joinable(calls[0], calls[i]));
    gp_api_point_calls_run(api, calls, CALLS, batched);
    for (int i = 0; i < CALLS; i++) {
        expect_status(&batched[i], 200);
        assert_int_equal(alone[i].body_len, batched[i].body_len);
        assert_memory_equal(alone[i].body, batched[i].body, alone[i].body_len);
        gp_response_free(&alone[i]);
        gp_response_free(&batched[i]);
        free(bodies[i]);
    }
}

/* ---- outputs of the likelihoods, a gate model, several outputs ---- */

static const char *const LABELS =
    "\"X\":[[0],[0.5],[1],[1.5],[2],[2.5],[3],[3.5],[4],[4.5],[5],[5.5]],";

static void check_metadata_outputs(const char *name, const char *const *want, size_t n)
{
    gp_response res = {0};
    gp_api_oip_model_metadata(api, name, 0, &res);
    expect_status(&res, 200);
    json_t *j = body_json(&res);
    json_t *outs = json_object_get(j, "outputs");
    if (json_array_size(outs) != n)
        fail_msg("%s: %zu outputs, expected %zu: %s", name, json_array_size(outs), n, res.body);
    for (size_t k = 0; k < n; k++)
        assert_string_equal(json_string_value(json_object_get(json_array_get(outs, k), "name")),
                            want[k]);
    json_decref(j);
    gp_response_free(&res);
}

static void test_likelihood_outputs(void **state)
{
    (void)state;
    char body[1024];
    snprintf(body, sizeof body,
             "{\"name\":\"cls\",\"method\":\"svgp\",\"likelihood\":\"bernoulli\",\"seed\":1,"
             "\"options\":{\"inducing\":6},%s\"y\":[0,0,0,1,0,1,1,1,1,0,1,1]}",
             LABELS);
    fit_ok(body);
    snprintf(body, sizeof body,
             "{\"name\":\"cnt\",\"method\":\"svgp\",\"likelihood\":\"poisson\",\"seed\":1,"
             "\"options\":{\"inducing\":6},%s\"y\":[0,1,0,2,3,2,5,4,7,6,9,8]}",
             LABELS);
    fit_ok(body);
    static const char *const cls[] = {"mean", "variance", "latent_mean", "latent_variance",
                                      "probability"};
    static const char *const cnt[] = {"mean",           "variance",   "latent_mean",
                                      "latent_variance", "count_mean", "count_variance",
                                      "rate_mean",       "rate_variance"};
    check_metadata_outputs("cls", cls, 5);
    check_metadata_outputs("cnt", cnt, 8);
    const char *pb = "{\"X\":[[0.25],[3.25],[9]]}";
    const char *ib = "{\"inputs\":[{\"name\":\"input-0\",\"shape\":[3,1],\"datatype\":\"FP64\","
                     "\"data\":[0.25,3.25,9]}]}";
    struct {
        const char *name;
        const char *const *outs;
        size_t n;
    } models[] = {{"cls", cls, 5}, {"cnt", cnt, 8}};
    for (size_t t = 0; t < 2; t++) {
        gp_response v1 = {0}, v2 = {0};
        predict(models[t].name, pb, &v1);
        expect_status(&v1, 200);
        infer(models[t].name, 0, ib, &v2);
        expect_status(&v2, 200);
        for (size_t k = 0; k < models[t].n; k++)
            same_numbers(&v1, models[t].outs[k], &v2, models[t].outs[k]);
        gp_response_free(&v1);
        gp_response_free(&v2);
    }
    /* an output of another likelihood */
    gp_response res = {0};
    infer("cls", 0,
          "{\"inputs\":[{\"name\":\"X\",\"shape\":[1,1],\"datatype\":\"FP64\",\"data\":[1]}],"
          "\"outputs\":[{\"name\":\"probability\"},{\"name\":\"rate_mean\"}]}",
          &res);
    expect_error(&res, 400, "invalid_argument", "outputs[1].name");
    expect_oip_error(&res, 400, "its outputs: mean, variance, latent_mean, latent_variance, "
                                "probability");
    gp_response_free(&res);
}

static void observe(const char *name, const char *body)
{
    gp_response res = {0};
    gp_request req = make_req("application/json", body, NULL, 0);
    gp_api_observe(api, name, &req, &res);
    expect_status(&res, 200);
    gp_response_free(&res);
}

static void test_gate_model(void **state)
{
    (void)state;
    fit_ok("{\"name\":\"gate\",\"method\":\"rfgp\",\"seed\":1,\"options\":{\"input\":{\"kind\":"
           "\"point\",\"dim\":1},\"features\":64,\"warmup\":4}}");
    const char *ib = "{\"inputs\":[{\"name\":\"X\",\"shape\":[2,1],\"datatype\":\"FP64\","
                     "\"data\":[1.1,40]}]}";
    gp_response res = {0}, v1 = {0};
    /* warming up: not ready, no inference */
    gp_api_oip_model_ready(api, "gate", 0, &res);
    expect_error(&res, 409, "conflict", "");
    infer("gate", 0, ib, &res);
    expect_error(&res, 409, "conflict", "");
    expect_oip_error(&res, 409, "warming up");
    static const char *const outs[] = {"mean", "variance", "ask_oracle"};
    check_metadata_outputs("gate", outs, 3);

    observe("gate", "{\"X\":[0.0,0.5,1.0,1.5,2.0],\"y\":[0.02,0.47,0.86,0.99,0.90]}");
    gp_api_oip_model_ready(api, "gate", 0, &res);
    expect_status(&res, 200);
    predict("gate", "{\"X\":[1.1,40]}", &v1);
    expect_status(&v1, 200);
    infer("gate", 0, ib, &res);
    expect_status(&res, 200);
    same_numbers(&v1, "mean", &res, "mean");
    same_numbers(&v1, "variance", &res, "variance");
    json_t *a = body_json(&v1), *b = body_json(&res);
    json_t *flags = json_object_get(a, "ask_oracle");
    json_t *o = json_array_get(json_object_get(b, "outputs"), 2);
    assert_string_equal(json_string_value(json_object_get(o, "name")), "ask_oracle");
    assert_string_equal(json_string_value(json_object_get(o, "datatype")), "BOOL");
    assert_true(json_equal(flags, json_object_get(o, "data")));
    assert_true(json_is_false(json_array_get(flags, 0)));
    assert_true(json_is_true(json_array_get(flags, 1)));
    json_decref(a);
    json_decref(b);
    gp_response_free(&res);
    gp_response_free(&v1);
}

static void test_several_outputs_and_distributions(void **state)
{
    (void)state;
    /* two outputs: tensors of shape [n, 2], row-major */
    fit_ok("{\"name\":\"two\",\"method\":\"rfgp\",\"seed\":2,\"options\":{\"input\":{\"kind\":"
           "\"point\",\"dim\":2},\"features\":64,\"warmup\":3,\"outputs\":2}}");
    observe("two", "{\"X\":[[0,0],[1,0],[0,1],[1,1]],\"y\":[[0,1],[1,0.5],[2,0.2],[3,0.1]]}");
    gp_response res = {0}, v1 = {0};
    gp_api_oip_model_metadata(api, "two", 0, &res);
    expect_status(&res, 200);
    assert_non_null(strstr(res.body, "{\"name\":\"X\",\"datatype\":\"FP64\",\"shape\":[-1,2]}"));
    assert_non_null(strstr(res.body, "{\"name\":\"mean\",\"datatype\":\"FP64\",\"shape\":[-1,2]}"));
    assert_non_null(
        strstr(res.body, "{\"name\":\"ask_oracle\",\"datatype\":\"BOOL\",\"shape\":[-1]}"));
    predict("two", "{\"X\":[[0.5,0.5],[2,1],[0,0]]}", &v1);
    expect_status(&v1, 200);
    infer("two", 0,
          "{\"inputs\":[{\"name\":\"X\",\"shape\":[3,2],\"datatype\":\"FP64\","
          "\"data\":[0.5,0.5,2,1,0,0]}]}",
          &res);
    expect_status(&res, 200);
    same_numbers(&v1, "mean", &res, "mean"); /* v1's rows of 2, flattened: row-major */
    same_numbers(&v1, "variance", &res, "variance");
    assert_non_null(strstr(res.body, "\"name\":\"mean\",\"datatype\":\"FP64\",\"shape\":[3,2]"));

    /* inputs that are distributions: no input tensor, infer refused */
    fit_ok("{\"name\":\"dist\",\"method\":\"rfgp\",\"seed\":3,\"options\":{\"input\":{\"kind\":"
           "\"gaussian\",\"dim\":1},\"features\":32,\"inner_features\":16,\"warmup\":2}}");
    gp_api_oip_model_metadata(api, "dist", 0, &res);
    expect_status(&res, 200);
    assert_non_null(strstr(res.body, "\"inputs\":[]"));
    infer("dist", 0,
          "{\"inputs\":[{\"name\":\"X\",\"shape\":[1,1],\"datatype\":\"FP64\",\"data\":[1]}]}",
          &res);
    expect_error(&res, 422, "unsupported", "inputs[0]");
    expect_oip_error(&res, 422, "/v1/models/dist/predict");
    gp_response_free(&res);
    gp_response_free(&v1);
}

/* ---- refused requests ---- */

#define IN(shape, type, data)                                                                  \
    "{\"inputs\":[{\"name\":\"X\",\"shape\":" shape ",\"datatype\":\"" type "\",\"data\":" data \
    "}]"
#define OK_IN IN("[1,2]", "FP64", "[1,2]")

static const struct err_case {
    const char *what;
    const char *ctype;
    const char *body;
    const char *model;
    int status;
    const char *code;
    const char *field;
    const char *says; /* in the converted {"error": ...} */
} err_cases[] = {
    {"not JSON", "application/json", "{\"inputs\":", "toy", 400, "malformed_json", "", "JSON"},
    {"empty body", "application/json", "", "toy", 400, "malformed_json", "", "empty"},
    {"not an object", "application/json", "[1]", "toy", 400, "invalid_argument", "", "object"},
    {"wrong content type", "text/plain", OK_IN "}", "toy", 415, "unsupported_media_type", "",
     "application/json"},
    {"unknown field", "application/json", OK_IN ",\"model\":\"x\"}", "toy", 400,
     "invalid_argument", "model", "model"},
    {"id not a string", "application/json", OK_IN ",\"id\":42}", "toy", 400, "invalid_argument",
     "id", "id must be a string"},
    {"no inputs", "application/json", "{\"id\":\"a\"}", "toy", 400, "invalid_argument", "inputs",
     "inputs is missing"},
    {"two inputs", "application/json",
     "{\"inputs\":[{\"name\":\"a\",\"shape\":[1,2],\"datatype\":\"FP64\",\"data\":[1,2]},"
     "{\"name\":\"b\",\"shape\":[1,2],\"datatype\":\"FP64\",\"data\":[1,2]}]}",
     "toy", 400, "invalid_argument", "inputs", "got 2"},
    {"inputs empty", "application/json", "{\"inputs\":[]}", "toy", 400, "invalid_argument",
     "inputs", "exactly one"},
    {"input not an object", "application/json", "{\"inputs\":[3]}", "toy", 400,
     "invalid_argument", "inputs[0]", "inputs[0]"},
    {"input without name", "application/json",
     "{\"inputs\":[{\"shape\":[1,2],\"datatype\":\"FP64\",\"data\":[1,2]}]}", "toy", 400,
     "invalid_argument", "inputs[0].name", "inputs[0].name"},
    {"unknown input field", "application/json",
     "{\"inputs\":[{\"name\":\"X\",\"shape\":[1,2],\"datatype\":\"FP64\",\"data\":[1,2],"
     "\"dims\":2}]}",
     "toy", 400, "invalid_argument", "inputs[0].dims", "inputs[0].dims"},
    {"FP32", "application/json", IN("[1,2]", "FP32", "[1,2]") "}", "toy", 400,
     "invalid_argument", "inputs[0].datatype", "FP32"},
    {"INT64", "application/json", IN("[1,2]", "INT64", "[1,2]") "}", "toy", 400,
     "invalid_argument", "inputs[0].datatype", "INT64; gpserve models take FP64"},
    {"not a datatype", "application/json", IN("[1,2]", "DOUBLE", "[1,2]") "}", "toy", 400,
     "invalid_argument", "inputs[0].datatype", "not a data type of the protocol"},
    {"datatype lower case", "application/json", IN("[1,2]", "fp64", "[1,2]") "}", "toy", 400,
     "invalid_argument", "inputs[0].datatype", "fp64"},
    {"no datatype", "application/json",
     "{\"inputs\":[{\"name\":\"X\",\"shape\":[1,2],\"data\":[1,2]}]}", "toy", 400,
     "invalid_argument", "inputs[0].datatype", "missing"},
    {"no shape", "application/json",
     "{\"inputs\":[{\"name\":\"X\",\"datatype\":\"FP64\",\"data\":[1,2]}]}", "toy", 400,
     "invalid_argument", "inputs[0].shape", "missing"},
    {"shape of one entry", "application/json", IN("[2]", "FP64", "[1,2]") "}", "toy", 400,
     "invalid_argument", "inputs[0].shape", "[n, d]"},
    {"shape of three entries", "application/json", IN("[1,1,2]", "FP64", "[1,2]") "}", "toy",
     400, "invalid_argument", "inputs[0].shape", "[n, d]"},
    {"negative shape", "application/json", IN("[-1,2]", "FP64", "[1,2]") "}", "toy", 400,
     "invalid_argument", "inputs[0].shape", "inputs[0].shape[0] must be an integer"},
    {"fractional shape", "application/json", IN("[1,2.5]", "FP64", "[1,2]") "}", "toy", 400,
     "invalid_argument", "inputs[0].shape", "inputs[0].shape[1]"},
    {"no rows", "application/json", IN("[0,2]", "FP64", "[]") "}", "toy", 400,
     "invalid_argument", "inputs[0].shape", "at least one point"},
    {"too many rows", "application/json", IN("[1001,2]", "FP64", "[1,2]") "}", "toy", 413,
     "payload_too_large", "inputs[0].shape", "max_points = 1000"},
    {"wrong d", "application/json", IN("[1,3]", "FP64", "[1,2,3]") "}", "toy", 400,
     "invalid_argument", "inputs[0].shape", "model 'toy' takes 2"},
    {"too few values", "application/json", IN("[2,2]", "FP64", "[1,2,3]") "}", "toy", 400,
     "invalid_argument", "inputs[0].data", "3 values; shape [2, 2] needs n x d = 4"},
    {"too many values", "application/json", IN("[1,2]", "FP64", "[1,2,3]") "}", "toy", 400,
     "invalid_argument", "inputs[0].data", "3 values"},
    {"a text value", "application/json", IN("[2,2]", "FP64", "[1,2,\"3\",4]") "}", "toy", 400,
     "invalid_argument", "inputs[0].data[2]", "inputs[0].data[2] must be a number"},
    {"a null value", "application/json", IN("[1,2]", "FP64", "[1,null]") "}", "toy", 400,
     "invalid_argument", "inputs[0].data[1]", "must be a number"},
    {"a number beyond a double", "application/json", IN("[1,2]", "FP64", "[1,1e999]") "}", "toy",
     400, "invalid_argument", "inputs[0].data[1]", "does not fit a double"},
    {"nested: a row too short", "application/json", IN("[2,2]", "FP64", "[[1,2],[3]]") "}",
     "toy", 400, "invalid_argument", "inputs[0].data[1]", "row of 2 numbers"},
    {"nested: a huge d (refused before any allocation)", "application/json",
     IN("[2,1000000000000000]", "FP64", "[[1],[2]]") "}", "toy", 400, "invalid_argument",
     "inputs[0].data[0]", "row of 1000000000000000 numbers"},
    {"flat: a huge n x d", "application/json", IN("[1000,1000000000000]", "FP64", "[1]") "}",
     "toy", 400, "invalid_argument", "inputs[0].data", "needs n x d = 1000000000000000"},
    {"nested: too many rows", "application/json", IN("[1,2]", "FP64", "[[1,2],[3,4]]") "}",
     "toy", 400, "invalid_argument", "inputs[0].data", "2 rows"},
    {"nested: a text cell", "application/json", IN("[1,2]", "FP64", "[[1,\"x\"]]") "}", "toy",
     400, "invalid_argument", "inputs[0].data[0][1]", "inputs[0].data[0][1]"},
    {"data not an array", "application/json", IN("[1,2]", "FP64", "\"1,2\"") "}", "toy", 400,
     "invalid_argument", "inputs[0].data", "array"},
    {"no data", "application/json",
     "{\"inputs\":[{\"name\":\"X\",\"shape\":[1,2],\"datatype\":\"FP64\"}]}", "toy", 400,
     "invalid_argument", "inputs[0].data", "missing"},
    {"binary input", "application/json",
     "{\"inputs\":[{\"name\":\"X\",\"shape\":[1,2],\"datatype\":\"FP64\",\"data\":[1,2],"
     "\"parameters\":{\"binary_data_size\":16}}]}",
     "toy", 400, "invalid_argument", "inputs[0].parameters.binary_data_size", "binary"},
    {"unknown parameter", "application/json", OK_IN ",\"parameters\":{\"include_nosie\":false}}",
     "toy", 400, "invalid_argument", "parameters.include_nosie", "include_noise"},
    {"include_noise not a boolean", "application/json",
     OK_IN ",\"parameters\":{\"include_noise\":\"no\"}}", "toy", 400, "invalid_argument",
     "parameters.include_noise", "true or false"},
    {"parameters not an object", "application/json", OK_IN ",\"parameters\":[]}", "toy", 400,
     "invalid_argument", "parameters", "object"},
    {"unknown output", "application/json", OK_IN ",\"outputs\":[{\"name\":\"output0\"}]}",
     "toy", 400, "invalid_argument", "outputs[0].name", "'output0' is no output"},
    {"output of another likelihood", "application/json",
     OK_IN ",\"outputs\":[{\"name\":\"mean\"},{\"name\":\"probability\"}]}", "toy", 400,
     "invalid_argument", "outputs[1].name", "model 'toy' has no output 'probability'"},
    {"output twice", "application/json",
     OK_IN ",\"outputs\":[{\"name\":\"mean\"},{\"name\":\"mean\"}]}", "toy", 400,
     "invalid_argument", "outputs[1].name", "repeats outputs[0].name"},
    {"outputs empty", "application/json", OK_IN ",\"outputs\":[]}", "toy", 400,
     "invalid_argument", "outputs", "non-empty"},
    {"output without a name", "application/json", OK_IN ",\"outputs\":[{}]}", "toy", 400,
     "invalid_argument", "outputs[0].name", "outputs[0].name"},
    {"binary output", "application/json",
     OK_IN ",\"outputs\":[{\"name\":\"mean\",\"parameters\":{\"binary_data\":true}}]}", "toy",
     400, "invalid_argument", "outputs[0].parameters.binary_data", "binary tensor data"},
    {"unknown model", "application/json", OK_IN "}", "nope", 404, "not_found", "name", "nope"},
};

static void test_refused_requests(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof err_cases / sizeof err_cases[0]; i++) {
        const struct err_case *c = &err_cases[i];
        gp_response res = {0};
        gp_request req = make_req(c->ctype, c->body, NULL, 0);
        gp_api_oip_infer(api, c->model, 0, &req, &res);
        json_t *j = body_json(&res);
        const char *code = json_string_value(json_object_get(json_object_get(j, "error"), "code"));
        const char *field =
            json_string_value(json_object_get(json_object_get(j, "error"), "field"));
        if (res.status != c->status || code == NULL || strcmp(code, c->code) != 0 ||
            strcmp(field ? field : "", c->field) != 0)
            fail_msg("%s: %d %s field '%s', expected %d %s field '%s': %s", c->what, res.status,
                     code ? code : "?", field ? field : "", c->status, c->code, c->field,
                     res.body);
        json_decref(j);
        /* the protocol's shape names the field and says why */
        gp_api_oip_error(&res);
        assert_int_equal(res.status, c->status);
        j = body_json(&res);
        const char *msg = json_string_value(json_object_get(j, "error"));
        if (msg == NULL || strstr(msg, c->says) == NULL || (c->field[0] && !strstr(msg, c->field)))
            fail_msg("%s: error '%s' should name '%s' and say '%s'", c->what, msg ? msg : "?",
                     c->field, c->says);
        json_decref(j);
        gp_response_free(&res);
    }
}

/* ---- the error shape ---- */

static void test_error_shape(void **state)
{
    (void)state;
    gp_response res = {0};
    /* a message that does not name its field gets it in front */
    gp_api_fail(&res, GP_EINVAL, "n_samples", "must be at least 1");
    gp_api_oip_error(&res);
    assert_int_equal(res.status, 400);
    assert_string_equal(res.body, "{\"error\":\"n_samples: must be at least 1\"}");
    /* one that starts with it is kept as it is; a longer name is not the field */
    gp_api_fail(&res, GP_EINVAL, "X", "X[0] has 3 columns");
    gp_api_oip_error(&res);
    assert_string_equal(res.body, "{\"error\":\"X[0] has 3 columns\"}");
    gp_api_fail(&res, GP_EINVAL, "id", "identifiers must be short");
    gp_api_oip_error(&res);
    assert_string_equal(res.body, "{\"error\":\"id: identifiers must be short\"}");
    /* no field; status and headers kept; quotes escaped */
    gp_api_fail(&res, GP_EOVERLOADED, NULL, "the fit queue is \"full\"");
    gp_api_oip_error(&res);
    assert_int_equal(res.status, 429);
    assert_string_equal(res.body, "{\"error\":\"the fit queue is \\\"full\\\"\"}");
    assert_int_equal(res.n_headers, 1);
    assert_string_equal(res.headers[0].name, "Retry-After");
    /* applied twice, or to a success, nothing changes */
    gp_api_oip_error(&res);
    assert_string_equal(res.body, "{\"error\":\"the fit queue is \\\"full\\\"\"}");
    gp_api_oip_live(&res);
    gp_api_oip_error(&res);
    assert_string_equal(res.body, "{\"live\":true}");
    gp_response_free(&res);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_server_metadata_and_health),
        cmocka_unit_test(test_model_metadata),
        cmocka_unit_test(test_infer_equals_predict),
        cmocka_unit_test(test_infer_in_a_batch),
        cmocka_unit_test(test_likelihood_outputs),
        cmocka_unit_test(test_gate_model),
        cmocka_unit_test(test_several_outputs_and_distributions),
        cmocka_unit_test(test_refused_requests),
        cmocka_unit_test(test_error_shape),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
