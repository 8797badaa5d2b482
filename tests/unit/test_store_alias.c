/* Unit tests for the store's aliases (store.h, "aliases"): set, move, get,
 * list and delete a label; the invalid labels and missing targets that change
 * nothing; a model's delete removing its labels; the foreign key that keeps a
 * labelled version from being deleted behind the store's back; an alias write
 * changing the change generation; durability across a reopen.
 *
 * Run on SQLite files and, when GPSERVE_TEST_PG_URL names a server, on
 * PostgreSQL (store_fixture.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "store/store.h"
#include "store/store_internal.h"
#include "tests/unit/store_model_fixture.h"

/* A model `name` with `versions` versions in store s. */
static void save_versions(gp_store *s, const char *name, int versions)
{
    gp_state st;
    make_state(&st);
    gp_error err;
    for (int i = 0; i < versions; i++)
        if (gp_store_save(s, name, "exact", "{}", "{}", 5, 2, &st, NULL, &err))
            fail_msg("save %s: %s", name, err.message);
    gp_state_free(&st);
}

/* 1 when sql fails on a raw connection (SQLite with foreign keys on, as the
 * store's own connections; PostgreSQL always checks them). */
static int raw_refused(const char *path, const char *sql)
{
    if (sf_is_url(path)) {
        PGconn *c = sf_pg_connect(path);
        PGresult *res = PQexec(c, sql);
        const int refused = PQresultStatus(res) != PGRES_COMMAND_OK;
        PQclear(res);
        PQfinish(c);
        return refused;
    }
    sqlite3 *db = sf_raw_open(path);
    int rc = sqlite3_exec(db, "PRAGMA foreign_keys = ON", NULL, NULL, NULL);
    assert_int_equal(rc, SQLITE_OK);
    rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
    sqlite3_close(db);
    return rc != SQLITE_OK;
}

static int alias_version(gp_store *s, const char *name, const char *alias)
{
    gp_alias_row row;
    gp_error err;
    if (gp_store_alias_get(s, name, alias, &row, &err))
        fail_msg("alias %s/%s: %s", name, alias, err.message);
    return row.version;
}

static void test_alias_valid(void **state)
{
    (void)state;
    assert_true(gp_store_alias_valid("champion"));
    assert_true(gp_store_alias_valid("a"));
    assert_true(gp_store_alias_valid("Stable-2.x_b"));
    char longest[GP_ALIAS_MAX + 2];
    memset(longest, 'a', GP_ALIAS_MAX);
    longest[GP_ALIAS_MAX] = '\0';
    assert_true(gp_store_alias_valid(longest));
    longest[GP_ALIAS_MAX] = 'a';
    longest[GP_ALIAS_MAX + 1] = '\0';
    assert_false(gp_store_alias_valid(longest));
    assert_false(gp_store_alias_valid(NULL));
    assert_false(gp_store_alias_valid(""));
    assert_false(gp_store_alias_valid("7"));
    assert_false(gp_store_alias_valid("1e3"));
    assert_false(gp_store_alias_valid("_x"));
    assert_false(gp_store_alias_valid("a b"));
    assert_false(gp_store_alias_valid("a/b"));
    assert_false(gp_store_alias_valid("caf\xc3\xa9"));
}

/* Set, move (who and when recorded), list in label order, get, delete. */
static void test_alias_set_move_delete(void **state)
{
    (void)state;
    gp_store *s = sf_open_store("alias_basic.db");
    save_versions(s, "m", 3);
    gp_error err;
    gp_alias_row row;
    assert_int_equal(gp_store_alias_set(s, "m", "champion", 2, NULL, &row, &err), GP_OK);
    assert_int_equal(row.version, 2);
    assert_int_equal(strlen(row.updated_at), 20);
    assert_string_equal(row.updated_by, "");
    assert_int_equal(gp_store_alias_set(s, "m", "challenger", 3, "ci-bot", NULL, &err), GP_OK);
    assert_int_equal(alias_version(s, "m", "champion"), 2);
    /* moved: the same row, the new version and who moved it */
    assert_int_equal(gp_store_alias_set(s, "m", "champion", 3, "alice", NULL, &err), GP_OK);
    assert_int_equal(gp_store_alias_get(s, "m", "champion", &row, &err), GP_OK);
    assert_int_equal(row.version, 3);
    assert_string_equal(row.updated_by, "alice");
    gp_alias_row *rows = NULL;
    size_t n = 0;
    assert_int_equal(gp_store_aliases(s, "m", &rows, &n, &err), GP_OK);
    assert_int_equal(n, 2);
    assert_string_equal(rows[0].alias, "challenger");
    assert_string_equal(rows[0].updated_by, "ci-bot");
    assert_string_equal(rows[1].alias, "champion");
    free(rows);
    assert_int_equal(gp_store_alias_delete(s, "m", "challenger", &err), GP_OK);
    assert_int_equal(gp_store_alias_get(s, "m", "challenger", &row, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "alias");
    assert_int_equal(gp_store_alias_delete(s, "m", "challenger", &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "alias");
    assert_int_equal(gp_store_aliases(s, "m", &rows, &n, &err), GP_OK);
    assert_int_equal(n, 1);
    free(rows);
    gp_store_close(s);
}

/* Each bad input is refused naming its field, and nothing is stored. */
static void test_alias_refused(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "alias_bad.db");
    gp_store *s = sf_open_store("alias_bad.db");
    save_versions(s, "m", 2);
    gp_error err;
    assert_int_equal(gp_store_alias_set(s, "m", "7", 1, NULL, NULL, &err), GP_EINVAL);
    assert_string_equal(err.field, "alias");
    assert_int_equal(gp_store_alias_set(s, "m", "a/b", 1, NULL, NULL, &err), GP_EINVAL);
    assert_string_equal(err.field, "alias");
    assert_int_equal(gp_store_alias_set(s, "m", "best", 3, NULL, NULL, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "version");
    assert_int_equal(gp_store_alias_set(s, "m", "best", 0, NULL, NULL, &err), GP_EINVAL);
    assert_string_equal(err.field, "version");
    assert_int_equal(gp_store_alias_set(s, "nope", "best", 1, NULL, NULL, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "name");
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM aliases", NULL), 0);
    gp_alias_row *rows = NULL;
    size_t n = 0;
    assert_int_equal(gp_store_aliases(s, "nope", &rows, &n, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "name");
    assert_int_equal(gp_store_aliases(s, "m", &rows, &n, &err), GP_OK);
    assert_int_equal(n, 0);
    gp_alias_row row;
    assert_int_equal(gp_store_alias_get(s, "nope", "best", &row, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "name");
    gp_store_close(s);
}

/* A model's delete takes its labels with it; the database itself refuses to
 * delete a labelled version (the foreign key), whoever tries. */
static void test_alias_delete_model(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "alias_del.db");
    gp_store *s = sf_open_store("alias_del.db");
    save_versions(s, "m", 2);
    save_versions(s, "other", 1);
    gp_error err;
    assert_int_equal(gp_store_alias_set(s, "m", "champion", 1, NULL, NULL, &err), GP_OK);
    assert_int_equal(gp_store_alias_set(s, "other", "champion", 1, NULL, NULL, &err), GP_OK);
    assert_true(raw_refused(path, "DELETE FROM models WHERE name = 'm' AND version = 1"));
    assert_false(raw_refused(path, "DELETE FROM models WHERE name = 'm' AND version = 2"));
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM models WHERE name = 'm'", NULL), 1);
    assert_int_equal(gp_store_delete(s, "m", &err), GP_OK);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM aliases WHERE name = 'm'", NULL), 0);
    assert_int_equal(alias_version(s, "other", "champion"), 1);
    /* a new model of the old name starts without labels */
    save_versions(s, "m", 1);
    gp_alias_row *rows = NULL;
    size_t n = 0;
    assert_int_equal(gp_store_aliases(s, "m", &rows, &n, &err), GP_OK);
    assert_int_equal(n, 0);
    gp_store_close(s);
}

/* The generation of s once it is known and differs from `from`, waited for
 * in 1 ms steps up to 20 s (a liveness guard, not a timing assertion; as
 * test_store.c's). */
static uint64_t generation_moved(gp_store *s, uint64_t from)
{
    for (int i = 0; i < 20000; i++) {
        uint64_t g = gp_store_generation(s);
        if (g != 0 && g != from)
            return g;
        nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
    fail_msg("the generation stayed at %llu", (unsigned long long)from);
    return 0;
}

/* Deleting one version: unknown name/version refused naming it; a labelled
 * version refused naming the label (409 "alias"); the only version refused
 * (409 "version"); the latest deleted leaves the highest remaining as the
 * latest, its rows and arrays gone, its number never given again (the mark
 * survives a reopen; a model's delete clears it); the generation moves; an
 * alias's previous target, kept by a move, forgotten when it is deleted. */
static void test_delete_version(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "alias_delver.db");
    gp_store *s = sf_open_store("alias_delver.db");
    save_versions(s, "m", 3);
    save_versions(s, "one", 1);
    gp_error err;
    assert_int_equal(gp_store_watch_start(s, &err), GP_OK);
    assert_int_equal(gp_store_delete_version(s, "nope", 1, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "name");
    assert_int_equal(gp_store_delete_version(s, "m", 9, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "version");
    gp_alias_row row;
    assert_int_equal(gp_store_alias_set(s, "m", "champion", 1, NULL, &row, &err), GP_OK);
    assert_int_equal(row.previous_version, 0); /* new: nothing to roll back to */
    assert_int_equal(gp_store_alias_set(s, "m", "champion", 2, NULL, &row, &err), GP_OK);
    assert_int_equal(row.previous_version, 1); /* a move keeps the target it leaves */
    assert_int_equal(gp_store_alias_set(s, "m", "champion", 2, NULL, &row, &err), GP_OK);
    assert_int_equal(row.previous_version, 1); /* the same target again keeps it */
    assert_int_equal(gp_store_alias_set(s, "m", "backup", 2, NULL, NULL, &err), GP_OK);
    assert_int_equal(gp_store_delete_version(s, "m", 2, &err), GP_ECONFLICT);
    assert_string_equal(err.field, "alias");
    assert_non_null(strstr(err.message, "'backup', 'champion'"));
    assert_int_equal(gp_store_delete_version(s, "one", 1, &err), GP_ECONFLICT);
    assert_string_equal(err.field, "version");
    uint64_t g = generation_moved(s, 0);
    assert_int_equal(gp_store_delete_version(s, "m", 3, &err), GP_OK);
    assert_true(gp_store_generation(s) != g); /* this handle's: when the delete returns */
    assert_int_equal(gp_store_delete_version(s, "m", 1, &err), GP_OK);
    assert_int_equal(gp_store_alias_get(s, "m", "champion", &row, &err), GP_OK);
    assert_int_equal(row.previous_version, 0); /* no roll back to a deleted version */
    gp_model_meta meta;
    assert_int_equal(gp_store_meta_brief(s, "m", 0, &meta, &err), GP_OK);
    assert_int_equal(meta.version, 2);
    gp_model_meta_free(&meta);
    assert_int_equal(gp_store_meta_brief(s, "m", 3, &meta, &err), GP_ENOTFOUND);
    gp_model_meta_free(&meta);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM arrays WHERE model_id NOT IN"
                                      " (SELECT id FROM models)", NULL), 0);
    gp_store_close(s);
    s = sf_open_store("alias_delver.db");
    save_versions(s, "m", 1);
    assert_int_equal(gp_store_meta_brief(s, "m", 0, &meta, &err), GP_OK);
    assert_int_equal(meta.version, 4); /* not 3 again */
    gp_model_meta_free(&meta);
    assert_int_equal(gp_store_delete(s, "m", &err), GP_OK);
    save_versions(s, "m", 1);
    assert_int_equal(gp_store_meta_brief(s, "m", 0, &meta, &err), GP_OK);
    assert_int_equal(meta.version, 1); /* a new model of the name starts at 1 */
    gp_model_meta_free(&meta);
    gp_store_close(s);
}

/* An alias write moves the generation of its own handle when it returns,
 * and another handle's (another daemon on the database: PostgreSQL's NOTIFY,
 * SQLite's data_version) once its watch sees the commit; and it is durable:
 * a new handle on the database reads it. */
static void test_alias_generation_durable(void **state)
{
    (void)state;
    gp_store *a = sf_open_store("alias_gen.db");
    gp_store *b = sf_open_store("alias_gen.db");
    save_versions(b, "m", 2);
    gp_error err;
    assert_int_equal(gp_store_watch_start(a, &err), GP_OK);
    uint64_t g = generation_moved(a, 0);
    uint64_t own = atomic_load(&b->generation);
    assert_int_equal(gp_store_alias_set(b, "m", "prod", 2, NULL, NULL, &err), GP_OK);
    assert_true(atomic_load(&b->generation) > own);
    g = generation_moved(a, g);
    own = atomic_load(&b->generation);
    assert_int_equal(gp_store_alias_delete(b, "m", "prod", &err), GP_OK);
    assert_true(atomic_load(&b->generation) > own);
    g = generation_moved(a, g);
    assert_int_equal(gp_store_alias_set(b, "m", "prod", 1, "bob", NULL, &err), GP_OK);
    generation_moved(a, g);
    gp_store_close(a);
    gp_store_close(b);
    a = sf_open_store("alias_gen.db");
    assert_int_equal(alias_version(a, "m", "prod"), 1);
    gp_store_close(a);
}

int main(void)
{
    const struct CMUnitTest alone[] = {
        cmocka_unit_test(test_alias_valid),
    };
    const struct CMUnitTest both[] = {
        cmocka_unit_test(test_alias_set_move_delete),
        cmocka_unit_test(test_alias_refused),
        cmocka_unit_test(test_alias_delete_model),
        cmocka_unit_test(test_delete_version),
        cmocka_unit_test(test_alias_generation_durable),
    };
    return sf_run_groups("store_alias", both, SF_COUNT(both), alone, SF_COUNT(alone), NULL, 0);
}
