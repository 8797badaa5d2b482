/* gpserve core: the passes over streamed rows that a fit makes besides its
 * method's own sums (core/model/rows.h; docs/design/scale-out.md, "What is
 * not a sum"): the standardising statistics, the working targets' power,
 * and rows gathered by global index (the inducing candidates).
 *
 * Each runs through a gp_rows_sync (core/model/rows_sync.h), the fit's own
 * or one made for the call: a reader's failure, a cancel or a failed
 * allocation on one process ends every process with the same error at the
 * same reduction, never one process alone while the others wait in a sum.
 * A failure is sticky in the sync, as for the method's passes. */
#ifndef GP_MODEL_ROWS_PASSES_H
#define GP_MODEL_ROWS_PASSES_H

#include <stddef.h>

#include "core/base/error.h"
#include "core/model/rows_sync.h"

/* The columns a moments pass sums over one chunk as read (X count x d
 * column-major, y count): cols[j] points at count values, for each of the
 * pass's columns (in X or y, or in the caller's buffers, valid until the
 * next call). */
typedef void (*gp_rows_columns_fn)(void *ctx, size_t count, const double *X, const double *y,
                                   const double **cols);

/* The mean and the population variance about it of `width` columns over
 * every row of every process: two passes, one reduction of width numbers
 * each. Each chunk's sum of a column is added to the total, so one chunk on
 * one process does the in-memory two-pass formula's arithmetic (the same
 * bits). mean and var have width entries. */
int gp_rows_column_moments(gp_rows_sync *s, size_t width, gp_rows_columns_fn columns, void *ctx,
                           double *mean, double *var, gp_error *err);

/* The standardising statistics of gp_column_stats over every row: the
 * moments of the d input columns and the target; a constant column gets
 * scale 1. x_mean and x_scale have d entries. */
int gp_rows_column_stats(gp_rows_sync *s, double *x_mean, double *x_scale, double *y_mean,
                         double *y_scale, gp_error *err);

/* The working targets' power mean(((y - y_mean) / y_scale)^2) over every
 * row (1 when it is 0 or not finite), as gp_noise_param_init and the noise
 * floor take it from y in memory. One pass and one reduction of 1 number. */
int gp_rows_target_power(gp_rows_sync *s, double y_mean, double y_scale, double *power,
                         gp_error *err);

/* The rows at the k global indices idx (increasing) on every process: X is k x
 * d column-major, y k (y may be NULL). Each process reads the chunks of its
 * shard that hold one of them, zeros the others, and the reduction adds
 * (x + 0 is exact, so every process gets the rows' own bits): one reduction
 * of k (d + 1) numbers, after one of the sync's slots that agrees on its
 * buffer (and on any failure the caller left pending). */
int gp_rows_gather(gp_rows_sync *s, const size_t *idx, size_t k, double *X, double *y,
                   gp_error *err);

#endif
