/* Benchmark of the `ssgp` method (sparse-spectrum GP on random Fourier
 * features): accuracy, calibration, fit time and LML on the shared regression
 * datasets, for every frequency sampler (mc, qmc, orf, stein and auto), fixed
 * and learned frequencies, R = 100 and 500, next to the exact GP.
 *
 * Run from the repository root (bench/run.sh runs it without arguments: the
 * full benchmark):
 *   build/bench/bench_ssgp [--quick] [--datasets a,b] [--R 100,500]
 *                          [--max-iterations N] [--samplers LIST] [--no-exact]
 * Prints markdown tables to stdout (one per dataset) and progress to stderr.
 *
 * Datasets: $GPSERVE_DATASETS or ../shared/datasets (skipped with a message
 * when absent). Split: test20 split 0 (the first line of
 * splits/<name>_test20.txt) where it exists, fold10 fold 0 for airfoil. The
 * whole training set is used (no subsampling).
 *
 * Every fit: kernel rbf ARD (all hyperparameters start at 1 in standardised
 * units), noise learned, standardize on, seed FIT_SEED. RMSE and mean NLPD per
 * test point are in original units, NLPD from the Gaussian with the
 * observation variance (include_noise = 1). LML = diag.objective (original
 * units). Fit seconds are wall time (CLOCK_MONOTONIC) around gp_model_fit.
 *
 * Cost caps (stated in each table; --max-iterations overrides them): at
 * R = 500 one LML + gradient evaluation is ~1 s on kin8nm and power (7-9k
 * training rows) and ~6 s on protein (41k rows, ~4e10 flops), so L-BFGS is
 * capped there (LARGE_MAX_ITERATIONS, PROTEIN_MAX_ITERATIONS*); protein's
 * exact GP (an N x N matrix of 13 GB, above the method's 20000-point cap) is
 * not run. The exact GP of kin8nm and power (full training sets) takes minutes.
 * --samplers LIST restricts the samplers. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/support/args.h"
#include "bench/support/clock.h"
#include "bench/support/dataset.h"
#include "bench/support/scores.h"
#include "core/base/error.h"
#include "core/kernel/kernel.h"
#include "core/methods/registry.h"
#include "core/model/model.h"

#define FIT_SEED 0
/* Iteration caps that keep the full run within ~45 minutes on the 2-core VM:
 * one LML + gradient evaluation at R = 500 costs ~1 s on kin8nm/power (7-9k
 * rows) and ~6 s on protein (41k rows), and learned frequencies use all 200
 * iterations. */
#define LARGE_MAX_ITERATIONS 40
#define PROTEIN_MAX_ITERATIONS 30
#define PROTEIN_MAX_ITERATIONS_LARGE 15
#define MAX_R 8

typedef struct dataset_config {
    const char *name;
    const char *scheme;
    int split;
    int exact;          /* run the exact GP next to it */
    int max_iterations; /* R <= 100: 0 = the method's default (or --max-iterations) */
    int max_iterations_large; /* the same for R > 100 (the cost grows as R^2) */
    int quick;          /* part of --quick */
} dataset_config;

static const dataset_config datasets[] = {
    {"airfoil", "fold10", 0, 1, 0, 0, 0},
    {"concrete", "test20", 0, 1, 0, 0, 1},
    {"energy", "test20", 0, 1, 0, 0, 1},
    {"wine_red", "test20", 0, 1, 0, 0, 0},
    {"kin8nm", "test20", 0, 1, 0, LARGE_MAX_ITERATIONS, 0},
    {"power", "test20", 0, 1, 0, LARGE_MAX_ITERATIONS, 0},
    {"protein", "test20", 0, 0, PROTEIN_MAX_ITERATIONS, PROTEIN_MAX_ITERATIONS_LARGE, 0},
};
#define N_DATASETS (sizeof datasets / sizeof datasets[0])

static const char *const samplers[] = {"mc", "qmc", "orf", "stein", "auto"};
#define N_SAMPLERS (sizeof samplers / sizeof samplers[0])
static const char *const quick_samplers[] = {"qmc", "auto"};

typedef struct options {
    int quick;
    int no_exact;
    int max_iterations; /* 0: default */
    size_t R[MAX_R];
    size_t n_R;
    char datasets[512]; /* comma list, empty: all */
    const char *samp[8];  /* --samplers (n_samp 0: the defaults) */
    size_t n_samp;
    char samp_buf[128];
} options;

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [--quick] [--datasets a,b] [--R 100,500] [--max-iterations N] "
            "[--samplers LIST] [--no-exact]\n"
            "  --quick             concrete and energy, R = 100, samplers qmc and auto\n"
            "  --datasets LIST     datasets to run (default: airfoil, concrete, energy,\n"
            "                      wine_red, kin8nm, power, protein)\n"
            "  --R LIST            numbers of frequencies (default 100,500)\n"
            "  --max-iterations N  L-BFGS iterations of every ssgp fit (default: the\n"
            "                      method's 200; R > 100 on kin8nm and power %d;\n"
            "                      protein %d, R > 100 %d)\n"
            "  --samplers LIST     samplers (default mc,qmc,orf,stein,auto; --quick:\n"
            "                      qmc,auto)\n"
            "  --no-exact          skip the exact GP rows\n",
            prog, LARGE_MAX_ITERATIONS, PROTEIN_MAX_ITERATIONS, PROTEIN_MAX_ITERATIONS_LARGE);
}

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    int have_R = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--quick") == 0) {
            o->quick = 1;
        } else if (strcmp(a, "--no-exact") == 0) {
            o->no_exact = 1;
        } else if (strcmp(a, "--datasets") == 0 && i + 1 < argc) {
            snprintf(o->datasets, sizeof o->datasets, "%s", argv[++i]);
        } else if (strcmp(a, "--max-iterations") == 0 && i + 1 < argc) {
            char *end = NULL;
            long v = strtol(argv[++i], &end, 10);
            if (end == argv[i] || *end != '\0' || v < 1 || v > 100000) {
                fprintf(stderr, "bad --max-iterations '%s'\n", argv[i]);
                return -1;
            }
            o->max_iterations = (int)v;
        } else if (strcmp(a, "--R") == 0 && i + 1 < argc) {
            char buf[256];
            snprintf(buf, sizeof buf, "%s", argv[++i]);
            o->n_R = 0;
            for (char *save = NULL, *t = strtok_r(buf, ",", &save); t != NULL;
                 t = strtok_r(NULL, ",", &save)) {
                char *end = NULL;
                long v = strtol(t, &end, 10);
                if (end == t || *end != '\0' || v < 1 || v > 20000 || o->n_R >= MAX_R) {
                    fprintf(stderr, "bad --R entry '%s' (1..20000, at most %d)\n", t, MAX_R);
                    return -1;
                }
                o->R[o->n_R++] = (size_t)v;
            }
            have_R = o->n_R > 0;
        } else if (strcmp(a, "--samplers") == 0 && i + 1 < argc) {
            snprintf(o->samp_buf, sizeof o->samp_buf, "%s", argv[++i]);
            o->n_samp = 0;
            for (char *save = NULL, *t = strtok_r(o->samp_buf, ",", &save); t != NULL;
                 t = strtok_r(NULL, ",", &save)) {
                int known = 0;
                for (size_t k = 0; k < N_SAMPLERS; k++)
                    if (strcmp(t, samplers[k]) == 0)
                        known = 1;
                if (!known || o->n_samp >= sizeof o->samp / sizeof o->samp[0]) {
                    fprintf(stderr, "bad --samplers entry '%s'\n", t);
                    return -1;
                }
                o->samp[o->n_samp++] = t;
            }
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(argv[0]);
            exit(0);
        } else {
            usage(argv[0]);
            return -1;
        }
    }
    if (!have_R) {
        if (o->quick) {
            o->R[0] = 100;
            o->n_R = 1;
        } else {
            o->R[0] = 100;
            o->R[1] = 500;
            o->n_R = 2;
        }
    }
    return 0;
}

static int dataset_selected(const options *o, const dataset_config *c)
{
    if (o->datasets[0] == '\0')
        return o->quick ? c->quick : 1;
    return gp_bench_list_has(o->datasets, c->name);
}

/* ---- one fit ---- */

typedef struct result {
    int ok;
    char error[320];
    double rmse, nlpd, seconds, lml;
    int iterations, evaluations, converged;
    size_t clamped;
    char chosen[16]; /* the sampler actually used (auto's choice) */
    int redrawn;     /* auto: redrawn after the first fit */
    double spread;
    double noise; /* working units */
} result;

static void read_info(const gp_model *model, result *r)
{
    r->spread = NAN;
    for (size_t i = 0; i < model->diag.n_info; i++) {
        const gp_info_item *it = &model->diag.info[i];
        if (strcmp(it->key, "frequencies") == 0 && it->string != NULL)
            snprintf(r->chosen, sizeof r->chosen, "%s", it->string);
        else if (strcmp(it->key, "spread") == 0 && it->string == NULL)
            r->spread = it->number;
        else if (strcmp(it->key, "auto_redrawn") == 0 && it->string != NULL)
            r->redrawn = strcmp(it->string, "true") == 0;
    }
}

/* method "ssgp" when sampler != NULL, else "exact" with bench_exact's defaults. */
static void run_fit(const gp_dataset *train, const gp_dataset *test, const char *sampler,
                    size_t R, int learned, int max_iterations, result *r)
{
    memset(r, 0, sizeof *r);
    gp_error err;
    gp_error_clear(&err);
    const char *mname = sampler != NULL ? "ssgp" : "exact";
    const gp_method *m = gp_method_find(mname);
    if (m == NULL) {
        snprintf(r->error, sizeof r->error, "method '%s' is not registered", mname);
        return;
    }
    gp_kernel *k = NULL;
    int rc = gp_kernel_leaf(&k, GP_KERNEL_RBF, train->d, 1, NULL, 0, &err);
    if (rc != GP_OK) {
        snprintf(r->error, sizeof r->error, "kernel: %s", err.message);
        return;
    }
    gp_option_value opts[4];
    size_t n_opts = 0;
    if (sampler != NULL) {
        opts[n_opts++] = (gp_option_value){.name = "features", .number = (double)R};
        opts[n_opts++] = (gp_option_value){.name = "frequencies", .string = sampler};
        opts[n_opts++] = (gp_option_value){.name = "learn_frequencies", .number = learned};
        if (max_iterations > 0)
            opts[n_opts++] =
                (gp_option_value){.name = "max_iterations", .number = max_iterations};
    }
    gp_fit_request req;
    memset(&req, 0, sizeof req);
    req.X = train->X;
    req.y = train->y;
    req.n = train->n;
    req.d = train->d;
    req.kernel = k;
    req.standardize = 1;
    req.seed = FIT_SEED;
    req.options = n_opts > 0 ? opts : NULL;
    req.n_options = n_opts;
    gp_model *model = NULL;
    rc = gp_options_validate(m, opts, n_opts, &err);
    double t0 = gp_bench_seconds();
    if (rc == GP_OK)
        rc = gp_model_fit(m, &req, &model, &err);
    r->seconds = gp_bench_seconds() - t0;
    gp_kernel_free(k);
    if (rc != GP_OK) {
        snprintf(r->error, sizeof r->error, "fit failed: %s (%s)", gp_status_name(rc),
                 err.message);
        return;
    }
    r->lml = model->diag.objective;
    r->iterations = model->diag.iterations;
    r->evaluations = model->diag.evaluations;
    r->converged = model->diag.converged;
    r->noise = model->noise_variance;
    read_info(model, r);
    gp_test_scores sc = {0, 0, 0};
    rc = gp_test_scores_compute(model, test, &sc, &err);
    r->rmse = sc.rmse;
    r->nlpd = sc.nlpd;
    r->clamped = sc.clamped;
    if (rc != GP_OK)
        snprintf(r->error, sizeof r->error, "predict failed: %s", err.message);
    else
        r->ok = 1;
    gp_model_free(model);
}

/* ---- table ---- */

static void print_cells(const result *r)
{
    if (!r->ok) {
        printf(" %s | | | |", r->error[0] ? r->error : "not run");
        return;
    }
    printf(" %.4g | %.3f | %.2f (%d%s) | %.1f |", r->rmse, r->nlpd, r->seconds, r->iterations,
           r->converged ? "" : "*", r->lml);
}

static void print_fit_note(const char *what, const result *r)
{
    if (r->ok)
        fprintf(stderr, "bench_ssgp:   %-26s RMSE %.4g NLPD %.3f LML %.1f %.2f s (%d it, %d ev%s)%s%s\n",
                what, r->rmse, r->nlpd, r->lml, r->seconds, r->iterations, r->evaluations,
                r->converged ? "" : ", not converged", r->chosen[0] ? " used " : "",
                r->chosen);
    else
        fprintf(stderr, "bench_ssgp:   %-26s %s\n", what, r->error);
}

static void run_dataset(const options *o, const dataset_config *c)
{
    printf("## %s\n\n", c->name);
    if (!gp_dataset_exists(c->name)) {
        printf("skipped: %s.csv not found in the datasets folder\n\n", c->name);
        fflush(stdout);
        return;
    }
    gp_dataset train, test;
    gp_split sp;
    gp_error err;
    gp_error_clear(&err);
    memset(&train, 0, sizeof train);
    memset(&test, 0, sizeof test);
    memset(&sp, 0, sizeof sp);
    int rc = gp_dataset_load_split(c->name, c->scheme, c->split, 0, 0, &train, &test, &sp, &err);
    if (rc != GP_OK) {
        printf("skipped: loading %s failed: %s\n\n", c->name, err.message);
        fflush(stdout);
        return;
    }
    int max_its[MAX_R];
    for (size_t ri = 0; ri < o->n_R; ri++)
        max_its[ri] = o->max_iterations > 0 ? o->max_iterations
                      : o->R[ri] > 100      ? c->max_iterations_large
                                            : c->max_iterations;
    const char *const *samp = o->n_samp > 0 ? o->samp : o->quick ? quick_samplers : samplers;
    size_t n_samp = o->n_samp > 0 ? o->n_samp
                    : o->quick    ? sizeof quick_samplers / sizeof quick_samplers[0]
                                  : N_SAMPLERS;
    size_t n_rows = n_samp * 2;
    result *res = calloc(n_rows * o->n_R, sizeof *res);
    if (res == NULL) {
        printf("skipped: out of memory\n\n");
        goto done;
    }
    fprintf(stderr, "bench_ssgp: %s (N train %zu, N test %zu, d %zu)\n", c->name, train.n,
            test.n, train.d);
    for (size_t ri = 0; ri < o->n_R; ri++)
        for (size_t s = 0; s < n_samp; s++)
            for (int learned = 0; learned <= 1; learned++) {
                result *r = &res[(s * 2 + (size_t)learned) * o->n_R + ri];
                run_fit(&train, &test, samp[s], o->R[ri], learned, max_its[ri], r);
                char what[64];
                snprintf(what, sizeof what, "R=%zu %s %s", o->R[ri], samp[s],
                         learned ? "learned" : "fixed");
                print_fit_note(what, r);
            }
    result ex;
    memset(&ex, 0, sizeof ex);
    int do_exact = c->exact && !o->no_exact;
    if (do_exact) {
        fprintf(stderr, "bench_ssgp: %s: exact GP...\n", c->name);
        run_fit(&train, &test, NULL, 0, 0, 0, &ex);
        print_fit_note("exact", &ex);
    }

    printf("%s split %d: N train %zu, N test %zu, d %zu. ", c->scheme, c->split, train.n,
           test.n, train.d);
    printf("L-BFGS iterations:");
    for (size_t ri = 0; ri < o->n_R; ri++) {
        const char *sep = ri + 1 < o->n_R ? "," : ".";
        if (max_its[ri] > 0)
            printf(" R=%zu **capped at %d**%s%s", o->R[ri], max_its[ri],
                   o->max_iterations > 0 ? " (--max-iterations)" : " (cost)", sep);
        else
            printf(" R=%zu the method's default 200%s", o->R[ri], sep);
    }
    printf(" ");
    printf("Each cell group: RMSE | NLPD | fit s (L-BFGS iterations; * = not converged) | "
           "LML.\n\n");
    printf("| sampler | frequencies |");
    for (size_t ri = 0; ri < o->n_R; ri++)
        printf(" R=%zu RMSE | NLPD | fit s (it) | LML |", o->R[ri]);
    printf("\n|---|---|");
    for (size_t ri = 0; ri < o->n_R; ri++)
        printf("---:|---:|---:|---:|");
    printf("\n");
    for (size_t s = 0; s < n_samp; s++)
        for (int learned = 0; learned <= 1; learned++) {
            const result *row = &res[(s * 2 + (size_t)learned) * o->n_R];
            char label[128];
            if (strcmp(samp[s], "auto") == 0) {
                /* auto's choice per R */
                int w = snprintf(label, sizeof label, "auto →");
                for (size_t ri = 0; ri < o->n_R && w > 0 && (size_t)w < sizeof label; ri++)
                    w += snprintf(label + w, sizeof label - (size_t)w, "%s%s%s",
                                  ri ? " / " : " ", row[ri].ok ? row[ri].chosen : "?",
                                  row[ri].ok && row[ri].redrawn ? " (redrawn)" : "");
            } else {
                snprintf(label, sizeof label, "%s", samp[s]);
            }
            printf("| %s | %s |", label, learned ? "learned" : "fixed");
            for (size_t ri = 0; ri < o->n_R; ri++)
                print_cells(&row[ri]);
            printf("\n");
        }
    if (do_exact) {
        printf("| **exact GP** | — |");
        for (size_t ri = 0; ri < o->n_R; ri++)
            print_cells(&ex);
        printf("\n");
    }
    printf("\n");
    if (!do_exact)
        printf("exact GP: %s.\n\n",
               o->no_exact ? "not run (--no-exact)"
                           : "not run (N x N too large in time and memory for this dataset)");
    else
        printf("The exact GP has no R: its one fit is repeated in every column group.\n\n");
    /* auto's spread (lengthscale units, at the fitted lengthscales) */
    for (size_t s = 0; s < n_samp; s++) {
        if (strcmp(samp[s], "auto") != 0)
            continue;
        printf("auto: spread of the inputs at the fitted lengthscales (fixed frequencies):");
        for (size_t ri = 0; ri < o->n_R; ri++) {
            const result *r = &res[(s * 2) * o->n_R + ri];
            printf(" R=%zu %.3g;", o->R[ri], r->ok ? r->spread : NAN);
        }
        printf("\n\n");
    }
    fflush(stdout);
done:
    free(res);
    gp_dataset_free(&train);
    gp_dataset_free(&test);
    gp_split_free(&sp);
}

int main(int argc, char **argv)
{
    options o;
    if (parse_args(argc, argv, &o) != 0)
        return 2;
    printf("# bench_ssgp\n\n");
    const char *t = getenv("OPENBLAS_NUM_THREADS");
    printf("ssgp (sparse-spectrum GP on R random Fourier frequencies) against the exact GP. "
           "Kernel rbf ARD (all hyperparameters start at 1 in standardised units), noise "
           "learned, standardize on, seed %d; OPENBLAS_NUM_THREADS=%s. RMSE and mean NLPD per "
           "test point (observation variance) in original units; LML = diag.objective in "
           "original units; fit s = wall time of gp_model_fit. Samplers: mc, qmc, orf, stein, "
           "auto (its choice after the arrow); fixed = learn_frequencies false, learned = "
           "true.\n\n",
           FIT_SEED, t != NULL ? t : "(unset)");
    fflush(stdout);
    char why[512];
    if (!gp_datasets_present(why, sizeof why)) {
        printf("skipped: datasets not available: %s (set GPSERVE_DATASETS to the shared "
               "datasets folder)\n",
               why);
        return 0;
    }
    double t0 = gp_bench_seconds();
    for (size_t i = 0; i < N_DATASETS; i++)
        if (dataset_selected(&o, &datasets[i]))
            run_dataset(&o, &datasets[i]);
    printf("Total wall time: %.0f s.\n", gp_bench_seconds() - t0);
    return 0;
}
