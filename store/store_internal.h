/* gpserve store: definitions shared by the store's source files (not part of
 * the store's API; included by the store sources and by tests/unit/test_store.c for the
 * blob codec). */
#ifndef GP_STORE_INTERNAL_H
#define GP_STORE_INTERNAL_H

#include <pthread.h>
#include <sqlite3.h>
#include <stddef.h>
#include <stdint.h>

#include "store/store.h"

/* Milliseconds a write waits for another connection's lock (SQLite's busy
 * handler, plus our own retry of a whole write transaction within the same
 * budget). */
#define GP_STORE_BUSY_MS 5000

/* Prepared statements of one connection, prepared once at open. */
enum gp_store_stmt {
    GPS_BEGIN,           /* read transaction (one snapshot for several SELECTs) */
    GPS_BEGIN_IMMEDIATE, /* write transaction: takes the write lock up front */
    GPS_COMMIT,
    GPS_ROLLBACK,
    GPS_MAX_VERSION,
    GPS_INSERT_MODEL,
    GPS_INSERT_ARRAY,
    GPS_META_LATEST,
    GPS_META_VERSION,
    GPS_NAME_EXISTS,
    GPS_VERSIONS,
    GPS_LIST,
    GPS_MODEL_EXISTS,
    GPS_ARRAYS,
    GPS_ARRAY_SUMMARY,
    GPS_DELETE,
    GPS_JOB_PUT,
    GPS_JOB_GET,
    GPS_STMT_COUNT
};

struct gp_store {
    sqlite3 *db;
    pthread_mutex_t mu; /* serialises every call on db and the statements */
    sqlite3_stmt *stmt[GPS_STMT_COUNT];
    size_t part_bytes; /* largest blob of one `arrays` row (a multiple of 8) */
    int last_rc;       /* SQLite code of the last failure (for the busy retry) */
};

/* The statement `id`, reset and with its bindings cleared. */
sqlite3_stmt *gp_store_stmt(gp_store *s, enum gp_store_stmt id);
/* Reset and clear the bindings of st (ends its implicit read, drops pointers to
 * caller buffers bound with SQLITE_STATIC). NULL is ignored. */
void gp_store_stmt_done(sqlite3_stmt *st);
/* Map the SQLite failure rc onto a GP code and fill err with sqlite3_errmsg:
 * SQLITE_BUSY/LOCKED -> GP_ENOTREADY, SQLITE_NOMEM -> GP_ENOMEM, everything
 * else -> GP_EINTERNAL. `what` says what was being done. */
int gp_store_sql_error(gp_store *s, int rc, gp_error *err, const char *what);

/* Arrays of a state, written inside the caller's write transaction. */
int gp_store_write_arrays(gp_store *s, int64_t model_id, const gp_state *state, gp_error *err);
/* Every array of model row model_id into tmp (empty, initialised), inside the
 * caller's read transaction; GP_EDATA naming the array for a corrupt one. */
int gp_store_read_arrays(gp_store *s, int64_t model_id, gp_state *tmp, gp_error *err);

/* Portable little-endian float64 codec (IEEE 754 doubles whose byte order is
 * that of uint64_t, as on every platform we build for). */
void gp_store_le_encode(const double *src, size_t count, unsigned char *dst);
void gp_store_le_decode(const unsigned char *src, size_t count, double *dst);
/* 1 when the host stores doubles little-endian (blobs are then copied as is). */
int gp_store_host_is_le(void);

#endif
