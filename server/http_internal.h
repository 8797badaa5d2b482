/* gpserve server: what the files of the HTTP transport share (server/http.c:
 * connections, the request deadline, start and stop; server/request.c: one
 * request from its first byte to its answer; server/handlers.c: the route
 * handlers and the dispatch). Not for use outside them. */
#ifndef GP_SERVER_HTTP_INTERNAL_H
#define GP_SERVER_HTTP_INTERNAL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>

#include "server/access_log.h"
#include "server/acceptor.h"
#include "server/batcher.h"
#include "server/http.h"
#include "server/jobs.h"
#include "server/keys.h"
#include "server/metrics.h"
#include "server/ratelimit.h"
#include "server/route.h"
#include "server/slots.h"
#include "server/syncer.h"
#include "server/tls.h"

#define LOG_PATH_MAX 200

typedef struct gp_conn gp_conn;

struct gp_server {
    gp_server_config cfg;
    gp_api *api;
    gp_keyring *keys; /* NULL: no authentication (server/keys.h) */
    size_t max_body;
    /* One single-threaded libmicrohttpd daemon per HTTP thread, fed by the
     * acceptor (server/acceptor.h says why not libmicrohttpd's pool). */
    struct MHD_Daemon **daemons;
    size_t n_daemons;
    gp_acceptor *acceptor;
    unsigned port;
    gp_jobs *jobs;
    gp_batcher *batcher; /* NULL: batching off (--batch-delay-us 0) */
    gp_syncer *syncer;   /* observes waiting for the disk (server/syncer.h) */
    gp_metrics *metrics;
    gp_access_log *access_log; /* NULL: --access-log not set */
    gp_tls *tls;               /* NULL: plain HTTP (no --tls-cert) */
    gp_ratelimit *rate;        /* NULL: no limit can apply (no keys, flags 0) */
    atomic_int stopping;
    atomic_uint_fast64_t next_request_id;
    atomic_int sync_pending; /* synchronous fits not answered yet */
    /* The open connections, for the request deadline (under conns_lock). */
    pthread_mutex_t conns_lock;
    pthread_cond_t sweep_wake;
    gp_conn *conns;
    int sweep_stop;
    int sweeper_running;
    pthread_t sweeper;
    char *timeout_body; /* the 408 body, made at start-up */
    size_t timeout_body_len;
    char *timeout_body_v2; /* the same in the Open Inference Protocol's shape */
    size_t timeout_body_v2_len;
    /* The connection slots (server/slots.h), under conns_lock. */
    gp_slots *slots;
    /* The answers of a connection refused by them (indexed by GP_SLOT_*), made at start-up. */
    char *refusal[4];
    size_t refusal_len[4];
    /* Refusals not logged yet, and when the last log line was written. */
    atomic_uint_fast64_t refused_unlogged;
    atomic_uint_fast64_t refused_logged_us;
};

struct conn_ctx;

/* One open connection. Fields marked (lock) are read and written under
 * srv->conns_lock (the sweeper reads them); req only by the connection's
 * request thread. */
struct gp_conn {
    gp_server *srv;
    gp_conn *prev, *next; /* (lock) */
    int fd;
    uint64_t ready_us;    /* (lock) when the connection became ready for its request */
    int receiving;        /* (lock) the request has not all arrived and is not answered */
    uint64_t request_id;  /* (lock) its id once its request line arrived, else 0 */
    int v2;               /* (lock) that request is on a /v2 path (its 408 in that shape) */
    int expired;          /* (lock) closed by the sweeper past the deadline, or refused */
    int refused;          /* refused a slot (GP_SLOT_*): answered and shut down at once */
    int counted;          /* holds a slot of srv->slots under key */
    gp_slot_key key;
    struct conn_ctx *req; /* the request in progress */
    /* Bytes of a data set's upload received so far: its request deadline
     * grows with them (server/conn.c). Written by the request thread, read
     * by the sweeper. */
    _Atomic uint64_t upload_bytes;
    gp_tls_cred *tls_cred; /* the key pair its TLS handshake used, held until it closes */
};

enum conn_state {
    CS_NEW = 0,
    CS_BODY,
    CS_DISCARD,
    CS_UPLOAD,         /* a data set's body, fed to its upload as it arrives */
    CS_UPLOAD_REFUSED, /* the upload refused it: the rest is dropped, the refusal answered */
    CS_FIT_WAIT,
    CS_DEFERRED,
    CS_ANSWERED
};

typedef struct conn_ctx {
    gp_server *srv;
    struct MHD_Connection *conn;
    gp_conn *gc; /* its connection (NULL when that could not be allocated) */
    int fd; /* the socket, kept when a synchronous fit suspends the connection */
    uint64_t id;
    uint64_t t0_us;
    enum conn_state state;
    char method[12];
    char rid[GP_REQUEST_ID_SIZE]; /* X-Request-Id: the request's, or made */
    /* The authenticated key, copied out of the keyring (a reload may replace
     * its table meanwhile); key.name[0] == '\0' when auth is off or the
     * route is open. */
    gp_key key;
    int answered_version; /* the version its answer names (access log), else 0 */
    char path[LOG_PATH_MAX + 1]; /* for the log, control characters replaced */
    gp_route_match match;
    int verb;
    int body_types; /* gp_route_body_types of this request */
    /* body */
    char *body;
    size_t len, cap;
    size_t discarded;
    /* PUT /v1/datasets/{name}: the upload its body is streamed into (NULL
     * once finished or aborted), and a refusal answered at the body's end */
    gp_dataset_upload *upload;
    gp_response *refused; /* allocated by upload_piece: kept off every request's calloc */
    /* synchronous fit, or a predict/sample queued for a batch */
    int fit_pending;        /* counted in srv->sync_pending */
    gp_response fit_res;    /* written by the worker before it resumes us */
    int batch_counted;      /* counted in the batcher's requests in progress */
    int batched;            /* goes through the batcher (first_call decides) */
    /* An error found in the first call of a request without a body is sent
     * in the final call: answered earlier, libmicrohttpd closes the
     * connection (it cannot tell that no body follows). */
    int defer;
    gp_response deferred;
    /* the answer, for the log and metrics */
    int status;
    size_t resp_bytes;
    /* An authenticated write (gp_http_is_write): its answer, unless a 2xx
     * the api recorded with the write, goes to the audit trail once. */
    int audit_write;
} conn_ctx;

/* The files, each calling only those listed after it (no circle):
 * http.c -> request.c -> handlers.c -> answer.c -> conn.c. */

/* server/request.c: libmicrohttpd's callbacks of a request. */
void *gp_http_on_uri(void *cls, const char *uri, struct MHD_Connection *conn);
enum MHD_Result gp_http_on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                   const char *method, const char *version,
                                   const char *upload_data, size_t *upload_data_size,
                                   void **con_cls);
void gp_http_on_completed(void *cls, struct MHD_Connection *conn, void **con_cls,
                          enum MHD_RequestTerminationCode toe);

/* server/answer.c: 1 when verb on route r writes (a fit, an import, an
 * observe, an alias change, a delete, a job's cancel): the audit trail's
 * routes. The route as the trail names it: "VERB /pattern". */
int gp_http_is_write(gp_route_id r, int verb);
void gp_http_route_text(const conn_ctx *ctx, char *out, size_t size);

/* server/handlers.c: answer a complete request by its route's handler. */
enum MHD_Result gp_http_dispatch(conn_ctx *ctx);
/* The study routes (server/study_routes.c): the answer of a complete
 * request into res, refits queued. */
void gp_http_study_route(conn_ctx *ctx, const gp_request *req, gp_response *res);
/* A batched request is no longer arriving, for the batcher's count. */
void gp_http_arrived(conn_ctx *ctx);

/* server/answer.c: the answers. */
/* Answer res (its body handed over), in the error shape of the request's route. */
enum MHD_Result gp_http_answer(conn_ctx *ctx, gp_response *res);
/* Answer the catalogue error code (field named, message from fmt). */
enum MHD_Result gp_http_fail(conn_ctx *ctx, int code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* The same from a va_list; close: close the connection too. */
enum MHD_Result gp_http_fail_va(conn_ctx *ctx, int code, const char *field, int close,
                                const char *fmt, va_list ap) __attribute__((format(printf, 5, 0)));
/* Queue res as it is (no shape applied: gp_http_answer's last step, and a
 * deferred answer's). */
enum MHD_Result gp_http_send_response(conn_ctx *ctx, gp_response *res);

/* server/conn.c: connections and the request deadline. */
/* The request thread is about to answer, or has the whole request: the
 * sweeper leaves the connection alone from now on. -1 when the sweeper
 * already closed it (its 408 is sent): then nothing more may be written. */
int gp_http_claim_answer(gp_conn *gc);
/* The request of gc ended (answered or not): the deadline of the next one
 * starts now. Returns whether the sweeper closed the connection. */
int gp_http_request_finished(gp_conn *gc);
/* The gp_conn of a libmicrohttpd connection (NULL when none was made). */
gp_conn *gp_http_conn_of(struct MHD_Connection *conn);
/* libmicrohttpd's connection-notify callback (cls: the server). */
void gp_http_on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                           enum MHD_ConnectionNotificationCode code);
/* libmicrohttpd's certificate callback (MHD_OPTION_HTTPS_CERT_CALLBACK): the
 * current key pair of --tls-cert, held by the connection until it closes. */
int gp_http_tls_certificate(gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs,
                            const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                            gnutls_pcert_st **pcert, unsigned int *pcert_length,
                            gnutls_privkey_t *key);
/* The answers of connections refused a slot, made at start-up; -1: out of memory. */
int gp_http_refusals_make(gp_server *srv);
/* The sweeper thread (none without --request-timeout); -1 when it cannot start. */
int gp_http_sweeper_start(gp_server *srv);
void gp_http_sweeper_stop(gp_server *srv);

#endif
