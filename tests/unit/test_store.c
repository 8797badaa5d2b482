/* Unit tests for store/: schema and migrations, bit-exact round trips of
 * model states (single- and multi-part arrays), versions, listing, deletion,
 * jobs, error codes, concurrent savers (threads on one handle, threads on
 * their own handles, and separate processes), concurrent claimers, and reads
 * that go on (and see the last committed data) while the handle's writer is
 * in the middle of a save or holds a write transaction.
 *
 * The tests of the back-end-independent behaviour run twice (store_fixture.h):
 * on SQLite files in a directory made with mkdtemp under /tmp (removed by the
 * group teardown), and on PostgreSQL when GPSERVE_TEST_PG_URL names a server
 * (a schema per database name, dropped by the group teardown; without a
 * server that group is one skipped test). A second, raw connection inspects
 * and corrupts the data behind the store's back. The tests of one back end's
 * own machinery (SQLite's files, WAL and write lock; PostgreSQL's migration
 * table, authentication and reconnects) run on it alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    return sf_setup_sqlite("gpstore-test");
}

static int group_setup_pg(void **state)
{
    (void)state;
    return sf_setup_pg("gpstore-test");
}

/* ---- helpers: random states (the raw connection is store_fixture.h's) ---- */

static uint64_t rng_state = 0x9E3779B97F4A7C15u;

static double rand_double(void)
{
    /* xorshift64*, mapped to a wide, NaN-free range with full mantissas. */
    uint64_t r = sf_xorshift64(&rng_state);
    double u = (double)(r >> 11) * 0x1.0p-53;
    return (u - 0.5) * 2e3 / (1.0 + (double)(r & 0xff));
}

static void put_random(gp_state *st, const char *name, size_t rows, size_t cols)
{
    sf_put_generated(st, name, rows, cols, rand_double);
}

/* A state with a general matrix, a scalar, an empty array and special values. */
static void make_state(gp_state *st)
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

static int save_simple(gp_store *s, const char *name, const gp_state *st, gp_model_meta *meta)
{
    gp_error err;
    int rc = gp_store_save(s, name, "exact", "{\"kernel\":\"rbf\"}", "{\"lml\":-1.5}", 10, 3,
                           st, meta, &err);
    if (rc && !quiet_saves)
        print_error("save %s: %s\n", name, err.message);
    return rc;
}

static int is_iso_time(const char *t)
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

/* ---- tests --------------------------------------------------------------- */

/* Translate sql and compare with want (and free). */
static void check_to_pg(const char *sql, const char *want)
{
    char *got = gp_store_sql_to_pg(sql);
    assert_non_null(got);
    assert_string_equal(got, want);
    free(got);
}

/* ?N -> $N for PostgreSQL: every N (several digits too), never inside a
 * single-quoted literal (a doubled quote stays inside), never a ? without a
 * number; and the shared texts come out with no ?N left. */
static void test_sql_to_pg(void **state)
{
    (void)state;
    check_to_pg("", "");
    check_to_pg("SELECT 1", "SELECT 1");
    check_to_pg("VALUES(?1, ?2, ?10, ?123)", "VALUES($1, $2, $10, $123)");
    check_to_pg("?1", "$1");
    check_to_pg("x = ?2::text IS NULL", "x = $2::text IS NULL");
    check_to_pg("SELECT '?1', ?1", "SELECT '?1', $1");
    check_to_pg("SELECT 'it''s ?2 here' || ?3 || '?' WHERE a = ?4",
                "SELECT 'it''s ?2 here' || $3 || '?' WHERE a = $4");
    check_to_pg("SELECT ? , ?x, '?", "SELECT ? , ?x, '?");
    for (int i = 0; i < GPS_STMT_COUNT; i++) {
        const char *sql = gp_store_sql[i];
        if (sql == NULL)
            continue;
        char *pg = gp_store_sql_to_pg(sql);
        assert_non_null(pg);
        assert_int_equal(strlen(pg), strlen(sql));
        for (const char *p = pg; *p; p++)
            if (*p == '?' && p[1] >= '0' && p[1] <= '9')
                fail_msg("statement %d: %s", i, pg);
        free(pg);
    }
}

/* A driver's override wins; without one the shared text; neither: nothing. */
static void test_sql_text(void **state)
{
    (void)state;
    const char *override[GPS_STMT_COUNT] = {[GPS_COMMIT] = "END"};
    assert_string_equal(gp_store_sql_text(override, GPS_COMMIT), "END");
    assert_ptr_equal(gp_store_sql_text(override, GPS_ROLLBACK), gp_store_sql[GPS_ROLLBACK]);
    assert_null(gp_store_sql_text(override, GPS_LOCK_NAME));
    assert_null(gp_store_sql_text(override, GPS_STMT_COUNT));
    /* Only the transaction start and the name lock are the drivers' alone. */
    for (int i = 0; i < GPS_STMT_COUNT; i++)
        if (i != GPS_BEGIN_IMMEDIATE && i != GPS_LOCK_NAME && gp_store_sql[i] == NULL)
            fail_msg("statement %d has no shared text", i);
}

static void test_now_and_codec(void **state)
{
    (void)state;
    char now[GP_TIME_LEN];
    gp_store_now(now);
    assert_true(is_iso_time(now));
    assert_true(strncmp(now, "20", 2) == 0);

    /* 1.0 = 0x3FF0000000000000: little-endian bytes 00 .. 00 F0 3F. */
    const double one = 1.0;
    unsigned char b[8];
    gp_store_le_encode(&one, 1, b);
    const unsigned char expect[8] = {0, 0, 0, 0, 0, 0, 0xF0, 0x3F};
    assert_memory_equal(b, expect, 8);
    double x[100], y[100];
    unsigned char buf[800];
    for (int i = 0; i < 100; i++)
        x[i] = rand_double();
    gp_store_le_encode(x, 100, buf);
    gp_store_le_decode(buf, 100, y);
    assert_memory_equal(x, y, sizeof x);
#ifndef GP_STORE_PORTABLE_CODEC
    assert_int_equal(gp_store_host_is_le(), 1); /* x86 and arm64 */
#endif
}

static void test_open_schema_and_reopen(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "schema.db");
    gp_store *s = sf_open_store("schema.db");
    assert_int_equal(sf_raw_int(path, "PRAGMA user_version", NULL), GP_STORE_SCHEMA_VERSION);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM sqlite_master WHERE type = 'table'"
                                   " AND name IN ('models', 'arrays', 'jobs', 'job_arrays',"
                                   " 'observations', 'snapshots')",
                             NULL),
                     6);
    sqlite3 *db;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    sqlite3_stmt *st;
    assert_int_equal(sqlite3_prepare_v2(db, "PRAGMA journal_mode", -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    assert_string_equal((const char *)sqlite3_column_text(st, 0), "wal");
    sqlite3_finalize(st);
    sqlite3_close(db);

    gp_state st1;
    make_state(&st1);
    assert_int_equal(save_simple(s, "kept", &st1, NULL), GP_OK);
    gp_store_close(s);

    /* Reopening is idempotent and keeps the data. */
    for (int i = 0; i < 2; i++) {
        s = sf_open_store("schema.db");
        assert_int_equal(sf_raw_int(path, "PRAGMA user_version", NULL), GP_STORE_SCHEMA_VERSION);
        gp_model_meta m;
        gp_error err;
        assert_int_equal(gp_store_meta(s, "kept", 0, &m, &err), GP_OK);
        assert_int_equal(m.version, 1);
        gp_state st2;
        gp_state_init(&st2);
        assert_int_equal(gp_store_load_state(s, m.id, &st2, &err), GP_OK);
        sf_assert_states_equal(&st1, &st2);
        gp_state_free(&st2);
        gp_model_meta_free(&m);
        gp_store_close(s);
    }
    gp_state_free(&st1);
    gp_store_close(NULL);
}

static void test_open_failures(void **state)
{
    (void)state;
    char path[256];
    gp_store *s = (gp_store *)&s;
    gp_error err;

    /* A directory that does not exist. */
    sf_db_path(path, sizeof path, "no/such/dir/x.db");
    assert_int_equal(gp_store_open(path, &s, &err), GP_ENOTREADY);
    assert_null(s);
    assert_int_equal(err.code, GP_ENOTREADY);
    assert_non_null(strstr(err.message, "no/such/dir/x.db"));

    /* A file that is not a database. */
    sf_db_path(path, sizeof path, "garbage.db");
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    for (int i = 0; i < 4096; i++)
        fputc((i * 7919) & 0xff, f);
    fclose(f);
    assert_int_equal(gp_store_open(path, &s, &err), GP_ENOTREADY);
    assert_null(s);
    assert_non_null(strstr(err.message, "garbage.db"));

    /* A schema newer than this code. */
    sf_db_path(path, sizeof path, "future.db");
    s = sf_open_store("future.db");
    gp_store_close(s);
    sf_raw_exec(path, "PRAGMA user_version = 99", NULL);
    assert_int_equal(gp_store_open(path, &s, &err), GP_ENOTREADY);
    assert_null(s);
    assert_non_null(strstr(err.message, "99"));

    /* No path. */
    assert_int_equal(gp_store_open("", &s, &err), GP_EINVAL);
}

static void test_round_trip(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "roundtrip.db");
    gp_store *s = sf_open_store("roundtrip.db");
    gp_state st1, st2;
    make_state(&st1);
    gp_model_meta m, m2;
    gp_error err;
    assert_int_equal(gp_store_save(s, "concrete", "exact", "{\"a\":1}", "{\"b\":2}", 1030, 8,
                                   &st1, &m, &err),
                     GP_OK);
    assert_true(m.id > 0);
    assert_string_equal(m.name, "concrete");
    assert_int_equal(m.version, 1);
    assert_string_equal(m.method, "exact");
    assert_string_equal(m.spec, "{\"a\":1}");
    assert_string_equal(m.info, "{\"b\":2}");
    assert_int_equal(m.n_train, 1030);
    assert_int_equal(m.input_dim, 8);
    assert_true(is_iso_time(m.created_at));

    assert_int_equal(gp_store_meta(s, "concrete", 1, &m2, &err), GP_OK);
    assert_int_equal(m2.id, m.id);
    assert_string_equal(m2.name, m.name);
    assert_string_equal(m2.method, m.method);
    assert_string_equal(m2.spec, m.spec);
    assert_string_equal(m2.info, m.info);
    assert_int_equal(m2.n_train, 1030);
    assert_int_equal(m2.input_dim, 8);
    assert_string_equal(m2.created_at, m.created_at);

    gp_state_init(&st2);
    assert_int_equal(gp_store_load_state(s, m.id, &st2, &err), GP_OK);
    sf_assert_states_equal(&st1, &st2);
    const gp_named_array *e = gp_state_find(&st2, "empty");
    assert_non_null(e);
    assert_int_equal(e->rows, 0);
    assert_int_equal(e->cols, 4);

    /* On disk: little-endian float64, one part each at the default part size. */
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM arrays", NULL), 5);
    assert_int_equal(sf_raw_int(path, "SELECT max(part) FROM arrays", NULL), 0);
    assert_int_equal(sf_raw_int(path, "SELECT length(data) FROM arrays WHERE key = ?1", "alpha"),
                     37 * 3 * 8);
    assert_int_equal(sf_raw_int(path, "SELECT length(data) FROM arrays WHERE key = ?1", "empty"),
                     0);
    assert_int_equal(sf_raw_int(path,
                                sf_pg ? "SELECT data = '\\x9A9999999999B93F'::bytea FROM arrays"
                                        " WHERE key = ?1"
                                      : "SELECT data = x'9A9999999999B93F' FROM arrays"
                                        " WHERE key = ?1",
                                "noise"),
                     1);

    /* Loading appends to a state that already has arrays; a clash is GP_EINVAL. */
    gp_state st3;
    gp_state_init(&st3);
    assert_int_equal(gp_state_put_scalar(&st3, "extra", 2.0, &err), GP_OK);
    assert_int_equal(gp_store_load_state(s, m.id, &st3, &err), GP_OK);
    assert_int_equal(st3.count, st1.count + 1);
    assert_int_equal(gp_store_load_state(s, m.id, &st3, &err), GP_EINVAL);
    gp_state_free(&st3);

    /* A model saved without a state has no arrays. */
    gp_model_meta m3;
    assert_int_equal(save_simple(s, "bare", NULL, &m3), GP_OK);
    gp_state_init(&st3);
    assert_int_equal(gp_store_load_state(s, m3.id, &st3, &err), GP_OK);
    assert_int_equal(st3.count, 0);

    gp_model_meta_free(&m);
    gp_model_meta_free(&m2);
    gp_model_meta_free(&m3);
    gp_state_free(&st1);
    gp_state_free(&st2);
    gp_store_close(s);
}

/* The brief lookup names the same row as the full one, without the texts. */
static void test_meta_brief(void **state)
{
    (void)state;
    gp_store *s = sf_open_store("brief.db");
    assert_int_equal(save_simple(s, "m", NULL, NULL), GP_OK);
    assert_int_equal(save_simple(s, "m", NULL, NULL), GP_OK);
    gp_error err;
    for (int v = 0; v <= 2; v++) {
        gp_model_meta full, brief;
        assert_int_equal(gp_store_meta(s, "m", v, &full, &err), GP_OK);
        assert_int_equal(gp_store_meta_brief(s, "m", v, &brief, &err), GP_OK);
        assert_true(brief.id == full.id);
        assert_int_equal(brief.version, v == 0 ? 2 : v);
        assert_int_equal(brief.version, full.version);
        assert_string_equal(brief.method, full.method);
        assert_non_null(full.spec);
        assert_null(brief.spec);
        assert_null(brief.info);
        gp_model_meta_free(&full);
        gp_model_meta_free(&brief);
    }
    gp_model_meta brief;
    assert_int_equal(gp_store_meta_brief(s, "m", 3, &brief, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "version");
    assert_int_equal(gp_store_meta_brief(s, "nosuch", 0, &brief, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "name");
    gp_store_close(s);
}

static void test_versions_and_list(void **state)
{
    (void)state;
    gp_store *s = sf_open_store("versions.db");
    gp_error err;
    gp_state st;
    make_state(&st);
    const char *names[] = {"beta", "alpha", "beta", "gamma", "beta", "alpha"};
    for (int i = 0; i < 6; i++) {
        gp_model_meta m;
        assert_int_equal(save_simple(s, names[i], &st, &m), GP_OK);
        int expect = 0;
        for (int j = 0; j <= i; j++)
            expect += strcmp(names[j], names[i]) == 0;
        assert_int_equal(m.version, expect);
        gp_model_meta_free(&m);
    }
    int *v = NULL;
    size_t n = 0;
    assert_int_equal(gp_store_versions(s, "beta", &v, &n, &err), GP_OK);
    assert_int_equal(n, 3);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(v[i], (int)i + 1);
    free(v);

    gp_model_meta m;
    assert_int_equal(gp_store_meta(s, "beta", 0, &m, &err), GP_OK);
    assert_int_equal(m.version, 3);
    int64_t latest_id = m.id;
    gp_model_meta_free(&m);
    assert_int_equal(gp_store_meta(s, "beta", 2, &m, &err), GP_OK);
    assert_int_equal(m.version, 2);
    assert_true(m.id < latest_id);
    gp_model_meta_free(&m);

    gp_model_meta *list = NULL;
    assert_int_equal(gp_store_list(s, &list, &n, &err), GP_OK);
    assert_int_equal(n, 3);
    assert_string_equal(list[0].name, "alpha");
    assert_int_equal(list[0].version, 2);
    assert_string_equal(list[1].name, "beta");
    assert_int_equal(list[1].version, 3);
    assert_int_equal(list[1].id, latest_id);
    assert_string_equal(list[2].name, "gamma");
    assert_int_equal(list[2].version, 1);
    assert_string_equal(list[2].spec, "{\"kernel\":\"rbf\"}");
    gp_model_meta_free_array(list, n);
    gp_state_free(&st);
    gp_store_close(s);

    /* An empty store lists nothing. */
    s = sf_open_store("empty.db");
    list = (gp_model_meta *)&list;
    assert_int_equal(gp_store_list(s, &list, &n, &err), GP_OK);
    assert_int_equal(n, 0);
    assert_null(list);
    gp_store_close(s);
}

static void test_not_found_and_invalid(void **state)
{
    (void)state;
    gp_store *s = sf_open_store("notfound.db");
    gp_error err;
    gp_model_meta m;
    assert_int_equal(save_simple(s, "present", NULL, NULL), GP_OK);

    assert_int_equal(gp_store_meta(s, "absent", 0, &m, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "name");
    assert_string_equal(err.message, "model 'absent' not found");
    assert_int_equal(gp_store_meta(s, "absent", 3, &m, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "name");
    assert_int_equal(gp_store_meta(s, "present", 2, &m, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "version");
    assert_int_equal(gp_store_meta(s, "present", -1, &m, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "version");
    assert_null(m.spec);

    int *v = NULL;
    size_t n = 7;
    assert_int_equal(gp_store_versions(s, "absent", &v, &n, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "name");
    assert_null(v);
    assert_int_equal(n, 0);

    assert_int_equal(gp_store_delete(s, "absent", &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "name");

    gp_job_row job;
    assert_int_equal(gp_store_job_get(s, "nojob", &job, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "id");
    assert_non_null(strstr(err.message, "nojob"));

    gp_state st;
    gp_state_init(&st);
    assert_int_equal(gp_store_load_state(s, 424242, &st, &err), GP_ENOTFOUND);
    assert_int_equal(st.count, 0);

    /* Bad arguments to save. */
    assert_int_equal(gp_store_save(s, "", "exact", "{}", "{}", 1, 1, NULL, NULL, &err), GP_EINVAL);
    assert_string_equal(err.field, "name");
    char longname[GP_NAME_MAX + 2];
    memset(longname, 'x', sizeof longname - 1);
    longname[sizeof longname - 1] = '\0';
    assert_int_equal(gp_store_save(s, longname, "exact", "{}", "{}", 1, 1, NULL, NULL, &err),
                     GP_EINVAL);
    assert_string_equal(err.field, "name");
    assert_int_equal(gp_store_save(s, "ok", "", "{}", "{}", 1, 1, NULL, NULL, &err), GP_EINVAL);
    assert_string_equal(err.field, "method");
    assert_int_equal(gp_store_save(s, "ok", "exact", NULL, "{}", 1, 1, NULL, NULL, &err),
                     GP_EINVAL);
    /* A state array without data: rejected, and nothing is left behind. */
    gp_state bad;
    gp_state_init(&bad);
    assert_int_equal(gp_state_put_scalar(&bad, "x", 1.0, &err), GP_OK);
    free(bad.arrays[0].data);
    bad.arrays[0].data = NULL;
    assert_int_equal(gp_store_save(s, "ok", "exact", "{}", "{}", 1, 1, &bad, &m, &err),
                     GP_EINVAL);
    assert_string_equal(err.field, "x");
    assert_null(m.spec);
    assert_int_equal(gp_store_meta(s, "ok", 0, &m, &err), GP_ENOTFOUND);
    gp_state_free(&bad);
    gp_store_close(s);
}

static void test_delete(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "delete.db");
    gp_store *s = sf_open_store("delete.db");
    gp_error err;
    gp_state st;
    make_state(&st);
    gp_store_set_part_bytes(s, 64); /* multi-part arrays are deleted too */
    assert_int_equal(save_simple(s, "doomed", &st, NULL), GP_OK);
    assert_int_equal(save_simple(s, "doomed", &st, NULL), GP_OK);
    assert_int_equal(save_simple(s, "kept", &st, NULL), GP_OK);
    long long per_model = sf_raw_int(path, "SELECT count(*) FROM arrays", NULL) / 3;
    assert_true(per_model > (long long)st.count);

    assert_int_equal(gp_store_delete(s, "doomed", &err), GP_OK);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM arrays", NULL), per_model);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM models WHERE name = ?1", "doomed"), 0);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM arrays WHERE model_id NOT IN"
                                   " (SELECT id FROM models)",
                             NULL),
                     0);
    gp_model_meta m;
    assert_int_equal(gp_store_meta(s, "doomed", 0, &m, &err), GP_ENOTFOUND);
    assert_int_equal(gp_store_delete(s, "doomed", &err), GP_ENOTFOUND);
    assert_int_equal(gp_store_meta(s, "kept", 0, &m, &err), GP_OK);
    gp_state st2;
    gp_state_init(&st2);
    assert_int_equal(gp_store_load_state(s, m.id, &st2, &err), GP_OK);
    sf_assert_states_equal(&st, &st2);
    gp_model_meta_free(&m);
    gp_state_free(&st2);

    /* A name saved again after deletion starts at version 1. */
    gp_model_meta m2;
    assert_int_equal(save_simple(s, "doomed", NULL, &m2), GP_OK);
    assert_int_equal(m2.version, 1);
    gp_model_meta_free(&m2);
    gp_state_free(&st);
    gp_store_close(s);
}

static void test_jobs(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "jobs.db");
    gp_store *s = sf_open_store("jobs.db");
    gp_error err;
    gp_job_row job, got;
    memset(&job, 0, sizeof job);
    snprintf(job.id, sizeof job.id, "0123456789abcdef0123456789abcdef");
    snprintf(job.model_name, sizeof job.model_name, "concrete");
    snprintf(job.status, sizeof job.status, "queued");
    assert_int_equal(gp_store_job_put(s, &job, &err), GP_OK);
    assert_int_equal(gp_store_job_get(s, job.id, &got, &err), GP_OK);
    assert_string_equal(got.id, job.id);
    assert_string_equal(got.model_name, "concrete");
    assert_string_equal(got.status, "queued");
    assert_null(got.progress);
    assert_null(got.error);
    assert_null(got.result);
    assert_true(is_iso_time(got.created_at));
    assert_string_equal(got.created_at, got.updated_at);
    gp_job_row_free(&got);

    /* Age the row so that an update visibly keeps created_at and moves updated_at. */
    sf_raw_exec(path,
             "UPDATE jobs SET created_at = '2000-01-01T00:00:00Z',"
             " updated_at = '2000-01-01T00:00:00Z' WHERE id = ?1",
             job.id);
    snprintf(job.status, sizeof job.status, "succeeded");
    job.progress = "{\"iteration\":5,\"max_iterations\":100}";
    job.result = "{\"name\":\"concrete\",\"version\":1}";
    assert_int_equal(gp_store_job_put(s, &job, &err), GP_OK);
    assert_int_equal(gp_store_job_get(s, job.id, &got, &err), GP_OK);
    assert_string_equal(got.status, "succeeded");
    assert_string_equal(got.progress, job.progress);
    assert_string_equal(got.result, job.result);
    assert_null(got.error);
    assert_string_equal(got.created_at, "2000-01-01T00:00:00Z");
    assert_true(is_iso_time(got.updated_at));
    assert_string_not_equal(got.updated_at, "2000-01-01T00:00:00Z");
    gp_job_row_free(&got);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM jobs", NULL), 1);

    /* Failed job with an error text; then a NULL-ing update. */
    job.error = "{\"code\":\"not_positive_definite\"}";
    job.result = NULL;
    snprintf(job.status, sizeof job.status, "failed");
    assert_int_equal(gp_store_job_put(s, &job, &err), GP_OK);
    assert_int_equal(gp_store_job_get(s, job.id, &got, &err), GP_OK);
    assert_string_equal(got.error, job.error);
    assert_null(got.result);
    gp_job_row_free(&got);

    /* Invalid rows. */
    gp_job_row bad;
    memset(&bad, 0, sizeof bad);
    snprintf(bad.status, sizeof bad.status, "queued");
    assert_int_equal(gp_store_job_put(s, &bad, &err), GP_EINVAL);
    assert_string_equal(err.field, "id");
    snprintf(bad.id, sizeof bad.id, "j");
    bad.status[0] = '\0';
    assert_int_equal(gp_store_job_put(s, &bad, &err), GP_EINVAL);
    gp_store_close(s);
}

static void test_multipart(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "parts.db");
    gp_store *s = sf_open_store("parts.db");
    gp_error err;
    gp_state st, st2;
    gp_state_init(&st);
    put_random(&st, "big", 10, 10); /* 800 bytes: 13 parts of 64 (12 x 64 + 32) */
    put_random(&st, "exact", 4, 2); /* 64 bytes: exactly one part */
    assert_int_equal(gp_state_put_scalar(&st, "s", 3.5, &err), GP_OK);
    gp_store_set_part_bytes(s, 64);

    /* Nine copies to corrupt, each its own version. */
    int64_t ids[9];
    for (int i = 0; i < 9; i++) {
        gp_model_meta m;
        assert_int_equal(save_simple(s, "parts", &st, &m), GP_OK);
        ids[i] = m.id;
        gp_model_meta_free(&m);
    }
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM arrays WHERE key = ?1 AND model_id = 1",
                             "big"),
                     13);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM arrays WHERE key = ?1 AND model_id = 1",
                             "exact"),
                     1);
    assert_int_equal(sf_raw_int(path, "SELECT length(data) FROM arrays WHERE key = ?1 AND"
                                   " model_id = 1 AND part = 12",
                             "big"),
                     32);

    for (int i = 0; i < 9; i++) {
        gp_state_init(&st2);
        assert_int_equal(gp_store_load_state(s, ids[i], &st2, &err), GP_OK);
        sf_assert_states_equal(&st, &st2);
        gp_state_free(&st2);
    }
    /* Part size changes do not matter to loading; 0 restores the default. */
    gp_store_set_part_bytes(s, 100); /* rounded down to 96 */
    gp_model_meta m;
    assert_int_equal(save_simple(s, "parts96", &st, &m), GP_OK);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM arrays WHERE key = ?1 AND model_id = 10",
                             "big"),
                     9);
    gp_state_init(&st2);
    assert_int_equal(gp_store_load_state(s, m.id, &st2, &err), GP_OK);
    sf_assert_states_equal(&st, &st2);
    gp_state_free(&st2);
    gp_model_meta_free(&m);
    gp_store_set_part_bytes(s, 0);
    assert_int_equal(save_simple(s, "parts1", &st, &m), GP_OK);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM arrays WHERE key = ?1 AND model_id = 11",
                             "big"),
                     1);
    gp_model_meta_free(&m);

    /* Corruptions of model rows 1..9 (ids[i] == i + 1), each GP_EDATA naming "big". */
    static const char *const corrupt[9] = {
        "DELETE FROM arrays WHERE model_id = 1 AND key = ?1 AND part = 3",   /* middle */
        "DELETE FROM arrays WHERE model_id = 2 AND key = ?1 AND part = 12",  /* last */
        "DELETE FROM arrays WHERE model_id = 3 AND key = ?1 AND part = 0",   /* first */
        "UPDATE arrays SET data = substr(data, 1, 40) WHERE model_id = 4 AND key = ?1"
        " AND part = 5",                                                     /* short */
        "UPDATE arrays SET data = NULL WHERE model_id = 5 AND key = ?1 AND part = 2",
        "UPDATE arrays SET rows = 11 WHERE model_id = 6 AND key = ?1 AND part = 7",
        NULL, /* data || one byte: in the dialect, below */
        "UPDATE arrays SET rows = -1 WHERE model_id = 8 AND key = ?1",
        /* 2^30 x 10: within the element limit, refused before allocating 80 GiB */
        "UPDATE arrays SET rows = 1073741824 WHERE model_id = 9 AND key = ?1",
    };
    for (int i = 0; i < 9; i++) {
        assert_int_equal(ids[i], i + 1);
        const char *sql = corrupt[i] ? corrupt[i]
                          : sf_pg    ? "UPDATE arrays SET data = data || '\\x00'::bytea"
                                       " WHERE model_id = 7 AND key = ?1 AND part = 12"
                                     : "UPDATE arrays SET data = data || x'00'"
                                       " WHERE model_id = 7 AND key = ?1 AND part = 12";
        sf_raw_exec(path, sql, "big");
        gp_state_init(&st2);
        int rc = gp_store_load_state(s, ids[i], &st2, &err);
        if (rc != GP_EDATA)
            fail_msg("corruption %d: rc %d (%s)", i, rc, err.message);
        assert_string_equal(err.field, "big");
        assert_non_null(strstr(err.message, "'big'"));
        if (i == 8)
            assert_non_null(strstr(err.message, "hold 800 of 85899345920 bytes"));
        assert_int_equal(st2.count, 0);
        assert_null(st2.arrays);
    }
    /* A model whose array data is a text value, a part past the end. */
    gp_store_set_part_bytes(s, 64);
    assert_int_equal(save_simple(s, "parts", &st, &m), GP_OK);
    sf_raw_exec(path,
                sf_pg ? "INSERT INTO arrays SELECT model_id, key, 13, rows, cols,"
                        " '\\x0000000000000000'::bytea FROM arrays"
                        " WHERE model_id = (SELECT max(id) FROM models) AND key = ?1 AND part = 0"
                      : "INSERT INTO arrays SELECT model_id, key, 13, rows, cols,"
                        " x'0000000000000000' FROM arrays"
                        " WHERE model_id = (SELECT max(id) FROM models) AND key = ?1 AND part = 0",
                "big");
    gp_state_init(&st2);
    assert_int_equal(gp_store_load_state(s, m.id, &st2, &err), GP_EDATA);
    assert_string_equal(err.field, "big");
    gp_model_meta_free(&m);
    assert_int_equal(save_simple(s, "parts", &st, &m), GP_OK);
    sf_raw_exec(path, "UPDATE arrays SET data = 'text' WHERE key = ?1"
                   " AND model_id = (SELECT max(id) FROM models)",
             "s");
    assert_int_equal(gp_store_load_state(s, m.id, &st2, &err), GP_EDATA);
    assert_string_equal(err.field, "s");
    gp_model_meta_free(&m);

    gp_state_free(&st);
    gp_store_close(s);
}

static void test_two_handles(void **state)
{
    (void)state;
    gp_store *a = sf_open_store("shared.db");
    gp_store *b = sf_open_store("shared.db");
    gp_error err;
    gp_state st;
    make_state(&st);
    gp_model_meta m;
    assert_int_equal(save_simple(a, "m", &st, NULL), GP_OK);
    assert_int_equal(gp_store_meta(b, "m", 0, &m, &err), GP_OK);
    assert_int_equal(m.version, 1);
    gp_state st2;
    gp_state_init(&st2);
    assert_int_equal(gp_store_load_state(b, m.id, &st2, &err), GP_OK);
    sf_assert_states_equal(&st, &st2);
    gp_state_free(&st2);
    gp_model_meta_free(&m);

    assert_int_equal(save_simple(b, "m", &st, &m), GP_OK);
    assert_int_equal(m.version, 2);
    gp_model_meta_free(&m);
    assert_int_equal(gp_store_meta(a, "m", 0, &m, &err), GP_OK);
    assert_int_equal(m.version, 2);
    gp_model_meta_free(&m);

    assert_int_equal(gp_store_delete(b, "m", &err), GP_OK);
    assert_int_equal(gp_store_meta(a, "m", 0, &m, &err), GP_ENOTFOUND);
    gp_state_free(&st);
    gp_store_close(a);
    gp_store_close(b);
}

/* ---- concurrency --------------------------------------------------------- */

#define N_THREADS 4
#define SAVES_PER_THREAD 12

typedef struct saver {
    gp_store *store;      /* shared handle, or NULL to open an own one */
    const char *file;
    const gp_state *state;
    int versions[SAVES_PER_THREAD];
    int failures;
    char message[GP_ERROR_MESSAGE_LEN];
    pthread_barrier_t *start; /* every thread ready before the first save */
} saver;

static void *saver_main(void *arg)
{
    saver *sv = arg;
    gp_store *s = sv->store;
    gp_error err;
    if (s == NULL) {
        char path[256];
        sf_db_path(path, sizeof path, sv->file);
        if (gp_store_open(path, &s, &err)) {
            sv->failures++;
            snprintf(sv->message, sizeof sv->message, "%s", err.message);
        }
    }
    pthread_barrier_wait(sv->start);
    if (s == NULL)
        return NULL;
    for (int i = 0; i < SAVES_PER_THREAD; i++) {
        gp_model_meta m;
        if (gp_store_save(s, "hot", "exact", "{}", "{}", 5, 2, sv->state, &m, &err)) {
            sv->failures++;
            snprintf(sv->message, sizeof sv->message, "%s", err.message);
            continue;
        }
        sv->versions[i] = m.version;
        gp_model_meta_free(&m);
        /* Interleave reads with the writes. */
        gp_model_meta *list;
        size_t n;
        if (gp_store_list(s, &list, &n, &err) == GP_OK)
            gp_model_meta_free_array(list, n);
        else
            sv->failures++;
    }
    if (sv->store == NULL)
        gp_store_close(s);
    return NULL;
}

static void check_versions(gp_store *s, const saver *sv, int total)
{
    char seen[N_THREADS * SAVES_PER_THREAD + 1] = {0};
    for (int t = 0; t < N_THREADS; t++) {
        if (sv[t].failures)
            fail_msg("thread %d: %d failures (%s)", t, sv[t].failures, sv[t].message);
        for (int i = 0; i < SAVES_PER_THREAD; i++) {
            int v = sv[t].versions[i];
            assert_true(v >= 1 && v <= total);
            assert_int_equal(seen[v], 0);
            seen[v] = 1;
            /* One thread's own versions increase. */
            if (i > 0)
                assert_true(v > sv[t].versions[i - 1]);
        }
    }
    int *v;
    size_t n;
    gp_error err;
    assert_int_equal(gp_store_versions(s, "hot", &v, &n, &err), GP_OK);
    assert_int_equal(n, (size_t)total);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(v[i], (int)i + 1);
    free(v);
}

static void run_savers(const char *file, int shared)
{
    gp_store *s = sf_open_store(file);
    gp_state st;
    make_state(&st);
    saver sv[N_THREADS];
    pthread_t th[N_THREADS];
    pthread_barrier_t start;
    assert_int_equal(pthread_barrier_init(&start, NULL, N_THREADS), 0);
    memset(sv, 0, sizeof sv);
    for (int t = 0; t < N_THREADS; t++) {
        sv[t].start = &start;
        sv[t].store = shared ? s : NULL;
        sv[t].file = file;
        sv[t].state = &st;
        assert_int_equal(pthread_create(&th[t], NULL, saver_main, &sv[t]), 0);
    }
    for (int t = 0; t < N_THREADS; t++)
        assert_int_equal(pthread_join(th[t], NULL), 0);
    pthread_barrier_destroy(&start);
    check_versions(s, sv, N_THREADS * SAVES_PER_THREAD);

    /* Every version's arrays are complete. */
    gp_model_meta m;
    gp_error err;
    for (int v = 1; v <= N_THREADS * SAVES_PER_THREAD; v += 7) {
        assert_int_equal(gp_store_meta(s, "hot", v, &m, &err), GP_OK);
        gp_state st2;
        gp_state_init(&st2);
        assert_int_equal(gp_store_load_state(s, m.id, &st2, &err), GP_OK);
        sf_assert_states_equal(&st, &st2);
        gp_state_free(&st2);
        gp_model_meta_free(&m);
    }
    gp_state_free(&st);
    gp_store_close(s);
}

static void test_threads_shared_handle(void **state)
{
    (void)state;
    run_savers("threads_shared.db", 1);
}

static void test_threads_own_handles(void **state)
{
    (void)state;
    run_savers("threads_own.db", 0);
}

/* Two processes save under one name at the same time: distinct versions. */
static void test_processes(void **state)
{
    (void)state;
    enum { PROCS = 3, SAVES = 15 };
    char path[256];
    sf_db_path(path, sizeof path, "procs.db");
    /* Create the schema, and close: a SQLite connection must not cross fork(). */
    gp_store *s = sf_open_store("procs.db");
    gp_store_close(s);
    pid_t pids[PROCS];
    for (int p = 0; p < PROCS; p++) {
        pids[p] = fork();
        assert_true(pids[p] >= 0);
        if (pids[p] == 0) {
            gp_store *cs = NULL;
            gp_error err;
            int bad = 0;
            gp_state st;
            gp_state_init(&st);
            double x[6] = {1, 2, 3, 4, 5, (double)p};
            if (gp_state_put(&st, "x", 3, 2, x, &err) || gp_store_open(path, &cs, &err))
                _exit(2);
            for (int i = 0; i < SAVES; i++)
                bad += gp_store_save(cs, "proc", "exact", "{}", "{}", 3, 2, &st, NULL, &err) != 0;
            gp_store_close(cs);
            gp_state_free(&st);
            _exit(bad ? 1 : 0);
        }
    }
    for (int p = 0; p < PROCS; p++) {
        int status = 0;
        assert_int_equal(waitpid(pids[p], &status, 0), pids[p]);
        assert_true(WIFEXITED(status));
        assert_int_equal(WEXITSTATUS(status), 0);
    }
    int *v;
    size_t n;
    gp_error err;
    s = sf_open_store("procs.db");
    assert_int_equal(gp_store_versions(s, "proc", &v, &n, &err), GP_OK);
    assert_int_equal(n, PROCS * SAVES);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(v[i], (int)i + 1);
    free(v);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM arrays", NULL), PROCS * SAVES);
    gp_store_close(s);
}

/* ---- damaged files and locks --------------------------------------------- */

static int allowed_failure(int rc)
{
    return rc == GP_OK || rc == GP_EINTERNAL || rc == GP_ENOTREADY || rc == GP_EDATA ||
           rc == GP_ENOTFOUND;
}

/* Overwrite each page of a database in turn with garbage: every call returns
 * an error code (or succeeds), nothing crashes or leaks. */
static void test_corrupt_file(void **state)
{
    (void)state;
    enum { PAGE = 4096 };
    char path[256], bad[256];
    sf_db_path(path, sizeof path, "pristine.db");
    sf_db_path(bad, sizeof bad, "damaged.db");
    gp_store *s = sf_open_store("pristine.db");
    gp_state st;
    gp_state_init(&st);
    put_random(&st, "w", 3000, 2);
    put_random(&st, "v", 7, 7);
    gp_store_set_part_bytes(s, 16384);
    gp_job_row job;
    memset(&job, 0, sizeof job);
    snprintf(job.id, sizeof job.id, "job1");
    snprintf(job.status, sizeof job.status, "running");
    gp_error err;
    assert_int_equal(gp_store_job_put(s, &job, &err), GP_OK);
    assert_int_equal(save_simple(s, "a", &st, NULL), GP_OK);
    assert_int_equal(save_simple(s, "b", &st, NULL), GP_OK);
    assert_int_equal(save_simple(s, "a", &st, NULL), GP_OK);
    gp_store_close(s); /* checkpoints the WAL into the file */

    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    assert_true(size >= 16 * PAGE);
    unsigned char *img = malloc((size_t)size);
    assert_non_null(img);
    assert_int_equal(fread(img, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    unsigned char *dmg = malloc((size_t)size);
    assert_non_null(dmg);

    const long pages = size / PAGE;
    int opened = 0, failed_calls = 0;
    for (long p = 0; p < pages; p++) {
        memcpy(dmg, img, (size_t)size);
        for (long i = p == 0 ? 100 : 0; i < PAGE; i++)
            dmg[p * PAGE + i] = (unsigned char)(rand_double() * 1e6);
        unlink(bad);
        f = fopen(bad, "wb");
        assert_non_null(f);
        assert_int_equal(fwrite(dmg, 1, (size_t)size, f), (size_t)size);
        fclose(f);

        gp_store *d = NULL;
        int rc = gp_store_open(bad, &d, &err);
        assert_true(rc == GP_OK || rc == GP_ENOTREADY);
        if (rc)
            continue;
        opened++;
        gp_model_meta *list = NULL;
        size_t n = 0;
        rc = gp_store_list(d, &list, &n, &err);
        failed_calls += rc != 0;
        assert_true(allowed_failure(rc));
        gp_model_meta_free_array(list, n);
        for (int id = 1; id <= 3; id++) {
            gp_state got;
            gp_state_init(&got);
            rc = gp_store_load_state(d, id, &got, &err);
            failed_calls += rc != 0;
            assert_true(allowed_failure(rc));
            gp_state_free(&got);
        }
        gp_model_meta m;
        rc = gp_store_meta(d, "a", 0, &m, &err);
        assert_true(allowed_failure(rc));
        gp_model_meta_free(&m);
        int *v = NULL;
        rc = gp_store_versions(d, "a", &v, &n, &err);
        assert_true(allowed_failure(rc));
        free(v);
        gp_job_row jr;
        rc = gp_store_job_get(d, "job1", &jr, &err);
        assert_true(allowed_failure(rc));
        gp_job_row_free(&jr);
        quiet_saves = 1;
        rc = save_simple(d, "c", &st, NULL);
        quiet_saves = 0;
        assert_true(allowed_failure(rc));
        rc = gp_store_delete(d, "b", &err);
        assert_true(allowed_failure(rc));
        gp_store_close(d);
    }
    /* Most damaged pages are inside array data (which SQLite cannot check);
     * some are b-tree pages that must have produced errors. */
    assert_true(opened > 0);
    assert_true(failed_calls > 0);
    unlink(bad);
    free(img);
    free(dmg);
    gp_state_free(&st);
}

typedef struct locker {
    const char *path;
    int hold_ms;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int locked;
    int committing; /* set just before COMMIT releases the write lock */
    int rc;
} locker;

static void *locker_main(void *arg)
{
    locker *lk = arg;
    sqlite3 *db = NULL;
    lk->rc = sqlite3_open(lk->path, &db);
    if (lk->rc == SQLITE_OK)
        lk->rc = sqlite3_exec(db, "BEGIN IMMEDIATE; INSERT INTO jobs(id, status)"
                                  " VALUES('locker', 'queued')",
                              NULL, NULL, NULL);
    pthread_mutex_lock(&lk->mu);
    lk->locked = 1;
    pthread_cond_signal(&lk->cv);
    pthread_mutex_unlock(&lk->mu);
    struct timespec ts = {.tv_sec = lk->hold_ms / 1000, .tv_nsec = (lk->hold_ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&lk->mu);
    lk->committing = 1;
    pthread_mutex_unlock(&lk->mu);
    if (lk->rc == SQLITE_OK)
        lk->rc = sqlite3_exec(db, "COMMIT", NULL, NULL, NULL);
    sqlite3_close(db);
    return NULL;
}

/* Another connection holds the write lock for a while: writers wait for it,
 * readers are not blocked (WAL). */
static void test_waits_for_write_lock(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "locked.db");
    gp_store *s = sf_open_store("locked.db");
    assert_int_equal(save_simple(s, "before", NULL, NULL), GP_OK);
    locker lk = {.path = path, .hold_ms = 400, .locked = 0, .committing = 0, .rc = 0};
    pthread_mutex_init(&lk.mu, NULL);
    pthread_cond_init(&lk.cv, NULL);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, locker_main, &lk), 0);
    pthread_mutex_lock(&lk.mu);
    while (!lk.locked)
        pthread_cond_wait(&lk.cv, &lk.mu);
    pthread_mutex_unlock(&lk.mu);

    gp_error err;
    gp_model_meta m;
    assert_int_equal(gp_store_meta(s, "before", 0, &m, &err), GP_OK); /* not blocked */
    gp_model_meta_free(&m);
    /* The save can only take the write lock once the locker commits: it waited
     * (an ordering check, not a timing one). */
    assert_int_equal(save_simple(s, "during", NULL, &m), GP_OK);
    pthread_mutex_lock(&lk.mu);
    int committing = lk.committing;
    pthread_mutex_unlock(&lk.mu);
    assert_int_equal(committing, 1);
    assert_int_equal(m.version, 1);
    gp_model_meta_free(&m);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(lk.rc, SQLITE_OK);
    gp_job_row jr;
    assert_int_equal(gp_store_job_get(s, "locker", &jr, &err), GP_OK);
    gp_job_row_free(&jr);
    pthread_mutex_destroy(&lk.mu);
    pthread_cond_destroy(&lk.cv);
    gp_store_close(s);
}

/* ---- reads while the handle's writer is busy ------------------------------ */

/* The reader connections hold no transaction and no statement in progress
 * (checked between calls: a read left open would pin an old snapshot). */
static void assert_reader_idle(gp_store *s)
{
    for (size_t i = 0; i < s->n_readers; i++) {
        sqlite3 *db = SQ(s->readers[i]);
        assert_int_equal(sqlite3_get_autocommit(db), 1);
        for (sqlite3_stmt *st = sqlite3_next_stmt(db, NULL); st != NULL;
             st = sqlite3_next_stmt(db, st))
            assert_int_equal(sqlite3_stmt_busy(st), 0);
    }
}

/* First column of sql on the store's writer connection itself (which sees its
 * own uncommitted rows); the caller holds the writer's mutex. */
static long long writer_int(gp_store *s, const char *sql, int64_t param)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(SQ(s->w), sql, -1, &st, NULL), SQLITE_OK);
    assert_int_equal(sqlite3_bind_int64(st, 1, param), SQLITE_OK);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

/* What the reads must see while the write is pending: the committed model
 * "m" (latest version `version`, row id, arrays `state`) and job "j1" with
 * status `status`. */
typedef struct committed {
    gp_store *store;
    int version;
    int64_t id;
    const gp_state *state;
    const char *status;
    int64_t pending_id; /* row being written (not committed): invisible */
    int checks;         /* how many times check_committed ran */
} committed;

static void check_committed(committed *c)
{
    gp_store *s = c->store;
    gp_error err;
    gp_model_meta m;
    assert_int_equal(gp_store_meta(s, "m", 0, &m, &err), GP_OK);
    assert_int_equal(m.version, c->version);
    assert_int_equal(m.id, c->id);
    gp_model_meta_free(&m);
    assert_int_equal(gp_store_meta(s, "m", c->version + 1, &m, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "version");
    assert_reader_idle(s);

    int *v = NULL;
    size_t n = 0;
    assert_int_equal(gp_store_versions(s, "m", &v, &n, &err), GP_OK);
    assert_int_equal(n, (size_t)c->version);
    assert_int_equal(v[n - 1], c->version);
    free(v);
    gp_model_meta *list = NULL;
    assert_int_equal(gp_store_list(s, &list, &n, &err), GP_OK);
    assert_int_equal(n, 1);
    assert_int_equal(list[0].version, c->version);
    gp_model_meta_free_array(list, n);
    assert_reader_idle(s);

    gp_state got;
    gp_state_init(&got);
    assert_int_equal(gp_store_load_state(s, c->id, &got, &err), GP_OK);
    sf_assert_states_equal(c->state, &got);
    gp_state_free(&got);
    if (c->pending_id > 0) {
        /* A model being written is not seen at all, not partly. */
        gp_state_init(&got);
        assert_int_equal(gp_store_load_state(s, c->pending_id, &got, &err), GP_ENOTFOUND);
        assert_int_equal(got.count, 0);
    }
    assert_reader_idle(s);

    gp_job_row jr;
    assert_int_equal(gp_store_job_get(s, "j1", &jr, &err), GP_OK);
    assert_string_equal(jr.status, c->status);
    gp_job_row_free(&jr);
    assert_reader_idle(s);
    c->checks++;
}

static void *check_committed_main(void *arg)
{
    check_committed(arg);
    return NULL;
}

/* The writer is in the middle of a transaction (its mutex held by this
 * thread): it is, and the reader is free. */
static void assert_writer_busy(gp_store *s)
{
    assert_int_equal(pthread_mutex_trylock(&s->w->mu), EBUSY);
    assert_int_equal(sqlite3_get_autocommit(SQ(s->w)), 0);
    for (size_t i = 0; i < s->n_readers; i++) {
        assert_int_equal(pthread_mutex_trylock(&s->readers[i]->mu), 0);
        pthread_mutex_unlock(&s->readers[i]->mu);
    }
}

/* Called by gp_store_save just before its COMMIT, writer's mutex held. */
static void save_hook(gp_store *s, int64_t model_id, void *arg)
{
    committed *c = arg;
    assert_ptr_equal(s, c->store);
    assert_writer_busy(s);
    /* The writer has the new version and its arrays (uncommitted)... */
    assert_int_equal(writer_int(s, "SELECT max(version) FROM models WHERE id = ?1", model_id),
                     c->version + 1);
    assert_true(writer_int(s, "SELECT count(*) FROM arrays WHERE model_id = ?1", model_id) >
                (long long)c->state->count);
    /* ...the reads see the committed data: from this thread (so they take
     * nothing the save holds) and from another one. */
    c->pending_id = model_id;
    check_committed(c);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, check_committed_main, c), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(c->checks, 2);
}

/* Reads of one store run side by side: with every reader but one held (as
 * by long reads on other threads) a read takes the free one at once, and
 * with all of them held it waits (checked by trylock, no timing). */
static void test_reads_beside_long_reads(void **state)
{
    (void)state;
    gp_store *s = sf_open_store("readers.db");
    assert_int_equal(s->n_readers, GP_STORE_READERS);
    gp_state st;
    make_state(&st);
    assert_int_equal(save_simple(s, "m", &st, NULL), GP_OK);
    for (size_t free_one = 0; free_one < s->n_readers; free_one++) {
        for (size_t i = 0; i < s->n_readers; i++)
            if (i != free_one)
                assert_int_equal(pthread_mutex_lock(&s->readers[i]->mu), 0);
        gp_store_conn *c = gp_store_reader_lock(s);
        assert_ptr_equal(c, s->readers[free_one]);
        pthread_mutex_unlock(&c->mu);
        gp_model_meta m;
        gp_error err;
        assert_int_equal(gp_store_meta(s, "m", 0, &m, &err), GP_OK);
        assert_int_equal(m.version, 1);
        gp_model_meta_free(&m);
        for (size_t i = 0; i < s->n_readers; i++)
            if (i != free_one)
                pthread_mutex_unlock(&s->readers[i]->mu);
    }
    gp_state_free(&st);
    gp_store_close(s);
}

static void test_reads_during_write(void **state)
{
    (void)state;
    gp_store *s = sf_open_store("busywriter.db");
    assert_int_equal(s->n_readers, GP_STORE_READERS);
    for (size_t i = 0; i < s->n_readers; i++)
        assert_true(s->readers[i] != s->w);
    gp_error err;
    gp_state a, b;
    make_state(&a);
    gp_state_init(&b);
    put_random(&b, "L", 40, 40); /* 12800 bytes: 200 parts of 64 */
    put_random(&b, "alpha", 40, 1);
    gp_store_set_part_bytes(s, 64);

    gp_model_meta m1, m2;
    assert_int_equal(save_simple(s, "m", &a, &m1), GP_OK);
    gp_job_row job;
    memset(&job, 0, sizeof job);
    snprintf(job.id, sizeof job.id, "j1");
    snprintf(job.model_name, sizeof job.model_name, "m");
    snprintf(job.status, sizeof job.status, "running");
    assert_int_equal(gp_store_job_put(s, &job, &err), GP_OK);
    assert_reader_idle(s);

    /* 1. A save in progress on this handle: reads see version 1 only. */
    committed c = {.store = s, .version = 1, .id = m1.id, .state = &a, .status = "running"};
    gp_store_set_save_hook(s, save_hook, &c);
    assert_int_equal(save_simple(s, "m", &b, &m2), GP_OK);
    gp_store_set_save_hook(s, NULL, NULL);
    assert_int_equal(c.checks, 2);
    assert_int_equal(m2.version, 2);
    assert_int_equal(m2.id, c.pending_id);
    /* Committed: the very next reads see all of it. */
    c = (committed){.store = s, .version = 2, .id = m2.id, .state = &b, .status = "running"};
    check_committed(&c);

    /* 2. The writer holds an open write transaction (its mutex held, as a
     * save, delete or job update would) that changes the job and deletes the
     * model: reads still see the committed state. */
    pthread_mutex_lock(&s->w->mu);
    assert_int_equal(sqlite3_exec(SQ(s->w),
                                  "BEGIN IMMEDIATE;"
                                  " UPDATE jobs SET status = 'succeeded' WHERE id = 'j1';"
                                  " DELETE FROM models WHERE name = 'm';",
                                  NULL, NULL, NULL),
                     SQLITE_OK);
    assert_writer_busy(s);
    c.checks = 0;
    check_committed(&c);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, check_committed_main, &c), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_int_equal(c.checks, 2);
    assert_int_equal(sqlite3_exec(SQ(s->w), "COMMIT", NULL, NULL, NULL), SQLITE_OK);
    pthread_mutex_unlock(&s->w->mu);
    /* After the commit the reads see the change. */
    gp_job_row jr;
    assert_int_equal(gp_store_job_get(s, "j1", &jr, &err), GP_OK);
    assert_string_equal(jr.status, "succeeded");
    gp_job_row_free(&jr);
    gp_model_meta m;
    assert_int_equal(gp_store_meta(s, "m", 0, &m, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "name");
    gp_state got;
    gp_state_init(&got);
    assert_int_equal(gp_store_load_state(s, m2.id, &got, &err), GP_ENOTFOUND);
    assert_reader_idle(s);

    /* 3. Every write is visible to the next read on the same handle. */
    for (int i = 1; i <= 20; i++) {
        assert_int_equal(save_simple(s, "m", i % 2 ? &a : &b, &m), GP_OK);
        int64_t id = m.id;
        assert_int_equal(m.version, i);
        gp_model_meta_free(&m);
        assert_int_equal(gp_store_meta(s, "m", 0, &m, &err), GP_OK);
        assert_int_equal(m.version, i);
        assert_int_equal(m.id, id);
        gp_model_meta_free(&m);
        gp_state_init(&got);
        assert_int_equal(gp_store_load_state(s, id, &got, &err), GP_OK);
        sf_assert_states_equal(i % 2 ? &a : &b, &got);
        gp_state_free(&got);
        snprintf(job.status, sizeof job.status, "s%d", i);
        assert_int_equal(gp_store_job_put(s, &job, &err), GP_OK);
        assert_int_equal(gp_store_job_get(s, "j1", &jr, &err), GP_OK);
        assert_string_equal(jr.status, job.status);
        gp_job_row_free(&jr);
        assert_reader_idle(s);
    }
    assert_int_equal(gp_store_delete(s, "m", &err), GP_OK);
    assert_int_equal(gp_store_meta(s, "m", 0, &m, &err), GP_ENOTFOUND);

    gp_model_meta_free(&m1);
    gp_model_meta_free(&m2);
    gp_state_free(&a);
    gp_state_free(&b);
    gp_store_close(s);
}

/* The reader connection cannot write. */
static void test_reader_is_read_only(void **state)
{
    (void)state;
    gp_store *s = sf_open_store("readonly.db");
    for (size_t i = 0; i < s->n_readers; i++)
        assert_int_equal(sqlite3_exec(SQ(s->readers[i]),
                                      "INSERT INTO jobs(id, status) VALUES('x', 'queued')", NULL,
                                      NULL, NULL) &
                             0xff,
                         SQLITE_READONLY);
    assert_reader_idle(s);
    gp_job_row jr;
    gp_error err;
    assert_int_equal(gp_store_job_get(s, "x", &jr, &err), GP_ENOTFOUND);
    gp_store_close(s);
}

/* An in-memory database cannot be shared by two connections: one does both. */
static void test_in_memory(void **state)
{
    (void)state;
    gp_store *s = NULL;
    gp_error err;
    assert_int_equal(gp_store_open(":memory:", &s, &err), GP_OK);
    assert_int_equal(s->n_readers, 1);
    assert_ptr_equal(s->readers[0], s->w);
    gp_state a, got;
    make_state(&a);
    gp_model_meta m;
    assert_int_equal(save_simple(s, "mem", &a, NULL), GP_OK);
    assert_int_equal(gp_store_meta(s, "mem", 0, &m, &err), GP_OK);
    assert_int_equal(m.version, 1);
    gp_state_init(&got);
    assert_int_equal(gp_store_load_state(s, m.id, &got, &err), GP_OK);
    sf_assert_states_equal(&a, &got);
    gp_state_free(&got);
    gp_model_meta_free(&m);
    gp_state_free(&a);
    gp_store_close(s);
}

/* ---- durable jobs -------------------------------------------------------- */

/* A queued job "id" of model "m" held by owner until lease, with a request
 * of X (n x 2) and y. */
static void create_job(gp_store *s, const char *id, const char *owner, double lease,
                       gp_state *req)
{
    gp_state_init(req);
    put_random(req, "X", 5, 2);
    put_random(req, "y", 5, 1);
    gp_job_row row;
    memset(&row, 0, sizeof row);
    snprintf(row.id, sizeof row.id, "%s", id);
    snprintf(row.model_name, sizeof row.model_name, "m-%s", id);
    snprintf(row.status, sizeof row.status, "queued");
    row.progress = "{\"iteration\":0}";
    gp_error err;
    assert_int_equal(gp_store_job_create(s, &row, "{\"name\":\"m\"}", req, owner, lease, &err),
                     GP_OK);
}

static int update_as(gp_store *s, const char *id, const char *owner, const char *status,
                     int started)
{
    gp_job_row row;
    memset(&row, 0, sizeof row);
    snprintf(row.id, sizeof row.id, "%s", id);
    snprintf(row.status, sizeof row.status, "%s", status);
    row.progress = "{\"iteration\":3}";
    gp_error err;
    return gp_store_job_update(s, &row, owner, started, &err);
}

static void assert_job_status(gp_store *s, const char *id, const char *status)
{
    gp_job_row row;
    gp_error err;
    assert_int_equal(gp_store_job_get(s, id, &row, &err), GP_OK);
    assert_string_equal(row.status, status);
    gp_job_row_free(&row);
}

/* The request comes back bit for bit; only the holder writes; ending drops it. */
static void test_durable_job_request_and_holder(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "durable.db");
    gp_store *s = sf_open_store("durable.db");
    gp_state req;
    create_job(s, "j1", "host:1:a", 1e12, &req);
    gp_job_row row;
    char *spec = NULL;
    gp_state back;
    gp_state_init(&back);
    gp_error err;
    assert_int_equal(gp_store_job_request(s, "j1", &row, &spec, &back, &err), GP_OK);
    assert_string_equal(spec, "{\"name\":\"m\"}");
    assert_string_equal(row.model_name, "m-j1");
    sf_assert_states_equal(&req, &back);
    free(spec);
    gp_job_row_free(&row);
    gp_state_free(&back);

    assert_int_equal(update_as(s, "j1", "host:2:b", "running", 1), GP_ECONFLICT);
    assert_int_equal(update_as(s, "j1", "host:1:a", "running", 1), GP_OK);
    assert_job_status(s, "j1", "running");
    assert_int_equal(sf_raw_int(path, "SELECT attempts FROM jobs WHERE id = 'j1'", NULL), 1);

    memset(&row, 0, sizeof row);
    snprintf(row.id, sizeof row.id, "j1");
    snprintf(row.status, sizeof row.status, "failed");
    row.error = "{\"code\":\"invalid_data\",\"message\":\"bad\"}";
    assert_int_equal(gp_store_job_finish(s, &row, "host:2:b", &err), GP_ECONFLICT);
    assert_int_equal(gp_store_job_finish(s, &row, "host:1:a", &err), GP_OK);
    assert_job_status(s, "j1", "failed");
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM job_arrays WHERE job_id = 'j1'", NULL),
                     0);
    gp_state_init(&back);
    assert_int_equal(gp_store_job_request(s, "j1", &row, &spec, &back, &err), GP_ENOTFOUND);
    /* Ended: no holder can touch it again. */
    assert_int_equal(update_as(s, "j1", "host:1:a", "running", 0), GP_ECONFLICT);
    gp_state_free(&req);
    gp_store_close(s);
}

static char *result_text(const gp_model_meta *meta, void *ctx)
{
    (void)ctx;
    char *t = malloc(64);
    snprintf(t, 64, "{\"version\":%d}", meta->version);
    return t;
}

/* A job's model and its end are one transaction; a lost job saves nothing. */
static void test_durable_job_save(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "durable_save.db");
    gp_store *s = sf_open_store("durable_save.db");
    gp_state req, st;
    create_job(s, "j2", "host:1:a", 1e12, &req);
    make_state(&st);
    gp_error err;
    gp_job_done lost = {"j2", "host:9:z", NULL, result_text, NULL};
    assert_int_equal(gp_store_save_job(s, "m-j2", "exact", "{}", "{}", 5, 2, &st, &lost, NULL,
                                       &err),
                     GP_ECONFLICT);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM models", NULL), 0);
    gp_job_done held = {"j2", "host:1:a", "{\"iteration\":7}", result_text, NULL};
    gp_model_meta meta;
    assert_int_equal(gp_store_save_job(s, "m-j2", "exact", "{}", "{}", 5, 2, &st, &held, &meta,
                                       &err),
                     GP_OK);
    assert_int_equal(meta.version, 1);
    gp_model_meta_free(&meta);
    gp_job_row row;
    assert_int_equal(gp_store_job_get(s, "j2", &row, &err), GP_OK);
    assert_string_equal(row.status, "succeeded");
    assert_string_equal(row.result, "{\"version\":1}");
    assert_string_equal(row.progress, "{\"iteration\":7}");
    gp_job_row_free(&row);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM job_arrays", NULL), 0);
    /* Saved once: running it again is refused. */
    assert_int_equal(gp_store_save_job(s, "m-j2", "exact", "{}", "{}", 5, 2, &st, &held, NULL,
                                       &err),
                     GP_ECONFLICT);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM models", NULL), 1);
    gp_state_free(&st);
    gp_state_free(&req);
    gp_store_close(s);
}

/* Leases: renewal lists what an owner holds; an expired job is claimed once;
 * interrupted runs count up to the limit; cancels from anywhere. */
static void test_durable_job_claims(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "durable_claim.db");
    gp_store *s = sf_open_store("durable_claim.db");
    gp_store *s2 = sf_open_store("durable_claim.db");
    gp_state req;
    gp_error err;
    create_job(s, "alive", "A", 1000.0, &req);
    gp_state_free(&req);
    create_job(s, "dead", "B", 10.0, &req);
    gp_state_free(&req);
    gp_job_hold *held = NULL;
    size_t n = 0;
    assert_int_equal(gp_store_job_renew(s, "A", 2000.0, &held, &n, &err), GP_OK);
    assert_int_equal(n, 1);
    assert_string_equal(held[0].id, "alive");
    free(held);

    /* At t = 500 only "dead" has expired: one claimer of two gets it. */
    gp_job_row row;
    int outcome = -1;
    assert_int_equal(gp_store_job_claim(s2, "C", 500.0, 600.0, 3, "{}", &row, &outcome, &err),
                     GP_OK);
    assert_int_equal(outcome, GP_JOB_CLAIMED);
    assert_string_equal(row.id, "dead");
    gp_job_row_free(&row);
    assert_int_equal(gp_store_job_claim(s, "D", 500.0, 600.0, 3, "{}", &row, &outcome, &err),
                     GP_OK);
    assert_int_equal(outcome, GP_JOB_CLAIM_NONE);
    assert_int_equal(update_as(s, "dead", "B", "running", 1), GP_ECONFLICT);

    /* "alive" ends; "dead" is run by C, which dies, and so do two more: the
     * third interrupted run is the last. */
    memset(&row, 0, sizeof row);
    snprintf(row.id, sizeof row.id, "alive");
    snprintf(row.status, sizeof row.status, "cancelled");
    assert_int_equal(gp_store_job_finish(s, &row, "A", &err), GP_OK);
    double t = 700.0;
    for (int run = 1; run <= 3; run++) {
        const char *owner = run == 1 ? "C" : run == 2 ? "E" : "F";
        assert_int_equal(update_as(s2, "dead", owner, "running", 1), GP_OK);
        t += 1000.0; /* its lease runs out */
        const char *next = run == 1 ? "E" : run == 2 ? "F" : "G";
        assert_int_equal(gp_store_job_claim(s, next, t, t + 100.0, 3,
                                            "{\"code\":\"interrupted\",\"message\":\"x\"}", &row,
                                            &outcome, &err),
                         GP_OK);
        if (run < 3) {
            assert_int_equal(outcome, GP_JOB_CLAIMED);
            assert_string_equal(row.id, "dead");
        } else {
            assert_int_equal(outcome, GP_JOB_CLAIM_GAVE_UP);
            assert_string_equal(row.id, "dead");
        }
        gp_job_row_free(&row);
    }
    assert_job_status(s, "dead", "failed");
    assert_int_equal(gp_store_job_get(s, "dead", &row, &err), GP_OK);
    assert_non_null(strstr(row.error, "interrupted"));
    assert_int_equal(row.attempts, 3);
    gp_job_row_free(&row);

    /* Cancel: a live holder gets a request (seen at its renewal); a dead one
     * is cancelled at once; an ended job is refused. */
    create_job(s, "c1", "H", 1e12, &req);
    gp_state_free(&req);
    create_job(s, "c2", "I", 5.0, &req);
    gp_state_free(&req);
    assert_int_equal(gp_store_job_cancel(s2, "c1", 100.0, &row, &outcome, &err), GP_OK);
    assert_int_equal(outcome, GP_JOB_CANCEL_REQUESTED);
    gp_job_row_free(&row);
    assert_int_equal(gp_store_job_renew(s, "H", 1e12, &held, &n, &err), GP_OK);
    assert_int_equal(n, 1);
    assert_int_equal(held[0].cancel_requested, 1);
    free(held);
    assert_int_equal(gp_store_job_cancel(s2, "c2", 100.0, &row, &outcome, &err), GP_OK);
    assert_int_equal(outcome, GP_JOB_CANCELLED_NOW);
    gp_job_row_free(&row);
    assert_job_status(s, "c2", "cancelled");
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM job_arrays WHERE job_id = 'c2'", NULL),
                     0);
    assert_int_equal(gp_store_job_cancel(s2, "c2", 100.0, &row, &outcome, &err), GP_OK);
    assert_int_equal(outcome, GP_JOB_CANCEL_ENDED);
    gp_job_row_free(&row);
    assert_int_equal(gp_store_job_cancel(s2, "nope", 100.0, &row, &outcome, &err),
                     GP_ENOTFOUND);

    /* Release: queued again, no owner, claimable at once; start-up listing. */
    assert_int_equal(update_as(s, "c1", "H", "running", 1), GP_OK);
    gp_job_owner *owned = NULL;
    assert_int_equal(gp_store_job_owned(s, "H", &owned, &n, &err), GP_OK);
    assert_int_equal(n, 1);
    assert_string_equal(owned[0].id, "c1");
    free(owned);
    assert_int_equal(gp_store_job_release(s, "c1", "H", &err), GP_OK);
    assert_job_status(s, "c1", "queued");
    assert_int_equal(sf_raw_int(path, "SELECT attempts FROM jobs WHERE id = 'c1'", NULL), 0);
    /* Claimable at once; its pending cancel request is carried out by the claimer. */
    assert_int_equal(gp_store_job_claim(s2, "J", 100.0, 1e12, 3, "{}", &row, &outcome, &err),
                     GP_OK);
    assert_int_equal(outcome, GP_JOB_CLAIM_CANCELLED);
    assert_string_equal(row.id, "c1");
    gp_job_row_free(&row);
    assert_job_status(s, "c1", "cancelled");

    /* Expire: the lease of a holder known dead ends at once (only its own). */
    create_job(s, "e1", "K", 1e12, &req);
    gp_state_free(&req);
    assert_int_equal(gp_store_job_expire(s, "e1", "not-K", &err), GP_OK);
    assert_int_equal(gp_store_job_claim(s2, "L", 100.0, 1e12, 3, "{}", &row, &outcome, &err),
                     GP_OK);
    assert_int_equal(outcome, GP_JOB_CLAIM_NONE);
    assert_int_equal(gp_store_job_expire(s, "e1", "K", &err), GP_OK);
    assert_int_equal(gp_store_job_claim(s2, "L", 100.0, 1e12, 3, "{}", &row, &outcome, &err),
                     GP_OK);
    assert_int_equal(outcome, GP_JOB_CLAIMED);
    assert_string_equal(row.id, "e1");
    gp_job_row_free(&row);
    assert_int_equal(update_as(s, "e1", "K", "running", 1), GP_ECONFLICT);
    assert_int_equal(update_as(s, "e1", "L", "running", 1), GP_OK);
    gp_store_close(s2);
    gp_store_close(s);
}

typedef struct claimer {
    const char *file, *owner;
    int claimed;
    pthread_barrier_t *start; /* all handles open before the first claim */
} claimer;

static void *claim_all(void *arg)
{
    claimer *c = arg;
    gp_store *s = sf_open_store(c->file);
    pthread_barrier_wait(c->start);
    for (;;) {
        gp_job_row row;
        int outcome = 0;
        gp_error err;
        if (gp_store_job_claim(s, c->owner, 50.0, 1e12, 3, "{}", &row, &outcome, &err) != GP_OK)
            fail_msg("claim: %s", err.message);
        gp_job_row_free(&row);
        if (outcome != GP_JOB_CLAIMED)
            break;
        c->claimed++;
    }
    gp_store_close(s);
    return NULL;
}

/* Four threads with their own handles claim 40 expired jobs: each exactly
 * once (SQLite: the write lock; PostgreSQL: FOR UPDATE SKIP LOCKED). */
static void test_durable_job_claim_race(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "durable_race.db");
    gp_store *s = sf_open_store("durable_race.db");
    for (int i = 0; i < 40; i++) {
        char id[16];
        snprintf(id, sizeof id, "r%d", i);
        gp_state req;
        create_job(s, id, "dead", 1.0, &req);
        gp_state_free(&req);
    }
    enum { CLAIMERS = 4 };
    static const char *const owners[CLAIMERS] = {"A", "B", "C", "D"};
    claimer c[CLAIMERS];
    pthread_t th[CLAIMERS];
    pthread_barrier_t start;
    assert_int_equal(pthread_barrier_init(&start, NULL, CLAIMERS), 0);
    for (int i = 0; i < CLAIMERS; i++) {
        c[i] = (claimer){"durable_race.db", owners[i], 0, &start};
        assert_int_equal(pthread_create(&th[i], NULL, claim_all, &c[i]), 0);
    }
    int total = 0;
    for (int i = 0; i < CLAIMERS; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        total += c[i].claimed;
        assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM jobs WHERE owner = ?1", owners[i]),
                         c[i].claimed);
    }
    pthread_barrier_destroy(&start);
    /* Every job once: 40 claims, and each job has exactly one of the owners. */
    assert_int_equal(total, 40);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM jobs WHERE owner IN ('A', 'B', 'C',"
                                      " 'D') AND lease_until > 1e11",
                                NULL),
                     40);
    gp_store_close(s);
}

/* A version 1 database whose jobs were queued or running when its daemon
 * stopped: they kept no request, so the migration ends them failed. */
static void test_durable_migration_from_v1(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "v1.db");
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open(path, &db), SQLITE_OK);
    assert_int_equal(
        sqlite3_exec(db,
                     "CREATE TABLE models(id INTEGER PRIMARY KEY, name TEXT NOT NULL,"
                     " version INTEGER NOT NULL, method TEXT NOT NULL, spec TEXT NOT NULL,"
                     " info TEXT NOT NULL, n_train INTEGER, input_dim INTEGER, created_at TEXT,"
                     " UNIQUE(name, version));"
                     "CREATE TABLE arrays(model_id INTEGER REFERENCES models(id) ON DELETE"
                     " CASCADE, key TEXT, part INTEGER NOT NULL DEFAULT 0, rows INTEGER,"
                     " cols INTEGER, data BLOB, PRIMARY KEY(model_id, key, part));"
                     "CREATE TABLE jobs(id TEXT PRIMARY KEY, model_name TEXT, status TEXT,"
                     " progress TEXT, error TEXT, result TEXT, created_at TEXT,"
                     " updated_at TEXT);"
                     "INSERT INTO jobs(id, status) VALUES('stuck', 'running'), ('done', 'succeeded');"
                     "PRAGMA user_version = 1;",
                     NULL, NULL, NULL),
        SQLITE_OK);
    sqlite3_close(db);
    gp_store *s = sf_open_store("v1.db");
    assert_job_status(s, "stuck", "failed");
    assert_job_status(s, "done", "succeeded");
    gp_job_row row;
    gp_error err;
    assert_int_equal(gp_store_job_get(s, "stuck", &row, &err), GP_OK);
    assert_non_null(strstr(row.error, "\"interrupted\""));
    gp_job_row_free(&row);
    gp_store_close(s);
}

/* Retention: ended jobs older than the cut-off go, active and recent ones stay. */
static void test_durable_job_prune(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "durable_prune.db");
    gp_store *s = sf_open_store("durable_prune.db");
    gp_state req;
    gp_error err;
    const char *ids[] = {"old-done", "new-done", "old-active"};
    for (int i = 0; i < 3; i++) {
        create_job(s, ids[i], "A", 1e12, &req);
        gp_state_free(&req);
    }
    for (int i = 0; i < 2; i++) {
        gp_job_row row;
        memset(&row, 0, sizeof row);
        snprintf(row.id, sizeof row.id, "%s", ids[i]);
        snprintf(row.status, sizeof row.status, "succeeded");
        assert_int_equal(gp_store_job_finish(s, &row, "A", &err), GP_OK);
    }
    sf_raw_exec(path, "UPDATE jobs SET updated_at = '2020-01-01T00:00:00Z' WHERE id LIKE 'old-%'",
             NULL);
    size_t deleted = 99;
    assert_int_equal(gp_store_job_prune(s, "2021-01-01T00:00:00Z", &deleted, &err), GP_OK);
    assert_int_equal(deleted, 1);
    gp_job_row row;
    assert_int_equal(gp_store_job_get(s, "old-done", &row, &err), GP_ENOTFOUND);
    assert_job_status(s, "new-done", "succeeded");
    assert_job_status(s, "old-active", "queued");
    assert_int_equal(
        sf_raw_int(path, "SELECT count(*) FROM job_arrays WHERE job_id = 'old-active'", NULL), 2);
    assert_int_equal(gp_store_job_prune(s, "2021-01-01T00:00:00Z", &deleted, &err), GP_OK);
    assert_int_equal(deleted, 0);
    gp_store_close(s);
}

/* ---- idempotency keys ----------------------------------------------------- */

static char *answer_of_row(const gp_model_meta *meta, void *ctx)
{
    (void)ctx;
    char *t = malloc(128);
    if (t)
        snprintf(t, 128, "{\"name\":\"%s\",\"version\":%d}", meta->name, meta->version);
    return t;
}

static gp_idem_put idem_of(const char *scope, const char *key, const char *fp, int status,
                           const char *body)
{
    gp_idem_put p = {.scope = scope, .key = key, .fingerprint = fp, .status = status,
                     .body = body, .make_body = body ? NULL : answer_of_row};
    return p;
}

static void assert_recorded(gp_store *s, const char *scope, const char *key, const char *fp,
                            int status, const char *body)
{
    gp_idem_row row;
    gp_error err;
    if (gp_store_idem_get(s, scope, key, &row, &err))
        fail_msg("key %s/%s: %s", scope, key, err.message);
    assert_string_equal(row.fingerprint, fp);
    assert_int_equal(row.status, status);
    assert_string_equal(row.body, body);
    assert_int_equal(strlen(row.created_at), 20);
    gp_idem_row_free(&row);
}

static void assert_key_taken(int rc, const gp_error *err)
{
    assert_int_equal(rc, GP_ECONFLICT);
    assert_string_equal(err->field, GP_STORE_KEY_TAKEN);
}

/* A keyed save records its answer (made from the new row) with the version;
 * the same (scope, key) again writes nothing and says so; another scope is
 * another key. */
static void test_idem_save(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "idem_save.db");
    gp_store *s = sf_open_store("idem_save.db");
    gp_state st;
    make_state(&st);
    gp_error err;
    gp_idem_row row;
    assert_int_equal(gp_store_idem_get(s, "fit:m", "k1", &row, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "key");
    gp_idem_put p = idem_of("fit:m", "k1", "fp-a", 201, NULL);
    gp_model_meta meta;
    assert_int_equal(gp_store_save_keyed(s, "m", "exact", "{}", "{}", 5, 2, &st, NULL, &p, &meta,
                                         &err),
                     GP_OK);
    assert_int_equal(meta.version, 1);
    gp_model_meta_free(&meta);
    assert_recorded(s, "fit:m", "k1", "fp-a", 201, "{\"name\":\"m\",\"version\":1}");
    const long long arrays = sf_raw_int(path, "SELECT count(*) FROM arrays", NULL);
    /* A retry: nothing saved, whatever its fingerprint. */
    for (int i = 0; i < 2; i++) {
        gp_idem_put again = idem_of("fit:m", "k1", i ? "fp-other" : "fp-a", 201, NULL);
        assert_key_taken(gp_store_save_keyed(s, "m", "exact", "{}", "{}", 5, 2, &st, NULL,
                                             &again, &meta, &err),
                         &err);
        assert_int_equal(meta.version, 0);
    }
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM models", NULL), 1);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM arrays", NULL), arrays);
    assert_recorded(s, "fit:m", "k1", "fp-a", 201, "{\"name\":\"m\",\"version\":1}");
    /* The key in another scope, and a save without a key, are new writes. */
    gp_idem_put other = idem_of("observe:m", "k1", "fp-a", 200, NULL);
    assert_int_equal(gp_store_save_keyed(s, "m", "exact", "{}", "{}", 5, 2, &st, NULL, &other,
                                         NULL, &err),
                     GP_OK);
    assert_int_equal(gp_store_save(s, "m", "exact", "{}", "{}", 5, 2, &st, NULL, &err), GP_OK);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM models", NULL), 3);
    assert_recorded(s, "observe:m", "k1", "fp-a", 200, "{\"name\":\"m\",\"version\":2}");
    gp_state_free(&st);
    gp_store_close(s);
}

/* Texts out of range are refused before anything is written. */
static void test_idem_invalid(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "idem_invalid.db");
    gp_store *s = sf_open_store("idem_invalid.db");
    gp_state st;
    make_state(&st);
    gp_error err;
    char long_key[GP_IDEM_KEY_MAX + 2];
    memset(long_key, 'k', sizeof long_key - 1);
    long_key[sizeof long_key - 1] = '\0';
    const struct {
        gp_idem_put put;
        const char *field;
    } bad[] = {
        {idem_of("fit:m", "", "fp", 201, NULL), "key"},
        {idem_of("fit:m", long_key, "fp", 201, NULL), "key"},
        {idem_of("", "k", "fp", 201, NULL), "scope"},
        {idem_of("fit:m", "k", NULL, 201, NULL), "fingerprint"},
        {idem_of("fit:m", "k", "fp", 201, NULL), "body"}, /* no body, no maker */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        gp_idem_put p = bad[i].put;
        if (i == 4)
            p.make_body = NULL;
        assert_int_equal(gp_store_save_keyed(s, "m", "exact", "{}", "{}", 5, 2, &st, NULL, &p,
                                             NULL, &err),
                         GP_EINVAL);
        assert_string_equal(err.field, bad[i].field);
    }
    gp_idem_row row;
    assert_int_equal(gp_store_idem_get(s, "fit:m", long_key, &row, &err), GP_EINVAL);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM models", NULL), 0);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM idempotency", NULL), 0);
    gp_state_free(&st);
    gp_store_close(s);
}

/* A keyed job is created once: the retry's job row and request are not. */
static void test_idem_job_create(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "idem_job.db");
    gp_store *s = sf_open_store("idem_job.db");
    gp_state req;
    gp_state_init(&req);
    put_random(&req, "X", 5, 2);
    put_random(&req, "y", 5, 1);
    gp_error err;
    const char *ids[] = {"job-a", "job-b"};
    for (int i = 0; i < 2; i++) {
        gp_job_row row;
        memset(&row, 0, sizeof row);
        snprintf(row.id, sizeof row.id, "%s", ids[i]);
        snprintf(row.model_name, sizeof row.model_name, "m");
        snprintf(row.status, sizeof row.status, "queued");
        row.progress = "{\"iteration\":0}";
        char body[64];
        snprintf(body, sizeof body, "{\"job\":\"%s\"}", ids[i]);
        gp_idem_put p = idem_of("fit:m", "k-job", "fp", 202, body);
        int rc = gp_store_job_create_keyed(s, &row, "{\"name\":\"m\"}", &req, "A", 1e12, &p, &err);
        if (i == 0)
            assert_int_equal(rc, GP_OK);
        else
            assert_key_taken(rc, &err);
    }
    gp_job_row row;
    assert_int_equal(gp_store_job_get(s, "job-a", &row, &err), GP_OK);
    gp_job_row_free(&row);
    assert_int_equal(gp_store_job_get(s, "job-b", &row, &err), GP_ENOTFOUND);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM job_arrays WHERE job_id = 'job-b'",
                                NULL),
                     0);
    assert_recorded(s, "fit:m", "k-job", "fp", 202, "{\"job\":\"job-a\"}");
    gp_state_free(&req);
    gp_store_close(s);
}

/* A keyed observation is logged once: the retry appends nothing. */
static void test_idem_observe(void **state)
{
    (void)state;
    gp_store *s = sf_open_store("idem_observe.db");
    gp_state st, batch;
    make_state(&st);
    gp_error err;
    gp_model_meta meta;
    assert_int_equal(gp_store_save(s, "m", "exact", "{}", "{}", 5, 2, &st, &meta, &err), GP_OK);
    gp_state_init(&batch);
    put_random(&batch, "X", 2, 2);
    put_random(&batch, "y", 2, 1);
    gp_idem_put p = idem_of("observe:m", "k-obs", "fp", 200, "{\"observations\":1}");
    uint64_t seq = 0;
    assert_int_equal(gp_store_observe_keyed(s, meta.id, 0, &batch, 7, NULL, &p, &seq, &err),
                     GP_OK);
    assert_int_equal(seq, 1);
    assert_key_taken(gp_store_observe_keyed(s, meta.id, 1, &batch, 9, NULL, &p, &seq, &err),
                     &err);
    assert_int_equal(seq, 0);
    gp_model_meta now;
    assert_int_equal(gp_store_meta(s, "m", 1, &now, &err), GP_OK);
    assert_int_equal(now.obs_seq, 1);
    assert_int_equal(now.n_train, 7);
    gp_model_meta_free(&now);
    assert_recorded(s, "observe:m", "k-obs", "fp", 200, "{\"observations\":1}");
    /* An observe without a key is not held up by the key. */
    assert_int_equal(gp_store_observe(s, meta.id, 1, &batch, 9, NULL, &seq, &err), GP_OK);
    assert_int_equal(seq, 2);
    gp_model_meta_free(&meta);
    gp_state_free(&batch);
    gp_state_free(&st);
    gp_store_close(s);
}

/* Keys made before the cut-off go; the others stay. */
static void test_idem_prune(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "idem_prune.db");
    gp_store *s = sf_open_store("idem_prune.db");
    gp_state st;
    make_state(&st);
    gp_error err;
    const char *keys[] = {"old-1", "old-2", "new-1"};
    for (int i = 0; i < 3; i++) {
        gp_idem_put p = idem_of("fit:m", keys[i], "fp", 201, NULL);
        assert_int_equal(gp_store_save_keyed(s, "m", "exact", "{}", "{}", 5, 2, &st, NULL, &p,
                                             NULL, &err),
                         GP_OK);
    }
    sf_raw_exec(path, "UPDATE idempotency SET created_at = '2020-01-01T00:00:00Z'"
                      " WHERE key LIKE 'old-%'", NULL);
    size_t deleted = 99;
    assert_int_equal(gp_store_idem_prune(s, "2021-01-01T00:00:00Z", &deleted, &err), GP_OK);
    assert_int_equal(deleted, 2);
    gp_idem_row row;
    assert_int_equal(gp_store_idem_get(s, "fit:m", "old-1", &row, &err), GP_ENOTFOUND);
    assert_recorded(s, "fit:m", "new-1", "fp", 201, "{\"name\":\"m\",\"version\":3}");
    assert_int_equal(gp_store_idem_prune(s, "2021-01-01T00:00:00Z", &deleted, &err), GP_OK);
    assert_int_equal(deleted, 0);
    /* A pruned key is free again. */
    gp_idem_put p = idem_of("fit:m", "old-1", "fp", 201, NULL);
    assert_int_equal(gp_store_save_keyed(s, "m", "exact", "{}", "{}", 5, 2, &st, NULL, &p, NULL,
                                         &err),
                     GP_OK);
    gp_state_free(&st);
    gp_store_close(s);
}

/* Writers of one key on handles of their own (replicas on one database) at
 * once: exactly one writes, every other is told the key is taken. */
typedef struct idem_racer {
    const char *file;
    pthread_barrier_t *start;
    int rc;
    char field[GP_ERROR_FIELD_LEN];
} idem_racer;

static void *idem_race(void *arg)
{
    idem_racer *r = arg;
    gp_store *s = sf_open_store(r->file);
    gp_state st;
    make_state(&st);
    gp_idem_put p = idem_of("fit:race", "k-race", "fp", 201, NULL);
    gp_error err;
    gp_error_clear(&err);
    pthread_barrier_wait(r->start);
    r->rc = gp_store_save_keyed(s, "race", "exact", "{}", "{}", 5, 2, &st, NULL, &p, NULL, &err);
    snprintf(r->field, sizeof r->field, "%s", err.field);
    gp_state_free(&st);
    gp_store_close(s);
    return NULL;
}

static void test_idem_race(void **state)
{
    (void)state;
    enum { RACERS = 4 };
    char path[256];
    sf_db_path(path, sizeof path, "idem_race.db");
    gp_store_close(sf_open_store("idem_race.db")); /* created and migrated once */
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, RACERS);
    idem_racer r[RACERS];
    pthread_t th[RACERS];
    for (int i = 0; i < RACERS; i++) {
        r[i] = (idem_racer){.file = "idem_race.db", .start = &start};
        pthread_create(&th[i], NULL, idem_race, &r[i]);
    }
    int ok = 0;
    for (int i = 0; i < RACERS; i++) {
        pthread_join(th[i], NULL);
        if (r[i].rc == GP_OK)
            ok++;
        else {
            assert_int_equal(r[i].rc, GP_ECONFLICT);
            assert_string_equal(r[i].field, GP_STORE_KEY_TAKEN);
        }
    }
    pthread_barrier_destroy(&start);
    assert_int_equal(ok, 1);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM models WHERE name = 'race'", NULL), 1);
}

/* ---- PostgreSQL's own machinery ------------------------------------------ */

typedef struct opener {
    const char *path;
    int rc;
    char message[GP_ERROR_MESSAGE_LEN];
} opener;

static void *open_and_save(void *arg)
{
    opener *o = arg;
    gp_store *s = NULL;
    gp_error err;
    o->rc = gp_store_open(o->path, &s, &err);
    if (o->rc == GP_OK)
        o->rc = gp_store_save(s, "first", "exact", "{}", "{}", 1, 1, NULL, NULL, &err);
    if (o->rc)
        snprintf(o->message, sizeof o->message, "%s", err.message);
    gp_store_close(s);
    return NULL;
}

/* A fresh database is migrated once however many open it at the same time
 * (the advisory lock); the version is in gpserve_schema; a newer one is
 * refused. */
static void test_pg_open_and_migrate(void **state)
{
    (void)state;
    enum { OPENERS = 6 };
    char path[512];
    sf_db_path(path, sizeof path, "fresh.db");
    opener o[OPENERS];
    pthread_t th[OPENERS];
    for (int i = 0; i < OPENERS; i++) {
        o[i] = (opener){.path = path, .rc = -1};
        assert_int_equal(pthread_create(&th[i], NULL, open_and_save, &o[i]), 0);
    }
    for (int i = 0; i < OPENERS; i++) {
        assert_int_equal(pthread_join(th[i], NULL), 0);
        if (o[i].rc)
            fail_msg("opener %d: %s", i, o[i].message);
    }
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM gpserve_schema", NULL), 1);
    assert_int_equal(sf_raw_int(path, "SELECT version FROM gpserve_schema", NULL),
                     GP_STORE_SCHEMA_VERSION);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM information_schema.tables"
                                      " WHERE table_schema = current_schema() AND table_name IN"
                                      " ('models', 'arrays', 'jobs', 'job_arrays',"
                                      " 'observations', 'snapshots')",
                                NULL),
                     6);
    /* The six savers each got their own version. */
    assert_int_equal(sf_raw_int(path, "SELECT count(DISTINCT version) FROM models", NULL), 6);
    assert_int_equal(sf_raw_int(path, "SELECT max(version) FROM models", NULL), 6);
    /* Reopened: nothing to do, the data are kept. */
    gp_store *s = sf_open_store("fresh.db");
    gp_model_meta m;
    gp_error err;
    assert_int_equal(gp_store_meta(s, "first", 0, &m, &err), GP_OK);
    assert_int_equal(m.version, 6);
    gp_model_meta_free(&m);
    gp_store_close(s);
    sf_raw_exec(path, "UPDATE gpserve_schema SET version = 99", NULL);
    s = (gp_store *)&s;
    assert_int_equal(gp_store_open(path, &s, &err), GP_ENOTREADY);
    assert_null(s);
    assert_non_null(strstr(err.message, "99"));
}

/* A wrong password: not ready, and no password in the message. */
static void test_pg_wrong_password(void **state)
{
    (void)state;
    char path[512];
    sf_db_path(path, sizeof path, "auth.db");
    /* postgresql://gptest:PASSWORD@host...: swap the password. */
    const char *colon = strchr(path + strlen("postgresql://"), ':');
    const char *at = strchr(path, '@');
    assert_non_null(colon);
    assert_non_null(at);
    char right[128], bad[600];
    snprintf(right, sizeof right, "%.*s", (int)(at - colon - 1), colon + 1);
    assert_true(strlen(right) >= 8);
    snprintf(bad, sizeof bad, "%.*sWrongPassword42%s", (int)(colon + 1 - path), path, at);
    gp_store *s = (gp_store *)&s;
    gp_error err;
    assert_int_equal(gp_store_open(bad, &s, &err), GP_ENOTREADY);
    assert_null(s);
    assert_null(strstr(err.message, "WrongPassword42"));
    assert_null(strstr(err.message, right));
    assert_non_null(strstr(err.message, "***"));
    assert_non_null(strstr(err.message, "password authentication failed"));
    /* A server that is not there: not ready too. */
    assert_int_equal(gp_store_open("postgresql://gptest:secret9@127.0.0.1:1/x", &s, &err),
                     GP_ENOTREADY);
    assert_null(strstr(err.message, "secret9"));
}

/* The server drops the store's connections (as a restart does): the next
 * calls reconnect, without a new gp_store. */
static void test_pg_reconnect(void **state)
{
    (void)state;
    char path[512], tagged[600], app[64];
    sf_db_path(path, sizeof path, "reconnect.db");
    snprintf(app, sizeof app, "gp_reconnect_%ld", (long)getpid());
    snprintf(tagged, sizeof tagged, "%s&application_name=%s", path, app);
    gp_store *s = NULL;
    gp_error err;
    assert_int_equal(gp_store_open(tagged, &s, &err), GP_OK);
    gp_state st;
    make_state(&st);
    assert_int_equal(save_simple(s, "r", &st, NULL), GP_OK);
    for (int round = 0; round < 2; round++) {
        /* Every connection the first time; the second time the writer and
         * the readers the first round's reads took again (at least one), not
         * the log reader nor the readers unused since, still down. */
        long long up = sf_raw_int(path, "SELECT count(pg_terminate_backend(pid))"
                                         " FROM pg_stat_activity WHERE application_name = ?1",
                                  app);
        if (round == 0)
            assert_int_equal(up, 2 + GP_STORE_READERS);
        else
            assert_true(up >= 2 && up <= 1 + GP_STORE_READERS);
        /* Gone for sure (the signal is asynchronous) before the store is used. */
        for (int i = 0; i < 500 && sf_raw_int(path, "SELECT count(*) FROM pg_stat_activity"
                                                     " WHERE application_name = ?1",
                                               app) > 0;
             i++)
            nanosleep(&(struct timespec){.tv_nsec = 10000000L}, NULL);
        assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM pg_stat_activity"
                                          " WHERE application_name = ?1",
                                    app),
                         0);
        /* Reads (the reader's statement runs again on a new connection), a
         * save (its BEGIN does), a load. */
        gp_model_meta m;
        assert_int_equal(gp_store_meta(s, "r", 0, &m, &err), GP_OK);
        assert_int_equal(m.version, round + 1);
        gp_model_meta_free(&m);
        assert_int_equal(save_simple(s, "r", &st, &m), GP_OK);
        gp_state got;
        gp_state_init(&got);
        assert_int_equal(gp_store_load_state(s, m.id, &got, &err), GP_OK);
        sf_assert_states_equal(&st, &got);
        gp_state_free(&got);
        gp_model_meta_free(&m);
    }
    gp_state_free(&st);
    gp_store_close(s);
}

/* The password never shows (what the daemon logs). */
static void test_redact(void **state)
{
    (void)state;
    static const char *const cases[][2] = {
        {"postgresql://u:pw@h:5432/db", "postgresql://u:***@h:5432/db"},
        {"postgres://u:p%40w@h/db?sslmode=require&password=x&a=b",
         "postgres://u:***@h/db?sslmode=require&password=***&a=b"},
        {"postgresql://u@h/db", "postgresql://u@h/db"},
        {"postgresql://h/db?password=abc", "postgresql://h/db?password=***"},
        {"POSTGRESQL://u:pw@h", "POSTGRESQL://u:***@h"},
        {"/var/lib/gpserve/gp:w@x.db", "/var/lib/gpserve/gp:w@x.db"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char out[256];
        gp_store_redact(cases[i][0], out, sizeof out);
        assert_string_equal(out, cases[i][1]);
    }
    char small[8];
    gp_store_redact("postgresql://u:pw@h", small, sizeof small);
    assert_int_equal(strlen(small), 7);
}

int main(void)
{
    /* What every back end does alike: once on SQLite, once on PostgreSQL. */
    const struct CMUnitTest both[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_versions_and_list),
        cmocka_unit_test(test_meta_brief),
        cmocka_unit_test(test_not_found_and_invalid),
        cmocka_unit_test(test_delete),
        cmocka_unit_test(test_jobs),
        cmocka_unit_test(test_durable_job_request_and_holder),
        cmocka_unit_test(test_durable_job_save),
        cmocka_unit_test(test_durable_job_claims),
        cmocka_unit_test(test_durable_job_claim_race),
        cmocka_unit_test(test_durable_job_prune),
        cmocka_unit_test(test_idem_save),
        cmocka_unit_test(test_idem_invalid),
        cmocka_unit_test(test_idem_job_create),
        cmocka_unit_test(test_idem_observe),
        cmocka_unit_test(test_idem_prune),
        cmocka_unit_test(test_idem_race),
        cmocka_unit_test(test_multipart),
        cmocka_unit_test(test_two_handles),
        cmocka_unit_test(test_threads_shared_handle),
        cmocka_unit_test(test_threads_own_handles),
        cmocka_unit_test(test_processes),
    };
    const struct CMUnitTest sqlite_only[] = {
        cmocka_unit_test(test_now_and_codec),
        cmocka_unit_test(test_sql_to_pg),
        cmocka_unit_test(test_sql_text),
        cmocka_unit_test(test_redact),
        cmocka_unit_test(test_open_schema_and_reopen),
        cmocka_unit_test(test_open_failures),
        cmocka_unit_test(test_durable_migration_from_v1),
        cmocka_unit_test(test_corrupt_file),
        cmocka_unit_test(test_waits_for_write_lock),
        cmocka_unit_test(test_reads_during_write),
        cmocka_unit_test(test_reads_beside_long_reads),
        cmocka_unit_test(test_reader_is_read_only),
        cmocka_unit_test(test_in_memory),
    };
    const struct CMUnitTest pg_only[] = {
        cmocka_unit_test(test_pg_open_and_migrate),
        cmocka_unit_test(test_pg_wrong_password),
        cmocka_unit_test(test_pg_reconnect),
    };
    const struct CMUnitTest pg_unavailable[] = {
        cmocka_unit_test(sf_test_pg_unavailable),
    };
    int failed = cmocka_run_group_tests_name("store on SQLite", both, group_setup,
                                             sf_group_teardown);
    failed += cmocka_run_group_tests_name("store, SQLite only", sqlite_only, group_setup,
                                          sf_group_teardown);
    if (!sf_pg_available())
        return failed + cmocka_run_group_tests_name("store on PostgreSQL", pg_unavailable, NULL,
                                                    NULL);
    failed += cmocka_run_group_tests_name("store on PostgreSQL", both, group_setup_pg,
                                          sf_teardown_pg);
    failed += cmocka_run_group_tests_name("store, PostgreSQL only", pg_only, group_setup_pg,
                                          sf_teardown_pg);
    return failed;
}
