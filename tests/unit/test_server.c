/* Unit tests for the pure parts of server/: route matching, configuration
 * parsing, constant-time comparison and token parsing, percent-decoding,
 * the metrics text, and the fit queue (with fake fit jobs instead of the
 * api's, so no fit runs). */
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
                         "/v1/models/m/versions/x", "/v1/models/m/versions/",
                         "/v1/models/m/versions/2147483648", "/v1/models/m/versions/1.5"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        assert_int_equal(gp_route_match_path(bad[i], &m), GP_ROUTE_MODEL_VERSION);
        assert_int_equal(m.param_error, GP_PARAM_BAD_VERSION);
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
    assert_int_equal(gp_verb_of("PUT"), GP_VERB_OTHER);
    assert_int_equal(gp_verb_of("get"), GP_VERB_OTHER);
    assert_int_equal(gp_verb_of(NULL), GP_VERB_OTHER);

    assert_string_equal(gp_route_allow(GP_ROUTE_MODELS), "GET, HEAD, POST");
    assert_string_equal(gp_route_allow(GP_ROUTE_MODEL), "GET, HEAD, DELETE");
    assert_string_equal(gp_route_allow(GP_ROUTE_JOB), "GET, HEAD, DELETE");
    assert_string_equal(gp_route_allow(GP_ROUTE_PREDICT), "POST");
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
    assert_int_equal(gp_route_body_types(GP_ROUTE_PREDICT, GP_VERB_POST), 1);
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
    assert_int_equal(gp_route_match_path("/v2/models/a/versions/v1/infer", &m),
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

/* ---- config ---- */

static const char *env_names[8];
static const char *env_values[8];
static size_t env_count;

static const char *fake_getenv(const char *name)
{
    for (size_t i = 0; i < env_count; i++)
        if (strcmp(env_names[i], name) == 0)
            return env_values[i];
    return NULL;
}

static void set_env(const char *name, const char *value)
{
    env_names[env_count] = name;
    env_values[env_count] = value;
    env_count++;
}

static FILE *sink(void)
{
    FILE *f = fopen("/dev/null", "w");
    assert_non_null(f);
    return f;
}

static int parse(gp_server_config *cfg, int argc, char **argv)
{
    FILE *out = sink(), *err = sink();
    int rc = gp_config_parse(cfg, argc, argv, fake_getenv, out, err);
    fclose(out);
    fclose(err);
    return rc;
}

static void test_config_defaults(void **state)
{
    (void)state;
    env_count = 0;
    gp_server_config cfg;
    char *argv[] = {"gpserve"};
    assert_int_equal(parse(&cfg, 1, argv), GP_CONFIG_OK);
    assert_string_equal(cfg.bind, "127.0.0.1");
    assert_int_equal(cfg.port, 8080);
    assert_string_equal(cfg.db, "./gpserve.db");
    assert_int_equal(cfg.threads, 0);
    assert_int_equal(cfg.fit_workers, 1);
    assert_int_equal(cfg.queue_size, 16);
    assert_int_equal(cfg.max_body_mb, 64);
    assert_int_equal(cfg.max_connections, 1024);
    assert_int_equal(cfg.timeout, 30);
    assert_int_equal(cfg.request_timeout, 120);
    assert_int_equal(cfg.max_connections_per_ip, 256);
    assert_null(cfg.api_key_file);
    assert_true(cfg.max_train_points > 0);
    assert_true(cfg.model_cache > 0);
    assert_int_equal(cfg.compute_threads, 0);
    assert_int_equal(cfg.idempotency_hours, 24);
}

static void test_config_env_and_flags(void **state)
{
    (void)state;
    env_count = 0;
    set_env("GPSERVE_PORT", "9000");
    set_env("GPSERVE_BIND", "0.0.0.0");
    set_env("GPSERVE_FIT_WORKERS", "3");
    set_env("GPSERVE_DB", "/tmp/env.db");
    set_env("GPSERVE_QUEUE_SIZE", ""); /* empty: unset */
    set_env("GPSERVE_REQUEST_TIMEOUT", "0");
    gp_server_config cfg;
    char *argv[] = {"gpserve", "--port", "0", "--db=/tmp/flag.db", "--max-body-mb", "2",
                    "--api-key-file", "/tmp/key", "--timeout=0", "--bind", "::1"};
    assert_int_equal(parse(&cfg, 11, argv), GP_CONFIG_OK);
    assert_int_equal(cfg.port, 0);            /* flag over env */
    assert_string_equal(cfg.db, "/tmp/flag.db");
    assert_string_equal(cfg.bind, "::1");
    assert_int_equal(cfg.fit_workers, 3);     /* env */
    assert_int_equal(cfg.queue_size, 16);     /* default */
    assert_int_equal(cfg.max_body_mb, 2);
    assert_int_equal(cfg.timeout, 0);
    assert_int_equal(cfg.request_timeout, 0); /* env: no deadline */
    assert_string_equal(cfg.api_key_file, "/tmp/key");
    char *deadline[] = {"gpserve", "--request-timeout", "3"};
    assert_int_equal(parse(&cfg, 3, deadline), GP_CONFIG_OK);
    assert_int_equal(cfg.request_timeout, 3); /* flag over env */
    env_count = 0;
}

static void test_config_errors(void **state)
{
    (void)state;
    env_count = 0;
    gp_server_config cfg;
    char *cases[][3] = {
        {"gpserve", "--port", "abc"},       {"gpserve", "--port", "65536"},
        {"gpserve", "--port", "-1"},        {"gpserve", "--port", "80x"},
        {"gpserve", "--port", ""},          {"gpserve", "--fit-workers", "0"},
        {"gpserve", "--threads", "1e3"},    {"gpserve", "--bind", "localhost"},
        {"gpserve", "--nope", "1"},         {"gpserve", "positional", "1"},
        {"gpserve", "--max-body-mb", " 5"}, {"gpserve", "--db", ""},
        {"gpserve", "--queue-size", "99999999999999999999"},
        {"gpserve", "--request-timeout", "-1"}, {"gpserve", "--request-timeout", "86401"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        assert_int_equal(parse(&cfg, 3, cases[i]), GP_CONFIG_ERROR);
    char *missing[] = {"gpserve", "--port"};
    assert_int_equal(parse(&cfg, 2, missing), GP_CONFIG_ERROR);
    set_env("GPSERVE_TIMEOUT", "soon");
    char *none[] = {"gpserve"};
    assert_int_equal(parse(&cfg, 1, none), GP_CONFIG_ERROR);
    /* --help wins, even with a bad value around */
    char *help[] = {"gpserve", "--port", "abc", "--help"};
    assert_int_equal(parse(&cfg, 4, help), GP_CONFIG_HELP);
    env_count = 0;
    char *h[] = {"gpserve", "-h"};
    assert_int_equal(parse(&cfg, 2, h), GP_CONFIG_HELP);
    /* Fail closed: an API key file set but empty is an error, not "no key"
     * (another empty variable still counts as unset). */
    set_env("GPSERVE_API_KEY_FILE", "");
    assert_int_equal(parse(&cfg, 1, none), GP_CONFIG_ERROR);
    env_count = 0;
    set_env("GPSERVE_DB", "");
    assert_int_equal(parse(&cfg, 1, none), GP_CONFIG_OK);
    char *empty_key[] = {"gpserve", "--api-key-file", ""};
    assert_int_equal(parse(&cfg, 3, empty_key), GP_CONFIG_ERROR);
    env_count = 0;
}

/* ---- connection slots ---- */

static gp_slot_key v4_key(unsigned char last)
{
    struct sockaddr_in a;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(0x7f000000u | last);
    gp_slot_key k;
    gp_slot_key_of((const struct sockaddr *)&a, &k);
    return k;
}

static void test_slots_rules(void **state)
{
    (void)state;
    gp_slots *s = gp_slots_new(64, 40); /* a reserve of 16 */
    assert_non_null(s);
    gp_slot_key a = v4_key(2), b = v4_key(3), c = v4_key(4);
    /* a heavy address takes slots up to total - reserve... */
    for (int i = 0; i < 40; i++)
        assert_int_equal(gp_slots_take(s, &a), GP_SLOT_OK);
    assert_int_equal(gp_slots_take(s, &a), GP_SLOT_ADDRESS); /* rule 2 */
    for (int i = 0; i < 8; i++)
        assert_int_equal(gp_slots_take(s, &b), GP_SLOT_OK);
    assert_int_equal(gp_slots_in_use(s), 48);
    /* ... then only light ones (fewer than GP_SLOTS_LIGHT) get the reserve */
    assert_int_equal(gp_slots_take(s, &b), GP_SLOT_RESERVED);
    for (int i = 0; i < GP_SLOTS_LIGHT; i++)
        assert_int_equal(gp_slots_take(s, &c), GP_SLOT_OK);
    assert_int_equal(gp_slots_take(s, &c), GP_SLOT_RESERVED);
    assert_int_equal(gp_slots_of(s, &c), GP_SLOTS_LIGHT);
    /* rule 1: full for everyone */
    for (unsigned char x = 10; gp_slots_in_use(s) < 64; x++) {
        gp_slot_key light = v4_key(x);
        assert_int_equal(gp_slots_take(s, &light), GP_SLOT_OK);
    }
    gp_slot_key d = v4_key(200);
    assert_int_equal(gp_slots_take(s, &d), GP_SLOT_FULL);
    assert_int_equal(gp_slots_of(s, &d), 0);
    /* a slot given back is free again; one never taken changes nothing */
    gp_slots_give(s, &d);
    assert_int_equal(gp_slots_in_use(s), 64);
    gp_slots_give(s, &a);
    assert_int_equal(gp_slots_of(s, &a), 39);
    assert_int_equal(gp_slots_take(s, &d), GP_SLOT_OK);
    gp_slots_free(s);
    /* per_address 0: the total only */
    s = gp_slots_new(3, 0);
    for (int i = 0; i < 3; i++)
        assert_int_equal(gp_slots_take(s, &a), GP_SLOT_OK);
    assert_int_equal(gp_slots_take(s, &b), GP_SLOT_FULL);
    gp_slots_give(s, &a);
    assert_int_equal(gp_slots_take(s, &b), GP_SLOT_OK);
    gp_slots_free(s);
}

static void test_slots_keys(void **state)
{
    (void)state;
    struct sockaddr_in6 x, y, m;
    memset(&x, 0, sizeof x);
    x.sin6_family = AF_INET6;
    inet_pton(AF_INET6, "2001:db8:1:2::1", &x.sin6_addr);
    y = x;
    inet_pton(AF_INET6, "2001:db8:1:2:ffff::9", &y.sin6_addr); /* the same /64 */
    gp_slot_key kx, ky, km, kb;
    gp_slot_key_of((struct sockaddr *)&x, &kx);
    gp_slot_key_of((struct sockaddr *)&y, &ky);
    assert_memory_equal(&kx, &ky, sizeof kx);
    inet_pton(AF_INET6, "2001:db8:1:3::1", &y.sin6_addr); /* another /64 */
    gp_slot_key_of((struct sockaddr *)&y, &ky);
    assert_memory_not_equal(&kx, &ky, sizeof kx);
    /* an IPv4-mapped address counts as its IPv4 client */
    m = x;
    inet_pton(AF_INET6, "::ffff:127.0.0.3", &m.sin6_addr);
    gp_slot_key_of((struct sockaddr *)&m, &km);
    kb = v4_key(3);
    assert_memory_equal(&km, &kb, sizeof km);
}

/* Churn: many addresses taking and giving back in a table with collisions;
 * the counts stay exact (deletion keeps every key reachable). */
static void test_slots_churn(void **state)
{
    (void)state;
    enum { TOTAL = 200, ADDRS = 150 };
    gp_slots *s = gp_slots_new(TOTAL, 4);
    assert_non_null(s);
    size_t held[ADDRS] = {0};
    uint64_t r = 12345;
    size_t in_use = 0;
    for (int step = 0; step < 200000; step++) {
        r = r * 6364136223846793005u + 1442695040888963407u;
        size_t i = (size_t)(r >> 33) % ADDRS;
        gp_slot_key k = v4_key(0);
        k.b[13] = (unsigned char)(i >> 8);
        k.b[14] = (unsigned char)i;
        if ((r >> 20) & 1) {
            int rc = gp_slots_take(s, &k);
            if (rc == GP_SLOT_OK) {
                held[i]++;
                in_use++;
            }
        } else if (held[i] > 0) {
            gp_slots_give(s, &k);
            held[i]--;
            in_use--;
        }
        assert_int_equal(gp_slots_of(s, &k), held[i]);
    }
    assert_int_equal(gp_slots_in_use(s), in_use);
    for (size_t i = 0; i < ADDRS; i++) {
        gp_slot_key k = v4_key(0);
        k.b[13] = (unsigned char)(i >> 8);
        k.b[14] = (unsigned char)i;
        assert_int_equal(gp_slots_of(s, &k), held[i]);
    }
    gp_slots_free(s);
}

static void test_config_help_text(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    assert_non_null(f);
    gp_config_usage(f, "gpserve");
    fclose(f);
    const char *expect[] = {"--port",          "GPSERVE_PORT",        "--bind",
                            "GPSERVE_BIND",    "--db",                "GPSERVE_DB",
                            "--threads",       "GPSERVE_THREADS",     "--fit-workers",
                            "--queue-size",    "GPSERVE_QUEUE_SIZE",  "--max-body-mb",
                            "--max-train-points", "GPSERVE_MAX_TRAIN_POINTS",
                            "--max-connections", "GPSERVE_MAX_CONNECTIONS", "--timeout",
                            "GPSERVE_TIMEOUT", "--api-key-file",      "GPSERVE_API_KEY_FILE",
                            "--model-cache",   "GPSERVE_MODEL_CACHE", "--compute-threads",
                            "--request-timeout", "GPSERVE_REQUEST_TIMEOUT",
                            "default 8080",    "--help"};
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
        assert_non_null(strstr(buf, expect[i]));
    free(buf);
}

static void test_parse_long(void **state)
{
    (void)state;
    long v = 0;
    assert_int_equal(gp_parse_long("42", 0, 100, &v), 0);
    assert_int_equal(v, 42);
    assert_int_equal(gp_parse_long("+7", 0, 100, &v), 0);
    assert_int_equal(v, 7);
    assert_int_equal(gp_parse_long("101", 0, 100, &v), -1);
    assert_int_equal(gp_parse_long("4 2", 0, 100, &v), -1);
    assert_int_equal(gp_parse_long("0x10", 0, 100, &v), -1);
    assert_int_equal(gp_parse_long(NULL, 0, 100, &v), -1);
    assert_int_equal(gp_parse_long("-", 0, 100, &v), -1);
}

static void test_api_key_file(void **state)
{
    (void)state;
    char path[] = "/tmp/gpserve_keyXXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "s3cret-0123456789\r\n", 19), 19);
    close(fd);
    char msg[256];
    char *key = gp_read_api_key(path, msg, sizeof msg);
    assert_non_null(key);
    assert_string_equal(key, "s3cret-0123456789");
    free(key);
    /* 15 bytes: refused, with the minimum named. */
    FILE *f = fopen(path, "w");
    fputs("0123456789abcde\n", f);
    fclose(f);
    assert_null(gp_read_api_key(path, msg, sizeof msg));
    assert_non_null(strstr(msg, "at least 16"));
    f = fopen(path, "w");
    fputs("0123456789abcdef\n", f);
    fclose(f);
    key = gp_read_api_key(path, msg, sizeof msg);
    assert_non_null(key);
    free(key);
    f = fopen(path, "w");
    fputs("\n", f);
    fclose(f);
    assert_null(gp_read_api_key(path, msg, sizeof msg));
    assert_non_null(strstr(msg, "empty"));
    unlink(path);
    assert_null(gp_read_api_key(path, msg, sizeof msg));
}

/* ---- auth helpers ---- */

static void test_ct_equal(void **state)
{
    (void)state;
    assert_true(gp_ct_equal("abc", 3, "abc", 3));
    assert_false(gp_ct_equal("abc", 3, "abd", 3));
    assert_false(gp_ct_equal("abc", 3, "abcd", 4));
    assert_false(gp_ct_equal("abcd", 4, "abc", 3));
    assert_false(gp_ct_equal("", 0, "a", 1));
    assert_true(gp_ct_equal("", 0, "", 0));
    /* a NUL-padded prefix must not pass */
    assert_false(gp_ct_equal("ab\0", 3, "ab", 2));
    assert_false(gp_ct_equal("xbc", 3, "abc", 3));
}

static void test_bearer(void **state)
{
    (void)state;
    const char *tok;
    size_t n;
    assert_true(gp_bearer_token("Bearer abc", &tok, &n));
    assert_int_equal(n, 3);
    assert_memory_equal(tok, "abc", 3);
    assert_true(gp_bearer_token("  bearer   k-1  ", &tok, &n));
    assert_int_equal(n, 3);
    assert_memory_equal(tok, "k-1", 3);
    assert_false(gp_bearer_token(NULL, &tok, &n));
    assert_false(gp_bearer_token("Basic abc", &tok, &n));
    assert_false(gp_bearer_token("Bearer", &tok, &n));
    assert_false(gp_bearer_token("Bearer   ", &tok, &n));
    assert_false(gp_bearer_token("Bearerabc", &tok, &n));
}

static void test_basic_password(void **state)
{
    (void)state;
    char buf[64];
    const char *pw;
    size_t n;
    /* "user:test-key-0123456789" */
    assert_true(gp_basic_password("Basic dXNlcjp0ZXN0LWtleS0wMTIzNDU2Nzg5", buf, sizeof buf,
                                  &pw, &n));
    assert_int_equal(n, 19);
    assert_memory_equal(pw, "test-key-0123456789", 19);
    /* an empty user name; scheme case and blanks; a colon inside the password */
    assert_true(gp_basic_password("  bAsIc   OmE6Yg==  ", buf, sizeof buf, &pw, &n)); /* ":a:b" */
    assert_int_equal(n, 3);
    assert_memory_equal(pw, "a:b", 3);
    /* padding may be left out */
    assert_true(gp_basic_password("Basic OmE6Yg", buf, sizeof buf, &pw, &n));
    assert_int_equal(n, 3);
    /* an empty password */
    assert_true(gp_basic_password("Basic dTo=", buf, sizeof buf, &pw, &n)); /* "u:" */
    assert_int_equal(n, 0);
    /* one to three bytes after the last full group */
    assert_true(gp_basic_password("Basic YTpi", buf, sizeof buf, &pw, &n)); /* "a:b" */
    assert_int_equal(n, 1);
    assert_memory_equal(pw, "b", 1);
    assert_true(gp_basic_password("Basic YTpiYw==", buf, sizeof buf, &pw, &n)); /* "a:bc" */
    assert_int_equal(n, 2);
    assert_true(gp_basic_password("Basic YTpiY2Q=", buf, sizeof buf, &pw, &n)); /* "a:bcd" */
    assert_int_equal(n, 3);
    assert_memory_equal(pw, "bcd", 3);
    /* + and / of the standard alphabet: "?>:?>" is Pz46Pz4= */
    assert_true(gp_basic_password("Basic Pz46Pz4=", buf, sizeof buf, &pw, &n));
    assert_memory_equal(pw, "?>", 2);
    assert_true(gp_basic_password("Basic +/8=", buf, sizeof buf, &pw, &n) == 0); /* no colon */

    assert_false(gp_basic_password(NULL, buf, sizeof buf, &pw, &n));
    assert_false(gp_basic_password("Bearer dXNlcjpwdw==", buf, sizeof buf, &pw, &n));
    assert_false(gp_basic_password("Basic", buf, sizeof buf, &pw, &n));
    assert_false(gp_basic_password("Basic    ", buf, sizeof buf, &pw, &n));
    assert_false(gp_basic_password("BasicdXNlcjpwdw==", buf, sizeof buf, &pw, &n));
    assert_false(gp_basic_password("Basic dXNlcg==", buf, sizeof buf, &pw, &n)); /* "user" */
    /* not base64: other alphabets, padding inside, wrong lengths, stray bits */
    assert_false(gp_basic_password("Basic test-key-0123456789", buf, sizeof buf, &pw, &n));
    assert_false(gp_basic_password("Basic dXNl_jpwdw==", buf, sizeof buf, &pw, &n));
    assert_false(gp_basic_password("Basic dX=lcjpwdw==", buf, sizeof buf, &pw, &n));
    assert_false(gp_basic_password("Basic dXNlcjpwd", buf, sizeof buf, &pw, &n));
    assert_false(gp_basic_password("Basic YTpiYw=", buf, sizeof buf, &pw, &n));
    assert_false(gp_basic_password("Basic YTpiYw===", buf, sizeof buf, &pw, &n));
    assert_false(gp_basic_password("Basic YTpiYx==", buf, sizeof buf, &pw, &n));
    assert_false(gp_basic_password("Basic dXNl cjpwdw==", buf, sizeof buf, &pw, &n));
    /* too long for the buffer: refused, never cut */
    char small[4];
    assert_false(gp_basic_password("Basic YTpiY2Q=", small, sizeof small, &pw, &n));
    assert_true(gp_basic_password("Basic YTpi", small, sizeof small, &pw, &n));
}

static void test_percent_decode_and_media(void **state)
{
    (void)state;
    char out[16];
    assert_int_equal(gp_percent_decode("a%20b", 5, out, sizeof out), 3);
    assert_string_equal(out, "a b");
    assert_int_equal(gp_percent_decode("a+b", 3, out, sizeof out), 3);
    assert_string_equal(out, "a+b");
    assert_int_equal(gp_percent_decode("%4a%4A", 6, out, sizeof out), 2);
    assert_string_equal(out, "JJ");
    assert_int_equal(gp_percent_decode("%4", 2, out, sizeof out), -1);
    assert_int_equal(gp_percent_decode("%g0", 3, out, sizeof out), -1);
    assert_int_equal(gp_percent_decode("%00", 3, out, sizeof out), -1);
    assert_int_equal(gp_percent_decode("abcd", 4, out, 4), -1);
    assert_int_equal(gp_percent_decode("abc", 3, out, 4), 3);

    assert_true(gp_media_type_is("application/json", "application/json"));
    assert_true(gp_media_type_is("Application/JSON; charset=utf-8", "application/json"));
    assert_true(gp_media_type_is(" text/csv ;header=present", "text/csv"));
    assert_false(gp_media_type_is("application/jsonx", "application/json"));
    assert_false(gp_media_type_is("text/plain", "text/csv"));
    assert_false(gp_media_type_is(NULL, "text/csv"));
}

static void test_job_id_and_json_scan(void **state)
{
    (void)state;
    char a[33], b[33];
    gp_job_id_generate(a);
    gp_job_id_generate(b);
    assert_int_equal(strlen(a), 32);
    assert_int_equal(strspn(a, "0123456789abcdef"), 32);
    assert_string_not_equal(a, b);

    const char *body = "{\"error\":{\"code\":\"invalid_data\",\"message\":\"y[3] is \\\"NaN\\\" "
                       "\\u00e9\\ud83d\\ude00\",\"field\":\"y[3]\"}}";
    char msg[64];
    assert_true(gp_json_find_string(body, strlen(body), "message", msg, sizeof msg));
    assert_string_equal(msg, "y[3] is \"NaN\" \xc3\xa9\xf0\x9f\x98\x80");
    assert_true(gp_json_find_string(body, strlen(body), "field", msg, sizeof msg));
    assert_string_equal(msg, "y[3]");
    assert_false(gp_json_find_string(body, strlen(body), "nope", msg, sizeof msg));
    assert_string_equal(msg, "");
    char tiny[5];
    assert_true(gp_json_find_string(body, strlen(body), "code", tiny, sizeof tiny));
    assert_string_equal(tiny, "inva");
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
    gp_metrics_gauges g = {2, 1, 3, 4, 5, 6, 7, 8, 9, 10};
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
        "gpserve_batch_max_requests 9\n",
    };
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++) {
        if (strstr(text, expect[i]) == NULL)
            fail_msg("missing from /metrics: %s\n---\n%s", expect[i], text);
    }
    free(text);
    gp_metrics_free(m);
}

/* ---- the fit queue, with fake fit jobs ---- */

typedef struct fake_fit {
    char name[16];
    int iterations; /* progress calls before finishing */
    int rc;         /* result when not cancelled */
    int *freed;
} fake_fit;

static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t fake_cond = PTHREAD_COND_INITIALIZER;
static int fake_gate_open = 1; /* fits wait while 0 */
static int fake_started;
static int fake_saves;
static char fake_last_status[16];

static int fake_run(gp_api *api, gp_fit_job *job, gp_progress_fn progress, void *ctx,
                    gp_response *out, double *fit_seconds)
{
    (void)api;
    fake_fit *f = (fake_fit *)job;
    pthread_mutex_lock(&fake_lock);
    fake_started++;
    pthread_cond_broadcast(&fake_cond);
    pthread_mutex_unlock(&fake_lock);
    for (int i = 0; i < f->iterations; i++) {
        pthread_mutex_lock(&fake_lock);
        while (!fake_gate_open)
            pthread_cond_wait(&fake_cond, &fake_lock);
        pthread_mutex_unlock(&fake_lock);
        if (progress(ctx, i + 1, f->iterations, -1.0 * i)) {
            gp_api_fail(out, GP_ECANCELLED, NULL, "cancelled");
            return GP_ECANCELLED;
        }
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    *fit_seconds = 0.01;
    if (f->rc != 0) {
        gp_api_fail(out, f->rc, "X[0]", "bad \"data\"");
        return f->rc;
    }
    out->status = 201;
    out->content_type = "application/json";
    out->body = strdup("{\"name\":\"m\",\"version\":1}");
    out->body_len = strlen(out->body);
    return 0;
}

static void fake_free(gp_fit_job *job)
{
    fake_fit *f = (fake_fit *)job;
    if (f->freed)
        (*f->freed)++;
    free(f);
}

static const char *fake_name(const gp_fit_job *job)
{
    return ((const fake_fit *)job)->name;
}

static const char *fake_method(const gp_fit_job *job)
{
    (void)job;
    return "exact";
}

static int fake_max_iterations(const gp_fit_job *job)
{
    return ((const fake_fit *)job)->iterations;
}

static int fake_releases;

static void fake_record(const char *status)
{
    pthread_mutex_lock(&fake_lock);
    fake_saves++;
    snprintf(fake_last_status, sizeof fake_last_status, "%s", status);
    pthread_mutex_unlock(&fake_lock);
}

static int fake_update(gp_api *api, const gp_job_info *job, const char *owner, int started,
                       gp_error *err)
{
    (void)api;
    (void)owner;
    (void)started;
    (void)err;
    fake_record(job->status);
    return 0;
}

static int fake_finish(gp_api *api, const gp_job_info *job, const char *owner, gp_error *err)
{
    (void)api;
    (void)owner;
    (void)err;
    fake_record(job->status);
    return 0;
}

static int fake_release(gp_api *api, const char *id, const char *owner, gp_error *err)
{
    (void)api;
    (void)id;
    (void)owner;
    (void)err;
    pthread_mutex_lock(&fake_lock);
    fake_releases++;
    pthread_mutex_unlock(&fake_lock);
    fake_record("released");
    return 0;
}

static int fake_load(gp_api *api, const char *id, gp_job_info *job, gp_error *err)
{
    (void)api;
    memset(job, 0, sizeof *job);
    if (strcmp(id, "elsewhere") == 0) {
        snprintf(job->id, sizeof job->id, "%s", id);
        job->status = "succeeded";
        return 0;
    }
    return gp_error_set(err, GP_ENOTFOUND, "id", "job '%s' not found", id);
}

/* DELETE of a job not held here: the fake store has only "elsewhere", ended. */
static void fake_cancel_stored(gp_api *api, const char *id, double now, gp_response *out)
{
    (void)api;
    (void)now;
    if (strcmp(id, "elsewhere") == 0)
        gp_api_fail(out, GP_ECONFLICT, "id", "job '%s' already finished (succeeded)", id);
    else
        gp_api_fail(out, GP_ENOTFOUND, "id", "job '%s' not found", id);
}

/* No store: the durable-job entries that only write are recorded; renew and
 * claim stay NULL (no keeper rounds over a store). */
static const gp_fit_ops fake_ops = {.run = fake_run,
                                    .free_job = fake_free,
                                    .name = fake_name,
                                    .method = fake_method,
                                    .max_iterations = fake_max_iterations,
                                    .load = fake_load,
                                    .update = fake_update,
                                    .finish = fake_finish,
                                    .release = fake_release,
                                    .cancel_stored = fake_cancel_stored};

static gp_fit_job *fake_job(const char *name, int iterations, int rc, int *freed)
{
    fake_fit *f = calloc(1, sizeof *f);
    snprintf(f->name, sizeof f->name, "%s", name);
    f->iterations = iterations;
    f->rc = rc;
    f->freed = freed;
    return (gp_fit_job *)f;
}

static int response_has(const gp_response *res, const char *text)
{
    if (res->body == NULL)
        return 0;
    char *s = strndup(res->body, res->body_len);
    int found = strstr(s, text) != NULL;
    free(s);
    return found;
}

static void test_jobs_queue_without_workers(void **state)
{
    (void)state;
    int freed = 0;
    gp_metrics *m = gp_metrics_new();
    gp_jobs *js = gp_jobs_new(NULL, 2, 1, m, &fake_ops);
    assert_non_null(js);
    char id1[40], id2[40], id3[40];
    assert_int_equal(gp_jobs_submit_async(js, fake_job("a", 3, 0, &freed), id1, sizeof id1, NULL), 0);
    assert_int_equal(gp_jobs_submit_async(js, fake_job("b", 3, 0, &freed), id2, sizeof id2, NULL), 0);
    gp_fit_job *third = fake_job("c", 3, 0, &freed);
    assert_int_equal(gp_jobs_submit_async(js, third, id3, sizeof id3, NULL), GP_EOVERLOADED);
    assert_int_equal(gp_jobs_submit_sync(js, third, NULL, NULL, NULL), GP_EOVERLOADED);
    fake_free(third); /* still ours after a refusal */
    assert_int_equal(freed, 1);
    assert_int_equal(strlen(id1), 32);
    assert_string_not_equal(id1, id2);
    size_t queued, running;
    gp_jobs_counts(js, &queued, &running);
    assert_int_equal(queued, 2);
    assert_int_equal(running, 0);

    gp_response res;
    memset(&res, 0, sizeof res);
    gp_jobs_get(js, id1, &res);
    assert_int_equal(res.status, 200);
    assert_true(response_has(&res, "\"queued\""));
    gp_response_free(&res);

    /* cancel a queued job: removed, cancelled, its fit freed */
    gp_jobs_cancel(js, id1, &res);
    assert_int_equal(res.status, 200);
    assert_true(response_has(&res, "\"cancelled\""));
    gp_response_free(&res);
    assert_int_equal(freed, 2);
    gp_jobs_counts(js, &queued, &running);
    assert_int_equal(queued, 1);
    pthread_mutex_lock(&fake_lock);
    assert_string_equal(fake_last_status, "cancelled");
    pthread_mutex_unlock(&fake_lock);
    /* cancelling again: already finished */
    gp_jobs_cancel(js, id1, &res);
    assert_int_equal(res.status, 409);
    gp_response_free(&res);

    /* unknown: the store says 404; another daemon's finished job: 200 / 409 */
    gp_jobs_get(js, "nosuchjob", &res);
    assert_int_equal(res.status, 404);
    gp_response_free(&res);
    gp_jobs_cancel(js, "nosuchjob", &res);
    assert_int_equal(res.status, 404);
    gp_response_free(&res);
    gp_jobs_get(js, "elsewhere", &res);
    assert_int_equal(res.status, 200);
    gp_response_free(&res);
    gp_jobs_cancel(js, "elsewhere", &res);
    assert_int_equal(res.status, 409);
    gp_response_free(&res);

    /* a freed slot takes a new job */
    assert_int_equal(
        gp_jobs_submit_async(js, fake_job("d", 3, 0, &freed), id3, sizeof id3, NULL), 0);
    int released = fake_releases;
    gp_jobs_shutdown(js); /* hands the two queued ones back to the store */
    assert_int_equal(freed, 4);
    assert_int_equal(fake_releases, released + 2);
    gp_jobs_get(js, id2, &res);
    assert_true(response_has(&res, "\"queued\""));
    gp_response_free(&res);
    char id4[40];
    gp_fit_job *late = fake_job("e", 1, 0, &freed);
    assert_int_equal(gp_jobs_submit_async(js, late, id4, sizeof id4, NULL), GP_ENOTREADY);
    assert_int_equal(freed, 4);
    fake_free(late);
    gp_jobs_free(js);
    gp_metrics_free(m);
}

typedef struct sync_result {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int before, done;
    gp_response res;
} sync_result;

static void sync_before(void *cookie)
{
    sync_result *r = cookie;
    r->before++; /* called under the queue lock */
}

static void sync_done(void *cookie, gp_response *res)
{
    sync_result *r = cookie;
    pthread_mutex_lock(&r->lock);
    r->res = *res;
    memset(res, 0, sizeof *res);
    r->done++;
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->lock);
}

/* A synchronous fit's client that goes away after `calls` checks. */
typedef struct watched {
    sync_result r;
    atomic_int calls, gone_after;
} watched;

static int watched_alive(void *cookie)
{
    watched *w = cookie;
    return atomic_fetch_add(&w->calls, 1) < atomic_load(&w->gone_after);
}

static void watched_done(void *cookie, gp_response *res)
{
    sync_done(&((watched *)cookie)->r, res);
}

static void wait_done(sync_result *r)
{
    pthread_mutex_lock(&r->lock);
    while (!r->done)
        pthread_cond_wait(&r->cond, &r->lock);
    pthread_mutex_unlock(&r->lock);
}

/* A synchronous fit whose client disconnects is cancelled at its next
 * progress report and frees the worker: a long fit (100000 fake iterations)
 * ends after the client goes, and the next fit runs on the one worker. */
static void test_jobs_sync_client_gone(void **state)
{
    (void)state;
    int freed = 0;
    gp_metrics *m = gp_metrics_new();
    gp_jobs *js = gp_jobs_new(NULL, 4, 1, m, &fake_ops);
    assert_int_equal(gp_jobs_start(js), 0);
    watched w;
    memset(&w, 0, sizeof w);
    pthread_mutex_init(&w.r.lock, NULL);
    pthread_cond_init(&w.r.cond, NULL);
    atomic_init(&w.calls, 0);
    atomic_init(&w.gone_after, 3); /* the start check and two progress reports */
    assert_int_equal(gp_jobs_submit_sync_watched(js, fake_job("gone", 100000, 0, &freed), NULL,
                                                 watched_done, watched_alive, &w),
                     0);
    wait_done(&w.r);
    assert_int_equal(w.r.res.status, 0); /* no answer: the client is gone */
    /* cancelled at the first "gone" (the keeper, once a second, may ask once more) */
    assert_in_range(atomic_load(&w.calls), 4, 5);
    gp_response_free(&w.r.res);
    /* Gone before it starts: never run. */
    watched w2;
    memset(&w2, 0, sizeof w2);
    pthread_mutex_init(&w2.r.lock, NULL);
    pthread_cond_init(&w2.r.cond, NULL);
    atomic_init(&w2.calls, 0);
    atomic_init(&w2.gone_after, 0);
    int started = fake_started;
    assert_int_equal(gp_jobs_submit_sync_watched(js, fake_job("gone2", 5, 0, &freed), NULL,
                                                 watched_done, watched_alive, &w2),
                     0);
    wait_done(&w2.r);
    assert_int_equal(fake_started, started);
    assert_int_equal(w2.r.res.status, 0);
    gp_response_free(&w2.r.res);
    /* The worker is free: a plain synchronous fit completes. */
    sync_result r;
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.lock, NULL);
    pthread_cond_init(&r.cond, NULL);
    assert_int_equal(gp_jobs_submit_sync(js, fake_job("next", 2, 0, &freed), NULL, sync_done, &r),
                     0);
    wait_done(&r);
    assert_int_equal(r.res.status, 201);
    gp_response_free(&r.res);
    gp_jobs_shutdown(js);
    gp_jobs_free(js);
    gp_metrics_free(m);
    assert_int_equal(freed, 3);
}

static void wait_status(gp_jobs *js, const char *id, const char *status)
{
    char want[40];
    snprintf(want, sizeof want, "\"status\":\"%s\"", status);
    for (int i = 0; i < 5000; i++) {
        gp_response res;
        memset(&res, 0, sizeof res);
        gp_jobs_get(js, id, &res);
        int ok = response_has(&res, want);
        gp_response_free(&res);
        if (ok)
            return;
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    fail_msg("job %s never reached %s", id, status);
}

static void test_jobs_with_workers(void **state)
{
    (void)state;
    int freed = 0;
    fake_started = 0;
    gp_metrics *m = gp_metrics_new();
    gp_jobs *js = gp_jobs_new(NULL, 4, 1, m, &fake_ops);
    assert_int_equal(gp_jobs_start(js), 0);

    /* a synchronous fit completes through the callback */
    sync_result r;
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.lock, NULL);
    pthread_cond_init(&r.cond, NULL);
    assert_int_equal(gp_jobs_submit_sync(js, fake_job("s", 2, 0, &freed), sync_before, sync_done,
                                         &r),
                     0);
    pthread_mutex_lock(&r.lock);
    while (!r.done)
        pthread_cond_wait(&r.cond, &r.lock);
    pthread_mutex_unlock(&r.lock);
    assert_int_equal(r.before, 1);
    assert_int_equal(r.res.status, 201);
    gp_response_free(&r.res);

    /* async: success, failure */
    char ok_id[40], bad_id[40], slow_id[40], queued_id[40];
    assert_int_equal(gp_jobs_submit_async(js, fake_job("ok", 2, 0, &freed), ok_id, 40, NULL), 0);
    assert_int_equal(gp_jobs_submit_async(js, fake_job("bad", 1, GP_EDATA, &freed), bad_id, 40, NULL),
                     0);
    wait_status(js, ok_id, "succeeded");
    wait_status(js, bad_id, "failed");
    gp_response res;
    memset(&res, 0, sizeof res);
    gp_jobs_get(js, ok_id, &res);
    assert_true(response_has(&res, "\"model\""));
    gp_response_free(&res);
    gp_jobs_get(js, bad_id, &res);
    assert_true(response_has(&res, "invalid_data"));
    assert_true(response_has(&res, "bad \\\"data\\\""));
    gp_response_free(&res);

    /* a running job is cancelled through the progress callback */
    pthread_mutex_lock(&fake_lock);
    fake_gate_open = 0;
    int started = fake_started;
    pthread_mutex_unlock(&fake_lock);
    assert_int_equal(gp_jobs_submit_async(js, fake_job("slow", 1000000, 0, &freed), slow_id, 40, NULL),
                     0);
    assert_int_equal(gp_jobs_submit_async(js, fake_job("q", 5, 0, &freed), queued_id, 40, NULL), 0);
    pthread_mutex_lock(&fake_lock);
    while (fake_started == started)
        pthread_cond_wait(&fake_cond, &fake_lock);
    pthread_mutex_unlock(&fake_lock);
    wait_status(js, slow_id, "running");
    gp_jobs_cancel(js, slow_id, &res);
    assert_int_equal(res.status, 202);
    gp_response_free(&res);
    pthread_mutex_lock(&fake_lock);
    fake_gate_open = 1;
    pthread_cond_broadcast(&fake_cond);
    pthread_mutex_unlock(&fake_lock);
    wait_status(js, slow_id, "cancelled");
    wait_status(js, queued_id, "succeeded");
    gp_jobs_cancel(js, queued_id, &res);
    assert_int_equal(res.status, 409);
    gp_response_free(&res);

    size_t queued, running;
    gp_jobs_counts(js, &queued, &running);
    assert_int_equal(queued, 0);
    assert_int_equal(running, 0);

    /* shutdown stops a running fit; a queued synchronous one gets 503 */
    pthread_mutex_lock(&fake_lock);
    started = fake_started;
    pthread_mutex_unlock(&fake_lock);
    assert_int_equal(gp_jobs_submit_async(js, fake_job("long", 1000000, 0, &freed), slow_id, 40, NULL),
                     0);
    pthread_mutex_lock(&fake_lock);
    while (fake_started == started)
        pthread_cond_wait(&fake_cond, &fake_lock);
    pthread_mutex_unlock(&fake_lock);
    memset(&r.res, 0, sizeof r.res);
    r.done = 0;
    assert_int_equal(gp_jobs_submit_sync(js, fake_job("s2", 2, 0, &freed), sync_before, sync_done,
                                         &r),
                     0);
    int released = fake_releases;
    gp_jobs_shutdown(js);
    assert_int_equal(r.done, 1);
    assert_int_equal(r.res.status, 503);
    gp_response_free(&r.res);
    /* the running async fit was stopped and handed back, to run after a restart */
    wait_status(js, slow_id, "queued");
    assert_int_equal(fake_releases, released + 1);
    assert_int_equal(freed, 7);
    pthread_mutex_lock(&fake_lock);
    assert_true(fake_saves > 0);
    pthread_mutex_unlock(&fake_lock);

    size_t len;
    gp_metrics_gauges g = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    char *text = gp_metrics_render(m, &g, &len);
    assert_non_null(strstr(text, "gpserve_fits_total{method=\"exact\",outcome=\"succeeded\"} 3"));
    assert_non_null(strstr(text, "gpserve_fits_total{method=\"exact\",outcome=\"failed\"} 1"));
    assert_non_null(strstr(text, "gpserve_fits_total{method=\"exact\",outcome=\"cancelled\"} 3"));
    free(text);
    gp_jobs_free(js);
    gp_metrics_free(m);
    pthread_mutex_destroy(&r.lock);
    pthread_cond_destroy(&r.cond);
}

/* ---- the lease keeper, over a fake store ---- */

static gp_api_job_hold fake_held[4]; /* what the fake store says we hold */
static size_t fake_n_held;
static int fake_claims_left;         /* jobs the fake store lets us take over */
static int *fake_claim_freed;

static int fake_renew(gp_api *api, const char *owner, double lease_until,
                      gp_api_job_hold **held, size_t *count, gp_error *err)
{
    (void)api;
    (void)owner;
    (void)lease_until;
    (void)err;
    pthread_mutex_lock(&fake_lock);
    *count = fake_n_held;
    *held = fake_n_held ? calloc(fake_n_held, sizeof **held) : NULL;
    if (fake_n_held)
        memcpy(*held, fake_held, fake_n_held * sizeof **held);
    pthread_mutex_unlock(&fake_lock);
    return 0;
}

static int fake_claim(gp_api *api, const char *owner, double now, double lease_until,
                      int max_attempts, gp_job_info *job, gp_fit_job **fj, int *outcome,
                      gp_error *err)
{
    (void)api;
    (void)owner;
    (void)now;
    (void)lease_until;
    (void)max_attempts;
    (void)err;
    memset(job, 0, sizeof *job);
    *fj = NULL;
    *outcome = GP_API_CLAIM_NONE;
    if (fake_claims_left == 0)
        return 0;
    fake_claims_left--;
    snprintf(job->id, sizeof job->id, "taken-over");
    snprintf(job->model_name, sizeof job->model_name, "t");
    job->status = "queued";
    job->attempts = 1;
    *fj = fake_job("t", 2, 0, fake_claim_freed);
    *outcome = GP_API_CLAIM_RUN;
    return 0;
}

/* The keeper: a job missing from the store's list was taken over by another
 * daemon (its fit stops and nothing is written; GETs read the store); a job
 * with a cancel request is cancelled; a job whose lease expired is taken over
 * and run. */
static void test_jobs_keeper(void **state)
{
    (void)state;
    int freed = 0;
    fake_claim_freed = &freed;
    fake_claims_left = 0;
    gp_fit_ops ops = fake_ops;
    ops.renew = fake_renew;
    ops.claim = fake_claim;
    gp_jobs *js = gp_jobs_new(NULL, 4, 1, NULL, &ops);
    /* No worker yet: both jobs stay queued. */
    char lost[40], asked[40];
    assert_int_equal(gp_jobs_submit_async(js, fake_job("l", 3, 0, &freed), lost, 40, NULL), 0);
    assert_int_equal(gp_jobs_submit_async(js, fake_job("c", 3, 0, &freed), asked, 40, NULL), 0);
    pthread_mutex_lock(&fake_lock);
    fake_n_held = 1;
    snprintf(fake_held[0].id, sizeof fake_held[0].id, "%s", asked);
    fake_held[0].cancel_requested = 1;
    snprintf(fake_last_status, sizeof fake_last_status, "-");
    pthread_mutex_unlock(&fake_lock);
    gp_jobs_keep(js);
    size_t queued, running;
    gp_jobs_counts(js, &queued, &running);
    assert_int_equal(queued, 0);
    assert_int_equal(freed, 2);
    gp_response res;
    memset(&res, 0, sizeof res);
    gp_jobs_get(js, lost, &res); /* forgotten here: the (fake) store does not know it */
    assert_int_equal(res.status, 404);
    gp_response_free(&res);
    gp_jobs_get(js, asked, &res);
    assert_true(response_has(&res, "\"cancelled\""));
    gp_response_free(&res);
    pthread_mutex_lock(&fake_lock);
    assert_string_equal(fake_last_status, "cancelled");
    fake_n_held = 0;
    pthread_mutex_unlock(&fake_lock);

    /* A job of a dead daemon: taken over, run, succeeded. */
    fake_claims_left = 1;
    assert_int_equal(gp_jobs_start(js), 0); /* the keeper's first round claims it */
    wait_status(js, "taken-over", "succeeded");
    assert_int_equal(fake_claims_left, 0);
    gp_jobs_get(js, "taken-over", &res);
    assert_true(response_has(&res, "\"attempts\":2"));
    gp_response_free(&res);
    gp_jobs_shutdown(js);
    gp_jobs_free(js);
    assert_int_equal(freed, 3);
}

/* The keeper removes ended jobs and idempotency keys past their retentions
 * (about once a minute: the first round prunes), keys with
 * --idempotency-hours (24 by default), and not at all with retention 0. */
static double fake_pruned_jobs_age, fake_pruned_keys_age;

static int fake_prune(gp_api *api, double age, size_t *deleted, gp_error *err)
{
    (void)api;
    (void)err;
    fake_pruned_jobs_age = age;
    *deleted = 0;
    return 0;
}

static int fake_prune_keys(gp_api *api, double age, size_t *deleted, gp_error *err)
{
    (void)api;
    (void)err;
    fake_pruned_keys_age = age;
    *deleted = 0;
    return 0;
}

static void test_jobs_keeper_prunes_keys(void **state)
{
    (void)state;
    gp_fit_ops ops = fake_ops;
    ops.renew = fake_renew; /* the keeper's round runs with a store (here, a fake one) */
    ops.claim = fake_claim;
    fake_n_held = 0;
    fake_claims_left = 0;
    ops.prune = fake_prune;
    ops.prune_keys = fake_prune_keys;
    const double hours[] = {-1, 5, 0}; /* -1: the default */
    const double expect[] = {24 * 3600.0, 5 * 3600.0, -1};
    for (int i = 0; i < 3; i++) {
        gp_jobs *js = gp_jobs_new(NULL, 4, 1, NULL, &ops);
        if (hours[i] >= 0)
            gp_jobs_set_key_retention(js, 3600.0 * hours[i]);
        fake_pruned_jobs_age = fake_pruned_keys_age = -1;
        gp_jobs_keep(js);
        assert_true(fake_pruned_keys_age == expect[i]);
        assert_true(fake_pruned_jobs_age == 7 * 24 * 3600.0); /* jobs as before */
        gp_jobs_free(js);
    }
}

/* Finished jobs beyond the in-memory limit are answered from the store. */
static void test_jobs_eviction(void **state)
{
    (void)state;
    int freed = 0;
    gp_jobs *js = gp_jobs_new(NULL, 1, 1, NULL, &fake_ops);
    char first[40] = "", last[40] = "";
    gp_response res;
    memset(&res, 0, sizeof res);
    for (int i = 0; i < 1100; i++) {
        char id[40];
        assert_int_equal(gp_jobs_submit_async(js, fake_job("x", 1, 0, &freed), id, sizeof id, NULL), 0);
        gp_jobs_cancel(js, id, &res);
        assert_int_equal(res.status, 200);
        gp_response_free(&res);
        if (i == 0)
            memcpy(first, id, sizeof id);
        memcpy(last, id, sizeof id);
    }
    assert_int_equal(freed, 1100);
    gp_jobs_get(js, last, &res);
    assert_int_equal(res.status, 200);
    gp_response_free(&res);
    gp_jobs_get(js, first, &res); /* evicted: the (fake) store does not know it */
    assert_int_equal(res.status, 404);
    gp_response_free(&res);
    gp_jobs_shutdown(js);
    gp_jobs_free(js);
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
        cmocka_unit_test(test_config_defaults),
        cmocka_unit_test(test_config_env_and_flags),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_config_help_text),
        cmocka_unit_test(test_slots_rules),
        cmocka_unit_test(test_slots_keys),
        cmocka_unit_test(test_slots_churn),
        cmocka_unit_test(test_parse_long),
        cmocka_unit_test(test_api_key_file),
        cmocka_unit_test(test_ct_equal),
        cmocka_unit_test(test_bearer),
        cmocka_unit_test(test_basic_password),
        cmocka_unit_test(test_percent_decode_and_media),
        cmocka_unit_test(test_job_id_and_json_scan),
        cmocka_unit_test(test_metrics_render),
        cmocka_unit_test(test_jobs_queue_without_workers),
        cmocka_unit_test(test_jobs_with_workers),
        cmocka_unit_test(test_jobs_sync_client_gone),
        cmocka_unit_test(test_jobs_eviction),
        cmocka_unit_test(test_jobs_keeper),
        cmocka_unit_test(test_jobs_keeper_prunes_keys),
    };
    return cmocka_run_group_tests_name("server", tests, NULL, NULL);
}
