/* One rank's side of a sharded fit: see mpi/rank.h. */
#include "mpi/rank.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- rank 0's look at the job ---- */

/* GP_MPI_GO, CANCEL or LOST: the job's cancel request, read at most every
 * GP_MPI_POLL_SECONDS (the store is not asked in every reduction). */
static int poll_stop(gp_mpi_rank *r)
{
    if (r->stop != GP_MPI_GO) /* once stopped, every later reduction says so */
        return r->stop;
    if (r->lost_seen)
        return GP_MPI_LOST;
    if (r->job_id == NULL || r->reduce.rank != 0)
        return GP_MPI_GO;
    double now = MPI_Wtime();
    if (now - r->last_poll < GP_MPI_POLL_SECONDS)
        return GP_MPI_GO;
    r->last_poll = now;
    int requested = 0;
    gp_error err;
    gp_error_clear(&err);
    int rc = gp_api_job_cancel_requested(r->api, r->job_id, r->owner, &requested, &err);
    if (rc == GP_ECONFLICT)
        return GP_MPI_LOST;
    /* A store that does not answer now may next time: the fit goes on (its
     * daemon still holds the job, or another takes it and we see that). */
    return rc == GP_OK && requested ? GP_MPI_CANCEL : GP_MPI_GO;
}

int gp_mpi_rank_progress(void *ctx, int iteration, int max_iterations, double objective)
{
    gp_mpi_rank *r = ctx;
    if (r->job_id == NULL || r->reduce.rank != 0 || r->info == NULL)
        return 0;
    gp_job_info *info = r->info;
    info->iteration = iteration;
    if (max_iterations > 0)
        info->max_iterations = max_iterations;
    if (isfinite(objective)) {
        info->has_objective = 1;
        info->objective = objective;
    }
    double now = MPI_Wtime();
    info->elapsed_seconds = now - r->started;
    if (now - r->last_report < GP_MPI_PROGRESS_SECONDS)
        return 0;
    gp_mpi_rank_flush_progress(r);
    return 0;
}

void gp_mpi_rank_flush_progress(gp_mpi_rank *r)
{
    if (r->job_id == NULL || r->reduce.rank != 0 || r->info == NULL)
        return;
    r->last_report = MPI_Wtime();
    r->info->elapsed_seconds = r->last_report - r->started;
    r->info->status = "running";
    gp_error err;
    gp_error_clear(&err);
    if (gp_api_job_update(r->api, r->info, r->owner, 0, &err) == GP_ECONFLICT)
        r->lost_seen = 1; /* stopped at the next reduction */
}

/* ---- the wrapped callbacks ---- */

static int rank_read(void *ctx, size_t i, size_t count, double *X, double *y, gp_error *err)
{
    gp_mpi_rank *r = ctx;
    gp_error mine;
    gp_error_clear(&mine);
    double t0 = MPI_Wtime();
    int rc = r->shard->read(r->shard->read_ctx, i, count, X, y, &mine);
    r->read_seconds += MPI_Wtime() - t0;
    if (rc == GP_OK)
        return GP_OK;
    if (r->local.code == GP_OK)
        r->local = mine;
    /* Finite stand-ins until the next reduction stops every rank together. */
    memset(X, 0, count * r->shard->d * sizeof *X);
    memset(y, 0, count * sizeof *y);
    (void)err;
    return GP_OK;
}

static int reserve(gp_mpi_rank *r, size_t n, gp_error *err)
{
    if (n <= r->work_cap)
        return GP_OK;
    double *w = realloc(r->work, n * sizeof *w);
    if (w == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory for a reduction of %zu numbers",
                            n);
    r->work = w;
    r->work_cap = n;
    return GP_OK;
}

static int rank_allreduce(void *ctx, double *buf, size_t len, gp_error *err)
{
    gp_mpi_rank *r = ctx;
    int rc = reserve(r, len + 2, err);
    if (rc)
        return rc;
    memcpy(r->work, buf, len * sizeof *buf);
    r->work[len] = (double)poll_stop(r);
    r->work[len + 1] = r->local.code != GP_OK ? 1.0 : 0.0;
    double t0 = MPI_Wtime();
    rc = gp_mpi_sum(&r->reduce, r->work, len + 2, err);
    r->reduce_seconds += MPI_Wtime() - t0;
    r->reductions++;
    r->doubles_reduced += (double)(len + 2);
    if (rc)
        return rc;
    if (r->work[len + 1] > 0.0) {
        r->remote = 1;
        return gp_error_set(err, GP_EINTERRUPTED, "data", "a rank of the fit could not read its "
                            "rows");
    }
    int stop = (int)r->work[len];
    if (stop != GP_MPI_GO) {
        r->stop = stop;
        return gp_error_set(err, GP_ECANCELLED, NULL, stop == GP_MPI_LOST
                                                          ? "another daemon took the job over"
                                                          : "the job was cancelled");
    }
    memcpy(buf, r->work, len * sizeof *buf);
    return GP_OK;
}

/* ---- set-up ---- */

int gp_mpi_rank_init(gp_mpi_rank *r, MPI_Comm comm, const gp_rows *shard, gp_api *api,
                     const char *job_id, const char *owner, gp_job_info *info, gp_error *err)
{
    memset(r, 0, sizeof *r);
    int rc = gp_mpi_reduce_init(&r->reduce, comm, err);
    if (rc)
        return rc;
    r->shard = shard;
    r->api = api;
    r->job_id = job_id;
    r->owner = owner;
    r->info = info;
    r->started = r->last_report = MPI_Wtime();
    r->last_poll = r->started - GP_MPI_POLL_SECONDS; /* the first reduction asks */
    gp_error_clear(&r->local);
    r->rows = *shard;
    r->rows.read = rank_read;
    r->rows.read_ctx = r;
    r->rows.allreduce = rank_allreduce;
    r->rows.reduce_ctx = r;
    return GP_OK;
}

void gp_mpi_rank_free(gp_mpi_rank *r)
{
    if (r == NULL)
        return;
    gp_mpi_reduce_free(&r->reduce);
    free(r->work);
    r->work = NULL;
}

const gp_rows *gp_mpi_rank_rows(const gp_mpi_rank *r)
{
    return &r->rows;
}

int gp_mpi_rank_ended_together(const gp_mpi_rank *r)
{
    return r->stop != GP_MPI_GO || r->remote;
}
