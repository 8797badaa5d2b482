/* Method "svgp": the sums of a fit over rows that every process of the fit
 * ends together (core/model/rows.h).
 *
 * Every process takes the same steps, so none may stop on its own: a
 * process whose reader failed, whose cancel flag it saw, or whose progress
 * callback asked to stop would leave the others waiting in a reduction that
 * never completes. So a local failure is kept pending, and the next sum
 * carries it to every process in three slots appended to the buffer (the
 * failures, the sum of their codes, the cancellations; the layout of
 * core/model/rows_sync.h, which sgpr and ssgp use); after that sum every
 * process fails with the same code at the same call, and the failure is
 * sticky (later sums return it without reducing). The failing process
 * keeps its own message; the others say that a process failed and how. */
#ifndef GP_METHODS_SVGP_SYNC_H
#define GP_METHODS_SVGP_SYNC_H

#include <stddef.h>

#include "core/base/cancel.h"
#include "core/base/error.h"
#include "core/model/rows.h"

/* Doubles svgp_sync_sum appends to a buffer: the caller allocates them. */
#define SVGP_SYNC_SLOTS 3

typedef struct svgp_sync {
    const gp_rows *rows;
    const gp_cancel *cancel; /* the fit's own token (may be NULL), polled at each sum */
    int pending;             /* this process's failure since the last sum (0: none) */
    gp_error pending_err;
    int stop_asked; /* this process was asked to stop (its progress callback) */
    int failed;     /* the agreed failure (sticky; 0: none) */
    gp_error error;
} svgp_sync;

void svgp_sync_init(svgp_sync *s, const gp_rows *rows, const gp_cancel *cancel);

/* Keep this process's failure rc (local: its error, may be NULL) for the
 * next sum; the first one since the last sum is the one reported. */
void svgp_sync_pend(svgp_sync *s, int rc, const gp_error *local);

/* 1 when this process should skip its remaining local work before the next
 * sum (a failure pending or agreed, or its cancel flag set). */
int svgp_sync_skip(const svgp_sync *s);

/* buf[0 .. len) summed over every process, the slots at buf[len .. len +
 * SVGP_SYNC_SLOTS) (the caller's room). 0, or the agreed failure on every
 * process (GP_ECANCELLED for a stop), err filled; sticky. */
int svgp_sync_sum(svgp_sync *s, double *buf, size_t len, gp_error *err);

#endif
