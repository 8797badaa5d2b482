/* Sums over ranks in a fixed order: see mpi/reduce.h. */
#include "mpi/reduce.h"

#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

int gp_mpi_reduce_init(gp_mpi_reduce *r, MPI_Comm comm, gp_error *err)
{
    memset(r, 0, sizeof *r);
    r->comm = comm;
    if (MPI_Comm_rank(comm, &r->rank) != MPI_SUCCESS || MPI_Comm_size(comm, &r->size) != MPI_SUCCESS)
        return gp_error_set(err, GP_EINTERNAL, NULL, "MPI: cannot read the rank and size");
    r->counts = calloc(4 * (size_t)r->size, sizeof *r->counts);
    if (r->counts == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory");
    return GP_OK;
}

void gp_mpi_reduce_free(gp_mpi_reduce *r)
{
    if (r == NULL)
        return;
    free(r->recv);
    free(r->counts);
    memset(r, 0, sizeof *r);
}

size_t gp_mpi_block_start(size_t len, int p, int k)
{
    /* len * k may overflow size_t only beyond 2^64 / p elements: not a buffer. */
    return (size_t)((unsigned long long)len * (unsigned long long)k / (unsigned long long)p);
}

/* Room for n doubles in r->recv. */
static int reserve(gp_mpi_reduce *r, size_t n, gp_error *err)
{
    if (n <= r->recv_cap)
        return GP_OK;
    double *p = realloc(r->recv, n * sizeof *p);
    if (p == NULL)
        return gp_error_set(err, GP_ENOMEM, NULL, "out of memory for a reduction of %zu numbers",
                            n);
    r->recv = p;
    r->recv_cap = n;
    return GP_OK;
}

static int mpi_failed(int mrc, const char *what, gp_error *err)
{
    char text[MPI_MAX_ERROR_STRING] = "";
    int len = 0;
    MPI_Error_string(mrc, text, &len);
    return gp_error_set(err, GP_EINTERNAL, NULL, "MPI: %s failed: %s", what, text);
}

int gp_mpi_sum(gp_mpi_reduce *r, double *buf, size_t len, gp_error *err)
{
    const int p = r->size, me = r->rank;
    if (p <= 1 || len == 0)
        return GP_OK;
    /* MPI counts and displacements are ints (elements of MPI_DOUBLE): up to
     * 2^31 - 1 numbers, 16 GiB, far beyond an M x M statistic. */
    if (len > (size_t)INT_MAX - (size_t)p)
        return gp_error_set(err, GP_ETOOBIG, NULL, "a reduction of %zu numbers is beyond "
                            "MPI's counts", len);
    int *scount = r->counts, *sdisp = scount + p, *rcount = sdisp + p, *rdisp = rcount + p;
    const size_t mine = gp_mpi_block_start(len, p, me);
    const int my_count = (int)(gp_mpi_block_start(len, p, me + 1) - mine);
    for (int k = 0; k < p; k++) {
        size_t lo = gp_mpi_block_start(len, p, k);
        scount[k] = (int)(gp_mpi_block_start(len, p, k + 1) - lo);
        sdisp[k] = (int)lo;
        rcount[k] = my_count;
        rdisp[k] = k * my_count; /* < p (len / p + 1) <= len + p */
    }
    int rc = reserve(r, (size_t)p * (size_t)my_count + 1, err);
    if (rc)
        return rc;
    int mrc = MPI_Alltoallv(buf, scount, sdisp, MPI_DOUBLE, r->recv, rcount, rdisp, MPI_DOUBLE,
                            r->comm);
    if (mrc != MPI_SUCCESS)
        return mpi_failed(mrc, "MPI_Alltoallv", err);
    /* Rank order, element by element: out = r0 + r1 + ... (left to right). */
    double *out = buf + mine;
    memcpy(out, r->recv, (size_t)my_count * sizeof *out);
    for (int j = 1; j < p; j++) {
        const double *src = r->recv + (size_t)j * (size_t)my_count;
        for (int e = 0; e < my_count; e++)
            out[e] += src[e];
    }
    mrc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, buf, scount, sdisp, MPI_DOUBLE,
                         r->comm);
    return mrc == MPI_SUCCESS ? GP_OK : mpi_failed(mrc, "MPI_Allgatherv", err);
}

int gp_mpi_sum_allgather(gp_mpi_reduce *r, double *buf, size_t len, gp_error *err)
{
    const int p = r->size;
    if (p <= 1 || len == 0)
        return GP_OK;
    if (len > INT_MAX || len > SIZE_MAX / sizeof(double) / (size_t)p)
        return gp_error_set(err, GP_ETOOBIG, NULL, "a reduction of %zu numbers is beyond "
                            "MPI's counts", len);
    int rc = reserve(r, (size_t)p * len, err);
    if (rc)
        return rc;
    int mrc = MPI_Allgather(buf, (int)len, MPI_DOUBLE, r->recv, (int)len, MPI_DOUBLE, r->comm);
    if (mrc != MPI_SUCCESS)
        return mpi_failed(mrc, "MPI_Allgather", err);
    memcpy(buf, r->recv, len * sizeof *buf);
    for (int j = 1; j < p; j++) {
        const double *src = r->recv + (size_t)j * len;
        for (size_t e = 0; e < len; e++)
            buf[e] += src[e];
    }
    return GP_OK;
}
