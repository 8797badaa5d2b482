/* bench_hkd's shared parts: its settings, the record of one fit, and the
 * functions its files call across (bench/bench_hkd/main.c describes the benchmark).
 *
 * Files: main.c (options, main), fit.c (one fit, the symmetry option, predict
 * latency), large.c (part 1), trace.c (part 2), synth.c (part 3), table.c
 * (part 1's and 3's tables, the summary against the targets). */
#ifndef GP_BENCH_HKD_H
#define GP_BENCH_HKD_H

#include <stddef.h>
#include <stdint.h>

#include "bench/support/dataset.h"
#include "core/base/error.h"
#include "core/base/value.h"
#include "core/kernel/kernel.h"
#include "core/model/model.h"

#define DEFAULT_SPLITS 3
#define MAX_SPLITS 10
#define DEFAULT_OPT_SPLITS 1
#define DEFAULT_MAX_TRAIN 6000
#define MAX_M 8
#define MEDIAN_ROWS 2000
#define TRACE_ROWS 3000
#define PREDICT_CALLS 2000
#define PREDICT_WARMUP 200
#define PREDICT_POOL 1024
#define NOISE_INIT 0.1
#define HKD_WAYS 3
#define HKD_BLOCKS 8 /* 2^HKD_WAYS */
#define BENCH_PI 3.14159265358979323846
#define SYNTH_RADIUS 3.0
#define SYNTH_NOISE 0.1
#define SYNTH_TRAIN 4000
#define SYNTH_TEST 2000
#define SYNTH_BLOCKS 3 /* rotate2d order 4: floor(4/2) + 1 real blocks */
#define DEFAULT_SYNTH_SEEDS 3
/* The targets. */
#define TARGET_WINS 3
#define TARGET_PREDICT_US 100.0
#define TARGET_PREDICT_M 128
#define SYNTH_MARGIN 0.05

/* ---- configuration ---- */

typedef struct large_set {
    const char *name;
    const char *scheme;
    int slow; /* --slow-splits splits instead of --splits (hkd's fit there: see main.c) */
} large_set;

#define N_LARGE 5 /* kin40k, protein, elevators, keggdirected, bike */
extern const large_set hkdb_large_sets[N_LARGE];

/* Part 1 variants, in the order they are fitted on a split. */
enum { V_SGPR_M = 0, V_SGPR_2M, V_HKD, V_SGPR_2M_OPT, V_HKD_OPT, N_VARIANTS };

enum { P_LARGE = 0, P_TRACE, P_SYNTH, N_PARTS };

typedef struct options {
    int quick;
    int parts[N_PARTS];
    int use[N_VARIANTS];
    int splits, slow_splits, opt_splits;
    size_t max_train;
    size_t m[MAX_M], n_m;
    size_t trace_m[MAX_M], n_trace_m;
    size_t synth_m[MAX_M], n_synth_m;
    int synth_seeds;
    int synth_hkd_iterations; /* max_iterations of part 3's Z-optimised hkd fits; 0: hkd's default */
    size_t synth_train, synth_test;
    size_t trace_rows;
    int sgpr_optimize_inducing;
    int hkd_optimize_inducing; /* -1: not passed (hkd's default) */
    size_t predict_calls;
    char datasets[256];     /* empty: all five (--quick: kin40k) */
    char opt_datasets[256]; /* sets of the Z-optimised pair (default kin40k) */
    size_t opt_m[MAX_M], n_opt_m;
} options;

/* 1 when x is one of list[0..n). */
int hkdb_size_listed(const size_t *list, size_t n, size_t x);
/* 1 when the large set name is selected by --datasets (or --quick's default). */
int hkdb_set_selected(const options *o, const char *name);

/* ---- one fit (fit.c) ---- */

typedef enum sym_kind {
    SYM_NONE = 0,
    SYM_NEGATE_PCA,
    SYM_NEGATE_AXES,
    SYM_ROTATE2D,
    SYM_ROTATE2D_PER_BLOCK /* the same with "share_inducing": false (issue 40) */
} sym_kind;

/* {"generators": [...]} for kind on d inputs (heap; gp_value_free), NULL on ENOMEM. */
gp_value *hkdb_make_symmetry(sym_kind kind, size_t d);

typedef struct result {
    int ran, ok, unavailable;
    char error[320];
    double rmse, nlpd, seconds, predict_us;
    double cpu_seconds; /* the process's CPU time of the fit (all threads): robust to a loaded machine */
    int iterations, converged;
    size_t clamped;
    char info[512]; /* diag.evaluations and diag.info, for the progress log */
} result;

/* matern32 isotropic with lengthscale ell and variance 1 (working units). */
int hkdb_make_kernel(size_t d, double ell, gp_kernel **k, gp_error *err);
/* Fit method mname with opts on train (the benchmark's fixed start, seed);
 * *model NULL on failure, the outcome in r. */
void hkdb_fit_model(const char *mname, const gp_option_value *opts, size_t n_opts,
                    const gp_dataset *train, double ell, uint64_t seed, gp_model **model,
                    result *r);
/* RMSE and NLPD of model on test into r (r->ok = 1 on success). */
void hkdb_score_model(const gp_model *model, const gp_dataset *test, result *r);
/* Median of `calls` single-point predictions, each timed alone; NAN on failure. */
double hkdb_predict_latency_us(const gp_model *model, const gp_dataset *test, size_t calls);
/* One line (two with the method's diag.info) on stderr. */
void hkdb_progress(const char *what, const result *r);
/* The options of an hkd fit: symmetry and m a block; optimize_inducing when
 * optimize is 0 or 1 (-1: hkd's default). o has room for 3. */
size_t hkdb_hkd_options(const gp_value *sym, size_t m, int optimize, gp_option_value *o);
/* The options of an sgpr fit with M points, greedy selection. o has room for 3. */
size_t hkdb_sgpr_options(size_t M, int optimize_inducing, gp_option_value *o);

/* ---- part 1: the large sets (large.c) ---- */

typedef struct large_cell { /* one (dataset, m, variant): all splits */
    result r[MAX_SPLITS];
} large_cell;

typedef struct large_outcome {
    int ran, splits;
    size_t n_train, n_train_full, n_test, d;
    double ell[MAX_SPLITS];
    large_cell cell[MAX_M][N_VARIANTS];
} large_outcome;

/* The table label of part 1's variant v at m. */
void hkdb_variant_label(int v, size_t m, char *buf, size_t len);
/* Every split and m of one large set: the fits into *out, progress on stderr. */
void hkdb_run_large_set(const options *o, const large_set *ls, large_outcome *out);

/* ---- part 2: the trace-error study (trace.c), its table included ---- */

void hkdb_run_trace(const options *o);

/* ---- part 3: the synthetic set (synth.c) ---- */

enum { S_HKD = 0, S_SGPR, S_HKD_FIXED, S_HKD_PLAIN_FIXED, S_SGPR_FIXED, S_HKD_PER_BLOCK, N_SYNTH };

typedef struct synth_outcome {
    int ran;
    result r[MAX_M][N_SYNTH][20];
} synth_outcome;

/* The table label of part 3's variant v at m. */
void hkdb_synth_label(int v, size_t m, char *buf, size_t len);
/* Every seed and m of the synthetic set, then its table. */
void hkdb_run_synth(const options *o, synth_outcome *so);

/* ---- tables (table.c) ---- */

void hkdb_print_large_table(const options *o, const large_set *ls, const large_outcome *lo);
void hkdb_print_synth_table(const options *o, const synth_outcome *so);
/* The summary against the targets, from every part that ran. */
void hkdb_print_targets(const options *o, const large_outcome *lo, const synth_outcome *so);

#endif
