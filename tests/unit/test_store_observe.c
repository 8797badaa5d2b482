/* Unit tests for the observation log and snapshots of store/ (store.h, "online
 * models"; docs/design/storage.md): schema version 3 and the migration from a
 * version 2 file, append and replay (order, bit-identical contents, ranges,
 * the callback's errors), conflicts on a stale expected_seq (one handle, two
 * handles, racing threads), snapshots (replace, load, append), obs_seq and
 * n_train in meta, meta_brief and list, the cascade on delete, writes that
 * fail leaving nothing (refused arguments, an abort inside the transaction, a
 * process killed mid-write), parts splitting, and corrupt logs and snapshots.
 *
 * GP_STORE_OBSERVE_BENCH=1 adds a timing run (test_observe_timing) that
 * prints the cost of gp_store_observe and asserts nothing on time.
 *
 * The tests of what every back end does alike run on SQLite files (in a
 * directory made with mkdtemp under /tmp, removed by the group teardown) and
 * again on PostgreSQL when GPSERVE_TEST_PG_URL names a server (one schema per
 * database name; store_fixture.h); those of SQLite's own schema, migration,
 * triggers and in-memory mode on SQLite alone. A raw connection inspects and
 * corrupts the data behind the store's back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "store/store.h"
#include "store/store_internal.h"

/* The SQLite handle of a store connection (these tests inspect it). */
#define SQ(conn) ((sqlite3 *)gp_db_sqlite_handle((conn)->db))
#include "tests/unit/store_fixture.h"

static int group_setup(void **state)
{
    (void)state;
    return sf_setup_sqlite("gpobs-test");
}

static int group_setup_pg(void **state)
{
    (void)state;
    return sf_setup_pg("gpobs-test");
}

/* ---- helpers: data (the raw connection is store_fixture.h's) ------------------ */

static uint64_t rng_state = 0x2545F4914F6CDD1Du;

/* Any bit pattern but a few special ones: full mantissas, -0, subnormals,
 * infinities and a NaN with a payload, so that a copy that is not bit for
 * bit shows. */
static double rand_bits(void)
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

static void put_bits(gp_state *st, const char *name, size_t rows, size_t cols)
{
    sf_put_generated(st, name, rows, cols, rand_bits);
}

/* A batch of k rows of width d with one output: X (k x d), y (k x 1). */
static void make_batch(gp_state *b, size_t k, size_t d)
{
    gp_state_init(b);
    put_bits(b, "X", k, d);
    put_bits(b, "y", k, 1);
}

/* A deep copy (the store's callback gets arrays it owns). */
static void copy_state(gp_state *dst, const gp_state *src)
{
    gp_error err;
    gp_state_init(dst);
    for (size_t i = 0; i < src->count; i++) {
        const gp_named_array *a = &src->arrays[i];
        assert_int_equal(gp_state_put(dst, a->name, a->rows, a->cols, a->data, &err), GP_OK);
    }
}

/* A fitted version of name (one array), n_train 10, input_dim 4. */
static int64_t save_model(gp_store *s, const char *name)
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

static int observe(gp_store *s, int64_t id, uint64_t expected, const gp_state *batch,
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

static void observe_ok(gp_store *s, int64_t id, uint64_t expected, const gp_state *batch,
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

static int record(void *ctx, uint64_t seq, const gp_state *batch, gp_error *err)
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

static void seen_free(seen *s)
{
    for (size_t i = 0; i < s->n; i++)
        gp_state_free(&s->batch[i]);
    s->n = 0;
}

static uint64_t meta_obs_seq(gp_store *s, const char *name, size_t *n_train)
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
static gp_store *open_with_model(const char *file, const char *model, char *path, int64_t *id)
{
    if (path)
        sf_db_path(path, 256, file);
    gp_store *s = sf_open_store(file);
    *id = save_model(s, model);
    return s;
}

/* A replay of the entries after..upto delivers n of them, entry i equal to
 * want[i] where want and want[i] are not NULL. */
static void expect_replay(gp_store *s, int64_t id, uint64_t after, uint64_t upto, size_t n,
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
static void expect_snapshot(gp_store *s, int64_t id, uint64_t at, const gp_state *want)
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

/* ---- schema ----------------------------------------------------------------- */

static void test_schema_v3(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "schema.db");
    gp_store *s = sf_open_store("schema.db");
    assert_int_equal(sf_raw_int(path, "PRAGMA user_version", NULL), GP_STORE_SCHEMA_VERSION);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM pragma_table_info('models')"
                                   " WHERE name = 'obs_seq' AND \"notnull\" = 1"
                                   " AND dflt_value = '0'", NULL),
                     1);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM pragma_foreign_key_list('observations')"
                                   " WHERE \"table\" = 'models' AND on_delete = 'CASCADE'", NULL),
                     1);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM pragma_foreign_key_list('snapshots')"
                                   " WHERE \"table\" = 'models' AND on_delete = 'CASCADE'", NULL),
                     1);
    /* The primary keys lead with model_id (the cascade and every lookup). */
    assert_int_equal(sf_raw_int(path, "SELECT group_concat(name, ',') = 'model_id,seq,key,part'"
                                   " FROM (SELECT name FROM pragma_table_info('observations')"
                                   " WHERE pk > 0 ORDER BY pk)", NULL),
                     1);
    assert_int_equal(sf_raw_int(path, "SELECT group_concat(name, ',') = 'model_id,key,part'"
                                   " FROM (SELECT name FROM pragma_table_info('snapshots')"
                                   " WHERE pk > 0 ORDER BY pk)", NULL),
                     1);
    /* Foreign keys are on, on every connection; the readers cannot write. */
    gp_store_conn *conns[2 + GP_STORE_READERS] = {s->w, s->log};
    for (size_t i = 0; i < s->n_readers; i++) {
        conns[2 + i] = s->readers[i];
        assert_ptr_not_equal(s->log, s->readers[i]);
    }
    assert_ptr_not_equal(s->log, s->w);
    for (size_t i = 0; i < 2 + s->n_readers; i++) {
        sqlite3_stmt *st = NULL;
        assert_int_equal(sqlite3_prepare_v2(SQ(conns[i]), "PRAGMA foreign_keys", -1, &st, NULL),
                         SQLITE_OK);
        assert_int_equal(sqlite3_step(st), SQLITE_ROW);
        assert_int_equal(sqlite3_column_int(st, 0), 1);
        sqlite3_finalize(st);
        if (i > 0)
            assert_int_equal(sqlite3_exec(SQ(conns[i]), "DELETE FROM observations", NULL, NULL,
                                          NULL) & 0xff,
                             SQLITE_READONLY);
    }
    gp_store_close(s);

    /* A newer schema is still refused (and the file left alone). */
    sf_raw_script(path, "PRAGMA user_version = 99");
    gp_error err;
    gp_store *s2 = (gp_store *)&s2;
    assert_int_equal(gp_store_open(path, &s2, &err), GP_ENOTREADY);
    assert_null(s2);
    assert_non_null(strstr(err.message, "schema version 99"));
    assert_int_equal(sf_raw_int(path, "PRAGMA user_version", NULL), 99);
}

/* A file written by schema version 2 (made here with that schema's SQL, a
 * model with its arrays and an ended job) migrates to 3 on open: the model
 * loads as before, with an empty log, and takes observations. */
static void test_migration_from_v2(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "v2.db");
    sf_raw_script(path,
             "PRAGMA journal_mode = WAL;"
             "CREATE TABLE models(id INTEGER PRIMARY KEY, name TEXT NOT NULL,"
             " version INTEGER NOT NULL, method TEXT NOT NULL, spec TEXT NOT NULL,"
             " info TEXT NOT NULL, n_train INTEGER, input_dim INTEGER, created_at TEXT,"
             " UNIQUE(name, version));"
             "CREATE TABLE arrays(model_id INTEGER REFERENCES models(id) ON DELETE CASCADE,"
             " key TEXT, part INTEGER NOT NULL DEFAULT 0, rows INTEGER, cols INTEGER,"
             " data BLOB, PRIMARY KEY(model_id, key, part));"
             "CREATE TABLE jobs(id TEXT PRIMARY KEY, model_name TEXT, status TEXT,"
             " progress TEXT, error TEXT, result TEXT, created_at TEXT, updated_at TEXT,"
             " request TEXT, owner TEXT, lease_until REAL,"
             " attempts INTEGER NOT NULL DEFAULT 0,"
             " cancel_requested INTEGER NOT NULL DEFAULT 0);"
             "CREATE TABLE job_arrays(job_id TEXT NOT NULL REFERENCES jobs(id) ON DELETE"
             " CASCADE, key TEXT, part INTEGER NOT NULL DEFAULT 0, rows INTEGER,"
             " cols INTEGER, data BLOB, PRIMARY KEY(job_id, key, part));"
             "CREATE INDEX jobs_active ON jobs(lease_until) WHERE status IN ('queued',"
             " 'running');"
             "CREATE INDEX jobs_ended ON jobs(updated_at) WHERE status IN ('succeeded',"
             " 'failed', 'cancelled');"
             /* 1.0 and 2.0 little-endian */
             "INSERT INTO models VALUES(7, 'old', 1, 'exact', '{}', '{}', 2, 1,"
             " '2026-01-01T00:00:00Z');"
             "INSERT INTO arrays VALUES(7, 'w', 0, 2, 1,"
             " x'000000000000F03F0000000000000040');"
             "INSERT INTO jobs(id, model_name, status) VALUES('j1', 'old', 'succeeded');"
             "PRAGMA user_version = 2;");
    gp_store *s = sf_open_store("v2.db");
    assert_int_equal(sf_raw_int(path, "PRAGMA user_version", NULL), GP_STORE_SCHEMA_VERSION);
    gp_model_meta m;
    gp_error err;
    assert_int_equal(gp_store_meta(s, "old", 0, &m, &err), GP_OK);
    assert_int_equal(m.id, 7);
    assert_int_equal(m.obs_seq, 0);
    assert_int_equal(m.n_train, 2);
    assert_string_equal(m.created_at, "2026-01-01T00:00:00Z");
    gp_model_meta_free(&m);
    gp_state st;
    gp_state_init(&st);
    const double *w;
    assert_int_equal(gp_store_load_state(s, 7, &st, &err), GP_OK);
    assert_int_equal(gp_state_get(&st, "w", 2, 1, &w, &err), GP_OK);
    assert_true(w[0] == 1.0 && w[1] == 2.0);
    gp_state_free(&st);
    gp_job_row job;
    assert_int_equal(gp_store_job_get(s, "j1", &job, &err), GP_OK);
    assert_string_equal(job.status, "succeeded");
    gp_job_row_free(&job);
    uint64_t at = 5;
    gp_state_init(&st);
    assert_int_equal(gp_store_load_snapshot(s, 7, &st, &at, &err), GP_OK);
    assert_int_equal(at, 0);
    gp_state b;
    make_batch(&b, 1, 1);
    observe_ok(s, 7, 0, &b, 3, NULL);
    assert_int_equal(meta_obs_seq(s, "old", NULL), 1);
    gp_state_free(&b);
    gp_store_close(s);
    /* Opened again: current, nothing to do. */
    s = sf_open_store("v2.db");
    assert_int_equal(sf_raw_int(path, "PRAGMA user_version", NULL), GP_STORE_SCHEMA_VERSION);
    assert_int_equal(meta_obs_seq(s, "old", NULL), 1);
    gp_store_close(s);
}

/* ---- append and replay ------------------------------------------------------ */

static void test_append_and_replay(void **state)
{
    (void)state;
    int64_t id;
    gp_store *s = open_with_model("append.db", "m", NULL, &id);
    enum { N = 60 };
    gp_state sent[N];
    size_t n_train = 10;
    for (int i = 0; i < N; i++) {
        make_batch(&sent[i], 1 + (size_t)i % 5, 4);
        n_train += 1 + (size_t)i % 5;
        observe_ok(s, id, (uint64_t)i, &sent[i], n_train, NULL);
    }
    size_t nt = 0;
    assert_int_equal(meta_obs_seq(s, "m", &nt), N);
    assert_int_equal(nt, n_train);

    /* The whole log, in order, bit for bit. */
    seen sn = {.n = 0};
    gp_error err;
    assert_int_equal(gp_store_observations(s, id, 0, N, record, &sn, &err), GP_OK);
    assert_int_equal(sn.n, N);
    for (int i = 0; i < N; i++) {
        assert_int_equal(sn.seq[i], (uint64_t)i + 1);
        assert_true(sf_states_equal(&sn.batch[i], &sent[i]));
    }
    seen_free(&sn);
    /* A range: after 20 up to 35. */
    assert_int_equal(gp_store_observations(s, id, 20, 35, record, &sn, &err), GP_OK);
    assert_int_equal(sn.n, 15);
    for (int i = 0; i < 15; i++) {
        assert_int_equal(sn.seq[i], (uint64_t)i + 21);
        assert_true(sf_states_equal(&sn.batch[i], &sent[i + 20]));
    }
    seen_free(&sn);
    /* An empty range calls nothing. */
    assert_int_equal(gp_store_observations(s, id, N, N, record, &sn, &err), GP_OK);
    assert_int_equal(sn.n, 0);
    /* The callback's error stops the replay and is returned. */
    sn.fail_at = 7;
    sn.fail_code = GP_EUNSUPPORTED;
    assert_int_equal(gp_store_observations(s, id, 0, N, record, &sn, &err), GP_EUNSUPPORTED);
    assert_string_equal(err.field, "test");
    assert_int_equal(sn.n, 6);
    seen_free(&sn);
    sn.fail_at = 0;
    /* Bad ranges and unknown rows. */
    assert_int_equal(gp_store_observations(s, id, 5, 4, record, &sn, &err), GP_EINVAL);
    assert_string_equal(err.field, "after");
    assert_int_equal(gp_store_observations(s, id, 0, N + 1, record, &sn, &err), GP_EINVAL);
    assert_string_equal(err.field, "upto");
    assert_int_equal(gp_store_observations(s, id, 0, N, NULL, &sn, &err), GP_EINVAL);
    assert_int_equal(gp_store_observations(s, id + 100, 0, 0, record, &sn, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "name");
    assert_int_equal(observe(s, id + 100, 0, &sent[0], 1, NULL, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "name");
    gp_state st;
    gp_state_init(&st);
    uint64_t at = 0;
    assert_int_equal(gp_store_load_snapshot(s, id + 100, &st, &at, &err), GP_ENOTFOUND);
    assert_int_equal(sn.n, 0);
    /* The fitted arrays are untouched by the log. */
    assert_int_equal(gp_store_load_state(s, id, &st, &err), GP_OK);
    assert_int_equal(st.count, 1);
    assert_non_null(gp_state_find(&st, "alpha"));
    gp_state_free(&st);
    for (int i = 0; i < N; i++)
        gp_state_free(&sent[i]);
    gp_store_close(s);
}

/* A stale expected_seq is a conflict that writes nothing. */
static void test_conflict(void **state)
{
    (void)state;
    char path[256];
    int64_t id;
    gp_store *s = open_with_model("conflict.db", "c", path, &id);
    gp_state a, b;
    make_batch(&a, 2, 4);
    make_batch(&b, 3, 4);
    gp_error err;
    observe_ok(s, id, 0, &a, 12, NULL);
    assert_int_equal(observe(s, id, 0, &b, 15, &b, &err), GP_ECONFLICT);
    assert_string_equal(err.field, "name");
    assert_int_equal(observe(s, id, 5, &b, 15, NULL, &err), GP_ECONFLICT);
    size_t nt = 0;
    assert_int_equal(meta_obs_seq(s, "c", &nt), 1);
    assert_int_equal(nt, 12);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM observations WHERE seq <> 1", NULL), 0);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM snapshots", NULL), 0);
    /* Caught up, it goes in. */
    observe_ok(s, id, 1, &b, 15, NULL);
    assert_int_equal(meta_obs_seq(s, "c", &nt), 2);
    assert_int_equal(nt, 15);
    gp_state_free(&a);
    gp_state_free(&b);
    gp_store_close(s);
}

/* ---- snapshots -------------------------------------------------------------- */

static void test_snapshots(void **state)
{
    (void)state;
    char path[256];
    int64_t id;
    gp_store *s = open_with_model("snap.db", "s", path, &id);
    gp_error err;
    gp_state b, got;
    uint64_t at = 99;

    /* None yet: state untouched, *seq 0. */
    gp_state_init(&got);
    assert_int_equal(gp_state_put_scalar(&got, "mine", 1.5, &err), GP_OK);
    assert_int_equal(gp_store_load_snapshot(s, id, &got, &at, &err), GP_OK);
    assert_int_equal(at, 0);
    assert_int_equal(got.count, 1);

    gp_state s1, s2;
    gp_state_init(&s1);
    put_bits(&s1, "chol_packed", 55, 1);
    put_bits(&s1, "X_train", 4, 12);
    put_bits(&s1, "alpha", 12, 1);
    gp_state_init(&s2);
    put_bits(&s2, "chol_packed", 78, 1);
    put_bits(&s2, "alpha", 13, 1);
    assert_int_equal(gp_state_put(&s2, "empty", 0, 3, NULL, &err), GP_OK);
    for (uint64_t e = 0; e < 6; e++) {
        make_batch(&b, 1, 4);
        observe_ok(s, id, e, &b, 11 + e, e == 2 ? &s1 : e == 4 ? &s2 : NULL);
        gp_state_free(&b);
        gp_state tmp;
        gp_state_init(&tmp);
        assert_int_equal(gp_store_load_snapshot(s, id, &tmp, &at, &err), GP_OK);
        if (e < 2) {
            assert_int_equal(at, 0);
            assert_int_equal(tmp.count, 0);
        } else if (e < 4) {
            assert_int_equal(at, 3);
            assert_true(sf_states_equal(&tmp, &s1));
        } else {
            /* Replaced whole: nothing of s1 is left (X_train). */
            assert_int_equal(at, 5);
            assert_true(sf_states_equal(&tmp, &s2));
        }
        gp_state_free(&tmp);
    }
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM snapshots", NULL), 3);
    assert_int_equal(sf_raw_int(path, "SELECT count(DISTINCT seq) FROM snapshots", NULL), 1);
    /* Appended to a state that holds arrays; a name clash is refused. */
    assert_int_equal(gp_store_load_snapshot(s, id, &got, &at, &err), GP_OK);
    assert_int_equal(at, 5);
    assert_int_equal(got.count, 4);
    assert_non_null(gp_state_find(&got, "mine"));
    assert_int_equal(gp_store_load_snapshot(s, id, &got, &at, &err), GP_EINVAL);
    assert_int_equal(got.count, 4); /* unchanged */
    gp_state_free(&got);
    gp_state_free(&s1);
    gp_state_free(&s2);
    gp_store_close(s);
}

/* ---- meta, list, versions ------------------------------------------------- */

static void test_meta_and_list(void **state)
{
    (void)state;
    gp_store *s = sf_open_store("meta.db");
    const int64_t v1 = save_model(s, "online");
    save_model(s, "zeta");
    gp_state b;
    make_batch(&b, 3, 4);
    observe_ok(s, v1, 0, &b, 13, NULL);
    observe_ok(s, v1, 1, &b, 16, NULL);
    gp_model_meta m;
    gp_error err;
    assert_int_equal(gp_store_meta(s, "online", 1, &m, &err), GP_OK);
    assert_int_equal(m.obs_seq, 2);
    assert_int_equal(m.n_train, 16);
    assert_int_equal(m.input_dim, 4);
    assert_non_null(m.spec);
    gp_model_meta_free(&m);
    assert_int_equal(gp_store_meta_brief(s, "online", 1, &m, &err), GP_OK);
    assert_int_equal(m.obs_seq, 2);
    assert_int_equal(m.n_train, 16);
    assert_int_equal(m.id, v1);
    assert_string_equal(m.method, "exact");
    assert_null(m.spec);
    assert_null(m.info);
    gp_model_meta_free(&m);

    gp_model_meta *list;
    size_t count;
    assert_int_equal(gp_store_list(s, &list, &count, &err), GP_OK);
    assert_int_equal(count, 2);
    assert_string_equal(list[0].name, "online");
    assert_int_equal(list[0].obs_seq, 2);
    assert_int_equal(list[0].n_train, 16);
    assert_int_equal(list[1].obs_seq, 0);
    gp_model_meta_free_array(list, count);

    /* A new version starts its own, empty log; v1's goes on alone. */
    const int64_t v2 = save_model(s, "online");
    assert_int_equal(meta_obs_seq(s, "online", NULL), 0);
    observe_ok(s, v2, 0, &b, 13, NULL);
    observe_ok(s, v1, 2, &b, 19, NULL);
    assert_int_equal(gp_store_meta_brief(s, "online", 1, &m, &err), GP_OK);
    assert_int_equal(m.obs_seq, 3);
    assert_int_equal(m.n_train, 19);
    assert_int_equal(gp_store_meta_brief(s, "online", 2, &m, &err), GP_OK);
    assert_int_equal(m.obs_seq, 1);
    assert_int_equal(m.n_train, 13);
    assert_int_equal(gp_store_list(s, &list, &count, &err), GP_OK);
    assert_int_equal(list[0].version, 2);
    assert_int_equal(list[0].obs_seq, 1);
    gp_model_meta_free_array(list, count);
    gp_state_free(&b);
    gp_store_close(s);
}

/* Deleting a model removes its versions' logs and snapshots (cascade). */
static void test_cascade_delete(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "cascade.db");
    gp_store *s = sf_open_store("cascade.db");
    int64_t ids[3] = {save_model(s, "gone"), save_model(s, "gone"), save_model(s, "kept")};
    gp_state b;
    make_batch(&b, 2, 4);
    for (int i = 0; i < 3; i++)
        for (uint64_t e = 0; e < 4; e++)
            observe_ok(s, ids[i], e, &b, 12, e == 2 ? &b : NULL);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM observations", NULL), 3 * 4 * 2);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM snapshots", NULL), 3 * 2);
    gp_error err;
    assert_int_equal(gp_store_delete(s, "gone", &err), GP_OK);
    for (int i = 0; i < 2; i++) {
        assert_int_equal(
            sf_raw_intf(path, "SELECT count(*) FROM observations WHERE model_id = %lld",
                     (long long)ids[i]),
            0);
        assert_int_equal(sf_raw_intf(path, "SELECT count(*) FROM snapshots WHERE model_id = %lld",
                                  (long long)ids[i]),
                         0);
    }
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM observations", NULL), 4 * 2);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM snapshots", NULL), 2);
    seen sn = {.n = 0};
    assert_int_equal(gp_store_observations(s, ids[2], 0, 4, record, &sn, &err), GP_OK);
    assert_int_equal(sn.n, 4);
    seen_free(&sn);
    /* A version saved after the delete (its row id may be reused) starts empty. */
    const int64_t again = save_model(s, "gone");
    assert_int_equal(meta_obs_seq(s, "gone", NULL), 0);
    gp_state st;
    gp_state_init(&st);
    uint64_t at = 9;
    assert_int_equal(gp_store_load_snapshot(s, again, &st, &at, &err), GP_OK);
    assert_int_equal(at, 0);
    assert_int_equal(st.count, 0);
    observe_ok(s, again, 0, &b, 12, NULL);
    gp_state_free(&b);
    gp_store_close(s);
}

/* ---- several writers -------------------------------------------------------- */

/* Two handles on one file (WAL): what one appends, the other sees at once,
 * and the stale one of them gets a conflict. */
static void test_two_handles(void **state)
{
    (void)state;
    gp_store *a = sf_open_store("two.db");
    gp_store *b = sf_open_store("two.db");
    const int64_t id = save_model(a, "shared");
    gp_state x, y;
    make_batch(&x, 1, 4);
    make_batch(&y, 2, 4);
    observe_ok(a, id, 0, &x, 11, NULL);
    assert_int_equal(meta_obs_seq(b, "shared", NULL), 1);
    gp_error err;
    expect_replay(b, id, 0, 1, 1, (const gp_state *[]){&x});
    observe_ok(b, id, 1, &y, 13, &y);
    assert_int_equal(observe(a, id, 1, &x, 12, NULL, &err), GP_ECONFLICT);
    size_t nt = 0;
    assert_int_equal(meta_obs_seq(a, "shared", &nt), 2);
    assert_int_equal(nt, 13);
    expect_snapshot(a, id, 2, &y);
    expect_replay(a, id, 1, 2, 1, (const gp_state *[]){&y});
    gp_state_free(&x);
    gp_state_free(&y);
    gp_store_close(a);
    gp_store_close(b);
}

/* Writers on their own handles race on one version, each catching up after a
 * conflict: every batch goes in exactly once, each writer's in its order. */
typedef struct racer {
    const char *file;
    int64_t id;
    int who, count, conflicts;
    pthread_barrier_t *start; /* all handles open before the first append */
} racer;

enum { RACERS = 4, RACES = 25 };

static void *racer_main(void *arg)
{
    racer *r = arg;
    gp_store *s = sf_open_store(r->file);
    pthread_barrier_wait(r->start);
    gp_error err;
    for (int i = 0; i < r->count; i++) {
        const double tag[2] = {(double)r->who, (double)i};
        gp_state b;
        gp_state_init(&b);
        assert_int_equal(gp_state_put(&b, "X", 1, 2, tag, &err), GP_OK);
        for (;;) {
            gp_model_meta m;
            assert_int_equal(gp_store_meta_brief(s, "race", 0, &m, &err), GP_OK);
            int rc = gp_store_observe(s, r->id, m.obs_seq, &b, m.n_train + 1, NULL, NULL, &err);
            if (rc == GP_OK)
                break;
            assert_int_equal(rc, GP_ECONFLICT);
            r->conflicts++;
        }
        gp_state_free(&b);
    }
    gp_store_close(s);
    return NULL;
}

static int check_race_entry(void *ctx, uint64_t seq, const gp_state *batch, gp_error *err)
{
    int *next = ctx; /* next expected index per writer */
    (void)seq;
    const double *x;
    int rc = gp_state_get(batch, "X", 1, 2, &x, err);
    if (rc)
        return rc;
    const int who = (int)x[0], i = (int)x[1];
    assert_true(who >= 0 && who < RACERS);
    assert_int_equal(i, next[who]);
    next[who]++;
    return GP_OK;
}

static void test_racing_writers(void **state)
{
    (void)state;
    int64_t id;
    gp_store *s = open_with_model("race.db", "race", NULL, &id);
    pthread_t th[RACERS];
    racer r[RACERS];
    pthread_barrier_t start;
    assert_int_equal(pthread_barrier_init(&start, NULL, RACERS), 0);
    for (int i = 0; i < RACERS; i++) {
        r[i] = (racer){.file = "race.db", .id = id, .who = i, .count = RACES, .conflicts = 0,
                       .start = &start};
        assert_int_equal(pthread_create(&th[i], NULL, racer_main, &r[i]), 0);
    }
    for (int i = 0; i < RACERS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    size_t nt = 0;
    assert_int_equal(meta_obs_seq(s, "race", &nt), RACERS * RACES);
    assert_int_equal(nt, 10 + RACERS * RACES);
    int next[RACERS] = {0};
    gp_error err;
    assert_int_equal(
        gp_store_observations(s, id, 0, RACERS * RACES, check_race_entry, next, &err), GP_OK);
    for (int i = 0; i < RACERS; i++)
        assert_int_equal(next[i], RACES);
    gp_store_close(s);
}

/* ---- failures leave nothing -------------------------------------------------- */

static void assert_untouched(const char *path, gp_store *s, int64_t id, uint64_t entries,
                             size_t n_train, uint64_t snap_at, const gp_state *snap)
{
    size_t nt = 0;
    assert_int_equal(meta_obs_seq(s, "f", &nt), entries);
    assert_int_equal(nt, n_train);
    assert_int_equal(sf_raw_intf(path, "SELECT count(*) FROM observations WHERE seq > %llu",
                              (unsigned long long)entries),
                     0);
    expect_snapshot(s, id, snap_at, snap);
}

static void test_failed_writes_leave_nothing(void **state)
{
    (void)state;
    char path[256];
    int64_t id;
    gp_store *s = open_with_model("fail.db", "f", path, &id);
    gp_state b, snap;
    make_batch(&b, 2, 4);
    gp_state_init(&snap);
    put_bits(&snap, "state", 30, 2);
    observe_ok(s, id, 0, &b, 12, &snap);
    gp_error err;

    /* Refused before writing: no batch, an empty one, an array without data
     * (in the batch or in the snapshot), an empty snapshot. */
    assert_int_equal(observe(s, id, 1, NULL, 13, NULL, &err), GP_EINVAL);
    assert_string_equal(err.field, "batch");
    gp_state empty;
    gp_state_init(&empty);
    assert_int_equal(observe(s, id, 1, &empty, 13, NULL, &err), GP_EINVAL);
    assert_int_equal(observe(s, id, 1, &b, 13, &empty, &err), GP_EINVAL);
    assert_string_equal(err.field, "snapshot");
    gp_state holey;
    copy_state(&holey, &b);
    double *keep = holey.arrays[1].data;
    holey.arrays[1].data = NULL; /* "y" */
    assert_int_equal(observe(s, id, 1, &holey, 13, NULL, &err), GP_EINVAL);
    assert_string_equal(err.field, "y");
    assert_int_equal(observe(s, id, 1, &b, 13, &holey, &err), GP_EINVAL);
    assert_string_equal(err.field, "y");
    holey.arrays[1].data = keep;
    gp_state_free(&holey);
    assert_untouched(path, s, id, 1, 12, 1, &snap);

    /* An abort inside the transaction, after the entry's first array (a
     * trigger refuses "y"), and after the whole entry and the counts (one
     * refuses the snapshot's rows): the log, the row and the old snapshot are
     * as they were. */
    sf_raw_script(path, "CREATE TRIGGER no_y BEFORE INSERT ON observations WHEN NEW.key = 'y'"
                   " BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;");
    int rc = observe(s, id, 1, &b, 13, NULL, &err);
    assert_true(rc < 0 && rc != GP_ECONFLICT);
    assert_non_null(strstr(err.message, "refused by the test"));
    assert_untouched(path, s, id, 1, 12, 1, &snap);
    sf_raw_script(path, "DROP TRIGGER no_y;"
                   "CREATE TRIGGER no_snap BEFORE INSERT ON snapshots"
                   " BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;");
    gp_state snap2;
    gp_state_init(&snap2);
    put_bits(&snap2, "state", 31, 2);
    rc = observe(s, id, 1, &b, 13, &snap2, &err);
    assert_true(rc < 0 && rc != GP_ECONFLICT);
    assert_untouched(path, s, id, 1, 12, 1, &snap);
    /* Without the trigger the same append goes in. */
    sf_raw_script(path, "DROP TRIGGER no_snap;");
    observe_ok(s, id, 1, &b, 13, &snap2);
    assert_untouched(path, s, id, 2, 13, 2, &snap2);
    gp_state_free(&b);
    gp_state_free(&snap);
    gp_state_free(&snap2);
    gp_store_close(s);
}

/* A process killed (SIGKILL) while it appends, again and again: the file
 * opens, and its log, counts and snapshot agree with each other. Every
 * entry's contents follow from its number, so each can be checked. */
enum { KILL_X_ROWS = 2048, KILL_SNAP = 65536 };

static void fill_entry(gp_state *b, uint64_t seq)
{
    gp_error err;
    gp_state_init(b);
    double *x = malloc(KILL_X_ROWS * 4 * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < KILL_X_ROWS * 4; i++)
        x[i] = (double)seq * 1e6 + (double)i;
    assert_int_equal(gp_state_put_owned(b, "X", KILL_X_ROWS, 4, x, &err), GP_OK);
    assert_int_equal(gp_state_put_scalar(b, "y", -(double)seq, &err), GP_OK);
}

static void fill_snapshot(gp_state *sn, uint64_t seq)
{
    gp_error err;
    gp_state_init(sn);
    double *x = malloc(KILL_SNAP * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < KILL_SNAP; i++)
        x[i] = (double)seq + 1e-6 * (double)i;
    assert_int_equal(gp_state_put_owned(sn, "S", KILL_SNAP, 1, x, &err), GP_OK);
}

static void appender_child(const char *file, int64_t id, int ready_fd)
{
    gp_store *s = NULL;
    char path[256];
    sf_db_path(path, sizeof path, file);
    gp_error err;
    if (gp_store_open(path, &s, &err))
        _exit(2);
    gp_store_set_part_bytes(s, 16384); /* many rows per entry: longer transactions */
    int told = 0;
    for (;;) {
        gp_model_meta m;
        if (gp_store_meta_brief(s, "k", 0, &m, &err))
            _exit(3);
        gp_state b, sn;
        fill_entry(&b, m.obs_seq + 1);
        const int with_snap = (m.obs_seq + 1) % 3 == 0;
        if (with_snap)
            fill_snapshot(&sn, m.obs_seq + 1);
        if (gp_store_observe(s, id, m.obs_seq, &b, 10 + KILL_X_ROWS * (m.obs_seq + 1),
                             with_snap ? &sn : NULL, NULL, &err))
            _exit(4);
        gp_state_free(&b);
        if (with_snap)
            gp_state_free(&sn);
        if (!told) {
            told = 1;
            if (write(ready_fd, "r", 1) != 1)
                _exit(5);
        }
    }
}

static int check_killed_entry(void *ctx, uint64_t seq, const gp_state *batch, gp_error *err)
{
    uint64_t *count = ctx;
    gp_state want;
    fill_entry(&want, seq);
    assert_true(sf_states_equal(batch, &want));
    gp_state_free(&want);
    (*count)++;
    (void)err;
    return GP_OK;
}

static void test_killed_writer(void **state)
{
    (void)state;
    char path[256];
    int64_t id;
    gp_store *s = open_with_model("killed.db", "k", path, &id);
    gp_store_close(s);
    uint64_t last = 0;
    for (int round = 0; round < 4; round++) {
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            appender_child("killed.db", id, fds[1]);
        }
        close(fds[1]);
        char c;
        assert_int_equal(read(fds[0], &c, 1), 1);
        close(fds[0]);
        struct timespec ts = {0, (long)(5 + 7 * round) * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status));

        s = sf_open_store("killed.db");
        size_t nt = 0;
        const uint64_t n = meta_obs_seq(s, "k", &nt);
        assert_true(n > last);
        assert_int_equal(nt, 10 + KILL_X_ROWS * n);
        assert_int_equal(sf_raw_intf(path, "SELECT count(*) FROM observations WHERE seq > %llu",
                                  (unsigned long long)n),
                         0);
        uint64_t count = 0;
        gp_error err;
        assert_int_equal(gp_store_observations(s, id, 0, n, check_killed_entry, &count, &err),
                         GP_OK);
        assert_int_equal(count, n);
        gp_state got, want;
        gp_state_init(&got);
        uint64_t at = 0;
        assert_int_equal(gp_store_load_snapshot(s, id, &got, &at, &err), GP_OK);
        assert_int_equal(at, n - n % 3);
        if (at > 0) {
            fill_snapshot(&want, at);
            assert_true(sf_states_equal(&got, &want));
            gp_state_free(&want);
        }
        gp_state_free(&got);
        gp_store_close(s);
        last = n;
    }
}

/* ---- parts and corruption ---------------------------------------------------- */

static void test_parts(void **state)
{
    (void)state;
    char path[256];
    int64_t id;
    gp_store *s = open_with_model("parts.db", "p", path, &id);
    gp_store_set_part_bytes(s, 64);
    gp_state b1, b2, snap;
    make_batch(&b1, 20, 4); /* X: 640 bytes = 10 parts; y: 160 bytes = 3 parts */
    gp_error err;
    gp_state_init(&b2);
    assert_int_equal(gp_state_put(&b2, "X", 0, 4, NULL, &err), GP_OK); /* empty: one part */
    put_bits(&b2, "y", 8, 1);                                         /* 64 bytes: one part */
    gp_state_init(&snap);
    put_bits(&snap, "big", 100, 3); /* 2400 bytes = 38 parts (the last of 32) */
    put_bits(&snap, "one", 1, 1);
    observe_ok(s, id, 0, &b1, 30, NULL);
    observe_ok(s, id, 1, &b2, 30, &snap);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM observations WHERE seq = 1 AND key = 'X'", NULL),
                     10);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM observations WHERE seq = 1 AND key = 'y'", NULL),
                     3);
    assert_int_equal(sf_raw_int(path, "SELECT max(length(data)) FROM observations", NULL), 64);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM observations WHERE seq = 2", NULL), 2);
    assert_int_equal(sf_raw_int(path, "SELECT length(data) FROM observations WHERE seq = 2 AND"
                                   " key = 'X'", NULL),
                     0);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM snapshots WHERE key = 'big'", NULL), 38);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM snapshots WHERE seq = 2", NULL), 39);
    seen sn = {.n = 0};
    expect_replay(s, id, 0, 2, 2, (const gp_state *[]){&b1, &b2});
    expect_snapshot(s, id, 2, &snap);
    /* Another handle with the default part size reads them as well. */
    gp_store *s2 = sf_open_store("parts.db");
    assert_int_equal(gp_store_observations(s2, id, 0, 2, record, &sn, &err), GP_OK);
    assert_true(sf_states_equal(&sn.batch[0], &b1));
    seen_free(&sn);
    gp_store_close(s2);
    gp_state_free(&b1);
    gp_state_free(&b2);
    gp_state_free(&snap);
    gp_store_close(s);
}

/* Expect a replay of the whole log to fail with GP_EDATA naming field after
 * delivering `delivered` entries. */
static void expect_replay_edata(gp_store *s, int64_t id, uint64_t n, const char *field,
                                size_t delivered)
{
    seen sn = {.n = 0};
    gp_error err;
    assert_int_equal(gp_store_observations(s, id, 0, n, record, &sn, &err), GP_EDATA);
    assert_string_equal(err.field, field);
    assert_int_equal(sn.n, delivered);
    seen_free(&sn);
}

static void expect_snapshot_edata(gp_store *s, int64_t id, const char *field)
{
    gp_state got;
    gp_state_init(&got);
    uint64_t at = 7;
    gp_error err;
    assert_int_equal(gp_store_load_snapshot(s, id, &got, &at, &err), GP_EDATA);
    assert_string_equal(err.field, field);
    assert_int_equal(at, 0);
    assert_int_equal(got.count, 0);
}

/* A missing, mis-shaped or short part of an entry or of the snapshot, a
 * missing entry, a snapshot whose rows disagree on their entry or follow one
 * the log does not have: GP_EDATA naming the array (or "seq", "snapshot"),
 * after the entries before the damage were delivered. */
static void test_corrupt(void **state)
{
    (void)state;
    char path[256];
    int64_t id;
    gp_store *s = open_with_model("corrupt.db", "c", path, &id);
    gp_store_set_part_bytes(s, 64);
    gp_state b, snap;
    make_batch(&b, 20, 4);
    gp_state_init(&snap);
    put_bits(&snap, "big", 100, 3);
    for (uint64_t e = 0; e < 4; e++)
        observe_ok(s, id, e, &b, 10, e == 3 ? &snap : NULL);
    expect_replay(s, id, 0, 4, 4, NULL);
    expect_snapshot(s, id, 4, &snap);

    /* Entry 3 lacks part 4 of X. */
    sf_raw_script(path, "UPDATE observations SET seq = 103 WHERE seq = 3 AND key = 'X' AND part = 4");
    expect_replay_edata(s, id, 4, "X", 2);
    sf_raw_script(path, "UPDATE observations SET seq = 3 WHERE seq = 103");
    expect_replay(s, id, 0, 4, 4, NULL);
    /* Entry 2's y has a part of another shape. */
    sf_raw_script(path, "UPDATE observations SET rows = 21 WHERE seq = 2 AND key = 'y' AND part = 1");
    expect_replay_edata(s, id, 4, "y", 1);
    sf_raw_script(path, "UPDATE observations SET rows = 20 WHERE seq = 2 AND key = 'y'");
    expect_replay(s, id, 0, 4, 4, NULL);
    /* Entry 2 is missing altogether. */
    sf_raw_script(path, "UPDATE observations SET seq = 102 WHERE seq = 2");
    expect_replay_edata(s, id, 4, "seq", 1);
    sf_raw_script(path, "UPDATE observations SET seq = 2 WHERE seq = 102");
    expect_replay(s, id, 0, 4, 4, NULL);

    /* The snapshot lacks part 5 of big. */
    sf_raw_script(path, "UPDATE snapshots SET part = 105 WHERE part = 5");
    expect_snapshot_edata(s, id, "big");
    sf_raw_script(path, "UPDATE snapshots SET part = 5 WHERE part = 105");
    expect_snapshot(s, id, 4, &snap);
    /* Its rows disagree on the entry it follows. */
    sf_raw_script(path, "UPDATE snapshots SET seq = 3 WHERE part = 7");
    expect_snapshot_edata(s, id, "snapshot");
    /* It follows an entry the log does not have. */
    sf_raw_script(path, "UPDATE snapshots SET seq = 5");
    expect_snapshot_edata(s, id, "snapshot");
    sf_raw_script(path, "UPDATE snapshots SET seq = 4");
    expect_snapshot(s, id, 4, &snap);

    /* Short parts (cut to 56 bytes). */
    sf_raw_script(path, "UPDATE observations SET data = substr(data, 1, 56) WHERE seq = 4 AND"
                   " key = 'y' AND part = 0");
    expect_replay_edata(s, id, 4, "y", 3);
    sf_raw_script(path, "UPDATE snapshots SET data = substr(data, 1, 56) WHERE part = 0");
    expect_snapshot_edata(s, id, "big");
    gp_state_free(&b);
    gp_state_free(&snap);
    gp_store_close(s);
}

/* ---- the replay's callback --------------------------------------------------- */

/* The callback may use the store (the replay holds the log reader only) and
 * the replay reads one snapshot of the file: an entry appended, or the model
 * deleted, while it runs changes nothing of what it delivers. */
typedef struct reentry {
    gp_store *s;
    int64_t id;
    const gp_state *batch;
    uint64_t delivered;
} reentry;

static int reenter(void *ctx, uint64_t seq, const gp_state *batch, gp_error *err)
{
    reentry *r = ctx;
    assert_true(sf_states_equal(batch, r->batch));
    r->delivered++;
    gp_model_meta m;
    if (seq == 1) {
        assert_int_equal(gp_store_meta_brief(r->s, "re", 0, &m, err), GP_OK);
        assert_int_equal(m.obs_seq, 3);
        observe_ok(r->s, r->id, 3, r->batch, 20, r->batch);
        assert_int_equal(gp_store_meta_brief(r->s, "re", 0, &m, err), GP_OK);
        assert_int_equal(m.obs_seq, 4);
        gp_state st;
        gp_state_init(&st);
        uint64_t at = 0;
        assert_int_equal(gp_store_load_snapshot(r->s, r->id, &st, &at, err), GP_OK);
        assert_int_equal(at, 4);
        gp_state_free(&st);
    } else if (seq == 2) {
        assert_int_equal(gp_store_delete(r->s, "re", err), GP_OK);
        assert_int_equal(gp_store_meta_brief(r->s, "re", 0, &m, err), GP_ENOTFOUND);
    }
    return GP_OK;
}

static void test_replay_callback_uses_store(void **state)
{
    (void)state;
    int64_t id;
    gp_store *s = open_with_model("reenter.db", "re", NULL, &id);
    gp_state b;
    make_batch(&b, 1, 4);
    for (uint64_t e = 0; e < 3; e++)
        observe_ok(s, id, e, &b, 11 + e, NULL);
    reentry r = {.s = s, .id = id, .batch = &b, .delivered = 0};
    gp_error err;
    assert_int_equal(gp_store_observations(s, id, 0, 3, reenter, &r, &err), GP_OK);
    assert_int_equal(r.delivered, 3);
    /* Deleted now: the next replay finds no row. */
    assert_int_equal(gp_store_observations(s, id, 0, 3, reenter, &r, &err), GP_ENOTFOUND);
    gp_state_free(&b);
    gp_store_close(s);
}

/* An in-memory database: one connection does everything. */
static void test_in_memory(void **state)
{
    (void)state;
    gp_store *s = NULL;
    gp_error err;
    assert_int_equal(gp_store_open(":memory:", &s, &err), GP_OK);
    assert_ptr_equal(s->log, s->w);
    const int64_t id = save_model(s, "mem");
    gp_state b;
    make_batch(&b, 3, 4);
    observe_ok(s, id, 0, &b, 13, NULL);
    observe_ok(s, id, 1, &b, 16, &b);
    assert_int_equal(observe(s, id, 1, &b, 16, NULL, &err), GP_ECONFLICT);
    seen sn = {.n = 0};
    expect_replay(s, id, 0, 2, 2, (const gp_state *[]){NULL, &b});
    expect_snapshot(s, id, 2, &b);
    assert_int_equal(gp_store_delete(s, "mem", &err), GP_OK);
    assert_int_equal(gp_store_observations(s, id, 0, 0, record, &sn, &err), GP_ENOTFOUND);
    gp_state_free(&b);
    gp_store_close(s);
}

/* ---- timing (GP_STORE_OBSERVE_BENCH=1; prints, asserts nothing on time) ---- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static long long file_bytes(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
}

/* n appends of a k = 1, d = 4 batch (with snap every snap_every-th, when
 * given) to a fresh version whose info text is info_bytes long; prints the
 * mean and percentiles of one call in microseconds. */
static void time_observes(gp_store *s, const char *name, const char *label, int n,
                          size_t info_bytes, const gp_state *snap, int snap_every)
{
    char *info = malloc(info_bytes + 1);
    assert_non_null(info);
    memset(info, 'x', info_bytes);
    info[0] = '"';
    info[info_bytes - 1] = '"';
    info[info_bytes] = '\0';
    gp_model_meta m;
    gp_error err;
    assert_int_equal(gp_store_save(s, name, "exact", "{}", info, 10, 4, NULL, &m, &err), GP_OK);
    free(info);
    gp_state b;
    make_batch(&b, 1, 4);
    double *t = malloc((size_t)n * sizeof *t);
    assert_non_null(t);
    const double start = now_s();
    for (int i = 0; i < n; i++) {
        const double t0 = now_s();
        const gp_state *sn = snap && (i + 1) % snap_every == 0 ? snap : NULL;
        assert_int_equal(gp_store_observe(s, m.id, (uint64_t)i, &b, 11 + (size_t)i, sn, NULL,
                                          &err),
                         GP_OK);
        t[i] = now_s() - t0;
    }
    const double total = now_s() - start;
    qsort(t, (size_t)n, sizeof *t, cmp_double);
    print_message("  %-44s n=%-6d mean %8.1f us  p50 %8.1f  p99 %8.1f  max %9.1f  (%.0f/s)\n",
                  label, n, 1e6 * total / n, 1e6 * t[n / 2], 1e6 * t[(size_t)(0.99 * n)],
                  1e6 * t[n - 1], n / total);
    free(t);
    gp_state_free(&b);
    gp_model_meta_free(&m);
}

static int count_entry(void *ctx, uint64_t seq, const gp_state *batch, gp_error *err)
{
    (void)seq;
    (void)batch;
    (void)err;
    (*(uint64_t *)ctx)++;
    return GP_OK;
}

static void test_observe_timing(void **state)
{
    (void)state;
    if (getenv("GP_STORE_OBSERVE_BENCH") == NULL)
        skip();
    char path[256];
    sf_db_path(path, sizeof path, "timing.db");
    gp_store *s = sf_open_store("timing.db");
    gp_error err;
    print_message("gp_store_observe on %s (WAL, synchronous = NORMAL unless said)\n", path);
    time_observes(s, "t1", "k=1 d=4, info 2 KB", 10000, 2048, NULL, 0);
    const long long before = file_bytes(path);
    time_observes(s, "t2", "k=1 d=4, info 64 KB", 10000, 65536, NULL, 0);
    /* Size of the log: checkpoint the WAL into the file and compare. */
    sqlite3_exec(SQ(s->w), "PRAGMA wal_checkpoint(TRUNCATE)", NULL, NULL, NULL);
    print_message("  file: %lld bytes after t1, %lld after t2 (~%lld bytes per 1-row entry"
                  " incl. the checkpointed row rewrites)\n",
                  before, file_bytes(path), (file_bytes(path) - before) / 10000);
    /* Replaying 10^4 entries (no work in the callback). */
    gp_model_meta m;
    assert_int_equal(gp_store_meta_brief(s, "t1", 0, &m, &err), GP_OK);
    uint64_t count = 0;
    double t0 = now_s();
    assert_int_equal(gp_store_observations(s, m.id, 0, m.obs_seq, count_entry, &count, &err),
                     GP_OK);
    print_message("  replay of %llu entries: %.1f ms (%.1f us an entry)\n",
                  (unsigned long long)count, 1e3 * (now_s() - t0),
                  1e6 * (now_s() - t0) / (double)count);
    t0 = now_s();
    for (int i = 0; i < 10000; i++)
        assert_int_equal(gp_store_meta_brief(s, "t1", 0, &m, &err), GP_OK);
    print_message("  gp_store_meta_brief: %.2f us\n", 1e6 * (now_s() - t0) / 10000);

    /* 5 MB snapshots: every append carries one, then every 100th. */
    gp_state snap;
    gp_state_init(&snap);
    put_bits(&snap, "chol_packed", 655360, 1); /* 5 MiB */
    time_observes(s, "t3", "k=1 d=4 + 5 MB snapshot on every append", 100, 2048, &snap, 1);
    time_observes(s, "t4", "k=1 d=4 + 5 MB snapshot every 100th", 2000, 2048, &snap, 100);
    assert_int_equal(gp_store_meta_brief(s, "t3", 0, &m, &err), GP_OK);
    gp_state got;
    gp_state_init(&got);
    uint64_t at = 0;
    t0 = now_s();
    for (int i = 0; i < 20; i++) {
        assert_int_equal(gp_store_load_snapshot(s, m.id, &got, &at, &err), GP_OK);
        gp_state_free(&got);
        gp_state_init(&got);
    }
    print_message("  gp_store_load_snapshot of 5 MB: %.2f ms\n", 1e3 * (now_s() - t0) / 20);

    /* What a per-commit fsync (power-loss durability) would cost. */
    assert_int_equal(sqlite3_exec(SQ(s->w), "PRAGMA synchronous = FULL", NULL, NULL, NULL),
                     SQLITE_OK);
    time_observes(s, "t5", "k=1 d=4, info 2 KB, synchronous = FULL", 2000, 2048, NULL, 0);
    gp_state_free(&snap);
    gp_store_close(s);
}

int main(void)
{
    /* What every back end does alike: once on SQLite, once on PostgreSQL. */
    const struct CMUnitTest both[] = {
        cmocka_unit_test(test_append_and_replay),
        cmocka_unit_test(test_conflict),
        cmocka_unit_test(test_snapshots),
        cmocka_unit_test(test_meta_and_list),
        cmocka_unit_test(test_cascade_delete),
        cmocka_unit_test(test_two_handles),
        cmocka_unit_test(test_racing_writers),
        cmocka_unit_test(test_killed_writer),
        cmocka_unit_test(test_parts),
        cmocka_unit_test(test_corrupt),
        cmocka_unit_test(test_replay_callback_uses_store),
    };
    const struct CMUnitTest sqlite_only[] = {
        cmocka_unit_test(test_schema_v3),
        cmocka_unit_test(test_migration_from_v2),
        cmocka_unit_test(test_failed_writes_leave_nothing),
        cmocka_unit_test(test_in_memory),
        cmocka_unit_test(test_observe_timing),
    };
    const struct CMUnitTest pg_unavailable[] = {
        cmocka_unit_test(sf_test_pg_unavailable),
    };
    int failed = cmocka_run_group_tests_name("store_observe on SQLite", both, group_setup,
                                             sf_group_teardown);
    failed += cmocka_run_group_tests_name("store_observe, SQLite only", sqlite_only, group_setup,
                                          sf_group_teardown);
    if (!sf_pg_available())
        return failed + cmocka_run_group_tests_name("store_observe on PostgreSQL", pg_unavailable,
                                                    NULL, NULL);
    return failed + cmocka_run_group_tests_name("store_observe on PostgreSQL", both,
                                                group_setup_pg, sf_teardown_pg);
}
