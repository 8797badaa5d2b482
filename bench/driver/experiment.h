/* gpbench: experiment files (the format is described in bench/README.md).
 *
 * An experiment is a JSON object read with jansson; this module turns it
 * into the list of fits to run: the datasets and their splits (cut down by
 * the experiment's "quick" preset or --datasets), and each entry of "runs"
 * expanded over its "grid" (the cartesian product, first key slowest), with
 * the dataset's "rules" applied (an option set or the fit skipped when the
 * run's options match). Ownership: every json_t returned is a new reference
 * the caller releases with json_decref. */
#ifndef GP_BENCH_EXPERIMENT_H
#define GP_BENCH_EXPERIMENT_H

#include <jansson.h>
#include <stddef.h>

/* The experiment in path, checked for the fields the driver needs; NULL with
 * the reason on stderr. */
json_t *gpb_experiment_load(const char *path);

/* The datasets to run, in file order: those of the quick preset when quick,
 * and only those named in the comma-separated only (when not NULL). */
json_t *gpb_experiment_datasets(const json_t *exp, int quick, const char *only);

/* The split numbers of a dataset entry ("splits": [k, ...] or a count K for
 * 0..K-1; [0] when absent; the quick preset's "splits" count when quick). */
json_t *gpb_dataset_splits(const json_t *exp, const json_t *ds, int quick);

/* Every run of the experiment expanded for dataset entry ds (NULL: none):
 * objects {"method", "label", "options"} with the grid's values (the
 * dataset's "grid", then the quick preset's when quick, replacing the values
 * of the keys they name) and the label's {key} filled. */
json_t *gpb_experiment_runs(const json_t *exp, const json_t *ds, int quick);

/* The dataset's rules, then the quick preset's "rules" when quick, applied
 * to one expanded run on a training set of n_train rows (a new object:
 * options with the matching rules' "set" merged in, "skip" holding the
 * reason when a matching rule says to skip it). A rule's "when" matches the
 * run's "method", its options, and "n_train_above" (n_train > the value). */
json_t *gpb_apply_rules(const json_t *exp, const json_t *ds, const json_t *run, int quick,
                        size_t n_train);

#endif
