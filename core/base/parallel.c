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

/* The online CPUs, read once: sysconf reads /sys on every call (an open and
 * a read per request of a daemon that asks on every parallel loop). */
static int online_cpus = 1;
static pthread_once_t online_once = PTHREAD_ONCE_INIT;

static void read_online_cpus(void)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    online_cpus = cpus > 0 ? (int)(cpus < 64 ? cpus : 64) : 1;
}

int gp_parallel_threads(void)
{
    if (configured_threads > 0)
        return configured_threads;
    pthread_once(&online_once, read_online_cpus);
    return online_cpus;
}

/* Set while this thread runs tasks of a gp_parallel_for that other threads
 * help with: a nested gp_parallel_for then runs inline. The outer level
 * already keeps the pool busy, so a nested one that asked for helpers would
 * only contend for them; inline, the inner tasks still run in task order, so
 * results are unchanged. Thread-local rather than global because independent
 * callers (two fits, a fit and a batch of predictions) must not serialise
 * each other. */
static _Thread_local int in_parallel_task = 0;

/* ---- the shared pool ----------------------------------------------------------
 *
 * One pool of worker threads for the whole process, sized to the cores
 * (gp_parallel_threads()), started on first use and kept: fits' loops and the
 * daemon's request work (gp_pool_run) share it, so that concurrent callers use
 * the cores once instead of each starting threads of its own. A caller of
 * gp_parallel_for runs its own tasks and is helped by the workers that are
 * idle at that moment; when they are all busy (other requests, another fit) it
 * simply runs every task itself. Like OpenBLAS's own thread pool this is
 * process-wide state: the threads are a property of the process, and the
 * bookkeeping below is all under one mutex.
 *
 * Lock order: pool.lock only (tasks never run under it). */
typedef struct fj_job {
    void (*fn)(void *ctx, size_t task);
    void *ctx;
    size_t n_tasks;
    size_t next;      /* next task to hand out */
    int helpers;      /* workers inside this job now (running a task or about to) */
    int max_helpers;  /* the caller's thread count - 1 */
    struct fj_job *prev, *nxt;
} fj_job;

typedef struct async_task {
    void (*fn)(void *ctx);
    void *ctx;
    struct async_task *next;
} async_task;

#define POOL_MAX 64

static struct {
    pthread_mutex_t lock;
    pthread_cond_t work; /* a job or task was posted */
    pthread_cond_t done; /* a helper left a job */
    int workers;         /* started */
    int idle;            /* waiting for work */
    fj_job *jobs;        /* fork-join jobs with tasks left to hand out */
    async_task *head, *tail;
} pool = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, PTHREAD_COND_INITIALIZER,
          0, 0, NULL, NULL, NULL};

static void job_unlink(fj_job *j)
{
    if (j->prev)
        j->prev->nxt = j->nxt;
    else if (pool.jobs == j)
        pool.jobs = j->nxt;
    if (j->nxt)
        j->nxt->prev = j->prev;
    j->prev = j->nxt = NULL;
}

/* A job a worker may join (lock held). */
static fj_job *job_to_help(void)
{
    for (fj_job *j = pool.jobs; j; j = j->nxt)
        if (j->next < j->n_tasks && j->helpers < j->max_helpers)
            return j;
    return NULL;
}

/* Run tasks of j until none are left to hand out (lock held on entry and
 * exit); a helper also leaves when a queued task waits for a worker (the
 * caller finishes what is left). */
static void run_tasks_locked(fj_job *j, int helper)
{
    while (j->next < j->n_tasks && !(helper && pool.head != NULL)) {
        size_t t = j->next++;
        if (j->next >= j->n_tasks)
            job_unlink(j); /* nothing left to hand out: no one else joins */
        pthread_mutex_unlock(&pool.lock);
        j->fn(j->ctx, t);
        pthread_mutex_lock(&pool.lock);
    }
}

static void *pool_worker(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&pool.lock);
    for (;;) {
        /* Queued tasks (the daemon's request runners) before helping a
         * gp_parallel_for: its caller runs every task itself if no one helps,
         * while a queued task waits for a worker. So predictions beside a fit
         * keep their latency and the fit gets the cores the requests leave. */
        async_task *a = pool.head;
        if (a) {
            pool.head = a->next;
            if (pool.head == NULL)
                pool.tail = NULL;
            pthread_mutex_unlock(&pool.lock);
            a->fn(a->ctx);
            free(a);
            pthread_mutex_lock(&pool.lock);
            continue;
        }
        fj_job *j = job_to_help();
        if (j) {
            j->helpers++;
            in_parallel_task = 1;
            run_tasks_locked(j, 1);
            in_parallel_task = 0;
            j->helpers--;
            pthread_cond_broadcast(&pool.done);
            continue;
        }
        pool.idle++;
        pthread_cond_wait(&pool.work, &pool.lock);
        pool.idle--;
    }
    return NULL;
}

/* Start workers up to `want` (lock held); returns how many run. */
static int pool_grow_locked(int want)
{
    if (want > POOL_MAX)
        want = POOL_MAX;
    while (pool.workers < want) {
        pthread_t tid;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&tid, &attr, pool_worker, NULL);
        pthread_attr_destroy(&attr);
        if (rc != 0)
            break;
        pool.workers++;
    }
    return pool.workers;
}

int gp_pool_start(void)
{
    pthread_mutex_lock(&pool.lock);
    int want = gp_parallel_threads();
    int got = pool_grow_locked(want);
    pthread_mutex_unlock(&pool.lock);
    return got >= want ? 0 : -1;
}

int gp_pool_run(void (*fn)(void *ctx), void *ctx)
{
    async_task *a = malloc(sizeof *a);
    if (a == NULL)
        return -1;
    a->fn = fn;
    a->ctx = ctx;
    a->next = NULL;
    pthread_mutex_lock(&pool.lock);
    if (pool_grow_locked(gp_parallel_threads()) == 0) {
        pthread_mutex_unlock(&pool.lock);
        free(a);
        return -1;
    }
    if (pool.tail)
        pool.tail->next = a;
    else
        pool.head = a;
    pool.tail = a;
    pthread_cond_signal(&pool.work);
    pthread_mutex_unlock(&pool.lock);
    return 0;
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
    fj_job job = {.fn = fn, .ctx = ctx, .n_tasks = n_tasks, .max_helpers = (int)threads - 1};
    pthread_mutex_lock(&pool.lock);
    pool_grow_locked((int)threads);
    job.nxt = pool.jobs; /* newest first: a fresh caller's helpers are the idle ones */
    if (pool.jobs)
        pool.jobs->prev = &job;
    pool.jobs = &job;
    if (pool.idle > 0)
        pthread_cond_broadcast(&pool.work);
    in_parallel_task = 1; /* 0 here: a nested call ran inline above */
    run_tasks_locked(&job, 0);
    in_parallel_task = 0;
    /* Every task is handed out and the caller's are done: a task still running
     * is a helper's, and a helper leaves the job only after its last task. */
    while (job.helpers > 0)
        pthread_cond_wait(&pool.done, &pool.lock);
    pthread_mutex_unlock(&pool.lock);
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

void gp_blas_set_threads(int threads)
{
    openblas_set_num_threads(threads > 0 ? threads : 1);
}

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
