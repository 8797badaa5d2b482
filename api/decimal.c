/* Decimal numbers as spreadsheets write them, for CSV cells and the scalar
 * query parameters of a CSV fit: an optional sign, digits with an optional
 * decimal point (at least one digit, before or after it), an optional exponent
 * (e or E, an optional sign, digits). strtod alone reads more than that:
 * hexadecimal ("0x10" is 16, "0x1p4" too), "inf", "infinity" and "nan", which
 * no spreadsheet means as numbers.
 *
 * The scan that checks the form also gathers the digits, so that the common
 * cell (at most 19 significant digits whose value is at most 2^53, and a
 * decimal exponent within +-22) is converted without strtod: both the digits
 * and the power of ten are then exact doubles, and one IEEE multiplication or
 * division rounds their product correctly (Clinger's fast path), i.e. gives
 * the very double strtod gives. Everything else goes to strtod. CSV fits are
 * the bulk upload path; this keeps them as fast as before the check. */
#include <float.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

/* Exponents beyond this saturate: the value is 0 or infinite long before. */
#define EXP_CAP 100000
/* Fallback copies this long stay on the stack. */
#define STACK_COPY 128

typedef struct decimal {
    uint64_t mant; /* the digits, leading zeros dropped */
    int exp10;     /* value = mant * 10^exp10 when !overflow */
    int neg, overflow;
} decimal;

static int is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static void add_digit(decimal *d, char c)
{
    if (d->mant > (UINT64_MAX - 9) / 10)
        d->overflow = 1; /* more than 19 digits: strtod rounds them */
    else
        d->mant = d->mant * 10 + (uint64_t)(c - '0');
}

/* The exponent part at s[*i] ("e", optional sign, digits): 0, or -1 when malformed. */
static int scan_exponent(const char *s, size_t len, size_t *i, int *exp10)
{
    size_t k = *i + 1;
    int neg = 0;
    if (k < len && (s[k] == '+' || s[k] == '-'))
        neg = s[k++] == '-';
    size_t first = k;
    int e = 0;
    for (; k < len && is_digit(s[k]); k++)
        if (e < EXP_CAP)
            e = e * 10 + (s[k] - '0');
    if (k == first)
        return -1;
    *exp10 += neg ? -e : e;
    *i = k;
    return 0;
}

/* 0 when s[0..len) has the decimal form (d filled), -1 otherwise. */
static int scan(const char *s, size_t len, decimal *d)
{
    size_t i = 0, digits = 0;
    memset(d, 0, sizeof *d);
    if (i < len && (s[i] == '+' || s[i] == '-'))
        d->neg = s[i++] == '-';
    for (; i < len && is_digit(s[i]); i++, digits++)
        add_digit(d, s[i]);
    if (i < len && s[i] == '.')
        for (i++; i < len && is_digit(s[i]); i++, digits++) {
            add_digit(d, s[i]);
            if (!d->overflow)
                d->exp10--;
        }
    if (digits == 0)
        return -1;
    if (i < len && (s[i] == 'e' || s[i] == 'E') && scan_exponent(s, len, &i, &d->exp10))
        return -1;
    return i == len ? 0 : -1;
}

/* mant * 10^exp10 exactly rounded, when the fast path applies: 1, else 0. */
static int fast_value(const decimal *d, double *v)
{
#if FLT_EVAL_METHOD == 0 /* doubles computed as doubles (not x87's extended precision) */
    static const double pow10[23] = {1e0,  1e1,  1e2,  1e3,  1e4,  1e5,  1e6,  1e7,
                                     1e8,  1e9,  1e10, 1e11, 1e12, 1e13, 1e14, 1e15,
                                     1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};
    if (d->overflow || d->mant > (UINT64_C(1) << 53) || d->exp10 < -22 || d->exp10 > 22)
        return 0;
    double m = (double)d->mant;
    m = d->exp10 < 0 ? m / pow10[-d->exp10] : m * pow10[d->exp10];
    *v = d->neg ? -m : m;
    return 1;
#else
    (void)d;
    (void)v;
    return 0;
#endif
}

/* strtod on a NUL-terminated copy (s need not be terminated). */
static double slow_value(const char *s, size_t len)
{
    char stack[STACK_COPY];
    char *buf = len < sizeof stack ? stack : malloc(len + 1);
    if (buf == NULL)
        return strtod("nan", NULL); /* out of memory: "not finite" */
    memcpy(buf, s, len);
    buf[len] = '\0';
    double v = strtod(buf, NULL);
    if (buf != stack)
        free(buf);
    return v;
}

int gp_decimal_parse(const char *s, size_t len, double *v)
{
    decimal d;
    if (scan(s, len, &d))
        return -1;
    if (!fast_value(&d, v))
        *v = slow_value(s, len);
    return 0;
}
