/* `periodic` over several input columns (api/kernel_json.c,
 * check_periodic_columns): it takes the Euclidean distance of its columns,
 * which is not positive definite in general, so a fit refuses it at parsing
 * with 422 unsupported naming the leaf (or its active_dims), whatever the
 * tree around it; nothing is stored. The positive definite forms still fit:
 * periodic on one column (by active_dims, or data of one column), a product
 * of one-column periodic kernels, periodic * rbf on one column. A model
 * with such a kernel stored before the refusal (an earlier build fitted it
 * when the jitter or a fixed long period let the Cholesky through) still
 * imports, loads from the store and predicts: the refusal is the request
 * parser's, never the model codec's. */
#include "tests/unit/api_testutil.h"

#include "tests/unit/api_fixture.h"

/* The fit body of the toy set (two columns) with kernel kj and method m. */
static char *body_with(const char *name, const char *method, const char *kj)
{
    char extra[1024];
    snprintf(extra, sizeof extra, "\"method\":\"%s\",\"kernel\":%s", method, kj);
    return fit_body(name, extra, Xtr, ytr, N, D);
}

static void expect_not_stored(const char *name)
{
    gp_response res = {0};
    gp_api_get_model(api, name, 0, &res);
    expect_error(&res, 404, "not_found", "name");
    gp_response_free(&res);
}

typedef struct refusal {
    const char *kernel, *field;
} refusal;

/* Every tree with a periodic leaf seeing two columns, and the field named. */
static const refusal refusals[] = {
    {"{\"type\":\"periodic\"}", "kernel"},
    {"{\"type\":\"periodic\",\"ard\":true,\"period\":3}", "kernel"},
    {"{\"type\":\"periodic\",\"fixed\":true}", "kernel"},
    {"{\"type\":\"periodic\",\"active_dims\":[0,1]}", "kernel.active_dims"},
    {"{\"type\":\"periodic\",\"active_dims\":[1,0],\"fixed\":[\"period\"]}", "kernel.active_dims"},
    {"{\"type\":\"sum\",\"terms\":[{\"type\":\"rbf\"},{\"type\":\"periodic\"}]}",
     "kernel.terms[1]"},
    {"{\"type\":\"product\",\"terms\":[{\"type\":\"rbf\"},{\"type\":\"periodic\"}]}",
     "kernel.terms[1]"},
    {"{\"type\":\"product\",\"terms\":[{\"type\":\"periodic\",\"active_dims\":[0]},"
     "{\"type\":\"periodic\",\"active_dims\":[0,1]}]}",
     "kernel.terms[1].active_dims"},
    {"{\"type\":\"sum\",\"terms\":[{\"type\":\"product\",\"terms\":[{\"type\":\"rbf\","
     "\"active_dims\":[0]},{\"type\":\"periodic\"}]},{\"type\":\"matern52\"}]}",
     "kernel.terms[0].terms[1]"},
    {"{\"type\":\"sum\",\"terms\":[{\"type\":\"periodic\"}]}", "kernel.terms[0]"},
};

static void test_refused_with_the_leaf(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof refusals / sizeof refusals[0]; i++) {
        char name[32];
        snprintf(name, sizeof name, "per_refused_%zu", i);
        char *body = body_with(name, "exact", refusals[i].kernel);
        gp_response res = {0};
        fit_json(api, body, &res);
        expect_error(&res, 422, "unsupported", refusals[i].field);
        /* the message says what to do instead */
        assert_non_null(strstr(res.body, "active_dims to one column"));
        assert_non_null(strstr(res.body, "product"));
        assert_non_null(strstr(res.body, "2 input columns"));
        gp_response_free(&res);
        free(body);
        expect_not_stored(name);
    }
}

/* An async fit is refused before it becomes a job: at parsing. */
static void test_refused_before_a_job(void **state)
{
    (void)state;
    char *body = body_with("per_async", "exact",
                           "{\"type\":\"periodic\"},\"async\":true");
    gp_request req = make_req("application/json", body, NULL, 0);
    gp_fit_job *job = NULL;
    gp_error err;
    gp_error_clear(&err);
    assert_int_equal(gp_api_parse_fit(api, &req, &job, &err), GP_EUNSUPPORTED);
    assert_null(job);
    assert_string_equal(err.field, "kernel");
    free(body);
    expect_not_stored("per_async");
}

/* A method without periodic refuses the type first, as it always did. */
static void test_other_methods_refuse_the_type(void **state)
{
    (void)state;
    static const char *const methods[] = {"sgpr", "svgp", "ssgp"};
    for (size_t i = 0; i < sizeof methods / sizeof methods[0]; i++) {
        char *body = body_with("per_other", methods[i], "{\"type\":\"periodic\"}");
        gp_response res = {0};
        fit_json(api, body, &res);
        expect_error(&res, 422, "unsupported", "kernel.type");
        gp_response_free(&res);
        free(body);
    }
}

/* The fitted kernel of the 201 in res, as JSON text (the caller frees). */
static char *fitted_kernel(const gp_response *res)
{
    json_t *j = res_json(res);
    char *k = json_dumps(json_object_get(j, "kernel"), JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(j);
    assert_non_null(k);
    return k;
}

static void fit_accepted(const char *name, const char *kj, const char *expect_in_kernel)
{
    char *body = body_with(name, "exact", kj);
    gp_response res = {0};
    fit_json(api, body, &res);
    expect_status(&res, 201);
    char *k = fitted_kernel(&res);
    if (strstr(k, expect_in_kernel) == NULL)
        fail_msg("%s: fitted kernel %s lacks %s", name, k, expect_in_kernel);
    free(k);
    gp_response_free(&res);
    free(body);
}

static void test_positive_definite_forms_fit(void **state)
{
    (void)state;
    fit_accepted("per_one", "{\"type\":\"periodic\",\"active_dims\":[1]}",
                 "\"active_dims\":[1]");
    fit_accepted("per_product",
                 "{\"type\":\"product\",\"terms\":[{\"type\":\"periodic\",\"active_dims\":[0]},"
                 "{\"type\":\"periodic\",\"active_dims\":[1]}]}",
                 "\"active_dims\":[1]");
    fit_accepted("per_rbf",
                 "{\"type\":\"product\",\"terms\":[{\"type\":\"periodic\",\"active_dims\":[0]},"
                 "{\"type\":\"rbf\",\"active_dims\":[0]}]}",
                 "\"type\":\"periodic\"");
    fit_accepted("per_sum",
                 "{\"type\":\"sum\",\"terms\":[{\"type\":\"periodic\",\"active_dims\":[0]},"
                 "{\"type\":\"matern52\"}]}",
                 "\"type\":\"matern52\"");
    /* data of one column: the leaf sees one column without active_dims */
    double x1[N];
    memcpy(x1, Xtr, sizeof x1);
    char *body = fit_body("per_1col", "\"method\":\"exact\",\"kernel\":{\"type\":\"periodic\"}",
                          x1, ytr, N, 1);
    gp_response res = {0};
    fit_json(api, body, &res);
    expect_status(&res, 201);
    gp_response_free(&res);
    free(body);
}

/* ---- a model stored before the refusal ---- */

/* An exact model with periodic over both columns, fitted through core (as
 * an earlier build's API did): the period long against the data's spread
 * and every hyperparameter held, so its Gram matrix factorises. */
static gp_model *old_periodic_model(void)
{
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_leaf(&k, GP_KERNEL_PERIODIC, D, 0, NULL, 0, &err), GP_OK);
    k->log_period = log(50.0);
    k->fixed = GP_FIX_ALL;
    gp_fit_request fr;
    memset(&fr, 0, sizeof fr);
    fr.X = Xtr;
    fr.y = ytr;
    fr.n = N;
    fr.d = D;
    fr.kernel = k;
    fr.standardize = 1;
    fr.noise_given = 1;
    fr.noise_fixed = 1;
    fr.noise_variance = 0.01;
    gp_model *m = NULL;
    if (gp_model_fit(gp_method_find("exact"), &fr, &m, &err) != GP_OK)
        fail_msg("core fit: %s", err.message);
    gp_kernel_free(k);
    return m;
}

/* The model file of m as the export route writes it, its spec the request
 * that fitted it. The caller frees b. */
static void old_model_file(const gp_model *m, gp_buf *b)
{
    gp_model_meta meta;
    memset(&meta, 0, sizeof meta);
    snprintf(meta.name, sizeof meta.name, "per_old");
    meta.version = 1;
    snprintf(meta.method, sizeof meta.method, "exact");
    snprintf(meta.created_at, sizeof meta.created_at, "2026-11-29T00:00:00Z");
    meta.spec = strdup("{\"name\":\"per_old\",\"method\":\"exact\",\"kernel\":{\"type\":"
                       "\"periodic\",\"period\":50,\"fixed\":true},\"noise\":{\"variance\":"
                       "0.01,\"fixed\":true}}");
    json_t *info = gp_api_model_info_json(m); /* what the fit route stores */
    assert_non_null(info);
    meta.info = json_dumps(info, GP_JSON_FLAGS);
    json_decref(info);
    meta.n_train = m->n_train;
    meta.input_dim = m->input_dim;
    gp_state st;
    gp_state_init(&st);
    gp_error err;
    assert_int_equal(gp_model_export(m, &st, &err), GP_OK);
    gp_model_file_source src = {m->n_train, m->input_dim, 0};
    gp_buf_init(b);
    if (gp_model_file_write(&meta, &src, &st, b, &err) != GP_OK)
        fail_msg("write failed: %s", err.message);
    gp_state_free(&st);
    gp_model_meta_free(&meta);
}

/* The predictive mean at Xte from api a, as the route answers it. */
static void api_mean(gp_api *a, double *mean)
{
    char *pb = points_body(Xte, M, D, "");
    gp_request req = make_req("application/json", pb, NULL, 0);
    gp_response res = {0};
    gp_api_predict(a, "per_old", &req, &res);
    expect_status(&res, 200);
    json_t *j = res_json(&res);
    json_doubles(json_object_get(j, "mean"), mean, M);
    json_decref(j);
    gp_response_free(&res);
    free(pb);
}

static void test_stored_model_still_loads(void **state)
{
    (void)state;
    gp_model *m = old_periodic_model();
    double want[M], got[M], var[M];
    gp_predict_request pr = {.X = Xte, .m = M, .d = D};
    gp_prediction out = {.mean = want, .variance = var};
    gp_error err;
    assert_int_equal(gp_model_predict(m, &pr, &out, &err), GP_OK);
    gp_buf b;
    old_model_file(m, &b);
    gp_model_free(m);

    /* the import takes it (the body is the route's to free) */
    char *body = malloc(b.len + 1);
    assert_non_null(body);
    memcpy(body, b.data, b.len + 1);
    gp_request req = make_req(GP_MODEL_FILE_MEDIA_TYPE, body, NULL, 0);
    req.body_len = b.len;
    gp_response res = {0};
    gp_api_import_model(api, &req, body, &res);
    expect_status(&res, 201);
    gp_response_free(&res);
    gp_buf_free(&b);
    api_mean(api, got);
    assert_memory_equal(got, want, sizeof want);

    /* a second api on the same store, cache cold: the model loads from the store */
    gp_api *fresh = open_api(4);
    gp_api_get_model(fresh, "per_old", 1, &res);
    expect_status(&res, 200);
    if (strstr(res.body, "\"type\":\"periodic\"") == NULL)
        fail_msg("%.*s", (int)res.body_len, res.body);
    assert_null(strstr(res.body, "active_dims"));
    gp_response_free(&res);
    memset(got, 0, sizeof got);
    api_mean(fresh, got);
    assert_memory_equal(got, want, sizeof want);
    gp_api_close(fresh);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refused_with_the_leaf),
        cmocka_unit_test(test_refused_before_a_job),
        cmocka_unit_test(test_other_methods_refuse_the_type),
        cmocka_unit_test(test_positive_definite_forms_fit),
        cmocka_unit_test(test_stored_model_still_loads),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
