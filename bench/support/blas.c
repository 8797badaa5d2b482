/* See blas.h. The same decision as the daemon's (gp_blas_core_choice); the
 * restart is repeated here because bench programs do not link server/. */
#include "bench/support/blas.h"

#include <stdlib.h>
#include <unistd.h>

#include "core/base/blas_core.h"

static gp_blas_core_seen seen_now(void)
{
    gp_blas_core_seen seen = {gp_blas_core_name(), getenv("OPENBLAS_CORETYPE"),
                              getenv(GP_BLAS_CORE_GUARD), getenv(GP_BLAS_CORE_ENV),
                              gp_cpu_features_detect()};
    return seen;
}

void gp_bench_blas_setup(char **argv)
{
    gp_blas_core_seen seen = seen_now();
    const char *core = gp_blas_core_choice(&seen);
    int timeout = getenv("OPENBLAS_THREAD_TIMEOUT") == NULL;
    if (core == NULL && !timeout)
        return;
    if (timeout && setenv("OPENBLAS_THREAD_TIMEOUT", "16", 1) != 0)
        return;
    if (core != NULL && (setenv(GP_BLAS_CORE_GUARD, seen.core, 1) != 0 ||
                         setenv("OPENBLAS_CORETYPE", core, 1) != 0))
        return;
    execv("/proc/self/exe", argv);
}

void gp_bench_blas_line(char *buf, size_t size)
{
    gp_blas_core_seen seen = seen_now();
    gp_blas_core_describe(&seen, buf, size);
}
