/* Benchmark of the non-Gaussian-likelihood methods `svgp` (sparse variational
 * GP) and `pls` (projected Langevin sampling) on the shared binary and count
 * datasets; with bench/sklearn_classification.py (the peers: scikit-learn's
 * GaussianProcessClassifier, a statsmodels Poisson GLM, PoissonRegressor) the
 * content of bench/results/classification.md.
 *
 * Run from the repository root (or `sh bench/run.sh BUILD classification`,
 * which runs both sides on the same rows and prints the comparison):
 *   build/bench/bench_classification [--quick] [--splits S] [--datasets a,b]
 *                                    [--methods svgp,pls] [--splits-dir DIR]
 * Prints markdown to stdout, progress to stderr. A method missing from the
 * build prints "skipped: method X not built"; the rest still runs.
 *
 * Data: $GPSERVE_DATASETS or ../shared/datasets (skipped with a message when
 * absent). Binary (likelihood bernoulli): breast_wisconsin, pima, ionosphere,
 * sonar, spam; counts (likelihood poisson): doctor_visits. Split k = line k of
 * splits/<name>_test20.txt (test rows; train = the rest), k = 0..S-1 (S =
 * --splits, default 10; --quick: 3 splits of breast_wisconsin, sonar and
 * doctor_visits). --splits-dir DIR writes DIR/configs.tsv, the rows used
 * (DIR/<name>_<k>.train.txt / .test.txt, the test20 format) and the per-split
 * scores (DIR/gpserve.tsv) for the Python side.
 *
 * Every fit: the method's default options, kernel rbf ARD (default initial
 * values), standardize on (X only: labels of a non-Gaussian likelihood are
 * never standardised), fit seed = split index. Scores on the test rows from
 * gp_model_predict: binary: accuracy (p(y=1) = obs_mean >= 0.5), AUC (rank
 * formula, tied scores get their average rank), mean log loss with p clipped
 * to [1e-15, 1 - 1e-15]; counts: mean test log likelihood per point
 * (gp_lik_log_predictive on the latent predictive, every mixture component)
 * and RMSE of the count mean (obs_mean). fit s = wall time of gp_model_fit.
 * mean ± std (ddof 0) over the splits that ran.
 *
 * Duration on the shared 2-core machine (bench/results/classification.md):
 * --splits 3 about 9 minutes, of which pls on spam ~6; the default 10 splits
 * about 30 minutes; the peers as long again. */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/support/args.h"
#include "bench/support/clock.h"
#include "bench/support/dataset.h"
#include "core/base/error.h"
#include "core/kernel/kernel.h"
#include "core/likelihood/likelihood.h"
#include "core/methods/registry.h"
#include "core/model/model.h"

#define MAX_SPLITS 10
#define QUICK_SPLITS 3
#define P_CLIP 1e-15

typedef struct dataset_config {
    const char *name;
    gp_likelihood lik;
    int quick;
} dataset_config;

static const dataset_config datasets[] = {
    {"breast_wisconsin", GP_LIK_BERNOULLI, 1}, {"pima", GP_LIK_BERNOULLI, 0},
    {"ionosphere", GP_LIK_BERNOULLI, 0},       {"sonar", GP_LIK_BERNOULLI, 1},
    {"spam", GP_LIK_BERNOULLI, 0},             {"doctor_visits", GP_LIK_POISSON, 1},
};
#define N_DATASETS (sizeof datasets / sizeof datasets[0])

static const char *const method_names[] = {"svgp", "pls"};
#define N_METHODS 2

typedef struct options {
    int quick, splits;
    int use_dataset[N_DATASETS];
    int use_method[N_METHODS];
    const char *splits_dir;
} options;

/* One fit and its test scores. */
typedef struct result {
    int ok;
    double acc, auc, logloss; /* binary (acc and auc in %) */
    double testll, rmse;      /* counts */
    double fit;
    char error[320];
} result;

/* ---- arguments ---- */

static void usage(const char *prog)
{
    fprintf(stderr,
            "usage: %s [--quick] [--splits S] [--datasets a,b] [--methods svgp,pls] "
            "[--splits-dir DIR]\n"
            "  --quick         3 splits of breast_wisconsin, sonar, doctor_visits\n"
            "  --splits S      splits 0..S-1 per dataset (1..10, default 10)\n"
            "  --datasets L    breast_wisconsin,pima,ionosphere,sonar,spam,doctor_visits\n"
            "  --methods L     svgp,pls (default both)\n"
            "  --splits-dir D  write the rows used and the scores to D (for "
            "bench/sklearn_classification.py --splits D)\n",
            prog);
}

static int parse_list_args(const char *flag, const char *v, options *o)
{
    if (strcmp(flag, "--methods") == 0)
        return gp_bench_parse_names(v, method_names, N_METHODS, o->use_method, flag);
    const char *names[N_DATASETS];
    for (size_t i = 0; i < N_DATASETS; i++)
        names[i] = datasets[i].name;
    return gp_bench_parse_names(v, names, (int)N_DATASETS, o->use_dataset, flag);
}

static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    int splits_given = 0, datasets_given = 0;
    for (int m = 0; m < N_METHODS; m++)
        o->use_method[m] = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        long v = 0;
        if (strcmp(a, "--quick") == 0) {
            o->quick = 1;
        } else if (strcmp(a, "--splits") == 0 && i + 1 < argc &&
                   gp_bench_parse_long(argv[i + 1], 1, MAX_SPLITS, &v) == 0) {
            o->splits = (int)v;
            splits_given = 1;
            i++;
        } else if ((strcmp(a, "--datasets") == 0 || strcmp(a, "--methods") == 0) &&
                   i + 1 < argc) {
            if (parse_list_args(a, argv[++i], o) != 0)
                return -1;
            datasets_given |= strcmp(a, "--datasets") == 0;
        } else if (strcmp(a, "--splits-dir") == 0 && i + 1 < argc) {
            o->splits_dir = argv[++i];
        } else {
            usage(argv[0]);
            return -1;
        }
    }
    if (!splits_given)
        o->splits = o->quick ? QUICK_SPLITS : MAX_SPLITS;
    for (size_t i = 0; i < N_DATASETS && !datasets_given; i++)
        o->use_dataset[i] = !o->quick || datasets[i].quick;
    return 0;
}

/* ---- scores ---- */

typedef struct scored {
    double p;
    double y;
} scored;

static int cmp_scored(const void *a, const void *b)
{
    double x = ((const scored *)a)->p, z = ((const scored *)b)->p;
    return (x > z) - (x < z);
}

/* AUC by the rank (Mann-Whitney) formula; tied scores share their average
 * rank. NAN when one class is absent or on allocation failure. */
static double auc_rank(const double *p, const double *y, size_t n)
{
    scored *s = malloc(n * sizeof *s);
    if (s == NULL)
        return NAN;
    for (size_t i = 0; i < n; i++)
        s[i] = (scored){p[i], y[i]};
    qsort(s, n, sizeof *s, cmp_scored);
    double rank_sum = 0.0, n1 = 0.0;
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && s[j + 1].p == s[i].p)
            j++;
        double rank = 0.5 * (double)(i + j) + 1.0;
        for (size_t t = i; t <= j; t++)
            if (s[t].y == 1.0) {
                rank_sum += rank;
                n1 += 1.0;
            }
        i = j + 1;
    }
    free(s);
    double n0 = (double)n - n1;
    if (n1 == 0.0 || n0 == 0.0)
        return NAN;
    return (rank_sum - n1 * (n1 + 1.0) / 2.0) / (n1 * n0);
}

static void binary_scores(const double *p, const double *y, size_t n, result *r)
{
    double correct = 0.0, ll = 0.0;
    for (size_t i = 0; i < n; i++) {
        double pc = fmin(fmax(p[i], P_CLIP), 1.0 - P_CLIP);
        correct += (p[i] >= 0.5) == (y[i] == 1.0);
        ll += y[i] == 1.0 ? log(pc) : log(1.0 - pc);
    }
    r->acc = 100.0 * correct / (double)n;
    r->auc = 100.0 * auc_rank(p, y, n);
    r->logloss = -ll / (double)n;
}

/* ---- prediction ---- */

/* The buffers of one prediction: 6 m-vectors and the components (m x K). */
typedef struct pred_buf {
    double *block;
    gp_prediction out;
} pred_buf;

static int pred_buf_alloc(pred_buf *b, size_t m, size_t K)
{
    memset(b, 0, sizeof *b);
    size_t kk = K > 1 ? K : 0;
    b->block = calloc(8 * m + 2 * m * kk, sizeof(double));
    if (b->block == NULL)
        return GP_ENOMEM;
    double **v[] = {&b->out.mean,     &b->out.variance,      &b->out.latent_mean,
                    &b->out.latent_variance, &b->out.obs_mean, &b->out.obs_variance,
                    &b->out.rate_mean, &b->out.rate_variance};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        *v[i] = b->block + i * m;
    if (kk) {
        b->out.component_mean = b->block + 8 * m;
        b->out.component_variance = b->block + 8 * m + m * kk;
    }
    return GP_OK;
}

/* Test log likelihood per point from the latent predictive (all components). */
static double count_log_lik(const gp_model *model, const pred_buf *b, const gp_dataset *test,
                            size_t K, gp_error *err)
{
    gp_quadrature q;
    double *logp = malloc(test->n * sizeof *logp);
    if (logp == NULL || gp_quadrature_init(&q, GP_LIK_QUADRATURE_POINTS, err) != GP_OK) {
        free(logp);
        return NAN;
    }
    gp_lik lik = {model->likelihood, 0.0};
    const double *mu = K > 1 ? b->out.component_mean : b->out.latent_mean;
    const double *var = K > 1 ? b->out.component_variance : b->out.latent_variance;
    gp_lik_log_predictive(&lik, &q, mu, var, test->n, K, test->y, logp);
    double s = 0.0;
    for (size_t i = 0; i < test->n; i++)
        s += logp[i];
    free(logp);
    return s / (double)test->n;
}

static void count_scores(const gp_model *model, const pred_buf *b, const gp_dataset *test,
                         size_t K, result *r, gp_error *err)
{
    double se = 0.0;
    for (size_t i = 0; i < test->n; i++) {
        double e = test->y[i] - b->out.obs_mean[i];
        se += e * e;
    }
    r->rmse = sqrt(se / (double)test->n);
    r->testll = count_log_lik(model, b, test, K, err);
}

static void score_model(const gp_model *model, const gp_dataset *test, result *r)
{
    gp_error err;
    gp_error_clear(&err);
    size_t K = gp_model_components(model);
    pred_buf b;
    int rc = pred_buf_alloc(&b, test->n, K);
    gp_predict_request req;
    memset(&req, 0, sizeof req);
    req.X = test->X;
    req.m = test->n;
    req.d = test->d;
    req.include_noise = 1;
    req.components = K > 1;
    if (rc == GP_OK)
        rc = gp_model_predict(model, &req, &b.out, &err);
    if (rc != GP_OK) {
        snprintf(r->error, sizeof r->error, "predict failed: %s (%s)", gp_status_name(rc),
                 err.message);
    } else {
        if (model->likelihood == GP_LIK_BERNOULLI)
            binary_scores(b.out.obs_mean, test->y, test->n, r);
        else
            count_scores(model, &b, test, K, r, &err);
        r->ok = 1;
    }
    free(b.block);
}

/* ---- fitting ---- */

static int fit_model(const gp_method *m, const gp_dataset *train, gp_likelihood lik,
                     uint64_t seed, gp_model **model, result *r)
{
    gp_error err;
    gp_error_clear(&err);
    gp_kernel *k = NULL;
    int rc = gp_kernel_leaf(&k, GP_KERNEL_RBF, train->d, 1, NULL, 0, &err);
    gp_fit_request req;
    memset(&req, 0, sizeof req);
    req.X = train->X;
    req.y = train->y;
    req.n = train->n;
    req.d = train->d;
    req.kernel = k;
    req.standardize = 1;
    req.seed = seed;
    req.likelihood = lik;
    double t0 = gp_bench_seconds();
    if (rc == GP_OK)
        rc = gp_model_fit(m, &req, model, &err);
    r->fit = gp_bench_seconds() - t0;
    gp_kernel_free(k);
    if (rc != GP_OK) {
        *model = NULL;
        snprintf(r->error, sizeof r->error, "fit failed: %s (%s)", gp_status_name(rc),
                 err.message);
    }
    return rc;
}

static void run_method(const gp_method *m, const gp_dataset *train, const gp_dataset *test,
                       gp_likelihood lik, int k, result *r)
{
    memset(r, 0, sizeof *r);
    gp_model *model = NULL;
    if (fit_model(m, train, lik, (uint64_t)k, &model, r) == GP_OK)
        score_model(model, test, r);
    gp_model_free(model);
}

/* ---- output files for the Python side ---- */

static FILE *open_in(const char *dir, const char *file, const char *mode)
{
    char path[GP_DATASET_PATH_LEN];
    int w = snprintf(path, sizeof path, "%s/%s", dir, file);
    if (w < 0 || (size_t)w >= sizeof path)
        return NULL;
    FILE *f = fopen(path, mode);
    if (f == NULL)
        fprintf(stderr, "bench_classification: cannot write %s\n", path);
    return f;
}

static int write_split(const char *dir, const char *name, int k, const gp_split *sp)
{
    char path[GP_DATASET_PATH_LEN];
    gp_error err;
    gp_error_clear(&err);
    snprintf(path, sizeof path, "%s/%s_%d.train.txt", dir, name, k);
    int rc = gp_indices_write(path, sp->train, sp->n_train, &err);
    snprintf(path, sizeof path, "%s/%s_%d.test.txt", dir, name, k);
    if (rc == GP_OK)
        rc = gp_indices_write(path, sp->test, sp->n_test, &err);
    FILE *f = rc == GP_OK ? open_in(dir, "configs.tsv", "a") : NULL;
    if (f == NULL) {
        fprintf(stderr, "bench_classification: writing the rows of %s split %d: %s\n", name, k,
                err.message);
        return -1;
    }
    fprintf(f, "%s\t%d\n", name, k);
    fclose(f);
    return 0;
}

static void write_result(const char *dir, const char *name, const char *method, int k,
                         const result *r)
{
    FILE *f = dir != NULL ? open_in(dir, "gpserve.tsv", "a") : NULL;
    if (f == NULL)
        return;
    fprintf(f, "%s\t%s\t%d\t%s\t%.17g\t%.17g\t%.17g\t%.17g\t%.17g\t%.17g\n", name, method, k,
            r->ok ? "ok" : r->error, r->acc, r->auc, r->logloss, r->testll, r->rmse, r->fit);
    fclose(f);
}

static void init_files(const char *dir)
{
    FILE *f = open_in(dir, "configs.tsv", "w");
    if (f != NULL) {
        fprintf(f, "dataset\tsplit\n");
        fclose(f);
    }
    f = open_in(dir, "gpserve.tsv", "w");
    if (f != NULL) {
        fprintf(f, "dataset\tmethod\tsplit\tstatus\tacc\tauc\tlogloss\ttestll\trmse\tfit\n");
        fclose(f);
    }
}

/* ---- tables ---- */

static void mean_std(const result *rs, int n, size_t offset, double out[2])
{
    double s = 0.0, s2 = 0.0;
    int c = 0;
    for (int i = 0; i < n; i++) {
        if (!rs[i].ok)
            continue;
        double v = *(const double *)((const char *)&rs[i] + offset);
        s += v;
        s2 += v * v;
        c++;
    }
    out[0] = c ? s / c : NAN;
    out[1] = c ? sqrt(fmax(s2 / c - out[0] * out[0], 0.0)) : NAN;
}

static int count_ok(const result *rs, int n, const char **error)
{
    int c = 0;
    *error = NULL;
    for (int i = 0; i < n; i++) {
        c += rs[i].ok;
        if (!rs[i].ok && *error == NULL)
            *error = rs[i].error;
    }
    return c;
}

static void print_cell(const result *rs, int n, size_t offset, const char *fmt)
{
    double ms[2];
    mean_std(rs, n, offset, ms);
    printf(" ");
    printf(fmt, ms[0]);
    printf(" ± ");
    printf(fmt, ms[1]);
    printf(" |");
}

static void print_row(const dataset_config *c, const char *method, const result *rs, int n)
{
    const char *error;
    int ok = count_ok(rs, n, &error);
    printf("| %s |", method);
    if (ok == 0) {
        printf(" %s | | | |%s\n", error ? error : "no split ran",
               c->lik == GP_LIK_BERNOULLI ? " |" : "");
        return;
    }
    if (c->lik == GP_LIK_BERNOULLI) {
        print_cell(rs, n, offsetof(result, acc), "%.2f");
        print_cell(rs, n, offsetof(result, auc), "%.2f");
        print_cell(rs, n, offsetof(result, logloss), "%.4f");
    } else {
        print_cell(rs, n, offsetof(result, testll), "%.4f");
        print_cell(rs, n, offsetof(result, rmse), "%.4f");
    }
    print_cell(rs, n, offsetof(result, fit), "%.2f");
    if (ok < n && error != NULL)
        printf(" %d / %d (failed: %s) |\n", ok, n, error);
    else
        printf(" %d / %d |\n", ok, n);
}

static void print_table_head(const dataset_config *c, const gp_dataset *all, int splits)
{
    printf("### %s\n\n", c->name);
    printf("test20 splits 0..%d: N %zu, d %zu, likelihood %s.\n\n", splits - 1, all->n,
           all->d, gp_likelihood_name(c->lik));
    if (c->lik == GP_LIK_BERNOULLI) {
        printf("| method | accuracy %% | AUC %% | log loss | fit s | splits |\n");
        printf("|---|---:|---:|---:|---:|---|\n");
    } else {
        printf("| method | test log lik / point | RMSE | fit s | splits |\n");
        printf("|---|---:|---:|---:|---|\n");
    }
}

/* ---- the run ---- */

static void run_split(const options *o, const dataset_config *c, const gp_dataset *all, int k,
                      result rs[N_METHODS][MAX_SPLITS])
{
    gp_split sp;
    gp_dataset train, test;
    gp_error err;
    gp_error_clear(&err);
    memset(&sp, 0, sizeof sp);
    memset(&train, 0, sizeof train);
    memset(&test, 0, sizeof test);
    int rc = gp_split_load(c->name, "test20", k, all->n, &sp, &err);
    if (rc == GP_OK)
        rc = gp_dataset_rows(all, sp.train, sp.n_train, &train, &err);
    if (rc == GP_OK)
        rc = gp_dataset_rows(all, sp.test, sp.n_test, &test, &err);
    if (rc == GP_OK && o->splits_dir != NULL)
        write_split(o->splits_dir, c->name, k, &sp);
    for (int m = 0; m < N_METHODS; m++) {
        result *r = &rs[m][k];
        memset(r, 0, sizeof *r);
        const gp_method *meth = gp_method_find(method_names[m]);
        if (!o->use_method[m] || meth == NULL)
            continue;
        if (rc != GP_OK)
            snprintf(r->error, sizeof r->error, "split %d: %s", k, err.message);
        else
            run_method(meth, &train, &test, c->lik, k, r);
        fprintf(stderr, "bench_classification: %s %s split %d: %s %.2f s\n", c->name,
                method_names[m], k, r->ok ? "ok" : r->error, r->fit);
        write_result(o->splits_dir, c->name, method_names[m], k, r);
    }
    gp_dataset_free(&train);
    gp_dataset_free(&test);
    gp_split_free(&sp);
}

static void run_dataset(const options *o, const dataset_config *c)
{
    gp_dataset all;
    gp_error err;
    gp_error_clear(&err);
    if (gp_dataset_load(c->name, &all, &err) != GP_OK) {
        printf("### %s\n\nskipped: %s\n\n", c->name, err.message);
        return;
    }
    static result rs[N_METHODS][MAX_SPLITS];
    for (int k = 0; k < o->splits; k++)
        run_split(o, c, &all, k, rs);
    print_table_head(c, &all, o->splits);
    for (int m = 0; m < N_METHODS; m++) {
        if (!o->use_method[m])
            continue;
        if (gp_method_find(method_names[m]) == NULL)
            printf("| %s | skipped: method %s not built | | | |%s\n", method_names[m],
                   method_names[m], c->lik == GP_LIK_BERNOULLI ? " |" : "");
        else
            print_row(c, method_names[m], rs[m], o->splits);
    }
    printf("\n");
    fflush(stdout);
    gp_dataset_free(&all);
}

static void print_header(const options *o)
{
    const char *t = getenv("OPENBLAS_NUM_THREADS");
    printf("# bench_classification\n\n");
    printf("gpserve `svgp` and `pls` with non-Gaussian likelihoods (bernoulli for the binary "
           "sets, poisson for doctor_visits): default options, kernel rbf ARD (default initial "
           "values), standardize on, fit seed = split index. Accuracy (p(y=1) ≥ 0.5), AUC "
           "(rank formula) and accuracy in %%, mean log loss (p clipped to [1e-15, 1 − "
           "1e-15]); counts: mean test log likelihood per point and RMSE of the count mean; "
           "fit s = wall time of gp_model_fit; mean ± std (ddof 0) over splits. "
           "OPENBLAS_NUM_THREADS=%s.%s\n\n",
           t != NULL ? t : "(unset)",
           o->quick ? " **--quick: 3 splits of breast_wisconsin, sonar, doctor_visits.**" : "");
    for (int m = 0; m < N_METHODS; m++)
        if (o->use_method[m] && gp_method_find(method_names[m]) == NULL)
            printf("skipped: method %s not built (its rows below say so; the peers still "
                   "run).\n\n",
                   method_names[m]);
}

int main(int argc, char **argv)
{
    options o;
    if (parse_args(argc, argv, &o) != 0)
        return 2;
    print_header(&o);
    char why[512];
    if (!gp_datasets_present(why, sizeof why)) {
        printf("skipped: datasets not available: %s (set GPSERVE_DATASETS to the shared "
               "datasets folder)\n\n",
               why);
        return 0;
    }
    if (o.splits_dir != NULL)
        init_files(o.splits_dir);
    double t0 = gp_bench_seconds();
    for (size_t i = 0; i < N_DATASETS; i++)
        if (o.use_dataset[i])
            run_dataset(&o, &datasets[i]);
    printf("Total wall time: %.0f s.\n\n", gp_bench_seconds() - t0);
    return 0;
}
