/* gpserve core: the cancellation token long computations poll.
 *
 * A fit is cancelled by its owner (a DELETE on the job, SIGTERM, a client that
 * went away) setting an atomic flag from another thread. The progress callback
 * of gp_fit_request sees it only between optimiser iterations; one evaluation
 * of an exact fit of 20000 points runs for minutes, so the heavy routines
 * (kernel Gram matrices, the blocked Cholesky factor and inverse, gradient
 * contractions, feature maps) poll this token between blocks of their work and
 * return GP_ECANCELLED. Polling is one relaxed atomic load: no I/O, no lock,
 * cheap enough for every block of a parallel task. */
#ifndef GP_BASE_CANCEL_H
#define GP_BASE_CANCEL_H

#include <stdatomic.h>

typedef struct gp_cancel {
    /* Nonzero asks the computation to stop; NULL never does. Owned by the
     * caller and set from any thread (the server's job flag). */
    const atomic_int *flag;
    /* Test hook, NULL outside tests: every poll takes one from the counter,
     * and the poll that finds it at 0 or below cancels (0: the first poll
     * cancels, k: the (k+1)-th does), so a test can stop a computation at
     * any block without a second thread. */
    atomic_long *checks_left;
} gp_cancel;

/* 1 when the computation should stop, else 0. c (and its fields) may be NULL.
 * Once it has answered 1 it keeps answering 1 (the flag is never cleared while
 * a computation runs; the counter only goes down). */
int gp_cancel_requested(const gp_cancel *c);

#endif
