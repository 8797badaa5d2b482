/* gpserve store: the SQLite file on disk (db_sqlite_disk.c), for the SQLite
 * driver: the sync of the WAL that makes commits durable, the reserve file
 * that lets a delete commit on a full disk, and giving freed space back
 * (docs/design/storage.md, "Acknowledged means on disk" and "A full disk"). */
#ifndef GP_STORE_DB_SQLITE_DISK_H
#define GP_STORE_DB_SQLITE_DISK_H

#include <sqlite3.h>
#include <stddef.h>

/* Bytes of the reserve file beside a database (`<db>-reserve`): room for
 * the WAL frames of a delete and of the incremental vacuum steps after it. */
#define GP_SQLITE_RESERVE_BYTES ((long long)8 << 20)
/* Pages an incremental vacuum step moves before a checkpoint gives the WAL's
 * space back: 2 MiB of 4 KiB pages, a quarter of the reserve. */
#define GP_SQLITE_VACUUM_STEP 512

/* fdatasync of the WAL file wal (sqlite3_filename_wal of the database),
 * opened anew through vfs (the connection's) and closed again: any
 * descriptor of the inode flushes it, and a fresh open never syncs a WAL file
 * that another connection replaced. SQLITE_OK or SQLite's code (msg says). */
int gp_sqlite_sync_wal(sqlite3_vfs *vfs, const char *wal, char *msg, size_t size);
/* Make the reserve file reserve (GP_SQLITE_RESERVE_BYTES, allocated) when it
 * is missing and the file system keeps at least as much free beside it; 1
 * when it is there afterwards, 0 when not. */
int gp_sqlite_reserve_make(const char *reserve);
/* Delete the reserve file; 1 when there was one. */
int gp_sqlite_reserve_release(const char *reserve);
/* After a delete, on the writer: checkpoint (TRUNCATE: the WAL's space goes
 * back), then, in a file with incremental auto-vacuum, move the free pages to
 * the end and cut them off, a step at a time with a checkpoint after each
 * (each step's WAL frames fit in the reserve). Best effort: stops at the
 * first failure (a reader of another process holding the WAL, say, or a full
 * disk: the checkpoint grows the file by the pages appended since the last
 * one), whose SQLite code it returns. */
int gp_sqlite_reclaim(sqlite3 *db);

#endif
