/* Test support: reader for the reference fixtures in tests/fixtures/.
 *
 * Format (written by tests/fixtures/make_fixtures.py): text; lines whose first
 * non-blank character is '#' are comments; a block is a line
 *     <name> <rows> <cols>
 * followed by rows*cols numbers in ROW-MAJOR order, whitespace separated
 * (any line breaks), written with 17 significant digits / repr() so that they
 * round-trip exactly. Block names are unique within a file.
 *
 * The reader stores each block COLUMN-MAJOR (element (i, j) at data[j * rows + i]),
 * the layout core/ uses. Functions return 0 or a negative GP_E* code and fill
 * err (may be NULL); a malformed file is an error, never a crash. */
#ifndef GP_BENCH_FIXTURE_H
#define GP_BENCH_FIXTURE_H

#include <stddef.h>

#include "core/base/error.h"

#define GP_FIXTURE_NAME_LEN 64

typedef struct gp_fixture_block {
    char name[GP_FIXTURE_NAME_LEN];
    size_t rows, cols;
    double *data; /* owned; column-major rows x cols */
} gp_fixture_block;

typedef struct gp_fixture {
    gp_fixture_block *blocks; /* owned */
    size_t count;
} gp_fixture;

/* Directory of the fixtures: $GPSERVE_FIXTURES if set, else "tests/fixtures"
 * (tests run from the repository root). */
const char *gp_fixture_dir(void);
/* "<dir>/<file>" into buf, e.g. gp_fixture_path(buf, sizeof buf, "exact_rbf.txt"). */
int gp_fixture_path(char *buf, size_t len, const char *file, gp_error *err);

/* Parse a fixture file / a fixture text held in memory. */
int gp_fixture_load(const char *path, gp_fixture *fx, gp_error *err);
int gp_fixture_parse(const char *text, size_t len, const char *what, gp_fixture *fx,
                     gp_error *err);
void gp_fixture_free(gp_fixture *fx);

/* The block `name` or NULL. */
const gp_fixture_block *gp_fixture_find(const gp_fixture *fx, const char *name);
/* The values of block `name`, which must be rows x cols (GP_EDATA naming the
 * block and both shapes otherwise; GP_EINVAL when absent). rows or cols 0
 * accepts any count in that dimension. */
int gp_fixture_get(const gp_fixture *fx, const char *name, size_t rows, size_t cols,
                   const double **data, gp_error *err);
/* The values of block `name` whatever its shape, which goes to *rows_out and
 * *cols_out (either may be NULL). */
int gp_fixture_get_any(const gp_fixture *fx, const char *name, size_t *rows_out,
                       size_t *cols_out, const double **data, gp_error *err);
/* A 1 x 1 block. */
int gp_fixture_scalar(const gp_fixture *fx, const char *name, double *value, gp_error *err);

#endif
