/* gpserve store: the SQLite file on disk (db_sqlite_disk.h): the WAL sync of
 * the group commit, the reserve file, and giving a delete's space back. */
#include "store/db_sqlite_disk.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

int gp_sqlite_sync_wal(sqlite3_vfs *vfs, const char *wal, char *msg, size_t size)
{
    /* Through the VFS rather than open(2): the connection's own VFS (a test
     * VFS sees the sync, as it sees SQLite's), and its xSync is SQLite's
     * fdatasync with the same fallbacks. No lock is taken on a WAL file, so a
     * second descriptor of it closed here drops none of the connection's. */
    sqlite3_file *f = sqlite3_malloc(vfs->szOsFile);
    if (f == NULL) {
        snprintf(msg, size, "out of memory");
        return SQLITE_NOMEM;
    }
    memset(f, 0, (size_t)vfs->szOsFile);
    int out_flags = 0;
    int rc = vfs->xOpen(vfs, wal, f, SQLITE_OPEN_READWRITE | SQLITE_OPEN_WAL, &out_flags);
    if (rc == SQLITE_OK)
        rc = f->pMethods->xSync(f, SQLITE_SYNC_NORMAL);
    if (rc != SQLITE_OK)
        snprintf(msg, size, "%s the WAL file '%s' failed (SQLite code %d)",
                 f->pMethods ? "syncing" : "opening", wal, rc);
    if (f->pMethods)
        f->pMethods->xClose(f);
    sqlite3_free(f);
    return rc;
}

/* Bytes free beside path for an unprivileged writer, or -1. */
static long long free_bytes(const char *path)
{
    struct statvfs v;
    if (statvfs(path, &v) != 0)
        return -1;
    return (long long)v.f_bavail * (long long)v.f_frsize;
}

int gp_sqlite_reserve_make(const char *reserve)
{
    struct stat st;
    if (stat(reserve, &st) == 0 && st.st_size >= GP_SQLITE_RESERVE_BYTES)
        return 1;
    /* Keep as much again free: a reserve that took the last free bytes would
     * itself fill the disk the writes after a delete need. */
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", reserve);
    char *slash = strrchr(dir, '/');
    if (slash == NULL)
        snprintf(dir, sizeof dir, ".");
    else if (slash == dir)
        dir[1] = '\0';
    else
        *slash = '\0';
    if (free_bytes(dir) < 2 * GP_SQLITE_RESERVE_BYTES)
        return 0;
    int fd = open(reserve, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return 0;
    int ok = posix_fallocate(fd, 0, (off_t)GP_SQLITE_RESERVE_BYTES) == 0;
    close(fd);
    if (!ok)
        unlink(reserve);
    return ok;
}

int gp_sqlite_reserve_release(const char *reserve)
{
    return unlink(reserve) == 0;
}

static long long pragma_int(sqlite3 *db, const char *sql)
{
    sqlite3_stmt *st = NULL;
    long long v = -1;
    if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
        v = sqlite3_column_int64(st, 0);
    sqlite3_finalize(st);
    return v;
}

static int checkpoint_truncate(sqlite3 *db)
{
    return sqlite3_wal_checkpoint_v2(db, "main", SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL);
}

int gp_sqlite_reclaim(sqlite3 *db)
{
    /* The delete's frames into the file, and the WAL cut to nothing. */
    int rc = checkpoint_truncate(db);
    if (rc != SQLITE_OK)
        return rc;
    /* 2 = incremental: files made by this gpserve and later (db_sqlite.c);
     * an older file (0) keeps its free pages for its next writes. */
    if (pragma_int(db, "PRAGMA auto_vacuum") != 2)
        return SQLITE_OK;
    char sql[64];
    snprintf(sql, sizeof sql, "PRAGMA incremental_vacuum(%d)", GP_SQLITE_VACUUM_STEP);
    long long before = pragma_int(db, "PRAGMA freelist_count");
    while (before > 0) {
        /* Each step is a write transaction whose frames (the pages moved)
         * go to the WAL; the checkpoint after it truncates the file to its
         * new end and the WAL to nothing. */
        rc = sqlite3_exec(db, sql, NULL, NULL, NULL);
        if (rc == SQLITE_OK)
            rc = checkpoint_truncate(db);
        if (rc != SQLITE_OK)
            return rc;
        long long after = pragma_int(db, "PRAGMA freelist_count");
        if (after < 0 || after >= before)
            return SQLITE_OK;
        before = after;
    }
    return SQLITE_OK;
}
