/* gpserve core: which OpenBLAS core (kernel set) a process should run.
 *
 * A DYNAMIC_ARCH OpenBLAS picks its kernels from the CPU model when it loads.
 * A model it does not know (Debian 12's 0.3.21 on Sapphire Rapids, model 207)
 * gets its generic Prescott (SSE2) kernels: dgemm 3-4 times slower than the
 * CPU can do. OPENBLAS_CORETYPE, read when the library loads, overrides the
 * choice; so a program that finds a fallback core on a CPU with wider vectors
 * sets it and executes itself again (server/main.c, bench/support/blas.c).
 * The decision is this pure function of what the program saw; the caller does
 * the reading and the exec. docs/design/numerics.md "The OpenBLAS core". */
#ifndef GP_BLAS_CORE_H
#define GP_BLAS_CORE_H

#include <stddef.h>

/* The environment variables of the decision. GP_BLAS_CORE_GUARD is set before
 * the exec to the core the library had chosen itself, so the restarted
 * process never restarts again and can say what it replaced;
 * GP_BLAS_CORE_ENV=off turns the choice off (any other value: on). */
#define GP_BLAS_CORE_GUARD "GPSERVE_BLAS_CORE_RESTARTED"
#define GP_BLAS_CORE_ENV "GPSERVE_BLAS_CORE"

/* What the CPU supports (__builtin_cpu_supports on x86-64, else all 0). */
typedef struct gp_cpu_features {
    int avx512f, avx2, fma;
} gp_cpu_features;

/* What a process saw before deciding: the loaded library's core name
 * (openblas_get_corename()) and the values of OPENBLAS_CORETYPE,
 * GP_BLAS_CORE_GUARD and GP_BLAS_CORE_ENV (NULL when unset). */
typedef struct gp_blas_core_seen {
    const char *core;
    const char *coretype_env;
    const char *guard_env;
    const char *switch_env;
    gp_cpu_features cpu;
} gp_blas_core_seen;

/* The OPENBLAS_CORETYPE to restart with ("SkylakeX" on an avx512f CPU,
 * "Haswell" on avx2 + fma), or NULL to keep the current core: when the user
 * set OPENBLAS_CORETYPE, when this process is already the restarted one, when
 * the choice is switched off, or when the library's core is not one of its
 * generic fallbacks (a core it chose for a CPU it knows is kept). */
const char *gp_blas_core_choice(const gp_blas_core_seen *seen);

/* 1 when `core` (an OpenBLAS core name, case-insensitive) is one of the cores
 * older than AVX2 that OpenBLAS falls back to on a CPU it does not know. */
int gp_blas_core_is_fallback(const char *core);

/* One line for a start-up log: the core running and who chose it (the
 * library, OPENBLAS_CORETYPE from the environment, or this program in place
 * of the library's fallback), into buf (size bytes, always terminated). */
void gp_blas_core_describe(const gp_blas_core_seen *seen, char *buf, size_t size);

/* This CPU's features (x86-64 GCC: __builtin_cpu_supports; else all 0). */
gp_cpu_features gp_cpu_features_detect(void);

/* The loaded OpenBLAS's core name (openblas_get_corename()), never NULL. */
const char *gp_blas_core_name(void);

/* What this process sees now: the library's core, the environment of the
 * choice (OPENBLAS_CORETYPE, the guard, the switch) and the CPU. */
gp_blas_core_seen gp_blas_core_observe(void);

/* OpenBLAS reads OPENBLAS_THREAD_TIMEOUT and OPENBLAS_CORETYPE only when it
 * loads: its idle threads would otherwise spin ~0.1 s after each call and take
 * the cores from ours, and on a CPU model it does not know it runs its SSE2
 * fallback kernels (gp_blas_core_choice). Sets what is missing in the
 * environment and returns 1: the caller then executes itself again (the
 * daemon's and the benches' main, first thing, before any thread starts;
 * core does no exec). 0 when nothing is missing or setting it failed (the
 * process goes on as it is); the guard makes the second start return 0. */
int gp_blas_restart_prepare(void);

#endif
