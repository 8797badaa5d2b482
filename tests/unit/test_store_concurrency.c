/* Unit tests for store/ under concurrency and damage: concurrent savers
 * (threads on one handle, threads on their own handles, and separate
 * processes), damaged files and SQLite's write lock, and reads that go on (and
 * see the last committed data) while the handle's writer is in the middle of a
 * save or holds a write transaction; the in-memory database.
 *
 * The tests of the back-end-independent behaviour run twice (store_fixture.h):
 * on SQLite files in a directory made with mkdtemp under /tmp (removed by the
 * group teardown), and on PostgreSQL when GPSERVE_TEST_PG_URL names a server
 * (a schema per database name, dropped by the group teardown; without a
 * server that group is one skipped test). A second, raw connection inspects
 * and corrupts the data behind the store's back. The
 * tests of SQLite's files, WAL and write lock run on it alone. */
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

int main(void)
{
    /* What every back end does alike: once on SQLite, once on PostgreSQL. */
    const struct CMUnitTest both[] = {
        cmocka_unit_test(test_threads_shared_handle),
        cmocka_unit_test(test_threads_own_handles),
        cmocka_unit_test(test_processes),
    };
    const struct CMUnitTest sqlite_only[] = {
        cmocka_unit_test(test_corrupt_file),
        cmocka_unit_test(test_waits_for_write_lock),
        cmocka_unit_test(test_reads_during_write),
        cmocka_unit_test(test_reads_beside_long_reads),
        cmocka_unit_test(test_reader_is_read_only),
        cmocka_unit_test(test_in_memory),
    };
    return sf_run_groups("store_concurrency", both, SF_COUNT(both), sqlite_only,
                         SF_COUNT(sqlite_only), NULL, 0);
}
