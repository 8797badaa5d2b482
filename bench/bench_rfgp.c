/* rfgp's online costs (docs/methods/kernel-jit-online.md, "As implemented"):
 *   1. one observation at D = 800, p = 1, point inputs d = 4: the mean over
 *      10^4 observes of one row, split into the features and the update;
 *   2. prediction per point (one point per call, and a batch of 1000);
 *   3. the crossover of refactor_batch: a batch of k rows by k rank-one
 *      updates against one re-factorisation, on copies of one online model.
 * Run with OPENBLAS_NUM_THREADS=1 (the method makes BLAS single-threaded in
 * its entry points anyway):
 *   OPENBLAS_NUM_THREADS=1 build/bench/bench_rfgp [--D 800] [--observes 10000] [--quick]
 * (--quick is accepted, as make bench passes it to every program, and
 * changes nothing.) */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/support/cli.h"
#include "bench/support/clock.h"
#include "core/base/rng.h"
#include "core/base/state.h"
#include "core/methods/rfgp/embed.h"
#include "core/linalg/linalg.h"
#include "core/methods/rfgp/rfgp.h"
#include "core/model/model.h"

static void rows(gp_rng *rng, size_t n, size_t d, double *X, double *y)
{
    for (size_t i = 0; i < n * d; i++)
        X[i] = 4.0 * gp_rng_uniform(rng) - 2.0;
    for (size_t i = 0; i < n; i++)
        y[i] = sin(2.0 * X[i]) + 0.5 * cos(X[(d - 1) * n + i]) + 0.05 * gp_rng_normal(rng);
}

static gp_model *online_model(size_t D, size_t d, double refactor, uint64_t seed)
{
    size_t n = 300;
    double *X = malloc(n * d * sizeof *X), *y = malloc(n * sizeof *y);
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    rows(&rng, n, d, X, y);
    gp_kernel *k = NULL;
    gp_error err;
    gp_kernel_leaf(&k, GP_KERNEL_RBF, d, 1, NULL, 0, &err);
    gp_option_value opts[3] = {{.name = "features", .number = (double)D},
                               {.name = "warmup", .number = (double)n},
                               {.name = "refactor_batch", .number = refactor}};
    gp_fit_request req = {.X = X, .y = y, .n = n, .d = d, .kernel = k, .standardize = 1,
                          .seed = seed, .options = opts, .n_options = refactor > 0 ? 3 : 2};
    gp_model *model = NULL;
    if (gp_model_fit(&gp_method_rfgp, &req, &model, &err) != GP_OK) {
        fprintf(stderr, "fit: %s\n", err.message);
        exit(1);
    }
    gp_kernel_free(k);
    free(X);
    free(y);
    return model;
}

static gp_model *copy_model(const gp_model *m)
{
    gp_state st;
    gp_state_init(&st);
    gp_error err;
    gp_model *out = NULL;
    if (gp_model_export(m, &st, &err) || gp_model_import(&gp_method_rfgp, &st, &out, &err)) {
        fprintf(stderr, "copy: %s\n", err.message);
        exit(1);
    }
    gp_state_free(&st);
    return out;
}

static void observe_cost(size_t D, size_t d, size_t count)
{
    gp_model *model = online_model(D, d, 0, 1);
    gp_rng rng;
    gp_rng_seed(&rng, 2);
    double *X = malloc(count * d * sizeof *X), *y = malloc(count * sizeof *y), x[16];
    rows(&rng, count, d, X, y);
    gp_error err;
    double t0 = gp_bench_seconds();
    for (size_t i = 0; i < count; i++) {
        for (size_t k = 0; k < d; k++)
            x[k] = X[k * count + i];
        if (gp_model_observe(model, x, y + i, 1, &err)) {
            fprintf(stderr, "observe: %s\n", err.message);
            exit(1);
        }
    }
    double total = (gp_bench_seconds() - t0) / (double)count;
    /* the features alone: the model's own map, one row at a time */
    gp_state st;
    gp_state_init(&st);
    gp_model_export(model, &st, &err);
    gp_embed e = {0};
    e.input = model->input;
    e.dk = d;
    e.d_out = D;
    e.w_out = gp_state_find(&st, "w_out")->data;
    e.b_out = gp_state_find(&st, "b_out")->data;
    e.x_mean = model->x_mean;
    e.x_scale = model->x_scale;
    gp_embed_work *w = NULL;
    gp_embed_work_new(&e, 1, &w, &err);
    double *psi = malloc(D * sizeof *psi);
    t0 = gp_bench_seconds();
    for (size_t i = 0; i < count; i++) {
        for (size_t k = 0; k < d; k++)
            x[k] = X[k * count + i];
        gp_embed_features_in(&e, w, x, 1, 0, 1, psi);
    }
    double feat = (gp_bench_seconds() - t0) / (double)count;
    /* the bare rank-one update of core/linalg (L only, no z), for reference */
    double *P = malloc(D * (D + 1) / 2 * sizeof *P);
    memcpy(P, gp_state_find(&st, "factor_packed")->data, D * (D + 1) / 2 * sizeof *P);
    size_t reps = count < 2000 ? count : 2000;
    t0 = gp_bench_seconds();
    for (size_t i = 0; i < reps; i++) {
        for (size_t j = 0; j < D; j++)
            psi[j] = 1e-3 * sin((double)(i + j));
        gp_chol_update_rank1_packed(P, D, psi);
    }
    double bare = (gp_bench_seconds() - t0) / (double)reps;
    printf("| observe (one row), D = %zu, d = %zu, p = 1, mean of %zu | %.1f us |\n", D, d,
           count, 1e6 * total);
    printf("| of which the features (psi of the row) | %.1f us |\n", 1e6 * feat);
    printf("| of which the update and the rest (observe - features) | %.1f us |\n",
           1e6 * (total - feat));
    printf("| gp_chol_update_rank1_packed alone (L only), D = %zu | %.1f us |\n", D, 1e6 * bare);
    free(P);
    free(psi);
    gp_embed_work_free(w);
    gp_state_free(&st);
    free(X);
    free(y);
    gp_model_free(model);
}

static void predict_cost(size_t D, size_t d)
{
    gp_model *model = online_model(D, d, 0, 3);
    size_t m = 1000;
    double *X = malloc(m * d * sizeof *X), *y = malloc(m * sizeof *y), mu[1000], var[1000];
    unsigned char ask[1000];
    gp_rng rng;
    gp_rng_seed(&rng, 4);
    rows(&rng, m, d, X, y);
    gp_error err;
    double x[16];
    double t0 = gp_bench_seconds();
    for (size_t i = 0; i < m; i++) {
        for (size_t k = 0; k < d; k++)
            x[k] = X[k * m + i];
        gp_predict_request pr = {.X = x, .m = 1, .d = d, .include_noise = 1};
        gp_prediction out = {.mean = mu, .variance = var, .ask_oracle = ask};
        gp_model_predict(model, &pr, &out, &err);
    }
    double one = (gp_bench_seconds() - t0) / (double)m;
    gp_predict_request pr = {.X = X, .m = m, .d = d, .include_noise = 1};
    gp_prediction out = {.mean = mu, .variance = var, .ask_oracle = ask};
    t0 = gp_bench_seconds();
    gp_model_predict(model, &pr, &out, &err);
    double batch = (gp_bench_seconds() - t0) / (double)m;
    printf("| predict, one point per call (mean, variance, gate) | %.1f us |\n", 1e6 * one);
    printf("| predict, a batch of %zu points, per point | %.1f us |\n", m, 1e6 * batch);
    free(X);
    free(y);
    gp_model_free(model);
}

static void crossover(size_t D, size_t d)
{
    static const size_t ks[] = {10, 20, 40, 60, 80, 120, 160, 240, 320, 480, 640};
    gp_model *rank1 = online_model(D, d, 1e9, 5), *refac = online_model(D, d, 1, 5);
    gp_rng rng;
    gp_rng_seed(&rng, 6);
    printf("\n| k rows | k rank-one updates | re-factorisation | ratio |\n|---|---|---|---|\n");
    for (size_t t = 0; t < sizeof ks / sizeof ks[0]; t++) {
        size_t k = ks[t];
        double *X = malloc(k * d * sizeof *X), *y = malloc(k * sizeof *y), best[2] = {1e9, 1e9};
        rows(&rng, k, d, X, y);
        for (int rep = 0; rep < 3; rep++)
            for (int path = 0; path < 2; path++) {
                gp_model *m = copy_model(path ? refac : rank1);
                gp_error err;
                double t0 = gp_bench_seconds();
                gp_model_observe(m, X, y, k, &err);
                double dt = gp_bench_seconds() - t0;
                best[path] = dt < best[path] ? dt : best[path];
                gp_model_free(m);
            }
        printf("| %zu | %.2f ms | %.2f ms | %.2f |\n", k, 1e3 * best[0], 1e3 * best[1],
               best[0] / best[1]);
        free(X);
        free(y);
    }
    gp_model_free(rank1);
    gp_model_free(refac);
}

int main(int argc, char **argv)
{
    long D = 800, count = 10000;
    size_t d = 4, n_pos;
    int quick = 0;
    const gp_bench_cli_option opts[] = {
        {"D", GP_BENCH_CLI_LONG, &D, 1, 100000, "features"},
        {"observes", GP_BENCH_CLI_LONG, &count, 1, 100000000, "observes timed"},
        /* make bench passes --quick to every program; this one is quick already */
        {"quick", GP_BENCH_CLI_FLAG, &quick, 0, 0, "accepted; the run is the same"},
    };
    int rc = gp_bench_cli_parse(argc, argv, opts, sizeof opts / sizeof opts[0],
                                "[--D 800] [--observes 10000] [--quick]", NULL, 0, &n_pos);
    if (rc != 0)
        return rc == 1 ? 0 : 2; /* 1: --help answered */
    printf("| what | time |\n|---|---|\n");
    observe_cost((size_t)D, d, (size_t)count);
    predict_cost((size_t)D, d);
    crossover((size_t)D, d);
    return 0;
}
