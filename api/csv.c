/* The CSV reader of fit requests, RFC 4180: a header row, then rows of
 * numbers; the target is the last column or the one named by ?target= (header
 * name or 0-based index). Fields are separated by commas; records end with LF
 * or CRLF; a field may be quoted ("a, b"), with "" standing for a quote inside
 * it and line breaks allowed inside the quotes; a UTF-8 byte order mark is
 * skipped; blank lines at the end are ignored. This reads what R's write.csv,
 * Python's csv module and spreadsheets write. Every data cell must be a finite
 * decimal number, quoted or not (gp_decimal_parse: no hexadecimal, "inf" or
 * "nan", which strtod would read; surrounding blanks allowed, as spreadsheets
 * trim them; an empty cell is refused). Header names must differ (the target
 * is chosen by name). Errors name "row 12, column 'cement'" (data rows counted from 1,
 * the header not counted) and the field "X[11][0]" or "y[11]". */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"

#define CSV_NAME_SHOWN 40
/* Cells this long or longer are not numbers (no double needs 64 characters). */
#define CSV_CELL_MAX 64

/* One field: its text without the enclosing quotes (doubled quotes still
 * doubled when escapes is set). */
typedef struct csv_field {
    const char *p;
    size_t len;
    int quoted, escapes;
} csv_field;

enum { FIELD_MORE = 0, FIELD_END = 1, FIELD_BAD = -1 };

static int is_blank_char(char c)
{
    return c == ' ' || c == '\t';
}

/* After a field's text at c: a comma (more fields), a line end or the end of
 * the body (the record ends); anything else is malformed. */
static int field_end(const char **pos, const char *c, const char *end)
{
    while (c < end && is_blank_char(*c))
        c++;
    if (c >= end) {
        *pos = end;
        return FIELD_END;
    }
    if (*c == ',') {
        *pos = c + 1;
        return FIELD_MORE;
    }
    if (*c == '\r' && c + 1 < end && c[1] == '\n') {
        *pos = c + 2;
        return FIELD_END;
    }
    if (*c == '\n') {
        *pos = c + 1;
        return FIELD_END;
    }
    return FIELD_BAD;
}

/* The field at *pos (leading and trailing blanks dropped). FIELD_BAD for an
 * unterminated quote, text after a closing quote, or a quote inside an
 * unquoted field. */
static int next_field(const char **pos, const char *end, csv_field *f)
{
    const char *s = *pos;
    while (s < end && is_blank_char(*s))
        s++;
    f->quoted = f->escapes = 0;
    if (s < end && *s == '"') {
        const char *c = s + 1;
        for (;; c++) {
            if (c >= end)
                return FIELD_BAD;
            if (*c != '"')
                continue;
            if (c + 1 < end && c[1] == '"') {
                f->escapes = 1;
                c++;
                continue;
            }
            break;
        }
        f->p = s + 1;
        f->len = (size_t)(c - s - 1);
        f->quoted = 1;
        return field_end(pos, c + 1, end);
    }
    const char *c = s;
    while (c < end && *c != ',' && *c != '\n') {
        if (*c == '"')
            return FIELD_BAD;
        c++;
    }
    const char *e = c;
    while (e > s && (is_blank_char(e[-1]) || e[-1] == '\r'))
        e--;
    f->p = s;
    f->len = (size_t)(e - s);
    return field_end(pos, c, end);
}

/* GP_EDATA for a malformed field in data row `row` (from 1; 0: the header). */
static int malformed(size_t row, gp_error *err)
{
    static const char why[] = "has a malformed field (an unclosed quote, a quote inside an "
                              "unquoted field, or text after a closing quote)";
    if (row == 0)
        return gp_error_set(err, GP_EDATA, "X", "the CSV header %s", why);
    char where[GP_ERROR_FIELD_LEN];
    snprintf(where, sizeof where, "X[%zu]", row - 1);
    return gp_error_set(err, GP_EDATA, where, "row %zu of the CSV %s", row, why);
}

/* The record at *pos: its field count in *n, the first cap fields in out
 * (out may be NULL). GP_OK, or GP_EDATA for a malformed field. */
static int next_record(const char **pos, const char *end, csv_field *out, size_t cap, size_t *n,
                       size_t row, gp_error *err)
{
    *n = 0;
    for (;;) {
        csv_field f;
        int r = next_field(pos, end, &f);
        if (r == FIELD_BAD)
            return malformed(row, err);
        if (out && *n < cap)
            out[*n] = f;
        (*n)++;
        if (r == FIELD_END)
            return GP_OK;
    }
}

/* A record of one empty unquoted field: a blank line. */
static int blank_record(const csv_field *f, size_t n)
{
    return n == 1 && !f[0].quoted && f[0].len == 0;
}

/* Column names of the header: unescaped copies in one block. */
typedef struct header {
    const char **name;
    size_t *len;
    size_t n;
    char *text;
} header;

static void header_free(header *h)
{
    free(h->name);
    free(h->len);
    free(h->text);
}

/* Copy f's text into out with "" turned into ": returns the length. */
static size_t unescape(const csv_field *f, char *out)
{
    size_t k = 0;
    for (size_t i = 0; i < f->len; i++) {
        out[k++] = f->p[i];
        if (f->escapes && f->p[i] == '"')
            i++; /* the second quote of a pair */
    }
    return k;
}

/* A header name and its column, sorted to find duplicates. */
typedef struct named_col {
    const char *name;
    size_t len, col;
} named_col;

static int named_col_cmp(const void *a, const void *b)
{
    const named_col *x = a, *y = b;
    if (x->len != y->len)
        return x->len < y->len ? -1 : 1;
    int c = memcmp(x->name, y->name, x->len);
    if (c)
        return c;
    return x->col < y->col ? -1 : x->col > y->col;
}

/* GP_EDATA when two columns have the same name: ?target= could not tell them
 * apart, and a spreadsheet's duplicate column is usually a pasting mistake.
 * Sorted, not compared pairwise: the header may have max_input_dim columns.
 * The duplicate reported is the one whose second occurrence comes first. */
static int check_unique_names(const header *h, gp_error *err)
{
    named_col *s = malloc(h->n * sizeof *s);
    if (s == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t c = 0; c < h->n; c++)
        s[c] = (named_col){h->name[c], h->len[c], c};
    qsort(s, h->n, sizeof *s, named_col_cmp);
    size_t first = 0, second = 0;
    for (size_t i = 1; i < h->n; i++)
        if (s[i].len == s[i - 1].len && memcmp(s[i].name, s[i - 1].name, s[i].len) == 0 &&
            (second == 0 || s[i].col < second)) {
            first = s[i - 1].col;
            second = s[i].col;
        }
    free(s);
    if (second == 0)
        return GP_OK;
    int nl = h->len[first] > CSV_NAME_SHOWN ? CSV_NAME_SHOWN : (int)h->len[first];
    return gp_error_set(err, GP_EDATA, "X",
                        "column '%.*s' appears twice in the CSV header (columns %zu and %zu, "
                        "counted from 1); column names must differ",
                        nl, h->name[first], first + 1, second + 1);
}

static int parse_header(const char **pos, const char *end, size_t max_inputs, header *h,
                        gp_error *err)
{
    const char *start = *pos;
    size_t n = 0;
    int rc = next_record(pos, end, NULL, 0, &n, 0, err);
    if (rc)
        return rc;
    if (n > max_inputs + 1)
        return gp_error_set(err, GP_ETOOBIG, "X",
                            "the CSV has %zu input columns; the limit is max_input_dim = %zu "
                            "(--max-input-dim)",
                            n - 1, max_inputs);
    csv_field *f = malloc(n * sizeof *f);
    h->name = malloc(n * sizeof *h->name);
    h->len = malloc(n * sizeof *h->len);
    h->text = malloc((size_t)(*pos - start) + 1);
    h->n = n;
    if (f == NULL || h->name == NULL || h->len == NULL || h->text == NULL) {
        free(f);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    *pos = start;
    next_record(pos, end, f, n, &n, 0, err);
    char *t = h->text;
    for (size_t c = 0; c < n; c++) {
        h->name[c] = t;
        h->len[c] = unescape(&f[c], t);
        t += h->len[c];
    }
    int blank = blank_record(f, n);
    free(f);
    if (blank)
        return gp_error_set(err, GP_EDATA, "X", "the CSV has no header row");
    return check_unique_names(h, err);
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

/* The column noise_column names (by name only): the rows' known noise. */
static int find_noise_column(const header *h, const char *name, size_t tcol, size_t *col,
                             gp_error *err)
{
    size_t len = strlen(name);
    for (size_t c = 0; c < h->n; c++)
        if (h->len[c] == len && memcmp(h->name[c], name, len) == 0) {
            if (c == tcol)
                return gp_error_set(err, GP_EINVAL, "noise_column",
                                    "noise_column '%.*s' is the target column", CSV_NAME_SHOWN,
                                    name);
            *col = c;
            return GP_OK;
        }
    return gp_error_set(err, GP_EINVAL, "noise_column",
                        "noise_column '%.*s' is not a column of the CSV header", CSV_NAME_SHOWN,
                        name);
}

/* The target columns: out_of[c] is column c's output (SIZE_MAX: not a
 * target), p outputs; missing: an empty target cell is a missing entry
 * (NaN), as ?targets= allows. */
typedef struct csv_targets {
    size_t *out_of;
    size_t p;
    int missing;
    int records; /* a predict's rows: errors name rows[i].column */
} csv_targets;

/* ncol: the noise column (SIZE_MAX: none). */
static int cell_error(const header *h, size_t row, size_t col, const csv_targets *t, size_t ncol,
                      size_t xcol, const char *cell, size_t len, const char *why, gp_error *err)
{
    char field[GP_ERROR_FIELD_LEN];
    int nl = h->len[col] > CSV_NAME_SHOWN ? CSV_NAME_SHOWN : (int)h->len[col];
    if (t->records)
        snprintf(field, sizeof field, "rows[%zu].%.*s", row, nl, h->name[col]);
    else if (col == ncol)
        snprintf(field, sizeof field, "noise.per_point[%zu]", row);
    else if (t->out_of[col] != SIZE_MAX && t->p > 1)
        snprintf(field, sizeof field, "y[%zu][%zu]", row, t->out_of[col]);
    else if (t->out_of[col] != SIZE_MAX)
        snprintf(field, sizeof field, "y[%zu]", row);
    else
        snprintf(field, sizeof field, "X[%zu][%zu]", row, xcol);
    int cl = len > 24 ? 24 : (int)len;
    return gp_error_set(err, GP_EDATA, field, "row %zu, column '%.*s': '%.*s' %s", row + 1, nl,
                        h->name[col], cl, cell, why);
}

/* Count the data rows after the header (a blank line ends the data; only
 * blank lines may follow it). */
static int count_rows(const char *pos, const char *end, size_t *rows, gp_error *err)
{
    *rows = 0;
    int ended = 0;
    while (pos < end) {
        csv_field f;
        size_t n = 0;
        int rc = next_record(&pos, end, &f, 1, &n, *rows + 1, err);
        if (rc)
            return rc;
        if (blank_record(&f, n)) {
            ended = 1;
            continue;
        }
        if (ended)
            return gp_error_set(err, GP_EDATA, "X", "row %zu of the CSV follows a blank line",
                                *rows + 1);
        (*rows)++;
    }
    return GP_OK;
}

/* The number in a cell, or the reason it is not one. */
static const char *cell_number(const csv_field *f, double *v)
{
    if (f->len == 0)
        return "is empty";
    if (f->escapes || f->len >= CSV_CELL_MAX)
        return "is not a number";
    const char *s = f->p, *e = f->p + f->len;
    while (s < e && is_blank_char(*s))
        s++;
    while (e > s && is_blank_char(e[-1]))
        e--;
    if (s == e)
        return "is empty";
    if (gp_decimal_parse(s, (size_t)(e - s), v))
        return "is not a number (a decimal one: no hexadecimal, inf or nan)";
    return isfinite(*v) ? NULL : "is not a finite number";
}

/* Fill X (rows x d, column-major), y and (column ncol, SIZE_MAX: none) the
 * rows' noise nv from the data records at pos. */
static int read_rows(const char *pos, const char *end, const header *h, const csv_targets *t,
                     size_t ncol, size_t rows, double *Xm, double *yv, double *nv, gp_error *err)
{
    csv_field *f = malloc(h->n * sizeof *f);
    if (f == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    int rc = GP_OK;
    for (size_t r = 0; r < rows && rc == GP_OK; r++) {
        size_t cells = 0;
        rc = next_record(&pos, end, f, h->n, &cells, r + 1, err);
        if (rc == GP_OK && cells != h->n) {
            char field_name[GP_ERROR_FIELD_LEN];
            snprintf(field_name, sizeof field_name, "X[%zu]", r);
            rc = gp_error_set(err, GP_EDATA, field_name,
                              "row %zu has %zu cells; the header has %zu", r + 1, cells, h->n);
        }
        for (size_t c = 0, xc = 0; rc == GP_OK && c < h->n; c++) {
            double v = 0.0;
            size_t j = t->out_of[c];
            const char *why = cell_number(&f[c], &v);
            if (why && j != SIZE_MAX && t->missing && strcmp(why, "is empty") == 0)
                yv[j * rows + r] = NAN;
            else if (why)
                rc = cell_error(h, r, c, t, ncol, xc, f[c].p, f[c].len, why, err);
            else if (j != SIZE_MAX)
                yv[j * rows + r] = v;
            else if (c == ncol)
                nv[r] = v;
            else
                Xm[xc++ * rows + r] = v;
        }
    }
    free(f);
    return rc;
}

int gp_csv_parse(const char *body, size_t len, const char *target, size_t max_rows,
                 size_t max_inputs, double **X, double **y, size_t *n_out, size_t *d_out,
                 gp_error *err)
{
    return gp_csv_parse_noise(body, len, target, NULL, max_rows, max_inputs, X, y, NULL, n_out,
                              d_out, err);
}

/* ?targets=A,B,C: the named header columns, in that order (by name only;
 * each once), into t (out_of sized h->n) and names (their JSON list). */
static int find_targets(const header *h, const char *list, csv_targets *t, json_t *names,
                        gp_error *err)
{
    for (size_t c = 0; c < h->n; c++)
        t->out_of[c] = SIZE_MAX;
    t->p = 0;
    t->missing = 1;
    const char *s = list;
    for (;;) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s), c = 0;
        while (c < h->n && !(h->len[c] == len && memcmp(h->name[c], s, len) == 0))
            c++;
        if (len == 0 || c == h->n)
            return gp_error_set(err, GP_EINVAL, "targets",
                                "targets: '%.*s' is not a column of the CSV header", (int)
                                (len > CSV_NAME_SHOWN ? CSV_NAME_SHOWN : len), s);
        if (t->out_of[c] != SIZE_MAX)
            return gp_error_set(err, GP_EINVAL, "targets", "targets names '%.*s' twice",
                                (int)(len > CSV_NAME_SHOWN ? CSV_NAME_SHOWN : len), s);
        if (t->p == GP_COREG_MAX_OUTPUTS)
            return gp_error_set(err, GP_EDATA, "y",
                                "targets names more than %d outputs; a coregionalised model "
                                "takes at most %d",
                                GP_COREG_MAX_OUTPUTS, GP_COREG_MAX_OUTPUTS);
        t->out_of[c] = t->p++;
        json_array_append_new(names, json_stringn(s, len));
        if (e == NULL)
            return GP_OK;
        s = e + 1;
    }
}

/* The one target of ?target= (or the last column), into t. */
static int one_target(const header *h, const char *target, csv_targets *t, gp_error *err)
{
    size_t tcol = 0;
    int rc = find_target(h, target, &tcol, err);
    for (size_t c = 0; c < h->n; c++)
        t->out_of[c] = c == tcol ? 0 : SIZE_MAX;
    t->p = 1;
    t->missing = 0;
    return rc;
}

static size_t first_target(const csv_targets *t, size_t n)
{
    for (size_t c = 0; c < n; c++)
        if (t->out_of[c] != SIZE_MAX)
            return c;
    return SIZE_MAX;
}

int gp_csv_parse_noise(const char *body, size_t len, const char *target,
                       const char *noise_column, size_t max_rows, size_t max_inputs, double **X,
                       double **y, double **noise, size_t *n_out, size_t *d_out, gp_error *err)
{
    gp_csv_request r = {target, NULL, noise_column, max_rows, max_inputs, NULL, NULL};
    size_t p = 1;
    return gp_csv_parse_request(body, len, &r, X, y, noise, n_out, d_out, &p, NULL, err);
}

/* The header's names of the input columns (X's order) and of the targets
 * (y's) into q's lists; a name that is not UTF-8 is left out of both, so
 * the model keeps no signature (jansson refuses it). */
static void column_names(const header *h, const csv_targets *t, size_t ncol,
                         const gp_csv_request *q)
{
    json_t *in = json_array(), *out = json_array();
    int ok = in && out;
    for (size_t j = 0; ok && j < t->p; j++)
        for (size_t c = 0; ok && c < h->n; c++)
            if (t->out_of[c] == j)
                ok = json_array_append_new(out, json_stringn(h->name[c], h->len[c])) == 0;
    for (size_t c = 0; ok && c < h->n; c++)
        if (t->out_of[c] == SIZE_MAX && c != ncol)
            ok = json_array_append_new(in, json_stringn(h->name[c], h->len[c])) == 0;
    if (ok && q->feature_names)
        json_array_extend(q->feature_names, in);
    if (ok && q->target_names)
        json_array_extend(q->target_names, out);
    json_decref(in);
    json_decref(out);
}

/* Where a CSV body's header starts (after a UTF-8 byte order mark):
 * GP_EDATA naming "X" for an empty body or one holding a NUL byte. */
static int body_start(const char *body, size_t len, const char **pos, gp_error *err)
{
    if (body == NULL || len == 0)
        return gp_error_set(err, GP_EDATA, "X", "the CSV body is empty");
    if (memchr(body, '\0', len))
        return gp_error_set(err, GP_EDATA, "X", "the CSV body contains a NUL byte");
    *pos = body;
    if (len >= 3 && memcmp(body, "\xEF\xBB\xBF", 3) == 0)
        *pos += 3; /* UTF-8 byte order mark */
    return GP_OK;
}

int gp_csv_parse_request(const char *body, size_t len, const gp_csv_request *q, double **X,
                         double **y, double **noise, size_t *n_out, size_t *d_out, size_t *p_out,
                         json_t *names, gp_error *err)
{
    const char *noise_column = q->noise_column;
    *X = NULL;
    *y = NULL;
    if (noise)
        *noise = NULL;
    const char *pos;
    int start = body_start(body, len, &pos, err);
    if (start)
        return start;
    const char *end = body + len; /* body is not NULL here */
    header h = {NULL, NULL, 0, NULL};
    int rc = parse_header(&pos, end, q->max_inputs, &h, err);
    csv_targets t = {NULL, 0, 0, 0};
    size_t rows = 0, ncol = SIZE_MAX, extra = noise_column ? 1 : 0;
    if (rc == GP_OK && (t.out_of = malloc(h.n * sizeof *t.out_of)) == NULL)
        rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    if (rc == GP_OK && q->targets && q->target)
        rc = gp_error_set(err, GP_EINVAL, "targets", "give target or targets, not both");
    if (rc == GP_OK)
        rc = q->targets && names ? find_targets(&h, q->targets, &t, names, err)
                                 : one_target(&h, q->target, &t, err);
    if (rc == GP_OK && noise_column)
        rc = find_noise_column(&h, noise_column, t.p == 1 ? first_target(&t, h.n) : SIZE_MAX,
                               &ncol, err);
    if (rc == GP_OK && noise_column && t.out_of[ncol] != SIZE_MAX)
        rc = gp_error_set(err, GP_EINVAL, "noise_column", "noise_column is a target column");
    if (rc == GP_OK && h.n < t.p + 1 + extra)
        rc = gp_error_set(err, GP_EDATA, "X",
                          "the CSV has %zu column%s: no input columns besides the target%s", h.n,
                          h.n == 1 ? "" : "s", extra ? " and the noise column" : "");
    if (rc == GP_OK)
        rc = count_rows(pos, end, &rows, err);
    if (rc == GP_OK && rows == 0)
        rc = gp_error_set(err, GP_EDATA, "X", "the CSV has a header but no data rows");
    if (rc == GP_OK && rows > q->max_rows)
        rc = gp_error_set(err, GP_ETOOBIG, "X",
                          "the CSV has %zu rows; the limit is max_points = %zu", rows,
                          q->max_rows);
    size_t d = rc == GP_OK ? h.n - t.p - extra : 0;
    double *Xm = NULL, *yv = NULL, *nv = NULL;
    if (rc == GP_OK && extra && (nv = malloc(rows * sizeof *nv)) == NULL)
        rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    if (rc == GP_OK) {
        yv = malloc(rows * t.p * sizeof *yv);
        if (d <= SIZE_MAX / sizeof(double) / rows)
            Xm = malloc(rows * d * sizeof *Xm);
        if (Xm == NULL || yv == NULL)
            rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory for %zu x %zu values", rows,
                              d);
    }
    if (rc == GP_OK)
        rc = read_rows(pos, end, &h, &t, ncol, rows, Xm, yv, nv, err);
    if (rc == GP_OK)
        column_names(&h, &t, ncol, q);
    header_free(&h);
    free(t.out_of);
    if (rc) {
        free(Xm);
        free(yv);
        free(nv);
        return rc;
    }
    *X = Xm;
    *y = yv;
    if (noise)
        *noise = nv;
    *n_out = rows;
    *d_out = d;
    *p_out = t.p;
    return GP_OK;
}

/* ---- the CSV body of a predict, sample or observe: named rows ---- */

/* The rows' cells (column-major rows x h->n in M) as records. */
static json_t *records_of(const header *h, const double *M, size_t rows)
{
    json_t *list = json_array();
    for (size_t r = 0; list && r < rows; r++) {
        json_t *o = json_object();
        for (size_t c = 0; o && c < h->n; c++)
            if (json_object_setn_new(o, h->name[c], h->len[c],
                                             json_real(M[c * rows + r])) != 0) {
                json_decref(o);
                o = NULL;
            }
        if (o == NULL || json_array_append_new(list, o) != 0) {
            json_decref(list);
            return NULL;
        }
    }
    return list;
}

int gp_csv_records(const char *body, size_t len, size_t max_rows, size_t max_cols,
                   json_t **rows_out, gp_error *err)
{
    *rows_out = NULL;
    const char *pos;
    int start = body_start(body, len, &pos, err);
    if (start)
        return start;
    const char *end = body + len; /* body is not NULL here */
    header h = {NULL, NULL, 0, NULL};
    int rc = parse_header(&pos, end, max_cols, &h, err);
    /* every column is read as an input; the model sorts them out by name */
    csv_targets t = {NULL, 0, 0, 1};
    size_t rows = 0;
    double *M = NULL;
    if (rc == GP_OK && (t.out_of = malloc(h.n * sizeof *t.out_of)) == NULL)
        rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    for (size_t c = 0; rc == GP_OK && c < h.n; c++)
        t.out_of[c] = SIZE_MAX;
    if (rc == GP_OK)
        rc = count_rows(pos, end, &rows, err);
    if (rc == GP_OK && rows == 0)
        rc = gp_error_set(err, GP_EDATA, "X", "the CSV has a header but no data rows");
    if (rc == GP_OK && rows > max_rows)
        rc = gp_error_set(err, GP_ETOOBIG, "X",
                          "the CSV has %zu rows; the limit is max_points = %zu", rows, max_rows);
    if (rc == GP_OK && (M = malloc(rows * h.n * sizeof *M)) == NULL)
        rc = gp_error_set(err, GP_ENOMEM, NULL, "out of memory for %zu rows", rows);
    if (rc == GP_OK)
        rc = read_rows(pos, end, &h, &t, SIZE_MAX, rows, M, NULL, NULL, err);
    if (rc == GP_OK && (*rows_out = records_of(&h, M, rows)) == NULL)
        rc = gp_error_set(err, GP_EDATA, "X", "the CSV header's names must be UTF-8 text");
    free(M);
    free(t.out_of);
    header_free(&h);
    return rc;
}
