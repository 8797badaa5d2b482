/* A misbehaving HTTP client for the integration area "abuse"
 * (tests/integration/t_abuse.sh). Loopback only (127.0.0.x); every mode ends
 * by itself within its time bound.
 *
 *   abuse_client raw PORT SECONDS
 *       Sends stdin as it is to 127.0.0.1:PORT and copies what comes back to
 *       stdout until the server closes the connection or SECONDS pass: for
 *       requests curl will not send (a bad request line or HTTP version).
 *
 *   abuse_client hold PORT SRC COUNT SECONDS INTERVAL_MS
 *       Slowloris: opens COUNT connections from address SRC (127.0.0.x; or a
 *       comma-separated list of them: COUNT from each) to
 *       127.0.0.1:PORT, sends each a request line and a Host header, then one
 *       more header byte every INTERVAL_MS and never the blank line that ends
 *       the headers. Prints, once every connect has settled and a second more
 *       has passed (in which the server closes those it refuses),
 *         ready t_ms=T attempted=N connected=C refused=R open=O
 *       and at the end (SECONDS passed, or every connection closed)
 *         done t_ms=T open=O closed_later=K got_408=G close_min_ms=A close_max_ms=B
 *       refused: closed by the server before "ready"; closed_later: closed by
 *       it after; got_408: closed connections whose answer began
 *       "HTTP/1.1 408"; close_min/max_ms: for the closed_later ones, the time
 *       from the call of connect (before the server can have accepted it) to
 *       the close being seen (-1 when none).
 *
 *   abuse_client probe PORT SECONDS INTERVAL_MS LIMIT_MS METHOD PATH [BODY_FILE]
 *       Every INTERVAL_MS for SECONDS, one request from 127.0.0.1 (a new
 *       connection, "Connection: close"; BODY_FILE sent as JSON) timed from
 *       the call of connect to the end of the answer (at most 10 s). Prints
 *       one line per request ("STATUS MS", status 0: no answer) and at the end
 *         probe n=N ok=K slow=S failed=F max_ms=M
 *       ok: answered 2xx within LIMIT_MS; slow: answered later; failed: no
 *       answer, or not 2xx. Exit 0 when every request was ok. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define SETTLE_MS 1000     /* after the last connect, before "ready" */
#define CONNECT_MAX_MS 5000 /* the connect phase at most */

enum slot_state { S_CONNECTING, S_OPEN, S_CLOSED, S_FAILED };

typedef struct slot {
    int fd;
    enum slot_state state;
    int64_t started_ms, closed_ms; /* connect called; close seen */
    int closed_before_ready;
    size_t sent;        /* bytes of the trickled header sent */
    char head[16];      /* the first bytes of an answer */
    size_t head_len;
} slot;

static const char request_line[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n";
static const char trickle[] = "X-Slow: a\r\n";

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int parse_int(const char *s, long min, long max, long *out)
{
    char *end = NULL;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end != '\0' || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

static int loopback_addr(const char *ip, unsigned port, struct sockaddr_in *a)
{
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, ip, &a->sin_addr) != 1)
        return -1;
    return (ntohl(a->sin_addr.s_addr) >> 24) == 127 ? 0 : -1; /* 127.0.0.0/8 only */
}

/* Enough descriptors for n sockets: the soft limit raised to the hard one. */
static int want_fds(long n)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return -1;
    if (rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl);
        (void)getrlimit(RLIMIT_NOFILE, &rl);
    }
    return rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur >= (rlim_t)n + 16 ? 0 : -1;
}

/* ---- raw ---- */

static int run_raw(unsigned port, long seconds)
{
    static char req[1 << 20];
    size_t n = fread(req, 1, sizeof req, stdin);
    struct sockaddr_in a;
    loopback_addr("127.0.0.1", port, &a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        perror("abuse_client raw: connect");
        return 1;
    }
    for (size_t off = 0; off < n;) {
        ssize_t w = send(fd, req + off, n - off, MSG_NOSIGNAL);
        if (w <= 0)
            break; /* the server may answer and close before it has read everything */
        off += (size_t)w;
    }
    int64_t end = now_ms() + seconds * 1000;
    char buf[4096];
    for (;;) {
        int64_t left = end - now_ms();
        struct pollfd p = {fd, POLLIN, 0};
        if (left <= 0 || poll(&p, 1, (int)left) <= 0)
            break;
        ssize_t r = recv(fd, buf, sizeof buf, 0);
        if (r <= 0)
            break;
        fwrite(buf, 1, (size_t)r, stdout);
    }
    close(fd);
    return 0;
}

/* ---- probe ---- */

#define PROBE_MAX_MS 10000

/* One request on a new connection; its status (0: none) and milliseconds. */
static int probe_once(unsigned port, const char *req, size_t req_len, int64_t *ms)
{
    int64_t t0 = now_ms();
    struct sockaddr_in a;
    loopback_addr("127.0.0.1", port, &a);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int status = 0;
    if (fd < 0)
        return 0;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0 &&
        send(fd, req, req_len, MSG_NOSIGNAL) == (ssize_t)req_len) {
        char head[16];
        size_t head_len = 0;
        char buf[4096];
        for (;;) {
            int64_t left = t0 + PROBE_MAX_MS - now_ms();
            struct pollfd p = {fd, POLLIN, 0};
            if (left <= 0 || poll(&p, 1, (int)left) <= 0)
                break;
            ssize_t r = recv(fd, buf, sizeof buf, 0);
            if (r <= 0) {
                if (head_len >= 12 && memcmp(head, "HTTP/1.", 7) == 0)
                    status = atoi(head + 9);
                break;
            }
            size_t k = (size_t)r < sizeof head - head_len ? (size_t)r : sizeof head - head_len;
            memcpy(head + head_len, buf, k);
            head_len += k;
        }
    }
    close(fd);
    *ms = now_ms() - t0;
    return status;
}

static int run_probe(unsigned port, long seconds, long interval_ms, long limit_ms,
                     const char *method, const char *path, const char *body_file)
{
    static char body[1 << 16];
    size_t body_len = 0;
    if (body_file != NULL) {
        FILE *f = fopen(body_file, "rb");
        if (f == NULL) {
            perror("abuse_client probe: body");
            return 2;
        }
        body_len = fread(body, 1, sizeof body, f);
        fclose(f);
    }
    static char req[sizeof body + 512];
    int n = snprintf(req, 512,
                     "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s"
                     "Content-Length: %zu\r\n\r\n",
                     method, path, body_file ? "Content-Type: application/json\r\n" : "",
                     body_len);
    if (n < 0 || n >= 512)
        return 2;
    memcpy(req + n, body, body_len);
    long total = 0, ok = 0, slow = 0, failed = 0;
    int64_t worst = 0, end = now_ms() + seconds * 1000;
    while (now_ms() < end) {
        int64_t start = now_ms(), ms = 0;
        int st = probe_once(port, req, (size_t)n + body_len, &ms);
        printf("%d %lld\n", st, (long long)ms);
        total++;
        worst = ms > worst ? ms : worst;
        if (st < 200 || st > 299)
            failed++;
        else if (ms > limit_ms)
            slow++;
        else
            ok++;
        int64_t wait = start + interval_ms - now_ms();
        if (wait > 0) {
            struct timespec ts = {(time_t)(wait / 1000), (long)(wait % 1000) * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    printf("probe n=%ld ok=%ld slow=%ld failed=%ld max_ms=%lld\n", total, ok, slow, failed,
           (long long)worst);
    fflush(stdout);
    return ok == total && total > 0 ? 0 : 1;
}

/* ---- hold ---- */

static void slot_close(slot *s, int64_t t, int before_ready)
{
    close(s->fd);
    s->fd = -1;
    s->state = S_CLOSED;
    s->closed_ms = t;
    s->closed_before_ready = before_ready;
}

static void slot_start(slot *s, const struct sockaddr_in *src, const struct sockaddr_in *dst)
{
    s->started_ms = now_ms();
    s->fd = socket(AF_INET, SOCK_STREAM, 0);
    s->state = S_FAILED;
    if (s->fd < 0)
        return;
    fcntl(s->fd, F_SETFL, fcntl(s->fd, F_GETFL) | O_NONBLOCK);
    if (bind(s->fd, (const struct sockaddr *)src, sizeof *src) != 0) {
        close(s->fd);
        s->fd = -1;
        return;
    }
    int rc = connect(s->fd, (const struct sockaddr *)dst, sizeof *dst);
    if (rc == 0 || errno == EINPROGRESS) {
        s->state = S_CONNECTING;
        return;
    }
    close(s->fd);
    s->fd = -1;
}

/* The connect of s completed (writable): open, request line sent. */
static void slot_connected(slot *s, int64_t t, int ready)
{
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) {
        close(s->fd);
        s->fd = -1;
        s->state = S_FAILED;
        return;
    }
    s->state = S_OPEN;
    if (send(s->fd, request_line, sizeof request_line - 1, MSG_NOSIGNAL) < 0)
        slot_close(s, t, !ready);
}

/* Readable: keep the first bytes of an answer; EOF or an error is a close. */
static void slot_read(slot *s, int64_t t, int ready)
{
    char buf[512];
    ssize_t r = recv(s->fd, buf, sizeof buf, MSG_DONTWAIT);
    if (r > 0) {
        size_t room = sizeof s->head - s->head_len;
        size_t k = (size_t)r < room ? (size_t)r : room;
        memcpy(s->head + s->head_len, buf, k);
        s->head_len += k;
        return;
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        return;
    slot_close(s, t, !ready);
}

static void trickle_all(slot *slots, long n, int64_t t, int ready)
{
    for (long i = 0; i < n; i++) {
        slot *s = &slots[i];
        if (s->state != S_OPEN)
            continue;
        char c = trickle[s->sent % (sizeof trickle - 1)];
        if (send(s->fd, &c, 1, MSG_NOSIGNAL | MSG_DONTWAIT) == 1)
            s->sent++;
        else if (errno != EAGAIN && errno != EWOULDBLOCK)
            slot_close(s, t, !ready);
    }
}

/* One poll over every connecting or open slot, for at most wait_ms. */
static void poll_round(slot *slots, long n, struct pollfd *pfd, long *idx, int wait_ms,
                       int ready)
{
    long m = 0;
    for (long i = 0; i < n; i++) {
        if (slots[i].state != S_CONNECTING && slots[i].state != S_OPEN)
            continue;
        pfd[m].fd = slots[i].fd;
        pfd[m].events = slots[i].state == S_CONNECTING ? POLLOUT : POLLIN;
        pfd[m].revents = 0;
        idx[m++] = i;
    }
    if (poll(pfd, (nfds_t)m, wait_ms) <= 0)
        return;
    int64_t t = now_ms();
    for (long k = 0; k < m; k++) {
        slot *s = &slots[idx[k]];
        if (pfd[k].revents == 0)
            continue;
        if (s->state == S_CONNECTING)
            slot_connected(s, t, ready);
        else
            slot_read(s, t, ready);
    }
}

static long count_state(const slot *slots, long n, enum slot_state st)
{
    long c = 0;
    for (long i = 0; i < n; i++)
        c += slots[i].state == st;
    return c;
}

static void report_ready(const slot *slots, long n, int64_t t0)
{
    long refused = 0, connected = 0;
    for (long i = 0; i < n; i++) {
        connected += slots[i].state == S_OPEN || slots[i].state == S_CLOSED;
        refused += slots[i].state == S_CLOSED && slots[i].closed_before_ready;
    }
    printf("ready t_ms=%lld attempted=%ld connected=%ld refused=%ld open=%ld\n",
           (long long)(now_ms() - t0), n, connected, refused, count_state(slots, n, S_OPEN));
    fflush(stdout);
}

static void report_done(const slot *slots, long n, int64_t t0)
{
    long later = 0, got408 = 0;
    int64_t lo = -1, hi = -1;
    for (long i = 0; i < n; i++) {
        const slot *s = &slots[i];
        if (s->state != S_CLOSED)
            continue;
        got408 += s->head_len >= 12 && memcmp(s->head, "HTTP/1.1 408", 12) == 0;
        if (s->closed_before_ready)
            continue;
        later++;
        int64_t d = s->closed_ms - s->started_ms;
        lo = lo < 0 || d < lo ? d : lo;
        hi = d > hi ? d : hi;
    }
    printf("done t_ms=%lld open=%ld closed_later=%ld got_408=%ld close_min_ms=%lld "
           "close_max_ms=%lld\n",
           (long long)(now_ms() - t0), count_state(slots, n, S_OPEN), later, got408,
           (long long)lo, (long long)hi);
    fflush(stdout);
}

#define MAX_SOURCES 16

/* The addresses of a comma-separated list of 127.0.0.x; their number, or -1. */
static int parse_sources(const char *list, struct sockaddr_in *src)
{
    int k = 0;
    const char *p = list;
    while (*p != '\0') {
        size_t len = strcspn(p, ",");
        char ip[32];
        if (k == MAX_SOURCES || len == 0 || len >= sizeof ip)
            return -1;
        memcpy(ip, p, len);
        ip[len] = '\0';
        if (loopback_addr(ip, 0, &src[k++]) != 0)
            return -1;
        p += len + (p[len] == ',');
    }
    return k;
}

static int run_hold(unsigned port, const char *src_list, long per_source, long seconds,
                    long interval_ms)
{
    struct sockaddr_in src[MAX_SOURCES], dst;
    int n_src = parse_sources(src_list, src);
    if (n_src <= 0 || loopback_addr("127.0.0.1", port, &dst) != 0) {
        fprintf(stderr, "abuse_client: '%s' is not a list of 127.0.0.x addresses\n", src_list);
        return 2;
    }
    long n = per_source * n_src;
    if (want_fds(n) != 0) {
        fprintf(stderr, "abuse_client: the descriptor limit is below %ld\n", n + 16);
        return 2;
    }
    slot *slots = calloc((size_t)n, sizeof *slots);
    struct pollfd *pfd = calloc((size_t)n, sizeof *pfd);
    long *idx = calloc((size_t)n, sizeof *idx);
    if (slots == NULL || pfd == NULL || idx == NULL)
        return 2;
    int64_t t0 = now_ms(), end = t0 + seconds * 1000, next_trickle = t0 + interval_ms;
    for (long i = 0; i < n; i++)
        slot_start(&slots[i], &src[i % n_src], &dst);
    int64_t settled = -1;
    int ready = 0;
    while (now_ms() < end) {
        int64_t t = now_ms();
        if (!ready && settled < 0 &&
            (count_state(slots, n, S_CONNECTING) == 0 || t - t0 > CONNECT_MAX_MS))
            settled = t;
        if (!ready && settled >= 0 && t - settled >= SETTLE_MS) {
            ready = 1;
            report_ready(slots, n, t0);
        }
        if (ready && count_state(slots, n, S_OPEN) + count_state(slots, n, S_CONNECTING) == 0)
            break;
        if (t >= next_trickle) {
            trickle_all(slots, n, t, ready);
            next_trickle = t + interval_ms;
        }
        int64_t wait = next_trickle - now_ms();
        poll_round(slots, n, pfd, idx, (int)(wait < 0 ? 0 : wait > 50 ? 50 : wait), ready);
    }
    if (!ready)
        report_ready(slots, n, t0);
    report_done(slots, n, t0);
    for (long i = 0; i < n; i++)
        if (slots[i].fd >= 0)
            close(slots[i].fd);
    free(slots);
    free(pfd);
    free(idx);
    return 0;
}

int main(int argc, char **argv)
{
    long port, seconds, count, interval;
    if (argc == 4 && strcmp(argv[1], "raw") == 0 && parse_int(argv[2], 1, 65535, &port) == 0 &&
        parse_int(argv[3], 1, 600, &seconds) == 0)
        return run_raw((unsigned)port, seconds);
    long limit;
    if ((argc == 8 || argc == 9) && strcmp(argv[1], "probe") == 0 &&
        parse_int(argv[2], 1, 65535, &port) == 0 && parse_int(argv[3], 1, 600, &seconds) == 0 &&
        parse_int(argv[4], 1, 60000, &interval) == 0 &&
        parse_int(argv[5], 1, 60000, &limit) == 0)
        return run_probe((unsigned)port, seconds, interval, limit, argv[6], argv[7],
                         argc == 9 ? argv[8] : NULL);
    if (argc == 7 && strcmp(argv[1], "hold") == 0 && parse_int(argv[2], 1, 65535, &port) == 0 &&
        parse_int(argv[4], 1, 100000, &count) == 0 &&
        parse_int(argv[5], 1, 600, &seconds) == 0 &&
        parse_int(argv[6], 10, 60000, &interval) == 0)
        return run_hold((unsigned)port, argv[3], count, seconds, interval);
    fprintf(stderr, "usage: abuse_client raw PORT SECONDS < request\n"
                    "       abuse_client hold PORT SRC[,SRC...] COUNT SECONDS INTERVAL_MS\n"
                    "       abuse_client probe PORT SECONDS INTERVAL_MS LIMIT_MS METHOD PATH "
                    "[BODY_FILE]\n");
    return 2;
}
