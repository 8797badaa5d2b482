/* gpserve store: the PostgreSQL driver's connection plumbing (db_pg_conn.c),
 * for the driver (db_pg.c): the driver's handle and statement types, the
 * statement texts, errors without the password, the session's settings and
 * its prepared statements, and making a broken connection again. */
#ifndef GP_STORE_DB_PG_CONN_H
#define GP_STORE_DB_PG_CONN_H

#include <libpq-fe.h>
#include <stdint.h>

#include "store/store_internal.h"

#define PG_MAX_PARAMS 10

/* A value bound, encoded for the server at the step (when the parameter's
 * type, from PQdescribePrepared, is known). */
typedef struct pg_value {
    char kind; /* 0 NULL, 'i' int64, 'd' double, 't' text, 'b' blob */
    int64_t i;
    double d;
    const char *p;
    size_t n;
} pg_value;

typedef struct pg_stmt {
    gp_db_stmt head;
    int id;
    int prepared; /* on the current session */
    int nparams;
    Oid types[PG_MAX_PARAMS];
    pg_value bound[PG_MAX_PARAMS];
    char scratch[PG_MAX_PARAMS][32]; /* encoded numbers */
    PGresult *res;                   /* the rows of a SELECT */
    int ran, row, nrows;
    char text[32]; /* col_text of a number */
} pg_stmt;

typedef struct pg_db {
    gp_db head;
    PGconn *conn;
    enum gp_db_role role;
    int ready; /* session configured and statements prepared */
    int64_t changes;
    int listening; /* LISTEN GP_DB_CHANNEL ran on the current session (pg_watch) */
    char *password; /* the URL's, scrubbed from every message */
    char err[1024];
    pg_stmt stmt[GPS_STMT_COUNT];
} pg_db;

static inline pg_db *pg(gp_db *db) { return (pg_db *)db; }
static inline pg_stmt *pst(gp_db_stmt *st) { return (pg_stmt *)st; }

/* PostgreSQL's text of statement id (its own where it differs from the
 * shared one, store_sql.c), written with ?N; NULL: none on this back end. */
const char *gp_pg_sql_text(int id);

/* Replace every occurrence of the password in d->err by "***". */
void gp_pg_scrub(pg_db *d);
/* d->err = the formatted message, one line, without the password. */
void gp_pg_set_err(pg_db *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The class of a failed result (res may be NULL: the connection's own
 * message, a GP_DB_E* code), its message into d->err. */
int gp_pg_fail_result(pg_db *d, const PGresult *res);
/* Run a command of the simple protocol (text results): setup, migrations. */
int gp_pg_exec_simple(pg_db *d, const char *sql);
/* The session's settings (lock and statement time budgets; a reader that
 * cannot write). */
int gp_pg_setup_session(pg_db *d);
/* Prepare every statement of the store on the session. */
int gp_pg_prepare_all(pg_db *d);
/* Before a statement: a connection found broken is made again, with its
 * settings and statements. */
int gp_pg_ensure_session(pg_db *d);

#endif
