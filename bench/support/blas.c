/* See blas.h: the daemon's restart (core/base/blas_core.h), so benches run
 * the OpenBLAS core the daemon runs. */
#include "bench/support/blas.h"

#include <unistd.h>

#include "core/base/blas_core.h"

void gp_bench_blas_setup(char **argv)
{
    if (gp_blas_restart_prepare())
        execv("/proc/self/exe", argv); /* on failure, go on as we are */
}

void gp_bench_blas_line(char *buf, size_t size)
{
    gp_blas_core_seen seen = gp_blas_core_observe();
    gp_blas_core_describe(&seen, buf, size);
}
