/* Benchmark of the inducing-point methods `sgpr` (sparse variational GP,
 * Titsias collapsed bound, core/methods/sgpr.h) and `renyi` (Renyi alpha-divergence
 * sparse GP, dense O(N^3) path, core/methods/renyi.h) next to the exact GP; the
 * content of bench/results/sparse.md.
 *
 * Run from the repository root (bench/run.sh runs it without arguments: the
 * full benchmark, or with --quick):
 *   build/bench/bench_sparse [--quick] [--inducing M] [--splits K] [--big-splits K]
 *                            [--datasets a,b|none] [--methods LIST] [--skip-large]
 *                            [--large-m LIST] [--protein-m M] [--predict-calls N]
 * Prints markdown to stdout (part 1 tables, part 2 table, the summary against
 * the targets) and progress to stderr. A method missing from the build (renyi
 * before its branch is merged) gives "renyi: not available in this build"
 * rows and "not measured" targets; nothing else changes.
 *
 * Data: $GPSERVE_DATASETS or ../shared/datasets (see its README.md; skipped
 * with a message when absent or when a file is missing). No preprocessing
 * here: every fit gets the raw CSV columns with standardize = 1, so each
 * method standardises X and y internally with its own training statistics
 * and answers in original units.
 *
 * Part 1 (small datasets, the standard splits): concrete, energy, boston:
 * test20 when splits/<name>_test20.txt exists, else fold10; airfoil fold10;
 * wine_red and yacht test20; kin8nm and power test20 with the training set of
 * split k subsampled to 4000 rows (gp_split_subsample_train, seed k) for every
 * method of that row group, so exact, sgpr and renyi fit the same rows.
 * Splits k = 0..K-1 (K = --splits, default 5, for the small sets; --big-splits,
 * default 1, for kin8nm and power: a renyi auto fit there takes 7-8 minutes). Methods, all on the same split and with
 * the same fit seed k: exact GP; sgpr; renyi alpha = 0.5; renyi alpha = auto
 * (nine alphas 0.30..0.70 scored on a seeded 80/20 split of the training rows,
 * then a refit; the chosen alpha is printed). sgpr and renyi use the same M
 * (--inducing, default 64), inducing_selection greedy and the methods'
 * defaults otherwise (optimize_inducing true, L-BFGS limits; renyi auto
 * moves Z only in its alpha = 0.5 grid fit and the final refit). Every fit: kernel rbf ARD with
 * the default initial values (all 1 in standardised units), noise learned
 * (from its default start), standardize = 1.
 *
 * Part 2 (--skip-large skips it): sgpr on kin40k, the "fixed" 10000/30000
 * split, M = 256, 512, 1024 (--large-m), greedy selection, seed 0; and sgpr
 * on protein, test20 split 0, M = 512 (--protein-m; 0 skips it). Reported:
 * RMSE, NLPD, fit s, L-BFGS iterations and the in-process single-point
 * predict latency: gp_model_predict with m = 1, include_noise = 1 on test
 * points in turn, 1000 warm-up calls, then --predict-calls (default 20000)
 * calls timed in batches of 100: the mean per call over all calls, and p50 /
 * p99 of the per-call mean of the batches.
 *
 * Metrics: RMSE and mean NLPD per test point in original units, NLPD from the
 * Gaussian with the observation variance (include_noise = 1;
 * bench/support/scores.c); fit s = wall time of gp_model_fit (CLOCK_MONOTONIC,
 * bench/support/clock.h); mean +- std (ddof 0) over the splits that ran. gap =
 * diag.info "gap": the exact LML minus the method's bound at the fitted
 * hyperparameters (sgpr: the KL of q from the posterior; renyi: the Renyi
 * divergence), nats in standardised units; G(a) = diag.info "certified_gap".
 * sgpr's fit s includes the one N x N Cholesky it does after the fit to
 * report the exact LML and gap when N <= 5000 (GP_SGPR_EXACT_REPORT_MAX).
 *
 * Summary: the targets: (a) sgpr kin40k N = 10000, M = 512 fit under
 * 60 s; (b) single-point predict under 50 us in process (judged at kin40k
 * M = 512; the others are listed); (c) renyi auto RMSE <= sgpr RMSE (means
 * over the splits) at the same M on at least five of the six small datasets
 * concrete, energy, airfoil, wine_red, yacht, boston.
 *
 * Duration on the 2-core machine, idle, as measured for
 * bench/results/sparse.md: about 45 minutes. Part 1 ~35 minutes, of which
 * kin8nm and power (one split each, 4000 rows) take ~23: renyi alpha = 0.5
 * ~200 s and alpha = auto ~410-460 s there (the dense O(N^3) bound with Z
 * optimised, 200 L-BFGS iterations); the six small sets ~12 minutes (renyi
 * auto 2-45 s a fit). Part 2 ~10 minutes (kin40k M = 1024 ~210 s, protein
 * ~270 s). --quick ~10 s. --skip-large or --datasets shorten the run. */
#include <math.h>
#include <stddef.h>
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

#define DEFAULT_M 64
#define DEFAULT_SPLITS 5
#define DEFAULT_BIG_SPLITS 1
#define QUICK_SPLITS 1
#define MAX_SPLITS 20
#define BIG_MAX_TRAIN 4000
#define MAX_LARGE_M 8
#define PROTEIN_M 512
#define PREDICT_CALLS 20000
#define PREDICT_WARMUP 1000
#define PREDICT_BATCH 100
#define PREDICT_POOL 1024
/* The targets. */
#define TARGET_FIT_S 60.0
#define TARGET_FIT_M 512
#define TARGET_PREDICT_US 50.0
#define TARGET_RENYI_WINS 5
#define N_TARGET_SETS 6

/* ---- configuration ---- */

typedef struct dataset_config {
    const char *name;
    const char *scheme; /* NULL: test20 when its split file exists, else fold10 */
    int big;            /* training set subsampled to BIG_MAX_TRAIN rows, --big-splits */
    int target;         /* one of the six datasets of target (c) */
    int quick;          /* part of --quick */
} dataset_config;

static const dataset_config datasets[] = {
    {"concrete", NULL, 0, 1, 1},
    {"energy", NULL, 0, 1, 0},
    {"boston", NULL, 0, 1, 0},
    {"airfoil", "fold10", 0, 1, 0},
    {"wine_red", "test20", 0, 1, 0},
    {"yacht", "test20", 0, 1, 0},
    {"kin8nm", "test20", 1, 0, 0},
    {"power", "test20", 1, 0, 0},
};
#define N_DATASETS (sizeof datasets / sizeof datasets[0])

typedef enum variant { V_EXACT = 0, V_SGPR, V_RENYI, V_RENYI_AUTO, N_VARIANTS } variant;

static const char *const variant_names[N_VARIANTS] = {"exact", "sgpr", "renyi", "renyi_auto"};
static const char *const variant_methods[N_VARIANTS] = {"exact", "sgpr", "renyi", "renyi"};

typedef struct options {
    int quick;
    int splits, big_splits;
    size_t M;
    int use[N_VARIANTS];
    int skip_large;
    size_t large_m[MAX_LARGE_M];
    size_t n_large_m;
    size_t protein_m; /* 0: skip protein */
    size_t predict_calls;
    char datasets[512]; /* comma list; empty: all (--quick: concrete); "none": part 1 off */
} options;

/* ---- command line ---- */

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [--quick] [--inducing M] [--splits K] [--big-splits K]\n"
            "          [--datasets a,b|none] [--methods LIST] [--skip-large]\n"
            "          [--large-m LIST] [--protein-m M] [--predict-calls N]\n"
            "  --quick            concrete, %d split, all four methods; part 2 skipped\n"
            "  --inducing M       inducing points of sgpr and renyi in part 1 (default %d)\n"
            "  --splits K         splits of the small datasets (default %d)\n"
            "  --big-splits K     splits of kin8nm and power (default %d)\n"
            "  --datasets LIST    part 1 datasets (default: concrete, energy, boston, airfoil,\n"
            "                     wine_red, yacht, kin8nm, power); none: skip part 1\n"
            "  --methods LIST     of exact,sgpr,renyi,renyi_auto (default: all)\n"
            "  --skip-large       skip part 2 (sgpr on kin40k and protein)\n"
            "  --large-m LIST     M of the kin40k fits (default 256,512,1024)\n"
            "  --protein-m M      M of the protein fit (default %d; 0 skips protein)\n"
            "  --predict-calls N  timed single-point predict calls (default %d)\n",
            prog, QUICK_SPLITS, DEFAULT_M, DEFAULT_SPLITS, DEFAULT_BIG_SPLITS, PROTEIN_M,
            PREDICT_CALLS);
}

static int parse_methods(const char *list, int *use)
{
    return gp_bench_parse_names(list, variant_names, N_VARIANTS, use, "--methods");
}

static int parse_m_list(const char *list, options *o)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    o->n_large_m = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save)) {
        long v;
        if (gp_bench_parse_long(t, 1, 8192, &v) != 0 || o->n_large_m >= MAX_LARGE_M) {
            fprintf(stderr, "bad --large-m entry '%s' (1..8192, at most %d)\n", t,
                    MAX_LARGE_M);
            return -1;
        }
        o->large_m[o->n_large_m++] = (size_t)v;
    }
    return 0;
}

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    long v = 0;
    int have_methods = 0;
    o->M = DEFAULT_M;
    o->protein_m = PROTEIN_M;
    o->predict_calls = PREDICT_CALLS;
    o->large_m[0] = 256;
    o->large_m[1] = 512;
    o->large_m[2] = 1024;
    o->n_large_m = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        if (strcmp(a, "--quick") == 0) {
            o->quick = 1;
        } else if (strcmp(a, "--skip-large") == 0) {
            o->skip_large = 1;
        } else if (strcmp(a, "--inducing") == 0 && has_value) {
            if (gp_bench_parse_long(argv[++i], 1, 8192, &v) != 0) {
                fprintf(stderr, "bad --inducing '%s' (1..8192)\n", argv[i]);
                return -1;
            }
            o->M = (size_t)v;
        } else if ((strcmp(a, "--splits") == 0 || strcmp(a, "--big-splits") == 0) &&
                   has_value) {
            if (gp_bench_parse_long(argv[++i], 1, MAX_SPLITS, &v) != 0) {
                fprintf(stderr, "bad %s '%s' (1..%d)\n", a, argv[i], MAX_SPLITS);
                return -1;
            }
            *(strcmp(a, "--splits") == 0 ? &o->splits : &o->big_splits) = (int)v;
        } else if (strcmp(a, "--datasets") == 0 && has_value) {
            snprintf(o->datasets, sizeof o->datasets, "%s", argv[++i]);
        } else if (strcmp(a, "--methods") == 0 && has_value) {
            if (parse_methods(argv[++i], o->use) != 0)
                return -1;
            have_methods = 1;
        } else if (strcmp(a, "--large-m") == 0 && has_value) {
            if (parse_m_list(argv[++i], o) != 0)
                return -1;
        } else if (strcmp(a, "--protein-m") == 0 && has_value) {
            if (gp_bench_parse_long(argv[++i], 0, 8192, &v) != 0) {
                fprintf(stderr, "bad --protein-m '%s' (0..8192)\n", argv[i]);
                return -1;
            }
            o->protein_m = (size_t)v;
        } else if (strcmp(a, "--predict-calls") == 0 && has_value) {
            if (gp_bench_parse_long(argv[++i], PREDICT_BATCH, 100000000, &v) != 0) {
                fprintf(stderr, "bad --predict-calls '%s' (at least %d)\n", argv[i],
                        PREDICT_BATCH);
                return -1;
            }
            o->predict_calls = (size_t)v;
        } else if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            usage(argv[0]);
            exit(0);
        } else {
            usage(argv[0]);
            return -1;
        }
    }
    if (o->splits == 0)
        o->splits = o->quick ? QUICK_SPLITS : DEFAULT_SPLITS;
    if (o->big_splits == 0)
        o->big_splits = o->quick ? QUICK_SPLITS : DEFAULT_BIG_SPLITS;
    if (o->quick)
        o->skip_large = 1;
    if (!have_methods)
        for (int k = 0; k < N_VARIANTS; k++)
            o->use[k] = 1;
    return 0;
}

static int dataset_selected(const options *o, const dataset_config *c)
{
    if (o->datasets[0] == '\0')
        return o->quick ? c->quick : 1;
    return gp_bench_list_has(o->datasets, c->name);
}

/* test20 when splits/<name>_test20.txt is readable, else fold10. */
static const char *scheme_of(const dataset_config *c)
{
    if (c->scheme != NULL)
        return c->scheme;
    char dir[GP_DATASET_PATH_LEN], path[GP_DATASET_PATH_LEN + 128];
    if (gp_datasets_dir(dir, sizeof dir, NULL) != GP_OK)
        return "fold10";
    snprintf(path, sizeof path, "%s/splits/%s_test20.txt", dir, c->name);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return "fold10";
    fclose(f);
    return "test20";
}

/* ---- one fit ---- */

typedef struct result {
    int ran, ok, unavailable;
    char error[320];
    double rmse, nlpd, seconds, iterations;
    int converged;
    size_t clamped;
    double gap, certified, alpha; /* diag.info; NAN when not reported */
    char alpha_text[32];          /* a keyword given for alpha instead of a number */
} result;

static void read_info(const gp_model *model, result *r)
{
    r->gap = r->certified = r->alpha = NAN;
    for (size_t i = 0; i < model->diag.n_info; i++) {
        const gp_info_item *it = &model->diag.info[i];
        if (strcmp(it->key, "gap") == 0 && it->string == NULL)
            r->gap = it->number;
        else if (strcmp(it->key, "certified_gap") == 0 && it->string == NULL)
            r->certified = it->number;
        else if (strcmp(it->key, "alpha") == 0 && it->string == NULL)
            r->alpha = it->number;
        else if (strcmp(it->key, "alpha") == 0)
            snprintf(r->alpha_text, sizeof r->alpha_text, "%s", it->string);
    }
}

/* The options of variant v with M inducing points (exact: none). */
static size_t variant_options(variant v, size_t M, gp_option_value *o)
{
    size_t n = 0;
    if (v == V_EXACT)
        return 0;
    o[n++] = (gp_option_value){.name = "inducing", .number = (double)M};
    o[n++] = (gp_option_value){.name = "inducing_selection", .string = "greedy"};
    if (v == V_RENYI)
        o[n++] = (gp_option_value){.name = "alpha", .number = 0.5};
    else if (v == V_RENYI_AUTO)
        o[n++] = (gp_option_value){.name = "alpha", .number = NAN, .string = "auto"};
    return n;
}

/* Fit method mname with opts on train (rbf ARD, default start, noise learned,
 * standardize on, seed); *model is the fitted model (NULL on failure, the
 * reason in r->error). */
static void fit_model(const char *mname, const gp_option_value *opts, size_t n_opts,
                      const gp_dataset *train, uint64_t seed, gp_model **model, result *r)
{
    memset(r, 0, sizeof *r);
    r->ran = 1;
    r->gap = r->certified = r->alpha = NAN;
    *model = NULL;
    const gp_method *m = gp_method_find(mname);
    if (m == NULL) {
        r->unavailable = 1;
        snprintf(r->error, sizeof r->error, "%s: not available in this build", mname);
        return;
    }
    gp_error err;
    gp_error_clear(&err);
    gp_kernel *k = NULL;
    int rc = gp_kernel_leaf(&k, GP_KERNEL_RBF, train->d, 1, NULL, 0, &err);
    if (rc == GP_OK)
        rc = gp_options_validate(m, opts, n_opts, &err);
    gp_fit_request req;
    memset(&req, 0, sizeof req);
    req.X = train->X;
    req.y = train->y;
    req.n = train->n;
    req.d = train->d;
    req.kernel = k;
    req.standardize = 1;
    req.seed = seed;
    req.options = n_opts > 0 ? opts : NULL;
    req.n_options = n_opts;
    double t0 = gp_bench_seconds();
    if (rc == GP_OK)
        rc = gp_model_fit(m, &req, model, &err);
    r->seconds = gp_bench_seconds() - t0;
    gp_kernel_free(k);
    if (rc != GP_OK) {
        *model = NULL;
        snprintf(r->error, sizeof r->error, "fit failed: %s (%s)", gp_status_name(rc),
                 err.message);
        return;
    }
    r->iterations = (*model)->diag.iterations;
    r->converged = (*model)->diag.converged;
    read_info(*model, r);
}

static void score_model(const gp_model *model, const gp_dataset *test, result *r)
{
    gp_error err;
    gp_error_clear(&err);
    gp_test_scores sc = {0, 0, 0};
    int rc = gp_test_scores_compute(model, test, &sc, &err);
    if (rc != GP_OK) {
        snprintf(r->error, sizeof r->error, "predict failed: %s (%s)", gp_status_name(rc),
                 err.message);
        return;
    }
    r->rmse = sc.rmse;
    r->nlpd = sc.nlpd;
    r->clamped = sc.clamped;
    r->ok = 1;
}

static void progress(const char *what, const result *r)
{
    if (!r->ok) {
        fprintf(stderr, "bench_sparse: %-34s %s\n", what, r->error);
        return;
    }
    fprintf(stderr, "bench_sparse: %-34s RMSE %.4g NLPD %.3f %.2f s (%.0f it%s)", what, r->rmse,
            r->nlpd, r->seconds, r->iterations, r->converged ? "" : ", not converged");
    if (isfinite(r->alpha))
        fprintf(stderr, " alpha %.2f", r->alpha);
    if (isfinite(r->gap))
        fprintf(stderr, " gap %.3g", r->gap);
    fprintf(stderr, "\n");
}

/* ---- part 1: the small datasets ---- */

typedef struct summary {
    int n, failed, unavailable;
    double rmse[2], nlpd[2], seconds[2], iterations[2], gap[2], certified[2]; /* mean, std */
    char error[320];
} summary;

/* Mean and std (ddof 0) of the field at offset over the ok results where it is finite. */
static void mean_std(const result *rs, int n, size_t offset, double out[2])
{
    double s = 0.0, ss = 0.0;
    int c = 0;
    for (int i = 0; i < n; i++) {
        double x = *(const double *)((const char *)&rs[i] + offset);
        if (rs[i].ok && isfinite(x)) {
            s += x;
            c++;
        }
    }
    out[0] = c > 0 ? s / c : NAN;
    for (int i = 0; i < n; i++) {
        double x = *(const double *)((const char *)&rs[i] + offset);
        if (rs[i].ok && isfinite(x))
            ss += (x - out[0]) * (x - out[0]);
    }
    out[1] = c > 0 ? sqrt(ss / c) : NAN;
}

static void summarise(const result *rs, int n, summary *s)
{
    memset(s, 0, sizeof *s);
    for (int i = 0; i < n; i++) {
        if (rs[i].ok)
            s->n++;
        else if (rs[i].ran) {
            if (s->failed++ == 0)
                snprintf(s->error, sizeof s->error, "%s", rs[i].error);
            s->unavailable |= rs[i].unavailable;
        }
    }
    mean_std(rs, n, offsetof(result, rmse), s->rmse);
    mean_std(rs, n, offsetof(result, nlpd), s->nlpd);
    mean_std(rs, n, offsetof(result, seconds), s->seconds);
    mean_std(rs, n, offsetof(result, iterations), s->iterations);
    mean_std(rs, n, offsetof(result, gap), s->gap);
    mean_std(rs, n, offsetof(result, certified), s->certified);
}

typedef struct dataset_outcome {
    int ran;
    summary sums[N_VARIANTS];
} dataset_outcome;

static void variant_label(variant v, size_t M, char *buf, size_t len)
{
    switch (v) {
    case V_EXACT:
        snprintf(buf, len, "exact GP");
        break;
    case V_SGPR:
        snprintf(buf, len, "sgpr M=%zu", M);
        break;
    case V_RENYI:
        snprintf(buf, len, "renyi α=0.5 M=%zu", M);
        break;
    default:
        snprintf(buf, len, "renyi α=auto M=%zu", M);
        break;
    }
}

/* " mean ± std |" with prec digits (%g when g, else %f). */
static void print_pm(const double v[2], int prec, int g)
{
    if (!isfinite(v[0]))
        printf(" — |");
    else if (g)
        printf(" %.*g ± %.*g |", prec, v[0], prec, v[1]);
    else
        printf(" %.*f ± %.*f |", prec, v[0], prec, v[1]);
}

static void print_row(const char *label, const summary *s, int splits)
{
    if (s->n == 0) {
        printf("| %s | %s | | | | | | 0 / %d |\n", label, s->error[0] ? s->error : "not run",
               splits);
        return;
    }
    printf("| %s |", label);
    print_pm(s->rmse, 4, 1);
    print_pm(s->nlpd, 3, 0);
    print_pm(s->seconds, 2, 0);
    printf(" %.0f |", s->iterations[0]);
    print_pm(s->gap, 3, 1);
    print_pm(s->certified, 3, 1);
    printf(" %d / %d%s |\n", s->n, splits, s->failed ? " (some failed)" : "");
}

/* Split k of c into train/test (kin8nm, power: training set subsampled, seed k). */
static int make_split(const dataset_config *c, const char *scheme, const gp_dataset *all, int k,
                      gp_dataset *train, gp_dataset *test, gp_error *err)
{
    gp_split sp;
    memset(&sp, 0, sizeof sp);
    int rc = gp_split_load(c->name, scheme, k, all->n, &sp, err);
    if (rc == GP_OK && c->big)
        rc = gp_split_subsample_train(&sp, BIG_MAX_TRAIN, (uint64_t)k, err);
    if (rc == GP_OK)
        rc = gp_dataset_rows(all, sp.train, sp.n_train, train, err);
    if (rc == GP_OK)
        rc = gp_dataset_rows(all, sp.test, sp.n_test, test, err);
    gp_split_free(&sp);
    return rc;
}

static void run_dataset(const options *o, const dataset_config *c, dataset_outcome *out)
{
    memset(out, 0, sizeof *out);
    const char *scheme = scheme_of(c);
    int splits = c->big ? o->big_splits : o->splits;
    int avail = strcmp(scheme, "fold10") == 0 ? 10 : 20;
    if (splits > avail)
        splits = avail;
    printf("### %s\n\n", c->name);
    if (!gp_dataset_exists(c->name)) {
        printf("skipped: %s.csv not found in the datasets folder\n\n", c->name);
        fflush(stdout);
        return;
    }
    gp_dataset all;
    gp_error err;
    gp_error_clear(&err);
    memset(&all, 0, sizeof all);
    if (gp_dataset_load(c->name, &all, &err) != GP_OK) {
        printf("skipped: loading %s failed: %s\n\n", c->name, err.message);
        fflush(stdout);
        return;
    }
    result *res = calloc((size_t)N_VARIANTS * (size_t)splits, sizeof *res);
    if (res == NULL) {
        printf("skipped: out of memory\n\n");
        gp_dataset_free(&all);
        return;
    }
    size_t n_train = 0, n_test = 0;
    for (int k = 0; k < splits; k++) {
        gp_dataset train, test;
        memset(&train, 0, sizeof train);
        memset(&test, 0, sizeof test);
        if (make_split(c, scheme, &all, k, &train, &test, &err) != GP_OK) {
            for (int v = 0; v < N_VARIANTS; v++) {
                result *r = &res[v * splits + k];
                r->ran = 1;
                snprintf(r->error, sizeof r->error, "split %d: %s", k, err.message);
            }
            fprintf(stderr, "bench_sparse: %s split %d: %s\n", c->name, k, err.message);
            gp_dataset_free(&train);
            gp_dataset_free(&test);
            continue;
        }
        n_train = train.n;
        n_test = test.n;
        for (int v = 0; v < N_VARIANTS; v++) {
            if (!o->use[v])
                continue;
            result *r = &res[v * splits + k];
            gp_option_value opts[4];
            size_t n_opts = variant_options((variant)v, o->M, opts);
            gp_model *model = NULL;
            fit_model(variant_methods[v], opts, n_opts, &train, (uint64_t)k, &model, r);
            if (model != NULL)
                score_model(model, &test, r);
            gp_model_free(model);
            char what[96];
            snprintf(what, sizeof what, "%s split %d %s", c->name, k, variant_names[v]);
            progress(what, r);
        }
        gp_dataset_free(&train);
        gp_dataset_free(&test);
    }
    printf("%s splits 0..%d: N train %zu%s, N test %zu, d %zu.\n\n", scheme, splits - 1,
           n_train, c->big ? " (subsampled, seed = split index)" : "", n_test, all.d);
    printf("| method | RMSE | NLPD | fit s | L-BFGS it (mean) | gap (nats) | G(α) | "
           "splits |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---|\n");
    for (int v = 0; v < N_VARIANTS; v++) {
        if (!o->use[v])
            continue;
        summarise(res + v * splits, splits, &out->sums[v]);
        char label[64];
        variant_label((variant)v, o->M, label, sizeof label);
        print_row(label, &out->sums[v], splits);
    }
    printf("\n");
    if (o->use[V_RENYI_AUTO] && out->sums[V_RENYI_AUTO].n > 0) {
        printf("renyi α=auto, chosen α per split:");
        for (int k = 0; k < splits; k++) {
            const result *r = &res[V_RENYI_AUTO * splits + k];
            if (!r->ok)
                printf(" failed");
            else if (isfinite(r->alpha))
                printf(" %.2f", r->alpha);
            else
                printf(" %s", r->alpha_text[0] ? r->alpha_text : "(not reported)");
        }
        printf("\n\n");
    }
    out->ran = 1;
    fflush(stdout);
    free(res);
    gp_dataset_free(&all);
}

/* ---- part 2: sgpr on kin40k and protein ---- */

typedef struct latency {
    int ok;
    size_t calls;
    double mean_us, p50_us, p99_us;
} latency;

typedef struct large_result {
    const char *dataset;
    size_t M, n_train, n_test;
    result fit;
    latency lat;
} large_result;

static int compare_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Single-point predict latency on the test points in turn (see the header). */
static void measure_latency(const gp_model *model, const gp_dataset *test, size_t calls,
                            latency *lat)
{
    memset(lat, 0, sizeof *lat);
    size_t d = test->d, pool = test->n < PREDICT_POOL ? test->n : PREDICT_POOL;
    size_t n_batches = calls / PREDICT_BATCH;
    double *pts = malloc(pool * d * sizeof *pts);
    double *batch_us = malloc(n_batches * sizeof *batch_us);
    if (pts == NULL || batch_us == NULL || pool == 0) {
        free(pts);
        free(batch_us);
        return;
    }
    for (size_t i = 0; i < pool; i++)
        for (size_t j = 0; j < d; j++)
            pts[i * d + j] = test->X[j * test->n + i];
    double mean = 0.0, var = 0.0;
    gp_prediction out = {.mean = &mean, .variance = &var};
    gp_predict_request pr = {.m = 1, .d = d, .include_noise = 1};
    gp_error err;
    gp_error_clear(&err);
    size_t next = 0;
    for (size_t i = 0; i < PREDICT_WARMUP; i++) {
        pr.X = pts + (next++ % pool) * d;
        if (gp_model_predict(model, &pr, &out, &err) != GP_OK)
            goto done;
    }
    double total = 0.0;
    for (size_t b = 0; b < n_batches; b++) {
        double t0 = gp_bench_seconds();
        for (size_t i = 0; i < PREDICT_BATCH; i++) {
            pr.X = pts + (next++ % pool) * d;
            if (gp_model_predict(model, &pr, &out, &err) != GP_OK)
                goto done;
        }
        double dt = gp_bench_seconds() - t0;
        total += dt;
        batch_us[b] = 1e6 * dt / PREDICT_BATCH;
    }
    qsort(batch_us, n_batches, sizeof *batch_us, compare_double);
    lat->calls = n_batches * PREDICT_BATCH;
    lat->mean_us = 1e6 * total / (double)lat->calls;
    lat->p50_us = batch_us[n_batches / 2];
    lat->p99_us = batch_us[(size_t)floor(0.99 * (double)(n_batches - 1))];
    lat->ok = 1;
done:
    if (!lat->ok)
        fprintf(stderr, "bench_sparse: predict latency: %s\n", err.message);
    free(pts);
    free(batch_us);
}

static void run_large_fit(const options *o, const char *name, const gp_dataset *train,
                          const gp_dataset *test, size_t M, large_result *lr)
{
    memset(lr, 0, sizeof *lr);
    lr->dataset = name;
    lr->M = M;
    lr->n_train = train->n;
    lr->n_test = test->n;
    gp_option_value opts[4];
    size_t n_opts = variant_options(V_SGPR, M, opts);
    gp_model *model = NULL;
    fprintf(stderr, "bench_sparse: %s sgpr M=%zu (N train %zu)...\n", name, M, train->n);
    fit_model("sgpr", opts, n_opts, train, 0, &model, &lr->fit);
    if (model != NULL) {
        score_model(model, test, &lr->fit);
        if (lr->fit.ok)
            measure_latency(model, test, o->predict_calls, &lr->lat);
    }
    gp_model_free(model);
    char what[64];
    snprintf(what, sizeof what, "%s sgpr M=%zu", name, M);
    progress(what, &lr->fit);
    if (lr->lat.ok)
        fprintf(stderr, "bench_sparse: %-34s predict m=1: mean %.1f us, p50 %.1f, p99 %.1f\n",
                what, lr->lat.mean_us, lr->lat.p50_us, lr->lat.p99_us);
}

/* Fits into out[0..); returns how many. */
static size_t run_large(const options *o, large_result *out)
{
    size_t n_out = 0;
    struct {
        const char *name, *scheme;
        const size_t *Ms;
        size_t n_M;
    } sets[2] = {{"kin40k", "fixed", o->large_m, o->n_large_m},
                 {"protein", "test20", &o->protein_m, o->protein_m > 0}};
    printf("## Part 2: sgpr on kin40k and protein\n\n");
    for (size_t s = 0; s < 2; s++) {
        if (sets[s].n_M == 0)
            continue;
        if (!gp_dataset_exists(sets[s].name)) {
            printf("%s: skipped (%s.csv not found in the datasets folder).\n\n", sets[s].name,
                   sets[s].name);
            continue;
        }
        gp_dataset train, test;
        gp_error err;
        gp_error_clear(&err);
        memset(&train, 0, sizeof train);
        memset(&test, 0, sizeof test);
        if (gp_dataset_load_split(sets[s].name, sets[s].scheme, 0, 0, 0, &train, &test, NULL,
                                  &err) != GP_OK) {
            printf("%s: skipped (loading failed: %s).\n\n", sets[s].name, err.message);
            continue;
        }
        for (size_t i = 0; i < sets[s].n_M; i++)
            run_large_fit(o, sets[s].name, &train, &test, sets[s].Ms[i], &out[n_out++]);
        gp_dataset_free(&train);
        gp_dataset_free(&test);
    }
    if (n_out == 0) {
        printf("Nothing run.\n\n");
        return 0;
    }
    printf("sgpr, inducing_selection greedy, optimize_inducing true (default), seed 0; "
           "kin40k: the "
           "fixed split (rows 0-9999 train, 10000-39999 test); protein: test20 split 0. "
           "predict m=1: gp_model_predict with one point, include_noise = 1, %d warm-up "
           "calls, then %zu calls in batches of %d: mean per call over all calls, p50 / p99 "
           "of the batches' per-call means.\n\n",
           PREDICT_WARMUP, o->predict_calls, PREDICT_BATCH);
    printf("| dataset | N train | N test | M | RMSE | NLPD | fit s | L-BFGS it | "
           "predict m=1 mean µs | p50 µs | p99 µs |\n");
    printf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t i = 0; i < n_out; i++) {
        const large_result *lr = &out[i];
        printf("| %s | %zu | %zu | %zu |", lr->dataset, lr->n_train, lr->n_test, lr->M);
        if (!lr->fit.ok) {
            printf(" %s | | | | | | |\n", lr->fit.error);
            continue;
        }
        printf(" %.4g | %.3f | %.2f | %.0f%s |", lr->fit.rmse, lr->fit.nlpd, lr->fit.seconds,
               lr->fit.iterations, lr->fit.converged ? "" : "*");
        if (lr->lat.ok)
            printf(" %.1f | %.1f | %.1f |\n", lr->lat.mean_us, lr->lat.p50_us, lr->lat.p99_us);
        else
            printf(" failed | | |\n");
    }
    printf("\n(* = L-BFGS stopped at its iteration limit, not converged.)\n\n");
    fflush(stdout);
    return n_out;
}

/* ---- summary against the targets ---- */

static const char *met(int pass)
{
    return pass ? "**met**" : "**not met**";
}

static void print_targets(const options *o, const dataset_outcome *outs, const large_result *lr,
                          size_t n_lr)
{
    printf("## Summary against the targets\n\n");
    const large_result *at = NULL;
    for (size_t i = 0; i < n_lr; i++)
        if (strcmp(lr[i].dataset, "kin40k") == 0 && lr[i].M == TARGET_FIT_M)
            at = &lr[i];
    /* (a) */
    printf("- (a) sgpr kin40k N = 10000, M = %d, fit under %.0f s: ", TARGET_FIT_M,
           TARGET_FIT_S);
    if (o->skip_large)
        printf("not measured (%s).\n", o->quick ? "--quick" : "--skip-large");
    else if (at == NULL)
        printf("not measured (M = %d not run).\n", TARGET_FIT_M);
    else if (!at->fit.ok)
        printf("**not met** (%s).\n", at->fit.error);
    else
        printf("%.1f s (%.0f L-BFGS iterations): %s.\n", at->fit.seconds,
               at->fit.iterations, met(at->fit.seconds < TARGET_FIT_S));
    /* (b) */
    printf("- (b) single-point predict under %.0f µs in process (kin40k, M = %d): ",
           TARGET_PREDICT_US, TARGET_FIT_M);
    if (at == NULL || !at->lat.ok) {
        printf("not measured.\n");
    } else {
        printf("mean %.1f µs (p50 %.1f, p99 %.1f): %s.", at->lat.mean_us, at->lat.p50_us,
               at->lat.p99_us, met(at->lat.mean_us < TARGET_PREDICT_US));
        int first = 1;
        for (size_t i = 0; i < n_lr; i++) {
            if (&lr[i] == at || !lr[i].lat.ok)
                continue;
            printf("%s %s M = %zu %.1f µs", first ? " Others (mean):" : ",", lr[i].dataset,
                   lr[i].M, lr[i].lat.mean_us);
            first = 0;
        }
        printf("%s\n", first ? "" : ".");
    }
    /* (c) */
    printf("- (c) renyi α=auto RMSE ≤ sgpr RMSE at the same M = %zu (means over the splits) "
           "on at least %d of the %d datasets concrete, energy, airfoil, wine_red, yacht, "
           "boston: ",
           o->M, TARGET_RENYI_WINS, N_TARGET_SETS);
    int measured = 0, wins = 0, unavailable = 0;
    char yes[256] = "", no[256] = "";
    for (size_t i = 0; i < N_DATASETS; i++) {
        if (!datasets[i].target || !outs[i].ran)
            continue;
        const summary *ra = &outs[i].sums[V_RENYI_AUTO], *sg = &outs[i].sums[V_SGPR];
        unavailable |= ra->unavailable;
        if (ra->n == 0 || sg->n == 0)
            continue;
        measured++;
        int win = ra->rmse[0] <= sg->rmse[0];
        wins += win;
        char *list = win ? yes : no, item[96];
        snprintf(item, sizeof item, "%s%s (%.4g vs %.4g)", list[0] ? ", " : "",
                 datasets[i].name, ra->rmse[0], sg->rmse[0]);
        strncat(list, item, sizeof yes - strlen(list) - 1);
    }
    if (!o->use[V_RENYI_AUTO] || !o->use[V_SGPR])
        printf("not measured (--methods).\n");
    else if (measured == 0)
        printf("not measured%s.\n", unavailable ? " (renyi: not available in this build)" : "");
    else
        printf("%d of %d measured (%s%s): %s. Renyi auto ≤ sgpr: %s; worse: %s.\n", wins,
               measured, measured < N_TARGET_SETS ? "only some datasets ran" : "all six",
               measured < N_TARGET_SETS ? ", the target needs all six" : "",
               met(wins >= TARGET_RENYI_WINS), yes[0] ? yes : "none", no[0] ? no : "none");
    printf("\n");
}

int main(int argc, char **argv)
{
    options o;
    if (parse_args(argc, argv, &o) != 0)
        return 2;
    printf("# bench_sparse\n\n");
    const char *t = getenv("OPENBLAS_NUM_THREADS");
    printf("Inducing-point GPs: `sgpr` (Titsias collapsed bound) and `renyi` (Renyi "
           "α-divergence, dense path) against the exact GP. Kernel rbf ARD (default initial "
           "values), noise learned, standardize on (raw CSV columns otherwise), fit seed = "
           "split index; sgpr and renyi: inducing_selection greedy, optimize_inducing true "
           "(default). "
           "RMSE and mean NLPD per test point (observation variance) in original units, "
           "mean ± std (ddof 0) over splits; fit s = wall time of gp_model_fit; gap = exact "
           "LML − bound at the fit (nats, standardised units); G(α) = the certified gap "
           "renyi reports. OPENBLAS_NUM_THREADS=%s.%s\n\n",
           t != NULL ? t : "(unset)",
           o.quick ? " **--quick: concrete, 1 split; part 2 skipped.**" : "");
    fflush(stdout);
    char why[512];
    if (!gp_datasets_present(why, sizeof why)) {
        printf("skipped: datasets not available: %s (set GPSERVE_DATASETS to the shared "
               "datasets folder)\n\n",
               why);
        return 0;
    }
    double t0 = gp_bench_seconds();
    dataset_outcome outs[N_DATASETS];
    memset(outs, 0, sizeof outs);
    int any = 0;
    for (size_t i = 0; i < N_DATASETS; i++)
        any |= dataset_selected(&o, &datasets[i]);
    if (any) {
        printf("## Part 1: small datasets, M = %zu\n\n", o.M);
        printf("Splits: %d per small dataset, %d for kin8nm and power (training sets "
               "subsampled to %d rows, the same rows for every method).\n\n",
               o.splits, o.big_splits, BIG_MAX_TRAIN);
        for (size_t i = 0; i < N_DATASETS; i++)
            if (dataset_selected(&o, &datasets[i]))
                run_dataset(&o, &datasets[i], &outs[i]);
    }
    large_result lr[MAX_LARGE_M + 1];
    size_t n_lr = 0;
    if (!o.skip_large)
        n_lr = run_large(&o, lr);
    else
        printf("## Part 2: sgpr on kin40k and protein\n\nskipped (%s).\n\n",
               o.quick ? "--quick" : "--skip-large");
    print_targets(&o, outs, lr, n_lr);
    printf("Total wall time: %.0f s.\n", gp_bench_seconds() - t0);
    return 0;
}
