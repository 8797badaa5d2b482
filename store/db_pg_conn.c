/* gpserve store: the PostgreSQL driver's connection plumbing (db_pg_conn.h):
 * the statement texts that are PostgreSQL's own, the messages (one line, the
 * password scrubbed) and classes of failures, the session's settings, the
 * prepared statements with their parameters' types, and a broken connection
 * made again before the next statement. The driver's operations, its schema
 * and the transactions' locking are db_pg.c's. */
#include "store/db_pg_conn.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A guard, not a budget: one INSERT of a 256 MiB array part can take seconds
 * on a slow link, so a statement may run longer than GP_STORE_BUSY_MS (which
 * bounds the waits for locks, as SQLite's busy timeout does). */
#define PG_STATEMENT_TIMEOUT_MS 300000

/* Where PostgreSQL's text differs from the shared one (store_sql.c): its
 * transactions and the locks that SQLite's single write lock made needless.
 * Written with ?N like the shared texts (prepare_one rewrites them). */
#define ACTIVE " status IN ('queued', 'running')"
static const char *const pg_sql[GPS_STMT_COUNT] = {
    /* A read transaction: one snapshot for several SELECTs. */
    [GPS_BEGIN] = "BEGIN ISOLATION LEVEL REPEATABLE READ, READ ONLY",
    /* A write transaction: each statement sees what is committed when it
     * starts; the rows a transaction decides on are locked (the name lock,
     * the FOR UPDATE reads below). */
    [GPS_BEGIN_IMMEDIATE] = "BEGIN ISOLATION LEVEL READ COMMITTED",
    /* Held to the end of the transaction; another process's save of the
     * same name waits here, then reads the MAX(version) this one committed. */
    [GPS_LOCK_NAME] = "SELECT pg_advisory_xact_lock(hashtextextended(?1, 0))",
    /* A cancel decides on the row it read: nobody changes it meanwhile. */
    [GPS_JOB_GET_LOCK] = "SELECT id, model_name, status, progress, error, result, created_at,"
                         " updated_at, attempts FROM jobs WHERE id = ?1 FOR UPDATE",
    /* ?2 typed: PostgreSQL cannot tell a parameter's type from `IS NULL`. */
    [GPS_JOB_FINISH] = "UPDATE jobs SET status = ?3, progress = COALESCE(?4, progress),"
                       " error = ?5, result = ?6, updated_at = ?7, owner = NULL,"
                       " lease_until = NULL, request = NULL"
                       " WHERE id = ?1 AND (?2::text IS NULL OR owner = ?2) AND" ACTIVE,
    /* A CASE: PostgreSQL does no arithmetic on booleans. */
    [GPS_JOB_RELEASE] = "UPDATE jobs SET status = 'queued', owner = NULL, lease_until = 0,"
                        " attempts = attempts - CASE WHEN status = 'running' THEN 1 ELSE 0 END,"
                        " updated_at = ?3"
                        " WHERE id = ?1 AND owner = ?2 AND" ACTIVE,
    /* The claim: the oldest expired job nobody else is claiming (a row
     * another claimer has locked is skipped, not waited for), locked until
     * the claim commits. */
    [GPS_JOB_EXPIRED] = "SELECT id, status, attempts, cancel_requested, progress FROM jobs"
                        " WHERE" ACTIVE " AND lease_until < ?1 ORDER BY lease_until, created_at"
                        " LIMIT 1 FOR UPDATE SKIP LOCKED",
    /* An append holds the row: a second appender waits, then reads the
     * obs_seq the first committed (and answers a conflict). */
    [GPS_OBS_HEAD_LOCK] = "SELECT obs_seq FROM models WHERE id = ?1 FOR UPDATE",
    /* An expiry holds the study row, as every other write to its trials
     * does by updating it, before it looks at the trials. */
    [GPS_STUDY_LOCK] = "SELECT revision FROM studies WHERE id = ?1 FOR UPDATE",
    /* Delivered at COMMIT to every daemon's change watch (LISTEN); several
     * in one transaction are delivered once. */
    [GPS_NOTIFY] = "NOTIFY " GP_DB_CHANNEL,
};
#undef ACTIVE

const char *gp_pg_sql_text(int id) { return gp_store_sql_text(pg_sql, id); }

/* Replace every occurrence of the password in d->err by "***". */
void gp_pg_scrub(pg_db *d)
{
    if (d->password == NULL || d->password[0] == '\0')
        return;
    const size_t n = strlen(d->password);
    char *hit;
    while ((hit = strstr(d->err, d->password)) != NULL) {
        memmove(hit + 3, hit + n, strlen(hit + n) + 1);
        memcpy(hit, "***", 3);
    }
}

/* d->err = the formatted message, one line, without the password. */
void gp_pg_set_err(pg_db *d, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(d->err, sizeof d->err, fmt, ap);
    va_end(ap);
    for (char *p = d->err; *p; p++)
        if (*p == '\n' || *p == '\r' || *p == '\t')
            *p = (p[1] == '\0') ? '\0' : ' ';
    size_t len = strlen(d->err);
    while (len > 0 && d->err[len - 1] == ' ')
        d->err[--len] = '\0';
    gp_pg_scrub(d);
}

/* The class of a failed result (res may be NULL: the connection's own
 * message), its message into d->err. */
int gp_pg_fail_result(pg_db *d, const PGresult *res)
{
    const char *state = res ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : NULL;
    const char *msg = res ? PQresultErrorMessage(res) : NULL;
    if (msg == NULL || msg[0] == '\0')
        msg = PQerrorMessage(d->conn);
    gp_pg_set_err(d, "%s", msg);
    if (PQstatus(d->conn) != CONNECTION_OK)
        return GP_DB_EDOWN;
    if (state == NULL)
        return GP_DB_EOTHER;
    /* deadlock_detected, serialization_failure, lock_not_available
     * (lock_timeout), query_canceled (statement_timeout) */
    if (!strcmp(state, "40P01") || !strcmp(state, "40001") || !strcmp(state, "55P03") ||
        !strcmp(state, "57014"))
        return GP_DB_EBUSY;
    if (!strcmp(state, "23505"))
        return GP_DB_EUNIQUE;
    if (!strcmp(state, "53100"))
        return GP_DB_EFULL;
    if (!strcmp(state, "53200"))
        return GP_DB_ENOMEM;
    /* connection_exception, admin/crash shutdown, cannot_connect_now */
    if (!strncmp(state, "08", 2) || !strncmp(state, "57P", 3))
        return GP_DB_EDOWN;
    return GP_DB_EOTHER;
}

/* Run a command of the simple protocol (text results): setup, migrations. */
int gp_pg_exec_simple(pg_db *d, const char *sql)
{
    PGresult *res = PQexec(d->conn, sql);
    ExecStatusType st = PQresultStatus(res);
    int rc = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK ? GP_DB_OK : gp_pg_fail_result(d, res);
    PQclear(res);
    return rc;
}

/* The session's settings: the lock wait budget of every back end, the
 * guard on a statement's time, no NOTICE chatter, and a reader that cannot
 * write. */
int gp_pg_setup_session(pg_db *d)
{
    char sql[256];
    snprintf(sql, sizeof sql,
             "SET lock_timeout = %d; SET statement_timeout = %d;"
             " SET client_min_messages = warning;%s",
             GP_STORE_BUSY_MS, PG_STATEMENT_TIMEOUT_MS,
             d->role == GP_DB_READER ? " SET default_transaction_read_only = on;" : "");
    return gp_pg_exec_simple(d, sql);
}

static int prepare_one(pg_db *d, pg_stmt *st)
{
    st->prepared = 0;
    const char *text = gp_pg_sql_text(st->id);
    if (text == NULL)
        return GP_DB_OK;
    char *sql = gp_store_sql_to_pg(text);
    if (sql == NULL) {
        gp_pg_set_err(d, "out of memory preparing statement %d", st->id);
        return GP_DB_ENOMEM;
    }
    char name[16];
    snprintf(name, sizeof name, "gps%d", st->id);
    PGresult *res = PQprepare(d->conn, name, sql, 0, NULL);
    free(sql);
    int rc = PQresultStatus(res) == PGRES_COMMAND_OK ? GP_DB_OK : gp_pg_fail_result(d, res);
    PQclear(res);
    if (rc)
        return rc;
    /* The parameters' types, which say how to send each bound value. */
    res = PQdescribePrepared(d->conn, name);
    rc = PQresultStatus(res) == PGRES_COMMAND_OK ? GP_DB_OK : gp_pg_fail_result(d, res);
    if (rc == GP_DB_OK) {
        st->nparams = PQnparams(res);
        if (st->nparams > PG_MAX_PARAMS) {
            gp_pg_set_err(d, "statement %d has %d parameters (at most %d)", st->id, st->nparams,
                          PG_MAX_PARAMS);
            rc = GP_DB_EOTHER;
        }
        for (int i = 0; rc == GP_DB_OK && i < st->nparams; i++)
            st->types[i] = PQparamtype(res, i);
    }
    PQclear(res);
    if (rc == GP_DB_OK)
        st->prepared = 1;
    return rc;
}

int gp_pg_prepare_all(pg_db *d)
{
    for (int i = 0; i < GPS_STMT_COUNT; i++) {
        int rc = prepare_one(d, &d->stmt[i]);
        if (rc)
            return rc;
    }
    return GP_DB_OK;
}

/* Before a statement: a connection found broken (the server restarted, the
 * network dropped) is made again, with its settings and statements. */
int gp_pg_ensure_session(pg_db *d)
{
    if (PQstatus(d->conn) != CONNECTION_OK) {
        d->ready = 0;
        PQreset(d->conn);
        if (PQstatus(d->conn) != CONNECTION_OK) {
            gp_pg_set_err(d, "cannot reach PostgreSQL: %s", PQerrorMessage(d->conn));
            return GP_DB_EDOWN;
        }
    }
    if (!d->ready) {
        int rc = gp_pg_setup_session(d);
        if (rc == GP_DB_OK)
            rc = gp_pg_prepare_all(d);
        if (rc)
            return rc;
        d->ready = 1;
    }
    return GP_DB_OK;
}
