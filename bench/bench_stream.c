/* Peak memory and time of a fit over rows read in chunks (gp_fit_request.rows,
 * core/model/rows.h) against the same fit with its rows in memory: the
 * content of bench/results/stream.md.
 *
 * Run from the repository root:
 *   build/bench/bench_stream [--quick] [--method svgp] [--rows N] [--inducing M]
 *       [--epochs E] [--memory]
 * Prints markdown to stdout.
 *
 * The rows are made by the reader from their global index (d = 8 inputs
 * uniform on [-2, 2), y = sum_j sin(1.3 x_j + j) + noise: a hash of the
 * index, no storage), 4096 rows a read, so the process holds only what the
 * fit holds. The peak resident set (getrusage's ru_maxrss) is read after the
 * fit over rows and, with --memory, again after an in-memory fit of the same
 * rows (X and y built first, then fitted: the peak is monotone, so the fit
 * over rows runs first). Defaults: svgp, 10^6 rows, M = 100, one epoch of
 * the default batch (256 rows), optimizer adam in memory too. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "bench/support/blas.h"
#include "bench/support/cli.h"
#include "bench/support/clock.h"
#include "core/methods/registry.h"
#include "core/model/model.h"
#include "core/model/rows.h"

#define D 8

typedef struct options {
    const char *method;
    long rows, inducing, epochs;
    int memory, quick;
} options;

/* A double of [0, 1) from a 64-bit index (splitmix64's output function). */
static double unit(uint64_t z)
{
    z += 0x9e3779b97f4a7c15ULL;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    return (double)(z >> 11) / 9007199254740992.0;
}

/* gp_rows' read: rows [i, i + count) made from their index. */
static int make_rows(void *ctx, size_t i, size_t count, double *X, double *y, gp_error *err)
{
    (void)ctx;
    (void)err;
    for (size_t r = 0; r < count; r++) {
        uint64_t g = i + r;
        double f = 0.0;
        for (size_t j = 0; j < D; j++) {
            double x = 4.0 * unit(g * D + j) - 2.0;
            X[j * count + r] = x;
            f += sin(1.3 * x + (double)j);
        }
        y[r] = f + 0.3 * (unit(~g) - 0.5);
    }
    return GP_OK;
}

static long peak_mb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss / 1024;
}

/* One fit (over rows, or of X and y when given) and its table row. */
static int fit_row(const options *o, const double *X, const double *y, gp_rows *rows)
{
    gp_kernel *k = NULL;
    gp_error err;
    if (gp_kernel_leaf(&k, GP_KERNEL_RBF, D, 1, NULL, 0, &err) != GP_OK)
        return 1;
    gp_option_value opts[] = {{"inducing", (double)o->inducing, NULL, NULL},
                              {"epochs", (double)o->epochs, NULL, NULL},
                              {"optimizer", 0, "adam", NULL}};
    gp_fit_request req;
    memset(&req, 0, sizeof req);
    req.X = X;
    req.y = y;
    req.rows = X ? NULL : rows;
    req.n = (size_t)o->rows;
    req.d = D;
    req.kernel = k;
    req.standardize = 1;
    req.seed = 1;
    req.options = opts;
    req.n_options = strcmp(o->method, "svgp") == 0 ? 3 : 0; /* the others: their defaults */
    long before = peak_mb();
    double t0 = gp_bench_seconds();
    gp_model *model = NULL;
    int rc = gp_model_fit(gp_method_find(o->method), &req, &model, &err);
    double secs = gp_bench_seconds() - t0;
    if (rc == GP_OK)
        printf("| %s | %s | %ld | %ld | %.1f | %.4f | %ld | %ld |\n", o->method,
               X ? "in memory" : "over rows", o->rows, o->inducing, secs,
               model->diag.objective / (double)o->rows, before, peak_mb());
    else
        printf("| %s | %s | %ld | %ld | failed: %s | | | |\n", o->method,
               X ? "in memory" : "over rows", o->rows, o->inducing, err.message);
    gp_model_free(model);
    gp_kernel_free(k);
    return rc != GP_OK;
}

/* X (n x d column-major) and y of the same rows, for the in-memory fit. */
static int memory_row(const options *o)
{
    size_t n = (size_t)o->rows, chunk = GP_ROWS_DEFAULT_CHUNK;
    double *X = malloc(n * D * sizeof *X), *y = malloc(n * sizeof *y);
    double *part = malloc(chunk * D * sizeof *part);
    int rc = X && y && part ? 0 : 1;
    for (size_t i = 0; rc == 0 && i < n; i += chunk) {
        size_t c = n - i < chunk ? n - i : chunk;
        make_rows(NULL, i, c, part, y + i, NULL);
        for (size_t j = 0; j < D; j++)
            memcpy(X + j * n + i, part + j * c, c * sizeof *X);
    }
    if (rc == 0)
        rc = fit_row(o, X, y, NULL);
    free(X);
    free(y);
    free(part);
    return rc;
}

static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){.method = "svgp", .rows = 1000000, .inducing = 100, .epochs = 1};
    const gp_bench_cli_option opts[] = {
        {"quick", GP_BENCH_CLI_FLAG, &o->quick, 0, 0, "10^5 rows"},
        {"method", GP_BENCH_CLI_STRING, &o->method, 0, 0, "a method that streams rows"},
        {"rows", GP_BENCH_CLI_LONG, &o->rows, 1, 1000000000L, "N"},
        {"inducing", GP_BENCH_CLI_LONG, &o->inducing, 1, 8192, "M (svgp; the others fit with their defaults)"},
        {"epochs", GP_BENCH_CLI_LONG, &o->epochs, 1, 1000, "passes (svgp's option)"},
        {"memory", GP_BENCH_CLI_FLAG, &o->memory, 0, 0, "also fit the rows held in memory"},
    };
    size_t n_pos;
    int rc = gp_bench_cli_parse(argc, argv, opts, sizeof opts / sizeof opts[0],
                                "[--quick] [--method NAME] [--rows N] [--inducing M] "
                                "[--epochs E] [--memory]",
                                NULL, 0, &n_pos);
    if (rc == 0 && o->quick)
        o->rows = 100000;
    if (rc == 0 && gp_method_find(o->method) == NULL) {
        fprintf(stderr, "%s: unknown method '%s'\n", argv[0], o->method);
        return 2;
    }
    return rc;
}

int main(int argc, char **argv)
{
    gp_bench_blas_setup(argv); /* the daemon's OpenBLAS core */
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc == 1 ? 0 : 2; /* 1: --help answered */
    gp_rows rows = {.n = (size_t)o.rows, .first = 0, .n_total = (size_t)o.rows, .d = D,
                    .chunk = GP_ROWS_DEFAULT_CHUNK, .read = make_rows};
    printf("| method | rows | N | M | seconds | objective / N | peak RSS before (MB) | peak RSS "
           "after (MB) |\n|---|---|---|---|---|---|---|---|\n");
    rc = fit_row(&o, NULL, NULL, &rows);
    if (o.memory)
        rc |= memory_row(&o);
    return rc;
}
