/* Scaffolding shared by the store's unit tests (test_store.c,
 * test_store_observe.c): a temporary directory for the databases, handles on
 * files in it, a raw sqlite3 connection that inspects and corrupts the files
 * behind the store's back, a xorshift64* stream and array builders for
 * states, and a bit-for-bit comparison of states.
 *
 * Header-only (static inline), as testutil.h and api_testutil.h: the
 * benchmarks link every support object of tests/unit without cmocka, sqlite
 * or the store library, so these helpers cannot live in a .c file there.
 * Include after cmocka.h. */
#ifndef GP_STORE_FIXTURE_H
#define GP_STORE_FIXTURE_H

#include <dirent.h>
#include <sqlite3.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "store/store.h"

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

static inline void sf_db_path(char *out, size_t size, const char *file)
{
    snprintf(out, size, "%s/%s", sf_tmpdir, file);
}

/* A store on file in the temporary directory; fails the test on error. */
static inline gp_store *sf_open_store(const char *file)
{
    char path[256];
    sf_db_path(path, sizeof path, file);
    gp_store *s = NULL;
    gp_error err;
    if (gp_store_open(path, &s, &err))
        fail_msg("gp_store_open(%s): %s", path, err.message);
    return s;
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

/* First column of the first row of sql (with optional text parameter ?1) as
 * an integer; fails the test on error. */
static inline long long sf_raw_int(const char *path, const char *sql, const char *param)
{
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
