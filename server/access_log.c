#include "server/access_log.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct gp_access_log {
    int fd;
    int own_fd; /* opened here (not standard output) */
    pthread_mutex_t lock;
    pthread_cond_t wake;
    char *buf; /* (lock) lines waiting for the writer */
    size_t len, cap;
    uint64_t dropped; /* (lock) lines dropped since the last write */
    int stop;         /* (lock) */
    pthread_t writer;
};

/* ---- request ids ---- */

static uint64_t splitmix64(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* A process-wide seed from /dev/urandom (the clock and pid when it cannot
 * be read), then a counter through splitmix64: ids never repeat within a
 * process and cannot be guessed from another daemon's. */
static uint64_t next_random(void)
{
    static atomic_uint_fast64_t seed, counter;
    uint64_t s = atomic_load(&seed);
    if (s == 0) {
        uint64_t fresh = 0;
        int fd = open("/dev/urandom", O_RDONLY);
        if (fd < 0 || read(fd, &fresh, sizeof fresh) != (ssize_t)sizeof fresh) {
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            fresh = splitmix64((uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^
                               (uint64_t)getpid());
        }
        if (fd >= 0)
            close(fd);
        fresh |= 1;
        uint_fast64_t expected = 0;
        atomic_compare_exchange_strong(&seed, &expected, fresh);
        s = atomic_load(&seed);
    }
    return splitmix64(s + atomic_fetch_add(&counter, 1) * 0x9e3779b97f4a7c15ULL);
}

static int sane_request_id(const char *h)
{
    size_t n = 0;
    for (; h[n]; n++) {
        unsigned char c = (unsigned char)h[n];
        /* printable, no blank (log lines split on it), nothing JSON escapes */
        if (c <= 0x20 || c >= 0x7f || c == '"' || c == '\\' || n >= GP_REQUEST_ID_MAX)
            return 0;
    }
    return n > 0;
}

void gp_request_id_choose(const char *header, char out[GP_REQUEST_ID_SIZE])
{
    if (header && sane_request_id(header)) {
        memcpy(out, header, strlen(header) + 1);
        return;
    }
    /* 16 hex digits by hand: snprintf's "%016llx" cost ~500 instructions,
     * a tenth of a /healthz */
    static const char hex[] = "0123456789abcdef";
    uint64_t r = next_random();
    for (int i = 15; i >= 0; i--, r >>= 4)
        out[i] = hex[r & 15];
    out[16] = '\0';
}

/* ---- lines ---- */

/* The line is built by hand rather than by snprintf: at about 16,000
 * instructions a line snprintf cost more than the rest of a cheap request's
 * handling (callgrind), and this costs a few hundred. Whatever the size of
 * out, the result is the line's first size - 1 bytes and a NUL. */
typedef struct line {
    char *out;
    size_t size; /* >= 1 */
    size_t n;    /* bytes written, < size */
} line_buf;

static void put(line_buf *l, const char *s, size_t len)
{
    size_t room = l->size - 1 - l->n;
    if (len > room)
        len = room;
    memcpy(l->out + l->n, s, len);
    l->n += len;
}

static void put_str(line_buf *l, const char *s) { put(l, s, strlen(s)); }

static void put_uint(line_buf *l, unsigned long long v)
{
    char digits[24];
    size_t i = sizeof digits;
    do {
        digits[--i] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    put(l, digits + i, sizeof digits - i);
}

/* v as exactly width decimal digits (0 <= v < 10^width). */
static void put_fixed(line_buf *l, int v, int width)
{
    char digits[8];
    for (int i = width - 1; i >= 0; i--, v /= 10)
        digits[i] = (char)('0' + v % 10);
    put(l, digits, (size_t)width);
}

/* s as a JSON string, or null. */
static void put_json(line_buf *l, const char *s)
{
    if (s == NULL) {
        put(l, "null", 4);
        return;
    }
    static const char hex[] = "0123456789abcdef";
    put(l, "\"", 1);
    for (const char *p = s; *p; p++) {
        const char *run = p; /* the characters that need no escape, at once */
        while (*p && *p != '"' && *p != '\\' && (unsigned char)*p >= 0x20 && *p != 0x7f)
            p++;
        put(l, run, (size_t)(p - run));
        if (*p == '\0')
            break;
        unsigned char c = (unsigned char)*p;
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            put(l, esc, 2);
        } else {
            char esc[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
            put(l, esc, 6);
        }
    }
    put(l, "\"", 1);
}

size_t gp_access_log_format(const gp_access_entry *e, long long sec, int ms, char *out,
                            size_t size)
{
    if (size == 0)
        return 0;
    line_buf l = {out, size, 0};
    time_t t = (time_t)sec;
    struct tm tm;
    gmtime_r(&t, &tm);
    put_str(&l, "{\"time\":\"");
    put_fixed(&l, tm.tm_year + 1900, 4);
    put(&l, "-", 1);
    put_fixed(&l, tm.tm_mon + 1, 2);
    put(&l, "-", 1);
    put_fixed(&l, tm.tm_mday, 2);
    put(&l, "T", 1);
    put_fixed(&l, tm.tm_hour, 2);
    put(&l, ":", 1);
    put_fixed(&l, tm.tm_min, 2);
    put(&l, ":", 1);
    put_fixed(&l, tm.tm_sec, 2);
    put(&l, ".", 1);
    put_fixed(&l, ms, 3);
    put_str(&l, "Z\",\"request_id\":");
    put_json(&l, e->request_id);
    static const char *const keys[] = {",\"client\":", ",\"key\":", ",\"method\":",
                                       ",\"route\":", ",\"model\":"};
    const char *vals[] = {e->client, e->key_name, e->method, e->route, e->model};
    for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++) {
        put_str(&l, keys[k]);
        put_json(&l, vals[k]);
    }
    put_str(&l, ",\"version\":");
    if (e->version > 0)
        put_uint(&l, (unsigned long long)e->version);
    else
        put(&l, "null", 4);
    put_str(&l, ",\"status\":");
    put_uint(&l, (unsigned long long)(e->status > 0 ? e->status : 0));
    put_str(&l, ",\"bytes\":");
    put_uint(&l, (unsigned long long)e->bytes);
    put_str(&l, ",\"duration_us\":");
    put_uint(&l, (unsigned long long)e->duration_us);
    put(&l, "}\n", 2);
    out[l.n] = '\0';
    return l.n;
}

/* ---- the writer ---- */

static void write_all(int fd, const char *p, size_t len)
{
    while (len > 0) {
        ssize_t w = write(fd, p, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return; /* a full or failed disk loses log lines, never requests */
        p += w;
        len -= (size_t)w;
    }
}

/* Take what is buffered (the caller holds the lock), write it unlocked. */
static void flush_locked(gp_access_log *log)
{
    char *data = log->buf;
    size_t len = log->len;
    uint64_t dropped = log->dropped;
    if (len == 0 && dropped == 0)
        return;
    log->buf = NULL;
    log->len = log->cap = 0;
    log->dropped = 0;
    pthread_mutex_unlock(&log->lock);
    write_all(log->fd, data, len);
    if (dropped) {
        char line[96];
        int n = snprintf(line, sizeof line, "{\"dropped\":%llu}\n", (unsigned long long)dropped);
        write_all(log->fd, line, (size_t)n);
    }
    free(data);
    pthread_mutex_lock(&log->lock);
}

static void *writer_main(void *arg)
{
    gp_access_log *log = arg;
    pthread_mutex_lock(&log->lock);
    while (!log->stop) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += GP_ACCESS_LOG_FLUSH_MS * 1000000L;
        until.tv_sec += until.tv_nsec / 1000000000L;
        until.tv_nsec %= 1000000000L;
        if (log->len < GP_ACCESS_LOG_WAKE_BYTES)
            pthread_cond_timedwait(&log->wake, &log->lock, &until);
        flush_locked(log);
    }
    flush_locked(log);
    pthread_mutex_unlock(&log->lock);
    return NULL;
}

gp_access_log *gp_access_log_open(const char *path, char *msg, size_t msg_size)
{
    gp_access_log *log = calloc(1, sizeof *log);
    if (log == NULL) {
        snprintf(msg, msg_size, "out of memory");
        return NULL;
    }
    log->own_fd = strcmp(path, "-") != 0;
    log->fd = log->own_fd ? open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640)
                          : STDOUT_FILENO;
    if (log->fd < 0) {
        snprintf(msg, msg_size, "cannot open the access log '%s': %s", path, strerror(errno));
        free(log);
        return NULL;
    }
    pthread_mutex_init(&log->lock, NULL);
    pthread_cond_init(&log->wake, NULL);
    if (pthread_create(&log->writer, NULL, writer_main, log) != 0) {
        snprintf(msg, msg_size, "cannot start the access log's writer");
        if (log->own_fd)
            close(log->fd);
        pthread_cond_destroy(&log->wake);
        pthread_mutex_destroy(&log->lock);
        free(log);
        return NULL;
    }
    return log;
}

void gp_access_log_close(gp_access_log *log)
{
    if (log == NULL)
        return;
    pthread_mutex_lock(&log->lock);
    log->stop = 1;
    pthread_cond_signal(&log->wake);
    pthread_mutex_unlock(&log->lock);
    pthread_join(log->writer, NULL);
    if (log->own_fd)
        close(log->fd);
    pthread_cond_destroy(&log->wake);
    pthread_mutex_destroy(&log->lock);
    free(log->buf);
    free(log);
}

/* Append line to the buffer; 0, or -1 when it is full or memory is short. */
static int append_locked(gp_access_log *log, const char *line, size_t n)
{
    if (log->len + n > GP_ACCESS_LOG_MAX_BYTES)
        return -1;
    if (log->len + n > log->cap) {
        size_t cap = log->cap ? log->cap * 2 : GP_ACCESS_LOG_WAKE_BYTES * 2;
        while (cap < log->len + n)
            cap *= 2;
        char *bigger = realloc(log->buf, cap);
        if (bigger == NULL)
            return -1;
        log->buf = bigger;
        log->cap = cap;
    }
    memcpy(log->buf + log->len, line, n);
    log->len += n;
    return 0;
}

void gp_access_log_write(gp_access_log *log, const gp_access_entry *e)
{
    if (log == NULL)
        return;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    char line[1024];
    size_t n = gp_access_log_format(e, (long long)ts.tv_sec, (int)(ts.tv_nsec / 1000000), line,
                                    sizeof line);
    pthread_mutex_lock(&log->lock);
    if (append_locked(log, line, n) != 0)
        log->dropped++;
    else if (log->len >= GP_ACCESS_LOG_WAKE_BYTES)
        pthread_cond_signal(&log->wake);
    pthread_mutex_unlock(&log->lock);
}
