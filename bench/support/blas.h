/* Benchmark support: run OpenBLAS as the daemon does.
 *
 * gp_bench_blas_setup(argv), first thing in main: the daemon's restart for
 * OPENBLAS_CORETYPE and OPENBLAS_THREAD_TIMEOUT (server/main.c,
 * core/base/blas_core.h), so that a benchmark measures the kernels the daemon
 * runs on this CPU. gp_bench_blas_line: the core line for a report. */
#ifndef GP_BENCH_BLAS_H
#define GP_BENCH_BLAS_H

#include <stddef.h>

void gp_bench_blas_setup(char **argv);
void gp_bench_blas_line(char *buf, size_t size);

#endif
