/* Method "svgp": rows read in chunks (core/model/rows.h) into working
 * units, and the data term of the bound over them as one vector of sums.
 *
 * A fit over rows never holds more than `cap` rows: a minibatch (the parts of
 * its blocks this process's shard holds, core/methods/svgp/batches.h) or a
 * piece of the shard in a full pass. Over the rows taken, svgp_stream_sums
 * runs the in-memory path's block code (elbo.h: svgp_block_moments,
 * svgp_block_expect, svgp_block_sens, svgp_kernel_grad) and lays out
 * everything the step needs as sums over rows, so that one gp_rows_sum of
 * the vector gives every process the same full-data statistics:
 *
 *   value   scale * sum_n E_q log p(y_n | f_n)               1
 *   theta   d value / d (kernel log-parameters, log s2)      n_kp + 1
 *   z       d value / dZ (when Z is optimised)               d M
 *   beta    d value / d beta (a mean function)               p
 *   D       A diag(g_v) A^T, lower triangle by columns       M (M + 1) / 2
 *   agmu    A g_mu                                           M
 *
 * (D and agmu feed the natural-gradient step on q, whose KL part depends on
 * q alone and is computed once on every process, never summed; so is the
 * Kuu part of theta and z: the contraction of dF/dKuu is linear in the rows,
 * so each process contracts its own rows' share.) With the weight scale =
 * N / (rows of the minibatch) the sums are the minibatch's unbiased
 * estimate of the full-data term, as in the in-memory Adam path. */
#ifndef GP_METHODS_SVGP_STREAM_H
#define GP_METHODS_SVGP_STREAM_H

#include "core/methods/svgp/internal.h"
#include "core/model/rows.h"
#include "core/model/rows_sync.h"

typedef struct svgp_stream {
    gp_rows_sync *sync;    /* the rows, their reads (its chunk buffers) and their failures */
    const gp_model *model; /* the working units (x_mean, x_scale, y_mean, y_scale), the mean */
    size_t d, p, cap;      /* p: the mean's coefficients (0: zero mean) */
    size_t nb;             /* rows taken */
    double *X, *y;         /* the rows taken, working units: d x cap point-major, cap */
    double *H, *off;       /* p > 0: the mean's basis (nb x p) and h(x)^T beta (nb) */
} svgp_stream;

/* Buffers for cap rows of sync's rows, standardised as model says (a read
 * lands in the sync's chunk buffers, then here). */
int svgp_stream_alloc(svgp_stream *s, gp_rows_sync *sync, const gp_model *model, size_t cap,
                      gp_error *err);
void svgp_stream_free(svgp_stream *s);

/* Forget the rows taken. */
void svgp_stream_clear(svgp_stream *s);

/* Append the rows of this process's shard among the global rows [lo, hi)
 * (none when it holds none), read in reads of at most rows->chunk rows. The
 * rows taken must stay within cap. A reader's failure (or a cancel) is kept
 * pending in the sync and returned; nothing more is read until its sum. */
int svgp_stream_take(svgp_stream *s, size_t lo, size_t hi, gp_error *err);

/* Visit this process's shard in pieces of at most cap rows, in order, each
 * taken alone: fn(ctx, s) sees them in s. The rows are read in reads of
 * rows->chunk rows (the reader's own size, whatever cap), through
 * gp_rows_sync_each_chunk: a failure (the reader's, fn's, a cancel) is kept
 * pending for the next sum, ends the visit and is returned. */
typedef int (*svgp_piece_fn)(void *ctx, svgp_stream *s, gp_error *err);
int svgp_stream_pass(svgp_stream *s, svgp_piece_fn fn, void *ctx);

/* p > 0: the mean's basis at the rows taken, and off = H beta. */
void svgp_stream_offsets(svgp_stream *s, const double *beta);

/* Where each part lies in the vector of sums (counts; 0: absent). */
typedef struct svgp_sums {
    size_t theta; /* n_kp + 1, or 0: the value alone (a pass for the bound) */
    size_t z, beta;
    size_t m; /* D and agmu for m inducing points, or 0 */
    size_t len;
} svgp_sums;

void svgp_sums_layout(svgp_sums *l, size_t theta, size_t z, size_t beta, size_t m);

/* The sums over the rows taken at e (its off replaced by the rows' own)
 * weighted by scale, into buf[0 .. l->len) (zeros when no row is taken).
 * Kuu must be factorised in w (svgp_factor_kuu); w->cap >= s->nb. */
int svgp_stream_sums(const svgp_eval *e, const svgp_stream *s, double scale, const svgp_sums *l,
                     svgp_work *w, double *buf, gp_error *err);

/* The summed vector into the gradients (each may be NULL) and D (m x m,
 * symmetric) and agmu. */
void svgp_sums_unpack(const svgp_sums *l, const double *buf, double *theta, double *gz,
                      double *gbeta, double *D, double *agmu);

#endif
