/* Benchmark of BLAS called from several threads at once (OpenBLAS 0.3.21,
 * Debian's pthread build), and of what OpenBLAS's own threads are worth to the
 * fits: the measurements behind bench/results/blas_threads.md.
 *
 * The daemon runs OpenBLAS single-threaded with all parallelism in the shared
 * pool (gp_parallel_for), while request threads call BLAS concurrently with
 * the fit workers. Whether that is right depends on what OpenBLAS does when
 * several threads call it: scale, take turns (a lock), or fight over the
 * cores; and on what a single BLAS thread costs the fits.
 *
 * Run from the repository root:
 *   build/bench/bench_blas_threads [--only calls,mixed,fits,methods] [--quick]
 *       [--reps R] [--seconds S] [--sizes N,N,...] [--configs b2p2,b1p2,...]
 *       [--exact-iterations K] [--datasets a,b] [--label TEXT]
 * Prints markdown to stdout, progress to stderr. OPENBLAS_THREAD_TIMEOUT=16
 * should be in the environment, as the daemon sets it (server/main.c).
 *
 * calls: each operation in a loop of a fixed count of calls in 1, 2 and 4
 *   caller threads at once, OpenBLAS at 1 and at 2 threads
 *   (openblas_set_num_threads); total calls per second, best of R interleaved
 *   repetitions. The count is calibrated once per operation (about S seconds
 *   for one caller at 1 BLAS thread) and kept for every configuration; a
 *   configuration that takes over 4 x callers x S seconds stops short.
 * mixed: one fit-sized call timed alone and while two other threads call a
 *   request-sized operation in a loop, OpenBLAS at 1 and 2 threads.
 * fits: for each N of --sizes and each configuration of --configs (bT = T
 *   OpenBLAS threads, pP = P compute threads for gp_parallel_for), the
 *   blocked factor and inverse (core/linalg/blocked.h) of K + 0.1 I (or, for
 *   the configuration `lapack`, LAPACK's dpotrf and dpotri at 2 threads) and one
 *   exact fit of N kin8nm rows capped at --exact-iterations L-BFGS iterations
 *   (0: no fit); configurations interleaved, best of R. Linking an older
 *   core/linalg/blocked.o in front of libgpcore.a times another version of
 *   the blocked code with the same program (bench/results/blas_threads.md).
 * methods: ssgp, sgpr and msrfr fits with short budgets on --datasets, at
 *   every configuration of --configs, interleaved, best of R. */
#include <cblas.h>
#include <lapacke.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench/support/args.h"
#include "bench/support/cli.h"
#include "bench/support/clock.h"
#include "bench/support/dataset.h"
#include "bench/support/fit.h"
#include "core/base/error.h"
#include "core/base/parallel.h"
#include "core/kernel/kernel.h"
#include "core/linalg/blocked.h"
#include "core/methods/registry.h"
#include "core/model/model.h"

#define MAX_LIST 8
#define MAX_CALLERS 4
#define REQ_N 927   /* the training size of a request-sized solve */
#define REQ_RHS 16  /* test points of one request */
#define BIG_GEMM 1000
#define BIG_POTRF 2000

/* Threads of OpenBLAS and of gp_parallel_for; lapack: LAPACK's dpotrf and
 * dpotri in place of the blocked code, and no exact fit (the floor). */
typedef struct config {
    int blas, pool, lapack;
} config;

typedef struct options {
    int calls, mixed, fits, methods;
    long reps;
    double seconds;
    size_t sizes[MAX_LIST];
    size_t n_sizes;
    config configs[MAX_LIST];
    size_t n_configs;
    long exact_iterations;
    const char *datasets;
    const char *label;
} options;

static void set_threads(config c)
{
    openblas_set_num_threads(c.blas);
    gp_parallel_set_threads(c.pool);
}

/* ---- operands ---------------------------------------------------------- */

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;

static double uniform(void)
{
    rng_state ^= rng_state << 13, rng_state ^= rng_state >> 7, rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) / 9007199254740992.0;
}

static double *random_matrix(size_t r, size_t c)
{
    double *M = malloc(r * c * sizeof *M);
    for (size_t i = 0; M && i < r * c; i++)
        M[i] = uniform() - 0.5;
    return M;
}

/* K + 0.1 I of an rbf kernel (lengthscale 1) on n seeded points of [0, 10):
 * the matrices an exact fit factorises. Full, column-major. */
static double *covariance(size_t n)
{
    double *x = malloc(n * sizeof *x), *A = malloc(n * n * sizeof *A);
    if (x == NULL || A == NULL) {
        free(x);
        free(A);
        return NULL;
    }
    for (size_t i = 0; i < n; i++)
        x[i] = 10.0 * uniform();
    for (size_t j = 0; j < n; j++)
        for (size_t i = 0; i < n; i++) {
            double d = x[i] - x[j];
            A[j * n + i] = exp(-0.5 * d * d) + (i == j ? 0.1 : 0.0);
        }
    free(x);
    return A;
}

/* Read-only inputs every caller thread shares, as request threads share a
 * model's cached factor. */
typedef struct shared {
    double *L;          /* REQ_N x REQ_N lower Cholesky factor */
    double *rhs;        /* REQ_N x REQ_RHS */
    double *a16, *b8;   /* 16 x 100, 100 x 8 */
    double *a64, *b100; /* 64 x 100, 100 x 100 */
    double *v16;        /* 16 */
    double *ga, *gb;    /* BIG_GEMM x BIG_GEMM */
    double *spd;        /* BIG_POTRF x BIG_POTRF */
} shared;

/* What one caller thread writes. */
typedef struct work {
    double *x;   /* REQ_N x REQ_RHS */
    double *c;   /* BIG_GEMM x BIG_GEMM (the small products use its start) */
    double *w;   /* BIG_POTRF x BIG_POTRF */
} work;

static int shared_init(shared *s)
{
    memset(s, 0, sizeof *s);
    s->L = covariance(REQ_N);
    s->rhs = random_matrix(REQ_N, REQ_RHS);
    s->a16 = random_matrix(16, 100);
    s->b8 = random_matrix(100, 8);
    s->a64 = random_matrix(64, 100);
    s->b100 = random_matrix(100, 100);
    s->v16 = random_matrix(16, 1);
    s->ga = random_matrix(BIG_GEMM, BIG_GEMM);
    s->gb = random_matrix(BIG_GEMM, BIG_GEMM);
    s->spd = covariance(BIG_POTRF);
    if (!s->L || !s->rhs || !s->a16 || !s->b8 || !s->a64 || !s->b100 || !s->v16 || !s->ga ||
        !s->gb || !s->spd)
        return -1;
    return LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', REQ_N, s->L, REQ_N) == 0 ? 0 : -1;
}

static void shared_free(shared *s)
{
    double *all[] = {s->L, s->rhs, s->a16, s->b8, s->a64, s->b100, s->v16, s->ga, s->gb, s->spd};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        free(all[i]);
}

static int work_init(work *w)
{
    w->x = malloc((size_t)REQ_N * REQ_RHS * sizeof *w->x);
    w->c = calloc((size_t)BIG_GEMM * BIG_GEMM, sizeof *w->c);
    w->w = malloc((size_t)BIG_POTRF * BIG_POTRF * sizeof *w->w);
    return w->x && w->c && w->w ? 0 : -1;
}

static void work_free(work *w)
{
    free(w->x);
    free(w->c);
    free(w->w);
}

/* ---- the operations ----------------------------------------------------- */

/* The solves copy their right-hand side first (a few microseconds against a
 * solve of tens to thousands), so that repeated solves do not drift to
 * denormals; dpotrf copies its 32 MB matrix (about 5 % of the factor). */
static void op_trsv(const shared *s, work *w)
{
    memcpy(w->x, s->rhs, REQ_N * sizeof *w->x);
    cblas_dtrsv(CblasColMajor, CblasLower, CblasNoTrans, CblasNonUnit, REQ_N, s->L, REQ_N, w->x,
                1);
}

static void op_gemm16(const shared *s, work *w)
{
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, 16, 8, 100, 1.0, s->a16, 16, s->b8,
                100, 0.0, w->c, 16);
}

static void op_gemm64(const shared *s, work *w)
{
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, 64, 100, 100, 1.0, s->a64, 64,
                s->b100, 100, 0.0, w->c, 64);
}

static void op_trsm(const shared *s, work *w)
{
    memcpy(w->x, s->rhs, (size_t)REQ_N * REQ_RHS * sizeof *w->x);
    cblas_dtrsm(CblasColMajor, CblasLeft, CblasLower, CblasNoTrans, CblasNonUnit, REQ_N, REQ_RHS,
                1.0, s->L, REQ_N, w->x, REQ_N);
}

/* The kernel block of a request (REQ_N x REQ_RHS) against 16 weights. */
static void op_gemv(const shared *s, work *w)
{
    cblas_dgemv(CblasColMajor, CblasNoTrans, REQ_N, REQ_RHS, 1.0, s->rhs, REQ_N, s->v16, 1, 0.0,
                w->x, 1);
}

static void op_gemm1000(const shared *s, work *w)
{
    cblas_dgemm(CblasColMajor, CblasNoTrans, CblasNoTrans, BIG_GEMM, BIG_GEMM, BIG_GEMM, 1.0,
                s->ga, BIG_GEMM, s->gb, BIG_GEMM, 0.0, w->c, BIG_GEMM);
}

static void op_potrf(const shared *s, work *w)
{
    memcpy(w->w, s->spd, (size_t)BIG_POTRF * BIG_POTRF * sizeof *w->w);
    if (LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', BIG_POTRF, w->w, BIG_POTRF) != 0)
        fprintf(stderr, "dpotrf failed\n");
}

typedef struct op {
    const char *name;
    void (*call)(const shared *s, work *w);
} op;

static const op request_ops[] = {
    {"dtrsv n=927", op_trsv},
    {"dgemm 16x100x8", op_gemm16},
    {"dgemm 64x100x100", op_gemm64},
    {"dtrsm 927, 16 rhs", op_trsm},
    {"dgemv 927x16", op_gemv},
};
static const op fit_ops[] = {
    {"dgemm 1000^3", op_gemm1000},
    {"dpotrf 2000", op_potrf},
};
#define N_REQUEST (sizeof request_ops / sizeof *request_ops)
#define N_FIT (sizeof fit_ops / sizeof *fit_ops)

/* ---- calls: throughput of 1, 2, 4 callers ------------------------------- */

typedef struct caller {
    const shared *s;
    work w;
    const op *o;
    long count, done;
    double deadline; /* gp_bench_seconds() at which to stop short of count */
    pthread_barrier_t *start;
} caller;

static void *caller_main(void *arg)
{
    caller *c = arg;
    c->o->call(c->s, &c->w); /* warm: buffers touched, BLAS threads awake */
    pthread_barrier_wait(c->start);
    c->done = 0;
    while (c->done < c->count) {
        c->o->call(c->s, &c->w);
        c->done++;
        /* the clock only every 64 calls: it costs about as much as the
         * smallest operation */
        if (c->done % 64 == 0 && gp_bench_seconds() > c->deadline)
            break;
    }
    return NULL;
}

/* Calls per second of `callers` threads each making `count` calls; the clock
 * runs from the moment all have warmed up to the last one's end. A caller
 * stops short after `limit` seconds (a configuration that collapses would
 * otherwise run for many minutes): the rate is then of the calls made. */
static double throughput(caller *cs, int callers, const op *o, long count, int blas,
                         double limit)
{
    openblas_set_num_threads(blas);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, (unsigned)callers + 1);
    pthread_t tid[MAX_CALLERS];
    int started = 0;
    double deadline = gp_bench_seconds() + limit + 1.0; /* + the warm-up call */
    for (int i = 0; i < callers; i++) {
        cs[i].o = o;
        cs[i].count = count;
        cs[i].deadline = deadline;
        cs[i].start = &start;
        if (pthread_create(&tid[i], NULL, caller_main, &cs[i]) != 0)
            break;
        started++;
    }
    if (started < callers) {
        fprintf(stderr, "could not start %d threads\n", callers);
        exit(1);
    }
    pthread_barrier_wait(&start);
    double t0 = gp_bench_seconds();
    for (int i = 0; i < callers; i++)
        pthread_join(tid[i], NULL);
    double t = gp_bench_seconds() - t0;
    pthread_barrier_destroy(&start);
    long calls = 0;
    for (int i = 0; i < callers; i++)
        calls += cs[i].done;
    return (double)calls / t;
}

/* A fixed call count per operation: about `seconds` for one caller at one
 * BLAS thread, at least 3 calls. */
static long calibrate(caller *c, const op *o, double seconds)
{
    openblas_set_num_threads(1);
    o->call(c->s, &c->w);
    long n = 0;
    double t0 = gp_bench_seconds(), t;
    do {
        o->call(c->s, &c->w);
        n++;
        t = gp_bench_seconds() - t0;
    } while (t < 0.05);
    long count = (long)(seconds * (double)n / t);
    return count < 3 ? 3 : count;
}

static const char *verdict(double ratio)
{
    if (ratio >= 1.6)
        return "scales";
    if (ratio >= 1.15)
        return "partly scales";
    if (ratio >= 0.85)
        return "serialises";
    return "oversubscribes";
}

static void section_calls(const options *o, caller *cs)
{
    static const int callers[] = {1, 2, 4};
    const op *ops[N_REQUEST + N_FIT];
    size_t n_ops = 0;
    for (size_t i = 0; i < N_REQUEST; i++)
        ops[n_ops++] = &request_ops[i];
    for (size_t i = 0; i < N_FIT; i++)
        ops[n_ops++] = &fit_ops[i];
    double best[N_REQUEST + N_FIT][2][3];
    long counts[N_REQUEST + N_FIT];
    for (size_t k = 0; k < n_ops; k++) {
        counts[k] = calibrate(&cs[0], ops[k], o->seconds);
        for (int b = 0; b < 2; b++)
            for (int c = 0; c < 3; c++)
                best[k][b][c] = 0.0;
        for (long r = 0; r < o->reps; r++)
            for (int b = 0; b < 2; b++)
                for (int c = 0; c < 3; c++) {
                    double v = throughput(cs, callers[c], ops[k], counts[k], b + 1,
                                          4.0 * callers[c] * o->seconds);
                    best[k][b][c] = fmax(best[k][b][c], v);
                }
        fprintf(stderr, "calls: %s: %.4g %.4g %.4g | %.4g %.4g %.4g\n", ops[k]->name,
                best[k][0][0], best[k][0][1], best[k][0][2], best[k][1][0], best[k][1][1],
                best[k][1][2]);
    }
    printf("## Calls per second of 1, 2 and 4 caller threads\n\n"
           "Each caller makes the same fixed number of calls (stopping short after 4 x "
           "callers x %.1f s, in which case the rate is of the calls made); total calls / wall "
           "seconds, best of %ld interleaved repetitions. 2/1 and 4/1: against one "
           "caller at the same BLAS threads (2 cores: 2.0 is perfect scaling, 1.0 "
           "taking turns). Verdict for 2 callers: >= 1.6 scales, 1.15-1.6 partly, "
           "0.85-1.15 serialises, below 0.85 oversubscribes.\n\n",
           o->seconds, o->reps);
    printf("| operation | calls per caller | BLAS threads | 1 caller /s | 2 callers /s | 2/1 "
           "| 4 callers /s | 4/1 | 2 callers |\n"
           "|---|---:|---:|---:|---:|---:|---:|---:|---|\n");
    for (size_t k = 0; k < n_ops; k++)
        for (int b = 0; b < 2; b++) {
            double *v = best[k][b];
            printf("| %s | %ld | %d | %.4g | %.4g | %.2f | %.4g | %.2f | %s |\n", ops[k]->name,
                   counts[k], b + 1, v[0], v[1], v[1] / v[0], v[2], v[2] / v[0],
                   verdict(v[1] / v[0]));
        }
    printf("\nThe same figures as BLAS 2 threads / BLAS 1 thread at equal callers "
           "(above 1: OpenBLAS's threads help; below 1: they cost):\n\n");
    printf("| operation | 1 caller | 2 callers | 4 callers |\n|---|---:|---:|---:|\n");
    for (size_t k = 0; k < n_ops; k++)
        printf("| %s | %.2f | %.2f | %.2f |\n", ops[k]->name, best[k][1][0] / best[k][0][0],
               best[k][1][1] / best[k][0][1], best[k][1][2] / best[k][0][2]);
    printf("\n");
    fflush(stdout);
}

/* ---- mixed: a fit-sized call while two threads hammer ------------------- */

typedef struct hammer {
    const shared *s;
    work *w;
    const op *o;
    atomic_int *stop;
    atomic_long calls;
} hammer;

static void *hammer_main(void *arg)
{
    hammer *h = arg;
    while (!atomic_load_explicit(h->stop, memory_order_relaxed)) {
        h->o->call(h->s, h->w);
        atomic_fetch_add_explicit(&h->calls, 1, memory_order_relaxed);
    }
    return NULL;
}

typedef struct mixed_result {
    double fit_s;    /* median seconds of one fit-sized call */
    double hammer_s; /* request calls per second of the two hammer threads, 0: none */
} mixed_result;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* fit (may be NULL: the hammer threads alone for `window` seconds) timed
 * `reps` times while two threads call req (may be NULL: no hammer). */
static mixed_result mixed_run(caller *cs, const op *fit, const op *req, long reps, double window)
{
    mixed_result r = {0.0, 0.0};
    atomic_int stop = 0;
    hammer h[2];
    pthread_t tid[2];
    int n_h = req ? 2 : 0;
    for (int i = 0; i < n_h; i++) {
        h[i] = (hammer){.s = cs[i + 1].s, .w = &cs[i + 1].w, .o = req, .stop = &stop};
        atomic_init(&h[i].calls, 0);
        if (pthread_create(&tid[i], NULL, hammer_main, &h[i]) != 0) {
            fprintf(stderr, "could not start a hammer thread\n");
            exit(1);
        }
    }
    struct timespec settle = {0, 50000000};
    nanosleep(&settle, NULL);
    long before = 0;
    for (int i = 0; i < n_h; i++)
        before += atomic_load(&h[i].calls);
    double t0 = gp_bench_seconds(), times[32];
    if (fit) {
        for (long k = 0; k < reps && k < 32; k++) {
            double t1 = gp_bench_seconds();
            fit->call(cs[0].s, &cs[0].w);
            times[k] = gp_bench_seconds() - t1;
        }
    } else {
        struct timespec ts = {(time_t)window, (long)((window - floor(window)) * 1e9)};
        nanosleep(&ts, NULL);
    }
    double elapsed = gp_bench_seconds() - t0;
    long after = 0;
    for (int i = 0; i < n_h; i++)
        after += atomic_load(&h[i].calls);
    atomic_store(&stop, 1);
    for (int i = 0; i < n_h; i++)
        pthread_join(tid[i], NULL);
    if (fit) {
        long n = reps < 32 ? reps : 32;
        qsort(times, (size_t)n, sizeof *times, cmp_double);
        r.fit_s = n % 2 ? times[n / 2] : 0.5 * (times[n / 2 - 1] + times[n / 2]);
    }
    r.hammer_s = (double)(after - before) / elapsed;
    return r;
}

static void section_mixed(const options *o, caller *cs)
{
    long reps = o->reps < 3 ? 5 : 2 * o->reps + 1;
    printf("## One fit-sized call while two other threads call a request-sized operation\n\n"
           "Median of %ld fit-sized calls; hammer: total calls per second of the two "
           "request threads, alone (0.5 s) and during the fit-sized calls.\n\n",
           reps);
    printf("| BLAS threads | fit-sized call | hammer operation | fit s alone | fit s hammered "
           "| slowdown | hammer /s alone | hammer /s during fit | hammer kept |\n"
           "|---:|---|---|---:|---:|---:|---:|---:|---:|\n");
    for (int b = 1; b <= 2; b++) {
        openblas_set_num_threads(b);
        for (size_t f = 0; f < N_FIT; f++) {
            mixed_result alone = mixed_run(cs, &fit_ops[f], NULL, reps, 0.0);
            for (size_t q = 0; q < N_REQUEST; q++) {
                if (strcmp(request_ops[q].name, "dgemm 16x100x8") == 0)
                    continue; /* like dgemm 64x100x100 but below every threading cut */
                mixed_result h0 = mixed_run(cs, NULL, &request_ops[q], 0, 0.5);
                mixed_result hf = mixed_run(cs, &fit_ops[f], &request_ops[q], reps, 0.0);
                printf("| %d | %s | %s | %.4f | %.4f | %.2f | %.4g | %.4g | %.2f |\n", b,
                       fit_ops[f].name, request_ops[q].name, alone.fit_s, hf.fit_s,
                       hf.fit_s / alone.fit_s, h0.hammer_s, hf.hammer_s,
                       hf.hammer_s / h0.hammer_s);
                fflush(stdout);
            }
        }
        fprintf(stderr, "mixed: BLAS %d done\n", b);
    }
    printf("\n");
}

/* ---- fits: the blocked factor and inverse, exact fits ------------------- */

typedef struct fit_times {
    double factor, inverse, fit, per_eval;
    int evaluations;
} fit_times;

static gp_option_value number_option(const char *name, double v)
{
    gp_option_value ov;
    memset(&ov, 0, sizeof ov);
    ov.name = name;
    ov.number = v;
    return ov;
}

/* gp_model_fit of method `name` on train with rbf ARD from its default start,
 * standardised, seed 0: seconds, and the evaluation count into *evals. */
static double fit_seconds(const char *name, const gp_option_value *opts, size_t n_opts,
                          const gp_dataset *train, int *evals)
{
    const gp_method *m = gp_method_find(name);
    gp_model *model = NULL;
    gp_error err;
    gp_error_clear(&err);
    double t = NAN;
    int rc = m ? gp_bench_fit_timed(m, opts, n_opts, train, 0, &model, &t, &err) : GP_EINVAL;
    if (rc != GP_OK)
        fprintf(stderr, "%s fit failed: %s\n", name, m ? err.message : "unknown method");
    *evals = model ? model->diag.evaluations : 0;
    gp_model_free(model);
    return rc == GP_OK ? t : NAN;
}

static void blocked_times(const double *A, size_t n, double *W, int lapack, fit_times *t)
{
    memcpy(W, A, n * n * sizeof *W);
    lapack_int ln = (lapack_int)n;
    double t0 = gp_bench_seconds();
    int rc = lapack ? (int)LAPACKE_dpotrf(LAPACK_COL_MAJOR, 'L', ln, W, ln)
                    : gp_potrf_blocked(W, n, n, NULL, NULL);
    t->factor = gp_bench_seconds() - t0;
    t0 = gp_bench_seconds();
    rc |= lapack ? (int)LAPACKE_dpotri(LAPACK_COL_MAJOR, 'L', ln, W, ln)
                 : gp_potri_blocked(W, n, n, NULL, NULL);
    t->inverse = gp_bench_seconds() - t0;
    if (rc != GP_OK)
        t->factor = t->inverse = NAN;
}

static void config_name(config c, char *buf, size_t len)
{
    if (c.lapack)
        snprintf(buf, len, "LAPACK dpotrf/dpotri, BLAS %d", c.blas);
    else
        snprintf(buf, len, "BLAS %d, pool %d", c.blas, c.pool);
}

static void section_fits(const options *o)
{
    printf("## Blocked factor and inverse, exact fits%s%s\n\n"
           "Factor and inverse: gp_potrf_blocked and gp_potri_blocked on K + 0.1 I of an rbf "
           "kernel on N seeded points; exact: one fit of N kin8nm rows (test20 split 0, "
           "subsampled with seed 0), rbf ARD, at most %ld L-BFGS iterations. Best of %ld "
           "interleaved repetitions, seconds.\n\n",
           o->label ? ": " : "", o->label ? o->label : "", o->exact_iterations, o->reps);
    printf("| N | configuration | factor s | inverse s | exact fit s | evaluations | "
           "s / evaluation |\n|---:|---|---:|---:|---:|---:|---:|\n");
    fflush(stdout);
    gp_option_value iters = number_option("max_iterations", (double)o->exact_iterations);
    for (size_t si = 0; si < o->n_sizes; si++) {
        size_t n = o->sizes[si];
        double *A = covariance(n), *W = malloc(n * n * sizeof *W);
        gp_dataset train, test;
        gp_error err;
        int have = o->exact_iterations > 0 &&
                   gp_dataset_load_split("kin8nm", "test20", 0, n, 0, &train, &test, NULL,
                                         &err) == GP_OK;
        if (have)
            gp_dataset_free(&test);
        else if (o->exact_iterations > 0)
            fprintf(stderr, "exact fits skipped: %s\n", err.message);
        fit_times best[MAX_LIST];
        for (size_t c = 0; c < o->n_configs; c++)
            best[c] = (fit_times){INFINITY, INFINITY, INFINITY, INFINITY, 0};
        for (long r = 0; r < o->reps && A && W; r++)
            for (size_t c = 0; c < o->n_configs; c++) {
                set_threads(o->configs[c]);
                fit_times t = {0};
                blocked_times(A, n, W, o->configs[c].lapack, &t);
                t.fit = have && !o->configs[c].lapack
                            ? fit_seconds("exact", &iters, 1, &train, &t.evaluations)
                            : NAN;
                best[c].factor = fmin(best[c].factor, t.factor);
                best[c].inverse = fmin(best[c].inverse, t.inverse);
                if (t.fit < best[c].fit) {
                    best[c].fit = t.fit;
                    best[c].evaluations = t.evaluations;
                }
                fprintf(stderr, "fits: N %zu config %zu rep %ld: %.3f %.3f %.3f\n", n, c, r,
                        t.factor, t.inverse, t.fit);
            }
        for (size_t c = 0; c < o->n_configs; c++) {
            char name[64];
            config_name(o->configs[c], name, sizeof name);
            if (isfinite(best[c].fit))
                printf("| %zu | %s | %.4f | %.4f | %.2f | %d | %.3f |\n", n, name,
                       best[c].factor, best[c].inverse, best[c].fit, best[c].evaluations,
                       best[c].fit / (best[c].evaluations > 0 ? best[c].evaluations : 1));
            else
                printf("| %zu | %s | %.4f | %.4f | | | |\n", n, name, best[c].factor,
                       best[c].inverse);
        }
        fflush(stdout);
        if (have)
            gp_dataset_free(&train);
        free(A);
        free(W);
    }
    printf("\n");
}

/* ---- methods: ssgp, sgpr, msrfr at each configuration ------------------- */

typedef struct method_run {
    const char *method;
    const char *budget; /* as printed */
    gp_option_value opts[2];
    size_t n_opts;
} method_run;

static void section_methods(const options *o)
{
    method_run runs[3] = {
        {"ssgp", "max_iterations 30", {number_option("max_iterations", 30)}, 1},
        {"sgpr", "max_iterations 30", {number_option("max_iterations", 30)}, 1},
        {"msrfr", "iterations 100", {number_option("iterations", 100)}, 1},
    };
    printf("## ssgp, sgpr and msrfr fits\n\n"
           "Test20 split 0, whole training set, rbf ARD, default options but the budget; "
           "best of %ld interleaved repetitions, seconds. Ratio: against the first "
           "configuration.\n\n",
           o->reps);
    printf("| dataset | N | method | budget | configuration | fit s | evaluations | ratio |\n"
           "|---|---:|---|---|---|---:|---:|---:|\n");
    fflush(stdout);
    char list[256];
    snprintf(list, sizeof list, "%s", o->datasets);
    for (char *save = NULL, *name = strtok_r(list, ",", &save); name;
         name = strtok_r(NULL, ",", &save)) {
        gp_dataset train, test;
        gp_error err;
        if (gp_dataset_load_split(name, "test20", 0, 0, 0, &train, &test, NULL, &err) != GP_OK) {
            printf("| %s | skipped: %s | | | | | | |\n", name, err.message);
            continue;
        }
        gp_dataset_free(&test);
        for (size_t m = 0; m < 3; m++) {
            double best[MAX_LIST];
            int evals[MAX_LIST] = {0};
            for (size_t c = 0; c < o->n_configs; c++)
                best[c] = INFINITY;
            for (long r = 0; r < o->reps; r++)
                for (size_t c = 0; c < o->n_configs; c++) {
                    set_threads(o->configs[c]);
                    int e = 0;
                    double t = fit_seconds(runs[m].method, runs[m].opts, runs[m].n_opts,
                                           &train, &e);
                    if (t < best[c]) {
                        best[c] = t;
                        evals[c] = e;
                    }
                }
            for (size_t c = 0; c < o->n_configs; c++) {
                char cname[64];
                config_name(o->configs[c], cname, sizeof cname);
                printf("| %s | %zu | %s | %s | %s | %.3f | %d | %.2f |\n", name, train.n,
                       runs[m].method, runs[m].budget, cname, best[c], evals[c],
                       best[c] / best[0]);
            }
            fflush(stdout);
            fprintf(stderr, "methods: %s %s done\n", name, runs[m].method);
        }
        gp_dataset_free(&train);
    }
    printf("\n");
}

/* ---- arguments ------------------------------------------------------------ */

/* "b2p2,b1p2,lapack": BLAS threads and compute (pool) threads; lapack is
 * LAPACK's dpotrf and dpotri at 2 BLAS threads. */
static int parse_configs(const char *list, options *o)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", list);
    o->n_configs = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int b, p, used = 0;
        if (o->n_configs < MAX_LIST && strcmp(t, "lapack") == 0) {
            o->configs[o->n_configs++] = (config){2, 1, 1};
            continue;
        }
        if (o->n_configs == MAX_LIST || sscanf(t, "b%dp%d%n", &b, &p, &used) != 2 ||
            t[used] != '\0' || b < 1 || b > 64 || p < 1 || p > 64)
            return -1;
        o->configs[o->n_configs++] = (config){b, p, 0};
    }
    return o->n_configs ? 0 : -1;
}

static int parse_only(const char *list, options *o)
{
    static const char *const names[] = {"calls", "mixed", "fits", "methods"};
    int use[4];
    if (gp_bench_parse_names(list, names, 4, use, "--only") != 0)
        return -1;
    o->calls = use[0], o->mixed = use[1], o->fits = use[2], o->methods = use[3];
    return 0;
}

/* The text options, checked once --quick has set its smaller defaults. */
typedef struct texts {
    const char *only, *seconds, *sizes, *configs;
} texts;

static int apply_texts(const texts *t, options *o)
{
    int used = 0;
    if (t->only != NULL && parse_only(t->only, o) != 0)
        return -1;
    if (t->seconds != NULL &&
        !(sscanf(t->seconds, "%lf%n", &o->seconds, &used) == 1 && t->seconds[used] == '\0' &&
          o->seconds > 0.0 && o->seconds <= 60.0))
        return -1;
    if (t->sizes != NULL &&
        gp_bench_parse_sizes(t->sizes, 1, 20000, o->sizes, MAX_LIST, &o->n_sizes) != 0)
        return -1;
    if (t->configs != NULL && parse_configs(t->configs, o) != 0)
        return -1;
    return 0;
}

/* The options: --quick first sets its smaller defaults, the others then
 * override them. 0 to run, 1 after --help, 2 on a bad command line. */
static int parse_args(int argc, char **argv, options *o)
{
    *o = (options){.calls = 1, .mixed = 1, .fits = 1, .methods = 1, .reps = 3, .seconds = 0.5,
                   .sizes = {1000, 3000, 6000}, .n_sizes = 3,
                   .configs = {{2, 2, 0}, {1, 2, 0}}, .n_configs = 2, .exact_iterations = 5,
                   .datasets = "concrete,kin8nm"};
    int quick = 0;
    long reps = 0, exact_iterations = -1;
    texts t = {0};
    const gp_bench_cli_option opts[] = {
        {"only", GP_BENCH_CLI_STRING, &t.only, 0, 0, "calls,mixed,fits,methods"},
        {"quick", GP_BENCH_CLI_FLAG, &quick, 0, 0, "1 rep, 0.2 s, N = 1000, 2000, concrete"},
        {"reps", GP_BENCH_CLI_LONG, &reps, 1, 30, "repetitions"},
        {"seconds", GP_BENCH_CLI_STRING, &t.seconds, 0, 0, "seconds a call test (0, 60]"},
        {"sizes", GP_BENCH_CLI_STRING, &t.sizes, 0, 0, "N,N,... (each 1..20000)"},
        {"configs", GP_BENCH_CLI_STRING, &t.configs, 0, 0, "b2p2,b1p2,lapack,..."},
        {"exact-iterations", GP_BENCH_CLI_LONG, &exact_iterations, 0, 1000, "L-BFGS iterations"},
        {"datasets", GP_BENCH_CLI_STRING, &o->datasets, 0, 0, "a,b"},
        {"label", GP_BENCH_CLI_STRING, &o->label, 0, 0, "a label for the tables"},
    };
    size_t n_pos;
    const char *datasets = NULL;
    int rc = gp_bench_cli_parse(argc, argv, opts, sizeof opts / sizeof opts[0],
                                "[--only calls,mixed,fits,methods] [--quick] [--reps R] "
                                "[--seconds S] [--sizes N,N,...] [--configs b2p2,b1p2,...] "
                                "[--exact-iterations K] [--datasets a,b] [--label TEXT]",
                                NULL, 0, &n_pos);
    if (rc != 0)
        return rc;
    if (quick) {
        datasets = o->datasets;
        o->reps = 1, o->seconds = 0.2, o->sizes[0] = 1000, o->sizes[1] = 2000;
        o->n_sizes = 2, o->exact_iterations = 2;
        /* --quick's dataset unless --datasets named others */
        o->datasets = strcmp(datasets, "concrete,kin8nm") == 0 ? "concrete" : datasets;
    }
    if (reps > 0)
        o->reps = reps;
    if (exact_iterations >= 0)
        o->exact_iterations = exact_iterations;
    if (apply_texts(&t, o) != 0) {
        fprintf(stderr, "%s: bad option value (--help lists them)\n", argv[0]);
        return 2;
    }
    return 0;
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse_args(argc, argv, &o);
    if (rc != 0)
        return rc == 1 ? 0 : 2; /* 1: --help answered */
    const char *timeout = getenv("OPENBLAS_THREAD_TIMEOUT");
    printf("# BLAS from several threads (%s)\n\nOPENBLAS_THREAD_TIMEOUT=%s, "
           "OPENBLAS_NUM_THREADS=%s, %d online CPUs.\n\n",
           openblas_get_config(), timeout ? timeout : "(unset)",
           getenv("OPENBLAS_NUM_THREADS") ? getenv("OPENBLAS_NUM_THREADS") : "(unset)",
           gp_parallel_threads());
    int saved_blas = openblas_get_num_threads();
    if (o.calls || o.mixed) {
        shared s;
        caller cs[MAX_CALLERS];
        int ok = shared_init(&s) == 0;
        for (int i = 0; i < MAX_CALLERS; i++) {
            cs[i].s = &s;
            ok &= work_init(&cs[i].w) == 0;
        }
        if (!ok) {
            fprintf(stderr, "out of memory\n");
            return 1;
        }
        if (o.calls)
            section_calls(&o, cs);
        if (o.mixed)
            section_mixed(&o, cs);
        for (int i = 0; i < MAX_CALLERS; i++)
            work_free(&cs[i].w);
        shared_free(&s);
    }
    openblas_set_num_threads(saved_blas);
    if (o.fits)
        section_fits(&o);
    if (o.methods)
        section_methods(&o);
    return 0;
}
