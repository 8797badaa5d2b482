/* gpserve api: the parser of a data set's upload (docs/design/api.md, "Data
 * sets"), fed the body in pieces as they arrive and never holding more of it
 * than one cell (CSV) or one line (JSON lines) and one chunk of rows.
 *
 *   text/csv              a header row of column names, then rows of
 *                         numbers; cells quoted as RFC 4180 says ("a,b"
 *                         and "" inside quotes), lines ended by LF, CRLF
 *                         or CR, a UTF-8 byte order mark skipped, the last
 *                         line's end optional;
 *   application/x-ndjson  one JSON object a line, the same keys on every
 *                         line (the first line's order is the columns'),
 *                         numbers only.
 *
 * Blank lines end the data: only blank lines may follow one. Every cell is
 * a finite number in decimal (a CSV cell may have blanks around it); the
 * column names are 1..GP_OUTPUT_NAME_MAX bytes of UTF-8 without control
 * characters, unique. Anything else is refused GP_EDATA naming the row
 * (1-based data rows, as a person counts them; the line of the file too)
 * and the column, with field "rows[i].NAME" (i 0-based, as every field of
 * the API) or "columns[j]" for the header. Rows are handed over in chunks of
 * chunk_rows (the last may be shorter), column-major. */
#ifndef GP_API_DATASET_INGEST_H
#define GP_API_DATASET_INGEST_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/error.h"

enum gp_ingest_format { GP_INGEST_CSV = 1, GP_INGEST_NDJSON = 2 };

/* The column names, once the header (or the first JSON line) is read. */
typedef int (*gp_ingest_header_fn)(void *ctx, const char *const *names, size_t n,
                                   gp_error *err);
/* Rows [first, first + rows) as rows x cols column-major (valid during the call). */
typedef int (*gp_ingest_chunk_fn)(void *ctx, uint64_t first, size_t rows, size_t cols,
                                  const double *data, gp_error *err);

/* Summary statistics of a column, over every row: count, mean, the
 * population standard deviation (Welford's updates, in row order), min, max. */
typedef struct gp_ingest_stats {
    uint64_t count;
    double mean, m2, min, max;
} gp_ingest_stats;

typedef struct gp_ingest gp_ingest;

/* A parser of format handing chunks of chunk_rows rows; a header of more
 * than max_cols columns is refused (GP_ETOOBIG naming "columns"). */
int gp_ingest_new(enum gp_ingest_format format, size_t chunk_rows, size_t max_cols,
                  gp_ingest_header_fn on_header, gp_ingest_chunk_fn on_chunk, void *ctx,
                  gp_ingest **out, gp_error *err);
/* The next n bytes of the body: 0, or the first refusal (also a callback's
 * code), after which the parser takes nothing more. */
int gp_ingest_feed(gp_ingest *in, const char *data, size_t n, gp_error *err);
/* The body has ended: the last row and the last chunk. GP_EDATA naming
 * "body" for an empty body or a header without rows. */
int gp_ingest_finish(gp_ingest *in, gp_error *err);
/* Rows handed over so far; the columns and their statistics (NULL until
 * the header is read). */
uint64_t gp_ingest_rows(const gp_ingest *in);
size_t gp_ingest_columns(const gp_ingest *in);
const char *const *gp_ingest_names(const gp_ingest *in);
const gp_ingest_stats *gp_ingest_column_stats(const gp_ingest *in);
void gp_ingest_free(gp_ingest *in);

#endif
