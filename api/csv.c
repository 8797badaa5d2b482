/* The CSV reader of fit requests: a header row, then rows of numbers; the
 * target is the last column or the one named by ?target= (header name or
 * 0-based index). Separators are commas; LF or CRLF line ends; blank lines at
 * the end are ignored; quoted fields are not supported and rejected. Every
 * cell must be a finite number (strtod consuming the whole cell, surrounding
 * blanks allowed). Errors name "row 12, column 'cement'" (data rows counted
 * from 1, the header not counted) and the field "X[11][0]" or "y[11]". */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

#define CSV_MAX_COLUMNS 100000
#define CSV_NAME_SHOWN 40

typedef struct line {
    const char *p;
    size_t len;
} line;

/* Next line of [*pos, end): without its "\n" or "\r\n". */
static int next_line(const char **pos, const char *end, line *out)
{
    if (*pos >= end)
        return 0;
    const char *s = *pos;
    const char *nl = memchr(s, '\n', (size_t)(end - s));
    const char *e = nl ? nl : end;
    *pos = nl ? nl + 1 : end;
    if (e > s && e[-1] == '\r')
        e--;
    out->p = s;
    out->len = (size_t)(e - s);
    return 1;
}

static int blank(const line *l)
{
    for (size_t i = 0; i < l->len; i++)
        if (l->p[i] != ' ' && l->p[i] != '\t')
            return 0;
    return 1;
}

static size_t count_cells(const line *l)
{
    size_t n = 1;
    for (size_t i = 0; i < l->len; i++)
        n += l->p[i] == ',';
    return n;
}

static void trim(const char **s, size_t *n)
{
    while (*n && (**s == ' ' || **s == '\t')) {
        (*s)++;
        (*n)--;
    }
    while (*n && ((*s)[*n - 1] == ' ' || (*s)[*n - 1] == '\t'))
        (*n)--;
}

/* Column names of the header (pointers into the body, lengths). */
typedef struct header {
    const char **name;
    size_t *len;
    size_t n;
} header;

static void header_free(header *h)
{
    free(h->name);
    free(h->len);
}

static int parse_header(const line *l, header *h, gp_error *err)
{
    size_t n = count_cells(l);
    if (n > CSV_MAX_COLUMNS)
        return gp_error_set(err, GP_ETOOBIG, "X", "the CSV header has %zu columns; the limit is %d",
                            n, CSV_MAX_COLUMNS);
    h->name = malloc(n * sizeof *h->name);
    h->len = malloc(n * sizeof *h->len);
    h->n = n;
    if (h->name == NULL || h->len == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    const char *s = l->p, *end = l->p + l->len;
    for (size_t c = 0; c < n; c++) {
        const char *comma = memchr(s, ',', (size_t)(end - s));
        const char *e = comma ? comma : end;
        const char *name = s;
        size_t len = (size_t)(e - s);
        trim(&name, &len);
        if (memchr(name, '"', len))
            return gp_error_set(err, GP_EDATA, "X",
                                "the CSV header has a quoted field (column %zu); quoted fields "
                                "are not supported",
                                c);
        h->name[c] = name;
        h->len[c] = len;
        s = comma ? comma + 1 : end;
    }
    return GP_OK;
}

static int find_target(const header *h, const char *target, size_t *col, gp_error *err)
{
    if (target == NULL) {
        *col = h->n - 1;
        return GP_OK;
    }
    size_t tlen = strlen(target);
    for (size_t c = 0; c < h->n; c++)
        if (h->len[c] == tlen && memcmp(h->name[c], target, tlen) == 0) {
            *col = c;
            return GP_OK;
        }
    char *end = NULL;
    errno = 0;
    unsigned long long idx = tlen ? strtoull(target, &end, 10) : 0;
    if (tlen && target[0] >= '0' && target[0] <= '9' && *end == '\0' && errno == 0) {
        if (idx < h->n) {
            *col = (size_t)idx;
            return GP_OK;
        }
        return gp_error_set(err, GP_EINVAL, "target",
                            "target column %llu is out of range: the CSV has %zu columns", idx,
                            h->n);
    }
    return gp_error_set(err, GP_EINVAL, "target",
                        "target '%.*s' is neither a column of the CSV header nor a column index",
                        CSV_NAME_SHOWN, target);
}

static int cell_error(const header *h, size_t row, size_t col, size_t target, size_t xcol,
                      const char *cell, size_t len, const char *why, gp_error *err)
{
    char field[GP_ERROR_FIELD_LEN];
    if (col == target)
        snprintf(field, sizeof field, "y[%zu]", row);
    else
        snprintf(field, sizeof field, "X[%zu][%zu]", row, xcol);
    int nl = h->len[col] > CSV_NAME_SHOWN ? CSV_NAME_SHOWN : (int)h->len[col];
    int cl = len > 24 ? 24 : (int)len;
    return gp_error_set(err, GP_EDATA, field, "row %zu, column '%.*s': '%.*s' %s", row + 1, nl,
                        h->name[col], cl, cell, why);
}

int gp_csv_parse(const char *body, size_t len, const char *target, size_t max_rows, double **X,
                 double **y, size_t *n_out, size_t *d_out, gp_error *err)
{
    *X = NULL;
    *y = NULL;
    if (body == NULL || len == 0)
        return gp_error_set(err, GP_EDATA, "X", "the CSV body is empty");
    if (memchr(body, '\0', len))
        return gp_error_set(err, GP_EDATA, "X", "the CSV body contains a NUL byte");
    const char *pos = body, *end = body + len;
    if (len >= 3 && memcmp(body, "\xEF\xBB\xBF", 3) == 0)
        pos += 3; /* UTF-8 byte order mark */
    line hl;
    if (!next_line(&pos, end, &hl) || blank(&hl))
        return gp_error_set(err, GP_EDATA, "X", "the CSV has no header row");
    header h = {NULL, NULL, 0};
    int rc = parse_header(&hl, &h, err);
    size_t tcol = 0;
    if (rc == GP_OK)
        rc = find_target(&h, target, &tcol, err);
    if (rc == GP_OK && h.n < 2)
        rc = gp_error_set(err, GP_EDATA, "X",
                          "the CSV has one column: no input columns besides the target");
    if (rc) {
        header_free(&h);
        return rc;
    }
    /* Count data rows (a blank line ends the data; only blank lines may follow). */
    size_t rows = 0;
    {
        const char *p = pos;
        line l;
        int ended = 0;
        while (next_line(&p, end, &l)) {
            if (blank(&l)) {
                ended = 1;
                continue;
            }
            if (ended) {
                header_free(&h);
                return gp_error_set(err, GP_EDATA, "X",
                                    "row %zu of the CSV follows a blank line", rows + 1);
            }
            rows++;
        }
    }
    if (rows == 0) {
        header_free(&h);
        return gp_error_set(err, GP_EDATA, "X", "the CSV has a header but no data rows");
    }
    if (rows > max_rows) {
        header_free(&h);
        return gp_error_set(err, GP_ETOOBIG, "X",
                            "the CSV has %zu rows; the limit is max_points = %zu", rows,
                            max_rows);
    }
    size_t d = h.n - 1;
    double *Xm = NULL, *yv = malloc(rows * sizeof *yv);
    if (d <= SIZE_MAX / sizeof(double) / rows)
        Xm = malloc(rows * d * sizeof *Xm);
    if (Xm == NULL || yv == NULL) {
        free(Xm);
        free(yv);
        header_free(&h);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory for %zu x %zu values", rows,
                            d);
    }
    char buf[64];
    line l;
    for (size_t r = 0; r < rows && rc == GP_OK; r++) {
        next_line(&pos, end, &l);
        size_t cells = count_cells(&l);
        if (cells != h.n) {
            char field[GP_ERROR_FIELD_LEN];
            snprintf(field, sizeof field, "X[%zu]", r);
            rc = gp_error_set(err, GP_EDATA, field, "row %zu has %zu cells; the header has %zu",
                              r + 1, cells, h.n);
            break;
        }
        const char *s = l.p, *le = l.p + l.len;
        for (size_t c = 0, xc = 0; c < h.n; c++) {
            const char *comma = memchr(s, ',', (size_t)(le - s));
            const char *e = comma ? comma : le;
            const char *cs = s;
            size_t cl = (size_t)(e - s);
            s = comma ? comma + 1 : le;
            trim(&cs, &cl);
            double v = 0.0;
            const char *why = NULL;
            if (cl == 0)
                why = "is empty";
            else if (memchr(cs, '"', cl))
                why = "is quoted; quoted fields are not supported";
            else if (cl >= sizeof buf)
                why = "is not a number";
            else {
                memcpy(buf, cs, cl);
                buf[cl] = '\0';
                char *stop = NULL;
                v = strtod(buf, &stop);
                if (stop != buf + cl)
                    why = "is not a number";
                else if (!isfinite(v))
                    why = "is not a finite number";
            }
            if (why) {
                rc = cell_error(&h, r, c, tcol, xc, cs, cl, why, err);
                break;
            }
            if (c == tcol)
                yv[r] = v;
            else
                Xm[xc++ * rows + r] = v;
        }
    }
    header_free(&h);
    if (rc) {
        free(Xm);
        free(yv);
        return rc;
    }
    *X = Xm;
    *y = yv;
    *n_out = rows;
    *d_out = d;
    return GP_OK;
}
