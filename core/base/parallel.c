#include "core/base/parallel.h"

#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

/* Configuration, written once at start-up by gp_parallel_set_threads. */
static int configured_threads = 0;

void gp_parallel_set_threads(int threads)
{
    configured_threads = threads;
}

int gp_parallel_threads(void)
{
    if (configured_threads > 0)
        return configured_threads;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    return cpus > 0 ? (int)(cpus < 64 ? cpus : 64) : 1;
}

/* Set while this thread runs tasks of a gp_parallel_for that uses more than
 * one thread: a nested gp_parallel_for then runs inline. The outer level
 * already keeps every configured thread busy, so a nested one that spawned
 * its own threads would only oversubscribe the cores (threads x threads
 * runnable threads, each thread creation paid per inner call); inline, the
 * inner tasks still run in task order, so results are unchanged. Thread-local
 * rather than global because independent callers (two fits on two workers)
 * must not serialise each other. */
static _Thread_local int in_parallel_task = 0;

typedef struct pool_job {
    void (*fn)(void *ctx, size_t task);
    void *ctx;
    size_t n_tasks;
    size_t next;
    pthread_mutex_t lock;
} pool_job;

/* Tasks are handed out one at a time: the order they run in does not matter
 * because each writes only its own outputs. */
static void *worker(void *arg)
{
    pool_job *job = arg;
    in_parallel_task = 1; /* a spawned thread exits afterwards; the caller restores it */
    for (;;) {
        pthread_mutex_lock(&job->lock);
        size_t t = job->next++;
        pthread_mutex_unlock(&job->lock);
        if (t >= job->n_tasks)
            return NULL;
        job->fn(job->ctx, t);
    }
}

void gp_parallel_for(size_t n_tasks, void (*fn)(void *ctx, size_t task), void *ctx)
{
    size_t threads = in_parallel_task ? 1 : (size_t)gp_parallel_threads();
    if (threads > n_tasks)
        threads = n_tasks;
    if (threads <= 1) {
        for (size_t t = 0; t < n_tasks; t++)
            fn(ctx, t);
        return;
    }
    pool_job job = {.fn = fn, .ctx = ctx, .n_tasks = n_tasks, .next = 0};
    pthread_mutex_init(&job.lock, NULL);
    pthread_t tid[64];
    size_t started = 0;
    for (size_t i = 0; i + 1 < threads && i < 64; i++) {
        if (pthread_create(&tid[i], NULL, worker, &job) != 0)
            break;
        started++;
    }
    worker(&job);
    in_parallel_task = 0; /* only reached from the top level (nested calls run inline) */
    for (size_t i = 0; i < started; i++)
        pthread_join(tid[i], NULL);
    pthread_mutex_destroy(&job.lock);
}

/* ---- BLAS threading scope ----------------------------------------------------
 *
 * OpenBLAS's thread count is one process-wide setting (openblas_set_num_threads;
 * the per-thread openblas_set_num_threads_local exists only from 0.3.27, and
 * Debian 12 ships 0.3.21). Measured with 0.3.21 on 2 cores, 6 random-feature
 * LML evaluations (N = 1353, R = 100) per round: two threads each calling
 * threaded BLAS at once took 120 ms per round, against 27 ms with
 * single-threaded BLAS in each thread and 41 ms sequential -- the two BLAS
 * thread pools fight over the same cores. So regions that call BLAS from
 * several threads at once switch it to one thread for their duration.
 *
 * The nesting count below is the one piece of process-wide mutable state in
 * core (everything else lives in caller-owned workspaces): it has to be,
 * because the setting it guards is process-wide, and scopes entered by
 * independent threads (two fits on two fit workers) must agree on when to
 * restore it. A mutex keeps the count and the saved value consistent. */
static pthread_mutex_t blas_lock = PTHREAD_MUTEX_INITIALIZER;
static int blas_serial_depth = 0;
static int blas_saved_threads = 1;

void gp_blas_serial_begin(void)
{
    pthread_mutex_lock(&blas_lock);
    if (blas_serial_depth++ == 0) {
        blas_saved_threads = openblas_get_num_threads();
        openblas_set_num_threads(1);
    }
    pthread_mutex_unlock(&blas_lock);
}

void gp_blas_serial_end(void)
{
    pthread_mutex_lock(&blas_lock);
    if (blas_serial_depth > 0 && --blas_serial_depth == 0)
        openblas_set_num_threads(blas_saved_threads);
    pthread_mutex_unlock(&blas_lock);
}

size_t gp_triangle_partition(size_t n, size_t max_parts, size_t *bounds)
{
    size_t parts = max_parts < n ? max_parts : n;
    if (parts == 0)
        parts = 1;
    /* Column j holds n - j pairs; columns [0, c) hold c(2n - c + 1)/2. Cut where
     * that reaches k/parts of the total. */
    double total = 0.5 * (double)n * (double)(n + 1);
    bounds[0] = 0;
    for (size_t k = 1; k < parts; k++) {
        double target = total * (double)k / (double)parts;
        double nn = (double)n + 0.5;
        double c = nn - sqrt(nn * nn - 2.0 * target);
        size_t cut = (size_t)ceil(c);
        if (cut <= bounds[k - 1])
            cut = bounds[k - 1] + 1;
        if (cut > n)
            cut = n;
        bounds[k] = cut;
    }
    bounds[parts] = n;
    /* Drop empty ranges at the end (tiny n). */
    size_t out = 1;
    for (size_t k = 1; k <= parts; k++)
        if (bounds[k] > bounds[out - 1])
            bounds[out++] = bounds[k];
    return out - 1;
}
