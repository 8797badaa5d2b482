/* gpserve store: the SQL of every prepared statement, written once for both
 * back ends, and the PostgreSQL spelling of its parameters.
 *
 * Texts use SQLite's numbered parameters (?N), which the PostgreSQL driver
 * rewrites as $N when it prepares a statement (gp_store_sql_to_pg). A
 * driver's override table (db_sqlite.c, db_pg_conn.c) replaces the few texts its
 * dialect or its locking needs to differ; a statement with neither text
 * does nothing on that back end (GPS_LOCK_NAME on SQLite). */
#include "store/store_internal.h"

#include <stdlib.h>
#include <string.h>

/* The columns read_meta_row reads; the brief forms leave spec and info
 * NULL (the UNIQUE(name, version) index finds the row either way). */
#define META_COLS "id, name, version, method, spec, info, n_train, input_dim, created_at, obs_seq"
#define BRIEF_COLS "id, name, version, method, NULL, NULL, n_train, input_dim, created_at, obs_seq"
#define ACTIVE " status IN ('queued', 'running')"

const char *const gp_store_sql[GPS_STMT_COUNT] = {
    /* A read transaction: one snapshot for several SELECTs. */
    [GPS_BEGIN] = "BEGIN",
    /* GPS_BEGIN_IMMEDIATE: each driver's (how a write transaction takes its
     * locks is the dialect's). GPS_LOCK_NAME: PostgreSQL's only (SQLite's
     * BEGIN IMMEDIATE already holds the one write lock). */
    [GPS_COMMIT] = "COMMIT",
    [GPS_ROLLBACK] = "ROLLBACK",
    /* The next version follows the highest one given out: the highest row,
     * or the mark a deleted latest version left (version_marks). Two scalar
     * subqueries, so MAX(version) stays one seek of the UNIQUE(name, version)
     * index (a UNION of the rows would read every version of the name). */
    [GPS_MAX_VERSION] = "SELECT CASE WHEN v >= m THEN v ELSE m END FROM (SELECT"
                        " COALESCE((SELECT MAX(version) FROM models WHERE name = ?1), 0) AS v,"
                        " COALESCE((SELECT last_version FROM version_marks WHERE name = ?1), 0)"
                        " AS m) AS given",
    [GPS_INSERT_MODEL] = "INSERT INTO models(name, version, method, spec, info, n_train,"
                         " input_dim, created_at) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)"
                         " RETURNING id",
    [GPS_INSERT_ARRAY] = "INSERT INTO arrays(model_id, key, part, rows, cols, data)"
                         " VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
    [GPS_META_LATEST] = "SELECT " META_COLS " FROM models WHERE name = ?1"
                        " ORDER BY version DESC LIMIT 1",
    [GPS_META_VERSION] = "SELECT " META_COLS " FROM models WHERE name = ?1 AND version = ?2",
    [GPS_META_BRIEF_LATEST] = "SELECT " BRIEF_COLS " FROM models WHERE name = ?1"
                              " ORDER BY version DESC LIMIT 1",
    [GPS_META_BRIEF_VERSION] = "SELECT " BRIEF_COLS " FROM models WHERE name = ?1 AND"
                               " version = ?2",
    [GPS_NAME_EXISTS] = "SELECT 1 FROM models WHERE name = ?1 LIMIT 1",
    [GPS_VERSIONS] = "SELECT version FROM models WHERE name = ?1 ORDER BY version",
    [GPS_LIST] = "SELECT " META_COLS " FROM models AS m WHERE version ="
                 " (SELECT MAX(version) FROM models WHERE name = m.name) ORDER BY name",
    [GPS_MODEL_EXISTS] = "SELECT 1 FROM models WHERE id = ?1",
    [GPS_ARRAYS] = "SELECT key, part, rows, cols, data FROM arrays WHERE model_id = ?1"
                   " ORDER BY key, part",
    /* length() reads a blob's size without reading its content (PostgreSQL
     * reads a bytea's from its header). */
    [GPS_ARRAY_SUMMARY] = "SELECT count(*), max(part), sum(length(data)), min(rows), max(rows),"
                          " min(cols), max(cols) FROM arrays WHERE model_id = ?1 AND key = ?2",
    [GPS_DELETE] = "DELETE FROM models WHERE name = ?1",
    [GPS_JOB_PUT] = "INSERT INTO jobs(id, model_name, status, progress, error, result,"
                    " created_at, updated_at) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?7)"
                    " ON CONFLICT(id) DO UPDATE SET model_name = excluded.model_name,"
                    " status = excluded.status, progress = excluded.progress,"
                    " error = excluded.error, result = excluded.result,"
                    " updated_at = excluded.updated_at",
    [GPS_JOB_GET] = "SELECT id, model_name, status, progress, error, result, created_at,"
                    " updated_at, attempts FROM jobs WHERE id = ?1",
    /* The same read: SQLite's write transaction already excludes every other
     * writer (PostgreSQL locks the row). */
    [GPS_JOB_GET_LOCK] = "SELECT id, model_name, status, progress, error, result, created_at,"
                         " updated_at, attempts FROM jobs WHERE id = ?1",
    [GPS_JOB_CREATE] = "INSERT INTO jobs(id, model_name, status, progress, created_at,"
                       " updated_at, request, owner, lease_until, dataset_id)"
                       " VALUES(?1, ?2, 'queued', ?3, ?4, ?4, ?5, ?6, ?7, ?8)",
    [GPS_JOB_INSERT_ARRAY] = "INSERT INTO job_arrays(job_id, key, part, rows, cols, data)"
                             " VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
    [GPS_JOB_ARRAYS] = "SELECT key, part, rows, cols, data FROM job_arrays WHERE job_id = ?1"
                       " ORDER BY key, part",
    [GPS_JOB_ARRAY_SUMMARY] = "SELECT count(*), max(part), sum(length(data)), min(rows),"
                              " max(rows), min(cols), max(cols) FROM job_arrays"
                              " WHERE job_id = ?1 AND key = ?2",
    [GPS_JOB_DROP_ARRAYS] = "DELETE FROM job_arrays WHERE job_id = ?1",
    [GPS_JOB_HELD] = "SELECT status FROM jobs WHERE id = ?1 AND owner = ?2 AND" ACTIVE,
    [GPS_JOB_CANCEL_FLAG] = "SELECT cancel_requested FROM jobs WHERE id = ?1 AND owner = ?2 AND"
                            ACTIVE,
    /* ?6: 1 when a run starts (an attempt). */
    [GPS_JOB_UPDATE] = "UPDATE jobs SET status = ?3, progress = ?4, updated_at = ?5,"
                       " attempts = attempts + ?6 WHERE id = ?1 AND owner = ?2 AND" ACTIVE,
    /* ?2 NULL: any holder. */
    [GPS_JOB_FINISH] = "UPDATE jobs SET status = ?3, progress = COALESCE(?4, progress), error = ?5, result = ?6,"
                       " updated_at = ?7, owner = NULL, lease_until = NULL, request = NULL"
                       " WHERE id = ?1 AND (?2 IS NULL OR owner = ?2) AND" ACTIVE,
    /* Handed back (graceful stop): queued, no owner, an interrupted run not counted. */
    [GPS_JOB_RELEASE] = "UPDATE jobs SET status = 'queued', owner = NULL, lease_until = 0,"
                        " attempts = attempts - (status = 'running'), updated_at = ?3"
                        " WHERE id = ?1 AND owner = ?2 AND" ACTIVE,
    [GPS_JOB_RENEW] = "UPDATE jobs SET lease_until = ?2 WHERE owner = ?1 AND" ACTIVE,
    [GPS_JOB_HELD_LIST] = "SELECT id, cancel_requested FROM jobs WHERE owner = ?1 AND" ACTIVE,
    /* The claim: the oldest expired job (SQLite's write lock makes the
     * claimer the only one; PostgreSQL skips rows other claimers locked). */
    [GPS_JOB_EXPIRED] = "SELECT id, status, attempts, cancel_requested, progress FROM jobs"
                        " WHERE" ACTIVE " AND lease_until < ?1 ORDER BY lease_until, created_at"
                        " LIMIT 1",
    [GPS_JOB_TAKE] = "UPDATE jobs SET status = 'queued', owner = ?2, lease_until = ?3,"
                     " updated_at = ?4 WHERE id = ?1 AND" ACTIVE " AND lease_until < ?5",
    [GPS_JOB_LEASE] = "SELECT lease_until FROM jobs WHERE id = ?1",
    [GPS_JOB_REQUEST_CANCEL] = "UPDATE jobs SET cancel_requested = 1 WHERE id = ?1 AND" ACTIVE,
    [GPS_JOB_ACTIVE] = "SELECT id, owner FROM jobs WHERE" ACTIVE " AND owner IS NOT NULL",
    [GPS_JOB_EXPIRE] = "UPDATE jobs SET lease_until = 0 WHERE id = ?1 AND owner = ?2 AND" ACTIVE,
    [GPS_JOB_REQUEST] = "SELECT request, model_name, created_at, progress, attempts FROM jobs"
                        " WHERE id = ?1",
    /* At most 1000 rows a call, so the write lock (SQLite) or the row locks
     * (PostgreSQL) are held briefly. */
    [GPS_JOB_PRUNE] = "DELETE FROM jobs WHERE id IN (SELECT id FROM jobs WHERE status IN"
                      " ('succeeded', 'failed', 'cancelled') AND updated_at < ?1 LIMIT 1000)",
    /* The observation log and snapshots (store_observe.c). Array statements
     * bind the model row to ?1 and the array's name to ?2, and take the entry
     * where table_stmts in store_arrays.c says. */
    [GPS_OBS_HEAD] = "SELECT obs_seq FROM models WHERE id = ?1",
    /* The same read on SQLite, whose write lock already holds off a second
     * appender (PostgreSQL locks the row). */
    [GPS_OBS_HEAD_LOCK] = "SELECT obs_seq FROM models WHERE id = ?1",
    [GPS_OBS_INSERT_ARRAY] = "INSERT INTO observations(model_id, seq, key, part, rows, cols,"
                             " data) VALUES(?1, ?7, ?2, ?3, ?4, ?5, ?6)",
    [GPS_OBS_ARRAYS] = "SELECT key, part, rows, cols, data FROM observations"
                       " WHERE model_id = ?1 AND seq = ?2 ORDER BY key, part",
    [GPS_OBS_ARRAY_SUMMARY] = "SELECT count(*), max(part), sum(length(data)), min(rows),"
                              " max(rows), min(cols), max(cols) FROM observations"
                              " WHERE model_id = ?1 AND key = ?2 AND seq = ?3",
    [GPS_OBS_ADVANCE] = "UPDATE models SET obs_seq = ?2, n_train = ?3 WHERE id = ?1",
    [GPS_SNAP_DROP] = "DELETE FROM snapshots WHERE model_id = ?1",
    [GPS_SNAP_INSERT_ARRAY] = "INSERT INTO snapshots(model_id, seq, key, part, rows, cols, data)"
                              " VALUES(?1, ?7, ?2, ?3, ?4, ?5, ?6)",
    [GPS_SNAP_ARRAYS] = "SELECT key, part, rows, cols, data FROM snapshots WHERE model_id = ?1"
                        " ORDER BY key, part",
    [GPS_SNAP_ARRAY_SUMMARY] = "SELECT count(*), max(part), sum(length(data)), min(rows),"
                               " max(rows), min(cols), max(cols) FROM snapshots"
                               " WHERE model_id = ?1 AND key = ?2",
    [GPS_SNAP_SEQ] = "SELECT count(*), min(seq), max(seq) FROM snapshots WHERE model_id = ?1",
    /* Idempotency keys (store_idem.c). The put changes no row when the key is
     * recorded already: on PostgreSQL after waiting for a concurrent
     * transaction that inserted it (committed: nothing inserted; rolled
     * back: inserted), so of two writers with one key exactly one commits. */
    [GPS_IDEM_PUT] = "INSERT INTO idempotency(scope, key, fingerprint, status, body, created_at)"
                     " VALUES(?1, ?2, ?3, ?4, ?5, ?6) ON CONFLICT(scope, key) DO NOTHING",
    [GPS_IDEM_GET] = "SELECT fingerprint, status, body, created_at FROM idempotency"
                     " WHERE scope = ?1 AND key = ?2",
    /* At most 1000 rows a call, like GPS_JOB_PRUNE. */
    [GPS_IDEM_PRUNE] = "DELETE FROM idempotency WHERE (scope, key) IN (SELECT scope, key FROM"
                       " idempotency WHERE created_at < ?1 LIMIT 1000)",
    /* Aliases (store_alias.c). */
    [GPS_VERSION_EXISTS] = "SELECT 1 FROM models WHERE name = ?1 AND version = ?2",
    /* A move keeps the target it leaves as previous_version (a PUT of the
     * same version keeps the one before): the roll back's target. */
    [GPS_ALIAS_PUT] = "INSERT INTO aliases(name, alias, version, updated_at, updated_by)"
                      " VALUES(?1, ?2, ?3, ?4, ?5) ON CONFLICT(name, alias) DO UPDATE SET"
                      " previous_version = CASE WHEN aliases.version <> excluded.version"
                      " THEN aliases.version ELSE aliases.previous_version END,"
                      " version = excluded.version, updated_at = excluded.updated_at,"
                      " updated_by = excluded.updated_by",
    [GPS_ALIAS_GET] = "SELECT alias, version, updated_at, updated_by, previous_version FROM aliases"
                      " WHERE name = ?1 AND alias = ?2",
    [GPS_ALIAS_LIST] = "SELECT alias, version, updated_at, updated_by, previous_version FROM aliases"
                       " WHERE name = ?1 ORDER BY alias",
    [GPS_ALIAS_DELETE] = "DELETE FROM aliases WHERE name = ?1 AND alias = ?2",
    [GPS_ALIAS_DELETE_ALL] = "DELETE FROM aliases WHERE name = ?1",
    /* Deleting one version (store.c, gp_store_delete_version). */
    [GPS_ALIASES_OF_VERSION] = "SELECT alias FROM aliases WHERE name = ?1 AND version = ?2"
                               " ORDER BY alias",
    [GPS_DELETE_VERSION] = "DELETE FROM models WHERE name = ?1 AND version = ?2",
    [GPS_MARK_VERSION] = "INSERT INTO version_marks(name, last_version) VALUES(?1, ?2)"
                         " ON CONFLICT(name) DO UPDATE SET last_version = excluded.last_version"
                         " WHERE excluded.last_version > version_marks.last_version",
    [GPS_MARK_DELETE] = "DELETE FROM version_marks WHERE name = ?1",
    [GPS_ALIAS_FORGET_PREVIOUS] = "UPDATE aliases SET previous_version = NULL WHERE name = ?1"
                                  " AND previous_version = ?2",
    /* The audit trail (store_audit.c). The filters are NULL when not asked;
     * CAST gives PostgreSQL their type. */
    [GPS_AUDIT_PUT] = "INSERT INTO audit(at, key_name, route, model, version, status, code,"
                      " request_id, job_id) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
#define AUDIT_COLS "id, at, key_name, route, model, version, status, code, request_id, job_id"
#define AUDIT_FILTER " (CAST(?1 AS TEXT) IS NULL OR model = ?1) AND" \
                     " (CAST(?2 AS TEXT) IS NULL OR key_name = ?2) AND" \
                     " (CAST(?3 AS TEXT) IS NULL OR at >= ?3)"
    [GPS_AUDIT_LIST_DESC] = "SELECT " AUDIT_COLS " FROM audit WHERE id < ?4 AND" AUDIT_FILTER
                            " ORDER BY id DESC LIMIT ?5",
    [GPS_AUDIT_LIST_ASC] = "SELECT " AUDIT_COLS " FROM audit WHERE id > ?4 AND" AUDIT_FILTER
                           " ORDER BY id LIMIT ?5",
    /* At most 1000 rows a call, like GPS_JOB_PRUNE; never the newest row, so
     * that SQLite (a rowid without AUTOINCREMENT) never gives an id out again. */
    [GPS_AUDIT_PRUNE] = "DELETE FROM audit WHERE id IN (SELECT id FROM audit WHERE at < ?1"
                        " AND id < (SELECT max(id) FROM audit) ORDER BY id LIMIT 1000)",
    /* Data sets (store_datasets.c). An upload's row is 'uploading' until
     * GPS_DS_FINISH; every read but the upload's own asks for 'ready'. */
    [GPS_DS_INSERT] = "INSERT INTO datasets(name, state, n_cols, columns, created_at, created_by,"
                      " touched_at) VALUES(?1, 'uploading', ?2, ?3, ?4, ?5, ?6) RETURNING id",
    /* (PostgreSQL's SUM of a BIGINT is a NUMERIC: cast back) */
    [GPS_DS_TOTAL_BYTES] = "SELECT CAST(COALESCE(SUM(bytes), 0) AS BIGINT) FROM datasets",
    [GPS_DS_INSERT_PART] = "INSERT INTO dataset_parts(dataset_id, part, first_row, rows, cols,"
                           " data) VALUES(?1, ?2, ?3, ?4, ?5, ?6)",
    /* The parts arrive in order: a part starts where the rows so far end
     * (?3), and ends at ?4. */
    [GPS_DS_GROW] = "UPDATE datasets SET bytes = bytes + ?2, n_rows = ?4, touched_at = ?5"
                    " WHERE id = ?1 AND state = 'uploading' AND n_rows = ?3 AND n_cols = ?6",
    [GPS_DS_TOUCH] = "UPDATE datasets SET touched_at = ?2 WHERE id = ?1 AND state = 'uploading'",
    [GPS_DS_READY_ID] = "SELECT id FROM datasets WHERE name = ?1 AND state = 'ready'",
    [GPS_DS_NAME_OF] = "SELECT name, state FROM datasets WHERE id = ?1",
    [GPS_DS_JOB_USING] = "SELECT id FROM jobs WHERE dataset_id = ?1 AND" ACTIVE
                         " ORDER BY created_at LIMIT 1",
    [GPS_DS_READER_USING] = "SELECT label FROM dataset_readers WHERE dataset_id = ?1 AND"
                            " lease_until >= ?2 ORDER BY id LIMIT 1",
    [GPS_DS_DELETE_ID] = "DELETE FROM datasets WHERE id = ?1",
    [GPS_DS_FINISH] = "UPDATE datasets SET state = 'ready', columns = ?2, sha256 = ?3,"
                      " bytes_received = ?4, touched_at = ?5 WHERE id = ?1 AND"
                      " state = 'uploading' AND n_rows = ?6",
#define DS_COLS "id, name, state, n_rows, n_cols, columns, sha256, bytes, bytes_received," \
                " created_at, created_by"
    [GPS_DS_GET] = "SELECT " DS_COLS " FROM datasets WHERE name = ?1 AND state = 'ready'",
    [GPS_DS_GET_ID] = "SELECT " DS_COLS " FROM datasets WHERE id = ?1",
    [GPS_DS_LIST] = "SELECT " DS_COLS " FROM datasets WHERE state = 'ready' ORDER BY name",
    [GPS_DS_PARTS] = "SELECT part, first_row, rows, cols, data FROM dataset_parts"
                     " WHERE dataset_id = ?1 AND part >= ?2 AND part <= ?3 ORDER BY part",
    /* At most 100 abandoned uploads a call (each may hold many parts). */
    [GPS_DS_PRUNE_UPLOADS] = "DELETE FROM datasets WHERE id IN (SELECT id FROM datasets"
                             " WHERE state = 'uploading' AND touched_at < ?1 LIMIT 100)",
    [GPS_DS_READER_ADD] = "INSERT INTO dataset_readers(id, dataset_id, label, lease_until)"
                          " VALUES(?1, ?2, ?3, ?4)",
    [GPS_DS_READER_RENEW] = "UPDATE dataset_readers SET lease_until = ?2 WHERE id = ?1",
    [GPS_DS_READER_DROP] = "DELETE FROM dataset_readers WHERE id = ?1",
    [GPS_DS_READERS_PRUNE] = "DELETE FROM dataset_readers WHERE lease_until < ?1",
    /* Studies and trials (store_studies.c, store_trials.c). Every write to a
     * study's trials updates the study row first (its lock: SQLite's write
     * lock, PostgreSQL's row lock), so those writes of one study run one
     * after the other and commit in the order they took it. */
    [GPS_STUDY_INSERT] = "INSERT INTO studies(name, config, created_at, created_by)"
                         " VALUES(?1, ?2, ?3, ?4) ON CONFLICT(name) DO NOTHING RETURNING id",
#define STUDY_COLS "id, name, config, revision, n_trials, n_completed, refit_n, created_at," \
                   " created_by"
    [GPS_STUDY_GET] = "SELECT " STUDY_COLS " FROM studies WHERE name = ?1",
    [GPS_STUDY_GET_ID] = "SELECT " STUDY_COLS " FROM studies WHERE id = ?1",
    [GPS_STUDY_LIST] = "SELECT " STUDY_COLS " FROM studies ORDER BY name",
    /* The trials go with it (ON DELETE CASCADE). */
    [GPS_STUDY_DELETE] = "DELETE FROM studies WHERE name = ?1",
    /* The same read on SQLite, whose write lock already holds off every other
     * writer (PostgreSQL locks the row). */
    [GPS_STUDY_LOCK] = "SELECT revision FROM studies WHERE id = ?1",
    [GPS_STUDY_BUMP] = "UPDATE studies SET revision = revision + 1 WHERE id = ?1",
    /* The optimistic insert: ids n_trials + 1 .. n_trials + ?3 are this
     * transaction's only if nothing changed the study since revision ?2 (on
     * PostgreSQL a concurrent writer's update is waited for and the WHERE
     * checked again on the row it committed). Returns the new n_trials. */
    [GPS_STUDY_RESERVE] = "UPDATE studies SET revision = revision + 1, n_trials = n_trials + ?3"
                          " WHERE id = ?1 AND revision = ?2 RETURNING n_trials",
    /* A completion's seq (the new n_completed). */
    [GPS_STUDY_NEXT_SEQ] = "UPDATE studies SET revision = revision + 1,"
                           " n_completed = n_completed + 1 WHERE id = ?1 RETURNING n_completed",
    [GPS_STUDY_REFIT_CLAIM] = "UPDATE studies SET refit_n = ?2 WHERE id = ?1 AND refit_n < ?2",
    [GPS_TRIAL_INSERT] = "INSERT INTO trials(study_id, id, state, parameters, client_id, created,"
                         " updated, expires_at) VALUES(?1, ?2, 'active', ?3, ?4, ?5, ?5, ?6)",
#define TRIAL_COLS "id, state, parameters, metrics, reason, client_id, seq, created, updated," \
                   " expires_at"
    [GPS_TRIALS_OF] = "SELECT " TRIAL_COLS " FROM trials WHERE study_id = ?1 ORDER BY id",
    [GPS_TRIAL_GET] = "SELECT " TRIAL_COLS " FROM trials WHERE study_id = ?1 AND id = ?2",
    [GPS_TRIAL_STATE] = "SELECT state FROM trials WHERE study_id = ?1 AND id = ?2",
    [GPS_TRIAL_COMPLETE] = "UPDATE trials SET state = ?3, metrics = ?4, reason = ?5, seq = ?6,"
                           " updated = ?7 WHERE study_id = ?1 AND id = ?2 AND state = 'active'",
    [GPS_TRIAL_RENEW] = "UPDATE trials SET expires_at = ?3 WHERE study_id = ?1 AND client_id = ?2"
                        " AND state = 'active'",
    /* The studies with an active trial past its time (the partial index
     * trials_active), at most 1000 a call. */
    [GPS_TRIAL_EXPIRED_STUDIES] = "SELECT DISTINCT study_id FROM trials WHERE state = 'active'"
                                  " AND expires_at < ?1 ORDER BY study_id LIMIT 1000",
    [GPS_TRIAL_EXPIRE] = "UPDATE trials SET state = 'expired', client_id = NULL, updated = ?2"
                         " WHERE study_id = ?1 AND state = 'active' AND expires_at < ?2",
};

const char *gp_store_sql_text(const char *const override[GPS_STMT_COUNT], int id)
{
    if (id < 0 || id >= GPS_STMT_COUNT)
        return NULL;
    return override[id] ? override[id] : gp_store_sql[id];
}

char *gp_store_sql_to_pg(const char *sql)
{
    const size_t n = strlen(sql) + 1; /* ?N and $N are the same length */
    char *out = malloc(n);
    if (out == NULL)
        return NULL;
    memcpy(out, sql, n);
    int quoted = 0; /* inside '...' ('' inside one closes and reopens it) */
    for (char *p = out; *p; p++) {
        if (*p == '\'')
            quoted = !quoted;
        else if (!quoted && *p == '?' && p[1] >= '0' && p[1] <= '9')
            *p = '$';
    }
    return out;
}
