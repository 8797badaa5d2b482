/* Benchmark / test support: the shared regression datasets and their splits.
 *
 * The datasets directory (see ../shared/datasets/README.md) holds <name>.csv
 * (one header line, numeric columns, the last column is y) and
 * splits/<name>_test20.txt / splits/<name>_fold10.txt. It is found as
 * $GPSERVE_DATASETS when set, else ../shared/datasets relative to the working
 * directory (tests and benchmarks run from the repository root).
 *
 * Split schemes (k = split number):
 *   "test20"  line k of splits/<name>_test20.txt holds the space-separated
 *             0-based row indices of the test set; train = every other row.
 *   "fold10"  splits/<name>_fold10.txt holds one integer 0..9 per data row;
 *             test = rows whose value is k, train = the rest.
 *   "fixed"   the documented standard split of kin40k (10000 train / 30000
 *             test), pol (10000 / 5000) and pumadyn32nm (7168 / 1024): the
 *             first rows are the training set, the rest the test set; k = 0.
 * Train and test index lists are always in increasing row order.
 *
 * Every function returns 0 or a negative GP_E* code and fills err (may be
 * NULL). Nothing here aborts on a bad file: sizes and parse errors are checked.
 * Plain C11 + POSIX; uses gp_rng (core/base/rng.h) for subsampling. */
#ifndef GP_BENCH_DATASET_H
#define GP_BENCH_DATASET_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/error.h"

#define GP_DATASET_NAME_LEN 64
#define GP_DATASET_PATH_LEN 4096

typedef struct gp_dataset {
    char name[GP_DATASET_NAME_LEN]; /* e.g. "concrete" (empty for gp_dataset_load_file) */
    size_t n, d;                    /* rows, features (y not counted) */
    double *X;                      /* owned; n x d, column-major: X[j * n + i] */
    double *y;                      /* owned; n */
} gp_dataset;

typedef struct gp_split {
    size_t *train; /* owned; increasing row indices */
    size_t n_train;
    size_t *test; /* owned; increasing row indices */
    size_t n_test;
} gp_split;

/* The datasets directory ($GPSERVE_DATASETS, else ../shared/datasets), written
 * into buf. GP_EINVAL when it does not fit. */
int gp_datasets_dir(char *buf, size_t len, gp_error *err);
/* 1 when the directory exists and has a splits/ folder, else 0 with a
 * one-line reason in why (may be NULL) for a "skipped: ..." message. */
int gp_datasets_present(char *why, size_t why_len);
/* 1 when <dir>/<name>.csv is readable. */
int gp_dataset_exists(const char *name);

/* Load <dir>/<name>.csv (name: letters, digits, '_', '-', '.'; no '/'). */
int gp_dataset_load(const char *name, gp_dataset *ds, gp_error *err);
/* Load any CSV in the same format. */
int gp_dataset_load_file(const char *path, gp_dataset *ds, gp_error *err);
/* Rows `rows[0..count)` of ds (each < ds->n) as a new dataset. */
int gp_dataset_rows(const gp_dataset *ds, const size_t *rows, size_t count, gp_dataset *out,
                    gp_error *err);
void gp_dataset_free(gp_dataset *ds);

/* Split k of dataset `name` (scheme "test20", "fold10" or "fixed") for a
 * dataset of n_rows rows. Checks every index (< n_rows, no repeats) and that
 * both sets are non-empty. */
int gp_split_load(const char *name, const char *scheme, int k, size_t n_rows, gp_split *sp,
                  gp_error *err);
/* Same from an explicit split file ("test20" or "fold10" format). */
int gp_split_load_file(const char *path, const char *scheme, int k, size_t n_rows, gp_split *sp,
                       gp_error *err);
/* Keep at most max_train training rows, chosen deterministically from seed:
 * a partial Fisher-Yates shuffle of the training list with gp_rng_seed(seed)
 * and gp_rng_below (pick i swaps position i with i + below(n_train - i)), the
 * first max_train picks kept and sorted back into row order. For one seed, the
 * rows kept for a smaller max_train are a subset of those for a larger one. No
 * change when n_train <= max_train; max_train = 0 is GP_EINVAL. */
int gp_split_subsample_train(gp_split *sp, size_t max_train, uint64_t seed, gp_error *err);
void gp_split_free(gp_split *sp);

/* Convenience: load dataset `name`, split k of `scheme`, optional subsample
 * of the training set (max_train = 0: none), and the train/test subsets.
 * sp (may be NULL) receives the row indices used. On failure nothing is left
 * allocated. */
int gp_dataset_load_split(const char *name, const char *scheme, int k, size_t max_train,
                          uint64_t seed, gp_dataset *train, gp_dataset *test, gp_split *sp,
                          gp_error *err);

/* Write count row indices, space-separated on one line (the test20 format),
 * to path. */
int gp_indices_write(const char *path, const size_t *idx, size_t count, gp_error *err);


#endif
