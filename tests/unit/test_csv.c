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

/* Parse body; expect GP_EDATA with this field and a message holding `says`. */
static void refused(const char *body, const char *field, const char *says)
{
    double *X = NULL, *y = NULL;
    size_t n = 0, d = 0;
    gp_error err;
    int rc = gp_csv_parse(body, strlen(body), NULL, 1000, 1000, &X, &y, &n, &d, &err);
    if (rc != GP_EDATA || strcmp(err.field, field) != 0 || strstr(err.message, says) == NULL)
        fail_msg("'%s': rc %d field '%s' (%s); expected GP_EDATA, field '%s', '%s'", body, rc,
                 err.field, err.message, field, says);
    assert_null(X);
    assert_null(y);
}

/* Only decimal numbers are numbers: strtod's hexadecimal, hexadecimal floats,
 * inf, infinity and nan are refused, naming the cell as X[row][col] or y[row]. */
static void test_not_decimal(void **state)
{
    (void)state;
    static const char *const cells[] = {"0x10", "0X1F", "0x1p4", "-0x.8p1", "inf", "-Inf",
                                        "infinity", "INFINITY", "nan", "NaN", "nan(1)", "+nan",
                                        "1e", "1e+", "e5", ".", "-", "+.e1", "1.2.3", "1e5e5",
                                        "1 2", "--1", "1d0", "0b101", "1_000"};
    char body[128], in_x[128];
    for (size_t i = 0; i < sizeof cells / sizeof cells[0]; i++) {
        snprintf(body, sizeof body, "a,b,y\n1,2,3\n4,5,%s\n", cells[i]);
        refused(body, "y[1]", "is not a number (a decimal one");
        snprintf(in_x, sizeof in_x, "a,b,y\n1,2,3\n4,5,6\n7,\"%s\",9\n", cells[i]);
        refused(in_x, "X[2][1]", "column 'b'");
    }
    refused("a,y\n1,2\n 0x10 ,3\n", "X[1][0]", "is not a number (a decimal one");
}

/* What is a number: sign, digits, point on either side, exponent; blanks
 * around the cell (inside quotes too) trimmed, as spreadsheets do. */
static void test_decimal_forms(void **state)
{
    (void)state;
    static const char body[] = "a,y\n+1,-2\n.5,5.\n-.25e+2,1E-2\n\" 007 \",\t1e0\t\n"
                               "0.1000000000000000055511151231257827,1e-400\n";
    parsed p;
    parse_ok(body, sizeof body - 1, NULL, &p);
    assert_int_equal(p.n, 5);
    const double x[5] = {1, 0.5, -25, 7, 0.1}, y[5] = {-2, 5, 0.01, 1, 0};
    assert_memory_equal(p.X, x, sizeof x);
    assert_memory_equal(p.y, y, sizeof y);
    free(p.X);
    free(p.y);
    refused("a,y\n1,\n", "y[0]", "is empty");
    refused("a,y\n\"  \",1\n", "X[0][0]", "is empty");
    refused("a,y\n1,1e999\n", "y[0]", "is not a finite number");
    double v = 0;
    assert_int_equal(gp_decimal_parse("12", 1, &v), 0); /* only len bytes are read */
    assert_true(v == 1);
    assert_int_equal(gp_decimal_parse("", 0, &v), -1);
}

/* gp_decimal_parse gives strtod's double bit for bit, on the fast path
 * (<= 2^53, exponent within +-22) and off it: random digit strings of every
 * length up to 25, with and without a point and an exponent (a fixed
 * generator: the same strings every run). */
static void test_decimal_is_strtod(void **state)
{
    (void)state;
    uint64_t g = 0x9E3779B97F4A7C15u;
    char s[64];
    for (int i = 0; i < 200000; i++) {
        g = g * 6364136223846793005u + 1442695040888963407u;
        uint64_t r = g >> 11;
        size_t n = 0, ndig = 1 + r % 25;
        if (r & 32)
            s[n++] = (r & 64) ? '-' : '+';
        size_t point = (r >> 7) % (ndig + 2); /* ndig + 1: no point */
        for (size_t k = 0; k < ndig; k++) {
            if (k == point)
                s[n++] = '.';
            g = g * 6364136223846793005u + 1442695040888963407u;
            s[n++] = (char)('0' + (g >> 33) % 10);
        }
        if (point == ndig)
            s[n++] = '.';
        if ((r >> 12) & 1)
            n += (size_t)snprintf(s + n, sizeof s - n, "e%d", (int)((r >> 13) % 700) - 350);
        s[n] = '\0';
        double got = 0, want = strtod(s, NULL);
        if (gp_decimal_parse(s, n, &got) != 0 || memcmp(&got, &want, sizeof got) != 0)
            fail_msg("'%s': %.17g, strtod %.17g", s, got, want);
    }
    static const char *const edges[] = {"9007199254740992", "9007199254740993", "1e22", "1e23",
                                        "-0", "0e999", "1e-999", "4.9e-324", "1.7976931348623157e308",
                                        "123456789012345678901234567890", "0.1", "-.5e+0"};
    for (size_t i = 0; i < sizeof edges / sizeof edges[0]; i++) {
        double got = 0, want = strtod(edges[i], NULL);
        assert_int_equal(gp_decimal_parse(edges[i], strlen(edges[i]), &got), 0);
        if (memcmp(&got, &want, sizeof got) != 0)
            fail_msg("'%s': %.17g, strtod %.17g", edges[i], got, want);
    }
}

/* Two columns of the same name are refused, naming it; names differing only
 * by quoting are the same name, names differing by a blank inside quotes are not. */
static void test_duplicate_header(void **state)
{
    (void)state;
    refused("a,b,a,y\n1,2,3,4\n", "X", "column 'a' appears twice");
    refused("a,b,a,y\n1,2,3,4\n", "X", "columns 1 and 3");
    refused("x,\"x\",y\n1,2,3\n", "X", "column 'x' appears twice");
    refused("p,q,y,y\n1,2,3,4\n", "X", "column 'y'");
    /* the first duplicate in column order: b (columns 2 and 3), not a (1 and 4) */
    refused("a,b,b,a,y\n1,2,3,4,5\n", "X", "columns 2 and 3");
    refused("\"c, d\",\"c, d\",y\n1,2,3\n", "X", "column 'c, d'");
    refused(",,y\n1,2,3\n", "X", "column '' appears twice");
    parsed p;
    static const char differ[] = "x,\" x\",X,y\n1,2,3,4\n";
    parse_ok(differ, sizeof differ - 1, " x", &p);
    assert_int_equal(p.d, 3);
    assert_true(p.y[0] == 2);
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
        cmocka_unit_test(test_not_decimal),
        cmocka_unit_test(test_decimal_forms),
        cmocka_unit_test(test_decimal_is_strtod),
        cmocka_unit_test(test_duplicate_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
