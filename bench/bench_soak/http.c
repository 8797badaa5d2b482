/* bench_soak: HTTP/1.1 to 127.0.0.1 over one keep-alive connection, plain
 * sockets, no library (the client stays cheap next to the daemon). */

#include "bench/bench_soak/soak.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench/support/clock.h"

#define MAX_RESPONSE (64u << 20)          /* bytes; a larger answer is an error */

/* ---- HTTP/1.1 over one keep-alive connection ----------------------------- */

void hconn_close(hconn *c)
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
int http_request(hconn *c, const char *method, const char *path, const char *body,
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
