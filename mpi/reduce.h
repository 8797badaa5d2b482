/* gpserve mpi: sums over the ranks of a fit that are the same bits on every
 * rank and in every run (docs/design/scale-out.md, "The reduction").
 *
 * MPI_Allreduce does not promise an order of additions: Open MPI picks its
 * algorithm by message size, process count and tuning files, and floating
 * point addition is not associative, so two runs (or two ranks) could differ
 * in the last bits. gp_mpi_sum adds in a fixed order itself and lets MPI only
 * move bytes: the buffer is cut into p blocks of fixed boundaries; an
 * MPI_Alltoallv gives rank k every rank's copy of block k; rank k adds them
 * in rank order (rank 0's value, plus rank 1's, ...); an MPI_Allgatherv hands
 * every rank every summed block. Each element is then the rank-ordered sum on
 * every rank, whatever Open MPI's settings, and the bytes moved per rank are
 * 2 (p - 1) / p of the buffer, as for the bandwidth-optimal allreduce. */
#ifndef GP_MPI_REDUCE_H
#define GP_MPI_REDUCE_H

#include <mpi.h>
#include <stddef.h>

#include "core/base/error.h"

typedef struct gp_mpi_reduce {
    MPI_Comm comm;
    int rank, size;
    double *recv; /* p copies of this rank's block */
    size_t recv_cap;
    int *counts;  /* 4 x p: send counts, send displacements, receive counts and displacements */
} gp_mpi_reduce;

/* For the processes of comm (not duplicated: the caller keeps it alive). */
int gp_mpi_reduce_init(gp_mpi_reduce *r, MPI_Comm comm, gp_error *err);
void gp_mpi_reduce_free(gp_mpi_reduce *r);

/* Block k of a buffer of len elements among p: [k len / p, (k + 1) len / p). */
size_t gp_mpi_block_start(size_t len, int p, int k);

/* buf[0 .. len) replaced on every rank by its sum over the ranks, added in
 * rank order. Every rank calls it with the same len. GP_ETOOBIG for a block
 * beyond MPI's int counts; GP_EINTERNAL when MPI fails. */
int gp_mpi_sum(gp_mpi_reduce *r, double *buf, size_t len, gp_error *err);

/* The same by MPI_Allgather of every rank's whole buffer, then the sum in
 * rank order on each rank: p - 1 buffers received per rank instead of
 * 2 (p - 1) / p of one (bench/mpi/bench_allreduce.c compares them). */
int gp_mpi_sum_allgather(gp_mpi_reduce *r, double *buf, size_t len, gp_error *err);

#endif
