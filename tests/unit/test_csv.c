/* api/csv.c: the RFC 4180 reader of CSV fits, on files written by R's
 * write.csv and Python's csv module (tests/fixtures/csv/, with the scripts
 * that wrote them) and on hand-made edge cases. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "api/internal.h"

/* The data every fixture holds: columns "cement, kg", 'water "w"', strength. */
static const double A[6] = {1.5, -2, 0.003, 4, 5.25, 6};
static const double B[6] = {10, 20, 30, 40, 50, 60};
static const double Y[6] = {0.1, 0.2, 0.3, 0.4, 0.5, 0.6};

static char *read_fixture(const char *name, size_t *len)
{
    char path[256];
    snprintf(path, sizeof path, "tests/fixtures/csv/%s", name);
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        fail_msg("cannot read %s (tests run from the repository root)", path);
    char *buf = malloc(4096);
    assert_non_null(buf);
    *len = fread(buf, 1, 4096, f);
    fclose(f);
    return buf;
}

typedef struct parsed {
    double *X, *y;
    size_t n, d;
} parsed;

static void parse_ok(const char *body, size_t len, const char *target, parsed *p)
{
    gp_error err;
    int rc = gp_csv_parse(body, len, target, 1000, 1000, &p->X, &p->y, &p->n, &p->d, &err);
    if (rc != GP_OK)
        fail_msg("parse failed: %s (field '%s')", err.message, err.field);
}

static void check_columns(const parsed *p, const double *x0, const double *x1, const double *y)
{
    assert_int_equal(p->n, 6);
    assert_int_equal(p->d, 2);
    /* strtod of the written decimal is the literal's double, bit for bit */
    assert_memory_equal(p->X, x0, 6 * sizeof(double));
    assert_memory_equal(p->X + 6, x1, 6 * sizeof(double));
    assert_memory_equal(p->y, y, 6 * sizeof(double));
}

static void test_fixture(const char *file, const char *second_name)
{
    size_t len;
    char *body = read_fixture(file, &len);
    parsed p;
    parse_ok(body, len, NULL, &p);
    check_columns(&p, A, B, Y);
    free(p.X);
    free(p.y);
    /* The target by its unescaped name: the quoted, comma- or quote-holding names are read whole. */
    parse_ok(body, len, second_name, &p);
    check_columns(&p, A, Y, B);
    free(p.X);
    free(p.y);
    parse_ok(body, len, "cement, kg", &p);
    check_columns(&p, B, Y, A);
    free(p.X);
    free(p.y);
    free(body);
}

static void test_r_write_csv(void **state)
{
    (void)state;
    test_fixture("r_write_csv.csv", "water \"w\"");
}

static void test_python_minimal_crlf(void **state)
{
    (void)state;
    test_fixture("py_minimal.csv", "water \"w\"");
}

static void test_python_quote_all_bom(void **state)
{
    (void)state;
    test_fixture("py_quote_all_bom.csv", "water \"w\"");
}

static void test_python_nonnumeric_newline_in_name(void **state)
{
    (void)state;
    test_fixture("py_nonnumeric_lf.csv", "water \"w\"\n(litres)");
}

/* Blanks around fields and quotes, CRLF, trailing blank lines, a final line without a break. */
static void test_edge_cases(void **state)
{
    (void)state;
    static const char body[] = " a , \"b\" ,y\r\n 1 , \" 2 \" , 3\r\n4,5,6\r\n\r\n\n";
    parsed p;
    parse_ok(body, sizeof body - 1, "b", &p);
    assert_int_equal(p.n, 2);
    assert_int_equal(p.d, 2);
    const double x0[2] = {1, 4}, x1[2] = {3, 6}, y[2] = {2, 5};
    assert_memory_equal(p.X, x0, sizeof x0);
    assert_memory_equal(p.X + 2, x1, sizeof x1);
    assert_memory_equal(p.y, y, sizeof y);
    free(p.X);
    free(p.y);
    static const char nobreak[] = "a,y\n1,2";
    parse_ok(nobreak, sizeof nobreak - 1, NULL, &p);
    assert_int_equal(p.n, 1);
    free(p.X);
    free(p.y);
}

/* Malformed quoting is refused naming the row (a data row's field, "X[r]"). */
static void test_malformed(void **state)
{
    (void)state;
    static const struct {
        const char *body, *field;
    } cases[] = {
        {"a,y\n\"1,2\n", "X[0]"},     /* unclosed quote */
        {"a,y\n1,2\"\n", "X[0]"},     /* quote inside an unquoted field */
        {"a,y\n1,2\n\"3\"x,4\n", "X[1]"}, /* text after a closing quote */
        {"\"a,y\n1,2\n", "X"},        /* the header's quote never closes */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        double *X = NULL, *y = NULL;
        size_t n = 0, d = 0;
        gp_error err;
        int rc = gp_csv_parse(cases[i].body, strlen(cases[i].body), NULL, 1000, 1000, &X, &y, &n, &d,
                              &err);
        if (rc != GP_EDATA || strcmp(err.field, cases[i].field) != 0)
            fail_msg("case %zu: rc %d field '%s' (%s)", i, rc, err.field, err.message);
        assert_null(X);
        assert_null(y);
    }
}

/* More input columns than the limit: 413 before the data are read. */
static void test_input_column_limit(void **state)
{
    (void)state;
    static const char body[] = "a,b,c,y\n1,2,3,4\n";
    double *X = NULL, *y = NULL;
    size_t n = 0, d = 0;
    gp_error err;
    assert_int_equal(gp_csv_parse(body, sizeof body - 1, NULL, 1000, 2, &X, &y, &n, &d, &err),
                     GP_ETOOBIG);
    assert_string_equal(err.field, "X");
    assert_non_null(strstr(err.message, "max_input_dim = 2"));
    assert_null(X);
    parsed p;
    gp_error e2;
    assert_int_equal(gp_csv_parse(body, sizeof body - 1, NULL, 1000, 3, &p.X, &p.y, &p.n, &p.d,
                                  &e2),
                     GP_OK);
    assert_int_equal(p.d, 3);
    free(p.X);
    free(p.y);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_r_write_csv),
        cmocka_unit_test(test_python_minimal_crlf),
        cmocka_unit_test(test_python_quote_all_bom),
        cmocka_unit_test(test_python_nonnumeric_newline_in_name),
        cmocka_unit_test(test_edge_cases),
        cmocka_unit_test(test_malformed),
        cmocka_unit_test(test_input_column_limit),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
