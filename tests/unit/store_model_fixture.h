/* Scaffolding of the model store's unit tests (test_store*.c; the observation
 * log's, test_store_observe*.c, have store_observe_fixture.h): random states
 * with full mantissas and special values, a save with fixed metadata, and an
 * ISO-time check. Over store_fixture.h (the back end under test, the
 * temporary directory, the groups of a program, the raw connection).
 *
 * Header-only (static inline), as store_fixture.h: the benchmarks link every
 * support object of tests/unit without cmocka or the store library. Each
 * test program keeps its own random stream. Include after cmocka.h. */
#ifndef GP_STORE_MODEL_FIXTURE_H
#define GP_STORE_MODEL_FIXTURE_H

#include "tests/unit/store_fixture.h"

/* ---- helpers: random states (the raw connection is store_fixture.h's) ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15u;

static inline double rand_double(void)
{
    /* xorshift64*, mapped to a wide, NaN-free range with full mantissas. */
    uint64_t r = sf_xorshift64(&rng_state);
    double u = (double)(r >> 11) * 0x1.0p-53;
    return (u - 0.5) * 2e3 / (1.0 + (double)(r & 0xff));
}

static inline void put_random(gp_state *st, const char *name, size_t rows, size_t cols)
{
    sf_put_generated(st, name, rows, cols, rand_double);
}

/* A state with a general matrix, a scalar, an empty array and special values. */
static inline void make_state(gp_state *st)
{
    gp_error err;
    gp_state_init(st);
    put_random(st, "alpha", 37, 3);
    assert_int_equal(gp_state_put_scalar(st, "noise", 0.1, &err), GP_OK);
    put_random(st, "small", 2, 1);
    assert_int_equal(gp_state_put(st, "empty", 0, 4, NULL, &err), GP_OK);
    const double special[6] = {-0.0, 4.9406564584124654e-324, 1.7976931348623157e308,
                               -2.2250738585072014e-308, 1.0 / 3.0, 0.0};
    assert_int_equal(gp_state_put(st, "special", 3, 2, special, &err), GP_OK);
}

static int quiet_saves; /* set while failures are expected */

static inline int save_simple(gp_store *s, const char *name, const gp_state *st,
                              gp_model_meta *meta)
{
    gp_error err;
    int rc = gp_store_save(s, name, "exact", "{\"kernel\":\"rbf\"}", "{\"lml\":-1.5}", 10, 3,
                           st, meta, &err);
    if (rc && !quiet_saves)
        print_error("save %s: %s\n", name, err.message);
    return rc;
}

static inline int is_iso_time(const char *t)
{
    /* 2026-11-21T06:12:20Z */
    if (strlen(t) != 20)
        return 0;
    for (int i = 0; i < 20; i++) {
        char c = t[i];
        int ok = (i == 4 || i == 7)   ? c == '-'
                 : i == 10            ? c == 'T'
                 : (i == 13 || i == 16) ? c == ':'
                 : i == 19            ? c == 'Z'
                                      : c >= '0' && c <= '9';
        if (!ok)
            return 0;
    }
    return 1;
}

#endif
