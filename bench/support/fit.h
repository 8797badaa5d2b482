/* Benchmark support: one regression fit of a benchmark, timed and scored,
 * and the small pieces around it (options typed from text, diag.info as text,
 * mean and std over splits).
 *
 * The fit is the protocol every side-by-side regression table needs: kernel
 * rbf with ARD at its default start (all hyperparameters 1 in working units),
 * noise learned from its default start, standardize = 1 on the raw rows (the
 * method standardises X and y itself), a given seed; then the test scores of
 * bench/support/scores.h in original units. A method missing from the
 * registry is reported as unavailable rather than an error, so a benchmark
 * can be built and run before every method it compares is merged. */
#ifndef GP_BENCH_FIT_H
#define GP_BENCH_FIT_H

#include <stddef.h>
#include <stdint.h>

#include "bench/support/dataset.h"
#include "bench/support/scores.h"
#include "core/kernel/kernel.h"
#include "core/model/model.h"

typedef struct gp_bench_run {
    int ok;          /* fitted and scored */
    int unavailable; /* the method is not in this build's registry */
    char error[320]; /* why not ok */
    double seconds;  /* wall time of gp_model_fit alone (CLOCK_MONOTONIC) */
    gp_test_scores scores;
} gp_bench_run;

/* What a fit may change of the protocol above (gp_bench_fit_timed_with):
 * gp_bench_fit_default() is the protocol itself. */
typedef struct gp_bench_fit_setup {
    int standardize;          /* 1 (default): the method standardises X and y */
    int noise_given;          /* 1: noise starts at (or is fixed to) noise_variance */
    int noise_fixed;          /* 1: the noise is not learned */
    double noise_variance;    /* working units */
    gp_likelihood likelihood; /* default gaussian */
    gp_mean_type mean;        /* default zero ("mean": "constant" | "linear") */
    gp_kernel_type kernel;    /* default rbf */
    int ard;                  /* default 1: one lengthscale per input */
    double lengthscale;       /* > 0: every lengthscale starts there (default 0: 1) */
    size_t median_rows;       /* > 0: they start at the median heuristic of so many rows */
    int default_priors;       /* 1: the "default" priors preset (core/model/hyperspec.h);
                                 -1: "none", a spec stating nothing (no method's default) */
    double noise_lo, noise_hi; /* > 0: bounds on the noise variance (working units) */
} gp_bench_fit_setup;

gp_bench_fit_setup gp_bench_fit_default(void);

/* The fit alone, as described above: options validated, then gp_model_fit
 * timed into *seconds; the model (caller frees) into *model. */
int gp_bench_fit_timed_with(const gp_method *m, const gp_option_value *opts, size_t n_opts,
                            const gp_dataset *train, uint64_t seed, const gp_bench_fit_setup *su,
                            gp_model **model, double *seconds, gp_error *err);
/* gp_bench_fit_timed_with the default setup. */
int gp_bench_fit_timed(const gp_method *m, const gp_option_value *opts, size_t n_opts,
                       const gp_dataset *train, uint64_t seed, gp_model **model, double *seconds,
                       gp_error *err);

/* Fit method `name` (options opts[0..n_opts), validated first) on train as
 * described above with fit seed `seed`, then score it on test. The model
 * goes to *model when model is not NULL (the caller frees it; NULL when the
 * fit failed), else it is freed here. Returns r->ok. */
int gp_bench_fit_score(const char *name, const gp_option_value *opts, size_t n_opts,
                       const gp_dataset *train, const gp_dataset *test, uint64_t seed,
                       gp_model **model, gp_bench_run *r);

/* The value text of option `name` of method m typed by its spec into *out
 * (out->name = name, out->string may point into text; both must outlive
 * out): INT and NUMBER as numbers (or a keyword the spec accepts, e.g.
 * "auto"), BOOL as true/false/1/0, ENUM as its text. -1 with the reason in
 * why when m has no such option or the text does not parse. */
int gp_bench_option_from_text(const gp_method *m, const char *name, const char *text,
                              gp_option_value *out, char *why, size_t why_len);

/* The model's diag.info as "key value, key value" (numbers with %.6g). */
void gp_bench_info_text(const gp_model *model, char *buf, size_t len);
/* The number diag.info reports under key, NAN when absent or a string. */
double gp_bench_info_number(const gp_model *model, const char *key);

/* The median heuristic: the median pairwise Euclidean distance of the
 * standardised columns of X (n x d, column-major) over at most max_rows rows
 * chosen with seed (a partial Fisher-Yates of gp_rng); 1 when there are
 * fewer than 2 rows or the median is not positive. */
double gp_bench_median_heuristic(const double *X, size_t n, size_t d, size_t max_rows,
                                 uint64_t seed);

/* Mean and standard deviation (ddof 0) of the finite entries of x[0..n)
 * into out[0], out[1]; NAN both when there is none. */
void gp_bench_mean_std(const double *x, size_t n, double out[2]);

#endif
