/* gpserve core: a small fork-join helper for the O(N^2) pair loops.
 *
 * Work is cut into tasks whose boundaries depend only on the problem size,
 * never on the number of threads, and every reduction adds task results in
 * task order: results are bit-identical whatever the thread count. */
#ifndef GP_PARALLEL_H
#define GP_PARALLEL_H

#include <stddef.h>

/* Threads used by gp_parallel_for: configuration set once at start-up (before
 * any fit runs). 0 or negative means the number of online CPUs (the default). */
void gp_parallel_set_threads(int threads);
int gp_parallel_threads(void);

/* Run fn(ctx, t) for t = 0 .. n_tasks-1 on up to gp_parallel_threads() threads
 * (the caller's thread included) and return when all are done. The threads
 * other than the caller's are workers of the process's one shared pool
 * (sized to gp_parallel_threads(), started on first use): the caller is
 * helped by those idle at the time, and runs every task itself when they are
 * all busy with other callers' work, so concurrent callers (fits, request
 * work) never use more threads than the pool has. Falls back to the calling
 * thread alone if no worker can be started.
 *
 * Nesting: a gp_parallel_for called from inside a task of another one runs
 * all its tasks inline, in task order, on the calling thread (the outer level
 * already has the pool). Results do not change either way: task boundaries
 * never depend on threads. */
void gp_parallel_for(size_t n_tasks, void (*fn)(void *ctx, size_t task), void *ctx);

/* Start the shared pool's workers now (a daemon calls it at start-up, after
 * gp_parallel_set_threads); returns 0, or -1 when fewer could be started. */
int gp_pool_start(void);

/* Run fn(ctx) once on a worker of the shared pool, later (FIFO among such
 * tasks; workers help waiting gp_parallel_for callers first). fn may call
 * gp_parallel_for, which spreads over the idle workers. Returns 0, or -1 when
 * the task cannot be queued (out of memory, no worker could be started): the
 * caller then runs it itself. */
int gp_pool_run(void (*fn)(void *ctx), void *ctx);

/* OpenBLAS's own thread count, process-wide (a daemon sets 1 at start-up,
 * before any thread runs: all its parallelism is then the shared pool's). */
void gp_blas_set_threads(int threads);

/* BLAS threading scope for regions that call BLAS from several threads at
 * once (e.g. the M random-feature LMLs of one msrfr step as parallel tasks):
 * between begin and end OpenBLAS runs single-threaded. Scopes nest and may be
 * entered by several threads concurrently (two fits on two fit workers): the
 * first begin records openblas_get_num_threads() and sets 1, the last end
 * restores the recorded value. Every begin needs its end. */
void gp_blas_serial_begin(void);
void gp_blas_serial_end(void);

/* Split the columns 0..n-1 of a lower triangle into at most max_parts
 * consecutive ranges holding about equal numbers of pairs (i >= j). bounds gets
 * parts + 1 entries (bounds[0] = 0, bounds[parts] = n); returns parts. */
size_t gp_triangle_partition(size_t n, size_t max_parts, size_t *bounds);

#endif
