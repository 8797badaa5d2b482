/* Scaffolding shared by the store's unit tests (test_store*.c,
 * test_store_observe*.c; through store_model_fixture.h and
 * store_observe_fixture.h): the back end under test, a temporary directory for
 * the SQLite databases (or a PostgreSQL schema per database name), handles
 * on them, a raw connection (sqlite3 or libpq) that inspects and corrupts
 * the data behind the store's back, a xorshift64* stream and array builders
 * for states, and a bit-for-bit comparison of states.
 *
 * One test body runs over every back end (as GSL's multimin tests run one
 * body over every minimiser): a test opens its databases by name
 * (sf_open_store("x.db"), sf_db_path) and inspects them with the sf_raw_*
 * helpers, which take what sf_db_path gave: a file path under SQLite, a
 * postgresql:// URL whose search_path is the schema of that name under
 * PostgreSQL (sf_pg = 1; the server is GPSERVE_TEST_PG_URL, which
 * tests/run.sh sets to a throw-away cluster, tests/support/pgtmp.sh). The
 * raw SQL is written to run on both (numbered parameters are written ?1 and
 * become $1 for PostgreSQL).
 *
 * Header-only (static inline), as testutil.h and api_testutil.h: the
 * benchmarks link every support object of tests/unit without cmocka, sqlite
 * or the store library, so these helpers cannot live in a .c file there.
 * Include after cmocka.h. */
#ifndef GP_STORE_FIXTURE_H
#define GP_STORE_FIXTURE_H

#include <dirent.h>
#include <libpq-fe.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/store.h"
#include "store/store_internal.h"

/* The SQLite handle of a store connection (the tests inspect it). */
#define SQ(conn) ((sqlite3 *)gp_db_sqlite_handle((conn)->db))

/* ---- the temporary directory ---------------------------------------------- */

/* Every database of a test program lives here: made by the group setup,
 * emptied and removed by the group teardown. */
static char sf_tmpdir[64];

/* mkdtemp of /tmp/<name>-XXXXXX; 0 or -1, as a cmocka group setup returns. */
static inline int sf_tmpdir_make(const char *name)
{
    snprintf(sf_tmpdir, sizeof sf_tmpdir, "/tmp/%s-XXXXXX", name);
    return mkdtemp(sf_tmpdir) ? 0 : -1;
}

/* Removes the files in the directory (the databases, their -wal and -shm)
 * and then the directory itself. */
static inline int sf_tmpdir_remove(void)
{
    DIR *d = opendir(sf_tmpdir);
    if (d) {
        struct dirent *e;
        char path[512];
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
                continue;
            snprintf(path, sizeof path, "%s/%s", sf_tmpdir, e->d_name);
            unlink(path);
        }
        closedir(d);
    }
    return rmdir(sf_tmpdir);
}

/* sf_tmpdir_remove as a cmocka group teardown. */
static inline int sf_group_teardown(void **state)
{
    (void)state;
    return sf_tmpdir_remove();
}

/* ---- the back end -------------------------------------------------------- */

static int sf_pg;                   /* 1 while the tests run on PostgreSQL */
static const char *sf_pg_url;       /* GPSERVE_TEST_PG_URL */
static char sf_schema_prefix[32];   /* gp<pid>_: this program's schemas */

static inline int sf_is_url(const char *path)
{
    return strncmp(path, "postgresql://", 13) == 0 || strncmp(path, "postgres://", 11) == 0;
}

/* A raw libpq connection to url; fails the test when it cannot connect. */
static inline PGconn *sf_pg_connect(const char *url)
{
    PGconn *c = PQconnectdb(url);
    if (PQstatus(c) != CONNECTION_OK)
        fail_msg("cannot connect to the test PostgreSQL: %s", PQerrorMessage(c));
    PQclear(PQexec(c, "SET client_min_messages = warning"));
    return c;
}

/* Run a script of statements (simple protocol); fails the test on error. */
static inline void sf_pg_script(const char *url, const char *sql)
{
    PGconn *c = sf_pg_connect(url);
    PGresult *res = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(res);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        fail_msg("%s: %s", sql, PQresultErrorMessage(res));
    PQclear(res);
    PQfinish(c);
}

/* The URL of the database named file: the schema gp<pid>_<file> (the
 * characters other than letters and digits as '_'), made if need be. */
static inline void sf_pg_db_url(char *out, size_t size, const char *file)
{
    char schema[64];
    snprintf(schema, sizeof schema, "%s%s", sf_schema_prefix, file);
    for (char *p = schema; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9')))
            *p = (*p >= 'A' && *p <= 'Z') ? (char)(*p - 'A' + 'a') : '_';
    char sql[128];
    snprintf(sql, sizeof sql, "CREATE SCHEMA IF NOT EXISTS %s", schema);
    sf_pg_script(sf_pg_url, sql);
    snprintf(out, size, "%s%soptions=-csearch_path%%3D%s", sf_pg_url,
             strchr(sf_pg_url, '?') ? "&" : "?", schema);
}

/* Group setups: the SQLite group keeps its files in a temporary directory;
 * the PostgreSQL group uses schemas of the server at GPSERVE_TEST_PG_URL. */
static inline int sf_setup_sqlite(const char *name)
{
    sf_pg = 0;
    return sf_tmpdir_make(name);
}

static inline int sf_setup_pg(const char *name)
{
    sf_pg = 1;
    sf_pg_url = getenv("GPSERVE_TEST_PG_URL");
    snprintf(sf_schema_prefix, sizeof sf_schema_prefix, "gp%ld_", (long)getpid());
    return sf_pg_url && sf_pg_url[0] ? sf_tmpdir_make(name) : -1;
}

/* 1 when a PostgreSQL server is given to test against. */
static inline int sf_pg_available(void)
{
    const char *u = getenv("GPSERVE_TEST_PG_URL");
    return u && u[0];
}

/* The PostgreSQL group's teardown: drop this program's schemas. */
static inline int sf_teardown_pg(void **state)
{
    char sql[512];
    snprintf(sql, sizeof sql,
             "DO $$ DECLARE r record; BEGIN FOR r IN SELECT nspname FROM pg_namespace"
             " WHERE starts_with(nspname, '%s') LOOP EXECUTE 'DROP SCHEMA ' ||"
             " quote_ident(r.nspname) || ' CASCADE'; END LOOP; END $$",
             sf_schema_prefix);
    PGconn *c = PQconnectdb(sf_pg_url);
    if (PQstatus(c) == CONNECTION_OK) {
        PQclear(PQexec(c, "SET client_min_messages = warning"));
        PQclear(PQexec(c, sql));
    }
    PQfinish(c);
    sf_pg = 0;
    return sf_group_teardown(state);
}

/* The test of the PostgreSQL group when no server is given: a skip. */
static inline void sf_test_pg_unavailable(void **state)
{
    (void)state;
    print_message("[  SKIP    ] PostgreSQL tests: no server (GPSERVE_TEST_PG_URL unset; "
                  "tests/run.sh starts one when PostgreSQL 15 is installed)\n");
    skip();
}

/* Where the database named file lives: a file in the temporary directory, or
 * a PostgreSQL schema of that name (as a URL). */
static inline void sf_db_path(char *out, size_t size, const char *file)
{
    if (sf_pg)
        sf_pg_db_url(out, size, file);
    else
        snprintf(out, size, "%s/%s", sf_tmpdir, file);
}

/* A store on the database named file; fails the test on error. */
static inline gp_store *sf_open_store(const char *file)
{
    char path[512];
    sf_db_path(path, sizeof path, file);
    gp_store *s = NULL;
    gp_error err;
    if (gp_store_open(path, &s, &err))
        fail_msg("gp_store_open(%s): %s", path, err.message);
    return s;
}

/* ---- the groups of a test program ---------------------------------------- */

#define SF_COUNT(tests) (sizeof(tests) / sizeof((tests)[0]))

/* The name of the test program (sf_run_groups), which names its temporary
 * directory, /tmp/gp<name>-XXXXXX. */
static const char *sf_program = "store";

static inline int sf_group_setup_sqlite(void **state)
{
    (void)state;
    char dir[40];
    snprintf(dir, sizeof dir, "gp%s", sf_program);
    return sf_setup_sqlite(dir);
}

static inline int sf_group_setup_pg(void **state)
{
    (void)state;
    char dir[40];
    snprintf(dir, sizeof dir, "gp%s", sf_program);
    return sf_setup_pg(dir);
}

/* Runs the groups of the store test program name: both on SQLite and again
 * on PostgreSQL, sqlite_only on SQLite, pg_only on PostgreSQL (NULL, 0 for a
 * group the program does not have); without a server, the PostgreSQL groups
 * are one skipped test. The failures, as main returns them. */
static inline int sf_run_groups(const char *name, const struct CMUnitTest *both, size_t n_both,
                                const struct CMUnitTest *sqlite_only, size_t n_sqlite,
                                const struct CMUnitTest *pg_only, size_t n_pg)
{
    static const struct CMUnitTest pg_unavailable[] = {cmocka_unit_test(sf_test_pg_unavailable)};
    char title[128];
    int failed = 0;
    sf_program = name;
    if (n_both) {
        snprintf(title, sizeof title, "%s on SQLite", name);
        failed += _cmocka_run_group_tests(title, both, n_both, sf_group_setup_sqlite,
                                          sf_group_teardown);
    }
    if (n_sqlite) {
        snprintf(title, sizeof title, "%s, SQLite only", name);
        failed += _cmocka_run_group_tests(title, sqlite_only, n_sqlite, sf_group_setup_sqlite,
                                          sf_group_teardown);
    }
    snprintf(title, sizeof title, "%s on PostgreSQL", name);
    if (!sf_pg_available())
        return failed + _cmocka_run_group_tests(title, pg_unavailable, 1, NULL, NULL);
    if (n_both)
        failed += _cmocka_run_group_tests(title, both, n_both, sf_group_setup_pg, sf_teardown_pg);
    if (n_pg) {
        snprintf(title, sizeof title, "%s, PostgreSQL only", name);
        failed += _cmocka_run_group_tests(title, pg_only, n_pg, sf_group_setup_pg, sf_teardown_pg);
    }
    return failed;
}

/* ---- a raw connection -------------------------------------------------------- */

/* Creates the file when missing: a test may write an old schema by hand
 * before the store ever opens it. */
static inline sqlite3 *sf_raw_open(const char *path)
{
    sqlite3 *db = NULL;
    assert_int_equal(sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, NULL),
                     SQLITE_OK);
    sqlite3_busy_timeout(db, 5000);
    return db;
}

/* sql (with optional text parameter ?1) prepared on db; fails the test on error. */
static inline sqlite3_stmt *sf_raw_prepare(sqlite3 *db, const char *sql, const char *param)
{
    sqlite3_stmt *st = NULL;
    assert_int_equal(sqlite3_prepare_v2(db, sql, -1, &st, NULL), SQLITE_OK);
    if (param)
        assert_int_equal(sqlite3_bind_text(st, 1, param, -1, SQLITE_STATIC), SQLITE_OK);
    return st;
}

/* sql with ?N written $N, for libpq (malloc'ed). */
static inline char *sf_pg_sql(const char *sql)
{
    char *out = strdup(sql);
    assert_non_null(out);
    for (char *p = out; *p; p++)
        if (*p == '?' && p[1] >= '1' && p[1] <= '9')
            *p = '$';
    return out;
}

/* Run sql (text parameter $1 when param is not NULL) on a raw PostgreSQL
 * connection; the first column of the first row as an integer (a boolean
 * as 0/1, NULL as 0), or 0 when there is no row. */
static inline long long sf_pg_run(const char *url, const char *sql, const char *param,
                                  int want_row)
{
    PGconn *c = sf_pg_connect(url);
    char *q = sf_pg_sql(sql);
    PGresult *res = PQexecParams(c, q, param ? 1 : 0, NULL, param ? &param : NULL, NULL, NULL, 0);
    ExecStatusType st = PQresultStatus(res);
    if (st != PGRES_COMMAND_OK && st != PGRES_TUPLES_OK)
        fail_msg("%s: %s", q, PQresultErrorMessage(res));
    long long v = 0;
    if (want_row) {
        if (st != PGRES_TUPLES_OK || PQntuples(res) < 1)
            fail_msg("%s: no row", q);
        const char *t = PQgetisnull(res, 0, 0) ? "0" : PQgetvalue(res, 0, 0);
        v = strcmp(t, "t") == 0 ? 1 : strcmp(t, "f") == 0 ? 0 : strtoll(t, NULL, 10);
    }
    PQclear(res);
    PQfinish(c);
    free(q);
    return v;
}

/* First column of the first row of sql (with optional text parameter ?1) as
 * an integer; fails the test on error. */
static inline long long sf_raw_int(const char *path, const char *sql, const char *param)
{
    if (sf_is_url(path))
        return sf_pg_run(path, sql, param, 1);
    sqlite3 *db = sf_raw_open(path);
    sqlite3_stmt *st = sf_raw_prepare(db, sql, param);
    assert_int_equal(sqlite3_step(st), SQLITE_ROW);
    long long v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    sqlite3_close(db);
    return v;
}

/* sf_raw_int with a printf-formatted statement and no parameter. */
static inline long long sf_raw_intf(const char *path, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static inline long long sf_raw_intf(const char *path, const char *fmt, ...)
{
    char sql[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    return sf_raw_int(path, sql, NULL);
}

/* Run one statement with optional text parameter ?1. */
static inline void sf_raw_exec(const char *path, const char *sql, const char *param)
{
    if (sf_is_url(path)) {
        sf_pg_run(path, sql, param, 0);
        return;
    }
    sqlite3 *db = sf_raw_open(path);
    sqlite3_stmt *st = sf_raw_prepare(db, sql, param);
    int rc = sqlite3_step(st);
    assert_true(rc == SQLITE_DONE || rc == SQLITE_ROW);
    sqlite3_finalize(st);
    sqlite3_close(db);
}

/* Run a script of several statements (sqlite3_exec); the failure names it. */
static inline void sf_raw_script(const char *path, const char *sql)
{
    if (sf_is_url(path)) {
        sf_pg_script(path, sql);
        return;
    }
    sqlite3 *db = sf_raw_open(path);
    char *msg = NULL;
    int rc = sqlite3_exec(db, sql, NULL, NULL, &msg);
    if (rc != SQLITE_OK)
        fail_msg("%s: %s", sql, msg ? msg : "?");
    sqlite3_close(db);
}

/* ---- data ------------------------------------------------------------------ */

/* One step of xorshift64* on *state. Each test program keeps its own state
 * (and seed), so its data do not depend on the other's. */
static inline uint64_t sf_xorshift64(uint64_t *state)
{
    *state ^= *state >> 12;
    *state ^= *state << 25;
    *state ^= *state >> 27;
    return *state * 0x2545F4914F6CDD1Du;
}

/* A rows x cols array named name, each value from gen, handed to st. */
static inline void sf_put_generated(gp_state *st, const char *name, size_t rows, size_t cols,
                                    double (*gen)(void))
{
    gp_error err;
    size_t n = rows * cols;
    double *x = malloc((n ? n : 1) * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < n; i++)
        x[i] = gen();
    assert_int_equal(gp_state_put_owned(st, name, rows, cols, x, &err), GP_OK);
}

/* Same names, shapes and bits (memcmp: -0, NaN payloads count). */
static inline int sf_states_equal(const gp_state *a, const gp_state *b)
{
    if (a->count != b->count)
        return 0;
    for (size_t i = 0; i < a->count; i++) {
        const gp_named_array *x = &a->arrays[i];
        const gp_named_array *y = gp_state_find(b, x->name);
        if (y == NULL || x->rows != y->rows || x->cols != y->cols)
            return 0;
        if (x->rows * x->cols != 0 &&
            memcmp(x->data, y->data, x->rows * x->cols * sizeof(double)) != 0)
            return 0;
    }
    return 1;
}

/* sf_states_equal as assertions, so that a failure says what differs. */
static inline void sf_assert_states_equal(const gp_state *a, const gp_state *b)
{
    assert_int_equal(a->count, b->count);
    for (size_t i = 0; i < a->count; i++) {
        const gp_named_array *x = &a->arrays[i];
        const gp_named_array *y = gp_state_find(b, x->name);
        assert_non_null(y);
        assert_int_equal(x->rows, y->rows);
        assert_int_equal(x->cols, y->cols);
        if (x->rows * x->cols != 0)
            assert_memory_equal(x->data, y->data, x->rows * x->cols * sizeof(double));
    }
}

#endif
