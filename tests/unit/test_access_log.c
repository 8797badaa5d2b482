/* Unit tests for the access log's line (server/access_log.c): every field,
 * JSON escapes, nulls, the time at the edges of a day, a year and the epoch,
 * truncation to any buffer size, and the request ids it takes or makes. The
 * expected lines are written out by hand, so a formatter that drops a field,
 * mis-pads a number or overruns a short buffer fails here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>

#include "server/access_log.h"

static const gp_access_entry full = {
    .request_id = "pr-1",
    .client = "127.0.0.1",
    .key_name = NULL,
    .method = "POST",
    .route = "PREDICT",
    .model = "al",
    .version = 7,
    .status = 200,
    .bytes = 89,
    .duration_us = 187,
};

static void test_line_every_field(void **state)
{
    (void)state;
    char out[1024];
    /* 2026-11-29T13:55:22.471Z */
    size_t n = gp_access_log_format(&full, 1795960522LL, 471, out, sizeof out);
    const char *want = "{\"time\":\"2026-11-29T13:55:22.471Z\",\"request_id\":\"pr-1\","
                       "\"client\":\"127.0.0.1\",\"key\":null,\"method\":\"POST\","
                       "\"route\":\"PREDICT\",\"model\":\"al\",\"version\":7,\"status\":200,"
                       "\"bytes\":89,\"duration_us\":187}\n";
    assert_string_equal(out, want);
    assert_int_equal(n, strlen(want));
}

static void test_line_nulls_and_escapes(void **state)
{
    (void)state;
    gp_access_entry e = {
        .request_id = "a\"b\\c",
        .client = NULL,
        .key_name = "k\x01",
        .method = NULL,
        .route = "NONE",
        .model = NULL,
        .version = 0,
        .status = 431,
        .bytes = 0,
        .duration_us = 18446744073709551615ULL,
    };
    char out[1024];
    size_t n = gp_access_log_format(&e, 0, 5, out, sizeof out);
    const char *want = "{\"time\":\"1970-01-01T00:00:00.005Z\",\"request_id\":\"a\\\"b\\\\c\","
                       "\"client\":null,\"key\":\"k\\u0001\",\"method\":null,\"route\":\"NONE\","
                       "\"model\":null,\"version\":null,\"status\":431,\"bytes\":0,"
                       "\"duration_us\":18446744073709551615}\n";
    assert_string_equal(out, want);
    assert_int_equal(n, strlen(want));
}

static void test_line_time_edges(void **state)
{
    (void)state;
    static const struct {
        long long sec;
        int ms;
        const char *time;
    } cases[] = {
        {951782399LL, 999, "2000-02-28T23:59:59.999Z"},
        {951782400LL, 0, "2000-02-29T00:00:00.000Z"},  /* a leap day of a century year */
        {1735689599LL, 10, "2024-12-31T23:59:59.010Z"},
        {1735689600LL, 100, "2025-01-01T00:00:00.100Z"},
        {4102444800LL, 1, "2100-01-01T00:00:00.001Z"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[1024], want[64];
        gp_access_log_format(&full, cases[i].sec, cases[i].ms, out, sizeof out);
        snprintf(want, sizeof want, "{\"time\":\"%s\",", cases[i].time);
        assert_memory_equal(out, want, strlen(want));
    }
}

/* Any buffer size: the line's first size - 1 bytes and a NUL, never more. */
static void test_line_truncated(void **state)
{
    (void)state;
    char whole[1024];
    size_t len = gp_access_log_format(&full, 1795960522LL, 471, whole, sizeof whole);
    for (size_t size = 1; size <= len + 2; size++) {
        char out[1100];
        memset(out, 'Z', sizeof out);
        size_t n = gp_access_log_format(&full, 1795960522LL, 471, out, size);
        size_t want = len < size ? len : size - 1;
        assert_int_equal(n, want);
        assert_memory_equal(out, whole, want);
        assert_int_equal(out[want], '\0');
        assert_int_equal(out[size], 'Z'); /* nothing written past the buffer */
    }
}

static void test_request_id(void **state)
{
    (void)state;
    char id[GP_REQUEST_ID_SIZE];
    gp_request_id_choose("trace-7/abc", id);
    assert_string_equal(id, "trace-7/abc");
    const char *bad[] = {NULL, "", "has space", "quo\"te", "back\\slash", "tab\t", "\x7f"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gp_request_id_choose(bad[i], id);
        assert_int_equal(strlen(id), 16);
        assert_int_equal(strspn(id, "0123456789abcdef"), 16);
    }
    char longest[GP_REQUEST_ID_MAX + 2];
    memset(longest, 'x', sizeof longest - 1);
    longest[GP_REQUEST_ID_MAX] = '\0';
    gp_request_id_choose(longest, id);
    assert_string_equal(id, longest);
    longest[GP_REQUEST_ID_MAX] = 'x';
    longest[GP_REQUEST_ID_MAX + 1] = '\0';
    gp_request_id_choose(longest, id);
    assert_int_equal(strlen(id), 16);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_line_every_field),
        cmocka_unit_test(test_line_nulls_and_escapes),
        cmocka_unit_test(test_line_time_edges),
        cmocka_unit_test(test_line_truncated),
        cmocka_unit_test(test_request_id),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
