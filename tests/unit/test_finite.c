/* Finite in, finite out (docs/design/numerics.md): nothing non-finite enters
 * a model or leaves the daemon.
 *  - gp_column_stats of a column whose plain sums overflow: the statistics
 *    wherever representable, and other columns' bits unchanged;
 *  - fits refuse a column whose spread float64 cannot hold, naming a cell;
 *  - observe (exact, ssgp, rfgp in warm-up and online) refuses values that
 *    overflow once standardised or lie beyond GP_WORKING_LIMIT, naming the
 *    cell, and leaves the model's exported state bit-identical;
 *  - predict, a batch of predicts and sample refuse a non-finite answer
 *    naming the point, each request of a batch for itself;
 *  - a stored state or observation log holding a non-finite number
 *    (written past these checks) is refused 409 model_not_finite, listed by
 *    readiness and the stats, described by GET, forgotten on delete. */
#include "tests/unit/api_testutil.h"

#include "core/model/method.h"
#include "tests/unit/testutil.h"

/* ---- an api on a temporary database ---- */

typedef struct fixture {
    char dir[64], path[128];
    gp_api *api;
} fixture;

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    assert_non_null(f);
    tmp_db(f->dir, sizeof f->dir, f->path, sizeof f->path);
    gp_api_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.db_path = f->path;
    cfg.max_train_points = 1000;
    gp_error err;
    if (gp_api_open(&cfg, &f->api, &err) != GP_OK)
        fail_msg("gp_api_open: %s", err.message);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    gp_api_close(f->api);
    rm_tree(f->dir);
    free(f);
    return 0;
}

static void fit_ok(gp_api *api, const char *body)
{
    gp_response res;
    fit_json(api, body, &res);
    expect_status(&res, 201);
    gp_response_free(&res);
}

static void observe_json(gp_api *api, const char *name, const char *body, gp_response *res)
{
    memset(res, 0, sizeof *res);
    gp_request req = make_req("application/json", body, NULL, 0);
    gp_api_observe(api, name, &req, res);
}

/* The model's exported state, serialised (names, shapes, bits) into *out. */
static void state_bytes(gp_api *api, const char *name, gp_buf *out)
{
    gp_cache_entry *e = NULL;
    const gp_model *model = NULL;
    gp_error err;
    if (gp_cache_acquire(api, name, 0, &e, &model, &err) != GP_OK)
        fail_msg("acquire %s: %s", name, err.message);
    gp_state st;
    gp_state_init(&st);
    assert_int_equal(gp_model_export(model, &st, &err), GP_OK);
    gp_cache_release(api, e);
    gp_buf_init(out);
    for (size_t i = 0; i < st.count; i++) {
        const gp_named_array *a = &st.arrays[i];
        gp_buf_printf(out, "%s %zu %zu:", a->name, a->rows, a->cols);
        gp_buf_put(out, (const char *)a->data, a->rows * a->cols * sizeof(double));
    }
    gp_state_free(&st);
    assert_false(out->failed);
}

/* An observe refused 422 invalid_data naming field, the state bit-identical. */
static void refused(gp_api *api, const char *name, const char *body, const char *field)
{
    gp_buf before, after;
    state_bytes(api, name, &before);
    gp_response res;
    observe_json(api, name, body, &res);
    expect_error(&res, 422, "invalid_data", field);
    gp_response_free(&res);
    state_bytes(api, name, &after);
    if (before.len != after.len || memcmp(before.data, after.data, before.len) != 0)
        fail_msg("%s: a refused observe (%s) changed the model", name, body);
    gp_buf_free(&before);
    gp_buf_free(&after);
}

/* ---- statistics and fits ---- */

static void test_column_stats_overflow(void **state)
{
    (void)state;
    /* plain sums overflow: the old code gave mean Inf and scale 1 */
    double big[3] = {1e308, 1e308, 7e307}, mean, scale;
    gp_column_stats(big, 3, 1, &mean, &scale);
    assert_true(isfinite(mean) && isfinite(scale));
    tu_assert_within(mean, 9e307, 1e-12 * 9e307, "mean");
    tu_assert_within(scale, sqrt(2.0) * 1e307, 1e-12 * 1e307, "scale");
    /* whose squares overflow: found exactly (the fit's check then refuses
     * a scale beyond GP_WORKING_LIMIT) */
    double wide[2] = {1e308, -1e308};
    gp_column_stats(wide, 2, 1, &mean, &scale);
    assert_true(mean == 0.0 && scale == 1e308);
    /* an ordinary column: the plain formula's bits */
    double c[4] = {0.1, 2.3, -1.7, 4.0}, m = 0.0, ss = 0.0;
    for (int i = 0; i < 4; i++)
        m += c[i];
    m /= 4.0;
    for (int i = 0; i < 4; i++)
        ss += (c[i] - m) * (c[i] - m);
    gp_column_stats(c, 4, 1, &mean, &scale);
    assert_memory_equal(&mean, &m, sizeof m);
    double sd = sqrt(ss / 4.0);
    assert_memory_equal(&scale, &sd, sizeof sd);
}

static void test_fit_refuses_spread(void **state)
{
    fixture *f = *state;
    gp_response res;
    fit_json(f->api, "{\"name\":\"w\",\"method\":\"exact\",\"X\":[0,1,2,3],"
                     "\"y\":[0,1e308,-1e308,1]}", &res);
    expect_error(&res, 422, "invalid_data", "y[1]");
    gp_response_free(&res);
    fit_json(f->api, "{\"name\":\"w\",\"method\":\"exact\",\"X\":[[0,1],[1,2],[2,1e200],"
                     "[3,-1e200]],\"y\":[0,1,0,1]}", &res);
    expect_error(&res, 422, "invalid_data", "X[2][1]");
    gp_response_free(&res);
    /* unstandardised, values above the limit themselves */
    fit_json(f->api, "{\"name\":\"w\",\"method\":\"exact\",\"standardize\":false,"
                     "\"X\":[0,1,2,3],\"y\":[0,1,2e100,1]}", &res);
    expect_error(&res, 422, "invalid_data", "y[2]");
    gp_response_free(&res);
    /* a large but sound scale fits */
    fit_ok(f->api, "{\"name\":\"w\",\"method\":\"exact\",\"X\":[0,1,2,3],"
                   "\"y\":[0,1e90,-1e90,1]}");
}

/* ---- observe ---- */

static void test_observe_exact(void **state)
{
    fixture *f = *state;
    fit_ok(f->api, "{\"name\":\"ex\",\"method\":\"exact\",\"X\":[0,1,2,3],\"y\":[0,1,0,1]}");
    refused(f->api, "ex", "{\"X\":[50,60],\"y\":[1e308,-1e308]}", "y[0]");
    refused(f->api, "ex", "{\"X\":[50,60],\"y\":[1,1e200]}", "y[1]");
    refused(f->api, "ex", "{\"X\":[5,1e300],\"y\":[1,1]}", "X[1][0]");
    gp_response res;
    observe_json(f->api, "ex", "{\"X\":[4],\"y\":[0.5]}", &res);
    expect_status(&res, 200);
    gp_response_free(&res);
}

static void test_observe_ssgp(void **state)
{
    fixture *f = *state;
    fit_ok(f->api, "{\"name\":\"ss\",\"method\":\"ssgp\",\"seed\":2,\"options\":{\"features\":20},"
                   "\"X\":[0,0.5,1,1.5,2,2.5,3],\"y\":[0,0.5,0.8,1,0.9,0.6,0.1]}");
    /* one row: the Givens path; 40 rows: the re-factorisation path */
    refused(f->api, "ss", "{\"X\":[50],\"y\":[1e308]}", "y[0]");
    refused(f->api, "ss", "{\"X\":[50],\"y\":[-1e150]}", "y[0]");
    gp_buf b;
    gp_buf_init(&b);
    gp_buf_puts(&b, "{\"X\":[");
    for (int i = 0; i < 40; i++)
        gp_buf_printf(&b, "%s%d", i ? "," : "", i);
    gp_buf_puts(&b, "],\"y\":[");
    for (int i = 0; i < 40; i++)
        gp_buf_printf(&b, "%s%s", i ? "," : "", i == 33 ? "1e300" : "0.5");
    gp_buf_puts(&b, "]}");
    refused(f->api, "ss", b.data, "y[33]");
    gp_buf_free(&b);
}

static void test_observe_rfgp(void **state)
{
    fixture *f = *state;
    fit_ok(f->api, "{\"name\":\"rf\",\"method\":\"rfgp\",\"seed\":3,\"options\":{\"input\":"
                   "{\"kind\":\"point\",\"dim\":1},\"features\":32,\"warmup\":4}}");
    gp_response res;
    observe_json(f->api, "rf", "{\"X\":[0,0.5,1],\"y\":[0,0.5,0.8]}", &res);
    expect_status(&res, 200);
    gp_response_free(&res);
    /* the warm-up's end: the buffer's statistics, the batch's own row named */
    refused(f->api, "rf", "{\"X\":[1.5],\"y\":[1e308]}", "y[0]");
    refused(f->api, "rf", "{\"X\":[1.5,2],\"y\":[1,-1e200]}", "y[1]");
    refused(f->api, "rf", "{\"X\":[1.5,1e300],\"y\":[1,1]}", "X[1][0]");
    observe_json(f->api, "rf", "{\"X\":[1.5,2],\"y\":[1,0.9]}", &res);
    expect_status(&res, 200);
    gp_response_free(&res);
    /* online: rank-one rows and a batch at the re-factorisation size */
    refused(f->api, "rf", "{\"X\":[2.5,3],\"y\":[1,-1e308]}", "y[1]");
    refused(f->api, "rf", "{\"X\":[2.5],\"y\":[1e200]}", "y[0]");
}

/* ---- predictions ---- */

static void test_predict_and_sample_named(void **state)
{
    fixture *f = *state;
    fit_ok(f->api, "{\"name\":\"pr\",\"method\":\"exact\",\"X\":[0,1,2,3],\"y\":[0,1,0,1]}");
    gp_response res;
    predict_json(f->api, "pr", "{\"X\":[0.5,1e308]}", &res);
    expect_error(&res, 422, "invalid_data", "X[1]");
    gp_response_free(&res);
    sample_json(f->api, "pr", "{\"X\":[0.5,-1e308],\"n_samples\":2}", &res);
    expect_error(&res, 422, "invalid_data", "X[1]");
    gp_response_free(&res);
    /* far out but representable: the prior, every number a number */
    predict_json(f->api, "pr", "{\"X\":[1e150]}", &res);
    expect_status(&res, 200);
    assert_null(strstr(res.body, "null"));
    gp_response_free(&res);
}

/* In a batch, the request with the bad point is refused alone; the others
 * answer what they answer alone. */
static void test_batch_refuses_only_its_request(void **state)
{
    fixture *f = *state;
    fit_ok(f->api, "{\"name\":\"ba\",\"method\":\"exact\",\"X\":[0,1,2,3],\"y\":[0,1,0,1]}");
    gp_cache_entry *e = NULL;
    const gp_model *model = NULL;
    gp_error err;
    assert_int_equal(gp_cache_acquire(f->api, "ba", 0, &e, &model, &err), GP_OK);
    double X[3][2] = {{0.5, 1.5}, {0.7, 1e308}, {2.5, 0.1}};
    gp_predict_request reqs[3];
    gp_prediction outs[3], alone;
    double mv[3][4], av[4];
    int rcs[3];
    gp_error errs[3];
    for (int r = 0; r < 3; r++) {
        reqs[r] = (gp_predict_request){.X = X[r], .m = 2, .d = 1, .include_noise = 1};
        outs[r] = (gp_prediction){.mean = mv[r], .variance = mv[r] + 2};
    }
    assert_int_equal(gp_model_predict_batch(model, reqs, outs, rcs, errs, 3), GP_OK);
    assert_int_equal(rcs[0], GP_OK);
    assert_int_equal(rcs[1], GP_EDATA);
    assert_string_equal(errs[1].field, "X[1]");
    assert_int_equal(rcs[2], GP_OK);
    for (int r = 0; r < 3; r += 2) {
        alone = (gp_prediction){.mean = av, .variance = av + 2};
        assert_int_equal(gp_model_predict(model, &reqs[r], &alone, &err), GP_OK);
        assert_memory_equal(av, mv[r], sizeof av);
    }
    gp_cache_release(f->api, e);
}

/* ---- stored states ---- */

static void test_state_check_finite(void **state)
{
    (void)state;
    gp_state st;
    gp_state_init(&st);
    double a[3] = {1, 2, 3}, b[4] = {0, 1, NAN, 2};
    gp_error err;
    assert_int_equal(gp_state_put(&st, "a", 3, 1, a, &err), GP_OK);
    assert_int_equal(gp_state_check_finite(&st, &err), GP_OK);
    assert_int_equal(gp_state_put(&st, "b", 2, 2, b, &err), GP_OK);
    assert_int_equal(gp_state_check_finite(&st, &err), GP_EDATA);
    assert_string_equal(err.field, "state.b[2]");
    gp_state_free(&st);
}

static json_t *readiness(gp_api *api)
{
    gp_response res;
    memset(&res, 0, sizeof res);
    gp_api_readiness(api, &res);
    expect_status(&res, 200);
    json_t *j = res_json(&res);
    gp_response_free(&res);
    return j;
}

/* What a daemon before the guards logged for {"X":[50,60],"y":[1e308,-1e308]}:
 * appended with the store's own call, past every check. */
static void poison(gp_api *api, const char *name)
{
    gp_model_meta meta;
    memset(&meta, 0, sizeof meta);
    gp_error err;
    assert_int_equal(gp_store_meta(api->store, name, 0, &meta, &err), GP_OK);
    double X[2] = {50, 60}, Y[2] = {1e308, -1e308};
    gp_named_array arrays[2];
    gp_state batch;
    gp_api_xy_state(X, Y, 2, 1, 1, arrays, &batch);
    uint64_t seq = 0;
    if (gp_store_observe(api->store, meta.id, meta.obs_seq, &batch, meta.n_train + 2, NULL, &seq,
                         &err) != GP_OK)
        fail_msg("gp_store_observe: %s", err.message);
    gp_model_meta_free(&meta);
}

static void test_poisoned_version(void **state)
{
    fixture *f = *state;
    fit_ok(f->api, "{\"name\":\"po\",\"method\":\"exact\",\"X\":[0,1,2,3],\"y\":[0,1,0,1]}");
    fit_ok(f->api, "{\"name\":\"ok\",\"method\":\"exact\",\"X\":[0,1,2,3],\"y\":[0,1,0,1]}");
    poison(f->api, "po");
    gp_response res;
    /* the cached model catches up with the log: refused */
    predict_json(f->api, "po", "{\"X\":[0.5]}", &res);
    expect_error(&res, 409, "model_not_finite", "");
    gp_response_free(&res);
    /* then answered from the table without loading it again */
    sample_json(f->api, "po", "{\"X\":[0.5]}", &res);
    expect_error(&res, 409, "model_not_finite", "");
    gp_response_free(&res);
    observe_json(f->api, "po", "{\"X\":[0.5],\"y\":[1]}", &res);
    expect_error(&res, 409, "model_not_finite", "");
    gp_response_free(&res);
    gp_api_stats st;
    gp_api_get_stats(f->api, &st);
    assert_int_equal(st.models_not_finite, 1);
    json_t *j = readiness(f->api);
    json_t *list = json_object_get(j, "models_not_finite");
    assert_int_equal(json_array_size(list), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(list, 0), "name")), "po");
    json_decref(j);
    memset(&res, 0, sizeof res);
    gp_api_get_model(f->api, "po", 0, &res);
    expect_status(&res, 200);
    j = res_json(&res);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "not_finite");
    json_decref(j);
    gp_response_free(&res);
    /* a fresh api (a restart) finds it on load */
    gp_api_close(f->api);
    gp_api_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.db_path = f->path;
    gp_error err;
    assert_int_equal(gp_api_open(&cfg, &f->api, &err), GP_OK);
    predict_json(f->api, "po", "{\"X\":[0.5]}", &res);
    expect_error(&res, 409, "model_not_finite", "");
    gp_response_free(&res);
    predict_json(f->api, "ok", "{\"X\":[0.5]}", &res);
    expect_status(&res, 200);
    gp_response_free(&res);
    memset(&res, 0, sizeof res);
    gp_api_delete_model(f->api, "po", NULL, &res);
    expect_status(&res, 204);
    gp_response_free(&res);
    gp_api_get_stats(f->api, &st);
    assert_int_equal(st.models_not_finite, 0);
    j = readiness(f->api);
    assert_null(json_object_get(j, "models_not_finite"));
    json_decref(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_column_stats_overflow),
        cmocka_unit_test(test_state_check_finite),
        cmocka_unit_test_setup_teardown(test_fit_refuses_spread, setup, teardown),
        cmocka_unit_test_setup_teardown(test_observe_exact, setup, teardown),
        cmocka_unit_test_setup_teardown(test_observe_ssgp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_observe_rfgp, setup, teardown),
        cmocka_unit_test_setup_teardown(test_predict_and_sample_named, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_refuses_only_its_request, setup, teardown),
        cmocka_unit_test_setup_teardown(test_poisoned_version, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
