/* Unit tests for the pure parts of server/: route matching (the v1 and the
 * Open Inference Protocol V2 routes) and the metrics text. Configuration,
 * connection slots and the auth helpers are test_server_config.c's, the fit
 * queue test_server_jobs.c's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "server/config.h"
#include "server/jobs.h"
#include "server/metrics.h"
#include "server/route.h"
#include "server/slots.h"
#include "server/util.h"

/* ---- routes ---- */

static void test_route_static(void **state)
{
    (void)state;
    gp_route_match m;
    assert_int_equal(gp_route_match_path("/healthz", &m), GP_ROUTE_HEALTHZ);
    assert_int_equal(gp_route_match_path("/readyz", &m), GP_ROUTE_READYZ);
    assert_int_equal(gp_route_match_path("/metrics", &m), GP_ROUTE_METRICS);
    assert_int_equal(gp_route_match_path("/openapi.yaml", &m), GP_ROUTE_OPENAPI);
    assert_int_equal(gp_route_match_path("/v1/methods", &m), GP_ROUTE_METHODS);
    assert_int_equal(gp_route_match_path("/v1/models", &m), GP_ROUTE_MODELS);
    assert_int_equal(gp_route_match_path("/v1/models?name=a&method=exact", &m), GP_ROUTE_MODELS);
    assert_int_equal(m.param_error, GP_PARAM_OK);
}

static void test_route_unknown(void **state)
{
    (void)state;
    gp_route_match m;
    const char *bad[] = {"",          "healthz",        "//",         "/healthz/",
                         "/HEALTHZ",  "/v1",            "/v2/models", "/v1/model",
                         "/v1/jobs",  "/v1/models/a/b", "/v1/models/a/versions",
                         "/v1/models/a/versions/1/x",   "/v1/jobs/a/b",
                         "/v1/models/a/predict/x/y/z/w", "/metrics/x", "/ui", "/UI/app.js",
                         "/index.html", "/ui/a/b/c/d/e/f"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(gp_route_match_path(bad[i], &m), GP_ROUTE_NONE);
        assert_int_equal(m.route, GP_ROUTE_NONE);
    }
    assert_int_equal(gp_route_match_path(NULL, &m), GP_ROUTE_NONE);
}

static void test_route_ui(void **state)
{
    (void)state;
    gp_route_match m;
    assert_int_equal(gp_route_match_path("/", &m), GP_ROUTE_UI_INDEX);
    assert_int_equal(gp_route_match_path("/?x=1", &m), GP_ROUTE_UI_INDEX);
    assert_int_equal(gp_route_match_path("/ui/app.js", &m), GP_ROUTE_UI_ASSET);
    assert_string_equal(m.asset, "app.js");
    assert_int_equal(gp_route_match_path("/ui/vendor/chart.umd.min.js?v=2", &m),
                     GP_ROUTE_UI_ASSET);
    assert_string_equal(m.asset, "vendor/chart.umd.min.js");
    assert_int_equal(gp_route_match_path("/ui/style%2Ecss", &m), GP_ROUTE_UI_ASSET);
    assert_string_equal(m.asset, "style.css");
    /* matched, but no file has these names: the handler answers 404 */
    assert_int_equal(gp_route_match_path("/ui/", &m), GP_ROUTE_UI_ASSET);
    assert_string_equal(m.asset, "");
    assert_int_equal(gp_route_match_path("/ui/%zz", &m), GP_ROUTE_UI_ASSET);
    assert_string_equal(m.asset, "");
    char longp[300] = "/ui/";
    memset(longp + 4, 'a', 200);
    longp[204] = '\0';
    assert_int_equal(gp_route_match_path(longp, &m), GP_ROUTE_UI_ASSET);
    assert_string_equal(m.asset, "");
    assert_string_equal(gp_route_pattern(GP_ROUTE_UI_INDEX), "/");
    assert_string_equal(gp_route_pattern(GP_ROUTE_UI_ASSET), "/ui/{file}");
    assert_string_equal(gp_route_allow(GP_ROUTE_UI_ASSET), "GET, HEAD");
    assert_int_equal(gp_route_verbs(GP_ROUTE_UI_INDEX), GP_VERB_GET);
    /* the same auth rules as the API */
    assert_true(gp_route_needs_auth(GP_ROUTE_UI_INDEX));
    assert_true(gp_route_needs_auth(GP_ROUTE_UI_ASSET));
    assert_int_equal(gp_route_body_types(GP_ROUTE_UI_INDEX, GP_VERB_POST), 0);
}

static void test_route_names(void **state)
{
    (void)state;
    gp_route_match m;
    assert_int_equal(gp_route_match_path("/v1/models/concrete", &m), GP_ROUTE_MODEL);
    assert_string_equal(m.name, "concrete");
    assert_int_equal(m.param_error, GP_PARAM_OK);
    assert_int_equal(gp_route_match_path("/v1/models/a.b_c-9/predict", &m), GP_ROUTE_PREDICT);
    assert_string_equal(m.name, "a.b_c-9");
    assert_int_equal(gp_route_match_path("/v1/models/x/sample", &m), GP_ROUTE_SAMPLE);
    assert_int_equal(gp_route_match_path("/v1/models/x/observe", &m), GP_ROUTE_OBSERVE);
    /* percent-decoded before validation */
    assert_int_equal(gp_route_match_path("/v1/models/%41bc", &m), GP_ROUTE_MODEL);
    assert_int_equal(m.param_error, GP_PARAM_OK);
    assert_string_equal(m.name, "Abc");
    /* invalid names: matched route, parameter error */
    const char *bad[] = {"/v1/models/a%20b",   "/v1/models/a%2Fb/predict", "/v1/models/%zz",
                         "/v1/models/a%00b",   "/v1/models/",              "/v1/models/%",
                         "/v1/models/a+b",     "/v1/models/%C3%A9"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_not_equal(gp_route_match_path(bad[i], &m), GP_ROUTE_NONE);
        assert_int_equal(m.param_error, GP_PARAM_BAD_NAME);
    }
    char long_name[100] = "/v1/models/";
    memset(long_name + 11, 'a', 64);
    assert_int_equal(gp_route_match_path(long_name, &m), GP_ROUTE_MODEL);
    assert_int_equal(m.param_error, GP_PARAM_OK);
    strcat(long_name, "a");
    assert_int_equal(gp_route_match_path(long_name, &m), GP_ROUTE_MODEL);
    assert_int_equal(m.param_error, GP_PARAM_BAD_NAME);
}

static void test_route_versions_and_jobs(void **state)
{
    (void)state;
    gp_route_match m;
    assert_int_equal(gp_route_match_path("/v1/models/m/versions/3", &m), GP_ROUTE_MODEL_VERSION);
    assert_int_equal(m.param_error, GP_PARAM_OK);
    assert_int_equal(m.version, 3);
    assert_string_equal(m.name, "m");
    assert_int_equal(gp_route_match_path("/v1/models/m/versions/2147483647", &m),
                     GP_ROUTE_MODEL_VERSION);
    assert_int_equal(m.version, 2147483647);
    const char *bad[] = {"/v1/models/m/versions/0", "/v1/models/m/versions/-1",
                         "/v1/models/m/versions/_x", "/v1/models/m/versions/",
                         "/v1/models/m/versions/1x", "/v1/models/m/versions/a%20b",
                         "/v1/models/m/versions/2147483648", "/v1/models/m/versions/1.5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(gp_route_match_path(bad[i], &m), GP_ROUTE_MODEL_VERSION);
        assert_int_equal(m.param_error, GP_PARAM_BAD_VERSION);
    }
    /* a letter first: an alias, left for the request checks to resolve */
    assert_int_equal(gp_route_match_path("/v1/models/m/versions/champion", &m),
                     GP_ROUTE_MODEL_VERSION);
    assert_int_equal(m.param_error, GP_PARAM_OK);
    assert_int_equal(m.version, 0);
    assert_string_equal(m.version_alias, "champion");
    assert_int_equal(gp_route_match_path("/v1/models/m/aliases/champion", &m), GP_ROUTE_ALIAS);
    assert_int_equal(m.param_error, GP_PARAM_OK);
    assert_string_equal(m.alias, "champion");
    assert_string_equal(m.version_alias, "");
    const char *bad_alias[] = {"/v1/models/m/aliases/7", "/v1/models/m/aliases/_a",
                               "/v1/models/m/aliases/a%2Fb"};
    for (size_t i = 0; i < sizeof bad_alias / sizeof bad_alias[0]; i++) {
        assert_int_equal(gp_route_match_path(bad_alias[i], &m), GP_ROUTE_ALIAS);
        assert_int_equal(m.param_error, GP_PARAM_BAD_ALIAS);
    }
    /* a bad name is reported before the version */
    assert_int_equal(gp_route_match_path("/v1/models/a%20/versions/x", &m),
                     GP_ROUTE_MODEL_VERSION);
    assert_int_equal(m.param_error, GP_PARAM_BAD_NAME);

    assert_int_equal(gp_route_match_path("/v1/jobs/0123456789abcdef0123456789abcdef", &m),
                     GP_ROUTE_JOB);
    assert_int_equal(m.param_error, GP_PARAM_OK);
    assert_string_equal(m.id, "0123456789abcdef0123456789abcdef");
    assert_int_equal(gp_route_match_path("/v1/jobs/a!b", &m), GP_ROUTE_JOB);
    assert_int_equal(m.param_error, GP_PARAM_BAD_ID);
    char long_id[80] = "/v1/jobs/";
    memset(long_id + 9, 'a', 40);
    assert_int_equal(gp_route_match_path(long_id, &m), GP_ROUTE_JOB);
    assert_int_equal(m.param_error, GP_PARAM_BAD_ID);
}

static void test_route_table(void **state)
{
    (void)state;
    assert_int_equal(gp_verb_of("GET"), GP_VERB_GET);
    assert_int_equal(gp_verb_of("POST"), GP_VERB_POST);
    assert_int_equal(gp_verb_of("DELETE"), GP_VERB_DELETE);
    assert_int_equal(gp_verb_of("PUT"), GP_VERB_PUT);
    assert_int_equal(gp_verb_of("PATCH"), GP_VERB_OTHER);
    assert_int_equal(gp_verb_of("get"), GP_VERB_OTHER);
    assert_int_equal(gp_verb_of(NULL), GP_VERB_OTHER);

    assert_string_equal(gp_route_allow(GP_ROUTE_MODELS), "GET, HEAD, POST");
    assert_string_equal(gp_route_allow(GP_ROUTE_MODEL), "GET, HEAD, DELETE");
    assert_string_equal(gp_route_allow(GP_ROUTE_JOB), "GET, HEAD, DELETE");
    assert_string_equal(gp_route_allow(GP_ROUTE_PREDICT), "POST");
    assert_string_equal(gp_route_allow(GP_ROUTE_ALIAS), "GET, HEAD, PUT, DELETE");
    assert_string_equal(gp_route_allow(GP_ROUTE_HEALTHZ), "GET, HEAD");
    assert_int_equal(gp_verb_of("HEAD"), GP_VERB_GET);
    assert_true(gp_route_verbs(GP_ROUTE_MODELS) & GP_VERB_POST);
    assert_false(gp_route_verbs(GP_ROUTE_PREDICT) & GP_VERB_GET);
    assert_int_equal(gp_route_verbs(GP_ROUTE_NONE), 0);

    assert_string_equal(gp_route_pattern(GP_ROUTE_PREDICT), "/v1/models/{name}/predict");
    assert_string_equal(gp_route_pattern(GP_ROUTE_MODEL_VERSION),
                        "/v1/models/{name}/versions/{v}");
    assert_string_equal(gp_route_pattern(GP_ROUTE_JOB), "/v1/jobs/{id}");
    assert_string_equal(gp_route_pattern(GP_ROUTE_NONE), "unmatched");

    assert_false(gp_route_needs_auth(GP_ROUTE_HEALTHZ));
    assert_false(gp_route_needs_auth(GP_ROUTE_READYZ));
    assert_false(gp_route_needs_auth(GP_ROUTE_METRICS));
    assert_true(gp_route_needs_auth(GP_ROUTE_OPENAPI));
    assert_true(gp_route_needs_auth(GP_ROUTE_MODELS));
    assert_true(gp_route_needs_auth(GP_ROUTE_JOB));

    assert_int_equal(gp_route_body_types(GP_ROUTE_MODELS, GP_VERB_POST), 3);
    assert_int_equal(gp_route_body_types(GP_ROUTE_MODELS, GP_VERB_GET), 0);
    /* named columns: a predict takes JSON or a CSV body (api/columns.c) */
    assert_int_equal(gp_route_body_types(GP_ROUTE_PREDICT, GP_VERB_POST), GP_BODY_JSON_CSV);
    assert_int_equal(gp_route_body_types(GP_ROUTE_OPENAPI, GP_VERB_GET), GP_BODY_NONE);
    assert_int_equal(gp_route_body_types(GP_ROUTE_JOB, GP_VERB_DELETE), 0);
}

/* ---- the Open Inference Protocol V2 routes ---- */

static void test_route_v2(void **state)
{
    (void)state;
    gp_route_match m;
    struct {
        const char *path;
        gp_route_id route;
        const char *name;
        int version;
    } ok[] = {
        {"/v2", GP_ROUTE_V2_SERVER, "", 0},
        {"/v2?x=1", GP_ROUTE_V2_SERVER, "", 0},
        {"/v2/health/live", GP_ROUTE_V2_LIVE, "", 0},
        {"/v2/health/ready", GP_ROUTE_V2_READY, "", 0},
        {"/v2/models/sine", GP_ROUTE_V2_MODEL, "sine", 0},
        {"/v2/models/sine/versions/3", GP_ROUTE_V2_MODEL_VERSION, "sine", 3},
        {"/v2/models/sine/ready", GP_ROUTE_V2_MODEL_READY, "sine", 0},
        {"/v2/models/sine/versions/12/ready", GP_ROUTE_V2_VERSION_READY, "sine", 12},
        {"/v2/models/a.b_c-9/infer", GP_ROUTE_V2_INFER, "a.b_c-9", 0},
        {"/v2/models/%41b/versions/2147483647/infer", GP_ROUTE_V2_VERSION_INFER, "Ab",
         2147483647},
        /* words of the grammar are names where a name stands */
        {"/v2/models/infer/infer", GP_ROUTE_V2_INFER, "infer", 0},
        {"/v2/models/versions/ready", GP_ROUTE_V2_MODEL_READY, "versions", 0},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        if (gp_route_match_path(ok[i].path, &m) != ok[i].route)
            fail_msg("%s: route %d, expected %d", ok[i].path, m.route, ok[i].route);
        assert_int_equal(m.param_error, GP_PARAM_OK);
        assert_true(m.v2);
        assert_string_equal(m.name, ok[i].name);
        assert_int_equal(m.version, ok[i].version);
    }
    /* under /v2 but no route: 404 in the protocol's error shape */
    const char *none[] = {"/v2/",
                          "/v2/models",
                          "/v2/health",
                          "/v2/health/live/x",
                          "/v2/models/a/versions",
                          "/v2/models/a/versions/1/x",
                          "/v2/models/a/predict",
                          "/v2/models/a/x/infer",
                          "/v2/models/a/versions/1/infer/x/y",
                          "/v2/models/a/versions/1/ready/x/y/z/w",
                          "/v2/repository/index"};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        if (gp_route_match_path(none[i], &m) != GP_ROUTE_NONE)
            fail_msg("%s matched route %d", none[i], m.route);
        assert_true(m.v2);
    }
    /* not under /v2: the v1 error shape */
    const char *other[] = {"/v21", "/v2x/models/a", "/V2", "/v1/models/a", "/x/v2"};
    for (size_t i = 0; i < sizeof other / sizeof other[0]; i++) {
        gp_route_match_path(other[i], &m);
        assert_false(m.v2);
    }
    /* a bad name or version: matched, its parameter refused */
    assert_int_equal(gp_route_match_path("/v2/models/a%20b/infer", &m), GP_ROUTE_V2_INFER);
    assert_int_equal(m.param_error, GP_PARAM_BAD_NAME);
    assert_int_equal(gp_route_match_path("/v2/models/a/versions/1v/infer", &m),
                     GP_ROUTE_V2_VERSION_INFER);
    assert_int_equal(m.param_error, GP_PARAM_BAD_VERSION);
    assert_int_equal(gp_route_match_path("/v2/models/a/versions/0", &m),
                     GP_ROUTE_V2_MODEL_VERSION);
    assert_int_equal(m.param_error, GP_PARAM_BAD_VERSION);
    assert_int_equal(gp_route_match_path("/v2/models/a/versions/1", &m),
                     GP_ROUTE_V2_MODEL_VERSION);
    assert_int_equal(m.param_error, GP_PARAM_OK);
}

static void test_route_v2_table(void **state)
{
    (void)state;
    /* health is open like /healthz and /readyz; everything else needs the key */
    assert_false(gp_route_needs_auth(GP_ROUTE_V2_LIVE));
    assert_false(gp_route_needs_auth(GP_ROUTE_V2_READY));
    for (int r = GP_ROUTE_V2_SERVER; r <= GP_ROUTE_V2_VERSION_INFER; r++) {
        if (r != GP_ROUTE_V2_LIVE && r != GP_ROUTE_V2_READY)
            assert_true(gp_route_needs_auth((gp_route_id)r));
        /* every pattern is a /v2 path the matcher takes back to its route */
        const char *pat = gp_route_pattern((gp_route_id)r);
        assert_int_equal(strncmp(pat, "/v2", 3), 0);
        char path[128];
        size_t o = 0;
        for (const char *p = pat; *p && o + 8 < sizeof path; p++) {
            if (*p != '{') {
                path[o++] = *p;
                continue;
            }
            const char *val = p[1] == 'v' ? "7" : "mod";
            memcpy(path + o, val, strlen(val));
            o += strlen(val);
            p = strchr(p, '}');
        }
        path[o] = '\0';
        gp_route_match m;
        if (gp_route_match_path(path, &m) != (gp_route_id)r)
            fail_msg("pattern %s (path %s) matched %d, not %d", pat, path, m.route, r);
    }
    assert_string_equal(gp_route_pattern(GP_ROUTE_V2_VERSION_INFER),
                        "/v2/models/{name}/versions/{v}/infer");
    assert_string_equal(gp_route_allow(GP_ROUTE_V2_INFER), "POST");
    assert_string_equal(gp_route_allow(GP_ROUTE_V2_MODEL), "GET, HEAD");
    assert_int_equal(gp_route_verbs(GP_ROUTE_V2_INFER), GP_VERB_POST);
    assert_int_equal(gp_route_verbs(GP_ROUTE_V2_MODEL_READY), GP_VERB_GET);
    assert_int_equal(gp_route_body_types(GP_ROUTE_V2_INFER, GP_VERB_POST), 1);
    assert_int_equal(gp_route_body_types(GP_ROUTE_V2_VERSION_INFER, GP_VERB_POST), 1);
    assert_int_equal(gp_route_body_types(GP_ROUTE_V2_MODEL, GP_VERB_GET), 0);
}

/* ---- metrics ---- */

static void test_metrics_render(void **state)
{
    (void)state;
    gp_metrics *m = gp_metrics_new();
    assert_non_null(m);
    gp_metrics_request(m, GP_ROUTE_PREDICT, "POST", 200, 0.003);
    gp_metrics_request(m, GP_ROUTE_PREDICT, "POST", 200, 0.3);
    gp_metrics_request(m, GP_ROUTE_PREDICT, "POST", 422, 0.0001);
    gp_metrics_request(m, GP_ROUTE_NONE, "BREW", 404, 20);
    gp_metrics_fit(m, "exact", "succeeded", 1.5);
    gp_metrics_fit(m, "exact", "cancelled", 0.5);
    size_t per_thread[2] = {3, 2};
    gp_metrics_gauges g = {2, 1, 3, 4, 5, 6, 7, 8, 9, 10, per_thread, 2};
    size_t len = 0;
    char *text = gp_metrics_render(m, &g, &len);
    assert_non_null(text);
    assert_int_equal(strlen(text), len);
    const char *expect[] = {
        "gpserve_http_requests_total{route=\"/v1/models/{name}/predict\",method=\"POST\","
        "status=\"200\"} 2\n",
        "gpserve_http_requests_total{route=\"/v1/models/{name}/predict\",method=\"POST\","
        "status=\"422\"} 1\n",
        "gpserve_http_requests_total{route=\"unmatched\",method=\"other\",status=\"404\"} 1\n",
        "# TYPE gpserve_http_request_duration_seconds histogram\n",
        "gpserve_http_request_duration_seconds_bucket{route=\"/v1/models/{name}/predict\","
        "le=\"0.0005\"} 1\n",
        "gpserve_http_request_duration_seconds_bucket{route=\"/v1/models/{name}/predict\","
        "le=\"0.005\"} 2\n",
        "gpserve_http_request_duration_seconds_bucket{route=\"/v1/models/{name}/predict\","
        "le=\"0.5\"} 3\n",
        "gpserve_http_request_duration_seconds_bucket{route=\"/v1/models/{name}/predict\","
        "le=\"+Inf\"} 3\n",
        "gpserve_http_request_duration_seconds_count{route=\"/v1/models/{name}/predict\"} 3\n",
        "gpserve_http_request_duration_seconds_bucket{route=\"unmatched\",le=\"10\"} 0\n",
        "gpserve_http_request_duration_seconds_bucket{route=\"unmatched\",le=\"+Inf\"} 1\n",
        "gpserve_fits_total{method=\"exact\",outcome=\"succeeded\"} 1\n",
        "gpserve_fits_total{method=\"exact\",outcome=\"cancelled\"} 1\n",
        "gpserve_fits_total{method=\"exact\",outcome=\"failed\"} 0\n",
        "gpserve_fit_seconds_total{method=\"exact\"} 2\n",
        "gpserve_jobs_queued 2\n",
        "gpserve_jobs_running 1\n",
        "gpserve_models_not_finite 10\n",
        "gpserve_models_loaded 3\n",
        "gpserve_jitter_escalations_total 4\n",
        "gpserve_variance_clamps_total 5\n",
        "gpserve_batches_total 6\n",
        "gpserve_batched_requests_total 7\n",
        "gpserve_batched_points_total 8\n",
        "gpserve_http_thread_connections{thread=\"0\"} 3\n",
        "gpserve_http_thread_connections{thread=\"1\"} 2\n",
        "gpserve_batch_max_requests 9\n",
    };
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++) {
        if (strstr(text, expect[i]) == NULL)
            fail_msg("missing from /metrics: %s\n---\n%s", expect[i], text);
    }
    free(text);
    gp_metrics_free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_route_static),
        cmocka_unit_test(test_route_unknown),
        cmocka_unit_test(test_route_ui),
        cmocka_unit_test(test_route_names),
        cmocka_unit_test(test_route_versions_and_jobs),
        cmocka_unit_test(test_route_table),
        cmocka_unit_test(test_route_v2),
        cmocka_unit_test(test_route_v2_table),
        cmocka_unit_test(test_metrics_render),
    };
    return cmocka_run_group_tests_name("server", tests, NULL, NULL);
}
