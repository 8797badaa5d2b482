/* Method "svgp": the minibatches of a fit over rows read in chunks, defined
 * on global row indices (docs/design/scale-out.md, "svgp"), so that a fit
 * over 1, 2 or 4 shards of the same rows sees the same minibatches.
 *
 * The global rows 0 .. N-1 are cut into blocks of `block` contiguous rows
 * (the last one may be shorter); a step's minibatch is `per_step` blocks, and
 * an epoch visits every block once, in an order that is a seeded permutation
 * of the blocks (a Feistel network over the block indices with cycle
 * walking: O(1) memory whatever N). Contiguous blocks, because a reader
 * delivers a run of rows cheaply and scattered rows expensively; several of
 * them a step, so that a minibatch is not one stretch of the data. Each
 * process reads the part of each block its shard holds (a block may
 * straddle two shards).
 *
 * Sizes from batch_size B: per_step = max(ceil(B / 256), min(4, ceil(B /
 * 64))) blocks of ceil(B / per_step) rows (at most 256 a block; at least 4
 * blocks a step once B >= 193), so a step holds B rows up to rounding; an
 * epoch is ceil(n_blocks / per_step) steps, the last one possibly shorter. */
#ifndef GP_METHODS_SVGP_BATCHES_H
#define GP_METHODS_SVGP_BATCHES_H

#include <stddef.h>
#include <stdint.h>

typedef struct svgp_batches {
    size_t n_total;  /* global rows */
    size_t block;    /* rows of a block */
    size_t n_blocks; /* ceil(n_total / block) */
    size_t per_step; /* blocks of a full step */
    size_t steps;    /* steps of an epoch */
    uint64_t seed;
} svgp_batches;

/* The plan for n_total >= 1 rows and batch_size 1 <= batch <= n_total. */
void svgp_batches_init(svgp_batches *b, size_t n_total, size_t batch, uint64_t seed);

/* Rows a step holds at most: per_step * block. */
size_t svgp_batches_cap(const svgp_batches *b);

/* Blocks of step `step` (< steps) of every epoch: per_step, or fewer in the
 * last step. */
size_t svgp_batches_count(const svgp_batches *b, size_t step);

/* The global rows [*lo, *hi) of the j-th block (j < svgp_batches_count) of
 * step `step` of epoch `epoch` (from 1). */
void svgp_batches_block(const svgp_batches *b, int epoch, size_t step, size_t j, size_t *lo,
                        size_t *hi);

/* The global rows step `step` of epoch `epoch` holds (the sum of its blocks). */
size_t svgp_batches_rows(const svgp_batches *b, int epoch, size_t step);

#endif
