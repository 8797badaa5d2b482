/* gpserve mpi: one rank's side of a sharded fit (docs/design/scale-out.md,
 * "Fits beyond one machine").
 *
 * The rank hands core its shard as a gp_rows (core/model/rows.h) whose two
 * callbacks are wrapped here:
 *   - allreduce is gp_mpi_sum of the caller's buffer plus two numbers: rank
 *     0's stop request (0 go, 1 cancel, 2 the job was lost) and the count of
 *     ranks whose rows could not be read. So every rank learns a cancel, or
 *     another rank's failure, in the same reduction, and every rank's fit
 *     returns from the same call (GP_ECANCELLED, or GP_EINTERRUPTED): no rank
 *     is left waiting in a collective that the others never reach.
 *   - read hands a failed read's error to the next reduction instead of to
 *     core (the chunk is zeros meanwhile: the fit stops at that reduction).
 * Rank 0 of a job polls the job's cancel request in the store (at most every
 * GP_MPI_POLL_SECONDS, inside a reduction: between the steps of an
 * evaluation) and writes the job's progress (iteration, objective) at most
 * every second, as the daemon's fit workers do. Its progress callback never
 * stops the fit by itself: only a reduction may. */
#ifndef GP_MPI_RANK_H
#define GP_MPI_RANK_H

#include <mpi.h>

#include "api/api.h"
#include "core/model/rows.h"
#include "mpi/reduce.h"

#define GP_MPI_POLL_SECONDS 0.5
#define GP_MPI_PROGRESS_SECONDS 1.0

/* Why the ranks stopped (the sum of rank 0's stop request). */
enum { GP_MPI_GO = 0, GP_MPI_CANCEL = 1, GP_MPI_LOST = 2 };

typedef struct gp_mpi_rank {
    gp_mpi_reduce reduce;
    gp_rows rows;        /* what core reads: the shard's with the callbacks wrapped */
    const gp_rows *shard; /* the api's rows of this rank */
    double *work;        /* the reduction's buffer: len + 2 numbers */
    size_t work_cap;
    /* The job (rank 0 polls and reports; NULL id: a request file, nothing to poll). */
    gp_api *api;
    const char *job_id, *owner;
    gp_job_info *info; /* its row: model name, max_iterations; progress written here */
    double last_poll, started, last_report;
    int lost_seen;     /* a progress write found the job taken over */
    /* What happened. */
    int stop;          /* GP_MPI_*, as every rank saw it */
    int remote;        /* 1: the fit ended at a reduction that reported a failed rank */
    gp_error local;    /* this rank's own failed read (code 0: none) */
    /* What this rank spent (gpserve-fit --stats, mpi/stats.h): the clock is
     * read around each read and reduction, nothing else is done for it. */
    unsigned long reductions;
    double doubles_reduced; /* every number summed, the two control numbers included */
    double reduce_seconds, read_seconds;
} gp_mpi_rank;

/* Wrap shard (borrowed, as are api, job_id, owner and info: they outlive r)
 * for the ranks of comm. job_id NULL: no job to poll or report to. */
int gp_mpi_rank_init(gp_mpi_rank *r, MPI_Comm comm, const gp_rows *shard, gp_api *api,
                     const char *job_id, const char *owner, gp_job_info *info, gp_error *err);
void gp_mpi_rank_free(gp_mpi_rank *r);
/* The rows to fit over (the wrapped shard). */
const gp_rows *gp_mpi_rank_rows(const gp_mpi_rank *r);
/* The fit's progress callback (ctx: the gp_mpi_rank); always 0. */
int gp_mpi_rank_progress(void *ctx, int iteration, int max_iterations, double objective);
/* Rank 0 of a job: write the progress held now (the callback writes at
 * most every GP_MPI_PROGRESS_SECONDS, so its last values wait for this:
 * at the start and before the version is saved). */
void gp_mpi_rank_flush_progress(gp_mpi_rank *r);
/* 1 when the fit ended at a reduction every rank took part in (a cancel, or
 * another rank's failure): every rank then reaches the agreement at once. */
int gp_mpi_rank_ended_together(const gp_mpi_rank *r);

#endif
