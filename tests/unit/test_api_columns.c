/* Named columns (api/columns.c, the records of api/csv.c): a fit's names
 * checked, records matched by name in any order to the same doubles as the
 * positional rows, a text/csv body's rows, and every bad case refused with
 * the field that names it. */
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
    json_t *v = json_loads(text, JSON_DECODE_INT_AS_REAL | JSON_DECODE_ANY, &je);
    assert_non_null(v);
    return v;
}

/* The records of rows_text against names_text: rc, and err's field. */
static int records(const char *names_text, const char *rows_text, double **X, size_t *m,
                   size_t *d, gp_error *err)
{
    json_t *names = names_text ? parse(names_text) : NULL, *rows = parse(rows_text);
    gp_x_names nm = {rows, names, NULL};
    gp_error_clear(err);
    int rc = gp_api_records(&nm, "m", 100, X, m, d, err);
    json_decref(names);
    json_decref(rows);
    return rc;
}

static void expect_refused(const char *names, const char *rows, int code, const char *field)
{
    double *X = NULL;
    size_t m = 0, d = 0;
    gp_error err;
    assert_int_equal(records(names, rows, &X, &m, &d, &err), code);
    assert_null(X);
    assert_string_equal(err.field, field);
}

static void test_records_match_positional(void **state)
{
    (void)state;
    double *X = NULL, *P = NULL;
    size_t m = 0, d = 0, pm = 0, pd = 0;
    gp_error err;
    /* shuffled keys, values that do not round-trip through a short decimal */
    assert_int_equal(records("[\"cement\", \"slag\", \"age\"]",
                             "[{\"age\": 28, \"slag\": 0.1, \"cement\": 540.3},"
                             " {\"slag\": 1e-300, \"cement\": -2.718281828459045, \"age\": 3}]",
                             &X, &m, &d, &err),
                     GP_OK);
    json_t *pos = parse("[[540.3, 0.1, 28], [-2.718281828459045, 1e-300, 3]]");
    assert_int_equal(gp_json_matrix(pos, "X", 100, &P, &pm, &pd, &err), GP_OK);
    json_decref(pos);
    assert_int_equal(m, pm);
    assert_int_equal(d, pd);
    assert_memory_equal(X, P, m * d * sizeof *X);
    free(X);
    free(P);
}

static void test_missing_column(void **state)
{
    (void)state;
    expect_refused("[\"cement\", \"slag\"]", "[{\"cement\": 1, \"slag\": 2}, {\"slag\": 2}]",
                   GP_EDATA, "rows[1].cement");
}

static void test_unknown_column(void **state)
{
    (void)state;
    expect_refused("[\"cement\", \"slag\"]", "[{\"cement\": 1, \"slag\": 2, \"water\": 3}]",
                   GP_EDATA, "rows[0].water");
}

static void test_non_numeric_value(void **state)
{
    (void)state;
    expect_refused("[\"cement\", \"slag\"]",
                   "[{\"cement\": 1, \"slag\": 2}, {\"cement\": 1, \"slag\": 2},"
                   " {\"cement\": 1, \"slag\": 2}, {\"cement\": \"lots\", \"slag\": 2}]",
                   GP_EDATA, "rows[3].cement");
    expect_refused("[\"cement\"]", "[{\"cement\": null}]", GP_EDATA, "rows[0].cement");
}

static void test_model_without_names(void **state)
{
    (void)state;
    expect_refused(NULL, "[{\"x0\": 1}]", GP_EDATA, "rows");
}

static void test_rows_shape(void **state)
{
    (void)state;
    expect_refused("[\"a\"]", "{\"a\": 1}", GP_EINVAL, "rows");
    expect_refused("[\"a\"]", "[]", GP_EDATA, "rows");
    expect_refused("[\"a\"]", "[{\"a\": 1}, [1]]", GP_EINVAL, "rows[1]");
}

static void test_targets_in_rows(void **state)
{
    (void)state;
    json_t *names = parse("[\"a\"]"), *targets = parse("[\"y\"]");
    json_t *rows = parse("[{\"y\": 3, \"a\": 1}, {\"a\": 2, \"y\": 4}]");
    gp_x_names nm = {rows, names, targets};
    double *X = NULL, *y = NULL;
    size_t m = 0, d = 0, p = 0;
    gp_error err;
    assert_int_equal(gp_api_records(&nm, "m", 100, &X, &m, &d, &err), GP_OK);
    assert_true(X[0] == 1 && X[1] == 2);
    assert_int_equal(gp_api_record_targets(rows, targets, &y, &p, &err), GP_OK);
    assert_int_equal(p, 1);
    assert_true(y[0] == 3 && y[1] == 4);
    free(X);
    free(y);
    json_decref(rows);
    /* a row without its target */
    rows = parse("[{\"a\": 1, \"y\": 3}, {\"a\": 2}]");
    assert_int_equal(gp_api_record_targets(rows, targets, &y, &p, &err), GP_EDATA);
    assert_string_equal(err.field, "rows[1].y");
    json_decref(rows);
    json_decref(names);
    json_decref(targets);
}

static void test_check_names(void **state)
{
    (void)state;
    gp_error err;
    json_t *v = parse("[\"a\", \"b\"]");
    assert_int_equal(gp_api_check_names(v, "feature_names", 2, &err), GP_OK);
    assert_int_equal(gp_api_check_names(v, "feature_names", 3, &err), GP_EDATA);
    assert_string_equal(err.field, "feature_names");
    json_decref(v);
    v = parse("[\"a\", \"a\"]");
    assert_int_equal(gp_api_check_names(v, "feature_names", 2, &err), GP_EINVAL);
    assert_string_equal(err.field, "feature_names[1]");
    json_decref(v);
    v = parse("[\"a\", \"\"]");
    assert_int_equal(gp_api_check_names(v, "target_names", 2, &err), GP_EINVAL);
    assert_string_equal(err.field, "target_names[1]");
    json_decref(v);
    v = parse("\"a\"");
    assert_int_equal(gp_api_check_names(v, "feature_names", 1, &err), GP_EINVAL);
    json_decref(v);
}

static int csv_rows(const char *body, json_t **rows, gp_error *err)
{
    gp_error_clear(err);
    return gp_csv_records(body, strlen(body), 100, 10, rows, err);
}

static void test_csv_body(void **state)
{
    (void)state;
    json_t *rows = NULL;
    gp_error err;
    assert_int_equal(csv_rows("slag,cement\r\n0.1,540.3\n\"2\",-2.718281828459045\n", &rows,
                              &err),
                     GP_OK);
    assert_int_equal(json_array_size(rows), 2);
    /* read as the JSON number is: the same double */
    assert_true(json_real_value(json_object_get(json_array_get(rows, 0), "cement")) == 540.3);
    assert_true(json_real_value(json_object_get(json_array_get(rows, 1), "cement")) ==
                -2.718281828459045);
    assert_true(json_real_value(json_object_get(json_array_get(rows, 1), "slag")) == 2.0);
    json_decref(rows);
}

static void test_csv_bad_cell(void **state)
{
    (void)state;
    json_t *rows = NULL;
    gp_error err;
    assert_int_equal(csv_rows("slag,cement\n1,2\n3,lots\n", &rows, &err), GP_EDATA);
    assert_null(rows);
    assert_string_equal(err.field, "rows[1].cement");
    assert_non_null(strstr(err.message, "cement"));
}

static void test_csv_header_only(void **state)
{
    (void)state;
    json_t *rows = NULL;
    gp_error err;
    assert_int_equal(csv_rows("slag,cement\n", &rows, &err), GP_EDATA);
    assert_string_equal(err.field, "X");
    assert_int_equal(csv_rows("a,a\n1,2\n", &rows, &err), GP_EDATA);
    assert_non_null(strstr(err.message, "twice"));
    assert_int_equal(csv_rows("a,b\n1,2,3\n", &rows, &err), GP_EDATA);
    assert_null(rows);
}

/* A fit's CSV keeps the inputs' names in X's order and the targets'. */
static void test_csv_fit_names(void **state)
{
    (void)state;
    const char *body = "a,y,n,b\n1,2,0.1,3\n4,5,0.2,6\n";
    gp_csv_request q = {.target = "y", .noise_column = "n", .max_rows = 100, .max_inputs = 10};
    q.feature_names = json_array();
    q.target_names = json_array();
    double *X = NULL, *y = NULL, *noise = NULL;
    size_t n = 0, d = 0, p = 0;
    gp_error err;
    assert_int_equal(gp_csv_parse_request(body, strlen(body), &q, &X, &y, &noise, &n, &d, &p,
                                          NULL, &err),
                     GP_OK);
    char *f = json_dumps(q.feature_names, JSON_COMPACT), *t = json_dumps(q.target_names, JSON_COMPACT);
    assert_string_equal(f, "[\"a\",\"b\"]");
    assert_string_equal(t, "[\"y\"]");
    free(f);
    free(t);
    free(X);
    free(y);
    free(noise);
    json_decref(q.feature_names);
    json_decref(q.target_names);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_records_match_positional),
        cmocka_unit_test(test_missing_column),
        cmocka_unit_test(test_unknown_column),
        cmocka_unit_test(test_non_numeric_value),
        cmocka_unit_test(test_model_without_names),
        cmocka_unit_test(test_rows_shape),
        cmocka_unit_test(test_targets_in_rows),
        cmocka_unit_test(test_check_names),
        cmocka_unit_test(test_csv_body),
        cmocka_unit_test(test_csv_bad_cell),
        cmocka_unit_test(test_csv_header_only),
        cmocka_unit_test(test_csv_fit_names),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
