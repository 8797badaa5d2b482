/* What a sharded fit spent: see mpi/stats.h. */
#include "mpi/stats.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>

#include "core/base/error.h"

/* This process's peak resident set (getrusage: kilobytes on Linux), MB. */
static double peak_rss_mb(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 0.0;
    return (double)ru.ru_maxrss / 1024.0;
}

enum { M_ROWS, M_NEG_ROWS, M_READ, M_REDUCE, M_RSS, M_COUNT };

/* x / n, or JSON null without n. */
static json_t *per(double x, int n)
{
    return n > 0 ? json_real(x / n) : json_null();
}

/* Rank 0's line: mine its own figures, max the largest over ranks. */
static json_t *line(const gp_mpi_stats *s, int ranks, const double *mine, const double *max,
                    double seconds)
{
    const gp_mpi_rank *r = s->rank;
    double doubles = r ? r->doubles_reduced : 0.0;
    json_t *o = json_object();
    json_object_set_new(o, "method", s->method ? json_string(s->method) : json_null());
    json_object_set_new(o, "status", json_string(s->status ? s->status : "failed"));
    json_object_set_new(o, "ranks", json_integer(ranks));
    json_object_set_new(o, "rows", json_integer((json_int_t)s->rows_total));
    json_object_set_new(o, "rows_per_rank_min", json_integer((json_int_t)-max[M_NEG_ROWS]));
    json_object_set_new(o, "rows_per_rank_max", json_integer((json_int_t)max[M_ROWS]));
    json_object_set_new(o, "chunk", json_integer((json_int_t)s->chunk));
    json_object_set_new(o, "evaluations", json_integer(s->evaluations));
    json_object_set_new(o, "iterations", json_integer(s->iterations));
    json_object_set_new(o, "seconds", json_real(seconds));
    json_object_set_new(o, "fit_seconds", json_real(s->fit_seconds));
    json_object_set_new(o, "seconds_per_evaluation", per(s->fit_seconds, s->evaluations));
    json_object_set_new(o, "reductions", json_integer(r ? (json_int_t)r->reductions : 0));
    json_object_set_new(o, "doubles_reduced", json_integer((json_int_t)doubles));
    json_object_set_new(o, "doubles_per_evaluation", per(doubles, s->evaluations));
    json_object_set_new(o, "bytes_per_evaluation", per(8.0 * doubles, s->evaluations));
    json_object_set_new(o, "reduce_seconds", json_real(mine[M_REDUCE]));
    json_object_set_new(o, "reduce_seconds_max", json_real(max[M_REDUCE]));
    json_object_set_new(o, "read_seconds", json_real(mine[M_READ]));
    json_object_set_new(o, "read_seconds_max", json_real(max[M_READ]));
    json_object_set_new(o, "peak_rss_mb", json_real(mine[M_RSS]));
    json_object_set_new(o, "peak_rss_mb_max", json_real(max[M_RSS]));
    return o;
}

int gp_mpi_stats_report(MPI_Comm comm, const gp_mpi_stats *s)
{
    int rank = 0, ranks = 1;
    MPI_Comm_rank(comm, &rank);
    MPI_Comm_size(comm, &ranks);
    /* One reduction: the minimum of the rows is the maximum of their negation. */
    double mine[M_COUNT] = {(double)s->rows, -(double)s->rows,
                            s->rank ? s->rank->read_seconds : 0.0,
                            s->rank ? s->rank->reduce_seconds : 0.0, peak_rss_mb()};
    double max[M_COUNT];
    if (MPI_Reduce(mine, max, M_COUNT, MPI_DOUBLE, MPI_MAX, 0, comm) != MPI_SUCCESS)
        return GP_EINTERNAL;
    if (rank != 0)
        return GP_OK;
    json_t *o = line(s, ranks, mine, max, MPI_Wtime() - s->started);
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (text == NULL)
        return GP_EINTERNAL;
    printf("%s\n", text);
    fflush(stdout);
    free(text);
    return GP_OK;
}
