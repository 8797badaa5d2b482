/* Unit tests for the parser of data set uploads (api/dataset_ingest.h): CSV
 * with quoted cells, CRLF and lone CR line ends, a byte order mark, with
 * and without the last line end; JSON lines; the same rows whatever the
 * pieces the body arrives in (every split point of every body); chunks and
 * statistics; and each refusal, naming the row (1-based, and its line) and
 * the column. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/dataset_ingest.h"

#define MAX_VALUES 4096

/* What the callbacks saw. */
typedef struct seen {
    char names[16][80];
    size_t n_names;
    double values[MAX_VALUES]; /* row-major: row i, column j at i * cols + j */
    size_t cols;
    uint64_t rows;
    size_t chunks;
    int fail_chunk; /* 1: the chunk callback refuses */
} seen;

static int on_header(void *ctx, const char *const *names, size_t n, gp_error *err)
{
    (void)err;
    seen *s = ctx;
    assert_int_equal(s->n_names, 0);
    for (size_t j = 0; j < n && j < 16; j++)
        snprintf(s->names[j], sizeof s->names[j], "%s", names[j]);
    s->n_names = n;
    s->cols = n;
    return GP_OK;
}

static int on_chunk(void *ctx, uint64_t first, size_t rows, size_t cols, const double *data,
                    gp_error *err)
{
    seen *s = ctx;
    if (s->fail_chunk)
        return gp_error_set(err, GP_ESTORAGE, "dataset", "no room");
    assert_int_equal(first, s->rows);
    assert_int_equal(cols, s->cols);
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++) {
            assert_true((first + i) * cols + j < MAX_VALUES);
            s->values[(first + i) * cols + j] = data[i + j * rows];
        }
    s->rows += rows;
    s->chunks++;
    return GP_OK;
}

/* Parse body in pieces of `piece` bytes (0: whole); the result code. */
static int parse(enum gp_ingest_format f, const char *body, size_t len, size_t piece,
                 size_t chunk_rows, size_t max_cols, seen *s, gp_error *err)
{
    int fail_chunk = s->fail_chunk;
    memset(s, 0, sizeof *s);
    s->fail_chunk = fail_chunk;
    gp_ingest *in = NULL;
    int rc = gp_ingest_new(f, chunk_rows, max_cols, on_header, on_chunk, s, &in, err);
    assert_int_equal(rc, GP_OK);
    size_t step = piece ? piece : (len ? len : 1);
    for (size_t at = 0; at < len && rc == GP_OK; at += step)
        rc = gp_ingest_feed(in, body + at, len - at < step ? len - at : step, err);
    if (rc == GP_OK)
        rc = gp_ingest_finish(in, err);
    if (rc == GP_OK)
        assert_int_equal(gp_ingest_rows(in), s->rows);
    gp_ingest_free(in);
    return rc;
}

static int parse_csv(const char *body, seen *s, gp_error *err)
{
    return parse(GP_INGEST_CSV, body, strlen(body), 0, 2, 16, s, err);
}

static int parse_nd(const char *body, seen *s, gp_error *err)
{
    return parse(GP_INGEST_NDJSON, body, strlen(body), 0, 2, 16, s, err);
}

/* Every body split at every point (and byte by byte) gives the rows of the
 * whole body, in chunks of 2 and of 1000 alike. */
static void assert_same_any_split(enum gp_ingest_format f, const char *body)
{
    static seen whole, part;
    gp_error err;
    size_t len = strlen(body);
    assert_int_equal(parse(f, body, len, 0, 1000, 16, &whole, &err), GP_OK);
    for (size_t piece = 1; piece <= len; piece++) {
        assert_int_equal(parse(f, body, len, piece, 2, 16, &part, &err), GP_OK);
        assert_int_equal(part.rows, whole.rows);
        assert_int_equal(part.n_names, whole.n_names);
        for (size_t j = 0; j < whole.n_names; j++)
            assert_string_equal(part.names[j], whole.names[j]);
        assert_memory_equal(part.values, whole.values, whole.rows * whole.cols * sizeof(double));
    }
}

static void test_csv_basic(void **state)
{
    (void)state;
    static seen s;
    gp_error err;
    assert_int_equal(parse_csv("x1,x2,y\n1,2,3\n4.5, -6e-1 ,7\n8,9,10\n", &s, &err), GP_OK);
    assert_int_equal(s.n_names, 3);
    assert_string_equal(s.names[0], "x1");
    assert_string_equal(s.names[2], "y");
    assert_int_equal(s.rows, 3);
    assert_int_equal(s.chunks, 2); /* 2 + 1 */
    const double want[] = {1, 2, 3, 4.5, -0.6, 7, 8, 9, 10};
    for (size_t k = 0; k < 9; k++)
        assert_true(s.values[k] == want[k]);
}

/* Line ends LF, CRLF, CR; the last one optional; a BOM; blank lines at the end. */
static void test_csv_line_ends(void **state)
{
    (void)state;
    const char *bodies[] = {
        "a,b\n1,2\n3,4\n",         "a,b\r\n1,2\r\n3,4\r\n", "a,b\r1,2\r3,4\r",
        "a,b\n1,2\n3,4",           "\xEF\xBB\xBF" "a,b\n1,2\n3,4\n",
        "a,b\n1,2\n3,4\n\n\r\n  \n", "\n\na,b\n1,2\n3,4\n",
    };
    static seen s;
    gp_error err;
    for (size_t k = 0; k < sizeof bodies / sizeof bodies[0]; k++) {
        if (parse_csv(bodies[k], &s, &err))
            fail_msg("body %zu: %s", k, err.message);
        assert_int_equal(s.rows, 2);
        assert_string_equal(s.names[0], "a");
        assert_string_equal(s.names[1], "b");
        assert_true(s.values[0] == 1 && s.values[3] == 4);
        assert_same_any_split(GP_INGEST_CSV, bodies[k]);
    }
}

/* Quoted cells as RFC 4180: commas, quotes ("") and line ends inside; quoted numbers. */
static void test_csv_quoted(void **state)
{
    (void)state;
    const char *body = "\"a,1\",\"say \"\"hi\"\"\",c\r\n\"1\",2,\" 3 \"\r\n4,\"5\",6";
    static seen s;
    gp_error err;
    assert_int_equal(parse_csv(body, &s, &err), GP_OK);
    assert_string_equal(s.names[0], "a,1");
    assert_string_equal(s.names[1], "say \"hi\"");
    assert_int_equal(s.rows, 2);
    assert_true(s.values[2] == 3 && s.values[4] == 5);
    assert_same_any_split(GP_INGEST_CSV, body);
    /* a line end inside a quoted number is no number, on the row's first line */
    assert_int_equal(parse_csv("a,b\n1,\"2\n\"\n", &s, &err), GP_EDATA);
    assert_string_equal(err.field, "rows[0].b");
    assert_non_null(strstr(err.message, "row 1 (line 2), column 'b'"));
}

static void assert_refused(int rc, const gp_error *err, int code, const char *field,
                           const char *says)
{
    assert_int_equal(rc, code);
    assert_string_equal(err->field, field);
    if (strstr(err->message, says) == NULL)
        fail_msg("'%s' does not say '%s'", err->message, says);
}

static void test_csv_refusals(void **state)
{
    (void)state;
    static seen s;
    gp_error err;
    assert_refused(parse_csv("a,b,c\n1,2,3\n4,5\n", &s, &err), &err, GP_EDATA, "rows[1]",
                   "row 2 (line 3): 2 cells; the header has 3 columns");
    assert_refused(parse_csv("a,b\n1,2\n3,4\n5,6,7\n", &s, &err), &err, GP_EDATA, "rows[2]",
                   "row 3 (line 4): 3 cells; the header has 2");
    assert_refused(parse_csv("a,b\n1,2\n3,x7\n", &s, &err), &err, GP_EDATA, "rows[1].b",
                   "row 2 (line 3), column 'b': 'x7' is not a number");
    assert_refused(parse_csv("a,b\n1,1e999\n", &s, &err), &err, GP_EDATA, "rows[0].b",
                   "'1e999' is not a finite number");
    assert_refused(parse_csv("a,b\nnan,1\n", &s, &err), &err, GP_EDATA, "rows[0].a",
                   "'nan' is not a number");
    assert_refused(parse_csv("a,b\ninf,1\n", &s, &err), &err, GP_EDATA, "rows[0].a",
                   "'inf' is not a number");
    assert_refused(parse_csv("a,b\n1,\n", &s, &err), &err, GP_EDATA, "rows[0].b", "is empty");
    assert_refused(parse_csv("", &s, &err), &err, GP_EDATA, "body", "the body is empty");
    assert_refused(parse_csv("\xEF\xBB\xBF\n\n", &s, &err), &err, GP_EDATA, "body",
                   "the body is empty");
    assert_refused(parse_csv("a,b\n", &s, &err), &err, GP_EDATA, "body", "header but no rows");
    assert_refused(parse_csv("a,b,a\n1,2,3\n", &s, &err), &err, GP_EDATA, "columns[2]",
                   "columns 1 and 3 are both named 'a'");
    assert_refused(parse_csv("a,,c\n1,2,3\n", &s, &err), &err, GP_EDATA, "columns[1]",
                   "column 2 of the header has no name");
    assert_refused(parse_csv("a,b\n1,2\n\n3,4\n", &s, &err), &err, GP_EDATA, "rows[1]",
                   "row 2 (line 4): a row after a blank line");
    assert_refused(parse_csv("a,b\n1,\"2\n", &s, &err), &err, GP_EDATA, "rows[0]",
                   "a quoted cell is not closed");
    assert_refused(parse_csv("a,b\n1,2\"3\n", &s, &err), &err, GP_EDATA, "rows[0]",
                   "a quote inside a cell without quotes");
    assert_refused(parse_csv("a,b\n1,\"2\"3\n", &s, &err), &err, GP_EDATA, "rows[0]",
                   "text after the closing quote");
    assert_refused(parse_csv("\"a\nb\",c\n1,2\n", &s, &err), &err, GP_EDATA, "columns[0]",
                   "control character");
    assert_refused(parse_csv("\xff\xfe,b\n1,2\n", &s, &err), &err, GP_EDATA, "columns[0]",
                   "not UTF-8");
    char wide[200];
    snprintf(wide, sizeof wide, "%s,b\n1,2\n",
             "n123456789012345678901234567890123456789012345678901234567890123456789");
    assert_refused(parse_csv(wide, &s, &err), &err, GP_EDATA, "columns[0]", "longer than 64");
    assert_refused(parse(GP_INGEST_CSV, "a,b,c\n1,2,3\n", 12, 0, 2, 2, &s, &err), &err,
                   GP_ETOOBIG, "columns", "more than 2 columns");
    /* a refusal of the chunk callback (the store's) is passed back */
    s.fail_chunk = 1;
    assert_refused(parse_csv("a\n1\n2\n3\n", &s, &err), &err, GP_ESTORAGE, "dataset", "no room");
    s.fail_chunk = 0;
}

/* Rows over several chunks and the statistics of each column. */
static void test_csv_chunks_and_stats(void **state)
{
    (void)state;
    char body[4096] = "a,b\n";
    size_t len = strlen(body);
    for (int i = 0; i < 101; i++)
        len += (size_t)snprintf(body + len, sizeof body - len, "%d,%d\n", i, i % 2 ? 5 : -5);
    static seen s;
    gp_error err;
    gp_ingest *in = NULL;
    assert_int_equal(gp_ingest_new(GP_INGEST_CSV, 10, 4, on_header, on_chunk, &s, &in, &err),
                     GP_OK);
    memset(&s, 0, sizeof s);
    assert_int_equal(gp_ingest_feed(in, body, len, &err), GP_OK);
    assert_int_equal(gp_ingest_finish(in, &err), GP_OK);
    assert_int_equal(s.rows, 101);
    assert_int_equal(s.chunks, 11);
    const gp_ingest_stats *st = gp_ingest_column_stats(in);
    assert_int_equal(st[0].count, 101);
    assert_true(fabs(st[0].mean - 50.0) < 1e-12);
    /* population sd of 0..100: sqrt((101^2 - 1) / 12) */
    assert_true(fabs(sqrt(st[0].m2 / 101.0) - sqrt((101.0 * 101.0 - 1.0) / 12.0)) < 1e-12);
    assert_true(st[0].min == 0.0 && st[0].max == 100.0);
    assert_true(st[1].min == -5.0 && st[1].max == 5.0);
    assert_int_equal(gp_ingest_columns(in), 2);
    assert_string_equal(gp_ingest_names(in)[1], "b");
    gp_ingest_free(in);
}

static void test_ndjson(void **state)
{
    (void)state;
    const char *body = "\xEF\xBB\xBF{\"x\": 1, \"y\": 2.5}\r\n{\"y\": 4, \"x\": 3}\n"
                       "{\"x\":5,\"y\":-6e2}\n\n";
    static seen s;
    gp_error err;
    assert_int_equal(parse_nd(body, &s, &err), GP_OK);
    assert_int_equal(s.rows, 3);
    assert_string_equal(s.names[0], "x");
    assert_string_equal(s.names[1], "y");
    const double want[] = {1, 2.5, 3, 4, 5, -600};
    for (size_t k = 0; k < 6; k++)
        assert_true(s.values[k] == want[k]);
    assert_same_any_split(GP_INGEST_NDJSON, body);
    assert_same_any_split(GP_INGEST_NDJSON, "{\"a\": 1}\n{\"a\": 2}");
}

static void test_ndjson_refusals(void **state)
{
    (void)state;
    static seen s;
    gp_error err;
    assert_refused(parse_nd("{\"x\":1,\"y\":2}\n{\"x\":3}\n", &s, &err), &err, GP_EDATA,
                   "rows[1]", "row 2 (line 2): no column 'y'");
    assert_refused(parse_nd("{\"x\":1}\n{\"x\":3,\"z\":4}\n", &s, &err), &err, GP_EDATA,
                   "rows[1]", "column 'z' is not a column of the first row");
    assert_refused(parse_nd("{\"x\":1,\"y\":2}\n{\"x\":\"3\",\"y\":1}\n", &s, &err), &err,
                   GP_EDATA, "rows[1].x", "column 'x': 'a string' is not a number");
    assert_refused(parse_nd("{\"x\":null}\n", &s, &err), &err, GP_EDATA, "rows[0].x",
                   "'null' is not a number");
    assert_refused(parse_nd("[1,2]\n", &s, &err), &err, GP_EDATA, "rows[0]",
                   "not a JSON object");
    assert_refused(parse_nd("{\"x\":1}\n{\"x\":\n", &s, &err), &err, GP_EDATA, "rows[1]",
                   "row 2 (line 2): not JSON");
    assert_refused(parse_nd("{\"x\":1,\"x\":2}\n", &s, &err), &err, GP_EDATA, "rows[0]",
                   "not JSON");
    assert_refused(parse_nd("{\"x\":1}\n\n{\"x\":2}\n", &s, &err), &err, GP_EDATA, "rows[1]",
                   "after a blank line");
    assert_refused(parse_nd("", &s, &err), &err, GP_EDATA, "body", "empty");
    assert_refused(parse_nd("{\"\":1}\n", &s, &err), &err, GP_EDATA, "columns[0]", "no name");
    assert_refused(parse_nd("{}\n", &s, &err), &err, GP_EDATA, "columns", "no columns");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_csv_basic),           cmocka_unit_test(test_csv_line_ends),
        cmocka_unit_test(test_csv_quoted),          cmocka_unit_test(test_csv_refusals),
        cmocka_unit_test(test_csv_chunks_and_stats), cmocka_unit_test(test_ndjson),
        cmocka_unit_test(test_ndjson_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
