/* Test support: reference fixture reader (see fixture.h). */
#include "bench/support/fixture.h"

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FIXTURE_BYTES ((size_t)1 << 28)
#define MAX_TOKEN 128

const char *gp_fixture_dir(void)
{
    const char *env = getenv("GPSERVE_FIXTURES");
    return (env != NULL && env[0] != '\0') ? env : "tests/fixtures";
}

int gp_fixture_path(char *buf, size_t len, const char *file, gp_error *err)
{
    if (buf == NULL || file == NULL)
        return gp_error_set(err, GP_EINVAL, NULL, "gp_fixture_path: NULL argument");
    int w = snprintf(buf, len, "%s/%s", gp_fixture_dir(), file);
    if (w < 0 || (size_t)w >= len)
        return gp_error_set(err, GP_EINVAL, NULL, "fixture path too long for '%s'", file);
    return GP_OK;
}

void gp_fixture_free(gp_fixture *fx)
{
    if (fx == NULL)
        return;
    for (size_t i = 0; i < fx->count; i++)
        free(fx->blocks[i].data);
    free(fx->blocks);
    fx->blocks = NULL;
    fx->count = 0;
}

static int is_blank(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\v' || c == '\f';
}

/* Cursor over one line [p, end). */
typedef struct cursor {
    const char *p, *end;
} cursor;

/* Next whitespace-separated token of the line; 0 when none is left. */
static int next_token(cursor *c, const char **tok, size_t *tok_len)
{
    while (c->p < c->end && is_blank(*c->p))
        c->p++;
    if (c->p >= c->end)
        return 0;
    const char *s = c->p;
    while (c->p < c->end && !is_blank(*c->p))
        c->p++;
    *tok = s;
    *tok_len = (size_t)(c->p - s);
    return 1;
}

static int token_double(const char *tok, size_t len, double *out)
{
    char tmp[MAX_TOKEN];
    if (len == 0 || len >= sizeof tmp)
        return 0;
    memcpy(tmp, tok, len);
    tmp[len] = '\0';
    char *q = NULL;
    errno = 0;
    double v = strtod(tmp, &q);
    if (q != tmp + len || !isfinite(v))
        return 0;
    *out = v;
    return 1;
}

static int token_size(const char *tok, size_t len, size_t *out)
{
    if (len == 0 || len > 18)
        return 0;
    size_t v = 0;
    for (size_t i = 0; i < len; i++) {
        if (tok[i] < '0' || tok[i] > '9')
            return 0;
        v = v * 10 + (size_t)(tok[i] - '0');
    }
    *out = v;
    return 1;
}

static int valid_block_name(const char *tok, size_t len)
{
    if (len == 0 || len >= GP_FIXTURE_NAME_LEN)
        return 0;
    for (size_t i = 0; i < len; i++) {
        char c = tok[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_' || c == '-' || c == '.'))
            return 0;
    }
    return !(tok[0] >= '0' && tok[0] <= '9') && tok[0] != '-' && tok[0] != '.';
}

int gp_fixture_parse(const char *text, size_t len, const char *what, gp_fixture *fx,
                     gp_error *err)
{
    if (fx == NULL || (text == NULL && len > 0))
        return gp_error_set(err, GP_EINVAL, NULL, "gp_fixture_parse: NULL argument");
    fx->blocks = NULL;
    fx->count = 0;
    if (what == NULL)
        what = "fixture";
    size_t cap = 0;
    /* The current block while its numbers are read. */
    gp_fixture_block *cur = NULL;
    size_t need = 0, have = 0, line_no = 0;
    double *rowmajor = NULL;
    int rc = GP_OK;
    size_t pos = 0;
    while (pos < len && rc == GP_OK) {
        size_t s = pos;
        while (pos < len && text[pos] != '\n')
            pos++;
        cursor c = {text + s, text + pos};
        if (pos < len)
            pos++; /* the '\n' */
        line_no++;
        for (const char *q = c.p; q < c.end; q++)
            if (*q == '\0') {
                rc = gp_error_set(err, GP_EDATA, NULL, "%s:%zu: NUL byte", what, line_no);
                break;
            }
        if (rc != GP_OK)
            break;
        const char *tok;
        size_t tl;
        cursor peek = c;
        if (!next_token(&peek, &tok, &tl) || tok[0] == '#')
            continue; /* blank or comment line */
        if (cur == NULL) {
            /* header: name rows cols */
            const char *tn, *tr, *tc, *extra;
            size_t ln, lr, lc, le;
            size_t rows, cols;
            if (!next_token(&c, &tn, &ln) || !next_token(&c, &tr, &lr) ||
                !next_token(&c, &tc, &lc) || next_token(&c, &extra, &le) ||
                !valid_block_name(tn, ln) || !token_size(tr, lr, &rows) ||
                !token_size(tc, lc, &cols)) {
                rc = gp_error_set(err, GP_EDATA, NULL,
                                  "%s:%zu: expected a block header '<name> <rows> <cols>'", what,
                                  line_no);
                break;
            }
            if (rows == 0 || cols == 0) {
                rc = gp_error_set(err, GP_EDATA, NULL, "%s:%zu: block '%.*s' has a zero shape",
                                  what, line_no, (int)ln, tn);
                break;
            }
            /* Each number takes at least 2 bytes (digit + separator): a shape larger
             * than the text could hold is an error, not an allocation. */
            if (rows > (len + 2) / 2 || cols > (len + 2) / 2 || rows * cols > (len + 2) / 2) {
                rc = gp_error_set(err, GP_EDATA, NULL,
                                  "%s:%zu: block '%.*s' shape %zu x %zu exceeds the file", what,
                                  line_no, (int)ln, tn, rows, cols);
                break;
            }
            for (size_t b = 0; b < fx->count; b++)
                if (strlen(fx->blocks[b].name) == ln && memcmp(fx->blocks[b].name, tn, ln) == 0) {
                    rc = gp_error_set(err, GP_EDATA, NULL, "%s:%zu: block '%.*s' repeated", what,
                                      line_no, (int)ln, tn);
                    break;
                }
            if (rc != GP_OK)
                break;
            if (fx->count == cap) {
                size_t ncap = cap ? cap * 2 : 8;
                gp_fixture_block *nb = realloc(fx->blocks, ncap * sizeof *nb);
                if (nb == NULL) {
                    rc = gp_error_set(err, GP_ENOMEM, NULL, "%s: out of memory", what);
                    break;
                }
                fx->blocks = nb;
                cap = ncap;
            }
            rowmajor = malloc(rows * cols * sizeof(double));
            if (rowmajor == NULL) {
                rc = gp_error_set(err, GP_ENOMEM, NULL, "%s: out of memory", what);
                break;
            }
            cur = &fx->blocks[fx->count];
            memset(cur, 0, sizeof *cur);
            memcpy(cur->name, tn, ln);
            cur->name[ln] = '\0';
            cur->rows = rows;
            cur->cols = cols;
            need = rows * cols;
            have = 0;
            continue;
        }
        /* numbers of the current block */
        while (next_token(&c, &tok, &tl)) {
            double v;
            if (have == need) {
                rc = gp_error_set(err, GP_EDATA, NULL,
                                  "%s:%zu: block '%s' has more than %zu x %zu values", what,
                                  line_no, cur->name, cur->rows, cur->cols);
                break;
            }
            if (!token_double(tok, tl, &v)) {
                rc = gp_error_set(err, GP_EDATA, NULL,
                                  "%s:%zu: '%.*s' in block '%s' is not a finite number", what,
                                  line_no, (int)(tl > 40 ? 40 : tl), tok, cur->name);
                break;
            }
            rowmajor[have++] = v;
        }
        if (rc != GP_OK)
            break;
        if (have == need) {
            double *cm = malloc(need * sizeof(double));
            if (cm == NULL) {
                rc = gp_error_set(err, GP_ENOMEM, NULL, "%s: out of memory", what);
                break;
            }
            for (size_t i = 0; i < cur->rows; i++)
                for (size_t j = 0; j < cur->cols; j++)
                    cm[j * cur->rows + i] = rowmajor[i * cur->cols + j];
            free(rowmajor);
            rowmajor = NULL;
            cur->data = cm;
            fx->count++;
            cur = NULL;
        }
    }
    if (rc == GP_OK && cur != NULL)
        rc = gp_error_set(err, GP_EDATA, NULL,
                          "%s: block '%s' ends after %zu of its %zu x %zu values", what,
                          cur->name, have, cur->rows, cur->cols);
    if (rc == GP_OK && fx->count == 0)
        rc = gp_error_set(err, GP_EDATA, NULL, "%s: no blocks", what);
    free(rowmajor);
    if (rc != GP_OK)
        gp_fixture_free(fx);
    return rc;
}

int gp_fixture_load(const char *path, gp_fixture *fx, gp_error *err)
{
    if (fx == NULL || path == NULL)
        return gp_error_set(err, GP_EINVAL, NULL, "gp_fixture_load: NULL argument");
    fx->blocks = NULL;
    fx->count = 0;
    FILE *f = fopen(path, "rb");
    if (f == NULL)
        return gp_error_set(err, GP_EINVAL, NULL, "cannot open %s: %s", path, strerror(errno));
    size_t cap = 1 << 14, len = 0;
    char *buf = malloc(cap);
    int rc = GP_OK;
    if (buf == NULL)
        rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory reading %s", path);
    while (rc == GP_OK) {
        if (len == cap) {
            if (cap >= MAX_FIXTURE_BYTES) {
                rc = gp_error_set(err, GP_ETOOBIG, NULL, "%s is larger than %zu bytes", path,
                                  MAX_FIXTURE_BYTES);
                break;
            }
            char *nb = realloc(buf, cap * 2);
            if (nb == NULL) {
                rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory reading %s", path);
                break;
            }
            buf = nb;
            cap *= 2;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) {
            if (ferror(f))
                rc = gp_error_set(err, GP_EINVAL, NULL, "error reading %s", path);
            break;
        }
    }
    fclose(f);
    if (rc == GP_OK)
        rc = gp_fixture_parse(buf, len, path, fx, err);
    free(buf);
    return rc;
}

const gp_fixture_block *gp_fixture_find(const gp_fixture *fx, const char *name)
{
    if (fx == NULL || name == NULL)
        return NULL;
    for (size_t i = 0; i < fx->count; i++)
        if (strcmp(fx->blocks[i].name, name) == 0)
            return &fx->blocks[i];
    return NULL;
}

int gp_fixture_get_any(const gp_fixture *fx, const char *name, size_t *rows_out,
                       size_t *cols_out, const double **data, gp_error *err)
{
    const gp_fixture_block *b = gp_fixture_find(fx, name);
    if (b == NULL)
        return gp_error_set(err, GP_EINVAL, NULL, "fixture has no block '%s'",
                            name != NULL ? name : "(null)");
    if (rows_out != NULL)
        *rows_out = b->rows;
    if (cols_out != NULL)
        *cols_out = b->cols;
    if (data != NULL)
        *data = b->data;
    return GP_OK;
}

int gp_fixture_get(const gp_fixture *fx, const char *name, size_t rows, size_t cols,
                   const double **data, gp_error *err)
{
    size_t r = 0, c = 0;
    const double *p = NULL;
    int rc = gp_fixture_get_any(fx, name, &r, &c, &p, err);
    if (rc != GP_OK)
        return rc;
    if ((rows != 0 && r != rows) || (cols != 0 && c != cols))
        return gp_error_set(err, GP_EDATA, NULL, "fixture block '%s' is %zu x %zu, expected %zu x %zu",
                            name, r, c, rows, cols);
    if (data != NULL)
        *data = p;
    return GP_OK;
}

int gp_fixture_scalar(const gp_fixture *fx, const char *name, double *value, gp_error *err)
{
    const double *p = NULL;
    int rc = gp_fixture_get(fx, name, 1, 1, &p, err);
    if (rc == GP_OK && value != NULL)
        *value = p[0];
    return rc;
}
