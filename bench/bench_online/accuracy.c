/* bench_online part 1 "accuracy" (main.c's comment): every peer fitted on the
 * same pairs, scored by the log KL of its predicted messages. */

#include "bench/bench_online/online.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/support/clock.h"
#include "bench/support/kjit_ep.h"
#include "core/base/error.h"
#include "core/base/rng.h"
#include "core/kernel/kernel.h"
#include "core/methods/registry.h"

#define SHUFFLE_SEED 2015
#define TARGET_LOG_KL (-8.5)
#define NOTE_KJIT (-8.9740)
#define NOTE_KJIT_SD 1.5731
#define NOTE_MV (-6.9554)
#define NOTE_MV_SD 1.6726

/* ---- part 1 ---- */

const char *const peer_names[N_PEERS] = {"rfgp_median", "rfgp_loocv", "rfgp_ml",
                                         "rfgp_online", "rfgp_mv",    "exact_mv"};

/* A column-major subset for the core API: X rows x IN_COLS, Y rows x OUT_COLS. */
typedef struct colset {
    size_t n;
    double *X, *Y;
} colset;

static int colset_from(const pairs *p, const size_t *idx, size_t n, colset *c)
{
    c->n = n;
    c->X = malloc(n * IN_COLS * sizeof *c->X);
    c->Y = malloc(n * OUT_COLS * sizeof *c->Y);
    if (c->X == NULL || c->Y == NULL)
        return -1;
    for (size_t i = 0; i < n; i++) {
        for (size_t j = 0; j < IN_COLS; j++)
            c->X[j * n + i] = p->in[idx[i] * IN_COLS + j];
        for (size_t j = 0; j < OUT_COLS; j++)
            c->Y[j * n + i] = p->out[idx[i] * OUT_COLS + j];
    }
    return 0;
}

static void colset_free(colset *c)
{
    free(c->X);
    free(c->Y);
    memset(c, 0, sizeof *c);
}

typedef struct peer_result {
    int ok;
    char why[WHY_LEN];
    double mean, sd, median, below_target; /* log KL over the test pairs */
    double fit_seconds, predict_us;        /* predict: per test point, one call for all */
    char info[200];                        /* the fit's method_info (widths chosen) */
} peer_result;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Scores from the predicted mean (column 0) and log variance (column 1). */
static void score(const colset *test, const double *pm, const double *plv, peer_result *r)
{
    size_t n = test->n;
    double *lk = malloc(n * sizeof *lk);
    if (lk == NULL) {
        snprintf(r->why, sizeof r->why, "out of memory");
        return;
    }
    double s = 0, s2 = 0;
    size_t below = 0;
    for (size_t i = 0; i < n; i++) {
        double kl = gp_kjit_gauss_kl(test->Y[i], test->Y[n + i], pm[i], plv[i]);
        lk[i] = log(kl > 1e-300 ? kl : 1e-300);
        s += lk[i];
        below += lk[i] <= TARGET_LOG_KL;
    }
    r->mean = s / (double)n;
    for (size_t i = 0; i < n; i++)
        s2 += (lk[i] - r->mean) * (lk[i] - r->mean);
    r->sd = n > 1 ? sqrt(s2 / (double)(n - 1)) : 0;
    qsort(lk, n, sizeof *lk, cmp_double);
    r->median = n % 2 ? lk[n / 2] : 0.5 * (lk[n / 2 - 1] + lk[n / 2]);
    r->below_target = (double)below / (double)n;
    r->ok = isfinite(r->mean);
    if (!r->ok)
        snprintf(r->why, sizeof r->why, "non-finite log KL");
    free(lk);
}

/* The fit's facts worth a column: the widths rfgp chose and the path rows took. */
static void read_info(const gp_model *model, char *buf, size_t len)
{
    static const char *const keys[] = {"outer_width", "prior_variance", "rank_one_updates"};
    size_t used = 0;
    buf[0] = '\0';
    for (size_t i = 0; i < model->diag.n_info && used < len; i++) {
        const gp_info_item *it = &model->diag.info[i];
        int want = 0;
        for (size_t k = 0; k < sizeof keys / sizeof keys[0]; k++)
            want |= strcmp(it->key, keys[k]) == 0;
        if (!want || it->string != NULL || (strcmp(it->key, "rank_one_updates") == 0 && it->number == 0))
            continue;
        int w = snprintf(buf + used, len - used, "%s%s %.4g", used ? ", " : "", it->key,
                         it->number);
        if (w < 0)
            break;
        used += (size_t)w;
    }
}

/* Predict means of a p-output model at the test inputs; pm and plv get
 * columns 0 and 1 (p = 2), or column 0 (p = 1, into pm only). */
static int predict_cols(const gp_model *model, const double *X, size_t m, size_t width,
                        double *mean, double *var, char *why, size_t why_len, double *us)
{
    gp_predict_request pr;
    memset(&pr, 0, sizeof pr);
    pr.X = X;
    pr.m = m;
    pr.d = width;
    pr.include_noise = 1;
    gp_prediction out;
    memset(&out, 0, sizeof out);
    out.mean = mean;
    out.variance = var;
    gp_error err;
    double t0 = gp_bench_seconds();
    int rc = gp_model_predict(model, &pr, &out, &err);
    *us = 1e6 * (gp_bench_seconds() - t0) / (double)m;
    if (rc != GP_OK) {
        snprintf(why, why_len, "predict: %s (%s)", gp_status_name(rc), err.message);
        return -1;
    }
    return 0;
}

static void run_rfgp_peer(const options *o, int peer, int standardize, const colset *train,
                          const colset *test, peer_result *r)
{
    memset(r, 0, sizeof *r);
    rfgp_spec s = {.messages = peer != PEER_RFGP_MV,
                   .standardize = standardize,
                   .noise = o->noise,
                   .widths = peer == PEER_RFGP_LOOCV ? "loocv"
                             : peer == PEER_RFGP_ML  ? "ml"
                                                     : "median",
                   .features = o->features,
                   .inner = o->inner_features,
                   .warmup = -1,
                   .outputs = OUT_COLS};
    size_t n = train->n, first = n;
    double t0 = gp_bench_seconds();
    gp_model *model = NULL;
    if (peer == PEER_RFGP_ONLINE) {
        /* the warm-up rows by the fit, the rest one observe each */
        const gp_method *m = gp_method_find("rfgp");
        const gp_option_spec *ws = m != NULL ? gp_method_option_spec(m, "warmup") : NULL;
        first = ws != NULL ? (size_t)ws->default_number : 300;
        if (first > n)
            first = n;
        double *X0 = malloc(first * IN_COLS * sizeof *X0), *Y0 = malloc(first * OUT_COLS * sizeof *Y0);
        if (X0 == NULL || Y0 == NULL) {
            free(X0);
            free(Y0);
            snprintf(r->why, sizeof r->why, "out of memory");
            return;
        }
        for (size_t j = 0; j < IN_COLS; j++)
            memcpy(X0 + j * first, train->X + j * n, first * sizeof *X0);
        for (size_t j = 0; j < OUT_COLS; j++)
            memcpy(Y0 + j * first, train->Y + j * n, first * sizeof *Y0);
        model = rfgp_fit(&s, X0, Y0, first, IN_COLS, r->why, sizeof r->why);
        free(X0);
        free(Y0);
        if (model != NULL) {
            double x[IN_COLS], y[OUT_COLS];
            gp_error err;
            for (size_t i = first; i < n; i++) {
                for (size_t j = 0; j < IN_COLS; j++)
                    x[j] = train->X[j * n + i];
                for (size_t j = 0; j < OUT_COLS; j++)
                    y[j] = train->Y[j * n + i];
                int rc = gp_model_observe(model, x, y, 1, &err);
                if (rc != GP_OK) {
                    snprintf(r->why, sizeof r->why, "observe row %zu: %s (%s)", i,
                             gp_status_name(rc), err.message);
                    gp_model_free(model);
                    return;
                }
            }
        }
    } else {
        model = rfgp_fit(&s, train->X, train->Y, n, IN_COLS, r->why, sizeof r->why);
    }
    r->fit_seconds = gp_bench_seconds() - t0;
    if (model == NULL)
        return;
    read_info(model, r->info, sizeof r->info);
    size_t m = test->n;
    double *mean = malloc(m * OUT_COLS * sizeof *mean), *var = malloc(m * OUT_COLS * sizeof *var);
    if (mean != NULL && var != NULL &&
        predict_cols(model, test->X, m, IN_COLS, mean, var, r->why, sizeof r->why,
                     &r->predict_us) == 0)
        score(test, mean, mean + m, r);
    free(mean);
    free(var);
    gp_model_free(model);
}

/* An exact GP per output on the first `cap` training pairs (they are shuffled). */
static void run_exact_peer(const colset *train_all, size_t cap, const colset *test,
                           peer_result *r)
{
    memset(r, 0, sizeof *r);
    const gp_method *m = gp_method_find("exact");
    size_t n = train_all->n < cap ? train_all->n : cap, nt = test->n;
    /* the first n rows of each column: a view with stride train_all->n is not
     * what the request takes, so copy */
    colset sub = {.n = n, .X = malloc(n * IN_COLS * sizeof(double)),
                  .Y = malloc(n * OUT_COLS * sizeof(double))};
    const colset *train = &sub;
    if (sub.X == NULL || sub.Y == NULL) {
        snprintf(r->why, sizeof r->why, "out of memory");
        colset_free(&sub);
        return;
    }
    for (size_t j = 0; j < IN_COLS; j++)
        memcpy(sub.X + j * n, train_all->X + j * train_all->n, n * sizeof(double));
    for (size_t j = 0; j < OUT_COLS; j++)
        memcpy(sub.Y + j * n, train_all->Y + j * train_all->n, n * sizeof(double));
    double *pred = malloc(nt * OUT_COLS * sizeof *pred), *var = malloc(nt * sizeof *var);
    if (m == NULL || pred == NULL || var == NULL) {
        snprintf(r->why, sizeof r->why, m == NULL ? "exact is not registered" : "out of memory");
        free(pred);
        free(var);
        colset_free(&sub);
        return;
    }
    size_t used = 0;
    for (size_t j = 0; j < OUT_COLS; j++) {
        gp_error err;
        gp_kernel *k = NULL;
        int rc = gp_kernel_leaf(&k, GP_KERNEL_RBF, IN_COLS, 1, NULL, 0, &err);
        gp_model *model = NULL;
        if (rc == GP_OK) {
            gp_fit_request req;
            memset(&req, 0, sizeof req);
            req.X = train->X;
            req.y = train->Y + j * n;
            req.n = n;
            req.d = IN_COLS;
            req.kernel = k;
            req.standardize = 1;
            req.seed = FIT_SEED;
            double t0 = gp_bench_seconds();
            rc = gp_model_fit(m, &req, &model, &err);
            r->fit_seconds += gp_bench_seconds() - t0;
        }
        gp_kernel_free(k);
        if (rc != GP_OK) {
            snprintf(r->why, sizeof r->why, "exact fit: %s (%s)", gp_status_name(rc), err.message);
            free(pred);
            free(var);
            colset_free(&sub);
            return;
        }
        double us = 0;
        rc = predict_cols(model, test->X, nt, IN_COLS, pred + j * nt, var, r->why, sizeof r->why,
                          &us);
        r->predict_us += us;
        int w = snprintf(r->info + used, sizeof r->info - used, "%soutput %zu: noise %.3g, %d it",
                         j ? "; " : "", j, model->noise_variance * model->y_scale * model->y_scale,
                         model->diag.iterations);
        if (w > 0 && (size_t)w < sizeof r->info - used)
            used += (size_t)w;
        gp_model_free(model);
        if (rc != 0) {
            free(pred);
            free(var);
            colset_free(&sub);
            return;
        }
    }
    score(test, pred, pred + nt, r);
    snprintf(r->info + used, sizeof r->info - used, "; %zu training pairs", n);
    free(pred);
    free(var);
    colset_free(&sub);
}

static int write_csv(const char *path, const colset *c)
{
    FILE *f = fopen(path, "w");
    if (f == NULL)
        return -1;
    fprintf(f, "m,v,a,b,mean,logvar\n");
    for (size_t i = 0; i < c->n; i++)
        fprintf(f, "%.17g,%.17g,%.17g,%.17g,%.17g,%.17g\n", c->X[i], c->X[c->n + i],
                c->X[2 * c->n + i], c->X[3 * c->n + i], c->Y[i], c->Y[c->n + i]);
    return fclose(f);
}

static void summarise_inputs(const colset *c)
{
    double lo[IN_COLS + OUT_COLS], hi[IN_COLS + OUT_COLS];
    for (size_t j = 0; j < IN_COLS + OUT_COLS; j++) {
        lo[j] = INFINITY;
        hi[j] = -INFINITY;
    }
    size_t ones = 0;
    for (size_t i = 0; i < c->n; i++) {
        for (size_t j = 0; j < IN_COLS; j++) {
            double x = c->X[j * c->n + i];
            lo[j] = x < lo[j] ? x : lo[j];
            hi[j] = x > hi[j] ? x : hi[j];
        }
        for (size_t j = 0; j < OUT_COLS; j++) {
            double x = c->Y[j * c->n + i];
            lo[IN_COLS + j] = x < lo[IN_COLS + j] ? x : lo[IN_COLS + j];
            hi[IN_COLS + j] = x > hi[IN_COLS + j] ? x : hi[IN_COLS + j];
        }
        ones += c->X[2 * c->n + i] == 2;
    }
    printf("Training pairs: cavity mean m in [%.3g, %.3g], variance v in [%.3g, %.3g]; label 1 "
           "(Beta(2, 1)) in %.1f%%; target mean in [%.3g, %.3g], log variance in [%.3g, %.3g].\n\n",
           lo[0], hi[0], lo[1], hi[1], 100.0 * (double)ones / (double)c->n, lo[4], hi[4], lo[5],
           hi[5]);
}

int part_accuracy(const options *o, gp_kjit_oracle *oracle)
{
    printf("## 1. Message prediction: the logistic factor (KJIT Experiment 1)\n\n");
    double w[EXP_D];
    gp_kjit_true_w(EXP_D, TRUE_W_SEED, w);
    pairs all;
    memset(&all, 0, sizeof all);
    ep_stats st;
    memset(&st, 0, sizeof st);
    double t0 = gp_bench_seconds();
    if (run_oracle_ep(w, EXP_D, EXP_N, 1.0, 1, o->problems, EXP_SWEEPS, oracle, &all, NULL, NULL,
                      &st) != 0) {
        printf("EP failed\n\n");
        pairs_free(&all);
        return 1;
    }
    double ep_seconds = gp_bench_seconds() - t0;
    fprintf(stderr, "bench_online: %zu pairs from %d EP runs in %.1f s (oracle %.1f us a call)\n",
            all.n, o->problems, ep_seconds, 1e6 * st.oracle_seconds / (double)st.oracle_calls);
    size_t want = o->train + o->test;
    if (all.n < want) {
        printf("only %zu pairs for %zu train + %zu test: lower --train/--test or raise "
               "--problems\n\n",
               all.n, o->train, o->test);
        pairs_free(&all);
        return 1;
    }
    size_t *idx = malloc(all.n * sizeof *idx);
    colset train, test;
    memset(&train, 0, sizeof train);
    memset(&test, 0, sizeof test);
    if (idx == NULL) {
        pairs_free(&all);
        return 1;
    }
    for (size_t i = 0; i < all.n; i++)
        idx[i] = i;
    gp_rng rng;
    gp_rng_seed(&rng, SHUFFLE_SEED);
    for (size_t i = 0; i + 1 < all.n; i++) {
        size_t j = i + (size_t)gp_rng_below(&rng, all.n - i);
        size_t t = idx[i];
        idx[i] = idx[j];
        idx[j] = t;
    }
    int status = 0;
    if (colset_from(&all, idx, o->train, &train) != 0 ||
        colset_from(&all, idx + o->train, o->test, &test) != 0) {
        printf("out of memory\n\n");
        status = 1;
        goto done;
    }
    printf("EP on toy Bayesian logistic regression: d = %d, n = %d points a problem, %d sweeps "
           "(sequential, undamped), %d problems (seeds 1..%d), one true w ~ N(0, I) (seed %d), "
           "x ~ N(0, I), prior w ~ N(0, I); the label's message is Beta(y + 1, 2 - y). %zu "
           "pairs (%zu EP updates refused, %zu refactorisations failed), shuffled (seed %d): "
           "%zu train, %zu test. Oracle: adaptive Gauss-Legendre quadrature, %.1f us a call. "
           "rfgp noise variance %.0e (fixed), features %s outer / %s inner.\n\n",
           EXP_D, EXP_N, EXP_SWEEPS, o->problems, o->problems, TRUE_W_SEED, all.n, st.skipped,
           st.refresh_failures, SHUFFLE_SEED, o->train, o->test,
           1e6 * st.oracle_seconds / (double)st.oracle_calls, o->noise,
           o->features ? "(--features)" : "the default", o->inner_features ? "(--inner-features)"
                                                                          : "the default");
    if (o->features || o->inner_features)
        printf("(--features %ld, --inner-features %ld; 0 = rfgp's default)\n\n", o->features,
               o->inner_features);
    summarise_inputs(&train);
    if (o->pairs_out[0]) {
        char path[1100];
        snprintf(path, sizeof path, "%s/train.csv", o->pairs_out);
        int rc = write_csv(path, &train);
        snprintf(path, sizeof path, "%s/test.csv", o->pairs_out);
        if (rc != 0 || write_csv(path, &test) != 0)
            fprintf(stderr, "bench_online: could not write the pairs to %s\n", o->pairs_out);
    }
    /* pass 0: the note's setting (raw targets); pass 1: standardize on (the
     * API's default), rfgp peers fitted in batch only */
    peer_result res[2][N_PEERS];
    for (int pass = 0; pass < 2; pass++)
        for (int p = 0; p < N_PEERS; p++) {
            memset(&res[pass][p], 0, sizeof res[pass][p]);
            if (!o->peers[p] || (pass == 1 && (p == PEER_EXACT_MV || p == PEER_RFGP_ONLINE)))
                continue;
            fprintf(stderr, "bench_online: fitting %s%s ...\n", peer_names[p],
                    pass ? " (standardize on)" : "");
            peer_result *r = &res[pass][p];
            if (p == PEER_EXACT_MV)
                run_exact_peer(&train, o->exact_train, &test, r);
            else
                run_rfgp_peer(o, p, pass, &train, &test, r);
            if (r->ok)
                fprintf(stderr, "bench_online:   %s: log KL %.3f (SD %.3f), fit %.2f s [%s]\n",
                        peer_names[p], r->mean, r->sd, r->fit_seconds, r->info);
            else
                fprintf(stderr, "bench_online:   %s: %s\n", peer_names[p], r->why);
        }
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            printf("The rfgp peers again with standardize on (the API's default: outputs, and "
                   "point inputs, standardised with the warm-up rows' statistics, the noise "
                   "variance %.0e then in standardised units):\n\n",
                   o->noise);
        printf("| operator | mean log KL | SD | median | share <= %.1f | fit s | predict "
               "us/point | fit facts |\n",
               TARGET_LOG_KL);
        printf("|---|---:|---:|---:|---:|---:|---:|---|\n");
        for (int p = 0; p < N_PEERS; p++) {
            const peer_result *r = &res[pass][p];
            if (!o->peers[p] || (pass == 1 && (p == PEER_EXACT_MV || p == PEER_RFGP_ONLINE)))
                continue;
            if (!r->ok) {
                printf("| %s | %s | | | | | | |\n", peer_names[p], r->why);
                continue;
            }
            printf("| %s | %.3f | %.3f | %.3f | %.1f%% | %.2f | %.2f | %s |\n", peer_names[p],
                   r->mean, r->sd, r->median, 100 * r->below_target, r->fit_seconds,
                   r->predict_us, r->info);
        }
        if (pass == 0) {
            printf("| note §5: RF + Gauss. kernel on joint embeddings (KJIT) | %.3f | %.3f | | | "
                   "| | the deck's table |\n",
                   NOTE_KJIT, NOTE_KJIT_SD);
            printf("| note §5: RF + MV kernel | %.3f | %.3f | | | | | the deck's table |\n",
                   NOTE_MV, NOTE_MV_SD);
        }
        printf("\n");
    }
    peer_result *res0 = res[0];
    if (o->peers[PEER_RFGP_MEDIAN] && res0[PEER_RFGP_MEDIAN].ok)
        printf("Target (issue 16): rfgp (messages, median widths) mean log KL <= %.1f: %.3f, "
               "%s.\n\n",
               TARGET_LOG_KL, res0[PEER_RFGP_MEDIAN].mean,
               res0[PEER_RFGP_MEDIAN].mean <= TARGET_LOG_KL ? "met" : "NOT met");
    else
        status = 1;
done:
    colset_free(&train);
    colset_free(&test);
    free(idx);
    pairs_free(&all);
    return status;
}
