/* See clock.h. */
#include "bench/support/clock.h"

#include <time.h>

double gp_bench_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
