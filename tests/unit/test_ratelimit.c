/* Per-principal rate limits (server/ratelimit.h): the token bucket's burst
 * and refill, Retry-After's rounding (always up, never 0), fits per minute,
 * a lowered limit, many principals apart, the bound on principals held (the
 * least recently used dropped) and the drop of removed keys. Time is the
 * test's own clock: nothing here reads the wall clock. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "server/ratelimit.h"

#define SEC 1000000ull

/* Tokens taken in a row at now before the first refusal. */
static int burst(gp_ratelimit *rl, const char *who, int kind, long rate, uint64_t now)
{
    long ra = 0;
    int n = 0;
    while (n < 100000 && gp_ratelimit_take(rl, who, kind, rate, now, &ra))
        n++;
    return n;
}

static void test_burst_is_the_rate(void **state)
{
    (void)state;
    gp_ratelimit *rl = gp_ratelimit_new(64);
    assert_non_null(rl);
    assert_int_equal(burst(rl, "a", GP_RATE_RPS, 20, 1000), 20);
    assert_int_equal(burst(rl, "b", GP_RATE_RPS, 1, 1000), 1);
    assert_int_equal(burst(rl, "c", GP_RATE_FITS, 3, 1000), 3);
    gp_ratelimit_free(rl);
}

static void test_refill(void **state)
{
    (void)state;
    gp_ratelimit *rl = gp_ratelimit_new(64);
    uint64_t t = 5 * SEC;
    long ra = 0;
    assert_int_equal(burst(rl, "k", GP_RATE_RPS, 20, t), 20);
    /* 1/20 s later one token, not two */
    assert_int_equal(burst(rl, "k", GP_RATE_RPS, 20, t + SEC / 20), 1);
    /* just before the next one is due: none */
    assert_int_equal(gp_ratelimit_take(rl, "k", GP_RATE_RPS, 20, t + 2 * SEC / 20 - 1, &ra), 0);
    /* an idle hour refills to the burst, not beyond */
    assert_int_equal(burst(rl, "k", GP_RATE_RPS, 20, t + 3600 * SEC), 20);
    /* 3 s of taking as fast as possible: burst + 3 s worth */
    uint64_t t0 = 10000 * SEC;
    int got = 0;
    for (uint64_t us = 0; us <= 3 * SEC; us += 1000)
        got += gp_ratelimit_take(rl, "k", GP_RATE_RPS, 20, t0 + us, &ra);
    assert_int_equal(got, 20 + 60);
    gp_ratelimit_free(rl);
}

static void test_retry_after_rounds_up(void **state)
{
    (void)state;
    gp_ratelimit *rl = gp_ratelimit_new(64);
    long ra = 0;
    /* rps=20: the next token is 50 ms away, said as 1 s (never 0) */
    burst(rl, "a", GP_RATE_RPS, 20, 0);
    assert_int_equal(gp_ratelimit_take(rl, "a", GP_RATE_RPS, 20, 0, &ra), 0);
    assert_int_equal(ra, 1);
    /* fits_per_minute=3: one every 20 s */
    burst(rl, "f", GP_RATE_FITS, 3, 0);
    assert_int_equal(gp_ratelimit_take(rl, "f", GP_RATE_FITS, 3, 0, &ra), 0);
    assert_int_equal(ra, 20);
    /* 1 us later: 19.999999 s, rounded up to 20 */
    assert_int_equal(gp_ratelimit_take(rl, "f", GP_RATE_FITS, 3, 1, &ra), 0);
    assert_int_equal(ra, 20);
    /* 1 s + 1 us later: 18.999999 s, so 19 */
    assert_int_equal(gp_ratelimit_take(rl, "f", GP_RATE_FITS, 3, SEC + 1, &ra), 0);
    assert_int_equal(ra, 19);
    /* exactly due: taken */
    assert_int_equal(gp_ratelimit_take(rl, "f", GP_RATE_FITS, 3, 20 * SEC, &ra), 1);
    /* fits_per_minute=7: 60/7 = 8.57 s, said as 9 */
    burst(rl, "g", GP_RATE_FITS, 7, 0);
    assert_int_equal(gp_ratelimit_take(rl, "g", GP_RATE_FITS, 7, 0, &ra), 0);
    assert_int_equal(ra, 9);
    gp_ratelimit_free(rl);
}

static void test_unlimited_and_kinds_apart(void **state)
{
    (void)state;
    gp_ratelimit *rl = gp_ratelimit_new(64);
    long ra = 0;
    for (int i = 0; i < 1000; i++)
        assert_int_equal(gp_ratelimit_take(rl, "u", GP_RATE_RPS, 0, 0, &ra), 1);
    assert_int_equal(gp_ratelimit_count(rl), 0); /* nothing held for no limit */
    assert_int_equal(burst(rl, "x", GP_RATE_RPS, 2, 0), 2);
    assert_int_equal(burst(rl, "x", GP_RATE_FITS, 2, 0), 2); /* its own bucket */
    gp_ratelimit_free(rl);
}

static void test_lowered_limit_applies(void **state)
{
    (void)state;
    gp_ratelimit *rl = gp_ratelimit_new(64);
    long ra = 0;
    assert_int_equal(gp_ratelimit_take(rl, "k", GP_RATE_RPS, 100, 0, &ra), 1);
    /* rps lowered to 5 by a reload: the bucket (99 left) is cut to 5 */
    assert_int_equal(burst(rl, "k", GP_RATE_RPS, 5, 1), 5);
    /* raised to 50: refills at the new rate */
    assert_int_equal(burst(rl, "k", GP_RATE_RPS, 50, 1 + SEC / 10), 5);
    gp_ratelimit_free(rl);
}

static void test_many_principals_apart(void **state)
{
    (void)state;
    gp_ratelimit *rl = gp_ratelimit_new(100000);
    char who[32];
    for (int i = 0; i < 5000; i++) {
        snprintf(who, sizeof who, "10.0.%d.%d", i / 256, i % 256);
        assert_int_equal(burst(rl, who, GP_RATE_RPS, 3, 0), 3);
    }
    assert_int_equal(gp_ratelimit_count(rl), 5000);
    gp_ratelimit_free(rl);
}

static void test_bounded_eviction(void **state)
{
    (void)state;
    gp_ratelimit *rl = gp_ratelimit_new(160); /* 16 shards of 11 */
    char who[32];
    long ra = 0;
    /* a scan from 100000 addresses holds no more than the bound */
    for (int i = 0; i < 100000; i++) {
        snprintf(who, sizeof who, "192.0.%d.%d", i / 256, i % 256);
        gp_ratelimit_take(rl, who, GP_RATE_RPS, 1, 0, &ra);
        if (i == 0)
            assert_int_equal(gp_ratelimit_take(rl, who, GP_RATE_RPS, 1, 0, &ra), 0);
    }
    assert_true(gp_ratelimit_count(rl) <= 16 * 11);
    /* the first one was dropped long ago: a fresh, full bucket */
    assert_int_equal(gp_ratelimit_take(rl, "192.0.0.0", GP_RATE_RPS, 1, 0, &ra), 1);
    /* one kept in use is not dropped while others come and go in its shard */
    gp_ratelimit *r2 = gp_ratelimit_new(16); /* 2 a shard */
    assert_int_equal(burst(r2, "busy", GP_RATE_RPS, 1, 0), 1);
    for (int i = 0; i < 1000; i++) {
        snprintf(who, sizeof who, "scan-%d", i);
        gp_ratelimit_take(r2, who, GP_RATE_RPS, 1, 0, &ra);
        assert_int_equal(gp_ratelimit_take(r2, "busy", GP_RATE_RPS, 1, 0, &ra), 0);
    }
    gp_ratelimit_free(r2);
    gp_ratelimit_free(rl);
}

static void test_retain_drops_removed_keys(void **state)
{
    (void)state;
    gp_ratelimit *rl = gp_ratelimit_new(64);
    long ra = 0;
    burst(rl, "alice", GP_RATE_RPS, 2, 0);
    burst(rl, "bob", GP_RATE_RPS, 2, 0);
    burst(rl, "carol", GP_RATE_RPS, 2, 0);
    static const char names[] = "alice\0carol";
    gp_ratelimit_retain(rl, names, 2);
    assert_int_equal(gp_ratelimit_count(rl), 2);
    assert_int_equal(gp_ratelimit_take(rl, "alice", GP_RATE_RPS, 2, 0, &ra), 0); /* kept, empty */
    assert_int_equal(gp_ratelimit_take(rl, "bob", GP_RATE_RPS, 2, 0, &ra), 1);   /* dropped */
    assert_string_equal(gp_rate_kind_name(GP_RATE_RPS), "rps");
    assert_string_equal(gp_rate_kind_name(GP_RATE_FITS), "fits_per_minute");
    gp_ratelimit_free(rl);
}

static void *take_many(void *arg)
{
    gp_ratelimit *rl = arg;
    long ra = 0, got = 0;
    for (int i = 0; i < 20000; i++)
        got += gp_ratelimit_take(rl, i % 2 ? "shared" : "other", GP_RATE_RPS, 1000, 0, &ra);
    return (void *)(intptr_t)got;
}

/* Four threads on the same buckets at one instant: exactly the bursts get
 * through, none lost or doubled under the shard's lock. */
static void test_threads_share_a_bucket(void **state)
{
    (void)state;
    gp_ratelimit *rl = gp_ratelimit_new(64);
    pthread_t t[4];
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_create(&t[i], NULL, take_many, rl), 0);
    long total = 0;
    for (int i = 0; i < 4; i++) {
        void *got = NULL;
        pthread_join(t[i], &got);
        total += (long)(intptr_t)got;
    }
    assert_int_equal(total, 2 * 1000);
    gp_ratelimit_free(rl);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_burst_is_the_rate),
        cmocka_unit_test(test_refill),
        cmocka_unit_test(test_retry_after_rounds_up),
        cmocka_unit_test(test_unlimited_and_kinds_apart),
        cmocka_unit_test(test_lowered_limit_applies),
        cmocka_unit_test(test_many_principals_apart),
        cmocka_unit_test(test_bounded_eviction),
        cmocka_unit_test(test_retain_drops_removed_keys),
        cmocka_unit_test(test_threads_share_a_bucket),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
