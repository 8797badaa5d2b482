/* bench_soak: the load client of the soak test (bench/soak.sh, which starts the
 * daemon and writes bench/results/soak.md; issue 13). Not a benchmark of its
 * own: bench/run.sh runs it only through bench/soak.sh.
 *
 *   build/bench/bench_soak --port N --pid PID [--seconds S] [--loops L]
 *                          [--db PATH] [--think-ms MS] [--max-slope KIB_PER_MIN]
 *                          [--max-growth KIB]
 *
 * Talks HTTP/1.1 to 127.0.0.1:N only (keep-alive connections, plain sockets,
 * no library: the client stays cheap next to the daemon on a 2-core machine).
 * First fits one seed model per method (exact, ssgp, sgpr, msrfr, renyi; small
 * 1-D data), then runs L loops (default 4) for S seconds (default 600), each
 * drawing scenarios from a fixed mix: predict (plain, and with
 * full_covariance + quantiles, + components for msrfr), sample, list, get a
 * model and a version, observe, /metrics, /healthz, /readyz, /v1/methods, two
 * requests that must be refused (a missing model: 404, malformed JSON: 400),
 * and fits of throwaway models: synchronous (sometimes twice under one name,
 * then the second version is read), asynchronous (the job polled until it
 * ends), and asynchronous then cancelled at once (DELETE /v1/jobs/ID: 202 or,
 * if the job already ended, 409); every fit scenario predicts on its model,
 * deletes it (204) and checks it is gone (404). One request in ~20 starts on a
 * fresh connection. Every request is bounded (60 s; fits 120 s; job polls stop
 * after 120 s).
 *
 * Expected answers: each request names the statuses it may get; observe may
 * get any 2xx, or 422 whose error code is "unsupported" (what every method
 * answers today), so the soak exercises online updates once a method has them.
 * An error is any other status, a connection failure or timeout, an async job
 * that fails, or the daemon's death.
 *
 * Every 10 s the main thread samples the daemon (--pid) from /proc: VmRSS,
 * threads, open descriptors, CPU time, and the size of the database (--db).
 * Markdown tables go to stdout: requests by kind with statuses and latency
 * percentiles, the errors, the samples, and the verdict on RSS: after the
 * warm-up (the first quarter of the run), the least-squares slope of RSS must
 * stay under --max-slope KiB/min (default 256) and the mean of the last
 * quarter must not exceed the mean of the second quarter by more than
 * --max-growth KiB (default 1024); RSS is judged on runs of 300 s or more. Both thresholds are about 1 MiB over a
 * 10-minute run: a leak of a few bytes per request at ~1000 requests/s.
 * Exit status: 0 = no error and RSS flat; 1 = errors or RSS growth; 2 = the
 * set-up failed (bad arguments, seed fits refused, daemon not answering). */
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "bench/support/cli.h"
#include "bench/support/clock.h"

#define MAX_LOOPS 16
#define SAMPLE_EVERY 10                   /* seconds between RSS samples */
#define MAX_SAMPLES 4096                  /* 11 hours of samples */
#define MAX_RESPONSE (64u << 20)          /* bytes; a larger answer is an error */
#define BODY_CAP (64 * 1024)              /* request bodies the client writes */
#define REQUEST_SECONDS 60.0              /* bound on one request */
#define FIT_SECONDS 120.0                 /* bound on one fit request */
#define JOB_SECONDS 120.0                 /* bound on polling one job */
#define MAX_ERRORS_KEPT 20                /* error messages kept for the report */
#define NBUCKET 512                       /* latency histogram: 16 buckets per octave of µs */
#define NSTATUS 8                         /* distinct statuses counted per request kind */
#define N_SEED 5
#define MIN_JUDGED 300                    /* seconds: shorter runs are not judged on RSS */

/* ---- request kinds (rows of the report) ---------------------------------- */

enum {
    K_PREDICT,
    K_PREDICT_FULL,
    K_SAMPLE,
    K_LIST,
    K_GET_MODEL,
    K_GET_VERSION,
    K_OBSERVE,
    K_FIT_SYNC,
    K_FIT_ASYNC,
    K_JOB_POLL,
    K_JOB_CANCEL,
    K_PREDICT_FITTED,
    K_DELETE,
    K_GET_DELETED,
    K_METRICS,
    K_HEALTHZ,
    K_READYZ,
    K_METHODS,
    K_MISSING,
    K_BAD_JSON,
    K_COUNT
};

static const struct {
    const char *label;
    const char *route;
} kinds[K_COUNT] = {
    [K_PREDICT] = {"predict", "POST /v1/models/{name}/predict"},
    [K_PREDICT_FULL] = {"predict, full_covariance + quantiles", "POST /v1/models/{name}/predict"},
    [K_SAMPLE] = {"sample", "POST /v1/models/{name}/sample"},
    [K_LIST] = {"list models", "GET /v1/models"},
    [K_GET_MODEL] = {"get model", "GET /v1/models/{name}"},
    [K_GET_VERSION] = {"get version", "GET /v1/models/{name}/versions/{v}"},
    [K_OBSERVE] = {"observe", "POST /v1/models/{name}/observe"},
    [K_FIT_SYNC] = {"fit, synchronous", "POST /v1/models"},
    [K_FIT_ASYNC] = {"fit, async", "POST /v1/models"},
    [K_JOB_POLL] = {"poll job", "GET /v1/jobs/{id}"},
    [K_JOB_CANCEL] = {"cancel job", "DELETE /v1/jobs/{id}"},
    [K_PREDICT_FITTED] = {"predict on a fresh fit", "POST /v1/models/{name}/predict"},
    [K_DELETE] = {"delete model", "DELETE /v1/models/{name}"},
    [K_GET_DELETED] = {"get deleted model", "GET /v1/models/{name}"},
    [K_METRICS] = {"metrics", "GET /metrics"},
    [K_HEALTHZ] = {"healthz", "GET /healthz"},
    [K_READYZ] = {"readyz", "GET /readyz"},
    [K_METHODS] = {"methods", "GET /v1/methods"},
    [K_MISSING] = {"predict, missing model", "POST /v1/models/{name}/predict"},
    [K_BAD_JSON] = {"predict, malformed JSON", "POST /v1/models/{name}/predict"},
};

/* Expected statuses as bits; E422U: 422 only with the error code "unsupported". */
enum {
    E200 = 1 << 0,
    E201 = 1 << 1,
    E202 = 1 << 2,
    E204 = 1 << 3,
    E400 = 1 << 4,
    E404 = 1 << 5,
    E409 = 1 << 6,
    E422U = 1 << 7,
};

static int status_bit(int status)
{
    switch (status) {
    case 200: return E200;
    case 201: return E201;
    case 202: return E202;
    case 204: return E204;
    case 400: return E400;
    case 404: return E404;
    case 409: return E409;
    case 422: return E422U;
    default: return 0;
    }
}

/* ---- statistics ---------------------------------------------------------- */

typedef struct kstats {
    int status[NSTATUS]; /* 0 = free slot; -1 = other statuses */
    long count[NSTATUS];
    long failures; /* no answer: connection failure or timeout */
    long n;
    long hist[NBUCKET];
    double max_ms;
} kstats;

static void kstats_add(kstats *k, int status, double ms)
{
    if (status < 0) {
        k->failures++;
        return;
    }
    int slot = -1;
    for (int i = 0; i < NSTATUS && slot < 0; i++)
        if (k->status[i] == status || k->status[i] == 0)
            slot = i;
    if (slot < 0) {
        slot = NSTATUS - 1;
        status = -1;
    }
    k->status[slot] = k->status[slot] ? k->status[slot] : status;
    k->count[slot]++;
    k->n++;
    double us = ms * 1000.0;
    int b = us <= 1.0 ? 0 : (int)(16.0 * log2(us));
    if (b >= NBUCKET)
        b = NBUCKET - 1;
    k->hist[b]++;
    if (ms > k->max_ms)
        k->max_ms = ms;
}

static void kstats_merge(kstats *into, const kstats *k)
{
    for (int i = 0; i < NSTATUS; i++) {
        if (k->status[i] == 0)
            continue;
        int slot = -1;
        for (int j = 0; j < NSTATUS && slot < 0; j++)
            if (into->status[j] == k->status[i] || into->status[j] == 0)
                slot = j;
        if (slot < 0)
            slot = NSTATUS - 1;
        if (into->status[slot] == 0)
            into->status[slot] = k->status[i];
        into->count[slot] += k->count[i];
    }
    into->failures += k->failures;
    into->n += k->n;
    for (int b = 0; b < NBUCKET; b++)
        into->hist[b] += k->hist[b];
    if (k->max_ms > into->max_ms)
        into->max_ms = k->max_ms;
}

/* The upper edge (ms) of the histogram bucket holding quantile q (nearest rank). */
static double kstats_quantile(const kstats *k, double q)
{
    if (k->n == 0)
        return 0.0;
    long rank = (long)ceil(q * (double)k->n);
    if (rank < 1)
        rank = 1;
    long seen = 0;
    for (int b = 0; b < NBUCKET; b++) {
        seen += k->hist[b];
        if (seen >= rank) {
            double ms = pow(2.0, (double)(b + 1) / 16.0) / 1000.0;
            return ms < k->max_ms ? ms : k->max_ms;
        }
    }
    return k->max_ms;
}

/* ---- shared state -------------------------------------------------------- */

static int g_port;
static pid_t g_pid;
static double g_think_ms = 0.0;
static atomic_int g_stop;
static atomic_long g_requests;
static atomic_long g_errors;
static atomic_long g_reconnects;
static atomic_int g_daemon_dead;
static pthread_mutex_t g_err_lock = PTHREAD_MUTEX_INITIALIZER;
static char g_err_msg[MAX_ERRORS_KEPT][360];
static int g_err_kept;
static double g_t0;

static void note_error(const char *fmt, ...)
{
    atomic_fetch_add(&g_errors, 1);
    char msg[320];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    /* control characters of an answer would break the markdown table */
    for (char *p = msg; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == '|' || *p == '`')
            *p = ' ';
    pthread_mutex_lock(&g_err_lock);
    if (g_err_kept < MAX_ERRORS_KEPT) {
        snprintf(g_err_msg[g_err_kept], sizeof g_err_msg[0], "t=%.1fs %.300s",
                 gp_bench_seconds() - g_t0, msg);
        g_err_kept++;
    }
    pthread_mutex_unlock(&g_err_lock);
    fprintf(stderr, "bench_soak: error: %s\n", msg);
}

/* ---- HTTP/1.1 over one keep-alive connection ----------------------------- */

typedef struct hconn {
    int fd;
    char *buf; /* the last answer: headers, body, a terminating NUL */
    size_t cap;
    size_t len;
} hconn;

typedef struct hresp {
    int status;
    const char *body; /* NUL-terminated, inside the connection's buffer */
    size_t body_len;
    char location[160];
} hresp;

static void hconn_close(hconn *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
}

static int remaining_ms(double deadline)
{
    double left = deadline - gp_bench_seconds();
    if (left <= 0.0)
        return 0;
    return left > 3600.0 ? 3600000 : (int)(left * 1000.0) + 1;
}

static int hconn_open(hconn *c, char *why, size_t whylen)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) {
        snprintf(why, whylen, "socket: %s", strerror(errno));
        return -1;
    }
    struct sockaddr_in sa;
    memset(&sa, 0, sizeof sa);
    sa.sin_family = AF_INET;
    sa.sin_port = htons((unsigned short)g_port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
        snprintf(why, whylen, "connect 127.0.0.1:%d: %s", g_port, strerror(errno));
        close(fd);
        return -1;
    }
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    c->fd = fd;
    return 0;
}

/* Writes all of p; -1 on failure or past the deadline. */
static int send_all(int fd, const char *p, size_t n, double deadline)
{
    size_t done = 0;
    while (done < n) {
        struct pollfd pfd = {.fd = fd, .events = POLLOUT};
        int ms = remaining_ms(deadline);
        if (ms == 0 || poll(&pfd, 1, ms) <= 0)
            return -1;
        ssize_t w = send(fd, p + done, n - done, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        done += (size_t)w;
    }
    return 0;
}

/* Case-insensitive search for header NAME in [h, end); its value or NULL. */
static const char *header_value(const char *h, const char *end, const char *name, size_t *vlen)
{
    size_t nl = strlen(name);
    for (const char *line = h; line < end;) {
        const char *eol = strstr(line, "\r\n");
        if (eol == NULL || eol > end)
            eol = end;
        if ((size_t)(eol - line) > nl && strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            const char *v = line + nl + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            *vlen = (size_t)(eol - v);
            return v;
        }
        line = eol + 2;
    }
    return NULL;
}

/* Receives at least want bytes in total; -2 if the peer closed before any byte,
 * -1 on failure or timeout (why says which). */
static int recv_until(hconn *c, size_t want, double deadline, char *why, size_t whylen)
{
    while (c->len < want) {
        if (c->len + 1 >= c->cap) {
            size_t cap = c->cap * 2;
            if (cap > MAX_RESPONSE + 1) {
                snprintf(why, whylen, "answer larger than %u bytes", MAX_RESPONSE);
                return -1;
            }
            char *nb = realloc(c->buf, cap);
            if (nb == NULL) {
                snprintf(why, whylen, "out of memory");
                return -1;
            }
            c->buf = nb;
            c->cap = cap;
        }
        struct pollfd pfd = {.fd = c->fd, .events = POLLIN};
        int ms = remaining_ms(deadline);
        int pr = ms == 0 ? 0 : poll(&pfd, 1, ms);
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0) {
            snprintf(why, whylen, "no answer within the time limit");
            return -1;
        }
        ssize_t r = recv(c->fd, c->buf + c->len, c->cap - 1 - c->len, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0 && c->len == 0)
            return -2;
        if (r <= 0) {
            snprintf(why, whylen, "connection %s after %zu bytes of the answer",
                     r == 0 ? "closed" : strerror(errno), c->len);
            return -1;
        }
        c->len += (size_t)r;
        c->buf[c->len] = '\0';
        if (want == (size_t)-1 && strstr(c->buf, "\r\n\r\n") != NULL)
            return 0;
    }
    return 0;
}

/* One request and its answer. 0 with r filled; -1 on failure (why says what).
 * A reused keep-alive connection the daemon closed before answering is
 * reopened once (counted as a reconnect, not an error). */
static int http_request(hconn *c, const char *method, const char *path, const char *body,
                        double max_s, hresp *r, char *why, size_t whylen)
{
    double deadline = gp_bench_seconds() + max_s;
    size_t blen = body ? strlen(body) : 0;
    char head[512];
    int hl;
    if (body)
        hl = snprintf(head, sizeof head,
                      "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
                      "Content-Length: %zu\r\n\r\n",
                      method, path, g_port, blen);
    else
        hl = snprintf(head, sizeof head, "%s %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n", method,
                      path, g_port);
    if (hl < 0 || (size_t)hl >= sizeof head) {
        snprintf(why, whylen, "path too long");
        return -1;
    }
    for (int attempt = 0; attempt < 2; attempt++) {
        int reused = c->fd >= 0;
        if (!reused && hconn_open(c, why, whylen) != 0)
            return -1;
        c->len = 0;
        c->buf[0] = '\0';
        int rc = send_all(c->fd, head, (size_t)hl, deadline);
        if (rc == 0 && blen)
            rc = send_all(c->fd, body, blen, deadline);
        if (rc != 0) {
            snprintf(why, whylen, "sending the request failed: %s", strerror(errno));
            rc = -3;
        } else {
            rc = recv_until(c, (size_t)-1, deadline, why, whylen);
        }
        if (rc != 0) {
            hconn_close(c);
            /* the daemon closed an idle keep-alive connection: not an error */
            if (reused && attempt == 0 && (rc == -2 || rc == -3) && remaining_ms(deadline) > 0) {
                atomic_fetch_add(&g_reconnects, 1);
                continue;
            }
            if (rc == -2)
                snprintf(why, whylen, "connection closed before an answer");
            return -1;
        }
        break;
    }
    if (c->fd < 0) {
        snprintf(why, whylen, "connection closed before an answer (twice)");
        return -1;
    }
    char *hend = strstr(c->buf, "\r\n\r\n");
    int status = 0;
    if (sscanf(c->buf, "HTTP/1.%*d %d", &status) != 1 || status < 100 || status > 599) {
        snprintf(why, whylen, "malformed status line");
        hconn_close(c);
        return -1;
    }
    size_t hdr_len = (size_t)(hend - c->buf) + 4;
    size_t vlen = 0;
    const char *v;
    int close_after = 0;
    if ((v = header_value(c->buf, hend, "Connection", &vlen)) != NULL && vlen >= 5 &&
        strncasecmp(v, "close", 5) == 0)
        close_after = 1;
    r->location[0] = '\0';
    if ((v = header_value(c->buf, hend, "Location", &vlen)) != NULL && vlen < sizeof r->location) {
        memcpy(r->location, v, vlen);
        r->location[vlen] = '\0';
    }
    size_t clen = 0;
    int no_body = status == 204 || status == 304 || status < 200 || strcmp(method, "HEAD") == 0;
    if (!no_body) {
        if ((v = header_value(c->buf, hend, "Content-Length", &vlen)) != NULL) {
            clen = (size_t)strtoull(v, NULL, 10);
        } else if (header_value(c->buf, hend, "Transfer-Encoding", &vlen) != NULL) {
            snprintf(why, whylen, "chunked answer (not supported by this client)");
            hconn_close(c);
            return -1;
        } else {
            snprintf(why, whylen, "answer without Content-Length");
            hconn_close(c);
            return -1;
        }
    }
    if (clen > MAX_RESPONSE) {
        snprintf(why, whylen, "answer of %zu bytes", clen);
        hconn_close(c);
        return -1;
    }
    if (recv_until(c, hdr_len + clen, deadline, why, whylen) != 0) {
        hconn_close(c);
        return -1;
    }
    r->status = status;
    r->body = c->buf + hdr_len;
    r->body_len = clen;
    c->buf[hdr_len + clen] = '\0';
    if (close_after)
        hconn_close(c);
    return 0;
}

/* ---- one loop ------------------------------------------------------------ */

typedef struct worker {
    int id;
    unsigned long long rng;
    hconn conn;
    kstats stats[K_COUNT];
    long fits; /* throwaway models named soak-L<id>-<fits> */
    char body[BODY_CAP];
    char path[256];
    pthread_t thread;
} worker;

static unsigned long long rng_next(worker *w)
{
    /* xorshift64* */
    w->rng ^= w->rng >> 12;
    w->rng ^= w->rng << 25;
    w->rng ^= w->rng >> 27;
    return w->rng * 2685821657736338717ull;
}

static double rng_unit(worker *w)
{
    return (double)(rng_next(w) >> 11) * (1.0 / 9007199254740992.0);
}

static int rng_int(worker *w, int n)
{
    return (int)(rng_next(w) % (unsigned long long)n);
}

static const char *const seed_names[N_SEED] = {"soak-exact", "soak-ssgp", "soak-sgpr",
                                               "soak-msrfr", "soak-renyi"};

/* One request of kind K; the status, or -1 without an answer (then an error).
 * A status outside EXPECT is an error. */
static int request(worker *w, int k, const char *method, const char *path, const char *body,
                   int expect, double max_s, hresp *r)
{
    char why[200];
    double t = gp_bench_seconds();
    int rc = http_request(&w->conn, method, path, body, max_s, r, why, sizeof why);
    double ms = (gp_bench_seconds() - t) * 1000.0;
    atomic_fetch_add(&g_requests, 1);
    if (rc != 0) {
        kstats_add(&w->stats[k], -1, ms);
        note_error("%s %s: %s", method, path, why);
        return -1;
    }
    kstats_add(&w->stats[k], r->status, ms);
    int ok = (status_bit(r->status) & expect) != 0;
    if (ok && r->status == 422 && strstr(r->body, "\"unsupported\"") == NULL)
        ok = 0;
    if (!ok)
        note_error("%s %s: status %d: %.160s", method, path, r->status, r->body);
    return r->status;
}

/* Appends "[[x],...]" of m points in [-1, 6] to w->body at *len. */
static void put_points(worker *w, size_t *len, int m)
{
    *len += (size_t)snprintf(w->body + *len, BODY_CAP - *len, "[");
    for (int i = 0; i < m && *len < BODY_CAP - 64; i++)
        *len += (size_t)snprintf(w->body + *len, BODY_CAP - *len, "%s[%.5f]", i ? "," : "",
                                 -1.0 + 7.0 * rng_unit(w));
    *len += (size_t)snprintf(w->body + *len, BODY_CAP - *len, "]");
}

/* A fit body for NAME: n points of a noisy sine on [0, 5] (flat X or rows), a
 * small configuration of a method drawn at random; async when asked. */
static void fit_body(worker *w, const char *name, int n, int async, int method)
{
    static const char *const exact_kernels[] = {"rbf", "matern52", "matern32"};
    static const char *const ssgp_freq[] = {"mc", "qmc", "orf"};
    char opts[200];
    switch (method) {
    case 0:
        snprintf(opts, sizeof opts, "\"method\":\"exact\",\"kernel\":{\"type\":\"%s\"}",
                 exact_kernels[rng_int(w, 3)]);
        break;
    case 1:
        snprintf(opts, sizeof opts,
                 "\"method\":\"ssgp\",\"options\":{\"features\":%d,\"frequencies\":\"%s\"}",
                 10 + rng_int(w, 20), ssgp_freq[rng_int(w, 3)]);
        break;
    case 2:
        snprintf(opts, sizeof opts, "\"method\":\"sgpr\",\"options\":{\"inducing\":%d}",
                 4 + rng_int(w, 6));
        break;
    case 3:
        snprintf(opts, sizeof opts,
                 "\"method\":\"msrfr\",\"options\":{\"particles\":2,\"features\":10,"
                 "\"iterations\":%d}",
                 20 + rng_int(w, 40));
        break;
    default:
        snprintf(opts, sizeof opts, "\"method\":\"renyi\",\"options\":{\"inducing\":%d}",
                 4 + rng_int(w, 4));
        break;
    }
    int rows = rng_int(w, 2);
    size_t len = (size_t)snprintf(w->body, BODY_CAP, "{\"name\":\"%s\",%s,\"seed\":%d%s,\"X\":[",
                                  name, opts, rng_int(w, 1000), async ? ",\"async\":true" : "");
    double x[512];
    if (n > 512)
        n = 512;
    for (int i = 0; i < n; i++) {
        x[i] = 5.0 * ((double)i + rng_unit(w)) / (double)n;
        len += (size_t)snprintf(w->body + len, BODY_CAP - len, rows ? "%s[%.5f]" : "%s%.5f",
                                i ? "," : "", x[i]);
    }
    len += (size_t)snprintf(w->body + len, BODY_CAP - len, "],\"y\":[");
    for (int i = 0; i < n; i++)
        len += (size_t)snprintf(w->body + len, BODY_CAP - len, "%s%.5f", i ? "," : "",
                                sin(x[i]) + 0.1 * (rng_unit(w) - 0.5));
    snprintf(w->body + len, BODY_CAP - len, "]}");
}

/* The id of "/v1/jobs/ID" in a Location header into path; 0 if found. */
static int job_path(const hresp *r, char *path, size_t cap)
{
    if (strncmp(r->location, "/v1/jobs/", 9) != 0 || strlen(r->location) >= cap)
        return -1;
    snprintf(path, cap, "%s", r->location);
    return 0;
}

/* The job's "status" (the first in the answer) into st. */
static void job_status(const hresp *r, char *st, size_t cap)
{
    st[0] = '\0';
    const char *p = strstr(r->body, "\"status\"");
    if (p == NULL)
        return;
    p = strchr(p + 8, '"');
    if (p == NULL)
        return;
    p++;
    size_t n = 0;
    while (p[n] && p[n] != '"' && n + 1 < cap)
        n++;
    memcpy(st, p, n);
    st[n] = '\0';
}

/* Polls JOBPATH until the job ends; its final status into st ("" on failure). */
static void poll_job(worker *w, const char *jobpath, char *st, size_t cap)
{
    double until = gp_bench_seconds() + JOB_SECONDS;
    st[0] = '\0';
    for (int i = 0; i < 100000 && gp_bench_seconds() < until; i++) {
        hresp r;
        if (request(w, K_JOB_POLL, "GET", jobpath, NULL, E200, REQUEST_SECONDS, &r) != 200)
            return;
        job_status(&r, st, cap);
        if (strcmp(st, "succeeded") == 0 || strcmp(st, "failed") == 0 ||
            strcmp(st, "cancelled") == 0)
            return;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    note_error("GET %s: job not finished after %.0f s (last status '%s')", jobpath, JOB_SECONDS,
               st);
    st[0] = '\0';
}

/* Predict on, delete, and check the absence of the throwaway model NAME. */
static void finish_model(worker *w, const char *name, int predict, int delete_expect)
{
    hresp r;
    char path[160];
    if (predict) {
        size_t len = (size_t)snprintf(w->body, BODY_CAP, "{\"X\":");
        put_points(w, &len, 1 + rng_int(w, 5));
        snprintf(w->body + len, BODY_CAP - len, "}");
        snprintf(path, sizeof path, "/v1/models/%s/predict", name);
        request(w, K_PREDICT_FITTED, "POST", path, w->body, E200, REQUEST_SECONDS, &r);
    }
    snprintf(path, sizeof path, "/v1/models/%s", name);
    request(w, K_DELETE, "DELETE", path, NULL, delete_expect, REQUEST_SECONDS, &r);
    request(w, K_GET_DELETED, "GET", path, NULL, E404, REQUEST_SECONDS, &r);
}

static void scenario_fit_sync(worker *w)
{
    char name[64];
    hresp r;
    snprintf(name, sizeof name, "soak-L%d-%ld", w->id, w->fits++);
    int method = rng_int(w, 5);
    fit_body(w, name, 15 + rng_int(w, 40), 0, method);
    if (request(w, K_FIT_SYNC, "POST", "/v1/models", w->body, E201, FIT_SECONDS, &r) != 201)
        return;
    if (rng_int(w, 2) == 0) {
        /* a second version under the same name, then read it */
        fit_body(w, name, 15 + rng_int(w, 40), 0, method);
        if (request(w, K_FIT_SYNC, "POST", "/v1/models", w->body, E201, FIT_SECONDS, &r) == 201) {
            char path[160];
            snprintf(path, sizeof path, "/v1/models/%s/versions/2", name);
            request(w, K_GET_VERSION, "GET", path, NULL, E200, REQUEST_SECONDS, &r);
        }
    }
    finish_model(w, name, 1, E204);
}

static void scenario_fit_async(worker *w, int cancel)
{
    char name[64], jobpath[160], st[32];
    hresp r;
    snprintf(name, sizeof name, "soak-L%d-%ld", w->id, w->fits++);
    /* the cancelled fits are larger (exact on 300 points: ~0.3 s) so that the
     * cancel often finds them queued or running */
    if (cancel)
        fit_body(w, name, 250 + rng_int(w, 100), 1, 0);
    else
        fit_body(w, name, 15 + rng_int(w, 40), 1, rng_int(w, 5));
    if (request(w, K_FIT_ASYNC, "POST", "/v1/models", w->body, E202, FIT_SECONDS, &r) != 202)
        return;
    if (job_path(&r, jobpath, sizeof jobpath) != 0) {
        note_error("POST /v1/models (async): 202 without a Location /v1/jobs/ID");
        return;
    }
    if (cancel)
        request(w, K_JOB_CANCEL, "DELETE", jobpath, NULL, E202 | E200 | E204 | E409,
                REQUEST_SECONDS, &r);
    poll_job(w, jobpath, st, sizeof st);
    if (st[0] == '\0')
        return;
    if (strcmp(st, "failed") == 0) {
        note_error("GET %s: the job failed", jobpath);
        finish_model(w, name, 0, E204 | E404);
        return;
    }
    if (strcmp(st, "cancelled") == 0) {
        if (!cancel)
            note_error("GET %s: a job nobody cancelled was cancelled", jobpath);
        finish_model(w, name, 0, E404);
        return;
    }
    finish_model(w, name, 1, E204);
}

static void scenario(worker *w)
{
    hresp r;
    size_t len;
    int s = rng_int(w, N_SEED);
    const char *model = seed_names[s];
    int pick = rng_int(w, 100);
    /* the mix, in percent of scenarios */
    if (pick < 24) {
        len = (size_t)snprintf(w->body, BODY_CAP, "{\"X\":");
        put_points(w, &len, 1 + rng_int(w, 20));
        snprintf(w->body + len, BODY_CAP - len, "%s}",
                 rng_int(w, 2) ? ",\"include_noise\":false" : "");
        snprintf(w->path, sizeof w->path, "/v1/models/%s/predict", model);
        request(w, K_PREDICT, "POST", w->path, w->body, E200, REQUEST_SECONDS, &r);
    } else if (pick < 34) {
        len = (size_t)snprintf(w->body, BODY_CAP, "{\"X\":");
        put_points(w, &len, 1 + rng_int(w, 10));
        snprintf(w->body + len, BODY_CAP - len,
                 ",\"full_covariance\":true,\"quantiles\":[0.05,0.5,0.95],"
                 "\"include_noise\":%s%s}",
                 rng_int(w, 2) ? "true" : "false",
                 strcmp(model, "soak-msrfr") == 0 ? ",\"components\":true" : "");
        snprintf(w->path, sizeof w->path, "/v1/models/%s/predict", model);
        request(w, K_PREDICT_FULL, "POST", w->path, w->body, E200, REQUEST_SECONDS, &r);
    } else if (pick < 44) {
        len = (size_t)snprintf(w->body, BODY_CAP, "{\"X\":");
        put_points(w, &len, 1 + rng_int(w, 10));
        snprintf(w->body + len, BODY_CAP - len, ",\"n_samples\":%d,\"seed\":%d}",
                 1 + rng_int(w, 5), rng_int(w, 100000));
        snprintf(w->path, sizeof w->path, "/v1/models/%s/sample", model);
        request(w, K_SAMPLE, "POST", w->path, w->body, E200, REQUEST_SECONDS, &r);
    } else if (pick < 49) {
        request(w, K_LIST, "GET", "/v1/models", NULL, E200, REQUEST_SECONDS, &r);
    } else if (pick < 54) {
        snprintf(w->path, sizeof w->path, "/v1/models/%s", model);
        request(w, K_GET_MODEL, "GET", w->path, NULL, E200, REQUEST_SECONDS, &r);
    } else if (pick < 57) {
        snprintf(w->path, sizeof w->path, "/v1/models/%s/versions/1", model);
        request(w, K_GET_VERSION, "GET", w->path, NULL, E200, REQUEST_SECONDS, &r);
    } else if (pick < 62) {
        int m = 1 + rng_int(w, 3);
        len = (size_t)snprintf(w->body, BODY_CAP, "{\"X\":");
        put_points(w, &len, m);
        len += (size_t)snprintf(w->body + len, BODY_CAP - len, ",\"y\":[");
        for (int i = 0; i < m; i++)
            len += (size_t)snprintf(w->body + len, BODY_CAP - len, "%s%.4f", i ? "," : "",
                                    rng_unit(w) - 0.5);
        snprintf(w->body + len, BODY_CAP - len, "]}");
        snprintf(w->path, sizeof w->path, "/v1/models/%s/observe", model);
        request(w, K_OBSERVE, "POST", w->path, w->body, E200 | E201 | E202 | E204 | E422U,
                REQUEST_SECONDS, &r);
    } else if (pick < 64) {
        request(w, K_METRICS, "GET", "/metrics", NULL, E200, REQUEST_SECONDS, &r);
    } else if (pick < 66) {
        request(w, K_HEALTHZ, "GET", "/healthz", NULL, E200, REQUEST_SECONDS, &r);
    } else if (pick < 67) {
        request(w, K_READYZ, "GET", "/readyz", NULL, E200, REQUEST_SECONDS, &r);
    } else if (pick < 68) {
        request(w, K_METHODS, "GET", "/v1/methods", NULL, E200, REQUEST_SECONDS, &r);
    } else if (pick < 70) {
        request(w, K_MISSING, "POST", "/v1/models/soak-missing/predict", "{\"X\":[[1.0]]}", E404,
                REQUEST_SECONDS, &r);
    } else if (pick < 72) {
        snprintf(w->path, sizeof w->path, "/v1/models/%s/predict", model);
        request(w, K_BAD_JSON, "POST", w->path, "{\"X\":[[1.0],", E400, REQUEST_SECONDS, &r);
    } else if (pick < 84) {
        scenario_fit_sync(w);
    } else if (pick < 94) {
        scenario_fit_async(w, 0);
    } else {
        scenario_fit_async(w, 1);
    }
}

static void *worker_main(void *arg)
{
    worker *w = arg;
    for (long i = 0; i < 1000000000L && !atomic_load(&g_stop); i++) {
        if (rng_int(w, 20) == 0)
            hconn_close(&w->conn); /* the next request opens a fresh connection */
        scenario(w);
        if (g_think_ms > 0.0) {
            struct timespec ts = {(time_t)(g_think_ms / 1000.0),
                                  (long)(fmod(g_think_ms, 1000.0) * 1e6)};
            nanosleep(&ts, NULL);
        }
    }
    hconn_close(&w->conn);
    return NULL;
}

/* ---- the daemon, from /proc ---------------------------------------------- */

typedef struct sample {
    double t;
    long requests;
    long rss_kib;
    long anon_kib; /* RssAnon: the heap, stacks; RssFile: mapped files (code) */
    long file_kib;
    long hwm_kib;
    int threads;
    int fds;
    double cpu_s;
    double db_mib;
} sample;

/* 0 and the figures if the daemon lives; -1 if it is gone (or a zombie). */
static int read_proc(pid_t pid, const char *db, sample *s)
{
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/status", (int)pid);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return -1;
    s->rss_kib = -1;
    s->anon_kib = 0;
    s->file_kib = 0;
    s->hwm_kib = 0;
    s->threads = 0;
    int zombie = 0;
    for (int i = 0; i < 200 && fgets(line, sizeof line, f); i++) {
        char st;
        if (sscanf(line, "State: %c", &st) == 1 && (st == 'Z' || st == 'X'))
            zombie = 1;
        sscanf(line, "VmRSS: %ld", &s->rss_kib);
        sscanf(line, "VmHWM: %ld", &s->hwm_kib);
        sscanf(line, "RssAnon: %ld", &s->anon_kib);
        sscanf(line, "RssFile: %ld", &s->file_kib);
        sscanf(line, "Threads: %d", &s->threads);
    }
    fclose(f);
    if (zombie || s->rss_kib < 0)
        return -1;
    s->fds = 0;
    snprintf(path, sizeof path, "/proc/%d/fd", (int)pid);
    DIR *d = opendir(path);
    if (d) {
        struct dirent *e;
        for (int i = 0; i < 1000000 && (e = readdir(d)) != NULL; i++)
            s->fds += e->d_name[0] != '.';
        closedir(d);
    }
    s->cpu_s = 0.0;
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    f = fopen(path, "r");
    if (f) {
        char buf[1024];
        size_t n = fread(buf, 1, sizeof buf - 1, f);
        buf[n] = '\0';
        fclose(f);
        const char *p = strrchr(buf, ')'); /* the name may hold spaces */
        unsigned long long ut = 0, stt = 0;
        if (p && sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut,
                        &stt) == 2)
            s->cpu_s = (double)(ut + stt) / (double)sysconf(_SC_CLK_TCK);
    }
    s->db_mib = 0.0;
    if (db) {
        const char *suffix[] = {"", "-wal", "-shm"};
        for (int i = 0; i < 3; i++) {
            char p2[1100];
            struct stat stt;
            snprintf(p2, sizeof p2, "%s%s", db, suffix[i]);
            if (stat(p2, &stt) == 0)
                s->db_mib += (double)stt.st_size / 1048576.0;
        }
    }
    return 0;
}

/* ---- seeds --------------------------------------------------------------- */

static int fit_seeds(void)
{
    static const char *const opts[N_SEED] = {
        "\"method\":\"exact\",\"kernel\":{\"type\":\"rbf\",\"ard\":true}",
        "\"method\":\"ssgp\",\"options\":{\"features\":50,\"frequencies\":\"qmc\"}",
        "\"method\":\"sgpr\",\"options\":{\"inducing\":10}",
        "\"method\":\"msrfr\",\"options\":{\"particles\":4,\"features\":20,\"iterations\":200}",
        "\"method\":\"renyi\",\"options\":{\"inducing\":10}",
    };
    static worker w; /* its buffers, for the seed requests */
    w.conn.fd = -1;
    w.conn.cap = 65536;
    w.conn.buf = malloc(w.conn.cap);
    if (w.conn.buf == NULL)
        return -1;
    int rc = 0;
    for (int s = 0; s < N_SEED && rc == 0; s++) {
        size_t len = (size_t)snprintf(w.body, BODY_CAP, "{\"name\":\"%s\",%s,\"seed\":1,\"X\":[",
                                      seed_names[s], opts[s]);
        for (int i = 0; i < 40; i++)
            len += (size_t)snprintf(w.body + len, BODY_CAP - len, "%s[%.3f]", i ? "," : "",
                                    0.125 * i);
        len += (size_t)snprintf(w.body + len, BODY_CAP - len, "],\"y\":[");
        for (int i = 0; i < 40; i++)
            len += (size_t)snprintf(w.body + len, BODY_CAP - len, "%s%.6f", i ? "," : "",
                                    sin(0.125 * i) + 0.05 * sin(17.0 * 0.125 * i));
        snprintf(w.body + len, BODY_CAP - len, "]}");
        hresp r;
        char why[200];
        if (http_request(&w.conn, "POST", "/v1/models", w.body, FIT_SECONDS, &r, why,
                         sizeof why) != 0) {
            fprintf(stderr, "bench_soak: seed fit %s: %s\n", seed_names[s], why);
            rc = -1;
        } else if (r.status != 201) {
            fprintf(stderr, "bench_soak: seed fit %s: status %d: %.300s\n", seed_names[s],
                    r.status, r.body);
            rc = -1;
        }
    }
    hconn_close(&w.conn);
    free(w.conn.buf);
    return rc;
}

/* ---- report -------------------------------------------------------------- */

static void print_requests(const kstats *total, double seconds, int loops)
{
    long n = 0, failures = 0;
    for (int k = 0; k < K_COUNT; k++) {
        n += total[k].n;
        failures += total[k].failures;
    }
    printf("## Requests\n\n");
    printf("%ld answered requests in %.0f s from %d loops (%.0f/s), %ld without an answer;\n", n,
           seconds, loops, (double)n / seconds, failures);
    printf("%ld keep-alive connections found closed and reopened. Latency from the client\n",
           atomic_load(&g_reconnects));
    printf("(request written to answer read), percentiles from a log histogram (within 4.5%%).\n\n");
    printf("| request | route | count | statuses | p50 ms | p99 ms | max ms |\n");
    printf("|---|---|---:|---|---:|---:|---:|\n");
    for (int k = 0; k < K_COUNT; k++) {
        const kstats *s = &total[k];
        char st[200];
        size_t l = 0;
        st[0] = '\0';
        for (int i = 0; i < NSTATUS; i++) {
            if (s->status[i] == 0)
                continue;
            if (s->status[i] < 0)
                l += (size_t)snprintf(st + l, sizeof st - l, "%sother: %ld", l ? ", " : "",
                                      s->count[i]);
            else
                l += (size_t)snprintf(st + l, sizeof st - l, "%s%d: %ld", l ? ", " : "",
                                      s->status[i], s->count[i]);
        }
        if (s->failures)
            snprintf(st + l, sizeof st - l, "%sno answer: %ld", l ? ", " : "", s->failures);
        printf("| %s | `%s` | %ld | %s | %.2f | %.2f | %.2f |\n", kinds[k].label, kinds[k].route,
               s->n + s->failures, st[0] ? st : "-", kstats_quantile(s, 0.5),
               kstats_quantile(s, 0.99), s->max_ms);
    }
    printf("\n");
}

static double mean_rss(const sample *s, int n, double from, double to)
{
    double sum = 0.0;
    int c = 0;
    for (int i = 0; i < n; i++)
        if (s[i].t >= from - 0.5 && s[i].t <= to + 0.5) {
            sum += (double)s[i].rss_kib;
            c++;
        }
    return c ? sum / c : 0.0;
}

/* Least-squares slope (KiB/min) of RSS (what = 0), RssAnon (1) or RssFile (2)
 * over the samples from t = from on; their count into *m. */
static double rss_slope(const sample *s, int n, double from, int what, int *m)
{
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    *m = 0;
    for (int i = 0; i < n; i++) {
        if (s[i].t + 0.5 < from)
            continue;
        double x = s[i].t / 60.0;
        double y = (double)(what == 0 ? s[i].rss_kib : what == 1 ? s[i].anon_kib : s[i].file_kib);
        sx += x;
        sy += y;
        sxx += x * x;
        sxy += x * y;
        (*m)++;
    }
    double den = (double)*m * sxx - sx * sx;
    return *m >= 2 && den > 0 ? ((double)*m * sxy - sx * sy) / den : 0.0;
}

int main(int argc, char **argv)
{
    long port = 0, pid = 0, seconds = 600, loops = 4, think = 0, max_slope = 256,
         max_growth = 1024;
    const char *db = NULL;
    const gp_bench_cli_option opts[] = {
        {"port", GP_BENCH_CLI_LONG, &port, 1, 65535, "the daemon's port (required)"},
        {"pid", GP_BENCH_CLI_LONG, &pid, 1, 1L << 30, "the daemon's process id (required)"},
        {"seconds", GP_BENCH_CLI_LONG, &seconds, 10, 36000, "length of the run (default 600)"},
        {"loops", GP_BENCH_CLI_LONG, &loops, 1, MAX_LOOPS, "concurrent client loops (default 4)"},
        {"db", GP_BENCH_CLI_STRING, &db, 0, 0, "the store's file, its size sampled too"},
        {"think-ms", GP_BENCH_CLI_LONG, &think, 0, 10000, "pause between requests (default 0)"},
        {"max-slope", GP_BENCH_CLI_LONG, &max_slope, 0, 1L << 30,
         "fail above this RSS slope, KiB a minute (default 256)"},
        {"max-growth", GP_BENCH_CLI_LONG, &max_growth, 0, 1L << 30,
         "fail above this RSS growth, KiB (default 1024)"},
    };
    const char *usage = "--port N --pid PID [--seconds S] [--loops L] [--db PATH] [--think-ms MS] "
                        "[--max-slope KIB_PER_MIN] [--max-growth KIB]";
    size_t n_pos = 0;
    int rc = gp_bench_cli_parse(argc, argv, opts, sizeof opts / sizeof opts[0], usage, NULL, 0,
                                &n_pos);
    if (rc != 0)
        return rc == 1 ? 0 : 2;
    if (port == 0 || pid == 0) {
        fprintf(stderr, "usage: %s %s\n", argv[0], usage);
        return 2;
    }
    g_port = (int)port;
    g_pid = (pid_t)pid;
    g_think_ms = (double)think;
    signal(SIGPIPE, SIG_IGN);

    sample s0;
    if (read_proc(g_pid, db, &s0) != 0) {
        fprintf(stderr, "bench_soak: no process %ld\n", pid);
        return 2;
    }
    if (fit_seeds() != 0)
        return 2;

    static worker workers[MAX_LOOPS];
    static sample samples[MAX_SAMPLES];
    int ns = 0;
    for (int i = 0; i < loops; i++) {
        worker *w = &workers[i];
        w->id = i;
        w->rng = 0x9E3779B97F4A7C15ull * (unsigned long long)(i + 1);
        w->conn.fd = -1;
        w->conn.cap = 65536;
        w->conn.buf = malloc(w->conn.cap);
        if (w->conn.buf == NULL)
            return 2;
    }
    g_t0 = gp_bench_seconds();
    if (read_proc(g_pid, db, &samples[ns]) == 0) {
        samples[ns].t = 0.0;
        samples[ns].requests = 0;
        ns++;
    }
    fprintf(stderr, "bench_soak: %ld loops for %ld s on 127.0.0.1:%ld (daemon pid %ld)\n", loops,
            seconds, port, pid);
    int started = 0;
    for (int i = 0; i < loops; i++)
        if (pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]) == 0)
            started++;
    if (started < loops) {
        atomic_store(&g_stop, 1);
        note_error("could only start %d of %ld loops", started, loops);
    }
    /* Sample every SAMPLE_EVERY s until the end; watch the daemon in between. */
    long next = SAMPLE_EVERY;
    double end = g_t0 + (double)seconds;
    for (long tick = 0; tick < 100L * 36001 && gp_bench_seconds() < end + 0.05; tick++) {
        struct timespec ts = {0, 100 * 1000 * 1000};
        nanosleep(&ts, NULL);
        double t = gp_bench_seconds() - g_t0;
        sample cur;
        if (read_proc(g_pid, db, &cur) != 0) {
            atomic_store(&g_daemon_dead, 1);
            note_error("the daemon (pid %ld) is gone at t=%.1f s", pid, t);
            break;
        }
        if (t + 1e-6 >= (double)next && ns < MAX_SAMPLES) {
            cur.t = (double)next;
            cur.requests = atomic_load(&g_requests);
            samples[ns++] = cur;
            fprintf(stderr, "bench_soak: t=%4.0f s  %8ld requests  RSS %.1f MiB  errors %ld\n",
                    cur.t, cur.requests, (double)cur.rss_kib / 1024.0, atomic_load(&g_errors));
            next += SAMPLE_EVERY;
        }
    }
    atomic_store(&g_stop, 1);
    for (int i = 0; i < started; i++)
        pthread_join(workers[i].thread, NULL);
    double run_s = gp_bench_seconds() - g_t0;
    sample last;
    int alive = atomic_load(&g_daemon_dead) == 0 && read_proc(g_pid, db, &last) == 0;
    if (!alive && atomic_load(&g_daemon_dead) == 0)
        note_error("the daemon (pid %ld) is gone after the run", pid);

    kstats total[K_COUNT];
    memset(total, 0, sizeof total);
    for (int i = 0; i < loops; i++) {
        for (int k = 0; k < K_COUNT; k++)
            kstats_merge(&total[k], &workers[i].stats[k]);
        free(workers[i].conn.buf);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double client_cpu = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec +
                        (double)ru.ru_stime.tv_sec + 1e-6 * (double)ru.ru_stime.tv_usec;

    print_requests(total, run_s, (int)loops);
    long errors = atomic_load(&g_errors);
    printf("## Errors\n\n");
    if (errors == 0) {
        printf("None: every request got one of the statuses it expects (no 5xx, no unexpected\n"
               "status, no connection failure or timeout, no failed job; the daemon stayed up).\n\n");
    } else {
        printf("**%ld errors** (the first %d):\n\n", errors, g_err_kept);
        for (int i = 0; i < g_err_kept; i++)
            printf("- %s\n", g_err_msg[i]);
        printf("\n");
    }

    printf("## Daemon every %d s\n\n", SAMPLE_EVERY);
    printf("CPU: daemon %.1f s, this client %.1f s (of %.0f s × 2 cores of wall time).\n\n",
           ns ? samples[ns - 1].cpu_s - samples[0].cpu_s : 0.0, client_cpu, run_s);
    printf("RSS = VmRSS of /proc/PID/status, the sum of RssAnon (heap, stacks) and RssFile (pages of\n"
           "mapped files: the binary and its libraries, touched as code paths are first run); db =\n"
           "the database with its WAL and shared-memory files.\n\n");
    printf("| t s | requests | req/s | RSS MiB | anon MiB | file MiB | peak RSS MiB | threads |"
           " open fds | CPU s | db MiB |\n");
    printf("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (int i = 0; i < ns; i++) {
        const sample *s = &samples[i];
        double rate = i ? (double)(s->requests - samples[i - 1].requests) / (s->t - samples[i - 1].t)
                        : 0.0;
        printf("| %.0f | %ld | %.0f | %.2f | %.2f | %.2f | %.2f | %d | %d | %.1f | %.2f |\n", s->t,
               s->requests, rate, (double)s->rss_kib / 1024.0, (double)s->anon_kib / 1024.0,
               (double)s->file_kib / 1024.0, (double)s->hwm_kib / 1024.0, s->threads, s->fds,
               s->cpu_s, s->db_mib);
    }
    printf("\n");

    /* Verdict: warm-up = the first quarter; slope over the rest, second vs last quarter. */
    double D = ns ? samples[ns - 1].t : 0.0;
    double warm = D / 4.0;
    int m = 0;
    double slope = rss_slope(samples, ns, warm, 0, &m);
    double slope_anon = rss_slope(samples, ns, warm, 1, &m);
    double slope_file = rss_slope(samples, ns, warm, 2, &m);
    double q2 = mean_rss(samples, ns, D / 4.0, D / 2.0);
    double q4 = mean_rss(samples, ns, 3.0 * D / 4.0, D);
    int flat = m >= 2 && slope <= (double)max_slope && q4 - q2 <= (double)max_growth;
    int judged = D >= MIN_JUDGED;
    printf("## Verdict\n\n");
    int iw = 0;
    while (iw + 1 < ns && samples[iw].t + 0.5 < warm)
        iw++;
    printf("Warm-up: the first quarter (%.0f s). RSS is %.2f MiB at t = %.0f s and %.2f MiB at the\n",
           warm, ns ? (double)samples[iw].rss_kib / 1024.0 : 0.0, ns ? samples[iw].t : 0.0,
           ns ? (double)samples[ns - 1].rss_kib / 1024.0 : 0.0);
    printf("end. After the warm-up, over %d samples, RSS grows by\n", m);
    printf("**%.1f KiB/min** (least-squares slope; threshold %ld KiB/min); the mean RSS of the last\n",
           slope, max_slope);
    printf("quarter is %.2f MiB against %.2f MiB in the second quarter: **%+.0f KiB** (threshold\n",
           q4 / 1024.0, q2 / 1024.0, q4 - q2);
    if (judged)
        printf("%+ld KiB). RSS %s after warm-up; %ld errors.\n\n", max_growth,
               flat ? "is flat" : "is **not** flat", errors);
    else
        printf("%+ld KiB). A run shorter than %d s is mostly warm-up: RSS is not judged (only\n"
               "errors fail it); %ld errors.\n\n",
               max_growth, MIN_JUDGED, errors);
    flat = flat || !judged;
    printf("The two parts of RSS over the same samples: RssAnon %+.1f KiB/min, RssFile %+.1f KiB/min.\n\n",
           slope_anon, slope_file);
    fflush(stdout);
    return errors == 0 && flat && alive ? 0 : 1;
}
