/* Benchmark of the batch-invariant triangular solve gp_solve_lower_columns
 * (core/linalg/linalg.h) against OpenBLAS's dtrsv and dtrsm, the routines
 * exact's prediction used before: the content of bench/results/trsolve.md.
 *
 * Run from the repository root, with OpenBLAS single-threaded so that both
 * sides use one core:
 *   OPENBLAS_NUM_THREADS=1 build/bench/bench_trsolve [--quick] [--sizes N,N,...]
 *       [--reps R] [--threads T]
 * Prints markdown to stdout.
 *
 * For each N: L = chol(K + 0.1 I) of an rbf kernel on N seeded points of
 * [0, 10) (what exact caches), and right-hand sides of seeded values in
 * [-1, 1). For each number of columns, every repetition times in turn (on
 * fresh copies, interleaved, so that a machine shared with other work slows
 * all sides alike): the columns one dtrsv call each, one dtrsm call over them
 * all, one gp_solve_lower_columns call. The table shows the best of the
 * repetitions (R, or more for the small problems, whose times are short), per
 * call and per column, the ratio solve / the faster of dtrsv and dtrsm (below
 * 1: the solve is faster), and the largest difference from dtrsm, relative to
 * each column's largest entry. --threads sets gp_parallel_for's threads (the
 * solve runs groups of 64 columns as tasks; default 1, so that it is one core
 * against one). */
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench/support/args.h"
#include "bench/support/blas.h"
#include "bench/support/cli.h"
#include "bench/support/clock.h"
#include "core/base/parallel.h"
#include "core/linalg/linalg.h"

#define MAX_SIZES 8
#define N_COLS 8
static const size_t column_counts[N_COLS] = {1, 2, 4, 8, 16, 32, 64, 128};

typedef struct options {
    size_t sizes[MAX_SIZES];
    size_t n_sizes;
    long reps;
    long threads;
} options;

/* Seeded values of [lo, lo + 10) from a xorshift state. */
static void seeded(double *x, size_t n, uint64_t s, double lo)
{
    for (size_t i = 0; i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[i] = lo + 10.0 * (double)(s >> 11) / 9007199254740992.0;
    }
}

/* L = chol(K + 0.1 I), rbf of lengthscale 1 on x; the upper triangle zeroed. */
static int factor(const double *x, size_t n, double *L)
{
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) {
            double d = x[i] - x[j];
            L[j * n + i] = exp(-0.5 * d * d) + (i == j ? 0.1 : 0.0);
        }
    if (LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)n, L, (lapack_int)n) != 0)
        return -1;
    gp_zero_upper(L, n, n);
    return 0;
}

typedef struct timings {
    double trsv, trsm, solve; /* seconds per call */
} timings;

/* One repetition of the three on fresh copies of B0 (n x k); the results of
 * dtrsm and of the solve are left in Wm and Ws. */
static void one_rep(const double *L, size_t n, const double *B0, size_t k, double *Wv, double *Wm,
                    double *Ws, timings *t)
{
    size_t bytes = n * k * sizeof *B0;
    memcpy(Wv, B0, bytes);
    double t0 = gp_bench_seconds();
    for (size_t j = 0; j < k; j++)
        cblas_dtrsv(CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)n, L,
                    (blasint)n, Wv + j * n, 1);
    t->trsv = gp_bench_seconds() - t0;
    memcpy(Wm, B0, bytes);
    t0 = gp_bench_seconds();
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, (blasint)n,
                (blasint)k, 1.0, L, (blasint)n, Wm, (blasint)n);
    t->trsm = gp_bench_seconds() - t0;
    memcpy(Ws, B0, bytes);
    t0 = gp_bench_seconds();
    gp_solve_lower_columns(L, n, n, Ws, k, n);
    t->solve = gp_bench_seconds() - t0;
}

/* max over columns of max_i |a_ij - b_ij| / max_i |b_ij|. */
static double column_difference(const double *a, const double *b, size_t n, size_t k)
{
    double worst = 0.0;
    for (size_t j = 0; j < k; j++) {
        double d = 0.0, m = 0.0;
        for (size_t i = 0; i < n; i++) {
            d = fmax(d, fabs(a[j * n + i] - b[j * n + i]));
            m = fmax(m, fabs(b[j * n + i]));
        }
        worst = fmax(worst, m > 0.0 ? d / m : d);
    }
    return worst;
}

/* Repetitions for n x k: R, or enough for about 2e8 multiply-adds per side. */
static long reps_for(size_t n, size_t k, long reps)
{
    double work = 0.5 * (double)n * (double)n * (double)k;
    long r = (long)(2e8 / work);
    if (r > 200)
        r = 200;
    return r > reps ? r : reps;
}

static void size_table(size_t n, long reps)
{
    size_t kmax = column_counts[N_COLS - 1];
    double *x = malloc(n * sizeof *x), *L = malloc(n * n * sizeof *L),
           *B0 = malloc(n * kmax * sizeof *B0), *Wv = malloc(n * kmax * sizeof *Wv),
           *Wm = malloc(n * kmax * sizeof *Wm), *Ws = malloc(n * kmax * sizeof *Ws);
    printf("\n### N = %zu\n\n", n);
    if (!x || !L || !B0 || !Wv || !Wm || !Ws) {
        printf("out of memory\n");
        goto done;
    }
    seeded(x, n, 0x2545F4914F6CDD1Dull, 0.0);
    seeded(B0, n * kmax, 0x9E3779B97F4A7C15ull, -5.0);
    for (size_t i = 0; i < n * kmax; i++)
        B0[i] /= 5.0;
    if (factor(x, n, L) != 0) {
        printf("dpotrf failed\n");
        goto done;
    }
    printf("| columns | dtrsv us | per column | dtrsm us | per column | solve us | per column "
           "| solve / best | difference |\n"
           "|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    for (size_t c = 0; c < N_COLS; c++) {
        size_t k = column_counts[c];
        timings best = {INFINITY, INFINITY, INFINITY};
        for (long r = 0, R = reps_for(n, k, reps); r < R; r++) {
            timings t;
            one_rep(L, n, B0, k, Wv, Wm, Ws, &t);
            best.trsv = fmin(best.trsv, t.trsv);
            best.trsm = fmin(best.trsm, t.trsm);
            best.solve = fmin(best.solve, t.solve);
        }
        double us = 1e6, kk = (double)k;
        printf("| %zu | %.1f | %.1f | %.1f | %.1f | %.1f | %.1f | %.2f | %.1e |\n", k,
               us * best.trsv, us * best.trsv / kk, us * best.trsm, us * best.trsm / kk,
               us * best.solve, us * best.solve / kk, best.solve / fmin(best.trsv, best.trsm),
               column_difference(Ws, Wm, n, k));
        fflush(stdout);
    }
done:
    free(x);
    free(L);
    free(B0);
    free(Wv);
    free(Wm);
    free(Ws);
}

/* The options: --quick first sets its smaller defaults, the others then
 * override them. */
static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){.sizes = {927, 3000}, .n_sizes = 2, .reps = 5, .threads = 1};
    int quick = 0;
    long reps = 0;
    const char *sizes = NULL;
    const gp_bench_cli_option opts[] = {
        {"quick", GP_BENCH_CLI_FLAG, &quick, 0, 0, "N = 500, 2 repetitions"},
        {"sizes", GP_BENCH_CLI_STRING, &sizes, 0, 0, "N,N,... (each 1..20000)"},
        {"reps", GP_BENCH_CLI_LONG, &reps, 1, 1000, "repetitions (best of)"},
        {"threads", GP_BENCH_CLI_LONG, &o->threads, 1, 256, "threads of the solve"},
    };
    size_t n_pos;
    int rc = gp_bench_cli_parse(argc, argv, opts, sizeof opts / sizeof opts[0],
                                "[--quick] [--sizes N,N,...] [--reps R] [--threads T]", NULL, 0,
                                &n_pos);
    if (rc != 0)
        return rc;
    if (quick)
        *o = (options){.sizes = {500}, .n_sizes = 1, .reps = 2, .threads = o->threads};
    if (reps > 0)
        o->reps = reps;
    if (sizes != NULL &&
        gp_bench_parse_sizes(sizes, 1, 20000, o->sizes, MAX_SIZES, &o->n_sizes) != 0) {
        fprintf(stderr, "%s: bad --sizes '%s'\n", argv[0], sizes);
        return 2;
    }
    return 0;
}

/* Which clone of the solve this CPU runs (core/linalg/linalg.c). */
static const char *clone_name(void)
{
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        return "avx512f";
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return "x86-64-v3 (AVX2, FMA)";
#endif
    return "default";
}

int main(int argc, char **argv)
{
    gp_bench_blas_setup(argv); /* the daemon's OpenBLAS core */
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc == 1 ? 0 : 2; /* 1: --help answered */
    gp_parallel_set_threads((int)o.threads);
    printf("## Triangular solve L X = B: gp_solve_lower_columns against dtrsv and dtrsm\n\n");
    printf("L = chol(K + 0.1 I) of an rbf kernel on N seeded points; best of at least %ld "
           "interleaved repetitions, microseconds per call and per column; OpenBLAS threads %d, "
           "solve threads %ld, solve clone %s. solve / best: against the faster of dtrsv (one "
           "call per column) and dtrsm; difference: largest |solve - dtrsm| relative to the "
           "column's largest entry.\n",
           o.reps, openblas_get_num_threads(), o.threads, clone_name());
    for (size_t i = 0; i < o.n_sizes; i++)
        size_table(o.sizes[i], o.reps);
    printf("\n");
    return 0;
}
