/* api: structured (OBJECT) options. The jansson -> gp_value conversion (every
 * type, key order, the depth and size limits, numbers beyond a double), the
 * options parser with a fake method that declares an OBJECT option (type
 * errors, the method's own checks at parse time and once d is known), the
 * methods listing, the components of a mixture (kind "mixture"), and an hkd
 * job rebuilt from its stored request (the durable-job path). */
#include "tests/unit/api_testutil.h"

#include "core/base/value.h"
#include "core/methods/registry.h"
#include "core/model/method.h"
#include "core/model/model.h"

/* ---- gp_json_to_value ---- */

static json_t *parse(const char *text)
{
    json_error_t je;
    json_t *j = json_loads(text, JSON_DECODE_INT_AS_REAL, &je);
    if (j == NULL)
        fail_msg("bad test JSON: %s", je.text);
    return j;
}

static void test_value_types(void **state)
{
    (void)state;
    json_t *j = parse("{\"b\": true, \"f\": false, \"n\": null, \"x\": -2.5, \"i\": 3, "
                      "\"s\": \"negate\", \"a\": [0, [1, 2], {}], \"o\": {\"k\": []}}");
    gp_value *v = NULL;
    gp_error err;
    gp_error_clear(&err);
    assert_int_equal(gp_json_to_value(j, "options.sym", &v, &err), GP_OK);
    assert_int_equal(v->type, GP_VALUE_OBJECT);
    assert_int_equal(v->n, 8);
    /* members keep the request's order */
    const char *order[] = {"b", "f", "n", "x", "i", "s", "a", "o"};
    for (size_t i = 0; i < 8; i++)
        assert_string_equal(v->keys[i], order[i]);
    assert_int_equal(gp_value_get(v, "b")->type, GP_VALUE_BOOL);
    assert_true(gp_value_get(v, "b")->number == 1.0);
    assert_true(gp_value_get(v, "f")->number == 0.0);
    assert_int_equal(gp_value_get(v, "n")->type, GP_VALUE_NULL);
    assert_int_equal(gp_value_get(v, "x")->type, GP_VALUE_NUMBER);
    assert_true(gp_value_get(v, "x")->number == -2.5);
    assert_true(gp_value_get(v, "i")->number == 3.0);
    assert_string_equal(gp_value_get(v, "s")->string, "negate");
    const gp_value *a = gp_value_get(v, "a");
    assert_int_equal(a->type, GP_VALUE_ARRAY);
    assert_int_equal(a->n, 3);
    assert_null(a->keys);
    assert_int_equal(a->items[1].type, GP_VALUE_ARRAY);
    assert_true(a->items[1].items[1].number == 2.0);
    assert_int_equal(a->items[2].type, GP_VALUE_OBJECT);
    assert_int_equal(a->items[2].n, 0);
    const gp_value *o = gp_value_get(v, "o");
    assert_int_equal(gp_value_get(o, "k")->type, GP_VALUE_ARRAY);
    assert_null(gp_value_get(v, "missing"));
    /* a deep copy is the same tree */
    gp_value copy;
    assert_int_equal(gp_value_copy(&copy, v), GP_OK);
    assert_string_equal(copy.keys[5], "s");
    assert_string_equal(gp_value_get(&copy, "s")->string, "negate");
    gp_value_clear(&copy);
    gp_value_free(v);
    json_decref(j);
}

/* {"a": {"a": ... {} ...}} with `levels` objects in all. */
static json_t *nested(int levels)
{
    json_t *inner = json_object();
    for (int i = 1; i < levels; i++) {
        json_t *outer = json_object();
        json_object_set_new(outer, "a", inner);
        inner = outer;
    }
    return inner;
}

static void test_value_depth_limit(void **state)
{
    (void)state;
    gp_value *v = NULL;
    gp_error err;
    json_t *ok = nested(GP_VALUE_MAX_DEPTH);
    assert_int_equal(gp_json_to_value(ok, "options.sym", &v, &err), GP_OK);
    gp_value_free(v);
    json_decref(ok);
    json_t *deep = nested(GP_VALUE_MAX_DEPTH + 1);
    v = NULL;
    assert_int_equal(gp_json_to_value(deep, "options.sym", &v, &err), GP_EINVAL);
    assert_null(v);
    assert_string_equal(err.field, "options.sym");
    assert_non_null(strstr(err.message, "deeper"));
    json_decref(deep);
    /* arrays count as levels too; a hostile body 1000 levels deep is refused
     * without recursing that deep */
    json_t *arr = json_array();
    for (int i = 0; i < 1000; i++) {
        json_t *outer = json_array();
        json_array_append_new(outer, arr);
        arr = outer;
    }
    json_t *root = json_object();
    json_object_set_new(root, "g", arr);
    assert_int_equal(gp_json_to_value(root, "options.sym", &v, &err), GP_EINVAL);
    assert_string_equal(err.field, "options.sym");
    json_decref(root);
}

static void test_value_size_limit(void **state)
{
    (void)state;
    gp_value *v = NULL;
    gp_error err;
    /* the object and its array are 2 values: 2 + (MAX - 2) items fit exactly */
    json_t *root = json_object(), *arr = json_array();
    for (int i = 0; i < GP_VALUE_MAX_NODES - 2; i++)
        json_array_append_new(arr, json_real(i));
    json_object_set_new(root, "g", arr);
    assert_int_equal(gp_json_to_value(root, "options.sym", &v, &err), GP_OK);
    assert_int_equal(gp_value_get(v, "g")->n, GP_VALUE_MAX_NODES - 2);
    gp_value_free(v);
    v = NULL;
    json_array_append_new(arr, json_real(1));
    assert_int_equal(gp_json_to_value(root, "options.sym", &v, &err), GP_EINVAL);
    assert_null(v);
    assert_string_equal(err.field, "options.sym");
    assert_non_null(strstr(err.message, "10000"));
    json_decref(root);
    /* spread over many small containers, the count is the same */
    root = json_object();
    arr = json_array();
    for (int i = 0; i < GP_VALUE_MAX_NODES / 3; i++) {
        json_t *pair = json_object();
        json_object_set_new(pair, "x", json_real(i));
        json_object_set_new(pair, "y", json_real(i));
        json_array_append_new(arr, pair);
    }
    json_object_set_new(root, "g", arr);
    assert_int_equal(gp_json_to_value(root, "options.sym", &v, &err), GP_EINVAL);
    json_decref(root);
}

static void test_value_number_overflow(void **state)
{
    (void)state;
    /* the body parser turns 1e999 into a marker; the conversion names the member */
    const char *body = "{\"g\": [{\"period\": 1}, {\"period\": 1e999}]}";
    gp_request req = make_req("application/json", body, NULL, 0);
    json_t *j = NULL;
    gp_error err;
    assert_int_equal(gp_json_parse_body(&req, &j, &err), GP_OK);
    gp_value *v = NULL;
    assert_int_equal(gp_json_to_value(j, "options.sym", &v, &err), GP_EINVAL);
    assert_string_equal(err.field, "options.sym.g[1].period");
    assert_non_null(strstr(err.message, "1e999"));
    json_decref(j);
}

/* ---- the options parser with a fake method ---- */

/* "sym": {"dims": [k, ...], "mode": "a"|"b"}: structure at d = 0, dims < d after. */
static int fake_check(const char *name, const gp_value *v, size_t d, const char *field,
                      gp_error *err)
{
    char f[GP_ERROR_FIELD_LEN];
    if (strcmp(name, "sym") != 0)
        return gp_error_set(err, GP_EINTERNAL, field, "no such object option");
    if (v == NULL) /* not given: its default holds for any d */
        return GP_OK;
    for (size_t i = 0; i < v->n; i++)
        if (strcmp(v->keys[i], "dims") != 0 && strcmp(v->keys[i], "mode") != 0) {
            snprintf(f, sizeof f, "%s.%s", field, v->keys[i]);
            return gp_error_set(err, GP_EINVAL, f, "unknown member");
        }
    const gp_value *dims = gp_value_get(v, "dims");
    if (dims == NULL)
        return GP_OK;
    snprintf(f, sizeof f, "%s.dims", field);
    if (dims->type != GP_VALUE_ARRAY)
        return gp_error_set(err, GP_EINVAL, f, "%s must be an array", f);
    for (size_t i = 0; i < dims->n; i++) {
        snprintf(f, sizeof f, "%s.dims[%zu]", field, i);
        const gp_value *e = &dims->items[i];
        if (e->type != GP_VALUE_NUMBER || e->number < 0 || e->number != floor(e->number))
            return gp_error_set(err, GP_EINVAL, f, "%s must be a column index", f);
        if (d > 0 && e->number >= (double)d)
            return gp_error_set(err, GP_EINVAL, f, "%s is beyond the %zu columns", f, d);
    }
    return GP_OK;
}

static const gp_method_ops fake_ops = {.check_option = fake_check};
static const gp_option_spec fake_options[] = {
    {"count", GP_OPTION_INT, 3, NULL, 1, 10, NULL, "a count"},
    {"sym", GP_OPTION_OBJECT, 0, NULL, 0, 0, "{\"type\": \"object\"}", "a structured option"},
};
static const gp_method fake_method = {
    .name = "fake",
    .summary = "a fake method with an object option",
    .objective_name = "none",
    .options = fake_options,
    .n_options = 2,
    .ops = &fake_ops,
};

/* Parse options text for the fake method: the code, and err. */
static int parse_opts(const char *text, gp_option_value **opts, size_t *n, gp_error *err)
{
    json_t *j = parse(text);
    gp_error_clear(err);
    int rc = gp_api_parse_options(&fake_method, j, opts, n, err);
    json_decref(j);
    return rc;
}

static void expect_opts_error(const char *text, int code, const char *field)
{
    gp_option_value *opts = NULL;
    size_t n = 0;
    gp_error err;
    int rc = parse_opts(text, &opts, &n, &err);
    if (rc != code || strcmp(err.field, field) != 0)
        fail_msg("%s: code %d field '%s' (%s), expected %d '%s'", text, rc, err.field,
                 err.message, code, field);
    gp_api_free_options(opts, n);
}

static void test_object_option_parse(void **state)
{
    (void)state;
    gp_option_value *opts = NULL;
    size_t n = 0;
    gp_error err;
    assert_int_equal(parse_opts("{\"count\": 2, \"sym\": {\"dims\": [0, 2], \"mode\": \"a\"}}",
                                &opts, &n, &err),
                     GP_OK);
    assert_int_equal(n, 2);
    assert_string_equal(opts[1].name, "sym");
    assert_non_null(opts[1].object);
    assert_int_equal(opts[1].object->type, GP_VALUE_OBJECT);
    assert_true(gp_value_get(opts[1].object, "dims")->items[1].number == 2.0);
    /* the data checks: 3 columns hold dims 0 and 2, 2 columns do not */
    assert_int_equal(gp_options_check_data(&fake_method, opts, n, 3, &err), GP_OK);
    assert_int_equal(gp_options_check_data(&fake_method, opts, n, 2, &err), GP_EINVAL);
    assert_string_equal(err.field, "options.sym.dims[1]");
    gp_api_free_options(opts, n);
    /* without the object option there is nothing to check */
    assert_int_equal(parse_opts("{\"count\": 2}", &opts, &n, &err), GP_OK);
    assert_int_equal(gp_options_check_data(&fake_method, opts, n, 1, &err), GP_OK);
    gp_api_free_options(opts, n);
}

static void test_object_option_errors(void **state)
{
    (void)state;
    /* not an object: 400 naming the option, whatever the other type */
    expect_opts_error("{\"sym\": [1]}", GP_EINVAL, "options.sym");
    expect_opts_error("{\"sym\": \"negate\"}", GP_EINVAL, "options.sym");
    expect_opts_error("{\"sym\": null}", GP_EINVAL, "options.sym");
    expect_opts_error("{\"sym\": 3}", GP_EINVAL, "options.sym");
    /* the method's structural checks at parse time, naming the member */
    expect_opts_error("{\"sym\": {\"dims\": 1}}", GP_EINVAL, "options.sym.dims");
    expect_opts_error("{\"sym\": {\"dims\": [0, -1]}}", GP_EINVAL, "options.sym.dims[1]");
    expect_opts_error("{\"sym\": {\"colour\": 1}}", GP_EINVAL, "options.sym.colour");
    /* an error after the object was converted frees it (ASan: no leak) */
    expect_opts_error("{\"sym\": {\"dims\": [0]}, \"count\": 99}", GP_EINVAL, "options.count");
    expect_opts_error("{\"sym\": {\"dims\": [0]}, \"other\": 1}", GP_EINVAL, "options.other");
    /* too deep: refused before the method sees it */
    char deep[200] = "{\"sym\": ";
    for (int i = 0; i < GP_VALUE_MAX_DEPTH; i++)
        strcat(deep, "{\"a\":");
    strcat(deep, "1");
    for (int i = 0; i < GP_VALUE_MAX_DEPTH + 1; i++)
        strcat(deep, "}");
    expect_opts_error(deep, GP_EINVAL, "options.sym");
}

/* ---- an object option's schema: JSON text in the descriptor ---- */

/* Every registered object option's schema is JSON text of an object (the
 * listing serves it parsed, gen_docs writes it into the OpenAPI document). */
static void test_object_schemas_are_json(void **state)
{
    (void)state;
    for (size_t i = 0; i < gp_method_count(); i++) {
        const gp_method *m = gp_method_at(i);
        for (size_t k = 0; k < m->n_options; k++) {
            if (m->options[k].type != GP_OPTION_OBJECT)
                continue;
            json_error_t je;
            json_t *v = json_loads(m->options[k].choices, 0, &je);
            if (!json_is_object(v))
                fail_msg("%s.%s: its schema is not JSON text of an object (%s)", m->name,
                         m->options[k].name, je.text);
            json_decref(v);
        }
    }
}

/* ---- over the api: listing, a mixture's components ---- */

static char dir[64], db[128];

static void test_listing_and_mixture_kind(void **state)
{
    (void)state;
    tmp_db(dir, sizeof dir, db, sizeof db);
    gp_api_config cfg;
    gp_api_default_config(&cfg);
    cfg.db_path = db;
    gp_api *api = NULL;
    gp_error err;
    assert_int_equal(gp_api_open(&cfg, &api, &err), GP_OK);
    /* every listed method says whether it is additive, object options (if
     * any) carry a schema and a null default, and its quick preset is listed */
    gp_response res = {0};
    gp_api_methods(api, &res);
    expect_status(&res, 200);
    json_t *j = res_json(&res);
    json_t *ms = json_object_get(j, "methods");
    size_t i;
    json_t *m;
    json_array_foreach(ms, i, m) {
        const char *name = json_string_value(json_object_get(m, "name"));
        const gp_method *gm = gp_method_find(name);
        assert_non_null(gm);
        assert_true(json_is_boolean(json_object_get(m, "additive")));
        assert_int_equal(json_is_true(json_object_get(m, "additive")), gp_method_has_parts(gm));
        size_t k;
        json_t *o;
        json_array_foreach(json_object_get(m, "options"), k, o) {
            if (strcmp(json_string_value(json_object_get(o, "type")), "object") != 0)
                continue;
            assert_true(json_is_null(json_object_get(o, "default")));
            /* the descriptor's schema text parsed (not served as text) */
            json_t *schema = json_object_get(o, "schema");
            assert_true(json_is_object(schema));
            assert_string_equal(json_string_value(json_object_get(schema, "type")), "object");
        }
        /* the quick preset as the descriptor states it, integers for INT options */
        json_t *quick = json_object_get(m, "quick");
        assert_true(json_is_object(quick));
        assert_int_equal(json_object_size(quick), gm->n_quick);
        for (size_t q = 0; q < gm->n_quick; q++) {
            json_t *v = json_object_get(quick, gm->quick[q].name);
            const gp_option_spec *spec = gp_method_option_spec(gm, gm->quick[q].name);
            assert_non_null(spec);
            assert_true(spec->type == GP_OPTION_INT ? json_is_integer(v) : json_is_real(v));
            if (json_number_value(v) != gm->quick[q].number)
                fail_msg("%s: quick %s is %g, the descriptor's %g", name, gm->quick[q].name,
                         json_number_value(v), gm->quick[q].number);
        }
    }
    json_decref(j);
    gp_response_free(&res);
    /* a mixture's components say so */
    double X[30], y[30];
    toy_data(30, 1, 5, X, y);
    char *body = fit_body("mix", "\"method\":\"msrfr\",\"seed\":1,\"options\":{\"particles\":2,"
                                 "\"features\":5,\"iterations\":5}",
                          X, y, 30, 1);
    fit_json(api, body, &res);
    expect_status(&res, 201);
    gp_response_free(&res);
    free(body);
    predict_json(api, "mix", "{\"X\":[[0.1],[0.7]],\"components\":true}", &res);
    expect_status(&res, 200);
    j = res_json(&res);
    json_t *c = json_object_get(j, "components");
    assert_string_equal(json_string_value(json_object_get(c, "kind")), "mixture");
    assert_null(json_object_get(c, "names"));
    assert_int_equal(json_array_size(json_object_get(c, "mean")), 2);
    assert_int_equal(json_array_size(json_array_get(json_object_get(c, "variance"), 1)), 2);
    json_decref(j);
    gp_response_free(&res);
    /* a single Gaussian has neither */
    body = fit_body("one", "\"method\":\"exact\"", X, y, 30, 1);
    fit_json(api, body, &res);
    expect_status(&res, 201);
    gp_response_free(&res);
    free(body);
    predict_json(api, "one", "{\"X\":[[0.1]],\"components\":true}", &res);
    expect_error(&res, 422, "unsupported", "components");
    gp_response_free(&res);
    gp_api_close(api);
    rm_tree(dir);
}

/* A durable job is rebuilt from its stored request (the spec JSON, X, y) after
 * a restart: the object option comes back, is checked again against the
 * data, and the rebuilt job fits the same model. */
static void test_object_option_survives_job_rebuild(void **state)
{
    (void)state;
    tmp_db(dir, sizeof dir, db, sizeof db);
    gp_api_config cfg;
    gp_api_default_config(&cfg);
    cfg.db_path = db;
    gp_api *api = NULL;
    gp_error err;
    assert_int_equal(gp_api_open(&cfg, &api, &err), GP_OK);
    enum { n = 60 };
    double X[2 * n], y[n];
    toy_data(n, 2, 7, X, y);
    char *body = fit_body("dj", "\"method\":\"hkd\",\"async\":true,\"seed\":2,\"options\":{"
                                "\"inducing\":8,\"max_iterations\":10,\"symmetry\":{"
                                "\"generators\":[{\"type\":\"negate\",\"dims\":[1,0]}],"
                                "\"validate\":true}}",
                          X, y, n, 2);
    gp_request req = make_req("application/json", body, NULL, 0);
    gp_fit_job *job = NULL;
    assert_int_equal(gp_api_parse_fit(api, &req, &job, &err), GP_OK);
    const char *spec;
    const double *jX, *jy;
    size_t jn, jd, jp;
    assert_int_equal(gp_fit_job_request(job, &spec, &jX, &jy, &jn, &jd, &jp), GP_OK);
    assert_int_equal(jp, 1);
    assert_non_null(strstr(spec, "\"symmetry\""));
    assert_null(strstr(spec, "\"X\""));
    /* what the store keeps and gives back */
    double *X2 = malloc(jn * jd * sizeof *X2), *y2 = malloc(jn * sizeof *y2);
    assert_non_null(X2);
    assert_non_null(y2);
    memcpy(X2, jX, jn * jd * sizeof *X2);
    memcpy(y2, jy, jn * sizeof *y2);
    gp_fit_job *again = NULL;
    assert_int_equal(gp_fit_job_from_request(api, spec, X2, y2, jn, jd, 1, &again, &err), GP_OK);
    gp_response r1 = {0}, r2 = {0};
    assert_int_equal(gp_api_run_fit(api, job, NULL, NULL, &r1, NULL), GP_OK);
    assert_int_equal(gp_api_run_fit(api, again, NULL, NULL, &r2, NULL), GP_OK);
    gp_response_free(&r1);
    gp_response_free(&r2);
    gp_fit_job_free(job);
    gp_fit_job_free(again);
    predict_json(api, "dj", "{\"X\":[[0.3,0.1],[-1,2]],\"version\":1,\"components\":true}", &r1);
    predict_json(api, "dj", "{\"X\":[[0.3,0.1],[-1,2]],\"version\":2,\"components\":true}", &r2);
    expect_status(&r1, 200);
    expect_status(&r2, 200);
    /* the same numbers; only "version" differs */
    json_t *a = res_json(&r1), *b = res_json(&r2);
    json_object_del(a, "version");
    json_object_del(b, "version");
    assert_true(json_equal(a, b));
    json_t *c = json_object_get(a, "components");
    assert_string_equal(json_string_value(json_object_get(c, "kind")), "additive");
    assert_int_equal(json_array_size(json_object_get(c, "names")), 2);
    json_decref(a);
    json_decref(b);
    gp_response_free(&r1);
    gp_response_free(&r2);
    /* a stored request whose symmetry does not fit its data is refused again */
    X2 = malloc(jn * sizeof *X2);
    y2 = malloc(jn * sizeof *y2);
    assert_non_null(X2);
    assert_non_null(y2);
    memcpy(X2, X, jn * sizeof *X2);
    memcpy(y2, y, jn * sizeof *y2);
    assert_int_equal(gp_fit_job_from_request(api,
                                             "{\"name\":\"dj\",\"method\":\"hkd\",\"options\":"
                                             "{\"symmetry\":{\"generators\":[{\"type\":"
                                             "\"negate\",\"dims\":[1]}]}}}",
                                             X2, y2, jn, 1, 1, &again, &err),
                     GP_EINVAL);
    assert_null(again);
    assert_string_equal(err.field, "options.symmetry.generators[0].dims[0]");
    free(body);
    gp_api_close(api);
    rm_tree(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_value_types),
        cmocka_unit_test(test_value_depth_limit),
        cmocka_unit_test(test_value_size_limit),
        cmocka_unit_test(test_value_number_overflow),
        cmocka_unit_test(test_object_option_parse),
        cmocka_unit_test(test_object_option_errors),
        cmocka_unit_test(test_object_schemas_are_json),
        cmocka_unit_test(test_listing_and_mixture_kind),
        cmocka_unit_test(test_object_option_survives_job_rebuild),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
