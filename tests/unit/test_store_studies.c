/* Unit tests for the store's studies and trials (store.h, "studies and
 * trials"): create, get, list and delete with their refusals; the optimistic
 * insert at the current and at a stale revision (nothing written); a
 * completion's seq, the not-active conflict naming the state, an unknown
 * trial and another study's trial; heartbeats and the expiry; the refit
 * claim; two handles racing on one study (inserts at one revision: exactly
 * one wins; retried inserts: ids dense and each trial stored once;
 * completions: seq dense, and every snapshot a reader takes meanwhile a
 * prefix); a completion kept by a process killed as it returned; and the
 * migration of a version 8 database.
 *
 * Runs on SQLite files and again on PostgreSQL when GPSERVE_TEST_PG_URL names
 * a server (store_fixture.h). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "store/store.h"
#include "store/store_internal.h"
#include "tests/unit/store_model_fixture.h"

#define CONFIG "{\"parameters\":[{\"name\":\"x0\",\"type\":\"double\",\"bounds\":[0,1]}]}"

static gp_study_row create(gp_store *s, const char *name)
{
    gp_study_row row;
    gp_error err;
    if (gp_store_study_create(s, name, CONFIG, "alice", 1000.0, NULL, &row, &err))
        fail_msg("create %s: %s", name, err.message);
    return row;
}

/* q trials {"x0": k} (k = tag, tag + 1, ...) for client at revision; the
 * ids written to ids. */
static int add(gp_store *s, int64_t study, uint64_t revision, const char *client, size_t q,
               int tag, double expires_at, int64_t *ids, gp_error *err)
{
    char text[8][32];
    gp_trial_new t[8];
    assert_true(q <= 8);
    for (size_t i = 0; i < q; i++) {
        snprintf(text[i], sizeof text[i], "{\"x0\":%d}", tag + (int)i);
        t[i].parameters = text[i];
    }
    return gp_store_trials_add(s, study, revision, client, t, q, 1000.0, expires_at, NULL, ids,
                               err);
}

static gp_study_row get(gp_store *s, const char *name)
{
    gp_study_row row;
    gp_error err;
    if (gp_store_study_get(s, name, &row, &err))
        fail_msg("get %s: %s", name, err.message);
    return row;
}

static long long count_trials(const char *path)
{
    return sf_raw_int(path, "SELECT count(*) FROM trials", NULL);
}

static gp_audit_put audit_of(const char *route, const char *study)
{
    return (gp_audit_put){.key_name = "k", .route = route, .model = study, .status = 200,
                          .request_id = "r"};
}

/* ---- studies ---- */

static void test_study_create_get_list_delete(void **state)
{
    (void)state;
    char path[512];
    sf_db_path(path, sizeof path, "studies.db");
    gp_store *s = sf_open_store("studies.db");
    gp_error err;
    gp_study_row b = create(s, "b");
    assert_true(b.id > 0);
    assert_string_equal(b.name, "b");
    assert_string_equal(b.config, CONFIG);
    assert_string_equal(b.created_by, "alice");
    assert_true(is_iso_time(b.created_at));
    assert_true(b.revision == 0 && b.n_trials == 0 && b.n_completed == 0 && b.refit_n == 0);
    gp_audit_put a = audit_of("POST /v1/studies", "a");
    gp_study_row ra;
    assert_int_equal(gp_store_study_create(s, "a", "{}", NULL, 0.0, &a, &ra, &err), GP_OK);
    assert_string_equal(ra.created_by, "");
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM audit WHERE model = 'a'", NULL), 1);

    /* Refusals write nothing. */
    gp_study_row dup;
    assert_int_equal(gp_store_study_create(s, "a", "{\"other\":1}", NULL, 0.0, &a, &dup, &err),
                     GP_ECONFLICT);
    assert_string_equal(err.field, "name");
    assert_null(dup.config);
    assert_int_equal(gp_store_study_create(s, "", "{}", NULL, 0.0, NULL, NULL, &err), GP_EINVAL);
    assert_string_equal(err.field, "name");
    char long_name[GP_NAME_MAX + 2];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[GP_NAME_MAX + 1] = '\0';
    assert_int_equal(gp_store_study_create(s, long_name, "{}", NULL, 0.0, NULL, NULL, &err),
                     GP_EINVAL);
    assert_int_equal(gp_store_study_create(s, "c", NULL, NULL, 0.0, NULL, NULL, &err), GP_EINVAL);
    assert_string_equal(err.field, "config");
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM studies", NULL), 2);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM audit", NULL), 1);

    gp_study_row g = get(s, "a");
    assert_int_equal(g.id, ra.id);
    assert_string_equal(g.config, "{}");
    gp_study_row none;
    assert_int_equal(gp_store_study_get(s, "zz", &none, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "name");
    assert_null(none.config);

    gp_study_row *rows = NULL;
    size_t n = 0;
    assert_int_equal(gp_store_study_list(s, &rows, &n, &err), GP_OK);
    assert_int_equal(n, 2);
    assert_string_equal(rows[0].name, "a");
    assert_string_equal(rows[1].name, "b");
    assert_string_equal(rows[1].config, CONFIG);
    gp_study_row_free_array(rows, n);

    /* A delete takes the study's trials and nothing else. */
    int64_t ids[3];
    assert_int_equal(add(s, ra.id, 0, "c", 3, 0, 5000.0, ids, &err), GP_OK);
    assert_int_equal(add(s, b.id, 0, "c", 2, 0, 5000.0, ids, &err), GP_OK);
    gp_audit_put d = audit_of("DELETE /v1/studies/{name}", "a");
    assert_int_equal(gp_store_study_delete(s, "a", &d, &err), GP_OK);
    assert_int_equal(count_trials(path), 2);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM audit", NULL), 2);
    assert_int_equal(gp_store_study_delete(s, "a", NULL, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "name");
    assert_int_equal(gp_store_study_get(s, "a", &none, &err), GP_ENOTFOUND);
    /* Made again: a new id, no trials. */
    gp_study_row again = create(s, "a");
    assert_true(again.id > ra.id);
    assert_true(again.n_trials == 0 && again.revision == 0);
    assert_int_equal(add(s, ra.id, 0, "c", 1, 0, 5000.0, ids, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "study");
    assert_int_equal(sf_raw_intf(path, "SELECT count(*) FROM trials WHERE study_id = %lld",
                                 (long long)again.id),
                     0);
    gp_study_row_free(&again);
    gp_study_row_free(&g);
    gp_study_row_free(&ra);
    gp_study_row_free(&b);
    gp_store_close(s);
}

/* ---- the optimistic insert ---- */

static void test_trials_add_revision(void **state)
{
    (void)state;
    char path[512];
    sf_db_path(path, sizeof path, "add.db");
    gp_store *s = sf_open_store("add.db");
    gp_error err;
    gp_study_row st = create(s, "s");
    int64_t ids[8] = {0};
    gp_audit_put a = audit_of("POST /v1/studies/{name}/suggestions", "s");
    char text[3][16] = {"{\"x0\":0}", "{\"x0\":1}", "{\"x0\":2}"};
    gp_trial_new t[3] = {{text[0]}, {text[1]}, {text[2]}};
    assert_int_equal(gp_store_trials_add(s, st.id, 0, "w1", t, 3, 1000.0, 4600.0, &a, ids, &err),
                     GP_OK);
    assert_true(ids[0] == 1 && ids[1] == 2 && ids[2] == 3);
    gp_study_row g = get(s, "s");
    assert_true(g.revision == 1 && g.n_trials == 3 && g.n_completed == 0);
    gp_study_row_free(&g);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM audit", NULL), 1);

    /* A stale revision: nothing written, the audit row neither. */
    assert_int_equal(add(s, st.id, 0, "w2", 2, 10, 4600.0, ids, &err), GP_ECONFLICT);
    assert_string_equal(err.field, "");
    assert_string_equal(err.message, "study changed");
    assert_true(ids[0] == 0 && ids[1] == 0);
    assert_int_equal(count_trials(path), 3);
    g = get(s, "s");
    assert_true(g.revision == 1 && g.n_trials == 3);
    gp_study_row_free(&g);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM audit", NULL), 1);
    assert_int_equal(add(s, st.id, 7, "w2", 1, 10, 4600.0, ids, &err), GP_ECONFLICT);

    /* The current one: the next ids; no client is allowed. */
    assert_int_equal(add(s, st.id, 1, NULL, 1, 10, 4600.0, ids, &err), GP_OK);
    assert_int_equal(ids[0], 4);

    /* Refusals before the store. */
    char client[GP_STUDY_CLIENT_MAX + 2];
    memset(client, 'c', sizeof client - 1);
    client[GP_STUDY_CLIENT_MAX + 1] = '\0';
    assert_int_equal(add(s, st.id, 2, client, 1, 0, 4600.0, ids, &err), GP_EINVAL);
    assert_string_equal(err.field, "client_id");
    client[GP_STUDY_CLIENT_MAX] = '\0'; /* the longest allowed */
    gp_trial_new bad[2] = {{"{}"}, {NULL}};
    assert_int_equal(gp_store_trials_add(s, st.id, 2, "c", bad, 2, 0, 0, NULL, ids, &err),
                     GP_EINVAL);
    assert_int_equal(gp_store_trials_add(s, st.id, 2, "c", bad, 0, 0, 0, NULL, ids, &err),
                     GP_EINVAL);
    assert_int_equal(count_trials(path), 4);
    assert_int_equal(add(s, st.id, 2, client, 1, 20, 4600.0, ids, &err), GP_OK);
    assert_int_equal(ids[0], 5);

    /* The snapshot: the study and its trials as stored. */
    gp_study_row snap;
    gp_trial_row *tr = NULL;
    size_t n = 0;
    assert_int_equal(gp_store_study_snapshot(s, "s", &snap, &tr, &n, &err), GP_OK);
    assert_int_equal(n, 5);
    assert_true(snap.revision == 3 && snap.n_trials == 5);
    for (size_t i = 0; i < n; i++) {
        assert_int_equal(tr[i].id, (int64_t)i + 1);
        assert_string_equal(tr[i].state, "active");
        assert_null(tr[i].metrics);
        assert_null(tr[i].reason);
        assert_true(tr[i].seq == 0);
        assert_true(tr[i].created == 1000.0 && tr[i].updated == 1000.0);
        assert_true(tr[i].expires_at == 4600.0);
    }
    assert_string_equal(tr[1].parameters, "{\"x0\":1}");
    assert_string_equal(tr[0].client_id, "w1");
    assert_string_equal(tr[3].client_id, "");
    assert_string_equal(tr[4].client_id, client);
    gp_trial_row_free_array(tr, n);
    gp_study_row_free(&snap);
    assert_int_equal(gp_store_study_snapshot(s, "nope", &snap, &tr, &n, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "name");
    assert_null(tr);

    gp_trial_row one;
    assert_int_equal(gp_store_trial_get(s, st.id, 2, &one, &err), GP_OK);
    assert_string_equal(one.parameters, "{\"x0\":1}");
    gp_trial_row_free(&one);
    assert_int_equal(gp_store_trial_get(s, st.id, 9, &one, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "trial");
    gp_study_row_free(&st);
    gp_store_close(s);
}

/* ---- completions ---- */

static void test_trial_complete(void **state)
{
    (void)state;
    char path[512];
    sf_db_path(path, sizeof path, "complete.db");
    gp_store *s = sf_open_store("complete.db");
    gp_error err;
    gp_study_row a = create(s, "a"), b = create(s, "b");
    int64_t ids[4];
    assert_int_equal(add(s, a.id, 0, "c", 3, 0, 4600.0, ids, &err), GP_OK);
    assert_int_equal(add(s, b.id, 0, "c", 1, 0, 4600.0, ids, &err), GP_OK);

    uint64_t seq = 0;
    gp_study_row after;
    gp_audit_put au = audit_of("POST /v1/studies/{name}/trials/{trial}", "a");
    assert_int_equal(gp_store_trial_complete(s, a.id, 2, "completed", "{\"y\":0.5}", NULL, 2000.0,
                                             &au, &seq, &after, &err),
                     GP_OK);
    assert_true(seq == 1);
    assert_true(after.n_completed == 1 && after.revision == 2 && after.n_trials == 3);
    assert_string_equal(after.name, "a");
    gp_study_row_free(&after);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM audit", NULL), 1);

    /* Not active: a conflict naming the state; nothing changes. */
    assert_int_equal(gp_store_trial_complete(s, a.id, 2, "completed", "{\"y\":1}", NULL, 2100.0,
                                             &au, &seq, &after, &err),
                     GP_ECONFLICT);
    assert_string_equal(err.field, "trial");
    assert_non_null(strstr(err.message, "completed"));
    assert_true(seq == 0);
    assert_null(after.config);
    /* Unknown here, though study a has a trial 3: another study's id. */
    assert_int_equal(gp_store_trial_complete(s, b.id, 3, "completed", "{\"y\":1}", NULL, 2100.0,
                                             NULL, NULL, NULL, &err),
                     GP_ENOTFOUND);
    assert_string_equal(err.field, "trial");
    assert_int_equal(gp_store_trial_complete(s, a.id, 99, "completed", "{\"y\":1}", NULL, 2100.0,
                                             NULL, NULL, NULL, &err),
                     GP_ENOTFOUND);
    assert_int_equal(gp_store_trial_complete(s, a.id, 1, "done", "{}", NULL, 0, NULL, NULL, NULL,
                                             &err),
                     GP_EINVAL);
    assert_string_equal(err.field, "state");
    assert_int_equal(gp_store_trial_complete(s, a.id, 1, "completed", NULL, NULL, 0, NULL, NULL,
                                             NULL, &err),
                     GP_EINVAL);
    assert_string_equal(err.field, "metrics");
    assert_int_equal(gp_store_trial_complete(s, 999, 1, "completed", "{}", NULL, 0, NULL, NULL,
                                             NULL, &err),
                     GP_ENOTFOUND);
    assert_string_equal(err.field, "study");
    gp_study_row g = get(s, "a");
    assert_true(g.n_completed == 1 && g.revision == 2);
    gp_study_row_free(&g);
    g = get(s, "b");
    assert_true(g.n_completed == 0 && g.revision == 1);
    gp_study_row_free(&g);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM audit", NULL), 1);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM trials WHERE seq > 0", NULL), 1);

    /* Infeasible: the next seq, its reason, no metrics. */
    assert_int_equal(gp_store_trial_complete(s, a.id, 3, "infeasible", NULL, "diverged", 2200.0,
                                             NULL, &seq, NULL, &err),
                     GP_OK);
    assert_true(seq == 2);
    gp_trial_row t;
    assert_int_equal(gp_store_trial_get(s, a.id, 3, &t, &err), GP_OK);
    assert_string_equal(t.state, "infeasible");
    assert_null(t.metrics);
    assert_string_equal(t.reason, "diverged");
    assert_true(t.seq == 2 && t.updated == 2200.0 && t.created == 1000.0);
    assert_string_equal(t.client_id, "c");
    gp_trial_row_free(&t);
    assert_int_equal(gp_store_trial_get(s, a.id, 2, &t, &err), GP_OK);
    assert_string_equal(t.metrics, "{\"y\":0.5}");
    assert_true(t.seq == 1);
    gp_trial_row_free(&t);
    /* Study b's first completion is its seq 1. */
    assert_int_equal(gp_store_trial_complete(s, b.id, 1, "completed", "{\"y\":2}", NULL, 2300.0,
                                             NULL, &seq, NULL, &err),
                     GP_OK);
    assert_true(seq == 1);
    gp_study_row_free(&a);
    gp_study_row_free(&b);
    gp_store_close(s);
}

/* ---- heartbeats and expiry ---- */

static void test_renew_and_expire(void **state)
{
    (void)state;
    char path[512];
    sf_db_path(path, sizeof path, "expire.db");
    gp_store *s = sf_open_store("expire.db");
    gp_error err;
    gp_study_row a = create(s, "a"), b = create(s, "b");
    int64_t ids[4];
    assert_int_equal(add(s, a.id, 0, "c1", 2, 0, 100.0, ids, &err), GP_OK);
    assert_int_equal(add(s, a.id, 1, "c2", 1, 5, 200.0, ids, &err), GP_OK);
    assert_int_equal(add(s, b.id, 0, "c1", 1, 0, 100.0, ids, &err), GP_OK);

    size_t renewed = 9;
    assert_int_equal(gp_store_trials_renew(s, a.id, "c1", 300.0, &renewed, &err), GP_OK);
    assert_int_equal(renewed, 2); /* a's alone */
    assert_int_equal(gp_store_trials_renew(s, a.id, "", 300.0, &renewed, &err), GP_EINVAL);
    assert_string_equal(err.field, "client_id");
    gp_study_row g = get(s, "a");
    assert_true(g.revision == 2); /* a heartbeat is no change of the trials */
    gp_study_row_free(&g);

    size_t expired = 9;
    assert_int_equal(gp_store_trials_expire(s, 150.0, &expired, &err), GP_OK);
    assert_int_equal(expired, 1); /* b's */
    g = get(s, "a");
    assert_true(g.revision == 2);
    gp_study_row_free(&g);
    g = get(s, "b");
    assert_true(g.revision == 2 && g.n_trials == 1 && g.n_completed == 0);
    gp_study_row_free(&g);
    gp_trial_row t;
    assert_int_equal(gp_store_trial_get(s, b.id, 1, &t, &err), GP_OK);
    assert_string_equal(t.state, "expired");
    assert_string_equal(t.parameters, "{\"x0\":0}");
    assert_string_equal(t.client_id, "");
    assert_true(t.seq == 0 && t.updated == 150.0 && t.expires_at == 100.0);
    gp_trial_row_free(&t);
    /* Expired: not completed, not renewed, not expired again. */
    assert_int_equal(gp_store_trial_complete(s, b.id, 1, "completed", "{\"y\":1}", NULL, 160.0,
                                             NULL, NULL, NULL, &err),
                     GP_ECONFLICT);
    assert_non_null(strstr(err.message, "expired"));
    assert_int_equal(gp_store_trials_renew(s, b.id, "c1", 900.0, &renewed, &err), GP_OK);
    assert_int_equal(renewed, 0);
    assert_int_equal(gp_store_trials_expire(s, 150.0, &expired, &err), GP_OK);
    assert_int_equal(expired, 0);

    assert_int_equal(gp_store_trials_expire(s, 250.0, &expired, &err), GP_OK);
    assert_int_equal(expired, 1); /* a's c2 */
    g = get(s, "a");
    assert_true(g.revision == 3);
    gp_study_row_free(&g);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM trials WHERE state = 'active'", NULL),
                     2);
    /* A completed trial never expires. */
    assert_int_equal(gp_store_trial_complete(s, a.id, 1, "completed", "{\"y\":1}", NULL, 260.0,
                                             NULL, NULL, NULL, &err),
                     GP_OK);
    assert_int_equal(gp_store_trials_expire(s, 1e9, &expired, &err), GP_OK);
    assert_int_equal(expired, 1);
    assert_int_equal(gp_store_trial_get(s, a.id, 1, &t, &err), GP_OK);
    assert_string_equal(t.state, "completed");
    gp_trial_row_free(&t);
    gp_study_row_free(&a);
    gp_study_row_free(&b);
    gp_store_close(s);
}

static void test_refit_claim(void **state)
{
    (void)state;
    gp_store *s = sf_open_store("claim.db");
    gp_error err;
    gp_study_row a = create(s, "a");
    int claimed = -1;
    assert_int_equal(gp_store_study_refit_claim(s, a.id, 5, &claimed, &err), GP_OK);
    assert_int_equal(claimed, 1);
    assert_int_equal(gp_store_study_refit_claim(s, a.id, 5, &claimed, &err), GP_OK);
    assert_int_equal(claimed, 0);
    assert_int_equal(gp_store_study_refit_claim(s, a.id, 3, &claimed, &err), GP_OK);
    assert_int_equal(claimed, 0);
    assert_int_equal(gp_store_study_refit_claim(s, a.id, 6, &claimed, &err), GP_OK);
    assert_int_equal(claimed, 1);
    gp_study_row g = get(s, "a");
    assert_true(g.refit_n == 6 && g.revision == 0);
    gp_study_row_free(&g);
    assert_int_equal(gp_store_study_refit_claim(s, a.id + 100, 7, &claimed, &err), GP_ENOTFOUND);
    assert_string_equal(err.field, "study");
    assert_int_equal(gp_store_study_refit_claim(s, a.id, 0, &claimed, &err), GP_EINVAL);
    gp_study_row_free(&a);
    gp_store_close(s);
}

/* ---- races between two handles (two daemons) ---- */

/* A barrier both threads meet at before each round. */
typedef struct racer {
    gp_store *s;
    int64_t study;
    int index;
    pthread_barrier_t *bar;
    int rounds;
    int wins, conflicts, errors;
    uint64_t *revision; /* shared: the revision both insert at */
    char message[256];
} racer;

/* Each round both handles insert at the same revision: one wins. */
static void *race_same_revision(void *arg)
{
    racer *r = arg;
    for (int k = 0; k < r->rounds; k++) {
        pthread_barrier_wait(r->bar);
        int64_t id = 0;
        gp_error err;
        int rc = add(r->s, r->study, *r->revision, r->index ? "w1" : "w0", 1, 100 * k + r->index,
                     1e12, &id, &err);
        if (rc == GP_OK)
            r->wins++;
        else if (rc == GP_ECONFLICT)
            r->conflicts++;
        else {
            r->errors++;
            snprintf(r->message, sizeof r->message, "%s", err.message);
        }
        pthread_barrier_wait(r->bar);
        if (r->index == 0) /* the next round's revision: read after both are done */
            *r->revision += 1;
        pthread_barrier_wait(r->bar);
    }
    return NULL;
}

static void test_race_same_revision(void **state)
{
    (void)state;
    enum { ROUNDS = 25 };
    char path[512];
    sf_db_path(path, sizeof path, "race1.db");
    gp_store *h[2] = {sf_open_store("race1.db"), sf_open_store("race1.db")};
    gp_study_row st = create(h[0], "s");
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, 2);
    uint64_t revision = 0;
    racer r[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        r[i] = (racer){h[i], st.id, i, &bar, ROUNDS, 0, 0, 0, &revision, ""};
        assert_int_equal(pthread_create(&th[i], NULL, race_same_revision, &r[i]), 0);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&bar);
    if (r[0].errors || r[1].errors)
        fail_msg("%s%s", r[0].message, r[1].message);
    /* Every round exactly one insert committed. */
    assert_int_equal(r[0].wins + r[1].wins, ROUNDS);
    assert_int_equal(r[0].conflicts + r[1].conflicts, ROUNDS);
    assert_int_equal(count_trials(path), ROUNDS);
    assert_int_equal(sf_raw_int(path, "SELECT max(id) FROM trials", NULL), ROUNDS);
    gp_study_row g = get(h[1], "s");
    assert_true(g.revision == ROUNDS && g.n_trials == ROUNDS);
    gp_study_row_free(&g);
    gp_study_row_free(&st);
    gp_store_close(h[0]);
    gp_store_close(h[1]);
}

/* Insert `rounds` batches of 2, each at the revision of a fresh snapshot,
 * again on a conflict (what the api's suggest does). */
static void *race_retrying(void *arg)
{
    racer *r = arg;
    for (int k = 0; k < r->rounds; k++) {
        for (;;) {
            gp_error err;
            gp_study_row snap;
            gp_trial_row *tr = NULL;
            size_t n = 0;
            int rc = gp_store_study_snapshot(r->s, "s", &snap, &tr, &n, &err);
            gp_trial_row_free_array(tr, n);
            gp_study_row_free(&snap);
            int64_t ids[2];
            if (rc == GP_OK)
                rc = add(r->s, r->study, snap.revision, r->index ? "w1" : "w0", 2,
                         1000 * r->index + 2 * k, 1e12, ids, &err);
            if (rc == GP_OK) {
                r->wins++;
                break;
            }
            if (rc != GP_ECONFLICT) {
                r->errors++;
                snprintf(r->message, sizeof r->message, "%s", err.message);
                return NULL;
            }
            r->conflicts++;
        }
    }
    return NULL;
}

static void test_race_retrying_inserts(void **state)
{
    (void)state;
    enum { ROUNDS = 30 };
    char path[512];
    sf_db_path(path, sizeof path, "race2.db");
    gp_store *h[2] = {sf_open_store("race2.db"), sf_open_store("race2.db")};
    gp_study_row st = create(h[0], "s");
    racer r[2];
    pthread_t th[2];
    for (int i = 0; i < 2; i++) {
        r[i] = (racer){h[i], st.id, i, NULL, ROUNDS, 0, 0, 0, NULL, ""};
        assert_int_equal(pthread_create(&th[i], NULL, race_retrying, &r[i]), 0);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    if (r[0].errors || r[1].errors)
        fail_msg("%s%s", r[0].message, r[1].message);
    const long long total = 2 * 2 * ROUNDS;
    /* Ids 1..total, each once; every batch stored once. */
    assert_int_equal(count_trials(path), total);
    assert_int_equal(sf_raw_int(path, "SELECT count(DISTINCT id) FROM trials", NULL), total);
    assert_int_equal(sf_raw_int(path, "SELECT min(id) FROM trials", NULL), 1);
    assert_int_equal(sf_raw_int(path, "SELECT max(id) FROM trials", NULL), total);
    assert_int_equal(sf_raw_int(path, "SELECT count(DISTINCT parameters) FROM trials", NULL),
                     total);
    /* A batch's two trials have consecutive ids (one transaction). */
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM trials AS t WHERE id % 2 = 1 AND"
                                      " NOT EXISTS (SELECT 1 FROM trials AS u WHERE"
                                      " u.id = t.id + 1 AND u.client_id = t.client_id)",
                                NULL),
                     0);
    gp_study_row g = get(h[0], "s");
    assert_true(g.n_trials == (uint64_t)total);
    assert_true(g.revision == (uint64_t)(2 * ROUNDS));
    gp_study_row_free(&g);
    gp_study_row_free(&st);
    gp_store_close(h[0]);
    gp_store_close(h[1]);
}

/* Complete the trials i with i % 2 == index; seq_out must grow. */
typedef struct completer {
    gp_store *s;
    int64_t study;
    int index, n;
    int errors;
    int out_of_order;
    char message[256];
} completer;

static void *complete_half(void *arg)
{
    completer *c = arg;
    uint64_t last = 0;
    for (int64_t id = 1 + c->index; id <= c->n; id += 2) {
        gp_error err;
        uint64_t seq = 0;
        char m[32];
        snprintf(m, sizeof m, "{\"y\":%lld}", (long long)id);
        if (gp_store_trial_complete(c->s, c->study, id, "completed", m, NULL, 3000.0, NULL, &seq,
                                    NULL, &err)) {
            c->errors++;
            snprintf(c->message, sizeof c->message, "%s", err.message);
            return NULL;
        }
        if (seq <= last)
            c->out_of_order++;
        last = seq;
    }
    return NULL;
}

/* A reader's snapshots while the completions run: the completed trials'
 * seqs are always exactly 1..n_completed (a prefix, no gap). */
typedef struct watcher {
    gp_store *s;
    volatile int *stop;
    int snapshots, bad;
    char message[256];
} watcher;

static void *watch_prefix(void *arg)
{
    watcher *w = arg;
    while (!*w->stop) {
        gp_error err;
        gp_study_row snap;
        gp_trial_row *tr = NULL;
        size_t n = 0;
        if (gp_store_study_snapshot(w->s, "s", &snap, &tr, &n, &err)) {
            w->bad++;
            snprintf(w->message, sizeof w->message, "%s", err.message);
            break;
        }
        char *seen = calloc(n + 2, 1);
        uint64_t done = 0;
        for (size_t i = 0; i < n; i++) {
            if (tr[i].seq == 0)
                continue;
            done++;
            if (tr[i].seq > snap.n_completed || seen[tr[i].seq])
                w->bad++;
            else
                seen[tr[i].seq] = 1;
        }
        if (done != snap.n_completed)
            w->bad++;
        free(seen);
        gp_trial_row_free_array(tr, n);
        gp_study_row_free(&snap);
        w->snapshots++;
    }
    return NULL;
}

static void test_race_completions(void **state)
{
    (void)state;
    enum { N = 60 };
    char path[512];
    sf_db_path(path, sizeof path, "race3.db");
    gp_store *h[3] = {sf_open_store("race3.db"), sf_open_store("race3.db"),
                      sf_open_store("race3.db")};
    gp_study_row st = create(h[0], "s");
    gp_error err;
    int64_t ids[6];
    for (int k = 0; k < N / 6; k++)
        assert_int_equal(add(h[0], st.id, (uint64_t)k, "c", 6, 6 * k, 1e12, ids, &err), GP_OK);
    volatile int stop = 0;
    watcher w = {h[2], &stop, 0, 0, ""};
    pthread_t wt, th[2];
    assert_int_equal(pthread_create(&wt, NULL, watch_prefix, &w), 0);
    completer c[2];
    for (int i = 0; i < 2; i++) {
        c[i] = (completer){h[i], st.id, i, N, 0, 0, ""};
        assert_int_equal(pthread_create(&th[i], NULL, complete_half, &c[i]), 0);
    }
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    stop = 1;
    pthread_join(wt, NULL);
    if (c[0].errors || c[1].errors)
        fail_msg("%s%s", c[0].message, c[1].message);
    if (w.bad)
        fail_msg("%d snapshots of %d were not a prefix %s", w.bad, w.snapshots, w.message);
    assert_int_equal(c[0].out_of_order + c[1].out_of_order, 0);
    assert_int_equal(sf_raw_int(path, "SELECT count(DISTINCT seq) FROM trials WHERE seq > 0",
                                NULL),
                     N);
    assert_int_equal(sf_raw_int(path, "SELECT max(seq) FROM trials", NULL), N);
    assert_int_equal(sf_raw_int(path, "SELECT min(seq) FROM trials", NULL), 1);
    gp_study_row g = get(h[1], "s");
    assert_true(g.n_completed == N && g.revision == (uint64_t)(N / 6 + N));
    gp_study_row_free(&g);
    gp_study_row_free(&st);
    for (int i = 0; i < 3; i++)
        gp_store_close(h[i]);
}

/* ---- a killed daemon ---- */

/* A process that completes a trial and is killed (SIGKILL, no close) the
 * moment the call returns: the completion is there for the next one. */
static void test_completion_survives_kill(void **state)
{
    (void)state;
    gp_store *s = sf_open_store("kill.db");
    gp_study_row a = create(s, "a");
    gp_error err;
    int64_t ids[2];
    assert_int_equal(add(s, a.id, 0, "c", 2, 0, 1e12, ids, &err), GP_OK);
    gp_store_close(s);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        gp_store *child = NULL;
        char path[512];
        sf_db_path(path, sizeof path, "kill.db");
        if (gp_store_open(path, &child, &err) ||
            gp_store_trial_complete(child, a.id, 2, "completed", "{\"y\":3}", NULL, 2000.0, NULL,
                                    NULL, NULL, &err))
            _exit(3);
        raise(SIGKILL);
        _exit(4);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
    s = sf_open_store("kill.db");
    gp_trial_row t;
    assert_int_equal(gp_store_trial_get(s, a.id, 2, &t, &err), GP_OK);
    assert_string_equal(t.state, "completed");
    assert_string_equal(t.metrics, "{\"y\":3}");
    assert_true(t.seq == 1);
    gp_trial_row_free(&t);
    gp_study_row g = get(s, "a");
    assert_true(g.n_completed == 1 && g.revision == 2);
    gp_study_row_free(&g);
    gp_study_row_free(&a);
    gp_store_close(s);
}

/* ---- migration ---- */

/* A version 8 file gains the tables and keeps what it holds. */
static void test_studies_migrate_v8(void **state)
{
    (void)state;
    char path[512];
    sf_db_path(path, sizeof path, "v8.db");
    gp_store *s = sf_open_store("v8.db");
    gp_state st;
    make_state(&st);
    gp_error err;
    assert_int_equal(gp_store_save(s, "m", "exact", "{}", "{}", 5, 2, &st, NULL, &err), GP_OK);
    gp_store_close(s);
    sf_raw_script(path, "DROP TABLE trials; DROP TABLE studies; PRAGMA user_version = 8;");
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM sqlite_master WHERE name IN"
                                      " ('studies', 'trials')",
                                NULL),
                     0);
    s = sf_open_store("v8.db");
    assert_int_equal(sf_raw_int(path, "PRAGMA user_version", NULL), GP_STORE_SCHEMA_VERSION);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM models", NULL), 1);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM sqlite_master WHERE name IN"
                                      " ('studies', 'trials', 'trials_seq', 'trials_active')",
                                NULL),
                     4);
    gp_study_row a = create(s, "after");
    int64_t id;
    assert_int_equal(add(s, a.id, 0, "c", 1, 0, 10.0, &id, &err), GP_OK);
    assert_int_equal(id, 1);
    gp_study_row_free(&a);
    gp_state_free(&st);
    gp_store_close(s);
}

/* The PostgreSQL schema of a version 8 database migrates the same way. */
static void test_studies_migrate_v8_pg(void **state)
{
    (void)state;
    char path[512];
    sf_db_path(path, sizeof path, "v8pg.db");
    gp_store *s = sf_open_store("v8pg.db");
    gp_study_row a = create(s, "before");
    gp_study_row_free(&a);
    gp_store_close(s);
    sf_raw_script(path, "DROP TABLE trials; DROP TABLE studies;"
                        " UPDATE gpserve_schema SET version = 8;");
    s = sf_open_store("v8pg.db");
    assert_int_equal(sf_raw_int(path, "SELECT version FROM gpserve_schema", NULL),
                     GP_STORE_SCHEMA_VERSION);
    a = create(s, "after");
    gp_error err;
    int64_t id;
    assert_int_equal(add(s, a.id, 0, "c", 1, 0, 10.0, &id, &err), GP_OK);
    assert_int_equal(id, 1);
    gp_study_row_free(&a);
    gp_store_close(s);
}

int main(void)
{
    const struct CMUnitTest both[] = {
        cmocka_unit_test(test_study_create_get_list_delete),
        cmocka_unit_test(test_trials_add_revision),
        cmocka_unit_test(test_trial_complete),
        cmocka_unit_test(test_renew_and_expire),
        cmocka_unit_test(test_refit_claim),
        cmocka_unit_test(test_race_same_revision),
        cmocka_unit_test(test_race_retrying_inserts),
        cmocka_unit_test(test_race_completions),
        cmocka_unit_test(test_completion_survives_kill),
    };
    const struct CMUnitTest sqlite_only[] = {
        cmocka_unit_test(test_studies_migrate_v8),
    };
    const struct CMUnitTest pg_only[] = {
        cmocka_unit_test(test_studies_migrate_v8_pg),
    };
    return sf_run_groups("store_studies", both, SF_COUNT(both), sqlite_only,
                         SF_COUNT(sqlite_only), pg_only, SF_COUNT(pg_only));
}
