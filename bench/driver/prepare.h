/* gpbench: a dataset entry's own preprocessing and splits (bench/README.md).
 *
 * A paper may scale its inputs on the whole dataset, one-hot some columns,
 * standardise y itself and split by a seeded permutation (the M-SRFR paper's
 * Table 1 does all four). An entry saying "preprocess", "split_file" or the
 * scheme "permutation" is loaded here instead of by gp_dataset_load_split:
 *   "preprocess": {"x": "minmax" | "standard", "one_hot": [col, ...],
 *                  "y": "standard"}
 * X columns not one-hot encoded keep their order and are scaled on ALL rows
 * (MinMax to [0, 1], or mean and population std; a constant column becomes
 * 0), then each one_hot column's distinct values (ascending) become 0/1
 * columns; y is standardised with all rows' mean and population std (its
 * scale goes to *y_sd, 1 otherwise, so scores can be given in original
 * units). "scheme": "permutation" with "test_fraction" f and
 * "permutation_seed" s: split k is the Fisher-Yates permutation of
 * gp_rng_seed(s * 1000 + k); its first floor(f N) rows are the test set,
 * both sets in row order. "split_file": a split file of the scheme's format
 * (test20 or fold10) at that path (relative to the working directory, the
 * repository root) instead of the datasets folder's splits/<name>_<scheme>.txt:
 * a set shipped without splits gets seeded ones committed under bench/data/
 * (bench/multiclass_splits.py). */
#ifndef GP_BENCH_PREPARE_H
#define GP_BENCH_PREPARE_H

#include <jansson.h>

#include "bench/support/dataset.h"

/* 1 when dataset entry ds needs gpb_prepare_split (it has "preprocess",
 * "split_file" or the scheme "permutation"). */
int gpb_prepare_wanted(const json_t *ds);

/* The whole dataset of entry ds, preprocessed, into *all (caller frees);
 * y's scale into *y_sd. */
int gpb_prepare_all(const json_t *ds, gp_dataset *all, double *y_sd, gp_error *err);

/* Split k of the prepared rows all (scheme of ds) into train and test
 * (caller frees both). */
int gpb_prepare_split(const json_t *ds, const gp_dataset *all, int k, gp_dataset *train,
                      gp_dataset *test, gp_error *err);

/* The preprocessing of spec on ds in place (exposed for the unit test). */
int gpb_preprocess(const json_t *spec, gp_dataset *ds, double *y_sd, gp_error *err);

#endif
