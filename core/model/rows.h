/* gpserve core: training rows that are read in chunks instead of held, and
 * the sums over them (docs/design/scale-out.md, "Fits beyond one machine").
 *
 * A fit whose request names a data set (gp_fit_request.rows) sees its rows
 * only through gp_rows: read(i, count) delivers rows of this process's shard,
 * and allreduce adds a vector over every process of the fit. Alone (one
 * process, a data set in the store) allreduce is NULL and the shard is every
 * row; under MPI (gpserve-fit) each rank holds a fixed contiguous range of the
 * global rows and allreduce is MPI_Allreduce with a pinned algorithm. Core
 * does no I/O: the reader and the reduction are the caller's.
 *
 * The methods that stream (descriptor flag streams_rows: ssgp, sgpr, svgp)
 * need the data only through sums over rows, so they compute each sum over
 * their shard chunk by chunk (memory O(chunk * M + M^2), never O(N * M)) and
 * then gp_rows_sum it. Every process receives the same sums and so takes the
 * same optimiser steps; a global decision (Z's candidates, the standardising
 * statistics, a minibatch) is made from global row indices and the same
 * seed on every process, never from what one process holds.
 *
 * Determinism: for fixed shard boundaries, chunk size and reduction, a fit
 * is bit-identical run to run; a different number of shards adds in another
 * order (equal to rounding, not in bits). */
#ifndef GP_MODEL_ROWS_H
#define GP_MODEL_ROWS_H

#include <stddef.h>
#include <stdint.h>

#include "core/base/error.h"

/* Rows read at most per chunk unless the caller says otherwise. */
#define GP_ROWS_DEFAULT_CHUNK 4096

typedef struct gp_rows {
    size_t n;       /* rows of this process's shard */
    size_t first;   /* global index of the shard's first row */
    size_t n_total; /* rows of every shard together (n when alone) */
    size_t d;       /* input columns */
    size_t chunk;   /* rows one read delivers at most (> 0) */
    /* Rows [i, i + count) of the shard (i relative to the shard, count <=
     * chunk): X count x d column-major (leading dimension count: the layout
     * of gp_fit_request.X), y count, in the caller's units (raw, not
     * standardised), every value finite. 0 or a negative code with err
     * filled. Called from one thread at a time. */
    int (*read)(void *ctx, size_t i, size_t count, double *X, double *y, gp_error *err);
    void *read_ctx;
    /* buf[0 .. len) replaced by its sum over every process, the same bits on
     * each; NULL when alone (the identity). May fail (a rank lost, a cancel
     * reaching every rank at once as GP_ECANCELLED): then every process
     * fails at the same call. */
    int (*allreduce)(void *ctx, double *buf, size_t len, gp_error *err);
    void *reduce_ctx;
} gp_rows;

/* The shape of rows: n <= n_total, first + n <= n_total, d and chunk > 0,
 * read set. GP_EINVAL naming field "data" otherwise. */
int gp_rows_check(const gp_rows *rows, gp_error *err);

/* buf (len) summed over every process (rows->allreduce, or nothing alone). */
int gp_rows_sum(const gp_rows *rows, double *buf, size_t len, gp_error *err);

/* The standardising statistics of gp_column_stats over every row of every
 * shard: the mean, then the population standard deviation about it (two
 * passes, one reduction each of d + 1 numbers); a constant column gets scale
 * 1. x_mean and x_scale have d entries. */
int gp_rows_column_stats(const gp_rows *rows, double *x_mean, double *x_scale, double *y_mean,
                         double *y_scale, gp_error *err);

/* The working targets' power mean(((y - y_mean) / y_scale)^2) over every
 * row (1 when it is 0 or not finite), as gp_noise_param_init and the noise
 * floor take it from y in memory. One pass and one reduction of 1 number. */
int gp_rows_target_power(const gp_rows *rows, double y_mean, double y_scale, double *power,
                         gp_error *err);

/* k distinct global row indices in increasing order drawn from n_total rows
 * with the seed (every index 0 .. n_total - 1 when k >= n_total; then k is
 * n_total). Floyd's algorithm: O(k log k), no O(n_total) memory. out has
 * min(k, n_total) entries. */
int gp_rows_sample_indices(size_t n_total, size_t k, uint64_t seed, size_t *out, gp_error *err);

/* The rows at the k global indices idx (increasing) on every process: X is k x
 * d column-major, y k (y may be NULL). Each process reads the rows of its
 * shard, zeros the others, and the reduction adds (x + 0 is exact, so every
 * process gets the rows' own bits). One reduction of k (d + 1) numbers. */
int gp_rows_gather(const gp_rows *rows, const size_t *idx, size_t k, double *X, double *y,
                   gp_error *err);

/* Visit this process's shard in chunks of at most rows->chunk rows, in
 * order: fn(ctx, i, count, X, y) with X count x d column-major and y count
 * (raw units; buffers owned here, valid during the call). Stops at the first
 * nonzero return (passed back). Buffers: chunk x (d + 1) doubles. */
typedef int (*gp_rows_chunk_fn)(void *ctx, size_t i, size_t count, const double *X,
                                const double *y, gp_error *err);
int gp_rows_each_chunk(const gp_rows *rows, gp_rows_chunk_fn fn, void *ctx, gp_error *err);

#endif
