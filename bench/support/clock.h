/* Benchmark support: wall-clock seconds for timing (CLOCK_MONOTONIC). */
#ifndef GP_BENCH_CLOCK_H
#define GP_BENCH_CLOCK_H

double gp_bench_seconds(void);

#endif
