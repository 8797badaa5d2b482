/* Method auto's final fit inside its budget (api/auto.c): the default
 * validation switches to a hold-out beyond GP_AUTO_HOLDOUT_MIN_ROWS rows
 * and says so; a final fit stopped at budget_s is replaced by the winner's
 * last validation model (gp_validate_keep), any other outcome is kept as it
 * is; method_info.auto states the seconds, the budget and the final fit.
 * The clock is not read by the assertions: over_budget is set by hand. */
#include "tests/unit/api_testutil.h"

#include "core/methods/registry.h"
#include "core/model/validation.h"
#include "tests/unit/method_testutil.h"

#define FN 40

/* The winner's last validation model: an exact fit of a hold-out. */
static gp_model *validation_model(void)
{
    static double X[FN], y[FN];
    gp_rng rng;
    gp_rng_seed(&rng, 3);
    for (size_t i = 0; i < FN; i++) {
        X[i] = 4.0 * gp_rng_uniform(&rng);
        y[i] = sin(2.0 * X[i]) + 0.1 * gp_rng_normal(&rng);
    }
    gp_kernel *k = NULL;
    gp_error err;
    assert_int_equal(gp_kernel_default(1, &k, &err), GP_OK);
    gp_fit_request req;
    fit_request(&req, X, y, FN, 1, k, NULL, 0);
    gp_validation_spec spec = {0, 0.25, 5};
    gp_validation_report r;
    gp_model *last = NULL;
    if (gp_validate_keep(gp_method_find("exact"), &req, &spec, 1, &r, &last, &err) != GP_OK)
        fail_msg("validate: %s", err.message);
    assert_non_null(last);
    assert_int_equal(last->n_train, FN - 10); /* the training part: 30 of 40 rows */
    gp_validation_report_free(&r);
    gp_kernel_free(k);
    return last;
}

static void test_default_validation(void **state)
{
    (void)state;
    gp_api_auto a;
    memset(&a, 0, sizeof a);
    gp_validation_spec s = {5, 0.0, 9};
    gp_api_auto_default_validation(&a, 2000, &s);
    assert_int_equal(a.default_validation, 1);
    assert_int_equal(s.folds, 5);
    gp_api_auto_default_validation(&a, 2001, &s);
    assert_int_equal(s.folds, 0);
    assert_true(s.fraction == GP_AUTO_HOLDOUT_FRACTION);
    assert_int_equal(s.seed, 9);
    /* the problem auto plans with: one fit on 80% of the rows */
    gp_auto_problem p;
    a.budget_s = 60;
    gp_api_auto_problem(&a, 10000, 3, GP_LIK_GAUSSIAN, 1, &s, &p);
    assert_int_equal(p.fits_each, 1);
    assert_true(fabs(p.train_share - 0.8) < 1e-15);
    s.folds = 4;
    gp_api_auto_problem(&a, 1000, 3, GP_LIK_GAUSSIAN, 1, &s, &p);
    assert_int_equal(p.fits_each, 4);
    assert_true(p.train_share == 0.75);
}

static gp_api_auto_result result(gp_model *fallback, int over_budget)
{
    gp_api_auto_result res;
    memset(&res, 0, sizeof res);
    res.fallback = fallback;
    res.progress.over_budget = over_budget;
    return res;
}

/* Stopped at budget_s: the version is the validation model, rc GP_OK. */
static void test_final_stopped(void **state)
{
    (void)state;
    gp_api_auto a;
    memset(&a, 0, sizeof a);
    a.budget_s = 1e9;
    gp_model *fb = validation_model(), *model = NULL;
    gp_api_auto_result res = result(fb, 1);
    gp_error err;
    gp_error_set(&err, GP_ECANCELLED, NULL, "fit cancelled");
    assert_int_equal(gp_api_auto_final(&a, &res, GP_ECANCELLED, &model, &err), GP_OK);
    assert_ptr_equal(model, fb);
    assert_null(res.fallback);
    assert_non_null(strstr(a.final_fit, "stopped at budget_s"));
    json_t *o = json_object();
    gp_api_auto_info(o, &a);
    assert_non_null(strstr(json_string_value(json_object_get(o, "final_fit")), "stopped"));
    assert_true(json_is_true(json_object_get(o, "within_budget")));
    assert_true(json_number_value(json_object_get(o, "seconds")) >= 0.0);
    assert_string_equal(json_string_value(json_object_get(o, "validation")), "the request's");
    json_decref(o);
    gp_model_free(model);
}

/* Not begun (its estimate past the budget): the fallback, said so. */
static void test_final_not_begun(void **state)
{
    (void)state;
    gp_api_auto a;
    memset(&a, 0, sizeof a);
    a.budget_s = 60;
    gp_model *fb = validation_model(), *model = NULL;
    gp_api_auto_result res = result(fb, 0);
    res.skip_final = 1;
    gp_error err;
    gp_error_clear(&err);
    assert_int_equal(gp_api_auto_final(&a, &res, GP_ECANCELLED, &model, &err), GP_OK);
    assert_ptr_equal(model, fb);
    assert_null(res.fallback);
    assert_non_null(strstr(a.final_fit, "not begun"));
    gp_model_free(model);
}

/* The user's cancel (not over budget) and other failures stay failures;
 * a final fit that ended keeps its model; the fallback is freed each time
 * (the sanitizer build sees a leak otherwise). */
static void test_final_kept(void **state)
{
    (void)state;
    gp_api_auto a;
    memset(&a, 0, sizeof a);
    a.budget_s = 60;
    gp_error err;
    gp_model *model = NULL;
    gp_api_auto_result res = result(validation_model(), 0);
    assert_int_equal(gp_api_auto_final(&a, &res, GP_ECANCELLED, &model, &err), GP_ECANCELLED);
    assert_null(model);
    assert_null(res.fallback);
    res = result(validation_model(), 1); /* over budget but failed otherwise */
    assert_int_equal(gp_api_auto_final(&a, &res, GP_ENOTPD, &model, &err), GP_ENOTPD);
    assert_null(model);
    assert_null(res.fallback);
    gp_model *fit = validation_model();
    model = fit;
    res = result(validation_model(), 0);
    assert_int_equal(gp_api_auto_final(&a, &res, GP_OK, &model, &err), GP_OK);
    assert_ptr_equal(model, fit);
    assert_null(res.fallback);
    assert_string_equal(a.final_fit, "every row");
    a.default_validation = 1;
    json_t *o = json_object();
    gp_api_auto_info(o, &a);
    assert_non_null(strstr(json_string_value(json_object_get(o, "validation")), "hold-out"));
    json_decref(o);
    gp_model_free(model);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_default_validation),
        cmocka_unit_test(test_final_stopped),
        cmocka_unit_test(test_final_not_begun),
        cmocka_unit_test(test_final_kept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
