/* The deterministic sum over ranks (mpi/reduce.c), run under
 *   mpirun --oversubscribe -np P build/tests/mpi/test_reduce
 * by the integration area mpi (tests/integration/t_mpi.sh) with P = 1, 2, 4.
 *
 * A sequence x_0 .. x_{N-1} of doubles of mixed signs and magnitudes (so that
 * the order of additions shows in the bits) is cut into P shards at fixed
 * boundaries; each rank sums its shard per slot, and gp_mpi_sum adds the
 * partial sums. Checked on every rank, exactly:
 *   - the result is the partial sums added in rank order (each rank can make
 *     every shard's partial sum itself: the sequence is a pure function);
 *   - every rank holds the same bits (their hashes gathered and compared);
 *   - gp_mpi_sum_allgather gives the same bits;
 * and to rounding: the result is the sequential sum of the whole sequence.
 * Rank 0 prints one line per case with the hash of the result, which the
 * area compares between two runs of the same P (bit-identical runs).
 * Exit status 0 when every check passed. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/reduce.h"

/* Slots of the statistic (the reduced vector), and terms summed into each. */
static const size_t lens[] = {1, 3, 7, 1000, 131841};
#define TERMS 64

static int failures;

static void check(int ok, int rank, const char *what, size_t len)
{
    if (!ok) {
        fprintf(stderr, "test_reduce: rank %d: len %zu: %s\n", rank, len, what);
        failures++;
    }
}

/* splitmix64: term t of slot e, a double in about +-1e6 .. +-1e-6. */
static double term(size_t e, size_t t)
{
    uint64_t z = (uint64_t)e * 0x9E3779B97F4A7C15ULL + (uint64_t)t * 0xD1B54A32D192ED03ULL + 1;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    double u = (double)(z >> 11) / 9007199254740992.0; /* [0, 1) */
    double mag = pow(10.0, (double)((z >> 3) % 13) - 6.0);
    return (z & 1 ? -u : u) * mag;
}

/* Shard k of P over TERMS terms: [k TERMS / P, (k + 1) TERMS / P). */
static void partial(size_t len, int k, int p, double *out)
{
    size_t lo = (size_t)k * TERMS / (size_t)p, hi = (size_t)(k + 1) * TERMS / (size_t)p;
    for (size_t e = 0; e < len; e++) {
        double s = 0.0;
        for (size_t t = lo; t < hi; t++)
            s += term(e, t);
        out[e] = s;
    }
}

static uint64_t hash_bits(const double *v, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++) {
        uint64_t b;
        memcpy(&b, &v[i], sizeof b);
        for (int k = 0; k < 8; k++) {
            h ^= (b >> (8 * k)) & 0xff;
            h *= 1099511628211ULL;
        }
    }
    return h;
}

static void run_case(gp_mpi_reduce *r, size_t len)
{
    const int p = r->size, me = r->rank;
    double *buf = malloc(len * sizeof *buf), *want = calloc(len, sizeof *want);
    double *part = malloc(len * sizeof *part), *seq = calloc(len, sizeof *seq);
    double *again = malloc(len * sizeof *again);
    if (!buf || !want || !part || !seq || !again) {
        check(0, me, "out of memory", len);
        goto out;
    }
    partial(len, me, p, buf);
    memcpy(again, buf, len * sizeof *again);
    /* The rank-ordered sum of the partials, made here without MPI. */
    for (int k = 0; k < p; k++) {
        partial(len, k, p, part);
        for (size_t e = 0; e < len; e++)
            want[e] = k == 0 ? part[e] : want[e] + part[e];
    }
    partial(len, 0, 1, seq); /* one shard: the sequential sum */
    gp_error err;
    gp_error_clear(&err);
    check(gp_mpi_sum(r, buf, len, &err) == GP_OK, me, err.message, len);
    check(memcmp(buf, want, len * sizeof *buf) == 0, me,
          "gp_mpi_sum is not the partial sums added in rank order", len);
    check(gp_mpi_sum_allgather(r, again, len, &err) == GP_OK, me, err.message, len);
    check(memcmp(buf, again, len * sizeof *buf) == 0, me,
          "gp_mpi_sum and gp_mpi_sum_allgather differ", len);
    double worst = 0.0;
    for (size_t e = 0; e < len; e++) {
        double scale = 0.0;
        for (size_t t = 0; t < TERMS; t++)
            scale += fabs(term(e, t));
        double rel = fabs(buf[e] - seq[e]) / (scale > 0 ? scale : 1.0);
        worst = rel > worst ? rel : worst;
    }
    /* Two orders of TERMS additions differ by at most about 2 TERMS eps of
     * the sum of magnitudes. */
    check(worst <= 2.0 * TERMS * 2.220446049250313e-16, me,
          "not the sequential sum to rounding", len);
    uint64_t h = hash_bits(buf, len);
    uint64_t *all = malloc((size_t)p * sizeof *all);
    if (all && MPI_Allgather(&h, 1, MPI_UINT64_T, all, 1, MPI_UINT64_T, r->comm) == MPI_SUCCESS) {
        for (int k = 0; k < p; k++)
            check(all[k] == h, me, "ranks hold different bits", len);
    } else {
        check(0, me, "cannot gather the hashes", len);
    }
    free(all);
    if (me == 0)
        printf("reduce p=%d len=%zu bits=%016llx worst_rel=%.3g\n", p, len,
               (unsigned long long)h, worst);
out:
    free(buf);
    free(want);
    free(part);
    free(seq);
    free(again);
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    gp_mpi_reduce r;
    gp_error err;
    gp_error_clear(&err);
    if (gp_mpi_reduce_init(&r, MPI_COMM_WORLD, &err) != GP_OK) {
        fprintf(stderr, "test_reduce: %s\n", err.message);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++)
        run_case(&r, lens[i]);
    int mine = failures, total = 0;
    MPI_Allreduce(&mine, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (r.rank == 0)
        printf("test_reduce: %d ranks, %s\n", r.size, total ? "FAILED" : "ok");
    gp_mpi_reduce_free(&r);
    MPI_Finalize();
    return total ? 1 : 0;
}
