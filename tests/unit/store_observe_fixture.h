/* Scaffolding of the observation log's unit tests (test_store_observe*.c;
 * the model store's, test_store*.c, have store_model_fixture.h): batches of
 * any bit pattern, a saved model, observe calls that name what failed, a
 * replay that records what it is handed, and checks of a replay range and a
 * snapshot. Over store_fixture.h (the back end under test, the temporary
 * directory, the groups of a program, the raw connection).
 *
 * Header-only (static inline), as store_fixture.h: the benchmarks link every
 * support object of tests/unit without cmocka or the store library. Each
 * test program keeps its own random stream. Include after cmocka.h. */
#ifndef GP_STORE_OBSERVE_FIXTURE_H
#define GP_STORE_OBSERVE_FIXTURE_H

#include "tests/unit/store_fixture.h"

/* ---- helpers: data (the raw connection is store_fixture.h's) ------------------ */

static uint64_t rng_state = 0x2545F4914F6CDD1Du;

/* Any bit pattern but a few special ones: full mantissas, -0, subnormals,
 * infinities and a NaN with a payload, so that a copy that is not bit for
 * bit shows. */
static inline double rand_bits(void)
{
    uint64_t u = sf_xorshift64(&rng_state);
    switch (u % 16) {
    case 0: u = 0x8000000000000000u; break; /* -0.0 */
    case 1: u = 0x0000000000000001u; break; /* smallest subnormal */
    case 2: u = 0x7FF0000000000000u; break; /* +inf */
    case 3: u = 0x7FF8DEADBEEF0001u; break; /* a NaN with a payload */
    default: u &= 0xBFFFFFFFFFFFFFFFu; break; /* finite: clear the top exponent bit */
    }
    double x;
    memcpy(&x, &u, sizeof x);
    return x;
}

static inline void put_bits(gp_state *st, const char *name, size_t rows, size_t cols)
{
    sf_put_generated(st, name, rows, cols, rand_bits);
}

/* A batch of k rows of width d with one output: X (k x d), y (k x 1). */
static inline void make_batch(gp_state *b, size_t k, size_t d)
{
    gp_state_init(b);
    put_bits(b, "X", k, d);
    put_bits(b, "y", k, 1);
}

/* A deep copy (the store's callback gets arrays it owns). */
static inline void copy_state(gp_state *dst, const gp_state *src)
{
    gp_error err;
    gp_state_init(dst);
    for (size_t i = 0; i < src->count; i++) {
        const gp_named_array *a = &src->arrays[i];
        assert_int_equal(gp_state_put(dst, a->name, a->rows, a->cols, a->data, &err), GP_OK);
    }
}

/* A fitted version of name (one array), n_train 10, input_dim 4. */
static inline int64_t save_model(gp_store *s, const char *name)
{
    gp_state st;
    gp_state_init(&st);
    put_bits(&st, "alpha", 10, 1);
    gp_model_meta m;
    gp_error err;
    if (gp_store_save(s, name, "exact", "{\"kernel\":\"rbf\"}", "{\"lml\":-1.5}", 10, 4, &st, &m,
                      &err))
        fail_msg("save %s: %s", name, err.message);
    gp_state_free(&st);
    int64_t id = m.id;
    gp_model_meta_free(&m);
    return id;
}

static inline int observe(gp_store *s, int64_t id, uint64_t expected, const gp_state *batch,
                   size_t n_after, const gp_state *snap, gp_error *err)
{
    uint64_t seq = 99;
    int rc = gp_store_observe(s, id, expected, batch, n_after, snap, &seq, err);
    if (rc == GP_OK)
        assert_int_equal(seq, expected + 1);
    else
        assert_int_equal(seq, 0);
    return rc;
}

static inline void observe_ok(gp_store *s, int64_t id, uint64_t expected, const gp_state *batch,
                       size_t n_after, const gp_state *snap)
{
    gp_error err;
    if (observe(s, id, expected, batch, n_after, snap, &err))
        fail_msg("observe entry %llu: %s", (unsigned long long)expected + 1, err.message);
}

/* What a replay saw: the entries' numbers and copies of their arrays. */
typedef struct seen {
    uint64_t seq[512];
    gp_state batch[512];
    size_t n;
    uint64_t fail_at; /* return fail_code at this entry (0: never) */
    int fail_code;
} seen;

static inline int record(void *ctx, uint64_t seq, const gp_state *batch, gp_error *err)
{
    seen *s = ctx;
    if (seq == s->fail_at)
        return gp_error_set(err, s->fail_code, "test", "stop at %llu", (unsigned long long)seq);
    assert_true(s->n < 512);
    s->seq[s->n] = seq;
    copy_state(&s->batch[s->n], batch);
    s->n++;
    return GP_OK;
}

static inline void seen_free(seen *s)
{
    for (size_t i = 0; i < s->n; i++)
        gp_state_free(&s->batch[i]);
    s->n = 0;
}

static inline uint64_t meta_obs_seq(gp_store *s, const char *name, size_t *n_train)
{
    gp_model_meta m;
    gp_error err;
    assert_int_equal(gp_store_meta_brief(s, name, 0, &m, &err), GP_OK);
    if (n_train)
        *n_train = m.n_train;
    return m.obs_seq;
}

/* A store on file with one fitted version of model (save_model); path, when
 * not NULL (256 bytes), gets the file's path for the raw connection. */
static inline gp_store *open_with_model(const char *file, const char *model, char *path, int64_t *id)
{
    if (path)
        sf_db_path(path, 256, file);
    gp_store *s = sf_open_store(file);
    *id = save_model(s, model);
    return s;
}

/* A replay of the entries after..upto delivers n of them, entry i equal to
 * want[i] where want and want[i] are not NULL. */
static inline void expect_replay(gp_store *s, int64_t id, uint64_t after, uint64_t upto, size_t n,
                          const gp_state *const *want)
{
    seen sn = {.n = 0};
    gp_error err;
    assert_int_equal(gp_store_observations(s, id, after, upto, record, &sn, &err), GP_OK);
    assert_int_equal(sn.n, n);
    for (size_t i = 0; want && i < n; i++)
        if (want[i])
            assert_true(sf_states_equal(&sn.batch[i], want[i]));
    seen_free(&sn);
}

/* The snapshot loads, follows entry at and (when want is not NULL) equals want. */
static inline void expect_snapshot(gp_store *s, int64_t id, uint64_t at, const gp_state *want)
{
    gp_state got;
    gp_state_init(&got);
    uint64_t got_at = 0;
    gp_error err;
    assert_int_equal(gp_store_load_snapshot(s, id, &got, &got_at, &err), GP_OK);
    assert_int_equal(got_at, at);
    if (want)
        assert_true(sf_states_equal(&got, want));
    gp_state_free(&got);
}

#endif
