/* Benchmark of coregionalised exact's two paths (core/coreg/lml.h): one LML
 * and gradient evaluation on the Kronecker path and on the general path of
 * the same isotopic ICM problem, interleaved, and full fits on both paths.
 *
 * Run from the repository root:
 *   build/bench/bench_coreg [--n N] [--p P] [--reps R] [--fit-n N2] [--fit-iters K]
 * Defaults: N 2000, p 4, R 3, fit at N2 = 400 with K = 30 L-BFGS iterations.
 * Synthetic data: x in [-2, 2]^2, output j = (1 + j/2) sin-sum + 0.3 cos
 * term of its own + noise 0.1; rbf ARD, ICM rank 2. Prints medians (seconds)
 * and the ratio, and the agreement of the two LMLs. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base/rng.h"
#include "core/coreg/exact.h"
#include "core/methods/exact.h"
#include "core/model/model.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void make_data(size_t n, size_t p, double *X, double *y)
{
    gp_rng rng;
    gp_rng_seed(&rng, 34);
    for (size_t i = 0; i < 2 * n; i++)
        X[i] = 4.0 * gp_rng_uniform(&rng) - 2.0;
    for (size_t i = 0; i < n; i++) {
        double f = sin(1.3 * X[i]) + sin(0.9 * X[n + i]);
        for (size_t j = 0; j < p; j++)
            y[j * n + i] = (1.0 + 0.5 * (double)j) * f +
                           0.3 * cos((double)(j + 1) * X[i]) + 0.1 * gp_rng_normal(&rng);
    }
}

static gp_model *fit(size_t n, size_t p, const double *X, const double *y, const char *solver,
                     int iters, double *seconds)
{
    gp_kernel *k = NULL;
    gp_error err;
    gp_kernel_leaf(&k, GP_KERNEL_RBF, 2, 1, NULL, 0, &err);
    char *keys[3] = {"type", "rank", "solver"};
    gp_value items[3] = {{.type = GP_VALUE_STRING, .string = "icm"},
                         {.type = GP_VALUE_NUMBER, .number = 2},
                         {.type = GP_VALUE_STRING, .string = (char *)solver}};
    gp_value obj = {.type = GP_VALUE_OBJECT, .n = 3, .keys = keys, .items = items};
    gp_option_value ov[2] = {{.name = "coregionalization", .object = &obj},
                             {.name = "max_iterations", .number = iters}};
    gp_fit_request req = {.X = X, .y = y, .n = n, .d = 2, .n_outputs = p, .kernel = k,
                          .standardize = 1, .seed = 1, .options = ov, .n_options = 2};
    gp_model *model = NULL;
    double t0 = now();
    if (gp_model_fit(&gp_method_exact, &req, &model, &err)) {
        fprintf(stderr, "fit: %s\n", err.message);
        exit(1);
    }
    *seconds = now() - t0;
    gp_kernel_free(k);
    return model;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    size_t n = 2000, p = 4, reps = 3, fit_n = 400;
    int fit_iters = 30;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--n"))
            n = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--p"))
            p = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--reps"))
            reps = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--fit-n"))
            fit_n = (size_t)atol(argv[i + 1]);
        else if (!strcmp(argv[i], "--fit-iters"))
            fit_iters = atoi(argv[i + 1]);
    }
    size_t big = n > fit_n ? n : fit_n;
    double *X = malloc(2 * big * sizeof *X), *y = malloc(big * p * sizeof *y), t;
    make_data(n, p, X, y);
    gp_model *model = fit(n, p, X, y, "kronecker", 1, &t);
    struct gp_coreg_exact *ce = gp_exact_coreg(model);
    size_t dim = gp_coreg_exact_dim(ce);
    double *x = malloc(dim * sizeof *x), *g = malloc(dim * sizeof *g);
    double tk[16], tg[16], lk = 0, lg = 0;
    gp_coreg_exact_pack(ce, x);
    gp_error err;
    fprintf(stderr, "N %zu p %zu (M %zu): LML + gradient, %zu interleaved reps\n", n, p, n * p,
            reps);
    for (size_t r = 0; r < reps && r < 16; r++) {
        double t0 = now();
        if (gp_coreg_exact_eval(ce, x, 1, &lk, g, &err))
            return fprintf(stderr, "kronecker: %s\n", err.message), 1;
        tk[r] = now() - t0;
        t0 = now();
        if (gp_coreg_exact_eval(ce, x, 0, &lg, g, &err))
            return fprintf(stderr, "general: %s\n", err.message), 1;
        tg[r] = now() - t0;
        fprintf(stderr, "  rep %zu: kronecker %.3f s, general %.3f s\n", r, tk[r], tg[r]);
    }
    qsort(tk, reps, sizeof *tk, cmp);
    qsort(tg, reps, sizeof *tg, cmp);
    printf("LML+gradient N=%zu p=%zu: kronecker %.4f s, general %.4f s (medians of %zu), "
           "ratio general/kronecker %.1f; LML %.12g vs %.12g (rel diff %.2e)\n",
           n, p, tk[reps / 2], tg[reps / 2], reps, tg[reps / 2] / tk[reps / 2], lk, lg,
           fabs(lk - lg) / fabs(lg));
    gp_model_free(model);
    double tbig;
    model = fit(n, p, X, y, "kronecker", fit_iters, &tbig);
    printf("full fit N=%zu p=%zu on the Kronecker path (%d iterations at most): %.3f s "
           "(%d iterations, LML %.10g)\n",
           n, p, fit_iters, tbig, model->diag.iterations, model->diag.objective);
    gp_model_free(model);
    double tfk, tfg;
    make_data(fit_n, p, X, y); /* the first fit_n rows of the same draw order */
    gp_model *a = fit(fit_n, p, X, y, "kronecker", fit_iters, &tfk);
    gp_model *b = fit(fit_n, p, X, y, "general", fit_iters, &tfg);
    printf("full fit N=%zu p=%zu (%d iterations at most): kronecker %.3f s (%d iterations, LML "
           "%.10g), general %.3f s (%d iterations, LML %.10g), ratio %.1f\n",
           fit_n, p, fit_iters, tfk, a->diag.iterations, a->diag.objective, tfg,
           b->diag.iterations, b->diag.objective, tfg / tfk);
    gp_model_free(a);
    gp_model_free(b);
    free(X);
    free(y);
    free(x);
    free(g);
    return 0;
}
