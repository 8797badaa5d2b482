/* Benchmark of the `exact` GP method: accuracy and fit time on the shared
 * regression datasets, the cost of one LML + gradient evaluation next to the
 * LAPACK floor (dpotrf + dpotri), and in-process prediction latency.
 *
 * Run from the repository root (make bench, or bench/run.sh BUILD_DIR):
 *   build/bench/bench_exact [--quick] [--only fit,lml,predict] [--splits-out DIR]
 * Prints markdown tables to stdout and progress notes to stderr.
 *
 * Datasets: $GPSERVE_DATASETS or ../shared/datasets (skipped with a message
 * when absent; the lml and predict sections then use synthetic data).
 * Every configuration is split 0 of its split file; kin8nm and power have
 * their training set subsampled to 2000 and 4000 rows by
 * gp_split_subsample_train with seed SUBSAMPLE_SEED (for one seed the 2000 rows
 * are a subset of the 4000).
 *
 * --splits-out DIR writes, for the scikit-learn side (bench/sklearn_exact.py),
 * DIR/configs.tsv (tag, dataset, scheme, split, max_train, seed) and, per
 * configuration, DIR/<tag>.train.txt and DIR/<tag>.test.txt: the 0-based CSV
 * data-row indices actually used, space-separated on one line. Python reads
 * these instead of re-implementing the subsampling generator, so both sides fit
 * exactly the same rows. */
#include <lapacke.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/support/args.h"
#include "bench/support/blas.h"
#include "bench/support/cli.h"
#include "bench/support/clock.h"
#include "bench/support/dataset.h"
#include "bench/support/fit.h"
#include "bench/support/scores.h"
#include "core/base/error.h"
#include "core/base/parallel.h"
#include "core/base/rng.h"
#include "core/kernel/kernel.h"
#include "core/kernel/lml.h"
#include "core/methods/registry.h"
#include "core/model/model.h"

#define SUBSAMPLE_SEED 0
#define FIT_SEED 0

typedef struct config {
    const char *tag;
    const char *name;
    const char *scheme;
    int split;
    size_t max_train; /* 0: the whole training set */
    int quick;        /* part of --quick */
    int restarts;     /* exact's `restarts` option; rows with restarts are ours only */
} config;

static const config configs[] = {
    {"concrete", "concrete", "test20", 0, 0, 1, 0},
    {"airfoil", "airfoil", "fold10", 0, 0, 0, 0},
    {"energy", "energy", "test20", 0, 0, 1, 0},
    {"wine_red", "wine_red", "test20", 0, 0, 0, 0},
    {"kin8nm_n2000", "kin8nm", "test20", 0, 2000, 1, 0},
    {"kin8nm_n4000", "kin8nm", "test20", 0, 4000, 0, 0},
    {"power_n2000", "power", "test20", 0, 2000, 0, 0},
    {"power_n4000", "power", "test20", 0, 4000, 0, 0},
    /* power at 4000 is multimodal: the same start reaches a lower optimum than
     * scikit-learn's; seeded restarts find its optimum too. */
    {"power_n4000_restarts3", "power", "test20", 0, 4000, 0, 3},
};
#define N_CONFIGS (sizeof configs / sizeof configs[0])

typedef struct options {
    int quick;
    int do_fit, do_lml, do_predict;
    const char *splits_out;
} options;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

enum { S_FIT = 0, S_LML, S_PREDICT, N_SECTIONS };
static const char *const section_names[N_SECTIONS] = {"fit", "lml", "predict"};

/* 0 to run, 1 after --help, 2 after a message on stderr. */
static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    const char *only = NULL;
    const gp_bench_cli_option opts[] = {
        {"quick", GP_BENCH_CLI_FLAG, &o->quick, 0, 0, "fewer datasets and sizes"},
        {"only", GP_BENCH_CLI_STRING, &only, 0, 0,
         "sections to run, a comma list of fit, lml, predict (default: all)"},
        {"splits-out", GP_BENCH_CLI_STRING, &o->splits_out, 0, 0,
         "write the row indices of every configuration to this folder (read by "
         "bench/sklearn_exact.py --splits DIR)"},
    };
    size_t n_pos = 0;
    int rc = gp_bench_cli_parse(argc, argv, opts, sizeof opts / sizeof opts[0],
                                "[--quick] [--only fit,lml,predict] [--splits-out DIR]", NULL, 0,
                                &n_pos);
    if (rc != 0)
        return rc;
    int use[N_SECTIONS] = {1, 1, 1};
    if (only != NULL && gp_bench_parse_names(only, section_names, N_SECTIONS, use, "--only") != 0)
        return 2;
    if (use[S_FIT] + use[S_LML] + use[S_PREDICT] == 0)
        use[S_FIT] = use[S_LML] = use[S_PREDICT] = 1;
    o->do_fit = use[S_FIT];
    o->do_lml = use[S_LML];
    o->do_predict = use[S_PREDICT];
    return 0;
}

/* ---- data for one configuration ---- */

typedef struct loaded {
    gp_dataset train, test;
    gp_split split;
} loaded;

static void loaded_free(loaded *l)
{
    gp_dataset_free(&l->train);
    gp_dataset_free(&l->test);
    gp_split_free(&l->split);
}

static int load_config(const config *c, loaded *l, gp_error *err)
{
    memset(l, 0, sizeof *l);
    return gp_dataset_load_split(c->name, c->scheme, c->split, c->max_train, SUBSAMPLE_SEED,
                                 &l->train, &l->test, &l->split, err);
}

static int write_split_files(const char *dir, const config *c, const gp_split *sp,
                             gp_error *err)
{
    char path[GP_DATASET_PATH_LEN];
    int w = snprintf(path, sizeof path, "%s/%s.train.txt", dir, c->tag);
    if (w < 0 || (size_t)w >= sizeof path)
        return gp_error_set(err, GP_EINVAL, NULL, "--splits-out path too long");
    int rc = gp_indices_write(path, sp->train, sp->n_train, err);
    if (rc != GP_OK)
        return rc;
    snprintf(path, sizeof path, "%s/%s.test.txt", dir, c->tag);
    return gp_indices_write(path, sp->test, sp->n_test, err);
}

/* Write configs.tsv and the index files of every configuration (all of them,
 * also those a --quick run skips, so that the Python side can run any). */
static void write_all_splits(const char *dir)
{
    char path[GP_DATASET_PATH_LEN];
    snprintf(path, sizeof path, "%s/configs.tsv", dir);
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        fprintf(stderr, "bench_exact: cannot write %s\n", path);
        return;
    }
    fprintf(f, "tag\tdataset\tscheme\tsplit\tmax_train\tseed\tquick\n");
    for (size_t i = 0; i < N_CONFIGS; i++) {
        const config *c = &configs[i];
        if (c->restarts > 0) /* the same rows as the row without restarts */
            continue;
        gp_dataset all;
        gp_split sp;
        gp_error err;
        memset(&sp, 0, sizeof sp);
        gp_error_clear(&err);
        int rc = gp_dataset_load(c->name, &all, &err);
        if (rc == GP_OK) {
            rc = gp_split_load(c->name, c->scheme, c->split, all.n, &sp, &err);
            gp_dataset_free(&all);
        }
        if (rc == GP_OK && c->max_train > 0)
            rc = gp_split_subsample_train(&sp, c->max_train, SUBSAMPLE_SEED, &err);
        if (rc == GP_OK)
            rc = write_split_files(dir, c, &sp, &err);
        gp_split_free(&sp);
        if (rc != GP_OK) {
            fprintf(stderr, "bench_exact: %s: %s\n", c->tag, err.message);
            continue;
        }
        fprintf(f, "%s\t%s\t%s\t%d\t%zu\t%d\t%d\n", c->tag, c->name, c->scheme, c->split,
                c->max_train, SUBSAMPLE_SEED, c->quick);
    }
    if (fclose(f) != 0)
        fprintf(stderr, "bench_exact: error writing %s\n", path);
    else
        fprintf(stderr, "bench_exact: split indices written to %s\n", dir);
}

/* ---- fitting ---- */

/* exact on train by the shared protocol (bench/support/fit.h) with fit seed
 * FIT_SEED and `restarts` seeded restarts (none when 0). */
static int fit_exact(const gp_dataset *train, int restarts, gp_model **model, double *seconds,
                     gp_error *err)
{
    const gp_method *m = gp_method_find("exact");
    if (m == NULL)
        return gp_error_set(err, GP_EINVAL, NULL, "method 'exact' is not registered");
    gp_option_value opt = {.name = "restarts", .number = restarts};
    return gp_bench_fit_timed(m, &opt, restarts > 0 ? 1 : 0, train, FIT_SEED, model, seconds,
                              err);
}

static void print_env(void)
{
    char core[256];
    gp_bench_blas_line(core, sizeof core);
    printf("Environment: %s; %d compute threads; every section runs as the daemon: OpenBLAS "
           "single-threaded, the compute pool on every thread (the LAPACK floor alone uses "
           "OpenBLAS's threads); kernel rbf ARD (all hyperparameters "
           "start at 1), noise learned, standardize on, seed %d, restarts 0 unless the tag says.\n\n",
           core, gp_parallel_threads(), FIT_SEED);
}

/* The fit section. On success keeps the kin8nm N=2000 model for the predict
 * section in *keep (with its test set). */
static void section_fit(const options *o, int have_data, gp_model **keep, gp_dataset *keep_test)
{
    printf("## exact: fit and accuracy (split 0; RMSE and NLPD in original units)\n\n");
    if (!have_data) {
        printf("skipped: datasets not available\n\n");
        return;
    }
    printf("| dataset | split | N train | N test | d | fit s | iters | evals | conv | "
           "LML (orig) | LML (std units) | RMSE | NLPD | noise (std) | jitter |\n");
    printf("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    fflush(stdout);
    for (size_t i = 0; i < N_CONFIGS; i++) {
        const config *c = &configs[i];
        if (o->quick && !c->quick)
            continue;
        gp_error err;
        gp_error_clear(&err);
        loaded l;
        if (!gp_dataset_exists(c->name)) {
            printf("| %s | skipped: %s.csv not found | | | | | | | | | | | | | |\n", c->tag,
                   c->name);
            continue;
        }
        int rc = load_config(c, &l, &err);
        if (rc != GP_OK) {
            printf("| %s | load failed: %s | | | | | | | | | | | | | |\n", c->tag, err.message);
            continue;
        }
        fprintf(stderr, "bench_exact: fitting %s (N=%zu, d=%zu)...\n", c->tag, l.train.n,
                l.train.d);
        gp_model *model = NULL;
        double secs = 0.0;
        rc = fit_exact(&l.train, c->restarts, &model, &secs, &err);
        if (rc != GP_OK) {
            printf("| %s | %s %d | %zu | %zu | %zu | %.2f | fit failed: %s (%s) | | | | | | | "
                   "| |\n",
                   c->tag, c->scheme, c->split, l.train.n, l.test.n, l.train.d, secs,
                   gp_status_name(rc), err.message);
            loaded_free(&l);
            continue;
        }
        gp_test_scores s = {0, 0, 0};
        rc = gp_test_scores_compute(model, &l.test, &s, &err);
        double lml = model->diag.objective;
        double lml_std = lml + (double)l.train.n * log(model->y_scale);
        if (rc != GP_OK) {
            printf("| %s | %s %d | %zu | %zu | %zu | %.2f | %d | %d | %d | %.3f | %.3f | "
                   "predict failed: %s | | | |\n",
                   c->tag, c->scheme, c->split, l.train.n, l.test.n, l.train.d, secs,
                   model->diag.iterations, model->diag.evaluations, model->diag.converged, lml,
                   lml_std, err.message);
        } else {
            printf("| %s | %s %d | %zu | %zu | %zu | %.2f | %d | %d | %d | %.3f | %.3f | %.4g | "
                   "%.4f | %.3g | %.2g |%s\n",
                   c->tag, c->scheme, c->split, l.train.n, l.test.n, l.train.d, secs,
                   model->diag.iterations, model->diag.evaluations, model->diag.converged, lml,
                   lml_std, s.rmse, s.nlpd, model->noise_variance, model->diag.jitter,
                   s.clamped ? " (variances clamped)" : "");
        }
        fflush(stdout);
        if (keep != NULL && *keep == NULL && strcmp(c->name, "kin8nm") == 0 &&
            c->max_train == 2000 && rc == GP_OK) {
            *keep = model;
            *keep_test = l.test;
            memset(&l.test, 0, sizeof l.test);
        } else {
            gp_model_free(model);
        }
        loaded_free(&l);
    }
    printf("\nLML (std units) = objective + N log(y_scale): the LML of the standardised "
           "targets, comparable with scikit-learn's normalize_y=True value.\n\n");
}

/* ---- synthetic fallback ---- */

static int synthetic(size_t n, size_t d, uint64_t seed, gp_dataset *out, gp_error *err)
{
    memset(out, 0, sizeof *out);
    out->X = malloc(n * d * sizeof(double));
    out->y = malloc(n * sizeof(double));
    if (out->X == NULL || out->y == NULL) {
        gp_dataset_free(out);
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    }
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    for (size_t i = 0; i < n * d; i++)
        out->X[i] = 2.0 * gp_rng_uniform(&rng) - 1.0;
    for (size_t i = 0; i < n; i++) {
        double s = 0.0;
        for (size_t j = 0; j < d; j++)
            s += out->X[j * n + i] * (1.0 + 0.3 * (double)j);
        out->y[i] = sin(2.0 * s) + 0.1 * gp_rng_normal(&rng);
    }
    out->n = n;
    out->d = d;
    snprintf(out->name, sizeof out->name, "synthetic");
    return GP_OK;
}

/* ---- LML + gradient cost ---- */

static void section_lml(const options *o, int have_data)
{
    static const size_t sizes[] = {1000, 2000, 4000};
    size_t n_sizes = o->quick ? 2 : 3;
    size_t nmax = sizes[n_sizes - 1];
    printf("## exact: one LML + gradient evaluation vs the LAPACK floor (median of 3)\n\n");
    gp_error err;
    gp_error_clear(&err);
    gp_dataset data;
    const char *source;
    int rc;
    if (have_data && gp_dataset_exists("kin8nm")) {
        gp_dataset test;
        rc = gp_dataset_load_split("kin8nm", "test20", 0, nmax, SUBSAMPLE_SEED, &data, &test,
                                   NULL, &err);
        gp_dataset_free(&test);
        source = "kin8nm (test20 split 0 training rows, subsampled, standardised), d = 8";
    } else {
        rc = synthetic(nmax, 8, 1, &data, &err);
        source = "synthetic (datasets not available), d = 8";
    }
    if (rc != GP_OK) {
        printf("skipped: %s\n\n", err.message);
        return;
    }
    printf("Data: %s; kernel rbf ARD with every hyperparameter 1, noise variance 0.1. "
           "Floor = LAPACKE_dpotrf + LAPACKE_dpotri (column-major, lower) on K + 0.1 I of the "
           "same N, OpenBLAS on every thread; LML+grad with OpenBLAS single-threaded and the "
           "compute pool on every thread (the daemon's set-up).\n\n",
           source);
    printf("| N | LML+grad s | dpotrf+dpotri s | ratio | LML |\n|---:|---:|---:|---:|---:|\n");
    fflush(stdout);
    size_t d = data.d;
    double *xm = malloc(d * sizeof(double)), *xs = malloc(d * sizeof(double));
    double ym, ys;
    gp_kernel *k = NULL;
    if (xm == NULL || xs == NULL ||
        gp_kernel_leaf(&k, GP_KERNEL_RBF, d, 1, NULL, 0, &err) != GP_OK) {
        printf("skipped: %s\n\n", err.message[0] ? err.message : "out of memory");
        free(xm);
        free(xs);
        gp_dataset_free(&data);
        return;
    }
    size_t np = gp_kernel_n_params(k) + 1;
    double *grad = malloc(np * sizeof(double));
    for (size_t si = 0; si < n_sizes; si++) {
        size_t n = sizes[si];
        if (n > data.n)
            break;
        /* first n rows of the (sorted) subsample, standardised by their own stats */
        double *Xc = malloc(n * d * sizeof(double));
        double *Xt = malloc(n * d * sizeof(double));
        double *y = malloc(n * sizeof(double));
        double *K = malloc(n * n * sizeof(double));
        double *W = malloc(n * n * sizeof(double));
        if (Xc == NULL || Xt == NULL || y == NULL || K == NULL || W == NULL || grad == NULL) {
            printf("| %zu | out of memory | | | |\n", n);
            free(Xc);
            free(Xt);
            free(y);
            free(K);
            free(W);
            break;
        }
        for (size_t j = 0; j < d; j++)
            memcpy(Xc + j * n, data.X + j * data.n, n * sizeof(double));
        gp_column_stats(Xc, n, d, xm, xs);
        gp_column_stats(data.y, n, 1, &ym, &ys);
        for (size_t i = 0; i < n; i++) {
            for (size_t j = 0; j < d; j++)
                Xt[i * d + j] = (Xc[j * n + i] - xm[j]) / xs[j];
            y[i] = (data.y[i] - ym) / ys;
        }
        double t_lml[3], t_floor[3], lml = NAN;
        int ok = 1;
        gp_blas_set_threads(1); /* ours as the daemon runs it */
        for (int r = 0; r < 3 && ok; r++) {
            double t0 = gp_bench_seconds();
            rc = gp_exact_lml_grad(k, 0.1, Xt, d, n, y, &lml, grad, &err);
            t_lml[r] = gp_bench_seconds() - t0;
            if (rc != GP_OK) {
                printf("| %zu | failed: %s | | | |\n", n, err.message);
                ok = 0;
            }
        }
        if (ok) {
            gp_kernel_gram(k, Xt, n, K, n);
            for (size_t i = 0; i < n; i++)
                K[i * n + i] += 0.1;
            gp_blas_set_threads(gp_parallel_threads()); /* the floor: LAPACK at its best */
            for (int r = 0; r < 3 && ok; r++) {
                memcpy(W, K, n * n * sizeof(double));
                double t0 = gp_bench_seconds();
                lapack_int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)n, W,
                                                 (lapack_int)n);
                if (info == 0)
                    info = LAPACKE_dpotri(LAPACK_COL_MAJOR, 'L', (lapack_int)n, W,
                                          (lapack_int)n);
                t_floor[r] = gp_bench_seconds() - t0;
                if (info != 0) {
                    printf("| %zu | | dpotrf/dpotri info %d | | |\n", n, (int)info);
                    ok = 0;
                }
            }
        }
        if (ok) {
            double a = median(t_lml, 3), b = median(t_floor, 3);
            printf("| %zu | %.3f | %.3f | %.2f | %.3f |\n", n, a, b, a / b, lml);
            fflush(stdout);
        }
        free(Xc);
        free(Xt);
        free(y);
        free(K);
        free(W);
    }
    printf("\n");
    free(grad);
    free(xm);
    free(xs);
    gp_kernel_free(k);
    gp_dataset_free(&data);
}

/* ---- prediction latency ---- */

static void section_predict(const options *o, int have_data, gp_model *model,
                            const gp_dataset *test_in)
{
    printf("## exact: in-process prediction at N = 2000 (observation variance)\n\n");
    gp_error err;
    gp_error_clear(&err);
    gp_model *own = NULL;
    gp_dataset test;
    memset(&test, 0, sizeof test);
    const gp_dataset *T = test_in;
    const char *source = "kin8nm (test20 split 0, training set subsampled to 2000)";
    if (model == NULL) {
        gp_dataset train;
        int rc;
        if (have_data && gp_dataset_exists("kin8nm")) {
            rc = gp_dataset_load_split("kin8nm", "test20", 0, 2000, SUBSAMPLE_SEED, &train,
                                       &test, NULL, &err);
        } else {
            source = "synthetic d = 8 (datasets not available)";
            rc = synthetic(2000, 8, 1, &train, &err);
            if (rc == GP_OK)
                rc = synthetic(1000, 8, 2, &test, &err);
        }
        double secs;
        if (rc == GP_OK) {
            fprintf(stderr, "bench_exact: fitting the N=2000 model for the predict section...\n");
            rc = fit_exact(&train, 0, &own, &secs, &err);
        }
        gp_dataset_free(&train);
        if (rc != GP_OK) {
            printf("skipped: %s\n\n", err.message);
            gp_dataset_free(&test);
            return;
        }
        model = own;
        T = &test;
    }
    gp_blas_set_threads(1); /* as the daemon */
    size_t d = T->d, nt = T->n;
    size_t calls = o->quick ? 500 : 2000, warm = 50, batch = 1000;
    double *lat = malloc(calls * sizeof(double));
    double *Xb = malloc(batch * d * sizeof(double));
    double *mb = malloc(batch * sizeof(double)), *vb = malloc(batch * sizeof(double));
    if (lat == NULL || Xb == NULL || mb == NULL || vb == NULL) {
        printf("skipped: out of memory\n\n");
        goto done;
    }
    /* single-point predictions, cycling through the test points */
    double x[64];
    if (d > 64) {
        printf("skipped: d > 64\n\n");
        goto done;
    }
    for (size_t c = 0; c < warm + calls; c++) {
        size_t i = c % nt;
        for (size_t j = 0; j < d; j++)
            x[j] = T->X[j * nt + i];
        double mean, var;
        gp_predict_request pr = {.X = x, .m = 1, .d = d, .include_noise = 1};
        gp_prediction out = {.mean = &mean, .variance = &var};
        double t0 = gp_bench_seconds();
        int rc = gp_model_predict(model, &pr, &out, &err);
        double dt = gp_bench_seconds() - t0;
        if (rc != GP_OK) {
            printf("predict failed: %s\n\n", err.message);
            goto done;
        }
        if (c >= warm)
            lat[c - warm] = dt;
    }
    qsort(lat, calls, sizeof *lat, cmp_double);
    double med = calls % 2 ? lat[calls / 2] : 0.5 * (lat[calls / 2 - 1] + lat[calls / 2]);
    size_t i99 = (size_t)ceil(0.99 * (double)calls) - 1;
    double p99 = lat[i99];
    /* batch of 1000 points (test points repeated when fewer), median of 5 */
    for (size_t i = 0; i < batch; i++)
        for (size_t j = 0; j < d; j++)
            Xb[j * batch + i] = T->X[j * nt + i % nt];
    double tb[5];
    for (int r = 0; r < 5; r++) {
        gp_predict_request pr = {.X = Xb, .m = batch, .d = d, .include_noise = 1};
        gp_prediction out = {.mean = mb, .variance = vb};
        double t0 = gp_bench_seconds();
        int rc = gp_model_predict(model, &pr, &out, &err);
        tb[r] = gp_bench_seconds() - t0;
        if (rc != GP_OK) {
            printf("batch predict failed: %s\n\n", err.message);
            goto done;
        }
    }
    double bmed = median(tb, 5);
    printf("Model: %s, N = %zu, d = %zu.\n\n", source, model->n_train, d);
    printf("| measure | value |\n|---|---:|\n");
    printf("| single point (m = 1): median over %zu calls | %.1f us |\n", calls, med * 1e6);
    printf("| single point (m = 1): p99 | %.1f us |\n", p99 * 1e6);
    printf("| batch of %zu points: median of 5 | %.2f ms |\n", batch, bmed * 1e3);
    printf("| batch throughput | %.0f points/s |\n\n", (double)batch / bmed);
done:
    free(lat);
    free(Xb);
    free(mb);
    free(vb);
    gp_model_free(own);
    gp_dataset_free(&test);
}

int main(int argc, char **argv)
{
    gp_bench_blas_setup(argv);
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc == 1 ? 0 : 2;
    char why[512];
    int have_data = gp_datasets_present(why, sizeof why);
    printf("# bench_exact\n\n");
    print_env();
    if (!have_data)
        printf("Datasets skipped: %s (set GPSERVE_DATASETS to the shared datasets "
               "folder).\n\n",
               why);
    if (have_data && o.splits_out != NULL)
        write_all_splits(o.splits_out);
    gp_model *kin = NULL;
    gp_dataset kin_test;
    memset(&kin_test, 0, sizeof kin_test);
    gp_pool_start();
    if (o.do_fit) {
        gp_blas_set_threads(1); /* fits as the daemon runs them */
        section_fit(&o, have_data, o.do_predict ? &kin : NULL, &kin_test);
    }
    if (o.do_lml)
        section_lml(&o, have_data);
    if (o.do_predict)
        section_predict(&o, have_data, kin, &kin_test);
    gp_model_free(kin);
    gp_dataset_free(&kin_test);
    return 0;
}
