/* Unit tests for the observation log of store/ when things go wrong:
 * conflicts on a stale expected_seq across two handles and racing threads,
 * writes that fail leaving nothing (refused arguments, an abort inside the
 * transaction, a process killed mid-write), parts splitting, and corrupt logs
 * and snapshots.
 *
 * The tests of what every back end does alike run on SQLite files (in a
 * directory made with mkdtemp under /tmp, removed by the group teardown) and
 * again on PostgreSQL when GPSERVE_TEST_PG_URL names a server (one schema per
 * database name; store_fixture.h); those of SQLite's own triggers on SQLite
 * alone. A raw connection inspects and corrupts the data behind the store's
 * back. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "tests/unit/store_observe_fixture.h"

/* ---- several writers -------------------------------------------------------- */

/* Two handles on one file (WAL): what one appends, the other sees at once,
 * and the stale one of them gets a conflict. */
static void test_two_handles(void **state)
{
    (void)state;
    gp_store *a = sf_open_store("two.db");
    gp_store *b = sf_open_store("two.db");
    const int64_t id = save_model(a, "shared");
    gp_state x, y;
    make_batch(&x, 1, 4);
    make_batch(&y, 2, 4);
    observe_ok(a, id, 0, &x, 11, NULL);
    assert_int_equal(meta_obs_seq(b, "shared", NULL), 1);
    gp_error err;
    expect_replay(b, id, 0, 1, 1, (const gp_state *[]){&x});
    observe_ok(b, id, 1, &y, 13, &y);
    assert_int_equal(observe(a, id, 1, &x, 12, NULL, &err), GP_ECONFLICT);
    size_t nt = 0;
    assert_int_equal(meta_obs_seq(a, "shared", &nt), 2);
    assert_int_equal(nt, 13);
    expect_snapshot(a, id, 2, &y);
    expect_replay(a, id, 1, 2, 1, (const gp_state *[]){&y});
    gp_state_free(&x);
    gp_state_free(&y);
    gp_store_close(a);
    gp_store_close(b);
}

/* Writers on their own handles race on one version, each catching up after a
 * conflict: every batch goes in exactly once, each writer's in its order. */
typedef struct racer {
    const char *file;
    int64_t id;
    int who, count, conflicts;
    pthread_barrier_t *start; /* all handles open before the first append */
} racer;

enum { RACERS = 4, RACES = 25 };

static void *racer_main(void *arg)
{
    racer *r = arg;
    gp_store *s = sf_open_store(r->file);
    pthread_barrier_wait(r->start);
    gp_error err;
    for (int i = 0; i < r->count; i++) {
        const double tag[2] = {(double)r->who, (double)i};
        gp_state b;
        gp_state_init(&b);
        assert_int_equal(gp_state_put(&b, "X", 1, 2, tag, &err), GP_OK);
        for (;;) {
            gp_model_meta m;
            assert_int_equal(gp_store_meta_brief(s, "race", 0, &m, &err), GP_OK);
            int rc = gp_store_observe(s, r->id, m.obs_seq, &b, m.n_train + 1, NULL, NULL, &err);
            if (rc == GP_OK)
                break;
            assert_int_equal(rc, GP_ECONFLICT);
            r->conflicts++;
        }
        gp_state_free(&b);
    }
    gp_store_close(s);
    return NULL;
}

static int check_race_entry(void *ctx, uint64_t seq, const gp_state *batch, gp_error *err)
{
    int *next = ctx; /* next expected index per writer */
    (void)seq;
    const double *x;
    int rc = gp_state_get(batch, "X", 1, 2, &x, err);
    if (rc)
        return rc;
    const int who = (int)x[0], i = (int)x[1];
    assert_true(who >= 0 && who < RACERS);
    assert_int_equal(i, next[who]);
    next[who]++;
    return GP_OK;
}

static void test_racing_writers(void **state)
{
    (void)state;
    int64_t id;
    gp_store *s = open_with_model("race.db", "race", NULL, &id);
    pthread_t th[RACERS];
    racer r[RACERS];
    pthread_barrier_t start;
    assert_int_equal(pthread_barrier_init(&start, NULL, RACERS), 0);
    for (int i = 0; i < RACERS; i++) {
        r[i] = (racer){.file = "race.db", .id = id, .who = i, .count = RACES, .conflicts = 0,
                       .start = &start};
        assert_int_equal(pthread_create(&th[i], NULL, racer_main, &r[i]), 0);
    }
    for (int i = 0; i < RACERS; i++)
        pthread_join(th[i], NULL);
    pthread_barrier_destroy(&start);
    size_t nt = 0;
    assert_int_equal(meta_obs_seq(s, "race", &nt), RACERS * RACES);
    assert_int_equal(nt, 10 + RACERS * RACES);
    int next[RACERS] = {0};
    gp_error err;
    assert_int_equal(
        gp_store_observations(s, id, 0, RACERS * RACES, check_race_entry, next, &err), GP_OK);
    for (int i = 0; i < RACERS; i++)
        assert_int_equal(next[i], RACES);
    gp_store_close(s);
}

/* ---- failures leave nothing -------------------------------------------------- */

static void assert_untouched(const char *path, gp_store *s, int64_t id, uint64_t entries,
                             size_t n_train, uint64_t snap_at, const gp_state *snap)
{
    size_t nt = 0;
    assert_int_equal(meta_obs_seq(s, "f", &nt), entries);
    assert_int_equal(nt, n_train);
    assert_int_equal(sf_raw_intf(path, "SELECT count(*) FROM observations WHERE seq > %llu",
                              (unsigned long long)entries),
                     0);
    expect_snapshot(s, id, snap_at, snap);
}

static void test_failed_writes_leave_nothing(void **state)
{
    (void)state;
    char path[256];
    int64_t id;
    gp_store *s = open_with_model("fail.db", "f", path, &id);
    gp_state b, snap;
    make_batch(&b, 2, 4);
    gp_state_init(&snap);
    put_bits(&snap, "state", 30, 2);
    observe_ok(s, id, 0, &b, 12, &snap);
    gp_error err;

    /* Refused before writing: no batch, an empty one, an array without data
     * (in the batch or in the snapshot), an empty snapshot. */
    assert_int_equal(observe(s, id, 1, NULL, 13, NULL, &err), GP_EINVAL);
    assert_string_equal(err.field, "batch");
    gp_state empty;
    gp_state_init(&empty);
    assert_int_equal(observe(s, id, 1, &empty, 13, NULL, &err), GP_EINVAL);
    assert_int_equal(observe(s, id, 1, &b, 13, &empty, &err), GP_EINVAL);
    assert_string_equal(err.field, "snapshot");
    gp_state holey;
    copy_state(&holey, &b);
    double *keep = holey.arrays[1].data;
    holey.arrays[1].data = NULL; /* "y" */
    assert_int_equal(observe(s, id, 1, &holey, 13, NULL, &err), GP_EINVAL);
    assert_string_equal(err.field, "y");
    assert_int_equal(observe(s, id, 1, &b, 13, &holey, &err), GP_EINVAL);
    assert_string_equal(err.field, "y");
    holey.arrays[1].data = keep;
    gp_state_free(&holey);
    assert_untouched(path, s, id, 1, 12, 1, &snap);

    /* An abort inside the transaction, after the entry's first array (a
     * trigger refuses "y"), and after the whole entry and the counts (one
     * refuses the snapshot's rows): the log, the row and the old snapshot are
     * as they were. */
    sf_raw_script(path, "CREATE TRIGGER no_y BEFORE INSERT ON observations WHEN NEW.key = 'y'"
                   " BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;");
    int rc = observe(s, id, 1, &b, 13, NULL, &err);
    assert_true(rc < 0 && rc != GP_ECONFLICT);
    assert_non_null(strstr(err.message, "refused by the test"));
    assert_untouched(path, s, id, 1, 12, 1, &snap);
    sf_raw_script(path, "DROP TRIGGER no_y;"
                   "CREATE TRIGGER no_snap BEFORE INSERT ON snapshots"
                   " BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;");
    gp_state snap2;
    gp_state_init(&snap2);
    put_bits(&snap2, "state", 31, 2);
    rc = observe(s, id, 1, &b, 13, &snap2, &err);
    assert_true(rc < 0 && rc != GP_ECONFLICT);
    assert_untouched(path, s, id, 1, 12, 1, &snap);
    /* Without the trigger the same append goes in. */
    sf_raw_script(path, "DROP TRIGGER no_snap;");
    observe_ok(s, id, 1, &b, 13, &snap2);
    assert_untouched(path, s, id, 2, 13, 2, &snap2);
    gp_state_free(&b);
    gp_state_free(&snap);
    gp_state_free(&snap2);
    gp_store_close(s);
}

/* A process killed (SIGKILL) while it appends, again and again: the file
 * opens, and its log, counts and snapshot agree with each other. Every
 * entry's contents follow from its number, so each can be checked. */
enum { KILL_X_ROWS = 2048, KILL_SNAP = 65536 };

static void fill_entry(gp_state *b, uint64_t seq)
{
    gp_error err;
    gp_state_init(b);
    double *x = malloc(KILL_X_ROWS * 4 * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < KILL_X_ROWS * 4; i++)
        x[i] = (double)seq * 1e6 + (double)i;
    assert_int_equal(gp_state_put_owned(b, "X", KILL_X_ROWS, 4, x, &err), GP_OK);
    assert_int_equal(gp_state_put_scalar(b, "y", -(double)seq, &err), GP_OK);
}

static void fill_snapshot(gp_state *sn, uint64_t seq)
{
    gp_error err;
    gp_state_init(sn);
    double *x = malloc(KILL_SNAP * sizeof *x);
    assert_non_null(x);
    for (size_t i = 0; i < KILL_SNAP; i++)
        x[i] = (double)seq + 1e-6 * (double)i;
    assert_int_equal(gp_state_put_owned(sn, "S", KILL_SNAP, 1, x, &err), GP_OK);
}

static void appender_child(const char *file, int64_t id, int ready_fd)
{
    gp_store *s = NULL;
    char path[256];
    sf_db_path(path, sizeof path, file);
    gp_error err;
    if (gp_store_open(path, &s, &err))
        _exit(2);
    gp_store_set_part_bytes(s, 16384); /* many rows per entry: longer transactions */
    int told = 0;
    for (;;) {
        gp_model_meta m;
        if (gp_store_meta_brief(s, "k", 0, &m, &err))
            _exit(3);
        gp_state b, sn;
        fill_entry(&b, m.obs_seq + 1);
        const int with_snap = (m.obs_seq + 1) % 3 == 0;
        if (with_snap)
            fill_snapshot(&sn, m.obs_seq + 1);
        if (gp_store_observe(s, id, m.obs_seq, &b, 10 + KILL_X_ROWS * (m.obs_seq + 1),
                             with_snap ? &sn : NULL, NULL, &err))
            _exit(4);
        gp_state_free(&b);
        if (with_snap)
            gp_state_free(&sn);
        if (!told) {
            told = 1;
            if (write(ready_fd, "r", 1) != 1)
                _exit(5);
        }
    }
}

static int check_killed_entry(void *ctx, uint64_t seq, const gp_state *batch, gp_error *err)
{
    uint64_t *count = ctx;
    gp_state want;
    fill_entry(&want, seq);
    assert_true(sf_states_equal(batch, &want));
    gp_state_free(&want);
    (*count)++;
    (void)err;
    return GP_OK;
}

static void test_killed_writer(void **state)
{
    (void)state;
    char path[256];
    int64_t id;
    gp_store *s = open_with_model("killed.db", "k", path, &id);
    gp_store_close(s);
    uint64_t last = 0;
    for (int round = 0; round < 4; round++) {
        int fds[2];
        assert_int_equal(pipe(fds), 0);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            close(fds[0]);
            appender_child("killed.db", id, fds[1]);
        }
        close(fds[1]);
        char c;
        assert_int_equal(read(fds[0], &c, 1), 1);
        close(fds[0]);
        struct timespec ts = {0, (long)(5 + 7 * round) * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int status = 0;
        assert_int_equal(waitpid(pid, &status, 0), pid);
        assert_true(WIFSIGNALED(status));

        s = sf_open_store("killed.db");
        size_t nt = 0;
        const uint64_t n = meta_obs_seq(s, "k", &nt);
        assert_true(n > last);
        assert_int_equal(nt, 10 + KILL_X_ROWS * n);
        assert_int_equal(sf_raw_intf(path, "SELECT count(*) FROM observations WHERE seq > %llu",
                                  (unsigned long long)n),
                         0);
        uint64_t count = 0;
        gp_error err;
        assert_int_equal(gp_store_observations(s, id, 0, n, check_killed_entry, &count, &err),
                         GP_OK);
        assert_int_equal(count, n);
        gp_state got, want;
        gp_state_init(&got);
        uint64_t at = 0;
        assert_int_equal(gp_store_load_snapshot(s, id, &got, &at, &err), GP_OK);
        assert_int_equal(at, n - n % 3);
        if (at > 0) {
            fill_snapshot(&want, at);
            assert_true(sf_states_equal(&got, &want));
            gp_state_free(&want);
        }
        gp_state_free(&got);
        gp_store_close(s);
        last = n;
    }
}

/* ---- parts and corruption ---------------------------------------------------- */

static void test_parts(void **state)
{
    (void)state;
    char path[256];
    int64_t id;
    gp_store *s = open_with_model("parts.db", "p", path, &id);
    gp_store_set_part_bytes(s, 64);
    gp_state b1, b2, snap;
    make_batch(&b1, 20, 4); /* X: 640 bytes = 10 parts; y: 160 bytes = 3 parts */
    gp_error err;
    gp_state_init(&b2);
    assert_int_equal(gp_state_put(&b2, "X", 0, 4, NULL, &err), GP_OK); /* empty: one part */
    put_bits(&b2, "y", 8, 1);                                         /* 64 bytes: one part */
    gp_state_init(&snap);
    put_bits(&snap, "big", 100, 3); /* 2400 bytes = 38 parts (the last of 32) */
    put_bits(&snap, "one", 1, 1);
    observe_ok(s, id, 0, &b1, 30, NULL);
    observe_ok(s, id, 1, &b2, 30, &snap);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM observations WHERE seq = 1 AND key = 'X'", NULL),
                     10);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM observations WHERE seq = 1 AND key = 'y'", NULL),
                     3);
    assert_int_equal(sf_raw_int(path, "SELECT max(length(data)) FROM observations", NULL), 64);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM observations WHERE seq = 2", NULL), 2);
    assert_int_equal(sf_raw_int(path, "SELECT length(data) FROM observations WHERE seq = 2 AND"
                                   " key = 'X'", NULL),
                     0);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM snapshots WHERE key = 'big'", NULL), 38);
    assert_int_equal(sf_raw_int(path, "SELECT count(*) FROM snapshots WHERE seq = 2", NULL), 39);
    seen sn = {.n = 0};
    expect_replay(s, id, 0, 2, 2, (const gp_state *[]){&b1, &b2});
    expect_snapshot(s, id, 2, &snap);
    /* Another handle with the default part size reads them as well. */
    gp_store *s2 = sf_open_store("parts.db");
    assert_int_equal(gp_store_observations(s2, id, 0, 2, record, &sn, &err), GP_OK);
    assert_true(sf_states_equal(&sn.batch[0], &b1));
    seen_free(&sn);
    gp_store_close(s2);
    gp_state_free(&b1);
    gp_state_free(&b2);
    gp_state_free(&snap);
    gp_store_close(s);
}

/* Expect a replay of the whole log to fail with GP_EDATA naming field after
 * delivering `delivered` entries. */
static void expect_replay_edata(gp_store *s, int64_t id, uint64_t n, const char *field,
                                size_t delivered)
{
    seen sn = {.n = 0};
    gp_error err;
    assert_int_equal(gp_store_observations(s, id, 0, n, record, &sn, &err), GP_EDATA);
    assert_string_equal(err.field, field);
    assert_int_equal(sn.n, delivered);
    seen_free(&sn);
}

static void expect_snapshot_edata(gp_store *s, int64_t id, const char *field)
{
    gp_state got;
    gp_state_init(&got);
    uint64_t at = 7;
    gp_error err;
    assert_int_equal(gp_store_load_snapshot(s, id, &got, &at, &err), GP_EDATA);
    assert_string_equal(err.field, field);
    assert_int_equal(at, 0);
    assert_int_equal(got.count, 0);
}

/* A missing, mis-shaped or short part of an entry or of the snapshot, a
 * missing entry, a snapshot whose rows disagree on their entry or follow one
 * the log does not have: GP_EDATA naming the array (or "seq", "snapshot"),
 * after the entries before the damage were delivered. */
static void test_corrupt(void **state)
{
    (void)state;
    char path[256];
    int64_t id;
    gp_store *s = open_with_model("corrupt.db", "c", path, &id);
    gp_store_set_part_bytes(s, 64);
    gp_state b, snap;
    make_batch(&b, 20, 4);
    gp_state_init(&snap);
    put_bits(&snap, "big", 100, 3);
    for (uint64_t e = 0; e < 4; e++)
        observe_ok(s, id, e, &b, 10, e == 3 ? &snap : NULL);
    expect_replay(s, id, 0, 4, 4, NULL);
    expect_snapshot(s, id, 4, &snap);

    /* Entry 3 lacks part 4 of X. */
    sf_raw_script(path, "UPDATE observations SET seq = 103 WHERE seq = 3 AND key = 'X' AND part = 4");
    expect_replay_edata(s, id, 4, "X", 2);
    sf_raw_script(path, "UPDATE observations SET seq = 3 WHERE seq = 103");
    expect_replay(s, id, 0, 4, 4, NULL);
    /* Entry 2's y has a part of another shape. */
    sf_raw_script(path, "UPDATE observations SET rows = 21 WHERE seq = 2 AND key = 'y' AND part = 1");
    expect_replay_edata(s, id, 4, "y", 1);
    sf_raw_script(path, "UPDATE observations SET rows = 20 WHERE seq = 2 AND key = 'y'");
    expect_replay(s, id, 0, 4, 4, NULL);
    /* Entry 2 is missing altogether. */
    sf_raw_script(path, "UPDATE observations SET seq = 102 WHERE seq = 2");
    expect_replay_edata(s, id, 4, "seq", 1);
    sf_raw_script(path, "UPDATE observations SET seq = 2 WHERE seq = 102");
    expect_replay(s, id, 0, 4, 4, NULL);

    /* The snapshot lacks part 5 of big. */
    sf_raw_script(path, "UPDATE snapshots SET part = 105 WHERE part = 5");
    expect_snapshot_edata(s, id, "big");
    sf_raw_script(path, "UPDATE snapshots SET part = 5 WHERE part = 105");
    expect_snapshot(s, id, 4, &snap);
    /* Its rows disagree on the entry it follows. */
    sf_raw_script(path, "UPDATE snapshots SET seq = 3 WHERE part = 7");
    expect_snapshot_edata(s, id, "snapshot");
    /* It follows an entry the log does not have. */
    sf_raw_script(path, "UPDATE snapshots SET seq = 5");
    expect_snapshot_edata(s, id, "snapshot");
    sf_raw_script(path, "UPDATE snapshots SET seq = 4");
    expect_snapshot(s, id, 4, &snap);

    /* Short parts (cut to 56 bytes). */
    sf_raw_script(path, "UPDATE observations SET data = substr(data, 1, 56) WHERE seq = 4 AND"
                   " key = 'y' AND part = 0");
    expect_replay_edata(s, id, 4, "y", 3);
    sf_raw_script(path, "UPDATE snapshots SET data = substr(data, 1, 56) WHERE part = 0");
    expect_snapshot_edata(s, id, "big");
    gp_state_free(&b);
    gp_state_free(&snap);
    gp_store_close(s);
}

int main(void)
{
    /* What every back end does alike: once on SQLite, once on PostgreSQL. */
    const struct CMUnitTest both[] = {
        cmocka_unit_test(test_two_handles),
        cmocka_unit_test(test_racing_writers),
        cmocka_unit_test(test_killed_writer),
        cmocka_unit_test(test_parts),
        cmocka_unit_test(test_corrupt),
    };
    const struct CMUnitTest sqlite_only[] = {
        cmocka_unit_test(test_failed_writes_leave_nothing),
    };
    return sf_run_groups("store_observe_faults", both, SF_COUNT(both), sqlite_only,
                         SF_COUNT(sqlite_only), NULL, 0);
}
