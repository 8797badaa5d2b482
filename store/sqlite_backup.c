/* gpserve store: backup and restore of a SQLite database file (the `gpserve
 * backup` and `gpserve restore` commands; docs/design/storage.md, "Backups").
 *
 * A backup copies a live database with SQLite's online backup API: a few
 * pages a step, a short sleep between steps, so that the daemons writing the
 * file are not held back. A write by another connection between two steps
 * makes SQLite start the copy again; after GP_BACKUP_RESTARTS restarts the
 * rest is copied in one step, which in WAL mode holds only a read snapshot
 * (writers go on appending to the WAL; only checkpoints wait). The copy is
 * therefore one consistent snapshot: a write that returned before the backup
 * started is in it. It is written beside the output, synced, and renamed
 * over it, so that the output is never a partial copy.
 *
 * A restore copies a backup into the database file through the same API, in
 * one write transaction (a reader sees the old database or the new one), and
 * leaves it in WAL mode as the daemon wants it. It refuses a database that a
 * daemon holds: every open SQLite connection of a WAL database keeps a read
 * lock on the "DMS" byte of its `-shm` file (SQLite's unix VFS, byte 128),
 * which is what sqlite_held tests. */
#include "store/store.h"
#include "store/db.h"

#include <errno.h>
#include <fcntl.h>
#include <sqlite3.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* Pages a step copies (4 MiB of 4 KiB pages), and the pause between steps. */
#define GP_BACKUP_STEP_PAGES 1024
#define GP_BACKUP_SLEEP_NS 2000000L
/* Restarts (another connection wrote between two steps) before the rest is
 * copied in one step. */
#define GP_BACKUP_RESTARTS 8
/* The byte of the -shm file each connection of a WAL database holds a read
 * lock on while it is open (SQLite's os_unix.c: UNIX_SHM_DMS = 120 + 8). */
#define GP_SQLITE_SHM_DMS 128

static void pause_between_steps(void)
{
    struct timespec ts = {0, GP_BACKUP_SLEEP_NS};
    nanosleep(&ts, NULL);
}

/* Copy src into dst (both open): in steps, then, after too many restarts,
 * the rest at once. SQLITE_OK or SQLite's code. */
static int copy_pages(sqlite3 *dst, sqlite3 *src)
{
    sqlite3_backup *b = sqlite3_backup_init(dst, "main", src, "main");
    if (b == NULL)
        return sqlite3_errcode(dst);
    int rc = SQLITE_OK, restarts = 0, last_remaining = -1;
    for (;;) {
        int pages = restarts >= GP_BACKUP_RESTARTS ? -1 : GP_BACKUP_STEP_PAGES;
        rc = sqlite3_backup_step(b, pages);
        if (rc == SQLITE_DONE)
            break;
        if (rc != SQLITE_OK && rc != SQLITE_BUSY && rc != SQLITE_LOCKED)
            break;
        int remaining = sqlite3_backup_remaining(b);
        /* More pages left than after the last step: the copy started again. */
        if (last_remaining >= 0 && remaining >= last_remaining)
            restarts++;
        last_remaining = remaining;
        pause_between_steps();
    }
    int fin = sqlite3_backup_finish(b);
    return rc == SQLITE_DONE ? fin : rc;
}

static int open_db(const char *path, int flags, sqlite3 **db, gp_error *err, const char *field)
{
    *db = NULL;
    int rc = sqlite3_open_v2(path, db, flags, NULL);
    if (rc != SQLITE_OK) {
        gp_error_set(err, rc == SQLITE_CANTOPEN ? GP_ENOTFOUND : GP_EINVAL, field,
                     "cannot open '%s': %s", path, *db ? sqlite3_errmsg(*db) : sqlite3_errstr(rc));
        sqlite3_close(*db);
        *db = NULL;
        return err ? err->code : GP_EINVAL;
    }
    sqlite3_busy_timeout(*db, 10000);
    return 0;
}

/* 0 when db is a gpserve database that passes quick_check (schema version
 * above 0 and a models table). */
static int check_database(sqlite3 *db, const char *path, const char *field, gp_error *err)
{
    sqlite3_stmt *st = NULL;
    int ok = 0;
    if (sqlite3_prepare_v2(db, "PRAGMA quick_check", -1, &st, NULL) == SQLITE_OK &&
        sqlite3_step(st) == SQLITE_ROW) {
        const unsigned char *t = sqlite3_column_text(st, 0);
        ok = t && strcmp((const char *)t, "ok") == 0;
    }
    sqlite3_finalize(st);
    if (!ok)
        return gp_error_set(err, GP_EDATA, field, "'%s' is not a sound SQLite database: %s", path,
                            sqlite3_errmsg(db));
    ok = sqlite3_prepare_v2(db, "SELECT count(*) FROM models", -1, &st, NULL) == SQLITE_OK &&
         sqlite3_step(st) == SQLITE_ROW;
    sqlite3_finalize(st);
    if (!ok)
        return gp_error_set(err, GP_EDATA, field, "'%s' is not a gpserve database (no models table)",
                            path);
    return 0;
}

static int fsync_path(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

int gp_store_sqlite_backup(const char *db_path, const char *out_path, gp_error *err)
{
    if (gp_db_is_pg_url(db_path))
        return gp_error_set(err, GP_EUNSUPPORTED, "db",
                            "a PostgreSQL database is backed up with pg_dump "
                            "(docs/design/storage.md, \"Backups\")");
    struct stat sb;
    if (stat(db_path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return gp_error_set(err, GP_ENOTFOUND, "db", "no database file '%s'", db_path);
    char tmp[4096];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.partial-%ld", out_path, (long)getpid()) >= sizeof tmp)
        return gp_error_set(err, GP_EINVAL, "out", "output path too long");
    sqlite3 *src = NULL, *dst = NULL;
    int rc = open_db(db_path, SQLITE_OPEN_READWRITE, &src, err, "db");
    if (rc == 0)
        rc = check_database(src, db_path, "db", err);
    if (rc == 0)
        rc = open_db(tmp, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, &dst, err, "out");
    if (rc == 0) {
        int s = copy_pages(dst, src);
        /* The copy carries the source's WAL mode in its header; a backup is
         * one file at rest, and a read-only open of a WAL file (a restore)
         * would leave -wal and -shm files beside it: a rollback journal
         * instead (restore puts WAL back on the database it writes). */
        if (s == SQLITE_OK)
            s = sqlite3_exec(dst, "PRAGMA journal_mode = DELETE", NULL, NULL, NULL);
        if (s != SQLITE_OK)
            rc = gp_error_set(err, s == SQLITE_FULL ? GP_ESTORAGE : GP_EINTERNAL, "out",
                              "copying '%s' to '%s': %s", db_path, tmp, sqlite3_errstr(s));
    }
    sqlite3_close(src);
    if (dst && sqlite3_close(dst) != SQLITE_OK && rc == 0)
        rc = gp_error_set(err, GP_EINTERNAL, "out", "closing '%s'", tmp);
    if (rc == 0 && fsync_path(tmp) != 0)
        rc = gp_error_set(err, GP_ESTORAGE, "out", "syncing '%s': %s", tmp, strerror(errno));
    if (rc == 0 && rename(tmp, out_path) != 0)
        rc = gp_error_set(err, GP_EINVAL, "out", "cannot write '%s': %s", out_path,
                          strerror(errno));
    if (rc != 0)
        unlink(tmp);
    return rc;
}

int gp_store_sqlite_held(const char *db_path)
{
    char shm[4096];
    if ((size_t)snprintf(shm, sizeof shm, "%s-shm", db_path) >= sizeof shm)
        return 0;
    int fd = open(shm, O_RDWR);
    if (fd < 0)
        return 0; /* no -shm file: no connection has the database open in WAL mode */
    struct flock fl;
    memset(&fl, 0, sizeof fl);
    fl.l_type = F_WRLCK;
    fl.l_whence = SEEK_SET;
    fl.l_start = GP_SQLITE_SHM_DMS;
    fl.l_len = 1;
    int held = fcntl(fd, F_GETLK, &fl) == 0 && fl.l_type != F_UNLCK;
    close(fd);
    return held;
}

int gp_store_sqlite_restore(const char *db_path, const char *from_path, gp_error *err)
{
    if (gp_db_is_pg_url(db_path))
        return gp_error_set(err, GP_EUNSUPPORTED, "db",
                            "a PostgreSQL database is restored with pg_restore "
                            "(docs/design/storage.md, \"Backups\")");
    if (access(from_path, R_OK) != 0)
        return gp_error_set(err, GP_ENOTFOUND, "from", "cannot read '%s': %s", from_path,
                            strerror(errno));
    if (gp_store_sqlite_held(db_path))
        return gp_error_set(err, GP_ECONFLICT, "db",
                            "'%s' is held by a running daemon (or another SQLite connection): "
                            "stop it before restoring",
                            db_path);
    sqlite3 *src = NULL, *dst = NULL;
    int rc = open_db(from_path, SQLITE_OPEN_READONLY, &src, err, "from");
    if (rc == 0)
        rc = check_database(src, from_path, "from", err);
    if (rc == 0)
        rc = open_db(db_path, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, &dst, err, "db");
    /* WAL before the copy: a backup into a WAL database stays one; the
     * daemon opens nothing else. */
    if (rc == 0 && sqlite3_exec(dst, "PRAGMA journal_mode = WAL", NULL, NULL, NULL) != SQLITE_OK)
        rc = gp_error_set(err, GP_EDATA, "db", "'%s': %s", db_path, sqlite3_errmsg(dst));
    if (rc == 0) {
        int s = copy_pages(dst, src);
        if (s != SQLITE_OK)
            rc = gp_error_set(err, s == SQLITE_FULL ? GP_ESTORAGE : GP_EINTERNAL, "db",
                              "copying '%s' into '%s': %s", from_path, db_path, sqlite3_errstr(s));
    }
    if (rc == 0 &&
        sqlite3_wal_checkpoint_v2(dst, "main", SQLITE_CHECKPOINT_TRUNCATE, NULL, NULL) != SQLITE_OK)
        rc = gp_error_set(err, GP_EINTERNAL, "db", "checkpoint of '%s': %s", db_path,
                          sqlite3_errmsg(dst));
    sqlite3_close(src);
    sqlite3_close(dst);
    return rc;
}
