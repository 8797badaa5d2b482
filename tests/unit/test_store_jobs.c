/* Unit tests for the store's durable jobs: the request and holder of a job
 * row, a job's save, leases and claims (and a race of claimers), the migration
 * from schema v1, and pruning.
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
    int requested = -1;
    assert_int_equal(gp_store_job_cancel_flag(s, "c1", "H", &requested, &err), GP_OK);
    assert_int_equal(requested, 0);
    assert_int_equal(gp_store_job_cancel(s2, "c1", 100.0, &row, &outcome, &err), GP_OK);
    assert_int_equal(outcome, GP_JOB_CANCEL_REQUESTED);
    gp_job_row_free(&row);
    /* what gpserve-fit's rank 0 polls: the request, for the holder only */
    assert_int_equal(gp_store_job_cancel_flag(s2, "c1", "H", &requested, &err), GP_OK);
    assert_int_equal(requested, 1);
    assert_int_equal(gp_store_job_cancel_flag(s2, "c1", "not-H", &requested, &err),
                     GP_ECONFLICT);
    assert_string_equal(err.field, "id");
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
    assert_int_equal(gp_store_job_cancel_flag(s, "c2", "I", &requested, &err), GP_ECONFLICT);
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

int main(void)
{
    /* What every back end does alike: once on SQLite, once on PostgreSQL. */
    const struct CMUnitTest both[] = {
        cmocka_unit_test(test_durable_job_request_and_holder),
        cmocka_unit_test(test_durable_job_save),
        cmocka_unit_test(test_durable_job_claims),
        cmocka_unit_test(test_durable_job_claim_race),
        cmocka_unit_test(test_durable_job_prune),
    };
    const struct CMUnitTest sqlite_only[] = {
        cmocka_unit_test(test_durable_migration_from_v1),
    };
    return sf_run_groups("store_jobs", both, SF_COUNT(both), sqlite_only, SF_COUNT(sqlite_only),
                         NULL, 0);
}
