/* Unit tests for core/base/parallel.c: every task runs once, nested calls run
 * inline on the calling thread, the triangle partition, and the BLAS serial
 * scope (nesting, concurrent scopes, the thread count restored). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/base/parallel.h"

#define OUTER 7
#define INNER 50

typedef struct nest_ctx {
    int outer_runs[OUTER];
    int inner_runs[OUTER][INNER];
    size_t inner_order[OUTER][INNER];
    size_t inner_next[OUTER];
    int inner_other_thread[OUTER]; /* an inner task ran on another thread */
    pthread_t outer_thread[OUTER];
} nest_ctx;

typedef struct inner_ctx {
    nest_ctx *c;
    size_t outer;
} inner_ctx;

static void inner_task(void *ctx, size_t t)
{
    inner_ctx *ic = ctx;
    nest_ctx *c = ic->c;
    size_t o = ic->outer;
    /* Only this outer task's thread touches row o when the inner level runs
     * inline; a spawned inner thread would be flagged below (and would race,
     * which the order check catches too). */
    if (!pthread_equal(pthread_self(), c->outer_thread[o]))
        c->inner_other_thread[o] = 1;
    c->inner_runs[o][t]++;
    c->inner_order[o][c->inner_next[o]++] = t;
}

static void outer_task(void *ctx, size_t t)
{
    nest_ctx *c = ctx;
    c->outer_runs[t]++;
    c->outer_thread[t] = pthread_self();
    inner_ctx ic = {c, t};
    gp_parallel_for(INNER, inner_task, &ic);
}

static void test_nested_runs_inline(void **state)
{
    (void)state;
    for (int threads = 1; threads <= 4; threads++) {
        gp_parallel_set_threads(threads);
        nest_ctx *c = calloc(1, sizeof *c);
        assert_non_null(c);
        gp_parallel_for(OUTER, outer_task, c);
        for (size_t o = 0; o < OUTER; o++) {
            assert_int_equal(c->outer_runs[o], 1);
            assert_int_equal(c->inner_next[o], INNER);
            assert_int_equal(c->inner_other_thread[o], 0);
            for (size_t t = 0; t < INNER; t++) {
                assert_int_equal(c->inner_runs[o][t], 1);
                assert_int_equal(c->inner_order[o][t], t); /* inline: in task order */
            }
        }
        free(c);
    }
    gp_parallel_set_threads(0);
}

/* After a nested region the calling thread is a top-level caller again: a
 * later call still spreads its tasks. Two tasks that each wait for the other
 * to start can only both finish waiting when they run on two threads (the
 * wait is bounded, so an inline run fails instead of hanging). */
typedef struct meet_ctx {
    pthread_mutex_t lock;
    int arrived;
    int met[2];
} meet_ctx;

static void meet_task(void *ctx, size_t t)
{
    meet_ctx *c = ctx;
    pthread_mutex_lock(&c->lock);
    c->arrived++;
    pthread_mutex_unlock(&c->lock);
    struct timespec pause = {0, 1000000};
    for (int i = 0; i < 10000; i++) { /* up to ~10 s */
        pthread_mutex_lock(&c->lock);
        int both = c->arrived >= 2;
        pthread_mutex_unlock(&c->lock);
        if (both) {
            c->met[t] = 1;
            return;
        }
        nanosleep(&pause, NULL);
    }
}

static void test_top_level_spreads_after_nesting(void **state)
{
    (void)state;
    gp_parallel_set_threads(2);
    nest_ctx *c = calloc(1, sizeof *c);
    assert_non_null(c);
    gp_parallel_for(OUTER, outer_task, c);
    free(c);
    meet_ctx m = {.arrived = 0, .met = {0, 0}};
    pthread_mutex_init(&m.lock, NULL);
    gp_parallel_for(2, meet_task, &m);
    pthread_mutex_destroy(&m.lock);
    assert_true(m.met[0] && m.met[1]);
    gp_parallel_set_threads(0);
}

/* A one-task outer call uses one thread: its nested call still runs every
 * task exactly once (inline or not, the results are the same). */
typedef struct single_ctx {
    int runs[INNER];
} single_ctx;

static void single_inner(void *ctx, size_t t)
{
    single_ctx *c = ctx;
    c->runs[t]++;
}

static void single_outer(void *ctx, size_t t)
{
    (void)t;
    gp_parallel_for(INNER, single_inner, ctx);
}

static void test_single_task_outer(void **state)
{
    (void)state;
    gp_parallel_set_threads(3);
    single_ctx c;
    memset(&c, 0, sizeof c);
    gp_parallel_for(1, single_outer, &c);
    for (size_t t = 0; t < INNER; t++)
        assert_int_equal(c.runs[t], 1);
    gp_parallel_set_threads(0);
}

static void test_triangle_partition(void **state)
{
    (void)state;
    size_t bounds[17];
    for (size_t n = 1; n <= 300; n += 7) {
        size_t parts = gp_triangle_partition(n, 16, bounds);
        assert_true(parts >= 1 && parts <= 16 && parts <= n);
        assert_int_equal(bounds[0], 0);
        assert_int_equal(bounds[parts], n);
        for (size_t k = 0; k < parts; k++)
            assert_true(bounds[k] < bounds[k + 1]);
    }
}

/* ---- BLAS serial scope ------------------------------------------------------ */

static void test_blas_scope_nesting(void **state)
{
    (void)state;
    int original = openblas_get_num_threads();
    openblas_set_num_threads(2);
    int before = openblas_get_num_threads(); /* 2, or 1 on a one-CPU build */
    gp_blas_serial_begin();
    assert_int_equal(openblas_get_num_threads(), 1);
    gp_blas_serial_begin();
    assert_int_equal(openblas_get_num_threads(), 1);
    gp_blas_serial_end();
    assert_int_equal(openblas_get_num_threads(), 1); /* still inside the outer scope */
    gp_blas_serial_end();
    assert_int_equal(openblas_get_num_threads(), before);
    /* An unmatched end is ignored. */
    gp_blas_serial_end();
    assert_int_equal(openblas_get_num_threads(), before);
    openblas_set_num_threads(original);
}

static void *scope_thread(void *arg)
{
    (void)arg;
    for (int i = 0; i < 2000; i++) {
        gp_blas_serial_begin();
        if (openblas_get_num_threads() != 1)
            return (void *)1;
        gp_blas_serial_end();
    }
    return NULL;
}

static void test_blas_scope_concurrent(void **state)
{
    (void)state;
    int original = openblas_get_num_threads();
    openblas_set_num_threads(2);
    int before = openblas_get_num_threads();
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        assert_int_equal(pthread_create(&t[i], NULL, scope_thread, NULL), 0);
    void *rc[3];
    for (int i = 0; i < 3; i++) {
        pthread_join(t[i], &rc[i]);
        assert_null(rc[i]);
    }
    assert_int_equal(openblas_get_num_threads(), before);
    openblas_set_num_threads(original);
}

/* ---- the shared pool ---- */

#define CALLERS 4
#define ROUNDS 200
#define TASKS 37

typedef struct count_ctx {
    atomic_int runs[TASKS];
    atomic_int helped; /* runs on a thread other than the caller's */
    pthread_t caller;
} count_ctx;

static void count_task(void *ctx, size_t t)
{
    count_ctx *c = ctx;
    atomic_fetch_add(&c->runs[t], 1);
    if (!pthread_equal(pthread_self(), c->caller))
        atomic_fetch_add(&c->helped, 1);
}

static void *caller_main(void *arg)
{
    int *bad = arg;
    for (int r = 0; r < ROUNDS; r++) {
        count_ctx c;
        memset(&c, 0, sizeof c);
        c.caller = pthread_self();
        gp_parallel_for(TASKS, count_task, &c);
        for (size_t t = 0; t < TASKS; t++)
            if (atomic_load(&c.runs[t]) != 1)
                (*bad)++;
    }
    return NULL;
}

/* Several threads calling gp_parallel_for at once (fits and request work on
 * one pool): every task of every call runs exactly once, and each call
 * returns only when its tasks are done (checked right after the return). */
static void test_concurrent_callers(void **state)
{
    (void)state;
    gp_parallel_set_threads(2);
    pthread_t tid[CALLERS];
    int bad[CALLERS] = {0};
    for (int i = 0; i < CALLERS; i++)
        assert_int_equal(pthread_create(&tid[i], NULL, caller_main, &bad[i]), 0);
    for (int i = 0; i < CALLERS; i++) {
        pthread_join(tid[i], NULL);
        assert_int_equal(bad[i], 0);
    }
    gp_parallel_set_threads(0);
}

typedef struct async_ctx {
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int done;
    int inner_ok;
} async_ctx;

static void async_job(void *arg)
{
    async_ctx *a = arg;
    count_ctx c;
    memset(&c, 0, sizeof c);
    c.caller = pthread_self();
    gp_parallel_for(TASKS, count_task, &c); /* a pool task may start a parallel loop */
    int ok = 1;
    for (size_t t = 0; t < TASKS; t++)
        ok &= atomic_load(&c.runs[t]) == 1;
    pthread_mutex_lock(&a->lock);
    a->inner_ok += ok;
    a->done++;
    pthread_cond_signal(&a->cond);
    pthread_mutex_unlock(&a->lock);
}

/* gp_pool_run: every task runs once, on a pool worker. */
static void test_pool_run(void **state)
{
    (void)state;
    async_ctx a;
    memset(&a, 0, sizeof a);
    pthread_mutex_init(&a.lock, NULL);
    pthread_cond_init(&a.cond, NULL);
    assert_int_equal(gp_pool_start(), 0);
    for (int i = 0; i < 50; i++)
        assert_int_equal(gp_pool_run(async_job, &a), 0);
    pthread_mutex_lock(&a.lock);
    while (a.done < 50)
        pthread_cond_wait(&a.cond, &a.lock);
    pthread_mutex_unlock(&a.lock);
    assert_int_equal(a.inner_ok, 50);
    pthread_cond_destroy(&a.cond);
    pthread_mutex_destroy(&a.lock);
}


/* ---- queued tasks before helping a loop ---- */

#define PRIO_JOBS 4    /* more than the pool's workers (3 at most here): all of them help */
#define PRIO_TASKS 200 /* of about 1 ms each */

static atomic_size_t prio_started;  /* tasks of all the loops started so far */
static atomic_size_t prio_seen = 0; /* prio_started when the queued task ran, + 1 */

static void prio_task(void *ctx, size_t t)
{
    (void)ctx;
    (void)t;
    atomic_fetch_add(&prio_started, 1);
    struct timespec ts = {0, 1000 * 1000};
    nanosleep(&ts, NULL);
}

static void *prio_caller(void *arg)
{
    (void)arg;
    gp_parallel_for(PRIO_TASKS, prio_task, NULL);
    return NULL;
}

static void prio_queued(void *arg)
{
    (void)arg;
    atomic_store(&prio_seen, atomic_load(&prio_started) + 1);
}

/* A task queued with gp_pool_run (a batch of predictions) while every worker
 * helps someone's gp_parallel_for (fits) runs at the helpers' next task
 * boundary, not once the loops have no tasks left to hand out: the helpers
 * leave, and the loops' callers finish their own tasks. */
static void test_queued_before_helping(void **state)
{
    (void)state;
    gp_parallel_set_threads(2);
    assert_int_equal(gp_pool_start(), 0);
    atomic_store(&prio_started, 0);
    atomic_store(&prio_seen, 0);
    pthread_t tid[PRIO_JOBS];
    for (int i = 0; i < PRIO_JOBS; i++)
        assert_int_equal(pthread_create(&tid[i], NULL, prio_caller, NULL), 0);
    /* Every worker is inside a loop once a tenth of the tasks have started. */
    while (atomic_load(&prio_started) < PRIO_JOBS * PRIO_TASKS / 10) {
        struct timespec ts = {0, 200 * 1000};
        nanosleep(&ts, NULL);
    }
    assert_int_equal(gp_pool_run(prio_queued, NULL), 0);
    for (int i = 0; i < PRIO_JOBS; i++)
        pthread_join(tid[i], NULL);
    size_t seen = atomic_load(&prio_seen);
    assert_true(seen > 0);
    /* Before: it waited for the last task to be handed out (seen near 800). */
    assert_true(seen - 1 < PRIO_JOBS * PRIO_TASKS * 3 / 4);
    gp_parallel_set_threads(0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nested_runs_inline),
        cmocka_unit_test(test_top_level_spreads_after_nesting),
        cmocka_unit_test(test_single_task_outer),
        cmocka_unit_test(test_triangle_partition),
        cmocka_unit_test(test_blas_scope_nesting),
        cmocka_unit_test(test_blas_scope_concurrent),
        cmocka_unit_test(test_concurrent_callers),
        cmocka_unit_test(test_pool_run),
        cmocka_unit_test(test_queued_before_helping),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
