/* gpserve mpi: the ranks agree on how a step of the fit ended (set-up, then
 * the fit itself), so that rank 0 writes one outcome for all of them: a
 * success, a cancel, or the first failing rank's own error (not the "another
 * rank failed" that the others saw).
 *
 * The records are exchanged by MPI_Iallgather on a communicator of their own
 * (a duplicate of the fit's): never matched against a reduction of the fit.
 * A rank whose failure the others may not have seen (its own, outside any
 * reduction) waits at most deadline seconds: the others may be blocked in a
 * reduction it will never join; then GP_ETIMEOUT, and the caller aborts the
 * whole MPI job (its error on stderr for the daemon to report). */
#ifndef GP_MPI_AGREE_H
#define GP_MPI_AGREE_H

#include <mpi.h>

#include "core/base/error.h"

typedef struct gp_mpi_outcome {
    int code;       /* GP_OK, GP_ECANCELLED, or the failure's code */
    int stop;       /* with GP_ECANCELLED: GP_MPI_CANCEL or GP_MPI_LOST (mpi/rank.h) */
    int rank;       /* the rank whose error it is (-1: none) */
    gp_error error; /* that rank's error */
} gp_mpi_outcome;

/* This rank's end: code (0, or its error in err), stop (GP_MPI_*), remote
 * (1: its error only says another rank failed), together (1: every rank ended
 * at the same reduction, so no deadline). Collective over ctl. 0 and *out, or
 * GP_ETIMEOUT / GP_EINTERNAL. */
int gp_mpi_agree(MPI_Comm ctl, int code, const gp_error *err, int stop, int remote,
                 int together, double deadline, gp_mpi_outcome *out);

#endif
