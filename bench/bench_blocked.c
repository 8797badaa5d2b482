/* Benchmark of the blocked, cancellable Cholesky factor and inverse
 * (core/linalg/blocked.h) against LAPACK's dpotrf and dpotri, and of how long
 * an exact LML evaluation runs between two polls of the cancellation token
 * (issue 13: DELETE and SIGTERM take effect within 2 s); the content of
 * bench/results/blocked.md.
 *
 * Run from the repository root (bench/run.sh runs it without arguments, or
 * with --quick):
 *   build/bench/bench_blocked [--quick] [--sizes N,N,...] [--reps R] [--gap-n N]
 * Prints markdown to stdout.
 *
 * Table 1: for each N, the matrix K + 0.1 I of an rbf kernel on N seeded
 * points of [0, 10) (lower triangle, column-major); each repetition times
 * LAPACKE_dpotrf, gp_potrf_blocked, LAPACKE_dpotri and gp_potri_blocked in
 * turn on fresh copies (interleaved, so that a machine shared with other work
 * slows both sides alike), and the table shows the best of R repetitions and
 * the ratio blocked / LAPACK of the bests (below 1: the blocked code is
 * faster). Same OpenBLAS threads for both.
 *
 * Table 2 (--gap-n, default 8000; 0 skips it): one exact LML evaluation with
 * its gradient (gp_exact_lml_grad_on: Gram matrix, jitter policy, blocked
 * factor, blocked inverse, gradient contraction) with a token whose test
 * counter a watcher thread reads every millisecond: the longest time the
 * counter did not move is the longest stretch a cancellation could wait. */
#include <lapacke.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/support/args.h"
#include "bench/support/blas.h"
#include "bench/support/cli.h"
#include "bench/support/clock.h"
#include "core/base/cancel.h"
#include "core/kernel/kernel.h"
#include "core/kernel/lml.h"
#include "core/linalg/blocked.h"

#define MAX_SIZES 16

typedef struct options {
    size_t sizes[MAX_SIZES];
    size_t n_sizes;
    long reps;
    long gap_n;
} options;

/* Seeded points of [0, 10), one dimension. */
static double *points(size_t n)
{
    double *x = malloc(n * sizeof *x);
    uint64_t s = 0x2545F4914F6CDD1Dull;
    for (size_t i = 0; x && i < n; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[i] = 10.0 * (double)(s >> 11) / 9007199254740992.0;
    }
    return x;
}

/* K + 0.1 I (full) of an rbf kernel of lengthscale 1 on x. */
static void covariance(const double *x, size_t n, double *A)
{
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) {
            double d = x[i] - x[j];
            A[j * n + i] = exp(-0.5 * d * d) + (i == j ? 0.1 : 0.0);
        }
}

typedef struct timings {
    double lapack_f, blocked_f, lapack_i, blocked_i;
} timings;

/* One repetition: every routine on a fresh copy of A; -1 on a failure. */
static int one_rep(const double *A, size_t n, double *W, timings *t)
{
    size_t bytes = n * n * sizeof *W;
    memcpy(W, A, bytes);
    double t0 = gp_bench_seconds();
    lapack_int info = LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', (lapack_int)n, W, (lapack_int)n);
    t->lapack_f = gp_bench_seconds() - t0;
    t0 = gp_bench_seconds();
    info |= LAPACKE_dpotri(LAPACK_COL_MAJOR, 'L', (lapack_int)n, W, (lapack_int)n);
    t->lapack_i = gp_bench_seconds() - t0;
    memcpy(W, A, bytes);
    t0 = gp_bench_seconds();
    int rc = gp_potrf_blocked(W, n, n, NULL, NULL);
    t->blocked_f = gp_bench_seconds() - t0;
    t0 = gp_bench_seconds();
    rc |= gp_potri_blocked(W, n, n, NULL, NULL);
    t->blocked_i = gp_bench_seconds() - t0;
    return info == 0 && rc == 0 ? 0 : -1;
}

static void speed_row(size_t n, long reps)
{
    double *x = points(n), *A = malloc(n * n * sizeof *A), *W = malloc(n * n * sizeof *W);
    if (x == NULL || A == NULL || W == NULL) {
        printf("| %zu | out of memory | | | | | |\n", n);
        goto done;
    }
    covariance(x, n, A);
    timings best = {INFINITY, INFINITY, INFINITY, INFINITY};
    for (long r = 0; r < reps; r++) {
        timings t;
        if (one_rep(A, n, W, &t) != 0) {
            printf("| %zu | failed | | | | | |\n", n);
            goto done;
        }
        best.lapack_f = fmin(best.lapack_f, t.lapack_f);
        best.blocked_f = fmin(best.blocked_f, t.blocked_f);
        best.lapack_i = fmin(best.lapack_i, t.lapack_i);
        best.blocked_i = fmin(best.blocked_i, t.blocked_i);
    }
    printf("| %zu | %.3f | %.3f | %.2f | %.3f | %.3f | %.2f |\n", n, best.lapack_f,
           best.blocked_f, best.blocked_f / best.lapack_f, best.lapack_i, best.blocked_i,
           best.blocked_i / best.lapack_i);
    fflush(stdout);
done:
    free(x);
    free(A);
    free(W);
}

/* ---- the longest stretch between polls ---- */

typedef struct watcher {
    atomic_long *counter;
    atomic_int done;
    double longest; /* seconds the counter stood still, at most */
    long polls;
} watcher;

static void *watch(void *arg)
{
    watcher *w = arg;
    long last = atomic_load(w->counter);
    double since = gp_bench_seconds();
    struct timespec ms = {0, 1000000};
    while (!atomic_load(&w->done)) {
        nanosleep(&ms, NULL);
        long now = atomic_load(w->counter);
        double t = gp_bench_seconds();
        if (now != last) {
            last = now;
            since = t;
        }
        w->longest = fmax(w->longest, t - since);
    }
    return NULL;
}

static void gap_row(size_t n)
{
    double *x = points(n), *y = malloc(n * sizeof *y), *alpha = malloc(n * sizeof *alpha),
           *A = malloc(n * n * sizeof *A);
    gp_kernel *k = NULL;
    gp_error err;
    if (!x || !y || !A || !alpha || gp_kernel_leaf(&k, GP_KERNEL_RBF, 1, 0, NULL, 0, &err)) {
        printf("| %zu | out of memory | | |\n", n);
        goto done;
    }
    for (size_t i = 0; i < n; i++)
        y[i] = sin(x[i]);
    atomic_long counter = LONG_MAX / 2;
    gp_cancel token = {NULL, &counter};
    watcher w = {.counter = &counter};
    atomic_init(&w.done, 0);
    pthread_t tid;
    if (pthread_create(&tid, NULL, watch, &w) != 0) {
        printf("| %zu | no watcher thread | | |\n", n);
        goto done;
    }
    double lml, grad[3], t0 = gp_bench_seconds(); /* variance, lengthscale, noise */
    int rc = gp_exact_lml_grad_on(k, 0.1, x, n, y, A, alpha, &lml, grad, &token, NULL, &err);
    double total = gp_bench_seconds() - t0;
    atomic_store(&w.done, 1);
    pthread_join(tid, NULL);
    if (rc != GP_OK)
        printf("| %zu | failed: %s | | |\n", n, err.message);
    else
        printf("| %zu | %.1f | %ld | %.3f |\n", n, total, LONG_MAX / 2 - atomic_load(&counter),
               w.longest);
done:
    gp_kernel_free(k);
    free(x);
    free(y);
    free(alpha);
    free(A);
}

/* The options: --quick first sets its smaller defaults, the others then
 * override them. */
static int parse_args(int argc, char **argv, options *o)
{
    static const size_t full[] = {1000, 2000, 4000, 8000};
    *o = (options){.n_sizes = 4, .reps = 3, .gap_n = 8000};
    memcpy(o->sizes, full, sizeof full);
    int quick = 0;
    long reps = 0, gap_n = -1;
    const char *sizes = NULL;
    const gp_bench_cli_option opts[] = {
        {"quick", GP_BENCH_CLI_FLAG, &quick, 0, 0, "N = 500, 1500; 2 repetitions; gap at 1500"},
        {"sizes", GP_BENCH_CLI_STRING, &sizes, 0, 0, "N,N,... (each 1..40000)"},
        {"reps", GP_BENCH_CLI_LONG, &reps, 1, 100, "repetitions (best of)"},
        {"gap-n", GP_BENCH_CLI_LONG, &gap_n, 0, 40000, "N of the polling study (0: skip it)"},
    };
    size_t n_pos;
    int rc = gp_bench_cli_parse(argc, argv, opts, sizeof opts / sizeof opts[0],
                                "[--quick] [--sizes N,N,...] [--reps R] [--gap-n N]", NULL, 0,
                                &n_pos);
    if (rc != 0)
        return rc;
    if (quick)
        *o = (options){.sizes = {500, 1500}, .n_sizes = 2, .reps = 2, .gap_n = 1500};
    if (reps > 0)
        o->reps = reps;
    if (gap_n >= 0)
        o->gap_n = gap_n;
    if (sizes != NULL &&
        gp_bench_parse_sizes(sizes, 1, 40000, o->sizes, MAX_SIZES, &o->n_sizes) != 0) {
        fprintf(stderr, "%s: bad --sizes '%s'\n", argv[0], sizes);
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    gp_bench_blas_setup(argv); /* the daemon's OpenBLAS core */
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc == 1 ? 0 : 2; /* 1: --help answered */
    printf("## Blocked Cholesky factor and inverse against LAPACK (core/linalg/blocked.h)\n\n");
    printf("K + 0.1 I of an rbf kernel on N seeded points; best of %ld interleaved "
           "repetitions, seconds; ratio = blocked / LAPACK.\n\n",
           o.reps);
    printf("| N | dpotrf | blocked | ratio | dpotri | blocked | ratio |\n"
           "|---:|---:|---:|---:|---:|---:|---:|\n");
    fflush(stdout);
    for (size_t i = 0; i < o.n_sizes; i++)
        speed_row(o.sizes[i], o.reps);
    if (o.gap_n > 0) {
        printf("\n## Longest stretch between two polls of the cancellation token\n\n"
               "One exact LML evaluation with its gradient (Gram matrix, factor, inverse, "
               "contraction), rbf on one dimension; the token's counter read every "
               "millisecond.\n\n");
        printf("| N | evaluation s | polls | longest stretch s |\n|---:|---:|---:|---:|\n");
        fflush(stdout);
        gap_row((size_t)o.gap_n);
    }
    printf("\n");
    return 0;
}
