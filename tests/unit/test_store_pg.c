/* Unit tests for the PostgreSQL back end's own machinery (its migration
 * table, authentication and reconnects), on a server given in
 * GPSERVE_TEST_PG_URL (store_fixture.h; without one that group is one skipped
 * test), and for the redaction of a database URL's password. */
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
#include "tests/unit/store_model_fixture.h"

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
    const struct CMUnitTest sqlite_only[] = {
        cmocka_unit_test(test_redact),
    };
    const struct CMUnitTest pg_only[] = {
        cmocka_unit_test(test_pg_open_and_migrate),
        cmocka_unit_test(test_pg_wrong_password),
        cmocka_unit_test(test_pg_reconnect),
    };
    return sf_run_groups("store_pg", NULL, 0, sqlite_only, SF_COUNT(sqlite_only), pg_only,
                         SF_COUNT(pg_only));
}
