#include "server/util.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int gp_ct_equal(const char *a, size_t alen, const char *b, size_t blen)
{
    size_t n = alen > blen ? alen : blen;
    /* Lengths differ: still compare every byte, against zeros past the end. */
    volatile unsigned diff = (unsigned)((alen ^ blen) != 0);
    for (size_t i = 0; i < n; i++) {
        /* Masks instead of branches on the data; indices are clamped so that
         * both inputs are read on every step. */
        size_t ia = i < alen ? i : 0, ib = i < blen ? i : 0;
        unsigned ma = (unsigned)-(int)(i < alen), mb = (unsigned)-(int)(i < blen);
        unsigned ca = alen ? ((unsigned char)a[ia] & ma) : 0;
        unsigned cb = blen ? ((unsigned char)b[ib] & mb) : 0;
        diff |= ca ^ cb;
    }
    return diff == 0;
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t';
}

static int lower(int c)
{
    return c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c;
}

static int prefix_nocase(const char *s, const char *prefix)
{
    for (; *prefix; s++, prefix++)
        if (lower((unsigned char)*s) != lower((unsigned char)*prefix))
            return 0;
    return 1;
}

/* The credentials of an Authorization header value of this scheme (matched
 * case-insensitively, blanks around them cut): 1 with *cred and *n, or 0 for
 * a NULL header, another scheme or no credentials. */
static int auth_credentials(const char *header, const char *scheme, const char **cred,
                            size_t *n)
{
    if (header == NULL)
        return 0;
    while (is_blank(*header))
        header++;
    size_t k = strlen(scheme);
    if (!prefix_nocase(header, scheme) || !is_blank(header[k]))
        return 0;
    const char *p = header + k;
    while (is_blank(*p))
        p++;
    size_t len = strlen(p);
    while (len > 0 && is_blank(p[len - 1]))
        len--;
    if (len == 0)
        return 0;
    *cred = p;
    *n = len;
    return 1;
}

int gp_bearer_token(const char *header, const char **tok, size_t *toklen)
{
    return auth_credentials(header, "bearer", tok, toklen);
}

/* The value of a standard base64 character, or -1. */
static int base64_value(char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* Decode src[0..n) (base64, '=' padding optional, only at the end) into
 * dst; the decoded length, or -1 when it is not base64 or does not fit in
 * size bytes. */
static long base64_decode(const char *src, size_t n, char *dst, size_t size)
{
    size_t pad = 0;
    while (pad < 2 && n > 0 && src[n - 1] == '=') {
        n--;
        pad++;
    }
    if (n % 4 == 1 || (pad > 0 && (n + pad) % 4 != 0))
        return -1;
    size_t o = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = base64_value(src[i]);
        if (v < 0)
            return -1;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            if (o >= size)
                return -1;
            dst[o++] = (char)((acc >> bits) & 0xffu);
        }
    }
    /* The bits left over must be zero (one encoding per byte string). */
    if ((acc & ((1u << bits) - 1u)) != 0)
        return -1;
    return (long)o;
}

int gp_basic_password(const char *header, char *buf, size_t size, const char **pw,
                      size_t *pwlen)
{
    const char *p = NULL;
    size_t n = 0;
    if (buf == NULL || size == 0 || !auth_credentials(header, "basic", &p, &n))
        return 0;
    long len = base64_decode(p, n, buf, size - 1);
    if (len < 0)
        return 0;
    buf[len] = '\0';
    const char *colon = memchr(buf, ':', (size_t)len);
    if (colon == NULL)
        return 0;
    *pw = colon + 1;
    *pwlen = (size_t)(buf + len - *pw);
    return 1;
}

int gp_hex_digit(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

long gp_percent_decode(const char *src, size_t len, char *dst, size_t dstsize)
{
    size_t o = 0;
    for (size_t i = 0; i < len; i++) {
        char c = src[i];
        if (c == '%') {
            if (i + 2 >= len)
                return -1;
            int hi = gp_hex_digit(src[i + 1]), lo = gp_hex_digit(src[i + 2]);
            if (hi < 0 || lo < 0)
                return -1;
            c = (char)(hi * 16 + lo);
            if (c == '\0')
                return -1;
            i += 2;
        } else if (c == '\0') {
            return -1;
        }
        if (o + 1 >= dstsize)
            return -1;
        dst[o++] = c;
    }
    if (dstsize == 0)
        return -1;
    dst[o] = '\0';
    return (long)o;
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

void gp_job_id_generate(char out[33])
{
    static const char hex[] = "0123456789abcdef";
    static atomic_uint_fast64_t counter;
    unsigned char raw[16];
    int ok = 0;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        size_t got = 0;
        while (got < sizeof raw) {
            ssize_t r = read(fd, raw + got, sizeof raw - got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0)
                break;
            got += (size_t)r;
        }
        close(fd);
        ok = got == sizeof raw;
    }
    if (!ok) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        uint64_t seed = (uint64_t)ts.tv_sec * 1000000000ULL + (uint64_t)ts.tv_nsec;
        seed ^= (uint64_t)getpid() << 32;
        seed ^= atomic_fetch_add(&counter, 1) * 0xD1B54A32D192ED03ULL;
        uint64_t a = splitmix64(&seed), b = splitmix64(&seed);
        memcpy(raw, &a, 8);
        memcpy(raw + 8, &b, 8);
    }
    for (size_t i = 0; i < sizeof raw; i++) {
        out[2 * i] = hex[raw[i] >> 4];
        out[2 * i + 1] = hex[raw[i] & 15];
    }
    out[32] = '\0';
}

double gp_monotonic_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

uint64_t gp_monotonic_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000ULL + (uint64_t)ts.tv_nsec / 1000ULL;
}

void gp_utc_now(char *out, size_t size)
{
    time_t t = time(NULL);
    struct tm tm;
    if (gmtime_r(&t, &tm) == NULL || strftime(out, size, "%Y-%m-%dT%H:%M:%SZ", &tm) == 0) {
        if (size)
            out[0] = '\0';
    }
}

int gp_media_type_is(const char *content_type, const char *type)
{
    if (content_type == NULL)
        return 0;
    const char *p = content_type;
    while (is_blank(*p))
        p++;
    size_t n = 0;
    while (p[n] && p[n] != ';')
        n++;
    while (n > 0 && is_blank(p[n - 1]))
        n--;
    size_t tl = strlen(type);
    if (n != tl)
        return 0;
    for (size_t i = 0; i < n; i++)
        if (lower((unsigned char)p[i]) != lower((unsigned char)type[i]))
            return 0;
    return 1;
}

/* Append the UTF-8 encoding of cp to out (bounded). */
static void put_utf8(char *out, size_t size, size_t *o, unsigned cp)
{
    unsigned char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (unsigned char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (unsigned char)(0xC0 | (cp >> 6));
        b[1] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (unsigned char)(0xE0 | (cp >> 12));
        b[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        b[0] = (unsigned char)(0xF0 | (cp >> 18));
        b[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        b[3] = (unsigned char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    if (*o + n < size) {
        memcpy(out + *o, b, n);
        *o += n;
    }
}

static int hex4(const char *p, const char *end, unsigned *v)
{
    if (end - p < 4)
        return 0;
    unsigned r = 0;
    for (int i = 0; i < 4; i++) {
        int h = gp_hex_digit(p[i]);
        if (h < 0)
            return 0;
        r = r * 16 + (unsigned)h;
    }
    *v = r;
    return 1;
}

int gp_json_find_string(const char *json, size_t len, const char *key, char *out, size_t size)
{
    if (size == 0)
        return 0;
    out[0] = '\0';
    if (json == NULL)
        return 0;
    size_t kl = strlen(key);
    const char *end = json + len;
    for (const char *p = json; p + kl + 2 <= end; p++) {
        if (*p != '"' || memcmp(p + 1, key, kl) != 0 || p[kl + 1] != '"')
            continue;
        const char *q = p + kl + 2;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r'))
            q++;
        if (q >= end || *q != ':')
            continue;
        q++;
        while (q < end && (*q == ' ' || *q == '\t' || *q == '\n' || *q == '\r'))
            q++;
        if (q >= end || *q != '"')
            continue;
        q++;
        size_t o = 0;
        while (q < end && *q != '"') {
            char c = *q++;
            if (c != '\\') {
                if (o + 1 < size)
                    out[o++] = c;
                continue;
            }
            if (q >= end)
                break;
            char e = *q++;
            unsigned cp;
            switch (e) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'u':
                if (!hex4(q, end, &cp))
                    goto done;
                q += 4;
                if (cp >= 0xD800 && cp < 0xDC00 && end - q >= 6 && q[0] == '\\' && q[1] == 'u') {
                    unsigned lo;
                    if (hex4(q + 2, end, &lo) && lo >= 0xDC00 && lo < 0xE000) {
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                        q += 6;
                    }
                }
                put_utf8(out, size, &o, cp);
                continue;
            default: c = e; break; /* \" \\ \/ */
            }
            if (o + 1 < size)
                out[o++] = c;
        }
    done:
        /* Do not cut a UTF-8 sequence in half at the end. */
        if (o + 1 >= size) {
            while (o > 0 && ((unsigned char)out[o - 1] & 0xC0) == 0x80)
                o--;
            if (o > 0 && ((unsigned char)out[o - 1] & 0xC0) == 0xC0)
                o--;
        }
        out[o] = '\0';
        return 1;
    }
    return 0;
}

void gp_log(const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf - 1, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    size_t len = (size_t)n < sizeof buf - 1 ? (size_t)n : sizeof buf - 2;
    buf[len++] = '\n';
    size_t off = 0;
    while (off < len) {
        ssize_t w = write(STDERR_FILENO, buf + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            break;
        off += (size_t)w;
    }
}

double gp_wall_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int gp_cond_init_monotonic(pthread_cond_t *cond)
{
    pthread_condattr_t ca;
    if (pthread_condattr_init(&ca) != 0)
        return -1;
    int rc = pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    if (rc == 0)
        rc = pthread_cond_init(cond, &ca);
    pthread_condattr_destroy(&ca);
    return rc == 0 ? 0 : -1;
}

void gp_cond_wait_us(pthread_cond_t *cond, pthread_mutex_t *mutex, uint64_t us)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    ts.tv_sec += (time_t)(us / 1000000u);
    ts.tv_nsec += (long)(us % 1000000u) * 1000L;
    ts.tv_sec += ts.tv_nsec / 1000000000L;
    ts.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(cond, mutex, &ts);
}

void gp_cond_wait_ms(pthread_cond_t *cond, pthread_mutex_t *mutex, long ms)
{
    gp_cond_wait_us(cond, mutex, ms > 0 ? (uint64_t)ms * 1000u : 0);
}

uint64_t gp_hash_bytes(const void *data, size_t n)
{
    const unsigned char *b = data;
    uint64_t h = 1469598103934665603u; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= b[i];
        h *= 1099511628211u;
    }
    /* FNV's low bits depend only on the inputs' low bits, and tables index
     * by the low bits: mix them (MurmurHash3's finaliser) */
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdu;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53u;
    h ^= h >> 33;
    return h;
}
