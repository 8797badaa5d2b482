/* A growing buffer and a small JSON writer for the large responses (predict,
 * sample): snprintf("%.17g") into one buffer, no jansson tree per number. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

void gp_buf_init(gp_buf *b)
{
    b->data = NULL;
    b->len = 0;
    b->cap = 0;
    b->failed = 0;
}

void gp_buf_free(gp_buf *b)
{
    free(b->data);
    gp_buf_init(b);
}

int gp_buf_reserve(gp_buf *b, size_t extra)
{
    if (b->failed)
        return -1;
    if (extra > SIZE_MAX / 2 - b->len) {
        b->failed = 1;
        return -1;
    }
    size_t need = b->len + extra + 1;
    if (need <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->data, cap);
    if (p == NULL) {
        b->failed = 1;
        return -1;
    }
    b->data = p;
    b->cap = cap;
    return 0;
}

void gp_buf_put(gp_buf *b, const char *s, size_t n)
{
    if (gp_buf_reserve(b, n))
        return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void gp_buf_puts(gp_buf *b, const char *s)
{
    gp_buf_put(b, s, strlen(s));
}

void gp_buf_printf(gp_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char small[256];
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        gp_buf_put(b, small, (size_t)n);
        return;
    }
    if (gp_buf_reserve(b, (size_t)n))
        return;
    va_start(ap, fmt);
    vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

/* Length of a valid UTF-8 sequence at s (0 when invalid). */
static size_t utf8_len(const unsigned char *s)
{
    unsigned c = s[0];
    size_t n;
    unsigned min;
    if (c < 0x80)
        return 1;
    if ((c & 0xE0) == 0xC0) {
        n = 2;
        min = 0x80;
    } else if ((c & 0xF0) == 0xE0) {
        n = 3;
        min = 0x800;
    } else if ((c & 0xF8) == 0xF0) {
        n = 4;
        min = 0x10000;
    } else
        return 0;
    unsigned cp = c & (0x7Fu >> n);
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3Fu);
    }
    if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return n;
}

void gp_buf_json_string(gp_buf *b, const char *s)
{
    gp_buf_put(b, "\"", 1);
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned char c = *p;
        if (c == '"' || c == '\\') {
            char esc[2] = {'\\', (char)c};
            gp_buf_put(b, esc, 2);
            p++;
        } else if (c < 0x20) {
            gp_buf_printf(b, "\\u%04x", c);
            p++;
        } else if (c < 0x80) {
            gp_buf_put(b, (const char *)p, 1);
            p++;
        } else {
            size_t n = utf8_len(p);
            if (n == 0) {
                gp_buf_puts(b, "\\ufffd"); /* invalid byte: the replacement character */
                p++;
            } else {
                gp_buf_put(b, (const char *)p, n);
                p += n;
            }
        }
    }
    gp_buf_put(b, "\"", 1);
}

void gp_buf_json_number(gp_buf *b, double v)
{
    if (!isfinite(v)) {
        gp_buf_put(b, "null", 4);
        return;
    }
    if (gp_buf_reserve(b, 32))
        return;
    int n = snprintf(b->data + b->len, 32, "%.17g", v);
    b->len += (size_t)n;
}

void gp_buf_json_array(gp_buf *b, const double *v, size_t n, size_t stride)
{
    /* At most 24 characters per "%.17g" number plus a comma. */
    if (n < SIZE_MAX / 32)
        gp_buf_reserve(b, n * 25 + 2);
    gp_buf_put(b, "[", 1);
    for (size_t i = 0; i < n; i++) {
        if (i)
            gp_buf_put(b, ",", 1);
        gp_buf_json_number(b, v[i * stride]);
    }
    gp_buf_put(b, "]", 1);
}

void gp_format_shortest(double v, char *out, size_t len)
{
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, len, "%.*g", prec, v);
        if (strtod(out, NULL) == v)
            return;
    }
}
