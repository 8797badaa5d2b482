/* Unit tests for the observation log and snapshots of store/ (store.h, "online
 * models"; docs/design/storage.md): schema version 3 and the migration from a
 * version 2 file, append and replay (order, bit-identical contents, ranges,
 * the callback's errors, a callback that uses the store), conflicts on a stale
 * expected_seq on one handle, snapshots (replace, load, append), obs_seq and
 * n_train in meta, meta_brief and list, the cascade on delete, and the
 * in-memory database. Several writers, failed writes and corrupt logs are
 * test_store_observe_faults.c's.
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
#include "tests/unit/store_observe_fixture.h"

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
        cmocka_unit_test(test_replay_callback_uses_store),
    };
    const struct CMUnitTest sqlite_only[] = {
        cmocka_unit_test(test_schema_v3),
        cmocka_unit_test(test_migration_from_v2),
        cmocka_unit_test(test_in_memory),
        cmocka_unit_test(test_observe_timing),
    };
    return sf_run_groups("store_observe", both, SF_COUNT(both), sqlite_only, SF_COUNT(sqlite_only),
                         NULL, 0);
}
