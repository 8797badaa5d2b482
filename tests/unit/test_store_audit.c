/* Unit tests for the store's audit trail (store.h, "the audit trail"): the
 * row of each audited write, written in the write's transaction (invisible
 * to a reader until the commit, gone with a write that fails, and failing
 * the write when it cannot be written); a refused write's row alone;
 * paging and filters; retention; texts cut to their fields; the migration
 * of a version 6 database.
 *
 * Runs on SQLite files and again on PostgreSQL when GPSERVE_TEST_PG_URL names
 * a server (store_fixture.h); the tests that need a trigger or PRAGMA are
 * SQLite's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store.h"
#include "store/store_internal.h"
#include "tests/unit/store_model_fixture.h"

static gp_audit_put audit_of(const char *route, const char *model, int version, int status,
                             const char *rid)
{
    gp_audit_put a = {.key_name = NULL, .route = route, .model = model, .version = version,
                      .status = status, .code = NULL, .request_id = rid, .job_id = NULL};
    return a;
}

static long long audit_count(const char *path, const char *rid)
{
    return sf_raw_int(path, "SELECT count(*) FROM audit WHERE request_id = ?1", rid);
}

/* Every page of the trail, newest first, into rows (at most max). */
static size_t audit_all(gp_store *s, gp_audit_row *out, size_t max)
{
    gp_audit_query q = {.limit = 1000};
    gp_audit_row *rows = NULL;
    size_t n = 0;
    int more = 0;
    gp_error err;
    if (gp_store_audit_list(s, &q, &rows, &n, &more, &err))
        fail_msg("gp_store_audit_list: %s", err.message);
    assert_false(more);
    assert_true(n <= max);
    if (n)
        memcpy(out, rows, n * sizeof *rows);
    free(rows);
    return n;
}

/* Each audited write leaves its row with its fields; a save records the
 * version it made. */
static void test_audit_each_write(void **state)
{
    (void)state;
    gp_store *s = sf_open_store("audit_each.db");
    gp_state st;
    make_state(&st);
    gp_error err;
    gp_audit_put a = audit_of("POST /v1/models", "m", 0, 201, "r-save");
    a.key_name = "team-a";
    assert_int_equal(gp_store_save_audited(s, "m", "exact", "{}", "{}", 5, 2, &st, NULL, NULL, &a,
                                           NULL, &err),
                     GP_OK);
    assert_int_equal(gp_store_save(s, "m", "exact", "{}", "{}", 5, 2, &st, NULL, &err), GP_OK);
    a = audit_of("PUT /v1/models/{name}/aliases/{alias}", "m", 2, 200, "r-alias");
    assert_int_equal(gp_store_alias_set_audited(s, "m", "champ", 2, NULL, &a, NULL, &err), GP_OK);
    a = audit_of("DELETE /v1/models/{name}/aliases/{alias}", "m", 0, 204, "r-unalias");
    assert_int_equal(gp_store_alias_delete_audited(s, "m", "champ", &a, &err), GP_OK);
    a = audit_of("DELETE /v1/models/{name}/versions/{v}", "m", 1, 204, "r-dv");
    assert_int_equal(gp_store_delete_version_audited(s, "m", 1, &a, &err), GP_OK);
    gp_model_meta meta;
    assert_int_equal(gp_store_meta_brief(s, "m", 2, &meta, &err), GP_OK);
    gp_state batch;
    make_state(&batch);
    uint64_t seq = 0, ticket = 0;
    a = audit_of("POST /v1/models/{name}/observe", "m", 2, 200, "r-obs");
    assert_int_equal(gp_store_observe_audited(s, meta.id, 0, &batch, 6, NULL, NULL, &a, &seq,
                                              &ticket, &err),
                     GP_OK);
    assert_int_equal(gp_store_wait_durable(s, ticket, &err), GP_OK);
    gp_model_meta_free(&meta);
    a = audit_of("DELETE /v1/models/{name}", "m", 0, 204, "r-del");
    assert_int_equal(gp_store_delete_audited(s, "m", &a, &err), GP_OK);
    a = audit_of("POST /v1/models", NULL, 0, 400, "r-refused");
    a.code = "invalid_argument";
    assert_int_equal(gp_store_audit_add(s, &a, &err), GP_OK);

    gp_audit_row rows[16];
    size_t n = audit_all(s, rows, 16);
    assert_int_equal(n, 7);
    static const char *const rids[] = {"r-refused", "r-del", "r-obs", "r-dv", "r-unalias",
                                       "r-alias", "r-save"};
    static const int versions[] = {0, 0, 2, 1, 0, 2, 1};
    static const int statuses[] = {400, 204, 200, 204, 204, 200, 201};
    for (size_t i = 0; i < n; i++) {
        assert_string_equal(rows[i].request_id, rids[i]);
        assert_int_equal(rows[i].version, versions[i]);
        assert_int_equal(rows[i].status, statuses[i]);
        assert_int_equal(strlen(rows[i].at), 20);
        assert_true(i == 0 || rows[i].id < rows[i - 1].id);
    }
    assert_true(rows[6].has_key);
    assert_string_equal(rows[6].key_name, "team-a");
    assert_string_equal(rows[6].model, "m");
    assert_string_equal(rows[6].route, "POST /v1/models");
    assert_false(rows[5].has_key);
    assert_string_equal(rows[0].code, "invalid_argument");
    assert_string_equal(rows[0].model, "");
    assert_string_equal(rows[1].code, "");
    gp_state_free(&batch);
    gp_state_free(&st);
    gp_store_close(s);
}

/* A write that fails leaves no audit row: a save whose job another daemon
 * took over, a delete of a version an alias holds, an observe behind the
 * log's head, a delete of a model that does not exist. */
static void test_audit_failed_write_leaves_none(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "audit_fail.db");
    gp_store *s = sf_open_store("audit_fail.db");
    gp_state st;
    make_state(&st);
    gp_error err;
    assert_int_equal(gp_store_save(s, "m", "exact", "{}", "{}", 5, 2, &st, NULL, &err), GP_OK);
    assert_int_equal(gp_store_save(s, "m", "exact", "{}", "{}", 5, 2, &st, NULL, &err), GP_OK);
    gp_job_done jd = {.id = "no-such-job", .owner = "me", .progress = NULL};
    gp_audit_put a = audit_of("POST /v1/models", "m", 0, 201, "f-save");
    assert_int_equal(gp_store_save_audited(s, "m", "exact", "{}", "{}", 5, 2, &st, &jd, NULL, &a,
                                           NULL, &err),
                     GP_ECONFLICT);
    assert_int_equal(gp_store_alias_set(s, "m", "champ", 1, NULL, NULL, &err), GP_OK);
    a = audit_of("DELETE /v1/models/{name}/versions/{v}", "m", 1, 204, "f-dv");
    assert_int_equal(gp_store_delete_version_audited(s, "m", 1, &a, &err), GP_ECONFLICT);
    gp_model_meta meta;
    assert_int_equal(gp_store_meta_brief(s, "m", 2, &meta, &err), GP_OK);
    uint64_t seq = 0, ticket = 0;
    a = audit_of("POST /v1/models/{name}/observe", "m", 2, 200, "f-obs");
    assert_int_equal(gp_store_observe_audited(s, meta.id, 5, &st, 6, NULL, NULL, &a, &seq,
                                              &ticket, &err),
                     GP_ECONFLICT);
    gp_model_meta_free(&meta);
    a = audit_of("DELETE /v1/models/{name}", "gone", 0, 204, "f-del");
    assert_int_equal(gp_store_delete_audited(s, "gone", &a, &err), GP_ENOTFOUND);
    a = audit_of("DELETE /v1/models/{name}/aliases/{alias}", "m", 0, 204, "f-al");
    assert_int_equal(gp_store_alias_delete_audited(s, "m", "nope", &a, &err), GP_ENOTFOUND);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM audit", NULL), 0);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM models", NULL), 2);
    gp_state_free(&st);
    gp_store_close(s);
}

/* Inside the save's transaction (the hook runs before its COMMIT), a reader
 * sees neither the new row nor its audit row; after it, both. */
static const char *hook_path;
static long long hook_models, hook_audit;

static void count_in_save(gp_store *store, int64_t model_id, void *arg)
{
    (void)store;
    (void)model_id;
    (void)arg;
    hook_models = sf_raw_int(hook_path, "SELECT count(*) FROM models", NULL);
    hook_audit = sf_raw_int(hook_path, "SELECT count(*) FROM audit", NULL);
}

static void test_audit_same_transaction(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "audit_txn.db");
    gp_store *s = sf_open_store("audit_txn.db");
    hook_path = path;
    hook_models = hook_audit = -1;
    gp_store_set_save_hook(s, count_in_save, NULL);
    gp_state st;
    make_state(&st);
    gp_error err;
    gp_audit_put a = audit_of("POST /v1/models", "m", 0, 201, "t-save");
    assert_int_equal(gp_store_save_audited(s, "m", "exact", "{}", "{}", 5, 2, &st, NULL, NULL, &a,
                                           NULL, &err),
                     GP_OK);
    gp_store_set_save_hook(s, NULL, NULL);
    assert_int_equal(hook_models, 0);
    assert_int_equal(hook_audit, 0);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM models", NULL), 1);
    assert_int_equal(audit_count(path, "t-save"), 1);
    gp_state_free(&st);
    gp_store_close(s);
}

/* When the audit row cannot be written the write fails whole: nothing of
 * the save, the alias or the delete stays (SQLite: a trigger refuses it). */
static void test_audit_refused_row_fails_write(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "audit_trigger.db");
    gp_store *s = sf_open_store("audit_trigger.db");
    gp_state st;
    make_state(&st);
    gp_error err;
    assert_int_equal(gp_store_save(s, "m", "exact", "{}", "{}", 5, 2, &st, NULL, &err), GP_OK);
    sf_raw_exec(path, "CREATE TRIGGER no_audit BEFORE INSERT ON audit"
                      " BEGIN SELECT RAISE(ABORT, 'audit refused'); END", NULL);
    gp_audit_put a = audit_of("POST /v1/models", "m", 0, 201, "x");
    assert_int_not_equal(gp_store_save_audited(s, "m", "exact", "{}", "{}", 5, 2, &st, NULL, NULL,
                                               &a, NULL, &err),
                         GP_OK);
    assert_int_not_equal(gp_store_alias_set_audited(s, "m", "champ", 1, NULL, &a, NULL, &err),
                         GP_OK);
    assert_int_not_equal(gp_store_delete_audited(s, "m", &a, &err), GP_OK);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM models", NULL), 1);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM aliases", NULL), 0);
    /* Without the row asked for, the same writes go through. */
    assert_int_equal(gp_store_save(s, "m", "exact", "{}", "{}", 5, 2, &st, NULL, &err), GP_OK);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM models", NULL), 2);
    gp_state_free(&st);
    gp_store_close(s);
}

/* Pages newest first with a cursor, oldest first from after, and the
 * filters; the "more" flag only when rows past the page match. */
static void test_audit_paging(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "audit_page.db");
    gp_store *s = sf_open_store("audit_page.db");
    gp_error err;
    for (int i = 0; i < 25; i++) {
        char rid[16];
        snprintf(rid, sizeof rid, "p%d", i);
        gp_audit_put a = audit_of("POST /v1/models", i % 2 ? "odd" : "even", 0, 201, rid);
        a.key_name = i % 5 == 0 ? "five" : NULL;
        assert_int_equal(gp_store_audit_add(s, &a, &err), GP_OK);
    }
    int64_t cursor = 0;
    size_t seen = 0, pages = 0;
    int64_t last = INT64_MAX;
    for (;;) {
        gp_audit_query q = {.cursor = cursor, .limit = 7};
        gp_audit_row *rows = NULL;
        size_t n = 0;
        int more = 0;
        assert_int_equal(gp_store_audit_list(s, &q, &rows, &n, &more, &err), GP_OK);
        for (size_t i = 0; i < n; i++) {
            assert_true(rows[i].id < last);
            last = rows[i].id;
        }
        seen += n;
        pages++;
        assert_int_equal(n, more ? 7 : 25 % 7);
        cursor = n ? rows[n - 1].id : 0;
        free(rows);
        if (!more)
            break;
    }
    assert_int_equal(seen, 25);
    assert_int_equal(pages, 4);
    /* oldest first from the start */
    gp_audit_query q = {.cursor = 0, .ascending = 1, .limit = 1000};
    gp_audit_row *rows = NULL;
    size_t n = 0;
    int more = 1;
    assert_int_equal(gp_store_audit_list(s, &q, &rows, &n, &more, &err), GP_OK);
    assert_int_equal(n, 25);
    assert_false(more);
    assert_string_equal(rows[0].request_id, "p0");
    assert_string_equal(rows[24].request_id, "p24");
    free(rows);
    /* filters */
    q = (gp_audit_query){.model = "odd", .limit = 1000};
    assert_int_equal(gp_store_audit_list(s, &q, &rows, &n, &more, &err), GP_OK);
    assert_int_equal(n, 12);
    free(rows);
    q = (gp_audit_query){.key_name = "five", .model = "even", .limit = 1000};
    assert_int_equal(gp_store_audit_list(s, &q, &rows, &n, &more, &err), GP_OK);
    assert_int_equal(n, 3); /* p0, p10, p20 */
    free(rows);
    sf_raw_exec(path, "UPDATE audit SET at = '2020-01-01T00:00:00Z' WHERE request_id = 'p3'",
                NULL);
    q = (gp_audit_query){.since = "2021-01-01T00:00:00Z", .limit = 1000};
    assert_int_equal(gp_store_audit_list(s, &q, &rows, &n, &more, &err), GP_OK);
    assert_int_equal(n, 24);
    free(rows);
    q = (gp_audit_query){.limit = 0};
    assert_int_equal(gp_store_audit_list(s, &q, &rows, &n, &more, &err), GP_EINVAL);
    assert_string_equal(err.field, "limit");
    gp_store_close(s);
}

/* Rows made before the cut-off go (up to 1000 a call), the others stay; the
 * newest row always stays, so an id is never given out again. */
static void test_audit_prune(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "audit_prune.db");
    gp_store *s = sf_open_store("audit_prune.db");
    gp_error err;
    for (int i = 0; i < 4; i++) {
        gp_audit_put a = audit_of("DELETE /v1/models/{name}", "m", 0, 404, i < 3 ? "old" : "new");
        assert_int_equal(gp_store_audit_add(s, &a, &err), GP_OK);
    }
    const long long max_id = sf_raw_int(path, "SELECT max(id) FROM audit", NULL);
    sf_raw_exec(path, "UPDATE audit SET at = '2020-01-01T00:00:00Z' WHERE request_id = 'old'",
                NULL);
    size_t deleted = 99;
    assert_int_equal(gp_store_audit_prune(s, "2021-01-01T00:00:00Z", &deleted, &err), GP_OK);
    assert_int_equal(deleted, 3);
    assert_int_equal(audit_count(path, "old"), 0);
    assert_int_equal(audit_count(path, "new"), 1);
    assert_int_equal(gp_store_audit_prune(s, "2021-01-01T00:00:00Z", &deleted, &err), GP_OK);
    assert_int_equal(deleted, 0);
    sf_raw_exec(path, "UPDATE audit SET at = '2020-01-01T00:00:00Z'", NULL);
    assert_int_equal(gp_store_audit_prune(s, "2021-01-01T00:00:00Z", &deleted, &err), GP_OK);
    assert_int_equal(deleted, 0);
    assert_int_equal(audit_count(path, "new"), 1);
    gp_audit_put a = audit_of("DELETE /v1/models/{name}", "m", 0, 404, "after");
    assert_int_equal(gp_store_audit_add(s, &a, &err), GP_OK);
    assert_true(sf_raw_int(path, "SELECT max(id) FROM audit", NULL) > max_id);
    gp_store_close(s);
}

/* Texts longer than the row's fields are cut, never refused. */
static void test_audit_long_texts(void **state)
{
    (void)state;
    gp_store *s = sf_open_store("audit_long.db");
    gp_error err;
    char big[300];
    memset(big, 'k', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    gp_audit_put a = {.key_name = big, .route = big, .model = big, .status = 400, .code = big,
                      .request_id = big, .job_id = big};
    assert_int_equal(gp_store_audit_add(s, &a, &err), GP_OK);
    gp_audit_row rows[1];
    assert_int_equal(audit_all(s, rows, 1), 1);
    assert_int_equal(strlen(rows[0].key_name), GP_NAME_MAX);
    assert_int_equal(strlen(rows[0].route), GP_AUDIT_ROUTE_MAX);
    assert_int_equal(strlen(rows[0].code), GP_AUDIT_CODE_MAX);
    assert_int_equal(strlen(rows[0].request_id), GP_AUDIT_REQUEST_ID_MAX);
    assert_int_equal(strlen(rows[0].job_id), GP_JOB_ID_LEN - 1);
    gp_store_close(s);
}

/* A version 6 database gets the audit table when it is opened (its models
 * kept), and records writes from then on. */
static void test_audit_migrates_v6(void **state)
{
    (void)state;
    char path[256];
    sf_db_path(path, sizeof path, "audit_v6.db");
    gp_store *s = sf_open_store("audit_v6.db");
    gp_state st;
    make_state(&st);
    gp_error err;
    assert_int_equal(gp_store_save(s, "m", "exact", "{}", "{}", 5, 2, &st, NULL, &err), GP_OK);
    gp_store_close(s);
    sf_raw_script(path, "DROP TABLE trials; DROP TABLE studies;"
                        " DROP TABLE audit; DROP TABLE dataset_readers; DROP TABLE dataset_parts;"
                        " DROP TABLE datasets; DROP INDEX jobs_dataset;"
                        " ALTER TABLE jobs DROP COLUMN dataset_id; PRAGMA user_version = 6;");
    s = sf_open_store("audit_v6.db");
    assert_int_equal(sf_raw_int(path, "PRAGMA user_version", NULL), GP_STORE_SCHEMA_VERSION);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM models", NULL), 1);
    gp_audit_put a = audit_of("DELETE /v1/models/{name}", "m", 0, 204, "after-migration");
    assert_int_equal(gp_store_delete_audited(s, "m", &a, &err), GP_OK);
    assert_int_equal(audit_count(path, "after-migration"), 1);
    gp_state_free(&st);
    gp_store_close(s);
}

int main(void)
{
    const struct CMUnitTest both[] = {
        cmocka_unit_test(test_audit_each_write),
        cmocka_unit_test(test_audit_failed_write_leaves_none),
        cmocka_unit_test(test_audit_same_transaction),
        cmocka_unit_test(test_audit_paging),
        cmocka_unit_test(test_audit_prune),
        cmocka_unit_test(test_audit_long_texts),
    };
    const struct CMUnitTest sqlite_only[] = {
        cmocka_unit_test(test_audit_refused_row_fails_write),
        cmocka_unit_test(test_audit_migrates_v6),
    };
    return sf_run_groups("store_audit", both, SF_COUNT(both), sqlite_only, SF_COUNT(sqlite_only),
                         NULL, 0);
}
