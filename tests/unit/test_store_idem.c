/* Unit tests for the store's idempotency keys: a key recorded with a save, a
 * job's creation and an observation, invalid keys, pruning, and a race of two
 * writers on one key.
 *
 * The tests of the back-end-independent behaviour run twice (store_fixture.h):
 * on SQLite files in a directory made with mkdtemp under /tmp (removed by the
 * group teardown), and on PostgreSQL when GPSERVE_TEST_PG_URL names a server
 * (a schema per database name, dropped by the group teardown; without a
 * server that group is one skipped test). A second, raw connection inspects
 * and corrupts the data behind the store's back. */
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

int main(void)
{
    /* What every back end does alike: once on SQLite, once on PostgreSQL. */
    const struct CMUnitTest both[] = {
        cmocka_unit_test(test_idem_save),
        cmocka_unit_test(test_idem_invalid),
        cmocka_unit_test(test_idem_job_create),
        cmocka_unit_test(test_idem_observe),
        cmocka_unit_test(test_idem_prune),
        cmocka_unit_test(test_idem_race),
    };
    return sf_run_groups("store_idem", both, SF_COUNT(both), NULL, 0, NULL, 0);
}
