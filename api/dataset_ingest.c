/* The parser of a data set's upload (api/dataset_ingest.h): a byte-at-a-time
 * state machine for CSV (the body arrives in pieces that may end anywhere,
 * inside a quoted cell or between the CR and LF of a line end), a line
 * buffer for JSON lines; both fill one chunk of rows at a time and keep the
 * columns' statistics as the rows go by. */
#include "api/dataset_ingest.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api/internal.h"
#include "core/linalg/linalg.h"

/* Bytes of one CSV cell kept (a number is far shorter; a longer cell is
 * refused as not a number, or as a column name too long). */
#define CELL_MAX 1024
/* Bytes of one JSON line (a row of 1000 columns of 17-digit numbers and
 * 64-byte names is under 100 KiB). */
#define LINE_MAX_BYTES ((size_t)1 << 20)
/* Bytes of a refused cell quoted in its message. */
#define CELL_SHOWN 24

enum csv_state {
    ST_START,    /* before a cell's first byte */
    ST_UNQUOTED, /* inside a cell without quotes */
    ST_QUOTED,   /* inside quotes */
    ST_QUOTE     /* a quote inside quotes: the end, or the first of "" */
};

struct gp_ingest {
    enum gp_ingest_format format;
    size_t chunk_rows, max_cols;
    gp_ingest_header_fn on_header;
    gp_ingest_chunk_fn on_chunk;
    void *ctx;
    int failed;       /* refused: nothing more is taken */
    size_t bom;       /* bytes of a byte order mark matched so far; 3 + 1 once decided */
    uint64_t lines;   /* line ends seen */
    uint64_t line;    /* the line the current row started on (1-based) */
    int skip_lf;      /* a CR ended the last row: a LF right after it belongs to it */
    int prev_cr;      /* the byte before was a CR (a LF after it ends no line of its own) */
    /* the columns */
    char **names;
    size_t n_cols;
    int have_header;
    json_t *index;    /* JSON lines: name -> column */
    /* the current CSV row */
    enum csv_state state;
    char cell[CELL_MAX + 1];
    size_t cell_len;
    int cell_long;    /* the cell passed CELL_MAX bytes */
    size_t cells;     /* cells ended in the row so far */
    size_t row_bytes; /* bytes of the row (0: a blank line so far) */
    int row_quoted;   /* the row has a quoted cell (so it is not blank) */
    /* the rows */
    int ended;        /* a blank line has ended the data */
    uint64_t rows;    /* rows complete */
    double *buf;      /* chunk_rows x n_cols, column-major */
    size_t in_buf;    /* rows of the current chunk */
    gp_ingest_stats *stats;
    /* the current JSON line */
    char *lbuf;
    size_t llen, lcap;
};

/* ---- refusals ---- */

/* text (n bytes) as a message may quote it: printable ASCII, '?' else. */
static void shown(const char *text, size_t n, char out[CELL_SHOWN + 4])
{
    size_t k = n > CELL_SHOWN ? CELL_SHOWN : n;
    for (size_t i = 0; i < k; i++)
        out[i] = text[i] >= 0x20 && text[i] < 0x7f ? text[i] : '?';
    memcpy(out + k, n > CELL_SHOWN ? "..." : "", n > CELL_SHOWN ? 4 : 1);
}

static int refuse_row(gp_ingest *in, gp_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* GP_EDATA about the current row (field rows[i]), the parser stopped. */
static int refuse_row(gp_ingest *in, gp_error *err, const char *fmt, ...)
{
    char why[GP_ERROR_MESSAGE_LEN];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof why, fmt, ap);
    va_end(ap);
    in->failed = 1;
    char field[GP_ERROR_FIELD_LEN];
    snprintf(field, sizeof field, "rows[%llu]", (unsigned long long)in->rows);
    return gp_error_set(err, GP_EDATA, field, "row %llu (line %llu): %s",
                        (unsigned long long)in->rows + 1, (unsigned long long)in->line, why);
}

/* GP_EDATA about cell j of the current row (field rows[i].NAME). */
static int refuse_cell(gp_ingest *in, size_t j, const char *text, size_t n, const char *why,
                       gp_error *err)
{
    char cell[CELL_SHOWN + 4], field[GP_ERROR_FIELD_LEN];
    shown(text, n, cell);
    in->failed = 1;
    snprintf(field, sizeof field, "rows[%llu].%s", (unsigned long long)in->rows, in->names[j]);
    return gp_error_set(err, GP_EDATA, field, "row %llu (line %llu), column '%s': '%s' %s",
                        (unsigned long long)in->rows + 1, (unsigned long long)in->line,
                        in->names[j], cell, why);
}

static int refuse_body(gp_ingest *in, const char *field, const char *why, gp_error *err)
{
    in->failed = 1;
    return gp_error_set(err, GP_EDATA, field, "%s", why);
}

/* ---- the columns ---- */

/* Name j (n bytes) as a column name: UTF-8, 1..GP_OUTPUT_NAME_MAX bytes, no
 * control character, unlike the names before it. */
static int check_name(gp_ingest *in, const char *name, size_t n, gp_error *err)
{
    char field[32];
    snprintf(field, sizeof field, "columns[%zu]", in->n_cols);
    in->failed = 1;
    if (n == 0)
        return gp_error_set(err, GP_EDATA, field, "column %zu of the header has no name",
                            in->n_cols + 1);
    if (n > GP_OUTPUT_NAME_MAX)
        return gp_error_set(err, GP_EDATA, field, "column %zu's name is longer than %d bytes",
                            in->n_cols + 1, GP_OUTPUT_NAME_MAX);
    json_t *s = json_stringn(name, n);
    json_decref(s);
    if (s == NULL || memchr(name, '\0', n))
        return gp_error_set(err, GP_EDATA, field, "column %zu's name is not UTF-8 text",
                            in->n_cols + 1);
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)name[i] < 0x20 || name[i] == 0x7f)
            return gp_error_set(err, GP_EDATA, field,
                                "column %zu's name holds a control character", in->n_cols + 1);
    for (size_t j = 0; j < in->n_cols; j++)
        if (strlen(in->names[j]) == n && memcmp(in->names[j], name, n) == 0)
            return gp_error_set(err, GP_EDATA, field,
                                "columns %zu and %zu are both named '%s'", j + 1, in->n_cols + 1,
                                in->names[j]);
    in->failed = 0;
    return GP_OK;
}

static int add_name(gp_ingest *in, const char *name, size_t n, gp_error *err)
{
    if (in->n_cols >= in->max_cols) {
        in->failed = 1;
        return gp_error_set(err, GP_ETOOBIG, "columns",
                            "the data set has more than %zu columns (the most a fit may take, "
                            "--max-input-dim, and its target)",
                            in->max_cols);
    }
    int rc = check_name(in, name, n, err);
    if (rc)
        return rc;
    char *copy = malloc(n + 1);
    if (copy == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    memcpy(copy, name, n);
    copy[n] = '\0';
    in->names[in->n_cols++] = copy;
    return GP_OK;
}

/* The header is complete: room for a chunk, the statistics, the callback. */
static int header_done(gp_ingest *in, gp_error *err)
{
    size_t count = 0;
    int rc = in->n_cols ? gp_checked_size(in->chunk_rows, in->n_cols, &count, err)
                        : refuse_body(in, "columns", "the header has no columns", err);
    if (rc)
        return rc;
    in->buf = gp_alloc_doubles(count, err);
    in->stats = calloc(in->n_cols, sizeof *in->stats);
    if (in->buf == NULL || in->stats == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory for a chunk of %zu rows",
                            in->chunk_rows);
    in->have_header = 1;
    return in->on_header(in->ctx, (const char *const *)in->names, in->n_cols, err);
}

/* ---- the rows ---- */

/* Hand the rows of the current chunk over (compacted to in_buf rows). */
static int flush(gp_ingest *in, gp_error *err)
{
    if (in->in_buf == 0)
        return GP_OK;
    size_t r = in->in_buf;
    for (size_t j = 1; r < in->chunk_rows && j < in->n_cols; j++)
        memmove(in->buf + j * r, in->buf + j * in->chunk_rows, r * sizeof *in->buf);
    int rc = in->on_chunk(in->ctx, in->rows - r, r, in->n_cols, in->buf, err);
    in->in_buf = 0;
    if (rc)
        in->failed = 1;
    return rc;
}

/* The current row is complete (every cell in buf): count it. */
static int row_done(gp_ingest *in, gp_error *err)
{
    for (size_t j = 0; j < in->n_cols; j++) {
        const double x = in->buf[in->in_buf + j * in->chunk_rows];
        gp_ingest_stats *s = &in->stats[j];
        s->count++;
        const double delta = x - s->mean;
        s->mean += delta / (double)s->count;
        s->m2 += delta * (x - s->mean);
        if (s->count == 1 || x < s->min)
            s->min = x;
        if (s->count == 1 || x > s->max)
            s->max = x;
    }
    in->in_buf++;
    in->rows++;
    return in->in_buf == in->chunk_rows ? flush(in, err) : GP_OK;
}

/* A line with nothing on it: before the header, skipped; after, it ends the data. */
static void blank_line(gp_ingest *in)
{
    if (in->have_header)
        in->ended = 1;
}

/* A row after the blank line that ended the data. */
static int after_end(gp_ingest *in, gp_error *err)
{
    return refuse_row(in, err, "a row after a blank line (a blank line ends the data)");
}

/* ---- CSV ---- */

/* The cell just ended, as column name or as value j of the row. */
static int csv_cell_done(gp_ingest *in, gp_error *err)
{
    const size_t j = in->cells++;
    const char *c = in->cell;
    size_t n = in->cell_len;
    in->cell_len = 0;
    in->state = ST_START;
    int too_long = in->cell_long;
    in->cell_long = 0;
    if (!in->have_header)
        return too_long ? check_name(in, c, GP_OUTPUT_NAME_MAX + 1, err) : add_name(in, c, n, err);
    if (in->ended)
        return after_end(in, err);
    if (j >= in->n_cols)
        return GP_OK; /* counted: the row's error names how many */
    while (n > 0 && (*c == ' ' || *c == '\t')) {
        c++;
        n--;
    }
    while (n > 0 && (c[n - 1] == ' ' || c[n - 1] == '\t'))
        n--;
    double v = 0.0;
    if (too_long || n == 0 || gp_decimal_parse(c, n, &v) != 0)
        return refuse_cell(in, j, c, n, n ? "is not a number" : "is empty: every cell is a number",
                           err);
    if (!isfinite(v))
        return refuse_cell(in, j, c, n, "is not a finite number", err);
    in->buf[in->in_buf + j * in->chunk_rows] = v;
    return GP_OK;
}

/* The row just ended (its last cell ended too). */
static int csv_row_done(gp_ingest *in, gp_error *err)
{
    size_t cells = in->cells;
    in->cells = 0;
    in->row_bytes = 0;
    if (!in->have_header)
        return header_done(in, err);
    if (cells != in->n_cols)
        return refuse_row(in, err, "%zu cell%s; the header has %zu columns", cells,
                          cells == 1 ? "" : "s", in->n_cols);
    return row_done(in, err);
}

/* 1 when the row so far is nothing but blanks: a blank line. */
static int csv_row_blank(const gp_ingest *in)
{
    if (in->cells > 0 || in->row_quoted)
        return 0;
    for (size_t i = 0; i < in->cell_len; i++)
        if (in->cell[i] != ' ' && in->cell[i] != '\t')
            return 0;
    return !in->cell_long;
}

/* A line end outside quotes. */
static int csv_line_end(gp_ingest *in, gp_error *err)
{
    int rc = GP_OK;
    if (csv_row_blank(in)) {
        blank_line(in);
        in->cell_len = 0;
        in->row_bytes = 0;
        in->state = ST_START;
    } else if ((rc = csv_cell_done(in, err)) == GP_OK) {
        rc = csv_row_done(in, err);
    }
    in->row_quoted = 0;
    in->line = in->lines + 1;
    return rc;
}

static int put(gp_ingest *in, char c)
{
    if (in->cell_len < CELL_MAX)
        in->cell[in->cell_len++] = c;
    else
        in->cell_long = 1;
    return GP_OK;
}

static int csv_byte(gp_ingest *in, char c, gp_error *err)
{
    if (in->state != ST_QUOTED && (c == '\n' || c == '\r')) {
        in->skip_lf = c == '\r';
        return csv_line_end(in, err);
    }
    in->row_bytes++;
    switch (in->state) {
    case ST_START:
        if (c == '"') {
            in->state = ST_QUOTED;
            in->row_quoted = 1;
            return GP_OK;
        }
        in->state = ST_UNQUOTED;
        /* fall through */
    case ST_UNQUOTED:
        if (c == ',')
            return csv_cell_done(in, err);
        if (c == '"')
            return in->have_header ? refuse_row(in, err, "a quote inside a cell without quotes")
                                   : refuse_body(in, "columns",
                                                 "the header has a quote inside a name without "
                                                 "quotes",
                                                 err);
        return put(in, c);
    case ST_QUOTED:
        if (c == '"') {
            in->state = ST_QUOTE;
            return GP_OK;
        }
        return put(in, c);
    case ST_QUOTE:
        if (c == '"') {
            in->state = ST_QUOTED;
            return put(in, c);
        }
        if (c == ',')
            return csv_cell_done(in, err);
        return in->have_header ? refuse_row(in, err, "text after the closing quote of a cell")
                               : refuse_body(in, "columns",
                                             "the header has text after the closing quote of a "
                                             "name",
                                             err);
    }
    return GP_OK;
}

/* ---- JSON lines ---- */

/* The columns from the first object's keys, in its order. */
static int ndjson_header(gp_ingest *in, json_t *obj, gp_error *err)
{
    in->index = json_object();
    if (in->index == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    const char *key;
    json_t *v;
    int rc = GP_OK;
    json_object_foreach(obj, key, v) {
        size_t at = in->n_cols;
        if ((rc = add_name(in, key, strlen(key), err)) != GP_OK)
            return rc;
        json_object_set_new(in->index, key, json_integer((json_int_t)at));
    }
    return header_done(in, err);
}

/* One object as the next row. */
static int ndjson_row(gp_ingest *in, json_t *obj, gp_error *err)
{
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        json_t *at = json_object_get(in->index, key);
        if (at == NULL)
            return refuse_row(in, err, "column '%.64s' is not a column of the first row", key);
        size_t j = (size_t)json_integer_value(at);
        if (!json_is_number(v)) {
            const char *what = json_is_string(v)   ? "a string"
                               : json_is_null(v)   ? "null"
                               : json_is_boolean(v) ? "a boolean"
                                                    : "not a number";
            return refuse_cell(in, j, what, strlen(what), "is not a number", err);
        }
        in->buf[in->in_buf + j * in->chunk_rows] = json_number_value(v);
    }
    if (json_object_size(obj) != in->n_cols)
        for (size_t j = 0; j < in->n_cols; j++)
            if (json_object_get(obj, in->names[j]) == NULL)
                return refuse_row(in, err, "no column '%s' (every row has the first row's "
                                  "columns)", in->names[j]);
    return row_done(in, err);
}

static int ndjson_line(gp_ingest *in, gp_error *err)
{
    size_t n = in->llen;
    in->llen = 0;
    if (n > 0 && in->lbuf[n - 1] == '\r')
        n--;
    size_t k = 0;
    while (k < n && (in->lbuf[k] == ' ' || in->lbuf[k] == '\t'))
        k++;
    if (k == n) {
        blank_line(in);
        return GP_OK;
    }
    if (in->ended)
        return after_end(in, err);
    json_error_t je;
    json_t *obj = json_loadb(in->lbuf, n, JSON_REJECT_DUPLICATES | JSON_DECODE_INT_AS_REAL, &je);
    int rc;
    if (obj == NULL)
        rc = refuse_row(in, err, "not JSON: %s", je.text);
    else if (!json_is_object(obj))
        rc = refuse_row(in, err, "not a JSON object");
    else if (!in->have_header && (rc = ndjson_header(in, obj, err)) != GP_OK)
        ;
    else
        rc = ndjson_row(in, obj, err);
    json_decref(obj);
    return rc;
}

static int ndjson_byte(gp_ingest *in, char c, gp_error *err)
{
    if (c == '\n') {
        int rc = ndjson_line(in, err);
        in->line = in->lines + 1;
        return rc;
    }
    if (in->llen == in->lcap) {
        if (in->lcap >= LINE_MAX_BYTES)
            return refuse_row(in, err, "a line longer than %zu bytes", LINE_MAX_BYTES);
        size_t cap = in->lcap ? 2 * in->lcap : 4096;
        char *b = realloc(in->lbuf, cap);
        if (b == NULL)
            return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
        in->lbuf = b;
        in->lcap = cap;
    }
    in->lbuf[in->llen++] = c;
    return GP_OK;
}

/* ---- the parser ---- */

int gp_ingest_new(enum gp_ingest_format format, size_t chunk_rows, size_t max_cols,
                  gp_ingest_header_fn on_header, gp_ingest_chunk_fn on_chunk, void *ctx,
                  gp_ingest **out, gp_error *err)
{
    *out = NULL;
    if (chunk_rows == 0 || max_cols == 0 || on_header == NULL || on_chunk == NULL ||
        (format != GP_INGEST_CSV && format != GP_INGEST_NDJSON))
        return gp_error_set(err, GP_EINVAL, NULL, "bad parser settings");
    gp_ingest *in = calloc(1, sizeof *in);
    if (in)
        in->names = calloc(max_cols, sizeof *in->names);
    if (in == NULL || in->names == NULL) {
        free(in);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    in->format = format;
    in->chunk_rows = chunk_rows;
    in->max_cols = max_cols;
    in->on_header = on_header;
    in->on_chunk = on_chunk;
    in->ctx = ctx;
    in->line = 1;
    *out = in;
    return GP_OK;
}

static int one_byte(gp_ingest *in, char c, gp_error *err)
{
    /* Lines for the messages: LF, CRLF and (in CSV) a lone CR end one. */
    const int lf_of_crlf = in->prev_cr && c == '\n';
    in->prev_cr = c == '\r' && in->format == GP_INGEST_CSV;
    if (in->prev_cr || (c == '\n' && !lf_of_crlf))
        in->lines++;
    const int skip = lf_of_crlf && in->skip_lf;
    in->skip_lf = 0;
    if (skip)
        return GP_OK;
    return in->format == GP_INGEST_CSV ? csv_byte(in, c, err) : ndjson_byte(in, c, err);
}

/* The byte order mark at the body's start is skipped; bytes that began
 * like one but were not go to the parser after all. */
static const char BOM[] = "\xEF\xBB\xBF";

static int feed_bom(gp_ingest *in, const char **data, size_t *n, gp_error *err)
{
    while (in->bom < 3 && *n > 0) {
        if (**data != BOM[in->bom]) {
            int rc = GP_OK;
            for (size_t i = 0; i < in->bom && rc == GP_OK; i++)
                rc = one_byte(in, BOM[i], err);
            in->bom = 4;
            return rc;
        }
        in->bom++;
        (*data)++;
        (*n)--;
    }
    if (in->bom == 3)
        in->bom = 4;
    return GP_OK;
}

int gp_ingest_feed(gp_ingest *in, const char *data, size_t n, gp_error *err)
{
    if (in->failed)
        return gp_error_set(err, GP_EINVAL, NULL, "the upload was refused already");
    int rc = feed_bom(in, &data, &n, err);
    for (size_t i = 0; i < n && rc == GP_OK; i++)
        rc = one_byte(in, data[i], err);
    if (rc)
        in->failed = 1;
    return rc;
}

int gp_ingest_finish(gp_ingest *in, gp_error *err)
{
    if (in->failed)
        return gp_error_set(err, GP_EINVAL, NULL, "the upload was refused already");
    int rc = GP_OK;
    if (in->bom > 0 && in->bom < 3) { /* the body ended inside what looked like a mark */
        size_t k = in->bom;
        in->bom = 4;
        for (size_t i = 0; i < k && rc == GP_OK; i++)
            rc = one_byte(in, BOM[i], err);
    }
    if (rc == GP_OK && in->format == GP_INGEST_CSV) {
        if (in->state == ST_QUOTED)
            rc = in->have_header ? refuse_row(in, err, "a quoted cell is not closed before the "
                                              "body ends")
                                 : refuse_body(in, "columns",
                                               "a quoted name of the header is not closed", err);
        else if (in->row_bytes > 0 || in->cells > 0)
            rc = csv_line_end(in, err); /* the last line had no line end */
    } else if (rc == GP_OK && in->llen > 0) {
        rc = ndjson_line(in, err);
    }
    if (rc == GP_OK && !in->have_header)
        rc = refuse_body(in, "body",
                         in->format == GP_INGEST_CSV
                             ? "the body is empty: a CSV data set is a header row of column "
                               "names, then rows of numbers"
                             : "the body is empty: a JSON lines data set is one object a line",
                         err);
    if (rc == GP_OK && in->rows == 0)
        rc = refuse_body(in, "body",
                         in->format == GP_INGEST_CSV ? "the CSV has a header but no rows"
                                                     : "the body has no rows",
                         err);
    if (rc == GP_OK)
        rc = flush(in, err);
    if (rc)
        in->failed = 1;
    return rc;
}

uint64_t gp_ingest_rows(const gp_ingest *in)
{
    return in->rows;
}

size_t gp_ingest_columns(const gp_ingest *in)
{
    return in->have_header ? in->n_cols : 0;
}

const char *const *gp_ingest_names(const gp_ingest *in)
{
    return in->have_header ? (const char *const *)in->names : NULL;
}

const gp_ingest_stats *gp_ingest_column_stats(const gp_ingest *in)
{
    return in->have_header ? in->stats : NULL;
}

void gp_ingest_free(gp_ingest *in)
{
    if (in == NULL)
        return;
    for (size_t j = 0; j < in->n_cols; j++)
        free(in->names[j]);
    free(in->names);
    json_decref(in->index);
    free(in->buf);
    free(in->stats);
    free(in->lbuf);
    free(in);
}
