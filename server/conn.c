/* The connections of the HTTP transport (server/http.c) and the request
 * deadline: a gp_conn per connection (its slot, its deadline), the sweeper
 * that closes those past it (408), and the 429 of a connection refused a
 * slot, written on its socket at once. */
#include "server/http_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "server/util.h"

/* How often the sweeper looks for requests past their deadline. */
#define SWEEP_INTERVAL_MS 250
/* A data set's upload (server/request.c, "uploads") gets one more
 * --request-timeout for every this many bytes it has received: it must keep
 * up 8 MiB per deadline on average (70 KB/s at the default 120 s). */
#define UPLOAD_BYTES_PER_DEADLINE ((uint64_t)8 << 20)

/* ---- connections and the request deadline ---- */

/* The request thread is about to answer, or has the whole request: the
 * sweeper leaves the connection alone from now on. -1 when the sweeper
 * already closed it (its 408 is sent): then nothing more may be written. */
int gp_http_claim_answer(gp_conn *gc)
{
    if (gc == NULL)
        return 0;
    pthread_mutex_lock(&gc->srv->conns_lock);
    int expired = gc->expired;
    gc->receiving = 0;
    pthread_mutex_unlock(&gc->srv->conns_lock);
    return expired ? -1 : 0;
}

/* The request of gc ended (answered or not): the deadline of the next one
 * starts now. Returns whether the sweeper closed the connection. */
int gp_http_request_finished(gp_conn *gc)
{
    pthread_mutex_lock(&gc->srv->conns_lock);
    int expired = gc->expired;
    gc->receiving = 1;
    gc->ready_us = gp_monotonic_us();
    gc->request_id = 0;
    gc->v2 = 0;
    atomic_store_explicit(&gc->upload_bytes, 0, memory_order_relaxed);
    pthread_mutex_unlock(&gc->srv->conns_lock);
    gc->req = NULL;
    return expired;
}

static void refuse_connection(gp_server *srv, gp_conn *gc);

/* With --tls-client-ca the handshake itself refuses a client without a
 * certificate chaining to those CAs (libmicrohttpd only asks for one, and
 * would leave the check to every handler); set on the session before its
 * handshake starts. */
static void require_client_certificate(gp_server *srv, struct MHD_Connection *conn)
{
    if (gp_tls_client_ca_pem(srv->tls) == NULL)
        return;
    const union MHD_ConnectionInfo *si =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_GNUTLS_SESSION);
    if (si == NULL || si->tls_session == NULL)
        return;
    gnutls_session_t session = si->tls_session;
    gnutls_certificate_server_set_request(session, GNUTLS_CERT_REQUIRE);
    gnutls_session_set_verify_cert(session, NULL, 0);
}

int gp_http_tls_certificate(gnutls_session_t session, const gnutls_datum_t *req_ca_dn, int nreqs,
                            const gnutls_pk_algorithm_t *pk_algos, int pk_algos_length,
                            gnutls_pcert_st **pcert, unsigned int *pcert_length,
                            gnutls_privkey_t *key)
{
    (void)req_ca_dn;
    (void)nreqs;
    (void)pk_algos;
    (void)pk_algos_length;
    gp_conn *gc = gp_http_conn_of(gnutls_session_get_ptr(session)); /* libmicrohttpd's pointer */
    if (gc == NULL || gc->srv->tls == NULL)
        return -1; /* no place to hold a reference: the handshake fails, nothing else */
    if (gc->tls_cred == NULL)
        gc->tls_cred = gp_tls_acquire(gc->srv->tls);
    gp_tls_cred_get(gc->tls_cred, pcert, pcert_length, key);
    return 0;
}

static void conn_opened(gp_server *srv, struct MHD_Connection *conn, void **socket_context)
{
    gp_conn *gc = calloc(1, sizeof *gc);
    *socket_context = gc;
    if (gc == NULL)
        return; /* served without a deadline or a slot */
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CONNECTION_FD);
    const union MHD_ConnectionInfo *ai =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    gc->srv = srv;
    gc->fd = ci ? ci->connect_fd : -1;
    gc->receiving = 1;
    gc->ready_us = gp_monotonic_us();
    gp_slot_key_of(ai ? ai->client_addr : NULL, &gc->key);
    if (srv->tls)
        require_client_certificate(srv, conn);
    pthread_mutex_lock(&srv->conns_lock);
    int rc = gp_slots_take(srv->slots, &gc->key);
    gc->counted = rc == GP_SLOT_OK;
    gc->refused = rc;
    gc->expired = rc != GP_SLOT_OK; /* nothing more may be written on a refused one */
    gc->next = srv->conns;
    if (srv->conns)
        srv->conns->prev = gc;
    srv->conns = gc;
    pthread_mutex_unlock(&srv->conns_lock);
    if (rc != GP_SLOT_OK)
        refuse_connection(srv, gc);
}

/* libmicrohttpd calls this before it closes the socket, so the sweeper never
 * touches a descriptor that may have been reused. */
static void conn_closed(gp_server *srv, void **socket_context)
{
    gp_conn *gc = *socket_context;
    if (gc == NULL)
        return;
    *socket_context = NULL;
    pthread_mutex_lock(&srv->conns_lock);
    if (gc->prev)
        gc->prev->next = gc->next;
    else
        srv->conns = gc->next;
    if (gc->next)
        gc->next->prev = gc->prev;
    if (gc->counted)
        gp_slots_give(srv->slots, &gc->key);
    pthread_mutex_unlock(&srv->conns_lock);
    gp_tls_release(gc->tls_cred); /* its TLS session is gone: a replaced pair may be freed */
    free(gc);
}

void gp_http_on_connection(void *cls, struct MHD_Connection *conn, void **socket_context,
                          enum MHD_ConnectionNotificationCode code)
{
    gp_server *srv = cls;
    const union MHD_ConnectionInfo *di = MHD_get_connection_info(conn, MHD_CONNECTION_INFO_DAEMON);
    const struct MHD_Daemon *d = di ? di->daemon : NULL;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        gp_acceptor_started(srv->acceptor, d);
        conn_opened(srv, conn, socket_context);
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        conn_closed(srv, socket_context);
        gp_acceptor_closed(srv->acceptor, d);
    }
}

gp_conn *gp_http_conn_of(struct MHD_Connection *conn)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(conn, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return ci ? ci->socket_context : NULL;
}

/* Write the whole answer head + body on fd, without blocking: nothing has
 * been written on the connection yet, so the send buffer has room; a client
 * that does not read loses the answer only. Plain HTTP only: under TLS these
 * bytes would be garbage inside the record stream (a 408 or a slot's 429 is
 * then a closed connection; libmicrohttpd owns the session). */
static void send_raw_answer(int fd, const char *status_line, uint64_t id, const char *body,
                            size_t body_len, const char *extra)
{
    char head[320];
    int n = snprintf(head, sizeof head,
                     "HTTP/1.1 %s\r\nConnection: close\r\n"
                     "Content-Type: application/json\r\nContent-Length: %zu\r\n%s"
                     "X-Request-Id: %llu\r\n\r\n",
                     status_line, body_len, extra, (unsigned long long)id);
    if (n < 0 || (size_t)n >= sizeof head)
        return;
    struct iovec iov[2] = {{head, (size_t)n}, {(void *)body, body_len}};
    struct msghdr mh;
    memset(&mh, 0, sizeof mh);
    mh.msg_iov = iov;
    mh.msg_iovlen = 2;
    (void)sendmsg(fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* Under conns_lock: close gc past its deadline, answering 408 first when its
 * request line has arrived. Shutting the socket down (not closing it) wakes
 * libmicrohttpd's poll, which then closes the connection itself. */
static void expire(gp_server *srv, gp_conn *gc)
{
    gc->expired = 1;
    char *body = gc->v2 ? srv->timeout_body_v2 : srv->timeout_body;
    size_t body_len = gc->v2 ? srv->timeout_body_v2_len : srv->timeout_body_len;
    if (gc->request_id != 0 && body != NULL && gc->fd >= 0 && srv->tls == NULL)
        send_raw_answer(gc->fd, "408 Request Timeout", gc->request_id, body, body_len, "");
    if (gc->fd >= 0)
        shutdown(gc->fd, SHUT_RDWR);
}

/* A connection refused a slot (server/slots.h) is answered at once, before
 * its request is read (so it never holds a slot while a slow client sends
 * it), in the /v1 shape (its path is not known yet), and shut down:
 * libmicrohttpd then sees the end of the stream and closes it. Logged at most
 * once a second, as a count. */
static void refuse_connection(gp_server *srv, gp_conn *gc)
{
    int why = gc->refused;
    if (gc->fd >= 0 && srv->refusal[why] != NULL && srv->tls == NULL) {
        uint64_t id = atomic_fetch_add(&srv->next_request_id, 1) + 1;
        char retry[48];
        snprintf(retry, sizeof retry, "Retry-After: %d\r\n",
                 gp_status_retry_after(GP_EOVERLOADED));
        send_raw_answer(gc->fd, "429 Too Many Requests", id, srv->refusal[why],
                        srv->refusal_len[why], retry);
    }
    if (gc->fd >= 0)
        shutdown(gc->fd, SHUT_RDWR);
    gp_metrics_request(srv->metrics, GP_ROUTE_NONE, "-", 429, 0.0);
    atomic_fetch_add(&srv->refused_unlogged, 1);
    uint64_t now = gp_monotonic_us();
    uint64_t last = atomic_load(&srv->refused_logged_us);
    if (now - last < 1000000u ||
        !atomic_compare_exchange_strong(&srv->refused_logged_us, &last, now))
        return;
    uint64_t n = atomic_exchange(&srv->refused_unlogged, 0);
    gp_log("gpserve: %llu connections refused 429 by the connection limits (--max-connections "
           "%ld, --max-connections-per-ip %ld, a quarter kept for addresses holding fewer "
           "than %d) since the last such line",
           (unsigned long long)n, srv->cfg.max_connections, srv->cfg.max_connections_per_ip,
           GP_SLOTS_LIGHT);
}

/* The sweeper: every SWEEP_INTERVAL_MS, the connections whose request has
 * not arrived within --request-timeout are closed. */
static void *sweeper_main(void *arg)
{
    gp_server *srv = arg;
    uint64_t limit_us = (uint64_t)srv->cfg.request_timeout * 1000000u;
    pthread_mutex_lock(&srv->conns_lock);
    while (!srv->sweep_stop) {
        gp_cond_wait_ms(&srv->sweep_wake, &srv->conns_lock, SWEEP_INTERVAL_MS);
        if (srv->sweep_stop)
            break;
        uint64_t now = gp_monotonic_us();
        size_t closed = 0, answered = 0;
        for (gp_conn *gc = srv->conns; gc; gc = gc->next) {
            uint64_t up = atomic_load_explicit(&gc->upload_bytes, memory_order_relaxed);
            uint64_t limit = limit_us + limit_us * (up / UPLOAD_BYTES_PER_DEADLINE);
            if (!gc->receiving || gc->expired || now - gc->ready_us < limit)
                continue;
            answered += gc->request_id != 0;
            expire(srv, gc);
            closed++;
        }
        if (closed > 0) {
            pthread_mutex_unlock(&srv->conns_lock);
            gp_log("gpserve: %zu connections past the request deadline (%ld s, "
                   "--request-timeout) closed, %zu of them answered 408",
                   closed, srv->cfg.request_timeout, answered);
            pthread_mutex_lock(&srv->conns_lock);
        }
    }
    pthread_mutex_unlock(&srv->conns_lock);
    return NULL;
}

/* The 408 body the sweeper sends (v2: in the Open Inference Protocol's shape). */
static char *timeout_body(const gp_server *srv, int v2, size_t *len)
{
    gp_response res;
    memset(&res, 0, sizeof res);
    gp_api_fail(&res, GP_ETIMEOUT, NULL,
                "the request did not arrive whole within %ld s (--request-timeout)",
                srv->cfg.request_timeout);
    if (v2)
        gp_api_oip_error(&res);
    *len = res.body_len;
    return res.body;
}

/* The answers of connections refused a slot, one per reason (GP_SLOT_*). */
int gp_http_refusals_make(gp_server *srv)
{
    const gp_server_config *c = &srv->cfg;
    for (int why = GP_SLOT_FULL; why <= GP_SLOT_RESERVED; why++) {
        gp_response res;
        memset(&res, 0, sizeof res);
        if (why == GP_SLOT_FULL)
            gp_api_fail(&res, GP_EOVERLOADED, NULL,
                        "every connection slot is taken (%ld, --max-connections); retry later",
                        c->max_connections);
        else if (why == GP_SLOT_ADDRESS)
            gp_api_fail(&res, GP_EOVERLOADED, NULL,
                        "this client address holds %ld connections, the most one may "
                        "(--max-connections-per-ip); retry later",
                        c->max_connections_per_ip);
        else
            gp_api_fail(&res, GP_EOVERLOADED, NULL,
                        "this client address holds %d or more connections and the slots left "
                        "are kept for addresses that hold fewer; retry later",
                        GP_SLOTS_LIGHT);
        srv->refusal[why] = res.body;
        srv->refusal_len[why] = res.body_len;
        res.body = NULL;
        gp_response_free(&res);
        if (srv->refusal[why] == NULL)
            return -1;
    }
    return 0;
}

int gp_http_sweeper_start(gp_server *srv)
{
    if (srv->cfg.request_timeout <= 0)
        return 0;
    srv->timeout_body = timeout_body(srv, 0, &srv->timeout_body_len);
    srv->timeout_body_v2 = timeout_body(srv, 1, &srv->timeout_body_v2_len);
    if (pthread_create(&srv->sweeper, NULL, sweeper_main, srv) != 0)
        return -1;
    srv->sweeper_running = 1;
    return 0;
}

void gp_http_sweeper_stop(gp_server *srv)
{
    if (!srv->sweeper_running)
        return;
    pthread_mutex_lock(&srv->conns_lock);
    srv->sweep_stop = 1;
    pthread_cond_signal(&srv->sweep_wake);
    pthread_mutex_unlock(&srv->conns_lock);
    pthread_join(srv->sweeper, NULL);
    srv->sweeper_running = 0;
}

