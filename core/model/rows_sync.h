/* gpserve core: passes over streamed rows whose failures every process of a
 * fit agrees on (core/model/rows.h; docs/design/scale-out.md, "Streamed and
 * sharded fits").
 *
 * A sharded fit runs the same optimiser on every process, so every process
 * must take the same branch at the same moment: a process that stops on its
 * own (its reader failed, its cancel flag was seen a chunk earlier than on
 * the others, its progress callback asked to stop) would leave the others
 * waiting in a reduction that never completes. So nothing local ends a pass:
 * it is recorded as pending, the pass skips its remaining chunks, and the
 * next sum carries it to everyone (three doubles appended to every
 * reduction: the failures, the sum of their codes, the cancellations). After
 * that sum every process fails with the same code at the same call, and the
 * failure is sticky: later passes and sums return it at once without
 * reading or reducing, and the token `agreed` (what the optimiser polls in
 * place of the fit's own) is set, so the driver ends on every process after
 * the same evaluation. The failing process keeps its own message; the
 * others receive it through one more reduction when a single process failed.
 * A failure outranks a cancel met at the same sum; when several processes
 * failed, one more reduction of a count per code gives each the most common
 * of their codes (the first in the catalogue on a tie).
 * A step outside a pass (allocating its buffers, a method's own arithmetic)
 * keeps its failure pending the same way (gp_rows_sync_pend) and skips what
 * is left of its local work (gp_rows_sync_skip) until the next sum.
 *
 * Alone (rows->allreduce NULL) the same code runs with the identity sum: a
 * single process behaves exactly as one shard of many. */
#ifndef GP_MODEL_ROWS_SYNC_H
#define GP_MODEL_ROWS_SYNC_H

#include <stdatomic.h>
#include <stddef.h>

#include "core/base/cancel.h"
#include "core/base/error.h"
#include "core/model/model.h"
#include "core/model/rows.h"

/* Doubles gp_rows_sync_sum appends to a buffer: the caller allocates them. */
#define GP_ROWS_SYNC_SLOTS 3

typedef struct gp_rows_sync {
    const gp_rows *rows;
    const gp_cancel *cancel; /* the fit's own token (may be NULL), polled between chunks */
    gp_progress_fn progress; /* the fit's callback (may be NULL): a stop it asks is deferred */
    void *progress_ctx;
    atomic_int stop;         /* set when every process agreed to stop */
    gp_cancel agreed;        /* {&stop}: the token the optimiser polls */
    int pending;             /* this process's failure in the current pass (0: none) */
    gp_error pending_err;
    int stop_asked;          /* the progress callback asked to stop */
    int failed;              /* the agreed failure (sticky; 0: none) */
    gp_error error;
    size_t ranks;            /* processes of the fit (gp_rows_sync_agree counts them) */
    double *X, *y;           /* one chunk as read: chunk x d and chunk */
    size_t sums, summed;     /* reductions made and doubles reduced (slots included) */
} gp_rows_sync;

/* Buffers for one chunk; cancel and progress from req (NULL: none). Rows
 * refused by gp_rows_check return that error (the shape is the plan's, the
 * same on every process); a failure to allocate is kept pending, so the
 * first sum ends every process with it. */
int gp_rows_sync_init(gp_rows_sync *s, const gp_rows *rows, const gp_fit_request *req,
                      gp_error *err);
void gp_rows_sync_free(gp_rows_sync *s);

/* Keep this process's failure rc (0: none; local: its error, may be NULL)
 * for the next sum. The first one is the one reported. */
void gp_rows_sync_pend(gp_rows_sync *s, int rc, const gp_error *local);

/* Nonzero when this process should skip its remaining local work before
 * the next sum: a failure pending or agreed, or the fit's cancel token set
 * (then kept pending as GP_ECANCELLED). */
int gp_rows_sync_skip(gp_rows_sync *s);

/* Rows [i, i + count) of this shard (count <= chunk) into s->X (count x d
 * column-major, leading dimension count) and s->y, raw units, after
 * gp_rows_sync_skip: 0, or the failure kept pending (nothing read). */
int gp_rows_sync_read(gp_rows_sync *s, size_t i, size_t count);

/* req with its cancel token replaced by s->agreed and its progress by one
 * that defers a stop to the next sum, for the optimiser and every loop that
 * decides between iterations (they then decide the same on every process). */
void gp_rows_sync_request(gp_rows_sync *s, const gp_fit_request *req, gp_fit_request *out);

/* This process's failure rc (0: none) agreed between every process: one
 * reduction of the slots alone, which also counts the processes (ranks).
 * For a step that can fail locally outside a pass (allocating its buffers). */
int gp_rows_sync_agree(gp_rows_sync *s, int rc, const gp_error *local, gp_error *err);

/* Visit this shard's chunks in order: fn(ctx, i, count, X, y) with X
 * count x d column-major and y count, raw units (the chunk as read: the
 * sync's buffers, valid during the call). The cancel token is polled
 * before each chunk. A failure (the reader's, fn's, a cancel) is kept
 * pending for the next sum and ends the visit; the return is that code (the
 * caller goes on to its sum all the same), or the sticky failure without
 * reading anything. */
typedef int (*gp_rows_chunk_fn)(void *ctx, size_t i, size_t count, const double *X,
                                const double *y, gp_error *err);
int gp_rows_sync_each_chunk(gp_rows_sync *s, gp_rows_chunk_fn fn, void *ctx);

/* buf[0 .. len) summed over every process, with the slots at buf[len ..
 * len + GP_ROWS_SYNC_SLOTS) (the caller's room, written here). Returns 0, or
 * the agreed failure, the same code on every process (err filled: this
 * process's own message where it failed, the failing process's where one
 * alone failed), which is then sticky. */
int gp_rows_sync_sum(gp_rows_sync *s, double *buf, size_t len, gp_error *err);

/* The end of a fit: rc, unless a failure was agreed (then that code, err
 * refilled with its error: the optimiser saw only a cancel). */
int gp_rows_sync_result(const gp_rows_sync *s, int rc, gp_error *err);

#endif
