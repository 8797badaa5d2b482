/* gpserve mpi: what a sharded fit spent, for gpserve-fit --stats
 * (docs/design/scale-out.md, "What a run costs: --stats").
 *
 * Every rank counts its reads and reductions as it goes (mpi/rank.h: the
 * clock around each call, nothing more); at the end one reduction gathers
 * the maxima over ranks (rows, seconds, peak RSS) and rank 0 prints one JSON
 * line on stdout, the last of its output, e.g. for bench/scale_fit.py:
 *
 *   {"method":"sgpr","status":"saved","ranks":2,"rows":100000,
 *    "rows_per_rank_min":50000,"rows_per_rank_max":50000,"chunk":4096,
 *    "evaluations":7,"iterations":5,"seconds":...,"fit_seconds":...,
 *    "seconds_per_evaluation":...,"reductions":...,"doubles_reduced":...,
 *    "doubles_per_evaluation":...,"bytes_per_evaluation":...,
 *    "reduce_seconds":...,"reduce_seconds_max":...,"read_seconds":...,
 *    "read_seconds_max":...,"peak_rss_mb":...,"peak_rss_mb_max":...}
 *
 * Plain keys are rank 0's own (its clock, its shard's reads); _max the
 * largest over ranks. evaluations and iterations are the model's
 * diagnostics (0 when the fit did not end with a model); the per-evaluation
 * figures divide rank 0's totals by them (null without), so they include
 * the reductions made before the optimiser starts (the standardisation, the
 * candidates of Z). */
#ifndef GP_MPI_STATS_H
#define GP_MPI_STATS_H

#include <mpi.h>
#include <stddef.h>

#include "mpi/rank.h"

typedef struct gp_mpi_stats {
    const char *method;           /* the fit's method, or NULL before its request was read */
    const char *status;           /* saved | failed | cancelled | lost | usage */
    double started;               /* MPI_Wtime() at the start of the run */
    double fit_seconds;           /* this rank's wall time in the fit (0: not reached) */
    int evaluations, iterations;  /* the model's diagnostics (0: no model) */
    size_t rows, rows_total, chunk; /* this rank's shard (0: none was opened) */
    const gp_mpi_rank *rank;      /* its counters, or NULL when it was not set up */
} gp_mpi_stats;

/* Collective over comm (every rank calls it with its own s): rank 0 prints
 * the line. GP_OK, or GP_EINTERNAL when MPI fails (nothing printed). */
int gp_mpi_stats_report(MPI_Comm comm, const gp_mpi_stats *s);

#endif
