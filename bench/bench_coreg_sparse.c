/* Coregionalised sgpr and svgp against an independent sgpr on correlated
 * outputs (issue 34's sparse check; docs/design/multioutput.md).
 *
 *   build/bench/bench_coreg_sparse [--n N] [--inducing M] [--seed S]
 *
 * Synthetic and seeded: inputs uniform on [0, 1]^2; two latent functions
 *   g1 = sin(6 x1) + cos(4 x2),  g2 = sin(3 (x1 + x2)) + 0.5 cos(5 x1 x2)
 * mixed into three outputs f0 = g1 + 0.5 g2, f1 = 0.8 g1 - 0.6 g2,
 * f2 = 0.6 g1 + g2, each observed with noise sd 0.1. Outputs 1 and 2 (the
 * cheap ones) are observed at every row; output 0 (the expensive one) at
 * every third row with x1 < 0.6 only. The held-out set is the rows with
 * x1 >= 0.6, where output 0 is missing (their cheap outputs are in the fit,
 * the design note's recipe): RMSE of output 0's predicted mean against f0.
 * The independent sgpr sees output 0's observed rows alone. Prints markdown. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base/rng.h"
#include "core/base/value.h"
#include "core/methods/registry.h"
#include "core/model/model.h"

#define P 3

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void truth(const double *x, double *f)
{
    double g1 = sin(6.0 * x[0]) + cos(4.0 * x[1]);
    double g2 = sin(3.0 * (x[0] + x[1])) + 0.5 * cos(5.0 * x[0] * x[1]);
    f[0] = g1 + 0.5 * g2;
    f[1] = 0.8 * g1 - 0.6 * g2;
    f[2] = 0.6 * g1 + g2;
}

typedef struct result {
    double rmse, seconds, objective;
    int ok;
} result;

/* Fit method on the n rows X (n x 2) with targets Y (n x p) and options
 * opts; predict output 0 at the rows listed in test. */
static result run(const char *method, const double *X, const double *Y, size_t n, size_t p,
                  const gp_option_value *opts, size_t n_opts, const double *Xt,
                  const double *ft, size_t nt)
{
    result r = {NAN, NAN, NAN, 0};
    gp_kernel *k = NULL;
    gp_error err;
    if (gp_kernel_leaf(&k, GP_KERNEL_MATERN52, 2, 1, NULL, 0, &err) != GP_OK)
        return r;
    gp_fit_request req = {.X = X, .y = Y, .n = n, .d = 2, .kernel = k, .standardize = 1,
                          .seed = 1, .options = opts, .n_options = n_opts, .n_outputs = p};
    gp_model *model = NULL;
    double t0 = now();
    int rc = gp_model_fit(gp_method_find(method), &req, &model, &err);
    r.seconds = now() - t0;
    gp_kernel_free(k);
    if (rc != GP_OK) {
        fprintf(stderr, "%s: %s (%s)\n", method, err.message, err.field);
        return r;
    }
    double *mu = malloc(nt * p * sizeof *mu), *var = malloc(nt * p * sizeof *var);
    gp_predict_request pr = {.X = Xt, .m = nt, .d = 2};
    gp_prediction out = {.mean = mu, .variance = var};
    if (gp_model_predict(model, &pr, &out, &err) == GP_OK) {
        double s = 0.0;
        for (size_t i = 0; i < nt; i++)
            s += (mu[i] - ft[i]) * (mu[i] - ft[i]);
        r.rmse = sqrt(s / (double)nt);
        r.objective = model->diag.objective;
        r.ok = 1;
    }
    free(mu);
    free(var);
    gp_model_free(model);
    return r;
}

static size_t options(gp_option_value *ov, gp_value *obj, gp_value *items, char **keys,
                      const char *type, double latents, double inducing, int adam)
{
    size_t n = 0;
    if (adam) { /* svgp's minibatch path: 50 epochs of 100 rows */
        ov[n].name = "optimizer";
        ov[n++].string = "adam";
        ov[n].name = "batch_size";
        ov[n++].number = 100;
        ov[n].name = "epochs";
        ov[n++].number = 50;
        ov[n].name = "learning_rate";
        ov[n++].number = 0.03;
    }
    ov[n].name = "inducing";
    ov[n++].number = inducing;
    ov[n].name = "max_iterations";
    ov[n++].number = 300;
    if (type == NULL)
        return n;
    keys[0] = (char *)"type";
    items[0] = (gp_value){.type = GP_VALUE_STRING, .string = (char *)type};
    keys[1] = (char *)(strcmp(type, "lmc") == 0 ? "latents" : "rank");
    items[1] = (gp_value){.type = GP_VALUE_NUMBER, .number = latents};
    *obj = (gp_value){.type = GP_VALUE_OBJECT, .n = 2, .keys = keys, .items = items};
    ov[n].name = "coregionalization";
    ov[n++].object = obj;
    return n;
}

int main(int argc, char **argv)
{
    size_t n = 600, M = 32;
    uint64_t seed = 11;
    for (int a = 1; a + 1 < argc; a += 2) {
        if (strcmp(argv[a], "--n") == 0)
            n = (size_t)atol(argv[a + 1]);
        else if (strcmp(argv[a], "--inducing") == 0)
            M = (size_t)atol(argv[a + 1]);
        else if (strcmp(argv[a], "--seed") == 0)
            seed = (uint64_t)atoll(argv[a + 1]);
    }
    gp_rng rng;
    gp_rng_seed(&rng, seed);
    double *X = malloc(n * 2 * sizeof *X), *Y = malloc(n * P * sizeof *Y);
    double *X0 = malloc(n * 2 * sizeof *X0), *Y0 = malloc(n * sizeof *Y0);
    double *Xt = malloc(n * 2 * sizeof *Xt), *ft = malloc(n * sizeof *ft);
    size_t n0 = 0, nt = 0, obs0 = 0;
    for (size_t i = 0; i < n; i++) {
        double x[2] = {gp_rng_uniform(&rng), gp_rng_uniform(&rng)}, f[P];
        truth(x, f);
        X[i] = x[0];
        X[n + i] = x[1];
        for (size_t j = 0; j < P; j++)
            Y[j * n + i] = f[j] + 0.1 * gp_rng_normal(&rng);
        if (x[0] >= 0.6) { /* held out: output 0 missing, the cheap ones in the fit */
            Xt[nt] = x[0];
            Xt[n + nt] = x[1];
            ft[nt++] = f[0];
            Y[i] = NAN;
        } else if (i % 3 != 0) {
            Y[i] = NAN;
        } else {
            obs0++;
        }
    }
    for (size_t i = 0; i < n; i++)
        if (!isnan(Y[i])) {
            X0[n0] = X[i];
            X0[n + n0] = X[n + i];
            Y0[n0++] = Y[i];
        }
    /* X0 and Xt are n-row column-major buffers: compact them */
    memmove(X0 + n0, X0 + n, n0 * sizeof *X0);
    memmove(Xt + nt, Xt + n, nt * sizeof *Xt);
    printf("n = %zu rows, output 0 observed at %zu, held out %zu; inducing %zu; matern52 ARD\n\n",
           n, obs0, nt, M);
    printf("| model | RMSE of output 0 (held out) | fit s | objective |\n|---|---|---|---|\n");
    gp_option_value ov[8];
    gp_value obj, items[2];
    char *keys[2];
    struct {
        const char *label, *method, *type;
        double latents;
        int adam;
    } runs[] = {{"independent sgpr (output 0 alone)", "sgpr", NULL, 0, 0},
                {"sgpr ICM rank 2", "sgpr", "icm", 2, 0},
                {"sgpr LMC Q = 2", "sgpr", "lmc", 2, 0},
                {"svgp LMC Q = 2 (L-BFGS)", "svgp", "lmc", 2, 0},
                {"svgp ICM rank 2 (adam, 50 epochs of 100 rows)", "svgp", "icm", 2, 1}};
    for (size_t r = 0; r < sizeof runs / sizeof runs[0]; r++) {
        size_t no = options(ov, &obj, items, keys, runs[r].type, runs[r].latents, (double)M,
                             runs[r].adam);
        result res = runs[r].type ? run(runs[r].method, X, Y, n, P, ov, no, Xt, ft, nt)
                                  : run(runs[r].method, X0, Y0, n0, 1, ov, no, Xt, ft, nt);
        printf("| %s | %.4f | %.2f | %.2f |\n", runs[r].label, res.rmse, res.seconds,
               res.objective);
    }
    free(X);
    free(Y);
    free(X0);
    free(Y0);
    free(Xt);
    free(ft);
    return 0;
}
