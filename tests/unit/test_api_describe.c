/* api: what it describes of itself: the methods listing (and its kernels),
 * a method's restrictions and job budget, the error catalogue table, the
 * embedded OpenAPI document and the browser view's files. */
#include "tests/unit/api_testutil.h"

#include <libpq-fe.h>
#include <pthread.h>

#include "core/methods/registry.h"
#include "api/ui_assets.h"
#include "core/model/model.h"
#include "tests/unit/api_fixture.h"

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
    assert_int_equal(GP_ERROR_CODE_COUNT, 25);
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

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_methods_listing),
        cmocka_unit_test(test_methods_listing_kernels),
        cmocka_unit_test(test_error_catalogue_table),
        cmocka_unit_test(test_single_leaf_refuses_composite),
        cmocka_unit_test(test_job_budget_from_descriptor),
        cmocka_unit_test(test_openapi_matches_file),
        cmocka_unit_test(test_ui_assets_match_files),
        cmocka_unit_test(test_ui_asset_types_etags_and_404),
    };
    return cmocka_run_group_tests_name("api", tests, group_setup, group_teardown);
}
