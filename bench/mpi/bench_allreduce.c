/* The time of one sum over ranks of an sgpr statistic (M(M+1)/2 + M doubles:
 * 131,841 at M = 512, 525,825 at M = 1024) by the three ways
 * docs/design/scale-out.md ("The reduction") weighs:
 *   ordered    gp_mpi_sum: MPI_Alltoallv, the rank-ordered sum, MPI_Allgatherv
 *   allgather  gp_mpi_sum_allgather: every buffer to every rank, summed in order
 *   allreduce  MPI_Allreduce(MPI_SUM): Open MPI's choice of algorithm (not
 *              bit-identical from one setting to another)
 *   mpirun --oversubscribe -np P build/bench/mpi/bench_allreduce [REPEATS]
 * Prints, per size and way, the median and minimum of REPEATS (default 30)
 * timed calls after 3 untimed ones (each call timed on every rank, the
 * slowest rank's time taken). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/reduce.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

enum { ORDERED, ALLGATHER, ALLREDUCE };
static const char *const way_names[] = {"ordered", "allgather", "allreduce"};

static int one_call(gp_mpi_reduce *r, int way, double *buf, double *out, size_t len)
{
    gp_error err;
    if (way == ORDERED)
        return gp_mpi_sum(r, buf, len, &err);
    if (way == ALLGATHER)
        return gp_mpi_sum_allgather(r, buf, len, &err);
    return MPI_Allreduce(buf, out, (int)len, MPI_DOUBLE, MPI_SUM, r->comm) == MPI_SUCCESS ? 0 : -1;
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int repeats = argc > 1 ? atoi(argv[1]) : 30;
    if (repeats < 1)
        repeats = 1;
    gp_mpi_reduce r;
    gp_error err;
    if (gp_mpi_reduce_init(&r, MPI_COMM_WORLD, &err) != GP_OK)
        MPI_Abort(MPI_COMM_WORLD, 1);
    /* the packed triangle, M, and the stop request of mpi/rank.c */
    const size_t sizes[] = {512 * 513 / 2 + 512 + 1, 1024 * 1025 / 2 + 1024 + 1};
    double *times = malloc((size_t)repeats * sizeof *times);
    if (r.rank == 0)
        printf("| M | doubles | p | way | median ms | min ms |\n|---|---|---|---|---|---|\n");
    for (size_t s = 0; s < 2; s++) {
        size_t len = sizes[s];
        double *buf = malloc(len * sizeof *buf), *out = malloc(len * sizeof *out);
        for (int way = ORDERED; way <= ALLREDUCE; way++) {
            for (int i = -3; i < repeats; i++) {
                for (size_t e = 0; e < len; e++)
                    buf[e] = (double)(e % 97) * 0.25 + r.rank;
                MPI_Barrier(r.comm);
                double t0 = MPI_Wtime();
                if (one_call(&r, way, buf, out, len) != 0)
                    MPI_Abort(MPI_COMM_WORLD, 1);
                double dt = MPI_Wtime() - t0, worst = 0;
                MPI_Allreduce(&dt, &worst, 1, MPI_DOUBLE, MPI_MAX, r.comm);
                if (i >= 0)
                    times[i] = worst;
            }
            qsort(times, (size_t)repeats, sizeof *times, cmp_double);
            if (r.rank == 0)
                printf("| %d | %zu | %d | %s | %.3f | %.3f |\n", s ? 1024 : 512, len, r.size,
                       way_names[way], 1e3 * times[repeats / 2], 1e3 * times[0]);
        }
        free(buf);
        free(out);
    }
    free(times);
    gp_mpi_reduce_free(&r);
    MPI_Finalize();
    return 0;
}
