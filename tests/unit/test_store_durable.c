/* Unit tests of what "acknowledged" means for the SQLite store
 * (docs/design/storage.md, "Acknowledged means on disk" and "A full disk"):
 *
 * - no write returns before a sync of the WAL that started after its commit
 *   has finished (durability full, the default): observes from several
 *   threads, job creations (what an async fit's 202 waits for), saves and
 *   deletes. A test VFS, registered as SQLite's default and wrapping the real
 *   one, numbers every event on one clock: each thread's last write to a WAL
 *   file, and the start and end of every xSync of a WAL file. When a store
 *   call returns, the latest start of a finished sync must be later than the
 *   calling thread's last WAL write; with durability normal it is not (the
 *   same check fails: the test can fail);
 * - the group commit: fewer syncs than writes when writers overlap is not
 *   asserted (it depends on timing); the count is printed;
 * - a delete gives its space back: after saving a large model and deleting
 *   it, the database file is small again and the WAL empty.
 *
 * SQLite files in a directory made with mkdtemp under /tmp. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <sqlite3.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "store/store.h"
#include "store/store_internal.h"
#include "tests/unit/store_fixture.h"

/* ---- the recording VFS ------------------------------------------------------ */

static sqlite3_vfs *real_vfs;
static sqlite3_vfs rec_vfs;
static atomic_ullong clock_now;          /* the event clock */
static atomic_ullong last_sync_started;  /* the latest start among finished WAL syncs */
static atomic_ullong wal_syncs;          /* WAL syncs finished */
static _Thread_local unsigned long long my_last_wal_write; /* this thread's */

typedef struct rec_file {
    sqlite3_file base;
    int wal;
    sqlite3_file *real; /* right after this struct */
} rec_file;

static sqlite3_file *R(sqlite3_file *f) { return ((rec_file *)f)->real; }

static int rec_close(sqlite3_file *f)
{
    int rc = R(f)->pMethods->xClose(R(f));
    return rc;
}
static int rec_read(sqlite3_file *f, void *p, int n, sqlite3_int64 off)
{
    return R(f)->pMethods->xRead(R(f), p, n, off);
}
static int rec_write(sqlite3_file *f, const void *p, int n, sqlite3_int64 off)
{
    int rc = R(f)->pMethods->xWrite(R(f), p, n, off);
    if (((rec_file *)f)->wal)
        my_last_wal_write = atomic_fetch_add(&clock_now, 1) + 1;
    return rc;
}
static int rec_truncate(sqlite3_file *f, sqlite3_int64 size)
{
    return R(f)->pMethods->xTruncate(R(f), size);
}
static int rec_sync(sqlite3_file *f, int flags)
{
    unsigned long long start = atomic_fetch_add(&clock_now, 1) + 1;
    int rc = R(f)->pMethods->xSync(R(f), flags);
    if (rc == SQLITE_OK && ((rec_file *)f)->wal) {
        unsigned long long seen = atomic_load(&last_sync_started);
        while (seen < start && !atomic_compare_exchange_weak(&last_sync_started, &seen, start))
            ;
        atomic_fetch_add(&wal_syncs, 1);
    }
    return rc;
}
static int rec_size(sqlite3_file *f, sqlite3_int64 *size)
{
    return R(f)->pMethods->xFileSize(R(f), size);
}
static int rec_lock(sqlite3_file *f, int l) { return R(f)->pMethods->xLock(R(f), l); }
static int rec_unlock(sqlite3_file *f, int l) { return R(f)->pMethods->xUnlock(R(f), l); }
static int rec_check(sqlite3_file *f, int *out)
{
    return R(f)->pMethods->xCheckReservedLock(R(f), out);
}
static int rec_fcntl(sqlite3_file *f, int op, void *arg)
{
    return R(f)->pMethods->xFileControl(R(f), op, arg);
}
static int rec_sector(sqlite3_file *f) { return R(f)->pMethods->xSectorSize(R(f)); }
static int rec_dev(sqlite3_file *f) { return R(f)->pMethods->xDeviceCharacteristics(R(f)); }
static int rec_shm_map(sqlite3_file *f, int pg, int sz, int ext, void volatile **pp)
{
    return R(f)->pMethods->xShmMap(R(f), pg, sz, ext, pp);
}
static int rec_shm_lock(sqlite3_file *f, int off, int n, int flags)
{
    return R(f)->pMethods->xShmLock(R(f), off, n, flags);
}
static void rec_shm_barrier(sqlite3_file *f) { R(f)->pMethods->xShmBarrier(R(f)); }
static int rec_shm_unmap(sqlite3_file *f, int del)
{
    return R(f)->pMethods->xShmUnmap(R(f), del);
}

/* Version 2: shared memory (WAL), no memory-mapped reads. */
static const sqlite3_io_methods rec_io = {
    2,          rec_close,  rec_read,   rec_write,        rec_truncate, rec_sync,
    rec_size,   rec_lock,   rec_unlock, rec_check,        rec_fcntl,    rec_sector,
    rec_dev,    rec_shm_map, rec_shm_lock, rec_shm_barrier, rec_shm_unmap, NULL, NULL};

static int rec_open(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *f, int flags,
                    int *out)
{
    (void)vfs;
    rec_file *rf = (rec_file *)f;
    rf->real = (sqlite3_file *)(rf + 1);
    rf->wal = (flags & SQLITE_OPEN_WAL) != 0;
    int rc = real_vfs->xOpen(real_vfs, name, rf->real, flags, out);
    rf->base.pMethods = rc == SQLITE_OK ? &rec_io : NULL;
    return rc;
}

static int rec_register(void)
{
    real_vfs = sqlite3_vfs_find(NULL);
    if (real_vfs == NULL)
        return -1;
    rec_vfs = *real_vfs;
    rec_vfs.zName = "gp-record";
    rec_vfs.szOsFile = (int)sizeof(rec_file) + real_vfs->szOsFile;
    rec_vfs.xOpen = rec_open;
    rec_vfs.pAppData = NULL;
    return sqlite3_vfs_register(&rec_vfs, 1) == SQLITE_OK ? 0 : -1;
}

/* 1 when a WAL sync that started after this thread's last WAL write has
 * finished: the write this thread just committed is on disk. */
static int my_writes_synced(void)
{
    return atomic_load(&last_sync_started) > my_last_wal_write;
}

/* ---- set-up ------------------------------------------------------------------ */

static int group_setup(void **state)
{
    (void)state;
    if (rec_register() != 0)
        return -1;
    return sf_setup_sqlite("gpdurable-test");
}

static int group_teardown(void **state)
{
    (void)state;
    sqlite3_vfs_unregister(&rec_vfs);
    return sf_tmpdir_remove();
}

static gp_store *open_store(const char *name, enum gp_store_durability d)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", sf_tmpdir, name);
    gp_store *s = NULL;
    gp_error err;
    if (gp_store_open(path, &s, &err) != GP_OK)
        fail_msg("open %s: %s", path, err.message);
    gp_store_set_durability(s, d);
    return s;
}

static void put_ones(gp_state *st, const char *name, size_t rows, size_t cols)
{
    double *v = malloc(rows * cols * sizeof *v);
    assert_non_null(v);
    for (size_t i = 0; i < rows * cols; i++)
        v[i] = 1.0 + (double)i;
    gp_error err;
    assert_int_equal(gp_state_put(st, name, rows, cols, v, &err), GP_OK);
    free(v);
}

static int64_t save_model(gp_store *s, const char *name, size_t values)
{
    gp_state st;
    gp_state_init(&st);
    put_ones(&st, "alpha", values, 1);
    gp_model_meta m;
    gp_error err;
    if (gp_store_save(s, name, "exact", "{}", "{}", 10, 4, &st, &m, &err))
        fail_msg("save %s: %s", name, err.message);
    gp_state_free(&st);
    int64_t id = m.id;
    gp_model_meta_free(&m);
    return id;
}

/* ---- writers ------------------------------------------------------------------ */

#define THREADS 4
#define WRITES 40

typedef struct writer {
    gp_store *s;
    int64_t model_id;
    int index;
    int writes, unsynced, failures;
} writer;

/* WRITES observes of one row on its own model, and a job created after
 * every fourth: after each returned, is its commit synced? */
static void *writer_main(void *arg)
{
    writer *w = arg;
    gp_state batch;
    gp_state_init(&batch);
    put_ones(&batch, "X", 1, 4);
    put_ones(&batch, "y", 1, 1);
    for (int i = 0; i < WRITES; i++) {
        gp_error err;
        uint64_t seq = 0;
        if (gp_store_observe(w->s, w->model_id, (uint64_t)i, &batch, 11 + (size_t)i, NULL, &seq,
                             &err) != GP_OK) {
            w->failures++;
            continue;
        }
        w->writes++;
        w->unsynced += !my_writes_synced();
        if (i % 4 == 3) {
            gp_job_row job;
            memset(&job, 0, sizeof job);
            snprintf(job.id, sizeof job.id, "job-%d-%d", w->index, i);
            snprintf(job.model_name, sizeof job.model_name, "m%d", w->index);
            snprintf(job.status, sizeof job.status, "queued");
            if (gp_store_job_create(w->s, &job, "{}", &batch, "me", 1e12, &err) != GP_OK) {
                w->failures++;
                continue;
            }
            w->writes++;
            w->unsynced += !my_writes_synced();
        }
    }
    gp_state_free(&batch);
    return NULL;
}

/* Writes from THREADS threads at once; returns the writes acknowledged
 * before their sync, and the WAL syncs made, in *syncs. */
static int run_writers(gp_store *s, const char *prefix, unsigned long long *syncs)
{
    writer w[THREADS];
    pthread_t t[THREADS];
    for (int k = 0; k < THREADS; k++) {
        char name[32];
        snprintf(name, sizeof name, "%s%d", prefix, k);
        memset(&w[k], 0, sizeof w[k]);
        w[k].s = s;
        w[k].index = k;
        w[k].model_id = save_model(s, name, 10);
    }
    unsigned long long before = atomic_load(&wal_syncs);
    for (int k = 0; k < THREADS; k++)
        assert_int_equal(pthread_create(&t[k], NULL, writer_main, &w[k]), 0);
    int writes = 0, unsynced = 0;
    for (int k = 0; k < THREADS; k++) {
        pthread_join(t[k], NULL);
        assert_int_equal(w[k].failures, 0);
        writes += w[k].writes;
        unsynced += w[k].unsynced;
    }
    *syncs = atomic_load(&wal_syncs) - before;
    print_message("%d writes from %d threads, %llu WAL syncs, %d acknowledged before their sync\n",
                  writes, THREADS, *syncs, unsynced);
    assert_int_equal(writes, THREADS * (WRITES + WRITES / 4));
    return unsynced;
}

/* ---- tests ------------------------------------------------------------------- */

/* The default: every write is on disk when it returns. */
static void test_full_acknowledges_after_sync(void **state)
{
    (void)state;
    gp_store *s = open_store("full.db", GP_STORE_DURABILITY_FULL);
    unsigned long long syncs = 0;
    assert_int_equal(run_writers(s, "f", &syncs), 0);
    assert_true(syncs > 0);
    assert_true(syncs <= (unsigned long long)THREADS * (WRITES + WRITES / 4));
    /* A save and a delete, on this thread. */
    save_model(s, "one", 1000);
    assert_true(my_writes_synced());
    gp_error err;
    assert_int_equal(gp_store_delete(s, "one", &err), GP_OK);
    assert_true(my_writes_synced());
    gp_store_close(s);
}

/* The detector works: with durability normal, writes return unsynced. */
static void test_normal_acknowledges_before_sync(void **state)
{
    (void)state;
    gp_store *s = open_store("normal.db", GP_STORE_DURABILITY_NORMAL);
    unsigned long long syncs = 0;
    assert_true(run_writers(s, "n", &syncs) > 0);
    gp_store_close(s);
}

static long long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : 0;
}

/* A delete gives its pages back: the file shrinks to about what it was
 * before the large model, and the WAL is empty. */
static void test_delete_gives_space_back(void **state)
{
    (void)state;
    gp_store *s = open_store("shrink.db", GP_STORE_DURABILITY_FULL);
    char db[512], wal[520];
    snprintf(db, sizeof db, "%s/shrink.db", sf_tmpdir);
    snprintf(wal, sizeof wal, "%s-wal", db);
    save_model(s, "small", 10);
    save_model(s, "big", 1000000); /* 8 MB */
    save_model(s, "after", 10);    /* a row behind the big one */
    gp_store_close(s);             /* checkpoints the WAL into the file */
    long long full = file_size(db);
    assert_true(full > 8000000);
    s = open_store("shrink.db", GP_STORE_DURABILITY_FULL);
    gp_error err;
    assert_int_equal(gp_store_delete(s, "big", &err), GP_OK);
    long long after = file_size(db);
    print_message("file %lld bytes with the model, %lld after its delete; WAL %lld bytes\n", full,
                  after, file_size(wal));
    assert_true(after < 1000000);
    assert_int_equal(file_size(wal), 0);
    /* What is left is whole. */
    gp_model_meta m;
    assert_int_equal(gp_store_meta(s, "after", 0, &m, &err), GP_OK);
    gp_state st;
    gp_state_init(&st);
    assert_int_equal(gp_store_load_state(s, m.id, &st, &err), GP_OK);
    assert_int_equal(st.count, 1);
    assert_int_equal(st.arrays[0].rows, 10);
    gp_state_free(&st);
    gp_model_meta_free(&m);
    gp_store_close(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_full_acknowledges_after_sync),
        cmocka_unit_test(test_normal_acknowledges_before_sync),
        cmocka_unit_test(test_delete_gives_space_back),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
