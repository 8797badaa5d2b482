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

/* k distinct global row indices in increasing order drawn from n_total rows
 * with the seed (every index 0 .. n_total - 1 when k >= n_total; then k is
 * n_total). Floyd's algorithm: O(k log k), no O(n_total) memory. out has
 * min(k, n_total) entries. */
int gp_rows_sample_indices(size_t n_total, size_t k, uint64_t seed, size_t *out, gp_error *err);

#endif
