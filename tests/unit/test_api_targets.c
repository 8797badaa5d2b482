/* api/targets.c and the several-targets CSV of api/csv.c: y with null for a
 * missing entry (NaN), the checks of docs/design/multioutput.md, output
 * names, and ?targets= columns with empty cells missing. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/internal.h"

static json_t *parse(const char *text)
{
    json_error_t je;
    json_t *v = json_loads(text, JSON_DECODE_INT_AS_REAL, &je);
    assert_non_null(v);
    return v;
}

static void test_rows_with_null(void **state)
{
    (void)state;
    json_t *v = parse("[[1, null], [null, 4], [5, 6]]");
    double *y = NULL;
    size_t n = 0, p = 0;
    gp_error err;
    assert_int_equal(gp_json_targets_missing(v, 100, 1, &y, &n, &p, &err), GP_OK);
    assert_int_equal(n, 3);
    assert_int_equal(p, 2);
    /* column-major n x p, NaN where null */
    assert_true(y[0] == 1 && isnan(y[1]) && y[2] == 5 && isnan(y[3]) && y[4] == 4 && y[5] == 6);
    assert_int_equal(gp_api_check_targets(y, n, p, 1, 0, NULL, &err), GP_OK);
    assert_int_equal(gp_api_check_targets(y, n, p, 0, 0, NULL, &err), GP_EDATA);
    assert_string_equal(err.field, "y[0][1]");
    free(y);
    json_decref(v);
}

static void test_refusals(void **state)
{
    (void)state;
    static const struct {
        const char *y, *field;
        int code;
    } cases[] = {
        {"[[1, 2], [1, 2, 3]]", "y[1]", GP_EDATA},
        {"[[1, 2], \"a\"]", "y[1]", GP_EDATA},
        {"[[1, 2], [1, \"2\"]]", "y[1][1]", GP_EDATA},
        {"[[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16]]", "y", GP_EDATA},
        {"[[]]", "y[0]", GP_EDATA},
        {"{}", "y", GP_EINVAL},
    };
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        json_t *v = parse(cases[k].y);
        double *y = NULL;
        size_t n = 0, p = 0;
        gp_error err;
        gp_error_clear(&err);
        assert_int_equal(gp_json_targets_missing(v, 100, 1, &y, &n, &p, &err), cases[k].code);
        assert_string_equal(err.field, cases[k].field);
        assert_null(y);
        json_decref(v);
    }
}

static void test_all_missing_row_and_output(void **state)
{
    (void)state;
    const double row[4] = {1, NAN, 3, NAN}; /* 2 x 2: row 1 all missing */
    gp_error err;
    assert_int_equal(gp_api_check_targets(row, 2, 2, 1, 0, NULL, &err), GP_EDATA);
    assert_string_equal(err.field, "y[1]");
    const double col[4] = {1, 2, NAN, NAN}; /* output 1 never observed */
    json_t *names = parse("[\"Cd\", \"Ni\"]");
    assert_int_equal(gp_api_check_targets(col, 2, 2, 1, 0, names, &err), GP_EDATA);
    assert_string_equal(err.field, "y");
    assert_non_null(strstr(err.message, "'Ni'"));
    /* an observe's rows: an output may be missing from every row of a batch */
    assert_int_equal(gp_api_check_targets(col, 2, 2, 1, 1, names, &err), GP_OK);
    json_decref(names);
}

static void test_null_without_coreg(void **state)
{
    (void)state;
    gp_error err;
    json_t *flat = parse("[1, null]"), *rows = parse("[[1, 2], [3, null]]");
    assert_int_equal(gp_json_targets_null(flat, &err), GP_EDATA);
    assert_string_equal(err.field, "y[1]");
    assert_non_null(strstr(err.message, "options.coregionalization"));
    assert_int_equal(gp_json_targets_null(rows, &err), GP_EDATA);
    assert_string_equal(err.field, "y[1][1]");
    json_decref(flat);
    json_decref(rows);
}

static void test_output_names(void **state)
{
    (void)state;
    gp_error err;
    json_t *out = NULL;
    assert_int_equal(gp_api_parse_outputs(NULL, 3, &out, &err), GP_OK);
    char *text = json_dumps(out, JSON_COMPACT);
    assert_string_equal(text, "[\"y0\",\"y1\",\"y2\"]");
    free(text);
    json_decref(out);
    static const struct {
        const char *names, *field;
    } bad[] = {{"[\"a\"]", "outputs"},         {"[\"a\", \"a\"]", "outputs[1]"},
               {"[1, \"b\"]", "outputs[0]"},    {"[\"a\", \"\"]", "outputs[1]"},
               {"{}", "outputs"}};
    for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
        json_t *v = parse(bad[k].names);
        out = NULL;
        assert_int_equal(gp_api_parse_outputs(v, 2, &out, &err), GP_EINVAL);
        assert_string_equal(err.field, bad[k].field);
        assert_null(out);
        json_decref(v);
    }
    char *kept = gp_api_outputs_text("{\"outputs\":[\"Cd\",\"Ni\"]}", 2);
    assert_string_equal(kept, "[\"Cd\",\"Ni\"]");
    free(kept);
    char *def = gp_api_outputs_text("{}", 2);
    assert_string_equal(def, "[\"y0\",\"y1\"]");
    free(def);
}

static void test_csv_targets(void **state)
{
    (void)state;
    const char *body = "x,Cd,z,Ni\n0,0.1,5,1.0\n1,,6,1.4\n2,0.8,7,\n";
    gp_csv_request q = {.targets = "Ni,Cd", .max_rows = 100, .max_inputs = 100};
    double *X = NULL, *y = NULL;
    size_t n = 0, d = 0, p = 0;
    json_t *names = json_array();
    gp_error err;
    assert_int_equal(gp_csv_parse_request(body, strlen(body), &q, &X, &y, NULL, &n, &d, &p, names,
                                          &err),
                     GP_OK);
    assert_int_equal(n, 3);
    assert_int_equal(d, 2); /* x and z */
    assert_int_equal(p, 2);
    char *text = json_dumps(names, JSON_COMPACT);
    assert_string_equal(text, "[\"Ni\",\"Cd\"]"); /* in the order targets names them */
    free(text);
    assert_true(X[0] == 0 && X[2] == 2 && X[3] == 5 && X[5] == 7);
    assert_true(y[0] == 1.0 && y[1] == 1.4 && isnan(y[2]) && y[3] == 0.1 && isnan(y[4]) &&
                y[5] == 0.8);
    free(X);
    free(y);
    json_decref(names);
    names = json_array();
    q.targets = "Cd,Pb";
    assert_int_equal(gp_csv_parse_request(body, strlen(body), &q, &X, &y, NULL, &n, &d, &p, names,
                                          &err),
                     GP_EINVAL);
    assert_string_equal(err.field, "targets");
    /* one target (?target=): an empty cell is still refused, as before */
    q.targets = NULL;
    q.target = "Cd";
    assert_int_equal(gp_csv_parse_request(body, strlen(body), &q, &X, &y, NULL, &n, &d, &p, NULL,
                                          &err),
                     GP_EDATA);
    assert_string_equal(err.field, "y[1]");
    json_decref(names);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows_with_null),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_all_missing_row_and_output),
        cmocka_unit_test(test_null_without_coreg),
        cmocka_unit_test(test_output_names),
        cmocka_unit_test(test_csv_targets),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
